/*
 * testhooks.c -- the functions of multifora._core that exist only for the
 * tests (their names start with an underscore): the matcher, updates,
 * projection, sort, index keys, the planner and expressions called
 * directly on BSON, and the storage fault tables (_Faults) and simulated
 * power loss of the reliability suites.  module.c adds them to the module
 * (mfi_py_testhooks_add).
 */
#include "py_int.h"
#include "../query/query.h"
#include "../agg/agg.h"
#include "../storage/os.h"

/* For the tests: MongoDB's order between two BSON documents. */
static PyObject *core_bson_compare(PyObject *mod, PyObject *args)
{
    (void)mod;
    Py_buffer a, b;
    bson_t da, db;
    if (!PyArg_ParseTuple(args, "y*y*", &a, &b))
        return NULL;
    PyObject *out = NULL;
    if (!bson_init_static(&da, a.buf, (size_t)a.len) || !bson_init_static(&db, b.buf, (size_t)b.len))
        PyErr_SetString(PyExc_ValueError, "not BSON");
    else
        out = PyLong_FromLong(mf_bsonx_compare_docs(&da, &db));
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return out;
}

/* For the tests: the key encoding of each field of a BSON document,
 * concatenated; `desc` (a str of '0'/'1' per field) marks descending. */
static PyObject *core_key_encode(PyObject *mod, PyObject *args)
{
    (void)mod;
    Py_buffer a;
    const char *desc = "";
    bson_t doc;
    bson_iter_t it;
    mf_buf out = {0};
    if (!PyArg_ParseTuple(args, "y*|s", &a, &desc))
        return NULL;
    PyObject *res = NULL;
    size_t i = 0, nd = strlen(desc);
    if (!bson_init_static(&doc, a.buf, (size_t)a.len) || !bson_iter_init(&it, &doc)) {
        PyErr_SetString(PyExc_ValueError, "not BSON");
        goto out;
    }
    while (bson_iter_next(&it)) {
        if (mf_bsonx_key_append(&out, &it, i < nd && desc[i] == '1') != 0) {
            PyErr_NoMemory();
            goto out;
        }
        i++;
    }
    res = PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.len);
out:
    mf_buf_free(&out);
    PyBuffer_Release(&a);
    return res;
}

/* For the tests: whether BSON document `doc` matches BSON filter `filter`. */
static PyObject *core_match(PyObject *mod, PyObject *args)
{
    Py_buffer f, d;
    bson_t fb, db;
    mf_matcher *m = NULL;
    mf_error err;
    if (!PyArg_ParseTuple(args, "y*y*", &f, &d))
        return NULL;
    PyObject *out = NULL;
    if (mf_bsonx_validate(f.buf, (size_t)f.len, &err) != 0 ||
        mf_bsonx_validate(d.buf, (size_t)d.len, &err) != 0 ||
        !bson_init_static(&fb, f.buf, (size_t)f.len) ||
        !bson_init_static(&db, d.buf, (size_t)d.len) ||
        mf_matcher_parse(&fb, &m, &err) != 0) {
        mfi_py_raise_error(PyModule_GetState(mod), &err);
    } else {
        out = PyBool_FromLong(mf_matcher_match(m, &db));
    }
    mf_matcher_free(m);
    PyBuffer_Release(&f);
    PyBuffer_Release(&d);
    return out;
}

/* For the tests: the matcher's position for `$` -- an int, or None when
 * the match went through no array or `doc` does not match. */
static PyObject *core_match_pos(PyObject *mod, PyObject *args)
{
    Py_buffer f, d;
    bson_t fb, db;
    mf_matcher *m = NULL;
    mf_error err;
    if (!PyArg_ParseTuple(args, "y*y*", &f, &d))
        return NULL;
    PyObject *out = NULL;
    if (mf_bsonx_validate(f.buf, (size_t)f.len, &err) != 0 ||
        mf_bsonx_validate(d.buf, (size_t)d.len, &err) != 0 ||
        !bson_init_static(&fb, f.buf, (size_t)f.len) ||
        !bson_init_static(&db, d.buf, (size_t)d.len) ||
        mf_matcher_parse(&fb, &m, &err) != 0) {
        mfi_py_raise_error(PyModule_GetState(mod), &err);
    } else {
        int64_t pos;
        if (mf_matcher_match_pos(m, &db, &pos) && pos >= 0)
            out = PyLong_FromLongLong(pos);
        else
            out = Py_NewRef(Py_None);
    }
    mf_matcher_free(m);
    PyBuffer_Release(&f);
    PyBuffer_Release(&d);
    return out;
}

