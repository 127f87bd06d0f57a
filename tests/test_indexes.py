"""Secondary indexes end to end: createIndexes / listIndexes / dropIndexes /
collMod, unique / sparse / partial / multikey semantics on every write,
builds over existing data (and under kill -9), log replay, and TTL."""
from __future__ import annotations

import datetime
import threading
import time

import pymongo
import pytest
from bson import Decimal128, Int64
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure

import multifora
from conftest import ServedProcess


def names(coll):
    return [ix["name"] for ix in coll.list_indexes()]


def keys_per_index(db, coll):
    return db.command("validate", coll)["keysPerIndex"]


# -------------------------------------------------------------- commands


def test_create_list_drop(client):
    db = client.t
    db.c.insert_many([{"_id": i, "a": i, "b": {"c": i % 3}} for i in range(20)])
    r = db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1"},
                                                  {"key": {"b.c": -1, "a": 1},
                                                   "name": "b.c_-1_a_1"}])
    assert r["numIndexesBefore"] == 1 and r["numIndexesAfter"] == 3
    assert r["createdCollectionAutomatically"] is False
    specs = {ix["name"]: ix for ix in db.c.list_indexes()}
    assert list(specs) == ["_id_", "a_1", "b.c_-1_a_1"]
    assert specs["a_1"] == {"v": 2, "key": {"a": 1}, "name": "a_1"}
    assert list(specs["b.c_-1_a_1"]["key"].items()) == [("b.c", -1), ("a", 1)]
    # the same again: nothing to do
    r = db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1"}])
    assert r["numIndexesBefore"] == r["numIndexesAfter"] == 3
    # mongod requires the name (drivers make it)
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "c", indexes=[{"key": {"z": 1}}])
    assert e.value.code == 9
    assert r["note"] == "all indexes already exist"
    # every document has its keys
    kpi = keys_per_index(db, "c")
    assert kpi == {"_id_": 20, "a_1": 20, "b.c_-1_a_1": 20}
    assert db.command("validate", "c")["valid"] is True
    # drops
    assert db.command("dropIndexes", "c", index="a_1")["nIndexesWas"] == 3
    assert db.command("dropIndexes", "c", index={"b.c": -1, "a": 1})["nIndexesWas"] == 2
    assert names(db.c) == ["_id_"]
    db.c.create_index("a")
    db.c.create_index([("b.c", 1)])
    r = db.command("dropIndexes", "c", index="*")
    assert r["nIndexesWas"] == 3 and r["msg"] == "non-_id indexes dropped for collection"
    assert names(db.c) == ["_id_"]


def test_create_indexes_makes_the_collection(client):
    db = client.t
    r = db.command("createIndexes", "fresh", indexes=[{"key": {"x": 1}, "name": "x_1"}])
    assert r["createdCollectionAutomatically"] is True
    assert r["numIndexesBefore"] == 1 and r["numIndexesAfter"] == 2
    assert "fresh" in db.list_collection_names()


def test_index_command_errors(client):
    db = client.t
    db.c.insert_one({"_id": 1, "a": 1})
    db.c.create_index("a", name="a_1")
    cases = [
        (lambda: db.command("createIndexes", "c", indexes=[]), 2),
        (lambda: db.command("createIndexes", "c"), 40414),
        (lambda: db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "other"}]), 85),
        (lambda: db.command("createIndexes", "c", indexes=[{"key": {"b": 1}, "name": "a_1"}]), 86),
        (lambda: db.command("dropIndexes", "c", index="_id_"), 72),
        (lambda: db.command("dropIndexes", "c", index="nope"), 27),
        (lambda: db.command("dropIndexes", "c", index={"zz": 1}), 27),
        (lambda: db.command("dropIndexes", "nothere", index="a_1"), 26),
        (lambda: db.command("listIndexes", "nothere"), 26),
    ]
    for fn, code in cases:
        with pytest.raises(OperationFailure) as e:
            fn()
        assert e.value.code == code, e.value.details
    assert names(db.c) == ["_id_", "a_1"]


