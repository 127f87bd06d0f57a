"""Snapshot reads outside transactions in the one-member replica set
(issue 47; coll/txn.c's history window, command/generic_args.c,
docs/transactions.md).

What is asserted: `readConcern: {level: "snapshot"}` on find, aggregate and
distinct reads at one cluster time -- the newest, named in the reply's
`atClusterTime`, or the one given -- across every getMore of its cursor,
whatever is written meanwhile; a read at any time of the window sees
exactly the writes logged at or before it (a differential over random
writes, through the record and index paths); times past the clock are
InvalidOptions, times before the history kept (the window, the byte
budget, the last start) SnapshotTooOld; commands that do not read at a
snapshot refuse the level as mongod does; a standalone refuses it.
"""
from __future__ import annotations

import random
import time

import pymongo
import pytest
from bson.timestamp import Timestamp
from pymongo.errors import OperationFailure

import multifora


@pytest.fixture
def client(rs_client):
    return rs_client


def snap(at=None):
    rc = {"level": "snapshot"}
    if at is not None:
        rc["atClusterTime"] = at
    return rc


def find_at(db, coll, at=None, flt=None, **kw):
    r = db.command({"find": coll, "filter": flt or {}, "readConcern": snap(at), **kw})
    return r["cursor"]


def ids_and_values(docs):
    return sorted((d["_id"], d.get("v")) for d in docs)


def test_find_replies_its_cluster_time_and_reads_at_the_one_given(client):
    db = client.db
    db.c.insert_many([{"_id": i, "v": 0} for i in range(3)])
    first = find_at(db, "c")
    at = first["atClusterTime"]
    assert isinstance(at, Timestamp)
    assert ids_and_values(first["firstBatch"]) == [(0, 0), (1, 0), (2, 0)]
    db.c.update_one({"_id": 0}, {"$set": {"v": 1}})
    db.c.delete_one({"_id": 1})
    db.c.insert_one({"_id": 9, "v": 9})
    again = find_at(db, "c", at)
    assert again["atClusterTime"] == at
    assert ids_and_values(again["firstBatch"]) == [(0, 0), (1, 0), (2, 0)]
    # the newest, without a time
    assert ids_and_values(find_at(db, "c")["firstBatch"]) == [(0, 1), (2, 0), (9, 9)]
    # aggregate (in its cursor) and distinct (at the top) name it too
    agg = db.command({"aggregate": "c", "pipeline": [{"$sort": {"_id": 1}}], "cursor": {},
                      "readConcern": snap(at)})
    assert agg["cursor"]["atClusterTime"] == at
    assert [d["_id"] for d in agg["cursor"]["firstBatch"]] == [0, 1, 2]
    dis = db.command({"distinct": "c", "key": "v", "readConcern": snap(at)})
    assert dis["values"] == [0] and dis["atClusterTime"] == at


def test_a_cursor_keeps_its_snapshot_across_getmores(client):
    db = client.db
    db.c.insert_many([{"_id": i, "v": 0} for i in range(100)])
    cur = find_at(db, "c", batchSize=10, sort={"_id": 1})
    seen = list(cur["firstBatch"])
    db.c.update_many({}, {"$set": {"v": 1}})
    db.c.delete_many({"_id": {"$lt": 50}})
    db.c.insert_many([{"_id": 1000 + i, "v": 2} for i in range(20)])
    cid = cur["id"]
    while cid:
        more = db.command({"getMore": cid, "collection": "c", "batchSize": 10})["cursor"]
        seen += more["nextBatch"]
        cid = more["id"]
    assert ids_and_values(seen) == [(i, 0) for i in range(100)]


def test_a_lookup_run_by_a_getmore_reads_at_the_snapshot(client):
    """Each getMore of an aggregation runs its $lookup's reads afresh:
    they read at the cursor's snapshot too."""
    db = client.db
    db.orders.insert_many([{"_id": i, "item": i % 5} for i in range(40)])
    db.items.insert_many([{"_id": i, "price": 10} for i in range(5)])
    r = db.command({"aggregate": "orders", "readConcern": snap(), "cursor": {"batchSize": 4},
                    "pipeline": [{"$sort": {"_id": 1}},
                                 {"$lookup": {"from": "items", "localField": "item",
                                              "foreignField": "_id", "as": "i"}}]})
    rows, cid = list(r["cursor"]["firstBatch"]), r["cursor"]["id"]
    db.items.update_many({}, {"$set": {"price": 99}})
    db.items.delete_many({"_id": {"$gte": 3}})
    while cid:
        more = db.command({"getMore": cid, "collection": "orders", "batchSize": 4})["cursor"]
        rows += more["nextBatch"]
        cid = more["id"]
    assert len(rows) == 40
    assert all([x["price"] for x in row["i"]] == [10] for row in rows)


