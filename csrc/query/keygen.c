/*
 * keygen.c -- a document's keys over a key pattern (keygen.h), for index
 * keys and sort keys alike: mongod's BtreeKeyGenerator, its
 * _getKeysWithArray recursion and _extractNextElement.
 */
#include "keygen.h"

#include <stdlib.h>
#include <string.h>

enum { E_AMBIGUOUS_FIELD = 16746 };

/* Room for the array rendered into the 16746 message; mf_error cuts the
 * whole message at MF_ERRMSG_MAX. */
#define ARR_STR_CAP 1024

/* {n: null, u: undefined}: the values of a missing path and of []. */
static const uint8_t consts_bson[] = {11, 0, 0, 0, BSON_TYPE_NULL, 'n', 0,
                                      BSON_TYPE_UNDEFINED, 'u', 0, 0};

static void const_value(const char *name, bson_iter_t *out)
{
    bson_t consts;
    bson_init_static(&consts, consts_bson, sizeof consts_bson);
    bson_iter_init_find(out, &consts, name);
}

void mfi_keygen_null(bson_iter_t *out)
{
    const_value("n", out);
}

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

static bool find_field(const bson_t *obj, const char *name, size_t n, bson_iter_t *out)
{
    if (!bson_iter_init(out, obj))
        return false;
    while (bson_iter_next(out))
        if (bson_iter_key_len(out) == n && memcmp(bson_iter_key(out), name, n) == 0)
            return true;
    return false;
}

/* The length of the first component of `path`. */
static size_t component_len(const char *path)
{
    const char *dot = strchr(path, '.');
    return dot ? (size_t)(dot - path) : strlen(path);
}

/* dotted_path_support's extractElementAtPathOrArrayAlongPath: follow
 * `*path` through documents until it ends or meets an array; `*path` is
 * left after the element found. */
static bool extract_path(const bson_t *obj, const char **path, bson_iter_t *out)
{
    const char *p = *path;
    size_t n = component_len(p);
    *path = p[n] == '.' ? p + n + 1 : p + n;
    if (!find_field(obj, p, n, out))
        return false;
    if (BSON_ITER_HOLDS_ARRAY(out) || **path == '\0')
        return true;
    if (BSON_ITER_HOLDS_DOCUMENT(out)) {
        bson_t sub;
        mf_bsonx_container_view(out, &sub);
        return extract_path(&sub, path, out);
    }
    return false;
}

/* mongod's _extractNextElement: 1 found, 0 not, or an error code. */
static int extract_next(mfi_keygen *g, const bson_t *obj, mfi_kfield *f, bson_iter_t *out,
                        bool *nested)
{
    bson_iter_t probe;
    bool have_field = find_field(obj, f->rest, component_len(f->rest), &probe);
    *nested = false;
    if (have_field && f->has_pos) {
        char arr[ARR_STR_CAP];
        bson_t a;
        mf_bsonx_container_view(&f->pos_arr, &a);
        mf_bsonx_to_string(&a, arr, sizeof arr);
        return mf_error_set(g->err, E_AMBIGUOUS_FIELD,
                            "Ambiguous field name found in array (do not use numeric field names "
                            "in embedded elements in an array), field: '%s' for array: %s",
                            bson_iter_key(&f->pos_elt), arr);
    }
    if (have_field)
        return extract_path(obj, &f->rest, out) ? 1 : 0;
    if (f->has_pos) {
        *nested = BSON_ITER_HOLDS_ARRAY(&f->pos_elt);
        f->rest = f->pos_rest;
        if (f->dotted_found)
            *out = f->dotted;
        return f->dotted_found ? 1 : 0;
    }
    return 0;
}

static void set_multikey(mfi_keygen *g, size_t i)
{
    g->multikey |= 1u << (i < 32 ? i : 31);
}

/* mongod's _getKeysWithArray: fix what `obj` fixes, expand the one array
 * met (if any), recurse per element.  `nmissing` counts the fields
 * missing so far on this branch. */
