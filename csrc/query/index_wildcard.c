/*
 * index_wildcard.c -- the wildcard index kind (mongod's "$**" indexes):
 * its createIndexes checks, its keys, its bounds, and the planner's
 * expansion of one wildcard index into a virtual index per queried path.
 *
 * Keys (mongod's WildcardKeyGenerator).  The document is first projected
 * by the index's projection: {"path.$**": 1} keeps `path`; {"$**": 1}
 * keeps what `wildcardProjection` says, _id excluded unless the
 * projection includes it (without a projection only the top-level _id is
 * skipped, no copy made).  Then every leaf makes one key:
 *
 *   FIELD        ENCODING                        NOTE
 *   regular      the b-tree's, per field          compound wildcard indexes only,
 *                                                 in key-pattern order
 *   $_path       the dotted path, a string        array positions are not in it
 *   value        the leaf, under the collation    descending when the "$**"
 *                                                 field is -1
 *
 * An array is expanded one level (its elements under the array's own
 * path); an array inside an array is one value; an empty object is the
 * value {}, an empty array undefined; a field whose name holds a '.' is
 * skipped.  Each path that holds an array also makes a multikey metadata
 * key, MinKey for each regular field before the wildcard field, then the
 * number 1, then the path: numbers sort before strings, so these keys sit
 * apart from every leaf key.  mongod gives them one reserved RecordId;
 * here each document's own follows it, so a delete takes its metadata
 * keys with it.  A compound wildcard index gives a document without any
 * leaf one key with MinKey for $_path and value, so a query on its
 * regular prefix finds it.
 *
 * Multikey paths.  The planner has no cursor on the index at plan time,
 * so the paths that met an array are also kept as a 31-bit filter in the
 * index's multikey bits (bit hash(path) % 31), marked in the catalog by
 * the write path as any multikey bit is.  A path is taken as multikey
 * when it or a prefix has its bit set: a collision costs a sort or a
 * count from keys, never an answer.
 *
 * Planning.  mfi_wild_expand replaces each wildcard index by one virtual
 * index per path of the filter it can serve, {"$_path": 1, "<path>": 1}
 * (regular fields in place), as mongod's QueryPlannerIXSelect::
 * expandIndexes; the planner then treats each as a b-tree, with this
 * kind's bounds on the value field and mfi_wild_path_bounds on $_path.
 */
#include "index_type.h"
#include "keygen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STR_CAP 1024
#define MAX_VIRTUAL 64 /* virtual indexes one query may make */
#define PATH_FIELD "$_path"

/* What a wildcard index (or a virtual one) keeps: d->kind. */
typedef struct wild {
    bool is_virtual;
    size_t wfield;        /* real: the wildcard field; virtual: the $_path field */
    bool has_value;       /* virtual: a value field follows $_path */
    char *root;           /* "a" for {"a.$**": 1}, NULL for "$**" */
    mf_projection *proj;  /* applied before the walk, or NULL */
    char **ppaths;        /* the projection's paths other than _id */
    size_t nppaths;
    bool exclusion;       /* the projection excludes them */
    bool id_in;           /* _id is included */
} wild;

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

static bool is_wild_name(const char *f)
{
    size_t n = strlen(f);
    return strcmp(f, "$**") == 0 || (n >= 4 && strcmp(f + n - 4, ".$**") == 0);
}

static bool find(const bson_t *obj, const char *name, bson_iter_t *out)
{
    return bson_iter_init_find(out, obj, name);
}

static bool sub_doc(const bson_iter_t *it, bson_t *out)
{
    uint32_t len;
    const uint8_t *data;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return false;
    bson_iter_document(it, &len, &data);
    return bson_init_static(out, data, len);
}

static bool truthy(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_EOD: case BSON_TYPE_NULL: case BSON_TYPE_UNDEFINED: return false;
    case BSON_TYPE_BOOL: return bson_iter_bool(it);
    case BSON_TYPE_INT32: case BSON_TYPE_INT64: case BSON_TYPE_DOUBLE:
        return bson_iter_as_double(it) != 0.0;
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t v;
        char s[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &v);
        bson_decimal128_to_string(&v, s);
        return strtod(s, NULL) != 0.0;
    }
    default: return true;
    }
}

/* FieldRef::isPrefixOfOrEqualTo on dotted paths. */
static bool prefix_or_equal(const char *pre, const char *path)
{
    size_t n = strlen(pre);
    return strncmp(pre, path, n) == 0 && (path[n] == '\0' || path[n] == '.');
}

/* ------------------------------------------------------------ checks */

/* validateWildcardIndex: one wildcard field, not over a regular one. */
int mfi_wild_check_key(const bson_t *key, mf_error *err)
{
    bson_iter_t it;
    const char *wf = NULL;
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        if (!is_wild_name(bson_iter_key(&it)))
            continue;
        if (wf)
            return mf_error_set(err, 7246201, "Index Key can contain only one wildcard index field");
        wf = bson_iter_key(&it);
    }
    if (!wf)
        return mf_error_set(err, 7246202,
                            "No wildcard index field is specified for the wildcard index");
    size_t rootlen = strlen(wf) > 3 ? strlen(wf) - 4 : 0;
    bson_iter_init(&it, key);
    while (rootlen && bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        if (is_wild_name(f))
            continue;
        if (strncmp(wf, f, rootlen) == 0 && (f[rootlen] == '\0' || f[rootlen] == '.'))
            return mf_error_set(err, 7246204,
                                "A wildcard index field should not overlap with and index key "
                                "fields if wildcard projection is empty, however '%s' is "
                                "overlapping with the wildcard index field.",
                                f);
    }
    return 0;
}

