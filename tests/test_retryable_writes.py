"""Retryable writes and the oplog in the one-member replica set (issue 47,
command/retry.c, coll/oplog.c): a statement sent again with the same lsid
and txnNumber is answered from what its first run logged and is never
applied twice -- also after a restart and after kill -9."""
from __future__ import annotations

import signal

import bson
import pymongo
import pytest
from bson.int64 import Int64

import multifora

from conftest import ServedProcess

LSID = {"id": bson.Binary(b"\x07" * 16, 4)}


@pytest.fixture
def rs(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0, replica_set="rs0").start()
    yield srv
    srv.stop()


def strip(reply):
    """Less the fields every replica-set reply, or write reply, has
    (test_write_reply_fields checks those)."""
    return {k: v for k, v in reply.items()
            if k not in ("$clusterTime", "operationTime", "electionId", "opTime")}


def oplog(srv, filt=None):
    return srv.command("local", {"find": "oplog.rs", "filter": filt or {}})["cursor"][
        "firstBatch"]


def docs(srv, coll="c"):
    return srv.command("t", {"find": coll, "sort": {"_id": 1}})["cursor"]["firstBatch"]


def test_driver_default_retry_writes(rs):
    c = pymongo.MongoClient(rs.uri)  # retryWrites=true: every write sends txnNumber
    col = c.t.c
    col.insert_one({"_id": 1, "a": 1})
    col.insert_many([{"_id": 2}, {"_id": 3}])
    assert col.update_one({"_id": 1}, {"$inc": {"a": 1}}).modified_count == 1
    assert col.find_one_and_update({"_id": 1}, {"$inc": {"a": 1}},
                                   return_document=True) == {"_id": 1, "a": 3}
    assert col.delete_one({"_id": 2}).deleted_count == 1
    assert col.replace_one({"_id": 9}, {"z": 1}, upsert=True).upserted_id == 9
    assert list(col.find()) == [{"_id": 1, "a": 3}, {"_id": 3}, {"_id": 9, "z": 1}]
    c.close()


def test_insert_retry_applies_once(rs):
    cmd = {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}], "lsid": LSID,
           "txnNumber": Int64(1)}
    assert strip(rs.command("t", cmd)) == {"n": 2, "ok": 1.0}
    again = rs.command("t", cmd)
    # no duplicate key errors: not run again; the reply says which were not
    assert strip(again) == {"n": 2, "retriedStmtIds": [0, 1], "ok": 1.0}
    assert docs(rs) == [{"_id": 1}, {"_id": 2}]
    entries = oplog(rs, {"op": "i", "ns": "t.c"})
    assert len(entries) == 2
    assert [e["stmtId"] for e in entries] == [0, 1]
    assert all(e["txnNumber"] == 1 and e["lsid"]["id"] == LSID["id"] for e in entries)
    # the second statement's prevOpTime is the first's optime; the first has none
    assert entries[0]["prevOpTime"] == {"ts": bson.Timestamp(0, 0), "t": -1}
    assert entries[1]["prevOpTime"] == {"ts": entries[0]["ts"], "t": 1}
    rec = rs.command("config", {"find": "transactions"})["cursor"]["firstBatch"]
    assert len(rec) == 1 and rec[0]["txnNum"] == 1
    assert rec[0]["lastWriteOpTime"] == {"ts": entries[1]["ts"], "t": 1}


def test_partly_executed_batch_runs_only_the_rest(rs):
    rs.command("t", {"insert": "c", "documents": [{"_id": 1}], "lsid": LSID,
                     "txnNumber": Int64(5)})
    # the same txnNumber again with statements 0 (done) and 1 (new), as a
    # driver's retry after a failure in the middle of a batch sends them
    r = rs.command("t", {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}],
                         "lsid": LSID, "txnNumber": Int64(5)})
    assert strip(r) == {"n": 2, "retriedStmtIds": [0], "ok": 1.0}
    assert docs(rs) == [{"_id": 1}, {"_id": 2}]


def test_explicit_stmt_ids(rs):
    base = {"insert": "c", "lsid": LSID, "txnNumber": Int64(2)}
    rs.command("t", {**base, "documents": [{"_id": 1}], "stmtIds": [7]})
    r = rs.command("t", {**base, "documents": [{"_id": 1}, {"_id": 2}], "stmtIds": [7, 8]})
    assert strip(r) == {"n": 2, "retriedStmtIds": [7], "ok": 1.0}
    assert [e["stmtId"] for e in oplog(rs, {"op": "i"})] == [7, 8]


