/*
 * expr.c -- the aggregation expression language: parse once into a tree,
 * evaluate per document, with mongod 7.0's results, types and errors.
 *
 * Values.  A value in flight is a bson_value_t that owns its memory
 * (strings, documents and arrays are heap copies; mfi_val_free releases
 * them).
 * BSON_TYPE_EOD stands for "missing" (see agg.h for how missing differs
 * from null).  Documents and arrays are kept as BSON bytes, so nesting
 * needs no tree of our own and appending a result is one bson_append_value.
 *
 * Variables.  Every variable gets a slot at parse time: the top-level `let`
 * names take slots 0..nlet-1, each $let binding the next one.  A lookup is
 * resolved to its slot when parsed, so evaluation indexes an array and an
 * undefined name is a parse error (17276), as in mongod.  The builtins
 * ($$ROOT, $$CURRENT, $$REMOVE, $$NOW) have negative slots.
 *
 * Operators are tables (name, arity, parser, evaluator): this file's OPS,
 * then those of expr_string.c, expr_array.c and expr_object.c (declared in
 * expr_int.h).  Most take their operands as a list and share
 * mfi_parse_args; $literal, $let, $cond, $switch, $filter, $map, $reduce
 * have their own parsers for their object forms.
 */
#include "expr_int.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct mf_expr {
    node *root;
    int nslots;
    char **let_names;
    size_t nlet;
    uint32_t meta_kinds; /* what its {$meta: ...} ask for (MF_META_BIT) */
};

/* ------------------------------------------------------------------ values */

void mfi_val_free(val *v)
{
    bson_value_destroy(v);
    v->value_type = BSON_TYPE_EOD;
}

/* Take over the buffer of `b` (a heap or inline bson_t from bson_init) as a
 * document or array value. */
int mfi_set_steal(val *v, bson_t *b, bson_type_t t, mf_error *err)
{
    uint32_t len = 0;
    uint8_t *data = bson_destroy_with_steal(b, true, &len);
    if (!data)
        return mf_error_oom(err);
    v->value_type = t;
    v->value.v_doc.data = data;
    v->value.v_doc.data_len = len;
    return 0;
}

const char *mfi_type_name(const val *v)
{
    return v->value_type == BSON_TYPE_EOD ? "missing" : mf_bsonx_type_alias(v->value_type);
}



/* A one-field document holding `v`, iterated to the value: how values meet
 * the bsonx helpers, which work on iterators.  `v` must not be missing. */
static bool val_iter(const val *v, bson_t *tmp, bson_iter_t *it)
{
    bson_init(tmp);
    return mf_bsonx_append_value(tmp, "", 0, v) && bson_iter_init(it, tmp) && bson_iter_next(it);
}

/* Compare in MongoDB's order; missing sorts with undefined, below null. */
int mfi_val_cmp(const val *a, const val *b, const mf_collator *coll)
{
    if (a->value_type == BSON_TYPE_EOD || b->value_type == BSON_TYPE_EOD) {
        int ca = mf_bsonx_canonical_type(a->value_type);
        int cb = mf_bsonx_canonical_type(b->value_type);
        return ca < cb ? -1 : ca > cb;
    }
    bson_t ta, tb;
    bson_iter_t ia, ib;
    int r = 0;
    if (val_iter(a, &ta, &ia) && val_iter(b, &tb, &ib))
        r = mf_bsonx_compare_values_coll(&ia, &ib, coll);
    bson_destroy(&ta);
    bson_destroy(&tb);
    return r;
}

int mfi_val_cmp_r(const void *a, const void *b, void *coll)
{
    return mfi_val_cmp(a, b, coll);
}

bool mfi_truthy(const val *v)
{
    return mf_bsonx_truthy(v);
}

/* The value alone, as mongod prints it in a message ("-1", "2.5"). */
void mfi_val_str(const val *v, char *out, size_t cap)
{
    bson_t t;
    bson_iter_t it;
    out[0] = 0;
    if (v->value_type == BSON_TYPE_EOD)
        snprintf(out, cap, "MISSING");
    else if (val_iter(v, &t, &it))
        mf_bsonx_elem_to_string(&it, false, out, cap);
    bson_destroy(&t);
}

/* ------------------------------------------------------------------ trees */

static void node_free(node *n)
{
    if (!n)
        return;
    bson_value_destroy(&n->cst);
    for (size_t i = 0; i < n->nparts; i++)
        free(n->parts[i]);
    free(n->parts);
    for (size_t i = 0; i < n->nargs; i++) {
        node_free(n->args[i]);
        if (n->names)
            free(n->names[i]);
    }
    free(n->args);
    free(n->names);
    free(n->slots);
    free(n);
}

static node *node_new(int kind)
{
    node *n = calloc(1, sizeof *n);
    if (n) {
        n->kind = kind;
        n->cst.value_type = BSON_TYPE_EOD;
    }
    return n;
}

int mfi_push_arg(node *n, node *a, mf_error *err)
{
    node **p = realloc(n->args, (n->nargs + 1) * sizeof *p);
    if (!p) {
        node_free(a);
        return mf_error_oom(err);
    }
    n->args = p;
    n->args[n->nargs++] = a;
    return 0;
}

/* ------------------------------------------------------------------ parse */


int mfi_scope_push(scope *s, const char *name, int *slot, mf_error *err)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        const char **nn = realloc(s->names, cap * sizeof *nn);
        if (nn)
            s->names = nn;
        int *ns = realloc(s->slots, cap * sizeof *ns);
        if (ns)
            s->slots = ns;
        if (!nn || !ns)
            return mf_error_oom(err);
        s->cap = cap;
    }
    s->names[s->n] = name;
    *slot = s->slots[s->n] = s->nslots++;
    s->n++;
    return 0;
}

static int scope_find(const scope *s, const char *name, size_t len)
{
    for (size_t i = s->n; i-- > 0;)
        if (strlen(s->names[i]) == len && memcmp(s->names[i], name, len) == 0)
            return s->slots[i];
    return INT_MIN;
}


/* Split "a.b.c" (already checked as a FieldPath) into components. */
static int split_path(const char *p, size_t len, node *n, mf_error *err)
{
    const char *end = p + len;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        if (!dot)
            dot = end;
        char **np = realloc(n->parts, (n->nparts + 1) * sizeof *np);
        if (!np)
            return mf_error_oom(err);
        n->parts = np;
        if (!(n->parts[n->nparts] = bson_strndup(p, (size_t)(dot - p))))
            return mf_error_oom(err);
        n->nparts++;
        p = dot + 1;
    }
    return 0;
}

/* mongod's variableValidation for a name being defined. */
int mfi_check_var_name(const char *name, mf_error *err)
{
    if (!*name)
        return mf_error_set(err, 16866, "empty variable names are not allowed");
    unsigned char c0 = (unsigned char)name[0];
    if (!((c0 >= 'a' && c0 <= 'z') || c0 >= 0x80))
        return mf_error_set(err, 16867,
                            "'%s' starts with an invalid character for a user variable name",
                            name);
    for (const char *p = name; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c >= 0x80))
            return mf_error_set(err, 16868, "'%s' contains an invalid character for a "
                                "variable name: '%c'", name, *p);
    }
    return 0;
}

