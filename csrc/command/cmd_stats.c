/*
 * cmd_stats.c -- collStats, dbStats and validate, and the per-collection
 * size that listDatabases reports (mf_cl_storage_bytes).
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
 * validate checks, for one collection and under its shared lock:
 *   1. each tree's structure (mf_btree_validate: page types, key order,
 *      separators, overflow runs and their checksums);
 *   2. each record: an 8-byte RecordId key and a value that is valid BSON
 *      (mf_bsonx_validate) -- otherwise a corrupt record;
 *   3. each valid record has its _id_ entry: key = keyenc(_id), value = its
 *      RecordId -- otherwise a missing index entry;
 *   4. each _id_ entry names a record whose _id encodes to the entry's key
 *      -- otherwise an extra index entry.
 * Checks 3 and 4 together make the record and index sets equal.  Every
 * other index gets check 1 and
 *   5. each valid record has each of its keys (query/index.c) in the index,
 *      naming its RecordId -- otherwise a missing index entry;
 *   6. the index holds no more entries than the records' keys -- the rest
 *      are extra index entries (counted, not listed: a key is not decoded
 *      back to a document).
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
static void append_number(bson_t *b, const char *key, int64_t v)
{
    if (v > -(1LL << 30) && v < (1LL << 30))
        BSON_APPEND_INT32(b, key, (int32_t)v);
    else
        BSON_APPEND_INT64(b, key, v);
}

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
    append_number(ss->out, name, (int64_t)(bytes / (uint64_t)ss->scale));
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
    return mfi_coll_storage_stats(ctx->inst->engine, ns, scale, reply, err);
}

int mfi_coll_storage_stats(mf_engine *e, const char *ns, int64_t scale, bson_t *reply,
                           mf_error *err)
{
    int rc;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c) {
        mf_engine_catalog_unlock(e);
        coll_stats_missing(reply, (int32_t)scale);
        return 0;
    }
    bson_t sizes = BSON_INITIALIZER, details = BSON_INITIALIZER;
    mf_cl_sizes s;
    size_t nidx;
    scaled_sizes ss = {&sizes, scale};
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
        append_number(reply, "size", (int64_t)(s.data_bytes / sc));
        append_number(reply, "count", (int64_t)s.count);
        if (s.count)
            BSON_APPEND_INT32(reply, "avgObjSize", (int32_t)(s.data_bytes / s.count));
        BSON_APPEND_INT32(reply, "numOrphanDocs", 0);
        append_number(reply, "storageSize", (int64_t)(s.storage_bytes / sc));
        BSON_APPEND_INT32(reply, "freeStorageSize", 0);
        BSON_APPEND_BOOL(reply, "capped", false);
        BSON_APPEND_INT32(reply, "nindexes", (int32_t)nidx);
        BSON_APPEND_DOCUMENT(reply, "indexDetails", &details);
        BSON_APPEND_ARRAY_BEGIN(reply, "indexBuilds", &builds);
        bson_append_array_end(reply, &builds);
        append_number(reply, "totalIndexSize", (int64_t)(s.index_bytes / sc));
        BSON_APPEND_DOCUMENT(reply, "indexSizes", &sizes);
        append_number(reply, "totalSize", (int64_t)((s.storage_bytes + s.index_bytes) / sc));
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

/* What one run of validate found. */
typedef struct vstate {
    mf_engine *e;
    mf_coll *c;
    mf_btree *records;
    mf_btree *id_index; /* NULL when the collection has none, or it is damaged */
    bool valid;
    int64_t nrecords, ninvalid, nmissing, nextra;
    bson_t errors, corrupt, missing, extra;
    uint32_t nerrors, ncorrupt, nmissing_out, nextra_out;
    mf_cl_indexes ix;    /* the parsed indexes (checks 5 and 6) */
    uint64_t *entries; /* per index: entries in its tree (check 1) */
    uint64_t *found;   /* per index: records' keys found in it (check 5) */
    bool *bad;         /* per index: inconsistent */
    mf_keyset ks;
    bool id_bad;       /* checks 3 or 4 found something */
    mf_deadline *dl; /* the command's maxTimeMS, counted per record and entry */
} vstate;

#define MAX_LISTED 1000 /* entries listed per array; the counts go on */

