/*
 * plan.c -- the access path of a query on one collection, and its scan.
 *
 * Two kinds of path:
 *   collection scan   the record tree in RecordId order (or reversed, for
 *                     {$natural: -1})
 *   index scan        one index, over a list of key ranges built from the
 *                     filter's bounds (bounds.c); each key leads to its
 *                     record, which the matcher then judges
 * The index only narrows what is read: every document is still given to the
 * matcher, so a bound that is wider than the predicate (a range that runs
 * to the end of a type bracket, a field left unbounded) costs reads, never
 * answers.
 *
 * Which index.  choose() ranks the usable indexes by what the filter says
 * of them (cand_better); where others answer the query the same way, the
 * candidates run trials on the data before the first row and the most
 * productive wins (decide(), mongod's multi-planner), remembered by query
 * shape in the caller's plan cache (mongod's CachedPlanStage).  Under a
 * sort, a caller that asks (mf_scan_extra.sort_trials) has plans that give
 * the sort tried against plans below a blocking SORT, whose rows count
 * only once their scan has ended, as mongod's SORT returns them.
 *
 * Key ranges.  An index key is the concatenation of its fields' encodings
 * (descending ones inverted), followed in a non-unique index by the 8-byte
 * RecordId.  Encodings are self-delimiting, so the keys that start with a
 * given prefix are contiguous, and every range is half-open over whole tree
 * keys, compared with memcmp:
 *
 *   fields 0..k-1 bound to points p0..pk-1, field k to [a, b]:
 *     P = enc(p0) .. enc(pk-1)
 *     lo = P + enc(a)           if a is included, else succ(P + enc(a))
 *     hi = succ(P + enc(b))     if b is included, else P + enc(b)
 *   succ(x): the least string above every string that starts with x
 *   (x with its last byte below 0xFF incremented and what follows cut).
 *
 * A descending field's interval [a, b] is [~enc(b), ~enc(a)] in key order.
 * The ranges are the cross product of the point fields' values with the
 * first non-point field's intervals, in key order, so a forward scan walks
 * them first to last and a backward scan last to first.  Fields after the
 * first range (and past MAX_RANGES combinations) are not in the ranges:
 * explain still shows their bounds, as mongod does; the matcher applies them.
 *
 * A unique index bound on every field to points is read by lookups, not by
 * a cursor (IDHACK for the _id index's single point).
 *
 * Collations.  An index with a collation holds sort keys in place of its
 * strings (index.c), so its bounds are built under its collation
 * (bounds.c), and a predicate whose operand is a string, symbol, document
 * or array bounds it only when the query runs under that same collation
 * (mongod's QueryPlannerIXSelect::_compatible); other predicates -- numbers,
 * dates, $exists, null -- bound any index.  The order of an index serves a
 * sort only under its own collation.  The rest follows: the _id fast path
 * needs the _id point, a count from keys alone needs exact bounds.
 *
 * A scan does not hold tree positions across calls that release the
 * collection lock: mf_scan_release() forgets them, and the next call seeks
 * again from the last key it read (for a non-unique index that key includes
 * the RecordId, so equal index keys resume at the right entry: the position
 * a cursor saves between getMores, DESIGN.md section 4).  Writes in between
 * are seen as they are at that moment.  A multikey index holds a document
 * under several keys: the scan remembers the RecordIds it has returned, for
 * its whole life, and returns each once.
 *
 * A $or that no index serves as a whole, but whose every clause one does,
 * is an OR of index scans: one scan per clause, planned on the clause and
 * the conditions beside the $or (an index the clause bounds, its bounds
 * narrowed by the others: mongod's contained $or), run one after the
 * other.  Each gives its candidates to the
 * matcher of the whole filter, and the OR remembers the RecordIds
 * returned, so a document two clauses find comes once.  The $or is the
 * filter's own (rooted: mongod's SUBPLAN over FETCH over OR), or beside
 * other conditions, at the top or in a top-level $and (contained: FETCH,
 * whose filter is those conditions less what every clause's bounds
 * answer, over OR).
 *
 * Files.  This one is the planner: the candidate indexes, their key
 * ranges, choose(), min/max and distinct, and mf_scan_new.  The rest
 * (plan_int.h shares the scan object among them):
 *   plan_or.c       OR plans, and the canonical form of a $or
 *   plan_cache.c    the plan cache and the query shapes that key it
 *   plan_trial.c    multi-planning: the trials, decide(), the winner
 *   plan_exec.c     the scans: mf_scan_next and what it reads through
 *   plan_explain.c  explain's stages of a plan
 */
#include "plan_int.h"
#include "index_type.h"
#include "text.h"

#include <stdlib.h>
#include <string.h>

#define ID_INDEX "_id_"
#define MAX_RANGES 4096 /* cross-product limit: past it, fewer fields bound the ranges */
#define INDEX_NOT_FOUND MF_IndexNotFound

void mf_record_id_encode(uint64_t rid, uint8_t out[8])
{
    put_be64(out, rid);
}

uint64_t mf_record_id_decode(const uint8_t *key)
{
    return get_be64(key);
}

mf_tree_id mf_coll_index_tree(const mf_coll *c, const char *name)
{
    for (size_t i = 0; i < mf_coll_index_count(c); i++)
        if (strcmp(mf_coll_index(c, i)->name, name) == 0)
            return mf_coll_index(c, i)->tree;
    return 0;
}

/* --------------------------------------------------------------- hints */

/* {$natural: 1 | -1}: sets `*backward`. */
static bool hint_is_natural(const bson_iter_t *hint, bool *backward)
{
    bson_iter_t k;
    if (!BSON_ITER_HOLDS_DOCUMENT(hint) || !bson_iter_recurse(hint, &k) || !bson_iter_next(&k) ||
        strcmp(bson_iter_key(&k), "$natural") != 0)
        return false;
    *backward = bson_iter_as_double(&k) < 0;
    return true;
}

static bool hint_is_empty(const bson_iter_t *hint)
{
    bson_iter_t k;
    return BSON_ITER_HOLDS_DOCUMENT(hint) && (!bson_iter_recurse(hint, &k) || !bson_iter_next(&k));
}

/* Whether key patterns `a` and `b` are the same (numbers by value). */
static bool same_pattern(const bson_t *a, const uint8_t *bdata, uint32_t blen)
{
    bson_t b;
    bson_iter_t x, y;
    if (!a || !bson_init_static(&b, bdata, blen) || !bson_iter_init(&x, a) ||
        !bson_iter_init(&y, &b))
        return false;
    for (;;) {
        bool nx = bson_iter_next(&x), ny = bson_iter_next(&y);
        if (!nx || !ny)
            return nx == ny;
        if (strcmp(bson_iter_key(&x), bson_iter_key(&y)) != 0 ||
            mf_bsonx_compare_values(&x, &y) != 0)
            return false;
    }
}

/* The usable index `hint` names (a name or a key pattern): its position
 * in `idx`, or an error. */
