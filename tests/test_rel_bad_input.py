"""Reliability, bad input (issue 7): a served server refuses malformed and
over-limit input as mongod 7.0 does, and the damage stays with the one
connection that sent it.

Three parts, all against one ``python -m multifora serve`` child (so "the
server stays up" means the process is alive and answering):

* Every ``decodeErrors`` vector of ../shared/spec/bson-corpus (75 in 17
  files), sent inside an OP_MSG two ways: as the body (kind 0) and as a
  document of a kind-1 ``documents`` sequence of an insert.  Each is refused
  with InvalidBSON (22) and one of mongod's validateBSON messages, except
  the one vector whose stated length is shorter than its bytes sent as a
  body: mongod reads the 4 bytes left over as the next section's kind and
  answers 40432 "Unknown section kind 222", and so do we.  After each one
  the offending connection still answers a ping, a bystander connection
  opened before it answers too, and the process is alive.

* Each limit at its value and at value + 1, with mongod 7.0's codes and
  messages (docs/reliability.md has the table): document 16 MiB (and the
  16 MiB + 16 KiB a message may carry), message 48,000,000 bytes, write
  batch 100,000, nesting depth (200 on the wire, 180 stored), namespace
  length (255 bytes for db.collection, 63 for a database name), 64 indexes
  per collection.

* Random mutations of the corpus's valid documents, framed as OP_MSG
  commands: each gets a reply or a clean close, and the server stays up.
  ``--wire-mutations N`` (default 2,000; 100,000 for the large setting).
"""
from __future__ import annotations

import collections
import json
import random
import struct
import threading
from pathlib import Path

import bson
import pymongo
import pytest
from bson.son import SON

import wirelib
from conftest import ServedProcess

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "spec" / "bson-corpus"

MIB16 = 16 * 1024 * 1024          # maxBsonObjectSize (BSONObjMaxUserSize)
INTERNAL_MAX = MIB16 + 16 * 1024  # BSONObjMaxInternalSize: what a message may carry
MAX_MESSAGE = 48_000_000          # maxMessageSizeBytes
MAX_BATCH = 100_000               # maxWriteBatchSize

# The messages of mongod's validateBSON (bson/bson_validate.cpp), plus the
# two checks the project adds (UTF-8, old binary subtype 2's inner length).
VALIDATE_MESSAGES = (
    "BSON data has to be at least 5 bytes",
    "Incorrect BSON length",
    "BSON object not terminated with EOO",
    "BSON size is larger than buffer size",
    "Not null terminated string",
    "incorrect BSON length",
    "Nested BSON object has to be at least 5 bytes",
    "BSON bool is neither false nor true",
    "Unrecognized BSON type",
    "Found string that doesn't follow UTF-8 encoding.",
    "Invalid BinData subtype 2 length",
)


def _vectors():
    if not CORPUS.is_dir():
        return []
    out = []
    for f in sorted(CORPUS.glob("*.json")):
        for case in json.loads(f.read_text()).get("decodeErrors", []):
            out.append((f.stem, case["description"], bytes.fromhex(case["bson"])))
    return out


VECTORS = _vectors()
needs_corpus = pytest.mark.skipif(not VECTORS, reason=f"{CORPUS} is absent: the BSON corpus "
                                  "lives in ../shared")


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = ServedProcess(tmp_path_factory.mktemp("badinput") / "db").start()
    # Drain the log (a line per connection): a full pipe would block the
    # server's writes to stderr and look like a hang.
    log = collections.deque(maxlen=200)
    threading.Thread(target=lambda: [log.append(line) for line in s.proc.stderr],
                     daemon=True).start()
    s.log = log
    yield s
    s.stop()


@pytest.fixture(scope="module")
def mclient(served):
    c = served.client()
    yield c
    c.close()


@pytest.fixture
def bystander(served):
    """A raw connection opened before the bad input and checked after it."""
    c = wirelib.Conn(served.port, timeout=30)
    assert ping(c)
    yield c
    assert ping(c), "a bystander connection stopped answering"
    c.close()
    assert served.proc.poll() is None, "the server process died"


def conn(served, timeout=30.0) -> wirelib.Conn:
    return wirelib.Conn(served.port, timeout=timeout)


