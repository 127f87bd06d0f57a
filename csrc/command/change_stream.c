/*
 * change_stream.c -- $changeStream: an aggregate whose pipeline begins
 * with it opens a change stream cursor (docs/change-streams.md).
 *
 * The stage's options are parsed here (mongod's
 * DocumentSourceChangeStreamSpec, its namespace rules and codes); the
 * oplog is read and turned into events by the collection layer
 * (coll/changes.c); the stages after $changeStream run over each event
 * (mf_pipeline_parse_events).  The cursor is tailable and awaitData: a
 * getMore that finds nothing waits for the oplog's next entry (the
 * capped signal) until its maxTimeMS (maxAwaitTimeMS), then replies an
 * empty batch.  Every reply carries postBatchResumeToken: the last
 * event's _id, or, when everything was read, the high-water mark after
 * it.  Events are replied only once durable: a stream resumed after a
 * crash never met an event the crash took away.
 */
#include "command_int.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_FIRST_BATCH 101

/* The codes after which a driver resumes a stream (mongod's
 * isResumableChangeStreamError, for a getMore of a change stream). */
static bool resumable_code(int code)
{
    static const int codes[] = {6,     7,     43,    63,    89,    91,    133,  150,
                                189,   234,   262,   9001,  10107, 11600, 11602, 13435,
                                13436};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (codes[i] == code)
            return true;
    return false;
}

void mfi_change_stream_label(mf_cmd_ctx *ctx, int code)
{
    if (code == MF_ChangeStreamFatalError || code == MF_ChangeStreamHistoryLost)
        ctx->error_label = "NonResumableChangeStreamError";
    else if (resumable_code(code))
        ctx->error_label = "ResumableChangeStreamError";
}

static bool internal_db(const char *db)
{
    return strcmp(db, "admin") == 0 || strcmp(db, "config") == 0 || strcmp(db, "local") == 0;
}

/* The index in `values` (NULL-terminated) of the string at `it`. */
static int parse_enum(const bson_iter_t *it, const char *field, const char *const *values,
                      int *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mfi_type_error(err, "$changeStream", field, it, "string");
    for (int i = 0; values[i]; i++)
        if (strcmp(bson_iter_utf8(it, NULL), values[i]) == 0) {
            *out = i;
            return 0;
        }
    return mf_error_set(err, MF_BadValue,
                        "Enumeration value '%s' for field '$changeStream.%s' is not a valid value.",
                        bson_iter_utf8(it, NULL), field);
}

/* The stage's options into `s` (tokens decoded into ra / sa). */
static int parse_spec(const bson_iter_t *stage, mf_cl_changes_spec *s, mf_cl_token *ra,
                      mf_cl_token *sa, bool *cluster, bool *system_ns, mf_error *err)
{
    bson_iter_t f, ra_at = {0}, sa_at = {0};
    int rc = 0;
    *cluster = *system_ns = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(stage))
        return mf_error_set(err, 50808, "$changeStream stage expects a document as argument");
    bson_iter_recurse(stage, &f);
    while (rc == 0 && bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "resumeAfter") == 0 || strcmp(k, "startAfter") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                return mfi_type_error(err, "$changeStream", k, &f, "object");
            *(k[0] == 'r' ? &ra_at : &sa_at) = f; /* decoded once the options agree */
        } else if (strcmp(k, "startAtOperationTime") == 0) {
            if (!BSON_ITER_HOLDS_TIMESTAMP(&f))
                return mfi_type_error(err, "$changeStream", k, &f, "timestamp");
            bson_iter_timestamp(&f, &s->start_at.secs, &s->start_at.inc);
            s->has_start_at = true;
        } else if (strcmp(k, "fullDocument") == 0) {
            static const char *const v[] = {"default", "updateLookup", "whenAvailable",
                                            "required", NULL};
            int i;
            if ((rc = parse_enum(&f, k, v, &i, err)) == 0)
                s->full_document = (mf_cl_full_doc)i;
        } else if (strcmp(k, "fullDocumentBeforeChange") == 0) {
            static const char *const v[] = {"off", "whenAvailable", "required", NULL};
            int i;
            if ((rc = parse_enum(&f, k, v, &i, err)) == 0)
                s->before_change = (mf_cl_before)i;
        } else if (strcmp(k, "allChangesForCluster") == 0 ||
                   strcmp(k, "showExpandedEvents") == 0 || strcmp(k, "showSystemEvents") == 0 ||
                   strcmp(k, "allowToRunOnSystemNS") == 0 ||
                   strcmp(k, "showMigrationEvents") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&f))
                return mfi_type_error(err, "$changeStream", k, &f, "bool");
            bool b = bson_iter_bool(&f);
            if (strcmp(k, "allChangesForCluster") == 0)
                *cluster = b;
            else if (strcmp(k, "allowToRunOnSystemNS") == 0)
                *system_ns = b;
            else if (strcmp(k, "showExpandedEvents") == 0)
                s->expanded = b;
            else if (strcmp(k, "showSystemEvents") == 0)
                s->system_events = b;
            /* showMigrationEvents: a replica set has no chunk migrations */
        } else {
            /* allowToRunOnConfigDB and showRawUpdateDescription are
             * mongod's internal options: not offered */
            return mf_error_set(err, 40415, "BSON field '$changeStream.%s' is an unknown field.",
                                k);
        }
    }
    if (rc)
        return rc;
    bool has_ra = ra_at.raw != NULL, has_sa = sa_at.raw != NULL;
    if (has_ra && has_sa)
        return mf_error_set(err, 50865, "Do not specify both 'resumeAfter' and 'startAfter' in a "
                                        "$changeStream stage");
    if ((has_ra || has_sa) && s->has_start_at)
        return mf_error_set(err, 40674, "Only one type of resume option is allowed, but multiple "
                                        "were found.");
    if (has_ra && (rc = mf_cl_token_parse(&ra_at, ra, err)) == 0)
        s->resume_after = ra;
    if (has_sa && (rc = mf_cl_token_parse(&sa_at, sa, err)) == 0)
        s->start_after = sa;
    return rc;
}

