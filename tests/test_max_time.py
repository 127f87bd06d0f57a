"""maxTimeMS as mongod applies it.

A query that finds nothing for a long stretch returns no row, so the time
is checked inside the scan (every 128 works), not only between rows; the
commands that run scans -- find, getMore, count, distinct, aggregate,
update, delete, findAndModify -- all fail with MaxTimeMSExpired (50).  A
cursor's maxTimeMS is a budget for its whole life: each getMore runs with
what is left, and time between getMores is not counted.  getMore's own
maxTimeMS is refused (BadValue): it is only for tailable awaitData cursors,
which need capped collections.

The slow filter below evaluates a 4,000-element $range per document (about
0.2 ms on the machines this was written on), so scanning the 2,000
documents takes hundreds of milliseconds against budgets of 10 to 50 ms:
the outcome does not depend on the machine's speed within a factor of ten.
"""
from __future__ import annotations

import time

import pytest
from pymongo.errors import ExecutionTimeout, OperationFailure

N = 2000
# false for every document, after real work: a $range of 4,000 per document
SLOW_FALSE = {"$gt": [{"$size": {"$range": [0, 4000]}}, 10**9]}
NOTHING = {"$expr": SLOW_FALSE}
# matches _id 0 at once, then nothing, slowly
FIRST_ONLY = {"$expr": {"$or": [{"$eq": ["$_id", 0]}, SLOW_FALSE]}}


@pytest.fixture
def db(client):
    db = client.t
    db.c.insert_many([{"_id": i, "r": i, "g": i % 7} for i in range(N)])
    return db


def expired(e) -> bool:
    d = e.value.details
    return e.value.code == 50 and d["codeName"] == "MaxTimeMSExpired" and \
        d["errmsg"].endswith("operation exceeded time limit")


@pytest.mark.parametrize("command", [
    lambda db: db.command("find", "c", filter=NOTHING, maxTimeMS=10),
    lambda db: db.command("count", "c", query=NOTHING, maxTimeMS=10),
    lambda db: db.command("distinct", "c", key="r", query=NOTHING, maxTimeMS=10),
    lambda db: db.command("aggregate", "c", pipeline=[{"$match": NOTHING}], cursor={},
                          maxTimeMS=10),
    lambda db: db.command("aggregate", "c", pipeline=[{"$match": NOTHING}, {"$count": "n"}],
                          cursor={}, maxTimeMS=10),
    lambda db: db.command("update", "c", updates=[{"q": NOTHING, "u": {"$set": {"x": 1}},
                                                    "multi": True}], maxTimeMS=10),
    lambda db: db.command("delete", "c", deletes=[{"q": NOTHING, "limit": 0}], maxTimeMS=10),
    lambda db: db.command("findAndModify", "c", query=NOTHING, update={"$set": {"x": 1}},
                          maxTimeMS=10),
    lambda db: db.command("findAndModify", "c", query=NOTHING, remove=True, maxTimeMS=10),
], ids=["find", "count", "distinct", "aggregate", "aggregate-count", "update", "delete",
        "findAndModify", "findAndModify-remove"])
def test_a_collection_scan_that_finds_nothing_runs_out_of_time(db, command):
    with pytest.raises(OperationFailure) as e:
        command(db)
    assert expired(e), e.value.details
    assert db.c.count_documents({"x": {"$exists": True}}) == 0
    assert db.c.count_documents({}) == N


def test_index_scans_that_fetch_nothing_run_out_of_time(db):
    db.c.create_index("r")
    db.c.create_index("g")
    cases = [
        # one index, hinted: every key fetched, no document kept
        dict(filter={"r": {"$gte": 0}, **NOTHING}, hint="r_1"),
        # two candidate indexes: the trials run out of time too
        dict(filter={"r": {"$gte": 0}, "g": {"$gte": 0}, **NOTHING}),
        # an $or over two indexes: its clauses' scans
        dict(filter={"$or": [{"r": {"$gte": 0}}, {"g": {"$gte": 0}}], **NOTHING}),
        # point lookups in a unique index ($in of every value)
        dict(filter={"_id": {"$in": list(range(N))}, **NOTHING}),
    ]
    for args in cases:
        with pytest.raises(OperationFailure) as e:
            db.command("find", "c", maxTimeMS=10, **args)
        assert expired(e), (args, e.value.details)
        with pytest.raises(OperationFailure) as e:
            db.command("count", "c", query=args["filter"], maxTimeMS=10,
                       **({"hint": args["hint"]} if "hint" in args else {}))
        assert expired(e), (args, e.value.details)


