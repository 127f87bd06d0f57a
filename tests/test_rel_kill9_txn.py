"""Reliability: kill -9 under a load of transactions and retryable writes
(issue 47).

A ``python -m multifora serve --replSet rs0`` child runs, from 4 threads,
transactions that move money between 8 accounts and record the move in a
ledger (two updates and one insert, committed together), and, from 2
threads, retryable inserts (explicit lsid and txnNumber); at a random
moment it gets SIGKILL.  It is restarted over the same directory and:

- every transaction is wholly there or wholly absent: the balances equal
  the initial ones plus the moves of the ledger entries present, so the
  total never changes;
- every acknowledged commit's ledger entry is there; an unacknowledged one
  is there or not;
- every acknowledged retryable insert is there once; the one in flight,
  sent again with its lsid and txnNumber after the restart, is applied
  exactly once (there once, whether or not the first attempt landed);
- ``validate`` is clean.

The directory carries over from round to round.  CI runs 50 short rounds
(0.05 - 0.5 s of load each); ``--rounds N`` runs more.
"""
from __future__ import annotations

import random
import signal
import threading
import time
import uuid

import pymongo
import pytest
from bson.int64 import Int64
from pymongo.errors import PyMongoError

import multifora
from conftest import ServedProcess

ACCOUNTS = 8
START = 1000


def _client(srv):
    return srv.client(retryWrites=False, retryReads=False, serverSelectionTimeoutMS=1000,
                      socketTimeoutMS=10000, connectTimeoutMS=2000, directConnection=True)


class Mover(threading.Thread):
    def __init__(self, client, rng, stop):
        super().__init__(daemon=True)
        self.client, self.rng, self.stop_ev = client, rng, stop
        self.acked, self.inflight, self.error = [], None, None

    def run(self):
        db = self.client.bank
        while not self.stop_ev.is_set():
            a, b = self.rng.sample(range(ACCOUNTS), 2)
            move = {"_id": uuid.uuid4().hex, "from": a, "to": b, "amt": self.rng.randint(1, 9)}
            self.inflight = move
            try:
                with self.client.start_session() as s:
                    s.start_transaction()
                    db.accts.update_one({"_id": a}, {"$inc": {"bal": -move["amt"]}}, session=s)
                    db.accts.update_one({"_id": b}, {"$inc": {"bal": move["amt"]}}, session=s)
                    db.ledger.insert_one(move, session=s)
                    s.commit_transaction()
            except pymongo.errors.OperationFailure as e:
                if e.has_error_label("TransientTransactionError"):
                    self.inflight = None  # a conflict: aborted, retried by a new move
                    continue
                if not self.stop_ev.is_set():
                    self.error = e
                return
            except PyMongoError:
                return  # the server died under it: in flight
            self.acked.append(move["_id"])
            self.inflight = None


class Inserter(threading.Thread):
    def __init__(self, client, t, next_n, stop):
        super().__init__(daemon=True)
        self.client, self.t, self.n, self.stop_ev = client, t, next_n, stop
        self.session = client.start_session()
        self.lsid = self.session.session_id
        self.acked, self.inflight, self.error = [], None, None

    def run(self):
        db = self.client.bank
        while not self.stop_ev.is_set():
            self.n += 1
            doc_id = f"i{self.t}-{self.n}"
            cmd = {"insert": "docs", "documents": [{"_id": doc_id}], "txnNumber": Int64(self.n)}
            self.inflight = (dict(cmd, lsid=self.lsid), doc_id)
            try:
                r = db.command(cmd, session=self.session)
            except PyMongoError:
                return
            if r.get("n") != 1:
                self.error = AssertionError(f"insert {doc_id}: {r}")
                return
            self.acked.append(doc_id)
            self.inflight = None


