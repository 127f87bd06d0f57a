"""`sort: {$natural: +-1}` in find and findAndModify (command/dispatch.c,
mfi_natural_sort): not a field path but the collection's order, which
mongod turns into a $natural hint.  It answered 16410 ("FieldPath field
names may not start with '$'") here, so pymongo's
``find().sort("$natural", -1)`` -- the usual way to read the newest
documents -- failed.  Expected answers are mongod's: a lone number equal to
1 or -1, BadValue otherwise, and a hint that must agree."""
from __future__ import annotations

import pymongo
import pytest
from bson import SON, Decimal128, Int64
from pymongo.errors import OperationFailure

NATURAL_VALUE = "$natural sort cannot be set to a value other than -1 or 1."


@pytest.fixture
def db(client):
    d = client.test
    d.c.insert_many([{"_id": i, "a": 3 - i} for i in range(4)])
    d.c.create_index("a")
    return d


def find(db, sort, **extra):
    reply = db.command(SON([("find", "c"), ("sort", sort), *extra.items()]))
    return [d["_id"] for d in reply["cursor"]["firstBatch"]]


def nat(v):
    return SON([("$natural", v)])


@pytest.mark.parametrize("value, expected", [
    (1, [0, 1, 2, 3]), (-1, [3, 2, 1, 0]), (1.0, [0, 1, 2, 3]), (Int64(-1), [3, 2, 1, 0]),
    (Decimal128("-1.0"), [3, 2, 1, 0]),
])
def test_storage_order_either_way(db, value, expected):
    assert find(db, nat(value)) == expected


def test_pymongo_cursor_sort_natural(db):
    assert [d["_id"] for d in db.c.find().sort("$natural", pymongo.DESCENDING)] == [3, 2, 1, 0]
    assert db.c.find().sort("$natural", pymongo.DESCENDING).limit(-1).next()["_id"] == 3


def test_composes_with_filter_skip_limit_and_getmore(db):
    assert find(db, nat(-1), filter={"a": {"$gte": 2}}) == [1, 0]
    assert find(db, nat(-1), skip=1, limit=2) == [2, 1]
    db.big.insert_many([{"_id": i} for i in range(250)])
    got = [d["_id"] for d in db.big.find(batch_size=7).sort("$natural", -1)]
    assert got == list(range(249, -1, -1))


@pytest.mark.parametrize("sort", [
    nat(2), nat(0), nat(1.9), nat(Decimal128("1.4")), nat(True), nat(None), nat("x"),
    SON([("$natural", 1), ("a", 1)]), SON([("a", 1), ("$natural", -1)]),
])
def test_anything_but_a_lone_plus_or_minus_one_is_refused(db, sort):
    with pytest.raises(OperationFailure) as ei:
        find(db, sort)
    assert (ei.value.code, ei.value.details["errmsg"]) == (2, NATURAL_VALUE)


def test_hint_must_agree(db):
    assert find(db, nat(-1), hint=nat(-1)) == [3, 2, 1, 0]
    assert find(db, nat(-1), hint={}) == [3, 2, 1, 0]
    with pytest.raises(OperationFailure) as ei:
        find(db, nat(-1), hint=nat(1))
    assert (ei.value.code, ei.value.details["errmsg"]) == (
        2, "$natural hint must be in the same direction as $natural sort order")
    for hint in ({"a": 1}, "a_1"):
        with pytest.raises(OperationFailure) as ei:
            find(db, nat(1), hint=hint)
        assert (ei.value.code, ei.value.details["errmsg"]) == (
            2, "index hint not allowed with $natural sort order")
    with pytest.raises(OperationFailure) as ei:
        db.command({"find": "c", "hint": nat(2)})
    assert (ei.value.code, ei.value.details["errmsg"]) == (
        2, "$natural hint cannot be set to a value other than -1 or 1.")


def test_other_dollar_names_and_the_sort_stage_still_refuse(db):
    for sort in (SON([("$other", 1)]), SON([("x.$natural", 1)])):
        with pytest.raises(OperationFailure) as ei:
            find(db, sort)
        assert ei.value.code == 16410
    with pytest.raises(OperationFailure) as ei:
        list(db.c.aggregate([{"$sort": nat(1)}]))
    assert ei.value.code == 16410


def test_find_and_modify_takes_the_last_document(db):
    removed = db.command(SON([("findAndModify", "c"), ("sort", nat(-1)), ("remove", True)]))
    assert removed["value"] == {"_id": 3, "a": 0}
    assert db.c.count_documents({}) == 3
    doc = db.c.find_one_and_update({}, {"$set": {"z": 1}}, sort=[("$natural", 1)])
    assert doc["_id"] == 0
    with pytest.raises(OperationFailure) as ei:
        db.command(SON([("findAndModify", "c"), ("sort", nat(2)), ("remove", True)]))
    assert (ei.value.code, ei.value.details["errmsg"]) == (2, NATURAL_VALUE)


def test_explain_shows_a_backward_collection_scan(db):
    e = db.command("explain", SON([("find", "c"), ("sort", nat(-1)), ("limit", 2)]),
                   verbosity="executionStats")
    plan = e["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "LIMIT"
    assert (plan["inputStage"]["stage"], plan["inputStage"]["direction"]) == \
        ("COLLSCAN", "backward")
    assert e["executionStats"]["totalDocsExamined"] == 2
    fam = db.command("explain", SON([("findAndModify", "c"), ("sort", nat(-1)),
                                     ("remove", True)]), verbosity="executionStats")
    scan = fam["queryPlanner"]["winningPlan"]["inputStage"]
    assert (scan["stage"], scan["direction"]) == ("COLLSCAN", "backward")
    assert fam["executionStats"]["totalDocsExamined"] == 1
