/*
 * decimal.h -- Decimal128 arithmetic with mongod's semantics, over Intel's
 * Decimal Floating-Point Math Library (the library mongod itself uses).
 *
 * A value is a bson_decimal128_t: BSON stores decimal128 in the BID
 * encoding, the library's own, so no conversion happens (see decimal.c).
 * Every operation rounds half to even unless it takes a rounding mode, as
 * mongod's Decimal128 defaults.  `flags` arguments (may be NULL) receive
 * the IEEE 754 exception bits the operation raised (MF_DEC_F_*), OR-ed in.
 *
 * Used by the expression evaluator's arithmetic and $convert; meant for the
 * $sum/$avg accumulators and anything else that must add decimals.
 */
#ifndef MF_AGG_DECIMAL_H
#define MF_AGG_DECIMAL_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

typedef bson_decimal128_t mf_dec;

/* Rounding modes, as mongod's Decimal128::RoundingMode (and the library's). */
typedef enum {
    MF_DEC_HALF_EVEN = 0, /* kRoundTiesToEven */
    MF_DEC_FLOOR = 1,     /* kRoundTowardNegative */
    MF_DEC_CEIL = 2,      /* kRoundTowardPositive */
    MF_DEC_TRUNC = 3,     /* kRoundTowardZero */
    MF_DEC_HALF_AWAY = 4  /* kRoundTiesToAway */
} mf_dec_round;

/* Exception flags (the library's values). */
enum {
    MF_DEC_F_INVALID = 0x01,
    MF_DEC_F_DIVBYZERO = 0x04,
    MF_DEC_F_OVERFLOW = 0x08,
    MF_DEC_F_UNDERFLOW = 0x10,
    MF_DEC_F_INEXACT = 0x20
};

/* Longest text of mf_dec_to_string, with its NUL. */
#define MF_DEC_STRLEN BSON_DECIMAL128_STRING

mf_dec mf_dec_add(mf_dec a, mf_dec b);
mf_dec mf_dec_sub(mf_dec a, mf_dec b);
mf_dec mf_dec_mul(mf_dec a, mf_dec b);
mf_dec mf_dec_div(mf_dec a, mf_dec b); /* x/0 is +-Infinity, 0/0 NaN */
mf_dec mf_dec_mod(mf_dec a, mf_dec b); /* fmod: the sign of a, as mongod's modulo */
mf_dec mf_dec_abs(mf_dec a);
mf_dec mf_dec_neg(mf_dec a);
mf_dec mf_dec_exp(mf_dec a);
mf_dec mf_dec_ln(mf_dec a);
mf_dec mf_dec_log10(mf_dec a);
/* log of `a` in `base`: log2/log10 for bases 2 and 10, else ln a / ln base. */
mf_dec mf_dec_log(mf_dec a, mf_dec base);
/* mongod's Decimal128::power: exp10/exp2 for bases 10 and 2, else pow; the
 * result is then widened to 34 digits where exact (8 -> 8.000...000). */
mf_dec mf_dec_pow(mf_dec base, mf_dec exp);
mf_dec mf_dec_sqrt(mf_dec a);

/* Round `a` to a multiple of 10^exp10 (mongod's Decimal128::quantize with
 * the quantum 1E<exp10>): when that would need more than 34 digits the
 * value comes back with 34 digits instead of NaN.  `flags` may be NULL. */
mf_dec mf_dec_quantize(mf_dec a, int exp10, mf_dec_round mode, uint32_t *flags);

/* Three-way numeric comparison: -1, 0, 1.  NaN equals NaN and is less than
 * every other value (MongoDB's order); 1.0 and 1.00 are equal. */
int mf_dec_cmp(mf_dec a, mf_dec b);
bool mf_dec_isnan(mf_dec a);
bool mf_dec_isinf(mf_dec a);
bool mf_dec_iszero(mf_dec a);
bool mf_dec_isneg(mf_dec a); /* the sign bit (also for -0 and -NaN) */

mf_dec mf_dec_from_int64(int64_t i);
/* mongod's Decimal128(double): rounded to 15 significant digits (so 0.1
 * becomes 0.100000000000000); zero, infinities and NaN as they are. */
mf_dec mf_dec_from_double(double d);
/* The double's exact binary value rounded to 34 digits (kRoundTo34Digits). */
mf_dec mf_dec_from_double34(double d);
/* Parse as mongod's Decimal128(string): case-insensitive, "[+-]digits[.digits]
 * [e[+-]digits]", "nan", "inf", "infinity"; rounds to 34 digits.  On a
 * malformed string *flags gets MF_DEC_F_INVALID; overflow and underflow set
 * their flags (the value then is the library's: Infinity or a rounded
 * tiny).  `s` is NUL-terminated. */
mf_dec mf_dec_from_string(const char *s, uint32_t *flags);

double mf_dec_to_double(mf_dec a, uint32_t *flags);
/* To an integer with the rounding mode; out of range or NaN sets
 * MF_DEC_F_INVALID (and the value is the library's INT_MIN). */
int64_t mf_dec_to_int64(mf_dec a, mf_dec_round mode, uint32_t *flags);
int32_t mf_dec_to_int32(mf_dec a, mf_dec_round mode, uint32_t *flags);
/* mongod's Decimal128::toString (the BSON spec's form): "1.50", "1E+3",
 * "-Infinity", "NaN".  `out` holds MF_DEC_STRLEN bytes. */
void mf_dec_to_string(mf_dec a, char *out);

#endif /* MF_AGG_DECIMAL_H */
