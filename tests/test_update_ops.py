"""Update operators (csrc/query/update.c) and the matcher's position for `$`
(csrc/query/match.c) against mongod 7.0's documented behaviour.

Each case is (document, update, expected): expected is the new document, or
an error as (code, message) -- the message is mongod's, byte for byte, where
the test gives one.  Field order matters (documents are compared as lists
of pairs), and so does the BSON type of numbers.
"""
import datetime

import bson
import pytest
from bson import Decimal128, Int64, Regex, Timestamp
from bson.codec_options import CodecOptions
from bson.son import SON

import multifora
from multifora import _core

if not hasattr(_core, "_update"):
    pytest.skip("multifora._core has no _update hook", allow_module_level=True)

OPTS = CodecOptions(document_class=SON)


def typed(x):
    """`x` with every number tagged by its BSON type, field order kept."""
    if isinstance(x, (dict, SON)):
        return [(k, typed(v)) for k, v in x.items()]
    if isinstance(x, list):
        return ["array", [typed(v) for v in x]]
    if isinstance(x, bool):
        return ("bool", x)
    if isinstance(x, Int64):
        return ("long", int(x))
    if isinstance(x, int):
        return ("int", x)
    if isinstance(x, float):
        return ("double", repr(x))
    if isinstance(x, Decimal128):
        return ("decimal", str(x))
    return (type(x).__name__, x)


def apply(doc, update, array_filters=None, is_insert=False, pos=-1, now_ms=0):
    af = None
    if array_filters is not None:
        af = bson.encode({str(i): f for i, f in enumerate(array_filters)})
    out, changed = _core._update(bson.encode(doc), bson.encode(update), af, is_insert, pos,
                                 now_ms)
    return bson.decode(out, OPTS), changed


def error(doc, update, **kw):
    with pytest.raises(multifora.MultiforaError) as info:
        apply(doc, update, **kw)
    return info.value.code, str(info.value)


def check(doc, update, expected, **kw):
    if isinstance(expected, tuple):
        code, msg = expected
        got = error(doc, update, **kw)
        assert got[0] == code, got
        if msg is not None:
            assert got[1] == msg
        return None
    got, changed = apply(doc, update, **kw)
    assert typed(got) == typed(expected), (got, expected)
    return changed


def S(*pairs):
    return SON(list(pairs))


# ------------------------------------------------------------------ $set

SET_CASES = [
    ({"_id": 1}, {"$set": {"a": 1}}, S(("_id", 1), ("a", 1))),
    ({"_id": 1, "a": 1}, {"$set": {"a": "x"}}, S(("_id", 1), ("a", "x"))),
    # new fields are appended in lexicographic order, existing ones stay
    ({"_id": 1, "z": 0}, {"$set": S(("c", 1), ("b", 2), ("z", 3), ("a", 4))},
     S(("_id", 1), ("z", 3), ("a", 4), ("b", 2), ("c", 1))),
    # numeric names apply in numeric order
    ({"_id": 1}, {"$set": S(("10", 1), ("9", 2), ("a", 3))},
     S(("_id", 1), ("9", 2), ("10", 1), ("a", 3))),
    ({"_id": 1}, {"$set": {"a.b.c": 1}}, S(("_id", 1), ("a", {"b": {"c": 1}}))),
    ({"_id": 1, "a": {"x": 1}}, {"$set": {"a.b": 2}}, S(("_id", 1), ("a", S(("x", 1), ("b", 2))))),
    ({"_id": 1, "a": [1, 2]}, {"$set": {"a.1": 5}}, {"_id": 1, "a": [1, 5]}),
    ({"_id": 1, "a": [1]}, {"$set": {"a.3": 5}}, {"_id": 1, "a": [1, None, None, 5]}),
    ({"_id": 1, "a": [{"b": 1}]}, {"$set": {"a.0.c": 2}}, {"_id": 1, "a": [S(("b", 1), ("c", 2))]}),
    ({"_id": 1, "a": [1]}, {"$set": {"a.2.b": 1}}, {"_id": 1, "a": [1, None, {"b": 1}]}),
    # a numeric part under a missing field makes a document, not an array
    ({"_id": 1}, {"$set": {"a.0": 1}}, {"_id": 1, "a": {"0": 1}}),
    ({"_id": 1, "a": 1}, {"$set": {"a.b": 1}},
     (28, "Cannot create field 'b' in element {a: 1}")),
    ({"_id": 1, "a": {"b": "x"}}, {"$set": {"a.b.c.d": 1}},
     (28, "Cannot create field 'c' in element {b: \"x\"}")),
    ({"_id": 1, "a": [1, 2]}, {"$set": {"a.x": 1}},
     (28, "Cannot create field 'x' in element {a: [ 1, 2 ]}")),
    ({"_id": 1, "a": 1}, {"$set": {}}, {"_id": 1, "a": 1}),  # empty operand: a no-op since 5.0
]


@pytest.mark.parametrize("doc,update,expected", SET_CASES)
def test_set(doc, update, expected):
    check(doc, update, expected)


def test_noop_is_not_changed():
    assert check({"_id": 1, "a": 1}, {"$set": {"a": 1}}, {"_id": 1, "a": 1}) is False
    assert check({"_id": 1, "a": 1}, {"$set": {}}, {"_id": 1, "a": 1}) is False
    # same value, other type: the bytes differ, so it is a change
    assert check({"_id": 1, "a": 1}, {"$set": {"a": 1.0}}, {"_id": 1, "a": 1.0}) is True
    assert check({"_id": 1, "a": [1]}, {"$addToSet": {"a": 1}}, {"_id": 1, "a": [1]}) is False
    assert check({"_id": 1}, {"$unset": {"x": 1}}, {"_id": 1}) is False
    assert check({"_id": 1, "a": 5}, {"$max": {"a": 3}}, {"_id": 1, "a": 5}) is False


