"""Memory limits of $group and $sort, set small through mongod's knobs
internalDocumentSourceGroupMaxMemoryBytes and
internalQueryMaxBlockingSortMemoryUsageBytes: without allowDiskUse both
fail with 292 (mongod's messages); with it they spill, and the results are
exactly those computed in memory (under the default 100 MB), for every
accumulator -- partial states written to disk and merged
(accumulator.c mfi_acc_save / mfi_acc_merge).  $bucketAuto and
$setWindowFields likewise, under internalDocumentSourceBucketAutoMaxMemoryBytes
and internalDocumentSourceSetWindowFieldsMaxMemoryBytes (end of the file)."""
from __future__ import annotations

import random

import pymongo
import pytest
from bson import Int64
from pymongo.errors import OperationFailure

import multifora
from test_agg_stages import EXEC, typed

DEFAULT = 100 * 1024 * 1024
GROUP_MSG = (EXEC + "Exceeded memory limit for $group, but didn't allow external sort. "
             "Pass allowDiskUse:true to opt in.")


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = multifora.Server(str(tmp_path_factory.mktemp("aggmem") / "db"), port=0,
                         enable_test_commands=True)
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def mc(srv):
    c = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000)
    yield c
    c.close()


def set_limits(mc, group=DEFAULT, sort=DEFAULT):
    mc.admin.command("setParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=group)
    mc.admin.command("setParameter", 1, internalQueryMaxBlockingSortMemoryUsageBytes=sort)


@pytest.fixture(scope="module")
def data(mc):
    """3,000 documents in 400 groups, each group's inputs spread over the
    whole collection (so every spill holds a partial of most groups), with
    ints, longs, doubles, strings, nulls, missing fields and documents."""
    rnd = random.Random(7)
    docs = []
    for i in range(3000):
        d = {"_id": i, "k": (i * 7919) % 400, "seq": i}
        r = rnd.random()
        if r < 0.3:
            d["v"] = rnd.randint(-1000, 1000)
        elif r < 0.45:
            d["v"] = Int64(rnd.randint(-10**12, 10**12))
        elif r < 0.7:
            d["v"] = rnd.choice([0.5, 1.25, -3.75, 2.0, 10.5])
        elif r < 0.8:
            d["v"] = rnd.choice(["a", "b", "c", "dd"])
        elif r < 0.9:
            d["v"] = None
        d["o"] = {f"f{rnd.randint(0, 5)}": i}
        d["pad"] = "x" * rnd.randint(0, 40)
        docs.append(d)
    db = mc.aggmem
    db.c.drop()
    db.c.insert_many(docs)
    yield db
    set_limits(mc)


ACCS = {
    "sum": {"$sum": "$v"}, "count": {"$count": {}}, "avg": {"$avg": "$v"},
    "min": {"$min": "$v"}, "max": {"$max": "$v"},
    "first": {"$first": "$v"}, "last": {"$last": "$v"},
    "firstSeq": {"$first": "$seq"}, "lastSeq": {"$last": "$seq"},
    "push": {"$push": "$seq"}, "pushV": {"$push": "$v"},
    "set": {"$addToSet": {"$mod": ["$seq", 5]}},
    "merge": {"$mergeObjects": "$o"},
    "top": {"$top": {"output": "$seq", "sortBy": {"v": 1}}},
    "bottom": {"$bottom": {"output": ["$seq", "$v"], "sortBy": {"v": -1, "pad": 1}}},
    "topN": {"$topN": {"n": 3, "output": "$seq", "sortBy": {"v": -1}}},
    "bottomN": {"$bottomN": {"n": 4, "output": "$v", "sortBy": {"pad": 1}}},
    "firstN": {"$firstN": {"n": 3, "input": "$v"}},
    "lastN": {"$lastN": {"n": 3, "input": "$seq"}},
    "maxN": {"$maxN": {"n": 2, "input": "$v"}},
    "minN": {"$minN": {"n": {"$cond": [{"$gt": ["$_id", 200]}, 1, 4]}, "input": "$v"}},
}


def group_pipeline(accs):
    return [{"$sort": {"_id": 1}}, {"$group": {"_id": "$k", **accs}}, {"$sort": {"_id": 1}}]


def run(db, pipeline, **kw):
    out = list(db.c.aggregate(pipeline, **kw))
    for d in out:
        if "set" in d:
            d["set"] = sorted(d["set"])
    return out


def test_parameters_get_and_set(mc):
    p = mc.admin.command("getParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=1,
                         internalQueryMaxBlockingSortMemoryUsageBytes=1)
    assert typed([p["internalDocumentSourceGroupMaxMemoryBytes"],
                  p["internalQueryMaxBlockingSortMemoryUsageBytes"]]) == \
        typed([Int64(DEFAULT), DEFAULT])
    r = mc.admin.command("setParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=12345)
    assert typed(r["was"]) == typed(Int64(DEFAULT))
    p = mc.admin.command("getParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=1)
    assert p["internalDocumentSourceGroupMaxMemoryBytes"] == 12345
    for bad in (0, -5, "x"):
        with pytest.raises(OperationFailure) as e:
            mc.admin.command("setParameter", 1, internalQueryMaxBlockingSortMemoryUsageBytes=bad)
        assert e.value.code == 2
    set_limits(mc)


def test_group_without_disk_use_fails(mc, data):
    set_limits(mc, group=64 * 1024)
    try:
        with pytest.raises(OperationFailure) as e:
            run(data, group_pipeline({"p": {"$push": "$seq"}}))
        assert e.value.code == 292
        assert e.value.details["errmsg"] == GROUP_MSG
        assert e.value.details["codeName"] == "QueryExceededMemoryLimitNoDiskUseAllowed"
    finally:
        set_limits(mc)


@pytest.mark.parametrize("name", sorted(ACCS))
def test_group_spill_matches_memory(mc, data, name):
    pipeline = group_pipeline({name: ACCS[name], "n": {"$sum": 1}})
    set_limits(mc)
    want = run(data, pipeline)
    assert len(want) == 400
    set_limits(mc, group=16 * 1024)
    try:
        got = run(data, pipeline, allowDiskUse=True)
    finally:
        set_limits(mc)
    assert typed(got) == typed(want)


def test_group_spill_all_accumulators_at_once(mc, data):
    pipeline = group_pipeline(ACCS)
    want = run(data, pipeline)
    set_limits(mc, group=8 * 1024)
    try:
        got = run(data, pipeline, allowDiskUse=True)
        with pytest.raises(OperationFailure) as e:
            run(data, pipeline)
        assert e.value.code == 292
    finally:
        set_limits(mc)
    assert typed(got) == typed(want)


def test_group_spill_stddev(mc, data):
    pipeline = group_pipeline({"p": {"$stdDevPop": "$v"}, "s": {"$stdDevSamp": "$v"}})
    want = run(data, pipeline)
    set_limits(mc, group=16 * 1024)
    try:
        got = run(data, pipeline, allowDiskUse=True)
    finally:
        set_limits(mc)
    assert [d["_id"] for d in got] == [d["_id"] for d in want]
    for g, w in zip(got, want):
        for f in ("p", "s"):
            if w[f] is None:
                assert g[f] is None
            else:
                assert g[f] == pytest.approx(w[f], rel=1e-12)


def test_group_spill_one_big_group_keeps_order(mc, data):
    """Every input in one group: $push/$first/$last/$firstN/$lastN see the
    inputs in order across many spills."""
    pipeline = [{"$sort": {"_id": 1}},
                {"$group": {"_id": None, "p": {"$push": "$seq"}, "f": {"$first": "$seq"},
                            "l": {"$last": "$seq"}, "fn": {"$firstN": {"n": 5, "input": "$seq"}},
                            "ln": {"$lastN": {"n": 5, "input": "$seq"}}}}]
    set_limits(mc, group=4 * 1024)
    try:
        got = run(data, pipeline, allowDiskUse=True)
    finally:
        set_limits(mc)
    assert typed(got) == typed([{"_id": None, "p": list(range(3000)), "f": 0, "l": 2999,
                                 "fn": [0, 1, 2, 3, 4], "ln": [2995, 2996, 2997, 2998, 2999]}])


SORT_PIPE = [{"$addFields": {"z": {"$concat": ["$pad", "y"]}}},
             {"$sort": {"k": -1, "pad": 1, "_id": 1}}, {"$project": {"_id": 1, "k": 1}}]


def test_sort_without_disk_use_fails(mc, data):
    set_limits(mc, sort=100 * 1024)
    try:
        with pytest.raises(OperationFailure) as e:
            run(data, SORT_PIPE)
        assert e.value.code == 292
        assert e.value.details["errmsg"] == (
            EXEC + "Sort exceeded memory limit of 102400 bytes, but did not opt in to external "
            "sorting.")
    finally:
        set_limits(mc)


def test_sort_spill_matches_memory(mc, data):
    want = run(data, SORT_PIPE)
    assert len(want) == 3000
    set_limits(mc, sort=100 * 1024)
    try:
        got = run(data, SORT_PIPE, allowDiskUse=True)
        # a top-k keeps only k documents: within the limit without disk
        top = run(data, SORT_PIPE[:2] + [{"$limit": 5}] + SORT_PIPE[2:])
    finally:
        set_limits(mc)
    assert typed(got) == typed(want)
    assert typed(top) == typed(want[:5])


# ------------------------------------------- $bucketAuto and $setWindowFields
# Their limits: internalDocumentSourceBucketAutoMaxMemoryBytes (the sorter
# $bucketAuto sorts its input with) and
# internalDocumentSourceSetWindowFieldsMaxMemoryBytes (the partition buffer,
# agg/spill.c).  Each spill test also shows, without allowDiskUse, that the
# small limit is exceeded -- so the allowDiskUse run really went to disk.

SMALL = 16 * 1024
BAUTO = "internalDocumentSourceBucketAutoMaxMemoryBytes"
WINDOW = "internalDocumentSourceSetWindowFieldsMaxMemoryBytes"


def set_stage_limits(mc, bauto=DEFAULT, window=DEFAULT):
    mc.admin.command("setParameter", 1, **{BAUTO: bauto})
    mc.admin.command("setParameter", 1, **{WINDOW: window})


def spilled_and_failed(mc, db, pipeline, **limits):
    """(results with allowDiskUse, the error without it) under `limits`."""
    set_stage_limits(mc, **limits)
    try:
        got = run(db, pipeline, allowDiskUse=True)
        with pytest.raises(OperationFailure) as e:
            run(db, pipeline)
    finally:
        set_stage_limits(mc)
    return got, e.value


def test_stage_parameters_get_and_set(mc):
    p = mc.admin.command("getParameter", 1, **{BAUTO: 1, WINDOW: 1})
    assert typed([p[BAUTO], p[WINDOW]]) == typed([Int64(DEFAULT), Int64(DEFAULT)])
    try:
        for name in (BAUTO, WINDOW):
            r = mc.admin.command("setParameter", 1, **{name: 4096})
            assert typed(r["was"]) == typed(Int64(DEFAULT))
            assert typed(mc.admin.command("getParameter", 1, **{name: 1})[name]) == \
                typed(Int64(4096))
            for bad in (0, -1, "x"):
                with pytest.raises(OperationFailure) as e:
                    mc.admin.command("setParameter", 1, **{name: bad})
                assert e.value.code == 2
    finally:
        set_stage_limits(mc)


BAUTO_OUT = {"n": {"$sum": 1}, "ids": {"$push": "$_id"}, "first": {"$first": "$seq"},
             "last": {"$last": "$v"}, "top": {"$top": {"output": "$_id", "sortBy": {"pad": 1}}}}


@pytest.mark.parametrize("group_by,gran", [
    ("$v", None),                                      # mixed types, nulls, missing
    ("$k", None),                                      # many equal values per bucket edge
    ({"$add": ["$k", 0.5]}, "R5"),
    ("$seq", "E12"),
    ("$k", "1-2-5"),
    ({"$multiply": ["$k", 3]}, "POWERSOF2"),
])
def test_bucket_auto_spill_matches_memory(mc, data, group_by, gran):
    spec = {"groupBy": group_by, "buckets": 9, "output": BAUTO_OUT}
    if gran:
        spec["granularity"] = gran
    pipeline = [{"$bucketAuto": spec}]
    want = run(data, pipeline)
    assert sum(b["n"] for b in want) == 3000
    got, e = spilled_and_failed(mc, data, pipeline, bauto=SMALL)
    assert typed(got) == typed(want)
    assert e.code == 292
    assert e.details["errmsg"] == (EXEC + "Sort exceeded memory limit of 16384 bytes, but did "
                                   "not opt in to external sorting.")
    assert e.details["codeName"] == "QueryExceededMemoryLimitNoDiskUseAllowed"


def test_bucket_auto_spill_more_buckets_than_values(mc, data):
    pipeline = [{"$bucketAuto": {"groupBy": {"$mod": ["$k", 5]}, "buckets": 50}}]
    got, _ = spilled_and_failed(mc, data, pipeline, bauto=SMALL)
    assert typed(got) == typed([{"_id": {"min": m, "max": m + 1 if m < 4 else 4}, "count": 600}
                                for m in range(5)])


WINDOW_SEQ = {
    "push": {"$push": "$seq", "window": {"documents": [-3, 2]}},
    "pushAll": {"$push": "$_id", "window": {"documents": ["unbounded", -995]}},
    "run": {"$sum": "$v", "window": {"documents": ["unbounded", "current"]}},
    "avg": {"$avg": "$v", "window": {"range": [-20, 20]}},
    "cnt": {"$count": {}, "window": {"range": [-7, "current"]}},
    "min": {"$min": "$pad", "window": {"documents": [-10, 10]}},
    "first": {"$first": "$o", "window": {"range": [-30, 5]}},
    "last": {"$last": "$v", "window": {"documents": [0, 40]}},
    "shiftB": {"$shift": {"output": "$_id", "by": -700, "default": "none"}},
    "shiftF": {"$shift": {"output": "$pad", "by": 3}},
    "deriv": {"$derivative": {"input": {"$multiply": ["$_id", "$_id"]}},
              "window": {"range": [-12, 0]}},
    "integral": {"$integral": {"input": "$_id"}, "window": {"documents": [-2, 0]}},
    "num": {"$documentNumber": {}},
    "ema": {"$expMovingAvg": {"input": "$seq", "N": 4}},
}

# one partition of 3000: range windows here cost O(n^2) endpoint scans
WINDOW_SEQ_DOCS = {k: v for k, v in WINDOW_SEQ.items() if "range" not in v.get("window", {})}

WINDOW_RANK = {
    "rank": {"$rank": {}},
    "dense": {"$denseRank": {}},
    "peers": {"$push": "$seq", "window": {"range": [0, 0]}},
    "near": {"$addToSet": "$k", "window": {"range": [-1, 1]}},
    "lastN": {"$lastN": {"n": 2, "input": "$seq"}, "window": {"documents": [-2, 2]}},
}


@pytest.mark.parametrize("part,sort_by,output,limit", [
    ({"$mod": ["$k", 3]}, {"seq": 1}, WINDOW_SEQ, SMALL),  # three partitions of 1000
    (None, {"seq": 1}, WINDOW_SEQ_DOCS, SMALL),            # one partition of 3000
    ("$pad", {"k": 1}, WINDOW_RANK, 4096),                 # 41 partitions, each spills
    (None, {"k": 1}, WINDOW_RANK, SMALL),
], ids=["mod3", "whole", "pad", "whole-rank"])
def test_window_spill_matches_memory(mc, data, part, sort_by, output, limit):
    spec = {"sortBy": sort_by, "output": output}
    if part is not None:
        spec["partitionBy"] = part
    pipeline = [{"$setWindowFields": spec}, {"$sort": {"_id": 1}}]
    want = run(data, pipeline)
    assert len(want) == 3000
    got, e = spilled_and_failed(mc, data, pipeline, window=limit)
    assert typed(got) == typed(want)
    assert e.code == 5414201
    msg = e.details["errmsg"]
    assert msg.startswith(EXEC + "Exceeded memory limit in DocumentSourceSetWindowFields, used ")
    assert msg.endswith(f" bytes but max allowed is {limit}")


def test_window_spill_without_sort_keeps_input_order(mc, data):
    """No sortBy: the partition is the input in order; $push of the whole
    partition reads spilled documents back in that order."""
    pipeline = [{"$sort": {"_id": 1}},
                {"$setWindowFields": {"output": {
                    "all": {"$push": "$seq", "window": {"documents": ["unbounded", "unbounded"]}},
                    "tot": {"$sum": "$seq"}}}},
                {"$project": {"tot": 1, "n": {"$size": "$all"}, "f": {"$first": "$all"},
                              "l": {"$last": "$all"}}}]
    got, e = spilled_and_failed(mc, data, pipeline, window=4096)
    assert e.code == 5414201
    assert typed(got) == typed([{"_id": i, "tot": 4498500, "n": 3000, "f": 0, "l": 2999}
                                for i in range(3000)])
