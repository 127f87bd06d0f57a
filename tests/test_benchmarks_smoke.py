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
