/*
 * test_keygen.c -- cases for csrc/query/keygen.c alone, the key generator
 * index keys and sort keys share: the candidates it emits (as text, one
 * "v1|v2" per candidate), the missing counts, the multikey bits, its
 * errors, and the encoding's order.
 */
#include "test.h"
#include "../query/keygen.h"

typedef struct seen {
    char text[512]; /* "1|3 2|3 ": each candidate's values */
    size_t nmissing[8];
    size_t n;
    int fail_at;    /* emit fails with 77 on this candidate (1-based), 0: never */
} seen;

static int record(mfi_keygen *g, const mfi_kfield *f, size_t nmissing)
{
    seen *s = g->arg;
    if (++s->n == (size_t)s->fail_at)
        return mf_error_set(g->err, 77, "stop");
    if (s->n <= 8)
        s->nmissing[s->n - 1] = nmissing;
    for (size_t i = 0; i < g->nfields; i++) {
        char v[64];
        mf_bsonx_elem_to_string(&f[i].fixed, false, v, sizeof v);
        size_t len = strlen(s->text);
        snprintf(s->text + len, sizeof s->text - len, "%s%s", v, i + 1 < g->nfields ? "|" : " ");
    }
    return 0;
}

/* Run the generator over `json` with `n` paths; the candidates go to `s`. */
static int run(const char *json, const char *const *paths, size_t n, seen *s, uint32_t *multikey,
               mf_error *err)
{
    static const bool asc[8] = {false};
    bson_error_t be;
    bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &be);
    if (!doc)
        return -1;
    mfi_keygen g = {.nfields = n, .paths = (char *const *)paths, .desc = asc,
                    .emit = record, .arg = s, .err = err};
    int rc = mfi_keygen_run(&g, doc);
    *multikey = g.multikey;
    bson_destroy(doc);
    return rc;
}

MFT_CASE(keygen_fan_out, "/query/keygen/fan_out")
{
    static const char *const ab[] = {"a.b", "c"};
    static const char *const a[] = {"a"};
    seen s = {0};
    uint32_t mk;
    mf_error err;
    /* one array expanded: a candidate per element, the other field fixed */
    CHECK_INT(run("{\"a\": [{\"b\": 1}, {\"b\": 2}], \"c\": 3}", ab, 2, &s, &mk, &err), 0);
    CHECK_STR(s.text, "1|3 2|3 ");
    CHECK_INT(mk, 1);
    /* missing is null, counted; an empty array is undefined */
    s = (seen){0};
    CHECK_INT(run("{\"c\": 3}", ab, 2, &s, &mk, &err), 0);
    CHECK_STR(s.text, "null|3 ");
    CHECK_INT(s.nmissing[0], 1);
    CHECK_INT(mk, 0);
    s = (seen){0};
    CHECK_INT(run("{\"a\": []}", a, 1, &s, &mk, &err), 0);
    CHECK_STR(s.text, "undefined ");
    CHECK_INT(mk, 1);
    /* an array inside an expanded array is one value */
    s = (seen){0};
    CHECK_INT(run("{\"a\": [1, [2, 3]]}", a, 1, &s, &mk, &err), 0);
    CHECK_STR(s.text, "1 [ 2, 3 ] ");
}

MFT_CASE(keygen_positional, "/query/keygen/positional")
{
    static const char *const a0[] = {"a.0"};
    static const char *const a0b[] = {"a.0.b"};
    seen s = {0};
    uint32_t mk;
    mf_error err;
    /* a numeric component picks one element, not multikey: the array is
     * still walked, once per element, each time to that element (as
     * mongod's; index keys are made unique, a sort key takes the least) */
    CHECK_INT(run("{\"a\": [5, 6]}", a0, 1, &s, &mk, &err), 0);
    CHECK_STR(s.text, "5 5 ");
    CHECK_INT(mk, 0);
    s = (seen){0};
    CHECK_INT(run("{\"a\": [{\"b\": 7}, {\"b\": 8}]}", a0b, 1, &s, &mk, &err), 0);
    CHECK_STR(s.text, "7 7 ");
    /* ... unless the element has a field of that name: ambiguous */
    s = (seen){0};
    CHECK_INT(run("{\"a\": [{\"0\": 1}]}", a0, 1, &s, &mk, &err), 16746);
    CHECK(strstr(err.msg, "Ambiguous field name found in array") == err.msg);
    /* the array printed as mongod prints it there: as the object it is */
    CHECK(strstr(err.msg, "field: '0' for array: { 0: { 0: 1 } }") != NULL);
}

MFT_CASE(keygen_errors, "/query/keygen/errors")
{
    static const char *const ab[] = {"a", "b"};
    seen s = {0};
    uint32_t mk;
    mf_error err;
    CHECK_INT(run("{\"a\": [1], \"b\": [2]}", ab, 2, &s, &mk, &err), MF_CannotIndexParallelArrays);
    CHECK_STR(err.msg, "cannot index parallel arrays [b] [a]");
    CHECK_INT(s.n, 0);
    /* the same array twice is not parallel */
    static const char *const aa[] = {"a", "a"};
    CHECK_INT(run("{\"a\": [1, 2]}", aa, 2, &s, &mk, &err), 0);
    CHECK_STR(s.text, "1|1 2|2 ");
    /* emit's error ends the run */
    s = (seen){.fail_at = 2};
    CHECK_INT(run("{\"a\": [1, 2, 3], \"b\": 0}", ab, 2, &s, &mk, &err), 77);
    CHECK_INT(s.n, 2);
}

/* The encoding: values in MongoDB's order, a descending field inverted. */
MFT_CASE(keygen_encode, "/query/keygen/encode")
{
    bson_t *doc = BCON_NEW("x", BCON_INT32(1), "y", BCON_DOUBLE(2.5));
    mfi_kfield f[2];
    memset(f, 0, sizeof f);
    bson_iter_init_find(&f[0].fixed, doc, "x");
    bson_iter_init_find(&f[1].fixed, doc, "y");
    static const bool up[1] = {false}, down[1] = {true};
    mfi_keygen g = {.nfields = 1, .desc = up};
    mf_buf k1 = {0}, k2 = {0};
    CHECK_INT(mfi_keygen_encode(&g, &f[0], &k1), 0);
    CHECK_INT(mfi_keygen_encode(&g, &f[1], &k2), 0);
    int c = memcmp(k1.data, k2.data, k1.len < k2.len ? k1.len : k2.len);
    CHECK(c < 0);
    g.desc = down;
    k1.len = k2.len = 0;
    CHECK_INT(mfi_keygen_encode(&g, &f[0], &k1), 0);
    CHECK_INT(mfi_keygen_encode(&g, &f[1], &k2), 0);
    c = memcmp(k1.data, k2.data, k1.len < k2.len ? k1.len : k2.len);
    mf_buf_free(&k1);
    mf_buf_free(&k2);
    bson_destroy(doc);
    CHECK(c > 0);
}
