/*
 * index.c -- index specifications (createIndexes' validation, the stored
 * spec, conflicts between specs), index descriptors, and index keys.
 *
 * Specs.  mf_index_spec_normalize runs mongod 7.0's checks in mongod's
 * order, each phase with mongod's message shape:
 *
 *   phase  mongod's function                          message
 *   A      validateIndexSpecTTL (create_indexes_cmd)  ". Index spec: S :: caused by :: R"
 *                                                     for a bad expireAfterSeconds, or
 *                                                     "TTL indexes are single-field ... S"
 *   B      index_key_validate::validateIndexSpec      "Error in specification S ::
 *                                                     caused by :: R"  (S: the input)
 *   C      validateIdIndexSpec, the '_id_' and '*'    R alone
 *          name checks (parseAndValidateIndexSpecs)
 *   C2     addCollationDefaultsToIndexSpecsFor-       "failed to add collation information
 *          Create: the collation parsed and spelled    to index spec for index creation: S
 *          out in full, the collection's default      :: caused by :: R"  (S: as for D);
 *          given to a v: 2 index without one; the     the _id check's message alone
 *          _id index must have the collection's
 *   D      IndexCatalogImpl::_isSpecOk                "Error in specification S ::
 *                                                     caused by :: R"  (S: the input
 *                                                     without ns, with v appended)
 *   E      IndexCatalogImpl::_fixIndexSpec            -- (reorders)
 *
 * An index's kind (the key pattern's plugin) is a row of the index-type
 * table (index_type.h): its own key pattern checks, its keys, its bounds,
 * and what it refuses of a valid spec, after phase E (mongod's access
 * method: a unique "hashed" index).  Kinds the table lacks pass mongod's
 * key pattern checks and are then refused with CannotCreateIndex (67).
 * As mongod's createIndexes, a spec must have a name (drivers and the shell
 * generate it: mf_index_name_generate does it their way).
 *
 * The stored spec is what phase E gives, the order listIndexes shows:
 *
 *   FIELD          PRESENT          VALUE
 *   v              always           int32 1 or 2
 *   unique         when truthy      true (unique: false is dropped)
 *   key            always           the key pattern, as given
 *   name           always           string
 *   ...            as given         the other options in the request's order
 *                                   (sparse, hidden, expireAfterSeconds,
 *                                   partialFilterExpression, background, ...);
 *                                   "ns", "dropDups" and "_id" are dropped
 *   collation      when not simple  the full collation (mf_collator_to_bson),
 *                                   last: mongod appends it (a simple one
 *                                   is dropped)
 *
 * and then the server's own fields, which the catalog appends and
 * listIndexes must not show (mf_index_spec_conflict ignores them):
 *
 *   multikeyPaths  int32 or int64   bit i: key field i has met an array
 *                                   (mf_index_desc.multikey)
 *   building       bool             true while the index build is unfinished
 *
 * Keys.  mf_index_keys runs the key generator sort keys share (keygen.h:
 * mongod's BtreeKeyGenerator, array expansion, parallel arrays 171,
 * positional components, the multikey bits) and keeps every candidate it
 * emits, sorted and unique.  The _id index's one key is the _id field as
 * it is, not generated.  A sparse index drops a key whose every field was
 * missing.  An index with a collation encodes every string and symbol of
 * its keys, at any depth, as the collation's sort key
 * (mf_bsonx_key_append_coll): strings it calls equal make the same key, so
 * a unique index refuses "a" next to "A" at strength 2, and its partial
 * filter is read under the same collation.
 */
#include "index_type.h"
#include "keygen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    E_CLUSTERED_FALSE = 6492800,
};

/* mongod's internalPartialFilterExpressionMaxDepth. */
#define PARTIAL_MAX_DEPTH 4
/* Room for a rendered spec or reason; mf_error cuts at MF_ERRMSG_MAX. */
#define STR_CAP 1024

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

/* ----------------------------------------------------------------- values */

static bool is_number(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: case BSON_TYPE_INT64: case BSON_TYPE_DOUBLE: case BSON_TYPE_DECIMAL128:
        return true;
    default:
        return false;
    }
}

/* BSONElement::number(): the value as a double (decimals through their
 * string form). */
static double number_of(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: return bson_iter_int32(it);
    case BSON_TYPE_INT64: return (double)bson_iter_int64(it);
    case BSON_TYPE_DOUBLE: return bson_iter_double(it);
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t dv;
        char s[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &dv);
        bson_decimal128_to_string(&dv, s);
        if (strstr(s, "NaN"))
            return NAN;
        return strtod(s, NULL);
    }
    default: return 0;
    }
}

/* BSONElement::safeNumberLong(): truncated toward zero, clamped, NaN 0. */
static int64_t safe_long(const bson_iter_t *it)
{
    if (bson_iter_type(it) == BSON_TYPE_INT32)
        return bson_iter_int32(it);
    if (bson_iter_type(it) == BSON_TYPE_INT64)
        return bson_iter_int64(it);
    double d = number_of(it);
    if (!(d == d))
        return 0;
    if (d >= 9223372036854775807.0)
        return INT64_MAX;
    if (d <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)d;
}

/* BSONElement::trueValue(). */
static bool truthy(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_EOD: case BSON_TYPE_NULL: case BSON_TYPE_UNDEFINED:
        return false;
    case BSON_TYPE_BOOL:
        return bson_iter_bool(it);
    case BSON_TYPE_INT32: case BSON_TYPE_INT64: case BSON_TYPE_DOUBLE: case BSON_TYPE_DECIMAL128:
        return number_of(it) != 0.0;
    default:
        return true;
    }
}

static bool find_field(const bson_t *obj, const char *name, size_t n, bson_iter_t *out)
{
    if (!bson_iter_init(out, obj))
        return false;
    while (bson_iter_next(out))
        if (bson_iter_key_len(out) == n && memcmp(bson_iter_key(out), name, n) == 0)
            return true;
    return false;
}

static bool find(const bson_t *obj, const char *name, bson_iter_t *out)
{
    return find_field(obj, name, strlen(name), out);
}

static void value_str(const bson_iter_t *it, char *out, size_t cap)
{
    mf_bsonx_elem_to_string(it, false, out, cap);
}

/* -------------------------------------------------------------- messages */

/* "Error in specification <spec> :: caused by :: <reason>". */
static int spec_fail(mf_error *err, int code, const bson_t *spec, const char *fmt, ...)
    MF_PRINTF(4, 5);
static int spec_fail(mf_error *err, int code, const bson_t *spec, const char *fmt, ...)
{
    char s[STR_CAP], r[STR_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r, sizeof r, fmt, ap);
    va_end(ap);
    mf_bsonx_to_string(spec, s, sizeof s);
    return mf_error_set(err, code, "Error in specification %s :: caused by :: %s", s, r);
}

/* -------------------------------------------------------- key patterns */

/* IndexNames::findPluginName: the first string value, else "wildcard" for
 * a "$**" field, else "" (a b-tree). */
static const char *plugin_name(const bson_t *key)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, key))
        return "";
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        size_t n = strlen(f);
        if (BSON_ITER_HOLDS_UTF8(&it))
            return bson_iter_utf8(&it, NULL);
        if (strcmp(f, "$**") == 0 || (n >= 4 && strcmp(f + n - 4, ".$**") == 0))
            return "wildcard";
    }
    return "";
}

static bool is_text_spec(const bson_t *spec);

static bool known_plugin(const char *p)
{
    static const char *const known[] = {"", "2d", "2dsphere", "2dsphere_bucket", "text",
                                        "hashed", "wildcard", "columnstore", "geoHaystack"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(p, known[i]) == 0)
            return true;
    return false;
}

/* index_key_validate::validateKeyPattern for v: 2; returns the reason's
 * code (CannotCreateIndex) with the reason in `err`, undecorated. */
