"""The aggregation expression language serving the query language: $expr in
every filter (find, count, distinct, aggregate $match, update, delete,
findAndModify, explain), the commands' `let`, find's computed projections,
and pipeline-style updates -- against mongod 7.0's documented behaviour
(the manual's "$expr" and "Updates with Aggregation Pipeline" pages) and
its error codes."""
from __future__ import annotations

import datetime
import math

import pymongo
import pytest
from bson import Decimal128, Int64, ObjectId
from pymongo import ReturnDocument
from pymongo.errors import OperationFailure, WriteError


@pytest.fixture
def db(client):
    return client.exprq


def ids(docs):
    return [d["_id"] for d in docs]


# ------------------------------------------------------------- $expr: find

BUDGET = [
    {"_id": 1, "category": "food", "budget": 400, "spent": 450},
    {"_id": 2, "category": "drinks", "budget": 100, "spent": 150},
    {"_id": 3, "category": "clothes", "budget": 100, "spent": 50},
    {"_id": 4, "category": "misc", "budget": 500, "spent": 300},
    {"_id": 5, "category": "travel", "budget": 200, "spent": 650},
]


def test_manual_compare_two_fields(db):
    """The manual's monthlyBudget example: spent > budget."""
    db.monthlyBudget.insert_many(BUDGET)
    got = list(db.monthlyBudget.find({"$expr": {"$gt": ["$spent", "$budget"]}}))
    assert got == [BUDGET[0], BUDGET[1], BUDGET[4]]


def test_manual_conditional_query(db):
    """The manual's supplies example ($cond inside $expr), in doubles."""
    db.supplies.insert_many([
        {"_id": 1, "item": "binder", "qty": 100, "price": 12.0},
        {"_id": 2, "item": "notebook", "qty": 200, "price": 8.0},
        {"_id": 3, "item": "pencil", "qty": 50, "price": 6.0},
        {"_id": 4, "item": "eraser", "qty": 150, "price": 3.0},
        {"_id": 5, "item": "legal pad", "qty": 42, "price": 10.0},
    ])
    discounted = {"$cond": {"if": {"$gte": ["$qty", 100]},
                            "then": {"$multiply": ["$price", 0.5]},
                            "else": {"$multiply": ["$price", 0.75]}}}
    got = db.supplies.find({"$expr": {"$lt": [discounted, 5]}})
    assert [d["item"] for d in got] == ["notebook", "pencil", "eraser"]


@pytest.fixture
def nums(db):
    db.n.insert_many([{"_id": i, "a": i, "b": 4 - i} for i in range(5)])
    return db.n


# the value an $expr evaluates to -> whether the document matches
TRUTH = [
    (True, True), (False, False), (None, False), (0, False), (1, True),
    (Int64(0), False), (Int64(-3), True), (0.0, False), (-0.0, False), (0.5, True),
    (float("nan"), True), (Decimal128("0"), False), (Decimal128("-0.00"), False),
    (Decimal128("1E-10"), True), ("", True), ("false", True), ([], True), ([0], True),
    ({}, True), (datetime.datetime(1970, 1, 1), True), (ObjectId("0" * 24), True),
]


@pytest.mark.parametrize("value,matches", TRUTH, ids=[repr(t[0]) for t in TRUTH])
def test_truthiness(db, value, matches):
    db.t.insert_one({"_id": 1, "v": value})
    assert len(list(db.t.find({"$expr": "$v"}))) == (1 if matches else 0)
    # a literal operand too (an array literal is an array expression)
    lit = value if isinstance(value, list) else {"$literal": value}
    assert len(list(db.t.find({"$expr": lit}))) == (1 if matches else 0)


def test_missing_field_is_false(nums):
    assert list(nums.find({"$expr": "$nope"})) == []
    assert ids(nums.find({"$expr": {"$not": ["$nope"]}})) == [0, 1, 2, 3, 4]


def test_expr_with_path_predicates(nums):
    assert ids(nums.find({"a": {"$gte": 1}, "$expr": {"$lt": ["$a", "$b"]}})) == [1]


