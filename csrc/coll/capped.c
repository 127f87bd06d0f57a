/*
 * capped.c -- capped collections (issue 48, docs/capped.md): what one
 * holds, kept as it is written, and the removal of its oldest documents
 * after an insert, as mongod's cappedDeleteAsNeeded does.
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
 */
#include "coll.h"

#include <stdlib.h>
#include <string.h>
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
