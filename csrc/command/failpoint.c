/*
 * failpoint.c -- mongod's "failCommand" fail point: make chosen commands
 * fail, hang up or wait, so drivers' tests can see server errors at will.
 *
 *   {configureFailPoint: "failCommand",
 *    mode: "alwaysOn" | "off" | {times: n} | {skip: n} | {activationProbability: p},
 *    data: {failCommands: ["insert", ...], errorCode: 8, closeConnection: true,
 *           blockConnection: true, blockTimeMS: 100, appName: "app",
 *           errorLabels: [...], writeConcernError: {...},
 *           failInternalCommands, failLocalClients, failAllCommands,
 *           threadName: "conn7", namespace: "db.coll"}}
 *
 * One fail point per instance, shared by every connection thread under
 * `mu`.  The semantics are mongod 7.0's (util/fail_point.cpp,
 * db/commands.cpp, service_entry_point_common.cpp):
 *
 * Entering.  A command "enters" the fail point when the filter below
 * accepts it AND the mode lets it through; only then does `times` count
 * down, and times_entered (configureFailPoint's `count`) count up.
 *   alwaysOn   always;
 *   {times: n} n times, then off.  As in mongod, n = 0 still lets one in:
 *              the counter is decremented first, and off follows <= 0;
 *   {skip: n}  the first n accepted commands pass by, every later one enters;
 *   {activationProbability: p}  each accepted command with probability p.
 *
 * The filter (shouldActivateFailCommandFailPoint): never configureFailPoint
 * itself; never the in-process caller (it has no connection: mongod's local
 * clients) unless failLocalClients; threadName ("conn<id>"), appName (from
 * the connection's first hello) and namespace must match when given;
 * internal clients (hello said internalClient, or in-process) only with
 * failInternalCommands; then failAllCommands, or the command's name or an
 * alias of it in failCommands.
 *
 * Two places enter it:
 *   before the command runs (after its session is parsed), when data has
 *     closeConnection, blockConnection or an integral errorCode: set the
 *     errorLabels override, sleep blockTimeMS, then close the connection
 *     (no reply) or fail with errorCode, "Failing command via 'failCommand'
 *     failpoint".  errorCode 0 is success in mongod's Status: the command
 *     runs.  With blockConnection alone the command runs after the wait.
 *   after a command that takes a write concern ran (successfully or not),
 *     when data has writeConcernError: the reply carries that value as its
 *     writeConcernError, and the errorLabels override.
 * With both errorCode and writeConcernError the first wins (the command
 * never runs).  The errorLabels override replaces the labels of any error
 * reply of that command; an empty array means none.
 */
#include "command_int.h"

#include <stdlib.h>
#include <string.h>

#define FAIL_MSG "Failing command via 'failCommand' failpoint"

typedef enum { FP_OFF, FP_ALWAYS_ON, FP_TIMES, FP_SKIP, FP_RANDOM } fp_mode;

struct mfi_fail_command {
    pthread_mutex_t mu; /* guards everything below */
    fp_mode mode;
    int64_t val;           /* FP_TIMES: left; FP_SKIP: to pass by; FP_RANDOM: threshold */
    int64_t times_entered; /* since the instance opened, across settings */
    uint8_t *data;         /* the data document (owned); NULL: {} */
    uint32_t data_len;
    uint64_t prng;         /* xorshift64 state for activationProbability */
};

int mfi_fail_command_open(mf_instance *inst, mf_error *err)
{
    mfi_fail_command *fc = calloc(1, sizeof *fc);
    if (!fc)
        return mf_error_set(err, MF_InternalError, "out of memory");
    pthread_mutex_init(&fc->mu, NULL);
    fc->prng = (uint64_t)mf_clock_mono_us() * 0x9e3779b97f4a7c15ull | 1;
    inst->fail_command = fc;
    return 0;
}

void mfi_fail_command_close(mf_instance *inst)
{
    mfi_fail_command *fc = inst->fail_command;
    if (!fc)
        return;
    pthread_mutex_destroy(&fc->mu);
    free(fc->data);
    free(fc);
    inst->fail_command = NULL;
}

/* ------------------------------------------------------------- configuring */