/* For the tests: apply BSON update `update` (with BSON `array_filters`, a
 * document {"0": {...}, ...}, or None) to BSON `doc`.  Returns (new
 * document bytes, changed). */
static PyObject *core_update(PyObject *mod, PyObject *args)
{
    Py_buffer d, u, af = {0};
    int is_insert = 0;
    long long pos = -1, now_ms = 0;
    bson_t db, ub, afb, out;
    mf_update *upd = NULL;
    mf_error err;
    bool changed = false;
    if (!PyArg_ParseTuple(args, "y*y*|z*pLL", &d, &u, &af, &is_insert, &pos, &now_ms))
        return NULL;
    PyObject *res = NULL;
    bson_init(&out);
    if (mf_bsonx_validate(d.buf, (size_t)d.len, &err) != 0 ||
        mf_bsonx_validate(u.buf, (size_t)u.len, &err) != 0 ||
        (af.buf && mf_bsonx_validate(af.buf, (size_t)af.len, &err) != 0) ||
        !bson_init_static(&db, d.buf, (size_t)d.len) ||
        !bson_init_static(&ub, u.buf, (size_t)u.len) ||
        (af.buf && !bson_init_static(&afb, af.buf, (size_t)af.len)) ||
        mf_update_parse(&ub, af.buf ? &afb : NULL, &upd, &err) != 0 ||
        mf_update_apply(upd, &db, is_insert != 0, pos, now_ms, &out, &changed, &err) != 0) {
        mfi_py_raise_error(PyModule_GetState(mod), &err);
    } else {
        res = Py_BuildValue("(y#O)", (const char *)bson_get_data(&out), (Py_ssize_t)out.len,
                            changed ? Py_True : Py_False);
    }
    bson_destroy(&out);
    mf_update_free(upd);
    PyBuffer_Release(&d);
    PyBuffer_Release(&u);
    if (af.buf)
        PyBuffer_Release(&af);
    return res;
}

/* For the tests: (is_replacement, needs_pos) of BSON update `update`. */
static PyObject *core_update_info(PyObject *mod, PyObject *args)
{
    Py_buffer u;
    bson_t ub;
    mf_update *upd = NULL;
    mf_error err;
    if (!PyArg_ParseTuple(args, "y*", &u))
        return NULL;
    PyObject *res = NULL;
    if (mf_bsonx_validate(u.buf, (size_t)u.len, &err) != 0 ||
        !bson_init_static(&ub, u.buf, (size_t)u.len) ||
        mf_update_parse(&ub, NULL, &upd, &err) != 0)
        mfi_py_raise_error(PyModule_GetState(mod), &err);
    else
        res = Py_BuildValue("(OO)", mf_update_is_replacement(upd) ? Py_True : Py_False,
                            mf_update_needs_pos(upd) ? Py_True : Py_False);
    mf_update_free(upd);
    PyBuffer_Release(&u);
    return res;
}

/* For the tests: the seed document an upsert with BSON `filter` starts from. */
static PyObject *core_upsert_seed(PyObject *mod, PyObject *args)
{
    Py_buffer f;
    bson_t fb, out;
    mf_error err;
    if (!PyArg_ParseTuple(args, "y*", &f))
        return NULL;
    PyObject *res = NULL;
    bson_init(&out);
    if (mf_bsonx_validate(f.buf, (size_t)f.len, &err) != 0 ||
        !bson_init_static(&fb, f.buf, (size_t)f.len)) {
        mfi_py_raise_error(PyModule_GetState(mod), &err);
    } else {
        bson_destroy(&out);
        if (mf_update_upsert_seed(&fb, &out, &err) != 0)
            mfi_py_raise_error(PyModule_GetState(mod), &err);
        else
            res = PyBytes_FromStringAndSize((const char *)bson_get_data(&out),
                                            (Py_ssize_t)out.len);
    }
    bson_destroy(&out);
    PyBuffer_Release(&f);
    return res;
}

/* A BSON argument, validated, as a static bson_t over `buf`. */
static int bson_arg(module_state *st, const Py_buffer *buf, bson_t *out)
{
    mf_error err;
    if (mf_bsonx_validate(buf->buf, (size_t)buf->len, &err) != 0) {
        mfi_py_raise_error(st, &err);
        return -1;
    }
    bson_init_static(out, buf->buf, (size_t)buf->len);
    return 0;
}

/* For the tests: `doc` projected by `spec` (with query `filter`, or None,
 * and the positional `pos`), as BSON bytes. */
