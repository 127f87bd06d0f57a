/* Cases for tree sizes (mf_btree_measure) and for the checks behind the
 * validate command: damage made directly in the pages or the trees, which
 * no client can make, must be reported. */
#include "test.h"
#include "cmdtest.h"
#include "../storage/btree.h"

#include <stdlib.h>

/* ------------------------------------------------------------ measure */

static mf_pager *open_pager(const char *dir, mf_btree *t, mf_error *err)
{
    char path[512];
    uint8_t user[MF_META_USER_SIZE];
    uint64_t gen;
    mf_pager *pg = NULL;
    mf_pager_options opt = {.reserve_bytes = (size_t)4 << 30};
    snprintf(path, sizeof path, "%s/data.mf", dir);
    if (mf_pager_open(path, &opt, &pg, user, &gen, err) != 0)
        return NULL;
    t->pg = pg;
    t->root = 0;
    return pg;
}

MFT_CASE(measure, "/storage/btree/measure_counts_pages_runs_and_bytes")
{
    mf_error err;
    mf_btree t = {0};
    mf_btree_usage u;
    mf_pager *pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg);
    CHECK_INT(mf_btree_measure(&t, &u, &err), 0);
    CHECK_INT(mf_btree_usage_bytes(&u), 0); /* the empty tree owns nothing */
    CHECK_INT(u.entries, 0);

    static uint8_t val[9000];
    memset(val, 'v', sizeof val);
    uint64_t want_values = 0, want_keys = 0, want_runs = 0, want_run_pages = 0;
    for (int i = 0; i < 2000; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "%06d", i);
        /* Every 100th value is long: an overflow run of 3 pages. */
        size_t vl = i % 100 == 0 ? sizeof val : (size_t)(i % 70);
        bool existed;
        CHECK_INT(mf_btree_put(&t, (uint8_t *)k, (size_t)kl, val, vl, false, &existed, &err), 0);
        want_keys += (uint64_t)kl;
        want_values += vl;
        if (i % 100 == 0) {
            want_runs++;
            want_run_pages += 3;
        }
    }
    CHECK_INT(mf_btree_measure(&t, &u, &err), 0);
    CHECK_INT(u.entries, 2000);
    CHECK_INT(u.key_bytes, want_keys);
    CHECK_INT(u.value_bytes, want_values);
    CHECK_INT(u.overflow_runs, want_runs);
    CHECK_INT(u.overflow_pages, want_run_pages);
    CHECK(u.leaf_pages > 1 && u.branch_pages >= 1);

    /* Every page it counts is the tree's: dropping the tree (no checkpoint
     * since, so each page is reusable at once) frees exactly that many. */
    mf_pager_stats before, after;
    mf_pager_get_stats(pg, &before);
    CHECK_INT(mf_btree_drop(&t, &err), 0);
    mf_pager_get_stats(pg, &after);
    CHECK_INT(after.free_pages - before.free_pages,
              u.leaf_pages + u.branch_pages + u.overflow_pages);
    CHECK_INT(mf_btree_measure(&t, &u, &err), 0);
    CHECK_INT(mf_btree_usage_bytes(&u), 0);
    mf_pager_close(pg);
}

MFT_CASE(validate_order, "/storage/btree/validate_detects_keys_out_of_order")
{
    mf_error err;
    mf_btree t = {0};
    mf_pager *pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg);
    for (int i = 0; i < 20; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "k%03d", i);
        bool existed;
        CHECK_INT(mf_btree_put(&t, (uint8_t *)k, (size_t)kl, (uint8_t *)k, (size_t)kl, false,
                               &existed, &err), 0);
    }
    uint64_t n;
    CHECK_INT(mf_btree_validate(&t, &n, &err), 0);
    CHECK_INT(n, 20);
    /* Twenty small keys fit in the root leaf.  Swap its first two slots
     * (the slot array starts at byte 48, btree.c's format): the page's
     * checksum is only written at a checkpoint, so only the order check can
     * see this. */
    uint8_t *p = mf_pager_page(pg, t.root, &err);
    CHECK(p && mf_page_type(p) == MF_PAGE_LEAF);
    uint8_t s0[2];
    memcpy(s0, p + 48, 2);
    memcpy(p + 48, p + 50, 2);
    memcpy(p + 50, s0, 2);
    CHECK_INT(mf_btree_validate(&t, &n, &err), MF_DataCorruption);
    CHECK(strstr(err.msg, "keys out of order") != NULL);
    mf_pager_close(pg);
}

