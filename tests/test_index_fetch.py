"""The fetch side of an index scan (csrc/query/plan_exec.c read-ahead, btree
hints): documents read through an index are always the current ones, also
when the collection changes between the batches of one cursor, which is
when the scan is repositioned and every hint it had is dropped."""
from __future__ import annotations

import random

import pytest


@pytest.fixture
def coll(client):
    c = client.fetchdb.docs
    rng = random.Random(5)
    c.insert_many([{"_id": i, "r": rng.randrange(1000), "v": 0} for i in range(6000)])
    c.create_index("r")
    return c


def test_index_order_and_contents(coll):
    want = sorted(((d["r"], d["_id"]) for d in coll.find({}, hint={"$natural": 1})
                   if 100 <= d["r"] < 400))
    got = [(d["r"], d["_id"]) for d in coll.find({"r": {"$gte": 100, "$lt": 400}}, batch_size=7)]
    assert coll.find({"r": {"$gte": 100, "$lt": 400}}).explain()[
        "queryPlanner"]["winningPlan"]["inputStage"]["stage"] == "IXSCAN"
    assert got == want  # index order: r, then record id (= _id here)


@pytest.mark.parametrize("deletes", [True, False])
@pytest.mark.parametrize("batch", [1, 5, 9, 33, 101])
def test_changes_between_batches_are_seen(coll, batch, deletes):
    """Between getMores: delete documents not yet returned and update others
    (v); every document returned is as it is at the time it is read, none
    twice, none deleted, every other one returned."""
    rng = random.Random(batch)
    cur = coll.find({"r": {"$gte": 200, "$lt": 700}}, batch_size=batch)
    seen, deleted, version = set(), set(), {}
    ahead = sorted(d["_id"] for d in coll.find({"r": {"$gte": 200, "$lt": 700}}))
    n = 0
    for doc in cur:
        assert doc["_id"] not in seen and doc["_id"] not in deleted
        assert doc["v"] == version.get(doc["_id"], 0), doc
        assert 200 <= doc["r"] < 700
        seen.add(doc["_id"])
        n += 1
        if n % batch == 0:  # the batch is over: change what is still ahead
            if n % (batch * 10) == 0:
                # A checkpoint freezes the pages: the writes below copy
                # them, and the old copies (with the old values) stay
                # readable where a stale hint would find them.
                coll.database.client.admin.command("fsync")
            rest = [i for i in ahead if i not in seen and i not in deleted]
            for i in rng.sample(rest, min(3, len(rest))) if deletes else ():
                coll.delete_one({"_id": i})
                deleted.add(i)
            for i in rng.sample(rest, min(5, len(rest))):
                if i in deleted:
                    continue
                version[i] = version.get(i, 0) + 1
                coll.update_one({"_id": i}, {"$set": {"v": version[i]}})
    assert seen == {i for i in ahead if i not in deleted}


@pytest.fixture
def big(client):
    """Records of three levels (about 900 leaves): a long index scan builds
    the records' locator (btree.h) and finds every leaf through it."""
    c = client.fetchdb.big
    rng = random.Random(8)
    for s in range(0, 30000, 5000):
        c.insert_many([{"_id": i, "r": rng.randrange(30000), "s": "p" * 60}
                       for i in range(s, s + 5000)])
    c.create_index("r")
    return c


def _both(c, lo, hi):
    q = {"r": {"$gte": lo, "$lt": hi}}
    got = sorted(d["_id"] for d in c.find(q, batch_size=20000))
    want = sorted(d["_id"] for d in c.find(q, hint={"$natural": 1}, batch_size=20000))
    return got, want


def test_locator_answers_as_the_scan_across_writes(client, big):
    """Long index scans between writes of every kind (each drops the
    locator; the next long scan builds another): the index answers as the
    collection scan does.  Another collection is created and dropped in
    between, so pages freed by one tree are reused by another whose record
    ids are the same."""
    rng = random.Random(3)
    other = client.fetchdb.other
    for step in range(8):
        lo = rng.randrange(20000)
        got, want = _both(big, lo, lo + 9000)
        assert got == want and len(got) > 5000, step
        kind = step % 4
        if kind == 0:  # deletes spread over the records
            big.delete_many({"_id": {"$in": [rng.randrange(30000) for _ in range(2000)]}})
        elif kind == 1:  # documents grow: their leaves split
            big.update_many({"_id": {"$mod": [7, step]}}, {"$set": {"s": "q" * 300}})
        elif kind == 2:  # new records at the end, and pages for another tree
            n0 = 30000 + step * 1000
            big.insert_many([{"_id": i, "r": rng.randrange(30000), "s": "n"}
                             for i in range(n0, n0 + 1000)])
            other.insert_many([{"_id": i, "r": i, "s": "o" * 80} for i in range(20000)])
        else:
            other.drop()
    got, want = _both(big, 0, 40000)
    assert got == want


