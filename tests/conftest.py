"""Fixtures shared by the suite.

- ``server``: an in-process Server on an ephemeral port over a fresh
  temporary directory (so every test gets a fresh database).
- ``client``: a pymongo client connected to ``server``.
- ``served``: a ``python -m multifora serve`` subprocess, for tests that
  kill it or send it signals.
- ``any_client``: a client over each path a user has, parametrized:
  the embedded ``multifora.open`` and the served subprocess.
- ``shared_dir``: ../shared (spec tests, bench data), or a skip.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pymongo
import pytest

import multifora

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture
def server(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0, enable_test_commands=True)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def rs_server(tmp_path):
    """A one-member replica set's primary (test commands enabled)."""
    srv = multifora.Server(str(tmp_path / "db"), port=0, enable_test_commands=True,
                           replica_set="rs0")
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def rs_client(rs_server):
    c = pymongo.MongoClient(rs_server.uri, serverSelectionTimeoutMS=5000)
    yield c
    c.close()


@pytest.fixture
def client(server):
    c = pymongo.MongoClient(server.uri, serverSelectionTimeoutMS=5000)
    yield c
    c.close()


class ServedProcess:
    """A ``python -m multifora serve`` child process."""

    def __init__(self, dbpath: Path, extra=()):
        self.dbpath = dbpath
        self.extra = list(extra)
        self.proc = None
        self.uri = None
        self.port = None

    def start(self, timeout=30.0) -> "ServedProcess":
        cmd = [sys.executable, "-m", "multifora", "serve", "--dbpath", str(self.dbpath),
               "--port", "0", "--log-level", "info", *self.extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=str(self.dbpath.parent))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                err = self.proc.stderr.read()
                raise RuntimeError(f"server exited early: {self.proc.wait()} {err}")
            m = re.search(r"connect with: (mongodb://\S+)", line)
            if m:
                self.uri = m.group(1)
                mp = re.search(r":(\d+)/", self.uri)
                self.port = int(mp.group(1)) if mp else None
                return self
        raise RuntimeError("server did not print its connection string")

    def client(self, **kw) -> pymongo.MongoClient:
        kw.setdefault("serverSelectionTimeoutMS", 5000)
        return pymongo.MongoClient(self.uri, **kw)

    def signal(self, sig) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc:
            for f in (self.proc.stdout, self.proc.stderr):
                if f:
                    f.close()


def build_killed_before_commit(dbpath: Path, docs, keys, timeout_ms=60000) -> ServedProcess:
    """Insert `docs` into t.c of a served database at `dbpath`, build the
    index `keys` with the build held by the fail point before it commits
    (its keys all written, then synced by one more write), kill -9 the
    server there and start it again: the restarted server (the caller
    stops it)."""
    import threading

    s = ServedProcess(dbpath, ["--enable-test-commands"]).start()
    t = None
    try:
        c = s.client()
        for i in range(0, len(docs), 5000):
            c.t.c.insert_many(docs[i:i + 5000])
        c.t.other.insert_one({"x": 0})
        admin = c.admin
        before = admin.command("configureFailPoint", "hangIndexBuildBeforeCommit",
                               mode="alwaysOn")["count"]

        def build():
            try:
                s.client().t.c.create_index(keys)
            except Exception:  # noqa: BLE001 - killed under it
                pass

        t = threading.Thread(target=build)
        t.start()
        admin.command("waitForFailPoint", "hangIndexBuildBeforeCommit",
                      timesEntered=before + 2, maxTimeMS=timeout_ms)
        c.t.other.insert_one({"x": 1})  # syncs the log, and the build's keys with it
    finally:
        s.kill()
    if t:
        t.join(timeout=30)
    return ServedProcess(dbpath).start()


def build_killed_midway(dbpath: Path, docs, keys) -> ServedProcess:
    """Insert `docs` into t.c of a served database at `dbpath`, time one
    build of the index `keys` and drop it, build it again and kill -9 the
    server about halfway through (after one more write has synced what
    the build logged), and start it again: the restarted server (the
    caller stops it), whose t.c has the whole index or none."""
    import threading

    s = ServedProcess(dbpath).start()
    t = None
    try:
        c = s.client()
        for i in range(0, len(docs), 5000):
            c.t.c.insert_many(docs[i:i + 5000])
        c.t.other.insert_one({"x": 0})
        t0 = time.monotonic()
        c.t.c.create_index(keys)
        took = time.monotonic() - t0
        c.t.c.drop_indexes()
        c.close()

        def build():
            try:
                s.client().t.c.create_index(keys)
            except Exception:  # noqa: BLE001 - the server is killed under it
                pass

        t = threading.Thread(target=build)
        t.start()
        time.sleep(took / 2)
        cc = s.client()
        cc.t.other.insert_one({"x": 1})  # syncs what the build logged
        cc.close()
    finally:
        s.kill()
    if t:
        t.join(timeout=30)
    return ServedProcess(dbpath).start()


@pytest.fixture
def served(tmp_path):
    s = ServedProcess(tmp_path / "db").start()
    yield s
    s.stop()


@pytest.fixture(params=["embedded", "served"])
def any_client(request, tmp_path):
    if request.param == "embedded":
        c = multifora.open(str(tmp_path / "db"), serverSelectionTimeoutMS=5000)
        yield c
        c.close()
    else:
        s = ServedProcess(tmp_path / "db").start()
        c = s.client()
        yield c
        c.close()
        s.stop()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent: the spec tests and bench data live there")
    return SHARED


def pytest_addoption(parser):
    # Reliability suites (issue 7): each has a small CI setting and a large
    # on-demand one (docs/reliability.md gives the commands).
    parser.addoption("--wire-mutations", type=int, default=2000,
                     help="test_rel_bad_input: mutated documents sent to the server")
    parser.addoption("--fuzz-seconds", type=int, default=60,
                     help="test_rel_fuzz: libFuzzer run time per target")
    parser.addoption("--rounds", type=int, default=None,
                     help="test_rel_kill9: kill -9 rounds (CI: 50)")
    parser.addoption("--crash-points", type=int, default=None,
                     help="test_rel_power: crash points to try, spread over the workload "
                          "(CI: every one)")
    parser.addoption("--flips", type=int, default=500,
                     help="test_rel_corruption: single-byte flips, one database opened per flip")
    parser.addoption("--flip-seed", type=int, default=1,
                     help="test_rel_corruption: seed choosing the flips")
    parser.addoption("--load-seconds", type=float, default=12.0,
                     help="test_rel_load: how long 16 busy clients run beside 1,000 idle "
                          "connections (the issue's large setting: 60)")
