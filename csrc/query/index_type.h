/*
 * index_type.h -- the index-type interface: what the write path and the
 * planner ask of an index according to its kind (mongod's index plugins,
 * IndexNames: the b-tree "", "text", "2dsphere", "2d", "hashed",
 * "wildcard").
 *
 * One row of index_type.c's table per kind.  A kind answers three
 * questions:
 *
 *   check_key  is this key pattern valid for the kind, beyond the checks
 *              every pattern gets (index.c's check_key_pattern, mongod's
 *              validateKeyPattern)?  NULL: no checks of its own.
 *   keys       the keys of a document, encoded for the index's tree
 *              (sorted, unique), and which key fields met an array.
 *   bounds     what one predicate of a filter says about one key field:
 *              the intervals of that field's keys it can match, whether
 *              the kind can use it at all, and whether the bounds answer
 *              it exactly (the scan then needs no filter for it).
 *
 * The b-tree (ascending/descending fields) is the first row; "hashed"
 * (index_hashed.c) the second.  A kind the table lacks is refused at
 * createIndexes with CannotCreateIndex, as before; a new kind (issue 49)
 * is one file with its functions and one row.
 *
 * The interface lives in query/, not coll/, because the planner, which
 * asks for bounds, is in query/ below coll/ (docs/layers.md).
 */
#ifndef MF_INDEX_TYPE_H
#define MF_INDEX_TYPE_H

#include "query_int.h"

struct mf_index_type {
    const char *plugin; /* IndexNames: "" for the b-tree */
    int (*check_key)(const bson_t *key, mf_error *err);
    int (*keys)(const mf_index_desc *d, const bson_t *doc, mf_keyset *out, uint32_t *multikey,
                mf_error *err);
    /* Into `out` (initialised here when *usable) the intervals of key field
     * `field` that predicate `pr` can match.  Returns 0 or -1 (out of
     * memory). */
    int (*bounds)(const mf_index_desc *d, size_t field, const mfi_pred *pr, mfi_oil *out,
                  bool *usable, bool *exact);
    /* What the kind refuses in a spec that passed every spec check, with
     * its own code and message, undecorated (mongod's access method
     * constructors: a unique hashed index, a 2d index's bad "bits"): the
     * whole spec `spec`, its key pattern `key` and the truth of its
     * "unique".  NULL: nothing. */
    int (*check_spec)(const bson_t *spec, const bson_t *key, bool unique, mf_error *err);
    /* createIndexes: the validated spec `in` as the kind stores it
     * (mongod's adjustIndexSpecObject), into `out` (initialised here, on
     * error too).  NULL: stored as given. */
    int (*fix_spec)(const bson_t *in, bson_t *out, mf_error *err);
    /* What a descriptor keeps of the kind's options (mf_index_desc.kind),
     * from its stored spec, and its release.  NULL: nothing. */
    int (*desc_init)(mf_index_desc *d, const bson_t *spec, mf_error *err);
    void (*desc_clear)(mf_index_desc *d);
    /* mf_index_key_values for the kind (query.h: the values of the key of
     * `doc` that is index entry `entry`), from a descriptor that may lack
     * what desc_init keeps (d->kind NULL: a scan's copy).  NULL: the
     * b-tree's. */
    int (*key_values)(const mf_index_desc *d, const bson_t *doc, const uint8_t *entry,
                      size_t entry_len, bson_t *out, mf_error *err);
    /* mongod keeps no multikey paths for the kind, only whether the index
     * is multikey: explain shows isMultiKey and no multiKeyPaths. */
    bool no_multikey_paths;
};

/* The kinds other than the b-tree, one file each. */
extern const mf_index_type mfi_hashed_type;   /* index_hashed.c */
extern const mf_index_type mfi_2dsphere_type; /* index_2dsphere.c */
extern const mf_index_type mfi_2d_type;       /* index_2d.c */

/* For the kinds' key functions (index.c): a new, empty key at the end of
 * `k` (-1: out of memory); KeyTooLong (17280), clearing `out`, when a key
 * is longer than the index's tree takes. */
int mfi_keyset_add(mf_keyset *k, mf_buf **out);
int mfi_keys_fit(const mf_index_desc *d, mf_keyset *out, mf_error *err);
/* memcmp order of two keys (mf_buf), for qsort; sort `k`'s keys and drop
 * repeats (their memory stays owned past `n`). */
int mfi_key_cmp(const void *a, const void *b);
void mfi_keyset_unique(mf_keyset *k);

/* The values of a hashed index's one key for `doc`, named by the fields'
 * paths (the hashed one a NumberLong), appended to `out`: returnKey. */
int mfi_hashed_key_values(const mf_index_desc *d, const bson_t *doc, bson_t *out, mf_error *err);

/* The text index (index_text.c). */
int mfi_text_index_fix_spec(const bson_t *in, bson_t *out, mf_error *err);
int mfi_text_index_desc_init(mf_index_desc *d, const bson_t *spec, mf_error *err);
void mfi_text_index_desc_clear(mf_index_desc *d);
int mfi_text_index_keys(const mf_index_desc *d, const bson_t *doc, mf_keyset *out,
                        uint32_t *multikey, mf_error *err);
int mfi_text_index_bounds(const mf_index_desc *d, size_t field, const mfi_pred *pr, mfi_oil *out,
                          bool *usable, bool *exact);

/* The b-tree's keys (index.c): mongod's BtreeKeyGenerator. */
int mfi_btree_keys(const mf_index_desc *d, const bson_t *doc, mf_keyset *out,
                   uint32_t *multikey, mf_error *err);

/* ------------------------------------- wildcard (index_wildcard.c) */

