"""The query filter matcher (csrc/query/match.c) against mongod 7.0's semantics.

Two layers:

- targeted tables of (filter, doc, expected) -- expected is True/False, or the
  error code mongod gives for an invalid filter.  Each case is checked against
  BOTH the reference evaluator (tests/match_reference.py) and the server's
  ``_core._match``, so the tables also validate the reference;
- a randomized differential test: ~5,000 (filter, doc) pairs from a small
  vocabulary, server vs reference.

Set MATCH_REFERENCE_ONLY=1 to run only the reference side (e.g. before the C
matcher is built).
"""
import datetime
import math
import os
import random

import bson
import pytest
from bson import Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.binary import Binary
from bson.codec_options import CodecOptions

import multifora
from multifora import _core

from match_reference import FilterError, Unsupported, matches

REFERENCE_ONLY = os.environ.get("MATCH_REFERENCE_ONLY") == "1"

if not REFERENCE_ONLY and not hasattr(_core, "_match"):
    pytest.skip("multifora._core has no _match (the C matcher is not built yet); "
                "MATCH_REFERENCE_ONLY=1 runs the reference side alone",
                allow_module_level=True)

OPTS = CodecOptions(document_class=dict)
NAN = float("nan")
INF = float("inf")


def rt(x):
    """`x` as the server sees it: through BSON and back."""
    return bson.decode(bson.encode(x), OPTS)


def ref(f, d):
    """The reference's answer: a bool, or the error code."""
    try:
        return matches(rt(f), rt(d))
    except FilterError as exc:
        return exc.code


def server(f, d, raw_doc=None):
    """The server's answer: a bool, or the error code."""
    try:
        return _core._match(bson.encode(f), raw_doc if raw_doc is not None else bson.encode(d))
    except multifora.MultiforaError as exc:
        return exc.code


def check(f, d, expected):
    got_ref = ref(f, d)
    assert got_ref == expected, f"reference: {f!r} on {d!r} gave {got_ref!r}, expected {expected!r}"
    if not REFERENCE_ONLY:
        got = server(f, d)
        assert got == expected, f"server: {f!r} on {d!r} gave {got!r}, expected {expected!r}"


def cases(*rows):
    return pytest.mark.parametrize("f,d,expected", rows, ids=[f"{i}" for i in range(len(rows))])


T, F = True, False
BAD = 2  # BadValue
FTP = 9  # FailedToParse
TM = 14  # TypeMismatch

# ---------------------------------------------------------------------------
# null, missing, $exists
# ---------------------------------------------------------------------------


@cases(
    ({"a": 1}, {"a": 1}, T),
    ({"a": 1}, {"a": 2}, F),
    ({"a": 1}, {}, F),
    ({"a": None}, {}, T),
    ({"a": None}, {"a": None}, T),
    ({"a": None}, {"a": 0}, F),
    ({"a": None}, {"a": False}, F),
    ({"a": None}, {"a": []}, F),
    ({"a": None}, {"a": [None]}, T),
    ({"a": None}, {"a": [1, None]}, T),
    ({"a": None}, {"a": [[None]]}, F),
    ({"a": {"$eq": None}}, {"b": 1}, T),
    # "a.b": null -- null_query_semantics.js (7.0/8.0 semantics)
    ({"a.b": None}, {"a": 4}, T),
    ({"a.b": None}, {"a": None}, T),
    ({"a.b": None}, {"a": {}}, T),
    ({"a.b": None}, {"a": {"b": None}}, T),
    ({"a.b": None}, {"a": {"b": "hi"}}, F),
    ({"a.b": None}, {"a": [1, 2]}, F),
    ({"a.b": None}, {"a": []}, F),
    ({"a.b": None}, {"a": [[]]}, F),
    ({"a.b": None}, {"a": [None, None]}, F),
    ({"a.b": None}, {"a": [{"b": 3}, {}]}, T),
    ({"a.b": None}, {"a": [{"b": None}, {"b": 3}]}, T),
    ({"a.b": None}, {"a": [{"b": 1}, {"b": 3}]}, F),
    ({"a.b": {"$ne": None}}, {"a": [1, 2]}, T),
    ({"a.b": {"$ne": None}}, {"a": [{"b": 1}, {}]}, F),
    ({"a": {"$ne": None}}, {}, F),
    ({"a": {"$ne": None}}, {"a": [1, None]}, F),
    ({"a": {"$ne": None}}, {"a": [1]}, T),
    ({"a": {"$ne": None}}, {"a": []}, T),
    ({"a": {"$exists": True}}, {"a": None}, T),
    ({"a": {"$exists": True}}, {"a": []}, T),
    ({"a": {"$exists": False}}, {"a": None}, F),
    ({"a": {"$exists": False}}, {}, T),
    ({"a": {"$exists": 0}}, {}, T),
    ({"a": {"$exists": 1}}, {}, F),
    ({"a": {"$exists": "no"}}, {"a": 1}, T),  # trueValue of a string is true
    ({"a": {"$exists": None}}, {}, T),
    ({"a.b": {"$exists": False}}, {"a": [1]}, T),
    ({"a.b": {"$exists": True}}, {"a": [{"b": None}]}, T),
    ({"a.b": {"$exists": True}}, {"a": [{"c": 1}]}, F),
    ({"a.b": {"$exists": False}}, {"a": [{"b": True}, {}]}, F),  # one element has it
    ({"a.0": {"$exists": False}}, {"a": []}, T),  # the "empty array" idiom
    ({"b.c.d": {"$in": [{}, None]}}, {"b": []}, F),
    ({"b.c.d": {"$gte": None}}, {"c": True}, T),
    ({"a": {"$gte": None}}, {}, T),
    ({"a": {"$lte": None}}, {}, T),
    ({"a": {"$gt": None}}, {}, F),
    ({"a": {"$lt": None}}, {"a": None}, F),
    ({"a": {"$gte": None}}, {"a": 1}, F),
    ({"a": {"$in": [None, 5]}}, {}, T),
    ({"a": {"$in": [None, 5]}}, {"a": 5}, T),
    ({"a": {"$in": [None]}}, {"a": [1]}, F),
    ({"a": {"$nin": [None]}}, {}, F),
    ({"a": {"$nin": [None, []]}}, {"a": []}, F),
    ({"a": {"$nin": [None, []]}}, {"a": [[]]}, F),
    ({"a": {"$nin": [None, 75]}}, {"a": [[]]}, T),
    ({"a": {"$all": [None]}}, {}, T),
)
def test_null_missing_exists(f, d, expected):
    check(f, d, expected)


# ---------------------------------------------------------------------------
# numbers: exact value across types, -0, NaN
# ---------------------------------------------------------------------------


