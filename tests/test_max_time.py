"""maxTimeMS as mongod applies it.

A query that finds nothing for a long stretch returns no row, so the time
is checked as the work is done, not only between rows: every scan work,
pipeline document and written record counts into the operation's one
deadline, which reads the clock every 128 counts.  So a scan that finds
nothing, a $lookup made of many short scans and a bulk write of many short
statements all stop.  A cursor's maxTimeMS is a budget for its whole life:
each getMore runs with what is left, and time between getMores is not
counted.  getMore's own maxTimeMS is refused (BadValue): it is only for
tailable awaitData cursors, which need capped collections.  explain applies
the smaller of its own and its command's.  The value is validated as
mongod's parseMaxTimeMS does for every command, aggregate's IDL first.

The slow filter below evaluates an 8,000-element $range per document
(about 0.4 ms on the machines this was written on), so scanning the 2,000
documents takes most of a second against budgets of 10 to 40 ms.
"""
from __future__ import annotations

import time

import pytest
from bson.decimal128 import Decimal128
from pymongo.errors import ExecutionTimeout, OperationFailure

N = 2000
# false for every document, after real work: a $range of 8,000 per document
SLOW_FALSE = {"$gt": [{"$size": {"$range": [0, 8000]}}, 10**9]}
NOTHING = {"$expr": SLOW_FALSE}
# matches _id 0 at once, then nothing, slowly
FIRST_ONLY = {"$expr": {"$or": [{"$eq": ["$_id", 0]}, SLOW_FALSE]}}


@pytest.fixture
def db(client):
    db = client.t
    db.c.insert_many([{"_id": i, "r": i, "g": i % 7} for i in range(N)])
    return db


def expired(e, context: str | None = None) -> bool:
    d = e.value.details
    want = "operation exceeded time limit"
    if context:
        want = f"{context} :: caused by :: {want}"
    return e.value.code == 50 and d["codeName"] == "MaxTimeMSExpired" and d["errmsg"] == want


@pytest.mark.parametrize("command,context", [
    (lambda db: db.command("find", "c", filter=NOTHING, maxTimeMS=10),
     "Executor error during find command"),
    (lambda db: db.command("count", "c", query=NOTHING, maxTimeMS=10), None),
    (lambda db: db.command("distinct", "c", key="r", query=NOTHING, maxTimeMS=10),
     "Executor error during distinct command"),
    (lambda db: db.command("aggregate", "c", pipeline=[{"$match": NOTHING}], cursor={},
                           maxTimeMS=10), "PlanExecutor error during aggregation"),
    (lambda db: db.command("aggregate", "c", pipeline=[{"$match": NOTHING}, {"$count": "n"}],
                           cursor={}, maxTimeMS=10), "PlanExecutor error during aggregation"),
    (lambda db: db.command("update", "c", updates=[{"q": NOTHING, "u": {"$set": {"x": 1}},
                                                     "multi": True}], maxTimeMS=10), None),
    (lambda db: db.command("delete", "c", deletes=[{"q": NOTHING, "limit": 0}],
                           maxTimeMS=10), None),
    (lambda db: db.command("findAndModify", "c", query=NOTHING, update={"$set": {"x": 1}},
                           maxTimeMS=10), None),
    (lambda db: db.command("findAndModify", "c", query=NOTHING, remove=True, maxTimeMS=10),
     None),
], ids=["find", "count", "distinct", "aggregate", "aggregate-count", "update", "delete",
        "findAndModify", "findAndModify-remove"])
def test_a_collection_scan_that_finds_nothing_runs_out_of_time(db, command, context):
    with pytest.raises(OperationFailure) as e:
        command(db)
    assert expired(e, context), e.value.details


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
        assert expired(e, "Executor error during find command"), (args, e.value.details)
        with pytest.raises(OperationFailure) as e:
            db.command("count", "c", query=args["filter"], maxTimeMS=10,
                       **({"hint": args["hint"]} if "hint" in args else {}))
        assert expired(e), (args, e.value.details)