def test_update_and_upsert_retry(rs):
    rs.command("t", {"insert": "c", "documents": [{"_id": 1, "x": 0}]})
    cmd = {"update": "c", "updates": [
        {"q": {"_id": 1}, "u": {"$inc": {"x": 1}}},
        {"q": {"_id": 5}, "u": {"$set": {"y": 1}}, "upsert": True}],
        "lsid": LSID, "txnNumber": Int64(1)}
    first = strip(rs.command("t", cmd))
    assert list(first.items()) == [("n", 2), ("upserted", [{"index": 1, "_id": 5}]),
                                   ("nModified", 1), ("ok", 1.0)]
    again = strip(rs.command("t", cmd))
    assert list(again.items()) == [("n", 2), ("retriedStmtIds", [0, 1]),
                                   ("upserted", [{"index": 1, "_id": 5}]),
                                   ("nModified", 1), ("ok", 1.0)]
    assert docs(rs) == [{"_id": 1, "x": 1}, {"_id": 5, "y": 1}]


def test_delete_retry(rs):
    rs.command("t", {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}]})
    cmd = {"delete": "c", "deletes": [{"q": {}, "limit": 1}], "lsid": LSID,
           "txnNumber": Int64(1)}
    assert strip(rs.command("t", cmd)) == {"n": 1, "ok": 1.0}
    assert strip(rs.command("t", cmd)) == {"n": 1, "retriedStmtIds": [0], "ok": 1.0}
    assert docs(rs) == [{"_id": 2}]  # one deleted, not two


@pytest.mark.parametrize("new", [True, False])
def test_find_and_modify_retry_returns_the_image(rs, new):
    rs.command("t", {"insert": "c", "documents": [{"_id": 1, "x": 0}]})
    cmd = {"findAndModify": "c", "query": {"_id": 1}, "update": {"$inc": {"x": 1}},
           "new": new, "lsid": LSID, "txnNumber": Int64(1)}
    first = strip(rs.command("t", cmd))
    assert first["value"] == {"_id": 1, "x": 1 if new else 0}
    again = strip(rs.command("t", cmd))
    assert list(again) == ["lastErrorObject", "value", "retriedStmtId", "ok"]
    assert again == {**first, "retriedStmtId": 0}
    assert docs(rs) == [{"_id": 1, "x": 1}]
    img = rs.command("config", {"find": "image_collection"})["cursor"]["firstBatch"]
    assert img[0]["imageKind"] == ("postImage" if new else "preImage")


def test_find_and_modify_remove_and_upsert_retry(rs):
    rs.command("t", {"insert": "c", "documents": [{"_id": 1, "x": 0}]})
    rm = {"findAndModify": "c", "query": {"_id": 1}, "remove": True, "lsid": LSID,
          "txnNumber": Int64(1)}
    first = strip(rs.command("t", rm))
    assert first["value"] == {"_id": 1, "x": 0}
    assert strip(rs.command("t", rm)) == {**first, "retriedStmtId": 0}
    up = {"findAndModify": "c", "query": {"_id": 2}, "update": {"$set": {"y": 1}},
          "upsert": True, "new": True, "lsid": LSID, "txnNumber": Int64(2)}
    first = strip(rs.command("t", up))
    assert first["lastErrorObject"] == {"n": 1, "updatedExisting": False, "upserted": 2}
    assert strip(rs.command("t", up)) == {**first, "retriedStmtId": 0}
    assert docs(rs) == [{"_id": 2, "y": 1}]


def test_write_reply_fields(rs, tmp_path):
    """mongod's write replies (WriteCommandReplyBase): in a replica set n,
    electionId, opTime (this command's write, else the newest), then
    writeErrors; an update's upserted and nModified after them.  A
    standalone has no electionId nor opTime."""
    hello = rs.command("admin", {"hello": 1})
    r = rs.command("t", {"insert": "c", "documents": [{"_id": 1}]})
    assert list(r) == ["n", "electionId", "opTime", "ok", "$clusterTime", "operationTime"]
    assert r["electionId"] == hello["electionId"]
    assert r["opTime"] == {"ts": r["operationTime"], "t": Int64(1)}
    assert isinstance(r["opTime"]["t"], Int64)
    (entry,) = oplog(rs, {"op": "i"})
    assert r["opTime"]["ts"] == entry["ts"]
    r = rs.command("t", {"update": "c", "updates": [
        {"q": {"_id": 1}, "u": {"$set": {"_id": 2}}},
        {"q": {"_id": 9}, "u": {"$set": {"a": 1}}, "upsert": True}], "ordered": False})
    assert list(r)[:6] == ["n", "electionId", "opTime", "writeErrors", "upserted",
                           "nModified"]
    # nothing written: the newest optime
    newest = oplog(rs)[-1]["ts"]
    r = rs.command("t", {"delete": "c", "deletes": [{"q": {"_id": 99}, "limit": 1}]})
    assert r["opTime"]["ts"] == newest and list(r)[:3] == ["n", "electionId", "opTime"]
    # a standalone
    with multifora.Server(str(tmp_path / "standalone"), port=0) as server:
        r = server.command("t", {"update": "c", "updates": [
            {"q": {"_id": 9}, "u": {"$set": {"a": 1}}, "upsert": True}]})
        assert list(r) == ["n", "upserted", "nModified", "ok"]
        r = server.command("t", {"insert": "c", "documents": [{"_id": 9}]})
        assert list(r) == ["n", "writeErrors", "ok"]


