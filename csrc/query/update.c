/*
 * update.c -- update documents: the operators ($set, $inc, $push, ...), the
 * replacement form, and the seed document of an upsert.
 *
 * Parse.  An operator update becomes a tree, as mongod's UpdateObjectNode:
 *
 *     OBJ   an element reached by a field name; children by name, plus at
 *           most one positional child ("$")
 *     ARR   an array whose elements are chosen by $[] or $[id]; children
 *           by identifier ("" for $[])
 *     LEAF  one operator on one path
 *
 * Children are kept in mongod's order (pathsupport::cmpPathsAndArrayIndexes:
 * field names lexicographically, canonical numbers numerically).  That
 * order is the order operators apply in, which decides which error is
 * reported first and where new fields land: fields the update creates are
 * appended to their document in that order; existing fields keep their
 * place.  Two operators on one path, or on a path and its prefix, are
 * ConflictingUpdateOperators (40) at parse time.
 *
 * Apply.  The new document is rebuilt, not edited in place: each OBJ node
 * computes a result for each child (unchanged, removed, or a new value),
 * then copies its element with those results spliced in.  An unchanged
 * subtree is copied as bytes.  The result of a node on an element is one of
 *
 *     R_SAME    the element as it was (or still missing)
 *     R_REMOVE  the element goes ($unset; null inside an array)
 *     R_VALUE   `val` holds {"": new value}
 *     R_DOC     `val` is the new document itself
 *     R_ARR     `val` is the new array itself
 *
 * Paths.  Below an element that exists, a missing component is created by
 * the operators that create ($set, $inc, $push, ...) and is a no-op for the
 * others ($unset, $pop, $pull, $pullAll).  A component under a scalar, or a
 * field name under an array, is "not viable": PathNotViable (28), worded as
 * mongod words it for each case.
 *
 * $rename reads its source from the original document before anything is
 * applied (paths cannot conflict, so no other operator touches it), then
 * acts as a $set at the target and an $unset at the source.
 */
#include "query_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Error codes this file reports that the shared table does not name. */
enum {
    FailedToParse = 9,
    PathNotViable = 28,
    CannotBackfillArray = 34,
    ConflictingUpdateOperators = 40,
    DollarPrefixedFieldName = 52,
    InvalidIdField = 53,
    NotSingleValueField = 54,
    EmptyFieldName = 56,
    ImmutableField = 66,
    DocumentTooLarge = 17419,
};

#define MAX_DOC_SIZE (16 * 1024 * 1024)
#define MAX_PADDING 1500000 /* pathsupport::kMaxPaddingAllowed */
#define STR_CAP 256         /* rendered values inside messages */

typedef enum {
    OP_SET, OP_UNSET, OP_INC, OP_MUL, OP_MIN, OP_MAX, OP_RENAME_TO, OP_RENAME_FROM,
    OP_CURRENT_DATE, OP_SET_ON_INSERT, OP_PUSH, OP_ADD_TO_SET, OP_POP, OP_PULL,
    OP_PULL_ALL, OP_BIT,
} op_kind;

static const struct {
    const char *name;
    op_kind op;
} op_names[] = {
    {"$set", OP_SET}, {"$unset", OP_UNSET}, {"$inc", OP_INC}, {"$mul", OP_MUL},
    {"$min", OP_MIN}, {"$max", OP_MAX}, {"$rename", OP_RENAME_TO},
    {"$currentDate", OP_CURRENT_DATE}, {"$setOnInsert", OP_SET_ON_INSERT},
    {"$push", OP_PUSH}, {"$addToSet", OP_ADD_TO_SET}, {"$pop", OP_POP},
    {"$pull", OP_PULL}, {"$pullAll", OP_PULL_ALL}, {"$bit", OP_BIT},
};

typedef enum { K_OBJ, K_ARR, K_LEAF } node_kind;
typedef enum { PULL_EQ, PULL_WRAPPED, PULL_OBJECT } pull_kind;
typedef enum { SORT_NONE, SORT_WHOLE, SORT_PATTERN } sort_kind;

typedef struct unode unode;
struct unode {
    node_kind kind;
    /* OBJ and ARR */
    char **names;
    unode **kids;
    size_t nkids;
    unode *positional; /* OBJ: the "$" child */
    bool is_view;      /* made by merge(): owns its arrays and view kids only */
    /* LEAF */
    op_kind op;
    char *path;        /* as written, for messages */
    bson_iter_t arg;   /* the operand, inside mf_update.spec */
    size_t rename;     /* OP_RENAME_*: index into mf_update.renames */
    bool has_each;     /* $push / $addToSet: arg is the $each array */
    int64_t slice;     /* $push */
    bool has_slice;
    int64_t position;
    sort_kind sort;
    int sort_dir;
    bson_iter_t sort_pattern;
    pull_kind pull;
    mf_matcher *matcher;
    const mf_collator *coll; /* the update's collation: $addToSet, $pull,
                                $pullAll, $min, $max, $push's $sort */
    bool pop_front;
    bool date_is_ts;
};

typedef struct afilter {
    char *id;
    mf_matcher *m;
    bool used;
} afilter;

typedef struct rename_pair {
    char *from, *to;
} rename_pair;

struct mf_update {
    bson_t *spec; /* owned copy of the update; leaves point into it */
    mf_collator *coll; /* one reference, or NULL (simple) */
    bool is_replacement;
    bool needs_pos;
    unode *root;
    afilter *filters;
    size_t nfilters;
    rename_pair *renames;
    size_t nrenames;
};

/* `n` zeroed elements of `size` bytes for structs that hold a bson_t or a
 * bson_iter_t, which libbson declares 128-byte aligned (calloc's is not
 * enough: UBSan reports it). */
static void *calloc_bson(size_t n, size_t size)
{
    void *p = NULL;
    size_t total = (n ? n : 1) * size;
    if (posix_memalign(&p, 128, total) != 0)
        return NULL;
    return memset(p, 0, total);
}

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

/* ----------------------------------------------------------- small helpers */

static bool is_number_type(bson_type_t t)
{
    return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
           t == BSON_TYPE_DECIMAL128;
}

static const char *type_name(const bson_iter_t *it)
{
    return mf_bsonx_type_alias(bson_iter_type(it));
}

/* "name: value" as BSONElement::toString. */
static void elem_str(const bson_iter_t *it, char *out)
{
    mf_bsonx_elem_to_string(it, true, out, STR_CAP);
}

/* A canonical array index: digits only, below 2^31. */
static bool parse_index(const char *s, uint32_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return false;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > INT32_MAX)
            return false;
    }
    *out = (uint32_t)v;
    return true;
}

/* pathsupport::cmpPathsAndArrayIndexes as a three-way compare: names
 * lexicographically, except that names starting with a digit (and not
 * zero-padded) order by length first, so numbers go numerically. */
static int field_cmp(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    bool da = la && a[0] >= '0' && a[0] <= '9' && !(a[0] == '0' && la > 1);
    bool db = lb && b[0] >= '0' && b[0] <= '9' && !(b[0] == '0' && lb > 1);
    if (da && db && la != lb)
        return la < lb ? -1 : 1;
    return strcmp(a, b);
}

static bool is_array_filter_part(const char *p)
{
    size_t n = strlen(p);
    return n >= 3 && p[0] == '$' && p[1] == '[' && p[n - 1] == ']';
}

/* Split a dotted path into parts (pointers into `*copy`, which the caller
 * frees).  Returns the number of parts, or -1 on out of memory. */
static int split_path(const char *path, char **copy, char ***parts)
{
    size_t n = 1;
    for (const char *p = path; *p; p++)
        n += *p == '.';
    *copy = strdup(path);
    *parts = calloc(n, sizeof **parts);
    if (!*copy || !*parts) {
        free(*copy);
        free(*parts);
        return -1;
    }
    char *s = *copy;
    for (size_t i = 0; i < n; i++) {
        (*parts)[i] = s;
        char *dot = strchr(s, '.');
        if (dot) {
            *dot = '\0';
            s = dot + 1;
        }
    }
    return (int)n;
}

/* ------------------------------------------------------------ tree nodes */

static unode *node_new(node_kind k)
{
    unode *n = calloc_bson(1, sizeof *n);
    if (n)
        n->kind = k;
    return n;
}

static void node_free(unode *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nkids; i++) {
        free(n->names[i]);
        node_free(n->kids[i]);
    }
    free(n->names);
    free(n->kids);
    node_free(n->positional);
    free(n->path);
    mf_matcher_free(n->matcher);
    free(n);
}

/* A view made by merge(): shares names and nodes with the tree and with
 * other views, so views are freed all at once, at the end of an apply. */
static void view_free(unode *v)
{
    free(v->names);
    free(v->kids);
    free(v);
}

typedef struct views {
    unode **v;
    size_t n, cap;
} views;

static bool views_add(views *vs, unode *v)
{
    if (vs->n == vs->cap) {
        size_t cap = vs->cap ? vs->cap * 2 : 8;
        unode **nv = realloc(vs->v, cap * sizeof *nv);
        if (!nv)
            return false;
        vs->v = nv;
        vs->cap = cap;
    }
    vs->v[vs->n++] = v;
    return true;
}

static void views_free(views *vs)
{
    for (size_t i = 0; i < vs->n; i++)
        view_free(vs->v[i]);
    free(vs->v);
}

static unode *child_get(const unode *n, const char *name)
{
    if (n->kind == K_OBJ && strcmp(name, "$") == 0)
        return n->positional;
    for (size_t i = 0; i < n->nkids; i++)
        if (strcmp(n->names[i], name) == 0)
            return n->kids[i];
    return NULL;
}

/* Insert `kid` under `name`, keeping the children in field_cmp order.
 * Takes ownership of `kid` (freed on failure). */
static int child_set(unode *n, const char *name, unode *kid, mf_error *err)
{
    if (n->kind == K_OBJ && strcmp(name, "$") == 0) {
        n->positional = kid;
        return 0;
    }
    char *copy = strdup(name);
    char **names = realloc(n->names, (n->nkids + 1) * sizeof *names);
    if (names)
        n->names = names;
    unode **kids = realloc(n->kids, (n->nkids + 1) * sizeof *kids);
    if (kids)
        n->kids = kids;
    if (!copy || !names || !kids) {
        free(copy);
        node_free(kid);
        return oom(err);
    }
    size_t at = n->nkids;
    while (at > 0 && field_cmp(n->names[at - 1], name) > 0) {
        n->names[at] = n->names[at - 1];
        n->kids[at] = n->kids[at - 1];
        at--;
    }
    n->names[at] = copy;
    n->kids[at] = kid;
    n->nkids++;
    return 0;
}

/* ------------------------------------------------------------ leaf parsing */

