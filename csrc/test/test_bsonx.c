/* Cases for csrc/bsonx: validation at the boundary. */
#include "test.h"
#include "../bsonx/bsonx.h"

#include <math.h>
#include <stdlib.h>

/* {a: {a: {... depth levels ...}}} */
static bson_t *nested(int depth)
{
    bson_t *inner = bson_new();
    BSON_APPEND_INT32(inner, "x", 1);
    for (int i = 0; i < depth; i++) {
        bson_t *outer = bson_new();
        BSON_APPEND_DOCUMENT(outer, "a", inner);
        bson_destroy(inner);
        inner = outer;
    }
    return inner;
}

MFT_CASE(valid, "/bsonx/validate/accepts_well_formed")
{
    mf_error err;
    bson_t *b = BCON_NEW("a", BCON_INT32(1), "s", BCON_UTF8("h\xc3\xa9llo"), "arr", "[",
                         BCON_INT32(1), "{", "k", BCON_BOOL(true), "}", "]");
    CHECK_INT(mf_bsonx_validate(bson_get_data(b), b->len, &err), 0);
    bson_destroy(b);
}

MFT_CASE(lengths, "/bsonx/validate/rejects_bad_lengths")
{
    mf_error err;
    bson_t *b = BCON_NEW("a", BCON_INT32(1));
    uint8_t buf[64];
    memcpy(buf, bson_get_data(b), b->len);
    size_t n = b->len;
    bson_destroy(b);

    CHECK_INT(mf_bsonx_validate(buf, 4, &err), MF_InvalidBSON);
    CHECK_INT(mf_bsonx_validate(buf, n - 1, &err), MF_InvalidBSON); /* declared != present */
    buf[n - 1] = 1;                                                   /* no terminator */
    CHECK_INT(mf_bsonx_validate(buf, n, &err), MF_InvalidBSON);
    buf[n - 1] = 0;
    CHECK_INT(mf_bsonx_validate(buf, n, &err), 0);
    buf[4] = 0x7e; /* unknown element type */
    CHECK_INT(mf_bsonx_validate(buf, n, &err), MF_InvalidBSON);
}

MFT_CASE(utf8, "/bsonx/validate/rejects_bad_utf8")
{
    mf_error err;
    bson_t b = BSON_INITIALIZER;
    bson_append_utf8(&b, "s", 1, "ok\xff", 3); /* libbson appends without checking */
    CHECK_INT(mf_bsonx_validate(bson_get_data(&b), b.len, &err), MF_InvalidBSON);
    bson_reinit(&b);
    bson_append_int32(&b, "k\xc3", 2, 1); /* a truncated two-byte sequence as key */
    CHECK_INT(mf_bsonx_validate(bson_get_data(&b), b.len, &err), MF_InvalidBSON);
    bson_reinit(&b);
    bson_append_utf8(&b, "s", 1, "a\0b", 3); /* an embedded NUL is legal BSON */
    CHECK_INT(mf_bsonx_validate(bson_get_data(&b), b.len, &err), 0);
    bson_destroy(&b);
}

MFT_CASE(depth, "/bsonx/validate/depth_limit")
{
    mf_error err;
    bson_t *ok = nested(MF_BSON_MAX_DEPTH);
    bson_t *deep = nested(MF_BSON_MAX_DEPTH + 1);
    CHECK_INT(mf_bsonx_validate(bson_get_data(ok), ok->len, &err), 0);
    CHECK_INT(mf_bsonx_validate(bson_get_data(deep), deep->len, &err), MF_Overflow);
    CHECK(strstr(err.msg, "depth") != NULL);
    bson_destroy(ok);
    bson_destroy(deep);
}

