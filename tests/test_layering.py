"""DESIGN.md section 2: dependencies point down only.  A file in one layer
may include only its own layer's headers and those of layers below it."""
import re
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parents[1] / "csrc"

# Lowest first.  test/ may include anything; py/ anything but test/.
ORDER = ["util", "bsonx", "storage", "query", "agg", "coll", "command", "wire", "py"]


def _files():
    if not CSRC.is_dir():
        return []
    return sorted(p for p in CSRC.rglob("*.[ch]") if p.relative_to(CSRC).parts[0] in ORDER)


@pytest.mark.skipif(not CSRC.is_dir(), reason="csrc/ not present (installed package only)")
@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(CSRC)))
def test_includes_point_down(path):
    layer = path.relative_to(CSRC).parts[0]
    rank = ORDER.index(layer)
    for line in path.read_text().splitlines():
        m = re.match(r'\s*#\s*include\s+"\.\./([a-z]+)/', line)
        if m:
            target = m.group(1)
            assert target in ORDER and ORDER.index(target) <= rank, (
                f"{path.relative_to(CSRC)}: {layer}/ includes {target}/ ({line.strip()})")


# Issue 46: durability in one place.  A write's sync happens in the
# dispatcher, once, after the handler and before the reply
# (command/dispatch.c); handlers raise the command's log position and never
# sync.  These are the only functions of command/ that may call
# mf_engine_sync: the dispatcher, and the server's own work outside any
# command.
SYNC_ALLOWED = {
    ("dispatch.c", "mf_command_run"),       # the one sync point of commands
    ("sysdb.c", "run"),                      # the server's own collections at open
    ("sysdb.c", "log_startup"),
    ("agg_env_write.c", "sink_commit"),      # $out/$merge's commit (to move to coll/)
    ("cmd_index.c", "mfi_indexes_recover"),  # builds a crash left, at open
    ("cmd_index.c", "mfi_ttl_pass"),         # the TTL monitor's deletes
}


def _sync_callers():
    out = set()
    for path in sorted((CSRC / "command").glob("*.c")):
        func = None
        for line in path.read_text().splitlines():
            m = re.match(r"[a-z][\w \*]*?\b(\w+)\(", line)
            if m and not line.startswith(("return", "if", "for", "while")):
                func = m.group(1)
            if "mf_engine_sync(" in line:
                out.add((path.name, func))
    return out


@pytest.mark.skipif(not CSRC.is_dir(), reason="csrc/ not present (installed package only)")
def test_handlers_never_sync():
    callers = _sync_callers()
    assert ("dispatch.c", "mf_command_run") in callers
    assert callers <= SYNC_ALLOWED, sorted(callers - SYNC_ALLOWED)