/* A string starting with '$': a field path or, with "$$", a variable. */
static int parse_string_ref(const char *s, size_t len, scope *sc, node **out, mf_error *err)
{
    int rc;
    if (len >= 2 && s[1] == '$') {
        const char *name = s + 2;
        const char *dot = memchr(name, '.', len - 2);
        size_t nlen = dot ? (size_t)(dot - name) : len - 2;
        if (nlen == 0)
            return mf_error_set(err, 16869, "empty variable names are not allowed");
        node *n = node_new(K_VAR);
        if (!n)
            return mf_error_oom(err);
        int slot = scope_find(sc, name, nlen);
        if (slot == INT_MIN) {
            if (nlen == 4 && memcmp(name, "ROOT", 4) == 0)
                slot = VAR_ROOT;
            else if (nlen == 7 && memcmp(name, "CURRENT", 7) == 0)
                slot = VAR_CURRENT;
            else if (nlen == 6 && memcmp(name, "REMOVE", 6) == 0)
                slot = VAR_REMOVE;
            else if (nlen == 3 && memcmp(name, "NOW", 3) == 0)
                slot = VAR_NOW;
            else {
                node_free(n);
                return mf_error_set(err, 17276, "Use of undefined variable: %.*s", (int)nlen,
                                    name);
            }
        }
        n->slot = slot;
        /* mongod checks "$$name.a.b" as the FieldPath "name.a.b", after the
         * variable is known (17276 above comes first). */
        if ((rc = mf_bsonx_field_path_check(name, len - 2, err)) != 0 ||
            (dot && (rc = split_path(dot + 1, len - 2 - nlen - 1, n, err)) != 0)) {
            node_free(n);
            return rc;
        }
        *out = n;
        return 0;
    }
    if (len == 1)
        return mf_error_set(err, 16872, "'$' by itself is not a valid FieldPath");
    node *n = node_new(K_PATH);
    if (!n)
        return mf_error_oom(err);
    if ((rc = mf_bsonx_field_path_check(s + 1, len - 1, err)) != 0 ||
        (rc = split_path(s + 1, len - 1, n, err)) != 0) {
        node_free(n);
        return rc;
    }
    *out = n;
    return 0;
}

static const op_def *find_op(const char *name);

/* Operands as a list: an array's elements, or any other value as one. */
int mfi_parse_args(const op_def *op, const bson_iter_t *it, void *vsc, node *n, mf_error *err)
{
    scope *sc = vsc;
    int rc;
    if (BSON_ITER_HOLDS_ARRAY(it)) {
        bson_iter_t ch;
        if (!bson_iter_recurse(it, &ch))
            return mf_error_set(err, MF_InvalidBSON, "bad array");
        while (bson_iter_next(&ch)) {
            node *a = NULL;
            if ((rc = mfi_parse_node(&ch, sc, &a, err)) != 0 || (rc = mfi_push_arg(n, a, err)) != 0)
                return rc;
        }
    } else {
        node *a = NULL;
        if ((rc = mfi_parse_node(it, sc, &a, err)) != 0 || (rc = mfi_push_arg(n, a, err)) != 0)
            return rc;
    }
    int k = (int)n->nargs;
    if (op->max == op->min && k != op->min)
        return mf_error_set(err, 16020, "Expression %s takes exactly %d arguments. %d were "
                            "passed in.", op->name, op->min, k);
    if (k < op->min || (op->max >= 0 && k > op->max)) {
        if (op->max < 0)
            return mf_error_set(err, 16020, "Expression %s takes at least %d arguments. %d "
                                "were passed in.", op->name, op->min, k);
        return mf_error_set(err, 16020, "Expression %s takes at least %d arguments, and at "
                            "most %d. %d were passed in.", op->name, op->min, op->max, k);
    }
    return 0;
}

static int parse_literal(const op_def *op, const bson_iter_t *it, void *sc, node *n,
                         mf_error *err)
{
    (void)op;
    (void)sc;
    n->kind = K_CONST;
    mf_bsonx_value_copy(bson_iter_value((bson_iter_t *)it), &n->cst);
    (void)err;
    return 0;
}

/* {$meta: "<name>"}: mongod's ExpressionMeta::parse -- 17307 for a
 * non-string, 17308 for a name it does not know.  The kind goes in
 * n->slot, and into the scope's set of kinds asked for (the pipeline
 * checks their availability: mf_expr_meta_kinds). */
static int parse_meta(const op_def *op, const bson_iter_t *it, void *vsc, node *n, mf_error *err)
{
    (void)op;
    scope *sc = vsc;
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mf_error_set(err, 17307, "$meta only supports string arguments");
    const char *name = bson_iter_utf8(it, NULL);
    int k = mf_meta_kind_of(name);
    if (k < 0)
        return mf_error_set(err, 17308, "Unsupported argument to $meta: %s", name);
    n->slot = k;
    sc->meta_kinds |= MF_META_BIT(k);
    return 0;
}

/* The document's metadata of that kind (mf_expr_vars.meta), or missing
 * where nothing set it, as mongod's ExpressionMeta::evaluate. */
static int op_meta(const node *n, ctx *c, val *out)
{
    const bson_value_t *v = mf_meta_get(c->vars ? c->vars->meta : NULL, (mf_meta_kind)n->slot);
    out->value_type = BSON_TYPE_EOD;
    if (v)
        mf_bsonx_value_copy(v, out);
    return 0;
}

/* {$let: {vars: {name: <expr>, ...}, in: <expr>}}: args are the bindings'
 * expressions then `in`; each binding's slot in n->slots.  The bindings
 * are parsed in the outer scope (they cannot see each other). */
static int parse_let(const op_def *op, const bson_iter_t *it, void *vsc, node *n, mf_error *err)
{
    (void)op;
    scope *sc = vsc;
    int rc;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 16874, "$let only supports an object as its argument");
    bson_iter_t ch, vars_it, in_it;
    bool has_vars = false, has_in = false;
    bson_iter_recurse(it, &ch);
    while (bson_iter_next(&ch)) {
        const char *k = bson_iter_key(&ch);
        if (strcmp(k, "vars") == 0) {
            vars_it = ch;
            has_vars = true;
        } else if (strcmp(k, "in") == 0) {
            in_it = ch;
            has_in = true;
        } else {
            return mf_error_set(err, 16875, "Unrecognized parameter to $let: %s", k);
        }
    }
    if (!has_vars)
        return mf_error_set(err, 16876, "Missing 'vars' parameter to $let");
    if (!has_in)
        return mf_error_set(err, 16877, "Missing 'in' parameter to $let");
    if (!BSON_ITER_HOLDS_DOCUMENT(&vars_it))
        return mf_error_set(err, 10065, "invalid parameter: expected an object (vars)");
    bson_iter_t v;
    bson_iter_recurse(&vars_it, &v);
    size_t nv = 0;
    while (bson_iter_next(&v)) {
        node *a = NULL;
        if ((rc = mfi_check_var_name(bson_iter_key(&v), err)) != 0 ||
            (rc = mfi_parse_node(&v, sc, &a, err)) != 0 || (rc = mfi_push_arg(n, a, err)) != 0)
            return rc;
        nv++;
    }
    if (nv && !(n->slots = calloc(nv, sizeof *n->slots)))
        return mf_error_oom(err);
    size_t depth = sc->n;
    bson_iter_recurse(&vars_it, &v);
    for (size_t i = 0; bson_iter_next(&v); i++)
        if ((rc = mfi_scope_push(sc, bson_iter_key(&v), &n->slots[i], err)) != 0)
            return rc;
    node *body = NULL;
    rc = mfi_parse_node(&in_it, sc, &body, err);
    sc->n = depth; /* the names go out of scope; their slots stay unique */
    if (rc == 0)
        rc = mfi_push_arg(n, body, err);
    return rc;
}

/* $cond: [if, then, else] or {if:, then:, else:}. */
static int parse_cond(const op_def *op, const bson_iter_t *it, void *vsc, node *n, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mfi_parse_args(op, it, vsc, n, err);
    bson_iter_t ch, p_if, p_then, p_else;
    bson_iter_t *parts[3] = {&p_if, &p_then, &p_else};
    bool has[3] = {false, false, false};
    static const char *const names[3] = {"if", "then", "else"};
    bson_iter_recurse(it, &ch);
    while (bson_iter_next(&ch)) {
        const char *k = bson_iter_key(&ch);
        int i = 0;
        while (i < 3 && strcmp(k, names[i]) != 0)
            i++;
        if (i == 3)
            return mf_error_set(err, 17083, "Unrecognized parameter to $cond: %s", k);
        *parts[i] = ch;
        has[i] = true;
    }
    for (int i = 0; i < 3; i++)
        if (!has[i])
            return mf_error_set(err, 17080 + i, "Missing '%s' parameter to $cond", names[i]);
    for (int i = 0; i < 3; i++) {
        node *a = NULL;
        int rc;
        if ((rc = mfi_parse_node(parts[i], vsc, &a, err)) != 0 || (rc = mfi_push_arg(n, a, err)) != 0)
            return rc;
    }
    return 0;
}

/* $switch: args are case0, then0, case1, then1, ..., and a default last
 * when n->slots is set (a non-NULL marker: has_default). */
