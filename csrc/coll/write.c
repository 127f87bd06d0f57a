/*
 * write.c -- one document written with all its index entries.
 *
 * Every insert, update and delete of a document goes through
 * mf_cl_write_doc(): it computes the document's keys in every index before
 * and after (query/index.c), puts the keys it gains and deletes the keys
 * it loses, checks unique indexes, and hands the record and all index
 * changes to the engine as one write -- so after a crash a document is
 * there with all its index entries, or not at all.
 *
 * Also here: RecordIds, the stored form of a document (mongod's
 * fixDocumentForInsert), and the trim that keeps a bounded collection
 * (system.profile, local.startup_log) within its size.
 */
#include "coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- the write */

/* Memory for the operations of one write: keys live until it is done. */
typedef struct opbuf {
    mf_op *ops;
    size_t n, cap;
    mf_buf *keys; /* each op's key bytes (owned) */
    size_t nkeys, capkeys;
    /* a transaction's batch: unique keys are checked once every op is in
     * (a key one record frees, another may take), at the ops `uputs` */
    bool defer_unique;
    size_t *uputs;
    size_t nuputs, capuputs;
} opbuf;

static void opbuf_free(opbuf *b)
{
    for (size_t i = 0; i < b->nkeys; i++)
        mf_buf_free(&b->keys[i]);
    free(b->keys);
    free(b->ops);
    free(b->uputs);
}

/* Add an op whose key is `k` (+ the RecordId when `with_rid`); a put's
 * value is the RecordId (an index entry's), kept with the key, unless the
 * caller sets the op's value itself (`rid` NULL). */
static int opbuf_add(opbuf *b, mf_op_kind kind, mf_tree_id tree, const mf_buf *k, bool with_rid,
                     const uint8_t rid[8], mf_error *err)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 8;
        mf_op *v = realloc(b->ops, cap * sizeof *v);
        if (!v)
            return mf_error_oom(err);
        b->ops = v;
        b->cap = cap;
    }
    if (b->nkeys == b->capkeys) {
        size_t cap = b->capkeys ? b->capkeys * 2 : 8;
        mf_buf *v = realloc(b->keys, cap * sizeof *v);
        if (!v)
            return mf_error_oom(err);
        b->keys = v;
        b->capkeys = cap;
    }
    mf_buf *kb = &b->keys[b->nkeys];
    memset(kb, 0, sizeof *kb);
    bool put_rid = kind == MF_OP_PUT && rid;
    if (mf_buf_append(kb, k->data, k->len) != 0 || (with_rid && mf_buf_append(kb, rid, 8) != 0) ||
        (put_rid && mf_buf_append(kb, rid, 8) != 0)) {
        mf_buf_free(kb);
        return mf_error_oom(err);
    }
    b->nkeys++;
    size_t klen = kb->len - (put_rid ? 8 : 0);
    b->ops[b->n++] = (mf_op){.kind = kind, .tree = tree, .key = kb->data, .klen = klen,
                             .val = put_rid ? kb->data + klen : NULL, .vlen = put_rid ? 8 : 0};
    return 0;
}

/* (A realloc of `keys` moves only the mf_buf headers, not the bytes they
 * point to, so an op's .key stays valid.) */

