"""The Python face of the C server: Server, the embedded open(), errors."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import urllib.parse
from typing import Any, Mapping, Optional

import bson
from bson.codec_options import CodecOptions
from pymongo import MongoClient

from . import _core
from ._core import MultiforaError

_CODEC = CodecOptions(document_class=dict, tz_aware=False)


class CommandError(MultiforaError):
    """A command answered ``ok: 0``.  ``code``, ``code_name`` and ``details``
    (the whole reply) are as a MongoDB driver reports them."""

    def __init__(self, reply: Mapping[str, Any]):
        super().__init__(reply.get("errmsg", "command failed"))
        self.code = reply.get("code")
        self.code_name = reply.get("codeName")
        self.details = dict(reply)


def default_dbpath() -> str:
    """Where ``multifora serve`` keeps data when --dbpath is not given:
    $MULTIFORA_DBPATH, else $XDG_DATA_HOME/multifora, else
    ~/.local/share/multifora."""
    env = os.environ.get("MULTIFORA_DBPATH")
    if env:
        return env
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "multifora")


def _censored(argv: list) -> list:
    """argv with a password option's value shown as "<password>", as
    mongod's getCmdLineOpts shows it."""
    out, hide = [], False
    for a in argv:
        if hide:
            out.append("<password>")
            hide = False
        elif a.startswith("--tlsCertificateKeyFilePassword="):
            out.append("--tlsCertificateKeyFilePassword=<password>")
        else:
            out.append(a)
            hide = a == "--tlsCertificateKeyFilePassword"
    return out