MFT_CASE(context, "/bsonx/validate/error_names_path_and_id")
{
    mf_error err;
    bson_t *b = BCON_NEW("_id", BCON_INT32(5), "a", "{", "b", BCON_BOOL(true), "}");
    uint8_t buf[128];
    memcpy(buf, bson_get_data(b), b->len);
    /* the bool's value byte is the fourth from the end: ... 01 00 00 */
    CHECK_INT(buf[b->len - 3], 1);
    buf[b->len - 3] = 2;
    CHECK_INT(mf_bsonx_validate(buf, b->len, &err), MF_InvalidBSON);
    CHECK_STR(err.msg, "BSON bool is neither false nor true in element with field name "
                       "'a.b' in object with _id: 5");
    bson_destroy(b);

    /* Before the _id has been seen, it is unknown. */
    b = BCON_NEW("a", BCON_INT32(1), "_id", BCON_INT32(5));
    memcpy(buf, bson_get_data(b), b->len);
    buf[4] = 0x7f - 2; /* an unknown type code on 'a' */
    CHECK_INT(mf_bsonx_validate(buf, b->len, &err), MF_InvalidBSON);
    CHECK_STR(err.msg, "Unrecognized BSON type 125 in element with field name 'a' in "
                       "object with unknown _id");
    bson_destroy(b);
}

MFT_CASE(tostring, "/bsonx/tostring/mongod_shapes")
{
    char out[256];
    bson_oid_t oid;
    bson_oid_init_from_string(&oid, "5f1b2c3d4e5f60718293a4b5");
    bson_t *b = BCON_NEW("a", BCON_INT32(1), "d", BCON_DOUBLE(2.0), "e", BCON_DOUBLE(0.5),
                         "s", BCON_UTF8("x\"y"), "n", BCON_NULL, "t", BCON_BOOL(true),
                         "arr", "[", BCON_INT64(7), "{", "}", "]", "o", BCON_OID(&oid),
                         "dt", BCON_DATE_TIME(1000), "empty", "[", "]");
    mf_bsonx_to_string(b, out, sizeof out);
    CHECK_STR(out, "{ a: 1, d: 2.0, e: 0.5, s: \"x\\\"y\", n: null, t: true, arr: [ 7, {} ], "
                   "o: ObjectId('5f1b2c3d4e5f60718293a4b5'), dt: new Date(1000), empty: [] }");
    bson_t empty = BSON_INITIALIZER;
    mf_bsonx_to_string(&empty, out, sizeof out);
    CHECK_STR(out, "{}");
    /* Too long for the buffer: cut with "...". */
    char small[16];
    mf_bsonx_to_string(b, small, sizeof small);
    CHECK(strlen(small) < sizeof small);
    CHECK(strstr(small, "...") != NULL);
    bson_destroy(b);
}

MFT_CASE(tostring_code, "/bsonx/tostring/code_and_symbol")
{
    /* Each element alone, as bounds print them: the text's length is read
     * after libbson sets it (read before, the first rendering was empty). */
    char out[64];
    bson_t *b = bson_new();
    BSON_APPEND_CODE(b, "c", "f()");
    BSON_APPEND_SYMBOL(b, "s", "sym");
    bson_iter_t it;
    CHECK(bson_iter_init_find(&it, b, "c"));
    mf_bsonx_elem_to_string(&it, false, out, sizeof out);
    CHECK_STR(out, "f()");
    CHECK(bson_iter_init_find(&it, b, "s"));
    mf_bsonx_elem_to_string(&it, true, out, sizeof out);
    CHECK_STR(out, "s: sym");
    bson_destroy(b);
}

/* ------------------------------------------------------------ collation */

static int coll_of(const char *json, mf_collator **out, mf_error *err)
{
    bson_error_t e;
    bson_t *spec = bson_new_from_json((const uint8_t *)json, -1, &e);
    if (!spec)
        return -1;
    int rc = mf_collator_new(spec, out, err);
    bson_destroy(spec);
    return rc;
}

