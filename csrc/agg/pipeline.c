/*
 * pipeline.c -- the aggregation pipeline: parsing stages into a chain,
 * pushing a leading $match / $sort / $limit into the collection read, the
 * pull loop, explain, and the small stages ($match $limit $skip $sort
 * $count $unwind $documents $replaceRoot $replaceWith $sample).
 *
 * The chain.  Stage i pulls from stage i-1; the first pulls from the
 * source (a collection read opened through the environment, or nothing for
 * a database pipeline, which must begin with $documents or a stage that
 * makes its own documents).  mf_pipeline_next pulls from the last.
 *
 * Pushdown.  As mongod, the $match stages that begin a collection pipeline
 * become the read's filter (so the planner can use indexes), a $sort right
 * after them becomes the read's sort -- dropped from the chain when an
 * index provides it -- and a $limit after the $sort becomes the read's
 * limit (top-k otherwise).
 *
 * Collation.  The pipeline holds a reference to the aggregate's collation
 * (mfi_agg.collator) and every stage compares strings under it: the read
 * (mf_agg_read.collation), $match and $sort here, the accumulators, $group
 * keys, windows, buckets; expressions see it through mfi_agg.vars.coll;
 * sub-pipelines ($lookup, $graphLookup, $unionWith, $facet) take the
 * parent's.
 */
#include "pipeline_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct mf_pipeline {
    mfi_agg agg;
    mfi_stage_list stages;
    /* the read the pipeline starts from */
    bool has_read;
    bson_t filter;            /* merged leading $match filters */
    bson_t sort;              /* pushed $sort (empty: none) */
    int64_t limit;            /* pushed $limit (0: none) */
    bson_t hint_doc;          /* {h: <hint>}: a copy the pipeline owns */
    bson_iter_t hint;
    bool has_hint;
    mf_agg_source *source;
    bool opened, sorted;
    mf_deadline deadline; /* the one agg.deadline points to */
    bool writes;
    bool has_input;           /* a sub-pipeline fed documents ($facet's) */
    mf_agg_geo_near geo_near; /* a first $geoNear stage's search (geo_near.near set) */
    /* The metadata its stages ask for that the read cannot give (40218
     * before the read opens, as mongod's dependency analysis at its
     * planning), and whether the read plans for the text score. */
    uint32_t meta_missing;
    bool text_score;
    uint32_t walk_needs;      /* what the analysis checked (mfi_pipeline_walk_needs) */
};

/* ------------------------------------------------------------- helpers */

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

void *mfi_stage_new(mfi_stage_list *l, const mfi_stage_ops *ops, size_t size,
                    const bson_iter_t *spec, mfi_agg *agg, mf_error *err)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        mfi_stage **v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            oom(err);
            return NULL;
        }
        l->v = v;
        l->cap = cap;
    }
    mfi_stage *s = calloc(1, size);
    if (!s) {
        oom(err);
        return NULL;
    }
    s->ops = ops;
    s->agg = agg;
    s->deps = ops->deps;
    bson_init(&s->spec);
    s->spec_type = BSON_TYPE_EOD;
    if (spec) {
        s->spec_type = bson_iter_type(spec);
        mf_bsonx_append_value(&s->spec, "v", 1, bson_iter_value((bson_iter_t *)spec));
    }
    l->v[l->n++] = s;
    return s;
}

static void stage_free(mfi_stage *s)
{
    if (!s)
        return;
    bson_destroy(&s->spec);
    if (s->ops->free)
        s->ops->free(s);
    free(s);
}

int mfi_agg_check_time(mfi_agg *a, mf_error *err)
{
    return mf_deadline_check(a->deadline, err);
}

int mfi_stage_pull(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    if (!s->src) {
        *eof = true;
        return 0;
    }
    mfi_stage *src = s->src;
    int64_t t0 = src->agg->explain ? mf_clock_mono_us() : 0;
    int rc = mfi_agg_check_time(s->agg, err);
    if (rc == 0)
        rc = src->ops->next(src, out, eof, err);
    if (src->agg->explain)
        src->time_us += mf_clock_mono_us() - t0;
    if (rc == 0 && !*eof) {
        src->nreturned++;
        /* the document's metadata: what `s` keeps, what its expressions read */
        s->in_meta = src->meta;
        if (s->ops->keeps_meta)
            s->meta = src->meta;
        s->agg->vars.meta = src->meta;
    }
    return rc;
}

int mfi_agg_expr(mfi_agg *a, const bson_iter_t *it, mf_expr **out, mf_error *err)
{
    int rc = mf_expr_parse(it, (const char *const *)a->let_names, a->nlet, out, err);
    if (rc == 0)
        a->parse_needs |= mf_expr_meta_kinds(*out);
    return rc;
}

int mfi_agg_eval(mfi_agg *a, const mf_expr *e, const bson_t *doc, bson_value_t *out,
                 mf_error *err)
{
    return mf_expr_eval_value(e, doc, &a->vars, out, err);
}

int mfi_agg_field_path(const char *s, char **out, mf_error *err)
{
    *out = NULL;
    if (s[0] != '$')
        return mf_error_set(err, 16873, "FieldPath '%s' doesn't start with $", s);
    int rc = mf_bsonx_field_path_check(s + 1, strlen(s + 1), err);
    if (rc)
        return rc;
    if (!(*out = bson_strdup(s + 1)))
        return oom(err);
    return 0;
}

/* ------------------------------------------------------- the source stage */

typedef struct {
    mfi_stage base;
    mf_pipeline *p;
} source_stage;

static bool reads_no_field(const mf_pipeline *p);

static int open_read(mf_pipeline *p, mf_error *err)
{
    if (p->opened)
        return 0;
    p->opened = true;
    if (!p->has_read)
        return 0;
    if (p->meta_missing)
        return mf_meta_unavailable(p->meta_missing, err);
    mf_agg_read r = {
        .db = p->agg.db,
        .coll = p->agg.coll,
        .filter = &p->filter,
        .sort = p->sort.len > 5 ? &p->sort : NULL,
        .hint = p->has_hint ? &p->hint : NULL,
        .limit = p->limit,
        .vars = &p->agg.vars,
        .explain = p->agg.explain,
        .collation = p->agg.collator,
        .no_fields = reads_no_field(p),
        .deadline = p->agg.deadline,
        .geo_near = p->geo_near.near ? &p->geo_near : NULL,
        .text_score = p->text_score,
    };
    mf_expr_hooks hooks; /* copied by the read's matcher */
    mfi_agg_hooks(&p->agg, &hooks);
    r.hooks = &hooks;
    return p->agg.env->open(p->agg.env->arg, &r, &p->source, &p->sorted, err);
}

static int source_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    mf_pipeline *p = ((source_stage *)s)->p;
    int rc = open_read(p, err);
    if (rc)
        return rc;
    if (!p->source) {
        *eof = true;
        return 0;
    }
    rc = p->source->next(p->source, out, eof, err);
    s->meta = rc == 0 && !*eof ? p->source->meta : NULL;
    return rc;
}

static const mfi_stage_ops source_ops = {"$cursor", source_next, NULL, NULL};

/* ------------------------------------------------------------- $match */

typedef struct {
    mfi_stage base;
    mf_matcher *m;
    bson_t filter;
} match_stage;

static int match_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    match_stage *m = (match_stage *)s;
    for (;;) {
        bool hit;
        int rc = mfi_stage_pull(s, out, eof, err);
        if (rc || *eof)
            return rc;
        if ((rc = mf_matcher_eval(m->m, out, NULL, &hit, err)) != 0 || hit) {
            if (rc)
                bson_destroy(out);
            return rc;
        }
        bson_destroy(out);
    }
}

static void match_free(mfi_stage *s)
{
    match_stage *m = (match_stage *)s;
    mf_matcher_free(m->m);
    bson_destroy(&m->filter);
}

static const mfi_stage_ops match_ops = {"$match", match_next, NULL, match_free, true,
                                        MFI_DEPS_SEE_NEXT};

/* ------------------------------------------------------------ $geoNear */

/* mongod's DocumentSourceGeoNear: the read searches by distance (the
 * near condition asNearQuery builds, over the collection's geo index:
 * mf_agg_geo_near); this stage writes each document's distance, times
 * distanceMultiplier, at distanceField, and its nearest location at
 * includeLocs. */
typedef struct {
    mfi_stage base;
    mf_pipeline *p;      /* whose read gives the distances */
    bson_t spec;         /* the stage's document, owned: the strings below point into it */
    bson_t near;         /* {"": near} */
    bson_t query;
    char *distance_field, *include_locs, *key;
    bool spherical, has_min, has_max, has_mult;
    double min, max, mult;
    mf_meta meta;        /* the document's, with geoNearDistance and geoNearPoint */
} geo_near_stage;

static int geo_near_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    geo_near_stage *g = (geo_near_stage *)s;
    int rc = mfi_stage_pull(s, out, eof, err);
    if (rc || *eof)
        return rc;
    mf_agg_source *src = g->p ? g->p->source : NULL;
    if (!src || !src->near_meta)
        return 0;
    double dist;
    const bson_t *loc;
    src->near_meta(src, &dist, &loc);
    /* the metadata keep the distance as the search measured it, as
     * mongod's; the field is multiplied */
    bson_iter_t pt;
    if (mf_meta_copy(&g->meta, s->in_meta) != 0 ||
        (mf_meta_set_double(&g->meta, MF_META_GEO_NEAR_DISTANCE, dist), false) ||
        (bson_iter_init(&pt, loc) && bson_iter_next(&pt) &&
         mf_meta_set_value(&g->meta, MF_META_GEO_NEAR_POINT, bson_iter_value(&pt)) != 0)) {
        bson_destroy(out);
        return oom(err);
    }
    s->meta = &g->meta;
    bson_value_t v = {.value_type = BSON_TYPE_DOUBLE,
                      .value.v_double = g->has_mult ? dist * g->mult : dist};
    bson_t a = BSON_INITIALIZER, b = BSON_INITIALIZER;
    mfi_doc_set_path(out, g->distance_field, &v, &a);
    bson_iter_t l;
    if (g->include_locs && bson_iter_init(&l, loc) && bson_iter_next(&l)) {
        mfi_doc_set_path(&a, g->include_locs, bson_iter_value(&l), &b);
        bson_destroy(&a);
        bson_steal(&a, &b); /* (a bson_t may point into itself: never copied by value) */
    } else {
        bson_destroy(&b);
    }
    bson_destroy(out);
    bson_steal(out, &a);
    return 0;
}

static void geo_near_free(mfi_stage *s)
{
    geo_near_stage *g = (geo_near_stage *)s;
    bson_destroy(&g->spec);
    bson_destroy(&g->near);
    bson_destroy(&g->query);
    free(g->distance_field);
    free(g->include_locs);
    free(g->key);
    mf_meta_clear(&g->meta);
}

static const mfi_stage_ops geo_near_ops = {"$geoNear", geo_near_next, NULL, geo_near_free};

