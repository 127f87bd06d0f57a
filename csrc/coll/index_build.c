/*
 * index_build.c -- building a collection's indexes, and what a crash left
 * of a build.
 *
 * A build holds the collection's exclusive lock from start to end (mongod's
 * old foreground build): it creates the index marked "building" in its
 * catalog spec, writes every record's keys through the log in batches, then
 * rewrites the spec without the mark.  A unique violation drops the index
 * again.  After a crash in the middle the mark is still there, and
 * mf_cl_recover_builds() drops the half-built index at open: a build leaves
 * the whole index or none.
 */
#include "coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_INDEXES 64
#define BUILD_BATCH 512 /* keys per engine write during a build */

/* The spec as listIndexes shows it: without the server's own fields. */
void mf_cl_index_public_spec(const uint8_t *spec, size_t len, bson_t *out)
{
    bson_t s;
    bson_init(out);
    if (bson_init_static(&s, spec, len))
        bson_copy_to_excluding_noinit(&s, out, "multikeyPaths", "building", NULL);
}

/* The document of record `rid` of `c` into `doc` (static, valid while the
 * collection is locked); *found false when there is none, or it is not a
 * document. */
int mf_cl_record_doc(mf_engine *e, mf_coll *c, const uint8_t rid[8], bson_t *doc, bool *found,
                     mf_error *err)
{
    const uint8_t *v;
    size_t vl;
    int rc = mf_btree_get(mf_engine_tree(e, mf_coll_records(c)), rid, 8, found, &v, &vl, err);
    if (rc == 0 && *found)
        *found = bson_init_static(doc, v, vl);
    return rc;
}

/* ------------------------------------------------------------- the build */

/* An index is built by sorting: every record's keys go through a sorter
 * (sort.c) and are written in key order, so that each engine write
 * appends at the right edge of the tree.  Splits there leave the left page
 * full (btree.c, split), so the built index is packed, and the build
 * touches each leaf once instead of once per key.  The sorter keeps keys
 * in memory up to maxIndexBuildMemoryUsageMegabytes (200 by default), the
 * bound mongod puts on its sorter; past it, as mongod's does, it spills
 * sorted runs to unnamed files in <dbpath>/_tmp and merges them, so the
 * index is written in one ordered pass whatever its size.
 *
 * A sorter record is the tree's key (with the RecordId after the key, for
 * a non-unique index), and the RecordId as its document.  Records are
 * added in RecordId order and the sorter keeps ties in the order added, so
 * equal keys come out in RecordId order. */

/* Sorted keys gathered for one engine write.  The keys are copied: the
 * sorter's stay valid only until its next record. */
typedef struct build_batch {
    mf_op ops[BUILD_BATCH];
    size_t at[BUILD_BATCH]; /* where each key starts in `keys` */
    uint8_t rid[BUILD_BATCH][8];
    mf_buf keys;
    size_t n;
} build_batch;

static int batch_write(build_batch *b, mf_engine *e, const mf_index_desc *x, mf_lsn *lsn,
                       mf_error *err)
{
    if (b->n == 0)
        return 0;
    for (size_t i = 0; i < b->n; i++) { /* the arena has stopped growing */
        size_t end = i + 1 < b->n ? b->at[i + 1] : b->keys.len;
        b->ops[i] = (mf_op){.kind = MF_OP_PUT, .tree = x->tree, .key = b->keys.data + b->at[i],
                            .klen = end - b->at[i], .val = b->rid[i], .vlen = 8};
    }
    int rc = mf_engine_write(e, b->ops, b->n, lsn, err);
    b->n = 0;
    b->keys.len = 0;
    return rc;
}

/* A unique index met the key it was given last, again, for record `rid`:
 * DuplicateKey, with that record's document in `dup`.  mongod's bulk build
 * fails on the same key: it checks each sorted key against the one
 * before, so the key reported is the smallest duplicated one. */
static int duplicate(mf_engine *e, mf_coll *c, const mf_index_desc *x, const uint8_t rid[8],
                     mf_cl_dup *dup, mf_error *err)
{
    if (dup) {
        bool found;
        bson_t doc;
        int rc = mf_cl_record_doc(e, c, rid, &doc, &found, err);
        if (rc != 0)
            return rc;
        if (found)
            mf_cl_dup_fill(dup, x, &doc);
    }
    return mf_error_set(err, MF_DuplicateKey, "duplicate key");
}