@cases(
    ({"a": 1}, {"a": 1.0}, T),
    ({"a": 1}, {"a": Int64(1)}, T),
    ({"a": Decimal128("1.0")}, {"a": 1}, T),
    ({"a": 1.0}, {"a": Decimal128("1.00")}, T),
    ({"a": Int64(1)}, {"a": Decimal128("1")}, T),
    ({"a": -0.0}, {"a": 0}, T),
    ({"a": Decimal128("-0")}, {"a": 0.0}, T),
    ({"a": 0}, {"a": Decimal128("0E+10")}, T),
    ({"a": 0.1}, {"a": Decimal128("0.1")}, F),  # the double 0.1 is not 1/10
    ({"a": Decimal128("0.5")}, {"a": 0.5}, T),
    ({"a": Int64(2**53 + 1)}, {"a": float(2**53)}, F),
    ({"a": Int64(2**53)}, {"a": float(2**53)}, T),
    ({"a": Int64(2**63 - 1)}, {"a": 2.0**63}, F),
    ({"a": {"$lt": 2.0**63}}, {"a": Int64(2**63 - 1)}, T),
    ({"a": {"$gt": 1}}, {"a": Decimal128("1.000000000000000000000000000000001")}, T),
    ({"a": {"$lt": 2}}, {"a": 1.5}, T),
    ({"a": {"$gte": 1}}, {"a": Decimal128("1")}, T),
    ({"a": {"$gt": -INF}}, {"a": -1e308}, T),
    ({"a": INF}, {"a": Decimal128("Infinity")}, T),
    ({"a": {"$lt": Decimal128("-Infinity")}}, {"a": -INF}, F),
    ({"a": NAN}, {"a": NAN}, T),
    ({"a": NAN}, {"a": Decimal128("NaN")}, T),
    ({"a": NAN}, {"a": 1}, F),
    ({"a": {"$eq": NAN}}, {"a": [1, NAN]}, T),
    ({"a": {"$gt": NAN}}, {"a": 1}, F),
    ({"a": {"$lt": NAN}}, {"a": 1}, F),
    ({"a": {"$lt": 1}}, {"a": NAN}, F),  # NaN sorts low, but $lt never matches it
    ({"a": {"$gte": -INF}}, {"a": NAN}, F),
    ({"a": {"$gte": NAN}}, {"a": NAN}, T),
    ({"a": {"$lte": NAN}}, {"a": Decimal128("NaN")}, T),
    ({"a": {"$gt": NAN}}, {"a": NAN}, F),
    ({"a": {"$gt": Decimal128("NaN")}}, {"a": 1.0}, F),
    ({"a": {"$gte": Decimal128("NaN")}}, {"a": 1}, F),
    ({"a": {"$lte": 5}}, {"a": Decimal128("NaN")}, F),
    ({"a": {"$lt": NAN}}, {"a": NAN}, F),
    ({"a": {"$in": [NAN]}}, {"a": NAN}, T),
    ({"a": {"$in": [1, 2]}}, {"a": NAN}, F),
    ({"a": {"$ne": NAN}}, {"a": NAN}, F),
    ({"a": {"$ne": NAN}}, {"a": 1}, T),
    ({"a": {"$nin": [NAN]}}, {"a": [1, NAN]}, F),
    ({"a": {"b": 1}}, {"a": {"b": 1.0}}, T),
    ({"a": [1, 2]}, {"a": [1.0, Int64(2)]}, T),
)
def test_numbers(f, d, expected):
    check(f, d, expected)


# Integers against integers and doubles against doubles take a shortcut in
# compare_ok (match.c); the boundaries of every operator, both widths, and
# several conditions on one field (looked up once, flat_conds).
@pytest.mark.parametrize("f,d,expected", [
    ({"a": {"$gte": 1}}, {"a": 1}, T),
    ({"a": {"$gt": 1}}, {"a": 1}, F),
    ({"a": {"$lte": 1}}, {"a": 1}, T),
    ({"a": {"$lt": 1}}, {"a": 1}, F),
    ({"a": {"$gte": Int64(5)}}, {"a": 5}, T),
    ({"a": {"$gt": 5}}, {"a": Int64(6)}, T),
    ({"a": {"$lt": Int64(-(2**63))}}, {"a": Int64(-(2**63))}, F),
    ({"a": {"$lte": Int64(-(2**63))}}, {"a": Int64(-(2**63))}, T),
    ({"a": {"$gt": Int64(2**63 - 2)}}, {"a": Int64(2**63 - 1)}, T),
    ({"a": {"$lt": -1}}, {"a": Int64(-2)}, T),
    ({"a": {"$gte": 2**31 - 1}}, {"a": Int64(2**31)}, T),
    ({"a": {"$gte": 0.5}}, {"a": 0.5}, T),
    ({"a": {"$gt": 0.5}}, {"a": 0.5}, F),
    ({"a": {"$lte": -0.0}}, {"a": 0.0}, T),
    ({"a": {"$lt": 0.0}}, {"a": -0.0}, F),
    ({"a": {"$gt": -INF}}, {"a": -1e308}, T),
    ({"a": {"$lt": INF}}, {"a": INF}, F),
    ({"a": {"$lte": INF}}, {"a": INF}, T),
    ({"a": {"$gte": NAN}}, {"a": 1.0}, F),
    ({"a": {"$lte": 1.0}}, {"a": NAN}, F),
    ({"a": {"$gte": 1, "$lt": 3}}, {"a": 1}, T),
    ({"a": {"$gte": 1, "$lt": 3}}, {"a": 3}, F),
    ({"a": {"$gt": 1, "$lte": 3}}, {"a": 3}, T),
    ({"a": {"$gte": 1, "$lt": 3}}, {"a": [0, 5]}, T),  # each condition by some element
    ({"a": {"$gte": 1, "$lt": 3}}, {"b": 2}, F),
    ({"a": {"$gte": 1, "$exists": True}}, {"a": 2}, T),
    ({"a": {"$gte": 1, "$exists": False}}, {"a": 2}, F),
    ({"a": {"$gte": 1, "$ne": 2}}, {"a": 2}, F),
    ({"a": {"$gte": 1, "$nin": [3]}}, {"a": 2}, T),
    ({"a": {"$gte": 1, "$not": {"$gt": 5}}}, {"a": 6}, F),
    ({"a": {"$lt": 3, "$gte": 1}}, {"a": 2}, T),
])
def test_numbers_shortcut(f, d, expected):
    check(f, d, expected)


def test_numbers_shortcut_random():
    """Ranges of integers and doubles (several conditions on one field, the
    field first, last or repeated) against the reference."""
    if REFERENCE_ONLY:
        pytest.skip("server-only")
    rng = random.Random(99)
    pool = [0, 1, -1, 2, 3, 2**31 - 1, -(2**31), Int64(2**31), Int64(2**63 - 1),
            Int64(-(2**63)), Int64(1), Int64(3), 0.0, -0.0, 0.5, 1.0, 2.5, 3.0, -1e300, INF,
            -INF, NAN, Decimal128("2"), "2", None]
    ops = ["$gt", "$gte", "$lt", "$lte", "$eq", "$ne"]
    bad = []
    for i in range(3000):
        f = {"a": {rng.choice(ops): rng.choice(pool) for _ in range(rng.randrange(1, 4))}}
        v = rng.choice(pool) if rng.random() < 0.8 else [rng.choice(pool) for _ in range(3)]
        shape = rng.randrange(3)
        d = ({"a": v, "b": 1} if shape == 0 else {"x": 0, "a": v} if shape == 1
             else {"b": 1})
        want = matches(rt(f), rt(d))
        got = _core._match(bson.encode(f), bson.encode(d))
        if got != want:
            bad.append((f, d, got, want))
    assert not bad, bad[:5]


# ---------------------------------------------------------------------------
# type bracketing, MinKey/MaxKey, the order between types
# ---------------------------------------------------------------------------

DATE = datetime.datetime(2020, 1, 2, 3, 4, 5)
OID = ObjectId("5f0000000000000000000001")


@cases(
    ({"a": {"$gt": 1}}, {"a": "x"}, F),
    ({"a": {"$lt": "x"}}, {"a": 1}, F),
    ({"a": {"$gt": 1}}, {"a": True}, F),
    ({"a": {"$lt": 1}}, {"a": None}, F),
    ({"a": {"$gte": False}}, {"a": True}, T),
    ({"a": {"$lt": True}}, {"a": False}, T),
    ({"a": 1}, {"a": True}, F),
    ({"a": 0}, {"a": False}, F),
    ({"a": True}, {"a": 1}, F),
    ({"a": {"$gt": ""}}, {"a": "a"}, T),
    ({"a": {"$lt": "b"}}, {"a": "B"}, T),  # byte order: "B" < "b"
    ({"a": {"$gt": "a"}}, {"a": "ab"}, T),
    ({"a": {"$lt": "é"}}, {"a": "z"}, T),  # UTF-8 bytes
    ({"a": {"$lt": {}}}, {"a": {"b": 1}}, F),
    ({"a": {"$gt": {}}}, {"a": {"b": 1}}, T),
    ({"a": {"$gt": {"b": 1}}}, {"a": {"b": 2}}, T),
    ({"a": {"$gt": {"b": 1}}}, {"a": {"c": 0}}, T),  # field names before values
    ({"a": {"$gt": {"b": 1}}}, {"a": {"b": "x"}}, T),  # type before field names
    ({"a": {"$lt": {"b": 1}}}, {"a": {"b": 1, "c": 1}}, F),
    ({"a": {"$gt": []}}, {"a": [1]}, T),
    ({"a": {"$gt": [1]}}, {"a": 2}, F),
    ({"a": {"$lt": [2]}}, {"a": [[1]]}, T),  # yields [1] from the array
    ({"a": {"$gt": 5}}, {"a": DATE}, F),
    ({"a": {"$gt": datetime.datetime(2019, 1, 1)}}, {"a": DATE}, T),
    ({"a": {"$gt": OID}}, {"a": ObjectId("5f0000000000000000000002")}, T),
    ({"a": {"$gt": Timestamp(1, 1)}}, {"a": Timestamp(1, 2)}, T),
    ({"a": {"$gt": Timestamp(1, 1)}}, {"a": DATE}, F),
    ({"a": {"$lt": MaxKey()}}, {"a": "x"}, T),
    ({"a": {"$lte": MaxKey()}}, {"a": MaxKey()}, T),
    ({"a": {"$lt": MaxKey()}}, {"a": MaxKey()}, F),
    ({"a": {"$lt": MaxKey()}}, {}, T),  # missing is below MaxKey (expression_leaf.cpp)
    ({"a": {"$gt": MinKey()}}, {"a": None}, T),
    ({"a": {"$gte": MinKey()}}, {}, T),
    ({"a": {"$gt": MaxKey()}}, {"a": 1}, F),
    ({"a": MinKey()}, {"a": None}, F),
    ({"a": MinKey()}, {"a": MinKey()}, T),
    ({"a": {"$gt": b"\x01"}}, {"a": b"\x00\x00"}, T),  # BinData: length first
    ({"a": Binary(b"\x01", 0)}, {"a": Binary(b"\x01", 5)}, F),
    ({"a": {"$gt": 5, "$lt": 8}}, {"a": [1, 10]}, T),
    ({"a": {"$gt": 5}}, {"a": [1, 10]}, T),
    ({"a": {"$lt": 0}}, {"a": [1, 10]}, F),
)
def test_type_bracketing(f, d, expected):
    check(f, d, expected)


