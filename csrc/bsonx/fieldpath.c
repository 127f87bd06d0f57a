/*
 * fieldpath.c -- the one rule for field paths: mongod's FieldPath.
 *
 * mongod builds a FieldPath for every path the aggregation layer names
 * ("$a.b" in an expression, $lookup's localField, $unwind's path, $sort's
 * keys, a projection's fields, a $facet's name, an object literal's keys
 * ...), and its constructor and uassertValidFieldName are the only checks
 * (src/mongo/db/pipeline/field_path.cpp).  Every caller here goes through
 * these two functions, so the layers cannot drift apart.
 *
 * A path, in the order mongod checks it:
 *   1. not empty                                   40352
 *   2. not ending in '.'                           40353
 *   3. at most MF_BSON_MAX_DEPTH components        Overflow (15)
 *   4. each component, in turn:
 *        not empty                                 15998
 *        no leading '$', except the names below    16410
 *        no NUL byte                               16411
 *        no '.' (only reachable for one name)      16412
 *
 * The '$' names allowed as components are DBRef's fields ($ref, $id, $db:
 * a stored DBRef is {$ref, $id[, $db]}, so "r.$id" must be reachable) and
 * the metadata names mongod itself writes ($sortKey, $recordId,
 * $searchSortValues, $searchScore).
 */
#include "bsonx.h"

#include <string.h>

/* "... Consider using $getField or $setField.": mongod 7.0 appends it to
 * 16410 and 16412 (any featureCompatibilityVersion from 5.0 on). */
#define HINT " Consider using $getField or $setField."

static bool allowed_dollar_name(const char *name, size_t len)
{
    static const char *const allowed[] = {"$id", "$ref", "$db", "$sortKey", "$recordId",
                                          "$searchSortValues", "$searchScore"};
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (strlen(allowed[i]) == len && memcmp(allowed[i], name, len) == 0)
            return true;
    return false;
}

int mf_bsonx_field_name_check(const char *name, size_t len, mf_error *err)
{
    if (len == 0)
        return mf_error_set(err, 15998, "FieldPath field names may not be empty strings.");
    if (name[0] == '$' && !allowed_dollar_name(name, len))
        return mf_error_set(err, 16410, "FieldPath field names may not start with '$'." HINT);
    /* mongod's message literal holds the NUL itself, so it ends there. */
    if (memchr(name, '\0', len))
        return mf_error_set(err, 16411, "FieldPath field names may not contain '");
    if (memchr(name, '.', len))
        return mf_error_set(err, 16412, "FieldPath field names may not contain '.'." HINT);
    return 0;
}

int mf_bsonx_field_path_check(const char *path, size_t len, mf_error *err)
{
    if (len == 0)
        return mf_error_set(err, 40352, "FieldPath cannot be constructed with empty string");
    if (path[len - 1] == '.')
        return mf_error_set(err, 40353, "FieldPath must not end with a '.'.");
    size_t parts = 1;
    for (size_t i = 0; i < len; i++)
        parts += path[i] == '.';
    if (parts > MF_BSON_MAX_DEPTH)
        return mf_error_set(err, MF_Overflow, "FieldPath is too long");
    const char *p = path, *end = path + len;
    for (;;) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        int rc = mf_bsonx_field_name_check(p, n, err);
        if (rc)
            return rc;
        if (!dot)
            return 0;
        p = dot + 1;
    }
}
