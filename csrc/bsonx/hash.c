/*
 * hash.c -- mongod's hash of a BSON element (BSONElementHasher::hash64),
 * the key of a hashed index and the value of $toHashedIndexKey.
 *
 * The hash is MD5 over a byte stream, of which the first 8 bytes of the
 * digest, read little-endian, are the signed 64-bit result.  The stream:
 *
 *   seed              int32 LE (0: mongod no longer takes another)
 *   then the element, without its name:
 *     canonical type  int32 LE (the comparison order's type bracket:
 *                     MinKey -1, undefined 0, null 5, numbers 10,
 *                     string and symbol 15, object 20, array 25 ...)
 *     a number        its value as int64 LE, squashed as mongod's
 *                     safeNumberLongForHash does (so 1, 1.0, 1.9,
 *                     NumberLong(1) and Decimal128 "1" hash alike)
 *     an object/array each element in turn, WITH its name (and the name's
 *                     NUL), then the end: canonical type 0, nothing else
 *     code w/ scope   its code string's bytes (with the NUL, without the
 *                     length), then the scope as an object
 *     anything else   its value's bytes as BSON stores them
 *
 * Under a collation (an index's), each string, at any depth, is first
 * replaced by a string holding its sort key, as mongod's
 * CollationIndexKey::collationAwareIndexKeyAppend does; a symbol is kept.
 *
 * MD5 is OpenSSL's (libcrypto).  The stream is built in one buffer and
 * digested in one call: hashed values are short, and a key is hashed once
 * per write.
 */
#include "bsonx.h"

#include <math.h>
#include <openssl/evp.h>
#include <string.h>

/* safeNumberLongForHash: NaN is 0; a double of 2^63 exactly is INT64_MIN
 * (the old overflowing cast, kept); past the ends, the end; a double
 * truncated toward zero, a decimal rounded half to even (Decimal128's
 * toLong). */
static int64_t number_for_hash(const bson_iter_t *it)
{
    const double two63 = 9223372036854775808.0;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: return bson_iter_int32(it);
    case BSON_TYPE_INT64: return bson_iter_int64(it);
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        if (isnan(d))
            return 0;
        if (d == two63)
            return INT64_MIN;
        if (!(d < two63))
            return INT64_MAX;
        if (d < -two63)
            return INT64_MIN;
        return (int64_t)d;
    }
    default: {
        bson_decimal128_t v;
        bson_iter_decimal128(it, &v);
        if (mf_dec_isnan(v))
            return 0;
        if (mf_dec_cmp(v, mf_dec_from_int64(INT64_MAX)) > 0)
            return INT64_MAX;
        if (mf_dec_cmp(v, mf_dec_from_int64(INT64_MIN)) < 0)
            return INT64_MIN;
        return mf_dec_to_int64(v, MF_DEC_HALF_EVEN, NULL);
    }
    }
}

static int put_i32(mf_buf *b, int32_t v) { return mf_buf_put_i32le(b, v); }

static int put_i64(mf_buf *b, int64_t v)
{
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)((uint64_t)v >> (8 * i));
    return mf_buf_append(b, le, 8);
}

static int put_element(mf_buf *b, const bson_iter_t *it, const mf_collator *coll, bool named);

/* Each element of the document or array at `it`, named, then the end. */
static int put_members(mf_buf *b, const bson_iter_t *it, const mf_collator *coll)
{
    bson_iter_t ch;
    if (!bson_iter_recurse(it, &ch))
        return -1;
    while (bson_iter_next(&ch))
        if (put_element(b, &ch, coll, true) != 0)
            return -1;
    return put_i32(b, 0); /* the EOO element: its type, no name, no value */
}

static int put_element(mf_buf *b, const bson_iter_t *it, const mf_collator *coll, bool named)
{
    bson_type_t t = bson_iter_type(it);
    if (put_i32(b, mf_bsonx_canonical_type(t)) != 0)
        return -1;
    if (named && mf_buf_append(b, bson_iter_key(it), bson_iter_key_len(it) + 1) != 0)
        return -1;
    switch (t) {
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128:
        return put_i64(b, number_for_hash(it));
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        return put_members(b, it, coll);
    case BSON_TYPE_CODEWSCOPE: {
        uint32_t len, slen;
        const uint8_t *scope;
        const char *code = bson_iter_codewscope(it, &len, &slen, &scope);
        bson_t s;
        bson_iter_t si;
        if (mf_buf_append(b, code, (size_t)len + 1) != 0 || !bson_init_static(&s, scope, slen) ||
            !bson_iter_init(&si, &s))
            return -1;
        while (bson_iter_next(&si))
            if (put_element(b, &si, coll, true) != 0)
                return -1;
        return put_i32(b, 0);
    }
    case BSON_TYPE_UTF8:
        if (!coll)
            return mf_buf_append(b, it->raw + it->d1, it->next_off - it->d1);
        {
            uint32_t n;
            const char *s = bson_iter_utf8(it, &n);
            size_t at = b->len;
            if (put_i32(b, 0) != 0 || mf_collator_sort_key(coll, s, n, b) != 0 ||
                mf_buf_append(b, "", 1) != 0)
                return -1;
            int32_t slen = (int32_t)(b->len - at - 4);
            for (int i = 0; i < 4; i++)
                b->data[at + (size_t)i] = (uint8_t)((uint32_t)slen >> (8 * i));
            return 0;
        }
    default:
        /* libbson's iterator: the value runs from d1 to the next element */
        return mf_buf_append(b, it->raw + it->d1, it->next_off - it->d1);
    }
}

int mf_bsonx_hash64(const bson_iter_t *it, const mf_collator *coll, int64_t *out)
{
    mf_buf b = {0};
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    int rc = -1;
    if (put_i32(&b, 0) == 0 && put_element(&b, it, coll, false) == 0 &&
        EVP_Digest(b.data, b.len, md, &mdlen, EVP_md5(), NULL) == 1 && mdlen == 16) {
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--)
            v = v << 8 | md[i];
        *out = (int64_t)v;
        rc = 0;
    }
    mf_buf_free(&b);
    return rc;
}

int mf_bsonx_hash64_value(const bson_value_t *v, const mf_collator *coll, int64_t *out)
{
    bson_t one = BSON_INITIALIZER;
    bson_iter_t it;
    int rc = -1;
    bson_value_t null = {.value_type = BSON_TYPE_NULL};
    if (bson_append_value(&one, "", 0, v->value_type == BSON_TYPE_EOD ? &null : v) &&
        bson_iter_init(&it, &one) && bson_iter_next(&it))
        rc = mf_bsonx_hash64(&it, coll, out);
    bson_destroy(&one);
    return rc;
}
