"""The MongoDB driver benchmarks (DriverBench) with pymongo against MultiforaDB.

The tasks, their datasets and their scores follow the MongoDB specification
"Performance Benchmarking" (mongodb/specifications, source/benchmarking):
a task's score is its dataset size in MB (10^6 bytes) divided by the median
wall time of one iteration.  The datasets are ../shared/bench-data's
tarballs, extracted into ctx.workdir at run time.

Tasks run here (spec name -> what one iteration does):

  Find one by ID            10,000 find_one({_id: i}), i = 1..10,000 (TWEET)
  Small doc insertOne       10,000 insert_one(SMALL_DOC)
  Large doc insertOne       10 insert_one(LARGE_DOC)
  Find many, empty cursor   list(find({})) over 10,000 TWEETs
  Small doc bulk insert     insert_many(10,000 x SMALL_DOC), ordered
  Large doc bulk insert     insert_many(10 x LARGE_DOC), ordered
  GridFS upload             upload_from_stream(GRIDFS_LARGE, 50 MiB)
  GridFS download           open_download_stream(id).read()
  LDJSON multi-file import  100 files x 5,000 documents, unordered inserts,
                            read and parsed during the iteration, by a pool
                            of worker processes
  LDJSON multi-file export  the same 500,000 documents back into 100 LDJSON
                            files, written and fsynced, by the same pool

The five single-operation and bulk-insert tasks also run against the floor
stub (stub_server.c) in the same run, iterations alternating
MultiforaDB/stub then stub/MultiforaDB, so each of their rows carries the
floor's MB/s and the ratio multifora/floor (of MB/s: 1.0 means no cost over
a server that does nothing, 0.5 means half the floor's throughput).

Every iteration's answer is checked on the MultiforaDB side, untimed: the
documents found, the count after the inserts, the GridFS bytes, the lines
exported.  A wrong answer is reported in the row's note and in "notes".

Iterations: --full follows the spec (at least 60 s of iterations, then stop
at 100 iterations or 300 s); quick mode runs 3 iterations of each task on a
scaled-down dataset (scores are scaled by the same factor).
$MF_BENCH_DRIVER_ITERS=N runs exactly N iterations at the mode's sizes (a
check of --full's datasets without its half hour).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import math
import multiprocessing
import os
import shutil
import statistics
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import _drvlib  # noqa: E402

# Dataset sizes the spec scores with, in bytes per operation.  (The spec
# gives tweet.json as 1,622 bytes; the file in the tarball has 1,621: its
# final newline is gone.  The score uses the spec's figure.)
TWEET_BYTES = 1_622
SMALL_BYTES = 275
LARGE_BYTES = 2_731_089
LDJSON_FILE_DOCS = 5_000

DB = "perftest"


@dataclass
class Mode:
    """How big and how long: the spec's figures in --full, small in quick."""
    docs: int           # find one / find many / small inserts: operations per iteration
    large: int          # large inserts per iteration
    gridfs_bytes: int   # bytes of gridfs_large.bin uploaded
    ldjson_files: int   # LDJSON files imported / exported
    min_s: float        # keep iterating until this much cumulative time ...
    max_s: float        # ... but stop at this much
    min_iters: int
    max_iters: int


FULL = Mode(docs=10_000, large=10, gridfs_bytes=52_428_800, ldjson_files=100,
            min_s=60.0, max_s=300.0, min_iters=5, max_iters=100)
QUICK = Mode(docs=500, large=2, gridfs_bytes=8 << 20, ldjson_files=2,
             min_s=0.0, max_s=0.0, min_iters=3, max_iters=3)
SMOKE = Mode(docs=100, large=1, gridfs_bytes=1 << 20, ldjson_files=1,
            min_s=0.0, max_s=0.0, min_iters=2, max_iters=2)


@dataclass
class Task:
    name: str
    mb: float                                   # dataset size, 10^6 bytes
    do: Callable[[str], object]                 # one timed iteration on a side
    before: Optional[Callable[[str], None]] = None   # untimed, before each iteration
    # Untimed, on MultiforaDB's result only: None, or what is wrong.
    verify: Optional[Callable[[object], Optional[str]]] = None
    floor: bool = False                         # also run against the stub
    what: str = ""                              # the row's note: the dataset
    setup: Optional[Callable[[], None]] = None  # untimed, once before the iterations


