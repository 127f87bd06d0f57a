"""Authentication (issue 50, first part): SCRAM-SHA-256 and SCRAM-SHA-1
over saslStart/saslContinue and hello's speculativeAuthenticate, as pymongo
speaks them (pymongo's client is the independent implementation the
server's side is checked against), the users in admin.system.users as
mongod 7.0 stores them, and the user-management commands.

Access control (--auth) is not built yet: these commands and
authentication work on a server without it, as on mongod.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import urllib.parse

import pymongo
import pytest
from bson import Binary
from pymongo.errors import OperationFailure


def connect(served, user, pwd, source="admin", **kw):
    q = urllib.parse.quote_plus
    host = served.uri.split("://", 1)[1].split("/", 1)[0]
    return pymongo.MongoClient(f"mongodb://{q(user)}:{q(pwd)}@{host}/?authSource={source}",
                               serverSelectionTimeoutMS=5000, **kw)


def status(client, db="admin"):
    return client[db].command("connectionStatus")["authInfo"]


@pytest.fixture
def admin(served):
    c = served.client()
    yield c
    c.close()


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-1", None])
def test_scram_with_pymongo(served, admin, mech):
    admin.test.command("createUser", "alice", pwd="s3cret!", roles=["readWrite"])
    kw = {"authMechanism": mech} if mech else {}
    c = connect(served, "alice", "s3cret!", "test", **kw)
    try:
        assert status(c, "test") == {
            "authenticatedUsers": [{"user": "alice", "db": "test"}],
            "authenticatedUserRoles": [{"role": "readWrite", "db": "test"}]}
        c.test.k.insert_one({"x": 1})
        assert c.test.k.count_documents({}) == 1
    finally:
        c.close()


def test_wrong_password_and_unknown_user_are_the_same_refusal(served, admin):
    admin.admin.command("createUser", "bob", pwd="right", roles=["root"])
    for user, pwd, mech in (("bob", "wrong", "SCRAM-SHA-256"), ("bob", "wrong", "SCRAM-SHA-1"),
                            ("nobody", "x", "SCRAM-SHA-256"), ("nobody", "x", "SCRAM-SHA-1")):
        c = connect(served, user, pwd, authMechanism=mech)
        with pytest.raises(OperationFailure) as e:
            c.admin.command("ping")
        assert e.value.code == 18 and e.value.details["errmsg"] == "Authentication failed."
        assert e.value.details["codeName"] == "AuthenticationFailed"
        c.close()
    # the reason is in the log, for the operator
    log = "\n".join(admin.admin.command("getLog", "global")["log"])
    assert "Could not find user" in log and "storedKey mismatch" in log


def test_saslprep_applies_to_scram_sha_256_only(served, admin):
    # U+00AD (soft hyphen) maps to nothing; U+2168 (Roman numeral nine) is
    # "IX" after NFKC
    admin.admin.command("createUser", "u1", pwd="I\u00adX\u2168", roles=[])
    c = connect(served, "u1", "IXIX", authMechanism="SCRAM-SHA-256")
    assert status(c)["authenticatedUsers"] == [{"user": "u1", "db": "admin"}]
    c.close()
    c = connect(served, "u1", "I\u00adX\u2168", authMechanism="SCRAM-SHA-1")
    assert status(c)["authenticatedUsers"] == [{"user": "u1", "db": "admin"}]
    c.close()
    # a prohibited character (U+0007) is refused for SHA-256
    with pytest.raises(OperationFailure) as e:
        admin.admin.command("createUser", "u2", pwd="a\u0007b", roles=[])
    assert e.value.code == 50693 and "Failed normalizing string" in str(e.value)


def test_stored_credentials_as_mongod_keeps_them(served, admin):
    admin.test.command("createUser", "carol", pwd="pencil", roles=["read"],
                       customData={"team": 7})
    doc = admin.admin.system.users.find_one({"_id": "test.carol"})
    assert list(doc) == ["_id", "userId", "user", "db", "credentials", "customData", "roles"]
    assert isinstance(doc["userId"], Binary) and doc["userId"].subtype == 4
    assert (doc["user"], doc["db"], doc["customData"]) == ("carol", "test", {"team": 7})
    assert doc["roles"] == [{"role": "read", "db": "test"}]
    creds = doc["credentials"]
    assert list(creds) == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
    for mech, it, salt_len, h in (("SCRAM-SHA-1", 10000, 16, hashlib.sha1),
                                  ("SCRAM-SHA-256", 15000, 28, hashlib.sha256)):
        c = creds[mech]
        assert list(c) == ["iterationCount", "salt", "storedKey", "serverKey"]
        assert c["iterationCount"] == it
        salt = base64.b64decode(c["salt"])
        assert len(salt) == salt_len
        # the keys are the RFC 5802 ones, from mongod's password input
        pwd = (hashlib.md5(b"carol:mongo:pencil").hexdigest() if mech == "SCRAM-SHA-1"
               else "pencil").encode()
        salted = hashlib.pbkdf2_hmac(h().name, pwd, salt, it)
        client_key = hmac.new(salted, b"Client Key", h).digest()
        assert base64.b64decode(c["storedKey"]) == h(client_key).digest()
        assert base64.b64decode(c["serverKey"]) == hmac.new(salted, b"Server Key", h).digest()
    ix = admin.admin.system.users.index_information()
    assert ix["user_1_db_1"]["key"] == [("user", 1), ("db", 1)] and ix["user_1_db_1"]["unique"]


def test_the_password_is_never_stored(served, admin, tmp_path):
    secret = "Tr0ub4dor&3-" + os.urandom(6).hex()
    # profiled and logged as slow: both show "xxx", as mongod's redaction
    admin.test.command("profile", 2, slowms=-1)
    admin.test.command("createUser", "dave", pwd=secret, roles=[])
    admin.test.command("updateUser", "dave", pwd=secret + "2")
    entries = [p["command"] for p in admin.test.system.profile.find()
               if "createUser" in p["command"] or "updateUser" in p["command"]]
    assert [e["pwd"] for e in entries] == ["xxx", "xxx"]
    c = connect(served, "dave", secret + "2", "test")
    c.test.command("ping")
    c.close()
    log = "\n".join(admin.admin.command("getLog", "global")["log"])
    assert secret not in log and '"pwd":"xxx"' in log.replace(" ", "")
    admin.admin.command("fsync")
    for root, _, files in os.walk(served.dbpath):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                data = fh.read()
            assert secret.encode() not in data, f


def test_mechanisms_and_sasl_supported_mechs(served, admin):
    admin.admin.command("createUser", "old", pwd="p", roles=[], mechanisms=["SCRAM-SHA-1"])
    hello = admin.admin.command("hello", saslSupportedMechs="admin.old")
    assert hello["saslSupportedMechs"] == ["SCRAM-SHA-1"]
    assert "saslSupportedMechs" not in admin.admin.command("hello",
                                                           saslSupportedMechs="admin.nobody")
    with pytest.raises(OperationFailure) as e:
        admin.admin.command("hello", saslSupportedMechs="nodot")
    assert e.value.code == 2
    # pymongo picks SCRAM-SHA-1 from saslSupportedMechs by itself
    c = connect(served, "old", "p")
    assert status(c)["authenticatedUsers"] == [{"user": "old", "db": "admin"}]
    c.close()
    # and SCRAM-SHA-256 asked for is refused
    c = connect(served, "old", "p", authMechanism="SCRAM-SHA-256")
    with pytest.raises(OperationFailure) as e:
        c.admin.command("ping")
    assert e.value.code == 18
    c.close()


def test_sasl_commands_by_hand(served, admin):
    admin.admin.command("createUser", "eve", pwd="pw", roles=[])
    with pytest.raises(OperationFailure) as e:
        admin.admin.command("saslStart", 1, mechanism="PLAIN", payload=Binary(b"x"))
    assert e.value.code == 334 and "PLAIN which is not enabled" in str(e.value)
    with pytest.raises(OperationFailure) as e:  # no conversation
        admin.admin.command("saslContinue", 1, conversationId=1, payload=Binary(b""))
    assert e.value.code == 17 and "No SASL session state found" in str(e.value)
    for payload in (b"p=tls-unique,,n=eve,r=abcdefgh", b"n,,n=eve", b"x,,n=eve,r=abcd",
                    b"n,,m=ext,n=eve,r=abcd"):
        with pytest.raises(OperationFailure) as e:
            admin.admin.command("saslStart", 1, mechanism="SCRAM-SHA-256",
                                payload=Binary(payload))
        assert e.value.code == 18, payload
    # a base64 string payload gets one back
    r = admin.admin.command("saslStart", 1, mechanism="SCRAM-SHA-256",
                            payload=base64.b64encode(b"n,,n=eve,r=abcdefghijkl").decode())
    assert r["conversationId"] == 1 and r["done"] is False and isinstance(r["payload"], str)
    first = base64.b64decode(r["payload"]).decode()
    assert first.startswith("r=abcdefghijkl") and ",s=" in first and first.endswith(",i=15000")
    assert len(first.split(",")[0]) == len("r=abcdefghijkl") + 32
    with pytest.raises(OperationFailure) as e:  # a wrong id ends the conversation
        admin.admin.command("saslContinue", 1, conversationId=2, payload=Binary(b""))
    assert e.value.code == 17 and "Mismatched conversation id" in str(e.value)


def test_one_user_per_connection_and_logout(served, admin):
    admin.admin.command("createUser", "a1", pwd="p", roles=[])
    admin.admin.command("createUser", "a2", pwd="p", roles=[])
    admin.test.command("createUser", "t1", pwd="p", roles=["read"])
    c = connect(served, "a1", "p", maxPoolSize=1)
    assert status(c)["authenticatedUsers"] == [{"user": "a1", "db": "admin"}]
    c.test.command("logout")  # another database: nothing
    assert status(c)["authenticatedUsers"] == [{"user": "a1", "db": "admin"}]
    c.admin.command("logout")
    assert status(c) == {"authenticatedUsers": [], "authenticatedUserRoles": []}
    c.close()


def test_user_management_commands(admin):
    db = admin.test
    db.command("createUser", "u", pwd="p", roles=["read", {"role": "dbAdmin", "db": "test"}])
    with pytest.raises(OperationFailure) as e:
        db.command("createUser", "u", pwd="p", roles=[])
    assert e.value.code == 51003 and 'User "u@test" already exists' in str(e.value)
    cases = [
        ({"pwd": "p"}, 40414, "BSON field 'createUser.roles' is missing"),
        ({"roles": []}, 2, "Must provide a 'pwd' field"),
        ({"pwd": "p", "roles": ["nope"]}, 31, "Could not find role: nope@test"),
        ({"pwd": "p", "roles": ["nope", "nah"]}, 31, "Could not find roles: nope@test, nah@test"),
        ({"pwd": "p", "roles": [{"role": "root", "db": "test"}]}, 31, "root@test"),
        ({"pwd": "p", "roles": [], "mechanisms": []}, 2, "mechanisms field must not be empty"),
        ({"pwd": "p", "roles": [], "mechanisms": ["MD5"]}, 2, "Unknown auth mechanism 'MD5'"),
        ({"pwd": "p", "roles": [], "digestPassword": False}, 2,
         "Use of SCRAM-SHA-256 requires undigested passwords"),
        ({"pwd": "p", "roles": [], "bogus": 1}, 40415, "BSON field 'createUser.bogus'"),
    ]
    for extra, code, msg in cases:
        with pytest.raises(OperationFailure) as e:
            db.command("createUser", "v", **extra)
        assert e.value.code == code and msg in str(e.value), (extra, e.value.details)
    with pytest.raises(OperationFailure) as e:
        admin.local.command("createUser", "v", pwd="p", roles=[])
    assert e.value.code == 2 and "local database" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        db.command("createUser", "", pwd="p", roles=[])
    assert e.value.code == 2 and "non-empty" in str(e.value)

    info = db.command("usersInfo", "u")["users"]
    assert len(info) == 1 and list(info[0]) == ["_id", "userId", "user", "db", "roles",
                                                "mechanisms"]
    assert info[0]["roles"] == [{"role": "read", "db": "test"}, {"role": "dbAdmin", "db": "test"}]
    assert info[0]["mechanisms"] == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
    shown = db.command("usersInfo", {"user": "u", "db": "test"}, showCredentials=True)["users"]
    assert "credentials" in shown[0] and list(shown[0])[4] == "credentials"

    db.command("grantRolesToUser", "u", roles=["readWrite", "read"])
    assert db.command("usersInfo", "u")["users"][0]["roles"] == [
        {"role": "read", "db": "test"}, {"role": "dbAdmin", "db": "test"},
        {"role": "readWrite", "db": "test"}]
    db.command("revokeRolesFromUser", "u", roles=["read", {"role": "dbAdmin", "db": "test"}])
    assert db.command("usersInfo", "u")["users"][0]["roles"] == [
        {"role": "readWrite", "db": "test"}]
    with pytest.raises(OperationFailure) as e:
        db.command("grantRolesToUser", "u", roles=[])
    assert e.value.code == 2 and 'requires a non-empty "roles" array' in str(e.value)
    with pytest.raises(OperationFailure) as e:
        db.command("grantRolesToUser", "ghost", roles=["read"])
    assert e.value.code == 11

    db.command("updateUser", "u", customData={"k": 1}, mechanisms=["SCRAM-SHA-256"])
    got = db.command("usersInfo", "u")["users"][0]
    assert got["customData"] == {"k": 1} and got["mechanisms"] == ["SCRAM-SHA-256"]
    with pytest.raises(OperationFailure) as e:
        db.command("updateUser", "u", mechanisms=["SCRAM-SHA-1"])
    assert e.value.code == 2 and "subset of previously set mechanisms" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        db.command("updateUser", "u")
    assert e.value.code == 2 and "Must specify at least one field" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        db.command("updateUser", "ghost", pwd="x")
    assert e.value.code == 11 and "User ghost@test not found" in str(e.value)

    db.command("createUser", "w", pwd="p", roles=[])
    admin.other.command("createUser", "w", pwd="p", roles=[])
    assert [u["user"] for u in db.command("usersInfo", 1)["users"]] == ["u", "w"]
    assert [(u["user"], u["db"]) for u in db.command("usersInfo", {"forAllDBs": True})["users"]] \
        == [("u", "test"), ("w", "other"), ("w", "test")]
    assert [u["db"] for u in db.command("usersInfo", ["w", {"user": "w", "db": "other"}])
            ["users"]] == ["other", "test"]
    assert db.command("usersInfo", [])["users"] == []
    db.command("dropUser", "w")
    with pytest.raises(OperationFailure) as e:
        db.command("dropUser", "w")
    assert e.value.code == 11 and "User 'w@test' not found" in str(e.value)
    assert db.command("dropAllUsersFromDatabase")["n"] == 1
    assert db.command("usersInfo", 1)["users"] == []
    assert [u["db"] for u in admin.other.command("usersInfo", 1)["users"]] == ["other"]


def test_password_change_takes_effect(served, admin):
    admin.admin.command("createUser", "f", pwd="one", roles=[])
    admin.admin.command("updateUser", "f", pwd="two")
    bad = connect(served, "f", "one")
    with pytest.raises(OperationFailure):
        bad.admin.command("ping")
    bad.close()
    good = connect(served, "f", "two")
    assert status(good)["authenticatedUsers"] == [{"user": "f", "db": "admin"}]
    good.close()


def test_startup_warning_without_access_control(admin):
    lines = admin.admin.command("getLog", "startupWarnings")["log"]
    assert any('"id":22120' in ln and "Access control is not enabled for the database" in ln
               for ln in lines), lines


def test_review_fixes(served, admin):
    """Cases a review found: a long SASLprep expansion, digestPassword false
    for SCRAM-SHA-1, names that do not fit an _id or hold a NUL, a stored
    role entry of the wrong type."""
    # U+FDFA becomes 18 characters under NFKC
    admin.admin.command("createUser", "wide", pwd="\ufdfa" * 3, roles=[])
    c = connect(served, "wide", "\ufdfa" * 3, authMechanism="SCRAM-SHA-256")
    assert status(c)["authenticatedUsers"] == [{"user": "wide", "db": "admin"}]
    c.close()
    digest = hashlib.md5(b"dig:mongo:pw").hexdigest()
    with pytest.raises(OperationFailure) as e:
        admin.admin.command("createUser", "dig", pwd=digest, roles=[], digestPassword=False)
    assert e.value.code == 2 and "requires undigested passwords" in str(e.value)
    admin.admin.command("createUser", "dig", pwd=digest, roles=[], digestPassword=False,
                        mechanisms=["SCRAM-SHA-1"])
    c = connect(served, "dig", "pw", authMechanism="SCRAM-SHA-1")
    assert status(c)["authenticatedUsers"] == [{"user": "dig", "db": "admin"}]
    c.close()
    with pytest.raises(OperationFailure) as e:
        admin.test.command("createUser", "x" * 600, pwd="p", roles=[])
    assert e.value.code == 2 and "too long" in str(e.value)
    admin.test.command("createUser", "alice", pwd="p", roles=[])
    for cmd in ({"dropUser": "alice\x00x"},
                {"grantRolesToUser": "alice\x00x", "roles": ["read"]}):
        with pytest.raises(OperationFailure) as e:
            admin.test.command(cmd)
        assert e.value.code == 2 and "NULL characters" in str(e.value)
    assert admin.test.command("usersInfo", "alice")["users"][0]["roles"] == []
    # a client may write system.users itself; a role entry of the wrong
    # type is dropped by the next change, not a crash
    admin.admin.system.users.update_one({"_id": "test.alice"},
                                        {"$set": {"roles": [{"role": 1, "db": "test"}]}})
    admin.test.command("grantRolesToUser", "alice", roles=["read"])
    assert admin.test.command("usersInfo", "alice")["users"][0]["roles"] == [
        {"role": "read", "db": "test"}]


def test_user_defined_roles(admin):
    db = admin.test
    priv = [{"resource": {"db": "test", "collection": "c"}, "actions": ["insert", "find"]},
            {"resource": {"db": "test", "collection": "c"}, "actions": ["find", "update"]}]
    db.command("createRole", "writer", privileges=priv, roles=["read"])
    doc = admin.admin.system.roles.find_one({"_id": "test.writer"})
    assert doc == {"_id": "test.writer", "role": "writer", "db": "test",
                   "privileges": [{"resource": {"db": "test", "collection": "c"},
                                   "actions": ["find", "insert", "update"]}],
                   "roles": [{"role": "read", "db": "test"}]}
    ix = admin.admin.system.roles.index_information()
    assert ix["role_1_db_1"]["unique"]
    with pytest.raises(OperationFailure) as e:
        db.command("createRole", "writer", privileges=[], roles=[])
    assert e.value.code == 51002 and 'Role "writer@test" already exists' in str(e.value)
    cases = [
        ({"privileges": [], "roles": []}, "read", 2, "same name as a built-in role"),
        ({"privileges": [{"resource": {"cluster": True}, "actions": ["inprog"]}], "roles": []},
         "r1", 49, "cannot be granted privileges that target other databases or the cluster"),
        ({"privileges": [{"resource": {"db": "other", "collection": ""}, "actions": ["find"]}],
          "roles": []}, "r1", 49, "target other databases"),
        ({"privileges": [{"resource": {"db": "test", "collection": ""},
                          "actions": ["find", "fly", "swim"]}], "roles": []},
         "r1", 2, "Unknown action types in privilege set: 'fly', 'swim'"),
        ({"privileges": [], "roles": [{"role": "read", "db": "other"}]}, "r1", 49,
         "cannot be granted roles from other databases"),
        ({"privileges": [], "roles": ["nope"]}, "r1", 31, "Could not find role: nope@test"),
        ({"privileges": []}, "r1", 40414, "createRole.roles"),
    ]
    for extra, name, code, msg in cases:
        with pytest.raises(OperationFailure) as e:
            db.command("createRole", name, **extra)
        assert e.value.code == code and msg in str(e.value), (extra, e.value.details)
    # a user may hold it; rolesInfo shows it with what it inherits
    db.command("createUser", "w", pwd="p", roles=["writer"])
    db.command("createRole", "boss", privileges=[], roles=["writer"])
    info = db.command("rolesInfo", "boss")["roles"]
    assert info == [{"_id": "test.boss", "role": "boss", "db": "test",
                     "roles": [{"role": "writer", "db": "test"}], "isBuiltin": False,
                     "inheritedRoles": [{"role": "writer", "db": "test"},
                                        {"role": "read", "db": "test"}]}]
    # its inherited privileges take in the built-in read's, as mongod 7.0
    # lists them (actions in mongod's order, not alphabetical)
    got = db.command("rolesInfo", "boss", showPrivileges=True)["roles"][0]
    read_actions = ["changeStream", "collStats", "dbHash", "dbStats", "find", "killCursors",
                    "listCollections", "listIndexes", "listSearchIndexes", "planCacheRead"]
    assert got["privileges"] == []
    assert {"resource": {"db": "test", "collection": "system.js"},
            "actions": read_actions} in got["inheritedPrivileges"]
    with pytest.raises(OperationFailure) as e:  # a cycle
        db.command("grantRolesToRole", "writer", roles=["boss"])
    assert e.value.code == 49 and "cycle" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        db.command("grantRolesToRole", "writer", roles=["writer"])
    assert e.value.code == 49 and "to itself" in str(e.value)
    db.command("grantPrivilegesToRole", "writer", privileges=[
        {"resource": {"db": "test", "collection": "d"}, "actions": ["remove"]}])
    db.command("revokePrivilegesFromRole", "writer", privileges=[
        {"resource": {"db": "test", "collection": "c"}, "actions": ["insert"]}])
    db.command("revokeRolesFromRole", "writer", roles=["read"])
    assert db.command("rolesInfo", "writer")["roles"][0]["roles"] == []
    got = db.command("rolesInfo", "writer", showPrivileges=True)["roles"][0]
    assert got["privileges"] == got["inheritedPrivileges"] == [
        {"resource": {"db": "test", "collection": "c"}, "actions": ["find", "update"]},
        {"resource": {"db": "test", "collection": "d"}, "actions": ["remove"]}]
    db.command("updateRole", "writer", roles=["readWrite"])
    assert db.command("rolesInfo", "writer")["roles"][0]["roles"] == [
        {"role": "readWrite", "db": "test"}]
    builtin = db.command("rolesInfo", "read")["roles"]
    assert builtin == [{"role": "read", "db": "test", "roles": [], "isBuiltin": True,
                        "inheritedRoles": []}]
    assert [r["role"] for r in db.command("rolesInfo", 1)["roles"]] == ["boss", "writer"]
    with pytest.raises(OperationFailure) as e:
        db.command("dropRole", "read")
    assert e.value.code == 49
    # dropping a role takes it from its holders
    db.command("dropRole", "writer")
    assert db.command("usersInfo", "w")["users"][0]["roles"] == []
    assert db.command("rolesInfo", "boss")["roles"][0]["roles"] == []
    with pytest.raises(OperationFailure) as e:
        db.command("dropRole", "writer")
    assert e.value.code == 31
    assert db.command("dropAllRolesFromDatabase")["n"] == 1
    assert db.command("rolesInfo", 1)["roles"] == []
