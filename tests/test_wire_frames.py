"""Malformed wire frames, each answered as mongod 7.0 answers it.

Every case sends one frame on a fresh raw socket and asserts exactly one of:

* an error reply: the code, the errmsg (exact, or the stable prefix where
  mongod appends buffer offsets or a BSON context), the reply's opcode
  (OP_MSG, or OP_REPLY for OP_QUERY) and that its responseTo is the
  request's requestID; the connection then still answers a ping;
* the connection closed with no reply;
* silence (no reply) with the connection still usable.

After every case a *bystander* connection, opened before the bad frame was
sent and held open through it, must still answer ``{ping: 1}``: a malformed
frame is only ever its own connection's problem.

The expectations are mongod 7.0's (src/mongo/rpc/op_msg.cpp,
bson/bson_validate.cpp, transport/asio/asio_session_impl.cpp,
db/service_entry_point_common.cpp, rpc/legacy_request.cpp), not whatever the
server happens to do: a failure here is a difference from mongod.  One case
is the exception: the header-only OP_MSG, whose mongod outcome the research
notes leave open, is held only to "a clean error reply or a clean close".

``python test_wire_frames.py`` (from this directory) runs every case against
a fresh in-process server and prints the markdown table kept in
docs/wire-errors.md.
"""
from __future__ import annotations

import random
import socket
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

import bson
import pytest
from bson.int64 import Int64

from wirelib import (CHECKSUM_PRESENT, EXHAUST_ALLOWED, MORE_TO_COME, OP_COMPRESSED,
                     OP_DELETE, OP_GET_MORE, OP_INSERT, OP_KILL_CURSORS, OP_MSG, OP_QUERY,
                     OP_REPLY, OP_UPDATE, Conn, Reply, body_section, crc32c, frame,
                     header, op_msg, op_query, seq_section)

PING = {"ping": 1, "$db": "admin"}
LEGACY_LINK = ("The client driver may require an upgrade. For more details see "
               "https://dochub.mongodb.org/core/legacy-opcode-removal")
CHECKSUM_SIZE_MSG = "Invalid message size for an OpMsg containing a checksum"


# ------------------------------------------------------------------ raw BSON

def raw_doc(*elements: bytes) -> bytes:
    """A BSON document from already-encoded elements (which may be invalid)."""
    body = b"".join(elements) + b"\x00"
    return struct.pack("<i", 4 + len(body)) + body


def e_int(key: bytes, value: int) -> bytes:
    return b"\x10" + key + b"\x00" + struct.pack("<i", value)


def e_str(key: bytes, value: bytes) -> bytes:
    return b"\x02" + key + b"\x00" + struct.pack("<i", len(value) + 1) + value + b"\x00"


def with_length(doc: bytes, n: int) -> bytes:
    """`doc` with its declared int32 length replaced by `n`."""
    return struct.pack("<i", n) + doc[4:]


def nested(depth: int) -> dict:
    """{ping: 1, $db: "admin", x: {x: ... {}}} with `depth` documents below the root."""
    d: dict = {}
    for _ in range(depth - 1):
        d = {"x": d}
    return {"ping": 1, "$db": "admin", "x": d}


PING_BYTES = bson.encode(PING)                       # 30 bytes
PING_BAD_UTF8_VALUE = raw_doc(e_int(b"ping", 1), e_str(b"$db", b"admin"),
                              e_str(b"s", b"\xff\xfe"))
PING_BAD_UTF8_KEY = raw_doc(e_int(b"ping", 1), e_str(b"$db", b"admin"), e_int(b"k\xff", 1))


def msg_raw(payload: bytes, request_id: int) -> bytes:
    """An OP_MSG from raw bytes after the header (flags + sections)."""
    return frame(OP_MSG, payload, request_id)


def flags_then(flags: int, *sections: bytes) -> bytes:
    return struct.pack("<I", flags) + b"".join(sections)


def raw_seq(name: bytes, size: int, rest: bytes) -> bytes:
    """A kind-1 section with an arbitrary declared size."""
    return b"\x01" + struct.pack("<i", size) + name + b"\x00" + rest


def op_get_more(request_id: int) -> bytes:
    payload = struct.pack("<i", 0) + b"test.coll\x00" + struct.pack("<iq", 0, 12345)
    return frame(OP_GET_MORE, payload, request_id)


def legacy_write(opcode: int, request_id: int) -> bytes:
    """A well-formed-looking body for each removed legacy write opcode."""
    zero = struct.pack("<i", 0)
    if opcode == OP_INSERT:
        payload = zero + b"test.coll\x00" + bson.encode({"_id": 1})
    elif opcode == OP_UPDATE:
        payload = zero + b"test.coll\x00" + zero + bson.encode({"_id": 1}) + bson.encode({"$set": {"a": 1}})
    elif opcode == OP_DELETE:
        payload = zero + b"test.coll\x00" + zero + bson.encode({"_id": 1})
    else:  # OP_KILL_CURSORS: ZERO, numberOfCursorIDs, cursorIDs
        payload = zero + struct.pack("<iq", 1, 12345)
    return frame(opcode, payload, request_id)


def op_compressed(compressor_id: int, inner: bytes, request_id: int) -> bytes:
    """OP_COMPRESSED wrapping `inner` (a whole message) uncompressed under the given id."""
    orig_opcode = struct.unpack_from("<i", inner, 12)[0]
    body = inner[16:]
    payload = struct.pack("<iiB", orig_opcode, len(body), compressor_id) + body
    return frame(OP_COMPRESSED, payload, request_id)


# ---------------------------------------------------------------- outcomes

class Outcome(NamedTuple):
    kind: str                      # "reply" | "closed" | "silent"
    reply: Optional[Reply] = None


def peek_silent(conn: Conn, wait: float) -> Optional[str]:
    """None if nothing arrives within `wait` s, else "data" or "closed"."""
    conn.sock.settimeout(wait)
    try:
        b = conn.sock.recv(1, socket.MSG_PEEK)
    except socket.timeout:
        return None
    except ConnectionResetError:
        return "closed"
    finally:
        conn.sock.settimeout(5.0)
    return "data" if b else "closed"


