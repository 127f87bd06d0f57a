/*
 * agg_env_write.c -- the environment's writes and statistics for the
 * pipeline's $out, $merge, $collStats and $indexStats (agg/pipeline.h).
 *
 * Every document goes through the single write path (mf_cl_insert_doc /
 * mf_cl_write_doc, coll/write.c), so each index is maintained and a unique
 * index refuses a duplicate, as for the insert and update commands.  Each
 * call takes the catalog lock (shared) and the collection's lock
 * (exclusive) for one document and releases them: no lock is held while
 * the pipeline's other stages run, so a $merge may read and write the same
 * collection without nesting locks.
 *
 * $out (mongod's DocumentSourceOut::initialize / finalize):
 *   open    the target's index specs are remembered; a collection
 *           "<db>.tmp.agg_out.<uuid>" is created and given them
 *           (createIndexes on the empty collection);
 *   insert  into the temporary collection;
 *   commit  under the catalog's exclusive lock: the target's indexes must
 *           be those remembered (else CommandFailed, as mongod's rename
 *           "IfOptionsAndIndexesHaveNotChanged"), the target is dropped and
 *           the temporary collection renamed to it -- a reader holds the
 *           catalog lock shared, so it sees the old target or the new one;
 *   free    without a commit, drops the temporary collection.
 * A crash between open and commit leaves the temporary collection behind
 * (mongod creates it with temp: true and drops it at startup; this engine
 * has no temporary collections yet).
 *
 * Each sink syncs the log up to its last write before commit returns:
 * the aggregate replies only once its writes are durable (the write
 * concern; j is always satisfied).
 */
#include "command_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define ID_INDEX "_id_"

typedef struct sink {
    mf_agg_sink base;
    mf_instance *inst;
    char db[128];
    char ns[MF_MAX_NS_LEN + 1];     /* where documents go */
    char target[MF_MAX_NS_LEN + 1]; /* $out: the collection replaced */
    bool is_out, committed;
    bson_t specs;                   /* $out: the target's index specs at open */
    mf_lsn lsn;                     /* the last write */
    mf_cl_log log;                  /* a replica set's oplog, or none */
    const mf_deadline *deadline;    /* $merge: bounds a wait for a transaction */
    bool validate;                  /* the target's validator applies */
} sink;

/* The running aggregate's bypassDocumentValidation: the command sets it
 * around the run of a pipeline that writes (its sinks are opened there). */
static _Thread_local bool bypass_validation;

void mfi_agg_bypass_validation(bool on)
{
    bypass_validation = on;
}

/* How the sink's writes are logged: NULL on a standalone. */
static mf_cl_log *sink_log(sink *s)
{
    return s->log.oplog ? &s->log : NULL;
}

/* A context for calling other commands' handlers on the sink's database. */
static mf_cmd_ctx sink_ctx(sink *s, const char *name)
{
    return (mf_cmd_ctx){.inst = s->inst, .db = s->db, .name = name};
}

/* The indexes of `c` other than _id_, public specs in catalog order, as an
 * array into `out` (initialised by the caller).  Lock held. */
static void index_specs(mf_coll *c, bson_t *out)
{
    uint32_t n = 0;
    for (size_t i = 0; i < mf_coll_index_count(c); i++) {
        const mf_index_info *info = mf_coll_index(c, i);
        if (strcmp(info->name, ID_INDEX) == 0)
            continue;
        bson_t pub;
        char key[16];
        const char *k;
        mf_cl_index_public_spec(info->spec, info->spec_len, &pub);
        mf_uint32_to_key(n++, &k, key, sizeof key);
        bson_append_document(out, k, -1, &pub);
        bson_destroy(&pub);
    }
}

/* A DuplicateKey as mongod reports it: the E11000 message, and the
 * keyPattern / keyValue extra fields into `info`. */