static int parse_switch(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                        mf_error *err)
{
    (void)op;
    int rc;
    char buf[256];
    if (!BSON_ITER_HOLDS_DOCUMENT(it)) {
        mf_bsonx_elem_to_string(it, false, buf, sizeof buf);
        return mf_error_set(err, 40060, "$switch requires an object as an argument, found: %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    }
    bson_iter_t ch, def;
    bool has_def = false, has_branches = false;
    bson_iter_recurse(it, &ch);
    while (bson_iter_next(&ch)) {
        const char *k = bson_iter_key(&ch);
        if (strcmp(k, "branches") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&ch))
                return mf_error_set(err, 40061, "$switch expected an array for 'branches', "
                                    "found: %s", mf_bsonx_type_alias(bson_iter_type(&ch)));
            bson_iter_t br;
            bson_iter_recurse(&ch, &br);
            while (bson_iter_next(&br)) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&br))
                    return mf_error_set(err, 40062, "$switch expected each branch to be an "
                                        "object, found: %s",
                                        mf_bsonx_type_alias(bson_iter_type(&br)));
                bson_iter_t f, cs, th;
                bool has_case = false, has_then = false;
                bson_iter_recurse(&br, &f);
                while (bson_iter_next(&f)) {
                    if (strcmp(bson_iter_key(&f), "case") == 0) {
                        cs = f;
                        has_case = true;
                    } else if (strcmp(bson_iter_key(&f), "then") == 0) {
                        th = f;
                        has_then = true;
                    } else {
                        return mf_error_set(err, 40063, "$switch found an unknown argument to a "
                                            "branch: %s", bson_iter_key(&f));
                    }
                }
                if (!has_case)
                    return mf_error_set(err, 40064, "$switch requires each branch have a 'case' "
                                        "expression");
                if (!has_then)
                    return mf_error_set(err, 40065, "$switch requires each branch have a 'then' "
                                        "expression.");
                node *a = NULL, *b = NULL;
                if ((rc = mfi_parse_node(&cs, vsc, &a, err)) != 0 || (rc = mfi_push_arg(n, a, err)) != 0 ||
                    (rc = mfi_parse_node(&th, vsc, &b, err)) != 0 || (rc = mfi_push_arg(n, b, err)) != 0)
                    return rc;
            }
            has_branches = true;
        } else if (strcmp(k, "default") == 0) {
            def = ch;
            has_def = true;
        } else {
            return mf_error_set(err, 40067, "$switch found an unknown argument: %s", k);
        }
    }
    if (!has_branches || n->nargs == 0)
        return mf_error_set(err, 40068, "$switch requires at least one branch.");
    if (has_def) {
        node *d = NULL;
        if ((rc = mfi_parse_node(&def, vsc, &d, err)) != 0 || (rc = mfi_push_arg(n, d, err)) != 0)
            return rc;
        if (!(n->slots = calloc(1, sizeof *n->slots)))
            return mf_error_oom(err);
    }
    return 0;
}

static int parse_ifnull(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                        mf_error *err)
{
    int rc = mfi_parse_args(op, it, vsc, n, err);
    if (rc == 0 && n->nargs < 2)
        return mf_error_set(err, 1257300, "$ifNull needs at least two arguments, had: %zu",
                            n->nargs);
    return rc;
}

/* An operator document {$op: args} or an object expression {a: <expr>}. */
static int parse_object(const bson_iter_t *it, scope *sc, node **out, mf_error *err)
{
    bson_iter_t ch;
    int rc;
    bson_iter_recurse(it, &ch);
    bson_iter_t first = ch;
    if (bson_iter_next(&first) && bson_iter_key(&first)[0] == '$') {
        bson_iter_t more = first;
        if (bson_iter_next(&more)) {
            bson_t sub;
            uint32_t len;
            const uint8_t *data;
            char buf[400];
            bson_iter_document(it, &len, &data);
            bson_init_static(&sub, data, len);
            mf_bsonx_to_string(&sub, buf, sizeof buf);
            return mf_error_set(err, 15983, "An object representing an expression must have "
                                "exactly one field: %s", buf);
        }
        const op_def *op = find_op(bson_iter_key(&first));
        if (!op)
            return mf_error_set(err, MF_InvalidPipelineOperator, "Unrecognized expression '%s'", bson_iter_key(&first));
        node *n = node_new(K_OP);
        if (!n)
            return mf_error_oom(err);
        n->op = op;
        rc = op->parse ? op->parse(op, &first, sc, n, err) : mfi_parse_args(op, &first, sc, n, err);
        if (rc != 0) {
            node_free(n);
            return rc;
        }
        *out = n;
        return 0;
    }
    node *n = node_new(K_OBJ);
    if (!n)
        return mf_error_oom(err);
    while (bson_iter_next(&ch)) {
        const char *k = bson_iter_key(&ch);
        /* An object literal's names are FieldPath names in mongod's
         * ExpressionObject::parse: "$x" after the first field is 16410,
         * a DBRef's "$id" is a name like any other. */
        if ((rc = mf_bsonx_field_name_check(k, bson_iter_key_len(&ch), err)) != 0) {
            node_free(n);
            return rc;
        }
        char **nn = realloc(n->names, (n->nargs + 1) * sizeof *nn);
        if (!nn) {
            node_free(n);
            return mf_error_oom(err);
        }
        n->names = nn;
        n->names[n->nargs] = NULL;
        node *a = NULL;
        if ((rc = mfi_parse_node(&ch, sc, &a, err)) != 0 || (rc = mfi_push_arg(n, a, err)) != 0) {
            node_free(n);
            return rc;
        }
        if (!(n->names[n->nargs - 1] = bson_strdup(k))) {
            node_free(n);
            return mf_error_oom(err);
        }
    }
    *out = n;
    return 0;
}

int mfi_parse_node(const bson_iter_t *it, scope *sc, node **out, mf_error *err)
{
    int rc;
    *out = NULL;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8: {
        uint32_t len;
        const char *s = bson_iter_utf8(it, &len);
        if (len > 0 && s[0] == '$')
            return parse_string_ref(s, len, sc, out, err);
        break;
    }
    case BSON_TYPE_DOCUMENT:
        return parse_object(it, sc, out, err);
    case BSON_TYPE_ARRAY: {
        node *n = node_new(K_ARR);
        if (!n)
            return mf_error_oom(err);
        bson_iter_t ch;
        bson_iter_recurse(it, &ch);
        while (bson_iter_next(&ch)) {
            node *a = NULL;
            if ((rc = mfi_parse_node(&ch, sc, &a, err)) != 0 || (rc = mfi_push_arg(n, a, err)) != 0) {
                node_free(n);
                return rc;
            }
        }
        *out = n;
        return 0;
    }
    default:
        break;
    }
    node *n = node_new(K_CONST);
    if (!n)
        return mf_error_oom(err);
    mf_bsonx_value_copy(bson_iter_value((bson_iter_t *)it), &n->cst);
    *out = n;
    return 0;
}

/* ------------------------------------------------------------------ eval */

/* mongod's ExpressionFieldPath::evaluatePath over BSON bytes: `parts` is
 * looked up in a document; on an array the rest of the path maps over the
 * array's documents (other elements skipped, missing results dropped).
 * Numeric components are field names here, not array indexes. */
static int path_in(bson_type_t t, const uint8_t *data, uint32_t len, char *const *parts,
                   size_t n, val *out, mf_error *err)
{
    bson_t doc;
    bson_iter_t it;
    out->value_type = BSON_TYPE_EOD;
    if (!bson_init_static(&doc, data, len))
        return 0;
    if (t == BSON_TYPE_DOCUMENT) {
        if (!bson_iter_init_find(&it, &doc, parts[0]))
            return 0;
        if (n == 1) {
            mf_bsonx_value_copy(bson_iter_value(&it), out);
            return 0;
        }
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) && !BSON_ITER_HOLDS_ARRAY(&it))
            return 0;
        uint32_t sl;
        const uint8_t *sd;
        if (BSON_ITER_HOLDS_DOCUMENT(&it))
            bson_iter_document(&it, &sl, &sd);
        else
            bson_iter_array(&it, &sl, &sd);
        return path_in(bson_iter_type(&it), sd, sl, parts + 1, n - 1, out, err);
    }
    /* an array: map over its documents */
    bson_t arr;
    bson_init(&arr);
    uint32_t idx = 0;
    bson_iter_init(&it, &doc);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            continue;
        uint32_t sl;
        const uint8_t *sd;
        val v;
        bson_iter_document(&it, &sl, &sd);
        int rc = path_in(BSON_TYPE_DOCUMENT, sd, sl, parts, n, &v, err);
        if (rc != 0) {
            bson_destroy(&arr);
            return rc;
        }
        if (v.value_type != BSON_TYPE_EOD) {
            char kb[16];
            const char *key;
            size_t kl = mf_uint32_to_key(idx++, &key, kb, sizeof kb);
            mf_bsonx_append_value(&arr, key, (int)kl, &v);
            mfi_val_free(&v);
        }
    }
    return mfi_set_steal(out, &arr, BSON_TYPE_ARRAY, err);
}

