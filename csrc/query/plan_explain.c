/*
 * plan_explain.c -- a planned scan as explain shows it: mongod's stages
 * (COLLSCAN, IDHACK, FETCH over IXSCAN or DISTINCT_SCAN, COUNT_SCAN,
 * SUBPLAN over FETCH over OR) with their bounds and, after a run, their
 * counters; and the plan's one-line names (planSummary).
 */
#include "plan_int.h"
#include "index_type.h"

#include <stdio.h>
#include <string.h>

const char *mf_scan_describe(const mf_scan *s)
{
    if (s->kind == P_COLLSCAN)
        return "COLLSCAN";
    if (s->kind == P_OR)
        return "OR";
    if (s->kind == P_TEXT)
        return "TEXT_MATCH";
    if (s->kind == P_NEAR)
        return "GEO_NEAR_2DSPHERE";
    return s->idhack ? "IDHACK" : s->distinct_fields ? "DISTINCT_SCAN" : "IXSCAN";
}

/* One leaf of the summary, appended at `*n` of `out`. */
static void summary_leaf(const mf_scan *s, char *out, size_t cap, size_t *n)
{
    char key[200];
    const char *stage = s->kind == P_COLLSCAN ? "COLLSCAN"
                        : s->kind == P_NEAR   ? "GEO_NEAR_2DSPHERE"
                        : s->idhack           ? "IDHACK"
                        : s->count_scan       ? "COUNT_SCAN"
                        : s->distinct_fields  ? "DISTINCT_SCAN"
                                              : "IXSCAN";
    key[0] = 0;
    if ((s->kind == P_IXSCAN || s->kind == P_TEXT || s->kind == P_NEAR) && !s->idhack &&
        s->ix.key)
        mf_bsonx_to_string(s->ix.key, key, sizeof key);
    if (*n < cap)
        *n += (size_t)snprintf(out + *n, cap - *n, "%s%s%s%s", *n ? ", " : "", stage,
                               key[0] ? " " : "", key);
    if (*n >= cap)
        *n = cap - 1;
}

void mf_scan_plan_summary(const mf_scan *s, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    if (s->kind == P_OR)
        for (size_t i = 0; i < s->nkids; i++)
            summary_leaf(s->kids[i], out, cap, &n);
    else
        summary_leaf(s, out, cap, &n);
}

/* -------------------------------------------------------------- explain */

static void put_interval(char *out, size_t cap, const mfi_ival *iv, bool reversed)
{
    if (reversed)
        snprintf(out, cap, "%c%s, %s%c", iv->hi_incl ? '[' : '(', iv->hi_s, iv->lo_s,
                 iv->lo_incl ? ']' : ')');
    else
        snprintf(out, cap, "%c%s, %s%c", iv->lo_incl ? '[' : '(', iv->lo_s, iv->hi_s,
                 iv->hi_incl ? ']' : ')');
}

/* indexBounds: per field, its intervals in the order the scan meets them. */
static void put_bounds(const mf_scan *s, bson_t *out)
{
    bson_t doc, arr;
    char buf[1200], num[24];
    bson_append_document_begin(out, "indexBounds", -1, &doc);
    for (size_t i = 0; !s->key_range && i < s->ix.nfields; i++) {
        const mfi_oil *o = &s->ix.oils[i];
        bool reversed = s->ix.desc[i] != s->backward;
        bson_append_array_begin(&doc, s->ix.paths[i], -1, &arr);
        for (size_t n = 0; n < o->n; n++) {
            put_interval(buf, sizeof buf, &o->v[reversed ? o->n - 1 - n : n], reversed);
            snprintf(num, sizeof num, "%zu", n);
            bson_append_utf8(&arr, num, -1, buf, -1);
        }
        bson_append_array_end(&doc, &arr);
    }
    bson_append_document_end(out, &doc);
}

/* The counters every stage shows, after `stage` (and `filter`). */
static void put_common(const mf_scan *s, bson_t *out, uint64_t returned, uint64_t works)
{
    BSON_APPEND_INT32(out, "nReturned", (int32_t)returned);
    BSON_APPEND_INT32(out, "executionTimeMillisEstimate", (int32_t)millis(s));
    BSON_APPEND_INT32(out, "works", (int32_t)works);
    BSON_APPEND_INT32(out, "advanced", (int32_t)returned);
    BSON_APPEND_INT32(out, "needTime", (int32_t)(works > returned + 1 ? works - returned - 1 : 0));
    BSON_APPEND_INT32(out, "needYield", 0);
    BSON_APPEND_INT32(out, "saveState", (int32_t)s->stats.saves);
    BSON_APPEND_INT32(out, "restoreState", (int32_t)s->stats.saves);
    BSON_APPEND_BOOL(out, "isEOF", s->eof);
}

