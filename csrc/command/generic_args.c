/*
 * generic_args.c -- the generic arguments every command may carry that the
 * dispatcher checks before the handler runs: the Stable API parameters
 * (apiVersion, apiStrict, apiDeprecationErrors) and the read concern a
 * standalone cannot satisfy.
 *
 * API versions.  mongod 7.0 knows version "1" (and "2" only for its test
 * commands when acceptApiVersion2 is set, which this server never sets).
 * Each command belongs to a set of versions (Command::apiVersions); with
 * apiStrict: true a command outside the requested version is refused, and
 * so is an aggregation stage outside it.  The V1 set below is mongod 7.0's:
 * the commands whose apiVersions() is kApiVersions1.  The checks run in
 * initializeAPIParameters' order:
 *
 *   1  types: apiVersion a string, the two flags booleans     TypeMismatch
 *   2  a flag without apiVersion                              4886600
 *   3  apiVersion other than "1"                              APIVersionError
 *   4  apiStrict: true, command not in the version            APIStrictError
 *   5  apiDeprecationErrors: true, command deprecated there    APIDeprecationError
 *
 * Read concern.  First what each command supports (mongod's
 * supportsReadConcern): find, aggregate and distinct every level, count
 * all but "snapshot", every other command "local" alone -- 72
 * InvalidOptions, "Command X does not support { readConcern: ... } ::
 * caused by :: read concern not supported" (a transaction's statements
 * are checked by txn.c instead).  Then what the node can do: a standalone
 * has no replication, and mongod's waitForReadConcern refuses levels
 * "snapshot" and "linearizable" and the cluster-time and opTime arguments
 * on it; a replica set of one does them all, "snapshot" outside a
 * transaction as a read at a cluster time (coll/txn.c's history window),
 * and refuses an atClusterTime past its clock.
 */
#include "command_int.h"

#include <stdio.h>
#include <string.h>

/* mongod 7.0's API Version 1 commands (those of them this server has),
 * sorted by strcmp. */
static const char *const api_v1[] = {
    "abortTransaction", "aggregate", "authenticate", "collMod", "commitTransaction",
    "count", "create", "createIndexes", "delete", "drop", "dropDatabase", "dropIndexes",
    "endSessions", "explain", "find", "findAndModify", "getMore", "hello", "insert",
    "killCursors", "listCollections", "listDatabases", "listIndexes", "ping",
    "refreshSessions", "saslContinue", "saslStart", "update",
};

/* mongod's test commands for API versions (test_api_version_2_commands.cpp,
 * test_deprecation_command.cpp), sorted by strcmp. */
static const struct {
    const char *name;
    unsigned versions, deprecated;
} api_test[] = {
    {"testDeprecation", 1u, 1u},
    {"testDeprecationInVersion2", 3u, 2u},
    {"testRemoval", 1u, 0u},
    {"testVersion2", 2u, 0u},
    {"testVersions1And2", 3u, 0u},
};

/* The name mongod reports for `def`: an alias reports its command's. */
static const char *canonical_name(const mf_cmd_def *def)
{
    while (def->flags & MF_CMD_ALIAS)
        def--; /* an alias follows the entry it names (dispatch.c's table) */
    return def->name;
}

