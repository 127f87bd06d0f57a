/*
 * geohash.c -- geohash.h: cells, the converter, mongod's planar shape
 * tests, the region coverer and sets of cells.
 *
 * The coverer (mongod's R2RegionCoverer::getCovering), in its phases:
 *
 *   1. the whole square is the first candidate; a candidate is dropped
 *      when the region is disjoint from its (widened) box, and is
 *      terminal when the region contains that box or it is at the
 *      finest level;
 *   2. a non-terminal candidate's children (its four quarters) are made
 *      candidates at once; with none left it is dropped, with all four
 *      terminal it is itself a result, else it is queued with the
 *      priority -((level * 16 + children) * 16 + terminal children);
 *   3. the queue's top is expanded (its children added as in 2) while the
 *      results, the queue and its children stay within max_cells, or it
 *      has one child; otherwise it becomes a result.
 *
 * Ties in the queue are broken as mongod's std::priority_queue breaks
 * them -- libstdc++'s binary heap, whose sift-up and sift-down are
 * reproduced here step for step (heap_push, heap_pop) -- because which of
 * two equal candidates is expanded first decides which cells make the
 * covering.  Candidates live in one growing pool, referred to by index.
 */
#include "geohash.h"
#include "../bsonx/bsonx.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- cells */

static uint64_t bit64(unsigned i) /* the i-th most significant bit */
{
    return (uint64_t)1 << (63 - i);
}

/* The top 2 * bits bits (allX[bits] | allY[bits] in mongod). */
static uint64_t used_mask(unsigned bits)
{
    return bits == 0 ? 0 : ~(uint64_t)0 << (64 - 2 * bits);
}

/* allX[bits] / allY[bits]: the used x (or y) bits. */
static uint64_t axis_mask(unsigned bits, bool y)
{
    uint64_t m = 0;
    for (unsigned i = 0; i < bits; i++)
        m |= bit64(2 * i + (y ? 1 : 0));
    return m;
}

static mfi_ghash ghash_xy(uint32_t x, uint32_t y, unsigned bits)
{
    mfi_ghash g = {0, bits};
    for (unsigned i = 0; i < bits; i++) {
        if (x & (UINT32_C(1) << (31 - i)))
            g.h |= bit64(2 * i);
        if (y & (UINT32_C(1) << (31 - i)))
            g.h |= bit64(2 * i + 1);
    }
    return g;
}

static void ghash_unxy(mfi_ghash g, uint32_t *x, uint32_t *y)
{
    *x = *y = 0;
    for (unsigned i = 0; i < 32; i++) {
        if (g.h & bit64(2 * i))
            *x |= UINT32_C(1) << (31 - i);
        if (g.h & bit64(2 * i + 1))
            *y |= UINT32_C(1) << (31 - i);
    }
}

mfi_ghash mfi_ghash_parent(mfi_ghash h, unsigned bits)
{
    return (mfi_ghash){h.h & used_mask(bits), bits};
}

uint64_t mfi_ghash_max(mfi_ghash h)
{
    return h.h | ~used_mask(h.bits);
}

void mfi_ghash_bytes(uint64_t h, uint8_t out[8])
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(h >> (56 - 8 * i));
}

/* mongod's GeoHash::operator<: by hash (unsigned), then level. */
static int ghash_cmp(const void *a, const void *b)
{
    const mfi_ghash *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    return (x->bits > y->bits) - (x->bits < y->bits);
}

/* Whether `outer` contains `inner` (mongod's GeoHash::contains). */
static bool ghash_contains(mfi_ghash outer, mfi_ghash inner)
{
    return outer.bits <= inner.bits && (inner.h & used_mask(outer.bits)) == outer.h;
}

/* ------------------------------------------------------------ converter */

static double deg2rad(double d)
{
    return d * (M_PI / 180.0);
}

static double from_hash_scale(const mfi_ghconv *c, uint32_t in)
{
    return (double)in / c->scaling + c->min;
}

/* static_cast<unsigned>(double) as mongod's x86-64 build computes it: a
 * 64-bit truncation whose low half is kept. */
