/*
 * project.c -- find's projection: parse a projection document into a tree
 * of path components, then apply it to documents as they are stored.
 *
 * Tree.  Each node is one path component; {"a.b": 1, "a.c": 0} and
 * {a: {b: 1, c: 0}} build the same tree.  An inner node has children in
 * the order the specification names them; a leaf is one of
 *
 *   INCLUDE     {a: 1}, {a: true}        (any truthy number or bool)
 *   EXCLUDE     {a: 0}, {a: false}
 *   SLICE       {a: {$slice: n}}, {a: {$slice: [skip, limit]}}
 *   ELEMMATCH   {a: {$elemMatch: {...}}}  (top level only)
 *   POSITIONAL  {"a.b.$": 1}              (at most one)
 *   EXPR        a computed field: parsed for mongod's errors, then refused
 *
 * The projection is an inclusion or an exclusion (mongod's ProjectType),
 * decided by the first non-_id field, or, when there is none, by mongod's
 * rules for the find-only operators (computeProjectionType below).
 *
 * Application (one pass over the document, as mongod's executor would do
 * in several):
 *
 *   inclusion   fields named by a leaf are copied, others dropped; through
 *               an inner node a document is projected recursively, an array
 *               element by element (documents projected, arrays recursed,
 *               scalars dropped), and a scalar is dropped; $elemMatch
 *               fields come after the others, in specification order.
 *   exclusion   fields named by EXCLUDE are dropped, all others kept;
 *               scalars under an inner node are kept; $elemMatch replaces
 *               its field in place (or removes it when nothing matches).
 *   $slice      applies to the array at its path, reached through
 *               documents and arrays of documents but never through an
 *               array directly inside an array (mongod's find slice).
 *   positional  applies to the first array on its path: the array becomes
 *               [element at `pos`], of the array as projected.
 *
 * Errors are mongod 7.0's (src/mongo/db/query/projection_parser.cpp and
 * field_path.cpp): codes 31249..31395 are "Location" codes.
 */
#include "query_int.h"

#include <stdlib.h>
#include <string.h>

/* mongod's assertion ids used here (their codeName is "Location<id>"). */
enum {
    E_SLICE_ARITY = 28667,
    E_COLLISION_PREFIX = 31249,
    E_COLLISION = 31250,
    E_EXPR_IN_EXCLUSION = 31252,
    E_INCL_IN_EXCL = 31253,
    E_EXCL_IN_INCL = 31254,
    E_POS_AND_ELEMMATCH = 31255,
    E_ELEMMATCH_AND_POS = 31256,
    E_SLICE_SKIP = 31257,
    E_SLICE_LIMIT_TYPE = 31258,
    E_SLICE_LIMIT = 31259,
    E_POS_WITH_OBJECT = 31271,
    E_SLICE_ARRAY = 31272,
    E_SLICE_TYPE = 31273,
    E_ELEMMATCH_ARG = 31274,
    E_ELEMMATCH_NESTED = 31275,
    E_TWO_POSITIONAL = 31276,
    E_POS_WITH_LITERAL = 31308,
    E_LITERAL_IN_EXCLUSION = 31310,
    E_UNKNOWN_EXPR = 31325,
    E_POS_IN_MIDDLE = 31394,
    E_POS_WITH_EXCLUSION = 31395,
    E_POS_NO_MATCHER = 51050,
    E_EMPTY_SUBPROJECTION = 51270,
    E_POS_NO_MATCH = 51246,
    E_POS_MISMATCH = 51247,
    E_POS_BAD_FIELD = 5392900,
};

typedef enum {
    P_INNER, P_INCLUDE, P_EXCLUDE, P_SLICE, P_ELEMMATCH, P_POSITIONAL, P_EXPR,
    P_META /* {$meta: "<name>"}: the row's metadata (mf_projection_apply_meta) */
} pkind;

typedef struct pnode pnode;
struct pnode {
    pkind kind;
    char *name;
    pnode **kids; /* P_INNER, in specification order */
    size_t nkids;
    bool has_skip; /* P_SLICE: [skip, limit] form */
    int32_t skip, limit;
    mf_matcher *elem; /* P_ELEMMATCH: {name: {$elemMatch: ...}} */
    bool on_pos;      /* P_INNER: on the positional leaf's path */
    void *expr;       /* P_EXPR: the compiled expression (hooks) */
    int meta;         /* P_META: its kind (mf_meta_kind) */
    bool has_expr;    /* P_INNER: a P_EXPR lies below */
};

typedef enum { T_UNSET, T_INCLUSION, T_EXCLUSION } ptype;

struct mf_projection {
    pnode root;
    bool is_inclusion;
    bool has_positional;
    bool has_hooks;
    mf_expr_hooks hooks;
    mf_proj_mode mode;
};

/* --------------------------------------------------------------- nodes */

static void pnode_clear(pnode *n, const mf_expr_hooks *h)
{
    if (n->expr && h)
        h->free(n->expr);
    for (size_t i = 0; i < n->nkids; i++) {
        pnode_clear(n->kids[i], h);
        free(n->kids[i]);
    }
    free(n->kids);
    free(n->name);
    if (n->elem)
        mf_matcher_free(n->elem);
}

void mf_projection_free(mf_projection *p)
{
    if (!p)
        return;
    pnode_clear(&p->root, p->has_hooks ? &p->hooks : NULL);
    free(p);
}

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

static pnode *find_kid(const pnode *n, const char *name, size_t len)
{
    for (size_t i = 0; i < n->nkids; i++)
        if (strlen(n->kids[i]->name) == len && memcmp(n->kids[i]->name, name, len) == 0)
            return n->kids[i];
    return NULL;
}