/* Write the sorter's records into the (empty) index `x`, in key order. */
static int write_sorted(mf_sorter *s, mf_engine *e, mf_coll *c, const mf_index_desc *x,
                        mf_cl_dup *dup, mf_lsn *lsn, mf_deadline *dl, mf_error *err)
{
    build_batch *b = calloc(1, sizeof *b);
    mf_buf prev = {0}; /* the last key taken, and its record */
    uint8_t prev_rid[8];
    int rc = b ? 0 : mf_error_oom(err);
    for (bool first = true; rc == 0; first = false) {
        const uint8_t *k, *rid;
        size_t kl, rl;
        bool valid;
        if ((rc = mf_deadline_check(dl, err)) != 0 ||
            (rc = mf_sorter_next_keyed(s, &k, &kl, &rid, &rl, &valid, err)) != 0 || !valid)
            break;
        if (!first && kl == prev.len && memcmp(k, prev.data, kl) == 0) {
            if (memcmp(rid, prev_rid, 8) == 0)
                continue; /* one record's key twice */
            rc = duplicate(e, c, x, rid, dup, err);
            break;
        }
        prev.len = 0;
        memcpy(prev_rid, rid, 8);
        b->at[b->n] = b->keys.len;
        memcpy(b->rid[b->n], rid, 8);
        b->n++;
        if (mf_buf_append(&prev, k, kl) != 0 || mf_buf_append(&b->keys, k, kl) != 0)
            rc = mf_error_oom(err);
        else if (b->n == BUILD_BATCH)
            rc = batch_write(b, e, x, lsn, err);
    }
    if (rc == 0)
        rc = batch_write(b, e, x, lsn, err);
    if (b)
        mf_buf_free(&b->keys);
    free(b);
    mf_buf_free(&prev);
    return rc;
}

/* Write every record's keys into the (empty) index `x` (exclusive lock
 * held): the records are read in RecordId order into the sorter, then the
 * sorted keys are written. */
static int build_index(mf_engine *e, mf_coll *c, mf_index_desc *x, const mf_cl_build *o,
                       mf_cl_dup *dup, mf_lsn *lsn, mf_error *err)
{
    mf_deadline *dl = o->deadline;
    (void)mkdir(o->tmpdir, 0700); /* an existing one is fine; a failure shows at spill */
    mf_sorter *s = mf_sorter_new(o->sort_bytes, true, o->tmpdir, 0);
    if (!s)
        return mf_error_oom(err);
    mf_keyset ks = {0};
    mf_buf key = {0};
    uint32_t multikey = 0;
    mf_cursor cur;
    bool valid;
    mf_cursor_init(&cur, mf_engine_tree(e, mf_coll_records(c)));
    int rc = mf_cursor_first(&cur, &valid, err);
    while (rc == 0 && valid) {
        const uint8_t *k, *v;
        size_t kl, vl;
        bson_t doc;
        uint32_t mk = 0;
        mf_cursor_key(&cur, &k, &kl);
        mf_cursor_value(&cur, &v, &vl);
        if (kl != 8 || !bson_init_static(&doc, v, vl)) {
            rc = mf_error_set(err, MF_DataCorruption, "a record is not a document");
            break;
        }
        mf_keyset_clear(&ks);
        if ((rc = mf_deadline_check(dl, err)) != 0 ||
            (rc = mf_index_keys(x, &doc, &ks, &mk, err)) != 0)
            break;
        multikey |= mk;
        for (size_t i = 0; rc == 0 && i < ks.n; i++) {
            const mf_buf *ik = &ks.keys[i];
            if (!x->unique) { /* the tree's key ends with the RecordId */
                key.len = 0;
                if (mf_buf_append(&key, ik->data, ik->len) != 0 ||
                    mf_buf_append(&key, k, 8) != 0) {
                    rc = mf_error_oom(err);
                    break;
                }
                ik = &key;
            }
            rc = mf_sorter_add(s, ik->data, ik->len, k, 8, err);
        }
        if (rc == 0)
            rc = mf_cursor_next(&cur, &valid, err);
    }
    if (rc == 0)
        rc = mf_sorter_finish(s, err);
    if (rc == 0)
        rc = write_sorted(s, e, c, x, dup, lsn, dl, err);
    if (rc == 0 && multikey)
        rc = mf_cl_mark_multikey(e, c, x, multikey, err);
    mf_sorter_free(s);
    mf_buf_free(&key);
    mf_keyset_free(&ks);
    return rc;
}

