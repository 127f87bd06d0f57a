"""The database profiler and the slow-operation log, as mongod 7.0's: the
`profile` command (levels 0/1/2, slowms, sampleRate, filter), entries in
<db>.system.profile in mongod's shape, the collection's rules (no writes by
clients, no drop while profiling, bounded at 1 MiB), and "Slow query"
lines (id 51803) in the log.
"""
from __future__ import annotations

import json

import pymongo
import pytest
from bson.int64 import Int64
from pymongo.errors import OperationFailure

NOTE = ("When a filter expression is set, slowms and sampleRate are not used for profiling "
        "and slow-query log lines.")


@pytest.fixture
def db(server):
    c = pymongo.MongoClient(server.uri, appname="proftest", serverSelectionTimeoutMS=5000)
    yield c.test
    c.close()


def entries(db, **filt):
    return list(db.system.profile.find(filt))


def ops(db):
    return [(e["op"], e["ns"]) for e in entries(db)]


# ------------------------------------------------------------ the command

def test_profile_command_reads_and_sets(db):
    assert db.command({"profile": -1}) == {"was": 0, "slowms": 100, "sampleRate": 1.0, "ok": 1.0}
    assert db.command({"profile": 1, "slowms": 250, "sampleRate": 0.5})["was"] == 0
    r = db.command({"profile": -1})
    assert (r["was"], r["slowms"], r["sampleRate"]) == (1, 250, 0.5)
    # an out-of-range level only reads, as mongod's
    assert db.command({"profile": 7})["was"] == 1
    assert db.command({"profile": -1})["was"] == 1
    # levels are per database; slowms and sampleRate the server's
    other = db.client.other
    r = other.command({"profile": -1})
    assert (r["was"], r["slowms"], r["sampleRate"]) == (0, 250, 0.5)
    db.command({"profile": 0, "slowms": 100, "sampleRate": 1.0})


def test_profile_command_errors(db):
    with pytest.raises(OperationFailure) as ei:
        db.command({"profile": 1, "sampleRate": 1.5})
    assert (ei.value.code, ei.value.details["errmsg"]) == (
        2, "'sampleRate' must be between 0.0 and 1.0 inclusive")
    with pytest.raises(OperationFailure) as ei:
        db.command({"profile": 1, "filter": {"nosuchfield": 1}})
    assert ei.value.code == 4910200
    with pytest.raises(OperationFailure) as ei:
        db.command({"profile": 1, "bogus": 1})
    assert ei.value.code == 40415
    # nothing changed
    assert db.command({"profile": -1})["was"] == 0


def test_profile_filter_set_shown_and_unset(db):
    r = db.command({"profile": 1, "filter": {"op": "query", "millis": {"$gte": 0}}})
    assert r["was"] == 0 and r["note"] == NOTE and "filter" not in r
    r = db.command({"profile": -1})
    assert r["filter"] == {"op": "query", "millis": {"$gte": 0}} and r["note"] == NOTE
    r = db.command({"profile": 0, "filter": "unset"})
    assert r["filter"] == {"op": "query", "millis": {"$gte": 0}}
    r = db.command({"profile": -1})
    assert "filter" not in r and "note" not in r


def test_setting_a_level_creates_system_profile(db):
    db.command({"profile": 2})
    info = db.command("listCollections", filter={"name": "system.profile"})["cursor"]["firstBatch"]
    assert len(info) == 1
    assert info[0]["options"] == {"capped": True, "size": 1048576}
    assert "idIndex" not in info[0]
    assert list(db.system.profile.list_indexes()) == []
    db.command({"profile": 0})


# ------------------------------------------------------------- the entries

