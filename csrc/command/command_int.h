/*
 * command_int.h -- private to csrc/command: the instance's layout, the
 * command table's entry and the handler signature.
 */
#ifndef MF_COMMAND_INT_H
#define MF_COMMAND_INT_H

#include <string.h>

#include "command.h"
#include "../storage/storage.h"
#include "../query/query.h"
#include "../agg/pipeline.h"
#include "../coll/coll.h"

typedef struct mfi_cursor mfi_cursor;
typedef struct mfi_sessions mfi_sessions;
typedef struct mfi_fail_point mfi_fail_point;
typedef struct mfi_profile mfi_profile;
typedef struct mfi_op_debug mfi_op_debug;
typedef struct mfi_prof_op mfi_prof_op;
typedef struct mfi_repl mfi_repl;
typedef struct mfi_txn_table mfi_txn_table;
typedef struct mfi_auth mfi_auth;
struct mfi_privs;  /* authz_int.h */
struct mfi_grants; /* authz_int.h */

/* A retryable write command's session state (retry.c), while it runs. */
typedef struct mfi_retry {
    struct txn_state *state; /* the session's, checked out */
    bson_t lsid;             /* {id, uid} */
    int64_t txn_number;
    bson_iter_t stmt_ids;    /* the command's stmtIds, when has_stmt_ids */
    bool has_stmt_ids;
    int32_t first_stmt_id;   /* else stmtId, or 0 */
    mf_cl_stmt stmt;         /* the statement being written */
    bool injected;           /* the last check's error is the fail point's */
    mf_cl_optime op_before;  /* the command's last write before it */
    int32_t *retried;        /* the statements answered from their first run */
    size_t nretried, capretried;
} mfi_retry;

#define MF_MAX_NS_LEN 319 /* "db.collection" as a C string fits in 320 bytes */

/* maxIndexBuildMemoryUsageMegabytes: mongod's default and floor */
#define MF_INDEX_BUILD_DEFAULT_MB 200
#define MF_INDEX_BUILD_MIN_MB 50

struct mf_instance {
    char *dbpath;
    int lock_fd;
    mf_engine *engine; /* the data: opened with the instance, closed with it */
    int max_connections;
    bool enable_test_commands;
    bool auth; /* access control is on (--auth) */
    bson_t cmdline_argv;
    bson_t cmdline_parsed;
    void (*request_stop)(void *arg);
    void *request_stop_arg;

    int64_t start_wall_ms;
    int64_t start_mono_us;
    bson_oid_t process_id; /* topologyVersion.processId */
    char host[256];        /* "hostname:port" as serverStatus reports it */

    mf_counters counters;

    pthread_mutex_t cursors_mu; /* guards the cursor list (cursor.c) */
    mfi_cursor *cursors;
    int64_t cursor_timeout_ms; /* cursorTimeoutMillis */

    mf_agg_env agg_env;     /* how pipelines read collections (cmd_aggregate.c) */
    mf_cl_db cl;            /* the collection layer's state: plan cache, index
                               access counters (coll/) */
    /* internalDocumentSourceGroupMaxMemoryBytes and
     * internalQueryMaxBlockingSortMemoryUsageBytes (setParameter) */
    atomic_int_fast64_t agg_group_max_bytes, agg_sort_max_bytes;
    atomic_int_fast64_t txn_lifetime_s; /* transactionLifetimeLimitSeconds (txn.c) */
    atomic_int_fast64_t txn_size_limit; /* transactionSizeLimitBytes (coll/txn.c enforces) */
    /* minSnapshotHistoryWindowInSeconds and the history's byte budget
     * (coll/txn.c keeps the history) */
    atomic_int_fast64_t snap_window_s;
    atomic_int_fast64_t snap_budget;
    /* internalDocumentSourceBucketAutoMaxMemoryBytes and
     * internalDocumentSourceSetWindowFieldsMaxMemoryBytes */
    atomic_int_fast64_t agg_bucket_auto_max_bytes, agg_window_max_bytes;
    /* maxIndexBuildMemoryUsageMegabytes: keys an index build sorts at once */
    atomic_int_fast64_t index_build_max_mb;

    mfi_sessions *sessions; /* the logical-session registry (sessions.c) */
    mfi_fail_point *fail_points; /* MFI_FP_COUNT of them, by mfi_fp_id (failpoint.c) */
    mfi_profile *profile;   /* profiler settings and slowms (profile.c) */
    mfi_repl *repl;         /* the replica set of one (repl.c); NULL: standalone */
    mfi_txn_table *txns;    /* retryable writes' session states (retry.c) */

    /* logicalSessionRefreshMillis, and when the sessions refresh last ran
     * (mf_clock_mono_us; sysdb.c) */
    int64_t session_refresh_ms;
    atomic_int_fast64_t sessions_refreshed_us;
    int ttl_sleep_secs;     /* ttlMonitorSleepSecs */
    pthread_t ttl_thread;   /* the TTL monitor (cmd_index.c) */
    bool ttl_running;
    atomic_uint_fast64_t ttl_passes, ttl_deleted;
    atomic_uint_fast64_t unique_checked, unique_damaged; /* the check at open */
    /* Access control (authz.c): bumped by any change that may touch
     * admin.system.users or .roles; and whether those collections held a
     * document when `authz_docs_gen` - 1 was the generation (0: not
     * counted yet), for the localhost exception. */
    atomic_uint_fast64_t authz_gen;
    atomic_uint_fast64_t authz_docs_gen;
    atomic_bool authz_has_docs;

    pthread_mutex_t mu; /* guards is_shutting_down and the condition */
    pthread_cond_t cond;
    bool is_shutting_down;
};

/* The API version parameters a command was sent with (generic_args.c);
 * `version` is "" when none was given. */
typedef struct mfi_api_params {
    char version[8];
    bool has_strict, strict;
    bool has_deprecation_errors, deprecation_errors;
} mfi_api_params;

/* What a handler sees of the request beyond the command document. */
typedef struct mf_cmd_ctx {
    mf_instance *inst;
    mf_client *client;
    const char *db;   /* the $db value */
    const char *name; /* the command name as sent */
    int flags;        /* MF_RUN_* bits the handler sets */
    bson_t *err_info; /* fields the error reply carries after codeName
                         (a DuplicateKey's keyPattern, keyValue); NULL
                         when the caller does not send error replies */
    mfi_api_params api; /* the command's apiVersion, apiStrict, ... */
    /* maxTimeMS, parsed by the dispatcher for every command but aggregate
     * (which parses its own, more strictly): the operation's deadline, 0
     * when none was given, or 0 and never a deadline for getMore, whose
     * own is refused; explain sets the smaller of its own and its inner
     * command's.  Scans and writes count their work into it. */
    mf_deadline deadline;
    bool max_time_given;
    /* What the operation did, for the profiler and the slow-operation log
     * (profile.c): handlers fill it; NULL when the command is not
     * profiled (before its database is known). */
    mfi_op_debug *dbg;
    mfi_prof_op *prof; /* the profiler's view of this command */
    /* The log position of the command's last write: the dispatcher syncs
     * to it once, after the handler and before any reply leaves (group
     * commit), so no write is acknowledged before it is durable.  Handlers
     * raise it with mfi_ctx_wrote and never sync themselves. */
    mf_lsn lsn;
    /* the command creates or writes collections (a write command other
     * than aggregate): system namespaces are checked as mongod's
     * userAllowedCreateNS does */
    bool writes;
    /* In a replica set, how its writes are logged (the dispatcher sets the
     * oplog; coll/'s writes leave the last entry's ts, the reply's
     * operationTime).  mfi_ctx_log gives it to the write path. */
    mf_cl_log log;
    /* A retryable write's session state (retry.c), or NULL; `retry_buf`
     * holds it for the command's run. */
    mfi_retry *retry;
    mfi_retry retry_buf;
    /* A statement of a multi-document transaction (txn.c), or NULL;
     * `txn_buf` holds it for the command's run. */
    struct mfi_txn_use *txn;
    /* A read at a snapshot outside transactions (readConcern snapshot on
     * find, aggregate or distinct in a replica set): at oplog ts
     * `snap_at` (secs << 32 | inc); the dispatcher opens and binds it. */
    bool snap_read;
    uint64_t snap_at;
    /* the error label the handler's error gets (a change stream's
     * getMore: ResumableChangeStreamError / NonResumableChangeStreamError),
     * unless a fail point set the labels; NULL: none */
    const char *error_label;
    /* The privileges access control asked of the command (authz.c), the
     * dispatcher's, which a cursor the command opens copies: its getMores
     * must still hold them.  NULL without access control. */
    struct mfi_privs *authz_needs;
    /* Who runs it, as access control found before the session was read
     * (mfi_authz_pre), so that nothing is read again inside the
     * command's transaction: the user's grants (NULL: nobody) and whether
     * the localhost exception applies; `authz_ready` once found. */
    const struct mfi_grants *authz_grants;
    bool authz_bypass, authz_ready;
    struct mfi_txn_use {
        struct txn_state *state; /* the session's, checked out */
        bson_t lsid;             /* {id, uid} */
        int64_t txn_number;
        bool starts;             /* this command starts it */
        int64_t prev_number;     /* what the session had before it */
        int prev_phase;
    } txn_buf;
} mf_cmd_ctx;

