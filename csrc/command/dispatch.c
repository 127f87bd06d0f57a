/*
 * dispatch.c -- the one dispatcher: find the command, check what every
 * command shares ($db, admin-only), run the handler, shape the reply.
 *
 * Both entry points, a wire connection and Server.command(), arrive here
 * with a validated command document, so the two cannot drift apart.
 */
#include "command_int.h"
#include "authz_int.h"
#include "handlers.h"
#include "../storage/storage.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- instance */

/* ---------------------------------------------------------------- handlers */

/* The handlers, in the table's order (commands.def): a handler is named
 * here and nowhere else. */
static const mf_cmd_fn handlers[] = {
#define MF_COMMAND(name, fn, flags, help) fn,
#include "commands.def"
#undef MF_COMMAND
};

static mf_cmd_fn handler_of(const mf_cmd_def *def)
{
    size_t n;
    const mf_cmd_def *table = mfi_command_table(&n);
    return handlers[def - table];
}

/* ------------------------------------------------------- the server's own */

int mfi_command_direct(mf_instance *inst, const char *db, const bson_t *cmd, bson_t *reply,
                       mf_error *err)
{
    bson_iter_t it;
    const mf_cmd_def *def = NULL;
    if (bson_iter_init(&it, cmd) && bson_iter_next(&it))
        def = mfi_command_find(bson_iter_key(&it));
    if (!def)
        return mf_error_set(err, MF_CommandNotFound, "no such command for the server itself");
    mf_cmd_ctx ctx = {.inst = inst, .db = db, .name = def->name};
    int rc = handler_of(def)(&ctx, cmd, reply, err);
    /* as for a client's command: durable before the server goes on */
    if (ctx.lsn) {
        mf_error serr;
        int src = mf_engine_sync(inst->engine, ctx.lsn, &serr);
        if (src && rc == 0) {
            *err = serr;
            rc = src;
        }
    }
    return rc;
}

/* ------------------------------------------------------------------ replies */

/* Copy `in` to `out` (capacity `cap` > 0) with every byte that is not part
 * of a valid UTF-8 sequence written as \xNN, so a message quoting bad input
 * is still a valid BSON string (drivers refuse to decode one that is not). */
static void utf8_escape(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)in;
    while (*p && o + 5 < cap) {
        size_t n = *p < 0x80 ? 1 : (*p >> 5) == 6 ? 2 : (*p >> 4) == 14 ? 3 : (*p >> 3) == 30 ? 4 : 0;
        size_t have = strnlen((const char *)p, n ? n : 1);
        if (n && have == n && bson_utf8_validate((const char *)p, n, false)) {
            if (o + n >= cap)
                break;
            memcpy(out + o, p, n);
            o += n;
            p += n;
        } else {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", *p);
            p++;
        }
    }
    out[o] = '\0';
}

void mf_command_error_reply(bson_t *reply, const mf_error *err)
{
    char scratch[24];
    char msg[MF_ERRMSG_MAX * 4];
    utf8_escape(err->msg, msg, sizeof msg);
    bson_reinit(reply);
    BSON_APPEND_DOUBLE(reply, "ok", 0.0);
    BSON_APPEND_UTF8(reply, "errmsg", msg);
    if (err->code == MF_ERRMSG_ONLY)
        return;
    BSON_APPEND_INT32(reply, "code", err->code);
    BSON_APPEND_UTF8(reply, "codeName", mf_error_name(err->code, scratch));
}

/* The commands that may name $external, the external users' database: a
 * name for authentication and its users, never for data. */
static bool external_ok(const char *cmd)
{
    static const char *const names[] = {
        "authenticate", "connectionStatus", "createUser", "dropAllUsersFromDatabase",
        "dropUser", "grantRolesToUser", "hello", "isMaster", "ismaster", "logout", "ping",
        "revokeRolesFromUser", "saslContinue", "saslStart", "updateUser", "usersInfo"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(cmd, names[i]) == 0)
            return true;
    return false;
}

