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