/* The stored specs of the `n` indexes `names` of `c`, rewritten without
 * the build mark (keeping multikeyPaths), in one catalog write: a crash
 * keeps all of them, or all of them marked, which the next open drops. */
static int finish_specs(mf_engine *e, mf_coll *c, const char *const *names, size_t n,
                        const mf_op_list *also, mf_lsn *lsn, mf_error *err)
{
    /* bson_t wants 128-byte alignment, which calloc does not give an
     * array of them: each one from bson_new. */
    bson_t **out = calloc(n ? n : 1, sizeof *out);
    mf_index_spec_set *sets = calloc(n ? n : 1, sizeof *sets);
    size_t ready = 0;
    int rc = 0;
    if (!out || !sets)
        rc = mf_error_oom(err);
    for (; rc == 0 && ready < n; ready++) {
        const mf_index_info *info = NULL;
        for (size_t i = 0; !info && i < mf_coll_index_count(c); i++)
            if (strcmp(mf_coll_index(c, i)->name, names[ready]) == 0)
                info = mf_coll_index(c, i);
        bson_t s;
        if (!info || !bson_init_static(&s, info->spec, info->spec_len)) {
            rc = mf_error_set(err, MF_InternalError, "index %s vanished during its build",
                              names[ready]);
            break;
        }
        out[ready] = bson_new();
        bson_copy_to_excluding_noinit(&s, out[ready], "building", NULL);
        sets[ready] = (mf_index_spec_set){names[ready], bson_get_data(out[ready]),
                                          out[ready]->len};
    }
    if (rc == 0)
        rc = mf_coll_index_set_specs(e, c, sets, n, also, lsn, err);
    for (size_t i = 0; i < ready; i++)
        bson_destroy(out[i]);
    free(out);
    free(sets);
    return rc;
}

/* Whether `c` holds no document (a damaged first page counts as not
 * empty). */
static bool coll_empty(mf_engine *e, mf_coll *c)
{
    mf_cursor cur;
    bool valid = true;
    mf_error ignored;
    mf_cursor_init(&cur, mf_engine_tree(e, mf_coll_records(c)));
    return mf_cursor_first(&cur, &valid, &ignored) == 0 && !valid;
}

/* ------------------------------------------------------------- the build */

/* One of a build's entries: {<what>: <coll>, indexBuildUUID, indexes:
 * [the new specs], cause?} to `d`. */
static int build_entry(mf_cl_ddl *d, const char *what, mf_coll *c, const char *ns,
                       const uint8_t build[16], const bson_t *specs, const bool *skip,
                       size_t nspec, const mf_error *cause, mf_error *err)
{
    uint8_t ui[16];
    bson_t o = BSON_INITIALIZER, a, x;
    BSON_APPEND_UTF8(&o, what, strchr(ns, '.') + 1);
    bson_append_binary(&o, "indexBuildUUID", 14, BSON_SUBTYPE_UUID, build, 16);
    BSON_APPEND_ARRAY_BEGIN(&o, "indexes", &a);
    for (size_t i = 0, k = 0; i < nspec; i++) {
        char key[16];
        const char *kp;
        if (skip[i])
            continue;
        size_t kl = bson_uint32_to_string((uint32_t)k++, &kp, key, sizeof key);
        bson_append_document(&a, kp, (int)kl, &specs[i]);
    }
    bson_append_array_end(&o, &a);
    if (cause) {
        char scratch[32];
        BSON_APPEND_DOCUMENT_BEGIN(&o, "cause", &x);
        BSON_APPEND_BOOL(&x, "ok", false);
        BSON_APPEND_INT32(&x, "code", cause->code);
        BSON_APPEND_UTF8(&x, "codeName", mf_error_name(cause->code, scratch));
        BSON_APPEND_UTF8(&x, "errmsg", cause->msg);
        bson_append_document_end(&o, &x);
    }
    int rc = mf_cl_ddl_add(d, ns, mf_cl_uuid(c, ui) ? ui : NULL, &o, NULL, err);
    bson_destroy(&o);
    return rc;
}

/* The entries of a build that committed to `d`: createIndexes, one per
 * index, when the collection held no document, else commitIndexBuild. */
