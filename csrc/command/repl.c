/*
 * repl.c -- the one-member replica set: this server as the primary of a
 * set of one (issue 47, docs/transactions.md).
 *
 * A server started with a set name (serve --replSet NAME, Server(...,
 * replica_set=NAME)) is that set's primary from its first command: no
 * election, no replSetInitiate needed.  Its term is 1, its electionId the
 * one mongod's first election gives (7fffffff0000000000000001), and the
 * set's only host is the address the server listens on (set by the wire
 * layer once it listens, mfi_repl_set_me).
 *
 * The cluster clock is the oplog's (coll/oplog.c): every write gets the
 * optime {ts, t: 1} of its oplog entry.  Replies carry $clusterTime (the
 * newest ts, signed with a zero key: there is no authentication) and
 * operationTime (the ts of the command's last write, or for a read the
 * newest entry's), as a replica-set member's do.  With one member every
 * write is majority-committed as soon as it is durable, so lastWrite's
 * majority fields equal its own.
 */
#include "command_int.h"

#include <stdlib.h>
#include <string.h>

struct mfi_repl {
    char set_name[128];
    bson_oid_t election_id;
    bson_oid_t replica_set_id; /* settings.replicaSetId */
    int64_t config_date_ms;    /* when this start made the config */

    pthread_mutex_t mu; /* guards `me` */
    char me[512];       /* the hosts entry: "host:port" or a socket path */
};

/* oplogSize's default for a server this size: mongod takes 5% of the disk
 * between 990 MB and 50 GB; a server for one application's data starts at
 * the floor. */
#define OPLOG_BYTES (990LL * 1024 * 1024)

#define TERM 1

int mfi_repl_open(mf_instance *inst, const char *set_name, mf_error *err)
{
    if (!set_name || !*set_name)
        return 0;
    if (strlen(set_name) >= sizeof inst->repl->set_name || strchr(set_name, '/'))
        return mf_error_set(err, MF_BadValue, "invalid replica set name '%s'", set_name);
    mfi_repl *r = calloc(1, sizeof *r);
    if (!r)
        return mf_error_oom(err);
    strcpy(r->set_name, set_name);
    /* An electionId is the max int32 followed by the term (64 bits). */
    uint8_t eid[12] = {0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, TERM};
    bson_oid_init_from_data(&r->election_id, eid);
    bson_oid_init(&r->replica_set_id, NULL);
    r->config_date_ms = mf_clock_wall_ms();
    pthread_mutex_init(&r->mu, NULL);
    snprintf(r->me, sizeof r->me, "%s", inst->host);
    int rc = mf_cl_oplog_open(inst->engine, OPLOG_BYTES, &inst->cl.oplog, err);
    if (rc == 0 && (rc = mf_cl_txns_open(&inst->cl.txns, err)) != 0) {
        mf_cl_oplog_close(inst->cl.oplog);
        inst->cl.oplog = NULL;
    }
    if (rc == 0) {
        /* the history reads at a cluster time need starts now: none is
         * kept of the writes before this start */
        mf_cl_optime last;
        mf_cl_oplog_last(inst->cl.oplog, &last, NULL);
        mf_cl_txns_set_history(inst->cl.txns, atomic_load(&inst->snap_window_s),
                               (size_t)atomic_load(&inst->snap_budget),
                               (uint64_t)last.secs << 32 | last.inc);
    }
    if (rc != 0) {
        pthread_mutex_destroy(&r->mu);
        free(r);
        return rc;
    }
    inst->repl = r;
    return 0;
}

void mfi_repl_close(mf_instance *inst)
{
    if (!inst->repl)
        return;
    mf_cl_txns_close(inst->cl.txns);
    inst->cl.txns = NULL;
    mf_cl_oplog_close(inst->cl.oplog);
    inst->cl.oplog = NULL;
    pthread_mutex_destroy(&inst->repl->mu);
    free(inst->repl);
    inst->repl = NULL;
}

void mfi_repl_set_me(mf_instance *inst, const char *host)
{
    mfi_repl *r = inst->repl;
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    snprintf(r->me, sizeof r->me, "%s", host);
    pthread_mutex_unlock(&r->mu);
}

