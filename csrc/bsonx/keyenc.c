/*
 * keyenc.c -- the order-preserving key encoding: byte strings whose memcmp
 * order is MongoDB's comparison order (compare.c), so a B+tree of index
 * keys never parses BSON to compare.  Equal values of different numeric
 * types (1, 1.0, NumberLong(1), NumberDecimal("1.00")) encode identically.
 *
 * One value is a tag byte (its canonical type bracket + 10, so MinKey is 9
 * and MaxKey 137; 0 never starts a value) and a payload:
 *
 *   null, undefined, MinKey, MaxKey   none
 *   number      class byte: 0 NaN, 1 -inf, 2 negative, 3 zero, 4 positive,
 *               5 +inf; for a finite non-zero value 0.d1d2d3... x 10^E
 *               (d1 != 0, no trailing zeros): E + 32768 as 2 bytes big
 *               endian, then the digits two to a byte (pair + 1, an odd
 *               last digit padded with 0 as its pair) and a 0 terminator;
 *               negative: those bytes inverted, so larger magnitudes sort
 *               first
 *   string, symbol, code
 *               the bytes with 0x00 written 0x00 0xFF, then 0x00 0x00
 *   object      per field: value tag, name as a string, value payload;
 *               then 0x00
 *   array       per element: value tag and payload; then 0x00
 *   binData     length (4 bytes BE), subtype, bytes
 *   ObjectId    12 bytes
 *   bool        0 or 1
 *   date        int64 BE with the sign bit flipped
 *   timestamp   uint64 BE (seconds, increment)
 *   regex       pattern and flags as strings
 *   dbPointer   length (4 bytes BE), name bytes, 12-byte id
 *   codeWScope  code as a string, scope as an object payload
 *
 * Every encoding is self-delimiting (fixed sizes or terminators), so no
 * value's encoding is a proper prefix of another's.  That is what lets a
 * compound key be the concatenation of its parts, and a descending part be
 * its bytes inverted (mf_bsonx_key_append(..., descending)).
 *
 * Under a collation (mf_bsonx_key_append_coll) a string or symbol, at any
 * depth, is written as its collator's sort key (collation.c) in place of
 * its bytes: the same tag and escaping, so memcmp order is the collated
 * order and strings the collation calls equal encode identically.  Field
 * names and code are never collated, as in mongod.
 *
 * A double becomes its exact decimal expansion (0.1 is 55 digits), because
 * decimal128 values must interleave with doubles exactly.
 */
#include "bsonx.h"

#include <math.h>
#include <string.h>

#define TAG(canonical) ((uint8_t)((canonical) + 10))

static int put(mf_buf *out, const void *p, size_t n)
{
    return mf_buf_append(out, p, n);
}

static int put_byte(mf_buf *out, uint8_t b)
{
    return mf_buf_append(out, &b, 1);
}

static int put_be(mf_buf *out, uint64_t v, int bytes)
{
    uint8_t b[8];
    for (int i = bytes - 1; i >= 0; i--, v >>= 8)
        b[i] = (uint8_t)v;
    return put(out, b, (size_t)bytes);
}

/* A string: 0x00 escaped as 0x00 0xFF, terminated by 0x00 0x00. */
static int put_string(mf_buf *out, const char *s, size_t len)
{
    const char *p = s, *end = s + len;
    while (p < end) {
        const char *z = memchr(p, 0, (size_t)(end - p));
        size_t run = z ? (size_t)(z - p) : (size_t)(end - p);
        if (put(out, p, run) != 0)
            return -1;
        p += run;
        if (z) {
            if (put(out, "\x00\xff", 2) != 0)
                return -1;
            p++;
        }
    }
    return put(out, "\x00\x00", 2);
}

/* --------------------------------------------------------------- numbers */

/* Decimal digits of a non-negative integer held as little-endian 32-bit
 * words (destroyed), most significant first, into `digits`. */
