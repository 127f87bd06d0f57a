"""A regex with no literal prefix on an indexed field: mongod's IXSCAN
over every string key with the regex as the scan's filter, so only the
documents whose key matches are fetched.  The answers must be the
collection scan's (the index only narrows the candidates; the matcher
judges each), on ascending, descending, compound and multikey indexes."""
from __future__ import annotations

import random
import re
import threading

import pymongo
import pytest
from bson import Regex

from planlib import stages

ALPHABET = "abcAB.\x00é日\n"


def random_value(rng):
    r = rng.random()
    if r < 0.55:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 6)))
    if r < 0.7:
        return [random_value(rng) for _ in range(rng.randrange(0, 3))]
    if r < 0.8:
        return Regex(rng.choice(["a", "b.", "^a"]), rng.choice(["", "i"]))
    if r < 0.9:
        return rng.randrange(5)
    return None


PATTERNS = [("a", ""), ("b", "i"), ("^.a", ""), ("a$", ""), ("é", ""), ("日", "i"),
            ("a.b", "s"), ("^$", ""), ("b.", ""), ("\\x00", ""), ("^a", "i"), ("A|c", "")]


@pytest.mark.parametrize("key", [[("a", 1)], [("a", -1)], [("a", 1), ("b", 1)]])
def test_same_answers_as_a_collection_scan(client, key):
    rng = random.Random(len(key) * 10 + key[0][1])
    db = client.t
    db.r.insert_many([{"_id": i, "a": random_value(rng), "b": rng.randrange(3)}
                      for i in range(400)])
    db.r.create_index(key)
    for pattern, flags in PATTERNS:
        for flt in ({"a": Regex(pattern, flags)},
                    {"a": {"$regex": pattern, "$options": flags}, "b": {"$lt": 2}}):
            want = sorted(d["_id"] for d in db.r.find(flt, hint=[("$natural", 1)]))
            got = sorted(d["_id"] for d in db.r.find(flt))
            assert got == want, (pattern, flags, flt)
            assert db.command("count", "r", query=flt)["n"] == len(want)
            e = db.command("explain", {"find": "r", "filter": flt}, verbosity="executionStats")
            plan = e["queryPlanner"]["winningPlan"]
            assert stages(plan)[-1] == "IXSCAN", plan
            assert plan["inputStage"]["filter"]["a"]["$regex"] == pattern


@pytest.mark.parametrize("direction", [1, -1])
def test_only_matching_keys_are_fetched(client, direction):
    db = client.t
    words = ["apple", "banana", "cherry", "grape", "lemon", "mango", "peach", "plum"]
    # a NUL inside: the key escapes it, the test must see the string whole
    db.w.insert_many([{"_id": i, "s": f"{words[i % 8]}\x00{i}"} for i in range(800)])
    db.w.create_index([("s", direction)])
    e = db.command("explain", {"find": "w", "filter": {"s": Regex("an")}},
                   verbosity="executionStats")
    es = e["executionStats"]
    # banana and mango: 200 of 800 keys pass the regex, and only they are read
    assert (es["nReturned"], es["totalKeysExamined"], es["totalDocsExamined"]) == (200, 800, 200)
    # matches across the NUL: mango with an id starting with 7, plum with one ending in 7
    flt = {"s": Regex("o\\x007|m\\x00\\d*7$")}
    want = sorted(d["_id"] for d in db.w.find(flt, hint=[("$natural", 1)]))
    assert want and sorted(d["_id"] for d in db.w.find(flt)) == want
    es = db.command("explain", {"find": "w", "filter": flt},
                    verbosity="executionStats")["executionStats"]
    assert es["totalDocsExamined"] == len(want)
    assert stages(e["queryPlanner"]["winningPlan"]) == ["FETCH", "IXSCAN"]
    assert "filter" not in e["queryPlanner"]["winningPlan"]
    # count answers from the keys alone
    e = db.command("explain", {"count": "w", "query": {"s": Regex("an")}},
                   verbosity="executionStats")
    assert e["executionStats"]["totalDocsExamined"] == 0
    assert e["executionStats"]["executionStages"]["nCounted"] == 200
    assert db.command("count", "w", query={"s": Regex("an")})["n"] == 200


def test_collation_index_is_not_filtered_by_key(client):
    """Under a collation the keys are sort keys, not the strings: the regex
    cannot be tested on them, so that index is not used for it."""
    db = client.t
    db.create_collection("cw", collation={"locale": "en", "strength": 2})
    db.cw.insert_many([{"_id": i, "s": s} for i, s in enumerate(["Abc", "abc", "xyz"])])
    db.cw.create_index("s")
    e = db.command("explain", {"find": "cw", "filter": {"s": Regex("b")}})
    assert stages(e["queryPlanner"]["winningPlan"]) == ["COLLSCAN"]
    assert sorted(d["_id"] for d in db.cw.find({"s": Regex("b")})) == [0, 1]


