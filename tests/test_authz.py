"""Access control (issue 50, part 4): --auth, the localhost exception,
each command's privileges, and the commands x built-in roles table.

The expected cells are written from mongod 7.0's built-in role definitions
(builtin_roles.yml) and its commands' authorization checks, independently
of the server's own tables: a command is "allowed" for a role when it does
not fail with Unauthorized (13) -- it may still fail for another reason.
"""
import os
import socket
import subprocess
import sys

import pymongo
import pytest
from pymongo.errors import OperationFailure

import multifora

PW = "pw-1"


def server(tmp_path, **kw):
    kw.setdefault("log_level", "warning")
    return multifora.Server(str(tmp_path / "db"), port=0, auth=True, **kw).start()


def client(srv, host="127.0.0.1", **kw):
    kw.setdefault("serverSelectionTimeoutMS", 5000)
    return pymongo.MongoClient(host, srv.port, directConnection=True, **kw)


def refused(fn, *a, **kw):
    """The Unauthorized error's message, or None when it was not refused."""
    try:
        fn(*a, **kw)
    except OperationFailure as e:
        if e.code == 13:
            return e.details["errmsg"]
    return None


@pytest.fixture
def rooted(tmp_path):
    """A server with access control and a root user made through the
    localhost exception; yields (server, root client)."""
    srv = server(tmp_path)
    first = client(srv)
    first.admin.command("createUser", "root", pwd=PW, roles=["root"])
    first.close()
    root = client(srv, username="root", password=PW)
    yield srv, root
    root.close()
    srv.stop()


# ------------------------------------------------------------- who may run


def test_unauthenticated_commands(rooted):
    srv, root = rooted
    anon = client(srv)
    # what mongod lets anyone run (requiresAuth false)
    for name in ("hello", "isMaster", "ping", "buildInfo", "listCommands", "connectionStatus"):
        assert anon.admin.command(name)["ok"] == 1.0, name
    status = anon.admin.command("connectionStatus", showPrivileges=True)["authInfo"]
    assert status == {"authenticatedUsers": [], "authenticatedUserRoles": [],
                      "authenticatedUserPrivileges": []}
    # everything else needs a user first, with mongod's message
    for db, cmd in (("test", {"find": "c"}), ("test", {"insert": "c", "documents": [{}]}),
                    ("admin", {"listDatabases": 1}), ("admin", {"whatsmyuri": 1}),
                    ("admin", {"endSessions": []}), ("admin", {"serverStatus": 1}),
                    ("test", {"logout": 1})):
        name = next(iter(cmd))
        msg = refused(anon[db].command, cmd)
        assert msg == f"Command {name} requires authentication", (cmd, msg)
    # a command only for admin says so first, as mongod's check comes first
    with pytest.raises(OperationFailure) as e:
        anon.test.command("listDatabases")
    assert e.value.code == 13 and "may only be run against the admin database" in str(e.value)
    # a wrong password changes nothing
    bad = client(srv, username="root", password="nope")
    with pytest.raises(OperationFailure) as e:
        bad.admin.command("ping")
    assert e.value.code == 18
    anon.close()
    bad.close()


def test_localhost_exception(tmp_path):
    srv = server(tmp_path, log_level="info")
    c = client(srv)
    # no user yet: a local connection may create the first one in admin,
    # and nothing else -- a command that needs privileges is refused as
    # not authorized (not as unauthenticated), as mongod's bypass does
    msg = refused(c.test.c.find_one)
    assert msg and msg.startswith('not authorized on test to execute command { find: "c"')
    msg = refused(c.test.command, "createUser", "u", pwd=PW, roles=["read"])
    assert msg.startswith('not authorized on test to execute command { createUser: "u", '
                          'pwd: "xxx", roles: [ "read" ]'), msg
    assert PW not in msg
    assert refused(c.admin.command, "createRole", "r", privileges=[], roles=[])
    # roles of another database cannot be granted by it either
    assert refused(c.admin.command, "createUser", "x", pwd=PW,
                   roles=[{"role": "read", "db": "test"}])
    c.admin.command("createUser", "boss", pwd=PW, roles=["userAdminAnyDatabase"])
    # the exception is over: the same connection is now a stranger
    assert refused(c.admin.command, "createUser", "second", pwd=PW,
                   roles=["root"]) == "Command createUser requires authentication"
    assert refused(c.test.c.find_one) == "Command find requires authentication"
    boss = client(srv, username="boss", password=PW)
    boss.admin.command("createUser", "second", pwd=PW, roles=["readAnyDatabase"])
    log = "\n".join(srv_log(srv))
    assert '"id":20248' in log or "allowing localhost access" in log
    c.close()
    boss.close()
    srv.stop()