def test_expr_inside_or_and_nor(nums):
    assert ids(nums.find({"$or": [{"a": 0}, {"$expr": {"$eq": ["$a", "$b"]}}]})) == [0, 2]
    assert ids(nums.find({"$and": [{"$expr": {"$gt": ["$a", 1]}},
                                   {"$expr": {"$lt": ["$a", 4]}}]})) == [2, 3]
    assert ids(nums.find({"$nor": [{"$expr": {"$gt": ["$a", 1]}}]})) == [0, 1]


def test_path_predicate_first_protects_expr(nums):
    """The path predicate rejects a=0 before $expr divides by it."""
    got = ids(nums.find({"$expr": {"$gt": [{"$divide": [4, "$a"]}, 1]}, "a": {"$gt": 0}}))
    assert got == [1, 2, 3]


def test_or_short_circuits(nums):
    got = ids(nums.find({"$or": [{"a": 0}, {"$expr": {"$divide": [1, "$a"]}}]}))
    assert got == [0, 1, 2, 3, 4]


def test_expr_uses_index_bounds_and_is_filter(nums):
    nums.create_index("a")
    got = ids(nums.find({"a": {"$in": [1, 2, 3]}, "$expr": {"$ne": ["$b", 2]}}))
    assert got == [1, 3]


def test_expr_now(db):
    db.t.insert_many([{"_id": 1, "d": datetime.datetime(2000, 1, 1)},
                      {"_id": 2, "d": datetime.datetime(2999, 1, 1)}])
    assert ids(db.t.find({"$expr": {"$lt": ["$d", "$$NOW"]}})) == [1]


def test_expr_root_and_current(nums):
    assert ids(nums.find({"$expr": {"$eq": ["$$ROOT.a", "$$CURRENT.b"]}})) == [2]


def test_expr_across_getmore(nums):
    """The cursor keeps the expression context alive across batches."""
    db = nums.database
    db.big.insert_many([{"_id": i, "v": i} for i in range(30)])
    cur = db.big.find({"$expr": {"$gte": ["$v", "$$lo"]}}, let={"lo": 5}, batch_size=4)
    assert ids(cur) == list(range(5, 30))


def test_expr_errors_fail_the_find(nums):
    with pytest.raises(OperationFailure) as e:
        list(nums.find({"$expr": {"$divide": [1, "$a"]}}))
    assert e.value.code == 16608
    assert e.value.details["errmsg"] == (
        "Executor error during find command :: caused by :: can't $divide by zero")


@pytest.mark.parametrize("filt,code,msg", [
    ({"$expr": {"$foo": 1}}, 168, "Unrecognized expression '$foo'"),
    ({"$expr": "$$nope"}, 17276, "Use of undefined variable: nope"),
    ({"$expr": {"$add": [1], "$sub": 1}}, 15983, None),
    ({"a": {"$elemMatch": {"$expr": True}}}, 2,
     "$expr can only be applied to the top-level document"),
    ({"a": {"$elemMatch": {"$or": [{"$expr": True}]}}}, 2,
     "$expr can only be applied to the top-level document"),
])
def test_expr_parse_errors(nums, filt, code, msg):
    with pytest.raises(OperationFailure) as e:
        list(nums.find(filt))
    assert e.value.code == code
    if msg:
        assert e.value.details["errmsg"] == msg


def test_expr_parse_error_without_collection(db):
    with pytest.raises(OperationFailure) as e:
        list(db.none.find({"$expr": {"$foo": 1}}))
    assert e.value.code == 168


def test_expr_not_allowed_in_array_filters(nums):
    nums.insert_one({"_id": 9, "arr": [{"x": 1}]})
    with pytest.raises(WriteError) as e:
        nums.update_one({"_id": 9}, {"$set": {"arr.$[e].x": 5}},
                        array_filters=[{"e.x": 1, "$expr": True}])
    assert e.value.code == 224
    assert "$expr is not allowed in this context" in e.value.details["errmsg"]


def test_expr_not_allowed_in_partial_index(nums):
    with pytest.raises(OperationFailure) as e:
        nums.create_index("a", partialFilterExpression={"$expr": True})
    assert e.value.code == 224


# ----------------------------------------------------------- find with let

