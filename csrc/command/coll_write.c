/*
 * coll_write.c -- one document written with all its index entries.
 *
 * Every insert, update and delete of a document goes through
 * mfi_write_doc(): it computes the document's keys in every index before
 * and after (query/index.c), puts the keys it gains and deletes the keys
 * it loses, checks unique indexes, and hands the record and all index
 * changes to the engine as one write -- so after a crash a document is
 * there with all its index entries, or not at all.
 *
 * An index first made multikey by a write is marked so in its catalog spec
 * before the write: the planner must never trust a "not multikey" that a
 * document already contradicts, while a mark with no document behind it
 * (a crash in between) only costs the planner some precision.
 */
#include "command_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mfi_indexes_load(mf_coll *c, mfi_indexes *out, mf_error *err)
{
    size_t n = mf_coll_index_count(c);
    memset(out, 0, sizeof *out);
    if (n == 0)
        return 0;
    out->v = calloc(n, sizeof *out->v);
    if (!out->v)
        return mf_error_set(err, MF_InternalError, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const mf_index_info *info = mf_coll_index(c, i);
        int rc = mf_index_desc_init(&out->v[i], info->name, info->tree, info->spec,
                                    info->spec_len, err);
        if (rc) {
            mfi_indexes_free(out);
            return rc;
        }
        out->n++;
    }
    return 0;
}

void mfi_indexes_free(mfi_indexes *x)
{
    for (size_t i = 0; i < x->n; i++)
        mf_index_desc_clear(&x->v[i]);
    free(x->v);
    memset(x, 0, sizeof *x);
}

mf_index_desc *mfi_indexes_find(mfi_indexes *x, const char *name)
{
    for (size_t i = 0; i < x->n; i++)
        if (strcmp(x->v[i].name, name) == 0)
            return &x->v[i];
    return NULL;
}

/* ------------------------------------------------------------ duplicates */

void mfi_dup_clear(mfi_dup *d)
{
    if (d->has) {
        bson_destroy(&d->key_pattern);
        bson_destroy(&d->key_value);
    }
    d->has = false;
}

/* The value of dotted `path` in `doc` for a key: the first value reached;
 * an array's first element (the one a multikey index key most likely came
 * from; exact enough for a message). */
/* A key value for a message: as stored, except that under a collation a
 * string shows as its comparison key, "CollationKey(0x<hex>)", as mongod
 * shows it (the key is what collided, not the text). */
static void append_key_value(bson_t *into, const char *name, const bson_iter_t *v,
                             const mf_collator *coll)
{
    uint32_t len;
    const char *s = NULL;
    if (coll && BSON_ITER_HOLDS_UTF8(v))
        s = bson_iter_utf8(v, &len);
    else if (coll && BSON_ITER_HOLDS_SYMBOL(v))
        s = bson_iter_symbol(v, &len);
    mf_buf key = {0}, text = {0};
    if (s && mf_collator_sort_key(coll, s, len, &key) == 0 &&
        mf_buf_append(&text, "CollationKey(0x", 15) == 0) {
        static const char hex[] = "0123456789abcdef";
        bool ok = true;
        for (size_t i = 0; ok && i < key.len; i++) {
            char h[2] = {hex[key.data[i] >> 4], hex[key.data[i] & 15]};
            ok = mf_buf_append(&text, h, 2) == 0;
        }
        if (ok && mf_buf_append(&text, ")", 1) == 0) {
            bson_append_utf8(into, name, -1, (const char *)text.data, (int)text.len);
            mf_buf_free(&key);
            mf_buf_free(&text);
            return;
        }
    }
    mf_buf_free(&key);
    mf_buf_free(&text);
    mf_bsonx_append_iter(into, name, -1, v);
}

static void value_at(const bson_t *doc, const char *path, bson_t *into, const char *name,
                     const mf_collator *coll)
{
    bson_iter_t it, sub;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &sub)) {
        if (BSON_ITER_HOLDS_ARRAY(&sub)) {
            bson_iter_t el;
            if (bson_iter_recurse(&sub, &el) && bson_iter_next(&el)) {
                append_key_value(into, name, &el, coll);
                return;
            }
        }
        append_key_value(into, name, &sub, coll);
        return;
    }
    bson_append_null(into, name, -1);
}

void mfi_dup_fill(mfi_dup *d, const mf_index_desc *x, const bson_t *doc)
{
    mfi_dup_clear(d);
    snprintf(d->index, sizeof d->index, "%s", x->name);
    bson_copy_to(x->key, &d->key_pattern);
    bson_init(&d->key_value);
    for (size_t i = 0; i < x->nfields; i++)
        value_at(doc, x->paths[i], &d->key_value, x->paths[i], x->coll);
    d->collation[0] = 0;
    if (x->coll) {
        bson_t spec = BSON_INITIALIZER;
        mf_collator_to_bson(x->coll, &spec);
        mf_bsonx_to_string(&spec, d->collation, sizeof d->collation);
        bson_destroy(&spec);
    }
    d->has = true;
}

