/*
 * plan_or.c -- OR plans: a $or whose every clause an index serves, scanned
 * as one index scan per clause (plan.c's head explains the plan), and the
 * canonical form of a $or the planner reads in place of the filter's own
 * (a $or of equalities on one path as its $in, a nested $or flattened).
 */
#include "plan_int.h"
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Clauses past this many are not planned one by one: the $or scans. */
#define MAX_OR_CLAUSES 64

/* `filter` without one $or: the top-level one (`in_and` SIZE_MAX), or the
 * one in element `in_and` of the top-level $and (a $and left empty goes).
 * NULL when out of memory. */
static bson_t *filter_without_or(const bson_t *filter, size_t in_and)
{
    bson_t *out = bson_new();
    bson_iter_t it;
    if (!out)
        return NULL;
    if (in_and == SIZE_MAX) {
        mf_bsonx_copy_except(filter, out, "$or");
        return out;
    }
    bson_iter_init(&it, filter);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$and") != 0 || !BSON_ITER_HOLDS_ARRAY(&it)) {
            mf_bsonx_append_iter(out, k, -1, &it);
            continue;
        }
        bson_t left = BSON_INITIALIZER;
        bson_iter_t el;
        size_t i = 0, kept = 0;
        char key[24];
        bson_iter_recurse(&it, &el);
        for (; bson_iter_next(&el); i++) {
            snprintf(key, sizeof key, "%zu", kept);
            if (i != in_and) {
                mf_bsonx_append_iter(&left, key, -1, &el);
                kept++;
                continue;
            }
            uint32_t len;
            const uint8_t *data;
            bson_t sub, rest = BSON_INITIALIZER;
            bson_iter_document(&el, &len, &data);
            if (bson_init_static(&sub, data, len))
                mf_bsonx_copy_except(&sub, &rest, "$or");
            if (!bson_empty(&rest)) {
                bson_append_document(&left, key, -1, &rest);
                kept++;
            }
            bson_destroy(&rest);
        }
        if (kept) /* its keys are "0", "1", ...: an array's */
            bson_append_array(out, "$and", -1, &left);
        bson_destroy(&left);
    }
    return out;
}

/* The `nth` (from 0) $or an OR plan may serve: the filter's top-level
 * one, then those in the elements of its top-level $and, into `*ors` (an
 * array); `*in_and` says where it was (SIZE_MAX: the top level). */
static bool find_or(const bson_t *filter, size_t nth, bson_iter_t *ors, size_t *in_and)
{
    bson_iter_t it, el, sub;
    if (!filter)
        return false;
    if (bson_iter_init_find(&it, filter, "$or") && BSON_ITER_HOLDS_ARRAY(&it) && nth-- == 0) {
        *ors = it;
        *in_and = SIZE_MAX;
        return true;
    }
    if (!bson_iter_init_find(&it, filter, "$and") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &el))
        return false;
    for (size_t i = 0; bson_iter_next(&el); i++) {
        if (BSON_ITER_HOLDS_DOCUMENT(&el) && bson_iter_recurse(&el, &sub) &&
            bson_iter_find(&sub, "$or") && BSON_ITER_HOLDS_ARRAY(&sub) && nth-- == 0) {
            *ors = sub;
            *in_and = i;
            return true;
        }
    }
    return false;
}

/* How many $ors find_or finds in `filter`. */
size_t mfi_plan_count_ors(const bson_t *filter)
{
    bson_iter_t it;
    size_t n = 0, in_and;
    while (find_or(filter, n, &it, &in_and))
        n++;
    return n;
}

/* `beside` without the elements every clause's bounds answer (`answered`). */
static bson_t *beside_left(const bson_t *beside, const bool *answered)
{
    bson_t *out = bson_new();
    bson_iter_t it;
    if (out && bson_iter_init(&it, beside))
        for (size_t t = 0; bson_iter_next(&it); t++)
            if (!answered[t])
                mf_bsonx_append_iter(out, NULL, 0, &it);
    return out;
}

/* How deep plan_or looks for a $or in a clause no index serves. */
#define MAX_OR_DEPTH 4

/* The index scans of an OR's tree (1 for an index scan). */
static size_t count_leaves(const mf_scan *s)
{
    if (s->kind != P_OR)
        return 1;
    size_t n = 0;
    for (size_t i = 0; i < s->nkids; i++)
        n += count_leaves(s->kids[i]);
    return n;
}

