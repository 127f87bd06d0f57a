"""Embedded document stores behind one small interface, for part_peers.py.

Each adapter opens one store in a scratch directory and answers the same
few calls on the collection of benchmark documents
``{_id: i, k: <a permutation of 0..N-1>, n: <another permutation>,
g: i % 100, u: 0, s: <32 chars>}`` (peers/workload.py):

    create_index_k()          an index on k, where the store has indexes
    insert_batch(docs)        one bulk insert
    find_by_id(i), find_by_k(k)   one document (a plain dict) or None
    count_range(lo, hi)       how many have lo <= n < hi (n has no index)
    group()                   [(g, count, sum of n)] ordered by g, or
                              raises Unsupported where the store has no
                              aggregation
    update_one(i)             $inc u by 1 on _id i; returns matched count
    delete_one(i)             deletes _id i; returns deleted count
    count_all()               the number of documents
    close()

The adapters call each store the way its documentation shows; none of
them adds an index or a cache the store would not have on its own.
``DURABILITY`` says what a single write costs each store on disk, since
that differs and the figures have to be read with it.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Dict, List, Optional, Tuple

PIPELINE = [{"$group": {"_id": "$g", "c": {"$sum": 1}, "t": {"$sum": "$n"}}},
            {"$sort": {"_id": 1}}]


class Unsupported(Exception):
    """The store has no such operation."""


class MongoLike:
    """Stores with a pymongo-like collection object in ``self.coll``."""

    has_index = True
    has_aggregate = True

    def create_index_k(self) -> None:
        self.coll.create_index("k")

    def insert_batch(self, docs: List[dict]) -> None:
        self.coll.insert_many(docs)

    def find_by_id(self, i: int) -> Optional[dict]:
        d = self.coll.find_one({"_id": i})
        return None if d is None else dict(d)

    def find_by_k(self, k: int) -> Optional[dict]:
        d = self.coll.find_one({"k": k})
        return None if d is None else dict(d)

    def count_range(self, lo: int, hi: int) -> int:
        return self.coll.count_documents({"n": {"$gte": lo, "$lt": hi}})

    def group(self) -> List[Tuple[int, int, int]]:
        if not self.has_aggregate:
            raise Unsupported("no aggregate")
        return [(d["_id"], d["c"], d["t"]) for d in self.coll.aggregate(PIPELINE)]

    def update_one(self, i: int) -> int:
        return self.coll.update_one({"_id": i}, {"$inc": {"u": 1}}).matched_count

    def delete_one(self, i: int) -> int:
        return self.coll.delete_one({"_id": i}).deleted_count

    def count_all(self) -> int:
        return self.coll.count_documents({})

    def close(self) -> None:
        self.client.close()


class Multifora(MongoLike):
    name = "multifora"
    durability = "every write a durable commit (group commit, fdatasync)"

    def __init__(self, path: Path):
        import multifora
        self.client = multifora.open(str(path / "db"))
        self.coll = self.client.bench.c


class MultiforaDirect:
    """MultiforaDB's in-process command path, ``Server.command()``: the
    same dispatcher as the wire with no socket and no driver (BSON in, BSON
    out).  Beside the ``multifora`` row it shows what pymongo and the
    socket add to each call."""

    name = "multifora-direct"
    durability = "as multifora"
    has_index = True
    has_aggregate = True

    def __init__(self, path: Path):
        import multifora
        self.server = multifora.Server(str(path / "db"), port=0).start()
        self.cmd = self.server.command

    def create_index_k(self) -> None:
        self.cmd("bench", {"createIndexes": "c", "indexes": [{"key": {"k": 1}, "name": "k_1"}]})

    def insert_batch(self, docs: List[dict]) -> None:
        self.cmd("bench", {"insert": "c", "documents": docs})

    def _one(self, flt: dict) -> Optional[dict]:
        batch = self.cmd("bench", {"find": "c", "filter": flt, "limit": 1,
                                   "singleBatch": True})["cursor"]["firstBatch"]
        return batch[0] if batch else None

    def find_by_id(self, i: int) -> Optional[dict]:
        return self._one({"_id": i})

    def find_by_k(self, k: int) -> Optional[dict]:
        return self._one({"k": k})

    def count_range(self, lo: int, hi: int) -> int:
        # What pymongo's count_documents sends (not the count command), so
        # that beside the multifora row only the driver and socket differ.
        reply = self.cmd("bench", {"aggregate": "c", "pipeline": [
            {"$match": {"n": {"$gte": lo, "$lt": hi}}},
            {"$group": {"_id": 1, "n": {"$sum": 1}}}], "cursor": {}})
        batch = reply["cursor"]["firstBatch"]
        return batch[0]["n"] if batch else 0

    def group(self) -> List[Tuple[int, int, int]]:
        reply = self.cmd("bench", {"aggregate": "c", "pipeline": PIPELINE, "cursor": {}})
        assert reply["cursor"]["id"] == 0, "one batch expected: 100 groups"
        return [(d["_id"], d["c"], d["t"]) for d in reply["cursor"]["firstBatch"]]

    def update_one(self, i: int) -> int:
        return self.cmd("bench", {"update": "c", "updates": [
            {"q": {"_id": i}, "u": {"$inc": {"u": 1}}}]})["n"]

    def delete_one(self, i: int) -> int:
        return self.cmd("bench", {"delete": "c", "deletes": [{"q": {"_id": i}, "limit": 1}]})["n"]

    def count_all(self) -> int:
        return self.cmd("bench", {"count": "c"})["n"]

    def close(self) -> None:
        self.server.stop()


class Mongomock(MongoLike):
    name = "mongomock"
    durability = "memory only"

    def __init__(self, path: Path):
        import mongomock
        self.client = mongomock.MongoClient()
        self.coll = self.client.bench.c


class Montydb(MongoLike):
    """montydb keeps no indexes (create_index is a no-op) and has no
    aggregate: find_one on k scans."""

    has_index = False
    has_aggregate = False

    def __init__(self, path: Path, storage: str):
        import montydb
        repo = str(path / "monty")
        if storage == "lightning":
            # The default LMDB map is 10 MB; a larger map only reserves
            # address space.
            montydb.set_storage(repo, storage="lightning", map_size=str(64 << 30))
        else:
            montydb.set_storage(repo, storage=storage)
        self.client = montydb.MontyClient(repo)
        self.coll = self.client.bench.c

    def create_index_k(self) -> None:
        pass


class MontydbSqlite(Montydb):
    name = "montydb-sqlite"
    durability = "SQLite WAL, its default synchronous, a commit per write"

    def __init__(self, path: Path):
        super().__init__(path, "sqlite")


class MontydbLightning(Montydb):
    name = "montydb-lmdb"
    durability = "LMDB, synced commit per write"

    def __init__(self, path: Path):
        super().__init__(path, "lightning")


class Mongita(MongoLike):
    """mongita's disk client: one index per field, kept in memory and
    written with the collection; no aggregate.  Its _id must be a string
    or an ObjectId, so _id i is stored as str(i) and read back as i: the
    same lookups, on string keys."""

    name = "mongita"
    durability = "files rewritten, no fsync"
    has_aggregate = False

    def __init__(self, path: Path):
        from mongita import MongitaClientDisk
        self.client = MongitaClientDisk(str(path / "mongita"))
        self.coll = self.client.bench.c

    def insert_batch(self, docs: List[dict]) -> None:
        self.coll.insert_many([dict(d, _id=str(d["_id"])) for d in docs])

    @staticmethod
    def _back(d) -> Optional[dict]:
        return None if d is None else dict(d, _id=int(d["_id"]))

    def find_by_id(self, i: int) -> Optional[dict]:
        return self._back(self.coll.find_one({"_id": str(i)}))

    def find_by_k(self, k: int) -> Optional[dict]:
        return self._back(self.coll.find_one({"k": k}))

    def update_one(self, i: int) -> int:
        return self.coll.update_one({"_id": str(i)}, {"$inc": {"u": 1}}).matched_count

    def delete_one(self, i: int) -> int:
        return self.coll.delete_one({"_id": str(i)}).deleted_count


class Sqlite:
    """Python's sqlite3: a table (id INTEGER PRIMARY KEY, doc TEXT) of JSON
    documents and an expression index on json_extract(doc, '$.k').  WAL
    journal with synchronous=FULL, each single write its own transaction:
    durable per write like MultiforaDB; a bulk insert is one transaction."""

    name = "sqlite-json"
    durability = "WAL, synchronous=FULL, a transaction per write"
    has_index = True
    has_aggregate = True

    def __init__(self, path: Path):
        self.db = sqlite3.connect(str(path / "docs.sqlite"), isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, doc TEXT NOT NULL)")

    def create_index_k(self) -> None:
        self.db.execute("CREATE INDEX docs_k ON docs (json_extract(doc, '$.k'))")

    def insert_batch(self, docs: List[dict]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO docs (id, doc) VALUES (?, ?)",
                            [(d["_id"], json.dumps(d)) for d in docs])
        self.db.execute("COMMIT")

    def _one(self, sql: str, arg: int) -> Optional[dict]:
        row = self.db.execute(sql, (arg,)).fetchone()
        return None if row is None else json.loads(row[0])

    def find_by_id(self, i: int) -> Optional[dict]:
        return self._one("SELECT doc FROM docs WHERE id = ?", i)

    def find_by_k(self, k: int) -> Optional[dict]:
        return self._one("SELECT doc FROM docs WHERE json_extract(doc, '$.k') = ? LIMIT 1", k)

    def count_range(self, lo: int, hi: int) -> int:
        return self.db.execute(
            "SELECT count(*) FROM docs WHERE json_extract(doc, '$.n') >= ? "
            "AND json_extract(doc, '$.n') < ?", (lo, hi)).fetchone()[0]

    def group(self) -> List[Tuple[int, int, int]]:
        return [tuple(r) for r in self.db.execute(
            "SELECT json_extract(doc, '$.g') AS g, count(*), sum(json_extract(doc, '$.n')) "
            "FROM docs GROUP BY g ORDER BY g")]

    def update_one(self, i: int) -> int:
        return self.db.execute(
            "UPDATE docs SET doc = json_set(doc, '$.u', json_extract(doc, '$.u') + 1) "
            "WHERE id = ?", (i,)).rowcount

    def delete_one(self, i: int) -> int:
        return self.db.execute("DELETE FROM docs WHERE id = ?", (i,)).rowcount

    def count_all(self) -> int:
        return self.db.execute("SELECT count(*) FROM docs").fetchone()[0]

    def close(self) -> None:
        self.db.close()


# Order: the reference first.  The module each needs, for "not installed".
PEERS: Dict[str, Tuple[type, Optional[str]]] = {
    "multifora": (Multifora, "multifora"),
    "multifora-direct": (MultiforaDirect, "multifora"),
    "sqlite-json": (Sqlite, None),
    "mongomock": (Mongomock, "mongomock"),
    "montydb-sqlite": (MontydbSqlite, "montydb"),
    "montydb-lmdb": (MontydbLightning, "lmdb"),
    "mongita": (Mongita, "mongita"),
}


def missing_module(name: str) -> Optional[str]:
    """The module a peer needs that cannot be imported here, else None."""
    import importlib.util
    mods = [PEERS[name][1]] + (["montydb"] if name == "montydb-lmdb" else [])
    for mod in mods:
        if mod and importlib.util.find_spec(mod) is None:
            return mod
    return None