/* bsonExtractIntegerField: a number with an exact 64-bit integer value. */
static int extract_integer(const bson_iter_t *it, const char *field, int64_t *out, mf_error *err)
{
    if (!mfi_is_number(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "Expected field \"%s\" to have numeric type, but found %s", field,
                            mf_bsonx_type_alias(bson_iter_type(it)));
    if (BSON_ITER_HOLDS_DECIMAL128(it) || !mfi_as_int64(it, out)) {
        char shown[64];
        if (BSON_ITER_HOLDS_DOUBLE(it))
            snprintf(shown, sizeof shown, "%g", bson_iter_double(it));
        else
            snprintf(shown, sizeof shown, "%s", "a decimal");
        return mf_error_set(err, MF_BadValue,
                            "Expected field \"%s\" to have a value exactly representable as a "
                            "64-bit integer, but found %s: %s",
                            field, field, shown);
    }
    return 0;
}

/* A times/skip count: an integer in [0, INT32_MAX]. */
static int parse_count(const bson_iter_t *it, const char *field, int64_t *out, mf_error *err)
{
    int rc = extract_integer(it, field, out, err);
    if (rc != 0)
        return rc;
    if (*out < 0)
        return mf_error_set(err, MF_BadValue, "'%s' option to 'mode' must be positive", field);
    if (*out > INT32_MAX)
        return mf_error_set(err, MF_BadValue, "'%s' option to 'mode' is too large", field);
    return 0;
}

/* FailPoint::parseBSON's reading of `mode`.  Of a document, the first of
 * times, skip, activationProbability present decides (the others are
 * ignored). */
static int parse_mode(const bson_t *cmd, fp_mode *mode, int64_t *val, mf_error *err)
{
    bson_iter_t it, f;
    *val = 0;
    if (!bson_iter_init_find(&it, cmd, "mode"))
        return mf_error_set(err, MF_IllegalOperation,
                            "When setting a failpoint, you must supply a 'mode'");
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        const char *m = bson_iter_utf8(&it, NULL);
        if (strcmp(m, "off") == 0)
            *mode = FP_OFF;
        else if (strcmp(m, "alwaysOn") == 0)
            *mode = FP_ALWAYS_ON;
        else
            return mf_error_set(err, MF_BadValue, "unknown mode: %s", m);
        return 0;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return mf_error_set(err, MF_TypeMismatch, "'mode' must be a string or JSON object");
    bson_t m;
    mfi_doc_arg(&it, &m);
    if (bson_iter_init_find(&f, &m, "times")) {
        *mode = FP_TIMES;
        return parse_count(&f, "times", val, err);
    }
    if (bson_iter_init_find(&f, &m, "skip")) {
        *mode = FP_SKIP;
        return parse_count(&f, "skip", val, err);
    }
    if (bson_iter_init_find(&f, &m, "activationProbability")) {
        *mode = FP_RANDOM;
        if (!mfi_is_number(&f))
            return mf_error_set(err, MF_TypeMismatch,
                                "the 'activationProbability' option to 'mode' must be a double "
                                "between 0 and 1");
        double p = bson_iter_as_double(&f);
        if (!(p >= 0 && p <= 1))
            return mf_error_set(err, MF_BadValue,
                                "activationProbability must be between 0.0 and 1.0; found %g", p);
        *val = (int64_t)(int32_t)((double)INT32_MAX * p);
        return 0;
    }
    return mf_error_set(err, MF_BadValue,
                        "'mode' must be one of 'off', 'alwaysOn', '{times:n}', '{skip:n}' or "
                        "'{activationProbability:p}'");
}

int mfi_fail_command_configure(mf_instance *inst, const bson_t *cmd, int64_t *count,
                               mf_error *err)
{
    mfi_fail_command *fc = inst->fail_command;
    fp_mode mode = FP_OFF;
    int64_t val;
    int rc;
    if ((rc = parse_mode(cmd, &mode, &val, err)) != 0)
        return rc;

    /* data: any document (an array passes too, as isABSONObj lets it);
     * nothing in it is checked until a command meets it, as in mongod. */
    uint8_t *data = NULL;
    uint32_t data_len = 0;
    bson_iter_t it;
    if (bson_iter_init_find(&it, cmd, "data")) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) && !BSON_ITER_HOLDS_ARRAY(&it))
            return mf_error_set(err, MF_TypeMismatch, "the 'data' option must be a JSON object");
        const uint8_t *p;
        if (BSON_ITER_HOLDS_DOCUMENT(&it))
            bson_iter_document(&it, &data_len, &p);
        else
            bson_iter_array(&it, &data_len, &p);
        if (!(data = malloc(data_len)))
            return mf_error_set(err, MF_InternalError, "out of memory");
        memcpy(data, p, data_len);
    }

    pthread_mutex_lock(&fc->mu);
    free(fc->data);
    fc->data = data;
    fc->data_len = data_len;
    fc->mode = mode;
    fc->val = val;
    *count = fc->times_entered;
    pthread_mutex_unlock(&fc->mu);
    return 0;
}