/* mongod's database-name rules for a command's $db. */
static int check_db_name(const char *db, uint32_t len, const char *cmd, mf_error *err)
{
    if (len == 0)
        return mf_error_set(err, MF_InvalidNamespace, "Invalid empty database name");
    if (len >= 64)
        return mf_error_set(err, MF_InvalidNamespace,
                            "Invalid database name: '%s'", db);
    if (strcmp(db, "$external") == 0 && external_ok(cmd))
        return 0;
    for (uint32_t i = 0; i < len; i++) {
        if (strchr("/\\. \"$", db[i]) || db[i] == '\0')
            return mf_error_set(err, MF_InvalidNamespace,
                                "Invalid database name: '%s'", db);
    }
    return 0;
}

/* mongod's checks of a writeConcern argument on a standalone: a command
 * that writes accepts w 0 or 1 or "majority", j and wtimeout; every write
 * is acknowledged after the log sync anyway (j is always satisfied).  A
 * command that does not write refuses the argument. */
static int check_write_concern(mf_instance *inst, const mf_cmd_def *def, const bson_t *cmd,
                               mf_error *err)
{
    bson_iter_t it, f;
    if (!bson_iter_init_find(&it, cmd, "writeConcern"))
        return 0;
    if (!(def->flags & MF_CMD_WRITE))
        return mf_error_set(err, MF_InvalidOptions, "Command does not support writeConcern");
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return mfi_type_error(err, def->name, "writeConcern", &it, "object");
    bson_iter_recurse(&it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "w") == 0) {
            /* A replica set applies the write, then reports the w it
             * cannot satisfy as a writeConcernError (repl.c). */
            if (inst->repl && (BSON_ITER_HOLDS_UTF8(&f) || mfi_is_number(&f))) {
                if (mfi_is_number(&f) && (bson_iter_as_double(&f) < 0 ||
                                          bson_iter_as_double(&f) > 50))
                    return mf_error_set(err, MF_FailedToParse,
                                        "w has to be a non-negative number and not greater "
                                        "than 50; found: %g",
                                        bson_iter_as_double(&f));
            } else if (BSON_ITER_HOLDS_UTF8(&f)) {
                const char *mode = bson_iter_utf8(&f, NULL);
                if (strcmp(mode, "majority") != 0)
                    return mf_error_set(err, MF_BadValue,
                                        "cannot use non-majority 'w' mode \"%s\" when a host is "
                                        "not a member of a replica set",
                                        mode);
            } else if (mfi_is_number(&f)) {
                double w = bson_iter_as_double(&f);
                if (w < 0 || w > 50)
                    return mf_error_set(err, MF_FailedToParse,
                                        "w has to be a non-negative number and not greater than "
                                        "50; found: %g",
                                        w);
                if (w > 1)
                    return mf_error_set(err, MF_BadValue,
                                        "cannot use 'w' > 1 when a host is not replicated");
            } else if (!BSON_ITER_HOLDS_DOCUMENT(&f)) {
                return mf_error_set(err, MF_FailedToParse,
                                    "w has to be a number, string, or object");
            }
        } else if (strcmp(k, "j") == 0 || strcmp(k, "fsync") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&f) && !mfi_is_number(&f))
                return mf_error_set(err, MF_FailedToParse, "%s must be numeric or a boolean value",
                                    k);
        } else if (strcmp(k, "wtimeout") == 0 || strcmp(k, "wtimeoutMS") == 0) {
            if (!mfi_is_number(&f))
                return mf_error_set(err, MF_FailedToParse, "wtimeout must be a number");
        } else if (strcmp(k, "provenance") != 0 && strcmp(k, "getLastError") != 0 &&
                   strcmp(k, "wOpTime") != 0 && strcmp(k, "wElectionId") != 0) {
            return mf_error_set(err, MF_FailedToParse, "unrecognized write concern field: %s", k);
        }
    }
    return 0;
}

/* Whether mongod waits for a write concern after the command: a command
 * that writes, and aggregate only with an $out or $merge stage. */
static bool takes_write_concern(const mf_cmd_def *def, const bson_t *cmd)
{
    bson_iter_t it, stage, last;
    if (!(def->flags & MF_CMD_WRITE))
        return false;
    if (strcmp(def->name, "aggregate") != 0)
        return true;
    if (!bson_iter_init_find(&it, cmd, "pipeline") || !BSON_ITER_HOLDS_ARRAY(&it))
        return false;
    bson_iter_recurse(&it, &stage);
    bool any = false;
    while (bson_iter_next(&stage)) {
        last = stage;
        any = true;
    }
    if (!any || !BSON_ITER_HOLDS_DOCUMENT(&last) || !bson_iter_recurse(&last, &it) ||
        !bson_iter_next(&it))
        return false;
    return strcmp(bson_iter_key(&it), "$out") == 0 || strcmp(bson_iter_key(&it), "$merge") == 0;
}