def test_deep_backtracking_gives_the_matchers_answer(client):
    """The key filter's JIT code runs on a small stack: a pattern that
    backtracks deeply over a long key runs out of it, and the interpreter
    must then decide, as it does for the collection scan."""
    db = client.t
    # 600 keys before the long one: the pattern is JIT-compiled by then
    db.deep.insert_many([{"_id": 1, "s": "a" * 20000 + "b"}, {"_id": 2, "s": "zzz"}] +
                        [{"_id": 3 + i, "s": f"{i:04d}"} for i in range(600)])
    db.deep.create_index("s")
    flt = {"s": Regex("(a|aa)*b")}
    assert [d["_id"] for d in db.deep.find(flt, hint=[("$natural", 1)])] == [1]
    assert [d["_id"] for d in db.deep.find(flt)] == [1]
    assert db.command("count", "deep", query=flt)["n"] == 1


@pytest.mark.parametrize("key", [[("a", 1), ("b", 1)], [("a", 1), ("b", -1)],
                                 [("a", -1), ("s", 1), ("b", 1)]])
def test_fields_past_a_range_are_tested_before_the_fetch(client, key):
    """{a: range, b: ...} over {a, b}: the keys whose b is out of its bounds
    are not fetched (mongod's IndexBoundsChecker), and a count answers
    from the keys; the answers are the collection scan's."""
    rng = random.Random(9)
    db = client.t
    db.k.insert_many([{"_id": i, "a": rng.randrange(50), "s": rng.choice(["x", "y"]),
                       "b": rng.choice([rng.randrange(10), "t", None, 2.5])}
                      for i in range(1000)])
    db.k.create_index(key)
    for flt in ({"a": {"$gt": 10}, "b": 3}, {"a": {"$gte": 5, "$lt": 40}, "b": {"$in": [1, "t"]}},
                {"a": {"$lt": 30}, "b": {"$gt": 2, "$lte": 7}}, {"a": {"$ne": 4}, "b": None},
                {"a": {"$gt": 0}, "s": "y", "b": {"$ne": 5}}):
        want = sorted(d["_id"] for d in db.k.find(flt, hint=[("$natural", 1)]))
        assert sorted(d["_id"] for d in db.k.find(flt)) == want, flt
        assert db.command("count", "k", query=flt)["n"] == len(want), flt
        es = db.command("explain", {"find": "k", "filter": flt},
                        verbosity="executionStats")["executionStats"]
        if all(f in dict(key) for f in flt):  # else FETCH judges the rest
            assert es["totalDocsExamined"] == len(want), flt
        assert es["totalKeysExamined"] > es["totalDocsExamined"], flt


def test_regexes_matched_on_many_connections_at_once(server, client):
    """Each server thread matches with match data of its own: the same
    answers from four connections at once as from one, captures and
    backreferences included, on scans and on the index's key filter."""
    db = client.t
    rng = random.Random(7)
    db.m.insert_many([{"_id": i, "s": "".join(rng.choice("abxy") for _ in range(8))}
                      for i in range(2000)])
    db.m.create_index("s")
    filters = [{"s": Regex(r"(a)(b)(x)")}, {"s": Regex(r"(\w)\1\1")}, {"s": Regex("y$")},
               {"s": {"$in": [Regex("(ab){2}"), "aaaaaaaa"]}}]
    want = [sorted(d["_id"] for d in db.m.find(f, hint=[("$natural", 1)])) for f in filters]
    assert all(want) and len(set(map(len, want))) == len(want)
    errors = []

    def run(seed):
        try:
            with pymongo.MongoClient(server.uri, serverSelectionTimeoutMS=5000) as c:
                for k in range(30):
                    i = (seed + k) % len(filters)
                    hint = [("$natural", 1)] if k % 2 else None
                    got = sorted(d["_id"] for d in c.t.m.find(filters[i], hint=hint))
                    assert got == want[i], (seed, k)
        except BaseException as e:  # reported below, from the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_a_long_scan_gives_the_same_answers_once_the_regex_is_compiled(client):
    """After 512 tests a $regex runs as PCRE2 machine code: the answers
    stay the interpreter's, including for a value whose backtracking
    outgrows the machine code's stack (the interpreter decides it)."""
    db = client.t
    rng = random.Random(11)
    values = ["".join(rng.choice("abAB\n") for _ in range(rng.randrange(12))) for _ in range(1500)]
    docs = [{"_id": i, "s": v} for i, v in enumerate(values)]
    docs.append({"_id": len(docs), "s": "a" * 20000 + "b"})
    db.j.insert_many(docs)
    for pattern, flags, py in [("(a|aa)*b", "", 0), ("^a.b", "s", re.S), ("B$", "i", re.I),
                               ("^b", "m", re.M), (r"(\w)\1", "", 0)]:
        want = [d["_id"] for d in docs if re.search(pattern, d["s"], py)]
        got = [d["_id"] for d in db.j.find({"s": Regex(pattern, flags)}, hint=[("$natural", 1)])]
        assert got == want, pattern
        got = [d["_id"] for d in db.j.find({"s": {"$not": Regex(pattern, flags)}},
                                           hint=[("$natural", 1)])]
        assert got == [d["_id"] for d in docs if d["_id"] not in set(want)], pattern
    assert len(docs) - 1 in [d["_id"] for d in db.j.find({"s": Regex("(a|aa)*b")})]