_ids = iter(range(1000, 1 << 30))


def ping(c: wirelib.Conn) -> bool:
    r = c.roundtrip(wirelib.op_msg(wirelib.body_section({"ping": 1, "$db": "admin"}),
                                   request_id=next(_ids)))
    return r.doc == {"ok": 1.0}


def command(c: wirelib.Conn, body: dict, seqs=()) -> dict:
    """Run `body` with the document sequences `seqs` ((name, [docs]))
    before it; every doc may be raw bytes.  Returns the reply document."""
    rid = next(_ids)
    msg = wirelib.op_msg(*[wirelib.seq_section(n, d) for n, d in seqs],
                         wirelib.body_section(body), request_id=rid)
    r = c.roundtrip(msg)
    assert r.response_to == rid
    return r.doc


def sized_doc(size: int, _id=1) -> bytes:
    """A document {_id, s: "xxx..."} of exactly `size` bytes."""
    base = len(bson.encode(SON([("_id", _id), ("s", "")])))
    raw = bson.encode(SON([("_id", _id), ("s", "x" * (size - base))]))
    assert len(raw) == size
    return raw


def nest(levels: int, leaf=1):
    """`levels` nested documents {a: {a: ... leaf}} (0 levels: the leaf)."""
    v = leaf
    for _ in range(levels):
        v = {"a": v}
    return v


def doc_with_levels(levels: int, _id=1) -> dict:
    """A document `levels` deep counting itself: _id, then `levels - 1`
    nested non-empty documents under a."""
    return {"_id": _id, "a": nest(levels - 1)}


# ------------------------------------------------------ the decodeErrors vectors

@needs_corpus
def test_the_corpus_has_75_decode_error_vectors():
    assert len(VECTORS) == 75
    assert len({(f, d) for f, d, _ in VECTORS}) == 75


def _vector_params():
    return [pytest.param(raw, id=f"{f}:{d}") for f, d, raw in VECTORS] or [
        pytest.param(None, marks=needs_corpus)]


def _trailing_garbage(raw: bytes) -> bool:
    """The stated length is a whole valid document shorter than the bytes."""
    n = struct.unpack_from("<i", raw)[0] if len(raw) >= 4 else 0
    if not 5 <= n < len(raw):
        return False
    try:
        bson.decode(raw[:n])
    except Exception:
        return False
    return True


def _check_invalid_bson(reply: dict):
    assert reply["ok"] == 0.0 and reply["code"] == 22, reply
    assert reply["codeName"] == "InvalidBSON"
    assert reply["errmsg"].startswith(VALIDATE_MESSAGES), reply["errmsg"]
    assert " in element with field name '" in reply["errmsg"]
    assert reply["errmsg"].endswith(("in object with unknown _id",)) or " in object with _id: " \
        in reply["errmsg"], reply["errmsg"]


@pytest.mark.parametrize("raw", _vector_params())
def test_vector_as_body(served, bystander, raw):
    with conn(served) as c:
        rid = next(_ids)
        r = c.roundtrip(wirelib.op_msg(b"\x00" + raw, request_id=rid))
        assert r.response_to == rid and r.opcode == wirelib.OP_MSG
        if _trailing_garbage(raw):
            # mongod's OpMsg::parse reads the body by its stated length,
            # then the bytes left as the next section: kind 0xDE.
            assert r.doc == {"ok": 0.0, "errmsg": f"Unknown section kind {raw[len(raw) - 4]}",
                             "code": 40432, "codeName": "Location40432"}
        else:
            _check_invalid_bson(r.doc)
        assert ping(c), "the connection that sent the vector no longer answers"


@pytest.mark.parametrize("raw", _vector_params())
def test_vector_in_document_sequence(served, bystander, mclient, raw):
    before = mclient.test.vectors.count_documents({})
    with conn(served) as c:
        _check_invalid_bson(command(c, {"insert": "vectors", "$db": "test"},
                                    [("documents", [raw])]))
        assert ping(c)
    assert mclient.test.vectors.count_documents({}) == before == 0