/* mongod's RetriableError category (error_codes.yml): the errors after
 * which a driver retries a retryable write. */
static bool retriable_code(int code)
{
    switch (code) {
    case MF_HostUnreachable:
    case MF_HostNotFound:
    case MF_NetworkTimeout:
    case MF_ShutdownInProgress:
    case MF_PrimarySteppedDown:
    case MF_ExceededTimeLimit:
    case MF_SocketException:
    case MF_NotWritablePrimary:
    case MF_InterruptedAtShutdown:
    case MF_InterruptedDueToReplStateChange:
    case MF_NotPrimaryNoSecondaryOk:
    case MF_NotPrimaryOrSecondary:
        return true;
    default:
        return false;
    }
}

/* mongod's NotPrimaryError category and shutdown errors. */
static bool state_change_code(int code)
{
    switch (code) {
    case MF_ShutdownInProgress:
    case MF_PrimarySteppedDown:
    case MF_NotWritablePrimary:
    case MF_InterruptedAtShutdown:
    case MF_InterruptedDueToReplStateChange:
    case MF_NotPrimaryNoSecondaryOk:
    case MF_NotPrimaryOrSecondary:
        return true;
    default:
        return false;
    }
}

/* The writeConcernError's code in `wce` ({writeConcernError: {...}}), 0. */
static int wce_code(const bson_t *wce)
{
    bson_iter_t it, f;
    if (bson_iter_init_find(&it, wce, "writeConcernError") && bson_iter_recurse(&it, &f) &&
        bson_iter_find(&f, "code"))
        return (int)bson_iter_as_int64(&f);
    return 0;
}

static void append_topology_version(mf_instance *inst, bson_t *reply)
{
    bson_t tv;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "topologyVersion", &tv);
    BSON_APPEND_OID(&tv, "processId", &inst->process_id);
    BSON_APPEND_INT64(&tv, "counter", 0);
    bson_append_document_end(reply, &tv);
}

/* The RetryableWriteError label a retryable write's reply gets when it
 * failed, or its write concern did, with a retriable error -- unless the
 * fail point set the labels (mongod's ErrorLabelBuilder). */
/* A snapshot read's reply names its cluster time, as mongod's does: in
 * the cursor document (find, aggregate) or at the top (distinct). */
static int snapshot_reply(bson_t *reply, uint64_t at, mf_error *err)
{
    uint32_t secs = (uint32_t)(at >> 32), inc = (uint32_t)at;
    bson_iter_t it;
    if (!bson_iter_init_find(&it, reply, "cursor") || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
        BSON_APPEND_TIMESTAMP(reply, "atClusterTime", secs, inc);
        return 0;
    }
    bson_t out = BSON_INITIALIZER, cur, sub;
    bool ok = true;
    bson_iter_init(&it, reply);
    while (ok && bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "cursor") != 0 || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
            ok = bson_append_iter(&out, NULL, 0, &it);
            continue;
        }
        const uint8_t *d;
        uint32_t l;
        bson_iter_document(&it, &l, &d);
        ok = bson_init_static(&cur, d, l) && BSON_APPEND_DOCUMENT_BEGIN(&out, "cursor", &sub) &&
             bson_concat(&sub, &cur) && BSON_APPEND_TIMESTAMP(&sub, "atClusterTime", secs, inc) &&
             bson_append_document_end(&out, &sub);
    }
    if (ok) {
        bson_reinit(reply);
        ok = bson_concat(reply, &out);
    }
    bson_destroy(&out);
    return ok ? 0 : mf_error_oom(err);
}

static void retry_label(mfi_fail_effect *fx, int code)
{
    if (fx->labels_given)
        return;
    if (!retriable_code(code))
        code = wce_code(&fx->wce);
    if (!retriable_code(code))
        return;
    bson_t arr;
    bson_reinit(&fx->labels);
    BSON_APPEND_ARRAY_BEGIN(&fx->labels, "errorLabels", &arr);
    BSON_APPEND_UTF8(&arr, "0", "RetryableWriteError");
    bson_append_array_end(&fx->labels, &arr);
}

