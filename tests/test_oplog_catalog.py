"""Catalog changes in a replica set's oplog (op "c", ns "<db>.$cmd"), in
mongod 7.0's formats (docs/research/issue48-facts.md section 1): create,
drop, createIndexes (startIndexBuild/commitIndexBuild over documents),
dropIndexes, renameCollection, dropDatabase, collMod, and a transaction's
creations inside its applyOps.  Each entry is written in the engine write
that makes the change, so after kill -9 it is there exactly when the
change is."""
import signal

import pytest
from bson import Int64
from bson.binary import Binary, UUID_SUBTYPE
from pymongo import IndexModel
from pymongo.errors import OperationFailure

from conftest import ServedProcess


def cmd_entries(client, since=None):
    """The oplog's command entries ("c"), oldest first."""
    q = {"op": "c"}
    if since is not None:
        q["ts"] = {"$gt": since}
    return list(client.local.oplog.rs.find(q))


def last_ts(client):
    return next(client.local.oplog.rs.find().sort("$natural", -1).limit(1))["ts"]


def coll_uuid(db, name):
    info = next(db.list_collections(filter={"name": name}))
    return info["info"]["uuid"]


def ui(entry):
    u = entry["ui"]
    assert isinstance(u, Binary) and u.subtype == UUID_SUBTYPE
    return u


def test_create_and_drop(rs_client):
    db = rs_client.ddl
    t0 = last_ts(rs_client)
    db.create_collection("a")
    db.create_collection("b", collation={"locale": "fr"})
    db.implicit.insert_one({"x": 1})  # an insert's implicit creation
    db.a.insert_many([{"i": i} for i in range(3)])
    uuid_a = coll_uuid(db, "a")
    db.a.drop()
    es = cmd_entries(rs_client, t0)
    assert [list(e["o"])[0] for e in es] == ["create", "create", "create", "drop"]
    a, b, imp, drop = es
    assert a["ns"] == "ddl.$cmd" and a["op"] == "c"
    assert list(a["o"].items()) == [
        ("create", "a"), ("idIndex", {"v": 2, "key": {"_id": 1}, "name": "_id_"})]
    assert ui(a) == uuid_a
    assert list(a) == ["op", "ns", "ui", "o", "ts", "t", "v", "wall"]
    # the collation goes in the options and in the _id index
    assert b["o"]["collation"]["locale"] == "fr"
    assert b["o"]["idIndex"]["collation"]["locale"] == "fr"
    assert imp["o"]["create"] == "implicit"
    assert drop["o"] == {"drop": "a"}
    assert drop["o2"] == {"numRecords": 3}
    assert isinstance(drop["o2"]["numRecords"], Int64)
    assert ui(drop) == uuid_a
    # the inserts between come as "i" entries, after the create
    ins = list(rs_client.local.oplog.rs.find({"ns": "ddl.implicit"}))
    assert len(ins) == 1 and ins[0]["ts"] > imp["ts"]


def test_reply_operation_time_is_the_entry(rs_client):
    db = rs_client.ddl2
    t0 = last_ts(rs_client)
    reply = db.command("create", "c")
    (entry,) = cmd_entries(rs_client, t0)
    assert reply["operationTime"] == entry["ts"]


def test_create_indexes_empty_and_with_documents(rs_client):
    db = rs_client.ddl3
    db.create_collection("empty")
    t0 = last_ts(rs_client)
    db.empty.create_indexes([IndexModel([("a", 1)]),
                             IndexModel([("b", -1)], unique=True, name="bee")])
    es = cmd_entries(rs_client, t0)
    # one entry per index on an empty collection, the spec inline
    assert [e["o"] for e in es] == [
        {"createIndexes": "empty", "v": 2, "key": {"a": 1}, "name": "a_1"},
        {"createIndexes": "empty", "v": 2, "key": {"b": -1}, "name": "bee", "unique": True}]
    assert list(es[0]["o"])[0] == "createIndexes"

    db.full.insert_many([{"a": i} for i in range(5)])
    t1 = last_ts(rs_client)
    db.full.create_index("a")
    start, commit = cmd_entries(rs_client, t1)
    assert list(start["o"]) == ["startIndexBuild", "indexBuildUUID", "indexes"]
    assert list(commit["o"]) == ["commitIndexBuild", "indexBuildUUID", "indexes"]
    assert start["o"]["indexBuildUUID"] == commit["o"]["indexBuildUUID"]
    assert start["o"]["indexes"] == commit["o"]["indexes"] == [
        {"v": 2, "key": {"a": 1}, "name": "a_1"}]
    assert ui(start) == ui(commit)
    # an index that is there already logs nothing
    t2 = last_ts(rs_client)
    db.full.create_index("a")
    assert cmd_entries(rs_client, t2) == []


