/*
 * retry.c -- retryable writes in the one-member replica set (issue 47,
 * docs/transactions.md).
 *
 * A write command sent with lsid and txnNumber (and no autocommit) is a
 * retryable write: each of its statements (an insert's document, an
 * update's or delete's statement, findAndModify itself) has a stmtId --
 * the command's stmtIds[i], or stmtId + i, or i -- and runs at most once
 * for its (session, txnNumber).  A statement that wrote is logged with
 * lsid, txnNumber, stmtId and prevOpTime in its oplog entry, and its
 * session's config.transactions record {txnNum, lastWriteOpTime} is
 * written in the same engine write (coll/write.c), so after kill -9 the
 * record is there exactly when the write is.  A retry of an executed
 * statement is answered from its oplog entry (and findAndModify from
 * config.image_collection) and writes nothing.
 *
 * The state here is what the log gives back: per session, the txnNumber
 * in progress and its executed statements (stmtId -> the ts of its
 * entry).  It is loaded on a session's first retryable write after a
 * start, by walking the oplog back from the record's lastWriteOpTime
 * along prevOpTime.  A session runs one retryable write at a time: a
 * command checks its session out for its whole run (others wait), as
 * mongod's session checkout does.
 *
 * Statements that wrote nothing (an update matching no document) leave no
 * entry and run again on a retry, as they would on mongod.
 */
#include "command_int.h"

#include <stdlib.h>
#include <string.h>

int mfi_txn_table_open(mf_instance *inst, mf_error *err)
{
    mfi_txn_table *t = calloc(1, sizeof *t);
    if (!t)
        return mf_error_oom(err);
    pthread_mutex_init(&t->mu, NULL);
    pthread_mutex_init(&t->pmu, NULL);
    pthread_cond_init(&t->cond, NULL);
    inst->txns = t;
    return 0;
}

void mfi_txn_table_close(mf_instance *inst)
{
    mfi_txn_table *t = inst->txns;
    if (!t)
        return;
    for (txn_state *s = t->list, *nx; s; s = nx) {
        nx = s->next;
        mfi_txn_state_free(NULL, s); /* (the transactions close with coll/) */
        free(s->stmts);
        free(s);
    }
    for (size_t i = 0; i < t->npending; i++)
        free(t->pending[i].ns);
    free(t->pending);
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->pmu);
    pthread_mutex_destroy(&t->mu);
    free(t);
    inst->txns = NULL;
}

/* Free the states idle past the session timeout (mutex held). */
static void prune(mfi_txn_table *t, int64_t now_ms)
{
    int64_t oldest = now_ms - (int64_t)MF_SESSION_TIMEOUT_MINUTES * 60 * 1000;
    for (txn_state **pp = &t->list; *pp;) {
        txn_state *s = *pp;
        if (s->busy || s->last_use_ms >= oldest || s->phase == MFI_TXN_IN_PROGRESS) {
            pp = &s->next; /* (a transaction is reaped first: mfi_txn_reap) */
            continue;
        }
        *pp = s->next;
        mfi_txn_state_free(NULL, s);
        free(s->stmts);
        free(s);
        t->n--;
    }
    t->n_at_prune = t->n;
}

/* Check out the state of session (id, uid), waiting while another command
 * has it. */
txn_state *mfi_session_checkout(mfi_txn_table *t, const uint8_t id[16], const uint8_t uid[32])
{
    int64_t now = mf_clock_wall_ms();
    pthread_mutex_lock(&t->mu);
    txn_state *s;
again:
    for (s = t->list; s; s = s->next)
        if (memcmp(s->id, id, 16) == 0 && memcmp(s->uid, uid, 32) == 0)
            break;
    if (s && s->busy) {
        pthread_cond_wait(&t->cond, &t->mu);
        goto again;
    }
    if (!s) {
        if (t->n >= 2 * t->n_at_prune + 64)
            prune(t, now);
        s = calloc(1, sizeof *s);
        if (!s) {
            pthread_mutex_unlock(&t->mu);
            return NULL;
        }
        memcpy(s->id, id, 16);
        memcpy(s->uid, uid, 32);
        s->txn_number = -1;
        s->next = t->list;
        t->list = s;
        t->n++;
    }
    s->busy = true;
    s->last_use_ms = now;
    pthread_mutex_unlock(&t->mu);
    return s;
}

