"""Embedding hazards (issue 7): what a program that embeds the server can do
to it by accident -- fork with it open, open its directory twice, drop its
Python objects in any order, exit with it running -- and what it gets.

- A forked child that uses the parent's open server (``Server.command``,
  ``start``, ``wait``) gets IllegalOperation (20) naming the fork; its
  ``stop``/``close`` and its garbage collection do nothing to the parent's
  server; the parent's data is intact (count, values, ``validate``) after.
- A forked child does not keep the directory locked: the parent can stop
  and reopen its database while the child still runs.
- A second process (or a second Server in the same one) opening the same
  dbpath gets DBPathInUse (98) with a message that says the directory is
  locked by another instance; ``python -m multifora serve`` exits 1 saying so.
- Server, clients and cursors dropped in each of the 6 orders, with and
  without reference cycles (gc.collect), leave no crash; the directory is
  released and reopens with every document.
- A subprocess that exits (normally, by an exception, by sys.exit from a
  thread in use) with its server running, a client and an open cursor,
  exits 0/its code within a timeout and leaves a database that reopens whole.
"""
from __future__ import annotations

import gc
import itertools
import os
import subprocess
import sys
import textwrap
import time

import pymongo
import pytest

import multifora

N = 300
ILLEGAL_OPERATION = 20
DBPATH_IN_USE = 98


def _fill(srv: multifora.Server, n: int = N) -> None:
    srv.command("app", {"insert": "items",
                        "documents": [{"_id": i, "v": i * 3, "s": "x" * 50} for i in range(n)]})
    srv.command("app", {"createIndexes": "items", "indexes": [{"key": {"v": 1}, "name": "v_1"}]})


def _check_intact(srv: multifora.Server, n: int = N) -> None:
    r = srv.command("app", {"find": "items", "filter": {}, "sort": {"_id": 1},
                            "batchSize": n + 1})
    docs = r["cursor"]["firstBatch"]
    assert [(d["_id"], d["v"]) for d in docs] == [(i, i * 3) for i in range(n)]
    v = srv.command("app", {"validate": "items", "full": True})
    assert v["valid"] is True and v["nrecords"] == n
    assert v["keysPerIndex"] == {"_id_": n, "v_1": n}


def _child(fn) -> int:
    """Run fn() in a forked child; return the child's exit code (fn's
    return value, or 99 on an unexpected exception)."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = fn()
        except BaseException as e:  # noqa: BLE001 - reported by the exit code
            print(f"child: unexpected {e!r}", file=sys.stderr, flush=True)
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


# --------------------------------------------------------------------- fork

def test_forked_child_gets_an_error_not_the_database(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0).start()
    try:
        _fill(srv)

        def child():
            failures = 0
            for call in (lambda: srv.command("app", {"insert": "items",
                                                     "documents": [{"_id": "child"}]}),
                         lambda: srv.command("app", {"delete": "items",
                                                     "deletes": [{"q": {}, "limit": 0}]}),
                         lambda: srv.command("app", {"find": "items"}),
                         lambda: srv._core.start(),
                         lambda: srv._core.wait(0.1)):
                try:
                    call()
                    return 1  # the child reached the parent's database
                except multifora.MultiforaError as e:
                    if e.code != ILLEGAL_OPERATION or "forked child" not in str(e) \
                            or str(os.getppid()) not in str(e):
                        return 2
                    failures += 1
            # stop/close/GC in the child must not touch the parent's server.
            srv.stop()
            srv._core.close()
            return 0 if failures == 5 else 3

        assert _child(child) == 0
        # The parent's server still serves, in process and on the wire.
        _check_intact(srv)
        with pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000) as c:
            assert c.app.items.count_documents({}) == N
            c.app.items.insert_one({"_id": "after"})
        assert srv.command("app", {"count": "items"})["n"] == N + 1
    finally:
        srv.stop()


def test_forked_child_exiting_normally_leaves_the_parent_serving(tmp_path):
    """The child ends through interpreter shutdown (not os._exit): its copy
    of the server is finalized and must do nothing."""
    script = textwrap.dedent(f"""
        import os, sys, multifora, pymongo
        srv = multifora.Server({str(tmp_path / "db")!r}, port=0).start()
        srv.command("app", {{"insert": "items", "documents": [{{"_id": i}} for i in range({N})]}})
        client = pymongo.MongoClient(srv.uri)
        cursor = client.app.items.find(batch_size=10)
        next(cursor)
        pid = os.fork()
        if pid == 0:
            try:
                srv.command("app", {{"ping": 1}})
            except multifora.MultiforaError as e:
                assert e.code == 20, e
            sys.exit(0)  # shutdown runs: srv, client, cursor finalized in the child
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert client.app.items.count_documents({{}}) == {N}
        assert len(list(cursor)) == {N - 1}
        print("parent ok", flush=True)
        client.close()
        srv.stop()
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "parent ok"


