"""$out, $merge, $collStats and $indexStats against an in-process server.

Expected documents, codes and messages are mongod 7.0's (document_source_out.cpp,
document_source_merge.cpp and its merge strategies, document_source_coll_stats.cpp,
the manual's examples).
"""
from __future__ import annotations

import datetime

import pytest
from bson.int64 import Int64
from pymongo.errors import OperationFailure


@pytest.fixture
def db(client):
    return client.test


def agg(db, coll, pipeline, **kw):
    return db.command("aggregate", coll, pipeline=pipeline, cursor={}, **kw)


def fails(db, coll, pipeline, code, **kw):
    with pytest.raises(OperationFailure) as ei:
        agg(db, coll, pipeline, **kw)
    assert ei.value.code == code, ei.value.details
    return ei.value


def docs(coll):
    return list(coll.find().sort("_id", 1))


# ------------------------------------------------------------------ $out


def test_out_string_returns_empty_closed_cursor(db):
    db.src.insert_many([{"_id": 1, "x": 11}, {"_id": 2, "x": 22}, {"_id": 3, "x": 33}])
    r = agg(db, "src", [{"$sort": {"x": 1}}, {"$match": {"_id": {"$gt": 1}}}, {"$out": "dst"}])
    assert r["cursor"] == {"firstBatch": [], "id": Int64(0), "ns": "test.src"}
    assert docs(db.dst) == [{"_id": 2, "x": 22}, {"_id": 3, "x": 33}]


def test_out_batch_size_zero_still_writes(db):
    db.src.insert_many([{"_id": 1}, {"_id": 2}])
    r = db.command("aggregate", "src", pipeline=[{"$out": "dst"}], cursor={"batchSize": 0})
    assert r["cursor"]["id"] == 0 and r["cursor"]["firstBatch"] == []
    assert docs(db.dst) == [{"_id": 1}, {"_id": 2}]


def test_out_db_coll_form_other_database(client, db):
    db.src.insert_one({"_id": 1, "a": 1})
    agg(db, "src", [{"$out": {"db": "other", "coll": "res"}}])
    assert docs(client.other.res) == [{"_id": 1, "a": 1}]
    assert "res" not in db.list_collection_names()


def test_out_replaces_existing_contents(db):
    db.dst.insert_many([{"_id": 100}, {"_id": 101}])
    db.src.insert_one({"_id": 1})
    agg(db, "src", [{"$out": "dst"}])
    assert docs(db.dst) == [{"_id": 1}]


def test_out_keeps_target_indexes(db):
    db.dst.insert_one({"_id": 0, "a": -1})
    db.dst.create_index("a", unique=True)
    db.dst.create_index([("b", 1), ("c", -1)], name="bc", sparse=True)
    before = list(db.dst.list_indexes())
    db.src.insert_many([{"_id": 1, "a": 1, "b": 1}, {"_id": 2, "a": 2}])
    agg(db, "src", [{"$out": "dst"}])
    assert list(db.dst.list_indexes()) == before
    assert docs(db.dst) == [{"_id": 1, "a": 1, "b": 1}, {"_id": 2, "a": 2}]
    # the copied unique index is enforced on the new collection
    with pytest.raises(Exception):
        db.dst.insert_one({"_id": 3, "a": 1})


def test_out_unique_violation_is_duplicate_key_and_target_untouched(db):
    db.dst.insert_one({"_id": 0, "a": 0})
    db.dst.create_index("a", unique=True)
    db.src.insert_many([{"_id": 1, "a": 5}, {"_id": 2, "a": 5}])
    e = fails(db, "src", [{"$out": "dst"}], 11000)
    d = e.details
    assert d["codeName"] == "DuplicateKey"
    assert d["keyPattern"] == {"a": 1} and d["keyValue"] == {"a": 5}
    assert "E11000 duplicate key error collection: test.tmp.agg_out." in d["errmsg"]
    assert d["errmsg"].endswith("index: a_1 dup key: { a: 5 }")
    assert docs(db.dst) == [{"_id": 0, "a": 0}]
    assert sorted(db.list_collection_names()) == ["dst", "src"]


def test_out_duplicate_id_from_pipeline(db):
    db.src.insert_many([{"_id": 1, "g": 1}, {"_id": 2, "g": 1}])
    e = fails(db, "src", [{"$project": {"_id": "$g"}}, {"$out": "dst"}], 11000)
    assert e.details["keyPattern"] == {"_id": 1}
    assert "dst" not in db.list_collection_names()


