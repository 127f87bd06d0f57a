"""create, drop, dropDatabase, renameCollection, listCollections and
listDatabases through pymongo, over both paths, and their durability."""
import signal
import uuid

import pymongo
import pytest
from pymongo.errors import OperationFailure

from conftest import ServedProcess


def names(db):
    return sorted(db.list_collection_names())


def test_create_list_drop(any_client):
    db = any_client.shop
    db.create_collection("items")
    db.create_collection("orders")
    assert names(db) == ["items", "orders"]
    infos = {c["name"]: c for c in db.list_collections()}
    items = infos["items"]
    assert items["type"] == "collection" and items["options"] == {}
    assert items["info"]["readOnly"] is False
    assert isinstance(items["info"]["uuid"], uuid.UUID) or items["info"]["uuid"].subtype == 4
    assert items["idIndex"] == {"v": 2, "key": {"_id": 1}, "name": "_id_"}
    assert infos["items"]["info"]["uuid"] != infos["orders"]["info"]["uuid"]
    with pytest.raises(OperationFailure) as e:
        db.command("create", "items")
    assert e.value.code == 48 and "already exists" in str(e.value)
    reply = db.command("drop", "items")
    assert reply["nIndexesWas"] == 1 and reply["ns"] == "shop.items"
    assert names(db) == ["orders"]
    assert db.command("drop", "never_was")["ok"] == 1.0   # mongod 7.0: not an error


def test_list_collections_filter_and_name_only(client):
    db = client.t
    for n in ("a", "b", "c"):
        db.create_collection(n)
    assert [c["name"] for c in db.list_collections(filter={"name": {"$in": ["a", "c"]}})] == ["a", "c"]
    assert list(db.list_collections(filter={"name": {"$regex": "^b"}}))[0]["name"] == "b"
    slim = db.command({"listCollections": 1, "nameOnly": True})
    assert slim["cursor"]["ns"] == "t.$cmd.listCollections"
    assert slim["cursor"]["firstBatch"] == [{"name": n, "type": "collection"} for n in "abc"]
    with pytest.raises(OperationFailure) as e:
        db.command({"listCollections": 1, "filter": {"name": {"$bogus": 1}}})
    assert e.value.code == 2
    assert client.other.list_collection_names() == []


def test_list_and_drop_databases(client):
    client.d1.create_collection("x")
    client.d2.create_collection("y")
    client.d2.create_collection("z")
    # admin, config and local hold the server's own collections (sysdb.c)
    assert client.list_database_names() == ["admin", "config", "d1", "d2", "local"]
    full = client.admin.command("listDatabases")
    assert [d["name"] for d in full["databases"]] == ["admin", "config", "d1", "d2", "local"]
    assert "totalSize" in full
    only = client.admin.command({"listDatabases": 1, "filter": {"name": "d2"}, "nameOnly": True})
    assert only["databases"] == [{"name": "d2"}]
    assert client.drop_database("d2") is None
    assert client.list_database_names() == ["admin", "config", "d1", "local"]
    with pytest.raises(OperationFailure) as e:
        client.d1.command("listDatabases")
    assert e.value.code == 13


def test_rename(client):
    client.a.create_collection("src")
    client.a.create_collection("other")
    client.admin.command({"renameCollection": "a.src", "to": "b.dst"})
    assert names(client.a) == ["other"] and names(client.b) == ["dst"]
    with pytest.raises(OperationFailure) as e:
        client.admin.command({"renameCollection": "a.nope", "to": "a.x"})
    assert e.value.code == 26
    with pytest.raises(OperationFailure) as e:
        client.admin.command({"renameCollection": "a.other", "to": "b.dst"})
    assert e.value.code == 48
    client.admin.command({"renameCollection": "a.other", "to": "b.dst", "dropTarget": True})
    assert names(client.a) == [] and names(client.b) == ["dst"]


@pytest.mark.parametrize("name,code", [
    ("a$b", 73), ("", 73), ("system.foo", 73), ("x" * 300, 73),
])
def test_invalid_names(client, name, code):
    with pytest.raises(OperationFailure) as e:
        client.t.command({"create": name})
    assert e.value.code == code


def test_unsupported_create_options_are_refused(client):
    with pytest.raises(OperationFailure) as e:  # (time-series: not built yet)
        client.t.command({"create": "ts", "timeseries": {"timeField": "t"}})
    assert e.value.code == 115 and "timeseries" in str(e.value)
    assert client.t.list_collection_names() == []


def test_catalog_survives_kill_9(tmp_path):
    s = ServedProcess(tmp_path / "db").start()
    c = s.client()
    c.keep.create_collection("one")
    c.keep.create_collection("two")
    c.keep.drop_collection("one")
    c.close()
    s.proc.kill()  # acknowledged means durable: no clean shutdown needed
    s.proc.wait(timeout=30)
    s.stop()
    again = ServedProcess(tmp_path / "db").start()
    c = again.client()
    assert c.keep.list_collection_names() == ["two"]
    c.close()
    assert again.signal(signal.SIGTERM) == 0
    again.stop()
