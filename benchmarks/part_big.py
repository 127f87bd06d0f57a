"""big: a database of N bytes of 16 KiB documents, killed with SIGKILL and reopened.

One MultiforaDB server process (multifora.Server in a process of its own)
over a fresh directory in ctx.workdir; one pymongo client in this process.

  1. Load SIZE/4 of documents {_id: i, p: <16,362 random bytes>} (exactly
     16,384 BSON bytes each, incompressible) with insert_many in batches of
     512 (8 MiB).  Each batch is timed: the load row is MB/s per batch.
  2. 200 single acknowledged insert_one calls, then kill -9 ("after load").
     Reopen: the count must be exactly the acknowledged documents and the
     last one byte-identical.
  3. kill -9 and reopen again, REOPENS times in all: the open time at this
     size, RSS right after the open (before any query touches the data).
  4. Load on to SIZE, then start another insert_many in a thread and kill -9
     while it runs ("during load").  Reopen: the count must lie between the
     acknowledged documents and those plus the batch in flight, the _ids
     must run 0..count-1 with no gap, and the last document present must be
     byte-identical to what was sent.
  5. As 3, at SIZE.  Reopen at SIZE/4 and at SIZE side by side shows whether
     the open is flat in the size of the database.

Open time is measured inside the server's process, around Server() and
start(), after its Python imports; the note also gives the wall time from
spawning the process to its first answered ping.

SIZE: ctx.size (run.py --size), else $MF_BENCH_BIG_SIZE, else 4g in --full
and 64m in quick mode ("20g", "512m", ...).  Disk: about SIZE x 1.1.
"""
from __future__ import annotations

import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import List, Optional

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import _drvlib  # noqa: E402

DOC_BYTES = 16_384
PAYLOAD = DOC_BYTES - 22   # {_id: int32, p: binary}: 4 + (1+4+4) + (1+2+4+1) + 1 bytes around p
BATCH = 512
ACKED_SINGLES = 200


def make_doc(i: int, payload: Optional[bytes] = None) -> dict:
    import bson
    doc = {"_id": i, "p": bson.Binary(payload if payload is not None else os.urandom(PAYLOAD))}
    return doc


def load(coll, first: int, count: int, times: List[float]) -> bytes:
    """Insert documents first .. first+count-1 in batches; append each
    batch's MB/s to ``times``; return the last document's payload."""
    clock = time.perf_counter
    last = b""
    i = first
    while i < first + count:
        n = min(BATCH, first + count - i)
        docs = [make_doc(k) for k in range(i, i + n)]
        t = clock()
        coll.insert_many(docs, ordered=True)
        times.append(n * DOC_BYTES / 1e6 / (clock() - t))
        last = bytes(docs[-1]["p"])
        i += n
    return last


class Writer(threading.Thread):
    """insert_many batches until the server dies; remembers what was acknowledged."""

    def __init__(self, uri: str, first: int):
        super().__init__(daemon=True)
        import pymongo
        self.client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=500)
        self.first = first
        self.acked = 0               # documents acknowledged
        self.inflight: List[bytes] = []   # payloads of the batch being sent
        self.last_acked = b""
        self.error = ""

    def run(self) -> None:
        coll = self.client.bench.big
        try:
            while True:
                start = self.first + self.acked
                docs = [make_doc(k) for k in range(start, start + BATCH)]
                self.inflight = [bytes(d["p"]) for d in docs]
                coll.insert_many(docs, ordered=True)
                self.last_acked = self.inflight[-1]
                self.acked += BATCH
        except Exception as e:  # the server was killed: the expected end
            self.error = type(e).__name__


def reopen(dbpath: Path, times: List[float], ready: List[float], rss: List[int],
           servers: list):
    """Start a server on dbpath (added to ``servers``, for the cleanup);
    record its open time, spawn-to-ping time and RSS."""
    s = _drvlib.Served(dbpath)
    servers.append(s)
    s.start()
    times.append(s.open_s)
    ready.append(s.ready_s)
    rss.append(s.rss())
    return s