def test_out_empty_input_empties_target(db):
    db.dst.insert_one({"_id": 1})
    db.src.insert_one({"_id": 5})
    agg(db, "src", [{"$match": {"_id": 0}}, {"$out": "dst"}])
    assert "dst" in db.list_collection_names()
    assert docs(db.dst) == []


def test_out_generates_missing_ids(db):
    db.src.insert_many([{"_id": 1, "v": 1}, {"_id": 2, "v": 2}])
    agg(db, "src", [{"$project": {"_id": 0, "v": 1}}, {"$out": "dst"}])
    got = list(db.dst.find().sort("v", 1))
    assert [d["v"] for d in got] == [1, 2]
    assert all(list(d)[0] == "_id" and d["_id"] is not None for d in got)


def test_out_into_the_source_collection(db):
    db.src.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 2}])
    agg(db, "src", [{"$set": {"x": {"$multiply": ["$x", 10]}}}, {"$out": "src"}])
    assert docs(db.src) == [{"_id": 1, "x": 10}, {"_id": 2, "x": 20}]


def test_out_from_documents_on_database(db):
    r = db.command("aggregate", 1, pipeline=[{"$documents": [{"_id": 1}, {"_id": 2}]},
                                             {"$out": "dst"}], cursor={})
    assert r["cursor"] == {"firstBatch": [], "id": 0, "ns": "test.$cmd.aggregate"}
    assert docs(db.dst) == [{"_id": 1}, {"_id": 2}]


@pytest.mark.parametrize("spec,code,msg", [
    ("system.foo", 17385, "Can't $out to special collection: system.foo"),
    ({"db": "admin", "coll": "x"}, 31321, "Can't $out to internal database: admin"),
    ({"db": "local", "coll": "x"}, 31321, "Can't $out to internal database: local"),
    ("", 73, "Invalid $out target namespace, test."),
    ({"db": "a.b", "coll": "x"}, 73, "Invalid $out target namespace, a.b.x"),
    (1, 16990, "$out only supports a string or object argument, but found int"),
    ([], 16990, "$out only supports a string or object argument, but found array"),
    ({"db": "test"}, 40414, "BSON field '$out.coll' is missing but a required field"),
    ({"coll": "x"}, 40414, "BSON field '$out.db' is missing but a required field"),
    ({"db": "test", "coll": "x", "z": 1}, 40415, "BSON field '$out.z' is an unknown field."),
    ({"db": 1, "coll": "x"}, 14,
     "BSON field '$out.db' is the wrong type 'int', expected type 'string'"),
])
def test_out_spec_errors(db, spec, code, msg):
    db.src.insert_one({"_id": 1})
    e = fails(db, "src", [{"$out": spec}], code)
    assert e.details["errmsg"] == msg


@pytest.mark.parametrize("stage", [{"$out": "dst"}, {"$merge": {"into": "dst"}}])
def test_write_stage_must_be_last(db, stage):
    name = next(iter(stage))
    e = fails(db, "src", [stage, {"$match": {}}], 40601)
    assert e.details["errmsg"] == f"{name} can only be the final stage in the pipeline"
    assert "dst" not in db.list_collection_names()


def test_out_explain_query_planner_writes_nothing(db):
    db.src.insert_one({"_id": 1})
    r = db.command("aggregate", "src", pipeline=[{"$match": {"_id": 1}}, {"$out": "dst"}],
                   explain=True)
    assert r["stages"][-1] == {"$out": {"db": "test", "coll": "dst"}}
    assert "dst" not in db.list_collection_names()


@pytest.mark.parametrize("stage", [{"$out": "dst"}, {"$merge": "dst"}])
def test_write_stage_execution_explain_refused(db, stage):
    db.src.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as ei:
        db.command("explain", {"aggregate": "src", "pipeline": [stage], "cursor": {}},
                   verbosity="executionStats")
    assert ei.value.code == 51029
    assert "dst" not in db.list_collection_names()


def test_explain_with_write_concern_refused(db):
    db.src.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as ei:
        db.command("aggregate", "src", pipeline=[{"$out": "dst"}], explain=True,
                   writeConcern={"w": 1})
    assert ei.value.code == 9
    assert ei.value.details["errmsg"] == \
        "Aggregation explain does not support the'writeConcern' option"


@pytest.mark.parametrize("wc", [{"w": 1}, {"w": "majority"}, {"w": 1, "j": True}, {}])
def test_write_concern_accepted(db, wc):
    db.src.insert_one({"_id": 1})
    agg(db, "src", [{"$out": "dst"}], writeConcern=wc)
    assert docs(db.dst) == [{"_id": 1}]
    agg(db, "src", [{"$match": {}}], writeConcern=wc)  # read-only accepts it too


