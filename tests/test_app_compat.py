"""Differences from mongod 7.0 that applications and ODMs met first (issue 45),
each matched: the _id index under another name, $changeStream on a
standalone, exhaust getMore streams, update pipelines' stage names checked
for the whole command, the readConcern's parse.  docs/matched.md lists them.
"""
from __future__ import annotations

import bson
import pymongo
import pytest
from bson.int64 import Int64
from pymongo.cursor import CursorType
from pymongo.errors import OperationFailure

from multifora.server import CommandError
from wirelib import EXHAUST_ALLOWED, MORE_TO_COME, OP_MSG, Conn, body_section, op_msg


def fails(server, db, cmd) -> dict:
    with pytest.raises(CommandError) as ei:
        server.command(db, cmd)
    return ei.value.details


# ------------------------------------------------------------ the _id index

@pytest.mark.parametrize("name", ["_id_1", "id", "my_id_index"])
def test_id_index_under_another_name_is_the_id_index(client, name):
    coll = client.test.c
    coll.insert_one({"_id": 1})
    r = client.test.command({"createIndexes": "c",
                             "indexes": [{"key": {"_id": 1}, "name": name}]})
    assert r["numIndexesBefore"] == r["numIndexesAfter"] == 1
    assert r["note"] == "all indexes already exist"
    assert [ix["name"] for ix in coll.list_indexes()] == ["_id_"]
    # pymongo's create_index returns the name the driver generated or was
    # given; the server's index is _id_
    coll.create_index([("_id", 1)], name=name)
    assert [ix["name"] for ix in coll.list_indexes()] == ["_id_"]


def test_id_index_name_corrected_on_a_new_collection(client):
    r = client.test.command({"createIndexes": "fresh",
                             "indexes": [{"key": {"_id": 1}, "name": "_id_1"}]})
    assert r["ok"] == 1.0
    assert [ix["name"] for ix in client.test.fresh.list_indexes()] == ["_id_"]


def test_id_index_with_other_options_still_refused(client):
    with pytest.raises(OperationFailure) as ei:
        client.test.command({"createIndexes": "c", "indexes": [
            {"key": {"_id": 1}, "name": "_id_1", "sparse": True}]})
    assert ei.value.code == 197


# ------------------------------------------------------------- change streams

def test_watch_on_a_standalone(client):
    for target in (client.test.c, client.test, client):
        with pytest.raises(OperationFailure) as ei:
            target.watch()
        assert ei.value.code == 40573
        assert ei.value.details["errmsg"] == (
            "The $changeStream stage is only supported on replica sets")


@pytest.mark.parametrize("pipeline,code", [
    ([{"$changeStream": {}}], 40573),
    ([{"$match": {}}, {"$changeStream": {}}], 40573),   # before the position check
    ([{"$changeStream": {"fullDocument": "updateLookup"}}], 40573),
    ([{"$changeStream": 1}], 50808),
    ([{"$changeStream": {"bogus": 1}}], 40415),
    # $lookup's lite parse refuses a change stream in its pipeline first
    ([{"$lookup": {"from": "d", "pipeline": [{"$changeStream": {}}], "as": "x"}}], 51047),
    ([{"$facet": {"f": [{"$changeStream": {}}]}}], 40573),
])
def test_change_stream_stage_errors(server, pipeline, code):
    server.command("test", {"insert": "c", "documents": [{"a": 1}]})
    e = fails(server, "test", {"aggregate": "c", "pipeline": pipeline, "cursor": {}})
    assert e["code"] == code, e


def test_change_stream_in_an_update_pipeline(server):
    # the update's Pipeline::parse builds the stage (40573) before its
    # allowed-in-an-update check (72)
    server.command("test", {"insert": "c", "documents": [{"a": 1}]})
    r = server.command("test", {"update": "c",
                                "updates": [{"q": {}, "u": [{"$changeStream": {}}]}]})
    assert r["writeErrors"][0]["code"] == 40573


# ------------------------------------------------------------ exhaust cursors

