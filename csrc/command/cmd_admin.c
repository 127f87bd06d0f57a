/*
 * cmd_admin.c -- the admin surface drivers and their test harnesses send:
 * buildInfo, ping, getParameter, getCmdLineOpts, whatsmyuri,
 * connectionStatus, listCommands, endSessions, killAllSessions, getLog,
 * shutdown.  serverStatus and hostInfo, which read the machine, are in
 * cmd_status.c.
 */
#include "command_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- buildInfo */

int mfi_cmd_build_info(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)ctx, (void)cmd, (void)err;
    bson_t arr, doc;
    BSON_APPEND_UTF8(reply, "version", MF_VERSION);
    BSON_APPEND_UTF8(reply, "gitVersion", "multifora");
    BSON_APPEND_ARRAY_BEGIN(reply, "modules", &arr);
    bson_append_array_end(reply, &arr);
    BSON_APPEND_UTF8(reply, "allocator", "system");
    BSON_APPEND_UTF8(reply, "javascriptEngine", "none");
    BSON_APPEND_UTF8(reply, "sysInfo", "deprecated");
    BSON_APPEND_ARRAY_BEGIN(reply, "versionArray", &arr);
    BSON_APPEND_INT32(&arr, "0", 7);
    BSON_APPEND_INT32(&arr, "1", 0);
    BSON_APPEND_INT32(&arr, "2", 0);
    BSON_APPEND_INT32(&arr, "3", 0);
    bson_append_array_end(reply, &arr);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "openssl", &doc);
    BSON_APPEND_UTF8(&doc, "running", "disabled");
    BSON_APPEND_UTF8(&doc, "compiled", "disabled");
    bson_append_document_end(reply, &doc);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "buildEnvironment", &doc);
    BSON_APPEND_UTF8(&doc, "distmod", "");
    BSON_APPEND_UTF8(&doc, "distarch", "");
#if defined(__x86_64__)
    BSON_APPEND_UTF8(&doc, "target_arch", "x86_64");
#elif defined(__aarch64__)
    BSON_APPEND_UTF8(&doc, "target_arch", "aarch64");
#else
    BSON_APPEND_UTF8(&doc, "target_arch", "unknown");
#endif
    BSON_APPEND_UTF8(&doc, "target_os", "linux");
    bson_append_document_end(reply, &doc);
    BSON_APPEND_INT32(reply, "bits", (int32_t)(sizeof(void *) * 8));
    BSON_APPEND_BOOL(reply, "debug", false);
    BSON_APPEND_INT32(reply, "maxBsonObjectSize", MF_MAX_BSON_OBJECT_SIZE);
    BSON_APPEND_ARRAY_BEGIN(reply, "storageEngines", &arr);
    BSON_APPEND_UTF8(&arr, "0", "multifora");
    bson_append_array_end(reply, &arr);
    return 0;
}

int mfi_cmd_ping(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)ctx, (void)cmd, (void)reply, (void)err;
    return 0;
}

/* ------------------------------------------------------------- getParameter */

/* How a parameter's value is rendered. */
typedef enum {
    P_BOOL,          /* bool `value` */
    P_INT,           /* int32 `value` */
    P_LONG,          /* int64 `value` */
    P_FCV,           /* {version: "7.0"} */
    P_EMPTY_ARRAY,   /* [] */
    P_TEST_COMMANDS, /* the instance's enableTestCommands */
    P_CURSOR_TIMEOUT, /* the instance's cursorTimeoutMillis */
    P_TTL_SLEEP,      /* the instance's ttlMonitorSleepSecs */
    P_GROUP_MEM,      /* internalDocumentSourceGroupMaxMemoryBytes (long) */
    P_SORT_MEM,       /* internalQueryMaxBlockingSortMemoryUsageBytes (int) */
    P_BAUTO_MEM,      /* internalDocumentSourceBucketAutoMaxMemoryBytes (long) */
    P_WINDOW_MEM,     /* internalDocumentSourceSetWindowFieldsMaxMemoryBytes (long) */
    P_INDEX_BUILD_MEM, /* maxIndexBuildMemoryUsageMegabytes (int) */
    P_SESSION_REFRESH, /* logicalSessionRefreshMillis (int, startup) */
    P_TXN_LIFETIME,    /* transactionLifetimeLimitSeconds (int) */
    P_TXN_SIZE,        /* transactionSizeLimitBytes (long) */
    P_SNAP_WINDOW,     /* minSnapshotHistoryWindowInSeconds (int) */
    P_SNAP_BYTES,      /* multiforaSnapshotHistoryMaxBytes (long): ours */
} param_kind;