/* The rest of a "$$var.a.b" path applied to the variable's value. */
static int path_on_val(const val *v, char *const *parts, size_t n, val *out, mf_error *err)
{
    if (n == 0) {
        if (v->value_type == BSON_TYPE_EOD) /* a variable bound to missing */
            out->value_type = BSON_TYPE_EOD;
        else
            mf_bsonx_value_copy(v, out);
        return 0;
    }
    out->value_type = BSON_TYPE_EOD;
    if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY)
        return 0;
    return path_in(v->value_type, v->value.v_doc.data, v->value.v_doc.data_len, parts, n, out,
                   err);
}

static int eval_var(const node *n, ctx *c, val *out)
{
    val v;
    switch (n->slot) {
    case VAR_ROOT:
    case VAR_CURRENT: {
        const bson_t *d = n->slot == VAR_ROOT ? c->top : c->root;
        if (n->nparts)
            return path_in(BSON_TYPE_DOCUMENT, bson_get_data(d), d->len, n->parts, n->nparts,
                           out, c->err);
        v.value_type = BSON_TYPE_DOCUMENT;
        v.value.v_doc.data = (uint8_t *)bson_get_data(d);
        v.value.v_doc.data_len = d->len;
        return path_on_val(&v, NULL, 0, out, c->err);
    }
    case VAR_REMOVE:
        out->value_type = BSON_TYPE_EOD;
        return 0;
    case VAR_NOW:
        set_date(&v, c->vars && c->vars->has_now ? c->vars->now_ms : mf_clock_wall_ms());
        return path_on_val(&v, n->parts, n->nparts, out, c->err);
    default:
        return path_on_val(&c->slots[n->slot], n->parts, n->nparts, out, c->err);
    }
}

static int eval_obj(const node *n, ctx *c, val *out)
{
    bson_t b;
    bson_init(&b);
    for (size_t i = 0; i < n->nargs; i++) {
        val v;
        int rc = mfi_eval(n->args[i], c, &v);
        if (rc != 0) {
            bson_destroy(&b);
            return rc;
        }
        if (v.value_type != BSON_TYPE_EOD)
            mf_bsonx_append_value(&b, n->names[i], -1, &v);
        mfi_val_free(&v);
    }
    return mfi_set_steal(out, &b, BSON_TYPE_DOCUMENT, c->err);
}

/* Append `v` as element `i` of array `b` (a missing value becomes null). */
void mfi_arr_push(bson_t *b, uint32_t i, const val *v)
{
    char kb[16];
    const char *key;
    size_t kl = mf_uint32_to_key(i, &key, kb, sizeof kb);
    if (v->value_type == BSON_TYPE_EOD)
        bson_append_null(b, key, (int)kl);
    else
        mf_bsonx_append_value(b, key, (int)kl, v);
}

static int eval_arr(const node *n, ctx *c, val *out)
{
    bson_t b;
    bson_init(&b);
    for (size_t i = 0; i < n->nargs; i++) {
        val v;
        int rc = mfi_eval(n->args[i], c, &v);
        if (rc != 0) {
            bson_destroy(&b);
            return rc;
        }
        mfi_arr_push(&b, (uint32_t)i, &v);
        mfi_val_free(&v);
    }
    return mfi_set_steal(out, &b, BSON_TYPE_ARRAY, c->err);
}

int mfi_eval(const node *n, ctx *c, val *out)
{
    out->value_type = BSON_TYPE_EOD;
    switch (n->kind) {
    case K_CONST:
        mf_bsonx_value_copy(&n->cst, out);
        return 0;
    case K_PATH:
        return path_in(BSON_TYPE_DOCUMENT, bson_get_data(c->root), c->root->len, n->parts,
                       n->nparts, out, c->err);
    case K_VAR:
        return eval_var(n, c, out);
    case K_OBJ:
        return eval_obj(n, c, out);
    case K_ARR:
        return eval_arr(n, c, out);
    default:
        return n->op->eval(n, c, out);
    }
}

/* Evaluate all operands into `v` (n->nargs of them); on error none is kept. */
int mfi_eval_all(const node *n, ctx *c, val *v)
{
    for (size_t i = 0; i < n->nargs; i++) {
        int rc = mfi_eval(n->args[i], c, &v[i]);
        if (rc != 0) {
            for (size_t j = 0; j < i; j++)
                mfi_val_free(&v[j]);
            return rc;
        }
    }
    return 0;
}

void mfi_free_all(val *v, size_t k)
{
    for (size_t i = 0; i < k; i++)
        mfi_val_free(&v[i]);
}

/* ------------------------------------------------------------ arithmetic */

/* The number types in widening order (mongod's getWidestNumeric). */
enum { W_INT, W_LONG, W_DOUBLE, W_DEC };

static int width(const val *v)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32: return W_INT;
    case BSON_TYPE_INT64: return W_LONG;
    case BSON_TYPE_DOUBLE: return W_DOUBLE;
    default: return W_DEC;
    }
}

/* A double total as a decimal when a decimal joins the sum: an integral
 * total exactly, another at 34 digits (DoubleDoubleSummation::getDecimal). */