def test_at_most_64_indexes(client):
    db = client.t
    db.c.insert_one({"_id": 1})
    for i in range(63):
        db.c.create_index(f"f{i}")
    assert len(names(db.c)) == 64
    with pytest.raises(OperationFailure) as e:
        db.c.create_index("one_too_many")
    assert e.value.code == 67
    assert len(names(db.c)) == 64


def test_coll_mod_hidden_and_ttl(client):
    db = client.t
    db.c.insert_one({"_id": 1, "t": datetime.datetime(2020, 1, 1)})
    db.c.create_index("t", expireAfterSeconds=3600)
    r = db.command("collMod", "c", index={"keyPattern": {"t": 1}, "expireAfterSeconds": 60})
    assert r["expireAfterSeconds_old"] == 3600 and r["expireAfterSeconds_new"] == 60
    r = db.command("collMod", "c", index={"name": "t_1", "hidden": True})
    assert r["hidden_old"] is False and r["hidden_new"] is True
    spec = [ix for ix in db.c.list_indexes() if ix["name"] == "t_1"][0]
    assert spec["expireAfterSeconds"] == 60 and spec["hidden"] is True
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "c", index={"name": "nope", "hidden": True})
    assert e.value.code == 27


@pytest.mark.parametrize("value, want", [
    (300.5, 300), (Decimal128("7.9"), 7), (-0.5, 0), (Int64(5), 5),
    (-5, 72), (2**31, 72), (float("nan"), 72), (float("inf"), 72), (Decimal128("NaN"), 72),
    ("5", 14)])
def test_coll_mod_expire_after_seconds_as_mongod_parses_it(client, value, want):
    """collMod takes expireAfterSeconds as any number, truncated (mongod's
    safeInt64), and its range failures are InvalidOptions (72), a string
    TypeMismatch (14); before, every such value was BadValue (2)."""
    db = client.t
    db.c.create_index("t", expireAfterSeconds=100)
    index = {"name": "t_1", "expireAfterSeconds": value}
    if want in (72, 14):
        with pytest.raises(OperationFailure) as e:
            db.command("collMod", "c", index=index)
        assert e.value.code == want
        want_stored = 100
    else:
        r = db.command("collMod", "c", index=index)
        assert (r["expireAfterSeconds_old"], r["expireAfterSeconds_new"]) == (100, want)
        want_stored = want
    spec = [ix for ix in db.c.list_indexes() if ix["name"] == "t_1"][0]
    assert spec["expireAfterSeconds"] == want_stored


def test_coll_mod_hidden_is_a_safe_bool_and_ttl_stays_single_field(client):
    db = client.t
    db.c.create_index("h")
    db.c.create_index([("a", 1), ("b", 1)])
    r = db.command("collMod", "c", index={"name": "h_1", "hidden": 1})
    assert (r["hidden_old"], r["hidden_new"]) == (False, True)
    r = db.command("collMod", "c", index={"name": "h_1", "hidden": 0.0})
    assert (r["hidden_old"], r["hidden_new"]) == (True, False)
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "c", index={"name": "h_1", "hidden": "x"})
    assert e.value.code == 14
    # converting an index to TTL: one field only, as createIndexes has it
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "c", index={"name": "a_1_b_1", "expireAfterSeconds": 5})
    assert e.value.code == 72
    assert "expireAfterSeconds" not in [ix for ix in db.c.list_indexes()
                                        if ix["name"] == "a_1_b_1"][0]
    r = db.command("collMod", "c", index={"name": "h_1", "expireAfterSeconds": 5})
    assert r["expireAfterSeconds_new"] == 5


# ------------------------------------------------------------- semantics


