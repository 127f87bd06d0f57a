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
 *
 * Also here: the batches every cursor command replies with (first and next
 * batches, filled from any source a cursor has: a scan, the sorter, a
 * pipeline, a prepared array), getMore and killCursors.
 */
#include "command_int.h"
#include "authz_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define DEFAULT_FIRST_BATCH 101

#define DEFAULT_TIMEOUT_MS (10 * 60 * 1000)

void mfi_cursors_init(mf_instance *inst)
{
    pthread_mutex_init(&inst->cursors_mu, NULL);
    inst->cursors = NULL;
    mf_cl_db_init(&inst->cl, inst->engine); /* plan cache and index counters live as long */
    inst->cursor_timeout_ms = DEFAULT_TIMEOUT_MS;
}

void mfi_cursor_free(mfi_cursor *c)
{
    if (!c)
        return;
    mf_scan_free(c->scan);
    if (c->ix) {
        mf_cl_indexes_free(c->ix);
        free(c->ix);
    }
    mf_matcher_free(c->matcher);
    mf_projection_free(c->proj);
    mf_sort_free(c->key_sort);
    mf_expr_ctx_free(c->xctx); /* after what compiled expressions with it */
    mf_sorter_free(c->sorter);
    mf_pipeline_free(c->pipeline);
    mf_cl_changes_free(c->changes);
    bson_destroy(c->cs_last);
    bson_destroy(c->cs_stash_id);
    bson_destroy(c->cs_pbrt);
    mf_buf_free(&c->stash);
    mf_cl_txn_abort(c->snap); /* (after the scan reading through it) */
    if (c->docs)
        bson_destroy(c->docs);
    if (c->origin)
        bson_destroy(c->origin);
    mfi_privs_destroy(c->authz_needs);
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
    mf_cl_db_destroy(&inst->cl);
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

/* Who the connection is, as a cursor's owner: "db.user", or "". */
static void owner_of(mf_cmd_ctx *ctx, char *out, size_t cap)
{
    const char *user, *db;
    if (mfi_auth_user(ctx, &user, &db))
        snprintf(out, cap, "%s.%s", db, user);
    else
        out[0] = '\0';
}

int64_t mfi_cursor_register(mf_cmd_ctx *ctx, mfi_cursor *c)
{
    mf_instance *inst = ctx->inst;
    owner_of(ctx, c->owner, sizeof c->owner);
    c->authz_needs = mfi_privs_dup(ctx->authz_needs);
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
    /* opened in a transaction: it reads through it, and dies with it; by
     * a snapshot read: it keeps the snapshot */
    mf_cl_txn *t = mf_cl_txn_bound();
    if (mf_cl_txn_is_snapshot(t)) {
        c->snap = mfi_snapshot_take();
        t = NULL;
    }
    c->txn = t;
    c->txn_number = c->txn ? mfi_txn_number() : 0;
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
    const void *t = mf_cl_txn_bound();
    if (!c)
        rc = mf_error_set(err, MF_CursorNotFound, "cursor id %lld not found", (long long)id);
    else if (c->in_use)
        rc = mf_error_set(err, MF_OperationFailed, "Cursor id %lld is already in use",
                          (long long)id);
    /* a cursor of a transaction is read in it, and only in it: checked
     * here, under the mutex, so a transaction cannot end (and free the
     * view the cursor's scan reads through) between the check and the use
     * -- ending it needs its session, which its statement has checked out */
    else if (c->txn != t || (t && c->txn_number != mfi_txn_number()))
        rc = !c->txn ? mf_error_set(err, 50739,
                                    "Cannot run getMore on cursor %lld, which was not created "
                                    "in a transaction, in transaction %lld",
                                    (long long)id, (long long)mfi_txn_number())
             : !t    ? mf_error_set(err, 50740,
                                    "Cannot run getMore on cursor %lld, which was created in "
                                    "transaction %lld, without a txnNumber",
                                    (long long)id, (long long)c->txn_number)
                     : mf_error_set(err, 50741,
                                    "Cannot run getMore on cursor %lld, which was created in "
                                    "transaction %lld, in transaction %lld",
                                    (long long)id, (long long)c->txn_number,
                                    (long long)mfi_txn_number());
    else
        c->in_use = true;
    pthread_mutex_unlock(&inst->cursors_mu);
    if (rc == 0 && c->snap)
        mf_cl_txn_bind(c->snap); /* its getMore reads at its snapshot */
    *out = rc ? NULL : c;
    return rc;
}

void mfi_cursor_checkin(mf_instance *inst, mfi_cursor *c, bool close)
{
    if (c->snap)
        mf_cl_txn_bind(NULL);
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

void mfi_cursors_kill_txn(mf_instance *inst, const void *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&inst->cursors_mu);
    for (mfi_cursor **link = &inst->cursors; *link;) {
        mfi_cursor *c = *link;
        if (c->txn != t) {
            link = &c->next;
        } else if (c->in_use) {
            c->killed = true;
            c->txn = NULL; /* its view is gone: never read again */
            link = &c->next;
        } else {
            *link = c->next;
            mfi_cursor_free(c);
        }
    }
    pthread_mutex_unlock(&inst->cursors_mu);
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

/* --------------------------------------------------------------- batches */

/* A batch is a list of its documents, each a reference: into the
 * collection's pages, for a scan's rows returned as they are (valid while
 * the collection is read-locked: the caller writes the reply before it
 * unlocks), or into the batch's runs of about RUN_BYTES, for a copy of
 * any other (a projection's output, a sorter's or a pipeline's, a stashed
 * document).  batch_reply then writes the reply's cursor document once,
 * at its final size, each document copied into it: a scan's document is
 * copied once in all.  Appending each document to a libbson array cost
 * more in bookkeeping (the length of every enclosing document, by
 * varargs) than the copy of a 100-byte document, a reply grown as the
 * documents came was copied again at each doubling, and copying every
 * document into runs, then the runs into the reply, made an indexed find
 * of 10,000 1-11% slower than this (docs/benchmarks.md). */
#define RUN_BYTES (64 * 1024)
#define REPLY_AHEAD 12 /* documents (batch_reply) */


void mfi_batch_free(mfi_batch *b)
{
    for (size_t i = 0; i < b->nruns; i++)
        mf_buf_free(&b->runs[i]);
    free(b->runs);
    free(b->docs);
    b->runs = NULL;
    b->docs = NULL;
    b->nruns = b->runs_cap = b->docs_cap = 0;
}

/* Count the array key `key[at..14]` up by one, in place ("9" -> "10",
 * "199" -> "200"); returns where it starts. */
static int key_next(char *key, int at)
{
    int i = 14;
    while (i >= at && key[i] == '9')
        key[i--] = '0';
    if (i >= at)
        key[i]++;
    else
        key[--at] = '1';
    return at;
}

/* The bytes of the array keys "0" .. "<n-1>", without their NULs. */
static size_t key_bytes(uint32_t n)
{
    size_t total = 0;
    uint64_t from = 0, to = 10;
    for (size_t digits = 1; from < n; digits++, from = to, to *= 10)
        total += digits * (size_t)((n < to ? n : to) - from);
    return total;
}

/* Whether a document of `len` bytes fits the batch (the first always does). */
bool mfi_batch_fits(const mfi_batch *b, size_t len)
{
    if (b->n > 0 && b->bytes + len > MF_MAX_BSON_OBJECT_SIZE)
        return false;
    return true;
}

/* Array `a` of `*cap` elements of `size` bytes, reallocated to twice as
 * many (64 at first); NULL when out of memory, `a` then unchanged. */
static void *doubled(void *a, size_t *cap, size_t size)
{
    size_t n = *cap ? 2 * *cap : 64;
    void *grown = realloc(a, n * size);
    if (grown)
        *cap = n;
    return grown;
}

/* A copy of `len` bytes at `data` in the runs (which never move once
 * allocated: a full run is followed by a new one); NULL when out of
 * memory. */
static const uint8_t *batch_copy(mfi_batch *b, const uint8_t *data, size_t len)
{
    mf_buf *run = b->nruns ? &b->runs[b->nruns - 1] : NULL;
    if (!run || len > run->cap - run->len) {
        if (b->nruns == b->runs_cap) {
            mf_buf *runs = doubled(b->runs, &b->runs_cap, sizeof *runs);
            if (!runs)
                return NULL;
            b->runs = runs;
        }
        /* 1 KiB first, doubling to RUN_BYTES: a reply of one projected
         * document costs no large allocation. */
        size_t cap = b->nruns ? 2 * b->runs[b->nruns - 1].cap : 1024;
        if (cap > RUN_BYTES)
            cap = RUN_BYTES;
        mf_buf fresh = {0};
        if (mf_buf_reserve(&fresh, len > cap ? len : cap) != 0)
            return NULL;
        b->runs[b->nruns++] = fresh;
        run = &b->runs[b->nruns - 1];
    }
    uint8_t *at = run->data + run->len;
    memcpy(at, data, len);
    run->len += len;
    return at;
}

/* Add a document to the batch: by reference when `stable` (a scan's row,
 * in the collection's pages, which fill's caller keeps locked until the
 * batch is written or dropped), else a copy.  Called once per document
 * returned: kept to plain stores. */
static inline int batch_add(mfi_batch *b, const uint8_t *data, size_t len, bool stable,
                            mf_error *err)
{
    if (b->count_only) {
        b->n++;
        b->bytes += len;
        return 0;
    }
    if (b->n == b->docs_cap) {
        mfi_batch_doc *docs = doubled(b->docs, &b->docs_cap, sizeof *docs);
        if (!docs)
            return mf_error_oom(err);
        b->docs = docs;
    }
    if (!stable && !(data = batch_copy(b, data, len)))
        return mf_error_oom(err);
    b->docs[b->n++] = (mfi_batch_doc){data, len};
    b->bytes += len;
    return 0;
}

int mfi_batch_add_copy(mfi_batch *b, const uint8_t *data, size_t len, mf_error *err)
{
    return batch_add(b, data, len, false, err);
}

static uint8_t *put(uint8_t *p, const void *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* The cursor document {<batch_name>: [the batch], id: 0, ns}, as the
 * field "cursor" of `reply`, written at its final size; batch_set_id sets
 * the id after (a cursor is registered once its collection is unlocked,
 * and a batch that refers to its pages is written before).  The batch is
 * freed.  `reply` is empty (the cursor is every cursor command's first
 * field) and written in place. */
int mfi_batch_reply(mfi_batch *b, bson_t *reply, const char *batch_name, const char *ns,
                       mf_error *err)
{
    size_t name_len = strlen(batch_name), ns_len = strlen(ns);
    /* each element: its type, its key and NUL, the document */
    size_t arr = 4 + 2 * (size_t)b->n + key_bytes(b->n) + b->bytes + 1;
    /* a change stream's token: the one element of b->pbrt */
    size_t pbrt = b->pbrt ? b->pbrt->len - 5 : 0;
    size_t cursor = 4 + (1 + name_len + 1 + arr) + pbrt + (1 + 3 + 8) +
                    (1 + 3 + 4 + ns_len + 1) + 1;
    size_t total = 4 + (1 + 7 + cursor) + 1;
    BSON_ASSERT(bson_empty(reply));
    uint8_t *p = total <= INT32_MAX ? bson_reserve_buffer(reply, (uint32_t)total) : NULL;
    if (!p) {
        mfi_batch_free(b);
        return mf_error_oom(err);
    }
    uint8_t *q = p;
    mf_store_i32le(q, (int32_t)total);
    *(q += 4) = BSON_TYPE_DOCUMENT;
    q = put(q + 1, "cursor", 7);
    mf_store_i32le(q, (int32_t)cursor);
    *(q += 4) = BSON_TYPE_ARRAY;
    q = put(q + 1, batch_name, name_len + 1);
    mf_store_i32le(q, (int32_t)arr);
    q += 4;
    /* The key: n in decimal ending at key[14], then its NUL and zeros, so
     * that 16 bytes from `at` can be copied whole (a fixed-size copy, no
     * call); the document overwrites what follows the NUL.  The documents
     * of an index scan are scattered over the collection's pages, each
     * page's address translated again: each document's first two lines
     * are asked for REPLY_AHEAD documents ahead (12 took 1.4% less time
     * than 4 for 10,000 documents of 100 B, 16 about as much, 24 more). */
    char key[32] = {0};
    int at = 14;
    key[at] = '0';
    const mfi_batch_doc *d = b->docs;
    for (uint32_t i = 0; i < b->n; i++) {
        if (i + REPLY_AHEAD < b->n) {
            __builtin_prefetch(d[i + REPLY_AHEAD].data);
            __builtin_prefetch(d[i + REPLY_AHEAD].data + 64);
        }
        size_t kl = (size_t)(15 - at);
        *q++ = BSON_TYPE_DOCUMENT;
        memcpy(q, key + at, 16);
        q = put(q + kl + 1, d[i].data, d[i].len);
        at = key_next(key, at);
    }
    *q++ = 0;
    if (pbrt)
        q = put(q, bson_get_data(b->pbrt) + 4, pbrt);
    *q++ = BSON_TYPE_INT64;
    q = put(q, "id", 3);
    b->id_at = q;
    memset(q, 0, 8);
    q += 8;
    *q++ = BSON_TYPE_UTF8;
    q = put(q, "ns", 3);
    mf_store_i32le(q, (int32_t)(ns_len + 1));
    q = put(q + 4, ns, ns_len + 1);
    *q++ = 0;
    *q++ = 0;
    BSON_ASSERT((size_t)(q - p) == total);
    mfi_batch_free(b);
    return 0;
}

/* The cursor id of the reply batch_reply wrote (before anything else is
 * added to it). */
void mfi_batch_set_id(const mfi_batch *b, int64_t id)
{
    for (int i = 0; i < 8; i++)
        b->id_at[i] = (uint8_t)((uint64_t)id >> (8 * i));
}

static bool batch_full(const mfi_batch *b)
{
    return b->max_docs >= 0 && b->n >= (uint64_t)b->max_docs;
}

/* A result a pipeline built past the BSON limit (16 MiB + 16 KiB, as
 * mongod's BSONObjMaxInternalSize): BSONObjectTooLarge (10334). */
static int too_large(const bson_t *d, mf_error *err)
{
    if (d->len <= 16 * 1024 * 1024 + 16 * 1024)
        return 0;
    char first[128] = "";
    bson_iter_t it;
    if (bson_iter_init(&it, d) && bson_iter_next(&it))
        mf_bsonx_elem_to_string(&it, true, first, sizeof first);
    return mf_error_set(err, MF_BSONObjectTooLarge,
                        "BSONObj size: %u (0x%X) is invalid. Size must be between 0 and "
                        "16793600(16MB) First element: %s",
                        d->len, d->len, first);
}

/* Offer one document: added, or stashed for the next batch. */
static MF_ALWAYS_INLINE int offer(mfi_cursor *cur, mfi_batch *b, const uint8_t *data, size_t len,
                                  bool stable, bool *stop, mf_error *err)
{
    if (!mfi_batch_fits(b, len)) {
        cur->stash.len = 0;
        if (mf_buf_append(&cur->stash, data, len) != 0)
            return mf_error_oom(err);
        cur->has_stash = true;
        *stop = true;
        return 0;
    }
    if (batch_add(b, data, len, stable, err) != 0)
        return err->code;
    if (cur->limit > 0)
        cur->limit--;
    *stop = batch_full(b) || cur->limit == 0;
    return 0;
}

/* The document `doc` (of record `rid`, the matcher's position `pos`) as
 * the client sees it, into `out` (initialised, error or not: the caller
 * destroys it): projected (with the row's metadata `meta`, may be NULL),
 * then with showRecordId's {$recordId: rid} appended, as mongod appends
 * it. */
static int reshape(mfi_cursor *cur, const bson_t *doc, uint64_t rid, int64_t pos,
                   const mf_meta *meta, bson_t *out, mf_error *err)
{
    int rc = 0;
    if (cur->proj)
        rc = mf_projection_apply_meta(cur->proj, doc, pos, meta, out, err);
    else
        bson_copy_to(doc, out);
    if (rc == 0 && cur->show_record_id && !BSON_APPEND_INT64(out, "$recordId", (int64_t)rid))
        rc = mf_error_oom(err);
    return rc;
}

int mfi_cursor_row_meta(mfi_cursor *cur, const mf_scan_row *row, mf_meta *meta, mf_error *err)
{
    int rc = 0;
    mf_meta_clear(meta);
    if (mf_scan_is_text(cur->scan) && row->scored)
        mf_meta_set_double(meta, MF_META_TEXT_SCORE, row->score);
    if (mf_scan_is_near(cur->scan)) { /* a $near search's distance and location */
        bson_t loc;
        bson_iter_t pt;
        mf_meta_set_double(meta, MF_META_GEO_NEAR_DISTANCE, row->dist);
        if ((cur->meta_needs & MF_META_BIT(MF_META_GEO_NEAR_POINT)) &&
            (mf_scan_near_loc(cur->scan, &row->doc, &loc) != 0 ||
             (bson_iter_init(&pt, &loc) && bson_iter_next(&pt) &&
              mf_meta_set_value(meta, MF_META_GEO_NEAR_POINT, bson_iter_value(&pt)) != 0)))
            rc = mf_error_oom(err);
        if (cur->meta_needs & MF_META_BIT(MF_META_GEO_NEAR_POINT))
            bson_destroy(&loc);
    }
    if (cur->meta_needs & MF_META_BIT(MF_META_RECORD_ID))
        mf_meta_set_long(meta, MF_META_RECORD_ID, (int64_t)row->rid);
    if (cur->meta_needs & MF_META_BIT(MF_META_INDEX_KEY)) {
        /* an index scan's key; none (no field) for a collection scan or
         * a text index's, as mongod's */
        bson_t k;
        rc = mf_scan_return_key(cur->scan, row, &k, err);
        if (rc == 0 && !bson_empty(&k)) {
            bson_value_t v = {.value_type = BSON_TYPE_DOCUMENT};
            v.value.v_doc.data = (uint8_t *)bson_get_data(&k);
            v.value.v_doc.data_len = k.len;
            if (mf_meta_set_value(meta, MF_META_INDEX_KEY, &v) != 0)
                rc = mf_error_oom(err);
        }
        bson_destroy(&k);
    }
    if (rc == 0 && cur->key_sort && (cur->meta_needs & MF_META_BIT(MF_META_SORT_KEY))) {
        bson_value_t v;
        if ((rc = mf_sort_key_values(cur->key_sort, &row->doc, meta, &v, err)) == 0) {
            if (mf_meta_set_value(meta, MF_META_SORT_KEY, &v) != 0)
                rc = mf_error_oom(err);
            bson_value_destroy(&v);
        }
    }
    return rc;
}

/* A scanned row as the client sees it, `*doc`: rebuilt into `out` when
 * reshaped() (initialised then, error or not: the caller destroys it),
 * else the row's own document (no copy, `out` untouched). */
int mfi_cursor_shape(mfi_cursor *cur, const mf_scan_row *row, bson_t *out, const bson_t **doc,
                     mf_error *err)
{
    *doc = mfi_cursor_reshaped(cur) ? out : &row->doc;
    if (cur->return_key)
        return mf_scan_return_key(cur->scan, row, out, err);
    if (!mfi_cursor_reshaped(cur))
        return 0;
    mf_meta meta = {0};
    int rc = cur->proj ? mfi_cursor_row_meta(cur, row, &meta, err) : 0;
    if (rc == 0)
        rc = reshape(cur, &row->doc, row->rid, row->pos, &meta, out, err);
    else
        bson_init(out);
    mf_meta_clear(&meta);
    return rc;
}

/* A sorter record of a late projection, [pos][rid][document] (8 bytes
 * each, little endian), as the client sees it. */
static int project_sorted(mfi_cursor *cur, const uint8_t *d, size_t dl, bson_t *out,
                          mf_error *err)
{
    bson_t doc;
    uint64_t pos = 0, rid = 0;
    bson_init(out);
    if (dl < 16 || !bson_init_static(&doc, d + 16, dl - 16))
        return mf_error_set(err, MF_InternalError, "a sorted record is damaged");
    for (int i = 7; i >= 0; i--) {
        pos = pos << 8 | d[i];
        rid = rid << 8 | d[8 + i];
    }
    bson_destroy(out);
    return reshape(cur, &doc, rid, (int64_t)pos, NULL, out, err);
}

/* fill's sink for a scan's rows returned as they are (mf_scan_each). */
typedef struct fill_sink {
    mfi_cursor *cur;
    mfi_batch *b;
    mf_deadline *deadline;
} fill_sink;

static int sink_row(void *arg, const mf_scan_row *row, bool *stop, mf_error *err)
{
    fill_sink *f = arg;
    int rc = mf_deadline_check(f->deadline, err);
    if (rc)
        return rc;
    if (f->cur->skip > 0) {
        f->cur->skip--;
        return 0;
    }
    return offer(f->cur, f->b, row->data, row->doc.len, true, stop, err);
}

/* Fill `b` from the cursor's source.  A scan source needs the collection
 * `c` read-locked, and locked still until `b` is written or dropped: it
 * refers to the scan's documents in their pages.  `*exhausted` says the
 * cursor has nothing more. */
int mfi_cursor_fill(mfi_cursor *cur, mf_engine *e, mf_coll *c, mfi_batch *b, mf_deadline *deadline,
                bool *exhausted, mf_error *err)
{
    if (cur->changes)
        return mfi_change_stream_fill(cur, b, exhausted, err);
    bool stop = batch_full(b) || cur->limit == 0;
    int rc = 0;
    *exhausted = false;
    if (!stop && cur->has_stash) {
        mf_buf st = cur->stash;
        cur->has_stash = false;
        cur->stash = (mf_buf){0};
        rc = batch_add(b, st.data, st.len, false, err);
        mf_buf_free(&st);
        if (cur->limit > 0)
            cur->limit--;
        stop = batch_full(b) || cur->limit == 0;
    }
    /* A scan's rows as they are: taken straight from it (mf_scan_each),
     * without the calls and the tests below between one row and the next. */
    if (rc == 0 && !stop && cur->scan && !cur->sorter && !cur->pipeline && !cur->docs &&
        !mfi_cursor_reshaped(cur)) {
        fill_sink f = {cur, b, deadline};
        rc = mf_scan_each(cur->scan, e, c, cur->matcher, sink_row, &f, exhausted, err);
        stop = true;
    }
    while (rc == 0 && !stop) {
        if ((rc = mf_deadline_check(deadline, err)) != 0)
            break;
        if (cur->sorter) {
            const uint8_t *d;
            size_t dl;
            bool valid;
            if ((rc = mf_sorter_next(cur->sorter, &d, &dl, &valid, err)) != 0 || !valid) {
                *exhausted = rc == 0;
                break;
            }
            if (cur->project_late) {
                bson_t out;
                if ((rc = project_sorted(cur, d, dl, &out, err)) == 0)
                    rc = offer(cur, b, bson_get_data(&out), out.len, false, &stop, err);
                bson_destroy(&out);
            } else {
                rc = offer(cur, b, d, dl, false, &stop, err);
            }
        } else if (cur->pipeline) {
            bson_t d;
            bool end;
            if ((rc = mf_pipeline_next(cur->pipeline, &d, &end, err)) != 0 || end) {
                *exhausted = rc == 0;
                break;
            }
            rc = too_large(&d, err);
            if (rc == 0)
                rc = offer(cur, b, bson_get_data(&d), d.len, false, &stop, err);
            bson_destroy(&d);
        } else if (cur->docs) {
            if (!bson_iter_next(&cur->docs_it)) {
                *exhausted = true;
                break;
            }
            uint32_t dl;
            const uint8_t *d;
            bson_iter_document(&cur->docs_it, &dl, &d);
            rc = offer(cur, b, d, dl, false, &stop, err);
        } else {
            mf_scan_row row;
            bool valid;
            if ((rc = mf_scan_next(cur->scan, e, c, cur->matcher, &row, &valid, err)) != 0 ||
                !valid) {
                *exhausted = rc == 0;
                break;
            }
            if (cur->skip > 0) {
                cur->skip--;
                continue;
            }
            /* reshaped: rows returned as they are took mf_scan_each above */
            bson_t out;
            const bson_t *doc;
            rc = mfi_cursor_shape(cur, &row, &out, &doc, err);
            if (rc == 0)
                rc = offer(cur, b, bson_get_data(doc), doc->len, false, &stop, err);
            bson_destroy(&out);
        }
    }
    if (rc == 0 && cur->limit == 0)
        *exhausted = true;
    /* A scan that has seen its end, with nothing kept back, is done --
     * but a tailable one's end is where the next documents will come, if
     * it ever read one (mongod closes one over an empty collection). */
    if (rc == 0 && cur->scan && !cur->sorter && !cur->has_stash && mf_scan_eof(cur->scan))
        *exhausted = true;
    if (rc == 0 && *exhausted && cur->tailable && cur->limit != 0)
        *exhausted = !mf_scan_tail_on(cur->scan);
    /* A sorter or an array knows its end: look one ahead so the last batch
     * closes the cursor, as mongod's blocking stages do. */
    if (rc == 0 && !*exhausted && !cur->has_stash && (cur->sorter || cur->docs || cur->pipeline)) {
        const uint8_t *d = NULL;
        size_t dl = 0;
        bool valid = false;
        bson_t shaped = BSON_INITIALIZER;
        if (cur->sorter) {
            rc = mf_sorter_next(cur->sorter, &d, &dl, &valid, err);
            if (rc == 0 && valid && cur->project_late) {
                bson_destroy(&shaped);
                rc = project_sorted(cur, d, dl, &shaped, err);
                d = bson_get_data(&shaped);
                dl = shaped.len;
            }
        } else if (cur->pipeline) {
            bool end;
            bson_t pd;
            rc = mf_pipeline_next(cur->pipeline, &pd, &end, err);
            if (rc == 0 && !end) {
                rc = too_large(&pd, err);
                if (rc == 0) {
                    bson_concat(&shaped, &pd);
                    d = bson_get_data(&shaped);
                    dl = shaped.len;
                    valid = true;
                }
                bson_destroy(&pd);
            }
        } else if (bson_iter_next(&cur->docs_it)) {
            uint32_t l;
            bson_iter_document(&cur->docs_it, &l, &d);
            dl = l;
            valid = true;
        }
        if (rc == 0 && valid) {
            if (mf_buf_append(&cur->stash, d, dl) != 0)
                rc = mf_error_oom(err);
            cur->has_stash = rc == 0;
        } else if (rc == 0) {
            *exhausted = true;
        }
        bson_destroy(&shaped);
    }
    return rc;
}

int mfi_cursor_first_batch(mf_cmd_ctx *ctx, mfi_cursor *cur, int64_t batch_size,
                           bool single_batch, bson_t *reply, mf_error *err)
{
    mfi_batch b = {.max_docs = batch_size};
    bool exhausted;
    int rc = mfi_cursor_fill(cur, NULL, NULL, &b, &cur->deadline, &exhausted, err);
    if (rc == 0)
        rc = mfi_batch_reply(&b, reply, "firstBatch", cur->ns, err);
    else
        mfi_batch_free(&b);
    mfi_op_debug *d = ctx->dbg;
    if (rc == 0 && d) {
        d->nreturned = b.n;
        d->cursor_exhausted = exhausted || single_batch;
    }
    if (rc == 0 && !(exhausted || single_batch)) {
        if (d) { /* what getMore's profile entries show */
            cur->origin = ctx->prof ? bson_copy(ctx->prof->cmd) : NULL;
            memcpy(cur->plan_summary, d->plan_summary, sizeof cur->plan_summary);
        }
        int64_t id = mfi_cursor_register(ctx, cur);
        mfi_batch_set_id(&b, id);
        if (d)
            d->cursorid = id;
    } else {
        mfi_cursor_free(cur);
    }
    return rc;
}

int mfi_cursor_reply_from_docs(mf_cmd_ctx *ctx, const char *ns, bson_t *docs, int64_t batch_size,
                               bson_t *reply, mf_error *err)
{
    mfi_cursor *cur = calloc(1, sizeof *cur);
    if (!cur) {
        bson_destroy(docs);
        return mf_error_oom(err);
    }
    snprintf(cur->ns, sizeof cur->ns, "%s", ns);
    cur->docs = docs;
    cur->limit = -1;
    bson_iter_init(&cur->docs_it, docs);
    return mfi_cursor_first_batch(ctx, cur, batch_size, false, reply, err);
}

/* ---------------------------------------------------------------- getMore */

int mfi_cmd_get_more(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    bson_iter_t it;
    int64_t id = 0, batch_size = -1;
    const char *coll = NULL;
    int rc = 0;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_INT64(&it))
        return mfi_type_error(err, "getMore", "getMore", &it, "long");
    id = bson_iter_int64(&it);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "collection") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return mfi_type_error(err, "getMore", k, &it, "string");
            coll = bson_iter_utf8(&it, NULL);
        } else if (strcmp(k, "batchSize") == 0) {
            if (!mfi_as_int64(&it, &batch_size))
                return mfi_type_error(err, "getMore", k, &it, "long");
            if (batch_size < 0)
                return mf_error_set(err, MF_BadValue,
                                    "Batch size for getMore must be non-negative, but received: "
                                    "%lld",
                                    (long long)batch_size);
            if (batch_size == 0)
                batch_size = -1;
        } else if (strcmp(k, "term") == 0 || strcmp(k, "lastKnownCommittedOpTime") == 0 ||
                   mfi_is_generic_arg(k)) {
        } else {
            return mf_error_set(err, 40415, "BSON field 'getMore.%s' is an unknown field.", k);
        }
    }
    if (rc)
        return rc;
    if (!coll)
        return mf_error_set(err, 40414,
                            "BSON field 'getMore.collection' is missing but a required field");
    char ns[MF_MAX_NS_LEN + 1];
    snprintf(ns, sizeof ns, "%s.%s", ctx->db, coll);
    if (ctx->dbg)
        snprintf(ctx->dbg->ns, sizeof ctx->dbg->ns, "%s", ns);
    atomic_fetch_add_explicit(&ctx->inst->counters.op_getmore, 1, memory_order_relaxed);

    mfi_cursor *cur;
    if ((rc = mfi_cursor_checkout(ctx->inst, id, &cur, err)) != 0)
        return rc;
    /* another user's cursor, or one whose privileges the user no longer
     * holds (mongod's validateAuthorization); the cursor stays */
    char me[sizeof cur->owner];
    owner_of(ctx, me, sizeof me);
    if (ctx->inst->auth && ctx->client && !ctx->client->is_internal &&
        strcmp(me, cur->owner) != 0) {
        mfi_cursor_checkin(ctx->inst, cur, false);
        return mf_error_set(err, MF_Unauthorized,
                            "cursor id %lld was not created by the authenticated user",
                            (long long)id);
    }
    if (!mfi_authz_may(ctx, cur->authz_needs)) {
        mfi_cursor_checkin(ctx->inst, cur, false);
        return mf_error_set(err, MF_Unauthorized, "not authorized for getMore with cursor id %lld",
                            (long long)id);
    }
    if (strcmp(cur->ns, ns) != 0) {
        mfi_cursor_checkin(ctx->inst, cur, false);
        return mf_error_set(err, MF_Unauthorized,
                            "Requested getMore on namespace '%s', but cursor belongs to a "
                            "different namespace %s",
                            ns, cur->ns);
    }
    /* A maxTimeMS of getMore's own (checked by the dispatcher) is how long
     * an awaitData cursor waits for a document (a second without one); on
     * another cursor it is refused once the cursor is found, as mongod
     * does, which keeps the cursor. */
    if (ctx->max_time_given && !cur->await_data) {
        mfi_cursor_checkin(ctx->inst, cur, false);
        return mf_error_set(err, MF_BadValue,
                            "cannot set maxTimeMS on getMore command for a non-awaitData cursor");
    }
    int64_t wait_ms = 1000;
    if (cur->await_data && ctx->max_time_given && bson_iter_init_find(&it, cmd, "maxTimeMS"))
        (void)mfi_max_time_arg(&it, &wait_ms, err); /* (the dispatcher checked it) */
    if (wait_ms == 0) /* (0: the default) */
        wait_ms = 1000;
    int64_t wait_until = mf_clock_mono_us() + wait_ms * 1000;
    /* From here an error kills the cursor, as mongod's getMore does once
     * past those checks.  The find's or aggregate's maxTimeMS: the
     * interrupt check (maxTimeAlwaysTimeOut first, as mongod's
     * hasDeadlineExpired), then what is left of it; then
     * failGetMoreAfterCursorCheckout. */
    if ((cur->deadline.at_us && (rc = mfi_max_time_check(ctx->inst, err)) != 0) ||
        (rc = mfi_cursor_time_resume(cur, err)) != 0 ||
        (rc = mfi_fail_get_more(ctx, cmd, err)) != 0) {
        if (cur->changes)
            mfi_change_stream_label(ctx, rc);
        mfi_cursor_checkin(ctx->inst, cur, true);
        return rc;
    }
    mfi_batch b = {.max_docs = batch_size};
    bool exhausted = true, wait = cur->scan != NULL;
    while (wait) {
        /* an awaitData cursor with nothing new waits for an insert, with no
         * lock held, then looks again */
        uint64_t seen = mf_cl_capped_inserts();
        mf_engine_catalog_lock(e, false);
        mf_coll *c = mf_engine_coll(e, ns);
        uint8_t uuid[16];
        wait = false;
        if (!c || !mf_cl_uuid(c, uuid) || memcmp(uuid, cur->coll_uuid, 16) != 0) {
            rc = mf_error_set(err, MF_QueryPlanKilled,
                              "collection dropped. UUID changed between getMore calls");
        } else {
            mf_coll_lock(c, false);
            rc = mfi_cursor_fill(cur, e, c, &b, &cur->deadline, &exhausted, err);
            wait = rc == 0 && b.n == 0 && !exhausted && cur->await_data && !cur->killed &&
                   mf_clock_mono_us() < wait_until;
            if (rc == 0 && !wait) /* while locked: the batch refers to the pages */
                rc = mfi_batch_reply(&b, reply, "nextBatch", ns, err);
            mfi_op_debug_scan(ctx->dbg, cur->scan, &cur->stats_seen);
            mf_scan_release(cur->scan);
            mf_coll_unlock(c);
        }
        mf_engine_catalog_unlock(e);
        if (wait)
            mf_cl_capped_wait(seen, wait_until);
    }
    if (cur->changes) {
        /* a change stream: nothing new, it waits for the oplog's next
         * entry (no lock held) and reads again */
        for (;;) {
            uint64_t seen = mf_cl_capped_inserts();
            rc = mfi_cursor_fill(cur, e, NULL, &b, &cur->deadline, &exhausted, err);
            if (rc != 0 || b.n > 0 || exhausted || cur->killed ||
                mf_clock_mono_us() >= wait_until)
                break;
            mf_cl_capped_wait(seen, wait_until);
        }
        if (rc == 0) {
            mfi_ctx_wrote(ctx, mf_cl_changes_lsn(cur->changes)); /* replied once durable */
            rc = mfi_batch_reply(&b, reply, "nextBatch", ns, err);
        } else {
            mfi_change_stream_label(ctx, rc);
        }
    } else if (!cur->scan) {
        rc = mfi_cursor_fill(cur, e, NULL, &b, &cur->deadline, &exhausted, err);
        if (rc == 0)
            rc = mfi_batch_reply(&b, reply, "nextBatch", ns, err);
    }
    if (rc == 0)
        mfi_batch_set_id(&b, !exhausted && !cur->killed ? id : 0);
    else
        mfi_batch_free(&b);
    if (ctx->dbg) {
        mfi_op_debug *d = ctx->dbg;
        d->cursorid = id;
        if (cur->origin)
            d->originating = bson_copy(cur->origin);
        if (cur->plan_summary[0])
            memcpy(d->plan_summary, cur->plan_summary, sizeof d->plan_summary);
        if (rc == 0) {
            d->nreturned = b.n;
            d->cursor_exhausted = exhausted || cur->killed;
        }
    }
    /* Exhaust: a getMore with OP_MSG's exhaustAllowed is run again by the
     * connection, each reply sent with moreToCome, until the cursor is
     * done or a batch fails (wire/conn.c), as mongod streams it. */
    if (rc == 0 && !exhausted && !cur->killed && ctx->client && ctx->client->exhaust_allowed)
        ctx->flags |= MF_RUN_EXHAUST;
    mfi_cursor_time_save(cur);
    if (rc != 0 && rc != MF_QueryPlanKilled && !cur->changes)
        mfi_executor_error(err, "getMore");
    mfi_cursor_checkin(ctx->inst, cur, rc != 0 || exhausted || cur->killed);
    return rc;
}

