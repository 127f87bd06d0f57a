/*
 * stats.c -- the bytes a collection occupies: records, document bytes,
 * pages of its record tree and of each index tree (a walk of each tree).
 */
#include "coll.h"

#include <string.h>

int mf_cl_measure(mf_engine *e, mf_coll *c, mf_cl_sizes *out,
                  void (*each_index)(void *arg, const char *name, uint64_t bytes), void *arg,
                  mf_error *err)
{
    mf_btree_usage u;
    memset(out, 0, sizeof *out);
    int rc = mf_engine_tree_measure(e, mf_coll_records(c), &u, err);
    if (rc)
        return rc;
    out->count = u.entries;
    out->data_bytes = u.value_bytes;
    out->storage_bytes = mf_btree_usage_bytes(&u);
    for (size_t i = 0; i < mf_coll_index_count(c); i++) {
        const mf_index_info *ix = mf_coll_index(c, i);
        if ((rc = mf_engine_tree_measure(e, ix->tree, &u, err)) != 0)
            return rc;
        out->index_bytes += mf_btree_usage_bytes(&u);
        if (each_index)
            each_index(arg, ix->name, mf_btree_usage_bytes(&u));
    }
    return 0;
}

int mf_cl_storage_bytes(mf_engine *e, mf_coll *c, uint64_t *bytes, mf_error *err)
{
    mf_cl_sizes s;
    mf_coll_lock(c, false);
    int rc = mf_cl_measure(e, c, &s, NULL, NULL, err);
    mf_coll_unlock(c);
    *bytes = rc ? 0 : s.storage_bytes + s.index_bytes;
    return rc;
}