int mfi_wild_check_key_spec(const bson_t *spec, const bson_t *key, mf_error *err)
{
    bson_iter_t it;
    if (bson_count_keys(key) > 1 && find(key, "$**", &it) && !find(spec, "wildcardProjection", &it))
        return mf_error_set(err, MF_CannotCreateIndex,
                            "Compound wildcard indexes on all fields must also specify "
                            "'wildcardProjection' option");
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* validateWildcardProjection's overlap check over sorted paths. */
static int check_overlap(char **v, size_t n, mf_error *err)
{
    for (size_t i = 1; i < n; i++)
        if (prefix_or_equal(v[i - 1], v[i]) || prefix_or_equal(v[i], v[i - 1]))
            return mf_error_set(err, 7246200,
                                "Fields in Wildcard Projection cannot overlap, however '%s' is "
                                "overlapped with '%s",
                                v[i - 1], v[i]);
    return 0;
}

/* validateWildcardProjection: a compound wildcard index's projection. */
static int check_compound_projection(const bson_t *key, const bson_t *proj, mf_error *err)
{
    bson_iter_t it;
    const char *in[64], *ex[64], *reg[32];
    size_t nin = 0, nex = 0, nreg = 0;
    int rc = 0;
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        if (is_wild_name(f)) {
            if (strcmp(f, "$**") != 0)
                return mf_error_set(err, 7246206,
                                    "Wildcard index field must be always '$**' if "
                                    "wildcardProjection is specified");
        } else if (nreg < 32) {
            reg[nreg++] = f;
        }
    }
    bson_iter_init(&it, proj);
    while (bson_iter_next(&it)) {
        if (nin + nex >= 64)
            break;
        if (truthy(&it))
            in[nin++] = bson_iter_key(&it);
        else
            ex[nex++] = bson_iter_key(&it);
    }
    qsort(in, nin, sizeof in[0], cmp_str);
    qsort(ex, nex, sizeof ex[0], cmp_str);
    qsort(reg, nreg, sizeof reg[0], cmp_str);
    if ((rc = check_overlap((char **)in, nin, err)) != 0 ||
        (rc = check_overlap((char **)ex, nex, err)) != 0)
        return rc;
    for (size_t i = 0; i < nreg; i++)
        for (size_t j = 0; j < nin; j++)
            if (prefix_or_equal(in[j], reg[i]))
                return mf_error_set(err, 7246208,
                                    "Index Key and Wildcard Projection cannot contain "
                                    "overlapping fields, however '%s' index field is ovverlapping "
                                    "with '%s' wildcardProjection path.",
                                    reg[i], in[j]);
    if (nex) {
        for (size_t i = 0; i < nreg; i++) {
            bool excluded = false;
            for (size_t j = 0; j < nex; j++)
                excluded |= prefix_or_equal(ex[j], reg[i]);
            if (!excluded)
                return mf_error_set(err, 7246209,
                                    "wildcardProjection paths must exclude all regular index "
                                    "fields, however '%s'is not excluded.",
                                    reg[i]);
        }
    }
    if (nin && nex && !((nin == 1 && strcmp(in[0], "_id") == 0) ||
                        (nex == 1 && strcmp(ex[0], "_id") == 0)))
        return mf_error_set(err, 7246211,
                            "Inclusion and exclusion statements cannot combine in the "
                            "wildcardProjection with an exception of explicitly including _id "
                            "field");
    return 0;
}

/* The projection the key generator applies: `proj` (or {root: 1}) with
 * _id: 0 appended unless it names _id (wildcardIndexSpecProjection-
 * Policies exclude _id by default), into `out` (initialised here). */
static void projection_spec(const bson_t *proj, const char *root, bson_t *out)
{
    bson_iter_t it;
    bool names_id = false;
    bson_init(out);
    if (proj) {
        bson_iter_init(&it, proj);
        while (bson_iter_next(&it)) {
            names_id |= prefix_or_equal("_id", bson_iter_key(&it));
            mf_bsonx_append_iter(out, bson_iter_key(&it), -1, &it);
        }
    } else if (root) {
        names_id = prefix_or_equal("_id", root);
        BSON_APPEND_INT32(out, root, 1);
    }
    if (!names_id)
        BSON_APPEND_INT32(out, "_id", 0);
}