void mfi_session_checkin(mfi_txn_table *t, txn_state *s)
{
    pthread_mutex_lock(&t->mu);
    s->busy = false;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->mu);
}

/* The executed statements are kept sorted by stmtId (a batch's come in
 * order: appended), so a statement is found by binary search, not by a
 * scan per statement (quadratic over a large batch). */
static size_t stmt_pos(const txn_state *s, int32_t stmt_id)
{
    size_t lo = 0, hi = s->nstmts;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->stmts[mid].stmt_id < stmt_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int add_stmt(txn_state *s, int32_t stmt_id, mf_cl_optime t, mf_error *err)
{
    if (s->nstmts == s->capstmts) {
        size_t cap = s->capstmts ? 2 * s->capstmts : 8;
        stmt_rec *v = realloc(s->stmts, cap * sizeof *v);
        if (!v)
            return mf_error_oom(err);
        s->stmts = v;
        s->capstmts = cap;
    }
    size_t at = s->nstmts && s->stmts[s->nstmts - 1].stmt_id < stmt_id ? s->nstmts
                                                                       : stmt_pos(s, stmt_id);
    if (at < s->nstmts && s->stmts[at].stmt_id == stmt_id)
        return 0; /* known already (the load walks newest first) */
    memmove(&s->stmts[at + 1], &s->stmts[at], (s->nstmts - at) * sizeof *s->stmts);
    s->stmts[at] = (stmt_rec){stmt_id, t};
    s->nstmts++;
    return 0;
}

static bool optime_of(const bson_t *doc, const char *key, mf_cl_optime *t)
{
    bson_iter_t it, f;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &f) || !bson_iter_find(&f, "ts") || !BSON_ITER_HOLDS_TIMESTAMP(&f))
        return false;
    bson_iter_timestamp(&f, &t->secs, &t->inc);
    return true;
}

/* The session's state from its config.transactions record and the oplog
 * chain of its last txnNumber (first use after a start). */
int mfi_session_load(mf_instance *inst, txn_state *s, const bson_t *lsid, mf_error *err)
{
    bson_t rec;
    bool found;
    bson_iter_t it;
    mf_engine_catalog_lock(inst->engine, false);
    int rc = mf_cl_read_by_id(inst->engine, "config.transactions", lsid, &rec, &found, err);
    mf_engine_catalog_unlock(inst->engine);
    if (rc == 0 && found && bson_iter_init_find(&it, &rec, "txnNum") && BSON_ITER_HOLDS_INT64(&it)) {
        s->txn_number = bson_iter_int64(&it);
        /* a committed transaction (txn.c's commit writes the state): a
         * retried commitTransaction is answered ok, as mongod does */
        if (bson_iter_init_find(&it, &rec, "state") && BSON_ITER_HOLDS_UTF8(&it) &&
            strcmp(bson_iter_utf8(&it, NULL), "committed") == 0)
            s->phase = MFI_TXN_COMMITTED;
        mf_cl_optime t = {0, 0};
        optime_of(&rec, "lastWriteOpTime", &t);
        s->last = t;
        /* the executed statements, newest first along prevOpTime */
        while (rc == 0 && t.secs) {
            bson_t entry;
            bool there;
            rc = mf_cl_oplog_entry_at(inst->cl.oplog, t, &entry, &there, err);
            if (rc == 0 && there && bson_iter_init_find(&it, &entry, "stmtId") &&
                BSON_ITER_HOLDS_INT32(&it))
                rc = add_stmt(s, bson_iter_int32(&it), t, err);
            if (!there || !optime_of(&entry, "prevOpTime", &t))
                t.secs = t.inc = 0; /* trimmed away: what is left is unknown */
            bson_destroy(&entry);
        }
    }
    bson_destroy(&rec);
    if (rc == 0)
        s->loaded = true;
    return rc;
}

