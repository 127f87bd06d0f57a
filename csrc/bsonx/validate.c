/*
 * validate.c -- one check at the boundary for BSON from outside.
 *
 * libbson's bson_validate() walks the element structure (lengths, terminators,
 * the layout of every type) and UTF-8; it does not bound nesting, so a walk
 * of our own counts depth.  The walk runs only after libbson has accepted the
 * structure, so it may trust every length it reads.
 */
#include "bsonx.h"

/* Deepest document or array nesting at or below `it`'s container; stops
 * early once `limit` is exceeded. */
static int depth_of(bson_iter_t *it, int depth, int limit)
{
    int deepest = depth;
    while (bson_iter_next(it)) {
        bson_type_t t = bson_iter_type(it);
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
    if (depth_of(&it, 0, MF_BSON_MAX_DEPTH) > MF_BSON_MAX_DEPTH)
        return mf_error_set(err, MF_InvalidBSON,
                            "BSONObj exceeds maximum nested object depth: %d",
                            MF_BSON_MAX_DEPTH);
    return 0;
}