def test_forked_child_does_not_hold_the_directory(tmp_path):
    """A long-lived child (a worker pool's) must not keep the parent from
    stopping and reopening its own database."""
    path = str(tmp_path / "db")
    srv = multifora.Server(path, port=0).start()
    _fill(srv)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)  # live until the parent is done
        os._exit(0)
    os.close(r)
    try:
        srv.stop()
        srv2 = multifora.Server(path, port=0).start()
        try:
            _check_intact(srv2)
        finally:
            srv2.stop()
    finally:
        os.write(w, b"x")
        os.close(w)
        os.waitpid(pid, 0)


def test_forked_child_may_open_its_own_database(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0).start()
    try:
        _fill(srv)

        def child():
            # The parent's directory: locked by the parent.
            try:
                multifora.Server(str(tmp_path / "db"), port=0)
                return 1
            except multifora.MultiforaError as e:
                if e.code != DBPATH_IN_USE:
                    return 2
            own = multifora.Server(str(tmp_path / "child"), port=0).start()
            own.command("app", {"insert": "c", "documents": [{"_id": 1}]})
            n = own.command("app", {"count": "c"})["n"]
            own.stop()
            return 0 if n == 1 else 3

        assert _child(child) == 0
        _check_intact(srv)
    finally:
        srv.stop()
    srv = multifora.Server(str(tmp_path / "child"), port=0).start()
    try:
        assert srv.command("app", {"count": "c"})["n"] == 1
    finally:
        srv.stop()


# --------------------------------------------------------------- the lock

