"""find, getMore, killCursors, distinct, delete and count over pymongo:
batches, cursor lifetime, re-seeking across writes, the _id access paths,
and mongod's errors for bad arguments."""
from __future__ import annotations

import random
import time

import bson
import pymongo
import pytest
from bson import Decimal128, Int64, ObjectId
from bson.raw_bson import RawBSONDocument
from pymongo.errors import OperationFailure

import wirelib


def code_of(excinfo):
    return excinfo.value.code


def fill(coll, n, **extra):
    coll.insert_many([{"_id": i, "x": i % 10, **extra} for i in range(n)])


# ------------------------------------------------------------------ find


def test_find_filter_and_missing_collection(client):
    db = client.t
    assert list(db.nothing.find()) == []
    reply = db.command("find", "nothing")
    assert reply["cursor"] == {"firstBatch": [], "id": 0, "ns": "t.nothing"}
    fill(db.c, 50)
    assert [d["_id"] for d in db.c.find({"x": 3})] == [3, 13, 23, 33, 43]
    assert db.c.find_one({"_id": 7}) == {"_id": 7, "x": 7}
    assert db.c.find_one({"_id": 700}) is None


def test_first_batch_defaults_to_101_and_getmore_takes_the_rest(client):
    db = client.t
    fill(db.c, 250)
    r = db.command("find", "c")
    assert len(r["cursor"]["firstBatch"]) == 101
    cid = r["cursor"]["id"]
    assert cid != 0 and isinstance(cid, int)
    r = db.command("getMore", Int64(cid), collection="c")
    assert len(r["cursor"]["nextBatch"]) == 149
    assert r["cursor"]["id"] == 0
    assert r["cursor"]["ns"] == "t.c"


def test_batch_size_limit_skip_single_batch(client):
    db = client.t
    fill(db.c, 20)
    r = db.command("find", "c", batchSize=3)
    assert [d["_id"] for d in r["cursor"]["firstBatch"]] == [0, 1, 2]
    r2 = db.command("getMore", r["cursor"]["id"], collection="c", batchSize=4)
    assert [d["_id"] for d in r2["cursor"]["nextBatch"]] == [3, 4, 5, 6]
    # limit closes the cursor when reached
    r = db.command("find", "c", limit=5, batchSize=3)
    assert len(r["cursor"]["firstBatch"]) == 3 and r["cursor"]["id"] != 0
    r2 = db.command("getMore", r["cursor"]["id"], collection="c")
    assert [d["_id"] for d in r2["cursor"]["nextBatch"]] == [3, 4]
    assert r2["cursor"]["id"] == 0
    r = db.command("find", "c", skip=18)
    assert [d["_id"] for d in r["cursor"]["firstBatch"]] == [18, 19]
    r = db.command("find", "c", batchSize=2, singleBatch=True)
    assert len(r["cursor"]["firstBatch"]) == 2 and r["cursor"]["id"] == 0
    # batchSize 0: an empty first batch, the cursor open
    r = db.command("find", "c", batchSize=0)
    assert r["cursor"]["firstBatch"] == [] and r["cursor"]["id"] != 0
    # the driver's negative limit: one batch of that many
    assert [d["_id"] for d in db.c.find().limit(-4)] == [0, 1, 2, 3]
    assert len(list(db.c.find().batch_size(7))) == 20


def test_batches_are_bounded_by_16_mib(client):
    db = client.t
    big = "x" * (5 * 1024 * 1024)
    db.c.insert_many([{"_id": i, "s": big} for i in range(5)])
    r = db.command("find", "c")
    first = r["cursor"]["firstBatch"]
    assert len(first) == 3  # a fourth 5 MiB document would pass 16 MiB
    r2 = db.command("getMore", r["cursor"]["id"], collection="c")
    assert [d["_id"] for d in r2["cursor"]["nextBatch"]] == [3, 4]
    assert r2["cursor"]["id"] == 0


def _elements(raw):
    """(key, type, value bytes) of each element of a BSON document, for
    the types a cursor reply holds."""
    fixed = {0x01: 8, 0x08: 1, 0x10: 4, 0x12: 8}
    at, end = 4, len(raw) - 1
    while at < end:
        kind = raw[at]
        k_end = raw.index(b"\0", at + 1)
        key = raw[at + 1:k_end].decode()
        at = k_end + 1
        if kind in (0x03, 0x04):
            size = int.from_bytes(raw[at:at + 4], "little")
        elif kind == 0x02:
            size = 4 + int.from_bytes(raw[at:at + 4], "little")
        else:
            size = fixed[kind]
        yield key, kind, raw[at:at + size]
        at += size