int64_t mfi_fail_command_entered(mf_instance *inst)
{
    mfi_fail_command *fc = inst->fail_command;
    pthread_mutex_lock(&fc->mu);
    int64_t n = fc->times_entered;
    pthread_mutex_unlock(&fc->mu);
    return n;
}

/* ----------------------------------------------------------------- hello */

void mfi_client_note_hello(mf_client *client, const bson_t *cmd)
{
    bson_iter_t it, app;
    if (client->has_hello)
        return; /* the metadata is fixed by the first hello */
    if (bson_iter_init_find(&it, cmd, "internalClient"))
        client->is_internal_client = true;
    client->app_name[0] = '\0';
    if (bson_iter_init_find(&it, cmd, "client") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &app) && bson_iter_find_descendant(&app, "application.name", &it) &&
        BSON_ITER_HOLDS_UTF8(&it)) {
        uint32_t len;
        const char *name = bson_iter_utf8(&it, &len);
        /* mongod refuses a longer name at the hello; keep none then. */
        if (len < sizeof client->app_name)
            memcpy(client->app_name, name, (size_t)len + 1);
    }
}

/* ------------------------------------------------------------- the filter */

/* BSONObj::getBoolField: true only for a boolean true. */
static bool data_bool(const bson_t *data, const char *field)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, data, field) && BSON_ITER_HOLDS_BOOL(&it) &&
           bson_iter_bool(&it);
}

/* bsonExtractBooleanField succeeding on true: a boolean or a number. */
static bool data_flag(const bson_t *data, const char *field)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, data, field))
        return false;
    if (BSON_ITER_HOLDS_BOOL(&it) || mfi_is_number(&it))
        return bson_iter_as_bool(&it);
    return false;
}

/* BSONObj::getStringField: the string, or "" for anything else. */
static const char *data_string(const bson_t *data, const char *field)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, data, field) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return "";
}

static bool data_has(const bson_t *data, const char *field)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, data, field);
}

/* The command's table entry under its primary name (aliases follow it). */
static const mf_cmd_def *primary_def(const mf_cmd_def *def)
{
    size_t n;
    const mf_cmd_def *table = mfi_command_table(&n);
    while (def > table && (def->flags & MF_CMD_ALIAS))
        def--;
    return def;
}

/* The namespace the command acts on, as its invocation's ns(): "<db>.<coll>"
 * for a command whose first value names a collection (getMore: its
 * `collection`), the value itself for renameCollection, else "<db>.$cmd". */
static void command_ns(const mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                       char *out, size_t cap)
{
    bson_iter_t it;
    const char *coll = NULL;
    if (strcmp(def->name, "getMore") == 0) {
        if (bson_iter_init_find(&it, cmd, "collection") && BSON_ITER_HOLDS_UTF8(&it))
            coll = bson_iter_utf8(&it, NULL);
    } else if (bson_iter_init(&it, cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it)) {
        coll = bson_iter_utf8(&it, NULL);
        if (strcmp(def->name, "renameCollection") == 0) {
            snprintf(out, cap, "%s", coll);
            return;
        }
    }
    snprintf(out, cap, "%s.%s", ctx->db, coll && *coll ? coll : "$cmd");
}

