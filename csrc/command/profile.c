/*
 * profile.c -- mongod's database profiler and its slow-operation log.
 *
 * Settings.  Each database has a profiling level (0 off, 1 the slow or
 * filtered operations, 2 every operation) and an optional filter, a query
 * over the fields of a profile entry; slowms (default 100) and sampleRate
 * (default 1.0) are the server's.  The `profile` command reads and sets
 * them as mongod's ProfileCmdBase does; they live in memory, as mongod's
 * do, so a restart begins at level 0.
 *
 * Which operations (CurOp::completeAndLogOperation).  When a command begins
 * (mfi_profile_begin), its database's level and filter are taken, and
 * sampleRate is drawn.  When it ends (mfi_profile_end):
 *   with a filter   it is logged, and at level 1 profiled, iff the filter
 *                   matches its entry;
 *   without         iff it took longer than slowms and the draw let it;
 *   at level 2      it is profiled whatever the above.
 * hello and isMaster count as slow only past 20 s, as mongod's (an
 * awaitable hello waits up to 10 s).
 *
 * Operations.  A command is one operation, except update and delete: each
 * of their statements is one (mfi_profile_statement), op "update" or
 * "remove", its `command` the statement ({q, u, multi, upsert} or {q,
 * limit}); the command as a whole is still logged when slow, but profiled
 * only through its statements, as mongod's nested CurOps are.
 *
 * The entry (OpDebug::append, then profile()'s own fields):
 *   op, ns, command, originatingCommand (getMore), cursorid, keysExamined,
 *   docsExamined, hasSortStage, fromMultiPlanner, nMatched, nModified,
 *   ninserted, ndeleted, nUpserted, cursorExhausted, keysInserted,
 *   keysDeleted, numYield, nreturned, queryHash, planCacheKey,
 *   queryFramework, readConcern, writeConcern, ok/errMsg/errName/errCode
 *   (failed), responseLength, protocol, millis, planSummary, ts, client,
 *   appName, allUsers, user.
 * A command or originatingCommand over 50 KiB becomes {$truncated: <its
 * text, cut>, comment?}, as mongod's appendAsObjOrString.  Not recorded:
 * lock statistics, flowControl, storage and execStats (this server has no
 * lock manager's counters to report; explain gives the plan's stages).
 *
 * system.profile.  Created when a level is set (or at the first entry) with
 * options {capped: true, size: 1048576} and no _id index, as mongod creates
 * it.  Entries are written when the command ends, with none of its locks
 * held, and are not waited for: the next group commit makes them durable.
 * It is a capped collection (coll/capped.c): the oldest entries go when it
 * grows past its size.  Clients cannot write it (InvalidNamespace 73, the write commands'
 * check) and may drop it only with profiling off (IllegalOperation 20).
 */
#include "command_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROFILE_BYTES (1024 * 1024) /* mongod's system.profile: capped, 1 MiB */
#define MAX_ELEMENT (50 * 1024)      /* appendMaxElementSize */
#define HELLO_SLOW_MS 20000          /* 2 x SingleServerIsMasterMonitor::kMaxAwaitTimeMs */
#define LOG_ATTR_MAX (10 * 1024)     /* mongod's maxLogSizeKB */

/* A filter, shared by the settings and the commands running under it. */
typedef struct prof_filter {
    atomic_int refs;
    bson_t spec; /* as given: the profile command shows it */
    mf_matcher *m;
} prof_filter;

typedef struct prof_db {
    char db[128];
    int level;
    prof_filter *filter;
} prof_db;

struct mfi_profile {
    pthread_mutex_t mu; /* guards the table */
    prof_db *v;
    size_t n, cap;
    atomic_int active;         /* databases with a level or a filter */
    atomic_int_fast64_t slowms;
    _Atomic double sample_rate;
};

/* ------------------------------------------------------------- settings */

static void filter_unref(prof_filter *f)
{
    if (f && atomic_fetch_sub(&f->refs, 1) == 1) {
        mf_matcher_free(f->m);
        bson_destroy(&f->spec);
        free(f);
    }
}

int mfi_profile_open(mf_instance *inst, mf_error *err)
{
    mfi_profile *p = calloc(1, sizeof *p);
    if (!p)
        return mf_error_oom(err);
    pthread_mutex_init(&p->mu, NULL);
    atomic_init(&p->slowms, 100);
    atomic_init(&p->sample_rate, 1.0);
    inst->profile = p;
    return 0;
}

