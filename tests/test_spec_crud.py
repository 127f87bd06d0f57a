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

from functools import lru_cache

import pytest

import multifora
from conftest import SHARED
from unified import Skipped, SpecFailure, UnifiedRunner, Unsupported, load_spec
from unified.runner import skip_reason_before_start

SPEC_DIR = SHARED / "spec" / "crud"


# Reasons, as the server answers today (tests/unified/triage.py --not-yet
# drafts this table from a run; each reason is the first failure a test hits).
PIPELINE_UPDATE = 'pipeline-style updates need aggregation (issue 6)'
AGG = 'aggregate not implemented (issue 6)'
COUNT_DOCS = 'countDocuments runs aggregate: not implemented (issue 6)'
COLLATION = 'collation other than simple not supported'
EXPR = '$expr not supported (let variables)'
FAILPOINT = 'configureFailPoint not implemented (fail points)'
VIEWS = 'views (create with viewOn) not supported'

# file -> reason (every runnable test in the file fails), or
# (file, test description) -> reason (the file has passing tests too).
NOT_YET = {
    'aggregate-allowdiskuse.json': AGG,
    'aggregate-collation.json': AGG,
    'aggregate-let.json': AGG,
    'aggregate-merge-errorResponse.json': AGG,
    'aggregate-merge.json': AGG,
    'aggregate-out.json': AGG,
    'aggregate-rawdata.json': AGG,
    'aggregate.json': AGG,
    'bulkWrite-collation.json': COLLATION,
    'bulkWrite-deleteMany-let.json': EXPR,
    'bulkWrite-deleteOne-let.json': EXPR,
    'bulkWrite-errorResponse.json': FAILPOINT,
    'bulkWrite-replaceOne-let.json': EXPR,
    'bulkWrite-updateMany-dots_and_dollars.json': PIPELINE_UPDATE,
    'bulkWrite-updateMany-let.json': PIPELINE_UPDATE,
    'bulkWrite-updateMany-pipeline.json': PIPELINE_UPDATE,
    'bulkWrite-updateMany-rawdata.json': PIPELINE_UPDATE,
    'bulkWrite-updateOne-dots_and_dollars.json': PIPELINE_UPDATE,
    'bulkWrite-updateOne-let.json': PIPELINE_UPDATE,
    'bulkWrite-updateOne-pipeline.json': PIPELINE_UPDATE,
    'bulkWrite-updateOne-rawdata.json': PIPELINE_UPDATE,
    ('bypassDocumentValidation.json', 'Aggregate with $out passes bypassDocumentValidation: false'):
        AGG,
    ('count-collation.json', 'Count documents with collation'):
        COUNT_DOCS,
    ('count-empty.json', 'Count documents with empty collection'):
        COUNT_DOCS,
    ('count.json', 'Count documents without a filter'):
        COUNT_DOCS,
    ('count.json', 'Count documents with a filter'):
        COUNT_DOCS,
    ('count.json', 'Count documents with skip and limit'):
        COUNT_DOCS,
    'countDocuments-comment.json': COUNT_DOCS,
    'countDocuments-rawdata.json': COUNT_DOCS,
    'create-null-ids.json': COUNT_DOCS,
    'db-aggregate-rawdata.json': AGG,
    'db-aggregate.json': AGG,
    'deleteMany-collation.json': COLLATION,
    'deleteMany-let.json': EXPR,
    'deleteOne-collation.json': COLLATION,
    'deleteOne-errorResponse.json': FAILPOINT,
    'deleteOne-let.json': EXPR,
    'distinct-collation.json': COLLATION,
    ('estimatedDocumentCount.json', 'estimatedDocumentCount errors correctly--command error'):
        FAILPOINT,
    ('estimatedDocumentCount.json', 'estimatedDocumentCount errors correctly--socket error'):
        FAILPOINT,
    ('estimatedDocumentCount.json', 'estimatedDocumentCount works correctly on views'):
        VIEWS,
    'find-collation.json': COLLATION,
    'find-let.json': EXPR,
    'findOneAndDelete-collation.json': COLLATION,
    'findOneAndDelete-let.json': EXPR,
    'findOneAndReplace-collation.json': COLLATION,
    'findOneAndReplace-let.json': EXPR,
    'findOneAndUpdate-collation.json': COLLATION,
    'findOneAndUpdate-comment.json': PIPELINE_UPDATE,
    'findOneAndUpdate-dots_and_dollars.json': PIPELINE_UPDATE,
    'findOneAndUpdate-errorResponse.json': 'createIndexes not implemented; collMod not implemented',
    'findOneAndUpdate-let.json': PIPELINE_UPDATE,
    'findOneAndUpdate-pipeline.json': PIPELINE_UPDATE,
    'findOneAndUpdate-rawdata.json': PIPELINE_UPDATE,
    'insertOne-errorResponse.json': FAILPOINT,
    'replaceOne-collation.json': COLLATION,
    'replaceOne-let.json': EXPR,
    'updateMany-collation.json': COLLATION,
    'updateMany-dots_and_dollars.json': PIPELINE_UPDATE,
    'updateMany-let.json': PIPELINE_UPDATE,
    'updateMany-pipeline.json': PIPELINE_UPDATE,
    'updateOne-collation.json': COLLATION,
    'updateOne-dots_and_dollars.json': PIPELINE_UPDATE,
    'updateOne-errorResponse.json': FAILPOINT,
    'updateOne-let.json': PIPELINE_UPDATE,
    'updateOne-pipeline.json': PIPELINE_UPDATE,
}


