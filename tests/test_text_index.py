"""Text indexes and $text, as mongod 7.0's (issue 49, docs/text.md):
createIndexes and listIndexes, keys and scores against a reference model
of mongod's formula (text_model.py, with Snowball stems from the
snowballstemmer package), a corpus of a few thousand English and French
documents, explain's shapes, mongod's errors, and a kill -9 during a
text index build."""
from __future__ import annotations

import random

import pymongo
import pytest
from pymongo.errors import OperationFailure

import multifora
from conftest import build_killed_midway

pytest.importorskip("snowballstemmer")
import text_model as tm  # noqa: E402 (after the skip: it needs snowballstemmer)


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code, e.value.details.get("errmsg", "")


def found(coll, search, **kw):
    q = {"$search": search, **kw}
    return {d["_id"]: d["s"] for d in coll.find({"$text": q}, {"s": {"$meta": "textScore"}})}


# ------------------------------------------------------------ the spec


def test_spec_as_listindexes_shows_it(client):
    c = client.t.c
    assert c.create_index([("title", "text"), ("body", "text")],
                          weights={"title": 10}) == "title_text_body_text"
    spec = [ix for ix in c.list_indexes() if ix["name"] == "title_text_body_text"][0]
    assert list(spec.items()) == [
        ("v", 2), ("key", {"_fts": "text", "_ftsx": 1}), ("name", "title_text_body_text"),
        ("weights", {"body": 1, "title": 10}), ("default_language", "english"),
        ("language_override", "language"), ("textIndexVersion", 3)]
    assert list(spec["key"]) == ["_fts", "_ftsx"]
    assert list(spec["weights"]) == ["body", "title"]  # sorted, as mongod's map


def test_compound_and_wildcard_specs(client):
    db = client.t
    db.a.create_index([("k", 1), ("t", "text"), ("z", -1)], default_language="french",
                      language_override="lang", name="kt")
    spec = [ix for ix in db.a.list_indexes() if ix["name"] == "kt"][0]
    assert list(spec["key"].items()) == [("k", 1), ("_fts", "text"), ("_ftsx", 1), ("z", -1)]
    assert spec["default_language"] == "french" and spec["language_override"] == "lang"
    db.b.create_index([("$**", "text")])
    spec = [ix for ix in db.b.list_indexes() if ix["name"] == "$**_text"][0]
    assert spec["weights"] == {"$**": 1}
    # weights given with fractions are kept as whole numbers (numberInt)
    db.w.create_index([("a", "text")], weights={"a": 2.9, "b": 3})
    spec = [ix for ix in db.w.list_indexes() if ix["name"] == "a_text"][0]
    assert spec["weights"] == {"a": 2, "b": 3}


@pytest.mark.parametrize("key,opts,code,msg", [
    ({"a": "text"}, {"textIndexVersion": 1}, 67, "bad textIndexVersion: 1"),
    ({"a": "text"}, {"textIndexVersion": 4}, 67, "bad textIndexVersion: 4"),
    # validateIndexSpec's type check comes first, as in mongod
    ({"a": "text"}, {"textIndexVersion": "3"}, 14,
     "The field 'textIndexVersion' must be a number, but got string"),
    ({"a": "text"}, {"weights": {"a": "x"}}, 67, "weight for text index needs numeric type"),
    ({"a": "text"}, {"weights": 5}, 14, "The field 'weights' must be an object, but got int"),
    ({"a": "text"}, {"weights": {"a": 0}}, 67,
     "text index weight must be in the exclusive interval (0,100000) but found: 0"),
    ({"a": "text"}, {"weights": {"$b": 1}}, 67,
     "weight cannot have path component with $ prefix"),
    ({"a": "text"}, {"default_language": "klingon"}, 67, "default_language is not valid"),
    ({"a": "text"}, {"default_language": 1}, 14,
     "The field 'default_language' must be a string, but got int"),
    ({"a": "text"}, {"language_override": "a.b"}, 67, "language_override is not valid"),
    ({"a": "text", "b": 2}, {}, 67, "expected value 1 or -1 for non-text key in compound index"),
    ({"a": "text", "b": 1, "c": "text"}, {}, 67, "'text' fields in index must all be adjacent"),
    ({"_ftsx": 1, "a": "text"}, {}, 67, "text index with reserved fields _fts/_ftsx not allowed"),
])
def test_spec_errors(client, key, opts, code, msg):
    spec = {"key": key, "name": "x", **opts}
    got = code_of(lambda: client.t.c.database.command("createIndexes", "c", indexes=[spec]))
    assert got[0] == code and msg in got[1], got


