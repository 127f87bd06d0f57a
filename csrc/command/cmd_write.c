/*
 * cmd_write.c -- insert, and count (the first reader of stored documents).
 *
 * Storage layout of a collection (engine.h):
 *   record tree   RecordId (8 bytes, big endian) -> document bytes
 *   _id_ index    key encoding of _id (bsonx/keyenc.c) -> RecordId
 * RecordIds increase per collection: the next one is one past the last key
 * of the record tree, read when the collection is first written after
 * open.  Each document is one engine write (record + index entry), so after
 * a crash a document is there with its index entry, or not at all; the
 * command syncs once, after its last write (group commit), before replying.
 */
#include "command_int.h"
#include "../query/query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID_INDEX "_id_"

void mfi_duplicate_error(bson_t *werr, uint32_t index, const char *ns, const mf_cl_dup *dup)
{
    char msg[1024];
    mf_cl_dup_message(dup, ns, msg, sizeof msg);
    /* mongod's WriteError::serialize: index, code, errmsg, then the
     * error's extra info. */
    BSON_APPEND_INT32(werr, "index", (int32_t)index);
    BSON_APPEND_INT32(werr, "code", MF_DuplicateKey);
    BSON_APPEND_UTF8(werr, "errmsg", msg);
    BSON_APPEND_DOCUMENT(werr, "keyPattern", &dup->key_pattern);
    BSON_APPEND_DOCUMENT(werr, "keyValue", &dup->key_value);
}

bool mfi_write_fatal(int rc)
{
    /* Not MF_OutOfDiskSpace: a full disk refuses a write before it changes
     * anything and leaves the engine usable, so it is that item's write
     * error, and the items before it are synced and counted.
     * MaxTimeMSExpired is fatal: an interruption fails the whole command,
     * as mongod's handleError rethrows one ("These have always failed the
     * whole batch"); the writes before it stay and are synced. */
    return rc == MF_InternalError || rc == MF_DataCorruption || rc == MF_IllegalOperation ||
           rc == MF_InterruptedAtShutdown || rc == MF_MaxTimeMSExpired;
}

/* mongod's WriteError: index, code, errmsg -- no codeName. */
void mfi_write_error(bson_t *werr, uint32_t index, const mf_error *err)
{
    BSON_APPEND_INT32(werr, "index", (int32_t)index);
    BSON_APPEND_INT32(werr, "code", err->code);
    BSON_APPEND_UTF8(werr, "errmsg", err->msg);
}

bool mfi_bypass_validation(const bson_t *cmd)
{
    bson_iter_t it;
    /* mongod reads it as trueValue(): true, or a number other than 0 */
    return bson_iter_init_find(&it, cmd, "bypassDocumentValidation") &&
           (BSON_ITER_HOLDS_BOOL(&it) || mfi_is_number(&it)) && bson_iter_as_bool(&it);
}

int mfi_coll_for_write(mf_cmd_ctx *ctx, const char *ns, mf_coll **out, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c) {
        mf_engine_catalog_unlock(e);
        bson_t none = BSON_INITIALIZER; /* no options, no default collation */
        int rc = mf_cl_create(e, &ctx->log, ns, &none, NULL, true, err);
        if (rc && rc != MF_NamespaceExists)
            return rc;
        if (rc == 0)
            mfi_txn_note_created(ctx, ns); /* dropped again if it aborts */
        mf_engine_catalog_lock(e, false);
        c = mf_engine_coll(e, ns);
        if (!c) {
            mf_engine_catalog_unlock(e);
            return mf_error_set(err, MF_NamespaceNotFound, "collection %s vanished", ns);
        }
    }
    *out = c;
    return 0;
}

int mfi_write_wait(mf_cmd_ctx *ctx, const char *ns, uint64_t holder, bool create, mf_coll **c,
                   mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    if (*c)
        mf_coll_unlock(*c);
    mf_engine_catalog_unlock(e);
    *c = NULL;
    int rc = mf_cl_txns_wait(ctx->inst->cl.txns, holder, ctx->deadline.at_us, err);
    if (rc == 0 && create && (rc = mfi_coll_for_write(ctx, ns, c, err)) == 0) {
        mf_coll_lock(*c, true);
        return 0;
    }
    mf_engine_catalog_lock(e, false);
    if (rc == 0 && (*c = mf_engine_coll(e, ns)) != NULL)
        mf_coll_lock(*c, true);
    return rc;
}

int mfi_user_write_ns(mf_instance *inst, const char *ns, mf_error *err)
{
    const char *coll = strchr(ns, '.');
    if (coll && (strcmp(coll + 1, "system.profile") == 0 || strcmp(coll + 1, "system.views") == 0))
        return mf_error_set(err, MF_InvalidNamespace, "cannot write to %s", ns);
    int rc = mfi_view_refuse(inst, ns, err);
    return rc ? rc : mfi_repl_check_write(inst, ns, err);
}

