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
 */
#include "query_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ID_INDEX "_id_"
#define MAX_RANGES 4096 /* cross-product limit: past it, fewer fields bound the ranges */
#define INDEX_NOT_FOUND MF_IndexNotFound

typedef enum { P_COLLSCAN, P_IXSCAN, P_OR } plan_kind;

/* A half-open range of tree keys [lo, hi); no `has_hi`: to the end. */
typedef struct krange {
    mf_buf lo, hi;
    bool has_hi;
    /* The ends as the bounds give them, included (not made exclusive by
     * successor): `hi` was `hi_len0` bytes then, its last 1 lower. */
    bool lo_incl, hi_incl;
    size_t hi_len0;
} krange;

/* What the scan keeps of its index (the descriptor is the caller's). */
typedef struct scan_index {
    char *name;
    mf_tree_id tree;
    bson_t *key;
    size_t nfields;
    char **paths;
    bool *desc;
    bool unique, sparse, partial, is_id;
    uint32_t multikey;
    mf_collator *coll; /* the index's collation (a reference), or NULL */
    mfi_oil *oils; /* per field: the bounds explain shows */
} scan_index;

/* Index entries read ahead of the one being fetched, and hinted together
 * (a batch).  Small batches: on a 2-core EPYC, fetching 10,000 scattered
 * records took 25% less time with batches of 3 than of 8, less with each
 * step down to 3 (docs/benchmarks.md).  A likely cause: the leaves of
 * three batches are in use at once, and their headers all sit at offset
 * 0 of their pages, so in an 8-way L1 they compete for the same sets.
 * Five batches: one being fetched, and one in each of hint_batch's four
 * stages. */
#define QBATCH 3
#define QUEUE (5 * QBATCH)
#define LOCATOR_AFTER 512 /* entries, before a scan considers the locator */
/* Multi-planning (decide), as mongod's: at most this many candidate plans,
 * each tried for up to TRIAL_WORKS works (internalQueryPlanEvaluationWorks)
 * or until one has TRIAL_RESULTS rows (internalQueryPlanEvaluationMaxResults)
 * or reaches its end. */
#define MAX_TRIALS 8
#define TRIAL_WORKS 10000
#define TRIAL_RESULTS 101

/* What a queued index entry is (scan_next's loop, one landing each). */
typedef enum {
    Q_ENTRY, /* in the current range: fetch and judge its record */
    Q_TESTED, /* in the range, but its key failed the key filter: not fetched */
    Q_SKIP,   /* as Q_TESTED, and the cursor sought past the keys failing alike */
    Q_SEEK,  /* before the next range: the cursor sought on past it */
    Q_PAST,  /* past the last range: the scan ends */
    Q_END    /* the end of the tree: the scan ends */
} qkind;

struct mf_scan {
    plan_kind kind;
    bool backward;
    bool idhack; /* the _id index, one point, nothing else in the filter */
    bool points; /* ranges are whole keys of a unique index: looked up */
    size_t distinct_fields; /* a DISTINCT_SCAN: after a document, skip every
                               key sharing its values of this many leading
                               fields (distinct_skip) */
    bool skip_pending; /* `last` holds a skip's target, not yet reached */
    bool skip_free;    /* the last skip needed no seek: read ahead as an
                          IXSCAN does (a seek would waste what was read) */
    bool seek_exact;   /* position() lands on `last` itself: a skip's target */
    bool key_range; /* find's min/max: one range of whole keys, no field
                       bounds (explain's indexBounds is empty, as mongod's
                       isSimpleRange) */
    scan_index ix;
    krange *ranges;
    size_t nranges;
    size_t range;      /* the range the cursor is in */
    size_t next_point; /* points: how many looked up */
    bson_t *filter;    /* the query (COLLSCAN's explain filter), or NULL */
    bson_t *residual;  /* what the bounds leave to the matcher (FETCH's filter) */
    bool count_only;   /* mf_scan_count_only: keys answer, when they can */
    bool count_scan;   /* and as a COUNT_SCAN: its bounds are one interval */
    bool single;       /* an IXSCAN whose bounds are one interval of keys: like
                          mongod's cursor with an end position, it examines no
                          key past the end (a key checked against several
                          intervals is examined, then found past them) */
    bool timed;        /* mf_scan_timed: keep executionTimeMillis */
    /* mf_scan_deadline: the operation's (each work counts into it) */
    mf_deadline *deadline;
    /* multikey and OR deduplication: RecordIds returned, +1 (0 marks a
     * free slot) */
    uint64_t *seen;
    size_t nseen, seen_cap;
    /* P_OR: a scan per clause, run in turn; `kid` is the one running */
    struct mf_scan **kids;
    size_t nkids, kid;
    bool rooted; /* the $or is the whole filter (explain's SUBPLAN) */
    size_t or_in_and; /* where the $or is (find_or's `in_and`) */
    /* position */
    bool want_pos; /* compute the matcher's array position per row */
    bool started, positioned, eof;
    mf_buf last; /* the last key read (record id or index key) */
    /* A regex with no literal prefix on the index's first field (mongod's
     * IXSCAN filter): tested on each string key before its record is
     * fetched.  Its pattern and flags are kept for explain. */
    mf_regex *key_re;
    char *key_re_pattern, *key_re_flags;
    mf_buf key_str; /* the key's string, decoded, or a field's bytes turned back */
    mf_buf seek_to; /* where a key that failed the key filter sends the cursor */
    /* The fields past those the ranges bound whose own bounds each key is
     * tested against (bit i: field i; mongod's IndexBoundsChecker) before
     * its record is fetched. */
    uint32_t key_check;
    size_t ranged; /* the fields the ranges bound (build_ranges) */
    mf_cursor cur;
    /* The key and value of the entry `cur` is on, noted when it got there
     * (step_noted, note): both scans read them once per entry. */
    const uint8_t *cur_key, *cur_val;
    size_t cur_klen, cur_vlen;
    /* An index scan reads its entries into a queue, up to QUEUE ahead of
     * the one whose record is fetched.  Each batch of QBATCH record ids is
     * hinted to the memory system four times, a batch apart (hint_batch):
     * its locator entries when it is read, then its leaves, then its
     * cells, then the rest of long values (once the scan has met one:
     * for records of 100 bytes that stage cost 34 instructions a fetch and
     * asked for nothing).  So a fetch finds the leaf and
     * the document it needs in cache instead of
     * waiting for it.  Hints decide nothing.  Entries are counted
     * (keysExamined, works) when they leave the queue, not when they are
     * read, so that the counts are the same as a scan that reads one entry
     * at a time.  The queue is emptied
     * whenever `cur` is positioned, from the last entry taken: `range` is
     * then put back to that entry's. */
    bool cur_valid;          /* `cur` is on an entry not yet queued */
    int q_height;            /* the records tree's; hints only when >= 2 (a
                                range scan that fetches, of a tree with
                                branch pages), else -1 */
    unsigned q_head, q_len;  /* the queue: slots q_head.. (mod QUEUE) */
    bool q_done;             /* its last entry is Q_PAST or Q_END */
    uint64_t q_read;         /* entries queued since positioned */
    uint64_t q_taken;        /* entries taken since positioned */
    uint64_t locator_at;     /* q_taken at which to consider the records'
                                locator next (0: not again) */
    size_t q_range[QUEUE];   /* `range` when the entry was read */
    size_t q_range_taken;    /* and that of the last entry taken */
    unsigned q_last;         /* the slot of the last entry taken, whose key
                                mf_scan_release copies to `last` */
    bool q_has_last;
    bool lost_last;          /* that copy ran out of memory: the next call fails */
    size_t in_range;         /* the range the last key located fell inside, +1;
                                0 when none has since `cur` was positioned */
    mf_btree *records;       /* the records tree, while positioned */
    bool long_values;        /* a record fetched ran past the lines its
                                cell's hint asked for: the values stage is
                                worth its work from then on */
    uint8_t q_kind[QUEUE];
    const uint8_t *q_key[QUEUE]; /* the key, in its page: valid while positioned */
    size_t q_klen[QUEUE];
    uint8_t q_rid[QUEUE][8]; /* the value: a record id, when 8 bytes */
    size_t q_vlen[QUEUE];
    mf_btree_hint q_hint[QUEUE];
    mf_scan_stats stats;
    /* Multi-planning (decide): when other indexes could answer the query
     * as well (bounded by a predicate, the sort given alike unless the
     * caller can take either: `blocking_trials`), the
     * candidates run a trial before the first row: trials[0] on choose()'s
     * index, the others' after it in catalog order.  The winner's trial
     * goes on as this scan: the rows it returned in the trial (their
     * record ids, `replay`) are fetched, judged and returned again first.
     * The losers stay for explain's rejectedPlans.  With a plan cache
     * (mf_scan_extra), a query whose shape has a cached winner (`probe`)
     * runs that plan alone first, within ten times the works it won with;
     * only if it does not finish or fill a trial's rows in them do all
     * run (mongod's CachedPlanStage), and the new winner is cached. */
    struct mf_scan **trials;
    size_t ntrials;
    bool sorted;   /* this plan gives the sort asked for */
    /* Trials that differ in giving the sort (mf_scan_extra.sort_trials):
     * one that does not has a blocking SORT above it in the caller's plan,
     * so its rows count, as mongod's SORT returns them, only once its scan
     * has ended, one per work after that (kept once decided: rejectedPlans
     * show the SORT).  `sort` is the sort asked for. */
    bool blocking_trials;
    bson_t *sort;
    bson_t *projection; /* find's, for the plan cache's entry, or NULL */
    struct mf_scan **rejected;
    size_t nrejected;
    uint64_t work_cap;      /* a trial's: stop (no row, not eof) at this many works; 0: none */
    uint64_t trial_results; /* rows that end a trial */
    mf_plan_cache *cache;   /* the caller's, or NULL */
    void (*chosen)(void *arg, mf_coll *c, const char *index); /* mf_scan_extra's */
    void *chosen_arg;
    uint64_t shape;         /* the query's key in it */
    uint64_t cache_indexes; /* what the key covers, for planCacheClear */
    uint32_t query_hash;    /* and $planCacheStats; all three set when `shape` is
                               not 0 (cache_key is never 0) */
    bool explain;           /* mf_scan_extra's: keep `all_plans` */
    char or_name[24];       /* an OR plan's name in the plan cache (trial_name) */
    /* Once trials have chosen: each candidate's trial as explain's
     * allPlansExecution shows it (the winner's first, then the rejected
     * in their order), with mongod's score; NULL when one plan ran. */
    bson_t *all_plans;
    int probe;              /* the cached winner among `trials`, or -1 */
    uint64_t probe_works;   /* its budget */
    uint64_t *replay;       /* record ids to return first, and how many */
    size_t nreplay, replayed;
    mf_buf replay_keys;     /* their index keys, each after its 4-byte length and
                               the byte of its OR clause */
    size_t replay_key_at;   /* the next one's offset */
    const uint8_t *row_key; /* the key of the row just replayed (returnKey), or NULL */
    size_t row_klen;
    size_t row_kid;         /* an OR's: the index scan whose key it is (leaf_at) */
};

