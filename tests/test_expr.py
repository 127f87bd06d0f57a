"""Aggregation expressions (csrc/agg/expr.c) against mongod 7.0's documented
behaviour: results with their BSON number types, and errors with codes.

Each case is (expression, document, expected): expected is the value, MISSING
when the result is missing, or Err(code[, message]).
"""
import datetime

import bson
import pytest
from bson import Int64
from bson.codec_options import CodecOptions
from bson.son import SON

import multifora
from multifora import _core

if not hasattr(_core, "_expr"):
    pytest.skip("multifora._core has no _expr hook", allow_module_level=True)

OPTS = CodecOptions(document_class=SON)
MISSING = object()
UTC = datetime.timezone.utc


class Err:
    def __init__(self, code, msg=None):
        self.code, self.msg = code, msg

    def __repr__(self):
        return f"Err({self.code}, {self.msg!r})"


def typed(x):
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
    return (type(x).__name__, x)


def ev(expr, doc=None, now_ms=None):
    raw = _core._expr(bson.encode({"e": expr}), bson.encode(doc or {}),
                      now_ms or 0, now_ms is not None)
    out = bson.decode(raw, codec_options=OPTS)
    return out["r"] if "r" in out else MISSING


def check(expr, doc, expected):
    if isinstance(expected, Err):
        with pytest.raises(multifora.MultiforaError) as ei:
            ev(expr, doc)
        assert ei.value.code == expected.code, str(ei.value)
        if expected.msg is not None:
            assert str(ei.value) == expected.msg
        return
    got = ev(expr, doc)
    if expected is MISSING:
        assert got is MISSING
    else:
        assert got is not MISSING and typed(got) == typed(expected)


D = datetime.datetime(2014, 3, 1, 8, 0, tzinfo=UTC)
D_NAIVE = datetime.datetime(2014, 3, 1, 8, 0)