static pnode *add_kid(pnode *parent, pkind kind, const char *name, size_t len)
{
    pnode *n = calloc(1, sizeof *n);
    pnode **kids = realloc(parent->kids, (parent->nkids + 1) * sizeof *kids);
    if (!n || !kids || !(n->name = strndup(name, len))) {
        if (kids)
            parent->kids = kids;
        free(n);
        return NULL;
    }
    n->kind = kind;
    parent->kids = kids;
    parent->kids[parent->nkids++] = n;
    return n;
}

/* The path without its first component ("a.b.c" -> "b.c"), as mongod's
 * FieldPath::tail() in its collision message. */
static const char *path_tail(const char *path)
{
    const char *dot = strchr(path, '.');
    return dot ? dot + 1 : "";
}

/* Add a leaf (or inner node) of `kind` at dotted `path` below `parent`,
 * creating inner nodes on the way (mongod's addNodeAtPath).  `*out` gets
 * the new node. */
static int add_at_path(pnode *parent, const char *path, pkind kind, pnode **out, mf_error *err)
{
    pnode *cur = parent;
    const char *p = path;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        pnode *kid = find_kid(cur, p, n);
        if (!dot) {
            if (kid)
                return mf_error_set(err, E_COLLISION, "Path collision at %s", path);
            if (!(kid = add_kid(cur, kind, p, n)))
                return oom(err);
            *out = kid;
            return 0;
        }
        if (!kid) {
            if (!(kid = add_kid(cur, P_INNER, p, n)))
                return oom(err);
        } else if (kid->kind != P_INNER) {
            return mf_error_set(err, E_COLLISION_PREFIX, "Path collision at %s remaining portion %s",
                                path, path_tail(path));
        }
        cur = kid;
        p = dot + 1;
    }
}

/* The inner node at `path` below `parent`, or NULL (mongod's
 * findLastInnerNodeOnPath). */
static pnode *inner_at_path(pnode *parent, const char *path)
{
    pnode *cur = parent;
    const char *p = path;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        pnode *kid = find_kid(cur, p, n);
        if (!kid || kid->kind != P_INNER)
            return NULL;
        if (!dot)
            return kid;
        cur = kid;
        p = dot + 1;
    }
}

/* -------------------------------------------------------------- parsing */

typedef struct pctx {
    mf_projection *p;
    const bson_t *filter;
    ptype type;
    bool id_specified, id_included, id_excluded;
    bool has_positional, has_elem_match, has_find_slice;
    const mf_expr_hooks *hooks; /* NULL: computed fields are refused */
    const mf_collator *coll;    /* $elemMatch's collation */
    mf_proj_mode mode;
    mf_error *err;
} pctx;

/* Aggregation expression names of mongod 7.0 (Expression::isExpressionName):
 * {a: {$add: ...}} is an expression, {a: {$foo: 1}} an unknown one. */
static bool is_expression_name(const char *name)
{
    static const char *const names[] = {
        "$abs", "$acos", "$acosh", "$add", "$allElementsTrue", "$and", "$anyElementTrue",
        "$arrayElemAt", "$arrayToObject", "$asin", "$asinh", "$atan", "$atan2", "$atanh",
        "$avg", "$binarySize", "$bitAnd", "$bitNot", "$bitOr", "$bitXor", "$bsonSize",
        "$ceil", "$cmp", "$concat", "$concatArrays", "$cond", "$convert", "$cos", "$cosh",
        "$dateAdd", "$dateDiff", "$dateFromParts", "$dateFromString", "$dateSubtract",
        "$dateToParts", "$dateToString", "$dateTrunc", "$dayOfMonth", "$dayOfWeek",
        "$dayOfYear", "$degreesToRadians", "$divide", "$eq", "$exp", "$filter", "$first",
        "$firstN", "$floor", "$function", "$getField", "$gt", "$gte", "$hour", "$ifNull",
        "$in", "$indexOfArray", "$indexOfBytes", "$indexOfCP", "$isArray", "$isNumber",
        "$isoDayOfWeek", "$isoWeek", "$isoWeekYear", "$last", "$lastN", "$let", "$literal",
        "$ln", "$log", "$log10", "$lt", "$lte", "$ltrim", "$map", "$max", "$maxN", "$median",
        "$mergeObjects", "$meta", "$millisecond", "$min", "$minN", "$minute", "$mod",
        "$month", "$multiply", "$ne", "$not", "$objectToArray", "$or", "$percentile", "$pow",
        "$radiansToDegrees", "$rand", "$range", "$reduce", "$regexFind", "$regexFindAll",
        "$regexMatch", "$replaceAll", "$replaceOne", "$reverseArray", "$round", "$rtrim",
        "$sampleRate", "$second", "$setDifference", "$setEquals", "$setField",
        "$setIntersection", "$setIsSubset", "$setUnion", "$sin", "$sinh", "$size", "$slice",
        "$sortArray", "$split", "$sqrt", "$stdDevPop", "$stdDevSamp", "$strLenBytes",
        "$strLenCP", "$strcasecmp", "$substr", "$substrBytes", "$substrCP", "$subtract",
        "$sum", "$switch", "$tan", "$tanh", "$toBool", "$toDate", "$toDecimal", "$toDouble",
        "$toHashedIndexKey", "$toInt", "$toLong", "$toLower", "$toObjectId", "$toString",
        "$toUpper", "$trim",
        "$trunc", "$tsIncrement", "$tsSecond", "$type", "$unsetField", "$week", "$year",
        "$zip",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

static bool is_number(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: case BSON_TYPE_INT64: case BSON_TYPE_DOUBLE: case BSON_TYPE_DECIMAL128:
        return true;
    default:
        return false;
    }
}

/* BSONElement::numberInt(): the value as a 32-bit int (C casts for long
 * and double, as mongod; a double out of range or NaN saturates / is 0). */
static int32_t number_int(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32:
        return bson_iter_int32(it);
    case BSON_TYPE_INT64:
        return (int32_t)(uint32_t)(uint64_t)bson_iter_int64(it);
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        if (!(d == d))
            return 0;
        if (d >= 2147483647.0)
            return INT32_MAX;
        if (d <= -2147483648.0)
            return INT32_MIN;
        return (int32_t)d;
    }
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t dv;
        char s[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &dv);
        bson_decimal128_to_string(&dv, s);
        double d = strtod(s, NULL);
        if (!(d == d))
            return 0;
        if (d >= 2147483647.0)
            return INT32_MAX;
        if (d <= -2147483648.0)
            return INT32_MIN;
        return (int32_t)d;
    }
    default:
        return 0;
    }
}

