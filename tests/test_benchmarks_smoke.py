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
