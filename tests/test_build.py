"""What the build promises: one exported symbol, and a clear stop when a
library is missing."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import multifora._core as core

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not shutil.which("nm"), reason="nm not installed")
def test_only_the_module_init_is_exported():
    out = subprocess.run(["nm", "-D", "--defined-only", core.__file__],
                         capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines()
                if len(line.split()) == 3 and line.split()[1] in "TDBRVWi"}
    assert exported == {"PyInit__core"}, exported


@pytest.mark.skipif(not (REPO / "setup.py").exists(), reason="no source tree")
def test_missing_library_names_the_debian_package(tmp_path):
    env = dict(os.environ, PKG_CONFIG_LIBDIR=str(tmp_path), PKG_CONFIG_PATH=str(tmp_path))
    r = subprocess.run([sys.executable, "setup.py", "--name"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "libbson-dev" in r.stderr and "liblz4-dev" in r.stderr
    assert "apt-get install" in r.stderr