static uint32_t to_unsigned(double v)
{
    return v < 9.2e18 ? (uint32_t)(uint64_t)(int64_t)v : 0;
}

static uint32_t to_hash_scale(const mfi_ghconv *c, double in)
{
    if (in == c->max)
        in -= c->error / 2; /* so max does not alias with min */
    in -= c->min;
    return to_unsigned(in * c->scaling);
}

mfi_ghash mfi_ghash_point(const mfi_ghconv *c, double x, double y)
{
    return ghash_xy(to_hash_scale(c, x), to_hash_scale(c, y), (unsigned)c->bits);
}

double mfi_ghconv_edge(const mfi_ghconv *c, unsigned level)
{
    return ldexp(c->max - c->min, -(int)level);
}

mfi_r2box mfi_ghash_box(const mfi_ghconv *c, mfi_ghash h)
{
    if (h.bits == 0)
        return (mfi_r2box){c->min, c->min, c->max, c->max};
    uint32_t x, y;
    ghash_unxy(h, &x, &y);
    double size = mfi_ghconv_edge(c, h.bits), e = c->error_unhash_box;
    double lx = from_hash_scale(c, x), ly = from_hash_scale(c, y);
    return (mfi_r2box){lx - e, ly - e, lx + size + e, ly + size + e};
}

/* An option of the spec as FieldParser::extractNumber reads it: an int
 * through numberInt (a double truncated, out of range or NaN as x86's
 * INT_MIN; a long's low 32 bits; a decimal rounded), a double through
 * numberDouble. */
static bool option(const bson_t *spec, const char *name, bson_iter_t *it)
{
    return bson_iter_init_find(it, spec, name);
}

static int32_t number_int(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: return bson_iter_int32(it);
    case BSON_TYPE_INT64: return (int32_t)(uint32_t)(uint64_t)bson_iter_int64(it);
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        return d > -2147483649.0 && d < 2147483648.0 ? (int32_t)d : INT32_MIN;
    }
    case BSON_TYPE_DECIMAL128: {
        mf_dec d;
        bson_iter_decimal128(it, &d);
        return mf_dec_to_int32(d, MF_DEC_HALF_EVEN, NULL);
    }
    default: return 0;
    }
}

double mfi_geo_number(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: return bson_iter_int32(it);
    case BSON_TYPE_INT64: return (double)bson_iter_int64(it);
    case BSON_TYPE_DOUBLE: return bson_iter_double(it);
    case BSON_TYPE_DECIMAL128: {
        mf_dec d;
        bson_iter_decimal128(it, &d);
        return mf_dec_to_double(d, NULL);
    }
    default: return 0;
    }
}

int mfi_ghconv_init(mfi_ghconv *c, const bson_t *spec, mf_error *err)
{
    bson_iter_t it;
    memset(c, 0, sizeof *c);
    c->bits = option(spec, "bits", &it) ? number_int(&it) : 26;
    c->max = option(spec, "max", &it) ? mfi_geo_number(&it) : 180.0;
    c->min = option(spec, "min", &it) ? mfi_geo_number(&it) : -180.0;
    if (c->bits < 1 || c->bits > 32)
        return mf_error_set(err, MF_InvalidOptions,
                            "bits for hash must be > 0 and <= 32, but %d bits were specified",
                            c->bits);
    if (!(c->min < c->max) || isinf(c->min) || isinf(c->max))
        return mf_error_set(err, MF_InvalidOptions,
                            "region for hash must be valid and have positive area, but [%g, %g] "
                            "was specified",
                            c->min, c->max);
    c->scaling = 4294967296.0 / (c->max - c->min);
    if (!(c->scaling > 0) || isinf(c->scaling))
        return mf_error_set(err, MF_InvalidOptions, "range [%g, %g] is too small.", c->min,
                            c->max);
    /* GeoHashConverter::init: the distance from cell (0, 0) to (1, 1) at
     * the index's level, plus a thousandth of a unit cell */
    uint32_t one = UINT32_C(1) << (32 - c->bits);
    double dx = from_hash_scale(c, one) - from_hash_scale(c, 0);
    c->error = sqrt(dx * dx + dx * dx) + 0.001 / c->scaling;
    c->error_sphere = deg2rad(c->error);
    c->error_unhash_box = fmax(fabs(c->min), fabs(c->max)) * (0.5 * DBL_EPSILON) * 8;
    if (!(c->max - c->min >= c->error / 2))
        return mf_error_set(err, 4799400, "Invalid GeoHashConverter parameters");
    return 0;
}

