/*
 * plan_text.c -- a $text query's plan and scan (mongod's TEXT stage:
 * TEXT_MATCH over TEXT_OR, or over FETCH and OR when no score is asked
 * for, over one IXSCAN per term).
 *
 * Planning.  A filter with $text (at the top or in a top-level $and) must
 * be answered by the collection's text index: none (or a hidden or
 * unfinished one) is IndexNotFound (27) "text index required for $text
 * query"; a compound text index needs an equality on each prefix field
 * (else NoQueryExecutionPlans, 291).  The search is split into terms and
 * phrases in the query's $language, else the index's default_language.
 *
 * Scanning.  On its first call the scan reads, for each term, the index
 * keys that start with the prefix fields' values and the term (text
 * index keys: index_text.c), and keeps the set of their RecordIds; that
 * set outlives the collection lock, so later batches need no index
 * position (DESIGN.md section 4: they fetch by RecordId, and a document
 * deleted since is skipped).  Each candidate is fetched and
 *   - scored: the sum of the scores its keys of the terms hold (what
 *     TEXT_OR adds up; a document changed since keeps them, as in mongod),
 *   - judged by TEXT_MATCH (mfi_text_doc_matches: negations, phrases,
 *     case- or diacritic-sensitive terms),
 *   - judged by the matcher on the whole filter ($text matches all there),
 * which is the index invariant: the keys only propose candidates.  Rows
 * come in RecordId order with their score (mf_scan_row.score).
 */
#include "plan_int.h"
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A candidate: a RecordId and its score, the sum of its keys' scores. */
struct cand {
    uint64_t rid;
    double score;
    size_t term; /* while collecting: the term whose key it came from */
};

struct mfi_text_scan {
    mfi_text_query q;
    mfi_text_spec ts;
    bson_t *prefix;      /* the prefix fields' values {a: 1} (explain's indexPrefix) */
    mf_buf prefix_key;   /* and their key encoding */
    bool want_score;     /* TEXT_OR (else FETCH over OR, as mongod without a score) */
    bson_t *residual;    /* the filter without $text (explain's filter), or NULL */
    bool collected;
    struct cand *cands;  /* the candidates, by RecordId, with their scores */
    size_t ncands, next;
    uint64_t *term_keys; /* keys read per term, for explain */
};

void mfi_plan_text_free(struct mfi_text_scan *t)
{
    if (!t)
        return;
    mfi_text_query_clear(&t->q);
    mfi_text_spec_clear(&t->ts);
    if (t->prefix)
        bson_destroy(t->prefix);
    if (t->residual)
        bson_destroy(t->residual);
    mf_buf_free(&t->prefix_key);
    free(t->cands);
    free(t->term_keys);
    free(t);
}

/* The equality on `path` in `filter` (top level or a top-level $and):
 * {path: v} with v no operator document, or {path: {$eq: v}}. */
static bool equality_on(const bson_t *filter, const char *path, bson_iter_t *out)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, filter))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t el;
            bson_t sub;
            bson_iter_recurse(&it, &el);
            while (bson_iter_next(&el))
                if (mf_bsonx_doc_view(&el, &sub) && equality_on(&sub, path, out))
                    return true;
            continue;
        }
        if (strcmp(k, path) != 0)
            continue;
        if (!mfi_is_operator_doc(&it, false)) {
            if (BSON_ITER_HOLDS_ARRAY(&it) || BSON_ITER_HOLDS_REGEX(&it))
                return false;
            *out = it;
            return true;
        }
        bson_iter_t op;
        if (bson_iter_recurse(&it, &op) && bson_iter_find(&op, "$eq") &&
            !BSON_ITER_HOLDS_ARRAY(&op) && !BSON_ITER_HOLDS_REGEX(&op)) {
            *out = op;
            return true;
        }
    }
    return false;
}

/* Whether the projection or sort asks for the score. */
static bool asks_score(const bson_t *doc)
{
    bson_iter_t it;
    if (!doc || !bson_iter_init(&it, doc))
        return false;
    while (bson_iter_next(&it)) {
        bson_t sub;
        bson_iter_t m;
        if (mf_bsonx_doc_view(&it, &sub) && bson_iter_init_find(&m, &sub, "$meta") &&
            BSON_ITER_HOLDS_UTF8(&m) && strcmp(bson_iter_utf8(&m, NULL), "textScore") == 0)
            return true;
    }
    return false;
}

