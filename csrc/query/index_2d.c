/*
 * index_2d.c -- the "2d" kind (index_type.h): mongod 7.0's TwoDAccessMethod,
 * ExpressionKeysPrivate::get2DKeys and the 2d bounds of
 * IndexBoundsBuilder (ExpressionMapping::cover2d), over geohash.h.
 *
 * Key pattern.  One "2d" field, first ({loc: "2d"}, {loc: "2d", a: 1,
 * b: -1}); a second is 16800 "can't have 2 geo fields", one after
 * another field 16801 "2d has to be first in index".  Options "bits"
 * (1..32, default 26), "min" and "max" (default -180, 180): their checks
 * and InvalidOptions messages are GeoHashConverter::createFromDoc's
 * (geohash.c).  All are refused as mongod's access method refuses them,
 * after the spec's own checks, undecorated.  A 2d index may be unique,
 * sparse (no effect) or partial; the spec is stored as given.
 *
 * Keys.  The 2d field's values are found along its path, arrays on the
 * way expanded but not the last one; each value that is a non-empty
 * document or array is a location, or -- when its first element is not a
 * number -- a list of them; an empty one is skipped, anything else
 * ignored.  A location's first two elements are its x and y:
 *
 *   ONE ELEMENT                     13068 geo field only has 1 element
 *   X OR Y NOT A NUMBER             13026 geo values must be 'legacy
 *                                         coordinate pairs' for 2d indexes
 *   OUTSIDE [min, max] ON AN AXIS   13027 point not in interval of
 *                                         [ min, max ]
 *   AN ELEMENT OF A LIST THAT IS    16804 location object expected,
 *   NOT A DOCUMENT OR ARRAY               location array not in correct format
 *
 * each message followed by " :: caused by :: " and the document (but
 * 16804's).  Each location is one key:
 *
 *   FIELD        ENCODING (bsonx keyenc)
 *   the 2d one   BinData subtype 128, the cell's hash as 8 bytes, most
 *                significant first (geohash.h): keys sort by hash
 *   the others   each field's value: its values along its path, arrays
 *                expanded, as a sorted set -- none: null, one: itself,
 *                more: an array of them (not one key each) -- encoded
 *                without the index's collation, as mongod appends them
 *
 * A document with no location has no key (the index is sparse on its 2d
 * field).  mongod keeps no multikey paths for a 2d index: a document
 * with more than one key marks the index multikey, every field of it.
 *
 * Bounds.  Only a $geoWithin (or $within) whose shape has a flat region
 * -- $box, $polygon, $center, $centerSphere -- bounds the 2d field
 * (QueryPlannerIXSelect: $geoIntersects and $geometry do not): the shape
 * covered by at most 16 cells up to the index's bits
 * (internalGeoPredicateQuery2DMaxCoveringCells), each the interval from
 * its hash to its greatest hash, never exact.  The other fields take no
 * bounds (all their keys are scanned), as mongod's QueryPlannerAccess
 * gives a 2d index's trailing fields none: their keys hold arrays whole,
 * not in a form bounds could read, so their conditions are the filter's.
 */
#include "index_type.h"
#include "geo.h"
#include "geohash.h"
#include "keygen.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* internalGeoPredicateQuery2DMaxCoveringCells and
 * internalGeoNearQuery2DMaxCoveringCells, mongod's defaults. */
#define PREDICATE_CELLS 16
#define NEAR_CELLS 16

#define SUBTYPE_GEOHASH 0x80 /* bdtCustom */

static const mfi_ghconv *conv_of(const mf_index_desc *d)
{
    return d->kind;
}

/* ----------------------------------------------------------- the spec */

/* What TwoDAccessMethod's constructor (parseTwoDParams, then
 * GeoHashConverter::createFromDoc) refuses, undecorated. */
static int twod_check_spec(const bson_t *spec, const bson_t *key, bool unique, mf_error *err)
{
    bson_iter_t it;
    bool geo = false, other = false;
    mfi_ghconv c;
    (void)unique;
    if (bson_iter_init(&it, key))
        while (bson_iter_next(&it)) {
            if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "2d") == 0) {
                if (geo)
                    return mf_error_set(err, 16800, "can't have 2 geo fields");
                if (other)
                    return mf_error_set(err, 16801, "2d has to be first in index");
                geo = true;
            } else {
                other = true;
            }
        }
    return mfi_ghconv_init(&c, spec, err);
}