static mf_dec double_total_dec(double d)
{
    if (d == trunc(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
        return mf_dec_from_int64((int64_t)d);
    return mf_dec_from_double34(d);
}

/* $add: the narrowest of int, long, double, decimal that holds the sum
 * (int32 and int64 overflow widen to double; a decimal operand makes the
 * result decimal); one date allowed, which makes the result a date. */
static int op_add(const node *n, ctx *c, val *out)
{
    int64_t ltot = 0;
    double dtot = 0;
    mf_dec xtot = mf_dec_from_int64(0);
    int widest = W_INT;
    bool is_date = false;
    for (size_t i = 0; i < n->nargs; i++) {
        val v;
        int rc = mfi_eval(n->args[i], c, &v);
        if (rc != 0)
            return rc;
        if (nullish(&v)) {
            mfi_val_free(&v);
            set_null(out);
            return 0;
        }
        if (!is_num(&v) && v.value_type != BSON_TYPE_DATE_TIME) {
            rc = mf_error_set(c->err, MF_TypeMismatch, "$add only supports numeric or date "
                              "types, not %s", mfi_type_name(&v));
            mfi_val_free(&v);
            return rc;
        }
        val lv; /* the operand as a number (a date as its milliseconds) */
        if (v.value_type == BSON_TYPE_DATE_TIME) {
            if (is_date)
                return mf_error_set(c->err, 16612, "only one date allowed in an $add "
                                    "expression");
            is_date = true;
            set_long(&lv, v.value.v_datetime);
        } else {
            lv = v;
            int w = width(&v);
            if (w > widest) {
                if (w >= W_DOUBLE && widest < W_DOUBLE)
                    dtot = (double)ltot;
                if (w == W_DEC)
                    xtot = widest == W_DOUBLE ? double_total_dec(dtot) : mf_dec_from_int64(ltot);
                widest = w;
            }
        }
        if (widest == W_DEC) {
            xtot = mf_dec_add(xtot, as_dec(&lv));
        } else if (widest == W_DOUBLE) {
            dtot += as_double(&lv);
        } else {
            int64_t sum;
            if (__builtin_add_overflow(ltot, as_long(&lv), &sum)) { /* widen, as mongod */
                widest = W_DOUBLE;
                dtot = (double)ltot + (double)as_long(&lv);
            } else {
                ltot = sum;
            }
        }
    }
    if (is_date) {
        if (widest == W_DEC) {
            /* mongod does not check a decimal date for overflow */
            set_date(out, mf_dec_to_int64(xtot, MF_DEC_HALF_EVEN, NULL));
        } else if (widest == W_DOUBLE) {
            if (!(dtot >= -9223372036854775808.0 && dtot < 9223372036854775808.0))
                return mf_error_set(c->err, MF_Overflow, "date overflow in $add");
            set_date(out, llround(dtot));
        } else {
            set_date(out, ltot);
        }
    } else if (widest == W_INT) {
        set_int_or_long(out, ltot);
    } else if (widest == W_LONG) {
        set_long(out, ltot);
    } else if (widest == W_DOUBLE) {
        set_double(out, dtot);
    } else {
        set_dec(out, xtot);
    }
    return 0;
}

static int op_subtract(const node *n, ctx *c, val *out)
{
    val v[2];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    val *a = &v[0], *b = &v[1];
    if (is_num(a) && is_num(b)) {
        int w = width(a) > width(b) ? width(a) : width(b);
        if (w == W_DEC)
            set_dec(out, mf_dec_sub(as_dec(a), as_dec(b)));
        else if (w == W_DOUBLE)
            set_double(out, as_double(a) - as_double(b));
        else {
            int64_t r;
            if (__builtin_sub_overflow(as_long(a), as_long(b), &r))
                set_double(out, as_double(a) - as_double(b));
            else if (w == W_LONG)
                set_long(out, r);
            else
                set_int_or_long(out, r);
        }
    } else if (nullish(a) || nullish(b)) {
        set_null(out);
    } else if (a->value_type == BSON_TYPE_DATE_TIME) {
        if (b->value_type == BSON_TYPE_DATE_TIME)
            set_long(out, a->value.v_datetime - b->value.v_datetime);
        else if (is_num(b))
            set_date(out, a->value.v_datetime - as_long(b));
        else
            rc = mf_error_set(c->err, 16613, "cant $subtract a %s from a Date", mfi_type_name(b));
    } else {
        /* sic: mongod's message has no space after "a" */
        rc = mf_error_set(c->err, 16556, "cant $subtract a%s from a %s", mfi_type_name(b),
                          mfi_type_name(a));
    }
    mfi_free_all(v, 2);
    return rc;
}

/* $multiply: int64 product while it fits (an int result when both are
 * ints and it fits in 32 bits), double after an overflow or a double,
 * decimal from the first decimal on (the product so far converted: a
 * double one to 15 digits, as mongod). */
static int op_multiply(const node *n, ctx *c, val *out)
{
    int64_t lp = 1;
    double dp = 1;
    mf_dec xp = mf_dec_from_int64(1);
    int widest = W_INT;
    for (size_t i = 0; i < n->nargs; i++) {
        val v;
        int rc = mfi_eval(n->args[i], c, &v);
        if (rc != 0)
            return rc;
        if (nullish(&v)) {
            mfi_val_free(&v);
            set_null(out);
            return 0;
        }
        if (!is_num(&v)) {
            rc = mf_error_set(c->err, 16555, "$multiply only supports numeric types, not %s",
                              mfi_type_name(&v));
            mfi_val_free(&v);
            return rc;
        }
        int w = width(&v);
        if (w > widest) {
            if (w == W_DEC)
                xp = widest == W_DOUBLE ? mf_dec_from_double(dp) : mf_dec_from_int64(lp);
            else if (w == W_DOUBLE)
                dp = (double)lp;
            widest = w;
        }
        if (widest == W_DEC) {
            xp = mf_dec_mul(xp, as_dec(&v));
        } else if (widest == W_DOUBLE) {
            dp *= as_double(&v);
        } else {
            int64_t r;
            if (__builtin_mul_overflow(lp, as_long(&v), &r)) {
                widest = W_DOUBLE;
                dp = (double)lp * as_double(&v);
            } else {
                lp = r;
            }
        }
    }
    if (widest == W_INT)
        set_int_or_long(out, lp);
    else if (widest == W_LONG)
        set_long(out, lp);
    else if (widest == W_DOUBLE)
        set_double(out, dp);
    else
        set_dec(out, xp);
    return 0;
}

static int op_divide(const node *n, ctx *c, val *out)
{
    val v[2];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    if (is_num(&v[0]) && is_num(&v[1])) {
        if (width(&v[0]) == W_DEC || width(&v[1]) == W_DEC) {
            mf_dec d = as_dec(&v[1]);
            if (mf_dec_iszero(d))
                rc = mf_error_set(c->err, 16608, "can't $divide by zero");
            else
                set_dec(out, mf_dec_div(as_dec(&v[0]), d));
        } else if (as_double(&v[1]) == 0) {
            rc = mf_error_set(c->err, 16608, "can't $divide by zero");
        } else {
            set_double(out, as_double(&v[0]) / as_double(&v[1]));
        }
    } else if (nullish(&v[0]) || nullish(&v[1])) {
        set_null(out);
    } else {
        rc = mf_error_set(c->err, 16609, "$divide only supports numeric types, not %s and %s",
                          mfi_type_name(&v[0]), mfi_type_name(&v[1]));
    }
    mfi_free_all(v, 2);
    return rc;
}

/* Whether a number is an integer that fits in 32 bits (Value::integral). */
bool mfi_integral32(const val *v)
{
    if (v->value_type == BSON_TYPE_INT32)
        return true;
    if (v->value_type == BSON_TYPE_INT64)
        return v->value.v_int64 >= INT32_MIN && v->value.v_int64 <= INT32_MAX;
    if (v->value_type == BSON_TYPE_DOUBLE) {
        double d = v->value.v_double;
        return d >= INT32_MIN && d <= INT32_MAX && d == (double)(int32_t)d;
    }
    if (v->value_type == BSON_TYPE_DECIMAL128) {
        uint32_t flags = 0;
        int32_t i = mf_dec_to_int32(v->value.v_decimal128, MF_DEC_HALF_EVEN, &flags);
        return !(flags & MF_DEC_F_INVALID) &&
               mf_dec_cmp(v->value.v_decimal128, mf_dec_from_int64(i)) == 0;
    }
    return false;
}

/* $mod: decimal fmod if either is a decimal; fmod for a double dividend or
 * a fractional divisor; otherwise integer remainder (long if either is a
 * long), x % -1 being 0. */
static int op_mod(const node *n, ctx *c, val *out)
{
    val v[2];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    val *a = &v[0], *b = &v[1];
    if (is_num(a) && is_num(b)) {
        if (width(a) == W_DEC || width(b) == W_DEC) {
            mf_dec y = as_dec(b);
            if (mf_dec_iszero(y))
                rc = mf_error_set(c->err, 16610, "can't $mod by zero");
            else
                set_dec(out, mf_dec_mod(as_dec(a), y));
        } else if (as_double(b) == 0) {
            rc = mf_error_set(c->err, 16610, "can't $mod by zero");
        } else if (a->value_type == BSON_TYPE_DOUBLE ||
                   (b->value_type == BSON_TYPE_DOUBLE && !mfi_integral32(b))) {
            set_double(out, fmod(as_double(a), as_double(b)));
        } else if (a->value_type == BSON_TYPE_INT64 || b->value_type == BSON_TYPE_INT64) {
            int64_t x = as_long(a), y = as_long(b);
            set_long(out, y == -1 ? 0 : x % y);
        } else {
            int32_t x = (int32_t)as_long(a), y = (int32_t)as_long(b);
            set_int(out, y == -1 ? 0 : x % y);
        }
    } else if (nullish(a) || nullish(b)) {
        set_null(out);
    } else {
        rc = mf_error_set(c->err, 16611, "$mod only supports numeric types, not %s and %s",
                          mfi_type_name(a), mfi_type_name(b));
    }
    mfi_free_all(v, 2);
    return rc;
}

/* The one operand of a single-number operator: *done when the result is
 * already null (a nullish operand). */
static int one_number(const node *n, ctx *c, val *v, bool *done, val *out)
{
    int rc = mfi_eval(n->args[0], c, v);
    *done = false;
    if (rc != 0)
        return rc;
    if (nullish(v)) {
        mfi_val_free(v);
        set_null(out);
        *done = true;
        return 0;
    }
    if (!is_num(v)) {
        rc = mf_error_set(c->err, 28765, "%s only supports numeric types, not %s",
                          n->op->name, mfi_type_name(v));
        mfi_val_free(v);
        return rc;
    }
    return 0;
}

/* A number as mongod prints it in an error that shows coerceToDouble()
 * ("-1", "0.5"). */
static void double_str_of(const val *v, char *buf, size_t cap)
{
    val d, s;
    set_double(&d, as_double(v));
    buf[0] = 0;
    if (mfi_coerce_to_string(&d, &s, NULL) == 0) {
        snprintf(buf, cap, "%s", s.value.v_utf8.str);
        mfi_val_free(&s);
    }
}

static int op_abs(const node *n, ctx *c, val *out)
{
    val v;
    bool done;
    int rc = one_number(n, c, &v, &done, out);
    if (rc != 0 || done)
        return rc;
    if (v.value_type == BSON_TYPE_DOUBLE) {
        set_double(out, fabs(v.value.v_double));
    } else if (v.value_type == BSON_TYPE_DECIMAL128) {
        set_dec(out, mf_dec_abs(v.value.v_decimal128));
    } else {
        int64_t x = as_long(&v);
        if (x == INT64_MIN)
            return mf_error_set(c->err, 28680, "can't take $abs of long long min");
        x = x < 0 ? -x : x;
        if (v.value_type == BSON_TYPE_INT64)
            set_long(out, x);
        else
            set_int_or_long(out, x);
    }
    return 0;
}

static int round_op(const node *n, ctx *c, val *out, double (*fn)(double), mf_dec_round mode)
{
    val v;
    bool done;
    int rc = one_number(n, c, &v, &done, out);
    if (rc != 0 || done)
        return rc;
    if (v.value_type == BSON_TYPE_DOUBLE)
        set_double(out, fn(v.value.v_double));
    else if (v.value_type == BSON_TYPE_DECIMAL128) /* to exponent 0, toward +-inf */
        set_dec(out, mf_dec_quantize(v.value.v_decimal128, 0, mode, NULL));
    else
        *out = v; /* integers are their own ceiling and floor */
    return 0;
}

static int op_ceil(const node *n, ctx *c, val *out) { return round_op(n, c, out, ceil, MF_DEC_CEIL); }
static int op_floor(const node *n, ctx *c, val *out)
{
    return round_op(n, c, out, floor, MF_DEC_FLOOR);
}

static int op_exp(const node *n, ctx *c, val *out)
{
    val v;
    bool done;
    int rc = one_number(n, c, &v, &done, out);
    if (rc == 0 && !done) {
        if (v.value_type == BSON_TYPE_DECIMAL128)
            set_dec(out, mf_dec_exp(v.value.v_decimal128));
        else
            set_double(out, exp(as_double(&v)));
    }
    return rc;
}

static int op_sqrt(const node *n, ctx *c, val *out)
{
    val v;
    bool done;
    int rc = one_number(n, c, &v, &done, out);
    if (rc != 0 || done)
        return rc;
    bool neg = v.value_type == BSON_TYPE_DECIMAL128
                   ? mf_dec_cmp(v.value.v_decimal128, mf_dec_from_int64(0)) < 0 &&
                         !mf_dec_isnan(v.value.v_decimal128)
                   : as_double(&v) < 0; /* NaN gives NaN */
    if (neg)
        return mf_error_set(c->err, 28714, "$sqrt's argument must be greater than or equal "
                            "to 0");
    if (v.value_type == BSON_TYPE_DECIMAL128)
        set_dec(out, mf_dec_sqrt(v.value.v_decimal128));
    else
        set_double(out, sqrt(as_double(&v)));
    return 0;
}

static bool dec_positive(const val *v)
{
    return v->value_type == BSON_TYPE_DECIMAL128 &&
           !mf_dec_isnan(v->value.v_decimal128) &&
           mf_dec_cmp(v->value.v_decimal128, mf_dec_from_int64(0)) > 0;
}

/* $ln and $log10: a positive decimal gives a decimal; anything else is
 * checked, and computed, as a double (so a decimal NaN gives a double
 * NaN), as mongod. */
static int log_op(const node *n, ctx *c, val *out, int code, double (*fn)(double),
                  mf_dec (*dfn)(mf_dec))
{
    val v;
    bool done;
    int rc = one_number(n, c, &v, &done, out);
    if (rc != 0 || done)
        return rc;
    if (dec_positive(&v)) {
        set_dec(out, dfn(v.value.v_decimal128));
        return 0;
    }
    double x = as_double(&v);
    if (!(x > 0) && !isnan(x)) {
        char buf[64];
        double_str_of(&v, buf, sizeof buf);
        return mf_error_set(c->err, code, "%s's argument must be a positive number, but is %s",
                            n->op->name, buf);
    }
    set_double(out, fn(x));
    return 0;
}

static int op_ln(const node *n, ctx *c, val *out) { return log_op(n, c, out, 28766, log, mf_dec_ln); }
static int op_log10(const node *n, ctx *c, val *out)
{
    return log_op(n, c, out, 28761, log10, mf_dec_log10);
}

static int op_log(const node *n, ctx *c, val *out)
{
    val v[2];
    char buf[64];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    val *x = &v[0], *b = &v[1];
    double dx = as_double(x), db = as_double(b);
    if (nullish(x) || nullish(b)) {
        set_null(out);
    } else if (!is_num(x)) {
        rc = mf_error_set(c->err, 28756, "$log's argument must be numeric, not %s", mfi_type_name(x));
    } else if (!is_num(b)) {
        rc = mf_error_set(c->err, 28757, "$log's base must be numeric, not %s", mfi_type_name(b));
    } else if ((width(x) == W_DEC || width(b) == W_DEC) &&
               mf_dec_cmp(as_dec(x), mf_dec_from_int64(0)) > 0 && !mf_dec_isnan(as_dec(x)) &&
               mf_dec_cmp(as_dec(b), mf_dec_from_int64(0)) > 0 && !mf_dec_isnan(as_dec(b)) &&
               mf_dec_cmp(as_dec(b), mf_dec_from_int64(1)) != 0) {
        set_dec(out, mf_dec_log(as_dec(x), as_dec(b)));
    } else if (!(dx > 0) && !isnan(dx)) {
        double_str_of(x, buf, sizeof buf);
        rc = mf_error_set(c->err, 28758, "$log's argument must be a positive number, but is %s",
                          buf);
    } else if (!((db > 0 && db != 1) || isnan(db))) {
        double_str_of(b, buf, sizeof buf);
        rc = mf_error_set(c->err, 28759, "$log's base must be a positive number not equal to "
                          "1, but is %s", buf);
    } else {
        set_double(out, log(dx) / log(db));
    }
    mfi_free_all(v, 2);
    return rc;
}

/* $pow: a decimal if either is one; integral base and exponent give an
 * integer while it fits (int for two ints, long otherwise), a double
 * after overflow or for a negative exponent (but 1 and -1 stay integers). */
static int op_pow(const node *n, ctx *c, val *out)
{
    val v[2];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    val *b = &v[0], *e = &v[1];
    if (nullish(b) || nullish(e)) {
        set_null(out);
    } else if (!is_num(b)) {
        rc = mf_error_set(c->err, 28762, "$pow's base must be numeric, not %s", mfi_type_name(b));
    } else if (!is_num(e)) {
        rc = mf_error_set(c->err, 28763, "$pow's exponent must be numeric, not %s",
                          mfi_type_name(e));
    } else if (width(b) == W_DEC || width(e) == W_DEC) {
        mf_dec db = as_dec(b), de = as_dec(e);
        if (mf_dec_iszero(db) && mf_dec_isneg(de))
            rc = mf_error_set(c->err, 28764, "$pow cannot take a base of 0 and a negative "
                              "exponent");
        else
            set_dec(out, mf_dec_pow(db, de));
    } else if (as_double(b) == 0 && as_double(e) < 0) {
        rc = mf_error_set(c->err, 28764, "$pow cannot take a base of 0 and a negative exponent");
    } else if (b->value_type == BSON_TYPE_DOUBLE || e->value_type == BSON_TYPE_DOUBLE) {
        set_double(out, pow(as_double(b), as_double(e)));
    } else {
        int64_t base = as_long(b), ex = as_long(e), r = 1;
        bool both_int = b->value_type == BSON_TYPE_INT32 && e->value_type == BSON_TYPE_INT32;
        bool overflow = false;
        if (ex < 0) {
            if (base == 1 || base == -1)
                r = (base == -1 && (ex & 1)) ? -1 : 1;
            else
                overflow = true; /* a fraction: double */
        } else {
            int64_t p = base;
            for (int64_t k = ex; k > 0 && !overflow; k >>= 1) {
                if ((k & 1) && __builtin_mul_overflow(r, p, &r))
                    overflow = true;
                if (k > 1 && !overflow && __builtin_mul_overflow(p, p, &p))
                    overflow = true;
            }
        }
        if (overflow)
            set_double(out, pow(as_double(b), as_double(e)));
        else if (both_int)
            set_int_or_long(out, r);
        else
            set_long(out, r);
    }
    mfi_free_all(v, 2);
    return rc;
}

/* $round and $trunc: [number, place], place an integer in [-20, 100]
 * (default 0).  Decimals round in decimal; a double goes through its
 * exact value at 34 digits and back (so 2.675 at 2 places is 2.67, the
 * double being a little below); integers change only for a negative
 * place, and an int that grows past 32 bits becomes a long.  $round
 * rounds half to even, $trunc toward zero. */
static int round_place(const node *n, ctx *c, val *out, mf_dec_round mode)
{
    val v[2];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    val *x = &v[0], *p = n->nargs > 1 ? &v[1] : NULL;
    int64_t place = 0;
    char buf[64];
    if (nullish(x)) {
        set_null(out);
        goto done;
    }
    if (!is_num(x)) {
        rc = mf_error_set(c->err, 51081, "%s only supports numeric types, not %s", n->op->name,
                          mfi_type_name(x));
        goto done;
    }
    if (p) {
        if (nullish(p)) {
            set_null(out);
            goto done;
        }
        if (!is_num(p)) {
            rc = mf_error_set(c->err, 16003, "can't convert from BSON type %s to long",
                              mfi_type_name(p));
            goto done;
        }
        place = p->value_type == BSON_TYPE_DOUBLE ? (int64_t)p->value.v_double : as_long(p);
        if (!mfi_integral32(p)) {
            rc = mf_error_set(c->err, 51082, "precision argument to  %s must be a integral value",
                              n->op->name);
            goto done;
        }
        if (place < -20 || place > 100) {
            rc = mf_error_set(c->err, 51083, "cannot apply %s with precision value %lld value "
                              "must be in [-20, 100]", n->op->name, (long long)place);
            goto done;
        }
    }
    switch (x->value_type) {
    case BSON_TYPE_DECIMAL128:
        if (mf_dec_isinf(x->value.v_decimal128))
            set_dec(out, x->value.v_decimal128);
        else
            set_dec(out, mf_dec_quantize(x->value.v_decimal128, (int)-place, mode, NULL));
        break;
    case BSON_TYPE_DOUBLE: {
        mf_dec d = mf_dec_from_double34(x->value.v_double);
        if (mf_dec_isinf(d))
            set_double(out, x->value.v_double);
        else
            set_double(out, mf_dec_to_double(mf_dec_quantize(d, (int)-place, mode, NULL), NULL));
        break;
    }
    default: {
        if (place >= 0) {
            *out = *x;
            break;
        }
        uint32_t flags = 0;
        mf_dec q = mf_dec_quantize(mf_dec_from_int64(as_long(x)), (int)-place, mode, NULL);
        int64_t r = mf_dec_to_int64(q, MF_DEC_HALF_EVEN, &flags);
        if (flags & MF_DEC_F_INVALID) {
            mfi_val_str(x, buf, sizeof buf);
            rc = mf_error_set(c->err, 51080, "invalid conversion from Decimal128 result in %s "
                              "resulting from arguments: [%s, %lld]", n->op->name, buf,
                              (long long)place);
        } else if (x->value_type == BSON_TYPE_INT64 || r > INT32_MAX || r < INT32_MIN) {
            set_long(out, r);
        } else {
            set_int(out, (int32_t)r);
        }
        break;
    }
    }
done:
    mfi_free_all(v, n->nargs);
    return rc;
}

static int op_round(const node *n, ctx *c, val *out) { return round_place(n, c, out, MF_DEC_HALF_EVEN); }
static int op_trunc(const node *n, ctx *c, val *out) { return round_place(n, c, out, MF_DEC_TRUNC); }

/* ExpressionRangedArity's message and code, for $round and $trunc. */
static int parse_round(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                       mf_error *err)
{
    op_def any = *op;
    any.min = 0;
    any.max = -1;
    int rc = mfi_parse_args(&any, it, vsc, n, err);
    if (rc == 0 && (n->nargs < 1 || n->nargs > 2))
        return mf_error_set(err, 28667, "Expression %s takes at least 1 arguments, and at most "
                            "2. %zu were passed in.", op->name, n->nargs);
    return rc;
}

/* ------------------------------------------------ comparison and logic */

static int cmp_op(const node *n, ctx *c, val *out, int which)
{
    val v[2];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    int r = mfi_val_cmp(&v[0], &v[1], ctx_coll(c));
    switch (which) {
    case 0: set_bool(out, r == 0); break;
    case 1: set_bool(out, r != 0); break;
    case 2: set_bool(out, r > 0); break;
    case 3: set_bool(out, r >= 0); break;
    case 4: set_bool(out, r < 0); break;
    case 5: set_bool(out, r <= 0); break;
    default: set_int(out, r < 0 ? -1 : r > 0); break;
    }
    mfi_free_all(v, 2);
    return 0;
}

static int op_eq(const node *n, ctx *c, val *out) { return cmp_op(n, c, out, 0); }
static int op_ne(const node *n, ctx *c, val *out) { return cmp_op(n, c, out, 1); }
static int op_gt(const node *n, ctx *c, val *out) { return cmp_op(n, c, out, 2); }
static int op_gte(const node *n, ctx *c, val *out) { return cmp_op(n, c, out, 3); }
static int op_lt(const node *n, ctx *c, val *out) { return cmp_op(n, c, out, 4); }
static int op_lte(const node *n, ctx *c, val *out) { return cmp_op(n, c, out, 5); }
static int op_cmp(const node *n, ctx *c, val *out) { return cmp_op(n, c, out, 6); }

/* $and / $or: short-circuit, as mongod. */
static int andor(const node *n, ctx *c, val *out, bool is_or)
{
    for (size_t i = 0; i < n->nargs; i++) {
        val v;
        int rc = mfi_eval(n->args[i], c, &v);
        if (rc != 0)
            return rc;
        bool t = mfi_truthy(&v);
        mfi_val_free(&v);
        if (t == is_or) {
            set_bool(out, is_or);
            return 0;
        }
    }
    set_bool(out, !is_or);
    return 0;
}

static int op_and(const node *n, ctx *c, val *out) { return andor(n, c, out, false); }
static int op_or(const node *n, ctx *c, val *out) { return andor(n, c, out, true); }

static int op_not(const node *n, ctx *c, val *out)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc == 0) {
        set_bool(out, !mfi_truthy(&v));
        mfi_val_free(&v);
    }
    return rc;
}

