/*
 * failpoint.c -- mongod's FailPoint: a named switch a test suite sets with
 * configureFailPoint and a site in the server evaluates, so that tests can
 * make the server fail, wait or time out at will.
 *
 *   {configureFailPoint: <name>,
 *    mode: "alwaysOn" | "off" | {times: n} | {skip: n} | {activationProbability: p},
 *    data: {...}}
 *
 * The fail points built, and where they are evaluated (docs/failpoints.md
 * lists what drivers' test suites use, and why the rest is not built):
 *
 *   failCommand                     fail_command.c, from the dispatcher
 *   failGetMoreAfterCursorCheckout  fail_command.c, from getMore (cmd_find.c)
 *   hangIndexBuildBeforeCommit      failpoint.c, from createIndexes' build
 *   maxTimeAlwaysTimeOut            failpoint.c, wherever an operation
 *                                   with a deadline starts
 *
 * The semantics are mongod 7.0's (util/fail_point.cpp):
 *
 * Entering.  A site asks whether the fail point fires, with a filter on its
 * data or none.  The fail point is entered when it is on, the filter
 * accepts, AND the mode lets it through; a filter that refuses uses up
 * nothing.
 *   alwaysOn   always;
 *   {times: n} n times, then off.  As in mongod, n = 0 still lets one in:
 *              the counter is decremented first, and off follows <= 0;
 *   {skip: n}  the first n pass by, every later one enters;
 *   {activationProbability: p}  each with probability p.
 *
 * Counting.  timesEntered -- configureFailPoint's `count`, what
 * waitForFailPoint waits for -- counts the entries since the instance
 * opened, across settings: configureFailPoint never resets it.  A site
 * that evaluates the fail point again while it pauses (mongod's
 * pauseWhileSet) counts only its first entry (MFI_FP_AGAIN is mongod's
 * kWasEntered), though every evaluation uses up a time.
 *
 * Concurrency.  One mutex per fail point guards its mode, counters and
 * data; `is_on` lets every site pass without the mutex while the fail
 * point is off, as mongod's active bit does.
 */
#include "command_int.h"

#include <stdlib.h>
#include <string.h>

typedef enum { FP_OFF, FP_ALWAYS_ON, FP_TIMES, FP_SKIP, FP_RANDOM } fp_mode;

struct mfi_fail_point {
    pthread_mutex_t mu; /* guards everything below but is_on */
    atomic_bool is_on;  /* mode != FP_OFF, readable without mu */
    fp_mode mode;
    int64_t val;           /* FP_TIMES: left; FP_SKIP: to pass by; FP_RANDOM: threshold */
    int64_t times_entered; /* since the instance opened, across settings */
    uint8_t *data;         /* the data document (owned); NULL: {} */
    uint32_t data_len;
    uint64_t prng;         /* xorshift64 state for activationProbability */
};

/* By mfi_fp_id. */
static const char *const fp_names[MFI_FP_COUNT] = {
    [MFI_FP_FAIL_COMMAND] = "failCommand",
    [MFI_FP_FAIL_GET_MORE] = "failGetMoreAfterCursorCheckout",
    [MFI_FP_HANG_INDEX_BUILD] = "hangIndexBuildBeforeCommit",
    [MFI_FP_MAX_TIME_ALWAYS_TIME_OUT] = "maxTimeAlwaysTimeOut",
    [MFI_FP_ON_PRIMARY_TXN_WRITE] = "onPrimaryTransactionalWrite",
};

int mfi_fail_points_open(mf_instance *inst, mf_error *err)
{
    mfi_fail_point *fps = calloc(MFI_FP_COUNT, sizeof *fps);
    if (!fps)
        return mf_error_oom(err);
    uint64_t seed = (uint64_t)mf_clock_mono_us() * 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < MFI_FP_COUNT; i++) {
        pthread_mutex_init(&fps[i].mu, NULL);
        atomic_init(&fps[i].is_on, false);
        fps[i].prng = (seed + (uint64_t)i * 0x2545f4914f6cdd1dull) | 1;
    }
    inst->fail_points = fps;
    return 0;
}

void mfi_fail_points_close(mf_instance *inst)
{
    mfi_fail_point *fps = inst->fail_points;
    if (!fps)
        return;
    for (int i = 0; i < MFI_FP_COUNT; i++) {
        pthread_mutex_destroy(&fps[i].mu);
        free(fps[i].data);
    }
    free(fps);
    inst->fail_points = NULL;
}

bool mfi_fail_point_find(const char *name, mfi_fp_id *id)
{
    for (int i = 0; i < MFI_FP_COUNT; i++)
        if (strcmp(fp_names[i], name) == 0) {
            *id = (mfi_fp_id)i;
            return true;
        }
    return false;
}