def test_level_2_records_each_operation_in_mongods_shape(db):
    db.c.insert_many([{"a": i} for i in range(10)])
    db.c.create_index("a")
    db.command({"profile": 2})
    db.c.find_one({"a": 3})
    list(db.c.find({"a": {"$gt": 2}}).sort("a", 1).batch_size(2).limit(5))
    db.c.insert_one({"x": 1})
    db.c.update_one({"a": 4}, {"$set": {"b": 1}})
    db.c.delete_one({"a": 5})
    db.c.find_one_and_update({"a": 1}, {"$set": {"q": 1}})
    db.c.count_documents({"a": {"$lt": 5}})
    db.c.distinct("a", {"a": {"$lt": 3}})
    db.command({"profile": 0})
    got = entries(db)
    assert [e["op"] for e in got] == ["query", "query", "getmore", "getmore", "insert", "update",
                                      "remove", "command", "command", "command", "command"]
    find = got[0]
    assert find["ns"] == "test.c" and find["command"]["find"] == "c"
    assert find["command"]["filter"] == {"a": 3}
    assert (find["keysExamined"], find["docsExamined"], find["nreturned"]) == (1, 1, 1)
    assert find["planSummary"] == "IXSCAN { a: 1 }" and find["cursorExhausted"] is True
    assert find["appName"] == "proftest" and find["client"] == "127.0.0.1"
    assert find["user"] == "" and find["allUsers"] == [] and find["protocol"] == "op_msg"
    for k in ("millis", "ts", "numYield", "responseLength"):
        assert k in find, k
    # the find that left a cursor, then its getMores
    q, g1, g2 = got[1], got[2], got[3]
    assert q["cursorid"] == g1["cursorid"] == g2["cursorid"] and q["nreturned"] == 2
    assert "cursorExhausted" not in q and g2["cursorExhausted"] is True
    assert g1["originatingCommand"]["find"] == "c" and g1["command"]["getMore"] == q["cursorid"]
    assert [g1["nreturned"], g2["nreturned"]] == [2, 1]
    assert g1["planSummary"] == "IXSCAN { a: 1 }" and g1["keysExamined"] >= 2
    ins = got[4]
    assert (ins["ninserted"], ins["keysInserted"]) == (1, 2)   # _id_ and a_1 (a null key)
    upd = got[5]
    assert upd["command"] == {"q": {"a": 4}, "u": {"$set": {"b": 1}}, "multi": False,
                              "upsert": False}
    assert (upd["nMatched"], upd["nModified"], upd["nUpserted"]) == (1, 1, 0)
    assert (upd["keysInserted"], upd["keysDeleted"], upd["keysExamined"]) == (0, 0, 1)
    assert "protocol" not in upd and "responseLength" not in upd   # a statement, not a command
    rem = got[6]
    assert rem["command"] == {"q": {"a": 5}, "limit": 1}
    assert (rem["ndeleted"], rem["keysDeleted"]) == (1, 2)
    fam = got[7]
    assert fam["command"]["findAndModify"] == "c" and (fam["nMatched"], fam["nModified"]) == (1, 1)
    count = got[8]
    assert count["command"]["aggregate"] == "c" and count["planSummary"] == "COUNT_SCAN { a: 1 }"
    assert count["keysExamined"] >= 4 and count["docsExamined"] == 0
    distinct = got[9]
    assert distinct["command"]["distinct"] == "c" and distinct["keysExamined"] >= 3
    # {profile: 0} itself ran at level 2
    assert got[10]["command"]["profile"] == 0 and got[10]["ns"] == "test.$cmd"


def test_update_with_several_statements_is_one_entry_each(db):
    db.c.insert_many([{"_id": i, "a": i} for i in range(4)])
    db.command({"profile": 2})
    db.command({"update": "c", "updates": [
        {"q": {"_id": 0}, "u": {"$set": {"z": 1}}},
        {"q": {"a": {"$gte": 1}}, "u": {"$inc": {"z": 1}}, "multi": True},
        {"q": {"_id": 9}, "u": {"$set": {"z": 1}}, "upsert": True}]})
    db.command({"profile": 0})
    upd = entries(db, op="update")
    assert len(upd) == 3 and not entries(db, **{"command.update": "c"})
    assert [(e["nMatched"], e["nModified"], e["nUpserted"]) for e in upd] == [
        (1, 1, 0), (3, 3, 0), (0, 0, 1)]
    assert upd[1]["command"]["multi"] is True and upd[2]["command"]["upsert"] is True