def test_write_concern_checked(db):
    db.src.insert_one({"_id": 1})
    e = fails(db, "src", [{"$out": "dst"}], 2, writeConcern={"w": 2})
    assert "not replicated" in e.details["errmsg"]


def test_bypass_document_validation_accepted(db):
    db.src.insert_one({"_id": 1})
    agg(db, "src", [{"$out": "dst"}], bypassDocumentValidation=False)
    agg(db, "src", [{"$merge": "dst2"}], bypassDocumentValidation=True)
    assert docs(db.dst) == docs(db.dst2) == [{"_id": 1}]


# ---------------------------------------------------------------- $merge

TARGET = [{"_id": 1, "a": 1, "b": 1}, {"_id": 2, "a": 2, "b": 2}]
SOURCE = [{"_id": 1, "a": 10, "c": 10}, {"_id": 3, "a": 30, "c": 30}]
PIPE = [{"$set": {"m": "$$new.a"}}]

# (whenMatched, whenNotMatched) -> (error code or None, target afterwards)
MODES = {
    ("replace", "insert"): (None, [SOURCE[0], TARGET[1], SOURCE[1]]),
    ("replace", "discard"): (None, [SOURCE[0], TARGET[1]]),
    ("replace", "fail"): (13113, [SOURCE[0], TARGET[1]]),
    ("merge", "insert"): (None, [{"_id": 1, "a": 10, "b": 1, "c": 10}, TARGET[1], SOURCE[1]]),
    ("merge", "discard"): (None, [{"_id": 1, "a": 10, "b": 1, "c": 10}, TARGET[1]]),
    ("merge", "fail"): (13113, [{"_id": 1, "a": 10, "b": 1, "c": 10}, TARGET[1]]),
    ("keepExisting", "insert"): (None, [TARGET[0], TARGET[1], SOURCE[1]]),
    ("keepExisting", "discard"): (51181, TARGET),
    ("keepExisting", "fail"): (51181, TARGET),
    ("fail", "insert"): (11000, [TARGET[0], TARGET[1], SOURCE[1]]),
    ("fail", "discard"): (51181, TARGET),
    ("fail", "fail"): (51181, TARGET),
    ("pipeline", "insert"): (None, [{"_id": 1, "a": 1, "b": 1, "m": 10}, TARGET[1], SOURCE[1]]),
    ("pipeline", "discard"): (None, [{"_id": 1, "a": 1, "b": 1, "m": 10}, TARGET[1]]),
    ("pipeline", "fail"): (13113, [{"_id": 1, "a": 1, "b": 1, "m": 10}, TARGET[1]]),
}


@pytest.mark.parametrize("wm,wnm", list(MODES))
def test_merge_modes(db, wm, wnm):
    db.tgt.insert_many(TARGET)
    db.src.insert_many(SOURCE)
    code, after = MODES[(wm, wnm)]
    spec = {"into": "tgt", "whenMatched": PIPE if wm == "pipeline" else wm,
            "whenNotMatched": wnm}
    if code is None:
        r = agg(db, "src", [{"$merge": spec}])
        assert r["cursor"] == {"firstBatch": [], "id": 0, "ns": "test.src"}
    else:
        e = fails(db, "src", [{"$merge": spec}], code)
        if code == 51181:
            assert e.details["errmsg"] == (
                f"Combination of $merge modes 'whenMatched: {wm}' and 'whenNotMatched: {wnm}' "
                "is not supported")
        if code == 13113:
            assert e.details["codeName"] == "MergeStageNoMatchingDocument"
            assert e.details["errmsg"].endswith(
                "$merge could not find a matching document in the target collection for at "
                "least one document in the source collection")
    assert docs(db.tgt) == after


def test_merge_defaults_are_merge_and_insert(db):
    db.tgt.insert_many(TARGET)
    db.src.insert_many(SOURCE)
    agg(db, "src", [{"$merge": "tgt"}])
    assert docs(db.tgt) == MODES[("merge", "insert")][1]


def test_merge_fail_duplicate_key_response(db):
    db.tgt.insert_many(TARGET)
    db.src.insert_many(SOURCE)
    e = fails(db, "src", [{"$merge": {"into": "tgt", "whenMatched": "fail"}}], 11000)
    d = e.details
    assert d["keyPattern"] == {"_id": 1} and d["keyValue"] == {"_id": 1}
    assert ("$merge with whenMatched: fail found an existing document with the same values for "
            "the 'on' fields :: caused by :: E11000 duplicate key error collection: test.tgt "
            "index: _id_ dup key: { _id: 1 }") in d["errmsg"]