def extract(ctx, mode: Mode) -> Path:
    """Extract the tarballs this run needs into ctx.workdir/bench-data (once)."""
    src = Path(ctx.shared) / "bench-data"
    dest = Path(ctx.workdir) / "bench-data"
    single = dest / "single_and_multi_document"
    if not (single / "gridfs_large.bin").exists():
        with tarfile.open(src / "single_and_multi_document.tgz") as tf:
            tf.extractall(dest, filter="data")
    wanted = {f"parallel/ldjson_multi/ldjson{i:03d}.txt" for i in range(mode.ldjson_files)}
    if not all((dest / w).exists() for w in wanted):
        with tarfile.open(src / "parallel.tgz") as tf:
            members = [m for m in tf if m.name.lstrip("./") in wanted]
            tf.extractall(dest, members=members, filter="data")
    return dest


def measure(ctx, task: Task, sides: List[str], mode: Mode, problems: List[str]) -> dict:
    """Run a task's iterations, alternating the sides' order; return its row."""
    times: Dict[str, List[float]] = {s: [] for s in sides}
    wrong: List[str] = []
    clock = time.perf_counter
    i = 0
    while True:
        for side in (sides if i % 2 == 0 else sides[::-1]):
            if task.before:
                task.before(side)
            t = clock()
            result = task.do(side)
            times[side].append(clock() - t)
            if side == "multifora" and task.verify:
                bad = task.verify(result)
                if bad and len(wrong) < 3:
                    wrong.append(f"iteration {i + 1}: {bad}")
        i += 1
        spent = sum(times["multifora"])
        if i >= mode.max_iters or (mode.max_s and spent >= mode.max_s):
            break
        if i >= mode.min_iters and spent >= mode.min_s:
            break
    mbps = [task.mb / t for t in times["multifora"]]
    floor = [task.mb / t for t in times["stub"]] if "stub" in times else None
    med_t = statistics.median(times["multifora"])
    note = f"{task.what}; {task.mb:.2f} MB per iteration, median iteration {med_t * 1000:.1f} ms"
    if wrong:
        note += "; WRONG ANSWER: " + "; ".join(wrong)
        problems.append(f"{task.name}: " + "; ".join(wrong))
    ctx.log(f"driver: {task.name}: {statistics.median(mbps):.2f} MB/s over {len(mbps)} iterations"
            + (f", floor {statistics.median(floor):.2f} MB/s" if floor else ""))
    return _drvlib.row(f"driver: {task.name}", "MB/s", mbps, floor=floor, note=note)