def observe(conn: Conn, wait: float = 1.0) -> Outcome:
    """What the server does with what was just sent: a reply, a close, or nothing."""
    state = peek_silent(conn, wait)
    if state is None:
        return Outcome("silent")
    if state == "closed":
        return Outcome("closed")
    try:
        return Outcome("reply", conn.recv())
    except (ConnectionError, OSError):
        return Outcome("closed")


def ping(conn: Conn, request_id: int) -> Reply:
    r = conn.roundtrip(op_msg(body_section(PING), request_id=request_id))
    assert r.opcode == OP_MSG, r
    assert r.response_to == request_id, r
    assert r.doc.get("ok") == 1.0, r
    return r


def assert_bystander(bystander: Conn) -> None:
    """The connection held open through the bad frame still answers."""
    r = ping(bystander, 424242)
    assert r.flags == 0 and r.doc == {"ok": 1.0}


def assert_error_reply(r: Reply, request_id: int, code: int, errmsg: Optional[str] = None,
                       prefix: Optional[str] = None, opcode: int = OP_MSG,
                       flags: Optional[int] = None) -> None:
    assert r.opcode == opcode, r
    assert r.response_to == request_id, r
    if opcode == OP_MSG:
        assert r.flags & ~CHECKSUM_PRESENT == 0, r          # no moreToCome on an error
        if r.flags & CHECKSUM_PRESENT:
            assert r.checksum == crc32c(r.raw[:-4])
    if flags is not None:
        assert r.flags == flags, r
    doc = r.doc
    assert list(doc) == ["ok", "errmsg", "code", "codeName"], doc
    assert doc["ok"] == 0.0 and isinstance(doc["ok"], float), doc
    assert doc["code"] == code, doc
    if errmsg is not None:
        assert doc["errmsg"] == errmsg, doc
    if prefix is not None:
        assert doc["errmsg"].startswith(prefix), doc


def op_reply_fields(r: Reply):
    """(responseFlags, cursorID, startingFrom, numberReturned) of an OP_REPLY."""
    return struct.unpack_from("<iqii", r.raw, 16)


# ------------------------------------------------------------------- cases

@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[int], bytes]      # requestID -> the bytes to send
    input: str                         # for docs/wire-errors.md
    mongod: str                        # mongod 7.0's behaviour, per the research notes
    expect: str                        # "error" | "closed" | "ok" | "silent"
    code: Optional[int] = None
    errmsg: Optional[str] = None       # exact
    prefix: Optional[str] = None       # stable prefix, where mongod appends offsets/context
    opcode: int = OP_MSG               # of the reply
    flags: Optional[int] = None        # expected reply flags, when asserted
    check: Optional[Callable[[Reply], None]] = None   # extra checks on an "ok" reply


def _param(c: Case):
    return pytest.param(c, id=c.id)


# -- framing: the 16-byte header's messageLength

CLOSED_CASES = [
    Case("msglen_15", lambda rid: header(15, rid, 0, OP_MSG),
         "header with messageLength 15",
         "ProtocolError internally (log 4615638); socket closed, no reply", "closed"),
    Case("msglen_0", lambda rid: header(0, rid, 0, OP_MSG),
         "header with messageLength 0",
         "ProtocolError internally (log 4615638); socket closed, no reply", "closed"),
    Case("msglen_minus_1", lambda rid: header(-1, rid, 0, OP_MSG) + b"\x00" * 20,
         "header with messageLength -1 (+20 more bytes)",
         "negative length cast to size_t is > max; socket closed, no reply", "closed"),
    Case("msglen_48000001", lambda rid: header(48_000_001, rid, 0, OP_MSG),
         "header with messageLength 48,000,001",
         "> MaxMessageSizeBytes (48,000,000); socket closed, no reply", "closed"),
    # -- connection-fatal OP_MSG parse errors (ConnectionFatalMessageParseError)
    Case("required_flag_bit2", lambda rid: op_msg(body_section(PING), flags=1 << 2, request_id=rid),
         "OP_MSG ping, flagBits 1<<2",
         "223 IllegalOpMsgFlag is connection-fatal: closed, no reply", "closed"),
    Case("required_flag_bit4", lambda rid: op_msg(body_section(PING), flags=1 << 4, request_id=rid),
         "OP_MSG ping, flagBits 1<<4",
         "223 IllegalOpMsgFlag is connection-fatal: closed, no reply", "closed"),
    Case("required_flag_bit15", lambda rid: op_msg(body_section(PING), flags=1 << 15, request_id=rid),
         "OP_MSG ping, flagBits 1<<15",
         "223 IllegalOpMsgFlag is connection-fatal: closed, no reply", "closed"),
    Case("three_sequences",
         lambda rid: op_msg(body_section(PING), seq_section("a", [{}]), seq_section("b", [{}]),
                            seq_section("c", [{}]), request_id=rid),
         "body + three kind-1 sequences a, b, c",
         "233 TooManyDocumentSequences is connection-fatal: closed, no reply", "closed"),
    Case("bad_checksum", lambda rid: op_msg(body_section(PING), bad_checksum=True, request_id=rid),
         "OP_MSG ping with checksumPresent and a wrong CRC-32C",
         "288 ChecksumMismatch is connection-fatal: closed, no reply", "closed"),
    # -- removed legacy opcodes that mongod answers by hanging up
    Case("op_insert", lambda rid: legacy_write(OP_INSERT, rid), "OP_INSERT (2002) to test.coll",
         "uassert 5745702 in a fire-and-forget runner: connection closed, no reply", "closed"),
    Case("op_update", lambda rid: legacy_write(OP_UPDATE, rid), "OP_UPDATE (2001) to test.coll",
         "uassert 5745701: connection closed, no reply", "closed"),
    Case("op_delete", lambda rid: legacy_write(OP_DELETE, rid), "OP_DELETE (2006) to test.coll",
         "uassert 5745700: connection closed, no reply", "closed"),
    Case("op_kill_cursors", lambda rid: legacy_write(OP_KILL_CURSORS, rid),
         "OP_KILL_CURSORS (2007), one cursor id",
         "uassert 5745703: connection closed, no reply", "closed"),
    Case("op_compressed_unknown_compressor",
         lambda rid: op_compressed(200, op_msg(body_section(PING), request_id=rid), rid),
         "OP_COMPRESSED (2012) wrapping a ping, compressorId 200",
         "InternalError 'Compression algorithm specified in message is not available' "
         "before dispatch: closed, no reply", "closed"),
    Case("op_compressed_short_header",
         lambda rid: frame(OP_COMPRESSED, struct.pack("<ii", OP_MSG, 10), rid),
         "OP_COMPRESSED with an 8-byte body (header needs 9)",
         "BadValue 'Invalid compressed message header': closed, no reply", "closed"),
]

