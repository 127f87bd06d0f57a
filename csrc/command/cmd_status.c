/*
 * cmd_status.c -- serverStatus and hostInfo: what the process and the
 * machine look like, read from /proc and uname.
 */
#include "command_int.h"

#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define C(x) ((int64_t)atomic_load_explicit(&(x), memory_order_relaxed))

/* Resident and virtual size of this process in MiB, from /proc/self/statm. */
static void proc_mem_mb(int64_t *resident, int64_t *virt)
{
    long pages_virt = 0, pages_res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages_virt, &pages_res) != 2)
            pages_virt = pages_res = 0;
        fclose(f);
    }
    long page = sysconf(_SC_PAGESIZE);
    *resident = (int64_t)pages_res * page / (1024 * 1024);
    *virt = (int64_t)pages_virt * page / (1024 * 1024);
}

/* serverStatus sections may be excluded with {section: 0}. */
static bool wanted(const bson_t *cmd, const char *section)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, cmd, section))
        return true;
    return bson_iter_as_bool(&it);
}

int mfi_cmd_server_status(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                          mf_error *err)
{
    (void)err;
    mf_instance *inst = ctx->inst;
    mf_counters *c = &inst->counters;
    int64_t up_us = mf_clock_mono_us() - inst->start_mono_us;
    bson_t d;

    BSON_APPEND_UTF8(reply, "host", inst->host);
    BSON_APPEND_UTF8(reply, "version", MF_VERSION);
    BSON_APPEND_UTF8(reply, "process", "multifora");
    BSON_APPEND_INT64(reply, "pid", (int64_t)getpid());
    BSON_APPEND_DOUBLE(reply, "uptime", (double)(up_us / 1000000));
    BSON_APPEND_INT64(reply, "uptimeMillis", up_us / 1000);
    BSON_APPEND_INT64(reply, "uptimeEstimate", up_us / 1000000);
    BSON_APPEND_DATE_TIME(reply, "localTime", mf_clock_wall_ms());

    if (wanted(cmd, "connections")) {
        int64_t cur = C(c->conn_current);
        BSON_APPEND_DOCUMENT_BEGIN(reply, "connections", &d);
        BSON_APPEND_INT32(&d, "current", (int32_t)cur);
        BSON_APPEND_INT32(&d, "available", (int32_t)(inst->max_connections - cur));
        BSON_APPEND_INT32(&d, "totalCreated", (int32_t)C(c->conn_total));
        BSON_APPEND_INT32(&d, "active", (int32_t)C(c->conn_active));
        bson_append_document_end(reply, &d);
    }
    if (wanted(cmd, "network")) {
        BSON_APPEND_DOCUMENT_BEGIN(reply, "network", &d);
        BSON_APPEND_INT64(&d, "bytesIn", C(c->bytes_in));
        BSON_APPEND_INT64(&d, "bytesOut", C(c->bytes_out));
        BSON_APPEND_INT64(&d, "numRequests", C(c->num_requests));
        bson_append_document_end(reply, &d);
    }
    if (wanted(cmd, "opcounters")) {
        BSON_APPEND_DOCUMENT_BEGIN(reply, "opcounters", &d);
        BSON_APPEND_INT64(&d, "insert", C(c->op_insert));
        BSON_APPEND_INT64(&d, "query", C(c->op_query));
        BSON_APPEND_INT64(&d, "update", C(c->op_update));
        BSON_APPEND_INT64(&d, "delete", C(c->op_delete));
        BSON_APPEND_INT64(&d, "getmore", C(c->op_getmore));
        BSON_APPEND_INT64(&d, "command", C(c->op_command));
        bson_append_document_end(reply, &d);
    }
    if (wanted(cmd, "mem")) {
        int64_t res, virt;
        proc_mem_mb(&res, &virt);
        BSON_APPEND_DOCUMENT_BEGIN(reply, "mem", &d);
        BSON_APPEND_INT32(&d, "bits", (int32_t)(sizeof(void *) * 8));
        BSON_APPEND_INT32(&d, "resident", (int32_t)res);
        BSON_APPEND_INT32(&d, "virtual", (int32_t)virt);
        BSON_APPEND_BOOL(&d, "supported", true);
        bson_append_document_end(reply, &d);
    }
    if (wanted(cmd, "metrics")) {
        /* Only the TTL monitor's counters, as mongod names them.  A pass
         * deletes every expired document it finds (in batches, without a
         * time target), so each pass is one sub-pass. */
        bson_t ttl;
        int64_t passes = C(inst->ttl_passes);
        BSON_APPEND_DOCUMENT_BEGIN(reply, "metrics", &d);
        BSON_APPEND_DOCUMENT_BEGIN(&d, "ttl", &ttl);
        BSON_APPEND_INT64(&ttl, "deletedDocuments", C(inst->ttl_deleted));
        BSON_APPEND_INT64(&ttl, "passes", passes);
        BSON_APPEND_INT64(&ttl, "subPasses", passes);
        bson_append_document_end(&d, &ttl);
        bson_append_document_end(reply, &d);
    }
    if (wanted(cmd, "storageEngine")) {
        BSON_APPEND_DOCUMENT_BEGIN(reply, "storageEngine", &d);
        BSON_APPEND_UTF8(&d, "name", "multifora");
        BSON_APPEND_BOOL(&d, "supportsCommittedReads", false);
        BSON_APPEND_BOOL(&d, "persistent", true);
        BSON_APPEND_BOOL(&d, "readOnly", mf_engine_failure(ctx->inst->engine, NULL, 0));
        bson_append_document_end(reply, &d);
    }
    /* The storage engine's own section, named after it as mongod names
     * "wiredTiger": its log's counters since the open (a transaction's
     * commit is one record and one sync: tests/test_transactions.py). */
    if (wanted(cmd, "multifora")) {
        mf_engine_stats st;
        bson_t log;
        mf_engine_get_stats(ctx->inst->engine, &st);
        BSON_APPEND_DOCUMENT_BEGIN(reply, "multifora", &d);
        BSON_APPEND_DOCUMENT_BEGIN(&d, "log", &log);
        BSON_APPEND_INT64(&log, "records", (int64_t)st.wal.appends);
        BSON_APPEND_INT64(&log, "commits", (int64_t)st.wal.commits);
        BSON_APPEND_INT64(&log, "syncs", (int64_t)st.wal.syncs);
        BSON_APPEND_INT64(&log, "bytes", (int64_t)st.wal.bytes_raw);
        BSON_APPEND_INT64(&log, "bytesStored", (int64_t)st.wal.bytes_stored);
        bson_append_document_end(&d, &log);
        BSON_APPEND_INT64(&d, "checkpoints", (int64_t)st.checkpoints);
        if (ctx->inst->cl.txns) {
            /* the versions snapshots read (coll/txn.c) */
            mf_cl_history h;
            bson_t hd;
            mf_cl_txns_history(ctx->inst->cl.txns, &h);
            BSON_APPEND_DOCUMENT_BEGIN(&d, "snapshotHistory", &hd);
            BSON_APPEND_INT64(&hd, "versions", (int64_t)h.versions);
            BSON_APPEND_INT64(&hd, "bytes", (int64_t)h.bytes);
            BSON_APPEND_INT64(&hd, "maxBytes", (int64_t)h.budget);
            BSON_APPEND_TIMESTAMP(&hd, "oldestTimestamp", (uint32_t)(h.oldest >> 32),
                                  (uint32_t)h.oldest);
            bson_append_document_end(&d, &hd);
        }
        bson_append_document_end(reply, &d);
    }
    return 0;
}