def test_one_text_index_per_collection(client):
    c = client.t.c
    c.create_index([("a", "text")])
    c.create_index([("a", "text")])  # the same again: nothing to do
    code, msg = code_of(lambda: c.create_index([("b", "text")]))
    assert code == 85 and "An equivalent index already exists" in msg
    code, msg = code_of(lambda: c.create_index([("k", 1), ("b", "text")]))
    assert (code, msg) == (67, 'only one text index per collection allowed, found existing '
                                'text index "a_text"')
    c.drop_index("a_text")
    c.create_index([("k", 1), ("b", "text")])


# ------------------------------------------------------------ scores


def test_scores_follow_mongods_formula(client):
    c = client.t.c
    c.create_index([("title", "text"), ("body", "text")], weights={"title": 3})
    docs = [
        {"_id": 1, "title": "Coffee", "body": "I like coffee and more coffee"},
        {"_id": 2, "title": "Tea time", "body": "no coffee here, only tea"},
        {"_id": 3, "title": "coffee", "body": ""},
        {"_id": 4, "body": "coffee coffee coffee coffee"},
        {"_id": 5, "title": "Tea"},
    ]
    c.insert_many(docs)
    got = found(c, "coffee")
    # by hand: 3's title is one word, but its stem "coffe" is not the
    # string itself (no 1.1); 4: freq 1+1/2+1/4+1/8, coeff 1
    assert got[3] == pytest.approx(3.0)
    assert got[4] == pytest.approx(1 * 1.875 * 1.0)
    # body of 1: like, coffe, coffe -> 3 tokens (i, and, more are stop words)
    assert got[1] == pytest.approx(3 * 1.0 + 1.5 * (0.5 * 2 / 3 + 0.5))
    # a field that is the term itself, any case: x 1.1
    assert found(c, "tea")[5] == pytest.approx(3 * 1.1)
    want = tm.search(docs, {"title": 3, "body": 1}, "coffee")
    assert got == pytest.approx(want)
    # sorted by score, highest first
    order = [d["_id"] for d in c.find({"$text": {"$search": "coffee"}},
                                      {"s": {"$meta": "textScore"}})
             .sort([("s", {"$meta": "textScore"})])]
    assert order == sorted(want, key=lambda k: -want[k])


def test_keys_are_one_per_term(client):
    c = client.t.c
    c.create_index([("t", "text")])
    docs = [{"_id": i, "t": s} for i, s in enumerate(
        ["the running runner runs", "", "a an the", ["list of", "strings runs"], 7,
         {"t": "no"}, "Ünïcödé façade"])]
    c.insert_many(docs)
    kpi = client.t.command("validate", "c")["keysPerIndex"]["t_text"]
    assert kpi == sum(len(tm.doc_scores(d, {"t": 1})) for d in docs)
    assert client.t.command("validate", "c")["valid"]


# ------------------------------------------------------- the corpus

EN = ("coffee tea running runner runs ran quickly quick brown fox jumps lazy dog database "
      "index indexes indexing search searching searched mongo documents document text "
      "scores score weighted weight language languages stemming stems stemmed café naïve "
      "résumé the a an of and to in is it with for on at by this that").split()
FR = ("le la les de des du un une et est dans pour sur avec café thé maison maisons "
      "chercher recherche recherches rapide rapidement document documents étoile étoiles "
      "élève élèves forêt forêts naïve noël garçon français française être avoir").split()