int mfi_cmd_insert(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    char ns[320];
    bson_iter_t it, docs;
    int rc;
    if ((rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err)) != 0)
        return rc;
    if (!bson_iter_init_find(&docs, cmd, "documents"))
        return mf_error_set(err, 40414,
                            "BSON field 'insert.documents' is missing but a required field");
    if (!BSON_ITER_HOLDS_ARRAY(&docs))
        return mfi_type_error(err, "insert", "documents", &docs, "array");
    bool ordered = true;
    if (bson_iter_init_find(&it, cmd, "ordered"))
        ordered = bson_iter_as_bool(&it);
    uint32_t count = 0;
    bson_iter_t d;
    bson_iter_recurse(&docs, &d);
    while (bson_iter_next(&d))
        count++;
    if (count == 0 || count > MF_MAX_WRITE_BATCH_SIZE)
        return mf_error_set(err, MF_InvalidLength,
                            "Write batch sizes must be between 1 and %d. Got %u operations.",
                            MF_MAX_WRITE_BATCH_SIZE, count);

    mf_coll *c;
    if ((rc = mfi_user_write_ns(ctx->inst, ns, err)) != 0 ||
        (rc = mfi_coll_for_write(ctx, ns, &c, err)) != 0)
        return rc;

    bson_t werrs = BSON_INITIALIZER;
    uint32_t nerr = 0, n = 0, index = 0;
    mf_lsn lsn = 0;
    uint64_t next_id;
    mf_cl_indexes ix = {0};
    mf_cl_dup dup = {0};
    mf_cl_validator *val = NULL;
    bool validate = !mfi_bypass_validation(cmd);
    int64_t ninserted = 0; /* index keys, of the indexes loaded before the last */
    mf_coll_lock(c, true);
    rc = mf_cl_next_record_id(e, c, &next_id, err);
    if (rc == 0)
        rc = mf_cl_indexes_load(c, &ix, err);
    if (rc == 0 && validate)
        rc = mf_cl_validator_load(c, &val, err);
    ix.val = val;
    bson_iter_recurse(&docs, &d);
    bson_iter_t at = d; /* before the document being inserted */
    while (rc == 0 && bson_iter_next(&d)) {
        bson_t stored;
        bson_iter_t id;
        mf_error ierr;
        int r;
        /* maxTimeMS: each document counts into the command's deadline;
         * its expiry fails the whole command (mfi_write_fatal), and the
         * documents inserted before it stay */
        if ((rc = mf_deadline_check(&ctx->deadline, err)) != 0)
            break;
        if (!BSON_ITER_HOLDS_DOCUMENT(&d)) {
            r = mf_error_set(&ierr, MF_TypeMismatch, "documents must be objects");
            bson_init(&stored);
        } else {
            uint32_t len;
            const uint8_t *data;
            bson_t doc;
            bson_iter_document(&d, &len, &data);
            bson_init_static(&doc, data, len);
            bson_init(&stored); /* stored_form fills it; inline, nothing to free yet */
            /* a retryable write's statement runs once (retry.c) */
            int32_t sid = ctx->retry ? mfi_retry_stmt_id(ctx->retry, index) : 0;
            bool before = false;
            r = 0;
            if (ctx->retry) {
                bson_t entry;
                r = mfi_retry_check(ctx, sid, &before, &entry, &ierr);
                bson_destroy(&entry);
                if (r == 0 && !before)
                    mfi_retry_log(ctx);
            }
            if (r == 0 && !before) {
                mf_cl_op_statement(false);
                r = mf_cl_insert_doc(e, c, &ix, &next_id, &doc, &stored, &id, &lsn, &dup,
                                     mfi_ctx_log(ctx), &ierr);
                int dr = mfi_retry_done(ctx, sid, &ierr);
                if (r == 0)
                    r = dr;
            }
        }
        /* a transaction holds what it needs (coll/txn.c): wait for it with
         * the collection let go, then insert the document again */
        uint64_t holder = r == MF_WriteConflict ? mf_cl_op_take_wait() : 0;
        if (holder) {
            bson_destroy(&stored);
            ninserted += ix.keys_inserted;
            mf_cl_indexes_free(&ix);
            mf_cl_validator_free(val);
            val = NULL;
            r = mfi_write_wait(ctx, ns, holder, true, &c, &ierr);
            if (r == 0)
                r = mf_cl_next_record_id(e, c, &next_id, &ierr);
            if (r == 0)
                r = mf_cl_indexes_load(c, &ix, &ierr);
            if (r == 0 && validate)
                r = mf_cl_validator_load(c, &val, &ierr);
            ix.val = val;
            if (r == 0) {
                d = at; /* this document again */
                continue;
            }
            *err = ierr;
            rc = r;
            break;
        }
        if (r == 0) {
            n++;
            atomic_fetch_add_explicit(&ctx->inst->counters.op_insert, 1, memory_order_relaxed);
        } else {
            char key[16];
            const char *k;
            bson_t we;
            mf_uint32_to_key(nerr++, &k, key, sizeof key);
            bson_append_document_begin(&werrs, k, -1, &we);
            if (r == MF_DuplicateKey && dup.has)
                mfi_duplicate_error(&we, index, ns, &dup);
            else
                mfi_write_error(&we, index, &ierr);
            if (r == MF_DocumentValidationFailure && val)
                BSON_APPEND_DOCUMENT(&we, "errInfo", mf_cl_validator_info(val));
            bson_append_document_end(&werrs, &we);
            if (mfi_write_fatal(r) && !mfi_retry_injected(ctx)) {
                /* The engine failed: nothing more can be written. */
                *err = ierr;
                rc = r;
            }
        }
        bson_destroy(&stored);
        at = d;
        index++;
        if (r != 0 && ordered)
            break;
    }
    if (ctx->dbg) {
        ctx->dbg->ninserted = n;
        ctx->dbg->keys_inserted = ninserted + ix.keys_inserted;
    }
    mf_cl_indexes_free(&ix);
    mf_cl_dup_clear(&dup);
    mf_cl_validator_free(val);
    if (c) /* (NULL: lost while waiting for a transaction) */
        mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    mfi_ctx_wrote(ctx, lsn); /* the dispatcher syncs before the reply */
    if (rc == 0) {
        BSON_APPEND_INT32(reply, "n", (int32_t)n);
        mfi_write_reply_base(ctx, reply, nerr, &werrs);
    }
    bson_destroy(&werrs);
    return rc;
}

