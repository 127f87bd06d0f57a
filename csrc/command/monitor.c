/*
 * monitor.c -- the server's background thread: the unique-index check once
 * after open, then the TTL monitor's passes (coll/ttl.c) every
 * ttlMonitorSleepSecs and the logical sessions' refresh (sysdb.c) every
 * logicalSessionRefreshMillis.
 */
#include "command_int.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static bool shutting_down(void *arg)
{
    return mf_instance_is_shutting_down(arg);
}

int mfi_ttl_pass(mf_instance *inst, uint64_t *deleted, mf_error *err)
{
    int rc = mf_cl_ttl_pass(mfi_cl(inst), shutting_down, inst, deleted, err);
    /* change streams' pre-images whose oplog entries are gone */
    uint64_t images = 0;
    if (rc == 0 && inst->cl.oplog) {
        int64_t secs = mfi_pre_images_expire_after(inst); /* changeStreamOptions */
        rc = mf_cl_preimages_expire(mfi_cl(inst), secs ? mf_clock_wall_ms() - secs * 1000 : 0,
                                    &images, err);
    }
    atomic_fetch_add_explicit(&inst->ttl_passes, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&inst->ttl_deleted, *deleted, memory_order_relaxed);
    return rc;
}

/* Whether `c` has a unique index besides _id_ (catalog lock held). */
static bool has_unique(mf_coll *c)
{
    bool any = false;
    mf_coll_lock(c, false);
    for (size_t i = 0; !any && i < mf_coll_index_count(c); i++) {
        const mf_index_info *info = mf_coll_index(c, i);
        bson_t s;
        bson_iter_t u;
        any = strcmp(info->name, "_id_") != 0 && bson_init_static(&s, info->spec, info->spec_len) &&
              bson_iter_init_find(&u, &s, "unique") && bson_iter_as_bool(&u);
    }
    mf_coll_unlock(c);
    return any;
}

int mfi_unique_check(mf_instance *inst, uint64_t *damaged)
{
    mf_engine *e = inst->engine;
    mf_cl_names l;
    *damaged = 0;
    if (mf_cl_names_get(e, &l, NULL) != 0)
        return 0; /* out of memory: nothing checked */
    for (size_t i = 0; i < l.n && !mf_instance_is_shutting_down(inst); i++) {
        mf_engine_catalog_lock(e, false);
        mf_coll *c = mf_engine_coll(e, l.ns[i]);
        bool check = c && has_unique(c);
        mf_engine_catalog_unlock(e);
        if (!check)
            continue;
        /* validate's cross check: every record's keys in every index, and
         * no index entry without its record. */
        bson_t reply = BSON_INITIALIZER;
        mf_error err;
        bson_iter_t v;
        if (mf_cl_validate(e, l.ns[i], NULL, &reply, &err) == 0 &&
            bson_iter_init_find(&v, &reply, "valid") &&
            !bson_iter_as_bool(&v)) {
            char shown[2048];
            bson_iter_t errs;
            bson_t arr;
            shown[0] = 0;
            if (bson_iter_init_find(&errs, &reply, "errors") && BSON_ITER_HOLDS_ARRAY(&errs)) {
                uint32_t len;
                const uint8_t *data;
                bson_iter_array(&errs, &len, &data);
                if (bson_init_static(&arr, data, len))
                    mf_bsonx_to_string(&arr, shown, sizeof shown);
            }
            mf_log(MF_LOG_ERROR, "INDEX", 20002, "unique index check at open",
                   "%s has inconsistent indexes; run validate for details: %s", l.ns[i], shown);
            (*damaged)++;
        }
        bson_destroy(&reply);
    }
    mf_cl_names_free(&l);
    return 0;
}

static void *ttl_main(void *arg)
{
    mf_instance *inst = arg;
    /* First, once: the unique indexes are checked against their records,
     * in the background -- the database is open meanwhile, and damage is
     * reported, not fatal. */
    uint64_t damaged;
    mfi_unique_check(inst, &damaged);
    atomic_store_explicit(&inst->unique_damaged, damaged, memory_order_relaxed);
    atomic_store_explicit(&inst->unique_checked, 1, memory_order_release);
    /* The same thread refreshes config.system.sessions (sysdb.c) every
     * logicalSessionRefreshMillis: it sleeps until the nearer of the two. */
    int64_t next_ttl = mf_clock_mono_us() + (int64_t)inst->ttl_sleep_secs * 1000000;
    for (;;) {
        int64_t now = mf_clock_mono_us();
        int64_t next_refresh = atomic_load(&inst->sessions_refreshed_us) +
                               inst->session_refresh_ms * 1000;
        int64_t wake = next_ttl < next_refresh ? next_ttl : next_refresh;
        /* a replica set's transactions past their lifetime are aborted
         * within a second of it (mongod's reaper runs as often) */
        if (inst->cl.txns && wake > now + 1000000)
            wake = now + 1000000;
        if (mfi_instance_sleep(inst, wake > now ? (wake - now + 999) / 1000 : 0))
            break;
        mf_error err;
        now = mf_clock_mono_us();
        if (now >= next_ttl) {
            uint64_t deleted;
            next_ttl = now + (int64_t)inst->ttl_sleep_secs * 1000000;
            if (mfi_ttl_pass(inst, &deleted, &err) != 0)
                mf_log(MF_LOG_WARNING, "INDEX", 22480, "TTL monitor",
                       "a TTL pass failed: %s", err.msg);
            else if (deleted)
                mf_log(MF_LOG_INFO, "INDEX", 5479200, "Deleted expired documents using index",
                       "%llu documents", (unsigned long long)deleted);
        }
        mfi_txn_reap(inst);
        if (now >= atomic_load(&inst->sessions_refreshed_us) + inst->session_refresh_ms * 1000 &&
            mfi_sessions_refresh(inst, &err) != 0)
            mf_log(MF_LOG_WARNING, "CONTROL", 20714, "LogicalSessionCacheRefresh",
                   "Failed to refresh session cache: %s", err.msg);
    }
    return NULL;
}

int mfi_ttl_start(mf_instance *inst, mf_error *err)
{
    if (pthread_create(&inst->ttl_thread, NULL, ttl_main, inst) != 0)
        return mf_error_set(err, MF_InternalError, "cannot start the TTL monitor thread");
    inst->ttl_running = true;
    return 0;
}

void mfi_ttl_stop(mf_instance *inst)
{
    if (inst->ttl_running) {
        pthread_join(inst->ttl_thread, NULL);
        inst->ttl_running = false;
    }
}
