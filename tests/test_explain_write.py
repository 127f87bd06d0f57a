"""explain of update, delete, findAndModify and count in executionStats:
mongod's UPDATE (nMatched, nWouldModify, nWouldUpsert), DELETE
(nWouldDelete) and COUNT (nCounted, nSkipped) stages, which return no row
(findAndModify's return the document it would return).  explain parses
and refuses the command as the command itself does, and writes nothing."""
from __future__ import annotations

import pytest
from pymongo.errors import OperationFailure

from planlib import stages


@pytest.fixture
def db(client):
    db = client.t
    # a = i % 5; z = i % 2: of the four documents with a = 3, two have z = 1
    db.c.insert_many([{"_id": i, "a": i % 5, "z": i % 2} for i in range(20)])
    db.c.create_index("a")
    return db


def run(db, cmd, verbosity="executionStats"):
    return db.command("explain", cmd, verbosity=verbosity)


def top(e):
    """(executionStats.nReturned, the root stage)."""
    es = e["executionStats"]
    return es["nReturned"], es["executionStages"]


def command_code(db, cmd):
    """The code the command itself fails with: its error, or its first
    write error; None if it succeeds."""
    try:
        reply = db.command(cmd)
    except OperationFailure as e:
        return e.code
    errors = reply.get("writeErrors")
    return errors[0]["code"] if errors else None


def update(q, u, **kw):
    return {"update": "c", "updates": [{"q": q, "u": u, **kw}]}


def test_update_counts_what_it_would_match_and_change(db):
    n, st = top(run(db, update({"a": 3}, {"$set": {"z": 1}}, multi=True)))
    assert n == 0 and st["stage"] == "UPDATE" and st["nReturned"] == 0
    assert (st["nMatched"], st["nWouldModify"], st["nWouldUpsert"]) == (4, 2, 0)
    assert stages(st) == ["UPDATE", "FETCH", "IXSCAN"]
    # not multi: the first match only (_id 3, whose z is already 1)
    n, st = top(run(db, update({"a": 3}, {"$set": {"z": 1}})))
    assert (st["nMatched"], st["nWouldModify"]) == (1, 0)
    assert st["inputStage"]["docsExamined"] == 1
    # a replacement, a pipeline
    n, st = top(run(db, update({"_id": 4}, {"a": 4, "z": 0})))
    assert (st["nMatched"], st["nWouldModify"]) == (1, 0)
    n, st = top(run(db, update({"a": 4}, [{"$set": {"z": {"$add": ["$z", 1]}}}], multi=True)))
    assert (st["nMatched"], st["nWouldModify"]) == (4, 4)


def test_upsert_that_matches_nothing(db):
    n, st = top(run(db, update({"a": 9}, {"$set": {"z": 1}}, upsert=True)))
    assert (n, st["nMatched"], st["nWouldModify"], st["nWouldUpsert"]) == (0, 0, 0, 1)
    n, st = top(run(db, update({"a": 3}, {"$set": {"z": 1}}, upsert=True)))
    assert st["nWouldUpsert"] == 0
    # the document it would insert is built: its errors are the command's
    cmd = update({"_id": 99}, {"$set": {"_id": 100}}, upsert=True)
    with pytest.raises(OperationFailure) as explained:
        run(db, cmd)
    assert explained.value.code == command_code(db, cmd) == 66


def test_delete(db):
    n, st = top(run(db, {"delete": "c", "deletes": [{"q": {"a": 3}, "limit": 0}]}))
    assert (n, st["stage"], st["nReturned"], st["nWouldDelete"]) == (0, "DELETE", 0, 4)
    assert "nMatched" not in st
    n, st = top(run(db, {"delete": "c", "deletes": [{"q": {"z": 1}, "limit": 1}]}))
    assert st["nWouldDelete"] == 1 and stages(st) == ["DELETE", "COLLSCAN"]
    # a collection that does not exist: nothing, over EOF
    n, st = top(run(db, {"delete": "nope", "deletes": [{"q": {}, "limit": 0}]}))
    assert stages(st) == ["DELETE", "EOF"] and st["nWouldDelete"] == 0
    n, st = top(run(db, {"update": "nope", "updates": [{"q": {}, "u": {"$set": {"x": 1}},
                                                         "upsert": True}]}))
    assert stages(st) == ["UPDATE", "EOF"] and st["nWouldUpsert"] == 1
    assert "nope" not in db.list_collection_names()


