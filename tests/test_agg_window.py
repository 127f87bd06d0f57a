"""$setWindowFields, $densify and $fill end to end through pymongo.

mongod 7.0 is the reference: the documented examples ($setWindowFields on
the cakeSales collection, $densify, $fill), window bounds (documents and
range, with and without a unit), each window function's result and BSON
type, and the parse errors with mongod's codes and messages."""
from __future__ import annotations

import datetime as dt

import pytest
from bson import Int64
from bson.decimal128 import Decimal128 as Dec
from pymongo.errors import OperationFailure

import multifora
import pymongo


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    srv = multifora.Server(str(tmp_path_factory.mktemp("win") / "db"), port=0)
    srv.start()
    c = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000)
    yield c.t
    c.close()
    srv.stop()


def same(a, b):
    """Equal, with the same BSON number types all the way down."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and a == b


def check(got, want):
    assert same(got, want), f"\n got: {got}\nwant: {want}"


def fail(coll, pipeline, code, msg=None, **kw):
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate(pipeline, **kw))
    assert e.value.code == code, e.value.details
    if msg is not None:
        assert msg in e.value.details["errmsg"], e.value.details["errmsg"]


D = dt.datetime


@pytest.fixture(scope="module")
def cakes(db):
    c = db.cakeSales
    c.insert_many([
        {"_id": 0, "type": "chocolate", "orderDate": D(2020, 5, 18, 14, 10, 30), "state": "CA",
         "price": 13, "quantity": 120},
        {"_id": 1, "type": "chocolate", "orderDate": D(2021, 3, 20, 11, 30, 5), "state": "WA",
         "price": 14, "quantity": 140},
        {"_id": 2, "type": "vanilla", "orderDate": D(2021, 1, 11, 6, 31, 15), "state": "CA",
         "price": 12, "quantity": 145},
        {"_id": 3, "type": "vanilla", "orderDate": D(2020, 2, 8, 13, 13, 23), "state": "WA",
         "price": 13, "quantity": 104},
        {"_id": 4, "type": "strawberry", "orderDate": D(2019, 5, 18, 16, 9, 1), "state": "CA",
         "price": 41, "quantity": 162},
        {"_id": 5, "type": "strawberry", "orderDate": D(2019, 1, 8, 6, 12, 3), "state": "WA",
         "price": 43, "quantity": 134},
    ])
    return c


def swf(coll, spec, project=None):
    p = [{"$setWindowFields": spec}]
    p.append({"$project": project or {"_id": 1, **{k: 1 for k in spec["output"]}}})
    return list(coll.aggregate(p))


def out(rows, field):
    return [(r["_id"], r.get(field, "MISSING")) for r in rows]


# ------------------------------------------------------- documented examples


def test_doc_cumulative_quantity_per_state(cakes):
    rows = swf(cakes, {"partitionBy": "$state", "sortBy": {"orderDate": 1},
                       "output": {"cumulativeQuantityForState": {
                           "$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}}}})
    check(out(rows, "cumulativeQuantityForState"),
          [(4, 162), (0, 282), (2, 427), (5, 134), (3, 238), (1, 378)])


def test_doc_moving_average_per_year(cakes):
    rows = swf(cakes, {"partitionBy": "$state", "sortBy": {"orderDate": 1},
                       "output": {"avg": {"$avg": "$quantity", "window": {"documents": [-1, 0]}}}})
    check(out(rows, "avg"), [(4, 162.0), (0, 141.0), (2, 132.5), (5, 134.0), (3, 119.0),
                             (1, 122.0)])


def test_doc_range_window_price(cakes):
    rows = swf(cakes, {"partitionBy": "$state", "sortBy": {"price": 1},
                       "output": {"q": {"$sum": "$quantity", "window": {"range": [-10, 10]}}}})
    check(out(rows, "q"), [(2, 265), (0, 265), (4, 162), (3, 244), (1, 244), (5, 134)])


def test_doc_time_range_window(cakes):
    rows = swf(cakes, {"partitionBy": "$state", "sortBy": {"orderDate": 1},
                       "output": {"recent": {"$push": "$quantity",
                                             "window": {"range": ["unbounded", 10],
                                                        "unit": "month"}}}})
    check(out(rows, "recent"), [(4, [162]), (0, [162, 120, 145]), (2, [162, 120, 145]),
                                (5, [134]), (3, [134, 104]), (1, [134, 104, 140])])


def test_doc_rank_per_state(cakes):
    rows = swf(cakes, {"partitionBy": "$state", "sortBy": {"quantity": -1},
                       "output": {"r": {"$rank": {}}}})
    check(out(rows, "r"), [(4, 1), (2, 2), (0, 3), (1, 1), (5, 2), (3, 3)])


def test_no_partition_sorted_output(cakes):
    rows = swf(cakes, {"sortBy": {"orderDate": 1},
                       "output": {"n": {"$documentNumber": {}}}})
    check(out(rows, "n"), [(5, 1), (4, 2), (3, 3), (0, 4), (2, 5), (1, 6)])


def test_default_window_is_the_whole_partition(cakes):
    rows = swf(cakes, {"partitionBy": "$state", "output": {"t": {"$sum": "$quantity"},
                                                           "c": {"$count": {}}}},
               {"_id": 1, "t": 1, "c": 1, "state": 1})
    # no sortBy: the partitions in key order, each in input order
    check([(r["_id"], r["t"], r["c"]) for r in rows],
          [(0, 427, 3), (2, 427, 3), (4, 427, 3), (1, 378, 3), (3, 378, 3), (5, 378, 3)])
    # partitions come out in partition-key order
    assert [r["state"] for r in rows] == ["CA"] * 3 + ["WA"] * 3


def test_partition_by_expression_is_unset_afterwards(cakes):
    rows = list(cakes.aggregate([
        {"$setWindowFields": {"partitionBy": {"$concat": ["$state", "-x"]},
                              "sortBy": {"_id": 1}, "output": {"n": {"$count": {}}}}},
        {"$limit": 1}]))
    assert "__internal_setWindowFields_partition_key" not in rows[0]
    check(rows[0]["n"], 3)


def test_constant_partition_is_one_partition(cakes):
    rows = swf(cakes, {"partitionBy": "x", "sortBy": {"_id": 1}, "output": {"n": {"$count": {}}}})
    check(out(rows, "n"), [(i, 6) for i in range(6)])


# ------------------------------------------------------------ a numeric fixture


@pytest.fixture(scope="module")
def nums(db):
    c = db.nums
    c.insert_many([
        {"_id": 1, "g": "a", "x": 1, "y": 10},
        {"_id": 2, "g": "a", "x": 2, "y": 20.5},
        {"_id": 3, "g": "a", "x": 4, "y": Int64(5)},
        {"_id": 4, "g": "a", "x": 7, "y": None},
        {"_id": 5, "g": "b", "x": 1, "y": 3},
        {"_id": 6, "g": "b", "x": 3, "y": "s"},
        {"_id": 7, "x": 5, "y": 1},
        {"_id": 8, "g": None, "x": 6, "y": 2},
    ])
    return c


def run(coll, output, sort={"x": 1}, part="$g", project=None):
    spec = {"output": output}
    if sort is not None:
        spec["sortBy"] = sort
    if part is not None:
        spec["partitionBy"] = part
    return swf(coll, spec, project)


def test_missing_and_null_partition_together(nums):
    rows = run(nums, {"n": {"$count": {}}})
    # null/missing partition first (7 and 8 together), then "a", then "b"
    check(out(rows, "n"), [(7, 2), (8, 2), (1, 4), (2, 4), (3, 4), (4, 4), (5, 2), (6, 2)])


@pytest.mark.parametrize("window,want", [
    ({"documents": ["unbounded", "current"]}, [10, 30.5, 35.5, 35.5]),
    ({"documents": ["current", "unbounded"]}, [35.5, 25.5, Int64(5), 0]),
    ({"documents": [-1, 1]}, [30.5, 35.5, 25.5, Int64(5)]),
    ({"documents": [1, 2]}, [25.5, Int64(5), 0, 0]),
    ({"documents": [-3, -2]}, [0, 0, 10, 30.5]),
    ({"documents": [5, 6]}, [0, 0, 0, 0]),
    ({"documents": ["unbounded", "unbounded"]}, [35.5, 35.5, 35.5, 35.5]),
    ({"range": [-1, 1]}, [30.5, 30.5, Int64(5), 0]),
    ({"range": [0, 3]}, [35.5, 25.5, Int64(5), 0]),
    ({"range": ["unbounded", 1.5]}, [30.5, 30.5, 35.5, 35.5]),
    ({"range": [-3, "current"]}, [10, 30.5, 35.5, Int64(5)]),
    ({"range": [10, 20]}, [0, 0, 0, 0]),
])
def test_sum_windows(nums, window, want):
    rows = run(nums, {"s": {"$sum": "$y", "window": window}}, project={"_id": 1, "s": 1, "g": 1})
    got = [r["s"] for r in rows if r.get("g") == "a"]
    check(got, want)


def test_sum_types(nums):
    rows = run(nums, {"s": {"$sum": "$y", "window": {"documents": [0, 0]}}})
    check(out(rows, "s"), [(7, 1), (8, 2), (1, 10), (2, 20.5), (3, Int64(5)), (4, 0), (5, 3),
                           (6, 0)])


@pytest.mark.parametrize("op,window,want", [
    ("$avg", {"documents": [-1, 0]}, [10.0, 15.25, 12.75, 5.0]),
    ("$min", {"documents": ["unbounded", "current"]}, [10, 10, Int64(5), Int64(5)]),
    ("$max", {"documents": [-1, 0]}, [10, 20.5, 20.5, Int64(5)]),
    ("$push", {"documents": [-1, 0]}, [[10], [10, 20.5], [20.5, Int64(5)], [Int64(5), None]]),
    ("$first", {"documents": [1, 1]}, [20.5, Int64(5), None, None]),
    ("$last", {"documents": ["unbounded", "current"]}, [10, 20.5, Int64(5), None]),
    ("$stdDevPop", {"documents": [0, 1]}, [5.25, 7.75, 0.0, None]),
    ("$stdDevSamp", {"documents": [0, 1]}, [7.424621202458749, 10.960155108391486, None, None]),
    ("$addToSet", {"documents": [-1, 0]}, [[10], [10, 20.5], [Int64(5), 20.5], [None, Int64(5)]]),
    ("$avg", {"documents": [3, 4]}, [None, None, None, None]),
    ("$push", {"documents": [3, 4]}, [[None], [], [], []]),
    ("$min", {"documents": [3, 3]}, [None, None, None, None]),
])
def test_accumulator_functions(nums, op, window, want):
    rows = run(nums, {"v": {op: "$y", "window": window}}, project={"_id": 1, "v": 1, "g": 1})
    check([r["v"] for r in rows if r.get("g") == "a"], want)


def test_first_of_missing_is_missing(db):
    c = db.firstmiss
    c.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 2, "y": 5}])
    rows = swf(c, {"sortBy": {"x": 1}, "output": {"f": {"$first": "$y"}, "l": {"$last": "$y"}}})
    check(rows, [{"_id": 1, "l": 5}, {"_id": 2, "l": 5}])


def test_rank_dense_rank_ties(db):
    c = db.ranks
    c.insert_many([{"_id": i, "v": v} for i, v in enumerate([5, 3, 3, 1, None, 3.0, 1])])
    rows = swf(c, {"sortBy": {"v": -1}, "output": {"r": {"$rank": {}}, "d": {"$denseRank": {}},
                                                   "n": {"$documentNumber": {}}}},
               {"_id": 1, "r": 1, "d": 1, "n": 1})
    check([(r["r"], r["d"], r["n"]) for r in rows],
          [(1, 1, 1), (2, 2, 2), (2, 2, 3), (2, 2, 4), (5, 3, 5), (5, 3, 6), (7, 4, 7)])


@pytest.mark.parametrize("args,want", [
    ({"output": "$y", "by": 1}, [20.5, Int64(5), None, None]),
    ({"output": "$y", "by": -1, "default": "none"}, ["none", 10, 20.5, Int64(5)]),
    ({"output": "$y", "by": 0}, [10, 20.5, Int64(5), None]),
    ({"output": "$y", "by": 2, "default": 0}, [Int64(5), None, 0, 0]),
    ({"output": {"$multiply": ["$x", 2]}, "by": -2}, [None, None, 2, 4]),
])
def test_shift(nums, args, want):
    rows = run(nums, {"s": {"$shift": args}}, project={"_id": 1, "s": 1, "g": 1})
    check([r["s"] for r in rows if r.get("g") == "a"], want)


def test_shift_of_missing_value_is_missing(db):
    c = db.shiftmiss
    c.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 2, "y": 5}])
    rows = swf(c, {"sortBy": {"x": 1}, "output": {"s": {"$shift": {"output": "$y", "by": -1}}}})
    check(rows, [{"_id": 1, "s": None}, {"_id": 2}])


@pytest.fixture(scope="module")
def stock(db):
    c = db.stockPrices
    c.insert_many([
        {"_id": 1, "stock": "ABC", "date": D(2020, 5, 18, 20), "price": 13},
        {"_id": 2, "stock": "ABC", "date": D(2020, 5, 19, 20), "price": 15.4},
        {"_id": 3, "stock": "ABC", "date": D(2020, 5, 20, 20), "price": 12},
        {"_id": 4, "stock": "ABC", "date": D(2020, 5, 21, 20), "price": 11.7},
        {"_id": 5, "stock": "DEF", "date": D(2020, 5, 18, 20), "price": 82},
        {"_id": 6, "stock": "DEF", "date": D(2020, 5, 19, 20), "price": 94},
        {"_id": 7, "stock": "DEF", "date": D(2020, 5, 20, 20), "price": 112},
        {"_id": 8, "stock": "DEF", "date": D(2020, 5, 21, 20), "price": 97.3},
    ])
    return c


def test_doc_exp_moving_avg_n(stock):
    rows = swf(stock, {"partitionBy": "$stock", "sortBy": {"date": 1},
                       "output": {"e": {"$expMovingAvg": {"input": "$price", "N": 2}}}})
    check(out(rows, "e"), [(1, 13.0), (2, 14.6), (3, 12.866666666666667), (4, 12.088888888888889),
                           (5, 82.0), (6, 90.0), (7, 104.66666666666667), (8, 99.75555555555556)])


def test_doc_exp_moving_avg_alpha(stock):
    rows = swf(stock, {"partitionBy": "$stock", "sortBy": {"date": 1},
                       "output": {"e": {"$expMovingAvg": {"input": "$price", "alpha": 0.75}}}})
    check(out(rows, "e"), [(1, 13.0), (2, 14.8), (3, 12.7), (4, 11.95), (5, 82.0), (6, 91.0),
                           (7, 106.75), (8, 99.6625)])


@pytest.fixture(scope="module")
def meter(db):
    c = db.deliveryFleet
    c.insert_many([
        {"_id": 1, "truck": "1", "ts": D(2020, 5, 18, 14, 10, 30), "miles": 1295.1},
        {"_id": 2, "truck": "1", "ts": D(2020, 5, 18, 14, 11), "miles": 1295.63},
        {"_id": 3, "truck": "1", "ts": D(2020, 5, 18, 14, 12), "miles": 1296.75},
        {"_id": 4, "truck": "1", "ts": D(2020, 5, 18, 14, 13), "miles": 1297.59},
    ])
    return c


def test_doc_derivative_per_hour(meter):
    rows = swf(meter, {"partitionBy": "$truck", "sortBy": {"ts": 1},
                       "output": {"v": {"$derivative": {"input": "$miles", "unit": "hour"},
                                        "window": {"range": [-30, 0], "unit": "second"}}}})
    check(out(rows, "v"), [(1, None), (2, (1295.63 - 1295.1) / 30000 * 3600000), (3, None),
                           (4, None)])


def test_derivative_documents_window(nums):
    rows = run(nums, {"d": {"$derivative": {"input": "$x"}, "window": {"documents": [-1, 0]}}},
               project={"_id": 1, "d": 1, "g": 1})
    check([r["d"] for r in rows if r.get("g") == "a"], [None, 1.0, 1.0, 1.0])


def test_doc_integral_kilowatt_hours(db):
    c = db.powerConsumption
    c.insert_many([
        {"_id": 1, "powerMeterID": "1", "timeStamp": D(2020, 5, 18, 14, 10, 30), "kilowatts": 2.95},
        {"_id": 2, "powerMeterID": "1", "timeStamp": D(2020, 5, 18, 14, 11), "kilowatts": 2.7},
        {"_id": 3, "powerMeterID": "1", "timeStamp": D(2020, 5, 18, 14, 12), "kilowatts": 2.6},
        {"_id": 4, "powerMeterID": "1", "timeStamp": D(2020, 5, 18, 14, 13), "kilowatts": 2.98},
    ])
    rows = swf(c, {"partitionBy": "$powerMeterID", "sortBy": {"timeStamp": 1},
                   "output": {"kwh": {"$integral": {"input": "$kilowatts", "unit": "hour"},
                                      "window": {"range": ["unbounded", "current"],
                                                 "unit": "hour"}}}})
    a = 30000 * (2.95 + 2.7) / 2.0
    b = 60000 * (2.7 + 2.6) / 2.0
    check(out(rows, "kwh"), [(1, 0.0), (2, a / 3600000), (3, (a + b) / 3600000),
                             (4, (a + b + 60000 * (2.6 + 2.98) / 2.0) / 3600000)])


def test_covariance(nums):
    rows = run(nums, {"p": {"$covariancePop": ["$x", "$y"]},
                      "s": {"$covarianceSamp": ["$x", "$y"], "window": {"documents": [0, 0]}}},
               project={"_id": 1, "p": 1, "s": 1, "g": 1})
    a = [r for r in rows if r.get("g") == "a"]
    xs, ys = [1, 2, 4], [10, 20.5, 5]
    mx, my = sum(xs) / 3, sum(ys) / 3
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / 3
    assert a[0]["p"] == pytest.approx(cov)
    assert type(a[0]["p"]) is float
    check([r["s"] for r in a], [None, None, None, None])


def test_locf_and_linear_fill(db):
    c = db.fillme
    c.insert_many([{"_id": 1, "t": 1, "v": None}, {"_id": 2, "t": 2, "v": 10},
                   {"_id": 3, "t": 3}, {"_id": 4, "t": 5, "v": None}, {"_id": 5, "t": 6, "v": 30},
                   {"_id": 6, "t": 7, "v": None}])
    rows = swf(c, {"sortBy": {"t": 1}, "output": {"l": {"$locf": "$v"},
                                                  "f": {"$linearFill": "$v"}}})
    check([(r["l"], r["f"]) for r in rows],
          [(None, None), (10, 10), (10, 15.0), (10, 25.0), (30, 30), (30, None)])


def test_linear_fill_with_dates(db):
    c = db.fillDates
    c.insert_many([{"_id": 1, "t": D(2021, 1, 1), "v": 0}, {"_id": 2, "t": D(2021, 1, 2)},
                   {"_id": 3, "t": D(2021, 1, 5), "v": 8}])
    rows = swf(c, {"sortBy": {"t": 1}, "output": {"f": {"$linearFill": "$v"}}})
    check(out(rows, "f"), [(1, 0), (2, 2.0), (3, 8)])


def test_linear_fill_errors(db):
    c = db.fillBad
    c.insert_many([{"_id": 1, "t": 1, "v": 1}, {"_id": 2, "t": 1, "v": None}])
    fail(c, [{"$setWindowFields": {"sortBy": {"t": 1}, "output": {"f": {"$linearFill": "$v"}}}}],
         6050106, "There can be no repeated values in the sort field")
    c2 = db.fillBad2
    c2.insert_many([{"_id": 1, "t": 1, "v": "x"}])
    fail(c2, [{"$setWindowFields": {"sortBy": {"t": 1}, "output": {"f": {"$linearFill": "$v"}}}}],
         14, "Value to be filled must be numeric or nullish, but found string")


def test_dotted_output_and_overwrite(nums):
    rows = run(nums, {"a.b": {"$documentNumber": {}}, "x": {"$max": "$y"}},
               project={"_id": 1, "a": 1, "x": 1, "g": 1})
    a = [r for r in rows if r.get("g") == "a"]
    check([(r["a"], r["x"]) for r in a], [({"b": 1}, 20.5), ({"b": 2}, 20.5), ({"b": 3}, 20.5),
                                           ({"b": 4}, 20.5)])


def test_range_window_skips_non_numeric_sort_values(db):
    c = db.mixedSort
    c.insert_many([{"_id": 1, "x": None, "v": 1}, {"_id": 2, "x": 1, "v": 2},
                   {"_id": 3, "x": 2, "v": 3}])
    rows = swf(c, {"sortBy": {"x": 1}, "output": {
        "s": {"$sum": "$v", "window": {"documents": ["unbounded", "current"]}}}})
    check(out(rows, "s"), [(1, 1), (2, 3), (3, 6)])
    fail(c, [{"$setWindowFields": {"sortBy": {"x": 1}, "output": {
        "s": {"$sum": "$v", "window": {"range": ["unbounded", "current"]}}}}}],
         5429414, "Invalid range: Expected the sortBy field to be a number, but it was null")


def test_range_over_dates_needs_unit(meter):
    fail(meter, [{"$setWindowFields": {"sortBy": {"ts": 1}, "output": {
        "s": {"$sum": 1, "window": {"range": [-1, 0]}}}}}], 5429413,
         "Invalid range: For windows that involve date or time ranges, a unit must be provided.")
    fail(meter, [{"$setWindowFields": {"sortBy": {"miles": 1}, "output": {
        "s": {"$sum": 1, "window": {"range": [-1, 0], "unit": "day"}}}}}], 5429513,
         "Invalid range: Expected the sortBy field to be a Date, but it was double")


def test_partition_by_array_fails(db):
    c = db.arrpart
    c.insert_many([{"_id": 1, "p": [1, 2]}])
    fail(c, [{"$setWindowFields": {"partitionBy": "$p", "output": {"n": {"$count": {}}}}}], 14,
         "Cannot 'partitionBy' an expression of type array")
    fail(c, [{"$setWindowFields": {"partitionBy": [1], "output": {"n": {"$count": {}}}}}], 14,
         "An expression used to partition cannot evaluate to value of type array")


def test_memory_limit(db):
    c = db.big
    blob = "x" * (1024 * 1024)
    c.insert_many([{"_id": i, "b": blob} for i in range(101)])
    fail(c, [{"$setWindowFields": {"output": {"n": {"$count": {}}}}}], 5414201,
         "Exceeded memory limit in DocumentSourceSetWindowFields, used ")
    c.drop()


# ------------------------------------------------------------------ errors

W = "$setWindowFields"


@pytest.mark.parametrize("spec,code,msg", [
    (1, 9, "the $setWindowFields stage specification must be an object, found int"),
    ({"output": {}, "foo": 1}, 40415, "BSON field '$setWindowFields.foo' is an unknown field."),
    ({}, 40414, "BSON field '$setWindowFields.output' is missing but a required field"),
    ({"output": 1}, 14, "BSON field '$setWindowFields.output' is the wrong type 'int', expected "
                        "type 'object'"),
    ({"sortBy": "x", "output": {}}, 14, "BSON field '$setWindowFields.sortBy' is the wrong type "
                                        "'string', expected type 'object'"),
    ({"output": {"a": 1}}, 9, "The field 'a' must be an object"),
    ({"output": {"a": {}}}, 9, "Expected a $-prefixed window function"),
    ({"output": {"a": {"x": 1}}}, 9, "Expected a $-prefixed window function, x"),
    ({"output": {"a": {"$summ": 1}}}, 9, "Unrecognized window function, $summ"),
    ({"output": {"a": {"$mergeObjects": "$x"}}}, 9, "Unrecognized window function, $mergeObjects"),
    ({"output": {"a": {"$sum": 1, "$avg": 1}}}, 9,
     "Cannot specify two functions in window function spec"),
    ({"output": {"a": {"$sum": 1, "foo": 1}}}, 9, "Window function found an unknown argument: foo"),
    ({"output": {"a": {"$sum": 1}, "a.b": {"$sum": 1}}}, 6307900,
     "$setWindowFields 'output' specification contains two conflicting paths"),
    ({"output": {"a.b": {"$sum": 1}, "a": {"$sum": 1}}}, 6307900, None),
    ({"output": {"$a": {"$sum": 1}}}, 16410, "FieldPath field names may not start with '$'"),
    ({"output": {"a": {"$sum": 1, "window": 1}}}, 9, "'window' field must be an object"),
    ({"output": {"a": {"$sum": 1, "window": {"documents": [0, 1], "range": [0, 1]}}}}, 9,
     "Window bounds can specify either 'documents' or 'unit', not both."),
    ({"output": {"a": {"$sum": 1, "window": {"documents": [0, 1], "unit": "day"}}}}, 9,
     "Window bounds can only specify 'unit' with range-based bounds."),
    ({"output": {"a": {"$sum": 1, "window": {"foo": 1}}}}, 9,
     "'window' field can only contain 'documents' as the only argument or 'range' with an "
     "optional 'unit' field"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [0]}}}}, 9,
     "Window bounds must be a 2-element array: documents: [ 0 ]"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"documents": ["x", 0]}}}}, 9,
     "Window bounds must be 'unbounded', 'current', or a number."),
    ({"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [0.5, 1]}}}}, 9,
     "Numeric document-based bounds must be an integer"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"documents": ["$x", 1]}}}}, 9,
     "Window bounds must be 'unbounded', 'current', or a number."),
    ({"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [
        {"$add": ["$x", 1]}, 1]}}}}, 9, "Window bounds expression must be a constant."),
    ({"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [2, 1]}}}}, 5339900,
     "Lower bound must not exceed upper bound: [2, 1]"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [1, "current"]}}}},
     5339900, "Lower bound must not exceed upper bound"),
    ({"output": {"a": {"$sum": 1, "window": {"documents": [0, 1]}}}}, 5339901,
     "Document-based bounds require a sortBy"),
    ({"output": {"a": {"$sum": 1, "window": {"range": [0, 1]}}}}, 5339902,
     "Range-based bounds require sortBy a single field"),
    ({"sortBy": {"x": 1, "y": 1}, "output": {"a": {"$sum": 1, "window": {"range": [0, 1]}}}},
     5339902, "Range-based bounds require sortBy a single field"),
    ({"sortBy": {"x": -1}, "output": {"a": {"$sum": 1, "window": {"range": [0, 1]}}}}, 5339903,
     "Range-based bounds require an ascending sortBy"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"range": ["a", 1]}}}}, 9,
     "Window bounds must be 'unbounded', 'current', or a number."),
    ({"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"range": [{"$literal": "a"},
                                                                              1]}}}}, 9,
     "Range-based bounds expression must be a number"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"range": [0.5, 1],
                                                                   "unit": "day"}}}}, 9,
     "With 'unit', range-based bounds must be an integer"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"range": [0, 1],
                                                                   "unit": "days"}}}}, 9,
     "unknown time unit value: days"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"range": [0, 1],
                                                                   "unit": 1}}}}, 9,
     "'unit' must be a string"),
    ({"output": {"a": {"$rank": {}}}}, 5371602,
     "$rank must be specified with a top level sortBy expression with exactly one element"),
    ({"sortBy": {"x": 1, "y": 1}, "output": {"a": {"$denseRank": {}}}}, 5371602, None),
    ({"sortBy": {"x": 1}, "output": {"a": {"$rank": 1}}}, 5371603,
     "$rank must be specified with '{}' as the value"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$rank": {}, "window": {}}}}, 5371601,
     "Rank style window functions take no other arguments"),
    ({"output": {"a": {"$shift": {"output": "$x", "by": 1}}}}, 9, "'$shift' requires a sortBy"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$shift": {"output": "$x"}}}}, 9,
     "$shift requires 'by' as an integer value."),
    ({"sortBy": {"x": 1}, "output": {"a": {"$shift": {"by": 1}}}}, 9,
     "$shift requires an 'output' expression."),
    ({"sortBy": {"x": 1}, "output": {"a": {"$shift": {"output": 1, "by": 1.5}}}}, 9,
     "'$shift:by' field must be an integer, but found  by: 1.5"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$shift": {"output": 1, "by": 1, "default": "$x"}}}},
     9, "'$shift:default' expression must yield a constant value."),
    ({"sortBy": {"x": 1}, "output": {"a": {"$shift": {"output": 1, "by": 1, "z": 1}}}}, 9,
     "Unknown argument in $shift"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$shift": {"output": 1, "by": 1},
                                           "window": {}}}}, 9,
     "$shift does not accept a 'window' field"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$shift": 1}}}, 9, "Argument to $shift must be an object"),
    ({"output": {"a": {"$expMovingAvg": {"input": "$x", "N": 2}}}}, 9,
     "$expMovingAvg requires an explicit 'sortBy'"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$expMovingAvg": {"input": "$x"}}}}, 9,
     "$expMovingAvg sub object must have exactly two fields"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$expMovingAvg": {"input": "$x", "N": 0}}}}, 9,
     "'N' must be greater than zero. Got 0"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$expMovingAvg": {"input": "$x", "N": 1.5}}}}, 9,
     "'N' field must be an integer, but found  N: 1.5"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$expMovingAvg": {"input": "$x", "alpha": 1}}}}, 9,
     "'alpha' must be between 0 and 1 (exclusive), found alpha: 1"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$expMovingAvg": {"input": "$x", "N": 2},
                                           "window": {}}}}, 9,
     "$expMovingAvg must have exactly one argument that is an object"),
    ({"output": {"a": {"$derivative": {"input": "$x"}}}}, 9, "$derivative requires a sortBy"),
    ({"sortBy": {"x": 1, "y": 1}, "output": {"a": {"$derivative": {"input": "$x"}}}}, 9,
     "$derivative requires a non-compound sortBy"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$derivative": {"input": "$x"}}}}, 9,
     "$derivative requires explicit window bounds"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$derivative": {"unit": "hour"},
                                           "window": {"documents": [0, 1]}}}}, 9,
     "$derivative requires an 'input' expression"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$derivative": {"input": 1, "unit": "month"},
                                           "window": {"documents": [0, 1]}}}}, 5490710,
     "unit must be 'week' or smaller"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$integral": 1}}}, 9,
     "$integral expects an object, but got a int: $integral: 1"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$integral": {"input": 1, "foo": 1}}}}, 9,
     "$integral got unexpected argument: foo"),
    ({"sortBy": {"x": 1}, "output": {"a": {"$locf": "$x", "window": {}}}}, 9,
     "'window' field is not allowed in $locf"),
    ({"output": {"a": {"$linearFill": "$x"}}}, 605001,
     "$linearFill must be specified with a top level sortBy expression with exactly one element"),
    ({"output": {"a": {"$first": 1, "foo": 2}}}, 9, "$first got unexpected argument: foo"),
    ({"output": {"a": {"$count": 1}}}, 9, "$count only accepts an empty object as input"),
    ({"sortBy": {"x": "a"}, "output": {}}, 15974, None),
])
def test_parse_errors(nums, spec, code, msg):
    fail(nums, [{W: spec}], code, msg)


def test_derivative_runtime_errors(meter, nums):
    fail(meter, [{W: {"sortBy": {"ts": 1}, "output": {
        "d": {"$derivative": {"input": "$miles"}, "window": {"documents": [-1, 0]}}}}}], 5624901,
         "$derivative where the sortBy is a Date requires an 'unit'")
    fail(nums, [{W: {"sortBy": {"x": 1}, "partitionBy": "$g", "output": {
        "d": {"$derivative": {"input": "$y", "unit": "second"},
              "window": {"documents": [-1, 0]}}}}}], 5624900,
         "$derivative with 'unit' expects the sortBy field to be a Date")


# ---------------------------------------------------------------- $densify


@pytest.fixture(scope="module")
def coffee(db):
    c = db.coffee
    c.insert_many([
        {"_id": 1, "altitude": 600, "variety": "Arabica Typica", "score": 68.3},
        {"_id": 2, "altitude": 750, "variety": "Arabica Typica", "score": 69.5},
        {"_id": 3, "altitude": 950, "variety": "Arabica Typica", "score": 70.5},
        {"_id": 4, "altitude": 1250, "variety": "Gesha", "score": 88.15},
        {"_id": 5, "altitude": 1700, "variety": "Gesha", "score": 85.5},
        {"_id": 6, "altitude": 1600, "variety": "SL28", "score": 66.5},
        {"_id": 7, "altitude": 1800, "variety": "SL28", "score": 61.5},
        {"_id": 8, "altitude": 2000, "variety": "SL28", "score": 60.1},
    ])
    return c


def dens(coll, spec):
    return [(d.get("variety"), d["altitude"], d.get("_id")) for d in
            coll.aggregate([{"$densify": spec}])]


def test_densify_partition_bounds(coffee):
    got = dens(coffee, {"field": "altitude", "partitionByFields": ["variety"],
                        "range": {"bounds": "partition", "step": 200}})
    check(got, [("Arabica Typica", 600, 1), ("Arabica Typica", 750, 2),
                ("Arabica Typica", 800, None), ("Arabica Typica", 950, 3),
                ("Gesha", 1250, 4), ("Gesha", 1450, None), ("Gesha", 1650, None),
                ("Gesha", 1700, 5), ("SL28", 1600, 6), ("SL28", 1800, 7), ("SL28", 2000, 8)])


def test_densify_full_without_partitions(coffee):
    got = dens(coffee, {"field": "altitude", "range": {"bounds": "full", "step": 500}})
    check([(a, i) for _, a, i in got],
          [(600, 1), (750, 2), (950, 3), (1100, None), (1250, 4), (1600, 6), (1700, 5), (1800, 7), (2000, 8)])


def test_densify_explicit_bounds(coffee):
    got = dens(coffee, {"field": "altitude", "range": {"bounds": [500, 1000], "step": 200}})
    check([(a, i) for _, a, i in got],
          [(500, None), (600, 1), (700, None), (750, 2), (900, None), (950, 3), (1250, 4),
           (1600, 6), (1700, 5), (1800, 7), (2000, 8)])


def test_densify_full_with_partitions(db):
    c = db.densFullPart
    c.insert_many([{"_id": 1, "p": "a", "v": 0}, {"_id": 2, "p": "b", "v": 4},
                   {"_id": 3, "p": "a", "v": 6}])
    got = [(d.get("p"), d["v"], d.get("_id")) for d in c.aggregate(
        [{"$densify": {"field": "v", "partitionByFields": ["p"],
                       "range": {"bounds": "full", "step": 2}}}])]
    # sorted by v alone ("full"): each partition's gaps are filled as its
    # documents arrive, then every partition up to the greatest value (6, exclusive)
    check(got, [("a", 0, 1), ("b", 0, None), ("b", 2, None), ("b", 4, 2), ("a", 2, None),
                ("a", 4, None), ("a", 6, 3)])


def test_densify_dates_and_types(db):
    c = db.weather
    c.insert_many([{"_id": 1, "ts": D(2021, 5, 18, 0)}, {"_id": 2, "ts": D(2021, 5, 18, 4)},
                   {"_id": 3, "ts": D(2021, 5, 18, 8)}, {"_id": 4, "ts": D(2021, 5, 18, 12)}])
    got = [d["ts"] for d in c.aggregate([{"$densify": {
        "field": "ts", "range": {"step": 1, "unit": "hour",
                                 "bounds": [D(2021, 5, 18, 0), D(2021, 5, 18, 8)]}}}])]
    assert got == [D(2021, 5, 18, h) for h in range(0, 9)] + [D(2021, 5, 18, 12)]
    c2 = db.densTypes
    c2.insert_many([{"_id": 1, "v": Int64(1)}, {"_id": 2, "v": Int64(4)}, {"_id": 3, "v": None},
                    {"_id": 4}])
    got = [d.get("v", "MISSING") for d in c2.aggregate([{"$densify": {
        "field": "v", "range": {"step": Int64(1), "bounds": "full"}}}, {"$project": {"_id": 0}}])]
    check(got[2:], [Int64(1), Int64(2), Int64(3), Int64(4)])
    got = [d["v"] for d in c2.aggregate([{"$match": {"v": {"$ne": None}}}, {"$densify": {
        "field": "v", "range": {"step": 1.5, "bounds": "full"}}}])]
    check(got, [Int64(1), 2.5, Int64(4)])


def test_densify_months(db):
    c = db.months
    c.insert_many([{"_id": 1, "d": D(2021, 1, 31)}, {"_id": 2, "d": D(2021, 5, 1)}])
    got = [d["d"] for d in c.aggregate([{"$densify": {
        "field": "d", "range": {"step": 1, "unit": "month", "bounds": "full"}}}])]
    assert got == [D(2021, 1, 31), D(2021, 2, 28), D(2021, 3, 31), D(2021, 4, 30), D(2021, 5, 1)]


def test_densify_type_errors(db):
    c = db.densBad
    c.insert_many([{"_id": 1, "v": "x"}])
    fail(c, [{"$densify": {"field": "v", "range": {"step": 1, "bounds": "full"}}}], 5733201)


@pytest.mark.parametrize("spec,code,msg", [
    (1, 9, "The $densify stage specification must be an object, found int"),
    ({"range": {"step": 1, "bounds": "full"}}, 40414,
     "BSON field '$densify.field' is missing but a required field"),
    ({"field": "a"}, 40414, "BSON field '$densify.range' is missing but a required field"),
    ({"field": "a", "range": {"step": 1, "bounds": "full"}, "x": 1}, 40415,
     "BSON field '$densify.x' is an unknown field."),
    ({"field": "a", "range": {"step": -1, "bounds": [0, 1]}}, 5733401,
     "The step parameter in a range statement must be a strictly positive numeric value"),
    ({"field": "a", "range": {"step": 1, "bounds": [0]}}, 5733403,
     "A bounding array in a range statement must have exactly two elements"),
    ({"field": "a", "range": {"step": 1, "bounds": [0, 1, 2]}}, 5733403, None),
    ({"field": "a", "range": {"step": 1, "bounds": [2, 1]}}, 5733402,
     "A bounding array must be an ascending array of either two dates or two numbers"),
    ({"field": "a", "range": {"step": 1, "bounds": [0, 1], "unit": "day"}}, 5733409,
     "Numeric bounds may not have unit parameter"),
    ({"field": "a", "range": {"step": 1, "bounds": [0, 1.0]}}, 5876900,
     "Upper bound, lower bound, and step must all have the same type"),
    ({"field": "a", "range": {"step": 1, "bounds": [D(2020, 1, 1), D(2020, 1, 2)]}}, 5733410,
     "A bounding array of dates must specify a unit"),
    ({"field": "a", "range": {"step": 1.5, "unit": "day", "bounds": "full"}}, 6586400,
     "The step parameter in a range statement must be a whole number when densifying a date "
     "range"),
    ({"field": "a", "range": {"step": 1, "bounds": "whatever"}}, 5946802,
     "Bounds string must either be 'full' or 'partition'"),
    ({"field": "a", "range": {"step": 1, "bounds": 5}}, 5733404, None),
    ({"field": "a", "range": {"step": 1, "bounds": ["a", "b"]}}, 5946800,
     "Explicit bounds must be numeric or dates"),
    ({"field": "a", "range": {"step": 1, "bounds": "partition"}}, 5733408,
     "One cannot specify the bounds as 'partition' without specifying a non-empty array of "
     "partitionByFields"),
    ({"field": "$a", "range": {"step": 1, "bounds": "full"}}, 16410, None),
    ({"field": "a", "partitionByFields": ["$b"], "range": {"step": 1, "bounds": "full"}}, 16410,
     None),
    ({"field": "a", "range": {"step": 1, "unit": 1.0, "bounds": "full"}}, 14,
     "BSON field '$densify.range.unit' is the wrong type 'double', expected type 'string'"),
    ({"field": "a", "partitionByFields": ["a"], "range": {"step": 1, "bounds": "full"}}, 8993000,
     None),
])
def test_densify_parse_errors(coffee, spec, code, msg):
    fail(coffee, [{"$densify": spec}], code, msg)


# ------------------------------------------------------------------- $fill


@pytest.fixture(scope="module")
def dress(db):
    c = db.dresses
    c.insert_many([
        {"_id": 1, "date": D(2022, 2, 2), "score": 10},
        {"_id": 2, "date": D(2022, 2, 3), "score": None},
        {"_id": 3, "date": D(2022, 2, 5), "score": 30},
        {"_id": 4, "date": D(2022, 2, 6)},
        {"_id": 5, "date": D(2022, 2, 7), "score": None},
    ])
    return c


def test_fill_value(dress):
    rows = list(dress.aggregate([{"$fill": {"output": {"score": {"value": 0}}}},
                                 {"$sort": {"_id": 1}}]))
    check([r["score"] for r in rows], [10, 0, 30, 0, 0])


def test_fill_locf_and_linear(dress):
    rows = list(dress.aggregate([{"$fill": {"sortBy": {"date": 1},
                                            "output": {"score": {"method": "locf"}}}}]))
    check([r["score"] for r in rows], [10, 10, 30, 30, 30])
    rows = list(dress.aggregate([{"$fill": {"sortBy": {"date": 1},
                                            "output": {"score": {"method": "linear"}}}}]))
    check([r["score"] for r in rows], [10, 10 + 86400000 * (20 / (3 * 86400000)), 30, None, None])


def test_fill_partition_by_fields(db):
    c = db.fillPart
    c.insert_many([{"_id": 1, "p": "a", "t": 1, "v": 1}, {"_id": 2, "p": "b", "t": 2, "v": 5},
                   {"_id": 3, "p": "a", "t": 3}, {"_id": 4, "p": "b", "t": 4}])
    rows = list(c.aggregate([{"$fill": {"sortBy": {"t": 1}, "partitionByFields": ["p"],
                                        "output": {"v": {"method": "locf"}}}},
                             {"$sort": {"_id": 1}}]))
    check([r["v"] for r in rows], [1, 5, 1, 5])


@pytest.mark.parametrize("spec,code,msg", [
    (1, 9, "The $fill stage specification must be an object, found int"),
    ({"output": {}}, 6050203,
     "The output field in '$fill' must contain an object with at least one element"),
    ({"output": {"a": 1}}, 6050200,
     "Each fill output specification must be an object with exactly one field"),
    ({"output": {"a": {"method": "x"}}}, 6050202, "Method must be either locf or linear"),
    ({"output": {"a": {"method": "locf", "value": 1}}}, 6050201,
     "Each fill output specification must have exactly one of 'method' or 'value' fields, not "
     "both"),
    ({"partitionBy": "$a", "partitionByFields": ["a"], "output": {"a": {"value": 1}}}, 6050204,
     "Maximum one of 'partitionBy' and 'partitionByFields can be specified in '$fill'"),
    ({"output": {"a": {"method": "linear"}}}, 605001, None),
    ({}, 40414, "BSON field '$fill.output' is missing but a required field"),
    ({"output": {"a": {"value": 1}}, "z": 1}, 40415, "BSON field '$fill.z' is an unknown field."),
])
def test_fill_parse_errors(dress, spec, code, msg):
    fail(dress, [{"$fill": spec}], code, msg)


# ------------------------------------------------------------- Decimal128


@pytest.fixture(scope="module")
def decs(db):
    c = db.decs
    c.insert_many([{"_id": 0, "x": Dec("1.5"), "y": 1}, {"_id": 1, "x": Dec("2.0"), "y": 2},
                   {"_id": 2, "x": Dec("2.75"), "y": Dec("3.5")},
                   {"_id": 3, "x": Dec("4"), "y": 4}])
    return c


def test_decimal_range_bounds(decs):
    rows = swf(decs, {"sortBy": {"x": 1},
                      "output": {"s": {"$sum": "$y", "window": {"range": [Dec("-1.0"), 0]}}}})
    check(out(rows, "s"), [(0, 1), (1, 3), (2, Dec("5.5")), (3, 4)])
    # integer and decimal bounds mixed, over decimal sortBy values
    rows = swf(decs, {"sortBy": {"x": 1},
                      "output": {"ids": {"$push": "$_id", "window": {"range": [-1, Dec("0.5")]}}}})
    check(out(rows, "ids"), [(0, [0, 1]), (1, [0, 1]), (2, [1, 2]), (3, [3])])
    fail(decs, [{"$setWindowFields": {"sortBy": {"x": 1}, "output": {
        "s": {"$sum": "$y", "window": {"range": [Dec("0.5"), Dec("0.25")]}}}}}], 5339900,
         "Lower bound must not exceed upper bound")


def test_decimal_exp_moving_avg(decs):
    # computed in Decimal128 throughout (alpha = 2/3); a double until the
    # first decimal input, then a decimal
    rows = swf(decs, {"sortBy": {"x": 1},
                      "output": {"e": {"$expMovingAvg": {"input": "$y", "N": 2}}}})
    check(out(rows, "e"), [(0, 1.0), (1, 1.6666666666666667),
                           (2, Dec("2.888888888888888888888888888888888")),
                           (3, Dec("3.629629629629629629629629629629630"))])
    rows = swf(decs, {"sortBy": {"x": 1},
                      "output": {"e": {"$expMovingAvg": {"input": "$x", "alpha": Dec("0.25")}}}})
    check(out(rows, "e"), [(0, Dec("1.5")), (1, Dec("1.625")), (2, Dec("1.90625")),
                           (3, Dec("2.4296875"))])


def test_decimal_derivative(decs):
    rows = swf(decs, {"sortBy": {"x": 1}, "output": {
        "d": {"$derivative": {"input": "$y"}, "window": {"documents": [-1, 0]}}}})
    check(out(rows, "d"), [(0, None), (1, Dec("2")), (2, Dec("2")), (3, Dec("0.4"))])


def test_densify_decimal(db):
    c = db.densdec
    c.insert_many([{"_id": 1, "v": Dec("1.0")}, {"_id": 2, "v": Dec("2.0")}])
    got = [(d.get("_id"), d["v"]) for d in c.aggregate([
        {"$densify": {"field": "v", "range": {"step": Dec("0.25"), "bounds": "full"}}}])]
    check(got, [(1, Dec("1.0")), (None, Dec("1.25")), (None, Dec("1.50")),
                (None, Dec("1.75")), (2, Dec("2.0"))])
    got = [(d.get("_id"), d["v"]) for d in c.aggregate([
        {"$densify": {"field": "v", "range": {"step": Dec("0.5"),
                                              "bounds": [Dec("0"), Dec("2.5")]}}}])]
    check(got, [(None, Dec("0")), (None, Dec("0.5")), (1, Dec("1.0")), (None, Dec("1.5")),
                (2, Dec("2.0"))])
    # integer values, a decimal step: the generated values are decimals
    c = db.densint
    c.insert_many([{"_id": 1, "v": 1}, {"_id": 2, "v": 3}])
    got = [(d.get("_id"), d["v"]) for d in c.aggregate([
        {"$densify": {"field": "v", "range": {"step": Dec("0.5"), "bounds": "full"}}}])]
    check(got, [(1, 1), (None, Dec("1.5")), (None, Dec("2.0")), (None, Dec("2.5")), (2, 3)])
