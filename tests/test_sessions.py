"""Logical sessions: the registry every command's lsid feeds, the session
commands (startSession, refreshSessions, endSessions, killAllSessions) and
the $listLocalSessions stage, as mongod 7.0 standalone without auth.

Commands with a hand-made lsid go through Server.command(), which sends the
document as it is (pymongo would put its own lsid in).
"""
from __future__ import annotations

import datetime
import hashlib
import os
import uuid

import pytest
from bson.binary import Binary

from multifora.server import CommandError

NO_AUTH_UID = hashlib.sha256(b"").digest()


def fails(server, db, cmd) -> dict:
    """The error reply of a command that must fail."""
    with pytest.raises(CommandError) as ei:
        server.command(db, cmd)
    return ei.value.details


def new_id() -> Binary:
    return Binary(uuid.uuid4().bytes, 4)


def sessions(server, spec=None) -> list[dict]:
    """$listLocalSessions run through Server.command (no lsid of its own)."""
    reply = server.command("admin", {
        "aggregate": 1, "pipeline": [{"$listLocalSessions": spec if spec is not None
                                      else {"allUsers": True}}],
        "cursor": {}})
    assert reply["ok"] == 1.0, reply
    return reply["cursor"]["firstBatch"]


def ids(docs) -> set[bytes]:
    return {bytes(d["_id"]["id"]) for d in docs}


def use(server, sid: Binary, uid: bytes | None = None, cmd="ping"):
    lsid = {"id": sid} if uid is None else {"id": sid, "uid": Binary(uid, 0)}
    return server.command("admin", {cmd: 1, "lsid": lsid})


def test_explicit_session_is_listed_with_mongods_record_shape(client, server):
    with client.start_session() as s:
        client.test.c.insert_one({"a": 1}, session=s)
        sid = s.session_id["id"]
        docs = sessions(server)
    assert len(docs) >= 1
    mine = [d for d in docs if bytes(d["_id"]["id"]) == bytes(sid)]
    assert len(mine) == 1
    d = mine[0]
    assert list(d) == ["_id", "lastUse"]          # no `user`: no one authenticated
    assert list(d["_id"]) == ["id", "uid"]
    assert isinstance(d["_id"]["id"], uuid.UUID) or d["_id"]["id"].subtype == 4
    assert d["_id"]["uid"] == NO_AUTH_UID          # SHA-256 of "", general binData
    assert isinstance(d["lastUse"], datetime.datetime)
    age = datetime.datetime.utcnow() - d["lastUse"]
    assert datetime.timedelta(seconds=-5) < age < datetime.timedelta(seconds=30)


def test_implicit_session_is_the_one_db_aggregate_sees(client):
    # The spec test's pipeline: the aggregate's own implicit lsid is listed.
    out = list(client.admin.aggregate([
        {"$listLocalSessions": {}}, {"$limit": 1},
        {"$addFields": {"dummy": "dummy field"}}, {"$project": {"_id": 0, "dummy": 1}}]))
    assert out == [{"dummy": "dummy field"}]


def test_uid_digest_and_users_filter(server):
    a, b, c = new_id(), new_id(), new_id()
    alice = hashlib.sha256(b"alice@admin").digest()
    assert use(server, a)["ok"] == 1.0
    assert use(server, b, alice)["ok"] == 1.0
    assert use(server, c, hashlib.sha256(b"bob@test").digest())["ok"] == 1.0
    assert ids(sessions(server)) == {bytes(a), bytes(b), bytes(c)}
    # {}: the caller's own -- the unauthenticated user's
    assert ids(sessions(server, {})) == {bytes(a)}
    assert ids(sessions(server, {"users": []})) == {bytes(a)}
    assert ids(sessions(server, {"users": [{"user": "alice", "db": "admin"}]})) == {bytes(b)}
    assert ids(sessions(server, {"users": [{"user": "alice", "db": "admin"},
                                           {"user": "bob", "db": "test"}]})) == {bytes(b), bytes(c)}
    assert ids(sessions(server, {"users": [{"user": "", "db": ""}]})) == {bytes(a)}
    assert sessions(server, {"users": [{"user": "alice", "db": "test"}]}) == []
    assert ids(sessions(server, {"allUsers": False})) == {bytes(a)}


def test_same_id_different_uid_are_two_sessions(server):
    a = new_id()
    use(server, a)
    use(server, a, hashlib.sha256(b"x@y").digest())
    docs = [d for d in sessions(server) if bytes(d["_id"]["id"]) == bytes(a)]
    assert sorted(d["_id"]["uid"] for d in docs) == sorted(
        [NO_AUTH_UID, hashlib.sha256(b"x@y").digest()])