@lru_cache(maxsize=None)
def _spec(name: str) -> dict:
    return load_spec(SPEC_DIR / name)


def _files() -> list[str]:
    return sorted(p.name for p in SPEC_DIR.glob("*.json")) if SPEC_DIR.is_dir() else []


def _not_yet(name: str, description: str):
    return NOT_YET.get((name, description)) or NOT_YET.get(name)


def _cases():
    if not SPEC_DIR.is_dir():
        return [pytest.param(None, None, id="crud-spec-absent")]
    cases = []
    for name in _files():
        for test in _spec(name)["tests"]:
            desc = test["description"]
            reason = _not_yet(name, desc)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            cases.append(pytest.param(name, desc, marks=marks, id=f"{name}::{desc}"))
    return cases


@pytest.mark.parametrize("name,description", _cases())
def test_crud_spec(request, shared_dir, name, description):
    if name is None:
        pytest.skip(f"{SPEC_DIR} is absent: the CRUD spec tests live there")
    spec = _spec(name)
    test = next(t for t in spec["tests"] if t["description"] == description)
    # A third of the tests are for other versions or topologies: say so
    # without starting a server (the runner checks again against the server).
    why = skip_reason_before_start(spec, test, multifora.MONGODB_VERSION)
    if why:
        pytest.skip(why)
    server = request.getfixturevalue("server")
    try:
        UnifiedRunner(server.uri).run_test(spec, test)
    except Skipped as exc:
        pytest.skip(exc.reason)
    except Unsupported as exc:
        if not _not_yet(name, description):
            pytest.skip(f"not supported by the runner: {exc.reason}")
        pytest.fail(f"unsupported: {exc.reason}", pytrace=False)  # the expected failure
    except SpecFailure as exc:
        # The message names the operation and the difference; a traceback
        # through pymongo adds nothing and costs ~0.2 s to format.
        pytest.fail(str(exc), pytrace=False)


def test_not_yet_names_real_tests(shared_dir):
    """Every NOT_YET key names an existing file (and test), so a typo or a
    renamed spec test cannot leave a stale entry behind."""
    files = set(_files())
    if not files:
        pytest.skip(f"{SPEC_DIR} is absent")
    for key in NOT_YET:
        name, desc = key if isinstance(key, tuple) else (key, None)
        assert name in files, f"NOT_YET names a missing file {name}"
        if desc is not None:
            descs = {t["description"] for t in _spec(name)["tests"]}
            assert desc in descs, f"NOT_YET names a missing test {name}: {desc}"