unsigned mfi_api_versions(const mf_cmd_def *def, unsigned *deprecated)
{
    const char *name = canonical_name(def);
    *deprecated = 0;
    for (size_t i = 0; i < sizeof api_test / sizeof api_test[0]; i++) {
        if (strcmp(api_test[i].name, name) == 0) {
            *deprecated = api_test[i].deprecated;
            return api_test[i].versions;
        }
    }
    size_t lo = 0, hi = sizeof api_v1 / sizeof api_v1[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(api_v1[mid], name);
        if (c == 0)
            return 1u;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

static int bool_param(const bson_iter_t *it, bool *has, bool *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_BOOL(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field 'APIParametersFromClient.%s' is the wrong type '%s', "
                            "expected type 'bool'",
                            bson_iter_key(it), mf_bsonx_type_alias(bson_iter_type(it)));
    *has = true;
    *out = bson_iter_bool(it);
    return 0;
}

int mfi_api_params_check(const mf_cmd_def *def, const bson_t *cmd, mfi_api_params *out,
                         mf_error *err)
{
    bson_iter_t it;
    bool has_version = false;
    int rc;
    memset(out, 0, sizeof *out);
    bson_iter_init(&it, cmd);
    bson_iter_next(&it); /* the command name */
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "apiVersion") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field 'APIParametersFromClient.apiVersion' is the "
                                    "wrong type '%s', expected type 'string'",
                                    mf_bsonx_type_alias(bson_iter_type(&it)));
            uint32_t len;
            const char *v = bson_iter_utf8(&it, &len);
            /* Any other value is refused below; keep what fits for it. */
            snprintf(out->version, sizeof out->version, "%s", v);
            if (len >= sizeof out->version || strlen(v) != len)
                snprintf(out->version, sizeof out->version, "?");
            has_version = true;
        } else if (strcmp(k, "apiStrict") == 0) {
            if ((rc = bool_param(&it, &out->has_strict, &out->strict, err)) != 0)
                return rc;
        } else if (strcmp(k, "apiDeprecationErrors") == 0) {
            if ((rc = bool_param(&it, &out->has_deprecation_errors, &out->deprecation_errors,
                                 err)) != 0)
                return rc;
        }
    }
    if ((out->has_strict || out->has_deprecation_errors) && !has_version)
        return mf_error_set(err, 4886600,
                            "Provided apiStrict and/or apiDeprecationErrors without passing "
                            "apiVersion");
    if (has_version && strcmp(out->version, "1") != 0) {
        if (strcmp(out->version, "2") == 0)
            return mf_error_set(err, MF_APIVersionError, "Cannot accept API version 2");
        return mf_error_set(err, MF_APIVersionError, "API version must be \"1\"");
    }
    unsigned deprecated, versions = mfi_api_versions(def, &deprecated);
    if (out->strict && !(versions & 1u))
        return mf_error_set(err, MF_APIStrictError,
                            "Provided apiStrict:true, but the command %s is not in API Version "
                            "%s. Information on supported commands and migrations in API "
                            "Version %s can be found at "
                            "https://dochub.mongodb.org/core/manual-versioned-api.",
                            canonical_name(def), out->version, out->version);
    if (out->deprecation_errors && (deprecated & 1u))
        return mf_error_set(err, MF_APIDeprecationError,
                            "Provided apiDeprecationErrors:true, but the command %s is "
                            "deprecated in API Version %s.",
                            canonical_name(def), out->version);
    return 0;
}

/* ------------------------------------------------------------ pipelines */

/* Stages registered with AllowedWithApiStrict::kNeverInVersion1 in mongod
 * 7.0. */
static const char *const stages_not_v1[] = {
    "$changeStreamSplitLargeEvent", "$currentOp", "$indexStats", "$listCatalog",
    "$listLocalSessions", "$listSampledQueries", "$listSearchIndexes", "$listSessions",
    "$planCacheStats", "$queryStats", "$search", "$searchMeta", "$shardedDataDistribution",
};

static int check_stages(const bson_t *pipeline, int depth, mf_error *err);

/* The pipeline held by `it` (an array), if it is one. */
static int check_sub(const bson_iter_t *it, int depth, mf_error *err)
{
    bson_t sub;
    uint32_t len;
    const uint8_t *data;
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return 0; /* the stage's own parser refuses it */
    bson_iter_array(it, &len, &data);
    if (!bson_init_static(&sub, data, len))
        return 0;
    return check_stages(&sub, depth + 1, err);
}

static int check_stages(const bson_t *pipeline, int depth, mf_error *err)
{
    bson_iter_t st, spec, f;
    int rc;
    if (depth > 20 || !bson_iter_init(&st, pipeline))
        return 0; /* too deep for the pipeline parser anyway */
    while (bson_iter_next(&st)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&st) || !bson_iter_recurse(&st, &spec) ||
            !bson_iter_next(&spec))
            continue;
        const char *name = bson_iter_key(&spec);
        for (size_t i = 0; i < sizeof stages_not_v1 / sizeof stages_not_v1[0]; i++)
            if (strcmp(name, stages_not_v1[i]) == 0)
                return mf_error_set(err, MF_APIStrictError,
                                    "%s is not allowed with 'apiStrict: true' in API Version 1",
                                    name);
        if (!BSON_ITER_HOLDS_DOCUMENT(&spec) || !bson_iter_recurse(&spec, &f))
            continue;
        /* $collStats is kConditionally allowed: its count alone */
        if (strcmp(name, "$collStats") == 0) {
            while (bson_iter_next(&f))
                if (strcmp(bson_iter_key(&f), "latencyStats") == 0 ||
                    strcmp(bson_iter_key(&f), "queryExecStats") == 0 ||
                    strcmp(bson_iter_key(&f), "storageStats") == 0)
                    return mf_error_set(err, MF_APIStrictError,
                                        "only the 'count' option to $collStats is supported in "
                                        "API Version 1");
            continue;
        }
        bool facet = strcmp(name, "$facet") == 0;
        if (!facet && strcmp(name, "$lookup") != 0 && strcmp(name, "$unionWith") != 0)
            continue;
        while (bson_iter_next(&f))
            if ((facet || strcmp(bson_iter_key(&f), "pipeline") == 0) &&
                (rc = check_sub(&f, depth, err)) != 0)
                return rc;
    }
    return 0;
}

