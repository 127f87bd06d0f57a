/*
 * capped.c -- capped collections (issue 48, docs/capped.md): what one
 * holds, kept as it is written, the removal of its oldest documents after
 * an insert, as mongod's cappedDeleteAsNeeded does, and the copies that
 * make one of another collection.
 *
 * A collection is capped when its options say {capped: true, size, max?}
 * (create's, checked by the command).  Its documents' bytes and number are
 * counted from the record tree the first time an insert needs them, then
 * kept current by every write through write.c (mf_cl_capped_wrote), under
 * the collection's exclusive lock.  After an insert, the oldest documents
 * (the lowest RecordIds: insertion order) are deleted, through the write
 * path, while the data is larger than `size` or there are more than `max`.
 * A replica set logs those deletes, as mongod 5.0+ replicates capped
 * deletes with delete entries of their own.
 *
 * The counts live in a table keyed by the engine and the record tree's id,
 * which no other collection of that engine ever takes (a rename keeps it):
 * one entry per capped collection written since the start, forgotten when
 * its server closes (mf_cl_db_destroy: another engine may then have the
 * same address).
 *
 * cloneCollectionAsCapped and convertToCapped (mongod's capped_utils.cpp)
 * make a new capped collection and insert the source's documents into it
 * through the write path, so the trim above keeps it to its size and a
 * replica set logs mongod's entries:
 *
 *   clone    create `to` {capped, size, max?, temp?, <source's options>}
 *            (mf_cl_create_held: a new uuid, the _id index only); insert
 *            the source's documents in natural order, past those at the
 *            start that could not fit anyway (copy_documents)
 *   convert  clone `ns` into "<db>.tmp<5>.convertToCapped.<coll>" with
 *            temp: true; clear temp; rename it onto `ns` with dropTarget
 *            (mf_cl_rename_held)
 *
 * Both hold the catalog lock exclusively from the first check to the last
 * write, as mongod holds the collections' exclusive locks: no write to the
 * source falls between its copy and the rename that drops it.  A crash
 * before the rename leaves the temporary collection, which the next open
 * drops (temp: true, mf_cl_recover_builds).
 */
#include "coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

typedef struct counts {
    const mf_engine *e;
    mf_tree_id tree;
    int64_t bytes, docs;
} counts;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static counts *table;
static size_t ntable, captable;

/* Inserts into capped collections so far, and their signal: what an
 * awaitData cursor waits on. */
static pthread_cond_t inserted = PTHREAD_COND_INITIALIZER;
static uint64_t ninserted;

uint64_t mf_cl_capped_inserts(void)
{
    pthread_mutex_lock(&mu);
    uint64_t n = ninserted;
    pthread_mutex_unlock(&mu);
    return n;
}

void mf_cl_capped_signal(void)
{
    pthread_mutex_lock(&mu);
    ninserted++;
    pthread_cond_broadcast(&inserted);
    pthread_mutex_unlock(&mu);
}

void mf_cl_capped_wait(uint64_t seen, int64_t deadline_us)
{
    int64_t now = mf_clock_mono_us();
    pthread_mutex_lock(&mu);
    while (ninserted == seen && now < deadline_us) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t left = deadline_us - now, ns = ts.tv_nsec + (left % 1000000) * 1000;
        ts.tv_sec += (time_t)(left / 1000000 + ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&inserted, &mu, &ts);
        now = mf_clock_mono_us();
    }
    pthread_mutex_unlock(&mu);
}

bool mf_cl_capped(const mf_coll *c, int64_t *size, int64_t *max)
{
    bson_t opts;
    bson_iter_t it;
    if (!mf_cl_options_of(c, &opts) || !bson_iter_init_find(&it, &opts, "capped") ||
        !bson_iter_as_bool(&it))
        return false;
    if (size)
        *size = bson_iter_init_find(&it, &opts, "size") ? bson_iter_as_int64(&it) : 0;
    if (max)
        *max = bson_iter_init_find(&it, &opts, "max") ? bson_iter_as_int64(&it) : 0;
    return true;
}

/* The entry of `e`'s `tree`, or NULL (mutex held). */
static counts *find(const mf_engine *e, mf_tree_id tree)
{
    for (size_t i = 0; i < ntable; i++)
        if (table[i].e == e && table[i].tree == tree)
            return &table[i];
    return NULL;
}

void mf_cl_capped_forget(const mf_engine *e)
{
    pthread_mutex_lock(&mu);
    size_t k = 0;
    for (size_t i = 0; i < ntable; i++)
        if (table[i].e != e)
            table[k++] = table[i];
    ntable = k;
    pthread_mutex_unlock(&mu);
}

