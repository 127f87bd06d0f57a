/*
 * diff.c -- reading mongod's $v: 2 update diffs, the `o.diff` of an oplog
 * update entry that oplog.c writes (mf_cl_update_diff): a change stream's
 * updateDescription of one, and the document it makes of a pre-image.
 *
 * The format (mongod's doc_diff, document_diff_serialization.cpp):
 *
 *   document diff  { d: {f: false, ...}       fields deleted
 *                    u: {f: value, ...}       fields set in place
 *                    i: {f: value, ...}       fields inserted at the end
 *                    s<f>: <sub-diff>, ... }  a document or array field changed inside
 *   array diff     { a: true                  the header, always first
 *                    l: Int32                 the new length, when the array shrank
 *                    u<i>: value              element i set
 *                    s<i>: <sub-diff>, ... }  element i changed inside
 *
 * Checked as mongod's DocumentDiffReader and ArrayDiffReader check them,
 * with their messages (BadValue here where mongod raises its own assertion
 * codes, 4770500-4770521 and 470510): a diff is not empty; a document
 * diff's sections come in the order d, u, i, s<f> (a section's kind is
 * its name's first letter) with each of d, u, i at most once, and every
 * field after the first s<f> is an s<f>; sections and sub-diffs are
 * documents; a sub-diff is an array diff exactly when its first field is
 * `a`, which must be true; `l` is an Int32; every later field of an array
 * diff is u or s and a decimal index.  Beyond mongod: `l` is not negative,
 * an index fits an Int32, and diffs nest at most DIFF_MAX_DEPTH deep (the
 * walks recurse).
 *
 * Applying (mongod's document_diff_applier.cpp, as oplog application runs
 * it: mustCheckExistenceForInsertOperations, off only for time-series
 * bucket updates):
 *   - a document's fields keep their order: a deleted one is dropped, an
 *     updated one replaced where it stands, one with a sub-diff rebuilt
 *     where it stands; then the updates of fields it lacks and the inserts
 *     are appended, in the diff's order (an inserted field it had moves to
 *     the end).  Deletes and sub-diffs of fields it lacks do nothing.
 *   - an array is cut at `l`; element i is replaced by u<i> or rebuilt by
 *     s<i>; past its end, u<i> pads with nulls up to i, and `l` beyond
 *     its length pads with nulls too.
 *   - a sub-diff meeting a value of another type (an object diff on an
 *     array, anything on a scalar) or a missing element makes null: mongod
 *     applies diffs idempotently, a later entry rewriting that value.
 *   - two changes of one field are refused, as mongod refuses them
 *     (4728000, "duplicate field name in diff").  Beyond mongod: array
 *     indexes must ascend and stay below `l` (mongod loops forever or
 *     fails an invariant on such a diff), and null padding stops at 16MB.
 *
 * Describing (mongod 7.0's change_stream_document_diff_parser.cpp), the
 * diff walked depth first, each level in the diff's order:
 *   document level: its u then i entries go to updatedFields, its d
 *     entries to removedFields, then each s<f> is walked;
 *   array level: `l` goes to truncatedArrays ({field, newSize: Int32}),
 *     then each u<i> to updatedFields and each s<i> is walked.
 * Paths are dotted ("a.b", "arr.2").  A path is ambiguous from its first
 * component that is a field name with a '.' or, past the first component,
 * one of digits without a leading zero ("0", "17": it reads as an index);
 * an index alone is not ambiguous.  Every ambiguous path written gets
 * disambiguatedPaths[path] = its components, field names as strings,
 * indexes as Int32; the field is {} when no path is ambiguous.  A path
 * written twice (u {'a.b'} and s a u {b}) appears twice, as in mongod.
 */
#include "coll.h"

#include <stdlib.h>
#include <string.h>

/* Sub-diffs nest as deep as the documents they change: at most the BSON
 * depth a stored document may have, with room for the diff's own levels. */
#define DIFF_MAX_DEPTH (MF_BSON_MAX_DEPTH + 2)

/* ------------------------------------------------------------ reading */

/* The document `it` holds (a document or an array), borrowed from it. */
static void iter_bson(const bson_iter_t *it, bson_t *out)
{
    uint32_t len = 0;
    const uint8_t *data = NULL;
    if (BSON_ITER_HOLDS_ARRAY(it))
        bson_iter_array(it, &len, &data);
    else
        bson_iter_document(it, &len, &data);
    bson_init_static(out, data, len);
}

