/*
 * pipeline.h -- the aggregation pipeline, as the command layer sees it.
 *
 * A pipeline is parsed once (mf_pipeline_parse) into a chain of stages and
 * then pulled from, one document at a time (mf_pipeline_next), as mongod's
 * DocumentSource::getNext.  Stages that must see every input first ($sort,
 * $group, ...) do so on their first pull.
 *
 * The pipeline never touches storage itself.  Whatever it reads from a
 * collection -- the documents it starts from, a $lookup's foreign side, a
 * $unionWith -- it asks of the environment (mf_agg_env) the command layer
 * supplies, which plans the read with the query planner and takes the
 * collection's locks only while it fills a chunk of documents.  So no lock
 * is held while stages run, and a stage may read a second collection
 * without nesting locks.
 */
#ifndef MF_AGG_PIPELINE_H
#define MF_AGG_PIPELINE_H

#include "agg.h"

#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------ the environment */

/* An open read of a collection: documents come in the order asked for. */
typedef struct mf_agg_source mf_agg_source;
struct mf_agg_source {
    /* The next document into `out` (initialised by the callee), or *eof. */
    int (*next)(mf_agg_source *s, bson_t *out, bool *eof, mf_error *err);
    /* Append the read's explain to `out` (the body of mongod's $cursor
     * stage): queryPlanner, and with `exec` executionStats (1), with each
     * candidate plan's trial (2: allPlansExecution). */
    int (*explain)(mf_agg_source *s, int exec, bson_t *out, mf_error *err);
    void (*free)(mf_agg_source *s);
    /* For a $geoNear read (mf_agg_read.geo_near): the distance of the
     * document `next` gave last, and its nearest location as {"": loc}
     * (borrowed until the next call; empty without includeLocs).  NULL
     * for other reads. */
    void (*near_meta)(mf_agg_source *s, double *dist, const bson_t **loc);
    /* The metadata (query/meta.h) of the document `next` returned last,
     * set by the source (a text scan's read: textScore), valid until the
     * next call; NULL: none.  A source that knows none leaves it NULL. */
    const mf_meta *meta;
};

/* What a $geoNear stage asks of the read (mongod's asNearQuery): its
 * `filter` (mf_agg_read.filter) is the stage's `query`; the read adds
 * {key: {$near or $nearSphere: near, $minDistance, $maxDistance}}. */
typedef struct mf_agg_geo_near {
    const bson_t *near;  /* {"": <near: a GeoJSON point or a legacy pair>} */
    bool spherical;      /* $nearSphere, else $near */
    bool has_min, has_max;
    double min, max;
    const char *key;     /* NULL: the collection's one 2d, else one 2dsphere index */
    bool include_locs;
} mf_agg_geo_near;

/* What a pipeline asks to read. */
typedef struct mf_agg_read {
    const char *db;
    const char *coll;
    const bson_t *filter;     /* NULL: every document */
    const bson_t *sort;       /* NULL: any order */
    const bson_iter_t *hint;  /* NULL: the planner chooses */
    int64_t limit;            /* > 0: at most this many (after the sort) */
    const mf_expr_vars *vars; /* for $expr in the filter; may be NULL */
    /* compiles and evaluates $expr in the filter (the matcher copies the
     * struct; its arg lives as long as the pipeline); may be NULL */
    const struct mf_expr_hooks *hooks;
    bool explain;             /* gather executionStats */
    /* the collation the filter and sort compare strings under (the
     * pipeline's); NULL: simple */
    const mf_collator *collation;
    /* The stages after the read use no field of its documents (a count):
     * the read may hand out empty documents, and answer from index keys
     * alone where its bounds answer the whole filter. */
    bool no_fields;
    /* maxTimeMS: the pipeline's deadline, for the read's scan to count
     * its works into (mf_scan_deadline); it lives as long as the
     * pipeline */
    mf_deadline *deadline;
    /* A $geoNear stage's search, or NULL (then filter, sort and limit as
     * above; with it, no sort or limit). */
    const mf_agg_geo_near *geo_near;
    /* The stages ask for the text score ({$meta: "textScore"}): a $text
     * read plans TEXT_OR (its explain; the score comes either way). */
    bool text_score;
} mf_agg_read;