static int check_key_pattern(const bson_t *key, mf_error *err)
{
    const char *plugin = plugin_name(key);
    bson_iter_t it;
    if (key->len > 2048)
        return mf_error_set(err, MF_CannotCreateIndex, "Index key pattern too large.");
    if (bson_empty(key))
        return mf_error_set(err, MF_CannotCreateIndex, "Index keys cannot be empty.");
    if (strcmp(plugin, "geoHaystack") == 0)
        return mf_error_set(err, MF_CannotCreateIndex,
                            "GeoHaystack indexes cannot be created in version 5.0 and above");
    if (!known_plugin(plugin))
        return mf_error_set(err, MF_CannotCreateIndex, "Unknown index plugin '%s'", plugin);
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        bool is_str = BSON_ITER_HOLDS_UTF8(&it);
        if (is_number(&it)) {
            double v = number_of(&it);
            if (v != v)
                return mf_error_set(err, MF_CannotCreateIndex,
                                    "Values in the index key pattern cannot be NaN.");
            if (v == 0.0)
                return mf_error_set(err, MF_CannotCreateIndex,
                                    "Values in the index key pattern cannot be 0.");
        } else if (!is_str) {
            return mf_error_set(err, MF_CannotCreateIndex,
                                "Values in v:2 index key pattern cannot be of type %s. Only "
                                "numbers > 0, numbers < 0, and strings are allowed.",
                                mf_bsonx_type_alias(bson_iter_type(&it)));
        }
        const char *sval = is_str ? bson_iter_utf8(&it, NULL) : "";
        if (is_str && strcmp(plugin, sval) != 0)
            return mf_error_set(err, MF_CannotCreateIndex,
                                "Can't use more than one index plugin for a single index.");
        if (is_str && strcmp(sval, "wildcard") == 0)
            return mf_error_set(err, MF_CannotCreateIndex,
                                "The key pattern value for an 'wildcard' index must be a non-zero "
                                "number, not a string.");
        if (f[0] == '\0')
            return mf_error_set(err, MF_CannotCreateIndex, "Index keys cannot be an empty field.");
        if (strcmp(f, "$**") == 0 &&
            (!is_str || strcmp(sval, "text") == 0 || strcmp(sval, "columnstore") == 0))
            continue;
        if (strcmp(f, "_fts") == 0 && strcmp(sval, "text") != 0)
            return mf_error_set(err, MF_CannotCreateIndex,
                                "Index key contains an illegal field name: '_fts'");
        for (const char *p = f, *end = f + strlen(f); p <= end;) {
            const char *dot = strchr(p, '.');
            size_t n = dot ? (size_t)(dot - p) : strlen(p);
            bool first = p == f, last = !dot;
            if (n == 0)
                return mf_error_set(err, MF_CannotCreateIndex,
                                    "Index keys cannot contain an empty field.");
            if (p[0] == '$') {
                bool dbref = !first && ((n == 3 && memcmp(p, "$db", 3) == 0) ||
                                        (n == 3 && memcmp(p, "$id", 3) == 0) ||
                                        (n == 4 && memcmp(p, "$ref", 4) == 0));
                bool wild = last && n == 3 && memcmp(p, "$**", 3) == 0 &&
                            (strcmp(plugin, "wildcard") == 0 || strcmp(plugin, "columnstore") == 0);
                if (!dbref && !wild)
                    return mf_error_set(err, MF_CannotCreateIndex,
                                        "Index key contains an illegal field name: field name "
                                        "starts with '$'.");
            }
            if (!dot)
                break;
            p = dot + 1;
        }
    }
    return 0;
}

/* The "key" field of validateIndexSpec: type, duplicates, the pattern,
 * empty strings -- and then this server's refusal of non-b-tree types. */
static int check_key_field(const bson_iter_t *kit, mf_error *err)
{
    bson_t key;
    bson_iter_t a, b;
    if (!BSON_ITER_HOLDS_DOCUMENT(kit))
        return mf_error_set(err, MF_TypeMismatch, "The field 'key' must be an object, but got %s",
                            mf_bsonx_type_alias(bson_iter_type(kit)));
    mf_bsonx_container_view(kit, &key);
    bson_iter_init(&a, &key);
    for (size_t ia = 0; bson_iter_next(&a); ia++) {
        bson_iter_init(&b, &key);
        for (size_t ib = 0; ib < ia && bson_iter_next(&b); ib++)
            if (strcmp(bson_iter_key(&a), bson_iter_key(&b)) == 0) {
                char s[STR_CAP];
                mf_bsonx_to_string(&key, s, sizeof s);
                return mf_error_set(err, MF_BadValue,
                                    "The field '%s' appears multiple times in the index key "
                                    "pattern %s",
                                    bson_iter_key(&a), s);
            }
    }
    int rc = check_key_pattern(&key, err);
    if (rc)
        return rc;
    bson_iter_init(&a, &key);
    while (bson_iter_next(&a)) {
        uint32_t n = 0;
        if (BSON_ITER_HOLDS_UTF8(&a) && (bson_iter_utf8(&a, &n), n == 0))
            return mf_error_set(err, MF_CannotCreateIndex,
                                "Values in the index key pattern cannot be empty strings");
    }
    const char *plugin = plugin_name(&key);
    const mf_index_type *type = mf_index_type_find(plugin);
    if (!type)
        return mf_error_set(err, MF_CannotCreateIndex,
                            "Index type '%s' is not supported by this server: only ascending "
                            "and descending (b-tree) indexes are",
                            plugin);
    return type->check_key ? type->check_key(&key, err) : 0;
}

/* IndexDescriptor::isIdIndexPattern: {_id: 1} or {_id: -1} (numberInt). */
static bool is_id_pattern(const bson_t *key)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, key) || !bson_iter_next(&it) || strcmp(bson_iter_key(&it), "_id") != 0)
        return false;
    int64_t v = is_number(&it) ? safe_long(&it) : 0;
    return (v == 1 || v == -1) && !bson_iter_next(&it);
}

/* ---------------------------------------------------- partial filters */

/* The partial filter as mongod's parser shapes it, for
 * _checkValidFilterExpressions: a document is an $and of its clauses (one
 * clause is the clause itself); {a: {$gt: 1, $lt: 2}} gives two clauses.
 * Allowed: equality, $gt/$gte/$lt/$lte, $exists: true, $type, $in, $and
 * and $or (mongod 7.0), to depth PARTIAL_MAX_DEPTH.  A refused node is
 * printed as mongod's MatchExpression::debugString. */

typedef struct dbg {
    char *p;
    size_t len, cap;
} dbg;

