"""createIndexes specs (csrc/query/index.c): mf_index_spec_normalize's checks
with mongod 7.0's codes and messages, the stored field order listIndexes
shows, and mf_index_spec_conflict between an existing and a requested index.
Messages marked (*) are mongod's as observed by other implementations'
compatibility suites run against mongod."""
import struct

import bson
from bson.son import SON
import pytest

from multifora import _core


def norm(spec):
    return bson.decode(_core._index_spec(bson.encode(SON(spec))), codec_options=bson.CodecOptions(document_class=SON))


def fails(spec):
    with pytest.raises(_core.MultiforaError) as e:
        _core._index_spec(bson.encode(SON(spec)))
    return e.value.code, str(e.value)


def S(*pairs):
    return SON(list(pairs))


# --------------------------------------------------------- normalization


def test_v_key_name_order_and_defaults():
    out = norm(S(("name", "a_1_b_-1"), ("key", S(("a", 1), ("b", -1)))))
    assert list(out.items()) == [("v", 2), ("key", S(("a", 1), ("b", -1))), ("name", "a_1_b_-1")]
    out = norm(S(("sparse", 1), ("key", {"a": 1}), ("unique", 1), ("name", "x"), ("v", 1.0),
                 ("hidden", False), ("expireAfterSeconds", 60), ("ns", "db.c"), ("dropDups", True),
                 ("background", True)))
    assert list(out.keys()) == ["v", "unique", "key", "name", "sparse", "hidden",
                                "expireAfterSeconds", "background"]
    assert out["v"] == 1 and out["unique"] is True and out["sparse"] == 1
    assert "unique" not in norm(S(("key", {"a": 1}), ("name", "x"), ("unique", False)))


def test_simple_collation_dropped_others_spelled_out_last():
    out = norm(S(("key", {"a": 1}), ("name", "x"), ("collation", {"locale": "simple"})))
    assert "collation" not in out
    # mongod's validateIndexSpecCollation appends the full spec after the
    # other options; _fixIndexSpec keeps that order after v, key, name.
    out = norm(S(("collation", {"locale": "fr", "strength": 1}), ("key", {"a": 1}),
                 ("name", "x"), ("sparse", True)))
    assert list(out.keys()) == ["v", "key", "name", "sparse", "collation"]
    coll = out["collation"]
    assert list(coll.keys()) == ["locale", "caseLevel", "caseFirst", "strength",
                                 "numericOrdering", "alternate", "maxVariable",
                                 "normalization", "backwards", "version"]
    assert coll["locale"] == "fr" and coll["strength"] == 1 and coll["caseFirst"] == "off"
    code, msg = fails(S(("key", {"a": 1}), ("name", "x"), ("collation", {"locale": "EN"})))
    assert (code, msg) == (
        2, 'failed to add collation information to index spec for index creation: '
           '{ key: { a: 1 }, name: "x", collation: { locale: "EN" }, v: 2 } :: caused by :: '
           "Field 'locale' is invalid in: { locale: \"EN\" }. Did you mean 'en'?")


def test_required_fields():  # (*)
    assert fails(S(("key", {"v": 1}))) == (
        9, "Error in specification { key: { v: 1 } } :: caused by :: "
           "The 'name' field is a required property of an index specification")
    assert fails(S()) == (
        9, "Error in specification {} :: caused by :: "
           "The 'key' field is a required property of an index specification")


def test_empty_name():  # (*)
    assert fails(S(("key", {"v": -1}), ("name", ""))) == (
        67, 'Error in specification { key: { v: -1 }, name: "", v: 2 } :: caused by :: '
            "index name cannot be empty")


def test_unique_not_bool():  # (*)
    assert fails(S(("key", {"v": 1}), ("name", "unique_index"), ("unique", {}))) == (
        14, 'Error in specification { key: { v: 1 }, name: "unique_index", unique: {} } :: '
            "caused by :: The field 'unique has value unique: {}, which is not convertible to bool")