/* What a handler passes to coll/'s writes: NULL on a standalone. */
static inline mf_cl_log *mfi_ctx_log(mf_cmd_ctx *ctx)
{
    return ctx->log.oplog ? &ctx->log : NULL;
}

/* A handler appends its reply fields (not `ok`) to `reply` and returns 0, or
 * returns an error code with `err` filled; the dispatcher then discards
 * whatever it appended and sends the error. */
typedef int (*mf_cmd_fn)(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                         mf_error *err);

enum {
    MF_CMD_ADMIN_ONLY = 1 << 0, /* only against the admin database */
    MF_CMD_ALIAS = 1 << 1,      /* another name of the entry before it;
                                   listCommands leaves it out */
    MF_CMD_HELLO = 1 << 2,      /* hello or isMaster: reads client metadata */
    MF_CMD_WRITE = 1 << 3,      /* writes: accepts a writeConcern */
    MF_CMD_TEST_ONLY = 1 << 4,  /* exists only with enableTestCommands */
    MF_CMD_NO_AUTH = 1 << 5,    /* needs no authentication (mongod's
                                   requiresAuth() false): takes no txnNumber */
};

typedef struct mf_cmd_def {
    const char *name;
    int flags;
    const char *help;
} mf_cmd_def;

/* The table, sorted by name (mfi_command_table() checks it in the tests). */
const mf_cmd_def *mfi_command_table(size_t *n);
const mf_cmd_def *mfi_command_find(const char *name);

/* Run `cmd` on `db` as the server itself (mongod's DBDirectClient): the
 * table's handler for its first key, with a context of its own (no
 * client, no profiling, no write concern), synced before it returns.
 * `reply` is the handler's (no ok field); the handler's error is returned. */
int mfi_command_direct(mf_instance *inst, const char *db, const bson_t *cmd, bson_t *reply,
                       mf_error *err);

/* Sleep up to `ms` milliseconds, or until shutdown begins; returns true if
 * it is shutting down. */
bool mfi_instance_sleep(mf_instance *inst, int64_t ms);

/* ------------------------------------------------- who a client is (auth.c) */

/* The document of `name`@`db` (_id "db.name") in admin.<coll>
 * (system.users, system.roles) into `out` (initialised here), `*found`
 * false when there is none. */
int mfi_authz_load(mf_instance *inst, const char *coll, const char *db, const char *name,
                   bson_t *out, bool *found, mf_error *err);
/* Run `cmd` (taken: destroyed here; NULL is out of memory) on admin as the
 * server; a write error in its reply is OperationFailed "writing
 * admin.<coll> failed". */
int mfi_authz_run(mf_instance *inst, const char *coll, bson_t *cmd, bson_t *reply, mf_error *err);
/* The user document of `user`@`db` in admin.system.users into `out`
 * (initialised here), `*found` false when there is none. */
int mfi_user_load(mf_instance *inst, const char *db, const char *user, bson_t *out, bool *found,
                  mf_error *err);
/* hello's saslSupportedMechs and speculativeAuthenticate answers, appended
 * to `reply` when `cmd` asks; BadValue for a malformed request (a failed
 * speculative authentication is no answer, not an error). */
int mfi_auth_hello(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err);
/* Whether role@db exists: built in, or in admin.system.roles
 * (cmd_roles.c). */
int mfi_role_exists(mf_instance *inst, const char *role, const char *db, bool *exists,
                    mf_error *err);
/* The user the connection is authenticated as: true and its name and
 * database, or false. */
bool mfi_auth_user(mf_cmd_ctx *ctx, const char **user, const char **db);

/* ------------------------------------------- access control (authz.c) */

/* Before the session: a command that needs authentication refused to a
 * connection nobody authenticated on (Unauthorized "Command X requires
 * authentication"), unless the localhost exception applies.  Nothing is
 * checked without --auth, nor for the server's own commands. */
int mfi_authz_pre(mf_cmd_ctx *ctx, const mf_cmd_def *def, mf_error *err);
/* The command's privileges, as mongod's checkAuthForOperation asks them:
 * Unauthorized "not authorized on <db> to execute command {...}" when one
 * is missing.  What it asked is left in ctx->authz_needs, when set (a
 * cursor the command opens keeps it for its getMores). */
int mfi_authz_check(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd, mf_error *err);
/* Whether the table of checks has a rule for command `name` (every
 * command must: a C test walks the command table). */
bool mfi_authz_has_rule(const char *name);
/* Whether the connection holds anything on database `db` or in it
 * (listDatabases, listCollections' authorizedCollections). */
bool mfi_authz_any_in_db(mf_cmd_ctx *ctx, const char *db);
/* Whether the connection may do anything at all on `db`.`coll`. */
bool mfi_authz_any_on_ns(mf_cmd_ctx *ctx, const char *db, const char *coll);
/* Whether the connection holds every privilege of `needs` (NULL: none). */
bool mfi_authz_may(mf_cmd_ctx *ctx, const struct mfi_privs *needs);
/* Whether the connection may do action `action` (MFA_*) on `db`.`coll`,
 * on `db` (coll NULL) or on the cluster (db NULL). */
bool mfi_authz_may_action(mf_cmd_ctx *ctx, int action, const char *db, const char *coll);
/* A change that may touch admin.system.users or .roles: what was resolved
 * from them is resolved again. */
void mfi_authz_changed(mf_instance *inst);
/* Whether a client connects from this host (loopback, a Unix socket, or
 * the process itself). */
bool mfi_client_is_local(const mf_client *c);
/* A copy of `l` (NULL when it is NULL or empty), and its freeing. */
struct mfi_privs *mfi_privs_dup(const struct mfi_privs *l);
void mfi_privs_destroy(struct mfi_privs *l);

/* connectionStatus: the connection's authenticatedUsers [{user, db}],
 * authenticatedUserRoles [{role, db}] (inherited ones too) and, with
 * `privileges`, authenticatedUserPrivileges, appended to `info`. */
int mfi_auth_status(mf_cmd_ctx *ctx, bool privileges, bson_t *info, mf_error *err);

/* Handlers, by file. */

/* ------------------------------------------ the replica set of one (repl.c) */

/* Replica-set mode when `set_name` is non-empty (else a standalone: no
 * state).  BadValue for a name with '/' or over 127 bytes. */
int mfi_repl_open(mf_instance *inst, const char *set_name, mf_error *err);
void mfi_repl_close(mf_instance *inst);
/* The set's host entry (hosts, me, primary): the address clients reach. */
void mfi_repl_set_me(mf_instance *inst, const char *host);
/* $clusterTime and operationTime, appended to a reply: `op_time` is the
 * command's last write ({0, 0}: none, the newest entry's ts is used). */
void mfi_repl_decorate(mf_instance *inst, const mf_cl_optime *op_time, bson_t *reply);
/* The fields an insert, update or delete reply has after `n`, in mongod's
 * order (WriteCommandReplyBase): in a replica set electionId and opTime
 * (the client's last write: this command's, else the newest), then
 * writeErrors (`nerr` of them in `werrs`) and retriedStmtIds. */
void mfi_write_reply_base(mf_cmd_ctx *ctx, bson_t *reply, uint32_t nerr, const bson_t *werrs);
/* After a write: the writeConcernError ({"writeConcernError": {...}},
 * appended to `wce`) for a `w` a set of one cannot satisfy -- a number
 * above 1 (UnsatisfiableWriteConcern), a mode other than "majority"
 * (UnknownReplWriteConcern) -- or nothing. */
void mfi_repl_write_concern(const bson_t *cmd, bson_t *wce);
/* hello's replica-set fields, hosts through lastWrite. */
void mfi_repl_hello(mf_instance *inst, bool hello, bson_t *reply);

/* ------------------------------------------------ retryable writes (retry.c) */

/* What a replica set keeps of a session (retry.c, txn.c): its newest
 * txnNumber, as a retryable write (its executed statements) or a
 * transaction (its state, and while in progress its snapshot and write
 * set).  A command checks it out for its whole run: one at a time. */
typedef struct stmt_rec {
    int32_t stmt_id;
    mf_cl_optime t;
} stmt_rec;

typedef enum {
    MFI_TXN_NONE,        /* txn_number is a retryable write's, or none */
    MFI_TXN_IN_PROGRESS,
    MFI_TXN_COMMITTED,
    MFI_TXN_ABORTED
} mfi_txn_phase;

