/*
 * coll_options.c -- collection options beyond the collation that create
 * and collMod take, parsed as mongod 7.0's IDL parses them, and what the
 * catalog keeps of them.
 *
 * A collection's catalog entry is {uuid, options} (cmd_catalog.c); the
 * options document keeps mongod's CollectionOptions::appendBSON order, so
 * listCollections shows them as mongod does:
 *
 *   FIELD                         PRESENT            VALUE
 *   changeStreamPreAndPostImages  when enabled       {enabled: true}
 *   collation                     when not simple    the full collation
 *   clusteredIndex                clustered only     {v: 2, key: {_id: 1},
 *                                                    name, unique: true}
 *
 * Clustered collections.  mongod stores the documents of a collection
 * clustered by _id in the _id order of a record store keyed by _id, with no
 * separate _id index.  Here the records keep their RecordId order and the
 * _id index ("_id_") stays as for any collection; what a client sees of the
 * difference: listIndexes shows the clustered index (its name, clustered:
 * true) in place of "_id_", listCollections shows no idIndex, the
 * clustered index cannot be dropped, hidden or created again -- and a scan
 * without a sort returns documents in insertion order, not in _id order.
 */
#include "command_int.h"

#include <string.h>

#define CLUSTERED_DEFAULT_NAME "_id_"

/* A document holding one of mongod's "safeBool" values (bool or number). */
static bool is_safe_bool(const bson_iter_t *it)
{
    return BSON_ITER_HOLDS_BOOL(it) || mfi_is_number(it);
}

int mfi_parse_clustered_index(const bson_iter_t *it, const char *cmd, bson_t *out,
                              mf_error *err)
{
    bson_iter_t f;
    bool has_key = false, has_unique = false, unique = false;
    bson_t key;
    const char *name = CLUSTERED_DEFAULT_NAME;
    int64_t v = 2;
    if (BSON_ITER_HOLDS_BOOL(it))
        /* {clusteredIndex: <bool>}: time-series buckets collections only */
        return mf_error_set(err, 5979703,
                            "The 'clusteredIndex' legacy format {clusteredIndex: <bool>} is only "
                            "supported for specialized collections.");
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field '%s.clusteredIndex' is the wrong type '%s', expected "
                            "types '[bool, object]'",
                            cmd, mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "v") == 0) {
            if (!mfi_is_number(&f))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field '%s.clusteredIndex.v' is the wrong type '%s', "
                                    "expected types '[long, int, decimal, double]'",
                                    cmd, mf_bsonx_type_alias(bson_iter_type(&f)));
            v = bson_iter_as_int64(&f);
        } else if (strcmp(k, "key") == 0) {
            if (!mfi_doc_arg(&f, &key))
                return mfi_type_error(err, cmd, "clusteredIndex.key", &f, "object");
            has_key = true;
        } else if (strcmp(k, "name") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&f))
                return mfi_type_error(err, cmd, "clusteredIndex.name", &f, "string");
            name = bson_iter_utf8(&f, NULL);
        } else if (strcmp(k, "unique") == 0) {
            if (!is_safe_bool(&f))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field '%s.clusteredIndex.unique' is the wrong type "
                                    "'%s', expected types '[bool, long, int, decimal, double]'",
                                    cmd, mf_bsonx_type_alias(bson_iter_type(&f)));
            unique = bson_iter_as_bool(&f);
            has_unique = true;
        } else {
            return mf_error_set(err, 40415, "BSON field '%s.clusteredIndex.%s' is an unknown field.",
                                cmd, k);
        }
    }
    if (!has_key)
        return mf_error_set(err, 40414,
                            "BSON field '%s.clusteredIndex.key' is missing but a required field",
                            cmd);
    if (!has_unique)
        return mf_error_set(err, 40414,
                            "BSON field '%s.clusteredIndex.unique' is missing but a required "
                            "field",
                            cmd);
    if (!unique)
        return mf_error_set(err, 5979700,
                            "The clusteredIndex option requires 'unique' to be true");
    bson_iter_t kit;
    if (!bson_iter_init(&kit, &key) || !bson_iter_next(&kit) ||
        strcmp(bson_iter_key(&kit), "_id") != 0 || !mfi_is_number(&kit) ||
        bson_iter_as_double(&kit) != 1.0 || bson_iter_next(&kit))
        return mf_error_set(err, 5979701,
                            "The clusteredIndex option is only supported for key: {_id: 1}");
    if (v != 2)
        return mf_error_set(err, 5979704,
                            "Invalid clusteredIndex 'v' value; only index version 2 is "
                            "supported");
    bson_init(out);
    BSON_APPEND_INT32(out, "v", 2);
    BSON_APPEND_DOCUMENT(out, "key", &key);
    BSON_APPEND_UTF8(out, "name", name);
    BSON_APPEND_BOOL(out, "unique", true);
    return 0;
}

