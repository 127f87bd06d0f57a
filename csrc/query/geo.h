/*
 * geo.h -- geometry for the geospatial query operators and index kinds
 * (docs/geo.md), as mongod 7.0 has them: GeoJSON and legacy coordinate
 * pairs parsed and validated as its GeoParser and GeometryContainer do,
 * with its messages, and its $geoWithin / $geoIntersects predicates.
 *
 * The geometry is Google's S2 (Debian's libs2-dev), which is C++: the
 * functions here are defined in geo_s2.cc, the one C++ file of query/,
 * and give the C core a C interface.  No C++ exception crosses it (an
 * allocation failure inside is InternalError here, never an abort).
 *
 * Lifetimes: a parsed query (mf_geo_query) owns everything it needs and
 * borrows nothing from the filter it came from; it is immutable once
 * parsed, so one matcher may be shared between threads.
 */
#ifndef MF_QUERY_GEO_H
#define MF_QUERY_GEO_H

#include "../util/util.h"

#include <bson/bson.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mf_geo_query mf_geo_query;

/* Parse a $geoWithin, $within or $geoIntersects condition: `section` is
 * the operator document of its path ({$geoWithin: {$box: ...}}), which
 * holds only that operator, as mongod's GeoExpression::parseFrom reads it.
 * Errors: BadValue with mongod's messages ("unknown geo specifier: ...",
 * "$within not supported with provided geometry: ...", the GeoJSON
 * parser's messages); InternalError when out of memory. */
int mfi_geo_query_parse(const bson_t *section, mf_geo_query **out, mf_error *err);

/* Whether one value `v` (of the predicate's path, an array as a whole or
 * one element of it, as the matcher walks paths) satisfies the query, as
 * mongod's GeoMatchExpression::matchesSingleElement: a value that is not
 * a valid geometry never matches, nor does a missing one (`v` NULL). */
bool mfi_geo_query_matches(const mf_geo_query *q, const bson_iter_t *v);

void mfi_geo_query_free(mf_geo_query *q);

/* Check a $near, $nearSphere or $geoNear condition: `section` is its
 * path's operator document ({$near: [x, y], $maxDistance: d} or {$near:
 * {$geometry: <Point>, $minDistance, $maxDistance}}), as mongod's
 * GeoNearExpression::parseFrom reads it.  0, or mongod's error: BadValue,
 * or its assertion codes (18522, 16893-16896, 34413). */
int mfi_geo_near_check(const bson_t *section, mf_error *err);

/* A $near, $nearSphere or $geoNear condition, parsed as mongod's
 * GeoNearExpression::parseFrom: the centre (longitude/latitude when
 * `sphere`, else flat x/y), $minDistance and $maxDistance as given (the
 * maximum DBL_MAX when none), `near_sphere` for $nearSphere, `sphere`
 * when the centre is on the sphere (a GeoJSON point, or a legacy pair
 * under $nearSphere), `radians` when distances are in radians (a legacy
 * pair under $nearSphere; a GeoJSON centre's are meters), `wrapping`
 * for a GeoJSON centre. */
typedef struct mf_geo_near {
    double x, y;
    double old_x, old_y; /* the centre's coordinates as given (mongod's
                            oldPoint): what a 2d index's search hashes */
    double min_distance, max_distance;
    bool near_sphere, sphere, radians, wrapping;
} mf_geo_near;

/* As mfi_geo_near_check, keeping what it read. */
int mfi_geo_near_parse(const bson_t *section, mf_geo_near *out, mf_error *err);

/* The distance from the centre of `n` to the nearest point of the stored
 * value `v`: in radians on the sphere (0 inside a polygon) when
 * n->sphere, else flat between points (only a point has one).  False
 * when `v` is not such a geometry. */
bool mfi_geo_near_distance(const mf_geo_near *n, const bson_iter_t *v, double *out);

/* The coordinates of the stored value `v` when it is a point, as
 * mongod's GeoParser::parseStoredPoint reads one (a legacy pair or
 * document, a GeoJSON Point): a 2d $near's annulus test. */
bool mfi_geo_stored_point(const bson_iter_t *v, double *x, double *y);

/* Whether the stored value `v` parses as a geometry, as mongod's
 * GeometryContainer::parseFromStorage: 0, or BadValue with mongod's
 * message ("Point must only contain numeric elements, instead got type
 * string", ...).  A 2dsphere index refuses such a value with 16755. */
int mfi_geo_check_stored(const bson_iter_t *v, mf_error *err);

