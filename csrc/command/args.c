/*
 * args.c -- reading a command's arguments: the generic arguments every
 * command may carry, numbers as mongod reads them (safeNumberLong,
 * maxTimeMS), sub-documents, hints and $natural, a collection name with
 * mongod's namespace rules, a collation, and mongod's TypeMismatch message.
 * Handlers parse with these and nothing else of their own kind.
 */
#include "command_int.h"
#include "../bsonx/bsonx.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NS_MAX 255 /* mongod's longest namespace */


bool mfi_is_generic_arg(const char *k)
{
    static const char *generic[] = {
        "$db", "lsid", "$clusterTime", "txnNumber", "autocommit",
        "startTransaction", "$readPreference", "readConcern", "writeConcern",
        "comment", "maxTimeMS", "apiVersion", "apiStrict",
        "apiDeprecationErrors", "$audit", "$client", "$configServerState",
        "databaseVersion", "shardVersion", "$queryOptions", "$topologyTime",
        "$configTime", "mayBypassWriteBlocking", "clientOperationKey",
        "readOnce", "allowImplicitCollectionCreation", "tracking_info",
        "$oplogQueryData", "$replData", "help", "stmtId", "stmtIds",
        "coordinator", "expectPrefix"};
    for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++)
        if (strcmp(k, generic[i]) == 0)
            return true;
    return false;
}

bool mfi_is_number(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128:
        return true;
    default:
        return false;
    }
}

bool mfi_as_int64(const bson_iter_t *it, int64_t *out)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32:
        *out = bson_iter_int32(it);
        return true;
    case BSON_TYPE_INT64:
        *out = bson_iter_int64(it);
        return true;
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) ||
            d != (double)(int64_t)d)
            return false;
        *out = (int64_t)d;
        return true;
    }
    default:
        return false;
    }
}

/* mongod's BSONElement::safeNumberLong: a double truncated, saturated at
 * the ends (NaN: 0); a decimal rounded half to even, saturated. */
int64_t mfi_safe_number_long(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32:
        return bson_iter_int32(it);
    case BSON_TYPE_INT64:
        return bson_iter_int64(it);
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        if (isnan(d))
            return 0;
        if (d >= 9223372036854775808.0)
            return INT64_MAX;
        if (d < -9223372036854775808.0)
            return INT64_MIN;
        return (int64_t)d;
    }
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t dec;
        uint32_t flags = 0;
        bson_iter_decimal128(it, &dec);
        if (mf_dec_isnan(dec))
            return 0;
        int64_t v = mf_dec_to_int64(dec, MF_DEC_HALF_EVEN, &flags);
        if (flags & MF_DEC_F_INVALID)
            return mf_dec_isneg(dec) ? INT64_MIN : INT64_MAX;
        return v;
    }
    default:
        return 0;
    }
}

int mfi_max_time_arg(const bson_iter_t *it, int64_t *ms, mf_error *err)
{
    if (!mfi_is_number(it))
        return mf_error_set(err, MF_BadValue, "maxTimeMS must be a number");
    int64_t v = mfi_safe_number_long(it);
    if (v < 0 || v > INT32_MAX)
        return mf_error_set(err, MF_BadValue, "%lld value for maxTimeMS is out of range",
                            (long long)v);
    if (BSON_ITER_HOLDS_DOUBLE(it) && floor(bson_iter_double(it)) != bson_iter_double(it))
        return mf_error_set(err, MF_BadValue, "maxTimeMS has non-integral value");
    *ms = v;
    return 0;
}

bool mfi_doc_arg(const bson_iter_t *it, bson_t *out)
{
    return mf_bsonx_doc_view(it, out);
}

int mfi_hint_arg(const bson_iter_t *it, const char *field, mf_error *err)
{
    if (BSON_ITER_HOLDS_UTF8(it) || BSON_ITER_HOLDS_DOCUMENT(it))
        return 0;
    return mf_error_set(err, MF_TypeMismatch,
                        "BSON field '%s' is the wrong type '%s', expected types '[string, object]'",
                        field, mf_bsonx_type_alias(bson_iter_type(it)));
}

/* {"h": {"$natural": 1}} and {"h": {"$natural": -1}}: the hints a
 * $natural sort becomes (mfi_natural_sort). */
static const uint8_t natural_hint_fwd[27] = {
    27, 0, 0, 0, 0x03, 'h', 0,
    19, 0, 0, 0, 0x10, '$', 'n', 'a', 't', 'u', 'r', 'a', 'l', 0, 1, 0, 0, 0, 0,
    0};
static const uint8_t natural_hint_back[27] = {
    27, 0, 0, 0, 0x03, 'h', 0,
    19, 0, 0, 0, 0x10, '$', 'n', 'a', 't', 'u', 'r', 'a', 'l', 0, 0xff, 0xff, 0xff, 0xff, 0,
    0};

/* +1 or -1 when `obj` is {$natural: <a number equal to +-1>} alone; 0 when
 * it has no $natural field; -2 when it has one otherwise (mongod's
 * hasInvalidNaturalParam, which 8.2 also applies to a compound sort). */
static int natural_dir(const bson_t *obj)
{
    bson_iter_t it, one;
    if (!bson_iter_init_find(&it, obj, "$natural"))
        return 0;
    if (bson_count_keys(obj) != 1 ||
        mf_bsonx_canonical_type(bson_iter_type(&it)) != mf_bsonx_canonical_type(BSON_TYPE_INT32))
        return -2;
    /* Numbers of every type by value: 1.0, NumberLong(-1), NumberDecimal("-1.0"). */
    static const uint8_t ones[19] = {19, 0, 0, 0, 0x10, 'p', 0, 1, 0, 0, 0,
                                     0x10, 'n', 0, 0xff, 0xff, 0xff, 0xff, 0};
    bson_t t;
    bson_init_static(&t, ones, sizeof ones);
    for (int dir = 1; dir >= -1; dir -= 2)
        if (bson_iter_init_find(&one, &t, dir > 0 ? "p" : "n") &&
            mf_bsonx_compare_values(&it, &one) == 0)
            return dir;
    return -2;
}