static PyObject *core_project(PyObject *mod, PyObject *args)
{
    module_state *st = PyModule_GetState(mod);
    Py_buffer sb, fb = {0}, db;
    long long pos = -1;
    bson_t spec, filter, doc, out;
    mf_projection *p = NULL;
    mf_error err;
    PyObject *res = NULL;
    if (!PyArg_ParseTuple(args, "y*z*y*|L", &sb, &fb, &db, &pos))
        return NULL;
    if (bson_arg(st, &sb, &spec) != 0 || (fb.buf && bson_arg(st, &fb, &filter) != 0) ||
        bson_arg(st, &db, &doc) != 0)
        goto done;
    if (mf_projection_parse(&spec, fb.buf ? &filter : NULL, &p, &err) != 0) {
        mfi_py_raise_error(st, &err);
        goto done;
    }
    if (mf_projection_apply(p, &doc, pos, &out, &err) != 0)
        mfi_py_raise_error(st, &err);
    else
        res = PyBytes_FromStringAndSize((const char *)bson_get_data(&out), (Py_ssize_t)out.len);
    bson_destroy(&out);
done:
    mf_projection_free(p);
    PyBuffer_Release(&sb);
    if (fb.buf)
        PyBuffer_Release(&fb);
    PyBuffer_Release(&db);
    return res;
}

/* For the tests: the sort key of `doc` under `spec`. */
static PyObject *core_sort_key(PyObject *mod, PyObject *args)
{
    module_state *st = PyModule_GetState(mod);
    Py_buffer sb, db;
    bson_t spec, doc;
    mf_sort *s = NULL;
    mf_buf key = {0};
    mf_error err;
    PyObject *res = NULL;
    if (!PyArg_ParseTuple(args, "y*y*", &sb, &db))
        return NULL;
    if (bson_arg(st, &sb, &spec) != 0 || bson_arg(st, &db, &doc) != 0)
        goto done;
    if (mf_sort_parse(&spec, &s, &err) != 0 || mf_sort_key(s, &doc, &key, &err) != 0)
        mfi_py_raise_error(st, &err);
    else
        res = PyBytes_FromStringAndSize((const char *)key.data, (Py_ssize_t)key.len);
done:
    mf_buf_free(&key);
    mf_sort_free(s);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&db);
    return res;
}

/* For the tests: `docs` (a list of BSON bytes) sorted by `spec` through
 * the sorter; with `with_runs`, (docs, runs spilled) instead. */
static PyObject *core_sort(PyObject *mod, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"spec", "docs", "mem_limit", "allow_disk", "tmpdir", "limit",
                             "with_runs", NULL};
    module_state *st = PyModule_GetState(mod);
    Py_buffer sb;
    PyObject *docs, *res = NULL, *list = NULL;
    unsigned long long mem_limit = 104857600ULL;
    int allow_disk = 0, with_runs = 0;
    const char *tmpdir = NULL;
    long long limit = 0;
    bson_t spec;
    mf_sort *s = NULL;
    mf_sorter *sorter = NULL;
    mf_buf key = {0};
    mf_error err;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*O!|KpzLp", kwlist, &sb, &PyList_Type, &docs,
                                     &mem_limit, &allow_disk, &tmpdir, &limit, &with_runs))
        return NULL;
    if (bson_arg(st, &sb, &spec) != 0)
        goto done;
    if (mf_sort_parse(&spec, &s, &err) != 0) {
        mfi_py_raise_error(st, &err);
        goto done;
    }
    if (!(sorter = mf_sorter_new((size_t)mem_limit, allow_disk != 0, tmpdir, limit))) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(docs); i++) {
        PyObject *item = PyList_GET_ITEM(docs, i);
        Py_buffer db;
        bson_t doc;
        if (PyObject_GetBuffer(item, &db, PyBUF_SIMPLE) != 0)
            goto done;
        int rc = bson_arg(st, &db, &doc);
        if (rc == 0) {
            key.len = 0;
            rc = mf_sort_key(s, &doc, &key, &err);
            if (rc == 0)
                rc = mf_sorter_add(sorter, key.data, key.len, db.buf, (size_t)db.len, &err);
            if (rc)
                mfi_py_raise_error(st, &err);
        }
        PyBuffer_Release(&db);
        if (rc)
            goto done;
    }
    if (mf_sorter_finish(sorter, &err) != 0) {
        mfi_py_raise_error(st, &err);
        goto done;
    }
    if (!(list = PyList_New(0)))
        goto done;
    for (;;) {
        const uint8_t *d;
        size_t dlen;
        bool valid;
        if (mf_sorter_next(sorter, &d, &dlen, &valid, &err) != 0) {
            mfi_py_raise_error(st, &err);
            goto done;
        }
        if (!valid)
            break;
        PyObject *b = PyBytes_FromStringAndSize((const char *)d, (Py_ssize_t)dlen);
        if (!b || PyList_Append(list, b) != 0) {
            Py_XDECREF(b);
            goto done;
        }
        Py_DECREF(b);
    }
    if (with_runs)
        res = Py_BuildValue("(On)", list, (Py_ssize_t)mf_sorter_nruns(sorter));
    else
        res = Py_NewRef(list);