def srv_log(srv):
    # getLog needs a privilege: ask as the server itself
    return srv.command("admin", {"getLog": "global"})["log"]


def non_loopback_address():
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("192.0.2.1", 9))  # no packet is sent: it picks the route's address
        addr = s.getsockname()[0]
        s.close()
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


def test_no_localhost_exception_from_another_host(tmp_path):
    addr = non_loopback_address()
    if not addr:
        pytest.skip("this machine has no address but loopback to connect from")
    srv = multifora.Server(str(tmp_path / "db"), host="0.0.0.0", port=0, auth=True,
                           log_level="warning").start()
    far = client(srv, host=addr)
    assert far.admin.command("ping")["ok"] == 1.0
    assert refused(far.admin.command, "createUser", "u", pwd=PW,
                   roles=["root"]) == "Command createUser requires authentication"
    near = client(srv)
    near.admin.command("createUser", "u", pwd=PW, roles=["root"])
    far.close()
    near.close()
    srv.stop()


def test_in_process_commands_are_the_servers(tmp_path):
    srv = server(tmp_path)
    srv.command("admin", {"createUser": "a", "pwd": PW, "roles": ["root"]})
    srv.command("test", {"insert": "c", "documents": [{"x": 1}]})
    assert srv.command("test", {"count": "c"})["n"] == 1
    assert refused(client(srv).test.c.find_one) == "Command find requires authentication"
    srv.stop()


def test_serve_auth_flag_and_embedded_open(tmp_path):
    from conftest import ServedProcess
    sp = ServedProcess(tmp_path / "served", extra=["--auth"]).start()
    try:
        c = sp.client()
        c.admin.command("createUser", "a", pwd=PW, roles=["root"])
        assert refused(c.test.c.find_one) == "Command find requires authentication"
        opts = sp.client(username="a", password=PW).admin.command("getCmdLineOpts")
        assert opts["parsed"]["security"] == {"authorization": "enabled"}
        assert "--auth" in opts["argv"]
    finally:
        sp.kill()
    # embedded: the Unix socket is local, so the first user can be made
    with multifora.open(str(tmp_path / "emb"), auth=True) as c:
        c.admin.command("createUser", "a", pwd=PW, roles=["root"])
        assert refused(c.test.c.find_one) == "Command find requires authentication"
    with multifora.open(str(tmp_path / "emb"), auth=True, username="a", password=PW) as c:
        c.test.c.insert_one({"x": 1})
        assert c.test.c.count_documents({}) == 1


# ------------------------------------------------- the table of commands x roles

DB_ROLES = ["read", "readWrite", "dbAdmin", "dbOwner", "userAdmin"]
ADMIN_ROLES = ["clusterMonitor", "clusterManager", "hostManager", "clusterAdmin",
               "readAnyDatabase", "readWriteAnyDatabase", "dbAdminAnyDatabase",
               "userAdminAnyDatabase", "backup", "restore", "root"]
ALL = DB_ROLES + ADMIN_ROLES + ["none"]

READERS = {"read", "readWrite", "dbOwner", "readAnyDatabase", "readWriteAnyDatabase",
           "backup", "root"}
WRITERS = {"readWrite", "dbOwner", "readWriteAnyDatabase", "root"}
DB_ADMINS = {"dbAdmin", "dbOwner", "dbAdminAnyDatabase", "root"}
USER_ADMINS = {"userAdmin", "dbOwner", "userAdminAnyDatabase", "restore", "root"}
MONITORS = {"clusterMonitor", "clusterAdmin", "root"}