/* MatchExpressionParser::parseIntegerElementToLong. */
static int parse_long(const bson_iter_t *it, int64_t *out, mf_error *err)
{
    char s[STR_CAP];
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: *out = bson_iter_int32(it); return 0;
    case BSON_TYPE_INT64: *out = bson_iter_int64(it); return 0;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: {
        double d;
        if (BSON_ITER_HOLDS_DOUBLE(it)) {
            d = bson_iter_double(it);
        } else {
            bson_decimal128_t dec;
            char buf[BSON_DECIMAL128_STRING];
            bson_iter_decimal128(it, &dec);
            bson_decimal128_to_string(&dec, buf);
            d = strtod(buf, NULL);
        }
        elem_str(it, s);
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
            return mf_error_set(err, FailedToParse, "Cannot represent as a 64-bit integer: %s", s);
        if (d != floor(d))
            return mf_error_set(err, FailedToParse, "Expected an integer: %s", s);
        *out = (int64_t)d;
        return 0;
    }
    default:
        elem_str(it, s);
        return mf_error_set(err, FailedToParse, "Expected a number in: %s", s);
    }
}

static int parse_push(unode *n, const bson_iter_t *it, mf_error *err)
{
    bson_iter_t each;
    n->slice = INT64_MAX;
    n->position = INT64_MAX;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &each) ||
        !bson_iter_find(&each, "$each"))
        return 0; /* the value itself is pushed */
    bool seen[4] = {false, false, false, false};
    static const char *const clauses[4] = {"$each", "$slice", "$sort", "$position"};
    bson_iter_t c;
    bson_iter_recurse(it, &c);
    while (bson_iter_next(&c)) {
        const char *k = bson_iter_key(&c);
        int i;
        for (i = 0; i < 4 && strcmp(k, clauses[i]) != 0; i++)
            ;
        if (i == 4)
            return mf_error_set(err, MF_BadValue, "Unrecognized clause in $push: %s", k);
        if (seen[i])
            return mf_error_set(err, MF_BadValue, "Only one %s is supported.", k);
        seen[i] = true;
        if (i == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&c))
                return mf_error_set(err, MF_BadValue,
                                    "The argument to $each in $push must be an array but it "
                                    "was of type: %s", type_name(&c));
            n->has_each = true;
            n->arg = c;
        } else if (i == 1) {
            mf_error ignored;
            if (!is_number_type(bson_iter_type(&c)) || parse_long(&c, &n->slice, &ignored))
                return mf_error_set(err, MF_BadValue,
                                    "The value for $slice must be an integer value but was "
                                    "given type: %s", type_name(&c));
            n->has_slice = true;
        } else if (i == 3) {
            mf_error ignored;
            if (!is_number_type(bson_iter_type(&c)) || parse_long(&c, &n->position, &ignored))
                return mf_error_set(err, MF_BadValue,
                                    "The value for $position must be an integer value, not "
                                    "of type: %s", type_name(&c));
        } else if (BSON_ITER_HOLDS_DOCUMENT(&c)) {
            bson_iter_t p;
            bson_iter_recurse(&c, &p);
            bool any = false;
            while (bson_iter_next(&p)) {
                any = true;
                double d = is_number_type(bson_iter_type(&p)) ? bson_iter_as_double(&p) : 0;
                if (d != 1 && d != -1)
                    return mf_error_set(err, MF_BadValue,
                                        "The $sort element value must be either 1 or -1");
                const char *f = bson_iter_key(&p);
                if (!*f)
                    return mf_error_set(err, MF_BadValue, "The $sort field cannot be empty");
                size_t fl = strlen(f);
                if (f[0] == '.' || f[fl - 1] == '.' || strstr(f, ".."))
                    return mf_error_set(err, MF_BadValue,
                                        "The $sort field is a dotted field but has an empty "
                                        "part: %s", f);
            }
            if (!any)
                return mf_error_set(err, MF_BadValue,
                                    "The $sort pattern is empty when it should be a set of "
                                    "fields.");
            n->sort = SORT_PATTERN;
            n->sort_pattern = c;
        } else if (is_number_type(bson_iter_type(&c))) {
            double d = bson_iter_as_double(&c);
            if (d != 1 && d != -1)
                return mf_error_set(err, MF_BadValue,
                                    "The $sort element value must be either 1 or -1");
            n->sort = SORT_WHOLE;
            n->sort_dir = d < 0 ? -1 : 1;
        } else {
            return mf_error_set(err, MF_BadValue,
                                "The $sort is invalid: use 1/-1 to sort the whole element, or "
                                "{field:1/-1} to sort embedded fields");
        }
    }
    return 0;
}

/* Whether `k` is an operator that a $pull condition applies to the element
 * itself (MatchExpressionParser::parsePathAcceptingKeyword). */
static bool is_path_keyword(const char *k)
{
    static const char *const kw[] = {
        "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$type",
        "$mod", "$regex", "$options", "$size", "$all", "$elemMatch", "$not",
        "$bitsAllSet", "$bitsAnySet", "$bitsAllClear", "$bitsAnyClear", "$geoWithin",
        "$geoIntersects", "$near", "$nearSphere", "$within", "$_internalSchemaType"};
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
        if (strcmp(k, kw[i]) == 0)
            return true;
    return false;
}

static int parse_pull(unode *n, const bson_iter_t *it, mf_error *err)
{
    bson_t cond;
    int rc;
    if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_t first;
        bson_iter_document(it, &len, &data);
        bson_init_static(&cond, data, len);
        bson_iter_init(&first, &cond);
        if (!bson_iter_next(&first) || !is_path_keyword(bson_iter_key(&first))) {
            n->pull = PULL_OBJECT;
            return mf_matcher_parse_coll(&cond, NULL, n->coll, &n->matcher, err);
        }
    } else if (!BSON_ITER_HOLDS_REGEX(it)) {
        n->pull = PULL_EQ;
        return 0;
    }
    /* A condition on the element itself: matched as {"": element}. */
    n->pull = PULL_WRAPPED;
    bson_init(&cond);
    mf_bsonx_append_iter(&cond, "", 0, it);
    rc = mf_matcher_parse_coll(&cond, NULL, n->coll, &n->matcher, err);
    bson_destroy(&cond);
    return rc;
}

static int parse_bit(const bson_iter_t *it, mf_error *err)
{
    char s[STR_CAP];
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_BadValue,
                            "The $bit modifier is not compatible with a %s. You must pass in an "
                            "embedded document: {$bit: {field: {and/or/xor: #}}",
                            type_name(it));
    bson_iter_t op;
    bson_iter_recurse(it, &op);
    int count = 0;
    while (bson_iter_next(&op)) {
        const char *k = bson_iter_key(&op);
        elem_str(&op, s);
        if (strcmp(k, "and") != 0 && strcmp(k, "or") != 0 && strcmp(k, "xor") != 0)
            return mf_error_set(err, MF_BadValue,
                                "The $bit modifier only supports 'and', 'or', and 'xor', not "
                                "'%s' which is an unknown operator: {%s}", k, s);
        if (!BSON_ITER_HOLDS_INT32(&op) && !BSON_ITER_HOLDS_INT64(&op))
            return mf_error_set(err, MF_BadValue,
                                "The $bit modifier field must be an Integer(32/64 bit); a '%s' "
                                "is not supported here: {%s}", type_name(&op), s);
        count++;
    }
    if (count == 0)
        return mf_error_set(err, MF_BadValue,
                            "You must pass in at least one bitwise operation. The format is: "
                            "{$bit: {field: {and/or/xor: #}}");
    return 0;
}

static int parse_current_date(unode *n, const bson_iter_t *it, mf_error *err)
{
    if (BSON_ITER_HOLDS_BOOL(it))
        return 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_BadValue,
                            "%s is not valid type for $currentDate. Please use a boolean "
                            "('true') or a $type expression ({$type: 'timestamp/date'}).",
                            type_name(it));
    bson_iter_t o;
    bool valid = false;
    bson_iter_recurse(it, &o);
    while (bson_iter_next(&o)) {
        if (strcmp(bson_iter_key(&o), "$type") != 0)
            return mf_error_set(err, MF_BadValue, "Unrecognized $currentDate option: %s",
                                bson_iter_key(&o));
        if (BSON_ITER_HOLDS_UTF8(&o)) {
            const char *t = bson_iter_utf8(&o, NULL);
            if (strcmp(t, "date") == 0) {
                n->date_is_ts = false;
                valid = true;
            } else if (strcmp(t, "timestamp") == 0) {
                n->date_is_ts = true;
                valid = true;
            }
        }
    }
    if (!valid)
        return mf_error_set(err, MF_BadValue,
                            "The '$type' string field is required to be 'date' or "
                            "'timestamp': {$currentDate: {field : {$type: 'date'}}}");
    return 0;
}

/* Check and keep the operand `it` of operator `op` in leaf `n`. */
static int parse_leaf(unode *n, op_kind op, const bson_iter_t *it, mf_error *err)
{
    char s[STR_CAP];
    n->op = op;
    n->arg = *it;
    switch (op) {
    case OP_INC:
    case OP_MUL:
        if (!is_number_type(bson_iter_type(it))) {
            elem_str(it, s);
            return mf_error_set(err, MF_TypeMismatch, "Cannot %s with non-numeric argument: {%s}",
                                op == OP_INC ? "increment" : "multiply", s);
        }
        return 0;
    case OP_CURRENT_DATE: return parse_current_date(n, it, err);
    case OP_PUSH: return parse_push(n, it, err);
    case OP_ADD_TO_SET: {
        bson_iter_t first;
        if (BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &first) &&
            bson_iter_next(&first) && strcmp(bson_iter_key(&first), "$each") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&first))
                return mf_error_set(err, MF_TypeMismatch,
                                    "The argument to $each in $addToSet must be an array but it "
                                    "was of type %s", type_name(&first));
            bson_iter_t more = first;
            if (bson_iter_next(&more)) {
                uint32_t len;
                const uint8_t *data;
                bson_t d;
                bson_iter_document(it, &len, &data);
                bson_init_static(&d, data, len);
                mf_bsonx_to_string(&d, s, sizeof s);
                return mf_error_set(err, MF_BadValue,
                                    "Found unexpected fields after $each in $addToSet: %s", s);
            }
            n->has_each = true;
            n->arg = first;
        }
        return 0;
    }
    case OP_POP: {
        int64_t v;
        int rc = parse_long(it, &v, err);
        if (rc)
            return rc;
        if (v != 1 && v != -1)
            return mf_error_set(err, FailedToParse, "$pop expects 1 or -1, found: %" PRId64, v);
        n->pop_front = v == -1;
        return 0;
    }
    case OP_PULL: return parse_pull(n, it, err);
    case OP_PULL_ALL:
        if (!BSON_ITER_HOLDS_ARRAY(it))
            return mf_error_set(err, MF_BadValue,
                                "$pullAll requires an array argument but was given a %s",
                                type_name(it));
        return 0;
    case OP_BIT: return parse_bit(it, err);
    default: return 0;
    }
}