/* ----------------------------------------------------------- validate */

static mf_instance *open_instance(void)
{
    return mft_instance_open(false);
}

/* Run `cmd` (consumed) and return the reply. */
static bson_t *run(mf_instance *inst, bson_t *cmd)
{
    mf_client client = {.id = 1};
    bson_t *reply = bson_new();
    int f = 0;
    mf_command_run(inst, &client, cmd, reply, &f);
    bson_destroy(cmd);
    return reply;
}

static int64_t reply_int(const bson_t *r, const char *path)
{
    bson_iter_t it, sub;
    if (!bson_iter_init(&it, r) || !bson_iter_find_descendant(&it, path, &sub))
        return -999;
    return bson_iter_as_int64(&sub);
}

static bool reply_bool(const bson_t *r, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, r, key) && bson_iter_as_bool(&it);
}

/* The number of elements of the array `key`, or -1. */
static int reply_len(const bson_t *r, const char *key)
{
    bson_iter_t it, a;
    if (!bson_iter_init_find(&it, r, key) || !BSON_ITER_HOLDS_ARRAY(&it))
        return -1;
    int n = 0;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a))
        n++;
    return n;
}

/* Whether the array `key` holds the string `s`. */
static bool reply_has_str(const bson_t *r, const char *key, const char *s)
{
    bson_iter_t it, a;
    if (!bson_iter_init_find(&it, r, key) || !BSON_ITER_HOLDS_ARRAY(&it))
        return false;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a))
        if (BSON_ITER_HOLDS_UTF8(&a) && strcmp(bson_iter_utf8(&a, NULL), s) == 0)
            return true;
    return false;
}

/* Apply one put (val != NULL) or delete to the tree of `c` named by
 * `index` (NULL: the record tree), as a bug in a writer would. */
static int poke(mf_instance *inst, const char *index, const uint8_t *key, size_t klen,
                const uint8_t *val, size_t vlen)
{
    mf_engine *e = inst->engine;
    mf_error err;
    mf_lsn lsn;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, "db.c");
    mf_tree_id tree = c ? mf_coll_records(c) : 0;
    for (size_t i = 0; c && index && i < mf_coll_index_count(c); i++)
        if (strcmp(mf_coll_index(c, i)->name, index) == 0)
            tree = mf_coll_index(c, i)->tree;
    mf_op op = {.kind = val ? MF_OP_PUT : MF_OP_DELETE, .tree = tree, .key = key, .klen = klen,
                .val = val, .vlen = vlen};
    int rc = -1;
    if (c) {
        mf_coll_lock(c, true);
        rc = mf_engine_write(e, &op, 1, &lsn, &err);
        mf_coll_unlock(c);
    }
    mf_engine_catalog_unlock(e);
    return rc == 0 ? mf_engine_sync(e, lsn, &err) : rc;
}

/* The _id_ key of {_id: n}. */
static void id_key(int32_t n, mf_buf *out)
{
    bson_t *d = BCON_NEW("_id", BCON_INT32(n));
    bson_iter_t it;
    bson_iter_init_find(&it, d, "_id");
    out->len = 0;
    mf_bsonx_key_append(out, &it, false);
    bson_destroy(d);
}

static bson_t *validate(mf_instance *inst)
{
    return run(inst, BCON_NEW("validate", "c", "full", BCON_BOOL(true), "$db", "db"));
}