static int cmp_key(const void *a, const void *b)
{
    const mf_buf *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->data, y->data, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static bool key_in(const mf_keyset *s, const mf_buf *k)
{
    /* sorted: binary search */
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = cmp_key(&s->keys[mid], k);
        if (c == 0)
            return true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static int has_other_entry(mf_btree *tree, const mf_buf *k, const uint8_t rid[8], bool *found,
                           mf_error *err)
{
    mf_cursor cur;
    bool valid;
    int rc;
    *found = false;
    mf_cursor_init(&cur, tree);
    rc = mf_cursor_seek(&cur, k->data, k->len, false, &valid, err);
    while (rc == 0 && valid) {
        const uint8_t *ek;
        size_t el;
        mf_cursor_key(&cur, &ek, &el);
        if (el != k->len + 8 || memcmp(ek, k->data, k->len) != 0)
            break;
        if (memcmp(ek + k->len, rid, 8) != 0) {
            *found = true;
            break;
        }
        rc = mf_cursor_next(&cur, &valid, err);
    }
    return rc;
}

/* Add to `b` the operations that write one document of `c` and its index
 * entries (see mf_cl_write_doc); `*ins`, `*del` count the index entries. */
static int doc_ops(opbuf *b, mf_engine *e, mf_coll *c, mf_cl_indexes *ix, uint64_t rid,
                   const bson_t *old_doc, const bson_t *new_doc, mf_cl_dup *dup, int64_t *ins,
                   int64_t *del, mf_error *err)
{
    uint8_t r[8];
    mf_keyset before = {0}, after = {0};
    int rc = 0;
    mf_record_id_encode(rid, r);
    /* The record itself first: its op carries the document, not a key. */
    mf_buf rk = {.data = r, .len = 8};
    if ((rc = opbuf_add(b, new_doc ? MF_OP_PUT : MF_OP_DELETE, mf_coll_records(c), &rk, false,
                        NULL, err)) != 0)
        return rc;
    if (new_doc) {
        b->ops[b->n - 1].val = bson_get_data(new_doc);
        b->ops[b->n - 1].vlen = new_doc->len;
    }
    for (size_t i = 0; rc == 0 && i < ix->n; i++) {
        mf_index_desc *x = &ix->v[i];
        uint32_t mk_old = 0, mk_new = 0;
        mf_keyset_clear(&before);
        mf_keyset_clear(&after);
        if (old_doc && (rc = mf_index_keys(x, old_doc, &before, &mk_old, err)) != 0)
            break;
        if (new_doc && (rc = mf_index_keys(x, new_doc, &after, &mk_new, err)) != 0)
            break;
        /* (index.c gives keys sorted and distinct) */
        mf_btree *tree = mf_engine_tree(e, x->tree);
        if (!tree) {
            rc = mf_error_set(err, MF_InternalError, "index %s has no tree", x->name);
            break;
        }
        for (size_t k = 0; rc == 0 && k < before.n; k++)
            if (!key_in(&after, &before.keys[k]) &&
                (rc = opbuf_add(b, MF_OP_DELETE, x->tree, &before.keys[k], !x->unique, r,
                                err)) == 0)
                (*del)++;
        for (size_t k = 0; rc == 0 && k < after.n; k++) {
            if (key_in(&before, &after.keys[k]))
                continue;
            if (x->unique && b->defer_unique) {
                if (b->nuputs == b->capuputs) {
                    size_t cap = b->capuputs ? 2 * b->capuputs : 16;
                    size_t *v = realloc(b->uputs, cap * sizeof *v);
                    if (!v) {
                        rc = mf_error_oom(err);
                        break;
                    }
                    b->uputs = v;
                    b->capuputs = cap;
                }
                b->uputs[b->nuputs++] = b->n; /* the PUT added below */
            } else if (x->unique || x->prepare_unique) {
                bool found;
                const uint8_t *v;
                size_t vl;
                if (x->unique)
                    rc = mf_btree_get(tree, after.keys[k].data, after.keys[k].len, &found, &v,
                                      &vl, err);
                else /* prepareUnique: existing duplicates stay, new ones are refused */
                    rc = has_other_entry(tree, &after.keys[k], r, &found, err);
                if (rc == 0 && found && !(x->unique && vl == 8 && memcmp(v, r, 8) == 0)) {
                    if (dup)
                        mf_cl_dup_fill(dup, x, new_doc);
                    rc = mf_error_set(err, MF_DuplicateKey, "duplicate key in index %s",
                                      x->name);
                    break;
                }
            }
            if (rc == 0 &&
                (rc = opbuf_add(b, MF_OP_PUT, x->tree, &after.keys[k], !x->unique, r, err)) == 0)
                (*ins)++;
        }
        if (rc == 0 && mk_new)
            rc = mf_cl_mark_multikey(e, c, x, mk_new, err);
    }
    mf_keyset_free(&before);
    mf_keyset_free(&after);
    return rc;
}

int mf_cl_write_doc(mf_engine *e, mf_coll *c, mf_cl_indexes *ix, uint64_t rid, const bson_t *old_doc,
                  const bson_t *new_doc, mf_lsn *lsn, mf_cl_dup *dup, mf_error *err)
{
    return mf_cl_write_doc_log(e, c, ix, rid, old_doc, new_doc, lsn, dup, NULL, err);
}

/* Whether a write to `c` goes to the oplog (oplog.c's rule). */
static bool replicated(const mf_coll *c)
{
    return mf_cl_ns_replicated(mf_coll_name(c));
}

/* ------------------------------------------------ a session's records */

/* A record a retryable write keeps beside its document, keyed by the
 * session (config.transactions, config.image_collection): its collection
 * locked exclusively, its indexes, and the record it replaces. */
typedef struct side {
    mf_coll *c;
    mf_cl_indexes ix;
    uint64_t rid;
    bool found;
    bson_t old; /* the record replaced (a copy), when found */
} side;

/* Lock `ns` and find its record with _id `id` (catalog lock held). */
static int side_open(side *sd, mf_engine *e, const char *ns, const bson_t *id, mf_error *err)
{
    memset(sd, 0, sizeof *sd);
    bson_init(&sd->old);
    sd->c = mf_engine_coll(e, ns);
    if (!sd->c)
        return mf_error_set(err, MF_NamespaceNotFound, "%s is missing: a retryable write "
                                                       "keeps its session's record there", ns);
    mf_coll_lock(sd->c, true);
    int rc = mf_cl_indexes_load(sd->c, &sd->ix, err);
    if (rc == 0)
        rc = mf_cl_find_by_id(e, sd->c, &sd->ix, id, &sd->rid, &sd->found, &sd->old, err);
    if (rc == 0 && !sd->found)
        rc = mf_cl_next_record_id(e, sd->c, &sd->rid, err);
    return rc;
}

static void side_close(side *sd)
{
    if (!sd->c)
        return;
    mf_cl_indexes_free(&sd->ix);
    bson_destroy(&sd->old);
    mf_coll_unlock(sd->c);
    sd->c = NULL;
}

/* config.system.preimages: the documents before the updates and deletes
 * of collections with changeStreamPreAndPostImages enabled, written in
 * the engine write that changes them ({_id: {nsUUID, ts, applyOpsIndex},
 * preImage, operationTime}; changes.c reads them, and deletes them as the
 * oplog forgets their entries). */
typedef struct images {
    side sd;          /* the collection, locked; sd.rid the next RecordId */
    bson_t **docs;    /* the records, alive until the engine write */
    size_t n, cap;
} images;

static bool keeps_images(const mf_coll *c)
{
    bson_t opts;
    bson_iter_t it, f;
    return mf_cl_options_of(c, &opts) && bson_iter_init(&it, &opts) &&
           bson_iter_find_descendant(&it, "changeStreamPreAndPostImages.enabled", &f) &&
           bson_iter_as_bool(&f);
}

static int images_open(images *im, mf_engine *e, mf_error *err)
{
    memset(im, 0, sizeof *im);
    bson_init(&im->sd.old);
    im->sd.c = mf_engine_coll(e, "config.system.preimages");
    if (!im->sd.c)
        return mf_error_set(err, MF_NamespaceNotFound, "config.system.preimages is missing");
    mf_coll_lock(im->sd.c, true);
    int rc = mf_cl_indexes_load(im->sd.c, &im->sd.ix, err);
    if (rc == 0)
        rc = mf_cl_next_record_id(e, im->sd.c, &im->sd.rid, err);
    return rc;
}

/* The pre-image `old` of `c`'s operation `index` of the entry at `ts`. */
static int images_add(images *im, opbuf *b, mf_engine *e, mf_coll *c, mf_cl_optime ts,
                      int64_t wall_ms, int64_t index, const bson_t *old, mf_error *err)
{
    uint8_t uuid[16];
    bson_t id;
    int64_t ins = 0, del = 0;
    if (!mf_cl_uuid(c, uuid))
        return 0;
    if (im->n == im->cap) {
        size_t cap = im->cap ? 2 * im->cap : 4;
        bson_t **d = realloc(im->docs, cap * sizeof *d);
        if (!d)
            return mf_error_oom(err);
        im->docs = d;
        im->cap = cap;
    }
    bson_t *doc = bson_new();
    BSON_APPEND_DOCUMENT_BEGIN(doc, "_id", &id);
    bson_append_binary(&id, "nsUUID", 6, BSON_SUBTYPE_UUID, uuid, 16);
    BSON_APPEND_TIMESTAMP(&id, "ts", ts.secs, ts.inc);
    BSON_APPEND_INT64(&id, "applyOpsIndex", index);
    bson_append_document_end(doc, &id);
    BSON_APPEND_DATE_TIME(doc, "operationTime", wall_ms);
    BSON_APPEND_DOCUMENT(doc, "preImage", old);
    im->docs[im->n++] = doc;
    return doc_ops(b, e, im->sd.c, &im->sd.ix, im->sd.rid++, NULL, doc, NULL, &ins, &del, err);
}

static void images_close(images *im)
{
    side_close(&im->sd);
    for (size_t i = 0; i < im->n; i++)
        bson_destroy(im->docs[i]);
    free(im->docs);
}

static void append_optime(bson_t *out, const char *key, mf_cl_optime t)
{
    bson_t d;
    BSON_APPEND_DOCUMENT_BEGIN(out, key, &d);
    BSON_APPEND_TIMESTAMP(&d, "ts", t.secs, t.inc);
    BSON_APPEND_INT64(&d, "t", 1);
    bson_append_document_end(out, &d);
}

/* The records of statement `st` logged at `put` (mongod's formats). */
static void session_doc(const mf_cl_stmt *st, const mf_cl_oplog_put *put, bson_t *out)
{
    bson_init(out);
    BSON_APPEND_DOCUMENT(out, "_id", st->lsid);
    BSON_APPEND_INT64(out, "txnNum", st->txn_number);
    append_optime(out, "lastWriteOpTime", put->t);
    BSON_APPEND_DATE_TIME(out, "lastWriteDate", put->wall_ms);
}

static void image_doc(const mf_cl_stmt *st, const mf_cl_oplog_put *put, bson_t *out)
{
    bson_init(out);
    BSON_APPEND_DOCUMENT(out, "_id", st->lsid);
    BSON_APPEND_INT64(out, "txnNum", st->txn_number);
    BSON_APPEND_TIMESTAMP(out, "ts", put->t.secs, put->t.inc);
    BSON_APPEND_UTF8(out, "imageKind", st->post_image ? "postImage" : "preImage");
    BSON_APPEND_DOCUMENT(out, "image", st->image);
    BSON_APPEND_BOOL(out, "invalidated", false);
}

/* Log the write whose document ops are in `b`, in the same engine write:
 * its oplog entry, and for a retryable write the session's record (and a
 * findAndModify's image).  Locks, in order: the caller's collection, the
 * session's collections, the oplog. */
static int logged_write(opbuf *b, mf_engine *e, mf_coll *c, const bson_t *old_doc,
                        const bson_t *new_doc, mf_lsn *lsn, mf_cl_log *lg, mf_error *err)
{
    const mf_cl_stmt *st = lg->stmt;
    side sess = {0}, img = {0};
    images pre = {0};
    bool keep_pre = old_doc && keeps_images(c);
    bson_t id = BSON_INITIALIZER, sdoc = BSON_INITIALIZER, idoc = BSON_INITIALIZER;
    int64_t ins = 0, del = 0;
    int rc = 0;

    if (st) {
        BSON_APPEND_DOCUMENT(&id, "_id", st->lsid);
        rc = side_open(&sess, e, "config.transactions", &id, err);
        if (rc == 0 && st->image)
            rc = side_open(&img, e, "config.image_collection", &id, err);
    }
    if (rc == 0 && keep_pre)
        rc = images_open(&pre, e, err);
    mf_cl_oplog_put put;
    bool begun = false;
    if (rc == 0) {
        mf_cl_oplog_begin(lg->oplog, c, old_doc, new_doc, lg->replaced, st, &put);
        begun = true;
        mf_buf k = {.data = put.key, .len = 8};
        rc = opbuf_add(b, MF_OP_PUT, put.tree, &k, false, NULL, err);
        if (rc == 0) {
            b->ops[b->n - 1].val = bson_get_data(&put.entry);
            b->ops[b->n - 1].vlen = put.entry.len;
        }
    }
    if (rc == 0 && st) {
        bson_destroy(&sdoc);
        session_doc(st, &put, &sdoc);
        rc = doc_ops(b, e, sess.c, &sess.ix, sess.rid, sess.found ? &sess.old : NULL, &sdoc, NULL,
                     &ins, &del, err);
    }
    if (rc == 0 && st && st->image) {
        bson_destroy(&idoc);
        image_doc(st, &put, &idoc);
        rc = doc_ops(b, e, img.c, &img.ix, img.rid, img.found ? &img.old : NULL, &idoc, NULL,
                     &ins, &del, err);
    }
    if (rc == 0 && keep_pre)
        rc = images_add(&pre, b, e, c, put.t, put.wall_ms, 0, old_doc, err);
    if (rc == 0)
        rc = mf_engine_write(e, b->ops, b->n, lsn, err);
    if (rc == 0)
        lg->op_time = put.t;
    if (begun)
        mf_cl_oplog_end(lg->oplog, &put, rc == 0);
    images_close(&pre);
    side_close(&img);
    side_close(&sess);
    bson_destroy(&id);
    bson_destroy(&sdoc);
    bson_destroy(&idoc);
    return rc;
}

int mf_cl_write_doc_log(mf_engine *e, mf_coll *c, mf_cl_indexes *ix, uint64_t rid,
                        const bson_t *old_doc, const bson_t *new_doc, mf_lsn *lsn,
                        mf_cl_dup *dup, mf_cl_log *lg, mf_error *err)
{
    /* inside a transaction: into its write set, no tree changed (txn.c);
     * not a capped collection's (mongod's codes) */
    mf_cl_txn *t = mf_cl_txn_bound();
    if (t && lg && replicated(c) && mf_cl_capped(c, NULL, NULL))
        return new_doc ? mf_error_set(err, MF_OperationNotSupportedInTransaction,
                                      "Collection '%s' is a capped collection. Writes in "
                                      "transactions are not allowed on capped collections.",
                                      mf_coll_name(c))
                       : mf_error_set(err, MF_IllegalOperation,
                                      "Cannot remove from a capped collection in a "
                                      "multi-document transaction");
    if (t && lg && replicated(c))
        return mf_cl_txn_stage(t, e, c, ix, rid, old_doc, new_doc, dup, err);
    mf_cl_txns *txns = lg ? lg->txns : NULL;
    opbuf b = {0};
    int64_t ins = 0, del = 0; /* index entries put and deleted */
    int rc = doc_ops(&b, e, c, ix, rid, old_doc, new_doc, dup, &ins, &del, err);
    if (rc == 0)
        rc = mf_cl_txns_claim(txns, c, ix, rid, old_doc, new_doc, err);
    bool logged = lg && lg->oplog && replicated(c);
    if (rc == 0 && logged)
        /* the entry goes in the same engine write: the document is there
         * after a crash exactly when its entry is */
        rc = logged_write(&b, e, c, old_doc, new_doc, lsn, lg, err);
    else if (rc == 0)
        rc = mf_engine_write(e, b.ops, b.n, lsn, err);
    if (rc == 0) {
        ix->keys_inserted += ins;
        ix->keys_deleted += del;
        mf_cl_capped_wrote(e, c, old_doc, new_doc);
        /* its number, and the version older snapshots see (txn.c); a
         * failure loses only that version: the write is done */
        mf_error verr;
        uint64_t ts = logged ? (uint64_t)lg->op_time.secs << 32 | lg->op_time.inc : 0;
        (void)mf_cl_txns_written(txns, c, ix, rid, old_doc, new_doc, ts, &verr);
    }
    opbuf_free(&b);
    return rc;
}

/* --------------------------------------------- a transaction's commit */

/* Whether op `o` (a unique key's PUT) meets an entry of another record:
 * in the tree, unless the batch deletes that key; or in the batch. */
static int batch_duplicate(const opbuf *b, mf_engine *e, const mf_op *o, bool *dup,
                           mf_error *err)
{
    bool found, deleted = false;
    const uint8_t *v;
    size_t vl;
    *dup = false;
    for (size_t i = 0; i < b->nuputs; i++) {
        const mf_op *p = &b->ops[b->uputs[i]];
        if (p != o && p->tree == o->tree && p->klen == o->klen &&
            memcmp(p->key, o->key, o->klen) == 0) {
            *dup = true;
            return 0;
        }
    }
    int rc = mf_btree_get(mf_engine_tree(e, o->tree), o->key, o->klen, &found, &v, &vl, err);
    if (rc || !found || (vl == 8 && memcmp(v, o->val, 8) == 0))
        return rc;
    for (size_t i = 0; i < b->n && !deleted; i++) {
        const mf_op *p = &b->ops[i];
        deleted = p->kind == MF_OP_DELETE && p->tree == o->tree && p->klen == o->klen &&
                  memcmp(p->key, o->key, o->klen) == 0;
    }
    *dup = !deleted;
    return 0;
}

int mf_cl_write_changes(mf_engine *e, const mf_cl_change *ch, size_t n, mf_cl_log *lg,
                        mf_lsn *lsn, mf_error *err)
{
    opbuf b = {.defer_unique = true};
    int64_t ins = 0, del = 0;
    bson_t ops = BSON_INITIALIZER, sdoc = BSON_INITIALIZER, id = BSON_INITIALIZER;
    side sess = {0};
    int rc = 0;
    uint32_t nops = 0;
    bson_iter_t it;
    /* the transaction's catalog changes first: a collection's creation
     * before the writes into it */
    if (lg && lg->oplog && lg->txn_ops && bson_iter_init(&it, lg->txn_ops))
        while (bson_iter_next(&it)) {
            char key[16];
            const char *k;
            size_t kl = bson_uint32_to_string(nops++, &k, key, sizeof key);
            mf_bsonx_append_iter(&ops, k, (int)kl, &it);
        }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = doc_ops(&b, e, ch[i].c, ch[i].ix, ch[i].rid, ch[i].old_doc, ch[i].new_doc, NULL,
                     &ins, &del, err);
        if (rc == 0 && lg && lg->oplog)
            mf_cl_oplog_op(&ops, nops++, ch[i].c, ch[i].old_doc, ch[i].new_doc);
    }
    /* the unique indexes, over the whole batch (the statements checked
     * each write against the transaction's view already) */
    for (size_t i = 0; rc == 0 && i < b.nuputs; i++) {
        bool dup;
        if ((rc = batch_duplicate(&b, e, &b.ops[b.uputs[i]], &dup, err)) == 0 && dup)
            rc = mf_error_set(err, MF_DuplicateKey,
                              "a unique index refuses a key the transaction writes");
    }
    const mf_cl_stmt *st = lg ? lg->stmt : NULL;
    if (rc == 0 && st) {
        BSON_APPEND_DOCUMENT(&id, "_id", st->lsid);
        rc = side_open(&sess, e, "config.transactions", &id, err);
    }
    /* the pre-images its updates and deletes keep (index: in applyOps) */
    images pre = {0};
    bool keep_pre = false;
    for (size_t i = 0; lg && lg->oplog && i < n && !keep_pre; i++)
        keep_pre = ch[i].old_doc && keeps_images(ch[i].c);
    if (rc == 0 && keep_pre)
        rc = images_open(&pre, e, err);
    mf_cl_oplog_put put;
    bool begun = false;
    if (rc == 0 && lg && lg->oplog) {
        mf_cl_oplog_begin_apply(lg->oplog, &ops, st, &put);
        begun = true;
        mf_buf k = {.data = put.key, .len = 8};
        rc = opbuf_add(&b, MF_OP_PUT, put.tree, &k, false, NULL, err);
        if (rc == 0) {
            b.ops[b.n - 1].val = bson_get_data(&put.entry);
            b.ops[b.n - 1].vlen = put.entry.len;
        }
        if (rc == 0 && st) {
            int64_t si = 0, sd = 0;
            bson_destroy(&sdoc);
            session_doc(st, &put, &sdoc);
            BSON_APPEND_UTF8(&sdoc, "state", "committed");
            rc = doc_ops(&b, e, sess.c, &sess.ix, sess.rid, sess.found ? &sess.old : NULL, &sdoc,
                         NULL, &si, &sd, err);
        }
        int64_t first = nops - (int64_t)n; /* the catalog changes come first */
        for (size_t i = 0; rc == 0 && keep_pre && i < n; i++)
            if (ch[i].old_doc && keeps_images(ch[i].c))
                rc = images_add(&pre, &b, e, ch[i].c, put.t, put.wall_ms, first + (int64_t)i,
                                ch[i].old_doc, err);
    }
    /* Every delete before every put: a unique index's entry is its key
     * alone, so a record's old key deleted after another record's put of
     * the same key (values swapped, or freed and taken) would remove the
     * new entry.  (A stable partition; the ops point at their own keys.) */
    if (rc == 0) {
        mf_op *sorted = malloc((b.n ? b.n : 1) * sizeof *sorted);
        size_t k = 0;
        if (!sorted)
            rc = mf_error_oom(err);
        for (size_t i = 0; sorted && i < b.n; i++)
            if (b.ops[i].kind == MF_OP_DELETE)
                sorted[k++] = b.ops[i];
        for (size_t i = 0; sorted && i < b.n; i++)
            if (b.ops[i].kind != MF_OP_DELETE)
                sorted[k++] = b.ops[i];
        if (sorted) {
            memcpy(b.ops, sorted, b.n * sizeof *sorted);
            free(sorted);
        }
    }
    /* the collections it created, no longer pending (catalog lock held) */
    mf_coll **settle = calloc(lg && lg->ncreated ? lg->ncreated : 1, sizeof *settle);
    size_t nsettle = 0;
    if (!settle && rc == 0)
        rc = mf_error_oom(err);
    for (size_t i = 0; rc == 0 && lg && i < lg->ncreated; i++) {
        mf_coll *c = mf_engine_coll(e, lg->created[i]);
        if (c && mf_coll_pending(c))
            settle[nsettle++] = c;
    }
    /* one engine write: after kill -9 the transaction is all there or
     * not at all */
    if (rc == 0)
        rc = mf_engine_colls_settle(e, settle, nsettle, b.ops, b.n, lsn, err);
    free(settle);
    if (rc == 0 && begun)
        lg->op_time = put.t;
    if (begun)
        mf_cl_oplog_end(lg->oplog, &put, rc == 0);
    images_close(&pre);
    side_close(&sess);
    bson_destroy(&ops);
    bson_destroy(&sdoc);
    bson_destroy(&id);
    opbuf_free(&b);
    return rc;
}

int mf_cl_find_by_id(mf_engine *e, mf_coll *c, const mf_cl_indexes *ix, const bson_t *id_doc,
                     uint64_t *rid, bool *found, bson_t *copy, mf_error *err)
{
    const mf_index_desc *x = NULL;
    mf_keyset keys = {0};
    uint32_t mk = 0;
    *found = false;
    for (size_t i = 0; i < ix->n && !x; i++)
        if (ix->v[i].is_id)
            x = &ix->v[i];
    if (!x)
        return mf_error_set(err, MF_InternalError, "%s has no _id index", mf_coll_name(c));
    int rc = mf_index_keys(x, id_doc, &keys, &mk, err);
    if (rc == 0 && keys.n == 1) {
        const uint8_t *v;
        size_t vl;
        rc = mf_btree_get(mf_engine_tree(e, x->tree), keys.keys[0].data, keys.keys[0].len, found,
                          &v, &vl, err);
        if (rc == 0 && *found && vl == 8)
            *rid = mf_record_id_decode(v);
        else
            *found = false;
    }
    if (rc == 0 && *found && copy) {
        uint8_t k[8];
        const uint8_t *v;
        size_t vl;
        bool there;
        mf_record_id_encode(*rid, k);
        rc = mf_btree_get(mf_engine_tree(e, mf_coll_records(c)), k, 8, &there, &v, &vl, err);
        bson_t doc;
        if (rc == 0 && there && bson_init_static(&doc, v, vl)) {
            bson_reinit(copy);
            bson_concat(copy, &doc);
        } else if (rc == 0) {
            *found = false;
        }
    }
    mf_keyset_free(&keys);
    return rc;
}

int mf_cl_read_by_id(mf_engine *e, const char *ns, const bson_t *id_doc, bson_t *out,
                     bool *found, mf_error *err)
{
    mf_cl_indexes ix = {0};
    uint64_t rid;
    bson_init(out);
    *found = false;
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c)
        return 0;
    mf_coll_lock(c, false);
    int rc = mf_cl_indexes_load(c, &ix, err);
    if (rc == 0)
        rc = mf_cl_find_by_id(e, c, &ix, id_doc, &rid, found, out, err);
    mf_cl_indexes_free(&ix);
    mf_coll_unlock(c);
    return rc;
}

