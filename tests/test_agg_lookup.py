"""$lookup, $graphLookup, $unionWith and $facet: the manual's examples,
edge cases (arrays on either side, null/missing, cycles, depth limits,
missing collections, nesting) and mongod 7.0's errors with their codes."""
from __future__ import annotations

import datetime

import pytest
from bson import Int64, Regex
from pymongo.errors import OperationFailure


@pytest.fixture
def db(client):
    return client.t


def agg(db, coll, pipeline, **kw):
    return list(db[coll].aggregate(pipeline, **kw))


def err(db, coll, pipeline, **kw):
    with pytest.raises(OperationFailure) as ei:
        agg(db, coll, pipeline, **kw)
    return ei.value.code, ei.value.details["errmsg"]


def has_expr_in_match(db):
    """$expr in $match arrives with another change; tests that need it
    run once it is there."""
    db.probe.insert_one({"a": 1})
    try:
        return agg(db, "probe", [{"$match": {"$expr": {"$eq": ["$a", 1]}}}]) != []
    except OperationFailure:
        return False
    finally:
        db.probe.drop()


# ------------------------------------------------- $lookup: manual examples


@pytest.fixture
def orders(db):
    db.orders.insert_many([
        {"_id": 1, "item": "almonds", "price": 12, "quantity": 2},
        {"_id": 2, "item": "pecans", "price": 20, "quantity": 1},
        {"_id": 3},
    ])
    db.inventory.insert_many([
        {"_id": 1, "sku": "almonds", "description": "product 1", "instock": 120},
        {"_id": 2, "sku": "bread", "description": "product 2", "instock": 80},
        {"_id": 3, "sku": "cashews", "description": "product 3", "instock": 60},
        {"_id": 4, "sku": "pecans", "description": "product 4", "instock": 70},
        {"_id": 5, "sku": None, "description": "Incomplete"},
        {"_id": 6},
    ])
    return db


def test_lookup_single_equality(orders):
    out = agg(orders, "orders", [{"$lookup": {
        "from": "inventory", "localField": "item", "foreignField": "sku",
        "as": "inventory_docs"}}])
    assert out == [
        {"_id": 1, "item": "almonds", "price": 12, "quantity": 2, "inventory_docs": [
            {"_id": 1, "sku": "almonds", "description": "product 1", "instock": 120}]},
        {"_id": 2, "item": "pecans", "price": 20, "quantity": 1, "inventory_docs": [
            {"_id": 4, "sku": "pecans", "description": "product 4", "instock": 70}]},
        # a missing localField matches null and missing foreign fields
        {"_id": 3, "inventory_docs": [
            {"_id": 5, "sku": None, "description": "Incomplete"}, {"_id": 6}]},
    ]


def test_lookup_array_local_field(db):
    db.classes.insert_many([
        {"_id": 1, "title": "Reading is ...", "enrollmentlist": ["giraffe2", "pandabear", "artie"],
         "days": ["M", "W", "F"]},
        {"_id": 2, "title": "But Writing ...", "enrollmentlist": ["giraffe1", "artie"],
         "days": ["T", "F"]},
    ])
    d = datetime.datetime
    db.members.insert_many([
        {"_id": 1, "name": "artie", "joined": d(2016, 5, 1), "status": "A"},
        {"_id": 2, "name": "giraffe", "joined": d(2017, 5, 1), "status": "D"},
        {"_id": 3, "name": "giraffe1", "joined": d(2017, 10, 1), "status": "A"},
        {"_id": 4, "name": "panda", "joined": d(2018, 10, 11), "status": "A"},
        {"_id": 5, "name": "pandabear", "joined": d(2018, 12, 1), "status": "A"},
        {"_id": 6, "name": "giraffe2", "joined": d(2018, 12, 1), "status": "D"},
    ])
    out = agg(db, "classes", [{"$lookup": {
        "from": "members", "localField": "enrollmentlist", "foreignField": "name",
        "as": "enrollee_info"}}])
    assert [[m["_id"] for m in c["enrollee_info"]] for c in out] == [[1, 5, 6], [1, 3]]
    assert out[1]["enrollee_info"][1] == {"_id": 3, "name": "giraffe1",
                                          "joined": d(2017, 10, 1), "status": "A"}


def test_lookup_merge_objects(db):
    db.orders.insert_many([
        {"_id": 1, "item": "almonds", "price": 12, "quantity": 2},
        {"_id": 2, "item": "pecans", "price": 20, "quantity": 1},
    ])
    db.items.insert_many([
        {"_id": 1, "item": "almonds", "description": "almond clusters", "instock": 120},
        {"_id": 2, "item": "bread", "description": "raisin and nut bread", "instock": 80},
        {"_id": 3, "item": "pecans", "description": "candied pecans", "instock": 60},
    ])
    out = agg(db, "orders", [
        {"$lookup": {"from": "items", "localField": "item", "foreignField": "item",
                     "as": "fromItems"}},
        {"$replaceRoot": {"newRoot": {"$mergeObjects": [
            {"$arrayElemAt": ["$fromItems", 0]}, "$$ROOT"]}}},
        {"$project": {"fromItems": 0}},
    ])
    assert out == [
        {"_id": 1, "item": "almonds", "description": "almond clusters", "instock": 120,
         "price": 12, "quantity": 2},
        {"_id": 2, "item": "pecans", "description": "candied pecans", "instock": 60,
         "price": 20, "quantity": 1},
    ]


def test_lookup_uncorrelated_subquery(db):
    d = datetime.datetime
    db.absences.insert_many([
        {"_id": 1, "student": "Ann Aardvark", "sickdays": [d(2018, 5, 1), d(2018, 8, 23)]},
        {"_id": 2, "student": "Zoe Zebra", "sickdays": [d(2018, 2, 1), d(2018, 5, 23)]},
    ])
    db.holidays.insert_many([
        {"_id": 1, "year": 2018, "name": "New Years", "date": d(2018, 1, 1)},
        {"_id": 2, "year": 2018, "name": "Pi Day", "date": d(2018, 3, 14)},
        {"_id": 3, "year": 2018, "name": "Ice Cream Day", "date": d(2018, 7, 15)},
        {"_id": 4, "year": 2017, "name": "New Years", "date": d(2017, 1, 1)},
        {"_id": 5, "year": 2017, "name": "Ice Cream Day", "date": d(2017, 7, 16)},
    ])
    out = agg(db, "absences", [{"$lookup": {"from": "holidays", "pipeline": [
        {"$match": {"year": 2018}},
        {"$project": {"_id": 0, "date": {"name": "$name", "date": "$date"}}},
        {"$replaceRoot": {"newRoot": "$date"}},
    ], "as": "holidays"}}])
    hol = [{"name": "New Years", "date": d(2018, 1, 1)},
           {"name": "Pi Day", "date": d(2018, 3, 14)},
           {"name": "Ice Cream Day", "date": d(2018, 7, 15)}]
    assert [o["holidays"] for o in out] == [hol, hol]
    assert out[0]["student"] == "Ann Aardvark"


