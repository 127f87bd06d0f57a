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


@pytest.mark.parametrize("keys", ["int", "str"])
def test_index_bench_runs(tmp_path, keys):
    r = subprocess.run([sys.executable, str(BENCH / "index_bench.py"), "--docs", "20000",
                        "--small", "1000", "--rounds", "2", "--ops", "50", "--reps", "3",
                        "--keys", keys, "--dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert f"load big: 20000 documents x 100 B ({keys} keys) in " in out, out
    assert f"load small: 1000 documents x 100 B ({keys} keys) in " in out, out
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
    for form in ("find", "count"):
        for plan in ("indexed", "unindexed"):
            assert f"  {form:<6}{plan:<10} min " in out, out
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