def test_an_index_scan_at_a_past_time_uses_the_versions(client):
    db = client.db
    db.c.create_index("v")
    db.c.insert_many([{"_id": i, "v": i} for i in range(10)])
    at = find_at(db, "c")["atClusterTime"]
    db.c.update_many({}, {"$inc": {"v": 100}})
    cur = find_at(db, "c", at, {"v": {"$gte": 5}}, sort={"v": 1}, hint={"v": 1})
    assert [d["v"] for d in cur["firstBatch"]] == [5, 6, 7, 8, 9]
    cur = find_at(db, "c", at, {"v": {"$gte": 100}}, hint={"v": 1})
    assert cur["firstBatch"] == []


def test_a_committed_transaction_is_seen_whole_at_its_time_and_not_before(client):
    db = client.db
    db.a.insert_one({"_id": 1, "n": 10})
    db.b.insert_one({"_id": 1, "n": 0})
    before = find_at(db, "a")["atClusterTime"]
    with client.start_session() as s:
        with s.start_transaction():
            db.a.update_one({"_id": 1}, {"$inc": {"n": -5}}, session=s)
            db.b.update_one({"_id": 1}, {"$inc": {"n": 5}}, session=s)
        committed = s.operation_time
    for coll, old, new in (("a", 10, 5), ("b", 0, 5)):
        assert find_at(db, coll, before)["firstBatch"][0]["n"] == old
        assert find_at(db, coll, committed)["firstBatch"][0]["n"] == new


def test_reads_at_every_time_match_a_model(client):
    """Random inserts, updates, deletes and replacements, one at a time;
    after each, the reply's operationTime and the state.  Reads at those
    times (in random order, by collection scan and by index) give exactly
    the state each write left."""
    rng = random.Random(47)
    db = client.db
    db.c.create_index("v")
    state, history = {}, []
    for step in range(300):
        op = rng.random()
        k = rng.randrange(40)
        if op < 0.35 or not state:
            if k in state:
                continue
            db.c.insert_one({"_id": k, "v": rng.randrange(10)})
            state[k] = db.c.find_one({"_id": k})["v"]
        elif op < 0.7:
            k = rng.choice(sorted(state))
            v = rng.randrange(10)
            db.c.update_one({"_id": k}, {"$set": {"v": v}})
            state[k] = v
        elif op < 0.85:
            k = rng.choice(sorted(state))
            v = rng.randrange(10)
            db.c.replace_one({"_id": k}, {"v": v, "w": step})
            state[k] = v
        else:
            k = rng.choice(sorted(state))
            db.c.delete_one({"_id": k})
            del state[k]
        at = db.command("ping")["operationTime"]
        history.append((at, dict(state)))
    rng.shuffle(history)
    for at, want in history[:120]:
        got = find_at(db, "c", at, batchSize=7)
        docs, cid = list(got["firstBatch"]), got["id"]
        while cid:
            more = db.command({"getMore": cid, "collection": "c", "batchSize": 7})["cursor"]
            docs += more["nextBatch"]
            cid = more["id"]
        assert ids_and_values(docs) == sorted(want.items()), at
        lo = rng.randrange(10)
        by_index = find_at(db, "c", at, {"v": {"$gte": lo}}, hint={"v": 1})["firstBatch"]
        assert ids_and_values(by_index) == sorted((k, v) for k, v in want.items() if v >= lo)


def test_a_time_past_the_clock_is_invalid(client):
    db = client.db
    db.c.insert_one({"_id": 1})
    now = db.command("ping")["operationTime"]
    with pytest.raises(OperationFailure) as e:
        find_at(db, "c", Timestamp(now.time + 100, 1))
    assert e.value.code == 72
    assert "must not be greater than the current clusterTime" in str(e.value)


def test_times_before_the_kept_history_are_snapshot_too_old(tmp_path):
    path = str(tmp_path / "db")
    with multifora.Server(path, port=0, replica_set="rs0") as srv:
        c = pymongo.MongoClient(srv.uri)
        c.db.c.insert_one({"_id": 1})
        early = c.db.command("ping")["operationTime"]
        c.db.c.insert_one({"_id": 2})
        last = c.db.command("ping")["operationTime"]
        c.close()
    with multifora.Server(path, port=0, replica_set="rs0") as srv:
        c = pymongo.MongoClient(srv.uri)
        db = c.db
        # no history is kept of the writes before this start: the time of
        # the last of them is the oldest a read may ask for
        with pytest.raises(OperationFailure) as e:
            find_at(db, "c", early)
        assert e.value.code == 239 and e.value.details["codeName"] == "SnapshotTooOld"
        db.c.insert_one({"_id": 3})
        assert [d["_id"] for d in find_at(db, "c", last)["firstBatch"]] == [1, 2]
        # the window: a second, then times older than it are refused
        t1 = db.command("ping")["operationTime"]
        assert c.admin.command("setParameter", 1, minSnapshotHistoryWindowInSeconds=1)["was"] == 300
        time.sleep(2.2)
        db.c.insert_one({"_id": 4})
        with pytest.raises(OperationFailure) as e:
            find_at(db, "c", t1)
        assert e.value.code == 239
        c.admin.command("setParameter", 1, minSnapshotHistoryWindowInSeconds=300)
        # the budget: past it the oldest versions go, and times before them
        t2 = db.command("ping")["operationTime"]
        c.admin.command("setParameter", 1, multiforaSnapshotHistoryMaxBytes=20000)
        for i in range(400):
            db.c.update_one({"_id": 2}, {"$set": {"pad": "x" * 200, "i": i}})
        with pytest.raises(OperationFailure) as e:
            find_at(db, "c", t2)
        assert e.value.code == 239
        recent = db.command("ping")["operationTime"]
        assert find_at(db, "c", recent, {"_id": 2})["firstBatch"][0]["i"] == 399
        c.close()