int mfi_plan_text(mf_scan *s, const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                  const bson_iter_t *operand, const bson_t *sort, const bson_t *projection,
                  mf_error *err)
{
    const mf_index_desc *d = NULL;
    for (size_t i = 0; i < nidx && !d; i++)
        if (mfi_text_index_spec(&idx[i]) && !idx[i].hidden && !idx[i].building)
            d = &idx[i];
    if (!d)
        return mf_error_set(err, MF_IndexNotFound, "text index required for $text query");
    struct mfi_text_scan *t = calloc(1, sizeof *t);
    if (!t)
        return oom(err);
    s->text = t;
    s->kind = P_TEXT;
    s->backward = true; /* as mongod's text IXSCANs show */
    int rc = mfi_text_query_parse(operand, &t->q, err);
    if (rc == 0)
        rc = mfi_text_spec_init(&t->ts, mfi_text_index_stored(d), err);
    if (rc == 0)
        rc = mfi_text_query_terms(&t->q, t->ts.default_lang, err);
    if (rc)
        return rc;
    t->want_score = asks_score(sort) || asks_score(projection);
    bson_iter_t it;
    if (!(t->residual = bson_new()))
        return oom(err);
    bson_iter_init(&it, filter);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "$text") != 0)
            mf_bsonx_append_iter(t->residual, bson_iter_key(&it), -1, &it);
    if (bson_empty(t->residual)) {
        bson_destroy(t->residual);
        t->residual = NULL;
    }
    if (!(t->prefix = bson_new()) ||
        !(t->term_keys = calloc(t->q.nbounds ? t->q.nbounds : 1, sizeof *t->term_keys)))
        return oom(err);
    for (size_t i = 0; i < t->ts.nbefore; i++) {
        bson_iter_t v;
        if (!equality_on(filter, t->ts.before[i], &v))
            return mf_error_set(err, MF_NoQueryExecutionPlans,
                                "error processing query: planner returned error :: caused by :: "
                                "failed to use text index to satisfy $text query (if text index "
                                "is compound, are equality predicates given for all prefix "
                                "fields?)");
        if (!mf_bsonx_append_iter(t->prefix, t->ts.before[i], -1, &v) ||
            mf_bsonx_key_append(&t->prefix_key, &v, d->desc[i]) != 0)
            return oom(err);
    }
    /* what explain shows of the index (scan_index, as an IXSCAN's) */
    s->ix.tree = d->tree;
    s->ix.multikey = d->multikey;
    s->ix.nfields = d->nfields;
    s->ix.unique = d->unique;
    s->ix.sparse = d->sparse;
    s->ix.partial = d->partial != NULL;
    if (!(s->ix.name = strdup(d->name)) || !(s->ix.key = bson_copy(d->key)) ||
        !(s->ix.paths = calloc(d->nfields, sizeof *s->ix.paths)))
        return oom(err);
    for (size_t i = 0; i < d->nfields; i++)
        if (!(s->ix.paths[i] = strdup(d->paths[i])))
            return oom(err);
    return 0;
}

void mfi_plan_text_want_score(mf_scan *s, const bson_t *sort, const bson_t *projection)
{
    s->text->want_score = asks_score(sort) || asks_score(projection);
}

void mfi_plan_text_force_score(mf_scan *s)
{
    if (s->kind == P_TEXT)
        s->text->want_score = true;
    for (size_t i = 0; s->kind == P_OR && i < s->nkids; i++)
        mfi_plan_text_force_score(s->kids[i]);
}

/* By RecordId, then term: each document's scores are added up in the
 * order of the terms, as mongod's TEXT_OR reads them. */
static int cmp_cand(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->rid != y->rid)
        return (x->rid > y->rid) - (x->rid < y->rid);
    return (x->term > y->term) - (x->term < y->term);
}

/* The score a text key holds after the term: a positive double, which the
 * key encoding (keyenc.c) writes as its exact decimal expansion
 * 0.d1d2... x 10^E -- tag, class 4, E + 32768 (2 bytes), digit pairs + 1,
 * 0.  -1 when it is not such a number (then the document is scored
 * again). */