static void dbg_put(dbg *d, const char *fmt, ...) MF_PRINTF(2, 3);
static void dbg_put(dbg *d, const char *fmt, ...)
{
    va_list ap;
    if (d->len + 1 >= d->cap)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(d->p + d->len, d->cap - d->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        d->len = d->len + (size_t)n < d->cap ? d->len + (size_t)n : d->cap - 1;
}

static void dbg_indent(dbg *d, int level)
{
    for (int i = 0; i < level; i++)
        dbg_put(d, "    ");
}

static void dbg_doc(dbg *d, const bson_t *doc, int level);

/* One {path: {$op: v}} operator as a debug line (and children). */
static void dbg_op(dbg *d, const char *path, const bson_iter_t *op, int level)
{
    const char *o = bson_iter_key(op);
    char v[STR_CAP];
    value_str(op, v, sizeof v);
    dbg_indent(d, level);
    if (strcmp(o, "$ne") == 0) {
        dbg_put(d, "$not\n");
        dbg_indent(d, level + 1);
        dbg_put(d, "%s $eq %s\n", path, v);
    } else if (strcmp(o, "$nin") == 0 || strcmp(o, "$in") == 0) {
        bool neg = o[1] == 'n' && o[2] == 'i';
        if (neg) {
            dbg_put(d, "$not\n");
            dbg_indent(d, level + 1);
        }
        dbg_put(d, "%s $in [", path);
        bson_t arr;
        bson_iter_t el;
        bool first = true;
        if (mf_bsonx_container_view(op, &arr) && bson_iter_init(&el, &arr))
            while (bson_iter_next(&el)) {
                value_str(&el, v, sizeof v);
                dbg_put(d, "%s%s", first ? " " : ", ", v);
                first = false;
            }
        dbg_put(d, "]\n");
    } else if (strcmp(o, "$exists") == 0) {
        if (!truthy(op)) {
            dbg_put(d, "$not\n");
            dbg_indent(d, level + 1);
        }
        dbg_put(d, "%s exists\n", path);
    } else if (strcmp(o, "$not") == 0) {
        dbg_put(d, "$not\n");
        if (BSON_ITER_HOLDS_REGEX(op)) {
            const char *opts, *re = bson_iter_regex(op, &opts);
            dbg_indent(d, level + 1);
            dbg_put(d, "%s regex /%s/%s\n", path, re, opts);
        } else {
            bson_t sub;
            bson_iter_t s;
            dbg_indent(d, level + 1);
            dbg_put(d, "$and\n");
            if (mf_bsonx_container_view(op, &sub) && bson_iter_init(&s, &sub))
                while (bson_iter_next(&s))
                    dbg_op(d, path, &s, level + 2);
        }
    } else if (strcmp(o, "$regex") == 0 && BSON_ITER_HOLDS_UTF8(op)) {
        dbg_put(d, "%s regex /%s/\n", path, bson_iter_utf8(op, NULL));
    } else if (strcmp(o, "$size") == 0) {
        dbg_put(d, "%s $size : %s\n", path, v);
    } else if (strcmp(o, "$elemMatch") == 0) {
        bson_t sub;
        bson_iter_t s;
        bool is_obj = true;
        if (mf_bsonx_container_view(op, &sub) && bson_iter_init(&s, &sub) && bson_iter_next(&s))
            is_obj = bson_iter_key(&s)[0] != '$';
        dbg_put(d, "%s $elemMatch (%s)\n", path, is_obj ? "obj" : "value");
        if (is_obj)
            dbg_doc(d, &sub, level + 1);
        else if (bson_iter_init(&s, &sub))
            while (bson_iter_next(&s))
                dbg_op(d, "", &s, level + 1);
    } else if (strcmp(o, "$all") == 0) {
        dbg_put(d, "$alwaysFalse\n");
    } else {
        dbg_put(d, "%s %s %s\n", path, o, v);
    }
}

/* A refused node that is a whole clause {path: value} or {$nor: [...]}. */
static void dbg_clause(dbg *d, const bson_iter_t *it, int level)
{
    const char *k = bson_iter_key(it);
    if (strcmp(k, "$nor") == 0 || strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0) {
        bson_t arr, sub;
        bson_iter_t el;
        dbg_indent(d, level);
        dbg_put(d, "%s\n", k);
        if (mf_bsonx_container_view(it, &arr) && bson_iter_init(&el, &arr))
            while (bson_iter_next(&el))
                if (mf_bsonx_container_view(&el, &sub))
                    dbg_doc(d, &sub, level + 1);
        return;
    }
    if (BSON_ITER_HOLDS_REGEX(it)) {
        const char *opts, *re = bson_iter_regex(it, &opts);
        dbg_indent(d, level);
        dbg_put(d, "%s regex /%s/%s\n", k, re, opts);
        return;
    }
    char v[STR_CAP];
    value_str(it, v, sizeof v);
    dbg_indent(d, level);
    dbg_put(d, "%s $eq %s\n", k, v);
}

static void dbg_doc(dbg *d, const bson_t *doc, int level)
{
    bson_iter_t it;
    size_t n = 0;
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it))
        n++;
    if (n != 1) {
        dbg_indent(d, level);
        dbg_put(d, "$and\n");
        level++;
    }
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it))
        dbg_clause(d, &it, level);
}

static int partial_refuse(mf_error *err, void (*fn)(dbg *, const void *, int), const void *arg,
                          int level)
{
    char buf[STR_CAP];
    dbg d = {.p = buf, .cap = sizeof buf};
    buf[0] = '\0';
    fn(&d, arg, level);
    return mf_error_set(err, MF_CannotCreateIndex, "Expression not supported in partial index: %s", buf);
}

static void dbg_op_cb(dbg *d, const void *arg, int level)
{
    const bson_iter_t *const *pair = arg;
    dbg_op(d, bson_iter_key(pair[0]), pair[1], level);
}

static void dbg_clause_cb(dbg *d, const void *arg, int level)
{
    (void)level;
    dbg_clause(d, arg, 0);
}

static int depth_check(int level, mf_error *err)
{
    if (level + 1 > PARTIAL_MAX_DEPTH)
        return mf_error_set(err, MF_CannotCreateIndex, "partialFilterExpression depth may not exceed %d",
                            PARTIAL_MAX_DEPTH);
    return 0;
}

static int check_partial_doc(const bson_t *doc, int level, mf_error *err);

static size_t count_clauses(const bson_t *doc)
{
    bson_iter_t it, op;
    size_t n = 0;
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bson_t sub;
        if (strcmp(k, "$comment") == 0)
            continue;
        if (k[0] != '$' && mfi_is_operator_doc(&it, false) && mf_bsonx_container_view(&it, &sub)) {
            /* {a: {$gt: 1, $lt: 2}}: one clause per operator ($options goes with $regex) */
            bson_iter_init(&op, &sub);
            while (bson_iter_next(&op))
                n += strcmp(bson_iter_key(&op), "$options") != 0;
        } else {
            n++;
        }
    }
    return n;
}

/* The operators of {path: {$op: ...}} each at `level`. */
static int check_partial_ops(const bson_iter_t *path, const bson_t *ops, int level, mf_error *err)
{
    bson_iter_t op;
    bson_iter_init(&op, ops);
    while (bson_iter_next(&op)) {
        const char *o = bson_iter_key(&op);
        int rc;
        if (strcmp(o, "$options") == 0)
            continue;
        if ((rc = depth_check(level, err)) != 0)
            return rc;
        bool ok = strcmp(o, "$eq") == 0 || strcmp(o, "$gt") == 0 || strcmp(o, "$gte") == 0 ||
                  strcmp(o, "$lt") == 0 || strcmp(o, "$lte") == 0 || strcmp(o, "$type") == 0 ||
                  strcmp(o, "$in") == 0 || (strcmp(o, "$exists") == 0 && truthy(&op));
        if (strcmp(o, "$all") == 0) {
            /* $all: [x, y] is an $and of equalities; $all: [] matches nothing */
            bson_t arr;
            bson_iter_t el;
            bool empty = !mf_bsonx_container_view(&op, &arr) || bson_empty(&arr);
            ok = !empty;
            if (ok && bson_iter_init(&el, &arr))
                while (bson_iter_next(&el)) {
                    if ((rc = depth_check(level + 1, err)) != 0)
                        return rc;
                    ok &= !BSON_ITER_HOLDS_REGEX(&el) && !BSON_ITER_HOLDS_DOCUMENT(&el);
                }
        }
        if (!ok) {
            const bson_iter_t *pair[2] = {path, &op};
            return partial_refuse(err, dbg_op_cb, pair, 0);
        }
    }
    return 0;
}

static int check_partial_clause(const bson_iter_t *it, int level, mf_error *err)
{
    const char *k = bson_iter_key(it);
    bson_t sub, arr;
    bson_iter_t el;
    int rc;
    if (strcmp(k, "$comment") == 0)
        return 0;
    if (strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0) {
        if ((rc = depth_check(level, err)) != 0)
            return rc;
        if (mf_bsonx_container_view(it, &arr) && bson_iter_init(&el, &arr))
            while (bson_iter_next(&el))
                if (mf_bsonx_container_view(&el, &sub) && (rc = check_partial_doc(&sub, level + 1, err)) != 0)
                    return rc;
        return 0;
    }
    if (k[0] != '$' && mfi_is_operator_doc(it, false) && mf_bsonx_container_view(it, &sub))
        return check_partial_ops(it, &sub, level, err);
    if ((rc = depth_check(level, err)) != 0)
        return rc;
    if (k[0] == '$' || BSON_ITER_HOLDS_REGEX(it))
        return partial_refuse(err, dbg_clause_cb, it, 0);
    return 0; /* equality */
}

static int check_partial_doc(const bson_t *doc, int level, mf_error *err)
{
    bson_iter_t it;
    int rc;
    if (count_clauses(doc) != 1) {
        if ((rc = depth_check(level, err)) != 0)
            return rc;
        level++;
    }
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it))
        if ((rc = check_partial_clause(&it, level, err)) != 0)
            return rc;
    return 0;
}

/* MatchExpressionParser::kBanAllSpecialFeatures: these are refused at
 * parse time, wherever a clause may stand. */
static int check_banned(const bson_t *doc, mf_error *err)
{
    static const char *const banned[] = {"$expr", "$where", "$text", "$jsonSchema", "$near",
                                         "$nearSphere", "$geoNear", "$sampleRate"};
    bson_iter_t it, el;
    bson_t arr, sub;
    int rc;
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        for (size_t i = 0; i < sizeof banned / sizeof banned[0]; i++)
            if (strcmp(k, banned[i]) == 0)
                return mf_error_set(err, MF_QueryFeatureNotAllowed, "%s is not allowed in this context", k);
        if ((strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0) &&
            mf_bsonx_container_view(&it, &arr) && bson_iter_init(&el, &arr))
            while (bson_iter_next(&el))
                if (mf_bsonx_container_view(&el, &sub) && (rc = check_banned(&sub, err)) != 0)
                    return rc;
    }
    return 0;
}