def test_merge_documents_duplicate_key_on_database(db):
    db.test.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 1}])
    with pytest.raises(OperationFailure) as ei:
        db.command("aggregate", 1, pipeline=[{"$documents": [{"_id": 2, "x": 1}]},
                                             {"$merge": {"into": "test", "whenMatched": "fail"}}],
                   cursor={})
    assert ei.value.code == 11000
    assert ei.value.details["keyPattern"] == {"_id": 1}
    assert ei.value.details["keyValue"] == {"_id": 2}


def test_merge_other_unique_index_duplicate(db):
    db.tgt.insert_one({"_id": 1, "u": 5})
    db.tgt.create_index("u", unique=True)
    db.src.insert_one({"_id": 2, "u": 5})
    e = fails(db, "src", [{"$merge": "tgt"}], 11000)
    assert "$merge failed due to a DuplicateKey error :: caused by :: E11000" in \
        e.details["errmsg"]
    assert e.details["keyPattern"] == {"u": 1}


def test_merge_creates_target_and_inserts_sorted_upsert_fields(db):
    db.src.insert_one({"_id": 1, "z": 1, "b": 2})
    agg(db, "src", [{"$merge": "tgt"}])
    # an upsert of {$set: doc}: the equality's _id, then the new fields in name order
    got = db.tgt.find_one()
    assert list(got) == ["_id", "b", "z"]


def test_merge_discard_creates_nothing(db):
    db.src.insert_one({"_id": 1})
    agg(db, "src", [{"$merge": {"into": "tgt", "whenNotMatched": "discard"}}])
    assert "tgt" not in db.list_collection_names()


def test_merge_on_unique_field(db):
    db.tgt.insert_many([{"_id": 1, "k": "a", "v": 1}, {"_id": 2, "k": "b", "v": 2}])
    db.tgt.create_index("k", unique=True)
    db.src.insert_many([{"k": "a", "v": 10}, {"k": "c", "v": 30}])
    agg(db, "src", [{"$project": {"_id": 0}}, {"$merge": {"into": "tgt", "on": "k"}}])
    got = list(db.tgt.find({}, {"_id": 0}).sort("k", 1))
    assert got == [{"k": "a", "v": 10}, {"k": "b", "v": 2}, {"k": "c", "v": 30}]
    assert db.tgt.find_one({"k": "a"})["_id"] == 1


def test_merge_on_compound_fields_any_order(db):
    db.tgt.create_index([("b", 1), ("a", -1)], unique=True)
    db.tgt.insert_one({"_id": 1, "a": 1, "b": 1, "v": 0})
    db.src.insert_many([{"_id": 9, "a": 1, "b": 1, "v": 1}])
    agg(db, "src", [{"$project": {"_id": 0}},
                    {"$merge": {"into": "tgt", "on": ["a", "b"], "whenMatched": "replace"}}])
    assert docs(db.tgt) == [{"_id": 1, "a": 1, "b": 1, "v": 1}]


def test_merge_replace_changing_id_is_immutable_field(db):
    db.tgt.create_index("k", unique=True)
    db.tgt.insert_one({"_id": 1, "k": 1})
    db.src.insert_one({"_id": 2, "k": 1})
    e = fails(db, "src", [{"$merge": {"into": "tgt", "on": "k", "whenMatched": "replace"}}], 66)
    assert ("$merge failed to update the matching document, did you attempt to modify the _id "
            "or the shard key? :: caused by :: ") in e.details["errmsg"]
    assert docs(db.tgt) == [{"_id": 1, "k": 1}]


@pytest.mark.parametrize("setup,on", [
    (None, "k"),                                        # no collection: only _id
    ("plain", "k"),                                     # not unique
    ("partial", "k"),                                   # partial unique
    ("compound", "k"),                                  # not exactly the fields
    ("unique", ["k", "j"]),
])
def test_merge_on_needs_unique_index(db, setup, on):
    if setup == "plain":
        db.tgt.create_index("k")
    elif setup == "partial":
        db.tgt.create_index("k", unique=True, partialFilterExpression={"k": {"$gt": 0}})
    elif setup == "compound":
        db.tgt.create_index([("k", 1), ("j", 1)], unique=True)
    elif setup == "unique":
        db.tgt.create_index("k", unique=True)
    db.src.insert_one({"_id": 1, "k": 1})
    e = fails(db, "src", [{"$merge": {"into": "tgt", "on": on}}], 51183)
    assert e.details["errmsg"] == "Cannot find index to verify that join fields will be unique"


