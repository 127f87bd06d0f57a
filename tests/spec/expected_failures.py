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
TIMESERIES = "time-series collections (create timeseries, expireAfterSeconds) not supported"

EXPECTED_FAILURES: dict[str, str] = {
    # collection-management
    "collection-management/timeseries-collection.json": TIMESERIES,

    # read-write-concern
    "read-write-concern/default-write-concern-3.4.json/MapReduce omits default write concern":
        "mapReduce not implemented (JavaScript map/reduce): CommandNotFound 59",

    # retryable-writes (a one-member replica set)
    **{f"retryable-writes/bulkWrite.json/{which} is never committed":
       "runner: onPrimaryTransactionalWrite closes the connection on both attempts "
       "(closeConnection defaults to true, as in mongod), so the driver's error is a "
       "network error with no partial result to match"
       for which in ("First insertOne", "Second updateOne", "Third updateOne")},

    # index-management's Atlas Search tests, which need a replica set: mongod
    # 7.0 community answers them as this server does (59 CommandNotFound for
    # the *SearchIndex* commands, 40324 for $listSearchIndexes); the tests
    # expect the message naming Atlas that 7.0 enterprise and 8.0 give
    **{f"index-management/{name}.json":
       "mongod 7.0 community has no search index commands (59, and 40324 for "
       "$listSearchIndexes), as here; the test expects the error naming Atlas of "
       "7.0 enterprise and 8.0"
       for name in ("dropSearchIndex", "listSearchIndexes", "searchIndexIgnoresReadWriteConcern",
                    "updateSearchIndex")},

    # transactions (a one-member replica set)
    **{f"transactions/{name}":
       "driver: pymongo selects a secondary for the read before it checks that a "
       "transaction reads from the primary; a set of one has no secondary, so server "
       "selection times out instead of the expected client-side error"
       for name in ("read-pref.json/secondary readPreference",
                    "run-command.json/run command fails with explicit secondary read preference",
                    "run-command.json/run command fails with secondary read preference from "
                    "transaction options",
                    "transaction-options.json/readPreference inherited from client",
                    "transaction-options.json/readPreference inherited from "
                    "defaultTransactionOptions",
                    "transaction-options.json/startTransaction overrides readPreference")},
}