/* BSONElement::trueValue() for the number and bool types. */
static bool true_value(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_BOOL:
        return bson_iter_bool(it);
    case BSON_TYPE_INT32:
        return bson_iter_int32(it) != 0;
    case BSON_TYPE_INT64:
        return bson_iter_int64(it) != 0;
    case BSON_TYPE_DOUBLE:
        return bson_iter_double(it) != 0; /* NaN is true */
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t dv;
        int sign, exp10;
        uint64_t hi, lo;
        bson_iter_decimal128(it, &dv);
        return mf_bsonx_decimal_parts(&dv, &sign, &hi, &lo, &exp10) != MF_DEC_FINITE ||
               (hi | lo) != 0;
    }
    default:
        return false;
    }
}

static void doc_of(const bson_iter_t *it, bson_t *out)
{
    uint32_t len;
    const uint8_t *data;
    if (BSON_ITER_HOLDS_ARRAY(it))
        bson_iter_array(it, &len, &data);
    else
        bson_iter_document(it, &len, &data);
    bson_init_static(out, data, len);
}

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* The "Location<code>: msg" form of a status, as mongod's Status::toString. */
static void status_string(const mf_error *e, char *out, size_t cap)
{
    char scratch[24];
    const char *name = mf_error_name(e->code, scratch);
    size_t n = strlen(name);
    if (cap < n + 3)
        return;
    memcpy(out, name, n);
    memcpy(out + n, ": ", 2);
    size_t m = strnlen(e->msg, cap - n - 3);
    memcpy(out + n + 2, e->msg, m);
    out[n + 2 + m] = '\0';
}

/* A computed field's node: compile its expression (the value at `value`)
 * through the hooks, or refuse it when there are none. */
static int compile_expression(pctx *c, pnode *n, const bson_iter_t *value, const char *path)
{
    if (c->hooks)
        return c->hooks->parse(value, c->hooks->arg, &n->expr, c->err);
    return mf_error_set(c->err, MF_NotImplemented,
                        "projection of '%s': computed fields (aggregation expressions and "
                        "literals) are not supported yet",
                        path);
}

/* A generic aggregation expression at `path` ({a: {$add: ...}}): mongod's
 * parse-time checks, then refused.  Returns -1 when `name` is no
 * expression (the object is then a sub-projection). */
static int parse_generic_expression(pctx *c, const char *path, const bson_iter_t *first,
                                    const bson_iter_t *value, pnode *parent)
{
    const char *name = bson_iter_key(first);
    if (!is_expression_name(name))
        return -1;
    bool is_meta = strcmp(name, "$meta") == 0;
    if (c->type == T_EXCLUSION && !is_meta)
        return mf_error_set(c->err, E_EXPR_IN_EXCLUSION,
                            "Cannot use expression other than $meta in exclusion projection");
    if (!is_meta)
        c->type = T_INCLUSION;
    if (strcmp(name, "$slice") == 0) {
        /* ExpressionSlice takes 2 or 3 arguments; a non-array is one. */
        uint32_t nargs = 1;
        if (BSON_ITER_HOLDS_ARRAY(first)) {
            bson_t arr;
            doc_of(first, &arr);
            nargs = bson_count_keys(&arr);
        }
        if (nargs < 2 || nargs > 3)
            return mf_error_set(c->err, E_SLICE_ARITY,
                                "Expression $slice takes at least 2 arguments, and at most 3, "
                                "but %u were passed in.",
                                nargs);
    }
    pnode *n;
    /* A $meta field comes after the others, in an inclusion or an
     * exclusion (it decides neither, in find or in $project); $addFields'
     * are computed fields like any (replaced in place), the expression
     * reading the metadata. */
    int kind = is_meta && c->mode != MF_PROJ_ADD_FIELDS && BSON_ITER_HOLDS_UTF8(first)
                   ? mf_meta_kind_of(bson_iter_utf8(first, NULL))
                   : -1;
    if (kind >= 0) {
        bson_t spec;
        doc_of(value, &spec);
        if (bson_count_keys(&spec) == 1) { /* else the expression's own error */
            int rc = add_at_path(parent, path, P_META, &n, c->err);
            if (rc == 0)
                n->meta = kind;
            return rc;
        }
    }
    int rc = add_at_path(parent, path, P_EXPR, &n, c->err);
    return rc ? rc : compile_expression(c, n, value, path);
}

/* find's {$slice: n} or {$slice: [skip, limit]}. */
static int parse_find_slice(pctx *c, const char *path, const bson_iter_t *arg, pnode *parent)
{
    bool has_skip = false;
    int32_t skip = 0, limit;
    if (is_number(arg)) {
        limit = number_int(arg);
    } else if (BSON_ITER_HOLDS_ARRAY(arg)) {
        bson_t arr;
        bson_iter_t el, sk, li;
        doc_of(arg, &arr);
        if (bson_count_keys(&arr) != 2)
            return mf_error_set(c->err, E_SLICE_ARRAY,
                                "$slice array argument should be of form [skip, limit]");
        bson_iter_init(&el, &arr);
        bson_iter_next(&el);
        sk = el;
        bson_iter_next(&el);
        li = el;
        if (!is_number(&sk))
            return mf_error_set(c->err, E_SLICE_SKIP,
                                "$slice expects the skip argument to be a number, got %s",
                                mf_bsonx_type_alias(bson_iter_type(&sk)));
        if (!is_number(&li))
            return mf_error_set(c->err, E_SLICE_LIMIT_TYPE,
                                "$slice expects the limit argument to be a number, got %s",
                                mf_bsonx_type_alias(bson_iter_type(&li)));
        limit = number_int(&li);
        if (limit <= 0)
            return mf_error_set(c->err, E_SLICE_LIMIT, "$slice limit must be positive, got %d",
                                (int)limit);
        has_skip = true;
        skip = number_int(&sk);
    } else {
        return mf_error_set(c->err, E_SLICE_TYPE,
                            "$slice only supports numbers and [skip, limit] arrays");
    }
    pnode *n;
    int rc = add_at_path(parent, path, P_SLICE, &n, c->err);
    if (rc)
        return rc;
    n->has_skip = has_skip;
    n->skip = skip;
    n->limit = limit;
    c->has_find_slice = true;
    return 0;
}