def test_unique_index(client):
    db = client.t
    db.c.create_index("a", unique=True)
    db.c.insert_many([{"_id": 1, "a": 1}, {"_id": 2, "a": 2}])
    with pytest.raises(DuplicateKeyError) as e:
        db.c.insert_one({"_id": 3, "a": 1})
    d = e.value.details
    assert d["code"] == 11000
    assert d["errmsg"] == ("E11000 duplicate key error collection: t.c index: a_1 dup key: "
                           "{ a: 1 }")
    assert d["keyPattern"] == {"a": 1} and d["keyValue"] == {"a": 1}
    # an update into a taken key
    with pytest.raises(DuplicateKeyError):
        db.c.update_one({"_id": 2}, {"$set": {"a": 1}})
    assert db.c.find_one({"_id": 2}) == {"_id": 2, "a": 2}
    # missing counts as null: one document may lack the field, not two
    db.c.insert_one({"_id": 4})
    with pytest.raises(DuplicateKeyError):
        db.c.insert_one({"_id": 5})
    # delete frees the key
    db.c.delete_one({"_id": 1})
    db.c.insert_one({"_id": 6, "a": 1})
    assert keys_per_index(db, "c")["a_1"] == 3


def test_unique_build_over_duplicates_leaves_no_index(client):
    db = client.t
    db.c.insert_many([{"_id": i, "a": i % 5} for i in range(20)])
    with pytest.raises(OperationFailure) as e:
        db.c.create_index("a", unique=True)
    assert e.value.code == 11000
    assert "E11000 duplicate key error collection: t.c index: a_1" in e.value.details["errmsg"]
    assert names(db.c) == ["_id_"]
    db.c.insert_one({"_id": 100, "a": 0})  # no stale unique index refuses it


def test_sparse_and_partial(client):
    db = client.t
    db.c.create_index("a", unique=True, sparse=True)
    db.c.insert_many([{"_id": 1}, {"_id": 2}, {"_id": 3, "a": 1}])
    assert keys_per_index(db, "c")["a_1"] == 1
    with pytest.raises(DuplicateKeyError):
        db.c.insert_one({"_id": 4, "a": 1})
    db.d.create_index("a", unique=True, partialFilterExpression={"b": {"$gt": 5}})
    db.d.insert_many([{"_id": 1, "a": 1, "b": 1}, {"_id": 2, "a": 1, "b": 2},
                      {"_id": 3, "a": 1, "b": 10}])
    with pytest.raises(DuplicateKeyError):
        db.d.insert_one({"_id": 4, "a": 1, "b": 7})
    assert keys_per_index(db, "d")["a_1"] == 1
    # moving a document into the filter adds its key (and checks it)
    with pytest.raises(DuplicateKeyError):
        db.d.update_one({"_id": 1}, {"$set": {"b": 6}})
    db.d.update_one({"_id": 3}, {"$set": {"b": 0}})
    assert keys_per_index(db, "d")["a_1"] == 0


def test_multikey_and_parallel_arrays(client):
    db = client.t
    db.c.create_index([("a", 1), ("b", 1)])
    db.c.insert_one({"_id": 1, "a": [1, 2, 2, 3], "b": 5})
    assert keys_per_index(db, "c")["a_1_b_1"] == 3
    with pytest.raises(BulkWriteError) as e:
        db.c.insert_many([{"_id": 2, "a": [1], "b": [2]}])
    assert e.value.details["writeErrors"][0]["code"] == 171
    assert db.c.find_one({"_id": 2}) is None
    r = db.command("update", "c", updates=[{"q": {"_id": 1}, "u": {"$set": {"b": [1, 2]}}}])
    assert r["writeErrors"][0]["code"] == 171
    assert db.c.find_one({"_id": 1})["b"] == 5
    # an update that shrinks the array removes keys
    db.c.update_one({"_id": 1}, {"$set": {"a": [7]}})
    assert keys_per_index(db, "c")["a_1_b_1"] == 1
    assert db.command("validate", "c")["valid"] is True


def test_build_over_parallel_arrays_fails(client):
    db = client.t
    db.c.insert_one({"_id": 1, "a": [1, 2], "b": [3, 4]})
    with pytest.raises(OperationFailure) as e:
        db.c.create_index([("a", 1), ("b", 1)])
    assert e.value.code == 171
    assert names(db.c) == ["_id_"]


