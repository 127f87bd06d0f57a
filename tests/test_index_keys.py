"""Index key generation (csrc/query/index.c, mf_index_keys) against mongod
7.0's BtreeKeyGenerator: targeted cases for every rule, then a randomized
comparison with a small reference generator written here over random
documents (nested arrays and documents, numeric field names) and random
key patterns (dotted and positional paths, directions, sparse)."""
import random
import struct

import bson
from bson import MaxKey, MinKey
import pytest

from multifora import _core

UNDEF = object()  # BSON undefined, which pymongo cannot encode


def elem(key: str, v) -> bytes:
    if v is UNDEF:
        return b"\x06" + key.encode() + b"\x00"
    raw = bson.encode({key: v})
    return raw[4:-1]


def raw_doc(values) -> bytes:
    body = b"".join(elem(str(i), v) for i, v in enumerate(values))
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def enc(values, desc):
    """The expected key: the key encodings of `values`, concatenated."""
    return _core._key_encode(raw_doc(values), "".join("1" if d else "0" for d in desc))


def spec(key, **opts):
    d = {"v": 2, "key": key, "name": "i"}
    d.update(opts)
    return bson.encode(d)


def keys(key, doc, **opts):
    ks, mk = _core._index_keys(spec(key, **opts), bson.encode(doc))
    return ks, mk


def expect(key, values_list):
    desc = [v < 0 for v in key.values()]
    return sorted({enc(vals, desc) for vals in values_list})


def err(key, doc, **opts):
    with pytest.raises(_core.MultiforaError) as e:
        keys(key, doc, **opts)
    return e.value.code, str(e.value)


# ------------------------------------------------------------ targeted


def test_scalar_and_missing():
    assert keys({"a": 1}, {"a": 5}) == (expect({"a": 1}, [[5]]), 0)
    assert keys({"a": 1}, {"b": 5}) == (expect({"a": 1}, [[None]]), 0)
    assert keys({"a.b": 1}, {"a": 5}) == (expect({"a": 1}, [[None]]), 0)
    assert keys({"a.b": -1}, {"a": {"b": "x"}}) == (expect({"a": -1}, [["x"]]), 0)


def test_compound_and_direction():
    ks, mk = keys({"a": 1, "b": -1}, {"a": 1, "b": 2})
    assert ks == expect({"a": 1, "b": -1}, [[1, 2]]) and mk == 0


def test_array_expands_and_dedups():
    ks, mk = keys({"a": 1}, {"a": [3, 1, 3, 2]})
    assert ks == expect({"a": 1}, [[1], [2], [3]]) and mk == 1
    # numerically equal values are one key
    ks, _ = keys({"a": 1}, {"a": [1, 1.0, bson.Int64(1)]})
    assert len(ks) == 1


def test_empty_array_is_undefined():
    ks, mk = keys({"a": 1}, {"a": []})
    assert ks == expect({"a": 1}, [[UNDEF]]) and mk == 1
    # a path continuing through an empty array: the rest is missing -> null
    ks, mk = keys({"a.b": 1}, {"a": []})
    assert ks == expect({"a": 1}, [[None]]) and mk == 1


def test_array_of_documents():
    ks, mk = keys({"a.b": 1}, {"a": [{"b": 1}, {"b": 2}, {"c": 3}]})
    assert ks == expect({"a": 1}, [[1], [2], [None]]) and mk == 1


def test_same_array_for_two_fields():
    ks, mk = keys({"a.b": 1, "a.c": 1}, {"a": [{"b": 1, "c": "x"}, {"b": 2, "c": "y"}]})
    assert ks == expect({"a": 1, "b": 1}, [[1, "x"], [2, "y"]]) and mk == 3


def test_nested_array_is_one_value():
    ks, mk = keys({"a": 1}, {"a": [[1, 2], 3]})
    assert ks == expect({"a": 1}, [[[1, 2]], [3]]) and mk == 1
    ks, _ = keys({"a.b": 1}, {"a": [[{"b": 1}]]})
    assert ks == expect({"a": 1}, [[None]])


def test_parallel_arrays():
    code, msg = err({"a": 1, "b": 1}, {"a": [1, 2], "b": [3]})
    assert code == 171 and msg == "cannot index parallel arrays [b] [a]"
    code, msg = err({"x.a": 1, "y.b": 1}, {"x": {"a": [1]}, "y": {"b": [2]}})
    assert (code, msg) == (171, "cannot index parallel arrays [b] [a]")
    # one array and a scalar: fine
    ks, mk = keys({"a": 1, "b": 1}, {"a": [1, 2], "b": 3})
    assert ks == expect({"a": 1, "b": 1}, [[1, 3], [2, 3]]) and mk == 1


