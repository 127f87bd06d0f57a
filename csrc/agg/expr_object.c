/*
 * expr_object.c -- object, type and set operators of the aggregation
 * language: $mergeObjects, $objectToArray, $arrayToObject, $getField,
 * $setField, $unsetField, $bsonSize, $binarySize; $type, $isNumber, $rand;
 * $setUnion, $setIntersection, $setDifference, $setEquals, $setIsSubset.
 * (The conversions, $toString and the rest, are in expr_convert.c.)
 *
 * Sets.  An operand array becomes a sorted, de-duplicated list of values
 * (MongoDB order, so 1 and 1.0 are one element).  Results are arrays in
 * that order; mongod leaves the order of a set result unspecified.
 */
#include "expr_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* --------------------------------------------------------- a field list */

/* Fields in first-insertion order; setting a name again replaces the value
 * in place, as mongod's MutableDocument::setField. */
typedef struct flist {
    char **names;
    val *vals;
    size_t n, cap;
} flist;

static void flist_free(flist *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->names[i]);
        mfi_val_free(&f->vals[i]);
    }
    free(f->names);
    free(f->vals);
}

static int flist_set(flist *f, const char *name, size_t nlen, const bson_value_t *v,
                     mf_error *err)
{
    for (size_t i = 0; i < f->n; i++)
        if (strlen(f->names[i]) == nlen && memcmp(f->names[i], name, nlen) == 0) {
            mfi_val_free(&f->vals[i]);
            mf_bsonx_value_copy(v, &f->vals[i]);
            return 0;
        }
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 8;
        char **nn = realloc(f->names, cap * sizeof *nn);
        if (nn)
            f->names = nn;
        val *nv = realloc(f->vals, cap * sizeof *nv); /* bson_value_t holds no self-pointers */
        if (nv)
            f->vals = nv;
        if (!nn || !nv)
            return mf_error_oom(err);
        f->cap = cap;
    }
    if (!(f->names[f->n] = bson_strndup(name, nlen)))
        return mf_error_oom(err);
    mf_bsonx_value_copy(v, &f->vals[f->n++]);
    return 0;
}

static int flist_to_doc(flist *f, val *out, mf_error *err)
{
    bson_t b;
    bson_init(&b);
    for (size_t i = 0; i < f->n; i++)
        mf_bsonx_append_value(&b, f->names[i], -1, &f->vals[i]);
    return mfi_set_steal(out, &b, BSON_TYPE_DOCUMENT, err);
}

static void begin(const val *v, bson_t *tmp, bson_iter_t *it)
{
    bson_init_static(tmp, v->value.v_doc.data, v->value.v_doc.data_len);
    bson_iter_init(it, tmp);
}

/* ---------------------------------------------------------------- object */

static int op_mergeobjects(const node *n, ctx *c, val *out)
{
    flist f = {0};
    char buf[128];
    int rc = 0;
    for (size_t i = 0; i < n->nargs && rc == 0; i++) {
        val v;
        if ((rc = mfi_eval(n->args[i], c, &v)) != 0)
            break;
        if (v.value_type == BSON_TYPE_DOCUMENT) {
            bson_t t;
            bson_iter_t it;
            begin(&v, &t, &it);
            while (rc == 0 && bson_iter_next(&it))
                rc = flist_set(&f, bson_iter_key(&it), bson_iter_key_len(&it),
                               bson_iter_value(&it), c->err);
        } else if (!nullish(&v)) {
            mfi_val_str(&v, buf, sizeof buf);
            rc = mf_error_set(c->err, 40400, "$mergeObjects requires object inputs, but input "
                              "%s is of type %s", buf, mfi_type_name(&v));
        }
        mfi_val_free(&v);
    }
    if (rc == 0)
        rc = flist_to_doc(&f, out, c->err);
    flist_free(&f);
    return rc;
}

