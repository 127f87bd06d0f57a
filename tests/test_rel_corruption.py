"""Corruption (issue 7): random single-byte flips in the data file and the
log of a reference database are each detected -- DataCorruptionDetected
(301) on the read that meets the damage, or an error at open naming the
damaged file -- or are harmless (every read returns exactly the reference
data).  Never wrong data, never a crash, never a hang.

The reference database is built once by a child process: three collections
with secondary indexes and documents that fill many leaf pages and some
overflow runs, a clean close (a checkpoint), then more inserts, updates and
deletes, and a SIGKILL -- so the log holds acknowledged records the data
file does not.

Cases run in a worker subprocess (``python test_rel_corruption.py
--worker``) that takes cases one by one from its stdin: copy the reference
image, flip one byte, open it, read everything, close, answer one JSON line.
The parent gives each case 5 s; a worker that dies or hangs is counted as a
failure and replaced.  ``--flips N`` sets the count (500 by default).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DB = "rel"
CASE_TIMEOUT = 5.0
CORRUPTION = 301  # DataCorruptionDetected


# --------------------------------------------------------------- the worker

def _collect(srv, cmd, batch):
    """Every document of a find or aggregate cursor, as BSON bytes."""
    import bson
    reply = srv.command(DB, cmd)
    cur = reply["cursor"]
    docs = [bson.encode(d) for d in cur["firstBatch"]]
    coll = cmd.get("find") or cmd.get("aggregate")
    while cur["id"]:
        reply = srv.command(DB, {"getMore": cur["id"], "collection": coll, "batchSize": batch})
        cur = reply["cursor"]
        docs.extend(bson.encode(d) for d in cur["nextBatch"])
    return docs


def _digest(parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(4, "little"))
        h.update(p)
    return h.hexdigest()


def read_everything(srv) -> dict:
    """Each read of the database, named, with its result's digest or its
    error code.  A read that fails does not stop the others."""
    import bson
    from multifora.server import CommandError

    steps: dict = {}

    def step(name, fn):
        try:
            steps[name] = {"ok": fn()}
        except CommandError as e:
            steps[name] = {"code": e.code, "msg": str(e)[:300]}
        return steps[name]

    names = step("listCollections", lambda: sorted(
        c["name"] for c in srv.command(DB, {"listCollections": 1})["cursor"]["firstBatch"]))
    for coll in names.get("ok", []):
        idx = step(f"{coll}.listIndexes", lambda: [
            bson.encode(i) for i in srv.command(DB, {"listIndexes": coll})["cursor"]["firstBatch"]])
        if "ok" in idx:
            idx["ok"] = _digest(idx["ok"])
            specs = srv.command(DB, {"listIndexes": coll})["cursor"]["firstBatch"]
        else:
            specs = []
        step(f"{coll}.scan", lambda: _digest(_collect(
            srv, {"find": coll, "filter": {}, "batchSize": 400}, 400)))
        step(f"{coll}.count", lambda: srv.command(DB, {"count": coll})["n"])
        for spec in specs:
            name = spec["name"]
            step(f"{coll}.hint.{name}", lambda: _digest(_collect(
                srv, {"find": coll, "filter": {}, "hint": name, "batchSize": 400}, 400)))

        def validate():
            r = srv.command(DB, {"validate": coll, "full": True})
            return {k: r[k] for k in ("valid", "nrecords", "nIndexes", "keysPerIndex",
                                      "errors") if k in r}
        step(f"{coll}.validate", validate)
    return steps


def run_case(ref: Path, scratch: Path, case: dict) -> dict:
    """Copy the reference image, flip `case`'s byte, open, read, close."""
    from multifora import Server
    from multifora._core import MultiforaError

    if scratch.exists():
        shutil.rmtree(scratch)
    shutil.copytree(ref, scratch)
    if case.get("append_zeros"):
        with open(scratch / case["file"], "ab") as f:
            f.write(bytes(case["append_zeros"]))
    if case.get("mask"):
        with open(scratch / case["file"], "r+b") as f:
            f.seek(case["offset"])
            b = f.read(1)[0]
            f.seek(case["offset"])
            f.write(bytes([b ^ case["mask"]]))
    try:
        srv = Server(str(scratch), port=None, unix_socket=str(scratch / "s.sock"))
    except MultiforaError as e:
        return {"open": str(e), "open_code": getattr(e, "code", None)}
    try:
        steps = read_everything(srv)
    finally:
        srv.stop()
    return {"open": None, "steps": steps}


