"""update and findAndModify end to end through pymongo: reply counts,
upsert seeding, arrayFilters and positional updates, hints, write errors
in ordered and unordered batches, durability across a restart,
concurrent writers, and the writeConcern argument on a standalone.

mongod 7.0 is the reference; the engine pieces underneath (update
operators, projection, sort) are tested by their hooks in
test_update_ops.py, test_projection.py and test_sort.py."""
from __future__ import annotations

import threading
import time

import pymongo
import pytest
from bson import ObjectId
from pymongo import ReturnDocument
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure, WriteError
from pymongo.write_concern import WriteConcern

import multifora


def fill(coll, n):
    coll.insert_many([{"_id": i, "x": i, "g": i % 2} for i in range(n)])


def count(coll, filt):
    """The count command (count_documents needs aggregate)."""
    return coll.database.command("count", coll.name, query=filt)["n"]


def update_cmd(db, *statements, **kw):
    """The raw update command; a reply with writeErrors is returned, not raised."""
    return db.command("update", "c", updates=list(statements), **kw)


def command_error(db, *args, **kw) -> OperationFailure:
    with pytest.raises(OperationFailure) as e:
        db.command(*args, **kw)
    return e.value


# ----------------------------------------------------------- update counts


def test_update_one_many_and_replace_counts(client):
    c = client.t.c
    fill(c, 6)
    r = c.update_one({"g": 1}, {"$inc": {"x": 100}})
    assert (r.matched_count, r.modified_count, r.upserted_id) == (1, 1, None)
    assert c.find_one({"_id": 1})["x"] == 101  # the first match in _id order
    r = c.update_many({"g": 0}, {"$set": {"even": True}})
    assert (r.matched_count, r.modified_count) == (3, 3)
    assert sorted(d["_id"] for d in c.find({"even": True})) == [0, 2, 4]
    r = c.replace_one({"_id": 5}, {"replaced": 1})
    assert (r.matched_count, r.modified_count) == (1, 1)
    assert c.find_one({"_id": 5}) == {"_id": 5, "replaced": 1}
    r = c.update_many({"nothing": 1}, {"$set": {"y": 1}})
    assert (r.matched_count, r.modified_count, r.upserted_id) == (0, 0, None)
    assert count(c, {}) == 6


def test_raw_update_reply_fields_and_multi(client):
    db = client.t
    fill(db.c, 5)
    r = update_cmd(db, {"q": {"x": {"$gte": 2}}, "u": {"$set": {"y": 1}}, "multi": True})
    assert r == {"n": 3, "nModified": 3, "ok": 1.0}
    # without multi only one document changes
    r = update_cmd(db, {"q": {"x": {"$gte": 2}}, "u": {"$set": {"z": 1}}})
    assert r == {"n": 1, "nModified": 1, "ok": 1.0}
    assert count(db.c, {"z": 1}) == 1
    # several statements in one batch add up
    r = update_cmd(db, {"q": {"_id": 0}, "u": {"$set": {"a": 1}}},
                   {"q": {"_id": {"$in": [1, 2]}}, "u": {"$set": {"a": 1}}, "multi": True},
                   {"q": {"_id": 99}, "u": {"$set": {"a": 1}}})
    assert r == {"n": 3, "nModified": 3, "ok": 1.0}


def test_an_update_that_changes_nothing_counts_in_n_only(client):
    db = client.t
    fill(db.c, 4)
    r = update_cmd(db, {"q": {}, "u": {"$set": {"g": 0}}, "multi": True})
    assert (r["n"], r["nModified"]) == (4, 2)  # the odd ones changed
    r = update_cmd(db, {"q": {}, "u": {"$set": {"g": 0}}, "multi": True})
    assert (r["n"], r["nModified"]) == (4, 0)
    r = db.c.replace_one({"_id": 1}, {"x": 1, "g": 0})
    assert (r.matched_count, r.modified_count) == (1, 0)
    r = db.c.update_one({"_id": 2}, {"$unset": {"nope": ""}})
    assert (r.matched_count, r.modified_count) == (1, 0)


# ------------------------------------------------------------------ upsert


