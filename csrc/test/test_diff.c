/* Cases for csrc/coll/diff.c: a $v: 2 diff described as a change stream's
 * updateDescription (expectations from mongod's
 * change_stream_document_diff_parser_test.cpp and the change-streams spec
 * tests), applied to a pre-image (mongod's document_diff_applier.cpp), and
 * round trips through oplog.c's mf_cl_update_diff. */
#include "test.h"
#include "../coll/coll.h"

#include <stdlib.h>

static bson_t *json(const char *s)
{
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)s, -1, &e);
    if (!b)
        fprintf(stderr, "bad JSON in test: %s (%s)\n", s, e.message);
    return b;
}

/* Whether `got` is byte for byte the document `want` (JSON) parses to;
 * fails the case with both shown when not. */
static bool bson_is(const bson_t *got, const char *want, const char *what, const char *file,
                    int line)
{
    bson_t *w = json(want);
    bool same = w && bson_equal(got, w);
    if (!same) {
        char *g = bson_as_canonical_extended_json(got, NULL);
        char *x = w ? bson_as_canonical_extended_json(w, NULL) : NULL;
        char m[4096];
        snprintf(m, sizeof m, "%s:\n    got  %s\n    want %s", what, g, x ? x : want);
        mft_fail(file, line, m);
        bson_free(g);
        bson_free(x);
    }
    if (w)
        bson_destroy(w);
    return same;
}

#define CHECK_BSON(got, want, what)                                               \
    do {                                                                          \
        if (!bson_is((got), (want), (what), __FILE__, __LINE__))                  \
            return;                                                               \
    } while (0)

/* ------------------------------------------------------------ describe */

typedef struct dcase {
    const char *what, *diff;
    bool disambiguate;
    const char *want; /* the updateDescription */
} dcase;