int mfi_wild_check_projection(const bson_t *spec, const bson_iter_t *it, mf_error *err)
{
    bson_iter_t k, e;
    bson_t key = BSON_INITIALIZER, proj;
    if (find(spec, "key", &k))
        sub_doc(&k, &key);
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "The field 'wildcardProjection' must be a non-empty object, but got %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    if (!find(&key, "$**", &k))
        return mf_error_set(err, MF_FailedToParse,
                            "The field 'wildcardProjection' is only allowed when 'key' is "
                            "{\"$**\": ±1} or {\"$**\": \"columnstore\"}");
    sub_doc(it, &proj);
    if (bson_empty(&proj))
        return mf_error_set(err, MF_FailedToParse,
                            "The 'wildcardProjection' field can't be an empty object");
    int rc;
    if (bson_count_keys(&key) > 1 && (rc = check_compound_projection(&key, &proj, err)) != 0)
        return rc;
    /* ProjectionPolicies::wildcardIndexSpecProjectionPolicies: no
     * computed fields, no find operators */
    bson_iter_init(&e, &proj);
    while (bson_iter_next(&e)) {
        if (!BSON_ITER_HOLDS_NUMBER(&e) && !BSON_ITER_HOLDS_BOOL(&e)) {
            char v[STR_CAP];
            mf_bsonx_elem_to_string(&e, true, v, sizeof v);
            return mf_error_set(err, 7246207,
                                "Fields in wildcardProjection must be numbers, however '%s' is a "
                                "%s.",
                                v, mf_bsonx_type_alias(bson_iter_type(&e)));
        }
    }
    bson_t full;
    mf_projection *p = NULL;
    projection_spec(&proj, NULL, &full);
    rc = mf_projection_parse(&full, NULL, &p, err);
    bson_destroy(&full);
    mf_projection_free(p);
    if (rc) {
        char reason[MF_ERRMSG_MAX];
        memcpy(reason, err->msg, sizeof reason);
        return mf_error_set(err, rc,
                            "Failed to parse projection: wildcardProjection :: caused by :: %s",
                            reason);
    }
    return 0;
}

int mfi_wild_check_spec_ok(const bson_t *spec, mf_error *err)
{
    bson_iter_t it;
    if (find(spec, "sparse", &it) && truthy(&it))
        return mf_error_set(err, MF_CannotCreateIndex,
                            "Index type 'wildcard' does not support the sparse option");
    if (find(spec, "unique", &it) && truthy(&it))
        return mf_error_set(err, MF_CannotCreateIndex,
                            "Index type 'wildcard' does not support the unique option");
    if (find(spec, "expireAfterSeconds", &it))
        return mf_error_set(err, MF_CannotCreateIndex, "Index type 'wildcard' cannot be a TTL index");
    return 0;
}

/* -------------------------------------------------------- descriptors */

static void wild_free(wild *w)
{
    if (!w)
        return;
    free(w->root);
    mf_projection_free(w->proj);
    for (size_t i = 0; i < w->nppaths; i++)
        free(w->ppaths[i]);
    free(w->ppaths);
    free(w);
}

void mfi_wild_desc_clear(mf_index_desc *d)
{
    wild_free(d->kind);
    d->kind = NULL;
}

int mfi_wild_desc_init(mf_index_desc *d, const bson_t *spec, mf_error *err)
{
    wild *w = calloc(1, sizeof *w);
    bson_iter_t it;
    bson_t proj, full;
    bool has_proj = false;
    int rc = 0;
    if (!w)
        return oom(err);
    d->kind = w;
    for (size_t i = 0; i < d->nfields; i++)
        if (is_wild_name(d->paths[i]))
            w->wfield = i;
    const char *wf = d->paths[w->wfield];
    if (strcmp(wf, "$**") != 0 && !(w->root = strndup(wf, strlen(wf) - 4)))
        return oom(err);
    if (find(spec, "wildcardProjection", &it) && sub_doc(&it, &proj)) {
        has_proj = true;
        w->ppaths = calloc(bson_count_keys(&proj) + 1, sizeof *w->ppaths);
        if (!w->ppaths)
            return oom(err);
        bson_iter_init(&it, &proj);
        while (bson_iter_next(&it)) {
            const char *f = bson_iter_key(&it);
            if (strcmp(f, "_id") == 0) {
                w->id_in = truthy(&it);
                continue;
            }
            w->exclusion = !truthy(&it);
            if (!(w->ppaths[w->nppaths++] = strdup(f)))
                return oom(err);
        }
    }
    if (!has_proj && !w->root)
        return 0; /* {"$**": 1}: only the top-level _id is skipped */
    projection_spec(has_proj ? &proj : NULL, w->root, &full);
    rc = mf_projection_parse(&full, NULL, &w->proj, err);
    bson_destroy(&full);
    return rc;
}

/* ----------------------------------------------------------------- keys */

typedef struct wctx {
    const mf_index_desc *d;
    const wild *w;
    mf_keyset *out;
    mf_buf path;
    mf_buf prefix, suffix; /* the regular fields' encodings */
    size_t nbefore;        /* regular fields before the wildcard field */
    uint32_t bloom;
    size_t nleaves;
    mf_error *err;
    /* mfi_wild_key_values: instead of keeping each key, compare it with
     * `entry` and, the first time they agree, append its values */
    const uint8_t *entry;
    size_t entry_len;
    bson_t *values;
    bool found;
    mf_buf scratch;
    struct {
        bson_iter_t it;
    } reg[32]; /* the regular fields' values */
} wctx;

static int put_string(mf_buf *out, const char *s, size_t n)
{
    bson_value_t v = {.value_type = BSON_TYPE_UTF8};
    v.value.v_utf8.str = (char *)s;
    v.value.v_utf8.len = (uint32_t)n;
    return mf_bsonx_key_append_value(out, &v, false);
}

