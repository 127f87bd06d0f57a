/*
 * plan_exec.c -- the scans a plan makes (plan.c): the records in RecordId
 * order, an index over its key ranges, a unique index's whole keys looked
 * up, and an OR's scans one after the other; each candidate fetched and
 * given to the matcher.  An index scan reads its entries ahead into a
 * queue and hints their records to the memory system (struct mf_scan, in
 * plan_int.h, says how); this is the hottest loop of a query.  Also the
 * position a scan keeps across a release of the collection lock, and the
 * replay of a trial's rows (plan_trial.c).
 */
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The index key of the row an index scan returned last, or false. */
bool mfi_plan_last_key(const mf_scan *s, const uint8_t **k, size_t *kl)
{
    for (;;) {
        if (s->row_key) { /* replayed from its trial (an OR's, or its clause's) */
            *k = s->row_key;
            *kl = s->row_klen;
            return true;
        }
        if (s->kind != P_OR)
            break;
        s = s->kids[s->kid]; /* the clause that returned the row */
    }
    if (s->kind != P_IXSCAN)
        return false;
    if (s->points) {
        size_t n = s->next_point - 1;
        const mf_buf *p = &s->ranges[s->backward ? s->nranges - 1 - n : n].lo;
        *k = p->data;
        *kl = p->len;
    } else if (s->q_has_last) {
        *k = s->q_key[s->q_last];
        *kl = s->q_klen[s->q_last];
    } else {
        return false;
    }
    return true;
}

int mf_scan_return_key(const mf_scan *s, const mf_scan_row *row, bson_t *out, mf_error *err)
{
    bson_init(out);
    const uint8_t *k;
    size_t kl;
    if (!mfi_plan_last_key(s, &k, &kl))
        return 0;
    /* the clause that returned the row (a replayed row: its trial's) */
    while (s->kind == P_OR)
        s = s->row_key ? mfi_plan_leaf_at((mf_scan *)s, s->row_kid) : s->kids[s->kid];
    mf_index_desc d = {.nfields = s->ix.nfields, .paths = s->ix.paths, .desc = s->ix.desc,
                       .coll = s->ix.coll, .hashed = s->ix.hashed,
                       .geo = s->ix.geo, .type = s->ix.type};
    return mf_index_key_values(&d, &row->doc, k, kl, out, err);
}

/* `last` := the key `k`, the one a repositioned scan resumes after. */
static int remember(mf_scan *s, const uint8_t *k, size_t kl, mf_error *err)
{
    s->last.len = 0;
    if (mf_buf_append(&s->last, k, kl) != 0)
        return oom(err);
    return 0;
}

void mf_scan_release(mf_scan *s)
{
    if (s->kind == P_OR) {
        s->stats.saves++;
        for (size_t i = 0; i < s->nkids; i++)
            mf_scan_release(s->kids[i]);
        return;
    }
    if (!s->positioned)
        return;
    s->stats.saves++;
    s->positioned = false;
    if (s->skip_pending) { /* resume at the skip's target, in `last` */
        s->skip_pending = false;
        s->seek_exact = true;
        s->q_has_last = false;
    }
    /* The queue's keys are in pages the caller may change once it lets go:
     * the one the scan resumes after is copied now. */
    if (s->q_has_last) {
        mf_error ignored; /* reported by the next call, as lost_last */
        s->q_has_last = false;
        s->lost_last = remember(s, s->q_key[s->q_last], s->q_klen[s->q_last], &ignored) != 0;
    }
}

/* --------------------------------------------------------------- scanning */

/* A set of RecordIds (+1; 0 marks a free slot), open addressing: whether
 * `rid` is in it (`*had`), and, with `add`, put it in if not. */
static int rid_set(uint64_t **tab, size_t *n, size_t *cap, uint64_t rid, bool add, bool *had,
                   mf_error *err)
{
    uint64_t v = rid + 1;
    *had = false;
    if (add && (*n + 1) * 2 > *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        uint64_t *t = calloc(ncap, sizeof *t);
        if (!t)
            return oom(err);
        for (size_t i = 0; i < *cap; i++) {
            if (!(*tab)[i])
                continue;
            size_t h = (size_t)((*tab)[i] * 0x9E3779B97F4A7C15ull) & (ncap - 1);
            while (t[h])
                h = (h + 1) & (ncap - 1);
            t[h] = (*tab)[i];
        }
        free(*tab);
        *tab = t;
        *cap = ncap;
    }
    if (!*cap)
        return 0;
    size_t h = (size_t)(v * 0x9E3779B97F4A7C15ull) & (*cap - 1);
    while ((*tab)[h]) {
        if ((*tab)[h] == v) {
            *had = true;
            return 0;
        }
        h = (h + 1) & (*cap - 1);
    }
    if (add) {
        (*tab)[h] = v;
        (*n)++;
    }
    return 0;
}

/* Whether `rid` was returned before (and remember it if not). */
static int seen_before(mf_scan *s, uint64_t rid, bool *dup, mf_error *err)
{
    return rid_set(&s->seen, &s->nseen, &s->seen_cap, rid, true, dup, err);
}

/* The record `rid` into `row`; `*found` false if it is gone. */
/* maxTimeMS inside a scan: a scan that matches nothing for a long stretch
 * returns no row, so its caller cannot check the time between rows.  Each
 * work counts into the operation's deadline, which reads the clock every
 * 128 (mf_deadline_ok), as mongod's executor checks for interrupts as it
 * works. */
static MF_ALWAYS_INLINE int check_time(mf_scan *s, mf_error *err)
{
    return s->deadline ? mf_deadline_check(s->deadline, err) : 0;
}

