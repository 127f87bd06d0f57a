"""Sort specifications, sort keys and the sorter (csrc/query/sort.c).

- parse errors as mongod 7.0's find gives them (15974, 15975, FieldPath);
- targeted sort-key cases (arrays by least / greatest element, [] before
  null, missing as null, paths through one array together, parallel
  arrays refused);
- a randomized differential test: ``_core._sort`` against a reference in
  Python that generates the index keys mongod's BtreeKeyGenerator would
  and orders them with match_reference.compare_values;
- the sorter's memory limit (292), spilling to disk and merging, top-k.
"""
import functools
import os
import random

import bson
import pytest
from bson import Decimal128, Int64, MaxKey, MinKey
from bson.codec_options import CodecOptions

import multifora
from multifora import _core

from match_reference import MISSING, compare_values

OPTS = CodecOptions(document_class=dict)


def enc(d):
    return bson.encode(d)


def sort_docs(spec, docs, **kw):
    out = _core._sort(enc(spec), [enc(d) for d in docs], **kw)
    if kw.get("with_runs"):
        return [bson.decode(b, OPTS) for b in out[0]], out[1]
    return [bson.decode(b, OPTS) for b in out]


def ids(spec, docs, **kw):
    return [d["_id"] for d in sort_docs(spec, docs, **kw)]


def sort_error(spec, docs=({"_id": 1},), **kw):
    with pytest.raises(multifora.MultiforaError) as info:
        sort_docs(spec, list(docs), **kw)
    return info.value


# ------------------------------------------------------------- parsing

PARSE_ERRORS = [
    ({"a": 2}, 15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)"),
    ({"a": 0}, 15975, None),
    ({"a": 42.12}, 15975, None),
    ({"a": Int64(2**63 - 1)}, 15975, None),
    ({"a": float("nan")}, 15975, None),
    ({"a": "123"}, 15974, 'Illegal key in $sort specification: a: "123"'),
    ({"a": True}, 15974, "Illegal key in $sort specification: a: true"),
    ({"a": None}, 15974, "Illegal key in $sort specification: a: null"),
    ({"a": [1]}, 15974, None),
    ({"": 1}, 40352, "FieldPath cannot be constructed with empty string"),
    ({"a.": 1}, 40353, None),
    ({"a..b": 1}, 15998, None),
    ({"$a": 1}, 16410, None),
    ({"a": {"$foo": 1}}, 17312, "$meta is the only expression supported by $sort right now"),
    ({"a": {}}, 17312, None),
    ({"a": {"$meta": "textScore", "b": 1}}, 9,
     "Cannot have additional keys in a $meta sort specification"),
    ({"a": {"$meta": "foo"}}, 31138, 'Illegal $meta sort: $meta: "foo"'),
    ({"a": {"$meta": 1}}, 31138, "Illegal $meta sort: $meta: 1"),
    ({"a": {"$meta": "searchScore"}}, 31218,
     "$meta sort by 'searchScore' metadata is not supported"),
    ({"a": {"$meta": "searchHighlights"}}, 31219,
     "$meta sort by 'searchHighlights' metadata is not supported"),
    ({"a": {"$meta": "recordId"}}, 31138, 'Illegal $meta sort: $meta: "recordId"'),
]


def test_meta_parts_without_metadata_tie():
    # textScore, randVal and geoNearDistance are taken; a document without
    # the metadata sorts as missing (the commands refuse first what mongod
    # refuses: 40218 without $text, test_text_index.py / test_meta.py)
    docs = [{"_id": i, "a": -i} for i in range(4)]
    for name in ("textScore", "randVal", "geoNearDistance"):
        assert ids({"m": {"$meta": name}, "a": 1}, docs) == [3, 2, 1, 0]
        assert ids({"a": 1, "m": {"$meta": name}}, docs) == [3, 2, 1, 0]


@pytest.mark.parametrize("spec,code,msg", PARSE_ERRORS)
def test_parse_errors(spec, code, msg):
    e = sort_error(spec)
    assert e.code == code, str(e)
    if msg:
        assert str(e) == msg