static const dcase describe_cases[] = {
    {"flat set, unset and insert",
     "{\"d\": {\"x\": false, \"y\": false}, \"u\": {\"a\": 2}, "
     "\"i\": {\"n\": \"s\", \"m\": 1}}",
     false,
     "{\"updatedFields\": {\"a\": 2, \"n\": \"s\", \"m\": 1}, \"removedFields\": [\"x\", \"y\"], "
     "\"truncatedArrays\": []}"},
    {"nested sub-documents", "{\"u\": {\"a\": 1}, \"sb\": {\"d\": {\"e\": false}, \"u\": "
     "{\"c\": {\"k\": 2}}, \"sf\": {\"i\": {\"g\": 3}}}, \"sh\": {\"d\": {\"j\": false}}}", false,
     "{\"updatedFields\": {\"a\": 1, \"b.c\": {\"k\": 2}, \"b.f.g\": 3}, "
     "\"removedFields\": [\"b.e\", \"h.j\"], \"truncatedArrays\": []}"},
    {"array elements", "{\"sarr\": {\"a\": true, \"s0\": {\"u\": {\"x\": 1}}, \"u2\": 5, "
     "\"s3\": {\"a\": true, \"u0\": [1]}}}", true,
     "{\"updatedFields\": {\"arr.0.x\": 1, \"arr.2\": 5, \"arr.3.0\": [1]}, \"removedFields\": [], "
     "\"truncatedArrays\": [], \"disambiguatedPaths\": {}}"},
    {"array truncation", "{\"u\": {\"z\": null}, \"sarr\": {\"a\": true, \"l\": 2, \"u1\": 7}, "
     "\"sq\": {\"sr\": {\"a\": true, \"l\": 0}}}", true,
     "{\"updatedFields\": {\"z\": null, \"arr.1\": 7}, \"removedFields\": [], \"truncatedArrays\": "
     "[{\"field\": \"arr\", \"newSize\": 2}, {\"field\": \"q.r\", \"newSize\": 0}], "
     "\"disambiguatedPaths\": {}}"},
    {"no disambiguatedPaths without showExpandedEvents", "{\"sa\": {\"u\": {\"1\": 2}}}", false,
     "{\"updatedFields\": {\"a.1\": 2}, \"removedFields\": [], \"truncatedArrays\": []}"},
    /* mongod's ChangeStreamDocumentDiffParserTest cases */
    {"DisambiguatesDottedFields",
     "{\"u\": {\"a.b\": 1}, \"sc.d.\": {\"u\": {\"e\": 1, \"f.g\": 1}, "
     "\"sh\": {\"u\": {\"i.j\": 1}}}, \"sk\": {\"u\": {\"l.m\": 1}}}",
     true,
     "{\"updatedFields\": {\"a.b\": 1, \"c.d..e\": 1, \"c.d..f.g\": 1, \"c.d..h.i.j\": 1, "
     "\"k.l.m\": 1}, \"removedFields\": [], \"truncatedArrays\": [], \"disambiguatedPaths\": "
     "{\"a.b\": [\"a.b\"], \"c.d..e\": [\"c.d.\", \"e\"], \"c.d..f.g\": [\"c.d.\", \"f.g\"], "
     "\"c.d..h.i.j\": [\"c.d.\", \"h\", \"i.j\"], \"k.l.m\": [\"k\", \"l.m\"]}}"},
    {"DisambiguatesNumericFields", "{\"sa\": {\"u\": {\"0\": 1}}}", true,
     "{\"updatedFields\": {\"a.0\": 1}, \"removedFields\": [], \"truncatedArrays\": [], "
     "\"disambiguatedPaths\": {\"a.0\": [\"a\", \"0\"]}}"},
    {"DisambiguatesNumericFieldsFromArrayIndices", "{\"sa\": {\"s0\": {\"a\": true, \"u0\": 1}}}",
     true,
     "{\"updatedFields\": {\"a.0.0\": 1}, \"removedFields\": [], \"truncatedArrays\": [], "
     "\"disambiguatedPaths\": {\"a.0.0\": [\"a\", \"0\", 0]}}"},
    {"DoesNotDisambiguateNumericFieldAtRootOfDocument", "{\"u\": {\"0\": 1}}", true,
     "{\"updatedFields\": {\"0\": 1}, \"removedFields\": [], \"truncatedArrays\": [], "
     "\"disambiguatedPaths\": {}}"},
    {"DoesNotDisambiguateNumericFieldWithLeadingZeroes", "{\"sa\": {\"u\": {\"01\": 1}}}", true,
     "{\"updatedFields\": {\"a.01\": 1}, \"removedFields\": [], \"truncatedArrays\": [], "
     "\"disambiguatedPaths\": {}}"},
    {"DoesNotDisambiguateIfOnlyArrayIndicesPresent",
     "{\"sa\": {\"a\": true, \"s0\": {\"u\": {\"b\": 1}}}}", true,
     "{\"updatedFields\": {\"a.0.b\": 1}, \"removedFields\": [], \"truncatedArrays\": [], "
     "\"disambiguatedPaths\": {}}"},
    {"DisambiguatesRemovedFields",
     "{\"d\": {\"a.b\": false}, \"sc\": {\"d\": {\"0\": false}}}", true,
     "{\"updatedFields\": {}, \"removedFields\": [\"a.b\", \"c.0\"], \"truncatedArrays\": [], "
     "\"disambiguatedPaths\": {\"a.b\": [\"a.b\"], \"c.0\": [\"c\", \"0\"]}}"},
    {"DisambiguatesTruncatedArrays", "{\"sa.b\": {\"a\": true, \"l\": 5}, \"sc\": {\"s0\": "
     "{\"a\": true, \"l\": 5}}}", true,
     "{\"updatedFields\": {}, \"removedFields\": [], \"truncatedArrays\": [{\"field\": \"a.b\", "
     "\"newSize\": 5}, {\"field\": \"c.0\", \"newSize\": 5}], \"disambiguatedPaths\": "
     "{\"a.b\": [\"a.b\"], \"c.0\": [\"c\", \"0\"]}}"},
    {"DisambiguatesCombinationOfAmbiguousFields",
     "{\"sa.b\": {\"a\": true, \"s0\": {\"u\": {\"1\": 1}}}, \"sc\": {\"a\": true, \"s0\": {\"u\": "
     "{\"d.e\": 1}}, \"s1\": {\"u\": {\"2\": 1}}}, \"sf\": {\"s1\": {\"u\": {\"g.h\": 1}, \"s2\": "
     "{\"a\": true, \"u3\": 1, \"s4\": {\"u\": {\"5\": 1}}}}}}", true,
     "{\"updatedFields\": {\"a.b.0.1\": 1, \"c.0.d.e\": 1, \"c.1.2\": 1, \"f.1.g.h\": 1, "
     "\"f.1.2.3\": 1, \"f.1.2.4.5\": 1}, \"removedFields\": [], \"truncatedArrays\": [], "
     "\"disambiguatedPaths\": {\"a.b.0.1\": [\"a.b\", 0, \"1\"], \"c.0.d.e\": [\"c\", 0, \"d.e\"], "
     "\"c.1.2\": [\"c\", 1, \"2\"], \"f.1.g.h\": [\"f\", \"1\", \"g.h\"], \"f.1.2.3\": [\"f\", "
     "\"1\", \"2\", 3], \"f.1.2.4.5\": [\"f\", \"1\", \"2\", 4, \"5\"]}}"},
    {"DoesNotFullyDisambiguateWithDuplicateFieldsInDiff",
     "{\"u\": {\"a.b\": 2}, \"sa\": {\"u\": {\"b\": 1}}}", true,
     "{\"updatedFields\": {\"a.b\": 2, \"a.b\": 1}, \"removedFields\": [], \"truncatedArrays\": "
     "[], \"disambiguatedPaths\": {\"a.b\": [\"a.b\"]}}"},
};

MFT_CASE(diff_describe_table, "/coll/diff/describe_table")
{
    for (size_t i = 0; i < sizeof describe_cases / sizeof describe_cases[0]; i++) {
        const dcase *c = &describe_cases[i];
        bson_t *diff = json(c->diff), out = BSON_INITIALIZER;
        mf_error err = {0};
        CHECK(diff);
        CHECK_INT(mf_cl_diff_describe(diff, c->disambiguate, &out, &err), 0);
        CHECK_BSON(&out, c->want, c->what);
        bson_destroy(&out);
        bson_destroy(diff);
    }
}

/* The change-streams spec's disambiguatedPaths cases, from the update's
 * pre- and post-image through mf_cl_update_diff as the oplog has it. */
MFT_CASE(diff_describe_spec, "/coll/diff/describe_spec")
{
    static const char *const cases[][3] = {
        /* $set {"a.1": 2} on {a: {"1": 1}} */
        {"{\"_id\": 1, \"a\": {\"1\": 1}}", "{\"_id\": 1, \"a\": {\"1\": 2}}",
         "{\"updatedFields\": {\"a.1\": 2}, \"removedFields\": [], \"truncatedArrays\": [], "
         "\"disambiguatedPaths\": {\"a.1\": [\"a\", \"1\"]}}"},
        /* $set {"a.0.1": 2} on {a: [{"1": 1}]} */
        {"{\"_id\": 1, \"a\": [{\"1\": 1}]}", "{\"_id\": 1, \"a\": [{\"1\": 2}]}",
         "{\"updatedFields\": {\"a.0.1\": 2}, \"removedFields\": [], \"truncatedArrays\": [], "
         "\"disambiguatedPaths\": {\"a.0.1\": [\"a\", {\"$numberInt\": \"0\"}, \"1\"]}}"},
        /* the spec's array truncation: $set array: ["foo", {a: "bar"}] */
        {"{\"_id\": 1, \"a\": 1, \"array\": [\"foo\", {\"a\": \"bar\"}, 1, 2, 3]}",
         "{\"_id\": 1, \"a\": 1, \"array\": [\"foo\", {\"a\": \"bar\"}]}",
         "{\"updatedFields\": {}, \"removedFields\": [], \"truncatedArrays\": [{\"field\": "
         "\"array\", \"newSize\": 2}], \"disambiguatedPaths\": {}}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bson_t *old = json(cases[i][0]), *new_doc = json(cases[i][1]), diff, out = BSON_INITIALIZER;
        mf_error err = {0};
        CHECK(old && new_doc);
        CHECK_INT(mf_cl_update_diff(old, new_doc, &diff), 0);
        CHECK_INT(mf_cl_diff_describe(&diff, true, &out, &err), 0);
        CHECK_BSON(&out, cases[i][2], cases[i][1]);
        bson_destroy(&out);
        bson_destroy(&diff);
        bson_destroy(old);
        bson_destroy(new_doc);
    }
}

/* Diffs mongod's readers refuse: BadValue, and `out` untouched. */
static const char *const bad_diffs[] = {
    "{}",
    "{\"x\": {}}",
    "{\"u\": {\"a\": 1}, \"d\": {\"b\": false}}",
    "{\"u\": {\"a\": 1}, \"u\": {\"b\": 1}}",
    "{\"u\": 1}",
    "{\"sa\": 1}",
    "{\"sa\": {}}",
    "{\"sa\": {\"u\": {\"b\": 1}}, \"i\": {\"c\": 1}}",
    "{\"sa\": {\"a\": false}}",
    "{\"sa\": {\"a\": 1}}",
    "{\"sa\": {\"a\": true, \"l\": 1.0}}",
    "{\"sa\": {\"a\": true, \"x1\": 1}}",
    "{\"sa\": {\"a\": true, \"u\": 1}}",
    "{\"sa\": {\"a\": true, \"u1x\": 1}}",
    "{\"sa\": {\"a\": true, \"s1\": 5}}",
    "{\"sa\": {\"a\": true, \"s1\": {\"a\": true, \"l\": \"x\"}}}",
};

MFT_CASE(diff_describe_errors, "/coll/diff/describe_errors")
{
    for (size_t i = 0; i < sizeof bad_diffs / sizeof bad_diffs[0]; i++) {
        bson_t *diff = json(bad_diffs[i]), out = BSON_INITIALIZER;
        mf_error err = {0};
        CHECK(diff);
        int rc = mf_cl_diff_describe(diff, true, &out, &err);
        if (rc != MF_BadValue) {
            mft_fail(__FILE__, __LINE__, bad_diffs[i]);
            return;
        }
        CHECK(err.msg[0] != '\0');
        CHECK_INT(out.len, 5);
        bson_destroy(&out);
        bson_destroy(diff);
    }
}

/* ------------------------------------------------------------ apply */

typedef struct acase {
    const char *what, *pre, *diff, *want;
} acase;

static const acase apply_cases[] = {
    {"updates in place, inserts at the end", "{\"a\": 1, \"b\": 2, \"c\": 3, \"e\": 5}",
     "{\"d\": {\"a\": false}, \"u\": {\"c\": \"x\"}, \"i\": {\"z\": 0, \"y\": 1}}",
     "{\"b\": 2, \"c\": \"x\", \"e\": 5, \"z\": 0, \"y\": 1}"},
    {"an update of a missing field goes to the end, before the inserts", "{\"x\": 1}",
     "{\"u\": {\"a\": 1}, \"i\": {\"b\": 2}}", "{\"x\": 1, \"a\": 1, \"b\": 2}"},
    {"an inserted field the document has moves to the end", "{\"a\": 1, \"b\": 2}",
     "{\"i\": {\"a\": 3}}", "{\"b\": 2, \"a\": 3}"},
    {"deleting a missing field", "{\"a\": 1}", "{\"d\": {\"z\": false}}", "{\"a\": 1}"},
    {"a sub-diff of a missing field", "{\"x\": 1}", "{\"sa\": {\"u\": {\"b\": 1}}}",
     "{\"x\": 1}"},
    {"nested documents", "{\"a\": {\"b\": {\"c\": 1, \"d\": 2}, \"e\": 3}, \"f\": 4}",
     "{\"sa\": {\"d\": {\"e\": false}, \"sb\": {\"u\": {\"c\": [1]}, \"i\": {\"g\": {}}}}}",
     "{\"a\": {\"b\": {\"c\": [1], \"d\": 2, \"g\": {}}}, \"f\": 4}"},
    {"u past the end pads with null", "{\"a\": [1, 2]}", "{\"sa\": {\"a\": true, \"u4\": 5}}",
     "{\"a\": [1, 2, null, null, 5]}"},
    {"l past the end pads with null", "{\"a\": [1]}", "{\"sa\": {\"a\": true, \"l\": 3}}",
     "{\"a\": [1, null, null]}"},
    {"truncation and an update", "{\"a\": [1, 2, 3, 4]}",
     "{\"sa\": {\"a\": true, \"l\": 2, \"u1\": 9}}", "{\"a\": [1, 9]}"},
    {"truncation to empty", "{\"a\": [1, 2]}", "{\"sa\": {\"a\": true, \"l\": 0}}",
     "{\"a\": []}"},
    {"arrays in arrays", "{\"a\": [[1, 2], [3], {\"x\": [0]}]}",
     "{\"sa\": {\"a\": true, \"s0\": {\"a\": true, \"l\": 1}, \"s1\": {\"a\": true, \"u1\": 4}, "
     "\"s2\": {\"sx\": {\"a\": true, \"u0\": 7}}}}",
     "{\"a\": [[1], [3, 4], {\"x\": [7]}]}"},
    {"a document diff meeting a scalar makes null", "{\"a\": 1, \"b\": 2}",
     "{\"sa\": {\"u\": {\"b\": 1}}}", "{\"a\": null, \"b\": 2}"},
    {"a document diff meeting an array makes null", "{\"a\": [1]}",
     "{\"sa\": {\"u\": {\"b\": 1}}}", "{\"a\": null}"},
    {"an array diff meeting a document makes null", "{\"a\": {\"b\": 1}}",
     "{\"sa\": {\"a\": true, \"u0\": 1}}", "{\"a\": null}"},
    {"a sub-diff of a missing element makes null", "{\"a\": [1]}",
     "{\"sa\": {\"a\": true, \"s2\": {\"u\": {\"b\": 1}}}}", "{\"a\": [1, null, null]}"},
    {"a sub-diff of an element of another type makes null", "{\"a\": [1, {\"b\": 0}]}",
     "{\"sa\": {\"a\": true, \"s0\": {\"u\": {\"b\": 1}}, \"s1\": {\"a\": true, \"u0\": 1}}}",
     "{\"a\": [null, null]}"},
    {"array keys are renumbered", "{\"a\": {\"$numberInt\": \"1\"}}", "{\"u\": {\"a\": []}}",
     "{\"a\": []}"},
};

MFT_CASE(diff_apply_table, "/coll/diff/apply_table")
{
    for (size_t i = 0; i < sizeof apply_cases / sizeof apply_cases[0]; i++) {
        const acase *c = &apply_cases[i];
        bson_t *pre = json(c->pre), *diff = json(c->diff), out;
        mf_error err = {0};
        CHECK(pre && diff);
        CHECK_INT(mf_cl_diff_apply(pre, diff, &out, &err), 0);
        CHECK_BSON(&out, c->want, c->what);
        bson_destroy(&out);
        bson_destroy(pre);
        bson_destroy(diff);
    }
}

MFT_CASE(diff_apply_errors, "/coll/diff/apply_errors")
{
    static const char *const more[] = {
        "{\"u\": {\"a\": 1}, \"i\": {\"a\": 2}}",           /* mongod's 4728000 */
        "{\"d\": {\"a\": false}, \"sa\": {\"u\": {\"x\": 1}}}", /* the same */
        "{\"sa\": {\"a\": true, \"u2\": 1, \"u1\": 1}}",     /* indexes descend */
        "{\"sa\": {\"a\": true, \"u1\": 1, \"s1\": {\"u\": {\"x\": 1}}}}",
        "{\"sa\": {\"a\": true, \"l\": 1, \"u3\": 1}}", /* past the new length */
        "{\"sa\": {\"a\": true, \"l\": -1}}",
        "{\"sa\": {\"a\": true, \"u99999999999\": 1}}",
    };
    bson_t *pre = json("{\"a\": [1, 2, 3], \"b\": {\"x\": 0}}");
    CHECK(pre);
    for (size_t i = 0; i < sizeof bad_diffs / sizeof bad_diffs[0] + sizeof more / sizeof more[0];
         i++) {
        const char *s = i < sizeof bad_diffs / sizeof bad_diffs[0]
                            ? bad_diffs[i]
                            : more[i - sizeof bad_diffs / sizeof bad_diffs[0]];
        bson_t *diff = json(s), out;
        mf_error err = {0};
        CHECK(diff);
        /* `out` is not initialised on failure: nothing to destroy (ASan's
         * leak check would see it) */
        if (mf_cl_diff_apply(pre, diff, &out, &err) != MF_BadValue) {
            mft_fail(__FILE__, __LINE__, s);
            return;
        }
        CHECK(err.msg[0] != '\0');
        bson_destroy(diff);
    }
    bson_destroy(pre);
}

/* ------------------------------------------------------------ round trips */

/* mf_cl_update_diff(old, new) applied to old gives new, byte for byte, and
 * describes without error.  False (the case failed) when not. */
static bool round_trip(const bson_t *old, const bson_t *new_doc, bool *diffed, const char *file,
                       int line)
{
    bson_t diff, got, desc = BSON_INITIALIZER;
    mf_error err = {0};
    char m[2048];
    *diffed = false;
    if (mf_cl_update_diff(old, new_doc, &diff) != 0) {
        bson_destroy(&diff);
        return true; /* fields reordered: the oplog logs the whole document */
    }
    if (bson_count_keys(&diff) == 0) {
        bson_destroy(&diff);
        return true; /* unchanged: no oplog entry */
    }
    *diffed = true;
    bool ok = mf_cl_diff_apply(old, &diff, &got, &err) == 0;
    if (!ok) {
        snprintf(m, sizeof m, "apply failed: %s", err.msg);
    } else {
        ok = bson_equal(&got, new_doc);
        bson_destroy(&got);
        if (!ok)
            snprintf(m, sizeof m, "applied diff differs");
    }
    if (ok && (mf_cl_diff_describe(&diff, true, &desc, &err) != 0 ||
               mf_cl_diff_describe(&diff, false, &desc, &err) != 0)) {
        ok = false;
        snprintf(m, sizeof m, "describe failed: %s", err.msg);
    }
    if (!ok) {
        char *a = bson_as_canonical_extended_json(old, NULL);
        char *b = bson_as_canonical_extended_json(new_doc, NULL);
        char *d = bson_as_canonical_extended_json(&diff, NULL);
        size_t n = strlen(m);
        snprintf(m + n, sizeof m - n, "\n    old  %s\n    new  %s\n    diff %s", a, b, d);
        mft_fail(file, line, m);
        bson_free(a);
        bson_free(b);
        bson_free(d);
    }
    bson_destroy(&desc);
    bson_destroy(&diff);
    return ok;
}

MFT_CASE(diff_round_trip, "/coll/diff/round_trip")
{
    static const char *const pairs[][2] = {
        {"{\"_id\": 1, \"a\": 1}", "{\"_id\": 1, \"a\": 2}"},
        {"{\"_id\": 1, \"a\": 1, \"b\": 2}", "{\"_id\": 1, \"b\": 2}"},
        {"{\"_id\": 1}", "{\"_id\": 1, \"x\": {\"y\": [1, 2]}}"},
        {"{\"_id\": 1, \"a\": 1, \"b\": 2, \"c\": 3}", "{\"_id\": 1, \"b\": 5, \"d\": 4}"},
        {"{\"_id\": 1, \"a\": {\"b\": 1, \"c\": {\"d\": 2}}}",
         "{\"_id\": 1, \"a\": {\"b\": 1, \"c\": {\"d\": 3, \"e\": 4}}}"},
        {"{\"_id\": 1, \"a\": [1, 2, 3, 4, 5]}", "{\"_id\": 1, \"a\": [1, 2]}"},
        {"{\"_id\": 1, \"a\": [1, 2]}", "{\"_id\": 1, \"a\": [1, 2, 3, [4]]}"},
        {"{\"_id\": 1, \"a\": [1, {\"b\": 1}, [2, 3]]}",
         "{\"_id\": 1, \"a\": [0, {\"b\": 2, \"c\": 1}, [2]]}"},
        {"{\"_id\": 1, \"a\": {\"b\": 1}}", "{\"_id\": 1, \"a\": [1]}"},
        {"{\"_id\": 1, \"a\": [1]}", "{\"_id\": 1, \"a\": {\"0\": 1}}"},
        {"{\"_id\": 1, \"a\": 1}", "{\"_id\": 1, \"a\": {\"$numberLong\": \"1\"}}"},
        {"{\"_id\": 1, \"a\": {\"1\": 1}}", "{\"_id\": 1, \"a\": {\"1\": 2}}"},
        {"{\"_id\": 1, \"a.b\": {\"c.d\": 1}}", "{\"_id\": 1, \"a.b\": {\"c.d\": 2, \"0\": 1}}"},
        {"{\"_id\": 1, \"a\": [[[1]]]}", "{\"_id\": 1, \"a\": [[[2, 3]], []]}"},
        {"{\"_id\": 1, \"a\": [{}, {}, {}]}", "{\"_id\": 1, \"a\": [{}]}"},
        {"{\"_id\": 1, \"a\": [1, 2, 3]}", "{\"_id\": 1, \"a\": []}"},
        {"{\"_id\": 1, \"a\": {\"x\": 1}}", "{\"_id\": 1, \"a\": {}}"},
        {"{\"_id\": 1, \"a\": 1, \"b\": 1}", "{\"_id\": 1, \"a\": 1, \"b\": 1}"},
    };
    int ndiffed = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        bson_t *old = json(pairs[i][0]), *new_doc = json(pairs[i][1]);
        bool diffed;
        CHECK(old && new_doc);
        if (!round_trip(old, new_doc, &diffed, __FILE__, __LINE__))
            return;
        ndiffed += diffed;
        bson_destroy(old);
        bson_destroy(new_doc);
    }
    CHECK_INT(ndiffed, sizeof pairs / sizeof pairs[0] - 1);
}