/* What $merge does with one document, decided by the pipeline. */
typedef enum mf_agg_merge_action {
    MF_AGG_MERGE_NONE,    /* write nothing */
    MF_AGG_MERGE_INSERT,  /* insert `out` */
    MF_AGG_MERGE_REPLACE, /* replace the matched document with `out` */
} mf_agg_merge_action;

/* $merge's decision for one document, called under the target's lock:
 * `existing` is the target's document the `on` fields matched (NULL:
 * none); fill `out` (initialised by the callee when it returns INSERT or
 * REPLACE) and `*action`.  Must not read collections. */
typedef int (*mf_agg_merge_fn)(void *arg, const bson_t *existing, bson_t *out,
                               mf_agg_merge_action *action, mf_error *err);

/* An open write into one collection: $out's temporary collection, or
 * $merge's target.  On an error the call may fill `info` (a document,
 * initialised by the caller) with the fields mongod adds to the error
 * reply: keyPattern and keyValue for a DuplicateKey. */
typedef struct mf_agg_sink mf_agg_sink;
struct mf_agg_sink {
    /* $out: insert `doc` (an _id is added if it has none). */
    int (*insert)(mf_agg_sink *s, const bson_t *doc, bson_t *info, mf_error *err);
    /* $merge: look up the target's document matching `match` (equalities
     * on the `on` fields), let `fn` decide, write what it says; the target
     * is created when `fn` first inserts. */
    int (*merge)(mf_agg_sink *s, const bson_t *match, mf_agg_merge_fn fn, void *fn_arg,
                 bson_t *info, mf_error *err);
    /* Finish: $out renames its temporary collection over the target
     * (keeping the target's indexes); both wait until every write is
     * durable (the command's write concern). */
    int (*commit)(mf_agg_sink *s, mf_error *err);
    /* Close; a $out that did not commit drops its temporary collection. */
    void (*free)(mf_agg_sink *s);
};

/* What $collStats asks for. */
typedef struct mf_agg_coll_stats {
    bool storage;        /* storageStats, sizes divided by `scale` */
    int64_t scale;
    bool count;
} mf_agg_coll_stats;

/* What $listLocalSessions asks for: every session (`all_users`), or those
 * of the users named (users[i] in database dbs[i]); none named: the
 * caller's own. */
typedef struct mf_agg_sessions_query {
    bool all_users;
    size_t nusers;
    const char *const *users;
    const char *const *dbs;
} mf_agg_sessions_query;

