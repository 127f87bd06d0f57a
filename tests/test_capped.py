"""Capped collections (issue 48, coll/capped.c): create's options and
mongod 7.0's checks of them, the oldest documents removed past `size` or
`max` (at the limit and one past it), insertion order, what is refused on
them, collStats and listCollections, and a replica set logging the
removals."""
import bson
import pymongo
import pytest
from pymongo.errors import OperationFailure, WriteError

import multifora


def options(db, name):
    return next(db.list_collections(filter={"name": name}))["options"]


def doc_of_size(i, size):
    """{_id: i, p: "x..."} of exactly `size` bytes of BSON."""
    d = {"_id": i, "p": ""}
    d["p"] = "x" * (size - len(bson.encode(d)))
    assert len(bson.encode(d)) == size
    return d


@pytest.mark.parametrize("cmd,code,msg", [
    ({"capped": True}, 72, "the 'size' field is required when 'capped' is true"),
    ({"capped": True, "max": 5}, 72, "the 'size' field is required when 'capped' is true"),
    ({"size": 1000}, 72, "the 'capped' field needs to be true when either the 'size' or "
                         "'max' fields are present"),
    ({"capped": False, "max": 3}, 72, "the 'capped' field needs to be true"),
    ({"capped": True, "size": 0}, 51024,
     "BSON field 'size' value must be >= 1, actual value '0'"),
    ({"capped": True, "size": -5}, 51024, "actual value '-5'"),
    ({"capped": True, "size": "foo"}, 14,
     "BSON field 'create.size' is the wrong type 'string', expected types "
     "'[long, int, decimal, double]'"),
    ({"capped": True, "size": 1 << 51}, 2, "size cannot exceed 1 PB"),
    ({"capped": True, "size": 4096, "max": 1 << 31}, 2,
     "max in a capped collection has to be < 2^31 or not set"),
])
def test_create_checks(client, cmd, code, msg):
    with pytest.raises(OperationFailure) as ei:
        client.cap.command(dict({"create": "c"}, **cmd))
    assert ei.value.code == code
    assert msg in ei.value.details["errmsg"]
    assert "c" not in client.cap.list_collection_names()


def test_options_as_listed(client):
    db = client.cap
    db.create_collection("a", capped=True, size=1000)
    db.create_collection("b", capped=True, size=256, max=10)
    db.create_collection("c", capped=True, size=1, max=0)  # max 0: no limit
    db.create_collection("d", capped=True, size=5000000000)
    assert list(options(db, "a").items()) == [("capped", True), ("size", 1024)]
    assert options(db, "b") == {"capped": True, "size": 256, "max": 10}
    assert options(db, "c") == {"capped": True, "size": 256}
    assert options(db, "d")["size"] == 5000000000
    assert isinstance(options(db, "d")["size"], int)


def test_size_limit_at_and_past_it(client):
    db = client.cap
    db.create_collection("s", capped=True, size=1024)
    db.s.insert_many([doc_of_size(i, 256) for i in range(4)])  # 1024 bytes: the limit
    assert [d["_id"] for d in db.s.find()] == [0, 1, 2, 3]
    db.s.insert_one(doc_of_size(4, 256))  # past it: the oldest goes
    assert [d["_id"] for d in db.s.find()] == [1, 2, 3, 4]
    db.s.insert_one(doc_of_size(5, 257))  # 1025: two go
    assert [d["_id"] for d in db.s.find()] == [3, 4, 5]
    assert db.command("collStats", "s")["size"] <= 1024


def test_max_limit_at_and_past_it(client):
    db = client.cap
    db.create_collection("m", capped=True, size=100000, max=3)
    db.m.insert_many([{"_id": i} for i in range(3)])
    assert [d["_id"] for d in db.m.find()] == [0, 1, 2]
    db.m.insert_one({"_id": 3})
    assert [d["_id"] for d in db.m.find()] == [1, 2, 3]
    db.m.insert_many([{"_id": i} for i in range(4, 10)])
    assert [d["_id"] for d in db.m.find()] == [7, 8, 9]
    assert db.m.count_documents({}) == 3


