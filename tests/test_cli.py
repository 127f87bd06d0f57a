"""``python -m multifora serve`` as a user runs it."""
import os
import shutil
import signal
import stat
import subprocess
import sys
import urllib.parse

import pymongo
import pytest

from conftest import ServedProcess


def test_prints_connection_string_and_serves(served):
    assert served.uri.startswith("mongodb://127.0.0.1:")
    c = served.client()
    assert c.admin.command("ping")["ok"] == 1.0
    assert c.admin.command("serverStatus")["pid"] == served.proc.pid
    argv = c.admin.command("getCmdLineOpts")["argv"]
    assert "serve" in argv and "--dbpath" in argv
    c.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signals_stop_cleanly(tmp_path, sig):
    s = ServedProcess(tmp_path / "db").start()
    c = s.client(serverSelectionTimeoutMS=500)
    c.admin.command("ping")  # the signal arrives with this connection open
    assert s.signal(sig) == 0
    err = s.proc.stderr.read()
    assert '"msg":"Now exiting"' in err
    assert "Traceback" not in err
    c.close()
    s.stop()
    # the data directory was released: a new server opens it
    s2 = ServedProcess(tmp_path / "db").start()
    s2.stop()


def test_logs_are_json_lines_on_stderr(tmp_path):
    s = ServedProcess(tmp_path / "db").start()
    s.client().admin.command("ping")
    s.signal(signal.SIGTERM)
    lines = [l for l in s.proc.stderr.read().splitlines() if l.strip()]
    import json
    docs = [json.loads(l) for l in lines]
    assert all({"t", "s", "c", "id", "ctx", "msg"} <= set(d) for d in docs)
    assert any("Connection accepted" in d["msg"] for d in docs)
    s.stop()


def test_second_server_on_same_dbpath_fails_clearly(served):
    r = subprocess.run([sys.executable, "-m", "multifora", "serve", "--dbpath",
                        str(served.dbpath), "--port", "0"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "Another MultiforaDB instance is already running" in r.stderr
    assert served.client().admin.command("ping")["ok"] == 1.0


def test_unix_socket_only(tmp_path):
    sock = tmp_path / "mf.sock"
    s = ServedProcess(tmp_path / "db", ["--no-tcp", "--unix-socket", str(sock)])
    s.start()
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert urllib.parse.quote(str(sock), safe="") in s.uri
    c = s.client()
    assert c.admin.command("ping")["ok"] == 1.0
    c.close()
    s.stop()
    assert not sock.exists()


def test_console_script_installed():
    exe = shutil.which("multifora", path=os.path.dirname(sys.executable))
    assert exe, "the multifora console script is not installed beside this Python"
    r = subprocess.run([exe, "serve", "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "--dbpath" in r.stdout


def test_default_dbpath_from_environment(tmp_path):
    env = dict(os.environ, MULTIFORA_DBPATH=str(tmp_path / "envdb"))
    p = subprocess.Popen([sys.executable, "-m", "multifora", "serve", "--port", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = p.stdout.readline()
        assert str(tmp_path / "envdb") in first
        assert (tmp_path / "envdb" / "multifora.lock").exists()
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0
        p.stdout.close()
        p.stderr.close()
