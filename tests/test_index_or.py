"""A rooted $or whose every clause an index serves runs as an OR of index
scans (plan_or.c, plan_or; mongod's SUBPLAN over FETCH over OR): each clause's
scan gives its candidates to the whole filter, and a document two clauses
find is returned once -- across getMores, in updates and deletes, and in
counts."""
from __future__ import annotations

import random

import pytest
from bson import Regex

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


# ---------------------------------------------------------------- contained $or
# Conditions beside a $or narrow its clauses' bounds where a clause's index
# holds them (mongod's contained-$or pushdown): {t: 5, $or: [{o: 3}, {s: 3}]}
# on {t: 1, o: 1} and {t: 1, s: 1} reads t 5's o 3 and t 5's s 3 keys only.

def bounds_of(stage):
    ix = stage if stage["stage"] == "IXSCAN" else stage["inputStage"]
    return ix["indexName"], ix["indexBounds"]


def or_stage(plan):
    """The OR under a plan's FETCH (or SUBPLAN, FETCH), or None."""
    node = plan
    while node is not None and node.get("stage") != "OR":
        node = node.get("inputStage")
    return node


def tenant_docs(n=2000):
    return [{"_id": i, "t": i % 20, "o": i % 7, "s": i % 11, "d": i % 3,
             "m": [i % 5, i % 5 + 1] if i % 4 == 0 else i % 5} for i in range(n)]


def test_conditions_beside_a_or_narrow_its_clauses_bounds(client):
    db = client.t
    db.c.insert_many(tenant_docs())
    db.c.create_index([("t", 1), ("o", 1)], name="t_o")
    db.c.create_index([("t", 1), ("s", 1)], name="t_s")
    for f, fetch_filter in (
            ({"t": 5, "$or": [{"o": 3}, {"s": 3}]}, None),
            ({"$and": [{"t": 5}, {"$or": [{"o": 3}, {"s": 3}]}]}, None),
            ({"t": 5, "d": 1, "$or": [{"o": 3}, {"s": 3}]}, {"d": 1})):
        want = ids(db.c.find(f).hint({"$natural": 1}))
        assert ids(db.c.find(f).batch_size(3)) == want, f
        assert db.command("count", "c", query=f)["n"] == len(want), f
        e = db.command("explain", {"find": "c", "filter": f}, verbosity="executionStats")
        plan = e["queryPlanner"]["winningPlan"]
        # FETCH over OR, no SUBPLAN: the $or is not the whole filter; t is
        # answered by every clause's bounds, so only d stays in the filter
        assert plan["stage"] == "FETCH" and plan.get("filter") == fetch_filter, plan
        kids = plan["inputStage"]["inputStages"]
        assert [bounds_of(k) for k in kids] == [
            ("t_o", {"t": ["[5, 5]"], "o": ["[3, 3]"]}),
            ("t_s", {"t": ["[5, 5]"], "s": ["[3, 3]"]})]
        # the keys read are those of the two points, nothing of t 5's others
        n_o = sum(1 for i in range(2000) if i % 20 == 5 and i % 7 == 3)
        n_s = sum(1 for i in range(2000) if i % 20 == 5 and i % 11 == 3)
        assert e["executionStats"]["totalKeysExamined"] == n_o + n_s
        assert e["executionStats"]["nReturned"] == len(want)


def test_a_clause_is_served_only_by_an_index_it_bounds(client):
    db = client.t
    db.c.insert_many(tenant_docs(400))
    db.c.create_index([("t", 1), ("o", 1)], name="t_o")
    # {z: 1} bounds no index: t_o would serve it only through t, which
    # reads every key of t 5 again; mongod makes no OR plan of that
    f = {"t": 5, "$or": [{"o": 3}, {"z": 1}]}
    e = db.command("explain", {"find": "c", "filter": f})["queryPlanner"]
    plans = [e["winningPlan"]] + e["rejectedPlans"]
    assert all(or_stage(p) is None for p in plans), plans
    assert ids(db.c.find(f)) == ids(db.c.find(f).hint({"$natural": 1}))


