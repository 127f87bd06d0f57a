/*
 * cmd_hello.c -- hello / isMaster / ismaster: the handshake every driver
 * sends first, and the awaitable form its monitors poll with.
 *
 * A standalone server's topology never changes, so topologyVersion is
 * {processId: <this process>, counter: 0} for its whole life.  An awaitable
 * hello (topologyVersion + maxAwaitTimeMS) that names the current version
 * waits maxAwaitTimeMS for a change that cannot come, then answers; one that
 * names another process's version is answered at once.  Shutdown ends the
 * wait early.  The wire layer streams the reply when the request allowed
 * exhaust (MF_RUN_EXHAUST).
 */
#include "command_int.h"

#include <string.h>

/* Parsed awaitable-hello arguments. */
typedef struct await_args {
    bool has_tv;
    bson_oid_t process_id;
    int64_t counter;
    bool has_max_await;
    int64_t max_await_ms;
} await_args;

static int parse_topology_version(const bson_iter_t *field, await_args *aw,
                                  mf_error *err)
{
    bson_iter_t it;
    bool has_pid = false, has_counter = false;

    if (!BSON_ITER_HOLDS_DOCUMENT(field))
        return mfi_type_error(err, "hello", "topologyVersion", field, "object");
    bson_iter_recurse(field, &it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "processId") == 0) {
            if (!BSON_ITER_HOLDS_OID(&it))
                return mfi_type_error(err, "hello.topologyVersion", "processId",
                                      &it, "objectId");
            bson_oid_copy(bson_iter_oid(&it), &aw->process_id);
            has_pid = true;
        } else if (strcmp(k, "counter") == 0) {
            if (!BSON_ITER_HOLDS_INT64(&it))
                return mfi_type_error(err, "hello.topologyVersion", "counter",
                                      &it, "long");
            aw->counter = bson_iter_int64(&it);
            has_counter = true;
        } else {
            return mf_error_set(err, 40415,
                                "BSON field 'hello.topologyVersion.%s' is an unknown field.",
                                k);
        }
    }
    if (!has_pid)
        return mf_error_set(err, 40414,
                            "BSON field 'hello.topologyVersion.processId' is missing but a required field");
    if (!has_counter)
        return mf_error_set(err, 40414,
                            "BSON field 'hello.topologyVersion.counter' is missing but a required field");
    aw->has_tv = true;
    return 0;
}

static int parse_args(mf_cmd_ctx *ctx, const bson_t *cmd, await_args *aw,
                      bool *hello_ok, mf_error *err)
{
    bson_iter_t it;
    int rc;

    bson_iter_init(&it, cmd);
    bson_iter_next(&it); /* the command name */
    while (bson_iter_next(&it)) {
        /* Unknown fields are ignored: hello is how a driver newer than
         * the server first meets it, and newer drivers send newer fields
         * (pymongo 4.1x sends `backpressure`). */
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "topologyVersion") == 0) {
            if ((rc = parse_topology_version(&it, aw, err)) != 0)
                return rc;
        } else if (strcmp(k, "maxAwaitTimeMS") == 0) {
            if (!mfi_is_number(&it))
                return mfi_type_error(err, "hello", k, &it, "long");
            if (!mfi_as_int64(&it, &aw->max_await_ms))
                return mf_error_set(err, MF_BadValue, "maxAwaitTimeMS must be an integer");
            if (aw->max_await_ms < 0)
                return mf_error_set(err, 51024,
                                    "BSON field 'maxAwaitTimeMS' value must be >= 0, actual value '%lld'",
                                    (long long)aw->max_await_ms);
            aw->has_max_await = true;
        } else if (strcmp(k, "helloOk") == 0) {
            *hello_ok = true; /* any value: mongod answers helloOk: true */
        } else if (strcmp(k, "client") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return mfi_type_error(err, "hello", k, &it, "object");
        } else if (strcmp(k, "compression") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return mfi_type_error(err, "hello", k, &it, "array");
        } else if (strcmp(k, "loadBalanced") == 0) {
            if (bson_iter_as_bool(&it))
                return mf_error_set(err, MF_BadValue,
                                    "The server is not configured for load balancing");
        }
    }
    if (aw->has_tv && aw->has_max_await) {
        if (aw->counter < 0)
            return mf_error_set(err, 31372, "topologyVersion must have a non-negative counter");
    } else if (aw->has_tv) {
        return mf_error_set(err, 31368,
                            "A request with a 'topologyVersion' must include 'maxAwaitTimeMS'");
    } else if (aw->has_max_await) {
        return mf_error_set(err, 31368,
                            "A request with 'maxAwaitTimeMS' must include a 'topologyVersion'");
    }
    if (ctx->client->exhaust_allowed && !aw->has_max_await)
        return mf_error_set(err, 51756,
                            "An isMaster or hello request with exhaust must specify 'maxAwaitTimeMS'");
    return 0;
}