def test_find_and_modify(db):
    fam = {"findAndModify": "c", "query": {"a": 3}, "sort": {"z": -1},
           "update": {"$inc": {"z": 1}}}
    e = run(db, fam)
    n, st = top(e)
    # no index gives z's order: SORT for the first document
    assert stages(st) == ["UPDATE", "SORT", "FETCH", "IXSCAN"]
    assert st["inputStage"]["limitAmount"] == 1
    assert (n, st["nReturned"], st["nMatched"], st["nWouldModify"]) == (1, 1, 1, 1)
    assert stages(e["queryPlanner"]["winningPlan"]) == ["UPDATE", "SORT", "FETCH", "IXSCAN"]
    n, st = top(run(db, {"findAndModify": "c", "query": {"a": 3}, "remove": True}))
    assert (n, st["stage"], st["nWouldDelete"]) == (1, "DELETE", 1)
    # an upsert returns the document it inserts only with new
    for new, want in ((True, 1), (False, 0)):
        n, st = top(run(db, {"findAndModify": "c", "query": {"a": 9}, "upsert": True,
                             "new": new, "update": {"$set": {"z": 1}}}))
        assert (n, st["nReturned"], st["nWouldUpsert"]) == (want, want, 1)
    n, st = top(run(db, {"findAndModify": "c", "query": {"a": 9}, "update": {"$set": {"z": 1}}}))
    assert (n, st["nMatched"], st["nWouldUpsert"]) == (0, 0, 0)


def test_count(db):
    n, st = top(run(db, {"count": "c", "query": {"a": 3, "z": 1}, "skip": 1}))
    assert (n, st["stage"], st["nReturned"], st["nCounted"], st["nSkipped"]) == \
        (0, "COUNT", 0, 1, 1)
    n, st = top(run(db, {"count": "c", "query": {"z": 0}, "limit": 3}))
    assert (st["nCounted"], st["nSkipped"]) == (3, 0)


def test_query_planner_runs_nothing(db):
    e = run(db, update({"a": 3}, {"$set": {"z": 1}}, multi=True), "queryPlanner")
    assert "executionStats" not in e
    assert stages(e["queryPlanner"]["winningPlan"]) == ["UPDATE", "FETCH", "IXSCAN"]


@pytest.mark.parametrize("cmd", [
    {"update": "c", "updates": [{"q": {}, "u": {"$set": {"z": 1}}}] * 2},
    {"delete": "c", "deletes": [{"q": {}, "limit": 0}] * 2},
    update({}, {"$bogus": {"z": 1}}),
    update({}, {"z": 1}, multi=True),
    update({"$bogus": 1}, {"$set": {"z": 1}}),
    {"update": "c", "updates": [{"q": {}, "u": {"$set": {"z": 1}}, "bogus": 1}]},
    {"update": "c", "updates": [{"q": {}, "u": {"$set": {"z": 1}}}], "bogus": 1},
    {"update": "c", "updates": [{"u": {"$set": {"z": 1}}}]},
    {"update": "c", "updates": []},
    {"delete": "c", "deletes": [{"q": {}, "limit": 5}]},
    {"delete": "c", "deletes": [{"q": {}}]},
    {"delete": "c", "deletes": [{"q": {}, "limit": 0, "hint": 5}]},
    {"findAndModify": "c", "query": {}, "remove": True, "upsert": True},
    {"findAndModify": "c", "query": {}},
    {"findAndModify": "c", "query": {}, "remove": True, "sort": {"z": 2}},
    {"findAndModify": "c", "query": {}, "remove": True, "fields": {"a": 1, "z": 0}},
    {"findAndModify": "c", "query": {}, "update": {"$set": {"z": 1}}, "bogus": 1},
    {"findAndModify": "c", "query": {}, "update": {"$set": {"z": 1}}, "let": 5},
])
def test_explain_refuses_what_the_command_refuses(db, cmd):
    """Each is refused by the command and by its explain with one code (an
    update or delete of two statements runs, but cannot be explained:
    InvalidLength)."""
    with pytest.raises(OperationFailure) as explained:
        run(db, cmd)
    if len(cmd.get("updates", cmd.get("deletes", []))) == 2:
        assert explained.value.code == 16
        assert explained.value.details["errmsg"] == "explained write batches must be of size 1"
        return
    assert explained.value.code == command_code(db, cmd) is not None


def test_explain_writes_nothing(db):
    before = list(db.c.find().sort("_id"))
    for cmd in (update({}, {"$inc": {"z": 1}}, multi=True),
                update({"a": 99}, {"$set": {"z": 1}}, upsert=True),
                {"delete": "c", "deletes": [{"q": {}, "limit": 0}]},
                {"findAndModify": "c", "query": {}, "remove": True},
                {"findAndModify": "c", "query": {"a": 99}, "upsert": True,
                 "update": {"$set": {"z": 1}}}):
        run(db, cmd)
    assert list(db.c.find().sort("_id")) == before