typedef struct txn_state {
    uint8_t id[16], uid[32];
    bool busy;            /* checked out by a command */
    bool loaded;          /* from config.transactions and the oplog */
    int64_t txn_number;   /* -1: none yet */
    mf_cl_optime last;    /* the last entry of txn_number */
    stmt_rec *stmts;
    size_t nstmts, capstmts;
    int64_t last_use_ms;
    /* a transaction: its phase; in progress, its snapshot and writes, when
     * it started (transactionLifetimeLimitSeconds), the collections it
     * created (dropped again if it aborts) and the oplog operations of its
     * catalog changes (its commit's applyOps lists them: mf_cl_log) */
    mfi_txn_phase phase;
    mf_cl_txn *txn;
    int64_t started_ms;
    char **created;
    size_t ncreated;
    bson_t *catalog_ops;
    struct txn_state *next;
} txn_state;

struct mfi_txn_table {
    pthread_mutex_t mu;
    pthread_cond_t cond; /* a session was checked in */
    txn_state *list;
    size_t n, n_at_prune;
    /* The collections open transactions created, invisible to the
     * others until the commit (txn.c; under `pmu`, taken after `mu`). */
    pthread_mutex_t pmu;
    struct mfi_pending {
        char *ns;
        uint64_t txn_id;     /* mf_cl_txn_id of the creator */
        const txn_state *by;
    } *pending;
    size_t npending;
};

int mfi_txn_table_open(mf_instance *inst, mf_error *err);
void mfi_txn_table_close(mf_instance *inst);
/* The state of session (id, uid), checked out (waiting while another
 * command has it); NULL when out of memory. */
txn_state *mfi_session_checkout(mfi_txn_table *t, const uint8_t id[16], const uint8_t uid[32]);
void mfi_session_checkin(mfi_txn_table *t, txn_state *s);
/* The session's state from config.transactions and the oplog (its first
 * use after a start). */
int mfi_session_load(mf_instance *inst, txn_state *s, const bson_t *lsid, mf_error *err);
/* Check session (id, uid) out (*out; NULL only when out of memory), put
 * its lsid {id, uid} in `lsid` (initialised here when *out is set), and
 * load its state on its first use.  An error with *out set leaves it
 * checked out: the caller checks it in. */
int mfi_session_open(mf_instance *inst, const uint8_t id[16], const uint8_t uid[32],
                     bson_t *lsid, txn_state **out, mf_error *err);
/* The hex of a UUID as mongod prints a session id. */
void mfi_uuid_str(const uint8_t id[16], char out[37]);
/* A command with txnNumber and no autocommit in a replica set: a
 * retryable write if `def` is insert, update, delete or findAndModify (else
 * 50768).  Checks the session (id, uid) out (waiting for another command
 * of it), loads its state, refuses an older txnNumber (TransactionTooOld
 * 225), and sets ctx->retry (to `r`) until mfi_retry_end. */
int mfi_retry_begin(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                    const uint8_t id[16], const uint8_t uid[32], int64_t txn_number,
                    mfi_retry *r, mf_error *err);
void mfi_retry_end(mf_cmd_ctx *ctx);
/* The stmtId of the command's statement `i`. */
int32_t mfi_retry_stmt_id(const mfi_retry *r, uint32_t i);
/* Whether statement `stmt_id` already ran: `*executed`, with its oplog
 * entry in `entry` (initialised here); IncompleteTransactionHistory (217)
 * when the oplog no longer has it.  Otherwise the statement is the one
 * mfi_retry_log logs. */
int mfi_retry_check(mf_cmd_ctx *ctx, int32_t stmt_id, bool *executed, bson_t *entry,
                    mf_error *err);
/* Whether the statement's error came from onPrimaryTransactionalWrite:
 * that statement's write error, never a failure of the whole command. */
bool mfi_retry_injected(const mf_cmd_ctx *ctx);
/* The log for the statement's writes (the session's fields added). */
mf_cl_log *mfi_retry_log(mf_cmd_ctx *ctx);
/* After the statement: if it wrote, it is an executed statement.  A no-op
 * without a retryable write. */
int mfi_retry_done(mf_cmd_ctx *ctx, int32_t stmt_id, mf_error *err);
/* ------------------------------------------------ transactions (txn.c) */

/* A command with lsid, txnNumber and autocommit in a replica set: mongod's
 * checks (autocommit false, the commands a transaction runs, no
 * writeConcern but on commit and abort, readConcern on the first
 * statement only); checks the session out, starts (`start`) or continues
 * its transaction -- TransactionTooOld 225, NoSuchTransaction 251,
 * TransactionCommitted 256, ConflictingOperationInProgress 117 -- and
 * binds it to the thread.  Sets ctx->txn until mfi_txn_end. */
int mfi_txn_begin(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                  const uint8_t id[16], const uint8_t uid[32], int64_t txn_number, bool autocommit,
                  bool has_start, bool start, mf_error *err);
/* After the handler: unbind; a statement that failed (`rc`, or a write
 * error in `reply`) aborts the transaction; a WriteConflict write error
 * becomes the command's error.  Returns the command's code. */
int mfi_txn_end_statement(mf_cmd_ctx *ctx, int rc, bson_t *reply, mf_error *err);
/* Check the session in (the reply is built). */
void mfi_txn_end(mf_cmd_ctx *ctx);
/* The command failed before it ran (failCommand, evaluated before mongod
 * checks the session out): a transaction it started never began. */
void mfi_txn_unstart(mf_cmd_ctx *ctx);
/* A collection the running transaction created (dropped if it aborts). */
void mfi_txn_note_created(mf_cmd_ctx *ctx, const char *ns);
/* Before the handler: a collection another open transaction created is
 * not there yet for this command -- what would create or drop it (insert,
 * an upsert, create, createIndexes, drop) waits outside transactions for
 * that transaction to end (maxTimeMS bounds it) and is WriteConflict (112)
 * inside another one; collMod, dropIndexes and listIndexes are
 * NamespaceNotFound (26); reads, deletes and updates find it empty, as
 * they would find no collection. */
int mfi_txn_pending_check(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                          mf_error *err);
/* The transaction (mf_cl_txn_id) that created `ns` and has not ended,
 * when it is not the running command's own; 0: none.  listCollections
 * leaves such collections out. */
uint64_t mfi_txn_pending(mf_cmd_ctx *ctx, const char *ns);
/* Whether `ns` is pending in any transaction: what commands that do not
 * run in transactions (collStats, $collStats, dbStats, listDatabases) do
 * not count. */
bool mfi_txn_hidden(mf_instance *inst, const char *ns);
/* Keep in `v` the collections not hidden so; how many (catalog lock held). */
size_t mfi_txn_unhidden(mf_instance *inst, mf_coll **v, size_t n);
/* Whether `ns` may take new indexes: outside a transaction always, inside
 * only when the transaction created it. */
bool mfi_txn_created(const mf_cmd_ctx *ctx, const char *ns);
/* Abort the transactions past transactionLifetimeLimitSeconds. */
void mfi_txn_reap(mf_instance *inst);
/* A snapshot read outside transactions (the dispatcher): hold `snap` for
 * the running command, bound to its thread; a cursor the command leaves
 * open takes it (mfi_cursor_register), or the release ends it. */
void mfi_snapshot_hold(mf_cl_txn *snap);
mf_cl_txn *mfi_snapshot_take(void);
void mfi_snapshot_release(void);
/* killSessions / killAllSessions: the transactions of those users (all)
 * are aborted. */
void mfi_txn_kill(mf_instance *inst, const uint8_t (*uids)[32], size_t nuids, bool all);
/* endSessions: the session's transaction is aborted. */
void mfi_txn_session_ended(mf_instance *inst, const uint8_t id[16], const uint8_t uid[32]);
/* What a session state keeps of a transaction, released (prune, close). */
void mfi_txn_state_free(mf_instance *inst, txn_state *s);
/* The txnNumber of the transaction bound to this thread. */
int64_t mfi_txn_number(void);
/* Kill the cursors opened in transaction `t` (it ends). */
void mfi_cursors_kill_txn(mf_instance *inst, const void *t);

/* In a replica set, the oplog and the sessions' records are kept: their
 * drop, or local's or config's, is IllegalOperation (20); a user's write
 * or rename of them InvalidNamespace (73).  No-ops on a standalone. */
int mfi_repl_check_drop(mf_instance *inst, const char *ns, mf_error *err);
int mfi_repl_check_drop_db(mf_instance *inst, const char *db, mf_error *err);
int mfi_repl_check_write(mf_instance *inst, const char *ns, mf_error *err);

/* ------------------------------------- generic arguments (generic_args.c) */

/* mongod's initializeAPIParameters: parse apiVersion, apiStrict and
 * apiDeprecationErrors of `cmd` into `out` and refuse what mongod refuses:
 * TypeMismatch for a wrong type, 4886600 for strict/deprecationErrors
 * without a version, APIVersionError (322) for a version other than "1",
 * APIStrictError (323) when apiStrict is true and `def` is not in that
 * version, APIDeprecationError (324) when it is deprecated there. */
int mfi_api_params_check(const mf_cmd_def *def, const bson_t *cmd, mfi_api_params *out,
                         mf_error *err);
