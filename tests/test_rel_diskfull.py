"""Reliability: a full disk (issue 7).

The data directory lives on a small tmpfs (mounted here when the tests run
as root and may mount; skipped otherwise), beside a ballast file.  Inserts
go on until one fails; then:

- the error is OutOfDiskSpace (14031), as that item's write error, and the
  items before it in its batch are acknowledged and durable;
- ``ping`` and reads keep working; nothing partial is visible: the failed
  documents are absent, every index agrees with the records (``validate``,
  and an index scan counts what a collection scan counts);
- after the ballast is deleted (space freed), writes work again, without a
  restart;
- a clean restart finds every acknowledged document.

The same sequence also runs everywhere (no mount needed) with the disk full
simulated by the os layer's ENOSPC injection at the two places a write takes
space: the data file's growth ("pager.grow") and the log's reservation
("wal.reserve").

Why it works (storage/engine.h): a write takes its space -- pages in the
data file, real blocks (fallocate) in the log -- before it changes any tree,
so a full disk refuses it cleanly instead of failing a group commit whose
changes are already applied; the data file grows with fallocate, never as a
sparse hole that a store through the mapping would turn into SIGBUS.
"""
from __future__ import annotations

import os
import subprocess
import random

import pymongo
import pytest
from pymongo.errors import BulkWriteError, WriteError

import multifora

OUT_OF_DISK_SPACE = 14031
FS_BYTES = 12 << 20
BALLAST_BYTES = 3 << 20


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_BYTES}", "tmpfs", str(mnt)],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {r.stderr.strip() or r.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, check=False)


def _doc(i: int) -> dict:
    rnd = random.Random(i)  # the same document for the same _id
    return {"_id": i, "k": i % 97, "tags": [i % 5, i % 7], "pad": rnd.randbytes(3000).hex()}


def _fill(coll, start: int) -> tuple[list, int, dict]:
    """Insert batches of 20 until one fails; returns (acknowledged docs,
    next _id, the write error)."""
    acked, i = [], start
    while True:
        batch = [_doc(i + j) for j in range(20)]
        try:
            coll.insert_many(batch, ordered=True)
        except BulkWriteError as e:
            d = e.details
            acked += batch[:d["nInserted"]]
            assert len(d["writeErrors"]) == 1, d
            return acked, i + len(batch), d["writeErrors"][0] | {"nInserted": d["nInserted"],
                                                                  "batch": batch}
        acked += batch
        i += len(batch)
        assert i < 200_000, "the disk never filled"


def _check_consistent(client, acked: list, failed: list) -> None:
    coll = client.app.c
    assert client.admin.command("ping")["ok"] == 1.0
    assert coll.count_documents({}) == len(acked)
    got = list(coll.find().sort("_id", 1))
    assert got == sorted(acked, key=lambda d: d["_id"])
    for d in failed:
        assert coll.find_one({"_id": d["_id"]}) is None
    v = client.app.command("validate", "c")
    assert v["valid"] is True, v["errors"]
    assert v["nrecords"] == len(acked)
    n = len(acked)
    assert v["keysPerIndex"]["_id_"] == n and v["keysPerIndex"]["k_1"] == n
    by_index = coll.count_documents({"k": {"$gte": 0}}, hint="k_1")
    assert by_index == n


def _run_full_disk(dbpath, make_full, free_space, **server_kw):
    srv = multifora.Server(str(dbpath), port=0, **server_kw).start()
    client = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000, retryWrites=False)
    coll = client.app.c
    coll.create_index("k")
    coll.create_index("tags")
    make_full(client)
    acked, next_id, werr = _fill(coll, 0)
    assert werr["code"] == OUT_OF_DISK_SPACE, werr
    assert werr["index"] == werr["nInserted"]
    failed = werr["batch"][werr["nInserted"]:]
    _check_consistent(client, acked, failed)
    # Still full: single inserts soon fail the same way (a few may fit in
    # space the batch had reserved for its worst case), changing nothing.
    for _ in range(1000):
        try:
            coll.insert_one(_doc(next_id))
        except WriteError as e:
            assert e.code == OUT_OF_DISK_SPACE
            failed.append(_doc(next_id))
            break
        acked.append(_doc(next_id))
        next_id += 1
    else:
        raise AssertionError("single inserts never failed")
    assert client.admin.command("hello")["readOnly"] is False  # not failed: just full
    _check_consistent(client, acked, failed)

    free_space(client)
    more = [_doc(next_id + 1 + j) for j in range(40)]
    for d in more:
        coll.insert_one(d)  # writes resume, no restart
    acked += more
    coll.update_one({"_id": acked[0]["_id"]}, {"$set": {"k": 96}})
    acked[0] = dict(acked[0], k=96)
    _check_consistent(client, acked, failed)
    client.close()
    srv.stop()

    srv = multifora.Server(str(dbpath), port=0).start()
    client = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000)
    _check_consistent(client, acked, failed)
    client.close()
    srv.stop()
    return len(acked)


def test_real_full_filesystem(small_fs):
    ballast = small_fs / "ballast"

    def make_full(client):
        with open(ballast, "wb") as f:
            f.write(b"\0" * BALLAST_BYTES)

    def free_space(client):
        os.unlink(ballast)

    n = _run_full_disk(small_fs / "db", make_full, free_space)
    print(f"\ndisk full (tmpfs of {FS_BYTES >> 20} MiB): {n} documents acknowledged, "
          f"0 lost, writes resumed after freeing {BALLAST_BYTES >> 20} MiB")


@pytest.mark.parametrize("site", ["pager.grow", "wal.reserve"])
def test_injected_enospc(tmp_path, site):
    def make_full(client):
        # let the first few growths happen, then the disk is "full"
        client.admin.command({"configureFailPoint": "storageFault",
                              "mode": {"skip": 1}, "data": {"site": site, "error": "ENOSPC"}})

    def free_space(client):
        client.admin.command({"configureFailPoint": "storageFault", "mode": "off"})

    _run_full_disk(tmp_path / "db", make_full, free_space, enable_test_commands=True)