static int hint_find(const mf_index_desc *idx, size_t nidx, const bson_iter_t *hint, size_t *at,
                     mf_error *err)
{
    size_t found = SIZE_MAX;
    uint32_t len = 0;
    const uint8_t *data = NULL;
    if (BSON_ITER_HOLDS_DOCUMENT(hint))
        bson_iter_document(hint, &len, &data);
    for (size_t i = 0; i < nidx; i++) {
        const mf_index_desc *d = &idx[i];
        if (d->hidden || d->building)
            continue; /* not the planner's to use: a hint cannot name it */
        bool match = BSON_ITER_HOLDS_UTF8(hint) ? strcmp(bson_iter_utf8(hint, NULL), d->name) == 0
                     : data                     ? same_pattern(d->key, data, len)
                                                : false;
        if (!match)
            continue;
        if (found != SIZE_MAX) {
            char a[256], b[256];
            mf_bsonx_to_string(idx[found].key, a, sizeof a);
            mf_bsonx_to_string(d->key, b, sizeof b);
            return mf_error_set(err, INDEX_NOT_FOUND,
                                "Hint matched multiple indexes, must hint by index name. "
                                "Matched: kp: %s name: '%s' and kp: %s name: '%s'",
                                a, idx[found].name, b, d->name);
        }
        found = i;
    }
    if (found == SIZE_MAX)
        return mf_error_set(err, MF_BadValue,
                            "hint provided does not correspond to an existing index");
    *at = found;
    return 0;
}

/* ------------------------------------------------------------ candidates */

/* One index as the planner sees it for this query. */
typedef struct cand {
    const mf_index_desc *d;
    const mfi_preds *preds; /* the filter's preds under the index's collation */
    mfi_oil *oils; /* per field; [MinKey, MaxKey] where nothing bounds it */
    bool *present; /* per field: some predicate bounds it */
    bool *used;    /* per predicate: answered exactly by these bounds */
    bool *applied; /* per predicate: it narrowed some field's bounds */
    size_t neq;    /* leading fields bound to points */
    bool eq_unique, range;
    bool strong;   /* some predicate other than a negation bounds it */
    int sort_dir; /* the index gives the sort forward (1), backward (-1), or not (0) */
    size_t key_re; /* the pred whose regex filters the first field's keys, or SIZE_MAX */
} cand;

static void cand_free(cand *c)
{
    if (c->oils)
        for (size_t i = 0; i < c->d->nfields; i++)
            mfi_oil_free(&c->oils[i]);
    free(c->oils);
    free(c->present);
    free(c->used);
    free(c->applied);
    memset(c, 0, sizeof *c);
}

static bool multikey_field(const mf_index_desc *d, size_t i)
{
    /* Key generation marks fields past the 32nd in the last bit. */
    return d->multikey >> (i < 31 ? i : 31) & 1u;
}

/* Whether field i's keys are not its values: hashes, or the cells of a
 * "2dsphere" or "2d" field.  Such a field orders nothing. */
static bool keys_not_values(const mf_index_desc *d, size_t i)
{
    return i < 32 && ((d->hashed | d->geo) >> i & 1u);
}

/* Whether field i is a geo field ("2dsphere", "2d"). */
static bool geo_field(const mf_index_desc *d, size_t i)
{
    return i < 32 && (d->geo >> i & 1u);
}

/* Whether bounds on fields i and j may be compounded: not when a multikey
 * array could lie on a path they share (a.b and a.c with `a` an array of
 * documents make keys from one element at a time). */
static bool may_compound(const mf_index_desc *d, size_t i, size_t j)
{
    if (!multikey_field(d, i) && !multikey_field(d, j))
        return true;
    const char *a = d->paths[i], *b = d->paths[j];
    size_t la = strcspn(a, "."), lb = strcspn(b, ".");
    return la != lb || memcmp(a, b, la) != 0;
}

/* Whether field i is bound to exactly one value. */
static bool single_point(const cand *c, size_t i)
{
    return c->present[i] && c->oils[i].n == 1 && mfi_oil_is_points(&c->oils[i]);
}

/* Whether the index gives the order of `sort`, and in which direction:
 * its fields in order (or all reversed), skipping fields bound to one
 * value; never through a multikey field, nor when the index orders
 * strings by another collation than the query's `qcoll`. */
static int sort_direction(const cand *c, const bson_t *sort, const mf_collator *qcoll)
{
    const mf_index_desc *d = c->d;
    bson_iter_t k;
    size_t i = 0;
    int dir = 0;
    bool any = false;
    if (!sort || !bson_iter_init(&k, sort) || !mf_collator_equal(d->coll, qcoll))
        return 0;
    while (bson_iter_next(&k)) {
        if (!BSON_ITER_HOLDS_NUMBER(&k))
            return 0; /* {$meta: ...} */
        any = true;
        const char *path = bson_iter_key(&k);
        int sdir = bson_iter_as_double(&k) < 0 ? -1 : 1;
        while (i < d->nfields && strcmp(d->paths[i], path) != 0 && single_point(c, i))
            i++;
        if (i < d->nfields && strcmp(d->paths[i], path) == 0) {
            if (multikey_field(d, i) || keys_not_values(d, i))
                return 0; /* a hashed field's keys are in the hashes' order */
            int fdir = d->desc[i] ? -sdir : sdir;
            if (dir && dir != fdir)
                return 0;
            dir = fdir;
            i++;
            continue;
        }
        /* A sort key bound to one value is constant: it orders nothing.
         * Not on a multikey field: {a: [0, 1.5]} matches {a: 1.5} and
         * sorts by 0 (an array's sort key is its least or greatest
         * element). */
        bool constant = false;
        for (size_t j = 0; j < d->nfields; j++)
            if (strcmp(d->paths[j], path) == 0 && single_point(c, j) && !multikey_field(d, j) &&
                !keys_not_values(d, j)) /* one hash: several values */
                constant = true;
        if (!constant)
            return 0;
    }
    return any ? (dir ? dir : 1) : 0;
}

/* The bounds of index `d` for the predicates (none when `with_preds` is
 * false: a hinted partial index the filter does not imply), encoded under
 * the index's collation.  A predicate whose operand a collation orders
 * bounds only an index of the query's collation `qcoll`: mongod's rule
 * (QueryPlannerIXSelect::_compatible). */