static int put_special(mf_buf *out, bson_type_t t, bool desc)
{
    bson_value_t v = {.value_type = t};
    if (t == BSON_TYPE_INT32)
        v.value.v_int32 = 1;
    return mf_bsonx_key_append_value(out, &v, desc);
}

static uint32_t path_bit(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    return 1u << (h % 31);
}

/* A leaf key: regular fields before, $_path, the value (`v` NULL:
 * undefined, an empty array's), regular fields after. */
static int key_values(wctx *x, const bson_iter_t *v);

static int add_key(wctx *x, const bson_iter_t *v)
{
    mf_buf *key = &x->scratch;
    bool desc = x->d->desc[x->w->wfield];
    x->nleaves++;
    if (x->found)
        return 0;
    key->len = 0;
    if ((!x->values && mfi_keyset_add(x->out, &key) != 0) ||
        mf_buf_append(key, x->prefix.data, x->prefix.len) != 0 ||
        put_string(key, (const char *)x->path.data, x->path.len) != 0 ||
        (v ? mf_bsonx_key_append_coll(key, v, desc, x->d->coll)
           : put_special(key, BSON_TYPE_UNDEFINED, desc)) != 0 ||
        mf_buf_append(key, x->suffix.data, x->suffix.len) != 0)
        return oom(x->err);
    if (x->values && (key->len == x->entry_len || key->len + 8 == x->entry_len) &&
        memcmp(key->data, x->entry, key->len) == 0)
        return key_values(x, v);
    return 0;
}

/* The entry's values, named as the virtual index's key pattern: the
 * regular fields, "$_path", the path. */
static int key_values(wctx *x, const bson_iter_t *v)
{
    const mf_index_desc *d = x->d;
    const char *path = (const char *)x->path.data;
    int plen = (int)x->path.len;
    bool ok = true;
    x->found = true;
    for (size_t i = 0, r = 0; ok && i < d->nfields; i++) {
        if (i != x->w->wfield) {
            ok = mf_bsonx_append_iter(x->values, d->paths[i], -1, &x->reg[r++].it);
            continue;
        }
        ok = bson_append_utf8(x->values, PATH_FIELD, -1, path, plen);
        char *name = strndup(path, x->path.len);
        ok = ok && name &&
             (v ? mf_bsonx_append_iter(x->values, name, -1, v)
                : bson_append_undefined(x->values, name, -1));
        free(name);
    }
    return ok ? 0 : oom(x->err);
}

/* A multikey metadata key: MinKey per regular field before, 1, the path. */
static int add_multikey(wctx *x)
{
    mf_buf *key;
    x->bloom |= path_bit((const char *)x->path.data, x->path.len);
    if (x->values)
        return 0;
    if (mfi_keyset_add(x->out, &key) != 0)
        return oom(x->err);
    for (size_t i = 0; i < x->nbefore; i++)
        if (put_special(key, BSON_TYPE_MINKEY, false) != 0)
            return oom(x->err);
    if (put_special(key, BSON_TYPE_INT32, false) != 0 ||
        put_string(key, (const char *)x->path.data, x->path.len) != 0)
        return oom(x->err);
    return 0;
}

static bool is_empty(const bson_iter_t *it)
{
    uint32_t len;
    const uint8_t *data;
    if (BSON_ITER_HOLDS_ARRAY(it))
        bson_iter_array(it, &len, &data);
    else
        bson_iter_document(it, &len, &data);
    return len <= 5;
}

/* mongod's _traverseWildcard over the elements of `it`. */
static int traverse(wctx *x, bson_iter_t *it, bool is_array, bool top)
{
    int rc = 0;
    while (rc == 0 && bson_iter_next(it)) {
        const char *k = bson_iter_key(it);
        size_t klen = bson_iter_key_len(it);
        if (memchr(k, '.', klen))
            continue; /* not queryable */
        if (top && !x->w->proj && strcmp(k, "_id") == 0)
            continue;
        size_t save = x->path.len;
        if (!is_array && ((x->path.len && mf_buf_append(&x->path, ".", 1) != 0) ||
                          mf_buf_append(&x->path, k, klen) != 0))
            return oom(x->err);
        bson_type_t t = bson_iter_type(it);
        if (t == BSON_TYPE_ARRAY && is_array) {
            rc = add_key(x, it); /* an array in an array is one value */
        } else if (t == BSON_TYPE_ARRAY || t == BSON_TYPE_DOCUMENT) {
            if (t == BSON_TYPE_ARRAY)
                rc = add_multikey(x);
            if (rc == 0 && is_empty(it)) {
                rc = add_key(x, t == BSON_TYPE_ARRAY ? NULL : it);
            } else if (rc == 0) {
                bson_iter_t child;
                if (!bson_iter_recurse(it, &child))
                    return mf_error_set(x->err, MF_InternalError, "invalid BSON in a document");
                rc = traverse(x, &child, t == BSON_TYPE_ARRAY, false);
            }
        } else {
            rc = add_key(x, it);
        }
        x->path.len = save;
    }
    return rc;
}

/* A compound wildcard index's regular fields: their one value each. */
typedef struct reg_ctx {
    wctx *x;
    size_t n;
} reg_ctx;

