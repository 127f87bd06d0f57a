/* Cases for csrc/query/update.c under ASan/UBSan: results, and that every
 * error path frees what it allocated (the leak checker runs at exit).  The
 * semantics are covered in depth by tests/test_update_ops.py. */
#include "test.h"
#include "../query/query.h"

#include <stdlib.h>

typedef struct ucase {
    const char *doc, *update, *filters; /* canonical extended JSON; filters an array doc */
    int64_t pos;
    bool is_insert;
    const char *want; /* the result as JSON, or NULL when `code` is expected */
    int code;
} ucase;

static const ucase cases[] = {
    {"{\"_id\": 1}", "{\"$set\": {\"b\": 1, \"a.c\": 2}}", NULL, -1, false,
     "{ \"_id\" : 1, \"a\" : { \"c\" : 2 }, \"b\" : 1 }", 0},
    {"{\"_id\": 1, \"a\": [1, 2, 3]}", "{\"$inc\": {\"a.$[x]\": 10}}",
     "{\"0\": {\"x\": {\"$gte\": 2}}}", -1, false, "{ \"_id\" : 1, \"a\" : [ 1, 12, 13 ] }", 0},
    {"{\"_id\": 1, \"a\": [{\"b\": 1}]}", "{\"$set\": {\"a.$.b\": 5, \"a.0.c\": 6}}", NULL, 0,
     false, "{ \"_id\" : 1, \"a\" : [ { \"b\" : 5, \"c\" : 6 } ] }", 0},
    {"{\"_id\": 1, \"a\": [0, 1]}", "{\"$set\": {\"a.$[i].x\": 1, \"a.$[j].y\": 2}}",
     "{\"0\": {\"i\": {\"$gte\": 0}}, \"1\": {\"j\": 1}}", -1, false, NULL, 28},
    {"{\"_id\": 1, \"a\": [{}, {}]}", "{\"$set\": {\"a.$[i].x\": 1, \"a.$[j].y\": 2}}",
     "{\"0\": {\"i.z\": null}, \"1\": {\"j\": {}}}", -1, false,
     "{ \"_id\" : 1, \"a\" : [ { \"x\" : 1, \"y\" : 2 }, { \"x\" : 1, \"y\" : 2 } ] }", 0},
    {"{\"_id\": 1, \"a\": [0]}", "{\"$set\": {\"a.$[i]\": 2, \"a.$[j]\": 3}}",
     "{\"0\": {\"i\": 0}, \"1\": {\"j\": 0}}", -1, false, NULL, 40},
    {"{\"_id\": 1, \"a\": [3, 1, 2]}",
     "{\"$push\": {\"a\": {\"$each\": [0], \"$sort\": 1, \"$slice\": -2}}}", NULL, -1, false,
     "{ \"_id\" : 1, \"a\" : [ 2, 3 ] }", 0},
    {"{\"_id\": 1, \"a\": 1}", "{\"$rename\": {\"a\": \"b.c\"}}", NULL, -1, false,
     "{ \"_id\" : 1, \"b\" : { \"c\" : 1 } }", 0},
    {"{\"_id\": 1, \"a\": 1}", "{\"$set\": {\"a.b\": 1}}", NULL, -1, false, NULL, 28},
    {"{\"_id\": 1}", "{\"$set\": {\"a.$\": 1}}", NULL, -1, false, NULL, 2},
    {"{\"_id\": 1}", "{\"$set\": {\"a.$[x]\": 1}}", "{\"0\": {\"y\": 1}}", -1, false, NULL, 2},
    {"{\"_id\": 1}", "{\"$set\": {\"a\": 1}}", "{\"0\": {\"x\": 1}}", -1, false, NULL, 9},
    {"{\"_id\": 1}", "{\"$pull\": {\"a\": {\"$bad\": 1}}}", NULL, -1, false, NULL, 2},
    {"{\"_id\": 1}", "{\"$set\": {\"_id\": 2}}", NULL, -1, false, NULL, 66},
    {"{\"_id\": 1}", "{\"$setOnInsert\": {\"a\": 1}}", NULL, -1, true,
     "{ \"_id\" : 1, \"a\" : 1 }", 0},
    {"{\"_id\": 1, \"a\": 1}", "{\"b\": 2}", NULL, -1, false, "{ \"_id\" : 1, \"b\" : 2 }", 0},
};

static bson_t *json(const char *s)
{
    bson_error_t e;
    return s ? bson_new_from_json((const uint8_t *)s, -1, &e) : NULL;
}

MFT_CASE(update_table, "/query/update/table")
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const ucase *c = &cases[i];
        bson_t *doc = json(c->doc), *upd = json(c->update), *af = json(c->filters);
        mf_update *u = NULL;
        mf_error err = {0};
        bson_t out;
        bool changed;
        int rc = mf_update_parse(upd, af, &u, &err);
        bson_init(&out);
        if (rc == 0) {
            bson_destroy(&out);
            rc = mf_update_apply(u, doc, c->is_insert, c->pos, 0, &out, &changed, &err);
        }
        char *got = rc == 0 ? bson_as_relaxed_extended_json(&out, NULL) : NULL;
        bool ok = c->want ? rc == 0 && strcmp(got, c->want) == 0 : rc == c->code;
        if (!ok)
            printf("  case %zu: rc %d (%s) got %s\n", i, rc, err.msg, got ? got : "-");
        bson_free(got);
        bson_destroy(&out);
        mf_update_free(u);
        bson_destroy(doc);
        bson_destroy(upd);
        if (af)
            bson_destroy(af);
        CHECK(ok);
    }
}