static bool single_interval(const mf_scan *s, bson_t *start, bool *start_incl, bson_t *end,
                            bool *end_incl);

static int oom(mf_error *err)
{
    return mf_error_set(err, MF_InternalError, "out of memory");
}

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static inline uint64_t get_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

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

/* memcmp order, a prefix first.  Index keys are mostly short (a type
 * byte and a number): their first 8 bytes are compared as one word. */
static inline int cmp_bytes(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    if (n >= 8) {
        uint64_t x = get_be64(a), y = get_be64(b);
        if (x != y)
            return x < y ? -1 : 1;
    }
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return (al > bl) - (al < bl);
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
            if (multikey_field(d, i))
                return 0;
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
            if (strcmp(d->paths[j], path) == 0 && single_point(c, j) && !multikey_field(d, j))
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
            if (d->sparse && pr->matches_missing)
                continue; /* the index lacks the documents it could match */
            if (pr->collatable && !same_coll)
                continue; /* its keys order strings otherwise: the matcher's */
            if (pr->neg_null && multikey_field(d, i))
                continue; /* {a: []} matches {$ne: null}, and its key is undefined */
            if (pr->key_re && (i != 0 || c->key_re != SIZE_MAX))
                continue; /* one regex, tested on the first field's keys only */
            c->strong |= !pr->negation;
            if (!c->present[i]) {
                if (mfi_oil_copy(&c->oils[i], &pr->oil) != 0)
                    goto fail;
                c->present[i] = true;
            } else if (multikey_field(d, i)) {
                continue; /* one range per multikey field, as mongod */
            } else if (mfi_oil_intersect(&c->oils[i], &pr->oil) != 0) {
                goto fail;
            }
            c->applied[p] = true;
            /* On a multikey field a key is an element's: a document with
             * one element in the bounds matches the condition, but for a
             * negation, which every element must meet. */
            c->used[p] = pr->exact && (!pr->negation || !multikey_field(d, i));
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

/* The least string above every string starting with `b` (in place);
 * false when there is none (all bytes 0xFF). */
static bool successor(mf_buf *b)
{
    while (b->len > 0 && b->data[b->len - 1] == 0xFF)
        b->len--;
    if (b->len == 0)
        return false;
    b->data[b->len - 1]++;
    return true;
}

/* Append an end point's encoding, inverted for a descending field. */
static int put_end(mf_buf *out, const mf_buf *enc, bool desc)
{
    size_t at = out->len;
    if (mf_buf_append(out, enc->data, enc->len) != 0)
        return -1;
    if (desc)
        for (size_t i = at; i < out->len; i++)
            out->data[i] = (uint8_t)~out->data[i];
    return 0;
}

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

/* A clause of a $or planned with the conditions beside the $or (mongod's
 * contained $or): the filter choose() gets is the clause's top-level
 * elements, then those conditions'.  An index serves the clause only if
 * one of the clause's own conditions bounds it; the others narrow its
 * bounds.  `answered` is cleared for each condition beside the $or that
 * its bounds do not answer exactly, so over all clauses it keeps those
 * every clause's answer. */
typedef struct or_clause {
    size_t own;     /* the clause's top-level elements: the filter's first */
    bool *answered; /* per element past those: cleared where not answered */
    size_t nbeside;
} or_clause;

/* Whether a condition from the first `own` top-level elements narrowed
 * the bounds of `c`. */
static bool bounds_own(const cand *c, size_t own)
{
    for (size_t p = 0; p < c->preds->n; p++)
        if (c->applied[p] && c->preds->v[p].top < own)
            return true;
    return false;
}

/* The other indexes choose() found usable, for decide()'s trials. */
typedef struct alternates {
    bool mixed;               /* in: the others may differ in giving the sort */
    size_t best;              /* the index chosen */
    size_t at[MAX_TRIALS - 1]; /* the others as good in kind, in catalog order */
    size_t n;
} alternates;

/* Choose among `idx` (or take the hinted `hinted` < nidx) for the query
 * `filter` under the collation `qcoll`.  `*weak` (when not NULL): the
 * chosen index is bounded by negations only.  `cl` (when not NULL): the
 * filter is a $or's clause and the conditions beside it. */
static int choose(mf_scan *s, const mf_index_desc *idx, size_t nidx, size_t hinted,
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
        bool usable = is_hint || c.present[0] || (c.sort_dir && !d->sparse);
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
    s->single = single_interval(s, NULL, NULL, NULL, NULL);
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
                strcmp(d->paths[0], key) != 0 || multikey_field(d, 0) ||
                !mf_collator_equal(d->coll, qcoll))
                continue;
            if (best == SIZE_MAX || d->nfields < idx[best].nfields)
                best = i;
        }
        bool sorted;
        int rc;
        if (best != SIZE_MAX &&
            (rc = choose(s, idx, nidx, best, filter, NULL, qcoll, &sorted, NULL, NULL, NULL, err)) != 0)
            return rc;
    }
    if (s->kind != P_IXSCAN || s->idhack || s->points || s->key_range || s->backward ||
        !s->residual || !bson_empty(s->residual) || !mf_collator_equal(s->ix.coll, qcoll))
        return 0;
    for (size_t i = 0; i < s->ix.nfields && i < 32; i++) {
        if (s->ix.multikey >> i & 1u)
            return 0;
        if (strcmp(s->ix.paths[i], key) == 0) {
            s->distinct_fields = i + 1;
            return 0;
        }
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
static size_t count_ors(const bson_t *filter)
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

static int plan_trials(mf_scan *s, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                       const bson_t *filter, const bson_t *sort, const mf_collator *coll,
                       const alternates *alts, mf_scan **or_plans, size_t *nor,
                       mf_plan_cache *cache, const bson_t *projection, mf_error *err);

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
static mf_scan *leaf_at(mf_scan *s, size_t n)
{
    for (size_t i = 0; s->kind == P_OR && i < s->nkids; i++) {
        size_t k = count_leaves(s->kids[i]);
        if (n < k)
            return leaf_at(s->kids[i], n);
        n -= k;
    }
    return s;
}

/* Which of them is running: the one that returned the row last. */
static size_t current_leaf(const mf_scan *s)
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
static int plan_or(mf_scan *s, mf_coll *c, const mf_index_desc *idx, size_t nidx,
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
        rc = choose(kids[made], idx, nidx, SIZE_MAX, &both, NULL, qcoll, &sorted, NULL, &alts, &cl,
                    err);
        /* No index serves the clause, but one of its own $ors may be an
         * OR of its own (mongod plans a contained $or in a clause so). */
        for (size_t k = 0, nk = count_ors(&both);
             rc == 0 && kids[made]->kind == P_COLLSCAN && depth < MAX_OR_DEPTH && k < nk; k++)
            if (own_or(&both, len, k))
                rc = plan_or(kids[made], c, idx, nidx, &both, qcoll, k, depth + 1, NULL, err);
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
                rc = plan_trials(kids[made], c, idx, nidx, &both, NULL, qcoll, &alts, NULL, &none,
                                 cc, NULL, err);
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

/* ------------------------------------------------------ multi-planning */

/* The plan cache: which index won the trials for a query shape (mongod's
 * PlanCache, keyed as its query shape is, without the values), and with
 * how many works.  One table for the instance, direct-mapped: a shape
 * whose slot another took is planned again.  The key covers the
 * collection's indexes, so a built or dropped index makes old entries
 * unreachable; they age out as their slots are reused. */
#define PLAN_CACHE_SLOTS 1024
#define CACHE_EVICTION_RATIO 10 /* internalQueryCacheEvictionRatio */

typedef struct cache_slot {
    uint64_t key;        /* 0: empty */
    uint64_t indexes;    /* the collection and its indexes (indexes_hash) */
    uint64_t ns_hash;    /* the collection alone (planCacheClear) */
    uint32_t query_hash; /* the shape alone: filter, sort, projection, collation */
    char index[64];
    uint64_t works;
    bool active; /* used by queries of its shape (mongod's isActive) */
    /* for $planCacheStats: the query that made it, the plan, and each
     * candidate's trial (creationExecStats) and score, best first */
    int64_t created_ms;
    bson_t *query, *sort, *projection, *plan, *creation, *scores;
} cache_slot;

struct mf_plan_cache {
    pthread_mutex_t mu;
    cache_slot slot[PLAN_CACHE_SLOTS];
};

mf_plan_cache *mf_plan_cache_new(void)
{
    mf_plan_cache *pc = calloc(1, sizeof *pc);
    if (pc)
        pthread_mutex_init(&pc->mu, NULL);
    return pc;
}

static void slot_clear(cache_slot *sl)
{
    if (sl->query)
        bson_destroy(sl->query);
    if (sl->sort)
        bson_destroy(sl->sort);
    if (sl->projection)
        bson_destroy(sl->projection);
    if (sl->plan)
        bson_destroy(sl->plan);
    if (sl->creation)
        bson_destroy(sl->creation);
    if (sl->scores)
        bson_destroy(sl->scores);
    memset(sl, 0, sizeof *sl);
}

void mf_plan_cache_free(mf_plan_cache *pc)
{
    if (!pc)
        return;
    for (size_t i = 0; i < PLAN_CACHE_SLOTS; i++)
        slot_clear(&pc->slot[i]);
    pthread_mutex_destroy(&pc->mu);
    free(pc);
}

/* The active entry of `key`: an inactive one is as none (mongod's
 * getCacheEntryIfActive). */
static bool cache_get(mf_plan_cache *pc, uint64_t key, char *index, size_t cap, uint64_t *works)
{
    pthread_mutex_lock(&pc->mu);
    const cache_slot *sl = &pc->slot[key % PLAN_CACHE_SLOTS];
    bool hit = sl->key == key && sl->active && strlen(sl->index) < cap;
    if (hit) {
        strcpy(index, sl->index);
        *works = sl->works;
    }
    pthread_mutex_unlock(&pc->mu);
    return hit;
}

/* What a new entry holds besides its key and winner. */
typedef struct cache_entry {
    uint64_t indexes, ns_hash;
    uint32_t query_hash;
    const bson_t *query, *sort, *projection; /* NULL: none */
    bson_t *plan, *creation, *scores;        /* taken */
} cache_entry;

/* Its cached plan did not finish in its budget: the entry of `key` is
 * inactive until trials make it active again (mongod's CachedPlanStage
 * deactivates it before it replans). */
static void cache_deactivate(mf_plan_cache *pc, uint64_t key)
{
    pthread_mutex_lock(&pc->mu);
    cache_slot *sl = &pc->slot[key % PLAN_CACHE_SLOTS];
    if (sl->key == key)
        sl->active = false;
    pthread_mutex_unlock(&pc->mu);
}

/* The trials' winner `index` of `key`, in `works`, as mongod's
 * getNewEntryState keeps it: a new entry is inactive; an inactive one is
 * replaced, active, by a winner of no more works, and otherwise its works
 * grow to the lesser of the winner's and twice its own
 * (internalQueryCacheWorksGrowthCoefficient); an active one is replaced
 * only by a winner of fewer works. */
static void cache_put(mf_plan_cache *pc, uint64_t key, const char *index, uint64_t works,
                      cache_entry *x)
{
    bson_t *query = NULL, *sort = NULL, *projection = NULL, *plan = x->plan;
    bson_t *creation = x->creation, *scores = x->scores;
    x->plan = x->creation = x->scores = NULL;
    if (strlen(index) >= sizeof pc->slot[0].index || !plan || !creation || !scores ||
        !(query = x->query ? bson_copy(x->query) : bson_new()) ||
        !(sort = x->sort ? bson_copy(x->sort) : bson_new()) ||
        !(projection = x->projection ? bson_copy(x->projection) : bson_new())) {
        /* not cached: planned each time */
        bson_t *made[] = {plan, creation, scores, query, sort};
        for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
            if (made[i])
                bson_destroy(made[i]);
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    pthread_mutex_lock(&pc->mu);
    cache_slot *sl = &pc->slot[key % PLAN_CACHE_SLOTS];
    bool active = false;
    if (sl->key == key) {
        if (sl->active ? works >= sl->works : works > sl->works) { /* kept */
            if (!sl->active)
                sl->works = works < 2 * sl->works ? works : 2 * sl->works;
            pthread_mutex_unlock(&pc->mu);
            bson_t *made[] = {plan, creation, scores, query, sort, projection};
            for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
                bson_destroy(made[i]);
            return;
        }
        active = true;
    }
    slot_clear(sl);
    *sl = (cache_slot){.key = key, .indexes = x->indexes, .ns_hash = x->ns_hash,
                       .query_hash = x->query_hash, .works = works, .active = active,
                       .created_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000,
                       .query = query, .sort = sort, .projection = projection, .plan = plan,
                       .creation = creation, .scores = scores};
    strcpy(sl->index, index);
    pthread_mutex_unlock(&pc->mu);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* A filter's shape: its paths, operators and nesting, not its values
 * (each value only its BSON type).  It goes into an operator document, a
 * $and/$or/$nor array and each clause of one (`clauses`). */
static uint64_t shape_of(uint64_t h, bson_iter_t *it, bool clauses)
{
    bson_iter_t sub;
    while (bson_iter_next(it)) {
        const char *k = bson_iter_key(it);
        uint8_t t = (uint8_t)bson_iter_type(it);
        h = fnv(fnv(h, k, strlen(k) + 1), &t, 1);
        bool doc = BSON_ITER_HOLDS_DOCUMENT(it);
        bool logical = BSON_ITER_HOLDS_ARRAY(it) &&
                       (strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0);
        bool ops = mfi_is_operator_doc(it, false); /* a DBRef is one value */
        if ((logical || ops || (clauses && doc)) && bson_iter_recurse(it, &sub))
            h = fnv(shape_of(h, &sub, logical), "}", 1);
    }
    return h;
}

/* A collection's name, or, with its indexes, what the plan cache keys
 * cover of it (a hidden, unhidden or finished index makes a new key, as
 * mongod clears its cache then). */
static uint64_t ns_hash(mf_coll *c)
{
    const char *ns = c ? mf_coll_name(c) : "";
    return fnv(0xcbf29ce484222325ull, ns, strlen(ns) + 1);
}

static uint64_t indexes_hash(mf_coll *c, const mf_index_desc *idx, size_t nidx)
{
    uint64_t h = ns_hash(c);
    for (size_t i = 0; i < nidx; i++) {
        h = fnv(h, idx[i].name, strlen(idx[i].name) + 1);
        h = fnv(h, &idx[i].hidden, sizeof idx[i].hidden);
        h = fnv(h, &idx[i].building, sizeof idx[i].building);
    }
    return h;
}

/* A query's shape (mongod's queryHash): the filter's paths and operators
 * without their values, the sort, the projection and the collation.  An
 * empty filter, sort or projection is none. */
static uint64_t query_shape(const bson_t *filter, const bson_t *sort, const bson_t *projection,
                            const mf_collator *coll)
{
    uint64_t h = 0xcbf29ce484222325ull;
    bson_iter_t it;
    if (filter && !bson_empty(filter) && bson_iter_init(&it, filter))
        h = shape_of(fnv(h, "f", 1), &it, false);
    if (sort && !bson_empty(sort))
        h = fnv(fnv(h, "s", 1), bson_get_data(sort), sort->len);
    if (projection && !bson_empty(projection))
        h = fnv(fnv(h, "p", 1), bson_get_data(projection), projection->len);
    if (coll) { /* the collation's spec, not the collator's address */
        bson_t spec = BSON_INITIALIZER;
        mf_collator_to_bson(coll, &spec);
        h = fnv(fnv(h, "c", 1), bson_get_data(&spec), spec.len);
        bson_destroy(&spec);
    }
    return h;
}

/* The key of a query in the plan cache (mongod's planCacheKey): its
 * collection and that collection's indexes, and its shape. */
static uint64_t cache_key(uint64_t indexes, uint64_t shape)
{
    uint64_t h = fnv(indexes, &shape, sizeof shape);
    return h ? h : 1;
}

void mf_plan_cache_clear(mf_plan_cache *pc, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                         bool one, const bson_t *filter, const bson_t *sort,
                         const bson_t *projection, const mf_collator *coll)
{
    uint64_t nh = ns_hash(c);
    uint64_t key =
        one ? cache_key(indexes_hash(c, idx, nidx), query_shape(filter, sort, projection, coll))
            : 0;
    pthread_mutex_lock(&pc->mu);
    if (one) { /* a shape has one slot */
        cache_slot *sl = &pc->slot[key % PLAN_CACHE_SLOTS];
        if (sl->key == key)
            slot_clear(sl);
    } else { /* a collection's entries may be in any */
        for (size_t i = 0; i < PLAN_CACHE_SLOTS; i++)
            if (pc->slot[i].key && pc->slot[i].ns_hash == nh)
                slot_clear(&pc->slot[i]);
    }
    pthread_mutex_unlock(&pc->mu);
}

int mf_plan_cache_stats(mf_plan_cache *pc, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                        const char *host, bson_t *out)
{
    uint64_t ih = indexes_hash(c, idx, nidx);
    uint32_t n = 0;
    bool ok = true;
    pthread_mutex_lock(&pc->mu);
    for (size_t i = 0; ok && i < PLAN_CACHE_SLOTS; i++) {
        const cache_slot *sl = &pc->slot[i];
        if (!sl->key || sl->indexes != ih) /* another collection's, or its indexes have changed */
            continue;
        char key[16], hash[16];
        const char *k;
        bson_t doc, from;
        mf_uint32_to_key(n++, &k, key, sizeof key);
        ok = bson_append_document_begin(out, k, -1, &doc) &&
             BSON_APPEND_UTF8(&doc, "version", "1");
        snprintf(hash, sizeof hash, "%08X", sl->query_hash);
        ok = ok && BSON_APPEND_UTF8(&doc, "queryHash", hash);
        snprintf(hash, sizeof hash, "%08X", (uint32_t)sl->key);
        ok = ok && BSON_APPEND_UTF8(&doc, "planCacheKey", hash) &&
             BSON_APPEND_BOOL(&doc, "isActive", sl->active) &&
             BSON_APPEND_INT64(&doc, "works", (int64_t)sl->works) &&
             BSON_APPEND_DATE_TIME(&doc, "timeOfCreation", sl->created_ms) &&
             BSON_APPEND_DOCUMENT_BEGIN(&doc, "createdFromQuery", &from) &&
             BSON_APPEND_DOCUMENT(&from, "query", sl->query) &&
             BSON_APPEND_DOCUMENT(&from, "sort", sl->sort) &&
             BSON_APPEND_DOCUMENT(&from, "projection", sl->projection) &&
             bson_append_document_end(&doc, &from) &&
             BSON_APPEND_DOCUMENT(&doc, "cachedPlan", sl->plan) &&
             BSON_APPEND_ARRAY(&doc, "creationExecStats", sl->creation) &&
             BSON_APPEND_ARRAY(&doc, "candidatePlanScores", sl->scores) &&
             BSON_APPEND_BOOL(&doc, "indexFilterSet", false) &&
             BSON_APPEND_INT64(&doc, "estimatedSizeBytes",
                               (int64_t)(sizeof *sl + sl->query->len + sl->sort->len +
                                         sl->projection->len + sl->plan->len +
                                         sl->creation->len + sl->scores->len)) &&
             BSON_APPEND_UTF8(&doc, "host", host ? host : "") &&
             bson_append_document_end(out, &doc);
    }
    pthread_mutex_unlock(&pc->mu);
    return ok ? 0 : -1;
}

/* The query's shape (queryHash) and its key in the plan cache
 * (planCacheKey), kept in `s`. */
static void hash_shape(mf_scan *s, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                       const bson_t *filter, const bson_t *sort, const bson_t *projection,
                       const mf_collator *coll)
{
    uint64_t shape = query_shape(filter, sort, projection, coll);
    s->cache_indexes = indexes_hash(c, idx, nidx);
    s->query_hash = (uint32_t)shape;
    s->shape = cache_key(s->cache_indexes, shape);
}

bool mf_scan_hashes(const mf_scan *s, uint32_t *query_hash, uint32_t *plan_cache_key)
{
    *query_hash = s->query_hash;
    *plan_cache_key = (uint32_t)s->shape;
    return s->shape != 0;
}

/* The plan of index `at` alone (as hinted), unrun. */
static int plan_of(const mf_index_desc *idx, size_t nidx, size_t at, const bson_t *filter,
                   const bson_t *sort, const mf_collator *coll, mf_scan **out, mf_error *err)
{
    mf_scan *p = calloc(1, sizeof *p);
    bool sorted;
    int rc = 0;
    if (!p)
        return oom(err);
    if (filter && !bson_empty(filter) && !(p->filter = bson_copy(filter)))
        rc = oom(err);
    if (rc == 0)
        rc = choose(p, idx, nidx, at, filter, sort, coll, &sorted, NULL, NULL, NULL, err);
    if (rc == 0 && p->kind != P_IXSCAN)
        rc = mf_error_set(err, MF_InternalError, "index '%s' gave no index scan", idx[at].name);
    if (rc) {
        mf_scan_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* What the plan cache calls a trial's plan: its index, or its $or's
 * ("$or", "$or1", ... in find_or's order). */
static const char *trial_name(const mf_scan *t)
{
    return t->kind == P_OR ? t->or_name : t->ix.name;
}

/* Trial k of `s`: 0 is `s` itself. */
static inline mf_scan *trial(mf_scan *s, size_t k)
{
    return k == 0 ? s : s->trials[k];
}

/* `s`, planned on choose()'s best index, is the first trial; each
 * alternative gets a plan, and the OR plans (`nor` of them, taken) are
 * the last; the cached winner of its shape, if any, is the probe. */
/* Each clause of an OR (nested ORs' too) with trials of its own reports
 * the index they choose itself, through `chosen`. */
static void clauses_report(mf_scan *t, void (*chosen)(void *, mf_coll *, const char *),
                           void *arg)
{
    for (size_t i = 0; t->kind == P_OR && i < t->nkids; i++) {
        mf_scan *k = t->kids[i];
        if (k->ntrials) {
            k->chosen = chosen;
            k->chosen_arg = arg;
        }
        clauses_report(k, chosen, arg);
    }
}

/* Report the index `s` reads (an OR: each clause's, but for the clauses
 * that report their own). */
static void report_chosen(const mf_scan *s, mf_coll *c,
                          void (*chosen)(void *, mf_coll *, const char *), void *arg)
{
    if (s->kind != P_OR) {
        chosen(arg, c, s->ix.name);
        return;
    }
    for (size_t i = 0; i < s->nkids; i++)
        if (s->kids[i]->kind == P_OR || !s->kids[i]->chosen)
            report_chosen(s->kids[i], c, chosen, arg);
}

static int plan_trials(mf_scan *s, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                       const bson_t *filter, const bson_t *sort, const mf_collator *coll,
                       const alternates *alts, mf_scan **or_plans, size_t *nor,
                       mf_plan_cache *cache, const bson_t *projection, mf_error *err)
{
    size_t n = alts->n + 1 + *nor;
    if (!(s->trials = calloc(n, sizeof *s->trials)))
        return oom(err);
    s->ntrials = n;
    for (size_t i = 0; i < *nor; i++) {
        s->trials[alts->n + 1 + i] = or_plans[i];
        s->blocking_trials |= s->sorted; /* an OR gives no sort */
    }
    *nor = 0;
    s->trial_results = TRIAL_RESULTS;
    s->probe = -1;
    for (size_t k = 1; k <= alts->n; k++) { /* trials[0] is `s` itself */
        int rc = plan_of(idx, nidx, alts->at[k - 1], filter, sort, coll, &s->trials[k], err);
        if (rc)
            return rc;
        s->blocking_trials |= s->trials[k]->sorted != s->sorted;
    }
    if ((s->blocking_trials || cache) && sort && !bson_empty(sort) && !(s->sort = bson_copy(sort)))
        return oom(err);
    char index[64];
    uint64_t works;
    if ((s->cache = cache) != NULL) {
        hash_shape(s, c, idx, nidx, filter, sort, projection, coll);
        if (projection && !bson_empty(projection) && !(s->projection = bson_copy(projection)))
            return oom(err);
        if (cache_get(cache, s->shape, index, sizeof index, &works))
            for (size_t k = 0; k < n && s->probe < 0; k++)
                if (strcmp(trial_name(trial(s, k)), index) == 0) {
                    s->probe = (int)k;
                    s->probe_works = CACHE_EVICTION_RATIO * (works ? works : 1);
                }
    }
    return 0;
}

static void free_plans(mf_scan **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        mf_scan_free(v[i]);
    free(v);
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
    if (rc == 0 && x->explain) {
        (*out)->explain = true;
        if (!(*out)->shape)
            hash_shape(*out, c, idx, nidx, filter, sort, x->projection, coll);
    }
    return rc;
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
static bson_t *canonical_ors(const bson_t *filter)
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
    for (int pass = 0; filter && pass < 4 && (next = canonical_ors(canon ? canon : filter));
         pass++) {
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
    size_t hinted = SIZE_MAX;
    mf_index_desc id = {0};
    *sorted = false;
    if (!s)
        return oom(err);
    if (filter && !bson_empty(filter) && !(s->filter = bson_copy(filter))) {
        rc = oom(err);
        goto fail;
    }
    if (hint && hint_is_empty(hint))
        hint = NULL;
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
        mf_index_desc_clear(&id);
        *out = s;
        return 0;
    }
    bool weak = false;
    alternates alts = {.mixed = x->sort_trials && sort && !bson_empty(sort)};
    rc = choose(s, idx, nidx, hinted, filter, sort, coll, sorted, &weak, &alts, NULL, err);
    size_t nors = count_ors(filter), taken = SIZE_MAX; /* the $or `s` serves */
    /* No index serves the rest: the first $or that indexes serve. */
    for (size_t nth = 0; rc == 0 && s->kind == P_COLLSCAN && hinted == SIZE_MAX && nth < nors;
         nth++)
        if ((rc = plan_or(s, c, idx, nidx, filter, coll, nth, 0, x->cache, err)) == 0 &&
            s->kind == P_OR)
            taken = nth;
    /* An index only negations bound reads nearly every key: an OR plan,
     * if the filter has one, reads fewer (mongod's trial runs pick it). */
    if (rc == 0 && s->kind == P_IXSCAN && weak && !*sorted && hinted == SIZE_MAX && nors) {
        mf_scan *o = calloc(1, sizeof *o);
        for (size_t nth = 0; o && rc == 0 && o->kind != P_OR && nth < nors; nth++)
            if ((rc = plan_or(o, c, idx, nidx, filter, coll, nth, 0, x->cache, err)) == 0 &&
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
            } else if ((rc = plan_or(o, c, idx, nidx, filter, coll, nth, 0, x->cache, err)) != 0 ||
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
        rc = plan_trials(s, c, idx, nidx, filter, sort, coll, &alts, or_plans, &nor, x->cache,
                         x->projection, err);
    for (size_t i = 0; i < nor; i++) /* not taken */
        mf_scan_free(or_plans[i]);
    if (rc == 0 && s->ntrials) {
        s->chosen = x->chosen;
        s->chosen_arg = x->chosen_arg;
    }
    for (size_t k = 0; rc == 0 && k < (s->ntrials ? s->ntrials : 1); k++)
        clauses_report(trial(s, k), x->chosen, x->chosen_arg);
    if (rc)
        goto fail;
    s->sorted = *sorted;
    mf_index_desc_clear(&id);
    *out = s;
    return 0;
fail:
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
    mf_buf_free(&s->last);
    for (size_t i = 0; i < s->nkids; i++)
        mf_scan_free(s->kids[i]);
    free(s->kids);
    free_plans(s->trials, s->ntrials);
    free_plans(s->rejected, s->nrejected);
    if (s->all_plans)
        bson_destroy(s->all_plans);
    free(s->replay);
    mf_buf_free(&s->replay_keys);
    free(s);
}

const char *mf_scan_describe(const mf_scan *s)
{
    if (s->kind == P_COLLSCAN)
        return "COLLSCAN";
    if (s->kind == P_OR)
        return "OR";
    return s->idhack ? "IDHACK" : s->distinct_fields ? "DISTINCT_SCAN" : "IXSCAN";
}

/* One leaf of the summary, appended at `*n` of `out`. */
static void summary_leaf(const mf_scan *s, char *out, size_t cap, size_t *n)
{
    char key[200];
    const char *stage = s->kind == P_COLLSCAN ? "COLLSCAN"
                        : s->idhack           ? "IDHACK"
                        : s->count_scan       ? "COUNT_SCAN"
                        : s->distinct_fields  ? "DISTINCT_SCAN"
                                              : "IXSCAN";
    key[0] = 0;
    if (s->kind == P_IXSCAN && !s->idhack && s->ix.key)
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

bool mf_scan_eof(const mf_scan *s)
{
    return s->eof && s->replayed == s->nreplay;
}

/* The index key of the row an index scan returned last, or false. */
static bool last_key(const mf_scan *s, const uint8_t **k, size_t *kl)
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
    if (!last_key(s, &k, &kl))
        return 0;
    /* the clause that returned the row (a replayed row: its trial's) */
    while (s->kind == P_OR)
        s = s->row_key ? leaf_at((mf_scan *)s, s->row_kid) : s->kids[s->kid];
    mf_index_desc d = {.nfields = s->ix.nfields, .paths = s->ix.paths, .desc = s->ix.desc,
                       .coll = s->ix.coll};
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

static int64_t millis(const mf_scan *s)
{
    return (int64_t)(s->stats.time_ns / 1000000u);
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

static bool keys_answer(const mf_scan *s);

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
    bson_append_document_begin(out, "multiKeyPaths", -1, &mkp);
    for (size_t i = 0; i < s->ix.nfields; i++) {
        bson_append_array_begin(&mkp, s->ix.paths[i], -1, &arr);
        /* Only a bit per field is known: the whole path stands for it. */
        if (i < 32 && (s->ix.multikey >> i & 1u))
            bson_append_utf8(&arr, "0", 1, s->ix.paths[i], -1);
        bson_append_array_end(&mkp, &arr);
    }
    bson_append_document_end(out, &mkp);
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
    single_interval(s, &start, &si, &end, &ei);
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
    bson_t sub, or, arr, kid;
    bson_t *fetch = out;
    char key[24];
    uint64_t works = s->stats.works;
    if (s->rooted) {
        BSON_APPEND_UTF8(out, "stage", "SUBPLAN");
        if (stats)
            put_common(s, out, s->stats.n_returned, works);
        bson_append_document_begin(out, "inputStage", -1, &sub);
        fetch = &sub;
    }
    BSON_APPEND_UTF8(fetch, "stage", "FETCH");
    if (s->residual && !bson_empty(s->residual))
        BSON_APPEND_DOCUMENT(fetch, "filter", s->residual);
    if (stats) {
        put_common(s, fetch, s->stats.n_returned, works);
        BSON_APPEND_INT32(fetch, "docsExamined", (int32_t)s->stats.docs_examined);
        BSON_APPEND_INT32(fetch, "alreadyHasObj", 0);
    }
    bson_append_document_begin(fetch, "inputStage", -1, &or);
    BSON_APPEND_UTF8(&or, "stage", "OR");
    if (stats) {
        put_common(s, &or, s->stats.n_returned, works);
        BSON_APPEND_INT32(&or, "dupsTested", (int32_t)s->stats.dups_tested);
        BSON_APPEND_INT32(&or, "dupsDropped", (int32_t)s->stats.dups_dropped);
    }
    bson_append_array_begin(&or, "inputStages", -1, &arr);
    for (size_t i = 0; i < s->nkids; i++) {
        const mf_scan *k = s->kids[i];
        snprintf(key, sizeof key, "%zu", i);
        bson_append_document_begin(&arr, key, -1, &kid);
        if (k->kind == P_IXSCAN && k->residual && bson_empty(k->residual)) /* an IDHACK too */
            put_ixscan(k, stats, &kid);
        else
            mf_scan_explain(k, stats, &kid);
        bson_append_document_end(&arr, &kid);
    }
    bson_append_array_end(&or, &arr);
    bson_append_document_end(fetch, &or);
    if (s->rooted)
        bson_append_document_end(out, &sub);
}

int mf_scan_explain(const mf_scan *s, bool stats, bson_t *out)
{
    uint64_t works = s->stats.works;
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

/* --------------------------------------------------------------- scanning */

/* Whether `rid` was returned before (and remember it if not). */
static int seen_before(mf_scan *s, uint64_t rid, bool *dup, mf_error *err)
{
    uint64_t v = rid + 1;
    if ((s->nseen + 1) * 2 > s->seen_cap) {
        size_t cap = s->seen_cap ? s->seen_cap * 2 : 64;
        uint64_t *t = calloc(cap, sizeof *t);
        if (!t)
            return oom(err);
        for (size_t i = 0; i < s->seen_cap; i++) {
            if (!s->seen[i])
                continue;
            size_t h = (size_t)(s->seen[i] * 0x9E3779B97F4A7C15ull) & (cap - 1);
            while (t[h])
                h = (h + 1) & (cap - 1);
            t[h] = s->seen[i];
        }
        free(s->seen);
        s->seen = t;
        s->seen_cap = cap;
    }
    size_t h = (size_t)(v * 0x9E3779B97F4A7C15ull) & (s->seen_cap - 1);
    while (s->seen[h]) {
        if (s->seen[h] == v) {
            *dup = true;
            return 0;
        }
        h = (h + 1) & (s->seen_cap - 1);
    }
    s->seen[h] = v;
    s->nseen++;
    *dup = false;
    return 0;
}

/* Counting, with bounds that answer the whole filter: index keys alone
 * answer, no record is read. */
static bool keys_answer(const mf_scan *s)
{
    return s->count_only && s->residual && bson_empty(s->residual);
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
            rc = step(s, valid, err);
    }
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

static int scan_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m,
                     mf_scan_row *row, bool *valid, mf_error *err)
{
    int rc;
    *valid = false;
    if (s->eof)
        return 0;
    if (s->kind == P_OR)
        return or_next(s, e, c, m, row, valid, err);
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
static bool single_interval(const mf_scan *s, bson_t *start, bool *start_incl, bson_t *end,
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
    if (s->kind == P_OR)
        return; /* each clause's keys would answer only their clause */
    s->count_only = on;
    /* mongod's COUNT_SCAN counts keys: never over a multikey index, where
     * a document may have several (here, keys answer through the
     * RecordId set, under an IXSCAN) */
    s->count_scan = on && s->kind == P_IXSCAN && !s->idhack && !s->key_re && !s->ix.multikey &&
                    keys_answer(s) && single_interval(s, NULL, NULL, NULL, NULL);
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

/* What a trial has done so far (run_trials, decide). */
typedef struct trial_run {
    uint64_t advanced; /* rows its scan returned: their record ids in `rows` */
    uint64_t *rows;
    size_t cap;
    mf_buf keys;       /* their index keys, each after its 4-byte length and
                          the byte of its OR clause */
    uint64_t out;      /* rows its plan returned: `advanced`, or, below a
                          blocking sort, those the sort has given */
    uint64_t sort_works; /* the works of that sort's output */
    bool finished;     /* its plan reached its end */
} trial_run;

/* A trial's plan as explain shows it, below a blocking SORT by `sort`
 * when that is not NULL: with its run `r`, with the counters the trial
 * left (the scan's own, and the SORT's from `r`); without, none.  Returns
 * 0, or -1 (out of memory). */
static int explain_trial(const mf_scan *t, const bson_t *sort, const trial_run *r, bson_t *out)
{
    if (!sort)
        return mf_scan_explain(t, r != NULL, out);
    bson_t in = BSON_INITIALIZER;
    bool ok = mf_scan_explain(t, r != NULL, &in) == 0 && BSON_APPEND_UTF8(out, "stage", "SORT");
    if (ok && r)
        ok = BSON_APPEND_INT32(out, "nReturned", (int32_t)r->out) &&
             BSON_APPEND_INT32(out, "works", (int32_t)(t->stats.works + r->sort_works)) &&
             BSON_APPEND_INT32(out, "advanced", (int32_t)r->out) &&
             BSON_APPEND_BOOL(out, "isEOF", r->finished);
    ok = ok && BSON_APPEND_DOCUMENT(out, "sortPattern", sort) &&
         BSON_APPEND_INT32(out, "memLimit", 104857600) && BSON_APPEND_UTF8(out, "type", "simple") &&
         BSON_APPEND_DOCUMENT(out, "inputStage", &in);
    bson_destroy(&in);
    return ok ? 0 : -1;
}

/* Whether trial `t` of `s` has a blocking sort above it. */
static bool blocking(const mf_scan *s, const mf_scan *t)
{
    return s->blocking_trials && !t->sorted;
}

/* One work of trial `t` (its state `r`): a row of its scan, or, once a
 * blocking sort above it has all its input, one of the sort's rows. */
static int trial_work(mf_scan *s, mf_scan *t, trial_run *r, mf_engine *e, mf_coll *c,
                      const mf_matcher *m, mf_error *err)
{
    bool blocked = blocking(s, t);
    if (blocked && t->eof) {
        r->sort_works++;
        r->out++;
        r->finished = r->out >= r->advanced;
        return 0;
    }
    mf_scan_row row;
    bool valid;
    t->work_cap = t->stats.works + 1;
    int rc = scan_next(t, e, c, m, &row, &valid, err);
    if (rc == 0 && valid) {
        if (r->advanced == r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 128;
            uint64_t *v = realloc(r->rows, cap * sizeof *v);
            if (!v)
                return oom(err);
            r->rows = v;
            r->cap = cap;
        }
        r->rows[r->advanced++] = row.rid;
        const uint8_t *key;
        size_t kl;
        if (!last_key(t, &key, &kl))
            kl = 0;
        uint8_t len[5] = {(uint8_t)kl, (uint8_t)(kl >> 8), (uint8_t)(kl >> 16),
                          (uint8_t)(kl >> 24), (uint8_t)current_leaf(t)};
        if (mf_buf_append(&r->keys, len, 5) != 0 ||
            (kl && mf_buf_append(&r->keys, key, kl) != 0))
            return oom(err);
    }
    if (!blocked)
        r->out = r->advanced;
    /* a sort of nothing ends with its input */
    r->finished = t->eof && (!blocked || r->advanced == 0);
    return rc;
}

/* Trials work in rounds, each plan once a round (`only` >= 0: that plan
 * alone), until one reaches its end or returns trial_results rows
 * (`*done`), or each has done `budget` works. */
static int run_trials(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m, int only,
                      uint64_t budget, trial_run *runs, bool *done, mf_error *err)
{
    bool worked = true;
    int rc = 0;
    *done = false;
    while (rc == 0 && !*done && worked) {
        worked = false;
        /* a plan that ends the trial does not deny the later ones their turn */
        for (size_t k = 0; k < s->ntrials && rc == 0; k++) {
            mf_scan *t = trial(s, k);
            trial_run *r = &runs[k];
            if ((only >= 0 && k != (size_t)only) || r->finished ||
                t->stats.works + r->sort_works >= budget)
                continue;
            worked = true;
            rc = trial_work(s, t, r, e, c, m, err);
            *done |= r->finished || r->out >= s->trial_results;
        }
    }
    return rc;
}

/* Whether trial `t`'s plan reads records (has a FETCH): an OR, or an
 * index scan whose keys do not answer. */
static bool fetches(const mf_scan *t)
{
    return t->kind == P_OR || (t->kind == P_IXSCAN && !keys_answer(t));
}

/* mongod's PlanRanker score of trial `t` (its state `r`): 1, plus the
 * rows its plan returned per work, plus, to break ties, a small epsilon
 * for each of no FETCH, no blocking SORT and no index intersection (there
 * is none here), plus 1 when it reached its end in the trial. */
static double trial_score(const mf_scan *s, const mf_scan *t, const trial_run *r)
{
    uint64_t works = t->stats.works + r->sort_works;
    double w = (double)(works ? works : 1);
    double eps = 1.0 / (10.0 * w) < 1e-4 ? 1.0 / (10.0 * w) : 1e-4;
    return 1.0 + (double)r->out / w + (fetches(t) ? 0 : eps) + (blocking(s, t) ? 0 : eps) + eps +
           (r->finished ? 1.0 : 0.0);
}

/* Trial `t`'s entry of allPlansExecution (with its `score`) or of
 * $planCacheStats' creationExecStats (without): its plan's counters as
 * the trial left them, below a blocking SORT's when it has one.  Returns
 * 0, or -1 (out of memory). */
static int trial_stats(const mf_scan *s, mf_scan *t, const trial_run *r, const double *score,
                       bson_t *out)
{
    bson_t st = BSON_INITIALIZER;
    uint64_t was = t->stats.n_returned;
    t->stats.n_returned = r->advanced; /* a trial's rows are counted in `r` */
    bool ok = explain_trial(t, blocking(s, t) ? s->sort : NULL, r, &st) == 0;
    t->stats.n_returned = was;
    ok = ok && BSON_APPEND_INT64(out, "nReturned", (int64_t)r->out) &&
         BSON_APPEND_INT64(out, "executionTimeMillisEstimate", millis(t)) &&
         BSON_APPEND_INT64(out, "totalKeysExamined", (int64_t)t->stats.keys_examined) &&
         BSON_APPEND_INT64(out, "totalDocsExamined", (int64_t)t->stats.docs_examined) &&
         (!score || BSON_APPEND_DOUBLE(out, "score", *score)) &&
         BSON_APPEND_DOCUMENT(out, "executionStages", &st);
    bson_destroy(&st);
    return ok ? 0 : -1;
}

/* The trials' record, scored (`score`, `win` the winner): for explain
 * (`*all`: allPlansExecution, the winner's first, then the others in
 * trial order, as rejectedPlans lists them) and for the plan cache
 * (`*creation` and `*scores`: creationExecStats and candidatePlanScores,
 * best first, an earlier trial before a later of the same score).  Each
 * is left NULL when not asked for, or when out of memory. */
static void trials_record(mf_scan *s, const trial_run *runs, const double *score, size_t win,
                          bson_t **all, bson_t **creation, bson_t **scores)
{
    size_t n = s->ntrials, order[MAX_TRIALS], at = 0;
    char key[24];
    bool ok = true;
    if (all && (*all = bson_new()) != NULL) {
        for (size_t k = 0; ok && k < n; k++) {
            size_t j = k == 0 ? win : k <= win ? k - 1 : k;
            bson_t doc;
            snprintf(key, sizeof key, "%zu", k);
            ok = BSON_APPEND_DOCUMENT_BEGIN(*all, key, &doc) &&
                 trial_stats(s, trial(s, j), &runs[j], &score[j], &doc) == 0 &&
                 bson_append_document_end(*all, &doc);
        }
        if (!ok) {
            bson_destroy(*all);
            *all = NULL;
        }
    }
    if (!creation)
        return;
    for (size_t k = 0; k < n; k++) { /* insertion: stable */
        size_t i = at++;
        while (i > 0 && score[order[i - 1]] < score[k]) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = k;
    }
    *creation = bson_new();
    *scores = bson_new();
    ok = *creation && *scores;
    for (size_t i = 0; ok && i < n; i++) {
        bson_t doc;
        snprintf(key, sizeof key, "%zu", i);
        ok = BSON_APPEND_DOCUMENT_BEGIN(*creation, key, &doc) &&
             trial_stats(s, trial(s, order[i]), &runs[order[i]], NULL, &doc) == 0 &&
             bson_append_document_end(*creation, &doc) &&
             BSON_APPEND_DOUBLE(*scores, key, score[order[i]]);
    }
    if (!ok) { /* cache_put keeps nothing without them */
        if (*creation)
            bson_destroy(*creation);
        if (*scores)
            bson_destroy(*scores);
        *creation = *scores = NULL;
    }
}

/* Choose among the trials (mongod's MultiPlanStage and PlanRanker): the
 * one of the highest score (trial_score), the earlier at a tie
 * (choose()'s pick first).  With a cached winner, it runs alone first
 * (mongod's CachedPlanStage).  `s` becomes the winner's trial, which goes
 * on from where it stopped after returning its trial's rows again
 * (`replay`). */
static int decide(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m, mf_error *err)
{
    size_t n = s->ntrials, win = 0;
    trial_run runs[MAX_TRIALS];
    double score[MAX_TRIALS];
    bson_t *all_plans = NULL;
    bool done = false, all = true;
    int rc = 0;
    memset(runs, 0, sizeof runs);
    for (size_t k = 0; k < n; k++) { /* as the caller set up `s` */
        mf_scan_want_pos(trial(s, k), s->want_pos);
        mf_scan_count_only(trial(s, k), s->count_only);
    }
    if (s->probe >= 0) {
        win = (size_t)s->probe;
        rc = run_trials(s, e, c, m, s->probe, s->probe_works, runs, &done, err);
        all = !done; /* not finished within its budget: plan again */
        if (rc == 0 && all && s->cache)
            cache_deactivate(s->cache, s->shape);
    }
    if (rc == 0 && all) {
        rc = run_trials(s, e, c, m, -1, TRIAL_WORKS, runs, &done, err);
        win = 0;
        score[0] = trial_score(s, trial(s, 0), &runs[0]);
        for (size_t k = 1; k < n; k++) {
            score[k] = trial_score(s, trial(s, k), &runs[k]);
            if (score[k] > score[win])
                win = k;
        }
        if (rc == 0 && s->explain)
            trials_record(s, runs, score, win, &all_plans, NULL, NULL);
        if (rc == 0 && s->cache) {
            const mf_scan *w = trial(s, win);
            cache_entry x = {.indexes = s->cache_indexes, .ns_hash = ns_hash(c),
                             .query_hash = s->query_hash, .query = s->filter, .sort = s->sort,
                             .projection = s->projection, .plan = bson_new()};
            if (x.plan && explain_trial(w, blocking(s, w) ? s->sort : NULL, NULL, x.plan) != 0) {
                bson_destroy(x.plan);
                x.plan = NULL;
            }
            trials_record(s, runs, score, win, NULL, &x.creation, &x.scores);
            cache_put(s->cache, s->shape, trial_name(w), w->stats.works + runs[win].sort_works,
                      &x);
        }
    }
    trial_run won = runs[win];
    runs[win] = (trial_run){0};
    for (size_t k = 0; k < n; k++) {
        free(runs[k].rows);
        mf_buf_free(&runs[k].keys);
    }
    if (rc) {
        free(won.rows);
        mf_buf_free(&won.keys);
        if (all_plans)
            bson_destroy(all_plans);
        return rc;
    }
    /* `s` becomes trials[win] (what `s` was takes its slot, a loser);
     * the trials themselves stay with `s` until they are the losers */
    mf_scan **trials = s->trials;
    void (*chosen)(void *, mf_coll *, const char *) = s->chosen;
    void *chosen_arg = s->chosen_arg;
    bool blocking_trials = s->blocking_trials;
    bson_t *sort = s->sort;
    s->trials = NULL;
    s->ntrials = 0;
    s->sort = NULL;
    if (win > 0) {
        mf_scan old = *s;
        *s = *trials[win];
        *trials[win] = old;
        /* what is the query's, not its plan's, stays */
        s->timed = old.timed;
        s->deadline = old.deadline;
        s->chosen = old.chosen;
        s->chosen_arg = old.chosen_arg;
        s->explain = old.explain;
        s->shape = old.shape;
        s->cache_indexes = old.cache_indexes;
        s->query_hash = old.query_hash;
        s->cache = NULL;
    }
    s->all_plans = all_plans;
    s->sort = sort;
    s->blocking_trials = blocking_trials;
    /* the caller counts the use of the index chosen (an OR's: each) */
    if (chosen)
        report_chosen(s, c, chosen, chosen_arg);
    s->work_cap = 0;
    s->replay = won.rows;
    s->nreplay = won.advanced;
    s->replayed = 0;
    s->replay_keys = won.keys;
    s->replay_key_at = 0;
    trials[0] = win > 0 ? trials[win] : NULL; /* choose()'s plan, if it lost */
    if (win > 0)
        trials[win] = NULL;
    if (n > 1 && (s->rejected = calloc(n - 1, sizeof *s->rejected)) != NULL) {
        for (size_t k = 0; k < n; k++)
            if (trials[k]) {
                s->rejected[s->nrejected++] = trials[k];
                trials[k] = NULL;
            }
    }
    free_plans(trials, n);
    return 0;
}

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

void mf_scan_trial_results(mf_scan *s, uint64_t n)
{
    if (n > 0 && n < TRIAL_RESULTS && s->ntrials)
        s->trial_results = n;
}

bool mf_scan_undecided(const mf_scan *s)
{
    return s->ntrials > 0;
}

bool mf_scan_sort_undecided(const mf_scan *s)
{
    return s->ntrials > 0 && s->blocking_trials;
}

bool mf_scan_sorted(const mf_scan *s)
{
    return s->sorted;
}

int mf_scan_decide(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m, mf_error *err)
{
    int rc = s->ntrials ? decide(s, e, c, m, err) : 0;
    for (size_t i = 0; rc == 0 && s->kind == P_OR && i < s->nkids; i++) /* each clause's */
        rc = mf_scan_decide(s->kids[i], e, c, m, err);
    return rc;
}

int mf_scan_explain_all_plans(const mf_scan *s, bson_t *arr)
{
    bson_iter_t it;
    if (!s->all_plans || !bson_iter_init(&it, s->all_plans))
        return 0;
    while (bson_iter_next(&it))
        if (!mf_bsonx_append_iter(arr, bson_iter_key(&it), -1, &it))
            return -1;
    return 0;
}

int mf_scan_explain_rejected(const mf_scan *s, bson_t *arr)
{
    /* Undecided (no data to try them on: the planner's test hook), the
     * alternatives are the plans not chosen. */
    mf_scan *const *v = s->ntrials ? s->trials + 1 : s->rejected;
    size_t n = s->ntrials ? s->ntrials - 1 : s->nrejected;
    char key[24];
    for (size_t i = 0; i < n; i++) {
        bson_t doc = BSON_INITIALIZER;
        bool sorts = blocking(s, v[i]);
        bool ok = explain_trial(v[i], sorts ? s->sort : NULL, NULL, &doc) == 0;
        snprintf(key, sizeof key, "%zu", i);
        ok = ok && BSON_APPEND_DOCUMENT(arr, key, &doc);
        bson_destroy(&doc);
        if (!ok)
            return -1;
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

static MF_ALWAYS_INLINE int scan_next_counted(mf_scan *s, mf_engine *e, mf_coll *c,
                                              const mf_matcher *m, mf_scan_row *row,
                                              bool *valid, mf_error *err)
{
    int rc = s->ntrials ? decide(s, e, c, m, err) : 0;
    *valid = false;
    if (rc == 0 && s->nreplay)
        rc = replay_next(s, e, c, m, row, valid, err);
    if (rc == 0 && !*valid)
        rc = scan_next(s, e, c, m, row, valid, err);
    if (rc == 0 && *valid)
        s->stats.n_returned++;
    return rc;
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