const char *mfi_fail_point_name(mfi_fp_id id)
{
    return fp_names[id];
}

/* ------------------------------------------------------------- configuring */

int mfi_bson_extract_integer(const bson_iter_t *it, const char *field, int64_t *out,
                             mf_error *err)
{
    if (!mfi_is_number(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "Expected field \"%s\" to have numeric type, but found %s", field,
                            mf_bsonx_type_alias(bson_iter_type(it)));
    if (BSON_ITER_HOLDS_DECIMAL128(it) || !mfi_as_int64(it, out)) {
        char shown[64];
        if (BSON_ITER_HOLDS_DOUBLE(it))
            snprintf(shown, sizeof shown, "%g", bson_iter_double(it));
        else
            snprintf(shown, sizeof shown, "%s", "a decimal");
        return mf_error_set(err, MF_BadValue,
                            "Expected field \"%s\" to have a value exactly representable as a "
                            "64-bit integer, but found %s: %s",
                            field, field, shown);
    }
    return 0;
}

/* A times/skip count: an integer in [0, INT32_MAX]. */
static int parse_count(const bson_iter_t *it, const char *field, int64_t *out, mf_error *err)
{
    int rc = mfi_bson_extract_integer(it, field, out, err);
    if (rc != 0)
        return rc;
    if (*out < 0)
        return mf_error_set(err, MF_BadValue, "'%s' option to 'mode' must be positive", field);
    if (*out > INT32_MAX)
        return mf_error_set(err, MF_BadValue, "'%s' option to 'mode' is too large", field);
    return 0;
}

/* FailPoint::parseBSON's reading of `mode`.  Of a document, the first of
 * times, skip, activationProbability present decides (the others are
 * ignored). */
static int parse_mode(const bson_t *cmd, fp_mode *mode, int64_t *val, mf_error *err)
{
    bson_iter_t it, f;
    *val = 0;
    if (!bson_iter_init_find(&it, cmd, "mode"))
        return mf_error_set(err, MF_IllegalOperation,
                            "When setting a failpoint, you must supply a 'mode'");
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        const char *m = bson_iter_utf8(&it, NULL);
        if (strcmp(m, "off") == 0)
            *mode = FP_OFF;
        else if (strcmp(m, "alwaysOn") == 0)
            *mode = FP_ALWAYS_ON;
        else
            return mf_error_set(err, MF_BadValue, "unknown mode: %s", m);
        return 0;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return mf_error_set(err, MF_TypeMismatch, "'mode' must be a string or JSON object");
    bson_t m;
    mfi_doc_arg(&it, &m);
    if (bson_iter_init_find(&f, &m, "times")) {
        *mode = FP_TIMES;
        return parse_count(&f, "times", val, err);
    }
    if (bson_iter_init_find(&f, &m, "skip")) {
        *mode = FP_SKIP;
        return parse_count(&f, "skip", val, err);
    }
    if (bson_iter_init_find(&f, &m, "activationProbability")) {
        *mode = FP_RANDOM;
        if (!mfi_is_number(&f))
            return mf_error_set(err, MF_TypeMismatch,
                                "the 'activationProbability' option to 'mode' must be a double "
                                "between 0 and 1");
        double p = bson_iter_as_double(&f);
        if (!(p >= 0 && p <= 1))
            return mf_error_set(err, MF_BadValue,
                                "activationProbability must be between 0.0 and 1.0; found %g", p);
        *val = (int64_t)(int32_t)((double)INT32_MAX * p);
        return 0;
    }
    return mf_error_set(err, MF_BadValue,
                        "'mode' must be one of 'off', 'alwaysOn', '{times:n}', '{skip:n}' or "
                        "'{activationProbability:p}'");
}

int mfi_fail_point_configure(mf_instance *inst, mfi_fp_id id, const bson_t *cmd,
                             int64_t *count, mf_error *err)
{
    mfi_fail_point *fp = &inst->fail_points[id];
    fp_mode mode = FP_OFF;
    int64_t val;
    int rc;
    if ((rc = parse_mode(cmd, &mode, &val, err)) != 0)
        return rc;

    /* data: any document (an array passes too, as isABSONObj lets it);
     * nothing in it is checked until a site meets it, as in mongod. */
    uint8_t *data = NULL;
    uint32_t data_len = 0;
    bson_iter_t it;
    if (bson_iter_init_find(&it, cmd, "data")) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) && !BSON_ITER_HOLDS_ARRAY(&it))
            return mf_error_set(err, MF_TypeMismatch, "the 'data' option must be a JSON object");
        const uint8_t *p;
        if (BSON_ITER_HOLDS_DOCUMENT(&it))
            bson_iter_document(&it, &data_len, &p);
        else
            bson_iter_array(&it, &data_len, &p);
        if (!(data = malloc(data_len)))
            return mf_error_oom(err);
        memcpy(data, p, data_len);
    }

    pthread_mutex_lock(&fp->mu);
    free(fp->data);
    fp->data = data;
    fp->data_len = data_len;
    fp->mode = mode;
    fp->val = val;
    atomic_store(&fp->is_on, mode != FP_OFF);
    *count = fp->times_entered;
    pthread_mutex_unlock(&fp->mu);

    const char *shown = "";
    if (bson_iter_init_find(&it, cmd, "mode") && BSON_ITER_HOLDS_UTF8(&it))
        shown = bson_iter_utf8(&it, NULL);
    mf_log(MF_LOG_WARNING, "CONTROL", 23829, "conn", "Set failpoint %s%s%s", fp_names[id],
           *shown ? " to " : "", shown);
    return 0;
}

