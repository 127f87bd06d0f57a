"""Build and run benchmarks/storage_bench.c: the storage engine's reopen,
churn and group-commit figures (issue 3), on the engine alone.

    python benchmarks/storage_bench.py [--dir DIR] [--reopen-gb 4 16]
                                       [--churn 16384:40000 200:40000] [--no-commit]

DIR defaults to a fresh temporary directory (it needs room for the largest
reopen size plus ~10%); everything written there is removed afterwards.
"""
from __future__ import annotations

import argparse
import glob
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CSRC = HERE.parent / "csrc"


def build(out: Path) -> Path:
    exe = out / "storage_bench"
    sources = [str(HERE / "storage_bench.c")]
    sources += sorted(glob.glob(str(CSRC / "storage" / "*.c")))
    sources += sorted(glob.glob(str(CSRC / "util" / "*.c")))
    cflags = subprocess.run(["pkg-config", "--cflags", "libbson-1.0"], capture_output=True,
                            text=True, check=True).stdout.split()
    libs = subprocess.run(["pkg-config", "--libs", "libbson-1.0", "liblz4", "libxxhash"],
                          capture_output=True, text=True, check=True).stdout.split()
    cc = shutil.which("cc") or "gcc"
    subprocess.run([cc, "-O2", "-g", "-std=c11", "-D_GNU_SOURCE", "-pthread", *cflags,
                    *sources, "-o", str(exe), *libs, "-lm"], check=True)
    return exe


def run(exe: Path, *args: str) -> None:
    sys.stdout.flush()
    subprocess.run([str(exe), *args], check=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None)
    ap.add_argument("--reopen-gb", type=float, nargs="*", default=[4.0, 16.0])
    ap.add_argument("--churn", nargs="*", default=["16384:40000", "200:40000"],
                    help="SIZE:COUNT pairs")
    ap.add_argument("--no-commit", action="store_true")
    args = ap.parse_args(argv)

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="mf-storage-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        exe = build(work)
        for gb in args.reopen_gb:
            d = work / f"reopen-{gb:g}"
            d.mkdir()
            run(exe, "reopen", str(d), str(gb))
            shutil.rmtree(d)
        for spec in args.churn:
            size, count = spec.split(":")
            d = work / f"churn-{size}"
            d.mkdir()
            run(exe, "churn", str(d), size, count)
            shutil.rmtree(d)
        if not args.no_commit:
            d = work / "commit"
            d.mkdir()
            run(exe, "commit", str(d))
            shutil.rmtree(d)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