/* ------------------------------------------------------------ the spec */

static bool in_list(const char *k, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(k, list[i]) == 0)
            return true;
    return false;
}

#define IN_LIST(k, list) in_list((k), (list), sizeof(list) / sizeof((list)[0]))

static const char *const allowed_fields[] = {
    "bits", "max", "min", "coarsestIndexedLevel", "finestIndexedLevel", "2dsphereIndexVersion",
    "background", "collation", "default_language", "dropDups", "expireAfterSeconds", "hidden",
    "name", "v", "key", "language_override", "ns", "partialFilterExpression",
    "wildcardProjection", "columnstoreProjection", "columnstoreCompressor", "sparse",
    "storageEngine", "textIndexVersion", "unique", "weights", "originalSpec", "prepareUnique",
    "clustered", "_id"};
static const char *const clustered_fields[] = {"name", "unique", "v", "key", "clustered"};
static const char *const id_fields[] = {"collation", "name", "v", "key", "ns", "_id"};
static const char *const bool_fields[] = {"background", "unique", "sparse", "dropDups",
                                          "prepareUnique", "clustered"};
static const char *const number_fields[] = {"2dsphereIndexVersion", "textIndexVersion", "bits",
                                            "min", "max", "coarsestIndexedLevel",
                                            "finestIndexedLevel"};
/* Server fields of a stored spec (this file's header). */
static const char *const server_fields[] = {"multikeyPaths", "building"};

/* Phase A: validateIndexSpecTTL on the request as given. */
static int check_ttl(const bson_t *in, mf_error *err)
{
    bson_iter_t it, key;
    const char *reason = NULL;
    char why[160], s[STR_CAP];
    if (!find(in, "expireAfterSeconds", &it))
        return 0;
    if (!is_number(&it)) {
        snprintf(why, sizeof why,
                 "TTL index 'expireAfterSeconds' option must be numeric, but received a type of '%s",
                 mf_bsonx_type_alias(bson_iter_type(&it)));
        reason = why;
    } else if (number_of(&it) != number_of(&it)) {
        reason = "TTL index 'expireAfterSeconds' option must not be NaN";
    } else {
        int64_t v = safe_long(&it);
        if (v < INT32_MIN || v > INT32_MAX)
            reason = "TTL index 'expireAfterSeconds' must be within the range of a 32-bit integer";
        else if (v < 0)
            reason = "TTL index 'expireAfterSeconds' option cannot be less than 0";
    }
    mf_bsonx_to_string(in, s, sizeof s);
    if (reason)
        return mf_error_set(err, MF_CannotCreateIndex, ". Index spec: %s :: caused by :: %s", s, reason);
    if (find(in, "key", &key) && BSON_ITER_HOLDS_DOCUMENT(&key)) {
        bson_t k;
        mf_bsonx_container_view(&key, &k);
        if (bson_count_keys(&k) != 1)
            return mf_error_set(err, MF_CannotCreateIndex,
                                "TTL indexes are single-field indexes, compound indexes do not "
                                "support TTL. Index spec: %s",
                                s);
    }
    return 0;
}

/* The per-field checks of validateIndexSpec (phase B), undecorated. */
static int check_field(const bson_t *in, const bson_iter_t *it, mf_error *err)
{
    const char *k = bson_iter_key(it);
    const char *tn = mf_bsonx_type_alias(bson_iter_type(it));
    char v[STR_CAP];
    if (strcmp(k, "key") == 0) {
        int rc = check_key_field(it, err);
        bson_t key;
        if (rc == 0 && mf_bsonx_container_view(it, &key) && strcmp(plugin_name(&key), "wildcard") == 0)
            rc = mfi_wild_check_key_spec(in, &key, err);
        return rc;
    }
    if (strcmp(k, "name") == 0 && !BSON_ITER_HOLDS_UTF8(it))
        return mf_error_set(err, MF_TypeMismatch, "The field 'name' must be a string, but got %s", tn);
    if (strcmp(k, "hidden") == 0 && !BSON_ITER_HOLDS_BOOL(it)) /* sic: mongod says 'name' */
        return mf_error_set(err, MF_TypeMismatch, "The field 'name' must be a bool, but got %s", tn);
    if (strcmp(k, "v") == 0) {
        if (!is_number(it))
            return mf_error_set(err, MF_TypeMismatch, "The field 'v' must be a number, but got %s", tn);
        double d = number_of(it);
        if (!(d == d) || d != floor(d) || d < INT32_MIN || d > INT32_MAX) {
            value_str(it, v, sizeof v);
            return mf_error_set(err, MF_BadValue,
                                "Index version must be representable as a 32-bit integer, but "
                                "got %s",
                                v);
        }
        if (d != 1 && d != 2) {
            char s[STR_CAP];
            mf_bsonx_to_string(in, s, sizeof s);
            return mf_error_set(err, MF_CannotCreateIndex,
                                "Invalid index specification %s; cannot create an index with v=%d",
                                s, (int)d);
        }
        return 0;
    }
    if (strcmp(k, "originalSpec") == 0 || strcmp(k, "collation") == 0) {
        bson_t sub;
        if (!BSON_ITER_HOLDS_DOCUMENT(it))
            return mf_error_set(err, MF_TypeMismatch, "The field '%s' must be an object, but got %s",
                                k, tn);
        mf_bsonx_container_view(it, &sub);
        if (bson_empty(&sub))
            return mf_error_set(err, MF_BadValue, "The field '%s' cannot be an empty object.", k);
        if (strcmp(k, "originalSpec") == 0)
            return mf_error_set(err, MF_CannotCreateIndex,
                                "The field 'originalSpec' is not supported by this server");
        return 0;
    }
    if (strcmp(k, "partialFilterExpression") == 0) {
        bson_t sub;
        mf_matcher *m = NULL;
        int rc;
        if (!BSON_ITER_HOLDS_DOCUMENT(it))
            return mf_error_set(err, MF_TypeMismatch,
                                "The field 'partialFilterExpression' must be an object, but got %s",
                                tn);
        mf_bsonx_container_view(it, &sub);
        if ((rc = check_banned(&sub, err)) != 0 || (rc = mf_matcher_parse(&sub, &m, err)) != 0)
            return rc;
        mf_matcher_free(m);
        return 0;
    }
    if (strcmp(k, "wildcardProjection") == 0 || strcmp(k, "columnstoreProjection") == 0) {
        bool wild = k[0] == 'w';
        bson_iter_t kit;
        bson_t key;
        if (wild && find(in, "key", &kit) && mf_bsonx_container_view(&kit, &key) &&
            strcmp(plugin_name(&key), "wildcard") == 0)
            return mfi_wild_check_projection(in, it, err);
        return mf_error_set(err, wild ? MF_BadValue : MF_InvalidIndexSpecificationOption,
                            "The field '%s' is only allowed in '%s' indexes", k,
                            wild ? "wildcard" : "columnstore");
    }
    if (strcmp(k, "columnstoreCompressor") == 0)
        return mf_error_set(err, MF_InvalidIndexSpecificationOption,
                            "The field 'columnstoreCompressor' is only allowed in "
                            "'columnstoreCompressor' indexes");
    if (strcmp(k, "weights") == 0 && !BSON_ITER_HOLDS_DOCUMENT(it) && !BSON_ITER_HOLDS_ARRAY(it) &&
        !BSON_ITER_HOLDS_UTF8(it))
        return mf_error_set(err, MF_TypeMismatch, "The field 'weights' must be an object, but got %s",
                            tn);
    if (IN_LIST(k, bool_fields) && !is_number(it) && !BSON_ITER_HOLDS_BOOL(it)) {
        mf_bsonx_elem_to_string(it, true, v, sizeof v); /* sic: no closing quote */
        return mf_error_set(err, MF_TypeMismatch,
                            "The field '%s has value %s, which is not convertible to bool", k, v);
    }
    if ((strcmp(k, "default_language") == 0 || strcmp(k, "language_override") == 0) &&
        !BSON_ITER_HOLDS_UTF8(it))
        return mf_error_set(err, MF_TypeMismatch, "The field '%s' must be a string, but got %s", k, tn);
    if (IN_LIST(k, number_fields) && !is_number(it))
        return mf_error_set(err, MF_TypeMismatch, "The field '%s' must be a number, but got %s", k, tn);
    return 0;
}

