"""collStats, dbStats, validate and listDatabases sizes through pymongo:
mongod 7.0's reply shapes and types, sizes that follow the data, the
`scale` argument and its errors.  Damage that only a bug could cause (a lost
index entry, a record that is not BSON) is made and detected in the C tests:
/command/validate/record_and_index_cross_check and /storage/btree/*."""
import bson
import pymongo
import pytest
from bson.int64 import Int64
from pymongo.errors import OperationFailure

import multifora

PAGE = 4096


def fill(coll, n, start=0, pad=100):
    coll.insert_many([{"_id": i, "x": "a" * pad} for i in range(start, start + n)])
    return sum(len(bson.encode({"_id": i, "x": "a" * pad})) for i in range(start, start + n))


# ------------------------------------------------------------------ collStats

COLL_STATS_KEYS = ["ns", "size", "count", "avgObjSize", "numOrphanDocs", "storageSize",
                   "freeStorageSize", "capped", "nindexes", "indexDetails", "indexBuilds",
                   "totalIndexSize", "indexSizes", "totalSize", "scaleFactor", "ok"]


def test_coll_stats_missing_collection_is_ok_with_zeros(client):
    # mongod 7.0 swallows NamespaceNotFound here and reports zeros.
    r = client.t.command("collStats", "nope")
    assert r == {"ns": "t.nope", "size": 0, "count": 0, "numOrphanDocs": 0, "storageSize": 0,
                 "totalSize": 0, "nindexes": 0, "totalIndexSize": 0, "indexDetails": {},
                 "indexSizes": {}, "scaleFactor": 1, "ok": 1.0}
    assert list(r) == ["ns", "size", "count", "numOrphanDocs", "storageSize", "totalSize",
                       "nindexes", "totalIndexSize", "indexDetails", "indexSizes",
                       "scaleFactor", "ok"]


def test_coll_stats_shape_and_values(any_client):
    db = any_client.t
    data = fill(db.c, 300)
    r = db.command("collStats", "c")
    # (a replica-set member's reply also gossips the clock, last)
    assert [k for k in r if k not in ("$clusterTime", "operationTime")] == COLL_STATS_KEYS
    assert r["ns"] == "t.c" and r["count"] == 300 and r["size"] == data
    assert r["avgObjSize"] == data // 300
    assert r["capped"] is False and r["numOrphanDocs"] == 0 and r["freeStorageSize"] == 0
    assert r["nindexes"] == 1 and r["indexBuilds"] == [] and list(r["indexDetails"]) == ["_id_"]
    assert list(r["indexSizes"]) == ["_id_"]
    assert r["totalIndexSize"] == r["indexSizes"]["_id_"] > 0
    # Pages: at least the data, whole pages, and the total adds up.
    assert r["storageSize"] >= data and r["storageSize"] % PAGE == 0
    assert r["totalIndexSize"] % PAGE == 0
    assert r["totalSize"] == r["storageSize"] + r["totalIndexSize"]
    assert r["scaleFactor"] == 1
    assert db.command("collstats", "c")["count"] == 300   # the lower-case alias


def test_coll_stats_empty_collection(client):
    client.t.create_collection("e")
    r = client.t.command("collStats", "e")
    assert "avgObjSize" not in r                    # mongod leaves it out at count 0
    assert r["count"] == 0 and r["size"] == 0 and r["nindexes"] == 1
    assert r["storageSize"] == 0 and r["indexSizes"] == {"_id_": 0}   # empty trees own no page


def test_coll_stats_grow_with_inserts(client):
    db = client.t
    fill(db.c, 10)
    before = db.command("collStats", "c")
    fill(db.c, 2000, start=10)
    after = db.command("collStats", "c")
    assert after["count"] == 2010
    assert after["size"] > before["size"]
    assert after["storageSize"] > before["storageSize"]
    assert after["totalIndexSize"] > before["totalIndexSize"]
    # Roughly the data: the leaves are not mostly empty.
    assert after["storageSize"] < 3 * after["size"]


def test_coll_stats_counts_large_documents(client):
    db = client.t
    db.big.insert_one({"_id": 1, "blob": b"z" * 200_000})
    r = db.command("collStats", "big")
    assert r["size"] > 200_000
    assert r["storageSize"] >= 49 * PAGE             # the overflow run is counted
    assert r["avgObjSize"] == r["size"]


def test_coll_stats_scale(client):
    db = client.t
    fill(db.c, 1000)
    raw = db.command("collStats", "c")
    r = db.command("collStats", "c", scale=1024)
    for k in ("size", "storageSize", "totalIndexSize", "totalSize"):
        assert r[k] == raw[k] // 1024, k
    assert r["indexSizes"]["_id_"] == raw["indexSizes"]["_id_"] // 1024
    assert r["avgObjSize"] == raw["avgObjSize"]      # not scaled, as mongod
    assert r["count"] == raw["count"] and r["scaleFactor"] == 1024
    # Non-integral scales are truncated; other number types are accepted.
    assert db.command("collStats", "c", scale=1023.999)["scaleFactor"] == 1023
    assert db.command("collStats", "c", scale=Int64(2))["scaleFactor"] == 2
    assert db.command("collStats", "c", scale=bson.Decimal128("4"))["scaleFactor"] == 4
    assert db.command("collStats", "c", scale=None)["scaleFactor"] == 1