static MF_ALWAYS_INLINE int fetch(mf_btree *records, const uint8_t *rid,
                                  const mf_btree_hint *hint, mf_scan_row *row, bool *found,
                                  mf_error *err)
{
    const uint8_t *v;
    size_t vl;
    if (!records)
        return mf_error_set(err, MF_InternalError, "the collection's records are gone");
    int rc = mf_btree_get_hinted(records, hint, rid, 8, found, &v, &vl, err);
    if (rc || !*found)
        return rc;
    row->rid = get_be64(rid);
    if (!bson_init_static(&row->doc, v, vl))
        return mf_error_set(err, MF_DataCorruption, "record %llu is not a document",
                            (unsigned long long)row->rid);
    row->data = v;
    return 0;
}

/* Offer the row to the matcher; `*take` when it passes.  Errors: an
 * $expr's evaluation error (the query fails with it). */
static int judge(mf_scan *s, const mf_matcher *m, mf_scan_row *row, bool *take, mf_error *err)
{
    s->stats.docs_examined++;
    row->pos = -1;
    if (!m) {
        *take = true;
        return 0;
    }
    return mf_matcher_eval(m, &row->doc, s->want_pos ? &row->pos : NULL, take, err);
}

/* An index entry pointing at record `rid` (8 bytes): fetch and judge it,
 * once per document on a multikey index.  Inlined: an index scan calls it
 * once per entry. */
static MF_ALWAYS_INLINE int consider(mf_scan *s, mf_btree *records, const mf_matcher *m,
                                     const uint8_t *rid, size_t rl, const mf_btree_hint *hint,
                                     mf_scan_row *row, bool *take, mf_error *err)
{
    bool found, dup = false;
    int rc;
    *take = false;
    if (rl != 8)
        return 0;
    if (s->ix.multikey) {
        s->stats.dups_tested++;
        if ((rc = seen_before(s, get_be64(rid), &dup, err)) != 0)
            return rc;
        if (dup) {
            s->stats.dups_dropped++;
            return 0;
        }
    }
    /* Counting, with bounds that answer the whole filter: the key is the
     * answer, and the record need not be read (mongod's COUNT_SCAN). */
    if (keys_answer(s)) {
        row->rid = get_be64(rid);
        row->pos = -1;
        bson_init(&row->doc);
        row->data = bson_get_data(&row->doc);
        s->stats.keys_only++;
        *take = true;
        return 0;
    }
    /* fetch() moves no cursor: the index cursor stays put. */
    if ((rc = fetch(records, rid, hint, row, &found, err)) != 0 || !found)
        return rc;
    if (!s->long_values)
        s->long_values = mf_btree_value_past_cells(row->data, row->doc.len);
    return judge(s, m, row, take, err);
}

/* Field `i`'s part of a key (`n` bytes at `p`) as an ascending encoding,
 * as its intervals are: a descending field's turned back into
 * s->key_str.  NULL when out of memory. */
static const uint8_t *ascending_part(mf_scan *s, size_t i, const uint8_t *p, size_t n)
{
    if (!s->ix.desc[i])
        return p;
    s->key_str.len = 0;
    if (mf_buf_reserve(&s->key_str, n) != 0)
        return NULL;
    for (size_t j = 0; j < n; j++)
        s->key_str.data[j] = (uint8_t)~p[j];
    return s->key_str.data;
}

/* The first of `o`'s intervals not wholly below the ascending part `p`. */
static size_t first_not_below(const mfi_oil *o, const uint8_t *p, size_t n)
{
    size_t lo = 0, hi = o->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_bytes(p, n, o->v[mid].hi.data, o->v[mid].hi.len);
        if (c > 0 || (c == 0 && !o->v[mid].hi_incl))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Whether a field's part of a key (`n` bytes at `p`, inverted for a
 * descending field) lies in one of its intervals. */
static bool in_bounds(mf_scan *s, size_t i, const uint8_t *p, size_t n)
{
    const mfi_oil *o = &s->ix.oils[i];
    if (!(p = ascending_part(s, i, p, n)))
        return true; /* no memory: the record decides */
    /* the first interval not wholly below it, then its start */
    size_t lo = first_not_below(o, p, n);
    if (lo == o->n)
        return false;
    int c = cmp_bytes(p, n, o->v[lo].lo.data, o->v[lo].lo.len);
    return c > 0 || (c == 0 && o->v[lo].lo_incl);
}

/* The scan's key `k` failed the bounds of field `i`, whose part (`n`
 * bytes) starts `plen` bytes in.  Into s->seek_to, where the next key in
 * scan order that could pass that field lies: the fields before with the
 * field's next interval in key order, or, past its last interval, past
 * the fields before.  Every key in between fails that field as `k` does
 * (each field's encoding ends itself, so a key between starts with the
 * same fields before).  False when there is no such key, or it would not
 * move the cursor. */
static bool next_passing(mf_scan *s, size_t i, const uint8_t *k, size_t kl, size_t plen, size_t n)
{
    const mfi_oil *o = &s->ix.oils[i];
    bool desc = s->ix.desc[i];
    const uint8_t *p = ascending_part(s, i, k + plen, n);
    mf_buf *t = &s->seek_to;
    if (!p)
        return false;
    size_t lo = first_not_below(o, p, n);
    /* A forward scan of an ascending field (or a backward one of a
     * descending field) goes up in value: the next interval is the first
     * above the part, from its low end; otherwise the last below it, from
     * its high end. */
    bool up = desc == s->backward;
    const mfi_ival *next = up ? (lo < o->n ? &o->v[lo] : NULL) : (lo > 0 ? &o->v[lo - 1] : NULL);
    t->len = 0;
    if (mf_buf_append(t, k, plen) != 0)
        return false;
    if (next) {
        if (put_end(t, up ? &next->lo : &next->hi, desc) != 0)
            return false;
        /* forward, the first key >= the target: past an excluded end's
         * keys; backward, the last key <= it: past an included end's */
        if ((up ? next->lo_incl : next->hi_incl) == s->backward && !successor(t))
            return false;
    } else if (!s->backward && !successor(t)) {
        return false; /* backward: the last key below the fields before */
    }
    int c = cmp_bytes(t->data, t->len, k, kl);
    return s->backward ? c < 0 : c > 0;
}