int mfi_api_check_pipeline(const mfi_api_params *api, const bson_t *pipeline, mf_error *err)
{
    if (!api->strict)
        return 0;
    return check_stages(pipeline, 0, err);
}

/* ---------------------------------------------------------- read concern */

/* The commands that take a read concern (Command::supportsReadConcern
 * beyond "local"). */
static bool reads_with_concern(const char *name)
{
    return strcmp(name, "find") == 0 || strcmp(name, "aggregate") == 0 ||
           strcmp(name, "count") == 0 || strcmp(name, "distinct") == 0;
}

/* The commands that read at a snapshot outside transactions. */
static bool reads_at_snapshot(const char *name)
{
    return strcmp(name, "find") == 0 || strcmp(name, "aggregate") == 0 ||
           strcmp(name, "distinct") == 0;
}

/* bsonExtractTypedField's error for a field of the wrong type. */
static int rc_type(const bson_iter_t *f, const char *want, mf_error *err)
{
    return mf_error_set(err, MF_TypeMismatch, "\"%s\" had the wrong type. Expected %s, found %s",
                        bson_iter_key(f), want, mf_bsonx_type_alias(bson_iter_type(f)));
}

/* afterOpTime: {ts: <timestamp>, t: <number>}, as bsonExtractOpTimeField. */
static int rc_optime(const bson_iter_t *f, mf_error *err)
{
    bson_iter_t o;
    if (!BSON_ITER_HOLDS_DOCUMENT(f))
        return rc_type(f, "object", err);
    bson_iter_recurse(f, &o);
    if (!bson_iter_find(&o, "ts"))
        return mf_error_set(err, MF_NoSuchKey, "Missing expected field \"ts\"");
    if (!BSON_ITER_HOLDS_TIMESTAMP(&o))
        return rc_type(&o, "timestamp", err);
    bson_iter_recurse(f, &o);
    if (!bson_iter_find(&o, "t"))
        return mf_error_set(err, MF_NoSuchKey, "Missing expected field \"t\"");
    if (!mfi_is_number(&o))
        return mf_error_set(err, MF_TypeMismatch,
                            "Expected field \"t\" to have numeric type, but found %s",
                            mf_bsonx_type_alias(bson_iter_type(&o)));
    return 0;
}

/* The index of `v` in `list` (of `n`), or -1. */
static int str_index(const char *const *list, size_t n, const char *v)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], v) == 0)
            return (int)i;
    return -1;
}

typedef struct read_concern {
    const char *level; /* "" when not given */
    bool has_after_optime, has_after_ct, has_at_ct;
    uint32_t at_ct_seconds, at_ct_inc, after_ct_seconds, after_ct_inc;
} read_concern;

/* ReadConcernArgs::parse: the fields and their types, then the
 * combinations.  Every command's readConcern goes through it. */