void mfi_dup_message(const mfi_dup *d, const char *ns, char *out, size_t cap)
{
    /* "E11000 duplicate key error collection: db.c index: a_1 dup key: { a: 1 }" */
    char shown[512];
    mf_bsonx_to_string(&d->key_value, shown, sizeof shown);
    snprintf(out, cap, "E11000 duplicate key error collection: %s index: %s%s%s dup key: %s", ns,
             d->index, d->collation[0] ? " collation: " : "", d->collation, shown);
}

/* ------------------------------------------------------------- the write */

/* Memory for the operations of one write: keys live until it is done. */
typedef struct opbuf {
    mf_op *ops;
    size_t n, cap;
    mf_buf *keys; /* each op's key bytes (owned) */
    size_t nkeys, capkeys;
} opbuf;

static void opbuf_free(opbuf *b)
{
    for (size_t i = 0; i < b->nkeys; i++)
        mf_buf_free(&b->keys[i]);
    free(b->keys);
    free(b->ops);
}

/* Add an op whose key is `k` (+ the RecordId when `with_rid`). */
static int opbuf_add(opbuf *b, mf_op_kind kind, mf_tree_id tree, const mf_buf *k, bool with_rid,
                     const uint8_t rid[8], mf_error *err)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 8;
        mf_op *v = realloc(b->ops, cap * sizeof *v);
        if (!v)
            return mf_error_set(err, MF_InternalError, "out of memory");
        b->ops = v;
        b->cap = cap;
    }
    if (b->nkeys == b->capkeys) {
        size_t cap = b->capkeys ? b->capkeys * 2 : 8;
        mf_buf *v = realloc(b->keys, cap * sizeof *v);
        if (!v)
            return mf_error_set(err, MF_InternalError, "out of memory");
        b->keys = v;
        b->capkeys = cap;
    }
    mf_buf *kb = &b->keys[b->nkeys];
    memset(kb, 0, sizeof *kb);
    if (mf_buf_append(kb, k->data, k->len) != 0 || (with_rid && mf_buf_append(kb, rid, 8) != 0)) {
        mf_buf_free(kb);
        return mf_error_set(err, MF_InternalError, "out of memory");
    }
    b->nkeys++;
    b->ops[b->n++] = (mf_op){.kind = kind, .tree = tree, .key = kb->data, .klen = kb->len,
                             .val = kind == MF_OP_PUT ? rid : NULL,
                             .vlen = kind == MF_OP_PUT ? 8 : 0};
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

int mfi_mark_multikey(mf_engine *e, mf_coll *c, mf_index_desc *x, uint32_t bits, mf_error *err)
{
    if ((x->multikey | bits) == x->multikey)
        return 0;
    const mf_index_info *info = NULL;
    for (size_t i = 0; i < mf_coll_index_count(c); i++)
        if (strcmp(mf_coll_index(c, i)->name, x->name) == 0)
            info = mf_coll_index(c, i);
    bson_t spec, out = BSON_INITIALIZER;
    if (!info || !bson_init_static(&spec, info->spec, info->spec_len))
        return mf_error_set(err, MF_InternalError, "index %s has no spec", x->name);
    bson_copy_to_excluding_noinit(&spec, &out, "multikeyPaths", NULL);
    BSON_APPEND_INT64(&out, "multikeyPaths", (int64_t)(x->multikey | bits));
    mf_lsn lsn;
    int rc = mf_coll_index_set_spec(e, c, x->name, bson_get_data(&out), out.len, &lsn, err);
    bson_destroy(&out);
    if (rc == 0)
        x->multikey |= bits;
    return rc;
}

/* Whether the non-unique index `tree` holds key `k` for a record other than
 * `rid`: its entries are key + RecordId, and keys are self-delimiting, so
 * the entries of `k` are exactly those of length k->len + 8 that start with
 * it, one after another from the first at or after `k`. */
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