def test_older_txn_number_is_too_old(rs):
    rs.command("t", {"insert": "c", "documents": [{"_id": 1}], "lsid": LSID,
                     "txnNumber": Int64(3)})
    with pytest.raises(multifora.CommandError) as e:
        rs.command("t", {"insert": "c", "documents": [{"_id": 2}], "lsid": LSID,
                         "txnNumber": Int64(2)})
    assert (e.value.code, e.value.code_name) == (225, "TransactionTooOld")
    assert docs(rs) == [{"_id": 1}]


def test_not_a_retryable_command(rs):
    with pytest.raises(multifora.CommandError) as e:
        rs.command("t", {"find": "c", "lsid": LSID, "txnNumber": Int64(1)})
    assert e.value.code == 50768


def test_transaction_statement_is_not_a_retryable_write(rs):
    # autocommit: false makes it a transaction's statement (test_transactions.py):
    # nothing is written before the commit, and an abort leaves nothing
    rs.command("t", {"insert": "c", "documents": [{"_id": 1}], "lsid": LSID,
                     "txnNumber": Int64(1), "autocommit": False, "startTransaction": True})
    assert docs(rs) == []
    rs.command("admin", {"abortTransaction": 1, "lsid": LSID, "txnNumber": Int64(1),
                         "autocommit": False})
    assert docs(rs) == []


def test_standalone_still_refuses_txn_numbers(server):
    with pytest.raises(multifora.CommandError) as e:
        server.command("t", {"insert": "c", "documents": [{"_id": 1}], "lsid": LSID,
                             "txnNumber": Int64(1)})
    assert e.value.code == 20
    assert "oplog.rs" not in [c["name"] for c in server.command(
        "local", {"listCollections": 1})["cursor"]["firstBatch"]]


def test_retry_after_restart(tmp_path):
    path = str(tmp_path / "db")
    cmd = {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"x": 1}},
                                       "upsert": True}], "lsid": LSID, "txnNumber": Int64(4)}
    with multifora.Server(path, port=0, replica_set="rs0") as s:
        first = strip(s.command("t", cmd))
        s.command("t", {**cmd, "txnNumber": Int64(5),
                        "updates": [{"q": {"_id": 1}, "u": {"$inc": {"x": 10}}}]})
    with multifora.Server(path, port=0, replica_set="rs0") as s:
        # the session's state comes back from config.transactions and the oplog
        again = s.command("t", {**cmd, "txnNumber": Int64(5),
                                "updates": [{"q": {"_id": 1}, "u": {"$inc": {"x": 10}}}]})
        assert strip(again) == {"n": 1, "retriedStmtIds": [0], "nModified": 1, "ok": 1.0}
        with pytest.raises(multifora.CommandError) as e:
            s.command("t", cmd)
        assert e.value.code == 225
        assert docs(s) == [{"_id": 1, "x": 11}]
    assert first["upserted"] == [{"index": 0, "_id": 1}]


