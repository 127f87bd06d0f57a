"""Code, CodeWScope and DBPointer values whose string holds a NUL keep every
byte: stored, returned, compared, grouped, updated and found through an
index.  libbson's appenders take those strings as C strings, so a document
copied element by element through them lost the text past the NUL (an
inserted Code("x\\0y") came back as Code("x"), and matched Code("x\\0z")).
csrc/bsonx/append.c writes such values from their bytes."""
from __future__ import annotations

import struct

import pytest
from bson import Code
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument

RAW = CodecOptions(document_class=RawBSONDocument)
XY, XZ, X = Code("x\x00y"), Code("x\x00z"), Code("x")


def element(type_byte: int, key: str, body: bytes) -> bytes:
    return bytes([type_byte]) + key.encode() + b"\x00" + body


def raw_doc(*elements: bytes) -> RawBSONDocument:
    body = b"".join(elements) + b"\x00"
    return RawBSONDocument(struct.pack("<i", 4 + len(body)) + body)


def string(b: bytes) -> bytes:
    return struct.pack("<i", len(b) + 1) + b + b"\x00"


def dbpointer(coll: bytes) -> bytes:
    return string(coll) + b"\x01" * 12


@pytest.fixture
def coll(client):
    c = client.t.code
    c.insert_many([{"_id": 1, "v": XY}, {"_id": 2, "v": XZ}, {"_id": 3, "v": X},
                   {"_id": 4, "v": Code("x\x00y", {"k": 1})}])
    return c


def test_stored_and_returned_whole(coll):
    raw = coll.with_options(codec_options=RAW).find_one({"_id": 1}).raw
    assert raw.endswith(element(0x0D, "v", string(b"x\x00y")) + b"\x00")
    assert [d["v"] for d in coll.find().sort("_id", 1)] == [XY, XZ, X, Code("x\x00y", {"k": 1})]
    assert coll.find_one({"_id": 4})["v"].scope == {"k": 1}


@pytest.mark.parametrize("hint", [None, "v_1", [("$natural", 1)]])
def test_compared_whole_with_and_without_an_index(coll, hint):
    coll.create_index("v")

    def ids(f):
        cur = coll.find(f) if hint is None else coll.find(f).hint(hint)
        return sorted(d["_id"] for d in cur)

    assert ids({"v": XY}) == [1]
    assert ids({"v": {"$in": [XZ, X]}}) == [2, 3]
    assert ids({"v": Code("x\x00q")}) == []
    assert ids({"v": Code("x\x00y", {"k": 1})}) == [4]
    assert ids({"v": {"$gt": XY, "$lt": Code("x\x00zz")}}) == [2]


def test_grouped_projected_and_updated_whole(coll):
    f = {"_id": {"$lte": 3}}
    assert sorted(coll.distinct("v", f), key=str) == sorted([XY, XZ, X], key=str)
    groups = coll.aggregate([{"$match": f}, {"$group": {"_id": "$v", "n": {"$sum": 1}}}])
    assert sorted((g["_id"], g["n"]) for g in groups) == sorted([(XY, 1), (XZ, 1), (X, 1)])
    got = coll.aggregate([{"$match": f}, {"$group": {"_id": None, "s": {"$addToSet": "$v"}}}])
    assert sorted(next(got)["s"], key=str) == sorted([XY, XZ, X], key=str)
    assert [d["_id"] for d in coll.find({"$expr": {"$eq": ["$v", XY]}})] == [1]
    assert [d["w"] for d in coll.aggregate([{"$match": {"_id": 2}}, {"$project": {"w": "$v"}}])] \
        == [XZ]
    coll.update_one({"_id": 3}, {"$set": {"w": Code("p\x00q"), "l": [Code("a\x00b")]}})
    doc = coll.find_one({"_id": 3})
    assert (doc["w"], doc["l"]) == (Code("p\x00q"), [Code("a\x00b")])
    assert coll.find_one_and_update({"_id": 2}, {"$unset": {"zz": 1}}, {"v": 1})["v"] == XZ


def test_dbpointer_and_code_with_scope_found_through_an_index(client):
    c = client.t.raw.with_options(codec_options=RAW)
    c.create_index("v")
    values = [(0x0C, dbpointer(b"a\x00b")), (0x0C, dbpointer(b"a")),
              (0x0F, struct.pack("<i", 4 + 4 + 4 + 5) + string(b"x\x00y") + b"\x05\x00\x00\x00\x00")]
    for i, (t, body) in enumerate(values):
        c.insert_one(raw_doc(element(0x10, "_id", struct.pack("<i", i)), element(t, "v", body)))
    for i, (t, body) in enumerate(values):
        assert c.find_one({"_id": i}).raw.endswith(element(t, "v", body) + b"\x00")
        f = raw_doc(element(0x03, "v", bytes(raw_doc(element(t, "$eq", body)).raw)))
        for hint in ("v_1", [("$natural", 1)]):
            assert [d["_id"] for d in c.find(f).hint(hint)] == [i], (i, hint)