/* Random documents and random changes that keep field order (what a diff
 * can express), with a fixed seed: a differential test of
 * mf_cl_diff_apply against the post-image itself. */
static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static const char *const names[] = {"a", "b", "1", "0", "c.d", "e", "01", ""};
#define NNAMES (sizeof names / sizeof names[0])

static void gen_value(bson_t *out, const char *key, int depth);

static void gen_doc(bson_t *out, int depth)
{
    uint32_t n = rnd(5);
    uint32_t start = rnd(NNAMES);
    for (uint32_t i = 0; i < n; i++)
        gen_value(out, names[(start + i) % NNAMES], depth + 1);
}

static void gen_array(bson_t *out, int depth)
{
    uint32_t n = rnd(5);
    for (uint32_t i = 0; i < n; i++) {
        char buf[16];
        const char *k;
        mf_uint32_to_key(i, &k, buf, sizeof buf);
        gen_value(out, k, depth + 1);
    }
}

static void gen_value(bson_t *out, const char *key, int depth)
{
    bson_t child;
    switch (depth > 4 ? rnd(3) : rnd(6)) {
    case 0:
        BSON_APPEND_INT32(out, key, (int32_t)rnd(3));
        break;
    case 1:
        BSON_APPEND_UTF8(out, key, rnd(2) ? "x" : "y");
        break;
    case 2:
        if (rnd(2))
            BSON_APPEND_NULL(out, key);
        else
            BSON_APPEND_DOUBLE(out, key, 1.0);
        break;
    case 3:
    case 4:
        BSON_APPEND_DOCUMENT_BEGIN(out, key, &child);
        gen_doc(&child, depth);
        bson_append_document_end(out, &child);
        break;
    default:
        BSON_APPEND_ARRAY_BEGIN(out, key, &child);
        gen_array(&child, depth);
        bson_append_array_end(out, &child);
        break;
    }
}

