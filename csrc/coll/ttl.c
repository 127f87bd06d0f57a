/*
 * ttl.c -- the TTL monitor's pass: the documents whose date at a TTL
 * index's path is older than its expireAfterSeconds are deleted through
 * the write path (a replica set logs each delete), in batches that each
 * hold the collection's lock once.  The thread that runs it every
 * ttlMonitorSleepSecs is the server's (command/cmd_index.c).  A document
 * a transaction holds is left to a later pass (as mongod's TTL delete
 * meets a WriteConflict), not taken from the transaction.
 */
#include "coll.h"

#include <stdlib.h>
#include <string.h>

#define TTL_BATCH 1000 /* documents deleted per hold of a collection's lock */

/* Delete up to TTL_BATCH expired documents of index `x` of `c` (exclusive
 * lock held).  Expired: a date at the index's path older than
 * expireAfterSeconds -- for an array, any (so the earliest) date. */
static int ttl_batch(mf_engine *e, mf_coll *c, mf_cl_indexes *ix, mf_index_desc *x, int64_t now,
                     uint64_t *deleted, bool *more, mf_lsn *lsn, mf_cl_log *lg, mf_error *err)
{
    bson_t filter = BSON_INITIALIZER, cond, and, part;
    BSON_APPEND_ARRAY_BEGIN(&filter, "$and", &and);
    BSON_APPEND_DOCUMENT_BEGIN(&and, "0", &part);
    BSON_APPEND_DOCUMENT_BEGIN(&part, x->paths[0], &cond);
    BSON_APPEND_DATE_TIME(&cond, "$lt", now - x->expire_after * 1000);
    bson_append_document_end(&part, &cond);
    bson_append_document_end(&and, &part);
    if (x->partial_spec)
        BSON_APPEND_DOCUMENT(&and, "1", x->partial_spec);
    bson_append_array_end(&filter, &and);
    mf_matcher *m = NULL;
    mf_scan *scan = NULL;
    uint64_t *rids = NULL;
    size_t n = 0;
    bool sorted;
    int rc = mf_matcher_parse(&filter, &m, err);
    if (rc == 0)
        rc = mf_cl_scan_new(NULL, c, ix, &filter, NULL, NULL, NULL, &scan, &sorted, err);
    if (rc == 0 && !(rids = malloc(TTL_BATCH * sizeof *rids)))
        rc = mf_error_oom(err);
    while (rc == 0 && n < TTL_BATCH) {
        mf_scan_row row;
        bool valid;
        if ((rc = mf_scan_next(scan, e, c, m, &row, &valid, err)) != 0 || !valid)
            break;
        rids[n++] = row.rid;
    }
    bool full = rc == 0 && n == TTL_BATCH;
    uint64_t before = *deleted;
    mf_scan_free(scan);
    /* Then the deletes: no scan position is held across them. */
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint8_t k[8];
        bool found;
        bson_t doc;
        mf_record_id_encode(rids[i], k);
        rc = mf_cl_record_doc(e, c, k, &doc, &found, err);
        if (rc || !found)
            continue;
        rc = mf_cl_write_doc_log(e, c, ix, rids[i], &doc, NULL, lsn, NULL, lg, err);
        if (rc == MF_WriteConflict && mf_cl_op_take_wait())
            rc = 0; /* a transaction holds it: a later pass */
        else if (rc == 0)
            (*deleted)++;
    }
    /* more to do while a full batch deleted something (not only held
     * documents again and again) */
    *more = full && *deleted > before;
    free(rids);
    mf_matcher_free(m);
    bson_destroy(&filter);
    return rc;
}

int mf_cl_ttl_pass(mf_cl_db *db, bool (*stop)(void *), void *arg, uint64_t *deleted,
                   mf_error *err)
{
    mf_engine *e = db->engine;
    mf_cl_log lg = {.oplog = db->oplog, .txns = db->txns}; /* a replica set logs the deletes */
    mf_cl_names l;
    *deleted = 0;
    int rc = mf_cl_names_get(e, &l, err);
    if (rc)
        return rc;
    mf_cl_op_begin(); /* a held document's write is refused, not taken */
    mf_cl_op_statement(true);
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        bool more = true;
        while (rc == 0 && more && !stop(arg)) {
            mf_lsn lsn = 0;
            more = false;
            mf_engine_catalog_lock(e, false);
            mf_coll *c = mf_engine_coll(e, l.ns[i]);
            if (c) {
                mf_cl_indexes ix;
                mf_coll_lock(c, true);
                rc = mf_cl_indexes_load(c, &ix, err);
                int64_t now = mf_clock_wall_ms();
                for (size_t j = 0; rc == 0 && j < ix.n; j++) {
                    mf_index_desc *x = &ix.v[j];
                    bool again = false;
                    if (x->expire_after < 0 || x->nfields != 1 || x->building)
                        continue;
                    rc = ttl_batch(e, c, &ix, x, now, deleted, &again, &lsn,
                                   db->oplog ? &lg : NULL, err);
                    more |= again;
                }
                if (rc == 0)
                    mf_cl_indexes_free(&ix);
                mf_coll_unlock(c);
            }
            mf_engine_catalog_unlock(e);
            if (rc == 0 && lsn)
                rc = mf_engine_sync(e, lsn, err);
        }
    }
    mf_cl_op_end();
    mf_cl_names_free(&l);
    return rc;
}

/* Whether `c` has a unique index besides _id_ (catalog lock held). */
