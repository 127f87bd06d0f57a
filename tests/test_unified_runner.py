"""The unified-format runner checks what it claims to: hand-written documents
that must pass, and ones that must fail (a wrong result, a missing or extra
event, a wrong error), so a spec test passing through it means something."""
from __future__ import annotations

import copy

import pytest
from bson import Decimal128, Int64, ObjectId
from pymongo.errors import OperationFailure

from unified import MatchError, Skipped, SpecFailure, UnifiedRunner, Unsupported, match
from unified.matcher import MISSING, exact_equal

# -- the matcher alone -------------------------------------------------------


def ok(expected, actual, **kw):
    match(expected, actual, **kw)


def bad(expected, actual, **kw):
    with pytest.raises(MatchError):
        match(expected, actual, **kw)


def test_root_documents_may_have_extra_fields_nested_ones_may_not():
    ok({"x": 1}, {"x": 1, "y": 2}, root=True)
    bad({"x": 1}, {"x": 1, "y": 2})
    bad({"a": {"x": 1}}, {"a": {"x": 1, "y": 2}}, root=True)
    bad({"x": 1, "y": 1}, {"x": 1}, root=True)
    ok({"x": 1, "y": 2}, {"y": 2, "x": 1})  # key order never matters


def test_numbers_are_flexible_but_not_bool_or_decimal():
    ok(1, 1.0)
    ok(Int64(5), 5)
    ok({"n": 1}, {"n": Int64(1)})
    bad(1, 1.5)
    bad(1, True)
    bad(True, 1)
    bad(1, Decimal128("1"))
    bad("1", 1)
    bad(None, 0)


def test_arrays_same_length_element_wise():
    ok([1, {"a": 1}], [1.0, {"a": 1}])
    bad([1, 2], [1, 2, 3])
    bad([1, 2], [2, 1])
    bad([{"a": 1}], [{"a": 1, "b": 2}])            # distinct-style: nested
    ok([{"a": 1}], [{"a": 1, "b": 2}], root=True)   # find-style: root elements


def test_exists_type_unset_or_matches():
    ok({"a": {"$$exists": True}}, {"a": None})
    bad({"a": {"$$exists": True}}, {})
    ok({"a": {"$$exists": False}}, {"b": 1}, root=True)
    bad({"a": {"$$exists": False}}, {"a": 1})
    ok({"a": {"$$type": "objectId"}}, {"a": ObjectId()})
    ok({"a": {"$$type": ["int", "long"]}}, {"a": Int64(3)})
    ok({"a": {"$$type": "number"}}, {"a": 2.5})
    bad({"a": {"$$type": "int"}}, {"a": 2.5})
    bad({"a": {"$$type": "string"}}, {})
    ok({"a": {"$$unsetOrMatches": 2}}, {})
    ok({"a": {"$$unsetOrMatches": 2}}, {"a": 2})
    bad({"a": {"$$unsetOrMatches": 2}}, {"a": 3})
    ok({"$$unsetOrMatches": {"insertedId": 1}}, MISSING)
    ok({"$$unsetOrMatches": {"insertedId": 1}}, {"insertedId": 1, "acknowledged": True},
       root=True)
    bad({"$$unsetOrMatches": {"insertedId": 1}}, {"insertedId": 2}, root=True)


def test_lte_entities_and_lsids():
    ok({"$$lte": 5}, 5.0)
    ok({"$$lte": 5}, 0)
    bad({"$$lte": 5}, 6)
    entities = {"id0": 7}.__getitem__
    ok({"_id": {"$$matchesEntity": "id0"}}, {"_id": 7}, entity=entities)
    bad({"_id": {"$$matchesEntity": "id0"}}, {"_id": 8}, entity=entities)
    lsid = {"id": b"0123456789abcdef"}
    ok({"lsid": {"$$sessionLsid": "s"}}, {"lsid": lsid}, session_lsid={"s": lsid}.__getitem__)
    bad({"lsid": {"$$sessionLsid": "s"}}, {"lsid": {"id": b"x"}},
        session_lsid={"s": lsid}.__getitem__)


def test_exact_equal_for_outcomes():
    assert exact_equal({"_id": 1, "x": {"a": 1, "b": 2}}, {"x": {"b": 2, "a": 1}, "_id": 1})
    assert exact_equal({"x": 1}, {"x": Int64(1)})          # relaxed JSON cannot say int64
    assert not exact_equal({"x": 1}, {"x": 1.0})           # but int and double differ
    assert not exact_equal({"x": 1}, {"x": True})
    assert not exact_equal({"x": 1}, {"x": 1, "y": 2})
    assert not exact_equal([1, 2], [2, 1])