static int cand_build(cand *c, const mf_index_desc *d, const mfi_preds *preds, bool with_preds,
                      const bson_t *sort, const mf_collator *qcoll, mf_error *err)
{
    bool same_coll = mf_collator_equal(d->coll, qcoll);
    memset(c, 0, sizeof *c);
    c->d = d;
    c->preds = preds;
    c->key_re = SIZE_MAX;
    c->oils = calloc(d->nfields ? d->nfields : 1, sizeof *c->oils);
    c->present = calloc(d->nfields ? d->nfields : 1, sizeof *c->present);
    c->used = calloc(preds->n ? preds->n : 1, sizeof *c->used);
    c->applied = calloc(preds->n ? preds->n : 1, sizeof *c->applied);
    if (!c->oils || !c->present || !c->used || !c->applied)
        goto fail;
    for (size_t i = 0; i < d->nfields; i++) {
        bool ok = with_preds;
        for (size_t j = 0; j < i && ok; j++)
            if (c->present[j] && !may_compound(d, i, j))
                ok = false;
        for (size_t p = 0; ok && p < preds->n; p++) {
            const mfi_pred *pr = &preds->v[p];
            if (strcmp(pr->path, d->paths[i]) != 0)
                continue;
            if (pr->geo ? !geo_field(d, i) : geo_field(d, i))
                continue; /* a geo field's keys are cells: geo conditions only */
            if (d->sparse && pr->matches_missing)
                continue; /* the index lacks the documents it could match */
            if (pr->collatable && !same_coll)
                continue; /* its keys order strings otherwise: the matcher's */
            if (pr->neg_null && multikey_field(d, i))
                continue; /* {a: []} matches {$ne: null}, and its key is undefined */
            if (pr->key_re && (i != 0 || c->key_re != SIZE_MAX))
                continue; /* one regex, tested on the first field's keys only */
            /* what the index's kind makes of the predicate (index_type.h) */
            mfi_oil oil;
            bool usable, exact;
            if (d->type->bounds(d, i, pr, &oil, &usable, &exact) != 0)
                goto fail;
            if (!usable)
                continue;
            c->strong |= !pr->negation;
            if (!c->present[i]) {
                c->oils[i] = oil;
                c->present[i] = true;
            } else if (multikey_field(d, i)) {
                mfi_oil_free(&oil);
                continue; /* one range per multikey field, as mongod */
            } else {
                int irc = mfi_oil_intersect(&c->oils[i], &oil);
                mfi_oil_free(&oil);
                if (irc != 0)
                    goto fail;
            }
            c->applied[p] = true;
            /* On a multikey field a key is an element's: a document with
             * one element in the bounds matches the condition, but for a
             * negation, which every element must meet. */
            c->used[p] = exact && (!pr->negation || !multikey_field(d, i));
            if (pr->key_re) {
                /* Every key in its bounds is a string the scan tests, or
                 * the regex value, which equals it: exact, but where one
                 * document has several keys. */
                c->key_re = p;
                c->used[p] = !multikey_field(d, i);
            }
        }
        if (!c->present[i] && mfi_oil_all(&c->oils[i]) != 0)
            goto fail;
    }
    while (c->neq < d->nfields && c->present[c->neq] && mfi_oil_is_points(&c->oils[c->neq]))
        c->neq++;
    c->range = c->neq < d->nfields && c->present[c->neq];
    c->eq_unique = d->unique && c->neq == d->nfields;
    for (size_t i = 0; c->eq_unique && i < d->nfields; i++)
        c->eq_unique = c->oils[i].n == 1;
    c->sort_dir = sort_direction(c, sort, qcoll);
    return 0;
fail:
    cand_free(c);
    return oom(err);
}

/* A wildcard index's virtual index (index_wildcard.c): its "$_path"
 * field takes its bounds from the value field's, which only the kind's
 * bounds gave; then what cand_build derived from the fields is redone. */
static int wild_cand_fix(cand *c, const bson_t *sort, const mf_collator *qcoll)
{
    const mf_index_desc *d = c->d;
    size_t k = mfi_wild_path_field(d);
    if (k == SIZE_MAX)
        return 0;
    bool has_value = k + 1 < d->nfields; /* else the regular prefix alone */
    bool value_present = has_value && c->present[k + 1];
    /* With a value field: only when a condition bounds it.  Unbounded,
     * its keys would be every path's (a document under several keys, and
     * no subpath read): the regular prefix alone serves that query. */
    if (has_value && !value_present) {
        c->present[0] = false; /* not usable */
        c->neq = 0;
        c->range = false;
        c->sort_dir = 0;
        return 0;
    }
    if (!has_value && !(k > 0 && c->present[0]))
        return 0;
    mfi_oil o;
    if (mfi_wild_path_bounds(d, has_value ? &c->oils[k + 1] : NULL, value_present, &o) != 0)
        return -1;
    mfi_oil_free(&c->oils[k]);
    c->oils[k] = o;
    c->present[k] = true;
    /* Several paths (its subpaths, or every path): a document comes under
     * several keys, so the scan must return each once.  The virtual index
     * is the expansion's own. */
    if (o.n > 1 && has_value)
        ((mf_index_desc *)d)->multikey |= 1u << (k + 1);
    if (!has_value)
        ((mf_index_desc *)d)->multikey |= 1u << k;
    c->neq = 0;
    while (c->neq < d->nfields && c->present[c->neq] && mfi_oil_is_points(&c->oils[c->neq]))
        c->neq++;
    c->range = c->neq < d->nfields && c->present[c->neq];
    c->eq_unique = false;
    c->sort_dir = sort_direction(c, sort, qcoll);
    return 0;
}

/* Whether a geo condition is on one of the index's geo fields: it
 * matches only documents with a geo value there, which the index holds
 * all of, whether or not its bounds were compounded with the others'. */
static bool geo_assigned(const mf_index_desc *d, const mfi_preds *preds)
{
    for (size_t p = 0; p < preds->n; p++)
        for (size_t i = 0; preds->v[p].geo && i < d->nfields; i++)
            if (geo_field(d, i) && strcmp(preds->v[p].path, d->paths[i]) == 0)
                return true;
    return false;
}

/* Whether `a` is a better choice than `b`. */
static bool cand_better(const cand *a, const cand *b)
{
    if (a->eq_unique != b->eq_unique)
        return a->eq_unique;
    if (a->eq_unique && a->d->is_id != b->d->is_id)
        return a->d->is_id;
    if (a->neq != b->neq)
        return a->neq > b->neq;
    if (a->range != b->range)
        return a->range;
    if ((a->sort_dir != 0) != (b->sort_dir != 0))
        return a->sort_dir != 0;
    /* more fields bounded: the keys out of their bounds are not fetched */
    size_t pa = 0, pb = 0;
    for (size_t i = 0; i < a->d->nfields; i++)
        pa += a->present[i];
    for (size_t i = 0; i < b->d->nfields; i++)
        pb += b->present[i];
    if (pa != pb)
        return pa > pb;
    if (a->d->nfields != b->d->nfields)
        return a->d->nfields < b->d->nfields;
    return strcmp(a->d->name, b->d->name) < 0;
}

/* ------------------------------------------------------------ key ranges */

static int push_range(mf_scan *s, krange *r)
{
    krange *v = realloc(s->ranges, (s->nranges + 1) * sizeof *v);
    if (!v)
        return -1;
    s->ranges = v;
    s->ranges[s->nranges++] = *r;
    return 0;
}

/* The ranges for fields i..nf-1 after `prefix` (fields 0..i-1 bound). */
static int enum_ranges(mf_scan *s, const cand *c, size_t nf, size_t i, mf_buf *prefix)
{
    const mfi_oil *o = &c->oils[i];
    bool desc = c->d->desc[i];
    size_t plen = prefix->len;
    for (size_t n = 0; n < o->n; n++) {
        const mfi_ival *iv = &o->v[desc ? o->n - 1 - n : n];
        /* In key order: a descending field's high value comes first. */
        const mf_buf *klo = desc ? &iv->hi : &iv->lo, *khi = desc ? &iv->lo : &iv->hi;
        bool lo_incl = desc ? iv->hi_incl : iv->lo_incl, hi_incl = desc ? iv->lo_incl : iv->hi_incl;
        if (i + 1 < nf) {
            if (put_end(prefix, klo, desc) != 0 || enum_ranges(s, c, nf, i + 1, prefix) != 0)
                return -1;
            prefix->len = plen;
            continue;
        }
        krange r = {.has_hi = true};
        if (mf_buf_append(&r.lo, prefix->data, plen) != 0 || put_end(&r.lo, klo, desc) != 0 ||
            mf_buf_append(&r.hi, prefix->data, plen) != 0 || put_end(&r.hi, khi, desc) != 0)
            goto fail;
        bool lo_ok = lo_incl || successor(&r.lo);
        r.lo_incl = lo_incl;
        r.hi_len0 = r.hi.len;
        if (hi_incl)
            r.has_hi = r.hi_incl = successor(&r.hi);
        if (!lo_ok) { /* nothing lies above it */
            mf_buf_free(&r.lo);
            mf_buf_free(&r.hi);
            continue;
        }
        if (push_range(s, &r) != 0)
            goto fail;
        continue;
    fail:
        mf_buf_free(&r.lo);
        mf_buf_free(&r.hi);
        return -1;
    }
    return 0;
}

