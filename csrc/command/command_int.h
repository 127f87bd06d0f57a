/*
 * command_int.h -- private to csrc/command: the instance's layout, the
 * command table's entry and the handler signature.
 */
#ifndef MF_COMMAND_INT_H
#define MF_COMMAND_INT_H

#include "command.h"
#include "../storage/storage.h"

struct mf_instance {
    char *dbpath;
    int lock_fd;
    mf_engine *engine; /* the data: opened with the instance, closed with it */
    int max_connections;
    bool enable_test_commands;
    bson_t cmdline_argv;
    bson_t cmdline_parsed;
    void (*request_stop)(void *arg);
    void *request_stop_arg;

    int64_t start_wall_ms;
    int64_t start_mono_us;
    bson_oid_t process_id; /* topologyVersion.processId */
    char host[256];        /* "hostname:port" as serverStatus reports it */

    mf_counters counters;

    pthread_mutex_t mu; /* guards is_shutting_down and the condition */
    pthread_cond_t cond;
    bool is_shutting_down;
};

/* What a handler sees of the request beyond the command document. */
typedef struct mf_cmd_ctx {
    mf_instance *inst;
    mf_client *client;
    const char *db;   /* the $db value */
    const char *name; /* the command name as sent */
    int flags;        /* MF_RUN_* bits the handler sets */
} mf_cmd_ctx;

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
};

typedef struct mf_cmd_def {
    const char *name;
    mf_cmd_fn fn;
    int flags;
    const char *help;
} mf_cmd_def;

/* The table, sorted by name (mfi_command_table() checks it in the tests). */
const mf_cmd_def *mfi_command_table(size_t *n);
const mf_cmd_def *mfi_command_find(const char *name);

/* Sleep up to `ms` milliseconds, or until shutdown begins; returns true if
 * it is shutting down. */
bool mfi_instance_sleep(mf_instance *inst, int64_t ms);

/* Handlers, by file. */
int mfi_cmd_hello(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_build_info(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_ping(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_get_parameter(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_get_cmd_line_opts(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_server_status(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_host_info(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_whatsmyuri(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_connection_status(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_list_commands(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_end_sessions(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_kill_all_sessions(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_get_log(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_shutdown(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_create(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_insert(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_count(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_drop(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_drop_database(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_list_collections(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_list_databases(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_rename_collection(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_coll_stats(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_db_stats(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_validate(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);

/* Bytes of the file collection `c` occupies: its record tree and every
 * index tree (cmd_stats.c).  The caller holds the catalog lock; this takes
 * the collection's shared lock.  Walks every page of the collection. */
int mfi_coll_storage_bytes(mf_engine *e, mf_coll *c, uint64_t *bytes, mf_error *err);

/* Helpers for reading arguments. */

/* True for the arguments every command accepts (lsid, $db, comment, ...). */
bool mfi_is_generic_arg(const char *name);

/* True if the element is a number (int32, int64, double, decimal). */
bool mfi_is_number(const bson_iter_t *it);
/* The element as int64 if it is a whole number in range; false otherwise. */
bool mfi_as_int64(const bson_iter_t *it, int64_t *out);
/* mongod's "BSON field 'cmd.field' is the wrong type 'x', expected type 'y'"
 * TypeMismatch error. */
int mfi_type_error(mf_error *err, const char *cmd, const char *field,
                   const bson_iter_t *it, const char *expected);

#endif /* MF_COMMAND_INT_H */