@pytest.mark.parametrize("direction", [1, -1, 1.0, -1.0, Int64(1), Int64(-1), Decimal128("1"),
                                       Decimal128("-1.00"), 1.5, -1.9])
def test_directions(direction):
    docs = [{"_id": i, "a": v} for i, v in enumerate([3, 1, 2])]
    want = [1, 2, 0] if float(str(direction)) > 0 else [0, 2, 1]
    assert ids({"a": direction}, docs) == want


def test_empty_spec_keeps_insertion_order():
    docs = [{"_id": i, "a": -i} for i in range(10)]
    assert ids({}, docs) == list(range(10))
    assert _core._sort_key(enc({}), enc({"a": 1})) == b""


# ------------------------------------------------------------ sort keys

def key(spec, doc):
    return _core._sort_key(enc(spec), enc(doc))


def test_array_sorts_by_least_ascending_greatest_descending():
    docs = [{"_id": 0, "a": [1, 10]}, {"_id": 1, "a": 5}, {"_id": 2, "a": [0, 6]},
            {"_id": 3, "a": [7]}]
    assert ids({"a": 1}, docs) == [2, 0, 1, 3]
    assert ids({"a": -1}, docs) == [0, 3, 2, 1]


def test_empty_array_missing_null_order():
    docs = [{"_id": 0, "a": None}, {"_id": 1}, {"_id": 2, "a": []}, {"_id": 3, "a": 1},
            {"_id": 4, "a": MinKey()}, {"_id": 5, "a": [None]}]
    # [] is undefined, before null; missing and null tie (insertion order)
    assert ids({"a": 1}, docs) == [4, 2, 0, 1, 5, 3]
    assert ids({"a": -1}, docs) == [3, 0, 1, 5, 2, 4]
    assert key({"a": 1}, {"a": None}) == key({"a": 1}, {})
    assert key({"a": 1}, {"a": []}) < key({"a": 1}, {})
    # [] in the middle of a longer path is missing, i.e. null
    assert key({"a.b": 1}, {"a": []}) == key({"a.b": 1}, {})


def test_nested_paths_and_arrays():
    assert key({"a.b": 1}, {"a": [{"b": 5}, {"c": 1}]}) == key({"a.b": 1}, {"a": {"b": None}})
    assert key({"a.b": 1}, {"a": [{"b": 5}, {"b": [2, 9]}]}) == key({"a.b": 1}, {"a": {"b": 2}})
    assert key({"a.b": -1}, {"a": [{"b": 5}, {"b": [2, 9]}]}) == key({"a.b": -1}, {"a": {"b": 9}})
    # a scalar where a document is needed: null
    assert key({"a.b": 1}, {"a": [5, {"b": 3}]}) == key({"a.b": 1}, {})
    # an array inside the array is one value (arrays sort after documents)
    assert key({"a": 1}, {"a": [[1, 2], 9]}) == key({"a": 1}, {"a": 9})
    assert key({"a": -1}, {"a": [[1, 2], 9]}) == key({"a": -1}, {"a": [[1, 2]]})
    # numeric components index arrays too
    assert key({"a.1": 1}, {"a": [5, 3, 4]}) == key({"a.1": 1}, {"a": {"1": 3}})
    assert key({"a.0.b": 1}, {"a": [{"b": 7}, {"b": 1}]}) == key({"a": 1}, {"a": 7})
    # numbers compare by value across types
    assert key({"a": 1}, {"a": 1}) == key({"a": 1}, {"a": 1.0}) == key({"a": 1}, {"a": Int64(1)})


def test_paths_through_one_array_take_one_element():
    # mongod: the least compound key, not the least per field
    doc = {"a": [{"x": 1, "y": 1}, {"x": 1, "y": 5}, {"x": 0, "y": 0}]}
    assert key({"a.x": 1, "a.y": -1}, doc) == key({"a.x": 1, "a.y": -1}, {"a": {"x": 0, "y": 0}})
    assert key({"a.x": -1, "a.y": 1}, doc) == key({"a.x": -1, "a.y": 1}, {"a": {"x": 1, "y": 1}})


