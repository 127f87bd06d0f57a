"""Index builds over existing data: the keys are sorted before they are
written (cmd_index.c, build_index), so the built index is packed, a unique
build fails on the smallest duplicate key as mongod's bulk build does, and
maxIndexBuildMemoryUsageMegabytes bounds the keys kept in memory: past it
the sorter spills runs and merges them, and the index is packed still."""
from __future__ import annotations

import random

import pymongo
import pytest
from pymongo.errors import OperationFailure

import multifora


def index_size(db, coll, name):
    return db.command("collStats", coll)["indexSizes"][name]


def test_built_index_is_packed(client):
    """Keys inserted in random order leave leaves part full; the same keys
    built over existing data are written in order and fill them."""
    db = client.t
    rng = random.Random(5)
    docs = [{"_id": i, "r": rng.randrange(10**9)} for i in range(20000)]
    db.pre.create_index("r")
    db.pre.insert_many(docs)
    db.post.insert_many(docs)
    db.post.create_index("r")
    pre, post = index_size(db, "pre", "r_1"), index_size(db, "post", "r_1")
    assert post <= 0.8 * pre, (pre, post)
    for name in ("pre", "post"):
        v = db.command("validate", name)
        assert v["valid"] is True and v["keysPerIndex"]["r_1"] == len(docs)
    want = [d["_id"] for d in sorted(docs, key=lambda d: (d["r"], d["_id"]))]
    assert [d["_id"] for d in db.post.find({}, {"_id": 1}).hint("r_1")] == want
    lo, hi = 10**8, 2 * 10**8
    assert (sorted(d["_id"] for d in db.post.find({"r": {"$gte": lo, "$lt": hi}}))
            == sorted(d["_id"] for d in docs if lo <= d["r"] < hi))


def test_unique_build_fails_on_smallest_duplicate_key(client):
    """mongod checks each sorted key against the one before, so the key it
    reports is the smallest duplicated one, not the first in insertion order."""
    db = client.t
    db.c.insert_many([{"_id": i, "a": a} for i, a in enumerate([9, 3, 9, 3, 7])])
    with pytest.raises(OperationFailure) as e:
        db.c.create_index("a", unique=True)
    d = e.value.details
    assert d["code"] == 11000
    assert d["errmsg"] == ("Index build failed: E11000 duplicate key error collection: t.c "
                           "index: a_1 dup key: { a: 3 }")
    assert [ix["name"] for ix in db.c.list_indexes()] == ["_id_"]


def test_build_in_several_runs(client):
    """With a 1 MB budget the keys of 60,000 documents are sorted and written
    in several runs: the index holds every key in order, and a duplicate
    across runs (its first copy already in the index) still fails the build."""
    db = client.t
    assert client.admin.command("setParameter", 1, maxIndexBuildMemoryUsageMegabytes=1)[
        "was"] == 200
    rng = random.Random(7)
    n = 60000
    keys = rng.sample(range(10**12), n)
    db.c.insert_many([{"_id": i, "s": f"{k:020d}"} for i, k in enumerate(keys)])
    db.c.create_index("s", unique=True)
    v = db.command("validate", "c")
    assert v["valid"] is True and v["keysPerIndex"]["s_1"] == n
    got = [d["s"] for d in db.c.find({}, {"s": 1, "_id": 0}).hint("s_1")]
    assert got == sorted(f"{k:020d}" for k in keys)
    for i in rng.sample(range(n), 50):
        assert db.c.find_one({"s": f"{keys[i]:020d}"})["_id"] == i
    db.c.drop_index("s_1")
    # the last document repeats the first one's key: they are runs apart
    db.c.insert_one({"_id": n, "s": f"{keys[0]:020d}"})
    with pytest.raises(OperationFailure) as e:
        db.c.create_index("s", unique=True)
    assert e.value.code == 11000
    assert e.value.details["errmsg"].endswith(f'dup key: {{ s: "{keys[0]:020d}" }}')
    assert [ix["name"] for ix in db.c.list_indexes()] == ["_id_"]


def test_build_past_the_budget_is_packed(client):
    """With a 1 MB budget the keys of 60,000 documents spill in several
    runs, which are merged: the index is written in one ordered pass and
    takes no more room than the same index built in memory.  (Written run
    after run, the later runs' keys land among the earlier ones' and split
    their leaves: about half as large again.)"""
    db = client.t
    rng = random.Random(9)
    n = 60000
    docs = [{"_id": i, "r": rng.randrange(10**9)} for i in range(n)]
    db.c.insert_many(docs)
    sizes = {}
    for mb in (200, 1):
        client.admin.command("setParameter", 1, maxIndexBuildMemoryUsageMegabytes=mb)
        db.c.create_index("r")
        sizes[mb] = index_size(db, "c", "r_1")
        v = db.command("validate", "c")
        assert v["valid"] is True and v["keysPerIndex"]["r_1"] == n
        got = [d["_id"] for d in db.c.find({}, {"_id": 1}).hint("r_1")]
        assert got == [d["_id"] for d in sorted(docs, key=lambda d: (d["r"], d["_id"]))]
        db.c.drop_index("r_1")
    assert sizes[1] <= 1.02 * sizes[200], sizes


def test_max_index_build_memory_parameter(tmp_path, client):
    assert client.admin.command("getParameter", 1, maxIndexBuildMemoryUsageMegabytes=1)[
        "maxIndexBuildMemoryUsageMegabytes"] == 200
    for bad in (0, -5, "x"):
        with pytest.raises(OperationFailure) as e:
            client.admin.command("setParameter", 1, maxIndexBuildMemoryUsageMegabytes=bad)
        assert e.value.code == 2
    client.admin.command("setParameter", 1, maxIndexBuildMemoryUsageMegabytes=64)
    assert client.admin.command("getParameter", 1, maxIndexBuildMemoryUsageMegabytes=1)[
        "maxIndexBuildMemoryUsageMegabytes"] == 64
    # Without test commands, mongod's floor of 50 holds.
    srv = multifora.Server(str(tmp_path / "plain"), port=0)
    srv.start()
    try:
        c = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000)
        with pytest.raises(OperationFailure) as e:
            c.admin.command("setParameter", 1, maxIndexBuildMemoryUsageMegabytes=49)
        assert e.value.code == 2 and "greater than or equal to 50" in str(e.value)
        c.admin.command("setParameter", 1, maxIndexBuildMemoryUsageMegabytes=50)
        c.close()
    finally:
        srv.stop()