def test_upsert_seeds_from_equality_fields(client):
    c = client.t.c
    r = c.update_one({"a": 1, "b.c": 2, "d": {"$gt": 1}, "e": {"$eq": 5},
                      "$and": [{"f": "x"}], "n": {"m": 1}},
                     {"$set": {"s": 1}, "$setOnInsert": {"o": 1}}, upsert=True)
    assert r.matched_count == 0 and r.modified_count == 0
    oid = r.upserted_id
    assert isinstance(oid, ObjectId)
    doc = c.find_one({"_id": oid})
    # equalities seed the document (dotted paths as nested documents); the
    # range predicate on d does not
    assert doc == {"_id": oid, "a": 1, "b": {"c": 2}, "e": 5, "f": "x", "n": {"m": 1},
                   "s": 1, "o": 1}
    assert list(doc)[0] == "_id"
    # matched the second time: $setOnInsert is not applied
    r = c.update_one({"a": 1, "b.c": 2}, {"$set": {"s": 2}, "$setOnInsert": {"o": 99}},
                     upsert=True)
    assert (r.matched_count, r.modified_count, r.upserted_id) == (1, 1, None)
    assert c.find_one({"_id": oid})["o"] == 1


def test_upsert_id_from_the_filter_and_raw_reply(client):
    db = client.t
    r = update_cmd(db, {"q": {"_id": "k", "q": 7}, "u": {"$inc": {"n": 1}}, "upsert": True})
    assert r == {"n": 1, "nModified": 0, "upserted": [{"index": 0, "_id": "k"}], "ok": 1.0}
    assert db.c.find_one({"_id": "k"}) == {"_id": "k", "q": 7, "n": 1}
    # the upserted entries name their statement's index
    r = update_cmd(db, {"q": {"_id": "k"}, "u": {"$inc": {"n": 1}}, "upsert": True},
                   {"q": {"_id": "m"}, "u": {"$inc": {"n": 1}}, "upsert": True},
                   {"q": {"w": 1}, "u": {"$inc": {"n": 1}}, "upsert": True})
    assert r["n"] == 3 and r["nModified"] == 1
    ups = r["upserted"]
    assert [u["index"] for u in ups] == [1, 2]
    assert ups[0]["_id"] == "m" and isinstance(ups[1]["_id"], ObjectId)
    assert db.c.find_one({"_id": ups[1]["_id"]}) == {"_id": ups[1]["_id"], "w": 1, "n": 1}


def test_replacement_upsert(client):
    c = client.t.c
    # a replacement upsert takes _id from the filter but none of its other fields
    r = c.replace_one({"_id": 3, "q": 7}, {"body": 1}, upsert=True)
    assert r.upserted_id == 3
    assert c.find_one({"_id": 3}) == {"_id": 3, "body": 1}
    r = c.replace_one({"q": 8}, {"body": 2}, upsert=True)
    assert isinstance(r.upserted_id, ObjectId)
    assert c.find_one({"_id": r.upserted_id}) == {"_id": r.upserted_id, "body": 2}
    # matched now: replaced in place, _id kept
    r = c.replace_one({"_id": 3}, {"body": 3}, upsert=True)
    assert (r.matched_count, r.modified_count, r.upserted_id) == (1, 1, None)
    assert c.find_one({"_id": 3}) == {"_id": 3, "body": 3}


def test_upsert_that_collides_with_an_existing_id(client):
    db = client.t
    db.c.insert_one({"_id": 1, "x": 1})
    # the filter does not match _id 1 (x differs), so the upsert inserts _id 1
    r = update_cmd(db, {"q": {"_id": 1, "x": 5}, "u": {"$set": {"y": 1}}, "upsert": True})
    assert r["n"] == 0 and r["nModified"] == 0 and "upserted" not in r
    [err] = r["writeErrors"]
    assert err["index"] == 0 and err["code"] == 11000
    assert err["keyPattern"] == {"_id": 1} and err["keyValue"] == {"_id": 1}
    assert err["errmsg"] == ("E11000 duplicate key error collection: t.c index: _id_ "
                             "dup key: { _id: 1 }")
    with pytest.raises(DuplicateKeyError):
        db.c.update_one({"_id": 1, "x": 5}, {"$set": {"y": 1}}, upsert=True)
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "x": 1}