/* ------------------------------------------------------------ tree parsing */

static afilter *find_filter(mf_update *u, const char *id, size_t len)
{
    for (size_t i = 0; i < u->nfilters; i++)
        if (u->filters[i].id && strlen(u->filters[i].id) == len &&
            memcmp(u->filters[i].id, id, len) == 0)
            return &u->filters[i];
    return NULL;
}

/* fieldchecker::isUpdatable and the positional rules, for `path`. */
static int check_path(const char *path, char **parts, int nparts, mf_error *err)
{
    if (!*path)
        return mf_error_set(err, EmptyFieldName, "An empty update path is not valid.");
    int npos = 0, first = -1;
    for (int i = 0; i < nparts; i++) {
        if (!*parts[i])
            return mf_error_set(err, EmptyFieldName,
                                "The update path '%s' contains an empty field name, which is "
                                "not allowed.", path);
        if (strcmp(parts[i], "$") == 0 && npos++ == 0)
            first = i;
    }
    if (npos > 1)
        return mf_error_set(err, MF_BadValue,
                            "Too many positional (i.e. '$') elements found in path '%s'", path);
    if (npos && first == 0)
        return mf_error_set(err, MF_BadValue,
                            "Cannot have positional (i.e. '$') element in the first position in "
                            "path '%s'", path);
    return 0;
}

/* The name a path part takes in the tree: its identifier for $[id]. */
static int part_name(mf_update *u, const char *path, char *part, int i, const char **name,
                     mf_error *err)
{
    if (!is_array_filter_part(part)) {
        *name = part;
        return 0;
    }
    if (i == 0)
        return mf_error_set(err, MF_BadValue,
                            "Cannot have array filter identifier (i.e. '$[<id>]') element in the "
                            "first position in path '%s'", path);
    size_t len = strlen(part) - 3;
    if (len) {
        afilter *f = find_filter(u, part + 2, len);
        if (!f)
            return mf_error_set(err, MF_BadValue,
                                "No array filter found for identifier '%.*s' in path '%s'",
                                (int)len, part + 2, path);
        f->used = true;
    }
    part[strlen(part) - 1] = '\0'; /* "$[id]" -> "id" */
    *name = part + 2;
    return 0;
}

/* Add `leaf` at `path` (UpdateObjectNode::parseAndMerge).  Takes `leaf`. */
static int add_path(mf_update *u, const char *path, unode *leaf, mf_error *err)
{
    char *copy, **parts;
    int n = split_path(path, &copy, &parts), rc = 0;
    if (n < 0) {
        node_free(leaf);
        return oom(err);
    }
    rc = check_path(path, parts, n, err);
    for (int i = 0; i < n && rc == 0; i++)
        if (strcmp(parts[i], "$") == 0)
            u->needs_pos = true;
    unode *cur = u->root;
    for (int i = 0; i + 1 < n && rc == 0; i++) {
        bool next_arr = is_array_filter_part(parts[i + 1]);
        const char *name;
        rc = part_name(u, path, parts[i], i, &name, err);
        if (rc)
            break;
        unode *kid = child_get(cur, name);
        if (kid && kid->kind != (next_arr ? K_ARR : K_OBJ)) {
            int len = (int)(parts[i + 1] - 1 - copy);
            rc = mf_error_set(err, ConflictingUpdateOperators,
                              "Updating the path '%s' would create a conflict at '%.*s'", path,
                              len, path);
        } else if (!kid) {
            kid = node_new(next_arr ? K_ARR : K_OBJ);
            rc = kid ? child_set(cur, name, kid, err) : oom(err);
        }
        cur = kid;
    }
    if (rc == 0) {
        const char *name;
        rc = part_name(u, path, parts[n - 1], n - 1, &name, err);
        if (rc == 0 && child_get(cur, name))
            rc = mf_error_set(err, ConflictingUpdateOperators,
                              "Updating the path '%s' would create a conflict at '%s'", path,
                              path);
        if (rc == 0) {
            rc = child_set(cur, name, leaf, err);
            leaf = NULL;
        }
    }
    node_free(leaf);
    free(copy);
    free(parts);
    return rc;
}

static bool is_prefix_path(const char *a, const char *b) /* a is a prefix of b */
{
    size_t la = strlen(a);
    return strncmp(a, b, la) == 0 && (b[la] == '\0' || b[la] == '.');
}

static bool is_dynamic(const char *path)
{
    char *copy, **parts;
    int n = split_path(path, &copy, &parts);
    bool dyn = false;
    for (int i = 0; i < n; i++)
        dyn |= strcmp(parts[i], "$") == 0 || is_array_filter_part(parts[i]);
    free(copy);
    free(parts);
    return dyn;
}

static int parse_rename(mf_update *u, const bson_iter_t *it, mf_error *err)
{
    const char *from = bson_iter_key(it);
    char s[STR_CAP];
    unode *ph = node_new(K_LEAF);
    if (!ph)
        return oom(err);
    ph->op = OP_RENAME_FROM;
    ph->rename = u->nrenames;
    int rc = add_path(u, from, ph, err);
    if (rc)
        return rc;
    elem_str(it, s);
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mf_error_set(err, MF_BadValue, "The 'to' field for $rename must be a string: %s",
                            s);
    uint32_t tlen;
    const char *to = bson_iter_utf8(it, &tlen);
    if (strlen(to) != tlen)
        return mf_error_set(err, MF_BadValue,
                            "The 'to' field for $rename cannot contain an embedded null byte");
    if (strcmp(from, to) == 0)
        return mf_error_set(err, MF_BadValue,
                            "The source and target field for $rename must differ: %s", s);
    if (is_prefix_path(from, to) || is_prefix_path(to, from))
        return mf_error_set(err, MF_BadValue,
                            "The source and target field for $rename must not be on the same "
                            "path: %s", s);
    if (is_dynamic(from))
        return mf_error_set(err, MF_BadValue, "The source field for $rename may not be dynamic: %s",
                            from);
    if (is_dynamic(to))
        return mf_error_set(err, MF_BadValue,
                            "The destination field for $rename may not be dynamic: %s", to);
    rename_pair *v = realloc(u->renames, (u->nrenames + 1) * sizeof *v);
    if (!v)
        return oom(err);
    u->renames = v;
    v[u->nrenames].from = strdup(from);
    v[u->nrenames].to = strdup(to);
    u->nrenames++;
    if (!v[u->nrenames - 1].from || !v[u->nrenames - 1].to)
        return oom(err);
    unode *leaf = node_new(K_LEAF);
    if (!leaf)
        return oom(err);
    leaf->op = OP_RENAME_TO;
    leaf->rename = u->nrenames - 1;
    leaf->path = strdup(to);
    return add_path(u, to, leaf, err);
}

/* The identifier of an array filter: the first component of its field
 * names, through $and/$or/$nor.  `*id` is NULL when there is none. */
static int filter_identifier(const bson_t *f, const char **id, size_t *idlen, mf_error *err)
{
    bson_iter_t it;
    bson_iter_init(&it, f);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const char *cand = NULL;
        size_t clen = 0;
        if (k[0] == '$') {
            if ((strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0) &&
                BSON_ITER_HOLDS_ARRAY(&it)) {
                bson_iter_t el;
                bson_iter_recurse(&it, &el);
                while (bson_iter_next(&el)) {
                    if (!BSON_ITER_HOLDS_DOCUMENT(&el))
                        continue;
                    uint32_t len;
                    const uint8_t *data;
                    bson_t sub;
                    bson_iter_document(&el, &len, &data);
                    bson_init_static(&sub, data, len);
                    int rc = filter_identifier(&sub, id, idlen, err);
                    if (rc)
                        return rc;
                }
            }
            continue;
        }
        const char *dot = strchr(k, '.');
        cand = k;
        clen = dot ? (size_t)(dot - k) : strlen(k);
        if (*id && (*idlen != clen || memcmp(*id, cand, clen) != 0))
            return mf_error_set(err, FailedToParse,
                                "Error parsing array filter :: caused by :: Expected a single "
                                "top-level field name, found '%.*s' and '%.*s'",
                                (int)*idlen, *id, (int)clen, cand);
        *id = cand;
        *idlen = clen;
    }
    return 0;
}

static int parse_filters(mf_update *u, const bson_t *array_filters, mf_error *err)
{
    bson_iter_t it;
    size_t count = 0;
    bson_iter_init(&it, array_filters);
    while (bson_iter_next(&it))
        count++;
    u->filters = calloc(count ? count : 1, sizeof *u->filters);
    if (!u->filters)
        return oom(err);
    bson_iter_init(&it, array_filters);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return mf_error_set(err, MF_TypeMismatch,
                                "BSON field 'arrayFilters.%s' is the wrong type '%s', expected "
                                "type 'object'", bson_iter_key(&it), type_name(&it));
        uint32_t len;
        const uint8_t *data;
        bson_t f;
        bson_iter_document(&it, &len, &data);
        bson_init_static(&f, data, len);
        afilter *af = &u->filters[u->nfilters];
        int rc = mf_matcher_parse_coll(&f, NULL, u->coll, &af->m, err);
        if (rc) {
            char msg[MF_ERRMSG_MAX];
            snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
            return mf_error_set(err, rc, "Error parsing array filter :: caused by :: %s", msg);
        }
        u->nfilters++;
        const char *id = NULL;
        size_t idlen = 0;
        rc = filter_identifier(&f, &id, &idlen, err);
        if (rc)
            return rc;
        if (!id)
            return mf_error_set(err, FailedToParse,
                                "Cannot use an expression without a top-level field name in "
                                "arrayFilters");
        bool ok = idlen > 0 && id[0] >= 'a' && id[0] <= 'z';
        for (size_t i = 0; i < idlen; i++)
            ok &= (id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
                  (id[i] >= '0' && id[i] <= '9');
        if (!ok)
            return mf_error_set(err, MF_BadValue,
                                "Error parsing array filter :: caused by :: The top-level field "
                                "name must be an alphanumeric string beginning with a lowercase "
                                "letter, found '%.*s'", (int)idlen, id);
        if (find_filter(u, id, idlen))
            return mf_error_set(err, FailedToParse,
                                "Found multiple array filters with the same top-level field "
                                "name %.*s", (int)idlen, id);
        af->id = strndup(id, idlen);
        if (!af->id)
            return oom(err);
    }
    return 0;
}