/* The key ranges of candidate `c`; `*all_points`: every range is a whole
 * key of a unique index. */
static int build_ranges(mf_scan *s, const cand *c, bool *all_points, size_t *ranged)
{
    const mf_index_desc *d = c->d;
    size_t nf = 0, product = 1;
    *all_points = false;
    *ranged = 0;
    for (size_t i = 0; i < d->nfields && c->present[i]; i++) {
        size_t n = c->oils[i].n;
        if (n > 0 && product * n > MAX_RANGES)
            break;
        nf = i + 1;
        product *= n;
        if (n == 0 || !mfi_oil_is_points(&c->oils[i]))
            break;
    }
    *ranged = nf;
    if (nf == 0) {
        krange r = {.has_hi = false};
        return push_range(s, &r);
    }
    mf_buf prefix = {0};
    int rc = enum_ranges(s, c, nf, 0, &prefix);
    mf_buf_free(&prefix);
    if (rc == 0 && d->unique && nf == d->nfields) {
        *all_points = true;
        for (size_t i = 0; i < nf; i++)
            *all_points = *all_points && mfi_oil_is_points(&c->oils[i]);
    }
    return rc;
}

/* ---------------------------------------------------------------- scans */

static void scan_index_clear(scan_index *ix)
{
    free(ix->name);
    if (ix->key)
        bson_destroy(ix->key);
    for (size_t i = 0; i < ix->nfields; i++) {
        if (ix->paths)
            free(ix->paths[i]);
        if (ix->oils)
            mfi_oil_free(&ix->oils[i]);
    }
    free(ix->paths);
    free(ix->desc);
    free(ix->oils);
    mf_collator_unref(ix->coll);
    memset(ix, 0, sizeof *ix);
}

/* Keep what the scan needs of the chosen index (its bounds are moved). */
static int scan_index_take(scan_index *ix, cand *c)
{
    const mf_index_desc *d = c->d;
    ix->name = strdup(d->name);
    ix->tree = d->tree;
    ix->key = d->key ? bson_copy(d->key) : bson_new();
    ix->nfields = d->nfields;
    ix->paths = calloc(d->nfields ? d->nfields : 1, sizeof *ix->paths);
    ix->desc = calloc(d->nfields ? d->nfields : 1, sizeof *ix->desc);
    ix->unique = d->unique;
    ix->sparse = d->sparse;
    ix->partial = d->partial_spec != NULL;
    ix->is_id = d->is_id;
    ix->multikey = d->multikey;
    ix->hashed = d->hashed;
    ix->type = d->type;
    ix->geo = d->geo;
    ix->coll = mf_collator_ref(d->coll);
    if (!ix->name || !ix->key || !ix->paths || !ix->desc)
        return -1;
    for (size_t i = 0; i < d->nfields; i++) {
        if (!(ix->paths[i] = strdup(d->paths[i])))
            return -1;
        ix->desc[i] = d->desc[i];
    }
    ix->oils = c->oils;
    c->oils = NULL;
    return 0;
}

/* Whether top-level element `t` of the filter is answered exactly by the
 * bounds of `c`: every condition it holds is, and it holds one. */
static bool top_answered(const mfi_preds *preds, const cand *c, size_t t)
{
    bool covered = t < preds->ntop && preds->complete[t], any = false;
    for (size_t p = 0; covered && p < preds->n; p++) {
        if (preds->v[p].top != t)
            continue;
        any = true;
        covered = c->used[p];
    }
    return covered && any;
}

/* What the chosen bounds leave to the matcher: the top-level elements of
 * `filter` before the `ntop`th not answered exactly (for FETCH's explain
 * filter). */
static bson_t *residual(const bson_t *filter, const mfi_preds *preds, const cand *c, size_t ntop)
{
    bson_t *out = bson_new();
    bson_iter_t it;
    if (!out || !filter || !bson_iter_init(&it, filter))
        return out;
    for (size_t t = 0; t < ntop && bson_iter_next(&it); t++)
        if (!top_answered(preds, c, t))
            mf_bsonx_append_iter(out, NULL, 0, &it);
    return out;
}

/* Whether the filter is {_id: v} alone (mongod's IDHACK). */
static bool filter_is_id_only(const bson_t *filter)
{
    bson_iter_t it;
    return filter && bson_iter_init(&it, filter) && bson_iter_next(&it) &&
           strcmp(bson_iter_key(&it), "_id") == 0 && !bson_iter_next(&it);
}

/* The filter's preds under each collation the indexes use: the simple
 * one first, then one set per distinct collator (they are few).  Each set
 * is allocated alone: a candidate keeps a pointer to its own. */
typedef struct pred_sets {
    mfi_preds **v;
    size_t n;
} pred_sets;

static void pred_sets_free(pred_sets *ps)
{
    for (size_t i = 0; i < ps->n; i++) {
        mfi_preds_free(ps->v[i]);
        free(ps->v[i]);
    }
    free(ps->v);
    memset(ps, 0, sizeof *ps);
}

/* The preds of `filter` encoded under `coll` (built on first use). */
static int pred_set_for(pred_sets *ps, const bson_t *filter, const mf_collator *coll,
                        const mfi_preds **out, mf_error *err)
{
    for (size_t i = 0; i < ps->n; i++)
        if (mf_collator_equal(ps->v[i]->coll, coll)) {
            *out = ps->v[i];
            return 0;
        }
    mfi_preds **v = realloc(ps->v, (ps->n + 1) * sizeof *v);
    if (!v)
        return oom(err);
    ps->v = v;
    if (!(v[ps->n] = calloc(1, sizeof **v)))
        return oom(err);
    int rc = mfi_preds_collect_coll(filter, coll, v[ps->n], err);
    if (rc) {
        free(v[ps->n]);
        return rc;
    }
    *out = v[ps->n++];
    return 0;
}

/* Whether `filter`, read under `qcoll`, selects only documents that the
 * partial index `d` holds. */
static bool partial_implied(const mf_index_desc *d, const bson_t *filter, const mf_collator *qcoll)
{
    if (!d->partial_spec)
        return true;
    /* Its filter reads strings under the index's collation: another
     * collation's equal strings need not be equal there. */
    if (!mf_collator_equal(d->coll, qcoll) && mfi_has_strings(d->partial_spec))
        return false;
    return mfi_filter_implies_coll(filter, d->partial_spec, d->coll);
}

/* Whether a condition from the first `own` top-level elements narrowed
 * the bounds of `c`. */
static bool bounds_own(const cand *c, size_t own)
{
    for (size_t p = 0; p < c->preds->n; p++)
        if (c->applied[p] && c->preds->v[p].top < own)
            return true;
    return false;
}

/* Choose among `idx` (or take the hinted `hinted` < nidx) for the query
 * `filter` under the collation `qcoll`.  `*weak` (when not NULL): the
 * chosen index is bounded by negations only.  `cl` (when not NULL): the
 * filter is a $or's clause and the conditions beside it. */