# ------------------------------------------------- arrayFilters, positional


def test_array_filters_and_positional_through_the_command(client):
    db = client.t
    db.c.insert_one({"_id": 1, "arr": [{"k": 1, "v": 0}, {"k": 2, "v": 0}, {"k": 2, "v": 5}],
                     "nums": [1, 5, 9]})
    r = db.c.update_one({"_id": 1}, {"$set": {"arr.$[e].v": 7}}, array_filters=[{"e.k": 2}])
    assert (r.matched_count, r.modified_count) == (1, 1)
    r = update_cmd(db, {"q": {"_id": 1}, "u": {"$inc": {"nums.$[n]": 10}},
                        "arrayFilters": [{"n": {"$gte": 5}}]})
    assert r == {"n": 1, "nModified": 1, "ok": 1.0}
    # positional $: the first element the filter matched
    r = db.c.update_one({"_id": 1, "nums": {"$gt": 12}}, {"$inc": {"nums.$": 100}})
    assert r.modified_count == 1
    r = db.c.update_one({"_id": 1, "arr.v": 7}, {"$set": {"arr.$.tag": "first"}})
    assert r.modified_count == 1
    assert db.c.find_one({"_id": 1}) == {
        "_id": 1,
        "arr": [{"k": 1, "v": 0}, {"k": 2, "v": 7, "tag": "first"}, {"k": 2, "v": 7}],
        "nums": [1, 115, 19]}
    # an identifier without its filter; $ without an array in the filter
    r = update_cmd(db, {"q": {"_id": 1}, "u": {"$set": {"arr.$[e].v": 1}}})
    [err] = r["writeErrors"]
    assert err["code"] == 2
    assert err["errmsg"] == "No array filter found for identifier 'e' in path 'arr.$[e].v'"
    r = update_cmd(db, {"q": {"_id": 1}, "u": {"$set": {"nums.$": 1}}})
    [err] = r["writeErrors"]
    assert err["code"] == 2
    assert err["errmsg"] == "The positional operator did not find the match needed from the query."


# -------------------------------------------------------------------- hint


def test_update_hints(client):
    db = client.t
    fill(db.c, 4)
    r = db.c.update_one({"_id": 1}, {"$set": {"h": 1}}, hint="_id_")
    assert r.modified_count == 1
    r = db.c.update_many({"x": {"$gte": 2}}, {"$set": {"h": 2}}, hint=[("_id", 1)])
    assert r.modified_count == 2
    r = update_cmd(db, {"q": {"_id": 0}, "u": {"$set": {"h": 3}}, "hint": {"_id": 1}},
                   {"q": {"_id": 0}, "u": {"$set": {"h": 4}}, "hint": "no_such_index"},
                   {"q": {"_id": 0}, "u": {"$set": {"h": 5}}, "hint": {"h": 1}},
                   ordered=False)
    assert r["n"] == 1 and r["nModified"] == 1
    assert [(e["index"], e["code"]) for e in r["writeErrors"]] == [(1, 2), (2, 2)]
    assert r["writeErrors"][0]["errmsg"] == "hint provided does not correspond to an existing index"
    with pytest.raises(WriteError) as e:
        db.c.update_one({"_id": 0}, {"$set": {"h": 6}}, hint="nope")
    assert e.value.code == 2
    assert db.c.find_one({"_id": 0})["h"] == 3


# ------------------------------------------------------------ write errors


BAD_STATEMENTS = [
    ({"q": {"_id": 1}, "u": {"$set": {"_id": 2}}}, 66, "ImmutableField",
     "Performing an update on the path '_id' would modify the immutable field '_id'"),
    ({"q": {"_id": 1}, "u": {"$set": {"a": 1, "a.b": 1}}}, 40, "ConflictingUpdateOperators",
     "Updating the path 'a.b' would create a conflict at 'a'"),
    ({"q": {"_id": 1}, "u": {"$inc": {"x": "s"}}}, 14, "TypeMismatch",
     'Cannot increment with non-numeric argument: {x: "s"}'),
    ({"q": {"_id": 1}, "u": {"$foo": {"x": 1}}}, 9, "FailedToParse",
     "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update "
     "specified as an array"),
    ({"q": {"_id": 1}, "u": {"z": 1}, "multi": True}, 9, "FailedToParse",
     "multi update is not supported for replacement-style update"),
]


