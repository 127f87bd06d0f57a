/*
 * indexes.c -- a collection's parsed indexes, and what a unique index
 * refused.
 *
 * An index first made multikey by a write is marked so in its catalog spec
 * before the write: the planner must never trust a "not multikey" that a
 * document already contradicts, while a mark with no document behind it
 * (a crash in between) only costs the planner some precision.
 */
#include "coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mf_cl_indexes_load(mf_coll *c, mf_cl_indexes *out, mf_error *err)
{
    size_t n = mf_coll_index_count(c);
    memset(out, 0, sizeof *out);
    if (n == 0)
        return 0;
    out->v = calloc(n, sizeof *out->v);
    if (!out->v)
        return mf_error_oom(err);
    for (size_t i = 0; i < n; i++) {
        const mf_index_info *info = mf_coll_index(c, i);
        int rc = mf_index_desc_init(&out->v[i], info->name, info->tree, info->spec,
                                    info->spec_len, err);
        if (rc) {
            mf_cl_indexes_free(out);
            return rc;
        }
        out->n++;
    }
    return 0;
}

void mf_cl_indexes_free(mf_cl_indexes *x)
{
    for (size_t i = 0; i < x->n; i++)
        mf_index_desc_clear(&x->v[i]);
    free(x->v);
    memset(x, 0, sizeof *x);
}

mf_index_desc *mf_cl_indexes_find(mf_cl_indexes *x, const char *name)
{
    for (size_t i = 0; i < x->n; i++)
        if (strcmp(x->v[i].name, name) == 0)
            return &x->v[i];
    return NULL;
}

/* ------------------------------------------------------------ duplicates */

void mf_cl_dup_clear(mf_cl_dup *d)
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

void mf_cl_dup_fill(mf_cl_dup *d, const mf_index_desc *x, const bson_t *doc)
{
    mf_cl_dup_clear(d);
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

void mf_cl_dup_message(const mf_cl_dup *d, const char *ns, char *out, size_t cap)
{
    /* "E11000 duplicate key error collection: db.c index: a_1 dup key: { a: 1 }" */
    char shown[512];
    mf_bsonx_to_string(&d->key_value, shown, sizeof shown);
    snprintf(out, cap, "E11000 duplicate key error collection: %s index: %s%s%s dup key: %s", ns,
             d->index, d->collation[0] ? " collation: " : "", d->collation, shown);
}

/* --------------------------------------------------------------- multikey */

int mf_cl_mark_multikey(mf_engine *e, mf_coll *c, mf_index_desc *x, uint32_t bits, mf_error *err)
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
    int rc = mf_coll_index_set_spec(e, c, x->name, bson_get_data(&out), out.len, NULL, &lsn, err);
    bson_destroy(&out);
    if (rc == 0)
        x->multikey |= bits;
    return rc;
}

/* Whether the non-unique index `tree` holds key `k` for a record other than
 * `rid`: its entries are key + RecordId, and keys are self-delimiting, so
 * the entries of `k` are exactly those of length k->len + 8 that start with
 * it, one after another from the first at or after `k`. */
