"""multifora.Server and multifora.open as a Python user meets them."""
import ctypes
import os
import stat
import subprocess
import sys
import textwrap
import threading
import time

import pymongo
import pytest

import multifora


def test_context_manager_uri_address(tmp_path):
    with multifora.Server(str(tmp_path / "db"), port=0) as srv:
        host, port = srv.address
        assert host == "127.0.0.1" and port == srv.port > 0
        assert srv.uri == f"mongodb://127.0.0.1:{port}/?directConnection=true"
        c = pymongo.MongoClient(srv.uri)
        assert c.admin.command("ping")["ok"] == 1.0
        c.close()
    # stopped: nothing listens any more
    with pytest.raises(OSError):
        import socket
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_data_directory_is_created_and_locked(tmp_path):
    path = tmp_path / "a" / "b" / "db"
    first = multifora.Server(str(path), port=0).start()
    assert (path / "multifora.lock").exists()
    with pytest.raises(multifora.MultiforaError) as e:
        multifora.Server(str(path), port=0)
    assert e.value.code == 98 and e.value.code_name == "DBPathInUse"
    assert str(path) in str(e.value)
    first.stop()
    again = multifora.Server(str(path), port=0).start()  # released by stop()
    again.stop()


def test_port_in_use_is_a_clear_error(tmp_path):
    with multifora.Server(str(tmp_path / "a"), port=0) as srv:
        with pytest.raises(multifora.MultiforaError) as e:
            multifora.Server(str(tmp_path / "b"), port=srv.port)
        assert "Failed to bind" in str(e.value)
        # the failed server released its directory
        multifora.Server(str(tmp_path / "b"), port=0).stop()


def test_unix_socket_is_private(tmp_path):
    sock = tmp_path / "s" / "mf.sock"
    sock.parent.mkdir()
    with multifora.Server(str(tmp_path / "db"), port=0, unix_socket=str(sock)) as srv:
        mode = stat.S_IMODE(os.stat(sock).st_mode)
        assert stat.S_ISSOCK(os.stat(sock).st_mode) and mode == 0o600
        import urllib.parse
        c = pymongo.MongoClient("mongodb://" + urllib.parse.quote(str(sock), safe=""))
        assert c.admin.command("whatsmyuri")["you"].startswith("anonymous unix socket")
        c.close()
        assert pymongo.MongoClient(srv.uri).admin.command("ping")["ok"] == 1.0
    assert not sock.exists()


def test_open_returns_a_client_that_owns_the_server(tmp_path):
    client = multifora.open(str(tmp_path / "db"))
    assert isinstance(client, pymongo.MongoClient)
    assert client.admin.command("ping")["ok"] == 1.0
    server = client.server
    assert server.port is None and os.path.exists(server.unix_socket)
    sockdir = os.path.dirname(server.unix_socket)
    assert stat.S_IMODE(os.stat(sockdir).st_mode) == 0o700
    client.close()
    assert not os.path.exists(sockdir)
    # the directory is free again
    with multifora.open(str(tmp_path / "db")) as again:
        assert again.admin.command("ping")["ok"] == 1.0


def test_open_is_a_replica_set_with_transactions(tmp_path):
    with multifora.open(str(tmp_path / "db")) as c:
        hello = c.admin.command("hello")
        assert hello["setName"] == "rs0" and hello["isWritablePrimary"] is True
        assert hello["hosts"] == [c.server.unix_socket]
        with c.start_session() as s, s.start_transaction():
            c.t.c.insert_one({"_id": 1}, session=s)
            assert c.t.c.count_documents({}) == 0  # not committed yet
        assert c.t.c.count_documents({}) == 1
    with multifora.open(str(tmp_path / "db"), replica_set=None) as c:
        assert "setName" not in c.admin.command("hello")
        assert c.t.c.count_documents({}) == 1


def test_threads_serve_while_python_holds_the_gil(tmp_path):
    """A client in another process is served while this process's main
    thread holds the GIL in a C call (ctypes.PyDLL keeps the GIL)."""
    with multifora.Server(str(tmp_path / "db"), port=0) as srv:
        script = textwrap.dedent(f"""
            import sys, time, pymongo
            c = pymongo.MongoClient({srv.uri!r}, serverSelectionTimeoutMS=20000)
            c.admin.command("ping")
            print("ready", flush=True)
            sys.stdin.readline()           # the parent now holds the GIL
            t = time.monotonic()
            for _ in range(100):
                c.admin.command("ping")
            print("done %.3f" % (time.monotonic() - t), flush=True)
        """)
        child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        libc = ctypes.PyDLL(None)
        child.stdin.write("go\n")
        child.stdin.flush()
        libc.usleep(3_000_000)           # 3 s without releasing the GIL
        # The child finished its 100 pings during those 3 s.
        line = child.stdout.readline().split()
        assert line[0] == "done" and float(line[1]) < 3.0, line
        child.wait(timeout=30)


def test_command_from_many_threads(server):
    errors = []

    def work():
        try:
            for _ in range(200):
                assert server.command("admin", {"ping": 1})["ok"] == 1.0
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_command_rejects_invalid_bson(server):
    raw = bytearray(b"\x10\x00\x00\x00\x02s\x00\x03\x00\x00\x00a\xff\x00\x00")
    reply = server._core.command("admin", bytes(raw))
    import bson
    doc = bson.decode(reply)
    assert doc["ok"] == 0.0 and doc["code"] == 22


def test_raw_command_reply_is_a_read_only_view_that_owns_its_bytes(tmp_path):
    """_core.command hands the reply's buffer to Python without copying it:
    a read-only memoryview over an object that owns the bytes, valid after
    the server is closed."""
    import bson
    srv = multifora.Server(str(tmp_path / "db"), port=0).start()
    srv.command("t", {"insert": "c", "documents": [{"_id": i, "s": "x" * 100} for i in range(500)]})
    reply = srv._core.command("t", bson.encode({"find": "c", "batchSize": 1000}))
    small = srv._core.command("admin", bson.encode({"ping": 1}))
    srv.stop()
    assert isinstance(reply, memoryview) and reply.readonly
    assert type(reply.obj).__name__ == "Reply"
    with pytest.raises(TypeError):
        reply[0] = 0
    with pytest.raises(TypeError):
        type(reply.obj)()
    docs = bson.decode(reply)["cursor"]["firstBatch"]
    assert [d["_id"] for d in docs] == list(range(500))
    assert bytes(small) == bson.encode({"ok": 1.0})


def test_forked_child_may_not_use_the_parent_server(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0).start()
    try:
        pid = os.fork()
        if pid == 0:  # child
            code = 1
            try:
                srv.command("admin", {"ping": 1})
            except multifora.MultiforaError as e:
                code = 0 if "forked child" in str(e) else 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        assert srv.command("admin", {"ping": 1})["ok"] == 1.0  # parent unaffected
    finally:
        srv.stop()


def test_stop_wakes_waiters_and_streaming_monitors(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0).start()
    c = pymongo.MongoClient(srv.uri, heartbeatFrequencyMS=500, serverSelectionTimeoutMS=1000)
    c.admin.command("ping")
    time.sleep(1.0)  # let the monitor start its streaming hello
    t = time.monotonic()
    srv.stop()
    assert time.monotonic() - t < 5.0
    assert srv.wait(0) is True
    c.close()