/* Phase B: validateIndexSpec.  Undecorated reasons; the caller adds
 * "Error in specification". */
static int validate_spec(const bson_t *in, mf_error *err)
{
    bson_iter_t it, f;
    char s[STR_CAP];
    bool clustered = find(in, "clustered", &f);
    int rc;
    bson_iter_init(&it, in);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (clustered ? !IN_LIST(k, clustered_fields) : !IN_LIST(k, allowed_fields)) {
            mf_bsonx_to_string(in, s, sizeof s);
            return mf_error_set(err, MF_InvalidIndexSpecificationOption,
                                "The field '%s' is not valid for %s specification. "
                                "Specification: %s",
                                k, clustered ? "a clustered index" : "an index", s);
        }
    }
    bson_iter_init(&it, in);
    while (bson_iter_next(&it))
        if ((rc = check_field(in, &it, err)) != 0)
            return rc;
    if (!find(in, "key", &f))
        return mf_error_set(err, MF_FailedToParse,
                            "The 'key' field is a required property of an index specification");
    if (!find(in, "name", &f))
        return mf_error_set(err, MF_FailedToParse,
                            "The 'name' field is a required property of an index specification");
    if (clustered) {
        bson_iter_t u;
        find(in, "clustered", &f);
        if (!truthy(&f))
            return mf_error_set(err, E_CLUSTERED_FALSE, "Value 'false' for field 'clustered' is invalid");
        if (!find(in, "unique", &u) || !truthy(&u))
            return mf_error_set(err, MF_CannotCreateIndex,
                                "The 'unique' field is required when 'clustered' is specified");
    }
    mf_bsonx_to_string(in, s, sizeof s);
    if (find(in, "collation", &f) && find(in, "v", &it) && number_of(&it) < 2)
        return mf_error_set(err, MF_CannotCreateIndex,
                            "Invalid index specification %s; cannot create an index with the "
                            "'collation' option and v=%d",
                            s, (int)number_of(&it));
    if (find(in, "weights", &f) && !is_text_spec(in))
        return mf_error_set(err, MF_CannotCreateIndex,
                            "Invalid index specification %s; the field 'weights' can only be "
                            "specified with text indexes",
                            s);
    if (find(in, "unique", &f) && truthy(&f) && find(in, "prepareUnique", &it) && truthy(&it))
        return mf_error_set(err, MF_CannotCreateIndex,
                            "Invalid index specification %s; cannot create an index with the "
                            "'unique' option and the 'prepareUnique' option",
                            s);
    if (clustered)
        return mf_error_set(err, MF_CannotCreateIndex,
                            "cannot create a clustered index: this server has no clustered "
                            "collections");
    return 0;
}

/* The request without ns, with v: 2 appended when absent (what
 * validateIndexSpec returns). */
static void build_validated(const bson_t *in, bson_t *out)
{
    bson_iter_t it;
    bool has_v = false;
    bson_init(out);
    bson_iter_init(&it, in);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        has_v |= strcmp(k, "v") == 0;
        if (strcmp(k, "ns") != 0)
            mf_bsonx_append_iter(out, k, -1, &it);
    }
    if (!has_v)
        BSON_APPEND_INT32(out, "v", 2);
}

/* Phase C: the _id index and reserved names. */
static int check_names(const bson_t *spec, mf_error *err)
{
    bson_iter_t it, kit, nit;
    bson_t key;
    char s[STR_CAP];
    find(spec, "key", &kit);
    mf_bsonx_container_view(&kit, &key);
    find(spec, "name", &nit);
    const char *name = bson_iter_utf8(&nit, NULL);
    if (is_id_pattern(&key)) {
        bson_iter_init(&it, spec);
        while (bson_iter_next(&it))
            if (!IN_LIST(bson_iter_key(&it), id_fields)) {
                mf_bsonx_to_string(spec, s, sizeof s);
                return mf_error_set(err, MF_InvalidIndexSpecificationOption,
                                    "The field '%s' is not valid for an _id index specification. "
                                    "Specification: %s",
                                    bson_iter_key(&it), s);
            }
        bson_iter_init(&it, &key);
        bson_iter_next(&it);
        if (!is_number(&it) || number_of(&it) != 1) {
            mf_bsonx_to_string(&key, s, sizeof s);
            return mf_error_set(err, MF_BadValue,
                                "The field 'key' for an _id index must be {_id: 1}, but got %s", s);
        }
    } else {
        if (strcmp(name, "_id_") == 0) {
            mf_bsonx_elem_to_string(&kit, true, s, sizeof s);
            return mf_error_set(err, MF_BadValue,
                                "The index name '_id_' is reserved for the _id index, which must "
                                "have key pattern {_id: 1}, found %s",
                                s);
        }
        if (strcmp(name, "*") == 0)
            return mf_error_set(err, MF_BadValue, "The index name '*' is not valid.");
    }
    return 0;
}

/* `spec` without its "collation" field, and with `coll`'s full spec
 * appended when `coll` is not NULL, into `out` (initialised here). */
static void with_collation(const bson_t *spec, const mf_collator *coll, bson_t *out)
{
    bson_iter_t it;
    bson_t sub;
    bson_init(out);
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "collation") != 0)
            mf_bsonx_append_iter(out, bson_iter_key(&it), -1, &it);
    if (coll) {
        bson_append_document_begin(out, "collation", -1, &sub);
        mf_collator_to_bson(coll, &sub);
        bson_append_document_end(out, &sub);
    }
}

/* Phase C2: validateIndexSpecCollation, then the _id index's check, as
 * mongod's addCollationDefaultsToIndexSpecsForCreate.  `*spec` is
 * replaced by the spec with its collation resolved: a simple one
 * dropped, another spelled out in full and moved last, the collection's
 * `dflt` appended to a v: 2 spec that names none. */
static int resolve_collation(bson_t *spec, const mf_collator *dflt, mf_error *err)
{
    bson_iter_t it, v;
    bson_t kd, out;
    mf_collator *coll = NULL;
    char s[STR_CAP], a[STR_CAP], b[STR_CAP];
    int rc;
    if (find(spec, "collation", &it)) {
        if ((rc = mf_collator_new_iter(&it, &coll, err)) != 0) {
            char reason[MF_ERRMSG_MAX];
            memcpy(reason, err->msg, sizeof reason);
            mf_bsonx_to_string(spec, s, sizeof s);
            return mf_error_set(err, rc,
                                "failed to add collation information to index spec for index "
                                "creation: %s :: caused by :: %s",
                                s, reason);
        }
    } else if (dflt && find(spec, "v", &v) && number_of(&v) >= 2) {
        coll = mf_collator_ref(dflt);
    }
    find(spec, "key", &it);
    mf_bsonx_container_view(&it, &kd);
    if (is_id_pattern(&kd) && !mf_collator_equal(coll, dflt)) {
        bson_t x = BSON_INITIALIZER, y = BSON_INITIALIZER;
        mf_collator_to_bson(coll, &x);
        mf_collator_to_bson(dflt, &y);
        mf_bsonx_to_string(&x, a, sizeof a);
        mf_bsonx_to_string(&y, b, sizeof b);
        bson_destroy(&x);
        bson_destroy(&y);
        mf_collator_unref(coll);
        return mf_error_set(err, MF_BadValue,
                            "The _id index must have the same collation as the collection. "
                            "Index collation: %s, collection collation: %s",
                            a, b);
    }
    with_collation(spec, coll, &out);
    mf_collator_unref(coll);
    bson_destroy(spec);
    bson_init(spec);
    bson_concat(spec, &out);
    bson_destroy(&out);
    return 0;
}

