"""Multi-document transactions in the one-member replica set (issue 47,
coll/txn.c, command/txn.c, docs/transactions.md).

What is asserted: a transaction's writes reach no one before its commit and
all at once after it; an abort leaves nothing; a transaction reads from the
snapshot it began with plus its own writes, through every read path;
conflicting writers get WriteConflict (TransientTransactionError) at once;
a write outside a transaction that takes what one holds makes its commit
fail; mongod's codes for the session state machine; the commit is one
applyOps oplog entry and one log record (kill -9 leaves all or nothing).
"""
from __future__ import annotations

import signal
import uuid

import bson
import pymongo
import pytest
from bson.int64 import Int64
from pymongo.errors import OperationFailure
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

import multifora

from conftest import ServedProcess


@pytest.fixture
def rs(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0, replica_set="rs0").start()
    yield srv
    srv.stop()


@pytest.fixture
def client(rs):
    c = pymongo.MongoClient(rs.uri)
    yield c
    c.close()


def lsid():
    return {"id": bson.Binary(uuid.uuid4().bytes, 4)}


class Txn:
    """A transaction driven by hand, command by command."""

    def __init__(self, srv, n=1, sid=None):
        self.srv, self.n, self.lsid, self.first = srv, Int64(n), sid or lsid(), True

    def cmd(self, db, cmd, **extra):
        cmd = dict(cmd, lsid=self.lsid, txnNumber=self.n, autocommit=False)
        if self.first:
            cmd["startTransaction"] = True
            self.first = False
        cmd.update(extra)
        return self.srv.command(db, cmd)

    def fails(self, db, cmd, **extra):
        with pytest.raises(multifora.CommandError) as ei:
            self.cmd(db, cmd, **extra)
        return ei.value

    def commit(self, **extra):
        return self.srv.command("admin", dict({"commitTransaction": 1, "lsid": self.lsid,
                                               "txnNumber": self.n, "autocommit": False},
                                              **extra))

    def abort(self):
        return self.srv.command("admin", {"abortTransaction": 1, "lsid": self.lsid,
                                          "txnNumber": self.n, "autocommit": False})


def find(srv, filt=None, coll="c", **kw):
    return srv.command("t", dict({"find": coll, "filter": filt or {}, "sort": {"_id": 1}},
                                 **kw))["cursor"]["firstBatch"]


def labels(e):
    return e.details.get("errorLabels", [])


# ------------------------------------------------------------ with pymongo

def test_commit_makes_every_write_visible_at_once(client):
    col = client.t.c
    col.insert_many([{"_id": 1, "a": 1}, {"_id": 2, "a": 2}])
    other = client.t.get_collection("c")
    with client.start_session() as s:
        with s.start_transaction():
            col.insert_one({"_id": 3, "a": 3}, session=s)
            col.update_one({"_id": 1}, {"$set": {"a": 10}}, session=s)
            col.delete_one({"_id": 2}, session=s)
            # the transaction sees its writes ...
            assert list(col.find({}, session=s).sort("_id")) == [
                {"_id": 1, "a": 10}, {"_id": 3, "a": 3}]
            # ... nobody else does before the commit
            assert list(other.find().sort("_id")) == [{"_id": 1, "a": 1}, {"_id": 2, "a": 2}]
    assert list(other.find().sort("_id")) == [{"_id": 1, "a": 10}, {"_id": 3, "a": 3}]


def test_abort_leaves_nothing(client):
    col = client.t.c
    col.insert_one({"_id": 1, "a": 1})
    with client.start_session() as s:
        s.start_transaction()
        col.insert_one({"_id": 2}, session=s)
        col.update_one({"_id": 1}, {"$inc": {"a": 5}}, session=s)
        client.t.fresh.insert_one({"x": 1}, session=s)  # created by the transaction
        s.abort_transaction()
    assert list(col.find()) == [{"_id": 1, "a": 1}]
    assert "fresh" not in client.t.list_collection_names()


def test_with_transaction_callback(client):
    col = client.t.c
    col.insert_one({"_id": "acct1", "bal": 100})
    col.insert_one({"_id": "acct2", "bal": 0})

    def move(s):
        col.update_one({"_id": "acct1"}, {"$inc": {"bal": -30}}, session=s)
        col.update_one({"_id": "acct2"}, {"$inc": {"bal": 30}}, session=s)
        return col.find_one({"_id": "acct2"}, session=s)["bal"]

    with client.start_session() as s:
        assert s.with_transaction(move, write_concern=WriteConcern("majority"),
                                  read_concern=ReadConcern("snapshot")) == 30
    assert sum(d["bal"] for d in col.find()) == 100


def test_reads_inside_see_own_writes_everywhere(client):
    col = client.t.c
    col.create_index("k")
    col.insert_many([{"_id": i, "k": i % 3} for i in range(6)])
    with client.start_session() as s, s.start_transaction():
        col.insert_one({"_id": 10, "k": 1}, session=s)
        col.delete_one({"_id": 1}, session=s)
        col.update_one({"_id": 4}, {"$set": {"k": 2}}, session=s)
        # an index scan, a count (an aggregate), distinct, $lookup, findAndModify
        assert sorted(d["_id"] for d in col.find({"k": 1}, session=s)) == [10]
        assert col.count_documents({}, session=s) == 6
        assert sorted(col.distinct("k", session=s)) == [0, 1, 2]
        assert sorted(d["_id"] for d in col.find({"k": 2}, session=s).hint("k_1")) == [2, 4, 5]
        got = list(col.aggregate([{"$match": {"_id": 0}},
                                  {"$lookup": {"from": "c", "localField": "k",
                                               "foreignField": "k", "as": "same"}}],
                                 session=s))
        assert sorted(x["_id"] for x in got[0]["same"]) == [0, 3]
        doc = col.find_one_and_update({"_id": 10}, {"$inc": {"k": 5}}, session=s,
                                      return_document=True)
        assert doc == {"_id": 10, "k": 6}
    assert sorted(d["_id"] for d in col.find({"k": 6})) == [10]