/* "name: value" of the element at `it`, for a message. */
static const char *elem_text(const bson_iter_t *it, char *buf, size_t cap)
{
    mf_bsonx_elem_to_string(it, true, buf, cap);
    return buf;
}

/* A document diff's sections: each present one's contents, and the first
 * s<f> field (`subs`, positioned on it). */
typedef struct doc_sections {
    bool has_del, has_upd, has_ins, has_subs;
    bson_t del, upd, ins;
    bson_iter_t subs;
} doc_sections;

static int open_doc(const bson_t *diff, doc_sections *s, mf_error *err)
{
    bson_iter_t it;
    int prev = 0;
    memset(s, 0, sizeof *s);
    if (!bson_iter_init(&it, diff) || !bson_iter_next(&it))
        return mf_error_set(err, MF_BadValue, "Expected diff to be non-empty");
    do {
        const char *key = bson_iter_key(&it);
        /* mongod reads a section's kind from its name's first letter */
        int order = key[0] == 'd'   ? 1
                    : key[0] == 'u' ? 2
                    : key[0] == 'i' ? 3
                    : key[0] == 's' ? 4
                                    : 0;
        if (!key[0])
            return mf_error_set(err, MF_BadValue,
                                "Expected sections field names in diff to be non-empty ");
        if (order <= prev)
            return mf_error_set(err, MF_BadValue, "Unexpected section: %c in document diff",
                                key[0]);
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return mf_error_set(err, MF_BadValue, "Expected %c section to be type object",
                                key[0]);
        prev = order;
        if (order == 4) {
            /* every field from here on is a sub-diff (checked as walked) */
            s->subs = it;
            s->has_subs = true;
            return 0;
        }
        if (order == 1) {
            iter_bson(&it, &s->del);
            s->has_del = true;
        } else if (order == 2) {
            iter_bson(&it, &s->upd);
            s->has_upd = true;
        } else {
            iter_bson(&it, &s->ins);
            s->has_ins = true;
        }
    } while (bson_iter_next(&it));
    return 0;
}

/* That the field at `it`, at or after a document diff's first s<f>, is a
 * sub-diff: named s<f>, holding a document. */
static int check_doc_sub(const bson_iter_t *it, mf_error *err)
{
    char buf[256];
    if (bson_iter_key(it)[0] != 's')
        return mf_error_set(err, MF_BadValue,
                            "Did not expect more sections in diff but found one: %s",
                            bson_iter_key(it));
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_BadValue, "Subdiffs should be objects, got %s",
                            elem_text(it, buf, sizeof buf));
    return 0;
}

/* An array diff being read: its new length, and the entries after it. */
typedef struct array_reader {
    bson_iter_t it; /* positioned before the next entry */
    bool at_end;
    bool has_len;
    int32_t len;
} array_reader;

/* One entry of an array diff: u<idx> (`val` the value) or s<idx> (`val`
 * the sub-diff). */
typedef struct array_mod {
    uint32_t idx;
    bool is_sub;
    bson_iter_t val;
} array_mod;

static int open_array(const bson_t *diff, array_reader *r, mf_error *err)
{
    char buf[256];
    memset(r, 0, sizeof *r);
    if (!bson_iter_init(&r->it, diff) || !bson_iter_next(&r->it))
        return mf_error_set(err, MF_BadValue, "Expected diff to be non-empty");
    if (strcmp(bson_iter_key(&r->it), "a") != 0)
        return mf_error_set(err, MF_BadValue,
                            "Expected first field to be array header a but found %s",
                            bson_iter_key(&r->it));
    if (!BSON_ITER_HOLDS_BOOL(&r->it))
        return mf_error_set(err, MF_BadValue, "Expected array header to be bool but got %s",
                            elem_text(&r->it, buf, sizeof buf));
    if (!bson_iter_bool(&r->it))
        return mf_error_set(err, MF_BadValue,
                            "Expected array header to be value true but got %s",
                            elem_text(&r->it, buf, sizeof buf));
    /* peek at the next field for `l` without losing it */
    bson_iter_t peek = r->it;
    if (!bson_iter_next(&peek)) {
        r->at_end = true;
        return 0;
    }
    if (strcmp(bson_iter_key(&peek), "l") == 0) {
        if (!BSON_ITER_HOLDS_INT32(&peek))
            return mf_error_set(err, MF_BadValue, "Expected l section to be type int");
        r->has_len = true;
        r->len = bson_iter_int32(&peek);
        if (r->len < 0)
            return mf_error_set(err, MF_BadValue, "array diff's new length is negative: %d",
                                (int)r->len);
        r->it = peek;
    }
    return 0;
}