int mfi_plan_choose(mf_scan *s, const mf_index_desc *idx, size_t nidx, size_t hinted,
                    const bson_t *filter, const bson_t *sort, const mf_collator *qcoll,
                    bool *sorted, bool *weak, alternates *alts, or_clause *cl, mf_error *err)
{
    pred_sets sets = {0};
    const mfi_preds *preds;
    cand best = {0}, c;
    bool have = false;
    /* the usable indexes some predicate bounds: where, and whether each
     * gives the sort */
    size_t usable_at[2 * MAX_TRIALS], sort_only_at[MAX_TRIALS];
    bool usable_sorts[2 * MAX_TRIALS];
    size_t nusable = 0, nsort_only = 0;
    if (alts)
        alts->n = 0;
    int rc = pred_set_for(&sets, filter, NULL, &preds, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < nidx; i++) {
        const mf_index_desc *d = &idx[i];
        bool is_hint = i == hinted;
        if (hinted != SIZE_MAX && !is_hint)
            continue;
        if (d->hidden || d->building || d->nfields == 0)
            continue;
        bool implied = partial_implied(d, filter, qcoll);
        if (!implied && !is_hint)
            continue;
        if ((rc = pred_set_for(&sets, filter, d->coll, &preds, err)) != 0 ||
            (rc = cand_build(&c, d, preds, implied, sort, qcoll, err)) != 0)
            goto out;
        if (wild_cand_fix(&c, sort, qcoll) != 0) {
            cand_free(&c);
            rc = oom(err);
            goto out;
        }
        bool usable = is_hint || c.present[0] || (c.sort_dir && !d->sparse);
        /* A geo index holds only the documents with a value of its geo
         * field: mongod uses it only where a geo condition is assigned to
         * that field (stripInvalidAssignmentsTo2dsphereIndices). */
        if (d->geo && !is_hint && !geo_assigned(d, preds))
            usable = false;
        if (cl && !bounds_own(&c, cl->own))
            usable = false;
        if (usable && c.present[0] && nusable < 2 * MAX_TRIALS) {
            usable_at[nusable] = i;
            usable_sorts[nusable++] = c.sort_dir != 0;
        } else if (usable && c.sort_dir && nsort_only < MAX_TRIALS) {
            sort_only_at[nsort_only++] = i;
        }
        if (usable && (!have || cand_better(&c, &best))) {
            cand_free(&best);
            best = c;
            have = true;
            if (alts)
                alts->best = i;
        } else {
            cand_free(&c);
        }
    }
    if (!have) {
        s->kind = P_COLLSCAN;
        goto out;
    }
    /* The others that answer the same way: bounded by some predicate (an
     * index only a sort makes usable reads every key), the sort given
     * alike (so the caller's plan above the scan is the same) unless the
     * caller can take either (`mixed`). */
    bool some_sorted = best.sort_dir != 0;
    for (size_t u = 0; alts && u < nusable && alts->n < MAX_TRIALS - 1; u++)
        if (usable_at[u] != alts->best &&
            (alts->mixed || usable_sorts[u] == (best.sort_dir != 0))) {
            alts->at[alts->n++] = usable_at[u];
            some_sorted |= usable_sorts[u];
        }
    /* Trials that may differ in the sort: when no bounded index gives it,
     * each index that gives it by reading every key is tried as well
     * (mongod's QueryPlanner adds those plans only then). */
    for (size_t u = 0; alts && alts->mixed && !some_sorted && u < nsort_only &&
                       alts->n < MAX_TRIALS - 1;
         u++)
        if (sort_only_at[u] != alts->best)
            alts->at[alts->n++] = sort_only_at[u];
    s->kind = P_IXSCAN;
    if (weak)
        *weak = !best.strong;
    s->backward = best.sort_dir < 0;
    *sorted = s->sorted = best.sort_dir != 0;
    bool all_points;
    size_t ranged;
    if (build_ranges(s, &best, &all_points, &ranged) != 0) {
        rc = oom(err);
        goto out;
    }
    /* A bounded field past those the ranges bound: each key's part is
     * tested against its bounds (key_passes).  Past the 32nd field the
     * scan does not look, and the bounds answer nothing. */
    for (size_t i = ranged; i < best.d->nfields; i++) {
        if (!best.present[i])
            continue;
        if (i < 32) {
            s->key_check |= (uint32_t)1 << i;
            continue;
        }
        for (size_t p = 0; p < best.preds->n; p++)
            if (strcmp(best.preds->v[p].path, best.d->paths[i]) == 0)
                best.used[p] = false;
    }
    for (size_t t = 0; cl && t < cl->nbeside; t++)
        cl->answered[t] = cl->answered[t] && top_answered(best.preds, &best, cl->own + t);
    if (!(s->residual = residual(filter, best.preds, &best, cl ? cl->own : SIZE_MAX)) ||
        scan_index_take(&s->ix, &best) != 0) {
        rc = oom(err);
        goto out;
    }
    s->points = all_points;
    s->ranged = ranged;
    s->idhack = all_points && s->ix.is_id && s->nranges == 1 && filter_is_id_only(filter);
    s->single = mfi_plan_single_interval(s, NULL, NULL, NULL, NULL);
    if (best.key_re != SIZE_MAX) {
        const mfi_pred *pr = &best.preds->v[best.key_re];
        if (!(s->key_re_pattern = strdup(pr->key_re)) ||
            !(s->key_re_flags = strdup(pr->key_re_flags))) {
            rc = oom(err);
            goto out;
        }
        rc = mf_regex_new(pr->key_re, pr->key_re_flags, &s->key_re, err);
    }
out:
    cand_free(&best);
    pred_sets_free(&sets);
    return rc;
}

/* ------------------------------------------------------------- min/max */

/* Whether find's `min` or `max` fits index `d` (mongod's
 * indexCompatibleMaxMin): the key pattern's fields, all of them and in
 * order, and no value a collation orders unless the query's is the
 * index's. */
static bool minmax_fits(const mf_index_desc *d, const bson_t *obj, const mf_collator *qcoll)
{
    bson_iter_t it;
    size_t i = 0;
    bool same_coll = mf_collator_equal(d->coll, qcoll);
    if (!bson_iter_init(&it, obj))
        return false;
    for (; bson_iter_next(&it); i++)
        if (i >= d->nfields || strcmp(bson_iter_key(&it), d->paths[i]) != 0 ||
            (!same_coll && mfi_collatable(&it)))
            return false;
    return i == d->nfields;
}

/* The key `obj` makes on `d` (its values under the index's collation),
 * or, for an empty `obj`, the index's first key (`last` false: MinKey in
 * each ascending field, MaxKey in each descending one) or its last. */
static int minmax_key(const mf_index_desc *d, const bson_t *obj, bool last, mf_buf *out)
{
    bson_iter_t it;
    if (obj && !bson_empty(obj)) {
        bson_iter_init(&it, obj);
        for (size_t i = 0; bson_iter_next(&it); i++)
            if (mf_bsonx_key_append_coll(out, &it, d->desc[i], d->coll) != 0)
                return -1;
        return 0;
    }
    bson_t ends = BSON_INITIALIZER;
    bson_append_minkey(&ends, "0", 1);
    bson_append_maxkey(&ends, "1", 1);
    for (size_t i = 0; i < d->nfields; i++) {
        /* Ascending, the first key holds MinKey; descending, MaxKey. */
        bson_iter_init(&it, &ends);
        bson_iter_next(&it);
        if (last != d->desc[i])
            bson_iter_next(&it);
        if (mf_bsonx_key_append(out, &it, d->desc[i]) != 0) {
            bson_destroy(&ends);
            return -1;
        }
    }
    bson_destroy(&ends);
    return 0;
}

