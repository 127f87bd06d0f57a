"""Reliability: power loss at every crash point of a server workload (issue 7).

The os layer's simulated power loss (storage/os.h) keeps, for every file
the engine opens, its content as of its last sync.  A scripted workload of
commands -- through the in-process command API (``Server.command``, the
same dispatcher the wire uses), over two collections with a unique index, a
multikey index and a compound index, with explicit checkpoints (``fsync``)
and the final checkpoint of a clean close -- is first run once to count its
crash points: every file operation it makes (open, write, sync, allocate,
map, rename, unlink, directory sync).  Then, for each crash point k:

1. a fresh directory; the fault injection lets k calls pass and fails every
   later one (the power is gone: nothing more reaches the disk);
2. the workload runs until a command fails -- the ones before it were
   acknowledged;
3. the server is closed, every file is put back to its last synced content
   (plus, in the torn variant, the first half of the write the power cut,
   in whole 512-byte sectors), and the server is opened again;
4. the database must open, and its whole content (every document of every
   collection, the index names) must equal the state after the acknowledged
   commands, or after those and the one that failed; ``validate`` is clean
   for every collection and an index scan agrees with a collection scan;
   the reopened database takes a write.

The expected states come from a reference run of the same workload without
faults, snapshotted after every command, so no model of the commands is
needed.  CI runs every crash point, plain and torn; ``--crash-points N``
takes N of them spread over the workload instead (for quick runs).
"""
from __future__ import annotations

import random
import shutil

import bson
import pytest

import multifora
from multifora import _core

INT_MAX = 2**31 - 1


