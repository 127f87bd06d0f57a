"""Run the C test binary (built with the package, under ASan/UBSan when the
compiler has them), one pytest case per C case so a failure names its path."""
import os
import subprocess
from pathlib import Path

import pytest

import multifora

CTEST = Path(multifora.__file__).resolve().parent / "_ctest"


def _cases():
    if not CTEST.exists():
        return []
    out = subprocess.run([str(CTEST), "--list"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_binary_is_built():
    assert CTEST.exists(), f"{CTEST} is missing: the package build makes it"
    assert len(_cases()) >= 20


@pytest.mark.parametrize("path", _cases())
def test_c_case(path, tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path),
               MF_FUZZ_REGRESSIONS=str(Path(__file__).resolve().parent / "fuzz_regressions"),
               ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    # The timeout only stops a hung case: the crash loops took past 120 s
    # while other builds shared the 2 cores.
    r = subprocess.run([str(CTEST), path], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, f"{path} failed:\n{r.stdout}\n{r.stderr}"
    assert f"ok {path}" in r.stdout
    assert "ERROR: AddressSanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr
