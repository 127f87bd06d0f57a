/*
 * txn.c -- multi-document transactions, the session side (issue 47,
 * docs/transactions.md): which statement starts, continues, commits or
 * aborts a session's transaction, mongod's checks and error codes, and
 * the labels drivers retry on.  The snapshot, the write set and the
 * commit as one engine write are coll/txn.c's.
 *
 * A statement of a transaction carries lsid, txnNumber and autocommit:
 * false (the first also startTransaction: true).  It checks its session
 * out (retry.c: one command at a time per session), binds the
 * transaction to its thread (mf_cl_txn_bind) so every read and write of
 * the command goes through the transaction's snapshot and write set, and
 * at its end unbinds it; a statement that fails aborts the transaction,
 * as mongod's does.  commitTransaction and abortTransaction end it.  A
 * transaction older than transactionLifetimeLimitSeconds is aborted by
 * the next command that meets it, or by the monitor's pass (mfi_txn_reap).
 *
 * Collections a transaction creates (create, or an insert's implicit
 * creation) are created at once, empty, and dropped again if it aborts;
 * until it ends they are pending (the table's `pending`): the others do
 * not list them, wait for the transaction before writing them, and
 * another transaction writing one conflicts, as mongod keeps such a
 * collection invisible until the commit.
 */
#include "command_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The number of the transaction this thread's command runs in. */
static _Thread_local int64_t current_number;

int64_t mfi_txn_number(void)
{
    return current_number;
}

/* The commands mongod 7.0 runs inside a transaction. */
static bool allowed_in_txn(const char *name)
{
    static const char *const names[] = {
        "abortTransaction", "aggregate", "commitTransaction", "create", "createIndexes",
        "delete", "distinct", "find", "findAndModify", "findandmodify", "getMore", "insert",
        "killCursors", "update"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

/* Forget the collections `s`'s transaction created: no longer pending
 * (`t` may be NULL: closing). */
static void forget_created(mfi_txn_table *t, txn_state *s)
{
    if (s->catalog_ops)
        bson_destroy(s->catalog_ops);
    s->catalog_ops = NULL;
    for (size_t i = 0; i < s->ncreated; i++)
        free(s->created[i]);
    free(s->created);
    s->created = NULL;
    s->ncreated = 0;
    if (!t)
        return;
    pthread_mutex_lock(&t->pmu);
    size_t k = 0;
    for (size_t i = 0; i < t->npending; i++) {
        if (t->pending[i].by == s)
            free(t->pending[i].ns);
        else
            t->pending[k++] = t->pending[i];
    }
    t->npending = k;
    pthread_mutex_unlock(&t->pmu);
}

/* Drop the collections `s`'s transaction created (those still empty:
 * another client may have written one since); forget them. */
static void drop_created(mf_instance *inst, txn_state *s)
{
    for (size_t i = 0; i < s->ncreated; i++) {
        mf_error e;
        if (mf_cl_drop_if_empty(mfi_cl(inst), s->created[i], &e) != 0)
            mf_log(MF_LOG_WARNING, "TXN", 0, "abortTransaction",
                   "dropping %s, which the transaction created: %s", s->created[i], e.msg);
    }
    forget_created(inst->txns, s);
}

/* End `s`'s transaction in progress, writing nothing. */
static void abort_state(mf_instance *inst, txn_state *s)
{
    if (s->phase != MFI_TXN_IN_PROGRESS)
        return;
    mfi_cursors_kill_txn(inst, s->txn);
    mf_cl_txn_abort(s->txn);
    s->txn = NULL;
    drop_created(inst, s);
    s->phase = MFI_TXN_ABORTED;
}

/* Past transactionLifetimeLimitSeconds. */
static bool expired(mf_instance *inst, const txn_state *s, int64_t now_ms)
{
    return s->phase == MFI_TXN_IN_PROGRESS &&
           now_ms - s->started_ms > atomic_load(&inst->txn_lifetime_s) * 1000;
}

void mfi_txn_state_free(mf_instance *inst, txn_state *s)
{
    if (inst && s->phase == MFI_TXN_IN_PROGRESS)
        abort_state(inst, s);
    forget_created(inst ? inst->txns : NULL, s);
}

/* Abort `s`'s transaction with `s` checked out, as a command would (the
 * table's mutex held on entry and on return; `s` not busy). */
static void abort_checked_out(mf_instance *inst, mfi_txn_table *t, txn_state *s)
{
    s->busy = true;
    pthread_mutex_unlock(&t->mu);
    abort_state(inst, s);
    pthread_mutex_lock(&t->mu);
    s->busy = false;
    pthread_cond_broadcast(&t->cond);
}

void mfi_txn_reap(mf_instance *inst)
{
    mfi_txn_table *t = inst->txns;
    if (!t)
        return;
    int64_t now = mf_clock_wall_ms();
    pthread_mutex_lock(&t->mu);
    for (txn_state *s = t->list; s; s = s->next) {
        if (!s->busy && expired(inst, s, now))
            abort_checked_out(inst, t, s);
    }
    pthread_mutex_unlock(&t->mu);
}

void mfi_txn_kill(mf_instance *inst, const uint8_t (*uids)[32], size_t nuids, bool all)
{
    mfi_txn_table *t = inst->txns;
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    for (txn_state *s = t->list; s; s = s->next) {
        bool hit = all;
        for (size_t i = 0; i < nuids && !hit; i++)
            hit = memcmp(s->uid, uids[i], 32) == 0;
        if (!hit || s->phase != MFI_TXN_IN_PROGRESS)
            continue;
        while (s->busy) /* a statement running: after it */
            pthread_cond_wait(&t->cond, &t->mu);
        abort_checked_out(inst, t, s);
    }
    pthread_mutex_unlock(&t->mu);
}

void mfi_txn_session_ended(mf_instance *inst, const uint8_t id[16], const uint8_t uid[32])
{
    if (!inst->txns)
        return;
    txn_state *s = mfi_session_checkout(inst->txns, id, uid);
    if (!s)
        return;
    abort_state(inst, s);
    mfi_session_checkin(inst->txns, s);
}

/* The readConcern a transaction's first statement may give. */
static int check_read_concern(const bson_t *cmd, bool first, mf_error *err)
{
    bson_iter_t it, f;
    if (!bson_iter_init_find(&it, cmd, "readConcern"))
        return 0;
    if (!first)
        return mf_error_set(err, MF_InvalidOptions,
                            "Only the first command in a transaction may specify a readConcern");
    if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &f))
        return 0; /* the dispatcher's check gives the type error */
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "level") == 0 && BSON_ITER_HOLDS_UTF8(&f)) {
            const char *l = bson_iter_utf8(&f, NULL);
            if (strcmp(l, "local") != 0 && strcmp(l, "majority") != 0 &&
                strcmp(l, "snapshot") != 0)
                return mf_error_set(err, MF_InvalidOptions,
                                    "The readConcern level must be either 'local' (default), "
                                    "'majority' or 'snapshot' in order to run in a transaction");
        } else if (strcmp(k, "atClusterTime") == 0) {
            /* a snapshot at a chosen past time needs the history the
             * version store does not keep yet */
            return mf_error_set(err, MF_SnapshotTooOld,
                                "readConcern atClusterTime is not supported by this MultiforaDB "
                                "version: a transaction reads from the newest snapshot");
        }
    }
    return 0;
}

