/*
 * expr_int.h -- private to csrc/agg/expr*.c: the expression tree, the
 * evaluation context, and the helpers the operator files share.
 *
 * expr.c holds the parser, the evaluator, variables, arithmetic,
 * comparison and conditionals; expr_string.c, expr_array.c,
 * expr_object.c and expr_date.c each add a table of operators (mfi_expr_*_ops) that
 * find_op in expr.c searches after its own.
 *
 * Ownership: every `val` an evaluator writes owns its memory (see expr.c);
 * the caller frees it with mfi_val_free.  An evaluator that fails leaves
 * its output missing and frees whatever it evaluated.
 */
#ifndef MF_AGG_EXPR_INT_H
#define MF_AGG_EXPR_INT_H

#include "agg.h"

#include <stdint.h>

typedef bson_value_t val; /* BSON_TYPE_EOD = missing */

enum { K_CONST, K_PATH, K_VAR, K_OP, K_OBJ, K_ARR };
enum { VAR_ROOT = -1, VAR_CURRENT = -2, VAR_REMOVE = -3, VAR_NOW = -4 };

typedef struct node node;
typedef struct ctx ctx;
typedef int (*eval_fn)(const node *n, ctx *c, val *out);

typedef struct op_def {
    const char *name;
    eval_fn eval;
    int min, max; /* operand count; max -1: no limit */
    int (*parse)(const struct op_def *op, const bson_iter_t *it, void *scope, node *n,
                 mf_error *err); /* NULL: operands as a list */
} op_def;

struct node {
    int kind;
    const op_def *op;
    val cst;        /* K_CONST */
    char **parts;   /* K_PATH, K_VAR: path components after the variable */
    size_t nparts;
    int slot;       /* K_VAR */
    node **args;    /* K_OP operands, K_OBJ values, K_ARR elements */
    size_t nargs;
    char **names;   /* K_OBJ field names */
    int *slots;     /* $let: the slot of each binding (args[0..nargs-2]) */
};

struct ctx {
    const bson_t *root;      /* $$CURRENT: what field paths read */
    const bson_t *top;       /* $$ROOT (the same document but inside $redact) */
    const mf_expr_vars *vars;
    val *slots;
    mf_error *err;
};

/* The variables visible while parsing: a stack of (name, slot). */
typedef struct scope {
    const char **names;
    int *slots;
    size_t n, cap;
    int nslots;
    uint32_t meta_kinds; /* the metadata {$meta: ...} asks for (MF_META_BIT) */
} scope;

/* The collation the context's comparisons use (NULL: simple). */
static inline const mf_collator *ctx_coll(const ctx *c)
{
    return c->vars ? c->vars->coll : NULL;
}

static inline bool nullish(const val *v)
{
    return v->value_type == BSON_TYPE_EOD || v->value_type == BSON_TYPE_NULL ||
           v->value_type == BSON_TYPE_UNDEFINED;
}

static inline bool is_num(const val *v)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32: case BSON_TYPE_INT64: case BSON_TYPE_DOUBLE: case BSON_TYPE_DECIMAL128:
        return true;
    default:
        return false;
    }
}
static inline void set_null(val *v) { v->value_type = BSON_TYPE_NULL; }
static inline void set_bool(val *v, bool b) { v->value_type = BSON_TYPE_BOOL; v->value.v_bool = b; }
static inline void set_int(val *v, int32_t i) { v->value_type = BSON_TYPE_INT32; v->value.v_int32 = i; }
static inline void set_long(val *v, int64_t i) { v->value_type = BSON_TYPE_INT64; v->value.v_int64 = i; }
static inline void set_double(val *v, double d) { v->value_type = BSON_TYPE_DOUBLE; v->value.v_double = d; }
static inline void set_date(val *v, int64_t ms) { v->value_type = BSON_TYPE_DATE_TIME; v->value.v_datetime = ms; }
static inline void set_dec(val *v, mf_dec d) { v->value_type = BSON_TYPE_DECIMAL128; v->value.v_decimal128 = d; }

/* mongod's Value::createIntOrLong. */
static inline void set_int_or_long(val *v, int64_t i)
{
    if (i >= INT32_MIN && i <= INT32_MAX)
        set_int(v, (int32_t)i);
    else
        set_long(v, i);
}

static inline double as_double(const val *v)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32: return v->value.v_int32;
    case BSON_TYPE_INT64: return (double)v->value.v_int64;
    case BSON_TYPE_DOUBLE: return v->value.v_double;
    case BSON_TYPE_DECIMAL128: return mf_dec_to_double(v->value.v_decimal128, NULL);
    default: return 0;
    }
}