/* Phase D: _isSpecOk, undecorated. */
static int check_spec_ok(const bson_t *spec, mf_error *err)
{
    bson_iter_t it, sp;
    uint32_t len;
    find(spec, "name", &it);
    const char *name = bson_iter_utf8(&it, &len);
    if (strlen(name) != len)
        return mf_error_set(err, MF_CannotCreateIndex, "index name cannot contain NUL bytes");
    if (len == 0)
        return mf_error_set(err, MF_CannotCreateIndex, "index name cannot be empty");
    bson_t key;
    if (find(spec, "key", &it) && mf_bsonx_container_view(&it, &key) && strcmp(plugin_name(&key), "wildcard") == 0) {
        int rc = mfi_wild_check_spec_ok(spec, err);
        if (rc)
            return rc;
    }
    if (find(spec, "partialFilterExpression", &it)) {
        bson_t filter;
        if (find(spec, "sparse", &sp) && truthy(&sp))
            return mf_error_set(err, MF_CannotCreateIndex,
                                "cannot mix \"partialFilterExpression\" and \"sparse\" options");
        mf_bsonx_container_view(&it, &filter);
        int rc = check_partial_doc(&filter, 0, err);
        if (rc)
            return rc;
    }
    if (find(spec, "storageEngine", &it)) {
        bson_t opts;
        bson_iter_t e;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return mf_error_set(err, MF_CannotCreateIndex,
                                "\"storageEngine\" options must be a document if present");
        mf_bsonx_container_view(&it, &opts);
        if (bson_empty(&opts))
            return mf_error_set(err, MF_CannotCreateIndex,
                                "Empty \"storageEngine\" options are invalid. Please remove the "
                                "field or include valid options.");
        bson_iter_init(&e, &opts);
        while (bson_iter_next(&e)) {
            if (strcmp(bson_iter_key(&e), "wiredTiger") != 0)
                return mf_error_set(err, MF_InvalidOptions, "unknown storage engine: %s",
                                    bson_iter_key(&e));
            if (!BSON_ITER_HOLDS_DOCUMENT(&e))
                return mf_error_set(err, MF_BadValue,
                                    "'storageEngine.wiredTiger' has to be an embedded document.");
        }
    }
    return 0;
}

/* Phase E: _fixIndexSpec's order: v, unique: true, key, name, the rest.
 * An _id index is named "_id_" whatever name it was given (ODMs ask for
 * "_id_1"), so it is the collection's own _id index, already there. */
static void build_fixed(const bson_t *spec, bson_t *out)
{
    bson_iter_t it;
    bson_t key;
    find(spec, "v", &it);
    BSON_APPEND_INT32(out, "v", (int32_t)number_of(&it));
    if (find(spec, "unique", &it) && truthy(&it))
        BSON_APPEND_BOOL(out, "unique", true);
    find(spec, "key", &it);
    mf_bsonx_append_iter(out, "key", -1, &it);
    bool is_id = mf_bsonx_container_view(&it, &key) && is_id_pattern(&key);
    find(spec, "name", &it);
    if (is_id)
        BSON_APPEND_UTF8(out, "name", "_id_");
    else
        mf_bsonx_append_iter(out, "name", -1, &it);
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        static const char *const skip[] = {"_id", "dropDups", "ns", "v", "unique", "key", "name"};
        const char *k = bson_iter_key(&it);
        if (IN_LIST(k, skip))
            continue;
        mf_bsonx_append_iter(out, k, -1, &it);
    }
}

/* mongod's Ordering, made with the index descriptor after the spec's
 * checks, has a bit per field for at most 32 (uassert 13103, its message
 * alone). */
static int check_field_count(const bson_t *spec, mf_error *err)
{
    bson_iter_t it;
    bson_t key;
    if (find(spec, "key", &it) && mf_bsonx_container_view(&it, &key) && bson_count_keys(&key) > 32)
        return mf_error_set(err, 13103, "too many compound keys");
    return 0;
}

/* What the index's kind refuses of a valid spec (index_type.h's
 * check_spec), as mongod's access method does when the index is made. */
static int check_kind_spec(const bson_t *spec, mf_error *err)
{
    bson_iter_t it;
    bson_t key;
    if (!find(spec, "key", &it) || !mf_bsonx_container_view(&it, &key))
        return 0;
    const mf_index_type *type = mf_index_type_find(plugin_name(&key));
    bool unique = find(spec, "unique", &it) && truthy(&it);
    return type && type->check_spec ? type->check_spec(spec, &key, unique, err) : 0;
}

int mf_index_spec_normalize(const bson_t *in, bson_t *out, mf_error *err)
{
    return mf_index_spec_normalize_coll(in, NULL, out, err);
}

/* The spec as its kind stores it (index_type.h fix_spec), in place. */
static int fix_for_kind(bson_t *valid, mf_error *err)
{
    bson_iter_t it;
    bson_t key, fixed;
    if (!find(valid, "key", &it) || !mf_bsonx_container_view(&it, &key))
        return 0;
    const mf_index_type *type = mf_index_type_find(plugin_name(&key));
    if (!type || !type->fix_spec)
        return 0;
    int rc = type->fix_spec(valid, &fixed, err);
    if (rc == 0) {
        bson_destroy(valid);
        bson_copy_to(&fixed, valid);
    }
    bson_destroy(&fixed);
    return rc;
}

int mf_index_spec_normalize_coll(const bson_t *in, const mf_collator *coll_default, bson_t *out,
                                 mf_error *err)
{
    bson_t valid;
    int rc;
    bson_init(out);
    if ((rc = check_ttl(in, err)) != 0)
        return rc;
    if ((rc = validate_spec(in, err)) != 0) {
        char reason[MF_ERRMSG_MAX];
        memcpy(reason, err->msg, sizeof reason);
        return spec_fail(err, rc, in, "%s", reason);
    }
    build_validated(in, &valid);
    if ((rc = fix_for_kind(&valid, err)) == 0 && (rc = check_names(&valid, err)) == 0 &&
        (rc = resolve_collation(&valid, coll_default, err)) == 0) {
        if ((rc = check_spec_ok(&valid, err)) != 0) {
            char reason[MF_ERRMSG_MAX];
            memcpy(reason, err->msg, sizeof reason);
            rc = spec_fail(err, rc, &valid, "%s", reason);
        } else if ((rc = check_field_count(&valid, err)) == 0 &&
                   (rc = check_kind_spec(&valid, err)) == 0) {
            build_fixed(&valid, out);
        }
    }
    bson_destroy(&valid);
    return rc;
}

void mf_index_id_spec(const mf_collator *coll, bson_t *out)
{
    bson_t key, sub;
    bson_init(out);
    BSON_APPEND_INT32(out, "v", 2);
    BSON_APPEND_DOCUMENT_BEGIN(out, "key", &key);
    BSON_APPEND_INT32(&key, "_id", 1);
    bson_append_document_end(out, &key);
    BSON_APPEND_UTF8(out, "name", "_id_");
    if (coll) {
        BSON_APPEND_DOCUMENT_BEGIN(out, "collation", &sub);
        mf_collator_to_bson(coll, &sub);
        bson_append_document_end(out, &sub);
    }
}

int mf_index_name_generate(const bson_t *key, mf_buf *out)
{
    bson_iter_t it;
    char num[64];
    bool first = true;
    if (!bson_iter_init(&it, key))
        return -1;
    while (bson_iter_next(&it)) {
        const char *v = num;
        if (BSON_ITER_HOLDS_UTF8(&it)) {
            v = bson_iter_utf8(&it, NULL);
        } else if (bson_iter_type(&it) == BSON_TYPE_INT32 || bson_iter_type(&it) == BSON_TYPE_INT64) {
            snprintf(num, sizeof num, "%lld", (long long)safe_long(&it));
        } else if (is_number(&it)) {
            double d = number_of(&it);
            if (d == floor(d) && fabs(d) < 1e15)
                snprintf(num, sizeof num, "%lld", (long long)d);
            else
                snprintf(num, sizeof num, "%.17g", d);
        } else {
            value_str(&it, num, sizeof num);
        }
        if ((!first && mf_buf_append(out, "_", 1) != 0) ||
            mf_buf_append(out, bson_iter_key(&it), strlen(bson_iter_key(&it))) != 0 ||
            mf_buf_append(out, "_", 1) != 0 || mf_buf_append(out, v, strlen(v)) != 0)
            return -1;
        first = false;
    }
    if (mf_buf_append(out, "", 1) != 0)
        return -1;
    out->len--; /* the NUL terminates, uncounted */
    return 0;
}

/* ------------------------------------------------------------ conflicts */

/* `spec` without the server fields, into `out` (initialised here). */
static void strip_server_fields(const bson_t *spec, bson_t *out)
{
    bson_iter_t it;
    bson_init(out);
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it))
        if (!IN_LIST(bson_iter_key(&it), server_fields))
            mf_bsonx_append_iter(out, bson_iter_key(&it), -1, &it);
}

