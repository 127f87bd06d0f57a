"""The one-member replica set (issue 47, command/repl.c): the server as the
primary of a set of one, as drivers discover it and as mongod 7.0's
replica-set commands describe it."""
from __future__ import annotations

import bson
import pymongo
import pytest
from pymongo.errors import OperationFailure, WriteConcernError

import multifora

from conftest import ServedProcess


@pytest.fixture
def rs(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0, replica_set="rs0",
                           enable_test_commands=True)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def rsc(rs):
    c = pymongo.MongoClient(rs.uri, serverSelectionTimeoutMS=5000, retryWrites=False)
    yield c
    c.close()


def test_uri_names_the_set(rs):
    assert rs.uri == f"mongodb://127.0.0.1:{rs.port}/?replicaSet=rs0"


def test_driver_discovers_a_primary(rsc):
    rsc.admin.command("ping")
    td = rsc.topology_description
    assert td.topology_type_name == "ReplicaSetWithPrimary"
    (sd,) = td.server_descriptions().values()
    assert sd.server_type_name == "RSPrimary"
    assert sd.replica_set_name == "rs0"


def test_hello_fields_in_mongods_order(rs, rsc):
    me = f"127.0.0.1:{rs.port}"
    h = rsc.admin.command("hello")
    keys = list(h)
    assert keys[:11] == ["topologyVersion", "hosts", "setName", "setVersion",
                         "isWritablePrimary", "secondary", "primary", "me", "electionId",
                         "lastWrite", "maxBsonObjectSize"]
    assert keys[-3:] == ["ok", "$clusterTime", "operationTime"]
    assert h["hosts"] == [me] and h["primary"] == me and h["me"] == me
    assert h["setName"] == "rs0" and h["setVersion"] == 1
    assert h["isWritablePrimary"] is True and h["secondary"] is False
    assert h["electionId"] == bson.ObjectId("7fffffff0000000000000001")
    lw = h["lastWrite"]
    assert list(lw) == ["opTime", "lastWriteDate", "majorityOpTime", "majorityWriteDate"]
    assert lw["opTime"]["t"] == 1 and isinstance(lw["opTime"]["ts"], bson.Timestamp)
    assert lw["majorityOpTime"] == lw["opTime"]
    # isMaster says ismaster where hello says isWritablePrimary
    im = rsc.admin.command("isMaster")
    assert im["ismaster"] is True and "isWritablePrimary" not in im


def test_standalone_hello_unchanged(server):
    h = server.command("admin", {"hello": 1})
    assert "setName" not in h and "$clusterTime" not in h and "operationTime" not in h
    assert list(h)[:2] == ["isWritablePrimary", "topologyVersion"]


def test_cluster_time_advances_with_writes(rsc):
    db = rsc.t
    r0 = db.command("ping")
    r1 = db.command("insert", "c", documents=[{"a": 1}])
    r2 = db.command("insert", "c", documents=[{"a": 2}])
    assert r1["operationTime"] > r0["operationTime"]
    assert r2["operationTime"] > r1["operationTime"]
    assert r2["$clusterTime"]["clusterTime"] == r2["operationTime"]
    sig = r2["$clusterTime"]["signature"]
    assert sig == {"hash": b"\0" * 20, "keyId": 0}
    # a read's operationTime is the newest write's
    r3 = db.command("find", "c")
    assert r3["operationTime"] == r2["operationTime"]
    # hello's lastWrite follows
    assert rsc.admin.command("hello")["lastWrite"]["opTime"]["ts"] == r2["operationTime"]


def test_error_replies_carry_cluster_time(rs):
    with pytest.raises(multifora.CommandError) as e:
        rs.command("t", {"find": 1})
    reply = e.value.details
    assert reply["code"] == 73 and list(reply)[-2:] == ["$clusterTime", "operationTime"]


def test_repl_set_get_status_and_config(rs, rsc):
    me = f"127.0.0.1:{rs.port}"
    st = rsc.admin.command("replSetGetStatus")
    assert st["set"] == "rs0" and st["myState"] == 1 and st["term"] == 1
    (m,) = st["members"]
    assert m["name"] == me and m["stateStr"] == "PRIMARY" and m["self"] is True
    assert m["optime"]["ts"] == st["optimes"]["appliedOpTime"]["ts"]
    cfg = rsc.admin.command("replSetGetConfig")["config"]
    assert cfg["_id"] == "rs0" and cfg["version"] == 1 and cfg["protocolVersion"] == 1
    assert [x["host"] for x in cfg["members"]] == [me]
    assert isinstance(cfg["settings"]["replicaSetId"], bson.ObjectId)
    with pytest.raises(OperationFailure) as e:
        rsc.t.command("replSetGetStatus")
    assert e.value.code == 13


