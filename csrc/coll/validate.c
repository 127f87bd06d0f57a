/*
 * validate.c -- validate's checks of one collection, under its shared lock,
 * and their result in mongod's shape (ValidateResults::appendToResultObj):
 *
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
#include "coll.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID_INDEX "_id_"

/* BSONObjBuilder::appendNumber(long long): int32 when |v| < 2^30, else int64. */
static void append_number(bson_t *b, const char *key, int64_t v)
{
    if (v > -(1LL << 30) && v < (1LL << 30))
        BSON_APPEND_INT32(b, key, (int32_t)v);
    else
        BSON_APPEND_INT64(b, key, v);
}

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

int mf_cl_validate(mf_engine *e, const char *ns, mf_deadline *dl, bson_t *out, mf_error *err)
{
    int rc = 0;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c) {
        mf_engine_catalog_unlock(e);
        return mf_error_set(err, MF_NamespaceNotFound,
                            "Collection '%s' does not exist to validate.", ns);
    }
    vstate v = {.e = e, .c = c, .valid = true, .dl = dl};
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

