/*
 * query_int.h -- what the files of csrc/query share and nobody else sees.
 */
#ifndef MF_QUERY_INT_H
#define MF_QUERY_INT_H

#include "query.h"

/* ------------------------------------- a filter's values (operand.c) */

/* Whether the value `it` is a DBRef as a filter reads it (mongod's
 * isDBRefDocument): a document with a "$ref" and an "$id" field, in any
 * order and position; with `incomplete`, any one of "$ref", "$id", "$db". */
bool mfi_is_dbref_doc(const bson_iter_t *it, bool incomplete);

/* Whether the filter value `it` is an operator document such as {$gt: 1}
 * (mongod's isExpressionDocument): a non-empty document whose first field
 * starts with '$' and that is not a DBRef (`incomplete_dbref` as above,
 * true only for $elemMatch's operand).  Otherwise it is a value. */
bool mfi_is_operator_doc(const bson_iter_t *it, bool incomplete_dbref);

/* Whether `name` ("$gt") is an operator that applies to a path (mongod's
 * parsePathAcceptingKeyword; $not is not one) / one that stands alone in
 * a filter document ($and, $expr, $comment, $ref ...). */
bool mfi_is_path_operator(const char *name);
bool mfi_is_pathless_operator(const char *name);

/* Whether $elemMatch's operand `it` tests the elements themselves
 * ({$gt: 1, $lt: 5}) rather than fields of element documents ({a: 1},
 * {$or: [...]}, {$ref: "c", $id: 1}). */
bool mfi_elem_match_is_value(const bson_iter_t *it);

/* $type's operand (a type code or alias, or an array of them) as a mask:
 * bit t for BSON type t (1..19), and these.  Errors: mongod's, BadValue
 * for an unknown code or alias, TypeMismatch for another operand, 9 for
 * an empty array. */
#define MFI_TYPE_NUMBER 1u          /* "number": any of the four */
#define MFI_TYPE_MINKEY (1u << 20)
#define MFI_TYPE_MAXKEY (1u << 21)
int mfi_type_mask(const bson_iter_t *operand, uint32_t *mask, mf_error *err);

/* ---------------------------------------------------- bounds (bounds.c) */

/* One interval of a field's values, in MongoDB's order: its end points as
 * ascending key encodings (mf_bsonx_key_append_coll under the collation
 * the bounds were built for) and as mongod prints them in explain ("inf.0",
 * "\"a\"", "MinKey", "CollationKey(0x2931)"). */
typedef struct mfi_ival {
    mf_buf lo, hi;
    bool lo_incl, hi_incl;
    char *lo_s, *hi_s;
    bson_value_t lo_v, hi_v; /* the end points' values (COUNT_SCAN's startKey
                                and endKey show them) */
} mfi_ival;

/* An ordered list of disjoint intervals of one field (mongod's
 * OrderedIntervalList), ascending.  No intervals: nothing matches. */
typedef struct mfi_oil {
    mfi_ival *v;
    size_t n, cap;
} mfi_oil;

/* What one condition of a filter says about one path. */
typedef struct mfi_pred {
    const char *path;     /* borrowed from the filter, or from the preds' `owned` */
    mfi_oil oil;
    bool matches_missing; /* can match a document without the path ({a: null}) */
    bool exact;           /* the bounds answer it exactly on a non-multikey field */
    bool collatable;      /* its operand is a string, symbol, document or array:
                             usable only on an index of the query's collation */
    size_t top;           /* the filter's top-level element it came from */
    bool negation;        /* $ne, $nin, $not: bounds nearly every key */
    bool neg_null;        /* a negation of null ({$ne: null}): bounds no multikey
                             field (translate_negation) */
    const char *key_re;   /* a regex with no literal prefix: its pattern and */
    const char *key_re_flags; /* flags (borrowed), for the scan to test on each
                             string key of the index's first field; its bounds
                             are every string and the regex value */
    bool equality;        /* an equality or a $in without regexes (mongod's EQ
                             and MATCH_IN): its points bound a hashed field */
    const struct mf_geo_query *geo; /* a geo condition ($geoWithin, $geoIntersects,
                             or a ring of a $near search): its parsed query
                             (geo.h), the oil empty; only a geo kind's bounds
                             read it, every other kind finds it unusable */
} mfi_pred;

typedef struct mfi_preds {
    mfi_pred *v;
    size_t n, cap;
    bool *complete; /* per top-level element: every condition became a pred */
    size_t ntop;
    const mf_collator *coll; /* the collation the bounds are encoded under (borrowed) */
    char **owned;            /* paths made here ($elemMatch's path.field) */
    size_t nowned;
} mfi_preds;

/* Whether comparing with `v` depends on a collation, by mongod's test
 * (QueryPlannerIXSelect::_compatible, CollationIndexKey::isCollatableType):
 * a string -- here a symbol too -- or a document or array, whatever they
 * hold. */
bool mfi_collatable(const bson_iter_t *v);

/* The conditions of `filter` (top level and top-level $and) that bound an
 * index: equality, $in, $gt/$gte/$lt/$lte, $exists, a regex with a literal
 * prefix, $elemMatch, and the negations $ne, $nin and $not of those whose
 * bounds are exact.  Others are left to the matcher.  `filter` must outlive `out` (paths are borrowed).  Errors:
 * InternalError (out of memory). */
int mfi_preds_collect(const bson_t *filter, mfi_preds *out, mf_error *err);
/* The same with the bounds encoded under `coll` (NULL: simple), for an
 * index of that collation; `coll` must outlive `out`.  The preds are the
 * same list, in the same order, whatever the collation. */
int mfi_preds_collect_coll(const bson_t *filter, const mf_collator *coll, mfi_preds *out,
                           mf_error *err);
void mfi_preds_free(mfi_preds *p);

/* Append the interval [lo, hi] (ends included as said) of values under
 * the simple collation to `o`, kept in order by the caller.  0 or -1. */
int mfi_oil_push_range(mfi_oil *o, const bson_iter_t *lo, bool lo_incl, const bson_iter_t *hi,
                       bool hi_incl);
/* [MinKey, MaxKey] into an empty `o`.  Returns 0 or -1 (out of memory). */
int mfi_oil_all(mfi_oil *o);
int mfi_oil_copy(mfi_oil *dst, const mfi_oil *src);
/* `a` becomes its intersection with `b`. */
int mfi_oil_intersect(mfi_oil *a, const mfi_oil *b);
/* Whether every interval is a single value. */
bool mfi_oil_is_points(const mfi_oil *o);
/* Append the point [v, v] (no collation) / sort points and drop repeats.
 * For an index kind whose keys are not the values (index_hashed.c). */
int mfi_oil_push_point(mfi_oil *o, const bson_iter_t *v);
void mfi_oil_sort_points(mfi_oil *o);
void mfi_oil_free(mfi_oil *o);

/* Whether every document `filter` matches also matches `partial` (a
 * partialFilterExpression), by a simple test: each top-level condition of
 * `partial` (equality, $gt/$gte/$lt/$lte, $exists: true, through $and) is
 * implied by one condition of `filter` on the same path with the same or
 * a narrower bound.  False when unsure. */
bool mfi_filter_implies(const bson_t *filter, const bson_t *partial);
/* The same with strings compared under `coll`: sound when the filter's
 * collation is `coll`, or `partial` holds no string (mfi_has_strings). */
bool mfi_filter_implies_coll(const bson_t *filter, const bson_t *partial, const mf_collator *coll);

/* Whether `doc` holds a string or symbol value at any depth. */
bool mfi_has_strings(const bson_t *doc);

#endif /* MF_QUERY_INT_H */
