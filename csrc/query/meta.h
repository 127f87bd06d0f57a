/*
 * meta.h -- a document's metadata, mongod's DocumentMetadataFields: what a
 * read or a stage knows of a document besides its fields, and what
 * {$meta: "<name>"} returns (in an aggregation expression, a find
 * projection, a sort).
 *
 * One kind per name mongod 7.0's $meta accepts (expression.cpp's
 * kMetaNameToMetaType).  Who sets each here:
 *
 *   textScore            a $text query's scan (plan_text.c), for find and
 *                        the aggregation read that begins with $match $text
 *   randVal              $sample (agg/pipeline.c)
 *   geoNearDistance,     a $geoNear stage / a $near query (the geo part:
 *   geoNearPoint         set with mf_meta_set_double / mf_meta_set_value)
 *   recordId             find's rows (the record's id, a long)
 *   indexKey             find's rows read through a (non-text) index
 *   sortKey              find's sort, aggregation's $sort: the array of the
 *                        values the sort compared
 *   searchScore, searchHighlights, searchScoreDetails,
 *   searchSequenceToken, vectorSearchScore
 *                        Atlas Search's stages, which this server has not:
 *                        never set, so $meta gives nothing (missing)
 *   timeseriesBucketMinTime, timeseriesBucketMaxTime
 *                        a time-series bucket's unpacking: never set
 *
 * Availability.  mongod refuses at planning (40218 "query requires <what>
 * metadata, but it is not available") a query that asks for text score
 * metadata without $text, or geoNear distance / point without $geoNear
 * ($near in a find): MF_META_CHECKED.  Every other kind may be asked for
 * anywhere and is missing where nothing set it.
 *
 * Ownership: an mf_meta owns its values (mf_meta_clear frees them); it is
 * zeroed to start (no kinds set).  Not thread-safe.
 */
#ifndef MF_QUERY_META_H
#define MF_QUERY_META_H

#include "../bsonx/bsonx.h"

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum mf_meta_kind {
    MF_META_TEXT_SCORE,
    MF_META_RAND_VAL,
    MF_META_SEARCH_SCORE,
    MF_META_SEARCH_HIGHLIGHTS,
    MF_META_GEO_NEAR_DISTANCE,
    MF_META_GEO_NEAR_POINT,
    MF_META_RECORD_ID,
    MF_META_INDEX_KEY,
    MF_META_SORT_KEY,
    MF_META_SEARCH_SCORE_DETAILS,
    MF_META_SEARCH_SEQUENCE_TOKEN,
    MF_META_TIMESERIES_BUCKET_MIN_TIME,
    MF_META_TIMESERIES_BUCKET_MAX_TIME,
    MF_META_VECTOR_SEARCH_SCORE,
    MF_META_NKINDS
} mf_meta_kind;

#define MF_META_BIT(k) (1u << (k))

/* The kinds mongod checks for at planning (DepsTracker's
 * kDefaultUnavailableMetadata): text score and the two of $geoNear. */
#define MF_META_CHECKED                                                            \
    (MF_META_BIT(MF_META_TEXT_SCORE) | MF_META_BIT(MF_META_GEO_NEAR_DISTANCE) |     \
     MF_META_BIT(MF_META_GEO_NEAR_POINT))

typedef struct mf_meta {
    uint32_t has;                      /* bit k: kind k is set */
    bson_value_t v[MF_META_NKINDS];    /* the set ones' values (owned) */
} mf_meta;

/* The kind $meta names `name` (NUL-terminated), or -1 for a name mongod
 * does not know (17308 "Unsupported argument to $meta: <name>"). */
int mf_meta_kind_of(const char *name);

/* The name of kind `k` as $meta spells it ("textScore"). */
const char *mf_meta_name(mf_meta_kind k);

/* The kind as mongod's 40218 message says it ("text score", "$geoNear
 * distance", ...: DocumentMetadataFields::typeNameToDebugString). */
const char *mf_meta_debug_name(mf_meta_kind k);

/* 40218 "query requires <debug name> metadata, but it is not available"
 * for the first kind of `missing` (a set of MF_META_BIT); returns 40218. */
int mf_meta_unavailable(uint32_t missing, mf_error *err);

/* Forget every value (the struct stays usable). */
void mf_meta_clear(mf_meta *m);

/* Set kind `k` to a double / a long / a copy of `v`.  Out of memory (a
 * copy of a document, array or string): -1, the kind left unset. */
void mf_meta_set_double(mf_meta *m, mf_meta_kind k, double d);
void mf_meta_set_long(mf_meta *m, mf_meta_kind k, int64_t i);
int mf_meta_set_value(mf_meta *m, mf_meta_kind k, const bson_value_t *v);

/* Kind `k`'s value, borrowed from `m` (valid until it changes), or NULL
 * when `m` is NULL or the kind is not set. */
const bson_value_t *mf_meta_get(const mf_meta *m, mf_meta_kind k);

/* `dst` := a copy of `src` (NULL: nothing set); `dst` cleared first.
 * Out of memory: -1, `dst` then holds what could be copied. */
int mf_meta_copy(mf_meta *dst, const mf_meta *src);

/* The metadata as one BSON document {<name>: value, ...} appended to
 * `out` (for stages that keep documents aside: $sort's sorter, $facet's
 * buffer); nothing set: nothing appended, the caller keeps an empty
 * document. */
void mf_meta_to_bson(const mf_meta *m, bson_t *out);
/* Back from mf_meta_to_bson's document (`m` cleared first).  Returns -1
 * for a damaged document or out of memory. */
int mf_meta_from_bson(mf_meta *m, const uint8_t *data, size_t len);

#endif /* MF_QUERY_META_H */
