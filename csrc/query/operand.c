/*
 * operand.c -- what a value in a filter is: an operator document to parse
 * ({$gt: 1}), a DBRef to compare whole, or a plain value.
 *
 * mongod decides it once (src/mongo/db/matcher/expression_parser.cpp,
 * isExpressionDocument and isDBRefDocument) and every reader of a filter
 * here -- the matcher, the index bounds, the plan cache's query shape, the
 * partial-index checks, the upsert seed -- must decide it the same way, or
 * an index would bound a query differently from how the matcher reads it.
 *
 *   a value v is an operator document  iff  v is a non-empty document,
 *       its first field name starts with '$', and v is not a DBRef;
 *   a document is a DBRef              iff  it has a field named "$ref"
 *       and one named "$id", in any order and anywhere among its fields
 *       (names only: their types are not looked at);
 *   under $elemMatch an "incomplete" DBRef counts too: any one of "$ref",
 *       "$id", "$db" (so {$elemMatch: {$ref: "c"}} is a document filter
 *       whose "$ref" is an equality, not an unknown operator).
 */
#include "query_int.h"

#include <string.h>

bool mfi_is_dbref_doc(const bson_iter_t *it, bool incomplete)
{
    bson_iter_t f;
    bool has_ref = false, has_id = false, has_db = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &f))
        return false;
    while (!(has_ref && has_id) && bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        has_ref |= strcmp(k, "$ref") == 0;
        has_id |= strcmp(k, "$id") == 0;
        has_db |= strcmp(k, "$db") == 0;
    }
    return incomplete ? has_ref || has_id || has_db : has_ref && has_id;
}

bool mfi_is_operator_doc(const bson_iter_t *it, bool incomplete_dbref)
{
    bson_iter_t first;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &first) ||
        !bson_iter_next(&first) || bson_iter_key(&first)[0] != '$')
        return false;
    return !mfi_is_dbref_doc(it, incomplete_dbref);
}

static bool in_list(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, list[i]) == 0)
            return true;
    return false;
}

bool mfi_is_path_operator(const char *name)
{
    /* mongod's queryOperatorMap without its internal ($_internal...)
     * names; $not is not one (parseSubField reads it before the map). */
    static const char *const ops[] = {
        "$all",    "$bitsAllClear", "$bitsAllSet", "$bitsAnyClear", "$bitsAnySet", "$elemMatch",
        "$eq",     "$exists",       "$geoIntersects", "$geoNear",   "$geoWithin",  "$gt",
        "$gte",    "$in",           "$lt",         "$lte",          "$mod",        "$ne",
        "$near",   "$nearSphere",   "$nin",        "$options",      "$regex",      "$size",
        "$type",   "$within"};
    return in_list(name, ops, sizeof ops / sizeof ops[0]);
}

bool mfi_is_pathless_operator(const char *name)
{
    /* mongod's pathlessOperatorMap without its internal names. */
    static const char *const ops[] = {
        "$alwaysFalse", "$alwaysTrue", "$and", "$comment", "$db",  "$expr",  "$id",
        "$jsonSchema",  "$nor",        "$or",  "$ref",     "$sampleRate", "$text", "$where"};
    return in_list(name, ops, sizeof ops / sizeof ops[0]);
}

bool mfi_elem_match_is_value(const bson_iter_t *it)
{
    bson_iter_t first;
    if (!mfi_is_operator_doc(it, true) || !bson_iter_recurse(it, &first) ||
        !bson_iter_next(&first))
        return false;
    return !mfi_is_pathless_operator(bson_iter_key(&first));
}