BAD_LEN_BODY = with_length(PING_BYTES, len(PING_BYTES) + 10)


def _seq_doc(doc: bytes) -> bytes:
    payload = b"documents\x00" + doc
    return b"\x01" + struct.pack("<i", 4 + len(payload)) + payload


ERROR_CASES = [
    # -- UTF-8: checked here although mongod 7.0 does not (its default
    #    validateBSON mode skips UTF-8 and would answer ok: 1).  The project's
    #    issue asks invalid UTF-8 to be refused as InvalidBSON, so these rows
    #    differ from mongod on purpose (docs/wire-errors.md says so).
    Case("bad_utf8_string_value",
         lambda rid: msg_raw(flags_then(0, b"\x00" + PING_BAD_UTF8_VALUE), rid),
         "ping body with field s: string bytes ff fe (invalid UTF-8)",
         "DIFFERS ON PURPOSE: mongod accepts (no UTF-8 check by default) and answers ok: 1; "
         "MultiforaDB refuses invalid UTF-8 as the project requires",
         "error", 22, prefix="Found string that doesn't follow UTF-8 encoding."),
    Case("bad_utf8_key",
         lambda rid: msg_raw(flags_then(0, b"\x00" + PING_BAD_UTF8_KEY), rid),
         "ping body with a field whose name is 'k' + byte ff",
         "DIFFERS ON PURPOSE: mongod accepts; MultiforaDB refuses invalid UTF-8 in keys",
         "error", 22, prefix="Found string that doesn't follow UTF-8 encoding."),
    # -- sections
    Case("seq_size_overruns_frame",
         lambda rid: msg_raw(flags_then(0, body_section(PING),
                                        raw_seq(b"documents", 1000, bson.encode({}))), rid),
         "body + kind-1 section declaring size 1000 with 15 bytes left",
         "Overflow 15 reply from DataRange: 'Invalid offset(996) past end of buffer[15] at offset: ...'",
         "error", 15, prefix="Invalid offset(996) past end of buffer[15]"),
    Case("body_bson_length_exceeds_frame",
         lambda rid: msg_raw(flags_then(0, b"\x00" + BAD_LEN_BODY), rid),
         "body whose declared BSON length is 10 bytes past the frame",
         "InvalidBSON 22 reply: 'Incorrect BSON length in element with field name '?' in object "
         "with unknown _id'", "error", 22, prefix="Incorrect BSON length"),
    Case("unknown_section_kind_7",
         lambda rid: msg_raw(flags_then(0, body_section(PING), b"\x07" + bson.encode({})), rid),
         "body + a section of kind 7",
         "40432 reply 'Unknown section kind 7'", "error", 40432, "Unknown section kind 7"),
    Case("section_kind_2_security_token",
         lambda rid: msg_raw(flags_then(0, b"\x02" + bson.encode({"t": 1}), body_section(PING)), rid),
         "kind-2 (security token) section, then the body",
         "Unauthorized 13 reply 'Unsupported Security Token provided' (no multitenancy)",
         "error", 13, "Unsupported Security Token provided"),
    Case("two_bodies",
         lambda rid: op_msg(body_section(PING), body_section(PING), request_id=rid),
         "two kind-0 sections",
         "40430 reply 'Multiple body sections in message'", "error", 40430,
         "Multiple body sections in message"),
    Case("no_body",
         lambda rid: op_msg(seq_section("documents", [{"_id": 1}]), request_id=rid),
         "only a kind-1 sequence, no body",
         "40587 reply 'OP_MSG messages must have a body'", "error", 40587,
         "OP_MSG messages must have a body"),
    Case("duplicate_sequence_names",
         lambda rid: op_msg(body_section(PING), seq_section("documents", [{}]),
                            seq_section("documents", [{}]), request_id=rid),
         "body + two sequences both named 'documents'",
         "40431 reply 'Duplicate document sequence: documents'", "error", 40431,
         "Duplicate document sequence: documents"),
    Case("sequence_name_in_body",
         lambda rid: op_msg(body_section({"insert": "c", "documents": [{"_id": 1}], "$db": "test"}),
                            seq_section("documents", [{"_id": 2}]), request_id=rid),
         "body {insert, documents: [...]} + sequence 'documents'",
         "40433 reply 'Duplicate field between body and document sequence documents'", "error",
         40433, "Duplicate field between body and document sequence documents"),
    # -- checksum
    Case("checksum_flag_no_room",
         lambda rid: msg_raw(flags_then(CHECKSUM_PRESENT), rid),
         "checksumPresent set, message is header + flagBits only (20 bytes)",
         "51252 reply (OpMsg::getChecksum runs first; 51251's test is then unreachable) "
         f"'{CHECKSUM_SIZE_MSG}'", "error", 51252, CHECKSUM_SIZE_MSG),
    Case("checksum_flag_only_checksum",
         lambda rid: msg_raw(flags_then(CHECKSUM_PRESENT) + b"\x00\x00\x00\x00", rid),
         "checksumPresent set, header + flagBits + 4-byte checksum, no sections (24 bytes)",
         f"51252 reply '{CHECKSUM_SIZE_MSG}'", "error", 51252, CHECKSUM_SIZE_MSG),
    Case("bad_checksum_and_unknown_kind",
         lambda rid: op_msg(body_section(PING), b"\x07" + bson.encode({}), bad_checksum=True,
                            request_id=rid),
         "wrong CRC-32C *and* a kind-7 section",
         "checksum is verified last, so the section error wins: 40432 reply, connection kept",
         "error", 40432, "Unknown section kind 7"),
    # -- invalid BSON in the body or a sequence
    Case("bson_declared_length_4",
         lambda rid: msg_raw(flags_then(0, b"\x00" + with_length(PING_BYTES, 4)), rid),
         "body whose declared length is 4",
         "InvalidBSON 22 'BSON data has to be at least 5 bytes in element with field name '?' "
         "in object with unknown _id'", "error", 22,
         prefix="BSON data has to be at least 5 bytes"),
    Case("bson_declared_length_short_by_1",
         lambda rid: msg_raw(flags_then(0, b"\x00" + with_length(PING_BYTES, len(PING_BYTES) - 1)), rid),
         "ping body whose declared length is one byte short (29 of 30)",
         "InvalidBSON 22 'BSON size is larger than buffer size in element with field name '$db' "
         "in object with unknown _id'", "error", 22,
         prefix="BSON size is larger than buffer size"),
    Case("bson_missing_terminator",
         lambda rid: msg_raw(flags_then(0, b"\x00" + PING_BYTES[:-1] + b"\x01"), rid),
         "ping body whose last byte is 0x01 instead of the EOO",
         "InvalidBSON 22 'BSON object not terminated with EOO in element with field name '?' ...'",
         "error", 22, prefix="BSON object not terminated with EOO"),
    Case("bson_depth_201",
         lambda rid: op_msg(body_section(nested(201)), request_id=rid),
         "ping body with a field nested 201 documents deep",
         "Overflow 15 (a ValidationError) 'BSONObj exceeds maximum nested object depth in "
         "element with field name 'x.x...' ...'", "error", 15,
         prefix="BSONObj exceeds maximum nested object depth"),
    Case("sequence_doc_length_4",
         lambda rid: msg_raw(flags_then(0, body_section(PING),
                                        _seq_doc(with_length(bson.encode({"a": 1}), 4))), rid),
         "body + sequence 'documents' whose document declares length 4",
         "InvalidBSON 22 'BSON data has to be at least 5 bytes ...'", "error", 22,
         prefix="BSON data has to be at least 5 bytes"),
    Case("sequence_doc_missing_terminator",
         lambda rid: msg_raw(flags_then(0, body_section(PING),
                                        _seq_doc(bson.encode({"a": 1})[:-1] + b"\x01")), rid),
         "body + sequence 'documents' whose document does not end in EOO",
         "InvalidBSON 22 'BSON object not terminated with EOO ...'", "error", 22,
         prefix="BSON object not terminated with EOO"),
    # -- the command document
    Case("missing_db", lambda rid: op_msg(body_section({"ping": 1}), request_id=rid),
         "{ping: 1} without $db",
         "40571 reply 'OP_MSG requests require a $db argument'", "error", 40571,
         "OP_MSG requests require a $db argument"),
    Case("db_not_a_string", lambda rid: op_msg(body_section({"ping": 1, "$db": 1}), request_id=rid),
         "{ping: 1, $db: 1}",
         "BSONElement::chk: 13111 'wrong type for field ($db) 16 != 2'", "error", 13111,
         prefix="wrong type for field ($db)"),
    Case("empty_body", lambda rid: op_msg(body_section({}), request_id=rid),
         "body {}", "40571 reply (getDatabase runs before the command lookup)", "error", 40571,
         "OP_MSG requests require a $db argument"),
    Case("unknown_command",
         lambda rid: op_msg(body_section({"nosuch": 1, "$db": "admin"}), request_id=rid),
         "{nosuch: 1, $db: 'admin'}",
         "59 CommandNotFound reply \"no such command: 'nosuch'\"", "error", 59,
         "no such command: 'nosuch'"),
    # -- OP_QUERY (answered with OP_REPLY)
    Case("opquery_ping", lambda rid: op_query("admin.$cmd", {"ping": 1}, request_id=rid),
         "OP_QUERY admin.$cmd {ping: 1}",
         "OP_REPLY flags 8, 352 UnsupportedOpQueryCommand 'Unsupported OP_QUERY command: ping. ...'",
         "error", 352, f"Unsupported OP_QUERY command: ping. {LEGACY_LINK}", opcode=OP_REPLY,
         flags=8),
    Case("opquery_ntoreturn_0",
         lambda rid: op_query("admin.$cmd", {"isMaster": 1}, nreturn=0, request_id=rid),
         "OP_QUERY admin.$cmd {isMaster: 1}, numberToReturn 0",
         "OP_REPLY flags 8, 16979 'Bad numberToReturn (0) for $cmd type ns - can only be 1 or -1'",
         "error", 16979, "Bad numberToReturn (0) for $cmd type ns - can only be 1 or -1",
         opcode=OP_REPLY, flags=8),
    Case("opquery_exhaust_flag",
         lambda rid: op_query("admin.$cmd", {"isMaster": 1}, flags=64, request_id=rid),
         "OP_QUERY admin.$cmd {isMaster: 1}, queryFlags 64 (exhaust)",
         "OP_REPLY flags 8, 18527 \"The 'exhaust' OP_QUERY flag is invalid for commands: "
         "admin.$cmd { isMaster: 1 }\"", "error", 18527,
         "The 'exhaust' OP_QUERY flag is invalid for commands: admin.$cmd { isMaster: 1 }",
         opcode=OP_REPLY, flags=8),
    Case("opquery_dollar_db",
         lambda rid: op_query("admin.$cmd", {"isMaster": 1, "$db": "admin"}, request_id=rid),
         "OP_QUERY admin.$cmd {isMaster: 1, $db: 'admin'}",
         "OP_REPLY flags 8, 40621 '$db is not allowed in OP_QUERY requests'", "error", 40621,
         "$db is not allowed in OP_QUERY requests", opcode=OP_REPLY, flags=8),
]