/* The API versions `def` belongs to (mongod's Command::apiVersions), as a
 * bit set: bit v-1 for version v; deprecated: the versions it is
 * deprecated in. */
unsigned mfi_api_versions(const mf_cmd_def *def, unsigned *deprecated);
/* APIStrictError for a pipeline stage outside API Version 1 (mongod's
 * AllowedWithApiStrict::kNeverInVersion1), looking into sub-pipelines
 * ($facet, $lookup, $unionWith), when the command is strict. */
int mfi_api_check_pipeline(const mfi_api_params *api, const bson_t *pipeline, mf_error *err);
/* The command's readConcern, parsed as mongod's ReadConcernArgs::parse
 * parses it for every command (FailedToParse 9 for an unknown level or a
 * non-object, TypeMismatch 14, InvalidOptions 72 for an unknown field or a
 * bad combination); then, outside transactions, a level the command does
 * not support (InvalidOptions 72: only find, aggregate, count and
 * distinct take more than "local", count not "snapshot"); then, for those
 * four, one a standalone cannot satisfy, refused as mongod's
 * waitForReadConcern refuses it: level "snapshot" or "linearizable" and
 * afterOpTime are NotAReplicaSet (123), afterClusterTime and
 * atClusterTime IllegalOperation (20).  A replica set of one satisfies
 * them all but an atClusterTime past its clock (72); level "snapshot" on
 * find, aggregate or distinct sets ctx->snap_read and snap_at. */
int mfi_read_concern_check(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                           mf_error *err);
/* InvalidOptions (72): command `name` does not support `cmd`'s
 * readConcern, caused by `why` -- mongod's words for it. */
int mfi_read_concern_refuse(const char *name, const bson_t *cmd, const char *why, mf_error *err);
/* The level of `cmd`'s readConcern ("" when none or not valid). */
const char *mfi_read_concern_level(const bson_t *cmd);
/* mongod's test commands for API versions (testVersion2, ...): reply with
 * the API parameters the command was sent with. */

/* ------------------------------------- collection options (coll_options.c) */

/* A collection's validation options as create and collMod take them. */
typedef struct mfi_validation_opts {
    bool has_validator;
    bson_t validator;           /* a view into the command */
    const char *level, *action; /* static strings, or NULL: not given */
} mfi_validation_opts;

/* `validator`, `validationLevel` or `validationAction` at `it` of command
 * `cmd` ("create", "collMod"), as mongod's IDL: TypeMismatch for the wrong
 * type, BadValue "Enumeration value ..." for a level or action it lacks. */
int mfi_parse_validation_opt(const bson_iter_t *it, const char *cmd, mfi_validation_opts *v,
                             mf_error *err);
/* Whether `validator` may be the validator of `ns`: none on system
 * collections or in admin, local and config (InvalidOptions 72), and it
 * must parse as a validator under `coll` (the filter's own errors). */
int mfi_check_validator(const char *ns, const bson_t *validator, const mf_collator *coll,
                        mf_error *err);
/* Append the options (in the catalog's order); `fill` (collMod): a level
 * and an action always, strict and error when not given, as mongod's
 * setValidator and friends store them; an empty validator as null. */
void mfi_append_validation(const mfi_validation_opts *v, bool fill, bson_t *out);

/* create's / collMod's `clusteredIndex` at `it` (`cmd` names the command
 * in errors) into `out` ({v: 2, key, name, unique: true}, initialised on
 * success), with mongod's errors: 5979703 for the boolean form, TypeMismatch,
 * 40414/40415 for missing/unknown fields, 5979700 unique not true, 5979701
 * a key other than {_id: 1}, 5979704 a v other than 2. */
int mfi_parse_clustered_index(const bson_iter_t *it, const char *cmd, bson_t *out,
                              mf_error *err);
/* `changeStreamPreAndPostImages: {enabled: <bool>}` at `it`. */
int mfi_parse_pre_post_images(const bson_iter_t *it, const char *cmd, bool *enabled,
                              mf_error *err);

/* ------------------------------------------------ profiler (profile.c) */

/* What one operation did, as mongod's OpDebug records it for the profiler
 * and the slow-operation log.  A count of -1 is not reported. */
struct mfi_op_debug {
    const char *op; /* "query", "getmore", "insert", "update", "remove",
                       "command" (mongod's logicalOp) */
    char ns[MF_MAX_NS_LEN + 1];     /* "" until set: "<db>.$cmd" */
    bson_t *originating;            /* getMore: the cursor's command (owned) */
    int64_t cursorid;
    int64_t keys_examined, docs_examined;
    bool has_sort_stage, from_multi_planner, cursor_exhausted;
    int64_t n_matched, n_modified, ninserted, ndeleted, n_upserted;
    int64_t keys_inserted, keys_deleted, nreturned;
    bool has_hashes;
    uint32_t query_hash, plan_cache_key;
    char plan_summary[256]; /* "" when no plan ran */
};

/* Every count -1, op "command", no namespace. */
void mfi_op_debug_init(mfi_op_debug *d, const char *op);
/* Add a scan's work since `*since` (updated to now) and take its plan
 * summary ("COLLSCAN", "IXSCAN { a: 1 }", ...). */
void mfi_op_debug_scan(mfi_op_debug *d, const mf_scan *s, mf_scan_stats *since);
/* The operation this thread runs (set by mfi_profile_begin until
 * mfi_profile_end), or NULL: reads deep inside a pipeline add their work
 * to it, as mongod's reads do to the thread's CurOp. */
mfi_op_debug *mfi_op_debug_current(void);
/* Add `n` to the count at `*field` (-1 counts as 0). */
void mfi_op_debug_add(int64_t *field, int64_t n);

int mfi_profile_open(mf_instance *inst, mf_error *err);
void mfi_profile_close(mf_instance *inst);
/* The dispatcher: before the handler runs (the database and command known),
 * and after, with the whole reply.  Between the two the handler fills
 * ctx->dbg.  mfi_profile_end logs a slow operation (id 51803) and writes
 * the command's profile entries to <db>.system.profile; it takes and
 * releases locks of its own, so it runs with none held. */
void mfi_profile_begin(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                       mfi_op_debug *dbg, mfi_prof_op *op);
void mfi_profile_end(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                     const bson_t *reply, const mf_error *err);
/* One statement of an update or delete, profiled and logged on its own as
 * mongod's per-statement CurOp is: `stmt` is its description ({q, u, multi,
 * upsert} or {q, limit}), `start_us` when it began (mf_clock_mono_us), `rc`
 * and `err` its outcome.  The entry is written when the command ends. */
void mfi_profile_statement(mf_cmd_ctx *ctx, const mfi_op_debug *d, const bson_t *stmt,
                           int64_t start_us, int rc, const mf_error *err);
/* Whether a statement begun at `start_us` (mf_clock_mono_us) may be
 * profiled or logged: its database profiles or filters, or it was slow.
 * Only then is its description worth building. */
bool mfi_profile_statement_wanted(const mf_cmd_ctx *ctx, int64_t start_us);
/* system.profile of `db` may be dropped (mongod: only with profiling off):
 * IllegalOperation (20) otherwise. */
int mfi_profile_check_drop(mf_instance *inst, const char *db, mf_error *err);
/* A dropped database loses its profiling settings. */
void mfi_profile_forget_db(mf_instance *inst, const char *db);

/* The per-command state mfi_profile_begin sets up (on the dispatcher's
 * stack). */
struct mfi_prof_op {
    const bson_t *cmd; /* the command (borrowed for the call) */
    int level;        /* the database's level when the command began */
    void *filter;     /* its filter (a reference), or NULL */
    bool sampled;     /* sampleRate's draw */
    int64_t slowms;
    int64_t start_us;
    bson_t pending;   /* profile entries to write, an array */
    uint32_t npending;
    bool stmt_profiled; /* update/delete: its statements stand for it */
};

/* ------------------------------------------------ the server's own (sysdb.c) */

/* admin.system.version, local.startup_log (this start's document) and
 * config.system.sessions, as a mongod standalone has them. */
int mfi_sysdb_open(mf_instance *inst, mf_error *err);
/* Write the records of the sessions used, and remove those of the
 * sessions ended, since the last refresh (config.system.sessions). */
int mfi_sessions_refresh(mf_instance *inst, mf_error *err);

/* ------------------------------------------------ sessions (sessions.c) */

/* The registry: created with the instance, freed with it. */
int mfi_sessions_open(mf_instance *inst, mf_error *err);
void mfi_sessions_close(mf_instance *inst);
/* How long an idle session lives (default localLogicalSessionTimeoutMinutes). */
void mfi_sessions_set_timeout_ms(mf_instance *inst, int64_t ms);
/* The command's OperationSessionInfo (lsid, txnNumber, autocommit,
 * startTransaction, txnRetryCounter) as mongod's
 * initializeOperationSessionInfo checks it on a standalone: the `lsid`, if
 * there is one, is recorded as used now (hello and isMaster excepted);
 * any txnNumber is IllegalOperation (20), since a standalone has neither
 * transactions nor retryable writes.  Errors: TypeMismatch 14 and 40413
 * duplicate for the fields, 40414/40415/InvalidUUID 207 for a malformed
 * lsid, 263/50889 for a transaction on a command that needs no
 * authentication, InvalidOptions 72 for fields without the ones they need,
 * TooManyLogicalSessions (261) when the registry is full. */