def test_failed_build_logs_abort(rs_client):
    db = rs_client.ddl4
    db.c.insert_many([{"k": 1}, {"k": 1}])
    t0 = last_ts(rs_client)
    with pytest.raises(OperationFailure) as ei:
        db.c.create_index("k", unique=True)
    assert ei.value.code == 11000
    start, abort = cmd_entries(rs_client, t0)
    assert start["o"]["startIndexBuild"] == "c"
    assert list(abort["o"]) == ["abortIndexBuild", "indexBuildUUID", "indexes", "cause"]
    assert abort["o"]["indexBuildUUID"] == start["o"]["indexBuildUUID"]
    cause = abort["o"]["cause"]
    assert cause["ok"] is False and cause["code"] == 11000
    assert cause["codeName"] == "DuplicateKey"


def test_drop_indexes(rs_client):
    db = rs_client.ddl5
    db.c.create_index("a")
    db.c.create_index([("b", 1)], sparse=True)
    t0 = last_ts(rs_client)
    db.c.drop_index("a_1")
    (e,) = cmd_entries(rs_client, t0)
    assert e["o"] == {"dropIndexes": "c", "index": "a_1"}
    assert e["o2"] == {"v": 2, "key": {"a": 1}, "name": "a_1"}
    t1 = last_ts(rs_client)
    db.c.create_index("c")
    t2 = last_ts(rs_client)
    db.c.drop_indexes()  # "*": one entry per index
    es = cmd_entries(rs_client, t2)
    assert t2 > t1
    assert [e["o"]["index"] for e in es] == ["b_1", "c_1"]
    assert es[0]["o2"]["sparse"] is True


def test_rename(rs_client):
    db = rs_client.ddl6
    db.a.insert_one({})
    db.b.insert_many([{}, {}])
    ua, ub = coll_uuid(db, "a"), coll_uuid(db, "b")
    t0 = last_ts(rs_client)
    rs_client.admin.command("renameCollection", "ddl6.a", to="ddl6.c")
    (e,) = cmd_entries(rs_client, t0)
    assert list(e["o"].items()) == [
        ("renameCollection", "ddl6.a"), ("to", "ddl6.c"), ("stayTemp", False)]
    assert "o2" not in e
    assert ui(e) == ua
    t1 = last_ts(rs_client)
    rs_client.admin.command("renameCollection", "ddl6.c", to="ddl6.b", dropTarget=True)
    (e,) = cmd_entries(rs_client, t1)
    assert list(e["o"]) == ["renameCollection", "to", "stayTemp", "dropTarget"]
    assert e["o"]["dropTarget"] == ub  # the dropped target's uuid
    assert e["o2"] == {"numRecords": 2}
    assert ui(e) == ua
    assert db.list_collection_names() == ["b"]
    assert db.b.count_documents({}) == 1


def test_drop_database(rs_client):
    db = rs_client.ddl7
    db.x.insert_one({})
    db.y.insert_one({})
    t0 = last_ts(rs_client)
    rs_client.drop_database("ddl7")
    es = cmd_entries(rs_client, t0)
    assert [e["o"] for e in es] == [{"drop": "x"}, {"drop": "y"}, {"dropDatabase": 1}]
    assert es[-1]["ns"] == "ddl7.$cmd" and "ui" not in es[-1]
    # a database with nothing in it: nothing to log
    t1 = last_ts(rs_client)
    rs_client.drop_database("ddl7")
    assert cmd_entries(rs_client, t1) == []


def test_coll_mod(rs_client):
    db = rs_client.ddl8
    db.c.create_index("a", expireAfterSeconds=100)
    u = coll_uuid(db, "c")
    t0 = last_ts(rs_client)
    db.command("collMod", "c", index={"keyPattern": {"a": 1}, "expireAfterSeconds": 50})
    db.command("collMod", "c", index={"name": "a_1", "hidden": True})
    db.command("collMod", "c", changeStreamPreAndPostImages={"enabled": True})
    ttl, hide, images = cmd_entries(rs_client, t0)
    assert ttl["o"] == {"collMod": "c", "index": {"name": "a_1", "expireAfterSeconds": 50}}
    assert isinstance(ttl["o"]["index"]["expireAfterSeconds"], Int64)
    assert ttl["o2"] == {"collectionOptions_old": {"uuid": u},
                         "indexOptions_old": {"expireAfterSeconds": 100}}
    assert hide["o"] == {"collMod": "c", "index": {"name": "a_1", "hidden": True}}
    assert hide["o2"]["indexOptions_old"] == {"hidden": False}
    assert images["o"] == {"collMod": "c", "changeStreamPreAndPostImages": {"enabled": True}}
    assert images["o2"] == {"collectionOptions_old": {"uuid": u}}
    # the next one's old options hold what this one set
    t1 = last_ts(rs_client)
    db.command("collMod", "c", changeStreamPreAndPostImages={"enabled": False})
    (off,) = cmd_entries(rs_client, t1)
    assert off["o2"]["collectionOptions_old"]["changeStreamPreAndPostImages"] == {
        "enabled": True}
    # a refused collMod logs nothing
    t2 = last_ts(rs_client)
    with pytest.raises(OperationFailure):
        db.command("collMod", "c", index={"name": "nope", "hidden": True})
    assert cmd_entries(rs_client, t2) == []