def test_a_failed_operation_is_recorded_with_its_error(db):
    db.command({"profile": 2})
    with pytest.raises(OperationFailure):
        db.c.find_one({"$bogus": 1})
    db.command({"profile": 0})
    e = entries(db, op="query")[0]
    assert (e["ok"], e["errCode"], e["errName"]) == (0.0, 2, "BadValue")
    assert e["errMsg"] == "unknown top level operator: $bogus"


def test_level_1_records_only_the_slow(db):
    db.c.insert_many([{"a": i} for i in range(5)])
    db.command({"profile": 1, "slowms": 10_000})
    db.c.find_one({"a": 1})
    assert entries(db) == []
    db.command({"profile": 1, "slowms": -1})          # every operation is slower than -1 ms
    db.c.find_one({"a": 2})
    db.command({"profile": 0, "slowms": 100})
    assert [e["command"].get("filter") for e in entries(db, op="query")] == [{"a": 2}]


def test_sample_rate_zero_records_none_at_level_1(db):
    db.command({"profile": 1, "slowms": -1, "sampleRate": 0.0})
    for i in range(20):
        db.c.find_one({"a": i})
    db.command({"profile": 0, "slowms": 100, "sampleRate": 1.0})
    assert entries(db, op="query") == []


def test_filter_chooses_what_level_1_records(db):
    db.c.insert_many([{"a": i} for i in range(5)])
    db.command({"profile": 1, "filter": {"op": "query", "command.filter.a": {"$gte": 3}}})
    for i in range(5):
        db.c.find_one({"a": i})
    db.c.insert_one({"a": 9})
    db.command({"profile": 0, "filter": "unset"})
    assert [e["command"]["filter"]["a"] for e in entries(db)] == [3, 4]


def test_a_query_counter_as_odms_build_it(db):
    """mongoengine's query_counter: profile 0, drop system.profile, profile 2,
    run, count the entries (minus its own counting queries)."""
    db.c.insert_many([{"a": i} for i in range(3)])
    was = db.command({"profile": 0})["was"]
    db.system.profile.drop()
    db.command({"profile": 2})
    ignored = {"ns": {"$ne": "test.system.indexes"}, "op": {"$ne": "killcursors"},
               "command.killCursors": {"$exists": False}}
    assert db.system.profile.count_documents(ignored) == 0
    db.c.find_one({"a": 1})
    list(db.c.find({}))
    db.c.insert_one({"a": 7})
    # the first count itself was recorded: 1 + the three above
    assert db.system.profile.count_documents(ignored) - 1 == 3
    db.command({"profile": was})


def test_profiled_queries_on_system_profile_are_recorded_too(db):
    db.command({"profile": 2})
    list(db.system.profile.find())
    db.command({"profile": 0})
    assert entries(db, ns="test.system.profile")[0]["op"] == "query"


# -------------------------------------------------- system.profile's rules

@pytest.mark.parametrize("write", [
    lambda coll: coll.insert_one({"a": 1}),
    lambda coll: coll.update_one({}, {"$set": {"a": 1}}),
    lambda coll: coll.delete_many({}),
    lambda coll: coll.find_one_and_delete({}),
])
def test_clients_cannot_write_system_profile(db, write):
    db.command({"profile": 2})
    db.command({"profile": 0})
    before = db.system.profile.count_documents({})
    with pytest.raises(OperationFailure) as ei:
        write(db.system.profile)
    assert (ei.value.code, ei.value.details["errmsg"]) == (73, "cannot write to test.system.profile")
    assert db.system.profile.count_documents({}) == before