# ---------------------------------------------------------------------------
# arrays and dotted paths
# ---------------------------------------------------------------------------


@cases(
    ({"a": 2}, {"a": [1, 2, 3]}, T),
    ({"a": [1, 2]}, {"a": [1, 2]}, T),
    ({"a": [1, 2]}, {"a": [2, 1]}, F),
    ({"a": [1, 2]}, {"a": [[1, 2], 3]}, T),
    ({"a": [1, 2]}, {"a": [1, 2, 3]}, F),
    ({"a": 1}, {"a": [[1]]}, F),  # no traversal of nested arrays
    ({"a": [1]}, {"a": [[1]]}, T),
    ({"a": []}, {"a": []}, T),
    ({"a": []}, {"a": [[]]}, T),
    ({"a": []}, {"a": [1]}, F),
    ({"a.b": 1}, {"a": {"b": 1}}, T),
    ({"a.b": 1}, {"a": [{"b": 1}]}, T),
    ({"a.b": 1}, {"a": [{"b": [1]}]}, T),
    ({"a.b": 1}, {"a": [[{"b": 1}]]}, F),
    ({"a.b": 1}, {"a": [{"b": 2}, {"b": 1}]}, T),
    ({"a.b": 1}, {"a": {"b": [[1]]}}, F),
    ({"a.b": [1]}, {"a": [{"b": [1]}]}, T),
    ({"a.b": [1, 2]}, {"a": [{"b": 1}, {"b": 2}]}, F),
    ({"a.b.c": 1}, {"a": [{"b": [{"c": 1}]}]}, T),
    ({"a.b.c": 1}, {"a": {"b": [{"c": [0, 1]}]}}, T),
    ({"a.b": 1}, {"a": 1}, F),
    ({"a.b": {"c": 1}}, {"a": [{"b": {"c": 1}}]}, T),
    # numeric components: an index into arrays, and a field name in documents
    ({"a.0": 1}, {"a": [1, 2]}, T),
    ({"a.1": 1}, {"a": [1, 2]}, F),
    ({"a.1": 2}, {"a": [1, 2]}, T),
    ({"a.0": 1}, {"a": {"0": 1}}, T),
    ({"a.0": 5}, {"a": [{"0": 5}]}, T),
    ({"a.0": {"0": 5}}, {"a": [{"0": 5}]}, T),
    ({"a.1": 5}, {"a": [{"1": 5}, 7]}, T),
    ({"a.1": 7}, {"a": [{"1": 5}, 7]}, T),
    ({"a.0": 1}, {"a": [[1, 2]]}, F),  # yields [1, 2] itself, not its elements
    ({"a.0": [1, 2]}, {"a": [[1, 2]]}, T),
    ({"a.0.b": 1}, {"a": [{"b": 1}]}, T),
    ({"a.0.b": 1}, {"a": [{"b": 2}, {"b": 1}]}, F),
    ({"a.1.b": 1}, {"a": [{"b": 2}, {"b": 1}]}, T),
    ({"a.0": None}, {"a": [{"x": 1}]}, T),  # the document has no field "0"
    ({"a.0": None}, {"a": [1]}, F),
    ({"a.0": None}, {"a": []}, F),
    ({"a.0": {"$exists": True}}, {"a": [{"x": 1}]}, T),
    ({"a.0": {"$exists": False}}, {"a": 5}, T),
    ({"a.5": {"$exists": True}}, {"a": [1, 2]}, F),
    ({"b.c.d": 1}, {"b": [{"c": {"d": 1}}]}, T),
    ({"b.c.d": 1}, {"b": {"c": [{"d": [1]}]}}, T),
    ({"b.c.d": None}, {"b": {"c": 5}}, T),
    # an array value matches the whole array, or any element
    ({"a": {"$in": [[1, 2]]}}, {"a": [1, 2]}, T),
    ({"a": {"$in": [2]}}, {"a": [1, 2]}, T),
)
def test_arrays_and_paths(f, d, expected):
    check(f, d, expected)


# ---------------------------------------------------------------------------
# $ne, $in, $nin
# ---------------------------------------------------------------------------


@cases(
    ({"a": {"$ne": 2}}, {"a": [1, 2]}, F),
    ({"a": {"$ne": 3}}, {"a": [1, 2]}, T),
    ({"a": {"$ne": [1, 2]}}, {"a": [1, 2]}, F),
    ({"a": {"$ne": 1}}, {}, T),
    ({"a": {"$ne": 1}}, {"a": "1"}, T),
    ({"a.b": {"$ne": 1}}, {"a": [{"b": 1}, {"b": 2}]}, F),
    ({"a": {"$in": [1, "x"]}}, {"a": "x"}, T),
    ({"a": {"$in": [1]}}, {"a": 1.0}, T),
    ({"a": {"$in": []}}, {"a": 1}, F),
    ({"a": {"$in": []}}, {}, F),
    ({"a": {"$nin": []}}, {"a": 1}, T),
    ({"a": {"$nin": [1]}}, {}, T),
    ({"a": {"$in": [Regex("^a")]}}, {"a": "abc"}, T),
    ({"a": {"$in": [Regex("^a")]}}, {"a": "bac"}, F),
    ({"a": {"$in": [Regex("^A", "i")]}}, {"a": ["x", "abc"]}, T),
    ({"a": {"$in": [Regex("^a"), 5]}}, {"a": 5}, T),
    ({"a": {"$nin": [Regex("^a"), 5]}}, {"a": "b"}, T),
    ({"a": {"$nin": [2]}}, {"a": [1, 2]}, F),
    ({"a": {"$nin": [3]}}, {"a": [1, 2]}, T),
    ({"a": {"$in": [{"b": 1}]}}, {"a": {"b": 1}}, T),
    ({"a": {"$in": [{"b": 1}]}}, {"a": {"b": 1.0}}, T),
    ({"a": {"$in": [{"b": 1, "c": 2}]}}, {"a": {"c": 2, "b": 1}}, F),
    ({"a": {"$in": [True]}}, {"a": 1}, F),
    ({"a": {"$in": 1}}, {"a": 1}, BAD),
    ({"a": {"$nin": 1}}, {"a": 1}, BAD),
    ({"a": {"$in": [{"$gt": 1}]}}, {"a": 1}, BAD),
    ({"a": {"$nin": [{"$gt": 1}]}}, {"a": 1}, BAD),
    ({"a": {"$ne": Regex("x")}}, {"a": 1}, BAD),
)
def test_ne_in_nin(f, d, expected):
    check(f, d, expected)


# ---------------------------------------------------------------------------
# $elemMatch, and the classic difference from plain dotted conditions
# ---------------------------------------------------------------------------

TWO = {"a": [{"b": 1, "c": 3}, {"b": 4, "c": 2}]}