int mf_cl_put_by_id(mf_engine *e, mf_cl_log *lg, const char *ns, const bson_t *doc,
                    mf_lsn *lsn, mf_error *err)
{
    bson_t none = BSON_INITIALIZER, id = BSON_INITIALIZER, old;
    bson_iter_t it;
    mf_cl_indexes ix = {0};
    uint64_t rid;
    bool found;
    int rc = mf_cl_create(e, lg, ns, &none, NULL, true, err);
    bson_destroy(&none);
    if (rc != 0 && rc != MF_NamespaceExists)
        return rc;
    if (bson_iter_init_find(&it, doc, "_id"))
        mf_bsonx_append_iter(&id, "_id", 3, &it);
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c) {
        mf_engine_catalog_unlock(e);
        bson_destroy(&id);
        return mf_error_set(err, MF_NamespaceNotFound, "%s was dropped meanwhile", ns);
    }
    mf_coll_lock(c, true);
    bson_init(&old);
    rc = mf_cl_indexes_load(c, &ix, err);
    if (rc == 0)
        rc = mf_cl_find_by_id(e, c, &ix, &id, &rid, &found, &old, err);
    if (rc == 0 && !found)
        rc = mf_cl_next_record_id(e, c, &rid, err);
    if (rc == 0)
        rc = mf_cl_write_doc_log(e, c, &ix, rid, found ? &old : NULL, doc, lsn, NULL, lg, err);
    mf_cl_indexes_free(&ix);
    mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    bson_destroy(&old);
    bson_destroy(&id);
    return rc;
}

