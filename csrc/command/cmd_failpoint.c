/*
 * cmd_failpoint.c -- configureFailPoint and waitForFailPoint, mongod's test
 * commands.  They exist only when the server runs with enableTestCommands;
 * otherwise the names are unknown, as in mongod.  Also here: the sites of
 * two of the fail points.
 *
 * configureFailPoint {configureFailPoint: <name>, mode, data} sets one of
 * the fail points of failpoint.c (mongod's modes and counting; the reply is
 * {count: <times it was entered since the server started>}), or
 * "storageFault" below.  Any other name is FailPointSetFailed (266),
 * "<name> not found", as mongod answers a name it does not have -- before
 * the mode is read.
 *
 * "storageFault" (ours, for the reliability suites of issue 7):
 *
 *   {configureFailPoint: "storageFault",
 *    mode: "alwaysOn" | "off" | {times: n} | {skip: n} | {skip: n, times: m},
 *    data: {site: "wal.sync", error: "EIO" | "ENOSPC" | "short"}}
 *
 * arms the os layer's fault injection (storage/os.h): every file operation
 * whose site name starts with data.site ("" for all of them) passes `skip`
 * times, then fails `times` times (alwaysOn: forever) with that error --
 * "short" writes half the bytes first.  Site names are the engine's:
 * wal.write, wal.sync, wal.reserve, wal.create, wal.dir, pager.grow,
 * pager.map, pager.sync, pager.meta, ...  The fault is this server's (its
 * engine's fault table): another server in the process does not see it.
 * Its count is the calls its previous setting failed.
 *
 * "hangIndexBuildBeforeCommit" (mongod's): createIndexes on a collection
 * with documents (mongod builds on an empty one without its index build
 * coordinator, so without the fail point), its indexes built and still
 * marked "building", waits while the fail point is set -- so a test can
 * kill the server at that moment.  mongod's `if (fp.shouldFail()) { log;
 * fp.pauseWhileSet(); }`: the check counts an entry, and the pause
 * evaluates the fail point every 100 ms until it does not fire, counting
 * one more on its first evaluation.  So a build held counts two entries,
 * {times: 1} holds nothing (the check uses the one time), and the wait ends
 * when the fail point is turned off, its times are used, at the command's
 * maxTimeMS (MaxTimeMSExpired) or at shutdown.
 *
 * "maxTimeAlwaysTimeOut" (mongod's, OperationContext::hasDeadlineExpired):
 * an operation that has a deadline finds it passed.  mongod evaluates it
 * at each interrupt check of such an operation; here at the check it makes
 * before a command runs (once its maxTimeMS is read: the dispatcher's, or
 * aggregate's and explain's own) and as a getMore of a cursor opened with
 * maxTimeMS starts (mfi_max_time_check).
 *
 * waitForFailPoint {waitForFailPoint: <name>, timesEntered: n, maxTimeMS}
 * (mongod's) returns once the fail point has been entered n times since
 * the server started; MaxTimeMSExpired at the deadline.  maxTimeMS is
 * required (FailedToParse "Missing maxTimeMS"), as timesEntered is (40414).
 */
#include "command_int.h"
#include "../storage/os.h"

#include <string.h>

#define FP_STORAGE "storageFault"

static int parse_mode(const bson_iter_t *it, bool *off, int *skip, int *times, mf_error *err)
{
    *off = false;
    *skip = 0;
    *times = -1;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        const char *m = bson_iter_utf8(it, NULL);
        if (strcmp(m, "off") == 0) {
            *off = true;
            return 0;
        }
        if (strcmp(m, "alwaysOn") == 0)
            return 0;
        return mf_error_set(err, MF_BadValue, "unknown mode: %s", m);
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch, "'mode' must be a string or JSON object");
    bson_iter_t f;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        int64_t v;
        if (strcmp(k, "times") != 0 && strcmp(k, "skip") != 0)
            return mf_error_set(err, MF_BadValue, "mode has an unknown field: %s", k);
        if (!mfi_as_int64(&f, &v) || v < 0 || v > INT32_MAX)
            return mf_error_set(err, MF_BadValue, "'%s' must be a non-negative int32", k);
        if (strcmp(k, "times") == 0)
            *times = (int)v;
        else
            *skip = (int)v;
    }
    return 0;
}