static bool same_doc_field(const bson_t *a, const bson_t *b, const char *name)
{
    bson_iter_t ia, ib;
    bool ha = find(a, name, &ia), hb = find(b, name, &ib);
    if (ha != hb)
        return false;
    if (!ha)
        return true;
    return bson_iter_type(&ia) == bson_iter_type(&ib) && mf_bsonx_compare_values(&ia, &ib) == 0;
}

static bool same_truth(const bson_t *a, const bson_t *b, const char *name)
{
    bson_iter_t ia, ib;
    bool ta = find(a, name, &ia) && truthy(&ia), tb = find(b, name, &ib) && truthy(&ib);
    return ta == tb;
}

/* IndexDescriptor::compareIndexOptions' first half: the fields that make
 * an index distinct (the key pattern, collation, partial filter -- compared
 * as documents, where mongod compares the parsed filters -- unique and
 * sparse by truth, a wildcard index's projection). */
static bool same_signature(const bson_t *a, const bson_t *b)
{
    return same_doc_field(a, b, "key") && same_doc_field(a, b, "collation") &&
           same_doc_field(a, b, "partialFilterExpression") && same_truth(a, b, "unique") &&
           same_truth(a, b, "sparse") && same_doc_field(a, b, "wildcardProjection");
}

/* The second half: every other option equal (hidden and the creation-only
 * options do not count). */
static bool options_of(const bson_t *spec, const char *name, bson_iter_t *out);

static const char *const not_options[] = {
    "key", "ns", "name", "v", "textIndexVersion", "2dsphereIndexVersion", "background",
    "dropDups", "sparse", "unique", "hidden", "collation", "partialFilterExpression",
    "prepareUnique", "clustered", "wildcardProjection"};

static bool options_of(const bson_t *spec, const char *name, bson_iter_t *out)
{
    return !IN_LIST(name, not_options) && find(spec, name, out);
}

static bool same_options(const bson_t *a, const bson_t *b)
{
    const bson_t *sides[2][2] = {{a, b}, {b, a}};
    for (int s = 0; s < 2; s++) {
        bson_iter_t it, other;
        bson_iter_init(&it, sides[s][0]);
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (IN_LIST(k, not_options))
                continue;
            if (!options_of(sides[s][1], k, &other) || mf_bsonx_compare_values(&it, &other) != 0)
                return false;
        }
    }
    return true;
}

static bool is_text_spec(const bson_t *spec)
{
    bson_iter_t it;
    bson_t key;
    return find(spec, "key", &it) && mf_bsonx_container_view(&it, &key) &&
           strcmp(plugin_name(&key), "text") == 0;
}

int mf_index_spec_conflict(const bson_t *existing, const bson_t *incoming, bool *same,
                           mf_error *err)
{
    bson_t ex;
    bson_iter_t en, in;
    char s1[STR_CAP], s2[STR_CAP];
    int rc = 0;
    *same = false;
    strip_server_fields(existing, &ex);
    find(&ex, "name", &en);
    find(incoming, "name", &in);
    bool same_name = BSON_ITER_HOLDS_UTF8(&en) && BSON_ITER_HOLDS_UTF8(&in) &&
                     strcmp(bson_iter_utf8(&en, NULL), bson_iter_utf8(&in, NULL)) == 0;
    bool sig = same_signature(&ex, incoming), opts = sig && same_options(&ex, incoming);
    mf_bsonx_to_string(incoming, s1, sizeof s1);
    mf_bsonx_to_string(&ex, s2, sizeof s2);
    if (same_name) {
        if (!sig)
            rc = mf_error_set(err, MF_IndexKeySpecsConflict,
                              "An existing index has the same name as the requested index. When "
                              "index names are not specified, they are auto generated and can "
                              "cause conflicts. Please refer to our documentation. Requested "
                              "index: %s, existing index: %s",
                              s1, s2);
        else if (!opts)
            rc = mf_error_set(err, MF_IndexOptionsConflict,
                              "An equivalent index already exists with the same name but "
                              "different options. Requested index: %s, existing index: %s",
                              s1, s2);
        else
            *same = true;
    } else if (sig) {
        if (!opts)
            rc = mf_error_set(err, MF_IndexOptionsConflict,
                              "An equivalent index already exists with a different name and "
                              "options. Requested index: %s, existing index: %s",
                              s1, s2);
        else
            rc = mf_error_set(err, MF_IndexOptionsConflict,
                              "Index already exists with a different name: %s",
                              BSON_ITER_HOLDS_UTF8(&en) ? bson_iter_utf8(&en, NULL) : "");
    } else if (is_text_spec(&ex) && is_text_spec(incoming)) {
        /* IndexCatalogImpl::_doesSpecConflictWithExisting's last check */
        rc = mf_error_set(err, MF_CannotCreateIndex,
                          "only one text index per collection allowed, found existing text "
                          "index \"%s\"",
                          BSON_ITER_HOLDS_UTF8(&en) ? bson_iter_utf8(&en, NULL) : "");
    }
    bson_destroy(&ex);
    return rc;
}

/* ---------------------------------------------------------- descriptors */

void mf_index_desc_clear(mf_index_desc *d)
{
    if (!d)
        return;
    if (d->type && d->type->desc_clear)
        d->type->desc_clear(d);
    free(d->name);
    if (d->key)
        bson_destroy(d->key);
    for (size_t i = 0; d->paths && i < d->nfields; i++)
        free(d->paths[i]);
    free(d->paths);
    free(d->desc);
    mf_matcher_free(d->partial);
    if (d->partial_spec)
        bson_destroy(d->partial_spec);
    mf_collator_unref(d->coll);
    memset(d, 0, sizeof *d);
}

int mf_index_desc_init(mf_index_desc *d, const char *name, mf_tree_id tree, const uint8_t *spec,
                       size_t spec_len, mf_error *err)
{
    bson_t s, sub;
    bson_iter_t it;
    int rc = 0;
    memset(d, 0, sizeof *d);
    d->tree = tree;
    d->expire_after = -1;
    if (!bson_init_static(&s, spec, spec_len) || !find(&s, "key", &it) || !mf_bsonx_container_view(&it, &sub) ||
        bson_empty(&sub))
        return mf_error_set(err, MF_DataCorruption, "index spec without a key pattern");
    if (!name && find(&s, "name", &it) && BSON_ITER_HOLDS_UTF8(&it))
        name = bson_iter_utf8(&it, NULL);
    if (!(d->type = mf_index_type_find(plugin_name(&sub))))
        return mf_error_set(err, MF_CannotCreateIndex, "index %s: its type '%s' is not built",
                            name ? name : "", plugin_name(&sub));
    d->nfields = bson_count_keys(&sub);
    if (!(d->name = strdup(name ? name : "")) || !(d->key = bson_copy(&sub)) ||
        !(d->paths = calloc(d->nfields, sizeof *d->paths)) ||
        !(d->desc = calloc(d->nfields, sizeof *d->desc))) {
        rc = oom(err);
        goto fail;
    }
    bson_iter_init(&it, d->key);
    for (size_t i = 0; bson_iter_next(&it); i++) {
        if (!(d->paths[i] = strdup(bson_iter_key(&it)))) {
            rc = oom(err);
            goto fail;
        }
        d->desc[i] = is_number(&it) && number_of(&it) < 0;
        const char *t = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
        if (i < 32 && strcmp(t, "hashed") == 0)
            d->hashed |= 1u << i;
        if (i < 32 && (strcmp(t, "2dsphere") == 0 || strcmp(t, "2d") == 0))
            d->geo |= 1u << i;
    }
    d->is_id = is_id_pattern(d->key);
    /* The _id index is unique without saying so in its spec. */
    d->unique = d->is_id || (find(&s, "unique", &it) && truthy(&it));
    d->sparse = find(&s, "sparse", &it) && truthy(&it);
    d->hidden = find(&s, "hidden", &it) && truthy(&it);
    d->prepare_unique = !d->unique && find(&s, "prepareUnique", &it) && truthy(&it);
    d->building = find(&s, "building", &it) && truthy(&it);
    if (find(&s, "multikeyPaths", &it) && is_number(&it))
        d->multikey = (uint32_t)safe_long(&it);
    if (find(&s, "expireAfterSeconds", &it) && is_number(&it))
        d->expire_after = safe_long(&it);
    /* Before the partial filter: mongod reads it under the index's collation. */
    if (find(&s, "collation", &it) && (rc = mf_collator_new_iter(&it, &d->coll, err)) != 0)
        goto fail;
    if (find(&s, "partialFilterExpression", &it) && mf_bsonx_container_view(&it, &sub)) {
        if (!(d->partial_spec = bson_copy(&sub))) {
            rc = oom(err);
            goto fail;
        }
        if ((rc = mf_matcher_parse_coll(d->partial_spec, NULL, d->coll, &d->partial, err)) != 0)
            goto fail;
    }
    if (d->type->desc_init && (rc = d->type->desc_init(d, &s, err)) != 0)
        goto fail;
    return 0;
fail:
    mf_index_desc_clear(d);
    return rc;
}

