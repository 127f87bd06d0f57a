"""{$meta: ...} as mongod 7.0 has it (query/meta.h, docs/text.md): the
expression in every kind of aggregation stage, the metadata each stage
keeps or drops, mongod's dependency analysis (40218 where the metadata
cannot be), $sort by metadata, find's $meta projections (textScore,
recordId, indexKey, sortKey), and the $text gaps of issue 49 ($text under
$or, hints).  Scores are compared with text_model.py's computation of
mongod's formula."""
from __future__ import annotations

import pytest
from bson import Int64
from pymongo.errors import OperationFailure

pytest.importorskip("snowballstemmer")
import text_model as tm  # noqa: E402

DOCS = [
    {"_id": 1, "t": "red apple", "b": 0, "g": "x", "tags": ["p", "q"]},
    {"_id": 2, "t": "green pear", "b": 1, "g": "x", "tags": ["p"]},
    {"_id": 3, "t": "apple apple pie", "b": 0, "g": "y", "tags": []},
    {"_id": 4, "t": "kiwi", "b": 1, "g": "y", "tags": ["r"]},
    {"_id": 5, "t": "an apple a day", "b": 2, "g": "x", "tags": ["q"]},
]
APPLE = tm.search(DOCS, {"t": 1}, "apple")
NO_SCORE = (40218, "query requires text score metadata, but it is not available")


@pytest.fixture
def coll(client):
    c = client.t.c
    c.create_index([("t", "text")])
    c.create_index([("b", 1)])
    c.insert_many(DOCS)
    return c