size_t mfi_ghash_vertex_neighbors(const mfi_ghconv *c, mfi_ghash h, unsigned level,
                                  mfi_ghash out[4])
{
    (void)c;
    mfi_ghash parent = mfi_ghash_parent(h, level);
    size_t n = 0;
    out[n++] = parent;
    if (level == 0)
        return n;
    uint32_t px, py;
    ghash_unxy(parent, &px, &py);
    unsigned pos = (unsigned)(h.h >> (64 - 2 * (level + 1))) & 3u; /* x bit, then y bit */
    uint32_t step = UINT32_C(1) << (32 - level);
    uint64_t ax = axis_mask(level, false), ay = axis_mask(level, true);
    bool min_x = (parent.h & ax) == 0, max_x = (parent.h & ax) == ax;
    bool min_y = (parent.h & ay) == 0, max_y = (parent.h & ay) == ay;
    bool right = pos & 2u, top = pos & 1u;
    if (!right && !min_x)
        out[n++] = ghash_xy(px - step, py, level);
    else if (right && !max_x)
        out[n++] = ghash_xy(px + step, py, level);
    if (!top && !min_y)
        out[n++] = ghash_xy(px, py - step, level);
    else if (top && !max_y)
        out[n++] = ghash_xy(px, py + step, level);
    if (!right && !top && !min_x && !min_y)
        out[n++] = ghash_xy(px - step, py - step, level);
    else if (!right && top && !min_x && !max_y)
        out[n++] = ghash_xy(px - step, py + step, level);
    else if (right && !top && !max_x && !min_y)
        out[n++] = ghash_xy(px + step, py - step, level);
    else if (right && top && !max_x && !max_y)
        out[n++] = ghash_xy(px + step, py + step, level);
    qsort(out, n, sizeof *out, ghash_cmp);
    return n;
}

/* ------------------------------------------------- mongod's plane tests */

typedef struct pt {
    double x, y;
} pt;

static bool between(double lo, double hi, double v)
{
    return v >= lo && v <= hi;
}

static bool box_intersects(const mfi_r2box *a, const mfi_r2box *b)
{
    bool ix = between(a->min_x, a->max_x, b->min_x) || between(a->min_x, a->max_x, b->max_x) ||
              between(b->min_x, b->max_x, a->min_x);
    bool iy = between(a->min_y, a->max_y, b->min_y) || between(a->min_y, a->max_y, b->max_y) ||
              between(b->min_y, b->max_y, a->min_y);
    return ix && iy;
}

static bool box_inside(const mfi_r2box *b, pt p)
{
    return between(b->min_x, b->max_x, p.x) && between(b->min_y, b->max_y, p.y);
}

static bool box_contains(const mfi_r2box *a, const mfi_r2box *b)
{
    return box_inside(a, (pt){b->min_x, b->min_y}) && box_inside(a, (pt){b->max_x, b->max_y});
}

/* mongod's distanceCompare: < 0 nearer than radius, 0 on it, > 0 beyond. */
static double distance_compare(pt p1, pt p2, double radius)
{
    double a = p2.x - p1.x, b = p2.y - p1.y;
    if (a == 0)
        return p2.y > p1.y ? p2.y - (p1.y + radius) : p1.y - (p2.y + radius);
    if (b == 0)
        return p2.x > p1.x ? p2.x - (p1.x + radius) : p1.x - (p2.x + radius);
    return sqrt(a * a + b * b) - radius;
}

