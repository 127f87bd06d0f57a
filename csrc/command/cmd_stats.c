/*
 * cmd_stats.c -- collStats, dbStats and validate (its checks are
 * coll/validate.c's), and the per-collection size that listDatabases reports (mf_cl_storage_bytes).
 *
 * What the numbers mean here (mongod's names, this engine's layout; see
 * cmd_write.c for the trees of a collection):
 *   size / dataSize      sum of the stored documents' lengths
 *   count / objects      records in the record tree
 *   storageSize          bytes of the pages the record tree occupies
 *                        (leaves, branches and overflow runs, 4 KiB each)
 *   indexSizes[name]     bytes of the pages of that index's tree
 *   freeStorageSize      0: free pages belong to the whole file, not to a
 *                        collection (the pager's free extents)
 * Every number comes from walking the trees' pages (mf_engine_tree_measure):
 * O(pages of the collection) per request, under the collection's shared
 * lock.  Good enough for statistics on request; counters kept by the writers
 * would make it O(1) when that matters.
 *
 */
#include "command_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#define ID_INDEX "_id_"
#define NS_CAP 320

/* ---------------------------------------------------------------- helpers */

/* BSONObjBuilder::appendNumber(long long): int32 when |v| < 2^30, else int64,
 * which is how mongod's collStats and validate type their counts. */
/* The command's first value as a collection of `ctx->db`, into `ns`
 * (CommandHelpers::parseNsCollectionRequired's errors). */
static int coll_ns(mf_cmd_ctx *ctx, const bson_t *cmd, char *ns, size_t cap, mf_error *err)
{
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_error_set(err, MF_InvalidNamespace, "collection name has invalid type %s",
                            mf_bsonx_type_alias(bson_iter_type(&it)));
    const char *coll = bson_iter_utf8(&it, NULL);
    if (coll[0] == '\0')
        return mf_error_set(err, MF_InvalidNamespace, "Invalid namespace specified '%s.'",
                            ctx->db);
    snprintf(ns, cap, "%s.%s", ctx->db, coll);
    return 0;
}

/* A numeric argument the way IDL's safeInt/safeInt64 read it: any number
 * type, doubles truncated toward zero, clamped to [lo, hi].  `*present` is
 * false when the field is absent or null. */
static int safe_number_arg(const bson_t *cmd, const char *cmdname, const char *field,
                           int64_t lo, int64_t hi, bool *present, int64_t *out, mf_error *err)
{
    bson_iter_t it;
    *present = false;
    if (!bson_iter_init_find(&it, cmd, field) || BSON_ITER_HOLDS_NULL(&it))
        return 0;
    double d;
    switch (bson_iter_type(&it)) {
    case BSON_TYPE_INT32:
        d = bson_iter_int32(&it);
        break;
    case BSON_TYPE_INT64:
        d = (double)bson_iter_int64(&it);
        if (bson_iter_int64(&it) > lo && bson_iter_int64(&it) < hi) {
            *out = bson_iter_int64(&it);
            *present = true;
            return 0;
        }
        break;
    case BSON_TYPE_DOUBLE:
        d = bson_iter_double(&it);
        break;
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t dec;
        char s[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(&it, &dec);
        bson_decimal128_to_string(&dec, s);
        d = strtod(s, NULL);
        break;
    }
    default:
        /* mongod's IDL message, its odd closing quote included. */
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field '%s.%s' is the wrong type '%s', expected types "
                            "'[long, int, decimal, double']",
                            cmdname, field, mf_bsonx_type_alias(bson_iter_type(&it)));
    }
    if (isnan(d))
        d = 0;
    d = trunc(d);
    *out = d <= (double)lo ? lo : d >= (double)hi ? hi : (int64_t)d;
    *present = true;
    return 0;
}

static bool flag(const bson_t *cmd, const char *name)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, cmd, name) && bson_iter_as_bool(&it);
}

/* -------------------------------------------------------------- collStats */

/* indexSizes: {name: bytes / scale} for each index (mf_cl_measure). */
typedef struct scaled_sizes {
    bson_t *out;
    int64_t scale;
} scaled_sizes;

static void index_size(void *arg, const char *name, uint64_t bytes)
{
    scaled_sizes *ss = arg;
    mfi_append_number(ss->out, name, (int64_t)(bytes / (uint64_t)ss->scale));
}

/* What mongod 7.0 answers for a collection that does not exist: ok, zeros
 * (appendCollectionStorageStats swallows its NamespaceNotFound). */
static void coll_stats_missing(bson_t *reply, int32_t scale)
{
    bson_t empty;
    BSON_APPEND_INT32(reply, "size", 0);
    BSON_APPEND_INT32(reply, "count", 0);
    BSON_APPEND_INT32(reply, "numOrphanDocs", 0);
    BSON_APPEND_INT32(reply, "storageSize", 0);
    BSON_APPEND_INT32(reply, "totalSize", 0);
    BSON_APPEND_INT32(reply, "nindexes", 0);
    BSON_APPEND_INT32(reply, "totalIndexSize", 0);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "indexDetails", &empty);
    bson_append_document_end(reply, &empty);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "indexSizes", &empty);
    bson_append_document_end(reply, &empty);
    BSON_APPEND_INT32(reply, "scaleFactor", scale);
}