@pytest.mark.parametrize("stmt,code,name,msg", BAD_STATEMENTS,
                         ids=[b[2] + "-" + str(i) for i, b in enumerate(BAD_STATEMENTS)])
def test_statement_errors_are_write_errors(client, stmt, code, name, msg):
    db = client.t
    fill(db.c, 3)
    r = update_cmd(db, {"q": {"_id": 0}, "u": {"$set": {"before": 1}}}, stmt,
                   {"q": {"_id": 2}, "u": {"$set": {"after": 1}}})
    assert r["ok"] == 1.0
    assert r["n"] == 1 and r["nModified"] == 1  # ordered: the third never ran
    [err] = r["writeErrors"]
    assert (err["index"], err["code"], err["errmsg"]) == (1, code, msg)
    if "codeName" in err:
        assert err["codeName"] == name
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "x": 1, "g": 1}
    assert count(db.c, {"after": 1}) == 0


def test_unordered_batch_continues_after_errors(client):
    db = client.t
    fill(db.c, 3)
    stmts = [b[0] for b in BAD_STATEMENTS]
    r = update_cmd(db, {"q": {"_id": 0}, "u": {"$set": {"v": 1}}}, *stmts,
                   {"q": {"_id": 2}, "u": {"$set": {"v": 1}}}, ordered=False)
    assert r["n"] == 2 and r["nModified"] == 2
    assert [(e["index"], e["code"]) for e in r["writeErrors"]] == [
        (1, 66), (2, 40), (3, 14), (4, 9), (5, 9)]
    assert sorted(d["_id"] for d in db.c.find({"v": 1})) == [0, 2]
    # pymongo's bulk_write reports the same through BulkWriteError
    ops = [pymongo.UpdateOne({"_id": 0}, {"$set": {"w": 1}}),
           pymongo.UpdateOne({"_id": 1}, {"$set": {"_id": 5}}),
           pymongo.UpdateOne({"_id": 2}, {"$set": {"w": 1}})]
    with pytest.raises(BulkWriteError) as e:
        db.c.bulk_write(ops, ordered=True)
    d = e.value.details
    assert d["nMatched"] == 1 and d["nModified"] == 1
    assert [(w["index"], w["code"]) for w in d["writeErrors"]] == [(1, 66)]
    with pytest.raises(BulkWriteError) as e:
        db.c.bulk_write(ops, ordered=False)
    d = e.value.details
    assert d["nMatched"] == 2 and d["nModified"] == 1  # _id 0 already had w: 1
    assert [(w["index"], w["code"]) for w in d["writeErrors"]] == [(1, 66)]


def test_write_error_fields_are_mongods(client):
    db = client.t
    fill(db.c, 2)
    r = update_cmd(db, {"q": {"_id": 1}, "u": {"$set": {"_id": 2}}},
                   {"q": {"_id": 0, "x": 9}, "u": {"$set": {"y": 1}}, "upsert": True},
                   ordered=False)
    first, second = r["writeErrors"]
    assert list(first) == ["index", "code", "errmsg"]
    assert list(second) == ["index", "code", "errmsg", "keyPattern", "keyValue"]


def test_statement_shape_errors_fail_the_command(client):
    db = client.t
    fill(db.c, 2)
    e = command_error(db, "update", "c", updates=[{"q": {"_id": 1}}])
    assert (e.code, e.details["errmsg"]) == (
        40414, "BSON field 'update.updates.u' is missing but a required field")
    e = command_error(db, "update", "c", updates=[{"u": {"$set": {"a": 1}}}])
    assert (e.code, e.details["errmsg"]) == (
        40414, "BSON field 'update.updates.q' is missing but a required field")
    e = command_error(db, "update", "c", updates=[{"q": {}, "u": {"$set": {"a": 1}}, "bogus": 1}])
    assert (e.code, e.details["errmsg"]) == (
        40415, "BSON field 'update.updates.bogus' is an unknown field.")
    # nothing in a refused batch ran
    e = command_error(db, "update", "c", updates=[{"q": {}, "u": {"$set": {"a": 1}}}, {"q": {}}])
    assert e.code == 40414
    assert count(db.c, {"a": 1}) == 0