CASES = [
    # --- paths, variables, literals, object and array expressions
    ("$a", {"a": 1}, 1),
    ("$nope", {"a": 1}, MISSING),
    ("$a.b", {"a": {"b": "x"}}, "x"),
    ("$a.b", {"a": [{"b": 1}, {"c": 2}, {"b": [3]}, 5, [{"b": 9}]]}, [1, [3]]),
    ("$a.b.c", {"a": [{"b": [{"c": 1}, {"c": 2}]}, {"b": {"c": 3}}]}, [[1, 2], 3]),
    ("$a.0", {"a": [{"0": "k"}, 7]}, ["k"]),
    ("$a.b", {"a": 5}, MISSING),
    ("$$ROOT", {"a": 1}, {"a": 1}),
    ("$$CURRENT.a", {"a": 1}, 1),
    ("$$ROOT.a.b", {"a": [{"b": 1}]}, [1]),
    ("$$REMOVE", {"a": 1}, MISSING),
    ({"$literal": "$a"}, {"a": 1}, "$a"),
    ({"$literal": {"$add": [1]}}, {}, {"$add": [1]}),
    ({"x": "$a", "y": "$nope", "z": {"w": 1}}, {"a": 2}, {"x": 2, "z": {"w": 1}}),
    (["$a", "$nope", 3], {"a": 2}, [2, None, 3]),
    ({"$let": {"vars": {"low": 1, "high": "$a"}, "in": {"$gt": ["$$low", "$$high"]}}},
     {"a": 0}, True),
    ({"$let": {"vars": {"total": {"$add": ["$price", "$tax"]}, "discounted": {
        "$cond": {"if": "$applyDiscount", "then": 0.9, "else": 1}}},
        "in": {"$multiply": ["$$total", "$$discounted"]}}},
     {"price": 10, "tax": 0.5, "applyDiscount": True}, 9.450000000000001),
    ({"$let": {"vars": {"x": {"a": [{"b": 1}, {"b": 2}]}}, "in": "$$x.a.b"}}, {}, [1, 2]),
    ({"$let": {"vars": {"x": 1}, "in": {"$let": {"vars": {"x": {"$add": ["$$x", 1]}},
                                                  "in": "$$x"}}}}, {}, 2),
    ("$$nope", {}, Err(17276, "Use of undefined variable: nope")),
    ({"$let": {"vars": {"x": 1}, "in": "$$y"}}, {}, Err(17276)),
    ({"$let": {"vars": {"Bad": 1}, "in": 1}}, {}, Err(16867)),
    ({"$let": {"vars": {}}}, {}, Err(16877, "Missing 'in' parameter to $let")),
    ({"$let": {"in": 1}}, {}, Err(16876, "Missing 'vars' parameter to $let")),
    ({"$foo": 1}, {}, Err(168, "Unrecognized expression '$foo'")),
    ({"$add": [1], "b": 2}, {}, Err(15983)),
    ("$", {}, Err(16872)),
    # --- arithmetic
    ({"$add": ["$price", "$fee"]}, {"price": 10, "fee": 2}, 12),
    ({"$add": ["$price", "$fee"]}, {"price": Int64(10), "fee": 2}, Int64(12)),
    ({"$add": [1, 2.5]}, {}, 3.5),
    ({"$add": [2147483647, 1]}, {}, Int64(2147483648)),
    ({"$add": [Int64(9223372036854775807), 1]}, {}, 9.223372036854776e18),
    ({"$add": []}, {}, 0),
    ({"$add": ["$date", 3 * 24 * 60 * 60000]}, {"date": D}, D_NAIVE + datetime.timedelta(days=3)),
    ({"$add": ["$date", 1.6]}, {"date": D}, D_NAIVE + datetime.timedelta(milliseconds=2)),
    ({"$add": [1, None]}, {}, None),
    ({"$add": [1, "$nope"]}, {}, None),
    ({"$add": [1, "a"]}, {}, Err(14, "$add only supports numeric or date types, not string")),
    ({"$add": ["$d", "$d"]}, {"d": D}, Err(16612, "only one date allowed in an $add expression")),
    ({"$add": [1, bson.Decimal128("1")]}, {}, Err(238)),
    ({"$subtract": [5, 3]}, {}, 2),
    ({"$subtract": [Int64(5), 3]}, {}, Int64(2)),
    ({"$subtract": [-2147483648, 1]}, {}, Int64(-2147483649)),
    ({"$subtract": [5, 0.5]}, {}, 4.5),
    ({"$subtract": ["$d", "$d"]}, {"d": D}, Int64(0)),
    ({"$subtract": ["$d", 5 * 60 * 1000]}, {"d": D},
     D_NAIVE - datetime.timedelta(minutes=5)),
    ({"$subtract": [1, "$d"]}, {"d": D}, Err(16556, "cant $subtract adate from a int")),
    ({"$subtract": ["$d", "x"]}, {"d": D}, Err(16613, "cant $subtract a string from a Date")),
    ({"$subtract": [None, "x"]}, {}, None),
    ({"$subtract": [1]}, {}, Err(16020, "Expression $subtract takes exactly 2 arguments. 1 were "
                                 "passed in.")),
    ({"$multiply": ["$price", "$quantity"]}, {"price": 10, "quantity": 2}, 20),
    ({"$multiply": [65536, 65536]}, {}, Int64(4294967296)),
    ({"$multiply": [Int64(2), 3]}, {}, Int64(6)),
    ({"$multiply": [2, 1.5]}, {}, 3.0),
    ({"$multiply": [Int64(4611686018427387904), 4]}, {}, 1.8446744073709552e19),
    ({"$multiply": []}, {}, 1),
    ({"$multiply": [2, "x"]}, {}, Err(16555, "$multiply only supports numeric types, not string")),
    ({"$divide": ["$hours", 8]}, {"hours": 80}, 10.0),
    ({"$divide": [1, 0]}, {}, Err(16608, "can't $divide by zero")),
    ({"$divide": [1, "$nope"]}, {}, None),
    ({"$divide": ["a", 1]}, {}, Err(16609, "$divide only supports numeric types, not string and int")),
    ({"$mod": ["$hours", "$tasks"]}, {"hours": 80, "tasks": 7}, 3),
    ({"$mod": [-5, 3]}, {}, -2),
    ({"$mod": [Int64(10), 3]}, {}, Int64(1)),
    ({"$mod": [10, 3.0]}, {}, 1),
    ({"$mod": [10, 2.5]}, {}, 0.0),
    ({"$mod": [10.5, 3]}, {}, 1.5),
    ({"$mod": [-2147483648, -1]}, {}, 0),
    ({"$mod": [1, 0]}, {}, Err(16610, "can't $mod by zero")),
    ({"$mod": ["a", 0]}, {}, Err(16611, "$mod only supports numeric types, not string and int")),
    ({"$abs": -5}, {}, 5),
    ({"$abs": -2147483648}, {}, Int64(2147483648)),
    ({"$abs": Int64(-5)}, {}, Int64(5)),
    ({"$abs": -1.5}, {}, 1.5),
    ({"$abs": None}, {}, None),
    ({"$abs": Int64(-9223372036854775808)}, {}, Err(28680, "can't take $abs of long long min")),
    ({"$abs": "x"}, {}, Err(28765, "$abs only supports numeric types, not string")),
    ({"$abs": [1, 2]}, {}, Err(16020, "Expression $abs takes exactly 1 arguments. 2 were passed in.")),
    ({"$ceil": 7.80}, {}, 8.0),
    ({"$ceil": -2.8}, {}, -2.0),
    ({"$ceil": 1}, {}, 1),
    ({"$floor": -2.8}, {}, -3.0),
    ({"$floor": Int64(5)}, {}, Int64(5)),
    ({"$floor": "$nope"}, {}, None),
    ({"$sqrt": 25}, {}, 5.0),
    ({"$sqrt": -1}, {}, Err(28714, "$sqrt's argument must be greater than or equal to 0")),
    ({"$exp": 0}, {}, 1.0),
    ({"$ln": 1}, {}, 0.0),
    ({"$ln": -1}, {}, Err(28766, "$ln's argument must be a positive number, but is -1")),
    ({"$log10": 100}, {}, 2.0),
    ({"$log10": 0}, {}, Err(28761, "$log10's argument must be a positive number, but is 0")),
    ({"$log": [100, 10]}, {}, 2.0),
    ({"$log": [8, 1]}, {}, Err(28759, "$log's base must be a positive number not equal to 1, "
                               "but is 1")),
    ({"$log": ["a", 2]}, {}, Err(28756, "$log's argument must be numeric, not string")),
    ({"$pow": [5, 2]}, {}, 25),
    ({"$pow": [2, 31]}, {}, Int64(2147483648)),
    ({"$pow": [Int64(2), 3]}, {}, Int64(8)),
    ({"$pow": [2, 64]}, {}, 1.8446744073709552e19),
    ({"$pow": [2, -1]}, {}, 0.5),
    ({"$pow": [-1, -3]}, {}, -1),
    ({"$pow": [2.0, 2]}, {}, 4.0),
    ({"$pow": [0, -1]}, {}, Err(28764, "$pow cannot take a base of 0 and a negative exponent")),
    ({"$pow": ["a", 1]}, {}, Err(28762, "$pow's base must be numeric, not string")),
    # --- comparison, boolean, conditional
    ({"$eq": ["$qty", 250]}, {"qty": 250}, True),
    ({"$eq": [1, 1.0]}, {}, True),
    ({"$eq": ["$nope", None]}, {}, False),
    ({"$lt": ["$nope", None]}, {}, True),
    ({"$ne": ["a", "b"]}, {}, True),
    ({"$gt": ["a", 5]}, {}, True),
    ({"$gte": [5, Int64(5)]}, {}, True),
    ({"$lte": [[1], [2]]}, {}, True),
    ({"$cmp": ["$qty", 250]}, {"qty": 300}, 1),
    ({"$cmp": ["a", "b"]}, {}, -1),
    ({"$cmp": [{"a": 1}, {"a": 1}]}, {}, 0),
    ({"$eq": [1]}, {}, Err(16020)),
    ({"$and": [1, "green"]}, {}, True),
    ({"$and": []}, {}, True),
    ({"$and": [[None], [False], [0]]}, {}, True),
    ({"$and": [None, True]}, {}, False),
    ({"$and": [0, True]}, {}, False),
    ({"$and": [False, {"$divide": [1, 0]}]}, {}, False),
    ({"$or": [True, False]}, {}, True),
    ({"$or": [[False], False]}, {}, True),
    ({"$or": [None, 0, "$nope"]}, {}, False),
    ({"$or": []}, {}, False),
    ({"$not": [True]}, {}, False),
    ({"$not": [[False]]}, {}, False),
    ({"$not": [None]}, {}, True),
    ({"$not": 0}, {}, True),
    ({"$cond": {"if": {"$gte": ["$qty", 250]}, "then": 30, "else": 20}}, {"qty": 300}, 30),
    ({"$cond": [{"$gte": ["$qty", 250]}, 30, 20]}, {"qty": 5}, 20),
    ({"$cond": {"if": 1, "then": "$nope", "else": 1}}, {}, MISSING),
    ({"$cond": {"if": 1, "then": 2}}, {}, Err(17082, "Missing 'else' parameter to $cond")),
    ({"$cond": {"if": 1, "then": 2, "else": 3, "x": 1}}, {}, Err(17083)),
    ({"$cond": [1, 2]}, {}, Err(16020)),
    ({"$ifNull": ["$description", "Unspecified"]}, {}, "Unspecified"),
    ({"$ifNull": ["$description", "Unspecified"]}, {"description": "x"}, "x"),
    ({"$ifNull": ["$a", "$b", "c"]}, {"a": None, "b": 2}, 2),
    ({"$ifNull": ["$a", "$b"]}, {}, MISSING),
    ({"$ifNull": ["$a"]}, {}, Err(1257300)),
    ({"$switch": {"branches": [{"case": {"$gte": ["$s", 90]}, "then": "A"},
                               {"case": {"$gte": ["$s", 80]}, "then": "B"}],
                  "default": "F"}}, {"s": 85}, "B"),
    ({"$switch": {"branches": [{"case": False, "then": 1}], "default": "F"}}, {}, "F"),
    ({"$switch": {"branches": [{"case": False, "then": 1}]}}, {},
     Err(40066, "$switch could not find a matching branch for an input, and no default was "
         "specified.")),
    ({"$switch": {"branches": [{"case": True}]}}, {}, Err(40065)),
    ({"$switch": 1}, {}, Err(40060)),
]