static int duplicate(const char *ns, const mf_cl_dup *dup, bson_t *info, mf_error *err)
{
    char msg[1024];
    mf_cl_dup_message(dup, ns, msg, sizeof msg);
    if (info) {
        BSON_APPEND_DOCUMENT(info, "keyPattern", &dup->key_pattern);
        BSON_APPEND_DOCUMENT(info, "keyValue", &dup->key_value);
    }
    return mf_error_set(err, MF_DuplicateKey, "%s", msg);
}

/* Insert `doc` into `c` (exclusive lock held). */
static int insert_locked(sink *s, mf_coll *c, const bson_t *doc, bson_t *info, mf_error *err)
{
    mf_engine *e = s->inst->engine;
    mf_cl_indexes ix = {0};
    mf_cl_dup dup = {0};
    uint64_t next_id;
    bson_t stored;
    bson_iter_t id;
    mf_lsn lsn = 0;
    mf_cl_validator *val = NULL;
    int rc = mf_cl_next_record_id(e, c, &next_id, err);
    if (rc == 0)
        rc = mf_cl_indexes_load(c, &ix, err);
    if (rc == 0 && s->validate)
        rc = mf_cl_validator_load(c, &val, err);
    ix.val = val;
    if (rc == 0) {
        bson_init(&stored);
        rc = mf_cl_insert_doc(e, c, &ix, &next_id, doc, &stored, &id, &lsn, &dup, sink_log(s),
                              err);
        bson_destroy(&stored);
    }
    if (rc == MF_DuplicateKey && dup.has)
        rc = duplicate(s->ns, &dup, info, err);
    if (rc == MF_DocumentValidationFailure && info)
        BSON_APPEND_DOCUMENT(info, "errInfo", mf_cl_validator_info(val));
    mf_cl_validator_free(val);
    if (lsn > s->lsn)
        s->lsn = lsn;
    mf_cl_dup_clear(&dup);
    mf_cl_indexes_free(&ix);
    return rc;
}

/* ------------------------------------------------------------- inserts */

/* Whether a write of the sink (`rc`) met what a transaction holds: then
 * wait for it to end (maxTimeMS bounds the wait), with no lock held, and
 * say so (*again): the caller writes that document again, as mongod's
 * write-conflict retry of one document's write. */
static int held_wait(sink *s, int rc, bool *again, mf_error *err)
{
    uint64_t holder = rc == MF_WriteConflict ? mf_cl_op_take_wait() : 0;
    *again = holder != 0;
    if (!holder)
        return rc;
    return mf_cl_txns_wait(s->inst->cl.txns, holder, s->deadline ? s->deadline->at_us : 0, err);
}

static int insert_once(sink *s, const bson_t *doc, bson_t *info, mf_error *err)
{
    mf_engine *e = s->inst->engine;
    mf_coll *c;
    int rc;
    if (s->is_out) {
        /* the temporary collection is ours: it must still be there */
        mf_engine_catalog_lock(e, false);
        if (!(c = mf_engine_coll(e, s->ns))) {
            mf_engine_catalog_unlock(e);
            return mf_error_set(err, MF_NamespaceNotFound,
                                "$out's temporary collection %s was dropped", s->ns);
        }
    } else {
        mf_cmd_ctx ctx = sink_ctx(s, "insert");
        if ((rc = mfi_coll_for_write(&ctx, s->ns, &c, err)) != 0)
            return rc;
    }
    mf_coll_lock(c, true);
    rc = insert_locked(s, c, doc, info, err);
    mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    return rc;
}

static int sink_insert(mf_agg_sink *base, const bson_t *doc, bson_t *info, mf_error *err)
{
    sink *s = (sink *)base;
    bool again = true;
    int rc = 0;
    while (rc == 0 && again) {
        mf_cl_op_statement(true); /* a held document is waited for, then written */
        rc = held_wait(s, insert_once(s, doc, info, err), &again, err);
    }
    return rc;
}

/* --------------------------------------------------------------- merges */

/* The document of `c` matching `match` (a copy into `out`, initialised
 * here) and its RecordId; *found false if none.  Lock held. */