/* ------------------------------------------------- bounded collections */

int mf_cl_doc_bytes(mf_engine *e, mf_coll *c, int64_t *out, mf_error *err)
{
    mf_cursor cur;
    bool valid;
    *out = 0;
    mf_cursor_init(&cur, mf_engine_tree(e, mf_coll_records(c)));
    int rc = mf_cursor_first(&cur, &valid, err);
    while (rc == 0 && valid) {
        const uint8_t *v;
        size_t vl;
        mf_cursor_value(&cur, &v, &vl);
        *out += (int64_t)vl;
        rc = mf_cursor_next(&cur, &valid, err);
    }
    return rc;
}

int mf_cl_trim_oldest(mf_engine *e, mf_coll *c, mf_cl_indexes *ix, int64_t *bytes, int64_t cap,
                    mf_lsn *lsn, mf_error *err)
{
    int rc = 0;
    while (rc == 0 && *bytes > cap) {
        mf_cursor cur;
        bool valid;
        const uint8_t *k, *v;
        size_t kl, vl;
        bson_t old;
        mf_cursor_init(&cur, mf_engine_tree(e, mf_coll_records(c)));
        if ((rc = mf_cursor_first(&cur, &valid, err)) != 0 || !valid)
            break;
        mf_cursor_key(&cur, &k, &kl);
        mf_cursor_value(&cur, &v, &vl);
        /* a copy: the write moves what the cursor points into */
        uint8_t *copy = malloc(vl);
        if (!copy)
            return mf_error_oom(err);
        memcpy(copy, v, vl);
        uint64_t rid = mf_record_id_decode(k);
        if (bson_init_static(&old, copy, vl))
            rc = mf_cl_write_doc(e, c, ix, rid, &old, NULL, lsn, NULL, err);
        else
            rc = mf_error_set(err, MF_DataCorruption, "a damaged record in %s", mf_coll_name(c));
        free(copy);
        if (rc == 0)
            *bytes -= (int64_t)vl;
    }
    return rc;
}