def test_repl_commands_on_a_standalone(client):
    for name in ("replSetGetStatus", "replSetGetConfig", "replSetInitiate"):
        with pytest.raises(OperationFailure) as e:
            client.admin.command(name)
        assert (e.value.code, e.value.details["codeName"]) == (76, "NoReplicationEnabled")
        assert e.value.details["errmsg"] == "not running with --replSet"


def test_repl_set_initiate(rs, rsc):
    me = f"127.0.0.1:{rs.port}"
    rsc.admin.command("replSetInitiate")
    rsc.admin.command("replSetInitiate", {})
    rsc.admin.command("replSetInitiate", {"_id": "rs0", "members": [{"_id": 0, "host": me}]})
    with pytest.raises(OperationFailure) as e:
        rsc.admin.command("replSetInitiate", {"_id": "other", "members": [{"_id": 0,
                                                                          "host": me}]})
    assert e.value.code == 93 and "other" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        rsc.admin.command("replSetInitiate", {"_id": "rs0", "members": [
            {"_id": 0, "host": me}, {"_id": 1, "host": "elsewhere:27017"}]})
    assert e.value.code == 93 and "2 members" in str(e.value)


def test_write_concern_a_set_of_one_cannot_satisfy(rsc):
    db = rsc.t
    r = db.command("insert", "c", documents=[{"a": 1}], writeConcern={"w": 2})
    assert r["n"] == 1  # applied, then the write concern fails
    wce = r["writeConcernError"]
    assert (wce["code"], wce["codeName"]) == (100, "UnsatisfiableWriteConcern")
    assert wce["errInfo"]["writeConcern"] == {"w": 2, "wtimeout": 0,
                                              "provenance": "clientSupplied"}
    r = db.command("insert", "c", documents=[{"a": 2}], writeConcern={"w": "dc1"})
    assert r["writeConcernError"]["code"] == 79
    assert "No write concern mode named 'dc1'" in r["writeConcernError"]["errmsg"]
    r = db.command("insert", "c", documents=[{"a": 3}],
                   writeConcern={"w": "majority", "j": True})
    assert "writeConcernError" not in r
    assert db.c.count_documents({}) == 3
    with pytest.raises(WriteConcernError):
        db.get_collection("c", write_concern=pymongo.WriteConcern(w=3)).insert_one({"a": 4})


def test_unix_socket_hosts_entry(tmp_path):
    sock = str(tmp_path / "m.sock")
    srv = multifora.Server(str(tmp_path / "db"), port=None, unix_socket=sock,
                           replica_set="rs0").start()
    try:
        c = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000, retryWrites=False)
        assert c.admin.command("hello")["hosts"] == [sock]
        c.t.c.insert_one({"a": 1})
        assert c.topology_description.topology_type_name == "ReplicaSetWithPrimary"
        c.close()
    finally:
        srv.stop()


def test_serve_repl_set_flag(tmp_path):
    s = ServedProcess(tmp_path / "db", extra=["--replSet", "rs1"]).start()
    try:
        assert s.uri.endswith("/?replicaSet=rs1")
        c = s.client(retryWrites=False)
        assert c.admin.command("hello")["setName"] == "rs1"
        opts = c.admin.command("getCmdLineOpts")
        assert opts["parsed"]["replication"] == {"replSet": "rs1"}
        c.close()
    finally:
        s.stop()


def test_bad_set_name(tmp_path):
    with pytest.raises(multifora.MultiforaError):
        multifora.Server(str(tmp_path / "db"), port=0, replica_set="a/b")


def test_the_sets_own_collections_are_kept(rs):
    """The oplog and the sessions' records are written with every write:
    a user may read them, not drop, rename or write them."""
    for ns in ("local.oplog.rs", "config.transactions", "config.image_collection"):
        db, coll = ns.split(".", 1)
        assert rs.command(db, {"find": coll})["ok"] == 1
        with pytest.raises(multifora.CommandError) as e:
            rs.command(db, {"drop": coll})
        assert e.value.code == 20
        with pytest.raises(multifora.CommandError) as e:
            rs.command(db, {"insert": coll, "documents": [{"_id": 1}]})
        assert e.value.code == 73
        with pytest.raises(multifora.CommandError) as e:
            rs.command("admin", {"renameCollection": ns, "to": "t.x"})
        assert e.value.code == 73
    for db in ("local", "config"):
        with pytest.raises(multifora.CommandError) as e:
            rs.command(db, {"dropDatabase": 1})
        assert e.value.code == 20
    # and writes go on
    rs.command("t", {"insert": "c", "documents": [{"_id": 1}]})
