/*
 * sort.c -- sort specifications, sort keys, and the sorter.
 *
 * Sort keys.  mongod sorts a document as an index over the sort pattern
 * would order it (src/mongo/db/index/sort_key_generator.cpp): it generates
 * the document's index keys for that pattern (btree_key_generator.cpp) and
 * uses the first one in index order.  So here the index key generator
 * (keygen.h, which index.c runs too) yields the candidates -- arrays
 * expanded, an empty array undefined (before null), a missing path null,
 * "a.0" an element -- each encoded in the order-preserving encoding
 * (keyenc.c), descending parts inverted, and the sort key is the
 * memcmp-least candidate.  So {a: [1, 5]} sorts by 1 ascending and by 5
 * descending.
 *
 * The sorter.  Records (key, document, sequence number) are kept in memory
 * up to `mem_limit` bytes (key + document + RECORD_OVERHEAD each).  Past
 * it, without allow_disk, the sort fails as mongod's (292); with it, the
 * records are sorted and written as a run to an unnamed temporary file
 * (created in `tmpdir` and unlinked at once, so nothing outlives the
 * process), and at the end the runs are merged.  The order is (key,
 * sequence): ties come out in the order added.  With a limit, the kept
 * records form a max-heap of the best `limit`, and a full spilled run's
 * worst record becomes a cutoff below which nothing is kept.
 *
 * Run file record layout (native byte order; the file never leaves the
 * process):
 *
 *   OFFSET  SIZE  DESCRIPTION
 *   0       8     sequence number
 *   8       4     key length K
 *   12      4     document length D
 *   16      K     key
 *   16+K    D     document
 */
#include "query_int.h"
#include "keygen.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    E_SORT_ILLEGAL_KEY = 15974,
    E_SORT_ORDER = 15975,
    E_META_ONLY = 17312,
    E_META_ILLEGAL = 31138,
    E_META_SEARCH_SCORE = 31218,
    E_META_SEARCH_HIGHLIGHTS = 31219,
};

/* Bytes counted per record beyond its key and document. */
#define RECORD_OVERHEAD 32
/* Runs merged at once; more are first merged into one. */
#define MAX_FANIN 32
/* The records of a sorter with no limit are carved from blocks of this
 * size (a larger record gets a block of its own). */
#define ARENA_BLOCK ((size_t)1 << 20)

/* ---------------------------------------------------------- specification */

struct mf_sort {
    char **paths;      /* each part's dotted path */
    bool *desc;        /* each part: descending */
    size_t nparts;
    int *meta;         /* each part: a {$meta: ...} kind (descending), or -1; or NULL
                          when no part is */
    char **fpaths;     /* with $meta parts: the other parts' paths and */
    bool *fdesc;       /* directions, for the key generator */
    size_t nfields;
    mf_collator *coll; /* strings' order (one reference), or NULL: simple */
};

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

void mf_sort_free(mf_sort *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nparts; i++)
        free(s->paths[i]);
    free(s->paths);
    free(s->desc);
    free(s->meta);
    free(s->fpaths); /* borrowed from `paths` */
    free(s->fdesc);
    mf_collator_unref(s->coll);
    free(s);
}

/* BSONElement::safeNumberLong(): doubles and decimals truncated toward
 * zero and clamped; NaN is 0. */
static int64_t safe_number_long(const bson_iter_t *it)
{
    double d;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32:
        return bson_iter_int32(it);
    case BSON_TYPE_INT64:
        return bson_iter_int64(it);
    case BSON_TYPE_DOUBLE:
        d = bson_iter_double(it);
        break;
    default: { /* decimal128 */
        bson_decimal128_t dv;
        char s[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &dv);
        bson_decimal128_to_string(&dv, s);
        d = strtod(s, NULL);
        break;
    }
    }
    if (!(d == d))
        return 0;
    if (d >= 9223372036854775807.0)
        return INT64_MAX;
    if (d <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)d;
}

/* {a: {$meta: "..."}}: mongod 7.0's SortPattern -- textScore, randVal
 * and geoNearDistance sort (highest first); searchScore and
 * searchHighlights are refused by name, anything else is 31138. */