MFT_CASE(validate_cross, "/command/validate/record_and_index_cross_check")
{
    mf_instance *inst = open_instance();
    CHECK(inst);
    bson_t *r = run(inst, BCON_NEW("insert", "c", "documents", "[",
                                   "{", "_id", BCON_INT32(1), "}", "{", "_id", BCON_INT32(2), "}",
                                   "{", "_id", BCON_INT32(3), "}", "{", "_id", BCON_INT32(4), "}",
                                   "]", "$db", "db"));
    CHECK_INT(reply_int(r, "n"), 4);
    bson_destroy(r);

    r = validate(inst);
    CHECK(reply_bool(r, "valid"));
    CHECK_INT(reply_int(r, "nrecords"), 4);
    CHECK_INT(reply_int(r, "keysPerIndex._id_"), 4);
    CHECK_INT(reply_len(r, "errors"), 0);
    CHECK(!bson_has_field(r, "advice"));
    bson_destroy(r);

    /* Lose the index entry of _id 3 (RecordId 3). */
    mf_buf key = {0};
    id_key(3, &key);
    CHECK_INT(poke(inst, "_id_", key.data, key.len, NULL, 0), 0);
    r = validate(inst);
    CHECK(!reply_bool(r, "valid"));
    CHECK_INT(reply_int(r, "keysPerIndex._id_"), 3);
    CHECK_INT(reply_len(r, "missingIndexEntries"), 1);
    CHECK_INT(reply_int(r, "missingIndexEntries.0.recordId"), 3);
    CHECK_INT(reply_int(r, "missingIndexEntries.0.idKey._id"), 3);
    CHECK_INT(reply_len(r, "extraIndexEntries"), 0);
    CHECK(reply_has_str(r, "errors", "Detected 1 missing index entries."));
    CHECK(!reply_bool(r, "indexDetails._id_.valid"));
    CHECK(bson_has_field(r, "advice"));
    bson_destroy(r);

    /* Put it back pointing at the wrong record: missing for record 3 and
     * extra (its key does not match record 2's _id). */
    uint8_t rid2[8] = {0, 0, 0, 0, 0, 0, 0, 2}, rid3[8] = {0, 0, 0, 0, 0, 0, 0, 3};
    CHECK_INT(poke(inst, "_id_", key.data, key.len, rid2, 8), 0);
    r = validate(inst);
    CHECK(!reply_bool(r, "valid"));
    CHECK_INT(reply_len(r, "missingIndexEntries"), 1);
    CHECK_INT(reply_len(r, "extraIndexEntries"), 1);
    CHECK_INT(reply_int(r, "extraIndexEntries.0.recordId"), 2);
    bson_destroy(r);

    /* Repair it, then add an entry for a record that does not exist. */
    CHECK_INT(poke(inst, "_id_", key.data, key.len, rid3, 8), 0);
    r = validate(inst);
    CHECK(reply_bool(r, "valid"));
    bson_destroy(r);
    uint8_t rid99[8] = {0, 0, 0, 0, 0, 0, 0, 99};
    id_key(99, &key);
    CHECK_INT(poke(inst, "_id_", key.data, key.len, rid99, 8), 0);
    r = validate(inst);
    CHECK(!reply_bool(r, "valid"));
    CHECK_INT(reply_int(r, "keysPerIndex._id_"), 5);
    CHECK_INT(reply_int(r, "nrecords"), 4);
    CHECK_INT(reply_len(r, "extraIndexEntries"), 1);
    CHECK_INT(reply_int(r, "extraIndexEntries.0.recordId"), 99);
    CHECK(reply_has_str(r, "errors", "Detected 1 extra index entries."));
    CHECK_INT(poke(inst, "_id_", key.data, key.len, NULL, 0), 0);
    bson_destroy(r);
    mf_buf_free(&key);

    /* A record whose bytes are not BSON: a corrupt record. */
    uint8_t rid7[8] = {0, 0, 0, 0, 0, 0, 0, 7};
    const uint8_t junk[] = {9, 0, 0, 0, 0x10, 'a', 0, 1, 0}; /* int32 cut short */
    CHECK_INT(poke(inst, NULL, rid7, 8, junk, sizeof junk), 0);
    r = validate(inst);
    CHECK(!reply_bool(r, "valid"));
    CHECK_INT(reply_int(r, "nInvalidDocuments"), 1);
    CHECK_INT(reply_len(r, "corruptRecords"), 1);
    CHECK_INT(reply_int(r, "corruptRecords.0"), 7);
    CHECK_INT(reply_len(r, "missingIndexEntries"), 0);
    bson_destroy(r);
    mf_instance_close(inst);
}