def test_transaction_lists_its_creations_first(rs_client):
    """The creations go first (a collection before the writes into it),
    the writes after in their order."""
    db = rs_client.ddl9
    db.old.insert_one({})
    t0 = last_ts(rs_client)
    with rs_client.start_session() as s:
        with s.start_transaction():
            db.old.insert_one({"o": 1}, session=s)
            db.fresh.insert_one({"f": 1}, session=s)
            db.create_collection("made", session=s)
            db.made.create_index("m", session=s)
    (e,) = cmd_entries(rs_client, t0)  # nothing before the commit
    assert e["ns"] == "admin.$cmd" and "lsid" in e
    ops = e["o"]["applyOps"]
    assert [(o["op"], o["ns"], list(o["o"])[0]) for o in ops] == [
        ("c", "ddl9.$cmd", "create"), ("c", "ddl9.$cmd", "create"),
        ("c", "ddl9.$cmd", "createIndexes"), ("i", "ddl9.old", "_id"),
        ("i", "ddl9.fresh", "_id")]
    assert ops[0]["o"]["create"] == "fresh" and ops[1]["o"]["create"] == "made"
    assert ops[2]["o"] == {"createIndexes": "made", "v": 2, "key": {"m": 1}, "name": "m_1"}
    assert ops[0]["ui"] == coll_uuid(db, "fresh")
    assert ops[4]["ui"] == ops[0]["ui"]

    # an aborted transaction's creation leaves nothing in the oplog
    t1 = last_ts(rs_client)
    with rs_client.start_session() as s:
        s.start_transaction()
        db.gone.insert_one({}, session=s)
        s.abort_transaction()
    assert "gone" not in db.list_collection_names()
    assert list(rs_client.local.oplog.rs.find({"ts": {"$gt": t1}, "op": {"$ne": "n"}})) == []

    # a transaction that only creates commits one entry
    t2 = last_ts(rs_client)
    with rs_client.start_session() as s:
        with s.start_transaction():
            db.create_collection("only", session=s)
    (e,) = cmd_entries(rs_client, t2)
    assert [o["o"]["create"] for o in e["o"]["applyOps"]] == ["only"]


def test_unreplicated_namespaces_are_not_logged(rs_client):
    t0 = last_ts(rs_client)
    rs_client.local.mine.insert_one({})
    rs_client.local.mine.drop()
    db = rs_client.ddl10
    db.command("profile", 2)
    db.c.insert_one({})  # system.profile is created: not logged
    db.command("profile", 0)
    names = [list(e["o"].values())[0] for e in cmd_entries(rs_client, t0)]
    assert names == ["c"]


def test_standalone_has_no_oplog(client):
    client.st.create_collection("a")
    client.st.a.drop()
    assert "oplog.rs" not in client.local.list_collection_names()


def test_entries_survive_kill_9_with_their_changes(tmp_path):
    s = ServedProcess(tmp_path / "db", extra=["--replSet", "rs0"]).start()
    c = s.client()
    c.k.create_collection("a")
    c.k.b.insert_one({})
    c.k.b.create_index("x")
    c.admin.command("renameCollection", "k.a", to="k.r")
    c.k.b.drop()
    with c.start_session() as sess:  # a transaction that only creates
        with sess.start_transaction():
            c.k.create_collection("t", session=sess)
    c.close()
    s.proc.kill()  # acknowledged means durable
    s.proc.wait(timeout=30)
    s.stop()
    again = ServedProcess(tmp_path / "db", extra=["--replSet", "rs0"]).start()
    c = again.client()
    assert sorted(c.k.list_collection_names()) == ["r", "t"]
    kinds = [list(e["o"])[0] for e in cmd_entries(c) if e["ns"] == "k.$cmd"]
    assert kinds == ["create", "create", "startIndexBuild", "commitIndexBuild",
                     "renameCollection", "drop"]
    (commit,) = [e for e in cmd_entries(c) if e["ns"] == "admin.$cmd"]
    assert commit["o"]["applyOps"][0]["o"]["create"] == "t"
    c.close()
    assert again.signal(signal.SIGTERM) == 0
    again.stop()
