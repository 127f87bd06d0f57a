/*
 * stage_group.c -- $group and $sortByCount.
 *
 * $group reads its whole input on the first pull.  Groups live in a hash
 * table keyed by the order-preserving encoding of the group's _id under
 * the pipeline's collation (equal values -- 1 and 1.0, or "a" and "A" at
 * strength 2 -- encode alike, so they share a group, and the _id reported
 * is the first one seen).  Results come out in the order the
 * groups were first seen.
 *
 * Memory.  The groups' keys and accumulator states count against 100 MB
 * (mongod's internalDocumentSourceGroupMaxMemoryBytes).  Past it, without
 * allowDiskUse the stage fails with QueryExceededMemoryLimitNoDiskUseAllowed
 * (292); with it, every group's partial state is written to a sorter keyed
 * by the group key and the table starts afresh.  At the end the sorter
 * returns the partials in key order, partials of one group in the order
 * they were written, and they are merged (accumulator.c) into one result
 * per group -- results then come out in key order.
 */
#include "accumulator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

typedef struct group {
    mf_buf key;              /* the encoded _id */
    uint64_t hash;
    bson_value_t id;
    mfi_acc_state **st;
} group;

typedef struct {
    mfi_stage base;
    mf_expr *id;
    mfi_acc *accs;
    size_t nacc;
    group *g;
    size_t ng, capg;
    uint32_t *table;         /* group index + 1; 0 empty */
    size_t tcap;
    size_t mem;
    uint64_t seq;
    bool done;
    size_t next;             /* next group to return */
    mf_sorter *spill;        /* partial groups, once the table spilled */
    bson_t *pending;         /* a spilled record read ahead (another group) */
    int64_t spills;
} group_stage;

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

static void group_clear(group_stage *gs, group *g)
{
    mf_buf_free(&g->key);
    mf_value_free(&g->id);
    if (g->st)
        for (size_t i = 0; i < gs->nacc; i++)
            mfi_acc_state_free(g->st[i]);
    free(g->st);
}

static void table_clear(group_stage *gs)
{
    for (size_t i = 0; i < gs->ng; i++)
        group_clear(gs, &gs->g[i]);
    gs->ng = 0;
    if (gs->table)
        memset(gs->table, 0, gs->tcap * sizeof *gs->table);
    gs->mem = 0;
}

static int table_grow(group_stage *gs, mf_error *err)
{
    size_t cap = gs->tcap ? 2 * gs->tcap : 1024;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t)
        return oom(err);
    for (size_t i = 0; i < gs->ng; i++)
        for (size_t j = gs->g[i].hash & (cap - 1);; j = (j + 1) & (cap - 1))
            if (!t[j]) {
                t[j] = (uint32_t)i + 1;
                break;
            }
    free(gs->table);
    gs->table = t;
    gs->mem += (cap - gs->tcap) * sizeof *t;
    gs->tcap = cap;
    return 0;
}

/* The group of `key` (created with `id` if new). */
static int lookup(group_stage *gs, const mf_buf *key, const bson_value_t *id, group **out,
                  mf_error *err)
{
    uint64_t h = XXH3_64bits(key->data, key->len);
    if ((gs->ng + 1) * 2 > gs->tcap && table_grow(gs, err) != 0)
        return MF_InternalError;
    size_t j = h & (gs->tcap - 1);
    for (;; j = (j + 1) & (gs->tcap - 1)) {
        uint32_t ix = gs->table[j];
        if (!ix)
            break;
        group *g = &gs->g[ix - 1];
        if (g->hash == h && g->key.len == key->len && memcmp(g->key.data, key->data, key->len) == 0) {
            *out = g;
            return 0;
        }
    }
    if (gs->ng == gs->capg) {
        size_t cap = gs->capg ? 2 * gs->capg : 64;
        group *ng = realloc(gs->g, cap * sizeof *ng); /* group holds no self-pointers */
        if (!ng)
            return oom(err);
        gs->g = ng;
        gs->mem += (cap - gs->capg) * sizeof *ng;
        gs->capg = cap;
    }
    group *g = &gs->g[gs->ng];
    memset(g, 0, sizeof *g);
    g->hash = h;
    if (mf_buf_append(&g->key, key->data, key->len) != 0 ||
        !(g->st = calloc(gs->nacc ? gs->nacc : 1, sizeof *g->st)))
        goto fail;
    for (size_t i = 0; i < gs->nacc; i++)
        if (!(g->st[i] = mfi_acc_state_new()))
            goto fail;
    mf_bsonx_value_copy(id, &g->id);
    gs->table[j] = (uint32_t)gs->ng + 1;
    gs->ng++;
    gs->mem += key->len + 64;
    *out = g;
    return 0;
fail:
    group_clear(gs, g);
    return oom(err);
}