static int find_match(mf_engine *e, mf_coll *c, mf_cl_indexes *ix, const bson_t *match,
                      bson_t *out, uint64_t *rid, bool *found, mf_error *err)
{
    mf_matcher *m = NULL;
    mf_scan *scan = NULL;
    bool sorted;
    *found = false;
    int rc = mf_matcher_parse(match, &m, err);
    if (rc == 0)
        rc = mf_cl_scan_new(NULL, c, ix, match, NULL, NULL, NULL, &scan, &sorted, err);
    if (rc == 0) {
        mf_scan_row row;
        rc = mf_scan_next(scan, e, c, m, &row, found, err);
        if (rc == 0 && *found) {
            bson_copy_to(&row.doc, out);
            *rid = row.rid;
        }
    }
    mf_scan_free(scan);
    mf_matcher_free(m);
    return rc;
}

static int merge_once(sink *s, const bson_t *match, mf_agg_merge_fn fn, void *fn_arg,
                      bson_t *info, mf_error *err)
{
    mf_engine *e = s->inst->engine;
    mf_agg_merge_action action = MF_AGG_MERGE_NONE;
    bson_t out;
    int rc;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, s->ns);
    if (!c) {
        /* nothing can match: the target is created by the first insert */
        mf_engine_catalog_unlock(e);
        if ((rc = fn(fn_arg, NULL, &out, &action, err)) != 0 || action != MF_AGG_MERGE_INSERT)
            return rc;
        mf_cmd_ctx ctx = sink_ctx(s, "insert");
        if ((rc = mfi_coll_for_write(&ctx, s->ns, &c, err)) == 0) {
            mf_coll_lock(c, true);
            rc = insert_locked(s, c, &out, info, err);
            mf_coll_unlock(c);
            mf_engine_catalog_unlock(e);
        }
        bson_destroy(&out);
        return rc;
    }
    mf_cl_indexes ix = {0};
    bson_t existing;
    uint64_t rid = 0;
    bool found = false;
    mf_coll_lock(c, true);
    rc = mf_cl_indexes_load(c, &ix, err);
    if (rc == 0)
        rc = find_match(e, c, &ix, match, &existing, &rid, &found, err);
    /* the decision and the write under one lock: nothing changes the
     * matched document in between */
    if (rc == 0)
        rc = fn(fn_arg, found ? &existing : NULL, &out, &action, err);
    if (rc == 0 && action == MF_AGG_MERGE_INSERT) {
        rc = insert_locked(s, c, &out, info, err);
        bson_destroy(&out);
    } else if (rc == 0 && action == MF_AGG_MERGE_REPLACE) {
        mf_cl_dup dup = {0};
        mf_cl_validator *val = NULL;
        mf_lsn lsn = 0;
        if (s->validate)
            rc = mf_cl_validator_load(c, &val, err);
        if (rc == 0)
            rc = mf_cl_validator_check(val, &existing, &out, err);
        if (rc == MF_DocumentValidationFailure && info)
            BSON_APPEND_DOCUMENT(info, "errInfo", mf_cl_validator_info(val));
        mf_cl_validator_free(val);
        if (rc == 0)
            rc = mf_cl_write_doc_log(e, c, &ix, rid, &existing, &out, &lsn, &dup, sink_log(s),
                                     err);
        if (rc == MF_DuplicateKey && dup.has)
            rc = duplicate(s->ns, &dup, info, err);
        if (lsn > s->lsn)
            s->lsn = lsn;
        mf_cl_dup_clear(&dup);
        bson_destroy(&out);
    }
    if (found)
        bson_destroy(&existing);
    mf_cl_indexes_free(&ix);
    mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    return rc;
}

static int sink_merge(mf_agg_sink *base, const bson_t *match, mf_agg_merge_fn fn, void *fn_arg,
                      bson_t *info, mf_error *err)
{
    sink *s = (sink *)base;
    bool again = true;
    int rc = 0;
    while (rc == 0 && again) {
        mf_cl_op_statement(true); /* a held document is waited for, then merged again */
        rc = held_wait(s, merge_once(s, match, fn, fn_arg, info, err), &again, err);
    }
    return rc;
}