/* mongod's namespace rules for a stream on db (coll NULL: aggregate 1). */
static int check_ns(const char *db, const char *coll, bool cluster, bool system_ns,
                    mf_error *err)
{
    if (cluster) {
        if (strcmp(db, "admin") != 0 || coll)
            return mf_error_set(err, MF_InvalidOptions,
                                "A $changeStream with 'allChangesForCluster:true' may only be "
                                "opened on the 'admin' database, and with no collection name; "
                                "found %s.%s",
                                db, coll ? coll : "$cmd.aggregate");
        return 0;
    }
    if (internal_db(db))
        return mf_error_set(err, MF_InvalidNamespace,
                            "$changeStream may not be opened on the internal %s database", db);
    if (coll && strncmp(coll, "system.", 7) == 0 && !system_ns)
        return mf_error_set(err, MF_InvalidNamespace,
                            "$changeStream may not be opened on the internal %s.%s collection", db,
                            coll);
    return 0;
}

bool mfi_change_stream_first(const bson_t *pipeline)
{
    bson_iter_t it, st;
    return bson_iter_init(&it, pipeline) && bson_iter_next(&it) &&
           BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &st) && bson_iter_next(&st) &&
           strcmp(bson_iter_key(&st), "$changeStream") == 0;
}

int mfi_change_stream_open(mf_cmd_ctx *ctx, const mfi_change_stream_args *a, bson_t *reply,
                           mf_error *err)
{
    mf_cl_changes_spec s = {0};
    mf_cl_token ra = {0}, sa = {0};
    bool cluster, system_ns;
    bson_iter_t it, st;
    bson_t rest = BSON_INITIALIZER;
    mf_cl_changes *ch = NULL;
    mf_pipeline *p = NULL;
    int rc;

    if (ctx->txn)
        return mf_error_set(err, MF_OperationNotSupportedInTransaction,
                            "Operation not permitted in transaction :: caused by :: $changeStream "
                            "cannot run in a transaction");
    bson_iter_init(&it, a->pipeline);
    bson_iter_next(&it);
    bson_iter_recurse(&it, &st);
    bson_iter_next(&st);
    if ((rc = parse_spec(&st, &s, &ra, &sa, &cluster, &system_ns, err)) != 0 ||
        (rc = check_ns(ctx->db, a->coll, cluster, system_ns, err)) != 0)
        goto done;
    s.db = cluster ? NULL : ctx->db;
    s.coll = a->coll;
    /* the stages after it, over each event */
    uint32_t i = 0;
    while (bson_iter_next(&it)) {
        char key[16];
        const char *k;
        size_t kl = bson_uint32_to_string(i++, &k, key, sizeof key);
        mf_bsonx_append_iter(&rest, k, (int)kl, &it);
    }
    if (!bson_empty(&rest)) {
        mf_agg_opts o = {.db = ctx->db,
                         .coll = a->coll,
                         .let = a->let,
                         .collation = a->collation,
                         .deadline_us = a->deadline_us,
                         .now_ms = mf_clock_wall_ms()};
        if ((rc = mf_pipeline_parse_events(&rest, &o, &p, err)) != 0)
            goto done;
    }
    if ((rc = mf_cl_changes_open(&ctx->inst->cl, &s, &ch, err)) != 0)
        goto done;
    mfi_cursor *cur = calloc(1, sizeof *cur);
    if (!cur) {
        rc = mf_error_oom(err);
        goto done;
    }
    snprintf(cur->ns, sizeof cur->ns, "%s", a->ns);
    cur->changes = ch;
    cur->pipeline = p;
    cur->limit = -1;
    cur->tailable = cur->await_data = true;
    cur->deadline.at_us = a->deadline_us;
    ch = NULL;
    p = NULL;
    int64_t first = a->batch_size >= 0 ? a->batch_size : DEFAULT_FIRST_BATCH;
    rc = mfi_cursor_first_batch(ctx, cur, first, false, reply, err);
    if (rc == 0)
        mfi_ctx_wrote(ctx, mf_cl_changes_lsn(cur->changes));
done:
    mf_cl_changes_free(ch);
    mf_pipeline_free(p);
    mf_cl_token_free(&ra);
    mf_cl_token_free(&sa);
    bson_destroy(&rest);
    return rc;
}

