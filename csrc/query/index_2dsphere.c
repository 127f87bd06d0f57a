/*
 * index_2dsphere.c -- the "2dsphere" kind (index_type.h): mongod 7.0's
 * S2AccessMethod and ExpressionKeysPrivate::getS2Keys, version 3.
 *
 * Spec.  One or more "2dsphere" fields, compound with ascending and
 * descending fields ({loc: "2dsphere", a: 1}); anything else beside them
 * is 16823.  createIndexes stores "2dsphereIndexVersion": 3 when the spec
 * has none (fixSpec); a version that is not a number, 1, 2 or 3 is
 * CannotCreateIndex with mongod's messages.  Versions 1 and 2 (string
 * cell keys, not sparse) are refused here with CannotCreateIndex: only
 * version 3 is built.  "coarsestIndexedLevel", "finestIndexedLevel" and
 * "maxCellsInCovering" override the levels (16747, 16748, 16749 when they
 * do not make sense; TypeMismatch or BadValue when not an integer).
 * "sparse" is accepted and ignored, as mongod ignores it: the index is
 * sparse on its geo fields anyway.
 *
 * Keys.  Each field's values are every value at its path, through the
 * documents and arrays along it (mongod's extractAllElementsAlongPath,
 * an array at the end of the path one value):
 *   - a geo field's values are parsed and covered (geo.h's
 *     mfi_geo_index_cells): a point by its leaf cell, other shapes by up
 *     to about 20 cells between the index's levels; each cell is a key
 *     part NumberLong(cell id).  A value that does not parse refuses the
 *     write, 16755 "Can't extract geo keys: <document>  <reason>"; none
 *     of its values (or null, undefined, [], {}) is "no geo value", a
 *     null key part;
 *   - another field's values as the b-tree keys them (an array's
 *     elements, [] undefined, missing null, strings under the collation).
 * The keys are the cartesian product of the fields' parts; a document
 * with no geo value in any geo field has none at all (version 3 is sparse
 * on its geo fields).  More than 100,000 keys for one document is 201
 * (mongod's indexMaxNumGeneratedKeysPerDocument).
 *
 * Bounds.  A geo field takes only geo conditions (plan.c): the query's
 * covering as mongod builds it (mfi_geo_query_cells), never exact -- the
 * matcher decides.  The planner uses the index only where a geo condition
 * bounds a geo field; the other fields are b-tree fields.
 */
#include "geo.h"
#include "index_type.h"
#include "keygen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* mongod's gIndexMaxNumGeneratedKeysPerDocument */
#define MAX_KEYS_PER_DOCUMENT 100000

static bool is_geo(const mf_index_desc *d, size_t i)
{
    return i < 32 && (d->geo >> i & 1u);
}

/* What the descriptor keeps of the spec (d->kind). */
typedef struct s2_desc {
    mf_s2_params p;
} s2_desc;

static const mf_s2_params *params_of(const mf_index_desc *d, mf_s2_params *fallback)
{
    if (d->kind)
        return &((const s2_desc *)d->kind)->p;
    mfi_geo_s2_defaults(fallback);
    return fallback;
}

/* ------------------------------------------------------------ the spec */

/* A number's value as a 64-bit integer, when it has one exactly (a
 * decimal128 is truncated). */
static bool integral(const bson_iter_t *it, long long *out)
{
    int64_t v;
    if (mf_bsonx_number_to_int64(it, &v) != 0)
        return false;
    if (BSON_ITER_HOLDS_DOUBLE(it) && (double)v != bson_iter_double(it))
        return false;
    *out = v;
    return true;
}

static bool is_number(const bson_iter_t *it)
{
    return BSON_ITER_HOLDS_NUMBER(it) || BSON_ITER_HOLDS_DECIMAL128(it);
}

/* bsonExtractIntegerFieldWithDefault: `*out` keeps the default when the
 * field is absent. */
static int integer_field(const bson_t *spec, const char *name, long long *out, mf_error *err)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, spec, name))
        return 0;
    if (!is_number(&it))
        return mf_error_set(err, MF_TypeMismatch,
                            "Expected field \"%s\" to have numeric type, but found %s", name,
                            mf_bsonx_type_alias(bson_iter_type(&it)));
    if (!integral(&it, out)) {
        char s[256];
        mf_bsonx_elem_to_string(&it, true, s, sizeof s);
        return mf_error_set(err, MF_BadValue,
                            "Expected field \"%s\" to have a value exactly representable as a "
                            "64-bit integer, but found %s",
                            name, s);
    }
    return 0;
}