/* shouldActivateFailCommandFailPoint. */
static bool should_activate(const bson_t *data, const mf_cmd_ctx *ctx, const mf_cmd_def *def,
                            const bson_t *cmd)
{
    const mf_client *client = ctx->client;
    const mf_cmd_def *self = primary_def(def);
    bson_iter_t it;

    if (strcmp(self->name, "configureFailPoint") == 0)
        return false; /* banned even if in failCommands */
    if (client->is_internal && !data_bool(data, "failLocalClients"))
        return false;
    if (data_has(data, "threadName")) {
        char thread[32];
        snprintf(thread, sizeof thread, "conn%lld", (long long)client->id);
        if (strcmp(thread, data_string(data, "threadName")) != 0)
            return false;
    }
    if (data_has(data, "appName") && strcmp(client->app_name, data_string(data, "appName")) != 0)
        return false;
    if (data_has(data, "namespace")) {
        char ns[MF_MAX_NS_LEN + 64];
        command_ns(ctx, def, cmd, ns, sizeof ns);
        if (strcmp(ns, data_string(data, "namespace")) != 0)
            return false;
    }
    if ((client->is_internal || client->is_internal_client) &&
        !data_bool(data, "failInternalCommands"))
        return false;
    if (data_has(data, "failAllCommands"))
        return true;
    if (!bson_iter_init_find(&it, data, "failCommands") ||
        !(BSON_ITER_HOLDS_ARRAY(&it) || BSON_ITER_HOLDS_DOCUMENT(&it)))
        return false;
    bson_iter_t e;
    bson_iter_recurse(&it, &e);
    while (bson_iter_next(&e)) {
        if (!BSON_ITER_HOLDS_UTF8(&e))
            continue;
        const mf_cmd_def *named = mfi_command_find(bson_iter_utf8(&e, NULL));
        if (named && primary_def(named) == self)
            return true;
    }
    return false;
}

/* The mode's say once the filter accepted a command; counts an entry.
 * Caller holds fc->mu. */
static bool mode_admits(mfi_fail_command *fc)
{
    bool on = false;
    switch (fc->mode) {
    case FP_OFF:
        return false;
    case FP_ALWAYS_ON:
        on = true;
        break;
    case FP_TIMES:
        if (--fc->val <= 0)
            fc->mode = FP_OFF;
        on = true;
        break;
    case FP_SKIP:
        /* Stop counting at 0 so the counter never wraps. */
        on = fc->val <= 0 || --fc->val < 0;
        break;
    case FP_RANDOM:
        fc->prng ^= fc->prng << 13;
        fc->prng ^= fc->prng >> 7;
        fc->prng ^= fc->prng << 17;
        on = (int64_t)(fc->prng & 0x7fffffff) < fc->val;
        break;
    }
    if (on)
        fc->times_entered++;
    return on;
}

typedef enum { SITE_BEFORE, SITE_AFTER } fp_site;

/* Whether the data asks something of the site at all: mongod evaluates
 * these before the filter and counts only commands they let through. */
static bool site_wanted(const bson_t *data, fp_site site)
{
    if (site == SITE_AFTER)
        return data_has(data, "writeConcernError");
    bson_iter_t it;
    int64_t code;
    bool has_code = bson_iter_init_find(&it, data, "errorCode") &&
                    extract_integer(&it, "errorCode", &code, NULL) == 0;
    return data_flag(data, "closeConnection") || data_flag(data, "blockConnection") || has_code;
}

/* Enter the fail point at `site` if it fires for this command: returns
 * true with `*out` a copy of the data (the caller destroys it), which
 * stays valid whatever another thread configures meanwhile. */
static bool enter(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd, fp_site site,
                  bson_t *out)
{
    mfi_fail_command *fc = ctx->inst->fail_command;
    bool fired = false;
    pthread_mutex_lock(&fc->mu);
    if (fc->mode != FP_OFF) {
        bson_t data;
        if (fc->data)
            bson_init_static(&data, fc->data, fc->data_len);
        else
            bson_init(&data);
        if (site_wanted(&data, site) && should_activate(&data, ctx, def, cmd) &&
            mode_admits(fc)) {
            bson_init(out);
            bson_concat(out, &data);
            fired = true;
        }
    }
    pthread_mutex_unlock(&fc->mu);
    if (fired)
        mf_log(MF_LOG_INFO, "COMMAND", 4898500, ctx->client->remote,
               "Activating 'failCommand' failpoint for %s", def->name);
    return fired;
}