done:
    Py_XDECREF(list);
    mf_sorter_free(sorter);
    mf_buf_free(&key);
    mf_sort_free(s);
    PyBuffer_Release(&sb);
    return res;
}

/* ------------------------------------------------- test hook: the planner */

/* For the tests: an index descriptor from a test spec {key: {...}, name,
 * unique, sparse, hidden, partialFilterExpression, multikey: <bit mask>}
 * (index.c's mf_index_desc_init reads the catalog's specs; this reads the
 * test's, and fills only what the planner looks at). */
static int hook_desc_init(mf_index_desc *d, const bson_t *spec)
{
    bson_iter_t it, k;
    memset(d, 0, sizeof *d);
    d->type = mf_index_type_find(""); /* the test specs are b-trees */
    d->expire_after = -1;
    if (!bson_iter_init_find(&it, spec, "key") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return -1;
    uint32_t len;
    const uint8_t *data;
    bson_iter_document(&it, &len, &data);
    d->key = bson_new_from_data(data, len);
    if (!d->key || !bson_iter_init(&k, d->key))
        return -1;
    d->nfields = bson_count_keys(d->key);
    d->paths = calloc(d->nfields + 1, sizeof *d->paths);
    d->desc = calloc(d->nfields + 1, sizeof *d->desc);
    if (!d->paths || !d->desc)
        return -1;
    for (size_t i = 0; bson_iter_next(&k); i++) {
        d->paths[i] = strdup(bson_iter_key(&k));
        d->desc[i] = bson_iter_as_double(&k) < 0;
        if (!d->paths[i])
            return -1;
    }
    if (!bson_iter_init(&it, spec))
        return -1;
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        if (strcmp(f, "name") == 0 && BSON_ITER_HOLDS_UTF8(&it))
            d->name = strdup(bson_iter_utf8(&it, NULL));
        else if (strcmp(f, "unique") == 0)
            d->unique = bson_iter_as_bool(&it);
        else if (strcmp(f, "sparse") == 0)
            d->sparse = bson_iter_as_bool(&it);
        else if (strcmp(f, "hidden") == 0)
            d->hidden = bson_iter_as_bool(&it);
        else if (strcmp(f, "multikey") == 0)
            d->multikey = (uint32_t)bson_iter_as_int64(&it);
        else if (strcmp(f, "partialFilterExpression") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_document(&it, &len, &data);
            d->partial_spec = bson_new_from_data(data, len);
        }
    }
    if (!d->name)
        d->name = strdup("unnamed");
    d->is_id = d->name && strcmp(d->name, "_id_") == 0;
    if (d->is_id)
        d->unique = true;
    return d->name ? 0 : -1;
}

static void hook_desc_clear(mf_index_desc *d)
{
    for (size_t i = 0; d->paths && i < d->nfields; i++)
        free(d->paths[i]);
    free(d->paths);
    free(d->desc);
    free(d->name);
    if (d->key)
        bson_destroy(d->key);
    if (d->partial_spec)
        bson_destroy(d->partial_spec);
    memset(d, 0, sizeof *d);
}

/* For the tests: the planner's choice for BSON `filter`, `sort` (or None)
 * and `hint` (a document {hint: <name or key pattern>}, or None) over
 * indexes given as BSON test specs.  Returns {"stage", "index", "sorted",
 * "explain": BSON bytes of mf_scan_explain}. */