/* initialize2dsphereParams for version 3. */
static int params_from_spec(const bson_t *spec, mf_s2_params *p, mf_error *err)
{
    mfi_geo_s2_defaults(p);
    long long finest = p->finest, coarsest = p->coarsest, cells = p->max_cells;
    int rc;
    if ((rc = integer_field(spec, "finestIndexedLevel", &finest, err)) != 0 ||
        (rc = integer_field(spec, "coarsestIndexedLevel", &coarsest, err)) != 0 ||
        (rc = integer_field(spec, "maxCellsInCovering", &cells, err)) != 0)
        return rc;
    if (coarsest < 0)
        return mf_error_set(err, 16747, "coarsestIndexedLevel must be >= 0");
    if (finest > 30)
        return mf_error_set(err, 16748, "finestIndexedLevel must be <= 30");
    if (finest < coarsest)
        return mf_error_set(err, 16749, "finestIndexedLevel must be >= coarsestIndexedLevel");
    p->finest = (int)finest;
    p->coarsest = (int)coarsest;
    /* advisory: the coverer takes at least one cell */
    p->max_cells = cells < 1 ? 1 : cells > 1000000 ? 1000000 : (int)cells;
    return 0;
}

/* The key pattern: "2dsphere" fields and numbers (S2AccessMethod's
 * constructor). */
static int s2_check_key(const bson_t *key, mf_error *err)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, key))
        return 0;
    while (bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "2dsphere") == 0)
            continue;
        if (!is_number(&it)) {
            char s[256];
            mf_bsonx_elem_to_string(&it, true, s, sizeof s);
            return mf_error_set(err, 16823,
                                "Cannot use 2dsphere index with other special index types: %s",
                                s);
        }
    }
    return 0;
}

/* S2AccessMethod::fixSpec, then the levels initialize2dsphereParams
 * checks when the index is made. */
static int s2_fix_spec(const bson_t *in, bson_t *out, mf_error *err)
{
    static const char *const supported = "only versions: [1,2,3] are supported";
    bson_iter_t it;
    bson_init(out);
    if (!bson_iter_init_find(&it, in, "2dsphereIndexVersion")) {
        bson_copy_to_excluding_noinit(in, out, "", NULL);
        if (!BSON_APPEND_INT32(out, "2dsphereIndexVersion", 3))
            return mf_error_oom(err);
    } else {
        char s[256];
        mf_bsonx_elem_to_string(&it, true, s, sizeof s);
        if (!is_number(&it))
            return mf_error_set(err, MF_CannotCreateIndex,
                                "Invalid type for geo index version { %s }, %s", s, supported);
        /* a double must be normal (not 0, subnormal, infinite or NaN) */
        if (BSON_ITER_HOLDS_DOUBLE(&it) && !isnormal(bson_iter_double(&it)))
            return mf_error_set(err, MF_CannotCreateIndex,
                                "Invalid value for geo index version { %s }, %s", s, supported);
        int64_t v = 0;
        mf_bsonx_number_to_int64(&it, &v);
        if (v != 1 && v != 2 && v != 3)
            return mf_error_set(err, MF_CannotCreateIndex,
                                "unsupported geo index version { %s }, %s", s, supported);
        if (v != 3)
            return mf_error_set(err, MF_CannotCreateIndex,
                                "2dsphereIndexVersion %lld is not supported by MultiforaDB: only "
                                "version 3, mongod's default since 3.2, is built",
                                (long long)v);
        bson_copy_to_excluding_noinit(in, out, "", NULL);
    }
    mf_s2_params p;
    return params_from_spec(in, &p, err);
}

static int s2_desc_init(mf_index_desc *d, const bson_t *spec, mf_error *err)
{
    s2_desc *k = calloc(1, sizeof *k);
    if (!k)
        return mf_error_oom(err);
    int rc = params_from_spec(spec, &k->p, err);
    if (rc != 0) {
        free(k);
        return rc;
    }
    d->kind = k;
    return 0;
}

static void s2_desc_clear(mf_index_desc *d)
{
    free(d->kind);
    d->kind = NULL;
}

