"""$in and $nin with long lists (csrc/query/match.c in_list): a list of
IN_SORT_MIN (8) elements or more is sorted once and binary-searched per
value; a shorter one is tried element by element.  Both must answer every
document alike, so each query with a long list is compared with the same
list cut into short pieces ($or of short $in, $and of short $nin), over
values of every kind that compare across types (numbers of four types,
NaN, null and missing, strings under a collation, arrays, documents,
regexes in the list)."""
from __future__ import annotations

import datetime
import math
import random
import time

import pytest
from bson import Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex
from pymongo.collation import Collation

POOL = [
    0, 1, 2, -1, 7, 1 << 40, Int64(1), Int64(2), Int64(1 << 40), 1.0, 2.5, -0.0, float("nan"),
    float("inf"), Decimal128("1"), Decimal128("2.50"), Decimal128("NaN"), None, "a", "A", "b",
    "B", "abc", "ABC", "", [], [1], [1, 2], [2, 1], ["a"], {"x": 1}, {"x": 1.0}, {"y": 1},
    True, False, datetime.datetime(2020, 1, 1), ObjectId("5f0000000000000000000001"),
    MinKey(), MaxKey(), Regex("^a"),
]


def _values(rng: random.Random) -> object:
    """A document's value: a pool value, or an array of a few."""
    if rng.random() < 0.25:
        return [rng.choice(POOL) for _ in range(rng.randrange(4))]
    return rng.choice(POOL)


@pytest.fixture
def coll(client):
    rng = random.Random(11)
    c = client.inlist.docs
    docs = [{"_id": i, "f": _values(rng)} for i in range(400)]
    docs += [{"_id": 400 + i} for i in range(10)]  # missing f
    c.insert_many(docs)
    return c


def _ids(coll, flt, **kw):
    return sorted(d["_id"] for d in coll.find(flt, {"_id": 1}, **kw))


def _chunks(lst, n=5):
    return [lst[i:i + n] for i in range(0, len(lst), n)]


@pytest.mark.parametrize("case_insensitive", [False, True])
def test_long_in_and_nin_agree_with_short_lists(coll, case_insensitive):
    kw = {"collation": Collation("en", strength=2)} if case_insensitive else {}
    rng = random.Random(case_insensitive)
    for round_no in range(60):
        lst = [rng.choice(POOL) for _ in range(rng.randrange(8, 40))]
        if rng.random() < 0.3:
            lst.append(Regex("^a", "i"))
        short_in = {"$or": [{"f": {"$in": ch}} for ch in _chunks(lst)]}
        short_nin = {"$and": [{"f": {"$nin": ch}} for ch in _chunks(lst)]}
        got_in = _ids(coll, {"f": {"$in": lst}}, **kw)
        assert got_in == _ids(coll, short_in, **kw), (round_no, lst)
        got_nin = _ids(coll, {"f": {"$nin": lst}}, **kw)
        assert got_nin == _ids(coll, short_nin, **kw), (round_no, lst)
        assert set(got_in).isdisjoint(got_nin)
        assert len(got_in) + len(got_nin) == 410


def test_long_list_matches_what_mongod_matches(coll):
    """Spot answers from mongod's rules, with a list long enough to sort."""
    filler = [1000 + i for i in range(20)]
    # numbers compare by value across types; NaN equals NaN
    ids = _ids(coll, {"f": {"$in": filler + [Decimal128("1"), float("nan")]}})
    for d in coll.find({"_id": {"$in": ids}}):
        vals = d["f"] if isinstance(d["f"], list) else [d["f"]]
        assert any(isinstance(v, (int, float, Decimal128)) and not isinstance(v, bool)
                   and (float(str(v)) == 1 or math.isnan(float(str(v)))) for v in vals), d
    # null matches missing fields
    assert set(range(400, 410)) <= set(_ids(coll, {"f": {"$in": filler + [None]}}))
    # a whole array value, and an array's element
    assert _ids(coll, {"f": {"$in": filler + [[1, 2]]}}) == sorted(
        d["_id"] for d in coll.find({"f": {"$eq": [1, 2]}}))


def test_many_ids(client):
    """The case that made the change: find by a few thousand _ids.  Each
    candidate costs a binary search, not a pass over the list."""
    c = client.inlist.big
    c.insert_many([{"_id": i, "v": i % 7} for i in range(8000)])
    ids = list(range(0, 8000, 2))
    t = time.perf_counter()
    got = [d["_id"] for d in c.find({"_id": {"$in": ids}, "v": {"$ne": 3}})]
    elapsed = time.perf_counter() - t
    assert got == [i for i in ids if i % 7 != 3]
    print(f"\n4,000-id $in over 8,000 documents: {elapsed * 1e3:.0f} ms")
