"""The BSON corpus (../shared/spec/bson-corpus) against the boundary
validator: every valid document passes it, every decodeErrors document is
refused with InvalidBSON (or Overflow), on the in-process path and on the
wire."""
import json
import struct
from pathlib import Path

import bson
import pytest

import wirelib

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "spec" / "bson-corpus"


def _cases():
    if not CORPUS.is_dir():
        return [pytest.param(None, None, None, marks=pytest.mark.skip(
            reason=f"{CORPUS} is absent: the BSON corpus lives in ../shared"))]
    out = []
    for f in sorted(CORPUS.glob("*.json")):
        spec = json.loads(f.read_text())
        for c in spec.get("valid", []):
            for key in ("canonical_bson", "degenerate_bson"):
                if key in c:
                    out.append(pytest.param("valid", c[key], f.stem,
                                            id=f"{f.stem}:{c['description']}:{key}"))
        for c in spec.get("decodeErrors", []):
            out.append(pytest.param("invalid", c["bson"], f.stem,
                                    id=f"{f.stem}:{c['description']}"))
    return out


@pytest.mark.parametrize("kind,hexdoc,group", _cases())
def test_in_process(server, kind, hexdoc, group):
    raw = bytes.fromhex(hexdoc)
    reply = bson.decode(server._core.command("test", raw))
    if kind == "valid":
        # A well-formed document reaches the dispatcher, which finds no
        # command named by its first field.
        assert reply["code"] in (59, 40571), reply
    else:
        assert reply["ok"] == 0.0 and reply["code"] in (22, 15), reply


def test_on_the_wire(server, shared_dir):
    """Each decodeErrors document as an OP_MSG body: an InvalidBSON reply,
    and the connection still works."""
    with wirelib.Conn(server.port) as c:
        n = 0
        for f in sorted(CORPUS.glob("*.json")):
            for case in json.loads(f.read_text()).get("decodeErrors", []):
                raw = bytes.fromhex(case["bson"])
                r = c.roundtrip(wirelib.op_msg(b"\x00" + raw, request_id=n + 10))
                assert r.response_to == n + 10
                # A document shorter than its bytes leaves the rest to be
                # read as the next section: 40432, as mongod answers.
                assert r.doc["code"] in (22, 15, 40432), (f.stem, case["description"], r.doc)
                n += 1
        assert n > 50
        assert c.roundtrip(wirelib.op_msg(wirelib.body_section(
            {"ping": 1, "$db": "admin"}))).doc["ok"] == 1.0
