"""Reliability: a storage fault belongs to one server (issue 46).

The os layer's fault injection (storage/os.h) fails the file operations
made against a fault table, and each engine opens its files against its
own table (mf_engine_faults): the one the ``storageFault`` fail point arms,
or the ``_core._Faults`` the server was opened with.  Two servers embedded
in one process, each over its own directory, must therefore never share an
armed fault: arming one fails that one's writes, or its open, and the other
goes on as if nothing were armed.

Mutation check: with one table for the process again (mf_os_faults_new
handing out the same table every time), every test here fails -- the other
server's writes fail with the first's fault, or its open does.
"""
from __future__ import annotations

import bson
import pytest

import multifora
from multifora import _core

INT_MAX = 2**31 - 1


def _ok(srv, db: str, cmd: dict) -> bool:
    """Whether the command succeeded, write errors included."""
    r = bson.decode(srv._core.command(db, bson.encode(cmd)))
    return bool(r.get("ok")) and not r.get("writeErrors") and not r.get("writeConcernError")


def _insert(srv, i: int) -> bool:
    return _ok(srv, "app", {"insert": "c", "documents": [{"_id": i, "v": "x" * 100}]})


def _fail_point(srv, mode, site: str = "wal.sync") -> dict:
    return srv.command("admin", {"configureFailPoint": "storageFault", "mode": mode,
                                 "data": {"site": site, "error": "EIO"}})


def test_the_storage_fail_point_fires_in_its_own_server_only(tmp_path):
    a = multifora.Server(str(tmp_path / "a"), port=0, enable_test_commands=True)
    b = multifora.Server(str(tmp_path / "b"), port=0, enable_test_commands=True)
    try:
        assert _insert(a, 1) and _insert(b, 1)
        _fail_point(a, "alwaysOn")
        # b's group commit syncs its log: a's fault is not b's
        assert _insert(b, 2)
        assert b.command("app", {"count": "c"})["n"] == 2
        assert b.command("admin", {"hello": 1}).get("readOnly") is not True
        # a's own sync fails, and a refuses writes from then on
        assert not _insert(a, 2)
        assert a.command("admin", {"hello": 1})["readOnly"] is True
        assert _insert(b, 3)
        # the count is the calls the previous setting failed: none in b
        assert _fail_point(b, "off")["count"] == 0
        assert _fail_point(a, "off")["count"] >= 1
    finally:
        a.stop()
        b.stop()
    # a reopens with its acknowledged write (the failed one's record may
    # have reached the log before the sync failed); b kept all of its own
    a = multifora.Server(str(tmp_path / "a"), port=0)
    b = multifora.Server(str(tmp_path / "b"), port=0)
    try:
        ids = [d["_id"] for d in a.command("app", {"find": "c"})["cursor"]["firstBatch"]]
        assert ids in ([1], [1, 2])
        assert b.command("app", {"count": "c"})["n"] == 3
    finally:
        a.stop()
        b.stop()


def test_a_fault_table_serves_the_server_opened_with_it_alone(tmp_path):
    faults = _core._Faults()
    faults.set("", "EIO", 0, -1)  # every file operation fails
    with pytest.raises(multifora.MultiforaError):
        multifora.Server(str(tmp_path / "a"), port=0, _faults=faults)
    assert faults.stats()[1] >= 1
    # another server, opened meanwhile without the table, opens and writes
    b = multifora.Server(str(tmp_path / "b"), port=0)
    try:
        assert _insert(b, 1)
        # counting, not failing: the table sees its own server's calls alone
        faults.set("", "EIO", INT_MAX, 0)
        a = multifora.Server(str(tmp_path / "a"), port=0, _faults=faults)
        assert _insert(a, 1)
        calls = faults.stats()[0]
        assert calls > 0
        for i in range(2, 12):
            assert _insert(b, i)
        b.command("admin", {"fsync": 1})
        assert faults.stats()[0] == calls
        a.stop()  # its final checkpoint: the table outlives the server
        assert faults.stats()[0] > calls
        assert faults.stats()[1] == 0
    finally:
        b.stop()


def test_a_fault_table_is_checked(tmp_path):
    with pytest.raises(TypeError):
        multifora.Server(str(tmp_path / "a"), port=0, _faults=object())
    faults = _core._Faults()
    with pytest.raises(ValueError):
        faults.set("wal.", "EBADF", 0, 1)
    assert faults.stats() == (0, 0, 0)