static size_t words_to_digits(uint32_t *w, int n, char *digits, size_t cap)
{
    char rev[16000];
    size_t nd = 0;
    while (n > 0) {
        uint64_t rem = 0;
        for (int i = n - 1; i >= 0; i--) {
            uint64_t cur = rem << 32 | w[i];
            w[i] = (uint32_t)(cur / 1000000000u);
            rem = cur % 1000000000u;
        }
        while (n > 0 && w[n - 1] == 0)
            n--;
        for (int k = 0; k < 9 && (n > 0 || rem); k++) {
            if (nd < sizeof rev)
                rev[nd++] = (char)('0' + rem % 10);
            rem /= 10;
        }
    }
    size_t out = nd < cap ? nd : cap;
    for (size_t i = 0; i < out; i++)
        digits[i] = rev[nd - 1 - i];
    return out;
}

/* Multiply the word array by a small factor. */
static int words_mul(uint32_t *w, int n, int cap, uint32_t f)
{
    uint64_t carry = 0;
    for (int i = 0; i < n; i++) {
        uint64_t v = (uint64_t)w[i] * f + carry;
        w[i] = (uint32_t)v;
        carry = v >> 32;
    }
    if (carry && n < cap)
        w[n++] = (uint32_t)carry;
    return n;
}

/* A finite, non-zero magnitude as decimal digits and exponent: the value
 * is 0.d1d2... x 10^exp10 after normalising. */
typedef struct decimal_form {
    char digits[800];
    size_t n;
    int exp10;
} decimal_form;

static void normalise(decimal_form *d, int point_exp)
{
    /* digits x 10^point_exp  ->  0.digits x 10^(point_exp + n) */
    size_t lead = 0;
    while (lead < d->n && d->digits[lead] == '0')
        lead++;
    memmove(d->digits, d->digits + lead, d->n - lead);
    d->n -= lead;
    while (d->n > 0 && d->digits[d->n - 1] == '0') {
        d->n--;
        point_exp++;
    }
    d->exp10 = point_exp + (int)d->n;
}

static void from_u128(decimal_form *d, uint64_t hi, uint64_t lo, int exp10)
{
    uint32_t w[4] = {(uint32_t)lo, (uint32_t)(lo >> 32), (uint32_t)hi, (uint32_t)(hi >> 32)};
    int n = 4;
    while (n > 0 && w[n - 1] == 0)
        n--;
    d->n = words_to_digits(w, n, d->digits, sizeof d->digits);
    normalise(d, exp10);
}

/* |d| exactly: m x 2^e; for e < 0 that is m x 5^-e x 10^e.  m is made odd
 * first: m x 5^-e then has at most 16 + 751 digits (e >= -1074), within
 * `digits`.  With m's trailing zero bits kept, a subnormal's (frexp gives
 * it 53 bits, and e down to -1126) came to 803 digits, cut at 800, and
 * normalise took the cut length for its exponent: 1e-323 was keyed above
 * 1.5e-323. */
static void from_double(decimal_form *dec, double d)
{
    int e;
    double frac = frexp(fabs(d), &e);
    uint64_t m = (uint64_t)ldexp(frac, 53);
    e -= 53;
    while (!(m & 1)) { /* d != 0: m has a set bit */
        m >>= 1;
        e++;
    }
    uint32_t w[1200] = {(uint32_t)m, (uint32_t)(m >> 32)};
    int n = 2;
    int exp10 = 0;
    if (e >= 0) {
        for (int i = 0; i < e; i++)
            n = words_mul(w, n, 1200, 2);
    } else {
        for (int i = 0; i < -e; i++)
            n = words_mul(w, n, 1200, 5);
        exp10 = e;
    }
    while (n > 0 && w[n - 1] == 0)
        n--;
    dec->n = words_to_digits(w, n, dec->digits, sizeof dec->digits);
    normalise(dec, exp10);
}