/* A non-negative number option: TypeMismatch / BadValue as mongod's. */
static int geo_near_number(const bson_iter_t *it, const char *name, double *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_NUMBER(it) && !BSON_ITER_HOLDS_DECIMAL128(it))
        return mf_error_set(err, MF_TypeMismatch, "%s must be a number", name);
    *out = bson_iter_as_double(it);
    if (BSON_ITER_HOLDS_DECIMAL128(it)) {
        bson_decimal128_t d;
        char buf[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &d);
        bson_decimal128_to_string(&d, buf);
        *out = strtod(buf, NULL);
    }
    if (!(*out >= 0))
        return mf_error_set(err, MF_BadValue, "%s must be nonnegative", name);
    return 0;
}

static int geo_near_path(const bson_iter_t *it, char **out, mf_error *err)
{
    uint32_t len;
    const char *s = bson_iter_utf8(it, &len);
    int rc = mf_bsonx_field_path_check(s, len, err);
    if (rc)
        return rc;
    return (*out = bson_strdup(s)) ? 0 : oom(err);
}

int mfi_parse_geo_near(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 10065, "invalid parameter: expected an object ($geoNear)");
    geo_near_stage *g = mfi_stage_new(out, &geo_near_ops, sizeof *g, it, agg, err);
    if (!g)
        return MF_InternalError;
    bson_init(&g->spec);
    bson_init(&g->near);
    bson_init(&g->query);
    bson_t spec;
    mf_bsonx_doc_view(it, &spec);
    bson_concat(&g->spec, &spec);
    bson_iter_t o;
    static const char *const gone[][2] = {
        {"collation", "40227"}, {"limit", "50858"}, {"num", "50857"}, {"start", "50856"}};
    for (size_t i = 0; i < 4; i++)
        if (bson_iter_init_find(&o, &g->spec, gone[i][0])) {
            int code = atoi(gone[i][1]);
            if (code == 40227)
                return mf_error_set(err, code,
                                    "$geoNear does not accept the 'collation' parameter. "
                                    "Instead, specify a collation for the entire aggregation "
                                    "command.");
            if (code == 50856)
                return mf_error_set(err, code, "$geoNear no longer supports the 'start' argument.");
            return mf_error_set(err, code,
                                "$geoNear no longer supports the '%s' parameter. Use a $limit "
                                "stage instead.",
                                gone[i][0]);
        }
    if (!bson_iter_init_find(&o, &g->spec, "near"))
        return mf_error_set(err, 5860400, "$geoNear requires a 'near' argument");
    if (!BSON_ITER_HOLDS_DOCUMENT(&o) && !BSON_ITER_HOLDS_ARRAY(&o))
        return mf_error_set(err, 5860401,
                            "$geoNear requires near argument to be a GeoJSON object or a legacy "
                            "point(array)");
    mf_bsonx_append_iter(&g->near, "", 0, &o);
    if (!bson_iter_init_find(&o, &g->spec, "distanceField") || !BSON_ITER_HOLDS_UTF8(&o))
        return mf_error_set(err, 16606, "$geoNear requires a 'distanceField' option as a String");
    int rc = geo_near_path(&o, &g->distance_field, err);
    if (rc)
        return rc;
    if (bson_iter_init_find(&o, &g->spec, "maxDistance")) {
        if ((rc = geo_near_number(&o, "maxDistance", &g->max, err)) != 0)
            return rc;
        g->has_max = true;
    }
    if (bson_iter_init_find(&o, &g->spec, "minDistance")) {
        if ((rc = geo_near_number(&o, "minDistance", &g->min, err)) != 0)
            return rc;
        g->has_min = true;
    }
    if (bson_iter_init_find(&o, &g->spec, "distanceMultiplier")) {
        if ((rc = geo_near_number(&o, "distanceMultiplier", &g->mult, err)) != 0)
            return rc;
        g->has_mult = true;
    }
    if (bson_iter_init_find(&o, &g->spec, "query")) {
        bson_t q;
        if (!BSON_ITER_HOLDS_DOCUMENT(&o))
            return mf_error_set(err, MF_TypeMismatch, "query must be an object");
        mf_bsonx_doc_view(&o, &q);
        bson_concat(&g->query, &q);
    }
    g->spherical = bson_iter_init_find(&o, &g->spec, "spherical") &&
                   mf_bsonx_truthy(bson_iter_value(&o));
    if (bson_iter_init_find(&o, &g->spec, "includeLocs")) {
        if (!BSON_ITER_HOLDS_UTF8(&o))
            return mf_error_set(err, 16607,
                                "$geoNear requires that 'includeLocs' option is a String");
        if ((rc = geo_near_path(&o, &g->include_locs, err)) != 0)
            return rc;
    }
    if (bson_iter_init_find(&o, &g->spec, "key")) {
        if (!BSON_ITER_HOLDS_UTF8(&o))
            return mf_error_set(err, MF_TypeMismatch,
                                "$geoNear parameter 'key' must be of type string but found type: "
                                "%s",
                                mf_bsonx_type_alias(bson_iter_type(&o)));
        uint32_t len;
        const char *k = bson_iter_utf8(&o, &len);
        if (len == 0)
            return mf_error_set(err, MF_BadValue,
                                "$geoNear parameter 'key' cannot be the empty string");
        if ((rc = geo_near_path(&o, &g->key, err)) != 0)
            return rc;
        (void)k;
    }
    return 0;
}

int mfi_parse_match(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 15959, "the match filter must be an expression in an object");
    match_stage *m = mfi_stage_new(out, &match_ops, sizeof *m, it, agg, err);
    if (!m)
        return MF_InternalError;
    uint32_t len;
    const uint8_t *data;
    bson_iter_document(it, &len, &data);
    bson_init(&m->filter);
    bson_t f;
    bson_init_static(&f, data, len);
    bson_concat(&m->filter, &f);
    bson_iter_t w;
    if (bson_iter_init_find(&w, &f, "$where"))
        return mf_error_set(err, MF_BadValue, "$where is not allowed inside of a $match "
                                              "aggregation expression");
    if (mf_filter_any_near(&f)) /* mongod's parser, without AllowedFeatures::kGeoNear */
        return mf_error_set(err, 5626500,
                            "$geoNear, $near, and $nearSphere are not allowed in this context, as "
                            "these operators require sorting geospatial data. If you do not need "
                            "sort, consider using $geoWithin instead. Check out "
                            "https://dochub.mongodb.org/core/near-sort-operation and "
                            "https://dochub.mongodb.org/core/nearSphere-sort-operationfor more "
                            "details.");
    mf_expr_hooks hooks;
    mfi_agg_hooks(agg, &hooks);
    return mf_matcher_parse_coll(&m->filter, &hooks, agg->collator, &m->m, err);
}

/* ------------------------------------------------------ $limit and $skip */

typedef struct {
    mfi_stage base;
    int64_t n, left;
} count_stage;

static int limit_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    count_stage *l = (count_stage *)s;
    if (l->left <= 0) {
        *eof = true;
        return 0;
    }
    int rc = mfi_stage_pull(s, out, eof, err);
    if (rc == 0 && !*eof)
        l->left--;
    return rc;
}

static int skip_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    count_stage *k = (count_stage *)s;
    for (;;) {
        int rc = mfi_stage_pull(s, out, eof, err);
        if (rc || *eof || k->left <= 0)
            return rc;
        k->left--;
        bson_destroy(out);
    }
}

static const mfi_stage_ops limit_ops = {"$limit", limit_next, NULL, NULL, true,
                                        MFI_DEPS_SEE_NEXT};
static const mfi_stage_ops skip_ops = {"$skip", skip_next, NULL, NULL, true, MFI_DEPS_SEE_NEXT};

/* Whether the stages after the read use no field of its documents:
 * $skip and $limit, then a $group of constants (what a driver's
 * countDocuments sends). */
static bool reads_no_field(const mf_pipeline *p)
{
    for (size_t i = 1; i < p->stages.n; i++) {
        const mfi_stage *s = p->stages.v[i];
        if (s->ops == &skip_ops || s->ops == &limit_ops)
            continue;
        return mfi_group_reads_no_field(s);
    }
    return false;
}

/* The argument of $limit or $skip as mongod 5.0+ reads it
 * (BSONElement::parseIntegerElementToNonNegativeLong): a number with an
 * integral value that fits in 64 bits and is not negative.  Failures are
 * `code` "invalid argument to $<stage> stage: <reason>: $<stage>: <value>". */
static int count_arg(const bson_iter_t *it, int code, int64_t *out, mf_error *err)
{
    char shown[128];
    const char *why = NULL;
    mf_bsonx_elem_to_string(it, true, shown, sizeof shown);
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32:
        *out = bson_iter_int32(it);
        break;
    case BSON_TYPE_INT64:
        *out = bson_iter_int64(it);
        break;
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        if (d != d)
            why = "Expected an integer, but found NaN in: ";
        else if (d >= 9223372036854775808.0 || d < -9223372036854775808.0)
            why = "Cannot represent as a 64-bit integer: ";
        else if (floor(d) != d)
            why = "Expected an integer: ";
        else
            *out = (int64_t)d;
        break;
    }
    default:
        why = "Expected a number in: ";
        break;
    }
    if (!why && *out < 0)
        why = "Expected a non-negative number in: ";
    if (why)
        return mf_error_set(err, code, "invalid argument to %s stage: %s%s", bson_iter_key(it),
                            why, shown);
    return 0;
}

int mfi_parse_limit(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    int64_t n;
    int rc = count_arg(it, 5107201, &n, err);
    if (rc)
        return rc;
    if (n == 0)
        return mf_error_set(err, 15958, "the limit must be positive");
    count_stage *l = mfi_stage_new(out, &limit_ops, sizeof *l, it, agg, err);
    if (!l)
        return MF_InternalError;
    l->n = l->left = n;
    return 0;
}

int mfi_parse_skip(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    int64_t n;
    int rc = count_arg(it, 5107200, &n, err);
    if (rc)
        return rc;
    count_stage *k = mfi_stage_new(out, &skip_ops, sizeof *k, it, agg, err);
    if (!k)
        return MF_InternalError;
    k->n = k->left = n;
    return 0;
}

/* -------------------------------------------------------------- $sort */

typedef struct {
    mfi_stage base;
    mf_sort *sort;
    bson_t spec_doc;
    int64_t limit;      /* absorbed $limit (0: none) */
    mf_sorter *sorter;
    bool done;          /* the sorter is filled */
    bool pushed;        /* the read delivers this order: pass through */
    bool sort_key;      /* set sortKey metadata: the pipeline asks for it */
    mf_meta m;          /* the metadata of the document returned last */
} sort_stage;

/* The metadata a sorted document leaves with: what it came with, and its
 * sort key's values when the pipeline asks for {$meta: "sortKey"} (as
 * mongod's $sort sets it for what needs it).  Into st->m; `*any`: there
 * is some. */
static int sort_meta(sort_stage *st, const bson_t *doc, const mf_meta *in, bool *any,
                     mf_error *err)
{
    int rc = 0;
    if (mf_meta_copy(&st->m, in) != 0)
        return oom(err);
    if (st->sort_key) {
        bson_value_t v;
        if ((rc = mf_sort_key_values(st->sort, doc, in, &v, err)) != 0)
            return rc;
        if (mf_meta_set_value(&st->m, MF_META_SORT_KEY, &v) != 0)
            rc = oom(err);
        bson_value_destroy(&v);
    }
    *any = st->m.has != 0;
    return rc;
}