static int read_concern_parse(const bson_iter_t *it, read_concern *rc_out, mf_error *err)
{
    static const char *const levels[] = {"local", "majority", "linearizable", "available",
                                         "snapshot"};
    static const char *const provenances[] = {"clientSupplied", "implicitDefault",
                                              "customDefault", "getLastErrorDefaults",
                                              "internalWriteDefault"};
    bson_iter_t f;
    int rc;
    memset(rc_out, 0, sizeof *rc_out);
    rc_out->level = "";
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_FailedToParse, "readConcern field should be an object");
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "afterOpTime") == 0) {
            if ((rc = rc_optime(&f, err)) != 0)
                return rc;
            rc_out->has_after_optime = true;
        } else if (strcmp(k, "afterClusterTime") == 0 || strcmp(k, "atClusterTime") == 0) {
            if (!BSON_ITER_HOLDS_TIMESTAMP(&f))
                return rc_type(&f, "timestamp", err);
            bool after = k[1] == 'f';
            bson_iter_timestamp(&f, after ? &rc_out->after_ct_seconds : &rc_out->at_ct_seconds,
                                after ? &rc_out->after_ct_inc : &rc_out->at_ct_inc);
            *(after ? &rc_out->has_after_ct : &rc_out->has_at_ct) = true;
        } else if (strcmp(k, "level") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&f))
                return rc_type(&f, "string", err);
            int i = str_index(levels, 5, bson_iter_utf8(&f, NULL));
            if (i < 0)
                return mf_error_set(err, MF_FailedToParse,
                                    "readConcern.level must be either 'local', 'majority', "
                                    "'linearizable', 'available', or 'snapshot'");
            rc_out->level = levels[i];
        } else if (strcmp(k, "allowTransactionTableSnapshot") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&f))
                return rc_type(&f, "bool", err);
        } else if (strcmp(k, "provenance") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&f))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field 'ReadConcernArgs::parse.provenance' is the wrong "
                                    "type '%s', expected type 'string'",
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            const char *v = bson_iter_utf8(&f, NULL);
            if (str_index(provenances, 5, v) < 0)
                return mf_error_set(err, MF_BadValue,
                                    "Enumeration value '%s' for field "
                                    "'ReadConcernArgs::parse.provenance' is not a valid value.",
                                    v);
        } else {
            return mf_error_set(err, MF_InvalidOptions, "Unrecognized option in readConcern: %s",
                                k);
        }
    }
    const char *level = rc_out->level;
    bool local_like = level[0] == 0 || strcmp(level, "local") == 0;
    if (rc_out->has_after_ct && rc_out->has_after_optime)
        return mf_error_set(err, MF_InvalidOptions,
                            "Can not specify both afterClusterTime and afterOpTime");
    if (rc_out->has_after_ct && rc_out->has_at_ct)
        return mf_error_set(err, MF_InvalidOptions,
                            "Specifying a timestamp for readConcern snapshot in a causally "
                            "consistent session is not allowed. See "
                            "https://docs.mongodb.com/manual/core/read-isolation-consistency-"
                            "recency/#causal-consistency");
    if (rc_out->has_after_ct && !local_like && strcmp(level, "majority") != 0 &&
        strcmp(level, "snapshot") != 0)
        return mf_error_set(err, MF_InvalidOptions,
                            "afterClusterTime field can be set only if level is equal to "
                            "majority, local, or snapshot");
    if (rc_out->has_after_optime && strcmp(level, "snapshot") == 0)
        return mf_error_set(err, MF_InvalidOptions,
                            "afterOpTime field cannot be set if level is equal to snapshot");
    if (rc_out->has_at_ct && strcmp(level, "snapshot") != 0)
        return mf_error_set(err, MF_InvalidOptions,
                            "atClusterTime field can be set only if level is equal to snapshot");
    if (rc_out->has_at_ct && rc_out->at_ct_seconds == 0)
        return mf_error_set(err, MF_InvalidOptions, "atClusterTime cannot be a null timestamp");
    if (rc_out->has_after_ct && rc_out->after_ct_seconds == 0 && rc_out->after_ct_inc == 0)
        return mf_error_set(err, MF_InvalidOptions,
                            "afterClusterTime cannot be a null timestamp");
    return 0;
}

/* ReadConcernArgs::toString, as mongod's refusals quote it. */
static void read_concern_text(const read_concern *r, char *out, size_t cap)
{
    int n = snprintf(out, cap, "{ readConcern: { level: \"%s\"", r->level);
    if (n > 0 && (size_t)n < cap && r->has_after_ct)
        n += snprintf(out + n, cap - (size_t)n, ", afterClusterTime: Timestamp(%u, %u)",
                      r->after_ct_seconds, r->after_ct_inc);
    if (n > 0 && (size_t)n < cap && r->has_at_ct)
        n += snprintf(out + n, cap - (size_t)n, ", atClusterTime: Timestamp(%u, %u)",
                      r->at_ct_seconds, r->at_ct_inc);
    if (n > 0 && (size_t)n < cap)
        snprintf(out + n, cap - (size_t)n, ", provenance: \"clientSupplied\" } }");
}