# -- the runner against a server -------------------------------------------

BASE = {
    "description": "runner self-test",
    "schemaVersion": "1.0",
    "createEntities": [
        {"client": {"id": "client0", "observeEvents": ["commandStartedEvent"]}},
        {"database": {"id": "db0", "client": "client0", "databaseName": "selftest"}},
        {"collection": {"id": "coll0", "database": "db0", "collectionName": "c"}},
    ],
    "initialData": [{"collectionName": "c", "databaseName": "selftest",
                     "documents": [{"_id": 1, "x": 11}]}],
}


def spec_with(test: dict, **top) -> dict:
    spec = copy.deepcopy(BASE)
    spec.update(top)
    spec["tests"] = [dict({"description": "t"}, **test)]
    return spec


def run(server, test: dict, **top):
    UnifiedRunner(server.uri).run(spec_with(test, **top), "t")


INSERT = {"object": "coll0", "name": "insertOne", "arguments": {"document": {"_id": 2, "x": 22}}}
COUNT = {"object": "coll0", "name": "estimatedDocumentCount", "arguments": {}}
INSERT_EVENT = {"commandStartedEvent": {
    "command": {"insert": "c", "documents": [{"_id": 2, "x": 22}]},
    "commandName": "insert", "databaseName": "selftest"}}
COUNT_EVENT = {"commandStartedEvent": {"command": {"count": "c"}, "commandName": "count"}}


def test_a_correct_document_passes(server):
    run(server, {
        "operations": [
            dict(INSERT, expectResult={"$$unsetOrMatches": {"insertedId": {"$$unsetOrMatches": 2}}}),
            dict(COUNT, expectResult=2),
        ],
        "expectEvents": [{"client": "client0", "events": [INSERT_EVENT, COUNT_EVENT]}],
    })


def test_a_wrong_result_fails(server):
    with pytest.raises(SpecFailure, match=r"estimatedDocumentCount result.*expected int 3"):
        run(server, {"operations": [INSERT, dict(COUNT, expectResult=3)]})
    with pytest.raises(SpecFailure, match="insertedId"):
        run(server, {"operations": [dict(INSERT, expectResult={"insertedId": 3})]})


def test_a_missing_event_fails(server):
    with pytest.raises(SpecFailure, match=r"expected 2 command event\(s\).*observed 1"):
        run(server, {"operations": [INSERT],
                     "expectEvents": [{"client": "client0", "events": [INSERT_EVENT, COUNT_EVENT]}]})


def test_an_extra_event_fails_unless_ignored(server):
    test = {"operations": [INSERT, COUNT],
            "expectEvents": [{"client": "client0", "events": [INSERT_EVENT]}]}
    with pytest.raises(SpecFailure, match=r"expected 1 command event\(s\).*observed 2"):
        run(server, test)
    test["expectEvents"][0]["ignoreExtraEvents"] = True
    run(server, test)


def test_a_wrong_event_fails(server):
    wrong_doc = copy.deepcopy(INSERT_EVENT)
    wrong_doc["commandStartedEvent"]["command"]["documents"] = [{"_id": 2, "x": 23}]
    with pytest.raises(SpecFailure, match=r"documents\[0\]\.x"):
        run(server, {"operations": [INSERT],
                     "expectEvents": [{"client": "client0", "events": [wrong_doc]}]})
    wrong_db = copy.deepcopy(INSERT_EVENT)
    wrong_db["commandStartedEvent"]["databaseName"] = "other"
    with pytest.raises(SpecFailure, match="databaseName"):
        run(server, {"operations": [INSERT],
                     "expectEvents": [{"client": "client0", "events": [wrong_db]}]})
    # An event type the client does not observe is never recorded.
    succeeded = {"commandSucceededEvent": {"commandName": "insert"}}
    with pytest.raises(SpecFailure):
        run(server, {"operations": [INSERT],
                     "expectEvents": [{"client": "client0", "events": [succeeded]}]})


def test_ignored_commands_are_not_observed(server):
    spec = spec_with({"operations": [INSERT, COUNT],
                      "expectEvents": [{"client": "client0", "events": [COUNT_EVENT]}]})
    spec["createEntities"][0]["client"]["ignoreCommandMonitoringEvents"] = ["insert"]
    UnifiedRunner(server.uri).run(spec, "t")