MFT_CASE(coll_stats_sizes, "/command/collStats/sizes_match_the_trees")
{
    mf_instance *inst = open_instance();
    CHECK(inst);
    bson_t *r = run(inst, BCON_NEW("insert", "c", "documents", "[",
                                   "{", "_id", BCON_INT32(1), "s", "abc", "}", "]", "$db", "db"));
    bson_destroy(r);
    r = run(inst, BCON_NEW("collStats", "c", "$db", "db"));
    /* {_id: 1, s: "abc"}: 4 + (1+4+4) + (1+2+4+4) + 1 = 25 bytes. */
    CHECK_INT(reply_int(r, "size"), 25);
    CHECK_INT(reply_int(r, "count"), 1);
    CHECK_INT(reply_int(r, "storageSize"), 4096); /* one leaf */
    CHECK_INT(reply_int(r, "indexSizes._id_"), 4096);
    CHECK_INT(reply_int(r, "totalSize"), 8192);
    bson_destroy(r);
    mf_instance_close(inst);
}

/* A unique index that lost an entry (damage) is found by the check that
 * runs after open, the database opens regardless, and validate names the
 * index; writes go on. */
MFT_CASE(unique_check_at_open, "/command/indexes/unique_damage_reported_at_open")
{
    mf_instance_config cfg = {.dbpath = mft_tmpdir(), .max_connections = 10};
    mf_instance *inst = NULL;
    mf_error err;
    CHECK_INT(mf_instance_open(&cfg, &inst, &err), 0);
    bson_t *r = run(inst, BCON_NEW("insert", "c", "documents", "[",
                                   "{", "_id", BCON_INT32(1), "a", BCON_INT32(10), "}",
                                   "{", "_id", BCON_INT32(2), "a", BCON_INT32(20), "}", "]",
                                   "$db", "db"));
    CHECK_INT(reply_int(r, "n"), 2);
    bson_destroy(r);
    r = run(inst, BCON_NEW("createIndexes", "c", "indexes", "[", "{", "key", "{", "a",
                           BCON_INT32(1), "}", "name", "a_1", "unique", BCON_BOOL(true), "}", "]",
                           "$db", "db"));
    CHECK_INT(reply_int(r, "numIndexesAfter"), 2);
    bson_destroy(r);
    /* Lose a_1's entry of {a: 20}: a second {a: 20} would now pass. */
    bson_t *d = BCON_NEW("a", BCON_INT32(20));
    bson_iter_t it;
    mf_buf key = {0};
    bson_iter_init_find(&it, d, "a");
    mf_bsonx_key_append(&key, &it, false);
    CHECK_INT(poke(inst, "a_1", key.data, key.len, NULL, 0), 0);
    mf_buf_free(&key);
    bson_destroy(d);
    mf_instance_close(inst);

    inst = NULL;
    CHECK_INT(mf_instance_open(&cfg, &inst, &err), 0); /* it opens */
    for (int i = 0; i < 500 && !atomic_load(&inst->unique_checked); i++)
        usleep(10000);
    CHECK_INT((int64_t)atomic_load(&inst->unique_checked), 1);
    CHECK_INT((int64_t)atomic_load(&inst->unique_damaged), 1);
    r = validate(inst);
    CHECK(!reply_bool(r, "valid"));
    CHECK_INT(reply_int(r, "indexDetails.a_1.valid"), 0);
    CHECK_INT(reply_int(r, "indexDetails._id_.valid"), 1);
    CHECK(reply_has_str(r, "errors", "Detected 1 missing index entries."));
    CHECK_INT(reply_len(r, "errors"), 1);
    bson_destroy(r);
    r = run(inst, BCON_NEW("insert", "c", "documents", "[", "{", "_id", BCON_INT32(3), "}", "]",
                           "$db", "db"));
    CHECK_INT(reply_int(r, "n"), 1);
    bson_destroy(r);
    mf_instance_close(inst);
}

