"""benchmarks/part_peers.py runs and checks its stores' answers (tiny sizes; no
timing is asserted)."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

from part_peers import OPS, _expected, _same  # noqa: E402
from peers.workload import Workload  # noqa: E402

ALWAYS = ["multifora", "multifora-direct", "sqlite-json"]  # no bench extra needed
OPTIONAL = {"mongomock": "mongomock", "montydb-sqlite": "montydb", "mongita": "mongita"}


def _run(tmp_path, peers, size, cap):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(BENCH / "part_peers.py"), "--sizes", str(size),
                        "--cap", str(cap), "--peers", ",".join(peers), "--out", str(out),
                        "--workdir", str(tmp_path / "work")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert list((tmp_path / "work").iterdir()) == []  # the stores' directories are removed
    return json.loads((out / "peers.json").read_text()), r.stdout


def test_workload_answers():
    wl = Workload(3000)
    docs = [wl.doc(i) for i in range(3000)]
    assert sorted(d["k"] for d in docs) == list(range(3000))
    assert sorted(d["n"] for d in docs) == list(range(3000))
    assert all(wl.id_of_k(d["k"]) == d["_id"] for d in docs)
    groups = wl.groups()
    assert len(groups) == 100 and groups[7] == (7, 30, sum(d["n"] for d in docs if d["g"] == 7))
    assert docs[5] == {"_id": 5, "k": 5 * wl.a % 3000, "n": 5 * wl.b % 3000, "g": 5, "u": 0,
                       "s": format(5 * 2654435761, "032x")}


def test_wrong_answers_are_caught():
    wl = Workload(1000)
    assert _same("find_by_k", wl.doc(wl.id_of_k(17)), _expected("find_by_k", wl, (17,)))
    assert not _same("find_by_k", wl.doc(17), _expected("find_by_k", wl, (17,)))
    assert not _same("find_by_id", dict(wl.doc(3), u=1), _expected("find_by_id", wl, (3,)))
    assert not _same("find_by_id", None, _expected("find_by_id", wl, (3,)))
    assert _same("count_range", 500, _expected("count_range", wl, (100, 600)))
    assert not _same("count_range", 499, _expected("count_range", wl, (100, 600)))
    assert not _same("count_range", 500.0, 500)  # a count is an int
    assert not _same("group", wl.groups()[:-1], wl.groups())
    assert not _same("update_one", 0, 1)


def test_part_peers_runs(tmp_path):
    res, text = _run(tmp_path, ALWAYS, 2000, 10)
    assert res["part"] == "peers"
    assert not [n for n in res["notes"] if "WRONG" in n or "failed" in n], res["notes"]
    rows = {(r["peer"], r["op"]): r for r in res["rows"]}
    for peer in ALWAYS:
        for op in ("insert_many",) + OPS:
            r = rows[(peer, op)]
            assert r["size"] == 2000 and r["n"] >= 1, r
            assert 0 < r["min"] <= r["median"] <= r["max"], r
            assert r["unit"] == ("us/doc" if op == "insert_many" else "us/op")
            assert "WRONG" not in r.get("note", "")
            assert ("ratio" in r) == (peer != "multifora"), r
            assert res["series"]["peer_curves"][peer][op] == [[2000, r["median"]]]
        assert rows[(peer, "disk")]["unit"] == "B/doc"
    assert rows[("multifora", "insert_many")]["n"] == 2  # two batches of 1,000
    assert res["series"]["gave_up"] == {} and res["series"]["sizes"] == [2000]
    assert "find_one by _id @ 2k: sqlite-json" in text
    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "out" / "peers.png").stat().st_size > 10_000


@pytest.mark.skipif(not any(importlib.util.find_spec(m) for m in OPTIONAL.values()),
                    reason="no optional peer installed (pip install multifora[bench])")
def test_part_peers_optional_stores(tmp_path):
    present = [p for p, m in OPTIONAL.items() if importlib.util.find_spec(m)]
    res, _ = _run(tmp_path, ["multifora"] + present, 1000, 4)
    assert not [n for n in res["notes"] if "WRONG" in n], res["notes"]
    ops = {(r["peer"], r["op"]) for r in res["rows"]}
    for peer in present:
        assert (peer, "find_by_id") in ops and (peer, "count_range") in ops
        has_group = peer == "mongomock"
        assert ((peer, "group") in ops) == has_group
        if not has_group:
            assert f"{peer}: no group row (no aggregate)" in res["notes"]