/* ------------------------------------------------------------ killCursors */

bool mfi_cursors_may_kill(mf_cmd_ctx *ctx, const bson_t *cmd)
{
    bson_iter_t it, el;
    char me[640];
    if (!bson_iter_init_find(&it, cmd, "cursors") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &el))
        return true; /* malformed: the command refuses it */
    owner_of(ctx, me, sizeof me);
    bool any = mfi_authz_may_action(ctx, MFA_killAnyCursor, NULL, NULL);
    while (!any && bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_INT64(&el))
            continue;
        int64_t id = bson_iter_int64(&el);
        char owner[640] = "", ns[MF_MAX_NS_LEN + 1] = "";
        bool found = false;
        pthread_mutex_lock(&ctx->inst->cursors_mu);
        mfi_cursor *c = lookup(ctx->inst, id, NULL);
        if (c) {
            found = true;
            memcpy(owner, c->owner, sizeof owner);
            memcpy(ns, c->ns, sizeof ns);
        }
        pthread_mutex_unlock(&ctx->inst->cursors_mu);
        if (!found || strcmp(owner, me) == 0)
            continue; /* not there (reported), or one's own */
        /* killAnyCursor on its collection: a listCollections cursor's
         * (db.$cmd.listCollections) is its database's */
        char db[128];
        const char *dot = strchr(ns, '.');
        snprintf(db, sizeof db, "%.*s", dot ? (int)(dot - ns) : 0, ns);
        const char *coll = dot ? dot + 1 : "";
        if (!mfi_authz_may_action(ctx, MFA_killAnyCursor, db,
                                  strncmp(coll, "$cmd.", 5) == 0 ? NULL : coll))
            return false;
    }
    return true;
}

