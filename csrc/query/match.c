/*
 * match.c -- filters: parse a query document into a predicate tree, then
 * evaluate it over a document's bytes.
 *
 * Tree:   AND / OR / NOR    children (a filter document is an AND; an
 *                           empty one, or only $comment, matches all)
 *         PATH              a dotted path and its conditions (ANDed)
 *         EXPR              {$expr: <aggregation expression>}, compiled and
 *                           evaluated through the caller's mf_expr_hooks;
 *                           true when the value is (false, null, missing and
 *                           zeros are not).  Within an AND it is evaluated
 *                           after the path predicates, as mongod sorts it.
 * A PATH node's conditions: comparisons ($eq ... $lte, implicit equality),
 * $in/$nin, $exists, $type, $mod, $regex, $size, $all, $elemMatch (value
 * form), bit tests, and $not over any of these; $geoWithin / $within /
 * $geoIntersects, whose geometry is geo.h's (geo_match_parse, below).  Whether a value in the
 * filter is an operator document or a value to compare (a DBRef is one)
 * is operand.c's rule, which the index bounds share.
 *
 * Path semantics (mongod's ElementPath): each component is looked up in a
 * document; where the value so far is an array, a component applies to
 * every element that is a document, and a numeric component also indexes
 * the array.  At the end of the path the value is tested itself and, if it
 * is an array, so is each element ($size, $all and $elemMatch look at the
 * array only).  A branch that ends early is "missing", which only
 * {$eq: null}, {$exists: false} and negations can match.
 */
#include "query_int.h"
#include "geo.h"
#include "schema.h"
#include "text.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef enum { N_AND, N_OR, N_NOR, N_PATH, N_EXPR, N_TEXT, N_SCHEMA } node_kind;

typedef enum {
    C_EQ, C_NE, C_GT, C_GTE, C_LT, C_LTE, C_IN, C_NIN, C_EXISTS, C_TYPE, C_MOD, C_REGEX,
    C_SIZE, C_ALL, C_ELEM_VAL, C_ELEM_OBJ, C_BITS_ALL_SET, C_BITS_ANY_SET,
    C_BITS_ALL_CLEAR, C_BITS_ANY_CLEAR, C_NOT, C_GEO,
} cond_kind;

typedef struct node node;
typedef struct cond cond;

/* A $regex condition's machine code, made once the interpreter has
 * tested JIT_AFTER values.  PCRE2's JIT compile costs about 3 us and
 * saves 20-30 ns a test, so a query that tests a few values pays nothing
 * for it and one that tests many pays at most twice what compiling at
 * once would have (the ski-rental bound).  The code is a JIT-compiled copy
 * published by one atomic store, so a matcher shared between threads
 * never sees a pattern being compiled. */
#define JIT_AFTER 128

typedef struct re_jit {
    _Atomic(pcre2_code *) code; /* NULL until made */
    atomic_uint uses;           /* tests by the interpreter, to JIT_AFTER + 1 */
} re_jit;

/* Where an element of a list operand starts (bson_iter_t cannot be kept
 * in an array: its alignment exceeds its size). */
typedef struct in_elem_at {
    uint32_t off, keylen;
} in_elem_at;

struct cond {
    cond_kind kind;
    bson_t operand;      /* {"": value} or {"0": .., "1": ..} for lists */
    bool exists;         /* $exists */
    int64_t mod_div, mod_rem;
    uint32_t type_mask;  /* $type: MFI_TYPE_* bits (mfi_type_mask) */
    bool type_array;     /* $type: "array" / 4 */
    pcre2_code *re;      /* $regex */
    re_jit *jit;         /* ... and its machine code, later */
    pcre2_code **res;    /* $in/$nin regexes, one per operand element (or NULL) */
    size_t nres;
    in_elem_at *in_elems;   /* $in/$nin: the non-regex elements in the collation's */
    size_t nsorted;         /* order (NULL: a short list, searched in turn) */
    size_t in_nregex;       /* ... and how many regexes it holds besides */
    bool in_null, in_undef; /* the list holds null / undefined (which equal each other) */
    uint64_t bits[4];    /* bit tests: mask over 256 bits */
    cond *sub;           /* $not / $elemMatch value form: conditions */
    size_t nsub;
    node *elem;          /* $elemMatch object form */
    mf_geo_query *geo;   /* $geoWithin, $within, $geoIntersects (geo.h) */
    const mf_collator *coll; /* the matcher's collation (NULL: simple) */
    bson_t *spec;        /* as written, {path: {op: arg}}, for mf_matcher_explain
                            (a validator's matcher only; else NULL) */
};

struct node {
    node_kind kind;
    node **kids;
    size_t nkids;
    char *path;          /* N_PATH */
    size_t path_len;
    bool flat;           /* the path is one field name (no dot) */
    bool binary;         /* compare by the simple collation whatever the
                            matcher's ({$ref: ..} and {$db: ..} filters) */
    cond *conds;
    size_t nconds;
    void *expr;                /* N_EXPR: compiled by the hooks */
    void (*expr_free)(void *);
    mf_schema *schema;         /* N_SCHEMA */
    bool doc_level;            /* N_AND: a filter document's own (not $and's) */
    bson_t *spec;              /* N_EXPR: {$expr: ...} as written (validators) */
};

struct mf_matcher {
    node *root;
    mf_expr_hooks hooks;       /* for N_EXPR nodes (unset without $expr) */
    mf_collator *coll;         /* one reference, or NULL (simple) */
    bool text_false;           /* $text matches nothing (mf_matcher_text_false) */
    bool borrowed;             /* a view: root, hooks and coll are another's */
};

/* How a (sub-)filter is parsed: the hooks for $expr (NULL: $expr is not
 * allowed) and whether it is an $elemMatch's document, where $expr may
 * not stand. */
typedef struct pctx {
    const mf_expr_hooks *hooks;
    bool sub;
    bool validator; /* a collection validator: annotated for mf_matcher_explain,
                       $where and $text refused as mongod refuses them there */
} pctx;

/* One evaluation's error: the first $expr error, kept in `err`. */
typedef struct ectx {
    const mf_expr_hooks *hooks;
    mf_error *err; /* never NULL */
    int rc;
    bool text_false; /* what $text gives: true, or false (mf_matcher_text_false) */
} ectx;

/* --------------------------------------------------------------- freeing */

static void node_free(node *n);

static void cond_clear(cond *c)
{
    bson_destroy(&c->operand);
    if (c->re)
        pcre2_code_free(c->re);
    if (c->jit) {
        pcre2_code_free(atomic_load_explicit(&c->jit->code, memory_order_relaxed));
        free(c->jit);
    }
    for (size_t i = 0; i < c->nres; i++)
        if (c->res[i])
            pcre2_code_free(c->res[i]);
    free(c->res);
    free(c->in_elems);
    for (size_t i = 0; i < c->nsub; i++)
        cond_clear(&c->sub[i]);
    free(c->sub);
    node_free(c->elem);
    mfi_geo_query_free(c->geo);
    if (c->spec)
        bson_destroy(c->spec);
}

static void node_free(node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nkids; i++)
        node_free(n->kids[i]);
    free(n->kids);
    for (size_t i = 0; i < n->nconds; i++)
        cond_clear(&n->conds[i]);
    free(n->conds);
    free(n->path);
    if (n->expr && n->expr_free)
        n->expr_free(n->expr);
    mf_schema_free(n->schema);
    if (n->spec)
        bson_destroy(n->spec);
    free(n);
}

void mf_matcher_free(mf_matcher *m)
{
    if (m) {
        if (!m->borrowed) {
            node_free(m->root);
            mf_collator_unref(m->coll);
        }
        free(m);
    }
}

mf_matcher *mf_matcher_text_false(const mf_matcher *m)
{
    mf_matcher *v = calloc(1, sizeof *v);
    if (v) {
        *v = *m;
        v->text_false = true;
        v->borrowed = true;
    }
    return v;
}

/* -------------------------------------------------------------- parsing */

static int parse_doc(const pctx *pc, const bson_t *filter, node **out, mf_error *err);

/* An array of `n` zeroed conditions.  A cond holds a bson_t, which libbson
 * declares 128-byte aligned: calloc's alignment is not enough (UBSan). */
static cond *cond_calloc(size_t n)
{
    void *p = NULL;
    size_t size = (n ? n : 1) * sizeof(cond);
    if (posix_memalign(&p, _Alignof(cond), size) != 0)
        return NULL;
    return memset(p, 0, size);
}

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

static bool is_number(const bson_iter_t *it)
{
    bson_type_t t = bson_iter_type(it);
    return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
           t == BSON_TYPE_DECIMAL128;
}

static double as_double(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: return bson_iter_int32(it);
    case BSON_TYPE_INT64: return (double)bson_iter_int64(it);
    case BSON_TYPE_DOUBLE: return bson_iter_double(it);
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t d;
        char s[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &d);
        bson_decimal128_to_string(&d, s);
        return strtod(s, NULL);
    }
    default: return 0;
    }
}

/* Store the element `it` as {"": value} in `dst`. */
static void keep_value(bson_t *dst, const bson_iter_t *it)
{
    bson_init(dst);
    mf_bsonx_append_iter(dst, "", 0, it);
}

static int compile_regex(const char *pattern, const char *options, pcre2_code **out,
                         mf_error *err)
{
    uint32_t flags = PCRE2_UTF;
    for (const char *o = options; *o; o++) {
        switch (*o) {
        case 'i': flags |= PCRE2_CASELESS; break;
        case 'm': flags |= PCRE2_MULTILINE; break;
        case 's': flags |= PCRE2_DOTALL; break;
        case 'x': flags |= PCRE2_EXTENDED; break;
        case 'u': break;
        default:
            return mf_error_set(err, 51108, "invalid flag in regex options: %c", *o);
        }
    }
    int code;
    PCRE2_SIZE at;
    *out = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, flags, &code, &at, NULL);
    if (!*out) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return mf_error_set(err, 51091, "Regular expression is invalid: %s", (char *)msg);
    }
    return 0;
}

/* compile_regex for a $regex condition, which may be JIT-compiled later. */
static int compile_cond_regex(const char *pattern, const char *options, cond *c, mf_error *err)
{
    int rc = compile_regex(pattern, options, &c->re, err);
    if (rc == 0 && !(c->jit = calloc(1, sizeof *c->jit)))
        rc = oom(err);
    return rc;
}

static const struct {
    const char *name;
    int type; /* BSON type number; 0 for "number" */
} type_names[] = {
    {"double", 1}, {"string", 2}, {"object", 3}, {"array", 4}, {"binData", 5},
    {"undefined", 6}, {"objectId", 7}, {"bool", 8}, {"date", 9}, {"null", 10},
    {"regex", 11}, {"dbPointer", 12}, {"javascript", 13}, {"symbol", 14},
    {"javascriptWithScope", 15}, {"int", 16}, {"timestamp", 17}, {"long", 18},
    {"decimal", 19}, {"minKey", -1}, {"maxKey", 127}, {"number", 0},
};