int mfi_session_open(mf_instance *inst, const uint8_t id[16], const uint8_t uid[32],
                     bson_t *lsid, txn_state **out, mf_error *err)
{
    txn_state *s = *out = mfi_session_checkout(inst->txns, id, uid);
    if (!s)
        return mf_error_oom(err);
    bson_init(lsid);
    bson_append_binary(lsid, "id", 2, BSON_SUBTYPE_UUID, id, 16);
    bson_append_binary(lsid, "uid", 3, BSON_SUBTYPE_BINARY, uid, 32);
    if (s->loaded)
        return 0;
    bson_t key = BSON_INITIALIZER;
    BSON_APPEND_DOCUMENT(&key, "_id", lsid);
    int rc = mfi_session_load(inst, s, &key, err);
    bson_destroy(&key);
    return rc;
}

/* The hex of a UUID as mongod prints a session id. */
void mfi_uuid_str(const uint8_t id[16], char out[37])
{
    static const char hex[] = "0123456789abcdef";
    char *p = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = hex[id[i] >> 4];
        *p++ = hex[id[i] & 15];
    }
    *p = '\0';
}

/* Whether `def` is a command a retryable write may be: insert, update,
 * delete, findAndModify. */
static bool retryable_command(const mf_cmd_def *def)
{
    static const char *const names[] = {"insert", "update", "delete", "findAndModify",
                                        "findandmodify"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(def->name, names[i]) == 0)
            return true;
    return false;
}

int mfi_retry_begin(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                    const uint8_t id[16], const uint8_t uid[32], int64_t txn_number,
                    mfi_retry *r, mf_error *err)
{
    bson_iter_t it;
    memset(r, 0, sizeof *r);
    if (!retryable_command(def))
        return mf_error_set(err, 50768,
                            "txnNumber may only be provided for multi-document transactions and "
                            "retryable write commands. autocommit:false was not provided, and %s "
                            "is not a retryable write command.",
                            def->name);
    int rc = mfi_session_open(ctx->inst, id, uid, &r->lsid, &r->state, err);
    if (!r->state)
        return rc;
    txn_state *s = r->state;
    r->txn_number = txn_number;
    ctx->retry = r;
    if (rc)
        return rc;
    if (txn_number < s->txn_number) {
        char sid[37];
        mfi_uuid_str(id, sid);
        return mf_error_set(err, MF_TransactionTooOld,
                            "Retryable write with txnNumber %lld is prohibited on session %s "
                            "because a newer retryable write with txnNumber %lld has already "
                            "started on this session.",
                            (long long)txn_number, sid, (long long)s->txn_number);
    }
    if (txn_number == s->txn_number && s->phase != MFI_TXN_NONE)
        return mf_error_set(err, MF_IncompleteTransactionHistory,
                            "Cannot retry a retryable write that has been converted into a "
                            "transaction");
    if (txn_number > s->txn_number) {
        mfi_txn_state_free(ctx->inst, s); /* a transaction in progress ends */
        s->phase = MFI_TXN_NONE;
        s->txn_number = txn_number;
        s->nstmts = 0;
        s->last = (mf_cl_optime){0, 0};
    }
    /* the statements' ids: stmtIds, or from stmtId on, or 0, 1, ... */
    if (bson_iter_init_find(&it, cmd, "stmtIds") && BSON_ITER_HOLDS_ARRAY(&it)) {
        r->stmt_ids = it;
        r->has_stmt_ids = true;
    } else if (bson_iter_init_find(&it, cmd, "stmtId") && BSON_ITER_HOLDS_INT32(&it)) {
        r->first_stmt_id = bson_iter_int32(&it);
    }
    return 0;
}

void mfi_retry_end(mf_cmd_ctx *ctx)
{
    mfi_retry *r = ctx->retry;
    if (!r)
        return;
    if (r->state)
        mfi_session_checkin(ctx->inst->txns, r->state);
    bson_destroy(&r->lsid);
    free(r->retried);
    ctx->retry = NULL;
}

