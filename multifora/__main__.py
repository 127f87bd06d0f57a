"""``python -m multifora serve``: run MultiforaDB as a server process."""
from __future__ import annotations

import argparse
import os
import signal
import sys

from . import MONGODB_VERSION, MultiforaError, Server, default_dbpath
from . import _core


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="multifora",
        description="MultiforaDB, a MongoDB-compatible document database.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the server until SIGINT, SIGTERM or the shutdown command")
    s.add_argument("--dbpath", default=None,
                   help=f"data directory (default: {default_dbpath()})")
    s.add_argument("--port", type=int, default=27017, help="TCP port (default 27017; 0 picks one)")
    s.add_argument("--bind", default="127.0.0.1",
                   help="comma-separated addresses to listen on (default 127.0.0.1)")
    s.add_argument("--unix-socket", default=None, help="also listen on this Unix socket (mode 0600)")
    s.add_argument("--no-tcp", action="store_true", help="listen on the Unix socket only")
    s.add_argument("--max-conns", type=int, default=1000, help="connection limit (default 1000)")
    s.add_argument("--log-level", default="info", choices=["error", "warning", "info", "debug"])
    s.add_argument("--ttl-monitor-sleep-secs", type=int, default=60,
                   help="seconds between TTL monitor passes (default 60)")
    s.add_argument("--read-deadline-secs", type=float, default=30.0,
                   help="close a connection whose message is not complete this many seconds "
                        "after its first byte (default 30; 0: never)")
    s.add_argument("--huge-pages", default="auto", choices=["auto", "on", "off"],
                   help="map the data file with 2 MiB pages: faster random reads of data in "
                        "memory, but 2 MiB read per page-cache miss (default auto: while "
                        "the file is at most a quarter of physical memory)")
    s.add_argument("--replSet", dest="repl_set", default=None, metavar="NAME",
                   help="run as the primary of a one-member replica set of this name "
                        "(transactions, retryable writes); default: a standalone")
    s.add_argument("--auth", action="store_true",
                   help="access control: clients must authenticate, and every command "
                        "checks the user's privileges (docs/auth.md)")
    s.add_argument("--tlsMode", dest="tls_mode", default="disabled",
                   choices=["disabled", "allowTLS", "preferTLS", "requireTLS"],
                   help="which connections to accept: plain, TLS or both (docs/auth.md)")
    s.add_argument("--tlsCertificateKeyFile", dest="tls_cert", default=None, metavar="PEM",
                   help="the server's certificate and private key, in one PEM file")
    s.add_argument("--tlsCertificateKeyFilePassword", dest="tls_cert_pw", default=None,
                   metavar="PASSWORD", help="the password of an encrypted private key")
    s.add_argument("--tlsCAFile", dest="tls_ca", default=None, metavar="PEM",
                   help="the CA that clients' certificates must chain to")
    s.add_argument("--tlsAllowConnectionsWithoutCertificates", dest="tls_no_cert",
                   action="store_true", help="accept a TLS client without a certificate")
    s.add_argument("--tlsAllowInvalidCertificates", dest="tls_invalid", action="store_true",
                   help="accept a client certificate the CA does not vouch for (it then "
                        "authenticates no one)")
    s.add_argument("--enable-test-commands", action="store_true",
                   help="report enableTestCommands=1, as test harnesses expect")
    return p


def serve(args: argparse.Namespace) -> int:
    dbpath = args.dbpath or default_dbpath()
    try:
        server = Server(dbpath, host=args.bind, port=None if args.no_tcp else args.port,
                        unix_socket=args.unix_socket, max_connections=args.max_conns,
                        enable_test_commands=args.enable_test_commands,
                        log_level=args.log_level,
                        ttl_monitor_sleep_secs=args.ttl_monitor_sleep_secs,
                        read_deadline_secs=args.read_deadline_secs or None,
                        huge_pages=args.huge_pages, replica_set=args.repl_set,
                        auth=args.auth, tls_mode=args.tls_mode,
                        tls_certificate_key_file=args.tls_cert,
                        tls_certificate_key_file_password=args.tls_cert_pw,
                        tls_ca_file=args.tls_ca,
                        tls_allow_connections_without_certificates=args.tls_no_cert,
                        tls_allow_invalid_certificates=args.tls_invalid)
        server.start()
    except MultiforaError as e:
        print(f"multifora: cannot start: {e}", file=sys.stderr)
        return 1

    # Read before a signal can stop the server (a stopped one has no port).
    uri = server.uri

    def on_signal(signum, frame):
        _core.log("info", "CONTROL", f"Received {signal.Signals(signum).name}; shutting down")
        server.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"MultiforaDB (MongoDB {MONGODB_VERSION} wire protocol) serving {server.dbpath}",
          flush=True)
    print(f"connect with: {uri}", flush=True)
    # Wake twice a second so Python can run the signal handlers.
    while not server.wait(0.5):
        pass
    server.stop()
    return 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