int mfi_session_use(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd, mf_error *err);
/* Parse a LogicalSessionFromClient {id, uid?} at `it`; `path` names it in
 * errors ("OperationSessionInfo.lsid").  A missing uid is the caller's
 * digest (its user's, or the unauthenticated user's); with access control,
 * another's is Unauthorized unless the caller holds impersonate. */
int mfi_session_from_client(mf_cmd_ctx *ctx, const bson_iter_t *it, const char *path,
                            uint8_t id[16], uint8_t uid[32], mf_error *err);
/* Add session (id, uid) or refresh its lastUse to `now_ms`. */
int mfi_sessions_touch(mf_instance *inst, const uint8_t id[16], const uint8_t uid[32],
                       int64_t now_ms, mf_error *err);
/* A session's id (16 bytes) then its uid (32). */
typedef struct mfi_session_key {
    uint8_t key[48];
} mfi_session_key;
/* The sessions used since the last call, whose records a refresh writes,
 * and those ended since, whose records it removes: mongod's
 * LogicalSessionCache's active and ending sets.  Both arrays are the
 * caller's (free()). */
int mfi_sessions_take_changes(mf_instance *inst, mfi_session_key **active, size_t *nactive,
                              mfi_session_key **ended, size_t *nended, mf_error *err);
/* Remove session (id, uid) if present. */
void mfi_sessions_end(mf_instance *inst, const uint8_t id[16], const uint8_t uid[32]);
/* Remove every session (`all`) or those owned by one of `uids`. */
void mfi_sessions_kill(mf_instance *inst, const uint8_t (*uids)[32], size_t nuids, bool all);
/* Sessions live at `now_ms` (expired ones are dropped first). */
size_t mfi_sessions_count(mf_instance *inst, int64_t now_ms);
/* endSessions' work once its argument is an array of documents. */
int mfi_end_sessions(mf_cmd_ctx *ctx, const bson_t *cmd, mf_error *err);
/* The aggregation environment's list_sessions (pipeline.h); `arg` is the
 * instance. */
int mfi_sessions_list(void *arg, const mf_agg_sessions_query *q, bson_t *out, mf_error *err);
/* A user's session digest: SHA-256 of "user@db", or of "" for ("", "")
 * (no one authenticated), as mongod's getLogicalSessionUserDigestFor. */
void mfi_session_user_digest(const char *user, const char *db, uint8_t out[32]);
void mfi_sha256(const void *data, size_t len, uint8_t out[32]);
/* configureFailPoint and waitForFailPoint (cmd_failpoint.c): test
 * commands only.  configureFailPoint sets a fail point of failpoint.c's,
 * or "storageFault" (the os layer's fault injection). */
/* The poll of a fail point's wait: one evaluation per 100 ms, as
 * pauseWhileSet's. */
#define MFI_FP_POLL_MS 100
/* One step of a wait that polls: MaxTimeMSExpired once the command's
 * deadline has passed, InterruptedAtShutdown if shutdown wakes the sleep
 * of `ms`, else 0 (failpoint.c). */
int mfi_fail_point_wait_step(mf_cmd_ctx *ctx, int64_t ms, mf_error *err);
/* Where createIndexes has built its indexes and not yet committed them:
 * waits while hangIndexBuildBeforeCommit is set.  0, or MaxTimeMSExpired
 * (the command's deadline) or InterruptedAtShutdown. */
int mfi_hang_index_build(mf_cmd_ctx *ctx, mf_error *err);
/* mongod's checkForInterrupt as an operation that has a deadline starts
 * (a command with maxTimeMS, a getMore of a cursor opened with one):
 * MaxTimeMSExpired (50) "operation exceeded time limit" when
 * maxTimeAlwaysTimeOut fires, else 0.  Call it only for an operation with
 * a deadline, and once: each call may enter the fail point. */
int mfi_max_time_check(mf_instance *inst, mf_error *err);

/* --------------------------------------------------- fail points (failpoint.c) */

/* The fail points built, by name in failpoint.c. */
typedef enum {
    MFI_FP_FAIL_COMMAND,
    MFI_FP_FAIL_GET_MORE,
    MFI_FP_HANG_INDEX_BUILD,
    MFI_FP_MAX_TIME_ALWAYS_TIME_OUT,
    MFI_FP_ON_PRIMARY_TXN_WRITE,
    MFI_FP_COUNT
} mfi_fp_id;

/* Whether an evaluation counts an entry: MFI_FP_AGAIN for a site that
 * evaluates again while it pauses (mongod's kWasEntered). */
typedef enum { MFI_FP_FIRST, MFI_FP_AGAIN } mfi_fp_entry;

/* A site's condition on the data (mongod's shouldFail predicate): true to
 * let the mode decide.  Called under the fail point's mutex: it must not
 * block or evaluate a fail point. */
typedef bool (*mfi_fp_filter)(const bson_t *data, void *arg);

/* Created with the instance (all off, counts 0), freed with it. */
int mfi_fail_points_open(mf_instance *inst, mf_error *err);
void mfi_fail_points_close(mf_instance *inst);
/* The fail point built under `name`: false if there is none. */
bool mfi_fail_point_find(const char *name, mfi_fp_id *id);
const char *mfi_fail_point_name(mfi_fp_id id);
/* Set fail point `id` from a configureFailPoint command (mode, data) as
 * mongod's FailPoint::parseBSON reads it; `*count` receives the times it
 * has been entered since the instance started.  Errors: IllegalOperation
 * (no mode), BadValue / TypeMismatch (a malformed mode or data); the
 * fail point is then unchanged. */
int mfi_fail_point_configure(mf_instance *inst, mfi_fp_id id, const bson_t *cmd,
                             int64_t *count, mf_error *err);
/* The times fail point `id` has been entered since the instance started. */
int64_t mfi_fail_point_entered(mf_instance *inst, mfi_fp_id id);
/* Evaluate fail point `id` at a site: true if it fires, which uses up a
 * time (or a skip) and, for MFI_FP_FIRST, counts an entry.  `filter` (may
 * be NULL) decides first; one that refuses uses up nothing.  When it
 * fires and `data` is not NULL, `*data` receives a copy of the data (the
 * caller destroys it).  Thread-safe; no lock taken while the fail point
 * is off. */
bool mfi_fail_point_fires(mf_instance *inst, mfi_fp_id id, mfi_fp_entry entry,
                          mfi_fp_filter filter, void *arg, bson_t *data);
/* mongod's bsonExtractIntegerField: a number with an exact 64-bit integer
 * value into `*out`, else TypeMismatch or BadValue (`err` may be NULL). */
int mfi_bson_extract_integer(const bson_iter_t *it, const char *field, int64_t *out,
                             mf_error *err);

/* -------- failCommand, failGetMoreAfterCursorCheckout (fail_command.c) */

/* Record what the first hello of a connection says about the client (its
 * appName, internalClient) before the fail point looks at it. */
void mfi_client_note_hello(mf_client *client, const bson_t *cmd);

/* What the fail point did to one command, for the reply: fields that go
 * before `ok` ({writeConcernError}) and the errorLabels override.  Lives on
 * the dispatcher's stack; init and destroy around one command. */
typedef struct mfi_fail_effect {
    bson_t wce;    /* {writeConcernError: <data's value>} or empty */
    bson_t labels; /* {errorLabels: [...]} or empty */
    bool labels_given; /* the fail point's data set the labels (even to
                          none): the server adds none of its own */
} mfi_fail_effect;
void mfi_fail_effect_init(mfi_fail_effect *fx);
void mfi_fail_effect_destroy(mfi_fail_effect *fx);
/* Before the command runs: if failCommand fires for it, wait blockTimeMS,
 * then fail it (errorCode) or close the connection (closeConnection:
 * ctx->flags gets MF_RUN_CLOSE).  Returns 0 to run the command, or the
 * error it fails with. */
int mfi_fail_command_before(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                            mfi_fail_effect *fx, mf_error *err);
/* After a command that takes a write concern ran (successfully or not): if
 * failCommand fires with a writeConcernError, put it in `fx`. */
void mfi_fail_command_after(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd,
                            mfi_fail_effect *fx);
/* A getMore (`cmd`) that holds its cursor: the error
 * failGetMoreAfterCursorCheckout fails it with if it fires, else 0.  The
 * caller kills the cursor on an error. */
int mfi_fail_get_more(mf_cmd_ctx *ctx, const bson_t *cmd, mf_error *err);
/* fsync: a checkpoint now (cmd_fsync.c). */