bool mfi_r2_annulus_contains(double cx, double cy, double inner, double outer, double x,
                             double y)
{
    pt c = {cx, cy}, p = {x, y};
    return distance_compare(c, p, inner) >= 0 && distance_compare(c, p, outer) <= 0;
}

static bool circle_contains_box(pt c, double r, const mfi_r2box *b, bool boundary)
{
    double ll = distance_compare(c, (pt){b->min_x, b->min_y}, r);
    double ur = distance_compare(c, (pt){b->max_x, b->max_y}, r);
    double ul = distance_compare(c, (pt){b->min_x, b->max_y}, r);
    double lr = distance_compare(c, (pt){b->max_x, b->min_y}, r);
    if (boundary)
        return ll <= 0 && ur <= 0 && ul <= 0 && lr <= 0;
    return ll < 0 && ur < 0 && ul < 0 && lr < 0;
}

static bool circle_intersects_box(pt c, double r, const mfi_r2box *b, bool boundary)
{
    if (r == 0.0 && !boundary)
        return false;
    double dx = fabs(c.x - (b->min_x + b->max_x) / 2), dy = fabs(c.y - (b->min_y + b->max_y) / 2);
    double w = (b->max_x - b->min_x) / 2, h = (b->max_y - b->min_y) / 2;
    if (boundary) {
        if ((dx <= w + r && dy <= h) || (dx <= w && dy <= h + r))
            return true;
    } else if ((dx < w + r && dy < h) || (dx < w && dy < h + r)) {
        return true;
    }
    double cmp = distance_compare((pt){dx, dy}, (pt){w, h}, r);
    return cmp < 0 || (cmp == 0 && boundary);
}

static pt vertex(const mfi_r2region *r, size_t i)
{
    return (pt){r->xy[2 * i], r->xy[2 * i + 1]};
}

/* mongod's Polygon::contains(p, 0) > 0: ray crossing, vertices and
 * horizontal edges inside. */
static bool polygon_contains(const mfi_r2region *r, pt p)
{
    int counter = 0;
    pt p1 = vertex(r, 0);
    for (size_t i = 1; i <= r->n; i++) {
        pt p2 = vertex(r, i % r->n);
        if ((p.y == p1.y && p.x == p1.x) || (p.y == p2.y && p.x == p2.x))
            return true;
        if (p1.y == p2.y && p.y == p1.y && p.x >= fmin(p1.x, p2.x) && p.x <= fmax(p1.x, p2.x))
            return true;
        if (p.y > fmin(p1.y, p2.y) && p.y <= fmax(p1.y, p2.y) && p.x <= fmax(p1.x, p2.x) &&
            p1.y != p2.y) {
            double xinters = (p.y - p1.y) * (p2.x - p1.x) / (p2.y - p1.y) + p1.x;
            if (p1.x == p2.x && p.x == p1.x)
                return true;
            if (p1.x == p2.x || p.x <= xinters)
                counter++;
        }
        p1 = p2;
    }
    return counter % 2 == 1;
}

static double dot(pt a, pt b)
{
    return a.x * b.x + a.y * b.y;
}

static pt sub(pt a, pt b)
{
    return (pt){a.x - b.x, a.y - b.y};
}

static pt ortho(pt a)
{
    return (pt){-a.y, a.x};
}

/* mongod's linesIntersect: whether segments AB and CD meet. */
static bool lines_intersect(pt a, pt b, pt c, pt d)
{
    pt nab = ortho(sub(b, a));
    double ac = dot(nab, sub(c, a)), ad = dot(nab, sub(d, a));
    if (ac * ad > 0)
        return false;
    if (ac == 0 && ad == 0)
        return dot(sub(c, a), sub(c, b)) <= 0 || dot(sub(d, a), sub(d, b)) <= 0;
    pt ncd = ortho(sub(d, c));
    return dot(ncd, sub(a, c)) * dot(ncd, sub(b, c)) <= 0;
}