def test_parallel_arrays():
    e = sort_error({"a": 1, "b": 1}, [{"_id": 1, "a": [1, 2], "b": [3, 4]}])
    assert e.code == 2 and str(e) == "cannot sort with keys that are parallel arrays"
    # one array and a scalar is fine; so are nested arrays on one path
    assert ids({"a": 1, "b": 1}, [{"_id": 1, "a": [1, 2], "b": 3}]) == [1]
    assert ids({"a.b": 1, "a.c": 1}, [{"_id": 1, "a": [{"b": [1], "c": 2}]}]) == [1]


def test_ambiguous_numeric_field():
    e = sort_error({"a.0": 1}, [{"_id": 1, "a": [{"0": 1}, 2]}])
    assert e.code == 16746


# --------------------------------------------------- reference and random

UNDEF = MISSING  # compare_values puts EOO/undefined before null, like mongod


def _first(obj, name):
    return obj[name] if isinstance(obj, dict) and name in obj else MISSING


def _extract(obj, path):
    """extractElementAtPathOrArrayAlongPath: (value or MISSING, rest)."""
    head, _, rest = path.partition(".")
    v = _first(obj, head)
    if v is MISSING or isinstance(v, list) or not rest:
        return v, rest
    if isinstance(v, dict):
        return _extract(v, rest)
    return MISSING, rest


def ref_keys(obj, fields):
    """The index keys (tuples) of the sort paths `fields` (list of
    [rest, fixed]) in `obj`: mongod's BtreeKeyGenerator without numeric
    components (the random test uses none)."""
    fields = [list(f) for f in fields]
    arr, in_arr = None, set()
    for i, f in enumerate(fields):
        if f[0] is None:
            continue
        v, rest = _extract(obj, f[0])
        if isinstance(v, list):
            if arr is not None and v is not arr:
                raise ValueError("parallel")
            arr = v
            f[0] = rest
            in_arr.add(i)
        else:
            f[0], f[1] = None, (None if v is MISSING else v)
    if arr is None:
        return [tuple(f[1] for f in fields)]
    out = []
    for el in (arr if arr else [UNDEF]):
        sub = [list(f) for f in fields]
        for i in in_arr:
            if sub[i][0] == "":
                sub[i][0], sub[i][1] = None, el
        out.extend(ref_keys(el if isinstance(el, dict) else {}, sub))
    return out


def ref_sort(spec, docs):
    dirs = list(spec.values())

    def cmp_keys(a, b):
        for x, y, d in zip(a, b, dirs):
            c = compare_values(x, y)
            if c:
                return c * d
        return 0

    keyed = []
    for i, d in enumerate(docs):
        ks = ref_keys(d, [[p, None] for p in spec])
        keyed.append((min(ks, key=functools.cmp_to_key(cmp_keys)), i))
    keyed.sort(key=functools.cmp_to_key(lambda a, b: cmp_keys(a[0], b[0]) or a[1] - b[1]))
    return [docs[i]["_id"] for _, i in keyed]


def rand_scalar(rng):
    return rng.choice([
        lambda: rng.randint(-3, 3), lambda: rng.randint(-3, 3) + 0.5, lambda: Int64(rng.randint(-3, 3)),
        lambda: rng.choice(["", "a", "b", "ab"]), lambda: None, lambda: rng.random() < 0.5,
        lambda: Decimal128(str(rng.randint(-3, 3))), lambda: MinKey(), lambda: MaxKey(),
    ])()


