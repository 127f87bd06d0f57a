"""$bucket, $bucketAuto and $redact end to end through pymongo.

mongod 7.0 is the reference: the documented examples, bucket boundaries
and defaults, $bucketAuto's bucket filling and granularity series, and
the parse errors with mongod's codes and messages."""
from __future__ import annotations

import pytest
from bson import Int64
from bson.decimal128 import Decimal128 as Dec
from pymongo.errors import OperationFailure

import multifora
import pymongo

from test_agg_window import check, fail


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    srv = multifora.Server(str(tmp_path_factory.mktemp("bucket") / "db"), port=0)
    srv.start()
    c = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000)
    yield c.t
    c.close()
    srv.stop()


@pytest.fixture(scope="module")
def artists(db):
    c = db.artists
    c.insert_many([
        {"_id": 1, "last_name": "Bernard", "first_name": "Emil", "year_born": 1868,
         "year_died": 1941, "nationality": "France"},
        {"_id": 2, "last_name": "Rippl-Ronai", "first_name": "Joszef", "year_born": 1861,
         "year_died": 1927, "nationality": "Hungary"},
        {"_id": 3, "last_name": "Ostroumova", "first_name": "Anna", "year_born": 1871,
         "year_died": 1955, "nationality": "Russia"},
        {"_id": 4, "last_name": "Van Gogh", "first_name": "Vincent", "year_born": 1853,
         "year_died": 1890, "nationality": "Holland"},
        {"_id": 5, "last_name": "Maurer", "first_name": "Alfred", "year_born": 1868,
         "year_died": 1932, "nationality": "USA"},
        {"_id": 6, "last_name": "Munch", "first_name": "Edvard", "year_born": 1863,
         "year_died": 1944, "nationality": "Norway"},
        {"_id": 7, "last_name": "Redon", "first_name": "Odilon", "year_born": 1840,
         "year_died": 1916, "nationality": "France"},
        {"_id": 8, "last_name": "Diriks", "first_name": "Edvard", "year_born": 1855,
         "year_died": 1930, "nationality": "Norway"},
    ])
    return c


# ---------------------------------------------------------------- $bucket


def test_doc_bucket_example(artists):
    rows = list(artists.aggregate([
        {"$bucket": {"groupBy": "$year_born", "boundaries": [1840, 1850, 1860, 1870, 1880],
                     "default": "Other",
                     "output": {"count": {"$sum": 1},
                                "artists": {"$push": {
                                    "name": {"$concat": ["$first_name", " ", "$last_name"]},
                                    "year_born": "$year_born"}}}}},
        {"$match": {"count": {"$gt": 3}}}]))
    check(rows, [{"_id": 1860, "count": 4, "artists": [
        {"name": "Emil Bernard", "year_born": 1868},
        {"name": "Joszef Rippl-Ronai", "year_born": 1861},
        {"name": "Alfred Maurer", "year_born": 1868},
        {"name": "Edvard Munch", "year_born": 1863}]}])


def test_bucket_default_count_and_order(artists):
    rows = list(artists.aggregate([{"$bucket": {"groupBy": "$year_born",
                                                "boundaries": [1850, 1860, 1870],
                                                "default": 0}}]))
    # default 0 sorts before the boundaries' buckets ($sort by _id)
    check(rows, [{"_id": 0, "count": 2}, {"_id": 1850, "count": 2}, {"_id": 1860, "count": 4}])


def test_bucket_without_default_fails_outside(artists):
    fail(artists, [{"$bucket": {"groupBy": "$year_born", "boundaries": [1850, 1860]}}], 40066)


def test_bucket_string_default_and_mixed_numbers(db):
    c = db.bmixed
    c.insert_many([{"_id": 1, "v": 1}, {"_id": 2, "v": 2.5}, {"_id": 3, "v": Int64(7)},
                   {"_id": 4, "v": "x"}, {"_id": 5}])
    rows = list(c.aggregate([{"$bucket": {"groupBy": "$v", "boundaries": [0, 2, 10.5],
                                          "default": "other",
                                          "output": {"ids": {"$push": "$_id"},
                                                     "s": {"$sum": "$v"}}}}]))
    check(rows, [{"_id": 0, "ids": [1], "s": 1}, {"_id": 2, "ids": [2, 3], "s": 9.5},
                 {"_id": "other", "ids": [4, 5], "s": 0}])


def test_bucket_expression_group_by(artists):
    rows = list(artists.aggregate([{"$bucket": {
        "groupBy": {"$subtract": ["$year_died", "$year_born"]}, "boundaries": [0, 60, 100],
        "output": {"n": {"$sum": 1}, "avg": {"$avg": "$year_born"}}}}]))
    check(rows, [{"_id": 0, "n": 1, "avg": 1853.0}, {"_id": 60, "n": 7, "avg": 13026 / 7}])


