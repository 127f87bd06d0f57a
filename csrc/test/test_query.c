/* Cases for csrc/query: projection, sort keys and the sorter, alone (the
 * behaviour is tested against mongod's in tests/test_projection.py and
 * tests/test_sort.py; these run the same code under ASan and UBSan). */
#include "test.h"
#include "../query/query.h"

#include <dirent.h>
#include <stdlib.h>

static bool same_doc(const bson_t *a, const bson_t *b)
{
    return a->len == b->len && memcmp(bson_get_data(a), bson_get_data(b), a->len) == 0;
}

MFT_CASE(project_mixed, "/query/project/inclusion_exclusion_slice")
{
    mf_error err;
    mf_projection *p = NULL;
    bson_t out;
    bson_t *doc = BCON_NEW("_id", BCON_INT32(1), "z", BCON_INT32(9), "a", "[", "{", "b",
                           BCON_INT32(1), "c", BCON_INT32(2), "}", BCON_INT32(5), "[", "{", "b",
                           BCON_INT32(3), "}", "]", "]", "n", "[", BCON_INT32(1), BCON_INT32(7),
                           BCON_INT32(3), "]");
    /* ($elemMatch is left to tests/test_projection.py: the matcher
     * does not run clean under UBSan yet -- misaligned bson_t members.) */
    bson_t *spec = BCON_NEW("n", "{", "$slice", BCON_INT32(-1), "}", "a.b", BCON_INT32(1), "_id",
                            BCON_INT32(0));
    bson_t *want = BCON_NEW("a", "[", "{", "b", BCON_INT32(1), "}", "[", "{", "b", BCON_INT32(3),
                            "}", "]", "]", "n", "[", BCON_INT32(3), "]");
    CHECK_INT(mf_projection_parse(spec, NULL, &p, &err), 0);
    CHECK(!mf_projection_needs_pos(p));
    CHECK_INT(mf_projection_apply(p, doc, -1, &out, &err), 0);
    CHECK(same_doc(&out, want));
    bson_destroy(&out);
    mf_projection_free(p);
    bson_destroy(spec);

    spec = BCON_NEW("a.b", BCON_INT32(0), "n", "{", "$slice", "[", BCON_INT32(-2), BCON_INT32(1),
                    "]", "}");
    bson_destroy(want);
    want = BCON_NEW("_id", BCON_INT32(1), "z", BCON_INT32(9), "a", "[", "{", "c", BCON_INT32(2),
                    "}", BCON_INT32(5), "[", "{", "}", "]", "]", "n", "[", BCON_INT32(7), "]");
    CHECK_INT(mf_projection_parse(spec, NULL, &p, &err), 0);
    CHECK_INT(mf_projection_apply(p, doc, -1, &out, &err), 0);
    CHECK(same_doc(&out, want));
    bson_destroy(&out);
    mf_projection_free(p);
    bson_destroy(spec);
    bson_destroy(want);
    bson_destroy(doc);
}

MFT_CASE(project_positional, "/query/project/positional")
{
    mf_error err;
    mf_projection *p = NULL;
    bson_t out;
    bson_t *doc = BCON_NEW("x", "[", BCON_INT32(4), BCON_INT32(5), "]");
    bson_t *filter = BCON_NEW("x", BCON_INT32(5));
    bson_t *spec = BCON_NEW("x.$", BCON_INT32(1), "_id", BCON_INT32(0));
    bson_t *want = BCON_NEW("x", "[", BCON_INT32(5), "]");
    CHECK_INT(mf_projection_parse(spec, NULL, &p, &err), 51050);
    CHECK_INT(mf_projection_parse(spec, filter, &p, &err), 0);
    CHECK(mf_projection_needs_pos(p));
    CHECK_INT(mf_projection_apply(p, doc, 1, &out, &err), 0);
    CHECK(same_doc(&out, want));
    bson_destroy(&out);
    CHECK_INT(mf_projection_apply(p, doc, -1, &out, &err), 51246);
    bson_destroy(&out);
    CHECK_INT(mf_projection_apply(p, doc, 2, &out, &err), 51247);
    bson_destroy(&out);
    mf_projection_free(p);
    bson_destroy(spec);
    spec = BCON_NEW("a", BCON_INT32(1), "a.b", BCON_INT32(1));
    CHECK_INT(mf_projection_parse(spec, NULL, &p, &err), 31249);
    CHECK_STR(err.msg, "Path collision at a.b remaining portion b");
    bson_destroy(spec);
    bson_destroy(want);
    bson_destroy(filter);
    bson_destroy(doc);
}

