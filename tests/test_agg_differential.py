"""Randomized differential test of the pipeline: random documents (ints,
longs, doubles, strings, null, missing, arrays, nested documents) and random
pipelines of $match $group $sort $project $limit $skip $unwind $addFields,
run by the server and by a small reference implementation below (MongoDB's
comparison order, mongod's semantics for exactly the operators generated).

Results are compared exactly, BSON types included: in order where the
stream's order is determined (a $sort ending in a unique _id, and what
follows it without regrouping), as multisets otherwise.  The generator only
uses order-sensitive things ($limit, $skip, $first, $last, $push) on
ordered streams.  Numbers of different types never compare equal in the
data (ints in -3..3, longs in 10..12, doubles in {+-0.5, 2.5, -1.5}), so
which of two equal values a group keeps is never a question of order.
A failure prints the seed and the pipeline."""
from __future__ import annotations

import functools
import random

import pymongo
import pytest
from bson import Int64

import multifora
from test_agg_stages import typed

MISSING = object()
EMPTY_KEY = object()   # an empty array's sort key: below null, as mongod's


# ----------------------------------------------------- MongoDB's order

def rank(v):
    if v is EMPTY_KEY:
        return 0
    if v is MISSING or v is None:
        return 1
    if isinstance(v, bool):
        return 8
    if isinstance(v, (int, float)):
        return 2
    if isinstance(v, str):
        return 3
    if isinstance(v, dict):
        return 4
    if isinstance(v, list):
        return 5
    raise TypeError(v)


def cmp(x, y):
    rx, ry = rank(x), rank(y)
    if rx != ry:
        return -1 if rx < ry else 1
    if rx <= 1:
        return 0
    if rx in (2, 3, 8):
        return (x > y) - (x < y)
    if rx == 4:
        for (kx, vx), (ky, vy) in zip(x.items(), y.items()):
            c = (rank(vx) > rank(vy)) - (rank(vx) < rank(vy))
            if c == 0:
                c = (kx > ky) - (kx < ky)
            if c == 0:
                c = cmp(vx, vy)
            if c:
                return c
        return (len(x) > len(y)) - (len(x) < len(y))
    for ex, ey in zip(x, y):
        c = cmp(ex, ey)
        if c:
            return c
    return (len(x) > len(y)) - (len(x) < len(y))


def get(doc, path):
    v = doc
    for part in path.split("."):
        if not isinstance(v, dict) or part not in v:
            return MISSING
        v = v[part]
    return v


# ------------------------------------------------------------- $match

def candidates(v):
    return [v] + (v if isinstance(v, list) else [])


def eq(v, operand):
    if operand is None:
        return v is MISSING or any(c is None for c in candidates(v))
    return any(rank(c) == rank(operand) and cmp(c, operand) == 0 for c in candidates(v))


def match(doc, flt):
    for path, cond in flt.items():
        v = get(doc, path)
        if not isinstance(cond, dict):
            if not eq(v, cond):
                return False
            continue
        (op, arg), = cond.items()
        if op == "$exists":
            if (v is not MISSING) != arg:
                return False
        elif op == "$in":
            if not any(eq(v, a) for a in arg):
                return False
        elif op in ("$gt", "$lt"):
            want = 1 if op == "$gt" else -1
            if not any(rank(c) == rank(arg) and cmp(c, arg) == want for c in candidates(v)):
                return False
        else:
            raise ValueError(op)
    return True


# ------------------------------------------------------------- $group

def num_sum(values):
    nums = [v for v in values if rank(v) == 2 and not isinstance(v, bool)]
    if any(isinstance(v, float) for v in nums):
        return float(sum(nums)), nums
    total = sum(int(v) for v in nums)
    if any(isinstance(v, Int64) for v in nums) or not -2**31 <= total < 2**31:
        return Int64(total), nums
    return total, nums


def accumulate(op, arg, docs):
    if op == "$count":
        return len(docs)
    vals = [get(d, arg[1:]) if isinstance(arg, str) else arg for d in docs]
    if op == "$sum":
        return num_sum(vals)[0]
    if op == "$avg":
        total, nums = num_sum(vals)
        return float(total) / len(nums) if nums else None
    if op in ("$min", "$max"):
        best = MISSING
        for v in vals:
            if v is MISSING or v is None:
                continue
            if best is MISSING or cmp(v, best) == (-1 if op == "$min" else 1):
                best = v
        return None if best is MISSING else best
    if op == "$first":
        return None if vals[0] is MISSING else vals[0]
    if op == "$last":
        return None if vals[-1] is MISSING else vals[-1]
    if op == "$push":
        return [v for v in vals if v is not MISSING]
    if op == "$addToSet":
        out = []
        for v in vals:
            if v is not MISSING and not any(cmp(v, o) == 0 for o in out):
                out.append(v)
        return sorted(out, key=functools.cmp_to_key(cmp))
    raise ValueError(op)