/* ------------------------------------------- the 2dsphere index kind */

/* What a 2dsphere index covers its values with (mongod's
 * S2IndexingParams): non-point shapes between the levels `coarsest` and
 * `finest` in at most about `max_cells` cells; points always at the leaf
 * level (30). */
typedef struct mf_s2_params {
    int coarsest, finest, max_cells;
} mf_s2_params;

/* mongod's defaults for 2dsphereIndexVersion 3: the levels whose average
 * cell edge is closest to 2000 km and to 110 m on an earth of radius
 * 6378.1 km, and 20 cells. */
void mfi_geo_s2_defaults(mf_s2_params *out);

/* The cells of one stored value `v` (an element of the indexed path) for
 * a 2dsphere index, as mongod's S2GetKeysForElement: the value parsed as
 * parseFromStorage, projected onto the sphere and covered.  0 with `*n`
 * cell ids (signed, as the index keys them) in `*cells` (malloc'd, the
 * caller frees it); BadValue with the reason mongod's 16755 message
 * quotes ("can't project geometry into spherical CRS: [ 200, 0 ]", "can't
 * index geometry with strict winding order", a parse error);
 * InternalError when out of memory. */
int mfi_geo_index_cells(const bson_iter_t *v, const mf_s2_params *p, int64_t **cells, size_t *n,
                        mf_error *err);

/* A closed interval of a 2dsphere field's keys (cell ids, signed). */
typedef struct mf_geo_interval {
    int64_t lo, hi;
} mf_geo_interval;

/* The keys of a 2dsphere index (covered per `p`) that a document the
 * query `q` matches may have, as mongod's cover2dsphere and
 * S2CellIdsToIntervalsWithParents: the query region covered between
 * levels 0 and 23 in about 20 cells, each cell as the range of its
 * descendants, and each of its ancestors down to `p->coarsest` as one
 * key (a shape indexed by a coarser cell that contains it).  Sorted and
 * disjoint, into `*out` (malloc'd, `*n`).  `*usable` is false, with
 * nothing out, for a query the sphere cannot hold ($box, $polygon,
 * $center): only a 2d index serves those.  0, or -1 when out of
 * memory. */
int mfi_geo_query_cells(const mf_geo_query *q, const mf_s2_params *p, mf_geo_interval **out,
                        size_t *n, bool *usable);

/* As mfi_geo_query_cells for the ring of points between `inner` and
 * `outer` radians from the centre of `n` (a spherical one): the keys a
 * document whose nearest point lies in the ring may have, for one step
 * of a $near search.  0, or -1 when out of memory. */
int mfi_geo_ring_cells(const mf_geo_near *n, double inner, double outer, const mf_s2_params *p,
                       mf_geo_interval **out, size_t *cnt);

/* The average edge, in radians, of an S2 cell of `level` (the first ring
 * of a $near search is a few of them wide). */
double mfi_geo_cell_edge(int level);

/* ------------------------------------------ for the "2d" index kind */

/* What a "2d" index can cover of a parsed query (index_2d.c): mongod's
 * planner gives a 2d field a $geoWithin only, and only when its
 * GeometryContainer has an R2 region. */
typedef enum mfi_geo_flat_kind {
    MFI_GEO_FLAT_NONE,    /* $geoIntersects, a $geometry: no 2d index serves it */
    MFI_GEO_FLAT_BOX,     /* $box */
    MFI_GEO_FLAT_POLYGON, /* $polygon */
    MFI_GEO_FLAT_CIRCLE,  /* $center */
    MFI_GEO_FLAT_CAP      /* $centerSphere */
} mfi_geo_flat_kind;

typedef struct mfi_geo_flat {
    mfi_geo_flat_kind kind;
    /* The shape's bounds, as mongod's GeometryContainer::R2BoxRegion: a
     * $centerSphere's are its cap's latitude/longitude bounds in degrees
     * (a cap across the antimeridian gets the complement of its
     * longitudes, as mongod's Box::init orders them). */
    double min_x, min_y, max_x, max_y;
    double x, y, radius;   /* CIRCLE and CAP: the centre; the radius (CAP: radians) */
    const double *xy;      /* POLYGON: the vertices x0, y0, x1, y1, ...; valid */
    size_t n;              /* while the query lives */
} mfi_geo_flat;

/* What of the query `q` a "2d" index covers, into `out`. */
void mfi_geo_query_flat(const mf_geo_query *q, mfi_geo_flat *out);

#ifdef __cplusplus
}
#endif

#endif /* MF_QUERY_GEO_H */