static bool line_meets_box(pt a, pt b, const mfi_r2box *x)
{
    pt mn = {x->min_x, x->min_y}, mx = {x->max_x, x->max_y};
    pt ul = {x->min_x, x->max_y}, lr = {x->max_x, x->min_y};
    return lines_intersect(a, b, ul, mn) || lines_intersect(a, b, mn, lr) ||
           lines_intersect(a, b, lr, mx) || lines_intersect(a, b, mx, ul);
}

/* mongod's polygonContainsBox: every corner inside, no edge across. */
static bool polygon_contains_box(const mfi_r2region *r, const mfi_r2box *b)
{
    if (!polygon_contains(r, (pt){b->min_x, b->min_y}) ||
        !polygon_contains(r, (pt){b->max_x, b->max_y}) ||
        !polygon_contains(r, (pt){b->min_x, b->max_y}) ||
        !polygon_contains(r, (pt){b->max_x, b->min_y}))
        return false;
    for (size_t i = 0; i + 1 < r->n; i++)
        if (line_meets_box(vertex(r, i), vertex(r, i + 1), b))
            return false;
    return !line_meets_box(vertex(r, r->n - 1), vertex(r, 0), b);
}

static bool region_disjoint(const mfi_r2region *r, const mfi_r2box *b)
{
    pt c = {r->cx, r->cy};
    if (r->kind == MFI_R2_ANNULUS)
        return !circle_intersects_box(c, r->outer, b, true) ||
               circle_contains_box(c, r->inner, b, false);
    return !box_intersects(&r->box, b);
}

static bool region_contains(const mfi_r2region *r, const mfi_r2box *b)
{
    pt c = {r->cx, r->cy};
    switch (r->kind) {
    case MFI_R2_BOX: return box_contains(&r->box, b);
    case MFI_R2_CIRCLE: return circle_contains_box(c, r->outer, b, true);
    case MFI_R2_POLYGON: return polygon_contains_box(r, b);
    case MFI_R2_ANNULUS:
        return circle_contains_box(c, r->outer, b, true) &&
               !circle_intersects_box(c, r->inner, b, false);
    case MFI_R2_BOUNDS: break;
    }
    return false;
}

/* -------------------------------------------------------------- coverer */

typedef struct cand {
    mfi_ghash cell;
    bool terminal;
    int nchildren;
    size_t children[4]; /* pool indexes */
} cand;

typedef struct qent {
    int priority;
    size_t cand;
} qent;

typedef struct coverer {
    const mfi_ghconv *c;
    const mfi_r2region *r;
    int max_cells;
    cand *pool;
    size_t npool, cappool;
    qent *q;
    size_t nq, capq;
    mfi_ghash *res;
    size_t nres, capres;
    bool oom;
} coverer;

#define NO_CAND SIZE_MAX

static bool grow(void **v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need)
        c *= 2;
    void *p = realloc(*v, c * size);
    if (!p)
        return false;
    *v = p;
    *cap = c;
    return true;
}

/* libstdc++'s __push_heap: the value at `hole` rises while its parent is
 * less (comp is a.priority < b.priority: a max-heap). */
static void heap_sift_up(qent *q, size_t hole, size_t top, qent value)
{
    while (hole > top) {
        size_t parent = (hole - 1) / 2;
        if (!(q[parent].priority < value.priority))
            break;
        q[hole] = q[parent];
        hole = parent;
    }
    q[hole] = value;
}

static bool heap_push(coverer *cv, qent e)
{
    if (!grow((void **)&cv->q, &cv->capq, cv->nq + 1, sizeof *cv->q))
        return false;
    cv->q[cv->nq++] = e;
    heap_sift_up(cv->q, cv->nq - 1, 0, e);
    return true;
}

/* libstdc++'s pop_heap then pop_back: the top is moved to the end (and
 * removed), the old last element sifted down from the root by
 * __adjust_heap (down to a leaf by the greater child, then up). */