def test_find_let(nums):
    got = nums.find({"$expr": {"$eq": ["$a", "$$target"]}}, let={"target": 3})
    assert ids(got) == [3]


def test_find_let_uses_earlier_variables_and_now(nums):
    got = nums.find({"$expr": {"$lt": ["$a", "$$y"]}},
                    let={"x": 1, "y": {"$add": ["$$x", 1]}, "t": "$$NOW"})
    assert ids(got) == [0, 1]


@pytest.mark.parametrize("let,code", [
    ({"X": 1}, 16867), ({"": 1}, 16866), ({"x": {"$foo": 1}}, 168),
    ({"x": "$$undefinedVar"}, 17276), ({"x": {"$divide": [1, 0]}}, 16608),
])
def test_find_let_errors(nums, let, code):
    with pytest.raises(OperationFailure) as e:
        list(nums.find({}, let=let))
    assert e.value.code == code


def test_find_let_wrong_type(db):
    with pytest.raises(OperationFailure) as e:
        db.command("find", "n", filter={}, let=5)
    assert e.value.code == 14


# ------------------------------------------------- count, distinct, explain

def test_count_and_distinct(nums):
    assert nums.count_documents({"$expr": {"$lt": ["$a", "$b"]}}) == 2
    assert nums.database.command("count", "n", query={"$expr": {"$gt": ["$a", 2]}})["n"] == 2
    assert nums.distinct("b", {"$expr": {"$gte": ["$a", 3]}}) == [0, 1]


def test_count_and_distinct_errors(nums):
    with pytest.raises(OperationFailure) as e:
        nums.database.command("count", "n", query={"$expr": {"$divide": [1, "$a"]}})
    assert e.value.code == 16608
    with pytest.raises(OperationFailure) as e:
        nums.distinct("a", {"$expr": {"$divide": [1, "$a"]}})
    assert e.value.code == 16608


def test_explain_with_expr_and_let(nums):
    r = nums.database.command(
        "explain", {"find": "n", "filter": {"$expr": {"$eq": ["$a", "$$v"]}}, "let": {"v": 1}},
        verbosity="executionStats")
    assert r["executionStats"]["nReturned"] == 1


# --------------------------------------------------------------- aggregate

def test_aggregate_match_expr_pushed_down_with_let(nums):
    got = nums.aggregate([{"$match": {"$expr": {"$lt": ["$a", "$$m"]}}}], let={"m": 2})
    assert list(got) == [{"_id": 0, "a": 0, "b": 4}, {"_id": 1, "a": 1, "b": 3}]


def test_aggregate_match_expr_after_a_stage(nums):
    got = nums.aggregate([{"$set": {"c": {"$add": ["$a", "$b"]}}},
                          {"$match": {"$expr": {"$eq": ["$c", "$$m"]}}},
                          {"$project": {"_id": 1}}], let={"m": 4})
    assert ids(got) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("pipeline", [
    [{"$match": {"$expr": {"$divide": [1, "$a"]}}}],
    [{"$project": {"a": 1}}, {"$match": {"$expr": {"$divide": [1, "$a"]}}}],
])
def test_aggregate_match_expr_error(nums, pipeline):
    with pytest.raises(OperationFailure) as e:
        list(nums.aggregate(pipeline))
    assert e.value.code == 16608


def test_aggregate_match_expr_in_elem_match(nums):
    with pytest.raises(OperationFailure) as e:
        list(nums.aggregate([{"$match": {"a": {"$elemMatch": {"$expr": 1}}}}]))
    assert e.value.code == 2


# ------------------------------------------------- find computed projections

def test_find_projection_computed_fields(nums):
    got = list(nums.find({"_id": {"$lt": 2}},
                         {"s": {"$add": ["$a", "$b"]}, "a": 1, "k": {"$literal": "$x"},
                          "copy": "$b", "lit": "x", "arr": [1, "$a"]}))
    assert got == [
        {"_id": 0, "a": 0, "s": 4, "k": "$x", "copy": 4, "lit": "x", "arr": [1, 0]},
        {"_id": 1, "a": 1, "s": 4, "k": "$x", "copy": 3, "lit": "x", "arr": [1, 1]},
    ]