def test_invalid_document_message_names_its_id_escaped(served, bystander):
    """mongod's validator context: the path, then the _id rendered and
    escaped with str::escape (quotes, backslashes, control characters)."""
    doc = bson.encode(SON([("_id", 'q"\\\n'), ("ok", True)]))
    bad = bytearray(doc)
    bad[-2] = 2  # the bool's byte
    # rendered: _id: "q\"\\\n"   then escaped once more as the context
    want_id = r'_id: \"q\\\"\\\\\\n\"'
    with conn(served) as c:
        reply = command(c, {"insert": "esc", "$db": "test"}, [("documents", [bytes(bad)])])
        assert reply == {"ok": 0.0, "codeName": "InvalidBSON", "code": 22, "errmsg":
                         "BSON bool is neither false nor true in element with field name 'ok' "
                         f"in object with {want_id}"}


def test_second_id_a_document_with_an_error_inside(served, bystander):
    """{_id: 1, x: 2, _id: {ok: <bool 2>}}: mongod names the document by the
    last scalar top-level _id.  This once made the validator render the _id
    with a negative length and abort the server (fuzz_bson)."""
    def doc(body):
        return struct.pack("<i", 4 + len(body) + 1) + body + b"\x00"
    raw = doc(b"\x10_id\x00" + struct.pack("<i", 1) + b"\x10x\x00" + struct.pack("<i", 2)
              + b"\x03_id\x00" + doc(b"\x08ok\x00\x02"))
    with conn(served) as c:
        r = c.roundtrip(wirelib.op_msg(b"\x00" + raw, request_id=5))
        assert r.doc == {"ok": 0.0, "code": 22, "codeName": "InvalidBSON", "errmsg":
                         "BSON bool is neither false nor true in element with field name "
                         "'_id.ok' in object with _id: 1"}
        assert ping(c)


# ------------------------------------------------------------ document size

def test_document_of_16_mib_is_stored_and_read_back(served, bystander, mclient):
    raw = sized_doc(MIB16, _id="at-limit")
    with conn(served) as c:
        assert command(c, {"insert": "size", "$db": "test"}, [("documents", [raw])]) == \
            {"n": 1, "ok": 1.0}
    got = mclient.test.size.find_one({"_id": "at-limit"})
    assert len(bson.encode(got)) == MIB16 and got["s"] == bson.decode(raw)["s"]


def test_document_of_16_mib_without_id_gets_one(served, bystander, mclient):
    # mongod checks the size before it adds the _id (17 bytes more).
    raw = bson.encode({"tag": "noid", "s": "x" * (MIB16 - len(bson.encode({"tag": "noid",
                                                                              "s": ""})))})
    assert len(raw) == MIB16
    with conn(served) as c:
        assert command(c, {"insert": "size_noid", "$db": "test"},
                       [("documents", [raw])]) == {"n": 1, "ok": 1.0}
    got = mclient.test.size_noid.find_one({"tag": "noid"})
    assert len(bson.encode(got)) == MIB16 + 17


@pytest.mark.parametrize("size", [MIB16 + 1, INTERNAL_MAX])
def test_document_over_16_mib_is_a_write_error(served, bystander, mclient, size):
    with conn(served) as c:
        reply = command(c, {"insert": "size", "$db": "test"},
                        [("documents", [sized_doc(size, _id="over")])])
    assert reply == {"n": 0, "writeErrors": [
        {"index": 0, "code": 2,
         "errmsg": f"object to insert too large. size in bytes: {size}, max size: {MIB16}"}],
        "ok": 1.0}
    assert mclient.test.size.count_documents({"_id": "over"}) == 0


def test_document_over_16_mib_plus_16_kib_is_refused_at_parse(served, bystander):
    size = INTERNAL_MAX + 1
    with conn(served) as c:
        reply = command(c, {"insert": "size", "$db": "test"},
                        [("documents", [sized_doc(size, _id=7)])])
        assert reply == {"ok": 0.0, "errmsg": f"BSONObj size: {size} (0x{size:X}) is invalid. "
                         f"Size must be between 0 and {INTERNAL_MAX}(16MB) First element: _id: 7",
                         "code": 10334, "codeName": "BSONObjectTooLarge"}
        assert ping(c)


