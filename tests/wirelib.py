"""Raw MongoDB wire messages for tests that must send what no driver sends."""
from __future__ import annotations

import socket
import struct
from typing import Optional

import bson
import crc32c as _crc32c

OP_REPLY, OP_UPDATE, OP_INSERT, OP_QUERY = 1, 2001, 2002, 2004
OP_GET_MORE, OP_DELETE, OP_KILL_CURSORS = 2005, 2006, 2007
OP_COMPRESSED, OP_MSG = 2012, 2013
CHECKSUM_PRESENT, MORE_TO_COME, EXHAUST_ALLOWED = 1, 2, 1 << 16


def crc32c(data: bytes) -> int:
    """CRC-32C from an independent implementation (the crc32c package)."""
    return _crc32c.crc32c(data)


def header(length: int, request_id: int, response_to: int, opcode: int) -> bytes:
    return struct.pack("<iiii", length, request_id, response_to, opcode)


def frame(opcode: int, payload: bytes, request_id: int = 1, response_to: int = 0) -> bytes:
    return header(16 + len(payload), request_id, response_to, opcode) + payload


def body_section(doc) -> bytes:
    return b"\x00" + (doc if isinstance(doc, bytes) else bson.encode(doc))


def seq_section(name: str, docs) -> bytes:
    payload = name.encode() + b"\x00" + b"".join(
        d if isinstance(d, bytes) else bson.encode(d) for d in docs)
    return b"\x01" + struct.pack("<i", 4 + len(payload)) + payload


def op_msg(*sections: bytes, flags: int = 0, request_id: int = 1,
           checksum: bool = False, bad_checksum: bool = False) -> bytes:
    if checksum or bad_checksum:
        flags |= CHECKSUM_PRESENT
    payload = struct.pack("<I", flags) + b"".join(sections)
    if flags & CHECKSUM_PRESENT:
        msg = header(16 + len(payload) + 4, request_id, 0, OP_MSG) + payload
        crc = crc32c(msg) ^ (1 if bad_checksum else 0)
        return msg + struct.pack("<I", crc)
    return frame(OP_MSG, payload, request_id)


def op_query(ns: str, query, nreturn: int = -1, flags: int = 0, request_id: int = 1) -> bytes:
    payload = (struct.pack("<i", flags) + ns.encode() + b"\x00" +
               struct.pack("<ii", 0, nreturn) + bson.encode(query))
    return frame(OP_QUERY, payload, request_id)


class Reply:
    def __init__(self, raw: bytes):
        self.raw = raw
        self.length, self.request_id, self.response_to, self.opcode = struct.unpack_from("<iiii", raw)
        self.flags = None
        self.doc = None
        if self.opcode == OP_MSG:
            (self.flags,) = struct.unpack_from("<I", raw, 16)
            assert raw[20] == 0, "reply's first section is not a body"
            n = struct.unpack_from("<i", raw, 21)[0]
            self.doc = bson.decode(raw[21:21 + n])
            self.checksum = (struct.unpack_from("<I", raw, len(raw) - 4)[0]
                             if self.flags & CHECKSUM_PRESENT else None)
        elif self.opcode == OP_REPLY:
            self.flags, cursor_id, start, nret = struct.unpack_from("<iqii", raw, 16)
            n = struct.unpack_from("<i", raw, 36)[0]
            self.doc = bson.decode(raw[36:36 + n])

    def __repr__(self):
        return f"Reply(opcode={self.opcode}, flags={self.flags}, doc={self.doc})"


class Conn:
    def __init__(self, port: Optional[int] = None, path: Optional[str] = None, timeout=5.0):
        if path:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(path)
        else:
            self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by server")
            out += chunk
        return out

    def recv(self) -> Reply:
        hdr = self._recv_exact(16)
        (length,) = struct.unpack_from("<i", hdr)
        return Reply(hdr + self._recv_exact(length - 16))

    def roundtrip(self, data: bytes) -> Reply:
        self.send(data)
        return self.recv()

    def is_closed(self, wait: float = 3.0) -> bool:
        """True if the server closes the connection (EOF) within `wait`
        seconds without sending anything."""
        self.sock.settimeout(wait)
        try:
            data = self.sock.recv(1)
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True
        return data == b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
