"""Reliability, fuzzing (issue 7): libFuzzer targets, built with clang and
ASan + UBSan, for the wire frame parser, BSON validation and the
write-ahead log's block decoder (csrc/test/fuzz.h says what each target
feeds in and what it checks).

The module compiles them from csrc/ with clang directly (build/fuzz/), seeds
each from ../shared/spec/bson-corpus at run time (the seeds are written to
build/fuzz/seeds/, never into the repository), and runs the three at once
for ``--fuzz-seconds`` each (default 60; the machine has 2 cores, so the
three share them).  A crash, a sanitizer report, a broken property, a
timeout or a leak fails the run and names the input libFuzzer saved; that
input then belongs in tests/fuzz_regressions/<target>/, where every test run
replays it: through the libFuzzer binaries here, and through the C test
binary's ASan/UBSan build (the case /fuzz/regressions) in test_ctest.py.

Without clang or libFuzzer the module skips with the reason -- except under
CI (CI=true), where tools/dev.sh installs clang-14 and a skip would hide the
suite, so it fails instead.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import bson
import pytest
from bson.son import SON

REPO = Path(__file__).resolve().parents[1]
CSRC = REPO / "csrc"
CORPUS = REPO.parent / "shared" / "spec" / "bson-corpus"
REGRESSIONS = REPO / "tests" / "fuzz_regressions"
OUT = REPO / "build" / "fuzz"
TARGETS = ("bson", "wire", "wal", "scram")
# The sources a target needs: the harness and what it reaches.
SOURCES = (["csrc/test/fuzz_targets.c", "csrc/wire/msg.c", "csrc/storage/wal.c",
            "csrc/storage/os.c", "csrc/command/scram.c"]
           + [str(p.relative_to(REPO)) for p in sorted(CSRC.glob("bsonx/*.c"))]
           + [str(p.relative_to(REPO)) for p in sorted(CSRC.glob("util/*.c"))])
# (libcrypto: the MD5 of bsonx/hash.c, every bsonx file being linked in)
PKGS = ["libbson-1.0", "liblz4", "libxxhash", "icu-i18n", "icu-uc", "libcrypto"]
FLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O1", "-g", "-fno-omit-frame-pointer",
         "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
MAX_LEN = {"bson": 4096, "wire": 8192, "wal": 65536, "scram": 1024}
SALT = 0x5EED5EED5EED5EED  # MF_FUZZ_WAL_SALT
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1:symbolize=1",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}


def _clang():
    for name in ("clang", "clang-14", "clang-15", "clang-16"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _skip_or_fail(reason: str):
    if os.environ.get("CI", "") not in ("", "0", "false"):
        pytest.fail(f"{reason} -- under CI the set-up (tools/dev.sh) must install it")
    pytest.skip(reason)


def _run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)


def _pkg_config(*args):
    r = _run(["pkg-config", *args, *PKGS])
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def _build(clang: str) -> dict:
    """Compile the shared objects once (in parallel, only what changed) and
    link one binary per target.  Returns {target: path}."""
    objdir = OUT / "obj"
    objdir.mkdir(parents=True, exist_ok=True)
    cflags = FLAGS + ["-fsanitize=fuzzer-no-link"] + _pkg_config("--cflags")
    headers = max(p.stat().st_mtime for p in CSRC.rglob("*.h"))
    jobs, objects = [], []
    for src in SOURCES[1:]:
        obj = objdir / (src.replace("/", "_")[:-2] + ".o")
        objects.append(obj)
        if not obj.exists() or obj.stat().st_mtime < max(headers, (REPO / src).stat().st_mtime):
            jobs.append((src, obj))
    for t in TARGETS:
        obj = objdir / f"glue_{t}.o"
        src = SOURCES[0]
        if not obj.exists() or obj.stat().st_mtime < max(headers, (REPO / src).stat().st_mtime):
            jobs.append((src, obj, f"-DMF_FUZZ_TARGET=mf_fuzz_{t}"))
    running = []
    for job in jobs:
        src, obj = job[0], job[1]
        running.append((subprocess.Popen([clang, *cflags, *job[2:], "-c", src, "-o", str(obj)],
                                          cwd=REPO, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True), src))
        if len(running) >= 2:
            _wait_compile(running.pop(0))
    for r in running:
        _wait_compile(r)
    # bsonx/decimal.c wraps Intel's decimal library, a static archive with
    # no .pc file (setup.py finds it the same way: by name, in the system
    # library directories)
    libs = _pkg_config("--libs") + ["-l:libbidgcc000.a", "-lm", "-pthread"]
    bins = {}
    for t in TARGETS:
        exe = OUT / f"fuzz_{t}"
        r = _run([clang, *FLAGS, "-fsanitize=fuzzer", str(objdir / f"glue_{t}.o"),
                  *map(str, objects), "-o", str(exe), *libs], cwd=REPO)
        assert r.returncode == 0, f"linking fuzz_{t} failed:\n{r.stderr}"
        bins[t] = exe
    return bins


def _wait_compile(item):
    proc, src = item
    out, _ = proc.communicate()
    assert proc.returncode == 0, f"clang failed on {src}:\n{out}"


@pytest.fixture(scope="module")
def fuzzers():
    clang = _clang()
    if clang is None:
        _skip_or_fail("clang is not installed (Debian: apt-get install clang-14)")
    probe = OUT / "probe"
    probe.mkdir(parents=True, exist_ok=True)
    (probe / "p.c").write_text(
        "#include <stdint.h>\n#include <stddef.h>\n"
        "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n")
    r = _run([clang, "-fsanitize=fuzzer,address,undefined", str(probe / "p.c"),
              "-o", str(probe / "p")])
    if r.returncode != 0:
        _skip_or_fail("clang cannot link libFuzzer (Debian: apt-get install libclang-rt-14-dev): "
                      + r.stderr.strip().splitlines()[-1])
    t0 = time.monotonic()
    bins = _build(clang)
    print(f"\nfuzz targets built in {time.monotonic() - t0:.1f} s")
    return bins


# ------------------------------------------------------------------- seeds

def _corpus_docs():
    valid, invalid = [], []
    for f in sorted(CORPUS.glob("*.json")):
        spec = json.loads(f.read_text())
        for c in spec.get("valid", []):
            for key in ("canonical_bson", "degenerate_bson"):
                if key in c:
                    valid.append(bytes.fromhex(c[key]))
        for c in spec.get("decodeErrors", []):
            invalid.append(bytes.fromhex(c["bson"]))
    return valid, invalid


def _op_msg(sections: bytes, flags=0, opcode=2013) -> bytes:
    payload = struct.pack("<I", flags) + sections
    if flags & 1:
        payload += b"\0\0\0\0"  # a CRC-32C slot, filled by the target (mode bit 1)
    return struct.pack("<iiii", 16 + len(payload), 1, 0, opcode) + payload


def _seq(name: str, docs) -> bytes:
    body = name.encode() + b"\0" + b"".join(docs)
    return b"\x01" + struct.pack("<i", 4 + len(body)) + body


def _wire_seeds(valid, invalid):
    insert = bson.encode(SON([("insert", "c"), ("$db", "test")]))
    out = []
    for d in valid:
        out.append(b"\x01" + _op_msg(b"\x00" + d))
        out.append(b"\x03" + _op_msg(_seq("documents", [d, d]) + b"\x00" + insert, flags=1))
        q = struct.pack("<i", 0) + b"admin.$cmd\0" + struct.pack("<ii", 0, -1) + d
        out.append(b"\x01" + struct.pack("<iiii", 16 + len(q), 1, 0, 2004) + q)
    for d in invalid:
        out.append(b"\x01" + _op_msg(b"\x00" + d))
    two = _op_msg(b"\x00" + bson.encode({"ping": 1, "$db": "admin"}))
    out.append(b"\x00" + two + two)  # two messages back to back
    return out


def _lz4_literals(data: bytes) -> bytes:
    """An LZ4 block of one literal-only sequence (valid LZ4 block format)."""
    n = len(data)
    token = min(n, 15) << 4
    ext = b""
    if n >= 15:
        rest = n - 15
        ext = b"\xff" * (rest // 255) + bytes([rest % 255])
    return bytes([token]) + ext + data


def _block(first_lsn: int, records, lz4=False) -> bytes:
    raw = b"".join(struct.pack("<I", len(r)) + r for r in records)
    stored = _lz4_literals(raw) if lz4 else raw
    hdr = (b"MFWB" + bytes([1 if lz4 else 0]) + b"\0\0\0" + struct.pack("<Q", SALT)
           + struct.pack("<QIII", first_lsn, len(records), len(raw), len(stored))
           + b"\0" * 12)  # header and payload hashes: mode bit 0 computes them
    return hdr + stored


def _wal_seeds(valid):
    out = []
    docs = [d for d in valid if len(d) < 200]
    for i in range(0, len(docs), 24):
        chunk = docs[i:i + 24]
        blocks, lsn = b"", 1
        for j in range(0, len(chunk), 4):
            recs = chunk[j:j + 4]
            blocks += _block(lsn, recs, lz4=(j // 4) % 2 == 1)
            lsn += len(recs)
        out.append(bytes([1 | 4]) + blocks)
        out.append(bytes([1 | 2]) + blocks)
        out.append(bytes([1 | 4]) + blocks[:-7])  # a torn tail
    return out


# client-first NUL client-final, for each mechanism (RFC 5802/7677's
# messages, and a few of mongod's refusals)
SCRAM_SEEDS = [
    b"\x00n,,n=user,r=rOprNGfwEbeRWgbNEkqO\x00c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFI"
    b"lj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    b"\x01n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL\x00c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZV"
    b"vWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
    b"\x00y,a=us=2Cer,n=us=2Cer,r=abcdefgh\x00c=eSws,r=abcdefgh,p=AAAA",
    b"\x00p=tls-unique,,n=u,r=abcd\x00",
    b"\x00n,,m=x,n=u,r=abcd\x00",
    b"\x01n,,n=I\xc2\xadX\xe2\x85\xa8,r=abcdefgh\x00c=biws,,,r=abcdefgh,p=====",
]


def _write_seeds(target: str, seeds) -> Path:
    d = OUT / "seeds" / target
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    for s in seeds:
        (d / hashlib.sha1(s).hexdigest()).write_bytes(s)
    return d


@pytest.fixture(scope="module")
def seeds():
    if not CORPUS.is_dir():
        pytest.skip(f"{CORPUS} is absent: the fuzzers are seeded from the BSON corpus")
    valid, invalid = _corpus_docs()
    return {"bson": _write_seeds("bson", valid + invalid),
            "wire": _write_seeds("wire", _wire_seeds(valid, invalid)),
            "wal": _write_seeds("wal", _wal_seeds(valid)),
            "scram": _write_seeds("scram", SCRAM_SEEDS)}


# ------------------------------------------------------------------- runs

def _stats(text: str) -> dict:
    out = {}
    for key in ("number_of_executed_units", "average_exec_per_sec", "new_units_added",
                "peak_rss_mb"):
        m = re.search(rf"stat::{key}:\s+(\d+)", text)
        out[key] = int(m.group(1)) if m else None
    m = re.findall(r"cov: (\d+) ft: (\d+)", text)
    out["coverage_edges"] = int(m[-1][0]) if m else None
    return out


@pytest.fixture(scope="module")
def fuzz_runs(fuzzers, seeds, request):
    """Run the three targets at once; {target: (returncode, log, stats,
    artifacts)}."""
    secs = request.config.getoption("--fuzz-seconds")
    procs = {}
    for t, exe in fuzzers.items():
        corpus = OUT / "corpus" / t
        art = OUT / "artifacts" / t
        corpus.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(art, ignore_errors=True)
        art.mkdir(parents=True)
        log = open(OUT / f"fuzz_{t}.log", "w+")
        cmd = [str(exe), f"-max_total_time={secs}", "-timeout=10", "-rss_limit_mb=2048",
               f"-max_len={MAX_LEN[t]}", "-print_final_stats=1", f"-artifact_prefix={art}/",
               str(corpus), str(seeds[t])]
        procs[t] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **SAN_ENV)), log, art, cmd)
    out = {}
    for t, (proc, log, art, cmd) in procs.items():
        try:
            rc = proc.wait(timeout=secs + 300)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        log.seek(0)
        text = log.read()
        log.close()
        out[t] = (rc, text, _stats(text), sorted(art.iterdir()), cmd)
    summary = {t: dict(r[2], seconds=secs) for t, r in out.items()}
    (OUT / "last_run.json").write_text(json.dumps(summary, indent=2) + "\n")
    print("\nfuzz run (targets concurrently, " + f"{os.cpu_count()} cpus): "
          + json.dumps(summary))
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_fuzz_target(fuzz_runs, target):
    rc, text, stats, artifacts, cmd = fuzz_runs[target]
    if rc != 0 or artifacts:
        tail = "\n".join(text.splitlines()[-60:])
        pytest.fail(
            f"fuzz_{target} found a failure (exit {rc}); input(s): "
            f"{', '.join(map(str, artifacts)) or '(none saved)'}\n"
            f"Reproduce: {cmd[0]} <input>; then commit it as tests/fuzz_regressions/{target}/"
            f"<name> and fix the bug.\n{tail}")
    assert stats["number_of_executed_units"] and stats["number_of_executed_units"] > 1000, text[-2000:]


@pytest.mark.parametrize("target", TARGETS)
def test_regressions_replay_under_libfuzzer(fuzzers, target):
    """Each committed regression input, through its libFuzzer binary."""
    files = sorted(p for p in (REGRESSIONS / target).glob("*") if p.is_file()) \
        if (REGRESSIONS / target).is_dir() else []
    if not files:
        pytest.skip(f"no regression input for {target}")
    r = _run([str(fuzzers[target]), *map(str, files)], env=dict(os.environ, **SAN_ENV),
             timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert len(re.findall(r"Running: ", r.stderr)) == len(files), r.stderr[-3000:]


def test_regression_inputs_are_named_by_target():
    assert REGRESSIONS.is_dir()
    for p in REGRESSIONS.iterdir():
        assert p.name in TARGETS or p.name == "README.md", p