static int sort_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    sort_stage *st = (sort_stage *)s;
    int rc = 0;
    bool any;
    if (st->pushed) {
        if ((rc = mfi_stage_pull(s, out, eof, err)) != 0 || *eof)
            return rc;
        s->meta = s->in_meta;
        if (st->sort_key) {
            if ((rc = sort_meta(st, out, s->in_meta, &any, err)) != 0)
                bson_destroy(out);
            s->meta = &st->m;
        }
        return rc;
    }
    if (!st->done) {
        st->done = true;
        st->sorter = mf_sorter_new(s->agg->sort_max_bytes, s->agg->allow_disk_use, s->agg->tmpdir,
                                   st->limit);
        if (!st->sorter)
            return oom(err);
        if (s->agg->allow_disk_use && s->agg->tmpdir)
            (void)mkdir(s->agg->tmpdir, 0700);
        mf_buf key = {0}, rec = {0};
        for (;;) {
            bson_t d;
            bool e;
            if ((rc = mfi_stage_pull(s, &d, &e, err)) != 0 || e)
                break;
            key.len = 0;
            rc = mf_sort_key_meta(st->sort, &d, s->in_meta, &key, err);
            /* a record is the document, then its metadata as a document
             * of its own when it has some */
            if (rc == 0 && (rc = sort_meta(st, &d, s->in_meta, &any, err)) == 0 && any) {
                bson_t mb = BSON_INITIALIZER;
                mf_meta_to_bson(&st->m, &mb);
                rec.len = 0;
                if (mf_buf_append(&rec, bson_get_data(&d), d.len) != 0 ||
                    mf_buf_append(&rec, bson_get_data(&mb), mb.len) != 0)
                    rc = oom(err);
                bson_destroy(&mb);
                if (rc == 0)
                    rc = mf_sorter_add(st->sorter, key.data, key.len, rec.data, rec.len, err);
            } else if (rc == 0) {
                rc = mf_sorter_add(st->sorter, key.data, key.len, bson_get_data(&d), d.len, err);
            }
            bson_destroy(&d);
            if (rc)
                break;
        }
        mf_buf_free(&key);
        mf_buf_free(&rec);
        if (rc == 0)
            rc = mf_sorter_finish(st->sorter, err);
        if (rc)
            return rc;
    }
    const uint8_t *d;
    size_t dl;
    bool valid;
    if ((rc = mf_sorter_next(st->sorter, &d, &dl, &valid, err)) != 0)
        return rc;
    if (!valid) {
        *eof = true;
        return 0;
    }
    uint32_t doclen = 0;
    if (dl >= 4)
        memcpy(&doclen, d, 4);
    doclen = BSON_UINT32_FROM_LE(doclen);
    bson_t tmp;
    if (doclen > dl || !bson_init_static(&tmp, d, doclen) ||
        (doclen < dl && mf_meta_from_bson(&st->m, d + doclen, dl - doclen) != 0))
        return mf_error_set(err, MF_InternalError, "a sorted record is damaged");
    s->meta = doclen < dl ? &st->m : NULL;
    *eof = false;
    bson_init(out);
    bson_concat(out, &tmp);
    return 0;
}

static void sort_explain(const mfi_stage *s, bson_t *out)
{
    const sort_stage *st = (const sort_stage *)s;
    BSON_APPEND_DOCUMENT(out, "sortKey", &st->spec_doc);
    if (st->limit > 0)
        BSON_APPEND_INT64(out, "limit", st->limit);
}

static void sort_free(mfi_stage *s)
{
    sort_stage *st = (sort_stage *)s;
    mf_sort_free(st->sort);
    mf_sorter_free(st->sorter);
    bson_destroy(&st->spec_doc);
    mf_meta_clear(&st->m);
}

static const mfi_stage_ops sort_ops = {"$sort", sort_next, sort_explain, sort_free, false,
                                       MFI_DEPS_SEE_NEXT};

int mfi_parse_sort(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 15973, "the $sort key specification must be an object");
    sort_stage *st = mfi_stage_new(out, &sort_ops, sizeof *st, it, agg, err);
    if (!st)
        return MF_InternalError;
    uint32_t len;
    const uint8_t *data;
    bson_iter_document(it, &len, &data);
    bson_t spec;
    bson_init_static(&spec, data, len);
    bson_init(&st->spec_doc);
    bson_concat(&st->spec_doc, &spec);
    if (bson_count_keys(&spec) == 0)
        return mf_error_set(err, 15976, "$sort stage must have at least one sort key");
    int rc = mf_sort_parse_coll(&st->spec_doc, agg->collator, &st->sort, err);
    if (rc == 0) /* its $meta parts: what the dependency analysis checks */
        agg->parse_needs |= mf_sort_meta_needs(st->sort);
    return rc;
}

/* ------------------------------------------------------------- $count */

int mfi_parse_count(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mf_error_set(err, 40156, "the count field must be a non-empty string");
    const char *name = bson_iter_utf8(it, NULL);
    if (!*name)
        return mf_error_set(err, 40157, "the count field must be a non-empty string");
    if (name[0] == '$')
        return mf_error_set(err, 40158, "the count field cannot be a $-prefixed path");
    if (strchr(name, '.'))
        return mf_error_set(err, 40160, "the count field cannot contain '.'");
    /* {$group: {_id: null, <name>: {$sum: 1}}}, {$project: {_id: 0}} */
    bson_t g = BSON_INITIALIZER, p = BSON_INITIALIZER;
    bson_t body, acc;
    BSON_APPEND_DOCUMENT_BEGIN(&g, "$group", &body);
    BSON_APPEND_NULL(&body, "_id");
    BSON_APPEND_DOCUMENT_BEGIN(&body, name, &acc);
    BSON_APPEND_INT32(&acc, "$sum", 1);
    bson_append_document_end(&body, &acc);
    bson_append_document_end(&g, &body);
    BSON_APPEND_DOCUMENT_BEGIN(&p, "$project", &body);
    BSON_APPEND_INT32(&body, "_id", 0);
    bson_append_document_end(&p, &body);
    bson_iter_t gi, pi;
    int rc = 0;
    bson_iter_init(&gi, &g);
    bson_iter_next(&gi);
    bson_iter_init(&pi, &p);
    bson_iter_next(&pi);
    rc = mfi_parse_group(&gi, agg, out, err);
    if (rc == 0)
        rc = mfi_parse_project(&pi, agg, out, err);
    bson_destroy(&g);
    bson_destroy(&p);
    return rc;
}

/* ------------------------------------------------------------ $unwind */

typedef struct {
    mfi_stage base;
    char *path;
    char *index_field;       /* includeArrayIndex, or NULL */
    bool preserve;           /* preserveNullAndEmptyArrays */
    bson_t *cur;             /* the document being unwound (owned) */
    bson_iter_t arr_it;      /* over its array */
    int64_t idx;
} unwind_stage;

/* Set `path` in a copy of `doc` to `v` (NULL: remove), into `out`.  Dotted
 * paths go through sub-documents, as mongod's MutableDocument::setNestedField. */
static void set_path(const bson_t *doc, const char *path, const bson_value_t *v, bson_t *out)
{
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    bson_iter_t it;
    bool done = false;
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strlen(k) == n && memcmp(k, path, n) == 0) {
            done = true;
            if (!dot) {
                if (v)
                    mf_bsonx_append_value(out, k, -1, v);
            } else {
                bson_t sub = BSON_INITIALIZER, child;
                if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                    uint32_t l;
                    const uint8_t *d;
                    bson_iter_document(&it, &l, &d);
                    bson_init_static(&sub, d, l);
                }
                bson_append_document_begin(out, k, -1, &child);
                set_path(&sub, dot + 1, v, &child);
                bson_append_document_end(out, &child);
            }
        } else {
            mf_bsonx_append_iter(out, NULL, 0, &it);
        }
    }
    if (!done && v) {
        if (!dot) {
            mf_bsonx_append_value(out, path, (int)n, v);
        } else {
            bson_t empty = BSON_INITIALIZER, child;
            bson_append_document_begin(out, path, (int)n, &child);
            set_path(&empty, dot + 1, v, &child);
            bson_append_document_end(out, &child);
        }
    }
}

void mfi_doc_set_path(const bson_t *doc, const char *path, const bson_value_t *v, bson_t *out)
{
    set_path(doc, path, v, out);
}

/* The value at dotted `path` of `doc`, through sub-documents only. */
bool mfi_doc_get_path(const bson_t *doc, const char *path, bson_iter_t *out)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return false;
    if (!strchr(path, '.')) {
        if (!bson_iter_find(&it, path))
            return false;
        *out = it;
        return true;
    }
    return bson_iter_find_descendant(&it, path, out);
}

/* `doc` with the unwound path set to `v` (NULL: removed) and the index
 * field, if asked for, to `idx` (-1: null), into `out`. */
static void unwind_emit(const unwind_stage *u, const bson_t *doc, const bson_value_t *v,
                        bool set, int64_t idx, bson_t *out)
{
    bson_t mid = BSON_INITIALIZER;
    const bson_t *base = doc;
    if (set) {
        set_path(doc, u->path, v, &mid);
        base = &mid;
    }
    bson_init(out);
    if (u->index_field) {
        bson_value_t iv = {.value_type = BSON_TYPE_NULL};
        if (idx >= 0) {
            iv.value_type = BSON_TYPE_INT64;
            iv.value.v_int64 = idx;
        }
        set_path(base, u->index_field, &iv, out);
    } else {
        bson_concat(out, base);
    }
    bson_destroy(&mid);
}

static int unwind_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    unwind_stage *u = (unwind_stage *)s;
    for (;;) {
        if (u->cur) {
            if (bson_iter_next(&u->arr_it)) {
                unwind_emit(u, u->cur, bson_iter_value(&u->arr_it), true, u->idx++, out);
                *eof = false;
                return 0;
            }
            bson_destroy(u->cur);
            u->cur = NULL;
        }
        bson_t d;
        int rc = mfi_stage_pull(s, &d, eof, err);
        if (rc || *eof)
            return rc;
        bson_iter_t v, probe;
        bool found = mfi_doc_get_path(&d, u->path, &v);
        if (found && BSON_ITER_HOLDS_ARRAY(&v)) {
            bson_iter_recurse(&v, &probe);
            if (bson_iter_next(&probe)) {
                if (!(u->cur = bson_copy(&d))) {
                    bson_destroy(&d);
                    return oom(err);
                }
                bson_destroy(&d);
                mfi_doc_get_path(u->cur, u->path, &v);
                bson_iter_recurse(&v, &u->arr_it);
                u->idx = 0;
                continue;
            }
            /* an empty array: dropped, or kept without the field */
            if (u->preserve)
                unwind_emit(u, &d, NULL, true, -1, out);
            bson_destroy(&d);
            if (!u->preserve)
                continue;
            *eof = false;
            return 0;
        }
        if (!found || BSON_ITER_HOLDS_NULL(&v) || BSON_ITER_HOLDS_UNDEFINED(&v)) {
            if (u->preserve)
                unwind_emit(u, &d, NULL, false, -1, out);
            bson_destroy(&d);
            if (!u->preserve)
                continue;
            *eof = false;
            return 0;
        }
        /* a value that is not an array is unwound as itself */
        unwind_emit(u, &d, NULL, false, -1, out);
        bson_destroy(&d);
        *eof = false;
        return 0;
    }
}

