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
    ("dispatch.c", "mfi_command_direct"),   # the same for the server's own commands
    ("sysdb.c", "log_startup"),             # the startup log's trim, at open
    ("agg_env_write.c", "sink_commit"),      # $out/$merge's commit
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


# Issue 46: errors are set by name.  A code mongod names (util/error.c's
# table) is written as its MF_* constant wherever it is set or compared;
# the bare numbers left are mongod's unnamed assertion ids ("Location<id>"),
# which mongod's own source writes as numbers too.  A local alias
# (E_FOO = 67, #define MFI_E_FOO 171) of a named code counts as bare.  An
# allocation failure is mf_error_oom(), one message for all.
_CODE_USE = re.compile(r"(mf_error_set\(\s*[^,;]+,\s*|\b(?:rc|code)\s*[!=]=\s*"
                       r"|\b(?:MFI_)?E_[A-Z0-9_]+\s*=\s*|#define\s+(?:MFI_)?E_[A-Z0-9_]+\s+)(\d+)\b")


def _named_codes():
    table = (CSRC / "util" / "error.c").read_text()
    return {int(c): n for c, n in re.findall(r'\{(\d+), "(\w+)"\}', table)}


@pytest.mark.skipif(not CSRC.is_dir(), reason="csrc/ not present (installed package only)")
def test_named_codes_are_set_by_name():
    named = _named_codes()
    assert named[11000] == "DuplicateKey"
    bare = []
    for path in _files():
        if path.name == "error.c":
            continue
        text = path.read_text()
        for m in _CODE_USE.finditer(text):
            code = int(m.group(2))
            if code and code in named:
                line = text.count("\n", 0, m.start()) + 1
                bare.append(f"{path.relative_to(CSRC)}:{line}: {code} is MF_{named[code]}")
    assert not bare, bare


@pytest.mark.skipif(not CSRC.is_dir(), reason="csrc/ not present (installed package only)")
def test_out_of_memory_has_one_helper():
    spelled = [str(p.relative_to(CSRC)) for p in _files()
               if p.name != "error.c" and re.search(r'MF_InternalError,\s*"out of memory"', p.read_text())]
    assert not spelled, spelled


# Issue 46: no handler calls another.  A handler (mfi_cmd_<name>) is
# reached only through the command table of dispatch.c -- by a client's
# command (mf_command_run) or the server's own (mfi_command_direct); what
# two commands share is a function of coll/ or of command/'s helpers
# (mfi_aggregate_run for aggregate and its explain).
_HANDLER_DEF = re.compile(r"^int (mfi_cmd_\w+)\(mf_cmd_ctx \*")


def _handler_uses():
    uses = []
    for path in _files():
        if path.suffix != ".c" or path.name == "dispatch.c":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if _HANDLER_DEF.match(line):
                continue
            for m in re.finditer(r"\bmfi_cmd_\w+\b", line):
                uses.append(f"{path.relative_to(CSRC)}:{n}: {m.group(0)}")
    return uses


@pytest.mark.skipif(not CSRC.is_dir(), reason="csrc/ not present (installed package only)")
def test_no_handler_calls_another():
    table = (CSRC / "command" / "commands.def").read_text()
    assert "mfi_cmd_insert" in table  # the table is where handlers are named
    uses = _handler_uses()
    assert not uses, uses
    # and only the dispatcher can see their declarations
    including = [str(p.relative_to(CSRC)) for p in _files()
                 if re.search(r'#\s*include\s+"handlers\.h"', p.read_text())]
    assert including == ["command/dispatch.c"], including
