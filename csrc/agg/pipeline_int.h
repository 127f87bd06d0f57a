/*
 * pipeline_int.h -- private to csrc/agg: the stage interface and what the
 * stage files share.
 *
 * A stage is a struct whose first member is `mfi_stage`; its `next` pulls
 * from `src` (the stage before it, NULL for the first).  Each stage file
 * has a parse function per stage name, listed in pipeline.c's table.
 */
#ifndef MF_AGG_PIPELINE_INT_H
#define MF_AGG_PIPELINE_INT_H

#include "pipeline.h"
#include "../query/query.h"

typedef struct mfi_stage mfi_stage;
typedef struct mfi_stage_ops mfi_stage_ops;

/* What every stage of one pipeline shares (owned by the mf_pipeline). */
typedef struct mfi_agg {
    char *db;
    char *coll;              /* NULL for a database pipeline */
    const mf_agg_env *env;
    bson_t let_values;       /* the command's `let`, evaluated */
    char **let_names;        /* their names, in order, for parsing */
    size_t nlet;
    mf_expr_vars vars;       /* now + let_values + coll */
    /* The pipeline's collation (one reference; NULL: simple): $match,
     * $sort, $group keys, accumulators, expressions (through vars.coll),
     * the reads of $lookup / $graphLookup / $unionWith, sub-pipelines. */
    mf_collator *collator;
    bool allow_disk_use;
    char *tmpdir;
    /* maxTimeMS: the top pipeline's deadline, shared by its
     * sub-pipelines and reads (each stage's document counts into it);
     * mf_pipeline_set_deadline moves it for each getMore */
    mf_deadline *deadline;
    bool explain;
    size_t group_max_bytes;  /* $group's memory limit */
    size_t sort_max_bytes;   /* a blocking $sort's */
    size_t bucket_auto_max_bytes; /* $bucketAuto's sorter */
    size_t window_max_bytes; /* $setWindowFields' partition buffer */
    bson_t err_info;         /* extra fields of the last error (mf_pipeline_error_info) */
    int depth;               /* nesting of $lookup / $unionWith sub-pipelines */
    bool change_streams;     /* mf_agg_opts.change_streams */
} mfi_agg;

struct mfi_stage_ops {
    const char *name;        /* "$match" */
    /* The next document into `out` (initialised here), or *eof. */
    int (*next)(mfi_stage *s, bson_t *out, bool *eof, mf_error *err);
    /* Append the stage's explain body (the value of {"$name": ...}). */
    void (*explain)(const mfi_stage *s, bson_t *out);
    void (*free)(mfi_stage *s);
};

struct mfi_stage {
    const mfi_stage_ops *ops;
    mfi_stage *src;
    mfi_agg *agg;
    bson_t spec;             /* the stage's specification value, for explain */
    bson_type_t spec_type;
    int64_t nreturned;
    int64_t time_us;
};

/* A stage parser: `it` is on the stage's value ({$name: <value>}); it may
 * append one stage or several (a desugared stage) through mfi_stage_add. */
typedef struct mfi_stage_list mfi_stage_list;
typedef int (*mfi_stage_parse_fn)(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                                  mf_error *err);

struct mfi_stage_list {
    mfi_stage **v;
    size_t n, cap;
};

/* Allocate a stage of `size` bytes (zeroed) and append it to `l`. */
void *mfi_stage_new(mfi_stage_list *l, const mfi_stage_ops *ops, size_t size,
                    const bson_iter_t *spec, mfi_agg *agg, mf_error *err);

/* Pull from the stage before `s`. */
int mfi_stage_pull(mfi_stage *s, bson_t *out, bool *eof, mf_error *err);

/* MaxTimeMSExpired (50) when the deadline has passed (checked every 256
 * calls). */
int mfi_agg_check_time(mfi_agg *a, mf_error *err);

/* Parse an expression with the pipeline's `let` names in scope. */
int mfi_agg_expr(mfi_agg *a, const bson_iter_t *it, mf_expr **out, mf_error *err);

/* Evaluate `e` against `doc` into an owned value (BSON_TYPE_EOD: missing). */
int mfi_agg_eval(mfi_agg *a, const mf_expr *e, const bson_t *doc, bson_value_t *out,
                 mf_error *err);

/* The field path of a "$a.b" string value: 16873 without the leading '$',
 * then mongod's FieldPath rule (mf_bsonx_field_path_check: 40352 for "$"
 * alone, 16410 a '$' component other than $ref/$id/$db ...).  Returns the
 * path without the "$" (owned). */
int mfi_agg_field_path(const char *s, char **out, mf_error *err);

/* A copy of `doc` with dotted `path` set to `v` (NULL: removed), into
 * `out` (initialised by the caller); missing parents are created as
 * documents, a parent that is not a document is replaced by one. */
