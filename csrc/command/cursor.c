/*
 * cursor.c -- the server-side cursor registry.
 *
 * A cursor is registered under a random positive 64-bit id when a command
 * leaves results for getMore.  A getMore checks it out (no other getMore
 * may use it meanwhile), fills a batch, and checks it back in; a cursor
 * idle for longer than cursorTimeoutMillis (10 minutes unless set) is
 * closed by the next registry call that sweeps -- every checkout,
 * registration and killCursors -- so a late getMore finds CursorNotFound.
 *
 * The registry holds no engine lock: a cursor over a collection saves its
 * position between batches (query/plan_exec.c) and takes the locks again in getMore.
 */
#include "command_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define DEFAULT_TIMEOUT_MS (10 * 60 * 1000)

void mfi_cursors_init(mf_instance *inst)
{
    pthread_mutex_init(&inst->cursors_mu, NULL);
    inst->cursors = NULL;
    mfi_index_usage_init(inst); /* the per-index access counters live as long */
    inst->plan_cache = mf_plan_cache_new(); /* without it (no memory), trials every time */
    inst->cursor_timeout_ms = DEFAULT_TIMEOUT_MS;
}

void mfi_cursor_free(mfi_cursor *c)
{
    if (!c)
        return;
    mf_scan_free(c->scan);
    if (c->ix) {
        mfi_indexes_free(c->ix);
        free(c->ix);
    }
    mf_matcher_free(c->matcher);
    mf_projection_free(c->proj);
    mf_expr_ctx_free(c->xctx); /* after what compiled expressions with it */
    mf_sorter_free(c->sorter);
    mf_pipeline_free(c->pipeline);
    mf_buf_free(&c->stash);
    if (c->docs)
        bson_destroy(c->docs);
    if (c->origin)
        bson_destroy(c->origin);
    free(c);
}

void mfi_cursors_destroy(mf_instance *inst)
{
    mfi_cursor *c = inst->cursors;
    while (c) {
        mfi_cursor *next = c->next;
        mfi_cursor_free(c);
        c = next;
    }
    inst->cursors = NULL;
    pthread_mutex_destroy(&inst->cursors_mu);
    mfi_index_usage_destroy(inst);
    mf_plan_cache_free(inst->plan_cache);
    inst->plan_cache = NULL;
}

/* Close idle cursors (registry mutex held). */
static void sweep(mf_instance *inst, int64_t now)
{
    mfi_cursor **p = &inst->cursors;
    while (*p) {
        mfi_cursor *c = *p;
        if (!c->in_use && !c->no_timeout && now - c->last_used_ms > inst->cursor_timeout_ms) {
            *p = c->next;
            atomic_fetch_add_explicit(&inst->counters.cursors_timed_out, 1,
                                      memory_order_relaxed);
            mfi_cursor_free(c);
        } else {
            p = &c->next;
        }
    }
}

static mfi_cursor *lookup(mf_instance *inst, int64_t id, mfi_cursor ***link)
{
    for (mfi_cursor **p = &inst->cursors; *p; p = &(*p)->next)
        if ((*p)->id == id) {
            if (link)
                *link = p;
            return *p;
        }
    return NULL;
}

void mfi_cursor_time_save(mfi_cursor *c)
{
    if (c->deadline.at_us) {
        int64_t left = c->deadline.at_us - mf_clock_mono_us();
        c->time_left_us = left > 0 ? left : 0;
    }
}

int mfi_cursor_time_resume(mfi_cursor *c, mf_error *err)
{
    if (!c->deadline.at_us)
        return 0;
    if (c->time_left_us <= 0)
        return mf_error_set(err, MF_MaxTimeMSExpired, "operation exceeded time limit");
    c->deadline.at_us = mf_clock_mono_us() + c->time_left_us;
    if (c->pipeline)
        mf_pipeline_set_deadline(c->pipeline, c->deadline.at_us);
    return 0;
}

int64_t mfi_cursor_register(mf_instance *inst, mfi_cursor *c)
{
    mfi_cursor_time_save(c);
    int64_t now = mf_clock_mono_us() / 1000;
    pthread_mutex_lock(&inst->cursors_mu);
    sweep(inst, now);
    do {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
            r = (uint64_t)mf_clock_mono_us() * 0x9E3779B97F4A7C15ull;
        c->id = (int64_t)(r & INT64_MAX);
    } while (c->id == 0 || lookup(inst, c->id, NULL));
    c->last_used_ms = now;
    c->in_use = false;
    c->next = inst->cursors;
    inst->cursors = c;
    pthread_mutex_unlock(&inst->cursors_mu);
    return c->id;
}

int mfi_cursor_checkout(mf_instance *inst, int64_t id, mfi_cursor **out, mf_error *err)
{
    int rc = 0;
    pthread_mutex_lock(&inst->cursors_mu);
    sweep(inst, mf_clock_mono_us() / 1000);
    mfi_cursor *c = lookup(inst, id, NULL);
    if (!c)
        rc = mf_error_set(err, MF_CursorNotFound, "cursor id %lld not found", (long long)id);
    else if (c->in_use)
        rc = mf_error_set(err, MF_OperationFailed, "Cursor id %lld is already in use",
                          (long long)id);
    else
        c->in_use = true;
    pthread_mutex_unlock(&inst->cursors_mu);
    *out = rc ? NULL : c;
    return rc;
}

void mfi_cursor_checkin(mf_instance *inst, mfi_cursor *c, bool close)
{
    pthread_mutex_lock(&inst->cursors_mu);
    mfi_cursor **link;
    if (close && lookup(inst, c->id, &link) == c) {
        *link = c->next;
        pthread_mutex_unlock(&inst->cursors_mu);
        mfi_cursor_free(c);
        return;
    }
    c->in_use = false;
    c->last_used_ms = mf_clock_mono_us() / 1000;
    pthread_mutex_unlock(&inst->cursors_mu);
}

int mfi_cursor_kill(mf_instance *inst, int64_t id, const char *ns)
{
    int result;
    pthread_mutex_lock(&inst->cursors_mu);
    sweep(inst, mf_clock_mono_us() / 1000);
    mfi_cursor **link;
    mfi_cursor *c = lookup(inst, id, &link);
    if (!c || strcmp(c->ns, ns) != 0) {
        result = 0;
    } else if (c->in_use) {
        c->killed = true; /* the getMore using it closes it when done */
        result = 1;
    } else {
        *link = c->next;
        mfi_cursor_free(c);
        result = 1;
    }
    pthread_mutex_unlock(&inst->cursors_mu);
    return result;
}

size_t mfi_cursors_open(mf_instance *inst)
{
    size_t n = 0;
    pthread_mutex_lock(&inst->cursors_mu);
    sweep(inst, mf_clock_mono_us() / 1000);
    for (mfi_cursor *c = inst->cursors; c; c = c->next)
        n++;
    pthread_mutex_unlock(&inst->cursors_mu);
    return n;
}