void mfi_profile_close(mf_instance *inst)
{
    mfi_profile *p = inst->profile;
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        filter_unref(p->v[i].filter);
    free(p->v);
    pthread_mutex_destroy(&p->mu);
    free(p);
    inst->profile = NULL;
}

/* The entry of `db` (mu held), or NULL; with `create`, added if missing. */
static prof_db *find_db(mfi_profile *p, const char *db, bool create)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->v[i].db, db) == 0)
            return &p->v[i];
    if (!create)
        return NULL;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 8;
        prof_db *v = realloc(p->v, cap * sizeof *v);
        if (!v)
            return NULL;
        p->v = v;
        p->cap = cap;
    }
    prof_db *d = &p->v[p->n++];
    memset(d, 0, sizeof *d);
    snprintf(d->db, sizeof d->db, "%s", db);
    return d;
}

/* Keep p->active equal to the databases that profile or filter (mu held). */
static void recount_active(mfi_profile *p)
{
    int n = 0;
    for (size_t i = 0; i < p->n; i++)
        n += p->v[i].level > 0 || p->v[i].filter;
    atomic_store(&p->active, n);
}

void mfi_profile_forget_db(mf_instance *inst, const char *db)
{
    mfi_profile *p = inst->profile;
    pthread_mutex_lock(&p->mu);
    prof_db *d = find_db(p, db, false);
    if (d) {
        filter_unref(d->filter);
        *d = p->v[--p->n];
        recount_active(p);
    }
    pthread_mutex_unlock(&p->mu);
}

int mfi_profile_check_drop(mf_instance *inst, const char *db, mf_error *err)
{
    mfi_profile *p = inst->profile;
    pthread_mutex_lock(&p->mu);
    prof_db *d = find_db(p, db, false);
    int level = d ? d->level : 0;
    pthread_mutex_unlock(&p->mu);
    if (level != 0)
        return mf_error_set(err, MF_IllegalOperation,
                            "turn off profiling before dropping system.profile collection");
    return 0;
}

/* ------------------------------------------------------------ op debug */

void mfi_op_debug_init(mfi_op_debug *d, const char *op)
{
    memset(d, 0, sizeof *d);
    d->op = op;
    d->cursorid = d->keys_examined = d->docs_examined = -1;
    d->n_matched = d->n_modified = d->ninserted = d->ndeleted = d->n_upserted = -1;
    d->keys_inserted = d->keys_deleted = d->nreturned = -1;
}

static _Thread_local mfi_op_debug *current;

mfi_op_debug *mfi_op_debug_current(void)
{
    return current;
}

void mfi_op_debug_add(int64_t *field, int64_t n)
{
    *field = (*field < 0 ? 0 : *field) + n;
}

void mfi_op_debug_scan(mfi_op_debug *d, const mf_scan *s, mf_scan_stats *since)
{
    if (!d || !s)
        return;
    const mf_scan_stats *st = mf_scan_get_stats(s);
    mfi_op_debug_add(&d->keys_examined, (int64_t)(st->keys_examined - since->keys_examined));
    mfi_op_debug_add(&d->docs_examined, (int64_t)(st->docs_examined - since->docs_examined));
    *since = *st;
    mf_scan_plan_summary(s, d->plan_summary, sizeof d->plan_summary);
    d->has_hashes = mf_scan_hashes(s, &d->query_hash, &d->plan_cache_key);
}

/* ---------------------------------------------------------------- entries */

/* The logical operation of a command (Command::getLogicalOp). */
static const char *logical_op(const mf_cmd_def *def)
{
    while (def->flags & MF_CMD_ALIAS)
        def--; /* an alias follows the entry it names */
    static const struct {
        const char *cmd, *op;
    } ops[] = {{"find", "query"},   {"getMore", "getmore"}, {"insert", "insert"},
               {"update", "update"}, {"delete", "remove"}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(def->name, ops[i].cmd) == 0)
            return ops[i].op;
    return "command";
}

/* appendAsObjOrString: `obj`, or over MAX_ELEMENT bytes its text cut to
 * that with "..." at the end, as {$truncated, comment?}. */