def single_and_multi_tasks(data: Path, mode: Mode, colls: dict) -> List[Task]:
    """The single-document and multi-document tasks; ``colls`` maps a side
    to its perftest database."""
    import gridfs

    docs_dir = data / "single_and_multi_document"
    tweet = json.loads((docs_dir / "tweet.json").read_text())
    small = json.loads((docs_dir / "small_doc.json").read_text())
    large = json.loads((docs_dir / "large_doc.json").read_text())
    n, nl = mode.docs, mode.large
    mf = colls["multifora"]

    def fresh_corpus(side: str) -> None:
        colls[side].drop_collection("corpus")
        colls[side].command("create", "corpus")

    def count_is(expected: int) -> Callable[[object], Optional[str]]:
        def verify(_result) -> Optional[str]:
            got = mf.corpus.count_documents({})
            return None if got == expected else f"count {got}, expected {expected}"
        return verify

    def find_one_setup() -> None:
        # 10,000 TWEETs with _id 1..10,000 on each side.
        for db in colls.values():
            db.client.drop_database(DB)
            db.corpus.insert_many([dict(tweet, _id=i) for i in range(1, n + 1)])

    def find_one(side: str) -> int:
        c = colls[side].corpus
        found = 0
        for i in range(1, n + 1):
            d = c.find_one({"_id": i})
            found += d is not None and d.get("_id") == i and d.get("text") == tweet["text"]
        return found

    def insert_one(doc: dict, count: int) -> Callable[[str], None]:
        def do(side: str) -> None:
            c = colls[side].corpus
            for _ in range(count):
                c.insert_one(dict(doc))  # a fresh dict: the driver adds its _id to it
        return do

    def insert_many(doc: dict, count: int) -> Callable[[str], None]:
        def do(side: str) -> None:
            colls[side].corpus.insert_many([dict(doc) for _ in range(count)], ordered=True)
        return do

    def find_many_setup() -> None:
        fresh_corpus("multifora")
        mf.corpus.insert_many([dict(tweet) for _ in range(n)])

    def find_many(side: str) -> int:
        return sum(1 for _ in colls[side].corpus.find({}))

    blob = (docs_dir / "gridfs_large.bin").read_bytes()[:mode.gridfs_bytes]
    bucket = gridfs.GridFSBucket(mf)

    def gridfs_before(side: str) -> None:
        mf.drop_collection("fs.files")
        mf.drop_collection("fs.chunks")
        bucket.upload_from_stream("one-byte", b"x")

    def gridfs_upload(side: str):
        return bucket.upload_from_stream("gridfstest", blob)

    def gridfs_upload_verify(file_id) -> Optional[str]:
        meta = mf["fs.files"].find_one({"_id": file_id})
        chunks = mf["fs.chunks"].count_documents({"files_id": file_id})
        want = math.ceil(len(blob) / (255 * 1024))
        if not meta or meta["length"] != len(blob) or chunks != want:
            return f"file {meta and meta.get('length')} bytes in {chunks} chunks, " \
                   f"expected {len(blob)} in {want}"
        return None

    download_id: List[object] = []

    def gridfs_download_setup() -> None:
        gridfs_before("multifora")
        download_id.append(bucket.upload_from_stream("gridfstest", blob))

    def gridfs_download(side: str) -> bytes:
        return bucket.open_download_stream(download_id[0]).read()

    tasks = [
        Task("find one by _id", n * TWEET_BYTES / 1e6, find_one,
             verify=lambda found: None if found == n else f"{found} of {n} found",
             floor=True, what=f"{n} x find_one of a {TWEET_BYTES} B tweet",
             setup=find_one_setup),
        Task("small doc insertOne", n * SMALL_BYTES / 1e6, insert_one(small, n),
             before=fresh_corpus, verify=count_is(n), floor=True,
             what=f"{n} x insert_one of {SMALL_BYTES} B"),
        Task("large doc insertOne", nl * LARGE_BYTES / 1e6, insert_one(large, nl),
             before=fresh_corpus, verify=count_is(nl), floor=True,
             what=f"{nl} x insert_one of {LARGE_BYTES:,} B"),
        Task("find many and empty the cursor", n * TWEET_BYTES / 1e6, find_many,
             verify=lambda got: None if got == n else f"{got} of {n} documents",
             what=f"find({{}}) over {n} tweets", setup=find_many_setup),
        Task("small doc bulk insert", n * SMALL_BYTES / 1e6, insert_many(small, n),
             before=fresh_corpus, verify=count_is(n), floor=True,
             what=f"insert_many of {n} x {SMALL_BYTES} B"),
        Task("large doc bulk insert", nl * LARGE_BYTES / 1e6, insert_many(large, nl),
             before=fresh_corpus, verify=count_is(nl), floor=True,
             what=f"insert_many of {nl} x {LARGE_BYTES:,} B"),
        Task("GridFS upload", len(blob) / 1e6, gridfs_upload, before=gridfs_before,
             verify=gridfs_upload_verify, what=f"{len(blob):,} B file"),
        Task("GridFS download", len(blob) / 1e6, gridfs_download,
             verify=lambda got: None if got == blob else f"{len(got)} bytes, not the file",
             what=f"{len(blob):,} B file", setup=gridfs_download_setup),
    ]
    return tasks


def ldjson_tasks(ctx, data: Path, mode: Mode, uri: str, mf) -> tuple:
    """The two parallel tasks and the pool they share (the caller shuts it
    down)."""
    files = [data / "parallel" / "ldjson_multi" / f"ldjson{i:03d}.txt"
             for i in range(mode.ldjson_files)]
    total_bytes = sum(f.stat().st_size for f in files)
    total_docs = mode.ldjson_files * LDJSON_FILE_DOCS
    workers = max(2, min(8, 2 * (multiprocessing.cpu_count() or 1)))
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
        initializer=_drvlib.ldjson_worker_init, initargs=(uri, DB, "corpus"))
    # Start every worker now (spawning imports pymongo): not part of a task.
    list(pool.map(_drvlib.ldjson_worker_ready, [0.2] * workers))
    out_dir = Path(ctx.workdir) / "ldjson-export"

    def import_before(side: str) -> None:
        mf.drop_collection("corpus")
        mf.command("create", "corpus")

    def import_do(side: str) -> int:
        return sum(pool.map(_drvlib.ldjson_import_file, [str(f) for f in files]))

    def import_verify(inserted: int) -> Optional[str]:
        got = mf.corpus.count_documents({})
        if inserted == total_docs and got == total_docs:
            return None
        return f"{inserted} inserted, {got} counted, expected {total_docs}"

    def export_setup() -> None:
        import_before("multifora")
        firsts = [i * LDJSON_FILE_DOCS for i in range(len(files))]
        list(pool.map(_drvlib.ldjson_import_file, [str(f) for f in files], firsts))

    def export_before(side: str) -> None:
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True)

    def export_do(side: str) -> int:
        firsts = [i * LDJSON_FILE_DOCS for i in range(len(files))]
        return sum(pool.map(_drvlib.ldjson_export_range, firsts,
                            [LDJSON_FILE_DOCS] * len(files),
                            [str(out_dir / f"ldjson{i:03d}.txt") for i in range(len(files))]))

    def export_verify(written: int) -> Optional[str]:
        lines = sum(sum(1 for _ in open(p, encoding="utf-8")) for p in out_dir.iterdir())
        if written == total_docs and lines == total_docs:
            return None
        return f"{written} written, {lines} lines on disk, expected {total_docs}"

    what = f"{len(files)} files x {LDJSON_FILE_DOCS} documents, {workers} worker processes"
    imp = Task("LDJSON multi-file import", total_bytes / 1e6, import_do, before=import_before,
               verify=import_verify, what=what)
    exp = Task("LDJSON multi-file export", total_bytes / 1e6, export_do, before=export_before,
               verify=export_verify, what=what + ", each file fsynced", setup=export_setup)
    return [imp, exp], pool, out_dir