static double key_score(const uint8_t *p, size_t n)
{
    char digits[800];
    size_t nd = 0;
    if (n < 5 || p[1] != 4)
        return p[1] == 3 && n >= 2 ? 0 : -1;
    int e = (int)((unsigned)p[2] << 8 | p[3]) - 32768;
    digits[nd++] = '0';
    digits[nd++] = '.';
    for (size_t i = 4; i < n && p[i] != 0; i++) {
        unsigned pair = (unsigned)p[i] - 1;
        if (nd + 24 >= sizeof digits || pair > 99)
            return -1;
        digits[nd++] = (char)('0' + pair / 10);
        digits[nd++] = (char)('0' + pair % 10);
    }
    snprintf(digits + nd, sizeof digits - nd, "e%d", e);
    return strtod(digits, NULL);
}

/* Read every term's keys into the set of candidates. */
static int collect(mf_scan *s, mf_engine *e, mf_error *err)
{
    struct mfi_text_scan *t = s->text;
    mf_btree *tree = mf_engine_tree(e, s->ix.tree);
    size_t cap = 0;
    mf_buf start = {0};
    int rc = 0;
    if (!tree)
        return mf_error_set(err, MF_InternalError, "text index %s: its tree is gone", s->ix.name);
    for (size_t i = 0; rc == 0 && i < t->q.nbounds; i++) {
        mf_cursor cur;
        bool valid;
        start.len = 0;
        if (mf_buf_append(&start, t->prefix_key.data, t->prefix_key.len) != 0 ||
            mfi_text_key_term(&start, t->q.bounds[i], strlen(t->q.bounds[i])) != 0) {
            rc = oom(err);
            break;
        }
        mf_cursor_init(&cur, tree);
        s->stats.seeks++;
        rc = mf_cursor_seek(&cur, start.data, start.len, false, &valid, err);
        while (rc == 0 && valid) {
            const uint8_t *k, *v;
            size_t kl, vl;
            mf_cursor_key(&cur, &k, &kl);
            if (kl < start.len || memcmp(k, start.data, start.len) != 0)
                break;
            mf_cursor_value(&cur, &v, &vl);
            s->stats.keys_examined++;
            t->term_keys[i]++;
            if (vl == 8) {
                if (t->ncands == cap) {
                    cap = cap ? cap * 2 : 256;
                    struct cand *r = realloc(t->cands, cap * sizeof *r);
                    if (!r) {
                        rc = oom(err);
                        break;
                    }
                    t->cands = r;
                }
                t->cands[t->ncands++] = (struct cand){
                    get_be64(v), key_score(k + start.len, kl - start.len), i};
            }
            rc = mf_cursor_next(&cur, &valid, err);
        }
    }
    mf_buf_free(&start);
    if (rc)
        return rc;
    if (t->ncands > 1) {
        qsort(t->cands, t->ncands, sizeof *t->cands, cmp_cand);
        size_t w = 1;
        for (size_t r = 1; r < t->ncands; r++) {
            struct cand *last = &t->cands[w - 1];
            if (t->cands[r].rid != last->rid)
                t->cands[w++] = t->cands[r];
            else if (last->score < 0 || t->cands[r].score < 0)
                last->score = -1;
            else
                last->score += t->cands[r].score;
        }
        s->stats.dups_tested = t->ncands;
        s->stats.dups_dropped = t->ncands - w;
        t->ncands = w;
    }
    t->collected = true;
    return 0;
}

/* The score of `doc` for the query's terms (TEXT_OR's sum). */
static int score_of(const struct mfi_text_scan *t, const bson_t *doc, double *score,
                    mf_error *err)
{
    mfi_text_terms terms;
    int rc = mfi_text_score_doc(&t->ts, doc, &terms, err);
    *score = 0;
    if (rc)
        return rc;
    for (size_t i = 0; i < t->q.nbounds; i++)
        *score += mfi_text_terms_get(&terms, t->q.bounds[i]);
    mfi_text_terms_free(&terms);
    return 0;
}