DUP = {"object": "coll0", "name": "insertOne", "arguments": {"document": {"_id": 1}}}


def test_expected_errors_are_checked(server):
    run(server, {"operations": [dict(DUP, expectError={
        "isClientError": False, "errorCode": 11000, "errorCodeName": "DuplicateKey",
        "errorContains": "duplicate key"})]})
    for wrong in ({"isClientError": True}, {"errorCode": 11001},
                  {"errorCodeName": "BadValue"}, {"errorContains": "no such text"},
                  {"errorLabelsContain": ["RetryableWriteError"]}):
        with pytest.raises(SpecFailure):
            run(server, {"operations": [dict(DUP, expectError=wrong)]})
    with pytest.raises(SpecFailure, match="expected an error"):
        run(server, {"operations": [dict(INSERT, expectError={"isError": True})]})
    with pytest.raises(SpecFailure, match="raised"):  # an unexpected error fails
        run(server, {"operations": [DUP]})


def test_bulk_write_partial_result_in_an_error(server):
    bulk = {"object": "coll0", "name": "bulkWrite", "arguments": {
        "requests": [{"insertOne": {"document": {"_id": 3}}},
                     {"insertOne": {"document": {"_id": 1}}}], "ordered": True}}
    partial = {"$$unsetOrMatches": {"insertedCount": 1, "deletedCount": 0, "matchedCount": 0,
                                    "modifiedCount": 0, "upsertedCount": 0, "upsertedIds": {}}}
    run(server, {"operations": [dict(bulk, expectError={"expectResult": partial,
                                                         "errorCodeName": "DuplicateKey"})]})
    partial["$$unsetOrMatches"]["insertedCount"] = 2
    with pytest.raises(SpecFailure, match="insertedCount"):
        run(server, {"operations": [dict(bulk, expectError={"expectResult": partial})]})


def test_requirements_skip_with_a_reason(server):
    with pytest.raises(Skipped, match=r"needs server >= 99"):
        run(server, {"operations": []}, runOnRequirements=[{"minServerVersion": "99"}])
    with pytest.raises(Skipped, match="topology"):
        run(server, {"operations": [], "runOnRequirements": [{"topologies": ["replicaset"]}]})
    with pytest.raises(Skipped, match="authentication"):
        run(server, {"operations": []}, runOnRequirements=[{"auth": True}])
    run(server, {"operations": []}, runOnRequirements=[
        {"minServerVersion": "4.0", "maxServerVersion": "7.0.99", "topologies": ["single"],
         "serverless": "forbid", "auth": False}])


def test_unsupported_things_say_what(server):
    with pytest.raises(Unsupported, match="watch"):
        run(server, {"operations": [{"object": "coll0", "name": "watch", "arguments": {}}]})
    with pytest.raises(Unsupported, match="noSuchArgument"):
        run(server, {"operations": [dict(COUNT, arguments={"noSuchArgument": 1})]})
    with pytest.raises(ValueError, match="schemaVersion"):
        run(server, {"operations": []}, schemaVersion="2.0")


def test_an_outcome_is_compared(server, client):
    try:
        client.selftest.probe.find_one({}, sort=[("_id", 1)])
    except OperationFailure as exc:
        pytest.skip(f"the server cannot sort yet ({exc}); exact_equal is tested above")
    outcome = [{"collectionName": "c", "databaseName": "selftest",
                "documents": [{"_id": 1, "x": 11}, {"_id": 2, "x": 22}]}]
    run(server, {"operations": [INSERT], "outcome": outcome})
    outcome[0]["documents"][1]["x"] = 22.0  # same value, another type
    with pytest.raises(SpecFailure, match="outcome"):
        run(server, {"operations": [INSERT], "outcome": outcome})
    with pytest.raises(SpecFailure, match="outcome"):
        run(server, {"operations": [], "outcome": outcome})


def test_schema_versions_up_to_1_28(server):
    run(server, {"operations": []}, schemaVersion="1.28")
    run(server, {"operations": []}, schemaVersion="1.4.1")
    for newer in ("1.29", "2.0", "0.9"):
        with pytest.raises(ValueError, match="schemaVersion"):
            run(server, {"operations": []}, schemaVersion=newer)


BUCKET = [{"bucket": {"id": "bucket0", "database": "db0"}},
          {"collection": {"id": "files", "database": "db0", "collectionName": "fs.files"}}]
UPLOAD = {"object": "bucket0", "name": "upload",
          "arguments": {"filename": "f", "source": {"$$hexBytes": "1122334455"},
                        "chunkSizeBytes": 2},
          "expectResult": {"$$type": "objectId"}, "saveResultAsEntity": "fid"}