def test_work_spread_over_many_short_scans_counts_as_one(db):
    # A $lookup's scans are 100 works each, a bulk write's one work per
    # statement: each would read the clock never if it counted alone.
    db.f.insert_many([{"_id": i} for i in range(100)])
    lookup = {"$lookup": {"from": "f", "pipeline": [{"$match": NOTHING}], "as": "m"}}
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", pipeline=[{"$limit": 60}, lookup], cursor={},
                   maxTimeMS=40)
    assert expired(e, "PlanExecutor error during aggregation"), e.value.details
    stmts = [{"q": {"_id": i, **NOTHING}, "u": {"$set": {"x": 1}}} for i in range(N)]
    with pytest.raises(OperationFailure) as e:
        db.command("update", "c", updates=stmts, maxTimeMS=40)
    assert expired(e), e.value.details
    with pytest.raises(OperationFailure) as e:
        db.command("delete", "c", deletes=[{"q": {"_id": i, **NOTHING}, "limit": 1}
                                            for i in range(N)], maxTimeMS=40)
    assert expired(e), e.value.details
    assert db.c.count_documents({}) == N


def test_writes_before_the_expiry_stay(db):
    # Each document's update evaluates the slow $range: the write loop,
    # not the scan, runs out of time, after some documents were written.
    slow_set = [{"$set": {"x": {"$size": {"$range": [0, 8000]}}}}]
    with pytest.raises(OperationFailure) as e:
        db.command("update", "c", updates=[{"q": {}, "u": slow_set, "multi": True}],
                   maxTimeMS=40)
    assert expired(e), e.value.details
    written = db.c.count_documents({"x": 8000})
    assert 0 < written < N
    # inserts: every document counts
    many = [{"_id": N + i} for i in range(100_000)]
    with pytest.raises(OperationFailure) as e:
        db.command("insert", "c", documents=many, maxTimeMS=5)
    assert expired(e), e.value.details
    inserted = db.c.count_documents({"_id": {"$gte": N}})
    assert 0 < inserted < len(many)


def test_without_max_time_or_with_enough_the_same_queries_answer(db):
    db.c.create_index("r")
    # maxTimeMS 0 is no limit: a whole slow scan (hundreds of ms)
    assert db.command("find", "c", filter=NOTHING, maxTimeMS=0)["cursor"]["firstBatch"] == []
    r = db.command("find", "c", filter={"r": {"$lt": 50}, "$expr": {"$lt": ["$r", 3]}},
                   maxTimeMS=60_000)
    assert [d["_id"] for d in r["cursor"]["firstBatch"]] == [0, 1, 2]
    assert db.command("count", "c", query={"g": 3}, maxTimeMS=60_000)["n"] == \
        len([i for i in range(N) if i % 7 == 3])
    r = db.command("update", "c", updates=[{"q": {"g": 0}, "u": {"$set": {"x": 1}},
                                             "multi": True}], maxTimeMS=60_000)
    assert r["n"] == r["nModified"] == len(range(0, N, 7))
    for value in (10_000.0, Decimal128("10000"), 2**31 - 1):
        assert db.command("count", "c", maxTimeMS=value)["n"] == N


def test_pymongo_cursor_raises_execution_timeout(db):
    with pytest.raises(ExecutionTimeout) as e:
        list(db.c.find(NOTHING).max_time_ms(10))
    assert e.value.code == 50


def getmore_expires_and_closes(db, cid):
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", cid, collection="c")
    assert expired(e, "Executor error during getMore"), e.value.details
    # the error closed the cursor, as mongod's
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", cid, collection="c")
    assert e.value.code == 43


def test_a_getmore_runs_on_what_the_find_left(db):
    r = db.command("find", "c", filter=FIRST_ONLY, batchSize=1, maxTimeMS=40)
    assert r["cursor"]["firstBatch"] == [{"_id": 0, "r": 0, "g": 0}]
    cid = r["cursor"]["id"]
    assert cid != 0
    getmore_expires_and_closes(db, cid)