def test_cursor_batches_inside_the_transaction(client):
    col = client.t.c
    col.insert_many([{"_id": i} for i in range(10)])
    with client.start_session() as s, s.start_transaction():
        col.insert_one({"_id": 100}, session=s)
        got = [d["_id"] for d in col.find({}, session=s, batch_size=3).sort("_id")]
        assert got == list(range(10)) + [100]


def test_cursor_over_own_writes_only(rs):
    # every document is in the write set: the scan's own rows, in batches
    t = Txn(rs)
    t.cmd("t", {"insert": "c", "documents": [{"_id": i} for i in range(4)]})
    cur = t.cmd("t", {"find": "c", "batchSize": 3})["cursor"]
    assert len(cur["firstBatch"]) == 3 and cur["id"] != 0
    more = t.cmd("t", {"getMore": cur["id"], "collection": "c"})["cursor"]
    assert [d["_id"] for d in cur["firstBatch"] + more["nextBatch"]] == [0, 1, 2, 3]


def test_fail_command_before_start_leaves_no_transaction(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0, replica_set="rs0",
                           enable_test_commands=True).start()
    try:
        srv.command("admin", {"configureFailPoint": "failCommand", "mode": {"times": 1},
                              "data": {"failCommands": ["insert"], "errorCode": 91,
                                       "failLocalClients": True,
                                       "failInternalCommands": True}})
        t = Txn(srv)
        e = t.fails("t", {"insert": "c", "documents": [{"_id": 1}]})
        assert e.code == 91 and labels(e) == ["TransientTransactionError"]
        # the same statement again starts the transaction (no 117)
        t.first = True
        t.cmd("t", {"insert": "c", "documents": [{"_id": 1}]})
        t.commit()
        assert find(srv) == [{"_id": 1}]
    finally:
        srv.stop()


# -------------------------------------------------------------- snapshots

def test_snapshot_does_not_see_later_commits(rs):
    rs.command("t", {"insert": "c", "documents": [{"_id": 1, "v": "old"}, {"_id": 2}]})
    rs.command("t", {"createIndexes": "c", "indexes": [{"key": {"v": 1}, "name": "v_1"}]})
    t = Txn(rs)
    assert [d["_id"] for d in find(rs, lsid=t.lsid, txnNumber=t.n, autocommit=False,
                                   startTransaction=True)] == [1, 2]
    t.first = False
    # outside, after the snapshot: an update, an insert, a delete
    rs.command("t", {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"v": "new"}}}]})
    rs.command("t", {"insert": "c", "documents": [{"_id": 3, "v": "new"}]})
    rs.command("t", {"delete": "c", "deletes": [{"q": {"_id": 2}, "limit": 1}]})
    inside = t.cmd("t", {"find": "c", "filter": {}, "sort": {"_id": 1}})["cursor"]["firstBatch"]
    assert inside == [{"_id": 1, "v": "old"}, {"_id": 2}]
    by_index = t.cmd("t", {"find": "c", "filter": {"v": "old"}, "hint": "v_1"})
    assert by_index["cursor"]["firstBatch"] == [{"_id": 1, "v": "old"}]
    assert t.cmd("t", {"find": "c", "filter": {"v": "new"}, "hint": "v_1"})[
        "cursor"]["firstBatch"] == []
    t.commit()
    assert find(rs) == [{"_id": 1, "v": "new"}, {"_id": 3, "v": "new"}]


# -------------------------------------------------------------- conflicts

def test_two_transactions_writing_one_document(rs):
    rs.command("t", {"insert": "c", "documents": [{"_id": 1, "n": 0}]})
    a, b = Txn(rs), Txn(rs)
    a.cmd("t", {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}}]})
    e = b.fails("t", {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"n": 10}}}]})
    assert e.code == 112 and e.details["codeName"] == "WriteConflict"
    assert labels(e) == ["TransientTransactionError"]
    # the loser is aborted; the winner commits
    with pytest.raises(multifora.CommandError) as ei:
        b.commit()
    assert ei.value.code == 251 and labels(ei.value) == ["TransientTransactionError"]
    a.commit()
    assert find(rs) == [{"_id": 1, "n": 1}]


def test_write_after_snapshot_conflicts(rs):
    rs.command("t", {"insert": "c", "documents": [{"_id": 1, "n": 0}]})
    t = Txn(rs)
    t.cmd("t", {"find": "c"})
    rs.command("t", {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"n": 5}}}]})
    e = t.fails("t", {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}}]})
    assert e.code == 112
    assert find(rs) == [{"_id": 1, "n": 5}]


