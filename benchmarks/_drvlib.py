"""What part_driver, part_big and part_churn share: rows, a served
MultiforaDB that can be killed with SIGKILL and timed on reopen, sizes on
disk, and a stand-in for run.py's context when a part runs alone.

A part module exposes ``run(ctx) -> dict`` (see benchmarks/run.py).  Each
one also runs alone, for development and for the smoke tests:

    python benchmarks/part_driver.py [--quick|--full|--smoke] [--workdir DIR] [--out FILE]

which builds a context with the fields of run.py's that these parts use
(quick, full, smoke, workdir, shared, size, log) and prints or writes the part's dict as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # spawned pool workers import this module by name
    sys.path.insert(0, str(HERE))

import _harness  # noqa: E402  (after the path fix above)


# -- rows ---------------------------------------------------------------------

def row(name: str, unit: str, values: Sequence[float], *, floor: Optional[Sequence[float]] = None,
        note: Optional[str] = None) -> dict:
    """One row of the common format from a list of measurements: median,
    min, max and n; with ``floor`` (the stub's measurements of the same
    operation, paired with ``values`` round by round) also the floor's
    median and the per-round ratio multifora/floor, in the row's own unit:
    its median as "ratio", its range as "ratio_min".."ratio_max"."""
    r = {"name": name, "unit": unit, "median": float(statistics.median(values)),
         "min": float(min(values)), "max": float(max(values)), "n": len(values)}
    if floor:
        r["floor"] = float(statistics.median(floor))
        ratios = [v / f for v, f in zip(values, floor) if v > 0 and f > 0]
        r["ratio"] = float(statistics.median(ratios))
        r["ratio_min"], r["ratio_max"] = float(min(ratios)), float(max(ratios))
    if note:
        r["note"] = note
    return r


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def parse_size(text: str) -> int:
    """'64m', '4g', '20G', '512k' or a plain byte count -> bytes (binary units)."""
    t = text.strip().lower().rstrip("b")
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}.get(t[-1:], 1)
    num = t[:-1] if t[-1:] in "kmgt" else t
    return int(float(num) * mult)


# -- files --------------------------------------------------------------------

def dir_bytes(path: Path) -> Dict[str, int]:
    """Sizes of a data directory: allocated blocks and apparent size, for
    the log segments (wal.*) and for everything else."""
    out = {"alloc": 0, "apparent": 0, "wal_alloc": 0, "wal_apparent": 0}
    for p in Path(path).iterdir():
        if not p.is_file():
            continue
        st = p.stat()
        alloc = st.st_blocks * 512
        if p.name.startswith("wal."):
            out["wal_alloc"] += alloc
            out["wal_apparent"] += st.st_size
        else:
            out["alloc"] += alloc
            out["apparent"] += st.st_size
    return out


def remove_db(dbpath: Path) -> None:
    """Remove a data directory and the server's stderr file beside it."""
    shutil.rmtree(dbpath, ignore_errors=True)
    Path(str(dbpath) + ".stderr").unlink(missing_ok=True)


def rss_bytes(pid: int, field_name: str = "VmRSS") -> int:
    """A process's resident set (or VmHWM, its peak) from /proc, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    return 0


# -- a served MultiforaDB that can be killed and reopened ---------------------

# Run in the server's process: the import is timed apart from the open, so
# the reopen figure is the database's open, not Python's start-up.
_SERVE = r"""
import json, signal, sys, time
t0 = time.perf_counter()
import multifora
t1 = time.perf_counter()
s = multifora.Server(sys.argv[1], port=0)
s.start()
t2 = time.perf_counter()
print(json.dumps({"uri": s.uri, "import_s": t1 - t0, "open_s": t2 - t1}), flush=True)
signal.signal(signal.SIGTERM, lambda *a: s.stop())
while not s.wait(0.5):
    pass