def test_merge_explicit_id_on_missing_collection(db):
    db.src.insert_one({"_id": 1})
    agg(db, "src", [{"$merge": {"into": "tgt", "on": "_id"}}])
    assert docs(db.tgt) == [{"_id": 1}]


def test_merge_generates_id_when_on_id_and_missing(db):
    db.src.insert_many([{"_id": 1, "v": 1}])
    agg(db, "src", [{"$project": {"_id": 0, "v": 1}}, {"$merge": "tgt"}])
    got = db.tgt.find_one()
    assert got["v"] == 1 and list(got)[0] == "_id" and got["_id"] != 1


@pytest.mark.parametrize("doc,code,msg", [
    ({"_id": 1}, 51132,
     "$merge write error: 'on' field 'k' cannot be missing, null, undefined or an array"),
    ({"_id": 1, "k": None}, 51132,
     "$merge write error: 'on' field 'k' cannot be missing, null, undefined or an array"),
    ({"_id": 1, "k": [1]}, 51185, "$merge write error: 'on' field 'k' is an array"),
])
def test_merge_on_value_errors(db, doc, code, msg):
    db.tgt.create_index("k", unique=True)
    db.src.insert_many([{"_id": 0, "k": 0}, doc])
    e = fails(db, "src", [{"$sort": {"_id": 1}}, {"$merge": {"into": "tgt", "on": "k"}}], code)
    assert e.details["errmsg"].endswith(msg)
    # the batch is never written: the bad document stops it first
    assert docs(db.tgt) == []


@pytest.mark.parametrize("spec,code,msg", [
    ({"into": "t", "on": 1}, 51186,
     "$merge 'on' field  must be either a string or an array of strings, but found int"),
    ({"into": "t", "on": [1]}, 51134, "$merge 'on' array elements must be strings, but found int"),
    ({"into": "t", "on": []}, 51187,
     "If explicitly specifying $merge 'on', must include at least one field"),
    ({"into": "t", "on": ["a", "a"]}, 31465, "Found a duplicate field 'a'"),
    ({"into": "t", "on": "$a"}, 16410, None),
    ({"into": "t", "whenMatched": "nope"}, 2,
     "Enumeration value 'nope' for field 'whenMatched' is not a valid value."),
    ({"into": "t", "whenMatched": "pipeline"}, 2,
     "Enumeration value 'pipeline' for field 'whenMatched' is not a valid value."),
    ({"into": "t", "whenMatched": 1}, 51191,
     "$merge 'whenMatched' field  must be either a string or an array, but found int"),
    ({"into": "t", "whenNotMatched": "nope"}, 2,
     "Enumeration value 'nope' for field '$merge.whenNotMatched' is not a valid value."),
    ({"into": "t", "whenNotMatched": 1}, 14,
     "BSON field '$merge.whenNotMatched' is the wrong type 'int', expected type 'string'"),
    ({"on": "_id"}, 40414, "BSON field '$merge.into' is missing but a required field"),
    ({"into": "t", "x": 1}, 40415, "BSON field '$merge.x' is an unknown field."),
    ({"into": ""}, 5786800, "$merge 'into' field cannot be an empty string"),
    ({"into": {"db": "test"}}, 5786801,
     "$merge 'into' field must specify a 'coll' that is not empty, null or undefined"),
    ({"into": {"coll": "t", "x": 1}}, 40415, "BSON field 'into.x' is an unknown field."),
    ({"into": 5}, 51178, "$merge 'into' field  must be either a string or an object, but found int"),
    ({"into": "system.x"}, 31319, "Cannot $merge to special collection: system.x"),
    ({"into": {"db": "config", "coll": "x"}}, 31320, "Cannot $merge to internal database: config"),
    ({"into": "t", "let": {"v": 1}}, 51199,
     "Cannot use 'let' variables with 'whenMatched: merge' mode"),
    ({"into": "t", "let": {"new": "$a"}, "whenMatched": [{"$set": {"a": 1}}]}, 51273,
     "'let' may not define a value for the reserved 'new' variable other than '$$ROOT'"),
    ({"into": "t", "let": {"Bad": 1}, "whenMatched": [{"$set": {"a": 1}}]}, 16867,
     "'Bad' starts with an invalid character for a user variable name"),
    ({"into": "t", "let": 1}, 14,
     "BSON field '$merge.let' is the wrong type 'int', expected type 'object'"),
    ({"into": "t", "whenMatched": [{"$group": {"_id": 1}}]}, 72,
     "$group is not allowed to be used within an update"),
    ({"into": "t", "whenMatched": [{"$nope": {}}]}, 40324, "Unrecognized pipeline stage name: '$nope'"),
    ({"into": "t", "whenMatched": [1]}, 14, "Each element of the 'pipeline' array must be an object"),
    ({"into": "t", "whenMatched": [{"$set": {"a": "$$nope"}}]}, 17276, None),
])
def test_merge_spec_errors(db, spec, code, msg):
    db.src.insert_one({"_id": 1})
    e = fails(db, "src", [{"$merge": spec}], code)
    if msg is not None:
        assert e.details["errmsg"] == msg