static int put_number(mf_buf *out, const bson_iter_t *it)
{
    decimal_form d = {.n = 0};
    int sign = 1;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64: {
        int64_t v = bson_iter_type(it) == BSON_TYPE_INT32 ? bson_iter_int32(it)
                                                          : bson_iter_int64(it);
        if (v == 0)
            return put_byte(out, 3);
        sign = v < 0 ? -1 : 1;
        from_u128(&d, 0, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, 0);
        break;
    }
    case BSON_TYPE_DOUBLE: {
        double v = bson_iter_double(it);
        if (isnan(v))
            return put_byte(out, 0);
        if (isinf(v))
            return put_byte(out, v < 0 ? 1 : 5);
        if (v == 0)
            return put_byte(out, 3);
        sign = v < 0 ? -1 : 1;
        from_double(&d, v);
        break;
    }
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t dv;
        uint64_t hi, lo;
        int exp10;
        bson_iter_decimal128(it, &dv);
        switch (mf_bsonx_decimal_parts(&dv, &sign, &hi, &lo, &exp10)) {
        case MF_DEC_NAN:
            return put_byte(out, 0);
        case MF_DEC_INF:
            return put_byte(out, sign < 0 ? 1 : 5);
        case MF_DEC_FINITE:
            break;
        }
        if ((hi | lo) == 0)
            return put_byte(out, 3);
        from_u128(&d, hi, lo, exp10);
        break;
    }
    default:
        return -1;
    }
    /* Class, then exponent and digits (inverted when negative). */
    uint8_t body[2 + 400 + 1];
    size_t n = 0;
    unsigned biased = (unsigned)(d.exp10 + 32768);
    body[n++] = (uint8_t)(biased >> 8);
    body[n++] = (uint8_t)biased;
    for (size_t i = 0; i < d.n && n < sizeof body - 1; i += 2) {
        int hi = d.digits[i] - '0';
        int lo = i + 1 < d.n ? d.digits[i + 1] - '0' : 0;
        body[n++] = (uint8_t)(hi * 10 + lo + 1);
    }
    body[n++] = 0;
    if (sign < 0)
        for (size_t i = 0; i < n; i++)
            body[i] = (uint8_t)~body[i];
    if (put_byte(out, sign < 0 ? 2 : 4) != 0)
        return -1;
    return put(out, body, n);
}

/* ---------------------------------------------------------------- values */

static int put_payload(mf_buf *out, const bson_iter_t *it, const mf_collator *coll);

static int put_value(mf_buf *out, const bson_iter_t *it, const mf_collator *coll)
{
    if (put_byte(out, TAG(mf_bsonx_canonical_type(bson_iter_type(it)))) != 0)
        return -1;
    return put_payload(out, it, coll);
}

static int put_fields(mf_buf *out, bson_iter_t *child, bool names, const mf_collator *coll)
{
    while (bson_iter_next(child)) {
        if (!names) {
            if (put_value(out, child, coll) != 0)
                return -1;
            continue;
        }
        if (put_byte(out, TAG(mf_bsonx_canonical_type(bson_iter_type(child)))) != 0 ||
            put_string(out, bson_iter_key(child), bson_iter_key_len(child)) != 0 ||
            put_payload(out, child, coll) != 0)
            return -1;
    }
    return put_byte(out, 0);
}

/* A string under `coll`: its sort key, escaped and terminated as any. */
static int put_collated(mf_buf *out, const char *s, size_t len, const mf_collator *coll)
{
    if (!coll)
        return put_string(out, s, len);
    mf_buf key = {0};
    int rc = mf_collator_sort_key(coll, s, len, &key);
    if (rc == 0)
        rc = put_string(out, (const char *)key.data, key.len);
    mf_buf_free(&key);
    return rc;
}