/* One $type element into `*mask` (MFI_TYPE_* bits). */
static int add_type(uint32_t *mask, const bson_iter_t *it, mf_error *err)
{
    int t;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        const char *s = bson_iter_utf8(it, NULL);
        size_t i;
        for (i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
            if (strcmp(type_names[i].name, s) == 0)
                break;
        if (i == sizeof type_names / sizeof type_names[0])
            return mf_error_set(err, MF_BadValue, "Unknown type name alias: %s", s);
        t = type_names[i].type;
    } else if (is_number(it)) {
        double d = as_double(it);
        if (d != floor(d))
            return mf_error_set(err, MF_BadValue,
                                "Invalid numerical type code: %g", d);
        t = (int)d;
        if (!((t >= 1 && t <= 19) || t == -1 || t == 127))
            return mf_error_set(err, MF_BadValue, "Invalid numerical type code: %d", t);
    } else {
        return mf_error_set(err, MF_TypeMismatch,
                            "type must be represented as a number or a string");
    }
    *mask |= t == 0 ? MFI_TYPE_NUMBER : t == -1 ? MFI_TYPE_MINKEY
           : t == 127 ? MFI_TYPE_MAXKEY : 1u << t;
    return 0;
}

int mfi_type_mask(const bson_iter_t *it, uint32_t *mask, mf_error *err)
{
    *mask = 0;
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return add_type(mask, it, err);
    bson_iter_t el;
    bson_iter_recurse(it, &el);
    while (bson_iter_next(&el)) {
        int rc = add_type(mask, &el, err);
        if (rc)
            return rc;
    }
    return *mask ? 0 : mf_error_set(err, MF_FailedToParse, "$type must match at least one type");
}

static int parse_bits(cond *c, const bson_iter_t *it, const char *op, mf_error *err)
{
    memset(c->bits, 0, sizeof c->bits);
    if (is_number(it)) {
        double d = as_double(it);
        if (d < 0 || d != floor(d) || d > 9.2e18)
            return mf_error_set(err, MF_FailedToParse,
                                "%s cannot take a negative or non-integral number", op);
        uint64_t v = (uint64_t)d;
        c->bits[0] = v;
        return 0;
    }
    if (BSON_ITER_HOLDS_ARRAY(it)) {
        bson_iter_t el;
        bson_iter_recurse(it, &el);
        while (bson_iter_next(&el)) {
            if (!is_number(&el))
                return mf_error_set(err, MF_BadValue,
                                    "bit positions must be an integer but got: %s",
                                    bson_iter_key(&el));
            double d = as_double(&el);
            if (d < 0 || d != floor(d))
                return mf_error_set(err, MF_BadValue, "bit positions must be >= 0 but got: %g",
                                    d);
            if (d < 256)
                c->bits[(int)d / 64] |= 1ull << ((int)d % 64);
        }
        return 0;
    }
    if (BSON_ITER_HOLDS_BINARY(it)) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_binary(it, NULL, &len, &data);
        for (uint32_t i = 0; i < len && i < 32; i++)
            c->bits[i / 8] |= (uint64_t)data[i] << (8 * (i % 8));
        return 0;
    }
    return mf_error_set(err, MF_BadValue,
                        "%s takes an Array, a number, or a BinData but received: %s", op,
                        mf_bsonx_type_alias(bson_iter_type(it)));
}

static int parse_conds(const bson_iter_t *ops, const char *path, cond **out, size_t *n,
                       mf_error *err);

/* parse_op's answer for $options: not a condition of its own. */
#define OPTIONS_FOLDED (-100)

/* mongod's ComparisonMatchExpression refuses an undefined operand
 * ($eq, $ne, $gt, $gte, $lt, $lte, an implicit equality, $all's). */
static int undefined_operand(mf_error *err)
{
    return mf_error_set(err, MF_BadValue, "cannot compare to undefined");
}

/* One operator `it` (key "$op") on `path`, into `c`.  `path` is what
 * mongod's messages name: the field, or "" inside $elemMatch's value
 * form. */
static int parse_op(bson_iter_t *it, const bson_iter_t *all, const char *path, cond *c,
                    mf_error *err)
{
    const char *op = bson_iter_key(it);
    static const struct {
        const char *name;
        cond_kind kind;
    } cmp[] = {{"$eq", C_EQ}, {"$ne", C_NE}, {"$gt", C_GT}, {"$gte", C_GTE},
               {"$lt", C_LT}, {"$lte", C_LTE}};
    memset(c, 0, sizeof *c);
    bson_init(&c->operand);
    for (size_t i = 0; i < sizeof cmp / sizeof cmp[0]; i++) {
        if (strcmp(op, cmp[i].name) == 0) {
            c->kind = cmp[i].kind;
            if (BSON_ITER_HOLDS_REGEX(it) && c->kind == C_NE)
                return mf_error_set(err, MF_BadValue, "Can't have regex as arg to $ne.");
            if (BSON_ITER_HOLDS_REGEX(it) && c->kind != C_EQ)
                return mf_error_set(err, MF_BadValue, "Can't have RegEx as arg to predicate over field '%s'.",
                                    path);
            if (BSON_ITER_HOLDS_UNDEFINED(it))
                return undefined_operand(err);
            bson_destroy(&c->operand);
            keep_value(&c->operand, it);
            return 0;
        }
    }
    if (strcmp(op, "$in") == 0 || strcmp(op, "$nin") == 0) {
        c->kind = op[1] == 'i' ? C_IN : C_NIN;
        if (!BSON_ITER_HOLDS_ARRAY(it))
            return mf_error_set(err, MF_BadValue, "%s needs an array", op);
        bson_iter_t el;
        uint32_t len;
        const uint8_t *data;
        bson_iter_array(it, &len, &data);
        bson_destroy(&c->operand);
        bson_init(&c->operand);
        bson_t arr;
        bson_init_static(&arr, data, len);
        bson_concat(&c->operand, &arr);
        bson_iter_init(&el, &c->operand);
        size_t count = 0;
        while (bson_iter_next(&el))
            count++;
        c->res = calloc(count ? count : 1, sizeof *c->res);
        if (!c->res)
            return oom(err);
        c->nres = count;
        bson_iter_init(&el, &c->operand);
        for (size_t i = 0; bson_iter_next(&el); i++) {
            /* a DBRef is a value here, any other {$...} is refused */
            if (mfi_is_operator_doc(&el, false))
                return mf_error_set(err, MF_BadValue, "cannot nest $ under %s", op);
            if (BSON_ITER_HOLDS_UNDEFINED(&el))
                return mf_error_set(err, MF_BadValue,
                                    "InMatchExpression equality cannot be undefined");
            if (BSON_ITER_HOLDS_REGEX(&el)) {
                const char *opts, *re = bson_iter_regex(&el, &opts);
                int rc = compile_regex(re, opts, &c->res[i], err);
                if (rc)
                    return rc;
            }
        }
        return 0;
    }
    if (strcmp(op, "$exists") == 0) {
        c->kind = C_EXISTS;
        c->exists = bson_iter_as_bool(it);
        return 0;
    }
    if (strcmp(op, "$type") == 0) {
        c->kind = C_TYPE;
        int rc = mfi_type_mask(it, &c->type_mask, err);
        c->type_array = (c->type_mask >> BSON_TYPE_ARRAY) & 1u;
        return rc;
    }
    if (strcmp(op, "$mod") == 0) {
        c->kind = C_MOD;
        if (!BSON_ITER_HOLDS_ARRAY(it))
            return mf_error_set(err, MF_BadValue, "malformed mod, needs to be an array");
        /* mongod's parseMod: the array's shape first, each element in
         * turn, then the coercions (tryCoerce: exact, or truncated toward
         * zero). */
        bson_iter_t el, divisor, remainder;
        bson_iter_t *num[2] = {&divisor, &remainder};
        bson_iter_recurse(it, &el);
        for (int k = 0; k < 2; k++) {
            if (!bson_iter_next(&el))
                return mf_error_set(err, MF_BadValue, "malformed mod, not enough elements");
            if (!is_number(&el))
                return mf_error_set(err, MF_BadValue,
                                    k ? "malformed mod, remainder not a number"
                                      : "malformed mod, divisor not a number");
            *num[k] = el;
        }
        if (bson_iter_next(&el))
            return mf_error_set(err, MF_BadValue, "malformed mod, too many elements");
        int64_t v[2];
        for (int k = 0; k < 2; k++) {
            switch (mf_bsonx_number_to_int64(num[k], &v[k])) {
            case 1:
                return mf_error_set(err, MF_BadValue,
                                    "malformed mod, %s value is invalid :: caused by :: Unable to coerce NaN/Inf to integral type",
                                    k ? "remainder" : "divisor");
            case 2:
                return mf_error_set(err, MF_BadValue,
                                    "malformed mod, %s value is invalid :: caused by :: Out of bounds coercing to integral value",
                                    k ? "remainder" : "divisor");
            }
        }
        c->mod_div = v[0];
        c->mod_rem = v[1];
        if (c->mod_div == 0)
            return mf_error_set(err, MF_BadValue, "divisor cannot be 0");
        return 0;
    }
    if (strcmp(op, "$regex") == 0 || strcmp(op, "$options") == 0) {
        /* $regex and $options go together; the pair is parsed at $regex. */
        if (op[1] == 'o') {
            bson_iter_t a = *all;
            bool has_regex = false;
            while (bson_iter_next(&a))
                has_regex |= strcmp(bson_iter_key(&a), "$regex") == 0;
            if (!has_regex)
                return mf_error_set(err, MF_BadValue, "$options needs a $regex");
            return OPTIONS_FOLDED; /* parse_conds drops this slot */
        }
        const char *pattern, *opts = "";
        char optbuf[16] = "";
        if (BSON_ITER_HOLDS_REGEX(it)) {
            pattern = bson_iter_regex(it, &opts);
        } else if (BSON_ITER_HOLDS_UTF8(it)) {
            pattern = bson_iter_utf8(it, NULL);
        } else {
            return mf_error_set(err, MF_BadValue, "$regex has to be a string");
        }
        bson_iter_t a = *all;
        bool regex_seen = false;
        while (bson_iter_next(&a)) {
            if (strcmp(bson_iter_key(&a), "$regex") == 0)
                regex_seen = true;
            if (strcmp(bson_iter_key(&a), "$options") == 0) {
                if (!BSON_ITER_HOLDS_UTF8(&a))
                    return mf_error_set(err, MF_BadValue, "$options has to be a string");
                if (*opts)
                    /* which one mongod names depends on which came first */
                    return mf_error_set(err, regex_seen ? 51075 : 51074,
                                        "options set in both $regex and $options");
                snprintf(optbuf, sizeof optbuf, "%s", bson_iter_utf8(&a, NULL));
                opts = optbuf;
            }
        }
        c->kind = C_REGEX;
        bson_destroy(&c->operand);
        bson_init(&c->operand);
        bson_append_regex(&c->operand, "", 0, pattern, opts);
        return compile_cond_regex(pattern, opts, c, err);
    }
    if (strcmp(op, "$size") == 0) {
        c->kind = C_SIZE;
        if (!is_number(it))
            return mf_error_set(err, MF_BadValue, "$size needs a number");
        double d = as_double(it);
        if (d != floor(d))
            return mf_error_set(err, MF_BadValue, "$size must be a whole number");
        if (d < 0)
            return mf_error_set(err, MF_BadValue, "$size may not be negative");
        c->mod_div = (int64_t)d;
        return 0;
    }
    if (strcmp(op, "$all") == 0) {
        c->kind = C_ALL;
        if (!BSON_ITER_HOLDS_ARRAY(it))
            return mf_error_set(err, MF_BadValue, "$all needs an array");
        /* As mongod's parseAll: when the first element is {$elemMatch:
         * ...}, every element must be; otherwise each is an equality (a
         * regex: a match), and only a document led by a path operator
         * ({$gt: 1}) is refused -- a DBRef, or {$foo: 1}, is a value. */
        bson_iter_t el, inner;
        bson_iter_recurse(it, &el);
        size_t count = 0;
        while (bson_iter_next(&el))
            count++;
        c->sub = cond_calloc(count);
        if (!c->sub)
            return oom(err);
        bson_iter_recurse(it, &el);
        bool elem_form = bson_iter_next(&el) && BSON_ITER_HOLDS_DOCUMENT(&el) &&
                         bson_iter_recurse(&el, &inner) && bson_iter_next(&inner) &&
                         strcmp(bson_iter_key(&inner), "$elemMatch") == 0;
        bson_iter_recurse(it, &el);
        while (bson_iter_next(&el)) {
            cond *s = &c->sub[c->nsub];
            bool has_first = BSON_ITER_HOLDS_DOCUMENT(&el) && bson_iter_recurse(&el, &inner) &&
                             bson_iter_next(&inner);
            if (elem_form) {
                if (!has_first || strcmp(bson_iter_key(&inner), "$elemMatch") != 0)
                    return mf_error_set(err, MF_BadValue, "$all/$elemMatch has to be consistent");
                int rc = parse_op(&inner, &el, "", s, err);
                c->nsub++;
                if (rc)
                    return rc;
                continue;
            }
            if (has_first && mfi_is_path_operator(bson_iter_key(&inner)))
                return mf_error_set(err, MF_BadValue, "no $ expressions in $all");
            memset(s, 0, sizeof *s);
            if (BSON_ITER_HOLDS_REGEX(&el)) {
                const char *opts, *re = bson_iter_regex(&el, &opts);
                s->kind = C_REGEX;
                bson_init(&s->operand); /* a stored regex equal to it matches too */
                bson_append_regex(&s->operand, "", 0, re, opts);
                c->nsub++;
                int rc = compile_cond_regex(re, opts, s, err);
                if (rc)
                    return rc;
                continue;
            }
            if (BSON_ITER_HOLDS_UNDEFINED(&el))
                return undefined_operand(err);
            s->kind = C_EQ;
            keep_value(&s->operand, &el);
            c->nsub++;
        }
        return 0;
    }
    if (strcmp(op, "$elemMatch") == 0) {
        if (!BSON_ITER_HOLDS_DOCUMENT(it))
            return mf_error_set(err, MF_BadValue, "$elemMatch needs an Object");
        uint32_t len;
        const uint8_t *data;
        bson_t sub;
        bson_iter_document(it, &len, &data);
        bson_init_static(&sub, data, len);
        /* value form ({$gt: 1}) or documents' fields ({a: 1}, {$or: ..},
         * a DBRef's {$ref: .., $id: ..}) */
        bool value_form = mfi_elem_match_is_value(it);
        if (value_form) {
            c->kind = C_ELEM_VAL;
            bson_iter_t ops;
            bson_iter_init(&ops, &sub);
            return parse_conds(&ops, "", &c->sub, &c->nsub, err);
        }
        c->kind = C_ELEM_OBJ;
        static const pctx elem_level = {NULL, true, false};
        return parse_doc(&elem_level, &sub, &c->elem, err);
    }
    if (strcmp(op, "$not") == 0) {
        c->kind = C_NOT;
        if (BSON_ITER_HOLDS_REGEX(it)) {
            c->sub = cond_calloc(1);
            if (!c->sub)
                return oom(err);
            const char *opts, *re = bson_iter_regex(it, &opts);
            c->nsub = 1;
            c->sub[0].kind = C_REGEX;
            bson_init(&c->sub[0].operand); /* a stored regex equal to it matches too */
            bson_append_regex(&c->sub[0].operand, "", 0, re, opts);
            return compile_cond_regex(re, opts, &c->sub[0], err);
        }
        if (!BSON_ITER_HOLDS_DOCUMENT(it))
            return mf_error_set(err, MF_BadValue, "$not needs a regex or a document");
        bson_iter_t ops;
        if (!bson_iter_recurse(it, &ops))
            return mf_error_set(err, MF_BadValue, "$not needs a regex or a document");
        bson_iter_t probe = ops;
        if (!bson_iter_next(&probe))
            return mf_error_set(err, MF_BadValue, "$not cannot be empty");
        if (bson_iter_key(&probe)[0] != '$')
            return mf_error_set(err, MF_BadValue, "unknown operator: %s", bson_iter_key(&probe));
        return parse_conds(&ops, path, &c->sub, &c->nsub, err);
    }
    static const struct {
        const char *name;
        cond_kind kind;
    } bits[] = {{"$bitsAllSet", C_BITS_ALL_SET}, {"$bitsAnySet", C_BITS_ANY_SET},
                {"$bitsAllClear", C_BITS_ALL_CLEAR}, {"$bitsAnyClear", C_BITS_ANY_CLEAR}};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(op, bits[i].name) == 0) {
            c->kind = bits[i].kind;
            return parse_bits(c, it, op, err);
        }
    }
    return mf_error_set(err, MF_BadValue, "unknown operator: %s", op);
}