/* collStats's fields after `ns` (size, count, ..., scaleFactor) for `ns`,
 * sizes divided by `scale`; zeros for a collection that does not exist, as
 * mongod 7.0 (cmd_stats.c).  Takes the catalog and collection locks. */
int mfi_coll_storage_stats(mf_instance *inst, const char *ns, int64_t scale, bson_t *reply,
                           mf_error *err);


/* The TTL monitor thread: started with the instance, joined at close. */
int mfi_ttl_start(mf_instance *inst, mf_error *err);
void mfi_ttl_stop(mf_instance *inst);
/* Validate every collection with a unique index (other than _id_),
 * logging the inconsistent ones; `*damaged` counts them.  Run once after
 * open, on the monitor thread. */
int mfi_unique_check(mf_instance *inst, uint64_t *damaged);

/* One pass over every TTL index (the monitor's work; tests call it too). */
int mfi_ttl_pass(mf_instance *inst, uint64_t *deleted, mf_error *err);

/* ---------------------------------------------------------------- cursors */

/* A server-side cursor (cursor.c).  Its source is a scan of a collection
 * (with the filter, projection and skip/limit still to apply), or a sorter
 * holding the sorted, projected results, or a prepared array of documents
 * (listCollections and the like). */
struct mfi_cursor {
    int64_t id;
    char ns[MF_MAX_NS_LEN + 1];
    uint8_t coll_uuid[16];  /* the collection it reads, if any */
    bool has_coll;
    mf_scan *scan;          /* owns */
    mf_cl_indexes *ix;        /* owns: the indexes the scan was planned over */
    mf_matcher *matcher;    /* owns */
    mf_projection *proj;    /* owns */
    mf_expr_ctx *xctx;      /* owns: what the matcher's $expr and the
                               projection's computed fields evaluate with */
    mf_sorter *sorter;      /* owns */
    bool project_late;      /* the sorter holds [pos][rid (8 bytes LE
                               each)][whole document]: project as documents
                               leave it */
    bool show_record_id;    /* find's showRecordId: {$recordId: rid} last */
    /* The metadata find's projection asks of each row (MF_META_BIT):
     * recordId, indexKey, sortKey (from `key_sort`, owned, a copy of the
     * query's sort); a text scan's rows always carry their score. */
    uint32_t meta_needs;
    mf_sort *key_sort;
    bool return_key;        /* find's returnKey: each row's index key instead
                               (a sort sorts the documents, then returns keys) */
    mf_pipeline *pipeline;  /* owns: an aggregation's results */
    bson_t *docs;           /* owns: a prepared array */
    bson_iter_t docs_it;
    int64_t skip;           /* still to skip (scan sources) */
    int64_t limit;          /* still to return; -1: no limit */
    mf_buf stash;           /* a document that did not fit its batch */
    bool has_stash;
    bool tailable, await_data; /* find's: a capped collection's tail (cursor.c) */
    bool no_timeout;
    /* maxTimeMS, a budget for the cursor's whole life as mongod keeps it:
     * `deadline` is the running command's (mf_clock_mono_us, 0: none; the
     * scan reads it there, mf_scan_deadline), and between commands the
     * cursor keeps the microseconds left (mfi_cursor_time_save), which
     * the next getMore starts from (mfi_cursor_time_resume).  Time
     * between getMores is not counted. */
    mf_deadline deadline;
    int64_t time_left_us;
    /* the transaction it was opened in (its scans read through that
     * transaction's view; NULL: none) and its number */
    const void *txn;
    int64_t txn_number;
    /* owns: the snapshot a snapshot read outside transactions reads at
     * (bound while the cursor is checked out), or NULL */
    mf_cl_txn *snap;
    /* a change stream's (change_stream.c): its reader of the oplog (owns;
     * `pipeline` then runs over each event), the _id of the last event
     * it is past, of the event in `stash`, and the reply's
     * postBatchResumeToken ({postBatchResumeToken: token}); owned */
    mf_cl_changes *changes;
    bson_t *cs_last, *cs_stash_id, *cs_pbrt;
    bool killed;            /* killCursors while in use: close at checkin */
    bool in_use;
    int64_t last_used_ms;
    /* For the profiler: the command that made the cursor (owned, may be
     * NULL), its plan summary, and the scan's counters already reported */
    bson_t *origin;
    char plan_summary[256];
    mf_scan_stats stats_seen;
    /* Access control: who opened it ("db.user", "" for nobody), and what
     * its command was allowed (owned; NULL: nothing to check again) */
    char owner[640];
    struct mfi_privs *authz_needs;
    mfi_cursor *next;
};

/* A reply's batch of documents (cursor.c): each a reference into the
 * collection's pages (valid while it is read-locked) or into the batch's
 * own runs of copies; mfi_batch_reply writes the reply's cursor document
 * once, at its final size. */
typedef struct mfi_batch_doc {
    const uint8_t *data;
    size_t len;
} mfi_batch_doc;

typedef struct mfi_batch {
    uint32_t n;
    size_t bytes; /* the documents' */
    int64_t max_docs; /* -1: no count limit */
    bool count_only;  /* explain: documents counted, not kept */
    mfi_batch_doc *docs;
    size_t docs_cap;
    mf_buf *runs; /* the copies: full runs, then the one being written */
    size_t nruns, runs_cap;
    uint8_t *id_at; /* where batch_reply left the cursor id, for batch_set_id */
    /* a change stream's: {postBatchResumeToken: token}, written after the
     * documents (NULL: none) */
    const bson_t *pbrt;
} mfi_batch;

/* Add a copy of a document to the batch; whether one of `len` bytes fits
 * (the reply's 16 MB; the first always does). */
int mfi_batch_add_copy(mfi_batch *b, const uint8_t *data, size_t len, mf_error *err);
bool mfi_batch_fits(const mfi_batch *b, size_t len);

void mfi_batch_free(mfi_batch *b);
/* The reply's cursor {firstBatch|nextBatch: [...], id, ns}; the id is
 * written later by mfi_batch_set_id.  Frees the batch. */
int mfi_batch_reply(mfi_batch *b, bson_t *reply, const char *batch_name, const char *ns,
                    mf_error *err);
void mfi_batch_set_id(const mfi_batch *b, int64_t id);
/* Fill `b` from cursor `cur` (over collection `c` when the cursor reads
 * one, its lock held); `*exhausted` says the source is done. */
int mfi_cursor_fill(mfi_cursor *cur, mf_engine *e, mf_coll *c, mfi_batch *b,
                    mf_deadline *deadline, bool *exhausted, mf_error *err);

/* Whether a row must be rebuilt for the client: a projection,
 * showRecordId's field, or returnKey's index key instead. */
static inline bool mfi_cursor_reshaped(const mfi_cursor *cur)
{
    return cur->proj || cur->show_record_id || cur->return_key;
}
/* A scanned row as the client sees it, `*doc`: rebuilt into `out` when
 * mfi_cursor_reshaped (initialised then, error or not: the caller
 * destroys it), else the row's own document (no copy, `out` untouched). */
int mfi_cursor_shape(mfi_cursor *cur, const mf_scan_row *row, bson_t *out, const bson_t **doc,
                     mf_error *err);
/* The metadata of a scanned row (meta.h) as the cursor's query has it:
 * a text scan's score, and what its projection asks for (meta_needs),
 * into `meta` (cleared first).  Errors: out of memory, the sort key's. */
int mfi_cursor_row_meta(mfi_cursor *cur, const mf_scan_row *row, mf_meta *meta, mf_error *err);

void mfi_cursors_init(mf_instance *inst);
void mfi_cursors_destroy(mf_instance *inst);
void mfi_cursor_free(mfi_cursor *c);
/* Register a cursor the command of `ctx` opened (the registry owns it
 * from now on, and notes who opened it); returns its id. */
int64_t mfi_cursor_register(mf_cmd_ctx *ctx, mfi_cursor *c);
/* Whether killCursors `cmd` may kill each of its cursors that exists:
 * the connection's own, or with killAnyCursor (mongod's
 * checkAuthForKillCursors). */
bool mfi_cursors_may_kill(mf_cmd_ctx *ctx, const bson_t *cmd);
/* Take cursor `id` for a getMore: CursorNotFound (43) if there is none. */
int mfi_cursor_checkout(mf_instance *inst, int64_t id, mfi_cursor **out, mf_error *err);
/* Give it back, or close it (exhausted, or an error ended it). */
void mfi_cursor_checkin(mf_instance *inst, mfi_cursor *c, bool close);
/* killCursors of one id on `ns`: 1 if it was there. */
int mfi_cursor_kill(mf_instance *inst, int64_t id, const char *ns);
size_t mfi_cursors_open(mf_instance *inst);
/* After a batch of a cursor with a deadline: keep the time it has left
 * (none: 0).  mfi_cursor_register calls it. */