static int twod_desc_init(mf_index_desc *d, const bson_t *spec, mf_error *err)
{
    mfi_ghconv *c = malloc(sizeof *c);
    if (!c)
        return mf_error_oom(err);
    int rc = mfi_ghconv_init(c, spec, err);
    if (rc) {
        free(c);
        return rc;
    }
    d->kind = c;
    return 0;
}

static void twod_desc_clear(mf_index_desc *d)
{
    free(d->kind);
    d->kind = NULL;
}

/* ------------------------------------------------- values along a path */

/* libbson declares bson_iter_t 128-byte aligned but 80 bytes long, so an
 * array of them misaligns every other one: each is wrapped, the wrapper
 * padded to its alignment. */
typedef struct elem {
    bson_iter_t it;
} elem;

typedef struct elems {
    elem *v;
    size_t n, cap;
    bool oom;
} elems;

static void elems_push(elems *e, const bson_iter_t *it)
{
    if (e->n == e->cap) {
        /* (realloc's blocks are not aligned enough for the wrapper) */
        size_t cap = e->cap ? e->cap * 2 : 8;
        void *v;
        if (posix_memalign(&v, _Alignof(elem), cap * sizeof *e->v) != 0) {
            e->oom = true;
            return;
        }
        if (e->n)
            memcpy(v, e->v, e->n * sizeof *e->v);
        free(e->v);
        e->v = v;
        e->cap = cap;
    }
    e->v[e->n++].it = *it;
}

static bool is_number(const bson_iter_t *it)
{
    bson_type_t t = bson_iter_type(it);
    return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
           t == BSON_TYPE_DECIMAL128;
}

typedef struct collect {
    elems *out;
    bool expand_last;
} collect;

static int collect_value(void *arg, const bson_iter_t *v)
{
    collect *c = arg;
    bson_iter_t kids;
    if (!c->expand_last || !BSON_ITER_HOLDS_ARRAY(v)) {
        elems_push(c->out, v);
    } else if (bson_iter_recurse(v, &kids)) {
        while (bson_iter_next(&kids))
            elems_push(c->out, &kids);
    }
    return 0;
}

/* mongod's dotted_path_support::extractAllElementsAlongPath (keygen.c's
 * walk), the last value, an array, expanded when `expand_last`. */
static void along_path(const bson_t *doc, const char *path, bool expand_last, elems *out)
{
    collect c = {out, expand_last};
    bool through = false;
    mfi_path_elements(doc, path, collect_value, &c, &through);
}

/* ------------------------------------------------------------- keys */

/* One key generation. */
typedef struct gen {
    const mf_index_desc *d;
    const bson_t *doc;
    mf_keyset *out;
    mf_buf suffix;      /* the other fields, encoded */
    bson_t others;      /* their values, named by their paths */
    mf_error *err;
} gen;

/* The values of the other fields (1..n-1), each its set of values along
 * its path (mongod's BSONElementSet: sorted, equal values once, the first
 * kept), as in the key: into g->suffix and g->others (initialised by the
 * caller). */
static int other_fields(gen *g)
{
    const mf_index_desc *d = g->d;
    for (size_t i = 1; i < d->nfields; i++) {
        elems e = {0};
        size_t n = 0;
        along_path(g->doc, d->paths[i], true, &e);
        if (e.oom) {
            free(e.v);
            return mf_error_oom(g->err);
        }
        for (size_t r = 0; r < e.n; r++) { /* insertion into the sorted set */
            size_t at = n;
            int cmp = 1;
            while (at > 0 && (cmp = mf_bsonx_compare_values(&e.v[at - 1].it, &e.v[r].it)) > 0)
                at--;
            if (at > 0 && cmp == 0)
                continue;
            elem v = e.v[r];
            memmove(&e.v[at + 1], &e.v[at], (n - at) * sizeof *e.v);
            e.v[at] = v;
            n++;
        }
        bool ok = true;
        if (n == 0) {
            bson_iter_t null_it;
            mfi_keygen_null(&null_it);
            ok = mf_bsonx_append_iter(&g->others, d->paths[i], -1, &null_it);
        } else if (n == 1) {
            ok = mf_bsonx_append_iter(&g->others, d->paths[i], -1, &e.v[0].it);
        } else {
            bson_t arr;
            char num[24];
            ok = bson_append_array_begin(&g->others, d->paths[i], -1, &arr);
            for (size_t k = 0; ok && k < n; k++) {
                snprintf(num, sizeof num, "%zu", k);
                ok = mf_bsonx_append_iter(&arr, num, -1, &e.v[k].it);
            }
            ok = ok && bson_append_array_end(&g->others, &arr);
        }
        free(e.v);
        if (!ok)
            return mf_error_oom(g->err);
    }
    bson_iter_t it;
    if (bson_iter_init(&it, &g->others))
        for (size_t i = 1; bson_iter_next(&it); i++)
            if (mf_bsonx_key_append(&g->suffix, &it, g->d->desc[i]) != 0)
                return mf_error_oom(g->err);
    return 0;
}