@pytest.fixture
def warehouses(db):
    db.orders.insert_many([
        {"_id": 1, "item": "almonds", "price": 12, "ordered": 2},
        {"_id": 2, "item": "pecans", "price": 20, "ordered": 1},
        {"_id": 3, "item": "cookies", "price": 10, "ordered": 60},
    ])
    db.warehouses.insert_many([
        {"_id": 1, "stock_item": "almonds", "warehouse": "A", "instock": 120},
        {"_id": 2, "stock_item": "pecans", "warehouse": "A", "instock": 80},
        {"_id": 3, "stock_item": "almonds", "warehouse": "B", "instock": 60},
        {"_id": 4, "stock_item": "cookies", "warehouse": "B", "instock": 40},
        {"_id": 5, "stock_item": "cookies", "warehouse": "A", "instock": 80},
    ])
    return db


def test_lookup_multiple_join_conditions_with_expr(warehouses):
    if not has_expr_in_match(warehouses):
        pytest.skip("$expr in $match is not there yet")
    out = agg(warehouses, "orders", [{"$lookup": {
        "from": "warehouses", "let": {"order_item": "$item", "order_qty": "$ordered"},
        "pipeline": [
            {"$match": {"$expr": {"$and": [
                {"$eq": ["$stock_item", "$$order_item"]},
                {"$gte": ["$instock", "$$order_qty"]}]}}},
            {"$project": {"stock_item": 0, "_id": 0}},
        ], "as": "stockdata"}}])
    assert [o["stockdata"] for o in out] == [
        [{"warehouse": "A", "instock": 120}, {"warehouse": "B", "instock": 60}],
        [{"warehouse": "A", "instock": 80}],
        [{"warehouse": "A", "instock": 80}],
    ]


def test_lookup_concise_correlated_with_expr(db):
    if not has_expr_in_match(db):
        pytest.skip("$expr in $match is not there yet")
    db.restaurants.insert_many([
        {"_id": 1, "name": "American Steak House", "food": ["filet", "sirloin"],
         "beverages": ["beer", "wine"]},
        {"_id": 2, "name": "Honest John Pizza", "food": ["cheese pizza", "pepperoni pizza"],
         "beverages": ["soda"]},
    ])
    db.orders.insert_many([
        {"_id": 1, "item": "filet", "restaurant_name": "American Steak House"},
        {"_id": 2, "item": "cheese pizza", "restaurant_name": "Honest John Pizza",
         "drink": "lemonade"},
        {"_id": 3, "item": "cheese pizza", "restaurant_name": "Honest John Pizza",
         "drink": "soda"},
    ])
    out = agg(db, "orders", [{"$lookup": {
        "from": "restaurants", "localField": "restaurant_name", "foreignField": "name",
        "let": {"orders_drink": "$drink"},
        "pipeline": [{"$match": {"$expr": {"$in": ["$$orders_drink", "$beverages"]}}}],
        "as": "matches"}}])
    assert [[m["_id"] for m in o["matches"]] for o in out] == [[], [], [2]]


# ------------------------------------------------------ $lookup: equality


@pytest.fixture
def ab(db):
    db.f.insert_many([
        {"_id": 1, "k": 1},
        {"_id": 2, "k": [1, 2]},
        {"_id": 3, "k": [[1, 2]]},
        {"_id": 4, "k": None},
        {"_id": 5},
        {"_id": 6, "k": 2.0},
        {"_id": 7, "k": Int64(3)},
        {"_id": 8, "k": "1"},
        {"_id": 9, "k": {"x": 1}},
        {"_id": 10, "k": []},
    ])
    return db


def look(db, local_doc, local="k", foreign="k", coll="f"):
    db.l.delete_many({})
    db.l.insert_one(dict(local_doc, _id=0))
    out = agg(db, "l", [{"$lookup": {"from": coll, "localField": local, "foreignField": foreign,
                                     "as": "m"}}])
    return [m["_id"] for m in out[0]["m"]]


@pytest.mark.parametrize("local, expected", [
    ({"k": 1}, [1, 2]),                 # foreign arrays match element-wise
    ({"k": 2}, [2, 6]),                 # 2 == 2.0
    ({"k": 3.0}, [7]),                  # 3.0 == NumberLong(3)
    ({"k": [1, 3]}, [1, 2, 7]),         # a local array: any of its elements
    ({"k": [[1, 2]]}, [2, 3]),          # an array element: whole-array equality
    ({"k": [1, 2]}, [1, 2, 6]),
    ({"k": None}, [4, 5]),              # null matches null and missing
    ({}, [4, 5]),                       # missing as null
    ({"k": []}, [4, 5]),                # an empty array as null
    ({"k": "1"}, [8]),
    ({"k": {"x": 1}}, [9]),
    ({"k": {"x": 1.0}}, [9]),
    ({"k": [None, 2]}, [2, 4, 5, 6]),
    ({"k": 99}, []),
])
def test_lookup_equality_semantics(ab, local, expected):
    assert look(ab, local) == expected


def test_lookup_dotted_local_through_arrays(ab):
    assert look(ab, {"a": [{"b": 1}, {"b": [2, 3]}, {"c": 1}]}, local="a.b") == [1, 2, 6, 7]
    # arrays in arrays are not entered
    assert look(ab, {"a": [[{"b": 1}]]}, local="a.b") == [4, 5]
    # a numeric component indexes the array
    assert look(ab, {"a": [{"b": 99}, {"b": 3}]}, local="a.1.b") == [7]
    assert look(ab, {"a": [5, 1]}, local="a.1") == [1, 2]


def test_lookup_dotted_foreign_field(db):
    db.f.insert_many([{"_id": 1, "x": {"y": 5}}, {"_id": 2, "x": [{"y": 6}, {"y": 5}]},
                      {"_id": 3, "x": {"y": 7}}])
    assert look(db, {"v": 5}, local="v", foreign="x.y") == [1, 2]


def test_lookup_regex_values_match_only_regexes(db):
    db.f.insert_many([{"_id": 1, "k": "abc"}, {"_id": 2, "k": Regex("^a")}, {"_id": 3, "k": 1}])
    assert look(db, {"k": Regex("^a")}) == [2]
    assert look(db, {"k": [Regex("^a"), 1]}) == [2, 3]


def test_lookup_missing_foreign_collection(db):
    db.l.insert_many([{"_id": 1, "k": 1}, {"_id": 2}])
    out = agg(db, "l", [{"$lookup": {"from": "nope", "localField": "k", "foreignField": "k",
                                     "as": "m"}}])
    assert out == [{"_id": 1, "k": 1, "m": []}, {"_id": 2, "m": []}]