int mfi_cmd_coll_stats(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    char ns[NS_CAP];
    bool has_scale;
    int64_t scale = 1;
    int rc = coll_ns(ctx, cmd, ns, sizeof ns, err);
    if (rc == 0)
        rc = mfi_view_refuse(ctx->inst, ns, err);
    if (rc)
        return rc;
    rc = safe_number_arg(cmd, "collStats", "scale", INT32_MIN, INT32_MAX, &has_scale, &scale,
                         err);
    if (rc)
        return rc;
    if (!has_scale)
        scale = 1;
    if (scale < 1)
        return mf_error_set(err, 51024, "BSON field 'scale' value must be >= 1, actual value '%lld'",
                            (long long)scale);

    BSON_APPEND_UTF8(reply, "ns", ns);
    return mfi_coll_storage_stats(ctx->inst, ns, scale, reply, err);
}

int mfi_coll_storage_stats(mf_instance *inst, const char *ns, int64_t scale, bson_t *reply,
                           mf_error *err)
{
    mf_engine *e = inst->engine;
    int rc;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c || mfi_txn_hidden(inst, ns)) { /* (a transaction's until it ends) */
        mf_engine_catalog_unlock(e);
        coll_stats_missing(reply, (int32_t)scale);
        return 0;
    }
    bson_t sizes = BSON_INITIALIZER, details = BSON_INITIALIZER;
    mf_cl_sizes s;
    size_t nidx;
    scaled_sizes ss = {&sizes, scale};
    int64_t max_size = 0, max_docs = 0;
    bool capped = mf_cl_capped(c, &max_size, &max_docs);
    mf_coll_lock(c, false);
    rc = mf_cl_measure(e, c, &s, index_size, &ss, err);
    nidx = mf_coll_index_count(c);
    for (size_t i = 0; rc == 0 && i < nidx; i++) {
        /* mongod puts the storage engine's own statistics here; there are
         * none beyond indexSizes yet. */
        bson_t d;
        BSON_APPEND_DOCUMENT_BEGIN(&details, mf_coll_index(c, i)->name, &d);
        bson_append_document_end(&details, &d);
    }
    mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    if (rc == 0) {
        bson_t builds;
        uint64_t sc = (uint64_t)scale;
        mfi_append_number(reply, "size", (int64_t)(s.data_bytes / sc));
        mfi_append_number(reply, "count", (int64_t)s.count);
        if (s.count)
            BSON_APPEND_INT32(reply, "avgObjSize", (int32_t)(s.data_bytes / s.count));
        BSON_APPEND_INT32(reply, "numOrphanDocs", 0);
        mfi_append_number(reply, "storageSize", (int64_t)(s.storage_bytes / sc));
        BSON_APPEND_INT32(reply, "freeStorageSize", 0);
        BSON_APPEND_BOOL(reply, "capped", capped);
        if (capped) {
            mfi_append_number(reply, "max", max_docs);
            mfi_append_number(reply, "maxSize", max_size / (int64_t)scale);
        }
        BSON_APPEND_INT32(reply, "nindexes", (int32_t)nidx);
        BSON_APPEND_DOCUMENT(reply, "indexDetails", &details);
        BSON_APPEND_ARRAY_BEGIN(reply, "indexBuilds", &builds);
        bson_append_array_end(reply, &builds);
        mfi_append_number(reply, "totalIndexSize", (int64_t)(s.index_bytes / sc));
        BSON_APPEND_DOCUMENT(reply, "indexSizes", &sizes);
        mfi_append_number(reply, "totalSize", (int64_t)((s.storage_bytes + s.index_bytes) / sc));
        BSON_APPEND_INT32(reply, "scaleFactor", (int32_t)scale);
    }
    bson_destroy(&sizes);
    bson_destroy(&details);
    return rc;
}

/* ---------------------------------------------------------------- dbStats */

typedef struct db_list {
    const char *db;
    size_t dblen;
    mf_coll **v;
    size_t n, cap;
    bool oom;
} db_list;

static void collect(mf_coll *c, void *arg)
{
    db_list *l = arg;
    const char *name = mf_coll_name(c);
    if (strncmp(name, l->db, l->dblen) != 0 || name[l->dblen] != '.')
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        mf_coll **v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = c;
}