def test_find_projection_uses_let_and_now(nums):
    got = nums.find_one({"_id": 2}, {"_id": 0, "v": {"$multiply": ["$a", "$$k"]},
                                     "isDate": {"$eq": [{"$type": "$$NOW"}, "date"]}},
                        let={"k": 10})
    assert got == {"v": 20, "isDate": True}


def test_find_projection_nested_computed(nums):
    got = nums.find_one({"_id": 3}, {"x.y": {"$subtract": ["$a", 1]}, "x.z": "$b"})
    assert got == {"_id": 3, "x": {"y": 2, "z": 1}}


def test_find_projection_runtime_error(nums):
    with pytest.raises(OperationFailure) as e:
        list(nums.find({}, {"q": {"$divide": [1, "$a"]}}))
    assert e.value.code == 16608


def test_find_projection_expression_in_exclusion(nums):
    with pytest.raises(OperationFailure) as e:
        list(nums.find({}, {"a": 0, "b": {"$add": [1, 2]}}))
    assert e.value.code == 31252


def test_find_projection_computed_with_sort(nums):
    got = list(nums.find({}, {"_id": 0, "neg": {"$multiply": ["$a", -1]}}).sort("a", -1).limit(2))
    assert got == [{"neg": -4}, {"neg": -3}]


# ------------------------------------------------------ update, delete, fam

def test_update_with_expr_and_let(nums):
    r = nums.update_many({"$expr": {"$gt": ["$a", "$$lim"]}}, {"$set": {"big": True}},
                         let={"lim": 2})
    assert (r.matched_count, r.modified_count) == (2, 2)
    assert ids(nums.find({"big": True})) == [3, 4]


def test_update_expr_error_is_a_write_error(nums):
    with pytest.raises(WriteError) as e:
        nums.update_many({"$expr": {"$divide": [1, "$a"]}}, {"$set": {"q": 1}})
    assert e.value.code == 16608
    assert "can't $divide by zero" in e.value.details["errmsg"]
    assert nums.count_documents({"q": 1}) == 0


def test_update_bad_let_is_a_command_error(db):
    with pytest.raises(OperationFailure) as e:
        db.command("update", "n", updates=[{"q": {}, "u": {"$set": {"z": 1}}}], let={"Bad": 1})
    assert e.value.code == 16867
    with pytest.raises(OperationFailure) as e:
        db.command("update", "n", updates=[{"q": {}, "u": {"$set": {"z": 1}}}], let=3)
    assert e.value.code == 14


def test_delete_with_expr_and_let(nums):
    r = nums.delete_many({"$expr": {"$eq": ["$a", "$$v"]}}, let={"v": 3})
    assert r.deleted_count == 1
    r = nums.delete_one({"$expr": {"$lt": ["$a", "$b"]}})
    assert r.deleted_count == 1
    assert ids(nums.find()) == [1, 2, 4]


def test_delete_expr_error(nums):
    with pytest.raises(WriteError) as e:
        nums.delete_many({"$expr": {"$divide": [1, "$a"]}})
    assert e.value.code == 16608


def test_find_and_modify_with_expr_let_and_fields(nums):
    got = nums.find_one_and_update(
        {"$expr": {"$eq": ["$a", "$$v"]}}, {"$inc": {"a": 10}},
        projection={"a": 1, "was": {"$subtract": ["$a", "$$v"]}},
        return_document=ReturnDocument.AFTER, let={"v": 2})
    assert got == {"_id": 2, "a": 12, "was": 10}


def test_find_and_delete_with_let(nums):
    got = nums.find_one_and_delete({"$expr": {"$eq": ["$b", "$$v"]}}, let={"v": 0})
    assert got == {"_id": 4, "a": 4, "b": 0}


def test_find_and_modify_expr_error(nums):
    with pytest.raises(OperationFailure) as e:
        nums.find_one_and_update({"$expr": {"$divide": [1, "$a"]}}, {"$set": {"q": 1}})
    assert e.value.code == 16608


def test_upsert_seed_ignores_expr(db):
    r = db.u.update_one({"a": 5, "$expr": {"$eq": [1, 1]}}, {"$set": {"b": 1}}, upsert=True)
    got = db.u.find_one({"_id": r.upserted_id})
    assert got == {"_id": r.upserted_id, "a": 5, "b": 1}


