/*
 * compare.c -- MongoDB's order over BSON values, under the simple binary
 * collation or a collator (collation.c) for strings and symbols.
 *
 * Values of different types compare by their canonical type bracket
 * (mongod's canonicalizeBSONType):
 *
 *   MinKey < Undefined < Null < numbers < String, Symbol < Object < Array
 *   < BinData < ObjectId < Bool < Date < Timestamp < Regex < DBPointer
 *   < Code < CodeWScope < MaxKey
 *
 * Numbers compare by exact value across int32, int64, double and
 * decimal128: NaN (any) equals NaN and is below every other number; -0
 * equals 0; 9007199254740993 (int64) is above 9007199254740992.0 (double);
 * decimal 0.1 is not the double 0.1.  Exactness costs nothing in the common
 * cases (same type, or far apart); only values within a factor of ten of
 * each other across bases reach the small bignum below.
 *
 * Documents and arrays compare element by element: canonical type, then
 * field name, then value; a prefix sorts first.
 */
#include "bsonx.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------- type brackets */

int mf_bsonx_canonical_type(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_MINKEY: return -1;
    case BSON_TYPE_EOD:
    case BSON_TYPE_UNDEFINED: return 0;
    case BSON_TYPE_NULL: return 5;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128: return 10;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL: return 15;
    case BSON_TYPE_DOCUMENT: return 20;
    case BSON_TYPE_ARRAY: return 25;
    case BSON_TYPE_BINARY: return 30;
    case BSON_TYPE_OID: return 35;
    case BSON_TYPE_BOOL: return 40;
    case BSON_TYPE_DATE_TIME: return 45;
    case BSON_TYPE_TIMESTAMP: return 47;
    case BSON_TYPE_REGEX: return 50;
    case BSON_TYPE_DBPOINTER: return 55;
    case BSON_TYPE_CODE: return 60;
    case BSON_TYPE_CODEWSCOPE: return 65;
    case BSON_TYPE_MAXKEY: return 127;
    }
    return 0;
}

const char *mf_bsonx_type_alias(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_DOUBLE: return "double";
    case BSON_TYPE_UTF8: return "string";
    case BSON_TYPE_DOCUMENT: return "object";
    case BSON_TYPE_ARRAY: return "array";
    case BSON_TYPE_BINARY: return "binData";
    case BSON_TYPE_UNDEFINED: return "undefined";
    case BSON_TYPE_OID: return "objectId";
    case BSON_TYPE_BOOL: return "bool";
    case BSON_TYPE_DATE_TIME: return "date";
    case BSON_TYPE_NULL: return "null";
    case BSON_TYPE_REGEX: return "regex";
    case BSON_TYPE_DBPOINTER: return "dbPointer";
    case BSON_TYPE_CODE: return "javascript";
    case BSON_TYPE_SYMBOL: return "symbol";
    case BSON_TYPE_CODEWSCOPE: return "javascriptWithScope";
    case BSON_TYPE_INT32: return "int";
    case BSON_TYPE_TIMESTAMP: return "timestamp";
    case BSON_TYPE_INT64: return "long";
    case BSON_TYPE_DECIMAL128: return "decimal";
    case BSON_TYPE_MINKEY: return "minKey";
    case BSON_TYPE_MAXKEY: return "maxKey";
    default: return "unknown";
    }
}

/* ------------------------------------------------------------- numbers */

/* A finite number as (sign, m x 2^e2 x 10^e10) with m < 2^128, or a
 * special. */
typedef enum { NUM_NAN, NUM_NEG_INF, NUM_FINITE, NUM_POS_INF } num_class;

typedef struct num {
    num_class cls;
    int sign;          /* -1, 0 or 1 for finite values */
    uint64_t hi, lo;   /* magnitude m */
    int e2, e10;
} num;

static void num_from_u64(num *n, int sign, uint64_t mag)
{
    *n = (num){.cls = NUM_FINITE, .sign = mag ? sign : 0, .lo = mag};
}