static void append_obj_or_string(bson_t *out, const char *name, const bson_t *obj)
{
    if (obj->len <= MAX_ELEMENT) {
        bson_append_document(out, name, -1, obj);
        return;
    }
    char *text = malloc(MAX_ELEMENT + 1);
    bson_t sub;
    bson_iter_t it;
    if (!text)
        return;
    mf_bsonx_to_string(obj, text, MAX_ELEMENT + 1);
    if (strlen(text) >= MAX_ELEMENT)
        memcpy(text + MAX_ELEMENT - 3, "...", 4);
    bson_append_document_begin(out, name, -1, &sub);
    BSON_APPEND_UTF8(&sub, "$truncated", text);
    if (bson_iter_init_find(&it, obj, "comment"))
        mf_bsonx_append_iter(&sub, "comment", -1, &it);
    bson_append_document_end(out, &sub);
    free(text);
}

static void put_count(bson_t *out, const char *name, int64_t v)
{
    if (v >= 0)
        BSON_APPEND_INT64(out, name, v);
}

/* The host of "host:port" (the client field has no port). */
static void client_host(const mf_client *c, char *out, size_t cap)
{
    snprintf(out, cap, "%s", c && c->remote[0] ? c->remote : "");
    char *colon = strrchr(out, ':');
    if (colon && out[0] != '[' && strchr(out, ':') == colon)
        *colon = 0;
}

/* The fields of OpDebug::append.  `command`: the operation's description;
 * `is_command`: a command, not a statement (protocol is shown);
 * `reslen` < 0: no reply of its own. */
static void put_op_fields(bson_t *out, const mf_cmd_ctx *ctx, const mfi_op_debug *d,
                          const bson_t *command, bool is_command, int64_t millis,
                          const mf_error *err, int64_t reslen)
{
    char ns[MF_MAX_NS_LEN + 16], hex[16], scratch[32];
    bson_iter_t it;
    if (d->ns[0])
        snprintf(ns, sizeof ns, "%s", d->ns);
    else
        snprintf(ns, sizeof ns, "%s.$cmd", ctx->db);
    BSON_APPEND_UTF8(out, "op", d->op);
    BSON_APPEND_UTF8(out, "ns", ns);
    append_obj_or_string(out, "command", command);
    if (d->originating)
        append_obj_or_string(out, "originatingCommand", d->originating);
    put_count(out, "cursorid", d->cursorid);
    put_count(out, "keysExamined", d->keys_examined);
    put_count(out, "docsExamined", d->docs_examined);
    if (d->has_sort_stage)
        BSON_APPEND_BOOL(out, "hasSortStage", true);
    if (d->from_multi_planner)
        BSON_APPEND_BOOL(out, "fromMultiPlanner", true);
    put_count(out, "nMatched", d->n_matched);
    put_count(out, "nModified", d->n_modified);
    put_count(out, "ninserted", d->ninserted);
    put_count(out, "ndeleted", d->ndeleted);
    put_count(out, "nUpserted", d->n_upserted);
    if (d->cursor_exhausted)
        BSON_APPEND_BOOL(out, "cursorExhausted", true);
    put_count(out, "keysInserted", d->keys_inserted);
    put_count(out, "keysDeleted", d->keys_deleted);
    BSON_APPEND_INT64(out, "numYield", 0);
    put_count(out, "nreturned", d->nreturned);
    if (d->has_hashes) {
        snprintf(hex, sizeof hex, "%08X", d->query_hash);
        BSON_APPEND_UTF8(out, "queryHash", hex);
        snprintf(hex, sizeof hex, "%08X", d->plan_cache_key);
        BSON_APPEND_UTF8(out, "planCacheKey", hex);
    }
    if (d->plan_summary[0])
        BSON_APPEND_UTF8(out, "queryFramework", "classic");
    if (is_command && bson_iter_init_find(&it, command, "readConcern") &&
        BSON_ITER_HOLDS_DOCUMENT(&it))
        mf_bsonx_append_iter(out, "readConcern", -1, &it);
    if (is_command && bson_iter_init_find(&it, command, "writeConcern") &&
        BSON_ITER_HOLDS_DOCUMENT(&it))
        mf_bsonx_append_iter(out, "writeConcern", -1, &it);
    if (err && err->code != 0 && err->code != MF_ERRMSG_ONLY) {
        BSON_APPEND_DOUBLE(out, "ok", 0.0);
        BSON_APPEND_UTF8(out, "errMsg", err->msg);
        BSON_APPEND_UTF8(out, "errName", mf_error_name(err->code, scratch));
        BSON_APPEND_INT32(out, "errCode", err->code);
    }
    if (reslen >= 0)
        BSON_APPEND_INT64(out, "responseLength", reslen);
    if (is_command)
        BSON_APPEND_UTF8(out, "protocol", "op_msg");
    BSON_APPEND_INT64(out, "millis", millis);
    if (d->plan_summary[0])
        BSON_APPEND_UTF8(out, "planSummary", d->plan_summary);
}