def test_update_to_16_mib_and_past_it(served, bystander, mclient):
    coll = mclient.test.size_update
    coll.insert_one({"_id": 1, "s": ""})
    base = len(bson.encode(SON([("_id", 1), ("s", "")])))
    r = coll.update_one({"_id": 1}, {"$set": {"s": "y" * (MIB16 - base)}})
    assert r.modified_count == 1
    assert len(bson.encode(coll.find_one({"_id": 1}))) == MIB16
    with pytest.raises(pymongo.errors.WriteError) as e:
        coll.update_one({"_id": 1}, {"$set": {"s": "y" * (MIB16 - base + 1)}})
    assert e.value.code == 17419
    assert e.value.details["errmsg"] == f"Resulting document after update is larger than {MIB16}"
    assert len(bson.encode(coll.find_one({"_id": 1}))) == MIB16


# ------------------------------------------------------------- message size

def _message_of(total: int, ndocs: int) -> bytes:
    """An OP_MSG insert of `ndocs` documents into test.msg, exactly `total`
    bytes long (documents {_id: i, s: "..."})."""
    body = wirelib.body_section({"insert": "msg", "$db": "test"})
    fixed = 16 + 4 + len(body) + 1 + 4 + len(b"documents\x00")
    docs = [bson.encode(SON([("_id", i), ("s", "")])) for i in range(ndocs)]
    spare = total - fixed - sum(len(d) for d in docs)
    per, extra = divmod(spare, ndocs)
    docs = [bson.encode(SON([("_id", i), ("s", "z" * (per + (1 if i < extra else 0)))]))
            for i in range(ndocs)]
    msg = wirelib.op_msg(wirelib.seq_section("documents", docs), body, request_id=next(_ids))
    assert len(msg) == total
    return msg


def test_message_of_48000000_bytes_with_100000_documents(served, bystander, mclient):
    msg = _message_of(MAX_MESSAGE, MAX_BATCH)
    with conn(served, timeout=120) as c:
        r = c.roundtrip(msg)
        assert r.doc == {"n": MAX_BATCH, "ok": 1.0}
    assert mclient.test.msg.count_documents({}) == MAX_BATCH
    mclient.test.msg.drop()


def test_message_of_48000001_bytes_closes_the_connection(served, bystander, mclient):
    msg = _message_of(MAX_MESSAGE + 1, 3)
    with conn(served, timeout=30) as c:
        try:
            c.send(msg)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed after the header, while the rest was on its way
        assert c.is_closed(wait=10)
    assert mclient.test.msg.count_documents({}) == 0


# -------------------------------------------------------------- write batch

BATCH_ERR = "Write batch sizes must be between 1 and 100000. Got {} operations."


def _statements(kind: str, n: int):
    if kind == "insert":
        return "documents", [bson.encode({"_id": i}) for i in range(n)]
    if kind == "update":
        return "updates", [bson.encode({"q": {"_id": i}, "u": {"$set": {"u": 1}}})
                           for i in range(n)]
    return "deletes", [bson.encode({"q": {"_id": i}, "limit": 1}) for i in range(n)]


@pytest.mark.parametrize("kind", ["insert", "update", "delete"])
def test_write_batch_of_100000_then_100001_then_0(served, bystander, mclient, kind):
    coll = mclient.test["batch_" + kind]
    if kind != "insert":
        coll.insert_many([{"_id": i} for i in range(MAX_BATCH)])
    with conn(served, timeout=120) as c:
        reply = command(c, {kind: coll.name, "$db": "test"}, [_statements(kind, MAX_BATCH)])
        want = {"n": MAX_BATCH, "ok": 1.0}
        if kind == "update":
            want = {"n": MAX_BATCH, "nModified": MAX_BATCH, "ok": 1.0}
        assert reply == want
        for n in (MAX_BATCH + 1, 0):
            reply = command(c, {kind: coll.name, "$db": "test"}, [_statements(kind, n)])
            assert reply == {"ok": 0.0, "errmsg": BATCH_ERR.format(n), "code": 16,
                             "codeName": "InvalidLength"}
    left = 0 if kind == "delete" else MAX_BATCH
    assert coll.count_documents({}) == left
    if kind == "update":
        assert coll.count_documents({"u": 1}) == MAX_BATCH
    coll.drop()


# ----------------------------------------------------------- nesting depth