def test_without_max_time_or_with_enough_the_same_queries_answer(db):
    db.c.create_index("r")
    assert db.command("find", "c", filter={"r": {"$lt": 50}, **NOTHING},
                      maxTimeMS=0)["cursor"]["firstBatch"] == []
    r = db.command("find", "c", filter={"r": {"$lt": 50}, "$expr": {"$lt": ["$r", 3]}},
                   maxTimeMS=60_000)
    assert [d["_id"] for d in r["cursor"]["firstBatch"]] == [0, 1, 2]
    assert db.command("count", "c", query={"g": 3}, maxTimeMS=60_000)["n"] == \
        len([i for i in range(N) if i % 7 == 3])
    r = db.command("update", "c", updates=[{"q": {"g": 0}, "u": {"$set": {"x": 1}},
                                             "multi": True}], maxTimeMS=60_000)
    assert r["n"] == r["nModified"] == len(range(0, N, 7))


def test_pymongo_cursor_raises_execution_timeout(db):
    with pytest.raises(ExecutionTimeout) as e:
        list(db.c.find(NOTHING).max_time_ms(10))
    assert e.value.code == 50


def test_a_getmore_runs_on_what_the_find_left(db):
    r = db.command("find", "c", filter=FIRST_ONLY, batchSize=1, maxTimeMS=50)
    assert r["cursor"]["firstBatch"] == [{"_id": 0, "r": 0, "g": 0}]
    cid = r["cursor"]["id"]
    assert cid != 0
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", cid, collection="c")
    assert expired(e), e.value.details
    assert "getMore" in e.value.details["errmsg"]
    # the error closed the cursor, as mongod's
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", cid, collection="c")
    assert e.value.code == 43


def test_an_aggregate_cursor_runs_on_what_the_aggregate_left(db):
    # The read under a pipeline fetches documents in chunks (as mongod's
    # DocumentSourceCursor does), so a $match of FIRST_ONLY would scan the
    # whole collection for the first batch; the slow work is a later
    # stage's here, done one document at a time.
    pipeline = [{"$project": {"g": 0}}, {"$addFields": {"n": {"$size": {"$range": [0, 4000]}}}}]
    r = db.command("aggregate", "c", pipeline=pipeline, cursor={"batchSize": 1}, maxTimeMS=50)
    assert r["cursor"]["firstBatch"] == [{"_id": 0, "r": 0, "n": 4000}]
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", r["cursor"]["id"], collection="c")
    assert expired(e), e.value.details


def test_time_between_getmores_is_not_counted(db):
    find = db.command("find", "c", batchSize=2, maxTimeMS=1000)
    agg = db.command("aggregate", "c", pipeline=[{"$project": {"g": 0}}],
                     cursor={"batchSize": 2}, maxTimeMS=1000)
    time.sleep(1.3)
    for r in (find, agg):
        got = [d["_id"] for d in r["cursor"]["firstBatch"]]
        cid = r["cursor"]["id"]
        while cid:
            more = db.command("getMore", cid, collection="c", batchSize=500)["cursor"]
            got += [d["_id"] for d in more["nextBatch"]]
            cid = more["id"]
        assert got == list(range(N))


def test_getmore_refuses_its_own_max_time(db):
    for r in (db.command("find", "c", batchSize=2),
              db.command("aggregate", "c", pipeline=[], cursor={"batchSize": 2})):
        cid = r["cursor"]["id"]
        with pytest.raises(OperationFailure) as e:
            db.command("getMore", cid, collection="c", maxTimeMS=1000)
        assert e.value.code == 2
        assert e.value.details["errmsg"] == \
            "cannot set maxTimeMS on getMore command for a non-awaitData cursor"
        # the cursor stays
        more = db.command("getMore", cid, collection="c", batchSize=3)["cursor"]
        assert [d["_id"] for d in more["nextBatch"]] == [2, 3, 4]
    # the namespace is checked first
    cid = db.command("find", "c", batchSize=2)["cursor"]["id"]
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", cid, collection="other", maxTimeMS=1000)
    assert e.value.code == 13


@pytest.mark.parametrize("name,args", [
    ("count", {"query": {}}),
    ("update", {"updates": [{"q": {}, "u": {"$set": {"x": 1}}}]}),
    ("delete", {"deletes": [{"q": {}, "limit": 1}]}),
    ("findAndModify", {"query": {}, "remove": True}),
])
def test_bad_max_time_values_are_refused(db, name, args):
    for value, code in ((-1, 2), (2**31, 2), ("x", 14)):
        with pytest.raises(OperationFailure) as e:
            db.command(name, "c", maxTimeMS=value, **args)
        assert e.value.code == code, (name, value, e.value.details)
    assert db.c.count_documents({}) == N
    assert db.c.count_documents({"x": 1}) == 0
