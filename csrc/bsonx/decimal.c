/*
 * decimal.c -- Decimal128 arithmetic (bsonx.h) over Intel's Decimal
 * Floating-Point Math Library, built with arguments by value and no global
 * rounding mode or exception flags (libbidgcc000).
 *
 * Encoding.  BSON's decimal128 is IEEE 754-2008 decimal128 in the binary
 * integer decimal (BID) encoding, which is the library's BID_UINT128: the
 * low 64 bits are w[0] and the high 64 bits w[1] on a little-endian
 * machine (the C test /bsonx/decimal/roundtrip checks it against libbson's
 * own parser).  The high word holds, from the top: the sign bit, the
 * combination field (a 14-bit biased exponent, bias 6176, then the top 49
 * bits of the coefficient; or "11" then the exponent two bits lower for
 * the large-coefficient form, which is never canonical in decimal128),
 * and infinities/NaNs flagged by 11110/11111 in the top bits.
 */
#define DECIMAL_CALL_BY_REFERENCE 0
#define DECIMAL_GLOBAL_ROUNDING 0
#define DECIMAL_GLOBAL_EXCEPTION_FLAGS 0
#include <bid_conf.h>
#include <bid_functions.h>

#include "bsonx.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "decimal.c assumes a little-endian machine (BID_UINT128 word order)"
#endif

enum { EXP_BIAS = 6176 };

static BID_UINT128 to_bid(mf_dec d)
{
    BID_UINT128 b;
    b.w[0] = d.low;
    b.w[1] = d.high;
    return b;
}

static mf_dec from_bid(BID_UINT128 b)
{
    mf_dec d;
    d.low = b.w[0];
    d.high = b.w[1];
    return d;
}

/* 1E<exp10>: coefficient 1, the given exponent. */
static mf_dec pow10_quantum(int exp10)
{
    mf_dec d;
    d.high = (uint64_t)(exp10 + EXP_BIAS) << 49;
    d.low = 1;
    return d;
}

/* The biased exponent of a finite value. */
static int biased_exponent(mf_dec d)
{
    if ((d.high & 0x6000000000000000ull) == 0x6000000000000000ull)
        return (int)((d.high >> 47) & 0x3FFF);
    return (int)((d.high >> 49) & 0x3FFF);
}

static void add_flags(uint32_t *flags, _IDEC_flags f)
{
    if (flags)
        *flags |= (uint32_t)f;
}

mf_dec mf_dec_add(mf_dec a, mf_dec b)
{
    _IDEC_flags f = 0;
    return from_bid(bid128_add(to_bid(a), to_bid(b), BID_ROUNDING_TO_NEAREST, &f));
}

mf_dec mf_dec_sub(mf_dec a, mf_dec b)
{
    _IDEC_flags f = 0;
    return from_bid(bid128_sub(to_bid(a), to_bid(b), BID_ROUNDING_TO_NEAREST, &f));
}

mf_dec mf_dec_mul(mf_dec a, mf_dec b)
{
    _IDEC_flags f = 0;
    return from_bid(bid128_mul(to_bid(a), to_bid(b), BID_ROUNDING_TO_NEAREST, &f));
}

mf_dec mf_dec_div(mf_dec a, mf_dec b)
{
    _IDEC_flags f = 0;
    return from_bid(bid128_div(to_bid(a), to_bid(b), BID_ROUNDING_TO_NEAREST, &f));
}

mf_dec mf_dec_mod(mf_dec a, mf_dec b)
{
    _IDEC_flags f = 0;
    return from_bid(bid128_fmod(to_bid(a), to_bid(b), &f));
}

mf_dec mf_dec_abs(mf_dec a) { return from_bid(bid128_abs(to_bid(a))); }
mf_dec mf_dec_neg(mf_dec a) { return from_bid(bid128_negate(to_bid(a))); }

mf_dec mf_dec_exp(mf_dec a)
{
    _IDEC_flags f = 0;
    return from_bid(bid128_exp(to_bid(a), BID_ROUNDING_TO_NEAREST, &f));
}

mf_dec mf_dec_ln(mf_dec a)
{
    _IDEC_flags f = 0;
    return from_bid(bid128_log(to_bid(a), BID_ROUNDING_TO_NEAREST, &f));
}

mf_dec mf_dec_log10(mf_dec a)
{
    _IDEC_flags f = 0;
    return from_bid(bid128_log10(to_bid(a), BID_ROUNDING_TO_NEAREST, &f));
}

