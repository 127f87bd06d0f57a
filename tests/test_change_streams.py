"""Change streams (docs/change-streams.md) through pymongo's watch(), at the
three levels (a collection, a database, the deployment), on a one-member
replica set: every event type in mongod 7.0's shape, resume tokens and
resuming (also after kill -9: every later committed change exactly once),
fullDocument and fullDocumentBeforeChange with stored pre-images, the
stages allowed after $changeStream, and mongod's errors."""
import signal
import threading
import time

import pytest
from bson import Int64, Timestamp
from bson.binary import Binary, UUID_SUBTYPE
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import ServedProcess


def events(stream, n, timeout=10.0):
    """The next `n` events of `stream`."""
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        ev = stream.try_next()
        if ev is not None:
            out.append(ev)
    assert len(out) == n, out
    return out


def ops(evs):
    return [e["operationType"] for e in evs]


def coll_uuid(db, name):
    return next(db.list_collections(filter={"name": name}))["info"]["uuid"]


# -------------------------------------------------------------- standalone


def test_refused_on_a_standalone(client):
    with pytest.raises(OperationFailure) as e:
        client.db.c.watch()
    assert e.value.code == 40573


# ------------------------------------------------------------- CRUD events


def test_collection_stream_crud_events(rs_client):
    c = rs_client.cs.crud
    c.insert_one({"_id": 0})
    with c.watch() as s:
        c.insert_one({"_id": 1, "a": 1})
        c.update_one({"_id": 1}, {"$set": {"a": 2, "b": [1, 2, 3]}, "$unset": {"zz": 1}})
        c.update_one({"_id": 1}, {"$unset": {"a": 1}})
        c.replace_one({"_id": 1}, {"x": "new"})
        c.delete_one({"_id": 1})
        rs_client.cs.other.insert_one({"not": "seen"})
        ins, upd, upd2, rep, dele = events(s, 5)
    assert ops([ins, upd, upd2, rep, dele]) == ["insert", "update", "update", "replace", "delete"]
    assert list(ins) == ["_id", "operationType", "clusterTime", "wallTime", "fullDocument", "ns",
                         "documentKey"]
    assert ins["fullDocument"] == {"_id": 1, "a": 1}
    assert ins["ns"] == {"db": "cs", "coll": "crud"}
    assert ins["documentKey"] == {"_id": 1}
    assert isinstance(ins["clusterTime"], Timestamp)
    assert set(ins["_id"]) == {"_data"} and ins["_id"]["_data"].isupper()
    assert upd["updateDescription"] == {"updatedFields": {"a": 2, "b": [1, 2, 3]},
                                        "removedFields": [], "truncatedArrays": []}
    assert "fullDocument" not in upd
    assert upd2["updateDescription"]["removedFields"] == ["a"]
    assert rep["fullDocument"] == {"_id": 1, "x": "new"}
    assert dele["documentKey"] == {"_id": 1} and "fullDocument" not in dele
    # tokens sort in the order of their events
    datas = [e["_id"]["_data"] for e in (ins, upd, upd2, rep, dele)]
    assert datas == sorted(datas) and len(set(datas)) == 5


def test_array_truncation_and_nested_updates(rs_client):
    c = rs_client.cs.arr
    c.insert_one({"_id": 1, "array": [1, 2, 3], "d": {"x": 1, "y": 2}})
    with c.watch() as s:
        c.update_one({"_id": 1}, {"$pop": {"array": 1}})
        c.update_one({"_id": 1}, {"$set": {"d.x": 5, "array.0": 9}})
        t, n = events(s, 2)
    assert t["updateDescription"] == {"updatedFields": {}, "removedFields": [],
                                      "truncatedArrays": [{"field": "array", "newSize": 2}]}
    assert n["updateDescription"]["updatedFields"] == {"d.x": 5, "array.0": 9}