/* A key's BinData value for hash `h` (8 bytes, most significant first),
 * into `tmp` (initialised here), iterated by `it`. */
static bool hash_value(const uint8_t bytes[8], bson_t *tmp, bson_iter_t *it)
{
    bson_init(tmp);
    return bson_append_binary(tmp, "", 0, (bson_subtype_t)SUBTYPE_GEOHASH, bytes, 8) &&
           bson_iter_init(it, tmp) && bson_iter_next(it);
}

static bool hash_iter(uint64_t h, bson_t *tmp, bson_iter_t *it)
{
    uint8_t bytes[8];
    mfi_ghash_bytes(h, bytes);
    return hash_value(bytes, tmp, it);
}

/* The key of the location with hash `h`. */
static int emit(gen *g, mfi_ghash h)
{
    bson_t tmp;
    bson_iter_t v;
    mf_buf *key;
    int rc = 0;
    if (mfi_keyset_add(g->out, &key) != 0)
        return mf_error_oom(g->err);
    if (!hash_iter(h.h, &tmp, &v) || mf_bsonx_key_append(key, &v, false) != 0 ||
        mf_buf_append(key, g->suffix.data, g->suffix.len) != 0)
        rc = mf_error_oom(g->err);
    bson_destroy(&tmp);
    return rc;
}

/* " :: caused by :: <doc>", as mongod's causedBy(obj.toString()). */
static void caused_by(const bson_t *doc, char *out, size_t cap)
{
    int n = snprintf(out, cap, " :: caused by :: ");
    mf_bsonx_to_string(doc, out + n, cap - (size_t)n);
}

/* GeoHashConverter::hash(locObj, &doc). */
static int location(gen *g, const bson_t *loc)
{
    const mfi_ghconv *c = conv_of(g->d);
    char why[MF_ERRMSG_MAX / 2];
    bson_iter_t x, y;
    if (!bson_iter_init(&x, loc) || !bson_iter_next(&x))
        return 0; /* empty: skipped before */
    y = x;
    if (!bson_iter_next(&y)) {
        caused_by(g->doc, why, sizeof why);
        return mf_error_set(g->err, 13068, "geo field only has 1 element%s", why);
    }
    if (!is_number(&x) || !is_number(&y)) {
        caused_by(g->doc, why, sizeof why);
        return mf_error_set(g->err, 13026,
                            "geo values must be 'legacy coordinate pairs' for 2d indexes%s", why);
    }
    double px = mfi_geo_number(&x), py = mfi_geo_number(&y);
    if (!(px <= c->max && px >= c->min && py <= c->max && py >= c->min)) {
        caused_by(g->doc, why, sizeof why);
        return mf_error_set(g->err, 13027, "point not in interval of [ %g, %g ]%s", c->min,
                            c->max, why);
    }
    return emit(g, mfi_ghash_point(c, px, py));
}

/* get2DKeys' loop over the 2d field's values. */
static int locations(gen *g)
{
    elems e = {0};
    int rc = 0;
    along_path(g->doc, g->d->paths[0], false, &e);
    if (e.oom)
        rc = mf_error_oom(g->err);
    for (size_t i = 0; rc == 0 && i < e.n; i++) {
        bson_t embed, loc;
        bson_iter_t it;
        if (!mf_bsonx_container_view(&e.v[i].it, &embed) || bson_empty(&embed) || !bson_iter_init(&it, &embed))
            continue;
        bson_iter_next(&it);
        if (is_number(&it)) { /* one location */
            rc = location(g, &embed);
            continue;
        }
        do {
            if (!mf_bsonx_container_view(&it, &loc)) {
                rc = mf_error_set(g->err, 16804, "location object expected, location array not "
                                                 "in correct format");
                break;
            }
            if (!bson_empty(&loc))
                rc = location(g, &loc);
        } while (rc == 0 && bson_iter_next(&it));
    }
    free(e.v);
    return rc;
}