@cases(
    ({"a.b": 1, "a.c": 2}, TWO, T),
    ({"a": {"$elemMatch": {"b": 1, "c": 2}}}, TWO, F),
    ({"a": {"$elemMatch": {"b": 1, "c": 3}}}, TWO, T),
    ({"a": {"$elemMatch": {"b": {"$gt": 2}, "c": 2}}}, TWO, T),
    ({"a": {"$elemMatch": {"$gt": 5, "$lt": 8}}}, {"a": [1, 10]}, F),
    ({"a": {"$elemMatch": {"$gt": 5, "$lt": 8}}}, {"a": [1, 6]}, T),
    ({"a": {"$elemMatch": {"$gt": 1}}}, {"a": 5}, F),
    ({"a": {"$elemMatch": {"b": 1}}}, {"a": {"b": 1}}, F),
    ({"a": {"$elemMatch": {"$eq": 1}}}, {"a": [[1]]}, F),
    ({"a": {"$elemMatch": {"$eq": [1]}}}, {"a": [[1]]}, T),
    ({"a": {"$elemMatch": {"$eq": None}}}, {"a": [1, None]}, T),
    ({"a": {"$elemMatch": {"$eq": None}}}, {"a": []}, F),
    ({"a": {"$elemMatch": {"$ne": None}}}, {"a": [None, None]}, F),
    ({"a": {"$elemMatch": {"$ne": None}}}, {"a": [[]]}, T),
    ({"a": {"$elemMatch": {"b": None}}}, {"a": [[]]}, T),  # null_query_semantics.js
    ({"a": {"$elemMatch": {"b": None}}}, {"a": [1]}, F),
    ({"a": {"$elemMatch": {"b": {"$ne": None}}}}, {"a": [{"b": 3}, {}]}, T),
    ({"a": {"$elemMatch": {"0": 1}}}, {"a": [[1, 2]]}, T),  # an array element is an object
    ({"a": {"$elemMatch": {"$or": [{"b": 1}, {"c": 1}]}}}, {"a": [{"c": 1}]}, T),
    ({"a": {"$elemMatch": {"$and": [{"b": 1}, {"c": 1}]}}}, {"a": [{"b": 1}, {"c": 1}]}, F),
    ({"a": {"$elemMatch": {}}}, {"a": [1]}, F),
    ({"a": {"$elemMatch": {}}}, {"a": [{}]}, T),
    # $comment is a top-level operator, so $elemMatch takes the object form
    ({"a": {"$elemMatch": {"$comment": "c"}}}, {"a": [1]}, F),
    ({"a": {"$elemMatch": {"$comment": "c"}}}, {"a": [1, {}]}, T),
    ({"a": {"$elemMatch": {"$comment": "c", "b": 1}}}, {"a": [{"b": 1}]}, T),
    ({"a": {"$elemMatch": {"$not": {"$gt": 1}}}}, {"a": [5, 0]}, T),
    ({"a": {"$elemMatch": {"$not": {"$gt": 1}}}}, {"a": [5]}, F),
    ({"a": {"$elemMatch": {"$elemMatch": {"$gt": 1}}}}, {"a": [[0, 2]]}, T),
    ({"a": {"$elemMatch": {"$elemMatch": {"$gt": 1}}}}, {"a": [0, 2]}, F),
    ({"a": {"$elemMatch": {"$size": 2}}}, {"a": [[1, 2]]}, T),
    ({"a": {"$elemMatch": {"$in": [1, 2]}}}, {"a": [3, 2]}, T),
    ({"a": {"$elemMatch": {"$exists": False}}}, {"a": [1]}, F),
    ({"a": {"$elemMatch": {"$exists": True}}}, {"a": [1]}, T),
    ({"a": {"$elemMatch": {"$regex": "^x"}}}, {"a": ["ax", "xa"]}, T),
    ({"a": {"$elemMatch": {"$type": "string"}}}, {"a": [1, "x"]}, T),
    ({"a.b": {"$elemMatch": {"$eq": 1}}}, {"a": [{"b": [1]}]}, T),
    ({"a.b": {"$elemMatch": {"$eq": 1}}}, {"a": [{"b": 1}]}, F),
    ({"a": {"$elemMatch": {"b.c": 1}}}, {"a": [{"b": [{"c": 1}]}]}, T),
    ({"a": {"$elemMatch": 1}}, {"a": [1]}, BAD),
    ({"a": {"$elemMatch": {"$foo": 1}}}, {"a": [1]}, BAD),
    ({"a": {"$elemMatch": {"b": {"$foo": 1}}}}, {"a": [1]}, BAD),
)
def test_elem_match(f, d, expected):
    check(f, d, expected)


# ---------------------------------------------------------------------------
# $all, $size
# ---------------------------------------------------------------------------