/* Sorted by name, as mongod lists them.  `runtime`/`startup` feed
 * showDetails. */
static const struct param {
    const char *name;
    param_kind kind;
    int64_t value;
    bool runtime, startup;
} params[] = {
    {"authenticationMechanisms", P_EMPTY_ARRAY, 0, false, true},
    {"cursorTimeoutMillis", P_CURSOR_TIMEOUT, 0, true, true},
    {"enableTestCommands", P_TEST_COMMANDS, 0, false, true},
    {"featureCompatibilityVersion", P_FCV, 0, false, false},
    {"internalDocumentSourceBucketAutoMaxMemoryBytes", P_BAUTO_MEM, 0, true, true},
    {"internalDocumentSourceGroupMaxMemoryBytes", P_GROUP_MEM, 0, true, true},
    {"internalDocumentSourceSetWindowFieldsMaxMemoryBytes", P_WINDOW_MEM, 0, true, true},
    {"internalQueryMaxBlockingSortMemoryUsageBytes", P_SORT_MEM, 0, true, true},
    {"localLogicalSessionTimeoutMinutes", P_INT, MF_SESSION_TIMEOUT_MINUTES, false, true},
    {"logLevel", P_INT, 0, true, true},
    {"logicalSessionRefreshMillis", P_SESSION_REFRESH, 0, false, true},
    {"maxBSONDepth", P_INT, MF_BSON_MAX_DEPTH, false, true},
    {"maxIndexBuildMemoryUsageMegabytes", P_INDEX_BUILD_MEM, 0, true, true},
    {"minSnapshotHistoryWindowInSeconds", P_SNAP_WINDOW, 0, true, true},
    {"multiforaSnapshotHistoryMaxBytes", P_SNAP_BYTES, 0, true, true},
    {"notablescan", P_BOOL, 0, true, true},
    {"quiet", P_BOOL, 0, true, true},
    {"requireApiVersion", P_BOOL, 0, true, true},
    {"transactionLifetimeLimitSeconds", P_TXN_LIFETIME, 0, true, true},
    {"transactionSizeLimitBytes", P_TXN_SIZE, 0, true, true},
    {"ttlMonitorEnabled", P_BOOL, 1, true, true},
    {"ttlMonitorSleepSecs", P_TTL_SLEEP, 0, false, true},
};

static const struct param *param_find(const char *name)
{
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
        if (strcmp(params[i].name, name) == 0)
            return &params[i];
    return NULL;
}

static void param_value(mf_instance *inst, const struct param *p, bson_t *out,
                        const char *key)
{
    bson_t d;
    switch (p->kind) {
    case P_BOOL:
        bson_append_bool(out, key, -1, p->value != 0);
        break;
    case P_INT:
        bson_append_int32(out, key, -1, (int32_t)p->value);
        break;
    case P_LONG:
        bson_append_int64(out, key, -1, p->value);
        break;
    case P_FCV:
        bson_append_document_begin(out, key, -1, &d);
        BSON_APPEND_UTF8(&d, "version", "7.0");
        bson_append_document_end(out, &d);
        break;
    case P_EMPTY_ARRAY:
        bson_append_array_begin(out, key, -1, &d);
        bson_append_array_end(out, &d);
        break;
    case P_TEST_COMMANDS:
        bson_append_bool(out, key, -1, inst->enable_test_commands);
        break;
    case P_TTL_SLEEP:
        bson_append_int32(out, key, -1, inst->ttl_sleep_secs);
        break;
    case P_SESSION_REFRESH:
        bson_append_int32(out, key, -1, (int32_t)inst->session_refresh_ms);
        break;
    case P_GROUP_MEM:
        bson_append_int64(out, key, -1, atomic_load(&inst->agg_group_max_bytes));
        break;
    case P_SORT_MEM:
        bson_append_int32(out, key, -1, (int32_t)atomic_load(&inst->agg_sort_max_bytes));
        break;
    case P_BAUTO_MEM:
        bson_append_int64(out, key, -1, atomic_load(&inst->agg_bucket_auto_max_bytes));
        break;
    case P_WINDOW_MEM:
        bson_append_int64(out, key, -1, atomic_load(&inst->agg_window_max_bytes));
        break;
    case P_INDEX_BUILD_MEM:
        bson_append_int32(out, key, -1, (int32_t)atomic_load(&inst->index_build_max_mb));
        break;
    case P_TXN_LIFETIME:
        bson_append_int32(out, key, -1, (int32_t)atomic_load(&inst->txn_lifetime_s));
        break;
    case P_TXN_SIZE:
        bson_append_int64(out, key, -1, atomic_load(&inst->txn_size_limit));
        break;
    case P_SNAP_WINDOW:
        bson_append_int32(out, key, -1, (int32_t)atomic_load(&inst->snap_window_s));
        break;
    case P_SNAP_BYTES:
        bson_append_int64(out, key, -1, atomic_load(&inst->snap_budget));
        break;
    case P_CURSOR_TIMEOUT:
        pthread_mutex_lock(&inst->cursors_mu);
        bson_append_int64(out, key, -1, inst->cursor_timeout_ms);
        pthread_mutex_unlock(&inst->cursors_mu);
        break;
    }
}