static void unwind_explain(const mfi_stage *s, bson_t *out)
{
    const unwind_stage *u = (const unwind_stage *)s;
    char p[1024];
    snprintf(p, sizeof p, "$%s", u->path);
    BSON_APPEND_UTF8(out, "path", p);
    if (u->preserve)
        BSON_APPEND_BOOL(out, "preserveNullAndEmptyArrays", true);
    if (u->index_field)
        BSON_APPEND_UTF8(out, "includeArrayIndex", u->index_field);
}

static void unwind_free(mfi_stage *s)
{
    unwind_stage *u = (unwind_stage *)s;
    free(u->path);
    free(u->index_field);
    if (u->cur)
        bson_destroy(u->cur);
}

static const mfi_stage_ops unwind_ops = {"$unwind", unwind_next, unwind_explain, unwind_free,
                                         true, MFI_DEPS_SEE_NEXT};

int mfi_parse_unwind(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    const char *path = NULL;
    const char *index = NULL;
    bool preserve = false;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        path = bson_iter_utf8(it, NULL);
    } else if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_iter_t f;
        bson_iter_recurse(it, &f);
        while (bson_iter_next(&f)) {
            const char *k = bson_iter_key(&f);
            if (strcmp(k, "path") == 0) {
                if (!BSON_ITER_HOLDS_UTF8(&f))
                    return mf_error_set(err, 28808,
                                        "expected a string as the path for $unwind stage, got %s",
                                        mf_bsonx_type_alias(bson_iter_type(&f)));
                path = bson_iter_utf8(&f, NULL);
            } else if (strcmp(k, "preserveNullAndEmptyArrays") == 0) {
                if (!BSON_ITER_HOLDS_BOOL(&f))
                    return mf_error_set(err, 28809,
                                        "expected a boolean for the preserveNullAndEmptyArrays "
                                        "option to $unwind stage, got %s",
                                        mf_bsonx_type_alias(bson_iter_type(&f)));
                preserve = bson_iter_bool(&f);
            } else if (strcmp(k, "includeArrayIndex") == 0) {
                if (!BSON_ITER_HOLDS_UTF8(&f))
                    return mf_error_set(err, 28810,
                                        "expected a non-empty string for the includeArrayIndex "
                                        " option to $unwind stage, got %s",
                                        mf_bsonx_type_alias(bson_iter_type(&f)));
                index = bson_iter_utf8(&f, NULL);
                if (!*index)
                    return mf_error_set(err, 28810,
                                        "expected a non-empty string for the includeArrayIndex "
                                        " option to $unwind stage, got string");
                if (index[0] == '$')
                    return mf_error_set(err, 28822,
                                        "includeArrayIndex option to $unwind stage should not be "
                                        "prefixed with a '$': %s",
                                        index);
            } else {
                return mf_error_set(err, 28811, "unrecognized option to $unwind stage: %s", k);
            }
        }
        if (!path)
            return mf_error_set(err, 28812, "no path specified to $unwind stage");
    } else {
        return mf_error_set(err, 15981,
                            "expected either a string or an object as specification for $unwind "
                            "stage, got %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    }
    if (!*path)
        return mf_error_set(err, 40352, "FieldPath cannot be constructed with empty string");
    if (path[0] != '$')
        return mf_error_set(err, 28818,
                            "path option to $unwind stage should be prefixed with a '$': %s",
                            path);
    unwind_stage *u = mfi_stage_new(out, &unwind_ops, sizeof *u, it, agg, err);
    if (!u)
        return MF_InternalError;
    u->preserve = preserve;
    int rc = mfi_agg_field_path(path, &u->path, err);
    if (rc == 0 && index && !(u->index_field = bson_strdup(index)))
        rc = oom(err);
    return rc;
}

/* ---------------------------------------------------------- $documents */

typedef struct {
    mfi_stage base;
    bson_value_t arr;   /* the evaluated array */
    bson_t arr_doc;
    bson_iter_t it;
    bool started;
    mf_expr *e;
} documents_stage;

static int documents_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    documents_stage *d = (documents_stage *)s;
    if (!d->started) {
        d->started = true;
        bson_t empty = BSON_INITIALIZER;
        int rc = mfi_agg_eval(s->agg, d->e, &empty, &d->arr, err);
        if (rc)
            return rc;
        if (d->arr.value_type != BSON_TYPE_ARRAY)
            return mf_error_set(err, 5858203,
                                "an array is expected");
        bson_init_static(&d->arr_doc, d->arr.value.v_doc.data, d->arr.value.v_doc.data_len);
        bson_iter_init(&d->it, &d->arr_doc);
    }
    if (!bson_iter_next(&d->it)) {
        *eof = true;
        return 0;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(&d->it))
        return mf_error_set(err, 40228,
                            "'replacement document' must evaluate to an object, but resulting "
                            "value was: %s. Type of resulting value: '%s'.",
                            "?", mf_bsonx_type_alias(bson_iter_type(&d->it)));
    uint32_t l;
    const uint8_t *data;
    bson_iter_document(&d->it, &l, &data);
    bson_t tmp;
    bson_init_static(&tmp, data, l);
    bson_init(out);
    bson_concat(out, &tmp);
    *eof = false;
    return 0;
}

static void documents_free(mfi_stage *s)
{
    documents_stage *d = (documents_stage *)s;
    if (d->started)
        mf_value_free(&d->arr);
    mf_expr_free(d->e);
}

static const mfi_stage_ops documents_ops = {"$documents", documents_next, NULL, documents_free};

int mfi_parse_documents(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    documents_stage *d = mfi_stage_new(out, &documents_ops, sizeof *d, it, agg, err);
    if (!d)
        return MF_InternalError;
    return mfi_agg_expr(agg, it, &d->e, err);
}

/* -------------------------------------------- $replaceRoot, $replaceWith */

typedef struct {
    mfi_stage base;
    mf_expr *e;
    bool is_with;            /* $replaceWith: mongod words its error otherwise */
} replace_stage;

/* Append the element at `it` to `b` as mongod's Value operator<< shows it:
 * documents as {a: 1, b: "x"}, arrays as [1, 2], doubles as an ostream
 * does (%g), other scalars as BSONElement::toString. */
static void value_out(const bson_iter_t *it, mf_buf *b)
{
    char tmp[256];
    bson_iter_t sub;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY: {
        bool is_doc = BSON_ITER_HOLDS_DOCUMENT(it);
        bool first = true;
        mf_buf_append(b, is_doc ? "{" : "[", 1);
        bson_iter_recurse(it, &sub);
        while (bson_iter_next(&sub)) {
            if (!first)
                mf_buf_append(b, ", ", 2);
            first = false;
            if (is_doc) {
                mf_buf_append(b, bson_iter_key(&sub), strlen(bson_iter_key(&sub)));
                mf_buf_append(b, ": ", 2);
            }
            value_out(&sub, b);
        }
        mf_buf_append(b, is_doc ? "}" : "]", 1);
        return;
    }
    case BSON_TYPE_DOUBLE:
        snprintf(tmp, sizeof tmp, "%g", bson_iter_double(it));
        break;
    default:
        mf_bsonx_elem_to_string(it, false, tmp, sizeof tmp);
        break;
    }
    mf_buf_append(b, tmp, strlen(tmp));
}

/* `v` as mongod's Value::toString shows it ("MISSING" for missing). */
static void value_str(const bson_value_t *v, char *out, size_t cap)
{
    if (v->value_type == BSON_TYPE_EOD) {
        snprintf(out, cap, "MISSING");
        return;
    }
    bson_t tmp = BSON_INITIALIZER;
    bson_iter_t vi;
    mf_buf b = {0};
    mf_bsonx_append_value(&tmp, "v", 1, v);
    bson_iter_init(&vi, &tmp);
    bson_iter_next(&vi);
    value_out(&vi, &b);
    snprintf(out, cap, "%.*s", (int)b.len, b.data ? (const char *)b.data : "");
    mf_buf_free(&b);
    bson_destroy(&tmp);
}

static int replace_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    replace_stage *r = (replace_stage *)s;
    bson_t d;
    int rc = mfi_stage_pull(s, &d, eof, err);
    if (rc || *eof)
        return rc;
    bson_value_t v;
    rc = mfi_agg_eval(s->agg, r->e, &d, &v, err);
    if (rc == 0) {
        if (v.value_type != BSON_TYPE_DOCUMENT) {
            char shown[256], input[512];
            bson_value_t dv = {.value_type = BSON_TYPE_DOCUMENT};
            dv.value.v_doc.data = (uint8_t *)bson_get_data(&d);
            dv.value.v_doc.data_len = d.len;
            value_str(&v, shown, sizeof shown);
            value_str(&dv, input, sizeof input);
            rc = mf_error_set(err, 40228,
                              "'%s must evaluate to an object, but resulting value was: %s. "
                              "Type of resulting value: '%s'. Input document: %s",
                              r->is_with ? "replacement document'" : "newRoot' expression ",
                              shown,
                              v.value_type == BSON_TYPE_EOD ? "missing"
                                                            : mf_bsonx_type_alias(v.value_type),
                              input);
        } else {
            bson_t tmp;
            bson_init_static(&tmp, v.value.v_doc.data, v.value.v_doc.data_len);
            bson_init(out);
            bson_concat(out, &tmp);
        }
        mf_value_free(&v);
    }
    bson_destroy(&d);
    return rc;
}

static void replace_free(mfi_stage *s)
{
    mf_expr_free(((replace_stage *)s)->e);
}

static const mfi_stage_ops replace_root_ops = {"$replaceRoot", replace_next, NULL, replace_free,
                                               true, MFI_DEPS_EXHAUSTIVE_FIELDS};

int mfi_parse_replace_root(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                           mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 40229,
                            "expected an object as specification for $replaceRoot stage, got %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_t f, nr;
    bool has = false;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        if (strcmp(bson_iter_key(&f), "newRoot") != 0)
            return mf_error_set(err, 40415,
                                "BSON field '$replaceRoot.%s' is an unknown field.",
                                bson_iter_key(&f));
        nr = f;
        has = true;
    }
    if (!has)
        return mf_error_set(err, 40414,
                            "BSON field '$replaceRoot.newRoot' is missing but a required field");
    replace_stage *r = mfi_stage_new(out, &replace_root_ops, sizeof *r, it, agg, err);
    if (!r)
        return MF_InternalError;
    return mfi_agg_expr(agg, &nr, &r->e, err);
}

int mfi_parse_replace_with(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                           mf_error *err)
{
    replace_stage *r = mfi_stage_new(out, &replace_root_ops, sizeof *r, it, agg, err);
    if (!r)
        return MF_InternalError;
    r->is_with = true;
    return mfi_agg_expr(agg, it, &r->e, err);
}

