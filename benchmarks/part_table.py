"""The comparison table: MultiforaDB beside the do-nothing floor stub.

The rows of the project's earlier comparison tables (the m0-gates D7.5 table
and the phase3 table), each timed against MultiforaDB served as a
subprocess and against stub_server.c in the same run, rounds alternating
A, B then B, A, one pymongo client per server in this process:

  bench.c holds N documents of exactly 16,384 BSON bytes
  {_id: ObjectId, k: i % 1000, p: uniform [0, 1), payload: random bytes}:
  N = 65,536 (1 GiB) in --full, 2,048 (32 MiB) in quick, 256 in smoke.

  insertOne sequential        per call, 200 calls a round, ~200-byte documents
  bulk insert                 MB/s per insert_many chunk while loading bench.c
  createIndex({k: 1})         per build (dropped untimed before each)
  countDocuments({})          per call
  findOne by _id              random existing ObjectId
  findOne({k: v}) indexed     v random in 0..999; explain must show IXSCAN k_1
  range count, unindexed      count {p: {$gte: lo, $lt: lo + 0.1}}
  sort({_id: -1}).limit(20)   the whole cursor
  projection limit(1000)      find({}, {k, p, no _id}).limit(1000), whole cursor
  aggregate $group by k       {$group: {_id: "$k", n: {$sum: 1}}}
  updateOne({_id}) x50        {$inc: {u: 1}}, per call
  updateMany({k: 7}, {$inc})  per call
  deleteOne({_id}) + insertOne  the same document back, per pair
  concurrent durable insertOne  docs/s at 1/4/8/16/32 client processes, j: true
  server RSS                  after the rows above
  kill -9 reopen              spawn until the first ping answers, after SIGKILL;
                              floor: the same server started on an empty directory
  bytes on disk               allocated bytes of the data directory;
                              floor: the document bytes loaded

Every MultiforaDB answer is checked against the generated data (counts,
documents, groups), so a wrong answer fails the part instead of being
timed.  The stub answers everything with ok, n: 1 and an empty cursor, so a
row's floor is the driver's encoding and decoding plus one loopback round
trip: the ratio is what the server adds on top of that.
"""
from __future__ import annotations

import bisect
import multiprocessing
import os
import random
import statistics
import time
from typing import Callable, Dict, List

import bson
import pymongo
from bson import ObjectId
from pymongo import WriteConcern

SIDES = ("multifora", "stub")
DOC_BYTES = 16384
KEYS = 1000  # distinct values of k


class Settings:
    def __init__(self, ctx):
        if ctx.full:
            self.docs, self.chunk, self.rounds, self.ops, self.heavy = 65536, 512, 7, 200, 5
            self.seq, self.upd = 200, 50
            self.clients, self.conc_seconds, self.conc_rounds, self.reopens = \
                [1, 4, 8, 16, 32], 2.0, 5, 5
        elif ctx.smoke:
            self.docs, self.chunk, self.rounds, self.ops, self.heavy = 256, 32, 2, 10, 2
            self.seq, self.upd = 20, 10
            self.clients, self.conc_seconds, self.conc_rounds, self.reopens = \
                [1, 4], 0.3, 2, 2
        else:
            self.docs, self.chunk, self.rounds, self.ops, self.heavy = 2048, 128, 3, 50, 3
            self.seq, self.upd = 200, 50
            self.clients, self.conc_seconds, self.conc_rounds, self.reopens = \
                [1, 4, 8, 16, 32], 0.5, 2, 3


# -- the data ----------------------------------------------------------------

_OVERHEAD = len(bson.encode({"_id": ObjectId(), "k": 0, "p": 0.0, "payload": b""}))


def big_doc(oid: ObjectId, k: int, p: float) -> dict:
    """A document of exactly DOC_BYTES BSON bytes, incompressible payload."""
    return {"_id": oid, "k": k, "p": p, "payload": os.urandom(DOC_BYTES - _OVERHEAD)}


def small_doc(i: int) -> dict:
    return {"_id": ObjectId(), "i": i, "s": "x" * 160}