static int parse_replacement(mf_update *u, mf_error *err)
{
    bson_iter_t it;
    u->is_replacement = true;
    bson_iter_init(&it, u->spec);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k[0] == '$')
            return mf_error_set(err, DollarPrefixedFieldName,
                                "The dollar ($) prefixed field '%s' in '%s' is not allowed in "
                                "the context of an update's replacement document. Consider using "
                                "an aggregation pipeline with $replaceWith.", k, k);
        if (strcmp(k, "_id") == 0) {
            bson_type_t t = bson_iter_type(&it);
            if (t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX || t == BSON_TYPE_UNDEFINED)
                return mf_error_set(err, InvalidIdField, "The '_id' value cannot be of type %s",
                                    type_name(&it));
        }
    }
    return 0;
}

static int parse_operators(mf_update *u, mf_error *err)
{
    bson_iter_t mod;
    char s[STR_CAP];
    bson_iter_init(&mod, u->spec);
    while (bson_iter_next(&mod)) {
        const char *k = bson_iter_key(&mod);
        size_t i;
        for (i = 0; i < sizeof op_names / sizeof op_names[0]; i++)
            if (strcmp(k, op_names[i].name) == 0)
                break;
        if (i == sizeof op_names / sizeof op_names[0])
            return mf_error_set(err, FailedToParse,
                                "Unknown modifier: %s. Expected a valid update modifier or "
                                "pipeline-style update specified as an array", k);
        if (!BSON_ITER_HOLDS_DOCUMENT(&mod)) {
            elem_str(&mod, s);
            return mf_error_set(err, FailedToParse,
                                "Modifiers operate on fields but we found type %s instead. For "
                                "example: {$mod: {<field>: ...}} not {%s}", type_name(&mod), s);
        }
        /* An empty operand is allowed: since 5.0 it is a no-op. */
        bson_iter_t field;
        bson_iter_recurse(&mod, &field);
        while (bson_iter_next(&field)) {
            int rc;
            if (op_names[i].op == OP_RENAME_TO) {
                rc = parse_rename(u, &field, err);
            } else {
                unode *leaf = node_new(K_LEAF);
                if (!leaf)
                    return oom(err);
                leaf->path = strdup(bson_iter_key(&field));
                leaf->coll = u->coll;
                rc = leaf->path ? parse_leaf(leaf, op_names[i].op, &field, err) : oom(err);
                if (rc)
                    node_free(leaf);
                else
                    rc = add_path(u, bson_iter_key(&field), leaf, err);
            }
            if (rc)
                return rc;
        }
    }
    for (size_t f = 0; f < u->nfilters; f++) {
        if (!u->filters[f].used) {
            char up[STR_CAP];
            mf_bsonx_to_string(u->spec, up, sizeof up);
            return mf_error_set(err, FailedToParse,
                                "The array filter for identifier '%s' was not used in the "
                                "update %s", u->filters[f].id, up);
        }
    }
    return 0;
}

int mf_update_parse(const bson_t *update, const bson_t *array_filters, mf_update **out,
                    mf_error *err)
{
    return mf_update_parse_coll(update, array_filters, NULL, out, err);
}

int mf_update_parse_coll(const bson_t *update, const bson_t *array_filters,
                         const mf_collator *coll, mf_update **out, mf_error *err)
{
    mf_update *u = calloc(1, sizeof *u);
    int rc;
    *out = NULL;
    if (!u || !(u->spec = bson_copy(update)) || !(u->root = node_new(K_OBJ))) {
        mf_update_free(u);
        return oom(err);
    }
    u->coll = mf_collator_ref(coll);
    /* mongod parses the arrayFilters before the update itself. */
    rc = array_filters ? parse_filters(u, array_filters, err) : 0;
    if (rc == 0) {
        bson_iter_t first;
        bson_iter_init(&first, u->spec);
        if (bson_iter_next(&first) && bson_iter_key(&first)[0] == '$')
            rc = parse_operators(u, err);
        else
            rc = parse_replacement(u, err);
    }
    if (rc) {
        mf_update_free(u);
        return rc;
    }
    *out = u;
    return 0;
}

bool mf_update_is_replacement(const mf_update *u)
{
    return u->is_replacement;
}

bool mf_update_needs_pos(const mf_update *u)
{
    return u->needs_pos;
}

void mf_update_free(mf_update *u)
{
    if (!u)
        return;
    node_free(u->root);
    for (size_t i = 0; i < u->nfilters; i++) {
        free(u->filters[i].id);
        mf_matcher_free(u->filters[i].m);
    }
    free(u->filters);
    for (size_t i = 0; i < u->nrenames; i++) {
        free(u->renames[i].from);
        free(u->renames[i].to);
    }
    free(u->renames);
    if (u->spec)
        bson_destroy(u->spec);
    mf_collator_unref(u->coll);
    free(u);
}

/* ================================================================ numbers */

/* A number as mongod's SafeNum reads it for decimal arithmetic
 * (SafeNum::getDecimal): an integer exactly, a double rounded to 15
 * significant digits (Decimal128(double, kRoundTo15Digits)), a decimal as
 * it is.  The arithmetic itself is bsonx's (mf_dec_add, mf_dec_mul), the
 * Intel library's, as mongod's. */
static mf_dec dec_of(const bson_iter_t *it)
{
    mf_dec d;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64: return mf_dec_from_int64(bson_iter_as_int64(it));
    case BSON_TYPE_DOUBLE: return mf_dec_from_double(bson_iter_double(it));
    case BSON_TYPE_DECIMAL128: bson_iter_decimal128(it, &d); return d;
    default: return mf_dec_from_int64(0); /* not reached: both operands are numbers */
    }
}

/* SafeNum::debugString: "(NumberLong)9223372036854775807". */
static void num_debug(const bson_iter_t *it, char *out, size_t cap)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: snprintf(out, cap, "(NumberInt)%d", bson_iter_int32(it)); break;
    case BSON_TYPE_INT64:
        snprintf(out, cap, "(NumberLong)%" PRId64, bson_iter_int64(it));
        break;
    case BSON_TYPE_DOUBLE: snprintf(out, cap, "(NumberDouble)%.17g", bson_iter_double(it)); break;
    default: {
        bson_decimal128_t d;
        char s[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &d);
        bson_decimal128_to_string(&d, s);
        snprintf(out, cap, "(NumberDecimal)%s", s);
    }
    }
}

/* a + b or a * b with SafeNum's types: decimal if either is, else double
 * if either is, else int32 if both are and it fits, else int64.  Appends
 * {"": result} to `dst`; false when int64 overflows. */
static bool arith(bool mul, const bson_iter_t *a, const bson_iter_t *b, bson_t *dst)
{
    bson_type_t ta = bson_iter_type(a), tb = bson_iter_type(b);
    if (ta == BSON_TYPE_DECIMAL128 || tb == BSON_TYPE_DECIMAL128) {
        mf_dec r = mul ? mf_dec_mul(dec_of(a), dec_of(b)) : mf_dec_add(dec_of(a), dec_of(b));
        bson_append_decimal128(dst, "", 0, &r);
        return true;
    }
    if (ta == BSON_TYPE_DOUBLE || tb == BSON_TYPE_DOUBLE) {
        double x = bson_iter_as_double(a), y = bson_iter_as_double(b);
        bson_append_double(dst, "", 0, mul ? x * y : x + y);
        return true;
    }
    int64_t x = bson_iter_as_int64(a), y = bson_iter_as_int64(b), r;
    bool over = mul ? __builtin_mul_overflow(x, y, &r) : __builtin_add_overflow(x, y, &r);
    if (ta == BSON_TYPE_INT32 && tb == BSON_TYPE_INT32 && r >= INT32_MIN && r <= INT32_MAX) {
        bson_append_int32(dst, "", 0, (int32_t)r);
        return true;
    }
    if (over)
        return false;
    bson_append_int64(dst, "", 0, r);
    return true;
}

/* ================================================================= apply */

typedef enum { R_SAME, R_REMOVE, R_VALUE, R_DOC, R_ARR } res_state;

typedef struct res {
    res_state state;
    bson_t val;
} res;

typedef struct src_value {
    bool found;
    bson_t val; /* {"": value} */
} src_value;

typedef struct actx {
    const mf_update *u;
    const bson_t *doc;
    bool is_insert;
    int64_t pos;
    int64_t now_ms;
    mf_error *err;
    src_value *src; /* one per rename */
    views *views;    /* made by merges during this apply */
} actx;

/* Where the walk is: the dotted path of the current element, the name of
 * its nearest array ancestor, whether it is _id or below it. */
typedef struct where {
    char path[1024];
    size_t len;
    const char *arr;
    bool under_id;
} where;

static size_t path_push(where *w, const char *name)
{
    size_t old = w->len;
    int n = snprintf(w->path + w->len, sizeof w->path - w->len, "%s%s", w->len ? "." : "",
                     name);
    if (n > 0)
        w->len = w->len + (size_t)n < sizeof w->path ? w->len + (size_t)n : sizeof w->path - 1;
    return old;
}

static void path_pop(where *w, size_t old)
{
    w->len = old;
    w->path[old] = '\0';
}

static void res_init(res *r)
{
    r->state = R_SAME;
    bson_init(&r->val);
}

/* "{_id: 1}" for messages, or "{no id}" when it has none. */
static void id_braced(const actx *c, char *out, size_t cap)
{
    bson_iter_t id;
    char s[STR_CAP];
    if (bson_iter_init_find(&id, c->doc, "_id"))
        elem_str(&id, s);
    else
        snprintf(s, sizeof s, "no id");
    snprintf(out, cap, "{%s}", s);
}

static void id_plain(const actx *c, char *out)
{
    bson_iter_t id;
    if (bson_iter_init_find(&id, c->doc, "_id"))
        elem_str(&id, out);
    else
        snprintf(out, STR_CAP, "no id");
}

static bool leaf_creates(const actx *c, const unode *n)
{
    switch (n->op) {
    case OP_UNSET: case OP_POP: case OP_PULL: case OP_PULL_ALL: case OP_RENAME_FROM:
        return false;
    case OP_RENAME_TO: return c->src[n->rename].found;
    case OP_SET_ON_INSERT: return c->is_insert;
    default: return true;
    }
}

/* ---- merging (UpdateNode::createUpdateNodeByMerging) ---- */

static int merge(const actx *c, unode *a, unode *b, where *w, unode **out);

