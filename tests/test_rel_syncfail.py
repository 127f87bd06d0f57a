"""Reliability: a failed fsync (issue 7).

An fsync that fails may have dropped the pages it was to write, so no write
of the group it was syncing may be acknowledged, and the server must not
retry and then claim success: it turns read-only until restarted, and
recovery restores a consistent state.  The failure is injected with the test
command ``configureFailPoint: "storageFault"`` (command/cmd_failpoint.c),
which arms the os layer's fault injection at a named site: here the log's
group-commit sync ("wal.sync") and the checkpoint's data-file sync
("pager.sync", reached with the ``fsync`` command).
"""
from __future__ import annotations

import threading

import pymongo
import pytest
from pymongo.errors import OperationFailure

import multifora

READ_ONLY = 20  # IllegalOperation: every write once the engine has failed


def _start(path):
    srv = multifora.Server(str(path), port=0, enable_test_commands=True).start()
    return srv, pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000, retryWrites=False)


def _fail_point(client, site, mode):
    return client.admin.command({"configureFailPoint": "storageFault", "mode": mode,
                                 "data": {"site": site, "error": "EIO"}})


def _read_only_checks(client, baseline):
    """Writes refused with a clear error; reads, ping and hello go on."""
    coll = client.app.c
    assert client.admin.command("hello")["readOnly"] is True
    assert client.admin.command("serverStatus")["storageEngine"]["readOnly"] is True
    attempts = [
        lambda: coll.insert_one({"_id": "late", "v": 1}),
        lambda: coll.update_one({"_id": 0}, {"$set": {"v": -1}}),
        lambda: coll.delete_one({"_id": 1}),
        lambda: coll.create_index("other"),
        lambda: client.app.create_collection("newcoll"),
        lambda: client.app.drop_collection("c"),
    ]
    for attempt in attempts:
        with pytest.raises(OperationFailure) as e:
            attempt()
        assert e.value.code == READ_ONLY, e.value.details
        assert e.value.details["codeName"] == "IllegalOperation"
        assert "refuses writes until the database is reopened" in e.value.details["errmsg"]
        assert "Input/output error" in e.value.details["errmsg"]
    assert client.admin.command("ping")["ok"] == 1.0
    got = {d["_id"]: d for d in coll.find({"_id": {"$in": [b["_id"] for b in baseline]}})}
    assert [got[b["_id"]] for b in baseline] == baseline
    assert coll.count_documents({"v": {"$gte": 0}}) >= len(baseline)


def test_wal_sync_failure_acknowledges_nothing_then_read_only(tmp_path):
    srv, client = _start(tmp_path / "db")
    coll = client.app.c
    coll.create_index("v")
    baseline = [{"_id": i, "v": i} for i in range(50)]
    coll.insert_many(baseline)
    assert client.admin.command("hello")["readOnly"] is False

    # The next group commit's sync fails (once: later ones would succeed,
    # which is exactly what must not be trusted).
    assert _fail_point(client, "wal.sync", {"times": 1})["count"] == 0
    acked, failed, codes = [], [], set()
    lock = threading.Lock()
    go = threading.Barrier(8)

    def writer(t):
        go.wait()
        for j in range(20):
            doc = {"_id": f"w{t}-{j}", "v": 1000 + j, "t": t}
            try:
                coll.insert_one(doc)
                with lock:
                    acked.append(doc)
            except OperationFailure as e:
                with lock:
                    failed.append(doc)
                    codes.add(e.code)
                return

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert acked == [], f"{len(acked)} writes acknowledged after the sync failed"
    assert len(failed) == 8
    # the group whose sync failed: InternalError naming the cause; writers
    # that came later: the read-only refusal
    assert codes <= {1, READ_ONLY} and 1 in codes, codes
    assert client.admin.command({"configureFailPoint": "storageFault", "mode": "off"})["count"] == 1
    _read_only_checks(client, baseline)
    # still read-only with the fault gone: only a restart recovers
    with pytest.raises(OperationFailure) as e:
        coll.insert_one({"_id": "after-off"})
    assert e.value.code == READ_ONLY
    client.close()
    srv.stop()

    srv, client = _start(tmp_path / "db")
    coll = client.app.c
    assert client.admin.command("hello")["readOnly"] is False
    assert list(coll.find({"_id": {"$in": list(range(50))}}).sort("_id", 1)) == baseline
    # each failed write wholly there or wholly absent (never acknowledged)
    for doc in failed:
        got = coll.find_one({"_id": doc["_id"]})
        assert got is None or got == doc
    assert coll.find_one({"_id": "late"}) is None
    v = client.app.command("validate", "c")
    assert v["valid"] is True and v["nrecords"] == coll.count_documents({})
    assert v["keysPerIndex"] == {"_id_": v["nrecords"], "v_1": v["nrecords"]}
    coll.insert_one({"_id": "again", "v": 1})
    assert coll.find_one({"_id": "again"}) == {"_id": "again", "v": 1}
    client.close()
    srv.stop()


def test_checkpoint_sync_failure_turns_read_only(tmp_path):
    srv, client = _start(tmp_path / "db")
    coll = client.app.c
    baseline = [{"_id": i, "v": i, "pad": "p" * 500} for i in range(200)]
    coll.insert_many(baseline)
    _fail_point(client, "pager.sync", "alwaysOn")
    with pytest.raises(OperationFailure) as e:
        client.admin.command("fsync")
    assert e.value.code == 1 and "pager.sync" in e.value.details["errmsg"]
    client.admin.command({"configureFailPoint": "storageFault", "mode": "off"})
    _read_only_checks(client, baseline)
    client.close()
    srv.stop()  # its final checkpoint is refused too: the log has everything

    srv, client = _start(tmp_path / "db")
    coll = client.app.c
    assert list(coll.find().sort("_id", 1)) == baseline
    assert client.app.command("validate", "c")["valid"] is True
    coll.insert_one({"_id": "again"})
    client.admin.command("fsync")
    client.close()
    srv.stop()


def test_fail_point_command_shape(tmp_path):
    srv, client = _start(tmp_path / "db")
    with pytest.raises(OperationFailure) as e:
        client.admin.command({"configureFailPoint": "noSuchFailPoint", "mode": "off"})
    assert e.value.code == 266 and e.value.details["errmsg"] == "noSuchFailPoint not found"
    with pytest.raises(OperationFailure) as e:
        client.app.command({"configureFailPoint": "storageFault", "mode": "off"})
    assert e.value.code == 13  # admin only
    client.close()
    srv.stop()
    plain = multifora.Server(str(tmp_path / "db"), port=0).start()
    c = pymongo.MongoClient(plain.uri, serverSelectionTimeoutMS=5000)
    with pytest.raises(OperationFailure) as e:
        c.admin.command({"configureFailPoint": "storageFault", "mode": "off"})
    assert e.value.code == 59  # no test commands: no such command
    c.close()
    plain.stop()