# -------------------------------------------------------------- durability


def test_updates_and_deletes_survive_reopen(tmp_path):
    path = str(tmp_path / "db")
    expected = None
    for round_ in range(2):
        srv = multifora.Server(path, port=0)
        srv.start()
        try:
            c = pymongo.MongoClient(f"mongodb://127.0.0.1:{srv.port}/?directConnection=true",
                                    serverSelectionTimeoutMS=5000)
            coll = c.t.c
            if round_ == 0:
                fill(coll, 50)
                coll.update_many({"g": 1}, {"$set": {"odd": True}, "$inc": {"x": 1000}})
                coll.replace_one({"_id": 0}, {"replaced": "yes"})
                coll.update_one({"_id": "new"}, {"$set": {"v": 1}}, upsert=True)
                coll.delete_many({"x": {"$lt": 10}, "g": 0})  # 2, 4, 6, 8
                coll.find_one_and_update({"_id": 11}, {"$push": {"log": "fam"}})
                coll.find_one_and_delete({"_id": 13})
                expected = sorted(coll.find(), key=repr)
                assert len(expected) == 50 - 4 - 1 + 1
            else:
                assert sorted(coll.find(), key=repr) == expected
                assert coll.find_one({"_id": 0}) == {"_id": 0, "replaced": "yes"}
                assert coll.find_one({"_id": 11}) == {"_id": 11, "x": 1011, "g": 1, "odd": True,
                                                      "log": ["fam"]}
                assert coll.find_one({"_id": 13}) is None
                assert coll.find_one({"_id": 4}) is None
                assert count(coll, {"odd": True}) == 24
            c.close()
        finally:
            srv.stop()


# ------------------------------------------------------------- concurrency


def test_concurrent_inc_from_separate_clients(server):
    setup = pymongo.MongoClient(server.uri, serverSelectionTimeoutMS=5000)
    setup.t.c.insert_one({"_id": 1, "n": 0})
    errors = []

    def worker():
        cl = pymongo.MongoClient(server.uri, serverSelectionTimeoutMS=5000)
        try:
            for _ in range(200):
                r = cl.t.c.update_one({"_id": 1}, {"$inc": {"n": 1}})
                assert r.modified_count == 1
        except Exception as exc:  # reported below, not lost in the thread
            errors.append(exc)
        finally:
            cl.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert setup.t.c.find_one({"_id": 1}) == {"_id": 1, "n": 800}
    setup.close()