def test_lookup_as_paths(ab):
    db = ab
    db.l.insert_one({"_id": 0, "k": 1, "x": 5, "y": {"z": 1, "w": 2}})
    out = agg(db, "l", [{"$lookup": {"from": "f", "localField": "k", "foreignField": "k",
                                     "as": "y.z"}}])
    assert out[0]["y"] == {"z": [{"_id": 1, "k": 1}, {"_id": 2, "k": [1, 2]}], "w": 2}
    out = agg(db, "l", [{"$lookup": {"from": "f", "localField": "k", "foreignField": "k",
                                     "as": "x"}}, {"$project": {"n": {"$size": "$x"}}}])
    assert out == [{"_id": 0, "n": 2}]
    out = agg(db, "l", [{"$lookup": {"from": "f", "localField": "k", "foreignField": "k",
                                     "as": "k"}}, {"$project": {"k._id": 1}}])
    assert out == [{"_id": 0, "k": [{"_id": 1}, {"_id": 2}]}]


def test_lookup_uses_foreign_index_same_results(ab):
    before = look(ab, {"k": [1, None]})
    ab.f.create_index("k")
    assert sorted(look(ab, {"k": [1, None]})) == sorted(before) == [1, 2, 4, 5]


# -------------------------------------------------- $lookup: pipeline form


def test_lookup_let_in_add_fields_and_project(orders):
    out = agg(orders, "orders", [{"$lookup": {
        "from": "inventory", "let": {"it": "$item", "q": {"$multiply": ["$price", 2]}},
        "pipeline": [{"$limit": 2},
                     {"$addFields": {"want": "$$it", "q2": "$$q"}},
                     {"$project": {"_id": 0, "sku": 1, "want": 1, "q2": 1}}],
        "as": "r"}}])
    assert out[0]["r"] == [{"sku": "almonds", "want": "almonds", "q2": 24},
                           {"sku": "bread", "want": "almonds", "q2": 24}]
    # $item missing: $$it is missing (no field), $multiply of missing is null
    assert out[2]["r"] == [{"sku": "almonds", "q2": None}, {"sku": "bread", "q2": None}]


def test_lookup_let_root_is_foreign_document(orders):
    out = agg(orders, "orders", [{"$match": {"_id": 1}}, {"$lookup": {
        "from": "inventory", "let": {"outer": "$$ROOT"},
        "pipeline": [{"$match": {"_id": 2}},
                     {"$replaceWith": {"inner": "$$ROOT.sku", "outer": "$$outer.item"}}],
        "as": "r"}}])
    assert out[0]["r"] == [{"inner": "bread", "outer": "almonds"}]


def test_lookup_command_let_visible_and_shadowed(orders):
    out = agg(orders, "orders", [{"$match": {"_id": 2}}, {"$lookup": {
        "from": "inventory", "let": {"b": "$item"},
        "pipeline": [{"$limit": 1}, {"$replaceWith": {"a": "$$a", "b": "$$b"}}],
        "as": "r"}}], let={"a": "cmd", "b": "cmd-b"})
    assert out[0]["r"] == [{"a": "cmd", "b": "pecans"}]


def test_lookup_pipeline_with_group_sort_and_empty_pipeline(orders):
    out = agg(orders, "orders", [{"$match": {"_id": 1}}, {"$lookup": {
        "from": "inventory",
        "pipeline": [{"$group": {"_id": None, "total": {"$sum": "$instock"}}}],
        "as": "t"}}, {"$lookup": {"from": "inventory", "pipeline": [], "as": "all"}}])
    assert out[0]["t"] == [{"_id": None, "total": 330}]
    assert [d["_id"] for d in out[0]["all"]] == [1, 2, 3, 4, 5, 6]


def test_lookup_combined_form(orders):
    out = agg(orders, "orders", [{"$lookup": {
        "from": "inventory", "localField": "item", "foreignField": "sku",
        "let": {"p": "$price"},
        "pipeline": [{"$project": {"_id": 0, "sku": 1, "value": {"$multiply": ["$$p", 10]}}}],
        "as": "r"}}])
    assert [o["r"] for o in out] == [[{"sku": "almonds", "value": 120}],
                                     [{"sku": "pecans", "value": 200}],
                                     [{"sku": None, "value": None}, {"value": None}]]


def test_lookup_without_from_documents(orders):
    out = agg(orders, "orders", [{"$match": {"_id": {"$lt": 3}}}, {"$lookup": {
        "let": {"q": "$quantity"},
        "pipeline": [{"$documents": [{"n": 1}, {"n": 2}, {"n": 3}]},
                     {"$set": {"q": "$$q"}}],
        "as": "d"}}, {"$project": {"d": 1}}])
    assert out == [{"_id": 1, "d": [{"n": 1, "q": 2}, {"n": 2, "q": 2}, {"n": 3, "q": 2}]},
                   {"_id": 2, "d": [{"n": 1, "q": 1}, {"n": 2, "q": 1}, {"n": 3, "q": 1}]}]


def test_lookup_combined_form_with_documents(db):
    db.l.insert_many([{"_id": 1, "k": 2}, {"_id": 2, "k": 5}])
    out = agg(db, "l", [{"$lookup": {
        "localField": "k", "foreignField": "v",
        "pipeline": [{"$documents": [{"v": 1}, {"v": 2}, {"v": [2, 3]}]}],
        "as": "d"}}])
    assert out == [{"_id": 1, "k": 2, "d": [{"v": 2}, {"v": [2, 3]}]},
                   {"_id": 2, "k": 5, "d": []}]


def test_nested_lookup_sees_outer_let(orders):
    out = agg(orders, "orders", [{"$match": {"_id": 1}}, {"$lookup": {
        "from": "inventory", "let": {"outer": "$item"},
        "pipeline": [{"$match": {"_id": {"$in": [1, 2]}}}, {"$lookup": {
            "from": "orders", "let": {"mid": "$sku"},
            "pipeline": [{"$limit": 1},
                         {"$replaceWith": {"o": "$$outer", "m": "$$mid", "i": "$item"}}],
            "as": "inner"}}, {"$project": {"inner": 1}}],
        "as": "r"}}])
    assert out[0]["r"] == [
        {"_id": 1, "inner": [{"o": "almonds", "m": "almonds", "i": "almonds"}]},
        {"_id": 2, "inner": [{"o": "almonds", "m": "bread", "i": "almonds"}]},
    ]