/* Whether an error of a transaction's statement gets the
 * TransientTransactionError label (mongod's isTransientTransactionError):
 * a commit or abort only for NoSuchTransaction without a write concern
 * error; another statement also for WriteConflict, LockTimeout, snapshot
 * errors and every RetriableError. */
static bool transient_code(const mf_cmd_ctx *ctx, int code, bool has_wce)
{
    if (strcmp(ctx->name, "commitTransaction") == 0 || strcmp(ctx->name, "abortTransaction") == 0)
        return code == MF_NoSuchTransaction && !has_wce;
    return code == MF_WriteConflict || code == MF_LockTimeout || code == MF_NoSuchTransaction ||
           code == MF_SnapshotTooOld || code == MF_SnapshotUnavailable || retriable_code(code);
}

static void txn_label(mfi_fail_effect *fx, const mf_cmd_ctx *ctx, int code)
{
    if (!ctx->txn || fx->labels_given)
        return;
    bool ends = strcmp(ctx->name, "commitTransaction") == 0 ||
                strcmp(ctx->name, "abortTransaction") == 0;
    const char *label = transient_code(ctx, code, !bson_empty(&fx->wce))
                            ? "TransientTransactionError"
                        : ends && (retriable_code(code) || retriable_code(wce_code(&fx->wce)))
                            ? "RetryableWriteError"
                            : NULL;
    if (!label)
        return;
    bson_t arr;
    bson_reinit(&fx->labels);
    BSON_APPEND_ARRAY_BEGIN(&fx->labels, "errorLabels", &arr);
    BSON_APPEND_UTF8(&arr, "0", label);
    bson_append_array_end(&fx->labels, &arr);
}