def corpus(n, seed=7):
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        fr = i % 4 == 0
        voc = FR if fr else EN
        d = {"_id": i,
             "title": " ".join(rng.choice(voc) for _ in range(rng.randint(1, 4))),
             "body": " ".join(rng.choice(voc) for _ in range(rng.randint(0, 30)))}
        if fr:
            d["language"] = "french"
        if i % 7 == 0:
            d["tags"] = [rng.choice(voc).capitalize() for _ in range(3)]
        if i % 11 == 0:
            d["title"] = d["title"].upper()
        docs.append(d)
    return docs


WEIGHTS = {"title": 5, "body": 1, "tags": 2}


@pytest.fixture(scope="module")
def corpus_coll(tmp_path_factory):
    srv = multifora.Server(str(tmp_path_factory.mktemp("corpus") / "db"), port=0)
    srv.start()
    c = pymongo.MongoClient(srv.uri)
    coll = c.textcorpus.docs
    coll.drop()
    docs = corpus(3000)
    coll.insert_many(docs)
    coll.create_index([("title", "text"), ("body", "text"), ("tags", "text")], weights=WEIGHTS)
    yield coll, docs
    c.close()
    srv.stop()


SEARCHES = [
    ("coffee", {}), ("running", {}), ("runs quick", {}), ("Database INDEXING", {}),
    ("cafe", {}), ("café", {"$diacriticSensitive": True}), ("Coffee", {"$caseSensitive": True}),
    ('"brown fox"', {}), ('fox -lazy', {}), ('search -"the dog"', {}), ("the a an", {}),
    ("naive resume", {}), ("-coffee", {}), ("documents text", {}),
    ("maisons", {"$language": "french"}), ("étoile forêt", {"$language": "fr"}),
    ('"café thé"', {"$language": "french"}), ("recherche -rapide", {"$language": "french"}),
    ("eleve", {"$language": "french"}), ("garçon", {"$language": "french",
                                                    "$diacriticSensitive": True}),
]


@pytest.mark.parametrize("search,kw", SEARCHES)
def test_corpus_against_the_model(corpus_coll, search, kw):
    coll, docs = corpus_coll
    got = found(coll, search, **kw)
    want = tm.search(docs, WEIGHTS, search, case=kw.get("$caseSensitive", False),
                     diacritic=kw.get("$diacriticSensitive", False),
                     qlang={"fr": "french"}.get(kw.get("$language"), kw.get("$language")))
    assert set(got) == set(want)
    for k in got:
        assert got[k] == pytest.approx(want[k], rel=1e-12), k