def test_database_and_cluster_streams(rs_client):
    db = rs_client.csdb
    with db.watch() as dbs, rs_client.watch() as cl:
        db.a.insert_one({"_id": 1})
        db.b.insert_one({"_id": 2})
        rs_client.csother.z.insert_one({"_id": 3})
        got_db = events(dbs, 2)
        got_cl = events(cl, 3)
    assert [(e["ns"]["coll"], e["documentKey"]) for e in got_db] == [("a", {"_id": 1}),
                                                                       ("b", {"_id": 2})]
    assert [e["ns"] for e in got_cl] == [{"db": "csdb", "coll": "a"}, {"db": "csdb", "coll": "b"},
                                         {"db": "csother", "coll": "z"}]


def test_cursor_namespaces_and_postbatchresumetoken(rs_client):
    db = rs_client.csns
    r = db.command("aggregate", "c", pipeline=[{"$changeStream": {}}], cursor={})
    assert r["cursor"]["ns"] == "csns.c"
    assert list(r["cursor"]) == ["firstBatch", "postBatchResumeToken", "id", "ns"]
    assert r["cursor"]["id"] != 0
    r = db.command("aggregate", 1, pipeline=[{"$changeStream": {}}], cursor={})
    assert r["cursor"]["ns"] == "csns.$cmd.aggregate"
    r = rs_client.admin.command("aggregate", 1,
                                pipeline=[{"$changeStream": {"allChangesForCluster": True}}],
                                cursor={})
    assert r["cursor"]["ns"] == "admin.$cmd.aggregate"
    # getMore: the token after the last event, or the high-water mark
    r = db.command("aggregate", "c", pipeline=[{"$changeStream": {}}], cursor={})
    cid = r["cursor"]["id"]
    db.c.insert_many([{"_id": i} for i in range(3)])
    g = db.command("getMore", cid, collection="c", batchSize=2)
    batch = g["cursor"]["nextBatch"]
    assert len(batch) == 2
    assert g["cursor"]["postBatchResumeToken"] == batch[-1]["_id"]
    g = db.command("getMore", cid, collection="c", maxTimeMS=100)
    assert len(g["cursor"]["nextBatch"]) == 1
    hwm = g["cursor"]["postBatchResumeToken"]
    assert hwm["_data"] > g["cursor"]["nextBatch"][0]["_id"]["_data"]
    g = db.command("getMore", cid, collection="c", maxTimeMS=100)
    assert g["cursor"]["nextBatch"] == [] and g["cursor"]["postBatchResumeToken"] == hwm


# ---------------------------------------------------------- catalog events


def test_drop_and_rename_invalidate_a_collection_stream(rs_client):
    db = rs_client.csinv
    db.c.insert_one({})
    with db.c.watch() as s:
        db.c.drop()
        drop, inv = events(s, 2)
        assert not s.alive
    assert drop["operationType"] == "drop" and drop["ns"] == {"db": "csinv", "coll": "c"}
    assert list(inv) == ["_id", "operationType", "clusterTime", "wallTime"]
    assert inv["operationType"] == "invalidate"
    # startAfter the invalidate: the stream goes on with the new collection
    with db.c.watch(start_after=inv["_id"]) as s:
        db.c.insert_one({"_id": "again"})
        (ev,) = events(s, 1)
        assert ev["documentKey"] == {"_id": "again"}
    # resumeAfter an invalidate is refused
    with pytest.raises(OperationFailure) as e:
        db.c.watch(resume_after=inv["_id"])
    assert e.value.code == 260
    db.r.insert_one({})
    with db.r.watch() as s:
        db.r.rename("r2")
        ren, inv = events(s, 2)
    assert ren["operationType"] == "rename"
    assert ren["ns"] == {"db": "csinv", "coll": "r"} and ren["to"] == {"db": "csinv",
                                                                      "coll": "r2"}
    assert inv["operationType"] == "invalidate"


def test_drop_database_events(rs_client):
    db = rs_client.csdropdb
    db.a.insert_one({})
    with db.watch() as dbs, rs_client.watch() as cl:
        rs_client.drop_database("csdropdb")
        got = events(dbs, 3)
        assert ops(got) == ["drop", "dropDatabase", "invalidate"]
        assert got[1]["ns"] == {"db": "csdropdb"}
        assert ops(events(cl, 2)) == ["drop", "dropDatabase"]