def group_key(doc, idspec):
    if idspec is None:
        return None
    if isinstance(idspec, str):
        v = get(doc, idspec[1:])
        return None if v is MISSING else v
    out = {}
    for k, p in idspec.items():
        v = get(doc, p[1:])
        if v is not MISSING:
            out[k] = v
    return out


def group(docs, spec):
    groups = []  # [key, docs]
    for d in docs:
        k = group_key(d, spec["_id"])
        for g in groups:
            if cmp(g[0], k) == 0:
                g[1].append(d)
                break
        else:
            groups.append([k, [d]])
    out = []
    for k, members in groups:
        r = {"_id": k}
        for f, acc in spec.items():
            if f != "_id":
                (op, arg), = acc.items()
                r[f] = accumulate(op, arg, members)
        out.append(r)
    return out


# ------------------------------------------------- the other stages

def sort_key(doc, path, desc):
    v = get(doc, path)
    if v is MISSING:
        return None
    if isinstance(v, list):
        if not v:
            return EMPTY_KEY
        pick = max if desc else min
        return pick(v, key=functools.cmp_to_key(cmp))
    return v


def sort(docs, spec):
    def c(x, y):
        for path, d in spec.items():
            r = cmp(sort_key(x, path, d < 0), sort_key(y, path, d < 0))
            if r:
                return r * d
        return 0
    return sorted(docs, key=functools.cmp_to_key(c))


def project(doc, fields):
    out = {}
    if "_id" in doc:
        out["_id"] = doc["_id"]
    for k, v in doc.items():
        if k in fields and k != "_id":
            out[k] = v
        elif k == "d" and "d.p" in fields and isinstance(v, dict):
            out["d"] = {"p": v["p"]} if "p" in v else {}
    return out


def add_fields(doc, spec):
    out = dict(doc)
    for k, src in spec.items():
        v = get(doc, src[1:]) if isinstance(src, str) else src["$literal"]
        if v is MISSING:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def unwind(docs, spec):
    out = []
    path, idx = spec["path"][1:], spec.get("includeArrayIndex")
    keep = spec.get("preserveNullAndEmptyArrays", False)
    for d in docs:
        v = d.get(path, MISSING)
        if isinstance(v, list) and v:
            for i, e in enumerate(v):
                o = dict(d)
                o[path] = e
                if idx:
                    o[idx] = Int64(i)
                out.append(o)
            continue
        if v is MISSING or v is None or v == []:
            if not keep:
                continue
            o = dict(d)
            if v == []:
                del o[path]
        else:
            o = dict(d)
        if idx:
            o[idx] = None
        out.append(o)
    return out


def reference(docs, pipeline):
    for stage in pipeline:
        (name, spec), = stage.items()
        if name == "$match":
            docs = [d for d in docs if match(d, spec)]
        elif name == "$group":
            docs = group(docs, spec)
        elif name == "$sort":
            docs = sort(docs, spec)
        elif name == "$project":
            docs = [project(d, spec) for d in docs]
        elif name == "$addFields":
            docs = [add_fields(d, spec) for d in docs]
        elif name == "$unwind":
            docs = unwind(docs, spec)
        elif name == "$limit":
            docs = docs[:spec]
        elif name == "$skip":
            docs = docs[spec:]
    return docs


# ------------------------------------------------------------ generation

def rand_value(r, arrays=False):
    x = r.random()
    if x < 0.25:
        return r.randint(-3, 3)
    if x < 0.35:
        return Int64(r.randint(10, 12))
    if x < 0.5:
        return r.choice([0.5, -0.5, 2.5, -1.5])
    if x < 0.62:
        return r.choice(["x", "y", "zz"])
    if x < 0.7:
        return None
    if x < 0.78:
        return {"p": r.randint(0, 2)}
    if arrays and x < 0.95:
        return [rand_value(r) for _ in range(r.randint(0, 3))]
    return MISSING


def rand_doc(r, i):
    d = {"_id": i}
    for f in ("a", "b"):
        v = rand_value(r)
        if v is not MISSING:
            d[f] = v
    c = rand_value(r, arrays=True)
    if c is not MISSING:
        d["c"] = c
    if r.random() < 0.6:
        d["d"] = {"p": rand_value(r)} if r.random() < 0.8 else r.randint(0, 3)
        if d["d"] == {"p": MISSING}:
            d["d"] = {}
    return d


def rand_operand(r):
    return r.choice([r.randint(-3, 3), Int64(11), 0.5, -1.5, "x", "y", None])


def rand_match(r):
    f = r.choice(["a", "b", "c", "d.p"])
    x = r.random()
    if x < 0.3:
        return {f: rand_operand(r)}
    if x < 0.5:
        return {f: {"$exists": r.random() < 0.5}}
    if x < 0.65:
        return {f: {"$in": [rand_operand(r), rand_operand(r)]}}
    op = r.choice(["$gt", "$lt"])
    return {f: {op: r.choice([r.randint(-3, 3), 0.5, Int64(10), "x", "y"])}}