def test_concurrent_update_many_and_find(server):
    setup = pymongo.MongoClient(server.uri, serverSelectionTimeoutMS=5000)
    setup.t.c.insert_many([{"_id": i, "n": 0, "pad": "p" * 200} for i in range(300)])
    errors = []
    stop = threading.Event()

    def writer():
        cl = pymongo.MongoClient(server.uri, serverSelectionTimeoutMS=5000)
        try:
            for _ in range(15):
                r = cl.t.c.update_many({}, {"$inc": {"n": 1}, "$push": {"grow": 1}})
                assert r.matched_count == 300 and r.modified_count == 300
        except Exception as exc:
            errors.append(exc)
        finally:
            stop.set()
            cl.close()

    def reader():
        cl = pymongo.MongoClient(server.uri, serverSelectionTimeoutMS=5000)
        try:
            while not stop.is_set():
                ids = [d["_id"] for d in cl.t.c.find({}, {"_id": 1}).batch_size(50)]
                # documents that grow while a cursor is open are neither lost
                # nor returned twice
                assert sorted(ids) == list(range(300)) and len(set(ids)) == 300
        except Exception as exc:
            errors.append(exc)
        finally:
            cl.close()

    threads = [threading.Thread(target=writer), threading.Thread(target=reader),
               threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    docs = list(setup.t.c.find())
    assert len(docs) == 300
    assert all(d["n"] == 15 and len(d["grow"]) == 15 for d in docs)
    setup.close()


# ----------------------------------------------------------- findAndModify


def fam(db, **kw):
    return db.command("findAndModify", "c", **kw)


def test_find_and_modify_old_and_new(client):
    db = client.t
    fill(db.c, 5)
    r = fam(db, query={"_id": 2}, update={"$inc": {"x": 10}})
    assert r == {"lastErrorObject": {"n": 1, "updatedExisting": True},
                 "value": {"_id": 2, "x": 2, "g": 0}, "ok": 1.0}
    r = fam(db, query={"_id": 2}, update={"$inc": {"x": 10}}, new=True)
    assert r["value"] == {"_id": 2, "x": 22, "g": 0}
    doc = db.c.find_one_and_update({"_id": 3}, {"$set": {"y": 1}})
    assert doc == {"_id": 3, "x": 3, "g": 1}
    doc = db.c.find_one_and_update({"_id": 3}, {"$set": {"y": 2}},
                                   return_document=ReturnDocument.AFTER)
    assert doc == {"_id": 3, "x": 3, "g": 1, "y": 2}
    doc = db.c.find_one_and_replace({"_id": 4}, {"r": 1}, return_document=ReturnDocument.AFTER)
    assert doc == {"_id": 4, "r": 1}
    doc = db.c.find_one_and_replace({"_id": 4}, {"r": 2})
    assert doc == {"_id": 4, "r": 1}
    assert db.c.find_one({"_id": 4}) == {"_id": 4, "r": 2}


def test_find_and_modify_sort_picks_the_document(client):
    db = client.t
    fill(db.c, 6)
    r = fam(db, query={"g": 1}, sort={"x": -1}, update={"$set": {"hit": True}})
    assert r["value"]["_id"] == 5
    doc = db.c.find_one_and_update({"g": 1}, {"$set": {"hit2": True}}, sort=[("x", 1)])
    assert doc["_id"] == 1
    doc = db.c.find_one_and_delete({}, sort=[("g", -1), ("x", -1)])
    assert doc == {"_id": 5, "x": 5, "g": 1, "hit": True}
    doc = db.c.find_one_and_replace({"g": 0}, {"r": 1}, sort=[("x", -1)])
    assert doc["_id"] == 4
    assert db.c.find_one({"_id": 4}) == {"_id": 4, "r": 1}


def test_find_and_modify_fields_project_the_returned_document(client):
    db = client.t
    fill(db.c, 3)
    r = fam(db, query={"_id": 1}, update={"$inc": {"x": 5}}, new=True, fields={"x": 1, "_id": 0})
    assert r["value"] == {"x": 6}
    doc = db.c.find_one_and_update({"_id": 1}, {"$inc": {"x": 1}}, projection={"g": 0})
    assert doc == {"_id": 1, "x": 6}
    doc = db.c.find_one_and_delete({"_id": 2}, projection=["x"])
    assert doc == {"_id": 2, "x": 2}
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "x": 7, "g": 1}  # stored whole


def test_find_and_modify_upsert(client):
    db = client.t
    r = fam(db, query={"_id": 50, "k": "v"}, update={"$set": {"y": 1}}, upsert=True, new=True)
    assert r == {"lastErrorObject": {"n": 1, "updatedExisting": False, "upserted": 50},
                 "value": {"_id": 50, "k": "v", "y": 1}, "ok": 1.0}
    r = fam(db, query={"_id": 51}, update={"$set": {"y": 1}}, upsert=True)
    assert r["lastErrorObject"] == {"n": 1, "updatedExisting": False, "upserted": 51}
    assert r["value"] is None  # new: false returns the (absent) old document
    r = fam(db, query={"k": "w"}, update={"z": 1}, upsert=True, new=True)
    oid = r["lastErrorObject"]["upserted"]
    assert isinstance(oid, ObjectId) and r["value"] == {"_id": oid, "z": 1}
    doc = db.c.find_one_and_update({"_id": 52}, {"$setOnInsert": {"s": 1}}, upsert=True,
                                   return_document=ReturnDocument.AFTER)
    assert doc == {"_id": 52, "s": 1}
    assert count(db.c, {}) == 4


