"""Read-only views (issue 51): create with viewOn/pipeline/collation,
reads through a view (find, count, distinct, aggregate, explain) that give
what the equivalent aggregation on the source gives, nested views, the
view's collation, and mongod's refusals of writes and index commands.
"""
import random

import pymongo
import pytest
from pymongo.errors import OperationFailure


@pytest.fixture
def db(client):
    d = client.views
    rng = random.Random(7)
    d.src.insert_many([{"_id": i, "a": rng.randint(0, 5), "b": rng.choice(["x", "X", "y", "Y"]),
                        "c": [rng.randint(0, 3) for _ in range(rng.randint(0, 3))],
                        "d": {"e": rng.randint(0, 9)}} for i in range(200)])
    return d


def code_of(fn):
    try:
        fn()
    except OperationFailure as e:
        return e.code
    return None


def test_create_list_and_system_views(db):
    db.create_collection("v", viewOn="src", pipeline=[{"$match": {"a": {"$gte": 2}}}])
    entries = {e["name"]: e for e in db.list_collections()}
    assert entries["v"] == {"name": "v", "type": "view", "options": {
        "viewOn": "src", "pipeline": [{"$match": {"a": {"$gte": 2}}}]}, "info": {"readOnly": True}}
    assert entries["system.views"]["type"] == "collection"
    assert list(db.system.views.find()) == [
        {"_id": "views.v", "viewOn": "src", "pipeline": [{"$match": {"a": {"$gte": 2}}}]}]
    assert db.list_collection_names(filter={"type": "view"}) == ["v"]
    assert list(db.list_collections(nameOnly=True, filter={"name": "v"})) == [
        {"name": "v", "type": "view"}]
    # the same view again is no change; another definition is 48
    db.command("create", "v", viewOn="src", pipeline=[{"$match": {"a": {"$gte": 2}}}])
    assert code_of(lambda: db.command("create", "v", viewOn="src", pipeline=[])) == 48
    assert code_of(lambda: db.command("create", "v")) == 48
    assert code_of(lambda: db.command("create", "src", viewOn="v")) == 48
    # a view of a collection that does not exist reads as empty
    db.create_collection("nothing", viewOn="missing")
    assert list(db.nothing.find()) == []
    # the collation kept is the full one
    db.create_collection("vc", viewOn="src", collation={"locale": "en", "strength": 2})
    opts = [e for e in db.list_collections() if e["name"] == "vc"][0]["options"]
    assert opts["collation"]["locale"] == "en" and opts["collation"]["strength"] == 2
    assert "caseLevel" in opts["collation"]


CREATE_ERRORS = [
    ({"viewOn": 1}, 14),
    ({"viewOn": ""}, 2),
    ({"pipeline": []}, 72),
    ({"viewOn": "src", "pipeline": {}}, 14),
    ({"viewOn": "src", "pipeline": [1]}, 14),
    ({"viewOn": "src", "pipeline": [{"$out": "x"}]}, 167),
    ({"viewOn": "src", "pipeline": [{"$merge": {"into": "x"}}]}, 167),
    ({"viewOn": "src", "pipeline": [{"$nope": 1}]}, 40324),
    ({"viewOn": "src", "pipeline": [{"$match": {"$bad": 1}}]}, 2),
    ({"viewOn": "src", "timeseries": {"timeField": "t"}}, 72),
    ({"viewOn": "src", "clusteredIndex": {"key": {"_id": 1}, "unique": True}}, 6026500),
    ({"viewOn": "src", "capped": True}, 72),
    ({"viewOn": "system.buckets.x"}, 73),
]


@pytest.mark.parametrize("opts,code", CREATE_ERRORS)
def test_create_errors(db, opts, code):
    assert code_of(lambda: db.command(dict({"create": "bad"}, **opts))) == code
    assert "bad" not in db.list_collection_names()


def test_cycles_depth_and_collation_conflicts(db):
    assert code_of(lambda: db.create_collection("self", viewOn="self")) == 5
    db.create_collection("w1", viewOn="w2")
    with pytest.raises(OperationFailure) as e:
        db.create_collection("w2", viewOn="w1")
    assert e.value.code == 5
    assert e.value.details["errmsg"] == "View cycle detected: views.w2 => views.w2 => views.w1 => views.w2"
    db.create_collection("w2", viewOn="src")
    assert code_of(lambda: db.command("collMod", "w2", viewOn="w1")) == 5
    # 20 views in a chain, not 21
    prev = "src"
    for i in range(20):
        db.create_collection(f"d{i}", viewOn=prev)
        prev = f"d{i}"
    assert db.d19.count_documents({}) == 200
    assert code_of(lambda: db.create_collection("d20", viewOn="d19")) == 165
    # a view on a view has its collation
    db.create_collection("en", viewOn="src", collation={"locale": "en"})
    assert code_of(lambda: db.create_collection("plain", viewOn="en")) == 167
    db.create_collection("en2", viewOn="en", collation={"locale": "en"})


