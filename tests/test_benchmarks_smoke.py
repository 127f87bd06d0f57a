"""The benchmarks still run (tiny sizes; no timing is asserted)."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.skipif(not shutil.which("cc") and not shutil.which("gcc"), reason="no C compiler")
def test_ping_latency_runs():
    r = subprocess.run([sys.executable, str(BENCH / "ping_latency.py"), "--rounds", "2",
                        "--pings", "20"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ratio multifora/stub per round" in r.stdout


@pytest.mark.skipif(not shutil.which("cc") and not shutil.which("gcc"), reason="no C compiler")
def test_storage_bench_runs(tmp_path):
    r = subprocess.run([sys.executable, str(BENCH / "storage_bench.py"), "--dir", str(tmp_path),
                        "--reopen-gb", "0.01", "--churn", "16384:200", "--no-commit"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "count 610 (correct); last document byte-identical" in r.stdout, r.stdout
    assert "random replacement 5x" in r.stdout


@pytest.mark.skipif(not shutil.which("cc") and not shutil.which("gcc"), reason="no C compiler")
def test_crud_latency_runs():
    r = subprocess.run([sys.executable, str(BENCH / "crud_latency.py"), "--rounds", "2",
                        "--ops", "20", "--preload", "300"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    # 300 preloaded + (200 warm-up + 2 rounds x 20) inserts on the multifora side.
    assert "300 preloaded + 240 inserted = 540 documents (correct)" in r.stdout, r.stdout
    for op in ("find_one", "insert_one"):
        assert f"{op} ratio multifora/stub per round: min " in r.stdout, r.stdout


def test_scan_count_runs(tmp_path):
    # 0.002 GiB: 131 documents of 16 KiB.
    r = subprocess.run([sys.executable, str(BENCH / "scan_count.py"), "--gb", "0.002",
                        "--reps", "3", "--batch", "50", "--dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "load: 131 documents x 16384 B" in out, out
    assert "count: 66 of 131 match (expected 66: correct)" in out, out
    assert out.count("size on disk after ") == 2, out
    assert "figures are warm-cache" in out, out
    for path in ("wire", "in-process"):
        assert f"  {path:<11} min " in out, out
    assert "ratio wire/in-process per repetition: min " in out, out
    assert list(tmp_path.iterdir()) == []  # the scratch data directory is removed


@pytest.mark.parametrize("keys, doc_bytes", [("int", 100), ("str", 100), ("int", 300)])
def test_index_bench_runs(tmp_path, keys, doc_bytes):
    r = subprocess.run([sys.executable, str(BENCH / "index_bench.py"), "--docs", "20000",
                        "--small", "1000", "--rounds", "2", "--ops", "50", "--reps", "3",
                        "--keys", keys, "--doc-bytes", str(doc_bytes), "--dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert f"load big: 20000 documents x {doc_bytes} B ({keys} keys) in " in out, out
    assert f"load small: 1000 documents x {doc_bytes} B ({keys} keys) in " in out, out
    assert "documents: big 20000, small 1000 (correct)" in out, out
    # Point lookups: planned on k_1, one document fetched, on both collections.
    for side in ("big", "small"):
        line = next(x for x in out.splitlines()
                    if x.startswith(f"explain find {{k: v}} on {side}: "))
        assert "FETCH <- IXSCAN k_1; totalKeysExamined " in line, line
        assert line.endswith(", totalDocsExamined 1, nReturned 1 (correct)"), line
    assert "lookups checked: 50 keys per collection on both paths (correct)" in out, out
    for op in ("find_one", "in-process"):
        assert f"{op} ratio big/small per round: min " in out, out
    # The range query: IXSCAN on r_1 as planned, COLLSCAN of every document
    # with hint $natural; the same documents from both.
    assert "explain find range as planned: FETCH <- IXSCAN r_1; " in out, out
    assert "explain find range hint $natural: COLLSCAN; " in out, out
    assert "totalDocsExamined 20000, nReturned " in out, out
    for line in out.splitlines():
        if line.startswith("explain find "):
            assert line.endswith("(correct)"), line
    assert "explain count range as planned: " in out, out
    assert ("same documents from both plans, and count = expected: 3 of 3 repetitions "
            "(correct)") in out, out
    for form in ("find", "count", "in-process"):
        for plan in ("indexed", "unindexed"):
            assert f"  {form:<11}{plan:<10} min " in out, out
        assert f"  {form} speedup unindexed/indexed per repetition: min " in out, out
    assert "all checks passed" in out, out
    assert list(tmp_path.iterdir()) == []  # the scratch data directory is removed


def test_agg_group_runs(tmp_path):
    r = subprocess.run([sys.executable, str(BENCH / "agg_group.py"), "--docs", "3000",
                        "--keys", "30", "--reps", "2", "--dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "loaded 3,000 documents in " in out, out
    assert "3,000 documents, 30 keys, 2 repetitions each" in out, out
    for name in ("group", "count"):
        assert any(x.lstrip().startswith(name + " ") for x in out.splitlines()), out
    assert "time ratio group/count per round: min " in out, out
    assert list(tmp_path.iterdir()) == []  # the scratch data directory is removed


def _run_py(tmp_path, *args):
    out = tmp_path / "results"
    r = subprocess.run([sys.executable, str(BENCH / "run.py"), *args, "--out", str(out),
                        "--scratch", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    files = sorted(p.name for p in out.iterdir()) if out.exists() else []
    return r, out, files


TABLE_ROWS = [
    "insertOne sequential x20", "bulk insert, 16 KiB documents", "createIndex({k: 1})",
    "countDocuments({})", "findOne({_id: ObjectId})", "findOne({k: v}), indexed",
    "count {p: {$gte, $lt}}, unindexed (10%)", "find().sort({_id: -1}).limit(20)",
    "find({}, {k, p}).limit(1000)", "aggregate $group by k", "updateOne({_id}) x10",
    "updateMany({k: 7}, {$inc})", "deleteOne({_id}) + insertOne",
    "concurrent durable insertOne, 1 client", "concurrent durable insertOne, 4 clients",
    "server RSS", "bytes on disk, open", "kill -9 reopen",
    "bytes on disk, after clean shutdown"]


@pytest.mark.skipif(not shutil.which("cc") and not shutil.which("gcc"), reason="no C compiler")
def test_run_table_smoke(tmp_path):
    import json
    r, out, files = _run_py(tmp_path, "--smoke", "--parts", "table")
    assert r.returncode == 0, r.stderr
    stem = next(f[:-5] for f in files if f.endswith("-smoke.json"))
    assert f"{stem}.md" in files
    try:
        import matplotlib  # noqa: F401
        assert f"{stem}.png" in files
    except ImportError:
        pass
    res = json.loads((out / f"{stem}.json").read_text())
    assert res["mode"] == "smoke" and res["machine"]["cores"] >= 1
    assert res["machine"]["memtotal_bytes"] > 0 and res["software"]["pymongo"]
    assert len(res["load_start"]) == 3 and len(res["load_end"]) == 3
    part = res["parts"]["table"]
    assert part["status"] == "ok", part
    rows = {row["name"]: row for row in part["rows"]}
    assert list(rows) == TABLE_ROWS
    no_floor = {"server RSS"}
    for name, row in rows.items():
        assert 0 < row["min"] <= row["median"] <= row["max"], row
        assert row["n"] >= 1, row
        if name in no_floor:
            assert "floor" not in row and "ratio" not in row, row
        else:
            assert row["floor"] > 0 and row["ratio_min"] <= row["ratio"] <= row["ratio_max"], row
    # Timed rows alternate 2 rounds a side; bulk insert is one value per chunk (256/32).
    assert rows["findOne({_id: ObjectId})"]["n"] == 2
    assert rows["bulk insert, 16 KiB documents"]["n"] == 8
    assert rows["kill -9 reopen"]["n"] == 2
    # The floor of bytes on disk is the documents' own bytes: 256 x 16 KiB.
    assert rows["bytes on disk, open"]["floor"] == 4.0
    md = (out / f"{stem}.md").read_text()
    assert "| findOne({_id: ObjectId}) | ms | " in md
    assert [p.name for p in tmp_path.iterdir()] == ["results"]  # scratch removed


def test_run_rows_and_missing_parts(tmp_path):
    import json
    sys.path.insert(0, str(BENCH))
    try:
        import run
    finally:
        sys.path.remove(str(BENCH))
    # The ratio is multifora/floor per round, for a time and a rate alike.
    t = run.make_row("t", "ms", [2.0, 4.0, 3.0], [1.0, 1.0, 2.0])
    assert (t["median"], t["min"], t["max"], t["n"], t["floor"]) == (3.0, 2.0, 4.0, 3, 1.0)
    assert (t["ratio"], t["ratio_min"], t["ratio_max"]) == (2.0, 1.5, 4.0)
    q = run.make_row("q", "docs/s", [100.0, 50.0], [400.0, 400.0])
    assert (q["ratio"], q["ratio_min"], q["ratio_max"]) == (0.1875, 0.125, 0.25)
    # Furthest from the floor on the slower side: the rate, 1/0.1875 = 5.3x.
    # A ratio without a floor (a peer against MultiforaDB) is no distance from a floor.
    peer = dict(run.make_row("p", "us", [50.0]), ratio=100.0)
    far = run.furthest({"parts": {"a": {"rows": [t, q]}, "peers": {"rows": [peer]}}})
    assert [(p, r["name"], round(x, 2)) for p, r, x in far] == [("a", "q", 5.33), ("a", "t", 2.0)]
    assert run.check_part({"part": "x", "rows": [{"name": "a", "unit": "ms", "median": 1,
                                                  "min": 1, "max": 1, "n": True}]}, "x")
    # A part named but not in the tree is an error, recorded; the run exits 1.
    r, out, files = _run_py(tmp_path, "--smoke", "--parts", "nosuch")
    assert r.returncode == 1, r.stderr
    res = json.loads((out / next(f for f in files if f.endswith(".json"))).read_text())
    assert res["parts"]["nosuch"]["status"] == "error"
    assert "part_nosuch.py is not in this tree" in res["parts"]["nosuch"]["reason"]


def test_run_readme_block(tmp_path):
    sys.path.insert(0, str(BENCH))
    try:
        import run
    finally:
        sys.path.remove(str(BENCH))
    row = run.make_row("findOne", "ms", [0.3, 0.4, 0.5], [0.2, 0.2, 0.25])
    results = {"date_utc": "2026-11-30T10:00:00Z", "commit": "abc1234", "load_start": [0.5, 1, 1],
               "machine": {"cores": 2, "cpu": "X", "memtotal_bytes": 2**31},
               "parts": {"table": {"status": "ok", "rows": [row]},
                         "peers": {"status": "absent", "rows": [], "reason": "not here"}}}
    block = run.readme_block(results, "2026-11-30_abc1234", ["2026-11-30_abc1234.png"])
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{run.README_BEGIN}\nold\n{run.README_END}\n\n## Layout\n")
    assert run.update_readme(readme, block) and run.update_readme(readme, block)
    text = readme.read_text()
    assert text.startswith("# x\n\n" + run.README_BEGIN) and text.endswith(
        run.README_END + "\n\n## Layout\n")
    assert "old" not in text and text.count(run.README_BEGIN) == 1
    assert "| findOne | 0.4 ms | 0.3..0.5 | 0.2 ms | 2.00 |" in text
    assert "![comparison table](benchmarks/results/2026-11-30_abc1234.png)" in text
    assert "- peers: absent, 0 rows (not here)" in text
    assert "1. table: findOne: 2.0x its floor (0.4 against 0.2 ms)" in text
    readme.write_text("no markers\n")
    assert not run.update_readme(readme, block) and readme.read_text() == "no markers\n"


def test_huge_pages_ab_runs(tmp_path):
    r = subprocess.run([sys.executable, str(BENCH / "huge_pages_ab.py"), "--docs", "20000",
                        "--reps", "3", "--dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "huge_pages_ab: 20000 documents, 3 repetitions, range width 200" in out, out
    for mode in ("auto", "off"):
        assert f"  {mode:<5} data.mf " in out and f"  {mode:<5} indexed median " in out, out
    assert "insert_many time off/auto per batch: median " in out, out
    assert "indexed time off/auto per repetition: median " in out, out
    assert "same count from both plans on both servers: 3 of 3 (correct)" in out, out
    assert not list(tmp_path.iterdir())  # both data directories removed


def test_distinct_bench_runs():
    r = subprocess.run([sys.executable, str(BENCH / "distinct_bench.py"), "--docs", "2000",
                        "--reps", "2"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "FAIL" not in out, out
    assert "k: 20 values" in out and "u: 2000 values" in out and "_id: 2000 values" in out, out
    assert out.count("ratio scan/index per repetition: min ") == 3, out


def _smoke_part(tmp_path, name):
    """Run one part in smoke mode: its result, checked to be "ok"."""
    import json
    r, out, files = _run_py(tmp_path, "--smoke", "--parts", name)
    assert r.returncode == 0, r.stderr
    stem = next(f[:-5] for f in files if f.endswith("-smoke.json"))
    part = json.loads((out / f"{stem}.json").read_text())["parts"][name]
    assert part["status"] == "ok", part
    return part


# Each part's rows, by name; those named in the third column have no floor
# (a latency, say); every other row has a floor and a ratio.
SMOKE_PARTS = [
    ("txn", ["10 inserts: one transaction vs 10 durable insertOne",
             "read-modify-write of 2 documents: transaction vs plain",
             "5-update transactions, 1 client", "5-update transactions, 4 clients",
             "5-update transactions, 16 clients"], ()),
    ("changes", ["change event latency after the acknowledged write (median)",
                 "change event latency after the acknowledged write (p99)",
                 "durable insert_one with one change stream open vs none"],
     ("change event latency after the acknowledged write (median)",
      "change event latency after the acknowledged write (p99)")),
    ("indexes", ["insert_many with an ascending index vs none",
                 "insert_many with a hashed index vs none",
                 "equality lookup through a hashed index vs a collection scan"], ()),
    ("geo", ["$near limit 10 through a 2dsphere index vs a scan",
             "$near limit 10 through a 2d index vs a scan",
             "$geoWithin 1-degree $centerSphere count, index vs scan",
             "insert_many with a 2dsphere index vs none"], ()),
    ("auth", ["connect + ping over TLS vs plain TCP",
              "find_one by _id over TLS vs plain TCP",
              "connect + ping with SCRAM-SHA-256 vs no credentials",
              "connect + ping with SCRAM-SHA-1 vs no credentials"], ()),
    ("wildcard", None, None),
    ("text", None, None),
]


@pytest.mark.parametrize("name, rows, no_floor", SMOKE_PARTS, ids=[p[0] for p in SMOKE_PARTS])
def test_run_part_smoke(tmp_path, name, rows, no_floor):
    """A part's rows come out, each measured at least once, with a floor
    and a ratio where it has one.  The transaction part also checks that
    its transfers lose nothing."""
    part = _smoke_part(tmp_path, name)
    got = {row["name"]: row for row in part["rows"]}
    if rows is None:
        assert got, part
    else:
        assert list(got) == rows, part
    for row in got.values():
        assert row["n"] >= 1, row
        if no_floor is not None and row["name"] not in no_floor:
            assert row["floor"] > 0 and row["ratio"] > 0, row