@cases(
    ({"a": {"$all": []}}, {"a": []}, F),
    ({"a": {"$all": []}}, {"a": [1]}, F),
    ({"a": {"$all": []}}, {}, F),
    ({"a": {"$all": [1, 2]}}, {"a": [2, 3, 1]}, T),
    ({"a": {"$all": [1, 2]}}, {"a": [1]}, F),
    ({"a": {"$all": [1]}}, {"a": 1}, T),
    ({"a": {"$all": [[1, 2]]}}, {"a": [1, 2]}, T),
    ({"a": {"$all": [[1, 2]]}}, {"a": [[1, 2], 3]}, T),
    ({"a": {"$all": [Regex("^x"), "yy"]}}, {"a": ["xa", "yy"]}, T),
    ({"a": {"$all": [{"b": 1}]}}, {"a": [{"b": 1}]}, T),
    ({"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}},
     {"a": [{"b": 1}, {"c": 2}]}, T),
    ({"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}},
     {"a": [{"b": 1}]}, F),
    ({"a": {"$all": [{"$elemMatch": {"$gt": 1, "$lt": 3}}]}}, {"a": [0, 2]}, T),
    ({"a": {"$all": [{"$elemMatch": {"b": 1}}, 5]}}, {"a": [1]}, BAD),
    ({"a": {"$all": [5, {"$elemMatch": {"b": 1}}]}}, {"a": [5]}, BAD),  # "no $ expressions"
    ({"a": {"$all": [{"$gt": 1}]}}, {"a": [1]}, BAD),
    ({"a": {"$all": 5}}, {"a": [5]}, BAD),
    ({"a": {"$size": 2}}, {"a": [1, 2]}, T),
    ({"a": {"$size": 2}}, {"a": [1]}, F),
    ({"a": {"$size": 1}}, {"a": 2}, F),
    ({"a": {"$size": 0}}, {"a": []}, T),
    ({"a": {"$size": 0}}, {}, F),
    ({"a": {"$size": 1}}, {"a": [[1, 2]]}, T),
    ({"a": {"$size": 2}}, {"a": [[1, 2]]}, F),  # no traversal of the leaf array
    ({"a.b": {"$size": 2}}, {"a": [{"b": [1, 2]}]}, T),
    ({"a.b": {"$size": 1}}, {"a": [{"b": [1, 2]}, {"b": [3]}]}, T),
    ({"a": {"$size": 2.0}}, {"a": [1, 2]}, T),
    ({"a": {"$size": Int64(2)}}, {"a": [1, 2]}, T),
    ({"a": {"$size": -1}}, {"a": [1]}, BAD),
    ({"a": {"$size": 1.5}}, {"a": [1]}, BAD),
    ({"a": {"$size": "2"}}, {"a": [1, 2]}, BAD),
    ({"a": {"$size": None}}, {"a": []}, BAD),
    ({"a": {"$not": {"$size": 2}}}, {"a": 5}, T),
)
def test_all_size(f, d, expected):
    check(f, d, expected)


# ---------------------------------------------------------------------------
# $not, $and, $or, $nor, $comment, unknown operators
# ---------------------------------------------------------------------------


@cases(
    ({"a": {"$not": {"$gt": 5}}}, {"a": 3}, T),
    ({"a": {"$not": {"$gt": 5}}}, {"a": 6}, F),
    ({"a": {"$not": {"$gt": 5}}}, {"a": "x"}, T),
    ({"a": {"$not": {"$gt": 5}}}, {}, T),
    ({"a": {"$not": {"$gt": 5}}}, {"a": [1, 6]}, F),
    ({"a": {"$not": {"$gt": 1, "$lt": 5}}}, {"a": 3}, F),
    ({"a": {"$not": {"$gt": 1, "$lt": 5}}}, {"a": 7}, T),
    ({"a": {"$not": Regex("^x")}}, {"a": "xy"}, F),
    ({"a": {"$not": Regex("^x")}}, {"a": "yx"}, T),
    ({"a": {"$not": {"$regex": "^x"}}}, {"a": "xy"}, F),
    ({"a": {"$not": {"$regex": "^X", "$options": "i"}}}, {"a": "xy"}, F),
    ({"a": {"$not": {"$eq": 1}}}, {"a": [1, 2]}, F),
    ({"a": {"$not": {"$in": [1]}}}, {"a": 2}, T),
    ({"a": {"$not": 5}}, {"a": 1}, BAD),
    ({"a": {"$not": {}}}, {"a": 1}, BAD),
    ({"a": {"$not": {"b": 1}}}, {"a": 1}, BAD),
    ({"$not": {"a": 1}}, {"a": 1}, BAD),
    ({"$and": [{"a": 1}, {"b": 2}]}, {"a": 1, "b": 2}, T),
    ({"$and": [{"a": 1}, {"b": 2}]}, {"a": 1}, F),
    ({"$or": [{"a": 1}, {"b": 2}]}, {"b": 2}, T),
    ({"$or": [{"a": 1}, {"b": 2}]}, {"c": 2}, F),
    ({"$nor": [{"a": 1}]}, {"a": 2}, T),
    ({"$nor": [{"a": 1}, {"b": 1}]}, {"b": 1}, F),
    ({"$and": [{"a": 1}], "b": 2}, {"a": 1, "b": 2}, T),
    ({"$or": [{"$and": [{"a": 1}, {"b": 1}]}, {"c": 1}]}, {"c": 1}, T),
    ({"$or": [{"$and": [{"a": 1}, {"b": 1}]}, {"c": 1}]}, {"a": 1}, F),
    ({"$or": [{}]}, {"a": 1}, T),
    ({}, {"a": 1}, T),
    ({}, {}, T),
    ({"$comment": "x"}, {}, T),
    ({"$comment": "x", "a": 1}, {"a": 2}, F),
    ({"$and": []}, {}, BAD),
    ({"$or": []}, {}, BAD),
    ({"$nor": []}, {}, BAD),
    ({"$and": {}}, {}, BAD),
    ({"$or": [1]}, {}, BAD),
    ({"$and": {"a": 1}}, {}, BAD),
    ({"a": {"$foo": 1}}, {"a": 1}, BAD),
    ({"$foo": 1}, {"a": 1}, BAD),
    ({"a": {"$gt": 1, "b": 2}}, {"a": 2}, BAD),
    ({"a": {"$where": "x"}}, {"a": 1}, BAD),
    ({"a": {"$gt": Regex("x")}}, {"a": 1}, BAD),
    ({"$or": [{"a": {"$bad": 1}}]}, {}, BAD),
)
def test_logical(f, d, expected):
    check(f, d, expected)


# ---------------------------------------------------------------------------
# implicit equality on documents: exact, field order matters
# ---------------------------------------------------------------------------


@cases(
    ({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 2}}, T),
    ({"a": {"b": 1, "c": 2}}, {"a": {"c": 2, "b": 1}}, F),
    ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}, F),
    ({"a": {"b": 1, "c": 2}}, {"a": {"b": 1}}, F),
    ({"a": {}}, {"a": {}}, T),
    ({"a": {}}, {}, F),
    ({"a": {}}, {"a": [{}]}, T),
    ({"a": {"b": 1}}, {"a": [{"b": 1}]}, T),
    ({"a": {"b": {"c": 1}}}, {"a": {"b": {"c": 1}}}, T),
    ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 2]}}, T),
    ({"a": {"b": [1, 2]}}, {"a": {"b": 1}}, F),
    ({"a": {"b": 1, "$x": 2}}, {"a": {"b": 1, "$x": 2}}, T),  # first key has no $: a value
    ({"a": {"$eq": {"b": 1}}}, {"a": {"b": 1}}, T),
    ({"a": {"$eq": {"$gt": 1}}}, {"a": {"$gt": 1}}, T),
    ({"a": {"$eq": {"$gt": 1}}}, {"a": 2}, F),
)
def test_object_equality(f, d, expected):
    check(f, d, expected)


# ---------------------------------------------------------------------------
# $type, $mod, bits, $regex
# ---------------------------------------------------------------------------


@cases(
    ({"a": {"$type": "string"}}, {"a": "x"}, T),
    ({"a": {"$type": 2}}, {"a": "x"}, T),
    ({"a": {"$type": 2.0}}, {"a": "x"}, T),
    ({"a": {"$type": "number"}}, {"a": Int64(3)}, T),
    ({"a": {"$type": "number"}}, {"a": Decimal128("1")}, T),
    ({"a": {"$type": "number"}}, {"a": True}, F),
    ({"a": {"$type": "double"}}, {"a": 1}, F),
    ({"a": {"$type": "double"}}, {"a": 1.0}, T),
    ({"a": {"$type": "int"}}, {"a": 1}, T),
    ({"a": {"$type": "long"}}, {"a": Int64(1)}, T),
    ({"a": {"$type": "long"}}, {"a": 2**40}, T),
    ({"a": {"$type": "decimal"}}, {"a": Decimal128("1")}, T),
    ({"a": {"$type": "array"}}, {"a": []}, T),
    ({"a": {"$type": "array"}}, {"a": [[1]]}, T),
    ({"a": {"$type": "array"}}, {"a": 1}, F),
    ({"a": {"$type": 4}}, {"a": [1]}, T),
    ({"a": {"$type": "string"}}, {"a": ["x", 1]}, T),
    ({"a": {"$type": ["bool", "null"]}}, {"a": None}, T),
    ({"a": {"$type": ["bool", 10]}}, {"a": 5}, F),
    ({"a": {"$type": "null"}}, {}, F),
    ({"a": {"$type": "object"}}, {"a": {}}, T),
    ({"a": {"$type": "bool"}}, {"a": False}, T),
    ({"a": {"$type": "regex"}}, {"a": Regex("x")}, T),
    ({"a": {"$type": "minKey"}}, {"a": MinKey()}, T),
    ({"a": {"$type": -1}}, {"a": MinKey()}, T),
    ({"a": {"$type": "maxKey"}}, {"a": MaxKey()}, T),
    ({"a": {"$type": "objectId"}}, {"a": OID}, T),
    ({"a": {"$type": "date"}}, {"a": DATE}, T),
    ({"a": {"$type": "binData"}}, {"a": b"\x01"}, T),
    ({"a": {"$type": "timestamp"}}, {"a": Timestamp(1, 1)}, T),
    ({"a.b": {"$type": "int"}}, {"a": [{"b": 1}]}, T),
    ({"a": {"$type": "foo"}}, {"a": 1}, BAD),
    ({"a": {"$type": "missing"}}, {"a": 1}, BAD),
    ({"a": {"$type": 0}}, {"a": 1}, BAD),
    ({"a": {"$type": 100}}, {"a": 1}, BAD),
    ({"a": {"$type": 1.5}}, {"a": 1}, BAD),
    ({"a": {"$type": []}}, {"a": 1}, FTP),
    ({"a": {"$type": None}}, {"a": 1}, TM),
    ({"a": {"$type": [True]}}, {"a": 1}, TM),
)
def test_type(f, d, expected):
    check(f, d, expected)