static int op_objecttoarray(const node *n, ctx *c, val *out)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc != 0)
        return rc;
    if (nullish(&v)) {
        set_null(out);
    } else if (v.value_type != BSON_TYPE_DOCUMENT) {
        rc = mf_error_set(c->err, 40390, "$objectToArray requires a document input, found: %s",
                          mfi_type_name(&v));
    } else {
        bson_t t, b;
        bson_iter_t it;
        uint32_t k = 0;
        bson_init(&b);
        begin(&v, &t, &it);
        while (bson_iter_next(&it)) {
            char kb[16];
            const char *key;
            size_t kl = mf_uint32_to_key(k++, &key, kb, sizeof kb);
            bson_t pair;
            bson_append_document_begin(&b, key, (int)kl, &pair);
            bson_append_utf8(&pair, "k", 1, bson_iter_key(&it), (int)bson_iter_key_len(&it));
            mf_bsonx_append_value(&pair, "v", 1, bson_iter_value(&it));
            bson_append_document_end(&b, &pair);
        }
        rc = mfi_set_steal(out, &b, BSON_TYPE_ARRAY, c->err);
    }
    mfi_val_free(&v);
    return rc;
}

/* One element of $arrayToObject's input: its key and value, with the
 * errors of mongod for the [k, v] and {k:, v:} forms. */
static int pair_of(bson_iter_t *el, bool as_array, const char **k, uint32_t *klen,
                   bson_iter_t *v, mf_error *err)
{
    bson_iter_t ch, kit;
    int cnt = 0;
    bool has_k = false, has_v = false;
    bson_iter_recurse(el, &ch);
    while (bson_iter_next(&ch)) {
        cnt++;
        if (as_array ? cnt == 1 : strcmp(bson_iter_key(&ch), "k") == 0) {
            kit = ch;
            has_k = true;
        } else if (as_array ? cnt == 2 : strcmp(bson_iter_key(&ch), "v") == 0) {
            *v = ch;
            has_v = true;
        }
    }
    if (as_array) {
        if (cnt != 2)
            return mf_error_set(err, 40397, "$arrayToObject requires an array of size 2 arrays,"
                                "found array of size: %d", cnt);
        if (!BSON_ITER_HOLDS_UTF8(&kit))
            return mf_error_set(err, 40395, "$arrayToObject requires an array of key-value "
                                "pairs, where the key must be of type string. Found key type: "
                                "%s", mf_bsonx_type_alias(bson_iter_type(&kit)));
    } else {
        if (cnt != 2)
            return mf_error_set(err, 40392, "$arrayToObject requires an object keys of 'k' and "
                                "'v'. Found incorrect number of keys:%d", cnt);
        if (!has_k || !has_v) {
            char buf[256];
            mf_bsonx_elem_to_string(el, false, buf, sizeof buf);
            return mf_error_set(err, 40393, "$arrayToObject requires an object with keys 'k' "
                                "and 'v'. Missing either or both keys from: %s", buf);
        }
        if (!BSON_ITER_HOLDS_UTF8(&kit))
            return mf_error_set(err, 40394, "$arrayToObject requires an object with keys 'k' "
                                "and 'v', where the value of 'k' must be of type string. Found "
                                "type: %s", mf_bsonx_type_alias(bson_iter_type(&kit)));
    }
    *k = bson_iter_utf8(&kit, klen);
    if (memchr(*k, 0, *klen))
        return mf_error_set(err, as_array ? 4940400 : 4940401, "Key field cannot contain an "
                            "embedded null byte");
    return 0;
}

static int op_arraytoobject(const node *n, ctx *c, val *out)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc != 0)
        return rc;
    if (nullish(&v)) {
        set_null(out);
    } else if (v.value_type != BSON_TYPE_ARRAY) {
        rc = mf_error_set(c->err, 40386, "$arrayToObject requires an array input, found: %s",
                          mfi_type_name(&v));
    } else {
        flist f = {0};
        bson_t t;
        bson_iter_t it;
        int form = 0; /* 1 arrays, 2 objects */
        begin(&v, &t, &it);
        while (rc == 0 && bson_iter_next(&it)) {
            bson_type_t ty = bson_iter_type(&it);
            int this_form = ty == BSON_TYPE_ARRAY ? 1 : ty == BSON_TYPE_DOCUMENT ? 2 : 0;
            if (this_form == 0 && form == 0) {
                rc = mf_error_set(c->err, 40398, "Unrecognised input type format for "
                                  "$arrayToObject: %s", mf_bsonx_type_alias(ty));
                break;
            }
            if (form != 0 && this_form != form) {
                rc = mf_error_set(c->err, form == 1 ? 40396 : 40391, "$arrayToObject requires "
                                  "a consistent input format. Elements must all be arrays or all "
                                  "be objects. %s was detected, now found: %s",
                                  form == 1 ? "Array" : "Object", mf_bsonx_type_alias(ty));
                break;
            }
            form = this_form;
            const char *k = NULL;
            uint32_t kl = 0;
            bson_iter_t vit;
            if ((rc = pair_of(&it, form == 1, &k, &kl, &vit, c->err)) == 0)
                rc = flist_set(&f, k, kl, bson_iter_value(&vit), c->err);
        }
        if (rc == 0)
            rc = flist_to_doc(&f, out, c->err);
        flist_free(&f);
    }
    mfi_val_free(&v);
    return rc;
}