def worker_main(ref: str, scratch: str) -> None:
    for line in sys.stdin:
        case = json.loads(line)
        out = run_case(Path(ref), Path(scratch), case)
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


# ----------------------------------------------------- the reference builder

def build_reference(dbpath: str) -> None:
    """Phase 1 writes and closes cleanly (a checkpoint); phase 2 writes
    more and kills itself, leaving those records only in the log."""
    import bson
    from multifora import Server

    rnd = random.Random(7)

    def ok(srv, cmd):
        r = srv.command(DB, cmd)
        assert r["ok"] == 1 and not r.get("writeErrors"), r

    srv = Server(dbpath, port=None, unix_socket=os.path.join(dbpath, "..", "b.sock"))
    for coll, n in (("people", 1500), ("blobs", 40), ("tags", 300)):
        ok(srv, {"create": coll})
    ok(srv, {"createIndexes": "people", "indexes": [
        {"key": {"age": 1}, "name": "age_1"},
        {"key": {"city": 1, "name": -1}, "name": "city_1_name_-1"},
        {"key": {"email": 1}, "name": "email_1", "unique": True}]})
    ok(srv, {"createIndexes": "blobs", "indexes": [{"key": {"k": 1}, "name": "k_1"}]})
    ok(srv, {"createIndexes": "tags", "indexes": [{"key": {"t": 1}, "name": "t_1"}]})
    cities = ["Oslo", "Lima", "Pune", "Kyiv", "Hanoi", "Quito", "Accra"]

    def person(i):
        return {"_id": i, "name": f"person-{i:05d}-" + "x" * rnd.randrange(5, 60),
                "age": rnd.randrange(1, 99), "city": rnd.choice(cities),
                "email": f"p{i}@example.org", "score": rnd.random(),
                "big": bson.Int64(rnd.randrange(1, 1 << 60)),
                "tags": [rnd.choice(cities) for _ in range(rnd.randrange(0, 4))]}

    def blob(i):  # 6-20 KiB: overflow runs; printable, no zero sectors
        return {"_id": f"b{i}", "k": i, "data": "".join(
            rnd.choice("abcdefghij") for _ in range(rnd.randrange(6000, 20000)))}

    for lo in range(0, 1200, 300):
        ok(srv, {"insert": "people", "documents": [person(i) for i in range(lo, lo + 300)]})
    ok(srv, {"insert": "blobs", "documents": [blob(i) for i in range(30)]})
    ok(srv, {"insert": "tags", "documents": [
        {"_id": bson.ObjectId(), "t": f"tag{i % 50}", "n": i} for i in range(200)]})
    srv.stop()  # a clean close: checkpoint

    srv = Server(dbpath, port=None, unix_socket=os.path.join(dbpath, "..", "b.sock"))
    ok(srv, {"insert": "people", "documents": [person(i) for i in range(1200, 1500)]})
    ok(srv, {"update": "people", "updates": [
        {"q": {"age": {"$lt": 20}}, "u": {"$inc": {"age": 100}, "$set": {"moved": True}},
         "multi": True}]})
    ok(srv, {"delete": "people", "deletes": [{"q": {"city": "Lima"}, "limit": 0}]})
    ok(srv, {"insert": "blobs", "documents": [blob(i) for i in range(30, 40)]})
    ok(srv, {"delete": "blobs", "deletes": [{"q": {"k": {"$lt": 5}}, "limit": 0}]})
    ok(srv, {"insert": "tags", "documents": [
        {"_id": bson.ObjectId(), "t": f"tag{i % 50}", "n": i} for i in range(200, 300)]})
    ok(srv, {"update": "tags", "updates": [
        {"q": {"n": {"$gte": 250}}, "u": {"$set": {"t": "late"}}, "multi": True}]})
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


# ------------------------------------------------------------ the harness

class Worker:
    def __init__(self, ref: Path, scratch: Path):
        env = dict(os.environ)  # the multifora the tests import: installed, or PYTHONPATH's
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(ref), str(scratch)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=env)

    def run(self, case: dict, timeout: float):
        """The case's result, or ("crash", rc) / ("hang", None)."""
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.kill()
            return "hang", None
        line = self.proc.stdout.readline()
        if not line:
            return "crash", self.proc.wait(timeout=30)
        return "ok", json.loads(line)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        self.proc.stdout.close()