int mfi_txn_begin(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                  const uint8_t id[16], const uint8_t uid[32], int64_t txn_number, bool autocommit,
                  bool has_start, bool start, mf_error *err)
{
    mf_instance *inst = ctx->inst;
    struct mfi_txn_use *u = &ctx->txn_buf;
    bson_iter_t it;
    char sid[37];
    int rc;

    if (autocommit)
        return mf_error_set(err, MF_InvalidOptions, "Specifying autocommit=true is not allowed.");
    if (has_start && !start)
        return mf_error_set(err, MF_InvalidOptions,
                            "Specifying startTransaction=false is not allowed.");
    /* refused before the session is checked out: the transaction goes on */
    if (!allowed_in_txn(def->name)) {
        if (strcmp(def->name, "count") == 0)
            return mf_error_set(err, MF_OperationNotSupportedInTransaction,
                                "Cannot run 'count' in a multi-document transaction. Please see "
                                "http://dochub.mongodb.org/core/transaction-count for a "
                                "recommended alternative.");
        return mf_error_set(err, MF_OperationNotSupportedInTransaction,
                            "Cannot run '%s' in a multi-document transaction.", def->name);
    }
    if (strcmp(def->name, "commitTransaction") != 0 &&
        strcmp(def->name, "abortTransaction") != 0 && bson_iter_init_find(&it, cmd, "writeConcern"))
        return mf_error_set(err, MF_InvalidOptions,
                            "writeConcern is not allowed within a multi-statement transaction");
    if (strcmp(ctx->db, "config") == 0 || strcmp(ctx->db, "local") == 0 ||
        (strcmp(ctx->db, "admin") == 0 && strcmp(def->name, "commitTransaction") != 0 &&
         strcmp(def->name, "abortTransaction") != 0))
        return mf_error_set(err, MF_OperationNotSupportedInTransaction,
                            "Cannot run command against the '%s' database in a transaction.",
                            ctx->db);
    if ((rc = check_read_concern(cmd, start, err)) != 0)
        return rc;

    memset(u, 0, sizeof *u);
    rc = mfi_session_open(inst, id, uid, &u->lsid, &u->state, err);
    if (!u->state)
        return rc;
    txn_state *s = u->state;
    u->txn_number = txn_number;
    ctx->txn = u;
    if (rc)
        return rc;
    mfi_uuid_str(id, sid);
    int64_t now = mf_clock_wall_ms();
    if (expired(inst, s, now))
        abort_state(inst, s);
    if (txn_number < s->txn_number)
        return mf_error_set(err, MF_TransactionTooOld,
                            "Cannot start transaction %lld on session %s because a newer "
                            "transaction %lld has already started.",
                            (long long)txn_number, sid, (long long)s->txn_number);
    if (start) {
        if (txn_number == s->txn_number)
            return mf_error_set(err, MF_ConflictingOperationInProgress,
                                "Only servers in a sharded cluster can start a new transaction "
                                "at the active transaction number");
        abort_state(inst, s); /* a newer number ends the one in progress */
        u->prev_number = s->txn_number;
        u->prev_phase = s->phase;
        if ((rc = mf_cl_txn_begin(inst->cl.txns, &s->txn, err)) != 0)
            return rc;
        s->catalog_ops = bson_new();
        s->txn_number = txn_number;
        s->nstmts = 0;
        s->last = (mf_cl_optime){0, 0};
        s->phase = MFI_TXN_IN_PROGRESS;
        s->started_ms = now;
        u->starts = true;
    } else {
        if (txn_number != s->txn_number || s->phase == MFI_TXN_NONE)
            return mf_error_set(err, MF_NoSuchTransaction,
                                "Given transaction number %lld does not match any in-progress "
                                "transactions. The active transaction number is %lld",
                                (long long)txn_number, (long long)s->txn_number);
        if (s->phase == MFI_TXN_IN_PROGRESS && mf_cl_txn_killed(s->txn))
            abort_state(inst, s);
        if (s->phase == MFI_TXN_ABORTED)
            return mf_error_set(err, MF_NoSuchTransaction,
                                "Transaction with { txnNumber: %lld } has been aborted.",
                                (long long)txn_number);
        if (s->phase == MFI_TXN_COMMITTED && strcmp(def->name, "commitTransaction") != 0)
            return mf_error_set(err, MF_TransactionCommitted,
                                "Transaction with { txnNumber: %lld } has been committed.",
                                (long long)txn_number);
    }
    if (s->phase == MFI_TXN_IN_PROGRESS) {
        mf_cl_txn_bind(s->txn);
        current_number = txn_number;
        ctx->log.txn_ops = s->catalog_ops;
    }
    return 0;
}

/* A write command's reply saying a statement failed (writeErrors). */
static int write_error_code(const bson_t *reply)
{
    bson_iter_t it, a, d, f;
    if (!bson_iter_init_find(&it, reply, "writeErrors") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &a) || !bson_iter_next(&a) || !BSON_ITER_HOLDS_DOCUMENT(&a) ||
        !bson_iter_recurse(&a, &d) || !bson_iter_find(&d, "code"))
        return 0;
    f = d;
    return (int)bson_iter_as_int64(&f);
}

int mfi_txn_end_statement(mf_cmd_ctx *ctx, int rc, bson_t *reply, mf_error *err)
{
    struct mfi_txn_use *u = ctx->txn;
    if (!u)
        return rc;
    mf_cl_txn_bind(NULL);
    txn_state *s = u->state;
    /* a write error ends the transaction; a transient one (WriteConflict)
     * is the command's error, which drivers retry the transaction on */
    int wcode = rc == 0 ? write_error_code(reply) : 0;
    if (wcode == MF_WriteConflict) {
        bson_iter_t it, a, d;
        const char *msg = "WriteConflict";
        if (bson_iter_init_find(&it, reply, "writeErrors") && bson_iter_recurse(&it, &a) &&
            bson_iter_next(&a) && bson_iter_recurse(&a, &d) && bson_iter_find(&d, "errmsg") &&
            BSON_ITER_HOLDS_UTF8(&d))
            msg = bson_iter_utf8(&d, NULL);
        rc = mf_error_set(err, MF_WriteConflict, "%s", msg);
    }
    if ((rc != 0 || wcode) && s && s->phase == MFI_TXN_IN_PROGRESS &&
        strcmp(ctx->name, "commitTransaction") != 0) {
        abort_state(ctx->inst, s);
        ctx->log.txn_ops = NULL;
    }
    return rc;
}

void mfi_txn_unstart(mf_cmd_ctx *ctx)
{
    struct mfi_txn_use *u = ctx->txn;
    if (!u || !u->starts || u->state->phase != MFI_TXN_IN_PROGRESS)
        return;
    txn_state *s = u->state;
    mf_cl_txn_bind(NULL);
    mf_cl_txn_abort(s->txn);
    s->txn = NULL;
    bson_destroy(s->catalog_ops);
    s->catalog_ops = ctx->log.txn_ops = NULL;
    s->txn_number = u->prev_number;
    s->phase = (mfi_txn_phase)u->prev_phase;
    u->starts = false;
}

void mfi_txn_end(mf_cmd_ctx *ctx)
{
    struct mfi_txn_use *u = ctx->txn;
    if (!u)
        return;
    mf_cl_txn_bind(NULL);
    current_number = 0;
    ctx->log.txn_ops = NULL;
    if (u->state)
        mfi_session_checkin(ctx->inst->txns, u->state);
    bson_destroy(&u->lsid);
    ctx->txn = NULL;
}

/* ------------------------------------------- snapshot reads outside */

/* The running command's snapshot read, until a cursor takes it. */
static _Thread_local mf_cl_txn *held;

void mfi_snapshot_hold(mf_cl_txn *snap)
{
    held = snap;
    mf_cl_txn_bind(snap);
}

mf_cl_txn *mfi_snapshot_take(void)
{
    mf_cl_txn *t = held;
    held = NULL;
    return t;
}

void mfi_snapshot_release(void)
{
    mf_cl_txn_bind(NULL);
    mf_cl_txn_abort(mfi_snapshot_take());
}

void mfi_txn_note_created(mf_cmd_ctx *ctx, const char *ns)
{
    struct mfi_txn_use *u = ctx->txn;
    if (!u || !u->state || u->state->phase != MFI_TXN_IN_PROGRESS)
        return;
    txn_state *s = u->state;
    char **v = realloc(s->created, (s->ncreated + 1) * sizeof *v);
    if (!v)
        return;
    s->created = v;
    if ((v[s->ncreated] = strdup(ns)) == NULL)
        return;
    s->ncreated++;
    mfi_txn_table *t = ctx->inst->txns;
    pthread_mutex_lock(&t->pmu);
    struct mfi_pending *p = realloc(t->pending, (t->npending + 1) * sizeof *p);
    char *copy = p ? strdup(ns) : NULL;
    if (p)
        t->pending = p;
    if (copy)
        t->pending[t->npending++] = (struct mfi_pending){copy, mf_cl_txn_id(s->txn), s};
    pthread_mutex_unlock(&t->pmu);
}

/* The transaction that created `ns` and has not ended, other than
 * `mine` (NULL: any). */
static uint64_t pending_by(mfi_txn_table *t, const txn_state *mine, const char *ns)
{
    uint64_t id = 0;
    if (!t)
        return 0;
    pthread_mutex_lock(&t->pmu);
    for (size_t i = 0; i < t->npending && !id; i++)
        if (t->pending[i].by != mine && strcmp(t->pending[i].ns, ns) == 0)
            id = t->pending[i].txn_id;
    pthread_mutex_unlock(&t->pmu);
    return id;
}

uint64_t mfi_txn_pending(mf_cmd_ctx *ctx, const char *ns)
{
    return pending_by(ctx->inst->txns, ctx->txn ? ctx->txn->state : NULL, ns);
}

bool mfi_txn_hidden(mf_instance *inst, const char *ns)
{
    return pending_by(inst->txns, NULL, ns) != 0;
}

size_t mfi_txn_unhidden(mf_instance *inst, mf_coll **v, size_t n)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (!mfi_txn_hidden(inst, mf_coll_name(v[i])))
            v[kept++] = v[i];
    return kept;
}