void mf_cl_capped_wrote(const mf_engine *e, const mf_coll *c, const bson_t *old_doc,
                        const bson_t *new_doc)
{
    /* (the other collections' writes take no lock here) */
    if (!mf_cl_capped(c, NULL, NULL))
        return;
    pthread_mutex_lock(&mu);
    counts *k = find(e, mf_coll_records(c));
    if (k) {
        k->bytes += (new_doc ? (int64_t)new_doc->len : 0) - (old_doc ? (int64_t)old_doc->len : 0);
        k->docs += (new_doc != NULL) - (old_doc != NULL);
    }
    pthread_mutex_unlock(&mu);
}

/* `c`'s counts, counted from its tree when there are none yet (its
 * exclusive lock held). */
static int get_counts(mf_engine *e, mf_coll *c, int64_t *bytes, int64_t *docs, mf_error *err)
{
    pthread_mutex_lock(&mu);
    counts *k = find(e, mf_coll_records(c));
    if (k) {
        *bytes = k->bytes;
        *docs = k->docs;
    }
    pthread_mutex_unlock(&mu);
    if (k)
        return 0;
    mf_btree_usage u;
    int rc = mf_cl_doc_bytes(e, c, bytes, err);
    if (rc == 0)
        rc = mf_engine_tree_measure(e, mf_coll_records(c), &u, err);
    if (rc)
        return rc;
    *docs = (int64_t)u.entries;
    pthread_mutex_lock(&mu);
    if (ntable == captable) {
        size_t cap = captable ? captable * 2 : 8;
        counts *v = realloc(table, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&mu);
            return mf_error_oom(err);
        }
        table = v;
        captable = cap;
    }
    table[ntable++] = (counts){e, mf_coll_records(c), *bytes, *docs};
    pthread_mutex_unlock(&mu);
    return 0;
}

int mf_cl_capped_check(const mf_coll *c, const bson_t *doc, mf_error *err)
{
    int64_t size;
    if (mf_cl_capped(c, &size, NULL) && (int64_t)doc->len > size)
        return mf_error_set(err, MF_BadValue, "object to insert exceeds cappedMaxSize");
    return 0;
}

int mf_cl_capped_trim(mf_engine *e, mf_coll *c, mf_cl_indexes *ix, mf_lsn *lsn,
                      mf_cl_log *lg, mf_error *err)
{
    int64_t size, max, bytes, docs;
    if (!mf_cl_capped(c, &size, &max))
        return 0;
    mf_cl_capped_signal(); /* (an awaitData cursor looks once the lock is let go) */
    int rc = get_counts(e, c, &bytes, &docs, err);
    /* the deletes are no part of a retryable write's statement */
    mf_cl_log del;
    if (lg) {
        del = *lg;
        del.stmt = NULL;
    }
    while (rc == 0 && (bytes > size || (max > 0 && docs > max))) {
        mf_cursor cur;
        bool valid;
        const uint8_t *k;
        size_t kl;
        bson_t old;
        mf_cursor_init(&cur, mf_engine_tree(e, mf_coll_records(c)));
        if ((rc = mf_cursor_first(&cur, &valid, err)) != 0 || !valid)
            break;
        mf_cursor_key(&cur, &k, &kl);
        uint64_t rid = mf_record_id_decode(k);
        uint8_t key[8];
        bool found;
        mf_record_id_encode(rid, key);
        if ((rc = mf_cl_record_doc(e, c, key, &old, &found, err)) != 0 || !found)
            break;
        /* a copy: the write moves what `old` points into */
        bson_t *copy = bson_copy(&old);
        rc = mf_cl_write_doc_log(e, c, ix, rid, copy, NULL, lsn, NULL, lg ? &del : NULL, err);
        bson_destroy(copy);
        if (rc == 0)
            rc = get_counts(e, c, &bytes, &docs, err); /* (the write kept them) */
    }
    return rc;
}

/* ------------------------------- cloneCollectionAsCapped, convertToCapped */

/* As mongod's BSONObjBuilder::appendNumber: Int32 below 2^30, else Int64. */
static void append_number(bson_t *b, const char *key, int64_t v)
{
    if (v > -(1LL << 30) && v < (1LL << 30))
        BSON_APPEND_INT32(b, key, (int32_t)v);
    else
        BSON_APPEND_INT64(b, key, v);
}

/* Whether database `db` has a collection (catalog lock held). */
typedef struct db_probe {
    const char *db;
    size_t len;
    bool found;
} db_probe;

static void probe(mf_coll *c, void *arg)
{
    db_probe *p = arg;
    const char *ns = mf_coll_name(c);
    if (strncmp(ns, p->db, p->len) == 0 && ns[p->len] == '.')
        p->found = true;
}