@cases(
    ({"a": {"$mod": [4, 0]}}, {"a": 8}, T),
    ({"a": {"$mod": [4, 0]}}, {"a": 9}, F),
    ({"a": {"$mod": [4, 0]}}, {"a": 8.9}, T),
    ({"a": {"$mod": [4, 0]}}, {"a": -8.9}, T),
    ({"a": {"$mod": [4, -1]}}, {"a": -5}, T),  # C++ %: sign of the dividend
    ({"a": {"$mod": [4, 3]}}, {"a": -5}, F),
    ({"a": {"$mod": [-4, 1]}}, {"a": 5}, T),
    ({"a": {"$mod": [4.5, 0]}}, {"a": 8}, T),  # divisor truncated to 4
    ({"a": {"$mod": [4, 0.9]}}, {"a": 8}, T),  # remainder truncated to 0
    ({"a": {"$mod": [3, 0]}}, {"a": Decimal128("9.5")}, T),
    ({"a": {"$mod": [3, 1]}}, {"a": Int64(10)}, T),
    ({"a": {"$mod": [4, 0]}}, {"a": "8"}, F),
    ({"a": {"$mod": [4, 0]}}, {"a": True}, F),
    ({"a": {"$mod": [2, 0]}}, {"a": NAN}, F),
    ({"a": {"$mod": [2, 0]}}, {"a": INF}, F),
    ({"a": {"$mod": [2, 0]}}, {"a": 1e30}, F),  # not representable as a long
    ({"a": {"$mod": [2, 1]}}, {"a": [2, 3]}, T),
    ({"a": {"$mod": [2, 0]}}, {}, F),
    ({"a": {"$mod": [0, 1]}}, {"a": 1}, BAD),
    ({"a": {"$mod": [0.5, 1]}}, {"a": 1}, BAD),  # truncates to 0
    ({"a": {"$mod": [4]}}, {"a": 1}, BAD),
    ({"a": {"$mod": [4, 1, 2]}}, {"a": 1}, BAD),
    ({"a": {"$mod": []}}, {"a": 1}, BAD),
    ({"a": {"$mod": 4}}, {"a": 1}, BAD),
    ({"a": {"$mod": ["a", 1]}}, {"a": 1}, BAD),
    ({"a": {"$mod": [4, "a"]}}, {"a": 1}, BAD),
    ({"a": {"$mod": [NAN, 1]}}, {"a": 1}, BAD),
    ({"a": {"$mod": [INF, 0]}}, {"a": 1}, BAD),
    ({"a": {"$mod": [4, NAN]}}, {"a": 1}, BAD),
    ({"a": {"$mod": [1e300, 0]}}, {"a": 1}, BAD),
    # exact in 64-bit integers, never through doubles (2**53 + 1 is no double)
    ({"a": {"$mod": [2, 0]}}, {"a": Int64(2**53 + 1)}, F),
    ({"a": {"$mod": [2, 1]}}, {"a": Int64(2**53 + 1)}, T),
    ({"a": {"$mod": [2, 1]}}, {"a": Decimal128("9007199254740993")}, T),
    ({"a": {"$mod": [2, 1]}}, {"a": Decimal128("9223372036854775807.9")}, T),
    ({"a": {"$mod": [4, -3]}}, {"a": Decimal128("-7.9")}, T),  # truncated to -7
    ({"a": {"$mod": [2, 0]}}, {"a": Decimal128("9223372036854775808")}, F),  # out of range
    ({"a": {"$mod": [7, 10**18 % 7]}}, {"a": Decimal128("1E+18")}, T),
    ({"a": {"$mod": [Int64(2**53 + 1), 2]}}, {"a": Int64(2**53 + 3)}, T),
    ({"a": {"$mod": [Int64(2**53 + 1), 0]}}, {"a": Int64(2**54 + 2)}, T),
    ({"a": {"$mod": [3, Int64(2**53 + 1)]}}, {"a": Int64(2**53 + 1)}, F),
    ({"a": {"$mod": [Decimal128("9007199254740993.7"), 0]}}, {"a": Int64(2**53 + 1)}, T),
    ({"a": {"$mod": [-2.0**63, 5]}}, {"a": 5}, T),  # -2**63 itself is in range
    ({"a": {"$mod": [Decimal128("-9223372036854775808.5"), 5]}}, {"a": 5}, T),
    ({"a": {"$mod": [Decimal128("9223372036854775808"), 0]}}, {"a": 1}, BAD),
    ({"a": {"$mod": [4, Decimal128("-1E+19")]}}, {"a": 1}, BAD),
    ({"a": {"$mod": [Decimal128("NaN"), 0]}}, {"a": 1}, BAD),
    ({"a": {"$mod": [4, Decimal128("-Infinity")]}}, {"a": 1}, BAD),
    ({"a": {"$mod": [Decimal128("0.9"), 0]}}, {"a": 1}, BAD),  # truncates to 0
)
def test_mod(f, d, expected):
    check(f, d, expected)


@cases(
    # A regex operand matches a stored regex with its pattern and flags, in
    # $not and $all as in $eq and $in (they had lost the operand).
    ({"c": {"$not": Regex("^a")}}, {"c": Regex("^a")}, F),
    ({"c": {"$not": Regex("^a")}}, {"c": [Regex("^a"), "x"]}, F),
    ({"c": {"$not": Regex("^a")}}, {"c": "ab"}, F),
    ({"c": {"$not": Regex("^a")}}, {"c": Regex("^a", "i")}, T),
    ({"c": {"$all": [Regex("^a")]}}, {"c": Regex("^a")}, T),
    ({"c": {"$all": [Regex("^a")]}}, {"c": [Regex("^a"), "x"]}, T),
    ({"c": {"$all": [Regex("^a")]}}, {"c": Regex("^a", "i")}, F),
    ({"c": {"$all": [Regex("^a"), "x"]}}, {"c": [Regex("^a"), "x"]}, T),
    ({"c": {"$all": [Regex("^a"), "x"]}}, {"c": Regex("^a")}, F),
)
def test_regex_operands_match_stored_regexes(f, d, expected):
    check(f, d, expected)


@cases(
    # $all is an $and of its values' conditions, each over the whole path:
    # through an array of documents each value may match in another element.
    ({"c.d": {"$all": [1, 2]}}, {"c": [{"d": 1}, {"d": 2}]}, T),
    ({"c.d": {"$all": [2, None]}}, {"c": [{"e": 1}, {"d": 2}]}, T),
    ({"x.c": {"$all": [{"$elemMatch": {"d": 1}}, {"$elemMatch": {"d": 2}}]}},
     {"x": [{"c": [{"d": 1}]}, {"c": [{"d": 2}]}]}, T),
    ({"c.d": {"$all": [1, 3]}}, {"c": [{"d": 1}, {"d": 2}]}, F),
    ({"c.d": {"$all": [[1, 2]]}}, {"c": [{"d": [1, 2]}]}, T),
    ({"c.d": {"$all": []}}, {"c": [{"d": 1}]}, F),
    ({"c.d": {"$all": [1, 2]}}, {"c": {"d": [2, 1]}}, T),
    ({"c.d": {"$all": [Regex("^a"), "b"]}}, {"c": [{"d": "ab"}, {"d": "b"}]}, T),
)
def test_all_takes_each_value_over_the_whole_path(f, d, expected):
    check(f, d, expected)


@pytest.mark.parametrize("spec,msg", [
    ([NAN], "not enough elements"),  # the shape before any coercion
    ([NAN, "x"], "remainder not a number"),
    ([NAN, 1, 2], "too many elements"),
    ([1, NAN, 3], "too many elements"),
    ([1e300], "not enough elements"),
    (["x"], "divisor not a number"),
    ([], "not enough elements"),
    ([NAN, 1], "divisor value is invalid :: caused by :: Unable to coerce NaN/Inf to "
               "integral type"),
    ([1, 1e300], "remainder value is invalid :: caused by :: Out of bounds coercing to "
                 "integral value"),
])
def test_mod_errors_in_mongods_order(spec, msg):
    # mongod's parseMod checks the array's shape, element by element, and
    # only then coerces the two numbers.
    f = {"a": {"$mod": spec}}
    want = "malformed mod, " + msg
    with pytest.raises(FilterError) as ref_exc:
        matches(rt(f), rt({"a": 1}))
    assert str(ref_exc.value) == want or want in str(ref_exc.value)
    if not REFERENCE_ONLY:
        with pytest.raises(multifora.MultiforaError) as exc:
            _core._match(bson.encode(f), bson.encode({"a": 1}))
        assert exc.value.code == BAD
        assert want in str(exc.value), str(exc.value)