def test_locator_cursor_sees_changes_between_batches(big):
    """A cursor reading through the locator, with writes between its
    batches: every document returned is current, none twice, none deleted."""
    rng = random.Random(4)
    q = {"r": {"$gte": 5000, "$lt": 25000}}
    cur = big.find(q, batch_size=1500)
    seen, deleted = set(), set()
    n = 0
    for doc in cur:
        assert doc["_id"] not in seen and doc["_id"] not in deleted
        assert 5000 <= doc["r"] < 25000
        assert doc["s"] in ("p" * 60, "z" * 200)
        seen.add(doc["_id"])
        n += 1
        if n % 1500 == 0:
            gone = [rng.randrange(30000) for _ in range(300)]
            big.delete_many({"_id": {"$in": gone}})
            deleted.update(g for g in gone if g not in seen)
            big.update_many({"_id": {"$in": [rng.randrange(30000) for _ in range(300)]}},
                            {"$set": {"s": "z" * 200}})
    left = {d["_id"] for d in big.find(q, hint={"$natural": 1})}
    assert not (left - seen), "a document present throughout was not returned"


@pytest.mark.parametrize("direction", [1, -1])
@pytest.mark.parametrize("batch", [1, 3, 7, 40])
def test_several_ranges_across_batches(coll, batch, direction):
    """The scan reads index entries ahead of the rows it returns, past the
    end of one range into the next.  A cursor's batch can end anywhere in
    that window; the next batch must resume in the range of the last row
    returned, not of the last entry read ahead."""
    values = [3, 4, 10, 11, 12, 500, 998]
    want = sorted(((d["r"], d["_id"]) for d in coll.find({}, hint={"$natural": 1})
                   if d["r"] in values), reverse=direction < 0)
    cur = coll.find({"r": {"$in": values}}, batch_size=batch).sort("r", direction)
    got = [(d["r"], d["_id"]) for d in cur]
    assert got == want
    plan = coll.find({"r": {"$in": values}}).sort("r", direction).explain()
    assert "SORT" not in str(plan["queryPlanner"]["winningPlan"])


def test_read_ahead_is_not_counted(coll):
    """Entries read ahead but never taken are not examined: explain counts
    what a scan reading one entry at a time would (mongod's counts)."""
    for limit in (1, 5, 40):
        e = coll.find({"r": {"$gte": 100}}).limit(limit).explain()["executionStats"]
        assert (e["nReturned"], e["totalKeysExamined"], e["totalDocsExamined"]) == (
            limit, limit, limit)
    # $in: one more key per value it seeks past (mongod's count too)
    e = coll.find({"r": {"$in": [5, 6, 7]}}).limit(4).explain()["executionStats"]
    assert e["nReturned"] == 4 and e["totalDocsExamined"] == 4
    assert e["totalKeysExamined"] <= 6


@pytest.mark.parametrize("direction", [1, -1])
@pytest.mark.parametrize("batch", [3, 1000])
def test_exact_bounds_fetch_only_what_they_hold(coll, direction, batch):
    """Ranges whose ends fall on runs of equal keys: the scan stops at each
    range's end, so no record outside the bounds is fetched (docs examined
    = returned), and only the key that ends a range is examined past it."""
    queries = [({"r": {"$gte": 100, "$lt": 400}}, 1),
               ({"r": {"$gt": 100, "$lte": 400}}, 1),
               ({"r": {"$in": [5, 77, 500]}}, 3),
               ({"r": {"$lt": 50}}, 1)]
    for q, nranges in queries:
        n = coll.count_documents(q)
        docs = list(coll.find(q, batch_size=batch, sort=[("r", direction)], hint=[("r", 1)]))
        assert len(docs) == n and n > 0
        st = coll.find(q, sort=[("r", direction)], hint=[("r", 1)]).explain()["executionStats"]
        assert (st["nReturned"], st["totalDocsExamined"]) == (n, n), (q, st)
        assert n <= st["totalKeysExamined"] <= n + nranges, (q, st)