/* A whole profile entry: the fields above, then profile()'s. */
static void build_entry(bson_t *out, const mf_cmd_ctx *ctx, const mfi_op_debug *d,
                        const bson_t *command, bool is_command, int64_t millis,
                        const mf_error *err, int64_t reslen)
{
    char host[64];
    bson_t users;
    bson_init(out);
    put_op_fields(out, ctx, d, command, is_command, millis, err, reslen);
    BSON_APPEND_DATE_TIME(out, "ts", mf_clock_wall_ms());
    client_host(ctx->client, host, sizeof host);
    BSON_APPEND_UTF8(out, "client", host);
    if (ctx->client && ctx->client->app_name[0])
        BSON_APPEND_UTF8(out, "appName", ctx->client->app_name);
    BSON_APPEND_ARRAY_BEGIN(out, "allUsers", &users);
    bson_append_array_end(out, &users);
    BSON_APPEND_UTF8(out, "user", "");
}

/* The "Slow query" line (OpDebug::report's attributes). */
static void log_slow(const mf_cmd_ctx *ctx, const mfi_op_debug *d, const bson_t *command,
                     bool is_command, int64_t millis, const mf_error *err, int64_t reslen)
{
    bson_t a, op;
    bson_iter_t it;
    char conn[32];
    bson_init(&a);
    bson_init(&op);
    put_op_fields(&op, ctx, d, command, is_command, millis, err, reslen);
    /* report()'s order and names: type, ns, appName, command, ... */
    BSON_APPEND_UTF8(&a, "type", is_command ? "command" : d->op);
    if (bson_iter_init_find(&it, &op, "ns"))
        mf_bsonx_append_iter(&a, "ns", -1, &it);
    if (ctx->client && ctx->client->app_name[0])
        BSON_APPEND_UTF8(&a, "appName", ctx->client->app_name);
    static const char *const order[] = {
        "command", "originatingCommand", "planSummary", "cursorid", "keysExamined",
        "docsExamined", "hasSortStage", "fromMultiPlanner", "nMatched", "nModified",
        "ninserted", "ndeleted", "nUpserted", "cursorExhausted", "keysInserted",
        "keysDeleted", "numYield", "nreturned", "queryHash", "planCacheKey",
        "queryFramework", "ok", "errMsg", "errName", "errCode", "responseLength",
        "readConcern", "writeConcern"};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        if (!bson_iter_init_find(&it, &op, order[i]))
            continue;
        const char *name = strcmp(order[i], "numYield") == 0        ? "numYields"
                           : strcmp(order[i], "responseLength") == 0 ? "reslen"
                                                                     : order[i];
        mf_bsonx_append_iter(&a, name, -1, &it);
    }
    if (ctx->client && ctx->client->remote[0])
        BSON_APPEND_UTF8(&a, "remote", ctx->client->remote);
    if (is_command)
        BSON_APPEND_UTF8(&a, "protocol", "op_msg");
    BSON_APPEND_INT64(&a, "durationMillis", millis);
    char *json = bson_as_relaxed_extended_json(&a, NULL);
    if (json && strlen(json) > LOG_ATTR_MAX) {
        /* too long for one line: the command gives way */
        bson_free(json);
        bson_t b = BSON_INITIALIZER;
        bson_iter_init(&it, &a);
        while (bson_iter_next(&it)) {
            if (strcmp(bson_iter_key(&it), "command") == 0 ||
                strcmp(bson_iter_key(&it), "originatingCommand") == 0) {
                char text[256];
                bson_t sub, val;
                bson_iter_t c = it;
                uint32_t len;
                const uint8_t *data;
                bson_iter_document(&c, &len, &data);
                bson_init_static(&val, data, len);
                mf_bsonx_to_string(&val, text, sizeof text);
                bson_append_document_begin(&b, bson_iter_key(&it), -1, &sub);
                BSON_APPEND_UTF8(&sub, "$truncated", text);
                bson_append_document_end(&b, &sub);
            } else {
                mf_bsonx_append_iter(&b, bson_iter_key(&it), -1, &it);
            }
        }
        json = bson_as_relaxed_extended_json(&b, NULL);
        bson_destroy(&b);
    }
    if (ctx->client && ctx->client->id)
        snprintf(conn, sizeof conn, "conn%lld", (long long)ctx->client->id);
    else
        snprintf(conn, sizeof conn, "%s", "in-process");
    if (json)
        mf_log_attr(MF_LOG_INFO, is_command ? "COMMAND" : "WRITE", 51803, conn, "Slow query",
                    json);
    bson_free(json);
    bson_destroy(&op);
    bson_destroy(&a);
}