static int not_supported(const char *name, const read_concern *r, const char *why,
                         mf_error *err)
{
    char text[200];
    read_concern_text(r, text, sizeof text);
    return mf_error_set(err, MF_InvalidOptions, "Command %s does not support %s :: caused by :: %s",
                        name, text, why);
}

int mfi_read_concern_refuse(const char *name, const bson_t *cmd, const char *why, mf_error *err)
{
    bson_iter_t it;
    read_concern r = {.level = ""};
    if (bson_iter_init_find(&it, cmd, "readConcern") && read_concern_parse(&it, &r, err) != 0)
        r = (read_concern){.level = ""}; /* (the dispatcher parsed it already) */
    return not_supported(name, &r, why, err);
}

const char *mfi_read_concern_level(const bson_t *cmd)
{
    bson_iter_t it;
    read_concern r;
    mf_error err;
    if (!bson_iter_init_find(&it, cmd, "readConcern") || read_concern_parse(&it, &r, &err) != 0)
        return "";
    return r.level;
}

int mfi_read_concern_check(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                           mf_error *err)
{
    bson_iter_t it;
    read_concern r;
    if (!bson_iter_init_find(&it, cmd, "readConcern"))
        return 0;
    int rc = read_concern_parse(&it, &r, err);
    const char *name = canonical_name(def);
    if (rc || ctx->txn)
        return rc;
    bool local = r.level[0] == 0 || strcmp(r.level, "local") == 0;
    bool snapshot = strcmp(r.level, "snapshot") == 0;
    if (!reads_with_concern(name) && !local)
        return not_supported(name, &r, "read concern not supported", err);
    if (strcmp(name, "count") == 0 && snapshot)
        return not_supported(name, &r, "read concern snapshot not supported", err);
    if (!reads_with_concern(name))
        return 0;
    if (ctx->inst->repl) {
        /* A set of one: every write acknowledged is applied, so a read
         * after any cluster time, or linearizable, reads the newest data;
         * a transaction reads from its snapshot (txn.c); a snapshot read
         * outside one reads at its cluster time (the dispatcher). */
        mf_cl_optime now;
        mf_cl_oplog_last(ctx->inst->cl.oplog, &now, NULL);
        uint64_t now_ts = (uint64_t)now.secs << 32 | now.inc;
        uint64_t at = (uint64_t)r.at_ct_seconds << 32 | r.at_ct_inc;
        if (r.has_at_ct && at > now_ts)
            return mf_error_set(err, MF_InvalidOptions,
                                "readConcern atClusterTime value must not be greater than the "
                                "current clusterTime. Requested clusterTime: { ts: Timestamp(%u, "
                                "%u) }; current clusterTime: { ts: Timestamp(%u, %u) }",
                                r.at_ct_seconds, r.at_ct_inc, now.secs, now.inc);
        if (snapshot && reads_at_snapshot(name)) {
            ctx->snap_read = true;
            ctx->snap_at = r.has_at_ct ? at : now_ts;
        }
        return 0;
    }
    /* waitForReadConcernImpl's order: the level first, then the times. */
    if (strcmp(r.level, "linearizable") == 0)
        return mf_error_set(err, MF_NotAReplicaSet, "node needs to be a replica set member to use read concern");
    if (strcmp(r.level, "snapshot") == 0)
        return mf_error_set(err, MF_NotAReplicaSet,
                            "node needs to be a replica set member to use readConcern: snapshot");
    if (r.has_after_ct || r.has_at_ct)
        return mf_error_set(err, MF_IllegalOperation,
                            "Cannot specify %s readConcern without replication enabled",
                            r.has_after_ct ? "afterClusterTime" : "atClusterTime");
    if (r.has_after_optime)
        return mf_error_set(err, MF_NotAReplicaSet, "node needs to be a replica set member to use read concern");
    return 0;
}

/* ------------------------------------------------------------ test commands */

int mfi_cmd_test_api_version(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)cmd, (void)err;
    /* APIParameters::appendInfo: the parameters that were given. */
    if (ctx->api.version[0])
        BSON_APPEND_UTF8(reply, "apiVersion", ctx->api.version);
    if (ctx->api.has_strict)
        BSON_APPEND_BOOL(reply, "apiStrict", ctx->api.strict);
    if (ctx->api.has_deprecation_errors)
        BSON_APPEND_BOOL(reply, "apiDeprecationErrors", ctx->api.deprecation_errors);
    return 0;
}