/* ------------------------------------------------------------------ type */

static int op_type(const node *n, ctx *c, val *out)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc != 0)
        return rc;
    const char *t = mfi_type_name(&v);
    rc = mfi_set_str(out, t, strlen(t), c->err);
    mfi_val_free(&v);
    return rc;
}

static int op_isnumber(const node *n, ctx *c, val *out)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc == 0) {
        set_bool(out, is_num(&v));
        mfi_val_free(&v);
    }
    return rc;
}

/* ------------------------------------------- $getField, $setField, $unsetField */

/* The 'field' argument: a constant string, checked at parse time (mongod
 * 7.0 does not allow an expression there).  `get`: $getField's codes and
 * messages, else $setField's (which $unsetField shares). */
static int check_field_arg(const node *f, const bson_iter_t *raw, bool get, mf_error *err)
{
    if (raw && BSON_ITER_HOLDS_UTF8(raw) && bson_iter_utf8(raw, NULL)[0] == '$') {
        const char *s = bson_iter_utf8(raw, NULL);
        if (get)
            return mf_error_set(err, 5654600, "A field path reference which is not allowed in "
                                "this context. Did you mean {$literal: '%s'}?", s);
        char ref[512];
        if (s[1] == '$')
            snprintf(ref, sizeof ref, "%s", s + 1);
        else
            snprintf(ref, sizeof ref, "$CURRENT.%s", s + 1);
        return mf_error_set(err, 4161108, "'%s' is a field path reference which is not allowed "
                            "in this context. Did you mean {$literal: '%s'}?", ref, ref);
    }
    if (f->kind != K_CONST)
        return mf_error_set(err, get ? 5654601 : 4161106, "%s requires 'field' to evaluate to a "
                            "constant, but got a non-constant argument",
                            get ? "$getField" : "$setField");
    if (f->cst.value_type != BSON_TYPE_UTF8)
        return mf_error_set(err, get ? 5654602 : 4161107, "%s requires 'field' to evaluate to "
                            "type String, but got %s", get ? "$getField" : "$setField",
                            mfi_type_name(&f->cst));
    return 0;
}

static int push_current(void *vsc, node *n, mf_error *err)
{
    bson_t d;
    bson_iter_t it;
    node *a = NULL;
    int rc;
    bson_init(&d);
    bson_append_utf8(&d, "", 0, "$$CURRENT", -1);
    bson_iter_init(&it, &d);
    bson_iter_next(&it);
    rc = mfi_parse_node(&it, vsc, &a, err);
    bson_destroy(&d);
    return rc != 0 ? rc : mfi_push_arg(n, a, err);
}

/* $getField: {field, input} or the field alone (input $$CURRENT); args
 * are field, input. */