def test_outside_write_waits_for_the_holder(rs):
    import threading
    import time
    rs.command("t", {"insert": "c", "documents": [{"_id": 1, "n": 0}]})
    t = Txn(rs)
    t.cmd("t", {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"n": 1}}}]})
    # with maxTimeMS, the wait ends in MaxTimeMSExpired, nothing written
    with pytest.raises(multifora.CommandError) as ei:
        rs.command("t", {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"n": 9}}}],
                         "maxTimeMS": 100})
    assert ei.value.code == 50
    # without, it waits for the commit, then applies to the committed document
    out = {}
    plain = threading.Thread(target=lambda: out.setdefault("r", rs.command("t", {
        "update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"n": 10}}}]})))
    plain.start()
    time.sleep(0.3)
    assert plain.is_alive() and find(rs) == [{"_id": 1, "n": 0}]
    t.commit()
    plain.join(10)
    assert out["r"]["nModified"] == 1
    assert find(rs) == [{"_id": 1, "n": 11}]
    # an insert of a unique key a transaction inserted waits too, then
    # meets the committed key
    t = Txn(rs, n=2, sid=t.lsid)
    t.cmd("t", {"insert": "c", "documents": [{"_id": 2}]})
    plain = threading.Thread(target=lambda: out.setdefault("i", rs.command("t", {
        "insert": "c", "documents": [{"_id": 2}]})))
    plain.start()
    time.sleep(0.3)
    assert plain.is_alive()
    t.commit()
    plain.join(10)
    assert out["i"]["writeErrors"][0]["code"] == 11000


def test_a_later_statement_of_a_batch_waits_for_the_holder(rs):
    """The second statement of an insert, update or delete batch meets what
    a transaction holds: it waits for the transaction (the first statement
    already wrote), then runs against what was committed."""
    import threading
    import time
    rs.command("t", {"insert": "c", "documents": [{"_id": i, "n": 0} for i in range(1, 4)]})
    t = Txn(rs)
    t.cmd("t", {"insert": "c", "documents": [{"_id": 10, "by": "txn"}]})
    t.cmd("t", {"update": "c", "updates": [{"q": {"_id": 2}, "u": {"$set": {"n": 5}}}]})
    t.cmd("t", {"delete": "c", "deletes": [{"q": {"_id": 3}, "limit": 1}]})
    out = {}
    batches = {
        "insert": {"insert": "c", "documents": [{"_id": 9}, {"_id": 10, "by": "plain"}]},
        "update": {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}},
                                              {"q": {"_id": 2}, "u": {"$inc": {"n": 1}}}]},
        "delete": {"delete": "c", "deletes": [{"q": {"_id": 9}, "limit": 1},
                                              {"q": {"_id": 3}, "limit": 1}]},
    }
    threads = {}
    deletes = rs.command("admin", {"serverStatus": 1})["opcounters"]["delete"]
    for name, cmd in batches.items():
        threads[name] = threading.Thread(
            target=lambda name=name, cmd=cmd: out.setdefault(name, rs.command("t", cmd)))
        threads[name].start()
        time.sleep(0.3)
        assert threads[name].is_alive(), name  # its second statement waits
    t.commit()
    for th in threads.values():
        th.join(10)
    # the committed state, then what each batch did after the wait
    assert out["insert"]["n"] == 1 and out["insert"]["writeErrors"][0]["code"] == 11000
    assert out["update"]["nModified"] == 2
    assert out["delete"]["n"] == 1  # _id 9 went; _id 3 the transaction deleted
    # (a statement run again after its wait counts once)
    assert rs.command("admin", {"serverStatus": 1})["opcounters"]["delete"] - deletes == 2
    assert find(rs) == [{"_id": 1, "n": 1}, {"_id": 2, "n": 6}, {"_id": 10, "by": "txn"}]


def test_a_multi_statement_goes_on_after_waiting_for_the_holder(rs):
    """A multi update or delete (outside transactions) meets a document a
    transaction holds after it wrote others: as mongod's, it waits there,
    keeping what it wrote, and goes on after the commit -- the transaction
    is not aborted, no document is written twice, and an upsert whose
    matches the wait took away does not insert."""
    import threading
    import time
    rs.command("t", {"insert": "c", "documents": [{"_id": i, "n": 0, "a": 1}
                                                  for i in range(1, 7)]})
    t = Txn(rs)
    t.cmd("t", {"update": "c", "updates": [{"q": {"_id": 4}, "u": {"$set": {"n": 100}}}]})
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("u", rs.command("t", {
        "update": "c", "updates": [{"q": {}, "u": {"$inc": {"n": 1}}, "multi": True}]})))
    th.start()
    time.sleep(0.3)
    assert th.is_alive()
    assert [d["n"] for d in find(rs)] == [1, 1, 1, 0, 0, 0]  # written before the wait
    t.commit()  # not aborted by the statement it held up
    th.join(10)
    assert (out["u"]["n"], out["u"]["nModified"]) == (6, 6)
    assert [d["n"] for d in find(rs)] == [1, 1, 1, 101, 1, 1]  # each once

    # an upsert: the held document no longer matches after the commit
    t = Txn(rs, n=2, sid=t.lsid)
    t.cmd("t", {"update": "c", "updates": [{"q": {"_id": 2}, "u": {"$set": {"a": 5}}}]})
    th = threading.Thread(target=lambda: out.setdefault("up", rs.command("t", {
        "update": "c", "updates": [{"q": {"a": 1}, "u": {"$set": {"a": 2}}, "multi": True,
                                    "upsert": True}]})))
    th.start()
    time.sleep(0.3)
    assert th.is_alive()
    t.commit()
    th.join(10)
    assert (out["up"]["n"], out["up"]["nModified"]) == (5, 5)
    assert "upserted" not in out["up"]
    assert [d["a"] for d in find(rs)] == [2, 5, 2, 2, 2, 2]

    # a delete of every match
    t = Txn(rs, n=3, sid=t.lsid)
    t.cmd("t", {"update": "c", "updates": [{"q": {"_id": 3}, "u": {"$set": {"keep": True}}}]})
    th = threading.Thread(target=lambda: out.setdefault("d", rs.command("t", {
        "delete": "c", "deletes": [{"q": {"keep": {"$exists": False}}, "limit": 0}]})))
    th.start()
    time.sleep(0.3)
    assert th.is_alive()
    assert [d["_id"] for d in find(rs)] == [3, 4, 5, 6]  # 1 and 2 went before the wait
    t.commit()
    th.join(10)
    assert out["d"]["n"] == 5
    assert find(rs) == [{"_id": 3, "n": 1, "a": 2, "keep": True}]


def test_merge_waits_for_the_holder_after_it_wrote(rs):
    """$merge meets a document a transaction holds after it merged others:
    it waits there (maxTimeMS bounds the wait) and merges it after the
    commit; the transaction is not aborted."""
    import threading
    import time
    rs.command("t", {"insert": "src", "documents": [{"_id": i, "v": "new"} for i in (1, 2, 3)]})
    rs.command("t", {"insert": "c", "documents": [{"_id": i, "v": "old"} for i in (1, 2, 3)]})
    t = Txn(rs)
    t.cmd("t", {"update": "c", "updates": [{"q": {"_id": 2}, "u": {"$set": {"by": "txn"}}}]})
    merge = {"aggregate": "src", "pipeline": [{"$sort": {"_id": 1}}, {"$merge": {
        "into": "c", "whenMatched": "merge"}}], "cursor": {}}
    with pytest.raises(multifora.CommandError) as ei:
        rs.command("t", dict(merge, maxTimeMS=200))
    assert ei.value.code == 50
    assert [d["v"] for d in find(rs)] == ["new", "old", "old"]  # _id 1 merged first
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("r", rs.command("t", merge)))
    th.start()
    time.sleep(0.3)
    assert th.is_alive()
    t.commit()
    th.join(10)
    assert out["r"]["ok"] == 1.0
    assert find(rs) == [{"_id": 1, "v": "new"}, {"_id": 2, "v": "new", "by": "txn"},
                        {"_id": 3, "v": "new"}]