static int reg_emit(mfi_keygen *g, const mfi_kfield *f, size_t nmissing)
{
    (void)nmissing;
    reg_ctx *r = g->arg;
    wctx *x = r->x;
    if (r->n++)
        return mf_error_set(g->err, MF_BadValue,
                            "a compound wildcard index's non-wildcard field may not hold an "
                            "array (index %s)",
                            x->d->name);
    for (size_t i = 0; i < g->nfields; i++) {
        mf_buf *to = i < x->nbefore ? &x->prefix : &x->suffix;
        if (i < 32)
            x->reg[i].it = f[i].fixed;
        if (mf_bsonx_key_append_coll(to, &f[i].fixed, g->desc[i], g->coll) != 0)
            return oom(g->err);
    }
    return 0;
}

static int regular_fields(wctx *x, const bson_t *doc)
{
    const mf_index_desc *d = x->d;
    size_t nreg = d->nfields - 1;
    char *paths[32];
    bool desc[32];
    for (size_t i = 0, j = 0; i < d->nfields && j < 32; i++)
        if (i != x->w->wfield) {
            paths[j] = d->paths[i];
            desc[j++] = d->desc[i];
        }
    reg_ctx r = {.x = x};
    mfi_keygen g = {.nfields = nreg, .paths = paths, .desc = desc, .coll = d->coll,
                    .emit = reg_emit, .arg = &r, .err = x->err};
    return mfi_keygen_run(&g, doc);
}

int mfi_wild_keys(const mf_index_desc *d, const bson_t *doc, mf_keyset *out, uint32_t *multikey,
                  mf_error *err)
{
    const wild *w = d->kind;
    wctx x = {.d = d, .w = w, .out = out, .nbefore = w->wfield, .err = err};
    bson_t projected;
    bool has_projected = false;
    bson_iter_t it;
    int rc = 0;
    mf_keyset_clear(out);
    *multikey = 0;
    if (d->partial && !mf_matcher_match(d->partial, doc))
        return 0;
    if (d->nfields > 1 && (rc = regular_fields(&x, doc)) != 0)
        goto out;
    const bson_t *src = doc;
    if (w->proj) {
        has_projected = true;
        if ((rc = mf_projection_apply(w->proj, doc, -1, &projected, err)) != 0)
            goto out;
        src = &projected;
    }
    if (!bson_iter_init(&it, src)) {
        rc = mf_error_set(err, MF_InternalError, "invalid BSON in a document");
        goto out;
    }
    if ((rc = traverse(&x, &it, false, true)) != 0)
        goto out;
    if (d->nfields > 1 && x.nleaves == 0) {
        /* no leaf: the regular fields alone, $_path and value MinKey */
        mf_buf *key;
        if (mfi_keyset_add(out, &key) != 0 || mf_buf_append(key, x.prefix.data, x.prefix.len) != 0 ||
            put_special(key, BSON_TYPE_MINKEY, false) != 0 ||
            put_special(key, BSON_TYPE_MINKEY, d->desc[w->wfield]) != 0 ||
            mf_buf_append(key, x.suffix.data, x.suffix.len) != 0) {
            rc = oom(err);
            goto out;
        }
    }
    mfi_keyset_unique(out);
    size_t room = MF_BTREE_MAX_KEY - 8;
    for (size_t i = 0; i < out->n; i++)
        if (out->keys[i].len > room) {
            rc = mf_error_set(err, MF_KeyTooLong,
                              "key too large to index, failing index %s: a key of %zu bytes "
                              "(at most %zu)",
                              d->name, out->keys[i].len, room);
            goto out;
        }
    *multikey = x.bloom;
out:
    if (rc)
        mf_keyset_clear(out);
    if (has_projected)
        bson_destroy(&projected);
    mf_buf_free(&x.path);
    mf_buf_free(&x.prefix);
    mf_buf_free(&x.suffix);
    mf_buf_free(&x.scratch);
    return rc;
}

int mfi_wild_key_values(const mf_index_desc *vd, const bson_t *doc, const uint8_t *entry,
                        size_t entry_len, bson_t *out, mf_error *err)
{
    /* the wildcard index behind the virtual one: its fields without the
     * value field, "$**" in place of "$_path" */
    char *paths[33];
    bool desc[33];
    size_t n = 0, k = SIZE_MAX;
    for (size_t i = 0; i < vd->nfields && n < 33; i++) {
        if (k != SIZE_MAX && i == k + 1) {
            desc[k] = vd->desc[i];
            continue;
        }
        if (strcmp(vd->paths[i], PATH_FIELD) == 0)
            k = n;
        paths[n] = vd->paths[i];
        desc[n++] = vd->desc[i];
    }
    if (k == SIZE_MAX || k + 1 >= vd->nfields)
        return 0;
    wild w = {.wfield = k};
    mf_index_desc d = {.nfields = n, .paths = paths, .desc = desc, .coll = vd->coll};
    mf_keyset none = {0};
    wctx x = {.d = &d, .w = &w, .out = &none, .nbefore = k, .err = err, .entry = entry,
              .entry_len = entry_len, .values = out};
    bson_iter_t it;
    int rc = 0;
    if (n > 1)
        rc = regular_fields(&x, doc);
    if (rc == 0 && bson_iter_init(&it, doc))
        rc = traverse(&x, &it, false, true);
    mf_buf_free(&x.path);
    mf_buf_free(&x.prefix);
    mf_buf_free(&x.suffix);
    mf_buf_free(&x.scratch);
    return rc;
}