static int put_payload(mf_buf *out, const bson_iter_t *it, const mf_collator *coll)
{
    uint32_t len;
    bson_iter_t child;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_MINKEY:
    case BSON_TYPE_MAXKEY:
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_EOD:
        return 0;
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128:
        return put_number(out, it);
    case BSON_TYPE_UTF8: {
        const char *s = bson_iter_utf8(it, &len);
        return put_collated(out, s, len, coll);
    }
    case BSON_TYPE_SYMBOL: {
        const char *s = bson_iter_symbol(it, &len);
        return put_collated(out, s, len, coll);
    }
    case BSON_TYPE_CODE: {
        const char *s = bson_iter_code(it, &len);
        return put_string(out, s, len);
    }
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        if (!bson_iter_recurse(it, &child))
            return -1;
        return put_fields(out, &child, bson_iter_type(it) == BSON_TYPE_DOCUMENT, coll);
    case BSON_TYPE_BINARY: {
        bson_subtype_t sub;
        const uint8_t *data;
        bson_iter_binary(it, &sub, &len, &data);
        if (put_be(out, len, 4) != 0 || put_byte(out, (uint8_t)sub) != 0)
            return -1;
        return put(out, data, len);
    }
    case BSON_TYPE_OID:
        return put(out, bson_iter_oid(it)->bytes, 12);
    case BSON_TYPE_BOOL:
        return put_byte(out, bson_iter_bool(it) ? 1 : 0);
    case BSON_TYPE_DATE_TIME:
        return put_be(out, (uint64_t)bson_iter_date_time(it) ^ (1ull << 63), 8);
    case BSON_TYPE_TIMESTAMP: {
        uint32_t t, i;
        bson_iter_timestamp(it, &t, &i);
        return put_be(out, (uint64_t)t << 32 | i, 8);
    }
    case BSON_TYPE_REGEX: {
        const char *opts, *re = bson_iter_regex(it, &opts);
        if (put_string(out, re, strlen(re)) != 0)
            return -1;
        return put_string(out, opts, strlen(opts));
    }
    case BSON_TYPE_DBPOINTER: {
        const char *ns;
        const bson_oid_t *oid;
        bson_iter_dbpointer(it, &len, &ns, &oid);
        if (put_be(out, len, 4) != 0 || put(out, ns, len) != 0)
            return -1;
        return put(out, oid->bytes, 12);
    }
    case BSON_TYPE_CODEWSCOPE: {
        uint32_t slen;
        const uint8_t *scope;
        const char *code = bson_iter_codewscope(it, &len, &slen, &scope);
        bson_t sd;
        if (put_string(out, code, len) != 0 || !bson_init_static(&sd, scope, slen) ||
            !bson_iter_init(&child, &sd))
            return -1;
        return put_fields(out, &child, true, NULL);
    }
    }
    return -1;
}

int mf_bsonx_key_append(mf_buf *out, const bson_iter_t *value, bool descending)
{
    return mf_bsonx_key_append_coll(out, value, descending, NULL);
}

int mf_bsonx_key_append_coll(mf_buf *out, const bson_iter_t *value, bool descending,
                             const mf_collator *coll)
{
    size_t start = out->len;
    if (put_value(out, value, coll) != 0) {
        out->len = start;
        return -1;
    }
    if (descending)
        for (size_t i = start; i < out->len; i++)
            out->data[i] = (uint8_t)~out->data[i];
    return 0;
}

int mf_bsonx_key_append_value(mf_buf *out, const bson_value_t *value, bool descending)
{
    return mf_bsonx_key_append_value_coll(out, value, descending, NULL);
}

int mf_bsonx_key_append_value_coll(mf_buf *out, const bson_value_t *value, bool descending,
                                   const mf_collator *coll)
{
    bson_t tmp = BSON_INITIALIZER;
    bson_iter_t it;
    if (value->value_type == BSON_TYPE_EOD)
        BSON_APPEND_UNDEFINED(&tmp, "v");
    else
        mf_bsonx_append_value(&tmp, "v", 1, value);
    bson_iter_init(&it, &tmp);
    bson_iter_next(&it);
    int rc = mf_bsonx_key_append_coll(out, &it, descending, coll);
    bson_destroy(&tmp);
    return rc;
}

int mf_bsonx_key_string(const uint8_t *key, size_t len, bool descending, mf_buf *scratch,
                        const char **str, size_t *slen)
{
    uint8_t flip = descending ? 0xFF : 0x00;
    if (len == 0 || (uint8_t)(key[0] ^ flip) != TAG(mf_bsonx_canonical_type(BSON_TYPE_UTF8)))
        return 0;
    const uint8_t *p = key + 1, *end = key + len;
    if (!descending) {
        /* The usual key: no NUL inside, so the bytes up to the terminator
         * are the string itself. */
        const uint8_t *z = memchr(p, 0, (size_t)(end - p));
        if (z && z + 1 < end && z[1] == 0x00) {
            *str = (const char *)p;
            *slen = (size_t)(z - p);
            return 1;
        }
    }
    scratch->len = 0;
    while (p + 1 < end) {
        uint8_t b = *p++ ^ flip;
        if (b != 0x00) {
            if (put_byte(scratch, b) != 0)
                return -1;
            continue;
        }
        uint8_t next = *p++ ^ flip;
        if (next == 0x00) { /* the terminator */
            *str = (const char *)scratch->data;
            *slen = scratch->len;
            return 1;
        }
        if (next != 0xFF || put_byte(scratch, 0x00) != 0)
            return -1; /* damage, or no memory */
    }
    return -1; /* no terminator */
}

/* ------------------------------------------------------ reading keys back */