static void param_append(mf_instance *inst, bson_t *reply, const struct param *p,
                         bool show_details)
{
    if (!show_details) {
        param_value(inst, p, reply, p->name);
        return;
    }
    bson_t d;
    bson_append_document_begin(reply, p->name, -1, &d);
    param_value(inst, p, &d, "value");
    BSON_APPEND_BOOL(&d, "settableAtRuntime", p->runtime);
    BSON_APPEND_BOOL(&d, "settableAtStartup", p->startup);
    bson_append_document_end(reply, &d);
}

int mfi_cmd_get_parameter(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    bson_iter_t it;
    bool all = false, show_details = false;

    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "*") == 0) {
        all = true;
    } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_iter_t opt;
        bson_iter_recurse(&it, &opt);
        while (bson_iter_next(&opt)) {
            const char *k = bson_iter_key(&opt);
            if (strcmp(k, "allParameters") == 0)
                all = bson_iter_as_bool(&opt);
            else if (strcmp(k, "showDetails") == 0)
                show_details = bson_iter_as_bool(&opt);
            else if (strcmp(k, "setAt") != 0)
                return mf_error_set(err, 40415,
                                    "BSON field 'getParameter.%s' is an unknown field.", k);
        }
    }

    if (all) {
        for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
            param_append(ctx->inst, reply, &params[i], show_details);
        return 0;
    }

    bool found = false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (mfi_is_generic_arg(k))
            continue;
        const struct param *p = param_find(k);
        if (!p)
            return mf_error_set(err, MF_InvalidOptions,
                                "no option found to get");
        param_append(ctx->inst, reply, p, show_details);
        found = true;
    }
    if (!found)
        return mf_error_set(err, MF_InvalidOptions, "no option found to get");
    return 0;
}

/* ------------------------------------------------------------- setParameter */

/* setParameter: of the runtime parameters, cursorTimeoutMillis, the
 * memory limits, transactionLifetimeLimitSeconds,
 * transactionSizeLimitBytes, minSnapshotHistoryWindowInSeconds and the
 * history's budget (multiforaSnapshotHistoryMaxBytes) can be set; the others
 * are reported as not settable here rather than pretending. */