int mfi_cmd_db_stats(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    bool has_scale;
    int64_t scale = 1;
    int rc = safe_number_arg(cmd, "dbStats", "scale", INT64_MIN, INT64_MAX, &has_scale, &scale,
                             err);
    if (rc)
        return rc;
    if (!has_scale)
        scale = 1;
    if (scale <= 0 || scale > (1LL << 50))
        return mf_error_set(err, MF_BadValue,
                            "Scale factor must be greater than zero and less than or equal to 2^50");
    bool free_storage = flag(cmd, "freeStorage");

    mf_engine *e = ctx->inst->engine;
    db_list l = {.db = ctx->db, .dblen = strlen(ctx->db)};
    uint64_t objects = 0, data = 0, storage = 0, indexes = 0, index_bytes = 0;
    mf_engine_catalog_lock(e, false);
    mf_engine_coll_each(e, collect, &l);
    if (l.oom)
        rc = mf_error_oom(err);
    l.n = mfi_txn_unhidden(ctx->inst, l.v, l.n); /* less transactions' pending ones */
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        mf_cl_sizes s;
        mf_coll_lock(l.v[i], false);
        rc = mf_cl_measure(e, l.v[i], &s, NULL, NULL, err);
        indexes += mf_coll_index_count(l.v[i]);
        mf_coll_unlock(l.v[i]);
        objects += s.count;
        data += s.data_bytes;
        storage += s.storage_bytes;
        index_bytes += s.index_bytes;
    }
    mf_engine_catalog_unlock(e);
    free(l.v);
    if (rc)
        return rc;

    /* DatabaseImpl::getStats: counts as int64, sizes as doubles divided by
     * the scale (so they may have fractions). */
    double sc = (double)scale;
    BSON_APPEND_UTF8(reply, "db", ctx->db);
    BSON_APPEND_INT64(reply, "collections", (int64_t)l.n);
    BSON_APPEND_INT64(reply, "views", 0);
    BSON_APPEND_INT64(reply, "objects", (int64_t)objects);
    BSON_APPEND_DOUBLE(reply, "avgObjSize", objects ? (double)data / (double)objects : 0.0);
    BSON_APPEND_DOUBLE(reply, "dataSize", (double)data / sc);
    BSON_APPEND_DOUBLE(reply, "storageSize", (double)storage / sc);
    if (free_storage)
        BSON_APPEND_DOUBLE(reply, "freeStorageSize", 0.0);
    BSON_APPEND_INT64(reply, "indexes", (int64_t)indexes);
    BSON_APPEND_DOUBLE(reply, "indexSize", (double)index_bytes / sc);
    if (free_storage)
        BSON_APPEND_DOUBLE(reply, "indexFreeStorageSize", 0.0);
    BSON_APPEND_DOUBLE(reply, "totalSize", (double)(storage + index_bytes) / sc);
    if (free_storage)
        BSON_APPEND_DOUBLE(reply, "totalFreeStorageSize", 0.0);
    BSON_APPEND_INT64(reply, "scaleFactor", scale);
    /* The filesystem holding the dbpath; mongod reports zeros for a
     * database that does not exist, and -1 when the query fails. */
    double fs_used = 0, fs_total = 0;
    struct statvfs vfs;
    if (l.n > 0) {
        if (statvfs(ctx->inst->dbpath, &vfs) == 0) {
            double total = (double)vfs.f_blocks * (double)vfs.f_frsize;
            double avail = (double)vfs.f_bavail * (double)vfs.f_frsize;
            fs_used = (total - avail) / sc;
            fs_total = total / sc;
        } else {
            fs_used = fs_total = -1;
        }
    }
    BSON_APPEND_DOUBLE(reply, "fsUsedSize", fs_used);
    BSON_APPEND_DOUBLE(reply, "fsTotalSize", fs_total);
    return 0;
}

/* --------------------------------------------------------------- validate */

/* Refuse options this engine cannot honour, with mongod's errors where
 * mongod refuses them too. */
static int validate_options(const bson_t *cmd, mf_error *err)
{
    bool full = flag(cmd, "full"), background = flag(cmd, "background");
    if (background && full)
        return mf_error_set(err, MF_InvalidOptions,
                            "Running the validate command with both { background: true } and "
                            "{ full: true } is not supported.");
    if (background)
        return mf_error_set(err, MF_CommandNotSupported,
                            "Running the validate command with { background: true } is not "
                            "supported in standalone mode");
    if (flag(cmd, "repair"))
        return mf_error_set(err, MF_CommandNotSupported,
                            "validate option 'repair' is not supported by MultiforaDB yet");
    if (flag(cmd, "metadata") && (full || flag(cmd, "enforceFastCount") ||
                                  flag(cmd, "checkBSONConformance")))
        return mf_error_set(err, MF_InvalidOptions,
                            "Running the validate command with { metadata: true } is not "
                            "supported with any other options");
    return 0;
}

int mfi_cmd_validate(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    char ns[NS_CAP];
    int rc = coll_ns(ctx, cmd, ns, sizeof ns, err);
    if (rc == 0)
        rc = validate_options(cmd, err);
    if (rc == 0 && mfi_is_view(ctx->inst, ns))
        rc = mf_error_set(err, MF_CommandNotSupportedOnView, "Cannot validate a view");
    if (rc)
        return rc;
    return mf_cl_validate(ctx->inst->engine, ns, &ctx->deadline, reply, err);
}