/* {$slice: ...}: find's form, else the aggregation expression; when both
 * fail, mongod's combined message with the expression's code. */
static int parse_slice(pctx *c, const char *path, const bson_t *sub, const bson_iter_t *first,
                       const bson_iter_t *value, pnode *parent)
{
    mf_error *err = c->err, find_err, expr_err;
    c->err = &find_err;
    int rc = parse_find_slice(c, path, first, parent);
    c->err = err;
    if (rc == 0)
        return 0;
    if (rc == MF_InternalError)
        return mf_error_set(err, rc, "%s", find_err.msg);
    c->err = &expr_err;
    rc = parse_generic_expression(c, path, first, value, parent);
    c->err = err;
    if (rc == MF_NotImplemented || rc == MF_InternalError)
        return mf_error_set(err, rc, "%s", expr_err.msg);
    char spec[160], status[200];
    mf_bsonx_to_string(sub, spec, sizeof spec);
    status_string(&find_err, status, sizeof status);
    return mf_error_set(err, rc,
                        "Invalid $slice syntax. The given syntax %s did not match the find() "
                        "syntax because :: %s :: The given syntax did not match the expression "
                        "$slice syntax. :: caused by :: %s",
                        spec, status, expr_err.msg);
}

/* {a: {$elemMatch: {...}}}: a matcher for {a: {$elemMatch: ...}}. */
static int parse_elem_match(pctx *c, const char *path, const bson_t *sub, const bson_iter_t *first,
                            pnode *parent)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(first))
        return mf_error_set(c->err, E_ELEMMATCH_ARG,
                            "elemMatch: Invalid argument, object required, but got %s",
                            mf_bsonx_type_alias(bson_iter_type(first)));
    if (c->has_positional)
        return mf_error_set(c->err, E_POS_AND_ELEMMATCH,
                            "Cannot specify positional operator and $elemMatch.");
    if (strchr(path, '.') || parent != &c->p->root)
        return mf_error_set(c->err, E_ELEMMATCH_NESTED,
                            "Cannot use $elemMatch projection on a nested field.");
    bson_t filter;
    mf_matcher *m = NULL;
    bson_init(&filter);
    bson_append_document(&filter, path, -1, sub);
    int rc = mf_matcher_parse_coll(&filter, NULL, c->coll, &m, c->err);
    bson_destroy(&filter);
    if (rc)
        return rc;
    pnode *n;
    if ((rc = add_at_path(parent, path, P_ELEMMATCH, &n, c->err)) != 0) {
        mf_matcher_free(m);
        return rc;
    }
    n->elem = m;
    c->has_elem_match = true;
    return 0;
}

static int parse_element(pctx *c, const bson_iter_t *it, pnode *parent, const char *parent_path);

/* {a: {...}}: a find operator, an expression, or a sub-projection. */
static int parse_sub_object(pctx *c, const char *key, const bson_iter_t *it, pnode *parent,
                            const char *parent_path)
{
    bson_t sub;
    bson_iter_t el;
    doc_of(it, &sub);
    if (bson_empty(&sub))
        return mf_error_set(c->err, E_EMPTY_SUBPROJECTION,
                            "An empty sub-projection is not a valid value. Found empty object "
                            "at path");
    int rc = mf_bsonx_field_path_check(key, strlen(key), c->err);
    if (rc)
        return rc;
    bson_iter_init(&el, &sub);
    bson_iter_next(&el);
    const char *first = bson_iter_key(&el);
    if (bson_count_keys(&sub) == 1 && first[0] == '$') {
        if (c->mode == MF_PROJ_FIND && strcmp(first, "$slice") == 0)
            return parse_slice(c, key, &sub, &el, it, parent);
        if (c->mode == MF_PROJ_FIND && strcmp(first, "$elemMatch") == 0)
            return parse_elem_match(c, key, &sub, &el, parent);
        if ((rc = parse_generic_expression(c, key, &el, it, parent)) != -1)
            return rc;
        mf_error ignored;
        if (mf_bsonx_field_path_check(first, strlen(first), &ignored) != 0)
            return mf_error_set(c->err, E_UNKNOWN_EXPR, "Unknown expression %s", first);
    }
    pnode *inner = inner_at_path(parent, key);
    if (!inner && (rc = add_at_path(parent, key, P_INNER, &inner, c->err)) != 0)
        return rc;
    size_t plen = parent_path ? strlen(parent_path) + 1 : 0;
    char *full = malloc(plen + strlen(key) + 1);
    if (!full)
        return oom(c->err);
    if (parent_path)
        sprintf(full, "%s.%s", parent_path, key);
    else
        strcpy(full, key);
    bson_iter_init(&el, &sub);
    while (rc == 0 && bson_iter_next(&el))
        rc = parse_element(c, &el, inner, full);
    free(full);
    return rc;
}

