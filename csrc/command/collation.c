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

int mfi_collation_of_arg(mf_engine *e, const char *ns, const bson_iter_t *arg, const char *cmd,
                         mf_collator **out, mf_error *err)
{
    mf_collator *given = NULL;
    bool has = arg && mfi_collation_given(arg);
    int rc = has ? mfi_collation_arg(arg, cmd, "collation", &given, err) : 0;
    if (rc == 0)
        rc = mf_cl_collation_of_ns(e, ns, has, given, out, err);
    mf_collator_unref(given);
    return rc;
}