def run(ctx) -> dict:
    import pymongo

    out = {"part": "driver", "rows": [], "notes": []}
    if ctx.shared is None or not (Path(ctx.shared) / "bench-data").is_dir():
        msg = "skipped: ../shared/bench-data is not here (the driver benchmark datasets)"
        ctx.log("driver: " + msg)
        out["notes"].append(msg)
        return out
    mode = FULL if ctx.full else SMOKE if _drvlib.ctx_get(ctx, "smoke") else QUICK
    mode_name = "full" if mode is FULL else "smoke" if mode is SMOKE else "quick"
    iters = os.environ.get("MF_BENCH_DRIVER_ITERS")
    if iters:  # the mode's datasets, a fixed number of iterations
        mode = dataclasses.replace(mode, min_s=0.0, max_s=0.0, min_iters=int(iters),
                                   max_iters=int(iters))
    data = extract(ctx, mode)
    dbpath = Path(ctx.workdir) / "driver-db"
    shutil.rmtree(dbpath, ignore_errors=True)
    dbpath.mkdir(parents=True)
    problems: List[str] = []
    server = _drvlib.Served(dbpath).start()
    stub = _drvlib.StubServer(Path(ctx.workdir))
    pool = None
    try:
        clients = {"multifora": server.client(), "stub": pymongo.MongoClient(stub.uri)}
        dbs = {side: c[DB] for side, c in clients.items()}
        tasks = single_and_multi_tasks(data, mode, dbs)
        ptasks, pool, out_dir = ldjson_tasks(ctx, data, mode, server.uri, dbs["multifora"])
        for task in tasks + ptasks:
            if task.setup:
                task.setup()
            sides = ["multifora", "stub"] if task.floor else ["multifora"]
            out["rows"].append(measure(ctx, task, sides, mode, problems))
        shutil.rmtree(out_dir, ignore_errors=True)
        clients["stub"].close()
    finally:
        if pool:
            pool.shutdown()
        server.stop()
        stub.stop()
        _drvlib.remove_db(dbpath)

    scores = {r["name"][len("driver: "):]: r["median"] for r in out["rows"]}
    read = ["find one by _id", "find many and empty the cursor", "GridFS download",
            "LDJSON multi-file export"]
    write = [k for k in scores if k not in read]
    rb = statistics.mean(scores[k] for k in read)
    wb = statistics.mean(scores[k] for k in write)
    out["notes"].append(
        f"composites over the {len(scores)} tasks run (the spec's ReadBench/WriteBench also "
        f"average tasks not run here: BulkWrite, GridFS multi-file): ReadBench {rb:.2f} MB/s, "
        f"WriteBench {wb:.2f} MB/s, DriverBench {(rb + wb) / 2:.2f} MB/s")
    out["notes"].append(
        f"mode {mode_name}" + (f" ({iters} iterations)" if iters else "")
        + f": {mode.docs} documents, {mode.large} large, {mode.gridfs_bytes:,} GridFS bytes, "
        f"{mode.ldjson_files} LDJSON files per iteration")
    if problems:
        out["notes"].extend("WRONG ANSWER: " + p for p in problems)
    else:
        out["notes"].append(f"every iteration's answer checked on MultiforaDB: all "
                            f"{len(out['rows'])} tasks correct")
    return out


if __name__ == "__main__":
    sys.exit(_drvlib.main(run))