static int parse_data(const bson_t *cmd, char *site, size_t cap, mf_fault_kind *kind,
                      mf_error *err)
{
    bson_iter_t it, f;
    *kind = MF_FAULT_EIO;
    site[0] = '\0';
    if (!bson_iter_init_find(&it, cmd, "data"))
        return mf_error_set(err, MF_BadValue, FP_STORAGE " needs data: {site, error}");
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return mf_error_set(err, MF_TypeMismatch, "'data' must be a JSON object");
    bson_iter_recurse(&it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (!BSON_ITER_HOLDS_UTF8(&f))
            return mf_error_set(err, MF_TypeMismatch, "data.%s must be a string", k);
        const char *v = bson_iter_utf8(&f, NULL);
        if (strcmp(k, "site") == 0) {
            if (strlen(v) >= cap)
                return mf_error_set(err, MF_BadValue, "data.site is too long");
            memcpy(site, v, strlen(v) + 1);
        } else if (strcmp(k, "error") == 0) {
            if (strcmp(v, "EIO") == 0)
                *kind = MF_FAULT_EIO;
            else if (strcmp(v, "ENOSPC") == 0)
                *kind = MF_FAULT_ENOSPC;
            else if (strcmp(v, "short") == 0)
                *kind = MF_FAULT_SHORT;
            else
                return mf_error_set(err, MF_BadValue,
                                    "data.error must be EIO, ENOSPC or short, not %s", v);
        } else {
            return mf_error_set(err, MF_BadValue, "data has an unknown field: %s", k);
        }
    }
    return 0;
}

/* BSONObjBuilder::appendNumber(long long): an int while it is small. */
static void append_count(bson_t *reply, int64_t count)
{
    if (count > -(1LL << 30) && count < (1LL << 30))
        BSON_APPEND_INT32(reply, "count", (int32_t)count);
    else
        BSON_APPEND_INT64(reply, "count", count);
}

int mfi_cmd_wait_for_fail_point(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                                mf_error *err)
{
    (void)reply;
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mfi_type_error(err, "waitForFailPoint", "waitForFailPoint", &it, "string");
    const char *name = bson_iter_utf8(&it, NULL);
    /* mongod's order: the IDL's fields, then maxTimeMS, then the name */
    int64_t want = 0;
    if (!bson_iter_init_find(&it, cmd, "timesEntered"))
        return mf_error_set(err, 40414, "BSON field 'waitForFailPoint.timesEntered' is missing "
                                        "but a required field");
    if (!mfi_as_int64(&it, &want))
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field 'waitForFailPoint.timesEntered' is the wrong type '%s', "
                            "expected types '[long, int, decimal, double]'",
                            mf_bsonx_type_alias(bson_iter_type(&it)));
    if (!bson_iter_init_find(&it, cmd, "maxTimeMS"))
        return mf_error_set(err, MF_FailedToParse, "Missing maxTimeMS");
    mfi_fp_id id;
    if (!mfi_fail_point_find(name, &id))
        return mf_error_set(err, MF_FailPointSetFailed, "%s not found", name);
    int rc = 0;
    while (rc == 0 && mfi_fail_point_entered(ctx->inst, id) < want)
        rc = mfi_fail_point_wait_step(ctx, 5, err);
    return rc;
}

int mfi_cmd_configure_fail_point(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                                 mf_error *err)
{
    bson_iter_t it;
    if (!ctx->inst->enable_test_commands)
        return mf_error_set(err, MF_CommandNotFound, "no such command: '%s'", ctx->name);
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mfi_type_error(err, "configureFailPoint", "configureFailPoint", &it, "string");
    const char *name = bson_iter_utf8(&it, NULL);
    mfi_fp_id id;
    int rc;
    if (mfi_fail_point_find(name, &id)) {
        int64_t count;
        if ((rc = mfi_fail_point_configure(ctx->inst, id, cmd, &count, err)) != 0)
            return rc;
        append_count(reply, count);
        return 0;
    }
    if (strcmp(name, FP_STORAGE) != 0)
        return mf_error_set(err, MF_FailPointSetFailed, "%s not found", name);
    if (!bson_iter_init_find(&it, cmd, "mode"))
        return mf_error_set(err, MF_BadValue, "missing 'mode'");
    bool off;
    int skip, times;
    if ((rc = parse_mode(&it, &off, &skip, &times, err)) != 0)
        return rc;
    char site[64];
    mf_fault_kind kind = MF_FAULT_EIO;
    if (!off && (rc = parse_data(cmd, site, sizeof site, &kind, err)) != 0)
        return rc;
    mf_os_faults *faults = mf_engine_faults(ctx->inst->engine); /* this server's alone */
    int before = mf_os_fault_hits(faults);
    if (off || times == 0)
        mf_os_fault_clear(faults);
    else
        mf_os_fault_set(faults, site, kind, skip, times);
    mf_log(MF_LOG_WARNING, "CONTROL", 23829, "conn", "Set failpoint %s to %s", name,
           off ? "off" : site);
    append_count(reply, before);
    return 0;
}
