"""Every unified-format test of ../shared/spec/{crud, gridfs,
collection-management, index-management, run-command, versioned-api,
read-write-concern, sessions}, one case each, on a fresh in-process server
(test commands enabled).

A case passes, is skipped by its own runOnRequirements (this server is a 7.0
standalone: no replica set, sharding, auth or later versions), or fails.  A
failure listed in expected_failures.py, with its reason, is a strict xfail.
"""
from __future__ import annotations

import pytest

from .cases import ABSENT, SPEC_ROOT, bad_expected_failure_keys, params, run


@pytest.mark.parametrize("case", params())
def test_spec(request, case):
    run(case, lambda: request.getfixturevalue("server"))


def test_expected_failures_name_real_tests():
    if not SPEC_ROOT.is_dir():
        pytest.skip(ABSENT)
    assert bad_expected_failure_keys() == []