/* What IXSCAN and COUNT_SCAN say of their index, keyPattern to
 * indexVersion. */
static void put_index(const mf_scan *s, bson_t *out)
{
    bson_t mkp, arr;
    BSON_APPEND_DOCUMENT(out, "keyPattern", s->ix.key);
    BSON_APPEND_UTF8(out, "indexName", s->ix.name);
    if (s->ix.coll) { /* shown only when not simple, as mongod */
        bson_t coll;
        BSON_APPEND_DOCUMENT_BEGIN(out, "collation", &coll);
        mf_collator_to_bson(s->ix.coll, &coll);
        bson_append_document_end(out, &coll);
    }
    BSON_APPEND_BOOL(out, "isMultiKey", s->ix.multikey != 0);
    if (!(s->ix.type && s->ix.type->no_multikey_paths)) {
        bson_append_document_begin(out, "multiKeyPaths", -1, &mkp);
        for (size_t i = 0; i < s->ix.nfields; i++) {
            bson_append_array_begin(&mkp, s->ix.paths[i], -1, &arr);
            /* Only a bit per field is known: the whole path stands for it. */
            if (i < 32 && (s->ix.multikey >> i & 1u))
                bson_append_utf8(&arr, "0", 1, s->ix.paths[i], -1);
            bson_append_array_end(&mkp, &arr);
        }
        bson_append_document_end(out, &mkp);
    }
    BSON_APPEND_BOOL(out, "isUnique", s->ix.unique);
    BSON_APPEND_BOOL(out, "isSparse", s->ix.sparse);
    BSON_APPEND_BOOL(out, "isPartial", s->ix.partial);
    BSON_APPEND_INT32(out, "indexVersion", 2);
}

/* Rows an IXSCAN passed up: to FETCH, each key it did not drop as a
 * duplicate; with no FETCH (keys answer), the rows returned. */
static uint64_t ixscan_returned(const mf_scan *s)
{
    return keys_answer(s) ? s->stats.n_returned
                          : s->stats.docs_examined + s->stats.dups_dropped;
}

static void put_ixscan(const mf_scan *s, bool stats, bson_t *out)
{
    BSON_APPEND_UTF8(out, "stage", s->distinct_fields ? "DISTINCT_SCAN" : "IXSCAN");
    if (stats)
        put_common(s, out, ixscan_returned(s), s->stats.keys_examined + 1);
    put_index(s, out);
    BSON_APPEND_UTF8(out, "direction", s->backward ? "backward" : "forward");
    if (s->key_re) {
        bson_t f, re;
        BSON_APPEND_DOCUMENT_BEGIN(out, "filter", &f);
        bson_append_document_begin(&f, s->ix.paths[0], -1, &re);
        BSON_APPEND_UTF8(&re, "$regex", s->key_re_pattern);
        if (s->key_re_flags[0])
            BSON_APPEND_UTF8(&re, "$options", s->key_re_flags);
        bson_append_document_end(&f, &re);
        bson_append_document_end(out, &f);
    }
    put_bounds(s, out);
    if (stats) {
        BSON_APPEND_INT32(out, "keysExamined", (int32_t)s->stats.keys_examined);
        BSON_APPEND_INT32(out, "seeks", (int32_t)s->stats.seeks);
        BSON_APPEND_INT32(out, "dupsTested", (int32_t)s->stats.dups_tested);
        BSON_APPEND_INT32(out, "dupsDropped", (int32_t)s->stats.dups_dropped);
    }
}

/* mongod's COUNT_SCAN: the keys from a start key to an end key. */
static void put_count_scan(const mf_scan *s, bool stats, bson_t *out)
{
    bson_t b, start = BSON_INITIALIZER, end = BSON_INITIALIZER;
    bool si, ei;
    BSON_APPEND_UTF8(out, "stage", "COUNT_SCAN");
    if (stats) {
        put_common(s, out, s->stats.n_returned, s->stats.keys_examined + 1);
        BSON_APPEND_INT32(out, "keysExamined", (int32_t)s->stats.keys_examined);
    }
    put_index(s, out);
    mfi_plan_single_interval(s, &start, &si, &end, &ei);
    BSON_APPEND_DOCUMENT_BEGIN(out, "indexBounds", &b);
    BSON_APPEND_DOCUMENT(&b, "startKey", &start);
    BSON_APPEND_BOOL(&b, "startKeyInclusive", si);
    BSON_APPEND_DOCUMENT(&b, "endKey", &end);
    BSON_APPEND_BOOL(&b, "endKeyInclusive", ei);
    bson_append_document_end(out, &b);
    bson_destroy(&start);
    bson_destroy(&end);
}

/* An OR's plan: FETCH (the filter beside the $or) over OR, whose
 * inputStages are the clauses' scans, an IXSCAN alone when its bounds
 * answer its clause; under SUBPLAN when the $or is the whole filter, as
 * mongod plans a rooted $or (its contained $or has no SUBPLAN). */
