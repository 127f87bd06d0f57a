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
The servers, rounds and report are shared with the other wire benchmarks
(_harness.py).
"""
from __future__ import annotations

import argparse
import sys

import _harness as h


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--pings", type=int, default=2000)
    args = ap.parse_args(argv)

    with h.two_servers() as clients:
        pings = {side: (lambda i, cmd=c.admin.command: cmd("ping"))
                 for side, c in clients.items()}
        for side in h.SIDES:  # connect and warm up
            h.time_calls(pings[side], 200)
        medians = h.alternate_rounds(args.rounds,
                                     lambda side: h.time_calls(pings[side], args.pings))
        h.header("ping round trip", args.rounds, args.pings, "pings")
        h.report(medians)
    return 0


if __name__ == "__main__":
    sys.exit(main())