static qent heap_pop(coverer *cv)
{
    qent *q = cv->q, top = q[0];
    size_t len = cv->nq - 1; /* the heap without the moved top */
    if (len > 0) {
        qent value = q[len];
        q[len] = top;
        size_t hole = 0, child = 0;
        while (child < (len - 1) / 2) {
            child = 2 * (child + 1);
            if (q[child].priority < q[child - 1].priority)
                child--;
            q[hole] = q[child];
            hole = child;
        }
        if ((len & 1) == 0 && child == (len - 2) / 2) {
            child = 2 * (child + 1);
            q[hole] = q[child - 1];
            hole = child - 1;
        }
        heap_sift_up(q, hole, 0, value);
    }
    cv->nq--;
    return top;
}

static bool add_result(coverer *cv, mfi_ghash cell)
{
    if (!grow((void **)&cv->res, &cv->capres, cv->nres + 1, sizeof *cv->res))
        return false;
    cv->res[cv->nres++] = cell;
    return true;
}

/* mongod's newCandidate: NO_CAND when disjoint (or out of memory). */
static size_t new_cand(coverer *cv, mfi_ghash cell)
{
    mfi_r2box b = mfi_ghash_box(cv->c, cell);
    if (region_disjoint(cv->r, &b))
        return NO_CAND;
    if (!grow((void **)&cv->pool, &cv->cappool, cv->npool + 1, sizeof *cv->pool)) {
        cv->oom = true;
        return NO_CAND;
    }
    cand *k = &cv->pool[cv->npool];
    memset(k, 0, sizeof *k);
    k->cell = cell;
    k->terminal = cell.bits >= (unsigned)cv->c->bits || region_contains(cv->r, &b);
    return cv->npool++;
}

static int expand_children(coverer *cv, size_t ci)
{
    mfi_ghash kids[4];
    mfi_ghash cell = cv->pool[ci].cell;
    int nterm = 0;
    kids[0] = (mfi_ghash){cell.h, cell.bits + 1};
    kids[1] = (mfi_ghash){cell.h | bit64(cell.bits * 2 + 1), cell.bits + 1}; /* (0, 1) */
    kids[2] = (mfi_ghash){cell.h | bit64(cell.bits * 2), cell.bits + 1};     /* (1, 0) */
    kids[3] = (mfi_ghash){kids[1].h | kids[2].h, cell.bits + 1};
    for (int i = 0; i < 4; i++) {
        size_t k = new_cand(cv, kids[i]);
        if (k == NO_CAND)
            continue;
        cand *p = &cv->pool[ci]; /* the pool may have moved */
        p->children[p->nchildren++] = k;
        nterm += cv->pool[k].terminal;
    }
    return nterm;
}

/* mongod's addCandidate. */
static void add_cand(coverer *cv, size_t ci)
{
    if (ci == NO_CAND || cv->oom)
        return;
    if (cv->pool[ci].terminal) {
        cv->oom |= !add_result(cv, cv->pool[ci].cell);
        return;
    }
    int nterm = expand_children(cv, ci);
    cand *k = &cv->pool[ci];
    if (k->nchildren == 0)
        return;
    if (nterm == 4) { /* all four: the parent instead (min level is 0) */
        k->terminal = true;
        add_cand(cv, ci);
        return;
    }
    int priority = -((((int)k->cell.bits << 4) + k->nchildren) << 4) - nterm;
    cv->oom |= !heap_push(cv, (qent){priority, ci});
}

int mfi_r2_cover(const mfi_ghconv *c, const mfi_r2region *r, int max_cells, mfi_ghash **out,
                 size_t *n)
{
    coverer cv = {.c = c, .r = r, .max_cells = max_cells};
    *out = NULL;
    *n = 0;
    add_cand(&cv, new_cand(&cv, (mfi_ghash){0, 0}));
    while (cv.nq > 0 && !cv.oom) {
        size_t ci = heap_pop(&cv).cand;
        cand k = cv.pool[ci];
        if (k.nchildren == 1 || (int)cv.nres + (int)cv.nq + k.nchildren <= cv.max_cells) {
            for (int i = 0; i < k.nchildren; i++)
                add_cand(&cv, k.children[i]);
        } else {
            cv.pool[ci].terminal = true;
            add_cand(&cv, ci);
        }
    }
    free(cv.pool);
    free(cv.q);
    if (cv.oom) {
        free(cv.res);
        return -1;
    }
    if (cv.nres > 1) /* (an empty covering has no array: qsort takes none) */
        qsort(cv.res, cv.nres, sizeof *cv.res, ghash_cmp);
    *out = cv.res;
    *n = cv.nres;
    return 0;
}