typedef struct mf_agg_env {
    void *arg;
    /* Open a read; `*sorted` tells whether it delivers `sort`'s order.  A
     * collection that does not exist reads as empty. */
    int (*open)(void *arg, const mf_agg_read *r, mf_agg_source **out, bool *sorted,
                mf_error *err);
    /* $out into db.coll: creates the temporary collection with the
     * target's indexes. */
    int (*out_open)(void *arg, const char *db, const char *coll, mf_agg_sink **out,
                    mf_error *err);
    /* $merge into db.coll (created by the first insert); `deadline` (may
     * be NULL; it outlives the sink) bounds a write's wait for what a
     * transaction holds. */
    int (*merge_open)(void *arg, const char *db, const char *coll, const mf_deadline *deadline,
                      mf_agg_sink **out, mf_error *err);
    /* Whether db.coll has a unique, non-partial index on exactly the
     * fields `on` (any order); a collection that does not exist has only
     * the _id index. */
    int (*has_unique_index)(void *arg, const char *db, const char *coll, const char *const *on,
                            size_t non, bool *out, mf_error *err);
    /* $collStats: append {ns, host, localTime, storageStats?, count?}. */
    int (*coll_stats)(void *arg, const char *db, const char *coll, const mf_agg_coll_stats *q,
                      bson_t *out, mf_error *err);
    /* $indexStats: append one document per index to the array `out`. */
    int (*index_stats)(void *arg, const char *db, const char *coll, bson_t *out, mf_error *err);
    /* $planCacheStats: append one document per plan cache entry of
     * db.coll to the array `out`; 50933 when it does not exist. */
    int (*plan_cache_stats)(void *arg, const char *db, const char *coll, bson_t *out,
                            mf_error *err);
    /* $listLocalSessions: append to the array `out` one document
     * {_id: {id, uid}, lastUse} per live session `q` selects, most
     * recently used first. */
    int (*list_sessions)(void *arg, const mf_agg_sessions_query *q, bson_t *out, mf_error *err);
    /* Whether db.coll is a view (*is_view), and then the namespace its
     * views end at ("db.coll", into `base`), their stages innermost first
     * (an array, into `stages`, initialised by the caller) and the
     * outermost view's collation ({} simple, into `collation`): the
     * foreign side of $lookup, $graphLookup and $unionWith reads through
     * it.  May be NULL: no views. */
    int (*resolve_view)(void *arg, const char *db, const char *coll, char *base, size_t cap,
                        bson_t *stages, bson_t *collation, bool *is_view, mf_error *err);
} mf_agg_env;

/* ------------------------------------------------------------ options */

typedef struct mf_agg_opts {
    const char *db;
    const char *coll;          /* NULL: a database pipeline ({aggregate: 1}) */
    const mf_agg_env *env;
    const bson_t *let;         /* the command's `let`, unevaluated; may be NULL */
    const bson_iter_t *hint;   /* may be NULL */
    /* The command's collation (NULL: simple), resolved by the caller (the
     * command's own, else the collection's default): every comparison of
     * strings in the pipeline -- $match, $sort, $group keys, expressions,
     * $lookup's equality -- uses it.  Borrowed for mf_pipeline_parse: the
     * pipeline takes its own reference. */
    const mf_collator *collation;
    bool allow_disk_use;
    const char *tmpdir;        /* where spilling stages write */
    int64_t deadline_us;       /* monotonic; 0: none */
    int64_t now_ms;            /* $$NOW for the whole command */
    bool explain;
    /* Memory limits of $group and of a blocking $sort (mongod's
     * internalDocumentSourceGroupMaxMemoryBytes and
     * internalQueryMaxBlockingSortMemoryUsageBytes); 0: the default. */
    int64_t group_max_bytes;
    int64_t sort_max_bytes;
    /* $bucketAuto's and $setWindowFields' (mongod's
     * internalDocumentSourceBucketAutoMaxMemoryBytes and
     * internalDocumentSourceSetWindowFieldsMaxMemoryBytes); 0: the default. */
    int64_t bucket_auto_max_bytes;
    int64_t window_max_bytes;
    /* The deployment has change streams (a replica set): a $changeStream
     * that is not the first stage is refused with 40602 (the command
     * layer opens one that is); otherwise 40573. */
    bool change_streams;
} mf_agg_opts;

#define MF_AGG_DEFAULT_MEMORY_LIMIT (100 * 1024 * 1024)

typedef struct mf_pipeline mf_pipeline;

/* Parse `stages` (a BSON array of stage documents).  Errors as mongod's:
 * 40323 "A pipeline stage specification object must contain exactly one
 * field.", 40324 "Unrecognized pipeline stage name: '$x'", 14 for a stage
 * that is not an object, each stage's own parse errors.  The options are
 * copied; `env` must outlive the pipeline. */
int mf_pipeline_parse(const bson_t *stages, const mf_agg_opts *opts, mf_pipeline **out,
                      mf_error *err);

/* Open the pipeline's read now (planning it; mf_pipeline_next and
 * mf_pipeline_explain do it first otherwise): its errors are planning's
 * (a bad hint, 27 without a text index, 2 "text and hint not allowed in
 * same query", a sub-pipeline's own 40218 ...). */