def test_expanded_events(rs_client):
    db = rs_client.csexp
    with db.watch(show_expanded_events=True) as s:
        db.create_collection("e", capped=True, size=4096)
        db.e.create_index("x")
        db.e.drop_index("x_1")
        db.command("collMod", "e", validationLevel="off") if False else None
        db.e.insert_one({"_id": 1})
        got = events(s, 4)
    assert ops(got) == ["create", "createIndexes", "dropIndexes", "insert"]
    create, ci, di, ins = got
    u = coll_uuid(db, "e")
    assert create["collectionUUID"] == u and create["operationDescription"]["capped"] is True
    assert ci["operationDescription"]["indexes"][0]["key"] == {"x": 1}
    assert di["operationDescription"]["indexes"][0]["name"] == "x_1"
    assert ins["collectionUUID"] == u
    # without showExpandedEvents, only the classic types
    with db.watch() as s:
        db.create_collection("f")
        db.f.insert_one({"_id": 1})
        assert ops(events(s, 1)) == ["insert"]


def test_modify_event(rs_client):
    db = rs_client.csmod
    db.create_collection("m")
    with db.watch(show_expanded_events=True) as s:
        db.command("collMod", "m", changeStreamPreAndPostImages={"enabled": True})
        (ev,) = events(s, 1)
    assert ev["operationType"] == "modify"
    assert ev["operationDescription"] == {"changeStreamPreAndPostImages": {"enabled": True}}
    assert "collectionOptions" in ev["stateBeforeChange"]


# ----------------------------------------------------------- transactions


def test_transaction_events_after_commit_none_for_abort(rs_client):
    c = rs_client.cstxn.t
    c.insert_one({"_id": 0})
    with c.watch() as s:
        with rs_client.start_session() as sess:
            with sess.start_transaction():
                c.insert_one({"_id": 1}, session=sess)
                c.update_one({"_id": 0}, {"$set": {"u": 1}}, session=sess)
                assert s.try_next() is None  # nothing before the commit
            sess.start_transaction()
            c.insert_one({"_id": 2}, session=sess)
            sess.abort_transaction()
        c.insert_one({"_id": 3})
        got = events(s, 3)
    assert ops(got) == ["insert", "update", "insert"]
    a, b, after = got
    assert list(a)[:3] == ["txnNumber", "lsid", "_id"]
    assert a["txnNumber"] == b["txnNumber"] and a["lsid"] == b["lsid"]
    assert a["clusterTime"] == b["clusterTime"]
    assert a["_id"]["_data"] < b["_id"]["_data"]
    assert "lsid" not in after and after["documentKey"] == {"_id": 3}


# ---------------------------------------------------------------- images


def test_full_document_modes(rs_client):
    db = rs_client.csimg
    db.create_collection("img", changeStreamPreAndPostImages={"enabled": True})
    db.create_collection("plain")
    db.img.insert_one({"_id": 1, "x": 0})
    db.plain.insert_one({"_id": 1, "x": 0})
    streams = {
        "lookup": db.img.watch(full_document="updateLookup"),
        "when": db.img.watch(full_document="whenAvailable",
                             full_document_before_change="whenAvailable"),
        "plain_when": db.plain.watch(full_document="whenAvailable",
                                     full_document_before_change="whenAvailable"),
        "plain_req": db.plain.watch(full_document_before_change="required"),
    }
    db.img.update_one({"_id": 1}, {"$set": {"x": 1}})
    db.img.update_one({"_id": 1}, {"$set": {"x": 2}})
    db.plain.update_one({"_id": 1}, {"$set": {"x": 1}})
    first, second = events(streams["lookup"], 2)
    # updateLookup: the document as it is now
    assert first["fullDocument"] == {"_id": 1, "x": 2}
    first, second = events(streams["when"], 2)
    assert first["fullDocument"] == {"_id": 1, "x": 1}
    assert first["fullDocumentBeforeChange"] == {"_id": 1, "x": 0}
    assert second["fullDocumentBeforeChange"] == {"_id": 1, "x": 1}
    assert list(first)[-1] == "fullDocumentBeforeChange"
    (p,) = events(streams["plain_when"], 1)
    assert p["fullDocument"] is None and p["fullDocumentBeforeChange"] is None
    with pytest.raises(OperationFailure) as e:
        streams["plain_req"].next()
    assert e.value.code == 47
    for s in streams.values():
        s.close()
    # the pre-images are stored as mongod stores them
    pre = list(rs_client.config.system.preimages.find())
    assert len(pre) == 2
    assert set(pre[0]["_id"]) == {"nsUUID", "ts", "applyOpsIndex"}
    assert pre[0]["_id"]["nsUUID"] == coll_uuid(db, "img")
    assert pre[0]["preImage"] == {"_id": 1, "x": 0}


