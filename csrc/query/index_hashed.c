/*
 * index_hashed.c -- the "hashed" kind (index_type.h): mongod's
 * HashAccessMethod and ExpressionKeysPrivate::getHashKeys.
 *
 * Key pattern.  One field is "hashed" ({a: "hashed"}, or compound with
 * ascending and descending fields: {a: 1, b: "hashed", c: -1}); two are
 * 31303.  A hashed index cannot be unique (16764).  Both are refused as
 * mongod's access method refuses them, after the spec's own checks and
 * without their "Error in specification" decoration.
 *
 * Keys.  A document has exactly one key: each field's value found by
 * following its dotted path through documents (a missing one is null),
 * the hashed field's replaced by mongod's hash of it (bsonx/hash.c; under
 * the index's collation, strings at any depth hashed as their sort keys),
 * as a NumberLong.  An array anywhere along any field's path is refused:
 * 16766 "hashed indexes do not currently support array values", naming
 * the path up to the array; so the index is never multikey.  A sparse
 * index skips a document only when every field is missing; a partial one,
 * the documents its filter rejects.
 *
 * Bounds.  An equality or a $in of values (mongod's EQ and MATCH_IN, the
 * only predicates QueryPlannerIXSelect lets a hashed field use) bounds
 * the field to the hashes of its points, sorted: a $in's order is the
 * hashes', not the values'.  Never exact: values that hash alike (every
 * number is squashed to an integer first, so 1.5 hashes as 1) are left to
 * the matcher.  Ranges, regexes, $exists and negations do not use the
 * field; the other fields are b-tree fields.  A hashed field gives no sort
 * order and no DISTINCT_SCAN (plan.c), as in mongod.
 */
#include "index_type.h"
#include "keygen.h"

#include <string.h>

/* The value at dotted `path` of `doc`, following documents only
 * (mongod's extractElementAtPathOrArrayAlongPath).  1: found, into `out`;
 * 0: missing; 2: an array met, `*arr_len` the length of the path up to
 * and with its component. */
static int value_at(const bson_t *doc, const char *path, bson_iter_t *out, size_t *arr_len)
{
    bson_iter_t it, child;
    const char *p = path;
    if (!bson_iter_init(&it, doc))
        return 0;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        bool found = false;
        while (!found && bson_iter_next(&it))
            found = bson_iter_key_len(&it) == n && memcmp(bson_iter_key(&it), p, n) == 0;
        if (!found)
            return 0;
        if (BSON_ITER_HOLDS_ARRAY(&it)) {
            *arr_len = (size_t)(p - path) + n;
            return 2;
        }
        if (!dot) {
            *out = it;
            return 1;
        }
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &child))
            return 0;
        it = child;
        p = dot + 1;
    }
}

/* Field i's value in `doc` (a missing one is null) into `v`; `*present`
 * when it was there.  16766 at an array. */
static int field_value(const mf_index_desc *d, size_t i, const bson_t *doc, bson_iter_t *v,
                       bool *present, mf_error *err)
{
    size_t arr_len = 0;
    int r = value_at(doc, d->paths[i], v, &arr_len);
    if (r == 2)
        return mf_error_set(err, 16766,
                            "Error: hashed indexes do not currently support array values. "
                            "Found array at path: %.*s",
                            (int)arr_len, d->paths[i]);
    *present = r == 1;
    if (!*present)
        mfi_keygen_null(v);
    return 0;
}

/* The hash of `v` under the index's collation, as a one-field document
 * {"": NumberLong(h)} into `tmp` (initialised here), iterated by `out`. */
static int hashed_value(const mf_index_desc *d, const bson_iter_t *v, bson_t *tmp,
                        bson_iter_t *out, mf_error *err)
{
    int64_t h;
    bson_init(tmp);
    if (mf_bsonx_hash64(v, d->coll, &h) != 0 || !BSON_APPEND_INT64(tmp, "", h) ||
        !bson_iter_init(out, tmp) || !bson_iter_next(out))
        return mf_error_oom(err);
    return 0;
}

static bool is_hashed(const mf_index_desc *d, size_t i)
{
    return i < 32 && (d->hashed >> i & 1u);
}