LEGACY_ERR_CASES = [
    Case("opquery_collection", lambda rid: op_query("test.coll", {"x": 1}, request_id=rid),
         "OP_QUERY on test.coll (not $cmd)",
         "OP_REPLY flags 2 {$err: 'OP_QUERY is no longer supported. ...', code: 5739101, ok: 0.0}",
         "error", 5739101, f"OP_QUERY is no longer supported. {LEGACY_LINK}", opcode=OP_REPLY,
         flags=2),
    Case("op_get_more", op_get_more, "OP_GET_MORE (2005) on test.coll",
         "OP_REPLY flags 2 {$err: 'OP_GET_MORE is no longer supported. ...', code: 5739101, ok: 0.0}",
         "error", 5739101, f"OP_GET_MORE is no longer supported. {LEGACY_LINK}", opcode=OP_REPLY,
         flags=2),
]


def _ok_ping(r: Reply):
    assert r.doc == {"ok": 1.0}, r


def _no_more_to_come(r: Reply):
    assert r.flags == 0 and r.doc == {"ok": 1.0}, r


def _checksummed(r: Reply):
    assert r.flags == CHECKSUM_PRESENT, r
    assert r.checksum == crc32c(r.raw[:-4]), "reply checksum does not verify"
    assert r.doc == {"ok": 1.0}


