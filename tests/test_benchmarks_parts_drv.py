"""benchmarks/part_driver.py, part_big.py and part_churn.py still run, at
their smoke setting (--smoke), and their results have the common shape with values
that make sense.  No timing is asserted."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SHARED = Path(__file__).resolve().parents[2] / "shared"
if not SHARED.is_dir():
    SHARED = Path("/work/shared")

needs_cc = pytest.mark.skipif(not shutil.which("cc") and not shutil.which("gcc"),
                              reason="no C compiler (the floor stub)")


def run_part(tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    work = tmp_path / "work"
    r = subprocess.run([sys.executable, str(BENCH / f"part_{name}.py"), "--smoke",
                        "--workdir", str(work), "--out", str(out), *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(out.read_text())
    assert result["part"] == name
    for row in result["rows"]:
        assert set(row) >= {"name", "unit", "median", "min", "max", "n"}, row
        assert row["min"] <= row["median"] <= row["max"], row
        assert row["n"] >= 1 and isinstance(row["n"], int), row
        assert "WRONG" not in row.get("note", ""), row
        if "floor" in row:
            # The per-round ratio multifora/floor: its median lies in its range.
            assert 0 < row["ratio_min"] <= row["ratio"] <= row["ratio_max"], row
    assert not any("WRONG" in n for n in result["notes"]), result["notes"]
    return result, work


@needs_cc
@pytest.mark.skipif(not (SHARED / "bench-data").is_dir(), reason="no ../shared/bench-data")
def test_part_driver_smoke(tmp_path):
    result, work = run_part(tmp_path, "driver", "--shared", str(SHARED))
    rows = {r["name"]: r for r in result["rows"]}
    floored = ["find one by _id", "small doc insertOne", "large doc insertOne",
               "small doc bulk insert", "large doc bulk insert"]
    others = ["find many and empty the cursor", "GridFS upload", "GridFS download",
              "LDJSON multi-file import", "LDJSON multi-file export"]
    assert sorted(rows) == sorted("driver: " + t for t in floored + others)
    for name, row in rows.items():
        assert row["unit"] == "MB/s" and row["median"] > 0 and row["n"] == 2, row
        assert ("floor" in row) == (name[len("driver: "):] in floored), row
    # Scores are the spec's dataset sizes over the iteration time: the
    # smoke mode's find one moves 100 x 1,622 bytes per iteration.
    assert "100 x find_one of a 1622 B tweet; 0.16 MB per iteration" in \
        rows["driver: find one by _id"]["note"]
    assert "1 files x 5000 documents" in rows["driver: LDJSON multi-file import"]["note"]
    assert "every iteration's answer checked on MultiforaDB: all 10 tasks correct" \
        in result["notes"]
    assert any(n.startswith("composites over the 10 tasks run") for n in result["notes"])
    # The datasets were extracted into the scratch directory, and only the
    # LDJSON file this mode needs.
    assert sorted(p.name for p in (work / "bench-data" / "parallel" / "ldjson_multi").iterdir()) \
        == ["ldjson000.txt"]


def test_part_big_smoke(tmp_path):
    result, work = run_part(tmp_path, "big")  # 16 MiB: 1,024 documents
    rows = {r["name"]: r for r in result["rows"]}
    assert rows["big: bulk load, 16 KiB documents"]["unit"] == "MB/s"
    # 256 loaded + 200 single inserts, then reopened twice at each size.
    assert rows["big: reopen after kill -9 at 7.1 MiB"]["n"] == 2
    assert rows["big: acknowledged insert_one surviving kill -9"]["median"] == 200
    count = rows["big: count after kill -9 during load and reopen"]
    # Everything the writer had acknowledged (at least one batch of 512
    # after the 1,024 of the load), at most one more batch.
    lo, hi = (int(x.replace(",", "")) for x in
              re.search(r"expected ([\d,]+)\.\.([\d,]+) ", count["note"]).groups())
    assert lo >= 1024 + 512 and hi == lo + 512 and lo <= count["median"] <= hi, count
    size2 = f"{count['median'] * 16384 / 2**20:.1f} MiB"
    assert rows[f"big: reopen after kill -9 at {size2}"]["unit"] == "s"
    assert rows[f"big: server RSS after reopen at {size2}"]["median"] > 0
    assert rows[f"big: bytes on disk at {size2}"]["median"] * 2**20 >= count["median"] * 16384
    assert [s for s, _ in result["series"]["reopen_s"]] == [456 * 16384, count["median"] * 16384]
    correct = [n for n in result["notes"] if n.endswith("(correct)")]
    assert len(correct) == 2, result["notes"]
    assert correct[0].startswith("kill -9 after loading 7.1 MiB and 200 acknowledged "
                                 "insert_one: reopened with 456 documents (expected 456)")
    assert list(work.iterdir()) == []  # the data directory is removed


def test_part_churn_smoke(tmp_path):
    result, _ = run_part(tmp_path, "churn")
    names = [r["name"] for r in result["rows"]]
    assert names == [f"churn: {m}, {s} documents: data file / live data"
                     for s in ("16.0 KiB", "200 B") for m in ("delete-refill", "random-update")]
    for key, series in result["series"]["churn"].items():
        assert [p["round"] for p in series] == [0, 1, 2], key
        for p in series:
            # The data file holds at least the live documents after a checkpoint.
            assert p["ratio"] >= 1.0 and p["data_alloc"] >= p["live"], (key, p)
            assert p["live"] == (200 * 16384 if key.endswith(" 16384") else 1000 * 200)
    for row in result["rows"]:
        assert row["unit"] == "x" and row["n"] == 3, row
    assert any(n.endswith("matched the model (correct)") for n in result["notes"])