/* ---------------------------------------------------------------- geo */

static bool is_geo_match_op(const char *op)
{
    return strcmp(op, "$geoWithin") == 0 || strcmp(op, "$within") == 0 ||
           strcmp(op, "$geoIntersects") == 0;
}

static bool is_geo_near_op(const char *op)
{
    return strcmp(op, "$near") == 0 || strcmp(op, "$nearSphere") == 0 ||
           strcmp(op, "$geoNear") == 0;
}

/* The operator document `ops` (an iterator over it) as a document. */
static void ops_doc(const bson_iter_t *ops, bson_t *out)
{
    bson_init_static(out, ops->raw, ops->len);
}

/* A $geoWithin, $within or $geoIntersects condition: as mongod's parser,
 * the whole operator document is the geo expression's, so another
 * operator beside it is "can't parse extra field" (geo.h). */
static int geo_match_parse(const bson_iter_t *ops, cond *c, mf_error *err)
{
    bson_t section;
    ops_doc(ops, &section);
    memset(c, 0, sizeof *c);
    bson_init(&c->operand);
    c->kind = C_GEO;
    return mfi_geo_query_parse(&section, &c->geo, err);
}

/* $near, $nearSphere or $geoNear first in an operator document: its
 * arguments are checked as mongod's GeoNearExpression checks them, then
 * the query is refused as mongod's planner refuses it where no 2d or
 * 2dsphere index serves the path (NoQueryExecutionPlans): a near
 * condition the planner took (plan_near.c) was stripped from the filter
 * before it came here, so one met here has no index, or is not at the
 * filter's top level. */
static int geo_near_parse(const bson_iter_t *ops, mf_error *err)
{
    bson_t section;
    ops_doc(ops, &section);
    int rc = mfi_geo_near_check(&section, err);
    if (rc)
        return rc;
    return mf_error_set(err, MF_NoQueryExecutionPlans,
                        "error processing query: planner returned error :: caused by :: unable "
                        "to find index for $geoNear query");
}

/* The operators of an operator document, into a fresh array. */
static int parse_conds(const bson_iter_t *ops, const char *path, cond **out, size_t *n,
                       mf_error *err)
{
    bson_iter_t it = *ops;
    if (bson_iter_next(&it) && is_geo_near_op(bson_iter_key(&it)) &&
        (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)))
        return geo_near_parse(ops, err);
    it = *ops;
    size_t count = 0;
    while (bson_iter_next(&it))
        count++;
    *out = cond_calloc(count);
    *n = 0;
    if (!*out)
        return oom(err);
    it = *ops;
    while (bson_iter_next(&it)) {
        cond *c = &(*out)[*n];
        if (bson_iter_key(&it)[0] != '$')
            return mf_error_set(err, MF_BadValue, "unknown operator: %s", bson_iter_key(&it));
        if (is_geo_near_op(bson_iter_key(&it))) {
            bson_t section;
            char buf[256];
            ops_doc(ops, &section);
            mf_bsonx_to_string(&section, buf, sizeof buf);
            return mf_error_set(err, MF_BadValue, "near must be first in: %s", buf);
        }
        int rc = is_geo_match_op(bson_iter_key(&it)) ? geo_match_parse(ops, c, err)
                                                     : parse_op(&it, ops, path, c, err);
        if (rc == OPTIONS_FOLDED) { /* read with its $regex */
            bson_destroy(&c->operand);
            continue;
        }
        (*n)++;
        if (rc)
            return rc;
    }
    return 0;
}

static node *new_node(node_kind k)
{
    node *n = calloc(1, sizeof *n);
    if (n)
        n->kind = k;
    return n;
}

static int add_kid(node *parent, node *kid, mf_error *err)
{
    node **v = realloc(parent->kids, (parent->nkids + 1) * sizeof *v);
    if (!v) {
        node_free(kid);
        return oom(err);
    }
    parent->kids = v;
    parent->kids[parent->nkids++] = kid;
    return 0;
}

/* {path: <value>} or {path: {op: <value>}} (`op` NULL: the former), as a
 * condition's specifiedAs. */
static bson_t *spec_of(const char *path, const char *op, const bson_iter_t *v)
{
    bson_t *b = bson_new(), sub;
    if (!op) {
        mf_bsonx_append_iter(b, path, (int)strlen(path), v);
        return b;
    }
    bson_append_document_begin(b, path, -1, &sub);
    mf_bsonx_append_iter(&sub, op, (int)strlen(op), v);
    bson_append_document_end(b, &sub);
    return b;
}

/* Give the conditions parsed from the operator document `ops` (an
 * iterator before its first field) their specifiedAs: each operator with
 * its operand, a $regex beside $options or a geo operator with the whole
 * document, $not's conditions each on their own. */
static void annotate_conds(cond *cs, size_t n, const bson_iter_t *ops, const char *path)
{
    bson_iter_t it = *ops, probe = *ops;
    bool has_options = bson_iter_find(&probe, "$options");
    size_t i = 0;
    while (i < n && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$options") == 0)
            continue;
        cond *c = &cs[i++];
        if (c->kind == C_GEO || (c->kind == C_REGEX && has_options)) {
            bson_t whole;
            ops_doc(ops, &whole);
            c->spec = bson_new();
            bson_append_document(c->spec, path, -1, &whole);
            continue;
        }
        c->spec = spec_of(path, k, &it);
        if (c->kind == C_NOT && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_t sub;
            bson_iter_recurse(&it, &sub);
            annotate_conds(c->sub, c->nsub, &sub, path);
        } else if (c->kind == C_NOT && c->nsub == 1) {
            c->sub[0].spec = spec_of(path, NULL, &it);
        }
    }
}

/* A predicate on `path` from its operand `it`. */
static int parse_path(const pctx *pc, const char *path, bson_iter_t *it, node **out,
                      mf_error *err)
{
    node *n = new_node(N_PATH);
    if (!n || !(n->path = strdup(path))) {
        free(n);
        return oom(err);
    }
    n->path_len = strlen(path);
    n->flat = !strchr(path, '.');
    int rc;
    if (mfi_is_operator_doc(it, false)) {
        bson_iter_t ops, probe;
        bson_iter_recurse(it, &ops);
        probe = ops;
        while (pc->validator && bson_iter_next(&probe))
            if (is_geo_near_op(bson_iter_key(&probe))) {
                node_free(n);
                return mf_error_set(err, 5626500,
                                    "$geoNear, $near, and $nearSphere are not allowed in this "
                                    "context");
            }
        rc = parse_conds(&ops, path, &n->conds, &n->nconds, err);
        if (rc == 0 && pc->validator)
            annotate_conds(n->conds, n->nconds, &ops, path);
    } else {
        n->conds = cond_calloc(1);
        if (!n->conds) {
            rc = oom(err);
        } else if (BSON_ITER_HOLDS_REGEX(it)) {
            const char *opts, *re = bson_iter_regex(it, &opts);
            n->nconds = 1;
            n->conds[0].kind = C_REGEX;
            bson_init(&n->conds[0].operand);
            mf_bsonx_append_iter(&n->conds[0].operand, "", 0, it);
            rc = compile_cond_regex(re, opts, &n->conds[0], err);
        } else if (BSON_ITER_HOLDS_UNDEFINED(it)) {
            rc = undefined_operand(err);
        } else {
            n->nconds = 1;
            n->conds[0].kind = C_EQ;
            keep_value(&n->conds[0].operand, it);
            rc = 0;
        }
        if (rc == 0 && pc->validator)
            n->conds[0].spec = spec_of(path, NULL, it);
    }
    if (rc) {
        node_free(n);
        return rc;
    }
    *out = n;
    return 0;
}