# ---------------------------------------------------------------- $unset

UNSET_CASES = [
    ({"_id": 1, "a": 1, "b": 2}, {"$unset": {"a": ""}}, {"_id": 1, "b": 2}),
    ({"_id": 1, "a": {"b": 1, "c": 2}}, {"$unset": {"a.b": 1}}, {"_id": 1, "a": {"c": 2}}),
    # an array element becomes null
    ({"_id": 1, "a": [1, 2, 3]}, {"$unset": {"a.1": 1}}, {"_id": 1, "a": [1, None, 3]}),
    ({"_id": 1, "a": 1}, {"$unset": {"x.y": 1}}, {"_id": 1, "a": 1}),
    # $unset through a scalar is a no-op, not an error
    ({"_id": 1, "a": 1}, {"$unset": {"a.b": 1}}, {"_id": 1, "a": 1}),
    ({"_id": 1, "a": 1}, {"$unset": {"_id": 1}},
     (66, "Performing an update on the path '_id' would modify the immutable field '_id'")),
]


@pytest.mark.parametrize("doc,update,expected", UNSET_CASES)
def test_unset(doc, update, expected):
    check(doc, update, expected)


# ---------------------------------------------------------- $inc and $mul

INC_CASES = [
    ({"_id": 1, "a": 1}, {"$inc": {"a": 2}}, {"_id": 1, "a": 3}),
    ({"_id": 1}, {"$inc": {"a": 2}}, {"_id": 1, "a": 2}),
    ({"_id": 1}, {"$inc": {"a": Int64(2)}}, {"_id": 1, "a": Int64(2)}),
    ({"_id": 1, "a": 1}, {"$inc": {"a": 0.5}}, {"_id": 1, "a": 1.5}),
    ({"_id": 1, "a": 1}, {"$inc": {"a": Int64(1)}}, {"_id": 1, "a": Int64(2)}),
    ({"_id": 1, "a": 2147483647}, {"$inc": {"a": 1}}, {"_id": 1, "a": Int64(2147483648)}),
    ({"_id": 1, "a": -2147483648}, {"$inc": {"a": -1}}, {"_id": 1, "a": Int64(-2147483649)}),
    ({"_id": 1, "a": Int64(2**63 - 1)}, {"$inc": {"a": 1}},
     (2, "Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) "
         "for document {_id: 1}")),
    ({"_id": "x", "a": 42}, {"$inc": {"a": Int64(2**63 - 1)}},
     (2, "Failed to apply $inc operations to current value ((NumberInt)42) for document "
         "{_id: \"x\"}")),
    ({"_id": 1, "a": "s"}, {"$inc": {"a": 1}},
     (14, "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of "
          "non-numeric type string")),
    ({"_id": 1, "a": {"b": [None]}}, {"$inc": {"a.b.0": 1}},
     (14, "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field '0' of "
          "non-numeric type null")),
    ({"_id": 1}, {"$inc": {"a": "1"}},
     (14, "Cannot increment with non-numeric argument: {a: \"1\"}")),
    ({"_id": 1, "a": Decimal128("1")}, {"$inc": {"a": 1.5}},
     {"_id": 1, "a": Decimal128("2.50000000000000")}),
    ({"_id": 1, "a": Decimal128("0.1")}, {"$inc": {"a": Decimal128("0.2")}},
     {"_id": 1, "a": Decimal128("0.3")}),
    ({"_id": 1, "a": 5}, {"$inc": {"a": Decimal128("-5.5")}}, {"_id": 1, "a": Decimal128("-0.5")}),
    ({"_id": 1, "a": Decimal128("1E+40")}, {"$inc": {"a": Decimal128("1")}},
     {"_id": 1, "a": Decimal128("1.000000000000000000000000000000000E+40")}),
]

MUL_CASES = [
    ({"_id": 1, "a": 3}, {"$mul": {"a": 4}}, {"_id": 1, "a": 12}),
    ({"_id": 1, "a": 3}, {"$mul": {"a": 0.5}}, {"_id": 1, "a": 1.5}),
    ({"_id": 1}, {"$mul": {"a": 5}}, {"_id": 1, "a": 0}),
    ({"_id": 1}, {"$mul": {"a": Int64(5)}}, {"_id": 1, "a": Int64(0)}),
    ({"_id": 1}, {"$mul": {"a": 2.5}}, {"_id": 1, "a": 0.0}),
    ({"_id": 1, "a": 65536}, {"$mul": {"a": 65536}}, {"_id": 1, "a": Int64(4294967296)}),
    ({"_id": 1, "a": Int64(2**62)}, {"$mul": {"a": 4}},
     (2, "Failed to apply $mul operations to current value ((NumberLong)4611686018427387904) "
         "for document {_id: 1}")),
    ({"_id": 1, "a": Decimal128("1.5")}, {"$mul": {"a": Decimal128("2")}},
     {"_id": 1, "a": Decimal128("3.0")}),
    ({"_id": 1, "a": Decimal128("1.1")}, {"$mul": {"a": 3}}, {"_id": 1, "a": Decimal128("3.3")}),
    ({"_id": 1, "a": True}, {"$mul": {"a": 2}},
     (14, "Cannot apply $mul to a value of non-numeric type. {_id: 1} has the field 'a' of "
          "non-numeric type bool")),
    ({"_id": 1}, {"$mul": {"a": None}}, (14, "Cannot multiply with non-numeric argument: {a: null}")),
]


@pytest.mark.parametrize("doc,update,expected", INC_CASES + MUL_CASES)
def test_arithmetic(doc, update, expected):
    check(doc, update, expected)


