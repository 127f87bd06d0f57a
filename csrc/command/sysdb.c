/*
 * sysdb.c -- the server's own collections, as a mongod 7.0 standalone has
 * them from its first start, so that admin, config and local hold data
 * (listDatabases shows them) and what drivers and tools read is there:
 *
 *   admin.system.version    {_id: "featureCompatibilityVersion",
 *                            version: "7.0"}, written when the data
 *                            directory is new
 *   local.startup_log       one document per start: _id "<host>-<ms>",
 *                            hostname, startTime, startTimeLocal, cmdLine,
 *                            pid, buildinfo; {capped: true, size: 10 MiB}
 *                            as mongod creates it, the oldest starts
 *                            deleted past that (until capped collections
 *                            exist in general, issue 48)
 *   config.system.sessions  the logical sessions' records {_id: {id, uid},
 *                            lastUse}, with mongod's TTL index lsidTTLIndex
 *                            {lastUse: 1} (expireAfterSeconds: the session
 *                            timeout); written by the refresh below
 *
 * The sessions refresh (LogicalSessionCacheImpl::_refresh): every
 * logicalSessionRefreshMillis (5 minutes), and on the test command
 * refreshLogicalSessionCacheNow, the records of the sessions used since
 * the last refresh are upserted with lastUse the current date, and those
 * of sessions ended since are removed.  The TTL monitor removes records
 * idle past the timeout.  The registry in memory (sessions.c) stays what
 * commands consult; the collection is what a restart and the tools see.
 *
 * Everything here goes through the command table with a context of its
 * own (no client, no profiling): mfi_command_direct, as mongod's
 * DBDirectClient does.
 */
#include "command_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STARTUP_LOG_BYTES (10 * 1024 * 1024) /* mongod's local.startup_log */
#define REFRESH_BATCH 1000

/* Run `cmd` on `db` as the server itself (mfi_command_direct). */
static int run(mf_instance *inst, const char *db, const bson_t *cmd, mf_error *err)
{
    bson_t reply = BSON_INITIALIZER;
    bson_iter_t it;
    int rc = mfi_command_direct(inst, db, cmd, &reply, err);
    /* a write error inside an ok reply is still a failure here */
    if (rc == 0 && bson_iter_init_find(&it, &reply, "writeErrors")) {
        bson_iter_init(&it, cmd);
        bson_iter_next(&it);
        rc = mf_error_set(err, MF_OperationFailed, "%s on %s: a write failed",
                          bson_iter_key(&it), db);
    }
    bson_destroy(&reply);
    return rc;
}

/* admin.system.version with the featureCompatibilityVersion document. */
static int ensure_fcv(mf_instance *inst, mf_error *err)
{
    if (mf_cl_exists(inst->engine, "admin.system.version"))
        return 0;
    bson_t cmd = BSON_INITIALIZER, docs, doc;
    BSON_APPEND_UTF8(&cmd, "insert", "system.version");
    BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &docs);
    BSON_APPEND_DOCUMENT_BEGIN(&docs, "0", &doc);
    BSON_APPEND_UTF8(&doc, "_id", "featureCompatibilityVersion");
    BSON_APPEND_UTF8(&doc, "version", "7.0");
    bson_append_document_end(&docs, &doc);
    bson_append_array_end(&cmd, &docs);
    int rc = run(inst, "admin", &cmd, err);
    bson_destroy(&cmd);
    return rc;
}

/* This start's document in local.startup_log, the log kept to 10 MiB. */
static int log_startup(mf_instance *inst, mf_error *err)
{
    mf_engine *e = inst->engine;
    bson_t opts = BSON_INITIALIZER;
    BSON_APPEND_BOOL(&opts, "capped", true);
    BSON_APPEND_INT64(&opts, "size", STARTUP_LOG_BYTES);
    int rc = mf_cl_create(e, NULL, "local.startup_log", &opts, NULL, true, err);
    bson_destroy(&opts);
    if (rc && rc != MF_NamespaceExists)
        return rc;

    char id[300], local[64];
    int64_t now = inst->start_wall_ms;
    time_t secs = (time_t)(now / 1000);
    struct tm tm;
    localtime_r(&secs, &tm);
    size_t n = strftime(local, sizeof local, "%a %b %e %H:%M:%S", &tm);
    snprintf(local + n, sizeof local - n, ".%03d", (int)(now % 1000));
    char host[256];
    snprintf(host, sizeof host, "%s", inst->host);
    char *colon = strrchr(host, ':');
    if (colon)
        *colon = 0; /* inst->host may carry the port */
    snprintf(id, sizeof id, "%s-%lld", host, (long long)now);

    bson_t cmd = BSON_INITIALIZER, docs, doc, bi = BSON_INITIALIZER;
    BSON_APPEND_INT32(&cmd, "buildInfo", 1);
    if ((rc = mfi_command_direct(inst, "admin", &cmd, &bi, err)) != 0) {
        bson_destroy(&cmd);
        bson_destroy(&bi);
        return rc;
    }
    bson_reinit(&cmd);
    BSON_APPEND_UTF8(&cmd, "insert", "startup_log");
    BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &docs);
    BSON_APPEND_DOCUMENT_BEGIN(&docs, "0", &doc);
    BSON_APPEND_UTF8(&doc, "_id", id);
    BSON_APPEND_UTF8(&doc, "hostname", host);
    BSON_APPEND_DATE_TIME(&doc, "startTime", now);
    BSON_APPEND_UTF8(&doc, "startTimeLocal", local);
    BSON_APPEND_DOCUMENT(&doc, "cmdLine", &inst->cmdline_parsed);
    BSON_APPEND_INT64(&doc, "pid", (int64_t)getpid());
    BSON_APPEND_DOCUMENT(&doc, "buildinfo", &bi);
    bson_append_document_end(&docs, &doc);
    bson_append_array_end(&cmd, &docs);
    /* (an insert: the oldest starts go past 10 MiB, as the capped
     * collection's any insert does) */
    rc = run(inst, "local", &cmd, err);
    bson_destroy(&cmd);
    bson_destroy(&bi);
    return rc;
}