static void mutate_value(const bson_iter_t *it, bson_t *out, const char *key, int depth);

/* A changed copy of the document at `old`: fields kept, dropped, changed
 * or changed inside, in order, then new fields. */
static void mutate_doc(const bson_t *old, bson_t *out, int depth)
{
    bson_iter_t it, f;
    bson_iter_init(&it, old);
    while (bson_iter_next(&it)) {
        uint32_t r = rnd(10);
        if (r < 4)
            mf_bsonx_append_iter(out, NULL, 0, &it);
        else if (r < 5)
            continue;
        else if (r < 7)
            gen_value(out, bson_iter_key(&it), depth + 1);
        else
            mutate_value(&it, out, bson_iter_key(&it), depth + 1);
    }
    for (uint32_t n = rnd(3); n > 0; n--) {
        const char *k = names[rnd(NNAMES)];
        if (!bson_iter_init_find(&f, old, k) && !bson_iter_init_find(&f, out, k))
            gen_value(out, k, depth + 1);
    }
}

/* A changed copy of the array at `old`: elements kept or changed, cut
 * short or grown. */
static void mutate_array(const bson_t *old, bson_t *out, int depth)
{
    bson_iter_t it;
    uint32_t n = (uint32_t)bson_count_keys(old), keep = rnd(4) ? n : rnd(n + 1), i = 0;
    bson_iter_init(&it, old);
    for (; i < keep && bson_iter_next(&it); i++) {
        char buf[16];
        const char *k;
        mf_uint32_to_key(i, &k, buf, sizeof buf);
        uint32_t r = rnd(10);
        if (r < 5)
            mf_bsonx_append_iter(out, k, -1, &it);
        else if (r < 7)
            gen_value(out, k, depth + 1);
        else
            mutate_value(&it, out, k, depth + 1);
    }
    for (uint32_t add = rnd(3) ? 0 : 1 + rnd(3); add > 0; add--, i++) {
        char buf[16];
        const char *k;
        mf_uint32_to_key(i, &k, buf, sizeof buf);
        gen_value(out, k, depth + 1);
    }
}