static int merge_into(const actx *c, unode *v, unode *a, unode *b, where *w)
{
    size_t cap = a->nkids + b->nkids;
    v->names = calloc(cap ? cap : 1, sizeof *v->names);
    v->kids = calloc(cap ? cap : 1, sizeof *v->kids);
    if (!v->names || !v->kids)
        return oom(c->err);
    size_t i = 0, j = 0;
    while (i < a->nkids || j < b->nkids) {
        int cmp = i == a->nkids ? 1 : j == b->nkids ? -1 : field_cmp(a->names[i], b->names[j]);
        if (cmp < 0) {
            v->names[v->nkids] = a->names[i];
            v->kids[v->nkids++] = a->kids[i++];
        } else if (cmp > 0) {
            v->names[v->nkids] = b->names[j];
            v->kids[v->nkids++] = b->kids[j++];
        } else {
            char part[300];
            if (a->kind == K_ARR)
                snprintf(part, sizeof part, "$[%s]", a->names[i]);
            else
                snprintf(part, sizeof part, "%s", a->names[i]);
            size_t old = path_push(w, part);
            unode *m;
            int rc = merge(c, a->kids[i], b->kids[j], w, &m);
            path_pop(w, old);
            if (rc)
                return rc;
            v->names[v->nkids] = a->names[i];
            v->kids[v->nkids++] = m;
            i++;
            j++;
        }
    }
    if (a->positional && b->positional) {
        size_t old = path_push(w, "$");
        int rc = merge(c, a->positional, b->positional, w, &v->positional);
        path_pop(w, old);
        return rc;
    }
    v->positional = a->positional ? a->positional : b->positional;
    return 0;
}

static int merge(const actx *c, unode *a, unode *b, where *w, unode **out)
{
    *out = NULL;
    if (a->kind != b->kind || a->kind == K_LEAF)
        return mf_error_set(c->err, ConflictingUpdateOperators,
                            "Update created a conflict at '%s'", w->path);
    unode *v = node_new(a->kind);
    if (!v)
        return oom(c->err);
    v->is_view = true;
    if (!views_add(c->views, v)) {
        view_free(v);
        return oom(c->err);
    }
    int rc = merge_into(c, v, a, b, w);
    if (rc == 0)
        *out = v;
    return rc;
}

/* The children of OBJ node `n` as they apply here: the positional child
 * takes the matched index as its name, merged with a child of that name.
 * A merge, when needed, is registered in the context's views. */
typedef struct kidlist {
    const char **names;
    unode **kids;
    size_t n;
    unode *merged;
    char pos_name[24];
} kidlist;

static void kids_free(kidlist *k)
{
    free(k->names);
    free(k->kids);
}

static int kids_of(const actx *c, const unode *n, where *w, kidlist *k)
{
    memset(k, 0, sizeof *k);
    size_t cap = n->nkids + 1;
    k->names = calloc(cap, sizeof *k->names);
    k->kids = calloc(cap, sizeof *k->kids);
    if (!k->names || !k->kids)
        return oom(c->err);
    bool placed = n->positional == NULL;
    if (!placed) {
        if (c->pos < 0)
            return mf_error_set(c->err, MF_BadValue,
                                "The positional operator did not find the match needed from the "
                                "query.");
        snprintf(k->pos_name, sizeof k->pos_name, "%" PRId64, c->pos);
    }
    for (size_t i = 0; i < n->nkids; i++) {
        int cmp = placed ? -1 : field_cmp(n->names[i], k->pos_name);
        if (cmp == 0) {
            size_t old = path_push(w, k->pos_name);
            int rc = merge(c, n->positional, n->kids[i], w, &k->merged);
            path_pop(w, old);
            if (rc)
                return rc;
            k->names[k->n] = n->names[i];
            k->kids[k->n++] = k->merged;
            placed = true;
            continue;
        }
        if (cmp > 0) {
            k->names[k->n] = k->pos_name;
            k->kids[k->n++] = n->positional;
            placed = true;
        }
        k->names[k->n] = n->names[i];
        k->kids[k->n++] = n->kids[i];
    }
    if (!placed) {
        k->names[k->n] = k->pos_name;
        k->kids[k->n++] = n->positional;
    }
    return 0;
}

/* ---- leaves ---- */

/* An iterator in an array of iterators.  libbson over-aligns bson_iter_t
 * through its typedef, which GCC does not round its size up to, so a bare
 * bson_iter_t[] has misaligned elements; a struct member gets padded. */
typedef struct slot {
    bson_iter_t it;
} slot;

static int build_array(bson_t *dst, const slot *items, size_t n)
{
    bson_t arr;
    char keybuf[16];
    const char *key;
    bson_append_array_begin(dst, "", 0, &arr);
    for (size_t i = 0; i < n; i++) {
        mf_uint32_to_key((uint32_t)i, &key, keybuf, sizeof keybuf);
        mf_bsonx_append_iter(&arr, key, -1, &items[i].it);
    }
    bson_append_array_end(dst, &arr);
    return 0;
}

/* The values an array iterator holds, into a fresh vector. */
static slot *collect(const bson_iter_t *arr, size_t extra, size_t *n)
{
    bson_iter_t el;
    size_t count = 0;
    *n = 0;
    if (arr) {
        bson_iter_recurse(arr, &el);
        while (bson_iter_next(&el))
            count++;
    }
    slot *v = calloc_bson(count + extra + 1, sizeof *v);
    if (v && arr) {
        bson_iter_recurse(arr, &el);
        while (bson_iter_next(&el))
            v[(*n)++].it = el;
    }
    return v;
}

/* The sort key of `el` for field `path` of a $push $sort pattern: the
 * dotted field of a document element, else missing (null). */
static bool sort_key(const bson_iter_t *el, const char *path, bson_iter_t *out)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(el))
        return false;
    bson_iter_t child;
    bson_iter_recurse(el, &child);
    return bson_iter_find_descendant(&child, path, out);
}

static int null_cmp(const bson_iter_t *a, bool ha, const bson_iter_t *b, bool hb,
                    const mf_collator *coll)
{
    static const uint8_t null_doc[] = {8, 0, 0, 0, BSON_TYPE_NULL, 0, 0, 0};
    bson_t nb;
    bson_iter_t nul;
    bson_init_static(&nb, null_doc, sizeof null_doc);
    bson_iter_init(&nul, &nb);
    bson_iter_next(&nul);
    return mf_bsonx_compare_values_coll(ha ? a : &nul, hb ? b : &nul, coll);
}

static int push_cmp(const unode *n, const bson_iter_t *a, const bson_iter_t *b)
{
    if (n->sort == SORT_WHOLE)
        return n->sort_dir * mf_bsonx_compare_values_coll(a, b, n->coll);
    bson_iter_t p;
    bson_iter_recurse(&n->sort_pattern, &p);
    while (bson_iter_next(&p)) {
        bson_iter_t ka, kb;
        bool ha = sort_key(a, bson_iter_key(&p), &ka), hb = sort_key(b, bson_iter_key(&p), &kb);
        int c = null_cmp(&ka, ha, &kb, hb, n->coll);
        if (c)
            return bson_iter_as_double(&p) < 0 ? -c : c;
    }
    return 0;
}

/* Stable merge sort of `v` by the $push $sort of `n`. */
static void push_sort(const unode *n, slot *v, slot *tmp, size_t len)
{
    if (len < 2)
        return;
    size_t mid = len / 2;
    push_sort(n, v, tmp, mid);
    push_sort(n, v + mid, tmp, len - mid);
    size_t i = 0, j = mid, k = 0;
    while (i < mid && j < len)
        tmp[k++] = push_cmp(n, &v[j].it, &v[i].it) < 0 ? v[j++] : v[i++];
    while (i < mid)
        tmp[k++] = v[i++];
    while (j < len)
        tmp[k++] = v[j++];
    memcpy(v, tmp, len * sizeof *v);
}

/* $push onto `cur` (an array, or NULL to create one). */
static int do_push(const actx *c, const unode *n, const bson_iter_t *cur, res *r)
{
    size_t nold, nnew = 0;
    bson_iter_t el;
    if (n->has_each) {
        bson_iter_recurse(&n->arg, &el);
        while (bson_iter_next(&el))
            nnew++;
    } else {
        nnew = 1;
    }
    slot *v = collect(cur, nnew, &nold);
    slot *tmp = calloc_bson(nold + nnew + 1, sizeof *tmp);
    if (!v || !tmp) {
        free(v);
        free(tmp);
        return oom(c->err);
    }
    /* PushNode::insertElementsWithPosition */
    int64_t size = (int64_t)nold, at;
    if (size == 0 || n->position > size)
        at = size;
    else if (n->position >= 0)
        at = n->position;
    else if (-n->position < size)
        at = size + n->position;
    else
        at = 0;
    memmove(v + at + nnew, v + at, (size_t)(size - at) * sizeof *v);
    if (n->has_each) {
        size_t i = (size_t)at;
        bson_iter_recurse(&n->arg, &el);
        while (bson_iter_next(&el))
            v[i++].it = el;
    } else {
        v[at].it = n->arg;
    }
    size_t len = nold + nnew;
    if (n->sort != SORT_NONE)
        push_sort(n, v, tmp, len);
    size_t keep = len, from = 0;
    if (n->has_slice) {
        uint64_t lim = n->slice == INT64_MIN ? (uint64_t)INT64_MAX
                                             : (uint64_t)(n->slice < 0 ? -n->slice : n->slice);
        if (len > lim) {
            keep = (size_t)lim;
            from = n->slice >= 0 ? 0 : len - keep;
        }
    }
    build_array(&r->val, v + from, keep);
    r->state = R_VALUE;
    free(v);
    free(tmp);
    return 0;
}

static int do_add_to_set(const actx *c, const unode *n, const bson_iter_t *cur, res *r)
{
    size_t nold, nadd = 0;
    bson_iter_t el;
    if (n->has_each) {
        bson_iter_recurse(&n->arg, &el);
        while (bson_iter_next(&el))
            nadd++;
    } else {
        nadd = 1;
    }
    slot *v = collect(cur, nadd, &nold);
    if (!v)
        return oom(c->err);
    size_t len = nold;
    bson_iter_t one = n->arg;
    if (n->has_each)
        bson_iter_recurse(&n->arg, &el);
    for (size_t k = 0; k < nadd; k++) {
        if (n->has_each)
            bson_iter_next(&el);
        const bson_iter_t *cand = n->has_each ? &el : &one;
        bool dup = false;
        for (size_t i = 0; i < len && !dup; i++)
            dup = mf_bsonx_compare_values_coll(&v[i].it, cand, n->coll) == 0;
        if (!dup)
            v[len++].it = *cand;
    }
    if (cur && len == nold) {
        free(v);
        return 0; /* nothing new */
    }
    build_array(&r->val, v, len);
    r->state = R_VALUE;
    free(v);
    return 0;
}

static bool pull_matches(const unode *n, const bson_iter_t *el)
{
    switch (n->pull) {
    case PULL_EQ: return mf_bsonx_compare_values_coll(el, &n->arg, n->coll) == 0;
    case PULL_OBJECT: {
        if (!BSON_ITER_HOLDS_DOCUMENT(el))
            return false;
        uint32_t len;
        const uint8_t *data;
        bson_t d;
        bson_iter_document(el, &len, &data);
        bson_init_static(&d, data, len);
        return mf_matcher_match(n->matcher, &d);
    }
    case PULL_WRAPPED: {
        bson_t d;
        bson_init(&d);
        mf_bsonx_append_iter(&d, "", 0, el);
        bool m = mf_matcher_match(n->matcher, &d);
        bson_destroy(&d);
        return m;
    }
    }
    return false;
}