def _op_reply_hello(field: str):
    def check(r: Reply):
        flags, cursor_id, starting_from, n = op_reply_fields(r)
        assert (flags, cursor_id, starting_from, n) == (8, 0, 0, 1), r
        assert r.doc[field] is True and r.doc["ok"] == 1.0, r.doc
        assert "topologyVersion" in r.doc and r.doc["maxWireVersion"] == 21
    return check


OK_CASES = [
    Case("optional_flag_bit20",
         lambda rid: op_msg(body_section(PING), flags=1 << 20, request_id=rid),
         "OP_MSG ping, flagBits 1<<20 (an unknown optional bit)",
         "accepted: bits 16-31 are optional; ping answers ok: 1", "ok", check=_ok_ping),
    Case("exhaust_allowed_on_ping",
         lambda rid: op_msg(body_section(PING), flags=EXHAUST_ALLOWED, request_id=rid),
         "OP_MSG ping, flagBits exhaustAllowed",
         "one ordinary reply (ping does not stream), flags 0", "ok", check=_no_more_to_come),
    Case("checksum_correct",
         lambda rid: op_msg(body_section(PING), checksum=True, request_id=rid),
         "OP_MSG ping with checksumPresent and a correct CRC-32C",
         "accepted; the reply (non-TLS) carries checksumPresent and a CRC-32C", "ok",
         check=_checksummed),
    Case("bson_depth_150",
         lambda rid: op_msg(body_section(nested(150)), request_id=rid),
         "ping body with a field nested 150 documents deep",
         "accepted (limit is 200 levels below the root); ping answers ok: 1", "ok",
         check=_ok_ping),
    Case("bson_depth_200",
         lambda rid: op_msg(body_section(nested(200)), request_id=rid),
         "ping body with a field nested 200 documents deep",
         "accepted (validateBSON allows exactly 200 nested levels)", "ok", check=_ok_ping),
    Case("opquery_isMaster_admin",
         lambda rid: op_query("admin.$cmd", {"isMaster": 1}, request_id=rid),
         "OP_QUERY admin.$cmd {isMaster: 1}, numberToReturn -1",
         "OP_REPLY flags 8 (AwaitCapable), cursorId 0, startingFrom 0, nReturned 1, ismaster: true",
         "ok", opcode=OP_REPLY, check=_op_reply_hello("ismaster")),
    Case("opquery_hello_admin",
         lambda rid: op_query("admin.$cmd", {"hello": 1}, request_id=rid),
         "OP_QUERY admin.$cmd {hello: 1}",
         "OP_REPLY flags 8, isWritablePrimary: true", "ok", opcode=OP_REPLY,
         check=_op_reply_hello("isWritablePrimary")),
    Case("opquery_isMaster_test_db",
         lambda rid: op_query("test.$cmd", {"isMaster": 1}, request_id=rid),
         "OP_QUERY test.$cmd {isMaster: 1} (not admin)",
         "OP_REPLY flags 8, ismaster: true (hello runs on any db)", "ok", opcode=OP_REPLY,
         check=_op_reply_hello("ismaster")),
]

SILENT_CASES = [
    Case("unknown_opcode_9999", lambda rid: frame(9999, b"\x00" * 8, rid),
         "opcode 9999 with 8 bytes of body",
         "UnsupportedOpRunner: logged (21968), no reply, connection stays open", "silent"),
    Case("unknown_opcode_1_op_reply", lambda rid: frame(OP_REPLY, b"\x00" * 20 + bson.encode({}), rid),
         "opcode 1 (OP_REPLY) sent by a client",
         "UnsupportedOpRunner: no reply, connection stays open", "silent"),
    Case("unknown_opcode_2010_op_command", lambda rid: frame(2010, b"admin\x00ping\x00" + PING_BYTES, rid),
         "opcode 2010 (the removed OP_COMMAND)",
         "UnsupportedOpRunner: no reply, connection stays open", "silent"),
    Case("more_to_come_ping",
         lambda rid: op_msg(body_section(PING), flags=MORE_TO_COME, request_id=rid),
         "OP_MSG ping with moreToCome",
         "runs, no reply; the next request on the connection is answered normally", "silent"),
    Case("more_to_come_unknown_command",
         lambda rid: op_msg(body_section({"nosuch": 1, "$db": "admin"}), flags=MORE_TO_COME,
                            request_id=rid),
         "OP_MSG {nosuch: 1} with moreToCome",
         "no reply even for an error; connection stays open", "silent"),
    Case("more_to_come_parse_error",
         lambda rid: op_msg(body_section(PING), b"\x07" + bson.encode({}), flags=MORE_TO_COME,
                            request_id=rid),
         "OP_MSG with moreToCome and a kind-7 section",
         "non-fatal parse error, but moreToCome: no reply, connection stays open", "silent"),
]