/* Where a key failed a field's bounds (key_passes): the field, the bytes
 * before its part, and its part's length; `field` SIZE_MAX for no field. */
typedef struct key_fail {
    size_t field, plen, n;
} key_fail;

/* Whether an index key passes the scan's tests, so that its record is
 * fetched: the regex on the first field (a string it finds a match in, or
 * not a string: the regex value itself, the one other key in those
 * bounds), and the bounds of the fields past the ranges.  A key that
 * cannot be read is fetched: the matcher decides.  `*f` (when not NULL):
 * which field's bounds a key failed. */
static bool key_passes(mf_scan *s, const uint8_t *k, size_t kl, key_fail *f)
{
    if (f)
        f->field = SIZE_MAX;
    if (s->key_re) {
        const char *str;
        size_t len;
        int r = mf_bsonx_key_string(k, kl, s->ix.desc[0], &s->key_str, &str, &len);
        if (r == 1 && !mf_regex_match(s->key_re, str, len))
            return false;
    }
    const uint8_t *p = k, *end = k + kl;
    for (size_t i = 0; i < s->ix.nfields && i < 32 && (s->key_check >> i) != 0; i++) {
        size_t n = mf_bsonx_key_value_len(p, (size_t)(end - p), s->ix.desc[i]);
        if (n == 0)
            return true;
        if ((s->key_check >> i & 1) && !in_bounds(s, i, p, n)) {
            if (f)
                *f = (key_fail){i, (size_t)(p - k), n};
            return false;
        }
        p += n;
    }
    return true;
}

/* Unique whole keys, looked up one by one in scan order. */
static int next_point(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m,
                      mf_scan_row *row, bool *valid, mf_error *err)
{
    mf_btree *idx = mf_engine_tree(e, s->ix.tree);
    if (!idx)
        return mf_error_set(err, MF_QueryPlanKilled, "index '%s' dropped", s->ix.name);
    mf_btree *records = mf_engine_tree(e, mf_coll_records(c));
    while (s->next_point < s->nranges) {
        if (s->work_cap && s->stats.works >= s->work_cap)
            return 0; /* a trial's turn is over */
        size_t n = s->next_point++;
        const mf_buf *p = &s->ranges[s->backward ? s->nranges - 1 - n : n].lo;
        bool found, take;
        const uint8_t *rid;
        size_t rl;
        s->stats.works++;
        int rc = check_time(s, err);
        if (rc == 0)
            rc = mf_btree_get(idx, p->data, p->len, &found, &rid, &rl, err);
        s->stats.keys_examined += found || !s->single;
        if (rc == 0 && found &&
            (!(s->key_re || s->key_check) || key_passes(s, p->data, p->len, NULL)))
            rc = consider(s, records, m, rid, rl, NULL, row, &take, err);
        else
            take = false;
        if (rc)
            return rc;
        if (found && take) {
            *valid = true;
            return 0;
        }
    }
    s->eof = true;
    *valid = false;
    return 0;
}

static int step(mf_scan *s, bool *valid, mf_error *err)
{
    return s->backward ? mf_cursor_prev(&s->cur, valid, err) : mf_cursor_next(&s->cur, valid, err);
}

/* Note the key and value of the entry `cur` was just put on. */
static void note(mf_scan *s)
{
    mf_cursor_key(&s->cur, &s->cur_key, &s->cur_klen);
    mf_cursor_value(&s->cur, &s->cur_val, &s->cur_vlen);
}

/* step(), noting the entry reached: inside the leaf in one call where the
 * next entry allows it (btree.h), else by the cursor's own step.  With
 * `prefetch_next`, entering a new leaf asks for the one after it whole:
 * an index scan reads every entry of the leaves it crosses, and a cold
 * leaf read entry by entry was 11% of an indexed find after a collection
 * scan. */
static inline int step_noted(mf_scan *s, bool prefetch_next, bool *valid, mf_error *err)
{
    if (mf_cursor_step_in_leaf(&s->cur, s->backward, &s->cur_key, &s->cur_klen, &s->cur_val,
                               &s->cur_vlen)) {
        *valid = true;
        return 0;
    }
    mf_pgno was = prefetch_next ? s->cur.path[s->cur.depth - 1].no : 0;
    int rc = step(s, valid, err);
    if (rc == 0 && *valid) {
        note(s);
        if (prefetch_next && s->cur.path[s->cur.depth - 1].no != was)
            mf_cursor_prefetch_next_leaf(&s->cur, s->backward);
    }
    return rc;
}

/* Seek to where range `s->range` starts in the scan's direction. */
/* Where the scan of range `r` starts when its near end is included and
 * the field after the ranges is tested (key_check): at that end with the
 * field's first interval in scan order, as mongod's start key holds each
 * field's first interval (a: [10, 20), b: 7 starts at {a: 10, b: 7}, not
 * at the first key of a 10).  Into s->seek_to; false: at the range's own
 * end. */
static bool start_past_ranges(mf_scan *s, const krange *r)
{
    size_t i = s->ranged;
    mf_buf *t = &s->seek_to;
    if (i == 0 || i >= 32 || !(s->key_check >> i & 1) || s->ix.oils[i].n == 0 ||
        !(s->backward ? r->has_hi && r->hi_incl : r->lo_incl))
        return false;
    const mf_buf *end = s->backward ? &r->hi : &r->lo;
    t->len = 0;
    if (mf_buf_append(t, end->data, end->len) != 0)
        return false;
    if (s->backward) { /* undo successor(): the included end again */
        t->data[t->len - 1]--;
        while (t->len < r->hi_len0)
            if (mf_buf_append(t, (const uint8_t *)"\xff", 1) != 0)
                return false;
    }
    const mfi_oil *o = &s->ix.oils[i];
    bool desc = s->ix.desc[i];
    bool up = desc == s->backward; /* as next_passing */
    const mfi_ival *first = up ? &o->v[0] : &o->v[o->n - 1];
    if (put_end(t, up ? &first->lo : &first->hi, desc) != 0)
        return false;
    return (up ? first->lo_incl : first->hi_incl) != s->backward || successor(t);
}

