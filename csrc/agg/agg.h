/*
 * agg.h -- the aggregation layer: the expression language (expr.c); later
 * the pipeline and its stages.
 *
 * Sits between query/ (below) and command/ (above): the pipeline, `$expr`
 * in a filter, pipeline-style updates and a command's `let` all parse an
 * expression once with mf_expr_parse and evaluate it per document.
 *
 * Value model.  An expression evaluates to a BSON value or to "missing"
 * (mongod's Value(), the EOO type): a missing field, `$$REMOVE`, an object
 * expression's absent member.  Missing is not null: operators that take
 * null propagate null for both ("nullish"), but comparisons see missing as
 * less than null ({$eq: ["$nope", null]} is false), an object expression
 * drops a missing member, an array expression stores null for it, and a
 * result that is missing appends nothing to the caller's document.
 */
#ifndef MF_AGG_H
#define MF_AGG_H

#include "../bsonx/bsonx.h"
#include "../query/meta.h"

#include <bson/bson.h>

typedef struct mf_expr mf_expr;

/* What evaluation sees besides the document: the value of $$NOW (taken
 * from the wall clock when `has_now` is false), the values of the
 * command-level variables (`let`), a document {name: value, ...}, and the
 * operation's collation.
 *
 * Collation.  mongod binds the collator in the ExpressionContext, so every
 * expression of an operation compares strings under the operation's
 * collation; here it travels with the variables to every evaluation.  It
 * applies wherever values are compared or equated: $eq $ne $gt $gte $lt
 * $lte $cmp, $in, $indexOfArray, the set operators ($setEquals $setUnion
 * $setIntersection $setDifference $setIsSubset), $max $min $minN $maxN,
 * $sortArray -- strings and symbols at any depth of the values.  Never:
 * $regexMatch/$regexFind/$regexFindAll, $strcasecmp, $toUpper/$toLower,
 * $split, $indexOfBytes/$indexOfCP, $replaceOne/$replaceAll, $type, field
 * names.  NULL is the simple (binary) collation. */
typedef struct mf_expr_vars {
    int64_t now_ms;
    bool has_now;
    const bson_t *let;         /* may be NULL; borrowed for the call */
    const mf_collator *coll;   /* may be NULL (simple); borrowed for the call */
    /* The metadata of the document evaluated ({$meta: ...} reads it; NULL:
     * none, every $meta is missing); borrowed for the call. */
    const mf_meta *meta;
} mf_expr_vars;

/* Parse the aggregation expression at `it` (a literal, "$field.path",
 * "$$var.path", an operator document {$add: [...]}, an object expression
 * {a: <expr>, ...} or an array of expressions).  `let_names` (nlet of them,
 * may be NULL) are the user variables in scope at the top level; their
 * values come from mf_expr_vars.let at evaluation.
 * On success *out is an owned tree (free with mf_expr_free); it does not
 * borrow from `it`.  Errors as mongod's: 168 InvalidPipelineOperator
 * "Unrecognized expression '$foo'", 16020 arity, 17276 "Use of undefined
 * variable: x", 15983 an operator document with more than one field, the
 * operators' own parse errors. */
int mf_expr_parse(const bson_iter_t *it, const char *const *let_names, size_t nlet,
                  mf_expr **out, mf_error *err);

/* Evaluate `e` against `root` ($$ROOT and $$CURRENT), appending the result
 * under `key` to `out`.  When the result is missing nothing is appended and
 * *missing is set (it is cleared otherwise).  `vars` may be NULL.  Errors:
 * the operators' runtime errors as mongod's (16608 "can't $divide by zero",
 * 241 ConversionFailure from $convert without onError, ...).  On error
 * `out` is unchanged. */
int mf_expr_eval(const mf_expr *e, const bson_t *root, const mf_expr_vars *vars, bson_t *out,
                 const char *key, bool *missing, mf_error *err);

/* As mf_expr_eval, into `out`: an owned value (free with mf_value_free),
 * BSON_TYPE_EOD when missing. */
int mf_expr_eval_value(const mf_expr *e, const bson_t *root, const mf_expr_vars *vars,
                       bson_value_t *out, mf_error *err);

/* As mf_expr_eval_value with $$CURRENT (what "$field" paths read) a
 * different document than $$ROOT: $redact descending into sub-documents. */
int mf_expr_eval_value_at(const mf_expr *e, const bson_t *root, const bson_t *current,
                          const mf_expr_vars *vars, bson_value_t *out, mf_error *err);

void mf_value_free(bson_value_t *v);

/* The metadata kinds `e`'s {$meta: ...} ask for (a set of MF_META_BIT):
 * the pipeline checks their availability (40218) as mongod's dependency
 * analysis does. */
uint32_t mf_expr_meta_kinds(const mf_expr *e);

/* Whether `e` is a constant (then *v, if asked, borrows its value). */
bool mf_expr_is_const(const mf_expr *e, const bson_value_t **v);

void mf_expr_free(mf_expr *e);

/* ------------------------------------------- expressions of other commands */

/* What `$expr` in a filter, a find projection's computed fields and an
 * update pipeline evaluate with outside an aggregation: $$NOW and the
 * command's `let`.  mf_expr_ctx_new evaluates `let` (unevaluated, may be
 * NULL; each variable may use those before it) once, with $$NOW =
 * `now_ms`.  Errors as mongod's for let: 16866 / 16867 a bad variable
 * name, the expressions' own errors.  On error *out is NULL. */
typedef struct mf_expr_ctx mf_expr_ctx;
struct mf_expr_hooks;

int mf_expr_ctx_new(const bson_t *let, int64_t now_ms, mf_expr_ctx **out, mf_error *err);

/* As mf_expr_ctx_new, with the expressions (`let` and those compiled
 * through the hooks) comparing strings under `coll` (NULL: simple), the
 * command's resolved collation: {$expr: {$eq: ["$x", "PING"]}} in a find
 * with collation {locale: "en", strength: 2} matches "ping".  The context
 * holds its own reference to `coll`. */
int mf_expr_ctx_new_coll(const bson_t *let, int64_t now_ms, const mf_collator *coll,
                         mf_expr_ctx **out, mf_error *err);

/* The hooks query/ compiles and evaluates expressions through (the
 * matcher's $expr, a projection's computed fields); valid while `x` is. */
void mf_expr_ctx_hooks(mf_expr_ctx *x, struct mf_expr_hooks *out);

void mf_expr_ctx_free(mf_expr_ctx *x);

#endif /* MF_AGG_H */