@pytest.mark.parametrize("spec,code,msg", [
    (1, 40201, "Argument to $bucket stage must be an object, but found type: int."),
    ({"groupBy": "year", "boundaries": [0, 1]}, 40202,
     "The $bucket 'groupBy' field must be defined as a $-prefixed path or an expression, but "
     "found: \"year\"."),
    ({"groupBy": {"a": 1}, "boundaries": [0, 1]}, 40202, None),
    ({"groupBy": "$x", "boundaries": 1}, 40200,
     "The $bucket 'boundaries' field must be an array, but found type: int."),
    ({"groupBy": "$x", "boundaries": ["$y", 1]}, 40191,
     "The $bucket 'boundaries' field must be an array of constant values, but found value: "
     "\"$y\"."),
    ({"groupBy": "$x", "boundaries": [1]}, 40192,
     "The $bucket 'boundaries' field must have at least 2 values, but found 1 value(s)."),
    ({"groupBy": "$x", "boundaries": [1, "a"]}, 40193,
     "All values in the the 'boundaries' option to $bucket must have the same type. Found "
     "conflicting types int and string."),
    ({"groupBy": "$x", "boundaries": [5, 1]}, 40194,
     "The 'boundaries' option to $bucket must be sorted, but elements 0 and 1 are not in "
     "ascending order (5 is not less than 1)."),
    ({"groupBy": "$x", "boundaries": [1, 1]}, 40194, None),
    ({"groupBy": "$x", "boundaries": [0, 1], "default": "$y"}, 40195,
     "The $bucket 'default' field must be a constant expression, but found: \"$y\"."),
    ({"groupBy": "$x", "boundaries": [0, 1], "output": 1}, 40196,
     "The $bucket 'output' field must be an object, but found type: int."),
    ({"groupBy": "$x", "boundaries": [0, 1], "foo": 1}, 40197,
     "Unrecognized option to $bucket: foo."),
    ({"groupBy": "$x"}, 40198, "$bucket requires 'groupBy' and 'boundaries' to be specified."),
    ({"boundaries": [0, 1]}, 40198, None),
    ({"groupBy": "$x", "boundaries": [0, 10], "default": 5}, 40199,
     "The $bucket 'default' field must be less than the lowest boundary or greater than or "
     "equal to the highest boundary."),
    ({"groupBy": "$x", "boundaries": [0, 10], "output": {"a": {"$foo": 1}}}, 15952, None),
])
def test_bucket_errors(artists, spec, code, msg):
    fail(artists, [{"$bucket": spec}], code, msg)


def test_bucket_default_at_upper_boundary_is_valid(artists):
    rows = list(artists.aggregate([{"$bucket": {"groupBy": "$year_born",
                                                "boundaries": [1800, 1860], "default": 1860}}]))
    check(rows, [{"_id": 1800, "count": 3}, {"_id": 1860, "count": 5}])


# ------------------------------------------------------------ $bucketAuto


@pytest.fixture(scope="module")
def prices(db):
    c = db.prices
    c.insert_many([{"_id": i, "p": p} for i, p in
                   enumerate([1, 2, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144])])
    return c


def bauto(coll, spec):
    return list(coll.aggregate([{"$bucketAuto": spec}]))


def test_bucket_auto_even_buckets(prices):
    check(bauto(prices, {"groupBy": "$p", "buckets": 4}),
          [{"_id": {"min": 1, "max": 3}, "count": 3}, {"_id": {"min": 3, "max": 13}, "count": 3},
           {"_id": {"min": 13, "max": 55}, "count": 3},
           {"_id": {"min": 55, "max": 144}, "count": 3}])


def test_bucket_auto_equal_values_stay_together(prices):
    check(bauto(prices, {"groupBy": "$p", "buckets": 6, "output": {"ids": {"$push": "$_id"}}}),
          [{"_id": {"min": 1, "max": 3}, "ids": [0, 1, 2]},
           {"_id": {"min": 3, "max": 8}, "ids": [3, 4]},
           {"_id": {"min": 8, "max": 21}, "ids": [5, 6]},
           {"_id": {"min": 21, "max": 55}, "ids": [7, 8]},
           {"_id": {"min": 55, "max": 144}, "ids": [9, 10]},
           {"_id": {"min": 144, "max": 144}, "ids": [11]}])