class Server:
    """A MultiforaDB server over one data directory.

    The server's C threads accept and serve connections while Python does
    other work; no Python code runs on them.  ``port=0`` picks a free port,
    ``port=None`` listens on no TCP port (``unix_socket`` must then be set).
    A server runs once: after ``stop()`` the directory is released and a new
    ``Server`` may open it.  A client that has sent a message's first byte
    must send the rest within ``read_deadline_secs`` (None: no limit) or
    its connection is closed; an idle connection is never closed.

    ``logical_session_refresh_ms`` is mongod's logicalSessionRefreshMillis:
    how often the sessions in use are written to config.system.sessions.

    ``huge_pages`` ("auto", "on" or "off") is whether the data file's
    mapping asks the kernel for 2 MiB pages: random reads of data in memory
    (an index's fetches) walk fewer page tables, but a page-cache miss then
    reads 2 MiB and more.  "auto" asks while the file is at most a quarter
    of physical memory (docs/storage.md, "2 MiB pages").

    ``replica_set`` names the one-member replica set this server is the
    primary of (mongod's ``--replSet``): ``hello`` then answers as that
    set's primary, replies carry ``$clusterTime`` and ``operationTime``,
    and ``uri`` names the set.  None (the default) is a standalone.

    ``auth`` turns access control on (mongod's ``--auth``): a connection
    must authenticate (SCRAM) and every command checks the user's
    privileges.  With no user yet, a connection from this host (loopback
    or the Unix socket) may create the first one in ``admin`` (the
    localhost exception).  Commands run in this process through
    ``command()`` act as the server itself and are not checked.
    See docs/auth.md.

    ``tls_mode`` ("disabled", "allowTLS", "preferTLS" or "requireTLS") and
    the other ``tls_`` options are mongod's ``net.tls`` ones: the server's
    certificate and key in one PEM file (``tls_certificate_key_file``, with
    ``tls_certificate_key_file_password`` if the key is encrypted), the CA
    that clients' certificates must chain to (``tls_ca_file``, required, as
    mongod 7.0.6 requires a chain of trust), and whether a client may come
    without a certificate or with one the CA does not vouch for.  TLS 1.2
    and 1.3 only.  A verified client certificate can authenticate with
    MONGODB-X509 (docs/auth.md).

    ``_faults`` (tests only) is a ``multifora._core._Faults``, the storage
    fault table this server's engine checks in every file operation; it
    may be armed before the server opens, and read after it closes.
    """

    def __init__(self, dbpath: str, host: str = "127.0.0.1",
                 port: Optional[int] = 27017, unix_socket: Optional[str] = None,
                 *, max_connections: int = 1000,
                 enable_test_commands: bool = False, log_level: str = "warning",
                 argv: Optional[list] = None, ttl_monitor_sleep_secs: int = 60,
                 read_deadline_secs: Optional[float] = 30.0, huge_pages: str = "auto",
                 logical_session_refresh_ms: int = 300_000,
                 replica_set: Optional[str] = None, auth: bool = False,
                 tls_mode: str = "disabled", tls_certificate_key_file: Optional[str] = None,
                 tls_certificate_key_file_password: Optional[str] = None,
                 tls_ca_file: Optional[str] = None,
                 tls_allow_connections_without_certificates: bool = False,
                 tls_allow_invalid_certificates: bool = False, _faults=None):
        self.dbpath = os.path.abspath(dbpath)
        self.host = host
        self.unix_socket = os.path.abspath(unix_socket) if unix_socket else None
        self.replica_set = replica_set or None
        argv = _censored(list(argv if argv is not None else sys.argv))
        self.tls_mode = tls_mode
        self.tls_ca_file = os.path.abspath(tls_ca_file) if tls_ca_file else None
        net: dict = {"bindIp": host, "maxIncomingConnections": max_connections}
        if port is not None:
            net["port"] = port
        if self.unix_socket:
            net["unixDomainSocket"] = {"pathPrefix": os.path.dirname(self.unix_socket)}
        parsed = {"net": net, "storage": {"dbPath": self.dbpath},
                  "systemLog": {"verbosity": 0}}
        if enable_test_commands:
            parsed["setParameter"] = {"enableTestCommands": "1"}
        if ttl_monitor_sleep_secs != 60:
            parsed.setdefault("setParameter", {})["ttlMonitorSleepSecs"] = str(
                ttl_monitor_sleep_secs)
        if logical_session_refresh_ms != 300_000:
            parsed.setdefault("setParameter", {})["logicalSessionRefreshMillis"] = str(
                logical_session_refresh_ms)
        if huge_pages != "auto":
            parsed["storage"]["hugePages"] = huge_pages
        if self.replica_set:
            parsed["replication"] = {"replSet": self.replica_set}
        if auth:
            parsed["security"] = {"authorization": "enabled"}
        if tls_mode != "disabled":
            tls: dict = {"mode": tls_mode}
            if tls_certificate_key_file:
                tls["certificateKeyFile"] = tls_certificate_key_file
            if tls_certificate_key_file_password:
                tls["certificateKeyFilePassword"] = "<password>"
            if tls_ca_file:
                tls["CAFile"] = tls_ca_file
            if tls_allow_connections_without_certificates:
                tls["allowConnectionsWithoutCertificates"] = True
            if tls_allow_invalid_certificates:
                tls["allowInvalidCertificates"] = True
            net["tls"] = tls
        self._core = _core.Server(
            self.dbpath, host, -1 if port is None else port, self.unix_socket,
            max_connections, enable_test_commands,
            bson.encode({str(i): a for i, a in enumerate(argv)}),
            bson.encode(parsed), log_level, ttl_monitor_sleep_secs,
            -1 if read_deadline_secs is None else max(1, round(read_deadline_secs * 1000)),
            huge_pages, logical_session_refresh_ms, faults=_faults,
            replica_set=self.replica_set, auth=bool(auth), tls_mode=tls_mode,
            tls_certificate_key_file=tls_certificate_key_file,
            tls_certificate_key_file_password=tls_certificate_key_file_password,
            tls_ca_file=tls_ca_file,
            tls_allow_connections_without_certificates=bool(
                tls_allow_connections_without_certificates),
            tls_allow_invalid_certificates=bool(tls_allow_invalid_certificates))
        self._started = False

    # -- life cycle ---------------------------------------------------------

    def start(self) -> "Server":
        """Start serving on the server's own threads; returns self."""
        self._core.start()
        self._started = True
        return self

    def stop(self) -> None:
        """Stop serving, close every connection and release the directory.
        Idempotent."""
        self._core.close()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait until the server stops (the shutdown command, or stop() from
        another thread); return whether it has.  Returns at once if the
        server is already closed."""
        try:
            return self._core.wait(-1 if timeout is None else timeout)
        except MultiforaError:
            return True

    def __enter__(self) -> "Server":
        if not self._started:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- where it is --------------------------------------------------------

    @property
    def port(self) -> Optional[int]:
        return self._core.port

    @property
    def address(self):
        """(host, port) for TCP, else the Unix socket path."""
        if self.port is not None:
            return (self.host.split(",")[0], self.port)
        return self.unix_socket

    @property
    def uri(self) -> str:
        """A connection string any MongoDB driver accepts: a direct
        connection to a standalone, the set (``replicaSet=``) of a
        replica-set member."""
        opts = (f"replicaSet={urllib.parse.quote(self.replica_set, safe='')}"
                if self.replica_set else "directConnection=true")
        if self.tls_mode in ("preferTLS", "requireTLS"):
            # the server's certificate is to chain to the CA it trusts
            opts += "&tls=true"
            if self.tls_ca_file:
                opts += f"&tlsCAFile={urllib.parse.quote(self.tls_ca_file, safe='')}"
        if self.port is not None:
            host = self.host.split(",")[0]
            if host in ("0.0.0.0", "::"):
                host = "127.0.0.1"
            if ":" in host:
                host = f"[{host}]"
            return f"mongodb://{host}:{self.port}/?{opts}"
        quoted = urllib.parse.quote(self.unix_socket, safe="")
        return f"mongodb://{quoted}/?{opts}"

    # -- in-process commands -----------------------------------------------

    def command(self, db: str, document: Mapping[str, Any]) -> dict:
        """Run one command in this process, through the same dispatcher the
        wire uses, with no socket.  Returns the reply; raises CommandError
        when it is ``ok: 0``."""
        reply = bson.decode(self._core.command(db, bson.encode(document)), _CODEC)
        if not reply.get("ok"):
            raise CommandError(reply)
        return reply

    def __repr__(self) -> str:
        return f"Server(dbpath={self.dbpath!r}, uri={self.uri!r})"


class EmbeddedClient(MongoClient):
    """A pymongo MongoClient that owns the server it talks to: closing the
    client (or leaving its ``with`` block) stops the server."""

    def __init__(self, server: Server, sockdir: Optional[str], **kwargs):
        self._mf_server = server
        self._mf_sockdir = sockdir
        try:
            super().__init__(server.uri, **kwargs)
        except BaseException:
            self._mf_shutdown()
            raise

    @property
    def server(self) -> Server:
        return self._mf_server

    def _mf_shutdown(self) -> None:
        server, self._mf_server = self._mf_server, None
        if server is not None:
            server.stop()
        if self._mf_sockdir:
            shutil.rmtree(self._mf_sockdir, ignore_errors=True)
            self._mf_sockdir = None

    def close(self) -> None:
        try:
            super().close()
        finally:
            if getattr(self, "_mf_server", None) is not None:
                self._mf_shutdown()


def open(path: str, replica_set: Optional[str] = "rs0",  # noqa: A001 - the API's name
         auth: bool = False, **client_kwargs) -> EmbeddedClient:
    """Open the database at ``path`` embedded in this process.

    Starts a server on a private Unix socket (in a fresh 0700 directory, no
    TCP port) over ``path`` and returns a connected pymongo client; closing
    the client stops the server.  The server is the primary of a one-member
    replica set named ``replica_set`` ("rs0"), so sessions get transactions
    and retryable writes with nothing to configure; ``replica_set=None``
    makes it a standalone.  ``auth=True`` turns access control on (see
    Server); pass ``username`` and ``password`` for the client, or, while
    no user exists, create the first one in ``admin`` through it.  Extra
    keyword arguments go to MongoClient.
    """
    sockdir = tempfile.mkdtemp(prefix="multifora-")
    try:
        server = Server(path, port=None, unix_socket=os.path.join(sockdir, "mongod.sock"),
                        replica_set=replica_set, auth=auth)
        server.start()
    except BaseException:
        shutil.rmtree(sockdir, ignore_errors=True)
        raise
    return EmbeddedClient(server, sockdir, **client_kwargs)
