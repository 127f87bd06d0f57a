"""find projections (csrc/query/project.c) against mongod 7.0's behaviour.

Expected results follow mongod's own tests of the semantics
(jstests/core/projection_semantics.js, positional_projection.js, the
$slice / $elemMatch projection docs) and its parser's error codes
(src/mongo/db/query/projection_parser.cpp, pipeline/field_path.cpp).

Each case goes through ``_core._project(spec, filter, doc, pos)``; ``pos``
stands for the matcher's elemMatchKey (the index of the array element
through which the filter matched, -1 for none).
"""
import bson
import pytest
from bson import Decimal128, Int64, SON
from bson.codec_options import CodecOptions

import multifora
from multifora import _core

OPTS = CodecOptions(document_class=SON)


def project(spec, doc, filt=None, pos=-1):
    raw = _core._project(bson.encode(spec), None if filt is None else bson.encode(filt),
                         bson.encode(doc), pos)
    return bson.decode(raw, OPTS)


def error(spec, doc=None, filt=None, pos=-1):
    with pytest.raises(multifora.MultiforaError) as info:
        project(spec, doc if doc is not None else {"_id": 1}, filt, pos)
    return info.value


def same(a, b):
    """Equal including field order, recursively (SON and dict compare
    unordered)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a.keys()) == list(b.keys()) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def S(*pairs):
    """An ordered document."""
    return SON(list(pairs))


# ------------------------------------------------------------ inclusion

INCLUSION = [
    # top-level, _id included by default, document order kept
    ({"a": 1}, S(("_id", 1), ("a", "demo"), ("b", "other")), S(("_id", 1), ("a", "demo"))),
    ({"a": 1}, S(("b", 1), ("a", 2), ("_id", 3)), S(("a", 2), ("_id", 3))),
    ({"a": 1}, S(("_id", 1), ("b", 2)), S(("_id", 1))),
    ({"a": 1, "_id": 0}, S(("_id", 1), ("a", None)), S(("a", None))),
    ({"a": 1, "_id": 0}, S(("_id", 1), ("a", [[1, 2], [{}], 2])), S(("a", [[1, 2], [{}], 2]))),
    ({"a": 1, "_id": 0}, S(("_id", 1), ("b", 1)), S()),
    ({"_id": 1}, S(("_id", 7), ("a", 1)), S(("_id", 7))),
    ({"b": 1, "a": 1}, S(("a", 1), ("b", 2), ("c", 3)), S(("a", 1), ("b", 2))),
    # truthy values of every inclusion type
    ({"a": True, "_id": 0}, S(("a", 1), ("b", 2)), S(("a", 1))),
    ({"a": 2.5, "_id": 0}, S(("a", 1), ("b", 2)), S(("a", 1))),
    ({"a": -1, "_id": 0}, S(("a", 1), ("b", 2)), S(("a", 1))),
    ({"a": Int64(5), "_id": 0}, S(("a", 1), ("b", 2)), S(("a", 1))),
    ({"a": Decimal128("0.1"), "_id": 0}, S(("a", 1), ("b", 2)), S(("a", 1))),
    ({"a": float("nan"), "_id": 0}, S(("a", 1), ("b", 2)), S(("a", 1))),
    # dotted paths
    ({"a.b": 1, "_id": 0}, {"a": {"b": "demo", "y": "extra"}, "x": 1}, {"a": {"b": "demo"}}),
    ({"a.b": 1, "_id": 0}, {"a": {"b": "demo", "_id": "x"}}, {"a": {"b": "demo"}}),
    ({"a.b": 1, "_id": 0}, {"a": [{"b": 1, "c": 1}, {"c": 2}]}, {"a": [{"b": 1}, {}]}),
    ({"a.b": 1, "_id": 0}, {"a": {}}, {"a": {}}),
    ({"a.b": 1, "_id": 0}, {"a": "scalar"}, {}),
    ({"a.b": 1, "_id": 0}, {"a": []}, {"a": []}),
    ({"a.b": 1, "_id": 0}, {"a": ["scalar", "scalar"]}, {"a": []}),
    ({"a.b": 1, "_id": 0}, {"a": [None]}, {"a": []}),
    ({"a.b": 1, "_id": 0}, {"a": ["s", {}, "s", {"c": 1}]}, {"a": [{}, {}]}),
    ({"a.b": 1, "_id": 0}, {"a": [[]]}, {"a": [[]]}),
    ({"a.b": 1, "_id": 0}, {"a": [[1, 2, 3]]}, {"a": [[]]}),
    ({"a.b": 1, "_id": 0}, {"a": [[1, {"b": 1}, {"b": 2, "c": 2}, "s"]]},
     {"a": [[{"b": 1}, {"b": 2}]]}),
    ({"a.b": 1, "_id": 0},
     {"a": [["x", {"b": 1}, {"b": 2, "c": 2}, "x"], [[{"b": 1}]], [{"b": 1}, [{"b": 2}], [[{"b": [2]}]]]]},
     {"a": [[{"b": 1}, {"b": 2}], [[{"b": 1}]], [{"b": 1}, [{"b": 2}], [[{"b": [2]}]]]]}),
    ({"a.b": 1, "a.c": 1, "_id": 0}, {"a": [{"b": 1, "c": 2, "d": 3}, "x", {"b": 4}]},
     {"a": [{"b": 1, "c": 2}, {"b": 4}]}),
    ({"a.b.c": 1, "_id": 0}, {"a": {"b": "scalar"}}, {"a": {}}),
    ({"a.b.c": 1, "_id": 0}, {"a": {"b": {"x": 1, "y": 1}}}, {"a": {"b": {}}}),
    ({"a.b.c": 1, "_id": 0}, {"a": [1, {"b": [[1, 2], [{}], 2]}, 2]}, {"a": [{"b": [[], [{}]]}]}),
    ({"a.b.c": 1, "_id": 0},
     {"a": [[1, 2], [{"b": [[1, 2], [{"c": [[1, 2], [{}], 2]}], 2]}], 2]},
     {"a": [[], [{"b": [[], [{"c": [[1, 2], [{}], 2]}]]}]]}),
    ({"a.b.c": 1, "_id": 0}, {"a": [[], [[], [], [1], [{"x": 1}]], {"b": 1}]},
     {"a": [[], [[], [], [], [{}]], {}]}),
    # sub-objects mean the same as dotted paths, and merge with them
    ({"m": {"t": 1, "p": 1}, "_id": 0}, {"m": {"t": 20, "p": 0.7, "h": 0.4}}, {"m": {"t": 20, "p": 0.7}}),
    ({"a.b": 1, "a": {"c": 1}, "_id": 0}, {"a": {"c": 1, "b": 2, "d": 3}}, S(("a", S(("c", 1), ("b", 2))))),
    # _id sub-paths: _id not auto-included
    ({"_id.a": 1}, {"_id": {"a": 1, "b": 2}, "x": 1}, {"_id": {"a": 1}}),
]


@pytest.mark.parametrize("spec,doc,want", INCLUSION)
def test_inclusion(spec, doc, want):
    got = project(spec, doc)
    assert same(got, bson.decode(bson.encode(want), OPTS)), got


# ------------------------------------------------------------ exclusion

EXCLUSION = [
    ({}, S(("_id", 1), ("a", 1)), S(("_id", 1), ("a", 1))),
    ({"a": 0}, S(("_id", 1), ("a", 1), ("b", 1), ("c", 1)), S(("_id", 1), ("b", 1), ("c", 1))),
    ({"a": False, "b": 0.0}, S(("_id", 1), ("a", 1), ("b", 1), ("c", 1)), S(("_id", 1), ("c", 1))),
    ({"_id": 0}, S(("_id", 1), ("a", 1), ("b", 1)), S(("a", 1), ("b", 1))),
    ({"_id": 0}, S(("_id", 1)), S()),
    ({"_id": 1, "a": 0}, S(("_id", 1), ("a", 1), ("b", 2)), S(("_id", 1), ("b", 2))),
    ({"a": 0, "_id": 1}, S(("_id", 1), ("a", 1), ("b", 2)), S(("_id", 1), ("b", 2))),
    ({"a.b": 0}, {"_id": 1, "a": {"b": 1, "c": 1, "d": 1}, "x": {"y": 1}},
     {"_id": 1, "a": {"c": 1, "d": 1}, "x": {"y": 1}}),
    ({"a.b": 0}, {"_id": 1, "a": ["scalar", {"b": 1, "c": 1}, {"b": 2, "c": 2}, {"b": 3}]},
     {"_id": 1, "a": ["scalar", {"c": 1}, {"c": 2}, {}]}),
    ({"a.b": 0, "a.c": 0}, {"_id": 1, "a": [{"b": 1, "c": 1, "d": 1}, {"b": 2, "c": 2}]},
     {"_id": 1, "a": [{"d": 1}, {}]}),
    ({"a.b": 0}, {"_id": 1, "a": []}, {"_id": 1, "a": []}),
    ({"a.b.c": 0}, {"_id": 1, "a": [[], [{"b": [[1, 2], {"c": 1, "d": 1}]}]]},
     {"_id": 1, "a": [[], [{"b": [[1, 2], {"d": 1}]}]]}),
    ({"a.b": 0}, {"_id": 1, "a": 5}, {"_id": 1, "a": 5}),
    ({"m": {"h": 0, "t": 0}, "_id": 0}, {"m": {"t": 20, "p": 0.7, "h": 0.4}}, {"m": {"p": 0.7}}),
]


@pytest.mark.parametrize("spec,doc,want", EXCLUSION)
def test_exclusion(spec, doc, want):
    got = project(spec, doc)
    assert same(got, bson.decode(bson.encode(want), OPTS)), got


# ---------------------------------------------------------------- $slice

ARR = list(range(1, 6))

SLICE = [
    ({"a": {"$slice": 2}}, [1, 2]),
    ({"a": {"$slice": -2}}, [4, 5]),
    ({"a": {"$slice": 0}}, []),
    ({"a": {"$slice": 10}}, ARR),
    ({"a": {"$slice": -10}}, ARR),
    ({"a": {"$slice": 2.9}}, [1, 2]),             # numberInt truncates
    ({"a": {"$slice": Int64(3)}}, [1, 2, 3]),
    ({"a": {"$slice": [1, 2]}}, [2, 3]),
    ({"a": {"$slice": [-2, 1]}}, [4]),
    ({"a": {"$slice": [-10, 2]}}, [1, 2]),
    ({"a": {"$slice": [10, 2]}}, []),
    ({"a": {"$slice": [3, 10]}}, [4, 5]),
]


@pytest.mark.parametrize("spec,want", SLICE)
def test_slice(spec, want):
    got = project(spec, S(("_id", 1), ("a", ARR), ("b", 2)))
    # $slice alone is an exclusion projection: the other fields stay.
    assert same(got, S(("_id", 1), ("a", want), ("b", 2))), got


def test_slice_types_and_modes():
    doc = S(("_id", 1), ("a", ARR), ("b", 2), ("c", "x"))
    # with {_id: 1} or another inclusion: an inclusion projection
    assert same(project({"_id": 1, "a": {"$slice": 1}}, doc), S(("_id", 1), ("a", [1])))
    assert same(project({"a": {"$slice": 1}, "c": 1}, doc), S(("_id", 1), ("a", [1]), ("c", "x")))
    # with an exclusion
    assert same(project({"a": {"$slice": -1}, "b": 0}, doc), S(("_id", 1), ("a", [5]), ("c", "x")))
    assert same(project({"_id": 0, "a": {"$slice": 1}}, doc), S(("a", [1]), ("b", 2), ("c", "x")))
    # not an array: unchanged
    assert same(project({"b": {"$slice": 1}}, doc), doc)
    # through documents and arrays of documents, not arrays in arrays
    d = {"_id": 1, "x": {"y": [1, 2, 3]}, "a": [{"b": [1, 2]}, 7, [{"b": [1, 2]}]]}
    assert project({"x.y": {"$slice": 1}}, d) == {"_id": 1, "x": {"y": [1]}, "a": d["a"]}
    assert project({"a.b": {"$slice": 1}}, d) == {
        "_id": 1, "x": {"y": [1, 2, 3]}, "a": [{"b": [1]}, 7, [{"b": [1, 2]}]]}
    assert project({"a.b": {"$slice": 1}, "_id": 0, "z": 1}, d) == {
        "a": [{"b": [1]}, [{"b": [1, 2]}]]}


SLICE_ERRORS = [
    ({"a": {"$slice": "x"}}, 28667,
     'Invalid $slice syntax. The given syntax { $slice: "x" } did not match the find() syntax '
     "because :: Location31273: $slice only supports numbers and [skip, limit] arrays :: The "
     "given syntax did not match the expression $slice syntax. :: caused by :: Expression "
     "$slice takes at least 2 arguments, and at most 3, but 1 were passed in."),
    ({"a": {"$slice": [1]}}, 28667,
     "Invalid $slice syntax. The given syntax { $slice: [ 1 ] } did not match the find() syntax "
     "because :: Location31272: $slice array argument should be of form [skip, limit] :: The "
     "given syntax did not match the expression $slice syntax. :: caused by :: Expression "
     "$slice takes at least 2 arguments, and at most 3, but 1 were passed in."),
    ({"a": {"$slice": [1, 2, 3, 4]}}, 28667, None),
    ({"a": {"$slice": {"x": 1}}}, 28667, None),
    # find's form fails, the expression form parses: a computed field (refused)
    ({"a": {"$slice": [1, 0]}}, 238, None),
    ({"a": {"$slice": ["x", 1]}}, 238, None),
    ({"a": {"$slice": [1, 2, 3]}}, 238, None),
    # ... and in an exclusion, mongod's 31252
    ({"b": 0, "a": {"$slice": [1, -1]}}, 31252, None),
]


@pytest.mark.parametrize("spec,code,msg", SLICE_ERRORS)
def test_slice_errors(spec, code, msg):
    e = error(spec)
    assert e.code == code, str(e)
    if msg:
        assert str(e) == msg


# ------------------------------------------------------------- $elemMatch

def test_elem_match():
    doc = S(("_id", 1), ("z", 9), ("a", [{"x": 1, "y": 1}, 5, {"x": 2, "y": 2}, {"x": 2, "y": 3}]),
            ("b", [1, 5, 10]))
    # inclusion; the $elemMatch field comes after the included ones
    assert same(project({"a": {"$elemMatch": {"x": 2}}, "z": 1}, doc),
                S(("_id", 1), ("z", 9), ("a", [S(("x", 2), ("y", 2))])))
    assert same(project({"a": {"$elemMatch": {"x": 2, "y": {"$gt": 2}}}}, doc),
                S(("_id", 1), ("a", [S(("x", 2), ("y", 3))])))
    # scalars: the value form
    assert same(project({"b": {"$elemMatch": {"$gt": 3}}}, doc), S(("_id", 1), ("b", [5])))
    assert same(project({"b": {"$elemMatch": {"$gte": 2, "$lt": 10}}}, doc), S(("_id", 1), ("b", [5])))
    # no match, or not an array: the field is left out
    assert same(project({"b": {"$elemMatch": {"$gt": 30}}}, doc), S(("_id", 1)))
    assert same(project({"z": {"$elemMatch": {"$gt": 1}}}, doc), S(("_id", 1)))
    assert same(project({"q": {"$elemMatch": {"$gt": 1}}}, doc), S(("_id", 1)))
    assert same(project({"_id": 0, "b": {"$elemMatch": {"$gt": 3}}}, doc), S(("b", [5])))
    # in an exclusion the field is replaced in place (or removed)
    assert same(project({"z": 0, "a": {"$elemMatch": {"x": 1}}}, doc),
                S(("_id", 1), ("a", [S(("x", 1), ("y", 1))]), ("b", [1, 5, 10])))
    assert same(project({"z": 0, "a": {"$elemMatch": {"x": 7}}}, doc),
                S(("_id", 1), ("b", [1, 5, 10])))
    # nested documents and arrays inside elements
    d = {"_id": 1, "a": [{"b": [1, 2]}, {"b": [3, 4]}]}
    assert project({"a": {"$elemMatch": {"b": 3}}}, d) == {"_id": 1, "a": [{"b": [3, 4]}]}
    d = {"_id": 1, "a": [[1, 2], [3, 4]]}
    assert project({"a": {"$elemMatch": {"$elemMatch": {"$eq": 4}}}}, d) == {"_id": 1, "a": [[3, 4]]}


def test_elem_match_errors():
    assert error({"a": {"$elemMatch": 1}}).code == 31274
    assert str(error({"a": {"$elemMatch": 1}})) == \
        "elemMatch: Invalid argument, object required, but got int"
    assert error({"a.b": {"$elemMatch": {"x": 1}}}).code == 31275
    assert error({"a": {"b": {"$elemMatch": {"x": 1}}}}).code == 31275
    assert error({"a.$": 1, "b": {"$elemMatch": {"x": 1}}}, filt={"a": 1}).code == 31255
    assert error({"b": {"$elemMatch": {"x": 1}}, "a.$": 1}, filt={"a": 1}).code == 31256
    assert error({"a": {"$elemMatch": {"$foo": 1}}}).code == 2   # the matcher's error
    assert error({"a": {"$elemMatch": {"x": 1}}, "a.b": 1}).code == 31249


# ---------------------------------------------------------------- positional

POSITIONAL = [
    # (filter, projection, document, pos, expected)
    ({"x.a": 2}, {"x.$": 1}, {"x": [{"a": 1, "b": 2}, {"a": 2, "c": 3}, {"a": 1}], "y": [1]}, 1,
     {"x": [{"a": 2, "c": 3}]}),
    ({"x.y.a": 1}, {"x.y.$": 1}, {"x": {"y": [{"a": 1, "b": 1}, {"a": 1, "b": 2}]}}, 0,
     {"x": {"y": [{"a": 1, "b": 1}]}}),
    # no such path, or no array on it: nothing, or the value unchanged
    ({}, {"g.$": 1}, {"x": [1, 2]}, -1, {}),
    ({"x": 1}, {"a.$": 1}, {"x": 1}, -1, {}),
    ({"x": {"$gt": 0}}, {"a.b.c.$": 1}, {"x": [-1, 1, 2], "a": {"b": {"d": [1, 2, 3], "f": 456}, "e": 123}},
     1, {"a": {"b": {}}}),
    ({"x": {"$gt": 0}}, {"a.b.c.$": 1}, {"x": [-1, 1, 2], "a": {"b": {"c": {"d": {"e": 1}}}}}, 1,
     {"a": {"b": {"c": {"d": {"e": 1}}}}}),
    ({"x": {"$gt": 0}}, {"a.b.c.$": 1}, {"x": [-1, 1, 2], "a": {"b": {"c": 123}}}, 1,
     {"a": {"b": {"c": 123}}}),
    # the first array on the path takes the position
    ({"x": 1}, {"a.b.c.$": 1}, {"x": [1], "a": [{"b": [[[{"c": 1, "d": 2}]]]}]}, 0,
     {"a": [{"b": [[[{"c": 1}]]]}]}),
    ({"x.y.z": 1}, {"a.b.c.$": 1},
     {"a": [{"b": {"c": [1, 2, 3]}}, {"b": {"c": [4, 5, 6]}}, {"b": {"c": [7, 8, 9]}}]}, 1,
     {"a": [{"b": {"c": [4, 5, 6]}}]}),
    ({"x.y.z": 1}, {"a.b.c.$": 1}, {"a": {"b": [{"c": [1, 2, 3]}, {"c": [4, 5, 6]}]}}, 1,
     {"a": {"b": [{"c": [4, 5, 6]}]}}),
    ({"x.y.z": 1}, {"a.b.c.$": 1}, {"a": {"b": {"c": [1, 2, 3]}}}, 1, {"a": {"b": {"c": [2]}}}),
    # with other inclusions and $slice on other fields
    ({"z": 13}, {"a": {"$slice": 2}, "z.$": 1}, {"_id": 0, "a": [1, 2, 3], "z": [11, 12, 13]}, 2,
     {"_id": 0, "a": [1, 2], "z": [13]}),
    ({"z": 12}, {"a.b": 1, "z.$": 1}, {"_id": 1, "a": [{"b": 1, "c": 2}, {"b": 3}], "z": [11, 12, 13]},
     1, {"_id": 1, "a": [{"b": 1}, {"b": 3}], "z": [12]}),
]


@pytest.mark.parametrize("filt,spec,doc,pos,want", POSITIONAL)
def test_positional(filt, spec, doc, pos, want):
    spec = dict(spec)
    if "_id" not in doc:
        spec.setdefault("_id", 0)
    assert project(spec, doc, filt, pos) == want


def test_positional_runtime_errors():
    doc = {"_id": 1, "x": [{"a": 1}, {"a": 2}]}
    e = error({"x.$": 1}, doc, {}, -1)
    assert e.code == 51246 and e.code_name == "Location51246"
    assert str(e) == "positional operator '.$' couldn't find a matching element in the array"
    e = error({"x.$": 1}, doc, {"x.a": 1}, 5)
    assert e.code == 51247 and str(e) == "positional operator '.$' element mismatch"
    # the position indexes the projected array (scalars dropped by "x.b")
    e = error({"x.b.$": 1}, {"x": [1, {"b": 3}]}, {"x.b": 3}, 1)
    assert e.code == 51247


POSITIONAL_ERRORS = [
    ({"x.$": {"$slice": 1}}, 31271),
    ({"x.$": 1, "y": 0}, 31254),
    ({"y": 0, "x.$": 1}, 31253),
    ({"x.$": 0}, 31395),
    ({"x.$": "s"}, 31308),
    ({"x.$": 1, "y.$": 1}, 31276),
    ({"x.$.y": 1}, 31394),
    ({"x.$.$": 1}, 31394),
    ({".$": 1}, 5392900),
    ({"x.$": 1, "x.b": 1}, 31249),
    ({"x.b": 1, "x.$": 1}, 31250),
    ({"$.$": 1}, 16410),
]


@pytest.mark.parametrize("spec,code", POSITIONAL_ERRORS)
def test_positional_errors(spec, code):
    assert error(spec, filt={"x": 1}).code == code


def test_positional_needs_a_matcher():
    assert error({"x.$": 1}, filt=None).code == 51050


# -------------------------------------------------------------- other errors

ERRORS = [
    ({"a": 1, "b": 0}, 31254, "Cannot do exclusion on field b in inclusion projection"),
    ({"a": 0, "b": 1}, 31253, "Cannot do inclusion on field b in exclusion projection"),
    ({"a": 0, "b.c": True}, 31253, "Cannot do inclusion on field b.c in exclusion projection"),
    ({"a": {"b": 1, "c": 0}}, 31254, "Cannot do exclusion on field c in inclusion projection"),
    ({"a": 1, "a.b": 1}, 31249, "Path collision at a.b remaining portion b"),
    ({"a.b": 1, "a": 1}, 31250, "Path collision at a"),
    ({"a.b.c": 1, "a.b": 1}, 31250, "Path collision at a.b"),
    ({"a.b": 1, "a.b.c.d": 1}, 31249, "Path collision at a.b.c.d remaining portion b.c.d"),
    ({"a": {"b": 1}, "a.b": 0}, 31250, None),
    ({"": 1}, 40352, "FieldPath cannot be constructed with empty string"),
    ({"a.": 1}, 40353, "FieldPath must not end with a '.'."),
    ({"a..b": 1}, 15998, "FieldPath field names may not be empty strings."),
    ({".a": 1}, 15998, None),
    ({"$a": 1}, 16410,
     "FieldPath field names may not start with '$'. Consider using $getField or $setField."),
    ({"a.$b": 0}, 16410, None),
    ({"a": {}}, 51270,
     "An empty sub-projection is not a valid value. Found empty object at path"),
    ({"a": {"$foo": 1}}, 31325, "Unknown expression $foo"),
    ({"a": {"$foo": 1, "b": 1}}, 16410, None),
    ({"a": 0, "b": {"$add": [1, 2]}}, 31252,
     "Cannot use expression other than $meta in exclusion projection"),
    ({"a": 0, "b": "x"}, 31310, 'Cannot use an expression b: "x" in an exclusion projection'),
    ({"a": 0, "b": None}, 31310, "Cannot use an expression b: null in an exclusion projection"),
    # computed fields: refused until there is an expression evaluator
    ({"a": {"$add": [1, 2]}}, 238, None),
    ({"a": {"$literal": 1}}, 238, None),
    ({"a": "x"}, 238, None),
    ({"a": [1, 2]}, 238, None),
    ({"a": None}, 238, None),
]


def test_meta_fields_read_the_rows_metadata():
    # A row without the metadata gets no field: the find command refuses
    # first what mongod refuses (40218 without $text: test_text_index.py).
    assert same(project({"a": {"$meta": "textScore"}, "b": 1}, {"_id": 1, "b": 2}),
                {"_id": 1, "b": 2})
    assert same(project({"a": {"$meta": "recordId"}}, {"_id": 1, "b": 2}), {"_id": 1, "b": 2})


@pytest.mark.parametrize("spec,code,msg", ERRORS)
def test_errors(spec, code, msg):
    e = error(spec)
    assert e.code == code, str(e)
    if msg:
        assert str(e) == msg
    if code > 1000:
        assert e.code_name == f"Location{code}"


def test_error_order_follows_the_spec():
    # mongod reports the first offending field, in specification order
    assert error(S(("a", 1), ("b", 0), ("c.", 1))).code == 31254
    assert error(S(("c.", 1), ("a", 1), ("b", 0))).code == 40353


def test_big_document_round_trip():
    doc = {"_id": 1, **{f"f{i}": {"x": list(range(20)), "y": "v" * 30} for i in range(300)}}
    assert project({}, doc) == doc
    got = project({"f7.x": 1, "f9": 1}, doc)
    assert got == {"_id": 1, "f7": {"x": list(range(20))}, "f9": doc["f9"]}
    assert project({"f7.x": 0, "_id": 0}, doc)["f7"] == {"y": "v" * 30}
