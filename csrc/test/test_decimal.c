/* Cases for csrc/bsonx/decimal.c: the BSON <-> library encoding and mongod's
 * conversions, without the expression layer. */
#include "test.h"
#include "../bsonx/bsonx.h"

/* BSON decimal128 and the library's BID_UINT128 are the same bits: a value
 * parsed by libbson computes, and prints back, as the library sees it. */
MFT_CASE(roundtrip, "/bsonx/decimal/roundtrip")
{
    static const char *const texts[] = {"0", "1.5", "-123.456E-10", "1E+3", "0.001",
                                        "9999999999999999999999999999999999", "-0", "NaN",
                                        "Infinity", "-Infinity", "1E-6176", "1E+6111"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        bson_decimal128_t lib;
        char out[MF_DEC_STRLEN], back[MF_DEC_STRLEN];
        uint32_t flags = 0;
        CHECK(bson_decimal128_from_string(texts[i], &lib));
        mf_dec ours = mf_dec_from_string(texts[i], &flags);
        CHECK_INT(flags & MF_DEC_F_INVALID, 0);
        CHECK(ours.low == lib.low && ours.high == lib.high);
        mf_dec_to_string(ours, out);
        bson_decimal128_to_string(&lib, back);
        CHECK_STR(out, back);
    }
    /* arithmetic on libbson-parsed values: 1.1 + 2.20 = 3.30 */
    bson_decimal128_t a, b;
    char out[MF_DEC_STRLEN];
    bson_decimal128_from_string("1.1", &a);
    bson_decimal128_from_string("2.20", &b);
    mf_dec_to_string(mf_dec_add(a, b), out);
    CHECK_STR(out, "3.30");
}

MFT_CASE(from_double, "/bsonx/decimal/from_double_15_digits")
{
    char out[MF_DEC_STRLEN];
    mf_dec_to_string(mf_dec_from_double(0.1), out);
    CHECK_STR(out, "0.100000000000000");
    mf_dec_to_string(mf_dec_from_double(100000), out); /* the guessed exponent was one short */
    CHECK_STR(out, "100000.000000000");
    mf_dec_to_string(mf_dec_from_double(0.9999999999999994), out);
    CHECK_STR(out, "0.999999999999999");
    mf_dec_to_string(mf_dec_from_double34(0.1), out);
    CHECK_STR(out, "0.1000000000000000055511151231257827");
}

MFT_CASE(parse, "/bsonx/decimal/parse_grammar")
{
    static const char *const bad[] = {"", "abc", "1.2.3", "1e", "e5", ".", "-", "1e+"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t flags = 0;
        mf_dec_from_string(bad[i], &flags);
        CHECK(flags & MF_DEC_F_INVALID);
    }
    uint32_t flags = 0;
    char out[MF_DEC_STRLEN];
    mf_dec_to_string(mf_dec_from_string("INF", &flags), out);
    CHECK_STR(out, "Infinity");
    CHECK_INT(flags, 0);
}

MFT_CASE(to_int, "/bsonx/decimal/to_integer")
{
    uint32_t flags = 0;
    CHECK_INT(mf_dec_to_int64(mf_dec_from_string("2.5", NULL), MF_DEC_HALF_EVEN, &flags), 2);
    CHECK_INT(mf_dec_to_int64(mf_dec_from_string("-2.5", NULL), MF_DEC_TRUNC, &flags), -2);
    CHECK_INT(mf_dec_to_int64(mf_dec_from_string("-2.5", NULL), MF_DEC_FLOOR, &flags), -3);
    CHECK_INT(flags & MF_DEC_F_INVALID, 0);
    mf_dec_to_int32(mf_dec_from_string("2147483648", NULL), MF_DEC_TRUNC, &flags);
    CHECK(flags & MF_DEC_F_INVALID);
    CHECK_INT(mf_dec_cmp(mf_dec_from_string("1.0", NULL), mf_dec_from_int64(1)), 0);
    CHECK_INT(mf_dec_cmp(mf_dec_from_string("NaN", NULL), mf_dec_from_int64(-5)), -1);
}