static void append_optime(bson_t *doc, const char *key, const mf_cl_optime *t)
{
    bson_t d;
    BSON_APPEND_DOCUMENT_BEGIN(doc, key, &d);
    BSON_APPEND_TIMESTAMP(&d, "ts", t->secs, t->inc);
    BSON_APPEND_INT64(&d, "t", TERM);
    bson_append_document_end(doc, &d);
}

void mfi_repl_decorate(mf_instance *inst, const mf_cl_optime *op_time, bson_t *reply)
{
    mf_cl_optime now;
    bson_t ct, sig;
    static const uint8_t zero[20];

    mf_cl_oplog_last(inst->cl.oplog, &now, NULL);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "$clusterTime", &ct);
    BSON_APPEND_TIMESTAMP(&ct, "clusterTime", now.secs, now.inc);
    BSON_APPEND_DOCUMENT_BEGIN(&ct, "signature", &sig);
    BSON_APPEND_BINARY(&sig, "hash", BSON_SUBTYPE_BINARY, zero, sizeof zero);
    BSON_APPEND_INT64(&sig, "keyId", 0);
    bson_append_document_end(&ct, &sig);
    bson_append_document_end(reply, &ct);
    if (op_time->secs)
        BSON_APPEND_TIMESTAMP(reply, "operationTime", op_time->secs, op_time->inc);
    else
        BSON_APPEND_TIMESTAMP(reply, "operationTime", now.secs, now.inc);
}

void mfi_write_reply_base(mf_cmd_ctx *ctx, bson_t *reply, uint32_t nerr, const bson_t *werrs)
{
    mf_instance *inst = ctx->inst;
    if (inst->repl) {
        mf_cl_optime t = ctx->log.op_time;
        bson_t ot;
        if (!t.secs) /* mongod's LastOpFixer: the newest, when it wrote nothing */
            mf_cl_oplog_last(inst->cl.oplog, &t, NULL);
        BSON_APPEND_OID(reply, "electionId", &inst->repl->election_id);
        BSON_APPEND_DOCUMENT_BEGIN(reply, "opTime", &ot);
        BSON_APPEND_TIMESTAMP(&ot, "ts", t.secs, t.inc);
        BSON_APPEND_INT64(&ot, "t", TERM);
        bson_append_document_end(reply, &ot);
    }
    if (nerr)
        BSON_APPEND_ARRAY(reply, "writeErrors", werrs);
    if (ctx->retry && ctx->retry->nretried) {
        bson_t a;
        BSON_APPEND_ARRAY_BEGIN(reply, "retriedStmtIds", &a);
        for (size_t i = 0; i < ctx->retry->nretried; i++) {
            char key[16];
            const char *k;
            size_t kl = bson_uint32_to_string((uint32_t)i, &k, key, sizeof key);
            bson_append_int32(&a, k, (int)kl, ctx->retry->retried[i]);
        }
        bson_append_array_end(reply, &a);
    }
}

/* ------------------------------------------------------ write concern */