# ------------------------------------------------------------ durability


def test_indexes_survive_restart_and_log_replay(tmp_path):
    """Writes after the index build are only in the log at kill -9: replay
    must bring their index entries back with them."""
    s = ServedProcess(tmp_path / "db").start()
    c = s.client()
    c.t.c.create_index("a", unique=True)
    c.t.c.insert_many([{"_id": i, "a": i} for i in range(500)])
    c.t.c.delete_many({"_id": {"$lt": 100}})
    c.t.c.update_many({"_id": {"$gte": 400}}, {"$inc": {"a": 1000}})
    c.close()
    s.kill()
    s = ServedProcess(tmp_path / "db").start()
    c = s.client()
    try:
        v = c.t.command("validate", "c")
        assert v["valid"] is True, v
        assert v["keysPerIndex"] == {"_id_": 400, "a_1": 400}
        assert names(c.t.c) == ["_id_", "a_1"]
        with pytest.raises(DuplicateKeyError):
            c.t.c.insert_one({"_id": 1000, "a": 1400})
        c.t.c.insert_one({"_id": 1001, "a": 5})  # freed by the delete
    finally:
        c.close()
        s.stop()


def _load_for_build(s):
    c = s.client()
    big = "x" * 2000
    for k in range(10):
        c.t.c.insert_many([{"_id": k * 5000 + i, "a": i, "b": -i, "pad": big}
                           for i in range(5000)])
    c.t.other.insert_one({"x": 0})
    c.close()


def _build_in_thread(s, names):
    def build():
        try:
            cc = s.client()
            cc.t.c.create_indexes([pymongo.IndexModel(n[0]) for n in names])
        except Exception:  # noqa: BLE001 - the server is killed under it
            pass

    t = threading.Thread(target=build)
    t.start()
    return t


def _sync_the_log(s):
    # A write elsewhere commits and syncs the log, and with it what the
    # build has logged so far: without it a kill loses the build's records
    # whatever they say, and the test would show nothing.  (t.other exists:
    # making a collection would wait for the build's catalog lock.)
    c = s.client()
    c.t.other.insert_one({"x": 1})
    c.close()


def _reopened_keys(tmp_path):
    s = ServedProcess(tmp_path / "db").start()
    c = s.client()
    try:
        v = c.t.command("validate", "c")
        assert v["valid"] is True, v
        return v["keysPerIndex"]
    finally:
        c.close()
        s.stop()


@pytest.mark.parametrize("names", [("a_1",), ("a_1", "b_1")])
def test_build_killed_midway_leaves_all_or_nothing(tmp_path, names):
    # Killed about halfway through the build (timed by building the same
    # indexes once before), its log synced by another write just before:
    # the whole command's indexes after the restart, or none of them.
    s = ServedProcess(tmp_path / "db").start()
    try:
        _load_for_build(s)
        c = s.client()
        t0 = time.monotonic()
        c.t.c.create_indexes([pymongo.IndexModel(n[0]) for n in names])
        took = time.monotonic() - t0
        c.t.c.drop_indexes()
        c.close()
        t = _build_in_thread(s, names)
        time.sleep(took / 2)
        _sync_the_log(s)
    finally:
        s.kill()
    t.join(timeout=30)
    kpi = _reopened_keys(tmp_path)
    assert set(kpi) in ({"_id_"}, {"_id_", *names}), kpi
    assert all(kpi[n] == 50000 for n in kpi), kpi


def test_build_killed_before_commit_leaves_none_of_the_commands_indexes(tmp_path):
    # Every key of both indexes written and synced, neither committed: the
    # fail point holds createIndexes there, and the kill lands at that
    # moment.  Committed before the hang (or one at a time), they would
    # come back.
    s = ServedProcess(tmp_path / "db", ["--enable-test-commands"]).start()
    try:
        _load_for_build(s)
        admin = s.client().admin
        before = admin.command("configureFailPoint", "hangIndexBuildBeforeCommit",
                               mode="alwaysOn")["count"]
        t = _build_in_thread(s, ("a_1", "b_1"))
        admin.command("waitForFailPoint", "hangIndexBuildBeforeCommit",
                      timesEntered=before + 2, maxTimeMS=30000)
        _sync_the_log(s)
    finally:
        s.kill()
    t.join(timeout=30)
    assert _reopened_keys(tmp_path) == {"_id_": 50000}