static int seek_range(mf_scan *s, bool *valid, mf_error *err)
{
    const krange *r = &s->ranges[s->range];
    int rc;
    if (start_past_ranges(s, r))
        return mf_cursor_seek(&s->cur, s->seek_to.data, s->seek_to.len, s->backward, valid, err);
    if (!s->backward)
        return r->lo.len ? mf_cursor_seek(&s->cur, r->lo.data, r->lo.len, false, valid, err)
                         : mf_cursor_first(&s->cur, valid, err);
    if (!r->has_hi)
        return mf_cursor_last(&s->cur, valid, err);
    rc = mf_cursor_seek(&s->cur, r->hi.data, r->hi.len, true, valid, err);
    if (rc == 0 && *valid) {
        const uint8_t *k;
        size_t kl;
        mf_cursor_key(&s->cur, &k, &kl);
        if (cmp_bytes(k, kl, r->hi.data, r->hi.len) == 0) /* hi is excluded */
            rc = mf_cursor_prev(&s->cur, valid, err);
    }
    return rc;
}

/* Put the tree cursor on the first entry not yet read. */
static int position(mf_scan *s, bool *valid, mf_error *err)
{
    int rc;
    if (!s->started) {
        s->started = true;
        if (s->kind == P_IXSCAN) {
            s->range = s->backward ? s->nranges - 1 : 0;
            s->stats.seeks++;
            return seek_range(s, valid, err);
        }
        return s->backward ? mf_cursor_last(&s->cur, valid, err)
                           : mf_cursor_first(&s->cur, valid, err);
    }
    /* Again from the last key read: the first entry past it (or, after a
     * DISTINCT_SCAN's skip, the first at or past its target). */
    if (s->kind == P_IXSCAN)
        s->stats.seeks++;
    rc = mf_cursor_seek(&s->cur, s->last.data, s->last.len, s->backward, valid, err);
    if (s->seek_exact) {
        s->seek_exact = false;
        return rc;
    }
    if (rc == 0 && *valid) {
        const uint8_t *k;
        size_t kl;
        mf_cursor_key(&s->cur, &k, &kl);
        if (kl == s->last.len && memcmp(k, s->last.data, kl) == 0)
            return step(s, valid, err);
    }
    /* a capped collection's oldest went: a tailable scan's place with them */
    if (rc == 0 && s->tail && s->last.len == 8)
        rc = mf_error_set(err, MF_CappedPositionLost,
                          "CollectionScan died due to position in capped collection being "
                          "deleted. Last seen record id: RecordId(%llu)",
                          (unsigned long long)get_be64(s->last.data));
    return rc;
}

static int locate_slow(mf_scan *s, const uint8_t *k, size_t kl);

/* Where key `k` lies against the ranges: 0 inside the current one (which
 * may advance), 1 before it (seek needed), -1 past the last (the end). */
static int locate(mf_scan *s, const uint8_t *k, size_t kl)
{
    /* Keys come in order: once one fell inside the current range, the
     * later ones are past its start, and only its end needs a look. */
    const krange *in = s->in_range == s->range + 1 ? &s->ranges[s->range] : NULL;
    if (in && !s->backward && (!in->has_hi || cmp_bytes(k, kl, in->hi.data, in->hi.len) < 0))
        return 0;
    if (in && s->backward && cmp_bytes(k, kl, in->lo.data, in->lo.len) >= 0)
        return 0;
    int where = locate_slow(s, k, kl);
    s->in_range = where == 0 ? s->range + 1 : 0;
    return where;
}

/* locate() without what it knows of the last key. */
static int locate_slow(mf_scan *s, const uint8_t *k, size_t kl)
{
    if (!s->backward) {
        while (s->range < s->nranges && s->ranges[s->range].has_hi &&
               cmp_bytes(k, kl, s->ranges[s->range].hi.data, s->ranges[s->range].hi.len) >= 0)
            s->range++;
        if (s->range == s->nranges)
            return -1;
        const krange *r = &s->ranges[s->range];
        return cmp_bytes(k, kl, r->lo.data, r->lo.len) < 0 ? 1 : 0;
    }
    for (;;) {
        const krange *r = &s->ranges[s->range];
        if (cmp_bytes(k, kl, r->lo.data, r->lo.len) >= 0)
            return r->has_hi && cmp_bytes(k, kl, r->hi.data, r->hi.len) >= 0 ? 1 : 0;
        if (s->range == 0)
            return -1;
        s->range--;
    }
}

/* A long scan: build the records' locator (btree.h) once the descents
 * made without it are at least an eighth of the leaves, so that building
 * it (a read of every branch entry above the leaves) costs less than the
 * descents it saves.  It stays until the collection is next written, for
 * the scans after this one; so the descents counted are every scan's
 * since that write, not this one's alone (a 1% range of a collection of
 * 300-byte documents never made an eighth on its own). */
static void consider_locator(mf_scan *s, mf_btree *records)
{
    uint64_t leaves = mf_btree_leaves_estimate(records, s->q_height);
    if (leaves == 0 || mf_btree_has_locator(records)) {
        s->locator_at = 0;
    } else if (leaves <= 8 * mf_btree_descents(records)) {
        mf_btree_locator_build(records, s->q_height);
        s->locator_at = 0;
    } else {
        s->locator_at *= 2;
    }
}