static void arr_append_utf8(bson_t *arr, uint32_t *n, const char *s)
{
    char key[16];
    const char *k;
    mf_uint32_to_key((*n)++, &k, key, sizeof key);
    bson_append_utf8(arr, k, -1, s, -1);
}

static void verror(vstate *v, const char *fmt, ...) MF_PRINTF(2, 3);
static void verror(vstate *v, const char *fmt, ...)
{
    char msg[MF_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    arr_append_utf8(&v->errors, &v->nerrors, msg);
    v->valid = false;
}

/* {indexName: "_id_", recordId, idKey: {_id}, indexKey: {_id}}, mongod's
 * shape of a missing index entry. */
static void note_missing(vstate *v, uint64_t rid, const bson_iter_t *id)
{
    v->nmissing++;
    v->id_bad = true;
    if (v->nmissing_out >= MAX_LISTED)
        return;
    char key[16];
    const char *k;
    bson_t ent, sub;
    mf_uint32_to_key(v->nmissing_out++, &k, key, sizeof key);
    bson_append_document_begin(&v->missing, k, -1, &ent);
    BSON_APPEND_UTF8(&ent, "indexName", ID_INDEX);
    BSON_APPEND_INT64(&ent, "recordId", (int64_t)rid);
    BSON_APPEND_DOCUMENT_BEGIN(&ent, "idKey", &sub);
    mf_bsonx_append_iter(&sub, "_id", 3, id);
    bson_append_document_end(&ent, &sub);
    BSON_APPEND_DOCUMENT_BEGIN(&ent, "indexKey", &sub);
    mf_bsonx_append_iter(&sub, "_id", 3, id);
    bson_append_document_end(&ent, &sub);
    bson_append_document_end(&v->missing, &ent);
}

/* {indexName, recordId, indexKey: {_id: <the encoded key>}}: the key's
 * bytes, since keys are not decoded back to values. */
static void note_extra(vstate *v, const char *index, int64_t rid, const uint8_t *k, size_t kl)
{
    v->id_bad = true;
    v->nextra++;
    if (v->nextra_out >= MAX_LISTED)
        return;
    char key[16];
    const char *ks;
    bson_t ent, sub;
    mf_uint32_to_key(v->nextra_out++, &ks, key, sizeof key);
    bson_append_document_begin(&v->extra, ks, -1, &ent);
    BSON_APPEND_UTF8(&ent, "indexName", index);
    BSON_APPEND_INT64(&ent, "recordId", rid);
    BSON_APPEND_DOCUMENT_BEGIN(&ent, "indexKey", &sub);
    bson_append_binary(&sub, "_id", 3, BSON_SUBTYPE_BINARY, k, (uint32_t)kl);
    bson_append_document_end(&ent, &sub);
    bson_append_document_end(&v->extra, &ent);
}

static void note_corrupt(vstate *v, int64_t rid)
{
    v->ninvalid++;
    if (v->ncorrupt >= MAX_LISTED)
        return;
    char key[16];
    const char *k;
    mf_uint32_to_key(v->ncorrupt++, &k, key, sizeof key);
    bson_append_int64(&v->corrupt, k, -1, rid);
}

/* The _id index's collation (its keys encode strings under it). */
static const mf_collator *id_collation(const vstate *v)
{
    for (size_t i = 0; i < v->ix.n; i++)
        if (v->ix.v[i].is_id)
            return v->ix.v[i].coll;
    return NULL;
}

/* Check 3 for one valid document: its _id_ entry exists and names `rid`. */
static int check_has_entry(vstate *v, uint64_t rid, const bson_t *doc, mf_error *err)
{
    bson_iter_t id;
    if (!bson_iter_init_find(&id, doc, "_id")) {
        verror(v, "Record %llu has no _id", (unsigned long long)rid);
        return 0;
    }
    mf_buf key = {0};
    if (mf_bsonx_key_append_coll(&key, &id, false, id_collation(v)) != 0)
        return mf_error_oom(err);
    bool found;
    const uint8_t *val;
    size_t vl;
    int rc = mf_btree_get(v->id_index, key.data, key.len, &found, &val, &vl, err);
    if (rc == 0 && !(found && vl == 8 && mf_record_id_decode(val) == rid))
        note_missing(v, rid, &id);
    mf_buf_free(&key);
    return rc;
}

/* Check 5 for one valid document and every index but _id_. */
static int check_keys(vstate *v, uint64_t rid, const bson_t *doc, mf_error *err)
{
    uint8_t r[8];
    mf_buf tk = {0};
    int rc = 0;
    mf_record_id_encode(rid, r);
    for (size_t i = 0; rc == 0 && i < v->ix.n; i++) {
        mf_index_desc *x = &v->ix.v[i];
        uint32_t mk;
        mf_error kerr;
        mf_btree *t = mf_engine_tree(v->e, x->tree);
        if (x->is_id || !t)
            continue;
        mf_keyset_clear(&v->ks);
        if (mf_index_keys(x, doc, &v->ks, &mk, &kerr) != 0) {
            verror(v, "Record %llu cannot be indexed by %s: %s", (unsigned long long)rid,
                   x->name, kerr.msg);
            v->bad[i] = true;
            continue;
        }
        for (size_t k = 0; rc == 0 && k < v->ks.n; k++) {
            bool found;
            const uint8_t *val;
            size_t vl;
            tk.len = 0;
            if (mf_buf_append(&tk, v->ks.keys[k].data, v->ks.keys[k].len) != 0 ||
                (!x->unique && mf_buf_append(&tk, r, 8) != 0)) {
                rc = mf_error_oom(err);
                break;
            }
            rc = mf_btree_get(t, tk.data, tk.len, &found, &val, &vl, err);
            if (rc == 0 && found && vl == 8 && mf_record_id_decode(val) == rid) {
                v->found[i]++;
            } else if (rc == 0) {
                v->bad[i] = true;
                v->nmissing++;
                if (v->nmissing_out < MAX_LISTED) {
                    char key[16];
                    const char *kp;
                    bson_t ent;
                    mf_uint32_to_key(v->nmissing_out++, &kp, key, sizeof key);
                    bson_append_document_begin(&v->missing, kp, -1, &ent);
                    BSON_APPEND_UTF8(&ent, "indexName", x->name);
                    BSON_APPEND_INT64(&ent, "recordId", (int64_t)rid);
                    bson_append_document_end(&v->missing, &ent);
                }
            }
        }
    }
    mf_buf_free(&tk);
    return rc;
}

/* Checks 2 and 3 over the record tree. */
static int scan_records(vstate *v, mf_error *err)
{
    mf_cursor cur;
    bool ok;
    mf_cursor_init(&cur, v->records);
    int rc = mf_cursor_first(&cur, &ok, err);
    while (rc == 0 && ok) {
        const uint8_t *k, *val;
        size_t kl, vl;
        mf_error derr;
        if ((rc = mf_deadline_check(v->dl, err)) != 0)
            break;
        mf_cursor_key(&cur, &k, &kl);
        mf_cursor_value(&cur, &val, &vl);
        v->nrecords++;
        if (kl != 8) {
            verror(v, "A record has a %zu-byte RecordId", kl);
        } else if (mf_bsonx_validate(val, vl, &derr) != 0) {
            uint64_t rid = mf_record_id_decode(k);
            mf_log(MF_LOG_WARNING, "STORAGE", 4835001, "conn",
                   "Document is not valid BSON: %s, recordId %llu: %s", mf_coll_name(v->c),
                   (unsigned long long)rid, derr.msg);
            note_corrupt(v, (int64_t)rid);
        } else if (v->id_index) {
            bson_t doc;
            bson_init_static(&doc, val, vl);
            rc = check_has_entry(v, mf_record_id_decode(k), &doc, err);
            if (rc == 0)
                rc = check_keys(v, mf_record_id_decode(k), &doc, err);
        }
        if (rc == 0)
            rc = mf_cursor_next(&cur, &ok, err);
    }
    return rc;
}

/* Check 4 over the _id_ index. */
static int scan_id_index(vstate *v, mf_error *err)
{
    mf_cursor cur;
    bool ok;
    mf_buf want = {0};
    mf_cursor_init(&cur, v->id_index);
    int rc = mf_cursor_first(&cur, &ok, err);
    while (rc == 0 && ok) {
        const uint8_t *k, *val, *doc;
        size_t kl, vl, dl;
        bool found = false;
        if ((rc = mf_deadline_check(v->dl, err)) != 0)
            break;
        mf_cursor_key(&cur, &k, &kl);
        mf_cursor_value(&cur, &val, &vl);
        int64_t rid = vl == 8 ? (int64_t)mf_record_id_decode(val) : -1;
        if (vl == 8)
            rc = mf_btree_get(v->records, val, 8, &found, &doc, &dl, err);
        bool matches = false;
        bson_t d;
        bson_iter_t id;
        mf_error derr;
        if (rc == 0 && found && mf_bsonx_validate(doc, dl, &derr) == 0 &&
            bson_init_static(&d, doc, dl) && bson_iter_init_find(&id, &d, "_id")) {
            want.len = 0;
            if (mf_bsonx_key_append_coll(&want, &id, false, id_collation(v)) != 0)
                rc = mf_error_oom(err);
            matches = want.len == kl && memcmp(want.data, k, kl) == 0;
        }
        if (rc == 0 && !matches)
            note_extra(v, ID_INDEX, rid, k, kl);
        if (rc == 0)
            rc = mf_cursor_next(&cur, &ok, err);
    }
    mf_buf_free(&want);
    return rc;
}

/* Check 1 on every index; fills keysPerIndex and indexDetails. */
static void check_indexes(vstate *v, bson_t *keys, bson_t *details)
{
    for (size_t i = 0; i < mf_coll_index_count(v->c); i++) {
        const mf_index_info *ix = mf_coll_index(v->c, i);
        mf_btree *t = mf_engine_tree(v->e, ix->tree);
        uint64_t n = 0;
        mf_error terr;
        bool ok = t && mf_btree_validate(t, &n, &terr) == 0;
        if (!t)
            mf_error_set(&terr, MF_DataCorruption, "the index's tree is missing");
        if (ok && strcmp(ix->name, ID_INDEX) == 0)
            v->id_index = t;
        if (v->entries && i < v->ix.n)
            v->entries[i] = n;
        append_number(keys, ix->name, (int64_t)n);
        bson_t d, errs;
        BSON_APPEND_DOCUMENT_BEGIN(details, ix->name, &d);
        BSON_APPEND_BOOL(&d, "valid", ok);
        if (!ok) {
            BSON_APPEND_ARRAY_BEGIN(&d, "errors", &errs);
            BSON_APPEND_UTF8(&errs, "0", terr.msg);
            bson_append_array_end(&d, &errs);
            verror(v, "Index %s is damaged: %s", ix->name, terr.msg);
        }
        bson_append_document_end(details, &d);
    }
}

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
        return mf_error_set(err, MF_CommandNotSupported, /* CommandNotSupported */
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
    if (rc)
        return rc;
    mf_engine *e = ctx->inst->engine;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c) {
        mf_engine_catalog_unlock(e);
        return mf_error_set(err, MF_NamespaceNotFound,
                            "Collection '%s' does not exist to validate.", ns);
    }
    vstate v = {.e = e, .c = c, .valid = true, .dl = &ctx->deadline};
    bson_t keys = BSON_INITIALIZER, details = BSON_INITIALIZER;
    bson_init(&v.errors);
    bson_init(&v.corrupt);
    bson_init(&v.missing);
    bson_init(&v.extra);

    /* A shared lock: writers wait, readers go on (validate only reads). */
    mf_coll_lock(c, false);
    rc = mf_cl_indexes_load(c, &v.ix, err);
    size_t nx = v.ix.n ? v.ix.n : 1;
    v.entries = calloc(nx, sizeof *v.entries);
    v.found = calloc(nx, sizeof *v.found);
    v.bad = calloc(nx, sizeof *v.bad);
    if (rc == 0 && (!v.entries || !v.found || !v.bad))
        rc = mf_error_oom(err);
    v.records = mf_engine_tree(e, mf_coll_records(c));
    uint64_t n;
    mf_error terr;
    bool records_ok = v.records && mf_btree_validate(v.records, &n, &terr) == 0;
    if (!v.records)
        verror(&v, "The record tree of %s is missing", ns);
    else if (!records_ok)
        verror(&v, "The record tree of %s is damaged: %s", ns, terr.msg);
    check_indexes(&v, &keys, &details);
    /* The cross checks walk the trees with cursors: only on trees whose
     * structure passed. */
    if (rc == 0 && records_ok)
        rc = scan_records(&v, err);
    if (rc == 0 && records_ok && v.id_index)
        rc = scan_id_index(&v, err);
    /* Check 6: entries no record accounts for. */
    for (size_t i = 0; rc == 0 && records_ok && i < v.ix.n; i++) {
        if (v.ix.v[i].is_id || v.entries[i] <= v.found[i])
            continue;
        v.nextra += (int64_t)(v.entries[i] - v.found[i]);
        v.bad[i] = true;
    }
    const uint8_t *ob;
    size_t olen;
    bson_t meta;
    bson_iter_t uit;
    bson_t uuid = BSON_INITIALIZER;
    mf_coll_options(c, &ob, &olen);
    if (bson_init_static(&meta, ob, olen) && bson_iter_init_find(&uit, &meta, "uuid"))
        mf_bsonx_append_iter(&uuid, "uuid", 4, &uit);
    size_t nidx = mf_coll_index_count(c);
    mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);

    if (rc == 0) {
        if (v.ninvalid)
            verror(&v, "Detected one or more invalid documents. See logs.");
        if (v.nmissing)
            verror(&v, "Detected %lld missing index entries.", (long long)v.nmissing);
        if (v.nextra)
            verror(&v, "Detected %lld extra index entries.", (long long)v.nextra);
        if (v.nmissing || v.nextra) {
            /* Mark each inconsistent index invalid in indexDetails (the
             * _id_ index when checks 3 and 4 found something). */
            bool id_bad = v.id_bad;
            bson_t fixed = BSON_INITIALIZER;
            bson_iter_t it;
            bson_iter_init(&it, &details);
            while (bson_iter_next(&it)) {
                const char *name = bson_iter_key(&it);
                bool bad = strcmp(name, ID_INDEX) == 0 ? id_bad : false;
                for (size_t i = 0; i < v.ix.n; i++)
                    if (!v.ix.v[i].is_id && strcmp(v.ix.v[i].name, name) == 0)
                        bad = v.bad[i];
                if (!bad) {
                    mf_bsonx_append_iter(&fixed, NULL, 0, &it);
                    continue;
                }
                char msg[512];
                bson_t d, errs;
                snprintf(msg, sizeof msg, "Index with name '%s' has inconsistencies.", name);
                BSON_APPEND_DOCUMENT_BEGIN(&fixed, name, &d);
                BSON_APPEND_BOOL(&d, "valid", false);
                BSON_APPEND_ARRAY_BEGIN(&d, "errors", &errs);
                BSON_APPEND_UTF8(&errs, "0", msg);
                bson_append_array_end(&d, &errs);
                bson_append_document_end(&fixed, &d);
            }
            bson_destroy(&details);
            bson_steal(&details, &fixed);
        }
        /* ValidateResults::appendToResultObj's order, uuid after ns. */
        bson_t empty;
        bson_t *out = reply;
        BSON_APPEND_UTF8(out, "ns", ns);
        bson_concat(out, &uuid);
        append_number(out, "nInvalidDocuments", v.ninvalid);
        BSON_APPEND_INT32(out, "nNonCompliantDocuments", 0);
        append_number(out, "nrecords", v.nrecords);
        BSON_APPEND_INT32(out, "nIndexes", (int32_t)nidx);
        BSON_APPEND_DOCUMENT(out, "keysPerIndex", &keys);
        BSON_APPEND_DOCUMENT(out, "indexDetails", &details);
        BSON_APPEND_BOOL(out, "valid", v.valid);
        BSON_APPEND_BOOL(out, "repaired", false);
        BSON_APPEND_ARRAY_BEGIN(out, "warnings", &empty);
        bson_append_array_end(out, &empty);
        BSON_APPEND_ARRAY(out, "errors", &v.errors);
        BSON_APPEND_ARRAY(out, "extraIndexEntries", &v.extra);
        BSON_APPEND_ARRAY(out, "missingIndexEntries", &v.missing);
        BSON_APPEND_ARRAY(out, "corruptRecords", &v.corrupt);
        if (!v.valid)
            BSON_APPEND_UTF8(out, "advice",
                             "A corrupt namespace has been detected. See "
                             "http://dochub.mongodb.org/core/data-recovery for recovery steps.");
    }
    bson_destroy(&uuid);
    bson_destroy(&keys);
    bson_destroy(&details);
    bson_destroy(&v.errors);
    bson_destroy(&v.corrupt);
    bson_destroy(&v.missing);
    bson_destroy(&v.extra);
    mf_cl_indexes_free(&v.ix);
    mf_keyset_free(&v.ks);
    free(v.entries);
    free(v.found);
    free(v.bad);
    return rc;
}