/* {$ref: v}, {$id: v} or {$db: v} in a filter document: an equality on
 * the field of that name, v taken as it is (an operator document or a
 * regex is a value here), as mongod's parseDBRef.  This is how a DBRef
 * under $elemMatch, {$elemMatch: {$ref: "c", $id: 1}}, tests each element
 * document's fields.  Only $id's comparison follows the collation. */
static int parse_dbref_field(const char *k, const bson_iter_t *it, node **out, mf_error *err)
{
    if (BSON_ITER_HOLDS_UNDEFINED(it))
        return undefined_operand(err);
    node *n = new_node(N_PATH);
    if (!n || !(n->path = strdup(k)) || !(n->conds = cond_calloc(1))) {
        node_free(n);
        return oom(err);
    }
    n->path_len = strlen(k);
    n->flat = true;
    n->binary = strcmp(k, "$id") != 0;
    n->nconds = 1;
    n->conds[0].kind = C_EQ;
    keep_value(&n->conds[0].operand, it);
    *out = n;
    return 0;
}

static int parse_logical(const pctx *pc, const char *op, bson_iter_t *it, node **out,
                         mf_error *err)
{
    node_kind k = op[1] == 'a' ? N_AND : op[2] == 'r' ? N_OR : N_NOR;
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return mf_error_set(err, MF_BadValue, "%s must be an array", op);
    node *n = new_node(k);
    if (!n)
        return oom(err);
    bson_iter_t el;
    bson_iter_recurse(it, &el);
    while (bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&el)) {
            node_free(n);
            return mf_error_set(err, MF_BadValue, "$or/$and/$nor entries need to be full objects");
        }
        uint32_t len;
        const uint8_t *data;
        bson_t sub;
        bson_iter_document(&el, &len, &data);
        bson_init_static(&sub, data, len);
        node *kid;
        int rc = parse_doc(pc, &sub, &kid, err);
        if (rc == 0)
            rc = add_kid(n, kid, err);
        if (rc) {
            node_free(n);
            return rc;
        }
    }
    if (n->nkids == 0) {
        node_free(n);
        return mf_error_set(err, MF_BadValue, "$and/$or/$nor must be a nonempty array");
    }
    *out = n;
    return 0;
}

/* {$text: {...}}: its operand checked (mongod's parseText); it matches
 * every document here -- the text scan (plan_text.c) applies it, as
 * mongod's TEXT stage does -- or none, for the other clauses of an OR
 * beside a text scan (mf_matcher_text_false). */
static int parse_text(const pctx *pc, const bson_iter_t *it, node **out, mf_error *err)
{
    mfi_text_query q;
    if (pc->sub)
        return mf_error_set(err, MF_BadValue,
                            "$text can only be applied to the top-level document");
    int rc = mfi_text_query_parse(it, &q, err);
    if (rc)
        return rc;
    mfi_text_query_clear(&q);
    return (*out = new_node(N_TEXT)) ? 0 : oom(err);
}

/* {$expr: <expression>}, as mongod's parseExpr. */
static int parse_expr(const pctx *pc, const bson_iter_t *it, node **out, mf_error *err)
{
    if (pc->sub)
        return mf_error_set(err, MF_BadValue,
                            "$expr can only be applied to the top-level document");
    if (!pc->hooks)
        return mf_error_set(err, MF_QueryFeatureNotAllowed, "$expr is not allowed in this context");
    node *n = new_node(N_EXPR);
    if (!n)
        return oom(err);
    int rc = pc->hooks->parse(it, pc->hooks->arg, &n->expr, err);
    n->expr_free = pc->hooks->free;
    if (pc->validator)
        n->spec = spec_of("$expr", NULL, it);
    if (rc) {
        node_free(n);
        return rc;
    }
    *out = n;
    return 0;
}

/* Move the EXPR children of `n` after the others, keeping their order:
 * the cheap path predicates reject a document first (mongod sorts an
 * AND's children by kind, $expr late). */
static void exprs_last(node *n)
{
    size_t w = 0;
    for (size_t i = 0; i < n->nkids; i++) {
        node *k = n->kids[i];
        if (k->kind == N_EXPR)
            continue;
        memmove(&n->kids[w + 1], &n->kids[w], (i - w) * sizeof *n->kids);
        n->kids[w++] = k;
    }
}

/* {$jsonSchema: {...}} (schema.c). */
static int parse_schema(const bson_iter_t *it, node **out, mf_error *err)
{
    node *n = new_node(N_SCHEMA);
    if (!n)
        return oom(err);
    int rc = mf_schema_parse(it, &n->schema, err);
    if (rc) {
        node_free(n);
        return rc;
    }
    *out = n;
    return 0;
}

static int parse_doc(const pctx *pc, const bson_t *filter, node **out, mf_error *err)
{
    node *n = new_node(N_AND);
    bson_iter_t it;
    if (!n)
        return oom(err);
    n->doc_level = true;
    bson_iter_init(&it, filter);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        node *kid = NULL;
        int rc;
        if (k[0] == '$') {
            if (strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0)
                rc = parse_logical(pc, k, &it, &kid, err);
            else if (strcmp(k, "$expr") == 0)
                rc = parse_expr(pc, &it, &kid, err);
            else if (pc->validator && (strcmp(k, "$text") == 0 || strcmp(k, "$where") == 0))
                rc = mf_error_set(err, MF_BadValue, "%s is not allowed in this context", k);
            else if (strcmp(k, "$text") == 0)
                rc = parse_text(pc, &it, &kid, err);
            else if (strcmp(k, "$jsonSchema") == 0)
                rc = parse_schema(&it, &kid, err);
            else if (strcmp(k, "$comment") == 0)
                continue;
            else if (strcmp(k, "$ref") == 0 || strcmp(k, "$id") == 0 || strcmp(k, "$db") == 0)
                rc = parse_dbref_field(k, &it, &kid, err);
            else
                rc = mf_error_set(err, MF_BadValue, "unknown top level operator: %s", k);
        } else {
            rc = parse_path(pc, k, &it, &kid, err);
        }
        if (rc == 0)
            rc = add_kid(n, kid, err);
        if (rc) {
            node_free(n);
            return rc;
        }
    }
    if (!pc->validator) /* (mf_matcher_explain numbers the clauses as written) */
        exprs_last(n);
    *out = n;
    return 0;
}

/* Lists shorter than this are searched element by element. */
#define IN_SORT_MIN 8

/* An element of `c`'s list operand, as an iterator. */
static void in_elem(const cond *c, in_elem_at at, bson_iter_t *it)
{
    bson_iter_init_from_data_at_offset(it, bson_get_data(&c->operand), c->operand.len, at.off,
                                       at.keylen);
}

/* qsort_r's order of two elements of cond `arg`'s list: its collation's. */
static int cmp_elems(const void *a, const void *b, void *arg)
{
    const cond *c = arg;
    bson_iter_t x, y;
    in_elem(c, *(const in_elem_at *)a, &x);
    in_elem(c, *(const in_elem_at *)b, &y);
    return mf_bsonx_compare_values_coll(&x, &y, c->coll);
}

/* A long $in/$nin list's elements, sorted for in_list()'s binary search.
 * Regexes stay out (in_list tries them one by one).  Without memory the
 * list is searched element by element, which gives the same answers. */
static void sort_in_list(cond *c)
{
    free(c->in_elems);
    c->in_elems = NULL;
    c->nsorted = 0;
    c->in_null = c->in_undef = false;
    c->in_nregex = 0;
    if (c->nres < IN_SORT_MIN)
        return;
    in_elem_at *e = malloc(c->nres * sizeof *e);
    if (!e)
        return;
    size_t n = 0;
    bson_iter_t it;
    bson_iter_init(&it, &c->operand);
    for (size_t i = 0; bson_iter_next(&it) && i < c->nres; i++) {
        if (c->res[i]) {
            c->in_nregex++;
            continue;
        }
        c->in_null |= BSON_ITER_HOLDS_NULL(&it);
        c->in_undef |= bson_iter_type(&it) == BSON_TYPE_UNDEFINED;
        e[n].off = bson_iter_offset(&it);
        e[n++].keylen = bson_iter_key_len(&it);
    }
    qsort_r(e, n, sizeof *e, cmp_elems, c);
    c->in_elems = e;
    c->nsorted = n;
}

/* Give every condition of the tree the matcher's collation. */
static void set_coll(node *n, const mf_collator *coll);

static void set_coll_conds(cond *cs, size_t n, const mf_collator *coll)
{
    for (size_t i = 0; i < n; i++) {
        cs[i].coll = coll;
        if (cs[i].kind == C_IN || cs[i].kind == C_NIN)
            sort_in_list(&cs[i]);
        set_coll_conds(cs[i].sub, cs[i].nsub, coll);
        set_coll(cs[i].elem, coll);
    }
}

static void set_coll(node *n, const mf_collator *coll)
{
    if (!n)
        return;
    set_coll_conds(n->conds, n->nconds, n->binary ? NULL : coll);
    for (size_t i = 0; i < n->nkids; i++)
        set_coll(n->kids[i], coll);
}

static int parse_matcher(const bson_t *filter, const mf_expr_hooks *hooks,
                         const mf_collator *coll, bool validator, mf_matcher **out,
                         mf_error *err)
{
    mf_matcher *m = calloc(1, sizeof *m);
    if (!m)
        return oom(err);
    if (hooks)
        m->hooks = *hooks;
    pctx pc = {hooks ? &m->hooks : NULL, false, validator};
    int rc = parse_doc(&pc, filter, &m->root, err);
    if (rc) {
        free(m);
        return rc;
    }
    m->coll = mf_collator_ref(coll);
    set_coll(m->root, coll);
    *out = m;
    return 0;
}

int mf_matcher_parse_coll(const bson_t *filter, const mf_expr_hooks *hooks,
                          const mf_collator *coll, mf_matcher **out, mf_error *err)
{
    return parse_matcher(filter, hooks, coll, false, out, err);
}

int mf_matcher_parse_validator(const bson_t *filter, const mf_expr_hooks *hooks,
                               const mf_collator *coll, mf_matcher **out, mf_error *err)
{
    return parse_matcher(filter, hooks, coll, true, out, err);
}

int mf_matcher_parse_ex(const bson_t *filter, const mf_expr_hooks *hooks, mf_matcher **out,
                        mf_error *err)
{
    return mf_matcher_parse_coll(filter, hooks, NULL, out, err);
}

const mf_collator *mf_matcher_collation(const mf_matcher *m)
{
    return m->coll;
}

int mf_matcher_parse(const bson_t *filter, mf_matcher **out, mf_error *err)
{
    return mf_matcher_parse_ex(filter, NULL, out, err);
}

/* ------------------------------------------------------------ evaluation */

static bool eval_node(const node *n, const bson_t *doc, int64_t *pos, ectx *x);