static PyObject *core_plan(PyObject *mod, PyObject *args)
{
    Py_buffer f, so = {0}, h = {0};
    PyObject *specs, *res = NULL;
    bson_t fb, sb, hb, explain;
    bson_iter_t hint;
    mf_index_desc *idx = NULL;
    size_t nidx = 0;
    mf_scan *scan = NULL;
    mf_error err;
    bool sorted = false, has_hint = false;
    if (!PyArg_ParseTuple(args, "y*z*z*O", &f, &so, &h, &specs))
        return NULL;
    bson_init(&explain);
    if (!PyList_Check(specs)) {
        PyErr_SetString(PyExc_TypeError, "specs must be a list of BSON documents");
        goto out;
    }
    nidx = (size_t)PyList_Size(specs);
    idx = calloc(nidx + 1, sizeof *idx);
    if (!idx) {
        PyErr_NoMemory();
        goto out;
    }
    for (size_t i = 0; i < nidx; i++) {
        char *data;
        Py_ssize_t len;
        bson_t spec;
        if (PyBytes_AsStringAndSize(PyList_GetItem(specs, (Py_ssize_t)i), &data, &len) < 0)
            goto out;
        if (!bson_init_static(&spec, (const uint8_t *)data, (size_t)len) ||
            hook_desc_init(&idx[i], &spec) != 0) {
            PyErr_SetString(PyExc_ValueError, "bad index spec");
            goto out;
        }
    }
    if (!bson_init_static(&fb, f.buf, (size_t)f.len) ||
        (so.buf && !bson_init_static(&sb, so.buf, (size_t)so.len)) ||
        (h.buf && !bson_init_static(&hb, h.buf, (size_t)h.len))) {
        PyErr_SetString(PyExc_ValueError, "not BSON");
        goto out;
    }
    if (h.buf && bson_iter_init(&hint, &hb) && bson_iter_next(&hint))
        has_hint = true;
    if (mf_scan_new(NULL, idx, nidx, &fb, has_hint ? &hint : NULL, so.buf ? &sb : NULL, NULL, &scan,
                    &sorted, &err) != 0) {
        mfi_py_raise_error(PyModule_GetState(mod), &err);
        goto out;
    }
    mf_scan_explain(scan, false, &explain);
    const char *name = mf_scan_index_name(scan);
    res = Py_BuildValue("{s:s,s:z,s:O,s:y#}", "stage", mf_scan_describe(scan), "index", name,
                        "sorted", sorted ? Py_True : Py_False, "explain",
                        (const char *)bson_get_data(&explain), (Py_ssize_t)explain.len);
out:
    mf_scan_free(scan);
    for (size_t i = 0; idx && i < nidx; i++)
        hook_desc_clear(&idx[i]);
    free(idx);
    bson_destroy(&explain);
    PyBuffer_Release(&f);
    if (so.buf)
        PyBuffer_Release(&so);
    if (h.buf)
        PyBuffer_Release(&h);
    return res;
}

/* ------------------------------------------------ index hooks (tests) */

/* _index_spec(spec) -> bytes: mf_index_spec_normalize. */
static PyObject *core_index_spec(PyObject *mod, PyObject *args)
{
    module_state *st = PyModule_GetState(mod);
    Py_buffer sb;
    bson_t in, out;
    mf_error err;
    PyObject *res = NULL;
    if (!PyArg_ParseTuple(args, "y*", &sb))
        return NULL;
    if (bson_arg(st, &sb, &in) == 0) {
        if (mf_index_spec_normalize(&in, &out, &err) != 0)
            mfi_py_raise_error(st, &err);
        else
            res = PyBytes_FromStringAndSize((const char *)bson_get_data(&out), (Py_ssize_t)out.len);
        bson_destroy(&out);
    }
    PyBuffer_Release(&sb);
    return res;
}

/* _index_conflict(existing, incoming) -> bool (same index), or raises. */
static PyObject *core_index_conflict(PyObject *mod, PyObject *args)
{
    module_state *st = PyModule_GetState(mod);
    Py_buffer eb, ib;
    bson_t ex, in;
    mf_error err;
    bool same = false;
    PyObject *res = NULL;
    if (!PyArg_ParseTuple(args, "y*y*", &eb, &ib))
        return NULL;
    if (bson_arg(st, &eb, &ex) == 0 && bson_arg(st, &ib, &in) == 0) {
        if (mf_index_spec_conflict(&ex, &in, &same, &err) != 0)
            mfi_py_raise_error(st, &err);
        else
            res = PyBool_FromLong(same);
    }
    PyBuffer_Release(&eb);
    PyBuffer_Release(&ib);
    return res;
}