mf_dec mf_dec_log(mf_dec a, mf_dec base)
{
    _IDEC_flags f = 0;
    if (mf_dec_cmp(base, mf_dec_from_int64(2)) == 0)
        return from_bid(bid128_log2(to_bid(a), BID_ROUNDING_TO_NEAREST, &f));
    if (mf_dec_cmp(base, mf_dec_from_int64(10)) == 0)
        return mf_dec_log10(a);
    return mf_dec_div(mf_dec_ln(a), mf_dec_ln(base));
}

mf_dec mf_dec_pow(mf_dec base, mf_dec exp)
{
    _IDEC_flags f = 0;
    BID_UINT128 r;
    if (mf_dec_cmp(base, mf_dec_from_int64(10)) == 0)
        r = bid128_exp10(to_bid(exp), BID_ROUNDING_TO_NEAREST, &f);
    else if (mf_dec_cmp(base, mf_dec_from_int64(2)) == 0)
        r = bid128_exp2(to_bid(exp), BID_ROUNDING_TO_NEAREST, &f);
    else
        r = bid128_pow(to_bid(base), to_bid(exp), BID_ROUNDING_TO_NEAREST, &f);
    mf_dec zero_min_exp = {0, 0}; /* 0E-6176: adding it widens to 34 digits */
    return mf_dec_add(from_bid(r), zero_min_exp);
}

mf_dec mf_dec_sqrt(mf_dec a)
{
    _IDEC_flags f = 0;
    return from_bid(bid128_sqrt(to_bid(a), BID_ROUNDING_TO_NEAREST, &f));
}

mf_dec mf_dec_quantize(mf_dec a, int exp10, mf_dec_round mode, uint32_t *flags)
{
    mf_dec zero_min_exp = {0, 0};
    mf_dec q = pow10_quantum(exp10);
    /* as mongod: compare the exponents of both at 34 digits; a difference
     * over 33 means the result cannot hold the value, which then comes
     * back normalized rather than as NaN */
    mf_dec norm = mf_dec_add(a, zero_min_exp);
    int ref_exp = biased_exponent(mf_dec_add(q, zero_min_exp));
    if (ref_exp != 0 && !mf_dec_isnan(norm) && !mf_dec_isinf(norm) &&
        biased_exponent(norm) - ref_exp > 33)
        return norm;
    _IDEC_flags f = 0;
    mf_dec r = from_bid(bid128_quantize(to_bid(a), to_bid(q), (_IDEC_round)mode, &f));
    add_flags(flags, f);
    return r;
}

int mf_dec_cmp(mf_dec a, mf_dec b)
{
    bool na = mf_dec_isnan(a), nb = mf_dec_isnan(b);
    if (na || nb)
        return na && nb ? 0 : na ? -1 : 1;
    _IDEC_flags f = 0;
    if (bid128_quiet_less(to_bid(a), to_bid(b), &f))
        return -1;
    if (bid128_quiet_greater(to_bid(a), to_bid(b), &f))
        return 1;
    return 0;
}

bool mf_dec_isnan(mf_dec a) { return bid128_isNaN(to_bid(a)) != 0; }
bool mf_dec_isinf(mf_dec a) { return bid128_isInf(to_bid(a)) != 0; }
bool mf_dec_iszero(mf_dec a) { return bid128_isZero(to_bid(a)) != 0; }
bool mf_dec_isneg(mf_dec a) { return (a.high >> 63) != 0; }

mf_dec mf_dec_from_int64(int64_t i)
{
    return from_bid(bid128_from_int64(i));
}

mf_dec mf_dec_from_double34(double d)
{
    _IDEC_flags f = 0;
    return from_bid(binary64_to_bid128(d, BID_ROUNDING_TO_NEAREST, &f));
}

/* mongod's Decimal128(double, kRoundTo15Digits): quantize the exact value
 * to 15 significant digits.  The decimal exponent is first guessed low
 * from the binary one (floor(e2 * log10 2), with 0.30103 for log10 2,
 * exact over the double range); if the coefficient then has 16 digits the
 * guess was one short and the quantum moves up by one. */
mf_dec mf_dec_from_double(double d)
{
    mf_dec exact = mf_dec_from_double34(d);
    if (d == 0 || isinf(d) || isnan(d))
        return exact;
    int e2;
    frexp(d, &e2);
    e2--;
    int e10 = (e2 * 30103) / (100 * 1000);
    if (e2 < 0)
        e10--;
    mf_dec r = mf_dec_quantize(exact, e10 - 14, MF_DEC_HALF_EVEN, NULL);
    if (r.low > 999999999999999ull)
        r = mf_dec_quantize(exact, e10 - 13, MF_DEC_HALF_EVEN, NULL);
    return r;
}