int64_t mfi_fail_point_entered(mf_instance *inst, mfi_fp_id id)
{
    mfi_fail_point *fp = &inst->fail_points[id];
    pthread_mutex_lock(&fp->mu);
    int64_t n = fp->times_entered;
    pthread_mutex_unlock(&fp->mu);
    return n;
}

/* ----------------------------------------------------------------- entering */

/* The mode's say once the filter accepted; uses up a time or a skip.
 * Caller holds fp->mu. */
static bool mode_admits(mfi_fail_point *fp)
{
    switch (fp->mode) {
    case FP_OFF:
        return false;
    case FP_ALWAYS_ON:
        return true;
    case FP_TIMES:
        if (--fp->val <= 0) {
            fp->mode = FP_OFF;
            atomic_store(&fp->is_on, false);
        }
        return true;
    case FP_SKIP:
        /* Stop counting at 0 so the counter never wraps. */
        return fp->val <= 0 || --fp->val < 0;
    case FP_RANDOM:
        fp->prng ^= fp->prng << 13;
        fp->prng ^= fp->prng >> 7;
        fp->prng ^= fp->prng << 17;
        return (int64_t)(fp->prng & 0x7fffffff) < fp->val;
    }
    return false;
}

bool mfi_fail_point_fires(mf_instance *inst, mfi_fp_id id, mfi_fp_entry entry,
                          mfi_fp_filter filter, void *arg, bson_t *data_out)
{
    mfi_fail_point *fp = &inst->fail_points[id];
    if (!atomic_load_explicit(&fp->is_on, memory_order_acquire))
        return false;
    bool fired = false;
    pthread_mutex_lock(&fp->mu);
    if (fp->mode != FP_OFF) {
        bson_t data;
        if (fp->data)
            bson_init_static(&data, fp->data, fp->data_len);
        else
            bson_init(&data);
        if ((!filter || filter(&data, arg)) && mode_admits(fp)) {
            fired = true;
            if (entry == MFI_FP_FIRST)
                fp->times_entered++;
            /* A copy: it stays valid whatever another thread configures. */
            if (data_out) {
                bson_init(data_out);
                bson_concat(data_out, &data);
            }
        }
    }
    pthread_mutex_unlock(&fp->mu);
    return fired;
}

/* One step of a wait that polls: MaxTimeMSExpired once the command's
 * deadline has passed, InterruptedAtShutdown if shutdown wakes the sleep
 * of `ms`, else 0. */
int mfi_fail_point_wait_step(mf_cmd_ctx *ctx, int64_t ms, mf_error *err)
{
    if (mf_deadline_passed(&ctx->deadline))
        return mf_deadline_expired(err);
    if (mfi_instance_sleep(ctx->inst, ms))
        return mf_error_set(err, MF_InterruptedAtShutdown, "interrupted at shutdown");
    return 0;
}

int mfi_hang_index_build(mf_cmd_ctx *ctx, mf_error *err)
{
    mf_instance *inst = ctx->inst;
    if (!mfi_fail_point_fires(inst, MFI_FP_HANG_INDEX_BUILD, MFI_FP_FIRST, NULL, NULL, NULL))
        return 0;
    mf_log(MF_LOG_INFO, "INDEX", 4841706, "conn", "Hanging before committing index build");
    int rc = 0;
    for (mfi_fp_entry entry = MFI_FP_FIRST;
         rc == 0 && mfi_fail_point_fires(inst, MFI_FP_HANG_INDEX_BUILD, entry, NULL, NULL, NULL);
         entry = MFI_FP_AGAIN)
        rc = mfi_fail_point_wait_step(ctx, MFI_FP_POLL_MS, err);
    return rc;
}

int mfi_max_time_check(mf_instance *inst, mf_error *err)
{
    if (!mfi_fail_point_fires(inst, MFI_FP_MAX_TIME_ALWAYS_TIME_OUT, MFI_FP_FIRST, NULL, NULL,
                              NULL))
        return 0;
    return mf_deadline_expired(err);
}