# ------------------------------------------------------- pipeline updates

@pytest.fixture
def students(db):
    db.students.insert_many([
        {"_id": 1, "test1": 95, "test2": 92, "test3": 90,
         "modified": datetime.datetime(2020, 1, 5)},
        {"_id": 2, "test1": 98, "test2": 100, "test3": 102,
         "modified": datetime.datetime(2020, 1, 5)},
        {"_id": 3, "test1": 95, "test2": 110, "modified": datetime.datetime(2020, 1, 4)},
    ])
    return db.students


def test_manual_example1_set_now(students):
    before = datetime.datetime.utcnow() - datetime.timedelta(seconds=5)
    r = students.update_one({"_id": 3}, [{"$set": {"test3": 98, "modified": "$$NOW"}}])
    assert (r.matched_count, r.modified_count) == (1, 1)
    got = students.find_one({"_id": 3})
    assert list(got) == ["_id", "test1", "test2", "modified", "test3"]
    assert got["test3"] == 98
    assert before <= got["modified"] <= datetime.datetime.utcnow() + datetime.timedelta(seconds=5)


def test_manual_example2_replace_root_merge_defaults(db):
    db.students2.insert_many([
        {"_id": 1, "quiz1": 8, "test2": 100, "quiz2": 9,
         "modified": datetime.datetime(2020, 1, 5)},
        {"_id": 2, "quiz2": 5, "test1": 80, "test2": 89,
         "modified": datetime.datetime(2020, 1, 5)},
    ])
    r = db.students2.update_many({}, [
        {"$replaceRoot": {"newRoot": {"$mergeObjects": [
            {"quiz1": 0, "quiz2": 0, "test1": 0, "test2": 0}, "$$ROOT"]}}},
        {"$set": {"modified": "$$NOW"}}])
    assert (r.matched_count, r.modified_count) == (2, 2)
    docs = list(db.students2.find({}, {"modified": 0}))
    assert docs == [
        {"_id": 1, "quiz1": 8, "quiz2": 9, "test1": 0, "test2": 100},
        {"_id": 2, "quiz1": 0, "quiz2": 5, "test1": 80, "test2": 89},
    ]
    # both documents carry the command's one $$NOW
    mods = {d["modified"] for d in db.students2.find()}
    assert len(mods) == 1


def test_manual_example3_average_and_grade(db):
    """The manual's {$trunc: [{$avg: "$tests"}, 0]}, as $floor of a $reduce
    sum over $size: the same for these non-negative averages."""
    db.students3.insert_many([
        {"_id": 1, "tests": [95, 92, 90]},
        {"_id": 2, "tests": [94, 88, 90]},
        {"_id": 3, "tests": [70, 75, 82]},
    ])
    db.students3.update_many({}, [
        {"$set": {"average": {"$floor": {"$divide": [
            {"$reduce": {"input": "$tests", "initialValue": 0,
                         "in": {"$add": ["$$value", "$$this"]}}},
            {"$size": "$tests"}]}}}},
        {"$set": {"grade": {"$switch": {"branches": [
            {"case": {"$gte": ["$average", 90]}, "then": "A"},
            {"case": {"$gte": ["$average", 80]}, "then": "B"},
            {"case": {"$gte": ["$average", 70]}, "then": "C"},
            {"case": {"$gte": ["$average", 60]}, "then": "D"}], "default": "F"}}}}])
    assert list(db.students3.find()) == [
        {"_id": 1, "tests": [95, 92, 90], "average": 92.0, "grade": "A"},
        {"_id": 2, "tests": [94, 88, 90], "average": 90.0, "grade": "A"},
        {"_id": 3, "tests": [70, 75, 82], "average": 75.0, "grade": "C"},
    ]


def test_manual_example4_concat_arrays(db):
    db.students4.insert_many([{"_id": 1, "quizzes": [4, 6, 7]}, {"_id": 2, "quizzes": [5]}])
    db.students4.update_one({"_id": 2}, [{"$set": {"quizzes": {"$concatArrays": [
        "$quizzes", [8, 6]]}}}])
    assert db.students4.find_one({"_id": 2}) == {"_id": 2, "quizzes": [5, 8, 6]}


