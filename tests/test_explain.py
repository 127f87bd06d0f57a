"""explain for find, count, distinct, update, delete and findAndModify:
mongod's shape, the stages the planner chose, and executionStats."""
from __future__ import annotations

import pytest
from bson import MaxKey, MinKey
from pymongo.errors import OperationFailure

from planlib import stages


@pytest.fixture
def db(client):
    db = client.t
    db.c.insert_many([{"_id": i, "a": i % 50, "b": i} for i in range(500)])
    db.c.create_index("a")
    return db


def explain(db, cmd, verbosity="queryPlanner"):
    return db.command("explain", cmd, verbosity=verbosity)


def test_find_shapes(db):
    e = explain(db, {"find": "c", "filter": {"a": 7}})
    assert e["explainVersion"] == "1"
    qp = e["queryPlanner"]
    assert qp["namespace"] == "t.c" and qp["rejectedPlans"] == []
    assert stages(qp["winningPlan"]) == ["FETCH", "IXSCAN"]
    ix = qp["winningPlan"]["inputStage"]
    assert ix["indexName"] == "a_1" and ix["keyPattern"] == {"a": 1}
    assert ix["indexBounds"] == {"a": ["[7, 7]"]}
    assert "executionStats" not in e
    assert stages(explain(db, {"find": "c", "filter": {"b": 7}})["queryPlanner"]["winningPlan"]) \
        == ["COLLSCAN"]
    assert stages(explain(db, {"find": "c", "filter": {"_id": 7}})["queryPlanner"]
                  ["winningPlan"]) == ["IDHACK"]
    e = explain(db, {"find": "c", "filter": {"b": {"$gt": 3}}, "sort": {"b": 1}, "skip": 2,
                     "limit": 5, "projection": {"b": 1}})
    assert stages(e["queryPlanner"]["winningPlan"]) == [
        "PROJECTION_SIMPLE", "SKIP", "SORT", "COLLSCAN"]
    # an index that provides the sort: no SORT stage
    e = explain(db, {"find": "c", "filter": {}, "sort": {"a": -1}, "limit": 3})
    assert stages(e["queryPlanner"]["winningPlan"]) == ["LIMIT", "FETCH", "IXSCAN"]
    assert e["queryPlanner"]["winningPlan"]["inputStage"]["inputStage"]["direction"] == "backward"


def test_execution_stats(db):
    e = explain(db, {"find": "c", "filter": {"a": 7}}, "executionStats")
    es = e["executionStats"]
    assert es["executionSuccess"] is True
    assert es["nReturned"] == 10
    assert es["totalDocsExamined"] == 10 and es["totalKeysExamined"] >= 10
    e = explain(db, {"find": "c", "filter": {"b": {"$lt": 100}}}, "executionStats")
    assert e["executionStats"]["nReturned"] == 100
    assert e["executionStats"]["totalDocsExamined"] == 500
    assert e["executionStats"]["totalKeysExamined"] == 0


def test_limit_pushed_down_into_an_index_that_gives_the_sort(db):
    """With the order from the index, LIMIT stops the scan: mongod's
    IXSCAN examines only the keys of the rows it returns (and skips), and
    findAndModify only the first.  A SORT stage must see every row first."""
    def counts(cmd):
        es = explain(db, cmd, "executionStats")["executionStats"]
        return es["nReturned"], es["totalKeysExamined"], es["totalDocsExamined"]

    assert counts({"find": "c", "filter": {}, "sort": {"a": -1}, "limit": 3}) == (3, 3, 3)
    assert counts({"find": "c", "filter": {"a": {"$gte": 10}}, "sort": {"a": 1},
                   "limit": 4}) == (4, 4, 4)
    assert counts({"find": "c", "filter": {"a": {"$gte": 10}}, "sort": {"a": 1},
                   "skip": 5, "limit": 4}) == (4, 9, 9)
    # a = 0 holds b = 0, 50, 100, ... in that order: every other one is a
    # multiple of 100, so 7 are fetched for 4 returned
    assert counts({"find": "c", "filter": {"b": {"$mod": [100, 0]}}, "sort": {"a": 1},
                   "limit": 4}) == (4, 7, 7)
    # no index gives the order of b: every document is read
    assert counts({"find": "c", "filter": {}, "sort": {"b": 1}, "limit": 3}) == (3, 0, 500)
    # findAndModify takes the first document in the index's order
    assert counts({"findAndModify": "c", "query": {"a": {"$gte": 10}}, "sort": {"a": -1},
                   "update": {"$set": {"x": 1}}}) == (1, 1, 1)