/* The `n`th (from 0, depth first) of them. */
mf_scan *mfi_plan_leaf_at(mf_scan *s, size_t n)
{
    for (size_t i = 0; s->kind == P_OR && i < s->nkids; i++) {
        size_t k = count_leaves(s->kids[i]);
        if (n < k)
            return mfi_plan_leaf_at(s->kids[i], n);
        n -= k;
    }
    return s;
}

/* Which of them is running: the one that returned the row last. */
size_t mfi_plan_current_leaf(const mf_scan *s)
{
    size_t n = 0;
    while (s->kind == P_OR && s->kid < s->nkids) {
        for (size_t i = 0; i < s->kid; i++)
            n += count_leaves(s->kids[i]);
        s = s->kids[s->kid];
    }
    return n;
}

/* Whether the `nth` $or find_or finds in `both` (a clause's elements,
 * `clause_len` bytes of BSON, then those beside the clause) is the
 * clause's own: mongod plans an OR in a clause for its own $ors only. */
static bool own_or(const bson_t *both, uint32_t clause_len, size_t nth)
{
    bson_iter_t ors;
    size_t in_and;
    uint32_t len;
    const uint8_t *data;
    if (!find_or(both, nth, &ors, &in_and))
        return false;
    bson_iter_array(&ors, &len, &data);
    return data && data < bson_get_data(both) + clause_len;
}

/* Whether `clause` is its $or (the one at `in_and`, as find_or says) and
 * nothing else: {$or: [...]}, {$and: [{$or: [...]}]}. */
static bool only_or(const bson_t *clause, size_t in_and)
{
    bson_t *rest = filter_without_or(clause, in_and);
    bool only = rest && bson_empty(rest);
    if (rest)
        bson_destroy(rest);
    return only;
}

/* An OR's clauses that are a nested $or alone, planned as an OR of their
 * own, taken up into it: {$or: [{$or: [a, b]}, c]} scans as {$or: [a, b,
 * c]}, as mongod's canonical form flattens it.  `*kids` (`*n` of them,
 * the clauses of the $or at `ors`) becomes `leaves` or fewer. */
static int flatten_ors(mf_scan ***kids, size_t *n, size_t leaves, const bson_iter_t *ors,
                       mf_error *err)
{
    mf_scan **v = calloc(leaves, sizeof *v), **old = *kids;
    bson_iter_t el;
    size_t m = 0;
    if (!v)
        return oom(err);
    bson_iter_recurse(ors, &el);
    for (size_t i = 0; i < *n && bson_iter_next(&el); i++) {
        uint32_t len;
        const uint8_t *data;
        bson_t clause;
        bson_iter_document(&el, &len, &data);
        if (old[i]->kind != P_OR || !bson_init_static(&clause, data, len) ||
            !only_or(&clause, old[i]->or_in_and)) {
            v[m++] = old[i];
            continue;
        }
        for (size_t k = 0; k < old[i]->nkids; k++)
            v[m++] = old[i]->kids[k];
        old[i]->nkids = 0; /* its clauses are the OR's now */
        mf_scan_free(old[i]);
    }
    free(old);
    *kids = v;
    *n = m;
    return 0;
}

/* A $or (the file's head): when every clause of the `nth` $or (find_or)
 * is served by an index, make `s` an OR of their scans.  `s` is left a
 * collection scan otherwise.  Each clause is planned with the conditions
 * beside the $or (or_clause): an index one of the clause's own
 * conditions bounds serves it, and the others narrow its bounds, as
 * mongod pushes them down ({a: 1, $or: [{b: 5}, {c: 7}]} on {a: 1, b: 1}
 * and {a: 1, c: 1}: a and b, then a and c).  The FETCH filter is what is
 * beside the $or less what every clause's bounds answer; each clause's
 * scan shows what its bounds leave of the clause.  The matcher still
 * judges every document against the whole filter. */
