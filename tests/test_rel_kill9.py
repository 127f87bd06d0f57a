"""Reliability: kill -9 under load (issue 7).

A ``python -m multifora serve`` child takes writes from 8 pymongo writer
threads (inserts, insert batches, updates, replacements, deletes, and one
createIndex/dropIndexes per round) and reads from 2 reader threads; at a
random moment it gets SIGKILL.  It is restarted over the same directory and
the client-side record is checked against what recovery kept:

- the database opens;
- every acknowledged write is there with its value;
- an unacknowledged write is wholly there or wholly absent (each key is
  written by one thread only, in sequence, so for each key the allowed
  states are exactly: after its last acknowledged write, or after the one
  write in flight when the server died);
- no _id appears twice;
- ``validate`` is clean (every index agrees with the records, key for key).

The same directory carries over from round to round, so each recovery starts
from the previous one's result.  CI runs 50 short rounds (0.05 - 0.6 s of
load each); ``pytest test_rel_kill9.py --rounds 1000`` runs the large
setting.  docs/reliability.md records the figures.
"""
from __future__ import annotations

import os
import random
import signal
import threading
import time

import pymongo
import pytest
from pymongo.errors import AutoReconnect, BulkWriteError, ConnectionFailure, OperationFailure

from conftest import ServedProcess

WRITERS = 8
READERS = 2
ABSENT = None  # the state of a key with no document


def _client(srv: ServedProcess) -> pymongo.MongoClient:
    return srv.client(retryWrites=False, retryReads=False, serverSelectionTimeoutMS=1000,
                      socketTimeoutMS=10000, connectTimeoutMS=2000, maxPoolSize=16)


class Writer(threading.Thread):
    """One writer: owns the keys "w<t>-<n>" and writes them in sequence.

    ``state[key]`` is the document as of the last acknowledged write
    (ABSENT when none); ``inflight`` is {key: document or ABSENT} for the
    write that got no reply (the server died under it), if any."""

    def __init__(self, t: int, coll, rng: random.Random, state: dict, next_n: int, stop):
        super().__init__(daemon=True)
        self.t, self.coll, self.rng, self.state = t, coll, rng, state
        self.next_n = next_n
        self.stop_ev = stop
        self.inflight: dict = {}
        self.acked = 0
        self.error: BaseException | None = None
        self.seq = 0

    def _doc(self, key: str) -> dict:
        self.seq += 1
        big = self.rng.random() < 0.03
        return {"_id": key, "owner": self.t, "v": self.rng.randrange(1_000_000),
                "seq": self.seq, "tags": [self.rng.randrange(50) for _ in range(self.rng.randrange(4))],
                "pad": "x" * (self.rng.randrange(6000, 20000) if big else self.rng.randrange(200))}

    def _live(self) -> list:
        return [k for k, d in self.state.items() if d is not ABSENT]

    def _one(self) -> None:
        r = self.rng.random()
        live = self._live()
        if r < 0.35 or len(live) < 5:
            key = f"w{self.t}-{self.next_n}"
            self.next_n += 1
            doc = self._doc(key)
            self.inflight = {key: doc}
            self.coll.insert_one(doc)
        elif r < 0.45:
            docs = []
            for _ in range(self.rng.randrange(2, 6)):
                key = f"w{self.t}-{self.next_n}"
                self.next_n += 1
                docs.append(self._doc(key))
            self.inflight = {d["_id"]: d for d in docs}
            self.coll.insert_many(docs, ordered=True)
        elif r < 0.70:
            key = self.rng.choice(live)
            new = dict(self.state[key])
            self.seq += 1
            new.update(v=self.rng.randrange(1_000_000), seq=self.seq)
            new["tags"] = [self.rng.randrange(50) for _ in range(self.rng.randrange(4))]
            self.inflight = {key: new}
            res = self.coll.update_one({"_id": key},
                                       {"$set": {"v": new["v"], "seq": new["seq"],
                                                 "tags": new["tags"]}})
            assert res.matched_count == 1, (key, res.raw_result)
        elif r < 0.82:
            key = self.rng.choice(live)
            new = self._doc(key)
            self.inflight = {key: new}
            res = self.coll.replace_one({"_id": key}, new)
            assert res.matched_count == 1, (key, res.raw_result)
        else:
            key = self.rng.choice(live)
            self.inflight = {key: ABSENT}
            res = self.coll.delete_one({"_id": key})
            assert res.deleted_count == 1, (key, res.raw_result)
        # acknowledged: the in-flight write is now the state
        self.state.update(self.inflight)
        self.inflight = {}
        self.acked += 1

    def run(self) -> None:
        try:
            while not self.stop_ev.is_set():
                self._one()
        except (AutoReconnect, ConnectionFailure):
            pass  # the server died under this write: it stays in `inflight`
        except BulkWriteError as e:
            # An insert batch cut by the kill has no such reply; anything
            # else is a real failure.
            self.error = e
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


class Reader(threading.Thread):
    def __init__(self, coll, rng: random.Random, stop):
        super().__init__(daemon=True)
        self.coll, self.rng, self.stop_ev = coll, rng, stop
        self.reads = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_ev.is_set():
                lo = self.rng.randrange(1_000_000)
                for d in self.coll.find({"v": {"$gte": lo}}).sort("v", 1).limit(20):
                    assert d["v"] >= lo and "owner" in d
                self.coll.count_documents({"owner": self.rng.randrange(WRITERS)})
                self.reads += 1
        except (AutoReconnect, ConnectionFailure):
            pass
        except BaseException as e:  # noqa: BLE001
            self.error = e