/* --------------------------------------------------------------- count */

int mfi_cmd_count(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    bson_iter_t it, hint;
    bson_t q;
    bool has_q = false, has_hint = false;
    mf_matcher *m = NULL;
    int64_t skip = 0, limit = 0;
    int rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err);
    if (rc)
        return rc;
    if (mfi_is_view(ctx->inst, ns))
        return mfi_view_count(ctx, ns, cmd, reply, err);
    if (bson_iter_init_find(&it, cmd, "query") && !BSON_ITER_HOLDS_NULL(&it)) {
        uint32_t len;
        const uint8_t *data;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return mfi_type_error(err, "count", "query", &it, "object");
        bson_iter_document(&it, &len, &data);
        has_q = bson_init_static(&q, data, len);
    }
    if (bson_iter_init_find(&it, cmd, "skip") && !mfi_as_int64(&it, &skip))
        return mfi_type_error(err, "count", "skip", &it, "long");
    if (skip < 0)
        return mf_error_set(err, 51024, "BSON field 'skip' value must be >= 0, actual value '%lld'",
                            (long long)skip);
    if (bson_iter_init_find(&it, cmd, "limit") && !mfi_as_int64(&it, &limit))
        return mfi_type_error(err, "count", "limit", &it, "long");
    if (bson_iter_init_find(&hint, cmd, "hint")) {
        if ((rc = mfi_hint_arg(&hint, "count.hint", err)) != 0)
            return rc;
        has_hint = true;
    }
    mf_collator *coll = NULL;
    bool has_coll = bson_iter_init_find(&it, cmd, "collation");
    if ((rc = mfi_collation_of_arg(e, ns, has_coll ? &it : NULL, "count", &coll, err)) != 0)
        return rc;
    mf_expr_ctx *xctx = NULL;
    mf_expr_hooks hooks;
    if (has_q && (rc = mf_expr_ctx_new_coll(NULL, mf_clock_wall_ms(), coll, &xctx, err)) != 0) {
        mf_collator_unref(coll);
        return rc;
    }
    if (xctx)
        mf_expr_ctx_hooks(xctx, &hooks);
    if (has_q && (rc = mf_matcher_parse_coll(&q, &hooks, coll, &m, err)) != 0) {
        mf_expr_ctx_free(xctx);
        mf_collator_unref(coll);
        return rc;
    }
    if (limit < 0)
        limit = -limit;
    int64_t n = 0, seen = 0;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (c) {
        mf_scan *scan = NULL;
        bool sorted;
        mf_coll_lock(c, false);
        mf_cl_indexes ix = {0};
        rc = mf_cl_indexes_load(c, &ix, err);
        if (rc == 0)
            rc = mf_cl_scan_new(mfi_cl(ctx->inst), c, &ix, has_q ? &q : NULL, has_hint ? &hint : NULL,
                              NULL, coll, &scan, &sorted, err);
        if (rc == 0) {
            mf_scan_count_only(scan, true);
            mf_scan_deadline(scan, &ctx->deadline);
        }
        while (rc == 0 && (limit == 0 || n < limit)) {
            mf_scan_row row;
            bool valid;
            if ((rc = mf_scan_next(scan, e, c, m, &row, &valid, err)) != 0 || !valid)
                break;
            if (seen++ >= skip)
                n++;
        }
        mf_scan_stats since = {0};
        mfi_op_debug_scan(ctx->dbg, scan, &since);
        mf_scan_free(scan);
        mf_cl_indexes_free(&ix);
        mf_coll_unlock(c);
    }
    mf_engine_catalog_unlock(e);
    mf_matcher_free(m);
    mf_expr_ctx_free(xctx);
    mf_collator_unref(coll);
    if (rc == 0)
        BSON_APPEND_INT32(reply, "n", (int32_t)n);
    return rc;
}