def rand_value(rng, depth=0):
    r = rng.random()
    if depth < 2 and r < 0.2:
        return {k: rand_value(rng, depth + 1) for k in rng.sample(["b", "c", "x"], rng.randint(0, 2))}
    if depth < 2 and r < 0.4:
        return [rand_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rand_scalar(rng)


def rand_doc(rng, i):
    d = {"_id": i}
    for k in ("a", "b"):
        if rng.random() < 0.8:
            d[k] = rand_value(rng)
    return d


PATHS = ["a", "b", "a.b", "a.c", "a.b.c", "b.x", "a.x"]


def test_random_against_reference():
    rng = random.Random(20240607)
    checked = parallel = 0
    for _ in range(400):
        docs = [bson.decode(enc(rand_doc(rng, i)), OPTS) for i in range(rng.randint(1, 12))]
        spec = {p: rng.choice([1, -1]) for p in rng.sample(PATHS, rng.randint(1, 2))}
        try:
            want = ref_sort(spec, docs)
        except ValueError:
            assert sort_error(spec, docs).code == 2
            parallel += 1
            continue
        assert ids(spec, docs) == want, (spec, docs)
        checked += 1
    assert checked > 300 and parallel > 5


# ---------------------------------------------------------------- sorter

def many_docs(n, seed=1):
    rng = random.Random(seed)
    return [{"_id": i, "k": rng.randint(0, n // 4), "pad": "x" * rng.randint(0, 60)}
            for i in range(n)]


def test_memory_limit_without_disk():
    docs = many_docs(200)
    e = sort_error({"k": 1}, docs, mem_limit=2000)
    assert e.code == 292 and e.code_name == "QueryExceededMemoryLimitNoDiskUseAllowed"
    assert str(e) == ("Sort exceeded memory limit of 2000 bytes, but did not opt in to external "
                      "sorting.")
    # under the limit: fine
    assert len(sort_docs({"k": 1}, docs[:5], mem_limit=2000)) == 5


@pytest.mark.parametrize("mem_limit", [300, 2000, 20000])
def test_spill_and_merge(tmp_path, mem_limit):
    docs = many_docs(3000)
    want = ref_sort({"k": -1}, docs)
    got, runs = sort_docs({"k": -1}, docs, mem_limit=mem_limit, allow_disk=True,
                          tmpdir=str(tmp_path), with_runs=True)
    assert [d["_id"] for d in got] == want
    assert got == sorted(docs, key=lambda d: (-d["k"], d["_id"]))  # whole documents back
    assert runs >= 1
    assert os.listdir(tmp_path) == []  # run files are unlinked at once


def test_spill_cascade_many_runs(tmp_path):
    # enough spills to force merges of runs into runs (fan-in bound)
    docs = many_docs(4000, seed=3)
    got, runs = sort_docs({"k": 1, "pad": -1}, docs, mem_limit=200, allow_disk=True,
                          tmpdir=str(tmp_path), with_runs=True)
    assert [d["_id"] for d in got] == ref_sort({"k": 1, "pad": -1}, docs)
    assert 1 <= runs <= 32


@pytest.mark.parametrize("limit", [1, 7, 100, 5000])
@pytest.mark.parametrize("mem_limit,allow_disk", [(104857600, False), (500, True)])
def test_limit(tmp_path, limit, mem_limit, allow_disk):
    docs = many_docs(1500, seed=limit)
    want = ref_sort({"k": 1}, docs)[:limit]
    assert ids({"k": 1}, docs, limit=limit, mem_limit=mem_limit, allow_disk=allow_disk,
               tmpdir=str(tmp_path)) == want


def test_limit_bounds_memory():
    # 10,000 documents through a 4 KB sorter: only the kept 5 count
    docs = many_docs(10000)
    assert ids({"k": -1}, docs, limit=5, mem_limit=4096) == ref_sort({"k": -1}, docs)[:5]
    # ... but a limit too large for the memory still fails without disk
    assert sort_error({"k": -1}, docs, limit=5000, mem_limit=4096).code == 292


def test_ties_keep_insertion_order(tmp_path):
    docs = [{"_id": i, "k": i % 3} for i in range(2000)]
    want = sorted(range(2000), key=lambda i: (i % 3, i))
    assert ids({"k": 1}, docs) == want
    assert ids({"k": 1}, docs, mem_limit=400, allow_disk=True, tmpdir=str(tmp_path)) == want
    assert ids({"k": 1}, docs, mem_limit=400, allow_disk=True, tmpdir=str(tmp_path),
               limit=700) == want[:700]


def test_bad_tmpdir(tmp_path):
    e = sort_error({"k": 1}, many_docs(100), mem_limit=100, allow_disk=True,
                   tmpdir=str(tmp_path / "does-not-exist"))
    assert e.code == 1 and "sort spill file create" in str(e)
