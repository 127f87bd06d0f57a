/*
 * command.h -- the command layer's contract: one dispatcher, BSON in and
 * BSON out, shared by the wire server and the in-process call.
 *
 * An mf_instance is one running database server as the commands see it: its
 * options, counters, start time and the hook that stops it.  An mf_client
 * is whoever sends commands: a wire connection, or the in-process caller.
 * The layer above (wire/) owns both and calls mf_command_run() for each
 * request; nothing here touches a socket.
 */
#ifndef MF_COMMAND_H
#define MF_COMMAND_H

#include "../bsonx/bsonx.h"
#include "../storage/pager.h"
#include "../util/util.h"

#include <bson/bson.h>
#include <pthread.h>
#include <stdatomic.h>

/* Limits advertised by hello and enforced by the wire and the commands. */
/* mongod's BSONObjMaxInternalSize: the largest document a message may carry
 * (a command, a reply, or a 16 MiB user document with room to spare). */
#define MF_MAX_BSON_INTERNAL_SIZE (MF_MAX_BSON_OBJECT_SIZE + 16 * 1024)
#define MF_MAX_MESSAGE_SIZE 48000000
#define MF_MAX_WRITE_BATCH_SIZE 100000
#define MF_MIN_WIRE_VERSION 0
#define MF_MAX_WIRE_VERSION 21
#define MF_SESSION_TIMEOUT_MINUTES 30
#define MF_VERSION "7.0.0"

/* Counters serverStatus reports.  Updated with relaxed atomics from any
 * thread; a reader may see them mid-update, as mongod's readers may. */
typedef struct mf_counters {
    atomic_uint_fast64_t op_insert, op_query, op_update, op_delete, op_getmore,
        op_command;
    atomic_uint_fast64_t conn_current, conn_total, conn_active;
    atomic_uint_fast64_t bytes_in, bytes_out, num_requests;
    atomic_uint_fast64_t cursors_timed_out;
} mf_counters;

typedef struct mf_instance mf_instance;

/* What the layer above tells the instance when it creates it. */
typedef struct mf_instance_config {
    const char *dbpath;
    int max_connections;
    bool enable_test_commands;
    /* Access control (mongod's --auth): every command checks the
     * connection's privileges (authz.c). */
    bool auth;
    int ttl_monitor_sleep_secs; /* the TTL monitor's period; 0: 60 */
    int session_refresh_ms;     /* logicalSessionRefreshMillis; 0: 300000 */
    mf_huge_pages huge_pages;   /* the data file's mapping (pager.h) */
    /* The fault table of the engine's files (storage/os.h), the caller's,
     * which must outlive the instance; NULL: the engine's own. */
    mf_os_faults *faults;
    /* The replica set this server is the one member (and primary) of
     * (repl.c); NULL or "": a standalone. */
    const char *repl_set;
    /* getCmdLineOpts: the argv and the parsed options, as the process was
     * started.  Copied; may be NULL (empty). */
    const bson_t *cmdline_argv;   /* array */
    const bson_t *cmdline_parsed; /* document */
    /* Called (from any thread) when the shutdown command asks the server to
     * stop.  Must not block; the stop happens elsewhere. */
    void (*request_stop)(void *arg);
    void *request_stop_arg;
} mf_instance_config;

/* Open an instance over `cfg->dbpath`: create the directory if missing,
 * lock it, and open the storage engine in it (recovering from the last
 * checkpoint and the log).  Returns 0 and `*out`, or an error code with `err` set
 * (MF_DBPathInUse when another server holds the directory).  The strings
 * and BSON in `cfg` are copied. */
int mf_instance_open(const mf_instance_config *cfg, mf_instance **out, mf_error *err);
/* Checkpoint and close the storage engine, release the directory, free the
 * instance. */
void mf_instance_close(mf_instance *inst);

mf_counters *mf_instance_counters(mf_instance *inst);

/* In a replica set: the address clients reach this server at, for the
 * set's hosts (the wire layer, once it listens).  A no-op on a standalone. */
void mf_instance_set_me(mf_instance *inst, const char *host);

/* Mark the instance as shutting down and wake every sleeper (awaitable
 * hello).  Idempotent. */
void mf_instance_begin_shutdown(mf_instance *inst);
bool mf_instance_is_shutting_down(mf_instance *inst);

/* A client: one wire connection or the in-process caller. */
typedef struct mf_client {
    int64_t id;             /* connectionId; 0 for the in-process caller */
    char remote[64];        /* "127.0.0.1:53412", "anonymous unix socket" */
    char local[64];         /* the listener's address */
    bool is_internal;       /* the in-process caller: no socket */
    bool has_hello;         /* a hello ran: client metadata is now fixed */
    bool exhaust_allowed;   /* this request set OP_MSG's exhaustAllowed */
    /* From the first hello's client metadata: client.application.name
     * ("" when none was sent), and whether the hello said internalClient
     * (another server).  The failCommand fail point filters on them. */
    char app_name[129];
    bool is_internal_client;
    /* Who the connection authenticated as, and its SASL conversation
     * (auth.c), or NULL: nobody yet.  Freed by mf_command_client_end. */
    struct mfi_auth *auth;
    /* A TLS connection's client certificate subject, as mongod prints it
     * ("CN=...,O=..."), when the certificate was verified; "" otherwise.
     * MONGODB-X509 authenticates it. */
    bool tls;
    char tls_subject[1024];
    /* Whether the client has hung up (the wire layer's; NULL for the
     * in-process caller): an awaitable hello stops waiting for it. */
    bool (*peer_gone)(struct mf_client *c);
} mf_client;

/* Release what a connection's client holds (its authentication), when the
 * connection ends. */
void mf_command_client_end(mf_client *c);

/* Outcome flags of a command beyond its reply. */
enum {
    MF_RUN_CLOSE = 1 << 0,   /* close the connection without replying */
    MF_RUN_EXHAUST = 1 << 1, /* the command may stream (awaitable hello, getMore) */
};

/* Run one command.  `cmd` must already be valid BSON (mf_bsonx_validate);
 * its first field names the command and its `$db` field the database.
 * `reply` must be an initialised, empty bson_t; on return it holds the whole
 * reply, `ok` included, success or not -- an error is a reply, never a
 * failure of this call.  `*out_flags` receives MF_RUN_* bits.  Never holds
 * the GIL; may block (awaitable hello waits up to maxAwaitTimeMS). */
void mf_command_run(mf_instance *inst, mf_client *client, const bson_t *cmd,
                    bson_t *reply, int *out_flags);

/* An error code for a reply with errmsg alone, no code or codeName, as
 * mongod's old-style commands fail (getLog with an unknown name). */
#define MF_ERRMSG_ONLY (-1)

/* Replace `reply` with {ok: 0, errmsg, code, codeName} from `err`. */
void mf_command_error_reply(bson_t *reply, const mf_error *err);

#endif /* MF_COMMAND_H */
