/*
 * explain_plans.c -- what explain's queryPlanner shows of the planner's
 * choice, for find, the writes and aggregate: the rejected plans, every
 * candidate's trial (allPlansExecution), the query's hashes.
 */
#include "command_int.h"

#include <stdio.h>

void mfi_plans_init(mfi_plans_explained *p)
{
    memset(p, 0, sizeof *p);
    bson_init(&p->rejected);
    bson_init(&p->all);
}

int mfi_plans_explain(const mf_scan *s, mfi_plans_explained *p)
{
    p->hashed = mf_scan_hashes(s, &p->query_hash, &p->plan_cache_key);
    return mf_scan_explain_rejected(s, &p->rejected) == 0 &&
                   mf_scan_explain_all_plans(s, &p->all) == 0
               ? 0
               : -1;
}

void mfi_plans_free(mfi_plans_explained *p)
{
    bson_destroy(&p->rejected);
    bson_destroy(&p->all);
    mfi_plans_init(p);
}

/* queryPlanner's queryHash and planCacheKey, as mongod prints them. */
void mfi_put_hashes(bson_t *qp, bool hashed, uint32_t query_hash, uint32_t plan_cache_key)
{
    char hex[16];
    if (!hashed)
        return;
    snprintf(hex, sizeof hex, "%08X", query_hash);
    BSON_APPEND_UTF8(qp, "queryHash", hex);
    snprintf(hex, sizeof hex, "%08X", plan_cache_key);
    BSON_APPEND_UTF8(qp, "planCacheKey", hex);
}