def test_the_history_stays_within_its_budget(client):
    db = client.db
    client.admin.command("setParameter", 1, multiforaSnapshotHistoryMaxBytes=1 << 20)
    db.c.insert_many([{"_id": i, "pad": "p" * 200} for i in range(2000)])
    first = db.command("ping")["operationTime"]
    peak = 0
    for r in range(10):
        db.c.update_many({}, {"$set": {"r": r}})
        h = client.admin.command("serverStatus")["multifora"]["snapshotHistory"]
        peak = max(peak, h["bytes"])
        assert h["maxBytes"] == 1 << 20
    assert 0 < peak <= 1 << 20
    assert h["versions"] > 0 and h["oldestTimestamp"] > first
    with pytest.raises(OperationFailure) as e:
        find_at(db, "c", first)
    assert e.value.code == 239
    at = db.command("ping")["operationTime"]
    assert h["oldestTimestamp"] <= at
    assert {d["r"] for d in find_at(db, "c", at, batchSize=5000)["firstBatch"]} == {9}


def test_an_open_snapshot_cursor_keeps_its_versions_past_the_budget(client):
    db = client.db
    db.c.insert_many([{"_id": i, "v": 0} for i in range(50)])
    client.admin.command("setParameter", 1, multiforaSnapshotHistoryMaxBytes=20000)
    cur = find_at(db, "c", batchSize=5, sort={"_id": 1})
    for r in range(20):
        db.c.update_many({}, {"$set": {"v": r + 1, "pad": "y" * 100}})
    seen, cid = list(cur["firstBatch"]), cur["id"]
    while cid:
        more = db.command({"getMore": cid, "collection": "c", "batchSize": 5})["cursor"]
        seen += more["nextBatch"]
        cid = more["id"]
    assert ids_and_values(seen) == [(i, 0) for i in range(50)]


@pytest.mark.parametrize("cmd, why", [
    ({"insert": "c", "documents": [{"x": 1}]}, "read concern not supported"),
    ({"update": "c", "updates": [{"q": {}, "u": {"$set": {"x": 1}}}]},
     "read concern not supported"),
    ({"delete": "c", "deletes": [{"q": {}, "limit": 1}]}, "read concern not supported"),
    ({"findAndModify": "c", "query": {}, "update": {"$set": {"x": 1}}},
     "read concern not supported"),
    ({"listCollections": 1}, "read concern not supported"),
    ({"listIndexes": "c"}, "read concern not supported"),
    ({"count": "c"}, "read concern snapshot not supported"),
    ({"aggregate": "c", "pipeline": [{"$out": "d"}], "cursor": {}}, "$out and $merge"),
])
def test_commands_that_do_not_read_at_a_snapshot_refuse_it(client, cmd, why):
    client.db.c.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as e:
        client.db.command(dict(cmd, readConcern={"level": "snapshot"}))
    assert e.value.code == 72, e.value.details
    assert why in e.value.details["errmsg"]
    assert client.db.c.count_documents({}) == 1
    assert "d" not in client.db.list_collection_names()


def test_a_pymongo_snapshot_session_reads_one_snapshot(client):
    db = client.db
    db.c.insert_many([{"_id": i, "v": 0} for i in range(5)])
    with client.start_session(snapshot=True) as s:
        assert ids_and_values(db.c.find({}, session=s)) == [(i, 0) for i in range(5)]
        db.c.update_many({}, {"$set": {"v": 1}})
        assert ids_and_values(db.c.find({}, session=s)) == [(i, 0) for i in range(5)]
        assert db.c.distinct("v", session=s) == [0]
        assert [d["n"] for d in db.c.aggregate([{"$count": "n"}], session=s)] == [5]
    assert sorted(db.c.distinct("v")) == [1]


def test_a_standalone_refuses_snapshot_reads(tmp_path):
    with multifora.Server(str(tmp_path / "db"), port=0) as srv:
        c = pymongo.MongoClient(srv.uri)
        with pytest.raises(OperationFailure) as e:
            c.db.command({"find": "c", "readConcern": {"level": "snapshot"}})
        assert e.value.code == 123
        c.close()