def test_corpus_random_queries(corpus_coll):
    coll, docs = corpus_coll
    rng = random.Random(3)
    for _ in range(40):
        words = [rng.choice(EN + FR) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            words.append("-" + rng.choice(EN))
        s = " ".join(words)
        got = found(coll, s)
        want = tm.search(docs, WEIGHTS, s)
        assert set(got) == set(want), s
        assert all(got[k] == pytest.approx(want[k], rel=1e-12) for k in got), s


def test_corpus_sorted_limit_and_batches(corpus_coll):
    coll, docs = corpus_coll
    want = tm.search(docs, WEIGHTS, "coffee tea")
    top = sorted(want.items(), key=lambda kv: -kv[1])[:25]
    got = list(coll.find({"$text": {"$search": "coffee tea"}}, {"s": {"$meta": "textScore"}})
               .sort([("s", {"$meta": "textScore"})]).limit(25))
    assert [d["s"] for d in got] == pytest.approx([s for _, s in top])
    # across getMore batches, with another condition beside $text
    many = list(coll.find({"$text": {"$search": "coffee"}, "_id": {"$gte": 1000}},
                          batch_size=7))
    assert {d["_id"] for d in many} == {k for k in tm.search(docs, WEIGHTS, "coffee")
                                        if k >= 1000}
    assert coll.count_documents({"$text": {"$search": "coffee"}}) == len(
        tm.search(docs, WEIGHTS, "coffee"))


def test_writes_keep_the_index(client):
    c = client.t.c
    c.create_index([("t", "text")])
    c.insert_many([{"_id": i, "t": f"alpha beta{i % 3}"} for i in range(30)])
    c.update_many({"_id": {"$lt": 10}}, {"$set": {"t": "gamma"}})
    c.delete_many({"_id": {"$gte": 25}})
    assert set(found(c, "alpha")) == set(range(10, 25))
    assert set(found(c, "gamma")) == set(range(10))
    v = client.t.command("validate", "c")
    assert v["valid"] and v["keysPerIndex"]["t_text"] == 10 + 15 * 2


def test_compound_prefix_needs_equality(client):
    c = client.t.c
    c.create_index([("k", 1), ("t", "text")])
    c.insert_many([{"_id": i, "k": i % 2, "t": "apple pie"} for i in range(10)])
    code, msg = code_of(lambda: list(c.find({"$text": {"$search": "apple"}})))
    assert code == 291 and "are equality predicates given for all prefix fields" in msg
    got = {d["_id"] for d in c.find({"k": 1, "$text": {"$search": "apple"}})}
    assert got == {1, 3, 5, 7, 9}
    plan = c.find({"k": 1, "$text": {"$search": "apple"}}).explain()["queryPlanner"]
    assert plan["winningPlan"]["indexPrefix"] == {"k": 1}
    code, msg = code_of(lambda: c.insert_one({"k": [1, 2], "t": "x"}))
    assert code == 201 and "of text index contains an array" in msg


def test_language_override_per_document(client):
    c = client.t.c
    c.create_index([("t", "text")])
    # French stems chevaux to cheval, English does not
    c.insert_many([{"_id": 1, "t": "les chevaux", "language": "french"},
                   {"_id": 2, "t": "les chevaux"}])
    assert set(found(c, "cheval", **{"$language": "french"})) == {1}
    assert set(found(c, "chevaux")) == {2}
    code, msg = code_of(lambda: c.insert_one({"t": "x", "language": "klingon"}))
    assert (code, msg) == (17262, "language override unsupported: klingon")
    code, _ = code_of(lambda: c.insert_one({"t": "x", "language": 5}))
    assert code == 17261


# ------------------------------------------------------------ words


# Code points and whether mongod's delimiter list (Unicode 8.0's PropList:
# White_Space, Dash, Hyphen, Quotation_Mark, Terminal_Punctuation,
# Pattern_Syntax, STerm) has them.
DELIMITERS = [
    (0x0964, True),   # DEVANAGARI DANDA: Terminal_Punctuation, STerm
    (0x2010, True),   # HYPHEN: Dash, Hyphen
    (0x00A0, True),   # NO-BREAK SPACE: White_Space
    (0x0085, True),   # NEXT LINE: White_Space
    (0x2019, True),   # RIGHT SINGLE QUOTATION MARK: Quotation_Mark, in English too
    (0x3001, True),   # IDEOGRAPHIC COMMA: Terminal_Punctuation
    (0x061F, True),   # ARABIC QUESTION MARK: Terminal_Punctuation, STerm
    (0x2E3B, True),   # THREE-EM DASH: Dash, Pattern_Syntax
    (0x2E4F, True),   # reserved in 8.0 inside Pattern_Syntax's 2E00..2E7F
    (0xFF0C, True),   # FULLWIDTH COMMA
    (0x00B7, False),  # MIDDLE DOT: no such property (a diacritic, removed)
    (0x11944, False),  # DIVES AKURU DOUBLE DANDA: Unicode 13, after mongod's list
    (0x1F600, False),  # an emoji
    (0xFF3F, False),  # FULLWIDTH LOW LINE: a connector, as `_`
    (0x005F, False),  # LOW LINE
    (0x001D, False),  # a control: not White_Space
]


@pytest.mark.parametrize("cp,delim", DELIMITERS, ids=lambda v: hex(v) if isinstance(v, int) else v)
def test_delimiters_are_mongods(client, cp, delim):
    c = client.t.c
    c.create_index([("t", "text")], default_language="none")
    c.insert_one({"_id": 1, "t": "alpha" + chr(cp) + "beta"})
    assert (c.find_one({"$text": {"$search": "beta"}}) is not None) == delim
    assert (c.find_one({"$text": {"$search": "alpha"}}) is not None) == delim


def test_apostrophe_only_in_english(client):
    db = client.t
    db.en.create_index([("t", "text")])
    db.fr.create_index([("t", "text")], default_language="french")
    for c in (db.en, db.fr):
        c.insert_one({"_id": 1, "t": "l'avion"})
    assert db.en.find_one({"$text": {"$search": "avion"}}) is None
    assert db.fr.find_one({"$text": {"$search": "avion"}}) is not None


def test_text_index_version_2(client):
    # mongod 7.0 still builds version 2 on request, with its legacy
    # tokenizer: ASCII delimiters and case folding, no diacritics removed
    c = client.t.c
    c.create_index([("t", "text")], textIndexVersion=2)
    spec = [ix for ix in c.list_indexes() if ix["name"] == "t_text"][0]
    assert spec["textIndexVersion"] == 2
    c.insert_many([{"_id": 1, "t": "Café au lait_x"},
                   {"_id": 2, "t": "new\u0964thing over\u2019there"},
                   {"_id": 3, "t": "ÉCOLE school"}, {"_id": 4, "t": "running dogs"},
                   {"_id": 5, "t": "alpha-beta"}])

    def ids(search, **kw):
        return sorted(d["_id"] for d in c.find({"$text": {"$search": search, **kw}}))
    assert ids("café") == [1] and ids("cafe") == []           # no diacritics removed
    assert ids("lait_x") == [1]                                # `_` is text
    assert ids("thing") == [] and ids("over") == []            # non-ASCII is text
    assert ids("ÉCOLE") == [3] and ids("école") == []          # ASCII case only
    assert ids("run") == [4] and ids("beta") == [5]            # stems; '-' delimits
    assert ids('"AU LAIT"') == [1] and ids('"AU LAIT"', **{"$caseSensitive": True}) == []
    got = {d["_id"]: d["s"] for d in c.find({"$text": {"$search": "dogs"}},
                                             {"s": {"$meta": "textScore"}})}
    assert got == {4: pytest.approx(1 * 1 * (0.5 * 1 / 2 + 0.5))}
    plan = c.find({"$text": {"$search": "dog"}}).explain()["queryPlanner"]["winningPlan"]
    assert plan["textIndexVersion"] == 2
    code, msg = code_of(lambda: list(c.find({"$text": {"$search": "x", "$language": "xx"}})))
    assert (code, msg) == (2, 'unsupported language: "xx" for text index version 2')


# ------------------------------------------------------------ errors


def test_errors(client):
    db = client.t
    code, msg = code_of(lambda: list(db.nothere.find({"$text": {"$search": "x"}})))
    assert (code, msg) == (27, "text index required for $text query")
    db.c.insert_one({"a": 1})
    code, msg = code_of(lambda: list(db.c.find({"$text": {"$search": "x"}})))
    assert (code, msg) == (27, "text index required for $text query")
    db.c.create_index([("t", "text")])
    cases = [
        ({"$and": [{"$text": {"$search": "a"}}, {"$text": {"$search": "b"}}]},
         2, "Too many text expressions"),
        ({"$nor": [{"$text": {"$search": "a"}}]}, 2, "text expression not allowed in nor"),
        ({"a": {"$elemMatch": {"$text": {"$search": "a"}}}}, 2,
         "$text can only be applied to the top-level document"),
        ({"$text": "a"}, 2, "$text expects an object"),
        ({"$text": {"$search": 1}}, 14, "$search requires a string value"),
        ({"$text": {"$search": "a", "$caseSensitive": 1}}, 14,
         "$caseSensitive requires a boolean value"),
        ({"$text": {"$search": "a", "foo": 1}}, 2, "extra fields in $text"),
        ({"$text": {"$search": "a", "$language": "xx"}}, 2,
         'unsupported language: "xx" for text index version 3'),
    ]
    for filt, want_code, want_msg in cases:
        code, msg = code_of(lambda: list(db.c.find(filt)))
        assert code == want_code and want_msg in msg, (filt, code, msg)
    code, msg = code_of(lambda: list(db.c.find({}, {"s": {"$meta": "textScore"}})))
    assert (code, msg) == (40218, "query requires text score metadata, but it is not available")
    code, _ = code_of(lambda: list(db.c.find({}).sort([("s", {"$meta": "textScore"})])))
    assert code == 40218
    code, msg = code_of(lambda: list(db.c.aggregate(
        [{"$match": {"a": 1}}, {"$match": {"$text": {"$search": "a"}}}])))
    assert (code, msg) == (17313, "$match with $text is only allowed as the first pipeline stage")


def test_aggregate_match_text_first(client):
    c = client.t.c
    c.create_index([("t", "text")])
    c.insert_many([{"_id": i, "t": w} for i, w in enumerate(["red apple", "green pear", "apple"])])
    got = [d["_id"] for d in c.aggregate([{"$match": {"$text": {"$search": "apple"}}},
                                          {"$sort": {"_id": 1}}])]
    assert got == [0, 2]


# ------------------------------------------------------------ explain


def test_explain_shapes(client):
    c = client.t.c
    c.create_index([("t", "text")])
    c.insert_many([{"_id": i, "t": f"one two {i}", "n": i} for i in range(20)])
    p = c.find({"$text": {"$search": "one"}}).explain()["queryPlanner"]["winningPlan"]
    assert p["stage"] == "TEXT_MATCH" and p["indexName"] == "t_text"
    assert p["parsedTextQuery"] == {"terms": ["one"], "negatedTerms": [], "phrases": [],
                                    "negatedPhrases": []}
    assert p["textIndexVersion"] == 3 and p["indexPrefix"] == {}
    assert p["inputStage"]["stage"] == "FETCH"
    ix = p["inputStage"]["inputStage"]
    assert ix["stage"] == "IXSCAN" and ix["keyPattern"] == {"_fts": "text", "_ftsx": 1}
    assert ix["direction"] == "backward" and ix["indexBounds"] == {} and ix["isMultiKey"]
    p = c.find({"$text": {"$search": "one two -three \"one two\""}, "n": {"$gt": 3}}) \
        .explain()["queryPlanner"]["winningPlan"]
    assert p["parsedTextQuery"] == {"terms": ["one", "two"], "negatedTerms": ["three"],
                                    "phrases": ["one two"], "negatedPhrases": []}
    assert p["inputStage"]["stage"] == "FETCH"
    assert p["inputStage"]["filter"] == {"n": {"$gt": 3}}
    assert p["inputStage"]["inputStage"]["stage"] == "OR"
    assert len(p["inputStage"]["inputStage"]["inputStages"]) == 2
    e = c.database.command("explain", {"find": "c", "filter": {"$text": {"$search": "one two"}},
                                       "projection": {"s": {"$meta": "textScore"}}},
                           verbosity="executionStats")
    p = e["queryPlanner"]["winningPlan"]
    p = p.get("inputStage", p) if p["stage"] != "TEXT_MATCH" else p
    assert p["stage"] == "TEXT_MATCH" and p["inputStage"]["stage"] == "TEXT_OR"
    assert [s["stage"] for s in p["inputStage"]["inputStages"]] == ["IXSCAN", "IXSCAN"]
    st = e["executionStats"]
    assert st["nReturned"] == 20 and st["totalKeysExamined"] == 40
    assert st["totalDocsExamined"] == 20


# ------------------------------------------------------------ kill -9


def test_build_killed_midway_leaves_all_or_nothing(tmp_path):
    docs = corpus(20000, seed=11)
    s = build_killed_midway(tmp_path / "db", docs, [("title", "text"), ("body", "text")])
    c = s.client()
    try:
        v = c.t.command("validate", "c")
        assert v["valid"] is True, v
        kpi = v["keysPerIndex"]
        want = sum(len(tm.doc_scores(d, {"title": 1, "body": 1})) for d in docs)
        assert kpi in ({"_id_": 20000}, {"_id_": 20000, "title_text_body_text": want}), kpi
        if len(kpi) == 2:
            got = found(c.t.c, "coffee")
            assert set(got) == set(tm.search(docs, {"title": 1, "body": 1}, "coffee"))
        else:
            code, _ = code_of(lambda: list(c.t.c.find({"$text": {"$search": "x"}})))
            assert code == 27
    finally:
        c.close()
        s.stop()