static int twod_keys(const mf_index_desc *d, const bson_t *doc, mf_keyset *out,
                     uint32_t *multikey, mf_error *err)
{
    gen g = {.d = d, .doc = doc, .out = out, .err = err};
    mf_keyset_clear(out);
    *multikey = 0;
    if (d->partial && !mf_matcher_match(d->partial, doc))
        return 0;
    bson_init(&g.others);
    int rc = other_fields(&g);
    if (rc == 0)
        rc = locations(&g);
    bson_destroy(&g.others);
    mf_buf_free(&g.suffix);
    if (rc) {
        mf_keyset_clear(out);
        return rc;
    }
    mfi_keyset_unique(out);
    if ((rc = mfi_keys_fit(d, out, err)) != 0)
        return rc;
    if (out->n > 1) /* mongod: more than one key, and no paths kept */
        *multikey = d->nfields >= 32 ? UINT32_MAX : (UINT32_C(1) << d->nfields) - 1;
    return 0;
}

/* returnKey's values: the hash from the entry itself (the last 8 bytes of
 * its first value's encoding, keyenc's BinData), the other fields' from
 * the document, when they are the entry's.  No converter needed: a scan's
 * descriptor has none. */
static int twod_key_values(const mf_index_desc *d, const bson_t *doc, const uint8_t *entry,
                           size_t entry_len, bson_t *out, mf_error *err)
{
    gen g = {.d = d, .doc = doc, .err = err};
    size_t n = mf_bsonx_key_value_len(entry, entry_len, false);
    int rc = 0;
    if (n < 8)
        return 0;
    bson_init(&g.others);
    if ((rc = other_fields(&g)) == 0) {
        size_t rest = entry_len - n;
        bool same = (rest == g.suffix.len || rest == g.suffix.len + 8) &&
                    (g.suffix.len == 0 || memcmp(entry + n, g.suffix.data, g.suffix.len) == 0);
        bson_t tmp;
        bson_iter_t v;
        if (same && (!hash_value(entry + n - 8, &tmp, &v) ||
                     !mf_bsonx_append_iter(out, d->paths[0], -1, &v) ||
                     !bson_concat(out, &g.others)))
            rc = mf_error_oom(err);
        if (same)
            bson_destroy(&tmp);
    }
    bson_destroy(&g.others);
    mf_buf_free(&g.suffix);
    return rc;
}

/* ----------------------------------------------------------- bounds */

/* The cells `cells` (n, sorted, disjoint) as intervals of BinData keys
 * into `out` (initialised by the caller). */
static int cells_oil(const mfi_ghash *cells, size_t n, mfi_oil *out)
{
    for (size_t i = 0; i < n; i++) {
        bson_t a = BSON_INITIALIZER, b = BSON_INITIALIZER;
        bson_iter_t lo, hi;
        bool ok = hash_iter(cells[i].h, &a, &lo) && hash_iter(mfi_ghash_max(cells[i]), &b, &hi) &&
                  mfi_oil_push_range(out, &lo, true, &hi, true) == 0;
        bson_destroy(&a);
        bson_destroy(&b);
        if (!ok) {
            mfi_oil_free(out);
            return -1;
        }
    }
    return 0;
}

/* The region of a query's flat shape (mongod's R2BoxRegion). */
static bool flat_region(const mfi_geo_flat *f, mfi_r2region *r)
{
    *r = (mfi_r2region){.box = {f->min_x, f->min_y, f->max_x, f->max_y}};
    switch (f->kind) {
    case MFI_GEO_FLAT_BOX: r->kind = MFI_R2_BOX; return true;
    case MFI_GEO_FLAT_POLYGON:
        r->kind = MFI_R2_POLYGON;
        r->xy = f->xy;
        r->n = f->n;
        return true;
    case MFI_GEO_FLAT_CIRCLE:
        r->kind = MFI_R2_CIRCLE;
        r->cx = f->x, r->cy = f->y, r->outer = f->radius;
        return true;
    case MFI_GEO_FLAT_CAP: r->kind = MFI_R2_BOUNDS; return true;
    case MFI_GEO_FLAT_NONE: break;
    }
    return false;
}

static int twod_bounds(const mf_index_desc *d, size_t field, const mfi_pred *pr, mfi_oil *out,
                       bool *usable, bool *exact)
{
    mfi_geo_flat f;
    mfi_r2region r;
    mfi_ghash *cells;
    size_t n;
    *out = (mfi_oil){0};
    *usable = false;
    *exact = false;
    if (field != 0 || !pr->geo) /* QueryPlannerAccess: no bounds past the 2d field */
        return 0;
    mfi_geo_query_flat(pr->geo, &f);
    if (!flat_region(&f, &r))
        return 0;
    if (mfi_r2_cover(conv_of(d), &r, PREDICATE_CELLS, &cells, &n) != 0)
        return -1;
    int rc = cells_oil(cells, n, out);
    free(cells);
    *usable = rc == 0;
    return rc;
}