int mfi_write_doc(mf_engine *e, mf_coll *c, mfi_indexes *ix, uint64_t rid, const bson_t *old_doc,
                  const bson_t *new_doc, mf_lsn *lsn, mfi_dup *dup, mf_error *err)
{
    uint8_t r[8];
    opbuf b = {0};
    mf_keyset before = {0}, after = {0};
    int64_t ins = 0, del = 0; /* index entries put and deleted */
    int rc = 0;
    mf_record_id_encode(rid, r);
    /* The record itself first: its op carries the document, not a key. */
    b.ops = malloc(8 * sizeof *b.ops);
    if (!b.ops)
        return mf_error_set(err, MF_InternalError, "out of memory");
    b.cap = 8;
    b.ops[b.n++] = new_doc ? (mf_op){.kind = MF_OP_PUT, .tree = mf_coll_records(c), .key = r,
                                     .klen = 8, .val = bson_get_data(new_doc),
                                     .vlen = new_doc->len}
                           : (mf_op){.kind = MF_OP_DELETE, .tree = mf_coll_records(c), .key = r,
                                     .klen = 8};
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
                (rc = opbuf_add(&b, MF_OP_DELETE, x->tree, &before.keys[k], !x->unique, r,
                                err)) == 0)
                del++;
        for (size_t k = 0; rc == 0 && k < after.n; k++) {
            if (key_in(&before, &after.keys[k]))
                continue;
            if (x->unique || x->prepare_unique) {
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
                        mfi_dup_fill(dup, x, new_doc);
                    rc = mf_error_set(err, MF_DuplicateKey, "duplicate key in index %s",
                                      x->name);
                    break;
                }
            }
            if (rc == 0 &&
                (rc = opbuf_add(&b, MF_OP_PUT, x->tree, &after.keys[k], !x->unique, r, err)) == 0)
                ins++;
        }
        if (rc == 0 && mk_new)
            rc = mfi_mark_multikey(e, c, x, mk_new, err);
    }
    if (rc == 0)
        rc = mf_engine_write(e, b.ops, b.n, lsn, err);
    if (rc == 0) {
        ix->keys_inserted += ins;
        ix->keys_deleted += del;
    }
    mf_keyset_free(&before);
    mf_keyset_free(&after);
    opbuf_free(&b);
    return rc;
}

/* ------------------------------------------------- bounded collections */

int mfi_coll_doc_bytes(mf_engine *e, mf_coll *c, int64_t *out, mf_error *err)
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

int mfi_trim_oldest(mf_engine *e, mf_coll *c, mfi_indexes *ix, int64_t *bytes, int64_t cap,
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
            return mf_error_set(err, MF_InternalError, "out of memory");
        memcpy(copy, v, vl);
        uint64_t rid = mf_record_id_decode(k);
        if (bson_init_static(&old, copy, vl))
            rc = mfi_write_doc(e, c, ix, rid, &old, NULL, lsn, NULL, err);
        else
            rc = mf_error_set(err, MF_DataCorruption, "a damaged record in %s", mf_coll_name(c));
        free(copy);
        if (rc == 0)
            *bytes -= (int64_t)vl;
    }
    return rc;
}

/* $indexStats: one more access of the index trial runs chose. */
static void count_chosen(void *inst, mf_coll *c, const char *index)
{
    mfi_index_usage_count(inst, mf_coll_name(c), index);
}

/* $indexStats: one more access of the index `s` reads, if any (once trial
 * runs choose it, if they are to: count_chosen). */
static void count_index_use(mf_instance *inst, mf_coll *c, const mf_scan *s)
{
    size_t n = mf_scan_nkids(s);
    for (size_t i = 0; i < n; i++) /* an OR: each clause's index */
        count_index_use(inst, c, mf_scan_kid(s, i));
    if (n || mf_scan_undecided(s))
        return;
    const char *name = mf_scan_index_name(s);
    if (!name && strcmp(mf_scan_describe(s), "IDHACK") == 0)
        name = "_id_"; /* mongod's IDHACK reports the _id index used */
    if (name)
        mfi_index_usage_count(inst, mf_coll_name(c), name);
}

int mfi_scan_new(mf_instance *inst, mf_coll *c, const mfi_indexes *ix, const bson_t *filter,
                 const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                 mf_scan **out, bool *sorted, mf_error *err)
{
    return mfi_scan_new_ex(inst, c, ix, filter, hint, sort, coll, NULL, out, sorted, err);
}

int mfi_scan_new_ex(mf_instance *inst, mf_coll *c, const mfi_indexes *ix, const bson_t *filter,
                    const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                    const mf_scan_extra *x, mf_scan **out, bool *sorted, mf_error *err)
{
    /* A query run for a client (`inst`) keeps and uses the plan cache;
     * explain (no `inst`) plans afresh, as it shows the trials. */
    mf_scan_extra with = x ? *x : (mf_scan_extra){0};
    if (inst) {
        with.cache = inst->plan_cache;
        with.chosen = count_chosen;
        with.chosen_arg = inst;
    }
    int rc = mf_scan_new_ex(c, ix ? ix->v : NULL, ix ? ix->n : 0, filter, hint, sort, coll, &with,
                            out, sorted, err);
    if (rc == 0 && inst)
        count_index_use(inst, c, *out);
    return rc;
}