/* The group's root for `n` expressions: {_id: <key>}. */
static void group_root(const group *g, bson_t *out)
{
    bson_init(out);
    mf_bsonx_append_value(out, "_id", 3, &g->id);
}

/* The _id's key: _ids equal under the pipeline's collation encode alike
 * (one group, reported with the _id seen first, as mongod). */
static int encode_id(const mfi_agg *agg, const bson_value_t *id, mf_buf *key, mf_error *err)
{
    return mf_bsonx_key_append_value_coll(key, id, false, agg->collator) == 0 ? 0 : oom(err);
}

/* Write every group's partial state to the sorter and empty the table. */
static int spill(group_stage *gs, mf_error *err)
{
    mfi_agg *agg = gs->base.agg;
    if (!gs->spill) {
        if (agg->tmpdir)
            (void)mkdir(agg->tmpdir, 0700);
        if (!(gs->spill = mf_sorter_new(agg->group_max_bytes, true, agg->tmpdir, 0)))
            return oom(err);
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < gs->ng; i++) {
        group *g = &gs->g[i];
        bson_t rec = BSON_INITIALIZER;
        bson_append_binary(&rec, "k", 1, BSON_SUBTYPE_BINARY, g->key.data, (uint32_t)g->key.len);
        mf_bsonx_append_value(&rec, "i", 1, &g->id);
        for (size_t a = 0; a < gs->nacc; a++) {
            char k[24];
            snprintf(k, sizeof k, "%zu", a);
            mfi_acc_save(g->st[a], &rec, k);
        }
        rc = mf_sorter_add(gs->spill, g->key.data, g->key.len, bson_get_data(&rec), rec.len, err);
        bson_destroy(&rec);
    }
    table_clear(gs);
    gs->spills++;
    return rc;
}

static int consume(group_stage *gs, mf_error *err)
{
    mfi_stage *s = &gs->base;
    mf_buf key = {0};
    int rc = 0;
    for (;;) {
        bson_t d;
        bool eof;
        if ((rc = mfi_stage_pull(s, &d, &eof, err)) != 0 || eof)
            break;
        bson_value_t id;
        rc = mfi_agg_eval(s->agg, gs->id, &d, &id, err);
        if (rc == 0) {
            if (id.value_type == BSON_TYPE_EOD)
                id.value_type = BSON_TYPE_NULL;
            key.len = 0;
            group *g = NULL;
            rc = encode_id(s->agg, &id, &key, err);
            if (rc == 0)
                rc = lookup(gs, &key, &id, &g, err);
            mf_value_free(&id);
            if (rc == 0 && gs->nacc) {
                bson_t root;
                group_root(g, &root);
                uint64_t seq = gs->seq++;
                for (size_t a = 0; rc == 0 && a < gs->nacc; a++) {
                    size_t before = mfi_acc_state_mem(g->st[a]);
                    rc = mfi_acc_add(&gs->accs[a], g->st[a], &d, &root, seq, s->agg, err);
                    gs->mem += mfi_acc_state_mem(g->st[a]) - before;
                }
                bson_destroy(&root);
            }
        }
        bson_destroy(&d);
        if (rc)
            break;
        if (gs->mem > s->agg->group_max_bytes) {
            if (!s->agg->allow_disk_use) {
                rc = mf_error_set(err, MF_QueryExceededMemoryLimitNoDiskUseAllowed,
                                  "Exceeded memory limit for $group, but didn't allow external "
                                  "sort. Pass allowDiskUse:true to opt in.");
                break;
            }
            if ((rc = spill(gs, err)) != 0)
                break;
        }
    }
    mf_buf_free(&key);
    if (rc == 0 && gs->spill) {
        rc = spill(gs, err);
        if (rc == 0)
            rc = mf_sorter_finish(gs->spill, err);
    }
    return rc;
}