/* `cur` was just positioned: an empty queue.  Whether to hint records:
 * only index scans that read them (not COUNT_SCAN's keys), of a records
 * tree with branch pages. */
static void queue_reset(mf_scan *s, mf_engine *e, mf_coll *c)
{
    s->q_head = s->q_len = 0;
    s->q_done = false;
    s->q_read = s->q_taken = 0;
    s->in_range = 0;
    s->records = mf_engine_tree(e, mf_coll_records(c));
    mf_btree *records = keys_answer(s) ? NULL : s->records;
    mf_error ignored;
    s->q_height = records ? mf_btree_height(records, &ignored) : -1;
    s->locator_at = records && mf_btree_has_locator(records) ? 0 : LOCATOR_AFTER;
}

/* The queue slot of the batch before the one at slot `first`. */
static inline unsigned batch_before(unsigned first)
{
    return first >= QBATCH ? first - QBATCH : first + QUEUE - QBATCH;
}

/* The batch of QBATCH entries ending at queue slot `last` was read: hint
 * its records' locator entries, the leaves of the batch before it (whose
 * locator entries were asked for a batch ago), the cells of the batch
 * before that (whose leaves were), and the rest of the values of the one
 * before that (whose cells were; only once the scan has met a value
 * longer than its cell's lines: long_values), whose fetches begin within
 * a batch. */
static void hint_batch(mf_scan *s, mf_btree *records, unsigned last)
{
    unsigned first = last + 1 - QBATCH;
    unsigned prev = batch_before(first), prev2 = batch_before(prev), prev3 = batch_before(prev2);
    mf_btree_prefetch_locator(records, (const uint8_t (*)[8])&s->q_rid[first], QBATCH,
                              &s->q_hint[first]);
    if (s->q_read > QBATCH)
        mf_btree_prefetch_leaves(records, (const uint8_t (*)[8])&s->q_rid[prev], QBATCH,
                                 s->q_height, &s->q_hint[prev]);
    if (s->q_read > 2 * QBATCH)
        mf_btree_prefetch_cells(records, (const uint8_t (*)[8])&s->q_rid[prev2], QBATCH,
                                &s->q_hint[prev2]);
    if (s->q_read > 3 * QBATCH && s->long_values)
        mf_btree_prefetch_values(records, &s->q_hint[prev3], QBATCH);
}

/* How a scan goes past a key that failed its tests (key_fills). */
typedef enum { PAST_STEP, PAST_SEEK, PAST_STEP_SEEK } key_past;

/* Whether the key `cur` is on passes the scan's tests (key_passes).  A
 * key that fails a field's bounds is sought past, as mongod's
 * IndexBoundsChecker seeks on the first such key (`*f` says how it
 * failed): `*past` PAST_SEEK with s->seek_to where the next key that
 * could pass lies, when the field is the first; PAST_STEP_SEEK past a
 * later field, whose seek the caller makes from the next key when that
 * has the same fields before (past_failed): with fields before of its
 * own, the next key is where the seek would land.  PAST_STEP: no seek (a
 * regex's failure, or no key could pass before the next). */
static bool key_fills(mf_scan *s, key_past *past, key_fail *f)
{
    const uint8_t *k = s->cur_key;
    size_t kl = s->cur_klen;
    *past = PAST_STEP;
    if (key_passes(s, k, kl, f))
        return true;
    if (f->field == SIZE_MAX)
        return false;
    if (f->plen > 0)
        *past = PAST_STEP_SEEK;
    else if (next_passing(s, f->field, k, kl, f->plen, f->n))
        *past = PAST_SEEK;
    return false;
}

/* Move the cursor to s->seek_to (onward from its entry, in its leaf when
 * the target is there). */
static int seek_to_target(mf_scan *s, mf_error *err)
{
    /* often in the same leaf: a unique range field's next key */
    if (mf_cursor_seek_in_leaf(&s->cur, s->backward, s->seek_to.data, s->seek_to.len,
                               &s->cur_key, &s->cur_klen, &s->cur_val, &s->cur_vlen)) {
        s->cur_valid = true;
        return 0;
    }
    int rc = mf_cursor_seek(&s->cur, s->seek_to.data, s->seek_to.len, s->backward,
                            &s->cur_valid, err);
    if (rc == 0 && s->cur_valid)
        note(s);
    return rc;
}

/* The cursor has stepped from key `k` (`kl` bytes), which failed as `f`
 * says, to the next: when that has the same fields before, go on to
 * where the next key that could pass lies, as the seek from `k` would
 * (the key stepped onto is not examined; it may be that place). */
static int past_failed(mf_scan *s, const uint8_t *k, size_t kl, const key_fail *f,
                       mf_error *err)
{
    if (!s->cur_valid || s->cur_klen < f->plen || memcmp(s->cur_key, k, f->plen) != 0 ||
        !next_passing(s, f->field, k, kl, f->plen, f->n))
        return 0;
    int c = cmp_bytes(s->seek_to.data, s->seek_to.len, s->cur_key, s->cur_klen);
    if (s->backward ? c >= 0 : c <= 0)
        return 0; /* the key stepped onto is where it lands */
    return seek_to_target(s, err);
}

/* Read entries from `cur` into the queue until it holds `want`, or its
 * last entry ends the scan.  Errors: a damaged page met by the cursor. */