def test_hang_before_commit_fail_point(tmp_path):
    # Turned off, the held build commits; maxTimeMS ends the wait and
    # leaves no index; an empty collection's build does not stop there;
    # waitForFailPoint's arguments and time limit as mongod's.
    s = ServedProcess(tmp_path / "db", ["--enable-test-commands"]).start()
    try:
        c = s.client()
        c.t.c.insert_many([{"a": i} for i in range(100)])
        c.t.other.insert_one({"x": 1})
        admin = c.admin
        n = admin.command("configureFailPoint", "hangIndexBuildBeforeCommit",
                          mode="alwaysOn")["count"]
        with pytest.raises(OperationFailure) as e:
            c.t.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1"}],
                        maxTimeMS=200)
        assert e.value.code == 50
        assert [i["name"] for i in c.t.c.list_indexes()] == ["_id_"]
        # mongod counts two entries per build held: the check, the pause
        assert admin.command("configureFailPoint", "hangIndexBuildBeforeCommit",
                             mode="alwaysOn")["count"] == n + 2
        c.t.create_collection("empty")
        c.t.empty.create_index("a")  # no documents: not held
        assert [i["name"] for i in c.t.empty.list_indexes()] == ["_id_", "a_1"]
        t = _build_in_thread(s, ("a_1",))
        admin.command("waitForFailPoint", "hangIndexBuildBeforeCommit",
                      timesEntered=n + 4, maxTimeMS=30000)
        # (The held build keeps its collection's lock, and the catalog's
        # shared: listIndexes on it, or a new collection, would wait.  An
        # existing collection is served meanwhile.)
        c.t.other.insert_one({"x": 2})
        assert c.t.other.count_documents({}) == 2
        assert admin.command("configureFailPoint", "hangIndexBuildBeforeCommit",
                             mode="off")["count"] == n + 4
        t.join(timeout=30)
        assert [i["name"] for i in c.t.c.list_indexes()] == ["_id_", "a_1"]
        with pytest.raises(OperationFailure) as e:
            admin.command("waitForFailPoint", "hangIndexBuildBeforeCommit",
                          timesEntered=n + 5, maxTimeMS=50)
        assert e.value.code == 50
        for args, code in [({"timesEntered": 1, "maxTimeMS": 50}, 266),
                           ({"timesEntered": 1}, 9),
                           ({"maxTimeMS": 50}, 40414),
                           ({"timesEntered": "1", "maxTimeMS": 50}, 14)]:
            with pytest.raises(OperationFailure) as e:
                admin.command("waitForFailPoint", "noSuchFailPoint", **args)
            assert e.value.code == code, (args, e.value.details)
        c.close()
    finally:
        s.stop()


# ------------------------------------------------------------------- TTL


def test_ttl_monitor_deletes_expired_documents(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0, ttl_monitor_sleep_secs=1)
    srv.start()
    try:
        c = pymongo.MongoClient(srv.uri)
        now = datetime.datetime.now(datetime.timezone.utc)
        old = now - datetime.timedelta(hours=2)
        coll = c.t.c
        coll.create_index("t", expireAfterSeconds=3600)
        coll.insert_many([
            {"_id": 1, "t": old},
            {"_id": 2, "t": now},
            {"_id": 3, "t": [now, old]},  # the earliest date counts
            {"_id": 4, "t": "not a date"},
            {"_id": 5},
        ])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(list(coll.find())) > 3:
            time.sleep(0.2)
        assert sorted(d["_id"] for d in coll.find()) == [2, 4, 5]
        assert c.admin.command("getParameter", 1, ttlMonitorSleepSecs=1)[
            "ttlMonitorSleepSecs"] == 1
        c.close()
    finally:
        srv.stop()