int mfi_cmd_hello(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_instance *inst = ctx->inst;
    await_args aw = {0};
    bool hello_ok = false;
    int rc;

    /* Client metadata is fixed by the first hello on a connection, with or
     * without a `client` field; mongod checks this before parsing. */
    bson_iter_t cit;
    if (!ctx->client->is_internal && bson_iter_init_find(&cit, cmd, "client") &&
        ctx->client->has_hello)
        return mf_error_set(err, MF_ClientMetadataCannotBeMutated,
                            "The client metadata document may only be sent in the first hello");
    ctx->client->has_hello = true;

    if ((rc = parse_args(ctx, cmd, &aw, &hello_ok, err)) != 0)
        return rc;

    if (aw.has_tv) {
        if (bson_oid_equal(&aw.process_id, &inst->process_id)) {
            if (aw.counter != 0)
                return mf_error_set(err, 51764,
                                    "Received a topology version with counter: %lld which is greater than the server topology version counter: 0",
                                    (long long)aw.counter);
            /* Our topology never changes: sleep out maxAwaitTimeMS --
             * unless the client hangs up meanwhile (a driver closing its
             * monitor), which would otherwise hold the connection, and
             * a place under the connection limit, for the whole wait. */
            int64_t left = aw.max_await_ms;
            while (left > 0) {
                int64_t slice = left < 250 ? left : 250;
                if (mfi_instance_sleep(inst, slice))
                    return mf_error_set(err, MF_ShutdownInProgress,
                                        "The server is in quiesce mode and will shut down");
                left -= slice;
                if (ctx->client->peer_gone && ctx->client->peer_gone(ctx->client)) {
                    ctx->flags |= MF_RUN_CLOSE;
                    return mf_error_set(err, MF_ClientDisconnect,
                                        "operation was interrupted because a client "
                                        "disconnected");
                }
            }
        }
        ctx->flags |= MF_RUN_EXHAUST;
    }

    /* Field order as mongod 7.0 sends it: a standalone says it is
     * writable before its topologyVersion, a replica-set member after it,
     * among its set's fields. */
    bool hello = strcmp(ctx->name, "hello") == 0;
    if (hello_ok)
        BSON_APPEND_BOOL(reply, "helloOk", true);
    if (!inst->repl)
        BSON_APPEND_BOOL(reply, hello ? "isWritablePrimary" : "ismaster", true);
    bson_t tv;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "topologyVersion", &tv);
    BSON_APPEND_OID(&tv, "processId", &inst->process_id);
    BSON_APPEND_INT64(&tv, "counter", 0);
    bson_append_document_end(reply, &tv);
    if (inst->repl)
        mfi_repl_hello(inst, hello, reply);
    BSON_APPEND_INT32(reply, "maxBsonObjectSize", MF_MAX_BSON_OBJECT_SIZE);
    BSON_APPEND_INT32(reply, "maxMessageSizeBytes", MF_MAX_MESSAGE_SIZE);
    BSON_APPEND_INT32(reply, "maxWriteBatchSize", MF_MAX_WRITE_BATCH_SIZE);
    BSON_APPEND_DATE_TIME(reply, "localTime", mf_clock_wall_ms());
    BSON_APPEND_INT32(reply, "logicalSessionTimeoutMinutes", MF_SESSION_TIMEOUT_MINUTES);
    if (ctx->client->id <= INT32_MAX)
        BSON_APPEND_INT32(reply, "connectionId", (int32_t)ctx->client->id);
    else
        BSON_APPEND_INT64(reply, "connectionId", ctx->client->id);
    BSON_APPEND_INT32(reply, "minWireVersion", MF_MIN_WIRE_VERSION);
    BSON_APPEND_INT32(reply, "maxWireVersion", MF_MAX_WIRE_VERSION);
    /* True once the storage engine refuses writes (a failed sync). */
    BSON_APPEND_BOOL(reply, "readOnly", mf_engine_failure(ctx->inst->engine, NULL, 0));
    if (!ctx->client->is_internal)
        return mfi_auth_hello(ctx, cmd, reply, err);
    return 0;
}