static int queue_fill(mf_scan *s, unsigned want, mf_error *err)
{
    mf_btree *records = s->q_height >= 2 ? s->records : NULL;
    while (!s->q_done && s->q_len < want) {
        unsigned at = s->q_head + s->q_len; /* both < QUEUE: no division */
        if (at >= QUEUE)
            at -= QUEUE;
        int rc;
        s->q_len++;
        s->q_read++;
        memset(s->q_rid[at], 0, 8);
        s->q_hint[at].leaf = 0; /* entry and slot are set by the stages that read them */
        if (!s->cur_valid) {
            s->q_kind[at] = Q_END;
        } else {
            int where = locate(s, s->cur_key, s->cur_klen);
            s->q_kind[at] = where < 0 ? Q_PAST : where > 0 ? Q_SEEK : Q_ENTRY;
        }
        s->q_range[at] = s->range;
        if (s->q_kind[at] == Q_PAST || s->q_kind[at] == Q_END) {
            s->q_done = true;
        } else if (s->q_kind[at] == Q_SEEK) {
            if ((rc = seek_range(s, &s->cur_valid, err)) != 0)
                return rc;
            if (s->cur_valid)
                note(s);
        } else {
            s->q_key[at] = s->cur_key;
            s->q_klen[at] = s->cur_klen;
            s->q_vlen[at] = s->cur_vlen;
            key_past past = PAST_STEP;
            key_fail f;
            if ((s->key_re || s->key_check) && !key_fills(s, &past, &f))
                s->q_kind[at] = past != PAST_STEP ? Q_SKIP : Q_TESTED;
            else if (s->cur_vlen == 8)
                memcpy(s->q_rid[at], s->cur_val, 8);
            if (past == PAST_SEEK)
                rc = seek_to_target(s, err);
            else if ((rc = step_noted(s, true, &s->cur_valid, err)) == 0 && past == PAST_STEP_SEEK)
                rc = past_failed(s, s->q_key[at], s->q_klen[at], &f, err);
            if (rc)
                return rc;
        }
        if (records && at % QBATCH == QBATCH - 1)
            hint_batch(s, records, at);
    }
    return 0;
}

/* A DISTINCT_SCAN returned `doc`, from the index entry `key`: the next
 * row comes from past every key that starts as this one does through the
 * distinct field.  Those leading values are taken from the document and
 * encoded as the index does; if they are not the start of `key` (a value
 * the index keys otherwise), nothing is skipped.  Nor when the document
 * lacks the distinct field: its key is null, and another document under
 * that key may hold an explicit null. */
static int distinct_skip(mf_scan *s, const bson_t *doc, const uint8_t *key, size_t klen,
                         mf_error *err)
{
    /* Built in `last`, whose memory is reused: it matters again only once
     * the scan lets go of its position, which copies the key to resume
     * after into it (mf_scan_release), or after a skip, which fills it. */
    mf_buf *p = &s->last;
    bson_iter_t it, v;
    bool has = false;
    static const bson_value_t null_value = {.value_type = BSON_TYPE_NULL};
    p->len = 0;
    for (size_t i = 0; i < s->distinct_fields; i++) {
        has = bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, s->ix.paths[i], &v);
        if ((has ? mf_bsonx_key_append_coll(p, &v, s->ix.desc[i], s->ix.coll)
                 : mf_bsonx_key_append_value(p, &null_value, s->ix.desc[i])) != 0)
            return oom(err);
    }
    if (!has || p->len > klen || memcmp(p->data, key, p->len) != 0)
        return 0;
    /* index_next looks at the next entry first: a seek only if it is
     * still in the group (where values are many, it is not). */
    if (successor(p))
        s->skip_pending = true;
    else
        s->eof = true; /* nothing lies past this prefix */
    return 0;
}

/* The next row of an index scan over ranges. */
static int index_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m,
                      mf_scan_row *row, bool *valid, mf_error *err)
{
    int rc;
    if (!s->positioned) {
        mf_btree *tree = mf_engine_tree(e, s->ix.tree);
        if (!tree)
            return mf_error_set(err, MF_QueryPlanKilled, "index '%s' dropped", s->ix.name);
        if (s->lost_last)
            return oom(err);
        mf_cursor_init(&s->cur, tree);
        if (s->started) /* resume after the last entry taken, in its range */
            s->range = s->q_range_taken;
        if ((rc = position(s, &s->cur_valid, err)) != 0)
            return rc;
        if (s->cur_valid)
            note(s);
        s->q_range_taken = s->range;
        s->positioned = true;
        queue_reset(s, e, c);
    }
    for (;;) {
        if (s->work_cap && s->stats.works >= s->work_cap)
            return 0; /* a trial's turn is over */
        /* The first entry alone: a query that takes one row pays for no
         * read-ahead.  After it, whole batches. */
        if (s->q_len == 0 || (s->q_taken > 0 && s->q_len <= QUEUE - QBATCH))
            if ((rc = queue_fill(s, s->q_taken && (!s->distinct_fields || s->skip_free) ? QUEUE : 1,
                                 err)) != 0)
                return rc;
        if (s->q_len == 0) { /* the end was taken before: nothing follows it */
            s->eof = true;
            return 0;
        }
        unsigned at = s->q_head;
        if (++s->q_head == QUEUE)
            s->q_head = 0;
        s->q_len--;
        s->q_taken++;
        s->q_range_taken = s->q_range[at];
        s->stats.works++;
        if ((rc = check_time(s, err)) != 0)
            return rc;
        if (s->q_kind[at] == Q_END) {
            s->eof = true;
            return 0;
        }
        if (s->q_kind[at] == Q_PAST) {
            s->stats.keys_examined += !s->single;
            s->eof = true;
            return 0;
        }
        if (s->skip_pending && s->q_kind[at] == Q_ENTRY) {
            s->skip_pending = false;
            s->skip_free = cmp_bytes(s->q_key[at], s->q_klen[at], s->last.data, s->last.len) >= 0;
            if (!s->skip_free) {
                /* Still in the last document's group: seek past it.  The
                 * key the seek lands on is the one examined, as mongod's. */
                s->seek_exact = true;
                s->positioned = false;
                s->q_has_last = false;
                return index_next(s, e, c, m, row, valid, err);
            }
        }
        s->stats.keys_examined++;
        if (s->q_kind[at] == Q_SEEK) {
            s->stats.seeks++;
            continue;
        }
        if (s->q_kind[at] == Q_SKIP)
            s->stats.seeks++;
        if (s->q_kind[at] == Q_TESTED || s->q_kind[at] == Q_SKIP)
            continue;
        if (s->locator_at && s->q_taken >= s->locator_at && s->records)
            consider_locator(s, s->records);
        bool take;
        s->q_last = at;
        s->q_has_last = true;
        if ((rc = consider(s, s->records, m, s->q_rid[at], s->q_vlen[at], &s->q_hint[at], row,
                           &take, err)) != 0)
            return rc;
        if (take) {
            *valid = true;
            return s->distinct_fields ? distinct_skip(s, &row->doc, s->q_key[at], s->q_klen[at], err)
                                      : 0;
        }
    }
}