def test_drop_only_with_profiling_off(db):
    db.command({"profile": 1})
    with pytest.raises(OperationFailure) as ei:
        db.system.profile.drop()
    assert (ei.value.code, ei.value.details["errmsg"]) == (
        20, "turn off profiling before dropping system.profile collection")
    db.command({"profile": 0})
    db.system.profile.drop()
    assert "system.profile" not in db.list_collection_names()


def test_system_profile_stays_within_one_mebibyte(db):
    db.command({"profile": 2})
    pad = "x" * 20_000
    for i in range(120):                     # ~2.4 MB of commands
        db.c.find_one({"i": i, "pad": pad})
    db.command({"profile": 0})
    got = entries(db, op="query")
    total = sum(len(json.dumps(e, default=str)) for e in entries(db))
    stats = db.command("collStats", "system.profile")
    assert stats["size"] <= 1024 * 1024, stats["size"]
    assert 0 < len(got) < 120 and total > 0
    # the newest stay, the oldest went, in order
    kept = [e["command"]["filter"]["i"] for e in got]
    assert kept == list(range(120 - len(kept), 120))


def test_drop_database_forgets_its_level(db):
    db.command({"profile": 2})
    db.client.drop_database("test")
    assert db.command({"profile": -1})["was"] == 0


def test_big_command_is_truncated_in_the_entry(db):
    db.command({"profile": 2})
    db.c.find_one({"pad": "y" * 60_000}, comment="big one")
    db.command({"profile": 0})
    cmd = entries(db, op="query")[0]["command"]
    assert set(cmd) == {"$truncated", "comment"} and cmd["comment"] == "big one"
    assert cmd["$truncated"].endswith("...") and len(cmd["$truncated"]) == 50 * 1024


# ------------------------------------------------------ the slow-query log

def _slow_lines(client):
    lines = client.admin.command("getLog", "global")["log"]
    return [json.loads(l) for l in lines if '"id":51803' in l]


def test_slow_operations_are_logged_as_mongod_logs_them(db):
    db.c.insert_many([{"a": i} for i in range(5)])
    db.command({"profile": 0, "slowms": -1})
    try:
        db.c.find_one({"a": 3})
        db.c.update_one({"a": 4}, {"$set": {"b": 1}})
    finally:
        db.command({"profile": 0, "slowms": 100})
    lines = _slow_lines(db.client)
    find = [l for l in lines if l["attr"].get("command", {}).get("find") == "c"][-1]
    assert (find["s"], find["c"].strip(), find["msg"]) == ("I", "COMMAND", "Slow query")
    a = find["attr"]
    assert a["type"] == "command" and a["ns"] == "test.c" and a["appName"] == "proftest"
    assert a["planSummary"] == "COLLSCAN" and a["nreturned"] == 1 and a["docsExamined"] >= 1
    for k in ("durationMillis", "reslen", "remote", "protocol", "numYields", "keysExamined"):
        assert k in a, k
    write = [l for l in lines if l["attr"]["type"] == "update"][-1]
    assert write["c"].strip() == "WRITE"
    assert write["attr"]["command"]["q"] == {"a": 4} and write["attr"]["nModified"] == 1


def test_fast_operations_are_not_logged(db):
    before = len(_slow_lines(db.client))
    db.c.find_one({"a": 1})
    assert len(_slow_lines(db.client)) == before


def test_filter_decides_the_log_too(db):
    db.command({"profile": 0, "filter": {"op": "insert"}})
    try:
        before = len(_slow_lines(db.client))
        db.c.find_one({"a": 1})
        db.c.insert_one({"a": 2})
    finally:
        db.command({"profile": 0, "filter": "unset"})
    new = _slow_lines(db.client)[before:]
    assert [l["attr"]["command"].get("insert") for l in new] == ["c"]