static int emit(group_stage *gs, group *g, bson_t *out, mf_error *err)
{
    bson_init(out);
    mf_bsonx_append_value(out, "_id", 3, &g->id);
    for (size_t a = 0; a < gs->nacc; a++) {
        bson_value_t v;
        int rc = mfi_acc_result(&gs->accs[a], g->st[a], &v, err);
        if (rc) {
            bson_destroy(out);
            return rc;
        }
        if (v.value_type != BSON_TYPE_EOD)
            mf_bsonx_append_value(out, gs->accs[a].field, -1, &v);
        mf_value_free(&v);
    }
    return 0;
}

/* The next spilled record, a copy (NULL at the end). */
static int spill_read(group_stage *gs, bson_t **out, mf_error *err)
{
    const uint8_t *d;
    size_t dl;
    bool valid;
    *out = NULL;
    int rc = mf_sorter_next(gs->spill, &d, &dl, &valid, err);
    if (rc || !valid)
        return rc;
    bson_t tmp;
    if (!bson_init_static(&tmp, d, dl))
        return mf_error_set(err, MF_InternalError, "a spilled group is damaged");
    if (!(*out = bson_copy(&tmp)))
        return oom(err);
    return 0;
}

static bool same_key(const bson_t *a, const bson_t *b)
{
    bson_iter_t ia, ib;
    if (!bson_iter_init_find(&ia, a, "k") || !bson_iter_init_find(&ib, b, "k"))
        return false;
    bson_subtype_t st;
    uint32_t la, lb;
    const uint8_t *da, *db;
    bson_iter_binary(&ia, &st, &la, &da);
    bson_iter_binary(&ib, &st, &lb, &db);
    return la == lb && memcmp(da, db, la) == 0;
}

/* Merge a spilled record into the single group of the table. */
static int merge_record(group_stage *gs, const bson_t *rec, mf_error *err)
{
    bson_iter_t it;
    int rc = 0;
    if (gs->ng == 0) {
        mf_buf key = {0};
        bson_iter_t k;
        bson_subtype_t st;
        uint32_t l;
        const uint8_t *d;
        group *g;
        bson_iter_init_find(&k, rec, "k");
        bson_iter_binary(&k, &st, &l, &d);
        bson_iter_init_find(&it, rec, "i");
        if (mf_buf_append(&key, d, l) != 0)
            return oom(err);
        rc = lookup(gs, &key, bson_iter_value(&it), &g, err);
        mf_buf_free(&key);
        if (rc)
            return rc;
    }
    group *g = &gs->g[0];
    for (size_t a = 0; rc == 0 && a < gs->nacc; a++) {
        char k[24];
        snprintf(k, sizeof k, "%zu", a);
        if (bson_iter_init_find(&it, rec, k))
            rc = mfi_acc_merge(&gs->accs[a], g->st[a], &it, gs->base.agg, err);
    }
    return rc;
}

static int group_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    group_stage *gs = (group_stage *)s;
    int rc;
    if (!gs->done) {
        gs->done = true;
        if ((rc = consume(gs, err)) != 0)
            return rc;
        if (gs->spill && (rc = spill_read(gs, &gs->pending, err)) != 0)
            return rc;
    }
    *eof = false;
    if (!gs->spill) {
        if (gs->next >= gs->ng) {
            *eof = true;
            return 0;
        }
        return emit(gs, &gs->g[gs->next++], out, err);
    }
    /* merge the partials of the next group */
    if (!gs->pending) {
        *eof = true;
        return 0;
    }
    table_clear(gs);
    bson_t *rec = gs->pending;
    gs->pending = NULL;
    rc = merge_record(gs, rec, err);
    while (rc == 0) {
        bson_t *nx;
        if ((rc = spill_read(gs, &nx, err)) != 0 || !nx)
            break;
        if (!same_key(rec, nx)) {
            gs->pending = nx;
            break;
        }
        rc = merge_record(gs, nx, err);
        bson_destroy(nx);
    }
    bson_destroy(rec);
    if (rc == 0)
        rc = emit(gs, &gs->g[0], out, err);
    return rc;
}

static void group_free(mfi_stage *s)
{
    group_stage *gs = (group_stage *)s;
    table_clear(gs);
    free(gs->g);
    free(gs->table);
    mf_expr_free(gs->id);
    for (size_t a = 0; a < gs->nacc; a++)
        mfi_acc_clear(&gs->accs[a]);
    free(gs->accs);
    mf_sorter_free(gs->spill);
    if (gs->pending)
        bson_destroy(gs->pending);
}