def test_wire_nesting_200_levels_then_201(served, bystander):
    with conn(served) as c:
        assert command(c, {"ping": 1, "x": nest(200), "$db": "admin"}) == {"ok": 1.0}
        reply = command(c, {"ping": 1, "x": nest(201), "$db": "admin"})
        path = "x." + "a." * 199 + "a"
        assert reply == {"ok": 0.0, "errmsg": "BSONObj exceeds maximum nested object depth in "
                         f"element with field name '{path}' in object with unknown _id",
                         "code": 15, "codeName": "Overflow"}
        assert ping(c)


def test_stored_nesting_180_levels_then_181(served, bystander, mclient):
    coll = mclient.test.depth
    assert coll.insert_one(doc_with_levels(180, _id=180)).inserted_id == 180
    assert coll.find_one({"_id": 180}) == doc_with_levels(180, _id=180)
    # Empty documents do not count toward the depth.
    deep_empty = {"_id": "empty", "a": nest(179, leaf={})}
    coll.insert_one(deep_empty)
    assert coll.find_one({"_id": "empty"}) == deep_empty
    with pytest.raises(pymongo.errors.WriteError) as e:
        coll.insert_one(doc_with_levels(181, _id=181))
    assert e.value.code == 15
    assert e.value.details["errmsg"] == \
        "cannot insert document because it exceeds 180 levels of nesting"
    assert coll.count_documents({"_id": 181}) == 0


def test_update_nesting_past_180_levels(served, bystander, mclient):
    coll = mclient.test.depth_update
    coll.insert_one({"_id": 1})
    # A replacement 180 deep is stored; 181 deep is refused.
    assert coll.replace_one({"_id": 1}, doc_with_levels(180)).modified_count == 1
    # A path of k fields puts its value at level k + 1.
    for update in ([{"_id": 1, "a": nest(180)}],
                   [{"$set": {"a": nest(180)}}],
                   [{"$set": {".".join(["a"] * 180): {"a": 1}}}]):
        with pytest.raises(pymongo.errors.WriteError) as e:
            if "_id" in update[0]:
                coll.replace_one({"_id": 1}, update[0])
            else:
                coll.update_one({"_id": 1}, update[0])
        assert e.value.code == 15, update
        assert e.value.details["errmsg"] == "Document exceeds maximum nesting depth of 180"
    assert coll.find_one({"_id": 1}) == doc_with_levels(180)
    assert coll.update_one({"_id": 1}, {"$set": {".".join(["a"] * 179): {"b": 2}}}
                           ).modified_count == 1
    assert coll.find_one({"_id": 1}) == {"_id": 1, "a": nest(178, leaf={"b": 2})}


# --------------------------------------------------------- namespace length

def test_namespace_of_255_bytes_then_256(served, bystander, mclient):
    name255 = "n" * (255 - len("test."))
    mclient.test[name255].insert_one({"_id": 1})
    assert name255 in mclient.test.list_collection_names()
    too_long = name255 + "n"
    want = f"Fully qualified namespace is too long. Namespace: test.{too_long} Max: 255"
    for op in (lambda c: c.insert_one({"_id": 1}),
               lambda c: c.update_one({}, {"$set": {"a": 1}}, upsert=True),
               lambda c: c.delete_many({}),
               lambda c: c.database.create_collection(c.name)):
        with pytest.raises(pymongo.errors.OperationFailure) as e:
            op(mclient.test[too_long])
        assert e.value.code == 73 and e.value.details["errmsg"] == want
    assert too_long not in mclient.test.list_collection_names()


def test_database_name_of_63_bytes_then_64(served, bystander, mclient):
    mclient["d" * 63].c.insert_one({"_id": 1})
    assert "d" * 63 in mclient.list_database_names()
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        mclient["d" * 64].c.insert_one({"_id": 1})
    assert e.value.code == 73
    assert e.value.details["codeName"] == "InvalidNamespace"
    assert "d" * 64 not in mclient.list_database_names()
    mclient.drop_database("d" * 63)


# ----------------------------------------------------------------- indexes