def test_decimal_rounds_to_34_digits():
    got, _ = apply({"_id": 1, "a": Decimal128("9999999999999999999999999999999999")},
                   {"$inc": {"a": 1}})
    assert str(got["a"]) == "1.000000000000000000000000000000000E+34"
    got, _ = apply({"_id": 1, "a": Decimal128("1234567890123456789")},
                   {"$mul": {"a": Decimal128("1234567890123456789")}})
    # 1524157875323883675019051998750190521 rounded half-even to 34 digits
    assert str(got["a"]) == "1.524157875323883675019051998750191E+36"


# ---------------------------------------------------------- $min and $max

MINMAX_CASES = [
    ({"_id": 1, "a": 5}, {"$min": {"a": 3}}, {"_id": 1, "a": 3}),
    ({"_id": 1, "a": 5}, {"$min": {"a": 7}}, {"_id": 1, "a": 5}),
    ({"_id": 1, "a": 5}, {"$max": {"a": 7}}, {"_id": 1, "a": 7}),
    ({"_id": 1}, {"$max": {"a": 7}}, {"_id": 1, "a": 7}),
    # across types, by MongoDB's order: numbers < strings
    ({"_id": 1, "a": 5}, {"$max": {"a": "x"}}, {"_id": 1, "a": "x"}),
    ({"_id": 1, "a": 5}, {"$min": {"a": None}}, {"_id": 1, "a": None}),
    # numerically equal: no change, the stored type stays
    ({"_id": 1, "a": 5}, {"$min": {"a": 5.0}}, {"_id": 1, "a": 5}),
]


@pytest.mark.parametrize("doc,update,expected", MINMAX_CASES)
def test_min_max(doc, update, expected):
    check(doc, update, expected)


# ---------------------------------------------------------------- $rename

RENAME_CASES = [
    ({"_id": 1, "a": 1, "b": 2}, {"$rename": {"a": "c"}}, S(("_id", 1), ("b", 2), ("c", 1))),
    ({"_id": 1, "a": 1, "b": 2}, {"$rename": {"a": "b"}}, S(("_id", 1), ("b", 1))),
    ({"_id": 1, "a": {"x": 1}}, {"$rename": {"a.x": "b.y"}},
     S(("_id", 1), ("a", {}), ("b", {"y": 1}))),
    ({"_id": 1}, {"$rename": {"a": "b"}}, {"_id": 1}),
    ({"_id": 1, "a": 1}, {"$rename": {"a": 5}},
     (2, "The 'to' field for $rename must be a string: a: 5")),
    ({"_id": 1, "a": 1}, {"$rename": {"a": "a"}},
     (2, "The source and target field for $rename must differ: a: \"a\"")),
    ({"_id": 1, "a": 1}, {"$rename": {"a": "a.b"}},
     (2, "The source and target field for $rename must not be on the same path: a: \"a.b\"")),
    ({"_id": 1, "a": [1]}, {"$rename": {"a.0": "b"}},
     (2, "The source field cannot be an array element, 'a.0' in doc with _id: 1 has an array "
         "field called 'a'")),
    ({"_id": 1, "a": 1, "b": [1]}, {"$rename": {"a": "b.0"}},
     (2, "The destination field cannot be an array element, 'b.0' in doc with _id: 1 has an "
         "array field called 'b'")),
    ({"_id": 1, "a": 1}, {"$rename": {"a.b": "c"}},
     (28, "cannot use the part (a of a.b) to traverse the element ({a: 1})")),
    ({"_id": 1, "a": 1}, {"$rename": {"_id": "b"}},
     (66, "Unsetting the path '_id' using $rename would modify the immutable field '_id'")),
    ({"_id": 1, "a": 1}, {"$rename": {"a": "b"}, "$set": {"b": 1}},
     (40, "Updating the path 'b' would create a conflict at 'b'")),
]


@pytest.mark.parametrize("doc,update,expected", RENAME_CASES)
def test_rename(doc, update, expected):
    check(doc, update, expected)


# ----------------------------------------------------------- $currentDate

NOW = 1_700_000_000_123