static bool skip_payload(const uint8_t *p, const uint8_t *end, uint8_t tag, uint8_t flip,
                         int depth, size_t *n);

/* An escaped, terminated string from `p`: its length with the terminator,
 * or 0 if it runs off the end. */
static size_t skip_string(const uint8_t *p, const uint8_t *end, uint8_t flip)
{
    for (const uint8_t *q = p; q + 1 < end; q++) {
        if ((uint8_t)(*q ^ flip) != 0x00)
            continue;
        if ((uint8_t)(q[1] ^ flip) == 0x00)
            return (size_t)(q + 2 - p);
        q++; /* an escaped NUL */
    }
    return 0;
}

/* Tagged values (each named first, for an object) up to their 0x00 end. */
static bool skip_fields(const uint8_t *p, const uint8_t *end, bool names, uint8_t flip,
                        int depth, size_t *n)
{
    const uint8_t *q = p;
    while (q < end) {
        uint8_t tag = *q++ ^ flip;
        size_t k = 0;
        if (tag == 0) {
            *n = (size_t)(q - p);
            return true;
        }
        if (names && (k = skip_string(q, end, flip)) == 0)
            return false;
        q += k;
        if (!skip_payload(q, end, tag, flip, depth + 1, &k))
            return false;
        q += k;
    }
    return false;
}

static size_t be32(const uint8_t *p, uint8_t flip)
{
    return (size_t)(uint8_t)(p[0] ^ flip) << 24 | (size_t)(uint8_t)(p[1] ^ flip) << 16 |
           (size_t)(uint8_t)(p[2] ^ flip) << 8 | (uint8_t)(p[3] ^ flip);
}

/* The payload after tag `tag`, as put_payload wrote it: its length in
 * `*n`; false where it runs off the end or the tag is no type's. */
static bool skip_payload(const uint8_t *p, const uint8_t *end, uint8_t tag, uint8_t flip,
                         int depth, size_t *n)
{
    size_t avail = (size_t)(end - p), a, b;
    if (depth > 200)
        return false;
    switch (tag) {
    case TAG(-1): case TAG(0): case TAG(5): case TAG(127):
        *n = 0;
        return true;
    case TAG(10): { /* a number: its class, then exponent, digits and an end */
        if (avail < 1)
            return false;
        uint8_t cls = p[0] ^ flip;
        if (cls != 2 && cls != 4) {
            *n = 1;
            return true;
        }
        uint8_t stop = cls == 2 ? 0xFF : 0x00; /* a negative's bytes are inverted */
        for (size_t i = 3; i < avail; i++)
            if ((uint8_t)(p[i] ^ flip) == stop) {
                *n = i + 1;
                return true;
            }
        return false;
    }
    case TAG(15): case TAG(60):
        return (*n = skip_string(p, end, flip)) != 0;
    case TAG(20): case TAG(25):
        return skip_fields(p, end, tag == TAG(20), flip, depth, n);
    case TAG(30): /* binData: length, subtype, bytes */
        if (avail < 5 || (a = be32(p, flip)) > avail - 5)
            return false;
        *n = 5 + a;
        return true;
    case TAG(35): case TAG(40): case TAG(45): case TAG(47):
        a = tag == TAG(35) ? 12 : tag == TAG(40) ? 1 : 8;
        *n = a;
        return avail >= a;
    case TAG(50): /* pattern and flags */
        a = skip_string(p, end, flip);
        b = a ? skip_string(p + a, end, flip) : 0;
        *n = a + b;
        return b != 0;
    case TAG(55): /* dbPointer: length, name, id */
        if (avail < 16 || (a = be32(p, flip)) > avail - 16)
            return false;
        *n = 4 + a + 12;
        return true;
    case TAG(65): /* code, then the scope's fields */
        if ((a = skip_string(p, end, flip)) == 0 ||
            !skip_fields(p + a, end, true, flip, depth, &b))
            return false;
        *n = a + b;
        return true;
    }
    return false;
}

size_t mf_bsonx_key_value_len(const uint8_t *key, size_t len, bool descending)
{
    uint8_t flip = descending ? 0xFF : 0x00;
    size_t n;
    if (len == 0 || !skip_payload(key + 1, key + len, key[0] ^ flip, flip, 0, &n))
        return 0;
    return 1 + n;
}
