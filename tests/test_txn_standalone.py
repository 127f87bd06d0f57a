"""Transactions and transaction numbers on a standalone, as mongod 7.0
answers them: a standalone has neither multi-document transactions nor
retryable writes, so every command that carries a txnNumber is refused with
IllegalOperation (20) before it does anything, and nothing it asked to write
is written.  commitTransaction and abortTransaction exist (admin only) and,
without a transaction number, fail with CommandFailed (125).

The order of the checks is initializeOperationSessionInfo's: the fields'
types (IDL), then, for a command that needs no authentication (hello, ping,
buildInfo, ...), 263 for autocommit and 50889 for txnNumber; then txnNumber
without lsid (72), then txnNumber at all (20), then autocommit without
txnNumber (72), then startTransaction without autocommit (72).
"""
from __future__ import annotations

import uuid

import pymongo
import pytest
from bson.binary import Binary
from bson.int64 import Int64
from pymongo.errors import OperationFailure

from multifora.server import CommandError

TXN_MSG = "Transaction numbers are only allowed on a replica set member or mongos"


def lsid() -> dict:
    return {"id": Binary(uuid.uuid4().bytes, 4)}


def fails(server, db, cmd) -> dict:
    with pytest.raises(CommandError) as ei:
        server.command(db, cmd)
    return ei.value.details


def test_pymongo_transaction_writes_nothing_and_abort_leaves_nothing(client):
    coll = client.test.txn
    coll.insert_one({"_id": "before"})
    with client.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as ei:
            coll.insert_one({"a": 1}, session=s)
        assert ei.value.code == 20
        assert TXN_MSG in str(ei.value)
        s.abort_transaction()
    assert list(coll.find({}, {"_id": 1})) == [{"_id": "before"}]


def test_pymongo_with_transaction_commit_writes_nothing(client):
    coll = client.test.txn2
    coll.insert_one({"_id": 0})

    def body(s):
        coll.insert_one({"_id": 1}, session=s)
        coll.update_one({"_id": 0}, {"$set": {"x": 1}}, session=s)
        coll.delete_one({"_id": 0}, session=s)

    with client.start_session() as s:
        with pytest.raises(OperationFailure) as ei:
            s.with_transaction(body)
        assert ei.value.code == 20
    assert list(coll.find()) == [{"_id": 0}]


@pytest.mark.parametrize("cmd", [
    {"insert": "c", "documents": [{"_id": 1}]},
    {"update": "c", "updates": [{"q": {"_id": 0}, "u": {"$set": {"x": 1}}}]},
    {"delete": "c", "deletes": [{"q": {"_id": 0}, "limit": 1}]},
    {"findAndModify": "c", "query": {"_id": 0}, "update": {"$set": {"x": 1}}},
    {"findAndModify": "c", "query": {"_id": 0}, "remove": True},
    {"create": "newcoll"},
    {"createIndexes": "c", "indexes": [{"key": {"x": 1}, "name": "x_1"}]},
    {"drop": "c"},
    {"aggregate": "c", "pipeline": [{"$out": "out"}], "cursor": {}},
])
@pytest.mark.parametrize("txn", [
    {"startTransaction": True, "autocommit": False},   # the first statement of a transaction
    {"autocommit": False},                              # a later statement
    {},                                                 # a retryable write by hand
])
def test_write_with_txn_number_is_refused_and_writes_nothing(server, cmd, txn):
    server.command("test", {"insert": "c", "documents": [{"_id": 0}]})
    before = server.command("test", {"find": "c"})["cursor"]["firstBatch"]
    before_colls = sorted(server.command("test", {"listCollections": 1, "nameOnly": True})
                          ["cursor"]["firstBatch"], key=lambda d: d["name"])
    before_idx = server.command("test", {"listIndexes": "c"})["cursor"]["firstBatch"]
    e = fails(server, "test", {**cmd, "lsid": lsid(), "txnNumber": Int64(1), **txn})
    assert (e["code"], e["codeName"], e["errmsg"]) == (20, "IllegalOperation", TXN_MSG)
    assert server.command("test", {"find": "c"})["cursor"]["firstBatch"] == before
    assert sorted(server.command("test", {"listCollections": 1, "nameOnly": True})
                  ["cursor"]["firstBatch"], key=lambda d: d["name"]) == before_colls
    assert server.command("test", {"listIndexes": "c"})["cursor"]["firstBatch"] == before_idx


@pytest.mark.parametrize("cmd", [
    {"find": "c"}, {"aggregate": "c", "pipeline": [], "cursor": {}},
    {"count": "c"}, {"distinct": "c", "key": "a"}, {"listCollections": 1},
    {"getMore": Int64(1), "collection": "c"}, {"killCursors": "c", "cursors": []},
])
def test_read_with_txn_number_is_refused(server, cmd):
    e = fails(server, "test", {**cmd, "lsid": lsid(), "txnNumber": Int64(0),
                               "startTransaction": True, "autocommit": False})
    assert (e["code"], e["errmsg"]) == (20, TXN_MSG)