/* find's `min`/`max` on the hinted index `d` (mongod's
 * QueryPlanner::plan for them): one range of whole keys in the index's
 * order, from min (included) to max (excluded), the whole filter left to
 * the matcher.  Errors 51174 (they do not fit the index), 51175 (min does
 * not come before max). */
static int plan_minmax(mf_scan *s, const mf_index_desc *d, const bson_t *filter,
                       const bson_t *min, const bson_t *max, const bson_t *sort,
                       const mf_collator *qcoll, bool *sorted, mf_error *err)
{
    krange r = {.has_hi = true};
    mfi_preds none = {0};
    cand c = {0};
    int rc = 0;
    if (d->nfields == 0 || (min && !bson_empty(min) && !minmax_fits(d, min, qcoll)) ||
        (max && !bson_empty(max) && !minmax_fits(d, max, qcoll)))
        return mf_error_set(err, 51174, "The index chosen is not compatible with min/max");
    if (minmax_key(d, min, false, &r.lo) != 0 || minmax_key(d, max, true, &r.hi) != 0) {
        rc = oom(err);
        goto out;
    }
    if (cmp_bytes(r.lo.data, r.lo.len, r.hi.data, r.hi.len) >= 0) {
        rc = mf_error_set(err, 51175,
                          "The value provided for min() does not come before the value "
                          "provided for max() in the hinted index");
        goto out;
    }
    if ((rc = cand_build(&c, d, &none, false, sort, qcoll, err)) != 0)
        goto out;
    if (push_range(s, &r) != 0 || !(s->residual = filter ? bson_copy(filter) : bson_new()) ||
        scan_index_take(&s->ix, &c) != 0) {
        rc = oom(err);
        goto out;
    }
    memset(&r, 0, sizeof r); /* the scan's now */
    s->kind = P_IXSCAN;
    s->key_range = true;
    s->single = true;
    s->backward = c.sort_dir < 0;
    *sorted = c.sort_dir != 0;
out:
    mf_buf_free(&r.lo);
    mf_buf_free(&r.hi);
    cand_free(&c);
    return rc;
}

/* --------------------------------------------------------- distinct */

/* distinct's `key` (mf_scan_extra): the simple distinct's index for an
 * empty filter, then the DISTINCT_SCAN when the scan allows it. */
static int plan_distinct(mf_scan *s, const mf_index_desc *idx, size_t nidx,
                         const bson_t *filter, bool hinted, const char *key,
                         const mf_collator *qcoll, mf_error *err)
{
    if (s->kind == P_COLLSCAN && !hinted && (!filter || bson_empty(filter))) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < nidx; i++) {
            const mf_index_desc *d = &idx[i];
            if (d->hidden || d->building || d->partial_spec || d->nfields == 0 ||
                strcmp(d->paths[0], key) != 0 || multikey_field(d, 0) || keys_not_values(d, 0) ||
                !mf_collator_equal(d->coll, qcoll))
                continue;
            if (best == SIZE_MAX || d->nfields < idx[best].nfields)
                best = i;
        }
        bool sorted;
        int rc;
        if (best != SIZE_MAX &&
            (rc = mfi_plan_choose(s, idx, nidx, best, filter, NULL, qcoll, &sorted, NULL, NULL,
                                  NULL, err)) != 0)
            return rc;
    }
    if (s->kind != P_IXSCAN || s->idhack || s->points || s->key_range || s->backward ||
        !s->residual || !bson_empty(s->residual) || !mf_collator_equal(s->ix.coll, qcoll))
        return 0;
    for (size_t i = 0; i < s->ix.nfields; i++)
        if (strcmp(s->ix.paths[i], "$_path") == 0)
            return 0; /* a wildcard index's keys are not the document's values */
    for (size_t i = 0; i < s->ix.nfields && i < 32; i++) {
        if ((s->ix.multikey | s->ix.hashed | s->ix.geo) >> i & 1u)
            return 0; /* a hashed field's keys are hashes, not its values */
        if (strcmp(s->ix.paths[i], key) == 0) {
            s->distinct_fields = i + 1;
            return 0;
        }
    }
    return 0;
}

int mf_minmax_check(const bson_t *min, const bson_t *max, mf_error *err)
{
    bson_iter_t a, b;
    if (!min || !max || bson_empty(min) || bson_empty(max))
        return 0;
    bson_iter_init(&a, min);
    bson_iter_init(&b, max);
    for (;;) {
        bool more_a = bson_iter_next(&a), more_b = bson_iter_next(&b);
        if (more_a != more_b || (more_a && strcmp(bson_iter_key(&a), bson_iter_key(&b)) != 0))
            return mf_error_set(err, 51176, "min and max must have the same field names");
        if (!more_a)
            return 0;
    }
}

/* The _id index of `c` from its catalog spec, into `id` (when `c` has
 * one: `*found`). */
static int id_index_desc(mf_coll *c, mf_index_desc *id, bool *found, mf_error *err)
{
    *found = false;
    for (size_t i = 0; i < mf_coll_index_count(c); i++) {
        const mf_index_info *info = mf_coll_index(c, i);
        if (strcmp(info->name, ID_INDEX) != 0)
            continue;
        *found = true;
        return mf_index_desc_init(id, ID_INDEX, info->tree, info->spec, info->spec_len, err);
    }
    return 0;
}

int mf_scan_new(mf_coll *c, const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                mf_scan **out, bool *sorted, mf_error *err)
{
    return mf_scan_new_ex(c, idx, nidx, filter, hint, sort, coll, NULL, out, sorted, err);
}

static int scan_new(mf_coll *c, const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                    const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                    const mf_scan_extra *x, mf_scan **out, bool *sorted, mf_error *err);

int mf_scan_new_ex(mf_coll *c, const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                   const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                   const mf_scan_extra *x, mf_scan **out, bool *sorted, mf_error *err)
{
    static const mf_scan_extra none = {0};
    if (!x)
        x = &none;
    int rc = scan_new(c, idx, nidx, filter, hint, sort, coll, x, out, sorted, err);
    if (rc == 0 && x->view) {
        (*out)->view = x->view;
        *sorted = false; /* the view's documents come last: the caller sorts */
    }
    if (rc == 0 && x->explain) {
        (*out)->explain = true;
        if (!(*out)->shape)
            mfi_plan_hash_shape(*out, c, idx, nidx, filter, sort, x->projection, coll);
    }
    return rc;
}

/* mf_scan_new_ex's planning, of the filter in its canonical form. */
static int scan_plan(mf_coll *c, const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                     const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                     const mf_scan_extra *x, mf_scan **out, bool *sorted, mf_error *err);

static int scan_new(mf_coll *c, const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                    const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                    const mf_scan_extra *x, mf_scan **out, bool *sorted, mf_error *err)
{
    bson_t *canon = NULL, *next;
    /* a rewrite may leave a $or to rewrite in its place: {$or: [{$or: [...]}]} */
    for (int pass = 0;
         filter && pass < 4 && (next = mfi_plan_canonical_ors(canon ? canon : filter)); pass++) {
        if (canon)
            bson_destroy(canon);
        canon = next;
    }
    int rc = scan_plan(c, idx, nidx, canon ? canon : filter, hint, sort, coll, x, out, sorted,
                       err);
    if (canon)
        bson_destroy(canon);
    return rc;
}