int mfi_cmd_set_parameter(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    bson_iter_t it;
    bool found = false;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (mfi_is_generic_arg(k))
            continue;
        if (found)
            return mf_error_set(err, MF_BadValue,
                                "Only one parameter can be set at a time");
        const struct param *p = param_find(k);
        if (!p)
            return mf_error_set(err, MF_InvalidOptions,
                                "Attempted to set unrecognized parameter [%s], use help:true "
                                "to see options", k);
        if (!p->runtime)
            return mf_error_set(err, MF_IllegalOperation,
                                "Cannot set parameter %s at runtime", k);
        bool is_mem = p->kind == P_GROUP_MEM || p->kind == P_SORT_MEM ||
                      p->kind == P_BAUTO_MEM || p->kind == P_WINDOW_MEM;
        if (p->kind != P_CURSOR_TIMEOUT && p->kind != P_INDEX_BUILD_MEM &&
            p->kind != P_TXN_LIFETIME && p->kind != P_TXN_SIZE && p->kind != P_SNAP_WINDOW &&
            p->kind != P_SNAP_BYTES && !is_mem)
            return mf_error_set(err, MF_IllegalOperation,
                                "Setting parameter %s is not supported by this server", k);
        int64_t v;
        if (!mfi_as_int64(&it, &v))
            return mf_error_set(err, MF_BadValue, "Invalid value for parameter %s", k);
        /* the memory limits: positive, the sort's an int as in mongod */
        if (is_mem &&
            (v <= 0 || (p->kind == P_SORT_MEM && v > INT32_MAX)))
            return mf_error_set(err, MF_BadValue, "Invalid value for parameter %s", k);
        /* mongod's floor is 50 MB; with test commands, as mongod's testing
         * mode allows, down to 1 (tests build in several sorted runs) */
        int64_t floor_mb = ctx->inst->enable_test_commands ? 1 : MF_INDEX_BUILD_MIN_MB;
        if (p->kind == P_INDEX_BUILD_MEM && (v < floor_mb || v > INT32_MAX))
            return mf_error_set(err, MF_BadValue,
                                "Invalid value for parameter %s: %lld is not greater than or "
                                "equal to %lld", k, (long long)v, (long long)floor_mb);
        /* mongod's validator: at least one second */
        if (p->kind == P_TXN_LIFETIME && (v < 1 || v > INT32_MAX))
            return mf_error_set(err, MF_BadValue,
                                "Invalid value for parameter %s: %lld is not greater than or "
                                "equal to 1", k, (long long)v);
        if ((p->kind == P_SNAP_WINDOW && (v < 0 || v > INT32_MAX)) ||
            (p->kind == P_SNAP_BYTES && v < 1))
            return mf_error_set(err, MF_BadValue,
                                "Invalid value for parameter %s: %lld is not greater than or "
                                "equal to %d", k, (long long)v, p->kind == P_SNAP_BYTES);
        if (p->kind == P_TXN_SIZE && v < 1)
            return mf_error_set(err, MF_BadValue,
                                "Invalid value for parameter %s: %lld is not greater than or "
                                "equal to 1", k, (long long)v);
        param_value(ctx->inst, p, reply, "was");
        if (p->kind == P_TXN_SIZE) {
            atomic_store(&ctx->inst->txn_size_limit, v);
            mf_cl_txns_set_size_limit(ctx->inst->cl.txns, v);
        } else if (p->kind == P_SNAP_WINDOW || p->kind == P_SNAP_BYTES) {
            atomic_store(p->kind == P_SNAP_WINDOW ? &ctx->inst->snap_window_s
                                                  : &ctx->inst->snap_budget, v);
            mf_cl_txns_set_history(ctx->inst->cl.txns, atomic_load(&ctx->inst->snap_window_s),
                                   (size_t)atomic_load(&ctx->inst->snap_budget), 0);
        } else if (p->kind == P_TXN_LIFETIME) {
            atomic_store(&ctx->inst->txn_lifetime_s, v);
        } else if (p->kind == P_GROUP_MEM) {
            atomic_store(&ctx->inst->agg_group_max_bytes, v);
        } else if (p->kind == P_SORT_MEM) {
            atomic_store(&ctx->inst->agg_sort_max_bytes, v);
        } else if (p->kind == P_BAUTO_MEM) {
            atomic_store(&ctx->inst->agg_bucket_auto_max_bytes, v);
        } else if (p->kind == P_WINDOW_MEM) {
            atomic_store(&ctx->inst->agg_window_max_bytes, v);
        } else if (p->kind == P_INDEX_BUILD_MEM) {
            atomic_store(&ctx->inst->index_build_max_mb, v);
        } else {
            pthread_mutex_lock(&ctx->inst->cursors_mu);
            ctx->inst->cursor_timeout_ms = v;
            pthread_mutex_unlock(&ctx->inst->cursors_mu);
        }
        found = true;
    }
    if (!found)
        return mf_error_set(err, MF_InvalidOptions, "no option found to set, use help:true to "
                            "see options ");
    return 0;
}

