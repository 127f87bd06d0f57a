"""Indexes with collations, end to end: createIndexes with a collation (the
full spec listIndexes shows, mongod's errors), a collection's default
given to new indexes and held by the _id index, which index a query of
each collation may use (explain), results equal with and without the
index, unique indexes deciding duplicates under their collation, order
from a collated index, hints, counting, partial filters and key patterns
shared by two collations.  Planner internals: csrc/test/test_plan.c."""
from __future__ import annotations

import re

import pytest
from bson.son import SON
from pymongo.collation import Collation
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure

from planlib import stages

CI = {"locale": "en_US", "strength": 2}   # case-insensitive
AI = {"locale": "en_US", "strength": 1}   # and accent-insensitive
SIMPLE = {"locale": "simple"}
WORDS = ["apple", "Apple", "APPLE", "\u00e4pple", "banana", "Banana", "cafe", "caf\u00e9",
         "CAFE", "b", "B", "a", "A", "\u00e1", "zebra", "", "Zebra"]


def ixscan(plan):
    while plan and plan["stage"] != "IXSCAN":
        plan = plan.get("inputStage")
    return plan


def plan_of(db, cmd):
    return db.command("explain", cmd, verbosity="queryPlanner")["queryPlanner"]["winningPlan"]


def full_spec(db, collation):
    """The full spec mongod stores for `collation`, as `create` stores it."""
    db.drop_collection("probe")
    db.create_collection("probe", collation=Collation(**collation))
    spec = db.command("listCollections", filter={"name": "probe"})["cursor"]["firstBatch"][0]
    db.drop_collection("probe")
    return spec["options"]["collation"]


@pytest.fixture
def flat(client):
    """Strings and numbers, no arrays: the s index stays non-multikey."""
    db = client.ixflat
    db.c.insert_many([{"_id": i, "s": w, "n": i % 3} for i, w in enumerate(WORDS)]
                     + [{"_id": 100, "s": 7, "n": 0}])
    return db


@pytest.fixture
def db(client):
    db = client.ixcoll
    db.c.insert_many([{"_id": i, "s": w, "n": i % 3} for i, w in enumerate(WORDS)]
                     + [{"_id": 100, "s": 7, "n": 0}, {"_id": 101, "n": 1},
                        {"_id": 102, "s": ["B", "cafe"], "n": 2},
                        {"_id": 103, "s": {"x": "Apple"}, "n": 0}])
    return db


# ------------------------------------------------------------ the spec


def test_list_indexes_shows_the_full_collation_last(db):
    db.command("createIndexes", "c", indexes=[
        SON([("collation", CI), ("key", {"s": 1}), ("name", "s_ci"), ("sparse", True)])])
    spec = [ix for ix in db.c.list_indexes() if ix["name"] == "s_ci"][0]
    assert list(spec.keys()) == ["v", "key", "name", "sparse", "collation"]
    full = spec["collation"]
    assert list(full.keys()) == ["locale", "caseLevel", "caseFirst", "strength",
                                 "numericOrdering", "alternate", "maxVariable",
                                 "normalization", "backwards", "version"]
    assert dict(full) == {"locale": "en_US", "caseLevel": False, "caseFirst": "off",
                          "strength": 2, "numericOrdering": False,
                          "alternate": "non-ignorable", "maxVariable": "punct",
                          "normalization": False, "backwards": False,
                          "version": full["version"]}
    assert type(full["strength"]) is int and re.fullmatch(r"\d+\.\d+", full["version"])
    assert full == full_spec(db, CI)
    # the simple collation is no collation
    db.c.create_index("n", name="n_simple", collation=Collation("simple"))
    spec = [ix for ix in db.c.list_indexes() if ix["name"] == "n_simple"][0]
    assert spec == {"v": 2, "key": {"n": 1}, "name": "n_simple"}