# (label, database, command, the roles that may run it)
TABLE = [
    ("find", "test", {"find": "c"}, READERS),
    ("count", "test", {"count": "c"}, READERS),
    ("distinct", "test", {"distinct": "c", "key": "x"}, READERS),
    ("aggregate $match", "test", {"aggregate": "c", "pipeline": [{"$match": {}}],
                                  "cursor": {}}, READERS),
    ("explain find", "test", {"explain": {"find": "c"}}, READERS),
    ("insert", "test", {"insert": "c", "documents": [{"y": 1}]}, WRITERS | {"restore"}),
    ("update", "test", {"update": "c", "updates": [{"q": {}, "u": {"$set": {"y": 1}}}]},
     WRITERS),
    ("update upsert", "test", {"update": "c", "updates": [{"q": {"z": 1}, "u": {"$set": {"y": 1}},
                                                          "upsert": True}]}, WRITERS),
    ("delete", "test", {"delete": "c", "deletes": [{"q": {}, "limit": 0}]}, WRITERS),
    ("findAndModify", "test", {"findAndModify": "c", "query": {}, "update": {"$set": {"y": 2}}},
     WRITERS),
    ("aggregate $out", "test", {"aggregate": "c", "pipeline": [{"$out": "d"}], "cursor": {}},
     WRITERS),
    ("aggregate $lookup", "test", {"aggregate": "c", "cursor": {}, "pipeline": [
        {"$lookup": {"from": "d", "localField": "x", "foreignField": "x", "as": "j"}}]},
     READERS),
    ("insert system.js", "test", {"insert": "system.js", "documents": [{"_id": "f"}]},
     WRITERS | {"restore"}),
    ("createIndexes", "test", {"createIndexes": "c", "indexes": [{"key": {"y": 1},
                                                                 "name": "y_1"}]},
     WRITERS | DB_ADMINS | {"restore"}),
    ("listIndexes", "test", {"listIndexes": "c"}, READERS | DB_ADMINS),
    ("listCollections", "test", {"listCollections": 1},
     READERS | DB_ADMINS | {"restore"}),
    ("collStats", "test", {"collStats": "c"}, READERS | DB_ADMINS | MONITORS),
    ("dbStats", "test", {"dbStats": 1}, (READERS - {"backup"}) | DB_ADMINS | MONITORS),
    ("validate", "test", {"validate": "c"}, DB_ADMINS),
    ("collMod", "test", {"collMod": "c"}, DB_ADMINS | {"restore"}),
    ("create", "test", {"create": "n"}, WRITERS | DB_ADMINS | {"restore"}),
    ("drop", "test", {"drop": "c"}, WRITERS | DB_ADMINS | {"restore"}),
    ("dropDatabase", "test", {"dropDatabase": 1}, DB_ADMINS | {"clusterAdmin"}),
    ("renameCollection same db", "admin", {"renameCollection": "test.c", "to": "test.e"},
     WRITERS | DB_ADMINS),
    ("profile set", "test", {"profile": 0}, DB_ADMINS),
    ("profile read", "test", {"profile": -1},
     DB_ADMINS | MONITORS | {"backup"}),
    ("createUser", "test", {"createUser": "made", "pwd": PW, "roles": ["read"]}, USER_ADMINS),
    ("usersInfo", "test", {"usersInfo": 1}, USER_ADMINS),
    ("rolesInfo", "test", {"rolesInfo": 1}, USER_ADMINS),
    ("find admin.system.users", "admin", {"find": "system.users"},
     {"userAdminAnyDatabase", "backup", "restore", "root"}),
    ("serverStatus", "admin", {"serverStatus": 1}, MONITORS | {"backup"}),
    ("hostInfo", "admin", {"hostInfo": 1}, MONITORS),
    ("getCmdLineOpts", "admin", {"getCmdLineOpts": 1}, MONITORS),
    ("getLog", "admin", {"getLog": "global"}, MONITORS),
    ("getParameter", "admin", {"getParameter": 1, "notablescan": 1},
     MONITORS | {"backup", "restore"}),
    ("setParameter", "admin", {"setParameter": 1, "notablescan": False},
     {"hostManager", "clusterAdmin", "root"}),
    ("fsync", "admin", {"fsync": 1}, {"hostManager", "clusterAdmin", "root"}),
    ("killAllSessions", "admin", {"killAllSessions": []},
     {"hostManager", "clusterAdmin", "root"}),
    ("getClusterParameter", "admin", {"getClusterParameter": "*"},
     {"clusterManager", "clusterAdmin", "root"}),
    ("replSetGetStatus", "admin", {"replSetGetStatus": 1},
     MONITORS | {"clusterManager"}),
    ("listDatabases", "admin", {"listDatabases": 1}, set(ALL)),
    ("whatsmyuri", "admin", {"whatsmyuri": 1}, set(ALL)),
    ("connectionStatus", "admin", {"connectionStatus": 1}, set(ALL)),
]