@cases(
    ({"a": {"$bitsAllSet": 5}}, {"a": 7}, T),
    ({"a": {"$bitsAllSet": 5}}, {"a": 5}, T),
    ({"a": {"$bitsAllSet": 5}}, {"a": 4}, F),
    ({"a": {"$bitsAllSet": [0, 2]}}, {"a": 5}, T),
    ({"a": {"$bitsAllSet": []}}, {"a": 0}, T),
    ({"a": {"$bitsAnySet": []}}, {"a": -1}, F),
    ({"a": {"$bitsAnySet": [1]}}, {"a": 5}, F),
    ({"a": {"$bitsAnySet": [1]}}, {"a": 6}, T),
    ({"a": {"$bitsAllClear": 2}}, {"a": 5}, T),
    ({"a": {"$bitsAllClear": 3}}, {"a": 5}, F),
    ({"a": {"$bitsAnyClear": 5}}, {"a": 5}, F),
    ({"a": {"$bitsAnyClear": 5}}, {"a": 1}, T),
    ({"a": {"$bitsAllSet": [63]}}, {"a": -1}, T),
    ({"a": {"$bitsAllSet": [100]}}, {"a": -1}, T),  # positions > 63 test the sign bit
    ({"a": {"$bitsAllSet": [100]}}, {"a": 1}, F),
    ({"a": {"$bitsAllSet": [31]}}, {"a": Int64(2**31)}, T),
    ({"a": {"$bitsAllSet": 1}}, {"a": 3.0}, T),
    ({"a": {"$bitsAllSet": 1}}, {"a": 3.5}, F),
    ({"a": {"$bitsAllClear": 1}}, {"a": 3.5}, F),
    ({"a": {"$bitsAnySet": 1}}, {"a": NAN}, F),
    ({"a": {"$bitsAllClear": 1}}, {"a": 2.0**63}, F),
    ({"a": {"$bitsAllSet": 1}}, {"a": "x"}, F),
    ({"a": {"$bitsAllClear": 1}}, {}, F),
    ({"a": {"$bitsAllSet": 1}}, {"a": b"\x01"}, T),
    ({"a": {"$bitsAnySet": [9]}}, {"a": b"\x00\x02"}, T),
    ({"a": {"$bitsAllSet": [9]}}, {"a": b"\x00"}, F),  # zero-extended
    ({"a": {"$bitsAllClear": [9]}}, {"a": b"\x00"}, T),
    ({"a": {"$bitsAllSet": Binary(b"\x05")}}, {"a": 5}, T),
    ({"a": {"$bitsAllSet": Binary(b"\x05")}}, {"a": b"\x07"}, T),
    ({"a": {"$bitsAllClear": [0]}}, {"a": [3, 2]}, T),
    ({"a": {"$bitsAllSet": -1}}, {"a": 1}, FTP),
    ({"a": {"$bitsAllSet": 1.5}}, {"a": 1}, FTP),
    ({"a": {"$bitsAllSet": [-1]}}, {"a": 1}, BAD),
    ({"a": {"$bitsAllSet": [1.5]}}, {"a": 1}, BAD),
    ({"a": {"$bitsAllSet": ["x"]}}, {"a": 1}, BAD),
    ({"a": {"$bitsAllSet": "x"}}, {"a": 1}, BAD),
)
def test_bits(f, d, expected):
    check(f, d, expected)


@cases(
    ({"a": {"$regex": "^x"}}, {"a": "xy"}, T),
    ({"a": {"$regex": "^x"}}, {"a": "yx"}, F),
    ({"a": {"$regex": "^X", "$options": "i"}}, {"a": "xy"}, T),
    ({"a": {"$options": "i", "$regex": "^X"}}, {"a": "xy"}, T),
    ({"a": {"$regex": Regex("^X", "i")}}, {"a": "xy"}, T),
    ({"a": Regex("^X", "i")}, {"a": "xy"}, T),
    ({"a": Regex("b$")}, {"a": "ab\n"}, T),
    ({"a": {"$regex": "^b", "$options": "m"}}, {"a": "a\nb"}, T),
    ({"a": {"$regex": "^b"}}, {"a": "a\nb"}, F),
    ({"a": {"$regex": "a.b", "$options": "s"}}, {"a": "a\nb"}, T),
    ({"a": {"$regex": "a.b"}}, {"a": "a\nb"}, F),
    ({"a": {"$regex": "a b # comment", "$options": "x"}}, {"a": "ab"}, T),
    ({"a": {"$regex": "x", "$options": "u"}}, {"a": "x"}, T),
    ({"a": {"$regex": "x"}}, {"a": 5}, F),
    # groups beyond the one offset pair the matcher's match data holds
    ({"a": Regex("(a)(b)(c)(d)(e)")}, {"a": "xabcde"}, T),
    ({"a": Regex("(a)(b)(c)(d)(e)")}, {"a": "xabcdx"}, F),
    ({"a": Regex(r"(\w)\1")}, {"a": "xyyz"}, T),
    ({"a": Regex(r"(\w)\1")}, {"a": "xyz"}, F),
    ({"a": Regex("(?P<g>b)(?P=g)")}, {"a": "abba"}, T),
    ({"a": {"$in": [Regex("(x)(y)(z)"), 1]}}, {"a": ["q", "wxyz"]}, T),
    ({"a": {"$regex": "x"}}, {}, F),
    ({"a": {"$regex": "x"}}, {"a": ["y", "xx"]}, T),
    ({"a": {"$regex": ""}}, {"a": ""}, T),
    ({"a": {"$regex": "^\\d+$"}}, {"a": "123"}, T),
    ({"a": Regex("x")}, {"a": Regex("x")}, T),  # a regex value equals the same regex
    ({"a": Regex("x")}, {"a": Regex("x", "i")}, F),
    ({"a": {"$eq": Regex("x")}}, {"a": "x"}, F),
    ({"a": {"$eq": Regex("x")}}, {"a": Regex("x")}, T),
    ({"a": {"$in": [Regex("x")]}}, {"a": Regex("x")}, T),
    ({"a": {"$regex": "x", "$options": "g"}}, {"a": "x"}, 51108),
    ({"a": {"$regex": Regex("x", "i"), "$options": "m"}}, {"a": "x"}, 51075),
    ({"a": {"$options": "m", "$regex": Regex("x", "i")}}, {"a": "x"}, 51074),
    ({"a": {"$regex": "("}}, {"a": "x"}, 51091),
    ({"a": {"$options": "i"}}, {"a": "x"}, BAD),
    ({"a": {"$regex": 5}}, {"a": "x"}, BAD),
    ({"a": {"$regex": "x", "$options": 5}}, {"a": "x"}, BAD),
)
def test_regex(f, d, expected):
    check(f, d, expected)


@pytest.mark.parametrize("f, field", [
    ({"a": {"$gt": Regex("x")}}, "a"),
    ({"a.b": {"$lte": Regex("x")}}, "a.b"),
    ({"a": {"$not": {"$lt": Regex("x")}}}, "a"),
    ({"a": {"$elemMatch": {"$gte": Regex("x")}}}, ""),  # mongod parses the value form under ""
    ({"a": {"$elemMatch": {"b": {"$gt": Regex("x")}}}}, "b"),
])
def test_regex_comparison_error_names_the_field(f, field):
    """mongod names the field the comparison is on, not the operator."""
    want = f"Can't have RegEx as arg to predicate over field '{field}'."
    with pytest.raises(FilterError) as ref_exc:
        matches(rt(f), {})
    assert ref_exc.value.msg == want
    if not REFERENCE_ONLY:
        with pytest.raises(multifora.MultiforaError) as exc:
            _core._match(bson.encode(f), bson.encode({}))
        assert exc.value.code == 2 and want in str(exc.value)


# ---------------------------------------------------------------------------
# undefined (pymongo decodes it as None, so these are server-only, on raw BSON)
# ---------------------------------------------------------------------------


def _doc_with_undefined(path=("a",)):
    """{a: undefined} (or {a: {b: undefined}}) as raw BSON."""
    raw = bytearray(bson.encode({"z": None}))  # type 0x0A at offset 4, name "z"
    raw[4] = 0x06
    inner = bytes(raw).replace(b"z\x00", path[-1].encode() + b"\x00")
    for name in reversed(path[:-1]):
        body = b"\x03" + name.encode() + b"\x00" + inner
        inner = (len(body) + 5).to_bytes(4, "little") + body + b"\x00"
    return inner


@pytest.mark.skipif(REFERENCE_ONLY, reason="server-only cases")
@pytest.mark.parametrize("f,path,expected", [
    ({"a": None}, ("a",), T),  # 7.0: null and undefined are equal in $eq (changed in 8.0)
    ({"a": {"$ne": None}}, ("a",), F),
    ({"a": {"$in": [None]}}, ("a",), T),
    ({"a": {"$exists": True}}, ("a",), T),
    ({"a": {"$type": "undefined"}}, ("a",), T),
    ({"a": {"$type": "null"}}, ("a",), F),
    ({"a.b": None}, ("a", "b"), T),
    ({"a": {"$gt": None}}, ("a",), F),
])
def test_undefined(f, path, expected):
    raw = _doc_with_undefined(path)
    assert bson.decode(raw, OPTS) == {"a": None} or len(path) == 2
    assert server(f, None, raw_doc=raw) == expected