static int parse_inclusion(pctx *c, const char *key, pnode *parent, bool positional)
{
    bool top_id = strcmp(key, "_id") == 0 && parent == &c->p->root;
    pnode *n;
    int rc;
    if (!positional) {
        if ((rc = mf_bsonx_field_path_check(key, strlen(key), c->err)) != 0 ||
            (rc = add_at_path(parent, key, P_INCLUDE, &n, c->err)) != 0)
            return rc;
        c->id_included |= top_id;
    } else {
        if (c->has_positional)
            return mf_error_set(c->err, E_TWO_POSITIONAL,
                                "Cannot specify more than one positional projection per query.");
        if (c->has_elem_match)
            return mf_error_set(c->err, E_ELEMMATCH_AND_POS,
                                "Cannot specify positional operator and $elemMatch.");
        if (!c->filter)
            return mf_error_set(c->err, E_POS_NO_MATCHER,
                                "Projections with a positional operator require a matcher");
        size_t len = strlen(key);
        if (len <= 2)
            return mf_error_set(c->err, E_POS_BAD_FIELD, "Projection on field %s is invalid", key);
        char *path = strndup(key, len - 2);
        if (!path)
            return oom(c->err);
        if ((rc = mf_bsonx_field_path_check(path, strlen(path), c->err)) == 0)
            rc = add_at_path(parent, path, P_POSITIONAL, &n, c->err);
        free(path);
        if (rc)
            return rc;
        c->has_positional = true;
    }
    if (!top_id) {
        if (c->type == T_EXCLUSION)
            return mf_error_set(c->err, E_INCL_IN_EXCL,
                                "Cannot do inclusion on field %s in exclusion projection", key);
        c->type = T_INCLUSION;
    }
    return 0;
}

static int parse_exclusion(pctx *c, const char *key, pnode *parent)
{
    pnode *n;
    int rc;
    if ((rc = mf_bsonx_field_path_check(key, strlen(key), c->err)) != 0 ||
        (rc = add_at_path(parent, key, P_EXCLUDE, &n, c->err)) != 0)
        return rc;
    if (strcmp(key, "_id") == 0 && parent == &c->p->root) {
        c->id_excluded = true;
        return 0;
    }
    if (c->type == T_INCLUSION)
        return mf_error_set(c->err, E_EXCL_IN_INCL,
                            "Cannot do exclusion on field %s in inclusion projection", key);
    c->type = T_EXCLUSION;
    return 0;
}

/* {a: "x"}: a literal (computed) field: mongod's checks, then refused. */
static int parse_literal(pctx *c, const bson_iter_t *it, pnode *parent)
{
    const char *key = bson_iter_key(it);
    pnode *n;
    int rc;
    if ((rc = mf_bsonx_field_path_check(key, strlen(key), c->err)) != 0 ||
        (rc = add_at_path(parent, key, P_EXPR, &n, c->err)) != 0)
        return rc;
    if (c->type == T_EXCLUSION) {
        char elem[200];
        mf_bsonx_elem_to_string(it, true, elem, sizeof elem);
        return mf_error_set(c->err, E_LITERAL_IN_EXCLUSION,
                            "Cannot use an expression %s in an exclusion projection", elem);
    }
    c->type = T_INCLUSION;
    return compile_expression(c, n, it, key);
}

static int parse_element(pctx *c, const bson_iter_t *it, pnode *parent, const char *parent_path)
{
    const char *key = bson_iter_key(it);
    bool positional = has_suffix(key, ".$");
    if (strstr(key, ".$."))
        return mf_error_set(c->err, E_POS_IN_MIDDLE,
                            "As of 4.4, it's illegal to specify positional operator in the "
                            "middle of a path.Positional projection may only be used at the "
                            "end, for example: a.b.$. If the query previously used a form like "
                            "a.b.$.d, remove the parts following the '$' and the results will "
                            "be equivalent.");
    if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        if (positional)
            return mf_error_set(c->err, E_POS_WITH_OBJECT,
                                "positional projection cannot be used with an expression or sub "
                                "object");
        return parse_sub_object(c, key, it, parent, parent_path);
    }
    if (c->mode != MF_PROJ_FIND && positional)
        return mf_error_set(c->err, 31324,
                            "Cannot use positional projection in aggregation projection");
    if (c->mode == MF_PROJ_ADD_FIELDS)
        return parse_literal(c, it, parent);
    if (is_number(it) || BSON_ITER_HOLDS_BOOL(it)) {
        if (true_value(it))
            return parse_inclusion(c, key, parent, positional);
        if (positional)
            return mf_error_set(c->err, E_POS_WITH_EXCLUSION,
                                "positional projection cannot be used with exclusion");
        return parse_exclusion(c, key, parent);
    }
    if (positional)
        return mf_error_set(c->err, E_POS_WITH_LITERAL,
                            "positional projection cannot be used with a literal");
    return parse_literal(c, it, parent);
}

/* mongod's computeProjectionType: the type of a projection that named no
 * field other than _id. */
static ptype default_type(const pctx *c)
{
    if (c->has_find_slice)
        return c->id_included ? T_INCLUSION : T_EXCLUSION;
    if (c->has_elem_match)
        return T_INCLUSION;
    if (c->id_included)
        return T_INCLUSION;
    return T_EXCLUSION;
}

/* Mark the inner nodes on the positional leaf's path; returns whether
 * `n`'s subtree holds it. */
static bool mark_positional(pnode *n)
{
    bool on = n->kind == P_POSITIONAL;
    for (size_t i = 0; i < n->nkids; i++)
        on |= mark_positional(n->kids[i]);
    n->on_pos = n->kind == P_INNER && on;
    return on;
}

/* Mark the inner nodes with a computed field below them. */
static bool mark_expr(pnode *n)
{
    bool has = n->kind == P_EXPR;
    for (size_t i = 0; i < n->nkids; i++)
        has |= mark_expr(n->kids[i]);
    n->has_expr = n->kind == P_INNER && has;
    return has;
}