/* The next row of an OR: from each clause's scan in turn, each RecordId
 * once.  The OR's counters are its clauses' sums. */
static int or_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m, mf_scan_row *row,
                   bool *valid, mf_error *err)
{
    while (s->kid < s->nkids) {
        mf_scan *k = s->kids[s->kid];
        mf_scan_stats was = k->stats;
        if (s->work_cap && s->stats.works >= s->work_cap)
            return 0; /* a trial's turn is over */
        /* in a trial, the clause works no longer than the OR's turn */
        k->work_cap = s->work_cap ? k->stats.works + (s->work_cap - s->stats.works) : 0;
        int rc = mf_scan_next(k, e, c, m, row, valid, err);
        s->stats.keys_examined += k->stats.keys_examined - was.keys_examined;
        s->stats.docs_examined += k->stats.docs_examined - was.docs_examined;
        s->stats.works += k->stats.works - was.works;
        if (rc != 0)
            return rc;
        if (!*valid && !k->eof && s->work_cap)
            return 0; /* stopped by the turn's end, not at its end */
        if (!*valid) {
            s->kid++;
            continue;
        }
        bool dup;
        s->stats.dups_tested++;
        if ((rc = seen_before(s, row->rid, &dup, err)) != 0)
            return rc;
        if (!dup)
            return 0;
        s->stats.dups_dropped++;
        *valid = false;
    }
    s->eof = true;
    return 0;
}

int mfi_plan_scan_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m,
                       mf_scan_row *row, bool *valid, mf_error *err)
{
    int rc;
    *valid = false;
    if (s->eof)
        return 0;
    if (s->kind == P_OR)
        return or_next(s, e, c, m, row, valid, err);
    if (s->kind == P_TEXT)
        return mfi_plan_text_next(s, e, c, m, row, valid, err);
    if (s->kind == P_NEAR)
        return mfi_plan_near_next(s, e, c, m, row, valid, err);
    if (s->kind == P_IXSCAN) {
        if (s->points)
            return next_point(s, e, c, m, row, valid, err);
        if (s->nranges == 0) {
            s->eof = true;
            return 0;
        }
        return index_next(s, e, c, m, row, valid, err);
    }
    if (!s->positioned) {
        mf_tree_id t = mf_coll_records(c);
        mf_btree *tree = mf_engine_tree(e, t);
        if (!tree)
            return mf_error_set(err, MF_InternalError, "tree %llu is gone",
                                (unsigned long long)t);
        mf_cursor_init(&s->cur, tree);
        rc = position(s, valid, err);
        if (rc)
            return rc;
        if (*valid)
            note(s);
        s->positioned = true;
    } else if ((rc = step_noted(s, false, valid, err)) != 0) {
        return rc;
    }
    for (;;) {
        s->stats.works++;
        if (!*valid) {
            s->eof = true;
            return 0;
        }
        if ((rc = check_time(s, err)) != 0)
            return rc;
        const uint8_t *k = s->cur_key, *v = s->cur_val;
        size_t kl = s->cur_klen, vl = s->cur_vlen;
        bool take = false;
        if (kl == 8) {
            if ((rc = remember(s, k, kl, err)) != 0)
                return rc;
            row->rid = get_be64(k);
            if (!bson_init_static(&row->doc, v, vl))
                return mf_error_set(err, MF_DataCorruption, "record %llu is not a document",
                                    (unsigned long long)row->rid);
            row->data = v;
            if ((rc = judge(s, m, row, &take, err)) != 0)
                return rc;
        }
        if (take)
            return 0;
        if ((rc = step_noted(s, false, valid, err)) != 0)
            return rc;
    }
}

static MF_ALWAYS_INLINE int scan_next_counted(mf_scan *s, mf_engine *e, mf_coll *c,
                                              const mf_matcher *m, mf_scan_row *row,
                                              bool *valid, mf_error *err);

/* The next of the rows the winner returned in its trial: fetched and
 * judged again (the collection may have changed since).  Once all are
 * returned, the replay is dropped (the scan's own rows follow). */
static int replay_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m,
                       mf_scan_row *row, bool *valid, mf_error *err)
{
    if (s->replayed == s->nreplay) {
        free(s->replay);
        mf_buf_free(&s->replay_keys);
        s->replay = NULL;
        s->nreplay = s->replayed = s->replay_key_at = 0;
        s->row_key = NULL;
        return 0;
    }
    mf_btree *records = mf_engine_tree(e, mf_coll_records(c));
    while (s->replayed < s->nreplay) {
        uint8_t rid[8];
        bool found, take = true;
        put_be64(rid, s->replay[s->replayed++]);
        row->pos = -1;
        /* its key, for returnKey */
        const uint8_t *kp = s->replay_keys.data + s->replay_key_at;
        s->row_klen = (size_t)kp[0] | (size_t)kp[1] << 8 | (size_t)kp[2] << 16 |
                      (size_t)kp[3] << 24;
        s->row_kid = kp[4];
        s->row_key = kp + 5;
        s->replay_key_at += 5 + s->row_klen;
        if (keys_answer(s)) { /* a count's row: the key said it all */
            row->rid = get_be64(rid);
            bson_init(&row->doc);
            row->data = bson_get_data(&row->doc);
            *valid = true;
            return 0;
        }
        int rc = fetch(records, rid, NULL, row, &found, err);
        if (rc == 0 && found && m)
            rc = mf_matcher_eval(m, &row->doc, s->want_pos ? &row->pos : NULL, &take, err);
        if (rc)
            return rc;
        if (found && take) {
            *valid = true;
            return 0;
        }
    }
    return 0;
}