int mfi_parse_pre_post_images(const bson_iter_t *it, const char *cmd, bool *enabled,
                              mf_error *err)
{
    bson_iter_t f;
    bool has = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mfi_type_error(err, cmd, "changeStreamPreAndPostImages", it, "object");
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "enabled") != 0)
            return mf_error_set(err, 40415,
                                "BSON field '%s.changeStreamPreAndPostImages.%s' is an unknown "
                                "field.",
                                cmd, k);
        if (!BSON_ITER_HOLDS_BOOL(&f))
            return mfi_type_error(err, cmd, "changeStreamPreAndPostImages.enabled", &f, "bool");
        *enabled = bson_iter_bool(&f);
        has = true;
    }
    if (!has)
        return mf_error_set(err, 40414,
                            "BSON field '%s.changeStreamPreAndPostImages.enabled' is missing but "
                            "a required field",
                            cmd);
    return 0;
}


/* ------------------------------------------------------------ validation */

int mfi_parse_validation_opt(const bson_iter_t *it, const char *cmd, mfi_validation_opts *v,
                             mf_error *err)
{
    const char *k = bson_iter_key(it);
    if (strcmp(k, "validator") == 0) {
        if (!mfi_doc_arg(it, &v->validator))
            return mfi_type_error(err, cmd, k, it, "object");
        v->has_validator = true;
        return 0;
    }
    bool level = strcmp(k, "validationLevel") == 0;
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mfi_type_error(err, cmd, k, it, "string");
    const char *s = bson_iter_utf8(it, NULL);
    static const char *const levels[] = {"off", "strict", "moderate"};
    static const char *const actions[] = {"error", "warn"};
    const char *const *list = level ? levels : actions;
    size_t n = level ? 3 : 2;
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], s) == 0) {
            *(level ? &v->level : &v->action) = list[i];
            return 0;
        }
    return mf_error_set(err, MF_BadValue,
                        "Enumeration value '%s' for field '%s.%s' is not a valid value.", s, cmd,
                        k);
}

int mfi_check_validator(const char *ns, const bson_t *validator, const mf_collator *coll,
                        mf_error *err)
{
    if (bson_empty(validator)) /* none */
        return 0;
    const char *dot = strchr(ns, '.');
    size_t dblen = dot ? (size_t)(dot - ns) : strlen(ns);
    if (dot && strncmp(dot + 1, "system.", 7) == 0)
        return mf_error_set(err, MF_InvalidOptions,
                            "Document validators not allowed on system collection %s", ns);
    if ((dblen == 5 && strncmp(ns, "admin", 5) == 0) ||
        (dblen == 5 && strncmp(ns, "local", 5) == 0) ||
        (dblen == 6 && strncmp(ns, "config", 6) == 0))
        return mf_error_set(err, MF_InvalidOptions,
                            "Document validators are not allowed on collection %s in the %.*s "
                            "internal database",
                            ns, (int)dblen, ns);
    mf_matcher *m;
    struct mf_expr_ctx *x;
    int rc = mf_cl_validator_parse(validator, coll, &m, &x, err);
    if (rc == 0) {
        mf_matcher_free(m);
        mf_expr_ctx_free(x);
    }
    return rc;
}

void mfi_append_validation(const mfi_validation_opts *v, bool fill, bson_t *out)
{
    if (v->has_validator && !bson_empty(&v->validator))
        BSON_APPEND_DOCUMENT(out, "validator", &v->validator);
    else if (v->has_validator)
        BSON_APPEND_NULL(out, "validator"); /* (removed, for mf_cl_options_merge) */
    if (v->level || fill)
        BSON_APPEND_UTF8(out, "validationLevel", v->level ? v->level : "strict");
    if (v->action || fill)
        BSON_APPEND_UTF8(out, "validationAction", v->action ? v->action : "error");
}