def test_commands_by_role(rooted):
    srv, root = rooted
    clients = {}
    for role in ALL:
        name = f"u_{role}"
        if role == "none":
            roles = []
        elif role in DB_ROLES:
            roles = [{"role": role, "db": "test"}]
        else:
            roles = [{"role": role, "db": "admin"}]
        root.admin.command("createUser", name, pwd=PW, roles=roles)
        clients[role] = client(srv, username=name, password=PW)
    wrong = []
    for label, db, cmd, allowed in TABLE:
        for role in ALL:
            # the same data for every cell
            root.drop_database("test")
            root.test.c.insert_one({"x": 1})
            root.test.d.insert_one({"x": 1})
            root.test.command("dropUser", "made") if root.test.command(
                "usersInfo", "made")["users"] else None
            msg = refused(clients[role][db].command, cmd)
            if (msg is None) != (role in allowed):
                wrong.append((label, role, "refused" if msg else "allowed", msg))
            elif msg:
                assert msg.startswith(f"not authorized on {db} to execute command {{ "), msg
    for c in clients.values():
        c.close()
    assert not wrong, "\n".join(map(str, wrong))


# ------------------------------------------------------------ on the way


def test_privileges_follow_changes(rooted):
    """A user's roles and privileges are read again after any change:
    granted, revoked, a role redefined, the user dropped."""
    srv, root = rooted
    root.test.c.insert_many([{"i": i} for i in range(10)])
    root.test.command("createRole", "peek", roles=[], privileges=[
        {"resource": {"db": "test", "collection": "c"}, "actions": ["find"]}])
    root.test.command("createUser", "u", pwd=PW, roles=[])
    u = client(srv, username="u", password=PW, authSource="test")
    assert refused(u.test.c.find_one)
    root.test.command("grantRolesToUser", "u", roles=["peek"])
    assert u.test.c.find_one() is not None                 # granted: at once
    assert refused(u.test.d.find_one)                       # only that collection
    assert refused(u.test.c.insert_one, {})
    status = u.test.command("connectionStatus", showPrivileges=True)["authInfo"]
    assert status["authenticatedUserRoles"] == [{"role": "peek", "db": "test"}]
    assert status["authenticatedUserPrivileges"] == [
        {"resource": {"db": "test", "collection": "c"}, "actions": ["find"]}]
    # a cursor's getMore checks again what its find needed
    cur = u.test.c.find(batch_size=2)
    next(cur)
    root.test.command("revokePrivilegesFromRole", "peek", privileges=[
        {"resource": {"db": "test", "collection": "c"}, "actions": ["find"]}])
    with pytest.raises(OperationFailure) as e:
        list(cur)
    assert e.value.code == 13 and "not authorized for getMore with cursor id" in str(e.value)
    assert refused(u.test.c.find_one)
    # inherited through a role that inherits a built-in one
    root.test.command("grantRolesToRole", "peek", roles=["read"])
    assert refused(u.test.d.find_one) is None
    root.test.command("dropUser", "u")
    assert refused(u.test.c.find_one) == "Command find requires authentication"
    u.close()


def test_cursors_belong_to_their_user(rooted):
    srv, root = rooted
    root.test.c.insert_many([{"i": i} for i in range(10)])
    for name in ("a", "b"):
        root.admin.command("createUser", name, pwd=PW, roles=[{"role": "read", "db": "test"}])
    a = client(srv, username="a", password=PW)
    b = client(srv, username="b", password=PW)
    first = a.test.command("find", "c", batchSize=2)
    cid = first["cursor"]["id"]
    with pytest.raises(OperationFailure) as e:
        b.test.command("getMore", cid, collection="c")
    assert e.value.code == 13
    assert e.value.details["errmsg"] == (f"cursor id {cid} was not created by the "
                                         "authenticated user")
    msg = refused(b.test.command, "killCursors", "c", cursors=[cid])
    assert msg.startswith('not authorized on test to execute command { killCursors: "c"')
    # the cursor is untouched, and its owner goes on and kills it
    more = a.test.command("getMore", cid, collection="c", batchSize=2)
    assert len(more["cursor"]["nextBatch"]) == 2
    assert a.test.command("killCursors", "c", cursors=[cid])["cursorsKilled"] == [cid]
    # one that may kill any cursor (hostManager) may kill another's
    root.admin.command("grantRolesToUser", "b", roles=[{"role": "hostManager", "db": "admin"}])
    cid = a.test.command("find", "c", batchSize=2)["cursor"]["id"]
    assert b.test.command("killCursors", "c", cursors=[cid])["cursorsKilled"] == [cid]
    a.close()
    b.close()