@pytest.mark.parametrize("spec,msg", [
    (7, "$merge requires a string or object argument, but found int"),
    ("", "Invalid $merge target namespace: 'test.'"),
])
def test_merge_top_level_errors(db, spec, msg):
    code = 14 if isinstance(spec, int) else 73
    e = fails(db, "src", [{"$merge": spec}], code)
    assert e.details["errmsg"] == msg


def test_merge_pipeline_let_and_command_let(db):
    db.tgt.insert_one({"_id": 1, "n": 1})
    db.src.insert_one({"_id": 1, "n": 5})
    agg(db, "src", [{"$merge": {
        "into": "tgt", "let": {"inc": "$n"},
        "whenMatched": [{"$set": {"n": {"$add": ["$n", "$$inc", "$$base"]}}},
                        {"$unset": "gone"}]}}],
        let={"base": 100})
    assert docs(db.tgt) == [{"_id": 1, "n": 106}]


def test_merge_pipeline_new_undefined_without_insert(db):
    db.tgt.insert_one({"_id": 1})
    db.src.insert_one({"_id": 1, "v": 2})
    # with let given and whenNotMatched discard, $$new is not defined
    fails(db, "src", [{"$merge": {"into": "tgt", "let": {"x": "$v"}, "whenNotMatched": "discard",
                                  "whenMatched": [{"$set": {"w": "$$new.v"}}]}}], 17276)
    agg(db, "src", [{"$merge": {"into": "tgt", "let": {"x": "$v"}, "whenNotMatched": "discard",
                                "whenMatched": [{"$set": {"w": "$$x"}}]}}])
    assert docs(db.tgt) == [{"_id": 1, "w": 2}]


def test_merge_pipeline_replace_root_keeps_id(db):
    db.tgt.insert_one({"_id": 1, "a": {"b": 7}, "c": 1})
    db.src.insert_one({"_id": 1})
    agg(db, "src", [{"$merge": {"into": "tgt", "whenMatched": [{"$replaceWith": "$a"}]}}])
    assert docs(db.tgt) == [{"_id": 1, "b": 7}]


def test_merge_into_source_collection(db):
    db.src.insert_many([{"_id": 1, "v": 1}, {"_id": 2, "v": 2}])
    agg(db, "src", [{"$project": {"w": {"$multiply": ["$v", 2]}}}, {"$merge": "src"}])
    assert docs(db.src) == [{"_id": 1, "v": 1, "w": 2}, {"_id": 2, "v": 2, "w": 4}]


def test_merge_other_database(client, db):
    db.src.insert_one({"_id": 1})
    agg(db, "src", [{"$merge": {"into": {"db": "other", "coll": "t"}}}])
    assert docs(client.other.t) == [{"_id": 1}]


def test_merge_explain_shows_resolved_spec(db):
    db.tgt.create_index([("b", 1), ("a", 1)], unique=True)
    db.src.insert_one({"_id": 1})
    r = db.command("aggregate", "src", pipeline=[{"$merge": {
        "into": "tgt", "on": ["b", "a"], "whenMatched": [{"$set": {"x": 1}}],
        "whenNotMatched": "discard"}}], explain=True)
    assert r["stages"][-1] == {"$merge": {
        "into": {"db": "test", "coll": "tgt"}, "on": ["a", "b"],
        "let": {"new": "$$ROOT"}, "whenMatched": [{"$set": {"x": 1}}],
        "whenNotMatched": "discard"}}
    assert docs(db.tgt) == []


