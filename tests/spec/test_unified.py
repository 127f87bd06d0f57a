"""Every unified-format test of ../shared/spec/{crud, gridfs,
collection-management, index-management, run-command, versioned-api,
read-write-concern, sessions} on a fresh in-process standalone, and of
{retryable-writes} on a fresh one-member replica set, one case each (test
commands enabled).

A case passes, is skipped by its own runOnRequirements (this server is a 7.0
standalone: no replica set, sharding, auth or later versions), or fails.  A
failure listed in expected_failures.py, with its reason, is a strict xfail.
"""
from __future__ import annotations

import pytest

from .cases import ABSENT, SPEC_ROOT, bad_expected_failure_keys, params, run


@pytest.mark.parametrize("case", params())
def test_spec(request, case):
    run(case, lambda: request.getfixturevalue("rs_server" if case.replset else "server"))


def test_expected_failures_name_real_tests():
    if not SPEC_ROOT.is_dir():
        pytest.skip(ABSENT)
    assert bad_expected_failure_keys() == []


def test_the_expected_failures_check_finds_bad_entries():
    if not SPEC_ROOT.is_dir():
        pytest.skip(ABSENT)
    bad = bad_expected_failure_keys({
        "crud/noSuchFile.json": "a reason",
        "crud/aggregate.json/no such test": "a reason",
        "gridfs/upload.json": "two\nlines",
        "gridfs/upload.json/upload when length is 0": "listed with its file",
    })
    assert bad == ["crud/noSuchFile.json: no such file or test",
                   "crud/aggregate.json/no such test: no such file or test",
                   "gridfs/upload.json: the reason must be one non-empty line",
                   "gridfs/upload.json/upload when length is 0: its file is listed too"]