/* ------------------------------------------------------------- $sample */

/* {$sample: {size: n}}: n documents chosen uniformly at random (a
 * reservoir over the input), in random order.  As mongod's (which sorts
 * its input by a random value, highest first, and keeps n), each leaves
 * with randVal metadata in [0, 1), decreasing from one to the next, and
 * the metadata it came with. */
typedef struct {
    mfi_stage base;
    int64_t size;
    bson_t **res;
    mf_meta *metas;     /* what each kept document came with */
    double *rand_vals;  /* theirs, highest first */
    int64_t n;
    int64_t next;
    bool done;
    mf_meta m;          /* the metadata of the document returned last */
} sample_stage;

static uint64_t rnd(void)
{
    static _Thread_local uint64_t x;
    if (!x)
        x = (uint64_t)mf_clock_mono_us() * 0x9E3779B97F4A7C15ull | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static int sample_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    sample_stage *sm = (sample_stage *)s;
    if (!sm->done) {
        sm->done = true;
        size_t ncap = (size_t)(sm->size < 1 << 20 ? sm->size : 1 << 20);
        if (sm->size > 0 && (!(sm->res = calloc(ncap, sizeof *sm->res)) ||
                             !(sm->metas = calloc(ncap, sizeof *sm->metas))))
            return oom(err);
        int64_t cap = sm->size < 1 << 20 ? sm->size : 1 << 20, seen = 0;
        for (;;) {
            bson_t d;
            bool e;
            int rc = mfi_stage_pull(s, &d, &e, err);
            if (rc)
                return rc;
            if (e)
                break;
            seen++;
            int64_t slot = sm->n < cap ? sm->n++ : (int64_t)(rnd() % (uint64_t)seen);
            if (slot < cap) {
                if (sm->res[slot])
                    bson_destroy(sm->res[slot]);
                sm->res[slot] = bson_copy(&d);
                if (mf_meta_copy(&sm->metas[slot], s->in_meta) != 0) {
                    bson_destroy(&d);
                    return oom(err);
                }
            }
            bson_destroy(&d);
        }
        for (int64_t i = sm->n - 1; i > 0; i--) {
            int64_t j = (int64_t)(rnd() % (uint64_t)(i + 1));
            bson_t *t = sm->res[i];
            sm->res[i] = sm->res[j];
            sm->res[j] = t;
            mf_meta mt = sm->metas[i];
            sm->metas[i] = sm->metas[j];
            sm->metas[j] = mt;
        }
        /* the random values, highest first (53 random bits: [0, 1)) */
        if (sm->n && !(sm->rand_vals = calloc((size_t)sm->n, sizeof *sm->rand_vals)))
            return oom(err);
        for (int64_t i = 0; i < sm->n; i++)
            sm->rand_vals[i] = (double)(rnd() >> 11) * 0x1.0p-53;
        qsort(sm->rand_vals, (size_t)sm->n, sizeof *sm->rand_vals, cmp_desc);
    }
    if (sm->next >= sm->n) {
        *eof = true;
        return 0;
    }
    bson_init(out);
    bson_concat(out, sm->res[sm->next]);
    bson_destroy(sm->res[sm->next]);
    mf_meta_clear(&sm->m);
    sm->m = sm->metas[sm->next]; /* taken over */
    sm->metas[sm->next] = (mf_meta){0};
    mf_meta_set_double(&sm->m, MF_META_RAND_VAL, sm->rand_vals[sm->next]);
    s->meta = &sm->m;
    sm->res[sm->next++] = NULL;
    *eof = false;
    return 0;
}

static void sample_free(mfi_stage *s)
{
    sample_stage *sm = (sample_stage *)s;
    for (int64_t i = 0; i < sm->n; i++) {
        if (sm->res[i])
            bson_destroy(sm->res[i]);
        if (sm->metas)
            mf_meta_clear(&sm->metas[i]);
    }
    free(sm->res);
    free(sm->metas);
    free(sm->rand_vals);
    mf_meta_clear(&sm->m);
}

static const mfi_stage_ops sample_ops = {"$sample", sample_next, NULL, sample_free, false,
                                         MFI_DEPS_SEE_NEXT};

int mfi_parse_sample(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 28745, "the $sample stage specification must be an object");
    bson_iter_t f;
    bool has = false;
    int64_t size = 0;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        if (strcmp(bson_iter_key(&f), "size") != 0)
            return mf_error_set(err, 28748, "unrecognized option to $sample: %s",
                                bson_iter_key(&f));
        if (!BSON_ITER_HOLDS_NUMBER(&f))
            return mf_error_set(err, 28746, "size argument to $sample must be a number");
        size = bson_iter_as_int64(&f);
        if (size < 0)
            return mf_error_set(err, 28747, "size argument to $sample must not be negative");
        has = true;
    }
    if (!has)
        return mf_error_set(err, 28749, "$sample stage must specify a size");
    sample_stage *sm = mfi_stage_new(out, &sample_ops, sizeof *sm, it, agg, err);
    if (!sm)
        return MF_InternalError;
    sm->size = size;
    return 0;
}

/* ------------------------------------------------------- $changeStream */

/* $changeStream: change streams read a replica set's oplog, which a
 * standalone does not have.  mongod's createFromBson checks the argument's
 * type and fields (DocumentSourceChangeStreamSpec) and then refuses the
 * stage with 40573 before any position check; so does this. */
static int parse_change_stream(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                               mf_error *err)
{
    static const char *const fields[] = {
        "resumeAfter", "startAfter", "startAtOperationTime", "fullDocument",
        "fullDocumentBeforeChange", "allChangesForCluster", "showMigrationEvents",
        "showSystemEvents", "allowToRunOnConfigDB", "allowToRunOnSystemNS",
        "showExpandedEvents", "showRawUpdateDescription"};
    bson_iter_t f;
    (void)out;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 50808, "$changeStream stage expects a document as argument");
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        size_t i = 0;
        while (i < sizeof fields / sizeof fields[0] && strcmp(fields[i], bson_iter_key(&f)) != 0)
            i++;
        if (i == sizeof fields / sizeof fields[0])
            return mf_error_set(err, 40415, "BSON field '$changeStream.%s' is an unknown field.",
                                bson_iter_key(&f));
    }
    if (agg->change_streams)
        return mf_error_set(err, 40602, "$changeStream is only valid as the first stage in a "
                                        "pipeline");
    return mf_error_set(err, 40573, "The $changeStream stage is only supported on replica sets");
}

/* ------------------------------------------------------------ the table */

typedef struct {
    const char *name;
    mfi_stage_parse_fn parse;
    bool makes_docs;   /* may begin a database pipeline */
    /* As the first stage of a collection's pipeline, the metadata kinds of
     * MF_META_CHECKED it gives (a $geoNear: its distance and point). */
    uint32_t first_meta;
} stage_def;

static const stage_def stage_table[] = {
    {"$addFields", mfi_parse_add_fields, false},
    {"$bucket", mfi_parse_bucket, false},
    {"$bucketAuto", mfi_parse_bucket_auto, false},
    {"$changeStream", parse_change_stream, true},
    {"$collStats", mfi_parse_coll_stats, false},
    {"$count", mfi_parse_count, false},
    {"$densify", mfi_parse_densify, false},
    {"$documents", mfi_parse_documents, true},
    {"$facet", mfi_parse_facet, false},
    {"$fill", mfi_parse_fill, false},
    {"$geoNear", mfi_parse_geo_near, false,
     MF_META_BIT(MF_META_GEO_NEAR_DISTANCE) | MF_META_BIT(MF_META_GEO_NEAR_POINT)},
    {"$graphLookup", mfi_parse_graph_lookup, false},
    {"$group", mfi_parse_group, false},
    {"$indexStats", mfi_parse_index_stats, false},
    {"$limit", mfi_parse_limit, false},
    {"$listLocalSessions", mfi_parse_list_local_sessions, true},
    {"$lookup", mfi_parse_lookup, false},
    {"$match", mfi_parse_match, false},
    {"$merge", mfi_parse_merge, false},
    {"$out", mfi_parse_out, false},
    {"$planCacheStats", mfi_parse_plan_cache_stats, false},
    {"$project", mfi_parse_project, false},
    {"$redact", mfi_parse_redact, false},
    {"$replaceRoot", mfi_parse_replace_root, false},
    {"$replaceWith", mfi_parse_replace_with, false},
    {"$sample", mfi_parse_sample, false},
    {"$set", mfi_parse_set, false},
    {"$setWindowFields", mfi_parse_set_window_fields, false},
    {"$skip", mfi_parse_skip, false},
    {"$sort", mfi_parse_sort, false},
    {"$sortByCount", mfi_parse_sort_by_count, false},
    {"$unionWith", mfi_parse_union_with, false},
    {"$unset", mfi_parse_unset, false},
    {"$unwind", mfi_parse_unwind, false},
};

static const stage_def *find_stage(const char *name)
{
    for (size_t i = 0; i < sizeof stage_table / sizeof stage_table[0]; i++)
        if (strcmp(stage_table[i].name, name) == 0)
            return &stage_table[i];
    return NULL;
}

bool mfi_stage_known(const char *name)
{
    return find_stage(name) != NULL;
}

int mf_pipeline_lite_parse(const bson_t *stages, mf_error *err)
{
    bson_iter_t it, st, more;
    bson_iter_init(&it, stages);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return mf_error_set(err, MF_TypeMismatch,
                                "Each element of the 'pipeline' array must be an object");
        bson_iter_recurse(&it, &st);
        if (!bson_iter_next(&st) || (more = st, bson_iter_next(&more)))
            return mf_error_set(err, 40323,
                                "A pipeline stage specification object must contain exactly one "
                                "field.");
        if (!find_stage(bson_iter_key(&st)))
            return mf_error_set(err, 40324, "Unrecognized pipeline stage name: '%s'",
                                bson_iter_key(&st));
    }
    return 0;
}

/* $out and $merge write the pipeline's results: mongod's
 * PositionRequirement::kLast. */
static bool is_write_stage(const char *name)
{
    return strcmp(name, "$out") == 0 || strcmp(name, "$merge") == 0;
}

/* ---------------------------------------------------------- the pipeline */

static void agg_clear(mfi_agg *a)
{
    mf_collator_unref(a->collator);
    a->collator = NULL;
    free(a->db);
    free(a->coll);
    free(a->tmpdir);
    bson_destroy(&a->let_values);
    for (size_t i = 0; i < a->nlet; i++)
        free(a->let_names[i]);
    free(a->let_names);
}

/* Evaluate the command's `let` into agg->let_values; each variable may use
 * those before it. */