class Data:
    """What was loaded, to check answers against."""

    def __init__(self, n: int, rng: random.Random):
        self.ids = [ObjectId() for _ in range(n)]
        self.k = [i % KEYS for i in range(n)]
        self.p = [rng.random() for _ in range(n)]
        self.p_sorted = sorted(self.p)

    def doc(self, i: int) -> dict:
        return big_doc(self.ids[i], self.k[i], self.p[i])

    def range_count(self, lo: float, hi: float) -> int:
        return bisect.bisect_left(self.p_sorted, hi) - bisect.bisect_left(self.p_sorted, lo)


class Wrong(AssertionError):
    """MultiforaDB gave a wrong answer: the part fails, nothing is timed."""


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise Wrong(what)


# -- timing ------------------------------------------------------------------

def per_call_ms(fn: Callable[[int], object], calls: int, check=None) -> float:
    """Median wall time of fn(0..calls-1) in ms; check(i, result) after each
    call, outside the timed region."""
    clock = time.perf_counter_ns
    times = []
    for i in range(calls):
        t = clock()
        r = fn(i)
        times.append(clock() - t)
        if check is not None:
            check(i, r)
    return statistics.median(times) / 1e6


def op_rows(ctx, name: str, unit: str, rounds: int, calls: int,
            fns: Dict[str, Callable[[int], object]], check=None, note=None) -> dict:
    """One row: ``calls`` calls a round on each side, rounds alternating;
    a round's value is its median per-call time.  check(i, result) runs on
    MultiforaDB's answers only."""
    for side in SIDES:  # warm-up: connections, caches, first-call costs
        per_call_ms(fns[side], min(calls, 5))

    def one(side):
        return per_call_ms(fns[side], calls, check if side == "multifora" else None)

    vals = ctx.alternate(rounds, one, SIDES)
    return ctx.row(name, unit, vals["multifora"], vals["stub"], note=note)


# -- concurrent writers: client processes --------------------------------------

def _writer(conn) -> None:
    """A client process: its own pymongo client per server; on ("go", uri,
    start, seconds, wid) inserts small documents with j: true from wall time
    start until start + seconds and replies with the count done by then."""
    clients: Dict[str, pymongo.MongoClient] = {}
    while True:
        msg = conn.recv()
        if msg[0] == "quit":
            break
        _, uri, start, seconds, wid = msg
        if uri not in clients:
            clients[uri] = pymongo.MongoClient(uri, maxPoolSize=1)
        coll = clients[uri].bench.get_collection(
            "conc", write_concern=WriteConcern(w=1, j=True))
        if msg[0] == "connect":
            clients[uri].admin.command("ping")
            conn.send("ready")
            continue
        deadline = start + seconds
        while time.time() < start:
            time.sleep(0.001)
        n = 0
        while True:
            coll.insert_one({"w": wid, "i": n, "s": "x" * 100})
            if time.time() > deadline:
                break
            n += 1
        conn.send(n)
    for c in clients.values():
        c.close()


class Writers:
    """max(clients) writer processes, started once (fork)."""

    def __init__(self, n: int):
        mp = multiprocessing.get_context("fork")
        self.pipes, self.procs = [], []
        for _ in range(n):
            a, b = mp.Pipe()
            p = mp.Process(target=_writer, args=(b,), daemon=True)
            p.start()
            self.pipes.append(a)
            self.procs.append(p)

    def connect(self, uri: str, n: int) -> None:
        for wid in range(n):
            self.pipes[wid].send(("connect", uri, 0, 0, wid))
        for wid in range(n):
            expect(self.pipes[wid].recv() == "ready", "writer did not connect")

    def run(self, uri: str, n: int, seconds: float) -> int:
        start = time.time() + 0.05
        for wid in range(n):
            self.pipes[wid].send(("go", uri, start, seconds, wid))
        return sum(self.pipes[wid].recv() for wid in range(n))

    def close(self) -> None:
        """Stop the writer processes; idempotent.  Call while the servers
        still run: a client closed after its server died can wait for server
        selection."""
        for a in self.pipes:
            try:
                a.send(("quit",))
            except OSError:
                pass
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
        self.pipes, self.procs = [], []


# -- the part ----------------------------------------------------------------

def run(ctx) -> dict:
    s = Settings(ctx)
    rng = random.Random(20261130)
    writers = Writers(max(s.clients))  # forked before any client thread exists
    try:
        return _run(ctx, s, rng, writers)
    finally:
        writers.close()