static int hashed_keys(const mf_index_desc *d, const bson_t *doc, mf_keyset *out,
                       uint32_t *multikey, mf_error *err)
{
    mf_buf *key = NULL;
    bool any = false;
    int rc = 0;
    mf_keyset_clear(out);
    *multikey = 0;
    if (d->partial && !mf_matcher_match(d->partial, doc))
        return 0;
    if (mfi_keyset_add(out, &key) != 0)
        return mf_error_oom(err);
    for (size_t i = 0; rc == 0 && i < d->nfields; i++) {
        bson_iter_t v, h;
        bool present;
        if ((rc = field_value(d, i, doc, &v, &present, err)) != 0)
            break;
        any |= present;
        if (is_hashed(d, i)) {
            bson_t tmp;
            if ((rc = hashed_value(d, &v, &tmp, &h, err)) == 0 &&
                mf_bsonx_key_append(key, &h, d->desc[i]) != 0)
                rc = mf_error_oom(err);
            bson_destroy(&tmp);
        } else if (mf_bsonx_key_append_coll(key, &v, d->desc[i], d->coll) != 0) {
            rc = mf_error_oom(err);
        }
    }
    if (rc == 0 && d->sparse && !any)
        mf_keyset_clear(out);
    if (rc != 0) {
        mf_keyset_clear(out);
        return rc;
    }
    return mfi_keys_fit(d, out, err);
}

int mfi_hashed_key_values(const mf_index_desc *d, const bson_t *doc, bson_t *out, mf_error *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < d->nfields; i++) {
        bson_iter_t v, h;
        bool present;
        bson_t tmp = BSON_INITIALIZER;
        if ((rc = field_value(d, i, doc, &v, &present, err)) == 0 && is_hashed(d, i)) {
            bson_destroy(&tmp);
            rc = hashed_value(d, &v, &tmp, &h, err);
            v = h;
        }
        if (rc == 0 && !mf_bsonx_append_iter(out, d->paths[i], -1, &v))
            rc = mf_error_oom(err);
        bson_destroy(&tmp);
    }
    return rc;
}

/* The hashes of an equality's or a $in's points; a b-tree field's bounds
 * are the predicate's own. */
static int hashed_bounds(const mf_index_desc *d, size_t field, const mfi_pred *pr, mfi_oil *out,
                         bool *usable, bool *exact)
{
    *out = (mfi_oil){0};
    if (!is_hashed(d, field)) {
        *usable = true;
        *exact = pr->exact;
        return mfi_oil_copy(out, &pr->oil);
    }
    *usable = false;
    *exact = false;
    if (!pr->equality || pr->negation || !mfi_oil_is_points(&pr->oil))
        return 0;
    for (size_t i = 0; i < pr->oil.n; i++) {
        bson_t one = BSON_INITIALIZER, tmp;
        bson_iter_t v, h;
        mf_error ignored;
        int rc = -1;
        if (bson_append_value(&one, "", 0, &pr->oil.v[i].lo_v) && bson_iter_init(&v, &one) &&
            bson_iter_next(&v) && hashed_value(d, &v, &tmp, &h, &ignored) == 0) {
            rc = mfi_oil_push_point(out, &h);
            bson_destroy(&tmp);
        }
        bson_destroy(&one);
        if (rc != 0) {
            mfi_oil_free(out);
            return -1;
        }
    }
    mfi_oil_sort_points(out);
    *usable = true;
    return 0;
}

/* What HashAccessMethod's constructor refuses, undecorated. */
static int hashed_check_spec(const bson_t *spec, const bson_t *key, bool unique,
                             mf_error *err)
{
    (void)spec;
    bson_iter_t it;
    int n = 0;
    if (bson_iter_init(&it, key))
        while (bson_iter_next(&it))
            n += BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "hashed") == 0;
    if (n > 1) {
        char s[512];
        mf_bsonx_to_string(key, s, sizeof s);
        return mf_error_set(err, 31303,
                            "A maximum of one index field is allowed to be hashed but found %d "
                            "for 'key' %s",
                            n, s);
    }
    if (unique)
        return mf_error_set(err, 16764,
                            "Currently hashed indexes cannot guarantee uniqueness. Use a regular "
                            "index.");
    return 0;
}

const mf_index_type mfi_hashed_type = {
    .plugin = "hashed",
    .check_key = NULL,
    .keys = hashed_keys,
    .bounds = hashed_bounds,
    .check_spec = hashed_check_spec,
};