def test_merge_manual_monthly_totals_example(db):
    # the manual's "On-Demand Materialized View" example, in short
    db.salaries.insert_many([
        {"_id": 1, "employee": "Ant", "dept": "A", "salary": 100000, "fiscal_year": 2017},
        {"_id": 2, "employee": "Bee", "dept": "A", "salary": 120000, "fiscal_year": 2017},
        {"_id": 3, "employee": "Cat", "dept": "Z", "salary": 115000, "fiscal_year": 2017},
        {"_id": 4, "employee": "Ant", "dept": "A", "salary": 115000, "fiscal_year": 2018},
    ])
    pipe = [{"$group": {"_id": {"fiscal_year": "$fiscal_year", "dept": "$dept"},
                        "salaries": {"$sum": "$salary"}}},
            {"$merge": {"into": {"db": "reporting", "coll": "budgets"},
                        "on": "_id", "whenMatched": "replace", "whenNotMatched": "insert"}}]
    agg(db, "salaries", pipe)
    got = sorted(db.client.reporting.budgets.find(), key=lambda d: str(d["_id"]))
    assert got == [
        {"_id": {"fiscal_year": 2017, "dept": "A"}, "salaries": 220000},
        {"_id": {"fiscal_year": 2017, "dept": "Z"}, "salaries": 115000},
        {"_id": {"fiscal_year": 2018, "dept": "A"}, "salaries": 115000},
    ]


# ------------------------------------------------------------ $collStats


def test_coll_stats_count_and_storage_shape(db):
    db.c.insert_many([{"_id": i, "pad": "x" * 10} for i in range(5)])
    db.c.create_index("pad")
    (d,) = db.c.aggregate([{"$collStats": {"storageStats": {}, "count": {}}}])
    assert list(d) == ["ns", "host", "localTime", "storageStats", "count"]
    assert d["ns"] == "test.c" and isinstance(d["localTime"], datetime.datetime)
    assert d["count"] == 5 and type(d["count"]) is int
    st = d["storageStats"]
    assert list(st) == ["size", "count", "avgObjSize", "numOrphanDocs", "storageSize",
                        "freeStorageSize", "capped", "nindexes", "indexDetails", "indexBuilds",
                        "totalIndexSize", "indexSizes", "totalSize", "scaleFactor"]
    cs = db.command("collStats", "c")
    for k in ("size", "count", "avgObjSize", "nindexes", "indexSizes", "totalSize"):
        assert st[k] == cs[k], k
    assert st["nindexes"] == 2 and set(st["indexSizes"]) == {"_id_", "pad_1"}


def test_coll_stats_scale(db):
    db.c.insert_one({"_id": 1})
    (d,) = db.c.aggregate([{"$collStats": {"storageStats": {"scale": 1024}}}])
    assert d["storageStats"]["scaleFactor"] == 1024
    assert d["storageStats"]["storageSize"] == db.command("collStats", "c", scale=1024)[
        "storageSize"]


def test_coll_stats_empty_spec(db):
    db.c.insert_one({"_id": 1})
    (d,) = db.c.aggregate([{"$collStats": {}}])
    assert list(d) == ["ns", "host", "localTime"]


def test_coll_stats_missing_collection(db):
    (d,) = db.nope.aggregate([{"$collStats": {"storageStats": {}}}])
    assert d["storageStats"]["count"] == 0 and d["storageStats"]["size"] == 0
    e = fails(db, "nope", [{"$collStats": {"count": {}}}], 26)
    assert e.details["errmsg"].endswith(
        "Unable to retrieve count in $collStats stage :: caused by :: "
        "Collection [test.nope] not found.")


@pytest.mark.parametrize("pipeline,code,msg", [
    ([{"$match": {}}, {"$collStats": {}}], 40602,
     "$collStats is only valid as the first stage in a pipeline"),
    ([{"$collStats": 1}], 40166, "$collStats must take a nested object but found: $collStats: 1"),
    ([{"$collStats": {"x": {}}}], 40415, "BSON field '$collStats.x' is an unknown field."),
    ([{"$collStats": {"count": 1}}], 14,
     "BSON field '$collStats.count' is the wrong type 'int', expected type 'object'"),
    ([{"$collStats": {"storageStats": {"scale": 0}}}], 51024,
     "BSON field 'scale' value must be >= 1, actual value '0'"),
    ([{"$collStats": {"latencyStats": {}}}], 238, None),
])
def test_coll_stats_errors(db, pipeline, code, msg):
    db.c.insert_one({"_id": 1})
    e = fails(db, "c", pipeline, code)
    if msg:
        assert e.details["errmsg"] == msg


def test_coll_stats_on_database_aggregate(db):
    with pytest.raises(OperationFailure) as ei:
        db.command("aggregate", 1, pipeline=[{"$collStats": {}}], cursor={})
    assert ei.value.code == 73