static const mfi_stage_ops group_ops = {"$group", group_next, NULL, group_free, false,
                                        MFI_DEPS_EXHAUSTIVE_ALL};

bool mfi_group_reads_no_field(const mfi_stage *s)
{
    if (s->ops != &group_ops)
        return false;
    const group_stage *gs = (const group_stage *)s;
    const bson_value_t *v;
    if (!mf_expr_is_const(gs->id, &v))
        return false;
    for (size_t a = 0; a < gs->nacc; a++) {
        const mfi_acc *acc = &gs->accs[a];
        if (acc->sort_by || (acc->arg && !mf_expr_is_const(acc->arg, &v)) ||
            (acc->n && !mf_expr_is_const(acc->n, &v)))
            return false;
    }
    return true;
}

int mfi_parse_group(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 15947, "a group's fields must be specified in an object");
    group_stage *gs = mfi_stage_new(out, &group_ops, sizeof *gs, it, agg, err);
    if (!gs)
        return MF_InternalError;
    bson_iter_t f;
    size_t n = 0;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f))
        n++;
    if (n && !(gs->accs = calloc(n, sizeof *gs->accs)))
        return oom(err);
    bool has_id = false;
    int rc = 0;
    bson_iter_recurse(it, &f);
    while (rc == 0 && bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "_id") == 0) {
            if (has_id)
                return mf_error_set(err, 16414,
                                    "$group does not support duplicate fields: _id");
            has_id = true;
            rc = mfi_agg_expr(agg, &f, &gs->id, err);
            continue;
        }
        if (k[0] == '$')
            return mf_error_set(err, 40236, "The field name '%s' cannot be an operator name", k);
        if (strchr(k, '.'))
            return mf_error_set(err, 40235, "The field name '%s' cannot contain '.'", k);
        for (size_t a = 0; a < gs->nacc; a++)
            if (strcmp(gs->accs[a].field, k) == 0)
                return mf_error_set(err, 16406, "duplicate field name specified: %s", k);
        rc = mfi_acc_parse(&f, agg, &gs->accs[gs->nacc], err);
        if (rc == 0 || gs->accs[gs->nacc].field)
            gs->nacc++;
    }
    if (rc == 0 && !has_id)
        rc = mf_error_set(err, 15955, "a group specification must include an _id");
    return rc;
}

int mfi_parse_sort_by_count(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                            mf_error *err)
{
    if (BSON_ITER_HOLDS_UTF8(it)) {
        const char *s = bson_iter_utf8(it, NULL);
        if (s[0] != '$')
            return mf_error_set(err, 40148,
                                "the sortByCount field must be defined as a $-prefixed path or "
                                "an expression");
    } else if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_iter_t f;
        bson_iter_recurse(it, &f);
        if (!bson_iter_next(&f) || bson_iter_key(&f)[0] != '$')
            return mf_error_set(err, 40147,
                                "the sortByCount field must be specified as an expression");
    } else {
        return mf_error_set(err, 40149,
                            "the sortByCount field must be specified as a string or as an "
                            "object");
    }
    bson_t g = BSON_INITIALIZER, srt = BSON_INITIALIZER, body, acc;
    BSON_APPEND_DOCUMENT_BEGIN(&g, "$group", &body);
    mf_bsonx_append_value(&body, "_id", 3, bson_iter_value((bson_iter_t *)it));
    BSON_APPEND_DOCUMENT_BEGIN(&body, "count", &acc);
    BSON_APPEND_INT32(&acc, "$sum", 1);
    bson_append_document_end(&body, &acc);
    bson_append_document_end(&g, &body);
    BSON_APPEND_DOCUMENT_BEGIN(&srt, "$sort", &body);
    BSON_APPEND_INT32(&body, "count", -1);
    bson_append_document_end(&srt, &body);
    bson_iter_t gi, si;
    bson_iter_init(&gi, &g);
    bson_iter_next(&gi);
    bson_iter_init(&si, &srt);
    bson_iter_next(&si);
    int rc = mfi_parse_group(&gi, agg, out, err);
    if (rc == 0)
        rc = mfi_parse_sort(&si, agg, out, err);
    bson_destroy(&g);
    bson_destroy(&srt);
    return rc;
}
