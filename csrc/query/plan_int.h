/*
 * plan_int.h -- what the files of the planner and its scans share, and
 * nobody else sees: the scan object, the helpers their loops inline, and
 * the functions one file calls in another.
 *
 *   plan.c          the planner: candidate indexes, key ranges, choose(),
 *                   min/max, distinct, mf_scan_new; the design is in its head
 *   plan_or.c       OR plans over a $or's clauses, and the canonical $or
 *   plan_cache.c    the plan cache and the query shapes that key it
 *   plan_trial.c    multi-planning: the candidates' trials and the winner
 *   plan_exec.c     the scans themselves: collection, index, points, OR
 *   plan_explain.c  explain's stages of a plan
 *
 * Types and inline helpers keep the short names they had as statics of
 * one file: only these files include this header.  Functions shared
 * across them are mfi_plan_*.
 */
#ifndef MF_QUERY_PLAN_INT_H
#define MF_QUERY_PLAN_INT_H

#include "query_int.h"

#include <string.h>

/* ---------------------------------------------------- the scan object */

typedef enum { P_COLLSCAN, P_IXSCAN, P_OR, P_TEXT, P_NEAR } plan_kind;

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
    uint32_t hashed;   /* bit i: field i is "hashed" */
    uint32_t geo;      /* bit i: field i is "2dsphere" or "2d" */
    const mf_index_type *type; /* its kind (index_type.c's static table) */
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
    bool tail;         /* mf_scan_tail: a tailable cursor's collection scan */
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
    /* a transaction's read view (mf_scan_extra.view), or NULL; with it
     * the RecordIds the trees gave (+1, 0 a free slot), and the view's
     * own documents once the trees' rows are done */
    const mf_read_view *view;
    struct {
        uint64_t *seen;
        size_t nseen, seen_cap;
        bool tree_done;
        struct mfi_view_row *rows;
        size_t nrows, caprows, next;
    } vs;
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
    struct mfi_text_scan *text; /* P_TEXT: a $text query's (plan_text.c) */
    struct mfi_near_scan *near; /* P_NEAR: a $near query's (plan_near.c) */
};

/* ------------------------------------------------------------ helpers */

/* Inline in every file that uses them: some run once per index entry. */

static inline int oom(mf_error *err)
{
    return mf_error_oom(err);
}

static inline void put_be64(uint8_t *p, uint64_t v)
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

/* The least string above every string starting with `b` (in place);
 * false when there is none (all bytes 0xFF). */
static inline bool successor(mf_buf *b)
{
    while (b->len > 0 && b->data[b->len - 1] == 0xFF)
        b->len--;
    if (b->len == 0)
        return false;
    b->data[b->len - 1]++;
    return true;
}

/* Append an end point's encoding, inverted for a descending field. */
static inline int put_end(mf_buf *out, const mf_buf *enc, bool desc)
{
    size_t at = out->len;
    if (mf_buf_append(out, enc->data, enc->len) != 0)
        return -1;
    if (desc)
        for (size_t i = at; i < out->len; i++)
            out->data[i] = (uint8_t)~out->data[i];
    return 0;
}

/* Counting, with bounds that answer the whole filter: index keys alone
 * answer, no record is read. */
static inline bool keys_answer(const mf_scan *s)
{
    return s->count_only && s->residual && bson_empty(s->residual);
}

static inline int64_t millis(const mf_scan *s)
{
    return (int64_t)(s->stats.time_ns / 1000000u);
}

/* Trial k of `s`: 0 is `s` itself. */
static inline mf_scan *trial(mf_scan *s, size_t k)
{
    return k == 0 ? s : s->trials[k];
}

/* ------------------------------------------------------ plan.c */

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

/* The other indexes choose() found usable, for decide()'s trials. */
typedef struct alternates {
    bool mixed;               /* in: the others may differ in giving the sort */
    size_t best;              /* the index chosen */
    size_t at[MAX_TRIALS - 1]; /* the others as good in kind, in catalog order */
    size_t n;
} alternates;

/* Choose among `idx` (or take the hinted `hinted` < nidx) for the query
 * `filter` under the collation `qcoll`, making `s` a collection or index
 * scan (plan.c has the whole contract). */
int mfi_plan_choose(mf_scan *s, const mf_index_desc *idx, size_t nidx, size_t hinted,
                    const bson_t *filter, const bson_t *sort, const mf_collator *qcoll,
                    bool *sorted, bool *weak, alternates *alts, or_clause *cl, mf_error *err);
/* The scan's bounds as one interval of keys (mongod's isSingleInterval);
 * with `start`/`end`, its start and end keys. */
bool mfi_plan_single_interval(const mf_scan *s, bson_t *start, bool *start_incl, bson_t *end,
                              bool *end_incl);

/* ---------------------------------------------------- plan_or.c */

/* Make `s` an OR of index scans over the clauses of the `nth` $or of
 * `filter`, when an index serves each; `s` is left as it was otherwise. */