@pytest.mark.parametrize("collation,code,msg", [
    ({"locale": "EN"}, 2,
     'failed to add collation information to index spec for index creation: '
     '{ key: { s: 1 }, name: "ix", collation: { locale: "EN" }, v: 2 } :: caused by :: '
     "Field 'locale' is invalid in: { locale: \"EN\" }. Did you mean 'en'?"),
    ({"locale": "en", "strength": 7}, 9, None),
    ({"strength": 2}, 4, None),
    ({}, 2, 'Error in specification { key: { s: 1 }, name: "ix", collation: {} } :: '
            "caused by :: The field 'collation' cannot be an empty object."),
    ("en", 14, 'Error in specification { key: { s: 1 }, name: "ix", collation: "en" } :: '
               "caused by :: The field 'collation' must be an object, but got string"),
])
def test_bad_collations_are_refused(db, collation, code, msg):
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "c",
                   indexes=[SON([("key", {"s": 1}), ("name", "ix"), ("collation", collation)])])
    assert e.value.code == code
    errmsg = e.value.details["errmsg"]
    if msg:
        assert errmsg == msg
    else:
        assert errmsg.startswith(
            "failed to add collation information to index spec for index creation: ")
    assert [ix["name"] for ix in db.c.list_indexes()] == ["_id_"]


def test_collation_needs_a_v2_index(db):
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "c",
                   indexes=[{"key": {"s": 1}, "name": "ix", "v": 1, "collation": CI}])
    assert e.value.code == 67
    assert "cannot create an index with the 'collation' option and v=1" in \
        e.value.details["errmsg"]


def test_one_key_pattern_two_collations(db):
    db.c.create_index("s", name="s_ci", collation=Collation(**CI))
    db.c.create_index("s", name="s_ai", collation=Collation(**AI))
    db.c.create_index("s", name="s_1")
    assert [ix["name"] for ix in db.c.list_indexes()] == ["_id_", "s_ci", "s_ai", "s_1"]
    # the same spec again is the same index; another collation under a taken name is not
    r = db.command("createIndexes", "c",
                   indexes=[{"key": {"s": 1}, "name": "s_ci", "collation": CI}])
    assert r["note"] == "all indexes already exist"
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "c",
                   indexes=[{"key": {"s": 1}, "name": "s_ci", "collation": AI}])
    assert e.value.code == 86
    # a key pattern names none of them
    with pytest.raises(OperationFailure) as e:
        db.command("dropIndexes", "c", index={"s": 1})
    assert e.value.code == 181
    assert e.value.details["errmsg"].startswith(
        "3 indexes found for key: { s: 1 }, identify by name instead. Conflicting indexes: "
        '{ v: 2, key: { s: 1 }, name: "s_ci", collation: { locale: "en_US", ')
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "c", index={"keyPattern": {"s": 1}, "hidden": True})
    assert e.value.code == 181
    assert e.value.details["errmsg"].startswith(
        "index keyPattern { s: 1 } matches 3 indexes, must use index name. Conflicting "
        'indexes:{ v: 2, key: { s: 1 }, name: "s_ci"')
    # nor a hint
    with pytest.raises(OperationFailure) as e:
        db.c.find({"s": "a"}).hint([("s", 1)]).to_list()
    assert e.value.code == 27
    db.command("dropIndexes", "c", index="s_ai")
    assert [ix["name"] for ix in db.c.list_indexes()] == ["_id_", "s_ci", "s_1"]


# ------------------------------------------------- the collection's default