static int eval_let(mfi_agg *a, const bson_t *let, mf_error *err)
{
    bson_iter_t it;
    size_t n = bson_count_keys(let);
    if (n && !(a->let_names = calloc(n, sizeof *a->let_names)))
        return oom(err);
    bson_iter_init(&it, let);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        mf_expr *e = NULL;
        bson_value_t v;
        bson_t empty = BSON_INITIALIZER;
        int rc = mfi_agg_expr(a, &it, &e, err);
        if (rc == 0)
            rc = mfi_agg_eval(a, e, &empty, &v, err);
        mf_expr_free(e);
        if (rc)
            return rc;
        if (!*k || !((k[0] >= 'a' && k[0] <= 'z') || (unsigned char)k[0] >= 0x80)) {
            mf_value_free(&v);
            if (k[0] >= 'A' && k[0] <= 'Z')
                return mf_error_set(err, 16867,
                                    "'%s' starts with an invalid character for a user variable "
                                    "name",
                                    k);
            return mf_error_set(err, 16866, "empty variable names are not allowed");
        }
        if (v.value_type != BSON_TYPE_EOD)
            mf_bsonx_append_value(&a->let_values, k, -1, &v);
        mf_value_free(&v);
        if (!(a->let_names[a->nlet] = bson_strdup(k)))
            return oom(err);
        a->nlet++;
    }
    return 0;
}

void mf_pipeline_free(mf_pipeline *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->stages.n; i++)
        stage_free(p->stages.v[i]);
    free(p->stages.v);
    if (p->source)
        p->source->free(p->source);
    bson_destroy(&p->filter);
    bson_destroy(&p->sort);
    bson_destroy(&p->hint_doc);
    bson_destroy(&p->agg.err_info);
    agg_clear(&p->agg);
    free(p);
}

bool mf_pipeline_writes(const mf_pipeline *p)
{
    return p->writes;
}

void mf_pipeline_set_deadline(mf_pipeline *p, int64_t deadline_us)
{
    p->deadline.at_us = deadline_us;
}

const bson_t *mf_pipeline_error_info(const mf_pipeline *p)
{
    return &p->agg.err_info;
}

/* Push the leading $match stages, a $sort and a $limit into the read. */
static int push_down(mf_pipeline *p, mf_error *err)
{
    mfi_stage_list *l = &p->stages;
    if (l->n > 1 && l->v[1]->ops == &geo_near_ops) {
        /* the read searches by distance; what follows reads its fields */
        geo_near_stage *g = (geo_near_stage *)l->v[1];
        g->p = p;
        bson_concat(&p->filter, &g->query);
        p->geo_near = (mf_agg_geo_near){.near = &g->near, .spherical = g->spherical,
                                        .has_min = g->has_min, .has_max = g->has_max,
                                        .min = g->min, .max = g->max, .key = g->key,
                                        .include_locs = g->include_locs != NULL};
        return 0;
    }
    size_t first = 1; /* stage 0 is the source */
    size_t nmatch = 0;
    while (first + nmatch < l->n && l->v[first + nmatch]->ops == &match_ops)
        nmatch++;
    if (nmatch == 1) {
        bson_concat(&p->filter, &((match_stage *)l->v[first])->filter);
    } else if (nmatch > 1) {
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(&p->filter, "$and", &arr);
        for (size_t i = 0; i < nmatch; i++) {
            char key[24];
            snprintf(key, sizeof key, "%zu", i);
            BSON_APPEND_DOCUMENT(&arr, key, &((match_stage *)l->v[first + i])->filter);
        }
        bson_append_array_end(&p->filter, &arr);
    }
    for (size_t i = 0; i < nmatch; i++)
        stage_free(l->v[first + i]);
    memmove(&l->v[first], &l->v[first + nmatch], (l->n - first - nmatch) * sizeof *l->v);
    l->n -= nmatch;
    /* $sort then $limit: the sort keeps only the first n (top-k). */
    for (size_t i = 1; i + 1 < l->n; i++) {
        if (l->v[i]->ops == &sort_ops && l->v[i + 1]->ops == &limit_ops) {
            sort_stage *st = (sort_stage *)l->v[i];
            int64_t n = ((count_stage *)l->v[i + 1])->n;
            if (st->limit == 0 || n < st->limit)
                st->limit = n;
        }
    }
    if (first < l->n && l->v[first]->ops == &sort_ops) {
        sort_stage *st = (sort_stage *)l->v[first];
        bson_concat(&p->sort, &st->spec_doc);
        p->limit = st->limit;
    }
    (void)err;
    return 0;
}

/* mongod's dependency analysis of the stages left after the pushdown
 * (Pipeline::getDependencies): from the first, each stage's metadata is
 * checked against what the read gives -- up to the first stage it cannot
 * analyse (NOT_SUPPORTED), or past the first that needs every field and
 * no metadata of those before it; with variables in scope (a `let`) it
 * goes on through every stage, checking all but the unanalysable.  Sets
 * what open_read refuses (40218) and whether the read plans for the text
 * score (asked for, or not proven unneeded); $sort sets sortKey metadata
 * when a stage asks for it. */
static void settle_meta(mf_pipeline *p)
{
    uint32_t check = 0, needs = 0;
    bool know_fields = false, know_meta = false, vars = p->agg.nlet > 0;
    for (size_t i = 1; i < p->stages.n; i++) {
        mfi_stage *s = p->stages.v[i];
        if (s->deps == MFI_DEPS_NOT_SUPPORTED) {
            if (vars)
                continue;
            break;
        }
        check |= s->meta_needs;
        if (!know_meta)
            needs |= s->meta_needs;
        know_fields |= s->deps >= MFI_DEPS_EXHAUSTIVE_FIELDS;
        know_meta |= s->deps == MFI_DEPS_EXHAUSTIVE_ALL;
        if (know_fields && know_meta && !vars)
            break;
    }
    p->walk_needs = check;
    if (p->has_read)
        p->meta_missing = check & MF_META_CHECKED & ~p->agg.meta_available;
    p->text_score = (p->agg.meta_available & MF_META_BIT(MF_META_TEXT_SCORE)) &&
                    ((needs & MF_META_BIT(MF_META_TEXT_SCORE)) || !know_meta);
    for (size_t i = 1; i < p->stages.n; i++)
        if (p->stages.v[i]->ops == &sort_ops)
            ((sort_stage *)p->stages.v[i])->sort_key =
                (p->agg.all_needs & MF_META_BIT(MF_META_SORT_KEY)) != 0;
}

const mf_meta *mfi_pipeline_meta(const mf_pipeline *p)
{
    return p->stages.v[p->stages.n - 1]->meta;
}

uint32_t mfi_pipeline_walk_needs(const mf_pipeline *p)
{
    return p->walk_needs;
}

/* Parse `stages` into p->stages (after the source stage).  `has_docs`:
 * the pipeline has documents to start from (a collection, or a
 * sub-pipeline's input); otherwise it must begin with $documents. */
static int parse_stages(mf_pipeline *p, const bson_t *stages, bool has_docs, mf_error *err)
{
    bson_iter_t it;
    bson_iter_init(&it, stages);
    size_t idx = 0;
    const char *write_stage = NULL; /* a $out or $merge seen before this stage */
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return mf_error_set(err, MF_TypeMismatch,
                                "Each element of the 'pipeline' array must be an object");
        bson_iter_t st;
        bson_iter_recurse(&it, &st);
        bson_iter_t more = st;
        if (!bson_iter_next(&st) || (more = st, bson_iter_next(&more)))
            return mf_error_set(err, 40323,
                                "A pipeline stage specification object must contain exactly one "
                                "field.");
        const char *name = bson_iter_key(&st);
        const stage_def *def = find_stage(name);
        if (!def)
            return mf_error_set(err, 40324, "Unrecognized pipeline stage name: '%s'", name);
        if (def->parse == parse_change_stream) /* refused wherever it stands */
            return def->parse(&st, &p->agg, &p->stages, err);
        if (!has_docs && idx == 0 && !def->makes_docs)
            return mf_error_set(err, MF_InvalidNamespace,
                                "{aggregate: 1} is not valid for '%s'; a collection is required.",
                                name);
        if (def->makes_docs && idx != 0)
            return mf_error_set(err, 40602, "%s is only valid as the first stage in a pipeline",
                                name);
        if (idx != 0 && def->parse == mfi_parse_geo_near)
            return mf_error_set(err, 40602, "%s is only valid as the first stage in a pipeline",
                                name);
        bson_t probe; /* $text: read by the collection's text scan, first only */
        bool text = def->parse == mfi_parse_match && mf_bsonx_doc_view(&st, &probe) &&
                    mf_filter_has_text(&probe);
        if (idx != 0 && text)
            return mf_error_set(err, 17313,
                                "$match with $text is only allowed as the first pipeline stage");
        /* what the documents of a collection's read may carry */
        if (idx == 0 && p->has_read)
            p->agg.meta_available |= (text ? MF_META_BIT(MF_META_TEXT_SCORE) : 0) | def->first_meta;
        size_t n0 = p->stages.n;
        p->agg.parse_needs = 0;
        int rc = def->parse(&st, &p->agg, &p->stages, err);
        if (rc)
            return rc;
        if (p->stages.n > n0) /* a desugared stage: its first asks */
            p->stages.v[n0]->meta_needs |= p->agg.parse_needs;
        p->agg.all_needs |= p->agg.parse_needs;
        if (write_stage)
            return mf_error_set(err, 40601, "%s can only be the final stage in the pipeline",
                                write_stage);
        if (is_write_stage(name)) {
            write_stage = def->name;
            p->writes = true;
        }
        idx++;
    }
    if (!has_docs && idx == 0)
        return mf_error_set(err, MF_InvalidNamespace,
                            "{aggregate: 1} is not valid for an empty pipeline.");
    return 0;
}

/* mf_pipeline_parse; `push`: leading $match and $sort stages go into the
 * read (not for a pipeline over events: its source reads nothing). */
static int parse_with(const bson_t *stages, const mf_agg_opts *o, bool push, mf_pipeline **out,
                      mf_error *err)
{
    int rc = 0;
    *out = NULL;
    mf_pipeline *p = calloc(1, sizeof *p);
    if (!p)
        return oom(err);
    bson_init(&p->filter);
    bson_init(&p->sort);
    bson_init(&p->hint_doc);
    bson_init(&p->agg.let_values);
    bson_init(&p->agg.err_info);
    mfi_agg *a = &p->agg;
    a->env = o->env;
    a->allow_disk_use = o->allow_disk_use;
    p->deadline.at_us = o->deadline_us;
    a->deadline = &p->deadline;
    a->explain = o->explain;
    a->change_streams = o->change_streams;
    a->group_max_bytes = (size_t)(o->group_max_bytes > 0 ? o->group_max_bytes
                                                         : MF_AGG_DEFAULT_MEMORY_LIMIT);
    a->sort_max_bytes = (size_t)(o->sort_max_bytes > 0 ? o->sort_max_bytes
                                                       : MF_AGG_DEFAULT_MEMORY_LIMIT);
    a->bucket_auto_max_bytes = (size_t)(o->bucket_auto_max_bytes > 0 ? o->bucket_auto_max_bytes
                                                                     : MF_AGG_DEFAULT_MEMORY_LIMIT);
    a->window_max_bytes = (size_t)(o->window_max_bytes > 0 ? o->window_max_bytes
                                                           : MF_AGG_DEFAULT_MEMORY_LIMIT);
    a->vars.now_ms = o->now_ms;
    a->vars.has_now = true;
    a->vars.let = &a->let_values;
    a->collator = mf_collator_ref(o->collation);
    a->vars.coll = a->collator;
    if (!(a->db = bson_strdup(o->db)) || (o->coll && !(a->coll = bson_strdup(o->coll))) ||
        (o->tmpdir && !(a->tmpdir = bson_strdup(o->tmpdir)))) {
        rc = oom(err);
        goto fail;
    }
    if (o->hint) {
        mf_bsonx_append_iter(&p->hint_doc, "h", 1, o->hint);
        bson_iter_init(&p->hint, &p->hint_doc);
        bson_iter_next(&p->hint);
        p->has_hint = true;
    }
    if (o->let && (rc = eval_let(a, o->let, err)) != 0)
        goto fail;

    source_stage *src = mfi_stage_new(&p->stages, &source_ops, sizeof *src, NULL, a, err);
    if (!src) {
        rc = MF_InternalError;
        goto fail;
    }
    src->p = p;
    p->has_read = o->coll != NULL;

    if ((rc = parse_stages(p, stages, o->coll != NULL, err)) != 0)
        goto fail;
    if (push && p->has_read && (rc = push_down(p, err)) != 0)
        goto fail;
    for (size_t i = 1; i < p->stages.n; i++)
        p->stages.v[i]->src = p->stages.v[i - 1];
    settle_meta(p);
    /* a command's pipeline is analysed as it is prepared, before it runs
     * (a sub-pipeline's when it first reads: open_read) */
    if (push && p->meta_missing) {
        rc = mf_meta_unavailable(p->meta_missing, err);
        goto fail;
    }
    *out = p;
    return 0;
fail:
    mf_pipeline_free(p);
    return rc;
}