def test_last_use_is_refreshed_and_listing_is_most_recent_first(server):
    a, b = new_id(), new_id()
    use(server, a)
    use(server, b)
    first = {bytes(d["_id"]["id"]): d["lastUse"] for d in sessions(server)}
    import time
    time.sleep(0.02)
    use(server, a)
    docs = sessions(server)
    assert bytes(docs[0]["_id"]["id"]) == bytes(a)
    assert docs[0]["lastUse"] > first[bytes(a)]


def test_start_session_and_refresh_sessions(server):
    r = server.command("admin", {"startSession": 1})
    assert list(r) == ["id", "timeoutMinutes", "ok"]
    assert list(r["id"]) == ["id"]
    sid = r["id"]["id"]
    assert isinstance(sid, uuid.UUID) or sid.subtype == 4
    raw = sid.bytes if isinstance(sid, uuid.UUID) else bytes(sid)
    assert r["timeoutMinutes"] == 30 and type(r["timeoutMinutes"]) is int
    assert raw in ids(sessions(server))
    # refreshSessions adds what it does not know
    x = new_id()
    assert server.command("admin", {"refreshSessions": [{"id": x}]}) == {"ok": 1.0}
    assert bytes(x) in ids(sessions(server))


def test_end_sessions_removes_only_those_named(server):
    a, b = new_id(), new_id()
    use(server, a)
    use(server, b)
    assert server.command("admin", {"endSessions": [{"id": a}, {"id": new_id()}]}) == {"ok": 1.0}
    assert ids(sessions(server)) == {bytes(b)}
    # the uid is part of the key: ending (b, other uid) leaves (b, no-auth)
    server.command("admin", {"endSessions": [
        {"id": b, "uid": Binary(hashlib.sha256(b"u@d").digest(), 0)}]})
    assert ids(sessions(server)) == {bytes(b)}


def test_end_sessions_through_pymongo_session_end(client, server):
    s = client.start_session()
    client.test.c.find_one({}, session=s)
    sid = bytes(s.session_id["id"])
    assert sid in ids(sessions(server))
    # pymongo pools ended sessions and sends endSessions when the client closes
    s.end_session()
    client.close()
    assert sid not in ids(sessions(server))


def test_kill_all_sessions(server):
    a, b, c = new_id(), new_id(), new_id()
    use(server, a)
    use(server, b, hashlib.sha256(b"alice@admin").digest())
    use(server, c, hashlib.sha256(b"bob@admin").digest())
    r = server.command("admin", {"killAllSessions": [{"user": "alice", "db": "admin"}]})
    assert r == {"ok": 1.0}
    assert ids(sessions(server)) == {bytes(a), bytes(c)}
    r = server.command("admin", {"killAllSessions": [{"user": "", "db": ""}]})
    assert ids(sessions(server)) == {bytes(c)}
    assert server.command("admin", {"killAllSessions": []}) == {"ok": 1.0}
    assert sessions(server) == []


@pytest.mark.parametrize("lsid,code,msg", [
    (1, 14, "BSON field 'OperationSessionInfo.lsid' is the wrong type 'int', expected type "
            "'object'"),
    ({}, 40414, "BSON field 'OperationSessionInfo.lsid.id' is missing but a required field"),
    ({"id": "x"}, 14, "BSON field 'OperationSessionInfo.lsid.id' is the wrong type 'string', "
                      "expected type 'binData'"),
    ({"id": Binary(os.urandom(16), 0)}, 14,
     "BSON field 'OperationSessionInfo.lsid.id' is the wrong binData type 'general', expected "
     "type 'UUID'"),
    ({"id": Binary(b"abc", 4)}, 207, "uuid must be a 16-byte binary field with UUID (4) subtype"),
    ({"id": Binary(os.urandom(16), 4), "uid": Binary(b"x" * 32, 4)}, 14,
     "BSON field 'OperationSessionInfo.lsid.uid' is the wrong binData type 'UUID', expected "
     "type 'general'"),
    ({"id": Binary(os.urandom(16), 4), "uid": Binary(b"x" * 31, 0)}, 12,
     "Unsupported SHA256Block hash length: 31"),
    ({"id": Binary(os.urandom(16), 4), "foo": 1}, 40415,
     "BSON field 'OperationSessionInfo.lsid.foo' is an unknown field."),
])
def test_malformed_lsid(server, lsid, code, msg):
    r = fails(server, "test", {"find": "c", "lsid": lsid})
    assert (r["ok"], r["code"], r["errmsg"]) == (0.0, code, msg)
    assert sessions(server) == []  # nothing recorded


