"""The handshake and admin surface drivers and their test harnesses send,
through pymongo, over both paths (embedded and served) where it matters."""
import datetime
import os

import bson
import pymongo
import pytest
from pymongo.errors import AutoReconnect, OperationFailure

import multifora


def test_ping_both_paths(any_client):
    r = any_client.admin.command("ping")
    # (embedded, open() is a replica-set member: its replies gossip the clock)
    gossip = {"$clusterTime", "operationTime"}
    assert {k: v for k, v in r.items() if k not in gossip} == {"ok": 1.0}


def test_hello_both_paths(any_client):
    h = any_client.admin.command("hello")
    assert h["isWritablePrimary"] is True
    assert h["maxBsonObjectSize"] == 16 * 1024 * 1024
    assert h["maxMessageSizeBytes"] == 48_000_000
    assert h["maxWriteBatchSize"] == 100_000
    assert h["minWireVersion"] == 0 and h["maxWireVersion"] == 21
    assert h["logicalSessionTimeoutMinutes"] == 30
    assert h["readOnly"] is False
    assert isinstance(h["localTime"], datetime.datetime)
    assert isinstance(h["connectionId"], int) and h["connectionId"] > 0
    tv = h["topologyVersion"]
    assert isinstance(tv["processId"], bson.ObjectId) and tv["counter"] == 0
    assert isinstance(tv["counter"], bson.Int64) or tv["counter"] == 0


def test_hello_field_order_and_helloOk(client):
    h = client.admin.command({"hello": 1, "helloOk": True})
    assert list(h) == ["helloOk", "isWritablePrimary", "topologyVersion", "maxBsonObjectSize",
                       "maxMessageSizeBytes", "maxWriteBatchSize", "localTime",
                       "logicalSessionTimeoutMinutes", "connectionId", "minWireVersion",
                       "maxWireVersion", "readOnly", "ok"]


def test_ismaster_legacy_field(client):
    for name in ("isMaster", "ismaster"):
        h = client.admin.command(name)
        assert h["ismaster"] is True and "isWritablePrimary" not in h


def test_connection_ids_differ(server):
    a = pymongo.MongoClient(server.uri, maxPoolSize=1)
    b = pymongo.MongoClient(server.uri, maxPoolSize=1)
    try:
        assert a.admin.command("hello")["connectionId"] != b.admin.command("hello")["connectionId"]
    finally:
        a.close()
        b.close()


def test_build_info(client):
    bi = client.admin.command("buildInfo")
    assert bi["version"] == "7.0.0"
    assert bi["versionArray"] == [7, 0, 0, 0]
    assert bi["bits"] == 64 and bi["maxBsonObjectSize"] == 16777216
    assert client.test.command("buildinfo")["version"] == "7.0.0"  # alias, any db
    assert client.server_info()["version"] == "7.0.0"


def test_server_status(client):
    before = client.admin.command("serverStatus")
    client.admin.command("ping")
    ss = client.admin.command("serverStatus")
    assert ss["version"] == "7.0.0"
    assert ss["pid"] == os.getpid()  # in-process server
    for key in ("host", "uptime", "uptimeMillis", "localTime"):
        assert key in ss
    assert ss["connections"]["current"] >= 1
    assert ss["connections"]["totalCreated"] >= ss["connections"]["current"]
    assert ss["connections"]["available"] == 1000 - ss["connections"]["current"]
    assert ss["opcounters"]["command"] > before["opcounters"]["command"]
    assert set(ss["opcounters"]) == {"insert", "query", "update", "delete", "getmore", "command"}
    mem = ss["mem"]
    assert mem["bits"] == 64 and mem["supported"] is True and mem["resident"] > 0
    assert ss["network"]["numRequests"] > before["network"]["numRequests"]
    slim = client.admin.command({"serverStatus": 1, "mem": 0, "connections": 0})
    assert "mem" not in slim and "connections" not in slim and "opcounters" in slim


def test_get_parameter(client):
    assert client.admin.command({"getParameter": 1, "enableTestCommands": 1}) == {
        "enableTestCommands": True, "ok": 1.0}
    allp = client.admin.command({"getParameter": "*"})
    assert allp["featureCompatibilityVersion"] == {"version": "7.0"}
    names = [k for k in allp if k != "ok"]
    assert names == sorted(names)
    details = client.admin.command({"getParameter": {"showDetails": True}, "logLevel": 1})
    assert details["logLevel"] == {"value": 0, "settableAtRuntime": True,
                                   "settableAtStartup": True}
    with pytest.raises(OperationFailure) as e:
        client.admin.command({"getParameter": 1, "noSuchParameter": 1})
    assert e.value.code == 72 and "no option found to get" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        client.test.command({"getParameter": "*"})
    assert e.value.code == 13
    assert e.value.details["errmsg"] == "getParameter may only be run against the admin database."