def test_find_and_modify_remove_and_no_match(client):
    db = client.t
    fill(db.c, 3)
    r = fam(db, query={"_id": 1}, remove=True)
    assert r == {"lastErrorObject": {"n": 1}, "value": {"_id": 1, "x": 1, "g": 1}, "ok": 1.0}
    assert db.c.find_one({"_id": 1}) is None
    r = fam(db, query={"_id": 1}, remove=True)
    assert r == {"lastErrorObject": {"n": 0}, "value": None, "ok": 1.0}
    r = fam(db, query={"_id": 99}, update={"$set": {"y": 1}})
    assert r == {"lastErrorObject": {"n": 0, "updatedExisting": False}, "value": None, "ok": 1.0}
    assert db.c.find_one_and_update({"_id": 99}, {"$set": {"y": 1}}) is None
    assert db.c.find_one_and_delete({"_id": 99}) is None
    assert count(db.c, {}) == 2


def test_find_and_modify_noop_update_returns_the_document(client):
    db = client.t
    fill(db.c, 2)
    r = fam(db, query={"_id": 0}, update={"$set": {"x": 0}})
    assert r == {"lastErrorObject": {"n": 1, "updatedExisting": True},
                 "value": {"_id": 0, "x": 0, "g": 0}, "ok": 1.0}
    doc = db.c.find_one_and_replace({"_id": 1}, {"x": 1, "g": 1})
    assert doc == {"_id": 1, "x": 1, "g": 1}
    # a no-op does not count as modified: the same update as an update
    # command shows nModified 0
    r = update_cmd(db, {"q": {"_id": 0}, "u": {"$set": {"x": 0}}})
    assert (r["n"], r["nModified"]) == (1, 0)


def test_find_and_modify_noop_update_with_new(client):
    db = client.t
    fill(db.c, 2)
    r = fam(db, query={"_id": 0}, update={"$set": {"x": 0}}, new=True)
    assert r == {"lastErrorObject": {"n": 1, "updatedExisting": True},
                 "value": {"_id": 0, "x": 0, "g": 0}, "ok": 1.0}
    doc = db.c.find_one_and_update({"_id": 1}, {"$max": {"x": 0}},
                                   return_document=ReturnDocument.AFTER)
    assert doc == {"_id": 1, "x": 1, "g": 1}


FAM_ARG_ERRORS = [
    (dict(query={"_id": 0}, update={"$set": {"x": 0}}, remove=True),
     "Cannot specify both an update and remove=true"),
    (dict(query={"_id": 0}), "Either an update or remove=true must be specified"),
    (dict(query={"_id": 0}, remove=True, new=True),
     "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document"),
    (dict(query={"_id": 0}, remove=True, upsert=True),
     "Cannot specify both upsert=true and remove=true"),
]


@pytest.mark.parametrize("args,msg", FAM_ARG_ERRORS, ids=["update+remove", "neither",
                                                          "remove+new", "remove+upsert"])
def test_find_and_modify_argument_errors(client, args, msg):
    db = client.t
    fill(db.c, 1)
    e = command_error(db, "findAndModify", "c", **args)
    assert (e.code, e.details["codeName"], e.details["errmsg"]) == (9, "FailedToParse", msg)
    assert db.c.find_one({"_id": 0}) == {"_id": 0, "x": 0, "g": 0}


def test_find_and_modify_update_errors(client):
    db = client.t
    fill(db.c, 1)
    e = command_error(db, "findAndModify", "c", query={"_id": 0}, update={"$set": {"_id": 5}})
    assert (e.code, e.details["codeName"]) == (66, "ImmutableField")
    e = command_error(db, "findAndModify", "c", query={"_id": 0}, update={"$foo": {"a": 1}})
    assert e.code == 9
    e = command_error(db, "findAndModify", "c", query={"_id": 0},
                      update={"$set": {"a": 1}}, bogus=1)
    assert (e.code, e.details["errmsg"]) == (40415, "BSON field 'findAndModify.bogus' is an "
                                                    "unknown field.")
    db.c.insert_one({"_id": 1, "x": 1})
    e = command_error(db, "findAndModify", "c", query={"_id": 1, "x": 5},
                      update={"$set": {"y": 1}}, upsert=True)
    assert e.code == 11000