def _blob(seed: int, n: int) -> str:
    """n incompressible characters, the same for the same seed (so the log
    writes are large enough to tear)."""
    return random.Random(seed).randbytes(n // 2).hex()


def _workload() -> list:
    """(db, command) pairs: deterministic (every _id given)."""
    w = [("app", {"create": "c"}),
         ("app", {"createIndexes": "c", "indexes": [
             {"key": {"u": 1}, "name": "u_1", "unique": True},
             {"key": {"tags": 1}, "name": "tags_1"},
             {"key": {"g": 1, "n": -1}, "name": "g_1_n_-1"}]}),
         ]
    for i in range(8):
        w.append(("app", {"insert": "c", "documents": [
            {"_id": i, "u": i, "g": i % 3, "n": i * 10, "tags": [i, i + 1],
             "s": _blob(i, i * 700)}]}))
    w.append(("app", {"insert": "c", "documents": [
        {"_id": 100 + j, "u": 100 + j, "g": j % 2, "n": j, "tags": ["t"]} for j in range(5)]}))
    w.append(("app", {"insert": "c", "documents": [{"_id": 200, "u": 3}]}))  # duplicate u
    w.append(("admin", {"fsync": 1}))
    w.append(("app", {"update": "c", "updates": [
        {"q": {"_id": 2}, "u": {"$set": {"n": 999, "tags": [7, 8, 9]}}},
        {"q": {"g": 1}, "u": {"$inc": {"n": 1}}, "multi": True}]}))
    w.append(("app", {"update": "c", "updates": [
        {"q": {"_id": 3}, "u": {"_id": 3, "u": 33, "g": 0, "n": -1, "tags": []}}]}))
    w.append(("app", {"update": "c", "updates": [
        {"q": {"_id": 300}, "u": {"$set": {"u": 300, "g": 2}}, "upsert": True}]}))
    w.append(("app", {"delete": "c", "deletes": [{"q": {"_id": 4}, "limit": 1}]}))
    w.append(("app", {"findAndModify": "c", "query": {"_id": 5},
                      "update": {"$push": {"tags": "fm"}}, "new": True}))
    w.append(("app", {"insert": "d", "documents": [{"_id": k, "big": _blob(50 + k, 9000)}
                                                    for k in range(3)]}))
    w.append(("app", {"createIndexes": "d", "indexes": [{"key": {"big": 1}, "name": "big_1"}]}))
    w.append(("admin", {"fsync": 1}))
    w.append(("app", {"delete": "c", "deletes": [{"q": {"g": 0}, "limit": 0}]}))
    w.append(("app", {"dropIndexes": "c", "index": "tags_1"}))
    w.append(("app", {"update": "d", "updates": [
        {"q": {"_id": 1}, "u": {"$set": {"big": _blob(60, 20000)}}}]}))
    w.append(("app", {"drop": "d"}))
    for i in range(3):
        w.append(("app", {"insert": "c", "documents": [{"_id": 400 + i, "u": 400 + i,
                                                        "tags": [i], "s": _blob(70 + i, 3000)}]}))
    w.append(("admin", {"fsync": 1}))
    w.append(("app", {"insert": "c", "documents": [
        {"_id": 500 + j, "u": 500 + j, "g": j % 3, "s": _blob(80 + j, 1500)} for j in range(30)]}))
    w.append(("app", {"update": "c", "updates": [
        {"q": {"_id": {"$gte": 500}}, "u": {"$set": {"s": "short"}}, "multi": True}]}))
    w.append(("admin", {"renameCollection": "app.c", "to": "app.e"}))
    w.append(("app", {"insert": "e", "documents": [{"_id": 600, "u": 600}]}))
    return w


def _snapshot(srv) -> dict:
    """Every collection's documents (raw BSON, _id order) and index names."""
    out = {}
    colls = srv.command("app", {"listCollections": 1, "nameOnly": True})
    for c in sorted(x["name"] for x in colls["cursor"]["firstBatch"]):
        docs = srv.command("app", {"find": c, "sort": {"_id": 1}, "batchSize": 100000})
        names = srv.command("app", {"listIndexes": c})["cursor"]["firstBatch"]
        out[c] = ([bson.encode(d) for d in docs["cursor"]["firstBatch"]],
                  sorted(i["name"] for i in names))
    return out


def _ok(reply_bytes: bytes) -> bool:
    r = bson.decode(reply_bytes)
    return bool(r.get("ok")) and not r.get("writeErrors") and not r.get("writeConcernError")


def _run(srv, work) -> list:
    """Run commands until one fails; returns their success flags."""
    flags = []
    for db, cmd in work:
        flags.append(_ok(srv._core.command(db, bson.encode(cmd))))
    return flags


def _reference(tmp_path, work):
    """Each command's expected outcome and the state after each command."""
    d = tmp_path / "ref"
    srv = multifora.Server(str(d), port=0)
    states = [_snapshot(srv)]
    oks = []
    for db, cmd in work:
        oks.append(_ok(srv._core.command(db, bson.encode(cmd))))
        states.append(_snapshot(srv))
    srv.stop()
    shutil.rmtree(d)
    return oks, states


def _count_calls(tmp_path, work) -> int:
    d = tmp_path / "count"
    faults = _core._Faults()  # the server's fault table, counting only
    faults.set("", "EIO", INT_MAX, 0)
    try:
        srv = multifora.Server(str(d), port=0, _faults=faults)
        _run(srv, work)
        srv.stop()
        calls = faults.stats()[0]
    finally:
        faults.clear()
    shutil.rmtree(d)
    return calls


def _check_image(d, expect_oks, states, k, kind) -> dict:
    """One crash point: run, cut the power at call k, reopen, compare."""
    _core._sim_enable(True)
    faults = _core._Faults()  # the server's fault table: armed before it opens
    faults.set("", kind, k, -1)
    acked = 0
    opened = False
    try:
        try:
            srv = multifora.Server(str(d), port=0, _faults=faults)
            opened = True
        except multifora.MultiforaError:
            srv = None
        if srv is not None:
            for i, (db, cmd) in enumerate(_workload()):
                ok = _ok(srv._core.command(db, bson.encode(cmd)))
                if ok != expect_oks[i]:
                    break  # the first command the lost power failed
                acked = i + 1
            srv.stop()
        torn = faults.stats()[2]
        faults.clear()
        _core._sim_crash()
    finally:
        faults.clear()
        _core._sim_enable(False)  # never leave tracking on for other tests
    srv = multifora.Server(str(d), port=0)  # every image opens
    try:
        got = _snapshot(srv)
        # acknowledged commands all there; the failed one wholly or not at all
        allowed = [states[acked]] + ([states[acked + 1]] if acked + 1 < len(states) else [])
        if acked < len(expect_oks):
            # An insert creates a missing collection first, as its own
            # durable step (mongod does too): that may outlive the insert.
            db, cmd = _workload()[acked]
            if "insert" in cmd and cmd["insert"] not in states[acked]:
                allowed.append(dict(states[acked], **{cmd["insert"]: ([], ["_id_"])}))
        assert got in allowed, (
            f"crash point {k} ({kind}): {acked} commands acknowledged, state differs: "
            f"{_diff(got, states[acked])}")
        for c in got:
            v = srv.command("app", {"validate": c})
            assert v["valid"] is True, (k, kind, c, v["errors"])
        for c in got:
            if "g_1_n_-1" not in got[c][1]:
                continue
            by_index = srv.command("app", {"count": c, "query": {"g": {"$gte": 0}},
                                           "hint": "g_1_n_-1"})["n"]
            by_scan = srv.command("app", {"count": c, "query": {"g": {"$gte": 0}},
                                          "hint": {"$natural": 1}})["n"]
            assert by_index == by_scan, (k, kind, by_index, by_scan)
        srv.command("app", {"insert": "after", "documents": [{"_id": 1}]})
    finally:
        srv.stop()
    return {"acked": acked, "opened": opened, "torn": torn}


def _diff(got, want) -> str:
    for c in sorted(set(got) | set(want)):
        if got.get(c) != want.get(c):
            g, w = got.get(c, ([], [])), want.get(c, ([], []))
            return (f"collection {c}: {len(g[0])} docs vs {len(w[0])} expected, "
                    f"indexes {g[1]} vs {w[1]}")
    return "?"


@pytest.mark.parametrize("kind", ["EIO", "torn"])
def test_power_loss_at_every_crash_point(tmp_path, request, kind):
    work = _workload()
    oks, states = _reference(tmp_path, work)
    assert oks.count(False) == 1  # the duplicate key, and only it
    calls = _count_calls(tmp_path, work)
    assert calls > 50, calls
    limit = request.config.getoption("--crash-points")
    points = list(range(calls + 1))
    if limit and limit < len(points):
        step = len(points) / limit
        points = sorted({int(i * step) for i in range(limit)})
    torn_writes = 0
    acked_total = 0
    for k in points:
        d = tmp_path / f"p{k}"
        r = _check_image(d, oks, states, k, kind)
        torn_writes += 1 if r["torn"] else 0
        acked_total += r["acked"]
        shutil.rmtree(d)
    print(f"\npower loss ({kind}): {len(points)} crash points of {calls} calls, "
          f"{len(work)} commands, {acked_total} acknowledged commands checked (0 lost)"
          + (f", {torn_writes} torn writes" if kind == "torn" else ""))
    if kind == "torn":
        assert torn_writes > 0