def test_second_process_gets_locked_error(tmp_path):
    path = str(tmp_path / "db")
    srv = multifora.Server(path, port=0).start()
    try:
        _fill(srv)
        script = textwrap.dedent(f"""
            import multifora, sys
            try:
                multifora.Server({path!r}, port=0)
            except multifora.MultiforaError as e:
                print(e.code, e.code_name, str(e), sep="|")
                sys.exit(0)
            sys.exit(1)
        """)
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        code, name, msg = r.stdout.strip().split("|")
        assert (code, name) == (str(DBPATH_IN_USE), "DBPathInUse")
        assert msg == (f"Unable to lock the lock file: {path}/multifora.lock (Resource "
                       f"temporarily unavailable). Another MultiforaDB instance is already "
                       f"running in the {path} directory")
        # The served form says it and exits 1.
        r = subprocess.run([sys.executable, "-m", "multifora", "serve", "--dbpath", path,
                            "--port", "0"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1
        assert "cannot start" in r.stderr and "Another MultiforaDB instance is already running" \
            in r.stderr
        # multifora.open() too, and it leaves no socket directory behind.
        with pytest.raises(multifora.MultiforaError) as ei:
            multifora.open(path)
        assert ei.value.code == DBPATH_IN_USE
        # The refused openers changed nothing.
        _check_intact(srv)
    finally:
        srv.stop()
    # Released on stop: now it opens.
    srv = multifora.Server(path, port=0).start()
    try:
        _check_intact(srv)
    finally:
        srv.stop()


# ------------------------------------------------------- garbage collection

ORDERS = list(itertools.permutations(["server", "client", "cursor"]))


@pytest.mark.parametrize("cycles", [False, True], ids=["refcount", "cycles"])
@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
def test_objects_collected_in_any_order(tmp_path, order, cycles):
    path = str(tmp_path / "db")
    objs = {}
    objs["server"] = multifora.Server(path, port=0).start()
    _fill(objs["server"])
    objs["client"] = pymongo.MongoClient(objs["server"].uri, serverSelectionTimeoutMS=2000)
    objs["cursor"] = objs["client"].app.items.find(batch_size=7)
    assert next(objs["cursor"])["_id"] == 0
    if cycles:  # each object in a reference cycle: only the collector frees them
        for k in list(objs):
            box = [objs[k]]
            box.append(box)
            objs[k] = box
    for name in order:
        del objs[name]
        gc.collect()
    gc.collect()
    # Everything released: the directory reopens with every document.
    srv = multifora.Server(path, port=0).start()
    try:
        _check_intact(srv)
    finally:
        srv.stop()


def test_embedded_client_and_cursor_collected_in_any_order(tmp_path):
    """multifora.open's client owns its server: dropping the client (with a
    cursor still open) releases the directory; the cursor, dropped after,
    is harmless."""
    path = str(tmp_path / "db")
    for first in ("client", "cursor"):
        c = multifora.open(path, serverSelectionTimeoutMS=2000)
        c.app.items.delete_many({})
        c.app.items.insert_many([{"_id": i} for i in range(50)])
        cur = c.app.items.find(batch_size=5)
        next(cur)
        c.close() if first == "client" else None
        if first == "client":
            del c
            gc.collect()
            with pytest.raises(pymongo.errors.InvalidOperation):
                list(cur)  # a closed client says so; no crash
            del cur
        else:
            del cur
            gc.collect()
            c.close()
            del c
        gc.collect()
    with multifora.open(path) as c:
        assert c.app.items.count_documents({}) == 50


EXIT_SCRIPT = """
import sys, threading, multifora, pymongo
mode = sys.argv[2]
srv = multifora.Server(sys.argv[1], port=0).start()
client = pymongo.MongoClient(srv.uri)
client.app.items.insert_many([{"_id": i, "v": i} for i in range(1000)])
cursor = client.app.items.find(batch_size=10)
next(cursor)
emb = None
if mode == "open":
    emb = multifora.open(sys.argv[1] + "-emb")
    emb.app.e.insert_one({"_id": 1})
    ecur = emb.app.e.find()
if mode == "busy":
    # A thread still writing when the main thread returns.
    def writer():
        i = 1000
        while True:
            try:
                client.app.items.insert_one({"_id": i, "v": i})
            except Exception:
                return
            i += 1
    threading.Thread(target=writer, daemon=True).start()
    import time; time.sleep(0.3)
print("running", flush=True)
if mode == "raise":
    raise RuntimeError("the program fails with the server running")
if mode == "exit3":
    sys.exit(3)
"""


@pytest.mark.parametrize("mode,code", [("plain", 0), ("open", 0), ("busy", 0),
                                       ("raise", 1), ("exit3", 3)])
def test_interpreter_exit_with_running_server(tmp_path, mode, code):
    path = str(tmp_path / "db")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, path, mode], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    assert r.stdout.strip() == "running"
    assert "Fatal Python error" not in r.stderr and "Segmentation" not in r.stderr
    assert time.monotonic() - t0 < 30
    srv = multifora.Server(path, port=0).start()
    try:
        n = srv.command("app", {"count": "items"})["n"]
        assert n >= 1000 if mode == "busy" else n == 1000
        v = srv.command("app", {"validate": "items", "full": True})
        assert v["valid"] is True and v["nrecords"] == n
    finally:
        srv.stop()
    if mode == "open":
        with multifora.open(path + "-emb") as c:
            assert list(c.app.e.find()) == [{"_id": 1}]


FORK_UNDER_LOAD = """
import os, sys, threading, time, multifora, pymongo
srv = multifora.Server(sys.argv[1], port=0).start()
stop = threading.Event()
acked = [[] for _ in range(4)]
errors = []

def writer(k):
    c = pymongo.MongoClient(srv.uri)
    i = 0
    try:
        while not stop.is_set():
            c.app.items.insert_one({"_id": f"{k}-{i}", "k": k})
            acked[k].append(f"{k}-{i}")
            if i % 5 == 0:
                c.app.items.update_one({"_id": f"{k}-{i}"}, {"$set": {"u": i}})
            i += 1
    except Exception as e:
        errors.append(repr(e))
    c.close()

threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
time.sleep(0.3)
bad = 0
for n in range(int(sys.argv[2])):
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            srv.command("app", {"insert": "items", "documents": [{"_id": "child"}]})
            code = 1
        except multifora.MultiforaError as e:
            code = 0 if e.code == 20 else 2
        srv.stop()
        sys.exit(code)  # a normal interpreter exit in the child
    deadline = time.monotonic() + 20
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            bad += os.waitstatus_to_exitcode(status) != 0
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            bad += 1
            break
        time.sleep(0.01)
    time.sleep(0.02)
stop.set()
for t in threads:
    t.join()
r = srv.command("app", {"find": "items", "filter": {}, "batchSize": 1000000})
ids = sorted(d["_id"] for d in r["cursor"]["firstBatch"])
want = sorted(i for a in acked for i in a)
v = srv.command("app", {"validate": "items", "full": True})
srv.stop()
print(bad, len(errors), ids == want, len(want), v["valid"], sep=" ")
"""


def test_fork_under_load(tmp_path):
    """20 forks while 4 threads write: each child gets the error and exits
    through a normal interpreter shutdown; no writer sees an error and
    every acknowledged write is there."""
    r = subprocess.run([sys.executable, "-c", FORK_UNDER_LOAD, str(tmp_path / "db"), "20"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    bad, errors, same, n, valid = r.stdout.split()
    assert (bad, errors, same, valid) == ("0", "0", "True", "True"), r.stdout
    assert int(n) > 100