int mfi_plan_or(mf_scan *s, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                const bson_t *filter, const mf_collator *qcoll, size_t nth, int depth,
                mf_plan_cache *cache, mf_error *err)
{
    bson_iter_t it, el;
    size_t n = 0, in_and;
    int rc = 0;
    if (!find_or(filter, nth, &it, &in_and) || !bson_iter_recurse(&it, &el))
        return 0;
    while (bson_iter_next(&el))
        n++;
    if (n == 0 || n > MAX_OR_CLAUSES)
        return 0;
    bson_t *beside = filter_without_or(filter, in_and);
    size_t nbeside = beside ? bson_count_keys(beside) : 0;
    mf_scan **kids = calloc(n, sizeof *kids);
    /* which conditions beside the $or every clause's bounds answer */
    bool *answered = calloc(nbeside + 1, sizeof *answered);
    if (!beside || !kids || !answered) {
        rc = oom(err);
        goto out;
    }
    for (size_t t = 0; t < nbeside; t++)
        answered[t] = true;
    size_t made = 0, leaves = 0;
    bool all = true, nested = false;
    bson_iter_recurse(&it, &el);
    while (all && rc == 0 && bson_iter_next(&el)) {
        uint32_t len;
        const uint8_t *data;
        bson_t clause, both;
        bool sorted;
        if (!BSON_ITER_HOLDS_DOCUMENT(&el)) {
            all = false;
            break;
        }
        bson_iter_document(&el, &len, &data);
        if (!bson_init_static(&clause, data, len) || !(kids[made] = calloc(1, sizeof **kids))) {
            rc = oom(err);
            break;
        }
        /* the clause's top-level elements, then those beside it; a key
         * may come twice, each element a condition of its own */
        bson_init(&both);
        if (!bson_concat(&both, &clause) || !bson_concat(&both, beside)) {
            bson_destroy(&both);
            rc = oom(err);
            break;
        }
        or_clause cl = {.own = bson_count_keys(&clause), .answered = answered, .nbeside = nbeside};
        alternates alts = {0};
        /* A clause with the $text: the text scan (TEXT under OR), which
         * answers nothing beside; one with it in an $or of its own: that
         * $or's OR, or nothing (no other index may serve it, as the
         * matcher takes $text for true). */
        bson_iter_t text_op;
        bool text = false, text_deeper = false;
        rc = mfi_text_find(&clause, &text_op, &text, &text_deeper, err);
        if (rc == 0 && text && !text_deeper) {
            rc = mfi_plan_text(kids[made], idx, nidx, &clause, &text_op, NULL, NULL, err);
            for (size_t t = 0; t < nbeside; t++)
                answered[t] = false;
        } else if (rc == 0 && !text) {
            rc = mfi_plan_choose(kids[made], idx, nidx, SIZE_MAX, &both, NULL, qcoll, &sorted,
                                 NULL, &alts, &cl, err);
        }
        /* No index serves the clause, but one of its own $ors may be an
         * OR of its own (mongod plans a contained $or in a clause so). */
        for (size_t k = 0, nk = mfi_plan_count_ors(&both);
             rc == 0 && kids[made]->kind == P_COLLSCAN && depth < MAX_OR_DEPTH && k < nk; k++)
            if (own_or(&both, len, k) && (!text_deeper || mfi_plan_or_has_text(&both, k)))
                rc = mfi_plan_or(kids[made], c, idx, nidx, &both, qcoll, k, depth + 1, NULL, err);
        all = rc == 0 && kids[made]->kind != P_COLLSCAN;
        if (all && kids[made]->kind == P_OR) {
            nested = true;
            leaves += count_leaves(kids[made]);
            for (size_t t = 0; t < nbeside; t++) /* not worked out for a nested OR */
                answered[t] = false;
        } else {
            leaves++;
        }
        all = all && leaves <= MAX_OR_CLAUSES;
        /* Other indexes that serve the clause: its own trials choose among
         * them when the OR first reads it (mongod's subplanner plans each
         * clause so), and what their bounds answer of the conditions
         * beside is not known until then. */
        if (all && kids[made]->kind == P_IXSCAN && !kids[made]->idhack && alts.n > 0) {
            size_t none = 0;
            /* A rooted $or's clause is a query of its own to the plan
             * cache, as mongod's subplanner caches each branch's winner. */
            mf_plan_cache *cc = depth == 0 && nbeside == 0 && c ? cache : NULL;
            if (cc && !(kids[made]->filter = bson_copy(&both)))
                rc = oom(err);
            if (rc == 0)
                rc = mfi_plan_trials(kids[made], c, idx, nidx, &both, NULL, qcoll, &alts, NULL,
                                     &none, cc, NULL, err);
            for (size_t t = 0; t < nbeside; t++)
                answered[t] = false;
        }
        bson_destroy(&both);
        made++;
    }
    if (rc == 0 && all && !(s->residual = beside_left(beside, answered)))
        rc = oom(err);
    if (rc == 0 && all && nested && (rc = flatten_ors(&kids, &n, leaves, &it, err)) != 0)
        all = false;
    if (rc == 0 && all) {
        s->kind = P_OR;
        s->kids = kids;
        s->nkids = n;
        for (size_t i = 0; i < n; i++)
            s->text_or |= kids[i]->kind == P_TEXT || kids[i]->text_or;
        s->rooted = nbeside == 0 && depth == 0;
        s->or_in_and = in_and;
        if (nth == 0)
            strcpy(s->or_name, "$or");
        else
            snprintf(s->or_name, sizeof s->or_name, "$or%zu", nth);
        kids = NULL;
    }
    for (size_t i = 0; kids && i < made; i++)
        mf_scan_free(kids[i]);
out:
    free(kids);
    free(answered);
    if (beside)
        bson_destroy(beside);
    return rc;
}