/* ------------------------------------------------------- the decision */

/* A uniform draw in [0, 1) for sampleRate: a per-thread xorshift. */
static double draw(void)
{
    static _Thread_local uint64_t x;
    if (x == 0)
        x = (uint64_t)mf_clock_mono_us() * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)&x;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return (double)(x >> 11) / 9007199254740992.0;
}

void mfi_profile_begin(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                       mfi_op_debug *dbg, mfi_prof_op *op)
{
    mfi_profile *p = ctx->inst->profile;
    mfi_op_debug_init(dbg, logical_op(def));
    memset(op, 0, sizeof *op);
    op->cmd = cmd;
    op->start_us = mf_clock_mono_us();
    op->slowms = (def->flags & MF_CMD_HELLO) ? HELLO_SLOW_MS : atomic_load(&p->slowms);
    op->sampled = draw() < atomic_load(&p->sample_rate);
    bson_init(&op->pending);
    const char *name = logical_op(def);
    op->stmt_profiled = strcmp(name, "update") == 0 || strcmp(name, "remove") == 0;
    if (atomic_load(&p->active)) {
        pthread_mutex_lock(&p->mu);
        prof_db *d = find_db(p, ctx->db, false);
        if (d) {
            op->level = d->level;
            if (d->filter) {
                atomic_fetch_add(&d->filter->refs, 1);
                op->filter = d->filter;
            }
        }
        pthread_mutex_unlock(&p->mu);
    }
    ctx->dbg = dbg;
    ctx->prof = op;
    current = dbg;
}

bool mfi_profile_statement_wanted(const mf_cmd_ctx *ctx, int64_t start_us)
{
    const mfi_prof_op *op = ctx->prof;
    return op && (op->level > 0 || op->filter ||
                  (mf_clock_mono_us() - start_us) / 1000 > op->slowms);
}

/* Log and keep (for system.profile) one operation, as its level, filter
 * and duration decide. */
static void record_redacted(mf_cmd_ctx *ctx, const mfi_op_debug *d, const bson_t *command,
                            bool is_command, bool may_profile, int64_t us, const mf_error *err,
                            int64_t reslen);

/* `command` as the log and the profiler may show it (mongod's
 * redactForLogging): a password (createUser, updateUser) and a SASL
 * payload (saslStart, saslContinue) are "xxx".  `scratch` holds a copy
 * when one is made; the result is `command` or `scratch`. */
static const bson_t *redacted(const bson_t *command, bson_t *scratch)
{
    bson_iter_t it;
    const char *secret = NULL;
    if (!command || !bson_iter_init(&it, command) || !bson_iter_next(&it))
        return command;
    const char *name = bson_iter_key(&it);
    if (strcmp(name, "createUser") == 0 || strcmp(name, "updateUser") == 0)
        secret = "pwd";
    else if (strcmp(name, "saslStart") == 0 || strcmp(name, "saslContinue") == 0)
        secret = "payload";
    else
        return command;
    bson_init(scratch);
    bson_iter_init(&it, command);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), secret) == 0)
            BSON_APPEND_UTF8(scratch, secret, "xxx");
        else
            mf_bsonx_append_iter(scratch, bson_iter_key(&it), -1, &it);
    }
    return scratch;
}