int mf_projection_parse(const bson_t *spec, const bson_t *filter, mf_projection **out,
                        mf_error *err)
{
    return mf_projection_parse_ex(spec, filter, NULL, MF_PROJ_FIND, out, err);
}

int mf_projection_parse_ex(const bson_t *spec, const bson_t *filter, const mf_expr_hooks *hooks,
                           mf_proj_mode mode, mf_projection **out, mf_error *err)
{
    return mf_projection_parse_coll(spec, filter, hooks, mode, NULL, out, err);
}

int mf_projection_parse_coll(const bson_t *spec, const bson_t *filter,
                             const mf_expr_hooks *hooks, mf_proj_mode mode,
                             const mf_collator *coll, mf_projection **out, mf_error *err)
{
    mf_projection *p = calloc(1, sizeof *p);
    if (!p)
        return oom(err);
    if (hooks) {
        p->hooks = *hooks;
        p->has_hooks = true;
    }
    p->mode = mode;
    pctx c = {.p = p, .filter = filter, .err = err, .hooks = hooks, .mode = mode, .coll = coll};
    bson_iter_t it;
    int rc = 0;
    bson_iter_init(&it, spec);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        c.id_specified |= strcmp(key, "_id") == 0 || strncmp(key, "_id.", 4) == 0;
        rc = parse_element(&c, &it, &p->root, NULL);
    }
    if (rc)
        goto fail;
    if (c.type == T_UNSET)
        c.type = default_type(&c);
    if (mode == MF_PROJ_ADD_FIELDS)
        c.type = T_INCLUSION;
    pnode *n;
    if (!c.id_specified && c.type == T_INCLUSION && mode != MF_PROJ_ADD_FIELDS &&
        (rc = add_at_path(&p->root, "_id", P_INCLUDE, &n, err)) != 0)
        goto fail;
    if (c.type == T_EXCLUSION && c.id_specified && c.id_included) {
        /* {_id: 1, a: 0}: legal, and _id is kept anyway. */
        for (size_t i = 0; i < p->root.nkids; i++) {
            if (strcmp(p->root.kids[i]->name, "_id") == 0) {
                pnode_clear(p->root.kids[i], p->has_hooks ? &p->hooks : NULL);
                free(p->root.kids[i]);
                memmove(&p->root.kids[i], &p->root.kids[i + 1],
                        (p->root.nkids - i - 1) * sizeof p->root.kids[0]);
                p->root.nkids--;
                break;
            }
        }
    }
    p->is_inclusion = c.type == T_INCLUSION;
    p->has_positional = c.has_positional;
    mark_positional(&p->root);
    mark_expr(&p->root);
    *out = p;
    return 0;
fail:
    mf_projection_free(p);
    return rc;
}

bool mf_projection_needs_pos(const mf_projection *p)
{
    return p->has_positional;
}

static bool simple_tree(const pnode *n)
{
    for (size_t i = 0; i < n->nkids; i++) {
        pkind k = n->kids[i]->kind;
        if (k != P_INNER && k != P_INCLUDE && k != P_EXCLUDE)
            return false;
        if (k == P_INNER && !simple_tree(n->kids[i]))
            return false;
    }
    return true;
}

bool mf_projection_keeps(const mf_projection *p, const char *path)
{
    if (!simple_tree(&p->root))
        return false;
    const pnode *node = &p->root;
    const char *comp = path;
    for (;;) {
        const char *dot = strchr(comp, '.');
        size_t len = dot ? (size_t)(dot - comp) : strlen(comp);
        const pnode *kid = find_kid(node, comp, len);
        if (!kid) {
            /* Not named: an exclusion keeps it; an inclusion drops it,
             * except the top-level _id it keeps by default. */
            if (!p->is_inclusion)
                return true;
            return node == &p->root && len == 3 && memcmp(comp, "_id", 3) == 0;
        }
        if (kid->kind == P_INCLUDE)
            return true;
        if (kid->kind == P_EXCLUDE)
            return false;
        /* P_INNER: some of what lies below is kept, some not. */
        if (!dot)
            return false;
        node = kid;
        comp = dot + 1;
    }
}

/* ----------------------------------------------------------- application */

typedef struct actx {
    const mf_projection *p;
    const bson_t *root; /* the whole document, for computed fields */
    int64_t pos;
    bson_t scratch; /* {name: [element]} for $elemMatch */
    mf_error *err;
    const mf_meta *meta; /* the row's metadata, or NULL */
} actx;

static int apply_level(actx *a, const pnode *node, const bson_t *doc, bson_t *out, bool slice_ok,
                       bool pos_live);

/* {name: {$meta: "<name>"}}: the row's metadata of that kind, or nothing
 * where the row has none (the caller refused the query before when mongod
 * would: 40218). */
static int append_meta(actx *a, const pnode *kid, bson_t *out)
{
    const bson_value_t *v = mf_meta_get(a->meta, (mf_meta_kind)kid->meta);
    if (v && !mf_bsonx_append_value(out, kid->name, -1, v))
        return mf_error_set(a->err, MF_BadValue, "projection result too large");
    return 0;
}

static void index_key(uint32_t i, char *buf, const char **key, size_t *len)
{
    *len = mf_uint32_to_key(i, key, buf, 16);
}

/* The elements of `node`'s array `arr`, projected, into the array `out`:
 * documents recursively, arrays as arrays, scalars dropped by an
 * inclusion and kept by an exclusion.  $slice never applies below an
 * array inside an array. */