/* ------------------------------------------------------------ the keys */

/* One field's key parts. */
typedef struct parts {
    bson_value_t *v;
    size_t n, cap;
} parts;

static int parts_push(parts *p, const bson_value_t *v)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        bson_value_t *nv = realloc(p->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        p->v = nv;
        p->cap = cap;
    }
    p->v[p->n++] = *v;
    return 0;
}

static int parts_push_type(parts *p, bson_type_t t)
{
    bson_value_t v = {.value_type = t};
    return parts_push(p, &v);
}

/* What collecting one field's values needs. */
typedef struct field_ctx {
    const mf_index_desc *d;
    const bson_t *doc;
    const mf_s2_params *p;
    parts *out;
    bool literal_array; /* a literal field met an array value */
    bool many_cells;    /* a geo value took several cells */
    mf_error *err;
} field_ctx;

/* The 16755 message: the document, then the reason. */
static int cannot_extract(field_ctx *c, const mf_error *why)
{
    char doc[MF_ERRMSG_MAX];
    mf_bsonx_to_string(c->doc, doc, sizeof doc);
    return mf_error_set(c->err, 16755, "Can't extract geo keys: %s  %s", doc, why->msg);
}

static bool no_geo_value(const bson_iter_t *v)
{
    if (BSON_ITER_HOLDS_NULL(v) || bson_iter_type(v) == BSON_TYPE_UNDEFINED)
        return true;
    bson_iter_t child;
    return (BSON_ITER_HOLDS_DOCUMENT(v) || BSON_ITER_HOLDS_ARRAY(v)) &&
           bson_iter_recurse(v, &child) && !bson_iter_next(&child);
}

static int geo_value(void *arg, const bson_iter_t *v)
{
    field_ctx *c = arg;
    int64_t *cells = NULL;
    size_t n = 0;
    mf_error why;
    int rc = mfi_geo_index_cells(v, c->p, &cells, &n, &why);
    if (rc == MF_InternalError)
        return mf_error_oom(c->err);
    if (rc != 0)
        return cannot_extract(c, &why);
    if (n == 0) {
        char doc[MF_ERRMSG_MAX];
        mf_bsonx_to_string(c->doc, doc, sizeof doc);
        return mf_error_set(c->err, 16756,
                            "Unable to generate keys for (likely malformed) geometry: %s", doc);
    }
    c->many_cells |= n > 1;
    for (size_t i = 0; i < n; i++) {
        bson_value_t cell = {.value_type = BSON_TYPE_INT64, .value.v_int64 = cells[i]};
        if (parts_push(c->out, &cell) != 0) {
            free(cells);
            return mf_error_oom(c->err);
        }
    }
    free(cells);
    return 0;
}

/* A literal field's value: an array's elements (an empty one undefined),
 * anything else itself (getS2OneLiteralKey). */
static int literal_value(void *arg, const bson_iter_t *v)
{
    field_ctx *c = arg;
    if (!BSON_ITER_HOLDS_ARRAY(v))
        return parts_push(c->out, bson_iter_value((bson_iter_t *)v)) ? mf_error_oom(c->err) : 0;
    c->literal_array = true;
    bson_iter_t el;
    bool any = false;
    if (bson_iter_recurse(v, &el))
        while (bson_iter_next(&el)) {
            any = true;
            if (parts_push(c->out, bson_iter_value(&el)) != 0)
                return mf_error_oom(c->err);
        }
    if (!any && parts_push_type(c->out, BSON_TYPE_UNDEFINED) != 0)
        return mf_error_oom(c->err);
    return 0;
}

/* The geo field's values, but those that mean "no geo value": with one
 * value only, null, undefined, [] and {} are dropped (getS2Keys, version
 * 2 and later).  libbson aligns bson_iter_t to 128 bytes by an attribute
 * of its typedef, which neither malloc nor an array's stride honours: each
 * one is kept in a padded, aligned slot. */
typedef struct geo_slot {
    _Alignas(128) bson_iter_t it;
} geo_slot;

typedef struct geo_list {
    geo_slot *v;
    size_t n, cap;
} geo_list;