def test_insertion_order(client):
    db = client.cap
    db.create_collection("o", capped=True, size=100000)
    ids = [5, 1, 9, 3, 7]
    for i in ids:
        db.o.insert_one({"_id": i})
    assert [d["_id"] for d in db.o.find()] == ids
    assert [d["_id"] for d in db.o.find().sort("$natural", -1)] == ids[::-1]


def test_a_document_larger_than_the_collection(client):
    db = client.cap
    db.create_collection("t", capped=True, size=256)
    db.t.insert_one({"_id": 1})
    with pytest.raises(WriteError) as ei:
        db.t.insert_one(doc_of_size(2, 300))
    assert ei.value.code == 2
    assert ei.value.details["errmsg"] == "object to insert exceeds cappedMaxSize"
    assert [d["_id"] for d in db.t.find()] == [1]


def test_updates_and_deletes_are_allowed(client):
    db = client.cap
    db.create_collection("u", capped=True, size=4096)
    db.u.insert_many([{"_id": i, "v": 0} for i in range(3)])
    db.u.update_one({"_id": 1}, {"$set": {"v": "grown " * 20}})  # growing: allowed since 6.0
    assert db.u.delete_one({"_id": 0}).deleted_count == 1  # allowed since 5.3
    assert [d["_id"] for d in db.u.find()] == [1, 2]