def rid_for(case: Case) -> int:
    """A requestID of the case's own, stable across runs."""
    return 1000 + (zlib.crc32(case.id.encode()) % 100_000) * 7


# ------------------------------------------------------------------ fixtures

@pytest.fixture
def bystander(server):
    """A connection opened (and proven working) before the bad frame is sent."""
    c = Conn(server.port)
    ping(c, 7)
    yield c
    c.close()


@pytest.fixture
def conn(server):
    c = Conn(server.port)
    yield c
    c.close()


# --------------------------------------------------------------------- tests

CODE_NAMES = {13: "Unauthorized", 15: "Overflow", 22: "InvalidBSON", 59: "CommandNotFound",
              352: "UnsupportedOpQueryCommand"}


def verify(case: Case, out: Outcome, rid: int) -> None:
    """Assert that `out` is what mongod does with `case` (AssertionError if not)."""
    if case.expect in ("closed", "silent"):
        assert out.kind == case.expect, \
            f"expected {case.expect}, got {out.kind}: {out.reply if out.reply else ''}"
        return
    assert out.kind == "reply", f"expected a reply, got {out.kind}"
    r = out.reply
    if case.code == 5739101:                 # a removed legacy op: the $err shape
        assert r.opcode == OP_REPLY and r.response_to == rid, r
        assert op_reply_fields(r) == (2, 0, 0, 1), r                 # QueryFailure
        assert list(r.doc) == ["$err", "code", "ok"], r.doc
        assert r.doc == {"$err": case.errmsg, "code": 5739101, "ok": 0.0}, r.doc
    elif case.expect == "error":
        assert_error_reply(r, rid, case.code, case.errmsg, case.prefix, case.opcode, case.flags)
        assert r.doc["codeName"] == CODE_NAMES.get(case.code, f"Location{case.code}"), r.doc
    else:
        assert r.opcode == case.opcode and r.response_to == rid, r
        case.check(r)


@pytest.mark.parametrize("case", [_param(c) for c in CLOSED_CASES])
def test_connection_closed(case, conn, bystander):
    conn.send(case.build(rid_for(case)))
    closed = conn.is_closed(wait=3)
    assert_bystander(bystander)
    assert closed, f"{case.id}: expected the server to close the connection without a reply"


@pytest.mark.parametrize("case", [_param(c) for c in ERROR_CASES + LEGACY_ERR_CASES])
def test_error_reply(case, conn, bystander):
    rid = rid_for(case)
    conn.send(case.build(rid))
    out = observe(conn, wait=3)
    assert_bystander(bystander)
    verify(case, out, rid)
    ping(conn, rid + 1)                   # a non-fatal error leaves the connection usable


@pytest.mark.parametrize("case", [_param(c) for c in OK_CASES])
def test_accepted(case, conn, bystander):
    rid = rid_for(case)
    conn.send(case.build(rid))
    out = observe(conn, wait=3)
    assert_bystander(bystander)
    verify(case, out, rid)
    ping(conn, rid + 1)


@pytest.mark.parametrize("case", [_param(c) for c in SILENT_CASES])
def test_no_reply_connection_kept(case, conn, bystander):
    rid = rid_for(case)
    conn.send(case.build(rid))
    state = peek_silent(conn, 1.0)
    assert state is None, f"{case.id}: expected no reply, got {state}"
    ping(conn, rid + 1)                   # the next request is answered, with its own id
    assert_bystander(bystander)


def test_msglen_exactly_48000000_passes_length_check(conn, bystander):
    """48,000,000 is allowed (mongod tests `msgLen > Max`): the server waits for
    the body instead of hanging up.  (Sending the whole 48 MB is skipped.)"""
    conn.send(header(48_000_000, 11, 0, OP_MSG) + b"\x00" * 64)
    state = peek_silent(conn, 1.0)
    assert_bystander(bystander)
    assert state is None, f"expected the server to wait for the body, got {state}"


def test_header_only_op_msg(conn, bystander):
    """A 16-byte OP_MSG: no flagBits.  Framing accepts it (msgLen == 16); the
    notes leave open what follows, so this holds the server only to a clean
    outcome: an Overflow error reply answering this request on a connection that
    keeps working, or a close with no reply."""
    conn.send(header(16, 12, 0, OP_MSG))
    out = observe(conn, wait=3)
    assert_bystander(bystander)
    assert out.kind in ("reply", "closed"), out
    if out.kind == "reply":
        assert_error_reply(out.reply, 12, 15,
                           prefix="buffer size too small to read (4) bytes out of buffer[0]")
        ping(conn, 13)


def test_truncated_body_then_write_side_closed(conn, bystander):
    msg = op_msg(body_section(PING), request_id=14)
    conn.send(struct.pack("<i", 100) + msg[4:40])               # says 100, sends 40
    assert peek_silent(conn, 0.5) is None, "the server must wait for the rest of the frame"
    conn.sock.shutdown(socket.SHUT_WR)
    closed = conn.is_closed(wait=3)
    assert_bystander(bystander)
    assert closed


def test_more_to_come_then_normal_ping(conn, bystander):
    conn.send(op_msg(body_section(PING), flags=MORE_TO_COME, request_id=15))
    assert peek_silent(conn, 1.0) is None, "a moreToCome request must get no reply"
    r = ping(conn, 16)
    assert r.response_to == 16 and r.flags == 0 and r.doc == {"ok": 1.0}
    assert_bystander(bystander)


def exhaust_stream(conn: Conn, n: int, max_await_ms: int = 100):
    """Start an awaitable hello with exhaustAllowed; return (request id, first n replies)."""
    first = conn.roundtrip(op_msg(body_section({"hello": 1, "$db": "admin"}), request_id=17))
    tv = first.doc["topologyVersion"]
    req = {"hello": 1, "topologyVersion": {"processId": tv["processId"], "counter": Int64(0)},
           "maxAwaitTimeMS": max_await_ms, "$db": "admin"}
    conn.send(op_msg(body_section(req), flags=EXHAUST_ALLOWED, request_id=18))
    return 18, tv, [conn.recv() for _ in range(n)]


