"""The data file's mapping and transparent huge pages (``huge_pages``,
``--huge-pages``; docs/storage.md, "Huge pages").

What is checked is the advice the kernel records for the mapping
(VmFlags in /proc/PID/smaps: ``hg`` asked for 2 MiB pages, ``nh`` asked
never to), not whether it found 2 MiB of memory for it: that depends on the
machine.  The C case /storage/pager/huge_pages_advice_follows_the_mode covers
the automatic limit, growth past it and the 2 MiB alignment."""
import os
import signal

import pymongo
import pytest

import multifora
from conftest import ServedProcess

pytestmark = pytest.mark.skipif(not os.path.exists("/sys/kernel/mm/transparent_hugepage"),
                                reason="this kernel has no transparent huge pages")


def data_file_flags(pid, dbpath) -> list:
    """The VmFlags of each mapping of dbpath/data.mf in process pid."""
    target = os.path.realpath(os.path.join(dbpath, "data.mf"))
    flags, inside = [], False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and not head[0].endswith(":"):
                inside = head[-1] == target
            elif inside and line.startswith("VmFlags:"):
                flags.append(set(head[1:]))
    return flags


def test_embedded_server_asks_for_huge_pages_by_default(tmp_path):
    with multifora.Server(str(tmp_path / "db"), port=0) as s:
        c = pymongo.MongoClient(s.uri)
        c.t.c.insert_many([{"i": i, "pad": "x" * 500} for i in range(5000)])
        flags = data_file_flags(os.getpid(), s.dbpath)
        assert flags and all("hg" in f and "nh" not in f for f in flags), flags
        opts = c.admin.command("getCmdLineOpts")["parsed"]
        assert "hugePages" not in opts["storage"]
        c.close()


def test_off_asks_never_and_is_reported(tmp_path):
    with multifora.Server(str(tmp_path / "db"), port=0, huge_pages="off") as s:
        c = pymongo.MongoClient(s.uri)
        c.t.c.insert_one({"x": 1})
        flags = data_file_flags(os.getpid(), s.dbpath)
        assert flags and all("nh" in f and "hg" not in f for f in flags), flags
        assert c.admin.command("getCmdLineOpts")["parsed"]["storage"]["hugePages"] == "off"
        c.close()


def test_unknown_value_is_refused(tmp_path):
    with pytest.raises(ValueError, match="huge_pages must be 'auto', 'on' or 'off'"):
        multifora.Server(str(tmp_path / "db"), port=0, huge_pages="sometimes")
    # Nothing was left locked: the directory opens.
    with multifora.Server(str(tmp_path / "db"), port=0) as s:
        c = pymongo.MongoClient(s.uri)
        assert c.admin.command("ping")["ok"] == 1.0
        c.close()


@pytest.mark.parametrize("mode,flag", [("on", "hg"), ("off", "nh")])
def test_serve_flag(tmp_path, mode, flag):
    s = ServedProcess(tmp_path / "db", extra=["--huge-pages", mode]).start()
    try:
        c = pymongo.MongoClient(s.uri)
        c.t.c.insert_one({"x": 1})
        flags = data_file_flags(s.proc.pid, s.dbpath)
        assert flags and all(flag in f for f in flags), flags
        assert c.admin.command("getCmdLineOpts")["parsed"]["storage"]["hugePages"] == mode
        c.close()
    finally:
        assert s.signal(signal.SIGTERM) == 0
        s.stop()
