/*
 * validate.c -- one check at the boundary for BSON from outside.
 *
 * libbson's bson_validate() walks the element structure (lengths, terminators,
 * the layout of every type).  It does not bound nesting, and libbson 1.23
 * accepts invalid UTF-8 in keys and values even with BSON_VALIDATE_UTF8
 * (the /bsonx/validate/rejects_bad_utf8 case caught it), so a walk of our
 * own counts depth and checks the UTF-8 of every key and text value.  The walk runs only after libbson has accepted the structure, so it
 * may trust every length it reads.
 */
#include "bsonx.h"

#include <string.h>

#define BAD_UTF8 (-1)

/* Whether the text `it` holds, if any, is UTF-8 (NUL allowed inside a
 * length-prefixed string, as BSON permits). */
static bool text_ok(const bson_iter_t *it)
{
    uint32_t len = 0;
    const char *s, *opts;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8:
        s = bson_iter_utf8(it, &len);
        return bson_utf8_validate(s, len, true);
    case BSON_TYPE_SYMBOL:
        s = bson_iter_symbol(it, &len);
        return bson_utf8_validate(s, len, true);
    case BSON_TYPE_CODE:
        s = bson_iter_code(it, &len);
        return bson_utf8_validate(s, len, true);
    case BSON_TYPE_CODEWSCOPE:
        s = bson_iter_codewscope(it, &len, NULL, NULL);
        return bson_utf8_validate(s, len, true);
    case BSON_TYPE_REGEX:
        s = bson_iter_regex(it, &opts);
        return bson_utf8_validate(s, strlen(s), false) &&
               bson_utf8_validate(opts, strlen(opts), false);
    default:
        return true;
    }
}

/* Deepest document or array nesting at or below `it`'s container, or
 * BAD_UTF8 if a key or text is not UTF-8; stops early once `limit` is
 * exceeded. */
static int depth_of(bson_iter_t *it, int depth, int limit)
{
    int deepest = depth;
    while (bson_iter_next(it)) {
        bson_type_t t = bson_iter_type(it);
        if (!bson_utf8_validate(bson_iter_key(it), bson_iter_key_len(it), false) ||
            !text_ok(it))
            return BAD_UTF8;
        bson_iter_t child;
        int d;
        if (t == BSON_TYPE_DOCUMENT || t == BSON_TYPE_ARRAY) {
            if (depth + 1 > limit)
                return depth + 1;
            if (!bson_iter_recurse(it, &child))
                continue;
            d = depth_of(&child, depth + 1, limit);
        } else if (t == BSON_TYPE_CODEWSCOPE) {
            uint32_t code_len, scope_len;
            const uint8_t *scope;
            bson_t sc;
            bson_iter_codewscope(it, &code_len, &scope_len, &scope);
            if (!bson_init_static(&sc, scope, scope_len) ||
                !bson_iter_init(&child, &sc))
                continue;
            if (depth + 1 > limit)
                return depth + 1;
            d = depth_of(&child, depth + 1, limit);
        } else {
            continue;
        }
        if (d == BAD_UTF8)
            return BAD_UTF8;
        if (d > deepest)
            deepest = d;
        if (deepest > limit)
            return deepest;
    }
    return deepest;
}

int mf_bsonx_validate(const uint8_t *data, size_t len, mf_error *err)
{
    bson_t b;
    size_t offset = 0;

    if (len < 5)
        return mf_error_set(err, MF_InvalidBSON,
                            "BSON size %zu is smaller than the minimum of 5", len);
    uint32_t declared = mf_load_u32le(data);
    if (declared != len)
        return mf_error_set(err, MF_InvalidBSON,
                            "BSON size field %u does not match the %zu bytes present",
                            declared, len);
    if (data[len - 1] != 0)
        return mf_error_set(err, MF_InvalidBSON,
                            "BSON document is not terminated by a zero byte");
    if (!bson_init_static(&b, data, len))
        return mf_error_set(err, MF_InvalidBSON, "BSON document is malformed");
    if (!bson_validate(&b, BSON_VALIDATE_UTF8 | BSON_VALIDATE_UTF8_ALLOW_NULL,
                       &offset))
        return mf_error_set(err, MF_InvalidBSON,
                            "BSON document is invalid at byte offset %zu", offset);

    bson_iter_t it;
    if (!bson_iter_init(&it, &b))
        return mf_error_set(err, MF_InvalidBSON, "BSON document is malformed");
    int depth = depth_of(&it, 0, MF_BSON_MAX_DEPTH);
    if (depth == BAD_UTF8)
        return mf_error_set(err, MF_InvalidBSON, "BSON string or field name is not valid UTF-8");
    if (depth > MF_BSON_MAX_DEPTH)
        return mf_error_set(err, MF_Overflow,
                            "BSONObj exceeds maximum nested object depth");
    return 0;
}