/* ----------------------------------------------------------- getCmdLineOpts */

int mfi_cmd_get_cmd_line_opts(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                              mf_error *err)
{
    (void)cmd, (void)err;
    BSON_APPEND_ARRAY(reply, "argv", &ctx->inst->cmdline_argv);
    BSON_APPEND_DOCUMENT(reply, "parsed", &ctx->inst->cmdline_parsed);
    return 0;
}

/* --------------------------------------------------- whatsmyuri, connStatus */

int mfi_cmd_whatsmyuri(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)cmd, (void)err;
    BSON_APPEND_UTF8(reply, "you", ctx->client->remote);
    return 0;
}

int mfi_cmd_connection_status(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                              mf_error *err)
{
    bson_iter_t it;
    bool privileges = bson_iter_init_find(&it, cmd, "showPrivileges") &&
                      bson_iter_as_bool(&it);
    bson_t info;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "authInfo", &info);
    int rc = mfi_auth_status(ctx, privileges, &info, err);
    bson_append_document_end(reply, &info);
    return rc;
}

/* ------------------------------------------------------------- listCommands */

/* An array of the API versions in bit set `v` ("1", "2"). */
static void append_versions(bson_t *into, const char *key, unsigned v)
{
    bson_t arr;
    uint32_t n = 0;
    BSON_APPEND_ARRAY_BEGIN(into, key, &arr);
    for (unsigned bit = 0; bit < 2; bit++) {
        if (v & (1u << bit)) {
            char idx[16], ver[4];
            const char *k;
            mf_uint32_to_key(n++, &k, idx, sizeof idx);
            snprintf(ver, sizeof ver, "%u", bit + 1);
            bson_append_utf8(&arr, k, -1, ver, -1);
        }
    }
    bson_append_array_end(into, &arr);
}

int mfi_cmd_list_commands(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                          mf_error *err)
{
    (void)cmd, (void)err;
    size_t n;
    const mf_cmd_def *t = mfi_command_table(&n);
    bson_t cmds, one;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "commands", &cmds);
    for (size_t i = 0; i < n; i++) {
        if ((t[i].flags & MF_CMD_ALIAS) ||
            ((t[i].flags & MF_CMD_TEST_ONLY) && !ctx->inst->enable_test_commands))
            continue;
        unsigned deprecated, versions = mfi_api_versions(&t[i], &deprecated);
        bson_append_document_begin(&cmds, t[i].name, -1, &one);
        BSON_APPEND_UTF8(&one, "help", t[i].help);
        BSON_APPEND_BOOL(&one, "requiresAuth", false);
        BSON_APPEND_BOOL(&one, "secondaryOk", true);
        BSON_APPEND_BOOL(&one, "adminOnly", (t[i].flags & MF_CMD_ADMIN_ONLY) != 0);
        append_versions(&one, "apiVersions", versions);
        append_versions(&one, "deprecatedApiVersions", deprecated);
        bson_append_document_end(&cmds, &one);
    }
    bson_append_document_end(reply, &cmds);
    return 0;
}

/* ------------------------------------------------------------------ sessions */

/* Both take an array of documents, and change the session registry
 * (sessions.c). */
static int check_doc_array(const bson_t *cmd, const char *name, mf_error *err)
{
    bson_iter_t it, el;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        return mfi_type_error(err, name, name, &it, "array");
    bson_iter_recurse(&it, &el);
    while (bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&el))
            return mfi_type_error(err, name, name, &el, "object");
    }
    return 0;
}

int mfi_cmd_end_sessions(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)reply;
    int rc = check_doc_array(cmd, "endSessions", err);
    return rc ? rc : mfi_end_sessions(ctx, cmd, err);
}