def test_manual_example5_map(db):
    db.temperatures.insert_many([{"_id": 1, "date": "2019-06-23", "tempsC": [4, 12, 17]},
                                 {"_id": 2, "date": "2019-07-07", "tempsC": [14, 24, 11]}])
    db.temperatures.update_many({}, [{"$addFields": {"tempsF": {"$map": {
        "input": "$tempsC", "as": "celsius",
        "in": {"$add": [{"$multiply": ["$$celsius", 9 / 5]}, 32]}}}}}])
    got = db.temperatures.find_one({"_id": 1})
    assert got["tempsF"] == [39.2, 53.6, 62.6]


def test_manual_example6_let(db):
    db.cakeFlavors.insert_many([{"_id": 1, "flavor": "chocolate"},
                                {"_id": 2, "flavor": "strawberry"},
                                {"_id": 3, "flavor": "cherry"}])
    db.cakeFlavors.update_one({"$expr": {"$eq": ["$flavor", "$$targetFlavor"]}},
                              [{"$set": {"flavor": "$$newFlavor"}}],
                              let={"targetFlavor": "cherry", "newFlavor": "orange"})
    assert db.cakeFlavors.find_one({"_id": 3}) == {"_id": 3, "flavor": "orange"}


def test_manual_literal_dollar_string(db):
    db.inventory.insert_one({"_id": 1})
    db.inventory.update_one({"_id": 1}, [{"$set": {"cost": {"$literal": "$27"}}}])
    assert db.inventory.find_one() == {"_id": 1, "cost": "$27"}


def test_pipeline_project_keeps_id_first(nums):
    nums.update_one({"_id": 1}, [{"$project": {"_id": 0, "b": 1}}])
    got = nums.find_one({"_id": 1})
    assert got == {"_id": 1, "b": 3} and list(got) == ["_id", "b"]


def test_pipeline_replace_with(nums):
    nums.update_one({"_id": 2}, [{"$replaceWith": {"z": 1, "_id": "$_id", "a": "$b"}}])
    assert nums.find_one({"_id": 2}) == {"_id": 2, "z": 1, "a": 2}
    nums.update_one({"_id": 3}, [{"$replaceWith": {"only": "$a"}}])
    got = nums.find_one({"_id": 3})
    assert list(got.items()) == [("_id", 3), ("only", 3)]


def test_pipeline_unset_forms(nums):
    nums.update_one({"_id": 0}, [{"$unset": "a"}])
    nums.update_one({"_id": 1}, [{"$unset": ["a", "b"]}])
    assert nums.find_one({"_id": 0}) == {"_id": 0, "b": 4}
    assert nums.find_one({"_id": 1}) == {"_id": 1}


def test_pipeline_noop_counts_matched_not_modified(nums):
    r = nums.update_many({}, [{"$set": {"a": "$a"}}])
    assert (r.matched_count, r.modified_count) == (5, 0)


def test_pipeline_multi_uses_each_document(nums):
    r = nums.update_many({"a": {"$gte": 3}}, [{"$set": {"s": {"$add": ["$a", "$b"]}}}])
    assert r.modified_count == 2
    assert list(nums.find({"s": {"$exists": 1}}, {"s": 1})) == [{"_id": 3, "s": 4},
                                                                {"_id": 4, "s": 4}]


def test_pipeline_with_constants(db):
    db.k.insert_one({"_id": 1})
    r = db.command("update", "k", updates=[
        {"q": {"_id": 1}, "u": [{"$set": {"x": "$$c1", "y": "$$c2"}}],
         "c": {"c1": 5, "c2": {"$add": [1, 2]}}}])
    assert (r["n"], r["nModified"]) == (1, 1)
    # constants are values: an operator document stays as it is
    assert db.k.find_one() == {"_id": 1, "x": 5, "y": {"$add": [1, 2]}}