static int commit_entries(mf_cl_ddl *d, mf_coll *c, const char *ns, bool empty,
                          const uint8_t build[16], const bson_t *specs, const bool *skip,
                          size_t nspec, mf_error *err)
{
    if (!empty)
        return build_entry(d, "commitIndexBuild", c, ns, build, specs, skip, nspec, NULL, err);
    uint8_t ui[16];
    bool has_ui = mf_cl_uuid(c, ui);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < nspec; i++) {
        if (skip[i])
            continue;
        bson_t o = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&o, "createIndexes", strchr(ns, '.') + 1);
        bson_concat(&o, &specs[i]);
        rc = mf_cl_ddl_add(d, ns, has_ui ? ui : NULL, &o, NULL, err);
        bson_destroy(&o);
    }
    return rc;
}

int mf_cl_index_build(mf_cl_db *db, mf_cl_log *lg, mf_coll *c, const char *ns,
                      const bson_t *specs, size_t nspec, const mf_cl_build *o,
                      size_t *fresh_out, mf_lsn *lsn, mf_error *err)
{
    mf_engine *e = db->engine;
    size_t before = mf_coll_index_count(c);
    int rc = 0;
    *fresh_out = 0;
    /* Which specs are new: compared with the existing indexes and the
     * earlier specs of this command. */
    bool *skip = calloc(nspec ? nspec : 1, sizeof *skip);
    if (!skip)
        rc = mf_error_oom(err);
    /* The cluster key has its index already (IndexCatalogImpl::_isSpecOk). */
    for (size_t i = 0; rc == 0 && i < nspec && mf_cl_clustered(c, NULL); i++) {
        bson_iter_t kit, f;
        if (bson_iter_init_find(&kit, &specs[i], "key") && BSON_ITER_HOLDS_DOCUMENT(&kit) &&
            bson_iter_recurse(&kit, &f) && bson_iter_next(&f) &&
            strcmp(bson_iter_key(&f), "_id") == 0 && !bson_iter_next(&f))
            rc = mf_error_set(err, MF_CannotCreateIndex,
                              "cannot create the _id index on a clustered collection");
    }
    size_t fresh = 0;
    for (size_t i = 0; rc == 0 && i < nspec; i++) {
        bool same = false;
        for (size_t j = 0; rc == 0 && !same && j < mf_coll_index_count(c); j++) {
            const mf_index_info *info = mf_coll_index(c, j);
            bson_t pub;
            mf_cl_index_public_spec(info->spec, info->spec_len, &pub);
            rc = mf_index_spec_conflict(&pub, &specs[i], &same, err);
            bson_destroy(&pub);
        }
        for (size_t j = 0; rc == 0 && !same && j < i; j++)
            if (!skip[j])
                rc = mf_index_spec_conflict(&specs[j], &specs[i], &same, err);
        skip[i] = same;
        fresh += !same;
    }
    /* IndexCatalogImpl::prepareSpecForCreate */
    for (size_t i = 0; rc == 0 && i < nspec && mf_cl_capped(c, NULL, NULL); i++) {
        bson_iter_t ttl;
        if (!skip[i] && bson_iter_init_find(&ttl, &specs[i], "expireAfterSeconds"))
            rc = mf_error_set(err, MF_CannotCreateIndex,
                              "Cannot create TTL index on a capped collection");
    }
    if (rc == 0 && before + fresh > MAX_INDEXES) {
        char shown[512];
        bson_iter_t k;
        shown[0] = 0;
        for (size_t i = 0; i < nspec; i++)
            if (!skip[i] && bson_iter_init_find(&k, &specs[i], "key") &&
                BSON_ITER_HOLDS_DOCUMENT(&k)) {
                uint32_t len;
                const uint8_t *data;
                bson_t kd;
                bson_iter_document(&k, &len, &data);
                if (bson_init_static(&kd, data, len))
                    mf_bsonx_to_string(&kd, shown, sizeof shown);
                break;
            }
        rc = mf_error_set(err, MF_CannotCreateIndex,
                          "add index fails, too many indexes for %s key:%s", ns, shown);
    }
    /* The new indexes are built one after another, each marked "building"
     * until all are: as mongod's one builder for a command's indexes, a
     * failure (a duplicate key, maxTimeMS) or a crash leaves none of them. */
    const char **made = calloc(nspec ? nspec : 1, sizeof *made);
    size_t nmade = 0;
    if (!made && rc == 0)
        rc = mf_error_oom(err);
    /* A build over documents is logged as it starts (mongod's two-phase
     * build); one on an empty collection only when it is done. */
    mf_cl_ddl d;
    uint8_t build[16];
    bool empty = coll_empty(e, c), started = false;
    mf_cl_ddl_init(&d, lg, ns);
    if (rc == 0 && fresh > 0 && d.logged && !empty) {
        if ((rc = mf_cl_new_uuid(build, err)) == 0 &&
            (rc = build_entry(&d, "startIndexBuild", c, ns, build, specs, skip, nspec, NULL,
                              err)) == 0)
            rc = mf_cl_ddl_write(&d, e, lsn, err);
        mf_cl_ddl_end(&d, false); /* (after the write, nothing is left) */
        started = rc == 0;
        mf_cl_ddl_init(&d, lg, ns);
    }
    for (size_t i = 0; rc == 0 && i < nspec; i++) {
        if (skip[i])
            continue;
        bson_iter_t nit;
        bson_iter_init_find(&nit, &specs[i], "name");
        const char *name = bson_iter_utf8(&nit, NULL);
        bson_t marked = BSON_INITIALIZER;
        bson_concat(&marked, &specs[i]);
        BSON_APPEND_BOOL(&marked, "building", true);
        mf_tree_id tree;
        rc = mf_coll_index_create(e, c, name, bson_get_data(&marked), marked.len, &tree, lsn,
                                  err);
        mf_index_desc x;
        if (rc == 0) {
            made[nmade++] = name;
            rc = mf_index_desc_init(&x, name, tree, bson_get_data(&marked), marked.len, err);
        }
        bson_destroy(&marked);
        if (rc)
            break;
        mf_cl_dup dup = {0};
        rc = build_index(e, c, &x, o, &dup, lsn, err);
        if (rc == MF_DuplicateKey && dup.has) {
            char msg[1024];
            mf_cl_dup_message(&dup, ns, msg, sizeof msg);
            mf_error_set(err, MF_DuplicateKey, "Index build failed: %s", msg);
        }
        mf_cl_dup_clear(&dup);
        mf_index_desc_clear(&x);
    }
    if (rc == 0 && nmade > 0 && o->before_commit && !empty)
        rc = o->before_commit(o->arg, err); /* a test's moment to kill the server */
    if (rc == 0 && nmade > 0 &&
        (rc = commit_entries(&d, c, ns, empty, build, specs, skip, nspec, err)) == 0)
        rc = finish_specs(e, c, made, nmade, mf_cl_ddl_ops(&d), lsn, err);
    mf_cl_ddl_end(&d, rc == 0);
    if (rc == 0) {
        for (size_t i = 0; i < nmade; i++)
            mf_cl_usage_start(db, ns, made[i]);
    } else {
        /* No partial index stays behind, nor one built beside it. */
        for (size_t i = 0; i < nmade; i++) {
            mf_error derr;
            if (mf_coll_index_drop(e, c, made[i], NULL, lsn, &derr) != 0)
                mf_log(MF_LOG_ERROR, "INDEX", 20000, "build cleanup",
                       "could not drop the failed index %s: %s", made[i], derr.msg);
        }
        mf_error aerr;
        mf_cl_ddl_init(&d, lg, ns);
        if (started && (build_entry(&d, "abortIndexBuild", c, ns, build, specs, skip, nspec,
                                    err, &aerr) != 0 ||
                        mf_cl_ddl_write(&d, e, lsn, &aerr) != 0))
            mf_log(MF_LOG_ERROR, "INDEX", 20000, "build cleanup",
                   "could not log the aborted build of %s: %s", ns, aerr.msg);
        mf_cl_ddl_end(&d, false);
    }
    free(made);
    free(skip);
    if (rc == 0)
        *fresh_out = fresh;
    return rc;
}

