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