int mf_pipeline_parse(const bson_t *stages, const mf_agg_opts *o, mf_pipeline **out,
                      mf_error *err)
{
    return parse_with(stages, o, true, out, err);
}

/* After the read is open: a pushed $sort the read provides passes through. */
static void settle_sort(mf_pipeline *p)
{
    if (p->stages.n > 1 && p->stages.v[1]->ops == &sort_ops && p->sorted)
        ((sort_stage *)p->stages.v[1])->pushed = true;
}

int mf_pipeline_prepare(mf_pipeline *p, mf_error *err)
{
    if (p->opened)
        return 0;
    int rc = open_read(p, err);
    if (rc == 0)
        settle_sort(p);
    return rc;
}

int mf_pipeline_next(mf_pipeline *p, bson_t *out, bool *eof, mf_error *err)
{
    if (!bson_empty(&p->agg.err_info))
        bson_reinit(&p->agg.err_info);
    if (!p->opened) {
        int rc = open_read(p, err);
        if (rc)
            return rc;
        settle_sort(p);
    }
    mfi_stage *last = p->stages.v[p->stages.n - 1];
    int64_t t0 = p->agg.explain ? mf_clock_mono_us() : 0;
    int rc = last->ops->next(last, out, eof, err);
    if (p->agg.explain)
        last->time_us += mf_clock_mono_us() - t0;
    if (rc == 0 && !*eof)
        last->nreturned++;
    return rc;
}

int mf_pipeline_explain(mf_pipeline *p, int exec, bson_t *out, mf_error *err)
{
    int rc = 0;
    if (!p->opened) {
        if ((rc = open_read(p, err)) != 0)
            return rc;
        settle_sort(p);
    }
    if (exec) {
        for (;;) {
            bson_t d;
            bool eof;
            if ((rc = mf_pipeline_next(p, &d, &eof, err)) != 0)
                return rc;
            if (eof)
                break;
            bson_destroy(&d);
        }
    }
    /* The stages left after pushdown, a pushed $sort that the read
     * provides not counted. */
    size_t first = 1;
    if (p->stages.n > 1 && p->stages.v[1]->ops == &sort_ops &&
        ((sort_stage *)p->stages.v[1])->pushed)
        first = 2;
    if (first >= p->stages.n && p->source && !p->has_input) {
        /* everything went into the read: find's explain shape */
        return p->source->explain(p->source, exec, out, err);
    }
    bson_t arr, st, body;
    BSON_APPEND_ARRAY_BEGIN(out, "stages", &arr);
    uint32_t i = 0;
    char key[16];
    if (p->source) {
        snprintf(key, sizeof key, "%u", i++);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &st);
        BSON_APPEND_DOCUMENT_BEGIN(&st, p->has_input ? "$teeConsumer" : "$cursor", &body);
        rc = p->source->explain(p->source, exec, &body, err);
        bson_append_document_end(&st, &body);
        if (exec) {
            BSON_APPEND_INT64(&st, "nReturned", p->stages.v[0]->nreturned);
            BSON_APPEND_INT64(&st, "executionTimeMillisEstimate", p->stages.v[0]->time_us / 1000);
        }
        bson_append_document_end(&arr, &st);
    }
    for (size_t k = first; rc == 0 && k < p->stages.n; k++) {
        mfi_stage *s = p->stages.v[k];
        snprintf(key, sizeof key, "%u", i++);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &st);
        if (s->ops->explain && s->spec_type == BSON_TYPE_DOCUMENT) {
            BSON_APPEND_DOCUMENT_BEGIN(&st, s->ops->name, &body);
            s->ops->explain(s, &body);
            if (bson_empty(&body)) {
                bson_iter_t v;
                bson_iter_init(&v, &s->spec);
                bson_iter_next(&v);
                bson_t sub;
                uint32_t l;
                const uint8_t *d;
                bson_iter_document(&v, &l, &d);
                bson_init_static(&sub, d, l);
                bson_concat(&body, &sub);
            }
            bson_append_document_end(&st, &body);
        } else if (s->spec_type != BSON_TYPE_EOD) {
            bson_iter_t v;
            bson_iter_init(&v, &s->spec);
            bson_iter_next(&v);
            mf_bsonx_append_value(&st, s->ops->name, -1, bson_iter_value(&v));
        } else {
            BSON_APPEND_DOCUMENT_BEGIN(&st, s->ops->name, &body);
            bson_append_document_end(&st, &body);
        }
        if (exec) {
            BSON_APPEND_INT64(&st, "nReturned", s->nreturned);
            BSON_APPEND_INT64(&st, "executionTimeMillisEstimate", s->time_us / 1000);
        }
        bson_append_document_end(&arr, &st);
    }
    bson_append_array_end(out, &arr);
    return rc;
}

/* ======================================================= sub-pipelines
 * (pipeline_int.h; used by stage_lookup.c and stage_facet.c) */

/* `stages` with {$match: filter} put first, or second after a leading
 * $documents, into `out` (initialised here). */
static void prepend_match(const bson_t *stages, const bson_t *filter, bson_t *out)
{
    bson_iter_t it, probe;
    uint32_t i = 0;
    char key[16];
    bool placed = false;
    bson_init(out);
    bson_iter_init(&it, stages);
    while (bson_iter_next(&it)) {
        bool documents = i == 0 && BSON_ITER_HOLDS_DOCUMENT(&it) &&
                         bson_iter_recurse(&it, &probe) && bson_iter_next(&probe) &&
                         strcmp(bson_iter_key(&probe), "$documents") == 0;
        if (!placed && !documents) {
            bson_t m;
            snprintf(key, sizeof key, "%u", i++);
            BSON_APPEND_DOCUMENT_BEGIN(out, key, &m);
            BSON_APPEND_DOCUMENT(&m, "$match", filter);
            bson_append_document_end(out, &m);
            placed = true;
        }
        snprintf(key, sizeof key, "%u", i++);
        mf_bsonx_append_iter(out, key, -1, &it);
    }
    if (!placed) {
        bson_t m;
        snprintf(key, sizeof key, "%u", i);
        BSON_APPEND_DOCUMENT_BEGIN(out, key, &m);
        BSON_APPEND_DOCUMENT(&m, "$match", filter);
        bson_append_document_end(out, &m);
    }
}

/* The sub-pipeline's mfi_agg: the parent's context, its own variables. */
static int sub_agg_init(mfi_agg *a, const mfi_agg *parent, const mfi_sub_opts *o, mf_error *err)
{
    bson_init(&a->let_values);
    bson_init(&a->err_info);
    a->env = parent->env;
    a->group_max_bytes = parent->group_max_bytes;
    a->sort_max_bytes = parent->sort_max_bytes;
    a->bucket_auto_max_bytes = parent->bucket_auto_max_bytes;
    a->window_max_bytes = parent->window_max_bytes;
    a->allow_disk_use = parent->allow_disk_use;
    a->deadline = parent->deadline;
    a->explain = parent->explain;
    a->vars.now_ms = parent->vars.now_ms;
    a->vars.has_now = parent->vars.has_now;
    a->vars.let = &a->let_values;
    a->collator = mf_collator_ref(parent->collator); /* the aggregate's, for every sub-pipeline */
    a->vars.coll = a->collator;
    a->depth = parent->depth + (o->nested ? 1 : 0);
    /* fed by the parent ($facet): what its documents may carry */
    a->meta_available = o->parent_meta ? parent->meta_available : 0;
    bson_concat(&a->let_values, o->let_values ? o->let_values : &parent->let_values);
    if (!(a->db = bson_strdup(parent->db)) || (o->coll && !(a->coll = bson_strdup(o->coll))) ||
        (parent->tmpdir && !(a->tmpdir = bson_strdup(parent->tmpdir))))
        return oom(err);
    size_t n = parent->nlet + o->nnames;
    if (n && !(a->let_names = calloc(n, sizeof *a->let_names)))
        return oom(err);
    for (size_t i = 0; i < n; i++) {
        const char *name = i < parent->nlet ? parent->let_names[i] : o->names[i - parent->nlet];
        if (!(a->let_names[i] = bson_strdup(name)))
            return oom(err);
        a->nlet++;
    }
    return 0;
}

/* A sub-pipeline's collection when it is a view (env->resolve_view): its
 * views' stages, then the $match of `o->filter`, then `stages`, into
 * `out`; `*o2` reads the collection the views end at.  The view's
 * collation must be the operation's (mongod's 167). */
static int sub_view(mfi_agg *parent, const bson_t *stages, const mfi_sub_opts *o,
                    mfi_sub_opts *o2, char *base, size_t cap, bson_t *out, bool *is_view,
                    mf_error *err)
{
    bson_t vstages = BSON_INITIALIZER, vcoll = BSON_INITIALIZER;
    *is_view = false;
    int rc = parent->env->resolve_view(parent->env->arg, parent->db, o->coll, base, cap,
                                       &vstages, &vcoll, is_view, err);
    if (rc == 0 && *is_view) {
        mf_collator *mine = NULL;
        rc = mf_collator_new_doc(&vcoll, &mine, err);
        const mf_collator *ours = parent->collator;
        if (rc == 0 && !(mine && ours ? mf_collator_equal(mine, ours) : !mine && !ours))
            rc = mf_error_set(err, MF_OptionNotSupportedOnView,
                              "Cannot override a view's default collation%s.%s", parent->db,
                              o->coll);
        mf_collator_unref(mine);
    }
    if (rc == 0 && *is_view) {
        bson_iter_t it;
        uint32_t i = 0;
        char key[16];
        bson_init(out);
        for (int part = 0; part < 2; part++) {
            if (part == 1 && o->filter) {
                bson_t m;
                snprintf(key, sizeof key, "%u", i++);
                BSON_APPEND_DOCUMENT_BEGIN(out, key, &m);
                BSON_APPEND_DOCUMENT(&m, "$match", o->filter);
                bson_append_document_end(out, &m);
            }
            bson_iter_init(&it, part ? stages : &vstages);
            while (bson_iter_next(&it)) {
                snprintf(key, sizeof key, "%u", i++);
                mf_bsonx_append_iter(out, key, -1, &it);
            }
        }
        *o2 = *o;
        o2->filter = NULL;
        o2->coll = strchr(base, '.') + 1;
    }
    bson_destroy(&vstages);
    bson_destroy(&vcoll);
    return rc;
}