def test_new_indexes_take_the_collection_default(client):
    db = client.ixdefault
    db.create_collection("d", collation=Collation(**CI))
    full = full_spec(db, CI)
    db.command("createIndexes", "d", indexes=[
        {"key": {"s": 1}, "name": "inherits"},
        {"key": {"s": 1}, "name": "plain", "collation": SIMPLE},
        {"key": {"t": 1}, "name": "v1", "v": 1},
        {"key": {"u": 1}, "name": "own", "collation": AI}])
    specs = {ix["name"]: ix for ix in db.d.list_indexes()}
    assert specs["_id_"] == {"v": 2, "key": {"_id": 1}, "name": "_id_", "collation": full}
    assert specs["inherits"] == {"v": 2, "key": {"s": 1}, "name": "inherits", "collation": full}
    assert specs["plain"] == {"v": 2, "key": {"s": 1}, "name": "plain"}
    assert specs["v1"] == {"v": 1, "key": {"t": 1}, "name": "v1"}
    assert specs["own"]["collation"] == full_spec(db, AI)
    # the _id index again: the existing one
    r = db.command("createIndexes", "d", indexes=[{"key": {"_id": 1}, "name": "_id_"}])
    assert r["note"] == "all indexes already exist"
    # the _id index holds the collection's collation, no other
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "d",
                   indexes=[{"key": {"_id": 1}, "name": "_id_", "collation": SIMPLE}])
    assert e.value.code == 2
    assert e.value.details["errmsg"] == (
        "The _id index must have the same collation as the collection. Index collation: "
        '{ locale: "simple" }, collection collation: ' + _shown(full))
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "plain_coll",
                   indexes=[{"key": {"_id": 1}, "name": "_id_", "collation": CI}])
    assert e.value.code == 2
    assert e.value.details["errmsg"].endswith('collection collation: { locale: "simple" }')


def _shown(doc):
    """A document as mongod's BSONObj::toString prints it (strings, ints, bools)."""
    parts = []
    for k, v in doc.items():
        if isinstance(v, bool):
            parts.append(f"{k}: {'true' if v else 'false'}")
        elif isinstance(v, str):
            parts.append(f'{k}: "{v}"')
        else:
            parts.append(f"{k}: {v}")
    return "{ " + ", ".join(parts) + " }"


def test_the_id_index_of_a_case_insensitive_collection(client):
    db = client.ixid
    db.create_collection("d", collation=Collation(**CI))
    db.d.insert_one({"_id": "abc", "v": 1})
    with pytest.raises(DuplicateKeyError) as e:
        db.d.insert_one({"_id": "ABC", "v": 2})
    assert e.value.code == 11000
    db.d.insert_one({"_id": "abd", "v": 3})
    # the default collation: the _id index's; the simple one: not it
    assert db.d.find_one({"_id": "ABC"}) == {"_id": "abc", "v": 1}
    assert stages(plan_of(db, {"find": "d", "filter": {"_id": "ABC"}})) == ["IDHACK"]
    assert db.d.find_one({"_id": "ABC"}, collation=Collation("simple")) is None
    assert stages(plan_of(db, {"find": "d", "filter": {"_id": "ABC"},
                               "collation": SIMPLE})) == ["COLLSCAN"]


def test_validate_a_collated_id_index(client):
    db = client.ixid
    db.create_collection("d", collation=Collation(**CI))
    db.d.insert_many([{"_id": "abc"}, {"_id": 5}])
    db.d.create_index("s", collation=Collation(**CI))
    db.d.insert_one({"_id": "x", "s": "Mixed"})
    res = db.command("validate", "d")
    assert res["valid"] is True, res
    assert res["nrecords"] == 3


def test_duplicate_key_error_shows_collation_keys(client):
    """mongod reports what collided: the index's collation and each string
    as its comparison key, CollationKey(0x<hex>)."""
    db = client.ixdup
    db.c.create_index("s", unique=True, name="s_ci", collation=Collation(**CI))
    db.c.insert_one({"_id": 1, "s": "Apple", "n": 1})
    with pytest.raises(DuplicateKeyError) as e:
        db.c.insert_one({"_id": 2, "s": "APPLE", "n": 1})
    msg = e.value.details["errmsg"]
    head = "E11000 duplicate key error collection: ixdup.c index: s_ci collation: { locale: \"en_US\""
    assert msg.startswith(head), msg
    assert re.search(r'version: "[0-9.]+" } dup key: \{ s: "CollationKey\(0x[0-9a-f]+\)" \}$', msg), msg
    kv = e.value.details["keyValue"]["s"]
    assert re.fullmatch(r"CollationKey\(0x[0-9a-f]+\)", kv)
    # the same key for both spellings: it is the key that collided
    with pytest.raises(DuplicateKeyError) as e2:
        db.c.insert_one({"_id": 3, "s": "apple"})
    assert e2.value.details["keyValue"]["s"] == kv
    # a simple index keeps the plain form
    db.c.create_index("n", unique=True)
    with pytest.raises(DuplicateKeyError) as e3:
        db.c.insert_one({"_id": 4, "s": "pear", "n": 1})
    assert e3.value.details["errmsg"].endswith("index: n_1 dup key: { n: 1 }")