MFT_CASE(coll_parse, "/bsonx/collation/parse")
{
    mf_error err;
    mf_collator *c = NULL;
    CHECK_INT(coll_of("{\"locale\": \"simple\"}", &c, &err), 0);
    CHECK(c == NULL);
    CHECK_INT(coll_of("{\"locale\": \"simple\", \"strength\": 2}", &c, &err), MF_FailedToParse);
    CHECK_INT(coll_of("{\"strength\": 2}", &c, &err), MF_NoSuchKey);
    CHECK_INT(coll_of("{\"locale\": 1}", &c, &err), MF_TypeMismatch);
    CHECK_INT(coll_of("{\"locale\": \"\"}", &c, &err), MF_BadValue);
    CHECK_INT(coll_of("{\"locale\": \"xx_bogus\"}", &c, &err), MF_BadValue);
    CHECK_INT(coll_of("{\"locale\": \"en_US\", \"strength\": 6}", &c, &err), MF_FailedToParse);
    CHECK_INT(coll_of("{\"locale\": \"en_US\", \"strength\": 1.5}", &c, &err), MF_BadValue);
    CHECK_INT(coll_of("{\"locale\": \"en_US\", \"caseLevel\": 1}", &c, &err), MF_TypeMismatch);
    CHECK_INT(coll_of("{\"locale\": \"en_US\", \"caseFirst\": \"x\"}", &c, &err),
              MF_FailedToParse);
    CHECK_INT(coll_of("{\"locale\": \"en_US\", \"foo\": 1}", &c, &err), MF_FailedToParse);
    CHECK_INT(coll_of("{\"locale\": \"en_US\", \"strength\": 1, \"backwards\": true}", &c, &err),
              MF_BadValue);
    CHECK_INT(coll_of("{\"locale\": \"en_US\", \"strength\": 2, \"caseFirst\": \"upper\"}", &c,
                      &err),
              MF_BadValue);
    CHECK_INT(coll_of("{\"locale\": \"en_US\", \"version\": \"1.0\"}", &c, &err),
              MF_IncompatibleCollationVersion);
    CHECK_INT(coll_of("{\"locale\": \"en_US\", \"strength\": 2}", &c, &err), 0);
    CHECK(c != NULL);
    bson_t full = BSON_INITIALIZER;
    mf_collator_to_bson(c, &full);
    bson_iter_t it;
    CHECK(bson_iter_init_find(&it, &full, "locale") &&
          strcmp(bson_iter_utf8(&it, NULL), "en_US") == 0);
    CHECK(bson_iter_init_find(&it, &full, "strength") && bson_iter_int32(&it) == 2);
    CHECK(bson_iter_init_find(&it, &full, "version"));
    CHECK_INT((int)bson_count_keys(&full), 10);
    /* The full spec parses back to an equal collator. */
    mf_collator *d = NULL;
    CHECK_INT(mf_collator_new(&full, &d, &err), 0);
    CHECK(mf_collator_equal(c, d));
    mf_collator_unref(d);
    bson_destroy(&full);
    mf_collator_unref(c);
}