/* The first line of `path`, without its newline, or "" */
static void read_first_line(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(out, (int)cap, f))
        out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

/* PRETTY_NAME from /etc/os-release, or "Linux". */
static void os_name(char *out, size_t cap)
{
    char line[256];
    snprintf(out, cap, "Linux");
    FILE *f = fopen("/etc/os-release", "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "PRETTY_NAME=", 12) == 0) {
            char *v = line + 12;
            v[strcspn(v, "\n")] = '\0';
            if (*v == '"') {
                v++;
                v[strcspn(v, "\"")] = '\0';
            }
            snprintf(out, cap, "%s", v);
            break;
        }
    }
    fclose(f);
}

int mfi_cmd_host_info(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)cmd, (void)err;
    struct utsname u;
    char name[256], kernel[256];
    bson_t d;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int64_t mem_mb = (int64_t)pages * page / (1024 * 1024);

    if (uname(&u) != 0)
        memset(&u, 0, sizeof u);
    os_name(name, sizeof name);
    read_first_line("/proc/version", kernel, sizeof kernel);

    BSON_APPEND_DOCUMENT_BEGIN(reply, "system", &d);
    BSON_APPEND_DATE_TIME(&d, "currentTime", mf_clock_wall_ms());
    BSON_APPEND_UTF8(&d, "hostname", ctx->inst->host);
    BSON_APPEND_INT32(&d, "cpuAddrSize", (int32_t)(sizeof(void *) * 8));
    BSON_APPEND_INT64(&d, "memSizeMB", mem_mb);
    BSON_APPEND_INT64(&d, "memLimitMB", mem_mb);
    BSON_APPEND_INT32(&d, "numCores", (int32_t)sysconf(_SC_NPROCESSORS_ONLN));
    BSON_APPEND_UTF8(&d, "cpuArch", u.machine);
    BSON_APPEND_BOOL(&d, "numaEnabled", false);
    bson_append_document_end(reply, &d);

    BSON_APPEND_DOCUMENT_BEGIN(reply, "os", &d);
    BSON_APPEND_UTF8(&d, "type", u.sysname[0] ? u.sysname : "Linux");
    BSON_APPEND_UTF8(&d, "name", name);
    BSON_APPEND_UTF8(&d, "version", u.release);
    bson_append_document_end(reply, &d);

    BSON_APPEND_DOCUMENT_BEGIN(reply, "extra", &d);
    BSON_APPEND_UTF8(&d, "versionString", kernel);
    BSON_APPEND_UTF8(&d, "kernelVersion", u.release);
    BSON_APPEND_INT64(&d, "pageSize", (int64_t)page);
    BSON_APPEND_INT64(&d, "numPages", (int64_t)pages);
    BSON_APPEND_INT64(&d, "maxOpenFiles", (int64_t)sysconf(_SC_OPEN_MAX));
    bson_append_document_end(reply, &d);
    return 0;
}