@pytest.mark.parametrize("name", ["commitTransaction", "abortTransaction"])
def test_commit_and_abort(server, name):
    # with a transaction number: refused as every command with one
    e = fails(server, "admin", {name: 1, "lsid": lsid(), "txnNumber": Int64(3),
                                "autocommit": False})
    assert (e["code"], e["codeName"], e["errmsg"]) == (20, "IllegalOperation", TXN_MSG)
    # without one: there is no transaction to end
    e = fails(server, "admin", {name: 1})
    assert (e["code"], e["codeName"]) == (125, "CommandFailed")
    assert e["errmsg"] == f"{name} must be run within a transaction"
    e = fails(server, "admin", {name: 1, "lsid": lsid()})
    assert e["code"] == 125
    # admin only
    e = fails(server, "test", {name: 1})
    assert (e["code"], e["errmsg"]) == (13, f"{name} may only be run against the admin database.")


def test_commit_and_abort_are_listed(server):
    cmds = server.command("admin", {"listCommands": 1})["commands"]
    assert "commitTransaction" in cmds and "abortTransaction" in cmds


@pytest.mark.parametrize("name", ["ping", "hello", "isMaster", "buildInfo", "listCommands",
                                  "connectionStatus"])
def test_commands_without_auth_take_no_transaction(server, name):
    e = fails(server, "admin", {name: 1, "lsid": lsid(), "txnNumber": Int64(1)})
    assert (e["code"], e["errmsg"]) == (50889, "It is illegal to provide a txnNumber for this command")
    e = fails(server, "admin", {name: 1, "txnNumber": Int64(1)})
    assert e["code"] == 50889
    e = fails(server, "admin", {name: 1, "lsid": lsid(), "txnNumber": Int64(1),
                                "autocommit": False})
    assert (e["code"], e["codeName"], e["errmsg"]) == (
        263, "OperationNotSupportedInTransaction", "This command is not supported in transactions")


def test_session_field_checks_in_mongods_order(server):
    ins = {"insert": "c", "documents": [{"x": 1}]}
    # txnNumber without a session
    e = fails(server, "test", {**ins, "txnNumber": Int64(1)})
    assert (e["code"], e["errmsg"]) == (72, "Transaction number requires a session ID to also be specified")
    # autocommit without txnNumber
    e = fails(server, "test", {**ins, "lsid": lsid(), "autocommit": False})
    assert (e["code"], e["errmsg"]) == (
        72, "'autocommit' field requires a transaction number to also be specified")
    # startTransaction without autocommit
    e = fails(server, "test", {**ins, "lsid": lsid(), "startTransaction": True})
    assert (e["code"], e["errmsg"]) == (
        72, "'startTransaction' field requires 'autocommit' field to also be specified")
    # a negative or an autocommit: true transaction number: still a standalone
    for extra in ({"txnNumber": Int64(-1)}, {"txnNumber": Int64(1), "autocommit": True}):
        e = fails(server, "test", {**ins, "lsid": lsid(), **extra})
        assert e["code"] == 20
    assert server.command("test", {"count": "c"})["n"] == 0


@pytest.mark.parametrize("field,value,want", [
    ("txnNumber", 1, "long"),
    ("txnNumber", 1.0, "long"),
    ("autocommit", 0, "bool"),
    ("startTransaction", "yes", "bool"),
    ("txnRetryCounter", Int64(0), "int"),
])
def test_session_field_types(server, field, value, want):
    e = fails(server, "test", {"insert": "c", "documents": [{"x": 1}], "lsid": lsid(),
                               field: value})
    assert e["code"] == 14
    assert e["errmsg"].startswith(f"BSON field 'OperationSessionInfo.{field}' is the wrong type")
    assert e["errmsg"].endswith(f"expected type '{want}'")
    assert server.command("test", {"count": "c"})["n"] == 0


def test_ordinary_session_writes_still_work(client):
    with client.start_session() as s:
        client.test.c.insert_one({"a": 1}, session=s)
        assert client.test.c.find_one({}, {"_id": 0}, session=s) == {"a": 1}


def test_retryable_writes_are_not_attempted_by_pymongo(server):
    # pymongo sends no txnNumber to a standalone, whatever retryWrites says
    c = pymongo.MongoClient(server.uri, retryWrites=True, serverSelectionTimeoutMS=5000)
    try:
        c.test.r.insert_one({"a": 1})
        c.test.r.update_one({"a": 1}, {"$set": {"b": 2}})
        assert c.test.r.find_one({}, {"_id": 0}) == {"a": 1, "b": 2}
    finally:
        c.close()