static int do_pull(const actx *c, const unode *n, const bson_iter_t *cur, res *r)
{
    size_t nold, len = 0;
    slot *v = collect(cur, 0, &nold);
    if (!v)
        return oom(c->err);
    for (size_t i = 0; i < nold; i++) {
        bool drop = false;
        if (n->op == OP_PULL) {
            drop = pull_matches(n, &v[i].it);
        } else {
            bson_iter_t x;
            bson_iter_recurse(&n->arg, &x);
            while (!drop && bson_iter_next(&x))
                drop = mf_bsonx_compare_values_coll(&v[i].it, &x, n->coll) == 0;
        }
        if (!drop)
            v[len++] = v[i];
    }
    if (len != nold) {
        build_array(&r->val, v, len);
        r->state = R_VALUE;
    }
    free(v);
    return 0;
}

/* $bit's operations over `x` (int32 or int64), appended as {"": result}. */
static void do_bit(const unode *n, int64_t x, bool wide, bson_t *dst)
{
    bson_iter_t op;
    bson_iter_recurse(&n->arg, &op);
    while (bson_iter_next(&op)) {
        int64_t y = bson_iter_as_int64(&op);
        wide |= BSON_ITER_HOLDS_INT64(&op);
        const char *k = bson_iter_key(&op);
        x = k[0] == 'a' ? (x & y) : k[0] == 'o' ? (x | y) : (x ^ y);
        if (!wide)
            x = (int32_t)x;
    }
    if (wide)
        bson_append_int64(dst, "", 0, x);
    else
        bson_append_int32(dst, "", 0, (int32_t)x);
}

static void current_date(const actx *c, const unode *n, bson_t *dst)
{
    if (n->date_is_ts) /* the second, and increment 1 (there is no oplog clock) */
        bson_append_timestamp(dst, "", 0, (uint32_t)(c->now_ms / 1000), 1);
    else
        bson_append_date_time(dst, "", 0, c->now_ms);
}

/* A leaf whose path does not exist (below a viable parent). */
static int leaf_missing(const actx *c, const unode *n, res *r)
{
    if (!leaf_creates(c, n))
        return 0;
    bson_t *v = &r->val;
    bson_iter_t zero_it;
    bson_t zero;
    r->state = R_VALUE;
    switch (n->op) {
    case OP_SET: case OP_SET_ON_INSERT: case OP_INC: case OP_MIN: case OP_MAX:
        mf_bsonx_append_iter(v, "", 0, &n->arg);
        return 0;
    case OP_MUL: /* the operand's type, value zero */
        bson_init(&zero);
        bson_append_int32(&zero, "", 0, 0);
        bson_iter_init(&zero_it, &zero);
        bson_iter_next(&zero_it);
        arith(true, &n->arg, &zero_it, v);
        bson_destroy(&zero);
        return 0;
    case OP_CURRENT_DATE: current_date(c, n, v); return 0;
    case OP_PUSH: return do_push(c, n, NULL, r);
    case OP_ADD_TO_SET: return do_add_to_set(c, n, NULL, r);
    case OP_BIT: do_bit(n, 0, false, v); return 0;
    case OP_RENAME_TO: {
        bson_iter_t s;
        bson_iter_init(&s, &c->src[n->rename].val);
        bson_iter_next(&s);
        mf_bsonx_append_iter(v, "", 0, &s);
        return 0;
    }
    default: r->state = R_SAME; return 0;
    }
}

/* A leaf on the existing element `cur`, named in `w`. */
static int leaf_existing(const actx *c, const unode *n, const bson_iter_t *cur, where *w,
                         res *r)
{
    char s[STR_CAP], id[STR_CAP + 8];
    const char *field = bson_iter_key(cur);
    bson_t *v = &r->val;
    int rc = 0;
    r->state = R_VALUE;
    switch (n->op) {
    case OP_SET_ON_INSERT:
        if (!c->is_insert) {
            r->state = R_SAME;
            return 0;
        }
        /* fall through */
    case OP_SET: mf_bsonx_append_iter(v, "", 0, &n->arg); break;
    case OP_UNSET: r->state = R_REMOVE; break;
    case OP_INC:
    case OP_MUL:
        if (!is_number_type(bson_iter_type(cur))) {
            id_braced(c, id, sizeof id);
            return mf_error_set(c->err, MF_TypeMismatch,
                                "Cannot apply %s to a value of non-numeric type. %s has the "
                                "field '%s' of non-numeric type %s",
                                n->op == OP_INC ? "$inc" : "$mul", id, field, type_name(cur));
        }
        if (!arith(n->op == OP_MUL, cur, &n->arg, v)) {
            id_braced(c, id, sizeof id);
            num_debug(cur, s, sizeof s);
            return mf_error_set(c->err, MF_BadValue,
                                "Failed to apply %s operations to current value (%s) for "
                                "document %s", n->op == OP_INC ? "$inc" : "$mul", s, id);
        }
        break;
    case OP_MIN:
    case OP_MAX: {
        int cmp = mf_bsonx_compare_values_coll(&n->arg, cur, n->coll);
        if ((n->op == OP_MIN && cmp < 0) || (n->op == OP_MAX && cmp > 0))
            mf_bsonx_append_iter(v, "", 0, &n->arg);
        else
            r->state = R_SAME;
        break;
    }
    case OP_CURRENT_DATE: current_date(c, n, v); break;
    case OP_PUSH:
        if (!BSON_ITER_HOLDS_ARRAY(cur)) {
            id_braced(c, id, sizeof id);
            return mf_error_set(c->err, MF_BadValue,
                                "The field '%s' must be an array but is of type %s in document "
                                "%s", w->path, type_name(cur), id);
        }
        r->state = R_SAME;
        rc = do_push(c, n, cur, r);
        break;
    case OP_ADD_TO_SET:
        if (!BSON_ITER_HOLDS_ARRAY(cur))
            return mf_error_set(c->err, MF_BadValue,
                                "Cannot apply $addToSet to non-array field. Field named '%s' has "
                                "non-array type %s", field, type_name(cur));
        r->state = R_SAME;
        rc = do_add_to_set(c, n, cur, r);
        break;
    case OP_POP: {
        if (!BSON_ITER_HOLDS_ARRAY(cur))
            return mf_error_set(c->err, MF_TypeMismatch,
                                "Path '%s' contains an element of non-array type '%s'", w->path,
                                type_name(cur));
        size_t len;
        slot *items = collect(cur, 0, &len);
        if (!items)
            return oom(c->err);
        if (len == 0)
            r->state = R_SAME;
        else
            build_array(v, items + (n->pop_front ? 1 : 0), len - 1);
        free(items);
        break;
    }
    case OP_PULL:
    case OP_PULL_ALL:
        if (!BSON_ITER_HOLDS_ARRAY(cur))
            return mf_error_set(c->err, MF_BadValue, "Cannot apply $pull to a non-array value");
        r->state = R_SAME;
        rc = do_pull(c, n, cur, r);
        break;
    case OP_BIT:
        if (!BSON_ITER_HOLDS_INT32(cur) && !BSON_ITER_HOLDS_INT64(cur)) {
            id_plain(c, id);
            return mf_error_set(c->err, MF_BadValue,
                                "Cannot apply $bit to a value of non-integral type.%s has the "
                                "field %s of non-integer type %s", id, field, type_name(cur));
        }
        do_bit(n, bson_iter_as_int64(cur), BSON_ITER_HOLDS_INT64(cur), v);
        break;
    case OP_RENAME_TO: {
        const src_value *sv = &c->src[n->rename];
        if (!sv->found) {
            r->state = R_SAME;
            return 0;
        }
        if (w->arr) {
            id_plain(c, id);
            return mf_error_set(c->err, MF_BadValue,
                                "The destination field cannot be an array element, '%s' in doc "
                                "with %s has an array field called '%s'",
                                c->u->renames[n->rename].to, id, w->arr);
        }
        bson_iter_t sit;
        bson_iter_init(&sit, &sv->val);
        bson_iter_next(&sit);
        mf_bsonx_append_iter(v, "", 0, &sit);
        break;
    }
    case OP_RENAME_FROM:
        r->state = c->src[n->rename].found ? R_REMOVE : R_SAME;
        break;
    }
    if (rc)
        return rc;
    if (r->state == R_VALUE) { /* the same bytes: a no-op */
        bson_iter_t nv;
        bson_iter_init(&nv, v);
        bson_iter_next(&nv);
        if (mf_bsonx_binary_equal(&nv, cur))
            r->state = R_SAME;
    }
    if (r->state != R_SAME && w->under_id) {
        if (n->op == OP_RENAME_FROM)
            return mf_error_set(c->err, ImmutableField,
                                "Unsetting the path '%s' using $rename would modify the "
                                "immutable field '_id'", w->path);
        return mf_error_set(c->err, ImmutableField,
                            "Performing an update on the path '%s' would modify the immutable "
                            "field '_id'", w->path);
    }
    return 0;
}

/* ---- inner nodes ---- */

static int apply_node(const actx *c, const unode *n, const bson_iter_t *cur, where *w, res *r);
static int apply_missing(const actx *c, const unode *n, where *w, res *r);

/* Node `n` cannot reach its path: `blocker` (a scalar, or an array for a
 * field name) stands where `first` should be. */
static int apply_blocked(const actx *c, const unode *n, const bson_iter_t *blocker,
                         const char *first, where *w)
{
    char s[STR_CAP];
    if (n->kind == K_ARR)
        return mf_error_set(c->err, MF_BadValue,
                            "The path '%s' must exist in the document in order to apply array "
                            "updates.", w->path);
    if (n->kind == K_LEAF) {
        if (n->op == OP_SET_ON_INSERT && !c->is_insert)
            return 0;
        elem_str(blocker, s);
        if (leaf_creates(c, n))
            return mf_error_set(c->err, PathNotViable, "Cannot create field '%s' in element {%s}",
                                first, s);
        if (n->op == OP_POP || n->op == OP_PULL || n->op == OP_PULL_ALL)
            return mf_error_set(c->err, PathNotViable,
                                "Cannot use the part (%s) of (%s) to traverse the element ({%s})",
                                first, w->path, s);
        return 0;
    }
    kidlist k;
    int rc = kids_of(c, n, w, &k);
    for (size_t i = 0; i < k.n && rc == 0; i++) {
        size_t old = path_push(w, k.names[i]);
        rc = apply_blocked(c, k.kids[i], blocker, first, w);
        path_pop(w, old);
    }
    kids_free(&k);
    return rc;
}

