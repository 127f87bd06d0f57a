/*
 * append.c -- libbson's element appenders and value copy, without their
 * loss of Code, CodeWScope and DBPointer text past an embedded NUL.
 *
 * BSON gives those strings a length, and a NUL may stand inside one.
 * libbson's bson_append_code, bson_append_code_with_scope and
 * bson_append_dbpointer take C strings, and bson_append_iter,
 * bson_append_value and bson_copy_to_excluding go through them, so a
 * document copied element by element lost the text after the NUL (an
 * inserted Code("x\0y") was stored as Code("x")); bson_value_copy copies
 * them with bson_strndup, which leaves zeros after the NUL.  Here such a
 * value is written from its bytes; every other value goes to libbson as
 * before.
 */
#include "bsonx.h"

#include <string.h>

static bool has_nul(const char *s, uint32_t len)
{
    return len > 0 && memchr(s, 0, len) != NULL;
}

static void put_le32(mf_buf *b, uint32_t v, bool *ok)
{
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    *ok = *ok && mf_buf_append(b, le, 4) == 0;
}

static void put_bytes(mf_buf *b, const void *p, size_t n, bool *ok)
{
    *ok = *ok && mf_buf_append(b, p, n) == 0;
}

/* A BSON string's body: int32 length with its NUL, the bytes, the NUL. */
static void put_string(mf_buf *b, const char *s, uint32_t len, bool *ok)
{
    put_le32(b, len + 1, ok);
    put_bytes(b, s, len, ok);
    put_bytes(b, "", 1, ok);
}

/* Whether `v` is a Code, CodeWScope or DBPointer whose string holds a
 * NUL: the values libbson would cut. */
static bool needs_bytes(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_CODE:
        return has_nul(v->value.v_code.code, v->value.v_code.code_len);
    case BSON_TYPE_CODEWSCOPE:
        return has_nul(v->value.v_codewscope.code, v->value.v_codewscope.code_len);
    case BSON_TYPE_DBPOINTER:
        return has_nul(v->value.v_dbpointer.collection, v->value.v_dbpointer.collection_len);
    default:
        return false;
    }
}

/* Append `key`: `v` (one that needs_bytes) from its bytes: a document of
 * that one element, concatenated onto `dst`. */
static bool append_bytes(bson_t *dst, const char *key, int key_length, const bson_value_t *v)
{
    mf_buf b = {0};
    bool ok = true;
    bson_t one;
    size_t kl = key_length < 0 ? strlen(key) : (size_t)key_length;
    uint8_t t = (uint8_t)v->value_type;
    put_le32(&b, 0, &ok); /* the document's length, set below */
    put_bytes(&b, &t, 1, &ok);
    ok = ok && memchr(key, 0, kl) == NULL; /* as libbson refuses such keys */
    put_bytes(&b, key, kl, &ok);
    put_bytes(&b, "", 1, &ok);
    if (v->value_type == BSON_TYPE_CODE) {
        put_string(&b, v->value.v_code.code, v->value.v_code.code_len, &ok);
    } else if (v->value_type == BSON_TYPE_CODEWSCOPE) {
        const uint32_t len = v->value.v_codewscope.code_len;
        put_le32(&b, 4 + 4 + len + 1 + v->value.v_codewscope.scope_len, &ok);
        put_string(&b, v->value.v_codewscope.code, len, &ok);
        put_bytes(&b, v->value.v_codewscope.scope_data, v->value.v_codewscope.scope_len, &ok);
    } else {
        put_string(&b, v->value.v_dbpointer.collection, v->value.v_dbpointer.collection_len,
                   &ok);
        put_bytes(&b, v->value.v_dbpointer.oid.bytes, 12, &ok);
    }
    put_bytes(&b, "", 1, &ok);
    if (ok && b.len <= INT32_MAX) {
        uint32_t n = (uint32_t)b.len;
        for (int i = 0; i < 4; i++)
            b.data[i] = (uint8_t)(n >> (8 * i));
        ok = bson_init_static(&one, b.data, b.len) && bson_concat(dst, &one);
    } else {
        ok = false;
    }
    mf_buf_free(&b);
    return ok;
}

bool mf_bsonx_append_iter(bson_t *dst, const char *key, int key_length, const bson_iter_t *it)
{
    if (!key) {
        key = bson_iter_key(it);
        key_length = (int)bson_iter_key_len(it);
    }
    bson_type_t t = bson_iter_type(it);
    if (t == BSON_TYPE_CODE || t == BSON_TYPE_CODEWSCOPE || t == BSON_TYPE_DBPOINTER) {
        bson_iter_t at = *it; /* bson_iter_value fills the iterator's value */
        return mf_bsonx_append_value(dst, key, key_length, bson_iter_value(&at));
    }
    return bson_append_iter(dst, key, key_length, it);
}

bool mf_bsonx_append_value(bson_t *dst, const char *key, int key_length, const bson_value_t *v)
{
    if (needs_bytes(v))
        return append_bytes(dst, key, key_length, v);
    return bson_append_value(dst, key, key_length, v);
}

/* `len` bytes at `s` and a NUL, from bson_malloc (which
 * bson_value_destroy frees). */
static void *bytes_dup(const void *s, size_t len, size_t nul)
{
    char *p = bson_malloc(len + nul);
    memcpy(p, s, len);
    if (nul)
        p[len] = '\0';
    return p;
}

void mf_bsonx_value_copy(const bson_value_t *src, bson_value_t *dst)
{
    if (!needs_bytes(src)) {
        bson_value_copy(src, dst);
        return;
    }
    *dst = *src;
    if (src->value_type == BSON_TYPE_CODE) {
        dst->value.v_code.code = bytes_dup(src->value.v_code.code, src->value.v_code.code_len, 1);
    } else if (src->value_type == BSON_TYPE_CODEWSCOPE) {
        dst->value.v_codewscope.code =
            bytes_dup(src->value.v_codewscope.code, src->value.v_codewscope.code_len, 1);
        dst->value.v_codewscope.scope_data = bytes_dup(src->value.v_codewscope.scope_data,
                                                       src->value.v_codewscope.scope_len, 0);
    } else {
        dst->value.v_dbpointer.collection = bytes_dup(src->value.v_dbpointer.collection,
                                                      src->value.v_dbpointer.collection_len, 1);
    }
}

void mf_bsonx_copy_except(const bson_t *src, bson_t *dst, const char *except)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, src))
        return;
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), except) != 0)
            mf_bsonx_append_iter(dst, NULL, 0, &it);
}

bool mf_bsonx_doc_view(const bson_iter_t *it, bson_t *out)
{
    uint32_t len;
    const uint8_t *data;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return false;
    bson_iter_document(it, &len, &data);
    return bson_init_static(out, data, len);
}

bool mf_bsonx_container_view(const bson_iter_t *it, bson_t *out)
{
    uint32_t len;
    const uint8_t *data;
    if (BSON_ITER_HOLDS_DOCUMENT(it))
        bson_iter_document(it, &len, &data);
    else if (BSON_ITER_HOLDS_ARRAY(it))
        bson_iter_array(it, &len, &data);
    else
        return false;
    return bson_init_static(out, data, len);
}