def test_keys_examined_as_mongod_counts_them(client):
    """An IXSCAN over one interval stops at its end key without examining it
    (mongod sets the cursor's end position); over several intervals each key
    is examined, the one past the last interval too (IndexBoundsChecker)."""
    db = client.t
    db.k.insert_many([{"_id": i, "a": i, "u": i} for i in range(1, 11)])
    db.k.create_index("a")
    db.k.create_index("u", unique=True)

    def stats(flt):
        es = explain(db, {"find": "k", "filter": flt}, "executionStats")["executionStats"]
        return es["nReturned"], es["totalKeysExamined"], es["totalDocsExamined"]

    assert stats({"a": 5}) == (1, 1, 1)
    assert stats({"a": {"$gte": 3, "$lte": 5}}) == (3, 3, 3)
    assert stats({"a": {"$gt": 3, "$lt": 7}}) == (3, 3, 3)
    assert stats({"a": 50}) == (0, 0, 0)
    # [2, 2] and [7, 7]: 2, then 3 (between: seek), 7, then 8 (past the last)
    assert stats({"a": {"$in": [2, 7]}}) == (2, 4, 2)
    # a unique index's points are looked up: a key not there is not examined
    assert stats({"u": 5}) == (1, 1, 1)
    assert stats({"u": 50}) == (0, 0, 0)
    e = explain(db, {"find": "k", "filter": {"a": {"$gte": 3, "$lte": 5}}, "sort": {"a": -1}},
                "executionStats")
    assert e["executionStats"]["totalKeysExamined"] == 3


def test_other_commands(db):
    assert stages(explain(db, {"count": "c", "query": {"a": 3}})["queryPlanner"]
                  ["winningPlan"]) == ["COUNT", "COUNT_SCAN"]
    assert stages(explain(db, {"count": "c", "query": {"a": 3, "b": {"$lt": 100}}})[
        "queryPlanner"]["winningPlan"]) == ["COUNT", "FETCH", "IXSCAN"]
    assert stages(explain(db, {"distinct": "c", "key": "b", "query": {"a": 3}})["queryPlanner"]
                  ["winningPlan"])[-1] == "IXSCAN"
    e = explain(db, {"delete": "c", "deletes": [{"q": {"a": 3}, "limit": 0}]}, "executionStats")
    assert stages(e["queryPlanner"]["winningPlan"])[0] == "DELETE"
    assert e["executionStats"]["nReturned"] == 0
    assert e["executionStats"]["executionStages"]["nWouldDelete"] == 10
    e = explain(db, {"update": "c", "updates": [{"q": {"a": 3}, "u": {"$set": {"z": 1}}}]},
                "executionStats")
    assert stages(e["queryPlanner"]["winningPlan"])[0] == "UPDATE"
    e = explain(db, {"findAndModify": "c", "query": {"a": 3}, "remove": True})
    assert stages(e["queryPlanner"]["winningPlan"])[0] == "DELETE"
    # explain never writes
    assert db.command("count", "c", query={"a": 3})["n"] == 10
    assert db.c.find_one({"z": 1}) is None


def test_explain_errors(db):
    with pytest.raises(OperationFailure) as e:
        explain(db, {"find": "c"}, "loud")
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        explain(db, {"nosuch": "c"})
    assert e.value.code == 59
    with pytest.raises(OperationFailure) as e:
        explain(db, {"find": "c", "hint": "zz_1"})
    assert e.value.code == 2
    e = explain(db, {"find": "missing"})
    assert stages(e["queryPlanner"]["winningPlan"]) == ["EOF"]


@pytest.mark.parametrize("query, hint, want", [
    # one interval of keys: COUNT_SCAN from a start key to an end key
    ({"a": {"$gte": 3, "$lt": 6}}, "a_1",
     ({"a": 3}, True, {"a": 6}, False)),
    ({"a": 3}, "a_1", ({"a": 3}, True, {"a": 3}, True)),
    # a descending field runs from its high end
    ({"a": 3, "b": {"$gt": 2}}, "a_1_b_-1",
     ({"a": 3, "b": float("inf")}, True, {"a": 3, "b": 2}, False)),
    # a trailing field of every value, after an exclusive range start
    ({"a": {"$gt": 3}}, "a_1_b_-1",
     ({"a": 3, "b": MinKey()}, False, {"a": float("inf"), "b": MinKey()}, True)),
    ({"a": {"$lte": 3}}, "a_1_b_1",
     ({"a": -float("inf"), "b": MinKey()}, True, {"a": 3, "b": MaxKey()}, True)),
])
def test_count_scan(db, query, hint, want):
    """A count whose index bounds answer the filter and form one interval
    is mongod's COUNT <- COUNT_SCAN: keys only, none examined past the end
    key, none fetched."""
    db.c.create_index([("a", 1), ("b", -1)])
    db.c.create_index([("a", 1), ("b", 1)])
    n = sum(1 for _ in db.c.find(query, hint=[("$natural", 1)]))
    assert db.command("count", "c", query=query, hint=hint)["n"] == n
    e = explain(db, {"count": "c", "query": query, "hint": hint}, "executionStats")
    plan = e["queryPlanner"]["winningPlan"]["inputStage"]
    assert plan["stage"] == "COUNT_SCAN" and plan["indexName"] == hint
    b = plan["indexBounds"]
    assert (b["startKey"], b["startKeyInclusive"], b["endKey"], b["endKeyInclusive"]) == want
    assert "direction" not in plan
    es = e["executionStats"]
    # COUNT returns no row: it counts them
    assert (es["nReturned"], es["totalKeysExamined"], es["totalDocsExamined"]) == (0, n, 0)
    assert (es["executionStages"]["nCounted"], es["executionStages"]["nSkipped"]) == (n, 0)
    cs = es["executionStages"]["inputStage"]
    assert (cs["stage"], cs["nReturned"], cs["keysExamined"]) == ("COUNT_SCAN", n, n)