/* The next entry into `m`; *found false past the last. */
static int next_array_mod(array_reader *r, array_mod *m, bool *found, mf_error *err)
{
    char buf[256];
    *found = false;
    if (r->at_end || !bson_iter_next(&r->it)) {
        r->at_end = true;
        return 0;
    }
    const char *key = bson_iter_key(&r->it);
    size_t klen = strlen(key);
    if (klen < 2)
        return mf_error_set(err, MF_BadValue,
                            "expected field name to be at least two characters long, but "
                            "found: %s",
                            key);
    uint64_t idx = 0;
    for (size_t i = 1; i < klen; i++) {
        if (key[i] < '0' || key[i] > '9')
            return mf_error_set(err, MF_BadValue, "Expected integer but got %s", key + 1);
        idx = idx * 10 + (uint64_t)(key[i] - '0');
        /* an index past Int32 cannot be in a 16MB array (disambiguatedPaths
         * gives it as an Int32) */
        if (idx > INT32_MAX)
            return mf_error_set(err, MF_BadValue, "array diff index out of range: %s", key + 1);
    }
    m->idx = (uint32_t)idx;
    m->val = r->it;
    if (key[0] == 'u') {
        m->is_sub = false;
    } else if (key[0] == 's') {
        if (!BSON_ITER_HOLDS_DOCUMENT(&r->it))
            return mf_error_set(err, MF_BadValue, "expected sub diff at index %u but got %s",
                                m->idx, elem_text(&r->it, buf, sizeof buf));
        m->is_sub = true;
    } else {
        return mf_error_set(err, MF_BadValue,
                            "Expected either 'u' (update) or 's' (sub diff) at index %u but "
                            "got %s",
                            m->idx, elem_text(&r->it, buf, sizeof buf));
    }
    *found = true;
    return 0;
}

/* The sub-diff `it` holds (a document, checked by the caller) into
 * `sub`, and whether it is an array diff (its first field is `a`).  Its
 * header is checked here, as mongod's readers check it when they meet a
 * sub-diff, before anything is applied. */
static int open_sub(const bson_iter_t *it, bson_t *sub, bool *is_array, mf_error *err)
{
    bson_iter_t first;
    iter_bson(it, sub);
    if (!bson_iter_init(&first, sub) || !bson_iter_next(&first))
        return mf_error_set(err, MF_BadValue, "Expected diff to be non-empty");
    *is_array = strcmp(bson_iter_key(&first), "a") == 0;
    if (*is_array) {
        array_reader r;
        return open_array(sub, &r, err);
    }
    doc_sections s;
    return open_doc(sub, &s, err);
}

/* ------------------------------------------------------------ describing */

/* One component of the current path: where it starts in the dotted path,
 * its index when it is an array index, and whether the path is ambiguous
 * up to and including it. */
typedef struct path_part {
    size_t off, len;
    bool is_index;
    uint32_t idx;
    bool ambiguous;
} path_part;

typedef struct describer {
    bool disambiguate;
    mf_buf path; /* the dotted path, kept NUL-terminated past `len` */
    path_part parts[DIFF_MAX_DEPTH + 1];
    int nparts;
    bson_t upd, rem, trunc, dis; /* the four fields being built */
    uint32_t nrem, ntrunc;
} describer;

/* FieldRef::isNumericPathComponentStrict: digits, no leading zero. */
static bool numeric_strict(const char *s, size_t len)
{
    if (len == 0 || (len > 1 && s[0] == '0'))
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static int push_part(describer *d, const char *s, size_t len, bool is_index, uint32_t idx,
                     mf_error *err)
{
    if (d->nparts > DIFF_MAX_DEPTH)
        return mf_error_set(err, MF_BadValue, "diff nested deeper than %d levels",
                            DIFF_MAX_DEPTH);
    if (mf_buf_reserve(&d->path, len + 2) != 0)
        return mf_error_oom(err);
    path_part *p = &d->parts[d->nparts];
    if (d->nparts > 0)
        d->path.data[d->path.len++] = '.';
    p->off = d->path.len;
    p->len = len;
    memcpy(d->path.data + d->path.len, s, len);
    d->path.len += len;
    d->path.data[d->path.len] = '\0';
    p->is_index = is_index;
    p->idx = idx;
    if (d->nparts > 0 && d->parts[d->nparts - 1].ambiguous)
        p->ambiguous = true; /* once ambiguous, the rest of the path is */
    else
        /* an index alone is not ambiguous; a numeric first component is a
         * field name, since only a field below another reads as an index */
        p->ambiguous = !is_index && ((d->nparts > 0 && numeric_strict(s, len)) ||
                                     memchr(s, '.', len) != NULL);
    d->nparts++;
    return 0;
}

static int push_index(describer *d, uint32_t idx, mf_error *err)
{
    char buf[16];
    const char *k;
    size_t kl = mf_uint32_to_key(idx, &k, buf, sizeof buf);
    return push_part(d, k, kl, true, idx, err);
}

static void pop_part(describer *d)
{
    d->nparts--;
    d->path.len = d->parts[d->nparts].off - (d->nparts > 0 ? 1 : 0);
    d->path.data[d->path.len] = '\0';
}

/* disambiguatedPaths[path] = its components, when the path is ambiguous. */
static void note_path(describer *d)
{
    if (!d->disambiguate || !d->parts[d->nparts - 1].ambiguous)
        return;
    const char *path = (const char *)d->path.data;
    bson_t arr;
    bson_append_array_begin(&d->dis, path, (int)d->path.len, &arr);
    for (int i = 0; i < d->nparts; i++) {
        char buf[16];
        const char *k;
        size_t kl = mf_uint32_to_key((uint32_t)i, &k, buf, sizeof buf);
        const path_part *p = &d->parts[i];
        if (p->is_index)
            bson_append_int32(&arr, k, (int)kl, (int32_t)p->idx);
        else
            bson_append_utf8(&arr, k, (int)kl, path + p->off, (int)p->len);
    }
    bson_append_array_end(&d->dis, &arr);
}

/* updatedFields[<path>.<component>] = the value at `it`. */
static int add_updated(describer *d, const char *name, size_t len, bool is_index, uint32_t idx,
                       const bson_iter_t *it, mf_error *err)
{
    int rc = push_part(d, name, len, is_index, idx, err);
    if (rc)
        return rc;
    mf_bsonx_append_iter(&d->upd, (const char *)d->path.data, (int)d->path.len, it);
    note_path(d);
    pop_part(d);
    return 0;
}

/* Every entry of a u or i section to updatedFields, in order. */
static int add_section(describer *d, const bson_t *sec, mf_error *err)
{
    bson_iter_t it;
    bson_iter_init(&it, sec);
    while (bson_iter_next(&it)) {
        int rc = add_updated(d, bson_iter_key(&it), bson_iter_key_len(&it), false, 0, &it, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int describe_doc(describer *d, const bson_t *diff, mf_error *err);
static int describe_array(describer *d, const bson_t *diff, mf_error *err);

/* The sub-diff at `it`, the current path's last component its field. */
static int describe_sub(describer *d, const bson_iter_t *it, mf_error *err)
{
    bson_t sub;
    bool is_array;
    int rc = open_sub(it, &sub, &is_array, err);
    if (rc)
        return rc;
    return is_array ? describe_array(d, &sub, err) : describe_doc(d, &sub, err);
}

static int describe_doc(describer *d, const bson_t *diff, mf_error *err)
{
    doc_sections s;
    bson_iter_t it;
    int rc = open_doc(diff, &s, err);
    if (rc)
        return rc;
    /* updates before inserts, then deletes, then sub-diffs: mongod's order */
    if (s.has_upd && (rc = add_section(d, &s.upd, err)))
        return rc;
    if (s.has_ins && (rc = add_section(d, &s.ins, err)))
        return rc;
    if (s.has_del) {
        bson_iter_init(&it, &s.del);
        while (bson_iter_next(&it)) {
            char buf[16];
            const char *k;
            size_t kl = mf_uint32_to_key(d->nrem++, &k, buf, sizeof buf);
            if ((rc = push_part(d, bson_iter_key(&it), bson_iter_key_len(&it), false, 0, err)))
                return rc;
            bson_append_utf8(&d->rem, k, (int)kl, (const char *)d->path.data, (int)d->path.len);
            note_path(d);
            pop_part(d);
        }
    }
    if (!s.has_subs)
        return 0;
    it = s.subs;
    do {
        if ((rc = check_doc_sub(&it, err)))
            return rc;
        if ((rc = push_part(d, bson_iter_key(&it) + 1, bson_iter_key_len(&it) - 1, false, 0, err)))
            return rc;
        rc = describe_sub(d, &it, err);
        pop_part(d);
        if (rc)
            return rc;
    } while (bson_iter_next(&it));
    return 0;
}

static int describe_array(describer *d, const bson_t *diff, mf_error *err)
{
    array_reader r;
    array_mod m;
    bool found;
    int rc = open_array(diff, &r, err);
    if (rc)
        return rc;
    if (r.has_len) {
        char buf[16];
        const char *k;
        size_t kl = mf_uint32_to_key(d->ntrunc++, &k, buf, sizeof buf);
        bson_t t;
        bson_append_document_begin(&d->trunc, k, (int)kl, &t);
        bson_append_utf8(&t, "field", 5, (const char *)d->path.data, (int)d->path.len);
        bson_append_int32(&t, "newSize", 7, r.len);
        bson_append_document_end(&d->trunc, &t);
        note_path(d);
    }
    while ((rc = next_array_mod(&r, &m, &found, err)) == 0 && found) {
        if (!m.is_sub) {
            char buf[16];
            const char *k;
            size_t kl = mf_uint32_to_key(m.idx, &k, buf, sizeof buf);
            if ((rc = add_updated(d, k, kl, true, m.idx, &m.val, err)))
                return rc;
            continue;
        }
        if ((rc = push_index(d, m.idx, err)))
            return rc;
        rc = describe_sub(d, &m.val, err);
        pop_part(d);
        if (rc)
            return rc;
    }
    return rc;
}

int mf_cl_diff_describe(const bson_t *diff, bool disambiguate, bson_t *out, mf_error *err)
{
    describer d;
    memset(&d, 0, sizeof d);
    d.disambiguate = disambiguate;
    bson_init(&d.upd);
    bson_init(&d.rem);
    bson_init(&d.trunc);
    bson_init(&d.dis);
    int rc = describe_doc(&d, diff, err);
    if (rc == 0) {
        BSON_APPEND_DOCUMENT(out, "updatedFields", &d.upd);
        BSON_APPEND_ARRAY(out, "removedFields", &d.rem);
        BSON_APPEND_ARRAY(out, "truncatedArrays", &d.trunc);
        /* {} when nothing is ambiguous: mongod shows the field whenever
         * showExpandedEvents is set */
        if (disambiguate)
            BSON_APPEND_DOCUMENT(out, "disambiguatedPaths", &d.dis);
    }
    bson_destroy(&d.upd);
    bson_destroy(&d.rem);
    bson_destroy(&d.trunc);
    bson_destroy(&d.dis);
    mf_buf_free(&d.path);
    return rc;
}

/* ------------------------------------------------------------ applying */

typedef enum { OP_DELETE, OP_UPDATE, OP_INSERT, OP_SUB } op_kind;

/* One field a document diff changes. */
typedef struct field_op {
    const char *name; /* into the diff */
    op_kind kind;
    bson_iter_t val; /* the value (update, insert) or the sub-diff */
    bool done;       /* an update made in place */
} field_op;

/* A document diff's changes, in the diff's order, and sorted by name. */
typedef struct op_table {
    field_op *ops;
    field_op **by_name;
    size_t n;
} op_table;

static int by_name(const void *a, const void *b)
{
    return strcmp((*(field_op *const *)a)->name, (*(field_op *const *)b)->name);
}

static void table_free(op_table *t)
{
    free(t->ops);
    free(t->by_name);
}

static void table_add_section(op_table *t, const bson_t *sec, op_kind kind)
{
    bson_iter_t it;
    bson_iter_init(&it, sec);
    while (bson_iter_next(&it)) {
        field_op *op = &t->ops[t->n++];
        op->name = bson_iter_key(&it);
        op->kind = kind;
        op->val = it;
        op->done = false;
    }
}

static int build_table(const doc_sections *s, op_table *t, mf_error *err)
{
    size_t n = 0;
    bson_iter_t it;
    memset(t, 0, sizeof *t);
    n += s->has_del ? bson_count_keys(&s->del) : 0;
    n += s->has_upd ? bson_count_keys(&s->upd) : 0;
    n += s->has_ins ? bson_count_keys(&s->ins) : 0;
    if (s->has_subs) {
        it = s->subs;
        do
            n++;
        while (bson_iter_next(&it));
    }
    /* bson_iter_t asks for 128-byte alignment, more than calloc's */
    t->ops = aligned_alloc(_Alignof(field_op), (n ? n : 1) * sizeof *t->ops);
    t->by_name = calloc(n ? n : 1, sizeof *t->by_name);
    if (!t->ops || !t->by_name) {
        table_free(t);
        return mf_error_oom(err);
    }
    if (s->has_del)
        table_add_section(t, &s->del, OP_DELETE);
    if (s->has_upd)
        table_add_section(t, &s->upd, OP_UPDATE);
    if (s->has_ins)
        table_add_section(t, &s->ins, OP_INSERT);
    if (s->has_subs) {
        it = s->subs;
        do {
            bson_t sub;
            bool is_array;
            int rc = check_doc_sub(&it, err);
            if (rc == 0)
                rc = open_sub(&it, &sub, &is_array, err);
            if (rc) {
                table_free(t);
                return rc;
            }
            field_op *op = &t->ops[t->n++];
            op->name = bson_iter_key(&it) + 1;
            op->kind = OP_SUB;
            op->val = it;
        } while (bson_iter_next(&it));
    }
    for (size_t i = 0; i < t->n; i++)
        t->by_name[i] = &t->ops[i];
    qsort(t->by_name, t->n, sizeof *t->by_name, by_name);
    for (size_t i = 1; i < t->n; i++)
        if (strcmp(t->by_name[i - 1]->name, t->by_name[i]->name) == 0) {
            int rc = mf_error_set(err, MF_BadValue, "duplicate field name in diff: %s",
                                  t->by_name[i]->name);
            table_free(t);
            return rc;
        }
    return 0;
}

static field_op *table_find(const op_table *t, const char *name)
{
    field_op key = {.name = name}, *pk = &key;
    field_op **hit = t->n ? bsearch(&pk, t->by_name, t->n, sizeof *t->by_name, by_name) : NULL;
    return hit ? *hit : NULL;
}

static int apply_doc(const bson_t *pre, const bson_t *diff, bson_t *out, int depth,
                     mf_error *err);
static int apply_array(const bson_t *pre, const bson_t *diff, bson_t *out, int depth,
                       mf_error *err);

/* The value `sub_it`'s sub-diff makes of `pre_it` (NULL: no value there),
 * appended to `out` as `key`: null when there is no value of the type the
 * sub-diff changes (mongod's idempotent application). */
static int apply_sub(const bson_iter_t *pre_it, const bson_iter_t *sub_it, bson_t *out,
                     const char *key, int key_len, int depth, mf_error *err)
{
    bson_t sub, pre, child;
    bool is_array;
    int rc = open_sub(sub_it, &sub, &is_array, err);
    if (rc)
        return rc;
    if (depth >= DIFF_MAX_DEPTH)
        return mf_error_set(err, MF_BadValue, "diff nested deeper than %d levels",
                            DIFF_MAX_DEPTH);
    if (pre_it && is_array && BSON_ITER_HOLDS_ARRAY(pre_it)) {
        iter_bson(pre_it, &pre);
        bson_append_array_begin(out, key, key_len, &child);
        rc = apply_array(&pre, &sub, &child, depth + 1, err);
        bson_append_array_end(out, &child);
    } else if (pre_it && !is_array && BSON_ITER_HOLDS_DOCUMENT(pre_it)) {
        iter_bson(pre_it, &pre);
        bson_append_document_begin(out, key, key_len, &child);
        rc = apply_doc(&pre, &sub, &child, depth + 1, err);
        bson_append_document_end(out, &child);
    } else {
        bson_append_null(out, key, key_len);
    }
    return rc;
}

static int apply_doc(const bson_t *pre, const bson_t *diff, bson_t *out, int depth,
                     mf_error *err)
{
    doc_sections s;
    op_table t;
    bson_iter_t it;
    int rc = open_doc(diff, &s, err);
    if (rc || (rc = build_table(&s, &t, err)))
        return rc;
    bson_iter_init(&it, pre);
    while (bson_iter_next(&it)) {
        field_op *op = table_find(&t, bson_iter_key(&it));
        if (!op) {
            mf_bsonx_append_iter(out, NULL, 0, &it);
            continue;
        }
        switch (op->kind) {
        case OP_DELETE:
            break;
        case OP_UPDATE:
            mf_bsonx_append_iter(out, NULL, 0, &op->val);
            op->done = true;
            break;
        case OP_INSERT:
            break; /* moves to the end */
        case OP_SUB:
            rc = apply_sub(&it, &op->val, out, bson_iter_key(&it), (int)bson_iter_key_len(&it),
                           depth, err);
            if (rc)
                goto done;
            break;
        }
    }
    /* updates of fields `pre` lacks, then inserts, in the diff's order
     * (the table is: deletes, updates, inserts, sub-diffs) */
    for (size_t i = 0; i < t.n; i++) {
        field_op *op = &t.ops[i];
        if ((op->kind == OP_UPDATE || op->kind == OP_INSERT) && !op->done)
            mf_bsonx_append_iter(out, NULL, 0, &op->val);
    }
done:
    table_free(&t);
    return rc;
}

/* The next entry of `r` into `m` (*found false past the last), checked to
 * ascend past `prev` (-1 before the first) and to stay below `l`: mongod
 * applies neither kind of diff soundly, and mf_cl_update_diff writes
 * neither. */
static int next_checked(array_reader *r, array_mod *m, bool *found, int64_t prev, mf_error *err)
{
    int rc = next_array_mod(r, m, found, err);
    if (rc || !*found)
        return rc;
    if ((int64_t)m->idx <= prev)
        return mf_error_set(err, MF_BadValue,
                            "array diff indexes must ascend, found %u after %lld", m->idx,
                            (long long)prev);
    if (r->has_len && (int64_t)m->idx >= r->len)
        return mf_error_set(err, MF_BadValue,
                            "array diff changes index %u past its new length %d", m->idx,
                            (int)r->len);
    return 0;
}

static int apply_array(const bson_t *pre, const bson_t *diff, bson_t *out, int depth,
                       mf_error *err)
{
    array_reader r;
    array_mod m;
    bool found;
    bson_iter_t it;
    uint32_t idx = 0;
    bool has_pre;
    int rc = open_array(diff, &r, err);
    if (rc || (rc = next_checked(&r, &m, &found, -1, err)))
        return rc;
    bson_iter_init(&it, pre);
    has_pre = bson_iter_next(&it);
    /* the elements `pre` has, up to the new length */
    for (; has_pre && (!r.has_len || idx < (uint32_t)r.len); idx++, has_pre = bson_iter_next(&it)) {
        char buf[16];
        const char *k;
        int kl = (int)mf_uint32_to_key(idx, &k, buf, sizeof buf);
        if (!found || m.idx != idx) {
            mf_bsonx_append_iter(out, k, kl, &it);
            continue;
        }
        if (m.is_sub)
            rc = apply_sub(&it, &m.val, out, k, kl, depth, err);
        else
            mf_bsonx_append_iter(out, k, kl, &m.val);
        if (rc || (rc = next_checked(&r, &m, &found, idx, err)))
            return rc;
    }
    /* past `pre`'s end: the entries left, nulls between them and up to the
     * new length */
    for (; (r.has_len && idx < (uint32_t)r.len) || found; idx++) {
        char buf[16];
        const char *k;
        int kl = (int)mf_uint32_to_key(idx, &k, buf, sizeof buf);
        if (out->len > MF_MAX_BSON_OBJECT_SIZE)
            return mf_error_set(err, MF_BadValue, "array diff pads an array past %d bytes",
                                MF_MAX_BSON_OBJECT_SIZE);
        if (!found || m.idx != idx) {
            bson_append_null(out, k, kl);
            continue;
        }
        if (m.is_sub)
            rc = apply_sub(NULL, &m.val, out, k, kl, depth, err);
        else
            mf_bsonx_append_iter(out, k, kl, &m.val);
        if (rc || (rc = next_checked(&r, &m, &found, idx, err)))
            return rc;
    }
    return 0;
}

int mf_cl_diff_apply(const bson_t *pre, const bson_t *diff, bson_t *out, mf_error *err)
{
    bson_init(out);
    int rc = apply_doc(pre, diff, out, 0, err);
    if (rc)
        bson_destroy(out);
    return rc;
}