static void mutate_value(const bson_iter_t *it, bson_t *out, const char *key, int depth)
{
    bson_t sub, child;
    uint32_t len;
    const uint8_t *data;
    if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_iter_document(it, &len, &data);
        bson_init_static(&sub, data, len);
        BSON_APPEND_DOCUMENT_BEGIN(out, key, &child);
        mutate_doc(&sub, &child, depth);
        bson_append_document_end(out, &child);
    } else if (BSON_ITER_HOLDS_ARRAY(it)) {
        bson_iter_array(it, &len, &data);
        bson_init_static(&sub, data, len);
        BSON_APPEND_ARRAY_BEGIN(out, key, &child);
        mutate_array(&sub, &child, depth);
        bson_append_array_end(out, &child);
    } else {
        gen_value(out, key, depth);
    }
}

MFT_CASE(diff_random_round_trip, "/coll/diff/random_round_trip")
{
    int ndiffed = 0;
    for (int round = 0; round < 3000; round++) {
        bson_t body = BSON_INITIALIZER, new_body = BSON_INITIALIZER;
        bson_t old = BSON_INITIALIZER, new_doc = BSON_INITIALIZER;
        bool diffed;
        gen_doc(&body, 0);
        mutate_doc(&body, &new_body, 0);
        /* {_id, ...body}: the _id stays as a write keeps it */
        BSON_APPEND_INT32(&old, "_id", round);
        bson_concat(&old, &body);
        BSON_APPEND_INT32(&new_doc, "_id", round);
        bson_concat(&new_doc, &new_body);
        if (!round_trip(&old, &new_doc, &diffed, __FILE__, __LINE__))
            return;
        ndiffed += diffed;
        bson_destroy(&body);
        bson_destroy(&new_body);
        bson_destroy(&old);
        bson_destroy(&new_doc);
    }
    /* most rounds change something a diff expresses */
    CHECK(ndiffed > 1500);
}