def test_an_aggregate_cursor_runs_on_what_the_aggregate_left(db):
    # The read under a pipeline fetches documents in chunks (as mongod's
    # DocumentSourceCursor does), so a $match of FIRST_ONLY would scan the
    # whole collection for the first batch; the slow work is a later
    # stage's here, done one document at a time.
    pipeline = [{"$project": {"g": 0}}, {"$addFields": {"n": {"$size": {"$range": [0, 8000]}}}}]
    r = db.command("aggregate", "c", pipeline=pipeline, cursor={"batchSize": 1}, maxTimeMS=40)
    assert r["cursor"]["firstBatch"] == [{"_id": 0, "r": 0, "n": 8000}]
    cid = r["cursor"]["id"]
    getmore_expires_and_closes(db, cid)


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
    # and the value before the cursor is looked up
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", 12345, collection="c", maxTimeMS=-1)
    assert e.value.details["errmsg"] == "-1 value for maxTimeMS is out of range"


@pytest.mark.parametrize("inner", [
    {"find": "c", "filter": NOTHING},
    {"count": "c", "query": NOTHING},
    {"distinct": "c", "key": "r", "query": NOTHING},
    {"aggregate": "c", "pipeline": [{"$match": NOTHING}], "cursor": {}},
    {"update": "c", "updates": [{"q": NOTHING, "u": {"$set": {"x": 1}}, "multi": True}]},
    {"delete": "c", "deletes": [{"q": NOTHING, "limit": 0}]},
    {"findAndModify": "c", "query": NOTHING, "remove": True},
], ids=lambda d: next(iter(d)))
def test_explain_applies_the_smaller_of_its_own_and_its_commands(db, inner):
    # as mongod's jstests/noPassthrough/explain_max_time_ms.js
    for cmd in ({"explain": {**inner, "maxTimeMS": 10}, "verbosity": "executionStats"},
                {"explain": inner, "verbosity": "executionStats", "maxTimeMS": 10},
                {"explain": {**inner, "maxTimeMS": 600_000}, "verbosity": "allPlansExecution",
                 "maxTimeMS": 10},
                {"explain": {**inner, "maxTimeMS": 10}, "verbosity": "executionStats",
                 "maxTimeMS": 600_000}):
        with pytest.raises(OperationFailure) as e:
            db.command(cmd)
        assert e.value.code == 50, (cmd, e.value.details)
    ok = db.command({"explain": {**inner, "maxTimeMS": 600_000}, "verbosity": "queryPlanner",
                     "maxTimeMS": 600_000})
    assert ok["ok"] == 1
    assert db.c.count_documents({}) == N


# mongod's parseMaxTimeMS, from the entry point, for every command
GENERIC = [
    ("x", "maxTimeMS must be a number"),
    (None, "maxTimeMS must be a number"),
    (True, "maxTimeMS must be a number"),
    ([5], "maxTimeMS must be a number"),
    (-5, "-5 value for maxTimeMS is out of range"),
    (-1.5, "-1 value for maxTimeMS is out of range"),
    (2**31, "2147483648 value for maxTimeMS is out of range"),
    (2**63 - 1, "9223372036854775807 value for maxTimeMS is out of range"),
    (1e300, "9223372036854775807 value for maxTimeMS is out of range"),
    (43.15, "maxTimeMS has non-integral value"),
    (Decimal128("-3"), "-3 value for maxTimeMS is out of range"),
]


@pytest.mark.parametrize("name,args", [
    ("find", {"filter": {}}),
    ("count", {"query": {}}),
    ("distinct", {"key": "r"}),
    ("insert", {"documents": [{"_id": -1}]}),
    ("update", {"updates": [{"q": {}, "u": {"$set": {"x": 1}}}]}),
    ("delete", {"deletes": [{"q": {}, "limit": 1}]}),
    ("findAndModify", {"query": {}, "remove": True}),
    ("listIndexes", {}),
])
def test_bad_max_time_values_are_refused(db, name, args):
    for value, msg in GENERIC:
        with pytest.raises(OperationFailure) as e:
            db.command(name, "c", maxTimeMS=value, **args)
        assert (e.value.code, e.value.details["errmsg"]) == (2, msg), (name, value)
    assert db.c.count_documents({}) == N
    assert db.c.count_documents({"x": 1}) == 0
    for cmd in ({"ping": 1, "maxTimeMS": -1},
                {"explain": {"find": "c"}, "maxTimeMS": "x"},
                {"explain": {"find": "c", "maxTimeMS": 1.5}}):
        with pytest.raises(OperationFailure) as e:
            db.command(cmd)
        assert e.value.code == 2, cmd