/* The wildcard kind's row: index_wildcard.c has its design. */
int mfi_wild_check_key(const bson_t *key, mf_error *err);
int mfi_wild_keys(const mf_index_desc *d, const bson_t *doc, mf_keyset *out, uint32_t *multikey,
                  mf_error *err);
int mfi_wild_bounds(const mf_index_desc *d, size_t field, const mfi_pred *pr, mfi_oil *out,
                    bool *usable, bool *exact);
int mfi_wild_desc_init(mf_index_desc *d, const bson_t *spec, mf_error *err);
void mfi_wild_desc_clear(mf_index_desc *d);

/* The wildcard kind's createIndexes checks that need the whole spec
 * `spec` (index.c calls them): validateIndexSpec's on the key pattern
 * `key` and on the wildcardProjection element `proj` (phase B),
 * _isSpecOk's sparse/unique/TTL (phase D).  Undecorated reasons, mongod's
 * codes. */
int mfi_wild_check_key_spec(const bson_t *spec, const bson_t *key, mf_error *err);
int mfi_wild_check_projection(const bson_t *spec, const bson_iter_t *proj, mf_error *err);
int mfi_wild_check_spec_ok(const bson_t *spec, mf_error *err);

/* The planner's expansion of wildcard indexes (mongod's
 * QueryPlannerIXSelect::expandIndexes): `idx` with every wildcard index
 * replaced by one virtual index per path of `filter` it can serve, key
 * pattern {"$_path": 1, <path>: 1} (regular fields of a compound wildcard
 * index kept in place), into `*out` (`*nout`; NULL when `idx` holds no
 * wildcard index: plan over `idx`).  A hint naming a wildcard index keeps
 * its expansions only, and `*hint` becomes NULL; BadValue (2) when it has
 * none.  Free with mfi_wild_expand_free. */
int mfi_wild_expand(const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                    const bson_iter_t **hint, mf_index_desc **out, size_t *nout, mf_error *err);
void mfi_wild_expand_free(mf_index_desc *v, size_t n);
/* mf_index_key_values for a virtual index (fields named as its key
 * pattern: {"$_path": "a.b", "a.b": 5}, returnKey's). */
int mfi_wild_key_values(const mf_index_desc *vd, const bson_t *doc, const uint8_t *entry,
                        size_t entry_len, bson_t *out, mf_error *err);
/* The "$_path" field of a virtual index, or SIZE_MAX for any other. */
size_t mfi_wild_path_field(const mf_index_desc *d);
/* The "$_path" field's bounds from its value field's `value` (present or
 * not), into `out` (initialised here): the path itself, and its subpaths
 * ["p.", "p/") when `value` may hold objects ($exists); every path when
 * nothing bounds the value.  0 or -1 (out of memory). */
int mfi_wild_path_bounds(const mf_index_desc *d, const mfi_oil *value, bool present,
                         mfi_oil *out);

/* ------------------------------------------------------ 2d (index_2d.c) */

/* For a $near or $nearSphere search over a "2d" index (mongod's
 * GeoNear2DStage), which scans ring by ring outwards.
 *
 * A ring: its centre and radii.  Flat ($near): in the index's units,
 * widened here by mongod's epsilon, DBL_EPSILON * (max(|x|, |y|) +
 * full_outer), full_outer the search's greatest radius.  Spherical
 * ($nearSphere over a 2d index): the centre in degrees, the radii in
 * radians, projected to degrees as mongod's projectBoundsToTwoDDegrees
 * (widened by the longitude span of `outer` at the centre's latitude). */
typedef struct mfi_2d_ring {
    double x, y;
    double inner, outer;
    double full_outer; /* flat only */
    bool sphere;
} mfi_2d_ring;

/* The cells a search has scanned (mongod's _scannedCells), so that no
 * ring scans a key twice.  NULL when out of memory. */
typedef struct mfi_2d_scanned mfi_2d_scanned;
mfi_2d_scanned *mfi_2d_scanned_new(void);
void mfi_2d_scanned_free(mfi_2d_scanned *s);

/* The bounds of the 2d field (field 0) of index `d` (a "2d" index) for
 * `ring`: the ring covered by at most about 16 cells
 * (internalGeoNearQuery2DMaxCoveringCells), less what `scanned` holds
 * (NULL: nothing), each cell the interval [its hash, its greatest hash]
 * of BinData keys, ascending, into `out` (initialised here; possibly
 * empty: the ring was scanned).  The cells join `scanned`.  Never exact:
 * the distance is the caller's to test.  0 or -1 (out of memory). */
int mfi_2d_ring_bounds(const mf_index_desc *d, const mfi_2d_ring *ring, mfi_2d_scanned *scanned,
                       mfi_oil *out);

/* mongod's DensityEstimator, the first step of a 2d near search: the
 * bounds of the cell of level `level` (< the index's bits) holding the
 * point (x, y) and of its up to three neighbours nearest the point, into
 * `out` (initialised here).  16433 "point not in interval of [ min, max ]
 * :: caused by :: [ x, y ]" when the point is outside the index's
 * square; InternalError when out of memory. */
int mfi_2d_density_bounds(const mf_index_desc *d, double x, double y, unsigned level,
                          mfi_oil *out, mf_error *err);

/* The index's parameters: its bits, square [min, max], the converter's
 * error (mongod's getError(): a cell's diagonal; half of it is a search's
 * least ring width) and the side of a cell of `level` (sizeEdge). */
typedef struct mfi_2d_params {
    int bits;
    double min, max, error;
} mfi_2d_params;
void mfi_2d_params_of(const mf_index_desc *d, mfi_2d_params *out);
double mfi_2d_cell_edge(const mf_index_desc *d, unsigned level);

#endif /* MF_INDEX_TYPE_H */