int mfi_plan_or(mf_scan *s, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                const bson_t *filter, const mf_collator *qcoll, size_t nth, int depth,
                mf_plan_cache *cache, mf_error *err);
/* How many $ors an OR plan may serve in `filter`. */
size_t mfi_plan_count_ors(const bson_t *filter);
/* `filter` with its $ors in mongod's canonical form, or NULL: as it is. */
bson_t *mfi_plan_canonical_ors(const bson_t *filter);
/* The `n`th index scan of an OR's tree (depth first), and the one running. */
mf_scan *mfi_plan_leaf_at(mf_scan *s, size_t n);
size_t mfi_plan_current_leaf(const mf_scan *s);

/* ------------------------------------------------- plan_cache.c */

#define CACHE_EVICTION_RATIO 10 /* internalQueryCacheEvictionRatio */

/* What a new entry holds besides its key and winner. */
typedef struct cache_entry {
    uint64_t indexes, ns_hash;
    uint32_t query_hash;
    const bson_t *query, *sort, *projection; /* NULL: none */
    bson_t *plan, *creation, *scores;        /* taken */
} cache_entry;

/* The active entry of `key` in the cache: its winner's name and works. */
bool mfi_plan_cache_get(mf_plan_cache *pc, uint64_t key, char *index, size_t cap,
                        uint64_t *works);
/* The entry of `key` is inactive until trials make it active again. */
void mfi_plan_cache_deactivate(mf_plan_cache *pc, uint64_t key);
/* The trials' winner `index` of `key`, in `works` (`x`'s plans are taken). */
void mfi_plan_cache_put(mf_plan_cache *pc, uint64_t key, const char *index, uint64_t works,
                        cache_entry *x);
/* A collection's name hashed, as the cache's entries keep it. */
uint64_t mfi_plan_ns_hash(mf_coll *c);
/* The query's shape (queryHash) and its key in the cache, kept in `s`. */
void mfi_plan_hash_shape(mf_scan *s, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                         const bson_t *filter, const bson_t *sort, const bson_t *projection,
                         const mf_collator *coll);

/* ------------------------------------------------- plan_trial.c */

/* Give `s` (planned on choose()'s best) the trials of `alts` and of the
 * OR plans `or_plans` (taken), and the cache's probe. */
int mfi_plan_trials(mf_scan *s, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                    const bson_t *filter, const bson_t *sort, const mf_collator *coll,
                    const alternates *alts, mf_scan **or_plans, size_t *nor,
                    mf_plan_cache *cache, const bson_t *projection, mf_error *err);
/* The clauses of an OR with trials of their own report their choice. */
void mfi_plan_clauses_report(mf_scan *t, void (*chosen)(void *, mf_coll *, const char *),
                             void *arg);
/* Run the trials and make `s` the winner's. */
int mfi_plan_decide(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m, mf_error *err);
void mfi_plan_free_plans(mf_scan **v, size_t n);
/* A read view's rows and RecordIds (plan_exec.c). */
void mfi_view_rows_free(mf_scan *s);

/* -------------------------------------------------- plan_exec.c */

/* The next row of the scan itself (no trials, no replay). */
int mfi_plan_scan_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m,
                       mf_scan_row *row, bool *valid, mf_error *err);
/* The index key of the row an index scan returned last, or false. */
bool mfi_plan_last_key(const mf_scan *s, const uint8_t **k, size_t *kl);

/* ------------------------------------------------ $text (plan_text.c) */

/* Plan `s` as the text scan of `filter`, whose $text operand is
 * `operand`, over the collection's text index among `idx`.  Errors:
 * IndexNotFound (27), NoQueryExecutionPlans (291), the query's. */
int mfi_plan_text(mf_scan *s, const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                  const bson_iter_t *operand, const bson_t *sort, const bson_t *projection,
                  mf_error *err);
int mfi_plan_text_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m,
                       mf_scan_row *row, bool *valid, mf_error *err);
int mfi_plan_text_explain(const mf_scan *s, bool stats, bson_t *out);
void mfi_plan_text_free(struct mfi_text_scan *t);

/* ------------------------------------------------ $near (plan_near.c) */

/* Plan `s` as the near search of `filter` when its top level holds a
 * $near, $nearSphere or $geoNear condition (else nothing is done), over
 * a 2dsphere index of its path (the one named `hint_name`, when not
 * NULL).  Errors: the condition's (mfi_geo_near_parse), and
 * NoQueryExecutionPlans (291) when no index serves it. */
int mfi_plan_near(mf_scan *s, const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                  const char *hint_name, mf_error *err);
int mfi_plan_near_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m,
                       mf_scan_row *row, bool *valid, mf_error *err);
int mfi_plan_near_explain(const mf_scan *s, bool stats, bson_t *out);
void mfi_plan_near_free(struct mfi_near_scan *t);

#endif /* MF_QUERY_PLAN_INT_H */