def test_id_index_options():  # (*)
    assert fails(S(("key", {"_id": 1}), ("name", "_id_"), ("unique", True))) == (
        197, "The field 'unique' is not valid for an _id index specification. Specification: "
             '{ key: { _id: 1 }, name: "_id_", unique: true, v: 2 }')
    for opt in ("sparse", "hidden", "expireAfterSeconds", "partialFilterExpression"):
        val = {"a": 1} if opt == "partialFilterExpression" else (True if opt != "expireAfterSeconds" else 5)
        assert fails(S(("key", {"_id": 1}), ("name", "_id_"), (opt, val)))[0] == 197
    assert fails(S(("key", {"_id": -1}), ("name", "x"))) == (
        2, "The field 'key' for an _id index must be {_id: 1}, but got { _id: -1 }")
    assert norm(S(("key", {"_id": 1}), ("name", "_id_"))) == S(
        ("v", 2), ("key", {"_id": 1}), ("name", "_id_"))


def test_reserved_names():
    assert fails(S(("key", {"a": 1}), ("name", "_id_"))) == (
        2, "The index name '_id_' is reserved for the _id index, which must have key pattern "
           "{_id: 1}, found key: { a: 1 }")
    assert fails(S(("key", {"a": 1}), ("name", "*"))) == (2, "The index name '*' is not valid.")


def test_unknown_field():
    assert fails(S(("key", {"a": 1}), ("name", "x"), ("foo", 1))) == (
        197, 'Error in specification { key: { a: 1 }, name: "x", foo: 1 } :: caused by :: '
             "The field 'foo' is not valid for an index specification. Specification: "
             '{ key: { a: 1 }, name: "x", foo: 1 }')


@pytest.mark.parametrize("key,code,reason", [
    ({}, 67, "Index keys cannot be empty."),
    ({"a": 0}, 67, "Values in the index key pattern cannot be 0."),
    ({"a": float("nan")}, 67, "Values in the index key pattern cannot be NaN."),
    ({"a": True}, 67, "Values in v:2 index key pattern cannot be of type bool. Only numbers > 0, "
                      "numbers < 0, and strings are allowed."),
    ({"a": {"x": 1}}, 67, "Values in v:2 index key pattern cannot be of type object. Only numbers "
                          "> 0, numbers < 0, and strings are allowed."),
    ({"a": "foo"}, 67, "Unknown index plugin 'foo'"),
    ({"a": "hashed", "b": "text"}, 67, "Can't use more than one index plugin for a single index."),
    ({"a..b": 1}, 67, "Index keys cannot contain an empty field."),
    ({"": 1}, 67, "Index keys cannot be an empty field."),
    ({"$a": 1}, 67, "Index key contains an illegal field name: field name starts with '$'."),
    ({"a.$b": 1}, 67, "Index key contains an illegal field name: field name starts with '$'."),
    ({"a": "geoHaystack"}, 67, "GeoHaystack indexes cannot be created in version 5.0 and above"),
    ({"a": ""}, 67, "Values in the index key pattern cannot be empty strings"),
])
def test_bad_key_patterns(key, code, reason):
    spec = S(("key", key), ("name", "x"))
    got = fails(spec)
    assert got[0] == code and got[1].endswith(":: caused by :: " + reason), got


def test_at_most_32_fields():
    key = S(*[(f"f{i}", 1) for i in range(32)])
    assert norm(S(("key", key), ("name", "x")))["key"] == key
    key = S(*[(f"f{i}", 1) for i in range(33)])
    # mongod's Ordering::make: uassert 13103, not wrapped in the spec
    assert fails(S(("key", key), ("name", "x"))) == (13103, "too many compound keys")


def test_dbref_fields_allowed_and_refused_types():
    assert norm(S(("key", {"a.$id": 1}), ("name", "x")))["key"] == {"a.$id": 1}
    assert norm(S(("key", {"a.$id": "hashed"}), ("name", "x")))["key"] == {"a.$id": "hashed"}
    # 2dsphere and 2d indexes are built (test_geo_2dsphere.py, test_geo_2d.py)
    assert norm(S(("key", {"a": "2dsphere"}), ("name", "x")))["key"] == {"a": "2dsphere"}
    assert norm(S(("key", {"a": "2d"}), ("name", "x")))["key"] == {"a": "2d"}
    # wildcard indexes are built (test_wildcard_index.py)
    assert norm(S(("key", {"$**": 1}), ("name", "x")))["key"] == {"$**": 1}