/* ------------------------------------------------------- near searches */

struct mfi_2d_scanned {
    mfi_cellset cells;
};

mfi_2d_scanned *mfi_2d_scanned_new(void)
{
    return calloc(1, sizeof(mfi_2d_scanned));
}

void mfi_2d_scanned_free(mfi_2d_scanned *s)
{
    if (!s)
        return;
    mfi_cellset_free(&s->cells);
    free(s);
}

static double rad2deg(double r)
{
    return r * (180.0 / M_PI);
}

static double deg2rad(double d)
{
    return d * (M_PI / 180.0);
}

/* mongod's computeXScanDistance: the longitude span of `dist` degrees at
 * latitude `y`. */
static double x_scan_distance(double y, double dist)
{
    return dist / fmin(cos(deg2rad(fmin(+89.0, y + dist))), cos(deg2rad(fmax(-89.0, y - dist))));
}

int mfi_2d_ring_bounds(const mf_index_desc *d, const mfi_2d_ring *ring, mfi_2d_scanned *scanned,
                       mfi_oil *out)
{
    mfi_r2region r = {.kind = MFI_R2_ANNULUS, .cx = ring->x, .cy = ring->y};
    mfi_ghash *cells;
    mfi_cellset fresh = {0};
    size_t n;
    *out = (mfi_oil){0};
    if (!ring->sphere) {
        double eps = DBL_EPSILON * (fmax(fabs(ring->x), fabs(ring->y)) + ring->full_outer);
        r.inner = fmax(0.0, ring->inner - eps);
        r.outer = ring->outer + eps;
    } else { /* projectBoundsToTwoDDegrees */
        double outer = rad2deg(ring->outer), inner = rad2deg(ring->inner);
        double e = x_scan_distance(ring->y, outer);
        r.inner = fmax(0.0, inner - e);
        r.outer = outer + e;
    }
    if (mfi_r2_cover(conv_of(d), &r, NEAR_CELLS, &cells, &n) != 0)
        return -1;
    static const mfi_cellset none = {0};
    int rc = mfi_cellset_difference(cells, n, scanned ? &scanned->cells : &none, &fresh);
    free(cells);
    if (rc == 0 && scanned)
        rc = mfi_cellset_add(&scanned->cells, fresh.v, fresh.n);
    if (rc == 0)
        rc = cells_oil(fresh.v, fresh.n, out);
    mfi_cellset_free(&fresh);
    return rc;
}

int mfi_2d_density_bounds(const mf_index_desc *d, double x, double y, unsigned level,
                          mfi_oil *out, mf_error *err)
{
    const mfi_ghconv *c = conv_of(d);
    mfi_ghash near[4];
    *out = (mfi_oil){0};
    if (!(x <= c->max && x >= c->min && y <= c->max && y >= c->min)) {
        bson_t arr = BSON_INITIALIZER, holder = BSON_INITIALIZER;
        bson_iter_t it;
        char s[128] = "";
        BSON_APPEND_DOUBLE(&arr, "0", x);
        BSON_APPEND_DOUBLE(&arr, "1", y);
        if (BSON_APPEND_ARRAY(&holder, "", &arr) && bson_iter_init(&it, &holder) &&
            bson_iter_next(&it))
            mf_bsonx_elem_to_string(&it, false, s, sizeof s);
        bson_destroy(&arr);
        bson_destroy(&holder);
        return mf_error_set(err, 16433, "point not in interval of [ %g, %g ] :: caused by :: %s",
                            c->min, c->max, s);
    }
    mfi_ghash h = mfi_ghash_point(c, x, y);
    size_t n = mfi_ghash_vertex_neighbors(c, h, level < h.bits ? level : h.bits - 1, near);
    return cells_oil(near, n, out) == 0 ? 0 : mf_error_oom(err);
}

void mfi_2d_params_of(const mf_index_desc *d, mfi_2d_params *out)
{
    const mfi_ghconv *c = conv_of(d);
    *out = (mfi_2d_params){.bits = c->bits, .min = c->min, .max = c->max, .error = c->error};
}

double mfi_2d_cell_edge(const mf_index_desc *d, unsigned level)
{
    return mfi_ghconv_edge(conv_of(d), level);
}

const mf_index_type mfi_2d_type = {
    .plugin = "2d",
    .keys = twod_keys,
    .bounds = twod_bounds,
    .check_spec = twod_check_spec,
    .desc_init = twod_desc_init,
    .desc_clear = twod_desc_clear,
    .key_values = twod_key_values,
    .no_multikey_paths = true,
};