@pytest.mark.parametrize("cmd,code,msg", [
    ({"endSessions": 1}, 14, "BSON field 'endSessions.endSessions' is the wrong type 'int', "
                             "expected type 'array'"),
    ({"endSessions": [{}]}, 40414,
     "BSON field 'endSessions.endSessionsFromClient.id' is missing but a required field"),
    ({"refreshSessions": [{"id": "x"}]}, 14,
     "BSON field 'refreshSessions.refreshSessionsFromClient.id' is the wrong type 'string', "
     "expected type 'binData'"),
    ({"killAllSessions": [{"user": "a"}]}, 40414,
     "BSON field 'KillAllSessionsCmd.killAllSessions.db' is missing but a required field"),
    ({"killAllSessions": [{"user": "a", "db": 1}]}, 14,
     "BSON field 'KillAllSessionsCmd.killAllSessions.db' is the wrong type 'int', expected "
     "type 'string'"),
    ({"killAllSessions": [{"user": "a", "db": "b", "x": 1}]}, 40415,
     "BSON field 'KillAllSessionsCmd.killAllSessions.x' is an unknown field."),
])
def test_session_command_errors(server, cmd, code, msg):
    r = fails(server, "admin", cmd)
    assert (r["ok"], r["code"], r["errmsg"]) == (0.0, code, msg)


def test_end_sessions_checks_every_element_before_ending_any(server):
    a = new_id()
    use(server, a)
    r = fails(server, "admin", {"endSessions": [{"id": a}, {"id": 5}]})
    assert r["code"] == 14
    assert ids(sessions(server)) == {bytes(a)}


@pytest.mark.parametrize("pipeline,code,msg", [
    ([{"$listLocalSessions": 1}], 14,
     "$listLocalSessions options must be specified in an object, but found: int"),
    ([{"$listLocalSessions": {"allUsers": 1}}], 14,
     "BSON field '$listLocalSessions.allUsers' is the wrong type 'int', expected type 'bool'"),
    ([{"$listLocalSessions": {"users": {}}}], 14,
     "BSON field '$listLocalSessions.users' is the wrong type 'object', expected type 'array'"),
    ([{"$listLocalSessions": {"users": [{"user": "a", "db": "b", "c": 1}]}}], 40415,
     "BSON field '$listLocalSessions.users.c' is an unknown field."),
    ([{"$listLocalSessions": {"users": [{"db": "b"}]}}], 40414,
     "BSON field '$listLocalSessions.users.user' is missing but a required field"),
    ([{"$listLocalSessions": {"allUsers": True, "users": [{"user": "a", "db": "b"}]}}], 12,
     "$listLocalSessions may not specify {allUsers:true} and {users:[...]} at the same time"),
    ([{"$listLocalSessions": {"bogus": 1}}], 40415,
     "BSON field '$listLocalSessions.bogus' is an unknown field."),
    ([{"$limit": 1}, {"$listLocalSessions": {}}], 73,
     "{aggregate: 1} is not valid for '$limit'; a collection is required."),
    ([{"$documents": []}, {"$listLocalSessions": {}}], 40602,
     "$listLocalSessions is only valid as the first stage in a pipeline"),
])
def test_list_local_sessions_errors(server, pipeline, code, msg):
    r = fails(server, "admin", {"aggregate": 1, "pipeline": pipeline, "cursor": {}})
    assert (r["ok"], r["code"], r["errmsg"]) == (0.0, code, msg)


def test_list_local_sessions_on_a_collection(server):
    r = fails(server, "admin", {"aggregate": "c", "pipeline": [{"$listLocalSessions": {}}],
                                 "cursor": {}})
    assert (r["code"], r["errmsg"]) == (
        73, "$listLocalSessions must be run against the database with {aggregate: 1}, not a "
            "collection")


def test_list_local_sessions_any_database_and_later_stages(client, server):
    # mongod asks only for {aggregate: 1}, not the admin database
    a = new_id()
    use(server, a)
    r = server.command("test", {"aggregate": 1, "cursor": {}, "pipeline": [
        {"$listLocalSessions": {"allUsers": True}},
        {"$match": {"_id.id": a}},
        {"$project": {"_id": 0, "uid": "$_id.uid", "t": {"$type": "$lastUse"}}}]})
    assert r["cursor"]["firstBatch"] == [{"uid": NO_AUTH_UID, "t": "date"}]


def test_hello_does_not_record_its_lsid(server):
    a = new_id()
    assert server.command("admin", {"hello": 1, "lsid": {"id": a}})["ok"] == 1.0
    assert sessions(server) == []


def test_sessions_survive_only_in_memory(tmp_path):
    import multifora
    srv = multifora.Server(str(tmp_path / "db"), port=0)
    srv.start()
    try:
        use(srv, new_id())
        assert len(sessions(srv)) == 1
    finally:
        srv.stop()
    srv = multifora.Server(str(tmp_path / "db"), port=0)
    srv.start()
    try:
        assert sessions(srv) == []
    finally:
        srv.stop()

# Expiry with a small timeout is a C case (csrc/test/test_sessions.c, run by
# test_ctest.py): the timeout is a startup setting, as in mongod.