static int apply_array(actx *a, const pnode *node, const bson_t *arr, bson_t *out, bool slice_ok)
{
    bson_iter_t el;
    uint32_t i = 0;
    char buf[16];
    const char *key;
    size_t klen;
    int rc = 0;
    bson_iter_init(&el, arr);
    while (rc == 0 && bson_iter_next(&el)) {
        bson_t sub, child;
        if (BSON_ITER_HOLDS_DOCUMENT(&el)) {
            doc_of(&el, &sub);
            index_key(i++, buf, &key, &klen);
            bson_append_document_begin(out, key, (int)klen, &child);
            rc = apply_level(a, node, &sub, &child, slice_ok, false);
            bson_append_document_end(out, &child);
        } else if (BSON_ITER_HOLDS_ARRAY(&el)) {
            doc_of(&el, &sub);
            index_key(i++, buf, &key, &klen);
            bson_append_array_begin(out, key, (int)klen, &child);
            rc = apply_array(a, node, &sub, &child, false);
            bson_append_array_end(out, &child);
        } else if (a->p->mode == MF_PROJ_ADD_FIELDS && node->has_expr) {
            /* $addFields through a scalar: a document of the computed
             * fields takes its place */
            bson_t empty = BSON_INITIALIZER;
            index_key(i++, buf, &key, &klen);
            bson_append_document_begin(out, key, (int)klen, &child);
            rc = apply_level(a, node, &empty, &child, false, false);
            bson_append_document_end(out, &child);
        } else if (!a->p->is_inclusion || a->p->mode == MF_PROJ_ADD_FIELDS) {
            index_key(i++, buf, &key, &klen);
            mf_bsonx_append_iter(out, key, (int)klen, &el);
        }
    }
    return rc;
}

/* find's $slice of the array `arr` into `out` under `key`. */
static void append_slice(const pnode *n, const bson_iter_t *value, bson_t *out)
{
    bson_t arr, child;
    bson_iter_t el;
    doc_of(value, &arr);
    int64_t len = bson_count_keys(&arr), start = 0, count;
    if (!n->has_skip) {
        if (n->limit < 0) {
            start = len + n->limit > 0 ? len + n->limit : 0;
            count = len - start;
        } else {
            count = n->limit < len ? n->limit : len;
        }
    } else {
        if (n->skip < 0)
            start = len + n->skip > 0 ? len + n->skip : 0;
        else
            start = n->skip < len ? n->skip : len;
        count = len - start < n->limit ? len - start : n->limit;
    }
    bson_append_array_begin(out, bson_iter_key(value), (int)bson_iter_key_len(value), &child);
    bson_iter_init(&el, &arr);
    for (int64_t i = 0; bson_iter_next(&el) && i < start + count; i++) {
        if (i < start)
            continue;
        char buf[16];
        const char *key;
        size_t klen;
        index_key((uint32_t)(i - start), buf, &key, &klen);
        mf_bsonx_append_iter(&child, key, (int)klen, &el);
    }
    bson_append_array_end(out, &child);
}

/* The positional projection of the (projected) array `arr`: [arr[pos]]
 * under `key`. */
static int append_positional(actx *a, const char *key, int klen, const bson_t *arr, bson_t *out)
{
    bson_iter_t el;
    if (a->pos < 0)
        return mf_error_set(a->err, E_POS_NO_MATCH,
                            "positional operator '.$' couldn't find a matching element in the "
                            "array");
    bson_iter_init(&el, arr);
    for (int64_t i = 0; bson_iter_next(&el); i++) {
        if (i == a->pos) {
            bson_t child;
            bson_append_array_begin(out, key, klen, &child);
            mf_bsonx_append_iter(&child, "0", 1, &el);
            bson_append_array_end(out, &child);
            return 0;
        }
    }
    return mf_error_set(a->err, E_POS_MISMATCH, "positional operator '.$' element mismatch");
}

/* $elemMatch: [the first element of the array `value` that matches], or
 * nothing. */
static void append_elem_match(actx *a, const pnode *n, const bson_iter_t *value, bson_t *out)
{
    bson_t arr, child;
    bson_iter_t el;
    if (!BSON_ITER_HOLDS_ARRAY(value))
        return;
    doc_of(value, &arr);
    bson_iter_init(&el, &arr);
    while (bson_iter_next(&el)) {
        /* The element alone in an array: {name: {$elemMatch: q}} matches
         * {name: [e]} exactly when e matches q, in both of $elemMatch's
         * forms (object and value). */
        bson_reinit(&a->scratch);
        bson_append_array_begin(&a->scratch, n->name, -1, &child);
        mf_bsonx_append_iter(&child, "0", 1, &el);
        bson_append_array_end(&a->scratch, &child);
        if (mf_matcher_match(n->elem, &a->scratch)) {
            bson_append_array_begin(out, bson_iter_key(value), (int)bson_iter_key_len(value),
                                    &child);
            mf_bsonx_append_iter(&child, "0", 1, &el);
            bson_append_array_end(out, &child);
            return;
        }
    }
}

/* An inner node's value: a document is projected, an array element by
 * element (and, on the positional path, reduced to [element at pos]); a
 * scalar is dropped by an inclusion and kept by an exclusion. */
static int apply_inner(actx *a, const pnode *kid, const bson_iter_t *it, bson_t *out,
                       bool slice_ok, bool pos_live)
{
    const char *key = bson_iter_key(it);
    int klen = (int)bson_iter_key_len(it);
    bson_t sub, child;
    int rc = 0;
    if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        doc_of(it, &sub);
        bson_append_document_begin(out, key, klen, &child);
        rc = apply_level(a, kid, &sub, &child, slice_ok, pos_live);
        bson_append_document_end(out, &child);
    } else if (BSON_ITER_HOLDS_ARRAY(it)) {
        doc_of(it, &sub);
        if (pos_live && kid->on_pos) {
            /* The first array on the positional path: project it, then
             * keep the element the query matched. */
            bson_t projected;
            bson_init(&projected);
            rc = apply_array(a, kid, &sub, &projected, slice_ok);
            if (rc == 0)
                rc = append_positional(a, key, klen, &projected, out);
            bson_destroy(&projected);
        } else {
            bson_append_array_begin(out, key, klen, &child);
            rc = apply_array(a, kid, &sub, &child, slice_ok);
            bson_append_array_end(out, &child);
        }
    } else if (a->p->mode == MF_PROJ_ADD_FIELDS && kid->has_expr) {
        bson_t empty = BSON_INITIALIZER;
        bson_append_document_begin(out, key, klen, &child);
        rc = apply_level(a, kid, &empty, &child, slice_ok, false);
        bson_append_document_end(out, &child);
    } else if (!a->p->is_inclusion || a->p->mode == MF_PROJ_ADD_FIELDS) {
        mf_bsonx_append_iter(out, key, klen, it);
    }
    return rc;
}