void mfi_repl_write_concern(const bson_t *cmd, bson_t *wce)
{
    bson_iter_t it, f, w;
    bool has_w = false;
    int code;
    char msg[256], scratch[32];

    if (!bson_iter_init_find(&it, cmd, "writeConcern") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return;
    bson_iter_recurse(&it, &f);
    if (bson_iter_find(&f, "w")) {
        w = f;
        has_w = true;
    }
    if (!has_w)
        return;
    if (BSON_ITER_HOLDS_UTF8(&w)) {
        const char *mode = bson_iter_utf8(&w, NULL);
        if (strcmp(mode, "majority") == 0)
            return;
        code = MF_UnknownReplWriteConcern;
        snprintf(msg, sizeof msg,
                 "No write concern mode named '%s' found in replica set configuration", mode);
    } else if (mfi_is_number(&w) && bson_iter_as_double(&w) > 1) {
        code = MF_UnsatisfiableWriteConcern;
        snprintf(msg, sizeof msg, "Not enough data-bearing nodes");
    } else {
        return;
    }
    /* errInfo echoes the write concern as mongod resolved it. */
    bson_t e, info, wc;
    int64_t wtimeout = 0;
    bson_iter_recurse(&it, &f);
    if (bson_iter_find(&f, "wtimeout") && mfi_is_number(&f))
        wtimeout = bson_iter_as_int64(&f);
    BSON_APPEND_DOCUMENT_BEGIN(wce, "writeConcernError", &e);
    BSON_APPEND_INT32(&e, "code", code);
    BSON_APPEND_UTF8(&e, "codeName", mf_error_name(code, scratch));
    BSON_APPEND_UTF8(&e, "errmsg", msg);
    BSON_APPEND_DOCUMENT_BEGIN(&e, "errInfo", &info);
    BSON_APPEND_DOCUMENT_BEGIN(&info, "writeConcern", &wc);
    mf_bsonx_append_iter(&wc, "w", -1, &w);
    BSON_APPEND_INT32(&wc, "wtimeout", (int32_t)wtimeout);
    BSON_APPEND_UTF8(&wc, "provenance", "clientSupplied");
    bson_append_document_end(&info, &wc);
    bson_append_document_end(&e, &info);
    bson_append_document_end(wce, &e);
}

/* ------------------------------------------------------------ hello */

void mfi_repl_hello(mf_instance *inst, bool hello, bson_t *reply)
{
    mfi_repl *r = inst->repl;
    bson_t a, lw;
    char me[512];
    mf_cl_optime last;
    int64_t last_ms;

    pthread_mutex_lock(&r->mu);
    snprintf(me, sizeof me, "%s", r->me);
    pthread_mutex_unlock(&r->mu);
    mf_cl_oplog_last(inst->cl.oplog, &last, &last_ms);

    BSON_APPEND_ARRAY_BEGIN(reply, "hosts", &a);
    BSON_APPEND_UTF8(&a, "0", me);
    bson_append_array_end(reply, &a);
    BSON_APPEND_UTF8(reply, "setName", r->set_name);
    BSON_APPEND_INT32(reply, "setVersion", 1);
    BSON_APPEND_BOOL(reply, hello ? "isWritablePrimary" : "ismaster", true);
    BSON_APPEND_BOOL(reply, "secondary", false);
    BSON_APPEND_UTF8(reply, "primary", me);
    BSON_APPEND_UTF8(reply, "me", me);
    BSON_APPEND_OID(reply, "electionId", &r->election_id);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "lastWrite", &lw);
    append_optime(&lw, "opTime", &last);
    BSON_APPEND_DATE_TIME(&lw, "lastWriteDate", last_ms / 1000 * 1000);
    append_optime(&lw, "majorityOpTime", &last);
    BSON_APPEND_DATE_TIME(&lw, "majorityWriteDate", last_ms / 1000 * 1000);
    bson_append_document_end(reply, &lw);
}

/* ------------------------------------------------------------ commands */

static void append_member_config(mfi_repl *r, const char *me, bson_t *members)
{
    bson_t m, tags;
    BSON_APPEND_DOCUMENT_BEGIN(members, "0", &m);
    BSON_APPEND_INT32(&m, "_id", 0);
    BSON_APPEND_UTF8(&m, "host", me);
    BSON_APPEND_BOOL(&m, "arbiterOnly", false);
    BSON_APPEND_BOOL(&m, "buildIndexes", true);
    BSON_APPEND_BOOL(&m, "hidden", false);
    BSON_APPEND_DOUBLE(&m, "priority", 1.0);
    BSON_APPEND_DOCUMENT_BEGIN(&m, "tags", &tags);
    bson_append_document_end(&m, &tags);
    BSON_APPEND_INT64(&m, "secondaryDelaySecs", 0);
    BSON_APPEND_INT32(&m, "votes", 1);
    bson_append_document_end(members, &m);
    (void)r;
}