def test_coll_stats_then_project(db):
    db.c.insert_many([{"_id": 1}, {"_id": 2}])
    assert list(db.c.aggregate([{"$collStats": {"count": {}}},
                                {"$project": {"_id": 0, "count": 1}}])) == [{"count": 2}]


# ----------------------------------------------------------- $indexStats


def test_index_stats_shape(db):
    db.c.insert_one({"_id": 1, "a": 1})
    db.c.create_index([("a", -1)], name="a_desc", unique=True)
    got = list(db.c.aggregate([{"$indexStats": {}}]))
    specs = {s["name"]: s for s in db.c.list_indexes()}
    assert [d["name"] for d in got] == ["_id_", "a_desc"]
    for d in got:
        assert list(d) == ["name", "key", "host", "accesses", "spec"]
        assert d["key"] == specs[d["name"]]["key"]
        assert d["spec"] == specs[d["name"]]
        assert d["accesses"]["ops"] == 0 and isinstance(d["accesses"]["ops"], Int64)
        assert isinstance(d["accesses"]["since"], datetime.datetime)


def test_index_stats_missing_collection_is_empty(db):
    assert list(db.nope.aggregate([{"$indexStats": {}}])) == []


@pytest.mark.parametrize("pipeline,code", [
    ([{"$indexStats": {"a": 1}}], 28803),
    ([{"$indexStats": 1}], 28803),
    ([{"$match": {}}, {"$indexStats": {}}], 40602),
])
def test_index_stats_errors(db, pipeline, code):
    db.c.insert_one({"_id": 1})
    fails(db, "c", pipeline, code)


def test_index_stats_counts_accesses(db):
    db.c.insert_many([{"_id": i, "a": i, "b": i} for i in range(5)])
    db.c.create_index("a")

    def ops():
        return {d["name"]: d["accesses"]["ops"] for d in db.c.aggregate([{"$indexStats": {}}])}

    assert ops() == {"_id_": 0, "a_1": 0}
    list(db.c.find({"a": 1}))
    list(db.c.find({"a": {"$gt": 2}}))
    list(db.c.find({"b": 1}))  # a collection scan counts for no index
    got = ops()
    assert got == {"_id_": 0, "a_1": 2} and isinstance(got["a_1"], Int64)
    # count, distinct, update, delete and aggregate reads count too; an
    # _id equality (IDHACK) counts for _id_; explain does not count
    db.c.count_documents({"a": 1})
    db.c.distinct("b", {"a": 1})
    db.c.update_one({"a": 2}, {"$set": {"x": 1}})
    db.c.delete_one({"a": 3})
    list(db.c.aggregate([{"$match": {"a": 4}}]))
    list(db.c.find({"_id": 1}))
    db.command("explain", {"find": "c", "filter": {"a": 1}})
    assert ops() == {"_id_": 1, "a_1": 7}
    # dropping the index forgets its counter; a new one starts now
    before = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    db.c.drop_index("a_1")
    db.c.create_index("a")
    got = list(db.c.aggregate([{"$indexStats": {}}]))
    assert [(d["name"], d["accesses"]["ops"]) for d in got] == [("_id_", 1), ("a_1", 0)]
    assert got[1]["accesses"]["since"] >= before.replace(microsecond=before.microsecond // 1000 * 1000)
    db.c.drop()
    db.c.insert_one({"a": 1})
    assert ops() == {"_id_": 0}


def test_out_temporary_collection_dropped_at_open(tmp_path):
    """A crash between $out's temporary collection and its rename leaves
    <db>.tmp.agg_out.<uuid>; the next open drops it (mongod drops its
    temporary collections at startup), and the other collections stay."""
    import pymongo

    import multifora
    path = str(tmp_path / "db")
    srv = multifora.Server(path, port=0)
    srv.start()
    c = pymongo.MongoClient(srv.uri)
    c.t["tmp.agg_out.0f0e0d0c-0b0a-4908-8706-050403020100"].insert_one({"_id": 1})
    c.t.keep.insert_one({"_id": 1})
    assert "tmp.agg_out.0f0e0d0c-0b0a-4908-8706-050403020100" in c.t.list_collection_names()
    c.close()
    srv.stop()
    srv = multifora.Server(path, port=0)
    srv.start()
    try:
        c = pymongo.MongoClient(srv.uri)
        assert c.t.list_collection_names() == ["keep"]
        assert c.t.keep.find_one() == {"_id": 1}
        c.close()
    finally:
        srv.stop()