/* One {user, db} of killAllSessions (IDL KillAllSessionsUser, strict). */
static int kill_user_arg(const bson_iter_t *el, uint8_t uid[32], mf_error *err)
{
    static const char *const path = "KillAllSessionsCmd.killAllSessions";
    const char *user = NULL, *db = NULL;
    bson_iter_t f;
    bson_iter_recurse(el, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        const char **slot = strcmp(k, "user") == 0 ? &user : strcmp(k, "db") == 0 ? &db : NULL;
        if (!slot)
            return mf_error_set(err, 40415, "BSON field '%s.%s' is an unknown field.", path, k);
        if (*slot)
            return mf_error_set(err, 40413, "BSON field '%s.%s' is a duplicate field", path, k);
        if (!BSON_ITER_HOLDS_UTF8(&f))
            return mf_error_set(err, MF_TypeMismatch,
                                "BSON field '%s.%s' is the wrong type '%s', expected type "
                                "'string'",
                                path, k, mf_bsonx_type_alias(bson_iter_type(&f)));
        *slot = bson_iter_utf8(&f, NULL);
    }
    if (!user || !db)
        return mf_error_set(err, 40414, "BSON field '%s.%s' is missing but a required field",
                            path, user ? "db" : "user");
    mfi_session_user_digest(user, db, uid);
    return 0;
}

/* killAllSessions: [] ends every session; [{user, db}, ...] those users'. */
int mfi_cmd_kill_all_sessions(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                              mf_error *err)
{
    (void)reply;
    int rc = check_doc_array(cmd, "killAllSessions", err);
    if (rc)
        return rc;
    bson_iter_t it, el;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    bson_iter_recurse(&it, &el);
    size_t n = 0;
    while (bson_iter_next(&el))
        n++;
    uint8_t(*uids)[32] = n ? calloc(n, 32) : NULL;
    if (n && !uids)
        return mf_error_oom(err);
    bson_iter_recurse(&it, &el);
    for (size_t i = 0; bson_iter_next(&el); i++) {
        if ((rc = kill_user_arg(&el, uids[i], err)) != 0) {
            free(uids);
            return rc;
        }
    }
    mfi_sessions_kill(ctx->inst, (const uint8_t(*)[32])uids, n, n == 0);
    mfi_txn_kill(ctx->inst, (const uint8_t(*)[32])uids, n, n == 0);
    free(uids);
    return 0;
}

/* ------------------------------------------------------------------- getLog */

typedef struct log_sink {
    bson_t *arr;
    uint32_t i;
} log_sink;

static void log_line_append(const char *line, void *arg)
{
    log_sink *s = arg;
    char key[16];
    const char *k;
    mf_uint32_to_key(s->i++, &k, key, sizeof key);
    bson_append_utf8(s->arr, k, -1, line, -1);
}

int mfi_cmd_get_log(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)ctx;
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_error_set(err, MF_TypeMismatch,
                            "Argument to getLog must be of type String; found %s",
                            mf_bsonx_type_alias(bson_iter_type(&it)));
    const char *which = bson_iter_utf8(&it, NULL);

    if (strcmp(which, "*") == 0) {
        bson_t names;
        BSON_APPEND_ARRAY_BEGIN(reply, "names", &names);
        BSON_APPEND_UTF8(&names, "0", "global");
        BSON_APPEND_UTF8(&names, "1", "startupWarnings");
        bson_append_array_end(reply, &names);
        return 0;
    }

    uint64_t (*each)(void (*)(const char *, void *), void *);
    if (strcmp(which, "global") == 0)
        each = mf_log_ring_each;
    else if (strcmp(which, "startupWarnings") == 0)
        each = mf_log_startup_each;
    else
        return mf_error_set(err, MF_ERRMSG_ONLY, "no RamLog named: %s", which);

    /* The lines go into a scratch array first: totalLinesWritten comes
     * from the same locked pass and precedes them in the reply. */
    bson_t lines = BSON_INITIALIZER;
    log_sink sink = {.arr = &lines};
    uint64_t total = each(log_line_append, &sink);
    BSON_APPEND_INT32(reply, "totalLinesWritten", (int32_t)total);
    BSON_APPEND_ARRAY(reply, "log", &lines);
    bson_destroy(&lines);
    return 0;
}

/* ----------------------------------------------------------------- shutdown */

int mfi_cmd_shutdown(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)cmd, (void)reply;
    /* without access control only from this host; with it, whoever holds
     * the shutdown action (checked before) */
    if (!ctx->inst->auth && !mfi_client_is_local(ctx->client))
        return mf_error_set(err, MF_Unauthorized,
                            "shutdown must run from localhost when running db without auth");
    mf_log(MF_LOG_INFO, "COMMAND", 4695400, "conn", "Terminating via shutdown command");
    mf_instance_begin_shutdown(ctx->inst);
    if (ctx->inst->request_stop)
        ctx->inst->request_stop(ctx->inst->request_stop_arg);
    /* mongod never answers a shutdown: the connection just closes. */
    ctx->flags |= MF_RUN_CLOSE;
    return 0;
}