def test_large_batches_keep_every_document_in_order(client):
    # About 800 KiB per batch, written into the reply at its final size
    # (cmd_find.c): a scan's documents from the collection's pages, a
    # sorter's and an aggregate's from copies in runs of 64 KiB, so such a
    # batch spans many runs; every document, its array key and the order
    # must come through, in firstBatch, nextBatch, a sorted find and an
    # aggregate cursor.
    db = client.t
    docs = [{"_id": i, "x": i % 7, "s": "v%05d" % i * 30} for i in range(6000)]
    db.c.insert_many(docs)
    raw = db.command("find", "c", batchSize=4000,
                     codec_options=bson.CodecOptions(document_class=RawBSONDocument)).raw
    cursor = dict((k, v) for k, _, v in _elements(raw))["cursor"]
    parts = {k: (t, v) for k, t, v in _elements(cursor)}
    assert list(parts) == ["firstBatch", "id", "ns"]
    first = list(_elements(parts["firstBatch"][1]))
    assert [(k, t) for k, t, _ in first] == [(str(i), 0x03) for i in range(4000)]
    assert [bson.decode(v) for _, _, v in first] == docs[:4000]
    cid = bson.decode(raw)["cursor"]["id"]
    more = db.command("getMore", Int64(cid), collection="c", batchSize=5000)["cursor"]
    assert more["id"] == 0
    assert more["nextBatch"] == docs[4000:]
    assert list(db.c.find({}, batch_size=6000)) == docs
    by_x = sorted(docs, key=lambda d: (-d["x"], d["_id"]))
    assert list(db.c.find({}).sort([("x", -1), ("_id", 1)]).batch_size(6000)) == by_x
    got = db.command("aggregate", "c", pipeline=[{"$match": {"x": {"$lt": 3}}}],
                     cursor={"batchSize": 6000})["cursor"]
    assert got["firstBatch"] == [d for d in docs if d["x"] < 3]