def test_nested_equality_lookup_inside_pipeline(orders):
    out = agg(orders, "orders", [{"$match": {"_id": 2}}, {"$lookup": {
        "from": "inventory", "pipeline": [
            {"$match": {"sku": "pecans"}},
            {"$lookup": {"from": "orders", "localField": "sku", "foreignField": "item",
                         "as": "back"}}],
        "as": "r"}}])
    assert out[0]["r"][0]["back"] == [{"_id": 2, "item": "pecans", "price": 20, "quantity": 1}]


def nest(depth):
    st = {"$lookup": {"from": "c", "pipeline": [], "as": "x"}}
    for _ in range(depth - 1):
        st = {"$lookup": {"from": "c", "pipeline": [st], "as": "x"}}
    return st


def test_lookup_nesting_limit(db):
    db.c.insert_one({"_id": 1})
    assert len(agg(db, "c", [nest(20)])) == 1
    code, msg = err(db, "c", [nest(21)])
    assert code == 232
    assert msg == "Maximum number of nested sub-pipelines exceeded. Limit is 20"


def test_lookup_after_group_and_in_facet(orders):
    out = agg(orders, "orders", [
        {"$facet": {"joined": [{"$match": {"item": "pecans"}}, {"$lookup": {
            "from": "inventory", "localField": "item", "foreignField": "sku", "as": "inv"}},
            {"$project": {"n": {"$size": "$inv"}}}]}}])
    assert out == [{"joined": [{"_id": 2, "n": 1}]}]


def test_lookup_explain(orders):
    e = orders.command("explain", {"aggregate": "orders", "cursor": {}, "pipeline": [
        {"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku",
                     "as": "x"}},
        {"$lookup": {"from": "inventory", "let": {"a": "$item"},
                     "pipeline": [{"$limit": 1}], "as": "y"}}]},
        verbosity="queryPlanner")
    assert e["stages"][1] == {"$lookup": {"from": "inventory", "as": "x", "localField": "item",
                                          "foreignField": "sku"}}
    assert e["stages"][2] == {"$lookup": {"from": "inventory", "as": "y", "let": {"a": "$item"},
                                          "pipeline": [{"$limit": 1}]}}


# --------------------------------------------------------- $lookup: errors


@pytest.mark.parametrize("spec, code, msg", [
    ("x", 9, "the $lookup stage specification must be an object, but found string"),
    ({"from": "f", "localField": "a", "foreignField": "b"}, 9,
     "must specify 'as' field for a $lookup"),
    ({"from": "f", "localField": "a", "foreignField": "b", "as": ""}, 9,
     "must specify 'as' field for a $lookup"),
    ({"from": "f", "localField": "a", "foreignField": "b", "as": "x", "foo": "y"}, 9,
     "unknown argument to $lookup: foo"),
    ({"from": "f", "localField": "a", "foreignField": "b", "as": 1}, 9,
     "$lookup argument 'as' must be a string, found as: 1: int"),
    ({"from": "f", "pipeline": [], "as": "x", "let": 1}, 9,
     "$lookup argument 'let: 1' must be an object, is type int"),
    ({"from": "f", "localField": "a", "as": "x"}, 9,
     "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be "
     "specified"),
    ({"from": "f", "as": "x"}, 9,
     "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be "
     "specified"),
    ({"from": "f", "localField": "a", "foreignField": "b", "as": "x", "let": {"v": 1}}, 9,
     "$lookup with a 'let' argument must also specify 'pipeline'"),
    ({"from": "f", "localField": "a", "pipeline": [], "as": "x"}, 9,
     "$lookup requires both or neither of 'localField' and 'foreignField' to be specified"),
    ({"from": 1, "pipeline": [], "as": "x"}, 9,
     "$lookup 'from' field must be a string, but found int"),
    ({"from": "", "pipeline": [], "as": "x"}, 73, "invalid $lookup namespace: t."),
    ({"localField": "a", "foreignField": "b", "as": "x"}, 9,
     "must specify 'pipeline' when 'from' is empty"),
    ({"pipeline": [{"$match": {}}], "as": "x"}, 9,
     "$lookup stage without explicit collection must have a pipeline with $documents as first "
     "stage"),
    ({"pipeline": [], "as": "x"}, 9,
     "$lookup stage without explicit collection must have a pipeline with $documents as first "
     "stage"),
    ({"from": "f", "pipeline": {"$match": {}}, "as": "x"}, 14,
     "'pipeline' option must be specified as an array"),
    ({"from": "f", "pipeline": [1], "as": "x"}, 14,
     "Each element of the 'pipeline' array must be an object"),
    ({"from": "f", "pipeline": [{"$nope": {}}], "as": "x"}, 40324,
     "Unrecognized pipeline stage name: '$nope'"),
    ({"from": "f", "pipeline": [{"$out": "z"}], "as": "x"}, 51047,
     "$out is not allowed within a $lookup's sub-pipeline"),
    ({"from": "f", "pipeline": [{"$merge": "z"}], "as": "x"}, 51047,
     "$merge is not allowed within a $lookup's sub-pipeline"),
    ({"from": "f", "pipeline": [], "as": "x", "let": {"Bad": 1}}, 16867,
     "'Bad' starts with an invalid character for a user variable name"),
    ({"from": "f", "pipeline": [], "as": "x", "let": {"a-b": 1}}, 16868,
     "'a-b' contains an invalid character for a variable name: '-'"),
    ({"from": "f", "pipeline": [], "as": "x", "let": {"": 1}}, 16866,
     "empty variable names are not allowed"),
    ({"from": "f", "pipeline": [{"$replaceWith": {"a": "$$nope"}}], "as": "x"}, 17276,
     "Use of undefined variable: nope"),
    ({"from": "f", "pipeline": [], "as": "$x"}, 16410,
     "FieldPath field names may not start with '$'. Consider using $getField or $setField."),
    ({"from": "f", "localField": "a..b", "foreignField": "b", "as": "x"}, 15998,
     "FieldPath field names may not be empty strings."),
    ({"from": "f", "pipeline": [{"$limit": 0}], "as": "x"}, 15958, "the limit must be positive"),
])
def test_lookup_errors(db, spec, code, msg):
    db.l.insert_one({"_id": 1})
    assert err(db, "l", [{"$lookup": spec}]) == (code, msg)


def test_lookup_let_evaluation_error(db):
    db.l.insert_one({"_id": 1, "a": 1})
    code, msg = err(db, "l", [{"$lookup": {"from": "l", "let": {"v": {"$divide": ["$a", 0]}},
                                           "pipeline": [], "as": "x"}}])
    assert code == 16608
    assert msg == "PlanExecutor error during aggregation :: caused by :: can't $divide by zero"


# ============================================================ $graphLookup


