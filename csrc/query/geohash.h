/*
 * geohash.h -- the planar geohash of the "2d" index kind (index_2d.c):
 * mongod 7.0's GeoHash, GeoHashConverter and R2RegionCoverer
 * (src/mongo/db/geo/hash.cpp, r2_region_coverer.cpp, shapes.cpp), read
 * for their arithmetic and rebuilt here, so keys and query bounds are
 * mongod's to the bit.
 *
 * A cell is a square of the index's [min, max) x [min, max) plane: level
 * `bits` (0..32) halves each axis `bits` times.  Its hash interleaves the
 * x and y cell numbers, x first, from the most significant bit down; the
 * bits below 2 * bits are zero:
 *
 *   BIT (63 = most significant)   MEANING
 *   63 - 2i                       x's (31 - i)th bit, i < bits
 *   62 - 2i                       y's (31 - i)th bit, i < bits
 *   below 64 - 2 * bits           0
 *
 * so a cell's descendants are the hashes from the cell's own (its "min")
 * to the cell's with every unused bit set (its "max"), and a cell is
 * found under a level-0 prefix scan in hash order.  The index key is the
 * hash as 8 bytes, most significant first (BinData subtype 128).
 *
 * A coordinate becomes a cell number by scaling [min, max] onto [0, 2^32)
 * and truncating; max itself is moved half an error inside first (so it
 * does not alias with min), as GeoHashConverter does.
 */
#ifndef MF_QUERY_GEOHASH_H
#define MF_QUERY_GEOHASH_H

#include "../util/util.h"

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A cell: its hash (unused bits zero) and level. */
typedef struct mfi_ghash {
    uint64_t h;
    unsigned bits;
} mfi_ghash;

/* An axis-aligned box, min and max inclusive (mongod's Box). */
typedef struct mfi_r2box {
    double min_x, min_y, max_x, max_y;
} mfi_r2box;

/* mongod's GeoHashConverter: an index's parameters and the error margins
 * derived from them. */
typedef struct mfi_ghconv {
    int bits;          /* the level of a point's key, 1..32 */
    double min, max;   /* the indexed square's sides, min < max */
    double scaling;    /* 2^32 / (max - min) */
    double error;      /* the diagonal of a cell of level `bits`, plus a little */
    double error_sphere;     /* `error` in radians */
    double error_unhash_box; /* how much a cell's box is widened */
} mfi_ghconv;

/* The converter of an index spec `spec` (its "bits", "min", "max", or
 * 26, -180, 180), as GeoHashConverter::createFromDoc: InvalidOptions (72)
 * with mongod's messages ("bits for hash must be > 0 and <= 32, but 40
 * bits were specified", "region for hash must be valid and have positive
 * area, but [1, 1] was specified", "range [...] is too small."), 4799400
 * when the error margin exceeds the range.  The options' types are the
 * spec checks' (numbers), assumed here. */
int mfi_ghconv_init(mfi_ghconv *c, const bson_t *spec, mf_error *err);

/* The level-`c->bits` cell of the point (x, y), which must lie in
 * [min, max] on both axes (the caller's check: mongod's 13027). */
mfi_ghash mfi_ghash_point(const mfi_ghconv *c, double x, double y);

/* The cell `h` truncated to level `bits` (<= h.bits). */
mfi_ghash mfi_ghash_parent(mfi_ghash h, unsigned bits);

/* The greatest hash under `h` (its unused bits set): mongod's
 * appendHashMax. */
uint64_t mfi_ghash_max(mfi_ghash h);

/* `h` as an index key value: 8 bytes, most significant first. */
void mfi_ghash_bytes(uint64_t h, uint8_t out[8]);

/* The box of cell `h`, widened by the converter's error (the whole
 * square, unwidened, for level 0): mongod's unhashToBoxCovering. */
mfi_r2box mfi_ghash_box(const mfi_ghconv *c, mfi_ghash h);

/* The side of a cell of level `level`: mongod's sizeEdge. */
double mfi_ghconv_edge(const mfi_ghconv *c, unsigned level);

/* The cell of level `level` (< h.bits) that holds `h`, and the up to 3 of
 * its neighbours closest to `h` (mongod's appendVertexNeighbors), into
 * `out` (room for 4), sorted by hash; their number is returned. */
size_t mfi_ghash_vertex_neighbors(const mfi_ghconv *c, mfi_ghash h, unsigned level,
                                  mfi_ghash out[4]);

/* ------------------------------------------------------------ regions */

/* What the coverer covers: a $geoWithin shape as mongod's
 * GeometryContainer::R2BoxRegion reads it (every shape's bounding box for
 * disjointness; containment exact for a $box, a $center and a $polygon,
 * never claimed for a $centerSphere), or a $near search's annulus (mongod's
 * R2Annulus). */
typedef enum mfi_r2kind {
    MFI_R2_BOX,     /* box */
    MFI_R2_CIRCLE,  /* flat disc: cx, cy, outer */
    MFI_R2_POLYGON, /* xy, n */
    MFI_R2_BOUNDS,  /* box only, never contains: a $centerSphere's bounds */
    MFI_R2_ANNULUS  /* cx, cy, inner, outer */
} mfi_r2kind;

typedef struct mfi_r2region {
    mfi_r2kind kind;
    mfi_r2box box;       /* the bounds (not read for an annulus) */
    double cx, cy, inner, outer;
    const double *xy;    /* a polygon's vertices x0, y0, x1, y1, ... (borrowed) */
    size_t n;            /* how many vertices, >= 3 */
} mfi_r2region;

/* The covering of `r` by at most about `max_cells` cells of levels up to
 * c->bits, as mongod's R2RegionCoverer (the same candidates, in the same
 * priority queue order, so the same cells), sorted by hash and
 * disjoint: into `*out` (malloc'd, the caller frees) and `*n`.  0, or -1
 * when out of memory. */
int mfi_r2_cover(const mfi_ghconv *c, const mfi_r2region *r, int max_cells, mfi_ghash **out,
                 size_t *n);

/* Whether (x, y) lies in the annulus of centre (cx, cy) and radii
 * inner..outer, both included, as mongod's R2Annulus::contains decides
 * it (distanceCompare's arithmetic). */
bool mfi_r2_annulus_contains(double cx, double cy, double inner, double outer, double x,
                             double y);

/* A number's value as a double (mongod's BSONElement::number(); a
 * decimal128 rounded, anything else 0): 2d's options and coordinates. */
double mfi_geo_number(const bson_iter_t *it);

/* ----------------------------------------------------- sets of cells */

/* A union of cells (mongod's R2CellUnion): sorted, no cell inside
 * another, four siblings merged into their parent. */
typedef struct mfi_cellset {
    mfi_ghash *v;
    size_t n, cap;
} mfi_cellset;

/* `cells` (n) normalized, then minus every cell of `seen`: the parts of
 * each cell `seen` does not cover, subdivided as needed (mongod's
 * R2CellUnion init then getDifference), into `out` (initialised here;
 * in hash order, not normalized again).  0 or -1 (out of memory). */
int mfi_cellset_difference(const mfi_ghash *cells, size_t n, const mfi_cellset *seen,
                           mfi_cellset *out);
/* Add `n` cells to `s` and normalize it.  0 or -1. */
int mfi_cellset_add(mfi_cellset *s, const mfi_ghash *cells, size_t n);
void mfi_cellset_free(mfi_cellset *s);

#endif /* MF_QUERY_GEOHASH_H */