static void record(mf_cmd_ctx *ctx, const mfi_op_debug *d, const bson_t *command_in,
                   bool is_command, bool may_profile, int64_t us, const mf_error *err,
                   int64_t reslen)
{
    bson_t scratch;
    const bson_t *command = redacted(command_in, &scratch);
    record_redacted(ctx, d, command, is_command, may_profile, us, err, reslen);
    if (command != command_in)
        bson_destroy(&scratch);
}

static void record_redacted(mf_cmd_ctx *ctx, const mfi_op_debug *d, const bson_t *command,
                            bool is_command, bool may_profile, int64_t us, const mf_error *err,
                            int64_t reslen)
{
    mfi_prof_op *op = ctx->prof;
    int64_t millis = us / 1000;
    prof_filter *f = op->filter;
    bool slow = millis > op->slowms && op->sampled;
    bool entry_needed = f || (may_profile && op->level > 0);
    bson_t entry;
    if (!entry_needed) {
        if (slow)
            log_slow(ctx, d, command, is_command, millis, err, reslen);
        return;
    }
    build_entry(&entry, ctx, d, command, is_command, millis, err, reslen);
    bool chosen = f ? mf_matcher_match(f->m, &entry) : slow;
    if (chosen)
        log_slow(ctx, d, command, is_command, millis, err, reslen);
    if (may_profile && (op->level == 2 || (op->level == 1 && chosen))) {
        char key[16];
        const char *k;
        mf_uint32_to_key(op->npending++, &k, key, sizeof key);
        bson_append_document(&op->pending, k, -1, &entry);
    }
    bson_destroy(&entry);
}

void mfi_profile_statement(mf_cmd_ctx *ctx, const mfi_op_debug *d, const bson_t *stmt,
                           int64_t start_us, int rc, const mf_error *err)
{
    if (!ctx->prof)
        return;
    mf_error none = {0};
    record(ctx, d, stmt, false, true, mf_clock_mono_us() - start_us, rc ? err : &none, -1);
}

/* ------------------------------------------------------- system.profile */

/* Create <db>.system.profile as mongod's createProfileCollection does:
 * capped at 1 MiB, no _id index.  NamespaceExists when it is there. */
static int create_profile_coll(mf_engine *e, const char *ns, mf_error *err)
{
    bson_t opts = BSON_INITIALIZER;
    BSON_APPEND_BOOL(&opts, "capped", true);
    BSON_APPEND_INT64(&opts, "size", PROFILE_BYTES);
    int rc = mf_cl_create(e, NULL, ns, &opts, NULL, false, err);
    bson_destroy(&opts);
    return rc;
}

/* Append `entries` (an array) to <db>.system.profile. */
static int write_entries(mf_instance *inst, const char *db, const bson_t *entries,
                         mf_error *err)
{
    mf_engine *e = inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    snprintf(ns, sizeof ns, "%s.system.profile", db);
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c) {
        mf_engine_catalog_unlock(e);
        int rc = create_profile_coll(e, ns, err);
        if (rc && rc != MF_NamespaceExists)
            return rc;
        mf_engine_catalog_lock(e, false);
        if (!(c = mf_engine_coll(e, ns))) {
            mf_engine_catalog_unlock(e);
            return 0; /* dropped meanwhile: these entries go with it */
        }
    }
    /* (a system.profile a client created not capped is left alone, as
     * mongod leaves it) */
    if (!mf_cl_capped(c, NULL, NULL)) {
        mf_engine_catalog_unlock(e);
        return 0;
    }
    mf_cl_indexes ix;
    mf_lsn lsn = 0;
    mf_coll_lock(c, true);
    int rc = mf_cl_indexes_load(c, &ix, err);
    bson_iter_t it;
    bson_iter_init(&it, entries);
    while (rc == 0 && bson_iter_next(&it)) {
        bson_t doc;
        uint64_t rid;
        if (!mfi_doc_arg(&it, &doc))
            continue;
        if ((rc = mf_cl_next_record_id(e, c, &rid, err)) == 0)
            rc = mf_cl_write_doc(e, c, &ix, rid, NULL, &doc, &lsn, NULL, err);
    }
    if (rc == 0) /* the oldest go past its size, as any capped collection's */
        rc = mf_cl_capped_trim(e, c, &ix, &lsn, NULL, err);
    mf_cl_indexes_free(&ix);
    mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    /* Not waited for: the next group commit makes the entries durable. */
    return rc;
}