/* ------------------------------------------------------- stored documents */

/* One past the largest RecordId in the record tree. */
int mf_cl_next_record_id(mf_engine *e, mf_coll *c, uint64_t *out, mf_error *err)
{
    mf_cursor cur;
    bool valid;
    mf_cursor_init(&cur, mf_engine_tree(e, mf_coll_records(c)));
    int rc = mf_cursor_last(&cur, &valid, err);
    if (rc)
        return rc;
    *out = 1;
    if (valid) {
        const uint8_t *k;
        size_t kl;
        mf_cursor_key(&cur, &k, &kl);
        if (kl == 8)
            *out = mf_record_id_decode(k) + 1;
    }
    return 0;
}

/* Whether the document `it` (an _id's value, or something inside it) may
 * be stored, as mongod's BSONObj::storageValidEmbedded: no field name
 * starts with '$', at any depth (arrays and a code-with-scope's scope
 * included), except a DBRef's: a first field "$ref" holding a string,
 * then "$id", then optionally "$db" holding a string.  As mongod, the
 * values of "$ref" and "$id" are not looked into.  On failure `*bad` is
 * the offending name.  Depth is bounded: the caller checked it. */
static bool storage_valid_embedded(const bson_iter_t *it, const char **bad)
{
    bson_iter_t f;
    if (BSON_ITER_HOLDS_CODEWSCOPE(it)) {
        uint32_t len, slen;
        const uint8_t *scope;
        bson_t sc;
        bson_iter_codewscope(it, &len, &slen, &scope);
        if (!bson_init_static(&sc, scope, slen) || !bson_iter_init(&f, &sc))
            return true;
    } else if (!bson_iter_recurse(it, &f)) {
        return true;
    }
    bool first = true, more = bson_iter_next(&f);
    while (more) {
        const char *k = bson_iter_key(&f);
        if (k[0] == '$') {
            if (!first || strcmp(k, "$ref") != 0 || !BSON_ITER_HOLDS_UTF8(&f) ||
                !bson_iter_next(&f) || strcmp(bson_iter_key(&f), "$id") != 0) {
                *bad = k;
                return false;
            }
            /* {$ref: "c", $id: v, ...}: what follows $id is checked as
             * any field would be, but a string $db */
            first = false;
            if (!bson_iter_next(&f))
                return true;
            k = bson_iter_key(&f);
            if (strcmp(k, "$db") == 0 && BSON_ITER_HOLDS_UTF8(&f)) {
                more = bson_iter_next(&f);
                continue;
            }
            if (k[0] == '$') {
                *bad = k;
                return false;
            }
        }
        if ((BSON_ITER_HOLDS_DOCUMENT(&f) || BSON_ITER_HOLDS_ARRAY(&f) ||
             BSON_ITER_HOLDS_CODEWSCOPE(&f)) &&
            !storage_valid_embedded(&f, bad))
            return false;
        first = false;
        more = bson_iter_next(&f);
    }
    return true;
}