def test_exhaust_getmore_streams_every_batch(server):
    server.command("t", {"insert": "c", "documents": [{"_id": i} for i in range(250)]})
    first = server.command("t", {"find": "c", "batchSize": 100})
    cid = first["cursor"]["id"]
    with Conn(server.port) as conn:
        conn.send(op_msg(body_section({"getMore": cid, "collection": "c", "batchSize": 60,
                                       "$db": "t"}), flags=EXHAUST_ALLOWED, request_id=5))
        replies = []
        while True:
            r = conn.recv()            # no further request is sent: the server streams
            replies.append(r)
            if not r.flags & MORE_TO_COME:
                break
        # after the stream the connection answers requests again
        ping = conn.roundtrip(op_msg(body_section({"ping": 1, "$db": "admin"}), request_id=9))
        assert ping.response_to == 9 and ping.doc["ok"] == 1.0
    batches = [[d["_id"] for d in r.doc["cursor"]["nextBatch"]] for r in replies]
    assert batches == [list(range(100, 160)), list(range(160, 220)), list(range(220, 250))]
    assert [r.doc["cursor"]["id"] for r in replies] == [cid, cid, 0]
    assert [bool(r.flags & MORE_TO_COME) for r in replies] == [True, True, False]
    # each reply answers the one before it
    assert replies[0].response_to == 5
    for prev, r in zip(replies, replies[1:]):
        assert r.response_to == prev.request_id and r.opcode == OP_MSG


def test_getmore_without_exhaust_allowed_answers_once(server):
    server.command("t", {"insert": "c", "documents": [{"_id": i} for i in range(50)]})
    cid = server.command("t", {"find": "c", "batchSize": 10})["cursor"]["id"]
    with Conn(server.port) as conn:
        r = conn.roundtrip(op_msg(body_section({"getMore": cid, "collection": "c",
                                                "batchSize": 10, "$db": "t"}), request_id=3))
        assert r.flags == 0 and r.doc["cursor"]["id"] == cid
        assert conn.is_closed(wait=0.5) is False     # nothing more was sent


def test_exhaust_stream_ends_on_an_error(server):
    server.command("t", {"insert": "c", "documents": [{"_id": i} for i in range(50)]})
    cid = server.command("t", {"find": "c", "batchSize": 10})["cursor"]["id"]
    with Conn(server.port) as conn:
        # a getMore naming another collection fails: one reply, no moreToCome
        r = conn.roundtrip(op_msg(body_section({"getMore": cid, "collection": "other",
                                                "batchSize": 10, "$db": "t"}),
                                  flags=EXHAUST_ALLOWED, request_id=3))
        assert r.doc["ok"] == 0.0 and not r.flags & MORE_TO_COME


def test_pymongo_exhaust_cursor(client):
    client.test.c.insert_many([{"i": i} for i in range(1000)])
    docs = list(client.test.c.find({}, {"_id": 0}, cursor_type=CursorType.EXHAUST,
                                   batch_size=64).sort("i", 1))
    assert [d["i"] for d in docs] == list(range(1000))


# ------------------------------------------------ update statements' parse

def _docs(server):
    return server.command("test", {"find": "c"})["cursor"]["firstBatch"]


@pytest.mark.parametrize("u,code", [
    ([{"$invalidOperator": 1}], 40324),
    ([{"$set": {"a": 2}, "$unset": "b"}], 40323),
    ([1], 14),
])
def test_update_pipeline_stage_names_fail_the_whole_command(server, u, code):
    server.command("test", {"insert": "c", "documents": [{"_id": 1, "a": 1}]})
    # the first statement is valid, the second is not: nothing runs
    e = fails(server, "test", {"update": "c", "updates": [
        {"q": {}, "u": {"$set": {"x": 1}}}, {"q": {}, "u": u}]})
    assert e["code"] == code
    assert _docs(server) == [{"_id": 1, "a": 1}]
    e = fails(server, "test", {"findAndModify": "c", "query": {}, "update": u})
    assert e["code"] == code
    assert _docs(server) == [{"_id": 1, "a": 1}]


