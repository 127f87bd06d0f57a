"""Keys tested against the bounds of fields past an index scan's ranges
(plan.c, key_passes; mongod's IndexBoundsChecker): a forward scan whose
key fails such a field as the key before did seeks past every key that
fails alike (key_fills, next_passing), instead of reading them one by one.
The answers are a collection scan's; the keys read are far fewer."""
from __future__ import annotations

import random

from bson import Regex

from test_index_differential import rand_pred, rand_value, raw


def stats(db, f, hint):
    e = db.command("explain", {"find": "c", "filter": f, "hint": hint},
                   verbosity="executionStats")
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
        # per value of a: b 0 twice (the second seeks to b 7), the two
        # b 7, then b 8 twice (the second seeks to the next a); and the
        # key past the range.  Every key of the range would be 500.
        assert stats(db, f, hint) == (10 * 6 + 1, 1 + 10 * 2, 20), hint
    # several intervals: each gap is a run to seek past
    f = {"a": {"$gte": 10, "$lt": 20}, "b": {"$in": [3, 17, 30]}}
    want = ids(db.c.find(f).hint({"$natural": 1}))
    for hint in ("ab", "ab_desc"):
        assert ids(db.c.find(f).hint(hint)) == want
        keys, seeks, n = stats(db, f, hint)
        assert n == len(want) == 40 and keys < 150 and seeks > 20, (hint, keys, seeks)
    # a backward scan (the sort) reads every key of the range, as before
    got = [d["_id"] for d in db.c.find(f).hint("ab").sort([("a", -1), ("b", -1)])]
    assert sorted(got) == want and len(got) == 40


def test_keys_with_fields_before_of_their_own_are_stepped(client):
    db = client.t
    db.c.insert_many([{"_id": i, "b": i % 9} for i in range(900)])
    db.c.create_index([("_id", 1), ("b", 1)], name="id_b")
    f = {"_id": {"$gte": 100, "$lt": 400}, "b": 4}
    assert ids(db.c.find(f).hint("id_b")) == ids(db.c.find(f).hint({"$natural": 1}))
    # no two failing keys share their _id: nothing to seek past
    assert stats(db, f, "id_b") == (301, 1, 33)


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
    sought = 0
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
            order = [(k, -d) for k, d in spec]  # backward: every key, no seeks
            assert ids(db.c.find(f).hint(spec).sort(order)) == want, (f, spec)
            keys, seeks, _ = stats(db, f, dict(spec))
            sought += seeks > 1
        if q % 40 == 39:
            for _ in range(30):
                i = rng.randrange(620)
                db.c.replace_one({"_id": i}, doc(i), upsert=True)
    assert sought > 100, sought