def test_positional_component():
    ks, mk = keys({"a.0": 1}, {"a": [5, 6]})
    assert ks == expect({"a": 1}, [[5]]) and mk == 0
    ks, mk = keys({"a.1.b": 1}, {"a": [{"b": 1}, {"b": 2}]})
    assert ks == expect({"a": 1}, [[2]]) and mk == 0
    ks, mk = keys({"a.0": 1}, {"a": [[1, 2], 5]})
    assert ks == expect({"a": 1}, [[[1, 2]]]) and mk == 0
    ks, mk = keys({"a": 1, "a.0": 1}, {"a": [1, 2]})
    assert ks == expect({"a": 1, "b": 1}, [[1, 1], [2, 1]]) and mk == 1
    # "0" as a field of a document is an ordinary field
    ks, mk = keys({"a.0": 1}, {"a": {"0": 7}})
    assert ks == expect({"a": 1}, [[7]]) and mk == 0


def test_ambiguous_positional():
    code, msg = err({"a.0": 1}, {"a": [{"0": 1}]})
    assert code == 16746
    assert msg.startswith("Ambiguous field name found in array (do not use numeric field names in "
                          "embedded elements in an array), field: '0' for array: ")


def test_sparse():
    assert keys({"a": 1}, {"b": 1}, sparse=True) == ([], 0)
    assert keys({"a": 1}, {"a": None}, sparse=True)[0] == expect({"a": 1}, [[None]])
    # compound: skipped only when every field is missing
    assert keys({"a": 1, "b": 1}, {"b": 1}, sparse=True)[0] == expect({"a": 1, "b": 1}, [[None, 1]])
    assert keys({"a": 1, "b": 1}, {"c": 1}, sparse=True)[0] == []
    # per array element
    ks, mk = keys({"a.b": 1}, {"a": [{"b": 1}, {"c": 1}]}, sparse=True)
    assert ks == expect({"a": 1}, [[1]]) and mk == 1
    # an empty array is not missing
    assert keys({"a": 1}, {"a": []}, sparse=True)[0] == expect({"a": 1}, [[UNDEF]])


def test_partial():
    pf = {"x": {"$gt": 5}}
    assert keys({"a": 1}, {"a": 1, "x": 3}, partialFilterExpression=pf) == ([], 0)
    assert keys({"a": 1}, {"a": 1, "x": 6}, partialFilterExpression=pf)[0] == expect({"a": 1}, [[1]])


def test_id_index():
    ks, mk = _core._index_keys(bson.encode({"v": 2, "key": {"_id": 1}, "name": "_id_"}),
                               bson.encode({"_id": {"x": [1, 2]}}))
    assert ks == expect({"_id": 1}, [[{"x": [1, 2]}]]) and mk == 0
    ks, _ = _core._index_keys(bson.encode({"v": 2, "key": {"_id": 1}, "name": "_id_"}),
                              bson.encode({"a": 1}))
    assert ks == expect({"_id": 1}, [[None]])


def test_descriptor():
    d = _core._index_desc(bson.encode({
        "v": 2, "unique": True, "key": {"a": 1, "b.c": -1.5}, "name": "ab",
        "expireAfterSeconds": 30.7, "hidden": True, "partialFilterExpression": {"a": 1},
        "multikeyPaths": 2, "building": True}))
    assert d["name"] == "ab" and d["paths"] == ["a", "b.c"] and d["desc"] == [False, True]
    assert d["unique"] and d["hidden"] and d["partial"] and d["building"]
    assert not d["sparse"] and not d["is_id"]
    assert d["expire_after"] == 30 and d["multikey"] == 2
    d = _core._index_desc(bson.encode({"v": 2, "key": {"_id": 1}, "name": "_id_"}))
    assert d["is_id"] and d["expire_after"] == -1 and d["multikey"] == 0


# ------------------------------------------------------ the reference

MISSING = object()


class RefError(Exception):
    def __init__(self, code, msg=""):
        super().__init__(msg)
        self.code = code


def as_obj(v):
    if isinstance(v, dict):
        return v
    return {}


def list_obj(lst):
    return {str(i): v for i, v in enumerate(lst)}