def test_current_date():
    when = datetime.datetime.fromtimestamp(NOW / 1000, datetime.timezone.utc).replace(tzinfo=None)
    got, _ = apply({"_id": 1}, {"$currentDate": {"a": True, "b": {"$type": "date"},
                                                  "c": {"$type": "timestamp"}}}, now_ms=NOW)
    assert got["a"] == when.replace(microsecond=123000)
    assert got["b"] == got["a"]
    assert got["c"] == Timestamp(NOW // 1000, 1)
    assert list(got) == ["_id", "a", "b", "c"]
    # false still sets a date
    got, _ = apply({"_id": 1, "a": 5}, {"$currentDate": {"a": False}}, now_ms=NOW)
    assert isinstance(got["a"], datetime.datetime)


@pytest.mark.parametrize("arg,msg", [
    (1, "int is not valid type for $currentDate. Please use a boolean ('true') or a $type "
        "expression ({$type: 'timestamp/date'})."),
    ({"$type": "x"}, "The '$type' string field is required to be 'date' or 'timestamp': "
                     "{$currentDate: {field : {$type: 'date'}}}"),
    ({"$foo": "date"}, "Unrecognized $currentDate option: $foo"),
])
def test_current_date_errors(arg, msg):
    assert error({"_id": 1}, {"$currentDate": {"a": arg}}) == (2, msg)


# ---------------------------------------------------------- $setOnInsert

def test_set_on_insert():
    assert apply({"_id": 1}, {"$setOnInsert": {"a": 1}})[0] == {"_id": 1}
    assert apply({"_id": 1}, {"$setOnInsert": {"a": 1}})[1] is False
    got, _ = apply({"_id": 1}, {"$setOnInsert": {"a": 1}, "$set": {"b": 2}}, is_insert=True)
    assert typed(got) == typed(S(("_id", 1), ("a", 1), ("b", 2)))
    # not an insert: not applied even where the path is not viable
    assert apply({"_id": 1, "a": 1}, {"$setOnInsert": {"a.b": 1}})[0] == {"_id": 1, "a": 1}
    # an inserted document starts with _id
    got, _ = apply({}, {"$set": {"a": 1, "_id": 7}}, is_insert=True)
    assert list(got) == ["_id", "a"]


# ------------------------------------------------------------------ $push

PUSH_CASES = [
    ({"_id": 1, "a": [1]}, {"$push": {"a": 2}}, {"_id": 1, "a": [1, 2]}),
    ({"_id": 1}, {"$push": {"a": 2}}, {"_id": 1, "a": [2]}),
    ({"_id": 1, "a": [1]}, {"$push": {"a": [2, 3]}}, {"_id": 1, "a": [1, [2, 3]]}),
    ({"_id": 1, "a": [1]}, {"$push": {"a": {"$each": [2, 3]}}}, {"_id": 1, "a": [1, 2, 3]}),
    ({"_id": 1, "a": [1, 2]}, {"$push": {"a": {"$each": [9], "$position": 0}}},
     {"_id": 1, "a": [9, 1, 2]}),
    ({"_id": 1, "a": [1, 2, 3]}, {"$push": {"a": {"$each": [9], "$position": -1}}},
     {"_id": 1, "a": [1, 2, 9, 3]}),
    ({"_id": 1, "a": [1, 2]}, {"$push": {"a": {"$each": [9], "$position": -5}}},
     {"_id": 1, "a": [9, 1, 2]}),
    ({"_id": 1, "a": [1, 2]}, {"$push": {"a": {"$each": [9], "$position": 10}}},
     {"_id": 1, "a": [1, 2, 9]}),
    ({"_id": 1, "a": [1, 2, 3]}, {"$push": {"a": {"$each": [4], "$slice": 2}}},
     {"_id": 1, "a": [1, 2]}),
    ({"_id": 1, "a": [1, 2, 3]}, {"$push": {"a": {"$each": [4], "$slice": -2}}},
     {"_id": 1, "a": [3, 4]}),
    ({"_id": 1, "a": [1, 2, 3]}, {"$push": {"a": {"$each": [], "$slice": 0}}},
     {"_id": 1, "a": []}),
    ({"_id": 1, "a": [3, 1]}, {"$push": {"a": {"$each": [2], "$sort": 1}}},
     {"_id": 1, "a": [1, 2, 3]}),
    ({"_id": 1, "a": [3, "x", 1]}, {"$push": {"a": {"$each": [], "$sort": -1}}},
     {"_id": 1, "a": ["x", 3, 1]}),
    ({"_id": 1, "a": [{"s": 2, "k": "b"}, {"s": 1, "k": "a"}, {"k": "c"}]},
     {"$push": {"a": {"$each": [{"s": 1, "k": "d"}], "$sort": {"s": 1}}}},
     {"_id": 1, "a": [{"k": "c"}, {"s": 1, "k": "a"}, {"s": 1, "k": "d"}, {"s": 2, "k": "b"}]}),
    ({"_id": 1, "a": [{"x": {"y": 1}}, {"x": {"y": 3}}, {"x": {"y": 2}}]},
     {"$push": {"a": {"$each": [], "$sort": {"x.y": -1}, "$slice": 2}}},
     {"_id": 1, "a": [{"x": {"y": 3}}, {"x": {"y": 2}}]}),
    # without $each, an object is pushed as it is
    ({"_id": 1, "a": []}, {"$push": {"a": {"$slice": 1}}}, {"_id": 1, "a": [{"$slice": 1}]}),
    ({"_id": 1, "a": 1}, {"$push": {"a": 2}},
     (2, "The field 'a' must be an array but is of type int in document {_id: 1}")),
    ({"_id": 1, "b": {"a": "x"}}, {"$push": {"b.a": 2}},
     (2, "The field 'b.a' must be an array but is of type string in document {_id: 1}")),
    ({"_id": 1}, {"$push": {"a": {"$each": 1}}},
     (2, "The argument to $each in $push must be an array but it was of type: int")),
    ({"_id": 1}, {"$push": {"a": {"$each": [], "$foo": 1}}},
     (2, "Unrecognized clause in $push: $foo")),
    ({"_id": 1}, {"$push": {"a": {"$each": [], "$slice": "x"}}},
     (2, "The value for $slice must be an integer value but was given type: string")),
    ({"_id": 1}, {"$push": {"a": {"$each": [], "$slice": 1.5}}},
     (2, "The value for $slice must be an integer value but was given type: double")),
    ({"_id": 1}, {"$push": {"a": {"$each": [], "$position": "x"}}},
     (2, "The value for $position must be an integer value, not of type: string")),
    ({"_id": 1}, {"$push": {"a": {"$each": [], "$sort": 2}}},
     (2, "The $sort element value must be either 1 or -1")),
    ({"_id": 1}, {"$push": {"a": {"$each": [], "$sort": {}}}},
     (2, "The $sort pattern is empty when it should be a set of fields.")),
    ({"_id": 1}, {"$push": {"a": {"$each": [], "$sort": "x"}}},
     (2, "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort "
         "embedded fields")),
]


@pytest.mark.parametrize("doc,update,expected", PUSH_CASES)
def test_push(doc, update, expected):
    check(doc, update, expected)


# -------------------------------------------------------------- $addToSet

ADD_TO_SET_CASES = [
    ({"_id": 1, "a": [1, 2]}, {"$addToSet": {"a": 3}}, {"_id": 1, "a": [1, 2, 3]}),
    ({"_id": 1, "a": [1, 2]}, {"$addToSet": {"a": 2}}, {"_id": 1, "a": [1, 2]}),
    # numerically equal counts as present
    ({"_id": 1, "a": [1, 2]}, {"$addToSet": {"a": 2.0}}, {"_id": 1, "a": [1, 2]}),
    ({"_id": 1, "a": [1]}, {"$addToSet": {"a": {"$each": [1, 3, 3, 4]}}},
     {"_id": 1, "a": [1, 3, 4]}),
    ({"_id": 1}, {"$addToSet": {"a": {"$each": [5, 5, 6]}}}, {"_id": 1, "a": [5, 6]}),
    ({"_id": 1, "a": [{"x": 1}]}, {"$addToSet": {"a": {"x": 1}}}, {"_id": 1, "a": [{"x": 1}]}),
    ({"_id": 1, "a": 1}, {"$addToSet": {"a": 1}},
     (2, "Cannot apply $addToSet to non-array field. Field named 'a' has non-array type int")),
    ({"_id": 1}, {"$addToSet": {"a": {"$each": 1}}},
     (14, "The argument to $each in $addToSet must be an array but it was of type int")),
    ({"_id": 1}, {"$addToSet": {"a": {"$each": [], "x": 1}}},
     (2, "Found unexpected fields after $each in $addToSet: { $each: [], x: 1 }")),
]


@pytest.mark.parametrize("doc,update,expected", ADD_TO_SET_CASES)
def test_add_to_set(doc, update, expected):
    check(doc, update, expected)


# ------------------------------------------------------------------- $pop

POP_CASES = [
    ({"_id": 1, "a": [1, 2, 3]}, {"$pop": {"a": 1}}, {"_id": 1, "a": [1, 2]}),
    ({"_id": 1, "a": [1, 2, 3]}, {"$pop": {"a": -1}}, {"_id": 1, "a": [2, 3]}),
    ({"_id": 1, "a": [1, 2, 3]}, {"$pop": {"a": 1.0}}, {"_id": 1, "a": [1, 2]}),
    ({"_id": 1, "a": []}, {"$pop": {"a": 1}}, {"_id": 1, "a": []}),
    ({"_id": 1}, {"$pop": {"a": 1}}, {"_id": 1}),
    ({"_id": 1, "a": {"b": {}}}, {"$pop": {"a.b.c": 1}}, {"_id": 1, "a": {"b": {}}}),
    ({"_id": 1, "a": [{"b": 0}]}, {"$pop": {"a.2.b": 1}}, {"_id": 1, "a": [{"b": 0}]}),
    ({"_id": 1, "a": 1}, {"$pop": {"a": 1}},
     (14, "Path 'a' contains an element of non-array type 'int'")),
    ({"_id": 1, "a": 1}, {"$pop": {"a.b": 1}},
     (28, "Cannot use the part (b) of (a.b) to traverse the element ({a: 1})")),
    ({"_id": 1, "a": [1]}, {"$pop": {"a": 2}}, (9, "$pop expects 1 or -1, found: 2")),
    ({"_id": 1, "a": [1]}, {"$pop": {"a": "x"}}, (9, "Expected a number in: a: \"x\"")),
]


@pytest.mark.parametrize("doc,update,expected", POP_CASES)
def test_pop(doc, update, expected):
    check(doc, update, expected)


# ------------------------------------------------------ $pull and $pullAll

PULL_CASES = [
    ({"_id": 1, "a": [1, 2, 1, 3]}, {"$pull": {"a": 1}}, {"_id": 1, "a": [2, 3]}),
    ({"_id": 1, "a": [1, 2.0, 3]}, {"$pull": {"a": 2}}, {"_id": 1, "a": [1, 3]}),
    ({"_id": 1, "a": [1, 5, 7, 3]}, {"$pull": {"a": {"$gte": 5}}}, {"_id": 1, "a": [1, 3]}),
    ({"_id": 1, "a": [1, 5, 7]}, {"$pull": {"a": {"$in": [1, 7]}}}, {"_id": 1, "a": [5]}),
    ({"_id": 1, "a": ["apple", "berry", "avocado"]}, {"$pull": {"a": Regex("^a")}},
     {"_id": 1, "a": ["berry"]}),
    # a document condition matches document elements as documents
    ({"_id": 1, "a": [{"x": 1, "y": 1}, {"x": 2}, 1]}, {"$pull": {"a": {"x": 1}}},
     {"_id": 1, "a": [{"x": 2}, 1]}),
    ({"_id": 1, "a": [{"x": 1}, {"x": 5}]}, {"$pull": {"a": {"x": {"$gt": 2}}}},
     {"_id": 1, "a": [{"x": 1}]}),
    ({"_id": 1, "a": [{"x": 1}, 2]}, {"$pull": {"a": {}}}, {"_id": 1, "a": [2]}),
    ({"_id": 1, "a": [[1, 2], [3]]}, {"$pull": {"a": [1, 2]}}, {"_id": 1, "a": [[3]]}),
    ({"_id": 1, "a": [{"b": [{"c": 1}, {"c": 2}]}]}, {"$pull": {"a.0.b": {"c": 1}}},
     {"_id": 1, "a": [{"b": [{"c": 2}]}]}),
    ({"_id": 1}, {"$pull": {"a": 1}}, {"_id": 1}),
    ({"_id": 1, "a": 1}, {"$pull": {"a": 1}}, (2, "Cannot apply $pull to a non-array value")),
    ({"_id": 1, "a": 1}, {"$pull": {"a.b": 1}},
     (28, "Cannot use the part (b) of (a.b) to traverse the element ({a: 1})")),
    ({"_id": 1, "a": [1]}, {"$pull": {"a": {"$foo": 1}}}, (2, "unknown top level operator: $foo")),
    ({"_id": 1, "a": [1, 2, 3, 1]}, {"$pullAll": {"a": [1, 3]}}, {"_id": 1, "a": [2]}),
    ({"_id": 1, "a": [1]}, {"$pullAll": {"a": 1}},
     (2, "$pullAll requires an array argument but was given a int")),
    ({"_id": 1, "a": "x"}, {"$pullAll": {"a": [1]}},
     (2, "Cannot apply $pull to a non-array value")),
]


@pytest.mark.parametrize("doc,update,expected", PULL_CASES)
def test_pull(doc, update, expected):
    check(doc, update, expected)


# ------------------------------------------------------------------- $bit

BIT_CASES = [
    ({"_id": 1, "a": 13}, {"$bit": {"a": {"and": 10}}}, {"_id": 1, "a": 8}),
    ({"_id": 1, "a": 13}, {"$bit": {"a": {"or": 2}}}, {"_id": 1, "a": 15}),
    ({"_id": 1, "a": 13}, {"$bit": {"a": {"xor": 5}}}, {"_id": 1, "a": 8}),
    ({"_id": 1, "a": 1}, {"$bit": {"a": {"or": Int64(2)}}}, {"_id": 1, "a": Int64(3)}),
    ({"_id": 1, "a": 1}, {"$bit": {"a": S(("or", 6), ("and", 3))}}, {"_id": 1, "a": 3}),
    ({"_id": 1}, {"$bit": {"a": {"or": 5}}}, {"_id": 1, "a": 5}),
    ({"_id": 1, "a": 1.0}, {"$bit": {"a": {"or": 1}}},
     (2, "Cannot apply $bit to a value of non-integral type._id: 1 has the field a of "
         "non-integer type double")),
    ({"_id": 1}, {"$bit": {"a": {"or": 1.0}}},
     (2, "The $bit modifier field must be an Integer(32/64 bit); a 'double' is not supported "
         "here: {or: 1.0}")),
    ({"_id": 1}, {"$bit": {"a": {"not": 1}}},
     (2, "The $bit modifier only supports 'and', 'or', and 'xor', not 'not' which is an unknown "
         "operator: {not: 1}")),
    ({"_id": 1}, {"$bit": {"a": 1}},
     (2, "The $bit modifier is not compatible with a int. You must pass in an embedded "
         "document: {$bit: {field: {and/or/xor: #}}")),
    ({"_id": 1}, {"$bit": {"a": {}}},
     (2, "You must pass in at least one bitwise operation. The format is: {$bit: {field: "
         "{and/or/xor: #}}")),
]


@pytest.mark.parametrize("doc,update,expected", BIT_CASES)
def test_bit(doc, update, expected):
    check(doc, update, expected)


# ------------------------------------------------------------- positional

def test_positional_uses_pos():
    doc = {"_id": 1, "a": [{"b": 1}, {"b": 2}]}
    assert apply(doc, {"$set": {"a.$.b": 9}}, pos=1)[0] == {"_id": 1, "a": [{"b": 1}, {"b": 9}]}
    assert apply(doc, {"$inc": {"a.$.b": 1}}, pos=0)[0] == {"_id": 1, "a": [{"b": 2}, {"b": 2}]}
    assert error(doc, {"$set": {"a.$.b": 9}}) == (
        2, "The positional operator did not find the match needed from the query.")
    # the matched position merges with a named child of the same index
    assert apply(doc, {"$set": {"a.$.b": 7, "a.1.c": 8}}, pos=1)[0] == {
        "_id": 1, "a": [{"b": 1}, {"b": 7, "c": 8}]}
    assert error(doc, {"$set": {"a.$": 7, "a.1": 8}}, pos=1) == (
        40, "Update created a conflict at 'a.1'")


@pytest.mark.parametrize("update,expected", [
    ({"$set": {"$.a": 1}},
     (2, "Cannot have positional (i.e. '$') element in the first position in path '$.a'")),
    ({"$set": {"a.$.b.$": 1}},
     (2, "Too many positional (i.e. '$') elements found in path 'a.$.b.$'")),
    ({"$set": {"": 1}}, (56, "An empty update path is not valid.")),
    ({"$set": {"a..b": 1}},
     (56, "The update path 'a..b' contains an empty field name, which is not allowed.")),
])
def test_path_errors(update, expected):
    assert error({"_id": 1}, update) == expected


def test_needs_pos():
    assert _core._update_info(bson.encode({"$set": {"a.$": 1}})) == (False, True)
    assert _core._update_info(bson.encode({"$set": {"a.$[]": 1}})) == (False, False)
    assert _core._update_info(bson.encode({"a": 1})) == (True, False)


# ------------------------------------------------ $[] and arrayFilters

ARRAY_FILTER_CASES = [
    ({"_id": 1, "a": [1, 2, 3]}, {"$inc": {"a.$[]": 10}}, None, {"_id": 1, "a": [11, 12, 13]}),
    ({"_id": 1, "a": [{"b": 1}, {"b": 2}]}, {"$set": {"a.$[].c": 0}}, None,
     {"_id": 1, "a": [{"b": 1, "c": 0}, {"b": 2, "c": 0}]}),
    ({"_id": 1, "a": [1, 5, 9]}, {"$set": {"a.$[x]": 0}}, [{"x": {"$gte": 5}}],
     {"_id": 1, "a": [1, 0, 0]}),
    ({"_id": 1, "a": [{"b": 1}, {"b": 5}]}, {"$set": {"a.$[e].c": 1}}, [{"e.b": {"$gt": 2}}],
     {"_id": 1, "a": [{"b": 1}, {"b": 5, "c": 1}]}),
    ({"_id": 1, "a": [{"b": [1, 2]}, {"b": [3]}]}, {"$inc": {"a.$[].b.$[y]": 100}},
     [{"y": {"$gte": 2}}], {"_id": 1, "a": [{"b": [1, 102]}, {"b": [103]}]}),
    ({"_id": 1, "a": [1, 2, 3]}, {"$set": {"a.$[x]": 0}}, [{"$or": [{"x": 1}, {"x": 3}]}],
     {"_id": 1, "a": [0, 2, 0]}),
    # no element matches: nothing changes
    ({"_id": 1, "a": [1]}, {"$set": {"a.$[x]": 0}}, [{"x": 5}], {"_id": 1, "a": [1]}),
    ({"_id": 1, "a": [1]}, {"$set": {"a.$[x]": 0}}, None,
     (2, "No array filter found for identifier 'x' in path 'a.$[x]'")),
    ({"_id": 1, "a": [1]}, {"$set": {"a.$[]": 0}}, [{"x": 1}],
     (9, "The array filter for identifier 'x' was not used in the update { $set: { a.$[]: 0 } }")),
    ({"_id": 1, "a": [1]}, {"$set": {"a.$[x]": 0}}, [{"x": 1}, {"x": 2}],
     (9, "Found multiple array filters with the same top-level field name x")),
    ({"_id": 1, "a": [1]}, {"$set": {"a.$[x]": 0}}, [{"x": 1, "y": 2}],
     (9, "Error parsing array filter :: caused by :: Expected a single top-level field name, "
         "found 'x' and 'y'")),
    ({"_id": 1, "a": [1]}, {"$set": {"a.$[X]": 0}}, [{"X": 1}],
     (2, "Error parsing array filter :: caused by :: The top-level field name must be an "
         "alphanumeric string beginning with a lowercase letter, found 'X'")),
    ({"_id": 1, "a": [1]}, {"$set": {"a.$[]": 0}}, [{}],
     (9, "Cannot use an expression without a top-level field name in arrayFilters")),
    ({"_id": 1, "a": 1}, {"$set": {"a.$[]": 0}}, None,
     (2, "Cannot apply array updates to non-array element a: 1")),
    ({"_id": 1}, {"$set": {"a.b.$[]": 0}}, None,
     (2, "The path 'a.b' must exist in the document in order to apply array updates.")),
    ({"_id": 1, "a": [1]}, {"$set": {"$[].a": 0}}, None,
     (2, "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position "
         "in path '$[].a'")),
    ({"_id": 1, "a": [0]}, {"$set": {"a.$[i]": 2, "a.$[j]": 3}}, [{"i": 0}, {"j": 0}],
     (40, "Update created a conflict at 'a.0'")),
    ({"_id": 1, "a": [0, 1]}, {"$set": {"a.$[i]": 2, "a.$[j]": 3}}, [{"i": 0}, {"j": 1}],
     {"_id": 1, "a": [2, 3]}),
    ({"_id": 1, "a": [{"b": 0}]}, {"$set": {"a.$[].b": 1, "a.0": 2}}, None,
     (40, "Updating the path 'a.0' would create a conflict at 'a'")),
]


@pytest.mark.parametrize("doc,update,filters,expected", ARRAY_FILTER_CASES)
def test_array_filters(doc, update, filters, expected):
    check(doc, update, expected, array_filters=filters)


# ------------------------------------------------------------------ parse

PARSE_CASES = [
    ({"$foo": {"a": 1}},
     (9, "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update "
         "specified as an array")),
    ({"$set": {"a": 1}, "b": 1},
     (9, "Unknown modifier: b. Expected a valid update modifier or pipeline-style update "
         "specified as an array")),
    ({"$set": 1},
     (9, "Modifiers operate on fields but we found type int instead. For example: "
         "{$mod: {<field>: ...}} not {$set: 1}")),
    ({"$set": {"a": 1}, "$inc": {"a": 1}}, (40, "Updating the path 'a' would create a conflict at 'a'")),
    ({"$set": {"a.b": 1}, "$inc": {"a": 1}},
     (40, "Updating the path 'a' would create a conflict at 'a'")),
    ({"$set": {"a": 1}, "$inc": {"a.b": 1}},
     (40, "Updating the path 'a.b' would create a conflict at 'a'")),
    ({"$set": {"a": 1}, "$setOnInsert": {"a": 2}},
     (40, "Updating the path 'a' would create a conflict at 'a'")),
    ({"b": 1, "$set": {"a": 1}},
     (52, "The dollar ($) prefixed field '$set' in '$set' is not allowed in the context of an "
          "update's replacement document. Consider using an aggregation pipeline with "
          "$replaceWith.")),
]


@pytest.mark.parametrize("update,expected", PARSE_CASES)
def test_parse_errors(update, expected):
    assert error({"_id": 1}, update) == expected


# -------------------------------------------------------- immutable _id

IMMUTABLE_CASES = [
    ({"_id": 1, "a": 1}, {"$set": {"_id": 2}},
     (66, "Performing an update on the path '_id' would modify the immutable field '_id'")),
    ({"_id": 1, "a": 1}, {"$set": {"_id": 1, "a": 2}}, {"_id": 1, "a": 2}),
    ({"_id": {"x": 1}}, {"$set": {"_id.x": 2}},
     (66, "Performing an update on the path '_id.x' would modify the immutable field '_id'")),
    ({"_id": {"x": 1}}, {"$set": {"_id.y": 2}},
     (66, "Updating the path '_id' to _id: { x: 1, y: 2 } would modify the immutable field "
          "'_id'")),
    ({"_id": 1}, {"$inc": {"_id": 1}},
     (66, "Performing an update on the path '_id' would modify the immutable field '_id'")),
    ({"_id": 1}, {"$set": {"_id.x": 1}}, (28, "Cannot create field 'x' in element {_id: 1}")),
]


@pytest.mark.parametrize("doc,update,expected", IMMUTABLE_CASES)
def test_immutable_id(doc, update, expected):
    check(doc, update, expected)


# ------------------------------------------------------------ replacement

REPLACEMENT_CASES = [
    ({"_id": 1, "a": 1}, {"b": 2}, S(("_id", 1), ("b", 2))),
    ({"_id": 1, "a": 1}, S(("b", 2), ("_id", 1)), S(("_id", 1), ("b", 2))),
    ({"_id": 1, "a": 1}, {"_id": 1.0, "b": 2}, {"_id": 1.0, "b": 2}),
    ({"_id": 1, "a": 1}, {}, {"_id": 1}),
    ({"_id": 1, "a": 1}, {"b": {"$x": 1}}, {"_id": 1, "b": {"$x": 1}}),
    ({"_id": 1, "a": 1}, {"_id": 2, "b": 2},
     (66, "After applying the update, the (immutable) field '_id' was found to have been "
          "altered to _id: 2")),
    ({"_id": 1}, {"_id": [1]}, (53, "The '_id' value cannot be of type array")),
]


@pytest.mark.parametrize("doc,update,expected", REPLACEMENT_CASES)
def test_replacement(doc, update, expected):
    check(doc, update, expected)


def test_replacement_same_is_unchanged():
    assert check({"_id": 1, "a": 1}, {"a": 1}, {"_id": 1, "a": 1}) is False


# ------------------------------------------------------------------- size

def test_result_too_large():
    big = "x" * (9 * 1024 * 1024)
    doc = {"_id": 1, "a": big}
    assert error(doc, {"$set": {"b": big}}) == (
        17419, "Resulting document after update is larger than 16777216")


# ---------------------------------------------------------------- upsert

def seed(f):
    return bson.decode(_core._upsert_seed(bson.encode(f)), OPTS)


@pytest.mark.parametrize("filt,expected", [
    ({"a": 1}, {"a": 1}),
    ({"a": {"$eq": 1}}, {"a": 1}),
    ({"a": {"$in": [1]}}, {"a": 1}),
    ({"a": {"$in": [1, 2]}}, {}),
    ({"a": {"$gt": 1}}, {}),
    ({"a": Regex("^x")}, {}),
    ({"$and": [{"a": 1}, {"b": {"$eq": 2}}]}, {"a": 1, "b": 2}),
    ({"$or": [{"a": 1}]}, {"a": 1}),
    ({"$or": [{"a": 1}, {"b": 1}]}, {}),
    ({"a.b": 1, "a.c": 2}, {"a": {"b": 1, "c": 2}}),
    ({"b": 1, "_id": 5}, S(("_id", 5), ("b", 1))),
    ({"a": {"x": 1}}, {"a": {"x": 1}}),
    ({"a": [1, 2]}, {"a": [1, 2]}),
])
def test_upsert_seed(filt, expected):
    assert typed(seed(filt)) == typed(expected)


@pytest.mark.parametrize("filt,msg", [
    ({"a": 1, "$and": [{"a": 2}]}, "cannot infer query fields to set, path 'a' is matched twice"),
    ({"a": 1, "a.b": 2}, "cannot infer query fields to set, both paths 'a.b' and 'a' are matched"),
    ({"a.b": 2, "a": 1}, "cannot infer query fields to set, both paths 'a.b' and 'a' are matched"),
])
def test_upsert_seed_conflicts(filt, msg):
    with pytest.raises(multifora.MultiforaError) as info:
        seed(filt)
    assert (info.value.code, str(info.value)) == (54, msg)


def test_upsert_flow():
    """What the command layer does: seed from the filter, then apply with
    is_insert."""
    s = seed({"_id": 3, "a": 1})
    got, _ = apply(s, {"$set": {"b": 2}, "$setOnInsert": {"c": 3}}, is_insert=True)
    assert typed(got) == typed(S(("_id", 3), ("a", 1), ("b", 2), ("c", 3)))
    assert error(s, {"$set": {"_id": 4}}, is_insert=True) == (
        66, "Performing an update on the path '_id' would modify the immutable field '_id'")


# ------------------------------------------------------- match position

@pytest.mark.parametrize("filt,doc,expected", [
    ({"a": 5}, {"a": [1, 5, 5]}, 1),
    ({"a": 5}, {"a": 5}, None),
    ({"a": [1, 2]}, {"a": [1, 2]}, None),
    ({"a.b": 1}, {"a": [{"b": 0}, {"b": 1}]}, 1),
    ({"a.b": 1}, {"a": {"b": [0, 0, 1]}}, 2),
    ({"a.b": {"$gt": 1}}, {"a": [{"b": [0]}, {"b": [1, 2]}]}, 1),
    ({"a": {"$elemMatch": {"x": 1, "y": 2}}}, {"a": [{"x": 1}, {"x": 1, "y": 2}]}, 1),
    ({"a": {"$elemMatch": {"$gt": 3}}}, {"a": [1, 4]}, 1),
    # each condition records its own position and the last one wins (mongod's
    # MatchDetails), which is why $elemMatch is the way to pin one element
    ({"a": {"$gte": 2, "$lt": 4}}, {"a": [1, 3]}, 0),
    ({"$or": [{"a": 9}, {"a": 3}]}, {"a": [1, 3]}, 1),
    ({"a": {"$ne": 1}}, {"a": [2, 3]}, None),
    ({"x": 1, "a": 3}, {"x": 1, "a": [1, 3]}, 1),
    ({"a": 7}, {"a": [1, 3]}, None),  # no match
])
def test_match_pos(filt, doc, expected):
    assert _core._match_pos(bson.encode(filt), bson.encode(doc)) == expected


def test_match_pos_agrees_with_match():
    cases = [({"a": 1}, {"a": [0, 1]}), ({"a.b": 2}, {"a": [{"b": 1}]}), ({"a": {"$size": 2}},
             {"a": [1, 2]})]
    for f, d in cases:
        matched = _core._match(bson.encode(f), bson.encode(d))
        pos = _core._match_pos(bson.encode(f), bson.encode(d))
        assert matched or pos is None
