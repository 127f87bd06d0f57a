"""The BSON corpus (../shared/spec/bson-corpus) through the server.

Every `valid` vector (its canonical_bson, and its degenerate_bson when it
has one) is inserted as the value of a field, {_id: n, d: <vector>}, since
some vectors are not storable as documents themselves (top-level "$" or
"." keys); it must come back byte for byte from a find by _id, and a find
by {_id: n, d: {$eq: <vector>}} must return it (the server's comparison
sees the value it stored as equal to itself).  Every `decodeErrors` vector,
wrapped the same way, must be refused with InvalidBSON and insert nothing.

tests/test_bson_corpus.py checks the boundary validator alone (each vector
as a whole command, in process and on the wire).
"""
from __future__ import annotations

import json
import struct

import pymongo
import pytest
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from pymongo.errors import OperationFailure

import multifora

from .cases import SPEC_ROOT

CORPUS = SPEC_ROOT / "bson-corpus"
ABSENT = f"{CORPUS} is absent: the BSON corpus lives in ../shared/spec"


def _vectors():
    """(kind, id, hex) for every valid vector's encodings and every decode error."""
    out = []
    for path in sorted(CORPUS.glob("*.json")):
        spec = json.loads(path.read_text())
        for case in spec.get("valid", []):
            for key in ("canonical_bson", "degenerate_bson"):
                if key in case:
                    out.append(("valid", f"bson-corpus/{path.name}/{case['description']}/{key}",
                                case[key]))
        for case in spec.get("decodeErrors", []):
            out.append(("decodeError", f"bson-corpus/{path.name}/{case['description']}",
                        case["bson"]))
    return out


VECTORS = _vectors()


def _params(kind: str) -> list:
    if not CORPUS.is_dir():
        return [pytest.param(0, "", id="bson-corpus-absent", marks=pytest.mark.skip(reason=ABSENT))]
    return [pytest.param(n, hexdoc, id=vid)
            for n, (k, vid, hexdoc) in enumerate(VECTORS) if k == kind]


def _document(fields: bytes) -> bytes:
    """A BSON document of already-encoded elements."""
    return struct.pack("<i", len(fields) + 5) + fields + b"\x00"


def _wrapped(n: int, value: bytes) -> RawBSONDocument:
    """{_id: n (int32), d: <value, an encoded document>} without re-encoding value."""
    return RawBSONDocument(_document(b"\x10_id\x00" + struct.pack("<i", n) + b"\x03d\x00" + value))


@pytest.fixture(scope="module")
def coll(tmp_path_factory):
    """One server for the corpus: each vector has its own _id."""
    srv = multifora.Server(str(tmp_path_factory.mktemp("corpus") / "db"), port=0)
    srv.start()
    client = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000)
    yield client.corpus.get_collection(
        "v", codec_options=CodecOptions(document_class=RawBSONDocument))
    client.close()
    srv.stop()


@pytest.mark.parametrize("n,hexdoc", _params("valid"))
def test_valid_vector_round_trips(coll, n, hexdoc):
    value = bytes.fromhex(hexdoc)
    coll.insert_one(_wrapped(n, value))
    found = coll.find_one({"_id": n})
    assert found is not None
    assert found["d"].raw == value
    by_value = coll.find_one(_wrapped(n, _document(b"\x03$eq\x00" + value)))
    assert by_value is not None and by_value.raw == found.raw


@pytest.mark.parametrize("n,hexdoc", _params("decodeError"))
def test_decode_error_vector_is_refused(coll, n, hexdoc):
    with pytest.raises(OperationFailure) as info:
        coll.insert_one(_wrapped(n, bytes.fromhex(hexdoc)))
    assert (info.value.code, info.value.details.get("codeName")) == (22, "InvalidBSON")
    assert coll.find_one({"_id": n}) is None


def test_the_corpus_is_all_there():
    """The corpus has its valid and decodeErrors vectors (a sanity floor, so
    an emptied folder does not pass by running nothing)."""
    if not CORPUS.is_dir():
        pytest.skip(ABSENT)
    kinds = [k for k, _, _ in VECTORS]
    assert kinds.count("valid") > 300 and kinds.count("decodeError") > 50