def test_ttl_monitor_leaves_what_a_transaction_holds(tmp_path):
    """An expired document a transaction holds is left to a later pass
    (mongod's TTL delete meets a WriteConflict): the transaction commits,
    and the next pass deletes the document."""
    import datetime
    import time
    old = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=2)
    with multifora.Server(str(tmp_path / "db"), port=0, replica_set="rs0",
                          ttl_monitor_sleep_secs=1) as srv:
        srv.command("t", {"createIndexes": "c", "indexes": [
            {"key": {"at": 1}, "name": "at_1", "expireAfterSeconds": 60}]})
        srv.command("t", {"insert": "c", "documents": [{"_id": 1, "at": old},
                                                       {"_id": 2, "at": old}]})
        t = Txn(srv)
        t.cmd("t", {"update": "c", "updates": [{"q": {"_id": 2}, "u": {"$set": {"x": 1}}}]})

        def passes():
            return srv.command("admin", {"serverStatus": 1})["metrics"]["ttl"]["passes"]

        start = passes()
        deadline = time.monotonic() + 20
        while passes() < start + 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert passes() >= start + 2
        assert [d["_id"] for d in find(srv)] == [2]  # _id 1 went
        t.commit()  # not aborted by the monitor
        deadline = time.monotonic() + 20
        while find(srv) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert find(srv) == []


def test_a_collection_a_transaction_creates_is_not_there_for_others_until_commit(rs):
    import threading
    import time

    def names():
        return [d["name"] for d in rs.command("t", {"listCollections": 1})["cursor"]["firstBatch"]]

    t = Txn(rs)
    t.cmd("t", {"create": "fresh"})
    t.cmd("t", {"insert": "fresh", "documents": [{"_id": 1}]})
    assert "fresh" not in names()
    for cmd in ({"listIndexes": "fresh"}, {"collMod": "fresh"},
                {"dropIndexes": "fresh", "index": "*"}):
        with pytest.raises(multifora.CommandError) as ei:
            rs.command("t", cmd)
        assert ei.value.code == 26
    # reads, deletes and updates find it empty, as they would no collection
    assert find(rs, coll="fresh") == []
    assert rs.command("t", {"delete": "fresh", "deletes": [{"q": {}, "limit": 0}]})["n"] == 0
    assert rs.command("t", {"update": "fresh", "updates": [
        {"q": {"_id": 1}, "u": {"$set": {"x": 1}}}]})["n"] == 0
    # another transaction writing it conflicts
    other = Txn(rs, sid=lsid())
    with pytest.raises(multifora.CommandError) as ei:
        other.cmd("t", {"insert": "fresh", "documents": [{"_id": 2}]})
    assert ei.value.code == 112 and "TransientTransactionError" in labels(ei.value)
    # a write outside waits for the commit (maxTimeMS ends the wait)
    with pytest.raises(multifora.CommandError) as ei:
        rs.command("t", {"insert": "fresh", "documents": [{"_id": 3}], "maxTimeMS": 100})
    assert ei.value.code == 50
    out = {}
    plain = threading.Thread(target=lambda: out.setdefault("r", rs.command("t", {
        "insert": "fresh", "documents": [{"_id": 1}, {"_id": 4}], "ordered": False})))
    plain.start()
    time.sleep(0.3)
    assert plain.is_alive()
    t.commit()
    plain.join(10)
    # it ran against the committed collection: _id 1 is the transaction's
    assert [e["code"] for e in out["r"]["writeErrors"]] == [11000]
    assert "fresh" in names()
    assert find(rs, coll="fresh") == [{"_id": 1}, {"_id": 4}]


def test_a_pending_collection_is_not_counted_by_others(rs):
    """collStats, $collStats, dbStats and listDatabases see a collection a
    transaction created as they see no collection, until the commit."""
    def dbs():
        return [d["name"] for d in rs.command("admin", {"listDatabases": 1})["databases"]]

    def stats(coll):
        out = rs.command("pend", {"collStats": coll})
        return {k: v for k, v in out.items() if k not in ("ns", "$clusterTime", "operationTime")}

    t = Txn(rs)
    t.cmd("pend", {"insert": "fresh", "documents": [{"_id": 1, "pad": "x" * 100}]})
    assert "pend" not in dbs()
    assert stats("fresh") == stats("never")
    assert rs.command("pend", {"dbStats": 1})["collections"] == 0
    with pytest.raises(multifora.CommandError) as ei:
        rs.command("pend", {"aggregate": "fresh", "pipeline": [{"$collStats": {"count": {}}}],
                            "cursor": {}})
    assert ei.value.code == 26
    t.commit()
    assert "pend" in dbs()
    assert stats("fresh")["count"] == 1
    assert rs.command("pend", {"dbStats": 1})["collections"] == 1
    out = rs.command("pend", {"aggregate": "fresh", "pipeline": [{"$collStats": {"count": {}}}],
                              "cursor": {}})
    assert out["cursor"]["firstBatch"][0]["count"] == 1


def test_a_waiting_write_after_an_abort_creates_the_collection_afresh(rs):
    import threading
    import time
    t = Txn(rs)
    t.cmd("t", {"insert": "gone", "documents": [{"_id": 1}]})
    out = {}
    plain = threading.Thread(target=lambda: out.setdefault("r", rs.command("t", {
        "insert": "gone", "documents": [{"_id": 1}]})))
    plain.start()
    time.sleep(0.3)
    assert plain.is_alive()
    t.abort()
    plain.join(10)
    assert out["r"]["n"] == 1
    assert find(rs, coll="gone") == [{"_id": 1}]


