/*
 * index_text.c -- the text index kind (index_type.h): its spec as
 * createIndexes stores it, what a descriptor keeps of it, and its keys.
 *
 * Keys (mongod's FTSIndexFormat::getKeys, text index version 3): one per
 * distinct term of the document (text.h's scores), each
 *
 *   FIELD              ENCODING (keyenc.c)
 *   prefix fields      their values (null when missing), as a b-tree's
 *   term               string; a term longer than 224 bytes is its first
 *                      224 bytes and 32 hex digits of a hash of it all
 *   score              double: the document's score of the term
 *   suffix fields      their values
 *
 * so the keys of one term (under equal prefix values) are contiguous and a
 * $text scan reads them by prefix (plan_text.c).  A prefix or suffix field
 * that meets an array is refused (CannotBuildIndexKeys, as mongod), and a
 * document with more than one term marks the index multikey (explain's
 * isMultiKey, as mongod's text indexes always are once they hold one).
 * A text index bounds no predicate but $text: the planner uses it for
 * nothing else.
 */
#include "index_type.h"
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* mongod's termKeyPrefixLengthV3. */
#define TERM_PREFIX 224

typedef struct text_kind {
    mfi_text_spec ts;
    bson_t *spec;
} text_kind;

int mfi_text_index_fix_spec(const bson_t *in, bson_t *out, mf_error *err)
{
    return mfi_text_fix_spec(in, out, err);
}

int mfi_text_index_desc_init(mf_index_desc *d, const bson_t *spec, mf_error *err)
{
    text_kind *k = calloc(1, sizeof *k);
    if (!k || !(k->spec = bson_copy(spec))) {
        free(k);
        return mf_error_oom(err);
    }
    int rc = mfi_text_spec_init(&k->ts, spec, err);
    if (rc) {
        bson_destroy(k->spec);
        free(k);
        return rc;
    }
    d->kind = k;
    return 0;
}

void mfi_text_index_desc_clear(mf_index_desc *d)
{
    text_kind *k = d->kind;
    if (!k)
        return;
    mfi_text_spec_clear(&k->ts);
    bson_destroy(k->spec);
    free(k);
    d->kind = NULL;
}

const mfi_text_spec *mfi_text_index_spec(const mf_index_desc *d)
{
    return d->kind ? &((const text_kind *)d->kind)->ts : NULL;
}

const bson_t *mfi_text_index_stored(const mf_index_desc *d)
{
    return d->kind ? ((const text_kind *)d->kind)->spec : NULL;
}

int mfi_text_key_term(mf_buf *out, const char *term, size_t len)
{
    char buf[TERM_PREFIX + 33];
    bson_value_t v = {.value_type = BSON_TYPE_UTF8};
    if (len > TERM_PREFIX) {
        XXH128_hash_t h = XXH3_128bits(term, len);
        memcpy(buf, term, TERM_PREFIX);
        snprintf(buf + TERM_PREFIX, 33, "%016llx%016llx", (unsigned long long)h.high64,
                 (unsigned long long)h.low64);
        term = buf;
        len = TERM_PREFIX + 32;
    }
    v.value.v_utf8.str = (char *)term;
    v.value.v_utf8.len = (uint32_t)len;
    return mf_bsonx_key_append_value(out, &v, false);
}

/* The value at `path` for a prefix or suffix field: none through an array. */
static int extra_value(const bson_t *doc, const char *path, bson_iter_t *out, bool *found,
                       mf_error *err)
{
    bson_iter_t it;
    bson_t cur = *doc, sub;
    const char *p = path;
    *found = false;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        bool hit = false;
        if (bson_iter_init(&it, &cur))
            while (bson_iter_next(&it))
                if (bson_iter_key_len(&it) == n && memcmp(bson_iter_key(&it), p, n) == 0) {
                    hit = true;
                    break;
                }
        if (!hit)
            return 0;
        if (BSON_ITER_HOLDS_ARRAY(&it)) {
            char s[512];
            mf_bsonx_to_string(doc, s, sizeof s);
            return mf_error_set(err, MF_CannotBuildIndexKeys,
                                "Field '%s' of text index contains an array in document: %s",
                                path, s);
        }
        if (!dot) {
            *out = it;
            *found = true;
            return 0;
        }
        if (!mf_bsonx_doc_view(&it, &sub))
            return 0;
        cur = sub;
        p = dot + 1;
    }
}