def test_a_condition_some_clause_leaves_stays_in_the_fetch_filter(client):
    db = client.t
    db.c.insert_many(tenant_docs(600))
    db.c.create_index([("t", 1), ("o", 1)], name="t_o")
    db.c.create_index("s")
    f = {"t": {"$gte": 3, "$lt": 5}, "$or": [{"o": 2}, {"s": 4}]}
    want = ids(db.c.find(f).hint({"$natural": 1}))
    assert ids(db.c.find(f)) == want
    e = db.command("explain", {"find": "c", "filter": f})["queryPlanner"]
    plan = next(p for p in [e["winningPlan"]] + e["rejectedPlans"] if or_stage(p))
    ors = or_stage(plan)
    # s_1 holds no t: its clause reads all of s 4, and t stays in FETCH
    assert plan["filter"] == {"t": {"$gte": 3, "$lt": 5}}
    assert [bounds_of(k) for k in ors["inputStages"]] == [
        ("t_o", {"t": ["[3, 5)"], "o": ["[2, 2]"]}),
        ("s_1", {"s": ["[4, 4]"]})]


def test_contained_or_pushdown_equals_collection_scan(client):
    """Random $or queries beside conditions, over compound indexes that
    share a leading field, multikey in their other fields; the answers,
    counts and sorted orders are a collection scan's."""
    rng = random.Random(29)
    db = client.t
    docs = []
    for i in range(400):
        d = rand_doc(rng, i)
        if rng.random() < 0.9:  # never an array: a, tags and c are (parallel arrays)
            d["t"] = rng.choice([rng.randint(0, 5), rng.randint(0, 5) + 0.5, None, "a"])
        docs.append(raw(d))
    db.c.insert_many(docs)
    for spec in ([("t", 1), ("a", 1)], [("t", 1), ("b", -1)], [("t", -1), ("c.d", 1)],
                 [("a", 1)], [("t", 1), ("tags", 1), ("b", 1)]):
        db.c.create_index(spec)
    pushed = 0
    for q in range(150):
        clauses = []
        for _ in range(rng.randint(1, 3)):
            field = rng.choice(["a", "b", "c.d", "tags", "t"])
            clauses.append({field: rand_pred(rng, field)})
        f = {"t": rand_pred(rng, "a"), "$or": clauses}
        if rng.random() < 0.3:
            f["b"] = rand_pred(rng, "b")
        if rng.random() < 0.3:
            f = {"$and": [{k: v} for k, v in f.items()]}
        want = ids(db.c.find(f).hint({"$natural": 1}))
        batch = rng.choice([1, 4, 1000])
        assert ids(db.c.find(f).batch_size(batch)) == want, f
        assert db.command("count", "c", query=f)["n"] == len(want), f
        sort = [("a", 1), ("_id", 1)]
        assert ([d["_id"] for d in db.c.find(f).sort(sort).batch_size(batch)]
                == [d["_id"] for d in db.c.find(f).sort(sort).hint({"$natural": 1})]), f
        e = db.command("explain", {"find": "c", "filter": f})["queryPlanner"]
        for p in [e["winningPlan"]] + e["rejectedPlans"]:
            ors = or_stage(p)
            if ors is not None:  # kids in clause order: t pushed into another's bounds
                pushed += any("t" in bounds_of(k)[1] and "t" not in c
                              for k, c in zip(ors["inputStages"], clauses))
        if q % 50 == 49:
            for _ in range(20):
                i = rng.randrange(420)
                d = rand_doc(rng, i)
                d["t"] = rng.randint(0, 5)
                db.c.replace_one({"_id": i}, raw(d), upsert=True)
    assert pushed > 20, pushed