/* --------------------------------------------------------------- bounds */

static int enc_of(mf_buf *out, bson_type_t t)
{
    bson_t tmp = BSON_INITIALIZER, child;
    bson_iter_t it;
    if (t == BSON_TYPE_DOCUMENT) {
        bson_append_document_begin(&tmp, "", 0, &child);
        bson_append_document_end(&tmp, &child);
    } else if (t == BSON_TYPE_ARRAY) {
        bson_append_array_begin(&tmp, "", 0, &child);
        bson_append_array_end(&tmp, &child);
    } else {
        bson_append_binary(&tmp, "", 0, BSON_SUBTYPE_BINARY, (const uint8_t *)"", 0);
    }
    bson_iter_init(&it, &tmp);
    bson_iter_next(&it);
    int rc = mf_bsonx_key_append(out, &it, false);
    bson_destroy(&tmp);
    return rc;
}

static int cmp_buf(const mf_buf *a, const mf_buf *b)
{
    return mfi_key_cmp(a, b);
}

static bool is_full(const mfi_oil *o)
{
    return o->n == 1 && o->v[0].lo_v.value_type == BSON_TYPE_MINKEY &&
           o->v[0].hi_v.value_type == BSON_TYPE_MAXKEY;
}

/* Whether an interval of `o` holds a non-empty object or an array: values
 * no leaf key holds ({a: {b: 1}} is keyed as a.b). */
static int touches_containers(const mfi_oil *o, bool *touches)
{
    mf_buf obj = {0}, arr = {0}, bin = {0};
    *touches = false;
    if (enc_of(&obj, BSON_TYPE_DOCUMENT) != 0 || enc_of(&arr, BSON_TYPE_ARRAY) != 0 ||
        enc_of(&bin, BSON_TYPE_BINARY) != 0) {
        mf_buf_free(&obj);
        mf_buf_free(&arr);
        mf_buf_free(&bin);
        return -1;
    }
    for (size_t i = 0; i < o->n; i++) {
        const mfi_ival *iv = &o->v[i];
        /* objects past {} lie in ({}, []); arrays in [[], BinData) */
        if (cmp_buf(&iv->lo, &arr) < 0 && cmp_buf(&iv->hi, &obj) > 0)
            *touches = true;
        if (cmp_buf(&iv->hi, &arr) >= 0 && cmp_buf(&iv->lo, &bin) < 0)
            *touches = true;
    }
    mf_buf_free(&obj);
    mf_buf_free(&arr);
    mf_buf_free(&bin);
    return 0;
}

int mfi_wild_bounds(const mf_index_desc *d, size_t field, const mfi_pred *pr, mfi_oil *out,
                    bool *usable, bool *exact)
{
    const wild *w = d->kind;
    *usable = false;
    *exact = false;
    if (!w || !w->is_virtual || !w->has_value || field != w->wfield + 1) {
        /* a regular field: the b-tree's */
        *usable = true;
        *exact = pr->exact;
        *out = (mfi_oil){0};
        return mfi_oil_copy(out, &pr->oil);
    }
    /* What mongod's wildcard planning refuses: what can match a missing
     * path (null, $exists: false, negations), and objects and arrays as
     * values; $exists: true (every value) reads the path's subpaths too. */
    if (pr->negation || pr->matches_missing || pr->key_re)
        return 0;
    bool full = is_full(&pr->oil), touches = false;
    if (!full && touches_containers(&pr->oil, &touches) != 0)
        return -1;
    if (touches)
        return 0;
    *usable = true;
    *exact = pr->exact && !full;
    *out = (mfi_oil){0};
    return mfi_oil_copy(out, &pr->oil);
}

size_t mfi_wild_path_field(const mf_index_desc *d)
{
    const wild *w = d->kind;
    if (!d->type || strcmp(d->type->plugin, "wildcard") != 0 || !w || !w->is_virtual)
        return SIZE_MAX;
    return w->wfield;
}

static int push_strings(mfi_oil *out, const char *lo, size_t lolen, bool lo_incl, const char *hi,
                        size_t hilen, bool hi_incl)
{
    bson_t t = BSON_INITIALIZER;
    bson_iter_t a, b;
    bson_append_utf8(&t, "a", 1, lo, (int)lolen);
    bson_append_utf8(&t, "b", 1, hi, (int)hilen);
    bson_iter_init_find(&a, &t, "a");
    bson_iter_init_find(&b, &t, "b");
    int rc = mfi_oil_push_range(out, &a, lo_incl, &b, hi_incl);
    bson_destroy(&t);
    return rc;
}