int mfi_plan_text_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m,
                       mf_scan_row *row, bool *valid, mf_error *err)
{
    struct mfi_text_scan *t = s->text;
    int rc;
    *valid = false;
    if (!t->collected && (rc = collect(s, e, err)) != 0)
        return rc;
    mf_btree *records = mf_engine_tree(e, mf_coll_records(c));
    if (!records)
        return mf_error_set(err, MF_InternalError, "the collection's records are gone");
    while (t->next < t->ncands) {
        uint8_t rid[8];
        const uint8_t *v;
        size_t vl;
        bool found, take;
        s->stats.works++;
        if (s->deadline && (rc = mf_deadline_check(s->deadline, err)) != 0)
            return rc;
        const struct cand *cd = &t->cands[t->next++];
        put_be64(rid, cd->rid);
        if ((rc = mf_btree_get(records, rid, 8, &found, &v, &vl, err)) != 0)
            return rc;
        if (!found)
            continue; /* deleted since the keys were read */
        row->rid = get_be64(rid);
        row->pos = -1;
        if (!bson_init_static(&row->doc, v, vl))
            return mf_error_set(err, MF_DataCorruption, "record %llu is not a document",
                                (unsigned long long)row->rid);
        row->data = v;
        s->stats.docs_examined++;
        /* The keys' scores, as mongod's TEXT_OR: a document changed since
         * they were read (another batch) keeps them, and is judged anew
         * by the filter beside $text and by TEXT_MATCH. */
        row->score = cd->score;
        if (row->score < 0 && (rc = score_of(t, &row->doc, &row->score, err)) != 0)
            return rc;
        if ((rc = mfi_text_doc_matches(&t->ts, &t->q, &row->doc, &take, err)) != 0)
            return rc;
        if (take && m && (rc = mf_matcher_eval(m, &row->doc, s->want_pos ? &row->pos : NULL,
                                               &take, err)) != 0)
            return rc;
        if (take) {
            row->scored = true;
            *valid = true;
            return 0;
        }
    }
    s->eof = true;
    return 0;
}

/* ------------------------------------------------------------- explain */

static void put_counts(const mf_scan *s, bool stats, uint64_t returned, bson_t *out)
{
    if (!stats)
        return;
    BSON_APPEND_INT32(out, "nReturned", (int32_t)returned);
    BSON_APPEND_INT32(out, "executionTimeMillisEstimate",
                      (int32_t)(s->stats.time_ns / 1000000u));
    BSON_APPEND_INT32(out, "works", (int32_t)(s->stats.works + 1));
    BSON_APPEND_INT32(out, "advanced", (int32_t)returned);
    BSON_APPEND_INT32(out, "needTime", (int32_t)(s->stats.works > returned ? s->stats.works - returned : 0));
    BSON_APPEND_INT32(out, "needYield", 0);
    BSON_APPEND_INT32(out, "saveState", (int32_t)s->stats.saves);
    BSON_APPEND_INT32(out, "restoreState", (int32_t)s->stats.saves);
    BSON_APPEND_BOOL(out, "isEOF", s->eof);
}

static void put_ixscan(const mf_scan *s, bool stats, size_t term, bson_t *out)
{
    const struct mfi_text_scan *t = s->text;
    bson_t mkp, arr, b;
    BSON_APPEND_UTF8(out, "stage", "IXSCAN");
    put_counts(s, stats, t->term_keys[term], out);
    BSON_APPEND_DOCUMENT(out, "keyPattern", s->ix.key);
    BSON_APPEND_UTF8(out, "indexName", s->ix.name);
    BSON_APPEND_BOOL(out, "isMultiKey", true);
    bson_append_document_begin(out, "multiKeyPaths", -1, &mkp);
    for (size_t i = 0; i < s->ix.nfields; i++) {
        bson_append_array_begin(&mkp, s->ix.paths[i], -1, &arr);
        bson_append_array_end(&mkp, &arr);
    }
    bson_append_document_end(out, &mkp);
    BSON_APPEND_BOOL(out, "isUnique", s->ix.unique);
    BSON_APPEND_BOOL(out, "isSparse", s->ix.sparse);
    BSON_APPEND_BOOL(out, "isPartial", s->ix.partial);
    BSON_APPEND_INT32(out, "indexVersion", 2);
    BSON_APPEND_UTF8(out, "direction", "backward");
    BSON_APPEND_DOCUMENT_BEGIN(out, "indexBounds", &b);
    bson_append_document_end(out, &b);
    if (stats) {
        BSON_APPEND_INT32(out, "keysExamined", (int32_t)t->term_keys[term]);
        BSON_APPEND_INT32(out, "seeks", 1);
        BSON_APPEND_INT32(out, "dupsTested", 0);
        BSON_APPEND_INT32(out, "dupsDropped", 0);
    }
}