/* --------------------------------------------------------- commit, free */

static int sink_commit(mf_agg_sink *base, mf_error *err)
{
    sink *s = (sink *)base;
    mf_engine *e = s->inst->engine;
    int rc = 0;
    if (s->is_out) {
        mf_engine_catalog_lock(e, true);
        mf_coll *tmp = mf_engine_coll(e, s->ns);
        mf_coll *t = mf_engine_coll(e, s->target);
        if (!tmp)
            rc = mf_error_set(err, MF_NamespaceNotFound,
                              "$out's temporary collection %s was dropped", s->ns);
        if (rc == 0 && t) {
            bson_t now = BSON_INITIALIZER;
            mf_coll_lock(t, false);
            index_specs(t, &now);
            mf_coll_unlock(t);
            if (!bson_equal(&now, &s->specs))
                rc = mf_error_set(err, MF_CommandFailed,
                                  "indexes of target collection %s changed during processing.",
                                  s->target);
            bson_destroy(&now);
        }
        /* onto the target, dropping it in the same engine write */
        if (rc == 0)
            rc = mf_cl_rename_held(mfi_cl(s->inst), sink_log(s), s->ns, s->target, true,
                                   &s->lsn, err);
        s->committed = rc == 0;
        mf_engine_catalog_unlock(e);
    }
    /* reply only once every write is durable */
    if (rc == 0 && s->lsn)
        rc = mf_engine_sync(e, s->lsn, err);
    return rc;
}

static void sink_free(mf_agg_sink *base)
{
    sink *s = (sink *)base;
    if (s->is_out && !s->committed) {
        mf_error derr;
        mf_lsn lsn;
        int rc = mf_cl_drop(mfi_cl(s->inst), sink_log(s), s->ns, NULL, &lsn, &derr);
        if (rc != 0 && rc != MF_NamespaceNotFound)
            mf_log(MF_LOG_ERROR, "QUERY", 20000, "$out cleanup",
                   "could not drop the temporary collection %s: %s", s->ns, derr.msg);
    }
    bson_destroy(&s->specs);
    free(s);
}

static sink *sink_new(mf_instance *inst, const char *db, mf_error *err)
{
    sink *s = calloc(1, sizeof *s);
    if (!s) {
        mf_error_oom(err);
        return NULL;
    }
    s->base.insert = sink_insert;
    s->base.merge = sink_merge;
    s->base.commit = sink_commit;
    s->base.free = sink_free;
    s->inst = inst;
    s->log.oplog = inst->cl.oplog;
    s->log.txns = inst->cl.txns;
    snprintf(s->db, sizeof s->db, "%s", db);
    bson_init(&s->specs);
    s->validate = !bypass_validation;
    return s;
}

/* ------------------------------------------------------------- opening */

/* "tmp.agg_out.<uuid>": NamespaceString::kOutTmpCollectionPrefix. */
static int temp_name(char *out, size_t cap, mf_error *err)
{
    uint8_t u[16];
    if (getrandom(u, sizeof u, 0) != (ssize_t)sizeof u)
        return mf_error_set(err, MF_InternalError, "no randomness for a collection name");
    u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);
    u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
    snprintf(out, cap,
             "tmp.agg_out.%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
             u[13], u[14], u[15]);
    return 0;
}

/* The target's indexes (s->specs) built on the new temporary collection
 * s->ns, as one build. */