@pytest.fixture
def employees(db):
    db.employees.insert_many([
        {"_id": 1, "name": "Dev"},
        {"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
        {"_id": 3, "name": "Ron", "reportsTo": "Eliot"},
        {"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
        {"_id": 5, "name": "Asya", "reportsTo": "Ron"},
        {"_id": 6, "name": "Dan", "reportsTo": "Andrew"},
    ])
    return db


def by_id(docs):
    return sorted(docs, key=lambda d: d["_id"])


def test_graph_lookup_single_collection(employees):
    out = agg(employees, "employees", [{"$graphLookup": {
        "from": "employees", "startWith": "$reportsTo", "connectFromField": "reportsTo",
        "connectToField": "name", "as": "reportingHierarchy"}}])
    hier = {o["name"]: by_id(o["reportingHierarchy"]) for o in out}
    assert hier["Dev"] == []
    assert hier["Eliot"] == [{"_id": 1, "name": "Dev"}]
    assert hier["Asya"] == [{"_id": 1, "name": "Dev"},
                            {"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
                            {"_id": 3, "name": "Ron", "reportsTo": "Eliot"}]
    assert [d["_id"] for d in hier["Dan"]] == [1, 2, 4]


@pytest.fixture
def airports(db):
    db.airports.insert_many([
        {"_id": 0, "airport": "JFK", "connects": ["BOS", "ORD"]},
        {"_id": 1, "airport": "BOS", "connects": ["JFK", "PWM"]},
        {"_id": 2, "airport": "ORD", "connects": ["JFK"]},
        {"_id": 3, "airport": "PWM", "connects": ["BOS", "LHR"]},
        {"_id": 4, "airport": "LHR", "connects": ["PWM"]},
    ])
    db.travelers.insert_many([
        {"_id": 1, "name": "Dev", "nearestAirport": "JFK"},
        {"_id": 2, "name": "Eliot", "nearestAirport": "JFK"},
        {"_id": 3, "name": "Jeff", "nearestAirport": "BOS"},
    ])
    return db


def graph_airports(db, **extra):
    spec = {"from": "airports", "startWith": "$nearestAirport", "connectFromField": "connects",
            "connectToField": "airport", "as": "destinations"}
    spec.update(extra)
    return agg(db, "travelers", [{"$graphLookup": spec}])


def test_graph_lookup_max_depth_depth_field(airports):
    out = graph_airports(airports, maxDepth=2, depthField="numConnections")
    got = {o["name"]: {d["airport"]: d["numConnections"] for d in o["destinations"]}
           for o in out}
    assert got == {
        "Dev": {"JFK": 0, "BOS": 1, "ORD": 1, "PWM": 2},
        "Eliot": {"JFK": 0, "BOS": 1, "ORD": 1, "PWM": 2},
        "Jeff": {"BOS": 0, "JFK": 1, "PWM": 1, "ORD": 2, "LHR": 2},
    }
    d = out[0]["destinations"][0]
    assert type(d["numConnections"]) is Int64
    assert d == {"_id": 0, "airport": "JFK", "connects": ["BOS", "ORD"], "numConnections": 0}


def test_graph_lookup_cycles_terminate(airports):
    out = graph_airports(airports)
    assert [sorted(d["_id"] for d in o["destinations"]) for o in out] == [[0, 1, 2, 3, 4]] * 3


def test_graph_lookup_max_depth_zero(airports):
    out = graph_airports(airports, maxDepth=0)
    assert [[d["airport"] for d in o["destinations"]] for o in out] == [["JFK"], ["JFK"], ["BOS"]]
    out = graph_airports(airports, maxDepth=1.0)
    assert sorted(d["airport"] for d in out[2]["destinations"]) == ["BOS", "JFK", "PWM"]


def test_graph_lookup_restrict_search_with_match(db):
    db.people.insert_many([
        {"_id": 1, "name": "Tanya Jordan", "friends": ["Shirley Soto", "Terry Hawkins",
                                                       "Carole Hale"],
         "hobbies": ["tennis", "unicycling", "golf"]},
        {"_id": 2, "name": "Carole Hale", "friends": ["Joseph Dennis", "Tanya Jordan",
                                                      "Terry Hawkins"],
         "hobbies": ["archery", "golf", "woodworking"]},
        {"_id": 3, "name": "Terry Hawkins", "friends": ["Tanya Jordan", "Carole Hale",
                                                        "Angelo Ward"],
         "hobbies": ["knitting", "frisbee"]},
        {"_id": 4, "name": "Joseph Dennis", "friends": ["Angelo Ward", "Carole Hale"],
         "hobbies": ["tennis", "golf", "topiary"]},
        {"_id": 5, "name": "Angelo Ward", "friends": ["Terry Hawkins", "Shirley Soto",
                                                      "Joseph Dennis"],
         "hobbies": ["travel", "ceramics", "golf"]},
        {"_id": 6, "name": "Shirley Soto", "friends": ["Angelo Ward", "Tanya Jordan",
                                                       "Carole Hale"],
         "hobbies": ["frisbee", "set theory"]},
    ])
    out = agg(db, "people", [
        {"$match": {"name": "Tanya Jordan"}},
        {"$graphLookup": {"from": "people", "startWith": "$friends",
                          "connectFromField": "friends", "connectToField": "name",
                          "as": "golfers", "restrictSearchWithMatch": {"hobbies": "golf"}}},
        {"$project": {"name": 1, "friends": 1, "connections who play golf": "$golfers.name"}},
    ])
    assert len(out) == 1 and out[0]["name"] == "Tanya Jordan"
    assert sorted(out[0]["connections who play golf"]) == [
        "Angelo Ward", "Carole Hale", "Joseph Dennis", "Tanya Jordan"]


def test_graph_lookup_start_values(db):
    db.g.insert_many([
        {"_id": 1, "to": None, "next": 2},
        {"_id": 2, "to": 2},
        {"_id": 3},                          # no connectToField: never matched
        {"_id": 4, "to": [5, 6], "next": [7]},
        {"_id": 5, "to": 7},
    ])
    db.s.insert_many([{"_id": "null", "v": None}, {"_id": "missing"}, {"_id": "arr", "v": [2, 6]},
                      {"_id": "empty", "v": []}, {"_id": "num", "v": 2.0}])
    out = agg(db, "s", [{"$graphLookup": {"from": "g", "startWith": "$v", "connectFromField": "next",
                                          "connectToField": "to", "as": "r"}}])
    got = {o["_id"]: sorted(d["_id"] for d in o["r"]) for o in out}
    assert got == {"null": [1, 2], "missing": [], "arr": [2, 4, 5], "empty": [], "num": [2]}


def test_graph_lookup_start_with_expression_and_dotted_fields(db):
    db.g.insert_many([{"_id": 1, "a": {"b": "x"}, "c": {"d": ["y"]}},
                      {"_id": 2, "a": [{"b": "y"}], "c": {"d": []}}])
    db.s.insert_one({"_id": 0, "p": "x"})
    out = agg(db, "s", [{"$graphLookup": {
        "from": "g", "startWith": {"$concat": ["$p", ""]}, "connectFromField": "c.d",
        "connectToField": "a.b", "as": "out.r", "depthField": "meta.depth"}}])
    assert out == [{"_id": 0, "p": "x", "out": {"r": [
        {"_id": 1, "a": {"b": "x"}, "c": {"d": ["y"]}, "meta": {"depth": 0}},
        {"_id": 2, "a": [{"b": "y"}], "c": {"d": []}, "meta": {"depth": 1}}]}}]


def test_graph_lookup_missing_collection(db):
    db.s.insert_one({"_id": 0, "v": 1})
    out = agg(db, "s", [{"$graphLookup": {"from": "nope", "startWith": "$v",
                                          "connectFromField": "a", "connectToField": "b",
                                          "as": "r"}}])
    assert out == [{"_id": 0, "v": 1, "r": []}]


def test_graph_lookup_self_reference_and_unwind(db):
    db.g.insert_many([{"_id": 1, "k": 1, "n": 1}, {"_id": 2, "k": 1, "n": 2}])
    out = agg(db, "g", [{"$match": {"_id": 1}},
                        {"$graphLookup": {"from": "g", "startWith": "$n", "connectFromField": "n",
                                          "connectToField": "k", "as": "r"}},
                        {"$unwind": "$r"}, {"$project": {"r._id": 1}}])
    assert out == [{"_id": 1, "r": {"_id": 1}}, {"_id": 1, "r": {"_id": 2}}]


BASE = {"from": "g", "startWith": "$v", "connectFromField": "a", "connectToField": "b",
        "as": "r"}


def without(k):
    return {x: y for x, y in BASE.items() if x != k}


@pytest.mark.parametrize("spec, code, msg", [
    (1, 9, "the $graphLookup stage specification must be an object, but found int"),
    (without("from"), 9,
     "missing 'from' option to $graphLookup stage specification: { startWith: \"$v\", "
     "connectFromField: \"a\", connectToField: \"b\", as: \"r\" }"),
    (dict(BASE, **{"from": 1}), 9, "$graphLookup 'from' field must be a string, but found int"),
    (without("startWith"), 40105,
     "$graphLookup requires 'from', 'as', 'startWith', 'connectFromField', and "
     "'connectToField' to be specified."),
    (without("as"), 40105,
     "$graphLookup requires 'from', 'as', 'startWith', 'connectFromField', and "
     "'connectToField' to be specified."),
    (without("connectToField"), 40105,
     "$graphLookup requires 'from', 'as', 'startWith', 'connectFromField', and "
     "'connectToField' to be specified."),
    (dict(BASE, foo=1), 40104, "Unknown argument to $graphLookup: foo"),
    (dict(BASE, **{"as": 1}), 40103, "expected string as argument for as, found: int"),
    (dict(BASE, depthField=True), 40103, "expected string as argument for depthField, found: bool"),
    (dict(BASE, maxDepth="1"), 40100, "maxDepth must be numeric, found type: string"),
    (dict(BASE, maxDepth=-1), 40101, "maxDepth requires a nonnegative argument, found: -1"),
    (dict(BASE, maxDepth=1.5), 40102, "maxDepth could not be represented as a long long: 1"),
    (dict(BASE, restrictSearchWithMatch=1), 40185,
     "restrictSearchWithMatch must be an object, found int"),
    (dict(BASE, restrictSearchWithMatch={"a": {"$bad": 1}}), 2,
     "Failed to parse 'restrictSearchWithMatch' option to $graphLookup :: caused by :: "
     "unknown operator: $bad"),
    (dict(BASE, depthField="$d"), 16410,
     "FieldPath field names may not start with '$'. Consider using $getField or $setField."),
    # mongod's FieldPath constructor refuses the trailing '.' (40353)
    # before it looks at the components
    (dict(BASE, connectFromField="a."), 40353, "FieldPath must not end with a '.'."),
    (dict(BASE, connectFromField="a..b"), 15998,
     "FieldPath field names may not be empty strings."),
    (dict(BASE, startWith={"$nope": 1}), 168, "Unrecognized expression '$nope'"),
])
def test_graph_lookup_errors(db, spec, code, msg):
    db.s.insert_one({"_id": 1})
    assert err(db, "s", [{"$graphLookup": spec}]) == (code, msg)


# ============================================================= $unionWith


@pytest.fixture
def sales(db):
    db.sales_2017.insert_many([
        {"store": "General Store", "item": "Chocolates", "quantity": 150},
        {"store": "ShopMart", "item": "Chocolates", "quantity": 50},
        {"store": "General Store", "item": "Cookies", "quantity": 100},
        {"store": "ShopMart", "item": "Pie", "quantity": 10},
        {"store": "Specialty Shop", "item": "Chocolates", "quantity": 25},
    ])
    db.sales_2018.insert_many([
        {"store": "General Store", "item": "Cookies", "quantity": 200},
        {"store": "ShopMart", "item": "Chocolates", "quantity": 45},
        {"store": "Specialty Shop", "item": "Cookies", "quantity": 10},
        {"store": "ShopMart", "item": "Pie", "quantity": 5},
    ])
    db.sales_2019.insert_many([
        {"store": "General Store", "item": "Chocolates", "quantity": 90},
        {"store": "ShopMart", "item": "Chocolates", "quantity": 30},
        {"store": "Specialty Shop", "item": "Chocolates", "quantity": 40},
        {"store": "ShopMart", "item": "Pie", "quantity": 20},
        {"store": "Specialty Shop", "item": "Cookies", "quantity": 25},
    ])
    db.sales_2020.insert_many([
        {"store": "General Store", "item": "Cookies", "quantity": 120},
        {"store": "ShopMart", "item": "Chocolates", "quantity": 45},
        {"store": "Specialty Shop", "item": "Chocolates", "quantity": 10},
        {"store": "ShopMart", "item": "Pie", "quantity": 30},
    ])
    return db


def test_union_with_sales_by_year_store_item(sales):
    out = agg(sales, "sales_2017", [
        {"$set": {"_id": "2017"}},
        {"$unionWith": {"coll": "sales_2018", "pipeline": [{"$set": {"_id": "2018"}}]}},
        {"$unionWith": {"coll": "sales_2019", "pipeline": [{"$set": {"_id": "2019"}}]}},
        {"$unionWith": {"coll": "sales_2020", "pipeline": [{"$set": {"_id": "2020"}}]}},
        {"$sort": {"_id": 1, "store": 1, "item": 1}},
        {"$project": {"store": 1, "item": 1, "quantity": 1}},
    ])
    assert len(out) == 18
    assert out[:3] == [
        {"_id": "2017", "store": "General Store", "item": "Chocolates", "quantity": 150},
        {"_id": "2017", "store": "General Store", "item": "Cookies", "quantity": 100},
        {"_id": "2017", "store": "ShopMart", "item": "Chocolates", "quantity": 50},
    ]
    assert out[-1] == {"_id": "2020", "store": "Specialty Shop", "item": "Chocolates",
                       "quantity": 10}


def test_union_with_sales_by_item(sales):
    out = agg(sales, "sales_2017", [
        {"$unionWith": "sales_2018"}, {"$unionWith": "sales_2019"}, {"$unionWith": "sales_2020"},
        {"$group": {"_id": "$item", "total": {"$sum": "$quantity"}}},
        {"$sort": {"total": -1}},
    ])
    assert out == [{"_id": "Chocolates", "total": 485}, {"_id": "Cookies", "total": 455},
                   {"_id": "Pie", "total": 65}]


def test_union_with_order_and_missing_collection(db):
    db.a.insert_many([{"_id": 1}, {"_id": 2}])
    db.b.insert_many([{"_id": 1, "b": 1}])
    assert agg(db, "a", [{"$unionWith": "b"}]) == [{"_id": 1}, {"_id": 2}, {"_id": 1, "b": 1}]
    assert agg(db, "a", [{"$unionWith": "nope"}]) == [{"_id": 1}, {"_id": 2}]
    assert agg(db, "nope", [{"$unionWith": "b"}]) == [{"_id": 1, "b": 1}]
    # the union's own collection twice, and a $limit that stops early
    assert agg(db, "a", [{"$unionWith": "a"}, {"$limit": 3}]) == [{"_id": 1}, {"_id": 2},
                                                                  {"_id": 1}]


def test_union_with_documents_and_pipeline_vars(db):
    db.a.insert_one({"_id": 1})
    out = agg(db, "a", [{"$unionWith": {"pipeline": [
        {"$documents": [{"x": 1}, {"x": 2}]}, {"$set": {"y": "$$v"}}]}}], let={"v": 7})
    assert out == [{"_id": 1}, {"x": 1, "y": 7}, {"x": 2, "y": 7}]


def test_union_with_inside_lookup_and_facet(db):
    db.a.insert_many([{"_id": 1}, {"_id": 2}])
    db.b.insert_one({"_id": 9})
    out = agg(db, "a", [{"$match": {"_id": 1}}, {"$lookup": {
        "from": "a", "pipeline": [{"$unionWith": "b"}, {"$project": {"_id": 1}}], "as": "u"}}])
    assert out == [{"_id": 1, "u": [{"_id": 1}, {"_id": 2}, {"_id": 9}]}]
    out = agg(db, "a", [{"$facet": {"u": [{"$unionWith": "b"}, {"$count": "n"}]}}])
    assert out == [{"u": [{"n": 3}]}]


@pytest.mark.parametrize("spec, code, msg", [
    (1, 9, "the $unionWith stage specification must be an object or string, but found int"),
    ({"coll": "b", "foo": 1}, 40415, "BSON field '$unionWith.foo' is an unknown field."),
    ({"coll": 1}, 14, "BSON field '$unionWith.coll' is the wrong type 'int', expected type "
                      "'string'"),
    ({"coll": "b", "pipeline": {}}, 14,
     "BSON field '$unionWith.pipeline' is the wrong type 'object', expected type 'array'"),
    ({}, 9, "$unionWith stage without explicit collection must have a pipeline with $documents "
            "as first stage"),
    ({"pipeline": [{"$match": {}}]}, 9,
     "$unionWith stage without explicit collection must have a pipeline with $documents as "
     "first stage"),
    ({"coll": "b", "pipeline": [{"$out": "z"}]}, 31441,
     "$out is not allowed within a $unionWith's sub-pipeline"),
    ({"coll": "b", "pipeline": [{"$nope": 1}]}, 40324, "Unrecognized pipeline stage name: '$nope'"),
    ({"coll": "b", "pipeline": [{"$skip": -1}]}, 5107200,
     "invalid argument to $skip stage: Expected a non-negative number in: $skip: -1"),
])
def test_union_with_errors(db, spec, code, msg):
    db.a.insert_one({"_id": 1})
    assert err(db, "a", [{"$unionWith": spec}]) == (code, msg)


def test_union_with_explain(db):
    db.a.insert_one({"_id": 1})
    e = db.command("explain", {"aggregate": "a", "cursor": {}, "pipeline": [
        {"$unionWith": {"coll": "b", "pipeline": [{"$limit": 2}]}}]}, verbosity="queryPlanner")
    assert e["stages"][1] == {"$unionWith": {"coll": "b", "pipeline": [{"$limit": 2}]}}


# ================================================================= $facet


@pytest.fixture
def artwork(db):
    db.artwork.insert_many([
        {"_id": 1, "title": "The Pillars of Society", "artist": "Grosz", "year": 1926,
         "price": 199.99, "tags": ["painting", "satire", "Expressionism", "caricature"]},
        {"_id": 2, "title": "Melancholy III", "artist": "Munch", "year": 1902, "price": 280.00,
         "tags": ["woodcut", "Expressionism"]},
        {"_id": 3, "title": "Dancer", "artist": "Miro", "year": 1925, "price": 76.04,
         "tags": ["oil", "Surrealism", "painting"]},
        {"_id": 4, "title": "The Great Wave off Kanagawa", "artist": "Hokusai", "price": 167.72,
         "tags": ["woodblock", "ukiyo-e"]},
        {"_id": 5, "title": "The Persistence of Memory", "artist": "Dali", "year": 1931,
         "price": 483.00, "tags": ["Surrealism", "painting", "oil"]},
        {"_id": 6, "title": "Composition VII", "artist": "Kandinsky", "year": 1913,
         "price": 385.00, "tags": ["oil", "painting", "abstract"]},
        {"_id": 7, "title": "The Scream", "artist": "Munch", "year": 1893,
         "tags": ["Expressionism", "painting", "oil"]},
        {"_id": 8, "title": "Blue Flower", "artist": "O'Keefe", "year": 1918, "price": 118.42,
         "tags": ["abstract", "painting"]},
    ])
    return db


def test_facet_artwork(artwork):
    out = agg(artwork, "artwork", [{"$facet": {
        "categorizedByTags": [{"$unwind": "$tags"}, {"$sortByCount": "$tags"},
                              {"$sort": {"count": -1, "_id": 1}}],
        "byArtist": [{"$group": {"_id": "$artist", "n": {"$sum": 1}}},
                     {"$match": {"n": {"$gt": 1}}}],
        "priced": [{"$match": {"price": {"$exists": True}}}, {"$count": "n"}],
    }}])
    assert out == [{
        "categorizedByTags": [
            {"_id": "painting", "count": 6}, {"_id": "oil", "count": 4},
            {"_id": "Expressionism", "count": 3}, {"_id": "Surrealism", "count": 2},
            {"_id": "abstract", "count": 2}, {"_id": "caricature", "count": 1},
            {"_id": "satire", "count": 1}, {"_id": "ukiyo-e", "count": 1},
            {"_id": "woodblock", "count": 1}, {"_id": "woodcut", "count": 1}],
        "byArtist": [{"_id": "Munch", "n": 2}],
        "priced": [{"n": 7}],
    }]


def test_facet_each_fed_the_whole_input(artwork):
    out = agg(artwork, "artwork", [{"$match": {"year": {"$gt": 1920}}}, {"$facet": {
        "ids": [{"$project": {"_id": 1}}],
        "first": [{"$sort": {"year": 1}}, {"$limit": 1}, {"$project": {"title": 1}}],
        "again": [{"$skip": 2}, {"$project": {"_id": 1}}],
    }}, {"$project": {"ids": 1, "first": 1, "n": {"$size": "$again"}}}])
    assert out == [{"ids": [{"_id": 1}, {"_id": 3}, {"_id": 5}],
                    "first": [{"_id": 3, "title": "Dancer"}], "n": 1}]


def test_facet_empty_input_gives_one_document(db):
    out = agg(db, "nope", [{"$facet": {"c": [{"$count": "n"}], "all": [{"$skip": 0}]}}])
    assert out == [{"c": [], "all": []}]


def test_facet_then_unwind_and_variables(db):
    db.c.insert_many([{"_id": i, "v": i} for i in range(5)])
    out = agg(db, "c", [
        {"$facet": {"small": [{"$match": {"v": {"$lt": 2}}}, {"$set": {"t": "$$tag"}}],
                    "big": [{"$match": {"v": {"$gte": 3}}}]}},
        {"$project": {"all": {"$concatArrays": ["$small", "$big"]}}},
        {"$unwind": "$all"}, {"$replaceWith": "$all"},
    ], let={"tag": "x"})
    assert out == [{"_id": 0, "v": 0, "t": "x"}, {"_id": 1, "v": 1, "t": "x"},
                   {"_id": 3, "v": 3}, {"_id": 4, "v": 4}]


def test_facet_with_sort_spilling_and_many_documents(db):
    db.c.insert_many([{"_id": i, "g": i % 3} for i in range(3000)])
    out = agg(db, "c", [{"$facet": {
        "groups": [{"$group": {"_id": "$g", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}],
        "top": [{"$sort": {"_id": -1}}, {"$limit": 2}],
    }}])
    assert out == [{"groups": [{"_id": 0, "n": 1000}, {"_id": 1, "n": 1000},
                               {"_id": 2, "n": 1000}],
                    "top": [{"_id": 2999, "g": 2}, {"_id": 2998, "g": 1}]}]


def test_facet_explain(db):
    db.c.insert_one({"_id": 1})
    e = db.command("explain", {"aggregate": "c", "cursor": {}, "pipeline": [
        {"$facet": {"a": [{"$limit": 1}], "b": [{"$skip": 1}]}}]}, verbosity="queryPlanner")
    assert e["stages"][1] == {"$facet": {"a": [{"$teeConsumer": {}}, {"$limit": 1}],
                                         "b": [{"$teeConsumer": {}}, {"$skip": 1}]}}


@pytest.mark.parametrize("spec, code, msg", [
    (1, 40169, "the $facet specification must be a non-empty object, but found: $facet: 1"),
    ({}, 40169, "the $facet specification must be a non-empty object, but found: $facet: {}"),
    ({"a": 1}, 40170, "arguments to $facet must be arrays, a is type int"),
    ({"a": [], "b": {}}, 40170, "arguments to $facet must be arrays, b is type object"),
    ({"a": [1]}, 40171,
     "elements of arrays in $facet spec must be non-empty objects, a argument contained an "
     "element of type int: 0: 1"),
    ({"a": []}, 2, "sub-pipeline in $facet stage cannot be empty"),
    ({"a": [{"$facet": {"b": [{"$limit": 1}]}}]}, 40600,
     "$facet is not allowed to be used within a $facet stage"),
    ({"a": [{"$limit": 1}, {"$out": "z"}]}, 40600,
     "$out is not allowed to be used within a $facet stage"),
    ({"a": [{"$merge": "z"}]}, 40600, "$merge is not allowed to be used within a $facet stage"),
    ({"a": [{"$collStats": {}}]}, 40600,
     "$collStats is not allowed to be used within a $facet stage"),
    ({"a": [{"$indexStats": {}}]}, 40600,
     "$indexStats is not allowed to be used within a $facet stage"),
    ({"$a": [{"$limit": 1}]}, 16410,
     "FieldPath field names may not start with '$'. Consider using $getField or $setField."),
    ({"a.b": [{"$limit": 1}]}, 16412,
     "FieldPath field names may not contain '.'. Consider using $getField or $setField."),
    ({"": [{"$limit": 1}]}, 15998, "FieldPath field names may not be empty strings."),
    ({"a": [{"$limit": 1, "$skip": 1}]}, 40323,
     "A pipeline stage specification object must contain exactly one field."),
    ({"a": [{"$nope": 1}]}, 40324, "Unrecognized pipeline stage name: '$nope'"),
    ({"a": [{"$limit": 1}], "b": [{"$sort": {}}]}, 15976,
     "$sort stage must have at least one sort key"),
])
def test_facet_errors(db, spec, code, msg):
    db.c.insert_one({"_id": 1})
    assert err(db, "c", [{"$facet": spec}]) == (code, msg)


def test_facet_in_lookup_pipeline(orders):
    out = agg(orders, "orders", [{"$match": {"_id": 1}}, {"$lookup": {
        "from": "inventory", "pipeline": [{"$facet": {
            "n": [{"$count": "n"}],
            "big": [{"$match": {"instock": {"$gt": 100}}}, {"$project": {"_id": 1}}]}}],
        "as": "f"}}])
    assert out[0]["f"] == [{"n": [{"n": 6}], "big": [{"_id": 1}]}]


def test_database_pipeline_with_lookup_and_union(db):
    db.f.insert_many([{"_id": 1, "k": "a"}, {"_id": 2, "k": "b"}])
    out = db.aggregate([
        {"$documents": [{"k": "a"}, {"k": "c"}]},
        {"$lookup": {"from": "f", "localField": "k", "foreignField": "k", "as": "m"}},
        {"$unionWith": {"coll": "f", "pipeline": [{"$match": {"_id": 2}}]}},
    ])
    assert list(out) == [{"k": "a", "m": [{"_id": 1, "k": "a"}]}, {"k": "c", "m": []},
                         {"_id": 2, "k": "b"}]