def test_listings_show_what_one_may_use(rooted):
    srv, root = rooted
    for db in ("one", "two", "three"):
        root[db].c.insert_one({})
        root[db].other.insert_one({})
    root.admin.command("createUser", "u", pwd=PW, roles=[{"role": "read", "db": "one"}])
    root.admin.command("createRole", "twoc", roles=[], privileges=[
        {"resource": {"db": "two", "collection": "c"}, "actions": ["find"]}])
    root.admin.command("grantRolesToUser", "u", roles=[{"role": "twoc", "db": "admin"}])
    u = client(srv, username="u", password=PW)
    names = [d["name"] for d in u.admin.command("listDatabases")["databases"]]
    assert names == ["one", "two"]
    with pytest.raises(OperationFailure) as e:
        u.admin.command("listDatabases", authorizedDatabases=False)
    assert e.value.code == 13 and "Insufficient permissions to list all databases" in str(e.value)
    assert {d["name"] for d in root.admin.command("listDatabases")["databases"]} >= {
        "one", "two", "three", "admin"}
    # listCollections: the whole database needs listCollections on it;
    # authorizedCollections with nameOnly shows what one may use
    assert refused(u.two.command, "listCollections")
    got = u.two.command("listCollections", nameOnly=True, authorizedCollections=True)
    assert [c["name"] for c in got["cursor"]["firstBatch"]] == ["c"]
    assert refused(u.three.command, "listCollections", nameOnly=True,
                   authorizedCollections=True)
    assert sorted(u.one.list_collection_names()) == ["c", "other"]
    u.close()


def test_user_admin_rules(rooted):
    """Who may change and see which users: one's own password needs
    changeOwnPassword, another's changePassword; granting a role needs
    grantRole on its database."""
    srv, root = rooted
    root.admin.command("createRole", "selfservice", roles=[], privileges=[
        {"resource": {"db": "admin", "collection": ""},
         "actions": ["changeOwnPassword", "changeOwnCustomData"]}])
    root.admin.command("createUser", "me", pwd=PW, roles=["selfservice"])
    root.admin.command("createUser", "other", pwd=PW, roles=[])
    me = client(srv, username="me", password=PW)
    me.admin.command("updateUser", "me", pwd="pw-2", customData={"a": 1})
    assert refused(me.admin.command, "updateUser", "other", pwd="pw-2")
    assert refused(me.admin.command, "updateUser", "me", roles=["root"])
    # one's own user needs nothing to be seen; another needs viewUser
    assert me.admin.command("usersInfo", "me")["users"][0]["customData"] == {"a": 1}
    assert refused(me.admin.command, "usersInfo", "other")
    me.close()
    assert client(srv, username="me", password="pw-2").admin.command("ping")["ok"] == 1.0
    # a user admin of test may create test's users with test's roles only
    root.admin.command("createUser", "ua", pwd=PW, roles=[{"role": "userAdmin", "db": "test"}])
    ua = client(srv, username="ua", password=PW)
    ua.test.command("createUser", "t1", pwd=PW, roles=["readWrite"])
    msg = refused(ua.test.command, "createUser", "t2", pwd=PW,
                  roles=[{"role": "read", "db": "other"}])
    assert msg and 'pwd: "xxx"' in msg and PW not in msg
    assert refused(ua.test.command, "grantRolesToUser", "t1",
                   roles=[{"role": "root", "db": "admin"}])
    assert refused(ua.test.command, "createRole", "r", roles=[], privileges=[
        {"resource": {"cluster": True}, "actions": ["shutdown"]}])
    ua.test.command("createRole", "r", roles=["read"], privileges=[
        {"resource": {"db": "test", "collection": "c"}, "actions": ["insert"]}])
    ua.close()