def test_aggregate_types_its_max_time_first(db):
    # aggregate's IDL: the type (14) and the sign (51024), then parseMaxTimeMS
    for value, code, msg in (
            ("x", 14, "BSON field 'aggregate.maxTimeMS' is the wrong type 'string', "
                      "expected types '[long, int, decimal, double]'"),
            (-5, 51024, "BSON field 'maxTimeMS' value must be >= 0, actual value '-5'"),
            (1000.5, 2, "maxTimeMS has non-integral value"),
            (2**31, 2, "2147483648 value for maxTimeMS is out of range")):
        with pytest.raises(OperationFailure) as e:
            db.command("aggregate", "c", pipeline=[], cursor={}, maxTimeMS=value)
        assert (e.value.code, e.value.details["errmsg"]) == (code, msg), value


def test_an_index_build_out_of_time_leaves_no_index(client):
    # 30,000 documents of 20 keys each: a build of about 600,000 keys,
    # tens of milliseconds at least, against 1 ms.  Both indexes of the
    # command go, as mongod's one builder for them aborts them together.
    coll = client.t.big
    coll.insert_many([{"_id": i, "a": list(range(i % 50, i % 50 + 20)), "b": i}
                      for i in range(30000)])
    with pytest.raises(OperationFailure) as e:
        client.t.command("createIndexes", "big", maxTimeMS=1,
                         indexes=[{"key": {"b": 1}, "name": "b_1"},
                                  {"key": {"a": 1}, "name": "a_1"}])
    assert expired(e)
    assert [i["name"] for i in coll.list_indexes()] == ["_id_"]
    reply = client.t.command("createIndexes", "big", maxTimeMS=600000,
                             indexes=[{"key": {"b": 1}, "name": "b_1"},
                                      {"key": {"a": 1}, "name": "a_1"}])
    assert reply["numIndexesAfter"] == 3
    assert coll.count_documents({"a": 30}, hint="a_1") == 12000
    # validate walks every record and its keys: timed too
    with pytest.raises(OperationFailure) as e:
        client.t.command("validate", "big", maxTimeMS=1)
    assert expired(e)
    assert client.t.command("validate", "big", maxTimeMS=600000)["valid"] is True


def test_a_failed_build_takes_the_commands_other_indexes_with_it(client):
    coll = client.t.dup
    coll.insert_many([{"a": i, "b": 1} for i in range(3)])
    with pytest.raises(OperationFailure) as e:
        client.t.command("createIndexes", "dup",
                         indexes=[{"key": {"a": 1}, "name": "a_1"},
                                  {"key": {"b": 1}, "name": "b_1", "unique": True}])
    assert e.value.code == 11000
    assert [i["name"] for i in coll.list_indexes()] == ["_id_"]


# ------------------------------------- the maxTimeAlwaysTimeOut fail point
#
# mongod's OperationContext::hasDeadlineExpired: with the fail point on,
# an operation that has a deadline has passed it, at the interrupt check
# mongod makes before every command runs and at the start of a getMore of
# a cursor opened with maxTimeMS.  An operation without one never enters
# it.  (pymongo's test_cursor, test_collection and test_database use it.)

def always_time_out(client, mode):
    return client.admin.command("configureFailPoint", "maxTimeAlwaysTimeOut", mode=mode)["count"]


@pytest.fixture
def small(client):
    db = client.t
    db.c.insert_many([{"_id": i, "r": i} for i in range(5)])
    db.c.create_index("r")
    return db