/* Append result `r` for key `key` (or the original element `orig`). */
static void emit(bson_t *out, const char *key, const res *r, const bson_iter_t *orig,
                 bool in_array)
{
    bson_iter_t v;
    switch (r->state) {
    case R_SAME: mf_bsonx_append_iter(out, key, -1, orig); break;
    case R_REMOVE:
        if (in_array)
            bson_append_null(out, key, -1);
        break;
    case R_VALUE:
        bson_iter_init(&v, &r->val);
        bson_iter_next(&v);
        mf_bsonx_append_iter(out, key, -1, &v);
        break;
    case R_DOC: bson_append_document(out, key, -1, &r->val); break;
    case R_ARR: bson_append_array(out, key, -1, &r->val); break;
    }
}

/* The children of OBJ node `n` applied to the existing document or array
 * (`data`, `len`), whose own element is `self` (NULL for the root). */
static int apply_container(const actx *c, const unode *n, const uint8_t *data, uint32_t len,
                           bool is_array, const bson_iter_t *self, where *w, res *r)
{
    kidlist k;
    bson_t in;
    res *rs = NULL;
    int64_t *ord = NULL; /* position of the existing field, or -1 if created */
    int rc = kids_of(c, n, w, &k);
    bool any = false, created = false;
    bson_init_static(&in, data, len);
    if (rc == 0) {
        rs = calloc_bson(k.n + 1, sizeof *rs);
        ord = calloc(k.n + 1, sizeof *ord);
        if (!rs || !ord)
            rc = oom(c->err);
    }
    for (size_t i = 0; i < k.n && rc == 0; i++)
        res_init(&rs[i]);
    for (size_t i = 0; i < k.n && rc == 0; i++) {
        const char *name = k.names[i];
        bool under_id = w->under_id || (w->len == 0 && strcmp(name, "_id") == 0);
        const char *arr = w->arr;
        uint32_t idx = 0;
        bson_iter_t it;
        bool have = false;
        ord[i] = -1;
        size_t old = path_push(w, name);
        w->under_id = under_id;
        if (is_array) {
            w->arr = bson_iter_key(self);
            if (!parse_index(name, &idx)) {
                rc = apply_blocked(c, k.kids[i], self, name, w);
                goto next;
            }
            bson_iter_init(&it, &in);
            for (uint32_t j = 0; (have = bson_iter_next(&it)) && j < idx; j++)
                ;
        } else {
            int64_t j = 0;
            bson_iter_init(&it, &in);
            while ((have = bson_iter_next(&it)) && strcmp(bson_iter_key(&it), name) != 0)
                j++;
            idx = (uint32_t)j;
        }
        if (have) {
            ord[i] = idx;
            rc = apply_node(c, k.kids[i], &it, w, &rs[i]);
        } else {
            rc = apply_missing(c, k.kids[i], w, &rs[i]);
            created |= rs[i].state != R_SAME;
        }
    next:
        any |= rs[i].state != R_SAME;
        path_pop(w, old);
        w->under_id = under_id && w->len > 0;
        w->arr = arr;
    }
    if (rc || !any)
        goto out;

    /* Rebuild: existing fields in place, then the created ones in order. */
    bson_t *dst = &r->val;
    bson_iter_t it;
    int64_t pos = 0;
    char keybuf[16];
    const char *key;
    bson_iter_init(&it, &in);
    while (bson_iter_next(&it)) {
        size_t i;
        for (i = 0; i < k.n && ord[i] != pos; i++)
            ;
        if (is_array)
            mf_uint32_to_key((uint32_t)pos, &key, keybuf, sizeof keybuf);
        else
            key = bson_iter_key(&it);
        if (i < k.n)
            emit(dst, key, &rs[i], &it, is_array);
        else
            mf_bsonx_append_iter(dst, key, -1, &it);
        pos++;
    }
    for (size_t i = 0; i < k.n; i++) {
        if (ord[i] >= 0 || rs[i].state == R_SAME)
            continue;
        if (is_array) {
            uint32_t idx = 0;
            parse_index(k.names[i], &idx);
            if (idx > pos && idx - pos > MAX_PADDING) {
                rc = mf_error_set(c->err, CannotBackfillArray,
                                  "can't backfill more than %d elements", MAX_PADDING);
                goto out;
            }
            for (; pos < idx; pos++) {
                mf_uint32_to_key((uint32_t)pos, &key, keybuf, sizeof keybuf);
                bson_append_null(dst, key, -1);
            }
            mf_uint32_to_key((uint32_t)pos, &key, keybuf, sizeof keybuf);
            pos++;
        } else {
            key = k.names[i];
        }
        emit(dst, key, &rs[i], NULL, is_array);
    }
    r->state = is_array ? R_ARR : R_DOC;
    if (created && w->under_id) {
        /* ModifierNode::applyToNonexistentElement's immutable check */
        char s[STR_CAP];
        bson_t one;
        bson_iter_t e;
        bson_init(&one);
        bson_append_document(&one, self ? bson_iter_key(self) : "", -1, dst);
        bson_iter_init(&e, &one);
        bson_iter_next(&e);
        elem_str(&e, s);
        bson_destroy(&one);
        rc = mf_error_set(c->err, ImmutableField,
                          "Updating the path '%s' to %s would modify the immutable field '_id'",
                          w->path, s);
    }
out:
    for (size_t i = 0; rs && i < k.n; i++)
        bson_destroy(&rs[i].val);
    free(rs);
    free(ord);
    kids_free(&k);
    return rc;
}

/* ARR node `n` ($[] / $[id]) on the existing element `cur`. */
static int apply_array(const actx *c, const unode *n, const bson_iter_t *cur, where *w, res *r)
{
    char s[STR_CAP];
    if (!BSON_ITER_HOLDS_ARRAY(cur)) {
        elem_str(cur, s);
        return mf_error_set(c->err, MF_BadValue, "Cannot apply array updates to non-array element %s",
                            s);
    }
    size_t len;
    slot *items = collect(cur, 0, &len);
    res *rs = calloc_bson(len + 1, sizeof *rs);
    unode **match = calloc(n->nkids + 1, sizeof *match);
    int rc = items && rs && match ? 0 : oom(c->err);
    bool any = false;
    const char *arr = w->arr;
    size_t done = 0;
    for (size_t i = 0; i < len && rc == 0; i++, done++) {
        res_init(&rs[i]);
        size_t nm = 0;
        for (size_t j = 0; j < n->nkids; j++) {
            const char *id = n->names[j];
            bool hit = !*id;
            for (size_t f = 0; !hit && f < c->u->nfilters; f++) {
                if (strcmp(c->u->filters[f].id, id) != 0)
                    continue;
                bson_t one;
                bson_init(&one);
                mf_bsonx_append_iter(&one, id, -1, &items[i].it);
                hit = mf_matcher_match(c->u->filters[f].m, &one);
                bson_destroy(&one);
            }
            if (hit)
                match[nm++] = n->kids[j];
        }
        if (nm == 0)
            continue;
        size_t old = path_push(w, bson_iter_key(&items[i].it));
        unode *m = match[0];
        for (size_t j = 1; j < nm && rc == 0; j++)
            rc = merge(c, m, match[j], w, &m);
        w->arr = bson_iter_key(cur);
        if (rc == 0)
            rc = apply_node(c, m, &items[i].it, w, &rs[i]);
        w->arr = arr;
        path_pop(w, old);
        any |= rs[i].state != R_SAME;
    }
    if (rc == 0 && any) {
        bson_t *dst = &r->val;
        char keybuf[16];
        const char *key;
        for (size_t i = 0; i < len; i++) {
            mf_uint32_to_key((uint32_t)i, &key, keybuf, sizeof keybuf);
            emit(dst, key, &rs[i], &items[i].it, true);
        }
        r->state = R_ARR;
    }
    for (size_t i = 0; rs && i < done; i++)
        bson_destroy(&rs[i].val);
    free(rs);
    free(match);
    free(items);
    return rc;
}

static int apply_node(const actx *c, const unode *n, const bson_iter_t *cur, where *w, res *r)
{
    if (n->kind == K_LEAF)
        return leaf_existing(c, n, cur, w, r);
    if (n->kind == K_ARR)
        return apply_array(c, n, cur, w, r);
    if (BSON_ITER_HOLDS_DOCUMENT(cur) || BSON_ITER_HOLDS_ARRAY(cur)) {
        uint32_t len;
        const uint8_t *data;
        if (BSON_ITER_HOLDS_DOCUMENT(cur))
            bson_iter_document(cur, &len, &data);
        else
            bson_iter_array(cur, &len, &data);
        return apply_container(c, n, data, len, BSON_ITER_HOLDS_ARRAY(cur), cur, w, r);
    }
    /* A scalar where the path goes on. */
    kidlist k;
    int rc = kids_of(c, n, w, &k);
    for (size_t i = 0; i < k.n && rc == 0; i++) {
        size_t old = path_push(w, k.names[i]);
        rc = apply_blocked(c, k.kids[i], cur, k.names[i], w);
        path_pop(w, old);
    }
    kids_free(&k);
    return rc;
}

/* Node `n` whose element does not exist: the operators that create build
 * it (documents all the way down), the others do nothing. */
static int apply_missing(const actx *c, const unode *n, where *w, res *r)
{
    if (n->kind == K_LEAF)
        return leaf_missing(c, n, r);
    if (n->kind == K_ARR)
        return mf_error_set(c->err, MF_BadValue,
                            "The path '%s' must exist in the document in order to apply array "
                            "updates.", w->path);
    kidlist k;
    int rc = kids_of(c, n, w, &k);
    for (size_t i = 0; i < k.n && rc == 0; i++) {
        res sub;
        res_init(&sub);
        size_t old = path_push(w, k.names[i]);
        rc = apply_missing(c, k.kids[i], w, &sub);
        path_pop(w, old);
        if (rc == 0 && sub.state != R_SAME) {
            emit(&r->val, k.names[i], &sub, NULL, false);
            r->state = R_DOC;
        }
        bson_destroy(&sub.val);
    }
    kids_free(&k);
    return rc;
}

/* Read each $rename source from the original document (RenameNode::apply's
 * findLongestPrefix and its array checks). */