/* Match data for every regex tested here (the matcher's, an index scan's
 * key filter), one per thread, made on the thread's first match and freed
 * when it exits.  Whether a regex matches
 * is all the matcher asks, so one offset pair is enough: pcre2_match
 * returns 0, a match, when a pattern's groups do not fit.  Making one per
 * document instead (a malloc and a free) cost a third of a regex scan. */
static pthread_key_t md_key;
static bool md_key_made;
static pthread_once_t md_once = PTHREAD_ONCE_INIT;

static void md_destroy(void *md)
{
    pcre2_match_data_free(md);
}

static void md_key_make(void)
{
    md_key_made = pthread_key_create(&md_key, md_destroy) == 0;
}

/* This thread's match data; NULL when it cannot be had. */
static pcre2_match_data *thread_match_data(void)
{
    pthread_once(&md_once, md_key_make);
    if (!md_key_made)
        return NULL;
    pcre2_match_data *md = pthread_getspecific(md_key);
    if (!md && (md = pcre2_match_data_create(1, NULL)) && pthread_setspecific(md_key, md) != 0) {
        pcre2_match_data_free(md);
        md = NULL;
    }
    return md;
}

/* Whether `re` finds a match in `len` bytes at `s`. */
static bool regex_find(const pcre2_code *re, const char *s, size_t len)
{
    pcre2_match_data *own = NULL, *md = thread_match_data();
    if (!md && !(md = own = pcre2_match_data_create_from_pattern(re, NULL)))
        return false;
    int r = pcre2_match(re, (PCRE2_SPTR)s, len, 0, 0, md, NULL);
    /* JIT code runs on a small stack of its own; where that is not enough
     * the interpreter, with its larger heap limit, decides, so that the
     * answer never depends on whether the pattern was compiled. */
    if (r == PCRE2_ERROR_JIT_STACKLIMIT)
        r = pcre2_match(re, (PCRE2_SPTR)s, len, 0, PCRE2_NO_JIT, md, NULL);
    pcre2_match_data_free(own);
    return r >= 0;
}

/* The code to run a $regex condition with: its machine code once made
 * (the JIT_AFTER-th test makes it), else the pattern. */
static const pcre2_code *cond_code(const cond *c)
{
    re_jit *j = c->jit;
    if (!j)
        return c->re;
    pcre2_code *made = atomic_load_explicit(&j->code, memory_order_acquire);
    if (made)
        return made;
    if (atomic_load_explicit(&j->uses, memory_order_relaxed) > JIT_AFTER ||
        atomic_fetch_add_explicit(&j->uses, 1, memory_order_relaxed) != JIT_AFTER)
        return c->re;
    /* One thread gets here, once; without JIT support, or if it fails,
     * the interpreter goes on. */
    pcre2_code *copy = pcre2_code_copy(c->re);
    if (copy && pcre2_jit_compile(copy, PCRE2_JIT_COMPLETE) == 0) {
        atomic_store_explicit(&j->code, copy, memory_order_release);
        return copy;
    }
    pcre2_code_free(copy);
    return c->re;
}

static bool regex_match(const pcre2_code *re, const bson_iter_t *v)
{
    uint32_t len;
    const char *s;
    if (BSON_ITER_HOLDS_UTF8(v))
        s = bson_iter_utf8(v, &len);
    else if (BSON_ITER_HOLDS_SYMBOL(v))
        s = bson_iter_symbol(v, &len);
    else
        return false;
    return regex_find(re, s, len);
}

struct mf_regex {
    pcre2_code *re;
};