void mfi_profile_end(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                     const bson_t *reply, const mf_error *err)
{
    mfi_prof_op *op = ctx->prof;
    if (!op)
        return;
    current = NULL; /* writing the entries is no part of the operation */
    (void)def;
    /* an OP_MSG reply: header (16), flags (4), section kind (1), body */
    int64_t reslen = (int64_t)reply->len + 21;
    record(ctx, ctx->dbg, cmd, true, !op->stmt_profiled, mf_clock_mono_us() - op->start_us,
           err, reslen);
    if (op->npending) {
        mf_error werr;
        if (write_entries(ctx->inst, ctx->db, &op->pending, &werr) != 0)
            mf_log(MF_LOG_WARNING, "COMMAND", 20701, "profiler",
                   "Caught Exception while writing profile entry: %s", werr.msg);
    }
    bson_destroy(&op->pending);
    filter_unref(op->filter);
    if (ctx->dbg->originating)
        bson_destroy(ctx->dbg->originating);
    current = NULL;
    ctx->prof = NULL;
    ctx->dbg = NULL;
}

/* ------------------------------------------------------- the command */

/* The top-level fields a profile filter may read: those of an entry. */
static bool filter_field_known(const char *k, size_t n)
{
    static const char *const fields[] = {
        "op", "ns", "command", "originatingCommand", "cursorid", "keysExamined",
        "docsExamined", "hasSortStage", "usedDisk", "fromMultiPlanner", "fromPlanCache",
        "replanned", "replanReason", "nMatched", "nBatches", "nModified", "ninserted",
        "ndeleted", "nUpserted", "cursorExhausted", "keysInserted", "keysDeleted",
        "prepareReadConflicts", "writeConflicts", "temporarilyUnavailableErrors",
        "numYield", "nreturned", "queryHash", "planCacheKey", "queryFramework", "locks",
        "authorization", "flowControl", "readConcern", "writeConcern", "storage",
        "ok", "errMsg", "errName", "errCode", "responseLength", "protocol", "cpuNanos",
        "millis", "planSummary", "planningTimeMicros", "execStats", "ts", "client",
        "appName", "allUsers", "user", "nShards", "exhaust", "mongot",
        "remoteOpWaitMillis", "totalOplogSlotDurationMicros", "dataThroughputLastSecond",
        "dataThroughputAverage"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (strlen(fields[i]) == n && strncmp(fields[i], k, n) == 0)
            return true;
    return false;
}

/* Every field path of `filter` must start at a field an entry has
 * (OpDebug::appendStaged): 4910200 otherwise. */
static int check_filter_fields(const bson_t *filter, mf_error *err)
{
    bson_iter_t it, el;
    bson_iter_init(&it, filter);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k[0] == '$') {
            if ((strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0) &&
                BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &el))
                while (bson_iter_next(&el)) {
                    bson_t sub;
                    int rc;
                    if (mfi_doc_arg(&el, &sub) && (rc = check_filter_fields(&sub, err)) != 0)
                        return rc;
                }
            continue;
        }
        size_t n = strcspn(k, ".");
        if (!filter_field_known(k, n))
            return mf_error_set(err, 4910200,
                                "No such field (or fields) available for profile filter: %.*s",
                                (int)n, k);
    }
    return 0;
}

/* The request (ProfileCmdRequest): profile, slowms, sampleRate, filter. */
typedef struct profile_req {
    int64_t level;
    bool has_slowms, has_rate, has_filter;
    int64_t slowms;
    double rate;
    bson_t filter; /* empty with has_filter: "unset" */
    bool unset;
} profile_req;

static int parse_request(const bson_t *cmd, profile_req *r, mf_error *err)
{
    bson_iter_t it;
    memset(r, 0, sizeof *r);
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!mfi_is_number(&it))
        return mfi_type_error(err, "profile", "profile", &it, "long");
    r->level = mfi_safe_number_long(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "slowms") == 0) {
            if (!mfi_is_number(&it))
                return mfi_type_error(err, "profile", k, &it, "long");
            r->slowms = mfi_safe_number_long(&it);
            r->has_slowms = true;
        } else if (strcmp(k, "sampleRate") == 0) {
            if (!mfi_is_number(&it))
                return mfi_type_error(err, "profile", k, &it, "double");
            r->rate = bson_iter_as_double(&it);
            r->has_rate = true;
        } else if (strcmp(k, "filter") == 0) {
            r->has_filter = true;
            if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "unset") == 0) {
                r->unset = true;
            } else if (!mfi_doc_arg(&it, &r->filter)) {
                return mf_error_set(err, MF_BadValue,
                                    "Expected an object, or the string 'unset'.");
            }
        } else if (!mfi_is_generic_arg(k)) {
            return mf_error_set(err, 40415, "BSON field 'profile.%s' is an unknown field.", k);
        }
    }
    return 0;
}