def aggregate_on_source(db, view_pipeline, stages, collation=None):
    kw = {"collation": collation} if collation else {}
    return list(db.src.aggregate(view_pipeline + stages, **kw))


VIEW_PIPELINES = [
    [],
    [{"$match": {"a": {"$gte": 2}}}],
    [{"$project": {"a": 1, "b": 1, "c": 1}}, {"$sort": {"a": -1, "_id": 1}}],
    [{"$unwind": "$c"}, {"$addFields": {"k": {"$concat": ["$b", "!"]}}}],
    [{"$group": {"_id": "$b", "n": {"$sum": 1}, "a": {"$max": "$a"}}}],
]

FINDS = [
    ({}, None, None, 0, 0),
    ({"a": {"$in": [1, 3]}}, [("_id", -1)], None, 0, 0),
    ({"c": 2}, [("a", 1), ("_id", 1)], {"a": 1, "_id": 0}, 3, 10),
    ({"b": "x"}, None, {"c": 0}, 0, 5),
]


@pytest.mark.parametrize("vp", VIEW_PIPELINES)
def test_reads_match_the_equivalent_aggregation(db, vp):
    db.create_collection("v", viewOn="src", pipeline=vp)
    for filt, sort, proj, skip, limit in FINDS:
        stages = [{"$match": filt}]
        if sort:
            stages.append({"$sort": dict(sort)})
        if skip:
            stages.append({"$skip": skip})
        if limit:
            stages.append({"$limit": limit})
        if proj:
            stages.append({"$project": proj})
        cur = db.v.find(filt, proj, sort=sort, skip=skip, limit=limit)
        got = list(cur)
        want = aggregate_on_source(db, vp, stages)
        if sort:
            assert got == want
        else:
            key = lambda d: repr(sorted(d.items()))
            assert sorted(got, key=key) == sorted(want, key=key)
        assert db.v.count_documents(filt) == len(aggregate_on_source(db, vp, [{"$match": filt}]))
    # distinct with arrays and dotted paths, as on a collection
    for key in ("a", "b", "c", "d.e", "k"):
        want = sorted({repr(v) for d in aggregate_on_source(db, vp, [])
                       for v in (d.get(key, []) if isinstance(d.get(key), list) else
                                 [d[key]] if key in d else
                                 [d["d"]["e"]] if key == "d.e" and "d" in d else [])})
        assert sorted(repr(v) for v in db.v.distinct(key)) == want
    # aggregate through the view: the view's stages, then the request's
    req = [{"$group": {"_id": None, "n": {"$sum": 1}}}]
    assert list(db.v.aggregate(req)) == aggregate_on_source(db, vp, req)
    assert db.v.estimated_document_count() == len(aggregate_on_source(db, vp, []))


def test_nested_views_and_cursors(db):
    db.create_collection("v1", viewOn="src", pipeline=[{"$match": {"a": {"$gte": 1}}}])
    db.create_collection("v2", viewOn="v1", pipeline=[{"$project": {"a": 1}}])
    db.create_collection("v3", viewOn="v2", pipeline=[{"$match": {"a": {"$lte": 4}}}])
    want = list(db.src.aggregate([{"$match": {"a": {"$gte": 1}}}, {"$project": {"a": 1}},
                                  {"$match": {"a": {"$lte": 4}}}, {"$sort": {"_id": 1}}]))
    cur = db.v3.find(batch_size=7).sort("_id", 1)
    assert list(cur) == want  # getMore through the view's cursor
    res = db.command("find", "v3", batchSize=2)
    assert res["cursor"]["ns"] == "views.v3" and res["cursor"]["id"] != 0
    more = db.command("getMore", res["cursor"]["id"], collection="v3", batchSize=1000)
    assert len(res["cursor"]["firstBatch"]) + len(more["cursor"]["nextBatch"]) == len(want)
    assert db.v3.find_one({"_id": want[0]["_id"]}) == want[0]


def test_collation_of_a_view(db):
    db.create_collection("ci", viewOn="src", collation={"locale": "en", "strength": 2})
    assert db.ci.count_documents({"b": "x"}) == db.src.count_documents(
        {"b": "x"}, collation={"locale": "en", "strength": 2})
    assert sorted(db.ci.distinct("b")) in (["x", "y"], ["X", "Y"], ["X", "y"], ["x", "Y"])
    # the same collation again is fine; another is 167
    db.ci.count_documents({}, collation={"locale": "en", "strength": 2})
    assert code_of(lambda: list(db.ci.find({}, collation={"locale": "fr"}))) == 167
    assert code_of(lambda: list(db.ci.aggregate([], collation={"locale": "simple"}))) == 167
    # a view without one compares binary, whatever its source's default
    db.create_collection("cs", collation={"locale": "en", "strength": 2})
    db.cs.insert_many([{"s": "a"}, {"s": "A"}])
    db.create_collection("plain", viewOn="cs")
    assert db.plain.count_documents({"s": "a"}) == 1
    assert db.cs.count_documents({"s": "a"}) == 2