bool mfi_plan_or_has_text(const bson_t *filter, size_t nth)
{
    bson_iter_t ors, el;
    size_t in_and;
    bson_t clause;
    if (!find_or(filter, nth, &ors, &in_and) || !bson_iter_recurse(&ors, &el))
        return false;
    while (bson_iter_next(&el))
        if (mf_bsonx_doc_view(&el, &clause) && mf_filter_has_text(&clause))
            return true;
    return false;
}

/* The text leaf of an OR (depth first), or NULL. */
static mf_scan *text_leaf(mf_scan *s)
{
    if (s->kind == P_TEXT)
        return s;
    for (size_t i = 0; s->kind == P_OR && i < s->nkids; i++) {
        mf_scan *t = text_leaf(s->kids[i]);
        if (t)
            return t;
    }
    return NULL;
}

int mfi_plan_text_or(mf_scan *s, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                     const bson_t *filter, const bson_t *sort, const bson_t *projection,
                     const mf_collator *qcoll, mf_error *err)
{
    int rc = 0;
    size_t nors = mfi_plan_count_ors(filter);
    for (size_t nth = 0; rc == 0 && nth < nors; nth++) {
        if (!mfi_plan_or_has_text(filter, nth))
            continue;
        if ((rc = mfi_plan_or(s, c, idx, nidx, filter, qcoll, nth, 0, NULL, err)) != 0)
            return rc;
        if (s->kind == P_OR) {
            mf_scan *t = text_leaf(s);
            s->rooted = false; /* no subplanning with TEXT, as mongod */
            if (t)
                mfi_plan_text_want_score(t, sort, projection);
            return 0;
        }
        break;
    }
    return mf_error_set(err, MF_NoQueryExecutionPlans,
                        "error processing query: planner returned error :: caused by :: "
                        "Failed to produce a solution for TEXT under OR - other non-TEXT clauses "
                        "under OR have to be indexed as well.");
}

/* --------------------------------------------------- the canonical $or */

/* The value `clause` tests its one path for equality with ({a: 5} or {a:
 * {$eq: 5}}), into `*path` and `*v`; false for anything else, and for a
 * document, array or regex value (their equality is not a plain $in
 * element's). */
static bool clause_equality(const bson_t *clause, const char **path, bson_iter_t *v)
{
    bson_iter_t it, op;
    if (!bson_iter_init(&it, clause) || !bson_iter_next(&it))
        return false;
    *path = bson_iter_key(&it);
    *v = it;
    if ((*path)[0] == '$' || bson_iter_next(v))
        return false;
    *v = it;
    if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        if (!bson_iter_recurse(&it, &op) || !bson_iter_next(&op) ||
            strcmp(bson_iter_key(&op), "$eq") != 0)
            return false;
        *v = op;
        if (bson_iter_next(&op))
            return false;
    }
    bson_type_t t = bson_iter_type(v);
    return t != BSON_TYPE_DOCUMENT && t != BSON_TYPE_ARRAY && t != BSON_TYPE_REGEX;
}

#define MAX_CANONICAL_CLAUSES 64

/* A clause of a $or: its bytes in the filter (a bson_t view cannot be
 * copied: it points into itself), and the path it tests for equality
 * with `eq` (clause_equality), NULL when it does not. */