static void num_from_double(num *n, double d)
{
    if (isnan(d)) {
        n->cls = NUM_NAN;
        return;
    }
    if (isinf(d)) {
        n->cls = d < 0 ? NUM_NEG_INF : NUM_POS_INF;
        return;
    }
    int exp;
    double frac = frexp(fabs(d), &exp); /* |d| = frac x 2^exp, frac in [0.5, 1) */
    uint64_t m = (uint64_t)ldexp(frac, 53);
    num_from_u64(n, d < 0 ? -1 : 1, m);
    n->e2 = exp - 53;
}

mf_dec_class mf_bsonx_decimal_parts(const bson_decimal128_t *d, int *sign, uint64_t *hi,
                                    uint64_t *lo, int *exp10)
{
    uint64_t h = d->high, l = d->low;
    unsigned comb = (unsigned)(h >> 58) & 0x1f;
    *sign = (h >> 63) ? -1 : 1;
    if (comb == 0x1f)
        return MF_DEC_NAN;
    if (comb == 0x1e)
        return MF_DEC_INF;
    int exp;
    uint64_t chi;
    if (((h >> 61) & 3) == 3) {
        /* A coefficient of 2^113 or more: above 10^34 - 1, so non-canonical,
         * which the standard reads as zero. */
        exp = (int)((h >> 47) & 0x3fff);
        chi = l = 0;
    } else {
        exp = (int)((h >> 49) & 0x3fff);
        chi = h & 0x1ffffffffffffull;
        /* 10^34 - 1 = 0x1ed09bead87c0378d8e63ffffffff */
        if (chi > 0x1ed09bead87c0ull || (chi == 0x1ed09bead87c0ull && l > 0x378d8e63ffffffffull))
            chi = l = 0;
    }
    *hi = chi;
    *lo = l;
    *exp10 = exp - 6176;
    return MF_DEC_FINITE;
}

int mf_bsonx_number_to_int64(const bson_iter_t *v, int64_t *out)
{
    switch (bson_iter_type(v)) {
    case BSON_TYPE_INT32: *out = bson_iter_int32(v); return 0;
    case BSON_TYPE_INT64: *out = bson_iter_int64(v); return 0;
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(v);
        if (!isfinite(d))
            return 1;
        if (d >= 9223372036854775808.0 || d < -9223372036854775808.0)
            return 2;
        *out = (int64_t)d; /* truncates toward zero */
        return 0;
    }
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t dec;
        int sign, e;
        uint64_t hi, lo;
        bson_iter_decimal128(v, &dec);
        if (mf_bsonx_decimal_parts(&dec, &sign, &hi, &lo, &e) != MF_DEC_FINITE)
            return 1;
        unsigned __int128 c = ((unsigned __int128)hi << 64) | lo;
        for (; e < 0 && c; e++) /* truncate toward zero */
            c /= 10;
        for (; e > 0 && c; e--) {
            if (c > ((unsigned __int128)1 << 64))
                return 2;
            c *= 10;
        }
        /* |value| = c: at most 2^63 - 1, or 2^63 when negative */
        if (c > ((unsigned __int128)1 << 63) - (sign > 0))
            return 2;
        *out = sign > 0 ? (int64_t)c : (int64_t)(0 - (uint64_t)c);
        return 0;
    }
    default: return 1;
    }
}

static void num_from_decimal(num *n, const bson_decimal128_t *dec)
{
    int sign, exp10;
    uint64_t hi, lo;
    switch (mf_bsonx_decimal_parts(dec, &sign, &hi, &lo, &exp10)) {
    case MF_DEC_NAN:
        n->cls = NUM_NAN;
        return;
    case MF_DEC_INF:
        n->cls = sign < 0 ? NUM_NEG_INF : NUM_POS_INF;
        return;
    case MF_DEC_FINITE:
        break;
    }
    *n = (num){.cls = NUM_FINITE, .sign = (hi | lo) ? sign : 0, .hi = hi, .lo = lo,
               .e10 = exp10};
}

static bool num_of(const bson_iter_t *it, num *n)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: {
        int64_t v = bson_iter_int32(it);
        num_from_u64(n, v < 0 ? -1 : 1, (uint64_t)(v < 0 ? -v : v));
        return true;
    }
    case BSON_TYPE_INT64: {
        int64_t v = bson_iter_int64(it);
        uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
        num_from_u64(n, v < 0 ? -1 : 1, mag);
        return true;
    }
    case BSON_TYPE_DOUBLE:
        num_from_double(n, bson_iter_double(it));
        return true;
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t d;
        bson_iter_decimal128(it, &d);
        num_from_decimal(n, &d);
        return true;
    }
    default:
        return false;
    }
}