static int copy_indexes(sink *s, mf_error *err)
{
    mf_instance *inst = s->inst;
    mf_engine *e = inst->engine;
    size_t n = 0, fresh;
    bson_iter_t it;
    bson_iter_init(&it, &s->specs);
    while (bson_iter_next(&it))
        n++;
    bson_t *specs = NULL;
    if (posix_memalign((void **)&specs, 128, n * sizeof *specs) != 0)
        return mf_error_oom(err);
    size_t k = 0;
    bson_iter_init(&it, &s->specs);
    while (bson_iter_next(&it) && k < n) {
        bson_t d;
        if (mfi_doc_arg(&it, &d))
            bson_init_static(&specs[k++], bson_get_data(&d), d.len);
    }
    char tmp[4096];
    mfi_tmpdir_of(inst, tmp, sizeof tmp);
    mf_cl_build o = {.sort_bytes = (size_t)atomic_load(&inst->index_build_max_mb) << 20,
                     .tmpdir = tmp};
    mf_lsn lsn = 0;
    int rc;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, s->ns);
    if (!c) {
        rc = mf_error_set(err, MF_NamespaceNotFound, "collection %s vanished", s->ns);
    } else {
        mf_coll_lock(c, true);
        rc = mf_cl_index_build(mfi_cl(inst), sink_log(s), c, s->ns, specs, k, &o, &fresh,
                               &lsn, err);
        mf_coll_unlock(c);
    }
    mf_engine_catalog_unlock(e);
    if (lsn > s->lsn) /* synced with the documents, at commit */
        s->lsn = lsn;
    free(specs);
    return rc;
}

static int out_open(void *arg, const char *db, const char *coll, mf_agg_sink **out,
                    mf_error *err)
{
    mf_instance *inst = arg;
    mf_engine *e = inst->engine;
    char tmp[128];
    *out = NULL;
    if (mf_cl_txn_bound())
        return mf_error_set(err, MF_OperationNotSupportedInTransaction,
                            "$out cannot be used in a transaction");
    char target[MF_MAX_NS_LEN + 1];
    snprintf(target, sizeof target, "%s.%s", db, coll);
    int rc = mfi_view_refuse(inst, target, err);
    if (rc == 0)
        rc = temp_name(tmp, sizeof tmp, err);
    if (rc)
        return rc;
    sink *s = sink_new(inst, db, err);
    if (!s)
        return MF_InternalError;
    s->is_out = true;
    snprintf(s->target, sizeof s->target, "%s.%s", db, coll);
    snprintf(s->ns, sizeof s->ns, "%s.%s", db, tmp);
    /* the target's indexes, to copy now and to check at the rename */
    mf_engine_catalog_lock(e, false);
    mf_coll *t = mf_engine_coll(e, s->target);
    bool capped = t && mf_cl_capped(t, NULL, NULL);
    /* the target's validation options go with its documents: the
     * temporary collection has them (so its inserts are validated) and
     * takes the target's place with them */
    bson_t none = BSON_INITIALIZER, topts;
    if (t && !capped) {
        mf_coll_lock(t, false);
        index_specs(t, &s->specs);
        if (mf_cl_options_of(t, &topts)) {
            bson_iter_t it;
            bson_iter_init(&it, &topts);
            while (bson_iter_next(&it)) {
                const char *k = bson_iter_key(&it);
                if (strcmp(k, "validator") == 0 || strcmp(k, "validationLevel") == 0 ||
                    strcmp(k, "validationAction") == 0)
                    mf_bsonx_append_iter(&none, k, -1, &it);
            }
        }
        mf_coll_unlock(t);
    }
    mf_engine_catalog_unlock(e);
    if (capped) { /* DocumentSourceOut's check */
        mf_error_set(err, 17152, "namespace '%s' is capped so it can't be used for $out",
                     s->target);
        sink_free(&s->base); /* after: the message names its target */
        bson_destroy(&none);
        return 17152;
    }

    rc = mf_cl_create(e, sink_log(s), s->ns, &none, NULL, true, err);
    bson_destroy(&none);
    if (rc == 0 && !bson_empty(&s->specs) && (rc = copy_indexes(s, err)) != 0) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        mf_error_set(err, rc, "Copying indexes for $out failed :: caused by :: %s", msg);
    }
    if (rc) {
        sink_free(&s->base); /* drops the temporary collection if it was made */
        return rc;
    }
    *out = &s->base;
    return 0;
}