def _run(ctx, s: Settings, rng: random.Random, writers: Writers) -> dict:
    rows: List[dict] = []
    notes: List[str] = []
    mf_srv = ctx.start_multifora()
    stub_srv = ctx.start_stub()
    srv = {"multifora": mf_srv, "stub": stub_srv}
    cl = {side: srv[side].client(maxPoolSize=1) for side in SIDES}
    db = {side: cl[side].bench for side in SIDES}
    coll = {side: db[side].c for side in SIDES}
    n = s.docs
    data = Data(n, rng)
    ctx.log(f"{n} documents x {DOC_BYTES} B = {n * DOC_BYTES / 2**20:.0f} MiB; "
            f"{s.rounds} rounds, {s.ops} calls a round")

    # insertOne sequential, into its own collection.
    seq_count = {side: 0 for side in SIDES}

    def seq_fn(side):
        c = db[side].seq

        def f(i):
            seq_count[side] += 1
            return c.insert_one(small_doc(i))
        return f
    rows.append(op_rows(ctx, f"insertOne sequential x{s.seq}", "ms", s.rounds, s.seq,
                        {side: seq_fn(side) for side in SIDES},
                        check=lambda i, r: expect(r.acknowledged, "insertOne not acknowledged"),
                        note="~200-byte documents, default (durable) write concern"))
    expect(db["multifora"].seq.count_documents({}) == seq_count["multifora"],
           "insertOne: wrong count")

    # Bulk insert: load bench.c chunk by chunk, each chunk to both sides.
    mbps: Dict[str, List[float]] = {side: [] for side in SIDES}
    for ci, lo in enumerate(range(0, n, s.chunk)):
        docs = [data.doc(i) for i in range(lo, min(lo + s.chunk, n))]
        mb = len(docs) * DOC_BYTES / 1e6
        for side in (SIDES if ci % 2 == 0 else SIDES[::-1]):
            t = time.perf_counter()
            r = coll[side].insert_many(docs)
            mbps[side].append(mb / (time.perf_counter() - t))
            if side == "multifora":
                expect(len(r.inserted_ids) == len(docs), "insert_many: wrong count")
    rows.append(ctx.row("bulk insert, 16 KiB documents", "MB/s", mbps["multifora"],
                        mbps["stub"], note=f"{n * DOC_BYTES / 2**20:,.0f} MiB in insert_many "
                        f"chunks of {s.chunk}; one value per chunk"))
    expect(coll["multifora"].estimated_document_count() == n, "load: wrong count")

    # createIndex({k: 1}), dropped (untimed) before each build.
    def build(side):
        c = coll[side]
        if side == "multifora" and "k_1" in c.index_information():
            c.drop_index("k_1")
        t = time.perf_counter()
        c.create_index([("k", 1)])
        return (time.perf_counter() - t) * 1e3
    vals = ctx.alternate(s.heavy, build, SIDES)
    rows.append(ctx.row("createIndex({k: 1})", "ms", vals["multifora"], vals["stub"]))
    plan = db["multifora"].command("explain", {"find": "c", "filter": {"k": 500}, "limit": 1})
    expect("'IXSCAN'" in str(plan["queryPlanner"]["winningPlan"])
           and "k_1" in str(plan["queryPlanner"]["winningPlan"]),
           f"findOne({{k}}) not planned on k_1: {plan['queryPlanner']['winningPlan']}")

    def each(make):
        return {side: make(side) for side in SIDES}

    rows.append(op_rows(
        ctx, "countDocuments({})", "ms", s.rounds, s.heavy,
        each(lambda side: (lambda i, c=coll[side]: c.count_documents({}))),
        check=lambda i, r: expect(r == n, f"countDocuments: {r} != {n}")))

    pick = [rng.randrange(n) for _ in range(s.ops)]
    rows.append(op_rows(
        ctx, "findOne({_id: ObjectId})", "ms", s.rounds, s.ops,
        each(lambda side: (lambda i, c=coll[side]: c.find_one({"_id": data.ids[pick[i]]}))),
        check=lambda i, r: expect(r is not None and r["_id"] == data.ids[pick[i]]
                                  and len(bson.encode(r)) == DOC_BYTES, "findOne by _id")))

    kv = [rng.randrange(min(KEYS, n)) for _ in range(s.ops)]
    rows.append(op_rows(
        ctx, "findOne({k: v}), indexed", "ms", s.rounds, s.ops,
        each(lambda side: (lambda i, c=coll[side]: c.find_one({"k": kv[i]}))),
        check=lambda i, r: expect(r is not None and r["k"] == kv[i], "findOne by k")))

    los = [rng.random() * 0.9 for _ in range(s.heavy)]
    rows.append(op_rows(
        ctx, "count {p: {$gte, $lt}}, unindexed (10%)", "ms", s.rounds, s.heavy,
        each(lambda side: (lambda i, d=db[side]: d.command(
            "count", "c", query={"p": {"$gte": los[i], "$lt": los[i] + 0.1}})["n"])),
        check=lambda i, r: expect(r == data.range_count(los[i], los[i] + 0.1),
                                  f"range count {r}")))

    top20 = sorted(data.ids, reverse=True)[:20]
    rows.append(op_rows(
        ctx, "find().sort({_id: -1}).limit(20)", "ms", s.rounds, s.heavy,
        each(lambda side: (lambda i, c=coll[side]: list(c.find().sort("_id", -1).limit(20)))),
        check=lambda i, r: expect([d["_id"] for d in r] == top20, "sort _id -1 limit 20")))

    want = min(1000, n)
    rows.append(op_rows(
        ctx, "find({}, {k, p}).limit(1000)", "ms", s.rounds, s.heavy,
        each(lambda side: (lambda i, c=coll[side]:
                           list(c.find({}, {"_id": 0, "k": 1, "p": 1}).limit(1000)))),
        check=lambda i, r: expect(len(r) == want and all(set(d) == {"k", "p"} for d in r),
                                  "projection limit 1000")))

    groups = min(KEYS, n)
    rows.append(op_rows(
        ctx, "aggregate $group by k", "ms", s.rounds, s.heavy,
        each(lambda side: (lambda i, c=coll[side]: list(c.aggregate(
            [{"$group": {"_id": "$k", "n": {"$sum": 1}}}])))),
        check=lambda i, r: expect(len(r) == groups and sum(g["n"] for g in r) == n
                                  and {g["_id"] for g in r} == set(range(groups)),
                                  "$group by k")))

    upd_done = [0]
    upick = [rng.randrange(n) for _ in range(s.upd)]

    def upd_check(i, r):
        expect(r.matched_count == 1 and r.modified_count == 1, "updateOne")
        upd_done[0] += 1
    rows.append(op_rows(
        ctx, f"updateOne({{_id}}) x{s.upd}", "ms", s.rounds, s.upd,
        each(lambda side: (lambda i, c=coll[side]:
                           c.update_one({"_id": data.ids[upick[i]]}, {"$inc": {"u": 1}}))),
        check=upd_check))
    total_u = list(coll["multifora"].aggregate([{"$group": {"_id": None, "u": {"$sum": "$u"}}}]))
    # op_rows' warm-up calls (unchecked) increment too.
    expect(total_u and total_u[0]["u"] == upd_done[0] + min(s.upd, 5),
           f"updateOne: {total_u} increments stored, {upd_done[0]} + warm-up done")

    k7 = sum(1 for k in data.k if k == 7)
    rows.append(op_rows(
        ctx, "updateMany({k: 7}, {$inc})", "ms", s.rounds, s.heavy,
        each(lambda side: (lambda i, c=coll[side]: c.update_many({"k": 7}, {"$inc": {"v": 1}}))),
        check=lambda i, r: expect(r.matched_count == k7 and r.modified_count == k7,
                                  f"updateMany matched {r.matched_count}, want {k7}"),
        note=f"{k7} matching documents"))

    dpick = [rng.randrange(n) for _ in range(s.ops)]
    fresh = {i: data.doc(i) for i in set(dpick)}

    def del_ins(c):
        def f(i):
            j = dpick[i]
            r = c.delete_one({"_id": data.ids[j]})
            c.insert_one(fresh[j])
            return r
        return f
    rows.append(op_rows(
        ctx, "deleteOne({_id}) + insertOne", "ms", s.rounds, s.ops,
        each(lambda side: del_ins(coll[side])),
        check=lambda i, r: expect(r.deleted_count == 1, "deleteOne"),
        note="the same 16 KiB document back; per pair"))
    expect(coll["multifora"].count_documents({}) == n, "count after delete+insert")

    # Concurrent durable writers: separate client processes.
    conc_expected = 0
    for side in SIDES:
        writers.connect(srv[side].uri, max(s.clients))
    for nc in s.clients:
        def rate(side, nc=nc):
            nonlocal conc_expected
            done = writers.run(srv[side].uri, nc, s.conc_seconds)
            if side == "multifora":
                conc_expected += done + nc  # each writer's last insert crosses the deadline
            return done / s.conc_seconds
        vals = ctx.alternate(s.conc_rounds, rate, SIDES)
        rows.append(ctx.row(f"concurrent durable insertOne, {nc} client"
                            f"{'s' if nc > 1 else ''}", "docs/s", vals["multifora"],
                            vals["stub"], note=f"{nc} process{'es' if nc > 1 else ''}, j: true, "
                            f"{s.conc_seconds:g} s a round"))
        ctx.log(f"{nc} writers: {statistics.median(vals['multifora']):,.0f} docs/s "
                f"(floor {statistics.median(vals['stub']):,.0f})")
    writers.close()
    conc_count = coll["multifora"].database.conc.count_documents({})
    expect(conc_count == conc_expected, f"concurrent inserts: {conc_count} stored, "
           f"{conc_expected} acknowledged")

    # Server RSS, bytes on disk while open.
    rss = mf_srv.rss_bytes() / 2**20
    hwm = _status_kib(mf_srv.pid, "VmHWM") / 1024
    rows.append(ctx.row("server RSS", "MiB", [rss],
                        note=f"after the rows above; peak (VmHWM) {hwm:,.0f} MiB"))
    data_mib = n * DOC_BYTES / 2**20
    rows.append(ctx.row("bytes on disk, open", "MiB", [ctx.disk_bytes(mf_srv.dbpath) / 2**20],
                        [data_mib], note="floor: the 16 KiB documents' bytes"))

    ctx.log("kill -9 and reopen")
    # kill -9 and reopen, against starting the same server on an empty directory.
    dbpath = mf_srv.dbpath
    mf_srv.kill9()
    reopen_rss: List[float] = []

    def start(side):
        t = time.perf_counter()
        if side == "multifora":
            sv = ctx.start_multifora(dbpath)
        else:
            sv = ctx.start_multifora()
        c = sv.client(maxPoolSize=1, serverSelectionTimeoutMS=60000)
        c.admin.command("ping")
        seconds = time.perf_counter() - t
        if side == "multifora":
            expect(c.bench.c.count_documents({}) == n, "count after reopen")
            expect(c.bench.conc.count_documents({}) == conc_expected,
                   "acknowledged durable inserts lost by kill -9")
            last = data.ids[-1]
            expect(c.bench.c.find_one({"_id": last})["k"] == data.k[-1], "last document")
            reopen_rss.append(sv.rss_bytes() / 2**20)
            sv.kill9()
        else:
            sv.stop()
        return seconds
    vals = ctx.alternate(s.reopens, start, ("multifora", "empty"))
    rows.append(ctx.row("kill -9 reopen", "s", vals["multifora"], vals["empty"],
                        note="spawn until the first ping answers; floor: start on an empty "
                        f"directory; the first, after the writes: {vals['multifora'][0]:.2f} s; "
                        f"RSS after reopen {statistics.median(reopen_rss):,.0f} MiB"))

    # Bytes on disk after a clean shutdown.
    sv = ctx.start_multifora(dbpath)
    sv.stop()
    rows.append(ctx.row("bytes on disk, after clean shutdown", "MiB",
                        [ctx.disk_bytes(dbpath) / 2**20], [data_mib],
                        note="floor: the 16 KiB documents' bytes"))

    notes.append(f"bench.c: {n:,} documents of {DOC_BYTES:,} BSON bytes "
                 f"({data_mib:,.0f} MiB), k = i % {KEYS}, p uniform in [0, 1); every "
                 "MultiforaDB answer was checked against the generated data.")
    notes.append("The floor is the stub server (ok, n: 1, an empty cursor): the driver's "
                 "encoding, one loopback round trip and decoding a tiny reply. Rows that "
                 "return documents (findOne, sort, projection, $group) also pay for decoding "
                 "them on MultiforaDB's side only.")
    notes.append("For the reopen row the floor is the same server started on an empty "
                 "directory (interpreter, import, listen); for bytes on disk it is the "
                 "documents' own bytes.")
    return {"part": "table", "rows": rows, "notes": notes}


def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0