void mfi_cursor_time_save(mfi_cursor *c);
/* Before a getMore's batch: the deadline is now plus the time left
 * (also set in the cursor's pipeline); MaxTimeMSExpired (50) "operation
 * exceeded time limit" when none is left, as mongod's getMore checks for
 * an interrupt before it runs. */
int mfi_cursor_time_resume(mfi_cursor *c, mf_error *err);

/* A first batch over a prepared array of documents (listCollections and
 * the like): replies {cursor: {firstBatch, id, ns}} and registers the
 * rest.  Takes `docs` (an array, heap-allocated). */
int mfi_cursor_reply_from_docs(mf_cmd_ctx *ctx, const char *ns, bson_t *docs, int64_t batch_size,
                               bson_t *reply, mf_error *err);

/* A first batch from `cur` (taken), whose source is not a scan: replies
 * {cursor: {firstBatch, id, ns}}; registers the cursor if more is left
 * (and not `single_batch`), else frees it. */
int mfi_cursor_first_batch(mf_cmd_ctx *ctx, mfi_cursor *cur, int64_t batch_size,
                           bool single_batch, bson_t *reply, mf_error *err);

/* maxTimeMS as mongod's parseMaxTimeMS reads it, into `*ms` (0: no
 * limit): BadValue (2) "maxTimeMS must be a number" for a value of
 * another type, "<n> value for maxTimeMS is out of range" outside [0,
 * 2^31 - 1] (n: the value as a 64-bit integer), "maxTimeMS has
 * non-integral value" for a double with a fraction. */
int mfi_max_time_arg(const bson_iter_t *it, int64_t *ms, mf_error *err);
/* mongod's BSONObjBuilder::appendNumber(long long): an int32 below 2^30
 * in magnitude, else an int64. */
void mfi_append_number(bson_t *b, const char *key, int64_t v);
/* mongod's BSONElement::safeNumberLong of a number (0 for other types). */
int64_t mfi_safe_number_long(const bson_iter_t *it);
/* The smaller of two deadlines (mf_clock_mono_us; 0: none). */
static inline int64_t mfi_deadline_min(int64_t a, int64_t b)
{
    return !a ? b : !b ? a : a < b ? a : b;
}
/* Prefix a running query's error as mongod's executor does. */
void mfi_executor_error(mf_error *err, const char *cmdname);
/* The directory where sorts and groups spill (<dbpath>/_tmp). */
void mfi_tmpdir_of(mf_instance *inst, char *out, size_t cap);
/* aggregate's work, for the handler (explain 0) and for explain (1
 * queryPlanner, 2 with executionStats, 3 allPlansExecution). */
int mfi_aggregate_run(mf_cmd_ctx *ctx, const bson_t *cmd, int explain, bson_t *reply,
                      mf_error *err);
/* Set up inst->agg_env (cmd_aggregate.c). */
void mfi_agg_env_init(mf_instance *inst);
/* Add the environment's writes and statistics ($out, $merge, $collStats,
 * $indexStats) to inst->agg_env (agg_env_write.c). */
void mfi_agg_env_write_init(mf_instance *inst);
/* The running aggregate's bypassDocumentValidation, for the $out / $merge
 * sinks it opens on this thread (set around the pipeline's run). */
void mfi_agg_bypass_validation(bool on);


/* ---------------------------------------------------------- views (views.c) */

/* A namespace resolved through its views: the collection the chain ends
 * at, every view's stages (innermost first) and the outermost view's
 * collation ({}: simple). */
typedef struct mfi_resolved_view {
    bool is_view;
    char base[MF_MAX_NS_LEN + 1];
    bson_t pipeline; /* an array */
    bson_t collation;
} mfi_resolved_view;

/* Resolve `ns` (a collection or a missing name resolves to itself,
 * is_view false).  165 past 20 views.  Clear with mfi_view_clear. */
int mfi_view_resolve(mf_instance *inst, const char *ns, mfi_resolved_view *v, mf_error *err);
void mfi_view_clear(mfi_resolved_view *v);
/* The definition of view `ns` into `def` (initialised here); false when
 * it is none. */
bool mfi_view_lookup(mf_instance *inst, const char *ns, bson_t *def);
bool mfi_is_view(mf_instance *inst, const char *ns);
/* CommandNotSupportedOnView (166) "Namespace db.v is a view, not a
 * collection" when `ns` is a view, else 0. */
int mfi_view_refuse(mf_instance *inst, const char *ns, mf_error *err);
/* create with viewOn / pipeline; collMod of a view; drop of a view
 * (*dropped false when `ns` is no view). */
int mfi_view_create(mf_cmd_ctx *ctx, const char *ns, const bson_t *cmd, mf_error *err);
int mfi_view_modify(mf_cmd_ctx *ctx, const char *ns, const bson_t *cmd, mf_error *err);
int mfi_view_drop(mf_cmd_ctx *ctx, const char *ns, bool *dropped, mf_error *err);
/* The aggregation environment's resolve_view (the foreign side of
 * $lookup, $graphLookup, $unionWith through views). */
void mfi_views_env_init(mf_instance *inst);
/* Call `fn` with each view of `db`: its name and listCollections' options
 * {viewOn, pipeline, collation?}. */
int mfi_views_each(mf_instance *inst, const char *db,
                   int (*fn)(void *arg, const char *name, const bson_t *options, mf_error *err),
                   void *arg, mf_error *err);
/* find on view `ns`, as mongod's asAggregationCommand: the aggregate
 * {aggregate: <view>, pipeline: [$match, $sort, $skip, $limit, $project],
 * cursor, collation, hint, maxTimeMS, let} run by mfi_aggregate_run
 * (`explain` as there); find's options an aggregate lacks are 168.
 * *handled false when `ns` is no view. */
int mfi_view_find(mf_cmd_ctx *ctx, const bson_t *cmd, int explain, bson_t *reply, bool *handled,
                  mf_error *err);
/* count on view `ns`: its documents (after query, skip, limit) counted
 * into {n}; explain of a count or distinct of a view: the explain of the
 * aggregate it runs as (*handled false when the namespace is no view). */
int mfi_view_count(mf_cmd_ctx *ctx, const char *ns, const bson_t *cmd, bson_t *reply,
                   mf_error *err);
int mfi_view_count_distinct_explain(mf_cmd_ctx *ctx, const char *op, const bson_t *cmd,
                                    int level, bson_t *reply, bool *handled, mf_error *err);
/* Run `stages` on `ns` -- a view's own stages first, under its collation,
 * when it is one -- calling `fn` with each document (cmd_aggregate.c).
 * `collation_arg` (may be NULL): the command's; `*used` (may be NULL) gets
 * the collation it ran under. */
int mfi_aggregate_each(mf_cmd_ctx *ctx, const char *ns, const bson_t *stages,
                       const bson_iter_t *collation_arg, const char *cmdname,
                       int (*fn)(void *arg, const bson_t *doc, mf_error *err), void *arg,
                       mf_collator **used, mf_error *err);

/* ------------------------------------------------- writes (cmd_write.c) */

/* Whether a write command asks for bypassDocumentValidation (mongod's
 * trueValue()): its documents are then not checked against the
 * collection's validator. */
bool mfi_bypass_validation(const bson_t *cmd);
/* The collection `ns` for writing, created if missing; returns with the
 * catalog lock held shared (the caller unlocks). */
int mfi_coll_for_write(mf_cmd_ctx *ctx, const char *ns, mf_coll **out, mf_error *err);
/* A statement's write met a document or unique key transaction `holder`
 * holds (mf_cl_op_take_wait): let go of `*c` (locked exclusively) and the
 * catalog lock, wait for the transaction to end (maxTimeMS bounds it), and
 * take them again -- `*c` as mfi_coll_for_write gives it when `create`,
 * else as it is (NULL: gone) -- so the statement runs again.  On an error
 * the catalog lock is held and `*c` is NULL. */
int mfi_write_wait(mf_cmd_ctx *ctx, const char *ns, uint64_t holder, bool create, mf_coll **c,
                   mf_error *err);
/* userAllowedWriteNS: system.profile and system.views are written by the
 * server only (InvalidNamespace 73, "cannot write to <ns>"), and so, in a
 * replica set, are the oplog and the sessions' records. */
int mfi_user_write_ns(mf_instance *inst, const char *ns, mf_error *err);
/* A writeErrors entry for a DuplicateKey, as mongod words it. */
void mfi_duplicate_error(bson_t *werr, uint32_t index, const char *ns, const mf_cl_dup *dup);
void mfi_write_error(bson_t *werr, uint32_t index, const mf_error *err);
/* Whether a write's error means the engine failed (stop the batch) rather
 * than the statement (a write error, go on if unordered). */
bool mfi_write_fatal(int rc);

/* Helpers for reading arguments. */

/* The command wrote up to log position `lsn`: its reply waits for it. */
static inline void mfi_ctx_wrote(mf_cmd_ctx *ctx, mf_lsn lsn)
{
    if (lsn > ctx->lsn)
        ctx->lsn = lsn;
}