static void append_config(mfi_repl *r, bson_t *out)
{
    bson_t members, settings, gle;
    char me[512];

    pthread_mutex_lock(&r->mu);
    snprintf(me, sizeof me, "%s", r->me);
    pthread_mutex_unlock(&r->mu);
    BSON_APPEND_UTF8(out, "_id", r->set_name);
    BSON_APPEND_INT32(out, "version", 1);
    BSON_APPEND_INT32(out, "term", TERM);
    BSON_APPEND_ARRAY_BEGIN(out, "members", &members);
    append_member_config(r, me, &members);
    bson_append_array_end(out, &members);
    BSON_APPEND_INT64(out, "protocolVersion", 1);
    BSON_APPEND_BOOL(out, "writeConcernMajorityJournalDefault", true);
    BSON_APPEND_DOCUMENT_BEGIN(out, "settings", &settings);
    BSON_APPEND_BOOL(&settings, "chainingAllowed", true);
    BSON_APPEND_INT32(&settings, "heartbeatIntervalMillis", 2000);
    BSON_APPEND_INT32(&settings, "heartbeatTimeoutSecs", 10);
    BSON_APPEND_INT32(&settings, "electionTimeoutMillis", 10000);
    BSON_APPEND_INT32(&settings, "catchUpTimeoutMillis", -1);
    BSON_APPEND_INT32(&settings, "catchUpTakeoverDelayMillis", 30000);
    BSON_APPEND_DOCUMENT_BEGIN(&settings, "getLastErrorModes", &gle);
    bson_append_document_end(&settings, &gle);
    BSON_APPEND_DOCUMENT_BEGIN(&settings, "getLastErrorDefaults", &gle);
    BSON_APPEND_INT32(&gle, "w", 1);
    BSON_APPEND_INT32(&gle, "wtimeout", 0);
    bson_append_document_end(&settings, &gle);
    BSON_APPEND_OID(&settings, "replicaSetId", &r->replica_set_id);
    bson_append_document_end(out, &settings);
}

static int not_repl(mf_error *err)
{
    return mf_error_set(err, MF_NoReplicationEnabled, "not running with --replSet");
}

int mfi_cmd_repl_set_get_config(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    bson_t config;
    (void)cmd;
    if (!ctx->inst->repl)
        return not_repl(err);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "config", &config);
    append_config(ctx->inst->repl, &config);
    bson_append_document_end(reply, &config);
    return 0;
}

int mfi_cmd_repl_set_get_status(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_instance *inst = ctx->inst;
    mfi_repl *r = inst->repl;
    bson_t optimes, members, m;
    mf_cl_optime last;
    int64_t now = mf_clock_wall_ms(), last_ms;
    char me[512];
    (void)cmd;

    if (!r)
        return not_repl(err);
    pthread_mutex_lock(&r->mu);
    snprintf(me, sizeof me, "%s", r->me);
    pthread_mutex_unlock(&r->mu);
    mf_cl_oplog_last(inst->cl.oplog, &last, &last_ms);

    BSON_APPEND_UTF8(reply, "set", r->set_name);
    BSON_APPEND_DATE_TIME(reply, "date", now);
    BSON_APPEND_INT32(reply, "myState", 1);
    BSON_APPEND_INT64(reply, "term", TERM);
    BSON_APPEND_UTF8(reply, "syncSourceHost", "");
    BSON_APPEND_INT32(reply, "syncSourceId", -1);
    BSON_APPEND_INT64(reply, "heartbeatIntervalMillis", 2000);
    BSON_APPEND_INT32(reply, "majorityVoteCount", 1);
    BSON_APPEND_INT32(reply, "writeMajorityCount", 1);
    BSON_APPEND_INT32(reply, "votingMembersCount", 1);
    BSON_APPEND_INT32(reply, "writableVotingMembersCount", 1);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "optimes", &optimes);
    append_optime(&optimes, "lastCommittedOpTime", &last);
    BSON_APPEND_DATE_TIME(&optimes, "lastCommittedWallTime", last_ms);
    append_optime(&optimes, "readConcernMajorityOpTime", &last);
    append_optime(&optimes, "appliedOpTime", &last);
    append_optime(&optimes, "durableOpTime", &last);
    BSON_APPEND_DATE_TIME(&optimes, "lastAppliedWallTime", last_ms);
    BSON_APPEND_DATE_TIME(&optimes, "lastDurableWallTime", last_ms);
    bson_append_document_end(reply, &optimes);
    BSON_APPEND_ARRAY_BEGIN(reply, "members", &members);
    BSON_APPEND_DOCUMENT_BEGIN(&members, "0", &m);
    BSON_APPEND_INT32(&m, "_id", 0);
    BSON_APPEND_UTF8(&m, "name", me);
    BSON_APPEND_DOUBLE(&m, "health", 1.0);
    BSON_APPEND_INT32(&m, "state", 1);
    BSON_APPEND_UTF8(&m, "stateStr", "PRIMARY");
    BSON_APPEND_INT64(&m, "uptime", (mf_clock_mono_us() - inst->start_mono_us) / 1000000);
    append_optime(&m, "optime", &last);
    BSON_APPEND_DATE_TIME(&m, "optimeDate", (int64_t)last.secs * 1000);
    BSON_APPEND_DATE_TIME(&m, "lastAppliedWallTime", last_ms);
    BSON_APPEND_DATE_TIME(&m, "lastDurableWallTime", last_ms);
    BSON_APPEND_UTF8(&m, "syncSourceHost", "");
    BSON_APPEND_INT32(&m, "syncSourceId", -1);
    BSON_APPEND_UTF8(&m, "infoMessage", "");
    BSON_APPEND_DATE_TIME(&m, "electionDate", r->config_date_ms / 1000 * 1000);
    BSON_APPEND_INT32(&m, "configVersion", 1);
    BSON_APPEND_INT32(&m, "configTerm", TERM);
    BSON_APPEND_BOOL(&m, "self", true);
    BSON_APPEND_UTF8(&m, "lastHeartbeatMessage", "");
    bson_append_document_end(&members, &m);
    bson_append_array_end(reply, &members);
    return 0;
}