def test_pre_images_in_a_transaction(rs_client):
    db = rs_client.csimgtx
    db.create_collection("i", changeStreamPreAndPostImages={"enabled": True})
    db.i.insert_many([{"_id": 1}, {"_id": 2}])
    with db.i.watch(full_document_before_change="required") as s:
        with rs_client.start_session() as sess, sess.start_transaction():
            db.i.delete_one({"_id": 1}, session=sess)
            db.i.update_one({"_id": 2}, {"$set": {"y": 1}}, session=sess)
        d, u = events(s, 2)
    assert d["fullDocumentBeforeChange"] == {"_id": 1}
    assert u["fullDocumentBeforeChange"] == {"_id": 2}
    idx = sorted(p["_id"]["applyOpsIndex"] for p in rs_client.config.system.preimages.find())
    assert idx == [Int64(0), Int64(1)]


# -------------------------------------------------------------- resuming


def test_resume_after_start_at_and_history_lost(rs_client):
    c = rs_client.csres.r
    with c.watch() as s:
        c.insert_many([{"_id": i} for i in range(5)])
        got = events(s, 5)
    with c.watch(resume_after=got[1]["_id"]) as s:
        assert [e["documentKey"]["_id"] for e in events(s, 3)] == [2, 3, 4]
    with c.watch(start_at_operation_time=got[0]["clusterTime"]) as s:
        assert len(events(s, 5)) == 5
    # a high-water mark: everything after it
    r = rs_client.csres.command("aggregate", "r", pipeline=[{"$changeStream": {}}], cursor={})
    hwm = r["cursor"]["postBatchResumeToken"]
    c.insert_one({"_id": "late"})
    with c.watch(resume_after=hwm) as s:
        assert events(s, 1)[0]["documentKey"] == {"_id": "late"}
    # a token whose event is not in the oplog
    with c.watch() as s:
        c.insert_one({"_id": "x"})
        (ev,) = events(s, 1)
    forged = dict(ev["_id"])
    forged["_data"] = forged["_data"][:-6] + ("00" if forged["_data"][-6:-4] != "00" else "01") \
        + forged["_data"][-4:]
    with pytest.raises(OperationFailure) as e:
        with c.watch(resume_after=forged) as s:
            s.next()
    assert e.value.code == 280
    with pytest.raises(OperationFailure) as e:
        c.watch(start_at_operation_time=Timestamp(1, 1))
    assert e.value.code == 286
    with pytest.raises(OperationFailure) as e:
        c.watch(resume_after={"_data": "zz"})
    assert e.value.code == 9


def test_resume_after_kill_9_exactly_once(tmp_path):
    """Events are sent once durable; a stream resumed after kill -9 with a
    token from before the crash sees every later committed change once."""
    dbpath = tmp_path / "db"
    s = ServedProcess(dbpath, ["--replSet", "rs0"]).start()
    try:
        c = s.client(directConnection=True)
        coll = c.k.events
        stream = coll.watch()
        coll.insert_many([{"_id": i} for i in range(10)])
        seen = events(stream, 4)
        token = seen[-1]["_id"]
        coll.insert_many([{"_id": i} for i in range(10, 20)])
        s.proc.kill()  # kill -9
        s.proc.wait()
        c.close()
    finally:
        s.stop()
    again = ServedProcess(dbpath, ["--replSet", "rs0"]).start()
    try:
        c = again.client(directConnection=True)
        with c.k.events.watch(resume_after=token) as st:
            c.k.events.insert_one({"_id": "after"})
            rest = events(st, 17)
            assert st.try_next() is None
        keys = [e["documentKey"]["_id"] for e in rest]
        assert keys == list(range(4, 20)) + ["after"]
        c.close()
        assert again.signal(signal.SIGTERM) == 0
    finally:
        again.stop()


