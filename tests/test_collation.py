"""Collations on the commands: find, count, distinct, update, delete,
findAndModify, explain and a collection's default collation (create).

mongod's semantics: an operation compares strings under its own
`collation`, else under its collection's default collation, else byte by
byte; {locale: "simple"} on an operation overrides the default.  Indexes
and the aggregation pipeline have their own test files."""
import pymongo
import pytest
from pymongo.collation import Collation
from pymongo.errors import BulkWriteError, OperationFailure

CI = Collation("en_US", strength=2)             # case-insensitive
AI = Collation("en_US", strength=1)             # case- and accent-insensitive
NUM = Collation("en", numericOrdering=True)


@pytest.fixture
def db(client):
    return client.coll_test


def ids(cursor):
    return [d["_id"] for d in cursor]


# ------------------------------------------------------------- parsing

@pytest.mark.parametrize("spec,code,msg", [
    ({"strength": 2}, 4, 'Missing expected field "locale"'),
    ({"locale": 1}, 14, '"locale" had the wrong type. Expected string, found int'),
    ({"locale": ""}, 2, "Field 'locale' cannot be the empty string"),
    ({"locale": "en-US"}, 2, "Did you mean 'en_US'?"),
    ({"locale": "xx"}, 2, "Field 'locale' is invalid in: { locale: \"xx\" }"),
    ({"locale": "simple", "strength": 2}, 9, "If locale=simple, no other fields"),
    ({"locale": "en_US", "strength": 0}, 9, "Field 'strength' must be an integer 1 through 5. Got: 0"),
    ({"locale": "en_US", "strength": 2.5}, 2, "exactly representable as a 64-bit integer"),
    ({"locale": "en_US", "caseLevel": "yes"}, 14, '"caseLevel" had the wrong type. Expected bool'),
    ({"locale": "en_US", "caseFirst": "first"}, 9, "Field 'caseFirst' must be 'upper', 'lower', or 'off'. Got: first"),
    ({"locale": "en_US", "alternate": "x"}, 9, "Field 'alternate' must be 'non-ignorable' or 'shifted'"),
    ({"locale": "en_US", "maxVariable": "x"}, 9, "Field 'maxVariable' must be 'punct' or 'space'"),
    ({"locale": "en_US", "foo": 1}, 9, "Collation spec contains unknown field"),
    ({"locale": "en_US", "strength": 1, "backwards": True}, 2, "'backwards' is invalid with 'strength' of 1"),
    ({"locale": "en_US", "strength": 2, "caseFirst": "upper"}, 2, "'caseFirst' is invalid unless 'caseLevel' is on"),
    ({"locale": "en_US", "version": "1.0"}, 161, "Requested collation version 1.0"),
])
def test_bad_collation_is_refused(db, spec, code, msg):
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", filter={}, collation=spec)
    assert e.value.code == code
    assert msg in e.value.details["errmsg"]


def test_collation_must_be_a_document(db):
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", filter={}, collation="en_US")
    assert e.value.code == 14


def test_locales_with_keywords_and_variants_are_accepted(db):
    db.c.insert_one({"x": "a"})
    for loc in ["en", "fr_CA", "de@collation=phonebook", "zh", "ar"]:
        assert db.c.count_documents({}) == 1
        assert len(list(db.c.find({"x": "A"}, collation={"locale": loc, "strength": 2}))) == 1
    # en_US_POSIX is the byte order of ASCII, case included
    assert list(db.c.find({"x": "A"}, collation={"locale": "en_US_POSIX", "strength": 2})) == []
    # fr_CA sorts accents backwards by default, which means nothing at strength 1
    with pytest.raises(OperationFailure) as e:
        db.c.find_one({}, collation={"locale": "fr_CA", "strength": 1})
    assert e.value.code == 2 and "backwards: true" in e.value.details["errmsg"]


# ----------------------------------------------------------------- find