int mfi_cmd_kill_cursors(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    bson_iter_t it, ids;
    bool has_ids = false;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_error_set(err, MF_InvalidNamespace, "collection name has invalid type %s",
                            mf_bsonx_type_alias(bson_iter_type(&it)));
    char ns[MF_MAX_NS_LEN + 1];
    snprintf(ns, sizeof ns, "%s.%s", ctx->db, bson_iter_utf8(&it, NULL));
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "cursors") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return mfi_type_error(err, "killCursors", k, &it, "array");
            ids = it;
            has_ids = true;
        } else if (!mfi_is_generic_arg(k)) {
            return mf_error_set(err, 40415, "BSON field 'killCursors.%s' is an unknown field.", k);
        }
    }
    if (!has_ids)
        return mf_error_set(err, 40414,
                            "BSON field 'killCursors.cursors' is missing but a required field");
    bson_t killed = BSON_INITIALIZER, missing = BSON_INITIALIZER, empty = BSON_INITIALIZER;
    uint32_t nk = 0, nm = 0;
    bson_iter_t el;
    bson_iter_recurse(&ids, &el);
    while (bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_INT64(&el)) {
            bson_destroy(&killed);
            bson_destroy(&missing);
            return mf_error_set(err, MF_TypeMismatch,
                                "BSON field 'killCursors.cursors.%s' is the wrong type '%s', "
                                "expected type 'long'",
                                bson_iter_key(&el), mf_bsonx_type_alias(bson_iter_type(&el)));
        }
        int64_t id = bson_iter_int64(&el);
        char key[16];
        const char *k;
        if (mfi_cursor_kill(ctx->inst, id, ns)) {
            mf_uint32_to_key(nk++, &k, key, sizeof key);
            bson_append_int64(&killed, k, -1, id);
        } else {
            mf_uint32_to_key(nm++, &k, key, sizeof key);
            bson_append_int64(&missing, k, -1, id);
        }
    }
    BSON_APPEND_ARRAY(reply, "cursorsKilled", &killed);
    BSON_APPEND_ARRAY(reply, "cursorsNotFound", &missing);
    BSON_APPEND_ARRAY(reply, "cursorsAlive", &empty);
    BSON_APPEND_ARRAY(reply, "cursorsUnknown", &empty);
    bson_destroy(&killed);
    bson_destroy(&missing);
    return 0;
}

/* Errors met while running a query carry mongod's executor prefix. */
void mfi_executor_error(mf_error *err, const char *cmdname)
{
    char msg[sizeof err->msg];
    if (strncmp(err->msg, "Executor error", 14) == 0)
        return;
    snprintf(msg, sizeof msg, "%s", err->msg);
    mf_error_set(err, err->code, "Executor error during %s :: caused by :: %s", cmdname, msg);
}