static int parse_meta(const bson_iter_t *it, int *kind, mf_error *err)
{
    uint32_t len;
    const uint8_t *data;
    bson_t sub;
    bson_iter_t m;
    bson_iter_document(it, &len, &data);
    bson_init_static(&sub, data, len);
    if (!bson_iter_init(&m, &sub) || !bson_iter_next(&m) || strcmp(bson_iter_key(&m), "$meta") != 0)
        return mf_error_set(err, E_META_ONLY, "$meta is the only expression supported by $sort right now");
    if (bson_count_keys(&sub) != 1)
        return mf_error_set(err, MF_FailedToParse,
                            "Cannot have additional keys in a $meta sort specification");
    const char *name = BSON_ITER_HOLDS_UTF8(&m) ? bson_iter_utf8(&m, NULL) : "";
    if (strcmp(name, "textScore") == 0 || strcmp(name, "randVal") == 0 ||
        strcmp(name, "geoNearDistance") == 0) {
        *kind = mf_meta_kind_of(name);
        return 0;
    }
    if (strcmp(name, "searchScore") == 0)
        return mf_error_set(err, E_META_SEARCH_SCORE,
                            "$meta sort by 'searchScore' metadata is not supported");
    if (strcmp(name, "searchHighlights") == 0)
        return mf_error_set(err, E_META_SEARCH_HIGHLIGHTS,
                            "$meta sort by 'searchHighlights' metadata is not supported");
    char elem[160];
    mf_bsonx_elem_to_string(&m, true, elem, sizeof elem);
    return mf_error_set(err, E_META_ILLEGAL, "Illegal $meta sort: %s", elem);
}