static int geo_collect(void *arg, const bson_iter_t *v)
{
    geo_list *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        void *nv;
        if (posix_memalign(&nv, _Alignof(geo_slot), cap * sizeof(geo_slot)) != 0)
            return MF_InternalError;
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof(geo_slot));
        free(l->v);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++].it = *v;
    return 0;
}

/* Field i's key parts into `out`; `*has_geo` when it is a geo field with
 * a geo value; `*multikey` when the field may have several parts. */
static int field_parts(const mf_index_desc *d, size_t i, const bson_t *doc,
                       const mf_s2_params *p, parts *out, bool *has_geo, bool *multikey,
                       mf_error *err)
{
    field_ctx c = {.d = d, .doc = doc, .p = p, .out = out, .err = err};
    bool through_array = false;
    int rc;
    *has_geo = false;
    if (!is_geo(d, i)) {
        rc = mfi_path_elements(doc, d->paths[i], literal_value, &c, &through_array);
        if (rc == 0 && out->n == 0 && parts_push_type(out, BSON_TYPE_NULL) != 0)
            rc = mf_error_oom(err);
        *multikey = through_array || c.literal_array;
        return rc;
    }
    geo_list l = {0};
    rc = mfi_path_elements(doc, d->paths[i], geo_collect, &l, &through_array);
    if (rc != 0) {
        free(l.v);
        return mf_error_oom(err);
    }
    if (l.n == 1 && no_geo_value(&l.v[0].it))
        l.n = 0;
    for (size_t j = 0; rc == 0 && j < l.n; j++)
        rc = geo_value(&c, &l.v[j].it);
    *has_geo = l.n > 0;
    free(l.v);
    if (rc == 0 && out->n == 0 && parts_push_type(out, BSON_TYPE_NULL) != 0)
        rc = mf_error_oom(err);
    *multikey = through_array || c.many_cells;
    return rc;
}

/* Every field's parts of `doc`, into `f` (d->nfields of them, zeroed by
 * the caller); `*indexed` false when the document has no geo value. */
static int all_parts(const mf_index_desc *d, const bson_t *doc, parts *f, bool *indexed,
                     uint32_t *multikey, mf_error *err)
{
    mf_s2_params fallback;
    const mf_s2_params *p = params_of(d, &fallback);
    size_t total = 1;
    *indexed = false;
    *multikey = 0;
    for (size_t i = 0; i < d->nfields; i++) {
        bool has_geo, mk;
        int rc = field_parts(d, i, doc, p, &f[i], &has_geo, &mk, err);
        if (rc != 0)
            return rc;
        *indexed |= has_geo;
        if (mk)
            *multikey |= 1u << (i < 31 ? i : 31);
        total *= f[i].n;
        if (total > MAX_KEYS_PER_DOCUMENT)
            return mf_error_set(err, MF_CannotBuildIndexKeys,
                                "Insert of geo object exceeded maximum number of generated keys");
    }
    return 0;
}

static void parts_free(parts *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(f[i].v);
    free(f);
}

/* Key `k` (0 .. product - 1) of the cartesian product: its part of field
 * i is at[i]. */
static void product_at(const parts *f, size_t n, size_t k, size_t *at)
{
    for (size_t i = n; i-- > 0;) {
        at[i] = k % f[i].n;
        k /= f[i].n;
    }
}

static int encode_key(const mf_index_desc *d, const parts *f, const size_t *at, mf_buf *out)
{
    for (size_t i = 0; i < d->nfields; i++) {
        const bson_value_t *v = &f[i].v[at[i]];
        if (mf_bsonx_key_append_value_coll(out, v, d->desc[i], is_geo(d, i) ? NULL : d->coll) !=
            0)
            return -1;
    }
    return 0;
}

static size_t product_size(const parts *f, size_t n)
{
    size_t total = 1;
    for (size_t i = 0; i < n; i++)
        total *= f[i].n;
    return total;
}