/* _index_desc(spec) -> dict: mf_index_desc_init's fields. */
static PyObject *core_index_desc(PyObject *mod, PyObject *args)
{
    module_state *st = PyModule_GetState(mod);
    Py_buffer sb;
    bson_t spec;
    mf_index_desc d;
    mf_error err;
    PyObject *res = NULL, *paths = NULL, *desc = NULL;
    if (!PyArg_ParseTuple(args, "y*", &sb))
        return NULL;
    if (bson_arg(st, &sb, &spec) != 0)
        goto done;
    if (mf_index_desc_init(&d, NULL, 7, sb.buf, (size_t)sb.len, &err) != 0) {
        mfi_py_raise_error(st, &err);
        goto done;
    }
    paths = PyList_New((Py_ssize_t)d.nfields);
    desc = PyList_New((Py_ssize_t)d.nfields);
    for (size_t i = 0; paths && desc && i < d.nfields; i++) {
        PyList_SET_ITEM(paths, (Py_ssize_t)i, PyUnicode_FromString(d.paths[i]));
        PyList_SET_ITEM(desc, (Py_ssize_t)i, PyBool_FromLong(d.desc[i]));
    }
    if (paths && desc)
        res = Py_BuildValue("{s:s,s:K,s:O,s:O,s:O,s:O,s:O,s:O,s:L,s:O,s:k,s:O,s:y#}", "name",
                            d.name, "tree", (unsigned long long)d.tree, "paths", paths, "desc",
                            desc, "unique", d.unique ? Py_True : Py_False, "sparse",
                            d.sparse ? Py_True : Py_False, "hidden", d.hidden ? Py_True : Py_False,
                            "is_id", d.is_id ? Py_True : Py_False, "expire_after",
                            (long long)d.expire_after, "partial", d.partial ? Py_True : Py_False,
                            "multikey", (unsigned long)d.multikey, "building",
                            d.building ? Py_True : Py_False, "key",
                            (const char *)bson_get_data(d.key), (Py_ssize_t)d.key->len);
    mf_index_desc_clear(&d);
done:
    Py_XDECREF(paths);
    Py_XDECREF(desc);
    PyBuffer_Release(&sb);
    return res;
}

/* _index_keys(spec, doc) -> (list of key bytes, multikey bits). */
static PyObject *core_index_keys(PyObject *mod, PyObject *args)
{
    module_state *st = PyModule_GetState(mod);
    Py_buffer sb, db;
    bson_t spec, doc;
    mf_index_desc d;
    mf_keyset ks = {0};
    uint32_t mk = 0;
    mf_error err;
    PyObject *res = NULL, *list = NULL;
    if (!PyArg_ParseTuple(args, "y*y*", &sb, &db))
        return NULL;
    if (bson_arg(st, &sb, &spec) != 0 || bson_arg(st, &db, &doc) != 0)
        goto done;
    if (mf_index_desc_init(&d, NULL, 0, sb.buf, (size_t)sb.len, &err) != 0) {
        mfi_py_raise_error(st, &err);
        goto done;
    }
    if (mf_index_keys(&d, &doc, &ks, &mk, &err) != 0) {
        mfi_py_raise_error(st, &err);
    } else if ((list = PyList_New((Py_ssize_t)ks.n)) != NULL) {
        for (size_t i = 0; i < ks.n; i++)
            PyList_SET_ITEM(list, (Py_ssize_t)i,
                            PyBytes_FromStringAndSize((const char *)ks.keys[i].data,
                                                      (Py_ssize_t)ks.keys[i].len));
        res = Py_BuildValue("(Ok)", list, (unsigned long)mk);
    }
    mf_keyset_free(&ks);
    mf_index_desc_clear(&d);
done:
    Py_XDECREF(list);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&db);
    return res;
}

/* _index_name(key) -> str: mf_index_name_generate. */
static PyObject *core_index_name(PyObject *mod, PyObject *args)
{
    module_state *st = PyModule_GetState(mod);
    Py_buffer kb;
    bson_t key;
    mf_buf name = {0};
    PyObject *res = NULL;
    if (!PyArg_ParseTuple(args, "y*", &kb))
        return NULL;
    if (bson_arg(st, &kb, &key) == 0) {
        if (mf_index_name_generate(&key, &name) != 0)
            PyErr_NoMemory();
        else
            res = PyUnicode_FromStringAndSize((const char *)name.data, (Py_ssize_t)name.len);
    }
    mf_buf_free(&name);
    PyBuffer_Release(&kb);
    return res;
}

/* For the tests: evaluate the aggregation expression in BSON {"e": <expr>}
 * against BSON document `doc` ($$NOW = now_ms when given).  Returns the
 * BSON {"r": value}, or {} when the result is missing. */
static PyObject *core_expr(PyObject *mod, PyObject *args)
{
    Py_buffer e, d;
    long long now_ms = 0;
    int has_now = 0;
    bson_t eb, db, out;
    bson_iter_t it;
    mf_expr *x = NULL;
    mf_error err;
    bool missing = false;
    if (!PyArg_ParseTuple(args, "y*y*|Lp", &e, &d, &now_ms, &has_now))
        return NULL;
    PyObject *res = NULL;
    mf_expr_vars vars = {now_ms, has_now != 0, NULL};
    bson_init(&out);
    if (mf_bsonx_validate(e.buf, (size_t)e.len, &err) != 0 ||
        mf_bsonx_validate(d.buf, (size_t)d.len, &err) != 0 ||
        !bson_init_static(&eb, e.buf, (size_t)e.len) ||
        !bson_init_static(&db, d.buf, (size_t)d.len)) {
        mfi_py_raise_error(PyModule_GetState(mod), &err);
    } else if (!bson_iter_init_find(&it, &eb, "e")) {
        PyErr_SetString(PyExc_ValueError, "expected {\"e\": <expression>}");
    } else if (mf_expr_parse(&it, NULL, 0, &x, &err) != 0 ||
               mf_expr_eval(x, &db, &vars, &out, "r", &missing, &err) != 0) {
        mfi_py_raise_error(PyModule_GetState(mod), &err);
    } else {
        res = PyBytes_FromStringAndSize((const char *)bson_get_data(&out), (Py_ssize_t)out.len);
    }
    bson_destroy(&out);
    mf_expr_free(x);
    PyBuffer_Release(&e);
    PyBuffer_Release(&d);
    return res;
}