/* One IXSCAN per term, as "inputStages". */
static void put_scans_list(const mf_scan *s, bool stats, bson_t *out)
{
    const struct mfi_text_scan *t = s->text;
    bson_t arr, one;
    char idx[16];
    BSON_APPEND_ARRAY_BEGIN(out, "inputStages", &arr);
    for (size_t i = 0; i < t->q.nbounds; i++) {
        const char *k;
        bson_uint32_to_string((uint32_t)i, &k, idx, sizeof idx);
        bson_append_document_begin(&arr, k, -1, &one);
        put_ixscan(s, stats, i, &one);
        bson_append_document_end(&arr, &one);
    }
    bson_append_array_end(out, &arr);
}

/* The IXSCANs under TEXT_OR or OR (or the one under FETCH). */
static void put_scans(const mf_scan *s, bool stats, bson_t *out)
{
    const struct mfi_text_scan *t = s->text;
    bson_t in;
    if (t->q.nbounds == 1 && !t->want_score) {
        BSON_APPEND_DOCUMENT_BEGIN(out, "inputStage", &in);
        put_ixscan(s, stats, 0, &in);
        bson_append_document_end(out, &in);
        return;
    }
    if (!t->want_score) {
        BSON_APPEND_DOCUMENT_BEGIN(out, "inputStage", &in);
        BSON_APPEND_UTF8(&in, "stage", "OR");
        put_counts(s, stats, s->stats.keys_examined - s->stats.dups_dropped, &in);
        if (stats) {
            BSON_APPEND_INT32(&in, "dupsTested", (int32_t)s->stats.dups_tested);
            BSON_APPEND_INT32(&in, "dupsDropped", (int32_t)s->stats.dups_dropped);
        }
        put_scans_list(s, stats, &in);
        bson_append_document_end(out, &in);
        return;
    }
    put_scans_list(s, stats, out);
}

int mfi_plan_text_explain(const mf_scan *s, bool stats, bson_t *out)
{
    const struct mfi_text_scan *t = s->text;
    bson_t pq, in;
    BSON_APPEND_UTF8(out, "stage", "TEXT_MATCH");
    put_counts(s, stats, s->stats.n_returned, out);
    BSON_APPEND_DOCUMENT(out, "indexPrefix", t->prefix);
    BSON_APPEND_UTF8(out, "indexName", s->ix.name);
    BSON_APPEND_DOCUMENT_BEGIN(out, "parsedTextQuery", &pq);
    mfi_text_query_explain(&t->q, &pq);
    bson_append_document_end(out, &pq);
    BSON_APPEND_INT32(out, "textIndexVersion", t->ts.default_lang->version);
    if (stats)
        BSON_APPEND_INT32(out, "docsRejected",
                          (int32_t)(s->stats.docs_examined - s->stats.n_returned));
    BSON_APPEND_DOCUMENT_BEGIN(out, "inputStage", &in);
    if (t->want_score) {
        BSON_APPEND_UTF8(&in, "stage", "TEXT_OR");
        if (t->residual)
            BSON_APPEND_DOCUMENT(&in, "filter", t->residual);
        put_counts(s, stats, s->stats.docs_examined, &in);
        if (stats)
            BSON_APPEND_INT32(&in, "docsExamined", (int32_t)s->stats.docs_examined);
    } else {
        BSON_APPEND_UTF8(&in, "stage", "FETCH");
        if (t->residual)
            BSON_APPEND_DOCUMENT(&in, "filter", t->residual);
        put_counts(s, stats, s->stats.docs_examined, &in);
        if (stats) {
            BSON_APPEND_INT32(&in, "docsExamined", (int32_t)s->stats.docs_examined);
            BSON_APPEND_INT32(&in, "alreadyHasObj", 0);
        }
    }
    put_scans(s, stats, &in);
    bson_append_document_end(out, &in);
    return 0;
}