def test_each_or_of_a_and_is_a_candidate(client):
    """Of a $and of $ors, the first that indexes serve makes an OR plan when
    no index serves the rest, and every other that indexes serve is a
    candidate beside it: the trials take the one that reads fewer keys
    (mongod's planner enumerates an indexed OR for each)."""
    db = client.t
    db.c.insert_many([{"_id": i, "a": i % 10, "b": i % 11, "c": i % 97, "d": i % 89,
                       "e": i % 3} for i in range(3000)])
    for f in "abcd":
        db.c.create_index(f)
    wide = {"$or": [{"a": 1}, {"b": 1}]}    # about 570 keys
    narrow = {"$or": [{"c": 1}, {"d": 1}]}  # about 65 keys
    unserved = {"$or": [{"e": 1}, {"a": 2}]}  # e has no index
    def check(f, want_indexes, rejected_or_indexes):
        want = ids(db.c.find(f).hint({"$natural": 1}))
        assert ids(db.c.find(f)) == want and want, f
        assert db.command("count", "c", query=f)["n"] == len(want)
        e = db.command("explain", {"find": "c", "filter": f}, verbosity="allPlansExecution")
        qp = e["queryPlanner"]
        won = or_stage(qp["winningPlan"])
        assert won is not None, f
        assert [bounds_of(k)[0] for k in won["inputStages"]] == want_indexes, f
        rejected = [[bounds_of(k)[0] for k in or_stage(p)["inputStages"]]
                    for p in qp["rejectedPlans"]]
        assert rejected == rejected_or_indexes, f
        trials = e["executionStats"]["allPlansExecution"]
        assert len(trials) == (1 + len(rejected) if rejected else 0)  # none: one plan
        if trials:
            assert trials[0]["score"] == max(t["score"] for t in trials)
    check({"$and": [wide, narrow]}, ["c_1", "d_1"], [["a_1", "b_1"]])
    check({"$and": [narrow, wide]}, ["c_1", "d_1"], [["a_1", "b_1"]])
    check({**wide, "$and": [narrow]}, ["c_1", "d_1"], [["a_1", "b_1"]])
    # the first $or has a clause no index serves: the next one is planned
    check({"$and": [unserved, narrow]}, ["c_1", "d_1"], [])
    check({"$and": [unserved, wide, narrow]}, ["c_1", "d_1"], [["a_1", "b_1"]])
    # the plan cache keeps the winning $or, and a query of its shape runs it
    f = {"$and": [wide, {"$or": [{"c": 2}, {"d": 2}]}]}
    for _ in range(2):
        assert ids(db.c.find(f)) == ids(db.c.find(f).hint({"$natural": 1}))
    qh = db.command("explain", {"find": "c", "filter": f})["queryPlanner"]["queryHash"]
    (entry,) = [x for x in db.c.aggregate([{"$planCacheStats": {}}]) if x["queryHash"] == qh]
    assert [bounds_of(k)[0] for k in or_stage(entry["cachedPlan"])["inputStages"]] == \
        ["c_1", "d_1"]
    assert len(entry["creationExecStats"]) == 2


def test_and_of_ors_equals_collection_scan(client):
    """Random $ands of two or three $ors (each planned as an OR candidate
    where indexes serve it): the answers, counts and sorted orders are a
    collection scan's."""
    rng = random.Random(31)
    db = client.t
    db.c.insert_many([raw(rand_doc(rng, i)) for i in range(300)])
    for spec in INDEXES:
        db.c.create_index(spec)
    for q in range(120):
        ors = [{"$or": [rand_clause(rng) for _ in range(rng.randint(1, 3))]}
               for _ in range(rng.randint(2, 3))]
        f = {"$and": ors} if rng.random() < 0.7 else {**ors[0], "$and": ors[1:]}
        want = ids(db.c.find(f).hint({"$natural": 1}))
        batch = rng.choice([1, 5, 1000])
        assert ids(db.c.find(f).batch_size(batch)) == want, f
        assert db.command("count", "c", query=f)["n"] == len(want), f
        sort = [("b", 1), ("_id", -1)]
        assert ([d["_id"] for d in db.c.find(f).sort(sort).batch_size(batch)]
                == [d["_id"] for d in db.c.find(f).sort(sort).hint({"$natural": 1})]), f