/* ------------------------------------------- storage faults (tests only) */

/* multifora._core._Faults: a storage fault table (storage/os.h).  A server
 * opened with it (Server(..., faults=...)) checks it in every file
 * operation of its engine, and no other server does.  The server keeps a
 * reference, so the table outlives its engine: its counts can be read
 * after the server is closed, or after an open it failed. */
typedef struct {
    PyObject_HEAD
    mf_os_faults *t;
} faults_object;

static PyObject *faults_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, ":_Faults", kwlist))
        return NULL;
    faults_object *self = (faults_object *)tp->tp_alloc(tp, 0);
    if (!self)
        return NULL;
    if (!(self->t = mf_os_faults_new())) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void faults_dealloc(faults_object *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    mf_os_faults_free(self->t);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* set(site_prefix, kind, skip, count): arm the table.  kind: "EIO",
 * "ENOSPC", "short", "torn". */
static PyObject *faults_set(faults_object *self, PyObject *args)
{
    const char *site, *kind;
    int skip, count;
    if (!PyArg_ParseTuple(args, "ssii", &site, &kind, &skip, &count))
        return NULL;
    mf_fault_kind k;
    if (strcmp(kind, "EIO") == 0)
        k = MF_FAULT_EIO;
    else if (strcmp(kind, "ENOSPC") == 0)
        k = MF_FAULT_ENOSPC;
    else if (strcmp(kind, "short") == 0)
        k = MF_FAULT_SHORT;
    else if (strcmp(kind, "torn") == 0)
        k = MF_FAULT_TORN;
    else {
        PyErr_Format(PyExc_ValueError, "unknown fault kind '%s'", kind);
        return NULL;
    }
    mf_os_fault_set(self->t, site, k, skip, count);
    Py_RETURN_NONE;
}

static PyObject *faults_clear(faults_object *self, PyObject *noargs)
{
    (void)noargs;
    mf_os_fault_clear(self->t);
    Py_RETURN_NONE;
}

/* (calls matched, calls failed, bytes a torn write kept) since arming. */
static PyObject *faults_stats(faults_object *self, PyObject *noargs)
{
    (void)noargs;
    return Py_BuildValue("(iin)", mf_os_fault_calls(self->t), mf_os_fault_hits(self->t),
                         (Py_ssize_t)mf_os_fault_torn_bytes(self->t));
}

static PyMethodDef faults_methods[] = {
    {"set", (PyCFunction)faults_set, METH_VARARGS,
     "set(site_prefix, kind, skip, count)\n--\n\nArm the table: calls at sites starting with "
     "site_prefix pass `skip` times, then fail `count` times (-1: forever)."},
    {"clear", (PyCFunction)faults_clear, METH_NOARGS,
     "clear()\n--\n\nDisarm the table."},
    {"stats", (PyCFunction)faults_stats, METH_NOARGS,
     "stats()\n--\n\n(calls matched, calls failed, torn bytes kept) since the table was "
     "armed."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot faults_slots[] = {
    {Py_tp_new, faults_new},
    {Py_tp_dealloc, faults_dealloc},
    {Py_tp_methods, faults_methods},
    {Py_tp_doc, "_Faults()\n--\n\nA storage fault table for one server's engine: pass it as "
                "Server(..., faults=) (tests)."},
    {0, NULL},
};

static PyType_Spec faults_spec = {
    .name = "multifora._core._Faults",
    .basicsize = sizeof(faults_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = faults_slots,
};

int mfi_py_faults_table(module_state *st, PyObject *obj, mf_os_faults **out)
{
    *out = NULL;
    if (!obj || obj == Py_None)
        return 0;
    if (!PyObject_TypeCheck(obj, st->faults_type)) {
        PyErr_SetString(PyExc_TypeError, "faults must be a multifora._core._Faults");
        return -1;
    }
    *out = ((faults_object *)obj)->t;
    return 0;
}

static PyObject *core_sim_enable(PyObject *mod, PyObject *args)
{
    (void)mod;
    int on;
    if (!PyArg_ParseTuple(args, "p", &on))
        return NULL;
    mf_os_sim_enable(on != 0);
    Py_RETURN_NONE;
}

static PyObject *core_sim_crash(PyObject *mod, PyObject *noargs)
{
    (void)noargs;
    mf_error err;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mf_os_sim_crash(&err);
    Py_END_ALLOW_THREADS
    if (rc != 0)
        return mfi_py_raise_error(PyModule_GetState(mod), &err);
    Py_RETURN_NONE;
}

/* The module's functions for the tests, added to it by mfi_py_testhooks_add. */
static PyMethodDef test_functions[] = {
    {"_sim_enable", core_sim_enable, METH_VARARGS,
     "_sim_enable(on)\n--\n\nTrack files opened from now on for simulated power loss; off "
     "forgets them (tests)."},
    {"_sim_crash", core_sim_crash, METH_NOARGS,
     "_sim_crash()\n--\n\nPut every tracked file back to its content at its last sync, "
     "plus a torn write's surviving sectors (tests)."},
    {"_bson_compare", core_bson_compare, METH_VARARGS,
     "_bson_compare(a, b)\n--\n\nMongoDB's order between two BSON documents (tests)."},
    {"_key_encode", core_key_encode, METH_VARARGS,
     "_key_encode(doc, desc='')\n--\n\nThe index-key encoding of a document's fields (tests)."},
    {"_expr", core_expr, METH_VARARGS,
     "_expr(expr_doc, doc, now_ms=0, has_now=False)\n--\n\nEvaluate {\"e\": <expression>} "
     "against `doc`: {\"r\": value}, or {} when missing (tests)."},
    {"_match", core_match, METH_VARARGS,
     "_match(filter, doc)\n--\n\nWhether BSON `doc` matches BSON `filter` (tests)."},
    {"_match_pos", core_match_pos, METH_VARARGS,
     "_match_pos(filter, doc)\n--\n\nThe matcher's position for `$`, or None (tests)."},
    {"_update", core_update, METH_VARARGS,
     "_update(doc, update, array_filters=None, is_insert=False, pos=-1, now_ms=0)\n--\n\n"
     "Apply an update to a document: (new bytes, changed) (tests)."},
    {"_update_info", core_update_info, METH_VARARGS,
     "_update_info(update)\n--\n\n(is_replacement, needs_pos) of an update (tests)."},
    {"_upsert_seed", core_upsert_seed, METH_VARARGS,
     "_upsert_seed(filter)\n--\n\nThe seed document of an upsert (tests)."},
    {"_project", core_project, METH_VARARGS,
     "_project(spec, filter, doc, pos=-1)\n--\n\nBSON `doc` projected by `spec` (tests)."},
    {"_sort_key", core_sort_key, METH_VARARGS,
     "_sort_key(spec, doc)\n--\n\nThe memcmp-ordered sort key of `doc` (tests)."},
    {"_sort", (PyCFunction)(void (*)(void))core_sort, METH_VARARGS | METH_KEYWORDS,
     "_sort(spec, docs, mem_limit=104857600, allow_disk=False, tmpdir=None, limit=0, "
     "with_runs=False)\n--\n\nBSON `docs` through the sorter (tests)."},
    {"_plan", core_plan, METH_VARARGS,
     "_plan(filter, sort, hint, specs)\n--\n\nThe planner's choice over test index specs "
     "(tests)."},
    {"_index_spec", core_index_spec, METH_VARARGS,
     "_index_spec(spec)\n--\n\nA createIndexes spec validated and normalized (tests)."},
    {"_index_conflict", core_index_conflict, METH_VARARGS,
     "_index_conflict(existing, incoming)\n--\n\nWhether two specs are the same index (tests)."},
    {"_index_desc", core_index_desc, METH_VARARGS,
     "_index_desc(spec)\n--\n\nThe index descriptor of a stored spec, as a dict (tests)."},
    {"_index_keys", core_index_keys, METH_VARARGS,
     "_index_keys(spec, doc)\n--\n\n(keys, multikey bits) of a document in an index (tests)."},
    {"_index_name", core_index_name, METH_VARARGS,
     "_index_name(key)\n--\n\nThe drivers' generated name of a key pattern (tests)."},
    {NULL, NULL, 0, NULL},
};

int mfi_py_testhooks_add(PyObject *mod)
{
    module_state *st = PyModule_GetState(mod);
    st->faults_type = (PyTypeObject *)PyType_FromModuleAndSpec(mod, &faults_spec, NULL);
    if (!st->faults_type || PyModule_AddType(mod, st->faults_type) < 0)
        return -1;
    return PyModule_AddFunctions(mod, test_functions);
}