static int merge_open(void *arg, const char *db, const char *coll, const mf_deadline *deadline,
                      mf_agg_sink **out, mf_error *err)
{
    if (mf_cl_txn_bound()) {
        *out = NULL;
        return mf_error_set(err, MF_OperationNotSupportedInTransaction,
                            "$merge cannot be used in a transaction");
    }
    char target[MF_MAX_NS_LEN + 1];
    snprintf(target, sizeof target, "%s.%s", db, coll);
    *out = NULL;
    int vrc = mfi_view_refuse(arg, target, err);
    if (vrc)
        return vrc;
    sink *s = sink_new(arg, db, err);
    if (!s)
        return MF_InternalError;
    snprintf(s->ns, sizeof s->ns, "%s.%s", db, coll);
    s->deadline = deadline;
    *out = &s->base;
    return 0;
}

/* supportsUniqueKey: unique (the _id index is), not partial, its key
 * fields exactly `on`, each a number (no text, hashed or wildcard). */
static bool supports_unique_key(const mf_index_info *info, const char *const *on, size_t non)
{
    bson_t spec, key;
    bson_iter_t it, k;
    if (!bson_init_static(&spec, info->spec, info->spec_len))
        return false;
    bool unique = strcmp(info->name, ID_INDEX) == 0 ||
                  (bson_iter_init_find(&it, &spec, "unique") && bson_iter_as_bool(&it));
    if (!unique || bson_iter_init_find(&it, &spec, "partialFilterExpression") ||
        !bson_iter_init_find(&it, &spec, "key") || !mfi_doc_arg(&it, &key))
        return false;
    size_t n = 0;
    bson_iter_init(&k, &key);
    while (bson_iter_next(&k)) {
        bool found = false;
        if (!mfi_is_number(&k))
            return false;
        for (size_t i = 0; i < non && !found; i++)
            found = strcmp(bson_iter_key(&k), on[i]) == 0;
        if (!found)
            return false;
        n++;
    }
    return n == non;
}

static int has_unique_index(void *arg, const char *db, const char *coll, const char *const *on,
                            size_t non, bool *out, mf_error *err)
{
    mf_instance *inst = arg;
    mf_engine *e = inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    (void)err;
    snprintf(ns, sizeof ns, "%s.%s", db, coll);
    *out = false;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c) {
        *out = non == 1 && strcmp(on[0], "_id") == 0;
    } else {
        mf_coll_lock(c, false);
        for (size_t i = 0; i < mf_coll_index_count(c) && !*out; i++) {
            const mf_index_info *info = mf_coll_index(c, i);
            bson_t spec;
            bson_iter_t b;
            /* an unfinished build is not ready to be relied on */
            if (bson_init_static(&spec, info->spec, info->spec_len) &&
                bson_iter_init_find(&b, &spec, "building"))
                continue;
            *out = supports_unique_key(info, on, non);
        }
        mf_coll_unlock(c);
    }
    mf_engine_catalog_unlock(e);
    return 0;
}

/* ----------------------------------------------------------- statistics */

static int coll_stats(void *arg, const char *db, const char *coll, const mf_agg_coll_stats *q,
                      bson_t *out, mf_error *err)
{
    mf_instance *inst = arg;
    mf_engine *e = inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    int rc = 0;
    snprintf(ns, sizeof ns, "%s.%s", db, coll);
    BSON_APPEND_UTF8(out, "ns", ns);
    BSON_APPEND_UTF8(out, "host", inst->host);
    BSON_APPEND_DATE_TIME(out, "localTime", mf_clock_wall_ms());
    if (q->storage) {
        bson_t st;
        BSON_APPEND_DOCUMENT_BEGIN(out, "storageStats", &st);
        rc = mfi_coll_storage_stats(inst, ns, q->scale, &st, err);
        bson_append_document_end(out, &st);
        if (rc) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return mf_error_set(err, rc,
                                "Unable to retrieve storageStats in $collStats stage :: caused "
                                "by :: %s",
                                msg);
        }
    }
    if (q->count) {
        mf_btree_usage u = {0};
        mf_engine_catalog_lock(e, false);
        mf_coll *c = mf_engine_coll(e, ns);
        if (!c || mfi_txn_hidden(inst, ns)) {
            rc = mf_error_set(err, MF_NamespaceNotFound,
                              "Unable to retrieve count in $collStats stage :: caused by :: "
                              "Collection [%s] not found.",
                              ns);
        } else {
            mf_coll_lock(c, false);
            rc = mf_engine_tree_measure(e, mf_coll_records(c), &u, err);
            mf_coll_unlock(c);
        }
        mf_engine_catalog_unlock(e);
        if (rc)
            return rc;
        mfi_append_number(out, "count", (int64_t)u.entries);
    }
    return 0;
}