# ------------------------------------------------------------ writeConcern


def eventually(check, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "an unacknowledged write never landed"
        time.sleep(0.01)


def test_unacknowledged_writes_happen(client):
    db = client.t
    fill(db.c, 3)
    c0 = db.c.with_options(write_concern=WriteConcern(w=0))
    r = c0.update_one({"_id": 0}, {"$set": {"w0": 1}})
    assert r.acknowledged is False
    c0.update_many({"g": 1}, {"$set": {"w0": 2}})
    c0.find_one_and_update({"_id": 2}, {"$set": {"w0": 3}})
    c0.update_one({"_id": "up"}, {"$set": {"w0": 4}}, upsert=True)
    c0.delete_one({"_id": 0})
    eventually(lambda: {d["_id"]: d.get("w0") for d in db.c.find()} == {1: 2, 2: 3, "up": 4})


def test_write_concern_values_on_a_standalone(client):
    db = client.t
    fill(db.c, 2)
    r = update_cmd(db, {"q": {"_id": 0}, "u": {"$set": {"a": 1}}},
                   writeConcern={"w": "majority"})
    assert r["nModified"] == 1
    r = update_cmd(db, {"q": {"_id": 0}, "u": {"$set": {"a": 2}}}, writeConcern={"j": True})
    assert r["nModified"] == 1
    r = update_cmd(db, {"q": {"_id": 0}, "u": {"$set": {"a": 3}}},
                   writeConcern={"w": 1, "j": True, "wtimeout": 1000})
    assert r["nModified"] == 1
    r = fam(db, query={"_id": 0}, update={"$set": {"a": 4}}, writeConcern={"w": "majority"})
    assert r["value"]["a"] == 3
    cm = db.c.with_options(write_concern=WriteConcern(w="majority", j=True))
    assert cm.update_one({"_id": 1}, {"$set": {"a": 1}}).modified_count == 1
    for wc in ({"w": 2}, {"w": "tag"}):
        e = command_error(db, "update", "c", updates=[{"q": {"_id": 0}, "u": {"$set": {"a": 9}}}],
                          writeConcern=wc)
        assert (e.code, e.details["codeName"]) == (2, "BadValue"), wc
        e = command_error(db, "findAndModify", "c", query={"_id": 0},
                          update={"$set": {"a": 9}}, writeConcern=wc)
        assert e.code == 2, wc
    assert db.c.find_one({"_id": 0})["a"] == 4  # the refused commands wrote nothing
    e = command_error(db, "find", "c", writeConcern={"w": 1})
    assert (e.code, e.details["codeName"]) == (72, "InvalidOptions")


def test_write_concern_messages_on_a_standalone(client):
    db = client.t
    e = command_error(db, "update", "c", updates=[{"q": {}, "u": {"$set": {"a": 1}}}],
                      writeConcern={"w": 2})
    assert e.details["errmsg"] == "cannot use 'w' > 1 when a host is not replicated"
    e = command_error(db, "update", "c", updates=[{"q": {}, "u": {"$set": {"a": 1}}}],
                      writeConcern={"w": "tag"})
    assert e.details["errmsg"] == ('cannot use non-majority \'w\' mode "tag" when a host is not '
                                   'a member of a replica set')


def test_find_and_modify_duplicate_key_error_info(tmp_path):
    """findAndModify's DuplicateKey error carries keyPattern and keyValue
    after codeName, as mongod's DuplicateKeyErrorInfo."""
    import pymongo
    from pymongo.errors import DuplicateKeyError
    srv = multifora.Server(str(tmp_path / "db"), port=0)
    srv.start()
    try:
        c = pymongo.MongoClient(srv.uri).t.fam
        c.create_index("x", unique=True)
        c.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 2}])
        with pytest.raises(DuplicateKeyError) as ei:
            c.find_one_and_update({"_id": 2}, {"$set": {"x": 1}})
        d = ei.value.details
        assert d["code"] == 11000 and d["codeName"] == "DuplicateKey"
        assert d["keyPattern"] == {"x": 1} and d["keyValue"] == {"x": 1}
    finally:
        srv.stop()