int mf_cl_index_drop(mf_engine *e, mf_cl_log *lg, mf_coll *c, const char *name, mf_lsn *lsn,
                     mf_error *err)
{
    const mf_index_info *info = NULL;
    const char *ns = mf_coll_name(c);
    for (size_t i = 0; !info && i < mf_coll_index_count(c); i++)
        if (strcmp(mf_coll_index(c, i)->name, name) == 0)
            info = mf_coll_index(c, i);
    if (!info)
        return mf_error_set(err, MF_IndexNotFound, "index not found with name [%s]", name);
    mf_cl_ddl d;
    int rc = 0;
    mf_cl_ddl_init(&d, lg, ns);
    if (d.logged) {
        uint8_t ui[16];
        bson_t o = BSON_INITIALIZER, o2;
        BSON_APPEND_UTF8(&o, "dropIndexes", strchr(ns, '.') + 1);
        BSON_APPEND_UTF8(&o, "index", name);
        mf_cl_index_public_spec(info->spec, info->spec_len, &o2);
        rc = mf_cl_ddl_add(&d, ns, mf_cl_uuid(c, ui) ? ui : NULL, &o, &o2, err);
        bson_destroy(&o);
        bson_destroy(&o2);
    }
    if (rc == 0)
        rc = mf_coll_index_drop(e, c, name, mf_cl_ddl_ops(&d), lsn, err);
    mf_cl_ddl_end(&d, rc == 0);
    return rc;
}

