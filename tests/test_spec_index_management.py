"""The MongoDB index-management specification tests (unified format), read
from ../shared/spec/index-management at test time.  Most are about Atlas
search indexes, which need a later server or another topology: the runner
skips those by their runOnRequirements and says why."""
from __future__ import annotations

import pytest

from conftest import SHARED
from unified.spec_cases import SpecFolder

FOLDER = SpecFolder(SHARED / "spec" / "index-management", {})


@pytest.mark.parametrize("name,description", FOLDER.cases())
def test_index_management_spec(request, shared_dir, name, description):
    FOLDER.run(request, name, description)


def test_not_yet_names_real_tests(shared_dir):
    FOLDER.check_not_yet()