static int s2_keys(const mf_index_desc *d, const bson_t *doc, mf_keyset *out, uint32_t *multikey,
                   mf_error *err)
{
    mf_keyset_clear(out);
    *multikey = 0;
    if (d->partial && !mf_matcher_match(d->partial, doc))
        return 0;
    parts *f = calloc(d->nfields ? d->nfields : 1, sizeof *f);
    size_t *at = calloc(d->nfields ? d->nfields : 1, sizeof *at);
    bool indexed = false;
    int rc = f && at ? all_parts(d, doc, f, &indexed, multikey, err) : mf_error_oom(err);
    if (rc == 0 && indexed) {
        size_t total = product_size(f, d->nfields);
        for (size_t k = 0; rc == 0 && k < total; k++) {
            mf_buf *key;
            product_at(f, d->nfields, k, at);
            if (mfi_keyset_add(out, &key) != 0 || encode_key(d, f, at, key) != 0)
                rc = mf_error_oom(err);
        }
    }
    if (f)
        parts_free(f, d->nfields);
    free(at);
    if (rc != 0) {
        mf_keyset_clear(out);
        *multikey = 0;
        return rc;
    }
    mfi_keyset_unique(out);
    return mfi_keys_fit(d, out, err);
}

/* returnKey's values of the key `entry` of `doc`, named by the fields'
 * paths (a cell a NumberLong); nothing when no key of `doc` is `entry`.
 * Without d->kind (a scan's copy of the descriptor) cells are covered at
 * mongod's default levels. */
static int s2_key_values(const mf_index_desc *d, const bson_t *doc, const uint8_t *entry,
                         size_t entry_len, bson_t *out, mf_error *err)
{
    parts *f = calloc(d->nfields ? d->nfields : 1, sizeof *f);
    size_t *at = calloc(d->nfields ? d->nfields : 1, sizeof *at);
    mf_buf key = {0};
    bool indexed = false;
    uint32_t multikey;
    int rc = f && at ? all_parts(d, doc, f, &indexed, &multikey, err) : mf_error_oom(err);
    size_t total = rc == 0 && indexed ? product_size(f, d->nfields) : 0;
    for (size_t k = 0; rc == 0 && k < total; k++) {
        key.len = 0;
        product_at(f, d->nfields, k, at);
        if (encode_key(d, f, at, &key) != 0) {
            rc = mf_error_oom(err);
            break;
        }
        /* the entry: the key, then a RecordId for a non-unique index */
        if ((key.len == entry_len || key.len + 8 == entry_len) &&
            memcmp(key.data, entry, key.len) == 0) {
            for (size_t i = 0; rc == 0 && i < d->nfields; i++)
                if (!bson_append_value(out, d->paths[i], -1, &f[i].v[at[i]]))
                    rc = mf_error_oom(err);
            break;
        }
    }
    mf_buf_free(&key);
    if (f)
        parts_free(f, d->nfields);
    free(at);
    return rc;
}

/* ---------------------------------------------------------- the bounds */

static int push_int64(mfi_oil *o, int64_t lo, int64_t hi)
{
    bson_t b = BSON_INITIALIZER;
    bson_iter_t l, h;
    int rc = -1;
    if (BSON_APPEND_INT64(&b, "l", lo) && BSON_APPEND_INT64(&b, "h", hi) &&
        bson_iter_init_find(&l, &b, "l") && bson_iter_init_find(&h, &b, "h"))
        rc = lo == hi ? mfi_oil_push_point(o, &l) : mfi_oil_push_range(o, &l, true, &h, true);
    bson_destroy(&b);
    return rc;
}

static int s2_bounds(const mf_index_desc *d, size_t field, const mfi_pred *pr, mfi_oil *out,
                     bool *usable, bool *exact)
{
    *out = (mfi_oil){0};
    *exact = false;
    if (!is_geo(d, field)) {
        *usable = true;
        *exact = pr->exact;
        return mfi_oil_copy(out, &pr->oil);
    }
    *usable = false;
    if (!pr->geo)
        return 0;
    mf_s2_params fallback;
    mf_geo_interval *v;
    size_t n;
    bool ok;
    if (mfi_geo_query_cells(pr->geo, params_of(d, &fallback), &v, &n, &ok) != 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = push_int64(out, v[i].lo, v[i].hi);
    free(v);
    if (rc != 0) {
        mfi_oil_free(out);
        return -1;
    }
    *usable = ok;
    return 0;
}

const mf_index_type mfi_2dsphere_type = {
    .plugin = "2dsphere",
    .check_key = s2_check_key,
    .keys = s2_keys,
    .bounds = s2_bounds,
    .fix_spec = s2_fix_spec,
    .desc_init = s2_desc_init,
    .desc_clear = s2_desc_clear,
    .key_values = s2_key_values,
};