MFT_CASE(coll_order, "/bsonx/collation/order_and_keys")
{
    mf_error err;
    mf_collator *ci = NULL, *num = NULL;
    CHECK_INT(coll_of("{\"locale\": \"en_US\", \"strength\": 2}", &ci, &err), 0);
    CHECK_INT(coll_of("{\"locale\": \"en\", \"numericOrdering\": true}", &num, &err), 0);
    CHECK_INT(mf_collator_strcmp(ci, "PING", 4, "ping", 4), 0);
    CHECK(mf_collator_strcmp(ci, "a", 1, "B", 1) < 0);
    CHECK(mf_collator_strcmp(num, "10", 2, "9", 1) > 0);

    /* Values: strings in documents and arrays compare collated; keys too. */
    bson_t *a = BCON_NEW("v", "{", "x", BCON_UTF8("Hello"), "y", "[", BCON_UTF8("A"), "]", "}");
    bson_t *b = BCON_NEW("v", "{", "x", BCON_UTF8("hello"), "y", "[", BCON_UTF8("a"), "]", "}");
    bson_iter_t ia, ib;
    bson_iter_init_find(&ia, a, "v");
    bson_iter_init_find(&ib, b, "v");
    CHECK(mf_bsonx_compare_values(&ia, &ib) != 0);
    CHECK_INT(mf_bsonx_compare_values_coll(&ia, &ib, ci), 0);
    mf_buf ka = {0}, kb = {0};
    CHECK_INT(mf_bsonx_key_append_coll(&ka, &ia, false, ci), 0);
    CHECK_INT(mf_bsonx_key_append_coll(&kb, &ib, false, ci), 0);
    CHECK(ka.len == kb.len && memcmp(ka.data, kb.data, ka.len) == 0);
    mf_buf_free(&ka);
    mf_buf_free(&kb);
    bson_destroy(a);
    bson_destroy(b);

    /* Sort keys order as strcmp does, over a mix of cases and accents. */
    static const char *const words[] = {"apple", "Apple", "\xc3\xa9tude", "etude", "Zebra",
                                        "zebra", "10", "9",     "",       "a b",   "ab"};
    size_t n = sizeof words / sizeof *words;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            mf_buf x = {0}, y = {0};
            CHECK_INT(mf_collator_sort_key(num, words[i], strlen(words[i]), &x), 0);
            CHECK_INT(mf_collator_sort_key(num, words[j], strlen(words[j]), &y), 0);
            CHECK(memchr(x.data, 0, x.len) == NULL);
            size_t m = x.len < y.len ? x.len : y.len;
            int c = memcmp(x.data, y.data, m);
            c = c ? c : (x.len < y.len ? -1 : x.len > y.len);
            int s = mf_collator_strcmp(num, words[i], strlen(words[i]), words[j],
                                       strlen(words[j]));
            CHECK((c < 0) == (s < 0) && (c > 0) == (s > 0));
            mf_buf_free(&x);
            mf_buf_free(&y);
        }
    mf_collator_unref(ci);
    mf_collator_unref(num);
}

/* ------------------------------------------------------- keys back to strings */

/* A key's string read back (mf_bsonx_key_string) is the string encoded,
 * both directions, NULs and 0xFF-looking bytes included, with a second
 * value after it; a key of another type reads as none. */
MFT_CASE(key_string, "/bsonx/keys/string_read_back")
{
    uint32_t seed = 12345;
    mf_buf key = {0}, scratch = {0};
    for (int round = 0; round < 2000; round++) {
        char s[24];
        size_t n = (seed = seed * 1103515245u + 12345u) >> 16 & 15;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            static const char pick[] = {'a', 'b', '\0', '\x7f', 'z', '\0', 'q'};
            s[i] = pick[(seed >> 16) % sizeof pick];
        }
        bool desc = round & 1;
        bson_t *d = bson_new();
        bson_append_utf8(d, "s", 1, s, (int)n);
        BSON_APPEND_INT32(d, "after", round);
        bson_iter_t it;
        key.len = 0;
        CHECK(bson_iter_init(&it, d));
        while (bson_iter_next(&it))
            CHECK_INT(mf_bsonx_key_append(&key, &it, desc), 0);
        const char *str = NULL;
        size_t len = 99;
        CHECK_INT(mf_bsonx_key_string(key.data, key.len, desc, &scratch, &str, &len), 1);
        CHECK(len == n && memcmp(str, s, n) == 0);
        /* cut short of its terminator: damage */
        size_t nuls = 0;
        for (size_t i = 0; i < n; i++)
            nuls += s[i] == '\0';
        CHECK_INT(mf_bsonx_key_string(key.data, 1 + n + nuls, desc, &scratch, &str, &len), -1);
        bson_destroy(d);
    }
    bson_t *num = BCON_NEW("n", BCON_INT32(5));
    bson_iter_t it;
    const char *str;
    size_t len;
    key.len = 0;
    CHECK(bson_iter_init_find(&it, num, "n"));
    CHECK_INT(mf_bsonx_key_append(&key, &it, false), 0);
    CHECK_INT(mf_bsonx_key_string(key.data, key.len, false, &scratch, &str, &len), 0);
    bson_destroy(num);
    mf_buf_free(&key);
    mf_buf_free(&scratch);
}