def test_kill9_transactions_and_retryable_writes(tmp_path, request):
    rounds = request.config.getoption("--rounds") or 50
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    dbpath = tmp_path / "db"
    srv = ServedProcess(dbpath, extra=["--replSet", "rs0"]).start()
    committed, maybe = set(), set()
    next_n = [0, 0]
    totals = {"commits": 0, "inserts": 0, "inflight_commits_kept": 0, "retried": 0}
    t0 = time.monotonic()
    try:
        c = _client(srv)
        c.bank.accts.insert_many([{"_id": i, "bal": START} for i in range(ACCOUNTS)])
        c.close()
        for rnd in range(rounds):
            c = _client(srv)
            stop = threading.Event()
            movers = [Mover(c, random.Random(rng.random()), stop) for _ in range(4)]
            inserters = [Inserter(c, t, next_n[t], stop) for t in range(2)]
            for th in (*movers, *inserters):
                th.start()
            time.sleep(rng.uniform(0.05, 0.5))
            srv.proc.send_signal(signal.SIGKILL)
            stop.set()
            srv.proc.wait(timeout=30)
            for th in (*movers, *inserters):
                th.join(timeout=30)
                assert not th.is_alive(), "a client thread hung after the kill"
                assert th.error is None, f"round {rnd} (seed {seed}): {th.error!r}"
            threading.Thread(target=c.close, daemon=True).start()
            srv.stop()
            srv = ServedProcess(dbpath, extra=["--replSet", "rs0"]).start()
            c = _client(srv)
            db = c.bank
            ledger = {d["_id"]: d for d in db.ledger.find()}
            for m in movers:
                committed.update(m.acked)
                totals["commits"] += len(m.acked)
                if m.inflight:
                    maybe.add(m.inflight["_id"])
            missing = committed - set(ledger)
            assert not missing, f"round {rnd} (seed {seed}): acknowledged commits lost"
            unknown = set(ledger) - committed - maybe
            assert not unknown, f"round {rnd} (seed {seed}): commits nobody made"
            totals["inflight_commits_kept"] += len(set(ledger) & maybe - committed)
            committed |= set(ledger) & maybe
            maybe -= set(ledger)
            bal = {i: START for i in range(ACCOUNTS)}
            for mv in ledger.values():
                bal[mv["from"]] -= mv["amt"]
                bal[mv["to"]] += mv["amt"]
            assert {d["_id"]: d["bal"] for d in db.accts.find()} == bal, \
                f"round {rnd} (seed {seed}): a transaction is partly there"
            # retryable inserts: acknowledged ones there
            present = {d["_id"] for d in db.docs.find({}, {"_id": 1})}
            for ins in inserters:
                totals["inserts"] += len(ins.acked)
                assert set(ins.acked) <= present, f"round {rnd} (seed {seed}): insert lost"
                next_n[ins.t] = ins.n
            for coll in ("accts", "ledger", "docs"):
                assert db.command("validate", coll)["valid"] is True
            c.close()
            # the one in flight, sent again after the restart with its own
            # lsid and txnNumber (the in-process path: a driver would put its
            # own session's), is applied exactly once
            retry = [ins.inflight for ins in inserters if ins.inflight]
            if retry:
                srv.stop()
                with multifora.Server(str(dbpath), port=0, replica_set="rs0") as e:
                    for cmd, doc_id in retry:
                        r = e.command("bank", cmd)
                        assert r["n"] == 1 and "writeErrors" not in r, r
                        n = e.command("bank", {"count": "docs", "query": {"_id": doc_id}})["n"]
                        assert n == 1, f"round {rnd} (seed {seed}): {doc_id} x {n}"
                        totals["retried"] += 1
                srv = ServedProcess(dbpath, extra=["--replSet", "rs0"]).start()
    finally:
        srv.kill()
        srv.stop()
    print(f"\nkill -9 with transactions: {rounds} rounds, seed {seed}, "
          f"{totals['commits']} acknowledged commits (0 lost, none partial), "
          f"{totals['inflight_commits_kept']} in-flight commits kept, "
          f"{totals['inserts']} acknowledged retryable inserts (0 lost), "
          f"{totals['retried']} in-flight inserts retried once, "
          f"{time.monotonic() - t0:.1f} s")