static int scan_plan(mf_coll *c, const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                     const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                     const mf_scan_extra *x, mf_scan **out, bool *sorted, mf_error *err)
{
    const bson_t *min = x->min, *max = x->max;
    mf_scan *s = calloc(1, sizeof *s);
    int rc = 0;
    bool natural_back = false, have_id = false;
    bool minmax = (min && !bson_empty(min)) || (max && !bson_empty(max));
    size_t hinted = SIZE_MAX, nwild = 0;
    mf_index_desc id = {0}, *wild = NULL;
    *sorted = false;
    if (!s)
        return oom(err);
    if (filter && !bson_empty(filter) && !(s->filter = bson_copy(filter))) {
        rc = oom(err);
        goto fail;
    }
    if (hint && hint_is_empty(hint))
        hint = NULL;
    /* $text: the text index's scan, whatever else the filter says */
    bson_iter_t text_op;
    bool has_text, under_or;
    if (filter && (rc = mfi_text_find(filter, &text_op, &has_text, &under_or, err)) != 0)
        goto fail;
    if (filter && has_text) {
        /* mongod's CanonicalQuery::isValid, before any planning */
        if (hint) {
            rc = mf_error_set(err, MF_BadValue, "text and hint not allowed in same query");
            goto fail;
        }
        rc = under_or ? mfi_plan_text_or(s, c, idx, nidx, filter, sort, x->projection, coll, err)
                      : mfi_plan_text(s, idx, nidx, filter, &text_op, sort, x->projection, err);
        if (rc)
            goto fail;
        if (x->text_score)
            mfi_plan_text_force_score(s);
        *out = s;
        return 0;
    }
    /* $near: a 2dsphere index's search by distance, whatever else */
    if (filter && mf_filter_has_near(filter)) {
        const char *hint_name = NULL;
        size_t nnear = nidx;
        if (hint && hint_is_natural(hint, &natural_back)) {
            nnear = 0; /* a collection scan cannot search by distance */
        } else if (hint) {
            if ((rc = hint_find(idx, nidx, hint, &hinted, err)) != 0)
                goto fail;
            hint_name = idx[hinted].name;
        }
        if ((rc = mfi_plan_near(s, idx, nnear, filter, hint_name, err)) != 0)
            goto fail;
        *out = s;
        return 0;
    }
    if (hint && hint_is_natural(hint, &natural_back)) {
        if (minmax) {
            rc = mf_error_set(err, MF_NoQueryExecutionPlans,
                              "min and max are incompatible with $natural");
            goto fail;
        }
        s->kind = P_COLLSCAN;
        s->backward = natural_back;
        *out = s;
        return 0;
    }
    /* Without descriptors: the _id index from the catalog, as before
     * secondary indexes. */
    if (nidx == 0 && c) {
        if ((rc = id_index_desc(c, &id, &have_id, err)) != 0)
            goto fail;
        if (have_id) {
            idx = &id;
            nidx = 1;
        }
    }
    /* Wildcard indexes: one virtual index per queried path they serve. */
    if ((rc = mfi_wild_expand(idx, nidx, filter, &hint, &wild, &nwild, err)) != 0)
        goto fail;
    if (wild) {
        idx = wild;
        nidx = nwild;
    }
    if (hint && (rc = hint_find(idx, nidx, hint, &hinted, err)) != 0)
        goto fail;
    if (minmax) {
        rc = hinted == SIZE_MAX
                 ? mf_error_set(err, 51173,
                                "When using min()/max() a hint of which index to use must be "
                                "provided")
                 : plan_minmax(s, &idx[hinted], filter, min, max, sort, coll, sorted, err);
        if (rc)
            goto fail;
        mfi_wild_expand_free(wild, nwild);
        mf_index_desc_clear(&id);
        *out = s;
        return 0;
    }
    bool weak = false;
    alternates alts = {.mixed = x->sort_trials && sort && !bson_empty(sort)};
    rc = mfi_plan_choose(s, idx, nidx, hinted, filter, sort, coll, sorted, &weak, &alts, NULL, err);
    size_t nors = mfi_plan_count_ors(filter), taken = SIZE_MAX; /* the $or `s` serves */
    /* No index serves the rest: the first $or that indexes serve. */
    for (size_t nth = 0; rc == 0 && s->kind == P_COLLSCAN && hinted == SIZE_MAX && nth < nors;
         nth++)
        if ((rc = mfi_plan_or(s, c, idx, nidx, filter, coll, nth, 0, x->cache, err)) == 0 &&
            s->kind == P_OR)
            taken = nth;
    /* An index only negations bound reads nearly every key: an OR plan,
     * if the filter has one, reads fewer (mongod's trial runs pick it). */
    if (rc == 0 && s->kind == P_IXSCAN && weak && !*sorted && hinted == SIZE_MAX && nors) {
        mf_scan *o = calloc(1, sizeof *o);
        for (size_t nth = 0; o && rc == 0 && o->kind != P_OR && nth < nors; nth++)
            if ((rc = mfi_plan_or(o, c, idx, nidx, filter, coll, nth, 0, x->cache, err)) == 0 &&
                o->kind == P_OR)
                taken = nth;
        if (!o || rc != 0 || o->kind != P_OR) {
            mf_scan_free(o);
            rc = o ? rc : oom(err);
        } else {
            o->filter = s->filter;
            s->filter = NULL;
            mf_scan_free(s);
            s = o;
        }
    }
    /* An OR plan over each of the filter's $ors that indexes serve,
     * beside the index's or the OR's that `s` is (mongod's planner
     * enumerates them all for {a: 1, $or: [...]} and for a $and of $ors),
     * is tried too; it gives no sort. */
    mf_scan *or_plans[MAX_TRIALS];
    size_t nor = 0;
    bool sort_asked = sort && !bson_empty(sort);
    bool tried = (s->kind == P_IXSCAN && !s->idhack) || s->kind == P_OR;
    if (rc == 0 && tried && hinted == SIZE_MAX && !x->distinct_key &&
        (!sort_asked || !*sorted || alts.mixed)) {
        for (size_t nth = 0; rc == 0 && nth < nors && alts.n + nor + 2 <= MAX_TRIALS; nth++) {
            if (nth == taken)
                continue;
            mf_scan *o = calloc(1, sizeof *o);
            if (!o) {
                rc = oom(err);
            } else if ((rc = mfi_plan_or(o, c, idx, nidx, filter, coll, nth, 0, x->cache,
                                         err)) != 0 ||
                       o->kind != P_OR) {
                mf_scan_free(o);
            } else {
                or_plans[nor++] = o;
                if (filter && !bson_empty(filter) && !(o->filter = bson_copy(filter)))
                    rc = oom(err);
            }
        }
    }
    if (rc == 0 && x->distinct_key)
        rc = plan_distinct(s, idx, nidx, filter, hint != NULL, x->distinct_key, coll, err);
    else if (rc == 0 && tried && hinted == SIZE_MAX && (alts.n > 0 || nor > 0))
        rc = mfi_plan_trials(s, c, idx, nidx, filter, sort, coll, &alts, or_plans, &nor, x->cache,
                             x->projection, err);
    for (size_t i = 0; i < nor; i++) /* not taken */
        mf_scan_free(or_plans[i]);
    if (rc == 0 && s->ntrials) {
        s->chosen = x->chosen;
        s->chosen_arg = x->chosen_arg;
    }
    for (size_t k = 0; rc == 0 && k < (s->ntrials ? s->ntrials : 1); k++)
        mfi_plan_clauses_report(trial(s, k), x->chosen, x->chosen_arg);
    if (rc)
        goto fail;
    s->sorted = *sorted;
    mfi_wild_expand_free(wild, nwild);
    mf_index_desc_clear(&id);
    *out = s;
    return 0;
fail:
    mfi_wild_expand_free(wild, nwild);
    mf_index_desc_clear(&id);
    mf_scan_free(s);
    return rc;
}

