"""text: what a text index buys and costs (issue 49).

One server (`python -m multifora serve`), pymongo.  Documents of about 20
words drawn from 5,000 made-up words (a Zipf-like draw, so some words are
common and most rare), in a field `body`.

  query            find({$text: {$search: w}}) for words each in about
                   0.5-2% of the documents, all results read, over the
                   collection with a text index on body; the floor is the
                   same words found without an index, by a collection scan
                   with {body: {$regex: "\\bw\\b", $options: "i"}} (the
                   query one writes without a text index).  The ratio is
                   text over regex: below 1, the index is faster.
  inserts          insert_many of 1,000 such documents at a time into a
                   collection with a text index on body, against one with
                   only _id; alternating rounds.  docs/s; the ratio is with
                   over without (below 1: slower with the index).

Sizes: --full 100,000 documents, 7 rounds; quick 20,000 and 3; smoke 1,000
and 1.
"""
from __future__ import annotations

import random
import time

import pymongo

VOCAB = 5000


def _words():
    def word(i):
        letters = "etaoinshrdlucmfwypvbgkqjxz"
        s, x = "", i + 7
        while x:
            s += letters[x % 26]
            x //= 26
        return s + "ing" if i % 5 == 0 else s
    return sorted({word(i * 7919 % 100003) for i in range(VOCAB)})


def _doc(rng, words, i):
    n = rng.randint(10, 30)
    # a Zipf-like draw: low ranks are common
    return {"_id": i, "body": " ".join(words[min(len(words) - 1, int(rng.paretovariate(0.8)) - 1)]
                                       for _ in range(n))}


def run(ctx) -> dict:
    n = 100_000 if ctx.full else 1000 if ctx.smoke else 20_000
    rounds = 7 if ctx.full else 1 if ctx.smoke else 3
    rng = random.Random(49)
    words = _words()
    rng.shuffle(words)
    docs = [_doc(rng, words, i) for i in range(n)]
    srv = ctx.start_multifora()
    client = pymongo.MongoClient(srv.uri)
    db = client.bench
    ctx.log(f"loading {n} documents")
    for i in range(0, n, 5000):
        db.text.insert_many(docs[i:i + 5000])
    t0 = time.perf_counter()
    db.text.create_index([("body", "text")])
    build_s = time.perf_counter() - t0
    ctx.log(f"text index built in {build_s:.2f} s")
    # words in about 0.5-2% of the documents
    counts = {}
    for d in docs[:5000]:
        for w in set(d["body"].split()):
            counts[w] = counts.get(w, 0) + 1
    lo, hi = 0.005 * min(n, 5000), 0.02 * min(n, 5000)
    chosen = [w for w, k in sorted(counts.items()) if lo <= k <= hi][:5] or [docs[0]["body"].split()[0]]
    ctx.log(f"query words: {chosen}")
    hits = [0]

    def query(side: str) -> float:
        t = time.perf_counter()
        for w in chosen:
            if side == "text":
                got = list(db.text.find({"$text": {"$search": w}}, {"_id": 1}))
            else:
                got = list(db.text.find({"body": {"$regex": f"\\b{w}\\b", "$options": "i"}},
                                        {"_id": 1}))
            hits[0] = len(got)
        return (time.perf_counter() - t) * 1000 / len(chosen)

    ab = ctx.alternate(rounds, query, ("text", "regex"))

    batch = docs[:1000]
    seq = [n]

    def inserts(side: str) -> float:
        coll = db.ins_text if side == "text" else db.ins_plain
        coll.drop()
        if side == "text":
            coll.create_index([("body", "text")])
        total, t = 0, time.perf_counter()
        for _ in range(5 if not ctx.smoke else 1):
            coll.insert_many([{**d, "_id": seq[0] + k} for k, d in enumerate(batch)])
            seq[0] += len(batch)
            total += len(batch)
        return total / (time.perf_counter() - t)

    ins = ctx.alternate(rounds, inserts, ("text", "plain"))
    client.close()
    ctx.stop_all()
    return {"part": "text", "rows": [
        ctx.row(f"$text query of one word ({n:,} documents)", "ms", ab["text"],
                floor=ab["regex"],
                note=f"words {chosen}, last one {hits[0]} documents; floor: the same words "
                     f"by a $regex collection scan without the index; index build "
                     f"{build_s:.2f} s"),
        ctx.row("insert_many with a text index vs none", "docs/s", ins["text"],
                floor=ins["plain"],
                note="1,000-document batches of ~20 words; floor: the same into a "
                     "collection with only _id"),
    ]}