# ------------------------------------------------------------ waiting


def test_await_data_wakes_for_another_clients_write(rs_server):
    a = MongoClient(rs_server.uri)
    b = MongoClient(rs_server.uri)
    with a.csw.c.watch(max_await_time_ms=5000) as s:
        s.try_next()  # the first getMore waits from here
        t0 = time.monotonic()
        threading.Timer(0.3, lambda: b.csw.c.insert_one({"_id": 1})).start()
        ev = s.next()
        took = time.monotonic() - t0
    assert ev["documentKey"] == {"_id": 1}
    assert took < 4.0  # woken by the write, not by the 5 s wait's end
    a.close()
    b.close()


# ------------------------------------------------------- pipeline stages


def test_stages_after_change_stream(rs_client):
    c = rs_client.csp.c
    with c.watch([{"$match": {"fullDocument.keep": True}},
                  {"$project": {"operationType": 1, "fullDocument.keep": 1}},
                  {"$addFields": {"extra": 1}}]) as s:
        c.insert_many([{"keep": False}, {"keep": True, "other": 1}])
        (ev,) = events(s, 1)
    assert set(ev) == {"_id", "operationType", "fullDocument", "extra"}
    assert ev["fullDocument"] == {"keep": True}
    for bad, code in (({"$group": {"_id": 1}}, 20), ({"$sort": {"a": 1}}, 20),
                      ({"$unsupported": 1}, 40324), ({"$changeStream": {}}, 40602)):
        with pytest.raises(OperationFailure) as e:
            c.watch([bad])
        assert e.value.code == code, bad
    # a pipeline that changes _id ends the stream (280, not resumable)
    with c.watch([{"$project": {"_id": 0}}]) as s:
        c.insert_one({})
        with pytest.raises(OperationFailure) as e:
            s.next()
    assert e.value.code == 280
    assert "NonResumableChangeStreamError" in e.value.details["errorLabels"]


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("spec,kw,code", [
    ({"resumeAfter": {"_data": "82"}, "startAfter": {"_data": "82"}}, {}, 50865),
    ({"fullDocument": "bogus"}, {}, 2),
    ({"fullDocument": 1}, {}, 14),
    ({"nope": 1}, {}, 40415),
    ({"allChangesForCluster": True}, {}, 72),
    ({}, {"db": "admin"}, 73),
    ({}, {"db": "local"}, 73),
    ({}, {"coll": "system.views"}, 73),
])
def test_option_errors(rs_client, spec, kw, code):
    db = rs_client[kw.get("db", "cserr")]
    target = kw.get("coll", "c")
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", target, pipeline=[{"$changeStream": spec}], cursor={})
    assert e.value.code == code


def test_not_first_and_in_transaction(rs_client):
    db = rs_client.cserr2
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", pipeline=[{"$match": {}}, {"$changeStream": {}}], cursor={})
    assert e.value.code == 40602
    db.c.insert_one({})
    with rs_client.start_session() as sess:
        sess.start_transaction()
        with pytest.raises(OperationFailure) as e:
            db.c.watch(session=sess)
        assert e.value.code == 263
        sess.abort_transaction()


# ------------------------------------------------------ pre-image expiry