int mf_regex_new(const char *pattern, const char *options, mf_regex **out, mf_error *err)
{
    mf_regex *r = calloc(1, sizeof *r);
    *out = NULL;
    if (!r)
        return oom(err);
    int rc = compile_regex(pattern, options, &r->re, err);
    /* Machine code at once: an index scan's key filter tests every string
     * key of the index, far more than JIT_AFTER.  Where PCRE2 has no JIT
     * (or it fails) pcre2_match interprets, with the same answers. */
    if (rc == 0)
        (void)pcre2_jit_compile(r->re, PCRE2_JIT_COMPLETE);
    if (rc) {
        mf_regex_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

bool mf_regex_match(mf_regex *r, const char *s, size_t len)
{
    return regex_find(r->re, s, len);
}

void mf_regex_free(mf_regex *r)
{
    if (!r)
        return;
    pcre2_code_free(r->re);
    free(r);
}

static bool is_nan(const bson_iter_t *v)
{
    if (BSON_ITER_HOLDS_DOUBLE(v))
        return isnan(bson_iter_double(v));
    if (BSON_ITER_HOLDS_DECIMAL128(v)) {
        bson_decimal128_t d;
        int sign, exp10;
        uint64_t hi, lo;
        bson_iter_decimal128(v, &d);
        return mf_bsonx_decimal_parts(&d, &sign, &hi, &lo, &exp10) == MF_DEC_NAN;
    }
    return false;
}

/* Equality, with undefined equal to null (mongod 7.0). */
static bool elem_equal(const bson_iter_t *v, const bson_iter_t *o, const mf_collator *coll)
{
    int cv = mf_bsonx_canonical_type(bson_iter_type(v));
    int co = mf_bsonx_canonical_type(bson_iter_type(o));
    if (cv + co == 5 && (cv == 0 || co == 0))
        return true;
    return mf_bsonx_compare_values_coll(v, o, coll) == 0;
}

static bool values_equal(const bson_iter_t *v, const bson_t *operand, const mf_collator *coll)
{
    bson_iter_t o;
    bson_iter_init(&o, operand);
    bson_iter_next(&o);
    return elem_equal(v, &o, coll);
}

/* Whether comparison result `c` (value against operand) satisfies `k`. */
static bool order_ok(cond_kind k, int c)
{
    switch (k) {
    case C_GT: return c > 0;
    case C_GTE: return c >= 0;
    case C_LT: return c < 0;
    case C_LTE: return c <= 0;
    default: return false;
    }
}

/* A comparison with type bracketing: only values in the operand's bracket
 * compare (MinKey/MaxKey operands compare with everything). */
static bool compare_ok(cond_kind k, const bson_iter_t *v, const bson_t *operand,
                       const mf_collator *coll)
{
    bson_iter_t o;
    bson_iter_init(&o, operand);
    bson_iter_next(&o);
    bson_type_t ot = bson_iter_type(&o), vt = bson_iter_type(v);
    /* Integers with integers, and doubles (not NaN) with doubles, compare
     * as numbers without the general comparison's type work. */
    if ((vt == BSON_TYPE_INT32 || vt == BSON_TYPE_INT64) &&
        (ot == BSON_TYPE_INT32 || ot == BSON_TYPE_INT64)) {
        int64_t a = bson_iter_as_int64(v), b = bson_iter_as_int64(&o);
        return order_ok(k, a < b ? -1 : a > b);
    }
    if (vt == BSON_TYPE_DOUBLE && ot == BSON_TYPE_DOUBLE) {
        double a = bson_iter_double(v), b = bson_iter_double(&o);
        if (!isnan(a) && !isnan(b))
            return order_ok(k, a < b ? -1 : a > b);
    }
    int cv = mf_bsonx_canonical_type(vt);
    int co = mf_bsonx_canonical_type(ot);
    /* null and undefined are one for $lte and $gte, as for $eq. */
    if (cv + co == 5 && (k == C_GTE || k == C_LTE))
        return true;
    /* NaN: only NaN, and only for the comparisons that include equality. */
    bool rnan = is_nan(&o), vnan = is_nan(v);
    if (rnan)
        return vnan && (k == C_GTE || k == C_LTE);
    if (vnan && cv == co)
        return false;
    int c = mf_bsonx_compare_values_coll(v, &o, coll);
    if (cv != co && ot != BSON_TYPE_MINKEY && ot != BSON_TYPE_MAXKEY)
        return false;
    return order_ok(k, c);
}

static bool type_matches(const cond *c, const bson_iter_t *v)
{
    bson_type_t t = bson_iter_type(v);
    if ((c->type_mask & MFI_TYPE_NUMBER) && (t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 ||
                                t == BSON_TYPE_DOUBLE || t == BSON_TYPE_DECIMAL128))
        return true;
    if (t == BSON_TYPE_MINKEY)
        return (c->type_mask & MFI_TYPE_MINKEY) != 0;
    if (t == BSON_TYPE_MAXKEY)
        return (c->type_mask & MFI_TYPE_MAXKEY) != 0;
    return (unsigned)t < 20 && ((c->type_mask >> t) & 1u);
}

static bool bits_test(const cond *c, const bson_iter_t *v)
{
    uint64_t val[4] = {0, 0, 0, 0};
    if (BSON_ITER_HOLDS_BINARY(v)) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_binary(v, NULL, &len, &data);
        for (uint32_t i = 0; i < len && i < 32; i++)
            val[i / 8] |= (uint64_t)data[i] << (8 * (i % 8));
    } else if (bson_iter_type(v) == BSON_TYPE_INT32 || bson_iter_type(v) == BSON_TYPE_INT64) {
        int64_t x = bson_iter_as_int64(v);
        val[0] = (uint64_t)x;
        if (x < 0) /* sign-extended: the high bits are set */
            val[1] = val[2] = val[3] = ~0ull;
    } else if (BSON_ITER_HOLDS_DOUBLE(v) || BSON_ITER_HOLDS_DECIMAL128(v)) {
        double d = as_double(v);
        if (d != floor(d) || !isfinite(d) || d < -9.2e18 || d > 9.2e18)
            return false;
        int64_t x = (int64_t)d;
        val[0] = (uint64_t)x;
        if (x < 0)
            val[1] = val[2] = val[3] = ~0ull;
    } else {
        return false;
    }
    bool all = true, any = false;
    for (int i = 0; i < 4; i++) {
        uint64_t m = c->bits[i];
        switch (c->kind) {
        case C_BITS_ALL_SET: all &= (val[i] & m) == m; break;
        case C_BITS_ANY_SET: any |= (val[i] & m) != 0; break;
        case C_BITS_ALL_CLEAR: all &= (val[i] & m) == 0; break;
        case C_BITS_ANY_CLEAR: any |= (~val[i] & m) != 0; break;
        default: break;
        }
    }
    return c->kind == C_BITS_ALL_SET || c->kind == C_BITS_ALL_CLEAR ? all : any;
}

/* Whether a long list's sorted elements hold `v` (a bisection). */
static bool in_sorted(const cond *c, const bson_iter_t *v)
{
    /* elem_equal() is compare == 0, but for null and undefined, which are
     * equal without comparing so. */
    int cv = mf_bsonx_canonical_type(bson_iter_type(v));
    if ((cv == 0 && c->in_null) || (cv == 5 && c->in_undef))
        return true;
    size_t lo = 0, hi = c->nsorted;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        bson_iter_t e;
        in_elem(c, c->in_elems[mid], &e);
        int r = mf_bsonx_compare_values_coll(v, &e, c->coll);
        if (r == 0)
            return true;
        if (r < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return false;
}

static bool in_list(const cond *c, const bson_iter_t *v)
{
    if (c->in_elems) {
        if (in_sorted(c, v))
            return true;
        if (c->in_nregex == 0)
            return false;
    }
    /* element by element: every one in a short list, the regexes alone in
     * a long one */
    bson_iter_t o;
    bson_iter_init(&o, &c->operand);
    for (size_t i = 0; bson_iter_next(&o); i++) {
        if (i < c->nres && c->res[i]) {
            if (regex_match(c->res[i], v) || mf_bsonx_compare_values(v, &o) == 0)
                return true;
        } else if (!c->in_elems && elem_equal(v, &o, c->coll)) {
            return true;
        }
    }
    return false;
}

/* One value (an element or a whole array) against one simple condition. */
static bool value_matches(const cond *c, const bson_iter_t *v)
{
    switch (c->kind) {
    case C_EQ: return values_equal(v, &c->operand, c->coll);
    case C_GT: case C_GTE: case C_LT: case C_LTE:
        return compare_ok(c->kind, v, &c->operand, c->coll);
    case C_IN: return in_list(c, v);
    case C_TYPE: return type_matches(c, v);
    case C_MOD: {
        /* The dividend as mongod takes it: an int64 exactly, a double or
         * decimal truncated toward zero; out of range never matches. */
        int64_t x;
        if (!is_number(v) || mf_bsonx_number_to_int64(v, &x) != 0)
            return false;
        if (c->mod_div == -1) /* INT64_MIN % -1 overflows; the remainder is 0 */
            return c->mod_rem == 0;
        return x % c->mod_div == c->mod_rem;
    }
    case C_REGEX:
        if (BSON_ITER_HOLDS_REGEX(v)) { /* a stored regex equal to the operand */
            bson_iter_t o;
            bson_iter_init(&o, &c->operand);
            return bson_iter_next(&o) && mf_bsonx_compare_values(v, &o) == 0;
        }
        return regex_match(cond_code(c), v);
    case C_BITS_ALL_SET: case C_BITS_ANY_SET: case C_BITS_ALL_CLEAR: case C_BITS_ANY_CLEAR:
        return bits_test(c, v);
    case C_GEO:
        return mfi_geo_query_matches(c->geo, v);
    default:
        return false;
    }
}

/* ---- paths ---- */

/* Whether condition `c` holds for the value at the end of a path: the value
 * itself, or (arrays) any element.  `v` is NULL for a missing value. */
static bool leaf_matches(const cond *c, const bson_iter_t *v, bool expand);

/* $elemMatch's value form: every condition on the element itself, which
 * is not expanded if it is an array. */
static bool element_matches_all(const cond *cs, size_t n, const bson_iter_t *el)
{
    for (size_t i = 0; i < n; i++) {
        const cond *s = &cs[i];
        bool ok;
        switch (s->kind) {
        case C_NE: {
            cond eq = *s;
            eq.kind = C_EQ;
            ok = !value_matches(&eq, el);
            break;
        }
        case C_NIN: {
            cond in = *s;
            in.kind = C_IN;
            ok = !value_matches(&in, el);
            break;
        }
        case C_NOT:
            ok = !element_matches_all(s->sub, s->nsub, el);
            break;
        case C_EXISTS:
            ok = s->exists;
            break;
        case C_SIZE: case C_ALL: case C_ELEM_VAL: case C_ELEM_OBJ:
            ok = leaf_matches(s, el, false);
            break;
        default:
            ok = value_matches(s, el);
        }
        if (!ok)
            return false;
    }
    return true;
}

/* A null value standing in for a missing one: comparisons treat a
 * missing field as null ({$gte: null}, {$lt: MaxKey} match it). */
static void null_value(bson_iter_t *it)
{
    static const uint8_t doc[] = {8, 0, 0, 0, BSON_TYPE_NULL, 0, 0, 0};
    bson_t b;
    bson_init_static(&b, doc, sizeof doc);
    bson_iter_init(it, &b);
    bson_iter_next(it);
}

static bool leaf_matches(const cond *c, const bson_iter_t *v, bool expand)
{
    if (!v) {
        /* missing */
        switch (c->kind) {
        case C_EQ: case C_GT: case C_GTE: case C_LT: case C_LTE: case C_IN: {
            bson_iter_t null_it;
            null_value(&null_it);
            return value_matches(c, &null_it);
        }
        case C_EXISTS: return !c->exists;
        case C_ALL:
            if (c->nsub == 0)
                return false;
            for (size_t i = 0; i < c->nsub; i++)
                if (!leaf_matches(&c->sub[i], NULL, true))
                    return false;
            return true;
        default: return false;
        }
    }
    bool is_arr = BSON_ITER_HOLDS_ARRAY(v);
    switch (c->kind) {
    case C_EXISTS: return c->exists;
    case C_SIZE: {
        if (!is_arr)
            return false;
        bson_iter_t el;
        bson_iter_recurse(v, &el);
        int64_t n = 0;
        while (bson_iter_next(&el))
            n++;
        return n == c->mod_div;
    }
    case C_ELEM_VAL:
    case C_ELEM_OBJ: {
        if (!is_arr)
            return false;
        bson_iter_t el;
        bson_iter_recurse(v, &el);
        while (bson_iter_next(&el)) {
            if (c->kind == C_ELEM_VAL) {
                if (element_matches_all(c->sub, c->nsub, &el))
                    return true;
            } else if (BSON_ITER_HOLDS_DOCUMENT(&el) || BSON_ITER_HOLDS_ARRAY(&el)) {
                /* An array element is matched as a document ("0", "1", ...). */
                uint32_t len;
                const uint8_t *data;
                bson_t sub;
                if (BSON_ITER_HOLDS_DOCUMENT(&el))
                    bson_iter_document(&el, &len, &data);
                else
                    bson_iter_array(&el, &len, &data);
                bson_init_static(&sub, data, len);
                if (eval_node(c->elem, &sub, NULL, NULL))
                    return true;
            }
        }
        return false;
    }
    case C_ALL:
        if (c->nsub == 0)
            return false;
        for (size_t i = 0; i < c->nsub; i++)
            if (!leaf_matches(&c->sub[i], v, expand))
                return false;
        return true;
    case C_NE: case C_NIN: case C_NOT:
        return false; /* handled by the path walker as negations */
    default:
        break;
    }
    if (value_matches(c, v))
        return true;
    if (is_arr && expand) {
        bson_iter_t el;
        bson_iter_recurse(v, &el);
        while (bson_iter_next(&el))
            if (value_matches(c, &el))
                return true;
    }
    return false;
}

/* The first field of `container` (an iterator positioned before its first
 * field) named `key` (`len` bytes) into `*found`; false if there is none. */
static bool find_key(const bson_iter_t *container, const char *key, size_t len,
                     bson_iter_t *found)
{
    *found = *container;
    while (bson_iter_next(found))
        if (bson_iter_key_len(found) == len && memcmp(bson_iter_key(found), key, len) == 0)
            return true;
    return false;
}

/* Walk `path` from the document iterator `it` (positioned before the
 * first field), calling `leaf` for every value reached and for every
 * missing branch.  Returns true as soon as `leaf` does. */
typedef bool (*leaf_fn)(void *arg, const bson_iter_t *v, bool expand);

static bool walk(const bson_iter_t *container, bool is_doc, const char *path, leaf_fn leaf,
                 void *arg, int64_t *off)
{
    const char *dot = strchr(path, '.');
    size_t clen = dot ? (size_t)(dot - path) : strlen(path);
    const char *rest = dot ? dot + 1 : NULL;
    bson_iter_t it = *container, found;

    if (is_doc) {
        if (!find_key(container, path, clen, &found))
            return leaf(arg, NULL, true);
        if (!rest)
            return leaf(arg, &found, true);
        if (BSON_ITER_HOLDS_DOCUMENT(&found)) {
            bson_iter_t child;
            bson_iter_recurse(&found, &child);
            return walk(&child, true, rest, leaf, arg, off);
        }
        if (BSON_ITER_HOLDS_ARRAY(&found)) {
            bson_iter_t child;
            bson_iter_recurse(&found, &child);
            return walk(&child, false, rest, leaf, arg, off);
        }
        return leaf(arg, NULL, true); /* a scalar cannot hold the rest */
    }

    /* An array: a numeric component indexes it; every document element
     * continues with the same component. */
    bool numeric = clen > 0 && strspn(path, "0123456789") >= clen;
    bson_iter_t a;
    if (numeric && find_key(container, path, clen, &a)) {
        if (!rest) {
            /* A path ending at an index: that element, unexpanded. */
            if (leaf(arg, &a, false))
                return true;
        } else if (BSON_ITER_HOLDS_DOCUMENT(&a) || BSON_ITER_HOLDS_ARRAY(&a)) {
            bson_iter_t child;
            bson_iter_recurse(&a, &child);
            if (walk(&child, BSON_ITER_HOLDS_DOCUMENT(&a), rest, leaf, arg, off))
                return true;
        }
    }
    bool any_doc = false;
    for (int64_t idx = 0; bson_iter_next(&it); idx++) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            continue;
        any_doc = true;
        bson_iter_t child;
        bson_iter_recurse(&it, &child);
        /* The first array the path goes through gives the position. */
        bool outer = off && *off < 0;
        if (outer)
            *off = idx;
        if (walk(&child, true, path, leaf, arg, off))
            return true;
        if (outer)
            *off = -1;
    }
    (void)any_doc; /* an array with no documents yields nothing (7.0) */
    return false;
}

typedef struct cond_arg {
    const cond *c;
    int64_t off;  /* the position in the first array traversed, or -1 */
    int64_t *pos; /* where a match records its position, or NULL */
} cond_arg;

/* The index of the first element of array `v` through which `c` holds,
 * or -1 (not an array, or a condition on the whole array). */
static int64_t leaf_pos(const cond *c, const bson_iter_t *v)
{
    if (!v || !BSON_ITER_HOLDS_ARRAY(v))
        return -1;
    bson_iter_t el;
    bson_iter_recurse(v, &el);
    for (int64_t i = 0; bson_iter_next(&el); i++) {
        bool ok;
        switch (c->kind) {
        case C_ELEM_VAL: ok = element_matches_all(c->sub, c->nsub, &el); break;
        case C_ELEM_OBJ: {
            uint32_t len;
            const uint8_t *data;
            bson_t sub;
            if (BSON_ITER_HOLDS_DOCUMENT(&el))
                bson_iter_document(&el, &len, &data);
            else if (BSON_ITER_HOLDS_ARRAY(&el))
                bson_iter_array(&el, &len, &data);
            else
                continue;
            bson_init_static(&sub, data, len);
            ok = eval_node(c->elem, &sub, NULL, NULL);
            break;
        }
        case C_SIZE: case C_ALL: case C_EXISTS: case C_NE: case C_NIN: case C_NOT:
            return -1;
        default: ok = value_matches(c, &el);
        }
        if (ok)
            return i;
    }
    return -1;
}

static bool leaf_cb(void *arg, const bson_iter_t *v, bool expand)
{
    cond_arg *a = arg;
    if (!leaf_matches(a->c, v, expand))
        return false;
    if (a->pos) {
        int64_t at = a->off >= 0 ? a->off
                     : expand || a->c->kind == C_ELEM_VAL || a->c->kind == C_ELEM_OBJ
                         ? leaf_pos(a->c, v)
                         : -1;
        if (at >= 0)
            *a->pos = at;
    }
    return true;
}

/* Whether condition `c` on `path` holds for `doc`; a positive condition
 * that matches through an array records the position in `*pos` (if not
 * NULL). */
static bool path_cond(const char *path, const cond *c, const bson_t *doc, int64_t *pos)
{
    bson_iter_t it;
    bson_iter_init(&it, doc);
    switch (c->kind) {
    case C_NE: {
        cond eq = *c;
        eq.kind = C_EQ;
        cond_arg a = {&eq, -1, NULL};
        return !walk(&it, true, path, leaf_cb, &a, NULL);
    }
    case C_NIN: {
        cond in = *c;
        in.kind = C_IN;
        cond_arg a = {&in, -1, NULL};
        return !walk(&it, true, path, leaf_cb, &a, NULL);
    }
    case C_NOT:
        for (size_t i = 0; i < c->nsub; i++)
            if (!path_cond(path, &c->sub[i], doc, NULL))
                return true;
        return false;
    case C_ALL:
        /* mongod's $all is an $and of its values' conditions, each over
         * the whole path: through an array of documents each may match in
         * another element ({"c.d": {$all: [1, 2]}} on {c: [{d: 1}, {d:
         * 2}]}). */
        if (c->nsub == 0)
            return false;
        for (size_t i = 0; i < c->nsub; i++)
            if (!path_cond(path, &c->sub[i], doc, pos))
                return false;
        return true;
    case C_EXISTS:
        if (!c->exists) { /* Not(Exists) over the whole path */
            cond ex = *c;
            ex.exists = true;
            cond_arg a = {&ex, -1, NULL};
            return !walk(&it, true, path, leaf_cb, &a, NULL);
        }
        /* fall through */
    default: {
        cond_arg a = {c, -1, pos};
        return walk(&it, true, path, leaf_cb, &a, pos ? &a.off : NULL);
    }
    }
}


/* Whether a condition is path_cond's default case: the walk's one value
 * (or its absence) decides, with no negation over the whole path. */
static bool positive_cond(const cond *c)
{
    switch (c->kind) {
    case C_NE: case C_NIN: case C_NOT: return false;
    case C_EXISTS: return c->exists;
    default: return true;
    }
}

/* The conditions on one field name, no position wanted: the field is
 * looked up once for all of them.  On such a path the walk reaches exactly
 * one value, the first field of that name, or none, so each positive
 * condition is leaf_matches of it, as path_cond would find; the others
 * take their own walk. */
static bool flat_conds(const node *n, const bson_t *doc)
{
    bson_iter_t it, found;
    const bson_iter_t *v = NULL;
    if (bson_iter_init(&it, doc) && find_key(&it, n->path, n->path_len, &found))
        v = &found;
    for (size_t i = 0; i < n->nconds; i++) {
        const cond *c = &n->conds[i];
        if (!(positive_cond(c) ? leaf_matches(c, v, true) : path_cond(n->path, c, doc, NULL)))
            return false;
    }
    return true;
}

/* An $expr against the whole document.  An evaluation error fails the
 * query: it is kept in `x` (the first one) and the node is false. */
static bool eval_expr(const node *n, const bson_t *doc, ectx *x)
{
    if (!x || x->rc)
        return false;
    bson_value_t v;
    int rc = x->hooks->eval(n->expr, doc, NULL, x->hooks->arg, &v, x->err);
    if (rc) {
        x->rc = rc;
        return false;
    }
    bool ok = mf_bsonx_truthy(&v);
    x->hooks->free_value(&v);
    return ok;
}

/* `pos` as for path_cond: $and keeps the last position recorded, $or the
 * position of the clause that matched; negations record none.  `x` is
 * NULL below an $elemMatch, where no $expr stands. */
static bool eval_node(const node *n, const bson_t *doc, int64_t *pos, ectx *x)
{
    switch (n->kind) {
    case N_AND:
        for (size_t i = 0; i < n->nkids; i++)
            if (!eval_node(n->kids[i], doc, pos, x))
                return false;
        return true;
    case N_OR:
        for (size_t i = 0; i < n->nkids; i++) {
            int64_t before = pos ? *pos : -1;
            if (eval_node(n->kids[i], doc, pos, x))
                return true;
            if (pos)
                *pos = before;
        }
        return false;
    case N_NOR:
        for (size_t i = 0; i < n->nkids; i++)
            if (eval_node(n->kids[i], doc, NULL, x))
                return false;
        return true;
    case N_EXPR:
        return eval_expr(n, doc, x);
    case N_TEXT:
        return !(x && x->text_false);
    case N_SCHEMA:
        return mf_schema_match(n->schema, doc);
    case N_PATH:
        if (n->flat && !pos)
            return flat_conds(n, doc);
        for (size_t i = 0; i < n->nconds; i++)
            if (!path_cond(n->path, &n->conds[i], doc, pos))
                return false;
        return true;
    }
    return false;
}

int mf_matcher_eval(const mf_matcher *m, const bson_t *doc, int64_t *pos, bool *matched,
                    mf_error *err)
{
    mf_error scratch;
    ectx x = {&m->hooks, err ? err : &scratch, 0, m->text_false};
    int64_t at = -1;
    bool ok = eval_node(m->root, doc, pos ? &at : NULL, &x);
    if (x.rc)
        ok = false;
    if (pos)
        *pos = ok ? at : -1;
    *matched = ok;
    return x.rc;
}

bool mf_matcher_match(const mf_matcher *m, const bson_t *doc)
{
    bool ok;
    mf_matcher_eval(m, doc, NULL, &ok, NULL);
    return ok;
}

bool mf_matcher_match_pos(const mf_matcher *m, const bson_t *doc, int64_t *pos)
{
    bool ok;
    mf_matcher_eval(m, doc, pos, &ok, NULL);
    return ok;
}

/* ------------------------------------------------- why a document failed */

/*
 * mf_matcher_explain: mongod's document validation error details
 * (doc_validation_error.cpp), from a matcher parsed for a validator.
 *
 * The tree is walked "normally" (this node failed) or "inverted" (it
 * matched under a negation).  A filter document's AND holds one clause per
 * operator -- {a: {$gt: 0, $lt: 9}} is two -- and stands aside for a
 * single clause; an explicit $and keeps even one.  A normal $and reports
 * the clauses that failed, a normal $or all of them, a $nor the clauses
 * that matched (inverted); under a negation the roles swap.  A leaf gives
 * its operator, the operator as written, the reason, and the values the
 * path reached (arrays expanded, but for $size, $all and $elemMatch).
 */

#define MAX_CONSIDERED 10

/* A clause of an AND, OR or NOR: a node, or one condition of a path. */
typedef struct clause {
    const node *n;
    const cond *c; /* NULL: the node itself */
} clause;

static size_t clauses_of(const node *n, clause *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n->nkids; i++) {
        const node *kid = n->kids[i];
        if (kid->kind == N_PATH) {
            for (size_t j = 0; j < kid->nconds; j++) {
                if (out)
                    out[k] = (clause){kid, &kid->conds[j]};
                k++;
            }
        } else {
            if (out)
                out[k] = (clause){kid, NULL};
            k++;
        }
    }
    return k;
}