int mfi_natural_sort(bson_t *sort, bool *has_sort, bson_iter_t *hint, bool *has_hint,
                     mf_error *err)
{
    bson_t h;
    int hdir = 0, sdir = *has_sort ? natural_dir(sort) : 0;
    if (*has_hint && BSON_ITER_HOLDS_DOCUMENT(hint) && mfi_doc_arg(hint, &h) &&
        (hdir = natural_dir(&h)) == -2)
        return mf_error_set(err, MF_BadValue,
                            "$natural hint cannot be set to a value other than -1 or 1.");
    if (sdir == 0)
        return 0;
    if (sdir == -2)
        return mf_error_set(err, MF_BadValue,
                            "$natural sort cannot be set to a value other than -1 or 1.");
    if (*has_hint && hdir != 0 && hdir != sdir)
        return mf_error_set(err, MF_BadValue,
                            "$natural hint must be in the same direction as $natural sort order");
    if (*has_hint && hdir == 0 && !(BSON_ITER_HOLDS_DOCUMENT(hint) && bson_empty(&h)))
        return mf_error_set(err, MF_BadValue, "index hint not allowed with $natural sort order");
    bson_t holder;
    const uint8_t *bytes = sdir > 0 ? natural_hint_fwd : natural_hint_back;
    if (!bson_init_static(&holder, bytes, sizeof natural_hint_fwd) ||
        !bson_iter_init_find(hint, &holder, "h"))
        return mf_error_set(err, MF_InternalError, "the $natural hint does not parse");
    *has_hint = true;
    *has_sort = false;
    return 0;
}

int mfi_type_error(mf_error *err, const char *cmd, const char *field,
                   const bson_iter_t *it, const char *expected)
{
    return mf_error_set(err, MF_TypeMismatch,
                        "BSON field '%s.%s' is the wrong type '%s', expected type '%s'",
                        cmd, field, mf_bsonx_type_alias(bson_iter_type(it)), expected);
}

/* ------------------------------------------------------------ namespaces */

/* NamespaceString::isLegalClientSystemNS: the system collections a client
 * may create and write (a few of them only through the server's own
 * commands: system.profile's writes, system.views'). */
static bool legal_client_system_ns(const char *db, const char *coll)
{
    static const char *const any_db[] = {"system.js", "system.views", "system.profile",
                                         "system.users"};
    static const char *const admin[] = {"system.roles", "system.version", "system.keys",
                                        "system.backup_users", "system.new_users"};
    for (size_t i = 0; i < sizeof any_db / sizeof any_db[0]; i++)
        if (strcmp(coll, any_db[i]) == 0)
            return true;
    if (strcmp(db, "admin") == 0)
        for (size_t i = 0; i < sizeof admin / sizeof admin[0]; i++)
            if (strcmp(coll, admin[i]) == 0)
                return true;
    return (strcmp(db, "config") == 0 && strcmp(coll, "system.sessions") == 0) ||
           (strcmp(db, "local") == 0 && strcmp(coll, "system.replset") == 0);
}

/* mongod's rules for a collection name within `db`; `writes`: the command
 * creates or writes it, so a system collection must be one a client may
 * write (userAllowedCreateNS).  Reading any collection is allowed. */
int mfi_coll_name_check(const char *db, const char *coll, bool writes, mf_error *err)
{
    size_t n = strlen(coll);
    if (n == 0)
        return mf_error_set(err, MF_InvalidNamespace, "Invalid namespace specified '%s.'", db);
    if (strlen(db) + 1 + n > NS_MAX)
        return mf_error_set(err, MF_InvalidNamespace,
                            "Fully qualified namespace is too long. Namespace: %s.%s Max: %d",
                            db, coll, NS_MAX);
    if (strchr(coll, '$') || coll[0] == '.')
        return mf_error_set(err, MF_InvalidNamespace, "Invalid collection name: %s", coll);
    if (writes && strncmp(coll, "system.", 7) == 0 && !legal_client_system_ns(db, coll))
        return mf_error_set(err, MF_InvalidNamespace, "Invalid system namespace: %s.%s", db,
                            coll);
    return 0;
}

/* The command's first value as a collection name in `ctx->db`, into `ns`. */
int mfi_coll_arg(mf_cmd_ctx *ctx, const bson_t *cmd, char *ns, size_t cap, mf_error *err)
{
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_error_set(err, MF_InvalidNamespace, "collection name has invalid type %s",
                            mf_bsonx_type_alias(bson_iter_type(&it)));
    const char *coll = bson_iter_utf8(&it, NULL);
    int rc = mfi_coll_name_check(ctx->db, coll, ctx->writes, err);
    if (rc)
        return rc;
    snprintf(ns, cap, "%s.%s", ctx->db, coll);
    if (ctx->dbg) /* the operation's namespace, as its CurOp has it */
        snprintf(ctx->dbg->ns, sizeof ctx->dbg->ns, "%s", ns);
    return 0;
}

/* ------------------------------------------------------------- collations */

/* A command's `collation` argument (the collection's default and an
 * operation's collation are coll/options.c's). */
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


void mfi_append_number(bson_t *b, const char *key, int64_t v)
{
    if (v > -(1LL << 30) && v < (1LL << 30))
        BSON_APPEND_INT32(b, key, (int32_t)v);
    else
        BSON_APPEND_INT64(b, key, v);
}