int mfi_wild_path_bounds(const mf_index_desc *d, const mfi_oil *value, bool present,
                         mfi_oil *out)
{
    const wild *w = d->kind;
    int rc;
    *out = (mfi_oil){0};
    if (!w->has_value) {
        /* a compound index's regular prefix alone: the documents without
         * a leaf (MinKey) and every path, not the multikey keys */
        bson_t t = BSON_INITIALIZER, child;
        bson_iter_t mk, s, o;
        BSON_APPEND_MINKEY(&t, "m");
        BSON_APPEND_UTF8(&t, "s", "");
        BSON_APPEND_DOCUMENT_BEGIN(&t, "o", &child);
        bson_append_document_end(&t, &child);
        bson_iter_init_find(&mk, &t, "m");
        bson_iter_init_find(&s, &t, "s");
        bson_iter_init_find(&o, &t, "o");
        rc = mfi_oil_push_range(out, &mk, true, &mk, true) ||
             mfi_oil_push_range(out, &s, true, &o, false);
        bson_destroy(&t);
        return rc ? -1 : 0;
    }
    const char *p = d->paths[w->wfield + 1];
    size_t n = strlen(p);
    if ((rc = push_strings(out, p, n, true, p, n, true)) != 0)
        return rc;
    if (!present || is_full(value)) {
        /* "p." to "p/": every subpath ('/' follows '.') */
        char *lo = malloc(n + 2), *hi = malloc(n + 2);
        if (!lo || !hi) {
            free(lo);
            free(hi);
            return -1;
        }
        memcpy(lo, p, n);
        memcpy(hi, p, n);
        lo[n] = '.';
        hi[n] = '/';
        rc = push_strings(out, lo, n + 1, true, hi, n + 1, false);
        free(lo);
        free(hi);
    }
    return rc;
}

/* ------------------------------------------------------------ expansion */

typedef struct strs {
    char **v;
    size_t n, cap;
} strs;

static int strs_add(strs *s, const char *p)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], p) == 0)
            return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        char **v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(p)))
        return -1;
    s->n++;
    return 0;
}

static void strs_free(strs *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

/* The paths conditions of `filter` bound, at its top level, in its
 * top-level $and and in the clauses of its $ors (those OR plans serve). */
static int collect_paths(const bson_t *filter, strs *out, int depth, mf_error *err)
{
    mfi_preds preds = {0};
    bson_iter_t it, arr;
    int rc = mfi_preds_collect(filter, &preds, err);
    for (size_t i = 0; rc == 0 && i < preds.n; i++)
        if (strs_add(out, preds.v[i].path) != 0)
            rc = oom(err);
    mfi_preds_free(&preds);
    if (rc || depth > 4 || !bson_iter_init(&it, filter))
        return rc;
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if ((strcmp(k, "$or") != 0 && strcmp(k, "$and") != 0) || !BSON_ITER_HOLDS_ARRAY(&it) ||
            !bson_iter_recurse(&it, &arr))
            continue;
        while (rc == 0 && bson_iter_next(&arr)) {
            bson_t clause;
            if (sub_doc(&arr, &clause))
                rc = collect_paths(&clause, out, depth + 1, err);
        }
    }
    return rc;
}

static bool all_digits(const char *p, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return true;
}

/* Whether the wildcard index `d` holds the leaves of `p` (its root and
 * projection), and whether `p` may meet an array (`*multikey`).  A path
 * with a numeric component after a multikey prefix is refused: the index
 * keys array elements under the array's path. */
static bool serves(const mf_index_desc *d, const char *p, bool *multikey)
{
    const wild *w = d->kind;
    *multikey = false;
    if (p[0] == '$' || strstr(p, ".$"))
        return false;
    if (prefix_or_equal("_id", p)) {
        if (!w->id_in)
            return false;
    } else if (w->root) {
        if (!prefix_or_equal(w->root, p))
            return false;
    } else if (w->nppaths) {
        bool hit = false;
        for (size_t i = 0; i < w->nppaths; i++)
            hit |= prefix_or_equal(w->ppaths[i], p);
        if (hit == w->exclusion)
            return false;
    }
    for (size_t i = 0; i < d->nfields; i++)
        if (i != w->wfield && strcmp(d->paths[i], p) == 0)
            return false; /* a regular field of the index */
    /* each prefix's bit: is it multikey */
    for (const char *c = p;;) {
        const char *dot = strchr(c, '.');
        size_t end = dot ? (size_t)(dot - p) : strlen(p);
        if (*multikey && all_digits(c, end - (size_t)(c - p)))
            return false;
        if (d->multikey & path_bit(p, end))
            *multikey = true;
        if (!dot)
            break;
        c = dot + 1;
    }
    return true;
}

static void virtual_free(mf_index_desc *v)
{
    free(v->name);
    if (v->key)
        bson_destroy(v->key);
    for (size_t i = 0; v->paths && i < v->nfields; i++)
        free(v->paths[i]);
    free(v->paths);
    free(v->desc);
    mf_collator_unref(v->coll);
    free(v->kind);
    memset(v, 0, sizeof *v);
}