def test_coll_stats(client):
    db = client.cap
    db.create_collection("st", capped=True, size=2000, max=7)
    db.create_collection("plain")
    s = db.command("collStats", "st", scale=2)
    keys = list(s)
    assert keys[keys.index("freeStorageSize") + 1:][:4] == ["capped", "max", "maxSize",
                                                              "nindexes"]
    assert (s["capped"], s["max"], s["maxSize"]) == (True, 7, 2048 // 2)
    assert db.command("collStats", "st2").get("capped") is None  # (missing: zeros)
    p = db.command("collStats", "plain")
    assert p["capped"] is False and "max" not in p and "maxSize" not in p


def test_ttl_index_refused(client):
    db = client.cap
    db.create_collection("ttl", capped=True, size=4096)
    with pytest.raises(OperationFailure) as ei:
        db.ttl.create_index("at", expireAfterSeconds=60)
    assert ei.value.code == 67
    assert ei.value.details["errmsg"] == "Cannot create TTL index on a capped collection"
    db.ttl.create_index("at")  # without expireAfterSeconds: fine


def test_limits_hold_after_a_restart(tmp_path):
    path = str(tmp_path / "db")
    with multifora.Server(path, port=0) as s:
        s.command("cap", {"create": "r", "capped": True, "size": 100000, "max": 4})
        s.command("cap", {"insert": "r", "documents": [{"_id": i} for i in range(4)]})
    with multifora.Server(path, port=0) as s:  # its counts come from the tree again
        s.command("cap", {"insert": "r", "documents": [{"_id": 4}]})
        got = s.command("cap", {"find": "r"})["cursor"]["firstBatch"]
        assert [d["_id"] for d in got] == [1, 2, 3, 4]


def test_replica_set_logs_the_removals_and_refuses_transactions(rs_client):
    db = rs_client.cap
    db.create_collection("l", capped=True, size=100000, max=2)
    db.l.insert_many([{"_id": i} for i in range(3)])
    entries = list(rs_client.local.oplog.rs.find({"ns": "cap.l"}))
    assert [(e["op"], e["o"]["_id"]) for e in entries] == [
        ("i", 0), ("i", 1), ("i", 2), ("d", 0)]
    assert "stmtId" not in entries[-1]  # not part of the retryable insert
    with rs_client.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as ei:
            db.l.insert_one({"_id": 9}, session=s)
        assert ei.value.code == 263
        assert ei.value.details["errmsg"] == (
            "Collection 'cap.l' is a capped collection. Writes in transactions are not "
            "allowed on capped collections.")
    with rs_client.start_session() as s:
        s.start_transaction()
        assert [d["_id"] for d in db.l.find(session=s)] == [1, 2]  # reads are allowed
        with pytest.raises(OperationFailure) as ei:
            db.l.delete_one({"_id": 1}, session=s)
        assert ei.value.code == 20
    assert [d["_id"] for d in db.l.find()] == [1, 2]


# ------------------------------------------------------- tailable cursors

def test_tailable_cursor_reads_what_comes_after(client):
    db = client.cap
    db.create_collection("tl", capped=True, size=100000)
    db.tl.insert_many([{"_id": i} for i in range(3)])
    r = db.command("find", "tl", tailable=True, batchSize=2)
    assert [d["_id"] for d in r["cursor"]["firstBatch"]] == [0, 1]
    cid = r["cursor"]["id"]
    r = db.command("getMore", cid, collection="tl")
    assert [d["_id"] for d in r["cursor"]["nextBatch"]] == [2]
    assert r["cursor"]["id"] == cid  # at the end, still open
    r = db.command("getMore", cid, collection="tl")
    assert r["cursor"]["nextBatch"] == [] and r["cursor"]["id"] == cid
    db.tl.insert_many([{"_id": 3}, {"_id": 4}])
    r = db.command("getMore", cid, collection="tl")
    assert [d["_id"] for d in r["cursor"]["nextBatch"]] == [3, 4]
    # pymongo's tailable cursor, with a filter
    cur = db.tl.find({"_id": {"$gte": 4}}, cursor_type=pymongo.CursorType.TAILABLE)
    assert [d["_id"] for d in cur] == [4]
    db.tl.insert_one({"_id": 5})
    assert [d["_id"] for d in cur] == [5] and cur.alive


def test_tailable_over_an_empty_collection_closes(client):
    db = client.cap
    db.create_collection("te", capped=True, size=4096)
    r = db.command("find", "te", tailable=True)
    assert r["cursor"]["id"] == 0  # mongod keeps none over zero records


def test_await_data_waits_for_an_insert(client):
    import threading
    import time
    db = client.cap
    db.create_collection("aw", capped=True, size=100000)
    db.aw.insert_one({"_id": 0})
    r = db.command("find", "aw", tailable=True, awaitData=True)
    cid = r["cursor"]["id"]
    t0 = time.monotonic()
    r = db.command("getMore", cid, collection="aw", maxTimeMS=300)
    waited = time.monotonic() - t0
    assert r["cursor"]["nextBatch"] == [] and r["cursor"]["id"] == cid
    assert waited >= 0.25  # it waited its maxTimeMS, then answered empty
    other = pymongo.MongoClient(client.address[0], client.address[1])
    threading.Timer(0.2, lambda: other.cap.aw.insert_one({"_id": 1})).start()
    t0 = time.monotonic()
    r = db.command("getMore", cid, collection="aw", maxTimeMS=5000)
    assert [d["_id"] for d in r["cursor"]["nextBatch"]] == [1]
    assert time.monotonic() - t0 < 4  # woken by the insert, not the time
    other.close()


@pytest.mark.parametrize("cmd,code,msg", [
    ({"awaitData": True}, 9, "Cannot set 'awaitData' without also setting 'tailable'"),
    ({"tailable": True, "sort": {"a": 1}}, 2,
     "cannot use tailable option with a sort other than {$natural: 1}"),
    ({"tailable": True, "singleBatch": True}, 2,
     "cannot use tailable option with the 'singleBatch' option"),
])
def test_tailable_find_checks(client, cmd, code, msg):
    client.cap.create_collection("tc", capped=True, size=4096)
    with pytest.raises(OperationFailure) as ei:
        client.cap.command(dict({"find": "tc"}, **cmd))
    assert ei.value.code == code and ei.value.details["errmsg"] == msg


def test_tailable_refusals(client):
    db = client.cap
    db.plain.insert_one({})
    with pytest.raises(OperationFailure) as ei:
        db.command("find", "plain", tailable=True)
    assert ei.value.code == 2
    assert "tailable cursor requested on non capped collection" in ei.value.details["errmsg"]
    db.create_collection("tm", capped=True, size=4096)
    db.tm.insert_one({})
    r = db.command("find", "tm", tailable=True)
    with pytest.raises(OperationFailure) as ei:  # maxTimeMS: only for awaitData
        db.command("getMore", r["cursor"]["id"], collection="tm", maxTimeMS=10)
    assert ei.value.code == 2
    assert ei.value.details["errmsg"] == (
        "cannot set maxTimeMS on getMore command for a non-awaitData cursor")


def test_position_lost_when_the_last_read_document_goes(client):
    db = client.cap
    db.create_collection("pl", capped=True, size=100000, max=3)
    db.pl.insert_many([{"_id": i} for i in range(3)])
    r = db.command("find", "pl", tailable=True)
    cid = r["cursor"]["id"]
    assert [d["_id"] for d in r["cursor"]["firstBatch"]] == [0, 1, 2]
    db.pl.insert_many([{"_id": i} for i in range(3, 6)])  # 0, 1, 2 go
    with pytest.raises(OperationFailure) as ei:
        db.command("getMore", cid, collection="pl")
    assert ei.value.code == 136
    assert ei.value.details["errmsg"].startswith(
        "Executor error during getMore :: caused by :: CollectionScan died due to position "
        "in capped collection being deleted. Last seen record id: RecordId(")
    with pytest.raises(OperationFailure) as ei:  # the cursor is dead
        db.command("getMore", cid, collection="pl")
    assert ei.value.code == 43


def test_tailable_across_wrap_around(client):
    """A reader keeping up with a writer that wraps the collection many
    times sees every document once, in order."""
    db = client.cap
    db.create_collection("wr", capped=True, size=100000, max=5)
    db.wr.insert_one({"_id": 0})
    cur = db.wr.find(cursor_type=pymongo.CursorType.TAILABLE)
    seen = [d["_id"] for d in cur]
    for i in range(1, 40):
        db.wr.insert_one({"_id": i})
        seen += [d["_id"] for d in cur]
    assert seen == list(range(40))
    assert [d["_id"] for d in db.wr.find()] == list(range(35, 40))


def test_out_to_a_capped_collection_is_refused(client):
    db = client.cap
    db.src.insert_many([{"_id": 1}, {"_id": 2}])
    db.create_collection("co", capped=True, size=4096)
    db.co.insert_one({"_id": "kept"})
    with pytest.raises(OperationFailure) as ei:
        list(db.src.aggregate([{"$out": "co"}]))
    assert ei.value.code == 17152
    assert ei.value.details["errmsg"].endswith(  # (the executor's prefix before it)
        "namespace 'cap.co' is capped so it can't be used for $out")
    assert list(db.co.find()) == [{"_id": "kept"}]
    assert not [n for n in db.list_collection_names() if n.startswith("tmp.agg_out")]


def test_tailable_scans_the_collection_whatever_the_hint(client):
    """mongod's planner gives a tailable find a collection scan only."""
    db = client.cap
    db.create_collection("th", capped=True, size=100000)
    db.th.create_index("k")
    db.th.insert_many([{"_id": i, "k": 10 - i} for i in range(3)])
    r = db.command("find", "th", tailable=True, hint="k_1")
    assert [d["_id"] for d in r["cursor"]["firstBatch"]] == [0, 1, 2]  # insertion order
    db.th.insert_one({"_id": 3, "k": 0})
    r = db.command("getMore", r["cursor"]["id"], collection="th")
    assert [d["_id"] for d in r["cursor"]["nextBatch"]] == [3]


# ------------------------------------ convertToCapped, cloneCollectionAsCapped

def coll_uuid(db, name):
    return next(db.list_collections(filter={"name": name}))["info"]["uuid"]


def test_convert_keeps_the_newest_in_order(client):
    db = client.cap
    db.cv.insert_many([doc_of_size(i, 256) for i in range(20)])
    db.cv.delete_one({"_id": 3})  # a hole: natural order, not _id order, is what counts
    db.cv.insert_one(doc_of_size(3, 256))
    assert db.command("convertToCapped", "cv", size=1000) == {"ok": 1.0}  # 1024: 4 of them
    assert [d["_id"] for d in db.cv.find()] == [17, 18, 19, 3]
    db.big.insert_many([doc_of_size(i, 256) for i in range(5)])
    db.command("convertToCapped", "big", size=100000)  # all fit
    assert [d["_id"] for d in db.big.find()] == [0, 1, 2, 3, 4]
    # it is capped now: the next insert pushes the oldest out
    db.cv.insert_one(doc_of_size(20, 256))
    assert [d["_id"] for d in db.cv.find()] == [18, 19, 3, 20]


def test_convert_gives_a_new_collection(client):
    db = client.cap
    db.create_collection("nc", collation={"locale": "fr"})
    db.nc.insert_many([{"_id": i, "a": i} for i in range(3)])
    db.nc.create_index("a")
    db.nc.create_index([("b", 1)], unique=True, sparse=True)
    old = coll_uuid(db, "nc")
    db.command("convertToCapped", "nc", size=5000)
    assert coll_uuid(db, "nc") != old
    assert list(db.nc.index_information()) == ["_id_"]  # only _id comes along
    opts = options(db, "nc")
    assert list(opts)[:2] == ["capped", "size"]
    assert opts["capped"] is True and opts["size"] == 5120  # rounded up as create does
    assert opts["collation"]["locale"] == "fr"  # the source's other options stay
    assert "temp" not in opts
    s = db.command("collStats", "nc")
    assert (s["capped"], s["maxSize"], s["nindexes"]) == (True, 5120, 1)
    assert db.list_collection_names() == ["nc"]  # no temporary collection left


def test_convert_a_capped_collection_again(client):
    db = client.cap
    db.create_collection("again", capped=True, size=100000, max=3)
    db.again.insert_many([doc_of_size(i, 256) for i in range(3)])
    db.command("convertToCapped", "again", size=500)  # 512: two fit
    assert [d["_id"] for d in db.again.find()] == [1, 2]
    # the options are the source's, made capped at the new size: its max stays
    assert options(db, "again") == {"capped": True, "size": 512, "max": 3}


def test_clone_leaves_the_source_alone(client):
    db = client.cap
    db.src.insert_many([doc_of_size(i, 256) for i in range(10)])
    db.src.create_index("p")
    before = coll_uuid(db, "src")
    r = db.command("cloneCollectionAsCapped", "src", toCollection="dst", size=1024)
    assert r == {"ok": 1.0}
    assert [d["_id"] for d in db.dst.find()] == [6, 7, 8, 9]
    assert options(db, "dst") == {"capped": True, "size": 1024}
    assert list(db.dst.index_information()) == ["_id_"]
    assert coll_uuid(db, "dst") != before
    assert [d["_id"] for d in db.src.find()] == list(range(10))
    assert coll_uuid(db, "src") == before
    assert options(db, "src") == {}
    assert sorted(db.src.index_information()) == ["_id_", "p_1"]
    # all of them, when they fit (size as a double, as the shell sends it)
    db.command("cloneCollectionAsCapped", "src", toCollection="all", size=100000.0)
    assert db.all.count_documents({}) == 10


def test_a_failed_convert_keeps_the_collection(client):
    db = client.cap
    db.ff.insert_many([doc_of_size(0, 256), doc_of_size(1, 2000)])
    with pytest.raises(OperationFailure) as ei:
        db.command("convertToCapped", "ff", size=1000)
    assert ei.value.code == 2
    assert ei.value.details["errmsg"] == "object to insert exceeds cappedMaxSize"
    assert db.list_collection_names() == ["ff"]  # the temporary collection went
    assert options(db, "ff") == {}
    assert db.ff.count_documents({}) == 2


def test_a_temporary_clone_goes_at_the_next_start(tmp_path):
    path = str(tmp_path / "db")
    with multifora.Server(path, port=0) as s:
        s.command("cap", {"insert": "t", "documents": [{"_id": 1}]})
        s.command("cap", {"cloneCollectionAsCapped": "t", "toCollection": "tt",
                          "size": 4096, "temp": True})
        got = s.command("cap", {"listCollections": 1, "filter": {"name": "tt"}})
        assert got["cursor"]["firstBatch"][0]["options"] == {
            "capped": True, "size": 4096, "temp": True}
    with multifora.Server(path, port=0) as s:  # mongod drops temporary collections at start
        got = s.command("cap", {"listCollections": 1, "nameOnly": True})
        assert [c["name"] for c in got["cursor"]["firstBatch"]] == ["t"]


CONVERT_ERRORS = [
    ({"convertToCapped": "none", "size": 1000}, 26,
     "source collection cap.none does not exist"),
    ({"convertToCapped": "e"}, 72, "invalid command spec"),
    ({"convertToCapped": "e", "size": 0}, 72, "invalid command spec"),
    ({"convertToCapped": "e", "size": 0.5}, 72, "invalid command spec"),
    ({"convertToCapped": "e", "size": "1000"}, 72, "invalid command spec"),
    ({"convertToCapped": "e", "size": -1}, 2, "size has to be >= 0"),
    ({"convertToCapped": "e", "size": 5308156746568725891247.0}, 2,
     "size cannot exceed 1 PB"),
    ({"convertToCapped": 5, "size": 1000}, 73, "collection name has invalid type int"),
    ({"convertToCapped": "system.views", "size": 1000}, 20,
     "renaming system.views collection or renaming to system.views is not allowed"),
    ({"cloneCollectionAsCapped": "e", "toCollection": "e2", "size": 1000}, 48,
     "cloneCollectionAsCapped failed - destination collection cap.e2 already exists. "
     "source collection: cap.e"),
    ({"cloneCollectionAsCapped": "none", "toCollection": "x", "size": 1000}, 26,
     "source collection cap.none does not exist"),
    ({"cloneCollectionAsCapped": "e", "size": 1000}, 14,
     "'toCollection' must be of type String"),
    ({"cloneCollectionAsCapped": "e", "toCollection": 1, "size": 1000}, 14,
     "'toCollection' must be of type String"),
    ({"cloneCollectionAsCapped": 1, "toCollection": "x", "size": 1000}, 14,
     "'cloneCollectionAsCapped' must be of type String"),
    ({"cloneCollectionAsCapped": "e", "toCollection": "", "size": 1000}, 73,
     "Invalid target namespace: cap."),
    ({"cloneCollectionAsCapped": "a$b", "toCollection": "x", "size": 1000}, 73,
     "Invalid source collection name: a$b"),
    ({"cloneCollectionAsCapped": "e", "toCollection": ".x", "size": 1000}, 73,
     "Invalid target collection name: .x"),
    ({"cloneCollectionAsCapped": "e", "toCollection": "x"}, 72, "invalid command spec"),
    ({"cloneCollectionAsCapped": "e", "toCollection": "x", "size": -5}, 2,
     "size has to be >= 0"),
]


@pytest.mark.parametrize("cmd,code,msg", CONVERT_ERRORS)
def test_convert_and_clone_errors(client, cmd, code, msg):
    db = client.cap
    db.e.insert_one({"_id": 1})
    db.e2.insert_one({"_id": 2})
    with pytest.raises(OperationFailure) as ei:
        db.command(cmd)
    assert ei.value.code == code
    assert ei.value.details["errmsg"] == msg
    assert sorted(db.list_collection_names()) == ["e", "e2"]  # nothing made, nothing lost
    assert options(db, "e") == {}


@pytest.mark.parametrize("cmd", [{"convertToCapped": "c", "size": 1024},
                                 {"cloneCollectionAsCapped": "c", "toCollection": "d",
                                  "size": 1024}])
def test_a_database_that_does_not_exist(client, cmd):
    with pytest.raises(OperationFailure) as ei:
        client.nodb.command(cmd)
    assert ei.value.code == 26
    assert ei.value.details["errmsg"] == "database nodb not found"


def test_convert_in_a_replica_set_logs_mongods_entries(rs_client):
    db = rs_client.cap
    db.rc.insert_many([doc_of_size(i, 256) for i in range(12)])
    db.rc.create_index("p")
    old = coll_uuid(db, "rc")
    t0 = next(rs_client.local.oplog.rs.find().sort("$natural", -1).limit(1))["ts"]
    db.command("convertToCapped", "rc", size=1024)
    new = coll_uuid(db, "rc")
    es = list(rs_client.local.oplog.rs.find({"ts": {"$gt": t0}}))
    create, *docs, rename = es
    tmp = create["o"]["create"]
    assert tmp.startswith("tmp") and tmp.endswith(".convertToCapped.rc") and len(tmp) == 27
    assert tmp[3:8].isalnum()
    assert create["ns"] == "cap.$cmd" and create["ui"] == new
    assert list(create["o"].items()) == [
        ("create", tmp), ("capped", True), ("size", 1024), ("temp", True),
        ("idIndex", {"v": 2, "key": {"_id": 1}, "name": "_id_"})]
    # 12 x 256 bytes, 1024 past twice the size: the first document is
    # skipped (4 x 256 bytes off that excess), as mongod skips it; the rest
    # are inserted, the oldest deleted as the size is passed
    assert all(d["ns"] == "cap." + tmp and d["ui"] == new for d in docs)
    assert [(d["op"], d["o"]["_id"]) for d in docs] == (
        [("i", 1), ("i", 2), ("i", 3), ("i", 4)] +
        [x for i in range(5, 12) for x in (("i", i), ("d", i - 4))])
    assert rename["ns"] == "cap.$cmd" and rename["ui"] == new
    assert list(rename["o"].items()) == [
        ("renameCollection", "cap." + tmp), ("to", "cap.rc"), ("stayTemp", False),
        ("dropTarget", old)]
    assert rename["o2"] == {"numRecords": 12}
    assert [d["_id"] for d in db.rc.find()] == [8, 9, 10, 11]


def test_clone_in_a_replica_set(rs_client):
    db = rs_client.cap
    db.s.insert_many([{"_id": i} for i in range(3)])
    t0 = next(rs_client.local.oplog.rs.find().sort("$natural", -1).limit(1))["ts"]
    db.command("cloneCollectionAsCapped", "s", toCollection="d", size=4096)
    create, *docs = list(rs_client.local.oplog.rs.find({"ts": {"$gt": t0}}))
    assert list(create["o"].items())[:3] == [("create", "d"), ("capped", True),
                                             ("size", 4096)]
    assert "temp" not in create["o"]
    assert [(d["op"], d["ns"], d["o"]["_id"]) for d in docs] == [
        ("i", "cap.d", 0), ("i", "cap.d", 1), ("i", "cap.d", 2)]


def test_a_change_stream_sees_the_rename_onto_it(rs_client):
    c = rs_client.cap.cs
    c.insert_many([{"_id": i} for i in range(3)])
    with c.watch() as s:
        rs_client.cap.command("convertToCapped", "cs", size=4096)
        got = []
        while len(got) < 2:
            ev = s.try_next()
            if ev is not None:
                got.append(ev)
        assert not s.alive
    ren, inv = got
    assert ren["operationType"] == "rename"
    assert ren["ns"]["db"] == "cap"
    assert ren["ns"]["coll"].endswith(".convertToCapped.cs")
    assert ren["to"] == {"db": "cap", "coll": "cs"}
    assert inv["operationType"] == "invalidate"


def test_not_in_a_transaction(rs_client):
    db = rs_client.cap
    db.tx.insert_one({"_id": 1})
    with rs_client.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as ei:
            db.command("convertToCapped", "tx", size=4096, session=s)
        assert ei.value.code == 263
    assert options(db, "tx") == {}