def test_exhaust_hello_streams(conn, bystander):
    t0 = time.monotonic()
    rid, tv, replies = exhaust_stream(conn, 3)
    elapsed = time.monotonic() - t0
    assert_bystander(bystander)               # other connections unaffected mid-stream
    prev = rid
    for i, r in enumerate(replies):
        assert r.opcode == OP_MSG
        assert r.flags & MORE_TO_COME, f"streamed reply {i} lacks moreToCome: {r}"
        assert r.response_to == prev, (i, r.response_to, prev)
        assert r.doc["ok"] == 1.0 and r.doc["isWritablePrimary"] is True
        assert r.doc["topologyVersion"] == {"processId": tv["processId"], "counter": 0}
        prev = r.request_id
    assert elapsed >= 0.25, "each streamed reply waits maxAwaitTimeMS"
    conn.close()
    assert_bystander(bystander)


def test_large_checksummed_reply_arrives_whole(server, conn):
    """A 6 MB reply with a checksum goes out as one gather write (the
    prefix, the body where libbson built it, the checksum). Read only after
    the socket's buffer has filled, it arrives whole and its checksum
    verifies."""
    server.command("t", {"insert": "c", "documents": [{"_id": i, "s": "x" * 1000}
                                                     for i in range(6000)]})
    conn.send(op_msg(body_section({"find": "c", "batchSize": 6000, "$db": "t"}),
                     checksum=True, request_id=31))
    time.sleep(0.5)                           # the server's send waits on a full buffer
    r = conn.recv()
    assert r.opcode == OP_MSG and r.response_to == 31
    assert r.flags == CHECKSUM_PRESENT and len(r.raw) > 6_000_000
    assert r.checksum == crc32c(r.raw[:-4])
    assert [d["_id"] for d in r.doc["cursor"]["firstBatch"]] == list(range(6000))


def read_to_eof(conn: Conn, wait: float = 3.0) -> bytes:
    """Everything the server sends until it closes (a reset after data counts as the close)."""
    conn.sock.settimeout(wait)
    data = b""
    try:
        while chunk := conn.sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass            # the peer closed with our unread request bytes: RST instead of FIN
    return data


def test_http_get_on_the_wire_port(conn, bystander):
    conn.send(b"GET / HTTP/1.1\r\n\r\n")
    data = read_to_eof(conn)                  # raises socket.timeout if never closed
    assert_bystander(bystander)
    assert data.startswith(b"HTTP/1.0 200 OK\r\n"), data
    assert b"trying to access MongoDB over HTTP" in data, data


def _garbage(i: int) -> bytes:
    rng = random.Random(i)
    junk = rng.randbytes(rng.randint(16, 600))
    if i % 3 == 1:     # a plausible header over a random OP_MSG body
        return header(len(junk) + 16, i, 0, OP_MSG) + junk
    if i % 3 == 2:     # a plausible header over a random OP_QUERY body
        return header(len(junk) + 16, i, 0, OP_QUERY) + junk
    return junk