/* The virtual index of `d` for path `p` (NULL: the regular prefix alone). */
static int virtual_make(const mf_index_desc *d, const char *p, bool multikey, mf_index_desc *v)
{
    const wild *w = d->kind;
    wild *vw = calloc(1, sizeof *vw);
    size_t nf = p ? d->nfields + 1 : w->wfield + 1;
    memset(v, 0, sizeof *v);
    v->type = d->type;
    v->tree = d->tree;
    v->nfields = nf;
    v->hidden = d->hidden;
    v->building = d->building;
    v->expire_after = -1;
    v->partial = d->partial;           /* borrowed: */
    v->partial_spec = d->partial_spec; /* the real index outlives the plan */
    v->coll = mf_collator_ref(d->coll);
    v->kind = vw;
    v->name = strdup(d->name);
    v->key = bson_new();
    v->paths = calloc(nf, sizeof *v->paths);
    v->desc = calloc(nf, sizeof *v->desc);
    if (!vw || !v->name || !v->key || !v->paths || !v->desc)
        return -1;
    vw->is_virtual = true;
    vw->wfield = w->wfield;
    vw->has_value = p != NULL;
    for (size_t i = 0, j = 0; i < d->nfields && j < nf; i++) {
        if (i != w->wfield) {
            v->paths[j] = strdup(d->paths[i]);
            v->desc[j++] = d->desc[i];
            continue;
        }
        v->paths[j] = strdup(PATH_FIELD);
        v->desc[j++] = false;
        if (!p)
            break;
        v->paths[j] = strdup(p);
        v->desc[j] = d->desc[i];
        if (multikey)
            v->multikey |= 1u << j;
        j++;
    }
    for (size_t j = 0; j < nf; j++) {
        if (!v->paths[j])
            return -1;
        BSON_APPEND_INT32(v->key, v->paths[j], v->desc[j] ? -1 : 1);
    }
    return 0;
}

static bool hint_names(const mf_index_desc *d, const bson_iter_t *hint)
{
    if (BSON_ITER_HOLDS_UTF8(hint))
        return strcmp(bson_iter_utf8(hint, NULL), d->name) == 0;
    bson_t h;
    bson_iter_t x, y;
    if (!sub_doc(hint, &h) || !bson_iter_init(&x, d->key) || !bson_iter_init(&y, &h))
        return false;
    for (;;) {
        bool nx = bson_iter_next(&x), ny = bson_iter_next(&y);
        if (!nx || !ny)
            return nx == ny;
        if (strcmp(bson_iter_key(&x), bson_iter_key(&y)) != 0 ||
            mf_bsonx_compare_values(&x, &y) != 0)
            return false;
    }
}

static bool is_wild(const mf_index_desc *d)
{
    return d->type && strcmp(d->type->plugin, "wildcard") == 0 && d->kind &&
           !((const wild *)d->kind)->is_virtual;
}

int mfi_wild_expand(const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                    const bson_iter_t **hint, mf_index_desc **out, size_t *nout, mf_error *err)
{
    strs paths = {0};
    size_t nwild = 0, hinted = SIZE_MAX, n = 0;
    mf_index_desc *v = NULL;
    int rc = 0;
    *out = NULL;
    *nout = 0;
    for (size_t i = 0; i < nidx; i++) {
        if (!is_wild(&idx[i]))
            continue;
        nwild++;
        if (!*hint || idx[i].hidden || idx[i].building || !hint_names(&idx[i], *hint))
            continue;
        if (hinted != SIZE_MAX) {
            char x[256], y[256];
            mf_bsonx_to_string(idx[hinted].key, x, sizeof x);
            mf_bsonx_to_string(idx[i].key, y, sizeof y);
            return mf_error_set(err, MF_IndexNotFound,
                                "Hint matched multiple indexes, must hint by index name. "
                                "Matched: kp: %s name: '%s' and kp: %s name: '%s'",
                                x, idx[hinted].name, y, idx[i].name);
        }
        hinted = i;
    }
    if (nwild == 0)
        return 0;
    if (filter && (rc = collect_paths(filter, &paths, 0, err)) != 0)
        goto out;
    if (!(v = calloc(nidx + MAX_VIRTUAL + 1, sizeof *v))) {
        rc = oom(err);
        goto out;
    }
    for (size_t i = 0; i < nidx; i++) {
        const mf_index_desc *d = &idx[i];
        if (hinted != SIZE_MAX && i != hinted)
            continue;
        if (!is_wild(d)) {
            v[n++] = *d; /* shallow: the caller's */
            continue;
        }
        const wild *w = d->kind;
        for (size_t p = 0; p <= paths.n && n < nidx + MAX_VIRTUAL; p++) {
            bool mk = false;
            const char *path = p < paths.n ? paths.v[p] : NULL;
            if (path ? !serves(d, path, &mk) : w->wfield == 0)
                continue;
            if (!path) { /* the regular prefix alone: when the filter bounds it */
                bool bound = false;
                for (size_t q = 0; q < paths.n; q++)
                    bound |= strcmp(paths.v[q], d->paths[0]) == 0;
                if (!bound)
                    continue;
            }
            if (virtual_make(d, path, mk, &v[n++]) != 0) {
                rc = oom(err);
                goto out;
            }
        }
    }
    if (hinted != SIZE_MAX) {
        if (n == 0) {
            rc = mf_error_set(err, MF_BadValue,
                              "hint provided does not correspond to an existing index");
            goto out;
        }
        *hint = NULL;
    }
    *out = v;
    *nout = n;
    v = NULL;
out:
    if (v)
        mfi_wild_expand_free(v, n);
    strs_free(&paths);
    return rc;
}

void mfi_wild_expand_free(mf_index_desc *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        const wild *w = v[i].kind;
        if (v[i].type && strcmp(v[i].type->plugin, "wildcard") == 0 && w && w->is_virtual)
            virtual_free(&v[i]);
    }
    free(v);
}