static int check_db(mf_engine *e, const char *ns, mf_error *err)
{
    db_probe p = {.db = ns, .len = strcspn(ns, ".")};
    mf_engine_coll_each(e, probe, &p);
    return p.found ? 0
                   : mf_error_set(err, MF_NamespaceNotFound, "database %.*s not found",
                                  (int)p.len, ns);
}

/* The new collection's options: the source's, made capped at `size` --
 * CollectionOptions::appendBSON's order: capped, size, max (a capped
 * source's), temp, then the source's others (its collation, ...). */
static void clone_options(const mf_coll *src, int64_t size, bool temp, bson_t *out)
{
    bson_t opts;
    bson_iter_t it;
    int64_t max = 0;
    bson_init(out);
    BSON_APPEND_BOOL(out, "capped", true);
    append_number(out, "size", size);
    if (mf_cl_capped(src, NULL, &max) && max > 0)
        append_number(out, "max", max);
    if (temp)
        BSON_APPEND_BOOL(out, "temp", true);
    if (mf_cl_options_of(src, &opts) && bson_iter_init(&it, &opts))
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "capped") != 0 && strcmp(k, "size") != 0 && strcmp(k, "max") != 0 &&
                strcmp(k, "temp") != 0)
                bson_append_iter(out, k, -1, &it);
        }
}

/* Insert the documents of `src` into the new capped `dst` in natural
 * order, through the write path (each with its oplog entry, each followed
 * by the trim of the oldest past `size`).  As mongod's
 * cloneCollectionAsCapped, documents at the start that could not fit
 * anyway are skipped: while the source's data is larger than twice `size`
 * by `excess`, each skipped document takes 4 times its size off it.
 * `src` locked shared, `dst` exclusively. */
static int copy_documents(mf_engine *e, mf_coll *src, mf_coll *dst, int64_t size,
                          mf_cl_log *lg, mf_lsn *lsn, mf_error *err)
{
    int64_t excess = 0;
    uint64_t next_id;
    mf_cl_indexes ix = {0};
    int rc = mf_cl_doc_bytes(e, src, &excess, err);
    if (rc == 0)
        rc = mf_cl_next_record_id(e, dst, &next_id, err);
    if (rc == 0)
        rc = mf_cl_indexes_load(dst, &ix, err);
    excess -= 2 * size;
    mf_cursor cur;
    bool valid = false;
    mf_cursor_init(&cur, mf_engine_tree(e, mf_coll_records(src)));
    if (rc == 0)
        rc = mf_cursor_first(&cur, &valid, err);
    while (rc == 0 && valid) {
        const uint8_t *k, *v;
        size_t kl, vl;
        mf_cursor_key(&cur, &k, &kl);
        mf_cursor_value(&cur, &v, &vl);
        if (excess > 0) {
            excess -= 4 * (int64_t)vl;
            rc = mf_cursor_next(&cur, &valid, err);
            continue;
        }
        /* copies: the insert may move what the cursor points into, so the
         * cursor finds its place again by the key afterwards */
        uint8_t *key = malloc(kl), *val = malloc(vl);
        bson_t doc, stored;
        bson_iter_t id;
        mf_cl_dup dup = {0};
        if (!key || !val) {
            free(key);
            free(val);
            rc = mf_error_oom(err);
            break;
        }
        memcpy(key, k, kl);
        memcpy(val, v, vl);
        bson_init(&stored);
        if (!bson_init_static(&doc, val, vl))
            rc = mf_error_set(err, MF_DataCorruption, "collection %s: damaged record",
                              mf_coll_name(src));
        else
            rc = mf_cl_insert_doc(e, dst, &ix, &next_id, &doc, &stored, &id, lsn, &dup, lg,
                                  err);
        bson_destroy(&stored);
        mf_cl_dup_clear(&dup);
        free(val);
        if (rc == 0)
            rc = mf_cursor_seek(&cur, key, kl, false, &valid, err);
        if (rc == 0 && valid) {
            const uint8_t *at;
            size_t al;
            mf_cursor_key(&cur, &at, &al);
            if (al == kl && memcmp(at, key, kl) == 0)
                rc = mf_cursor_next(&cur, &valid, err);
        }
        free(key);
    }
    mf_cl_indexes_free(&ix);
    return rc;
}