static int gen(mfi_keygen *g, mfi_kfield *f, const bson_t *obj, size_t nmissing)
{
    size_t n = g->nfields;
    bool have_arr = false, may_expand = true;
    bson_iter_t arr, el;
    bson_t arr_doc, empty, el_doc;
    /* One block per level: the fields for the recursion, what the array's
     * positional lookups found, and which fields go through the array. */
    mfi_kfield *sub = malloc((n ? n : 1) * (2 * sizeof *sub + sizeof(bool)));
    int rc = 0;
    if (!sub)
        return oom(g->err);
    mfi_kfield *pos = sub + n;
    bool *in_arr = (bool *)(pos + n);
    memset(in_arr, 0, n * sizeof *in_arr);
    for (size_t i = 0; i < n; i++) {
        bson_iter_t e;
        bool nested;
        if (f[i].rest[0] == '\0')
            continue;
        int found = extract_next(g, obj, &f[i], &e, &nested);
        if (found != 0 && found != 1) {
            rc = found;
            goto out;
        }
        if (!found) {
            const_value("n", &f[i].fixed);
            f[i].rest = "";
            nmissing++;
        } else if (BSON_ITER_HOLDS_ARRAY(&e)) {
            in_arr[i] = true;
            if (!have_arr) {
                arr = e;
                have_arr = true;
            } else if (bson_iter_key(&e) != bson_iter_key(&arr)) {
                rc = mf_error_set(g->err, MF_CannotIndexParallelArrays,
                                  "cannot index parallel arrays [%s] [%s]", bson_iter_key(&e),
                                  bson_iter_key(&arr));
                goto out;
            }
            may_expand &= !nested;
        } else {
            f[i].fixed = e; /* a non-array value ends the path */
        }
    }
    if (!have_arr) {
        rc = g->emit(g, f, nmissing);
        goto out;
    }
    bson_init(&empty);
    mf_bsonx_container_view(&arr, &arr_doc);
    if (bson_empty(&arr_doc)) {
        /* an empty array: the paths through it end in undefined */
        memcpy(sub, f, n * sizeof *sub);
        for (size_t i = 0; i < n; i++) {
            sub[i].has_pos = false;
            if (in_arr[i] && may_expand)
                set_multikey(g, i);
            if (in_arr[i] && sub[i].rest[0] == '\0')
                const_value("u", &sub[i].fixed);
        }
        rc = gen(g, sub, &empty, nmissing);
        goto out;
    }
    /* A numeric next component names an element: look it up once here. */
    memset(pos, 0, n * sizeof *pos);
    for (size_t i = 0; i < n; i++) {
        if (f[i].rest[0] == '\0') {
            if (in_arr[i] && may_expand)
                set_multikey(g, i);
            continue;
        }
        if (!find_field(&arr_doc, f[i].rest, component_len(f[i].rest), &pos[i].pos_elt)) {
            set_multikey(g, i);
            continue;
        }
        pos[i].has_pos = true;
        pos[i].pos_arr = arr;
        pos[i].pos_rest = f[i].rest;
        pos[i].dotted_found = extract_path(&arr_doc, &pos[i].pos_rest, &pos[i].dotted);
    }
    bson_iter_init(&el, &arr_doc);
    while (rc == 0 && bson_iter_next(&el)) {
        for (size_t i = 0; i < n; i++) {
            sub[i] = f[i];
            sub[i].has_pos = pos[i].has_pos;
            sub[i].pos_elt = pos[i].pos_elt;
            sub[i].pos_arr = pos[i].pos_arr;
            sub[i].pos_rest = pos[i].pos_rest;
            sub[i].dotted_found = pos[i].dotted_found;
            sub[i].dotted = pos[i].dotted;
            if (in_arr[i] && sub[i].rest[0] == '\0')
                sub[i].fixed = may_expand ? el : arr;
        }
        bool is_doc = BSON_ITER_HOLDS_DOCUMENT(&el) && mf_bsonx_container_view(&el, &el_doc);
        rc = gen(g, sub, is_doc ? &el_doc : &empty, nmissing);
    }
out:
    free(sub);
    return rc;
}

int mfi_keygen_run(mfi_keygen *g, const bson_t *doc)
{
    mfi_kfield *f = calloc(g->nfields ? g->nfields : 1, sizeof *f);
    if (!f)
        return oom(g->err);
    for (size_t i = 0; i < g->nfields; i++)
        f[i].rest = g->paths[i];
    int rc = gen(g, f, doc, 0);
    free(f);
    return rc;
}

int mfi_keygen_encode(const mfi_keygen *g, const mfi_kfield *f, mf_buf *out)
{
    for (size_t i = 0; i < g->nfields; i++)
        if (mf_bsonx_key_append_coll(out, &f[i].fixed, g->desc[i], g->coll) != 0)
            return -1;
    return 0;
}

/* ------------------------------------------------ all elements along a path */

/* The walk below the container whose children `kids` iterates. */
static int along(const bson_iter_t *kids, const char *path,
                 int (*fn)(void *arg, const bson_iter_t *v), void *arg, bool *through_array)
{
    bson_iter_t e = *kids;
    if (bson_iter_find(&e, path))
        return fn(arg, &e);
    const char *dot = strchr(path, '.');
    if (!dot)
        return 0;
    const char *next = dot + 1;
    e = *kids;
    if (!bson_iter_find_w_len(&e, path, (int)(dot - path)))
        return 0;
    bson_iter_t child;
    if (BSON_ITER_HOLDS_DOCUMENT(&e)) {
        if (!bson_iter_recurse(&e, &child))
            return 0;
        return along(&child, next, fn, arg, through_array);
    }
    if (!BSON_ITER_HOLDS_ARRAY(&e) || !bson_iter_recurse(&e, &child))
        return 0;
    size_t digits = strspn(next, "0123456789");
    if (digits > 0 && (next[digits] == '\0' || next[digits] == '.'))
        return along(&child, next, fn, arg, through_array); /* the element it names */
    *through_array = true;
    while (bson_iter_next(&child)) {
        bson_iter_t grand;
        if ((BSON_ITER_HOLDS_DOCUMENT(&child) || BSON_ITER_HOLDS_ARRAY(&child)) &&
            bson_iter_recurse(&child, &grand)) {
            int rc = along(&grand, next, fn, arg, through_array);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

int mfi_path_elements(const bson_t *doc, const char *path,
                      int (*fn)(void *arg, const bson_iter_t *v), void *arg, bool *through_array)
{
    bson_iter_t kids;
    if (!bson_iter_init(&kids, doc))
        return 0;
    return along(&kids, path, fn, arg, through_array);
}