/* ------------------------------------------------------- cluster parameters */

/* mongod 7.0's cluster parameters (community): changeStreamOptions, kept
 * in config.clusterParameters as {_id: name, clusterParameterTime, ...}
 * and set on a replica set only.  changeStreamOptions.preAndPostImages.
 * expireAfterSeconds ("off" or seconds) bounds how long change streams'
 * pre-images are kept (docs/change-streams.md). */
#define CLUSTER_PARAMS_NS "config.clusterParameters"

/* The stored changeStreamOptions document into `out` (initialised here),
 * or its default {_id, clusterParameterTime: Timestamp(0, 0),
 * preAndPostImages: {expireAfterSeconds: "off"}}. */
static int change_stream_options(mf_instance *inst, bson_t *out, mf_error *err)
{
    bson_t id = BSON_INITIALIZER, sub;
    bool found;
    BSON_APPEND_UTF8(&id, "_id", "changeStreamOptions");
    mf_engine_catalog_lock(inst->engine, false);
    int rc = mf_cl_read_by_id(inst->engine, CLUSTER_PARAMS_NS, &id, out, &found, err);
    mf_engine_catalog_unlock(inst->engine);
    bson_destroy(&id);
    if (rc == 0 && !found) {
        BSON_APPEND_UTF8(out, "_id", "changeStreamOptions");
        BSON_APPEND_TIMESTAMP(out, "clusterParameterTime", 0, 0);
        BSON_APPEND_DOCUMENT_BEGIN(out, "preAndPostImages", &sub);
        BSON_APPEND_UTF8(&sub, "expireAfterSeconds", "off");
        bson_append_document_end(out, &sub);
    }
    return rc;
}

int64_t mfi_pre_images_expire_after(mf_instance *inst)
{
    bson_t doc;
    bson_iter_t it;
    mf_error err;
    int64_t secs = 0;
    if (change_stream_options(inst, &doc, &err) == 0 && bson_iter_init(&it, &doc) &&
        bson_iter_find_descendant(&it, "preAndPostImages.expireAfterSeconds", &it) &&
        BSON_ITER_HOLDS_NUMBER(&it))
        secs = bson_iter_as_int64(&it);
    bson_destroy(&doc);
    return secs;
}

static int unknown_param(mf_error *err, const char *name)
{
    return mf_error_set(err, MF_NoSuchKey, "Unknown Cluster Parameter %s", name);
}

