"""pytest cases for a folder of unified-format spec files, with a NOT_YET
table of strict xfails (shared by test_spec_*.py)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

import multifora

from .runner import Skipped, SpecFailure, UnifiedRunner, Unsupported, load_spec, \
    skip_reason_before_start


class SpecFolder:
    def __init__(self, folder: Path, not_yet: dict):
        self.dir = folder
        self.not_yet = not_yet
        self._load = lru_cache(maxsize=None)(lambda name: load_spec(self.dir / name))

    def files(self) -> list[str]:
        return sorted(p.name for p in self.dir.glob("*.json")) if self.dir.is_dir() else []

    def spec(self, name: str) -> dict:
        return self._load(name)

    def reason(self, name: str, description: str):
        return self.not_yet.get((name, description)) or self.not_yet.get(name)

    def cases(self):
        if not self.dir.is_dir():
            return [pytest.param(None, None, id=f"{self.dir.name}-spec-absent")]
        cases = []
        for name in self.files():
            for test in self.spec(name)["tests"]:
                desc = test["description"]
                reason = self.reason(name, desc)
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                cases.append(pytest.param(name, desc, marks=marks, id=f"{name}::{desc}"))
        return cases

    def run(self, request, name, description):
        if name is None:
            pytest.skip(f"{self.dir} is absent: the spec tests live there")
        spec = self.spec(name)
        test = next(t for t in spec["tests"] if t["description"] == description)
        # Tests for other versions or topologies: say so without starting a
        # server (the runner checks again against the server).
        why = skip_reason_before_start(spec, test, multifora.MONGODB_VERSION)
        if why:
            pytest.skip(why)
        server = request.getfixturevalue("server")
        try:
            UnifiedRunner(server.uri).run_test(spec, test)
        except Skipped as exc:
            pytest.skip(exc.reason)
        except Unsupported as exc:
            if not self.reason(name, description):
                pytest.skip(f"not supported by the runner: {exc.reason}")
            pytest.fail(f"unsupported: {exc.reason}", pytrace=False)  # the expected failure
        except SpecFailure as exc:
            # The message names the operation and the difference; a
            # traceback through pymongo adds nothing.
            pytest.fail(str(exc), pytrace=False)

    def check_not_yet(self):
        """Every NOT_YET key names an existing file (and test)."""
        files = set(self.files())
        if not files:
            pytest.skip(f"{self.dir} is absent")
        for key in self.not_yet:
            name, desc = key if isinstance(key, tuple) else (key, None)
            assert name in files, f"NOT_YET names a missing file {name}"
            if desc is not None:
                descs = {t["description"] for t in self.spec(name)["tests"]}
                assert desc in descs, f"NOT_YET names a missing test {name}: {desc}"
