"""Keys tested against the bounds of fields past an index scan's ranges
(plan_exec.c, key_passes; mongod's IndexBoundsChecker): a scan whose key fails
such a field seeks past every key that fails alike (key_fills,
next_passing), forward or backward, instead of reading them one by one,
and starts each range at that field's first interval (start_past_ranges),
as mongod's start key does.  The answers are a collection scan's; the
keys read are far fewer, and as many as mongod examines."""
from __future__ import annotations

import random

from bson import Regex

from test_index_differential import rand_pred, rand_value, raw


def stats(db, f, hint, sort=None):
    cmd = {"find": "c", "filter": f, "hint": hint}
    if sort:
        cmd["sort"] = sort
    e = db.command("explain", cmd, verbosity="executionStats")
    st = e["executionStats"]
    node = st["executionStages"]
    while node["stage"] != "IXSCAN":
        node = node["inputStage"]
    return st["totalKeysExamined"], node["seeks"], st["nReturned"]


def ids(cursor):
    return sorted(d["_id"] for d in cursor)


def test_a_run_of_keys_failing_a_later_field_is_sought_past(client):
    db = client.t
    # 40 values of a, 50 documents each, b 0..24 twice per a
    db.c.insert_many([{"_id": i, "a": i % 40, "b": (i // 40) % 25} for i in range(2000)])
    db.c.create_index([("a", 1), ("b", 1)], name="ab")
    db.c.create_index([("a", 1), ("b", -1)], name="ab_desc")
    f = {"a": {"$gte": 10, "$lt": 20}, "b": 7}
    want = ids(db.c.find(f).hint({"$natural": 1}))
    assert len(want) == 20
    for hint in ("ab", "ab_desc"):
        assert ids(db.c.find(f).hint(hint).batch_size(3)) == want
        # the start key is {a: 10, b: 7}; then per value of a: the two
        # b 7, b 8 (it seeks to the next a), that a's b 0 (it seeks to b
        # 7), as mongod's IndexBoundsChecker; the last b 0 is past the
        # range.  Every key of the range would be 500.
        assert stats(db, f, hint) == (2 + 10 * 4 - 2, 1 + 10 * 2 - 1, 20), hint
        # backward (the sort reversed): the same from the other end
        back = {"a": -1, "b": -1} if hint == "ab" else {"a": -1, "b": 1}
        got = [d["_id"] for d in db.c.find(f).hint(hint).sort(list(back.items())).batch_size(3)]
        assert sorted(got) == want and len(got) == 20
        # a's end 20 is excluded: the scan starts at the last key below
        # it, a 19's b 24, which seeks to b 7 (mongod's start key of an
        # excluded end holds nothing past it either): one key, one seek more
        assert stats(db, f, hint, back) == (10 * 4 + 1, 1 + 10 * 2, 20), hint
    # both ends included: each direction starts at {a: 10 or 19, b: 7}
    f = {"a": {"$gte": 10, "$lte": 19}, "b": 7}
    for hint in ("ab", "ab_desc"):
        back = {"a": -1, "b": -1} if hint == "ab" else {"a": -1, "b": 1}
        assert ids(db.c.find(f).hint(hint).sort(list(back.items()))) == want
        assert stats(db, f, hint) == stats(db, f, hint, back) == (40, 20, 20), hint
    # several intervals: each gap is a run to seek past
    f = {"a": {"$gte": 10, "$lt": 20}, "b": {"$in": [3, 17, 30]}}
    want = ids(db.c.find(f).hint({"$natural": 1}))
    for hint in ("ab", "ab_desc"):
        assert ids(db.c.find(f).hint(hint)) == want
        keys, seeks, n = stats(db, f, hint)
        assert n == len(want) == 40 and keys < 150 and seeks > 20, (hint, keys, seeks)
    got = [d["_id"] for d in db.c.find(f).hint("ab").sort([("a", -1), ("b", -1)])]
    assert sorted(got) == want and len(got) == 40
    keys, seeks, _ = stats(db, f, "ab", {"a": -1, "b": -1})
    assert keys < 150 and seeks > 20, (keys, seeks)


def test_ranges_past_the_ranges_both_ways(client):
    """A range on the tested field, with values of other types on both
    sides of it: each scan direction over each field direction lands at
    the range's near end, and keeps all of it."""
    db = client.t
    db.c.insert_many([{"_id": i, "a": i % 5,
                       "b": (i // 5) % 20 if i % 7 else rng_other(i)} for i in range(400)])
    db.c.create_index([("a", 1), ("b", 1)], name="ab")
    db.c.create_index([("a", 1), ("b", -1)], name="ab_desc")
    for f in ({"a": {"$gte": 1, "$lte": 3}, "b": {"$gt": 3, "$lte": 12}},
              {"a": {"$gte": 1, "$lte": 3}, "b": {"$gte": 3, "$lt": 12}},
              {"a": {"$gt": 0}, "b": {"$in": [2, 5, 9, "s7"]}},
              {"a": {"$lt": 4}, "b": {"$lt": 6}}):
        want = ids(db.c.find(f).hint({"$natural": 1}))
        for hint, forward, backward in (("ab", {"a": 1, "b": 1}, {"a": -1, "b": -1}),
                                        ("ab_desc", {"a": 1, "b": -1}, {"a": -1, "b": 1})):
            for order in (forward, backward):
                got = [d["_id"] for d in
                       db.c.find(f).hint(hint).sort(list(order.items())).batch_size(4)]
                assert sorted(got) == want, (f, hint, order)
                keys, seeks, n = stats(db, f, hint, order)
                assert n == len(want) and seeks > 1, (f, hint, order, seeks)


def rng_other(i):
    """A value of another type than the ints: below them or above."""
    return [None, "s%d" % i, {"x": i}, True][i % 4]


def test_keys_with_fields_before_of_their_own_are_each_sought_past(client):
    db = client.t
    db.c.insert_many([{"_id": i, "b": i % 9} for i in range(900)])
    db.c.create_index([("_id", 1), ("b", 1)], name="id_b")
    f = {"_id": {"$gte": 100, "$lt": 400}, "b": 4}
    assert ids(db.c.find(f).hint("id_b")) == ids(db.c.find(f).hint({"$natural": 1}))
    # the start key {_id: 100, b: 4} is past _id 100's key (b 1); of the
    # 299 keys after it, each of the 266 that fail b is sought past, as
    # mongod does; the key past the range ends the scan
    assert stats(db, f, "id_b") == (299 + 1, 1 + 266, 33)
    back = {"_id": -1, "b": -1}
    assert [d["_id"] for d in db.c.find(f).hint("id_b").sort(list(back.items()))] == \
        [i for i in range(399, 99, -1) if i % 9 == 4]
    # backward from the excluded end 400: 399's key (b 3) is examined and
    # sought past as well, and 99's ends the scan
    assert stats(db, f, "id_b", back) == (1 + 299 + 1, 1 + 1 + 266, 33)
    # an included end: {_id: 401, b: 4} is where the backward scan
    # starts, past 401's key (b 5); the excluded end 402 reads it
    f = {"_id": {"$gte": 100, "$lte": 401}, "b": 4}
    assert stats(db, f, "id_b", back) == (301 + 1, 1 + 267, 34)
    f = {"_id": {"$gte": 100, "$lt": 402}, "b": 4}
    assert stats(db, f, "id_b", back) == (1 + 301 + 1, 1 + 1 + 267, 34)


def test_sought_scans_answer_as_collection_scans(client):
    rng = random.Random(41)
    db = client.t

    def doc(i):
        d = {"_id": i, "a": rng.randint(0, 12), "c": rng.choice([1, 2, "x"])}
        if rng.random() < 0.9:
            d["b"] = rand_value(rng)  # arrays too: b is multikey
        return raw(d)

    db.c.insert_many([doc(i) for i in range(600)])
    specs = [[("a", 1), ("b", 1)], [("a", 1), ("b", -1)], [("a", -1), ("c", 1), ("b", 1)],
             [("c", 1), ("a", 1), ("b", -1)]]
    for spec in specs:
        db.c.create_index(spec)
    sought = sought_back = 0
    for q in range(120):
        f = {"a": rng.choice([{"$gte": rng.randint(0, 6), "$lte": rng.randint(6, 12)},
                              {"$gt": rng.randint(0, 10)}, {"$in": [1, 5, 9]}]),
             "b": rand_pred(rng, "b")}
        if rng.random() < 0.3:
            f["c"] = rng.choice([1, {"$in": [1, "x"]}, {"$gte": 2}])
        if rng.random() < 0.1:
            f["b"] = rng.choice([Regex("^a"), {"$in": ["a", Regex("b$"), 3]}])
        want = ids(db.c.find(f).hint({"$natural": 1}))
        for spec in specs:
            batch = rng.choice([1, 2, 5, 1000])
            assert ids(db.c.find(f).hint(spec).batch_size(batch)) == want, (f, spec)
            assert db.command("count", "c", query=f, hint=dict(spec))["n"] == len(want), f
            order = [(k, -d) for k, d in spec]  # a backward scan
            got = [d["_id"] for d in db.c.find(f).hint(spec).sort(order).batch_size(batch)]
            assert sorted(got) == want, (f, spec)
            sought += stats(db, f, dict(spec))[1] > 1
            sought_back += stats(db, f, dict(spec), dict(order))[1] > 1
        if q % 40 == 39:
            for _ in range(30):
                i = rng.randrange(620)
                db.c.replace_one({"_id": i}, doc(i), upsert=True)
    assert sought > 100 and sought_back > 100, (sought, sought_back)


def test_a_distinct_scan_seeks_past_keys_failing_a_later_field(client):
    """DISTINCT_SCAN reads keys as an IXSCAN does: in each group of the
    distinct field, a run of keys failing the next field's bounds is sought
    past (mongod's DISTINCT_SCAN checks its bounds alike)."""
    db = client.t
    # 50 values of a, 400 keys each, b 0..399
    db.c.insert_many([{"_id": i, "a": i % 50, "b": (i // 50) % 400} for i in range(20000)])
    db.c.create_index([("a", 1), ("b", 1)], name="ab")
    for q, nvalues in (({"a": {"$gte": 0}, "b": 7}, 50),
                       ({"a": {"$gte": 10}, "b": {"$in": [7, 300]}}, 40),
                       ({"a": {"$lt": 45}, "b": {"$gte": 398}}, 45)):
        e = db.command("explain", {"distinct": "c", "key": "a", "query": q},
                       verbosity="executionStats")
        node, stages = e["queryPlanner"]["winningPlan"], []
        while node:
            stages.append(node["stage"])
            node = node.get("inputStage")
        assert stages[-1] == "DISTINCT_SCAN", (q, stages)
        got = db.c.distinct("a", q)
        assert sorted(got) == sorted(db.c.distinct("a", q, hint={"$natural": 1}))
        assert len(got) == nvalues
        # a few keys a group where there were 400
        assert e["executionStats"]["totalKeysExamined"] <= 6 * nvalues, q