int mfi_pipeline_sub(mfi_agg *parent, const bson_t *stages, const mfi_sub_opts *o,
                     mf_pipeline **out, mf_error *err)
{
    int rc = 0;
    bson_t with_match = BSON_INITIALIZER, through_view = BSON_INITIALIZER;
    mfi_sub_opts o2;
    char base[512];
    bool is_view = false;
    *out = NULL;
    if (o->coll && parent->env && parent->env->resolve_view) {
        bson_destroy(&through_view);
        if ((rc = sub_view(parent, stages, o, &o2, base, sizeof base, &through_view, &is_view,
                           err)) != 0) {
            if (o->input)
                o->input->free(o->input);
            return rc;
        }
        if (is_view) {
            stages = &through_view;
            o = &o2;
        } else {
            bson_init(&through_view);
        }
    }
    mf_pipeline *p = calloc(1, sizeof *p);
    if (!p) {
        if (o->input)
            o->input->free(o->input);
        return oom(err);
    }
    bson_init(&p->filter);
    bson_init(&p->sort);
    bson_init(&p->hint_doc);
    p->source = o->input;
    p->has_input = o->input != NULL;
    p->has_read = o->coll != NULL;
    if ((rc = sub_agg_init(&p->agg, parent, o, err)) != 0)
        goto fail;
    if (p->agg.depth > MFI_AGG_MAX_DEPTH) {
        rc = mf_error_set(err, MF_MaxSubPipelineDepthExceeded, "Maximum number of nested sub-pipelines exceeded. Limit is %d",
                          MFI_AGG_MAX_DEPTH);
        goto fail;
    }
    source_stage *src = mfi_stage_new(&p->stages, &source_ops, sizeof *src, NULL, &p->agg, err);
    if (!src) {
        rc = MF_InternalError;
        goto fail;
    }
    src->p = p;
    if (o->filter) {
        bson_destroy(&with_match);
        prepend_match(stages, o->filter, &with_match);
        stages = &with_match;
    }
    if ((rc = parse_stages(p, stages, p->has_read || p->has_input, err)) != 0)
        goto fail;
    if (p->has_read && (rc = push_down(p, err)) != 0)
        goto fail;
    for (size_t i = 1; i < p->stages.n; i++)
        p->stages.v[i]->src = p->stages.v[i - 1];
    settle_meta(p);
    bson_destroy(&with_match);
    bson_destroy(&through_view);
    *out = p;
    return 0;
fail:
    bson_destroy(&with_match);
    bson_destroy(&through_view);
    mf_pipeline_free(p);
    return rc;
}

const char *mfi_pipeline_find_stage(const bson_t *stages, const char *const *refused)
{
    bson_iter_t it, st;
    bson_iter_init(&it, stages);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &st) || !bson_iter_next(&st))
            continue;
        for (size_t i = 0; refused[i]; i++)
            if (strcmp(bson_iter_key(&st), refused[i]) == 0)
                return refused[i];
    }
    return NULL;
}

/* =====================================================================
 * Outside a pipeline: the expression context of other commands
 * (expr_ctx.c), and update pipelines run over one document at a time
 * (cmd_update.c).  Kept apart from the stages above.
 * ===================================================================== */

int mfi_agg_init_let(mfi_agg *a, const bson_t *let, int64_t now_ms, const mf_collator *coll,
                     mf_error *err)
{
    bson_init(&a->let_values);
    a->collator = mf_collator_ref(coll);
    a->vars.now_ms = now_ms;
    a->vars.has_now = true;
    a->vars.let = &a->let_values;
    a->vars.coll = a->collator;
    return let ? eval_let(a, let, err) : 0;
}

void mfi_agg_release(mfi_agg *a)
{
    agg_clear(a);
}

/* The source of an update pipeline: the one document it is run over. */
typedef struct {
    mf_agg_source base;
    const bson_t *doc; /* borrowed for one mf_pipeline_run_one; NULL once read */
} one_source;

static int one_next(mf_agg_source *s, bson_t *out, bool *eof, mf_error *err)
{
    one_source *o = (one_source *)s;
    (void)err;
    *eof = o->doc == NULL;
    if (o->doc)
        bson_copy_to(o->doc, out);
    o->doc = NULL;
    return 0;
}

static int one_explain(mf_agg_source *s, int exec, bson_t *out, mf_error *err)
{
    (void)s, (void)exec, (void)out, (void)err;
    return 0;
}

static void one_free(mf_agg_source *s)
{
    free(s);
}

/* Give `p` the one-document source (freeing `p` when out of memory). */
static int with_one_source(mf_pipeline *p, mf_pipeline **out, mf_error *err)
{
    one_source *src = calloc(1, sizeof *src);
    if (!src) {
        mf_pipeline_free(p);
        return oom(err);
    }
    src->base.next = one_next;
    src->base.explain = one_explain;
    src->base.free = one_free;
    p->source = &src->base;
    p->opened = true;
    *out = p;
    return 0;
}

/* An update pipeline reads no collection. */
static int no_open(void *arg, const mf_agg_read *r, mf_agg_source **out, bool *sorted,
                   mf_error *err)
{
    (void)arg, (void)r, (void)out, (void)sorted;
    return mf_error_set(err, MF_InvalidOptions, "an update pipeline reads no collection");
}

static const mf_agg_env no_env = {NULL, no_open};

/* The stages mongod allows within an update (isAllowedWithinUpdatePipeline). */
static bool update_stage_ok(const char *name)
{
    static const char *const ok[] = {"$addFields", "$project", "$replaceRoot",
                                     "$replaceWith", "$set", "$unset"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(name, ok[i]) == 0)
            return true;
    return false;
}

int mf_pipeline_parse_update(const bson_t *stages, const mf_agg_opts *opts,
                             const bson_t *constants, mf_pipeline **out, mf_error *err)
{
    mf_agg_opts o = *opts;
    bson_t let = BSON_INITIALIZER;
    mf_pipeline *p = NULL;
    *out = NULL;
    /* The constants (`c`) are variables whose values are taken as they are. */
    if (opts->let)
        bson_concat(&let, opts->let);
    bson_iter_t it;
    if (constants && bson_iter_init(&it, constants)) {
        while (bson_iter_next(&it)) {
            bson_t lit;
            bson_append_document_begin(&let, bson_iter_key(&it), -1, &lit);
            mf_bsonx_append_iter(&lit, "$literal", -1, &it);
            bson_append_document_end(&let, &lit);
        }
    }
    o.let = opts->let || constants ? &let : NULL;
    o.coll = opts->coll ? opts->coll : ""; /* documents come from the source */
    o.env = &no_env;
    o.hint = NULL;
    o.explain = false;
    int rc = mf_pipeline_parse(stages, &o, &p, err);
    bson_destroy(&let);
    if (rc)
        return rc;
    /* mongod checks the stages once parsed.  Leading $match stages are in
     * the read's filter by now: the first stage tells. */
    const char *bad = NULL;
    bson_iter_t first, name;
    if (bson_iter_init(&first, stages) && bson_iter_next(&first) &&
        BSON_ITER_HOLDS_DOCUMENT(&first) && bson_iter_recurse(&first, &name) &&
        bson_iter_next(&name) && strcmp(bson_iter_key(&name), "$match") == 0)
        bad = "$match";
    for (size_t i = 1; !bad && i < p->stages.n; i++)
        if (!update_stage_ok(p->stages.v[i]->ops->name))
            bad = p->stages.v[i]->ops->name;
    if (bad) {
        mf_pipeline_free(p);
        return mf_error_set(err, MF_InvalidOptions,
                            "%s is not allowed to be used within an update", bad);
    }
    return with_one_source(p, out, err);
}

int mf_pipeline_run_one(mf_pipeline *p, const bson_t *doc, bson_t *out, mf_error *err)
{
    one_source *src = (one_source *)p->source;
    bool eof;
    src->doc = doc;
    int rc = mf_pipeline_next(p, out, &eof, err);
    src->doc = NULL;
    if (rc == 0 && eof)
        rc = mf_error_set(err, MF_InternalError, "an update pipeline returned no document");
    return rc;
}

/* The stages mongod allows after $changeStream. */
static bool event_stage_ok(const char *name)
{
    static const char *const ok[] = {"$match",      "$project",    "$addFields",
                                     "$set",        "$unset",      "$replaceRoot",
                                     "$replaceWith", "$redact"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(name, ok[i]) == 0)
            return true;
    return false;
}

int mf_pipeline_parse_events(const bson_t *stages, const mf_agg_opts *opts, mf_pipeline **out,
                             mf_error *err)
{
    bson_iter_t it, st;
    *out = NULL;
    /* the names first, as mongod's lite parse */
    bson_iter_init(&it, stages);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &st) || !bson_iter_next(&st))
            continue; /* the parse says what is wrong */
        const char *name = bson_iter_key(&st);
        if (strcmp(name, "$changeStream") == 0)
            return mf_error_set(err, 40602, "$changeStream is only valid as the first stage in a "
                                            "pipeline");
        if (find_stage(name) && !event_stage_ok(name))
            return mf_error_set(err, MF_IllegalOperation,
                                "%s is not permitted in a $changeStream pipeline", name);
    }
    mf_agg_opts o = *opts;
    o.coll = opts->coll ? opts->coll : ""; /* documents come from the source */
    o.env = &no_env;
    o.hint = NULL;
    o.explain = false;
    mf_pipeline *p = NULL;
    int rc = parse_with(stages, &o, false, &p, err);
    if (rc)
        return rc;
    return with_one_source(p, out, err);
}

int mf_pipeline_run_event(mf_pipeline *p, const bson_t *event, bson_t *out, bool *kept,
                          mf_error *err)
{
    one_source *src = (one_source *)p->source;
    bool eof;
    src->doc = event;
    int rc = mf_pipeline_next(p, out, &eof, err);
    *kept = rc == 0 && !eof;
    src->doc = NULL;
    return rc;
}

void mfi_next_array_doc(bson_iter_t *it, bson_t *out, bool *eof)
{
    uint32_t len;
    const uint8_t *data;
    bson_t d;
    if (!bson_iter_next(it) || !BSON_ITER_HOLDS_DOCUMENT(it))
        return;
    bson_iter_document(it, &len, &data);
    bson_init_static(&d, data, len);
    bson_init(out);
    bson_concat(out, &d);
    *eof = false;
}