@pytest.mark.parametrize("scale,shown", [(0, "0"), (-5, "-5"), (0.5, "0")])
def test_coll_stats_scale_below_one(client, scale, shown):
    with pytest.raises(OperationFailure) as e:
        client.t.command("collStats", "c", scale=scale)
    assert e.value.code == 51024
    assert e.value.details["codeName"] == "Location51024"
    assert str(e.value.details["errmsg"]) == (
        f"BSON field 'scale' value must be >= 1, actual value '{shown}'")


def test_coll_stats_argument_errors(client):
    with pytest.raises(OperationFailure) as e:
        client.t.command("collStats", "c", scale="big")
    assert e.value.code == 14
    assert e.value.details["errmsg"] == ("BSON field 'collStats.scale' is the wrong type "
                                         "'string', expected types '[long, int, decimal, double']")
    with pytest.raises(OperationFailure) as e:
        client.t.command("collStats", 1)
    assert e.value.code == 73 and e.value.details["errmsg"] == "collection name has invalid type int"
    with pytest.raises(OperationFailure) as e:
        client.t.command("collStats", "")
    assert e.value.code == 73 and e.value.details["errmsg"] == "Invalid namespace specified 't.'"


# -------------------------------------------------------------------- dbStats

DB_STATS_KEYS = ["db", "collections", "views", "objects", "avgObjSize", "dataSize",
                 "storageSize", "indexes", "indexSize", "totalSize", "scaleFactor",
                 "fsUsedSize", "fsTotalSize", "ok"]


def test_db_stats_missing_database(client):
    r = client.nothing.command("dbStats")
    assert list(r) == DB_STATS_KEYS
    assert r["db"] == "nothing"
    assert all(r[k] == 0 for k in DB_STATS_KEYS[1:] if k not in ("scaleFactor", "ok"))
    assert r["scaleFactor"] == 1


def test_db_stats_values_and_types(client):
    db = client.shop
    data_a = fill(db.a, 400)
    data_b = fill(db.b, 50, pad=10)
    db.create_collection("empty")
    fill(client.elsewhere.z, 5)                      # another database: not counted
    r = db.command("dbStats")
    assert list(r) == DB_STATS_KEYS
    for k in ("collections", "views", "objects", "indexes", "scaleFactor"):
        assert isinstance(r[k], Int64), k           # mongod: long
    for k in ("avgObjSize", "dataSize", "storageSize", "indexSize", "totalSize",
              "fsUsedSize", "fsTotalSize"):
        assert isinstance(r[k], float), k           # mongod: double
    assert r["collections"] == 3 and r["views"] == 0 and r["objects"] == 450
    assert r["indexes"] == 3
    assert r["dataSize"] == data_a + data_b
    assert r["avgObjSize"] == pytest.approx((data_a + data_b) / 450)
    per = [db.command("collStats", n) for n in ("a", "b", "empty")]
    assert r["storageSize"] == sum(p["storageSize"] for p in per)
    assert r["indexSize"] == sum(p["totalIndexSize"] for p in per)
    assert r["totalSize"] == r["storageSize"] + r["indexSize"]
    assert 0 < r["fsUsedSize"] <= r["fsTotalSize"]
    assert db.command("dbstats")["objects"] == 450   # the lower-case alias


def test_db_stats_scale_and_free_storage(client):
    db = client.t
    fill(db.c, 100)
    raw = db.command("dbStats")
    r = db.command("dbStats", scale=1024)
    assert r["scaleFactor"] == 1024
    assert r["dataSize"] == pytest.approx(raw["dataSize"] / 1024)   # a fraction, as mongod
    assert r["avgObjSize"] == raw["avgObjSize"]
    assert r["fsTotalSize"] == pytest.approx(raw["fsTotalSize"] / 1024)
    f = db.command("dbStats", freeStorage=1)
    assert f["freeStorageSize"] == 0 and f["indexFreeStorageSize"] == 0
    assert f["totalFreeStorageSize"] == 0
    assert list(f).index("freeStorageSize") == list(f).index("storageSize") + 1


@pytest.mark.parametrize("scale", [0, -1, 2 ** 50 + 1, 0.25])
def test_db_stats_scale_out_of_range(client, scale):
    with pytest.raises(OperationFailure) as e:
        client.t.command("dbStats", scale=scale)
    assert e.value.code == 2
    assert e.value.details["errmsg"] == (
        "Scale factor must be greater than zero and less than or equal to 2^50")


def test_db_stats_scale_wrong_type(client):
    with pytest.raises(OperationFailure) as e:
        client.t.command("dbStats", scale=[1])
    assert e.value.code == 14
    assert e.value.details["errmsg"] == ("BSON field 'dbStats.scale' is the wrong type "
                                         "'array', expected types '[long, int, decimal, double']")


