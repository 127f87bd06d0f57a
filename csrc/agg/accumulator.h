/*
 * accumulator.h -- private to csrc/agg: accumulators ($sum, $push, $topN,
 * ...) for $group, $bucket, $bucketAuto and $setWindowFields.
 */
#ifndef MF_AGG_ACCUMULATOR_H
#define MF_AGG_ACCUMULATOR_H

#include "pipeline_int.h"

typedef struct mfi_acc {
    int kind;
    const char *name;        /* "$sum" */
    char *field;             /* the output field */
    mf_expr *arg;            /* the input (output for $top...), NULL for $count */
    mf_expr *n;              /* the N forms' n */
    mf_sort *sort_by;        /* $top, $bottom, $topN, $bottomN */
    /* The collation $min, $max, $minN, $maxN, $addToSet and sortBy compare
     * under (the pipeline's; NULL: simple); borrowed: the pipeline holds
     * it. */
    const mf_collator *coll;
} mfi_acc;

typedef struct mfi_acc_state mfi_acc_state;

/* Whether `name` is an accumulator ("$sum"). */
bool mfi_acc_known(const char *name);

/* Parse {<field>: {<$acc>: <argument>}} at `field`.  Errors as mongod's:
 * 40234 not an object, 40238 not exactly one accumulator, 15952 unknown
 * accumulator, 40237 an array argument to a unary accumulator, the N
 * forms' 5787901 / 5787906 / 5787907. */
int mfi_acc_parse(const bson_iter_t *field, mfi_agg *agg, mfi_acc *a, mf_error *err);
void mfi_acc_clear(mfi_acc *a);

mfi_acc_state *mfi_acc_state_new(void);
void mfi_acc_state_free(mfi_acc_state *s);
/* Bytes the state holds (for the memory limit). */
size_t mfi_acc_state_mem(const mfi_acc_state *s);

/* Accumulate `doc`.  `group_root` ({_id: <key>}) is what `n` is evaluated
 * against; `seq` orders the inputs (increasing). */
int mfi_acc_add(const mfi_acc *a, mfi_acc_state *s, const bson_t *doc, const bson_t *group_root,
                uint64_t seq, mfi_agg *agg, mf_error *err);

/* A bare accumulator of kind `name` ("$sum", "$avg", "$min", "$max",
 * "$stdDevPop", "$stdDevSamp": those that need no document) for the
 * expression forms; -1 for another name.  Its collation is NULL (the
 * caller may set `coll`).  Nothing to clear. */
int mfi_acc_init_kind(mfi_acc *a, const char *name);
/* Accumulate the value `v` (copied) into a bare accumulator's state. */
int mfi_acc_add_value(const mfi_acc *a, mfi_acc_state *s, const bson_value_t *v, mf_error *err);

/* The result, an owned value. */
int mfi_acc_result(const mfi_acc *a, const mfi_acc_state *s, bson_value_t *out, mf_error *err);

/* Save the state under `key` of `out`; merge a saved state (of inputs that
 * came after the state's) into `s`. */
int mfi_acc_save(const mfi_acc_state *s, bson_t *out, const char *key);
int mfi_acc_merge(const mfi_acc *a, mfi_acc_state *s, const bson_iter_t *saved, mfi_agg *agg,
                  mf_error *err);

#endif /* MF_AGG_ACCUMULATOR_H */