static int resolve_renames(actx *c)
{
    for (size_t i = 0; i < c->u->nrenames; i++) {
        const char *from = c->u->renames[i].from;
        char *copy, **parts, s[STR_CAP], id[STR_CAP];
        int n = split_path(from, &copy, &parts), rc = 0;
        if (n < 0)
            return oom(c->err);
        bson_iter_t cur, it;
        const char *arr = NULL;
        bool found = false;
        bson_iter_init(&it, c->doc);
        for (int p = 0; p < n; p++) {
            bool have = false;
            if (p > 0 && BSON_ITER_HOLDS_ARRAY(&cur)) {
                uint32_t idx;
                if (!parse_index(parts[p], &idx))
                    goto not_viable;
                arr = bson_iter_key(&cur);
                bson_iter_recurse(&cur, &it);
                for (uint32_t j = 0; (have = bson_iter_next(&it)) && j < idx; j++)
                    ;
            } else if (p > 0 && !BSON_ITER_HOLDS_DOCUMENT(&cur)) {
                goto not_viable;
            } else {
                if (p > 0)
                    bson_iter_recurse(&cur, &it);
                while ((have = bson_iter_next(&it)) && strcmp(bson_iter_key(&it), parts[p]) != 0)
                    ;
            }
            if (!have)
                break;
            cur = it;
            if (p == n - 1)
                found = true;
            continue;
        not_viable:
            elem_str(&cur, s);
            rc = mf_error_set(c->err, PathNotViable,
                              "cannot use the part (%s of %s) to traverse the element ({%s})",
                              parts[p - 1], from, s);
            break;
        }
        free(copy);
        free(parts);
        if (rc)
            return rc;
        if (found && arr) {
            id_plain(c, id);
            return mf_error_set(c->err, MF_BadValue,
                                "The source field cannot be an array element, '%s' in doc with "
                                "%s has an array field called '%s'", from, id, arr);
        }
        if (found) {
            mf_bsonx_append_iter(&c->src[i].val, "", 0, &cur);
            c->src[i].found = true;
        }
    }
    return 0;
}

/* `src` with _id moved to the front, into `out` (initialised). */
static void id_first(const bson_t *src, bson_t *out)
{
    bson_iter_t it;
    bson_init(out);
    if (bson_iter_init_find(&it, src, "_id"))
        mf_bsonx_append_iter(out, "_id", 3, &it);
    bson_iter_init(&it, src);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "_id") != 0)
            mf_bsonx_append_iter(out, NULL, 0, &it);
}

/* `doc` replaced by `spec` (a replacement, or what an update pipeline
 * made), as mongod's ObjectReplaceExecutor: the old _id is kept when
 * `spec` has none, and may not change. */
static int apply_replacement(const bson_t *spec, const bson_t *doc, bson_t *out, mf_error *err)
{
    bson_iter_t old_id, new_id;
    bool has_old = bson_iter_init_find(&old_id, doc, "_id");
    bool has_new = bson_iter_init_find(&new_id, spec, "_id");
    if (has_old && has_new && mf_bsonx_compare_values(&old_id, &new_id) != 0) {
        char s[STR_CAP];
        elem_str(&new_id, s);
        return mf_error_set(err, ImmutableField,
                            "After applying the update, the (immutable) field '_id' was found "
                            "to have been altered to %s", s);
    }
    bson_t tmp;
    bson_init(&tmp);
    if (has_new)
        mf_bsonx_append_iter(&tmp, "_id", 3, &new_id);
    else if (has_old)
        mf_bsonx_append_iter(&tmp, "_id", 3, &old_id);
    bson_iter_t it;
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "_id") != 0)
            mf_bsonx_append_iter(&tmp, NULL, 0, &it);
    bson_destroy(out);
    bson_steal(out, &tmp);
    return 0;
}

/* The checks every updated document passes: its size, and the type of a
 * new _id (`check_id`); then whether it differs from `doc`. */
static int check_result(const bson_t *doc, const bson_t *out, bool check_id, bool *changed,
                        mf_error *err)
{
    /* Storage validation runs while the update applies, before the size
     * check of the result (mongod's update stage). */
    if (mf_bsonx_depth_exceeds(out, MF_BSON_MAX_STORAGE_DEPTH))
        return mf_error_set(err, MF_Overflow, "Document exceeds maximum nesting depth of %d",
                            MF_BSON_MAX_STORAGE_DEPTH);
    if (out->len > MAX_DOC_SIZE)
        return mf_error_set(err, DocumentTooLarge,
                            "Resulting document after update is larger than %d", MAX_DOC_SIZE);
    bson_iter_t id;
    if (check_id && bson_iter_init_find(&id, out, "_id")) {
        bson_type_t t = bson_iter_type(&id);
        if (t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX || t == BSON_TYPE_UNDEFINED)
            return mf_error_set(err, InvalidIdField, "The '_id' value cannot be of type %s",
                                type_name(&id));
    }
    *changed = out->len != doc->len || memcmp(bson_get_data(out), bson_get_data(doc), doc->len);
    return 0;
}

int mf_update_apply_doc(const bson_t *doc, const bson_t *repl, bson_t *out, bool *changed,
                        mf_error *err)
{
    bson_init(out);
    *changed = false;
    int rc = apply_replacement(repl, doc, out, err);
    return rc ? rc : check_result(doc, out, true, changed, err);
}

int mf_update_apply(const mf_update *u, const bson_t *doc, bool is_insert, int64_t pos,
                    int64_t now_ms, bson_t *out, bool *changed, mf_error *err)
{
    int rc;
    bson_init(out);
    *changed = false;
    if (u->is_replacement) {
        rc = apply_replacement(u->spec, doc, out, err);
    } else {
        views vs = {0};
        actx c = {.u = u, .doc = doc, .is_insert = is_insert, .pos = pos, .now_ms = now_ms,
                  .err = err, .views = &vs};
        c.src = calloc_bson(u->nrenames + 1, sizeof *c.src);
        if (!c.src)
            return oom(err);
        for (size_t i = 0; i < u->nrenames; i++)
            bson_init(&c.src[i].val);
        where *w = calloc(1, sizeof *w);
        res r;
        res_init(&r);
        rc = w ? resolve_renames(&c) : oom(err);
        if (rc == 0)
            rc = apply_container(&c, u->root, bson_get_data(doc), doc->len, false, NULL, w, &r);
        if (rc == 0) {
            bson_destroy(out);
            if (r.state == R_SAME)
                bson_copy_to(doc, out);
            else if (is_insert)
                id_first(&r.val, out); /* an inserted document starts with _id */
            else
                bson_copy_to(&r.val, out);
        }
        bson_destroy(&r.val);
        for (size_t i = 0; i < u->nrenames; i++)
            bson_destroy(&c.src[i].val);
        free(c.src);
        free(w);
        views_free(&vs);
    }
    if (rc)
        return rc;
    return check_result(doc, out, is_insert || u->is_replacement, changed, err);
}

/* ================================================================ upsert */

typedef struct eq {
    const char *path;
    bson_iter_t value;
} eq;

typedef struct eqset {
    eq *v;
    size_t n, cap;
} eqset;

static int eq_add(eqset *s, const char *path, const bson_iter_t *value, mf_error *err)
{
    /* pathsupport::checkEqualityConflicts, in either order of the two. */
    for (size_t i = 0; i < s->n; i++) {
        const char *q = s->v[i].path;
        if (strcmp(q, path) == 0)
            return mf_error_set(err, NotSingleValueField,
                                "cannot infer query fields to set, path '%s' is matched twice",
                                path);
        if (is_prefix_path(q, path) || is_prefix_path(path, q)) {
            bool longer = strlen(path) > strlen(q);
            return mf_error_set(err, NotSingleValueField,
                                "cannot infer query fields to set, both paths '%s' and '%s' are "
                                "matched", longer ? path : q, longer ? q : path);
        }
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        eq *v = calloc_bson(cap, sizeof *v);
        if (!v)
            return oom(err);
        if (s->n)
            memcpy(v, s->v, s->n * sizeof *v);
        free(s->v);
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n].path = path;
    s->v[s->n].value = *value;
    s->n++;
    return 0;
}

/* The equalities of a filter document: {a: v}, {a: {$eq: v}}, {a: {$in:
 * [v]}} (a one-element $in is an equality), through $and and one-clause
 * $or (the canonical query folds both). */
static int extract_eqs(const bson_t *filter, eqset *s, mf_error *err)
{
    bson_iter_t it;
    bson_iter_init(&it, filter);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        int rc = 0;
        if (k[0] == '$') {
            bool is_and = strcmp(k, "$and") == 0, is_or = strcmp(k, "$or") == 0;
            if (!(is_and || is_or) || !BSON_ITER_HOLDS_ARRAY(&it))
                continue;
            bson_iter_t el;
            size_t count = 0;
            bson_iter_recurse(&it, &el);
            while (bson_iter_next(&el))
                count++;
            if (is_or && count != 1)
                continue;
            bson_iter_recurse(&it, &el);
            while (rc == 0 && bson_iter_next(&el)) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&el))
                    continue;
                uint32_t len;
                const uint8_t *data;
                bson_t sub;
                bson_iter_document(&el, &len, &data);
                bson_init_static(&sub, data, len);
                rc = extract_eqs(&sub, s, err);
            }
        } else if (BSON_ITER_HOLDS_REGEX(&it)) {
            continue;
        } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_t op;
            if (!mfi_is_operator_doc(&it, false)) {
                rc = eq_add(s, k, &it, err); /* a whole document, a DBRef too */
            } else {
                bson_iter_recurse(&it, &op);
                while (rc == 0 && bson_iter_next(&op)) {
                    if (strcmp(bson_iter_key(&op), "$eq") == 0) {
                        rc = eq_add(s, k, &op, err);
                    } else if (strcmp(bson_iter_key(&op), "$in") == 0 &&
                               BSON_ITER_HOLDS_ARRAY(&op)) {
                        bson_iter_t el, one;
                        size_t count = 0;
                        bson_iter_recurse(&op, &el);
                        while (bson_iter_next(&el)) {
                            one = el;
                            count++;
                        }
                        if (count == 1 && !BSON_ITER_HOLDS_REGEX(&one))
                            rc = eq_add(s, k, &one, err);
                    }
                }
            }
        } else {
            rc = eq_add(s, k, &it, err);
        }
        if (rc)
            return rc;
    }
    return 0;
}

int mf_update_upsert_seed(const bson_t *filter, bson_t *out, mf_error *err)
{
    eqset s = {0};
    bson_t set, empty;
    mf_update *u = NULL;
    bool changed;
    int rc;
    bson_init(out);
    rc = extract_eqs(filter, &s, err);
    if (rc || s.n == 0) {
        free(s.v);
        return rc;
    }
    /* The equalities become a $set on an empty document: dotted paths
     * create their documents, and the fields land in the update order. */
    bson_t inner;
    bson_init(&set);
    bson_append_document_begin(&set, "$set", 4, &inner);
    for (size_t i = 0; i < s.n; i++)
        mf_bsonx_append_iter(&inner, s.v[i].path, -1, &s.v[i].value);
    bson_append_document_end(&set, &inner);
    free(s.v);
    bson_init(&empty);
    rc = mf_update_parse(&set, NULL, &u, err);
    if (rc == 0) {
        bson_destroy(out);
        rc = mf_update_apply(u, &empty, true, -1, 0, out, &changed, err);
    }
    mf_update_free(u);
    bson_destroy(&set);
    bson_destroy(&empty);
    return rc;
}