/* mongod's Value::coerceToDecimal: integers exactly, a double rounded to 15
 * digits. */
static inline mf_dec as_dec(const val *v)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32: return mf_dec_from_int64(v->value.v_int32);
    case BSON_TYPE_INT64: return mf_dec_from_int64(v->value.v_int64);
    case BSON_TYPE_DOUBLE: return mf_dec_from_double(v->value.v_double);
    case BSON_TYPE_DECIMAL128: return v->value.v_decimal128;
    default: return mf_dec_from_int64(0);
    }
}

static inline int64_t as_long(const val *v) /* int types, or a double truncated (in range) */
{
    switch (v->value_type) {
    case BSON_TYPE_INT32: return v->value.v_int32;
    case BSON_TYPE_INT64: return v->value.v_int64;
    case BSON_TYPE_DOUBLE: return (int64_t)v->value.v_double;
    case BSON_TYPE_DECIMAL128:
        return mf_dec_to_int64(v->value.v_decimal128, MF_DEC_HALF_EVEN, NULL);
    default: return 0;
    }
}


/* expr.c: values */
void mfi_val_free(val *v);
int mfi_set_steal(val *v, bson_t *b, bson_type_t t, mf_error *err);
const char *mfi_type_name(const val *v);
/* Compare in MongoDB's order, strings under `coll` (NULL: simple); missing
 * sorts with undefined, below null.  Operators pass their context's
 * collation (ctx_coll); comparisons that can only meet numbers and dates
 * pass NULL. */
int mfi_val_cmp(const val *a, const val *b, const mf_collator *coll);
/* A qsort_r comparator of vals: `arg` is the collator (may be NULL). */
int mfi_val_cmp_r(const void *a, const void *b, void *coll);
bool mfi_truthy(const val *v);
void mfi_val_str(const val *v, char *out, size_t cap);
void mfi_arr_push(bson_t *b, uint32_t i, const val *v);
/* Whether a number is an integer that fits in 32 bits (Value::integral). */
bool mfi_integral32(const val *v);

/* expr_string.c: shared with the other operator files */
int mfi_set_str(val *v, const char *s, size_t len, mf_error *err);
int mfi_coerce_to_string(const val *v, val *out, mf_error *err);
int mfi_index_arg(const char *op, const char *what, const val *v, int64_t *out, mf_error *err);
int mfi_parse_named(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                    const char *const *names, size_t k, unsigned optional, int c_obj,
                    const char *obj_fmt, int c_unknown, const int *c_missing,
                    const char *missing_fmt, mf_error *err);

/* expr.c: parsing */
int mfi_push_arg(node *n, node *a, mf_error *err);
int mfi_scope_push(scope *s, const char *name, int *slot, mf_error *err);
int mfi_check_var_name(const char *name, mf_error *err);
int mfi_parse_node(const bson_iter_t *it, scope *sc, node **out, mf_error *err);
int mfi_parse_args(const op_def *op, const bson_iter_t *it, void *vsc, node *n, mf_error *err);

/* expr.c: evaluation */
int mfi_eval(const node *n, ctx *c, val *out);
int mfi_eval_all(const node *n, ctx *c, val *v);
void mfi_free_all(val *v, size_t k);

/* The operator tables of the other files. */
extern const op_def mfi_expr_string_ops[];
extern const size_t mfi_expr_nstring_ops;
extern const op_def mfi_expr_array_ops[];
extern const size_t mfi_expr_narray_ops;
extern const op_def mfi_expr_object_ops[];
extern const size_t mfi_expr_nobject_ops;
extern const op_def mfi_expr_acc_ops[];
extern const size_t mfi_expr_nacc_ops;
extern const op_def mfi_expr_date_ops[];
extern const size_t mfi_expr_ndate_ops;

/* expr_date.c: a date string to milliseconds since the epoch, as mongod's
 * $dateFromString (and $convert to date): `format` (may be NULL: ISO 8601
 * and the other forms mongod's parser accepts) uses the %-specifiers of
 * $dateFromString; `tz` (may be NULL: UTC) is an Olson name or a UTC
 * offset and applies when the string names no zone.  Errors: 241
 * ConversionFailure (unparsable, incomplete or invalid date, a zone both in
 * the string and in `tz`), 18535/18536 a bad format, 40485 an unknown tz. */
int mfi_date_from_string(const char *s, size_t len, const char *format, const char *tz,
                         int64_t *ms, mf_error *err);
extern const op_def mfi_expr_convert_ops[];
extern const size_t mfi_expr_nconvert_ops;
extern const op_def mfi_expr_regex_ops[];
extern const size_t mfi_expr_nregex_ops;

#endif /* MF_AGG_EXPR_INT_H */