def test_unique_keys(rs):
    rs.command("t", {"createIndexes": "c", "indexes": [{"key": {"u": 1}, "name": "u_1",
                                                           "unique": True}]})
    rs.command("t", {"insert": "c", "documents": [{"_id": 1, "u": 1}]})
    # against the committed data: DuplicateKey, the transaction aborted
    t = Txn(rs)
    r = t.cmd("t", {"insert": "c", "documents": [{"_id": 2, "u": 1}]})
    assert r["writeErrors"][0]["code"] == 11000 and "errorLabels" not in r
    e = t.fails("t", {"find": "c"})
    assert e.code == 251 and labels(e) == ["TransientTransactionError"]
    # against its own writes, and a key it freed
    t = Txn(rs, n=2, sid=t.lsid)
    t.cmd("t", {"insert": "c", "documents": [{"_id": 3, "u": 3}]})
    r = t.cmd("t", {"insert": "c", "documents": [{"_id": 4, "u": 3}]})
    assert r["writeErrors"][0]["code"] == 11000
    t = Txn(rs, n=3, sid=t.lsid)
    t.cmd("t", {"delete": "c", "deletes": [{"q": {"_id": 1}, "limit": 1}]})
    t.cmd("t", {"insert": "c", "documents": [{"_id": 5, "u": 1}]})
    # another transaction's key: WriteConflict
    o = Txn(rs)
    e = o.fails("t", {"insert": "c", "documents": [{"_id": 6, "u": 1}]})
    assert e.code == 112
    t.commit()
    assert find(rs) == [{"_id": 5, "u": 1}]


def test_commit_swapping_unique_values(rs):
    # the commit deletes every old entry before it puts a new one: a unique
    # index's entry is its key alone
    rs.command("t", {"createIndexes": "c", "indexes": [{"key": {"u": 1}, "name": "u_1",
                                                           "unique": True}]})
    rs.command("t", {"insert": "c", "documents": [{"_id": 1, "u": 1}, {"_id": 2, "u": 5}]})
    t = Txn(rs)
    t.cmd("t", {"update": "c", "updates": [{"q": {"_id": 2}, "u": {"$set": {"x": 1}}}]})
    t.cmd("t", {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"u": 9}}}]})
    t.cmd("t", {"update": "c", "updates": [{"q": {"_id": 2}, "u": {"$set": {"u": 1}}}]})
    t.commit()
    assert find(rs, {"u": 1}, hint="u_1") == [{"_id": 2, "u": 1, "x": 1}]
    r = rs.command("t", {"insert": "c", "documents": [{"_id": 3, "u": 1}]})
    assert r["writeErrors"][0]["code"] == 11000
    assert rs.command("t", {"validate": "c"})["valid"] is True


def test_sorted_read_with_own_writes(rs):
    rs.command("t", {"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1"},
                                                        {"key": {"b": 1}, "name": "b_1"}]})
    rs.command("t", {"insert": "c", "documents": [{"_id": i, "a": i, "b": i}
                                                   for i in range(1, 8)]})
    t = Txn(rs)
    t.cmd("t", {"insert": "c", "documents": [{"_id": 0, "a": -5, "b": 3}]})
    got = t.cmd("t", {"find": "c", "filter": {"b": {"$gte": 3}}, "sort": {"a": 1},
                      "limit": 3})["cursor"]["firstBatch"]
    assert [d["_id"] for d in got] == [0, 3, 4]
    agg = t.cmd("t", {"aggregate": "c", "pipeline": [{"$match": {"b": {"$gte": 3}}},
                                                     {"$sort": {"a": 1}}, {"$limit": 3}],
                      "cursor": {}})["cursor"]["firstBatch"]
    assert [d["_id"] for d in agg] == [0, 3, 4]


def test_retryable_write_at_a_transactions_number(rs):
    t = Txn(rs)
    t.cmd("t", {"insert": "c", "documents": [{"_id": 1}]})
    with pytest.raises(multifora.CommandError) as ei:
        rs.command("t", {"insert": "c", "documents": [{"_id": 2}], "lsid": t.lsid,
                         "txnNumber": t.n})
    assert ei.value.code == 217 and "converted into a transaction" in str(ei.value)
    t.commit()
    assert find(rs) == [{"_id": 1}]


def test_commit_retried_after_restart(tmp_path):
    path = str(tmp_path / "db")
    with multifora.Server(path, port=0, replica_set="rs0") as srv:
        t = Txn(srv)
        t.cmd("t", {"insert": "c", "documents": [{"_id": 1}]})
        t.commit()
    with multifora.Server(path, port=0, replica_set="rs0") as srv:
        t.srv = srv
        assert t.commit()["ok"] == 1.0  # answered from config.transactions
        assert find(srv) == [{"_id": 1}]
        with pytest.raises(multifora.CommandError) as ei:
            t.abort()
        assert ei.value.code == 256


def test_two_transactions_inserting_get_distinct_record_ids(rs):
    rs.command("t", {"insert": "c", "documents": [{"_id": 0}]})
    a, b = Txn(rs), Txn(rs)
    a.cmd("t", {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}]})
    b.cmd("t", {"insert": "c", "documents": [{"_id": 3}]})
    rs.command("t", {"insert": "c", "documents": [{"_id": 4}]})
    a.cmd("t", {"insert": "c", "documents": [{"_id": 5}]})
    b.commit()
    a.commit()
    assert [d["_id"] for d in find(rs)] == [0, 1, 2, 3, 4, 5]
    assert rs.command("t", {"validate": "c"})["valid"] is True


# ----------------------------------------------------- the state machine