def test_sessions_belong_to_their_user(rooted):
    srv, root = rooted
    import uuid
    from bson import Binary
    root.admin.command("createUser", "a", pwd=PW, roles=[{"role": "read", "db": "test"}])
    a = client(srv, username="a", password=PW)
    lsid = {"id": Binary(uuid.uuid4().bytes, 4), "uid": Binary(b"\x01" * 32, 0)}
    # (the driver puts its own lsid on a command: another's goes in the
    # sessions commands' arguments)
    with pytest.raises(OperationFailure) as e:
        a.admin.command("refreshSessions", [lsid])
    assert e.value.code == 13 and "Unauthorized to set user digest in LogicalSessionId" in str(
        e.value)
    # nor may root: impersonate is __system's alone
    assert refused(root.admin.command, "refreshSessions", [lsid])
    # the caller's own sessions are its user's
    a.test.c.find_one()
    import hashlib
    mine = hashlib.sha256(b"a@admin").digest()
    got = list(a.admin.aggregate([{"$listLocalSessions": {}}]))
    assert got and all(s["_id"]["uid"] == mine for s in got)
    a.close()


def test_users_info_privileges_and_fragments(rooted):
    """usersInfo's showPrivileges and filter, rolesInfo's asUserFragment:
    what a user holds through its roles, resolved as access control
    resolves it."""
    srv, root = rooted
    root.test.command("createRole", "peek", roles=["read"], privileges=[
        {"resource": {"db": "test", "collection": "c"}, "actions": ["insert"]}])
    root.test.command("createUser", "u", pwd=PW, roles=["peek"], mechanisms=["SCRAM-SHA-256"])
    got = root.test.command("usersInfo", "u", showPrivileges=True)["users"]
    assert len(got) == 1
    u = got[0]
    assert list(u)[-3:] == ["inheritedRoles", "inheritedPrivileges",
                            "inheritedAuthenticationRestrictions"]
    assert u["inheritedRoles"] == [{"role": "peek", "db": "test"}, {"role": "read", "db": "test"}]
    assert {"resource": {"db": "test", "collection": "c"}, "actions": ["insert"]} in u[
        "inheritedPrivileges"]
    assert {"resource": {"db": "test", "collection": "system.js"},
            "actions": ["changeStream", "collStats", "dbHash", "dbStats", "find", "killCursors",
                        "listCollections", "listIndexes", "listSearchIndexes",
                        "planCacheRead"]} in u["inheritedPrivileges"]
    assert u["inheritedAuthenticationRestrictions"] == []
    got = root.test.command("usersInfo", "u", showAuthenticationRestrictions=True)["users"][0]
    assert got["authenticationRestrictions"] == [] and "inheritedPrivileges" not in got
    # privileges only for named users, and not with a filter (mongod's rule)
    for kw in ({"usersInfo": 1, "showPrivileges": True},
               {"usersInfo": {"forAllDBs": True}, "showPrivileges": True},
               {"usersInfo": "u", "showPrivileges": True, "filter": {}}):
        with pytest.raises(OperationFailure) as e:
            root.test.command(kw)
        assert e.value.code == 20, kw
    # a filter is a $match on the documents as shown, mechanisms included
    root.test.command("createUser", "v", pwd=PW, roles=[], mechanisms=["SCRAM-SHA-1"])
    names = lambda r: [x["user"] for x in r["users"]]  # noqa: E731
    assert names(root.test.command("usersInfo", 1, filter={"mechanisms": "SCRAM-SHA-1"})) == ["v"]
    assert names(root.admin.command("usersInfo", {"forAllDBs": True},
                                    filter={"roles.role": "peek"})) == ["u"]
    with pytest.raises(OperationFailure) as e:
        root.test.command("usersInfo", 1, filter=5)
    assert e.value.code == 14
    # asUserFragment: as a user holding the roles
    frag = root.test.command("rolesInfo", ["peek", {"role": "readWrite", "db": "other"}],
                             showPrivileges="asUserFragment")["userFragment"]
    assert frag["roles"] == [{"role": "peek", "db": "test"}, {"role": "readWrite", "db": "other"}]
    assert {"role": "read", "db": "test"} in frag["inheritedRoles"]
    assert {"resource": {"db": "other", "collection": ""}} in [
        {"resource": p["resource"]} for p in frag["inheritedPrivileges"]]
    with pytest.raises(OperationFailure) as e:
        root.test.command("rolesInfo", 1, showPrivileges="asUserFragment")
    assert e.value.code == 20
    with pytest.raises(OperationFailure) as e:
        root.test.command("rolesInfo", "nope", showPrivileges="asUserFragment")
    assert e.value.code == 31