def test_each_clause_of_an_or_runs_its_own_trials(client):
    """A clause of a $or that several indexes serve is decided by its own
    trials when the OR first reads it (mongod's subplanner multi-plans
    each clause): {a: 1, b: {$gte: 2990}} takes b_1 (a few keys), not the
    a_1 that the ranking alone puts first (2,700 keys); explain shows the
    clause's winner at every verbosity; returnKey gives the winner's keys,
    those of its trial's rows too; $indexStats counts the winner once."""
    db = client.t
    db.mp.insert_many([{"_id": i, "a": 1 if i % 10 else 2, "b": i, "c": i % 100}
                       for i in range(3000)])
    for f in "abc":
        db.mp.create_index(f)
    q = {"$or": [{"a": 1, "b": {"$gte": 2990}}, {"c": 5}]}
    want = ids(db.mp.find(q).hint({"$natural": 1}))
    assert len(want) == 39
    for batch in (1, 2, 1000):
        assert ids(db.mp.find(q).batch_size(batch)) == want
    assert db.command("count", "mp", query=q)["n"] == 39
    for verbosity in ("queryPlanner", "executionStats"):
        e = db.command("explain", {"find": "mp", "filter": q}, verbosity=verbosity)
        kids = or_stage(e["queryPlanner"]["winningPlan"])["inputStages"]
        assert [bounds_of(k)[0] for k in kids] == ["b_1", "c_1"], verbosity
    assert e["executionStats"]["totalKeysExamined"] < 60
    r = db.command("find", "mp", filter=q, returnKey=True, batchSize=2)
    assert r["cursor"]["firstBatch"] == [{"b": 2991}, {"b": 2992}]
    keys = r["cursor"]["firstBatch"] + db.command(
        "getMore", r["cursor"]["id"], collection="mp")["cursor"]["nextBatch"]
    assert sorted(k.get("b", -1) for k in keys if "b" in k) == [
        i for i in range(2990, 3000) if i % 10]
    assert sum("c" in k for k in keys) == 30
    ops = {x["name"]: x["accesses"]["ops"] for x in db.mp.aggregate([{"$indexStats": {}}])}
    assert ops["a_1"] == 0 and ops["b_1"] == ops["c_1"] == 5  # 3 finds, count, find
    # the OR as a trial against c_1's plan: it wins, and its clause's own
    # trials count b_1 alone
    q2 = {"c": {"$lt": 50}, **q}
    assert ids(db.mp.find(q2)) == ids(db.mp.find(q2).hint({"$natural": 1}))
    e = db.command("explain", {"find": "mp", "filter": q2})["queryPlanner"]
    assert [bounds_of(k)[0] for k in or_stage(e["winningPlan"])["inputStages"]] == ["b_1", "c_1"]
    ops = {x["name"]: x["accesses"]["ops"] for x in db.mp.aggregate([{"$indexStats": {}}])}
    assert ops["a_1"] == 0 and ops["b_1"] == 6


# ------------------------------------------------------------ nested $or
# A clause that is a $or alone is taken up into its OR ({$or: [{$or: [a,
# b]}, c]} scans as {$or: [a, b, c]}, mongod's canonical form); a clause
# no index serves but whose own $or indexes serve is an OR of its own
# (mongod plans a contained $or in a clause so).

def index_names(stage):
    """The indexes under a plan stage, depth first."""
    if stage["stage"] == "IXSCAN":
        return [stage["indexName"]]
    kids = stage.get("inputStages") or [stage["inputStage"]]
    return [n for k in kids for n in index_names(k)]


def nested_docs(n=3000):
    return [{"_id": i, "a": i % 10, "b": i % 7, "c": i % 13, "d": i % 17, "x": i % 2}
            for i in range(n)]


def nested_coll(db, indexes="abcd"):
    """db.c with nested_docs() and an index on each of `indexes`; the docs."""
    docs = nested_docs()
    db.c.insert_many(docs)
    for spec in indexes:
        db.c.create_index(spec)
    return docs


def test_a_nested_or_alone_is_taken_up_into_its_or(client):
    db = client.t
    docs = nested_coll(db)
    for q in ({"$or": [{"$or": [{"a": 1}, {"$or": [{"b": 2}]}]}, {"c": 3}]},
              {"$or": [{"$and": [{"$or": [{"a": 1}, {"b": 2}]}]}, {"c": 3}]}):
        check_flattened(db, docs, q)
    # a clause of the nested $or that no index serves: a collection scan
    q2 = {"$or": [{"$or": [{"a": 1}, {"x": 1}]}, {"c": 3}]}
    assert winning(db, "c", q2)["stage"] == "COLLSCAN"
    assert ids(db.c.find(q2)) == [d["_id"] for d in docs
                                  if d["a"] == 1 or d["x"] == 1 or d["c"] == 3]