/* log10 of a finite, non-zero magnitude, to within ~1e-9. */
static double mag_log10(const num *n)
{
    double m = (double)n->hi * 18446744073709551616.0 + (double)n->lo;
    return log10(m) + n->e2 * 0.30102999566398120 + n->e10;
}

/* A little-endian bignum of 32-bit words, enough for the close cases. */
#define BIG_WORDS 512
typedef struct big {
    uint32_t w[BIG_WORDS];
    int n;
} big;

static void big_set(big *b, uint64_t hi, uint64_t lo)
{
    b->w[0] = (uint32_t)lo;
    b->w[1] = (uint32_t)(lo >> 32);
    b->w[2] = (uint32_t)hi;
    b->w[3] = (uint32_t)(hi >> 32);
    b->n = 4;
    while (b->n > 0 && b->w[b->n - 1] == 0)
        b->n--;
}

static bool big_mul_small(big *b, uint32_t f)
{
    uint64_t carry = 0;
    for (int i = 0; i < b->n; i++) {
        uint64_t v = (uint64_t)b->w[i] * f + carry;
        b->w[i] = (uint32_t)v;
        carry = v >> 32;
    }
    if (carry) {
        if (b->n == BIG_WORDS)
            return false;
        b->w[b->n++] = (uint32_t)carry;
    }
    return true;
}

static bool big_shl(big *b, int bits)
{
    int words = bits / 32, r = bits % 32;
    if (b->n == 0)
        return true;
    if (b->n + words + 1 > BIG_WORDS)
        return false;
    if (r) {
        uint32_t carry = 0;
        for (int i = 0; i < b->n; i++) {
            uint32_t v = b->w[i];
            b->w[i] = v << r | carry;
            carry = v >> (32 - r);
        }
        if (carry)
            b->w[b->n++] = carry;
    }
    if (words) {
        memmove(b->w + words, b->w, (size_t)b->n * 4);
        memset(b->w, 0, (size_t)words * 4);
        b->n += words;
    }
    return true;
}