int mf_sort_parse(const bson_t *spec, mf_sort **out, mf_error *err)
{
    mf_sort *s = calloc(1, sizeof *s);
    uint32_t n = bson_count_keys(spec);
    bson_iter_t it;
    int rc = 0;
    if (!s)
        return oom(err);
    if (n && (!(s->paths = calloc(n, sizeof *s->paths)) ||
              !(s->desc = calloc(n, sizeof *s->desc)))) {
        mf_sort_free(s);
        return oom(err);
    }
    bson_iter_init(&it, spec);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            int kind = -1;
            if ((rc = parse_meta(&it, &kind, err)) != 0)
                break;
            if (!s->meta) {
                if (!(s->meta = calloc(n, sizeof *s->meta))) {
                    rc = oom(err);
                    break;
                }
                for (size_t i = 0; i < n; i++)
                    s->meta[i] = -1;
            }
            if (!(s->paths[s->nparts] = strdup(key))) {
                rc = oom(err);
                break;
            }
            s->meta[s->nparts] = kind;
            s->desc[s->nparts++] = true; /* the highest first */
            continue;
        }
        switch (bson_iter_type(&it)) {
        case BSON_TYPE_INT32: case BSON_TYPE_INT64: case BSON_TYPE_DOUBLE:
        case BSON_TYPE_DECIMAL128:
            break;
        default: {
            char elem[160];
            mf_bsonx_elem_to_string(&it, true, elem, sizeof elem);
            rc = mf_error_set(err, E_SORT_ILLEGAL_KEY, "Illegal key in $sort specification: %s",
                              elem);
            continue;
        }
        }
        int64_t dir = safe_number_long(&it);
        if (dir != 1 && dir != -1) {
            rc = mf_error_set(err, E_SORT_ORDER,
                              "$sort key ordering must be 1 (for ascending) or -1 (for descending)");
            break;
        }
        if ((rc = mf_bsonx_field_path_check(key, strlen(key), err)) != 0)
            break;
        if (!(s->paths[s->nparts] = strdup(key))) {
            rc = oom(err);
            break;
        }
        s->desc[s->nparts++] = dir < 0;
    }
    if (rc == 0 && s->meta) { /* the key generator's fields: the others */
        if (!(s->fpaths = calloc(n, sizeof *s->fpaths)) ||
            !(s->fdesc = calloc(n, sizeof *s->fdesc)))
            rc = oom(err);
        for (size_t i = 0; rc == 0 && i < s->nparts; i++)
            if (s->meta[i] < 0) {
                s->fpaths[s->nfields] = s->paths[i];
                s->fdesc[s->nfields++] = s->desc[i];
            }
    }
    if (rc) {
        mf_sort_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

uint32_t mf_sort_meta_needs(const mf_sort *s)
{
    uint32_t needs = 0;
    for (size_t i = 0; s && s->meta && i < s->nparts; i++)
        if (s->meta[i] >= 0)
            needs |= MF_META_BIT(s->meta[i]);
    return needs;
}

int mf_sort_parse_coll(const bson_t *spec, const mf_collator *coll, mf_sort **out,
                       mf_error *err)
{
    int rc = mf_sort_parse(spec, out, err);
    if (rc == 0)
        (*out)->coll = mf_collator_ref(coll);
    return rc;
}

const mf_collator *mf_sort_collation(const mf_sort *s)
{
    return s->coll;
}

const char *mf_sort_path(const mf_sort *s, size_t i)
{
    return i < s->nparts ? s->paths[i] : NULL;
}

size_t mf_sort_nkeys(const mf_sort *s)
{
    return s->nparts;
}

/* ---------------------------------------------------------------- sort keys */

/* What a sort key adds to the generator (keygen.h): only the least
 * candidate is kept. */
typedef struct least {
    mf_buf cand;    /* the candidate key being built */
    mf_buf *best;   /* the least so far */
    size_t best_at; /* where the sort key starts in `best` */
    bool have_best;
} least;

/* Encode a candidate; keep it if it is the least yet. */
static int emit(mfi_keygen *g, const mfi_kfield *f, size_t nmissing)
{
    least *l = g->arg;
    (void)nmissing; /* a missing field is null, as in any key */
    l->cand.len = 0;
    if (mfi_keygen_encode(g, f, &l->cand) != 0)
        return oom(g->err);
    size_t blen = l->best->len - l->best_at;
    if (l->have_best) {
        size_t n = blen < l->cand.len ? blen : l->cand.len;
        int c = memcmp(l->cand.data, l->best->data + l->best_at, n);
        if (c > 0 || (c == 0 && l->cand.len >= blen))
            return 0;
    }
    l->best->len = l->best_at;
    if (mf_buf_append(l->best, l->cand.data, l->cand.len) != 0)
        return oom(g->err);
    l->have_best = true;
    return 0;
}

int mf_sort_key(const mf_sort *s, const bson_t *doc, mf_buf *key, mf_error *err)
{
    return mf_sort_key_meta(s, doc, NULL, key, err);
}

/* What a sort with $meta parts, or one asked for its values, adds to the
 * generator: the least candidate over the field parts, each field's
 * encoding cut apart, and its values. */
/* libbson declares bson_iter_t 128-byte aligned but 80 bytes long: an
 * array of them is of wrappers, each padded to that alignment. */
typedef struct sort_val {
    bson_iter_t it;
} sort_val;

typedef struct best_fields {
    size_t n;            /* the field parts */
    mf_buf cand, best;   /* a candidate's encoding; the least one's */
    size_t *cut, *bcut;  /* n + 1 offsets of each field's encoding in them */
    sort_val *vals;      /* the least one's values (borrowed from the document) */
    bool have;
} best_fields;

static int emit_fields(mfi_keygen *g, const mfi_kfield *f, size_t nmissing)
{
    best_fields *b = g->arg;
    (void)nmissing;
    b->cand.len = 0;
    for (size_t i = 0; i < b->n; i++) {
        b->cut[i] = b->cand.len;
        if (mf_bsonx_key_append_coll(&b->cand, &f[i].fixed, g->desc[i], g->coll) != 0)
            return oom(g->err);
    }
    b->cut[b->n] = b->cand.len;
    if (b->have) {
        size_t n = b->best.len < b->cand.len ? b->best.len : b->cand.len;
        int c = memcmp(b->cand.data, b->best.data, n);
        if (c > 0 || (c == 0 && b->cand.len >= b->best.len))
            return 0;
    }
    b->best.len = 0;
    if (mf_buf_append(&b->best, b->cand.data, b->cand.len) != 0)
        return oom(g->err);
    memcpy(b->bcut, b->cut, (b->n + 1) * sizeof *b->cut);
    for (size_t i = 0; i < b->n; i++)
        b->vals[i].it = f[i].fixed;
    b->have = true;
    return 0;
}

static void best_fields_free(best_fields *b)
{
    mf_buf_free(&b->cand);
    mf_buf_free(&b->best);
    free(b->cut);
    free(b->bcut);
    free(b->vals);
}

/* The least candidate of `doc` over the sort's field parts, into `b`. */
static int run_fields(const mf_sort *s, const bson_t *doc, best_fields *b, mf_error *err)
{
    char *const *paths = s->meta ? s->fpaths : s->paths;
    const bool *desc = s->meta ? s->fdesc : s->desc;
    memset(b, 0, sizeof *b);
    b->n = s->meta ? s->nfields : s->nparts;
    void *vals = NULL; /* (calloc's blocks are not aligned enough for sort_val) */
    if (!(b->cut = calloc(b->n + 1, sizeof *b->cut)) ||
        !(b->bcut = calloc(b->n + 1, sizeof *b->bcut)) ||
        posix_memalign(&vals, _Alignof(sort_val), (b->n + 1) * sizeof *b->vals) != 0)
        return oom(err);
    b->vals = memset(vals, 0, (b->n + 1) * sizeof *b->vals);
    if (b->n == 0)
        return 0;
    mfi_keygen g = {.nfields = b->n, .paths = paths, .desc = desc, .coll = s->coll,
                    .emit = emit_fields, .arg = b, .err = err};
    int rc = mfi_keygen_run(&g, doc);
    if (rc == MF_CannotIndexParallelArrays) /* as mongod's SortKeyGenerator words it */
        rc = mf_error_set(err, MF_BadValue, "cannot sort with keys that are parallel arrays");
    return rc;
}

/* A $meta part's value: the document's metadata, or missing (which
 * sorts as undefined, below null) where it has none. */
static bson_value_t meta_part(const mf_sort *s, size_t i, const mf_meta *meta)
{
    const bson_value_t *v = mf_meta_get(meta, (mf_meta_kind)s->meta[i]);
    bson_value_t u = {.value_type = BSON_TYPE_UNDEFINED};
    return v ? *v : u;
}

int mf_sort_key_meta(const mf_sort *s, const bson_t *doc, const mf_meta *meta, mf_buf *key,
                     mf_error *err)
{
    if (s->nparts == 0)
        return 0;
    size_t at = key->len;
    if (s->meta) {
        /* as mongod's SortKeyGenerator: the least key over the field
         * parts, with each $meta part's value put where it stands */
        best_fields b;
        int rc = run_fields(s, doc, &b, err);
        for (size_t i = 0, f = 0; rc == 0 && i < s->nparts; i++) {
            if (s->meta[i] >= 0) {
                bson_value_t v = meta_part(s, i, meta);
                if (mf_bsonx_key_append_value(key, &v, true) != 0)
                    rc = oom(err);
            } else {
                if (mf_buf_append(key, b.best.data + b.bcut[f], b.bcut[f + 1] - b.bcut[f]) != 0)
                    rc = oom(err);
                f++;
            }
        }
        best_fields_free(&b);
        if (rc)
            key->len = at;
        return rc;
    }
    least l = {.best = key, .best_at = at};
    mfi_keygen g = {.nfields = s->nparts, .paths = s->paths, .desc = s->desc,
                    .coll = s->coll, .emit = emit, .arg = &l, .err = err};
    int rc = mfi_keygen_run(&g, doc);
    if (rc == MF_CannotIndexParallelArrays) /* as mongod's SortKeyGenerator words it */
        rc = mf_error_set(err, MF_BadValue, "cannot sort with keys that are parallel arrays");
    if (rc)
        key->len = l.best_at;
    mf_buf_free(&l.cand);
    return rc;
}

int mf_sort_key_values(const mf_sort *s, const bson_t *doc, const mf_meta *meta, bson_value_t *out,
                       mf_error *err)
{
    best_fields b;
    bson_t arr = BSON_INITIALIZER;
    char kb[16];
    const char *k;
    int rc = run_fields(s, doc, &b, err);
    for (size_t i = 0, f = 0; rc == 0 && i < s->nparts; i++) {
        mf_uint32_to_key((uint32_t)i, &k, kb, sizeof kb);
        if (s->meta && s->meta[i] >= 0) {
            const bson_value_t *v = mf_meta_get(meta, (mf_meta_kind)s->meta[i]);
            if (v)
                mf_bsonx_append_value(&arr, k, -1, v);
            else
                bson_append_null(&arr, k, -1); /* missing: null, as mongod serializes it */
        } else {
            if (b.have)
                mf_bsonx_append_iter(&arr, k, -1, &b.vals[f].it);
            else
                bson_append_null(&arr, k, -1);
            f++;
        }
    }
    best_fields_free(&b);
    out->value_type = BSON_TYPE_EOD;
    if (rc == 0) {
        uint32_t len = 0;
        uint8_t *data = bson_destroy_with_steal(&arr, true, &len);
        if (!data)
            return oom(err);
        out->value_type = BSON_TYPE_ARRAY;
        out->value.v_doc.data = data;
        out->value.v_doc.data_len = len;
        return 0;
    }
    bson_destroy(&arr);
    return rc;
}

/* ---------------------------------------------------------------- sorter */

typedef struct rec {
    uint64_t seq;
    uint32_t klen, dlen;
    uint8_t data[]; /* key, then document */
} rec;

/* A block records are carved from (ARENA_BLOCK). */
typedef struct block {
    struct block *next;
    size_t used, cap;
    uint8_t data[]; /* at offset 24: records in it are 8-byte aligned */
} block;

/* A spilled run: an unlinked temporary file, and while merging, its
 * current record. */
typedef struct run {
    FILE *fp;
    rec *cur;   /* NULL at the end */
    size_t cap; /* bytes allocated for `cur` */
} run;

struct mf_sorter {
    size_t mem_limit;
    bool allow_disk;
    char *tmpdir;
    int64_t limit;     /* > 0: keep only the best `limit` */
    uint64_t next_seq;

    rec **recs;        /* in memory: unordered, or a max-heap when limit > 0 */
    size_t nrecs, cap;
    block *blocks;     /* no limit: where `recs` live, newest block first */
    size_t mem;        /* bytes counted for `recs` */
    rec *cutoff;       /* limit > 0: records not before this one are dropped */

    run *runs;
    size_t nruns;

    bool finished;
    size_t out_next;   /* in-memory output: next index into `recs` */
    int64_t nout;      /* documents returned */
    size_t *heap;      /* merge: run indexes, least current record first */
    size_t nheap;
    bool advance_top;  /* the top run's record was returned: read its next */
};

static int rec_cmp(const rec *a, const rec *b)
{
    size_t n = a->klen < b->klen ? a->klen : b->klen;
    int c = memcmp(a->data, b->data, n);
    if (c)
        return c;
    if (a->klen != b->klen)
        return a->klen < b->klen ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int rec_qsort_cmp(const void *a, const void *b)
{
    return rec_cmp(*(rec *const *)a, *(rec *const *)b);
}

static size_t rec_cost(const rec *r)
{
    return (size_t)r->klen + r->dlen + RECORD_OVERHEAD;
}

/* A record of `size` bytes.  With no limit, records are only ever
 * forgotten all at once (recs_clear), so they are carved from blocks: one
 * allocation per block, not per record.  With a limit, kept records are
 * replaced one by one, and each is allocated on its own. */
static rec *rec_alloc(mf_sorter *s, size_t size)
{
    if (s->limit)
        return malloc(size);
    size = (size + 7) & ~(size_t)7;
    block *b = s->blocks;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > ARENA_BLOCK ? size : ARENA_BLOCK;
        if (!(b = malloc(sizeof *b + cap)))
            return NULL;
        b->used = 0;
        b->cap = cap;
        if (size > ARENA_BLOCK && s->blocks) {
            /* A record's own block goes behind the one being filled,
             * which goes on taking small records. */
            b->next = s->blocks->next;
            s->blocks->next = b;
        } else {
            b->next = s->blocks;
            s->blocks = b;
        }
    }
    rec *r = (rec *)(b->data + b->used);
    b->used += size;
    return r;
}

static void rec_free(mf_sorter *s, rec *r)
{
    if (s->limit)
        free(r);
}

/* Forget every record in memory. */
static void recs_clear(mf_sorter *s)
{
    for (size_t i = 0; s->limit && i < s->nrecs; i++)
        free(s->recs[i]);
    while (s->blocks) {
        block *b = s->blocks;
        s->blocks = b->next;
        free(b);
    }
    s->nrecs = 0;
    s->mem = 0;
}

/* A record's place in the sort, as far as its first 8 key bytes tell:
 * those bytes as a big-endian number, zero-padded past a shorter key. */
typedef struct slot {
    uint64_t pre;
    rec *r;
} slot;

static int slot_cmp(const void *pa, const void *pb)
{
    const slot *a = pa, *b = pb;
    if (a->pre != b->pre)
        return a->pre < b->pre ? -1 : 1;
    return rec_cmp(a->r, b->r);
}

/* Sort the records in memory into (key, sequence) order.  The comparisons
 * mostly read the 8-byte prefix kept beside each record's address, not
 * the record, which lies elsewhere in memory.  (Equal prefixes fall back
 * to the whole comparison, so the order is rec_cmp's exactly.) */
static void sort_recs(mf_sorter *s)
{
    size_t n = s->nrecs;
    slot *v = n > 1 ? malloc(n * sizeof *v) : NULL;
    if (!v) { /* one record, or none, or no memory for the prefixes */
        if (n > 1)
            qsort(s->recs, n, sizeof *s->recs, rec_qsort_cmp);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const rec *r = s->recs[i];
        uint64_t pre = 0;
        for (size_t j = 0; j < 8; j++)
            pre = pre << 8 | (j < r->klen ? r->data[j] : 0);
        v[i] = (slot){pre, s->recs[i]};
    }
    qsort(v, n, sizeof *v, slot_cmp);
    for (size_t i = 0; i < n; i++)
        s->recs[i] = v[i].r;
    free(v);
}

mf_sorter *mf_sorter_new(size_t mem_limit, bool allow_disk, const char *tmpdir, int64_t limit)
{
    mf_sorter *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (!tmpdir || !*tmpdir)
        tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (!(s->tmpdir = strdup(tmpdir))) {
        free(s);
        return NULL;
    }
    s->mem_limit = mem_limit;
    s->allow_disk = allow_disk;
    s->limit = limit > 0 ? limit : 0;
    return s;
}

void mf_sorter_free(mf_sorter *s)
{
    if (!s)
        return;
    recs_clear(s);
    free(s->recs);
    free(s->cutoff);
    for (size_t i = 0; i < s->nruns; i++) {
        if (s->runs[i].fp)
            fclose(s->runs[i].fp);
        free(s->runs[i].cur);
    }
    free(s->runs);
    free(s->heap);
    free(s->tmpdir);
    free(s);
}

/* --- the max-heap of the best `limit` records (worst at the top) */

static void max_heap_down(rec **h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && rec_cmp(h[l], h[m]) > 0)
            m = l;
        if (r < n && rec_cmp(h[r], h[m]) > 0)
            m = r;
        if (m == i)
            return;
        rec *t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void max_heap_up(rec **h, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (rec_cmp(h[i], h[p]) <= 0)
            return;
        rec *t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

/* --- runs */

static int io_error(mf_error *err, const char *what)
{
    int e = errno;
    if (e == ENOSPC)
        return mf_error_set(err, MF_OutOfDiskSpace, "sort spill file %s: %s", what, strerror(e));
    return mf_error_set(err, MF_InternalError, "sort spill file %s: %s", what,
                        e ? strerror(e) : "short read or write");
}

/* A new run file in the sorter's directory.  It is unlinked at once: the
 * open descriptor keeps it, and no crash can leave it behind. */
static int run_create(mf_sorter *s, run *out, mf_error *err)
{
    size_t n = strlen(s->tmpdir) + sizeof "/multifora-sort-XXXXXX";
    char *name = malloc(n);
    if (!name)
        return oom(err);
    snprintf(name, n, "%s/multifora-sort-XXXXXX", s->tmpdir);
    int fd = mkstemp(name);
    if (fd < 0) {
        int rc = io_error(err, "create");
        free(name);
        return rc;
    }
    unlink(name);
    free(name);
    memset(out, 0, sizeof *out);
    if (!(out->fp = fdopen(fd, "w+b"))) {
        close(fd);
        return io_error(err, "open");
    }
    return 0;
}

static int run_write(run *r, const rec *x, mf_error *err)
{
    if (fwrite(x, sizeof *x + x->klen + x->dlen, 1, r->fp) != 1)
        return io_error(err, "write");
    return 0;
}

/* Read the run's next record into `cur` (NULL at the end). */
static int run_read(run *r, mf_error *err)
{
    rec head;
    size_t got = fread(&head, 1, sizeof head, r->fp);
    if (got == 0 && feof(r->fp)) {
        free(r->cur);
        r->cur = NULL;
        r->cap = 0;
        return 0;
    }
    if (got != sizeof head)
        return io_error(err, "read");
    size_t need = sizeof head + head.klen + head.dlen;
    if (need > r->cap) {
        rec *p = realloc(r->cur, need);
        if (!p)
            return oom(err);
        r->cur = p;
        r->cap = need;
    }
    *r->cur = head;
    if (fread(r->cur->data, 1, head.klen + head.dlen, r->fp) != head.klen + head.dlen)
        return io_error(err, "read");
    return 0;
}

static int run_rewind(run *r, mf_error *err)
{
    if (fflush(r->fp) != 0 || fseek(r->fp, 0, SEEK_SET) != 0)
        return io_error(err, "rewind");
    return run_read(r, err);
}

static int add_run(mf_sorter *s, run *r, mf_error *err)
{
    run *p = realloc(s->runs, (s->nruns + 1) * sizeof *p);
    if (!p) {
        fclose(r->fp);
        return oom(err);
    }
    s->runs = p;
    s->runs[s->nruns++] = *r;
    return 0;
}

/* --- the merge heap over runs (least current record at the top) */

static bool run_less(const mf_sorter *s, size_t a, size_t b)
{
    return rec_cmp(s->runs[a].cur, s->runs[b].cur) < 0;
}

static void merge_down(mf_sorter *s, size_t i)
{
    size_t *h = s->heap, n = s->nheap;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && run_less(s, h[l], h[m]))
            m = l;
        if (r < n && run_less(s, h[r], h[m]))
            m = r;
        if (m == i)
            return;
        size_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Rewind every run and heap the non-empty ones. */
static int merge_start(mf_sorter *s, mf_error *err)
{
    free(s->heap);
    s->nheap = 0;
    s->advance_top = false;
    if (!(s->heap = malloc((s->nruns ? s->nruns : 1) * sizeof *s->heap)))
        return oom(err);
    for (size_t i = 0; i < s->nruns; i++) {
        int rc = run_rewind(&s->runs[i], err);
        if (rc)
            return rc;
        if (s->runs[i].cur)
            s->heap[s->nheap++] = i;
    }
    for (size_t i = s->nheap / 2; i-- > 0;)
        merge_down(s, i);
    return 0;
}

/* The next record of the merge (valid until the next call), or NULL. */
static int merge_next(mf_sorter *s, const rec **out, mf_error *err)
{
    if (s->advance_top) {
        /* Read past the record returned last time only now, so that it
         * stayed valid until this call. */
        run *r = &s->runs[s->heap[0]];
        int rc = run_read(r, err);
        if (rc)
            return rc;
        if (!r->cur)
            s->heap[0] = s->heap[--s->nheap];
        merge_down(s, 0);
        s->advance_top = false;
    }
    if (s->nheap == 0) {
        *out = NULL;
        return 0;
    }
    *out = s->runs[s->heap[0]].cur;
    s->advance_top = true;
    return 0;
}

/* Merge every run into one (keeping at most `limit` records), so that the
 * number of open files stays bounded. */
static int merge_runs(mf_sorter *s, mf_error *err)
{
    run merged;
    int rc = merge_start(s, err);
    if (rc || (rc = run_create(s, &merged, err)) != 0)
        return rc;
    const rec *r;
    for (int64_t n = 0; (rc = merge_next(s, &r, err)) == 0 && r; n++) {
        if (s->limit && n >= s->limit)
            break;
        if ((rc = run_write(&merged, r, err)) != 0)
            break;
    }
    if (rc) {
        fclose(merged.fp);
        return rc;
    }
    for (size_t i = 0; i < s->nruns; i++) {
        fclose(s->runs[i].fp);
        free(s->runs[i].cur);
    }
    s->nruns = 0;
    free(s->heap);
    s->heap = NULL;
    s->nheap = 0;
    s->advance_top = false;
    return add_run(s, &merged, err);
}

/* Write the in-memory records as a sorted run and forget them. */
static int spill(mf_sorter *s, mf_error *err)
{
    run r;
    int rc;
    if (s->nruns + 1 >= MAX_FANIN && (rc = merge_runs(s, err)) != 0)
        return rc;
    sort_recs(s);
    if ((rc = run_create(s, &r, err)) != 0)
        return rc;
    for (size_t i = 0; i < s->nrecs; i++) {
        if ((rc = run_write(&r, s->recs[i], err)) != 0) {
            fclose(r.fp);
            return rc;
        }
    }
    /* With a limit, a full run's worst record bounds every later keeper. */
    if (s->limit && (int64_t)s->nrecs == s->limit &&
        (!s->cutoff || rec_cmp(s->recs[s->nrecs - 1], s->cutoff) < 0)) {
        free(s->cutoff);
        s->cutoff = s->recs[--s->nrecs];
    }
    recs_clear(s);
    return add_run(s, &r, err);
}

int mf_sorter_add(mf_sorter *s, const void *key, size_t klen, const void *doc, size_t dlen,
                  mf_error *err)
{
    if (s->finished)
        return mf_error_set(err, MF_InternalError, "mf_sorter_add after mf_sorter_finish");
    if (klen > UINT32_MAX || dlen > UINT32_MAX)
        return mf_error_set(err, MF_BadValue, "sort record too large");
    rec *r = rec_alloc(s, sizeof *r + klen + dlen);
    if (!r)
        return oom(err);
    r->seq = s->next_seq++;
    r->klen = (uint32_t)klen;
    r->dlen = (uint32_t)dlen;
    if (klen) /* an empty sort ({}) gives empty keys, possibly NULL */
        memcpy(r->data, key, klen);
    if (dlen)
        memcpy(r->data + klen, doc, dlen);
    if (s->cutoff && rec_cmp(r, s->cutoff) >= 0) {
        rec_free(s, r);
        return 0;
    }
    if (s->limit && (int64_t)s->nrecs == s->limit) {
        /* Full: the new record replaces the worst kept one, if better. */
        if (rec_cmp(r, s->recs[0]) >= 0) {
            rec_free(s, r);
            return 0;
        }
        s->mem -= rec_cost(s->recs[0]);
        rec_free(s, s->recs[0]);
        s->recs[0] = r;
        s->mem += rec_cost(r);
        max_heap_down(s->recs, s->nrecs, 0);
    } else {
        if (s->nrecs == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 64;
            rec **p = realloc(s->recs, cap * sizeof *p);
            if (!p) {
                rec_free(s, r);
                return oom(err);
            }
            s->recs = p;
            s->cap = cap;
        }
        s->recs[s->nrecs++] = r;
        s->mem += rec_cost(r);
        if (s->limit)
            max_heap_up(s->recs, s->nrecs - 1);
    }
    if (s->mem <= s->mem_limit)
        return 0;
    if (!s->allow_disk)
        return mf_error_set(err, MF_QueryExceededMemoryLimitNoDiskUseAllowed,
                            "Sort exceeded memory limit of %zu bytes, but did not opt in to "
                            "external sorting.",
                            s->mem_limit);
    return spill(s, err);
}

int mf_sorter_finish(mf_sorter *s, mf_error *err)
{
    int rc;
    if (s->finished)
        return 0;
    s->finished = true;
    if (s->nruns == 0) {
        sort_recs(s);
        return 0;
    }
    if (s->nrecs && (rc = spill(s, err)) != 0)
        return rc;
    return merge_start(s, err);
}

int mf_sorter_next(mf_sorter *s, const uint8_t **doc, size_t *dlen, bool *valid, mf_error *err)
{
    const uint8_t *key;
    size_t klen;
    return mf_sorter_next_keyed(s, &key, &klen, doc, dlen, valid, err);
}

int mf_sorter_next_keyed(mf_sorter *s, const uint8_t **key, size_t *klen, const uint8_t **doc,
                         size_t *dlen, bool *valid, mf_error *err)
{
    const rec *r = NULL;
    *valid = false;
    if (!s->finished)
        return mf_error_set(err, MF_InternalError, "mf_sorter_next before mf_sorter_finish");
    if (s->limit && s->nout >= s->limit)
        return 0;
    if (s->nruns == 0) {
        if (s->out_next < s->nrecs)
            r = s->recs[s->out_next++];
    } else {
        int rc = merge_next(s, &r, err);
        if (rc)
            return rc;
    }
    if (!r)
        return 0;
    s->nout++;
    *key = r->data;
    *klen = r->klen;
    *doc = r->data + r->klen;
    *dlen = r->dlen;
    *valid = true;
    return 0;
}

size_t mf_sorter_nruns(const mf_sorter *s)
{
    return s->nruns;
}