void mfi_doc_set_path(const bson_t *doc, const char *path, const bson_value_t *v, bson_t *out);
/* The value at dotted `path` of `doc`, through sub-documents only. */
bool mfi_doc_get_path(const bson_t *doc, const char *path, bson_iter_t *out);

/* The hooks through which query/ (projections, $expr in filters) compiles
 * and evaluates expressions with this pipeline's variables. */
void mfi_agg_hooks(mfi_agg *a, mf_expr_hooks *h);

/* Set up `a` (zeroed) outside a pipeline: $$NOW is `now_ms`, strings
 * compare under `coll` (NULL: simple; a reference is taken) and `let`
 * (may be NULL) is evaluated as a command's let.  mfi_agg_release frees
 * what it holds (on error too). */
int mfi_agg_init_let(mfi_agg *a, const bson_t *let, int64_t now_ms, const mf_collator *coll,
                     mf_error *err);
void mfi_agg_release(mfi_agg *a);

/* Stage parsers, by file. */
int mfi_parse_match(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_geo_near(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_limit(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_skip(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_sort(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_count(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_unwind(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_documents(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_replace_root(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_replace_with(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_sample(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
/* stage_project.c */
int mfi_parse_project(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_add_fields(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_set(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_unset(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
/* Whether `name` ("$match") is a stage of the table (pipeline.c). */
bool mfi_stage_known(const char *name);
/* stage_out.c */
int mfi_parse_out(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_merge(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
/* stage_sessions.c */
int mfi_parse_list_local_sessions(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
/* stage_stats.c */
int mfi_parse_coll_stats(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_index_stats(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_plan_cache_stats(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
/* stage_group.c */
int mfi_parse_group(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
/* Whether stage `s` is a $group that reads no field of its input: a
 * constant _id, and accumulators of constants ({$sum: 1}, $count).  The
 * read before it may then hand it empty documents. */
bool mfi_group_reads_no_field(const mfi_stage *s);
int mfi_parse_sort_by_count(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);

/* stage_window.c */
int mfi_parse_set_window_fields(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
/* stage_bucket.c */
int mfi_parse_bucket(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_bucket_auto(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_redact(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
/* stage_densify.c: $densify and $fill (the time units and dateAdd they
 * and $setWindowFields use are calendar.h's). */
int mfi_parse_densify(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_fill(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
/* ------------------------------------------------------ sub-pipelines
 * ($lookup, $graphLookup, $unionWith: stage_lookup.c; $facet:
 * stage_facet.c).  A sub-pipeline is an mf_pipeline of its own, pulled
 * with mf_pipeline_next and freed with mf_pipeline_free; it shares the
 * parent's environment, deadline and $$NOW. */

#define MFI_AGG_MAX_DEPTH 20 /* mongod's internalMaxSubPipelineViewDepth */

typedef struct mfi_sub_opts {
    const char *coll;          /* the collection it reads; NULL: none */
    mf_agg_source *input;      /* or documents to start from (taken over,
                                  also on error); NULL: none */
    const bson_t *filter;      /* a $match put first (after a leading
                                  $documents); NULL: none */
    const char *const *names;  /* variables it sees besides the parent's */
    size_t nnames;
    const bson_t *let_values;  /* values of all its variables (parent's and
                                  `names`); NULL: the parent's */
    bool nested;               /* counts toward MFI_AGG_MAX_DEPTH */
} mfi_sub_opts;

/* Parse `stages` (an array) as a sub-pipeline of `parent`'s.  With neither
 * `coll` nor `input` it must begin with $documents.  Errors: the stages'
 * own, 232 MaxSubPipelineDepthExceeded past MFI_AGG_MAX_DEPTH. */
int mfi_pipeline_sub(mfi_agg *parent, const bson_t *stages, const mfi_sub_opts *o,
                     mf_pipeline **out, mf_error *err);

/* The stage names of `stages` (an array of stage documents), for the
 * stages that refuse some stages inside them: the first of `refused`
 * (NULL-terminated) that occurs, or NULL. */
const char *mfi_pipeline_find_stage(const bson_t *stages, const char *const *refused);

/* stage_lookup.c */
int mfi_parse_lookup(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_graph_lookup(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
int mfi_parse_union_with(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);
/* stage_facet.c */
int mfi_parse_facet(const bson_iter_t *, mfi_agg *, mfi_stage_list *, mf_error *);

/* Emit the next document of an array being iterated by `it` into `out`
 * (initialised here) and clear `*eof`; at the array's end, nothing
 * (`*eof` stays set).  For stages that produce a list the environment
 * filled ($indexStats, $listLocalSessions). */
void mfi_next_array_doc(bson_iter_t *it, bson_t *out, bool *eof);

#endif /* MF_AGG_PIPELINE_INT_H */