def test_aggregate_count_explains_what_runs(db):
    """A pipeline that reads no field ($match then $count) counts keys where
    the bounds answer the filter, and its explain says so: COUNT_SCAN, no
    document examined.  A filter the bounds do not answer fetches."""
    for match, want, docs in (({"a": {"$gte": 10, "$lt": 20}}, ["COUNT_SCAN"], 0),
                              ({"a": {"$gte": 10}, "b": {"$lt": 300}}, ["FETCH", "IXSCAN"], 400)):
        pipe = [{"$match": match}, {"$count": "n"}]
        n = db.c.count_documents(match)
        assert list(db.c.aggregate(pipe)) == [{"n": n}]
        for verbosity in ("queryPlanner", "executionStats"):
            e = explain(db, {"aggregate": "c", "pipeline": pipe, "cursor": {}}, verbosity)
            cur = e["stages"][0]["$cursor"]
            assert stages(cur["queryPlanner"]["winningPlan"]) == want
            if verbosity == "executionStats":
                es = cur["executionStats"]
                assert (es["nReturned"], es["totalDocsExamined"]) == (n, docs)


def test_count_over_several_intervals_is_a_covered_ixscan(db):
    e = explain(db, {"count": "c", "query": {"a": {"$in": [1, 4]}}}, "executionStats")
    assert stages(e["queryPlanner"]["winningPlan"]) == ["COUNT", "IXSCAN"]
    es = e["executionStats"]
    assert (es["nReturned"], es["totalDocsExamined"]) == (0, 0)
    assert es["executionStages"]["nCounted"] == 20
    ix = es["executionStages"]["inputStage"]
    assert ix["stage"] == "IXSCAN" and ix["nReturned"] == 20
    assert ix["indexBounds"] == {"a": ["[1, 1]", "[4, 4]"]}


@pytest.mark.parametrize("extra", [
    {"limit": -2}, {"skip": -1}, {"bogus": 1}, {"sort": {"a": 2}}, {"sort": {"$natural": 2}},
    {"projection": {"a": 1, "b": 0}}, {"filter": {"$bogus": 1}}, {"hint": 5},
    {"min": {"a": 1}, "max": {"b": 2}, "hint": "a_1"}, {"batchSize": -1},
])
def test_explain_find_refuses_what_find_refuses(db, extra):
    """explain of find is find's own parse and plan (mfi_find_explain):
    a command find refuses, explain refuses with the same error."""
    cmd = {"find": "c", **extra}
    with pytest.raises(OperationFailure) as found:
        db.command(cmd)
    with pytest.raises(OperationFailure) as explained:
        explain(db, cmd, "executionStats")
    assert (explained.value.code, explained.value.details["errmsg"]) == \
        (found.value.code, found.value.details["errmsg"])


@pytest.mark.parametrize("extra, want", [
    ({"filter": {"a": {"$gte": 3}}, "skip": 5, "limit": 7}, 7),
    ({"sort": {"b": -1}, "skip": 490, "limit": 20}, 10),
    ({"sort": {"a": 1}, "skip": 3, "limit": 4, "projection": {"_id": 0, "a": 1}}, 4),
    ({"filter": {"a": {"$in": [2, 5]}}, "sort": {"b": 1}}, 20),
    ({"limit": 1000}, 500),
])
def test_explain_find_returns_what_find_returns(db, extra, want):
    cmd = {"find": "c", "batchSize": 1000, **extra}
    got = db.command(cmd)["cursor"]["firstBatch"]
    e = explain(db, cmd, "executionStats")
    assert len(got) == want
    assert e["executionStats"]["nReturned"] == want
    assert e["executionStats"]["executionStages"]["nReturned"] == want