def test_constants_need_a_pipeline(db):
    db.k.insert_one({"_id": 1})
    r = db.command("update", "k", updates=[{"q": {}, "u": {"$set": {"w": 1}}, "c": {"z": 2}}])
    assert r["n"] == 0
    assert r["writeErrors"][0]["code"] == 51198
    assert r["writeErrors"][0]["errmsg"] == (
        "Constant values may only be specified for pipeline updates")


def test_pipeline_with_command_let_and_constants(db):
    db.k.insert_one({"_id": 1})
    db.command("update", "k", updates=[{"q": {"$expr": {"$eq": ["$_id", "$$one"]}},
                                        "u": [{"$set": {"s": {"$add": ["$$one", "$$c"]}}}],
                                        "c": {"c": 10}}], let={"one": 1})
    assert db.k.find_one() == {"_id": 1, "s": 11}


@pytest.mark.parametrize("stage,name", [
    ({"$match": {}}, "$match"), ({"$match": {"a": 1}}, "$match"), ({"$sort": {"a": 1}}, "$sort"),
    ({"$limit": 1}, "$limit"), ({"$skip": 1}, "$skip"), ({"$group": {"_id": None}}, "$group"),
    ({"$count": "n"}, "$group"), ({"$unwind": "$a"}, "$unwind"), ({"$sample": {"size": 1}},
                                                                  "$sample"),
])
def test_pipeline_disallowed_stage(nums, stage, name):
    with pytest.raises(WriteError) as e:
        nums.update_one({"_id": 1}, [{"$set": {"x": 1}}, stage] if name != "$match"
                        else [stage, {"$set": {"x": 1}}])
    assert e.value.code == 72
    assert e.value.details["errmsg"] == f"{name} is not allowed to be used within an update"
    assert nums.find_one({"_id": 1}) == {"_id": 1, "a": 1, "b": 3}


def test_pipeline_stage_parse_error_comes_first(nums):
    # an unknown stage fails the whole command (mongod's update metrics
    # lite-parse every pipeline first: test_app_compat.py); a known stage's
    # own parse error is the statement's
    with pytest.raises(OperationFailure) as e:
        nums.update_one({"_id": 1}, [{"$bogus": {}}])
    assert e.value.code == 40324 and not isinstance(e.value, WriteError)
    with pytest.raises(WriteError) as e:
        nums.update_one({"_id": 1}, [{"$match": {"$foo": 1}}])
    assert e.value.code == 2


def test_pipeline_id_change(nums):
    with pytest.raises(WriteError) as e:
        nums.update_one({"_id": 1}, [{"$set": {"_id": 5}}])
    assert e.value.code == 66
    assert e.value.details["errmsg"] == (
        "After applying the update, the (immutable) field '_id' was found to have been "
        "altered to _id: 5")
    # the same value in another numeric type is no change
    nums.update_one({"_id": 1}, [{"$set": {"_id": 1.0, "x": 1}}])
    assert nums.find_one({"x": 1})["_id"] == 1


def test_pipeline_replace_root_not_a_document(nums):
    with pytest.raises(WriteError) as e:
        nums.update_one({"_id": 1}, [{"$replaceWith": "$a"}])
    assert e.value.code == 40228


def test_pipeline_runtime_error(nums):
    with pytest.raises(WriteError) as e:
        nums.update_one({"_id": 1}, [{"$set": {"a": {"$divide": [1, 0]}}}])
    assert e.value.code == 16608


def test_pipeline_array_filters_refused(nums):
    with pytest.raises(WriteError) as e:
        nums.update_one({"_id": 1}, [{"$set": {"b": 1}}], array_filters=[{"e.x": 1}])
    assert e.value.code == 9
    assert e.value.details["errmsg"] == (
        "arrayFilters may not be specified for pipeline-syle updates")


def test_pipeline_ordered_batch_stops_at_error(db):
    db.k.insert_many([{"_id": 1}, {"_id": 2}])
    r = db.command("update", "k", updates=[
        {"q": {"_id": 1}, "u": [{"$set": {"x": 1}}]},
        {"q": {"_id": 2}, "u": [{"$limit": 1}]},
        {"q": {"_id": 2}, "u": [{"$set": {"x": 2}}]}])
    assert r["n"] == 1 and r["writeErrors"][0]["index"] == 1
    assert list(db.k.find()) == [{"_id": 1, "x": 1}, {"_id": 2}]


