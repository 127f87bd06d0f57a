/*
 * open.c -- opening and closing an instance: the storage engine, then every
 * part of the server in turn (the replica set, sessions, fail points, the
 * profiler, the cleanup of interrupted builds, the server's own
 * collections, the monitor thread), and the same in reverse at close.
 */
#include "command_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mf_instance_open(const mf_instance_config *cfg, mf_instance **out, mf_error *err)
{
    int lock_fd = -1;
    int rc = mf_os_dir_lock(cfg->dbpath ? cfg->dbpath : "", &lock_fd, err);
    if (rc != 0)
        return rc;
    mf_instance *inst = calloc(1, sizeof *inst);
    if (inst)
        inst->dbpath = strdup(cfg->dbpath);
    if (!inst || !inst->dbpath) {
        free(inst);
        mf_os_dir_unlock(lock_fd);
        return mf_error_oom(err);
    }
    inst->lock_fd = lock_fd;
    /* The storage engine: the newest checkpoint plus the log since. */
    mf_engine_options eopt = {.huge_pages = cfg->huge_pages, .faults = cfg->faults};
    rc = mf_engine_open(cfg->dbpath, &eopt, &inst->engine, err);
    if (rc != 0) {
        free(inst->dbpath);
        free(inst);
        mf_os_dir_unlock(lock_fd);
        return rc;
    }
    inst->max_connections = cfg->max_connections;
    inst->enable_test_commands = cfg->enable_test_commands;
    inst->auth = cfg->auth;
    inst->ttl_sleep_secs = cfg->ttl_monitor_sleep_secs > 0 ? cfg->ttl_monitor_sleep_secs : 60;
    inst->session_refresh_ms = cfg->session_refresh_ms > 0 ? cfg->session_refresh_ms : 300000;
    atomic_store(&inst->index_build_max_mb, MF_INDEX_BUILD_DEFAULT_MB);
    bson_init(&inst->cmdline_argv);
    bson_init(&inst->cmdline_parsed);
    if (cfg->cmdline_argv)
        bson_concat(&inst->cmdline_argv, cfg->cmdline_argv);
    if (cfg->cmdline_parsed)
        bson_concat(&inst->cmdline_parsed, cfg->cmdline_parsed);
    inst->request_stop = cfg->request_stop;
    inst->request_stop_arg = cfg->request_stop_arg;
    inst->start_wall_ms = mf_clock_wall_ms();
    inst->start_mono_us = mf_clock_mono_us();
    bson_oid_init(&inst->process_id, NULL);
    if (gethostname(inst->host, sizeof inst->host - 1) != 0)
        strcpy(inst->host, "localhost");
    pthread_mutex_init(&inst->mu, NULL);
    mfi_cursors_init(inst);
    mfi_agg_env_init(inst);
    /* Timed waits use the monotonic clock so a wall-clock step cannot
     * stretch or cut an awaitable hello. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&inst->cond, &ca);
    pthread_condattr_destroy(&ca);
    /* Indexes a crash left half built go; then the TTL monitor starts. */
    if ((rc = mfi_repl_open(inst, cfg->repl_set, err)) != 0 ||
        (rc = mfi_txn_table_open(inst, err)) != 0 ||
        (rc = mfi_sessions_open(inst, err)) != 0 || (rc = mfi_fail_points_open(inst, err)) != 0 ||
        (rc = mfi_profile_open(inst, err)) != 0 ||
        (rc = mf_cl_recover_builds(inst->engine, err)) != 0 || (rc = mfi_sysdb_open(inst, err)) != 0 ||
        (rc = mfi_ttl_start(inst, err)) != 0) {
        mf_instance_close(inst);
        return rc;
    }
    /* mongod's startup warning (22120) for a server without access
     * control */
    if (!inst->auth)
        mf_log_startup_warning("Access control is not enabled for the database. Read and "
                               "write access to data and configuration is unrestricted");
    *out = inst;
    return 0;
}

void mf_instance_close(mf_instance *inst)
{
    if (!inst)
        return;
    mf_error err;
    mf_instance_begin_shutdown(inst); /* wakes the TTL monitor to leave */
    mfi_ttl_stop(inst);
    /* A final checkpoint, so the next open replays nothing.  If it fails
     * the log still holds every acknowledged write. */
    if (mf_engine_close(inst->engine, &err) != 0)
        mf_log(MF_LOG_ERROR, "STORAGE", 22437, "shutdown", "closing the storage engine: %s",
               err.msg);
    mfi_cursors_destroy(inst);
    mfi_sessions_close(inst);
    mfi_fail_points_close(inst);
    mfi_profile_close(inst);
    mfi_txn_table_close(inst);
    mfi_repl_close(inst);
    mf_os_dir_unlock(inst->lock_fd);
    bson_destroy(&inst->cmdline_argv);
    bson_destroy(&inst->cmdline_parsed);
    pthread_cond_destroy(&inst->cond);
    pthread_mutex_destroy(&inst->mu);
    free(inst->dbpath);
    free(inst);
}