/* The document as stored: _id first (generated if absent). */
int mf_cl_stored_form(const bson_t *doc, bson_t *out, bson_iter_t *id, mf_error *err)
{
    bson_iter_t it;
    bool has_id = bson_iter_init_find(&it, doc, "_id");
    /* mongod's fixDocumentForInsert: size, then depth, before the _id. */
    if (doc->len > MF_MAX_BSON_OBJECT_SIZE)
        return mf_error_set(err, MF_BadValue,
                            "object to insert too large. size in bytes: %u, max size: %d",
                            doc->len, MF_MAX_BSON_OBJECT_SIZE);
    if (mf_bsonx_depth_exceeds(doc, MF_BSON_MAX_STORAGE_DEPTH))
        return mf_error_set(err, MF_Overflow,
                            "cannot insert document because it exceeds %d levels of nesting",
                            MF_BSON_MAX_STORAGE_DEPTH);
    if (has_id) {
        bson_type_t t = bson_iter_type(&it);
        if (t == BSON_TYPE_ARRAY)
            return mf_error_set(err, MF_InvalidIdField, "can't use an array for _id");
        if (t == BSON_TYPE_REGEX)
            return mf_error_set(err, MF_InvalidIdField, "can't use a regex for _id");
        if (t == BSON_TYPE_UNDEFINED)
            return mf_error_set(err, MF_InvalidIdField, "can't use a undefined for _id");
    }
    /* Since 5.0 field names may start with '$' -- except inside _id,
     * where only a DBRef's may (mongod's storageValidIdField). */
    const char *bad = NULL;
    if (has_id && BSON_ITER_HOLDS_DOCUMENT(&it) && !storage_valid_embedded(&it, &bad))
        return mf_error_set(err, MF_DollarPrefixedFieldName,
                            "_id fields may not contain '$'-prefixed fields: %s is not valid for "
                            "storage.",
                            bad);
    bson_init(out);
    if (has_id) {
        bson_iter_init_find(&it, doc, "_id");
        mf_bsonx_append_iter(out, "_id", 3, &it);
        mf_bsonx_copy_except(doc, out, "_id");
    } else {
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        BSON_APPEND_OID(out, "_id", &oid);
        bson_concat(out, doc);
    }
    bson_iter_init(id, out);
    bson_iter_next(id);
    return 0;
}

