/* Cases for csrc/query/geo.h (the S2 shim, geo_s2.cc) alone, under ASan
 * and UBSan: parsing, matching, errors and malformed input.  Behaviour
 * against mongod's is tests/test_geo.py's; these check that the C++ side
 * frees what it makes and survives any shape of input. */
#include "test.h"
#include "../query/geo.h"

#include <math.h>
#include <stdlib.h>

static bson_t *json(const char *s)
{
    bson_error_t e;
    return bson_new_from_json((const uint8_t *)s, -1, &e);
}

/* Whether the query `q` (JSON) matches the value of "v" in `doc` (JSON). */
static int match_json(const char *q, const char *doc, bool *matched)
{
    mf_error err;
    mf_geo_query *gq = NULL;
    bson_t *qb = json(q), *db = json(doc);
    bson_iter_t it;
    int rc = -1;
    if (!qb || !db)
        goto out;
    if ((rc = mfi_geo_query_parse(qb, &gq, &err)) != 0)
        goto out;
    /* a missing value is NULL, as the matcher passes it */
    *matched = mfi_geo_query_matches(gq, bson_iter_init_find(&it, db, "v") ? &it : NULL);
out:
    mfi_geo_query_free(gq);
    if (qb)
        bson_destroy(qb);
    if (db)
        bson_destroy(db);
    return rc;
}