def test_session_state_codes(rs):
    t = Txn(rs)
    e = Txn(rs).fails("t", {"find": "c"}, autocommit=True)
    assert e.code == 72
    t.cmd("t", {"insert": "c", "documents": [{"_id": 1}]})
    # startTransaction again at the active number
    e = t.fails("t", {"find": "c"}, startTransaction=True)
    assert e.code == 117
    # a readConcern after the first statement, a writeConcern on a statement
    assert t.fails("t", {"find": "c"}, readConcern={"level": "snapshot"}).code == 72
    assert t.fails("t", {"find": "c"}, writeConcern={"w": 1}).code == 72
    # count is refused without aborting the transaction
    e = t.fails("t", {"count": "c"})
    assert e.code == 263 and "transaction-count" in str(e)
    assert t.commit()["ok"] == 1.0
    assert t.commit()["ok"] == 1.0  # a retried commit
    with pytest.raises(multifora.CommandError) as ei:
        t.abort()
    assert ei.value.code == 256
    e = t.fails("t", {"find": "c"})
    assert e.code == 256
    # an unknown number, an older number
    t2 = Txn(rs, n=5, sid=t.lsid)
    t2.first = False
    assert t2.fails("t", {"find": "c"}).code == 251
    old = Txn(rs, n=0, sid=t.lsid)
    assert old.fails("t", {"find": "c"}).code == 225
    assert find(rs) == [{"_id": 1}]


def test_abort_then_statements(rs):
    t = Txn(rs)
    t.cmd("t", {"insert": "c", "documents": [{"_id": 1}]})
    assert t.abort()["ok"] == 1.0
    e = t.fails("t", {"find": "c"})
    assert e.code == 251 and labels(e) == ["TransientTransactionError"]
    with pytest.raises(multifora.CommandError) as ei:
        t.abort()
    assert ei.value.code == 251
    assert find(rs) == []


def test_get_more_belongs_to_its_transaction(rs):
    rs.command("t", {"insert": "c", "documents": [{"_id": i} for i in range(5)]})
    t = Txn(rs)
    cur = t.cmd("t", {"find": "c", "batchSize": 2})["cursor"]
    with pytest.raises(multifora.CommandError) as ei:
        rs.command("t", {"getMore": cur["id"], "collection": "c"})
    assert ei.value.code == 50740
    more = t.cmd("t", {"getMore": cur["id"], "collection": "c"})["cursor"]
    assert [d["_id"] for d in more["nextBatch"]] == [2, 3, 4]
    outside = rs.command("t", {"find": "c", "batchSize": 1})["cursor"]
    assert t.fails("t", {"getMore": outside["id"], "collection": "c"}).code == 50739


def test_lifetime_limit_aborts(rs):
    import time
    rs.command("admin", {"setParameter": 1, "transactionLifetimeLimitSeconds": 1})
    assert rs.command("admin", {"getParameter": 1, "transactionLifetimeLimitSeconds": 1})[
        "transactionLifetimeLimitSeconds"] == 1
    rs.command("t", {"insert": "c", "documents": [{"_id": 1, "n": 0}]})
    t = Txn(rs)
    t.cmd("t", {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"n": 1}}}]})
    time.sleep(3)
    # the abandoned transaction no longer holds the document
    o = Txn(rs)
    o.cmd("t", {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"n": 2}}}]})
    o.commit()
    with pytest.raises(multifora.CommandError) as ei:
        t.commit()
    assert ei.value.code == 251
    assert find(rs) == [{"_id": 1, "n": 2}]


def test_size_limit(rs):
    assert rs.command("admin", {"getParameter": 1, "transactionSizeLimitBytes": 1})[
        "transactionSizeLimitBytes"] == 2**63 - 1
    rs.command("admin", {"setParameter": 1, "transactionSizeLimitBytes": 1000})
    t = Txn(rs)
    t.cmd("t", {"insert": "c", "documents": [{"_id": 1, "s": "x" * 400}]})
    r = t.cmd("t", {"insert": "c", "documents": [{"_id": 2, "s": "x" * 700}]})
    e = r["writeErrors"][0]
    assert e["code"] == 257 and "transactionSizeLimitBytes' = 1000" in e["errmsg"]
    assert t.fails("t", {"find": "c"}).code == 251  # aborted
    assert find(rs) == []
    with pytest.raises(multifora.CommandError) as ei:
        rs.command("admin", {"setParameter": 1, "transactionSizeLimitBytes": 0})
    assert ei.value.code == 2


def test_kill_all_sessions_aborts(rs):
    rs.command("t", {"insert": "c", "documents": [{"_id": 1}]})
    t = Txn(rs)
    t.cmd("t", {"delete": "c", "deletes": [{"q": {}, "limit": 0}]})
    rs.command("admin", {"killAllSessions": []})
    assert t.fails("t", {"find": "c"}).code == 251
    assert find(rs) == [{"_id": 1}]


# ------------------------------------------------------------- durability

def test_commit_is_one_applyops_entry(rs):
    t = Txn(rs)
    t.cmd("t", {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}]})
    t.cmd("t", {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"a": 1}}}]})
    t.cmd("t", {"insert": "d", "documents": [{"_id": 9}]})
    before = rs.command("local", {"count": "oplog.rs"})["n"]
    t.commit()
    entries = rs.command("local", {"find": "oplog.rs", "filter": {"op": "c"}})["cursor"][
        "firstBatch"]
    assert rs.command("local", {"count": "oplog.rs"})["n"] == before + 1
    (e,) = [x for x in entries if "applyOps" in x["o"]]
    assert e["ns"] == "admin.$cmd" and e["txnNumber"] == 1 and e["lsid"]["id"] == t.lsid["id"]
    ops = e["o"]["applyOps"]
    # the collections it created first (test_oplog_catalog.py), then its writes
    assert [(o["op"], o["ns"], o["o"].get("create", o["o"].get("_id"))) for o in ops] == [
        ("c", "t.$cmd", "c"), ("c", "t.$cmd", "d"),
        ("i", "t.c", 1), ("i", "t.c", 2), ("i", "t.d", 9)]
    rec = rs.command("config", {"find": "transactions"})["cursor"]["firstBatch"]
    assert [(r["txnNum"], r["state"]) for r in rec] == [(1, "committed")]