def err(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code, e.value.details.get("errmsg", "")


def agg(c, pipeline, **kw):
    return list(c.aggregate(pipeline, **kw))


TEXT = {"$match": {"$text": {"$search": "apple"}}}


# ------------------------------------------------------------ parsing


@pytest.mark.parametrize("stage", [
    lambda m: {"$project": {"s": m}},
    lambda m: {"$addFields": {"s": m}},
    lambda m: {"$group": {"_id": m}},
    lambda m: {"$match": {"$expr": {"$eq": [m, 1]}}},
    lambda m: {"$replaceWith": {"s": m}},
])
def test_parse_errors(coll, stage):
    code, msg = err(lambda: agg(coll, [stage({"$meta": 1})]))
    assert code == 17307 and "$meta only supports string arguments" in msg
    code, msg = err(lambda: agg(coll, [stage({"$meta": "nope"})]))
    assert code == 17308 and "Unsupported argument to $meta: nope" in msg
    code, _ = err(lambda: agg(coll, [stage({"$meta": ["textScore"]})]))
    assert code == 17307


NAMES = ["randVal", "searchScore", "searchHighlights", "recordId", "indexKey", "sortKey",
         "searchScoreDetails", "searchSequenceToken", "timeseriesBucketMinTime",
         "timeseriesBucketMaxTime", "vectorSearchScore"]


def test_every_name_parses_and_nothing_sets_most(coll):
    # names mongod knows: accepted; nothing here sets them (no Atlas Search,
    # no time-series buckets): no field, as mongod's missing value
    got = agg(coll, [{"$sort": {"_id": 1}}, {"$project": {n: {"$meta": n} for n in NAMES}}])
    assert [d["_id"] for d in got] == [1, 2, 3, 4, 5]
    for d in got:
        assert set(d) == {"_id", "t", "b", "g", "tags", "sortKey"}  # $sort sets sortKey
    # in an inclusion: only _id and the one value $sort gave
    got = agg(coll, [{"$sort": {"b": -1, "_id": 1}},
                     {"$project": {"_id": 1, "s": {"$meta": "searchScore"},
                                   "k": {"$meta": "sortKey"}}}])
    assert got[0] == {"_id": 5, "k": [2, 5]}


# ------------------------------------------------------------ textScore


def test_text_score_in_project_and_add_fields(coll):
    got = agg(coll, [TEXT, {"$project": {"s": {"$meta": "textScore"}}}])
    # $meta decides no projection type: alone it is an exclusion (all fields)
    assert {d["_id"]: d["s"] for d in got} == pytest.approx(APPLE)
    assert all(list(d)[-1] == "s" and "t" in d for d in got)
    got = agg(coll, [TEXT, {"$project": {"t": 1, "s": {"$meta": "textScore"}}}])
    assert all(set(d) == {"_id", "t", "s"} for d in got)
    got = agg(coll, [TEXT, {"$project": {"t": 0, "s": {"$meta": "textScore"}}}])
    assert all("t" not in d and "s" in d for d in got)
    # $addFields replaces in place
    got = agg(coll, [TEXT, {"$addFields": {"t": {"$meta": "textScore"}}}])
    assert {d["_id"]: d["t"] for d in got} == pytest.approx(APPLE)
    assert all(list(d) == ["_id", "t", "b", "g", "tags"] for d in got)
    got = agg(coll, [TEXT, {"$set": {"s": {"$multiply": [{"$meta": "textScore"}, 2]}}}])
    assert {d["_id"]: d["s"] for d in got} == pytest.approx({k: 2 * v for k, v in APPLE.items()})


def test_text_score_sort_group_match(coll):
    want = sorted(APPLE, key=lambda k: -APPLE[k])
    got = agg(coll, [TEXT, {"$sort": {"s": {"$meta": "textScore"}}}])
    assert [d["_id"] for d in got] == want
    # the part stands where it is: b first, then the score
    got = agg(coll, [TEXT, {"$sort": {"b": 1, "s": {"$meta": "textScore"}}}])
    assert [d["_id"] for d in got] == sorted(APPLE, key=lambda k: (DOCS[k - 1]["b"], -APPLE[k]))
    # a sorted document keeps its score
    got = agg(coll, [TEXT, {"$sort": {"_id": -1}}, {"$addFields": {"s": {"$meta": "textScore"}}}])
    assert [d["_id"] for d in got] == sorted(APPLE, reverse=True)
    assert {d["_id"]: d["s"] for d in got} == pytest.approx(APPLE)
    got = agg(coll, [TEXT, {"$group": {"_id": "$g", "s": {"$sum": {"$meta": "textScore"}},
                                       "m": {"$max": {"$meta": "textScore"}}}},
                     {"$sort": {"_id": 1}}])
    byg = {}
    for k, v in APPLE.items():
        byg.setdefault(DOCS[k - 1]["g"], []).append(v)
    assert [d["_id"] for d in got] == sorted(byg)
    assert [d["s"] for d in got] == pytest.approx([sum(byg[g]) for g in sorted(byg)])
    assert [d["m"] for d in got] == pytest.approx([max(byg[g]) for g in sorted(byg)])
    # $expr after another stage: the document's score
    top = max(APPLE.values())
    got = agg(coll, [TEXT, {"$addFields": {"x": 1}},
                     {"$match": {"$expr": {"$gte": [{"$meta": "textScore"}, top]}}}])
    assert [d["_id"] for d in got] == [k for k, v in APPLE.items() if v >= top]


def test_stages_that_keep_and_drop_metadata(coll):
    def scores(pipeline):
        return [d.get("s") for d in agg(coll, [TEXT] + pipeline +
                                        [{"$addFields": {"s": {"$meta": "textScore"}}}])]
    n = len(APPLE)
    for kept in ([{"$unwind": {"path": "$tags", "preserveNullAndEmptyArrays": True}}],
                 [{"$limit": 10}, {"$skip": 0}], [{"$replaceRoot": {"newRoot": {"a": "$t"}}}],
                 [{"$lookup": {"from": "c", "localField": "_id", "foreignField": "_id",
                               "as": "me"}}],
                 [{"$redact": "$$KEEP"}],
                 [{"$setWindowFields": {"sortBy": {"_id": 1},
                                        "output": {"n": {"$count": {}}}}}],
                 [{"$sample": {"size": 10}}]):
        got = scores(kept)
        assert len(got) >= n and all(v is not None for v in got), kept
    for dropped in ([{"$group": {"_id": "$_id"}}], [{"$bucketAuto": {"groupBy": "$b",
                                                                     "buckets": 2}}],
                    [{"$count": "n"}], [{"$sortByCount": "$g"}],
                    [{"$facet": {"a": [{"$limit": 1}]}}]):
        assert all(v is None for v in scores(dropped)), dropped
    # $bucketAuto's accumulators read each document's own score
    got = agg(coll, [TEXT, {"$bucketAuto": {"groupBy": "$_id", "buckets": 1, "output": {
        "s": {"$sum": {"$meta": "textScore"}}}}}])
    assert got[0]["s"] == pytest.approx(sum(APPLE.values()))
    # $densify: its input documents keep theirs, those it makes have none
    got = agg(coll, [TEXT, {"$densify": {"field": "b", "range": {"step": 1, "bounds": [0, 3]}}},
                     {"$addFields": {"s": {"$meta": "textScore"}}}])
    assert {d["_id"]: d["s"] for d in got if "_id" in d} == pytest.approx(APPLE)
    assert all("s" not in d for d in got if "_id" not in d) and len(got) > len(APPLE)
    # $setWindowFields' functions read each document's own score
    got = agg(coll, [TEXT, {"$setWindowFields": {
        "sortBy": {"_id": 1},
        "output": {"tot": {"$sum": {"$meta": "textScore"}, "window": {"documents": [
            "unbounded", "unbounded"]}}}}}])
    assert all(d["tot"] == pytest.approx(sum(APPLE.values())) for d in got)


def test_facet_lookup_union_sub_pipelines(coll):
    got = agg(coll, [TEXT, {"$facet": {"a": [{"$project": {"s": {"$meta": "textScore"}}}],
                                       "b": [{"$sort": {"s": {"$meta": "textScore"}}},
                                             {"$limit": 1}, {"$project": {"_id": 1}}]}}])
    assert {d["_id"]: d["s"] for d in got[0]["a"]} == pytest.approx(APPLE)
    assert got[0]["b"] == [{"_id": max(APPLE, key=APPLE.get)}]
    # a $lookup's sub-pipeline with its own $text
    got = agg(coll, [{"$match": {"_id": 4}}, {"$lookup": {
        "from": "c", "as": "hits", "pipeline": [
            {"$match": {"$text": {"$search": "pear"}}},
            {"$project": {"s": {"$meta": "textScore"}}}]}}])
    assert [h["_id"] for h in got[0]["hits"]] == [2]
    assert got[0]["hits"][0]["s"] == pytest.approx(tm.search(DOCS, {"t": 1}, "pear")[2])
    # one without: its read refuses it when the $lookup runs it
    no_text = {"$lookup": {"from": "c", "as": "h", "pipeline": [
        {"$project": {"s": {"$meta": "textScore"}}}]}}
    code, msg = err(lambda: agg(coll, [TEXT, no_text]))
    assert code == 40218 and msg == ("PlanExecutor error during aggregation :: caused by :: " +
                                     NO_SCORE[1])
    assert agg(coll, [{"$match": {"_id": 99}}, no_text]) == []
    # $unionWith: its documents keep what their pipeline gave them
    got = agg(coll, [{"$match": {"_id": 4}}, {"$unionWith": {"coll": "c", "pipeline": [
        {"$match": {"$text": {"$search": "pear"}}}]}},
        {"$addFields": {"s": {"$meta": "textScore"}}}])
    assert [(d["_id"], "s" in d) for d in got] == [(4, False), (2, True)]
    # a $unionWith's sub-pipeline without $text fails when it reads
    code, msg = err(lambda: agg(coll, [{"$unionWith": {"coll": "c", "pipeline": [
        {"$project": {"s": {"$meta": "textScore"}}}]}}]))
    assert code == 40218 and msg.endswith(NO_SCORE[1])


def test_text_score_unavailable(coll):
    for p in ([{"$project": {"s": {"$meta": "textScore"}}}],
              [{"$match": {"b": 1}}, {"$sort": {"s": {"$meta": "textScore"}}}],
              [{"$addFields": {"s": {"$meta": "textScore"}}}],
              [{"$group": {"_id": {"$meta": "textScore"}}}],
              [{"$limit": 1}, {"$match": {"$expr": {"$meta": "textScore"}}}],
              [{"$project": {"a": 1}}, {"$project": {"s": {"$meta": "textScore"}}}],
              [{"$facet": {"a": [{"$project": {"s": {"$meta": "textScore"}}}]}}]):
        assert err(lambda: agg(coll, p)) == NO_SCORE, p
        assert err(lambda: coll.database.command(
            "explain", {"aggregate": "c", "pipeline": p, "cursor": {}})) == NO_SCORE
    # a collection that does not exist: the same
    assert err(lambda: agg(coll.database.none, [{"$project": {"s": {"$meta": "textScore"}}}])) \
        == NO_SCORE
    # the analysis stops after a stage that needs all fields and no
    # metadata ($group), or at one it cannot analyse ($redact, $unionWith):
    # the score is then missing, as mongod's
    for p in ([{"$group": {"_id": "$g"}}, {"$project": {"s": {"$meta": "textScore"}}}],
              [{"$redact": "$$KEEP"}, {"$addFields": {"s": {"$meta": "textScore"}}}],
              [{"$unionWith": "c"}, {"$addFields": {"s": {"$meta": "textScore"}}}]):
        assert all("s" not in d for d in agg(coll, p)), p
    # ... unless variables are in scope (a let): it goes on
    assert err(lambda: agg(coll, [{"$group": {"_id": "$g"}},
                                  {"$project": {"s": {"$meta": "textScore"}}}],
                           let={"v": 1})) == NO_SCORE
    # a pipeline on no collection is not analysed
    got = list(coll.database.aggregate([{"$documents": [{"a": 1}]},
                                        {"$addFields": {"s": {"$meta": "textScore"}}}]))
    assert got == [{"a": 1}]
    # the parse errors of every stage come first
    code, _ = err(lambda: agg(coll, [{"$project": {"s": {"$meta": "textScore"}}},
                                     {"$limit": -1}]))
    assert code == 5107201


def test_geo_near_metadata_unavailable_without_geo_near(coll):
    for name, what in (("geoNearDistance", "$geoNear distance"),
                       ("geoNearPoint", "$geoNear point")):
        assert err(lambda: agg(coll, [{"$project": {"d": {"$meta": name}}}])) == (
            40218, f"query requires {what} metadata, but it is not available")
        assert err(lambda: list(coll.find({}, {"d": {"$meta": name}}))) == (
            40218, f"query requires {what} metadata, but it is not available")
    code, _ = err(lambda: agg(coll, [{"$sort": {"d": {"$meta": "geoNearDistance"}}}]))
    assert code == 40218


# ------------------------------------------------------------ randVal, sortKey


def test_sample_sets_rand_val(coll):
    got = agg(coll, [{"$sample": {"size": 4}}, {"$project": {"r": {"$meta": "randVal"}}}])
    rs = [d["r"] for d in got]
    assert len(rs) == 4 and all(0 <= r < 1 for r in rs)
    assert rs == sorted(rs, reverse=True)  # mongod's $sample: highest first
    # sorting by it is taken; without $sample there is none (missing)
    got = agg(coll, [{"$sample": {"size": 5}}, {"$sort": {"r": {"$meta": "randVal"}}},
                     {"$project": {"r": {"$meta": "randVal"}}}])
    assert [d["r"] for d in got] == sorted((d["r"] for d in got), reverse=True)
    got = agg(coll, [{"$sort": {"r": {"$meta": "randVal"}, "_id": 1}},
                     {"$project": {"r": {"$meta": "randVal"}}}])
    assert [d["_id"] for d in got] == [1, 2, 3, 4, 5] and all("r" not in d for d in got)


def test_sort_by_meta_errors(coll):
    for name, code, msg in (
            ("searchScore", 31218, "$meta sort by 'searchScore' metadata is not supported"),
            ("searchHighlights", 31219,
             "$meta sort by 'searchHighlights' metadata is not supported"),
            ("recordId", 31138, 'Illegal $meta sort: $meta: "recordId"'),
            ("nope", 31138, 'Illegal $meta sort: $meta: "nope"')):
        assert err(lambda: agg(coll, [{"$sort": {"s": {"$meta": name}}}])) == (code, msg)
        assert err(lambda: list(coll.find({}).sort([("s", {"$meta": name})]))) == (code, msg)


def test_sort_key(coll):
    got = agg(coll, [{"$sort": {"b": -1, "_id": 1}}, {"$project": {"k": {"$meta": "sortKey"}}}])
    assert [d["k"] for d in got] == [[2, 5], [1, 2], [1, 4], [0, 1], [0, 3]]
    # an array sorts by its least element ascending, greatest descending
    got = agg(coll, [{"$match": {"_id": 1}}, {"$sort": {"tags": 1}},
                     {"$project": {"_id": 1, "k": {"$meta": "sortKey"}}}])
    assert got == [{"_id": 1, "k": ["p"]}]
    got = agg(coll, [{"$match": {"_id": 1}}, {"$sort": {"tags": -1}},
                     {"$project": {"_id": 1, "k": {"$meta": "sortKey"}}}])
    assert got == [{"_id": 1, "k": ["q"]}]
    got = agg(coll, [TEXT, {"$sort": {"s": {"$meta": "textScore"}, "_id": 1}},
                     {"$project": {"_id": 1, "k": {"$meta": "sortKey"}}}])
    assert [d["k"][1] for d in got] == [d["_id"] for d in got]
    assert [d["k"][0] for d in got] == pytest.approx([APPLE[d["_id"]] for d in got])
    # through a stage that keeps metadata
    got = agg(coll, [{"$sort": {"b": 1, "_id": 1}}, {"$unwind": "$tags"},
                     {"$project": {"_id": 0, "k": {"$meta": "sortKey"}}}])
    assert got[0]["k"] == [0, 1] and "_id" not in got[0]  # {_id: 0}: an exclusion


# ------------------------------------------------------------ find


def test_find_meta_projections(coll):
    got = list(coll.find({"$text": {"$search": "apple"}}, {"s": {"$meta": "textScore"}})
               .sort([("s", {"$meta": "textScore"})]))
    assert {d["_id"]: d["s"] for d in got} == pytest.approx(APPLE)
    got = list(coll.find({"b": 1}, {"r": {"$meta": "recordId"}, "k": {"$meta": "indexKey"}})
               .hint("b_1"))
    assert all(isinstance(d["r"], int) and d["k"] == {"b": 1} for d in got)
    raw = coll.database.command("find", "c", filter={"_id": 2},
                                projection={"r": {"$meta": "recordId"}})
    assert isinstance(raw["cursor"]["firstBatch"][0]["r"], Int64)
    # a collection scan, or the text index: no index key (no field)
    assert all("k" not in d for d in coll.find({"g": "x"}, {"k": {"$meta": "indexKey"}}))
    assert all("k" not in d for d in coll.find({"$text": {"$search": "apple"}},
                                               {"k": {"$meta": "indexKey"}}))
    got = list(coll.find({}, {"_id": 1, "k": {"$meta": "sortKey"}}).sort([("b", 1), ("_id", -1)]))
    assert [d["k"] for d in got] == [[0, 3], [0, 1], [1, 4], [1, 2], [2, 5]]
    assert err(lambda: list(coll.find({}, {"k": {"$meta": "sortKey"}}))) == (
        2, "cannot use sortKey $meta projection without a sort")
    assert all("r" not in d for d in coll.find({}, {"r": {"$meta": "randVal"}}))
    assert err(lambda: list(coll.find({}, {"s": {"$meta": "textScore"}}))) == NO_SCORE
    code, msg = err(lambda: list(coll.find({}, {"s": {"$meta": "nope"}})))
    assert code == 17308 and "Unsupported argument to $meta: nope" in msg
    # inside an expression of a find projection
    got = list(coll.find({"$text": {"$search": "apple"}},
                         {"s": {"$add": [{"$meta": "textScore"}, 1]}}))
    assert {d["_id"]: d["s"] for d in got} == pytest.approx({k: v + 1 for k, v in APPLE.items()})


# ------------------------------------------------------------ $text and hints


def test_hint_with_text_is_refused(coll):
    msg = (2, "text and hint not allowed in same query")
    q = {"$text": {"$search": "apple"}}
    for h in ("b_1", "t_text", {"b": 1}, {"$natural": 1}):
        assert err(lambda: list(coll.find(q).hint(h))) == msg, h
        assert err(lambda: agg(coll, [{"$match": q}], hint=h)) == msg, h
        assert err(lambda: coll.count_documents(q, hint=h)) == msg, h
    got = coll.database.command("find", "c", filter=q, hint={})  # an empty hint is none
    assert len(got["cursor"]["firstBatch"]) == len(APPLE)
    assert err(lambda: list(coll.find(q).sort([("$natural", 1)]))) == (
        2, "text expression not allowed with $natural sort order")
    # before planning: no text index needed to be told
    assert err(lambda: list(coll.database.other.find(q).hint("x"))) == msg


# ------------------------------------------------------------ $text under $or


def test_text_under_or_with_indexed_clauses(coll):
    q = {"$or": [{"$text": {"$search": "apple"}}, {"b": 1}]}
    want = set(APPLE) | {d["_id"] for d in DOCS if d["b"] == 1}
    got = list(coll.find(q, {"s": {"$meta": "textScore"}}))
    assert {d["_id"] for d in got} == want
    # the text clause's documents have their score; the others none
    for d in got:
        if d["_id"] in APPLE and "s" in d:
            assert d["s"] == pytest.approx(APPLE[d["_id"]])
        else:
            assert "s" not in d and d["b"] == 1
    assert coll.count_documents(q) == len(want)
    assert {d["_id"] for d in agg(coll, [{"$match": q}])} == want
    plan = coll.find(q).explain()["queryPlanner"]["winningPlan"]
    stages = [s["stage"] for s in plan["inputStages"]]
    assert plan["stage"] == "OR" and sorted(stages) == ["FETCH", "TEXT_MATCH"]
    # the other clauses are judged by their own conditions alone
    q = {"$or": [{"$text": {"$search": "pear"}}, {"b": 1, "t": {"$regex": "^k"}}]}
    assert sorted(d["_id"] for d in coll.find(q)) == [2, 4]
    q = {"$or": [{"$text": {"$search": "pie"}}, {"b": 2, "t": {"$regex": "^z"}}]}
    assert [d["_id"] for d in coll.find(q)] == [3]
    # beside the $or, and inside a top-level $and
    q = {"g": "x", "$or": [{"$text": {"$search": "apple"}}, {"b": 1}]}
    assert sorted(d["_id"] for d in coll.find(q)) == [1, 2, 5]
    q = {"$and": [{"$or": [{"$text": {"$search": "kiwi"}}, {"b": 2}]}, {"g": "y"}]}
    assert sorted(d["_id"] for d in coll.find(q)) == [4]


def test_text_under_or_without_an_index_for_every_clause(coll):
    msg = ("Failed to produce a solution for TEXT under OR - other non-TEXT clauses under OR "
           "have to be indexed as well.")
    for q in ({"$or": [{"$text": {"$search": "apple"}}, {"g": "x"}]},
              {"$or": [{"$text": {"$search": "apple"}}, {"b": 1}, {"tags": "p"}]}):
        code, m = err(lambda: list(coll.find(q)))
        assert code == 291 and m.endswith(msg)
        code, _ = err(lambda: agg(coll, [{"$match": q}]))
        assert code == 291