def extract(obj, path):
    """(value or MISSING, rest): follow `path` through documents, stopping
    at the first array."""
    first, _, rest = path.partition(".")
    if first not in obj:
        return MISSING, rest
    v = obj[first]
    if isinstance(v, list) or rest == "":
        return v, rest
    if isinstance(v, dict):
        return extract(v, rest)
    return MISSING, rest


def ref_keys(paths, desc, sparse, doc):
    """mongod's BtreeKeyGenerator, as plainly as it can be said."""
    n = len(paths)
    out = set()
    multikey = [False] * n

    def gen(fields, obj, not_found):
        # fields: list of [rest, fixed, pos]; pos None or (elt, arr, pos_rest, dotted)
        arr = None
        in_arr = [False] * n
        may_expand = True
        for i, f in enumerate(fields):
            rest, _, pos = f
            if rest == "":
                continue
            first = rest.split(".")[0]
            nested = False
            if first in obj:
                if pos is not None:
                    raise RefError(16746)
                e, f[0] = extract(obj, rest)
            elif pos is not None:
                nested = isinstance(pos[0], list)
                f[0] = pos[2]
                e = pos[3]
            else:
                e = MISSING
            if e is MISSING:
                f[1] = None
                f[0] = ""
                not_found += 1
            elif isinstance(e, list):
                in_arr[i] = True
                if arr is None:
                    arr = e
                elif e is not arr:
                    raise RefError(171)
                if nested:
                    may_expand = False
            else:
                f[1] = e
        if arr is None:
            if not (sparse and not_found == n):
                out.add(enc([f[1] for f in fields], desc))
            return
        if not arr:
            sub = []
            for i, f in enumerate(fields):
                if in_arr[i] and may_expand:
                    multikey[i] = True
                fixed = UNDEF if in_arr[i] and f[0] == "" else f[1]
                sub.append([f[0], fixed, None])
            gen(sub, {}, not_found)
            return
        aobj = list_obj(arr)
        pos = [None] * n
        for i, f in enumerate(fields):
            if f[0] == "":
                if in_arr[i] and may_expand:
                    multikey[i] = True
                continue
            first = f[0].split(".")[0]
            if first not in aobj:
                multikey[i] = True
                continue
            dotted, pos_rest = extract(aobj, f[0])
            pos[i] = (aobj[first], arr, pos_rest, dotted)
        for el in arr:
            sub = []
            for i, f in enumerate(fields):
                fixed = f[1]
                if in_arr[i] and f[0] == "":
                    fixed = el if may_expand else arr
                sub.append([f[0], fixed, pos[i]])
            gen(sub, as_obj(el), not_found)

    gen([[p, None, None] for p in paths], doc, 0)
    if not out and not sparse:
        out.add(enc([None] * n, desc))
    return sorted(out), sum(1 << i for i in range(n) if multikey[i])


NAMES = ["a", "b", "0", "1"]


def rand_value(rng, depth):
    k = rng.randrange(10 if depth < 3 else 5)
    if k == 0:
        return rng.choice([1, 2, 2.0, -1, bson.Int64(3)])
    if k == 1:
        return rng.choice(["x", "y", ""])
    if k == 2:
        return rng.choice([None, True, MinKey(), MaxKey()])
    if k in (3, 4):
        return rng.randrange(4)
    if k in (5, 6, 7):
        return {rng.choice(NAMES): rand_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return [rand_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def rand_path(rng):
    parts = [rng.choice(["a", "b"])]
    for _ in range(rng.randrange(3)):
        parts.append(rng.choice(NAMES))
    return ".".join(parts)


def test_random_against_reference():
    rng = random.Random(20240605)
    checked = errors = 0
    for _ in range(4000):
        npaths = rng.randrange(1, 4)
        paths = []
        while len(paths) < npaths:
            p = rand_path(rng)
            if p not in paths and p != "_id":
                paths.append(p)
        desc = [rng.random() < 0.4 for _ in paths]
        sparse = rng.random() < 0.3
        key = {p: (-1 if d else 1) for p, d in zip(paths, desc)}
        doc = {rng.choice(["a", "b", "c"]): rand_value(rng, 0) for _ in range(rng.randrange(1, 4))}
        try:
            want = ref_keys(paths, desc, sparse, doc)
        except RefError as e:
            want = e.code
        try:
            got = keys(key, doc, sparse=sparse)
        except _core.MultiforaError as e:
            got = e.code
        assert got == want, (key, sparse, doc)
        checked += 1
        errors += isinstance(want, int)
    assert checked == 4000 and 0 < errors < 1000