def test_pipeline_upsert_seeds_from_query(db):
    r = db.u.update_one({"_id": 7, "a": 5, "b": {"$gt": 1}},
                        [{"$set": {"c": {"$add": ["$a", 1]}, "seen_b": {"$type": "$b"}}}],
                        upsert=True)
    assert r.upserted_id == 7
    assert db.u.find_one() == {"_id": 7, "a": 5, "c": 6, "seen_b": "missing"}


def test_pipeline_upsert_without_id_gets_objectid(db):
    r = db.u.update_one({"q": 77}, [{"$set": {"r": "$$NOW"}}], upsert=True)
    got = db.u.find_one()
    assert isinstance(r.upserted_id, ObjectId)
    assert list(got) == ["_id", "q", "r"] and got["_id"] == r.upserted_id
    assert isinstance(got["r"], datetime.datetime)


def test_pipeline_upsert_id_change(db):
    with pytest.raises(WriteError) as e:
        db.u.update_one({"_id": 50}, [{"$set": {"_id": 51}}], upsert=True)
    assert e.value.code == 66
    assert db.u.count_documents({}) == 0


def test_pipeline_upsert_matches_existing(nums):
    r = nums.update_one({"_id": 1}, [{"$set": {"z": 1}}], upsert=True)
    assert (r.matched_count, r.modified_count, r.upserted_id) == (1, 1, None)


def test_fam_pipeline_before_and_after(nums):
    before = nums.find_one_and_update({"_id": 1}, [{"$set": {"a": {"$multiply": ["$a", 7]}}}])
    assert before == {"_id": 1, "a": 1, "b": 3}
    after = nums.find_one_and_update({"_id": 1}, [{"$set": {"a": {"$add": ["$a", 1]}}}],
                                     return_document=ReturnDocument.AFTER)
    assert after == {"_id": 1, "a": 8, "b": 3}


def test_fam_pipeline_with_let_and_computed_fields(nums):
    got = nums.find_one_and_update(
        {"_id": 2}, [{"$set": {"a": "$$v"}}, {"$unset": "b"}],
        projection={"_id": 0, "a": 1, "twice": {"$multiply": ["$a", 2]}},
        return_document=ReturnDocument.AFTER, let={"v": 21})
    assert got == {"a": 21, "twice": 42}


def test_fam_pipeline_upsert(db):
    got = db.f.find_one_and_update({"_id": 3, "k": "x"},
                                   [{"$set": {"len": {"$strLenCP": "$k"}}}],
                                   upsert=True, return_document=ReturnDocument.AFTER)
    assert got == {"_id": 3, "k": "x", "len": 1}


def test_fam_pipeline_errors(nums):
    with pytest.raises(OperationFailure) as e:
        nums.find_one_and_update({"_id": 1}, [{"$group": {"_id": None}}])
    assert e.value.code == 72
    with pytest.raises(OperationFailure) as e:
        nums.find_one_and_update({"_id": 1}, [{"$set": {"_id": 9}}])
    assert e.value.code == 66
    with pytest.raises(OperationFailure) as e:
        nums.find_one_and_update({"_id": 1}, [{"$set": {"b": 1}}], array_filters=[{"e": 1}])
    assert e.value.code == 9
    assert nums.find_one({"_id": 1}) == {"_id": 1, "a": 1, "b": 3}


def test_bulk_write_pipeline_and_let(db):
    db.bw.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 2}])
    r = db.bw.bulk_write([
        pymongo.UpdateOne({"_id": 1}, [{"$set": {"y": {"$add": ["$x", "$$inc"]}}}]),
        pymongo.UpdateMany({"$expr": {"$gte": ["$x", "$$inc"]}}, [{"$set": {"z": True}}]),
        pymongo.DeleteOne({"$expr": {"$eq": ["$x", "$$inc"]}}),
    ], let={"inc": 2})
    assert (r.matched_count, r.modified_count, r.deleted_count) == (2, 2, 1)
    assert list(db.bw.find()) == [{"_id": 1, "x": 1, "y": 3}]