def flood(port: int, good: Conn, n: int = 50, pings: int = 200) -> list:
    """n connections spew garbage at once while `good` pings; returns ping failures."""
    start = threading.Barrier(n + 1)

    def spew(i):
        try:
            with Conn(port) as c:
                start.wait(5)
                c.send(_garbage(i))
                c.is_closed(wait=0.5)
        except OSError:
            pass        # the server may hang up first: that is its right

    threads = [threading.Thread(target=spew, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    start.wait(5)
    failures = []
    for k in range(pings):
        try:
            ping(good, 10_000 + k)
        except Exception as e:  # noqa: BLE001 - counted and reported
            failures.append(repr(e))
    for t in threads:
        t.join(10)
    return failures


def test_flood_of_garbage_connections(server, bystander):
    assert flood(server.port, bystander) == []
    assert_bystander(bystander)
    with Conn(server.port) as fresh:          # and it still accepts new connections
        ping(fresh, 99)


# ------------------------------------------------------- docs/wire-errors.md

def _describe(out: Outcome, rid: int) -> str:
    if out.kind == "closed":
        return "connection closed, no reply"
    if out.kind == "silent":
        return "no reply, connection open"
    r = out.reply
    name = {OP_MSG: "OP_MSG", OP_REPLY: "OP_REPLY"}.get(r.opcode, f"opcode {r.opcode}")
    rt = "" if r.response_to == rid else f" (responseTo {r.response_to}, sent {rid})"
    d = r.doc or {}
    if "$err" in d:
        return f"{name} flags {r.flags}{rt}: $err \"{d['$err']}\", code {d.get('code')}"
    if d.get("ok") == 0:
        return (f"{name} flags {r.flags}{rt}: {d.get('code')} {d.get('codeName')} "
                f"\"{d.get('errmsg')}\"")
    extra = ""
    if r.opcode == OP_REPLY:
        _, cursor_id, starting_from, n = op_reply_fields(r)
        extra = f", cursorId {cursor_id}, startingFrom {starting_from}, nReturned {n}"
        for k in ("ismaster", "isWritablePrimary"):
            if k in d:
                extra += f", {k}: {str(d[k]).lower()}"
    if r.flags & CHECKSUM_PRESENT:
        extra = ", checksum " + ("verifies" if r.checksum == crc32c(r.raw[:-4]) else "WRONG")
    return f"{name} flags {r.flags}{rt}: ok: 1{extra}"


def _row_for(port: int, case: Case):
    rid = rid_for(case)
    with Conn(port) as by, Conn(port) as c:
        ping(by, 1)
        c.send(case.build(rid))
        out = observe(c, wait=1.0 if case.expect == "silent" else 3.0)
        obs = _describe(out, rid)
        try:
            verify(case, out, rid)
            verdict = "same"
        except AssertionError:
            verdict = "**differs**"
        if out.kind != "closed":
            try:
                ping(c, rid + 1)
            except Exception as e:  # noqa: BLE001 - recorded in the table
                obs += f"; the connection then fails a ping ({e!r})"
                verdict = "**differs**"
        try:
            assert_bystander(by)
        except Exception as e:      # noqa: BLE001
            obs += f"; BYSTANDER FAILED ({e!r})"
            verdict = "**differs**"
    return case.id, case.input, case.mongod, obs, verdict


def _special_rows(port: int) -> list:
    rows = []

    def bystander_ok(by: Conn) -> str:
        try:
            assert_bystander(by)
            return ""
        except Exception as e:      # noqa: BLE001
            return f"; BYSTANDER FAILED ({e!r})"

    with Conn(port) as by, Conn(port) as c:
        c.send(header(48_000_000, 11, 0, OP_MSG) + b"\x00" * 64)
        st = peek_silent(c, 1.0)
        rows.append(("msglen_48000000", "header with messageLength 48,000,000, then 64 bytes",
                     "passes the length check (`msgLen > Max`); waits for the rest of the body",
                     ("waits for the body (no reply, open after 1 s)" if st is None else st)
                     + bystander_ok(by), "same" if st is None else "**differs**"))
    with Conn(port) as by, Conn(port) as c:
        c.send(header(16, 12, 0, OP_MSG))
        out = observe(c, 3)
        obs = _describe(out, 12)
        if out.kind == "reply":
            ping(c, 13)
            obs += "; the connection then pings ok"
        rows.append(("header_only_op_msg", "16-byte OP_MSG: header only, no flagBits",
                     "not traced in the notes.  Source trace (7.0 service_entry_point_common.cpp): "
                     "OpMsg::parse fails with Overflow and an error reply is built, but "
                     "makeCommandResponse's OpMsg::isFlagSet re-reads the missing flagBits and "
                     "throws outside any catch -> 'Failed to handle request', connection closed, "
                     "no reply", obs + bystander_ok(by),
                     "same" if out.kind == "closed" else "**differs** (per the source trace; "
                     "the test accepts either)"))
    with Conn(port) as by, Conn(port) as c:
        msg = op_msg(body_section(PING), request_id=14)
        c.send(struct.pack("<i", 100) + msg[4:40])
        st = peek_silent(c, 0.5)
        c.sock.shutdown(socket.SHUT_WR)
        closed = c.is_closed(wait=3)
        rows.append(("truncated_body", "header says 100 bytes, 40 sent, then shutdown(SHUT_WR)",
                     "waits for the rest; on EOF the session ends without a reply",
                     ("waits while the socket is open" if st is None else f"before EOF: {st}")
                     + "; after EOF: " + ("connection closed, no reply" if closed else "NOT closed")
                     + bystander_ok(by), "same" if st is None and closed else "**differs**"))
    with Conn(port) as by, Conn(port) as c:
        c.send(op_msg(body_section(PING), flags=MORE_TO_COME, request_id=15))
        st = peek_silent(c, 1.0)
        r = ping(c, 16)
        rows.append(("more_to_come_then_ping", "ping with moreToCome, then a plain ping",
                     "no reply to the first; the second is answered, responseTo = its requestID",
                     ("silent for 1 s" if st is None else st)
                     + f"; then the ping is answered with responseTo {r.response_to} (sent 16)"
                     + bystander_ok(by),
                     "same" if st is None and r.response_to == 16 else "**differs**"))
    with Conn(port) as by, Conn(port) as c:
        rid, _, replies = exhaust_stream(c, 3)
        prev, chain, good = rid, [], True
        for r in replies:
            chain.append(f"flags {r.flags}, responseTo "
                         + ("= previous requestID" if r.response_to == prev else str(r.response_to)))
            good &= bool(r.flags & MORE_TO_COME) and r.response_to == prev
            prev = r.request_id
        rows.append(("exhaust_hello",
                     "hello + topologyVersion (own processId) + maxAwaitTimeMS 100, exhaustAllowed",
                     "a reply every maxAwaitTimeMS, each with moreToCome, each responseTo = the "
                     "previous reply's requestID (the first: the request's)",
                     "first 3 replies: " + "; ".join(chain) + bystander_ok(by),
                     "same" if good else "**differs**"))
    with Conn(port) as by, Conn(port) as c:
        c.send(b"GET / HTTP/1.1\r\n\r\n")
        data = read_to_eof(c)
        first_line = data.split(b"\r\n", 1)[0].decode()
        body = data.split(b"\r\n\r\n", 1)[-1].decode().strip()
        rows.append(("http_get", "`GET / HTTP/1.1\\r\\n\\r\\n`",
                     "an HTTP response \"It looks like you are trying to access MongoDB over HTTP "
                     "on the native driver port.\", then closed",
                     f"`{first_line}`, body \"{body}\", then closed" + bystander_ok(by),
                     "same" if b"trying to access MongoDB over HTTP" in data else "**differs**"))
    with Conn(port) as good:
        failures = flood(port, good)
        rows.append(("flood", "50 connections each sending random garbage at once, while one "
                     "good connection pings 200 times",
                     "each bad connection fails alone; the others are unaffected",
                     f"good connection: {200 - len(failures)}/200 pings ok"
                     + (f"; errors: {failures[:3]}" if failures else "") + bystander_ok(good),
                     "same" if not failures else "**differs**"))
    return rows


def main() -> None:
    import tempfile

    import multifora

    with tempfile.TemporaryDirectory() as d:
        srv = multifora.Server(d + "/db", port=0)
        srv.start()
        try:
            rows = [_row_for(srv.port, c) for group in
                    (CLOSED_CASES, ERROR_CASES, LEGACY_ERR_CASES, OK_CASES, SILENT_CASES)
                    for c in group] + _special_rows(srv.port)
        finally:
            srv.stop()
    print("| case | input | mongod 7.0 | MultiforaDB (observed) | vs mongod |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| `" + row[0] + "` | " + " | ".join(x.replace("|", "\\|") for x in row[1:]) + " |")


if __name__ == "__main__":
    main()