static bool clause_matches(const clause *cl, const bson_t *doc, const mf_expr_hooks *hooks)
{
    if (cl->c)
        return path_cond(cl->n->path, cl->c, doc, NULL);
    mf_error scratch;
    ectx x = {hooks, &scratch, 0, false};
    bool ok = eval_node(cl->n, doc, NULL, &x);
    return ok && x.rc == 0;
}

static void explain_node(const node *n, const bson_t *doc, bool inv, const mf_expr_hooks *hooks,
                         bson_t *out);
static void explain_leaf(const char *path, const cond *c, const bson_t *doc, bool inv,
                         bson_t *out);

static void explain_clause(const clause *cl, const bson_t *doc, bool inv,
                           const mf_expr_hooks *hooks, bson_t *out)
{
    if (cl->c)
        explain_leaf(cl->n->path, cl->c, doc, inv, out);
    else
        explain_node(cl->n, doc, inv, hooks, out);
}

/* The values `path` reaches in `doc`, for a leaf's consideredValue(s). */
typedef struct considered {
    bson_t arr;
    uint32_t n;      /* values kept (at most MAX_CONSIDERED) */
    uint32_t total;  /* values found */
    bool reached;    /* the path exists somewhere */
    bool whole;      /* an array is one value ($size, $all, $elemMatch) */
    const char *types[32]; /* the distinct type names seen */
    size_t ntypes;
} considered;

static void consider(considered *cv, const bson_iter_t *v)
{
    const char *t = mf_bsonx_type_alias(bson_iter_type(v));
    size_t i;
    for (i = 0; i < cv->ntypes && strcmp(cv->types[i], t) != 0; i++)
        ;
    if (i == cv->ntypes && cv->ntypes < 32)
        cv->types[cv->ntypes++] = t;
    if (cv->n < MAX_CONSIDERED) {
        char buf[16];
        const char *key;
        bson_uint32_to_string(cv->n++, &key, buf, sizeof buf);
        mf_bsonx_append_iter(&cv->arr, key, (int)strlen(key), v);
    }
    cv->total++;
}

