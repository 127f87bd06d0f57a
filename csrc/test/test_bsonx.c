/* Cases for csrc/bsonx: validation at the boundary. */
#include "test.h"
#include "../bsonx/bsonx.h"

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