/* A computed field: evaluated against the whole document and appended
 * under `name`, or nothing when the value is missing. */
static int append_computed(actx *a, const pnode *kid, const char *name, int nlen, bson_t *out)
{
    const mf_expr_hooks *h = &a->p->hooks;
    bson_value_t v;
    int rc = h->eval(kid->expr, a->root, a->meta, h->arg, &v, a->err);
    if (rc)
        return rc;
    if (v.value_type != BSON_TYPE_EOD)
        mf_bsonx_append_value(out, name, nlen, &v);
    h->free_value(&v);
    return 0;
}

static int apply_level(actx *a, const pnode *node, const bson_t *doc, bson_t *out, bool slice_ok,
                       bool pos_live)
{
    bool incl = a->p->is_inclusion;
    bool add = a->p->mode == MF_PROJ_ADD_FIELDS;
    bson_iter_t it;
    int rc = 0;
    bson_iter_init(&it, doc);
    while (rc == 0 && bson_iter_next(&it)) {
        const pnode *kid = find_kid(node, bson_iter_key(&it), bson_iter_key_len(&it));
        if (!kid) {
            if (!incl || add)
                mf_bsonx_append_iter(out, NULL, 0, &it);
            continue;
        }
        switch (kid->kind) {
        case P_INCLUDE:
            mf_bsonx_append_iter(out, NULL, 0, &it);
            break;
        case P_EXCLUDE:
            break;
        case P_META:
            break; /* replaced by the metadata, after the others (below) */
        case P_EXPR:
            /* $addFields replaces a field in place; $project adds its
             * computed fields after the others (below) */
            if (add)
                rc = append_computed(a, kid, bson_iter_key(&it), (int)bson_iter_key_len(&it), out);
            break;
        case P_ELEMMATCH:
            if (!incl) /* in place; an inclusion appends it after the others */
                append_elem_match(a, kid, &it, out);
            break;
        case P_SLICE:
            if (slice_ok && BSON_ITER_HOLDS_ARRAY(&it))
                append_slice(kid, &it, out);
            else
                mf_bsonx_append_iter(out, NULL, 0, &it);
            break;
        case P_POSITIONAL:
            if (pos_live && BSON_ITER_HOLDS_ARRAY(&it)) {
                bson_t arr;
                doc_of(&it, &arr);
                rc = append_positional(a, bson_iter_key(&it), (int)bson_iter_key_len(&it), &arr,
                                       out);
            } else {
                mf_bsonx_append_iter(out, NULL, 0, &it);
            }
            break;
        case P_INNER:
            rc = apply_inner(a, kid, &it, out, slice_ok, pos_live);
            break;
        }
    }
    for (size_t i = 0; rc == 0 && i < node->nkids; i++)
        if (node->kids[i]->kind == P_META)
            rc = append_meta(a, node->kids[i], out);
    if (rc || !incl)
        return rc;
    for (size_t i = 0; rc == 0 && i < node->nkids; i++) {
        const pnode *kid = node->kids[i];
        if (kid->kind == P_ELEMMATCH && bson_iter_init_find(&it, doc, kid->name)) {
            append_elem_match(a, kid, &it, out);
        } else if (kid->kind == P_EXPR) {
            if (!add || !bson_iter_init_find(&it, doc, kid->name))
                rc = append_computed(a, kid, kid->name, -1, out);
        } else if (kid->kind == P_INNER && kid->has_expr) {
            /* computed fields below a field the document lacks (or, for
             * $project, had as a scalar and dropped): a new document */
            bool present = bson_iter_init_find(&it, doc, kid->name);
            if (present && (add || BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)))
                continue;
            bson_t empty = BSON_INITIALIZER, child;
            bson_append_document_begin(out, kid->name, -1, &child);
            rc = apply_level(a, kid, &empty, &child, slice_ok, false);
            bson_append_document_end(out, &child);
        }
    }
    return rc;
}

int mf_projection_apply(const mf_projection *p, const bson_t *doc, int64_t pos, bson_t *out,
                        mf_error *err)
{
    return mf_projection_apply_meta(p, doc, pos, NULL, out, err);
}

static uint32_t meta_needs(const mf_projection *p, const pnode *n)
{
    uint32_t needs = 0;
    if (n->kind == P_META)
        needs |= MF_META_BIT(n->meta);
    if (n->kind == P_EXPR && n->expr && p->hooks.meta_kinds)
        needs |= p->hooks.meta_kinds(n->expr);
    for (size_t i = 0; i < n->nkids; i++)
        needs |= meta_needs(p, n->kids[i]);
    return needs;
}

bool mf_projection_is_inclusion(const mf_projection *p)
{
    return p && p->is_inclusion;
}

uint32_t mf_projection_meta_needs(const mf_projection *p)
{
    return p ? meta_needs(p, &p->root) : 0;
}

int mf_projection_apply_meta(const mf_projection *p, const bson_t *doc, int64_t pos,
                             const mf_meta *meta, bson_t *out, mf_error *err)
{
    actx a = {.p = p, .root = doc, .pos = pos, .err = err, .meta = meta};
    bson_init(out);
    bson_init(&a.scratch);
    int rc = apply_level(&a, &p->root, doc, out, true, true);
    bson_destroy(&a.scratch);
    return rc;
}