int mf_scan_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m, mf_scan_row *row,
                 bool *valid, mf_error *err)
{
    struct timespec t0, t1;
    if (!s->timed)
        return scan_next_counted(s, e, c, m, row, valid, err);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = scan_next_counted(s, e, c, m, row, valid, err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s->stats.time_ns += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000LL +
                                   (t1.tv_nsec - t0.tv_nsec));
    return rc;
}

static int view_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m,
                     mf_scan_row *row, bool *valid, mf_error *err);

static MF_ALWAYS_INLINE int scan_next_tree(mf_scan *s, mf_engine *e, mf_coll *c,
                                           const mf_matcher *m, mf_scan_row *row, bool *valid,
                                           mf_error *err)
{
    int rc = s->ntrials ? mfi_plan_decide(s, e, c, m, err) : 0;
    *valid = false;
    if (rc == 0 && s->nreplay)
        rc = replay_next(s, e, c, m, row, valid, err);
    if (rc == 0 && !*valid)
        rc = mfi_plan_scan_next(s, e, c, m, row, valid, err);
    return rc;
}

static MF_ALWAYS_INLINE int scan_next_counted(mf_scan *s, mf_engine *e, mf_coll *c,
                                              const mf_matcher *m, mf_scan_row *row,
                                              bool *valid, mf_error *err)
{
    int rc = s->view ? view_next(s, e, c, m, row, valid, err)
                 : scan_next_tree(s, e, c, m, row, valid, err);
    if (rc == 0 && *valid)
        s->stats.n_returned++;
    return rc;
}

/* ------------------------------------------------------- a read view */

/* One of the view's own documents (a copy: the view may change under a
 * cursor between batches). */
struct mfi_view_row {
    uint64_t rid;
    uint8_t *data;
    size_t len;
};

void mfi_view_rows_free(mf_scan *s)
{
    for (size_t i = 0; i < s->vs.nrows; i++)
        free(s->vs.rows[i].data);
    free(s->vs.rows);
    s->vs.rows = NULL;
    s->vs.nrows = s->vs.caprows = 0;
    free(s->vs.seen);
    s->vs.seen = NULL;
    s->vs.nseen = s->vs.seen_cap = 0;
}

static int view_add(void *to, uint64_t rid, const bson_t *doc, mf_error *err)
{
    mf_scan *s = to;
    bool had;
    int rc = rid_set(&s->vs.seen, &s->vs.nseen, &s->vs.seen_cap, rid, false, &had, err);
    if (rc || had) /* the trees gave it, before the view hid it */
        return rc;
    if (s->vs.nrows == s->vs.caprows) {
        size_t cap = s->vs.caprows ? 2 * s->vs.caprows : 8;
        struct mfi_view_row *v = realloc(s->vs.rows, cap * sizeof *v);
        if (!v)
            return oom(err);
        s->vs.rows = v;
        s->vs.caprows = cap;
    }
    uint8_t *copy = malloc(doc->len);
    if (!copy)
        return oom(err);
    memcpy(copy, bson_get_data(doc), doc->len);
    s->vs.rows[s->vs.nrows++] = (struct mfi_view_row){rid, copy, doc->len};
    return 0;
}

/* The next row of a scan with a read view: the trees' rows it does not
 * hide, then its own documents that `m` accepts. */
static int view_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m,
                     mf_scan_row *row, bool *valid, mf_error *err)
{
    const mf_read_view *v = s->view;
    int rc;
    bool had;
    while (!s->vs.tree_done) {
        if ((rc = scan_next_tree(s, e, c, m, row, valid, err)) != 0)
            return rc;
        if (!*valid) {
            s->vs.tree_done = true;
            if ((rc = v->extras(v->arg, c, view_add, s, err)) != 0)
                return rc;
            break;
        }
        if (v->hides(v->arg, c, row->rid))
            continue;
        return rid_set(&s->vs.seen, &s->vs.nseen, &s->vs.seen_cap, row->rid, true, &had, err);
    }
    *valid = false;
    while (s->vs.next < s->vs.nrows) {
        struct mfi_view_row *r = &s->vs.rows[s->vs.next++];
        bool take = true;
        row->rid = r->rid;
        row->pos = -1;
        if (!bson_init_static(&row->doc, r->data, r->len))
            continue;
        row->data = r->data;
        if (m && (rc = mf_matcher_eval(m, &row->doc, s->want_pos ? &row->pos : NULL, &take,
                                       err)) != 0)
            return rc;
        if (take) {
            *valid = true;
            return 0;
        }
    }
    return 0;
}

int mf_scan_each(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m, mf_scan_sink sink,
                 void *arg, bool *ended, mf_error *err)
{
    mf_scan_row row;
    bool valid, stop = false;
    int rc = 0;
    *ended = false;
    while (!stop) {
        /* One call per row the less (mf_scan_next's, and fill's own
         * tests): about 50 instructions of the 2,100 an indexed find spends
         * on a fetched document.  Timed, a row takes mf_scan_next's way. */
        rc = s->timed ? mf_scan_next(s, e, c, m, &row, &valid, err)
                      : scan_next_counted(s, e, c, m, &row, &valid, err);
        if (rc != 0 || !valid) {
            *ended = rc == 0;
            return rc;
        }
        if ((rc = sink(arg, &row, &stop, err)) != 0)
            return rc;
    }
    return 0;
}