def test_pymongo_update_one_with_an_unknown_stage(client):
    client.test.c.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as ei:
        client.test.c.update_one({"_id": 1}, [{"$invalidOperator": 1}])
    assert ei.value.code == 40324
    assert type(ei.value) is OperationFailure     # not a WriteError


def test_unknown_stage_comes_before_the_stages_own_errors(server):
    server.command("test", {"insert": "c", "documents": [{"_id": 1}]})
    e = fails(server, "test", {"findAndModify": "c", "query": {},
                               "update": [{"$set": {"a": {"$bad": 1}}}, {"$nope": 1}]})
    assert e["code"] == 40324


@pytest.mark.parametrize("u,code", [
    ([{"$match": {}}], 72),                 # a known stage not allowed in an update
    ([{"$set": 1}], 40272),                 # the stage's own parse
    ({"$bad": {"a": 1}}, 9),                # an unknown update operator
])
def test_statement_errors_stay_write_errors(server, u, code):
    server.command("test", {"insert": "c", "documents": [{"_id": 1, "a": 1}]})
    r = server.command("test", {"update": "c", "updates": [
        {"q": {}, "u": {"$set": {"x": 1}}}, {"q": {}, "u": u}]})
    assert r["ok"] == 1.0 and r["n"] == 1
    assert r["writeErrors"][0]["index"] == 1 and r["writeErrors"][0]["code"] == code


# --------------------------------------------------------------- read concern

@pytest.mark.parametrize("cmd", [
    {"find": "c"}, {"aggregate": "c", "pipeline": [], "cursor": {}}, {"count": "c"},
    {"distinct": "c", "key": "a"}, {"insert": "c", "documents": [{"z": 1}]},
    {"listCollections": 1},
])
@pytest.mark.parametrize("rc,code,msg", [
    ({"level": "unknown"}, 9,
     "readConcern.level must be either 'local', 'majority', 'linearizable', 'available', or "
     "'snapshot'"),
    ({"level": 1}, 14, "\"level\" had the wrong type. Expected string, found int"),
    ("local", 9, "readConcern field should be an object"),
    ({"bogus": 1}, 72, "Unrecognized option in readConcern: bogus"),
    ({"afterClusterTime": 5}, 14,
     "\"afterClusterTime\" had the wrong type. Expected timestamp, found int"),
    ({"level": "local", "atClusterTime": bson.Timestamp(1, 1)}, 72,
     "atClusterTime field can be set only if level is equal to snapshot"),
    ({"level": "available", "afterClusterTime": bson.Timestamp(1, 1)}, 72,
     "afterClusterTime field can be set only if level is equal to majority, local, or snapshot"),
    ({"afterClusterTime": bson.Timestamp(0, 0)}, 72, "afterClusterTime cannot be a null timestamp"),
    ({"afterOpTime": {"ts": bson.Timestamp(1, 1), "t": Int64(1)},
      "afterClusterTime": bson.Timestamp(1, 1)}, 72,
     "Can not specify both afterClusterTime and afterOpTime"),
    ({"provenance": "bogus"}, 2,
     "Enumeration value 'bogus' for field 'ReadConcernArgs::parse.provenance' is not a valid "
     "value."),
])
def test_read_concern_parse(server, cmd, rc, code, msg):
    server.command("test", {"insert": "c", "documents": [{"a": 1}]})
    e = fails(server, "test", {**cmd, "readConcern": rc})
    assert (e["code"], e["errmsg"]) == (code, msg)
    assert server.command("test", {"count": "c"})["n"] == 1


def test_pymongo_read_concern_levels(client):
    from pymongo.read_concern import ReadConcern
    client.test.c.insert_one({"a": 1})
    for level in ("local", "available", "majority"):
        assert client.test.get_collection("c", read_concern=ReadConcern(level)).count_documents({}) == 1
    with pytest.raises(OperationFailure) as ei:
        client.test.get_collection("c", read_concern=ReadConcern("unknown")).find_one()
    assert ei.value.code == 9
    # a provenance as mongos and mongod add it is accepted
    r = client.test.command({"find": "c", "readConcern": {"level": "local",
                                                          "provenance": "clientSupplied"}})
    assert r["ok"] == 1.0
