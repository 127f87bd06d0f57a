"""The storage engine inside the server: opened with it, checkpointed and
closed with it, and reopened after a kill -9."""
import signal

import multifora
from conftest import ServedProcess


def test_data_files_live_in_dbpath(tmp_path):
    with multifora.Server(str(tmp_path / "db"), port=0) as srv:
        assert srv.command("admin", {"ping": 1})["ok"] == 1.0
    names = sorted(p.name for p in (tmp_path / "db").iterdir())
    assert "data.mf" in names and "multifora.lock" in names
    assert any(n.startswith("wal.") for n in names)


def test_kill_9_then_restart(tmp_path):
    s = ServedProcess(tmp_path / "db").start()
    c = s.client()
    assert c.admin.command("ping")["ok"] == 1.0
    c.close()
    s.proc.kill()  # SIGKILL: no checkpoint, no unlock
    s.proc.wait(timeout=30)
    s.stop()
    again = ServedProcess(tmp_path / "db").start()  # the lock died with it; recovery runs
    c = again.client()
    assert c.admin.command("ping")["ok"] == 1.0
    c.close()
    assert again.signal(signal.SIGTERM) == 0
    again.stop()
