/* Cases for csrc/query/geohash.h alone, under ASan and UBSan: mongod's
 * golden keys, the converter's refusals, coverings of random regions
 * (every point a region holds lies in one of its cells; the cells sorted
 * and disjoint) and the difference of cell sets a near search takes.
 * Behaviour against mongod's through the server is tests/test_geo_2d.py's. */
#include "test.h"
#include "../query/geohash.h"

#include <math.h>
#include <stdlib.h>

static bson_t *json(const char *s)
{
    bson_error_t e;
    return bson_new_from_json((const uint8_t *)s, -1, &e);
}

static int conv_json(const char *spec, mfi_ghconv *c, mf_error *err)
{
    bson_t *b = json(spec);
    int rc = b ? mfi_ghconv_init(c, b, err) : -1;
    if (b)
        bson_destroy(b);
    return rc;
}

MFT_CASE(geohash_golden, "/query/geohash/golden_keys")
{
    /* mongod's key generator golden test (two_d_keys.txt), as hex */
    static const struct {
        double x, y;
        uint64_t h;
    } cases[] = {
        {0, 0, 0xC000000000000000ull},
        {5, 10, 0xC01F81F81F81F000ull},
        {-73.97, 40.77, 0x61DA7D795DA54000ull},
        {179.5, 89.5, 0xEFFFCC30FFCC3000ull},
        {-179.99, -89.98999999999999, 0x10000003F30C0000ull},
    };
    mfi_ghconv c;
    mf_error err;
    CHECK_INT(conv_json("{}", &c, &err), 0);
    CHECK_INT(c.bits, 26);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mfi_ghash g = mfi_ghash_point(&c, cases[i].x, cases[i].y);
        CHECK(g.h == cases[i].h);
        CHECK_INT(g.bits, 26);
        CHECK(mfi_ghash_max(g) == (g.h | 0xFFFull));
    }
    uint8_t b[8];
    mfi_ghash_bytes(0xC01F81F81F81F000ull, b);
    CHECK(b[0] == 0xC0 && b[1] == 0x1F && b[7] == 0x00);
}