/* The _id of `doc` as a document of its own ({_id: ...}), owned. */
static bson_t *id_of(const bson_t *doc)
{
    bson_iter_t it;
    bson_t *d = bson_new();
    if (bson_iter_init_find(&it, doc, "_id"))
        mf_bsonx_append_iter(d, "_id", 3, &it);
    return d;
}

int mfi_change_stream_fill(mfi_cursor *cur, mfi_batch *b, bool *exhausted, mf_error *err)
{
    int rc = 0;
    bool none = false;
    *exhausted = false;
    while (rc == 0 && (b->max_docs < 0 || b->n < (uint64_t)b->max_docs)) {
        bson_t ev, shaped;
        const bson_t *doc = &ev;
        bool kept = true;
        if (cur->has_stash) {
            /* an event that did not fit the last batch */
            rc = mfi_batch_add_copy(b, cur->stash.data, cur->stash.len, err);
            if (rc == 0) {
                cur->has_stash = false;
                cur->stash.len = 0;
                bson_destroy(cur->cs_last);
                cur->cs_last = cur->cs_stash_id;
                cur->cs_stash_id = NULL;
            }
            continue;
        }
        if ((rc = mf_cl_changes_next(cur->changes, &ev, &none, err)) != 0 || none)
            break;
        bson_t *id = id_of(&ev);
        if (cur->pipeline) {
            rc = mf_pipeline_run_event(cur->pipeline, &ev, &shaped, &kept, err);
            if (rc == 0 && kept) {
                /* the token must come out as it went in */
                bson_iter_t a, x;
                bool same = bson_iter_init_find(&x, &shaped, "_id") &&
                            bson_iter_init_find(&a, &ev, "_id") &&
                            mf_bsonx_binary_equal(&a, &x);
                if (!same) {
                    char want[256], got[256];
                    bson_t *gid = id_of(&shaped);
                    mf_bsonx_to_string(id, want, sizeof want);
                    mf_bsonx_to_string(gid, got, sizeof got);
                    bson_destroy(gid);
                    bson_destroy(&shaped);
                    rc = mf_error_set(err, MF_ChangeStreamFatalError,
                                      "Encountered an event whose _id field, which contains the "
                                      "resume token, was modified by the pipeline. Modifying the "
                                      "_id field of an event makes it impossible to resume the "
                                      "stream from that point. Only transformations that retain "
                                      "the unmodified _id field are allowed. Expected: %s but "
                                      "found: %s",
                                      want, got);
                }
            }
            if (rc == 0 && kept)
                doc = &shaped;
        }
        if (rc == 0 && kept) {
            if (doc->len > MF_MAX_BSON_OBJECT_SIZE)
                rc = mf_error_set(err, MF_BSONObjectTooLarge,
                                  "BSONObj size: %u (0x%X) is invalid. Size must be between 0 "
                                  "and 16793600(16MB)",
                                  doc->len, doc->len);
            else if (!mfi_batch_fits(b, doc->len)) {
                if (mf_buf_append(&cur->stash, bson_get_data(doc), doc->len) != 0)
                    rc = mf_error_oom(err);
                cur->has_stash = rc == 0;
            } else {
                rc = mfi_batch_add_copy(b, bson_get_data(doc), doc->len, err);
            }
        }
        /* the last event the stream is past (a stashed one: once sent) */
        if (rc == 0 && cur->has_stash) {
            cur->cs_stash_id = id;
        } else if (rc == 0) {
            bson_destroy(cur->cs_last);
            cur->cs_last = id;
        } else {
            bson_destroy(id);
        }
        if (cur->pipeline && kept && doc == &shaped)
            bson_destroy(&shaped);
        bson_destroy(&ev);
        if (cur->has_stash)
            break;
    }
    /* what the reply says the stream has come to: the high-water mark
     * when everything was read, else the last event's token */
    bson_destroy(cur->cs_pbrt);
    cur->cs_pbrt = bson_new();
    bson_iter_t it;
    if (!(none && !mf_cl_changes_done(cur->changes)) && cur->cs_last &&
        bson_iter_init_find(&it, cur->cs_last, "_id"))
        mf_bsonx_append_iter(cur->cs_pbrt, "postBatchResumeToken", -1, &it);
    else
        mf_cl_changes_hwm(cur->changes, cur->cs_pbrt, "postBatchResumeToken");
    *exhausted = rc == 0 && mf_cl_changes_done(cur->changes) && !cur->has_stash;
    b->pbrt = cur->cs_pbrt;
    return rc;
}
