/*
 * expr_ctx.c -- the expression context of commands other than aggregate:
 * a command's `let` evaluated once, $$NOW and the command's collation,
 * behind the mf_expr_hooks through which query/ compiles `$expr` and
 * computed projections.  The
 * context is an mfi_agg without stages, so expressions see exactly what
 * they see in a pipeline.
 */
#include "pipeline_int.h"

#include <stdlib.h>
#include <string.h>

struct mf_expr_ctx {
    mfi_agg agg; /* holds a bson_t: the context is never moved */
};

int mf_expr_ctx_new(const bson_t *let, int64_t now_ms, mf_expr_ctx **out, mf_error *err)
{
    return mf_expr_ctx_new_coll(let, now_ms, NULL, out, err);
}

int mf_expr_ctx_new_coll(const bson_t *let, int64_t now_ms, const mf_collator *coll,
                         mf_expr_ctx **out, mf_error *err)
{
    *out = NULL;
    /* libbson declares bson_t 128-byte aligned: more than calloc promises. */
    void *mem = NULL;
    if (posix_memalign(&mem, _Alignof(mf_expr_ctx), sizeof(mf_expr_ctx)) != 0)
        return mf_error_oom(err);
    mf_expr_ctx *x = memset(mem, 0, sizeof *x);
    int rc = mfi_agg_init_let(&x->agg, let, now_ms, coll, err);
    if (rc) {
        mf_expr_ctx_free(x);
        return rc;
    }
    *out = x;
    return 0;
}

void mf_expr_ctx_hooks(mf_expr_ctx *x, struct mf_expr_hooks *out)
{
    mfi_agg_hooks(&x->agg, out);
}

void mf_expr_ctx_free(mf_expr_ctx *x)
{
    if (!x)
        return;
    mfi_agg_release(&x->agg);
    free(x);
}