def test_ten_inserts_commit_with_one_log_record_and_one_sync(rs):
    def log():
        return rs.command("admin", {"serverStatus": 1})["multifora"]["log"]

    rs.command("t", {"insert": "c", "documents": [{"_id": "warm"}]})
    t = Txn(rs)
    before = log()
    for i in range(10):
        t.cmd("t", {"insert": "c", "documents": [{"_id": i}]})
    during = log()
    t.commit()
    after = log()
    # the statements wrote nothing; the commit is one record, one sync
    assert (during["records"], during["syncs"]) == (before["records"], before["syncs"])
    assert after["records"] - before["records"] == 1
    assert after["syncs"] - before["syncs"] == 1
    # ten insertOne outside a transaction: ten of each
    for i in range(10):
        rs.command("t", {"insert": "c", "documents": [{"_id": 100 + i}]})
    plain = log()
    assert plain["records"] - after["records"] == 10
    assert plain["syncs"] - after["syncs"] == 10


def test_kill9_commit_is_all_or_nothing(tmp_path):
    p = ServedProcess(tmp_path / "db", extra=["--replSet", "rs0"]).start()
    try:
        c = p.client(directConnection=True)
        with c.start_session() as s:
            s.start_transaction()
            c.t.c.insert_many([{"_id": i} for i in range(50)], session=s)
            c.t.d.insert_one({"_id": "x"}, session=s)
            s.commit_transaction()
            s.start_transaction()
            c.t.c.insert_many([{"_id": 1000 + i} for i in range(50)], session=s)
            # collections it creates (durable at once, pending until it ends)
            c.t.fresh.insert_one({"_id": 1}, session=s)
            c.t.create_collection("made", session=s)
            c.t.made.create_index("m", session=s)
            # not committed when the process dies
            p.signal(signal.SIGKILL)
        c.close()
    finally:
        p.stop()
    with multifora.Server(str(tmp_path / "db"), port=0, replica_set="rs0") as e:
        assert [d["_id"] for d in find(e, batchSize=1000)] == list(range(50))
        # t.d, created by the committed one, stays; the others are gone
        assert find(e, coll="d") == [{"_id": "x"}]
        names = [x["name"] for x in e.command("t", {"listCollections": 1})["cursor"][
            "firstBatch"]]
        assert sorted(names) == ["c", "d"]


def test_standalone_refuses_transactions_still(server):
    with pytest.raises(multifora.CommandError) as e:
        server.command("t", {"insert": "c", "documents": [{"_id": 1}], "lsid": lsid(),
                             "txnNumber": Int64(1), "autocommit": False,
                             "startTransaction": True})
    assert e.value.code == 20


def test_versions_collected_while_snapshots_stay_right(rs):
    """Under transactions that never all end at once, the versions no open
    snapshot needs are dropped (every time what is kept doubles past 1,024),
    and the open ones still read what they began with."""
    rs.command("t", {"insert": "c", "documents": [{"_id": i, "n": 0} for i in range(50)]})

    def total(t):
        return sum(d["n"] for d in t.cmd("t", {"find": "c", "batchSize": 1000})["cursor"][
            "firstBatch"])

    def bump_all(n):
        w = Txn(rs, n=n)
        w.cmd("t", {"update": "c", "updates": [{"q": {}, "u": {"$inc": {"n": 1}},
                                                "multi": True}]})
        w.commit()

    old = Txn(rs)
    assert total(old) == 0
    for r in range(15):
        bump_all(r + 1)
        rs.command("t", {"update": "c", "updates": [{"q": {"_id": r}, "u": {"$inc": {"n": 1}}}]})
    mid = Txn(rs, n=99)
    assert total(mid) == 15 * 50 + 15
    assert total(old) == 0
    old.abort()
    for r in range(40):  # 2,000+ more versions: collected past the oldest, mid's
        bump_all(100 + r)
    assert total(mid) == 15 * 50 + 15
    assert sum(d["n"] for d in find(rs, batchSize=1000)) == 55 * 50 + 15
    mid.commit()


# ------------------------------------------------------------ concurrency

def test_concurrent_transfers_keep_the_total(tmp_path):
    """pymongo's with_transaction on the embedded default (open()): 8
    clients move money between 10 accounts at random; every transfer
    commits once (conflicts are retried by the driver) and the total never
    changes, seen from a transaction's snapshot at any moment."""
    import random
    import threading
    with multifora.open(str(tmp_path / "db")) as c:
        accts = c.bank.accts
        accts.insert_many([{"_id": i, "bal": 100} for i in range(10)])
        done, errors, seen = [0], [], []

        def worker(seed):
            rnd = random.Random(seed)
            try:
                for _ in range(25):
                    a, b = rnd.sample(range(10), 2)
                    amt = rnd.randint(1, 20)

                    def move(s):
                        src = accts.find_one({"_id": a}, session=s)
                        accts.update_one({"_id": a}, {"$set": {"bal": src["bal"] - amt}},
                                         session=s)
                        accts.update_one({"_id": b}, {"$inc": {"bal": amt}}, session=s)

                    with c.start_session() as s:
                        s.with_transaction(move)
                    done[0] += 1
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        def auditor():
            while len(threads) and any(t.is_alive() for t in threads):
                with c.start_session() as s, s.start_transaction():
                    seen.append(sum(d["bal"] for d in accts.find({}, session=s)))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        aud = threading.Thread(target=auditor)
        for t in threads:
            t.start()
        aud.start()
        for t in threads:
            t.join()
        aud.join()
        assert not errors
        assert done[0] == 200
        assert sum(d["bal"] for d in accts.find()) == 1000
        assert seen and set(seen) == {1000}


