/*
 * collation.c -- which collation an operation runs under.
 *
 * As mongod: the command's own `collation` when it gives one (even
 * {locale: "simple"}, which overrides a collection's default), else the
 * collection's default collation -- the full spec `create` stored in its
 * catalog options -- else the simple binary order (a NULL collator).
 */
#include "command_int.h"

int mfi_collation_arg(const bson_iter_t *it, const char *cmd, const char *field,
                      mf_collator **out, mf_error *err)
{
    bson_t spec;
    *out = NULL;
    if (!mfi_doc_arg(it, &spec))
        return mfi_type_error(err, cmd, field, it, "object");
    return mf_collator_new(&spec, out, err);
}

bool mfi_collation_given(const bson_iter_t *it)
{
    bson_t spec;
    return !mfi_doc_arg(it, &spec) || spec.len > 5;
}

int mfi_coll_default_collation(const mf_coll *c, mf_collator **out, mf_error *err)
{
    const uint8_t *ob;
    size_t olen;
    bson_t meta;
    bson_iter_t it, sub;
    *out = NULL;
    if (!c)
        return 0;
    mf_coll_options(c, &ob, &olen);
    if (!ob || !olen || !bson_init_static(&meta, ob, olen) ||
        !bson_iter_init_find(&it, &meta, "options") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &sub) || !bson_iter_find(&sub, "collation"))
        return 0;
    int rc = mf_collator_new_iter(&sub, out, err);
    if (rc)
        return mf_error_set(err, MF_DataCorruption,
                            "collection %s: its default collation cannot be used: %s",
                            mf_coll_name(c), err->msg);
    return 0;
}

int mfi_collation_for(const mf_coll *c, bool has_given, const mf_collator *given,
                      mf_collator **out, mf_error *err)
{
    if (has_given) {
        *out = mf_collator_ref(given);
        return 0;
    }
    return mfi_coll_default_collation(c, out, err);
}

int mfi_collation_of_arg(mf_engine *e, const char *ns, const bson_iter_t *arg, const char *cmd,
                         mf_collator **out, mf_error *err)
{
    mf_collator *given = NULL;
    bool has = arg && mfi_collation_given(arg);
    int rc = has ? mfi_collation_arg(arg, cmd, "collation", &given, err) : 0;
    if (rc == 0)
        rc = mfi_collation_of_ns(e, ns, has, given, out, err);
    mf_collator_unref(given);
    return rc;
}

int mfi_collation_of_ns(mf_engine *e, const char *ns, bool has_given, const mf_collator *given,
                        mf_collator **out, mf_error *err)
{
    if (has_given) {
        *out = mf_collator_ref(given);
        return 0;
    }
    mf_engine_catalog_lock(e, false);
    int rc = mfi_coll_default_collation(mf_engine_coll(e, ns), out, err);
    mf_engine_catalog_unlock(e);
    return rc;
}