def test_ttl_deletions_are_logged_and_counted(tmp_path):
    """The monitor deletes as any delete does: through the log, so after
    kill -9 the documents stay deleted and no index keeps their keys; more
    than one batch of them; counted in serverStatus metrics.ttl."""
    now = datetime.datetime.now(datetime.timezone.utc)
    old = now - datetime.timedelta(hours=2)
    s = ServedProcess(tmp_path / "db", extra=["--ttl-monitor-sleep-secs", "1"]).start()
    c = s.client()
    try:
        coll = c.t.c
        coll.create_index("t", expireAfterSeconds=3600)
        coll.create_index("k")
        coll.insert_many([{"_id": i, "t": old, "k": i} for i in range(2500)]
                         + [{"_id": 10_000 + i, "t": now, "k": i} for i in range(10)])
        # The counters move at the end of a pass, after its deletes are
        # synced: once they show all 2,500, kill -9 cannot lose them.
        deadline = time.monotonic() + 30
        ttl = {}
        while time.monotonic() < deadline:
            ttl = c.admin.command("serverStatus")["metrics"]["ttl"]
            if ttl["deletedDocuments"] >= 2500:
                break
            time.sleep(0.2)
        assert ttl["deletedDocuments"] == 2500, ttl
        assert ttl["passes"] >= 1 and ttl["subPasses"] == ttl["passes"], ttl
        slim = c.admin.command({"serverStatus": 1, "metrics": 0})
        assert "metrics" not in slim
    finally:
        c.close()
        s.kill()
    s = ServedProcess(tmp_path / "db", extra=["--ttl-monitor-sleep-secs", "3600"]).start()
    c = s.client()
    try:
        coll = c.t.c
        assert sorted(d["_id"] for d in coll.find()) == list(range(10_000, 10_010))
        assert [d["_id"] for d in coll.find({"k": {"$lt": 5}}).hint("k_1")] == list(
            range(10_000, 10_005))
        v = c.t.command("validate", "c")
        assert v["valid"] is True, v
        assert v["keysPerIndex"] == {"_id_": 10, "t_1": 10, "k_1": 10}
        ttl = c.admin.command("serverStatus")["metrics"]["ttl"]
        assert ttl["deletedDocuments"] == 0  # per process, as mongod's
    finally:
        c.close()
        s.stop()


def test_invalid_ttl_specs(client):
    db = client.t
    with pytest.raises(OperationFailure) as e:
        db.c.create_index([("a", 1), ("b", 1)], expireAfterSeconds=10)
    assert e.value.code == 67
    with pytest.raises(OperationFailure):
        db.c.create_index("a", expireAfterSeconds="ten")


def test_list_indexes_cursor_is_the_collections(client):
    """listIndexes' cursor is registered under the collection, as mongod
    5.0 and later register it: the reply's ns is "db.coll", and getMore
    names the collection (it was "db.$cmd.listIndexes")."""
    db = client.t
    db.c.create_index("a")
    db.c.create_index("b")
    r = db.command("listIndexes", "c", cursor={"batchSize": 1})
    assert r["cursor"]["ns"] == "t.c"
    assert [i["name"] for i in r["cursor"]["firstBatch"]] == ["_id_"]
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        db.command("getMore", r["cursor"]["id"], collection="other")
    assert e.value.code == 13
    more = db.command("getMore", r["cursor"]["id"], collection="c", batchSize=1)
    assert [i["name"] for i in more["cursor"]["nextBatch"]] == ["a_1"]
    assert more["cursor"]["ns"] == "t.c"
    more = db.command("getMore", r["cursor"]["id"], collection="c")
    assert [i["name"] for i in more["cursor"]["nextBatch"]] == ["b_1"]
    assert more["cursor"]["id"] == 0
    assert [i["name"] for i in db.c.list_indexes()] == ["_id_", "a_1", "b_1"]
