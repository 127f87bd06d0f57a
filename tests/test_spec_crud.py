"""The MongoDB CRUD specification tests (unified format), one case per test.

Read from ../shared/spec/crud at test time (never copied here); each test
gets a fresh in-process server.  Tests the server cannot pass yet are listed
in NOT_YET with the reason and run as strict xfails: when one starts to pass
the suite fails with XPASS, and its entry must be removed.  Every test not in
the table must pass, or be skipped by its own runOnRequirements (a 7.0
standalone: no replica set, sharding, auth or 8.x features).

To see how every test ends today, and a draft of the table:
    cd tests && python -m unified.triage ../../shared/spec/crud
    cd tests && python -m unified.triage --not-yet ../../shared/spec/crud
"""
from __future__ import annotations

import pytest

from conftest import SHARED
from unified.spec_cases import SpecFolder

SPEC_DIR = SHARED / "spec" / "crud"


# Reasons, as the server answers today (tests/unified/triage.py --not-yet
# drafts this table from a run; each reason is the first failure a test hits).
COLLATION = 'collation other than simple not supported'
VIEWS = 'views (create with viewOn) not supported'

# file -> reason (every runnable test in the file fails), or
# (file, test description) -> reason (the file has passing tests too).
NOT_YET = {
    ('estimatedDocumentCount.json', 'estimatedDocumentCount works correctly on views'):
        VIEWS,
    ('findOneAndUpdate-errorResponse.json', 'findOneAndUpdate document validation errInfo is accessible'):
        'collMod validator (document validation) not supported',
}


FOLDER = SpecFolder(SPEC_DIR, NOT_YET)


@pytest.mark.parametrize("name,description", FOLDER.cases())
def test_crud_spec(request, shared_dir, name, description):
    FOLDER.run(request, name, description)


def test_not_yet_names_real_tests(shared_dir):
    FOLDER.check_not_yet()
