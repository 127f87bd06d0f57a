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

  TLS connect     connect + ping over TLS 1.3 (a client certificate, the
                   server's verified against its CA) against plain TCP, on
                   one server in preferTLS mode (it takes both), so the two
                   sides differ only in TLS.
  TLS find_one    find_one by _id on one warm connection per side, over
                   TLS against plain TCP: microseconds per call, the median
                   of 2,000 calls per round (--smoke: 100).

The certificates are made in the work directory with the openssl command
(the TLS rows are left out, with a note, when it is missing).

Sizes: --full 7 rounds of 200 connects; quick 3 of 200; smoke 1 of 10.
"""
from __future__ import annotations

import shutil
import statistics
import subprocess
import time
from pathlib import Path

import pymongo


def _certs(work: Path) -> dict:
    """A CA, a server certificate for 127.0.0.1 and a client certificate."""
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=work, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=bench CA")
    for name, subj in (("server", "/CN=localhost"), ("client", "/CN=bench client")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                f"{name}.csr", "-subj", subj)
        (work / f"{name}.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile",
                f"{name}.ext")
        (work / f"{name}.pem").write_text((work / f"{name}.crt").read_text() +
                                          (work / f"{name}.key").read_text())
    return {k: str(work / f"{k}.pem") for k in ("ca", "server", "client")}


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
    rows = []
    if shutil.which("openssl"):
        rows = _tls_rows(ctx, rounds, n)
    else:
        ctx.log("TLS rows left out: no openssl command to make certificates")
    ctx.stop_all()
    return {"part": "auth", "rows": rows + [
        ctx.row("connect + ping with SCRAM-SHA-256 vs no credentials", "ms", s256["SCRAM-SHA-256"],
                floor=s256["none"], note=f"median of {n} new clients per round"),
        ctx.row("connect + ping with SCRAM-SHA-1 vs no credentials", "ms", s1["SCRAM-SHA-1"],
                floor=s1["none"], note=f"median of {n} new clients per round"),
    ]}


def _tls_rows(ctx, rounds: int, n: int) -> list:
    work = Path(ctx.workdir) / "tls"
    work.mkdir(exist_ok=True)
    certs = _certs(work)
    srv = ctx.start_multifora(args=["--tlsMode", "preferTLS", "--tlsCertificateKeyFile",
                                    certs["server"], "--tlsCAFile", certs["ca"]])
    host = srv.uri.split("://", 1)[1].split("/", 1)[0]
    kw = {
        "tls": dict(tls=True, tlsCAFile=certs["ca"], tlsCertificateKeyFile=certs["client"]),
        "tcp": {},
    }

    def client(side):
        return pymongo.MongoClient(f"mongodb://{host}/?directConnection=true",
                                   serverSelectionTimeoutMS=5000, **kw[side])

    def connects(side: str) -> float:
        times = []
        for _ in range(n):
            t = time.perf_counter()
            c = client(side)
            c.admin.command("ping")
            times.append((time.perf_counter() - t) * 1000)
            c.close()
        return statistics.median(times)

    warm = {side: client(side) for side in kw}
    warm["tcp"].bench.c.insert_many([{"_id": i, "v": "x" * 100} for i in range(1000)])
    for side, c in warm.items():  # both reach it, and TLS is TLS
        if c.bench.c.find_one({"_id": 7})["_id"] != 7:
            raise RuntimeError(f"{side}: find_one answered wrong")
    calls = 100 if ctx.smoke else 2000

    def finds(side: str) -> float:
        coll = warm[side].bench.c
        times = []
        for i in range(calls):
            t = time.perf_counter()
            coll.find_one({"_id": i % 1000})
            times.append((time.perf_counter() - t) * 1e6)
        return statistics.median(times)

    ctx.log(f"connects: {rounds} rounds of {n}, TLS against plain TCP (preferTLS)")
    con = ctx.alternate(rounds, connects, ("tls", "tcp"))
    ctx.log(f"find_one: {rounds} rounds of {calls}, TLS against plain TCP")
    fo = ctx.alternate(rounds, finds, ("tls", "tcp"))
    for c in warm.values():
        c.close()
    return [
        ctx.row("connect + ping over TLS vs plain TCP", "ms", con["tls"], floor=con["tcp"],
                note=f"median of {n} new clients per round, client certificate"),
        ctx.row("find_one by _id over TLS vs plain TCP", "us", fo["tls"], floor=fo["tcp"],
                note=f"median of {calls} calls per round on one connection"),
    ]