int mf_pipeline_prepare(mf_pipeline *p, mf_error *err);

/* The next result into `out` (initialised by the callee), or *eof. */
int mf_pipeline_next(mf_pipeline *p, bson_t *out, bool *eof, mf_error *err);

/* Explain the pipeline as mongod 7.0 does: {stages: [...]} or, when
 * everything was pushed into the read, the read's queryPlanner.  With
 * `exec` the pipeline is run to the end first and the stages carry
 * nReturned / executionTimeMillisEstimate. */
int mf_pipeline_explain(mf_pipeline *p, int exec, bson_t *out, mf_error *err);

/* Whether the pipeline ends in $out or $merge (a write: no results). */
bool mf_pipeline_writes(const mf_pipeline *p);

/* Move the pipeline's deadline (mf_clock_mono_us microseconds, 0: none;
 * at first mf_agg_opts.deadline_us): a cursor's getMore runs with the time
 * the cursor has left, as mongod's.  Its sub-pipelines and reads follow. */
void mf_pipeline_set_deadline(mf_pipeline *p, int64_t deadline_us);

/* The fields mongod adds to the reply of the error the pipeline last
 * returned (keyPattern and keyValue of a DuplicateKey); empty if none.
 * Valid until the next call on `p`. */
const bson_t *mf_pipeline_error_info(const mf_pipeline *p);

void mf_pipeline_free(mf_pipeline *p);

/* ----------------------------------------------------- update pipelines */

/* Parse the pipeline of a pipeline-style update (update's `u` or
 * findAndModify's `update` given as an array).  Of `opts`, db / coll (may
 * be NULL), let, now_ms and deadline_us are used.  `constants` (update's
 * `c`, may be NULL) are variables whose values are literal.  Errors: the
 * stages' parse errors, then InvalidOptions (72) "<$stage> is not allowed
 * to be used within an update" for a stage other than $addFields / $set /
 * $project / $unset / $replaceRoot / $replaceWith. */
int mf_pipeline_parse_update(const bson_t *stages, const mf_agg_opts *opts,
                             const bson_t *constants, mf_pipeline **out, mf_error *err);

/* Parse the stages after $changeStream, run over one event at a time
 * (mf_pipeline_run_event).  Of `opts`, db / coll, let, collation, now_ms
 * and deadline_us are used.  Errors: 40602 for a second $changeStream,
 * IllegalOperation (20) "<$stage> is not permitted in a $changeStream
 * pipeline" for a stage other than $match, $project, $addFields, $set,
 * $unset, $replaceRoot, $replaceWith and $redact, then the stages' parse
 * errors. */
int mf_pipeline_parse_events(const bson_t *stages, const mf_agg_opts *opts, mf_pipeline **out,
                             mf_error *err);
/* Run it over `event` (borrowed for the call): the result into `out`
 * (initialised by the callee when *kept), or *kept false when a $match or
 * $redact dropped it.  Not thread-safe: one call at a time. */
int mf_pipeline_run_event(mf_pipeline *p, const bson_t *event, bson_t *out, bool *kept,
                          mf_error *err);

/* The stage names of `stages` (an array of documents), as mongod's
 * LiteParsedPipeline reads them before anything runs: each stage one field
 * (40323) naming a known stage (40324, "Unrecognized pipeline stage
 * name").  An update command lite-parses every statement's pipeline first,
 * so these errors end the whole command, where a stage's own parse errors
 * are the statement's. */
int mf_pipeline_lite_parse(const bson_t *stages, mf_error *err);

/* Run an update pipeline over `doc` (borrowed for the call): the new
 * document into `out` (initialised by the callee on success).  Errors: the
 * stages' runtime errors.  Not thread-safe: one call at a time. */
int mf_pipeline_run_one(mf_pipeline *p, const bson_t *doc, bson_t *out, mf_error *err);

#endif /* MF_AGG_PIPELINE_H */