def test_batches_written_while_writers_wait(server):
    # A scan's batch refers to the documents in the collection's pages and
    # is written into the reply before the collection is unlocked
    # (cmd_find.c): writers rewriting the documents meanwhile, with values
    # of a new size each time (so that cells move within their pages),
    # must never show through as a torn or foreign document.  Each
    # document's s is its g repeated, its length set by g.
    import threading

    def doc(i, g):
        return {"_id": i, "g": g, "s": ("%d." % g) * (1 + (g * 7 + i) % 23)}

    n = 3000
    setup = pymongo.MongoClient(server.uri)
    setup.t.c.insert_many([doc(i, 0) for i in range(n)])
    setup.t.c.create_index("g")
    stop = threading.Event()
    wrote = []

    def writer(seed):
        c = pymongo.MongoClient(server.uri)
        rng = random.Random(seed)
        g = seed
        while not stop.is_set():
            g += 2
            ops = [pymongo.ReplaceOne({"_id": i}, doc(i, g))
                   for i in rng.sample(range(n), 100)]
            c.t.c.bulk_write(ops, ordered=False)
            wrote.append(len(ops))
        c.close()

    threads = [threading.Thread(target=writer, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    bad, reads = [], 0
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            for flt in ({}, {"g": {"$gte": 0}}):  # a collection scan, an index scan
                # one batch, read under one hold of the lock: every
                # document once
                cur = setup.t.command("find", "c", filter=flt, batchSize=n + 1)["cursor"]
                got = cur["firstBatch"]
                reads += 1
                bad += [d for d in got if d != doc(d["_id"], d["g"])]
                if cur["id"] != 0 or sorted(d["_id"] for d in got) != list(range(n)):
                    bad.append(("ids", len(got), cur["id"]))
    finally:
        stop.set()
        for t in threads:
            t.join()
    setup.close()
    assert reads >= 4 and sum(wrote) >= 1000
    assert bad == []


def test_find_argument_errors(client):
    db = client.t
    fill(db.c, 3)
    cases = [
        ({"filter": 1}, 14),
        ({"skip": -1}, 51024),
        ({"limit": -1}, 51024),
        ({"batchSize": -1}, 51024),
        ({"sort": "x"}, 14),
        ({"projection": 3}, 14),
        ({"hint": 5}, 14),
        ({"bogus": 1}, 40415),
        ({"filter": {"$foo": 1}}, 2),
        ({"hint": "no_such_index"}, 2),
        ({"hint": {"x": 1}}, 2),
        ({"maxTimeMS": -1}, 2),
    ]
    for args, code in cases:
        with pytest.raises(OperationFailure) as e:
            db.command("find", "c", **args)
        assert code_of(e) == code, (args, e.value.details)
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", filter={"$foo": 1})
    assert e.value.details["errmsg"] == "unknown top level operator: $foo"


def test_hints_that_exist(client):
    db = client.t
    fill(db.c, 10)
    assert [d["_id"] for d in db.c.find().hint("_id_")] == list(range(10))
    assert [d["_id"] for d in db.c.find().hint([("_id", 1)])] == list(range(10))
    assert [d["_id"] for d in db.c.find().hint([("$natural", -1)])] == list(range(9, -1, -1))


# --------------------------------------------------------------- cursors


def test_getmore_errors(client):
    db = client.t
    fill(db.c, 10)
    r = db.command("find", "c", batchSize=2)
    cid = r["cursor"]["id"]
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", Int64(cid), collection="other")
    assert code_of(e) == 13
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", 5, collection="c")  # int32: must be long
    assert code_of(e) == 14
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", Int64(cid))
    assert code_of(e) == 40414
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", Int64(12345), collection="c")
    assert code_of(e) == 43
    assert e.value.details["codeName"] == "CursorNotFound"
    # the cursor survived the failed getMore on the wrong namespace
    r2 = db.command("getMore", Int64(cid), collection="c")
    assert len(r2["cursor"]["nextBatch"]) == 8


def test_kill_cursors(client):
    db = client.t
    fill(db.c, 10)
    cid = db.command("find", "c", batchSize=2)["cursor"]["id"]
    r = db.command("killCursors", "c", cursors=[Int64(cid), Int64(77)])
    assert r["cursorsKilled"] == [cid]
    assert r["cursorsNotFound"] == [77]
    assert r["cursorsAlive"] == [] and r["cursorsUnknown"] == []
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", Int64(cid), collection="c")
    assert code_of(e) == 43
    with pytest.raises(OperationFailure) as e:
        db.command("killCursors", "c")
    assert code_of(e) == 40414


def test_exhausted_cursor_is_gone(client):
    db = client.t
    fill(db.c, 3)
    r = db.command("find", "c", batchSize=2)
    cid = r["cursor"]["id"]
    r2 = db.command("getMore", Int64(cid), collection="c")
    assert r2["cursor"]["id"] == 0
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", Int64(cid), collection="c")
    assert code_of(e) == 43


def test_idle_cursors_time_out(client):
    admin = client.admin
    db = client.t
    fill(db.c, 10)
    was = admin.command("setParameter", 1, cursorTimeoutMillis=300)["was"]
    assert was == 600000
    assert admin.command("getParameter", 1, cursorTimeoutMillis=1)["cursorTimeoutMillis"] == 300
    try:
        idle = db.command("find", "c", batchSize=1)["cursor"]["id"]
        kept = db.command("find", "c", batchSize=1, noCursorTimeout=True)["cursor"]["id"]
        time.sleep(1.0)
        with pytest.raises(OperationFailure) as e:
            db.command("getMore", Int64(idle), collection="c")
        assert code_of(e) == 43
        r = db.command("getMore", Int64(kept), collection="c")
        assert len(r["cursor"]["nextBatch"]) == 9
    finally:
        admin.command("setParameter", 1, cursorTimeoutMillis=600000)
    with pytest.raises(OperationFailure) as e:
        admin.command("setParameter", 1, noSuchParameter=1)
    assert code_of(e) == 72


def test_cursor_reseeks_across_writes(client):
    db = client.t
    fill(db.c, 20)
    cur = db.c.find().batch_size(5)
    seen = [next(cur)["_id"] for _ in range(5)]
    db.c.delete_many({"_id": {"$in": [5, 6, 7]}})  # ahead of the position
    db.c.delete_many({"_id": {"$lt": 3}})  # behind it
    db.c.insert_one({"_id": 100})  # appended: the scan reaches it
    seen += [d["_id"] for d in cur]
    assert seen == [0, 1, 2, 3, 4] + list(range(8, 20)) + [100]


def test_cursor_over_id_range_reseeks(client):
    db = client.t
    fill(db.c, 30)
    cur = db.c.find({"_id": {"$gte": 10, "$lt": 25}}).batch_size(4)
    got = [next(cur)["_id"] for _ in range(4)]
    db.c.delete_one({"_id": 15})
    db.c.insert_one({"_id": 13.5})
    got += [d["_id"] for d in cur]
    assert got == [10, 11, 12, 13, 13.5, 14, 16, 17, 18, 19, 20, 21, 22, 23, 24]


def test_getmore_after_drop_is_query_plan_killed(client):
    db = client.t
    fill(db.c, 10)
    cid = db.command("find", "c", batchSize=2)["cursor"]["id"]
    db.c.drop()
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", Int64(cid), collection="c")
    assert code_of(e) == 175
    assert "collection dropped" in e.value.details["errmsg"]


def test_list_collections_cursor(client):
    db = client.t
    for i in range(5):
        db.create_collection(f"c{i}")
    r = db.command("listCollections", cursor={"batchSize": 2}, nameOnly=True)
    names = [d["name"] for d in r["cursor"]["firstBatch"]]
    assert len(names) == 2 and r["cursor"]["id"] != 0
    assert r["cursor"]["ns"] == "t.$cmd.listCollections"
    r2 = db.command("getMore", r["cursor"]["id"], collection="$cmd.listCollections")
    names += [d["name"] for d in r2["cursor"]["nextBatch"]]
    assert r2["cursor"]["id"] == 0
    assert sorted(names) == [f"c{i}" for i in range(5)]
    assert sorted(db.list_collection_names()) == names and len(names) == 5


# ----------------------------------------------- the _id index, against scans

ID_VALUES = [
    -5, 0, 1, 2.5, 3, Int64(4), Decimal128("4.5"), 7, 1e20, float("-inf"),
    "", "a", "ab", "b", "Z",
    ObjectId("0123456789ab0123456789ab"), ObjectId("ffffffffffffffffffffffff"),
    True, False, None,
    {"a": 1}, {"a": 2}, {"b": 0},
    bson.datetime.datetime(2020, 1, 1), bson.Timestamp(5, 1),
    bson.Binary(b"\x01\x02"), bson.MinKey(), bson.MaxKey(),
]


def id_filters(rng):
    v = lambda: rng.choice(ID_VALUES)  # noqa: E731
    forms = [
        lambda: {"_id": v()},
        lambda: {"_id": {"$eq": v()}},
        lambda: {"_id": {"$in": [v() for _ in range(rng.randint(0, 4))]}},
        lambda: {"_id": {rng.choice(["$gt", "$gte", "$lt", "$lte"]): v()}},
        lambda: {"_id": {"$gt": v(), "$lt": v()}},
        lambda: {"_id": {"$gte": v(), "$lte": v(), "$ne": v()}},
        lambda: {"$and": [{"_id": {"$gte": v()}}, {"_id": {"$lt": v()}}]},
        lambda: {"_id": {"$in": [v(), v()]}, "k": {"$gte": rng.randint(0, 30)}},
    ]
    return rng.choice(forms)()


def test_id_paths_agree_with_collection_scans(client):
    coll = client.t.c
    coll.insert_many([{"_id": v, "k": i} for i, v in enumerate(ID_VALUES)])
    rng = random.Random(7)
    for _ in range(400):
        f = id_filters(rng)
        indexed = sorted(d["k"] for d in coll.find(f))
        scanned = sorted(d["k"] for d in coll.find(f).hint([("$natural", 1)]))
        assert indexed == scanned, f
        assert coll.count_documents(f) if False else True
        n = client.t.command("count", "c", query=f)["n"]
        assert n == len(scanned), f


def test_sort_on_id_uses_index_order(client):
    coll = client.t.c
    rng = random.Random(3)
    ids = list(range(200))
    rng.shuffle(ids)
    coll.insert_many([{"_id": i} for i in ids])
    assert [d["_id"] for d in coll.find({}, sort=[("_id", 1)]).batch_size(17)] == list(range(200))
    assert [d["_id"] for d in coll.find({}, sort=[("_id", -1)]).batch_size(17)] == list(
        range(199, -1, -1))
    assert [d["_id"] for d in coll.find({"_id": {"$gte": 150}}, sort=[("_id", -1)])] == list(
        range(199, 149, -1))


# --------------------------------------------------------------- distinct


def test_distinct(client):
    db = client.t
    assert db.nothing.distinct("x") == []
    db.c.insert_many([
        {"_id": 1, "x": 1, "a": {"b": "p"}},
        {"_id": 2, "x": 1.0, "a": [{"b": "q"}, {"b": "p"}]},
        {"_id": 3, "x": "s", "a": {"b": ["r", "q"]}},
        {"_id": 4, "x": [3, [4]], "a": {"c": 1}},
        {"_id": 5, "x": None},
        {"_id": 6},
    ])
    vals = db.c.distinct("x")
    assert vals == [None, 1, 3, "s", [4]]
    assert db.c.distinct("a.b") == ["p", "q", "r"]
    assert db.c.distinct("x", {"_id": {"$gt": 2}}) == [None, 3, "s", [4]]
    assert db.c.distinct("_id", {"x": 1}) == [1, 2]
    with pytest.raises(OperationFailure) as e:
        db.command("distinct", "c")
    assert code_of(e) == 40414
    with pytest.raises(OperationFailure) as e:
        db.command("distinct", "c", key=1)
    assert code_of(e) == 14
    with pytest.raises(OperationFailure) as e:
        db.command("distinct", "c", key="x", query={"$bad": 1})
    assert code_of(e) == 2


# ----------------------------------------------------------------- delete


def test_delete(client):
    db = client.t
    fill(db.c, 30)
    assert db.c.delete_one({"x": 3}).deleted_count == 1
    assert db.c.delete_many({"x": 3}).deleted_count == 2
    assert db.c.delete_many({"_id": {"$gte": 25}}).deleted_count == 5
    assert db.c.delete_one({"_id": 1000}).deleted_count == 0
    assert db.nothing.delete_many({}).deleted_count == 0
    assert db.command("count", "c")["n"] == 22
    # the _id index entry went with the document: the _id can be reused
    db.c.insert_one({"_id": 3, "again": True})
    assert db.c.find_one({"_id": 3}) == {"_id": 3, "again": True}


def test_delete_errors(client):
    db = client.t
    fill(db.c, 5)
    with pytest.raises(OperationFailure) as e:
        db.command("delete", "c", deletes=[{"q": {}, "limit": 2}])
    assert code_of(e) == 9
    with pytest.raises(OperationFailure) as e:
        db.command("delete", "c", deletes=[{"limit": 0}])
    assert code_of(e) == 40414
    with pytest.raises(OperationFailure) as e:
        db.command("delete", "c", deletes=[{"q": {}}])
    assert code_of(e) == 40414
    with pytest.raises(OperationFailure) as e:
        db.command("delete", "c", deletes=[])
    assert code_of(e) == 16
    # a bad filter is the statement's write error; ordered stops there
    r = db.command("delete", "c", deletes=[{"q": {"_id": 0}, "limit": 1},
                                           {"q": {"$bad": 1}, "limit": 1},
                                           {"q": {"_id": 1}, "limit": 1}])
    assert r["n"] == 1
    assert r["writeErrors"][0]["index"] == 1 and r["writeErrors"][0]["code"] == 2
    r = db.command("delete", "c", ordered=False,
                   deletes=[{"q": {"$bad": 1}, "limit": 1}, {"q": {"_id": 1}, "limit": 1}])
    assert r["n"] == 1 and len(r["writeErrors"]) == 1


def test_delete_survives_reopen(tmp_path):
    import multifora
    import pymongo
    path = str(tmp_path / "db")
    for round_ in range(2):
        srv = multifora.Server(path, port=0)
        srv.start()
        try:
            c = pymongo.MongoClient(f"mongodb://127.0.0.1:{srv.port}/?directConnection=true")
            coll = c.t.c
            if round_ == 0:
                fill(coll, 100)
                coll.delete_many({"x": {"$lt": 5}})
            else:
                assert sorted(d["_id"] for d in coll.find()) == [
                    i for i in range(100) if i % 10 >= 5]
                assert coll.find_one({"_id": 1}) is None
            c.close()
        finally:
            srv.stop()


def test_count_with_hint_and_limits(client):
    db = client.t
    fill(db.c, 40)
    assert db.command("count", "c", query={"x": 1}, hint="_id_")["n"] == 4
    assert db.command("count", "c", query={"x": 1}, hint={"$natural": 1})["n"] == 4
    assert db.command("count", "c", skip=35)["n"] == 5
    assert db.command("count", "c", limit=-3)["n"] == 3
    with pytest.raises(OperationFailure) as e:
        db.command("count", "c", hint="nope")
    assert code_of(e) == 2


def test_writes_on_a_missing_collection_still_parse(client):
    db = client.t
    r = db.command("update", "nothere", updates=[{"q": {"$bad": 1}, "u": {"$set": {"a": 1}}}])
    assert r["n"] == 0 and r["writeErrors"][0]["code"] == 2
    r = db.command("update", "nothere", updates=[{"q": {}, "u": {"$foo": {"a": 1}}}])
    assert r["writeErrors"][0]["code"] == 9
    r = db.command("delete", "nothere", deletes=[{"q": {"$bad": 1}, "limit": 0}])
    assert r["n"] == 0 and r["writeErrors"][0]["code"] == 2
    assert "nothere" not in db.list_collection_names()


# -------------------------- the failGetMoreAfterCursorCheckout fail point
#
# mongod's getMore, once it has the cursor checked out: fails with
# data.errorCode (the default InternalError), and the failure kills the
# cursor.  Which getMores enter it is failCommand's filter with
# failCommands ["getMore"] (appName, namespace, threadName, internal and
# local clients).  The specifications' change-stream tests use it.

FGM = "failGetMoreAfterCursorCheckout"
FGM_MSG = "Hit the 'failGetMoreAfterCursorCheckout' failpoint"


def fail_get_more(client, mode, data=None):
    cmd = {"configureFailPoint": FGM, "mode": mode}
    if data is not None:
        cmd["data"] = data
    return client.admin.command(cmd)["count"]


def open_cursor(db, coll="c"):
    cid = db.command("find", coll, batchSize=2)["cursor"]["id"]
    assert cid
    return Int64(cid)


def get_more(db, cid, coll="c"):
    return db.command("getMore", cid, collection=coll, batchSize=2)["cursor"]["nextBatch"]


def test_fail_get_more_fails_with_the_code_and_kills_the_cursor(client):
    db = client.t
    fill(db.c, 10)
    cid, other = open_cursor(db), open_cursor(db)
    assert fail_get_more(client, {"times": 1}, {"errorCode": 6, "closeConnection": False}) == 0
    with pytest.raises(OperationFailure) as e:
        get_more(db, cid)
    assert e.value.details == {"ok": 0.0, "errmsg": FGM_MSG, "code": 6,
                               "codeName": "HostUnreachable"}
    with pytest.raises(OperationFailure) as e:
        get_more(db, cid)
    assert code_of(e) == 43
    # {times: 1} is used up: the next getMore runs
    assert [d["_id"] for d in get_more(db, other)] == [2, 3]
    assert fail_get_more(client, "off") == 1


def test_fail_get_more_reply_on_the_wire(server, client):
    fill(client.t.c, 10)
    cid = open_cursor(client.t)
    fail_get_more(client, "alwaysOn")
    with wirelib.Conn(server.port) as conn:
        reply = conn.roundtrip(wirelib.op_msg(wirelib.body_section(
            {"getMore": cid, "collection": "c", "$db": "t"})))
        body = reply.raw[21:]
        doc = bson.decode(body[:int.from_bytes(body[:4], "little")],
                          codec_options=bson.CodecOptions(document_class=dict))
    # the default code; no labels, no executor's context
    assert list(doc.items()) == [("ok", 0.0), ("errmsg", FGM_MSG), ("code", 1),
                                 ("codeName", "InternalError")]


@pytest.mark.parametrize("code,want", [
    (26.9, 26),                 # safeNumberLong: truncated
    (Int64(112), 112),
    (Decimal128("43.5"), 44),   # a decimal rounds half to even
    (2**32 + 2, 2),             # an ErrorCodes::Error is an int
    (424242, 424242),
])
def test_fail_get_more_error_code_is_its_long_value(client, code, want):
    fill(client.t.c, 10)
    cid = open_cursor(client.t)
    fail_get_more(client, "alwaysOn", {"errorCode": code})
    with pytest.raises(OperationFailure) as e:
        get_more(client.t, cid)
    assert code_of(e) == want


def test_fail_get_more_only_getmore_whatever_fail_commands_says(client):
    db = client.t
    fill(db.c, 10)
    fail_get_more(client, "alwaysOn", {"failCommands": ["find", "ping"], "errorCode": 2})
    cid = open_cursor(db)  # find is untouched
    assert client.admin.command("ping") == {"ok": 1.0}
    with pytest.raises(OperationFailure) as e:
        get_more(db, cid)
    assert code_of(e) == 2
    agg = Int64(db.command("aggregate", "c", pipeline=[], cursor={"batchSize": 2})
                ["cursor"]["id"])
    with pytest.raises(OperationFailure) as e:
        get_more(db, agg)
    assert code_of(e) == 2
    db.create_collection("d")
    lc = Int64(db.command("listCollections", cursor={"batchSize": 1})["cursor"]["id"])
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", lc, collection="$cmd.listCollections")
    assert code_of(e) == 2
    assert fail_get_more(client, "off") == 3


def test_fail_get_more_errors_before_the_checkout_do_not_enter(client):
    db = client.t
    fill(db.c, 10)
    cid = open_cursor(db)
    fail_get_more(client, {"times": 1}, {"errorCode": 2})
    with pytest.raises(OperationFailure) as e:
        get_more(db, Int64(12345))          # no such cursor
    assert code_of(e) == 43
    with pytest.raises(OperationFailure) as e:
        get_more(db, cid, coll="other")     # another namespace: refused first
    assert code_of(e) == 13
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", cid, collection="c", maxTimeMS=10)  # non-awaitData
    assert code_of(e) == 2
    assert fail_get_more(client, {"times": 1}, {"errorCode": 2}) == 0
    with pytest.raises(OperationFailure) as e:
        get_more(db, cid)
    assert code_of(e) == 2
    assert fail_get_more(client, "off") == 1


def test_fail_get_more_filters_as_fail_command(server, client):
    db = client.t
    fill(db.c, 10)
    fill(db.d, 10)
    # namespace: the cursor's
    fail_get_more(client, "alwaysOn", {"namespace": "t.d", "errorCode": 2})
    assert len(get_more(db, open_cursor(db))) == 2
    with pytest.raises(OperationFailure) as e:
        get_more(db, open_cursor(db, "d"), coll="d")
    assert code_of(e) == 2
    # appName: the connection's
    fail_get_more(client, "alwaysOn", {"appName": "fgm", "errorCode": 2})
    assert len(get_more(db, open_cursor(db))) == 2
    with pymongo.MongoClient(server.uri, appname="fgm") as named:
        ndb = named.t
        with pytest.raises(OperationFailure) as e:
            get_more(ndb, open_cursor(ndb))
        assert code_of(e) == 2
    # the in-process caller is a local client
    fail_get_more(client, "alwaysOn", {"errorCode": 2})
    cid = server.command("t", {"find": "c", "batchSize": 2})["cursor"]["id"]
    assert len(server.command("t", {"getMore": Int64(cid), "collection": "c"})
               ["cursor"]["nextBatch"]) == 8
    assert fail_get_more(client, "off") == 2


def test_fail_get_more_pymongo_iteration_raises(client):
    coll = client.t.c
    fill(coll, 10)
    fail_get_more(client, {"times": 1}, {"errorCode": 2})
    cursor = coll.find(batch_size=3)
    assert [next(cursor)["_id"] for _ in range(3)] == [0, 1, 2]
    with pytest.raises(OperationFailure) as e:
        next(cursor)
    assert code_of(e) == 2
    assert [d["_id"] for d in coll.find(batch_size=3)] == list(range(10))


def test_max_time_always_time_out_comes_before_fail_get_more(client):
    db = client.t
    fill(db.c, 10)
    cid = Int64(db.command("find", "c", batchSize=2, maxTimeMS=600_000)["cursor"]["id"])
    fail_get_more(client, "alwaysOn", {"errorCode": 2})
    client.admin.command("configureFailPoint", "maxTimeAlwaysTimeOut", mode="alwaysOn")
    with pytest.raises(OperationFailure) as e:
        get_more(db, cid)
    assert code_of(e) == 50
    assert client.admin.command("configureFailPoint", "maxTimeAlwaysTimeOut",
                                mode="off")["count"] == 1
    assert fail_get_more(client, "off") == 0