static void put_or(const mf_scan *s, bool stats, bson_t *out)
{
    bson_t sub, or_doc, arr, kid;
    bson_t *fetch = out, *or = &or_doc;
    char key[24];
    uint64_t works = s->stats.works;
    if (s->rooted) {
        BSON_APPEND_UTF8(out, "stage", "SUBPLAN");
        if (stats)
            put_common(s, out, s->stats.n_returned, works);
        bson_append_document_begin(out, "inputStage", -1, &sub);
        fetch = &sub;
    }
    /* beside a text scan the OR's clauses are fetched each (TEXT_MATCH
     * fetches): a FETCH above only filters what is beside the $or */
    bool over = !s->text_or || (s->residual && !bson_empty(s->residual));
    if (over) {
        BSON_APPEND_UTF8(fetch, "stage", "FETCH");
        if (s->residual && !bson_empty(s->residual))
            BSON_APPEND_DOCUMENT(fetch, "filter", s->residual);
        if (stats) {
            put_common(s, fetch, s->stats.n_returned, works);
            BSON_APPEND_INT32(fetch, "docsExamined", (int32_t)s->stats.docs_examined);
            BSON_APPEND_INT32(fetch, "alreadyHasObj", 0);
        }
        bson_append_document_begin(fetch, "inputStage", -1, or);
    } else {
        or = fetch; /* the OR is the stage itself */
    }
    BSON_APPEND_UTF8(or, "stage", "OR");
    if (stats) {
        put_common(s, or, s->stats.n_returned, works);
        BSON_APPEND_INT32(or, "dupsTested", (int32_t)s->stats.dups_tested);
        BSON_APPEND_INT32(or, "dupsDropped", (int32_t)s->stats.dups_dropped);
    }
    bson_append_array_begin(or, "inputStages", -1, &arr);
    for (size_t i = 0; i < s->nkids; i++) {
        const mf_scan *k = s->kids[i];
        snprintf(key, sizeof key, "%zu", i);
        bson_append_document_begin(&arr, key, -1, &kid);
        if (k->kind == P_IXSCAN && k->residual && bson_empty(k->residual) && !s->text_or)
            put_ixscan(k, stats, &kid); /* an IDHACK too */
        else
            mf_scan_explain(k, stats, &kid);
        bson_append_document_end(&arr, &kid);
    }
    bson_append_array_end(or, &arr);
    if (over)
        bson_append_document_end(fetch, or);
    if (s->rooted)
        bson_append_document_end(out, &sub);
}

int mf_scan_explain(const mf_scan *s, bool stats, bson_t *out)
{
    uint64_t works = s->stats.works;
    if (s->kind == P_TEXT)
        return mfi_plan_text_explain(s, stats, out);
    if (s->kind == P_NEAR)
        return mfi_plan_near_explain(s, stats, out);
    if (s->kind == P_OR) {
        put_or(s, stats, out);
    } else if (s->kind == P_COLLSCAN) {
        BSON_APPEND_UTF8(out, "stage", "COLLSCAN");
        if (s->filter)
            BSON_APPEND_DOCUMENT(out, "filter", s->filter);
        if (stats)
            put_common(s, out, s->stats.n_returned, works);
        BSON_APPEND_UTF8(out, "direction", s->backward ? "backward" : "forward");
        if (stats)
            BSON_APPEND_INT32(out, "docsExamined", (int32_t)s->stats.docs_examined);
    } else if (s->idhack) {
        BSON_APPEND_UTF8(out, "stage", "IDHACK");
        if (stats) {
            put_common(s, out, s->stats.n_returned, works);
            BSON_APPEND_INT32(out, "keysExamined", (int32_t)s->stats.keys_examined);
            BSON_APPEND_INT32(out, "docsExamined", (int32_t)s->stats.docs_examined);
        }
    } else if (s->count_scan) {
        put_count_scan(s, stats, out);
    } else if (keys_answer(s)) { /* counting keys: nothing is fetched */
        put_ixscan(s, stats, out);
    } else {
        bson_t in;
        BSON_APPEND_UTF8(out, "stage", "FETCH");
        if (s->residual && !bson_empty(s->residual))
            BSON_APPEND_DOCUMENT(out, "filter", s->residual);
        if (stats) {
            put_common(s, out, s->stats.n_returned, works);
            BSON_APPEND_INT32(out, "docsExamined", (int32_t)s->stats.docs_examined);
            BSON_APPEND_INT32(out, "alreadyHasObj", 0);
        }
        bson_append_document_begin(out, "inputStage", -1, &in);
        put_ixscan(s, stats, &in);
        bson_append_document_end(out, &in);
    }
    return 0;
}