def test_oplog_entries_and_clock_survive_restart(tmp_path):
    path = str(tmp_path / "db")
    with multifora.Server(path, port=0, replica_set="rs0") as s:
        s.command("t", {"insert": "c", "documents": [{"_id": 1, "a": 1}]})
        s.command("t", {"update": "c", "updates": [{"q": {"_id": 1},
                                                    "u": {"$set": {"a": 2, "b": 1}}}]})
        s.command("t", {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"r": 1}}]})
        s.command("t", {"delete": "c", "deletes": [{"q": {"_id": 1}, "limit": 1}]})
        entries = oplog(s)
    assert entries[0]["op"] == "n" and entries[0]["o"] == {"msg": "initiating set"}
    assert (entries[1]["op"], entries[1]["o"]["create"]) == ("c", "c")  # the insert's
    i, u, r, d = entries[2:]
    assert (i["op"], i["ns"], i["o"], i["o2"]) == ("i", "t.c", {"_id": 1, "a": 1}, {"_id": 1})
    assert u["o"] == {"$v": 2, "diff": {"u": {"a": 2}, "i": {"b": 1}}}
    assert r["o"] == {"_id": 1, "r": 1}  # a replacement logs the whole document
    assert (d["op"], d["o"]) == ("d", {"_id": 1})
    assert all(e["t"] == 1 and e["v"] == 2 for e in entries)
    ts = [e["ts"] for e in entries]
    assert ts == sorted(ts) and len(set(ts)) == len(ts)
    with multifora.Server(path, port=0, replica_set="rs0") as s:
        r = s.command("t", {"insert": "c", "documents": [{"_id": 2}]})
        assert r["operationTime"] > ts[-1]
        assert len(oplog(s)) == len(entries) + 1  # no second "initiating set"


def test_kill9_then_retry_applies_once(tmp_path):
    """Acknowledged retryable writes, kill -9, reopen: the last one retried
    is answered from the log, not applied a second time."""
    s = ServedProcess(tmp_path / "db", extra=["--replSet", "rs0"]).start()
    try:
        c = s.client(retryWrites=False)
        sess = c.start_session()
        lsid = sess.session_id
        upd = {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"x": 1}},
                                           "upsert": True}]}
        for n in range(1, 6):
            c.t.command({**upd, "txnNumber": Int64(n)}, session=sess)
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait(timeout=30)
        c.close()
    finally:
        s.stop()
    with multifora.Server(str(tmp_path / "db"), port=0, replica_set="rs0") as e:
        r = e.command("t", {**upd, "lsid": lsid, "txnNumber": Int64(5)})
        assert strip(r) == {"n": 1, "retriedStmtIds": [0], "nModified": 1, "ok": 1.0}
        assert docs(e) == [{"_id": 1, "x": 5}]


@pytest.fixture
def rs_test(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0, replica_set="rs0",
                           enable_test_commands=True).start()
    yield srv
    srv.stop()


def test_retryable_write_error_label_and_topology_version(rs_test):
    fp = {"configureFailPoint": "failCommand", "mode": {"times": 2},
          "data": {"failCommands": ["insert"], "errorCode": 91, "failLocalClients": True,
                   "failInternalCommands": True}}
    rs_test.command("admin", fp)
    with pytest.raises(multifora.CommandError) as e:
        rs_test.command("t", {"insert": "c", "documents": [{"_id": 1}], "lsid": LSID,
                              "txnNumber": Int64(1)})
    d = e.value.details
    assert d["errorLabels"] == ["RetryableWriteError"]
    assert d["topologyVersion"]["counter"] == 0
    # not a retryable write: no label (the topologyVersion stays)
    with pytest.raises(multifora.CommandError) as e:
        rs_test.command("t", {"insert": "c", "documents": [{"_id": 1}]})
    assert "errorLabels" not in e.value.details and "topologyVersion" in e.value.details


def test_on_primary_transactional_write_fails_before_commit(rs_test):
    rs_test.command("admin", {"configureFailPoint": "onPrimaryTransactionalWrite",
                              "mode": {"times": 1},
                              "data": {"closeConnection": False,
                                       "failBeforeCommitExceptionCode": 1}})
    cmd = {"insert": "c", "documents": [{"_id": 1}], "lsid": LSID, "txnNumber": Int64(1)}
    r = rs_test.command("t", cmd)
    assert r["n"] == 0 and r["writeErrors"][0]["code"] == 1
    assert docs(rs_test) == []
    assert strip(rs_test.command("t", cmd)) == {"n": 1, "ok": 1.0}  # not run before: runs now
    assert docs(rs_test) == [{"_id": 1}]


def test_driver_retries_after_connection_closed_once_committed(rs_test):
    """closeConnection (the default): the statement commits, the reply never
    comes, the driver retries and gets the first run's result."""
    c = pymongo.MongoClient(rs_test.uri)
    c.admin.command({"configureFailPoint": "onPrimaryTransactionalWrite",
                     "mode": {"times": 1}, "data": {}})
    res = c.t.c.update_one({"_id": 1}, {"$inc": {"x": 1}}, upsert=True)
    assert res.upserted_id == 1
    assert list(c.t.c.find()) == [{"_id": 1, "x": 1}]  # applied once
    c.close()