def test_lookup_and_union_with_through_views(db):
    db.create_collection("big", viewOn="src", pipeline=[{"$match": {"a": {"$gte": 4}}}])
    out = list(db.src.aggregate([
        {"$match": {"_id": {"$lt": 20}}},
        {"$lookup": {"from": "big", "localField": "_id", "foreignField": "_id", "as": "j"}},
        {"$project": {"n": {"$size": "$j"}, "a": 1}}]))
    assert all(d["n"] == (1 if d["a"] >= 4 else 0) for d in out)
    n = len(list(db.src.aggregate([{"$match": {"_id": -1}}, {"$unionWith": "big"}])))
    assert n == db.src.count_documents({"a": {"$gte": 4}})
    db.create_collection("en", viewOn="src", collation={"locale": "en"})
    assert code_of(lambda: list(db.src.aggregate([{"$unionWith": "en"}]))) == 167


def test_writes_and_index_commands_refused(db):
    db.create_collection("v", viewOn="src")
    cmds = [
        lambda: db.v.insert_one({"x": 1}),
        lambda: db.v.update_one({}, {"$set": {"x": 1}}),
        lambda: db.v.delete_one({}),
        lambda: db.v.find_one_and_update({}, {"$set": {"x": 1}}),
        lambda: db.v.create_index("a"),
        lambda: db.command("listIndexes", "v"),
        lambda: db.command("dropIndexes", "v", index="*"),
        lambda: db.command("collStats", "v"),
        lambda: db.command("validate", "v"),
        lambda: db.command("convertToCapped", "v", size=1000),
        lambda: db.command("cloneCollectionAsCapped", "v", toCollection="cap", size=1000),
        lambda: db.client.admin.command("renameCollection", "views.v", to="views.w"),
        lambda: list(db.src.aggregate([{"$merge": {"into": "v"}}])),
    ]
    for i, fn in enumerate(cmds):
        assert code_of(fn) == 166, i
    assert code_of(lambda: db.client.admin.command("renameCollection", "views.src",
                                                   to="views.v")) == 48
    assert code_of(lambda: db.command("collMod", "v", validator={"a": 1})) == 72
    assert code_of(lambda: db.command("collMod", "src", pipeline=[])) == 72
    assert code_of(lambda: list(db.v.find({}, max={"a": 1}, hint=[("a", 1)]))) == 168
    assert code_of(lambda: list(db.v.find({}, sort=[("$natural", 1)]))) == 168
    assert code_of(lambda: list(db.v.find(cursor_type=pymongo.CursorType.TAILABLE))) == 168
    assert db.src.count_documents({}) == 200


def test_coll_mod_and_drop(db):
    db.create_collection("v", viewOn="src", pipeline=[{"$match": {"a": 0}}])
    db.command("collMod", "v", pipeline=[{"$match": {"a": 1}}])
    assert db.v.count_documents({}) == db.src.count_documents({"a": 1})
    db.create_collection("other", viewOn="src", pipeline=[{"$match": {"a": 2}}])
    db.command("collMod", "v", viewOn="other")  # the pipeline stays
    assert db.v.count_documents({}) == 0
    assert db.command("drop", "v") == {"ns": "views.v", "ok": 1.0}
    assert "v" not in db.list_collection_names()
    # a view on a dropped view reads as empty
    db.create_collection("top", viewOn="other")
    db.drop_collection("other")
    assert list(db.top.find()) == []
    db.client.drop_database("views")
    assert db.list_collection_names() == []


def test_explain_through_a_view(db):
    db.create_collection("v", viewOn="src", pipeline=[{"$match": {"a": 3}}])
    for inner in ({"find": "v", "filter": {"b": "x"}}, {"count": "v", "query": {"b": "x"}},
                  {"distinct": "v", "key": "b"},
                  {"aggregate": "v", "pipeline": [{"$match": {"b": "x"}}], "cursor": {}}):
        for verbosity in ("queryPlanner", "executionStats"):
            out = db.command("explain", inner, verbosity=verbosity)
            text = repr(out)
            assert "views.src" in text, (inner, verbosity)
            if verbosity == "executionStats":
                assert "executionStats" in text or "nReturned" in text


def test_views_survive_restart(tmp_path):
    import multifora
    srv = multifora.Server(str(tmp_path / "db"), port=0).start()
    c = pymongo.MongoClient(srv.uri)
    c.t.src.insert_many([{"a": i} for i in range(5)])
    c.t.create_collection("v", viewOn="src", pipeline=[{"$match": {"a": {"$gt": 2}}}])
    c.close()
    srv.stop()
    srv = multifora.Server(str(tmp_path / "db"), port=0).start()
    c = pymongo.MongoClient(srv.uri)
    assert c.t.v.count_documents({}) == 2
    c.close()
    srv.stop()