/* A DuplicateKey write error, as mongod words it. */
/* Insert one document into `c` (exclusive lock held). */
int mf_cl_insert_doc(mf_engine *e, mf_coll *c, mf_cl_indexes *ix, uint64_t *next_id,
                   const bson_t *doc, bson_t *stored, bson_iter_t *id, mf_lsn *lsn, mf_cl_dup *dup,
                   mf_cl_log *lg, mf_error *err)
{
    bool capped = mf_cl_capped(c, NULL, NULL); /* (its options read once) */
    int rc = mf_cl_stored_form(doc, stored, id, err);
    if (rc == 0 && capped)
        rc = mf_cl_capped_check(c, stored, err);
    if (rc == 0 && ix->val)
        rc = mf_cl_validator_check(ix->val, NULL, stored, err);
    if (rc)
        return rc;
    /* past the RecordIds open transactions took for their inserts */
    *next_id = mf_cl_txns_first_free(lg ? lg->txns : NULL, c, *next_id);
    rc = mf_cl_write_doc_log(e, c, ix, *next_id, NULL, stored, lsn, dup, lg, err);
    if (rc == 0)
        (*next_id)++;
    if (rc == 0 && capped) /* its oldest go past its size or max */
        rc = mf_cl_capped_trim(e, c, ix, lsn, lg, err);
    return rc;
}