# ---------------------------------------------------------------------------
# randomized differential test
# ---------------------------------------------------------------------------

SCALARS = [0, 1, 2, -1, 3, 1.0, 2.5, -0.0, 0.0, -1.5, NAN, INF, Int64(1), Int64(2**40),
           Int64(-3), Decimal128("1.0"), Decimal128("2"), Decimal128("-0"), Decimal128("NaN"),
           Decimal128("2.50"), "", "a", "b", "ab", "A", "x\ny", None, True, False]
PATHS = ["a", "b", "c", "a.b", "a.0", "b.c.d"]
REGEXES = ["^a", "b$", "a", "^$", "A", "a|b", "^[ab]+$", "y$"]


class Gen:
    def __init__(self, rng: random.Random):
        self.r = rng

    def scalar(self):
        return self.r.choice(SCALARS)

    def value(self, depth=0):
        k = self.r.random()
        if depth >= 2 or k < 0.55:
            return self.scalar()
        if k < 0.8:
            return [self.value(depth + 1) for _ in range(self.r.randrange(0, 4))]
        return self.subdoc(depth + 1)

    def subdoc(self, depth):
        keys = self.r.sample(["b", "c", "d", "0"], self.r.randrange(0, 3))
        return {k: self.value(depth + 1) for k in keys}

    def doc(self):
        d = {}
        for field in self.r.sample(["a", "b", "c"], self.r.randrange(0, 4)):
            k = self.r.random()
            if field == "a" and k < 0.3:
                # documents, or arrays of them, for "a.b" and "a.0"
                if self.r.random() < 0.5:
                    d["a"] = [self.subdoc(1) if self.r.random() < 0.7 else self.scalar()
                              for _ in range(self.r.randrange(0, 4))]
                else:
                    d["a"] = self.subdoc(1)
            elif field == "b" and k < 0.3:
                inner = {"d": self.value(2)} if self.r.random() < 0.8 else self.scalar()
                c = {"c": inner}
                d["b"] = [c, {"c": [inner]}] if self.r.random() < 0.4 else c
            else:
                d[field] = self.value()
        return d

    def operand(self):
        return self.value(1) if self.r.random() < 0.15 else self.scalar()

    def regex(self):
        pat = self.r.choice(REGEXES)
        opts = self.r.choice(["", "", "i", "m", "s", "x", "im"])
        return pat, opts

    def op_expr(self, depth):
        """{op: arg} for a field (one or two operators)."""
        r = self.r
        out = {}
        for _ in range(1 if r.random() < 0.8 else 2):
            op = r.choice(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin",
                           "$exists", "$type", "$mod", "$all", "$elemMatch", "$size",
                           "$not", "$regex", "$bitsAllSet", "$bitsAnySet",
                           "$bitsAllClear", "$bitsAnyClear"])
            if op in out or (op == "$regex" and "$not" in out):
                continue
            if op in ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte"):
                out[op] = self.operand()
            elif op in ("$in", "$nin"):
                items = [self.operand() for _ in range(r.randrange(0, 4))]
                if r.random() < 0.2:
                    items.append(Regex(*self.regex()))
                out[op] = items
            elif op == "$exists":
                out[op] = r.choice([True, False, 1, 0])
            elif op == "$type":
                names = ["double", "string", "object", "array", "bool", "null", "int",
                         "long", "decimal", "number", 1, 2, 16]
                out[op] = r.choice(names) if r.random() < 0.7 else r.sample(names, 2)
            elif op == "$mod":
                out[op] = [r.choice([1, 2, 3, -2, 2.5]), r.choice([0, 1, -1])]
            elif op == "$all":
                if r.random() < 0.2:
                    out[op] = [{"$elemMatch": self.elem_match_arg(depth + 1)}]
                else:
                    out[op] = [self.operand() for _ in range(r.randrange(0, 3))]
            elif op == "$elemMatch":
                out[op] = self.elem_match_arg(depth + 1)
            elif op == "$size":
                out[op] = r.randrange(0, 4)
            elif op == "$not":
                if depth > 2:
                    continue
                if r.random() < 0.3:
                    out[op] = Regex(*self.regex())
                else:
                    out[op] = self.op_expr(depth + 1)
            elif op == "$regex":
                pat, opts = self.regex()
                out[op] = pat
                if opts:
                    out["$options"] = opts
            else:  # bits
                k = r.random()
                if k < 0.4:
                    out[op] = r.randrange(0, 8)
                elif k < 0.8:
                    out[op] = r.sample(range(4), r.randrange(0, 3))
                else:
                    out[op] = Binary(bytes([r.randrange(0, 8)]))
        if not out:
            out["$eq"] = self.scalar()
        return out

    def elem_match_arg(self, depth):
        if self.r.random() < 0.5 or depth > 3:
            return self.op_expr(depth)  # value form
        # object form ($comment first would also make it one: see test_elem_match)
        return self.filter(depth, paths=["b", "c", "d", "0", "b.c"], comment=False)

    def predicate(self, depth, paths):
        path = self.r.choice(paths)
        k = self.r.random()
        if k < 0.3:
            return {path: self.operand()}  # implicit equality
        if k < 0.35:
            return {path: Regex(*self.regex())}
        return {path: self.op_expr(depth)}

    def filter(self, depth=0, paths=PATHS, comment=True):
        r = self.r
        out = {}
        for _ in range(r.randrange(1, 3)):
            k = r.random()
            if depth < 2 and k < 0.15:
                op = r.choice(["$and", "$or", "$nor"])
                out[op] = [self.filter(depth + 1, paths) for _ in range(r.randrange(1, 3))]
            elif comment and k < 0.17:
                out["$comment"] = "c"
            else:
                out.update(self.predicate(depth, paths))
        return out


BAD_FILTERS = [
    {"a": {"$size": -1}}, {"a": {"$mod": [0, 1]}}, {"a": {"$foo": 1}}, {"$foo": 1},
    {"$and": []}, {"a": {"$in": 1}}, {"a": {"$type": "foo"}}, {"a": {"$not": {}}},
    {"a": {"$all": [{"$gt": 1}]}}, {"a": {"$regex": "a", "$options": "q"}},
]


def _show(x):
    return repr(x)


def test_random_differential():
    if REFERENCE_ONLY:
        pytest.skip("server-only")
    rng = random.Random(20240607)
    gen = Gen(rng)
    checked = skipped = errors = 0
    mismatches = []
    n = 5000
    for i in range(n):
        f = rng.choice(BAD_FILTERS) if rng.random() < 0.01 else gen.filter()
        d = gen.doc()
        try:
            want = matches(rt(f), rt(d))
        except Unsupported:
            skipped += 1
            continue
        except FilterError as exc:
            want = ("error", exc.code)
            errors += 1
        try:
            got = _core._match(bson.encode(f), bson.encode(d))
        except multifora.MultiforaError as exc:
            got = ("error", getattr(exc, "code", None))
        checked += 1
        if got != want:
            mismatches.append((i, f, d, got, want))
    assert skipped < n // 10, f"the reference skipped too many cases: {skipped}"
    if mismatches:
        lines = [f"{len(mismatches)} of {checked} random cases differ "
                 f"({errors} invalid filters, {skipped} skipped); first ones:"]
        for i, f, d, got, want in mismatches[:8]:
            lines.append(f"  #{i}: filter={_show(f)}\n        doc={_show(d)}\n"
                         f"        server={got!r} reference={want!r}")
        pytest.fail("\n".join(lines))


def test_random_reference_runs():
    """The generator and the reference alone (no server): no crashes, few skips."""
    rng = random.Random(7)
    gen = Gen(rng)
    skipped = 0
    outcomes = {True: 0, False: 0, "error": 0}
    for _ in range(2000):
        f, d = gen.filter(), gen.doc()
        try:
            outcomes[matches(rt(f), rt(d))] += 1
        except Unsupported:
            skipped += 1
        except FilterError:
            outcomes["error"] += 1
    assert skipped < 200
    assert outcomes[True] > 200 and outcomes[False] > 200, outcomes