@pytest.fixture
def pings(db):
    db.c.insert_many([{"_id": 1, "x": "ping"}, {"_id": 2, "x": "PING"}, {"_id": 3, "x": "pong"},
                      {"_id": 4, "x": "café"}, {"_id": 5, "x": "cafe"}, {"_id": 6, "x": 7}])
    return db.c


def test_find_equality_and_ranges_under_collation(pings):
    assert ids(pings.find({"x": "PING"})) == [2]
    assert ids(pings.find({"x": "PING"}, collation=CI)) == [1, 2]
    assert ids(pings.find({"x": {"$in": ["Pong", "CAFE"]}}, collation=CI)) == [3, 5]
    assert ids(pings.find({"x": {"$in": ["Pong", "CAFE"]}}, collation=AI)) == [3, 4, 5]
    assert ids(pings.find({"x": {"$ne": "ping"}}, collation=CI)) == [3, 4, 5, 6]
    assert ids(pings.find({"x": {"$nin": ["ping", "cafe"]}}, collation=CI)) == [3, 4, 6]
    # "PING" < "pong" either way; "ping" >= "PING" only when case is ignored
    assert ids(pings.find({"x": {"$gte": "PING", "$lt": "POnG"}}, collation=CI)) == [1, 2]
    # an explicit simple collation is the byte order
    assert ids(pings.find({"x": "PING"}, collation=Collation("simple"))) == [2]


def test_collation_reaches_nested_strings_not_regexes(db):
    db.c.insert_many([{"_id": 1, "a": {"b": "X"}}, {"_id": 2, "a": ["x", "y"]},
                      {"_id": 3, "a": [{"k": "X"}]}])
    assert ids(db.c.find({"a": {"b": "x"}}, collation=CI)) == [1]
    assert ids(db.c.find({"a": ["X", "Y"]}, collation=CI)) == [2]
    assert ids(db.c.find({"a": {"$elemMatch": {"k": "x"}}}, collation=CI)) == [3]
    assert ids(db.c.find({"a": {"$all": ["Y", "X"]}}, collation=CI)) == [2]
    # $regex never collates
    assert ids(db.c.find({"a.b": {"$regex": "^x$"}}, collation=CI)) == []


def test_sort_under_collation(db):
    db.c.insert_many([{"_id": i, "s": s} for i, s in
                      enumerate(["b", "A", "a", "B", "10", "9", "é", "e"])])
    def order(**kw):
        return [d["s"] for d in db.c.find({}, sort=[("s", 1), ("_id", 1)], **kw)]
    assert order() == ["10", "9", "A", "B", "a", "b", "e", "é"]
    assert order(collation=NUM) == ["9", "10", "a", "A", "b", "B", "e", "é"]
    assert order(collation=Collation("en", caseFirst="upper")) == \
        ["10", "9", "A", "a", "B", "b", "e", "é"]
    # ties under strength 1 keep the _id order
    assert order(collation=AI) == ["10", "9", "A", "a", "b", "B", "é", "e"]
    desc = [d["s"] for d in db.c.find({}, sort=[("s", -1)], collation=NUM)][:2]
    assert desc == ["é", "e"]


def test_elem_match_projection_uses_the_collation(db):
    db.c.insert_one({"_id": 1, "a": [{"k": "X", "n": 1}, {"k": "x", "n": 2}]})
    doc = db.c.find_one({}, {"a": {"$elemMatch": {"k": "x"}}}, collation=CI)
    assert doc == {"_id": 1, "a": [{"k": "X", "n": 1}]}
    doc = db.c.find_one({}, {"a": {"$elemMatch": {"k": "x"}}})
    assert doc == {"_id": 1, "a": [{"k": "x", "n": 2}]}


# ------------------------------------------------------- count, distinct

def test_count_and_distinct(pings):
    assert pings.database.command("count", "c", query={"x": "ping"})["n"] == 1
    assert pings.database.command("count", "c", query={"x": "ping"},
                                  collation=CI.document)["n"] == 2
    assert sorted(map(str, pings.distinct("x"))) == ["7", "PING", "cafe", "café", "ping", "pong"]
    # equal values are one; the first to arrive is the one kept
    got = pings.distinct("x", collation=AI)
    assert len(got) == 4 and "ping" in got and "cafe" not in got and "café" in got