static int parse_getfield(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                          mf_error *err)
{
    (void)op;
    int rc;
    bson_iter_t ch, f_it, in_it;
    bool has_f = false, has_in = false, whole = !BSON_ITER_HOLDS_DOCUMENT(it);
    if (!whole) {
        bson_iter_recurse(it, &ch);
        while (bson_iter_next(&ch)) {
            const char *k = bson_iter_key(&ch);
            if (!has_f && !has_in && k[0] == '$') { /* an expression for 'field' */
                whole = true;
                break;
            } else if (strcmp(k, "field") == 0) {
                f_it = ch;
                has_f = true;
            } else if (strcmp(k, "input") == 0) {
                in_it = ch;
                has_in = true;
            } else {
                return mf_error_set(err, 3041701, "$getField found an unknown argument: %s", k);
            }
        }
    }
    node *f = NULL, *in = NULL;
    const bson_iter_t *fraw = whole ? it : &f_it;
    if (whole || has_f) {
        if ((rc = mfi_parse_node(fraw, vsc, &f, err)) != 0)
            return rc;
        if ((rc = mfi_push_arg(n, f, err)) != 0)
            return rc;
    }
    if (!whole && !has_f)
        return mf_error_set(err, 3041702, "$getField requires 'field' to be specified");
    if (!whole && !has_in)
        return mf_error_set(err, 3041703, "$getField requires 'input' to be specified");
    if ((rc = check_field_arg(f, fraw, true, err)) != 0)
        return rc;
    if (whole)
        return push_current(vsc, n, err);
    if ((rc = mfi_parse_node(&in_it, vsc, &in, err)) != 0)
        return rc;
    return mfi_push_arg(n, in, err);
}

static int op_getfield(const node *n, ctx *c, val *out)
{
    val in;
    int rc = mfi_eval(n->args[1], c, &in);
    if (rc != 0)
        return rc;
    if (nullish(&in)) {
        set_null(out);
    } else if (in.value_type != BSON_TYPE_DOCUMENT) {
        rc = mf_error_set(c->err, 3041705, "$getField requires 'input' to evaluate to type "
                          "Object, but got %s", mfi_type_name(&in));
    } else {
        bson_t t;
        bson_iter_t it;
        begin(&in, &t, &it);
        if (bson_iter_find_w_len(&it, n->args[0]->cst.value.v_utf8.str,
                                 (int)n->args[0]->cst.value.v_utf8.len))
            mf_bsonx_value_copy(bson_iter_value(&it), out);
    }
    mfi_val_free(&in);
    return rc;
}

/* $setField {field, input, value} and $unsetField {field, input}: args are
 * field, input, value (value NULL for $unsetField: remove). */
static int parse_setfield(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                          mf_error *err)
{
    bool unset = strcmp(op->name, "$unsetField") == 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 4161100, "%s only supports an object as its argument",
                            op->name);
    bson_iter_t ch, f_it, in_it, v_it;
    bool has_f = false, has_in = false, has_v = false;
    int rc;
    bson_iter_recurse(it, &ch);
    while (bson_iter_next(&ch)) {
        const char *k = bson_iter_key(&ch);
        if (strcmp(k, "field") == 0) {
            f_it = ch;
            has_f = true;
        } else if (strcmp(k, "input") == 0) {
            in_it = ch;
            has_in = true;
        } else if (!unset && strcmp(k, "value") == 0) {
            v_it = ch;
            has_v = true;
        } else {
            return mf_error_set(err, 4161101, "%s found an unknown argument: %s", op->name, k);
        }
    }
    if (!has_f)
        return mf_error_set(err, 4161102, "%s requires 'field' to be specified", op->name);
    if (!unset && !has_v)
        return mf_error_set(err, 4161103, "%s requires 'value' to be specified", op->name);
    if (!has_in)
        return mf_error_set(err, 4161109, "%s requires 'input' to be specified", op->name);
    node *f = NULL, *in = NULL, *v = NULL;
    if ((rc = mfi_parse_node(&f_it, vsc, &f, err)) != 0 || (rc = mfi_push_arg(n, f, err)) != 0)
        return rc;
    if ((rc = check_field_arg(f, &f_it, false, err)) != 0)
        return rc;
    if ((rc = mfi_parse_node(&in_it, vsc, &in, err)) != 0 || (rc = mfi_push_arg(n, in, err)) != 0)
        return rc;
    if (has_v && (rc = mfi_parse_node(&v_it, vsc, &v, err)) != 0)
        return rc;
    return mfi_push_arg(n, v, err);
}

