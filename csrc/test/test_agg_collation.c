/* Cases for the expression context of find / update / delete
 * (agg/expr_ctx.c) under a collation: `$expr` in a filter and a command's
 * `let` compare strings as the command's collation says. */
#include "../agg/agg.h"
#include "../query/query.h"
#include "test.h"

/* {locale: "en_US", strength: 2}: case-insensitive. */
static mf_collator *strength2(void)
{
    bson_t spec = BSON_INITIALIZER;
    mf_collator *c = NULL;
    mf_error err;
    BSON_APPEND_UTF8(&spec, "locale", "en_US");
    BSON_APPEND_INT32(&spec, "strength", 2);
    if (mf_collator_new(&spec, &c, &err) != 0)
        c = NULL;
    bson_destroy(&spec);
    return c;
}

/* Whether {x: <x>} matches `filter` with $expr compiled through `x`. */
static int expr_match(mf_expr_ctx *x, const char *filter_json, const char *value, bool *hit)
{
    bson_error_t be;
    mf_error err;
    bson_t *filter = bson_new_from_json((const uint8_t *)filter_json, -1, &be);
    bson_t doc = BSON_INITIALIZER;
    mf_expr_hooks hooks;
    mf_matcher *m = NULL;
    BSON_APPEND_UTF8(&doc, "x", value);
    mf_expr_ctx_hooks(x, &hooks);
    int rc = filter ? mf_matcher_parse_ex(filter, &hooks, &m, &err) : -1;
    if (rc == 0)
        rc = mf_matcher_eval(m, &doc, NULL, hit, &err);
    mf_matcher_free(m);
    bson_destroy(&doc);
    if (filter)
        bson_destroy(filter);
    return rc;
}

/* {$expr: {$eq: ["$x", "PING"]}} matches "ping" under strength 2 and not
 * without a collation; `let` variables are compared alike; the context
 * keeps its own reference (the caller's is dropped first). */
MFT_CASE(expr_ctx_collation, "/agg/collation/expr_ctx")
{
    mf_collator *c = strength2();
    CHECK(c != NULL);
    mf_expr_ctx *x = NULL, *plain = NULL;
    mf_error err;
    bool hit = false;
    bson_t let = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&let, "want", "PiNg");
    int rc = mf_expr_ctx_new_coll(&let, 0, c, &x, &err);
    mf_collator_unref(c);
    CHECK_INT(rc, 0);
    CHECK_INT(mf_expr_ctx_new(&let, 0, &plain, &err), 0);
    bson_destroy(&let);

    const char *eq = "{\"$expr\": {\"$eq\": [\"$x\", \"PING\"]}}";
    const char *var = "{\"$expr\": {\"$eq\": [\"$x\", \"$$want\"]}}";
    const char *lt = "{\"$expr\": {\"$lt\": [\"$x\", \"B\"]}}";
    CHECK_INT(expr_match(x, eq, "ping", &hit), 0);
    CHECK(hit);
    CHECK_INT(expr_match(x, var, "ping", &hit), 0);
    CHECK(hit);
    CHECK_INT(expr_match(x, eq, "pong", &hit), 0);
    CHECK(!hit);
    /* "a" < "B" case-insensitively; binary order puts "B" first */
    CHECK_INT(expr_match(x, lt, "a", &hit), 0);
    CHECK(hit);
    CHECK_INT(expr_match(plain, lt, "a", &hit), 0);
    CHECK(!hit);
    CHECK_INT(expr_match(plain, eq, "ping", &hit), 0);
    CHECK(!hit);
    CHECK_INT(expr_match(plain, var, "ping", &hit), 0);
    CHECK(!hit);
    mf_expr_ctx_free(x);
    mf_expr_ctx_free(plain);
}