# ---------------------------------------------------------------- writes

def test_update_and_delete_match_under_collation(pings):
    r = pings.update_many({"x": "PING"}, {"$set": {"hit": True}}, collation=CI)
    assert (r.matched_count, r.modified_count) == (2, 2)
    r = pings.update_one({"x": "PONG"}, {"$set": {"hit": True}})
    assert r.matched_count == 0
    assert pings.delete_many({"x": "CAFE"}, collation=AI).deleted_count == 2
    assert pings.delete_one({"x": "Pong"}, collation=CI).deleted_count == 1
    assert ids(pings.find()) == [1, 2, 6]


def test_update_operators_compare_under_collation(db):
    db.c.insert_one({"_id": 1, "tags": ["a", "B"], "w": "m", "l": ["10", "9", "x"]})
    db.c.update_one({"_id": 1}, {"$addToSet": {"tags": {"$each": ["A", "b", "c"]}}},
                    collation=CI)
    assert db.c.find_one()["tags"] == ["a", "B", "c"]
    db.c.update_one({"_id": 1}, {"$pull": {"tags": "C"}}, collation=CI)
    db.c.update_one({"_id": 1}, {"$pullAll": {"tags": ["b"]}}, collation=CI)
    assert db.c.find_one()["tags"] == ["a"]
    db.c.update_one({"_id": 1}, {"$max": {"w": "M"}}, collation=CI)  # equal: no change
    assert db.c.find_one()["w"] == "m"
    db.c.update_one({"_id": 1}, {"$max": {"w": "M"}})  # "M" < "m" in bytes
    assert db.c.find_one()["w"] == "m"
    db.c.update_one({"_id": 1}, {"$push": {"l": {"$each": [], "$sort": 1}}}, collation=NUM)
    assert db.c.find_one()["l"] == ["9", "10", "x"]
    db.c.update_one({"_id": 1}, {"$set": {"tags": ["X", "y"]}})
    db.c.update_one({"_id": 1}, {"$set": {"tags.$[t]": "z"}}, array_filters=[{"t": "x"}],
                    collation=CI)
    assert db.c.find_one()["tags"] == ["z", "y"]


def test_bad_collation_in_a_statement_is_a_write_error(db):
    db.c.insert_many([{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}])
    with pytest.raises(BulkWriteError) as e:
        db.c.bulk_write([pymongo.UpdateOne({"x": "A"}, {"$set": {"y": 1}}, collation=CI),
                         pymongo.UpdateOne({"x": "B"}, {"$set": {"y": 1}},
                                           collation={"locale": "xx"})], ordered=False)
    res = e.value.details
    assert res["nMatched"] == 1
    assert [(w["index"], w["code"]) for w in res["writeErrors"]] == [(1, 2)]


def test_find_and_modify_sorts_and_matches_under_collation(db):
    db.c.insert_many([{"_id": 1, "x": "b"}, {"_id": 2, "x": "B"}, {"_id": 3, "x": "a"}])
    doc = db.c.find_one_and_update({"x": "B"}, {"$set": {"y": 1}}, sort=[("_id", -1)],
                                   collation=CI)
    assert doc["_id"] == 2
    doc = db.c.find_one_and_delete({}, sort=[("x", -1), ("_id", 1)], collation=CI)
    assert doc["_id"] == 1
    doc = db.c.find_one_and_replace({"x": "A"}, {"x": "c"}, collation=CI,
                                    return_document=pymongo.ReturnDocument.AFTER)
    assert doc == {"_id": 3, "x": "c"}


def test_expr_compares_under_the_collation(pings):
    q = {"$expr": {"$eq": ["$x", "PING"]}}
    assert ids(pings.find(q)) == [2]
    assert ids(pings.find(q, collation=CI)) == [1, 2]
    assert pings.database.command("count", "c", query=q, collation=CI.document)["n"] == 2
    assert pings.update_many(q, {"$set": {"e": 1}}, collation=CI).modified_count == 2
    assert pings.find_one_and_update(q, {"$set": {"f": 1}}, sort=[("_id", -1)],
                                     collation=CI)["_id"] == 2
    assert pings.delete_many(q, collation=CI).deleted_count == 2