/* -------------------------------------------------------- sets of cells */

static bool set_push(mfi_cellset *s, mfi_ghash g)
{
    if (!grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v))
        return false;
    s->v[s->n++] = g;
    return true;
}

/* mongod's R2CellUnion::normalize, in place. */
static void set_normalize(mfi_cellset *s)
{
    size_t w = 0;
    if (s->n > 1)
        qsort(s->v, s->n, sizeof *s->v, ghash_cmp);
    for (size_t i = 0; i < s->n; i++) {
        mfi_ghash id = s->v[i];
        if (w > 0 && ghash_contains(s->v[w - 1], id))
            continue;
        while (w >= 3) { /* four siblings: their parent */
            mfi_ghash a = s->v[w - 3], b = s->v[w - 2], c = s->v[w - 1];
            if ((a.h ^ b.h ^ c.h) != id.h || id.bits == 0)
                break;
            mfi_ghash parent = mfi_ghash_parent(id, id.bits - 1);
            if (a.bits != id.bits || b.bits != id.bits || c.bits != id.bits ||
                mfi_ghash_parent(a, id.bits - 1).h != parent.h ||
                mfi_ghash_parent(b, id.bits - 1).h != parent.h ||
                mfi_ghash_parent(c, id.bits - 1).h != parent.h)
                break;
            w -= 3;
            id = parent;
        }
        s->v[w++] = id;
    }
    s->n = w;
}

/* Whether a cell of `s` contains `g` / meets it (s normalized). */
static bool set_contains(const mfi_cellset *s, mfi_ghash g)
{
    for (size_t i = 0; i < s->n; i++) /* small sets: a near search's rings */
        if (ghash_contains(s->v[i], g))
            return true;
    return false;
}

static bool set_meets(const mfi_cellset *s, mfi_ghash g)
{
    for (size_t i = 0; i < s->n; i++)
        if (ghash_contains(s->v[i], g) || ghash_contains(g, s->v[i]))
            return true;
    return false;
}

static bool difference(mfi_ghash g, const mfi_cellset *seen, mfi_cellset *out)
{
    if (!set_meets(seen, g))
        return set_push(out, g);
    if (set_contains(seen, g) || g.bits == 32)
        return true;
    mfi_ghash kids[4] = {{g.h, g.bits + 1},
                         {g.h | bit64(g.bits * 2 + 1), g.bits + 1},
                         {g.h | bit64(g.bits * 2), g.bits + 1},
                         {g.h | bit64(g.bits * 2) | bit64(g.bits * 2 + 1), g.bits + 1}};
    for (int i = 0; i < 4; i++)
        if (!difference(kids[i], seen, out))
            return false;
    return true;
}

int mfi_cellset_difference(const mfi_ghash *cells, size_t n, const mfi_cellset *seen,
                           mfi_cellset *out)
{
    mfi_cellset norm = {0};
    *out = (mfi_cellset){0};
    if (mfi_cellset_add(&norm, cells, n) != 0)
        return -1;
    for (size_t i = 0; i < norm.n; i++)
        if (!difference(norm.v[i], seen, out)) {
            mfi_cellset_free(&norm);
            mfi_cellset_free(out);
            return -1;
        }
    mfi_cellset_free(&norm);
    return 0;
}

int mfi_cellset_add(mfi_cellset *s, const mfi_ghash *cells, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!set_push(s, cells[i]))
            return -1;
    set_normalize(s);
    return 0;
}

void mfi_cellset_free(mfi_cellset *s)
{
    free(s->v);
    *s = (mfi_cellset){0};
}