int mfi_cmd_profile(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mfi_profile *p = ctx->inst->profile;
    profile_req r;
    prof_filter *nf = NULL;
    int rc = parse_request(cmd, &r, err);
    if (rc)
        return rc;
    if (r.has_rate && !(r.rate >= 0.0 && r.rate <= 1.0))
        return mf_error_set(err, MF_BadValue, "'sampleRate' must be between 0.0 and 1.0 inclusive");
    bool set_level = r.level >= 0 && r.level <= 2;
    if (r.has_filter && !r.unset) {
        if ((rc = check_filter_fields(&r.filter, err)) != 0)
            return rc;
        if (!(nf = calloc(1, sizeof *nf)))
            return mf_error_oom(err);
        atomic_init(&nf->refs, 1);
        bson_copy_to(&r.filter, &nf->spec);
        if ((rc = mf_matcher_parse(&nf->spec, &nf->m, err)) != 0) {
            bson_destroy(&nf->spec);
            free(nf);
            return rc;
        }
    }
    /* Setting a level or a filter: the database is created with
     * system.profile (mongod opens the database to write the settings). */
    if ((set_level && r.level > 0) || nf) {
        char ns[MF_MAX_NS_LEN + 1];
        snprintf(ns, sizeof ns, "%s.system.profile", ctx->db);
        if (set_level && r.level > 0 &&
            (rc = create_profile_coll(ctx->inst->engine, ns, err)) != 0 &&
            rc != MF_NamespaceExists) {
            filter_unref(nf);
            return rc;
        }
    }
    int was = 0;
    prof_filter *old = NULL;
    pthread_mutex_lock(&p->mu);
    bool changes = set_level || r.has_filter;
    prof_db *d = find_db(p, ctx->db, changes);
    if (!d && changes) {
        pthread_mutex_unlock(&p->mu);
        filter_unref(nf);
        return mf_error_oom(err);
    }
    if (d) {
        was = d->level;
        old = d->filter;
        if (old)
            atomic_fetch_add(&old->refs, 1); /* for the reply */
        if (set_level)
            d->level = (int)r.level;
        if (r.has_filter) {
            filter_unref(d->filter);
            d->filter = nf;
            nf = NULL;
        }
        recount_active(p);
    }
    pthread_mutex_unlock(&p->mu);
    filter_unref(nf);

    int64_t old_slowms = atomic_load(&p->slowms);
    double old_rate = atomic_load(&p->sample_rate);
    BSON_APPEND_INT32(reply, "was", was);
    BSON_APPEND_INT32(reply, "slowms", (int32_t)old_slowms);
    BSON_APPEND_DOUBLE(reply, "sampleRate", old_rate);
    if (old)
        BSON_APPEND_DOCUMENT(reply, "filter", &old->spec);
    if (old || r.has_filter)
        BSON_APPEND_UTF8(reply, "note",
                         "When a filter expression is set, slowms and sampleRate are not used "
                         "for profiling and slow-query log lines.");
    if (r.has_slowms)
        atomic_store(&p->slowms, r.slowms);
    if (r.has_rate)
        atomic_store(&p->sample_rate, r.rate);
    if (set_level || r.has_slowms || r.has_rate || r.has_filter) {
        char attr[512];
        snprintf(attr, sizeof attr,
                 "{\"from\":{\"level\":%d,\"slowms\":%lld,\"sampleRate\":%g},"
                 "\"to\":{\"level\":%d,\"slowms\":%lld,\"sampleRate\":%g}}",
                 was, (long long)old_slowms, old_rate, set_level ? (int)r.level : was,
                 (long long)atomic_load(&p->slowms), atomic_load(&p->sample_rate));
        mf_log_attr(MF_LOG_INFO, "COMMAND", 48742, "profile", "Profiler settings changed",
                    attr);
    }
    filter_unref(old);
    return 0;
}