/* mf_bsonx_key_value_len cuts a compound key where its first value ends,
 * for a value of every type (nested, with NULs, negative numbers...) in
 * either direction, under a collation too; a key cut short is damage. */
MFT_CASE(key_value_len, "/bsonx/keys/value_len")
{
    bson_t *d = bson_new(), scope = BSON_INITIALIZER, sub = BSON_INITIALIZER;
    bson_oid_t oid;
    bson_decimal128_t dec;
    bson_oid_init_from_string(&oid, "0123456789abcdef01234567");
    bson_decimal128_from_string("-1.2345E-300", &dec);
    BSON_APPEND_INT32(&scope, "x", 1);
    const double doubles[] = {0.0, -0.0, 1.5, -1.5, 1e300, -1e-300, 0.1, -123456.789};
    for (size_t i = 0; i < sizeof doubles / sizeof *doubles; i++)
        BSON_APPEND_DOUBLE(d, "d", doubles[i]);
    BSON_APPEND_UTF8(&sub, "k", "v\x01w");
    BSON_APPEND_INT32(&sub, "n", -7);
    BSON_APPEND_DOUBLE(d, "nan", NAN);
    BSON_APPEND_DOUBLE(d, "inf", INFINITY);
    BSON_APPEND_DOUBLE(d, "-inf", -INFINITY);
    BSON_APPEND_INT32(d, "i", -2147483647 - 1);
    BSON_APPEND_INT64(d, "l", INT64_MAX);
    BSON_APPEND_DECIMAL128(d, "dec", &dec);
    bson_append_utf8(d, "s", 1, "a\0b\0", 4);
    BSON_APPEND_UTF8(d, "empty", "");
    BSON_APPEND_SYMBOL(d, "sym", "sy");
    BSON_APPEND_DOCUMENT(d, "doc", &sub);
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(d, "arr", &arr);
    BSON_APPEND_INT32(&arr, "0", 3);
    BSON_APPEND_DOCUMENT(&arr, "1", &sub);
    BSON_APPEND_NULL(&arr, "2");
    bson_append_array_end(d, &arr);
    BSON_APPEND_BINARY(d, "bin", BSON_SUBTYPE_BINARY, (const uint8_t *)"\0\1\2", 3);
    BSON_APPEND_OID(d, "oid", &oid);
    BSON_APPEND_BOOL(d, "t", true);
    BSON_APPEND_DATE_TIME(d, "date", -1000);
    BSON_APPEND_TIMESTAMP(d, "ts", 5, 6);
    BSON_APPEND_REGEX(d, "re", "a.c", "i");
    BSON_APPEND_DBPOINTER(d, "dbp", "db.c", &oid);
    BSON_APPEND_CODE(d, "code", "f()");
    BSON_APPEND_CODE_WITH_SCOPE(d, "cws", "g()", &scope);
    BSON_APPEND_NULL(d, "null");
    BSON_APPEND_UNDEFINED(d, "undef");
    BSON_APPEND_MINKEY(d, "min");
    BSON_APPEND_MAXKEY(d, "max");
    mf_error err;
    mf_collator *ci = NULL;
    CHECK_INT(coll_of("{\"locale\": \"en_US\", \"strength\": 2}", &ci, &err), 0);
    bson_t *after = BCON_NEW("z", BCON_INT32(-9));
    bson_iter_t it, z;
    CHECK(bson_iter_init(&z, after) && bson_iter_next(&z));
    int n = 0;
    CHECK(bson_iter_init(&it, d));
    while (bson_iter_next(&it)) {
        for (int k = 0; k < 4; k++) {
            bool desc = k & 1;
            const mf_collator *coll = k & 2 ? ci : NULL;
            mf_buf key = {0};
            CHECK_INT(mf_bsonx_key_append_coll(&key, &it, desc, coll), 0);
            size_t first = key.len;
            CHECK_INT(mf_bsonx_key_append_coll(&key, &z, desc, coll), 0);
            CHECK(mf_bsonx_key_value_len(key.data, key.len, desc) == first);
            CHECK(mf_bsonx_key_value_len(key.data, first, desc) == first);
            if (first > 1)
                CHECK(mf_bsonx_key_value_len(key.data, first - 1, desc) == 0);
            mf_buf_free(&key);
            n++;
        }
    }
    CHECK(n == 4 * (int)bson_count_keys(d));
    mf_collator_unref(ci);
    bson_destroy(after);
    bson_destroy(&scope);
    bson_destroy(&sub);
    bson_destroy(d);
}