/* One document per index: {name, key, host, accesses: {ops, since},
 * spec[, building]}; the accesses from the instance's counters
 * (coll/scan.c). */
static int index_stats(void *arg, const char *db, const char *coll, bson_t *out, mf_error *err)
{
    mf_instance *inst = arg;
    mf_engine *e = inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    (void)err;
    snprintf(ns, sizeof ns, "%s.%s", db, coll);
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (c) {
        mf_coll_lock(c, false);
        for (size_t i = 0; i < mf_coll_index_count(c); i++) {
            const mf_index_info *info = mf_coll_index(c, i);
            bson_t pub, doc, acc, raw;
            bson_iter_t it;
            char key[16];
            const char *k;
            mf_cl_index_public_spec(info->spec, info->spec_len, &pub);
            mf_uint32_to_key((uint32_t)i, &k, key, sizeof key);
            bson_append_document_begin(out, k, -1, &doc);
            BSON_APPEND_UTF8(&doc, "name", info->name);
            if (bson_iter_init_find(&it, &pub, "key"))
                mf_bsonx_append_iter(&doc, "key", 3, &it);
            BSON_APPEND_UTF8(&doc, "host", inst->host);
            BSON_APPEND_DOCUMENT_BEGIN(&doc, "accesses", &acc);
            int64_t ops, since;
            mf_cl_usage_get(mfi_cl(inst), ns, info->name, &ops, &since);
            BSON_APPEND_INT64(&acc, "ops", ops);
            BSON_APPEND_DATE_TIME(&acc, "since", since);
            bson_append_document_end(&doc, &acc);
            BSON_APPEND_DOCUMENT(&doc, "spec", &pub);
            if (bson_init_static(&raw, info->spec, info->spec_len) &&
                bson_iter_init_find(&it, &raw, "building"))
                BSON_APPEND_BOOL(&doc, "building", true);
            bson_append_document_end(out, &doc);
            bson_destroy(&pub);
        }
        mf_coll_unlock(c);
    }
    mf_engine_catalog_unlock(e);
    return 0;
}

/* The collection's plan cache entries under its indexes as they are
 * (query/plan_cache.c keeps them). */
static int plan_cache_stats(void *arg, const char *db, const char *coll, bson_t *out,
                            mf_error *err)
{
    mf_instance *inst = arg;
    mf_engine *e = inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    int rc = 0;
    snprintf(ns, sizeof ns, "%s.%s", db, coll);
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c) {
        mf_engine_catalog_unlock(e);
        return mf_error_set(err, 50933, "collection '%s' does not exist", ns);
    }
    mf_coll_lock(c, false);
    mf_cl_indexes ix = {0};
    if ((rc = mf_cl_indexes_load(c, &ix, err)) == 0 && inst->cl.plan_cache &&
        mf_plan_cache_stats(inst->cl.plan_cache, c, ix.v, ix.n, inst->host, out) != 0)
        rc = mf_error_oom(err);
    mf_cl_indexes_free(&ix);
    mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    return rc;
}

void mfi_agg_env_write_init(mf_instance *inst)
{
    inst->agg_env.out_open = out_open;
    mfi_views_env_init(inst);
    inst->agg_env.merge_open = merge_open;
    inst->agg_env.has_unique_index = has_unique_index;
    inst->agg_env.coll_stats = coll_stats;
    inst->agg_env.index_stats = index_stats;
    inst->agg_env.plan_cache_stats = plan_cache_stats;
}