def test_no_lost_updates_between_transactions_and_plain_writes(rs):
    """Counters incremented by transactions and by plain updates at once:
    every acknowledged increment is there at the end."""
    import threading
    client = pymongo.MongoClient(rs.uri)
    col = client.t.counters
    col.insert_one({"_id": 1, "n": 0})
    ok = [0]
    lock = threading.Lock()

    def txn_worker():
        for _ in range(30):
            with client.start_session() as s:
                s.with_transaction(lambda s: col.update_one({"_id": 1}, {"$inc": {"n": 1}},
                                                           session=s))
            with lock:
                ok[0] += 1

    def plain_worker():
        for _ in range(30):
            col.update_one({"_id": 1}, {"$inc": {"n": 1}})
            with lock:
                ok[0] += 1

    ts = [threading.Thread(target=f) for f in (txn_worker, txn_worker, plain_worker,
                                                 plain_worker)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert ok[0] == 120
    assert col.find_one({"_id": 1})["n"] == 120
    client.close()


# ------------------------------------------- a model of snapshot isolation

class Model:
    """Snapshot isolation as built (docs/transactions.md): a transaction
    reads the committed state at its first statement plus its own writes;
    writing a document another open transaction wrote, or one changed
    (created, updated, deleted) after its snapshot, is WriteConflict and
    aborts it; a plain write to a document an open transaction wrote waits
    for it (here: until its maxTimeMS); a write that changes nothing
    writes nothing.  ("killed" stays for the TTL monitor's writes, which
    do not wait; the test makes none.)"""

    def __init__(self):
        self.committed = {}      # _id -> value
        self.version = {}        # _id -> commit counter of its last change
        self.clock = 0
        self.txns = {}           # name -> {"snap", "at", "writes", "killed"}

    def begin(self, name):
        self.txns[name] = {"snap": dict(self.committed), "at": self.clock, "writes": {},
                           "killed": False}

    def view(self, name):
        t = self.txns[name]
        v = dict(t["snap"])
        for k, val in t["writes"].items():
            if val is None:
                v.pop(k, None)
            else:
                v[k] = val
        return v

    def txn_write(self, name, k, val):
        t = self.txns[name]
        if self.view(name).get(k) == val:
            return "ok"  # matches nothing, or changes nothing: no write
        held = any(k in o["writes"] and not o["killed"]
                   for n, o in self.txns.items() if n != name)
        if held or (k not in t["writes"] and self.version.get(k, -1) > t["at"]):
            del self.txns[name]
            return "conflict"
        t["writes"][k] = val
        return "ok"

    def plain_write(self, k, val):
        """A plain write waits for a transaction holding its document (the
        test gives it maxTimeMS: "blocked", nothing written)."""
        if any(k in o["writes"] and not o["killed"] for o in self.txns.values()):
            return "blocked"
        self._apply({k: val})
        return "ok"

    def _apply(self, writes):
        self.clock += 1
        for k, val in writes.items():
            if val is None:
                self.committed.pop(k, None)
            else:
                self.committed[k] = val
            self.version[k] = self.clock

    def commit(self, name):
        t = self.txns.pop(name)
        if t["killed"]:
            return "aborted"
        self._apply(t["writes"])
        return "ok"


@pytest.mark.parametrize("seed", range(20))
def test_differential_against_the_model(rs, seed):
    import random
    rnd = random.Random(seed)
    model = Model()
    live = {}  # name -> Txn
    numbers = iter(range(1, 10**6))
    ids = list(range(5))
    # (the collection exists first: the model is of documents; one a
    # transaction creates is another test's)
    rs.command("t", {"create": "c"})

    def server_view(t):
        return {d["_id"]: d["v"] for d in t.cmd("t", {"find": "c", "filter": {}})["cursor"][
            "firstBatch"]}

    def txn_set(t, k, val):
        if val is None:
            return t.cmd("t", {"delete": "c", "deletes": [{"q": {"_id": k}, "limit": 1}]})
        return t.cmd("t", {"update": "c", "updates": [
            {"q": {"_id": k}, "u": {"$set": {"v": val}}, "upsert": True}]})

    for step in range(300):
        op = rnd.random()
        name = rnd.choice(sorted(live)) if live else None
        if op < 0.15 and len(live) < 3:
            name = f"s{step}"
            live[name] = Txn(rs, n=next(numbers))
            # the snapshot is taken by its first statement: a read
            model.begin(name)
            assert server_view(live[name]) == model.view(name), step
        elif op < 0.8 and name and model.txns[name]["killed"]:
            # a plain write took what it holds: any statement, commit
            # included, is NoSuchTransaction, and it has ended
            model.txns.pop(name)
            with pytest.raises(multifora.CommandError) as ei:
                if op < 0.6:
                    server_view(live.pop(name))
                else:
                    live.pop(name).commit()
            assert ei.value.code == 251, step
        elif op < 0.45 and name:
            k, val = rnd.choice(ids), rnd.choice([None, rnd.randint(0, 99)])
            if model.txn_write(name, k, val) == "conflict":
                with pytest.raises(multifora.CommandError) as ei:
                    txn_set(live.pop(name), k, val)
                assert ei.value.code == 112, (step, ei.value)
            else:
                r = txn_set(live[name], k, val)
                assert "writeErrors" not in r, (step, r)
        elif op < 0.6 and name:
            assert server_view(live[name]) == model.view(name), step
        elif op < 0.75 and name:
            assert model.commit(name) == "ok"
            live.pop(name).commit()
        elif op < 0.8 and name:
            live.pop(name).abort()
            model.txns.pop(name)
        else:
            k, val = rnd.choice(ids), rnd.choice([None, rnd.randint(100, 199)])
            expect = model.plain_write(k, val) if model.committed.get(k) != val else "ok"
            cmd = ({"delete": "c", "deletes": [{"q": {"_id": k}, "limit": 1}]} if val is None
                   else {"update": "c", "updates": [
                       {"q": {"_id": k}, "u": {"$set": {"v": val}}, "upsert": True}]})
            if expect == "blocked":
                with pytest.raises(multifora.CommandError) as ei:
                    rs.command("t", dict(cmd, maxTimeMS=20))
                assert ei.value.code == 50, step
            else:
                rs.command("t", cmd)
        got = {d["_id"]: d["v"] for d in find(rs)}
        assert got == model.committed, step