static bool consider_cb(void *arg, const bson_iter_t *v, bool expand)
{
    considered *cv = arg;
    if (!v)
        return false;
    cv->reached = true;
    if (expand && !cv->whole && BSON_ITER_HOLDS_ARRAY(v)) {
        bson_iter_t el;
        bson_iter_recurse(v, &el);
        while (bson_iter_next(&el))
            consider(cv, &el);
    } else {
        consider(cv, v);
    }
    return false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* consideredType / consideredTypes, sorted. */
static void append_types(bson_t *out, considered *cv)
{
    if (cv->ntypes == 1) {
        BSON_APPEND_UTF8(out, "consideredType", cv->types[0]);
        return;
    }
    qsort(cv->types, cv->ntypes, sizeof cv->types[0], cmp_str);
    bson_t a;
    BSON_APPEND_ARRAY_BEGIN(out, "consideredTypes", &a);
    for (size_t i = 0; i < cv->ntypes; i++) {
        char buf[16];
        const char *key;
        bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
        bson_append_utf8(&a, key, -1, cv->types[i], -1);
    }
    bson_append_array_end(out, &a);
}

static void append_values(bson_t *out, considered *cv)
{
    bson_iter_t it;
    if (cv->total == 1 && bson_iter_init(&it, &cv->arr) && bson_iter_next(&it)) {
        mf_bsonx_append_iter(out, "consideredValue", 15, &it);
        return;
    }
    bson_append_array(out, "consideredValues", -1, &cv->arr);
    if (cv->total > cv->n)
        BSON_APPEND_BOOL(out, "consideredValuesTruncated", true);
}

static const char *op_name(const cond *c)
{
    switch (c->kind) {
    case C_EQ: return "$eq";
    case C_NE: return "$ne";
    case C_GT: return "$gt";
    case C_GTE: return "$gte";
    case C_LT: return "$lt";
    case C_LTE: return "$lte";
    case C_IN: return "$in";
    case C_NIN: return "$nin";
    case C_EXISTS: return "$exists";
    case C_TYPE: return "$type";
    case C_MOD: return "$mod";
    case C_REGEX: return "$regex";
    case C_SIZE: return "$size";
    case C_ALL: return "$all";
    case C_ELEM_VAL: case C_ELEM_OBJ: return "$elemMatch";
    case C_BITS_ALL_SET: return "$bitsAllSet";
    case C_BITS_ANY_SET: return "$bitsAnySet";
    case C_BITS_ALL_CLEAR: return "$bitsAllClear";
    case C_BITS_ANY_CLEAR: return "$bitsAnyClear";
    case C_NOT: return "$not";
    case C_GEO: return "$geoWithin";
    }
    return "";
}

/* A geo condition's operator as written ($geoWithin, $within or
 * $geoIntersects): the first field of its section. */
static const char *geo_name(const cond *c)
{
    bson_iter_t it, sub;
    if (c->spec && bson_iter_init(&it, c->spec) && bson_iter_next(&it) &&
        bson_iter_recurse(&it, &sub) && bson_iter_next(&sub))
        return bson_iter_key(&sub);
    return "$geoWithin";
}

/* The reasons of a leaf: when it failed, and when it matched under a
 * negation. */
static void reasons(const cond *c, const char **normal, const char **inverted)
{
    const char *n = "", *i = "";
    switch (c->kind) {
    case C_EQ: case C_GT: case C_GTE: case C_LT: case C_LTE:
        n = "comparison failed"; i = "comparison succeeded"; break;
    case C_NE: /* Not(Eq): it fails where the equality succeeds */
        n = "comparison succeeded"; i = "comparison failed"; break;
    case C_IN:
        n = "no matching value found in array"; i = "matching value found in array"; break;
    case C_NIN:
        n = "matching value found in array"; i = "no matching value found in array"; break;
    case C_EXISTS:
        n = c->exists ? "path does not exist" : "path does exist";
        i = c->exists ? "path does exist" : "path does not exist";
        break;
    case C_TYPE: n = "type did not match"; i = "type did match"; break;
    case C_MOD:
        n = "$mod did not evaluate to expected remainder";
        i = "$mod did evaluate to expected remainder";
        break;
    case C_REGEX: n = "regular expression did not match"; i = "regular expression did match"; break;
    case C_SIZE:
        n = "array length was not equal to given size";
        i = "array length was equal to given size";
        break;
    case C_ALL:
        n = "array did not contain all specified values";
        i = "array did contain all specified values";
        break;
    case C_ELEM_VAL: case C_ELEM_OBJ:
        n = "array did not satisfy the child predicate";
        i = "array did satisfy the child predicate";
        break;
    case C_BITS_ALL_SET: case C_BITS_ANY_SET: case C_BITS_ALL_CLEAR: case C_BITS_ANY_CLEAR:
        n = "bitwise operator failed to match";
        i = "bitwise operator matched successfully";
        break;
    case C_GEO:
        if (strcmp(geo_name(c), "$geoIntersects") == 0) {
            n = "none of the considered geometries intersected the expression\xe2\x80\x99s geometry";
            i = "at least one of considered geometries intersected the expression\xe2\x80\x99s "
                "geometry";
        } else {
            n = "none of the considered geometries were contained within the expression\xe2\x80\x99s "
                "geometry";
            i = "at least one of considered geometries was contained within the "
                "expression\xe2\x80\x99s geometry";
        }
        break;
    case C_NOT:
        break;
    }
    *normal = n;
    *inverted = i;
}

/* The types a leaf can apply to, sorted, when it has such a list. */
static size_t expected_types(const cond *c, const char *const **out)
{
    static const char *const numbers[] = {"decimal", "double", "int", "long"};
    static const char *const regex[] = {"regex", "string", "symbol"};
    static const char *const bits[] = {"binData", "decimal", "double", "int", "long"};
    static const char *const array[] = {"array"};
    switch (c->kind) {
    case C_MOD: *out = numbers; return 4;
    case C_REGEX: *out = regex; return 3;
    case C_BITS_ALL_SET: case C_BITS_ANY_SET: case C_BITS_ALL_CLEAR: case C_BITS_ANY_CLEAR:
        *out = bits; return 5;
    case C_SIZE: case C_ELEM_VAL: case C_ELEM_OBJ: *out = array; return 1;
    default: return 0;
    }
}

static void explain_leaf(const char *path, const cond *c, const bson_t *doc, bool inv, bson_t *out)
{
    const char *normal, *inverted;
    if (c->kind == C_NOT) {
        bson_t d;
        BSON_APPEND_UTF8(out, "operatorName", "$not");
        BSON_APPEND_DOCUMENT_BEGIN(out, "details", &d);
        if (c->nsub == 1) {
            explain_leaf(path, &c->sub[0], doc, !inv, &d);
        } else {
            /* an AND of its operators, seen the other way up */
            bool sub_inv = !inv;
            bson_t a;
            uint32_t k = 0;
            BSON_APPEND_UTF8(&d, "operatorName", "$and");
            BSON_APPEND_ARRAY_BEGIN(&d, sub_inv ? "clausesSatisfied" : "clausesNotSatisfied", &a);
            for (size_t i = 0; i < c->nsub; i++) {
                if (!sub_inv && path_cond(path, &c->sub[i], doc, NULL))
                    continue;
                char buf[16];
                const char *key;
                bson_t e, det;
                bson_uint32_to_string(k++, &key, buf, sizeof buf);
                bson_append_document_begin(&a, key, -1, &e);
                BSON_APPEND_INT32(&e, "index", (int32_t)i);
                BSON_APPEND_DOCUMENT_BEGIN(&e, "details", &det);
                explain_leaf(path, &c->sub[i], doc, sub_inv, &det);
                bson_append_document_end(&e, &det);
                bson_append_document_end(&a, &e);
            }
            bson_append_array_end(&d, &a);
        }
        bson_append_document_end(out, &d);
        return;
    }
    reasons(c, &normal, &inverted);
    BSON_APPEND_UTF8(out, "operatorName", c->kind == C_GEO ? geo_name(c) : op_name(c));
    if (c->spec)
        BSON_APPEND_DOCUMENT(out, "specifiedAs", c->spec);
    if (c->kind == C_EXISTS) {
        BSON_APPEND_UTF8(out, "reason", inv ? inverted : normal);
        return;
    }
    if (c->kind == C_ALL && c->nsub == 0) {
        BSON_APPEND_UTF8(out, "reason", inv ? "expression always evaluates to true"
                                            : "expression always evaluates to false");
        return;
    }
    considered cv;
    memset(&cv, 0, sizeof cv);
    bson_init(&cv.arr);
    cv.whole = c->kind == C_SIZE || c->kind == C_ALL || c->kind == C_ELEM_VAL ||
               c->kind == C_ELEM_OBJ;
    bson_iter_t it;
    bson_iter_init(&it, doc);
    walk(&it, true, path, consider_cb, &cv, NULL);
    if (!cv.reached) {
        BSON_APPEND_UTF8(out, "reason", "field was missing");
        bson_destroy(&cv.arr);
        return;
    }
    if (c->kind == C_TYPE) {
        BSON_APPEND_UTF8(out, "reason", inv ? inverted : normal);
        append_values(out, &cv);
        if (cv.ntypes)
            append_types(out, &cv);
        bson_destroy(&cv.arr);
        return;
    }
    const char *const *expected = NULL;
    size_t nexpected = expected_types(c, &expected);
    bool any_expected = false;
    for (size_t i = 0; i < cv.ntypes && !any_expected; i++)
        for (size_t j = 0; j < nexpected; j++)
            if (strcmp(cv.types[i], expected[j]) == 0)
                any_expected = true;
    if (nexpected && !any_expected) {
        BSON_APPEND_UTF8(out, "reason", "type did not match");
        if (cv.ntypes)
            append_types(out, &cv);
        if (nexpected == 1) {
            BSON_APPEND_UTF8(out, "expectedType", expected[0]);
        } else {
            bson_t a;
            BSON_APPEND_ARRAY_BEGIN(out, "expectedTypes", &a);
            for (size_t j = 0; j < nexpected; j++) {
                char buf[16];
                const char *key;
                bson_uint32_to_string((uint32_t)j, &key, buf, sizeof buf);
                bson_append_utf8(&a, key, -1, expected[j], -1);
            }
            bson_append_array_end(out, &a);
        }
    } else {
        BSON_APPEND_UTF8(out, "reason", inv ? inverted : normal);
    }
    append_values(out, &cv);
    bson_destroy(&cv.arr);
}

static void explain_expr(const node *n, const bson_t *doc, bool inv, const mf_expr_hooks *hooks,
                         bson_t *out)
{
    BSON_APPEND_UTF8(out, "operatorName", "$expr");
    if (n->spec)
        BSON_APPEND_DOCUMENT(out, "specifiedAs", n->spec);
    bson_value_t v;
    mf_error err;
    if (hooks->eval(n->expr, doc, NULL, hooks->arg, &v, &err) != 0) {
        bson_t d;
        char scratch[32];
        BSON_APPEND_UTF8(out, "reason", "failed to evaluate aggregation expression");
        BSON_APPEND_DOCUMENT_BEGIN(out, "details", &d);
        BSON_APPEND_INT32(&d, "code", err.code);
        BSON_APPEND_UTF8(&d, "codeName", mf_error_name(err.code, scratch));
        BSON_APPEND_UTF8(&d, "errmsg", err.msg);
        bson_append_document_end(out, &d);
        return;
    }
    BSON_APPEND_UTF8(out, "reason", inv ? "expression did match" : "expression did not match");
    if (v.value_type == BSON_TYPE_EOD) {
        /* a missing value is reported as mongod's Value() appends: not at all */
    } else {
        bson_append_value(out, "expressionResult", -1, &v);
    }
    hooks->free_value(&v);
}

static void explain_node(const node *n, const bson_t *doc, bool inv, const mf_expr_hooks *hooks,
                         bson_t *out)
{
    switch (n->kind) {
    case N_EXPR:
        explain_expr(n, doc, inv, hooks, out);
        return;
    case N_SCHEMA:
        mf_schema_explain(n->schema, doc, inv, out);
        return;
    case N_TEXT: /* a validator has none */
        BSON_APPEND_UTF8(out, "operatorName", "$text");
        return;
    case N_PATH: { /* a lone path node: its conditions as an AND */
        node and = {.kind = N_AND, .kids = (node **)&n, .nkids = 1, .doc_level = true};
        explain_node(&and, doc, inv, hooks, out);
        return;
    }
    case N_AND: case N_OR: case N_NOR:
        break;
    }
    size_t nc = clauses_of(n, NULL);
    clause one, *cl = nc <= 1 ? &one : malloc(nc * sizeof *cl);
    if (!cl)
        return;
    clauses_of(n, cl);
    if (n->doc_level && nc == 1) {
        explain_clause(&cl[0], doc, inv, hooks, out);
        return;
    }
    bool kid_inv = n->kind == N_NOR ? !inv : inv;
    /* which clauses are told: those that decided the outcome */
    int only; /* 1: the matching ones, 0: the failing ones, -1: all */
    const char *label;
    switch (n->kind) {
    case N_AND: only = inv ? -1 : 0; label = inv ? "clausesSatisfied" : "clausesNotSatisfied"; break;
    case N_OR: only = inv ? 1 : -1; label = inv ? "clausesSatisfied" : "clausesNotSatisfied"; break;
    default: only = inv ? -1 : 1; label = inv ? "clausesNotSatisfied" : "clausesSatisfied"; break;
    }
    BSON_APPEND_UTF8(out, "operatorName", n->kind == N_AND ? "$and" : n->kind == N_OR ? "$or"
                                                                                      : "$nor");
    bson_t a;
    uint32_t k = 0;
    BSON_APPEND_ARRAY_BEGIN(out, label, &a);
    for (size_t i = 0; i < nc; i++) {
        if (only >= 0 && clause_matches(&cl[i], doc, hooks) != (only == 1))
            continue;
        char buf[16];
        const char *key;
        bson_t e, det;
        bson_uint32_to_string(k++, &key, buf, sizeof buf);
        bson_append_document_begin(&a, key, -1, &e);
        BSON_APPEND_INT32(&e, "index", (int32_t)i);
        BSON_APPEND_DOCUMENT_BEGIN(&e, "details", &det);
        explain_clause(&cl[i], doc, kid_inv, hooks, &det);
        bson_append_document_end(&e, &det);
        bson_append_document_end(&a, &e);
    }
    bson_append_array_end(out, &a);
    if (cl != &one)
        free(cl);
}

void mf_matcher_explain(const mf_matcher *m, const bson_t *doc, bson_t *out)
{
    explain_node(m->root, doc, false, &m->hooks, out);
}