/* Insert documents [from, to) of {_id: i, s: <300-byte string ending in
 * key(i)>} into db.c. */
static void insert_wide(mf_instance *inst, int from, int to, int (*key)(int))
{
    bson_t *cmd = bson_new(), docs, d;
    char s[301], k[16];
    memset(s, 'x', 300);
    s[300] = '\0';
    BSON_APPEND_UTF8(cmd, "insert", "c");
    BSON_APPEND_ARRAY_BEGIN(cmd, "documents", &docs);
    for (int i = from; i < to; i++) {
        snprintf(k, sizeof k, "%010d", key(i));
        memcpy(s + 290, k, 10);
        const char *ik;
        size_t il = mf_uint32_to_key((uint32_t)(i - from), &ik, k, sizeof k);
        bson_append_document_begin(&docs, ik, (int)il, &d);
        BSON_APPEND_INT32(&d, "_id", i);
        BSON_APPEND_UTF8(&d, "s", s);
        bson_append_document_end(&docs, &d);
    }
    bson_append_array_end(cmd, &docs);
    BSON_APPEND_UTF8(cmd, "$db", "db");
    bson_t *r = run(inst, cmd);
    CHECK_INT(reply_int(r, "n"), to - from);
    bson_destroy(r);
}

static int scrambled(int i)
{
    return (int)(((uint32_t)i * 2654435761u) % 1000000007u);
}

static int first_key(int i)
{
    (void)i;
    return scrambled(0);
}

/* An index build sorts its keys (cmd_index.c, build_index): with a 1 MB
 * budget, 6,000 keys of 300 bytes spill in several sorted runs that are
 * merged, the index validates, and a unique build meets a duplicate that
 * lies in a later run and leaves no index.  Here so that ASan sees the
 * spill and the merge. */
MFT_CASE(sorted_build_runs, "/command/indexes/build_sorts_keys_in_runs")
{
    mf_instance *inst = mft_instance_open(true);
    CHECK(inst);
    bson_t *r = run(inst, BCON_NEW("setParameter", BCON_INT32(1),
                                   "maxIndexBuildMemoryUsageMegabytes", BCON_INT32(1),
                                   "$db", "admin"));
    CHECK_INT(reply_int(r, "was"), 200);
    bson_destroy(r);
    for (int i = 0; i < 6000; i += 1000)
        insert_wide(inst, i, i + 1000, scrambled);
    r = run(inst, BCON_NEW("createIndexes", "c", "indexes", "[", "{", "key", "{", "s",
                           BCON_INT32(1), "}", "name", "s_1", "unique", BCON_BOOL(true), "}",
                           "{", "key", "{", "s", BCON_INT32(-1), "_id", BCON_INT32(1), "}",
                           "name", "s_-1__id_1", "}", "]", "$db", "db"));
    CHECK_INT(reply_int(r, "numIndexesAfter"), 3);
    bson_destroy(r);
    r = validate(inst);
    CHECK(reply_bool(r, "valid"));
    CHECK_INT(reply_int(r, "keysPerIndex.s_1"), 6000);
    CHECK_INT(reply_int(r, "keysPerIndex.s_-1__id_1"), 6000);
    bson_destroy(r);
    r = run(inst, BCON_NEW("dropIndexes", "c", "index", "s_1", "$db", "db"));
    bson_destroy(r);
    insert_wide(inst, 6000, 6001, first_key); /* the key of _id 0, runs later */
    r = run(inst, BCON_NEW("createIndexes", "c", "indexes", "[", "{", "key", "{", "s",
                           BCON_INT32(1), "}", "name", "s_1", "unique", BCON_BOOL(true), "}",
                           "]", "$db", "db"));
    CHECK_INT(reply_int(r, "code"), 11000);
    bson_destroy(r);
    r = validate(inst);
    CHECK(reply_bool(r, "valid"));
    CHECK_INT(reply_int(r, "keysPerIndex.s_1"), -999); /* no such index */
    CHECK_INT(reply_int(r, "keysPerIndex.s_-1__id_1"), 6001);
    bson_destroy(r);
    mf_instance_close(inst);
}