/* cloneCollectionAsCapped's steps, catalog lock held exclusively. */
static int clone_held(mf_cl_db *db, mf_cl_log *lg, const char *from, const char *to,
                      int64_t size, bool temp, mf_lsn *lsn, mf_error *err)
{
    mf_engine *e = db->engine;
    mf_coll *src = mf_engine_coll(e, from);
    int rc = check_db(e, from, err);
    if (rc)
        return rc;
    if (!src)
        return mf_error_set(err, MF_NamespaceNotFound, "source collection %s does not exist",
                            from);
    if (mf_engine_coll(e, to))
        return mf_error_set(err, MF_NamespaceExists,
                            "cloneCollectionAsCapped failed - destination collection %s already "
                            "exists. source collection: %s",
                            to, from);
    /* creating it checks the size (CollectionOptions' checkAndAdjustCappedSize) */
    if (size < 0)
        return mf_error_set(err, MF_BadValue, "size has to be >= 0");
    if (size > (1LL << 50))
        return mf_error_set(err, MF_BadValue, "size cannot exceed 1 PB");
    bson_t opts;
    mf_collator *coll = NULL;
    if ((rc = mf_cl_default_collation(src, &coll, err)) != 0)
        return rc;
    clone_options(src, (size + 255) & ~(int64_t)255, temp, &opts); /* adjustCappedSize */
    /* a new collection, a new uuid: the conversion is not reversible */
    rc = mf_cl_create_held(e, lg, to, &opts, coll, true, err);
    mf_collator_unref(coll);
    bson_destroy(&opts);
    mf_coll *dst = rc == 0 ? mf_engine_coll(e, to) : NULL;
    if (rc == 0 && !dst)
        rc = mf_error_set(err, MF_InternalError, "collection %s vanished", to);
    if (rc)
        return rc;
    /* (no one else holds these: the catalog lock is ours alone) */
    mf_coll_lock(src, false);
    mf_coll_lock(dst, true);
    rc = copy_documents(e, src, dst, size, lg, lsn, err);
    mf_coll_unlock(dst);
    mf_coll_unlock(src);
    return rc;
}

int mf_cl_capped_clone(mf_cl_db *db, mf_cl_log *lg, const char *from, const char *to,
                       int64_t size, bool temp, mf_lsn *lsn, mf_error *err)
{
    mf_engine_catalog_lock(db->engine, true);
    int rc = clone_held(db, lg, from, to, size, temp, lsn, err);
    mf_engine_catalog_unlock(db->engine);
    return rc;
}

/* "<db>.tmp<5 random alphanumerics>.convertToCapped.<coll>" that no
 * collection has (makeUniqueCollectionName's "tmp%%%%%.convertToCapped."
 * model); catalog lock held. */
static int temp_name(mf_engine *e, const char *ns, char *out, size_t cap, mf_error *err)
{
    static const char chars[] =
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    size_t dl = strcspn(ns, ".");
    for (int tries = 0; tries < 100; tries++) {
        uint8_t r[5];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
            return mf_error_set(err, MF_InternalError, "no randomness for a collection name");
        char rnd[6];
        for (size_t i = 0; i < 5; i++)
            rnd[i] = chars[r[i] % (sizeof chars - 1)];
        rnd[5] = '\0';
        snprintf(out, cap, "%.*s.tmp%s.convertToCapped.%s", (int)dl, ns, rnd, ns + dl + 1);
        if (!mf_engine_coll(e, out))
            return 0;
    }
    return mf_error_set(err, MF_NamespaceExists,
                        "Cannot generate temporary collection namespace to convert %s to a "
                        "capped collection",
                        ns);
}

int mf_cl_capped_convert(mf_cl_db *db, mf_cl_log *lg, const char *ns, int64_t size,
                         mf_lsn *lsn, mf_error *err)
{
    mf_engine *e = db->engine;
    char tmp[512] = "";
    mf_engine_catalog_lock(e, true);
    int rc = temp_name(e, ns, tmp, sizeof tmp, err);
    if (rc == 0)
        rc = clone_held(db, lg, ns, tmp, size, true, lsn, err);
    /* then onto `ns`, dropping it (logged: renameCollection with dropTarget
     * its uuid, stayTemp false) -- no longer temporary first, so a crash
     * between the two leaves the new collection, never drops the renamed
     * one at the next open */
    mf_coll *c = rc == 0 ? mf_engine_coll(e, tmp) : NULL;
    if (c)
        rc = mf_cl_clear_temp(e, c, lsn, err);
    if (rc == 0)
        rc = mf_cl_rename_held(db, lg, tmp, ns, true, lsn, err);
    if (rc && tmp[0] && mf_engine_coll(e, tmp)) {
        /* a failed copy: the temporary collection (ours: its name was
         * free) goes at once; mongod's stays until its next start */
        mf_error derr;
        if (mf_cl_drop_held(db, lg, tmp, NULL, lsn, &derr) != 0)
            mf_log(MF_LOG_WARNING, "STORAGE", 20004, "temporary collection not dropped",
                   "%s stays until the next open: %s", tmp, derr.msg);
    }
    mf_engine_catalog_unlock(e);
    return rc;
}