typedef struct clause_ref {
    const uint8_t *data;
    uint32_t len;
    const char *eq_path;
    bson_iter_t eq;
} clause_ref;

/* The clauses of the $or at `ors` (an array of documents), a clause that
 * is a $or alone replaced by its own clauses, into `v` (`*n` of them, at
 * most MAX_CANONICAL_CLAUSES); `*nested` when one was.  False when a
 * clause is not a document, or there are too many. */
static bool or_clauses(const bson_iter_t *ors, clause_ref *v, size_t *n, bool *nested,
                       int depth)
{
    bson_iter_t el, one;
    uint32_t len;
    const uint8_t *data;
    if (!BSON_ITER_HOLDS_ARRAY(ors) || !bson_iter_recurse(ors, &el))
        return false;
    while (bson_iter_next(&el)) {
        bson_t clause;
        if (!BSON_ITER_HOLDS_DOCUMENT(&el))
            return false;
        bson_iter_document(&el, &len, &data);
        if (!bson_init_static(&clause, data, len))
            return false;
        if (depth < 8 && bson_count_keys(&clause) == 1 &&
            bson_iter_init_find(&one, &clause, "$or")) {
            *nested = true;
            if (!or_clauses(&one, v, n, nested, depth + 1))
                return false;
            continue;
        }
        if (*n == MAX_CANONICAL_CLAUSES)
            return false;
        clause_ref *r = &v[(*n)++];
        *r = (clause_ref){.data = data, .len = len};
        if (!clause_equality(&clause, &r->eq_path, &r->eq))
            r->eq_path = NULL;
    }
    return true;
}

/* Whether clause `v` tests `path` for equality. */
static bool equality_on(const clause_ref *v, const char *path)
{
    return v->eq_path && strcmp(v->eq_path, path) == 0;
}

/* Append `path`: {$in: [the values of v's equalities on it]} under `key`. */
static void put_in(bson_t *out, const char *key, const clause_ref *v, size_t n, const char *path)
{
    bson_t doc, in, arr;
    char k[24];
    size_t m = 0;
    bson_append_document_begin(out, key, -1, &doc);
    bson_append_document_begin(&doc, path, -1, &in);
    bson_append_array_begin(&in, "$in", 3, &arr);
    for (size_t i = 0; i < n; i++)
        if (equality_on(&v[i], path)) {
            snprintf(k, sizeof k, "%zu", m++);
            mf_bsonx_append_value(&arr, k, -1, bson_iter_value((bson_iter_t *)&v[i].eq));
        }
    bson_append_array_end(&in, &arr);
    bson_append_document_end(&doc, &in);
    bson_append_document_end(out, &doc);
}

/* What the $or at `ors` is in mongod's canonical form, appended to `out`
 * as one document under `key`: a $or in it alone is flattened into it; a
 * $or of one clause is that clause; the clauses that test one path for
 * equality, two or more of them, are that path's $in ({$or: [{a: 1}, {a:
 * 2}]}: {a: {$in: [1, 2]}}; {$or: [{a: 1}, {b: 5}, {a: 2}]}: {$or: [{a:
 * {$in: [1, 2]}}, {b: 5}]}), as mongod rewrites a $or of equalities (the
 * first path that has two; the $in first).  False (and `out` untouched)
 * when it is as given. */
static bool canonical_or(const bson_iter_t *ors, bson_t *out, const char *key)
{
    clause_ref v[MAX_CANONICAL_CLAUSES];
    bson_t clause, doc, arr;
    const char *path = NULL;
    size_t n = 0, grouped = 0;
    bool nested = false;
    char k[24];
    if (!or_clauses(ors, v, &n, &nested, 0) || n == 0)
        return false;
    if (n == 1) {
        bson_init_static(&clause, v[0].data, v[0].len);
        return bson_append_document(out, key, -1, &clause);
    }
    for (size_t i = 0; i < n && grouped < 2; i++) {
        if (!v[i].eq_path)
            continue;
        grouped = 0;
        for (size_t j = i; j < n; j++)
            grouped += equality_on(&v[j], v[i].eq_path);
        path = v[i].eq_path;
    }
    if (grouped < 2 && !nested)
        return false;
    if (grouped == n) {
        put_in(out, key, v, n, path);
        return true;
    }
    bson_append_document_begin(out, key, -1, &doc);
    bson_append_array_begin(&doc, "$or", 3, &arr);
    size_t m = 0;
    if (grouped >= 2) {
        snprintf(k, sizeof k, "%zu", m++);
        put_in(&arr, k, v, n, path);
    }
    for (size_t i = 0; i < n; i++) {
        if (grouped >= 2 && equality_on(&v[i], path))
            continue;
        bson_init_static(&clause, v[i].data, v[i].len);
        snprintf(k, sizeof k, "%zu", m++);
        bson_append_document(&arr, k, -1, &clause);
    }
    bson_append_array_end(&doc, &arr);
    bson_append_document_end(out, &doc);
    return true;
}