def test_change_stream_options_cluster_parameter(rs_client, tmp_path):
    admin = rs_client.admin
    (p,) = admin.command("getClusterParameter", "changeStreamOptions")["clusterParameters"]
    assert p == {"_id": "changeStreamOptions", "clusterParameterTime": Timestamp(0, 0),
                 "preAndPostImages": {"expireAfterSeconds": "off"}}
    for bad in ({}, {"preAndPostImages": {}}, {"preAndPostImages": {"expireAfterSeconds": "x"}},
                {"preAndPostImages": {"expireAfterSeconds": -1}},
                {"preAndPostImages": {"expireAfterSeconds": 0}}):
        with pytest.raises(OperationFailure) as e:
            admin.command("setClusterParameter", {"changeStreamOptions": bad})
        assert e.value.code == 2, bad
    admin.command("setClusterParameter",
                  {"changeStreamOptions": {"preAndPostImages": {"expireAfterSeconds": 10}}})
    (p,) = admin.command("getClusterParameter", ["changeStreamOptions"])["clusterParameters"]
    assert p["preAndPostImages"] == {"expireAfterSeconds": Int64(10)}
    assert p["clusterParameterTime"] > Timestamp(0, 0)
    assert admin.command("getClusterParameter", "*")["clusterParameters"][0] == p
    with pytest.raises(OperationFailure) as e:
        admin.command("getClusterParameter", "nope")
    assert e.value.code == 4
    with pytest.raises(OperationFailure) as e:
        rs_client.other.command("getClusterParameter", "changeStreamOptions")
    assert e.value.code == 13
    # a standalone has no cluster parameters to set
    import multifora
    srv = multifora.Server(str(tmp_path / "standalone"), port=0)
    srv.start()
    try:
        with MongoClient(srv.uri) as client:
            with pytest.raises(OperationFailure) as e:
                client.admin.command(
                    "setClusterParameter",
                    {"changeStreamOptions": {"preAndPostImages": {"expireAfterSeconds": 1}}})
            assert e.value.code == 20
    finally:
        srv.stop()


def test_pre_images_expire_after_seconds(tmp_path):
    import multifora
    srv = multifora.Server(str(tmp_path / "db"), port=0, replica_set="rs0",
                           ttl_monitor_sleep_secs=1)
    srv.start()
    try:
        c = MongoClient(srv.uri, directConnection=True)
        db = c.csexp
        db.create_collection("e", changeStreamPreAndPostImages={"enabled": True})
        db.e.insert_one({"_id": 1})
        db.e.update_one({"_id": 1}, {"$set": {"v": 1}})
        pre = c.config.system.preimages
        time.sleep(2.5)  # passes of the monitor: "off" keeps them while the oplog has them
        assert pre.count_documents({}) == 1
        c.admin.command("setClusterParameter",
                        {"changeStreamOptions": {"preAndPostImages": {"expireAfterSeconds": 1}}})
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and pre.count_documents({}):
            time.sleep(0.2)
        assert pre.count_documents({}) == 0
        c.close()
    finally:
        srv.stop()


def test_tailing_the_oplog_wakes_for_a_write(rs_server):
    """A tailable awaitData cursor over local.oplog.rs (what replication
    tools tail) wakes for another client's write, as over any capped
    collection."""
    import pymongo
    a = MongoClient(rs_server.uri)
    b = MongoClient(rs_server.uri)
    b.tail.c.insert_one({"_id": "first"})  # (the collection exists: the wake is the insert's)
    last = next(a.local.oplog.rs.find().sort("$natural", -1).limit(1))["ts"]
    cur = a.local.oplog.rs.find({"ts": {"$gt": last}},
                                cursor_type=pymongo.CursorType.TAILABLE_AWAIT).max_await_time_ms(5000)
    t0 = time.monotonic()
    writer = threading.Timer(0.3, lambda: b.tail.c.insert_one({"_id": "w"}))
    writer.start()
    doc = None
    while doc is None and cur.alive and time.monotonic() - t0 < 10:
        try:
            doc = next(cur)  # the find, then a getMore that waits
        except StopIteration:
            pass
    took = time.monotonic() - t0
    assert doc is not None and doc["op"] == "i" and doc["o"] == {"_id": "w"}
    assert took < 4.0  # woken, not the 5 s wait's end
    writer.join()  # (the entry can be read before the insert's reply arrives)
    a.close()
    b.close()