int32_t mfi_retry_stmt_id(const mfi_retry *r, uint32_t i)
{
    if (r->has_stmt_ids) {
        bson_iter_t e;
        uint32_t k = 0;
        bson_iter_recurse(&r->stmt_ids, &e);
        while (bson_iter_next(&e))
            if (k++ == i && BSON_ITER_HOLDS_INT32(&e))
                return bson_iter_int32(&e);
    }
    return r->first_stmt_id + (int32_t)i;
}

int mfi_retry_check(mf_cmd_ctx *ctx, int32_t stmt_id, bool *executed, bson_t *entry,
                    mf_error *err)
{
    mfi_retry *r = ctx->retry;
    txn_state *s = r->state;
    bson_init(entry);
    *executed = false;
    r->injected = false;
    size_t i = stmt_pos(s, stmt_id);
    if (i < s->nstmts && s->stmts[i].stmt_id == stmt_id) {
        bool there;
        bson_destroy(entry);
        int rc = mf_cl_oplog_entry_at(ctx->inst->cl.oplog, s->stmts[i].t, entry, &there, err);
        if (rc)
            return rc;
        if (!there) {
            char sid[37];
            mfi_uuid_str(s->id, sid);
            return mf_error_set(err, MF_IncompleteTransactionHistory,
                                "Incomplete history detected for transaction %lld on session %s",
                                (long long)s->txn_number, sid);
        }
        *executed = true;
        if (r->nretried == r->capretried) { /* (a reply without it is still right) */
            size_t cap = r->capretried ? r->capretried * 2 : 8;
            int32_t *v = realloc(r->retried, cap * sizeof *v);
            if (!v)
                return 0;
            r->retried = v;
            r->capretried = cap;
        }
        r->retried[r->nretried++] = stmt_id;
        return 0;
    }
    /* onPrimaryTransactionalWrite (test commands): as mongod's, where a
     * retryable write's statement is about to commit -- hang up after it
     * (closeConnection, default true), and/or fail it before it writes
     * (failBeforeCommitExceptionCode) */
    bson_t data;
    if (mfi_fail_point_fires(ctx->inst, MFI_FP_ON_PRIMARY_TXN_WRITE, MFI_FP_FIRST, NULL, NULL,
                             &data)) {
        bson_iter_t it;
        int64_t code = 0;
        if (!bson_iter_init_find(&it, &data, "closeConnection") || bson_iter_as_bool(&it)) {
            ctx->flags |= MF_RUN_CLOSE;
        }
        bool fail = bson_iter_init_find(&it, &data, "failBeforeCommitExceptionCode") &&
                    mfi_bson_extract_integer(&it, "failBeforeCommitExceptionCode", &code,
                                             NULL) == 0;
        bson_destroy(&data);
        if (fail) {
            r->injected = true;
            return mf_error_set(err, (int)code, "Failing write for test due to "
                                                "failBeforeCommitExceptionCode");
        }
    }
    /* the statement runs: its write is logged as this session's */
    r->stmt = (mf_cl_stmt){.lsid = &r->lsid, .txn_number = r->txn_number, .stmt_id = stmt_id,
                           .prev = s->last};
    r->op_before = ctx->log.op_time;
    return 0;
}

bool mfi_retry_injected(const mf_cmd_ctx *ctx)
{
    return ctx->retry && ctx->retry->injected;
}

mf_cl_log *mfi_retry_log(mf_cmd_ctx *ctx)
{
    mf_cl_log *lg = mfi_ctx_log(ctx);
    if (lg && ctx->retry)
        lg->stmt = &ctx->retry->stmt;
    return lg;
}

int mfi_retry_done(mf_cmd_ctx *ctx, int32_t stmt_id, mf_error *err)
{
    mfi_retry *r = ctx->retry;
    mf_cl_optime t = ctx->log.op_time;
    ctx->log.stmt = NULL;
    if (!r)
        return 0;
    r->stmt.image = NULL;
    /* only a statement that wrote has an entry to answer a retry from */
    if (t.secs == r->op_before.secs && t.inc == r->op_before.inc)
        return 0;
    r->state->last = t;
    return add_stmt(r->state, stmt_id, t, err);
}