MFT_CASE(sort_key, "/query/sort/key_arrays")
{
    mf_error err;
    mf_sort *s = NULL;
    mf_buf k1 = {0}, k2 = {0};
    bson_t *spec = BCON_NEW("a.x", BCON_INT32(1), "a.y", BCON_INT32(-1));
    bson_t *d1 = BCON_NEW("a", "[", "{", "x", BCON_INT32(1), "y", BCON_INT32(5), "}", "{", "x",
                          BCON_INT32(0), "y", BCON_INT32(0), "}", "]");
    bson_t *d2 = BCON_NEW("a", "{", "x", BCON_INT32(0), "y", BCON_INT32(0), "}");
    bson_t *par = BCON_NEW("a", "[", BCON_INT32(1), "]", "b", "[", BCON_INT32(2), "]");
    bson_t *spec2 = BCON_NEW("a", BCON_INT32(1), "b", BCON_INT32(1));
    CHECK_INT(mf_sort_parse(spec, &s, &err), 0);
    CHECK_INT(mf_sort_key(s, d1, &k1, &err), 0);
    CHECK_INT(mf_sort_key(s, d2, &k2, &err), 0);
    CHECK(k1.len == k2.len && memcmp(k1.data, k2.data, k1.len) == 0);
    mf_sort_free(s);
    CHECK_INT(mf_sort_parse(spec2, &s, &err), 0);
    size_t before = k1.len;
    CHECK_INT(mf_sort_key(s, par, &k1, &err), MF_BadValue);
    CHECK_INT(k1.len, before);
    mf_sort_free(s);
    mf_buf_free(&k1);
    mf_buf_free(&k2);
    bson_destroy(spec);
    bson_destroy(spec2);
    bson_destroy(d1);
    bson_destroy(d2);
    bson_destroy(par);
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* 2,000 records through a 1 KB sorter: many runs, merges of runs, order
 * by (key, insertion); then the same with a top-k limit. */
static void run_spill(int64_t limit, int64_t want_n)
{
    mf_error err;
    mf_sorter *s = mf_sorter_new(1024, true, mft_tmpdir(), limit);
    CHECK(s != NULL);
    for (uint32_t i = 0; i < 2000; i++) {
        uint8_t key = (uint8_t)(i * 7919 % 13);
        uint32_t doc = i;
        CHECK_INT(mf_sorter_add(s, &key, 1, &doc, sizeof doc, &err), 0);
    }
    CHECK(mf_sorter_nruns(s) > 0);
    CHECK_INT(count_files(mft_tmpdir()), 0);
    CHECK_INT(mf_sorter_finish(s, &err), 0);
    int64_t n = 0;
    uint32_t prev_key = 0, prev_doc = 0;
    for (;;) {
        const uint8_t *d;
        size_t dlen;
        bool valid;
        CHECK_INT(mf_sorter_next(s, &d, &dlen, &valid, &err), 0);
        if (!valid)
            break;
        uint32_t doc;
        CHECK_INT(dlen, sizeof doc);
        memcpy(&doc, d, sizeof doc);
        uint32_t key = doc * 7919 % 13;
        CHECK(n == 0 || key > prev_key || (key == prev_key && doc > prev_doc));
        prev_key = key;
        prev_doc = doc;
        n++;
    }
    CHECK_INT(n, want_n);
    mf_sorter_free(s);
}

MFT_CASE(sorter_spill, "/query/sorter/spill_merge")
{
    run_spill(0, 2000);
    if (!mft_failed())
        run_spill(300, 300);
}

MFT_CASE(sorter_limit, "/query/sorter/memory_limit_without_disk")
{
    mf_error err;
    mf_sorter *s = mf_sorter_new(100, false, NULL, 0);
    char doc[50] = {0};
    CHECK_INT(mf_sorter_add(s, "a", 1, doc, sizeof doc, &err), 0);
    CHECK_INT(mf_sorter_add(s, "b", 1, doc, sizeof doc, &err), 292);
    CHECK_STR(err.msg, "Sort exceeded memory limit of 100 bytes, but did not opt in to external "
                       "sorting.");
    mf_sorter_free(s);
}

/* ------------------------------------------------ $expr through hooks */

/* A stand-in for agg/: an "expression" is its literal value, except the
 * string "$f" (the document's field f) and "boom" (an error). */
static int nfree;

static int fake_parse(const bson_iter_t *it, void *arg, void **out, mf_error *err)
{
    (void)arg, (void)err;
    bson_value_t *v = malloc(sizeof *v);
    bson_value_copy(bson_iter_value((bson_iter_t *)it), v);
    *out = v;
    return 0;
}

static int fake_eval(const void *x, const bson_t *root, const mf_meta *meta, void *arg,
                     bson_value_t *out, mf_error *err)
{
    const bson_value_t *v = x;
    bson_iter_t f;
    (void)arg;
    (void)meta;
    out->value_type = BSON_TYPE_EOD;
    if (v->value_type == BSON_TYPE_UTF8 && strcmp(v->value.v_utf8.str, "boom") == 0)
        return mf_error_set(err, 16608, "can't $divide by zero");
    if (v->value_type == BSON_TYPE_UTF8 && strcmp(v->value.v_utf8.str, "$f") == 0) {
        if (bson_iter_init_find(&f, root, "f"))
            bson_value_copy(bson_iter_value(&f), out);
        return 0;
    }
    bson_value_copy(v, out);
    return 0;
}

static void fake_free(void *x)
{
    bson_value_destroy(x);
    free(x);
    nfree++;
}

static void fake_free_value(bson_value_t *v)
{
    if (v->value_type != BSON_TYPE_EOD)
        bson_value_destroy(v);
}

static int expr_match(const mf_expr_hooks *h, bson_t *filter, bson_t *doc, bool *hit,
                      mf_error *err)
{
    mf_matcher *m = NULL;
    int rc = mf_matcher_parse_ex(filter, h, &m, err);
    if (rc == 0)
        rc = mf_matcher_eval(m, doc, NULL, hit, err);
    mf_matcher_free(m);
    bson_destroy(filter);
    return rc;
}

MFT_CASE(match_expr_hooks, "/query/match/expr_hooks")
{
    mf_expr_hooks h = {.parse = fake_parse, .eval = fake_eval, .free = fake_free,
                       .free_value = fake_free_value};
    mf_error err;
    bool hit = true;
    bson_t *doc = BCON_NEW("f", BCON_INT32(0), "g", BCON_INT32(1));
    nfree = 0;
    /* truthiness: the field's 0 is false, a non-empty string true */
    CHECK_INT(expr_match(&h, BCON_NEW("$expr", "$f"), doc, &hit, &err), 0);
    CHECK(!hit);
    CHECK_INT(expr_match(&h, BCON_NEW("$expr", "x"), doc, &hit, &err), 0);
    CHECK(hit);
    CHECK_INT(expr_match(&h, BCON_NEW("$expr", BCON_NULL), doc, &hit, &err), 0);
    CHECK(!hit);
    /* the path predicate rejects the document before the erroring $expr */
    CHECK_INT(expr_match(&h, BCON_NEW("$expr", "boom", "g", BCON_INT32(2)), doc, &hit, &err), 0);
    CHECK(!hit);
    /* an evaluation error is the query's */
    CHECK_INT(expr_match(&h, BCON_NEW("$or", "[", "{", "$expr", "boom", "}", "]"), doc, &hit,
                         &err),
              16608);
    CHECK(!hit);
    CHECK_STR(err.msg, "can't $divide by zero");
    /* nowhere below $elemMatch; not at all without hooks */
    CHECK_INT(expr_match(&h, BCON_NEW("a", "{", "$elemMatch", "{", "$expr", "x", "}", "}"), doc,
                         &hit, &err),
              MF_BadValue);
    CHECK_INT(expr_match(NULL, BCON_NEW("$expr", "x"), doc, &hit, &err), 224);
    CHECK_INT(nfree, 5); /* every parsed expression freed with its matcher */
    bson_destroy(doc);
}

/* A long $in list is searched sorted (a binary search); a short one
 * element by element.  Both must give every document the same answer,
 * null (which an undefined value equals) included.  An undefined element
 * is refused, as mongod's InMatchExpression refuses it. */
static void in_hit(const bson_t *list, const bson_t *doc, bool *hit)
{
    bson_t filter, f;
    mf_matcher *m = NULL;
    mf_error err;
    bson_init(&filter);
    bson_append_document_begin(&filter, "f", 1, &f);
    bson_append_array(&f, "$in", 3, list);
    bson_append_document_end(&filter, &f);
    *hit = false;
    CHECK_INT(mf_matcher_parse(&filter, &m, &err), 0);
    CHECK_INT(mf_matcher_eval(m, doc, NULL, hit, &err), 0);
    mf_matcher_free(m);
    bson_destroy(&filter);
}

/* Append the values of `src` (a document) to array `dst` from index `*at`. */
static void append_values(bson_t *dst, const bson_t *src, uint32_t *at)
{
    bson_iter_t it;
    bson_iter_init(&it, src);
    while (bson_iter_next(&it)) {
        char key[16];
        const char *k;
        size_t kl = bson_uint32_to_string((*at)++, &k, key, sizeof key);
        bson_append_iter(dst, k, (int)kl, &it);
    }
}

MFT_CASE(match_in_long_list, "/query/match/in_long_list_same_as_short")
{
    bson_t *docs[8];
    docs[0] = BCON_NEW("f", BCON_UNDEFINED);
    docs[1] = BCON_NEW("f", BCON_NULL);
    docs[2] = BCON_NEW("g", BCON_INT32(1));
    docs[3] = BCON_NEW("f", BCON_DOUBLE(3.0));
    docs[4] = BCON_NEW("f", "[", BCON_INT32(40), BCON_INT64(5), "]");
    docs[5] = BCON_NEW("f", BCON_UTF8("b"));
    docs[6] = BCON_NEW("f", "[", "]");
    docs[7] = BCON_NEW("f", BCON_DOUBLE(4.5));
    bson_t *wanted = BCON_NEW("0", BCON_INT64(3), "1", BCON_UTF8("b"), "2", BCON_INT32(5),
                              "3", "[", "]");
    bson_t *others = BCON_NEW("0", BCON_INT32(100), "1", BCON_UTF8("z"), "2", BCON_DOUBLE(-1.5),
                              "3", BCON_INT32(7), "4", BCON_BOOL(true), "5", BCON_UTF8("a"),
                              "6", BCON_INT32(9));
    bson_t *nulls = BCON_NEW("0", BCON_NULL);
    {
        /* the same five values, alone (searched in turn) and among twelve
         * (sorted), the null last and in the middle */
        bson_t shrt = BSON_INITIALIZER, lng = BSON_INITIALIZER;
        uint32_t ns = 0, nl = 0;
        append_values(&shrt, wanted, &ns);
        append_values(&shrt, nulls, &ns);
        append_values(&lng, others, &nl);
        append_values(&lng, nulls, &nl);
        append_values(&lng, wanted, &nl);
        for (int d = 0; d < 8; d++) {
            bool a, b;
            in_hit(&shrt, docs[d], &a);
            in_hit(&lng, docs[d], &b);
            if (a != b)
                fprintf(stderr, "doc %d: short %d, long %d\n", d, a, b);
            CHECK(a == b);
            /* null/undefined/missing, 3.0, [40, 5], "b" and [] match */
            CHECK(b == (d != 7));
        }
        bson_destroy(&shrt);
        bson_destroy(&lng);
    }
    bson_t *undef = BCON_NEW("f", "{", "$in", "[", BCON_INT32(1), BCON_UNDEFINED, "]", "}");
    mf_matcher *m = NULL;
    mf_error err;
    CHECK_INT(mf_matcher_parse(undef, &m, &err), MF_BadValue);
    CHECK_STR(err.msg, "InMatchExpression equality cannot be undefined");
    CHECK(m == NULL);
    bson_destroy(undef);
    for (int d = 0; d < 8; d++)
        bson_destroy(docs[d]);
    bson_destroy(wanted);
    bson_destroy(others);
    bson_destroy(nulls);
}

/* Whether `filter` parses and matches `doc`; -1 when it does not parse
 * (its code in *code). */
static int dbref_match(bson_t *filter, bson_t *doc, int *code)
{
    mf_error err;
    mf_matcher *m = NULL;
    int rc = mf_matcher_parse(filter, &m, &err), hit = -1;
    *code = rc;
    if (rc == 0)
        hit = mf_matcher_match(m, doc);
    mf_matcher_free(m);
    bson_destroy(filter);
    return hit;
}

MFT_CASE(match_dbref, "/query/match/dbref_is_a_value")
{
    int code;
    bson_t *doc = BCON_NEW("r", "[", "{", "$ref", BCON_UTF8("c"), "$id", BCON_INT32(1), "x",
                           BCON_INT32(2), "}", "]");
    /* a whole-document equality ... */
    CHECK_INT(dbref_match(BCON_NEW("r", "{", "$ref", BCON_UTF8("c"), "$id", BCON_INT32(1), "x",
                                   BCON_INT32(2), "}"), doc, &code), 1);
    CHECK_INT(dbref_match(BCON_NEW("r", "{", "$ref", BCON_UTF8("c"), "$id", BCON_INT32(1), "}"),
                          doc, &code), 0);
    /* ... also in $in, $all, and with $id first */
    CHECK_INT(dbref_match(BCON_NEW("r", "{", "$in", "[", "{", "$id", BCON_INT32(1), "$ref",
                                   BCON_UTF8("c"), "}", "]", "}"), doc, &code), 0);
    CHECK_INT(dbref_match(BCON_NEW("r", "{", "$all", "[", "{", "$gt", BCON_INT32(1), "}", "]",
                                   "}"), doc, &code), -1);
    CHECK_INT(code, MF_BadValue);
    /* under $elemMatch: the elements' fields, one DBRef name is enough */
    CHECK_INT(dbref_match(BCON_NEW("r", "{", "$elemMatch", "{", "$ref", BCON_UTF8("c"), "$id",
                                   BCON_INT32(1), "}", "}"), doc, &code), 1);
    CHECK_INT(dbref_match(BCON_NEW("r", "{", "$elemMatch", "{", "$id", BCON_INT32(2), "}", "}"),
                          doc, &code), 0);
    /* outside $elemMatch one name is an unknown operator */
    CHECK_INT(dbref_match(BCON_NEW("r", "{", "$ref", BCON_UTF8("c"), "}"), doc, &code), -1);
    CHECK_INT(code, MF_BadValue);
    bson_destroy(doc);
}

/* ------------------------------------------------------------ metadata */

MFT_CASE(meta_names_and_bson, "/query/meta/names_values_bson")
{
    mf_meta m = {0}, back = {0};
    mf_error err;
    for (int k = 0; k < MF_META_NKINDS; k++)
        CHECK_INT(mf_meta_kind_of(mf_meta_name((mf_meta_kind)k)), k);
    CHECK_INT(mf_meta_kind_of("textscore"), -1); /* names are exact */
    CHECK_INT(mf_meta_unavailable(MF_META_BIT(MF_META_GEO_NEAR_POINT), &err), 40218);
    CHECK_STR(err.msg, "query requires $geoNear point metadata, but it is not available");
    mf_meta_set_double(&m, MF_META_TEXT_SCORE, 1.5);
    mf_meta_set_long(&m, MF_META_RECORD_ID, 7);
    bson_t *pt = BCON_NEW("type", "Point");
    bson_value_t v = {.value_type = BSON_TYPE_DOCUMENT};
    v.value.v_doc.data = (uint8_t *)bson_get_data(pt);
    v.value.v_doc.data_len = pt->len;
    CHECK_INT(mf_meta_set_value(&m, MF_META_GEO_NEAR_POINT, &v), 0);
    bson_destroy(pt); /* the metadata holds its own copy */
    bson_t b = BSON_INITIALIZER;
    mf_meta_to_bson(&m, &b);
    CHECK_INT(mf_meta_from_bson(&back, bson_get_data(&b), b.len), 0);
    bson_destroy(&b);
    CHECK_INT(back.has, m.has);
    CHECK(mf_meta_get(&back, MF_META_TEXT_SCORE)->value.v_double == 1.5);
    CHECK_INT(mf_meta_get(&back, MF_META_RECORD_ID)->value.v_int64, 7);
    const bson_value_t *p = mf_meta_get(&back, MF_META_GEO_NEAR_POINT);
    CHECK(p && p->value_type == BSON_TYPE_DOCUMENT && p->value.v_doc.data_len > 5);
    CHECK(mf_meta_get(&back, MF_META_SORT_KEY) == NULL);
    CHECK(mf_meta_get(NULL, MF_META_TEXT_SCORE) == NULL);
    /* a copy owns its values: clearing the source leaves it whole */
    mf_meta copy = {0};
    CHECK_INT(mf_meta_copy(&copy, &back), 0);
    mf_meta_clear(&back);
    CHECK_INT(back.has, 0);
    CHECK(mf_meta_get(&copy, MF_META_GEO_NEAR_POINT) != NULL);
    mf_meta_clear(&copy);
    mf_meta_clear(&m);
}