WITH_MAX_TIME = [
    ("find", lambda db, ms: db.command("find", "c", maxTimeMS=ms)),
    ("count", lambda db, ms: db.command("count", "c", maxTimeMS=ms)),
    ("distinct", lambda db, ms: db.command("distinct", "c", key="r", maxTimeMS=ms)),
    ("aggregate", lambda db, ms: db.command("aggregate", "c", pipeline=[], cursor={},
                                            maxTimeMS=ms)),
    ("insert", lambda db, ms: db.command("insert", "c", documents=[{"_id": 100}],
                                         maxTimeMS=ms)),
    ("update", lambda db, ms: db.command("update", "c", maxTimeMS=ms,
                                         updates=[{"q": {}, "u": {"$set": {"x": 1}},
                                                   "multi": True}])),
    ("delete", lambda db, ms: db.command("delete", "c", deletes=[{"q": {}, "limit": 0}],
                                         maxTimeMS=ms)),
    ("findAndModify", lambda db, ms: db.command("findAndModify", "c", query={}, remove=True,
                                                maxTimeMS=ms)),
    ("createIndexes", lambda db, ms: db.command("createIndexes", "c", maxTimeMS=ms,
                                                indexes=[{"key": {"x": 1}, "name": "x_1"}])),
    ("dropIndexes", lambda db, ms: db.command("dropIndexes", "c", index="r_1", maxTimeMS=ms)),
    ("listIndexes", lambda db, ms: db.command("listIndexes", "c", maxTimeMS=ms)),
    ("listCollections", lambda db, ms: db.command("listCollections", maxTimeMS=ms)),
    ("ping", lambda db, ms: db.command("ping", maxTimeMS=ms)),
    ("explain", lambda db, ms: db.command({"explain": {"find": "c"}, "maxTimeMS": ms})),
    ("explain-inner-find", lambda db, ms: db.command({"explain": {"find": "c", "maxTimeMS": ms},
                                                      "verbosity": "executionStats"})),
    ("explain-inner-aggregate", lambda db, ms: db.command(
        {"explain": {"aggregate": "c", "pipeline": [], "cursor": {}, "maxTimeMS": ms},
         "verbosity": "executionStats"})),
]


def snapshot(db):
    return (list(db.c.find().sort("_id", 1)),
            sorted(i["name"] for i in db.c.list_indexes()))


@pytest.mark.parametrize("name,command", WITH_MAX_TIME, ids=[n for n, _ in WITH_MAX_TIME])
def test_always_time_out_fails_every_command_with_a_time_limit(small, name, command):
    before = snapshot(small)
    assert always_time_out(small.client, "alwaysOn") == 0
    for ms in (1, 600_000, Decimal128("5"), 2**31 - 1):
        with pytest.raises(OperationFailure) as e:
            command(small, ms)
        # before the command runs: no executor's context, nothing changed
        assert expired(e), (name, e.value.details)
    assert snapshot(small) == before
    assert always_time_out(small.client, "off") == 4
    command(small, 600_000)


@pytest.mark.parametrize("name,command", WITH_MAX_TIME, ids=[n for n, _ in WITH_MAX_TIME])
def test_always_time_out_leaves_commands_without_a_limit_alone(small, name, command):
    always_time_out(small.client, "alwaysOn")
    command(small, 0)  # 0 is no limit: no deadline, the fail point is not entered
    assert always_time_out(small.client, "off") == 0


def test_always_time_out_times_counts_the_commands_it_failed(small):
    client = small.client
    assert always_time_out(client, {"times": 2}) == 0
    for _ in range(3):
        assert small.command("count", "c")["n"] == 5  # no limit: not entered
    for _ in range(2):
        with pytest.raises(ExecutionTimeout):
            small.c.find_one(max_time_ms=1000)
    assert small.c.find_one({"_id": 1}, max_time_ms=1000) == {"_id": 1, "r": 1}
    assert always_time_out(client, "off") == 2


def test_always_time_out_pymongo_raises_execution_timeout(small):
    # pymongo's test_max_time_ms, test_index_management_max_time_ms and
    # test_command_max_time_ms
    always_time_out(small.client, "alwaysOn")
    with pytest.raises(ExecutionTimeout):
        next(small.c.find().max_time_ms(1))
    with pytest.raises(ExecutionTimeout):
        small.c.find_one(max_time_ms=1)
    with pytest.raises(ExecutionTimeout):
        small.c.create_index("foo", maxTimeMS=1)
    with pytest.raises(ExecutionTimeout):
        small.c.drop_index("r_1", maxTimeMS=1)
    with pytest.raises(ExecutionTimeout):
        small.c.drop_indexes(maxTimeMS=1)
    with pytest.raises(ExecutionTimeout):
        small.c.aggregate([{"$project": {"r": 1}}], maxTimeMS=1)
    assert small.command("count", "c")["n"] == 5
    assert len(list(small.c.aggregate([{"$project": {"r": 1}}]))) == 5
    always_time_out(small.client, "off")
    assert sorted(i["name"] for i in small.c.list_indexes()) == ["_id_", "r_1"]