static bool big_pow10(big *b, int k)
{
    for (; k >= 9; k -= 9)
        if (!big_mul_small(b, 1000000000u))
            return false;
    static const uint32_t p[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
    return k ? big_mul_small(b, p[k]) : true;
}

static int big_cmp(const big *a, const big *b)
{
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    for (int i = a->n - 1; i >= 0; i--)
        if (a->w[i] != b->w[i])
            return a->w[i] < b->w[i] ? -1 : 1;
    return 0;
}

/* Compare the magnitudes of two finite, non-zero numbers exactly. */
static int mag_cmp(const num *a, const num *b)
{
    /* Same scale: the magnitudes decide (the common case). */
    if (a->e2 == b->e2 && a->e10 == b->e10) {
        if (a->hi != b->hi)
            return a->hi < b->hi ? -1 : 1;
        return a->lo < b->lo ? -1 : a->lo > b->lo;
    }
    /* Far apart: logarithms decide. */
    double la = mag_log10(a), lb = mag_log10(b);
    if (la < lb - 1.0)
        return -1;
    if (la > lb + 1.0)
        return 1;
    /* Close: multiply out.  Move negative exponents to the other side. */
    int sa2 = a->e2, sb2 = b->e2, sa10 = a->e10, sb10 = b->e10;
    int lo2 = sa2 < sb2 ? sa2 : sb2, lo10 = sa10 < sb10 ? sa10 : sb10;
    sa2 -= lo2, sb2 -= lo2, sa10 -= lo10, sb10 -= lo10;
    static __thread big x, y;
    big_set(&x, a->hi, a->lo);
    big_set(&y, b->hi, b->lo);
    if (!big_pow10(&x, sa10) || !big_shl(&x, sa2) || !big_pow10(&y, sb10) ||
        !big_shl(&y, sb2))
        return la < lb ? -1 : la > lb; /* beyond the bignum: cannot happen when close */
    return big_cmp(&x, &y);
}

static int num_cmp(const num *a, const num *b)
{
    if (a->cls == NUM_NAN || b->cls == NUM_NAN)
        return (a->cls == NUM_NAN) - (b->cls == NUM_NAN) ? (a->cls == NUM_NAN ? -1 : 1) : 0;
    if (a->cls != NUM_FINITE || b->cls != NUM_FINITE) {
        int ra = a->cls == NUM_FINITE ? 0 : a->cls == NUM_NEG_INF ? -1 : 1;
        int rb = b->cls == NUM_FINITE ? 0 : b->cls == NUM_NEG_INF ? -1 : 1;
        return ra < rb ? -1 : ra > rb;
    }
    if (a->sign != b->sign)
        return a->sign < b->sign ? -1 : 1;
    if (a->sign == 0)
        return 0;
    int c = mag_cmp(a, b);
    return a->sign > 0 ? c : -c;
}

/* ------------------------------------------------------------- values */

static int cmp_bytes(const void *a, size_t al, const void *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c < 0 ? -1 : 1;
    return al < bl ? -1 : al > bl;
}

static int cmp_docs(const bson_iter_t *a, const bson_iter_t *b, bool names,
                    const mf_collator *coll);

bool mf_bsonx_binary_equal(const bson_iter_t *a, const bson_iter_t *b)
{
    /* an element's value runs from d1 to the next element */
    uint32_t la = a->next_off - a->d1, lb = b->next_off - b->d1;
    return bson_iter_type(a) == bson_iter_type(b) && la == lb &&
           memcmp(a->raw + a->d1, b->raw + b->d1, la) == 0;
}

int mf_bsonx_compare_values(const bson_iter_t *a, const bson_iter_t *b)
{
    return mf_bsonx_compare_values_coll(a, b, NULL);
}

int mf_bsonx_compare_values_coll(const bson_iter_t *a, const bson_iter_t *b,
                                 const mf_collator *coll)
{
    bson_type_t ta = bson_iter_type(a), tb = bson_iter_type(b);
    int ca = mf_bsonx_canonical_type(ta), cb = mf_bsonx_canonical_type(tb);
    if (ca != cb)
        return ca < cb ? -1 : 1;
    uint32_t la, lb;
    switch (ca) {
    case -1: case 0: case 5: case 127:
        return 0;
    case 10: {
        num x, y;
        num_of(a, &x);
        num_of(b, &y);
        return num_cmp(&x, &y);
    }
    case 15: {
        const char *sa = ta == BSON_TYPE_UTF8 ? bson_iter_utf8(a, &la) : bson_iter_symbol(a, &la);
        const char *sb = tb == BSON_TYPE_UTF8 ? bson_iter_utf8(b, &lb) : bson_iter_symbol(b, &lb);
        return coll ? mf_collator_strcmp(coll, sa, la, sb, lb) : cmp_bytes(sa, la, sb, lb);
    }
    case 20:
    case 25:
        return cmp_docs(a, b, true, coll);
    case 30: {
        bson_subtype_t sa, sb;
        const uint8_t *da, *db;
        bson_iter_binary(a, &sa, &la, &da);
        bson_iter_binary(b, &sb, &lb, &db);
        if (la != lb)
            return la < lb ? -1 : 1;
        if (sa != sb)
            return sa < sb ? -1 : 1;
        return cmp_bytes(da, la, db, lb);
    }
    case 35:
        return cmp_bytes(bson_iter_oid(a), 12, bson_iter_oid(b), 12);
    case 40:
        return (int)bson_iter_bool(a) - (int)bson_iter_bool(b);
    case 45: {
        int64_t x = bson_iter_date_time(a), y = bson_iter_date_time(b);
        return x < y ? -1 : x > y;
    }
    case 47: {
        uint32_t t1, i1, t2, i2;
        bson_iter_timestamp(a, &t1, &i1);
        bson_iter_timestamp(b, &t2, &i2);
        uint64_t x = (uint64_t)t1 << 32 | i1, y = (uint64_t)t2 << 32 | i2;
        return x < y ? -1 : x > y;
    }
    case 50: {
        const char *oa, *ob;
        const char *ra = bson_iter_regex(a, &oa), *rb = bson_iter_regex(b, &ob);
        int c = strcmp(ra, rb);
        if (c)
            return c < 0 ? -1 : 1;
        c = strcmp(oa, ob);
        return c < 0 ? -1 : c > 0;
    }
    case 55: {
        const char *na, *nb;
        const bson_oid_t *oa, *ob;
        bson_iter_dbpointer(a, &la, &na, &oa);
        bson_iter_dbpointer(b, &lb, &nb, &ob);
        if (la != lb)
            return la < lb ? -1 : 1;
        int c = cmp_bytes(na, la, nb, lb);
        return c ? c : cmp_bytes(oa, 12, ob, 12);
    }
    case 60: {
        const char *xa = bson_iter_code(a, &la), *xb = bson_iter_code(b, &lb);
        return cmp_bytes(xa, la, xb, lb);
    }
    case 65: {
        uint32_t sla, slb;
        const uint8_t *sa, *sb;
        const char *xa = bson_iter_codewscope(a, &la, &sla, &sa);
        const char *xb = bson_iter_codewscope(b, &lb, &slb, &sb);
        int c = cmp_bytes(xa, la, xb, lb);
        if (c)
            return c;
        bson_t da, db;
        bson_iter_t ia, ib;
        if (!bson_init_static(&da, sa, sla) || !bson_init_static(&db, sb, slb) ||
            !bson_iter_init(&ia, &da) || !bson_iter_init(&ib, &db))
            return 0;
        return mf_bsonx_compare_docs_iter(&ia, &ib);
    }
    }
    return 0;
}

/* Element by element: canonical type, field name (if `names`, never
 * collated), value. */
static int cmp_fields(bson_iter_t *x, bson_iter_t *y, bool names, const mf_collator *coll)
{
    for (;;) {
        bool hx = bson_iter_next(x), hy = bson_iter_next(y);
        if (!hx || !hy)
            return hx == hy ? 0 : (hx ? 1 : -1);
        int cx = mf_bsonx_canonical_type(bson_iter_type(x));
        int cy = mf_bsonx_canonical_type(bson_iter_type(y));
        if (cx != cy)
            return cx < cy ? -1 : 1;
        if (names) {
            int c = strcmp(bson_iter_key(x), bson_iter_key(y));
            if (c)
                return c < 0 ? -1 : 1;
        }
        int c = mf_bsonx_compare_values_coll(x, y, coll);
        if (c)
            return c;
    }
}

static int cmp_docs(const bson_iter_t *a, const bson_iter_t *b, bool names,
                    const mf_collator *coll)
{
    bson_iter_t x, y;
    if (!bson_iter_recurse(a, &x) || !bson_iter_recurse(b, &y))
        return 0;
    return cmp_fields(&x, &y, names, coll);
}

int mf_bsonx_compare_docs_iter(bson_iter_t *a, bson_iter_t *b)
{
    return cmp_fields(a, b, true, NULL);
}

int mf_bsonx_compare_docs_coll(const bson_t *a, const bson_t *b, const mf_collator *coll)
{
    bson_iter_t x, y;
    if (!bson_iter_init(&x, a) || !bson_iter_init(&y, b))
        return 0;
    return cmp_fields(&x, &y, true, coll);
}

int mf_bsonx_compare_docs(const bson_t *a, const bson_t *b)
{
    return mf_bsonx_compare_docs_coll(a, b, NULL);
}

bool mf_bsonx_truthy(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_EOD: case BSON_TYPE_NULL: case BSON_TYPE_UNDEFINED: return false;
    case BSON_TYPE_BOOL: return v->value.v_bool;
    case BSON_TYPE_INT32: return v->value.v_int32 != 0;
    case BSON_TYPE_INT64: return v->value.v_int64 != 0;
    case BSON_TYPE_DOUBLE: return v->value.v_double != 0;
    case BSON_TYPE_DECIMAL128: {
        int sign, e;
        uint64_t hi, lo;
        mf_dec_class k = mf_bsonx_decimal_parts(&v->value.v_decimal128, &sign, &hi, &lo, &e);
        return k != MF_DEC_FINITE || hi != 0 || lo != 0;
    }
    default: return true;
    }
}