void mf_command_run(mf_instance *inst, mf_client *client, const bson_t *cmd,
                    bson_t *reply, int *out_flags)
{
    mf_error err;
    bson_t err_info = BSON_INITIALIZER;
    mf_cmd_ctx ctx = {.inst = inst, .client = client, .err_info = &err_info,
                      .log = {.oplog = inst->cl.oplog, .txns = inst->cl.txns}};
    mfi_fail_effect fx;
    mfi_op_debug dbg;
    mfi_prof_op prof;
    const mf_cmd_def *def = NULL;
    mfi_privs needs = {0};
    bson_iter_t it;
    int rc;

    mfi_fail_effect_init(&fx);
    mf_error_clear(&err);
    *out_flags = 0;
    atomic_fetch_add_explicit(&inst->counters.op_command, 1, memory_order_relaxed);

    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it)) {
        rc = mf_error_set(&err, MF_Location40571,
                          "OP_MSG requests require a $db argument");
        goto fail;
    }
    ctx.name = bson_iter_key(&it);

    bson_iter_t dbit;
    if (!bson_iter_init_find(&dbit, cmd, "$db")) {
        rc = mf_error_set(&err, MF_Location40571,
                          "OP_MSG requests require a $db argument");
        goto fail;
    }
    if (!BSON_ITER_HOLDS_UTF8(&dbit)) {
        /* BSONElement::checkAndGetStringData's wording, type numbers and all */
        rc = mf_error_set(&err, 13111, "wrong type for field ($db) %d != 2",
                          (int)bson_iter_type(&dbit));
        goto fail;
    }
    uint32_t dblen;
    ctx.db = bson_iter_utf8(&dbit, &dblen);
    if ((rc = check_db_name(ctx.db, dblen, ctx.name, &err)) != 0)
        goto fail;

    def = mfi_command_find(ctx.name);
    if (def && (def->flags & MF_CMD_TEST_ONLY) && !inst->enable_test_commands)
        def = NULL;
    if (!def) {
        rc = mf_error_set(&err, MF_CommandNotFound, "no such command: '%s'", ctx.name);
        goto fail;
    }
    /* From here the command is an operation of its database: timed,
     * logged when slow, profiled (profile.c). */
    mfi_profile_begin(&ctx, def, cmd, &dbg, &prof);
    ctx.writes = (def->flags & MF_CMD_WRITE) && strcmp(def->name, "aggregate") != 0;
    /* mongod parses the API parameters as it parses the command, before
     * the admin-only and read concern checks. */
    if ((rc = mfi_api_params_check(def, cmd, &ctx.api, &err)) != 0)
        goto fail;
    if ((def->flags & MF_CMD_ADMIN_ONLY) && strcmp(ctx.db, "admin") != 0) {
        rc = mf_error_set(&err, MF_Unauthorized,
                          "%s may only be run against the admin database.", def->name);
        goto fail;
    }
    /* Access control, first: who may run a command at all (before its
     * session is read, as mongod's checkAuthorizationImplPreParse) */
    if ((rc = mfi_authz_pre(&ctx, def, &err)) != 0)
        goto fail;

    /* The first hello fixes the client's metadata (the fail point below
     * filters on its appName). */
    if (def->flags & MF_CMD_HELLO)
        mfi_client_note_hello(client, cmd);
    /* The session the command runs in is in use from now; a transaction
     * number is refused here, before the command does anything. */
    if ((rc = mfi_session_use(&ctx, def, cmd, &err)) != 0)
        goto fail;
    /* then what the command asks of the user's privileges */
    if (inst->auth)
        ctx.authz_needs = &needs;
    if ((rc = mfi_authz_check(&ctx, def, cmd, &err)) != 0) {
        mfi_txn_unstart(&ctx);
        goto fail;
    }
    /* failCommand: after the session is read and before the write concern,
     * as mongod evaluates it (test commands only: off otherwise). */
    if ((rc = mfi_fail_command_before(&ctx, def, cmd, &fx, &err)) != 0) {
        mfi_txn_unstart(&ctx);
        goto fail;
    }
    if ((rc = check_write_concern(inst, def, cmd, &err)) != 0 ||
        (rc = mfi_read_concern_check(&ctx, def, cmd, &err)) != 0)
        goto fail;
    /* maxTimeMS, as mongod's entry point reads it for every command:
     * aggregate parses its own (its IDL's stricter types and range come
     * first); getMore's is never a deadline (the handler refuses it). */
    if (strcmp(def->name, "aggregate") != 0 && bson_iter_init_find(&it, cmd, "maxTimeMS")) {
        int64_t ms;
        if ((rc = mfi_max_time_arg(&it, &ms, &err)) != 0)
            goto fail;
        ctx.max_time_given = true;
        if (ms && strcmp(def->name, "getMore") != 0)
            ctx.deadline.at_us = mf_clock_mono_us() + ms * 1000;
    }
    /* mongod's checkForInterrupt before every command runs: where
     * maxTimeAlwaysTimeOut fails one that has a deadline. */
    if (ctx.deadline.at_us && (rc = mfi_max_time_check(inst, &err)) != 0)
        goto fail;
    /* A snapshot read outside transactions: its reads see the writes
     * logged at or before its cluster time (coll/txn.c); a cursor it
     * leaves open takes the snapshot for its getMores. */
    if (ctx.snap_read) {
        mf_cl_txn *snap;
        if ((rc = mf_cl_snapshot_begin(inst->cl.txns, ctx.snap_at, &snap, &err)) != 0)
            goto fail;
        mfi_snapshot_hold(snap);
    }
    /* Outside a transaction, a write meeting a document or unique key an
     * open transaction holds waits for it to end, as mongod's does: the
     * command then wrote nothing (coll/txn.c), and runs again. */
    bool may_wait = inst->cl.txns && !ctx.txn && !ctx.snap_read;
    /* (a collection another transaction created is not there yet) */
    rc = mfi_txn_pending_check(&ctx, def, cmd, &err);
    while (rc == 0) {
        if (may_wait)
            mf_cl_op_begin();
        rc = handler_of(def)(&ctx, cmd, reply, &err);
        uint64_t holder = may_wait ? mf_cl_op_end() : 0;
        if (!holder)
            break;
        int wrc = mf_cl_txns_wait(inst->cl.txns, holder, ctx.deadline.at_us, &err);
        if (wrc) {
            rc = wrc;
            break;
        }
        bson_reinit(reply);
        bson_reinit(&err_info);
        mf_error_clear(&err);
        rc = 0; /* and again */
    }
    if (ctx.snap_read) {
        mfi_snapshot_release();
        if (rc == 0)
            rc = snapshot_reply(reply, ctx.snap_at, &err);
    }
    /* a write on admin may have changed a user or a role (an insert into
     * system.users, a dropDatabase): what was resolved is resolved again */
    if ((def->flags & MF_CMD_WRITE) && strcmp(ctx.db, "admin") == 0)
        mfi_authz_changed(inst);
    /* a transaction's statement: unbound; one that failed aborts it */
    rc = mfi_txn_end_statement(&ctx, rc, reply, &err);
    /* Durable before any reply: one sync covers every write the command
     * made (group commit shares it with the other writers).  Writes made
     * before a maxTimeMS expiry stay, as mongod's do, and are synced too;
     * a failed sync is then the command's error, and nothing is
     * acknowledged. */
    if (ctx.lsn) {
        mf_error serr;
        int src = mf_engine_sync(inst->engine, ctx.lsn, &serr);
        if (src && (rc == 0 || rc == MF_MaxTimeMSExpired)) {
            err = serr;
            rc = src;
        }
    }
    /* Waiting for the write concern, success or not, is where a
     * writeConcernError from the fail point comes in. */
    if (takes_write_concern(def, cmd)) {
        mfi_fail_command_after(&ctx, def, cmd, &fx);
        if (inst->repl && bson_empty(&fx.wce))
            mfi_repl_write_concern(cmd, &fx.wce);
    }
    if (rc != 0)
        goto fail;
    if (ctx.retry && !bson_empty(&fx.wce))
        retry_label(&fx, 0);
    if (ctx.txn && !bson_empty(&fx.wce))
        txn_label(&fx, &ctx, 0);
    bson_concat(reply, &fx.wce);
    BSON_APPEND_DOUBLE(reply, "ok", 1.0);
    if (!bson_empty(&fx.wce)) /* labels go with an error or a write concern error */
        bson_concat(reply, &fx.labels);
    if (inst->repl && state_change_code(wce_code(&fx.wce)))
        append_topology_version(inst, reply);
    if (inst->repl)
        mfi_repl_decorate(inst, &ctx.log.op_time, reply);
    *out_flags = ctx.flags;
    mfi_retry_end(&ctx);
    mfi_txn_end(&ctx);
    mfi_profile_end(&ctx, def, cmd, reply, NULL);
    mfi_fail_effect_destroy(&fx);
    bson_destroy(&err_info);
    mfi_privs_free(&needs);
    return;