# ------------------------------------------------------------------- validate

VALIDATE_KEYS = ["ns", "uuid", "nInvalidDocuments", "nNonCompliantDocuments", "nrecords",
                 "nIndexes", "keysPerIndex", "indexDetails", "valid", "repaired", "warnings",
                 "errors", "extraIndexEntries", "missingIndexEntries", "corruptRecords", "ok"]


@pytest.mark.parametrize("full", [False, True])
def test_validate_healthy_collection(client, full):
    db = client.t
    fill(db.c, 1500)
    db.c.insert_one({"_id": "big", "blob": b"q" * 50_000})
    r = db.command("validate", "c", full=full)
    assert list(r) == VALIDATE_KEYS
    assert r["ns"] == "t.c" and r["valid"] is True and r["repaired"] is False
    info = next(db.list_collections(filter={"name": "c"}))["info"]
    assert r["uuid"] == info["uuid"]
    assert r["nrecords"] == 1501 and r["nInvalidDocuments"] == 0
    assert r["nNonCompliantDocuments"] == 0
    assert r["nIndexes"] == 1 and r["keysPerIndex"] == {"_id_": 1501}
    assert r["indexDetails"] == {"_id_": {"valid": True}}
    for k in ("warnings", "errors", "extraIndexEntries", "missingIndexEntries",
              "corruptRecords"):
        assert r[k] == [], k
    assert "advice" not in r


def test_validate_empty_collection(client):
    client.t.create_collection("e")
    r = client.t.command("validate", "e")
    assert r["valid"] is True and r["nrecords"] == 0 and r["keysPerIndex"] == {"_id_": 0}


def test_validate_errors(client):
    with pytest.raises(OperationFailure) as e:
        client.t.command("validate", "nope")
    assert e.value.code == 26 and e.value.details["codeName"] == "NamespaceNotFound"
    assert e.value.details["errmsg"] == "Collection 't.nope' does not exist to validate."
    client.t.create_collection("c")
    with pytest.raises(OperationFailure) as e:
        client.t.command("validate", "c", full=True, background=True)
    assert e.value.code == 72
    assert e.value.details["errmsg"] == ("Running the validate command with both "
                                         "{ background: true } and { full: true } is not "
                                         "supported.")
    with pytest.raises(OperationFailure) as e:
        client.t.command("validate", "c", background=True)
    assert e.value.code == 115
    with pytest.raises(OperationFailure) as e:
        client.t.command("validate", 5)
    assert e.value.code == 73


# -------------------------------------------------------------- listDatabases

def test_list_databases_sizes(client):
    fill(client.d1.c, 500)
    fill(client.d2.c, 20)
    fill(client.d2.k, 20)
    client.d3.create_collection("nothing_yet")
    r = client.admin.command("listDatabases")
    dbs = {d["name"]: d for d in r["databases"]}
    assert list(dbs) == ["admin", "config", "d1", "d2", "d3", "local"]
    for name in ("d1", "d2"):
        assert isinstance(dbs[name]["sizeOnDisk"], Int64)
        assert dbs[name]["sizeOnDisk"] == client[name].command("dbStats")["totalSize"] > 0
        assert dbs[name]["empty"] is False
    assert dbs["d1"]["sizeOnDisk"] > dbs["d2"]["sizeOnDisk"]
    # A database of empty collections occupies no page yet: mongod's rule
    # (empty = sizeOnDisk == 0) calls it empty.
    assert dbs["d3"]["sizeOnDisk"] == 0 and dbs["d3"]["empty"] is True
    assert r["totalSize"] == sum(d["sizeOnDisk"] for d in dbs.values())
    assert r["totalSizeMb"] == r["totalSize"] // (1024 * 1024)
    only = client.admin.command({"listDatabases": 1, "filter": {"name": "d2"}})
    assert [d["name"] for d in only["databases"]] == ["d2"]
    assert only["totalSize"] == dbs["d2"]["sizeOnDisk"]    # the kept databases only
    big = client.admin.command({"listDatabases": 1,
                                "filter": {"sizeOnDisk": {"$gt": dbs["d2"]["sizeOnDisk"]}}})
    assert [d["name"] for d in big["databases"]] == ["d1"]


def test_sizes_and_validate_survive_restart(tmp_path):
    path = str(tmp_path / "db")

    def session(fn):
        srv = multifora.Server(path, port=0)
        srv.start()
        try:
            with pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000) as c:
                return fn(c)
        finally:
            srv.stop()

    def load(c):
        fill(c.t.c, 3000)
        return c.t.command("collStats", "c")

    before = session(load)
    after, v = session(lambda c: (c.t.command("collStats", "c"),
                                  c.t.command("validate", "c", full=True)))
    for k in ("count", "size", "storageSize", "totalIndexSize", "indexSizes"):
        assert after[k] == before[k], k
    assert v["valid"] is True and v["nrecords"] == 3000   # every page read after reopen