/* One value {"": v} from a decimal string. */
static int to_int64_dec(const char *s, int64_t *out)
{
    bson_decimal128_t d;
    bson_t b = BSON_INITIALIZER;
    bson_iter_t it;
    bson_decimal128_from_string(s, &d);
    bson_append_decimal128(&b, "", 0, &d);
    bson_iter_init(&it, &b);
    bson_iter_next(&it);
    int rc = mf_bsonx_number_to_int64(&it, out);
    bson_destroy(&b);
    return rc;
}

static int to_int64_double(double v, int64_t *out)
{
    bson_t b = BSON_INITIALIZER;
    bson_iter_t it;
    bson_append_double(&b, "", 0, v);
    bson_iter_init(&it, &b);
    bson_iter_next(&it);
    int rc = mf_bsonx_number_to_int64(&it, out);
    bson_destroy(&b);
    return rc;
}

MFT_CASE(to_int64, "/bsonx/number_to_int64/truncates_toward_zero_in_range")
{
    int64_t v = 0;
    CHECK_INT(to_int64_dec("9007199254740993", &v), 0);
    CHECK(v == 9007199254740993LL); /* no double holds it */
    CHECK_INT(to_int64_dec("-7.9", &v), 0);
    CHECK(v == -7);
    CHECK_INT(to_int64_dec("1E+18", &v), 0);
    CHECK(v == 1000000000000000000LL);
    CHECK_INT(to_int64_dec("9223372036854775807.99", &v), 0);
    CHECK(v == INT64_MAX);
    CHECK_INT(to_int64_dec("-9223372036854775808.5", &v), 0);
    CHECK(v == INT64_MIN);
    CHECK_INT(to_int64_dec("-0.5", &v), 0);
    CHECK(v == 0);
    CHECK_INT(to_int64_dec("1E-6176", &v), 0);
    CHECK(v == 0);
    CHECK_INT(to_int64_dec("9223372036854775808", &v), 2);
    CHECK_INT(to_int64_dec("-9223372036854775809", &v), 2);
    CHECK_INT(to_int64_dec("1E+6144", &v), 2);
    CHECK_INT(to_int64_dec("NaN", &v), 1);
    CHECK_INT(to_int64_dec("-Infinity", &v), 1);
    CHECK_INT(to_int64_double(-9223372036854775808.0, &v), 0);
    CHECK(v == INT64_MIN);
    CHECK_INT(to_int64_double(9223372036854775808.0, &v), 2);
    CHECK_INT(to_int64_double(-2.75, &v), 0);
    CHECK(v == -2);
    CHECK_INT(to_int64_double(NAN, &v), 1);
}

/* append.c: Code, CodeWScope and DBPointer strings with a NUL, appended
 * from an iterator and from a value, and copied, keep all their bytes;
 * the copies free cleanly (run under ASan in CI). */