def test_bucket_auto_more_buckets_than_documents(db):
    c = db.few
    c.insert_many([{"_id": 1, "v": 3}, {"_id": 2, "v": 1}, {"_id": 3, "v": 2}])
    check(bauto(c, {"groupBy": "$v", "buckets": 10, "output": {"n": {"$sum": 1},
                                                               "m": {"$max": "$_id"}}}),
          [{"_id": {"min": 1, "max": 2}, "n": 1, "m": 2},
           {"_id": {"min": 2, "max": 3}, "n": 1, "m": 3},
           {"_id": {"min": 3, "max": 3}, "n": 1, "m": 1}])


def test_bucket_auto_missing_is_null(db):
    c = db.nullish
    c.insert_many([{"_id": 1}, {"_id": 2, "v": None}, {"_id": 3, "v": 5}])
    check(bauto(c, {"groupBy": "$v", "buckets": 2}),
          [{"_id": {"min": None, "max": 5}, "count": 2}, {"_id": {"min": 5, "max": 5}, "count": 1}])


def test_bucket_auto_empty_input(db):
    assert bauto(db.nothing_here, {"groupBy": "$v", "buckets": 3}) == []


@pytest.mark.parametrize("gran,want", [
    ("R5", [(0.63, 2.5), (2.5, 10.0), (10.0, 40.0), (40.0, 160.0)]),
    ("1-2-5", [(0.5, 5.0), (5.0, 20.0), (20.0, 100.0), (100.0, 200.0)]),
    ("E6", [(0.68, 2.2), (2.2, 10.0), (10.0, 47.0), (47.0, 150.0)]),
    ("POWERSOF2", [(0.5, 4), (4, 16), (16, 64), (64, 256)]),
])
def test_bucket_auto_granularity(prices, gran, want):
    rows = bauto(prices, {"groupBy": "$p", "buckets": 4, "granularity": gran})
    got = [(r["_id"]["min"], r["_id"]["max"]) for r in rows]
    flat = [x for pair in got for x in pair]
    assert flat == pytest.approx([x for pair in want for x in pair], rel=1e-12)
    assert [type(x) for pair in got for x in pair] == [type(x) for pair in want for x in pair]
    assert sum(r["count"] for r in rows) == 12


def test_bucket_auto_granularity_zero(db):
    c = db.zeros
    c.insert_many([{"_id": 1, "v": 0}, {"_id": 2, "v": 0}, {"_id": 3, "v": 7}, {"_id": 4, "v": 9}])
    check(bauto(c, {"groupBy": "$v", "buckets": 2, "granularity": "R10"}),
          [{"_id": {"min": 0, "max": 6.3}, "count": 2}, {"_id": {"min": 6.3, "max": 10.0},
                                                         "count": 2}])


def test_bucket_auto_granularity_value_errors(db):
    c = db.granbad
    c.insert_many([{"_id": 1, "v": -1}, {"_id": 2, "v": "s"}])
    fail(c, [{"$match": {"_id": 1}}, {"$bucketAuto": {"groupBy": "$v", "buckets": 1,
                                                      "granularity": "R5"}}], 40260,
         "$bucketAuto can specify a 'granularity' with non-negative numbers only, but found a "
         "negative number")
    fail(c, [{"$match": {"_id": 2}}, {"$bucketAuto": {"groupBy": "$v", "buckets": 1,
                                                      "granularity": "R5"}}], 40258,
         "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a value "
         "with type: string")


@pytest.mark.parametrize("spec,code,msg", [
    (1, 40240, "The argument to $bucketAuto must be an object, but found type: int"),
    ({"groupBy": "p", "buckets": 1}, 40239,
     "The $bucketAuto 'groupBy' field must be defined as a $-prefixed path or an expression "
     "object, but found: \"p\""),
    ({"groupBy": "$", "buckets": 1}, 40239, None),
    ({"groupBy": "$p", "buckets": "1"}, 40241,
     "The $bucketAuto 'buckets' field must be a numeric value, but found type: string"),
    ({"groupBy": "$p", "buckets": 2.5}, 40242,
     "The $bucketAuto 'buckets' field must be representable as a 32-bit integer, but found 2.5"),
    ({"groupBy": "$p", "buckets": 0}, 40243,
     "The $bucketAuto 'buckets' field must be greater than 0, but found: 0"),
    ({"groupBy": "$p", "buckets": 1, "output": 1}, 40244,
     "The $bucketAuto 'output' field must be an object, but found type: int"),
    ({"groupBy": "$p", "buckets": 1, "foo": 1}, 40245, "Unrecognized option to $bucketAuto: foo"),
    ({"groupBy": "$p"}, 40246, "$bucketAuto requires 'groupBy' and 'buckets' to be specified"),
    ({"buckets": 1}, 40246, None),
    ({"groupBy": "$p", "buckets": 1, "granularity": "R7"}, 40257,
     "Unknown rounding granularity 'R7'"),
    ({"groupBy": "$p", "buckets": 1, "granularity": 5}, 40261,
     "The $bucketAuto 'granularity' field must be a string, but found type: int"),
    ({"groupBy": "$p", "buckets": 1, "output": {"a": 1}}, 40234, None),
])
def test_bucket_auto_errors(prices, spec, code, msg):
    fail(prices, [{"$bucketAuto": spec}], code, msg)