def bucket_run(server, operations):
    spec = spec_with({"operations": operations})
    spec["createEntities"] += BUCKET
    UnifiedRunner(server.uri).run(spec, "t")


def test_a_bucket_uploads_and_downloads(server):
    files = {"object": "files", "name": "find", "arguments": {"filter": {}}, "expectResult": [
        {"_id": {"$$matchesEntity": "fid"}, "length": 5, "chunkSize": 2, "filename": "f",
         "uploadDate": {"$$type": "date"}}]}
    by_name = {"object": "bucket0", "name": "downloadByName", "arguments": {"filename": "f"},
               "expectResult": {"$$matchesHexBytes": "1122334455"}}
    bucket_run(server, [UPLOAD, files, by_name])
    with pytest.raises(SpecFailure, match="matchesHexBytes"):
        bucket_run(server, [UPLOAD, dict(by_name, expectResult={"$$matchesHexBytes": "11"})])
    # A missing file is a client-side error (pymongo's NoFile).
    missing = {"object": "bucket0", "name": "downloadByName", "arguments": {"filename": "nope"}}
    bucket_run(server, [dict(missing, expectError={"isClientError": True})])
    with pytest.raises(SpecFailure, match="client-side"):
        bucket_run(server, [dict(missing, expectError={"isClientError": False})])


def test_connection_pool_events(server):
    spec = spec_with({"operations": [
        COUNT,
        {"object": "testRunner", "name": "assertNumberConnectionsCheckedOut",
         "arguments": {"client": "client0", "connections": 0}}],
        "expectEvents": [{"client": "client0", "eventType": "cmap", "events": [
            {"connectionReadyEvent": {}}, {"connectionCheckedOutEvent": {}},
            {"connectionCheckedInEvent": {}}]}]})
    spec["createEntities"][0]["client"]["observeEvents"] = [
        "connectionReadyEvent", "connectionCheckedOutEvent", "connectionCheckedInEvent"]
    UnifiedRunner(server.uri).run(spec, "t")
    wrong = copy.deepcopy(spec)
    events = wrong["tests"][0]["expectEvents"][0]["events"]
    events[1], events[2] = events[2], events[1]
    with pytest.raises(SpecFailure, match="connectionCheckedInEvent"):
        UnifiedRunner(server.uri).run(wrong, "t")
    wrong = copy.deepcopy(spec)
    wrong["tests"][0]["operations"][1]["arguments"]["connections"] = 1
    with pytest.raises(SpecFailure, match="0 connection"):
        UnifiedRunner(server.uri).run(wrong, "t")


def test_session_dirtiness_is_asserted(server):
    sessions = [{"session": {"id": "s0", "client": "client0"}}]
    insert = dict(INSERT, arguments={"document": {"_id": 2}, "session": "s0"})
    not_dirty = {"object": "testRunner", "name": "assertSessionNotDirty",
                 "arguments": {"session": "s0"}}
    spec = spec_with({"operations": [insert, not_dirty]})
    spec["createEntities"] += sessions
    UnifiedRunner(server.uri).run(spec, "t")
    spec["tests"][0]["operations"][1]["name"] = "assertSessionDirty"
    with pytest.raises(SpecFailure, match="not dirty"):
        UnifiedRunner(server.uri).run(spec, "t")


def test_map_reduce_sends_the_command(server):
    map_reduce = {"object": "coll0", "name": "mapReduce", "ignoreResultAndError": True,
                  "arguments": {"map": {"$code": "function() { emit(1, 1) }"},
                                "reduce": {"$code": "function(k, v) { return 1 }"},
                                "out": {"inline": 1}}}
    event = {"commandStartedEvent": {"commandName": "mapReduce", "command": {
        "mapReduce": "c", "out": {"inline": 1}, "map": {"$code": "function() { emit(1, 1) }"},
        "writeConcern": {"$$exists": False}}}}
    run(server, {"operations": [map_reduce],
                 "expectEvents": [{"client": "client0", "events": [event]}]})


def test_a_refused_fail_point_is_a_spec_failure(server):
    fail_point = {"object": "testRunner", "name": "failPoint", "arguments": {
        "client": "client0",
        "failPoint": {"configureFailPoint": "noSuchFailPoint", "mode": "alwaysOn"}}}
    with pytest.raises(SpecFailure, match="refused configureFailPoint"):
        run(server, {"operations": [fail_point]})