/* replSetInitiate: the set is initiated as the server starts, so that an
 * embedded or test server needs no set-up step; the set-up scripts written
 * for mongod still send one.  A config naming this set with this server as
 * its only member is accepted (it describes the set as it is); another set
 * name, or other members, cannot be: this server is a set of one. */
int mfi_cmd_repl_set_initiate(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mfi_repl *r = ctx->inst->repl;
    bson_iter_t it, m;
    (void)reply;

    if (!r)
        return not_repl(err);
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (BSON_ITER_HOLDS_NULL(&it) || BSON_ITER_HOLDS_UNDEFINED(&it) || (mfi_is_number(&it) && bson_iter_as_int64(&it) == 1))
        return 0; /* rs.initiate() with no config */
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return mfi_type_error(err, "replSetInitiate", "replSetInitiate", &it, "object");
    bson_iter_t cfg = it;
    if (bson_iter_recurse(&cfg, &m) && bson_iter_find(&m, "_id")) {
        const char *name = BSON_ITER_HOLDS_UTF8(&m) ? bson_iter_utf8(&m, NULL) : "";
        if (strcmp(name, r->set_name) != 0)
            return mf_error_set(err, MF_InvalidReplicaSetConfig,
                                "Attempting to initiate a replica set with name %s, but command "
                                "line reports %s; rejecting",
                                name, r->set_name);
    }
    if (bson_iter_recurse(&cfg, &m) && bson_iter_find(&m, "members") &&
        BSON_ITER_HOLDS_ARRAY(&m)) {
        bson_iter_t e;
        int n = 0;
        bson_iter_recurse(&m, &e);
        while (bson_iter_next(&e))
            n++;
        if (n != 1)
            return mf_error_set(err, MF_InvalidReplicaSetConfig,
                                "MultiforaDB runs a replica set of one member, this server; a "
                                "config with %d members cannot be initiated",
                                n);
    }
    return 0;
}

/* ------------------------------------------------- what the set needs */

/* The collections a replica set writes with every write: its oplog, and
 * its sessions' records (coll/oplog.c, coll/write.c). */
static const char *const kept[] = {"local.oplog.rs", "config.transactions",
                                   "config.image_collection"};

int mfi_repl_check_drop(mf_instance *inst, const char *ns, mf_error *err)
{
    if (!inst->repl)
        return 0;
    if (strcmp(ns, "local.oplog.rs") == 0)
        return mf_error_set(err, MF_IllegalOperation, "can't drop live oplog while replicating");
    for (size_t i = 1; i < sizeof kept / sizeof *kept; i++)
        if (strcmp(ns, kept[i]) == 0)
            return mf_error_set(err, MF_IllegalOperation,
                                "can't drop %s while replicating: retryable writes keep their "
                                "sessions' records there",
                                ns);
    return 0;
}

int mfi_repl_check_drop_db(mf_instance *inst, const char *db, mf_error *err)
{
    if (!inst->repl || (strcmp(db, "local") != 0 && strcmp(db, "config") != 0))
        return 0;
    return mf_error_set(err, MF_IllegalOperation,
                        "Cannot drop '%s' database while replication is active", db);
}

int mfi_repl_check_write(mf_instance *inst, const char *ns, mf_error *err)
{
    if (!inst->repl)
        return 0;
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        if (strcmp(ns, kept[i]) == 0)
            return mf_error_set(err, MF_InvalidNamespace, "cannot write to '%s'", ns);
    return 0;
}
