/*
 * collation.c -- a collection's default collation, as the commands resolve
 * an operation's collation: the command's `collation` if given, else the
 * collection's default (set by `create`), else the simple collation.
 *
 * `create` stores the default in the collection's catalog entry, the
 * document {uuid: <UUID>, options: {..., collation: <full spec>}} that
 * listCollections reports; a simple default is not stored.
 */
#include "command_int.h"

int mfi_coll_default_collation(mf_coll *c, mf_collator **out, mf_error *err)
{
    const uint8_t *opt;
    size_t len;
    bson_t meta;
    bson_iter_t it, spec;
    *out = NULL;
    if (!c)
        return 0;
    mf_coll_options(c, &opt, &len);
    if (!opt || !bson_init_static(&meta, opt, len) || !bson_iter_init_find(&it, &meta, "options") ||
        !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &spec) ||
        !bson_iter_find(&spec, "collation"))
        return 0;
    return mf_collator_new_iter(&spec, out, err);
}