# ------------------------------------------------------- index choice


def test_a_string_predicate_uses_an_index_of_its_collation(db):
    db.c.create_index("s", name="s_ci", collation=Collation(**CI))
    ix = ixscan(plan_of(db, {"find": "c", "filter": {"s": "apple"}, "collation": CI}))
    assert ix["indexName"] == "s_ci"
    assert list(ix.keys())[:4] == ["stage", "keyPattern", "indexName", "collation"]
    assert ix["collation"] == full_spec(db, CI)
    assert re.fullmatch(r"\[CollationKey\(0x([0-9a-f]+)\), CollationKey\(0x\1\)\]",
                        ix["indexBounds"]["s"][0])
    # the same predicate under the simple collation (or another): not that index
    assert stages(plan_of(db, {"find": "c", "filter": {"s": "apple"}})) == ["COLLSCAN"]
    assert stages(plan_of(db, {"find": "c", "filter": {"s": "apple"},
                               "collation": AI})) == ["COLLSCAN"]
    # documents and arrays hold strings: the same rule (mongod's)
    assert stages(plan_of(db, {"find": "c", "filter": {"s": {"x": 1}}})) == ["COLLSCAN"]
    assert stages(plan_of(db, {"find": "c", "filter": {"s": {"$in": [7, "b"]}}})) == \
        ["COLLSCAN"]
    # numbers compare alike under every collation: any index will do
    ix = ixscan(plan_of(db, {"find": "c", "filter": {"s": {"$gte": 7}}}))
    assert ix["indexName"] == "s_ci" and ix["indexBounds"] == {"s": ["[7, inf.0]"]}
    # a range of strings: the bracket's lower edge is the empty string, as is
    ix = ixscan(plan_of(db, {"find": "c", "filter": {"s": {"$lt": "b"}}, "collation": CI}))
    assert ix["indexBounds"]["s"][0].startswith("[CollationKey(0x), CollationKey(0x")
    # a simple index shows no collation and plain bounds
    db.c.create_index("s", name="s_1")
    ix = ixscan(plan_of(db, {"find": "c", "filter": {"s": "apple"}}))
    assert ix["indexName"] == "s_1" and "collation" not in ix
    assert ix["indexBounds"] == {"s": ['["apple", "apple"]']}


FILTERS = [
    {"s": "apple"}, {"s": "APPLE"}, {"s": "\u00e4pple"}, {"s": "cafe"},
    {"s": {"$in": ["b", "Zebra", 7]}}, {"s": {"$gt": "b", "$lte": "cafe"}},
    {"s": {"$lt": "B"}}, {"s": {"$gte": ""}}, {"s": {"$ne": "apple"}}, {"s": 7},
    {"s": {"x": "apple"}}, {"s": ["B", "CAFE"]}, {"s": "b", "n": 2}, {"s": None},
]