MFT_CASE(upsert_seed, "/query/update/upsert_seed")
{
    bson_t *f = json("{\"a.b\": 1, \"_id\": 2, \"c\": {\"$gt\": 1}}");
    bson_t out;
    mf_error err;
    CHECK_INT(mf_update_upsert_seed(f, &out, &err), 0);
    char *s = bson_as_relaxed_extended_json(&out, NULL);
    bool ok = strcmp(s, "{ \"_id\" : 2, \"a\" : { \"b\" : 1 } }") == 0;
    bson_free(s);
    bson_destroy(&out);
    bson_destroy(f);
    CHECK(ok);
    f = json("{\"a\": 1, \"a.b\": 1}");
    int rc = mf_update_upsert_seed(f, &out, &err);
    bson_destroy(&out);
    bson_destroy(f);
    CHECK_INT(rc, 54);
}

MFT_CASE(match_pos, "/query/match/pos")
{
    bson_t *f = json("{\"a.b\": 2}"), *d = json("{\"a\": [{\"b\": 1}, {\"b\": 2}]}");
    mf_matcher *m;
    mf_error err;
    int64_t pos = -7;
    CHECK_INT(mf_matcher_parse(f, &m, &err), 0);
    bool hit = mf_matcher_match_pos(m, d, &pos);
    bool plain = mf_matcher_match(m, d);
    mf_matcher_free(m);
    bson_destroy(f);
    bson_destroy(d);
    CHECK(hit && plain);
    CHECK_INT(pos, 1);
}

/* $inc and $mul on decimals: bsonx's decimal arithmetic (mf_dec_add,
 * mf_dec_mul), as mongod's SafeNum has it -- a double operand becomes a
 * decimal of 15 significant digits, zero as 0E+0; the result is exact up
 * to 34 digits, rounded half to even past them; -0 + -0 is -0. */
MFT_CASE(update_decimal, "/query/update/decimal_arith")
{
    static const struct {
        const char *doc, *update, *want; /* want: a's value, a decimal */
    } dc[] = {
        {"{\"a\": {\"$numberDecimal\": \"1.1\"}}",
         "{\"$inc\": {\"a\": {\"$numberDecimal\": \"2.20\"}}}", "3.30"},
        {"{\"a\": {\"$numberDecimal\": \"1\"}}", "{\"$inc\": {\"a\": 0.1}}", "1.100000000000000"},
        {"{\"a\": {\"$numberDecimal\": \"205\"}}", "{\"$inc\": {\"a\": 0.0}}", "205"},
        {"{\"a\": {\"$numberDecimal\": \"-0\"}}",
         "{\"$inc\": {\"a\": {\"$numberDecimal\": \"-0\"}}}", "-0"},
        {"{\"a\": {\"$numberDecimal\": \"9999999999999999999999999999999999\"}}",
         "{\"$inc\": {\"a\": 1}}", "1.000000000000000000000000000000000E+34"},
        {"{\"a\": {\"$numberDecimal\": \"1234567890123456789012345678901234\"}}",
         "{\"$mul\": {\"a\": 10}}", "1.234567890123456789012345678901234E+34"},
        {"{\"a\": {\"$numberLong\": \"9223372036854775807\"}}",
         "{\"$inc\": {\"a\": {\"$numberDecimal\": \"1\"}}}", "9223372036854775808"},
        {"{\"a\": 3}", "{\"$mul\": {\"a\": {\"$numberDecimal\": \"1.5\"}}}", "4.5"},
        {"{\"b\": 1}", "{\"$mul\": {\"a\": {\"$numberDecimal\": \"-1.5\"}}}", "-0.0"},
        {"{\"a\": {\"$numberDecimal\": \"Infinity\"}}",
         "{\"$inc\": {\"a\": {\"$numberDecimal\": \"-Infinity\"}}}", "NaN"},
    };
    for (size_t i = 0; i < sizeof dc / sizeof dc[0]; i++) {
        bson_t *doc = json(dc[i].doc), *upd = json(dc[i].update);
        mf_update *u = NULL;
        mf_error err = {0};
        bson_t out = BSON_INITIALIZER;
        bson_iter_t a;
        bool changed, ok = false;
        char got[BSON_DECIMAL128_STRING] = "-";
        int rc = mf_update_parse(upd, NULL, &u, &err);
        if (rc == 0) {
            bson_destroy(&out);
            rc = mf_update_apply(u, doc, false, -1, 0, &out, &changed, &err);
        }
        if (rc == 0 && bson_iter_init_find(&a, &out, "a") && BSON_ITER_HOLDS_DECIMAL128(&a)) {
            bson_decimal128_t d;
            bson_iter_decimal128(&a, &d);
            bson_decimal128_to_string(&d, got);
            ok = strcmp(got, dc[i].want) == 0;
        }
        if (!ok)
            printf("  case %zu: rc %d (%s) got %s\n", i, rc, err.msg, got);
        bson_destroy(&out);
        mf_update_free(u);
        bson_destroy(doc);
        bson_destroy(upd);
        CHECK(ok);
    }
}