fail:
    if (err.code == 0)
        mf_error_set(&err, rc, "command failed");
    if (ctx.retry)
        retry_label(&fx, err.code);
    txn_label(&fx, &ctx, err.code);
    if (ctx.error_label && !fx.labels_given && bson_empty(&fx.labels)) {
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(&fx.labels, "errorLabels", &arr);
        BSON_APPEND_UTF8(&arr, "0", ctx.error_label);
        bson_append_array_end(&fx.labels, &arr);
    }
    mf_command_error_reply(reply, &err);
    if (!bson_empty(&err_info) && err.code != MF_ERRMSG_ONLY)
        bson_concat(reply, &err_info);
    /* mongod puts its extra fields (writeConcernError, errorLabels) before
     * ok, errmsg, code and codeName. */
    if (!bson_empty(&fx.wce) || !bson_empty(&fx.labels)) {
        bson_t *rest = bson_copy(reply);
        bson_reinit(reply);
        bson_concat(reply, &fx.wce);
        bson_concat(reply, &fx.labels);
        if (rest) {
            bson_concat(reply, rest);
            bson_destroy(rest);
        }
    }
    mfi_retry_end(&ctx);
    mfi_txn_end(&ctx);
    /* A replica-set member's "not primary" and shutdown errors carry its
     * topologyVersion, so a driver can tell the error is not news about the
     * topology (SDAM: an error no newer than what it knows is stale). */
    if (inst->repl && state_change_code(err.code))
        append_topology_version(inst, reply);
    if (inst->repl)
        mfi_repl_decorate(inst, &ctx.log.op_time, reply);
    if (ctx.prof)
        mfi_profile_end(&ctx, def, cmd, reply, &err);
    mfi_fail_effect_destroy(&fx);
    bson_destroy(&err_info);
    mfi_privs_free(&needs);
    *out_flags = ctx.flags & MF_RUN_CLOSE;
}
