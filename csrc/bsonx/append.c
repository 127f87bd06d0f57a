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

/* Append the element `type` `key` with the value bytes the caller wrote
 * into `b` after the header that begin_elem left: a document of that one
 * element, concatenated onto `dst`. */
static size_t begin_elem(mf_buf *b, bson_type_t type, const char *key, int key_length,
                         bool *ok)
{
    size_t kl = key_length < 0 ? strlen(key) : (size_t)key_length;
    uint8_t t = (uint8_t)type;
    put_le32(b, 0, ok); /* the document's length, set by end_elem */
    put_bytes(b, &t, 1, ok);
    *ok = *ok && memchr(key, 0, kl) == NULL; /* as libbson refuses such keys */
    put_bytes(b, key, kl, ok);
    put_bytes(b, "", 1, ok);
    return b->len;
}

static bool end_elem(bson_t *dst, mf_buf *b, bool ok)
{
    bson_t one;
    put_bytes(b, "", 1, &ok);
    if (ok && b->len <= INT32_MAX) {
        uint32_t n = (uint32_t)b->len;
        b->data[0] = (uint8_t)n;
        b->data[1] = (uint8_t)(n >> 8);
        b->data[2] = (uint8_t)(n >> 16);
        b->data[3] = (uint8_t)(n >> 24);
        ok = bson_init_static(&one, b->data, b->len) && bson_concat(dst, &one);
    } else {
        ok = false;
    }
    mf_buf_free(b);
    return ok;
}

static bool append_code(bson_t *dst, const char *key, int key_length, const char *code,
                        uint32_t len)
{
    mf_buf b = {0};
    bool ok = true;
    begin_elem(&b, BSON_TYPE_CODE, key, key_length, &ok);
    put_string(&b, code, len, &ok);
    return end_elem(dst, &b, ok);
}

static bool append_codewscope(bson_t *dst, const char *key, int key_length, const char *code,
                              uint32_t len, const uint8_t *scope, uint32_t scope_len)
{
    mf_buf b = {0};
    bool ok = true;
    begin_elem(&b, BSON_TYPE_CODEWSCOPE, key, key_length, &ok);
    put_le32(&b, 4 + 4 + len + 1 + scope_len, &ok);
    put_string(&b, code, len, &ok);
    put_bytes(&b, scope, scope_len, &ok);
    return end_elem(dst, &b, ok);
}

static bool append_dbpointer(bson_t *dst, const char *key, int key_length, const char *coll,
                             uint32_t len, const bson_oid_t *oid)
{
    mf_buf b = {0};
    bool ok = true;
    begin_elem(&b, BSON_TYPE_DBPOINTER, key, key_length, &ok);
    put_string(&b, coll, len, &ok);
    put_bytes(&b, oid->bytes, 12, &ok);
    return end_elem(dst, &b, ok);
}

bool mf_bsonx_append_iter(bson_t *dst, const char *key, int key_length, const bson_iter_t *it)
{
    if (!key) {
        key = bson_iter_key(it);
        key_length = (int)bson_iter_key_len(it);
    }
    uint32_t len, scope_len;
    const uint8_t *scope;
    const char *s;
    const bson_oid_t *oid;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_CODE:
        s = bson_iter_code(it, &len);
        if (has_nul(s, len))
            return append_code(dst, key, key_length, s, len);
        break;
    case BSON_TYPE_CODEWSCOPE:
        s = bson_iter_codewscope(it, &len, &scope_len, &scope);
        if (has_nul(s, len))
            return append_codewscope(dst, key, key_length, s, len, scope, scope_len);
        break;
    case BSON_TYPE_DBPOINTER:
        bson_iter_dbpointer(it, &len, &s, &oid);
        if (has_nul(s, len))
            return append_dbpointer(dst, key, key_length, s, len, oid);
        break;
    default:
        break;
    }
    return bson_append_iter(dst, key, key_length, it);
}

bool mf_bsonx_append_value(bson_t *dst, const char *key, int key_length, const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_CODE:
        if (has_nul(v->value.v_code.code, v->value.v_code.code_len))
            return append_code(dst, key, key_length, v->value.v_code.code,
                               v->value.v_code.code_len);
        break;
    case BSON_TYPE_CODEWSCOPE:
        if (has_nul(v->value.v_codewscope.code, v->value.v_codewscope.code_len))
            return append_codewscope(dst, key, key_length, v->value.v_codewscope.code,
                                     v->value.v_codewscope.code_len,
                                     v->value.v_codewscope.scope_data,
                                     v->value.v_codewscope.scope_len);
        break;
    case BSON_TYPE_DBPOINTER:
        if (has_nul(v->value.v_dbpointer.collection, v->value.v_dbpointer.collection_len))
            return append_dbpointer(dst, key, key_length, v->value.v_dbpointer.collection,
                                    v->value.v_dbpointer.collection_len,
                                    &v->value.v_dbpointer.oid);
        break;
    default:
        break;
    }
    return bson_append_value(dst, key, key_length, v);
}

/* `len` bytes of `s` and a NUL, from bson_malloc (which bson_value_destroy
 * frees). */
static char *bytes_dup(const char *s, uint32_t len)
{
    char *p = bson_malloc((size_t)len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

void mf_bsonx_value_copy(const bson_value_t *src, bson_value_t *dst)
{
    switch (src->value_type) {
    case BSON_TYPE_CODE:
        if (has_nul(src->value.v_code.code, src->value.v_code.code_len)) {
            *dst = *src;
            dst->value.v_code.code = bytes_dup(src->value.v_code.code, src->value.v_code.code_len);
            return;
        }
        break;
    case BSON_TYPE_CODEWSCOPE:
        if (has_nul(src->value.v_codewscope.code, src->value.v_codewscope.code_len)) {
            *dst = *src;
            dst->value.v_codewscope.code =
                bytes_dup(src->value.v_codewscope.code, src->value.v_codewscope.code_len);
            dst->value.v_codewscope.scope_data = bson_malloc(src->value.v_codewscope.scope_len);
            memcpy(dst->value.v_codewscope.scope_data, src->value.v_codewscope.scope_data,
                   src->value.v_codewscope.scope_len);
            return;
        }
        break;
    case BSON_TYPE_DBPOINTER:
        if (has_nul(src->value.v_dbpointer.collection, src->value.v_dbpointer.collection_len)) {
            *dst = *src;
            dst->value.v_dbpointer.collection = bytes_dup(src->value.v_dbpointer.collection,
                                                          src->value.v_dbpointer.collection_len);
            return;
        }
        break;
    default:
        break;
    }
    bson_value_copy(src, dst);
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