MFT_CASE(append_nul, "/bsonx/append/code_and_dbpointer_keep_bytes_past_a_nul")
{
    /* {c: Code("x\0y"), w: CodeWScope("x\0y", {}), p: DBPointer("a\0b", oid)} */
    static const uint8_t raw[] = {
        59, 0, 0, 0, /* 4 + 11 + 20 + 23 + 1 */
        0x0D, 'c', 0, 4, 0, 0, 0, 'x', 0, 'y', 0,
        0x0F, 'w', 0, 17, 0, 0, 0, 4, 0, 0, 0, /* 4 + (4 + 4) + 5 */ 'x', 0, 'y', 0, 5, 0, 0, 0, 0,
        0x0C, 'p', 0, 4, 0, 0, 0, 'a', 0, 'b', 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
        0};
    bson_t src;
    CHECK(bson_init_static(&src, raw, sizeof raw));
    bson_t *by_iter = bson_new(), *by_value = bson_new();
    bson_iter_t it;
    CHECK(bson_iter_init(&it, &src));
    while (bson_iter_next(&it)) {
        CHECK(mf_bsonx_append_iter(by_iter, NULL, 0, &it));
        bson_value_t copy;
        mf_bsonx_value_copy(bson_iter_value(&it), &copy);
        CHECK(mf_bsonx_append_value(by_value, bson_iter_key(&it), -1, &copy));
        bson_value_destroy(&copy);
    }
    CHECK_INT(by_iter->len, sizeof raw);
    CHECK(memcmp(bson_get_data(by_iter), raw, sizeof raw) == 0);
    CHECK_INT(by_value->len, sizeof raw);
    CHECK(memcmp(bson_get_data(by_value), raw, sizeof raw) == 0);
    /* mf_bsonx_copy_except leaves one field out and keeps the others whole */
    bson_t *rest = bson_new();
    mf_bsonx_copy_except(&src, rest, "w");
    CHECK(bson_iter_init_find(&it, rest, "c"));
    uint32_t len;
    const char *code = bson_iter_code(&it, &len);
    CHECK(len == 3 && memcmp(code, "x\0y", 3) == 0);
    CHECK(!bson_has_field(rest, "w") && bson_has_field(rest, "p"));
    bson_destroy(rest);
    bson_destroy(by_iter);
    bson_destroy(by_value);
}

MFT_CASE(field_path, "/bsonx/fieldpath/dbref_names_and_mongod_order")
{
    mf_error err;
#define PATH(s) mf_bsonx_field_path_check((s), sizeof(s) - 1, &err)
    CHECK_INT(PATH("r.$id"), 0);
    CHECK_INT(PATH("$ref"), 0);
    CHECK_INT(PATH("a.$db.b"), 0);
    CHECK_INT(PATH("a.$sortKey"), 0);
    CHECK_INT(PATH("a.$idx"), 16410); /* a name, not a prefix */
    CHECK_INT(PATH("a.$"), 16410);
    CHECK_INT(PATH(""), 40352);
    CHECK_INT(PATH("a."), 40353);     /* before the empty component */
    CHECK_INT(PATH("$x."), 40353);    /* before the '$' component */
    CHECK_INT(PATH("a..b"), 15998);
    CHECK_INT(PATH("a.$x..b"), 16410); /* components in order */
    CHECK_INT(PATH("a\0b"), 16411);
#undef PATH
    CHECK_INT(mf_bsonx_field_name_check("a.b", 3, &err), 16412);
    CHECK_INT(mf_bsonx_field_name_check("$id", 3, &err), 0);
    CHECK_INT(mf_bsonx_field_name_check("", 0, &err), 15998);
    /* MF_BSON_MAX_DEPTH components, and one more */
    char deep[2 * MF_BSON_MAX_DEPTH + 2];
    for (int i = 0; i < MF_BSON_MAX_DEPTH; i++)
        memcpy(deep + 2 * i, "a.", 2);
    CHECK_INT(mf_bsonx_field_path_check(deep, 2 * MF_BSON_MAX_DEPTH - 1, &err), 0);
    memcpy(deep + 2 * MF_BSON_MAX_DEPTH, "a", 1);
    CHECK_INT(mf_bsonx_field_path_check(deep, 2 * MF_BSON_MAX_DEPTH + 1, &err), MF_Overflow);
}