def scratch_root() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


@pytest.fixture(scope="module")
def reference():
    root = Path(tempfile.mkdtemp(prefix="mf-corrupt-", dir=scratch_root()))
    ref = root / "ref"
    ref.mkdir()
    env = dict(os.environ)  # the multifora the tests import: installed, or PYTHONPATH's
    p = subprocess.run([sys.executable, __file__, "--build", str(ref)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr[-2000:])
    yield root, ref
    shutil.rmtree(root, ignore_errors=True)


def files_of(ref: Path):
    """(data file, [log segments]) with their sizes."""
    data = ("data.mf", (ref / "data.mf").stat().st_size)
    logs = sorted((p.name, p.stat().st_size) for p in ref.iterdir() if p.name.startswith("wal."))
    return data, logs


def region(ref: Path, name: str, offset: int) -> str:
    """What the flipped byte was, in the reference image (for the report)."""
    if name != "data.mf":
        return "log"
    page = offset // 4096
    if page < 2:
        return "meta"
    with open(ref / name, "rb") as f:
        f.seek(page * 4096)
        head = f.read(32)
    kind = {1: "leaf", 2: "branch", 4: "freelist"}.get(head[16], "other")
    return kind


def classify(ref_steps: dict, out: dict) -> tuple:
    """("open" | "read" | "harmless" | "failure", detail)."""
    if out["open"] is not None:
        msg = out["open"]
        if "data.mf" in msg or "wal." in msg:
            return "open", msg
        return "failure", "open error not naming the file: " + msg
    steps = out["steps"]
    detected = []
    for name, ref in ref_steps.items():
        got = steps.get(name)
        if got is None:
            if "listCollections" in detected or any(k.endswith("listIndexes") for k in detected):
                continue  # not reached because an earlier listing failed with 301
            return "failure", f"{name}: not run"
        if "code" in got:
            if got["code"] != CORRUPTION:
                return "failure", f"{name}: code {got['code']}: {got['msg']}"
            detected.append(name)
        elif name.endswith(".validate") and got["ok"].get("valid") is False:
            detected.append(name)
        elif got != ref:
            return "failure", f"{name}: wrong data {got} != {ref}"
    extra = set(steps) - set(ref_steps)
    if extra:
        return "failure", f"unexpected reads {sorted(extra)}"
    if detected:
        return "read", detected[0]
    return "harmless", None


@pytest.fixture(scope="module")
def ref_steps(reference):
    """The reads of the undamaged reference image, through a worker."""
    root, ref = reference
    worker = Worker(ref, root / "base")
    status, base = worker.run({"file": None}, 30.0)
    worker.close()
    assert status == "ok" and base["open"] is None, (status, base)
    steps = base["steps"]
    for name, s in steps.items():
        assert "ok" in s, (name, s)
    return steps


def run_one(reference, case):
    root, ref = reference
    worker = Worker(ref, root / "one")
    status, out = worker.run(case, CASE_TIMEOUT)
    if status == "ok":
        worker.close()
    return status, out


def test_damaged_overflow_run_fails_the_read_with_301(reference, ref_steps):
    """Regression: a flipped byte inside a large document's overflow run
    (the blobs are letters a-j, so a page of nothing else is inside one)
    aborted the server in bson_init_static: the cursor handed out the NULL
    of the failed run check.  Now the read that meets it gets 301, and
    every other read returns the reference data."""
    root, ref = reference
    img = (ref / "data.mf").read_bytes()
    letters = set(b"abcdefghij")
    pages = [p for p in range(2, len(img) // 4096)
             if set(img[p * 4096:(p + 1) * 4096]) <= letters]
    assert len(pages) > 20
    # A run the log replay touches (a deleted blob) is met at open; one it
    # does not, on the read.  Every one is detected; find one of the latter.
    worker = Worker(ref, root / "one")
    kinds = []
    for page in pages[::max(1, len(pages) // 12)]:
        status, out = worker.run({"file": "data.mf", "offset": page * 4096 + 1000,
                                  "mask": 0x20}, CASE_TIMEOUT)
        assert status == "ok", (page, status, out)
        kind, detail = classify(ref_steps, out)
        assert kind in ("open", "read"), (page, kind, detail)
        kinds.append(kind)
        if kind == "read":
            break
    worker.close()
    assert kinds[-1] == "read", kinds
    scan = out["steps"]["blobs.scan"]
    assert scan["code"] == CORRUPTION and "checksum mismatch" in scan["msg"], scan
    assert out["steps"]["people.scan"] == ref_steps["people.scan"]


def last_segment(ref: Path) -> str:
    return files_of(ref)[1][-1][0]


def test_flip_in_the_whole_last_log_block_is_detected_at_open(reference, ref_steps):
    """Regression: a flipped byte in the last log block (whole, written and
    acknowledged) was taken for a torn write and cut off, dropping the
    acknowledged writes it held (the tags updated to "late" came back
    unchanged).  Now the open fails naming the log file."""
    root, ref = reference
    seg = last_segment(ref)
    size = (ref / seg).stat().st_size
    for back in (1, 40, 300):
        status, out = run_one(reference, {"file": seg, "offset": size - back, "mask": 0x01})
        assert status == "ok", (status, out)
        assert out["open"] is not None, classify(ref_steps, out)
        assert seg in out["open"] and "in the last block, which is whole" in out["open"], out
        assert out["open_code"] == CORRUPTION, out


def test_zero_sectors_after_the_log_are_a_torn_tail(reference, ref_steps):
    """What a crash can leave after the last acknowledged block -- sectors
    the file covers that were never written -- is cut off at open, and the
    data is exactly the reference."""
    root, ref = reference
    status, out = run_one(reference, {"file": last_segment(ref), "append_zeros": 4096})
    assert status == "ok", (status, out)
    assert classify(ref_steps, out) == ("harmless", None)


def test_corruption_flips(reference, request):
    root, ref = reference
    flips = request.config.getoption("--flips")
    seed = request.config.getoption("--flip-seed")
    rnd = random.Random(seed)
    scratch = root / "case"
    (data_name, data_size), logs = files_of(ref)
    assert logs, "the reference has no log segment"
    log_bytes = sum(s for _, s in logs)

    worker = Worker(ref, scratch)
    t0 = time.monotonic()
    status, base = worker.run({"file": None}, 30.0)
    assert status == "ok" and base["open"] is None, (status, base)
    ref_steps = base["steps"]
    for name, s in ref_steps.items():
        assert "ok" in s, (name, s)
    # The log held records the data file did not: the reference reads
    # include the phase-2 writes (1,500 people minus the Lima ones).
    assert ref_steps["people.validate"]["ok"]["valid"] is True
    assert 1200 < ref_steps["people.count"]["ok"] < 1500
    assert ref_steps["tags.count"]["ok"] == 300
    assert ref_steps["blobs.count"]["ok"] == 35

    counts = {"open": 0, "read": 0, "harmless": 0, "failure": 0}
    by_region: dict = {}
    failures = []
    for i in range(flips):
        if rnd.random() < 0.5:
            name, offset = data_name, rnd.randrange(data_size)
        else:
            at = rnd.randrange(log_bytes)
            for name, size in logs:
                if at < size:
                    offset = at
                    break
                at -= size
        case = {"file": name, "offset": offset, "mask": 1 << rnd.randrange(8) if rnd.random() < 0.5
                else rnd.randrange(1, 256)}
        status, out = worker.run(case, CASE_TIMEOUT)
        if status != "ok":
            kind, detail = "failure", f"{status} (rc {out})"
            worker = Worker(ref, scratch)
        else:
            kind, detail = classify(ref_steps, out)
        counts[kind] += 1
        reg = region(ref, name, offset)
        by_region.setdefault(reg, {"open": 0, "read": 0, "harmless": 0, "failure": 0})[kind] += 1
        if kind == "failure":
            failures.append((case, detail))
    worker.close()
    elapsed = time.monotonic() - t0
    report = (f"\ncorruption: {flips} flips (seed {seed}) in {elapsed:.1f} s: "
              f"detected at open {counts['open']}, detected on read {counts['read']}, "
              f"harmless {counts['harmless']}, failures {counts['failure']}\n"
              f"  files: data.mf {data_size} bytes, log {log_bytes} bytes in {len(logs)} segment(s)\n"
              f"  by region: {json.dumps(by_region, sort_keys=True)}")
    print(report)
    assert not failures, report + "\n" + "\n".join(json.dumps(f) for f in failures[:20])


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker_main(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "--build":
        build_reference(sys.argv[2])