/* The encoded values of `n` extra fields `paths` (their first is key
 * field `first`). */
static int encode_extras(const mf_index_desc *d, const bson_t *doc, char *const *paths, size_t n,
                         size_t first, mf_buf *out, mf_error *err)
{
    bson_iter_t null_it;
    bson_t nd = BSON_INITIALIZER;
    BSON_APPEND_NULL(&nd, "");
    bson_iter_init_find(&null_it, &nd, "");
    for (size_t i = 0; i < n; i++) {
        bson_iter_t v;
        bool found;
        int rc = extra_value(doc, paths[i], &v, &found, err);
        if (rc)
            return rc;
        if (mf_bsonx_key_append(out, found ? &v : &null_it, d->desc[first + i]) != 0)
            return mf_error_oom(err);
    }
    return 0;
}

int mfi_text_index_keys(const mf_index_desc *d, const bson_t *doc, mf_keyset *out,
                        uint32_t *multikey, mf_error *err)
{
    const mfi_text_spec *ts = mfi_text_index_spec(d);
    mfi_text_terms terms = {0};
    mf_buf before = {0}, after = {0};
    int rc;
    mf_keyset_clear(out);
    *multikey = 0;
    if (!ts)
        return mf_error_set(err, MF_InternalError, "text index %s without its spec", d->name);
    if (d->partial && !mf_matcher_match(d->partial, doc))
        return 0;
    if ((rc = encode_extras(d, doc, ts->before, ts->nbefore, 0, &before, err)) != 0 ||
        (rc = encode_extras(d, doc, ts->after, ts->nafter, ts->nbefore + 2, &after, err)) != 0 ||
        (rc = mfi_text_score_doc(ts, doc, &terms, err)) != 0)
        goto done;
    size_t room = MF_BTREE_MAX_KEY - 8;
    for (size_t i = 0; i < terms.n; i++) {
        mf_buf *key;
        bson_value_t score = {.value_type = BSON_TYPE_DOUBLE};
        score.value.v_double = terms.v[i].score;
        if (mfi_keyset_add(out, &key) != 0 || mf_buf_append(key, before.data, before.len) != 0 ||
            mfi_text_key_term(key, terms.v[i].term, strlen(terms.v[i].term)) != 0 ||
            mf_bsonx_key_append_value(key, &score, false) != 0 ||
            mf_buf_append(key, after.data, after.len) != 0) {
            rc = mf_error_oom(err);
            goto done;
        }
        if (key->len > room) {
            rc = mf_error_set(err, MF_KeyTooLong,
                              "key too large to index, failing index %s: a key of %zu bytes "
                              "(at most %zu)",
                              d->name, key->len, room);
            goto done;
        }
    }
    qsort(out->keys, out->n, sizeof *out->keys, mfi_key_cmp);
    if (out->n > 1)
        *multikey = ts->nbefore < 32 ? 1u << ts->nbefore : 0;
done:
    if (rc)
        mf_keyset_clear(out);
    mfi_text_terms_free(&terms);
    mf_buf_free(&before);
    mf_buf_free(&after);
    return rc;
}

int mfi_text_index_bounds(const mf_index_desc *d, size_t field, const mfi_pred *pr, mfi_oil *out,
                          bool *usable, bool *exact)
{
    (void)d, (void)field, (void)pr, (void)out;
    *usable = false; /* a text index serves $text alone (plan_text.c) */
    *exact = false;
    return 0;
}