@pytest.mark.parametrize("expr,doc,expected", CASES, ids=[str(i) for i in range(len(CASES))])
def test_expr(expr, doc, expected):
    check(expr, doc, expected)

STRING_CASES = [
    ({"$concat": ["$item", " - ", "$description"]}, {"item": "ABC1", "description": "product 1"},
     "ABC1 - product 1"),
    ({"$concat": []}, {}, ""),
    ({"$concat": ["a", None]}, {}, None),
    ({"$concat": ["a", "$nope"]}, {}, None),
    ({"$concat": ["a", 1]}, {}, Err(16702, "$concat only supports strings, not int")),
    ({"$toUpper": "$item"}, {"item": "abc1"}, "ABC1"),
    ({"$toLower": "$description"}, {"description": "PRODUCT 1"}, "product 1"),
    ({"$toUpper": "$nope"}, {}, ""),
    ({"$toUpper": None}, {}, ""),
    ({"$toUpper": 12}, {}, "12"),
    ({"$toLower": Int64(-5)}, {}, "-5"),
    ({"$toUpper": "caf\u00e9"}, {}, "CAF\u00e9"),
    ({"$toUpper": "$d"}, {"d": D}, "2014-03-01T08:00:00.000Z"),
    ({"$toUpper": [[1]]}, {}, Err(16007, "can't convert from BSON type array to String")),
    ({"$toLower": {"a": 1}}, {}, Err(16007, "can't convert from BSON type object to String")),
    ({"$toUpper": ["a", "b"]}, {}, Err(16020)),
    ({"$strLenBytes": "abcde"}, {}, 5),
    ({"$strLenBytes": "cafet\u00e9ria"}, {}, 10),
    ({"$strLenBytes": "\u5927\u5bcc\u4e16"}, {}, 9),
    ({"$strLenBytes": ""}, {}, 0),
    ({"$strLenBytes": 1}, {}, Err(34473, "$strLenBytes requires a string argument, found: int")),
    ({"$strLenBytes": "$nope"}, {}, Err(34473, "$strLenBytes requires a string argument, found: "
                                        "missing")),
    ({"$strLenCP": "cafet\u00e9ria"}, {}, 9),
    ({"$strLenCP": "\u5927\u5bcc\u4e16"}, {}, 3),
    ({"$strLenCP": "abc"}, {}, 3),
    ({"$strLenCP": None}, {}, Err(34471, "$strLenCP requires a string argument, found: null")),
    ({"$substrBytes": ["$quarter", 0, 2]}, {"quarter": "Q1.2023"}, "Q1"),
    ({"$substrBytes": ["$quarter", 2, -1]}, {"quarter": "Q1.2023"}, ".2023"),
    ({"$substrBytes": ["abc", 5, 1]}, {}, ""),
    ({"$substrBytes": ["abc", 1.9, 1]}, {}, "b"),
    ({"$substrBytes": ["$nope", 0, 1]}, {}, ""),
    ({"$substrBytes": [12345, 1, 2]}, {}, "23"),
    ({"$substrBytes": ["cafet\u00e9ria", 0, 5]}, {}, "cafet"),
    ({"$substrBytes": ["cafet\u00e9ria", 5, 2]}, {}, "\u00e9"),
    ({"$substrBytes": ["cafet\u00e9ria", 6, 1]}, {},
     Err(28656, "$substrBytes:  Invalid range, starting index is a UTF-8 continuation byte.")),
    ({"$substrBytes": ["cafet\u00e9ria", 5, 1]}, {},
     Err(28657, "$substrBytes:  Invalid range, ending index is in the middle of a UTF-8 "
         "character.")),
    ({"$substrBytes": ["abc", "a", 1]}, {},
     Err(16034, "$substrBytes: starting index must be a numeric type (is BSON type string)")),
    ({"$substrBytes": ["abc", 0, None]}, {},
     Err(16035, "$substrBytes: length must be a numeric type (is BSON type null)")),
    ({"$substrBytes": ["abc", -1, 1]}, {},
     Err(50752, "$substrBytes: starting index must be non-negative (got: -1)")),
    ({"$substrBytes": ["abc", 0]}, {}, Err(16020)),
    ({"$substrCP": ["$quarter", 0, 2]}, {"quarter": "Q1.2023"}, "Q1"),
    ({"$substrCP": ["$name", 0, 3]}, {"name": "\u5927\u5bcc\u4e16"}, "\u5927\u5bcc\u4e16"),
    ({"$substrCP": ["cafet\u00e9ria", 5, 4]}, {}, "\u00e9ria"),
    ({"$substrCP": ["abc", 5, 1]}, {}, ""),
    ({"$substrCP": ["abc", 1, 100]}, {}, "bc"),
    ({"$substrCP": ["$nope", 0, 1]}, {}, ""),
    ({"$substrCP": ["abc", "x", 1]}, {},
     Err(34450, "$substrCP: starting index must be a numeric type (is BSON type string)")),
    ({"$substrCP": ["abc", 1.5, 1]}, {},
     Err(34451, "$substrCP: starting index cannot be represented as a 32-bit integral value: "
         "1.5")),
    ({"$substrCP": ["abc", 0, "x"]}, {},
     Err(34452, "$substrCP: length must be a numeric type (is BSON type string)")),
    ({"$substrCP": ["abc", 0, 0.5]}, {},
     Err(34453, "$substrCP: length cannot be represented as a 32-bit integral value: 0.5")),
    ({"$substrCP": ["abc", 0, -1]}, {},
     Err(34454, "$substrCP: length must be a nonnegative integer.")),
    ({"$substrCP": ["abc", -1, 1]}, {},
     Err(34455, "$substrCP: the starting index must be nonnegative integer.")),
    ({"$split": ["$city", ", "]}, {"city": "Berkeley, CA"}, ["Berkeley", "CA"]),
    ({"$split": ["June-15-2013", "-"]}, {}, ["June", "15", "2013"]),
    ({"$split": ["banana split", "a"]}, {}, ["b", "n", "n", " split"]),
    ({"$split": ["Hello World", " "]}, {}, ["Hello", "World"]),
    ({"$split": ["astronomical", "astro"]}, {}, ["", "nomical"]),
    ({"$split": ["pea green boat", "owl"]}, {}, ["pea green boat"]),
    ({"$split": ["a,b,", ","]}, {}, ["a", "b", ""]),
    ({"$split": ["headphone jack", 7]}, {},
     Err(40086, "$split requires an expression that evaluates to a string as a second "
         "argument, found: int")),
    ({"$split": ["headphone jack", "$nope"]}, {}, None),
    ({"$split": [None, "a"]}, {}, None),
    ({"$split": [1, "a"]}, {},
     Err(40085, "$split requires an expression that evaluates to a string as a first argument, "
         "found: int")),
    ({"$split": ["abc", ""]}, {}, Err(40087, "$split requires a non-empty separator")),
    ({"$trim": {"input": " \n good  bye \t "}}, {}, "good  bye"),
    ({"$trim": {"input": "$d"}}, {"d": " \u00a0\u2003x\u3000\u0000"}, "x"),
    ({"$ltrim": {"input": "  \n good  bye \t "}}, {}, "good  bye \t "),
    ({"$rtrim": {"input": "  \n good  bye \t "}}, {}, "  \n good  bye"),
    ({"$trim": {"input": "ggggoodbyeeeee", "chars": "ge"}}, {}, "oodby"),
    ({"$ltrim": {"input": "ggggoodbyeeeee", "chars": "ge"}}, {}, "oodbyeeeee"),
    ({"$rtrim": {"input": "ggggoodbyeeeee", "chars": "ye"}}, {}, "ggggoodb"),
    ({"$trim": {"input": " ggggoodbyeeeee", "chars": "ge"}}, {}, " ggggoodby"),
    ({"$trim": {"input": "\u00e9a\u00e9", "chars": "\u00e9"}}, {}, "a"),
    ({"$trim": {"input": "xx", "chars": "x"}}, {}, ""),
    ({"$trim": {"input": "abc", "chars": ""}}, {}, "abc"),
    ({"$trim": {"input": None}}, {}, None),
    ({"$trim": {"input": "$nope"}}, {}, None),
    ({"$trim": {"input": "a", "chars": None}}, {}, None),
    ({"$trim": {"input": 1}}, {},
     Err(50699, "$trim requires its input to be a string, got 1 (of type int) instead.")),
    ({"$ltrim": {"input": "a", "chars": 2}}, {},
     Err(50700, "$ltrim requires 'chars' to be a string, got 2 (of type int) instead.")),
    ({"$trim": {"chars": "a"}}, {}, Err(50695, "$trim requires an 'input' field")),
    ({"$trim": {"input": "a", "x": 1}}, {}, Err(50694, "$trim found an unknown argument: x")),
    ({"$rtrim": ["a"]}, {},
     Err(50696, "$rtrim only supports an object as an argument, found: array")),
    ({"$indexOfCP": ["cafeteria", "e"]}, {}, 3),
    ({"$indexOfCP": ["cafet\u00e9ria", "\u00e9"]}, {}, 5),
    ({"$indexOfCP": ["cafet\u00e9ria", "e"]}, {}, 3),
    ({"$indexOfCP": ["cafet\u00e9ria", "ria"]}, {}, 6),
    ({"$indexOfCP": ["foo.bar.fi", ".", 5]}, {}, 7),
    ({"$indexOfCP": ["vanilla", "ll", 0, 2]}, {}, -1),
    ({"$indexOfCP": ["vanilla", "ll", -1]}, {},
     Err(40097, "$indexOfCP requires a nonnegative starting index, found: -1")),
    ({"$indexOfCP": ["vanilla", "ll", 12]}, {}, -1),
    ({"$indexOfCP": ["vanilla", "ll", 5, 2]}, {}, -1),
    ({"$indexOfCP": ["vanilla", "nilla", 3]}, {}, -1),
    ({"$indexOfCP": ["vanilla", "nilla", 0, 3]}, {}, 2),
    ({"$indexOfCP": [None, "foo"]}, {}, None),
    ({"$indexOfCP": ["abc", ""]}, {}, 0),
    ({"$indexOfCP": ["abc", "", 3]}, {}, 3),
    ({"$indexOfCP": ["abc", "", 4]}, {}, -1),
    ({"$indexOfCP": ["abc", "b", 1.0]}, {}, 1),
    ({"$indexOfCP": ["abc", "b", 1.5]}, {},
     Err(40096, "$indexOfCP requires an integral starting index, found a value of type: "
         "double, with value: 1.5")),
    ({"$indexOfCP": ["abc", "b", 0, "x"]}, {},
     Err(40096, "$indexOfCP requires an integral ending index, found a value of type: string, "
         "with value: \"x\"")),
    ({"$indexOfCP": [1, "b"]}, {},
     Err(40093, "$indexOfCP requires a string as the first argument, found: int")),
    ({"$indexOfCP": ["abc", None]}, {},
     Err(40094, "$indexOfCP requires a string as the second argument, found: null")),
    ({"$indexOfCP": ["abc"]}, {}, Err(16020)),
    ({"$strcasecmp": ["$quarter", "13q4"]}, {"quarter": "13Q1"}, -1),
    ({"$strcasecmp": ["$quarter", "13q4"]}, {"quarter": "13Q4"}, 0),
    ({"$strcasecmp": ["$quarter", "13q4"]}, {"quarter": "14Q2"}, 1),
    ({"$strcasecmp": ["abc", "ab"]}, {}, 1),
    ({"$strcasecmp": [None, ""]}, {}, 0),
    ({"$strcasecmp": [1, "1"]}, {}, 0),
    ({"$replaceOne": {"input": "$item", "find": "blue paint", "replacement": "red paint"}},
     {"item": "blue paint with blue paintbrush"}, "red paint with blue paintbrush"),
    ({"$replaceAll": {"input": "$item", "find": "blue paint", "replacement": "red paint"}},
     {"item": "blue paint with blue paintbrush"}, "red paint with red paintbrush"),
    ({"$replaceOne": {"input": "$item", "find": "blue paint", "replacement": "red paint"}},
     {"item": "blue and green paint"}, "blue and green paint"),
    ({"$replaceAll": {"input": "aaa", "find": "aa", "replacement": "b"}}, {}, "ba"),
    ({"$replaceOne": {"input": "abc", "find": "", "replacement": "x"}}, {}, "xabc"),
    ({"$replaceAll": {"input": None, "find": "a", "replacement": "b"}}, {}, None),
    ({"$replaceAll": {"input": "a", "find": "$nope", "replacement": "b"}}, {}, None),
    ({"$replaceOne": {"input": 1, "find": "a", "replacement": "b"}}, {},
     Err(51746, "$replaceOne requires that 'input' be a string, found: 1")),
    ({"$replaceAll": {"input": "a", "find": 2, "replacement": "b"}}, {},
     Err(51745, "$replaceAll requires that 'find' be a string, found: 2")),
    ({"$replaceAll": {"input": None, "find": "a", "replacement": 3}}, {},
     Err(51744, "$replaceAll requires that 'replacement' be a string, found: 3")),
    ({"$replaceOne": {"find": "a", "replacement": "b"}}, {},
     Err(51749, "$replaceOne requires 'input' to be specified")),
    ({"$replaceOne": {"input": "a", "replacement": "b"}}, {},
     Err(51748, "$replaceOne requires 'find' to be specified")),
    ({"$replaceAll": {"input": "a", "find": "b"}}, {},
     Err(51747, "$replaceAll requires 'replacement' to be specified")),
    ({"$replaceAll": {"input": "a", "find": "b", "replacement": "c", "x": 1}}, {},
     Err(51750, "$replaceAll found an unknown argument: x")),
    ({"$replaceOne": "a"}, {},
     Err(51751, "$replaceOne requires an object as an argument, found: string")),
]


@pytest.mark.parametrize("expr,doc,expected", STRING_CASES,
                         ids=[str(i) for i in range(len(STRING_CASES))])
def test_string(expr, doc, expected):
    check(expr, doc, expected)


def test_now():
    got = ev("$$NOW", {}, now_ms=1700000000123)
    assert got == datetime.datetime(2023, 11, 14, 22, 13, 20, 123000)
    assert ev({"$add": ["$$NOW", 1]}, {}, now_ms=0) == datetime.datetime(1970, 1, 1, 0, 0, 0, 1000)