int mf_cl_delete_by_id(mf_engine *e, mf_cl_log *lg, const char *ns, const bson_t *id_doc,
                       bool *deleted, mf_lsn *lsn, mf_error *err)
{
    mf_cl_indexes ix = {0};
    uint64_t rid;
    bson_t old;
    *deleted = false;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c) {
        mf_engine_catalog_unlock(e);
        return 0;
    }
    mf_coll_lock(c, true);
    bson_init(&old);
    int rc = mf_cl_indexes_load(c, &ix, err);
    if (rc == 0)
        rc = mf_cl_find_by_id(e, c, &ix, id_doc, &rid, deleted, &old, err);
    if (rc == 0 && *deleted)
        rc = mf_cl_write_doc_log(e, c, &ix, rid, &old, NULL, lsn, NULL, lg, err);
    if (rc)
        *deleted = false;
    mf_cl_indexes_free(&ix);
    mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    bson_destroy(&old);
    return rc;
}

int mf_cl_each_doc(mf_engine *e, const char *ns, int (*fn)(void *arg, const bson_t *doc,
                                                          mf_error *err),
                   void *arg, mf_error *err)
{
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c)
        return 0;
    mf_cursor cur;
    bool valid;
    mf_coll_lock(c, false);
    mf_cursor_init(&cur, mf_engine_tree(e, mf_coll_records(c)));
    int rc = mf_cursor_first(&cur, &valid, err);
    while (rc == 0 && valid) {
        const uint8_t *k;
        size_t kl;
        bson_t doc;
        bool found;
        mf_cursor_key(&cur, &k, &kl);
        if (kl == 8 && (rc = mf_cl_record_doc(e, c, k, &doc, &found, err)) == 0 && found)
            rc = fn(arg, &doc, err);
        if (rc == 0)
            rc = mf_cursor_next(&cur, &valid, err);
    }
    mf_coll_unlock(c);
    return rc;
}