MFT_CASE(geo_match, "/query/geo/within_and_intersects")
{
    static const char *sq = "{\"$geoWithin\": {\"$geometry\": {\"type\": \"Polygon\", "
                            "\"coordinates\": [[[0,0],[10,0],[10,10],[0,10],[0,0]], "
                            "[[4,4],[6,4],[6,6],[4,6],[4,4]]]}}}";
    static const struct {
        const char *doc;
        bool want;
    } cases[] = {
        {"{\"v\": {\"type\": \"Point\", \"coordinates\": [1, 1]}}", true},
        {"{\"v\": {\"type\": \"Point\", \"coordinates\": [5, 5]}}", false}, /* the hole */
        {"{\"v\": [2, 3]}", true},
        {"{\"v\": {\"x\": 2, \"y\": 3}}", true},
        {"{\"v\": [200, 3]}", false},
        {"{\"v\": {\"type\": \"LineString\", \"coordinates\": [[1, 1], [2, 2]]}}", true},
        {"{\"v\": {\"type\": \"LineString\", \"coordinates\": [[1, 1], [20, 2]]}}", false},
        {"{\"v\": {\"type\": \"MultiPoint\", \"coordinates\": [[1, 1], [2, 2]]}}", true},
        {"{\"v\": {\"type\": \"Polygon\", \"coordinates\": [[[1,1],[2,1],[2,2],[1,1]]]}}", true},
        {"{\"v\": {\"type\": \"Polygon\", \"coordinates\": [[[1,1],[2,1],[1,1]]]}}", false},
        {"{\"v\": {\"type\": \"GeometryCollection\", \"geometries\": []}}", false},
        {"{\"v\": \"x\"}", false},
        {"{\"w\": 1}", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool m = !cases[i].want;
        CHECK_INT(match_json(sq, cases[i].doc, &m), 0);
        if (m != cases[i].want)
            fprintf(stderr, "case %zu: %s\n", i, cases[i].doc);
        CHECK(m == cases[i].want);
    }
    bool m = false;
    CHECK_INT(match_json("{\"$geoIntersects\": {\"$geometry\": {\"type\": \"LineString\", "
                         "\"coordinates\": [[-1, 5], [11, 5]]}}}",
                         "{\"v\": {\"type\": \"Polygon\", \"coordinates\": "
                         "[[[0,0],[10,0],[10,10],[0,10],[0,0]]]}}", &m), 0);
    CHECK(m);
    CHECK_INT(match_json("{\"$geoWithin\": {\"$centerSphere\": [[0, 0], 0.1]}}",
                         "{\"v\": [1, 1]}", &m), 0);
    CHECK(m);
    CHECK_INT(match_json("{\"$geoWithin\": {\"$polygon\": [[0, 0], [4, 0], [0, 4]]}}",
                         "{\"v\": [3, 3]}", &m), 0);
    CHECK(!m);
}

MFT_CASE(geo_errors, "/query/geo/errors_free_what_was_parsed")
{
    static const struct {
        const char *q, *msg;
    } cases[] = {
        {"{\"$geoWithin\": {\"$geometry\": {\"type\": \"Polygon\", \"coordinates\": "
         "[[[0,0],[1,0],[1,1],[0,1],[0,0]], [[5,5],[6,5],[6,6],[5,5]]]}}}",
         "Secondary loops not contained by first exterior loop"},
        {"{\"$geoWithin\": {\"$geometry\": {\"type\": \"MultiPolygon\", \"coordinates\": "
         "[[[[0,0],[1,0],[1,1],[0,1],[0,0]]], [[[0,0],[2,2],[2,0],[0,2],[0,0]]]]}}}",
         "Loop is not valid"},
        {"{\"$geoIntersects\": {\"$geometry\": {\"type\": \"GeometryCollection\", "
         "\"geometries\": [{\"type\": \"Point\", \"coordinates\": [1, 1]}, "
         "{\"type\": \"LineString\", \"coordinates\": [[1, 1]]}]}}}",
         "GeoJSON LineString must have at least 2 vertices"},
        {"{\"$geoWithin\": {\"$box\": [[0, 0], [1, 1]], \"$center\": [[0, 0], 1]}}",
         "$geoWithin doesn't accept multiple shapes"},
        {"{\"$geoWithin\": {\"$geometry\": {\"type\": \"Point\", \"coordinates\": [1, 1]}}}",
         "$within not supported with provided geometry"},
        {"{\"$near\": [0, 0]}", "invalid geo query predicate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mf_error err;
        mf_geo_query *q = NULL;
        bson_t *b = json(cases[i].q);
        CHECK(b);
        int rc = mfi_geo_query_parse(b, &q, &err);
        bson_destroy(b);
        CHECK_INT(rc, MF_BadValue);
        CHECK(q == NULL);
        if (!strstr(err.msg, cases[i].msg))
            fprintf(stderr, "case %zu: %s\n", i, err.msg);
        CHECK(strstr(err.msg, cases[i].msg) != NULL);
    }
}

/* A random value of a GeoJSON-like shape: right keys, any types,
 * nesting, NaN and huge numbers, loops open or closed. */
static void random_value(bson_t *dst, const char *key, int depth, unsigned *seed)
{
    static const char *const types[] = {"Point", "LineString", "Polygon", "MultiPoint",
                                        "MultiLineString", "MultiPolygon", "GeometryCollection",
                                        "Nope"};
    static const double nums[] = {0, 1, -1, 5, 90, 180, 200, -90.0000001, 1e308, NAN};
    int r = rand_r(seed) % (depth > 3 ? 3 : 7);
    switch (r) {
    case 0: BSON_APPEND_DOUBLE(dst, key, nums[rand_r(seed) % 10]); break;
    case 1: BSON_APPEND_INT32(dst, key, rand_r(seed) % 20 - 10); break;
    case 2: {
        const char *t = types[rand_r(seed) % 8]; /* the macro reads its argument twice */
        BSON_APPEND_UTF8(dst, key, t);
        break;
    }
    case 3: case 4: {
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(dst, key, &arr);
        int n = rand_r(seed) % 6;
        for (int i = 0; i < n; i++) {
            char k[16];
            snprintf(k, sizeof k, "%d", i);
            random_value(&arr, k, depth + 1, seed);
        }
        bson_append_array_end(dst, &arr);
        break;
    }
    default: {
        bson_t doc;
        BSON_APPEND_DOCUMENT_BEGIN(dst, key, &doc);
        const char *t = types[rand_r(seed) % 8];
        BSON_APPEND_UTF8(&doc, "type", t);
        random_value(&doc, rand_r(seed) % 4 ? "coordinates" : "geometries", depth + 1, seed);
        if (rand_r(seed) % 8 == 0)
            random_value(&doc, "crs", depth + 1, seed);
        bson_append_document_end(dst, &doc);
    }
    }
}

MFT_CASE(geo_random, "/query/geo/random_input_parses_or_fails_cleanly")
{
    unsigned seed = 20261207;
    mf_error err;
    mf_geo_query *q = NULL;
    bson_t *qb = json("{\"$geoIntersects\": {\"$geometry\": {\"type\": \"Polygon\", "
                      "\"coordinates\": [[[-10,-10],[10,-10],[10,10],[-10,10],[-10,-10]]]}}}");
    CHECK_INT(mfi_geo_query_parse(qb, &q, &err), 0);
    int ok = 0, bad = 0;
    for (int i = 0; i < 3000; i++) {
        bson_t doc = BSON_INITIALIZER, sec = BSON_INITIALIZER, inner;
        bson_iter_t it;
        random_value(&doc, "v", 0, &seed);
        bson_iter_init_find(&it, &doc, "v");
        (void)mfi_geo_query_matches(q, &it);
        if (mfi_geo_check_stored(&it, &err) == 0)
            ok++;
        else
            bad++;
        /* the same value as a query's $geometry */
        BSON_APPEND_DOCUMENT_BEGIN(&sec, "$geoIntersects", &inner);
        bson_append_iter(&inner, "$geometry", -1, &it);
        bson_append_document_end(&sec, &inner);
        mf_geo_query *q2 = NULL;
        if (mfi_geo_query_parse(&sec, &q2, &err) == 0)
            mfi_geo_query_free(q2);
        bson_destroy(&sec);
        bson_destroy(&doc);
    }
    mfi_geo_query_free(q);
    bson_destroy(qb);
    CHECK(ok > 0 && bad > 0);
}