@pytest.mark.parametrize("collation", [None, CI, AI], ids=["simple", "ci", "ai"])
def test_results_are_those_of_a_collection_scan(db, collation):
    db.c.create_index("s", name="s_ci", collation=Collation(**CI))
    db.c.create_index("s", name="s_ai", collation=Collation(**AI))
    db.c.create_index([("n", 1), ("s", -1)], name="n_s_ci", collation=Collation(**CI))
    kw = {"collation": Collation(**collation)} if collation else {}
    used = set()
    for f in FILTERS:
        want = sorted(d["_id"] for d in db.c.find(f, **kw).hint([("$natural", 1)]))
        got = sorted(d["_id"] for d in db.c.find(f, **kw))
        assert got == want, f
        count = {"count": "c", "query": f}
        if collation:
            count["collation"] = collation
        assert db.command(count)["n"] == len(want), f
        cmd = {"find": "c", "filter": f}
        if collation:
            cmd["collation"] = collation
        ix = ixscan(plan_of(db, cmd))
        used.add(ix["indexName"] if ix else None)
        for name in ("s_ci", "s_ai", "n_s_ci"):  # every index, forced, agrees
            hinted = sorted(d["_id"] for d in db.c.find(f, **kw).hint(name))
            assert hinted == want, (f, name)
    # strings: only the index of the query's collation; numbers: any
    expected = {None: {None, "s_ai"}, "ci": {"s_ci", "n_s_ci"}, "ai": {"s_ai"}}
    assert expected[collation and ("ci" if collation == CI else "ai")] <= used
    if collation is None:
        assert ixscan(plan_of(db, {"find": "c", "filter": {"s": "b", "n": 2}}))["indexBounds"] \
            == {"n": ["[2, 2]"], "s": ["[MaxKey, MinKey]"]}
    # the case-insensitive answers themselves
    if collation == CI:
        assert sorted(d["_id"] for d in db.c.find({"s": "APPLE"}, **kw)) == [0, 1, 2]
    if collation == AI:
        assert sorted(d["_id"] for d in db.c.find({"s": "APPLE"}, **kw)) == [0, 1, 2, 3]


def test_count_from_keys_only_under_the_same_collation(flat):
    db = flat
    db.c.create_index("s", name="s_ci", collation=Collation(**CI))
    e = db.command("explain", {"count": "c", "query": {"s": "cafe"}, "collation": CI},
                   verbosity="executionStats")
    assert e["executionStats"]["executionStages"]["nCounted"] == 2
    assert e["executionStats"]["totalDocsExamined"] == 0   # the keys answer
    assert db.command("count", "c", query={"s": "cafe"}, collation=CI)["n"] == 2
    # the simple collation through that index: every candidate fetched and judged
    e = db.command("explain", {"count": "c", "query": {"s": "cafe"}, "hint": "s_ci"},
                   verbosity="executionStats")
    assert e["executionStats"]["executionStages"]["nCounted"] == 1
    assert e["executionStats"]["totalDocsExamined"] == len(WORDS) + 1
    assert db.command("count", "c", query={"s": "cafe"}, hint="s_ci")["n"] == 1


def test_a_hint_to_an_index_of_another_collation_is_obeyed(db):
    db.c.create_index("s", name="s_ci", collation=Collation(**CI))
    ix = ixscan(plan_of(db, {"find": "c", "filter": {"s": "apple"}, "hint": "s_ci"}))
    assert ix["indexName"] == "s_ci" and ix["indexBounds"] == {"s": ["[MinKey, MaxKey]"]}
    assert [d["_id"] for d in db.c.find({"s": "apple"}).hint("s_ci")] == [0]
    # non-string predicates still bound it
    ix = ixscan(plan_of(db, {"find": "c", "filter": {"s": {"$gt": 5}}, "hint": "s_ci"}))
    assert ix["indexBounds"] == {"s": ["(5, inf.0]"]}


# ---------------------------------------------------------------- order