/* `depth` documents {a: {a: ... {x: leaf}}} into `out`. */
static void nest(bson_t *out, int depth, int leaf)
{
    bson_t child;
    if (depth == 0) {
        BSON_APPEND_INT32(out, "x", leaf);
        return;
    }
    BSON_APPEND_DOCUMENT_BEGIN(out, "a", &child);
    nest(&child, depth - 1, leaf);
    bson_append_document_end(out, &child);
}

/* The diff sa: {sa: ... {u: {x: 1}}} nested `depth` sub-diffs deep. */
static void nest_diff(bson_t *out, int depth)
{
    bson_t child;
    if (depth == 0) {
        BSON_APPEND_DOCUMENT_BEGIN(out, "u", &child);
        BSON_APPEND_INT32(&child, "x", 1);
        bson_append_document_end(out, &child);
        return;
    }
    BSON_APPEND_DOCUMENT_BEGIN(out, "sa", &child);
    nest_diff(&child, depth - 1);
    bson_append_document_end(out, &child);
}

MFT_CASE(diff_deep, "/coll/diff/deep")
{
    /* as deep as mf_cl_update_diff writes a diff (100 levels) */
    bson_t old = BSON_INITIALIZER, new_doc = BSON_INITIALIZER;
    bool diffed;
    nest(&old, 98, 0);
    nest(&new_doc, 98, 1);
    if (!round_trip(&old, &new_doc, &diffed, __FILE__, __LINE__))
        return;
    CHECK(diffed);
    bson_destroy(&old);
    bson_destroy(&new_doc);

    /* deeper than any stored document: refused, not a stack overflow */
    bson_t diff = BSON_INITIALIZER, pre = BSON_INITIALIZER, out = BSON_INITIALIZER, got;
    mf_error err = {0};
    nest_diff(&diff, 400);
    nest(&pre, 400, 0);
    CHECK_INT(mf_cl_diff_describe(&diff, true, &out, &err), MF_BadValue);
    CHECK_INT(mf_cl_diff_apply(&pre, &diff, &got, &err), MF_BadValue);
    bson_destroy(&out);
    bson_destroy(&diff);
    bson_destroy(&pre);
}