/* ----------------------------------------------------------------- keys */

/* What index keys add to the generator (keygen.h): where keys go. */
typedef struct ikeys {
    const mf_index_desc *d;
    mf_keyset *out;
    /* mf_index_key_values: instead of keeping each key, compare it with
     * `entry` and, the first time they agree, append its values */
    const uint8_t *entry;
    size_t entry_len;
    bson_t *values;
    mf_buf scratch;
    bool found;
} ikeys;

int mfi_keyset_add(mf_keyset *k, mf_buf **out)
{
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 4;
        mf_buf *keys = realloc(k->keys, cap * sizeof *keys);
        if (!keys)
            return -1;
        memset(keys + k->cap, 0, (cap - k->cap) * sizeof *keys);
        k->keys = keys;
        k->cap = cap;
    }
    *out = &k->keys[k->n++];
    (*out)->len = 0;
    return 0;
}

/* Whether `key` is index entry `entry`: the key, then a RecordId for a
 * non-unique index. */
static bool is_entry(const mf_buf *key, const uint8_t *entry, size_t len)
{
    return (key->len == len || key->len + 8 == len) && memcmp(key->data, entry, key->len) == 0;
}

/* Every candidate is a key, but a sparse index's candidate with every
 * field missing. */
static int emit(mfi_keygen *g, const mfi_kfield *f, size_t nmissing)
{
    ikeys *k = g->arg;
    mf_buf *key = &k->scratch;
    if (k->found || (k->d->sparse && nmissing == g->nfields))
        return 0;
    if (!k->values && mfi_keyset_add(k->out, &key) != 0)
        return oom(g->err);
    key->len = 0;
    if (mfi_keygen_encode(g, f, key) != 0)
        return oom(g->err);
    if (k->values && is_entry(key, k->entry, k->entry_len)) {
        k->found = true;
        for (size_t i = 0; i < g->nfields; i++)
            if (!mf_bsonx_append_iter(k->values, k->d->paths[i], -1, &f[i].fixed))
                return oom(g->err);
    }
    return 0;
}

/* The generator over `d`'s key pattern, emitting into `k`. */
static mfi_keygen keygen_of(const mf_index_desc *d, ikeys *k, mf_error *err)
{
    return (mfi_keygen){.nfields = d->nfields, .paths = d->paths, .desc = d->desc,
                        .coll = d->coll, .emit = emit, .arg = k, .err = err};
}

int mfi_key_cmp(const void *a, const void *b)
{
    const mf_buf *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->data, y->data, n) : 0;
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Sort the keys; move duplicates past `n` (their memory stays owned). */
void mfi_keyset_unique(mf_keyset *k)
{
    if (k->n < 2)
        return;
    qsort(k->keys, k->n, sizeof *k->keys, mfi_key_cmp);
    size_t w = 1;
    for (size_t r = 1; r < k->n; r++) {
        if (mfi_key_cmp(&k->keys[r], &k->keys[w - 1]) == 0)
            continue;
        if (r != w) {
            mf_buf t = k->keys[w];
            k->keys[w] = k->keys[r];
            k->keys[r] = t;
        }
        w++;
    }
    k->n = w;
}

/* mongod's special case: the _id index's one key is the _id field as it
 * is (or null), not generated.  Whether `d` is that index, and the value. */
static bool id_value(const mf_index_desc *d, const bson_t *doc, bson_iter_t *it)
{
    if (d->nfields != 1 || strcmp(d->paths[0], "_id") != 0)
        return false;
    if (!find(doc, "_id", it))
        mfi_keygen_null(it);
    return true;
}

/* KeyTooLong (17280) when a key of `out`, as its tree stores it (with the
 * RecordId after it in a non-unique index), is longer than a B+tree key
 * may be.  mongod has had no such limit since 4.2; here the write or build
 * is refused before anything is written (mongod 4.0's error). */
int mfi_keys_fit(const mf_index_desc *d, mf_keyset *out, mf_error *err)
{
    size_t room = MF_BTREE_MAX_KEY - (d->unique ? 0 : 8);
    for (size_t i = 0; i < out->n; i++) {
        if (out->keys[i].len > room) {
            size_t len = out->keys[i].len;
            mf_keyset_clear(out);
            return mf_error_set(err, MF_KeyTooLong,
                                "key too large to index, failing index %s: a key of %zu bytes "
                                "(at most %zu)",
                                d->name, len, room);
        }
    }
    return 0;
}

int mf_index_keys(const mf_index_desc *d, const bson_t *doc, mf_keyset *out, uint32_t *multikey,
                  mf_error *err)
{
    return d->type->keys(d, doc, out, multikey, err);
}

int mfi_btree_keys(const mf_index_desc *d, const bson_t *doc, mf_keyset *out, uint32_t *multikey,
                   mf_error *err)
{
    ikeys k = {.d = d, .out = out};
    mfi_keygen g = keygen_of(d, &k, err);
    bson_iter_t id;
    mf_keyset_clear(out);
    *multikey = 0;
    if (d->partial && !mf_matcher_match(d->partial, doc))
        return 0;
    if (id_value(d, doc, &id)) {
        mf_buf *key;
        if (mfi_keyset_add(out, &key) != 0 ||
            mf_bsonx_key_append_coll(key, &id, d->desc[0], d->coll) != 0) {
            mf_keyset_clear(out);
            return oom(err);
        }
        return mfi_keys_fit(d, out, err);
    }
    int rc = mfi_keygen_run(&g, doc);
    if (rc == 0 && out->n == 0 && !d->sparse) {
        /* never reached with the generator above; mongod keeps it too */
        mf_buf *key;
        bson_iter_t null_it;
        mfi_keygen_null(&null_it);
        if (mfi_keyset_add(out, &key) != 0)
            rc = oom(err);
        for (size_t i = 0; rc == 0 && i < d->nfields; i++)
            if (mf_bsonx_key_append_coll(key, &null_it, d->desc[i], d->coll) != 0)
                rc = oom(err);
    }
    if (rc) {
        mf_keyset_clear(out);
        return rc;
    }
    mfi_keyset_unique(out);
    if ((rc = mfi_keys_fit(d, out, err)) != 0)
        return rc;
    *multikey = g.multikey;
    return 0;
}

int mf_index_key_values(const mf_index_desc *d, const bson_t *doc, const uint8_t *entry,
                        size_t entry_len, bson_t *out, mf_error *err)
{
    if (d->hashed) /* one key per document */
        return mfi_hashed_key_values(d, doc, out, err);
    if (d->type && d->type->key_values)
        return d->type->key_values(d, doc, entry, entry_len, out, err);
    ikeys k = {.d = d, .entry = entry, .entry_len = entry_len, .values = out};
    mfi_keygen g = keygen_of(d, &k, err);
    bson_iter_t id;
    for (size_t i = 0; i < d->nfields; i++)
        if (strcmp(d->paths[i], "$_path") == 0) /* a wildcard index's virtual index */
            return mfi_wild_key_values(d, doc, entry, entry_len, out, err);
    if (id_value(d, doc, &id))
        return mf_bsonx_append_iter(out, "_id", 3, &id) ? 0 : oom(err);
    int rc = mfi_keygen_run(&g, doc);
    mf_buf_free(&k.scratch);
    return rc;
}

void mf_keyset_clear(mf_keyset *k)
{
    k->n = 0;
}

void mf_keyset_free(mf_keyset *k)
{
    for (size_t i = 0; i < k->cap; i++)
        mf_buf_free(&k->keys[i]);
    free(k->keys);
    memset(k, 0, sizeof *k);
}