def test_sort_from_an_index_of_the_query_collation(flat):
    db = flat
    db.c.create_index("s", name="s_ci", collation=Collation(**CI))
    cmd = {"find": "c", "filter": {"s": {"$type": "string"}}, "sort": {"s": 1},
           "collation": CI}
    assert stages(plan_of(db, cmd)) == ["FETCH", "IXSCAN"]
    got = [d["s"] for d in db.c.find({"s": {"$type": "string"}}, sort=[("s", 1)],
                                     collation=Collation(**CI))]
    want = [d["s"] for d in db.c.find({"s": {"$type": "string"}}, sort=[("s", 1)],
                                      collation=Collation(**CI)).hint([("$natural", 1)])]
    assert [w.lower() for w in got] == [w.lower() for w in want]
    assert got[:2] == ["", "a"] and got[-2:] == ["zebra", "Zebra"]
    assert got.index("\u00e1") > got.index("A") and got.index("\u00e1") < got.index("b")
    # backwards too
    cmd["sort"] = {"s": -1}
    assert stages(plan_of(db, cmd)) == ["FETCH", "IXSCAN"]
    assert ixscan(plan_of(db, cmd))["direction"] == "backward"
    # the simple order cannot come from it
    assert stages(plan_of(db, {"find": "c", "filter": {}, "sort": {"s": 1}})) == \
        ["SORT", "COLLSCAN"]
    simple = [d["s"] for d in db.c.find({"s": {"$type": "string"}}, sort=[("s", 1)])]
    assert simple == sorted(simple)


# ------------------------------------------------------------ uniqueness


def test_a_unique_index_decides_duplicates_by_its_collation(client):
    db = client.ixuniq
    db.u.create_index("s", name="s_ci", unique=True, collation=Collation(**CI))
    db.u.insert_one({"_id": 1, "s": "a"})
    with pytest.raises(DuplicateKeyError) as e:
        db.u.insert_one({"_id": 2, "s": "A"})
    assert e.value.code == 11000
    db.u.insert_one({"_id": 3, "s": "\u00e1"})     # an accent counts at strength 2
    with pytest.raises(DuplicateKeyError):
        db.u.update_one({"_id": 3}, {"$set": {"s": "A"}})
    db.u.update_one({"_id": 1}, {"$set": {"s": "A"}})  # its own key: allowed
    assert db.u.find_one({"_id": 1}) == {"_id": 1, "s": "A"}
    # a build over existing duplicates fails and leaves nothing
    db.v.insert_many([{"_id": 1, "s": "Caf\u00e9"}, {"_id": 2, "s": "CAF\u00c9"}])
    with pytest.raises(OperationFailure) as e:
        db.v.create_index("s", unique=True, collation=Collation(**CI))
    assert e.value.code == 11000
    assert [ix["name"] for ix in db.v.list_indexes()] == ["_id_"]
    db.v.create_index("s", unique=True)            # bytes: distinct
    with pytest.raises(BulkWriteError) as e:
        db.w.create_index("s", unique=True, collation=Collation(**AI))
        db.w.insert_many([{"s": "resume"}, {"s": "R\u00e9sum\u00e9"}])
    assert e.value.details["writeErrors"][0]["code"] == 11000
    assert db.command("validate", "u")["valid"] is True


def test_a_partial_filter_reads_under_the_index_collation(client):
    db = client.ixpart
    db.p.create_index("n", name="n_ci", unique=True, collation=Collation(**CI),
                      partialFilterExpression={"s": "a"})
    db.p.insert_many([{"_id": 1, "s": "a", "n": 1}, {"_id": 3, "s": "b", "n": 1}])
    with pytest.raises(DuplicateKeyError):
        db.p.insert_one({"_id": 2, "s": "A", "n": 1})  # "A" is in the index
    assert db.command("validate", "p")["keysPerIndex"] == {"_id_": 2, "n_ci": 1}
    # a query of the same collation implied by the filter uses it
    ix = ixscan(plan_of(db, {"find": "p", "filter": {"s": "A", "n": 1}, "collation": CI}))
    assert ix["indexName"] == "n_ci"
    assert [d["_id"] for d in db.p.find({"s": "A", "n": 1}, collation=Collation(**CI))] == [1]
    # under bytes {s: "a"} is not known to be the same set
    assert stages(plan_of(db, {"find": "p", "filter": {"s": "a", "n": 1}})) == ["COLLSCAN"]