s.stop()
"""


@dataclass
class Served:
    """A ``multifora.Server`` in its own process over ``dbpath``.

    ``open_s`` is the time the process spent in Server() + start(); ``ready_s``
    the wall time from spawning the process to its first answered ping.
    """
    dbpath: Path
    proc: subprocess.Popen = None
    uri: str = ""
    open_s: float = 0.0
    ready_s: float = 0.0
    clients: List[object] = field(default_factory=list)

    def start(self) -> "Served":
        import pymongo
        t = time.perf_counter()
        # cwd is the scratch directory: "python -c" puts it first on
        # sys.path, so a source checkout's multifora (no built _core) is
        # never imported by mistake.
        # stderr goes to a file: a pipe nobody reads would stall a server
        # that logs more than the pipe holds.
        errpath = self.dbpath.parent / (self.dbpath.name + ".stderr")
        with open(errpath, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", _SERVE, str(self.dbpath)],
                                         stdout=subprocess.PIPE, stderr=err, text=True,
                                         cwd=str(self.dbpath.parent))
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise RuntimeError("multifora did not start: " + errpath.read_text()[-2000:])
        info = json.loads(line)
        self.uri, self.open_s = info["uri"], info["open_s"]
        c = self.client()
        c.admin.command("ping")
        self.ready_s = time.perf_counter() - t
        return self

    def client(self, **kwargs):
        import pymongo
        c = pymongo.MongoClient(self.uri, **kwargs)
        self.clients.append(c)
        return c

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss(self) -> int:
        return rss_bytes(self.pid)

    def peak_rss(self) -> int:
        return rss_bytes(self.pid, "VmHWM")

    def _close_clients(self) -> None:
        for c in self.clients:
            c.close()
        self.clients = []

    def kill9(self) -> None:
        """SIGKILL: no shutdown, no final checkpoint, no flush.  This
        object's clients are closed first: a client closed after its server
        is gone waits for server selection to time out (endSessions)."""
        self._close_clients()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        self._close_clients()
        if self.proc and self.proc.poll() is None:
            _harness.stop([self.proc])


class StubServer:
    """The do-nothing floor stub (stub_server.c), built once per workdir."""

    def __init__(self, workdir: Path):
        exe = workdir / "stub_server"
        if not exe.exists():
            exe = _harness.build_stub(workdir)
        self.proc, self.uri = _harness.start_stub(exe)

    def stop(self) -> None:
        _harness.stop([self.proc])


# -- running a part alone -------------------------------------------------------

@dataclass
class Ctx:
    """The fields of run.py's context a part of this helper uses."""
    quick: bool
    full: bool
    workdir: Path
    shared: Optional[Path]
    size: Optional[str] = None
    smoke: bool = False   # smaller than quick: the smoke tests' setting

    def log(self, msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)


def ctx_get(ctx, name: str, default=None):
    """An optional context field: run.py may not define every one."""
    return getattr(ctx, name, default)


def find_shared() -> Optional[Path]:
    p = HERE.parent.parent / "shared"
    if not p.is_dir():
        p = Path("/work/shared")
    return p if p.is_dir() else None


def main(run: Callable[[object], dict], argv=None, extra_args=()) -> int:
    """The command line of a part run alone: writes its dict as JSON."""
    ap = argparse.ArgumentParser()
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="small sizes (the default)")
    mode.add_argument("--full", action="store_true", help="the sizes of a full run")
    mode.add_argument("--smoke", action="store_true",
                      help="smaller than quick: for the smoke tests")
    ap.add_argument("--workdir", default=None, help="scratch directory (default: a fresh one, "
                    "removed afterwards)")
    ap.add_argument("--shared", default=None, help="the ../shared directory")
    ap.add_argument("--out", default=None, help="write the JSON here instead of stdout")
    for a in extra_args:
        ap.add_argument(*a[0], **a[1])
    args = ap.parse_args(argv)
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="mf-part-"))
    work.mkdir(parents=True, exist_ok=True)
    shared = Path(args.shared) if args.shared else find_shared()
    ctx = Ctx(quick=not args.full, full=args.full, workdir=work, shared=shared,
              size=getattr(args, "size", None), smoke=args.smoke)
    try:
        result = run(ctx)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    else:
        print(text)
    return 0


# -- LDJSON workers (part_driver's parallel tasks) ------------------------------
# They live here, in a module imported by its plain name, so that processes
# of a "spawn" pool can find them however run.py imported the part.

_worker_coll = None


def ldjson_worker_init(uri: str, db: str, coll: str) -> None:
    import pymongo
    global _worker_coll
    _worker_coll = pymongo.MongoClient(uri)[db][coll]


def ldjson_worker_ready(delay: float) -> int:
    time.sleep(delay)
    return os.getpid()


def ldjson_import_file(path: str, first_id: Optional[int] = None) -> int:
    """Read one LDJSON file and insert its documents, unordered; with
    ``first_id``, number them first_id, first_id + 1 ... as _id.  Returns how
    many documents went in."""
    with open(path, encoding="utf-8") as f:
        docs = [json.loads(line) for line in f if line.strip()]
    if first_id is not None:
        for i, d in enumerate(docs):
            d["_id"] = first_id + i
    _worker_coll.insert_many(docs, ordered=False)
    return len(docs)


def ldjson_export_range(first_id: int, count: int, path: str) -> int:
    """Write the documents with _id in [first_id, first_id + count) to
    ``path`` as LDJSON and sync the file.  Returns how many it wrote."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for d in _worker_coll.find({"_id": {"$gte": first_id, "$lt": first_id + count}}):
            f.write(json.dumps(d, separators=(",", ":")))
            f.write("\n")
            n += 1
        f.flush()
        os.fsync(f.fileno())
    return n
