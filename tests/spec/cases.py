"""The unified-format spec tests as cases: which folders run, how a case is
named, which are expected to fail, and how one runs under pytest.

A case is (folder, file, description); its name, used as the pytest id and
in expected_failures.py, is ``folder/file.json/description``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

import pytest

import multifora
from conftest import SHARED
from unified.runner import (Skipped, SpecFailure, UnifiedRunner, Unsupported, load_spec,
                            skip_reason_before_start)

from .expected_failures import EXPECTED_FAILURES

SPEC_ROOT = SHARED / "spec"
# Run on a standalone; a test of theirs whose runOnRequirements a standalone
# cannot meet and a replica set can runs on the one-member replica set.
STANDALONE_FOLDERS = ("crud", "gridfs", "collection-management", "index-management",
                      "run-command", "versioned-api", "read-write-concern", "sessions")
# Run on a one-member replica set (Server(replica_set=...)), as their
# runOnRequirements ask.
REPLSET_FOLDERS = ("retryable-writes", "transactions", "causal-consistency", "change-streams")
FOLDERS = STANDALONE_FOLDERS + REPLSET_FOLDERS
ABSENT = f"{SPEC_ROOT} is absent: the specification tests live in ../shared/spec"


@dataclass(frozen=True)
class Case:
    folder: str
    file: str
    description: str

    @property
    def name(self) -> str:
        return f"{self.folder}/{self.file}/{self.description}"

    @property
    def file_key(self) -> str:
        return f"{self.folder}/{self.file}"

    @property
    def replset(self) -> bool:
        """Whether the case runs on a replica set (else a standalone)."""
        spec = load(self.folder, self.file)
        test = next(t for t in spec["tests"] if t["description"] == self.description)
        version = multifora.MONGODB_VERSION
        single = skip_reason_before_start(spec, test, version, "single") is None
        replset = skip_reason_before_start(spec, test, version, "replicaset") is None
        if self.folder in REPLSET_FOLDERS:  # (one that needs a standalone runs on one)
            return replset or not single
        return not single and replset


@lru_cache(maxsize=None)
def load(folder: str, file: str) -> dict:
    return load_spec(SPEC_ROOT / folder / file)


def files(folder: str) -> list[str]:
    return sorted(p.name for p in (SPEC_ROOT / folder).glob("*.json"))


def all_cases() -> list[Case]:
    """Every test of every file of FOLDERS; [] when ../shared is absent."""
    return [Case(folder, name, test["description"])
            for folder in FOLDERS for name in files(folder)
            for test in load(folder, name)["tests"]]


def expected_failure(case: Case) -> Optional[str]:
    """The reason ``case`` is listed as an expected failure, or None."""
    return EXPECTED_FAILURES.get(case.name) or EXPECTED_FAILURES.get(case.file_key)


def params() -> list:
    """pytest params: one per case, an expected failure as a strict xfail
    that only a spec failure satisfies (a runner bug stays an error)."""
    if not SPEC_ROOT.is_dir():
        return [pytest.param(None, id="spec-absent",
                             marks=pytest.mark.skip(reason=ABSENT))]
    out = []
    for case in all_cases():
        reason = expected_failure(case)
        marks = ([pytest.mark.xfail(strict=True, reason=reason, raises=pytest.fail.Exception)]
                 if reason else [])
        out.append(pytest.param(case, id=case.name, marks=marks))
    return out


def run(case: Case, server) -> None:
    """Run ``case`` against ``server`` (a started multifora.Server, or a
    callable returning one, so a skipped test need not start it).  pytest
    outcomes: skip for a requirement the server does not meet, fail with the
    difference for a spec failure or something the runner cannot do."""
    spec = load(case.folder, case.file)
    test = next(t for t in spec["tests"] if t["description"] == case.description)
    why = skip_reason_before_start(spec, test, multifora.MONGODB_VERSION,
                                   "replicaset" if case.replset else "single")
    if why:
        pytest.skip(why)
    if callable(server):
        server = server()
    # A driver marks a server Unknown after a "not primary" or shutdown
    # error and finds it again at its next heartbeat: the drivers' own
    # runners shorten it so a retry need not wait 10 s (pymongo's minimum
    # through the URI is 500 ms).
    kw = {"heartbeatFrequencyMS": 500} if case.replset else {}
    try:
        UnifiedRunner(server.uri, **kw).run_test(spec, test)
    except Skipped as exc:
        pytest.skip(exc.reason)
    except Unsupported as exc:
        pytest.fail(f"not supported by the runner: {exc.reason}", pytrace=False)
    except SpecFailure as exc:
        # The message names the operation and the difference; a traceback
        # through pymongo adds nothing.
        pytest.fail(str(exc), pytrace=False)


def bad_expected_failure_keys(entries=EXPECTED_FAILURES) -> list[str]:
    """What is wrong with the entries (EXPECTED_FAILURES by default): a key
    that names no real file or test, a test whose file is listed too, a
    reason that is not one line."""
    names = {c.name for c in all_cases()}
    file_keys = {c.file_key for c in all_cases()}
    bad = []
    for key, reason in entries.items():
        if key not in names and key not in file_keys:
            bad.append(f"{key}: no such file or test")
        elif key in names and any(key.startswith(f + "/") for f in file_keys
                                  if f in entries):
            bad.append(f"{key}: its file is listed too")
        if not reason or "\n" in reason:
            bad.append(f"{key}: the reason must be one non-empty line")
    return bad
