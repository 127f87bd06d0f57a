"""What the wire benchmarks share: the two servers, alternating rounds, the report.

A benchmark here compares MultiforaDB with the do-nothing stub
(stub_server.c) in one run: both run as separate processes on loopback,
each with one pymongo client in the benchmark's process.  Rounds alternate
A, B, then B, A ... so drift in the machine's load touches both sides
alike.  A round is a list of per-operation times; the report gives, per
side, the median of the round medians and their range, then the per-round
ratio MultiforaDB/stub (min, median, max).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Sequence

import pymongo

HERE = Path(__file__).resolve().parent
SIDES = ("multifora", "stub")


def disk_bytes(path: Path) -> int:
    """Allocated bytes of every file under path (du, not apparent size); 0
    for a store in memory.  Shared by run.py's parts and the peers' worker."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass  # removed while we walked
    return total


def build_stub(workdir: Path) -> Path:
    exe = workdir / "stub_server"
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-O2", "-pthread", "-o", str(exe), str(HERE / "stub_server.c")],
                   check=True)
    return exe


def start_stub(exe: Path):
    p = subprocess.Popen([str(exe), "0"], stdout=subprocess.PIPE, text=True)
    port = int(p.stdout.readline().split()[1])
    return p, f"mongodb://127.0.0.1:{port}/?directConnection=true"


def start_multifora(dbpath: Path):
    # cwd is the scratch directory: "python -m" puts the working directory
    # first on sys.path, and run from a checkout it would import the source
    # tree's multifora (no built _core) instead of the installed package.
    p = subprocess.Popen([sys.executable, "-m", "multifora", "serve", "--dbpath", str(dbpath),
                          "--port", "0", "--log-level", "warning"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         cwd=str(dbpath.parent))
    for line in p.stdout:
        m = re.search(r"connect with: (\S+)", line)
        if m:
            return p, m.group(1)
    raise RuntimeError("multifora did not start")


def stop(procs: List[subprocess.Popen]) -> None:
    for p in procs:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@contextmanager
def two_servers() -> Iterator[Dict[str, pymongo.MongoClient]]:
    """Start MultiforaDB (fresh data directory) and the stub; yield one
    single-connection client for each, keyed by SIDES; stop both and remove
    the scratch directory afterwards."""
    work = Path(tempfile.mkdtemp(prefix="mf-bench-"))
    procs: List[subprocess.Popen] = []
    clients: Dict[str, pymongo.MongoClient] = {}
    try:
        stub_p, stub_uri = start_stub(build_stub(work))
        procs.append(stub_p)
        (work / "db").mkdir()
        mf_p, mf_uri = start_multifora(work / "db")
        procs.append(mf_p)
        clients["multifora"] = pymongo.MongoClient(mf_uri, maxPoolSize=1)
        clients["stub"] = pymongo.MongoClient(stub_uri, maxPoolSize=1)
        yield clients
    finally:
        for c in clients.values():
            c.close()
        stop(procs)
        shutil.rmtree(work, ignore_errors=True)


def time_calls(fn: Callable[[int], object], n: int) -> List[int]:
    """Call fn(0) .. fn(n-1); return each call's wall time in ns."""
    out = []
    clock = time.perf_counter_ns
    for i in range(n):
        t = clock()
        fn(i)
        out.append(clock() - t)
    return out


def alternate_rounds(rounds: int, run: Callable[[str], List[int]],
                     sides: Sequence[str] = SIDES) -> Dict[str, List[float]]:
    """Run ``run(side)`` for both sides in each of ``rounds`` rounds, the
    order flipping every round; return each side's round medians in us."""
    medians: Dict[str, List[float]] = {s: [] for s in sides}
    for r in range(rounds):
        for side in (sides if r % 2 == 0 else sides[::-1]):
            medians[side].append(statistics.median(run(side)) / 1000)
    return medians


def spread(values: List[float]) -> str:
    """'min..max' of a list, for a range column."""
    return f"{min(values):.1f}..{max(values):.1f}"


def report(medians: Dict[str, List[float]], op: str = "",
           sides: Sequence[str] = SIDES) -> None:
    """Print one table (a side per row) and the per-round ratio line
    sides[0]/sides[1], both named by ``op`` when the benchmark times more
    than one operation."""
    a_side, b_side = sides
    ratios = [a / b for a, b in zip(medians[a_side], medians[b_side])]
    print(f"{op or 'server':<12}{'median of round medians':>26}{'range':>22}")
    for side in sides:
        m = medians[side]
        print(f"{side:<12}{statistics.median(m):>23.1f} us{spread(m):>19} us")
    print(f"{op + ' ' if op else ''}ratio {a_side}/{b_side} per round: min {min(ratios):.3f}, "
          f"median {statistics.median(ratios):.3f}, max {max(ratios):.3f}")


def header(what: str, rounds: int, ops: int, unit: str) -> None:
    print(f"{what}, pymongo {pymongo.version}, {rounds} rounds x {ops} {unit}, "
          f"loopback TCP, {os.cpu_count()} cores")