def test_64_indexes_then_the_65th(served, bystander, mclient):
    coll = mclient.test.idx
    coll.insert_one({"_id": 1, **{f"k{i}": i for i in range(70)}})
    for i in range(1, 64):  # with _id_, 64
        coll.create_index(f"k{i}")
    assert len(list(coll.list_indexes())) == 64
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        coll.create_index("k64")
    assert e.value.code == 67
    assert e.value.details["errmsg"] == "add index fails, too many indexes for test.idx key:{ k64: 1 }"
    assert len(list(coll.list_indexes())) == 64
    coll.drop_index("k63_1")
    coll.create_index("k64")
    assert len(list(coll.list_indexes())) == 64
    assert coll.find_one({"k64": 64}, {"_id": 1}) == {"_id": 1}


def test_long_multibyte_value_in_a_duplicate_key_error(served, bystander, mclient):
    """The error quotes the key cut to fit; the cut never splits a UTF-8
    character (fuzz_bson found the renderer doing it; the reply was then
    undecodable)."""
    coll = mclient.test.dup_utf8
    coll.create_index("s", unique=True)
    for key in ("ss", "s"):  # either parity of where the cut falls
        coll.drop_indexes()
        coll.delete_many({})
        coll.create_index(key, unique=True)
        coll.insert_one({"_id": 1, key: "\u00e9" * 600})
        with pytest.raises(pymongo.errors.DuplicateKeyError) as e:
            coll.insert_one({"_id": 2, key: "\u00e9" * 600})
        msg = e.value.details["errmsg"]
        assert msg.startswith(f"E11000 duplicate key error collection: test.dup_utf8 index: "
                              f"{key}_1 dup key: {{ {key}: \"\u00e9\u00e9")
        assert msg.endswith("\u00e9...")


def test_long_write_error_is_cut_between_characters(served, bystander, mclient):
    """An error message longer than the server keeps (511 bytes) is cut
    between UTF-8 characters, never inside one: a write error carries it as
    is, and a cut character made the reply invalid BSON."""
    coll = mclient.test.cut_utf8
    for pad in range(3):  # the cut falls on each byte of a character once
        name = "a" * pad + "\u00e9" * 300
        coll.insert_one({"_id": pad, name: "s"})
        with pytest.raises(pymongo.errors.WriteError) as e:
            coll.update_one({"_id": pad}, {"$inc": {name: 1}})
        msg = e.value.details["errmsg"]
        assert e.value.code == 14 and "\ufffd" not in msg
        assert msg.startswith("Cannot apply $inc to a value of non-numeric type. "
                              f"{{_id: {pad}}} has the field '{name[:20]}")
        assert len(msg.encode()) in (510, 511) and msg.endswith("\u00e9")


# ------------------------------------------------------- random mutations

def _valid_docs():
    out = []
    for f in sorted(CORPUS.glob("*.json")):
        for case in json.loads(f.read_text()).get("valid", []):
            out.append(bytes.fromhex(case["canonical_bson"]))
    return out


def _mutate(rng: random.Random, raw: bytes) -> bytes:
    b = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        if op == 0 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 1 and b:
            del b[rng.randrange(len(b))]
        elif op == 2:
            b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
        elif len(b) >= 4:  # a plausible wrong length
            struct.pack_into("<i", b, 0, struct.unpack_from("<i", b)[0] + rng.randint(-8, 8))
    return bytes(b)


@needs_corpus
def test_random_mutations_of_valid_documents(served, bystander, request):
    """Each mutated document, as a ping's field or an insert's document,
    gets an answer (or a clean close); the server never stops answering."""
    n = request.config.getoption("--wire-mutations")
    rng = random.Random(7)
    docs = _valid_docs()
    answered = closed = 0
    c = conn(served, timeout=10)
    for i in range(n):
        raw = _mutate(rng, rng.choice(docs))
        if i % 2:
            msg = wirelib.op_msg(wirelib.seq_section("documents", [raw]),
                                 wirelib.body_section({"insert": "mut", "$db": "test"}),
                                 request_id=i + 1)
        else:
            msg = wirelib.op_msg(b"\x00" + raw, request_id=i + 1)
        try:
            r = c.roundtrip(msg)
            assert r.response_to == i + 1
            answered += 1
        except ConnectionError:  # a timeout (a hang) fails the test
            closed += 1
            c.close()
            c = conn(served, timeout=10)
    assert ping(c)
    c.close()
    print(f"\n{n} mutated documents: {answered} answered, {closed} connections closed")
    assert answered + closed == n and answered > n // 2