def test_always_time_out_fails_a_getmore_and_kills_the_cursor(small):
    client = small.client
    timed = small.command("find", "c", batchSize=2, maxTimeMS=600_000)["cursor"]["id"]
    agg = small.command("aggregate", "c", pipeline=[], cursor={"batchSize": 2},
                        maxTimeMS=600_000)["cursor"]["id"]
    untimed = small.command("find", "c", batchSize=2)["cursor"]["id"]
    always_time_out(client, "alwaysOn")
    for cid in (timed, agg):
        with pytest.raises(OperationFailure) as e:
            small.command("getMore", cid, collection="c", batchSize=1)
        assert expired(e), e.value.details  # before the executor runs
    # a cursor opened without maxTimeMS has no deadline
    more = small.command("getMore", untimed, collection="c", batchSize=1)["cursor"]
    assert [d["_id"] for d in more["nextBatch"]] == [2]
    assert always_time_out(client, "off") == 2
    for cid in (timed, agg):  # the error killed them, as mongod's getMore does
        with pytest.raises(OperationFailure) as e:
            small.command("getMore", cid, collection="c")
        assert e.value.code == 43


def test_always_time_out_pymongo_getmore(client):
    # pymongo's test_max_time_ms_getmore
    coll = client.t.c
    coll.insert_many([{} for _ in range(200)])
    cursor = coll.find().max_time_ms(100)
    next(cursor)
    always_time_out(client, "alwaysOn")
    try:
        with pytest.raises(ExecutionTimeout):
            cursor.to_list()
    finally:
        always_time_out(client, "off")


def test_always_time_out_comes_after_the_arguments_are_read(small):
    always_time_out(small.client, "alwaysOn")
    # parseMaxTimeMS and aggregate's IDL come first
    with pytest.raises(OperationFailure) as e:
        small.command("find", "c", maxTimeMS=-1)
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        small.command("aggregate", "c", pipeline=[], cursor={}, maxTimeMS="x")
    assert e.value.code == 14
    # getMore's own maxTimeMS is no deadline: refused, the cursor kept
    cid = small.command("find", "c", batchSize=2)["cursor"]["id"]
    with pytest.raises(OperationFailure) as e:
        small.command("getMore", cid, collection="c", maxTimeMS=1000)
    assert e.value.code == 2
    assert len(small.command("getMore", cid, collection="c")["cursor"]["nextBatch"]) == 3
    assert always_time_out(small.client, "off") == 0


def test_always_time_out_reaches_the_fail_point_commands_too(client):
    # configureFailPoint and waitForFailPoint are commands like any other:
    # with maxTimeMS (which waitForFailPoint requires) they time out.
    always_time_out(client, "alwaysOn")
    with pytest.raises(OperationFailure) as e:
        client.admin.command("configureFailPoint", "maxTimeAlwaysTimeOut", mode="off",
                             maxTimeMS=1000)
    assert e.value.code == 50
    with pytest.raises(OperationFailure) as e:
        client.admin.command("waitForFailPoint", "maxTimeAlwaysTimeOut", timesEntered=1,
                             maxTimeMS=1000)
    assert e.value.code == 50
    assert always_time_out(client, "off") == 2  # still on until then
    assert client.admin.command("waitForFailPoint", "maxTimeAlwaysTimeOut", timesEntered=2,
                                maxTimeMS=1000) == {"ok": 1.0}


def test_always_time_out_in_process_too(server, client):
    always_time_out(client, "alwaysOn")
    with pytest.raises(Exception) as e:
        server.command("admin", {"ping": 1, "maxTimeMS": 1000})
    assert e.value.code == 50
    assert server.command("admin", {"ping": 1}) == {"ok": 1.0}
    always_time_out(client, "off")