def test_an_empty_collation_is_none_given(db):
    db.create_collection("ci", collation=CI)
    db.ci.insert_many([{"_id": 1, "x": "a"}, {"_id": 2, "x": "A"}])
    assert len(db.command("find", "ci", filter={"x": "a"}, collation={})["cursor"]["firstBatch"]) == 2
    assert db.command("count", "ci", query={"x": "a"}, collation={})["n"] == 2
    db.create_collection("plain", collation={})
    assert "collation" not in next(db.list_collections(filter={"name": "plain"}))["options"]


def test_explain_runs_under_the_collation(pings):
    ex = pings.database.command("explain", {"find": "c", "filter": {"x": "ping"},
                                            "collation": CI.document},
                                verbosity="executionStats")
    assert ex["executionStats"]["nReturned"] == 2
    assert ex["queryPlanner"]["collation"]["locale"] == "en_US"
    assert ex["queryPlanner"]["collation"]["strength"] == 2
    ex = pings.database.command("explain", {"find": "c", "filter": {"x": "ping"}})
    assert "collation" not in ex["queryPlanner"]


# ---------------------------------------------------- collection default

def test_create_keeps_the_full_spec(db):
    db.create_collection("ci", collation=CI)
    info = next(db.list_collections(filter={"name": "ci"}))
    spec = info["options"]["collation"]
    assert list(spec) == ["locale", "caseLevel", "caseFirst", "strength", "numericOrdering",
                          "alternate", "maxVariable", "normalization", "backwards", "version"]
    assert (spec["locale"], spec["strength"], spec["caseFirst"], spec["alternate"]) == \
        ("en_US", 2, "off", "non-ignorable")
    assert info["idIndex"]["collation"] == spec
    # the simple collation is no default: nothing is stored
    db.create_collection("plain", collation=Collation("simple"))
    assert "collation" not in next(db.list_collections(filter={"name": "plain"}))["options"]
    with pytest.raises(OperationFailure) as e:
        db.create_collection("bad", collation={"locale": "en_US", "strength": 7})
    assert e.value.code == 9
    assert "bad" not in db.list_collection_names()


def test_default_collation_applies_unless_overridden(db):
    db.create_collection("ci", collation=CI)
    db.ci.insert_many([{"_id": 1, "x": "ping"}, {"_id": 2, "x": "PING"}, {"_id": 3, "x": "b"}])
    assert ids(db.ci.find({"x": "Ping"})) == [1, 2]
    assert ids(db.ci.find({"x": "Ping"}, collation=Collation("simple"))) == []
    assert ids(db.ci.find({"x": "PING"}, collation=Collation("simple"))) == [2]
    assert db.command("count", "ci", query={"x": "ping"})["n"] == 2
    assert len(db.ci.distinct("x")) == 2
    assert db.ci.update_many({"x": "pInG"}, {"$set": {"y": 1}}).modified_count == 2
    assert db.ci.delete_many({"x": "B"}).deleted_count == 1
    doc = db.ci.find_one_and_update({"x": "PING"}, {"$set": {"z": 1}}, sort=[("_id", 1)])
    assert doc["_id"] == 1


def test_default_collation_survives_restart(tmp_path):
    import multifora
    path = str(tmp_path / "db")
    for round_ in range(2):
        srv = multifora.Server(path, port=0)
        srv.start()
        try:
            c = pymongo.MongoClient(srv.uri)
            db = c.t
            if round_ == 0:
                db.create_collection("ci", collation=CI)
                db.ci.insert_many([{"x": "a"}, {"x": "A"}])
            assert db.ci.count_documents({}) == 2
            assert len(list(db.ci.find({"x": "a"}))) == 2
            c.close()
        finally:
            srv.stop()