static int op_setfield(const node *n, ctx *c, val *out)
{
    val in, v;
    v.value_type = BSON_TYPE_EOD;
    int rc = mfi_eval(n->args[1], c, &in);
    if (rc != 0)
        return rc;
    if (nullish(&in)) {
        set_null(out);
        mfi_val_free(&in);
        return 0;
    }
    if (in.value_type != BSON_TYPE_DOCUMENT) {
        rc = mf_error_set(c->err, 4161105, "%s requires 'input' to evaluate to type Object",
                          n->op->name);
        mfi_val_free(&in);
        return rc;
    }
    if (n->args[2] && (rc = mfi_eval(n->args[2], c, &v)) != 0) {
        mfi_val_free(&in);
        return rc;
    }
    const char *name = n->args[0]->cst.value.v_utf8.str;
    size_t nlen = n->args[0]->cst.value.v_utf8.len;
    bson_t t, b;
    bson_iter_t it;
    bool done = false;
    bson_init(&b);
    begin(&in, &t, &it);
    while (bson_iter_next(&it)) {
        if (bson_iter_key_len(&it) == nlen && memcmp(bson_iter_key(&it), name, nlen) == 0) {
            if (v.value_type != BSON_TYPE_EOD) /* replaced in place; missing removes */
                mf_bsonx_append_value(&b, name, (int)nlen, &v);
            done = true;
        } else {
            mf_bsonx_append_iter(&b, bson_iter_key(&it), (int)bson_iter_key_len(&it), &it);
        }
    }
    if (!done && v.value_type != BSON_TYPE_EOD)
        mf_bsonx_append_value(&b, name, (int)nlen, &v);
    rc = mfi_set_steal(out, &b, BSON_TYPE_DOCUMENT, c->err);
    mfi_val_free(&v);
    mfi_val_free(&in);
    return rc;
}

/* ------------------------------------------- $bsonSize, $binarySize, $rand */

static int op_bsonsize(const node *n, ctx *c, val *out)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc != 0)
        return rc;
    if (nullish(&v))
        set_null(out);
    else if (v.value_type != BSON_TYPE_DOCUMENT)
        rc = mf_error_set(c->err, 31393, "$bsonSize requires a document input, found: %s",
                          mfi_type_name(&v));
    else
        set_int(out, (int32_t)v.value.v_doc.data_len);
    mfi_val_free(&v);
    return rc;
}

static int op_binarysize(const node *n, ctx *c, val *out)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc != 0)
        return rc;
    if (nullish(&v))
        set_null(out);
    else if (v.value_type == BSON_TYPE_UTF8)
        set_int(out, (int32_t)v.value.v_utf8.len);
    else if (v.value_type == BSON_TYPE_BINARY)
        set_int(out, (int32_t)v.value.v_binary.data_len);
    else
        rc = mf_error_set(c->err, 51276, "$binarySize requires a string or BinData argument, "
                          "found: %s", mfi_type_name(&v));
    mfi_val_free(&v);
    return rc;
}

/* $toHashedIndexKey: the hashed index key of its operand's value (missing
 * hashes as null), without the collation an index would use.  Its operand
 * is one expression, an array literal included (mongod's parseOperand). */
static int parse_one_operand(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                             mf_error *err)
{
    (void)op;
    node *a = NULL;
    int rc = mfi_parse_node(it, vsc, &a, err);
    return rc ? rc : mfi_push_arg(n, a, err);
}

static int op_tohashedindexkey(const node *n, ctx *c, val *out)
{
    val v;
    int64_t h;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc != 0)
        return rc;
    if (mf_bsonx_hash64_value(&v, NULL, &h) != 0)
        rc = mf_error_oom(c->err);
    else
        set_long(out, h);
    mfi_val_free(&v);
    return rc;
}

/* $rand: {} only. */
static int parse_rand(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                      mf_error *err)
{
    (void)op;
    (void)vsc;
    (void)n;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 10065, "invalid parameter: expected an object ($rand)");
    bson_iter_t ch;
    bson_iter_recurse(it, &ch);
    if (bson_iter_next(&ch))
        return mf_error_set(err, 3040501, "$rand does not currently accept arguments");
    return 0;
}

/* A double uniform in [0, 1): 53 random bits from the kernel. */
static int op_rand(const node *n, ctx *c, val *out)
{
    (void)n;
    uint64_t x;
    if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x)
        return mf_error_set(c->err, MF_InternalError, "$rand: no random bytes");
    set_double(out, (double)(x >> 11) * (1.0 / 9007199254740992.0));
    return 0;
}