int mf_cl_index_rebuild(mf_engine *e, mf_coll *c, const char *name, const bson_t *spec,
                        const mf_cl_build *o, mf_lsn *lsn, mf_error *err)
{
    /* A crash between the drop and the end leaves the "building" mark,
     * and mf_cl_recover_builds() drops the half-built index at open. */
    mf_tree_id tree;
    mf_index_desc x;
    int rc = mf_coll_index_drop(e, c, name, NULL, lsn, err);
    if (rc == 0)
        rc = mf_coll_index_create(e, c, name, bson_get_data(spec), spec->len, &tree, lsn, err);
    if (rc == 0 && (rc = mf_index_desc_init(&x, name, tree, bson_get_data(spec), spec->len,
                                            err)) == 0) {
        rc = build_index(e, c, &x, o, NULL, lsn, err);
        mf_index_desc_clear(&x);
    }
    if (rc == 0)
        rc = finish_specs(e, c, &name, 1, NULL, lsn, err);
    return rc;
}

/* ------------------------------------------------------------- at open */

int mf_cl_recover_builds(mf_engine *e, mf_error *err)
{
    mf_cl_names l;
    int rc = mf_cl_names_get(e, &l, err);
    if (rc)
        return rc;
    mf_engine_catalog_lock(e, false);
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        mf_coll *c = mf_engine_coll(e, l.ns[i]);
        if (!c)
            continue;
        mf_coll_lock(c, true);
        for (size_t j = 0; rc == 0 && j < mf_coll_index_count(c);) {
            const mf_index_info *info = mf_coll_index(c, j);
            bson_t s;
            bson_iter_t b;
            if (bson_init_static(&s, info->spec, info->spec_len) &&
                bson_iter_init_find(&b, &s, "building") && bson_iter_as_bool(&b)) {
                char name[256];
                mf_lsn lsn;
                snprintf(name, sizeof name, "%s", info->name);
                mf_log(MF_LOG_WARNING, "INDEX", 20001, "interrupted index build",
                       "dropping index %s of %s: its build did not finish before the last "
                       "shutdown", name, l.ns[i]);
                rc = mf_coll_index_drop(e, c, name, NULL, &lsn, err);
                if (rc == 0)
                    rc = mf_engine_sync(e, lsn, err);
                continue;
            }
            j++;
        }
        mf_coll_unlock(c);
    }
    mf_engine_catalog_unlock(e);
    /* A $out that a crash interrupted leaves its temporary collection
     * "<db>.tmp.agg_out.<uuid>" behind, and a convertToCapped its
     * "<db>.tmp<5>.convertToCapped.<coll>" (options {temp: true}); mongod
     * drops its temporary collections at startup, and so does this.  So
     * too a collection a transaction created and never committed
     * (MF_COLL_PENDING). */
    mf_engine_catalog_lock(e, true);
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        const char *dot = strchr(l.ns[i], '.');
        mf_coll *c = mf_engine_coll(e, l.ns[i]);
        bool pending = c && mf_coll_pending(c);
        bool temp = c && mf_cl_temp(c);
        if (!pending && !temp && (!dot || strncmp(dot + 1, "tmp.agg_out.", 12) != 0))
            continue;
        mf_lsn lsn;
        mf_error derr;
        mf_log(MF_LOG_WARNING, "STORAGE", 20002, "dropping temporary collection",
               "dropping %s: a %s that did not finish before the last shutdown left it",
               l.ns[i], pending ? "transaction" : temp ? "temporary collection's command"
                                                       : "$out");
        /* a failure is logged, not fatal: the database still opens */
        if (mf_engine_coll_drop(e, l.ns[i], NULL, &lsn, &derr) != 0 ||
            mf_engine_sync(e, lsn, &derr) != 0)
            mf_log(MF_LOG_WARNING, "STORAGE", 20003, "temporary collection not dropped",
                   "%s stays: %s", l.ns[i], derr.msg);
    }
    mf_engine_catalog_unlock(e);
    mf_cl_names_free(&l);
    return rc;
}

