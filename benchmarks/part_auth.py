"""auth: what authentication costs a connection (issue 50).

One server (`python -m multifora serve`), pymongo.

  connect + ping   a new MongoClient (directConnection, no pool warm-up),
                   its first command (ping), closed: the connection's
                   set-up time, the median of 200 such connects per round
                   (--smoke: 10).  With SCRAM-SHA-256 (a user created
                   first; pymongo speculates its first step in hello and
                   recomputes its PBKDF2 for each new client, as an
                   application's new process would) against the same
                   without credentials; alternating rounds.  Milliseconds;
                   the ratio is with over without (above 1: authentication
                   costs that much more).
  SCRAM-SHA-1      the same with authMechanism=SCRAM-SHA-1.

TLS's cost (the issue's other figure) waits for TLS (docs/auth.md).

Sizes: --full 7 rounds of 200 connects; quick 3 of 200; smoke 1 of 10.
"""
from __future__ import annotations

import statistics
import time

import pymongo


def run(ctx) -> dict:
    rounds = 7 if ctx.full else 1 if ctx.smoke else 3
    n = 10 if ctx.smoke else 200
    srv = ctx.start_multifora()
    host = srv.uri.split("://", 1)[1].split("/", 1)[0]
    admin = pymongo.MongoClient(srv.uri)
    admin.admin.command("createUser", "bench", pwd="bench-pw", roles=["root"])
    admin.close()
    uris = {
        "SCRAM-SHA-256": f"mongodb://bench:bench-pw@{host}/?authSource=admin"
                         "&authMechanism=SCRAM-SHA-256&directConnection=true",
        "SCRAM-SHA-1": f"mongodb://bench:bench-pw@{host}/?authSource=admin"
                       "&authMechanism=SCRAM-SHA-1&directConnection=true",
        "none": f"mongodb://{host}/?directConnection=true",
    }

    def connects(side: str) -> float:
        times = []
        for _ in range(n):
            t = time.perf_counter()
            c = pymongo.MongoClient(uris[side], serverSelectionTimeoutMS=5000)
            c.admin.command("ping")
            times.append((time.perf_counter() - t) * 1000)
            c.close()
        return statistics.median(times)

    # each authenticates, and a wrong password does not
    for side in ("SCRAM-SHA-256", "SCRAM-SHA-1"):
        c = pymongo.MongoClient(uris[side])
        who = c.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"]
        c.close()
        if who != [{"user": "bench", "db": "admin"}]:
            raise RuntimeError(f"{side}: not authenticated: {who}")
    ctx.log(f"connects: {rounds} rounds of {n}, SCRAM-SHA-256 against none")
    s256 = ctx.alternate(rounds, connects, ("SCRAM-SHA-256", "none"))
    ctx.log(f"connects: {rounds} rounds of {n}, SCRAM-SHA-1 against none")
    s1 = ctx.alternate(rounds, connects, ("SCRAM-SHA-1", "none"))
    ctx.stop_all()
    return {"part": "auth", "rows": [
        ctx.row("connect + ping with SCRAM-SHA-256 vs no credentials", "ms", s256["SCRAM-SHA-256"],
                floor=s256["none"], note=f"median of {n} new clients per round"),
        ctx.row("connect + ping with SCRAM-SHA-1 vs no credentials", "ms", s1["SCRAM-SHA-1"],
                floor=s1["none"], note=f"median of {n} new clients per round"),
    ]}
