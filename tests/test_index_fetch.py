"""The fetch side of an index scan (csrc/query/plan.c read-ahead, btree
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