class Indexer(threading.Thread):
    """Builds (or drops) a secondary index during the load."""

    def __init__(self, coll, build: bool, stop):
        super().__init__(daemon=True)
        self.coll, self.build, self.stop_ev = coll, build, stop
        self.acked = None  # True once the server replied
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            time.sleep(0.02)
            if self.build:
                self.coll.create_index([("tags", 1), ("seq", -1)], name="tags_seq")
            else:
                self.coll.drop_index("tags_seq")
            self.acked = True
        except (AutoReconnect, ConnectionFailure):
            self.acked = False
        except BaseException as e:  # noqa: BLE001
            self.error = e


def _check_round(coll, writers, round_no: int, index_expect) -> dict:
    """Compare the recovered collection with the writers' records; returns
    counts, raises AssertionError naming the first difference."""
    docs = list(coll.find({}).sort("_id", 1))
    ids = [d["_id"] for d in docs]
    assert len(ids) == len(set(ids)), f"round {round_no}: duplicate _id"
    found = {d["_id"]: d for d in docs}
    n_inflight_kept = n_inflight_lost = 0
    for w in writers:
        keys = set(w.state) | set(w.inflight)
        for key in keys:
            got = found.pop(key, ABSENT)
            acked = w.state.get(key, ABSENT)
            if got == acked:
                if key in w.inflight and w.inflight[key] != acked:
                    n_inflight_lost += 1
                continue
            assert key in w.inflight and got == w.inflight[key], (
                f"round {round_no}: key {key}: found {got!r}, acknowledged {acked!r}, "
                f"in flight {w.inflight.get(key, '<none>')!r}")
            n_inflight_kept += 1
    assert not found, f"round {round_no}: documents no writer wrote: {sorted(found)[:5]}"
    v = coll.database.command("validate", coll.name)
    assert v["valid"] is True, (round_no, v["errors"])
    assert v["nrecords"] == len(docs), (round_no, v["nrecords"], len(docs))
    names = {ix["name"] for ix in coll.list_indexes()}
    want, acked = index_expect
    if acked:
        assert (("tags_seq" in names) == want), (round_no, names)
    # validate counted every index's keys against the records
    assert set(v["keysPerIndex"]) == names, (v["keysPerIndex"], names)
    return {"docs": len(docs), "inflight_kept": n_inflight_kept,
            "inflight_lost": n_inflight_lost}


def test_kill9_under_load(tmp_path, request):
    rounds = request.config.getoption("--rounds") or 50
    seed = int(os.environ.get("MULTIFORA_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    dbpath = tmp_path / "db"
    states = [dict() for _ in range(WRITERS)]
    next_n = [0] * WRITERS
    totals = {"acked": 0, "reads": 0, "inflight_kept": 0, "inflight_lost": 0, "docs": 0,
              "index_builds": 0}
    closers: list = []
    t0 = time.monotonic()
    srv = ServedProcess(dbpath).start()
    try:
        c = _client(srv)
        coll = c.rel.k9
        coll.create_index("v")
        coll.create_index([("owner", 1), ("v", -1)])
        c.close()
        for rnd in range(rounds):
            c = _client(srv)
            coll = c.rel.k9
            stop = threading.Event()
            writers = [Writer(t, coll, random.Random(rng.random()), states[t], next_n[t], stop)
                       for t in range(WRITERS)]
            readers = [Reader(coll, random.Random(rng.random()), stop) for _ in range(READERS)]
            has_index = "tags_seq" in {ix["name"] for ix in coll.list_indexes()}
            indexer = Indexer(coll, not has_index, stop)
            for th in (*writers, *readers, indexer):
                th.start()
            time.sleep(rng.uniform(0.05, 0.6))
            srv.proc.send_signal(signal.SIGKILL)
            stop.set()  # a thread between two writes starts no third
            srv.proc.wait(timeout=30)
            for th in (*writers, *readers, indexer):
                th.join(timeout=30)
                assert not th.is_alive(), "a client thread hung after the kill"
            # Closing a client whose server died waits about a second for
            # its monitor: let that happen beside the next round.
            closer = threading.Thread(target=c.close, daemon=True)
            closer.start()
            closers.append(closer)
            for th in (*writers, *readers, indexer):
                assert th.error is None, f"round {rnd} (seed {seed}): {th.error!r}"
            srv.stop()
            srv = ServedProcess(dbpath).start()
            c = _client(srv)
            counts = _check_round(c.rel.k9, writers, rnd,
                                  (not has_index, indexer.acked))
            c.close()
            totals["index_builds"] += 0 if has_index else 1
            for w in writers:
                totals["acked"] += w.acked
                next_n[w.t] = w.next_n
            totals["reads"] += sum(r.reads for r in readers)
            totals["inflight_kept"] += counts["inflight_kept"]
            totals["inflight_lost"] += counts["inflight_lost"]
            totals["docs"] = counts["docs"]
            # carry the recovered state into the next round
            c = _client(srv)
            recovered = {d["_id"]: d for d in c.rel.k9.find({})}
            c.close()
            for w in writers:
                for key in set(w.state) | set(w.inflight):
                    w.state[key] = recovered.get(key, ABSENT)
                w.inflight = {}
    finally:
        srv.kill()
        srv.stop()
        for th in closers:
            th.join(timeout=30)
    elapsed = time.monotonic() - t0
    print(f"\nkill -9: {rounds} rounds, seed {seed}, {totals['acked']} acknowledged writes "
          f"(0 lost), {totals['inflight_kept']} in-flight writes kept, "
          f"{totals['inflight_lost']} in-flight writes absent, {totals['reads']} reads, "
          f"{totals['index_builds']} index builds under load, {totals['docs']} documents "
          f"at the end, {elapsed:.1f} s")
