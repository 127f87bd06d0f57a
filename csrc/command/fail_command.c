/*
 * fail_command.c -- mongod's "failCommand" fail point: make chosen commands
 * fail, hang up or wait, so drivers' tests can see server errors at will;
 * and "failGetMoreAfterCursorCheckout", which filters as it does.  Their
 * modes and counting are every fail point's (failpoint.c).
 *
 *   {configureFailPoint: "failCommand",
 *    mode: "alwaysOn" | "off" | {times: n} | {skip: n} | {activationProbability: p},
 *    data: {failCommands: ["insert", ...], errorCode: 8, closeConnection: true,
 *           blockConnection: true, blockTimeMS: 100, appName: "app",
 *           errorLabels: [...], writeConcernError: {...},
 *           failInternalCommands, failLocalClients, failAllCommands,
 *           threadName: "conn7", namespace: "db.coll"}}
 *
 * The semantics are mongod 7.0's (db/commands.cpp,
 * service_entry_point_common.cpp, commands/getmore_cmd.cpp).
 *
 * The filter (shouldActivateFailCommandFailPoint): never configureFailPoint
 * itself; never the in-process caller (it has no connection: mongod's local
 * clients) unless failLocalClients; threadName ("conn<id>"), appName (from
 * the connection's first hello) and namespace must match when given;
 * internal clients (hello said internalClient, or in-process) only with
 * failInternalCommands; then failAllCommands, or the command's name or an
 * alias of it in failCommands.  A command the filter refuses does not
 * enter the fail point: it uses up no time and is not counted.
 *
 * Two places enter failCommand:
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
 *
 * failGetMoreAfterCursorCheckout is entered by a getMore once it holds its
 * cursor, through the same filter with failCommands ["getMore"] whatever
 * the data says (the namespace is the cursor's): the getMore fails with
 * data.errorCode as a long (safeNumberLong), else InternalError, "Hit the
 * 'failGetMoreAfterCursorCheckout' failpoint"; and getMore kills the
 * cursor, as after any error once it held it.
 */
#include "command_int.h"

#include <stdlib.h>
#include <string.h>

#define FAIL_MSG "Failing command via 'failCommand' failpoint"

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

/* shouldActivateFailCommandFailPoint.  `named`: the command counts as
 * named in failCommands whatever the data says (failGetMoreAfterCursorCheckout
 * puts ["getMore"] there). */
static bool should_activate(const bson_t *data, const mf_cmd_ctx *ctx, const mf_cmd_def *def,
                            const bson_t *cmd, bool named)
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
    if (named || data_has(data, "failAllCommands"))
        return true;
    if (!bson_iter_init_find(&it, data, "failCommands") ||
        !(BSON_ITER_HOLDS_ARRAY(&it) || BSON_ITER_HOLDS_DOCUMENT(&it)))
        return false;
    bson_iter_t e;
    bson_iter_recurse(&it, &e);
    while (bson_iter_next(&e)) {
        if (!BSON_ITER_HOLDS_UTF8(&e))
            continue;
        const mf_cmd_def *found = mfi_command_find(bson_iter_utf8(&e, NULL));
        if (found && primary_def(found) == self)
            return true;
    }
    return false;
}

typedef enum { SITE_BEFORE, SITE_AFTER, SITE_GET_MORE } fp_site;

/* Whether the data asks something of the site at all: mongod evaluates
 * these before the filter and counts only commands they let through. */
static bool site_wanted(const bson_t *data, fp_site site)
{
    if (site == SITE_GET_MORE)
        return true;
    if (site == SITE_AFTER)
        return data_has(data, "writeConcernError");
    bson_iter_t it;
    int64_t code;
    bool has_code = bson_iter_init_find(&it, data, "errorCode") &&
                    mfi_bson_extract_integer(&it, "errorCode", &code, NULL) == 0;
    return data_flag(data, "closeConnection") || data_flag(data, "blockConnection") || has_code;
}

/* The filter a site passes to mfi_fail_point_fires. */
typedef struct site_filter {
    const mf_cmd_ctx *ctx;
    const mf_cmd_def *def;
    const bson_t *cmd;
    fp_site site;
} site_filter;

static bool site_accepts(const bson_t *data, void *arg)
{
    const site_filter *f = arg;
    return site_wanted(data, f->site) &&
           should_activate(data, f->ctx, f->def, f->cmd, f->site == SITE_GET_MORE);
}

/* Enter failCommand at `site` if it fires for this command: returns true
 * with `*out` a copy of the data (the caller destroys it). */
static bool enter(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd, fp_site site,
                  bson_t *out)
{
    site_filter f = {ctx, def, cmd, site};
    if (!mfi_fail_point_fires(ctx->inst, MFI_FP_FAIL_COMMAND, MFI_FP_FIRST, site_accepts, &f,
                              out))
        return false;
    mf_log(MF_LOG_INFO, "COMMAND", 4898500, ctx->client->remote,
           "Activating 'failCommand' failpoint for %s", def->name);
    return true;
}

/* ------------------------------------------------------------ the effects */

void mfi_fail_effect_init(mfi_fail_effect *fx)
{
    bson_init(&fx->wce);
    bson_init(&fx->labels);
    fx->labels_given = false;
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
    fx->labels_given = true;
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
            mfi_bson_extract_integer(&it, "blockTimeMS", &ms, NULL) != 0)
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
        mfi_bson_extract_integer(&it, "errorCode", &code, NULL) == 0) {
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
    if (!enter(ctx, def, cmd, SITE_BEFORE, &data))
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
    if (!enter(ctx, def, cmd, SITE_AFTER, &data))
        return;
    if (bson_iter_init_find(&it, &data, "writeConcernError")) {
        bson_reinit(&fx->wce);
        mf_bsonx_append_iter(&fx->wce, "writeConcernError", -1, &it);
    }
    take_labels(&data, fx);
    bson_destroy(&data);
}

/* ------------------------------------------- failGetMoreAfterCursorCheckout */

int mfi_fail_get_more(mf_cmd_ctx *ctx, const bson_t *cmd, mf_error *err)
{
    const mf_cmd_def *def = mfi_command_find("getMore");
    site_filter f = {ctx, def, cmd, SITE_GET_MORE};
    bson_t data;
    bson_iter_t it;
    if (!mfi_fail_point_fires(ctx->inst, MFI_FP_FAIL_GET_MORE, MFI_FP_FIRST, site_accepts, &f,
                              &data))
        return 0;
    int code = MF_InternalError;
    if (bson_iter_init_find(&it, &data, "errorCode")) {
        /* uasserted(safeNumberLong(), ...): the long narrowed to an
         * ErrorCodes::Error, an int.  0 is mongod's OK, no error to throw:
         * here it stays InternalError (docs/failpoints.md). */
        int as_int = (int)(int32_t)(uint32_t)(uint64_t)mfi_safe_number_long(&it);
        if (as_int != 0)
            code = as_int;
    }
    bson_destroy(&data);
    return mf_error_set(err, code, "Hit the 'failGetMoreAfterCursorCheckout' failpoint");
}