MFT_CASE(geohash_refusals, "/query/geohash/converter_refusals")
{
    static const struct {
        const char *spec;
        int code;
        const char *msg;
    } cases[] = {
        {"{\"bits\": 0}", MF_InvalidOptions,
         "bits for hash must be > 0 and <= 32, but 0 bits were specified"},
        {"{\"bits\": 32.9}", 0, NULL},
        {"{\"bits\": {\"$numberLong\": \"4294967297\"}}", 0, NULL}, /* its low 32 bits: 1 */
        {"{\"min\": 3, \"max\": 3}", MF_InvalidOptions,
         "region for hash must be valid and have positive area, but [3, 3] was specified"},
        {"{\"min\": 0, \"max\": 1e-320}", MF_InvalidOptions, "range [0, 9.99989e-321] is too small."},
        {"{\"min\": {\"$numberDecimal\": \"-1\"}, \"max\": {\"$numberDecimal\": \"1\"}}", 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mfi_ghconv c;
        mf_error err = {0};
        CHECK_INT(conv_json(cases[i].spec, &c, &err), cases[i].code);
        if (cases[i].msg)
            CHECK_STR(err.msg, cases[i].msg);
    }
}

/* Whether the cell list is sorted and disjoint, and holds (x, y). */
static bool sorted_disjoint(const mfi_ghash *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (mfi_ghash_max(v[i - 1]) >= v[i].h)
            return false;
    return true;
}

static bool holds(const mfi_ghconv *c, const mfi_ghash *v, size_t n, double x, double y)
{
    uint64_t h = mfi_ghash_point(c, x, y).h;
    for (size_t i = 0; i < n; i++)
        if (v[i].h <= h && h <= mfi_ghash_max(v[i]))
            return true;
    return false;
}

static double unit(void)
{
    return rand() / (RAND_MAX + 1.0);
}

MFT_CASE(geohash_cover, "/query/geohash/cover_random_regions")
{
    mfi_ghconv c;
    mf_error err;
    srand(49);
    for (int round = 0; round < 400; round++) {
        char spec[96];
        int bits = 1 + round % 32;
        snprintf(spec, sizeof spec, "{\"bits\": %d, \"min\": -100, \"max\": 100}", bits);
        CHECK_INT(conv_json(spec, &c, &err), 0);
        double xy[2 * 6];
        mfi_r2region r = {.kind = (mfi_r2kind)(round % 5)};
        double cx = unit() * 160 - 80, cy = unit() * 160 - 80, s = unit() * 30;
        r.cx = cx, r.cy = cy, r.inner = s * unit(), r.outer = s;
        r.box = (mfi_r2box){cx - s, cy - s, cx + s, cy + s};
        if (r.kind == MFI_R2_POLYGON) {
            r.n = 3 + (size_t)(round % 4);
            for (size_t i = 0; i < r.n; i++) {
                double a = 2 * M_PI * (double)i / (double)r.n;
                xy[2 * i] = cx + s * cos(a), xy[2 * i + 1] = cy + s * sin(a);
            }
            r.xy = xy;
        }
        mfi_ghash *cells;
        size_t n;
        CHECK_INT(mfi_r2_cover(&c, &r, 16, &cells, &n), 0);
        CHECK(sorted_disjoint(cells, n));
        for (int k = 0; k < 200; k++) { /* points the region holds are covered */
            double a = unit() * 2 * M_PI, d = unit() * s;
            double x = cx + d * cos(a), y = cy + d * sin(a);
            bool inside = r.kind != MFI_R2_ANNULUS || d >= r.inner;
            if (r.kind == MFI_R2_POLYGON)
                inside = d < s * cos(M_PI / (double)r.n) - 1e-9; /* the inscribed disc */
            if (fabs(x) > 100 || fabs(y) > 100) /* outside the index's square */
                continue;
            if (inside && !holds(&c, cells, n, x, y)) {
                free(cells);
                CHECK(!"a point of the region is not covered");
            }
        }
        /* a near search's second ring, less what the first one scanned */
        mfi_cellset seen = {0}, fresh;
        CHECK_INT(mfi_cellset_add(&seen, cells, n), 0);
        CHECK_INT(mfi_cellset_difference(cells, n, &seen, &fresh), 0);
        CHECK_INT(fresh.n, 0);
        mfi_cellset_free(&fresh);
        mfi_ghash whole = {0, 0};
        CHECK_INT(mfi_cellset_difference(&whole, 1, &seen, &fresh), 0);
        CHECK(sorted_disjoint(fresh.v, fresh.n));
        for (size_t i = 0; i < fresh.n; i++) /* nothing scanned twice */
            for (size_t j = 0; j < seen.n; j++)
                CHECK(mfi_ghash_max(fresh.v[i]) < seen.v[j].h ||
                      mfi_ghash_max(seen.v[j]) < fresh.v[i].h);
        mfi_cellset_free(&fresh);
        mfi_cellset_free(&seen);
        free(cells);
    }
}

MFT_CASE(geohash_neighbors, "/query/geohash/vertex_neighbors")
{
    mfi_ghconv c;
    mf_error err;
    mfi_ghash out[4];
    CHECK_INT(conv_json("{}", &c, &err), 0);
    mfi_ghash h = mfi_ghash_point(&c, 10, 10);
    CHECK_INT(mfi_ghash_vertex_neighbors(&c, h, 0, out), 1); /* the whole square */
    CHECK_INT(mfi_ghash_vertex_neighbors(&c, h, 5, out), 4);
    CHECK(sorted_disjoint(out, 4));
    CHECK(out[0].bits == 5 && holds(&c, out, 4, 10, 10));
    h = mfi_ghash_point(&c, -180, -180); /* a corner: no neighbour beyond it */
    CHECK_INT(mfi_ghash_vertex_neighbors(&c, h, 5, out), 1);
}

/* ------------------------------------------- a 2d index's near bounds */

#include "../query/index_type.h"

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* Whether hash `h` lies in an interval of `o` (BinData ends). */
static bool oil_holds(const mfi_oil *o, uint64_t h)
{
    for (size_t i = 0; i < o->n; i++)
        if (be64(o->v[i].lo_v.value.v_binary.data) <= h &&
            h <= be64(o->v[i].hi_v.value.v_binary.data))
            return true;
    return false;
}

static bool oils_disjoint(const mfi_oil *a, const mfi_oil *b)
{
    for (size_t i = 0; i < a->n; i++)
        for (size_t j = 0; j < b->n; j++)
            if (!(be64(a->v[i].hi_v.value.v_binary.data) < be64(b->v[j].lo_v.value.v_binary.data) ||
                  be64(b->v[j].hi_v.value.v_binary.data) < be64(a->v[i].lo_v.value.v_binary.data)))
                return false;
    return true;
}

MFT_CASE(index_2d_near, "/query/index_2d/ring_and_density_bounds")
{
    bson_t *spec = json("{\"v\": 2, \"key\": {\"loc\": \"2d\"}, \"name\": \"loc_2d\", \"bits\": 20}");
    mf_index_desc d;
    mf_error err;
    mfi_ghconv c;
    CHECK(spec != NULL);
    CHECK_INT(mf_index_desc_init(&d, NULL, 1, bson_get_data(spec), spec->len, &err), 0);
    CHECK_INT(mfi_ghconv_init(&c, spec, &err), 0);
    mfi_2d_params p;
    mfi_2d_params_of(&d, &p);
    CHECK(p.bits == 20 && p.min == -180 && p.max == 180 && p.error > 0);
    CHECK(mfi_2d_cell_edge(&d, 1) == 180);
    mfi_2d_scanned *seen = mfi_2d_scanned_new();
    mfi_oil ring1, ring2, ring3;
    mfi_2d_ring r = {.x = 10, .y = 20, .inner = 0, .outer = 1, .full_outer = 8};
    CHECK_INT(mfi_2d_ring_bounds(&d, &r, seen, &ring1), 0);
    r.inner = 1, r.outer = 3;
    CHECK_INT(mfi_2d_ring_bounds(&d, &r, seen, &ring2), 0);
    CHECK(ring1.n > 0 && ring1.n <= 16 && oils_disjoint(&ring1, &ring2));
    srand(2);
    for (int k = 0; k < 2000; k++) { /* both rings' points: in one of the two */
        double a = unit() * 2 * M_PI, dist = unit() * 3;
        uint64_t h = mfi_ghash_point(&c, 10 + dist * cos(a), 20 + dist * sin(a)).h;
        CHECK(oil_holds(&ring1, h) || oil_holds(&ring2, h));
        if (dist <= 1)
            CHECK(oil_holds(&ring1, h));
    }
    r.inner = 0, r.outer = 1; /* again: all scanned */
    CHECK_INT(mfi_2d_ring_bounds(&d, &r, seen, &ring3), 0);
    CHECK_INT(ring3.n, 0);
    mfi_oil_free(&ring3);
    mfi_2d_scanned_free(seen);
    /* $nearSphere: radians, the ring widened in longitude */
    mfi_2d_ring s = {.x = 10, .y = 60, .inner = 0, .outer = 0.02, .sphere = true};
    CHECK_INT(mfi_2d_ring_bounds(&d, &s, NULL, &ring3), 0);
    CHECK(oil_holds(&ring3, mfi_ghash_point(&c, 10 + 2.2, 60).h)); /* 1.15 deg at 60N */
    mfi_oil_free(&ring3);
    mfi_oil_free(&ring1);
    mfi_oil_free(&ring2);
    /* the density estimator's first scan */
    CHECK_INT(mfi_2d_density_bounds(&d, 10, 20, 19, &ring1, &err), 0);
    CHECK(ring1.n == 4 && oil_holds(&ring1, mfi_ghash_point(&c, 10, 20).h));
    mfi_oil_free(&ring1);
    CHECK_INT(mfi_2d_density_bounds(&d, 200, 0, 19, &ring1, &err), 16433);
    CHECK_STR(err.msg, "point not in interval of [ -180, 180 ] :: caused by :: [ 200.0, 0.0 ]");
    mf_index_desc_clear(&d);
    bson_destroy(spec);
}