# ---------------------------------------------------------------- $redact


@pytest.fixture(scope="module")
def forecasts(db):
    c = db.forecasts
    c.insert_one({
        "_id": 1, "title": "123 Department Report", "tags": ["G", "STLW"], "year": 2014,
        "subsections": [
            {"subtitle": "Section 1: Overview", "tags": ["SI", "G"],
             "content": "Section 1: This is the content of section 1."},
            {"subtitle": "Section 2: Analysis", "tags": ["STLW"],
             "content": "Section 2: This is the content of section 2."},
            {"subtitle": "Section 3: Budgeting", "tags": ["TK"],
             "content": {"text": "Section 3: This is the content of section 3.", "tags": ["HCS"]}},
        ]})
    return c


def test_doc_redact_descend_prune(forecasts):
    access = ["STLW", "G"]
    rows = list(forecasts.aggregate([
        {"$match": {"year": 2014}},
        {"$redact": {"$cond": {
            "if": {"$gt": [{"$size": {"$setIntersection": ["$tags", access]}}, 0]},
            "then": "$$DESCEND", "else": "$$PRUNE"}}}]))
    check(rows, [{
        "_id": 1, "title": "123 Department Report", "tags": ["G", "STLW"], "year": 2014,
        "subsections": [
            {"subtitle": "Section 1: Overview", "tags": ["SI", "G"],
             "content": "Section 1: This is the content of section 1."},
            {"subtitle": "Section 2: Analysis", "tags": ["STLW"],
             "content": "Section 2: This is the content of section 2."}]}])


def test_doc_redact_keep_level(db):
    c = db.accounts
    c.insert_one({"_id": 1, "level": 1, "acct_id": "xyz123",
                  "cc": {"level": 5, "type": "yy", "num": 0,
                         "billing_addr": {"level": 5, "addr1": "123 ABC Street"},
                         "shipping_addr": [{"level": 3, "addr1": "987 XYZ Ave"},
                                           {"level": 3, "addr1": "PO Box 0123"}]},
                  "status": "A"})
    rows = list(c.aggregate([{"$redact": {"$cond": {"if": {"$eq": ["$level", 5]},
                                                    "then": "$$PRUNE", "else": "$$DESCEND"}}}]))
    check(rows, [{"_id": 1, "level": 1, "acct_id": "xyz123", "status": "A"}])
    rows = list(c.aggregate([{"$redact": {"$cond": [{"$eq": ["$level", 3]}, "$$PRUNE",
                                                    "$$DESCEND"]}}]))
    check(rows[0]["cc"]["shipping_addr"], [])
    rows = list(c.aggregate([{"$redact": "$$KEEP"}]))
    assert rows[0]["cc"]["billing_addr"] == {"level": 5, "addr1": "123 ABC Street"}
    assert list(c.aggregate([{"$redact": "$$PRUNE"}])) == []


def test_redact_nested_arrays_and_scalars(db):
    c = db.redarr
    c.insert_one({"_id": 1, "a": [[{"x": 1}, {"x": 2, "drop": True}], 5, {"drop": True}],
                  "b": {"drop": True}, "c": "keep me"})
    rows = list(c.aggregate([{"$redact": {"$cond": [{"$eq": ["$drop", True]}, "$$PRUNE",
                                                    "$$DESCEND"]}}]))
    check(rows, [{"_id": 1, "a": [[{"x": 1}], 5], "c": "keep me"}])


def test_redact_bad_result_and_scoped_variables(forecasts):
    fail(forecasts, [{"$redact": "nope"}], 17053,
         "$redact's expression should not return anything aside from the variables $$KEEP, "
         "$$DESCEND, and $$PRUNE, but returned \"nope\"")
    fail(forecasts, [{"$redact": 1}], 17053, "but returned 1")
    # the strings themselves work: mongod compares the values
    assert len(list(forecasts.aggregate([{"$redact": "keep"}]))) == 1
    # $$KEEP and friends exist only inside $redact
    fail(forecasts, [{"$project": {"a": "$$KEEP"}}], 17276, "Use of undefined variable: KEEP")
    fail(forecasts, [{"$redact": "$$NOPE"}], 17276, "Use of undefined variable: NOPE")


