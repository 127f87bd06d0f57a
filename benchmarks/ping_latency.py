"""Ping round-trip latency: MultiforaDB beside a do-nothing wire stub.

    python benchmarks/ping_latency.py [--rounds 7] [--pings 2000]

Both servers run as separate processes on loopback; one pymongo client per
server in this process.  Rounds alternate A, B, A, B ... so drift in the
machine's load touches both sides alike; each round times --pings calls of
``client.admin.command("ping")``.  Reported: per-round medians for each
side, their range across rounds, and the per-round ratio MultiforaDB/stub
(min..median..max).  The stub (stub_server.c) parses nothing beyond the
header and answers every message with a fixed body, so the ratio is the
cost the server adds on top of the driver and the loopback round trip.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pymongo

HERE = Path(__file__).resolve().parent


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
    p = subprocess.Popen([sys.executable, "-m", "multifora", "serve", "--dbpath", str(dbpath),
                          "--port", "0", "--log-level", "warning"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        m = re.search(r"connect with: (\S+)", line)
        if m:
            return p, m.group(1)
    raise RuntimeError("multifora did not start")


def time_round(client, n: int) -> list:
    out = []
    cmd = client.admin.command
    for _ in range(n):
        t = time.perf_counter_ns()
        cmd("ping")
        out.append(time.perf_counter_ns() - t)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--pings", type=int, default=2000)
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="mf-bench-"))
    procs = []
    try:
        stub_p, stub_uri = start_stub(build_stub(work))
        procs.append(stub_p)
        mf_p, mf_uri = start_multifora(work / "db")
        procs.append(mf_p)
        clients = {"multifora": pymongo.MongoClient(mf_uri, maxPoolSize=1),
                   "stub": pymongo.MongoClient(stub_uri, maxPoolSize=1)}
        for c in clients.values():  # connect and warm up
            time_round(c, 200)

        medians = {"multifora": [], "stub": []}
        for r in range(args.rounds):
            order = ["multifora", "stub"] if r % 2 == 0 else ["stub", "multifora"]
            for name in order:
                medians[name].append(statistics.median(time_round(clients[name], args.pings)) / 1000)
        ratios = [a / b for a, b in zip(medians["multifora"], medians["stub"])]

        print(f"ping round trip, pymongo {pymongo.version}, {args.rounds} rounds x "
              f"{args.pings} pings, loopback TCP, {os.cpu_count()} cores")
        print(f"{'server':<12}{'median of round medians':>26}{'range':>22}")
        for name in ("multifora", "stub"):
            m = medians[name]
            print(f"{name:<12}{statistics.median(m):>23.1f} us"
                  f"{min(m):>12.1f}..{max(m):.1f} us")
        print(f"ratio multifora/stub per round: min {min(ratios):.3f}, "
              f"median {statistics.median(ratios):.3f}, max {max(ratios):.3f}")
        for c in clients.values():
            c.close()
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
