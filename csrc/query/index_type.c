/*
 * index_type.c -- the table of index kinds (index_type.h) and the b-tree's
 * bounds.
 */
#include "index_type.h"

#include <string.h>

/* A b-tree field's keys are the values themselves (under the index's
 * collation, as the predicates were encoded): the predicate's own
 * intervals, exact when the predicate says they are. */
static int btree_bounds(const mf_index_desc *d, size_t field, const mfi_pred *pr, mfi_oil *out,
                        bool *usable, bool *exact)
{
    (void)d, (void)field;
    *usable = true;
    *exact = pr->exact;
    *out = (mfi_oil){0};
    return mfi_oil_copy(out, &pr->oil);
}

static const mf_index_type types[] = {
    {.plugin = "", .check_key = NULL, .keys = mfi_btree_keys, .bounds = btree_bounds},
    {.plugin = "wildcard", .check_key = mfi_wild_check_key, .keys = mfi_wild_keys,
     .bounds = mfi_wild_bounds, .desc_init = mfi_wild_desc_init,
     .desc_clear = mfi_wild_desc_clear},
    {.plugin = "text", .keys = mfi_text_index_keys, .bounds = mfi_text_index_bounds,
     .fix_spec = mfi_text_index_fix_spec, .desc_init = mfi_text_index_desc_init,
     .desc_clear = mfi_text_index_desc_clear},
};

static const mf_index_type *const kinds[] = {&mfi_hashed_type, &mfi_2dsphere_type,
                                             &mfi_2d_type};

const mf_index_type *mf_index_type_find(const char *plugin)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(types[i].plugin, plugin) == 0)
            return &types[i];
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i]->plugin, plugin) == 0)
            return kinds[i];
    return NULL;
}