def check_flattened(db, docs, q):
    want = [d["_id"] for d in docs if d["a"] == 1 or d["b"] == 2 or d["c"] == 3]
    for batch in (1, 5, 1000):
        assert ids(db.c.find(q).batch_size(batch)) == want
    assert db.command("count", "c", query=q)["n"] == len(want)
    e = db.command("explain", {"find": "c", "filter": q}, verbosity="executionStats")
    plan = e["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "SUBPLAN"
    kids = or_stage(plan)["inputStages"]
    assert [k["stage"] for k in kids] == ["IXSCAN"] * 3
    assert [bounds_of(k) for k in kids] == [("a_1", {"a": ["[1, 1]"]}),
                                            ("b_1", {"b": ["[2, 2]"]}),
                                            ("c_1", {"c": ["[3, 3]"]})]
    st = e["executionStats"]
    assert st["nReturned"] == len(want)
    assert st["totalKeysExamined"] == 300 + 429 + 231


def test_a_clause_whose_own_or_indexes_serve_is_an_or_of_its_own(client):
    db = client.t
    docs = nested_coll(db)
    q = {"$or": [{"$or": [{"b": 2}, {"c": 3}], "x": 1}, {"d": 3}]}
    want = [d["_id"] for d in docs
            if (d["x"] == 1 and (d["b"] == 2 or d["c"] == 3)) or d["d"] == 3]
    for batch in (1, 4, 1000):
        assert ids(db.c.find(q).batch_size(batch)) == want
    assert db.command("count", "c", query=q)["n"] == len(want)
    e = db.command("explain", {"find": "c", "filter": q}, verbosity="executionStats")
    kids = or_stage(e["queryPlanner"]["winningPlan"])["inputStages"]
    assert [k["stage"] for k in kids] == ["FETCH", "IXSCAN"]
    assert kids[0]["filter"] == {"x": 1}
    assert kids[0]["inputStage"]["stage"] == "OR"
    assert index_names(kids[0]) == ["b_1", "c_1"] and kids[1]["indexName"] == "d_1"
    assert e["executionStats"]["totalKeysExamined"] == 429 + 231 + 177
    assert e["executionStats"]["totalDocsExamined"] == 429 + 231 + 177
    # returnKey: each row's key from the index scan that found it first
    # (any scan's row is judged against the whole filter)
    keys = list(db.c.find(q, return_key=True).batch_size(3))
    got = [docs[i] for i in want]
    b2 = [d for d in got if d["b"] == 2]
    c3 = [d for d in got if d["c"] == 3 and d["b"] != 2]
    assert keys == ([{"b": 2}] * len(b2) + [{"c": 3}] * len(c3)
                    + [{"d": 3}] * (len(got) - len(b2) - len(c3)))
    ops = {x["name"]: x["accesses"]["ops"] for x in db.c.aggregate([{"$indexStats": {}}])}
    assert ops == {"_id_": 0, "a_1": 0, "b_1": 5, "c_1": 5, "d_1": 5}
    # the $ors beside a clause are not its own: no OR is made of them in it
    q3 = {"$and": [{"$or": [{"x": 1}, {"a": 2}]}, {"$or": [{"c": 1}, {"d": 1}]}]}
    assert index_names(winning(db, "c", q3)) == ["c_1", "d_1"]


@pytest.mark.parametrize("beside", [{}, {"a": {"$lt": 10}}])
def test_a_nested_or_plan_wins_its_trials_and_replays_each_key(client, beside):
    """The nested OR as a candidate beside an index plan, taken up into
    the OR or (with `beside`) an OR of its own: it wins the trials, and
    the rows its trial returned are replayed with the keys of the index
    scans that found them (returnKey), then the scan goes on."""
    db = client.t
    docs = nested_coll(db, ([("b", 1), ("a", 1)], "c", "d", "x"))
    q = {"x": {"$gte": 0},
         "$or": [{"$or": [{"b": 2, "a": {"$lt": 2}}, {"c": 3}], **beside}, {"d": 3}]}
    e = db.command("explain", {"find": "c", "filter": q}, verbosity="allPlansExecution")
    kids = or_stage(e["queryPlanner"]["winningPlan"])["inputStages"]
    assert len(kids) == (2 if beside else 3)
    assert index_names(e["queryPlanner"]["winningPlan"]) == ["b_1_a_1", "c_1", "d_1"]
    assert [index_names(p) for p in e["queryPlanner"]["rejectedPlans"]] == [["x_1"]]
    want = [d for d in docs if (d["b"] == 2 and d["a"] < 2) or d["c"] == 3 or d["d"] == 3]
    assert ids(db.c.find(q).batch_size(2)) == [d["_id"] for d in want]
    keys = list(db.c.find(q, return_key=True).batch_size(100))  # the trial's 100 rows
    b2 = [d for d in want if d["b"] == 2 and d["a"] < 2]
    c3 = [d for d in want if d["c"] == 3 and not (d["b"] == 2 and d["a"] < 2)]
    assert keys == ([{"b": 2, "a": d["a"]} for d in sorted(b2, key=lambda d: (d["a"], d["_id"]))]
                    + [{"c": 3}] * len(c3) + [{"d": 3}] * (len(want) - len(b2) - len(c3)))
    assert len(b2) < 100 < len(b2) + len(c3)  # the trial's rows span two scans


def test_a_rooted_or_caches_each_clause_winner_as_its_own_query(client):
    """mongod's subplanner caches the winner of each branch's trials under
    the branch's own shape: the clause's $planCacheStats entry is the one a
    find of the clause alone has (its queryHash), inactive when made,
    active after a second run of no more works; a contained $or's clauses
    make no entries of their own."""
    db = client.t
    db.mp.insert_many([{"_id": i, "a": 1 if i % 10 else 2, "b": i, "c": i % 100}
                       for i in range(3000)])
    for f in "abc":
        db.mp.create_index(f)
    clause = {"a": 1, "b": {"$gte": 2990}}
    q = {"$or": [clause, {"c": 5}]}
    want = ids(db.mp.find(q).hint({"$natural": 1}))
    assert ids(db.mp.find(q)) == want
    entries = list(db.mp.aggregate([{"$planCacheStats": {}}]))
    assert len(entries) == 1
    (entry,) = entries
    qh = db.command("explain", {"find": "mp", "filter": {"a": 2, "b": {"$gte": 7}}})[
        "queryPlanner"]["queryHash"]
    assert entry["queryHash"] == qh and entry["createdFromQuery"]["query"] == clause
    assert index_names(entry["cachedPlan"]) == ["b_1"] and entry["isActive"] is False
    assert ids(db.mp.find(q)) == want
    (entry,) = list(db.mp.aggregate([{"$planCacheStats": {}}]))
    assert entry["isActive"] is True
    for _ in range(3):  # from the cache now: the same answers
        assert ids(db.mp.find(q).batch_size(3)) == want
        assert ids(db.mp.find({"$or": [{"a": 1, "b": {"$gte": 2995}}, {"c": 7}]})) == ids(
            db.mp.find({"$or": [{"a": 1, "b": {"$gte": 2995}}, {"c": 7}]}).hint({"$natural": 1}))
    db.command("planCacheClear", "mp")
    # contained: the OR is planned with the condition beside it, no entry
    # of a clause's own (the whole query's, when it had trials)
    contained = {"c": {"$lt": 50}, **q}
    for _ in range(2):
        assert ids(db.mp.find(contained)) == ids(db.mp.find(contained).hint({"$natural": 1}))
    assert [e["createdFromQuery"]["query"] for e in db.mp.aggregate([{"$planCacheStats": {}}])] \
        == [contained]


def test_a_or_is_planned_in_its_canonical_form(client):
    """As mongod's MatchExpression::optimize before planning: a $or in a
    $or alone is flattened into it, a $or of one clause is that clause,
    and a $or's equalities of one path are that path's $in (one IXSCAN
    with a point per value, no OR when they are all its clauses).
    Arrays, documents and regexes are not plain $in elements there and
    stay clauses.  The answers are a collection scan's."""
    db = client.t
    docs = nested_docs()
    db.c.insert_many(docs + [{"_id": 5000, "a": [1, 2], "s": "xa"}])
    for f in ("a", "b", "s"):
        db.c.create_index(f)

    def shape(f):
        w = winning(db, "c", f)
        node, out = w, []
        while node:
            out.append(node["stage"])
            node = node.get("inputStage")
        return out, w

    cases = [
        ({"$or": [{"a": 1}, {"a": 2}]}, ["FETCH", "IXSCAN"], {"a": ["[1, 1]", "[2, 2]"]}),
        ({"$or": [{"a": {"$eq": 3}}, {"$or": [{"a": 1}]}]}, ["FETCH", "IXSCAN"],
         {"a": ["[1, 1]", "[3, 3]"]}),
        ({"$or": [{"a": 4}]}, ["FETCH", "IXSCAN"], {"a": ["[4, 4]"]}),
        ({"$or": [{"$or": [{"b": 2}]}]}, ["FETCH", "IXSCAN"], {"b": ["[2, 2]"]}),
        ({"x": 1, "$or": [{"b": 1}]}, ["FETCH", "IXSCAN"], {"b": ["[1, 1]"]}),
    ]
    for f, stages, bounds in cases:
        got, w = shape(f)
        assert got == stages, (f, got)
        assert w["inputStage"]["indexBounds"] == bounds, f
        assert ids(db.c.find(f)) == ids(db.c.find(f).hint({"$natural": 1})), f
    _, w = shape({"x": 1, "$or": [{"b": 1}]})
    assert w["filter"] == {"x": 1}  # as {x: 1, b: 1}
    # the equalities of one path, among other clauses: one clause, first
    for f in ({"$or": [{"a": 1}, {"b": 5}, {"a": 2}]}, {"$or": [{"b": 5}, {"$or": [{"a": 1}]},
                                                               {"a": {"$eq": 2}}]}):
        got, w = shape(f)
        assert got[:3] == ["SUBPLAN", "FETCH", "OR"], (f, got)
        assert [bounds_of(k) for k in or_stage(w)["inputStages"]] == [
            ("a_1", {"a": ["[1, 1]", "[2, 2]"]}), ("b_1", {"b": ["[5, 5]"]})], f
        assert ids(db.c.find(f)) == ids(db.c.find(f).hint({"$natural": 1})), f
    for f in ({"$or": [{"a": 1}, {"a": [1, 2]}]}, {"$or": [{"a": 1}, {"b": 1}]},
              {"$or": [{"s": "xa"}, {"s": Regex("^x")}]},
              {"$or": [{"a": 1}, {"a": {"$gt": 8}}]}):
        got, w = shape(f)
        assert got[:3] == ["SUBPLAN", "FETCH", "OR"], (f, got)
        assert ids(db.c.find(f)) == ids(db.c.find(f).hint({"$natural": 1})), f


def rand_logical(rng, depth=0):
    """A random filter of clauses under $or, $and and $or beside a clause,
    nested up to three deep."""
    r = rng.random()
    if depth >= 3 or r < 0.35:
        return rand_clause(rng)
    kids = [rand_logical(rng, depth + 1) for _ in range(rng.randint(1, 3))]
    if r < 0.7:
        return {"$or": kids}
    if r < 0.9:
        return {"$and": kids}
    return {**rand_clause(rng), "$or": kids}


def test_nested_logical_filters_equal_collection_scan(client):
    """Whatever mix of OR plans, clause trials and index plans the planner
    makes of nested $or/$and filters, the answers, counts and sorted
    orders are a collection scan's, and explain at every verbosity
    answers."""
    rng = random.Random(43)
    db = client.t
    db.c.insert_many([raw(rand_doc(rng, i)) for i in range(300)])
    for spec in INDEXES + [[("b", 1), ("a", 1)]]:
        db.c.create_index(spec)
    ors = nested = 0
    for q in range(200):
        f = rand_logical(rng)
        want = ids(db.c.find(f).hint({"$natural": 1}))
        assert ids(db.c.find(f).batch_size(rng.choice([1, 3, 1000]))) == want, f
        assert db.command("count", "c", query=f)["n"] == len(want), f
        sort = [("b", 1), ("_id", -1)]
        assert ([d["_id"] for d in db.c.find(f).sort(sort).batch_size(3)]
                == [d["_id"] for d in db.c.find(f).sort(sort).hint({"$natural": 1})]), f
        e = db.command("explain", {"find": "c", "filter": f}, verbosity="allPlansExecution")
        top = or_stage(e["queryPlanner"]["winningPlan"])
        ors += top is not None
        nested += top is not None and any(or_stage(k) for k in top["inputStages"])
    assert ors >= 20 and nested >= 3, (ors, nested)  # OR plans among them, nested ones too