/* The collection layer's state of `inst`, or NULL (an internal read). */
static inline mf_cl_db *mfi_cl(mf_instance *inst)
{
    return inst ? &inst->cl : NULL;
}

/* mongod's rules for collection name `coll` within `db` (InvalidNamespace
 * 73); `writes`: the command creates or writes it, so a system collection
 * must be one a client may write (userAllowedCreateNS). */
int mfi_coll_name_check(const char *db, const char *coll, bool writes, mf_error *err);
/* The command's first value as a collection name in ctx->db (mongod's
 * naming rules, InvalidNamespace 73), into `ns` as "db.coll". */
int mfi_coll_arg(mf_cmd_ctx *ctx, const bson_t *cmd, char *ns, size_t cap, mf_error *err);

/* True for the arguments every command accepts (lsid, $db, comment, ...). */
bool mfi_is_generic_arg(const char *name);

/* True if the element is a number (int32, int64, double, decimal). */
bool mfi_is_number(const bson_iter_t *it);
/* The element as int64 if it is a whole number in range; false otherwise. */
bool mfi_as_int64(const bson_iter_t *it, int64_t *out);
/* A sub-document argument as a static bson_t; false if not a document. */
bool mfi_doc_arg(const bson_iter_t *it, bson_t *out);
/* A hint must be an index name or a key pattern: TypeMismatch otherwise
 * (`field` as mongod names it, e.g. "find.hint"). */
int mfi_hint_arg(const bson_iter_t *it, const char *field, mf_error *err);
/* explain of a find command (cmd_find.c): parsed, validated and planned
 * as find does, and with `stats` run as find runs it, every result
 * produced and dropped.  What explain's stages above the scan need is
 * copied out; `filter`, `sort` and `proj` point into the command. */
/* What explain shows of a scan's planning beside its winning plan
 * (cmd_explain.c): the plans not chosen, each candidate's trial, and the
 * query's hashes. */
typedef struct mfi_plans_explained {
    bson_t rejected; /* rejectedPlans (an array) */
    bson_t all;      /* allPlansExecution (an array; empty when one plan ran) */
    bool hashed;     /* queryHash and planCacheKey are known */
    uint32_t query_hash, plan_cache_key;
} mfi_plans_explained;
void mfi_plans_init(mfi_plans_explained *p);
/* Take them from `s`, planned with mf_scan_extra.explain and decided.
 * Returns 0, or -1 (out of memory). */
int mfi_plans_explain(const mf_scan *s, mfi_plans_explained *p);
void mfi_plans_free(mfi_plans_explained *p);
/* Append queryPlanner's queryHash and planCacheKey (8 hex digits, as
 * mongod prints them) to `qp`, when `hashed`. */
void mfi_put_hashes(bson_t *qp, bool hashed, uint32_t query_hash, uint32_t plan_cache_key);

/* `dst` as a view of `src`'s bytes (zeroed, as `src` is, when `src` was
 * never set: an argument not given).  Not `*dst = *src`: a static bson_t
 * copied by value still reads its bytes through a pointer into `src`
 * itself (libbson keeps it there), which may be gone (a callee's local)
 * by the time the copy is read. */
static inline void mfi_view(bson_t *dst, const bson_t *src)
{
    if (src->len < 5)
        memset(dst, 0, sizeof *dst);
    else
        bson_init_static(dst, bson_get_data(src), src->len);
}

typedef struct mfi_find_explained {
    char ns[MF_MAX_NS_LEN + 1];
    bson_t filter, sort, proj;
    bool has_sort, has_proj; /* has_sort: a sort stage or an index order */
    bool return_key;
    int64_t skip, limit;
    mf_collator *coll;       /* the query's collation (one reference), or NULL */
    bool found;              /* the collection exists (else: an EOF plan) */
    bool sorted;             /* the index gives the sort */
    bson_t plan, exec;       /* the scan's stages, queryPlanner's and
                                executionStats' (empty without a collection) */
    mfi_plans_explained plans;
    int64_t n_returned;
    uint64_t keys, docs;
} mfi_find_explained;
int mfi_find_explain(mf_cmd_ctx *ctx, const bson_t *cmd, bool stats, mfi_find_explained *x,
                     mf_error *err);
void mfi_find_explained_free(mfi_find_explained *x);

/* explain of update, delete and findAndModify (cmd_update.c): the command
 * parsed and refused as the command itself would be (an update or delete
 * must hold one statement: InvalidLength), planned, and for executionStats
 * run without writing.  The stages above the scan are explain's. */
typedef struct mfi_write_explained {
    char ns[MF_MAX_NS_LEN + 1];
    bson_t filter, sort;     /* views into the command */
    bool has_sort;           /* findAndModify's sort */
    bool is_delete;          /* DELETE, else UPDATE */
    mf_collator *coll;       /* one reference, or NULL (simple) */
    bool found;              /* the collection exists (else: EOF) */
    bool sorted;             /* the index gives the sort */
    bson_t plan, exec;       /* the scan's stages, as mfi_find_explained's */
    mfi_plans_explained plans;
    uint64_t keys, docs;
    int64_t n_matched;       /* documents the statement would touch */
    int64_t n_modified;      /* ... of which the update would change */
    int64_t n_upserted;      /* 1: an upsert would insert */
    int64_t n_returned;      /* findAndModify: the document it would return */
} mfi_write_explained;
int mfi_write_explain(mf_cmd_ctx *ctx, const char *op, const bson_t *cmd, bool stats,
                      mfi_write_explained *x, mf_error *err);
void mfi_write_explained_free(mfi_write_explained *x);

/* find's and findAndModify's `sort: {$natural: +-1}`: not a field but the
 * collection's order, which mongod turns into a $natural hint.  With one,
 * `*hint` becomes {$natural: +-1} (static storage) and `*has_sort` false.
 * Errors, as mongod's (BadValue): a $natural sort or hint that is not a
 * lone number equal to 1 or -1; a $natural hint of the other direction;
 * an index hint beside a $natural sort. */
int mfi_natural_sort(bson_t *sort, bool *has_sort, bson_iter_t *hint, bool *has_hint,
                     mf_error *err);
/* A collation: only the simple one is supported (NotImplemented 238). */
/* Collations (collation.c).  mfi_collation_arg parses a command's
 * `collation` field (TypeMismatch unless a document, then
 * mf_collator_new's errors) into `*out` (NULL: simple).  An operation's
 * collation is the command's when it gives one, else the collection's
 * default (`create`'s, kept in the catalog options), else simple:
 * mf_cl_collation_for returns a new reference to it (`c` may be NULL). */
int mfi_collation_arg(const bson_iter_t *it, const char *cmd, const char *field,
                      mf_collator **out, mf_error *err);
/* Whether a `collation` field gives one: an empty document is none given
 * (mongod's collation.isEmpty()), so the collection's default applies; a
 * non-document is given (and refused by mfi_collation_arg). */
bool mfi_collation_given(const bson_iter_t *it);
/* Both steps for a command's `collation` element `arg` (NULL: absent):
 * parse it when given, then resolve against `ns`'s default. */
int mfi_collation_of_arg(mf_engine *e, const char *ns, const bson_iter_t *arg, const char *cmd,
                         mf_collator **out, mf_error *err);

/* mongod's "BSON field 'cmd.field' is the wrong type 'x', expected type 'y'"
 * TypeMismatch error. */
int mfi_type_error(mf_error *err, const char *cmd, const char *field,
                   const bson_iter_t *it, const char *expected);

/* changeStreamOptions.preAndPostImages.expireAfterSeconds (cmd_admin.c),
 * 0 when "off". */
int64_t mfi_pre_images_expire_after(mf_instance *inst);

/* ------------------------------------------------------ change_stream.c */

/* An aggregate whose pipeline begins with $changeStream, in a replica set. */
typedef struct mfi_change_stream_args {
    const bson_t *pipeline;
    const char *ns;            /* the cursor's: db.coll, or db.$cmd.aggregate */
    const char *coll;          /* NULL: {aggregate: 1} */
    int64_t batch_size;        /* -1: the default */
    int64_t deadline_us;
    const bson_t *let;         /* may be NULL */
    const mf_collator *collation; /* may be NULL */
} mfi_change_stream_args;

/* Whether `pipeline`'s first stage is $changeStream. */
bool mfi_change_stream_first(const bson_t *pipeline);
/* Open the stream and reply its first batch (mongod's option and
 * namespace errors first). */
int mfi_change_stream_open(mf_cmd_ctx *ctx, const mfi_change_stream_args *a, bson_t *reply,
                           mf_error *err);
/* Fill `b` with the stream's next events (b->pbrt set); *exhausted once
 * its invalidate is sent.  No lock held. */
int mfi_change_stream_fill(mfi_cursor *cur, mfi_batch *b, bool *exhausted, mf_error *err);
/* The label a change stream's getMore error `code` gets. */
void mfi_change_stream_label(mf_cmd_ctx *ctx, int code);

#endif /* MF_COMMAND_INT_H */
