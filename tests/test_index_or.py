"""A rooted $or whose every clause an index serves runs as an OR of index
scans (plan.c, plan_or; mongod's SUBPLAN over FETCH over OR): each clause's
scan gives its candidates to the whole filter, and a document two clauses
find is returned once -- across getMores, in updates and deletes, and in
counts."""
from __future__ import annotations

import random

from test_index_differential import rand_doc, rand_pred, raw

INDEXES = [[("a", 1)], [("b", -1)], [("c.d", 1)], [("tags", 1)], [("a", 1), ("b", 1)]]


def winning(db, coll, f):
    return db.command("explain", {"find": coll, "filter": f})["queryPlanner"]["winningPlan"]


def rand_clause(rng):
    field = rng.choice(["a", "b", "c.d", "tags", "_id", "e"])  # e: no index
    if field == "tags":
        return {"tags": rng.choice(["x", {"$in": ["y", "w"]}, {"$gt": "x"}])}
    if field == "_id":
        return {"_id": rng.randrange(320)}
    clause = {field: rand_pred(rng, field)}
    if rng.random() < 0.3:
        clause["b" if field != "b" else "a"] = rand_pred(rng, "b")
    return clause


def ids(cursor):
    return sorted(d["_id"] for d in cursor)


def test_or_of_index_scans_equals_collection_scan(client):
    rng = random.Random(17)
    db = client.t
    db.c.insert_many([raw(rand_doc(rng, i)) for i in range(300)])
    for spec in INDEXES:
        db.c.create_index(spec)
    ors = 0
    for q in range(200):
        f = {"$or": [rand_clause(rng) for _ in range(rng.randint(1, 4))]}
        r = rng.random()
        if r < 0.2:
            f["e"] = rand_pred(rng, "e")  # no index: a contained $or
        elif r < 0.3:
            f["b"] = rand_pred(rng, "b")
        elif r < 0.45:  # the same, inside a $and
            f = {"$and": [{"e": rand_pred(rng, "e")}, f]}
        want = ids(db.c.find(f).hint({"$natural": 1}))
        batch = rng.choice([1, 3, 7, 1000])
        assert ids(db.c.find(f).batch_size(batch)) == want, f
        assert db.command("count", "c", query=f)["n"] == len(want), f
        sort = [("b", 1), ("_id", -1)]
        assert ([d["_id"] for d in db.c.find(f).sort(sort).batch_size(batch)]
                == [d["_id"] for d in db.c.find(f).sort(sort).hint({"$natural": 1})]), f
        w = winning(db, "c", f)
        ors += (w.get("inputStage", {}).get("stage") == "OR"
                or w.get("inputStage", {}).get("inputStage", {}).get("stage") == "OR")
        if q % 40 == 39:  # change documents under the indexes, then go on
            for _ in range(15):
                i = rng.randrange(320)
                db.c.replace_one({"_id": i}, raw(rand_doc(rng, i)), upsert=True)
    assert ors > 60, ors  # the OR plan is what most of these ran as


def test_or_returns_a_document_once_and_counts_its_work(client):
    db = client.t
    db.c.insert_many([{"_id": i, "a": i % 10, "tags": [i % 3, i % 5]} for i in range(100)])
    db.c.create_index("a")
    db.c.create_index("tags")
    f = {"$or": [{"a": {"$lt": 3}}, {"tags": 1}, {"a": 2}]}
    want = ids(db.c.find(f).hint({"$natural": 1}))
    assert ids(db.c.find(f).batch_size(2)) == want
    e = db.command("explain", {"find": "c", "filter": f}, verbosity="executionStats")
    st = e["executionStats"]
    assert st["nReturned"] == len(want)
    sub = e["executionStats"]["executionStages"]
    assert sub["stage"] == "SUBPLAN"
    ors = sub["inputStage"]["inputStage"]
    assert ors["stage"] == "OR" and len(ors["inputStages"]) == 3
    kids = ors["inputStages"]
    found = [k["nReturned"] for k in kids]
    # each clause's scan returns what matches the whole filter; the OR
    # drops what an earlier clause returned (all of a == 2's ten)
    assert ors["dupsTested"] == sum(found)
    assert ors["dupsDropped"] == sum(found) - len(want)
    assert found[2] == 10 and ors["dupsDropped"] >= 10
    assert st["totalKeysExamined"] == sum(
        (k.get("inputStage") or k)["keysExamined"] for k in kids)
    stats = {s["name"]: s["accesses"]["ops"] for s in db.c.aggregate([{"$indexStats": {}}])}
    assert stats["a_1"] >= 1 and stats["tags_1"] >= 1


def test_updates_and_deletes_through_an_or_touch_each_document_once(client):
    db = client.t
    db.c.insert_many([{"_id": i, "a": i, "b": i % 7, "n": 0} for i in range(200)])
    db.c.create_index("a")
    db.c.create_index("b")
    # the update moves documents within both indexes the OR reads
    f = {"$or": [{"a": {"$lt": 50}}, {"b": 3}]}
    want = ids(db.c.find(f).hint({"$natural": 1}))
    assert winning(db, "c", f)["stage"] == "SUBPLAN"
    r = db.c.update_many(f, {"$inc": {"n": 1, "a": 1000, "b": 0}})
    assert r.matched_count == r.modified_count == len(want)
    assert sorted(d["_id"] for d in db.c.find({"n": 1})) == want
    assert db.c.count_documents({"n": {"$gt": 1}}) == 0
    r = db.c.delete_many({"$or": [{"a": {"$gte": 1000, "$lt": 1010}}, {"b": 3}]})
    assert r.deleted_count == len({i for i in want if i < 10} | {i for i in want if i % 7 == 3})
    v = db.command("validate", "c")
    assert v["valid"] is True