/* Whether `cmd` (an update or findAndModify) may upsert. */
static bool upserts(const bson_t *cmd)
{
    bson_iter_t it, a, u;
    if (bson_iter_init_find(&it, cmd, "upsert"))
        return bson_iter_as_bool(&it);
    if (!bson_iter_init_find(&it, cmd, "updates") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &a))
        return false;
    while (bson_iter_next(&a))
        if (BSON_ITER_HOLDS_DOCUMENT(&a) && bson_iter_recurse(&a, &u) &&
            bson_iter_find(&u, "upsert") && bson_iter_as_bool(&u))
            return true;
    return false;
}

int mfi_txn_pending_check(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                          mf_error *err)
{
    /* what would create the collection, or drop it: meets the creator */
    static const char *const creates[] = {"create", "createIndexes", "drop", "insert"};
    /* what needs it there: as for no collection */
    static const char *const needs[] = {"collMod", "dropIndexes", "listIndexes"};
    bson_iter_t it;
    char ns[MF_MAX_NS_LEN + 1];
    if (!ctx->inst->txns || !bson_iter_init(&it, cmd) || !bson_iter_next(&it) ||
        !BSON_ITER_HOLDS_UTF8(&it))
        return 0;
    const char *name = def->name;
    bool create = (strcmp(name, "update") == 0 || strcasecmp(name, "findAndModify") == 0) &&
                  upserts(cmd);
    for (size_t i = 0; i < sizeof creates / sizeof *creates && !create; i++)
        create = strcmp(name, creates[i]) == 0;
    bool need = false;
    for (size_t i = 0; i < sizeof needs / sizeof *needs && !need; i++)
        need = strcmp(name, needs[i]) == 0;
    if (!create && !need) /* (reads, deletes, updates: the collection is empty to them) */
        return 0;
    snprintf(ns, sizeof ns, "%s.%s", ctx->db, bson_iter_utf8(&it, NULL));
    uint64_t holder = mfi_txn_pending(ctx, ns);
    if (!holder)
        return 0;
    if (need)
        return mf_error_set(err, MF_NamespaceNotFound, "ns does not exist: %s", ns);
    if (ctx->txn)
        return mf_error_set(err, MF_WriteConflict,
                            "Write conflict during plan execution and yielding is disabled. "
                            ":: Please retry your operation or multi-document transaction.");
    return mf_cl_txns_wait(ctx->inst->cl.txns, holder, ctx->deadline.at_us, err);
}

bool mfi_txn_created(const mf_cmd_ctx *ctx, const char *ns)
{
    const struct mfi_txn_use *u = ctx->txn;
    if (!u || !u->state || u->state->phase != MFI_TXN_IN_PROGRESS)
        return true; /* (outside a transaction: no restriction) */
    for (size_t i = 0; i < u->state->ncreated; i++)
        if (strcmp(u->state->created[i], ns) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------------- commands */

int mfi_cmd_commit_transaction(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)cmd, (void)reply;
    struct mfi_txn_use *u = ctx->txn;
    if (!u)
        return mf_error_set(err, MF_CommandFailed,
                            "commitTransaction must be run within a transaction");
    txn_state *s = u->state;
    if (s->phase == MFI_TXN_COMMITTED)
        return 0; /* a retried commit: done already */
    mf_cl_txn *t = s->txn;
    mf_cl_stmt st = {.lsid = &u->lsid, .txn_number = u->txn_number};
    mf_cl_log lg = ctx->log;
    lg.stmt = &st;
    lg.created = s->created; /* settled by the commit */
    lg.ncreated = s->ncreated;
    mf_lsn lsn = 0;
    mfi_cursors_kill_txn(ctx->inst, t);
    s->txn = NULL;
    int rc = mf_cl_txn_commit(t, ctx->inst->engine, &lg, &lsn, err);
    ctx->log.txn_ops = NULL; /* freed with the transaction's state below */
    if (lsn > ctx->lsn)
        ctx->lsn = lsn;
    if (rc == 0) {
        ctx->log.op_time = lg.op_time;
        s->phase = MFI_TXN_COMMITTED;
        if (lg.op_time.secs)
            s->last = lg.op_time;
        forget_created(ctx->inst->txns, s); /* committed: they stay */
        return 0;
    }
    drop_created(ctx->inst, s);
    s->phase = MFI_TXN_ABORTED;
    return rc;
}

int mfi_cmd_abort_transaction(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)cmd, (void)reply;
    struct mfi_txn_use *u = ctx->txn;
    if (!u)
        return mf_error_set(err, MF_CommandFailed,
                            "abortTransaction must be run within a transaction");
    abort_state(ctx->inst, u->state);
    return 0;
}
