/*
 * plan_trial.c -- multi-planning (mongod's MultiPlanStage and PlanRanker):
 * when other plans could answer a query as well as the one choose() picked
 * (plan.c), each runs a trial on the data before the first row, and the
 * one of the highest score goes on as the scan, its trial's rows returned
 * again first; a plan cached for the query's shape (plan_cache.c) runs
 * alone first, within a budget.  Also the trials' part of explain
 * (allPlansExecution, rejectedPlans).
 */
#include "plan_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ multi-planning */

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
        rc = mfi_plan_choose(p, idx, nidx, at, filter, sort, coll, &sorted, NULL, NULL, NULL, err);
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

/* `s`, planned on choose()'s best index, is the first trial; each
 * alternative gets a plan, and the OR plans (`nor` of them, taken) are
 * the last; the cached winner of its shape, if any, is the probe. */
/* Each clause of an OR (nested ORs' too) with trials of its own reports
 * the index they choose itself, through `chosen`. */
void mfi_plan_clauses_report(mf_scan *t, void (*chosen)(void *, mf_coll *, const char *),
                             void *arg)
{
    for (size_t i = 0; t->kind == P_OR && i < t->nkids; i++) {
        mf_scan *k = t->kids[i];
        if (k->ntrials) {
            k->chosen = chosen;
            k->chosen_arg = arg;
        }
        mfi_plan_clauses_report(k, chosen, arg);
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

int mfi_plan_trials(mf_scan *s, mf_coll *c, const mf_index_desc *idx, size_t nidx,
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
        mfi_plan_hash_shape(s, c, idx, nidx, filter, sort, projection, coll);
        if (projection && !bson_empty(projection) && !(s->projection = bson_copy(projection)))
            return oom(err);
        if (mfi_plan_cache_get(cache, s->shape, index, sizeof index, &works))
            for (size_t k = 0; k < n && s->probe < 0; k++)
                if (strcmp(trial_name(trial(s, k)), index) == 0) {
                    s->probe = (int)k;
                    s->probe_works = CACHE_EVICTION_RATIO * (works ? works : 1);
                }
    }
    return 0;
}

void mfi_plan_free_plans(mf_scan **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        mf_scan_free(v[i]);
    free(v);
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
    int rc = mfi_plan_scan_next(t, e, c, m, &row, &valid, err);
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
        if (!mfi_plan_last_key(t, &key, &kl))
            kl = 0;
        uint8_t len[5] = {(uint8_t)kl, (uint8_t)(kl >> 8), (uint8_t)(kl >> 16),
                          (uint8_t)(kl >> 24), (uint8_t)mfi_plan_current_leaf(t)};
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
int mfi_plan_decide(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m, mf_error *err)
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
            mfi_plan_cache_deactivate(s->cache, s->shape);
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
            cache_entry x = {.indexes = s->cache_indexes, .ns_hash = mfi_plan_ns_hash(c),
                             .query_hash = s->query_hash, .query = s->filter, .sort = s->sort,
                             .projection = s->projection, .plan = bson_new()};
            if (x.plan && explain_trial(w, blocking(s, w) ? s->sort : NULL, NULL, x.plan) != 0) {
                bson_destroy(x.plan);
                x.plan = NULL;
            }
            trials_record(s, runs, score, win, NULL, &x.creation, &x.scores);
            mfi_plan_cache_put(s->cache, s->shape, trial_name(w),
                               w->stats.works + runs[win].sort_works, &x);
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
        /* the read view and what it kept are the query's */
        s->view = old.view;
        s->vs = old.vs;
        memset(&trials[win]->vs, 0, sizeof trials[win]->vs);
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
    mfi_plan_free_plans(trials, n);
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
    return s->sorted && !s->view; /* a view's own rows come last, unsorted */
}

int mf_scan_decide(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m, mf_error *err)
{
    int rc = s->ntrials ? mfi_plan_decide(s, e, c, m, err) : 0;
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