def test_get_cmd_line_opts(server, client):
    opts = client.admin.command("getCmdLineOpts")
    assert isinstance(opts["argv"], list)
    assert opts["parsed"]["storage"]["dbPath"] == server.dbpath
    assert opts["parsed"]["net"]["port"] == 0


def test_host_info_whatsmyuri_connection_status(client):
    hi = client.admin.command("hostInfo")
    assert hi["system"]["numCores"] >= 1 and hi["system"]["memSizeMB"] > 0
    assert hi["os"]["type"] == "Linux"
    me = client.admin.command("whatsmyuri")["you"]
    assert me.startswith("127.0.0.1:")
    cs = client.admin.command({"connectionStatus": 1, "showPrivileges": True})
    assert cs["authInfo"] == {"authenticatedUsers": [], "authenticatedUserRoles": [],
                              "authenticatedUserPrivileges": []}


def test_list_commands(client):
    cmds = client.admin.command("listCommands")["commands"]
    for name in ("hello", "isMaster", "ping", "buildInfo", "getParameter", "serverStatus",
                 "listCommands", "shutdown", "getLog", "endSessions", "killAllSessions"):
        assert name in cmds, name
    assert "ismaster" not in cmds and "buildinfo" not in cmds  # aliases are not listed
    assert cmds["getParameter"]["adminOnly"] is True
    assert cmds["ping"]["adminOnly"] is False
    assert list(cmds["ping"]) == ["help", "requiresAuth", "secondaryOk", "adminOnly",
                                  "apiVersions", "deprecatedApiVersions"]


def test_sessions_commands(client):
    with client.start_session() as s:
        client.admin.command("ping", session=s)
    assert client.admin.command({"endSessions": [{"id": bson.Binary(os.urandom(16), 4)}]})["ok"]
    assert client.admin.command({"killAllSessions": []})["ok"] == 1.0
    with pytest.raises(OperationFailure) as e:
        client.admin.command({"endSessions": 1})
    assert e.value.code == 14


def test_get_log(client):
    names = client.admin.command({"getLog": "*"})["names"]
    assert names == ["global", "startupWarnings"]
    g = client.admin.command({"getLog": "global"})
    assert g["totalLinesWritten"] >= len(g["log"]) > 0
    assert all(line.startswith('{"t":{"$date":') for line in g["log"])
    assert any('"Connection accepted' in line for line in g["log"])
    with pytest.raises(OperationFailure) as e:
        client.admin.command({"getLog": "nosuch"})
    assert "no RamLog named: nosuch" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        client.admin.command({"getLog": 1})
    assert e.value.code == 14


def test_unknown_command(client):
    with pytest.raises(OperationFailure) as e:
        client.test.command("frobnicate")
    assert e.value.code == 59
    assert e.value.details == {"ok": 0.0, "errmsg": "no such command: 'frobnicate'",
                               "code": 59, "codeName": "CommandNotFound"}


def test_second_hello_with_metadata_rejected(server):
    c = pymongo.MongoClient(server.uri, maxPoolSize=1)
    try:
        c.admin.command("ping")  # the pooled connection has done its handshake
        with pytest.raises(OperationFailure) as e:
            c.admin.command({"hello": 1, "client": {"driver": {"name": "x", "version": "1"}}})
        assert e.value.code == 186
    finally:
        c.close()


def test_in_process_command(server):
    assert server.command("admin", {"ping": 1}) == {"ok": 1.0}
    assert server.command("admin", {"hello": 1})["isWritablePrimary"] is True
    assert server.command("test", {"buildInfo": 1, "$db": "ignored"})["version"] == "7.0.0"
    with pytest.raises(multifora.CommandError) as e:
        server.command("test", {"nosuch": 1})
    assert e.value.code == 59 and e.value.code_name == "CommandNotFound"
    assert isinstance(e.value, multifora.MultiforaError)


def test_shutdown_command_over_the_wire(served):
    c = served.client()
    c.admin.command("ping")
    with pytest.raises(OperationFailure) as e:
        c.test.command("shutdown")
    assert e.value.code == 13
    with pytest.raises(AutoReconnect):
        c.admin.command("shutdown")  # mongod closes the connection, no reply
    c.close()
    assert served.proc.wait(timeout=30) == 0


def test_async_pymongo(server):
    """pymongo's asyncio client goes through the same handshake."""
    import asyncio

    from pymongo import AsyncMongoClient

    async def main():
        c = AsyncMongoClient(server.uri, serverSelectionTimeoutMS=5000)
        try:
            assert (await c.admin.command("ping"))["ok"] == 1.0
            assert (await c.admin.command("hello"))["maxWireVersion"] == 21
        finally:
            await c.close()

    asyncio.run(main())