def rand_pipeline(r):
    stages = []
    ordered = False        # the stream's order is determined
    unique_ids = True      # _id is unique in the stream
    made_set = False       # an $addToSet made an array of no particular order
    for _ in range(r.randint(1, 5)):
        x = r.random()
        if x < 0.18:
            stages.append({"$match": rand_match(r)})
        elif x < 0.36:
            fields = r.sample(["a", "b", "d.p"], r.randint(1, 2))
            spec = {f: r.choice([1, -1]) for f in fields}
            if unique_ids and r.random() < 0.7:
                spec["_id"] = r.choice([1, -1])
            ordered = "_id" in spec
            stages.append({"$sort": spec})
        elif x < 0.52:
            # a and b never hold arrays (only c does), so keys and sorts
            # never meet parallel arrays
            spec = {"_id": r.choice([None, "$a", "$b", "$d.p", {"x": "$a", "y": "$d.p"}])}
            ops = ["$sum", "$avg", "$min", "$max", "$count", "$addToSet"]
            if ordered:
                ops += ["$first", "$last", "$push", "$push"]
            for f in r.sample(["a", "b", "c", "n"], r.randint(1, 3)):
                op = r.choice(ops)
                if op == "$count":
                    spec[f] = {"$count": {}}
                elif op in ("$push", "$addToSet"):
                    if "c" not in spec:
                        # a set's element order is arbitrary: never nest it
                        spec["c"] = {op: r.choice(["$a", "$b"] + ([] if made_set else ["$c"]))}
                        made_set |= op == "$addToSet"
                else:
                    spec[f] = {op: r.choice(["$a", "$b", "$d.p", 1])}
            stages.append({"$group": spec})
            ordered, unique_ids = False, True
        elif x < 0.62:
            stages.append({"$project": {f: 1 for f in r.sample(["a", "b", "c", "d.p"],
                                                               r.randint(1, 3))}})
        elif x < 0.72:
            spec = {r.choice(["x", "a"]): r.choice(["$b", "$d.p", {"$literal": 7}])}
            stages.append({"$addFields": spec})
        elif x < 0.84:
            spec = {"path": "$c"}
            if r.random() < 0.5:
                spec["preserveNullAndEmptyArrays"] = True
            if r.random() < 0.4 and not made_set:
                spec["includeArrayIndex"] = "i"
            stages.append({"$unwind": spec})
            unique_ids = False
            ordered = ordered and not made_set
        elif ordered:
            stages.append({"$limit": r.randint(1, 20)} if r.random() < 0.6
                          else {"$skip": r.randint(0, 10)})
    return stages, ordered


def canon(doc):
    if isinstance(doc, dict):
        return {k: canon(v) for k, v in doc.items() if v is not MISSING}
    if isinstance(doc, list):
        return [canon(v) for v in doc if v is not MISSING]
    return doc


@pytest.fixture(scope="module")
def coll(tmp_path_factory):
    s = multifora.Server(str(tmp_path_factory.mktemp("aggdiff") / "db"), port=0)
    s.start()
    c = pymongo.MongoClient(s.uri, serverSelectionTimeoutMS=5000)
    yield c.aggdiff
    c.close()
    s.stop()


def sorted_sets(docs, pipeline):
    """Sort the outputs of $addToSet (unordered in mongod) of the last $group
    when nothing after it looks inside them."""
    set_fields = set()
    for stage in pipeline:
        (name, spec), = stage.items()
        if name == "$group":
            set_fields = {f for f, a in spec.items() if f != "_id" and "$addToSet" in a}
        elif name == "$unwind":
            set_fields.discard(spec["path"][1:])
        elif name == "$addFields":
            for k, src in spec.items():
                if isinstance(src, str) and src[1:] in set_fields:
                    set_fields.add(k)
                else:
                    set_fields.discard(k)
    out = []
    for d in docs:
        d = dict(d)
        for f in set_fields:
            if isinstance(d.get(f), list):
                d[f] = sorted(d[f], key=functools.cmp_to_key(cmp))
        out.append(d)
    return out


SEEDS = range(20)
PER_SEED = 30


@pytest.mark.parametrize("seed", SEEDS)
def test_differential(coll, seed):
    r = random.Random(seed)
    docs = [canon(rand_doc(r, i)) for i in range(r.randint(20, 45))]
    coll.c.drop()
    coll.c.insert_many([dict(d) for d in docs])
    for n in range(PER_SEED):
        pipeline, ordered = rand_pipeline(r)
        has_set = any("$group" in s for s in pipeline)
        # $addToSet makes order-free arrays; they are compared sorted
        want = reference([dict(d) for d in docs], pipeline)
        got = list(coll.c.aggregate(pipeline))
        if has_set:
            want, got = sorted_sets(want, pipeline), sorted_sets(got, pipeline)
        tw, tg = [typed(d) for d in want], [typed(d) for d in got]
        if not ordered:
            tw, tg = sorted(tw, key=repr), sorted(tg, key=repr)
        assert tg == tw, f"seed={seed} pipeline #{n}: {pipeline}"
