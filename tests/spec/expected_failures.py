"""The spec tests that fail today, each with a one-line reason.

A key is ``folder/file.json`` (every test of the file that runs fails) or
``folder/file.json/test description``.  Each listed test runs as a strict
xfail: it must fail with a spec failure (a runner bug still errors), and
when it starts to pass the suite fails with XPASS until its entry is
removed here.  So this list only shrinks.  test_unified.py checks that
every key names a real file or test.

To see how every test of a folder ends, and draft entries:
    cd tests && python -m unified.triage ../../shared/spec/FOLDER
    cd tests && python -m unified.triage --expected ../../shared/spec/FOLDER
"""
from __future__ import annotations

# Reasons shared by several entries.
SNAPSHOT = ("readConcern level 'snapshot' outside a transaction on a standalone is "
            "accepted; mongod refuses it")
API_STRICT = "apiStrict: true does not refuse commands outside API Version 1 (APIStrictError 323)"
CLUSTERED = "create option 'clusteredIndex' not supported (CommandNotSupported 115)"
PRE_POST_IMAGES = "option 'changeStreamPreAndPostImages' not supported in create/collMod"
TIMESERIES = "time-series collections (create timeseries, expireAfterSeconds) not supported"

EXPECTED_FAILURES: dict[str, str] = {
    # crud
    "crud/estimatedDocumentCount.json/estimatedDocumentCount works correctly on views":
        "views not supported: create option 'viewOn' refused (CommandNotSupported 115)",
    "crud/findOneAndUpdate-errorResponse.json/"
    "findOneAndUpdate document validation errInfo is accessible":
        "document validation not supported: collMod option 'validator' refused",

    # collection-management
    "collection-management/clustered-indexes.json": CLUSTERED,
    "collection-management/createCollection-pre_and_post_images.json": PRE_POST_IMAGES,
    "collection-management/modifyCollection-errorResponse.json/"
    "modifyCollection prepareUnique violations are accessible":
        "collMod index.prepareUnique refused as an unknown field (and no violations reply)",
    "collection-management/modifyCollection-pre_and_post_images.json": PRE_POST_IMAGES,
    "collection-management/timeseries-collection.json": TIMESERIES,

    # run-command
    "run-command/runCursorCommand.json/does not close the cursor when receiving an empty batch":
        "capped collections (create capped/size/max) and tailable cursors not supported",

    # versioned-api
    "versioned-api/crud-api-version-1-strict.json/aggregate on database appends declared "
    "API version": API_STRICT + ": aggregate with $listLocalSessions runs",
    "versioned-api/crud-api-version-1-strict.json/distinct appends declared API version":
        API_STRICT + ": distinct runs",
    "versioned-api/runcommand-helper-no-api-version-declared.json/"
    "runCommand does not inspect or change the command document":
        "apiVersion 'server_will_never_support_this_api_version' accepted; mongod refuses "
        "an unknown API version (APIVersionError 322)",
    "versioned-api/runcommand-helper-no-api-version-declared.json/"
    "runCommand does not prevent sending invalid API version declarations":
        "apiStrict without apiVersion accepted; mongod refuses it (4886600 'Provided "
        "apiStrict without passing apiVersion')",
    "versioned-api/test-commands-strict-mode.json":
        "test command testVersion2 missing (CommandNotFound): mongod's answer under apiStrict "
        "is APIStrictError 'command testVersion2 is not in API Version 1'",

    # read-write-concern
    "read-write-concern/default-write-concern-3.4.json/MapReduce omits default write concern":
        "mapReduce not implemented (JavaScript map/reduce): CommandNotFound 59",

    # sessions
    "sessions/snapshot-sessions-not-supported-server-error.json": SNAPSHOT,
}