def test_field_types():
    assert fails(S(("key", 1), ("name", "x")))[1].endswith(
        "The field 'key' must be an object, but got int")
    assert fails(S(("key", {"a": 1}), ("name", 1)))[1].endswith(
        "The field 'name' must be a string, but got int")
    assert fails(S(("key", {"a": 1}), ("name", "x"), ("hidden", 1)))[1].endswith(
        "The field 'name' must be a bool, but got int")  # sic, as mongod
    assert fails(S(("key", {"a": 1}), ("name", "x"), ("v", 3)))[0] == 67
    assert fails(S(("key", {"a": 1}), ("name", "x"), ("v", 1.5)))[0] == 2
    assert fails(S(("key", {"a": 1}), ("name", "x"), ("v", "2")))[0] == 14
    def raw(*elems):  # a document with repeated names, which dicts cannot hold
        body = b"".join(elems)
        return struct.pack("<i", len(body) + 5) + body + b"\x00"
    one = bson.encode({"a": 1})[4:-1]
    dup = raw(b"\x03key\x00" + raw(one, one), bson.encode({"name": "x"})[4:-1])
    with pytest.raises(_core.MultiforaError) as e:
        _core._index_spec(dup)
    code, msg = e.value.code, str(e.value)
    assert code == 2 and msg.endswith(
        "The field 'a' appears multiple times in the index key pattern { a: 1, a: 1 }")


def test_ttl():
    base = S(("key", {"a": 1}), ("name", "x"))
    assert norm(S(*base.items(), ("expireAfterSeconds", 0)))["expireAfterSeconds"] == 0
    code, msg = fails(S(*base.items(), ("expireAfterSeconds", "1")))
    assert code == 67 and msg == (
        '. Index spec: { key: { a: 1 }, name: "x", expireAfterSeconds: "1" } :: caused by :: '
        "TTL index 'expireAfterSeconds' option must be numeric, but received a type of 'string")
    assert fails(S(*base.items(), ("expireAfterSeconds", -1)))[1].endswith(
        "TTL index 'expireAfterSeconds' option cannot be less than 0")
    assert fails(S(*base.items(), ("expireAfterSeconds", 2**31)))[1].endswith(
        "TTL index 'expireAfterSeconds' must be within the range of a 32-bit integer")
    assert fails(S(*base.items(), ("expireAfterSeconds", float("nan"))))[1].endswith(
        "TTL index 'expireAfterSeconds' option must not be NaN")
    assert fails(S(("key", {"a": 1, "b": 1}), ("name", "x"), ("expireAfterSeconds", 5))) == (
        67, "TTL indexes are single-field indexes, compound indexes do not support TTL. Index "
            'spec: { key: { a: 1, b: 1 }, name: "x", expireAfterSeconds: 5 }')


def test_partial_filters():
    base = [("key", {"a": 1}), ("name", "x")]
    ok = [{"a": 1}, {"a": {"$eq": None}}, {"a": {"$gt": 1, "$lte": 5}}, {"a": {"$exists": True}},
          {"a": {"$type": "string"}}, {"$and": [{"a": 1}, {"b": {"$lt": 2}}]},
          {"$or": [{"a": 1}, {"b": 2}]}, {"a": {"$in": [1, 2]}}, {}]
    for f in ok:
        assert norm(S(*base, ("partialFilterExpression", f)))["partialFilterExpression"] == f
    bad = {
        '{"a": {"$ne": 1}}': "$not\n    a $eq 1\n",
        '{"a": {"$exists": False}}': "$not\n    a exists\n",
        '{"a": {"$not": {"$gt": 1}}}': "$not\n    $and\n        a $gt 1\n",
        '{"$nor": [{"a": 1}]}': "$nor\n    a $eq 1\n",
        '{"a": {"$size": 2}}': "a $size : 2\n",
    }
    for f, dbg in bad.items():
        code, msg = fails(S(*base, ("partialFilterExpression", eval(f))))
        assert code == 67 and msg.endswith(
            " :: caused by :: Expression not supported in partial index: " + dbg), (f, msg)
    deep = {"$and": [{"$and": [{"$and": [{"$and": [{"a": 1}, {"b": 1}]}, {"c": 1}]}, {"d": 1}]}, {"e": 1}]}
    assert fails(S(*base, ("partialFilterExpression", deep)))[1].endswith(
        "partialFilterExpression depth may not exceed 4")
    assert fails(S(*base, ("sparse", True), ("partialFilterExpression", {"a": 1})))[1].endswith(
        'cannot mix "partialFilterExpression" and "sparse" options')
    assert norm(S(*base, ("sparse", False), ("partialFilterExpression", {"a": 1})))
    code, msg = fails(S(*base, ("partialFilterExpression", {"$expr": {"$eq": ["$a", 1]}})))
    assert code == 224 and msg.endswith("$expr is not allowed in this context")
    code, msg = fails(S(*base, ("partialFilterExpression", {"a": {"$foo": 1}})))
    assert code == 2 and msg.startswith("Error in specification")
    assert fails(S(*base, ("partialFilterExpression", 1)))[1].endswith(
        "The field 'partialFilterExpression' must be an object, but got int")