/* mongod's validateInputString: the library accepts more than the grammar
 * ("[+-]digits[.digits][e[+-]digits]", nan, inf, infinity); this marks
 * the rest invalid, and clears the flags of a zero (whose huge exponent
 * the library clamps). */
static void validate(const char *s, uint32_t *flags)
{
    const char *p = s + (s[0] == '-' || s[0] == '+');
    if (strcmp(p, "nan") == 0 || strcmp(p, "inf") == 0 || strcmp(p, "infinity") == 0)
        return;
    if (!isdigit((unsigned char)p[0]) && (p[0] != '.' || p[1] == 0)) {
        *flags = MF_DEC_F_INVALID;
        return;
    }
    bool is_zero = true, has_digits = false;
    int dots = 0;
    for (; *p; p++) {
        if (*p == '.') {
            if (++dots > 1) {
                *flags = MF_DEC_F_INVALID;
                return;
            }
        } else if (!isdigit((unsigned char)*p)) {
            break;
        } else {
            has_digits = true;
            if (*p != '0')
                is_zero = false;
        }
    }
    if (is_zero)
        *flags = 0;
    if (!*p)
        return;
    if (!has_digits || p[0] != 'e' || p[1] == 0) {
        *flags = MF_DEC_F_INVALID;
        return;
    }
    p++;
    if (*p == '-' || *p == '+') {
        p++;
        if (!*p) {
            *flags = MF_DEC_F_INVALID;
            return;
        }
    }
    for (; *p; p++)
        if (!isdigit((unsigned char)*p)) {
            *flags = MF_DEC_F_INVALID;
            return;
        }
}

mf_dec mf_dec_from_string(const char *s, uint32_t *flags)
{
    uint32_t local = 0;
    size_t n = strlen(s);
    char *lower = malloc(n + 1);
    mf_dec r = {0, 0};
    if (!lower) {
        if (flags)
            *flags |= MF_DEC_F_INVALID;
        return r;
    }
    for (size_t i = 0; i <= n; i++)
        lower[i] = (char)tolower((unsigned char)s[i]);
    _IDEC_flags f = 0;
    r = from_bid(bid128_from_string(lower, BID_ROUNDING_TO_NEAREST, &f));
    local = (uint32_t)f;
    if (n == 0)
        local = MF_DEC_F_INVALID;
    else
        validate(lower, &local);
    free(lower);
    if (flags)
        *flags |= local;
    return r;
}

double mf_dec_to_double(mf_dec a, uint32_t *flags)
{
    _IDEC_flags f = 0;
    double d = bid128_to_binary64(to_bid(a), BID_ROUNDING_TO_NEAREST, &f);
    add_flags(flags, f);
    return d;
}

int64_t mf_dec_to_int64(mf_dec a, mf_dec_round mode, uint32_t *flags)
{
    _IDEC_flags f = 0;
    BID_UINT128 b = to_bid(a);
    int64_t r;
    switch (mode) {
    case MF_DEC_FLOOR: r = bid128_to_int64_floor(b, &f); break;
    case MF_DEC_CEIL: r = bid128_to_int64_ceil(b, &f); break;
    case MF_DEC_TRUNC: r = bid128_to_int64_int(b, &f); break;
    case MF_DEC_HALF_AWAY: r = bid128_to_int64_rninta(b, &f); break;
    default: r = bid128_to_int64_rnint(b, &f); break;
    }
    add_flags(flags, f);
    return r;
}

int32_t mf_dec_to_int32(mf_dec a, mf_dec_round mode, uint32_t *flags)
{
    _IDEC_flags f = 0;
    BID_UINT128 b = to_bid(a);
    int32_t r;
    switch (mode) {
    case MF_DEC_FLOOR: r = bid128_to_int32_floor(b, &f); break;
    case MF_DEC_CEIL: r = bid128_to_int32_ceil(b, &f); break;
    case MF_DEC_TRUNC: r = bid128_to_int32_int(b, &f); break;
    case MF_DEC_HALF_AWAY: r = bid128_to_int32_rninta(b, &f); break;
    default: r = bid128_to_int32_rnint(b, &f); break;
    }
    add_flags(flags, f);
    return r;
}

void mf_dec_to_string(mf_dec a, char *out)
{
    /* libbson prints the BSON specification's form, which is mongod's
     * Decimal128::toString: scientific when the exponent is positive or
     * the adjusted exponent is below -6, plain otherwise. */
    bson_decimal128_to_string(&a, out);
}