/* `filter` as the planner reads it: each $or at its top level or in its
 * top-level $and that canonical_or rewrites, as an element of a $and
 * (the filter's own $and, its rewritten elements in place).  NULL when
 * nothing is rewritten, or out of memory (planned as it is): the matcher
 * always reads the filter as given. */
bson_t *mfi_plan_canonical_ors(const bson_t *filter)
{
    bson_iter_t it, el, sub;
    bool any = false;
    /* most filters have no $or: look before building anything */
    if (bson_iter_init_find(&it, filter, "$or"))
        any = true;
    if (!any && bson_iter_init_find(&it, filter, "$and") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &el))
        while (!any && bson_iter_next(&el))
            any = BSON_ITER_HOLDS_DOCUMENT(&el) && bson_iter_recurse(&el, &sub) &&
                  bson_iter_find(&sub, "$or");
    if (!any)
        return NULL;
    bson_t *out = bson_new(), and = BSON_INITIALIZER, tmp;
    size_t nand = 0;
    bool changed = false;
    char k[16];
    bson_iter_init(&it, filter);
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (strcmp(key, "$or") == 0) {
            snprintf(k, sizeof k, "%zu", nand);
            bson_init(&tmp);
            bool done = canonical_or(&it, &tmp, k);
            bson_iter_t one, ck;
            /* what it became, when the filter has none of its paths, joins
             * the filter's elements ({$or: [{b: 1}], a: 2} is {a: 2, b: 1});
             * otherwise it is an element of the $and */
            bool merge = done && bson_iter_init(&one, &tmp) && bson_iter_next(&one) &&
                         BSON_ITER_HOLDS_DOCUMENT(&one) && bson_iter_recurse(&one, &ck);
            while (merge && bson_iter_next(&ck))
                merge = (strcmp(bson_iter_key(&ck), "$or") == 0 ||
                         !bson_iter_init_find(&sub, filter, bson_iter_key(&ck))) &&
                        strcmp(bson_iter_key(&ck), "$and") != 0;
            if (merge) {
                bson_iter_recurse(&one, &ck);
                while (bson_iter_next(&ck))
                    mf_bsonx_append_iter(out, NULL, 0, &ck);
            } else if (done) {
                bson_iter_init(&one, &tmp);
                bson_iter_next(&one);
                mf_bsonx_append_iter(&and, k, -1, &one);
                nand++;
            }
            bson_destroy(&tmp);
            if (done) {
                changed = true;
                continue;
            }
        } else if (strcmp(key, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it) &&
                   bson_iter_recurse(&it, &el)) {
            while (bson_iter_next(&el)) {
                snprintf(k, sizeof k, "%zu", nand);
                bson_init(&tmp);
                bool alone = false;
                if (BSON_ITER_HOLDS_DOCUMENT(&el) && bson_iter_recurse(&el, &sub) &&
                    bson_iter_next(&sub) && strcmp(bson_iter_key(&sub), "$or") == 0) {
                    bson_iter_t rest = sub;
                    alone = !bson_iter_next(&rest); /* {$or: [...]} and nothing else */
                }
                if (alone && canonical_or(&sub, &tmp, "x")) {
                    bson_iter_t one;
                    bson_iter_init(&one, &tmp);
                    bson_iter_next(&one);
                    mf_bsonx_append_iter(&and, k, -1, &one);
                    changed = true;
                } else {
                    mf_bsonx_append_iter(&and, k, -1, &el);
                }
                bson_destroy(&tmp);
                nand++;
            }
            continue;
        }
        mf_bsonx_append_iter(out, NULL, 0, &it);
    }
    if (changed && nand)
        bson_append_array(out, "$and", 4, &and);
    bson_destroy(&and);
    if (!changed) {
        bson_destroy(out);
        return NULL;
    }
    return out;
}