int mfi_cmd_set_cluster_parameter(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                                  mf_error *err)
{
    bson_iter_t it, p, o, f;
    (void)reply;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return mfi_type_error(err, "setClusterParameter", "setClusterParameter", &it, "object");
    if (!ctx->inst->cl.oplog)
        return mf_error_set(err, MF_IllegalOperation,
                            "Cannot set cluster parameter, gClusterServerParametersEnabled is "
                            "false: cluster parameters need a replica set");
    bson_iter_recurse(&it, &p);
    if (!bson_iter_next(&p))
        return mf_error_set(err, MF_IllegalOperation, "Exactly one cluster parameter must be set");
    const char *name = bson_iter_key(&p);
    bson_iter_t more = p;
    if (bson_iter_next(&more))
        return mf_error_set(err, MF_IllegalOperation, "Exactly one cluster parameter must be set");
    if (strcmp(name, "changeStreamOptions") != 0)
        return unknown_param(err, name);
    if (!BSON_ITER_HOLDS_DOCUMENT(&p))
        return mfi_type_error(err, "setClusterParameter", name, &p, "object");
    /* {preAndPostImages: {expireAfterSeconds: "off" | seconds > 0}} */
    bool has_images = false, has_expire = false;
    bson_value_t expire = {0};
    bson_iter_recurse(&p, &o);
    while (bson_iter_next(&o)) {
        if (strcmp(bson_iter_key(&o), "preAndPostImages") != 0)
            return mf_error_set(err, 40415, "BSON field 'changeStreamOptions.%s' is an unknown "
                                            "field.",
                                bson_iter_key(&o));
        if (!BSON_ITER_HOLDS_DOCUMENT(&o))
            return mfi_type_error(err, "changeStreamOptions", "preAndPostImages", &o, "object");
        has_images = true;
        bson_iter_recurse(&o, &f);
        while (bson_iter_next(&f)) {
            if (strcmp(bson_iter_key(&f), "expireAfterSeconds") != 0)
                return mf_error_set(err, 40415,
                                    "BSON field 'changeStreamOptions.preAndPostImages.%s' is an "
                                    "unknown field.",
                                    bson_iter_key(&f));
            has_expire = true;
            if (BSON_ITER_HOLDS_UTF8(&f) && strcmp(bson_iter_utf8(&f, NULL), "off") == 0) {
                expire.value_type = BSON_TYPE_UTF8;
            } else if ((BSON_ITER_HOLDS_INT32(&f) || BSON_ITER_HOLDS_INT64(&f)) &&
                       bson_iter_as_int64(&f) > 0) {
                expire.value_type = BSON_TYPE_INT64;
                expire.value.v_int64 = bson_iter_as_int64(&f);
            } else {
                return mf_error_set(err, MF_BadValue,
                                    "Expected 'expireAfterSeconds' to be either 'off' or a "
                                    "positive integer number of seconds");
            }
        }
    }
    if (!has_images)
        return mf_error_set(err, MF_BadValue, "Should specify at least one change stream option");
    if (!has_expire)
        return mf_error_set(err, MF_BadValue,
                            "Should specify at least one pre- and post-images option");
    mf_cl_optime now;
    mf_cl_oplog_last(ctx->inst->cl.oplog, &now, NULL);
    bson_t doc = BSON_INITIALIZER, sub;
    BSON_APPEND_UTF8(&doc, "_id", "changeStreamOptions");
    BSON_APPEND_TIMESTAMP(&doc, "clusterParameterTime", now.secs, now.inc);
    BSON_APPEND_DOCUMENT_BEGIN(&doc, "preAndPostImages", &sub);
    if (expire.value_type == BSON_TYPE_UTF8)
        BSON_APPEND_UTF8(&sub, "expireAfterSeconds", "off");
    else
        BSON_APPEND_INT64(&sub, "expireAfterSeconds", expire.value.v_int64);
    bson_append_document_end(&doc, &sub);
    mf_lsn lsn = 0;
    int rc = mf_cl_put_by_id(ctx->inst->engine, mfi_ctx_log(ctx), CLUSTER_PARAMS_NS, &doc, &lsn,
                             err);
    mfi_ctx_wrote(ctx, lsn);
    bson_destroy(&doc);
    return rc;
}

int mfi_cmd_get_cluster_parameter(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                                  mf_error *err)
{
    bson_iter_t it, a;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    /* a name, "*", or an array of names */
    if (BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_recurse(&it, &a);
        while (bson_iter_next(&a)) {
            if (!BSON_ITER_HOLDS_UTF8(&a))
                return mfi_type_error(err, "getClusterParameter", "getClusterParameter", &a,
                                      "string");
            if (strcmp(bson_iter_utf8(&a, NULL), "changeStreamOptions") != 0)
                return unknown_param(err, bson_iter_utf8(&a, NULL));
        }
    } else if (BSON_ITER_HOLDS_UTF8(&it)) {
        const char *name = bson_iter_utf8(&it, NULL);
        if (strcmp(name, "*") != 0 && strcmp(name, "changeStreamOptions") != 0)
            return unknown_param(err, name);
    } else {
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field 'getClusterParameter.getClusterParameter' is the wrong "
                            "type '%s', expected types '[string, array]'",
                            mf_bsonx_type_alias(bson_iter_type(&it)));
    }
    bson_t doc, arr;
    int rc = change_stream_options(ctx->inst, &doc, err);
    if (rc == 0) {
        BSON_APPEND_ARRAY_BEGIN(reply, "clusterParameters", &arr);
        BSON_APPEND_DOCUMENT(&arr, "0", &doc);
        bson_append_array_end(reply, &arr);
    }
    bson_destroy(&doc);
    return rc;
}