static int op_cond(const node *n, ctx *c, val *out)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc != 0)
        return rc;
    bool t = mfi_truthy(&v);
    mfi_val_free(&v);
    return mfi_eval(n->args[t ? 1 : 2], c, out);
}

/* $ifNull: the first operand that is not null or missing, else the last
 * (which may itself be missing). */
static int op_ifnull(const node *n, ctx *c, val *out)
{
    for (size_t i = 0; i + 1 < n->nargs; i++) {
        int rc = mfi_eval(n->args[i], c, out);
        if (rc != 0)
            return rc;
        if (!nullish(out))
            return 0;
        mfi_val_free(out);
    }
    return mfi_eval(n->args[n->nargs - 1], c, out);
}

static int op_switch(const node *n, ctx *c, val *out)
{
    bool has_default = n->slots != NULL;
    size_t nbranch = (n->nargs - (has_default ? 1 : 0)) / 2;
    for (size_t i = 0; i < nbranch; i++) {
        val v;
        int rc = mfi_eval(n->args[2 * i], c, &v);
        if (rc != 0)
            return rc;
        bool t = mfi_truthy(&v);
        mfi_val_free(&v);
        if (t)
            return mfi_eval(n->args[2 * i + 1], c, out);
    }
    if (!has_default)
        return mf_error_set(c->err, 40066, "$switch could not find a matching branch for an "
                            "input, and no default was specified.");
    return mfi_eval(n->args[n->nargs - 1], c, out);
}