/* ------------------------------------------------------------ the effects */

void mfi_fail_effect_init(mfi_fail_effect *fx)
{
    bson_init(&fx->wce);
    bson_init(&fx->labels);
}

void mfi_fail_effect_destroy(mfi_fail_effect *fx)
{
    bson_destroy(&fx->wce);
    bson_destroy(&fx->labels);
}

/* The errorLabels override: data's array, if it is one and not empty. */
static void take_labels(const bson_t *data, mfi_fail_effect *fx)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, data, "errorLabels") || !BSON_ITER_HOLDS_ARRAY(&it))
        return;
    bson_t arr;
    uint32_t len;
    const uint8_t *p;
    bson_iter_array(&it, &len, &p);
    bson_reinit(&fx->labels);
    if (bson_init_static(&arr, p, len) && !bson_empty(&arr))
        BSON_APPEND_ARRAY(&fx->labels, "errorLabels", &arr);
}

static int before_effects(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *data,
                          mfi_fail_effect *fx, mf_error *err)
{
    bson_iter_t it;
    int64_t code = 0;
    take_labels(data, fx);

    if (data_flag(data, "blockConnection")) {
        int64_t ms = 0;
        if (!bson_iter_init_find(&it, data, "blockTimeMS") ||
            extract_integer(&it, "blockTimeMS", &ms, NULL) != 0)
            return mf_error_set(err, MF_InvalidOptions,
                                "must specify 'blockTimeMS' when 'blockConnection' is true");
        if (ms < 0)
            return mf_error_set(err, MF_InvalidOptions, "'blockTimeMS' must be non-negative");
        mf_log(MF_LOG_INFO, "COMMAND", 20432, ctx->client->remote,
               "Blocking command via 'failCommand' failpoint: %s for %lld ms", def->name,
               (long long)ms);
        /* Only this connection's thread waits; shutdown cuts it short. */
        if (mfi_instance_sleep(ctx->inst, ms))
            return mf_error_set(err, MF_InterruptedAtShutdown, "interrupted at shutdown");
        mf_log(MF_LOG_INFO, "COMMAND", 20433, ctx->client->remote,
               "Unblocking command via 'failCommand' failpoint: %s", def->name);
    }

    if (data_flag(data, "closeConnection")) {
        ctx->flags |= MF_RUN_CLOSE;
        mf_log(MF_LOG_INFO, "COMMAND", 20431, ctx->client->remote,
               "Failing %s via 'failCommand' failpoint: closing connection", def->name);
        return mf_error_set(err, 50985, FAIL_MSG);
    }

    if (bson_iter_init_find(&it, data, "errorCode") &&
        extract_integer(&it, "errorCode", &code, NULL) == 0) {
        /* ErrorCodes::Error(errorCode): an int; 0 is OK, which fails nothing. */
        int as_int = (int)(int32_t)(uint32_t)(uint64_t)code;
        if (as_int == 0)
            return 0;
        mf_log(MF_LOG_INFO, "COMMAND", 20435, ctx->client->remote,
               "Failing command %s via 'failCommand' failpoint: returning %d", def->name,
               as_int);
        return mf_error_set(err, as_int, FAIL_MSG);
    }
    return 0;
}

int mfi_fail_command_before(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                            mfi_fail_effect *fx, mf_error *err)
{
    bson_t data;
    if (!ctx->inst->fail_command || !enter(ctx, def, cmd, SITE_BEFORE, &data))
        return 0;
    int rc = before_effects(ctx, def, &data, fx, err);
    bson_destroy(&data);
    return rc;
}

void mfi_fail_command_after(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                            mfi_fail_effect *fx)
{
    bson_t data;
    bson_iter_t it;
    if (!ctx->inst->fail_command || !enter(ctx, def, cmd, SITE_AFTER, &data))
        return;
    if (bson_iter_init_find(&it, &data, "writeConcernError")) {
        bson_reinit(&fx->wce);
        mf_bsonx_append_iter(&fx->wce, "writeConcernError", -1, &it);
    }
    take_labels(&data, fx);
    bson_destroy(&data);
}