/* ------------------------------------------------------------------- sets
 *
 * As mongod's ValueSet (an ordered set under the expression context's
 * comparator): elements that compare equal under the collation are one,
 * the one inserted first stays, and a set reads out in ascending order. */

typedef struct vset {
    val *v;
    size_t n;
    const mf_collator *coll;
} vset;

static void vset_free(vset *s)
{
    mfi_free_all(s->v, s->n);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

/* Orders positions into `base` by value, then by position. */
typedef struct pos_order {
    const val *base;
    const mf_collator *coll;
} pos_order;

static int cmp_pos(const void *a, const void *b, void *arg)
{
    const pos_order *o = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int r = mfi_val_cmp(&o->base[i], &o->base[j], o->coll);
    return r != 0 ? r : (i > j) - (i < j);
}

/* The distinct elements of array `arr` under `coll`, ascending; of equal
 * ones the first in the array. */
static int vset_of(const val *arr, const mf_collator *coll, vset *s, mf_error *err)
{
    bson_t t;
    bson_iter_t it;
    size_t k = 0;
    begin(arr, &t, &it);
    while (bson_iter_next(&it))
        k++;
    s->n = 0;
    s->coll = coll;
    val *all = calloc(k ? k : 1, sizeof *all);
    size_t *ix = calloc(k ? k : 1, sizeof *ix);
    if (!all || !ix || !(s->v = calloc(k ? k : 1, sizeof *s->v))) {
        free(all);
        free(ix);
        return mf_error_oom(err);
    }
    begin(arr, &t, &it);
    for (size_t i = 0; bson_iter_next(&it); i++) {
        mf_bsonx_value_copy(bson_iter_value(&it), &all[i]);
        ix[i] = i;
    }
    pos_order o = {all, coll};
    qsort_r(ix, k, sizeof *ix, cmp_pos, &o);
    for (size_t i = 0; i < k; i++) {
        if (s->n > 0 && mfi_val_cmp(&s->v[s->n - 1], &all[ix[i]], coll) == 0)
            mfi_val_free(&all[ix[i]]);
        else
            s->v[s->n++] = all[ix[i]];
    }
    free(all);
    free(ix);
    return 0;
}

static bool vset_has(const vset *s, const val *x)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = mfi_val_cmp(&s->v[mid], x, s->coll);
        if (r == 0)
            return true;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static int vset_to_array(const vset *s, val *out, mf_error *err)
{
    bson_t b;
    bson_init(&b);
    for (size_t i = 0; i < s->n; i++)
        mfi_arr_push(&b, (uint32_t)i, &s->v[i]);
    return mfi_set_steal(out, &b, BSON_TYPE_ARRAY, err);
}

/* Evaluate all operands; *any_null when one is nullish.  The first that is
 * not an array (nullish ones skipped when `null_ok`) fails with `code` and
 * `fmt` (given the operand's position word and type). */
static int set_args(const node *n, ctx *c, val *v, bool null_ok, bool *any_null, int code,
                    int code2, const char *fmt)
{
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    *any_null = false;
    for (size_t i = 0; i < n->nargs && rc == 0; i++) {
        if (null_ok && nullish(&v[i]))
            *any_null = true;
        else if (v[i].value_type != BSON_TYPE_ARRAY)
            rc = mf_error_set(c->err, i == 1 && code2 ? code2 : code, fmt,
                              i == 0 ? "First" : "Second", mfi_type_name(&v[i]));
    }
    if (rc != 0)
        mfi_free_all(v, n->nargs);
    return rc;
}

static int op_setunion(const node *n, ctx *c, val *out)
{
    val *v = calloc(n->nargs ? n->nargs : 1, sizeof *v);
    bool any_null;
    if (!v)
        return mf_error_oom(c->err);
    int rc = set_args(n, c, v, true, &any_null, 17043, 0, "All operands of $setUnion must be "
                      "arrays. One argument is of type: %.0s%s");
    if (rc == 0) {
        if (any_null) {
            set_null(out);
        } else {
            /* concatenate, then one vset */
            bson_t b;
            uint32_t k = 0;
            bson_init(&b);
            for (size_t i = 0; i < n->nargs; i++) {
                bson_t t;
                bson_iter_t it;
                begin(&v[i], &t, &it);
                while (bson_iter_next(&it))
                    mfi_arr_push(&b, k++, bson_iter_value(&it));
            }
            val all;
            vset s = {0};
            if ((rc = mfi_set_steal(&all, &b, BSON_TYPE_ARRAY, c->err)) == 0) {
                if ((rc = vset_of(&all, ctx_coll(c), &s, c->err)) == 0)
                    rc = vset_to_array(&s, out, c->err);
                vset_free(&s);
                mfi_val_free(&all);
            }
        }
        mfi_free_all(v, n->nargs);
    }
    free(v);
    return rc;
}

/* As mongod: the intersection so far is filtered by each next operand's
 * set, the smaller of the two being the one kept (whose elements, among
 * those equal under the collation, are the ones reported). */
static int op_setintersection(const node *n, ctx *c, val *out)
{
    size_t k = n->nargs;
    val *v = calloc(k ? k : 1, sizeof *v);
    bool any_null;
    int rc = 0;
    if (!v)
        return mf_error_oom(c->err);
    rc = set_args(n, c, v, true, &any_null, 17047, 0, "All operands of $setIntersection must "
                  "be arrays. One argument is of type: %.0s%s");
    if (rc == 0) {
        if (any_null) {
            set_null(out);
        } else {
            vset cur = {0};
            if (k > 0)
                rc = vset_of(&v[0], ctx_coll(c), &cur, c->err);
            for (size_t i = 1; rc == 0 && i < k && cur.n > 0; i++) {
                vset next = {0}, kept = {.coll = ctx_coll(c)};
                if ((rc = vset_of(&v[i], ctx_coll(c), &next, c->err)) != 0)
                    break;
                if (cur.n > next.n) {
                    vset t = cur;
                    cur = next;
                    next = t;
                }
                if (!(kept.v = calloc(cur.n, sizeof *kept.v))) {
                    rc = mf_error_oom(c->err);
                } else {
                    for (size_t j = 0; j < cur.n; j++) {
                        if (vset_has(&next, &cur.v[j])) {
                            kept.v[kept.n++] = cur.v[j];
                            cur.v[j].value_type = BSON_TYPE_EOD;
                        }
                    }
                }
                vset_free(&next);
                vset_free(&cur);
                cur = kept;
            }
            if (rc == 0)
                rc = vset_to_array(&cur, out, c->err);
            vset_free(&cur);
        }
        mfi_free_all(v, k);
    }
    free(v);
    return rc;
}

/* As mongod: the first operand's elements in their order, each once (the
 * first of those equal under the collation), those in the second left
 * out. */
static int op_setdifference(const node *n, ctx *c, val *out)
{
    val v[2];
    bool any_null;
    int rc = set_args(n, c, v, true, &any_null, 17048, 17049, "both operands of $setDifference "
                      "must be arrays. %s argument is of type: %s");
    if (rc != 0)
        return rc;
    if (any_null) {
        set_null(out);
    } else {
        vset rhs = {0};
        val *lhs = NULL;
        size_t *ix = NULL, k = 0;
        bool *keep = NULL;
        bson_t t;
        bson_iter_t it;
        begin(&v[0], &t, &it);
        while (bson_iter_next(&it))
            k++;
        if ((rc = vset_of(&v[1], ctx_coll(c), &rhs, c->err)) == 0 &&
            (!(lhs = calloc(k ? k : 1, sizeof *lhs)) || !(ix = calloc(k ? k : 1, sizeof *ix)) ||
             !(keep = calloc(k ? k : 1, sizeof *keep))))
            rc = mf_error_oom(c->err);
        if (rc == 0) {
            /* the first of each run of equal values, by sorting positions */
            begin(&v[0], &t, &it);
            for (size_t i = 0; bson_iter_next(&it); i++) {
                lhs[i] = *bson_iter_value(&it); /* borrowed from v[0] */
                ix[i] = i;
            }
            pos_order o = {lhs, ctx_coll(c)};
            qsort_r(ix, k, sizeof *ix, cmp_pos, &o);
            for (size_t i = 0; i < k; i++)
                keep[ix[i]] = (i == 0 || mfi_val_cmp(&lhs[ix[i - 1]], &lhs[ix[i]], o.coll) != 0) &&
                              !vset_has(&rhs, &lhs[ix[i]]);
            bson_t b = BSON_INITIALIZER;
            uint32_t nb = 0;
            for (size_t i = 0; i < k; i++)
                if (keep[i])
                    mfi_arr_push(&b, nb++, &lhs[i]);
            rc = mfi_set_steal(out, &b, BSON_TYPE_ARRAY, c->err);
        }
        free(lhs);
        free(ix);
        free(keep);
        vset_free(&rhs);
    }
    mfi_free_all(v, 2);
    return rc;
}

static int op_setequals(const node *n, ctx *c, val *out)
{
    val *v = calloc(n->nargs, sizeof *v);
    bool any_null;
    if (!v)
        return mf_error_oom(c->err);
    int rc = set_args(n, c, v, false, &any_null, 17044, 0, "All operands of $setEquals must be "
                      "arrays. One argument is of type: %.0s%s");
    if (rc == 0) {
        vset first = {0}, s = {0};
        bool eq = true;
        rc = vset_of(&v[0], ctx_coll(c), &first, c->err);
        for (size_t i = 1; i < n->nargs && rc == 0 && eq; i++) {
            if ((rc = vset_of(&v[i], ctx_coll(c), &s, c->err)) == 0) {
                eq = s.n == first.n;
                for (size_t j = 0; eq && j < s.n; j++)
                    eq = mfi_val_cmp(&s.v[j], &first.v[j], ctx_coll(c)) == 0;
            }
            vset_free(&s);
        }
        vset_free(&first);
        if (rc == 0)
            set_bool(out, eq);
        mfi_free_all(v, n->nargs);
    }
    free(v);
    return rc;
}

static int parse_setequals(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                           mf_error *err)
{
    int rc = mfi_parse_args(op, it, vsc, n, err);
    if (rc == 0 && n->nargs < 2)
        return mf_error_set(err, 17045, "$setEquals needs at least two arguments had: %zu",
                            n->nargs);
    return rc;
}

static int op_setissubset(const node *n, ctx *c, val *out)
{
    val v[2];
    bool any_null;
    int rc = set_args(n, c, v, false, &any_null, 17046, 17042, "both operands of $setIsSubset "
                      "must be arrays. %s argument is of type: %s");
    if (rc != 0)
        return rc;
    vset a = {0}, b = {0};
    if ((rc = vset_of(&v[0], ctx_coll(c), &a, c->err)) == 0 &&
        (rc = vset_of(&v[1], ctx_coll(c), &b, c->err)) == 0) {
        bool sub = true;
        for (size_t i = 0; sub && i < a.n; i++)
            sub = vset_has(&b, &a.v[i]);
        set_bool(out, sub);
    }
    vset_free(&a);
    vset_free(&b);
    mfi_free_all(v, 2);
    return rc;
}

const op_def mfi_expr_object_ops[] = {
    {"$arrayToObject", op_arraytoobject, 1, 1, NULL},
    {"$binarySize", op_binarysize, 1, 1, NULL},
    {"$bsonSize", op_bsonsize, 1, 1, NULL},
    {"$getField", op_getfield, 0, 0, parse_getfield},
    {"$isNumber", op_isnumber, 1, 1, NULL},
    {"$mergeObjects", op_mergeobjects, 0, -1, NULL},
    {"$objectToArray", op_objecttoarray, 1, 1, NULL},
    {"$rand", op_rand, 0, 0, parse_rand},
    {"$setDifference", op_setdifference, 2, 2, NULL},
    {"$setEquals", op_setequals, 0, -1, parse_setequals},
    {"$setField", op_setfield, 0, 0, parse_setfield},
    {"$setIntersection", op_setintersection, 0, -1, NULL},
    {"$setIsSubset", op_setissubset, 2, 2, NULL},
    {"$setUnion", op_setunion, 0, -1, NULL},
    {"$toHashedIndexKey", op_tohashedindexkey, 1, 1, parse_one_operand},
    {"$type", op_type, 1, 1, NULL},
    {"$unsetField", op_setfield, 0, 0, parse_setfield},
};
const size_t mfi_expr_nobject_ops = sizeof mfi_expr_object_ops / sizeof mfi_expr_object_ops[0];