static int op_let(const node *n, ctx *c, val *out)
{
    size_t nv = n->nargs - 1;
    /* evaluate every binding before any is visible (they use the outer scope) */
    val *tmp = nv ? calloc(nv, sizeof *tmp) : NULL;
    if (nv && !tmp)
        return mf_error_oom(c->err);
    int rc = 0;
    size_t done = 0;
    for (; done < nv && rc == 0; done++)
        rc = mfi_eval(n->args[done], c, &tmp[done]);
    if (rc != 0) {
        mfi_free_all(tmp, nv); /* calloc'd: unset ones are missing */
        free(tmp);
        return rc;
    }
    for (size_t i = 0; i < nv; i++) {
        mfi_val_free(&c->slots[n->slots[i]]);
        c->slots[n->slots[i]] = tmp[i];
    }
    free(tmp);
    return mfi_eval(n->args[nv], c, out);
}

/* ------------------------------------------------------------------ table */

static const op_def OPS[] = {
    {"$abs", op_abs, 1, 1, NULL},
    {"$add", op_add, 0, -1, NULL},
    {"$and", op_and, 0, -1, NULL},
    {"$ceil", op_ceil, 1, 1, NULL},
    {"$cmp", op_cmp, 2, 2, NULL},
    {"$cond", op_cond, 3, 3, parse_cond},
    {"$divide", op_divide, 2, 2, NULL},
    {"$eq", op_eq, 2, 2, NULL},
    {"$exp", op_exp, 1, 1, NULL},
    {"$floor", op_floor, 1, 1, NULL},
    {"$gt", op_gt, 2, 2, NULL},
    {"$gte", op_gte, 2, 2, NULL},
    {"$ifNull", op_ifnull, 0, -1, parse_ifnull},
    {"$let", op_let, 0, -1, parse_let},
    {"$literal", NULL, 0, 0, parse_literal},
    {"$ln", op_ln, 1, 1, NULL},
    {"$log", op_log, 2, 2, NULL},
    {"$log10", op_log10, 1, 1, NULL},
    {"$meta", op_meta, 0, 0, parse_meta},
    {"$lt", op_lt, 2, 2, NULL},
    {"$lte", op_lte, 2, 2, NULL},
    {"$mod", op_mod, 2, 2, NULL},
    {"$multiply", op_multiply, 0, -1, NULL},
    {"$ne", op_ne, 2, 2, NULL},
    {"$not", op_not, 1, 1, NULL},
    {"$or", op_or, 0, -1, NULL},
    {"$pow", op_pow, 2, 2, NULL},
    {"$round", op_round, 1, 2, parse_round},
    {"$sqrt", op_sqrt, 1, 1, NULL},
    {"$subtract", op_subtract, 2, 2, NULL},
    {"$switch", op_switch, 0, -1, parse_switch},
    {"$trunc", op_trunc, 1, 2, parse_round},
};