def test_name_generation():
    key = bson.encode(S(("a", 1), ("b", -1), ("c.d", 1.0), ("e", "hashed")))
    assert _core._index_name(key) == "a_1_b_-1_c.d_1_e_hashed"


# ------------------------------------------------------------ conflicts


def stored(spec, **server):
    d = norm(spec)
    d.update(server)
    return bson.encode(d)


def conflict(existing, incoming):
    return _core._index_conflict(stored(existing, multikeyPaths=1, building=False),
                                 bson.encode(norm(incoming)))


def conflict_err(existing, incoming):
    with pytest.raises(_core.MultiforaError) as e:
        conflict(existing, incoming)
    return e.value.code, str(e.value)


def test_identical_is_same():
    a = S(("key", {"a": 1}), ("name", "a_1"))
    assert conflict(a, a) is True
    # hidden and background do not make an index different; numbers compare by value
    assert conflict(S(*a.items(), ("hidden", True)), S(*a.items(), ("background", True))) is True
    assert conflict(S(*a.items(), ("expireAfterSeconds", 60)),
                    S(*a.items(), ("expireAfterSeconds", 60.0))) is True


def test_unrelated():
    assert conflict(S(("key", {"a": 1}), ("name", "a_1")), S(("key", {"b": 1}), ("name", "b_1"))) is False
    # the signature: unique, sparse, partial filter
    a = S(("key", {"a": 1}), ("name", "a_1"))
    for opt in [("unique", True), ("sparse", True), ("partialFilterExpression", {"x": 1})]:
        assert conflict(a, S(("key", {"a": 1}), ("name", "other"), opt)) is False


def test_same_name_different_key():  # (*)
    code, msg = conflict_err(S(("key", {"foo": -1}), ("name", "index-name")),
                             S(("key", {"bar": -1}), ("name", "index-name")))
    assert (code, msg) == (86, (
        "An existing index has the same name as the requested index. When index names are not "
        "specified, they are auto generated and can cause conflicts. Please refer to our "
        'documentation. Requested index: { v: 2, key: { bar: -1 }, name: "index-name" }, '
        'existing index: { v: 2, key: { foo: -1 }, name: "index-name" }'))
    assert conflict_err(S(("key", {"a": 1}), ("name", "n")),
                        S(("key", {"a": 1}), ("name", "n"), ("unique", True)))[0] == 86


def test_same_key_different_name():  # (*)
    assert conflict_err(S(("key", {"v": -1}), ("name", "foo")),
                        S(("key", {"v": -1}), ("name", "bar"))) == (
        85, "Index already exists with a different name: foo")
    code, msg = conflict_err(S(("key", {"v": 1}), ("name", "foo"), ("expireAfterSeconds", 5)),
                             S(("key", {"v": 1}), ("name", "bar"), ("expireAfterSeconds", 6)))
    assert code == 85 and msg.startswith(
        "An equivalent index already exists with a different name and options. Requested index: "
        '{ v: 2, key: { v: 1 }, name: "bar", expireAfterSeconds: 6 }, existing index: '
        '{ v: 2, key: { v: 1 }, name: "foo", expireAfterSeconds: 5 }')


def test_same_name_same_key_other_options():
    code, msg = conflict_err(S(("key", {"t": 1}), ("name", "t_1"), ("expireAfterSeconds", 86400)),
                             S(("key", {"t": 1}), ("name", "t_1"), ("expireAfterSeconds", 60)))
    assert (code, msg) == (85, (
        "An equivalent index already exists with the same name but different options. Requested "
        'index: { v: 2, key: { t: 1 }, name: "t_1", expireAfterSeconds: 60 }, existing index: '
        '{ v: 2, key: { t: 1 }, name: "t_1", expireAfterSeconds: 86400 }'))
    # the server fields never show
    assert "multikeyPaths" not in msg and "building" not in msg