def test_redact_sees_let_variables(forecasts):
    rows = list(forecasts.aggregate([{"$redact": {"$cond": [{"$eq": ["$year", "$$y"]},
                                                            "$$KEEP", "$$PRUNE"]}}],
                                    let={"y": 2014}))
    assert [r["_id"] for r in rows] == [1]


def test_redact_root_stays_the_input_document(db):
    """$$ROOT is the whole document at every level; "$level" ($$CURRENT)
    the sub-document being judged."""
    c = db.redroot
    c.insert_one({"_id": 1, "level": 2, "tag": "a",
                  "sub": {"level": 3, "x": 1, "deep": {"level": 1, "y": 2}},
                  "arr": [{"level": 5}, {"level": 1, "z": 3}]})
    rows = list(c.aggregate([{"$redact": {"$cond": [
        {"$lte": ["$level", "$$ROOT.level"]}, "$$DESCEND", "$$PRUNE"]}}]))
    check(rows, [{"_id": 1, "level": 2, "tag": "a", "arr": [{"level": 1, "z": 3}]}])
    rows = list(c.aggregate([{"$redact": {"$cond": [
        {"$eq": ["$$ROOT.tag", "a"]}, "$$DESCEND", "$$PRUNE"]}}]))
    check(rows, [{"_id": 1, "level": 2, "tag": "a",
                  "sub": {"level": 3, "x": 1, "deep": {"level": 1, "y": 2}},
                  "arr": [{"level": 5}, {"level": 1, "z": 3}]}])
    rows = list(c.aggregate([{"$redact": {"$cond": [
        {"$eq": ["$$CURRENT.tag", "a"]}, "$$DESCEND", "$$PRUNE"]}}]))
    check(rows, [{"_id": 1, "level": 2, "tag": "a", "arr": []}])


@pytest.fixture(scope="module")
def decvals(db):
    c = db.decvals
    c.insert_many([{"_id": i, "v": Dec(s)} for i, s in
                   enumerate(["0.8", "1.3", "13", "27", "45.5", "100"])])
    return c


def bounds(coll, granularity):
    return [(b["_id"]["min"], b["_id"]["max"], b["count"]) for b in coll.aggregate([
        {"$bucketAuto": {"groupBy": "$v", "buckets": 3, "granularity": granularity}}])]


def test_bucket_auto_granularity_decimal(decvals):
    # mongod's rounders keep decimals decimal: the series as Decimal128(double)
    # (15 significant digits) scaled by decimal powers of ten
    check(bounds(decvals, "E6"), [
        (Dec("0.680000000000000"), Dec("1.50000000000000"), 2),
        (Dec("1.50000000000000"), Dec("33.0000000000000"), 2),
        (Dec("33.0000000000000"), Dec("150.0000000000000"), 2)])
    check(bounds(decvals, "R5"), [
        (Dec("0.630000000000000"), Dec("1.60000000000000"), 2),
        (Dec("1.60000000000000"), Dec("40.0000000000000"), 2),
        (Dec("40.0000000000000"), Dec("160.0000000000000"), 2)])
    # POWERSOF2: $pow(2, <decimal exponent>), 34 digits
    check(bounds(decvals, "POWERSOF2"), [
        (Dec("0.5000000000000000000000000000000000"), Dec("2.000000000000000000000000000000000"), 2),
        (Dec("2.000000000000000000000000000000000"), Dec("32.00000000000000000000000000000000"), 2),
        (Dec("32.00000000000000000000000000000000"), Dec("128.0000000000000000000000000000000"), 2)])


def test_bucket_auto_granularity_decimal_errors(db):
    c = db.decbad
    c.insert_many([{"_id": 1, "v": Dec("-1")}, {"_id": 2, "v": Dec("NaN")},
                   {"_id": 3, "v": Dec("Infinity")}])

    def auto(i, g):
        return [{"$match": {"_id": i}},
                {"$bucketAuto": {"groupBy": "$v", "buckets": 1, "granularity": g}}]

    fail(c, auto(1, "E6"), 40260,
         "$bucketAuto can specify a 'granularity' with non-negative numbers only")
    fail(c, auto(2, "POWERSOF2"), 40259,
         "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a NaN")
    # mongod 7.0 never returns here; later versions answer 11785400
    fail(c, auto(3, "E6"), 11785400, "A granularity rounder can only round finite numbers")
    fail(c, auto(3, "POWERSOF2"), 11785400)