static const op_def *find_in(const op_def *ops, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(ops[i].name, name) == 0)
            return &ops[i];
    return NULL;
}

static const op_def *find_op(const char *name)
{
    const op_def *op = find_in(OPS, sizeof OPS / sizeof OPS[0], name);
    if (!op)
        op = find_in(mfi_expr_string_ops, mfi_expr_nstring_ops, name);
    if (!op)
        op = find_in(mfi_expr_array_ops, mfi_expr_narray_ops, name);
    if (!op)
        op = find_in(mfi_expr_object_ops, mfi_expr_nobject_ops, name);
    if (!op)
        op = find_in(mfi_expr_date_ops, mfi_expr_ndate_ops, name);
    if (!op)
        op = find_in(mfi_expr_acc_ops, mfi_expr_nacc_ops, name);
    if (!op)
        op = find_in(mfi_expr_convert_ops, mfi_expr_nconvert_ops, name);
    if (!op)
        op = find_in(mfi_expr_regex_ops, mfi_expr_nregex_ops, name);
    return op;
}

/* ------------------------------------------------------------------ API */

void mf_expr_free(mf_expr *e)
{
    if (!e)
        return;
    node_free(e->root);
    for (size_t i = 0; i < e->nlet; i++)
        free(e->let_names[i]);
    free(e->let_names);
    free(e);
}

int mf_expr_parse(const bson_iter_t *it, const char *const *let_names, size_t nlet,
                  mf_expr **out, mf_error *err)
{
    int rc = 0;
    scope sc = {0};
    mf_expr *e = calloc(1, sizeof *e);
    *out = NULL;
    if (!e || (nlet && !(e->let_names = calloc(nlet, sizeof *e->let_names)))) {
        rc = mf_error_oom(err);
        goto fail;
    }
    for (size_t i = 0; i < nlet; i++) {
        int slot;
        if (!(e->let_names[i] = bson_strdup(let_names[i]))) {
            rc = mf_error_oom(err);
            goto fail;
        }
        e->nlet++;
        if ((rc = mfi_scope_push(&sc, e->let_names[i], &slot, err)) != 0)
            goto fail;
    }
    if ((rc = mfi_parse_node(it, &sc, &e->root, err)) != 0)
        goto fail;
    e->nslots = sc.nslots;
    e->meta_kinds = sc.meta_kinds;
    free(sc.names);
    free(sc.slots);
    *out = e;
    return 0;
fail:
    free(sc.names);
    free(sc.slots);
    mf_expr_free(e);
    return rc;
}

int mf_expr_eval_value(const mf_expr *e, const bson_t *root, const mf_expr_vars *vars,
                       bson_value_t *out, mf_error *err)
{
    return mf_expr_eval_value_at(e, root, root, vars, out, err);
}

int mf_expr_eval_value_at(const mf_expr *e, const bson_t *root, const bson_t *current,
                          const mf_expr_vars *vars, bson_value_t *out, mf_error *err)
{
    ctx c = {.root = current, .top = root, .vars = vars, .slots = NULL, .err = err};
    int rc = 0;
    out->value_type = BSON_TYPE_EOD;
    if (e->nslots && !(c.slots = calloc((size_t)e->nslots, sizeof *c.slots)))
        return mf_error_oom(err);
    for (int i = 0; i < e->nslots; i++)
        c.slots[i].value_type = BSON_TYPE_EOD;
    for (size_t i = 0; i < e->nlet; i++) {
        bson_iter_t it;
        if (vars && vars->let && bson_iter_init_find(&it, vars->let, e->let_names[i]))
            mf_bsonx_value_copy(bson_iter_value(&it), &c.slots[i]);
    }
    rc = mfi_eval(e->root, &c, out);
    mfi_free_all(c.slots, (size_t)e->nslots);
    free(c.slots);
    return rc;
}

int mf_expr_eval(const mf_expr *e, const bson_t *root, const mf_expr_vars *vars, bson_t *out,
                 const char *key, bool *missing, mf_error *err)
{
    val v;
    *missing = false;
    int rc = mf_expr_eval_value(e, root, vars, &v, err);
    if (rc == 0) {
        if (v.value_type == BSON_TYPE_EOD)
            *missing = true;
        else if (!mf_bsonx_append_value(out, key, -1, &v))
            rc = mf_error_set(err, MF_BadValue, "expression result too large");
        mfi_val_free(&v);
    }
    return rc;
}

void mf_value_free(bson_value_t *v)
{
    mfi_val_free(v);
}

uint32_t mf_expr_meta_kinds(const mf_expr *e)
{
    return e ? e->meta_kinds : 0;
}

bool mf_expr_is_const(const mf_expr *e, const bson_value_t **v)
{
    if (e->root->kind != K_CONST)
        return false;
    if (v)
        *v = &e->root->cst;
    return true;
}