void mf_scan_free(mf_scan *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nranges; i++) {
        mf_buf_free(&s->ranges[i].lo);
        mf_buf_free(&s->ranges[i].hi);
    }
    free(s->ranges);
    mf_regex_free(s->key_re);
    free(s->key_re_pattern);
    free(s->key_re_flags);
    mf_buf_free(&s->key_str);
    mf_buf_free(&s->seek_to);
    scan_index_clear(&s->ix);
    if (s->filter)
        bson_destroy(s->filter);
    if (s->sort)
        bson_destroy(s->sort);
    if (s->projection)
        bson_destroy(s->projection);
    if (s->residual)
        bson_destroy(s->residual);
    free(s->seen);
    mfi_view_rows_free(s);
    mf_buf_free(&s->last);
    for (size_t i = 0; i < s->nkids; i++)
        mf_scan_free(s->kids[i]);
    free(s->kids);
    mfi_plan_text_free(s->text);
    mfi_plan_near_free(s->near);
    mf_matcher_free(s->nt_view);
    mfi_plan_free_plans(s->trials, s->ntrials);
    mfi_plan_free_plans(s->rejected, s->nrejected);
    if (s->all_plans)
        bson_destroy(s->all_plans);
    free(s->replay);
    mf_buf_free(&s->replay_keys);
    free(s);
}

size_t mf_scan_nkids(const mf_scan *s)
{
    return s->nkids;
}

const mf_scan *mf_scan_kid(const mf_scan *s, size_t i)
{
    return s->kids[i];
}

const char *mf_scan_index_name(const mf_scan *s)
{
    return s->kind == P_IXSCAN ? s->ix.name : NULL;
}

const mf_scan_stats *mf_scan_get_stats(const mf_scan *s)
{
    return &s->stats;
}

void mf_scan_want_pos(mf_scan *s, bool want)
{
    s->want_pos = want;
    for (size_t i = 0; i < s->nkids; i++)
        mf_scan_want_pos(s->kids[i], want);
}

void mf_scan_tail(mf_scan *s)
{
    s->tail = s->kind == P_COLLSCAN && !s->backward;
}

bool mf_scan_tail_on(mf_scan *s)
{
    if (!s->tail || !mf_scan_eof(s) || s->last.len != 8)
        return false;
    s->eof = false;
    s->positioned = false;
    return true;
}

bool mf_scan_eof(const mf_scan *s)
{
    /* (a read view's own documents come after the trees' rows) */
    return s->eof && s->replayed == s->nreplay &&
           (!s->view || (s->vs.tree_done && s->vs.next >= s->vs.nrows));
}

/* Whether field `i`'s bounds are every value: [MinKey, MaxKey]. */
static bool all_values(const mf_scan *s, size_t i)
{
    const mfi_oil *o = &s->ix.oils[i];
    return o->n == 1 && o->v[0].lo_incl && o->v[0].hi_incl &&
           o->v[0].lo_v.value_type == BSON_TYPE_MINKEY &&
           o->v[0].hi_v.value_type == BSON_TYPE_MAXKEY;
}

static bool is_point(const mfi_ival *iv)
{
    return iv->lo_incl && iv->hi_incl && iv->lo.len == iv->hi.len &&
           memcmp(iv->lo.data, iv->hi.data, iv->lo.len) == 0;
}

/* The scan's bounds as one interval of keys, as mongod's
 * IndexBoundsBuilder::isSingleInterval sees them: fields with one point,
 * then at most one field with one interval, then fields of every value.
 * Each field's interval is taken in its index direction (a descending
 * field's runs from its high end).  With `start`/`end` (empty documents),
 * the keys are appended to them, named by the key pattern's fields: a
 * trailing field of every value extends the start key with MinKey or
 * MaxKey so that it includes or excludes what the range field leaves. */
bool mfi_plan_single_interval(const mf_scan *s, bson_t *start, bool *start_incl, bson_t *end,
                              bool *end_incl)
{
    size_t i = 0, nf = s->ix.nfields;
    bool si = true, ei = true;
    for (; i < nf; i++) {
        const mfi_oil *o = &s->ix.oils[i];
        if (o->n != 1 || !is_point(&o->v[0]))
            break;
        if (start) {
            mf_bsonx_append_value(start, s->ix.paths[i], -1, &o->v[0].lo_v);
            mf_bsonx_append_value(end, s->ix.paths[i], -1, &o->v[0].hi_v);
        }
    }
    if (i < nf) {
        const mfi_oil *o = &s->ix.oils[i];
        if (o->n != 1)
            return false;
        const mfi_ival *iv = &o->v[0];
        bool desc = s->ix.desc[i];
        si = desc ? iv->hi_incl : iv->lo_incl;
        ei = desc ? iv->lo_incl : iv->hi_incl;
        if (start) {
            mf_bsonx_append_value(start, s->ix.paths[i], -1, desc ? &iv->hi_v : &iv->lo_v);
            mf_bsonx_append_value(end, s->ix.paths[i], -1, desc ? &iv->lo_v : &iv->hi_v);
        }
        for (i++; i < nf; i++) {
            if (!all_values(s, i))
                return false;
            if (!start)
                continue;
            /* Ascending: the field runs MinKey..MaxKey; descending, back. */
            bool low_first = !s->ix.desc[i];
            if (si == low_first)
                bson_append_minkey(start, s->ix.paths[i], -1);
            else
                bson_append_maxkey(start, s->ix.paths[i], -1);
            if (ei == low_first)
                bson_append_maxkey(end, s->ix.paths[i], -1);
            else
                bson_append_minkey(end, s->ix.paths[i], -1);
        }
    }
    if (start_incl)
        *start_incl = si;
    if (end_incl)
        *end_incl = ei;
    return true;
}

void mf_scan_count_only(mf_scan *s, bool on)
{
    if (s->kind == P_OR || s->view)
        return; /* each clause's keys would answer only their clause; a
                   view's documents are not in the index */
    s->count_only = on;
    /* mongod's COUNT_SCAN counts keys: never over a multikey index, where
     * a document may have several (here, keys answer through the
     * RecordId set, under an IXSCAN) */
    s->count_scan = on && s->kind == P_IXSCAN && !s->idhack && !s->key_re && !s->ix.multikey &&
                    keys_answer(s) && mfi_plan_single_interval(s, NULL, NULL, NULL, NULL);
}

void mf_scan_timed(mf_scan *s, bool on)
{
    s->timed = on;
    for (size_t i = 0; i < s->nkids; i++)
        mf_scan_timed(s->kids[i], on);
}

void mf_scan_deadline(mf_scan *s, mf_deadline *d)
{
    s->deadline = d;
    for (size_t k = 1; k < s->ntrials; k++) /* trials[0] is `s` */
        mf_scan_deadline(s->trials[k], d);
    for (size_t i = 0; i < s->nkids; i++)
        mf_scan_deadline(s->kids[i], d);
}

bool mf_scan_is_text(const mf_scan *s)
{
    return s && (s->kind == P_TEXT || s->text_or);
}

bool mf_scan_is_near(const mf_scan *s)
{
    return s && s->kind == P_NEAR;
}