/* config.system.sessions with mongod's TTL index. */
static int ensure_sessions_coll(mf_instance *inst, mf_error *err)
{
    if (mf_cl_exists(inst->engine, "config.system.sessions"))
        return 0;
    bson_t cmd = BSON_INITIALIZER, arr, ix, key;
    BSON_APPEND_UTF8(&cmd, "createIndexes", "system.sessions");
    BSON_APPEND_ARRAY_BEGIN(&cmd, "indexes", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &ix);
    BSON_APPEND_DOCUMENT_BEGIN(&ix, "key", &key);
    BSON_APPEND_INT32(&key, "lastUse", 1);
    bson_append_document_end(&ix, &key);
    BSON_APPEND_UTF8(&ix, "name", "lsidTTLIndex");
    BSON_APPEND_INT32(&ix, "expireAfterSeconds", MF_SESSION_TIMEOUT_MINUTES * 60);
    bson_append_document_end(&arr, &ix);
    bson_append_array_end(&cmd, &arr);
    int rc = run(inst, "config", &cmd, err);
    bson_destroy(&cmd);
    return rc;
}

int mfi_sysdb_open(mf_instance *inst, mf_error *err)
{
    int rc = ensure_fcv(inst, err);
    if (rc == 0)
        rc = log_startup(inst, err);
    if (rc == 0)
        rc = ensure_sessions_coll(inst, err);
    atomic_store(&inst->sessions_refreshed_us, mf_clock_mono_us());
    return rc;
}

/* ---------------------------------------------------------- the refresh */

static void append_lsid(bson_t *out, const char *name, const mfi_session_key *k)
{
    bson_t id;
    bson_append_document_begin(out, name, -1, &id);
    BSON_APPEND_BINARY(&id, "id", BSON_SUBTYPE_UUID, k->key, 16);
    BSON_APPEND_BINARY(&id, "uid", BSON_SUBTYPE_BINARY, k->key + 16, 32);
    bson_append_document_end(out, &id);
}

/* Upsert (`upsert`) or remove the records of keys[0..n), in batches. */
static int write_records(mf_instance *inst, const mfi_session_key *keys, size_t n, bool upsert,
                         mf_error *err)
{
    int rc = 0;
    for (size_t at = 0; rc == 0 && at < n; at += REFRESH_BATCH) {
        size_t end = at + REFRESH_BATCH < n ? at + REFRESH_BATCH : n;
        bson_t cmd = BSON_INITIALIZER, arr, st, q, u, cd;
        BSON_APPEND_UTF8(&cmd, upsert ? "update" : "delete", "system.sessions");
        BSON_APPEND_ARRAY_BEGIN(&cmd, upsert ? "updates" : "deletes", &arr);
        for (size_t i = at; i < end; i++) {
            char k[16];
            const char *kp;
            mf_uint32_to_key((uint32_t)(i - at), &kp, k, sizeof k);
            bson_append_document_begin(&arr, kp, -1, &st);
            BSON_APPEND_DOCUMENT_BEGIN(&st, "q", &q);
            append_lsid(&q, "_id", &keys[i]);
            bson_append_document_end(&st, &q);
            if (upsert) {
                /* SessionsCollection::refreshSessions: lastUse is the
                 * server's date now */
                BSON_APPEND_DOCUMENT_BEGIN(&st, "u", &u);
                BSON_APPEND_DOCUMENT_BEGIN(&u, "$currentDate", &cd);
                BSON_APPEND_BOOL(&cd, "lastUse", true);
                bson_append_document_end(&u, &cd);
                bson_append_document_end(&st, &u);
                BSON_APPEND_BOOL(&st, "upsert", true);
            } else {
                BSON_APPEND_INT32(&st, "limit", 1);
            }
            bson_append_document_end(&arr, &st);
        }
        bson_append_array_end(&cmd, &arr);
        rc = run(inst, "config", &cmd, err);
        bson_destroy(&cmd);
    }
    return rc;
}

int mfi_sessions_refresh(mf_instance *inst, mf_error *err)
{
    mfi_session_key *active = NULL, *ended = NULL;
    size_t nactive = 0, nended = 0;
    atomic_store(&inst->sessions_refreshed_us, mf_clock_mono_us());
    int rc = mfi_sessions_take_changes(inst, &active, &nactive, &ended, &nended, err);
    if (rc == 0)
        rc = ensure_sessions_coll(inst, err); /* a client may have dropped it */
    if (rc == 0)
        rc = write_records(inst, active, nactive, true, err);
    if (rc == 0)
        rc = write_records(inst, ended, nended, false, err);
    free(active);
    free(ended);
    return rc;
}

int mfi_cmd_refresh_logical_session_cache_now(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                                              mf_error *err)
{
    (void)cmd, (void)reply;
    return mfi_sessions_refresh(ctx->inst, err);
}