def check_after_kill(s, expect_lo: int, expect_hi: int, payloads: dict):
    """Count, contiguous _ids, the last document's bytes: (count, '') when
    all hold, else (count, what is wrong)."""
    coll = s.client().bench.big
    count = coll.count_documents({})
    if not expect_lo <= count <= expect_hi:
        return count, f"count {count}, expected {expect_lo}..{expect_hi}"
    last = coll.find_one(sort=[("_id", -1)])
    if last is None or last["_id"] != count - 1:
        return count, f"count {count} but the highest _id is {last and last['_id']}: a gap"
    want = payloads.get(count - 1)
    if want is None:
        return count, f"no record of what was sent as _id {count - 1}"
    if bytes(last["p"]) != want:
        return count, f"document {count - 1} differs from what was sent"
    return count, ""


def run(ctx) -> dict:
    size_text = (_drvlib.ctx_get(ctx, "size") or os.environ.get("MF_BENCH_BIG_SIZE")
                 or ("4g" if ctx.full else "16m" if _drvlib.ctx_get(ctx, "smoke") else "64m"))
    total = max(64, _drvlib.parse_size(size_text) // DOC_BYTES)
    first_stage = total // 4
    reopens = 5 if ctx.full else 2 if _drvlib.ctx_get(ctx, "smoke") else 3
    dbpath = Path(ctx.workdir) / "big-db"
    shutil.rmtree(dbpath, ignore_errors=True)
    dbpath.mkdir(parents=True)
    assert len(_encoded(make_doc(0))) == DOC_BYTES

    out = {"part": "big", "rows": [], "notes": [], "series": {}}
    rows, notes = out["rows"], out["notes"]
    problems: List[str] = []
    rates: List[float] = []
    servers: List[_drvlib.Served] = [_drvlib.Served(dbpath)]
    s = servers[0].start()
    try:
        empty_rss = s.rss()
        coll = s.client().bench.big
        # 1. Load the first quarter.
        t = time.perf_counter()
        load(coll, 0, first_stage, rates)
        t1 = time.perf_counter() - t
        ctx.log(f"big: loaded {first_stage} x 16 KiB in {t1:.1f} s")
        # 2. Acknowledged single writes, then kill -9 after the load.
        payloads = {}
        for k in range(first_stage, first_stage + ACKED_SINGLES):
            d = make_doc(k)
            coll.insert_one(d)
            payloads[k] = bytes(d["p"])
        peak1 = s.peak_rss()
        s.kill9()
        acked = first_stage + ACKED_SINGLES

        # 3. Reopen at the first size, REOPENS times.
        def reopen_series(lo: int, hi: int, what: str):
            opens, ready, rss = [], [], []
            srv = reopen(dbpath, opens, ready, rss, servers)
            count, bad = check_after_kill(srv, lo, hi, payloads)
            if bad:
                problems.append(f"kill -9 {what}: {bad}")
            else:
                expect = f"{lo}" if lo == hi else f"{lo}..{hi}"
                notes.append(f"kill -9 {what}: reopened with {count} documents (expected "
                             f"{expect}), _ids contiguous, the last one byte-identical (correct)")
            rss_after_check = srv.rss()
            for _ in range(reopens - 1):
                srv.kill9()
                srv = reopen(dbpath, opens, ready, rss, servers)
            return srv, opens, ready, rss, rss_after_check

        s, opens1, ready1, rss1, rss1c = reopen_series(
            acked, acked, f"after loading {_drvlib.human_bytes(acked * DOC_BYTES)} "
            f"and {ACKED_SINGLES} acknowledged insert_one")
        disk1 = _drvlib.dir_bytes(dbpath)

        # 4. Load on to the full size, then kill -9 during a load.
        coll = s.client().bench.big
        t = time.perf_counter()
        rest = total - acked
        payloads[total - 1] = load(coll, acked, rest, rates)
        t2 = time.perf_counter() - t
        ctx.log(f"big: loaded {rest} more x 16 KiB in {t2:.1f} s")
        peak2 = s.peak_rss()
        w = Writer(s.uri, total)
        w.start()
        deadline = time.time() + 60
        while w.acked < BATCH and w.is_alive() and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)           # into the next batch
        s.kill9()
        w.join(30)
        w.client.close()
        # After the join the writer's record is final: w.acked documents
        # acknowledged, w.inflight the batch it was sending when the server
        # died.  Everything acknowledged must survive, and of the batch in
        # flight a prefix at most.
        acked2, inflight = w.acked, w.inflight
        if acked2:
            payloads[total + acked2 - 1] = w.last_acked
        for j, p in enumerate(inflight):
            payloads[total + acked2 + j] = p
        lo, hi = total + acked2, total + acked2 + len(inflight)
        s, opens2, ready2, rss2, rss2c = reopen_series(
            lo, hi, f"during an insert_many at {_drvlib.human_bytes(lo * DOC_BYTES)} "
            f"({acked2} acknowledged by the writer, {len(inflight)} in flight)")
        final_count = s.client().bench.big.count_documents({})
        s.stop()
        disk2 = _drvlib.dir_bytes(dbpath)
    finally:
        for srv in servers:
            srv.stop()
        _drvlib.remove_db(dbpath)

    size1 = acked * DOC_BYTES
    size2 = final_count * DOC_BYTES
    mib = 1 << 20
    total_load_s = t1 + t2
    rows.append(_drvlib.row(
        "big: bulk load, 16 KiB documents", "MB/s", rates,
        note=f"insert_many of {BATCH} documents per batch, rate per batch; "
             f"{(total) * DOC_BYTES / 1e6 / total_load_s:.1f} MB/s overall "
             f"({total:,} documents in {total_load_s:.1f} s)"))
    rows.append(_drvlib.row(
        "big: peak server RSS during load", "MiB", [max(peak1, peak2) / mib],
        note=f"VmHWM of the server process, {_drvlib.human_bytes(total * DOC_BYTES)} loaded; "
             f"{empty_rss / mib:.0f} MiB with an empty database (Python + the server)"))
    for size, opens, ready, rss, rssc in ((size1, opens1, ready1, rss1, rss1c),
                                          (size2, opens2, ready2, rss2, rss2c)):
        hs = _drvlib.human_bytes(size)
        rows.append(_drvlib.row(
            f"big: reopen after kill -9 at {hs}", "s", opens,
            note=f"Server() + start() in the server process, {len(opens)} reopens "
                 f"(the first recovers the killed run); spawn to first ping "
                 f"{statistics.median(ready):.2f} s median ({min(ready):.2f}..{max(ready):.2f})"))
        rows.append(_drvlib.row(
            f"big: server RSS after reopen at {hs}", "MiB", [r / mib for r in rss],
            note=f"{100 * statistics.median(rss) / size:.1f}% of the data; "
                 f"{rssc / mib:.0f} MiB after the count and the last-document check"))
    ratio = statistics.median(opens2) / statistics.median(opens1)
    notes.append(f"reopen at {_drvlib.human_bytes(size2)} / at {_drvlib.human_bytes(size1)}: "
                 f"{ratio:.2f}x for {size2 / size1:.1f}x the data")
    rows.append(_drvlib.row(
        "big: count after kill -9 during load and reopen", "documents", [final_count],
        note=f"expected {lo:,}..{hi:,} (acknowledged .. plus the batch in flight)"))
    rows.append(_drvlib.row(
        "big: acknowledged insert_one surviving kill -9", "documents",
        [0 if any("after loading" in p for p in problems) else ACKED_SINGLES],
        note=f"of {ACKED_SINGLES} acknowledged just before the kill"))
    for size, disk in ((size1, disk1), (size2, disk2)):
        on_disk = disk["alloc"] + disk["wal_alloc"]
        rows.append(_drvlib.row(
            f"big: bytes on disk at {_drvlib.human_bytes(size)}", "MiB", [on_disk / mib],
            note=f"allocated blocks: data {disk['alloc'] / mib:.0f} MiB + log "
                 f"{disk['wal_alloc'] / mib:.0f} MiB = {on_disk / size:.3f}x the documents' "
                 f"BSON bytes"))
    out["series"]["reopen_s"] = [[size1, statistics.median(opens1)],
                                 [size2, statistics.median(opens2)]]
    if problems:
        notes.extend("WRONG: " + p for p in problems)
    notes.append(f"size {size_text}: {total:,} documents of {DOC_BYTES} B before the "
                 f"kill during load; first stage {first_stage:,}")
    return out


def _encoded(doc: dict) -> bytes:
    import bson
    return bson.encode(doc)


if __name__ == "__main__":
    sys.exit(_drvlib.main(run, extra_args=[(("--size",), {"default": None,
                                                          "help": "e.g. 64m, 4g, 20g"})]))
