/*
 * query.h -- the query language (DESIGN.md section 5): filters (match.c),
 * update operators (update.c), projection (project.c), sort keys and the
 * sorter (sort.c), access paths and scans (plan.c).
 *
 * A filter is parsed once into a predicate tree (mf_matcher_parse), then
 * evaluated against documents as they are stored -- BSON bytes, walked with
 * iterators that skip every field the filter does not name.
 */
#ifndef MF_QUERY_H
#define MF_QUERY_H

#include "../bsonx/bsonx.h"
#include "../storage/storage.h"
#include "meta.h"

typedef struct mf_matcher mf_matcher;

/* Aggregation expressions as the layer above supplies them: query/ cannot
 * call agg/ itself, so a projection with computed fields (and $expr in a
 * filter) is given these.  `parse` compiles the expression at `it` into
 * an opaque object; `eval` evaluates it against the whole document `root`
 * into an owned value (BSON_TYPE_EOD: missing), freed with `free_value`. */
typedef struct mf_expr_hooks {
    int (*parse)(const bson_iter_t *it, void *arg, void **out, mf_error *err);
    /* `meta`: the document's metadata for {$meta: ...} (NULL: the
     * context's own -- a pipeline's document being evaluated -- else
     * none) */
    int (*eval)(const void *x, const bson_t *root, const mf_meta *meta, void *arg,
                bson_value_t *out, mf_error *err);
    /* the metadata kinds the expression asks for (MF_META_BIT) */
    uint32_t (*meta_kinds)(const void *x);
    void (*free)(void *x);
    void (*free_value)(bson_value_t *v);
    void *arg; /* borrowed: must outlive what is parsed with it */
} mf_expr_hooks;

/* Parse `filter`.  Errors are mongod's: BadValue (2) for an unknown or
 * malformed operator ("unknown operator: $foo", "$in needs an array", ...),
 * and the codes mongod gives for a bad regex or $type.  The matcher copies
 * what it needs: `filter` may be freed after.  `$expr` is refused here
 * (QueryFeatureNotAllowed 224 "$expr is not allowed in this context", as
 * mongod where a filter may not hold one: arrayFilters, partial indexes). */
int mf_matcher_parse(const bson_t *filter, mf_matcher **out, mf_error *err);

/* As mf_matcher_parse, with `$expr` (at the top level and inside $and /
 * $or / $nor) compiled through `hooks` (copied; its `arg` must outlive the
 * matcher).  The expression's parse errors are returned as they are;
 * inside $elemMatch, BadValue "$expr can only be applied to the top-level
 * document".  `hooks` NULL: as mf_matcher_parse. */
int mf_matcher_parse_ex(const bson_t *filter, const mf_expr_hooks *hooks, mf_matcher **out,
                        mf_error *err);

/* As mf_matcher_parse_ex, comparing strings under `coll` (NULL: the simple
 * collation), as mongod's CollatorInterface does for $eq, $ne, $gt, $gte,
 * $lt, $lte, $in, $nin, $all and $elemMatch -- strings nested in an
 * operand document or array included.  $regex, $type, $size, $exists,
 * $mod and the bit tests are never collated.  The matcher holds a
 * reference to `coll`.  An $expr's collation is the hooks' own. */
int mf_matcher_parse_coll(const bson_t *filter, const mf_expr_hooks *hooks,
                          const mf_collator *coll, mf_matcher **out, mf_error *err);

/* A collection validator: as mf_matcher_parse_coll, where $where, $text
 * and the near operators are refused as mongod refuses them in a validator
 * (BadValue 2, 5626500), keeping the operators as written so that
 * mf_matcher_explain can tell why a document fails. */
int mf_matcher_parse_validator(const bson_t *filter, const mf_expr_hooks *hooks,
                               const mf_collator *coll, mf_matcher **out, mf_error *err);

/* Why `doc` does not match the validator `m` (mf_matcher_parse_validator):
 * mongod's DocumentValidationFailure errInfo.details, appended to `out`
 * ({operatorName: "$eq", specifiedAs: {a: 1}, reason: "comparison
 * failed", consideredValue: 2}, {operatorName: "$and",
 * clausesNotSatisfied: [...]}, {operatorName: "$jsonSchema",
 * schemaRulesNotSatisfied: [...]}, ...). */
void mf_matcher_explain(const mf_matcher *m, const bson_t *doc, bson_t *out);

/* The collation a matcher compares under (NULL: simple). */
const mf_collator *mf_matcher_collation(const mf_matcher *m);

/* Whether `doc` matches, into `*matched`; `pos` (may be NULL) as for
 * mf_matcher_match_pos.  An `$expr` matches when its value is true as
 * mongod coerces it (false, null, undefined, missing and numeric zeros are
 * not).  Returns 0, or the first error an `$expr` evaluation met (then
 * `*matched` is false): mongod fails the query with it. */
int mf_matcher_eval(const mf_matcher *m, const bson_t *doc, int64_t *pos, bool *matched,
                    mf_error *err);

/* Whether `doc` matches; an `$expr` error counts as no match (use
 * mf_matcher_eval where it must be reported).  Thread-safe: one matcher
 * may serve many threads. */
/* A view of `m` in which $text matches no document (it matches every one
 * in `m`: the text scan applies it): what the other clauses of an OR that
 * holds a $text are judged by.  It borrows `m`'s tree (`m` must outlive
 * it); free it with mf_matcher_free.  NULL when out of memory. */
mf_matcher *mf_matcher_text_false(const mf_matcher *m);

bool mf_matcher_match(const mf_matcher *m, const bson_t *doc);

void mf_matcher_free(mf_matcher *m);

/* As mf_matcher_match; on a match, `*pos` (if not NULL) receives the index
 * of the array element through which the filter matched -- mongod's
 * "elemMatchKey", used by the positional `$` of update and projection --
 * or -1 when the match went through no array (and on no match).  The
 * position is that of the first array the path traverses; several
 * conditions each record theirs and the last wins, as in mongod ($or: the
 * clause that matched; negations record none). */
bool mf_matcher_match_pos(const mf_matcher *m, const bson_t *doc, int64_t *pos);

/* A $regex compiled as the matcher compiles it (its options i, m, s, x,
 * u; PCRE2 in UTF mode), to test strings that are not in a document: an
 * index scan's keys.  Errors: the matcher's (51108, 51091).  One user at
 * a time (it keeps its match data). */
typedef struct mf_regex mf_regex;
int mf_regex_new(const char *pattern, const char *options, mf_regex **out, mf_error *err);
bool mf_regex_match(mf_regex *r, const char *s, size_t len);
void mf_regex_free(mf_regex *r);

/* ------------------------------------------------------------- update */

typedef struct mf_update mf_update;

/* Parse an update document: operators ($set, $inc, ...) when its first
 * field starts with '$', else a replacement.  `array_filters` is the
 * arrayFilters array as a document ({"0": {...}, ...}) or NULL.  `update`
 * may be freed after.  Errors as mongod: FailedToParse (9) for an unknown
 * modifier, a non-document operand, an unused arrayFilters identifier, a
 * malformed array filter; ConflictingUpdateOperators (40); BadValue (2)
 * for an undeclared identifier or a bad operand; EmptyFieldName (56);
 * DollarPrefixedFieldName (52) for a '$' field of a replacement.  An empty
 * operand ({$set: {}}) is accepted and does nothing (mongod 5.0+). */
int mf_update_parse(const bson_t *update, const bson_t *array_filters, mf_update **out,
                    mf_error *err);

/* As mf_update_parse, under the collation `coll` (NULL: simple): it
 * orders and equates strings for $addToSet, $pull (its conditions too),
 * $pullAll, $min, $max, $push's $sort and the arrayFilters, as mongod's
 * update driver does.  The update holds a reference to `coll`. */
int mf_update_parse_coll(const bson_t *update, const bson_t *array_filters,
                         const mf_collator *coll, mf_update **out, mf_error *err);

/* Whether `u` replaces the document rather than modifying it. */
bool mf_update_is_replacement(const mf_update *u);

/* Whether `u` uses the positional `$` (the caller must then give `pos`). */
bool mf_update_needs_pos(const mf_update *u);

/* Apply `u` to `doc`, writing the new document into `out` (which the call
 * initialises; the caller destroys it, on error too).  `is_insert` is true
 * for the document an upsert inserts ($setOnInsert applies, and _id is
 * moved first).  `pos` is the matcher's position for `$` (-1 if none:
 * BadValue (2) if the update uses `$`).  `now_ms` is the time $currentDate
 * sets (a timestamp is Timestamp(now_ms / 1000, 1)).  `*changed` is false
 * when the result is the same document, byte for byte (the caller then
 * does not write).  A replacement keeps the old _id, first.  Errors:
 * ImmutableField (66) for a change to _id, PathNotViable (28),
 * TypeMismatch (14), BadValue (2), ConflictingUpdateOperators (40) for two
 * array updates reaching one element, InvalidIdField (53) for an array,
 * regex or undefined _id in an inserted or replaced document, 17419 when
 * the result is larger than 16 MiB.  Thread-safe: one mf_update may be
 * applied by many threads. */
int mf_update_apply(const mf_update *u, const bson_t *doc, bool is_insert, int64_t pos,
                    int64_t now_ms, bson_t *out, bool *changed, mf_error *err);

/* Replace `doc` by `repl`, the document an update pipeline made of it, as
 * mongod's ObjectReplaceExecutor: `repl`'s fields, _id first -- `doc`'s
 * _id when `repl` has none -- into `out` (initialised by the call; the
 * caller destroys it, on error too).  `*changed` as for mf_update_apply.
 * Errors: ImmutableField (66) "After applying the update, the (immutable)
 * field '_id' was found to have been altered to _id: 2", InvalidIdField
 * (53), 17419 when the result is larger than 16 MiB. */
int mf_update_apply_doc(const bson_t *doc, const bson_t *repl, bson_t *out, bool *changed,
                        mf_error *err);

/* The seed document of an upsert: the equality fields of `filter`
 * ({a: 1}, {a: {$eq: 1}}, {a: {$in: [1]}}, through $and and a one-clause
 * $or; dotted paths become nested documents), _id first, the other fields
 * in update order, into `out` (initialised by the call; the caller
 * destroys it, on error too).  Errors as mongod when the equalities
 * conflict: NotSingleValueField (54).
 *
 * An upsert is: seed = mf_update_upsert_seed(filter); then, for an
 * operator update, mf_update_apply(u, seed, is_insert=true, pos=-1, ...);
 * for a replacement, the same call (the replacement keeps the seed's _id).
 * The caller then adds an ObjectId _id if the result has none. */
int mf_update_upsert_seed(const bson_t *filter, bson_t *out, mf_error *err);

void mf_update_free(mf_update *u);

/* --------------------------------------------------------- projection */

typedef struct mf_projection mf_projection;


/* What a projection specification means: find's projection, the
 * aggregation $project (find's operators $slice / $elemMatch / positional
 * are expressions or errors there) or $addFields (every field is computed,
 * the document is otherwise kept). */
typedef enum { MF_PROJ_FIND, MF_PROJ_AGG, MF_PROJ_ADD_FIELDS } mf_proj_mode;

/* Parse a find projection (mongod 7.0's projection_parser): inclusion or
 * exclusion (any truthy/falsy number or bool), _id included unless
 * {_id: 0}, dotted paths and sub-objects, find's $slice, $elemMatch
 * (top-level fields only) and the positional `a.b.$`.  `filter` is the
 * query; it may be NULL only when the projection has no positional `$`
 * (else 51050).  Errors are mongod's: 31254 / 31253 mixing exclusion and
 * inclusion, 31249 / 31250 path collisions, 40352 / 40353 / 15998 / 16410
 * bad paths, 51270 an empty sub-projection, 31325 an unknown $-operator,
 * 31257-31259 / 31272 / 31273 / 28667 a bad $slice, 31274 / 31275 a bad
 * $elemMatch, 31276 / 31255 / 31256 / 31271 / 31308 / 31394 / 31395 a bad
 * positional, 31252 / 31310 an expression in an exclusion.  A computed
 * field -- an aggregation expression ({a: {$add: ...}}, $literal, $meta)
 * or a literal ({a: "x"}) -- passes those checks and is then refused with
 * NotImplemented (238): there is no expression evaluator yet.  The
 * projection copies what it needs from `spec` and `filter`. */
int mf_projection_parse(const bson_t *spec, const bson_t *filter, mf_projection **out,
                        mf_error *err);

/* As mf_projection_parse, with computed fields evaluated through `hooks`
 * (copied; NULL: refused as above) and the meaning of `mode`. */
int mf_projection_parse_ex(const bson_t *spec, const bson_t *filter, const mf_expr_hooks *hooks,
                           mf_proj_mode mode, mf_projection **out, mf_error *err);
/* As mf_projection_parse_ex, with find's $elemMatch comparing strings
 * under `coll` (NULL: simple), the query's collation. */
int mf_projection_parse_coll(const bson_t *spec, const bson_t *filter,
                             const mf_expr_hooks *hooks, mf_proj_mode mode,
                             const mf_collator *coll, mf_projection **out, mf_error *err);

/* Whether the projection uses the positional `$` (the caller must then
 * give the matcher's `pos`). */
bool mf_projection_needs_pos(const mf_projection *p);

/* Whether the projection is simple (inclusions and exclusions only) and
 * leaves the value at dotted `path` as it is -- mongod's condition for
 * projecting before a sort rather than after it. */
bool mf_projection_keeps(const mf_projection *p, const char *path);

/* Project `doc` into `out` (initialised by the call; the caller destroys
 * it, on error too).  `pos` is the matcher's position for `$` (-1 if
 * none).  Runtime errors are mongod's bare messages: 51246 "positional
 * operator '.$' couldn't find a matching element in the array" when the
 * positional path meets an array and pos < 0, 51247 when pos is past the
 * projected array.  mongod reports them prefixed by the command layer
 * ("Executor error during find command :: caused by :: ...").
 * Thread-safe: one projection may serve many threads. */
int mf_projection_apply(const mf_projection *p, const bson_t *doc, int64_t pos, bson_t *out,
                        mf_error *err);

/* As mf_projection_apply, with the row's metadata (NULL: none) for
 * {$meta: ...} fields and expressions: a kind the row lacks gives no field
 * (the caller refuses first what mongod refuses: 40218, meta.h). */
int mf_projection_apply_meta(const mf_projection *p, const bson_t *doc, int64_t pos,
                             const mf_meta *meta, bson_t *out, mf_error *err);
/* The metadata kinds the projection asks for (a set of MF_META_BIT), in
 * its $meta fields and its computed fields' expressions. */
uint32_t mf_projection_meta_needs(const mf_projection *p);
/* Whether it is an inclusion projection (else an exclusion). */
bool mf_projection_is_inclusion(const mf_projection *p);
void mf_projection_free(mf_projection *p);

/* --------------------------------------------------------------- sort */

typedef struct mf_sort mf_sort;

/* Parse a sort specification {a: 1, "b.c": -1}.  Errors as mongod's:
 * 15974 "Illegal key in $sort specification: a: \"x\"" for a non-number,
 * 15975 "$sort key ordering must be 1 (for ascending) or -1 (for
 * descending)" (doubles and decimals are truncated first, as mongod's
 * safeNumberLong), the path errors of FieldPath (40352 empty, 16410
 * "$"-prefixed, ...), 17312 / FailedToParse / 31138 for a malformed
 * {$meta: ...} (31138; searchScore 31218, searchHighlights 31219 by name;
 * textScore, randVal and geoNearDistance are parts that sort highest
 * first).
 * An empty specification is valid (no keys: every document ties); the
 * aggregation $sort stage must itself refuse it (15976). */
int mf_sort_parse(const bson_t *spec, mf_sort **out, mf_error *err);

/* As mf_sort_parse, with strings ordered by `coll` (NULL: simple): their
 * sort keys go into the key in place of their bytes.  The sort holds a
 * reference to `coll`. */
int mf_sort_parse_coll(const bson_t *spec, const mf_collator *coll, mf_sort **out,
                       mf_error *err);
const mf_collator *mf_sort_collation(const mf_sort *s);

/* The number of sort keys (0 for {}). */
size_t mf_sort_nkeys(const mf_sort *s);
/* The dotted path of key `i` (NULL past the last). */
const char *mf_sort_path(const mf_sort *s, size_t i);

/* Append the sort key of `doc` to `key`: keys compare with memcmp in the
 * order the sort asks for.  As mongod, the key is the least of the index
 * keys the pattern would generate for `doc`: an array sorts by its least
 * element ascending and its greatest descending (paths through the same
 * array take their values from the same element), an empty array as
 * undefined (before null), missing as null.  Errors: BadValue (2) "cannot
 * sort with keys that are parallel arrays", 16746 for a numeric path
 * component that is also a field of an array element, InternalError on
 * out of memory; `key` is then as before the call.  Thread-safe. */
int mf_sort_key(const mf_sort *s, const bson_t *doc, mf_buf *key, mf_error *err);

/* As mf_sort_key, with the row's metadata (NULL: none) for {$meta: ...}
 * parts (highest first; a kind the row lacks sorts as missing, below
 * null).  The field parts' key is the least over them, with the $meta
 * values put where their parts stand (mongod's SortKeyGenerator). */
int mf_sort_key_meta(const mf_sort *s, const bson_t *doc, const mf_meta *meta, mf_buf *key,
                     mf_error *err);
/* The values the sort compares for `doc`, as {$meta: "sortKey"} shows
 * them: an array of one value per part -- a field's value in the
 * document's least key (an array's least element ascending, greatest
 * descending; missing is null, an empty array undefined), a $meta part's
 * value or null.  Into `out` (owned: mf_value_free / bson_value_destroy).
 * Errors as mf_sort_key's. */
int mf_sort_key_values(const mf_sort *s, const bson_t *doc, const mf_meta *meta, bson_value_t *out,
                       mf_error *err);
/* The metadata kinds the sort's {$meta: ...} parts ask for (MF_META_BIT). */
uint32_t mf_sort_meta_needs(const mf_sort *s);
void mf_sort_free(mf_sort *s);

/* The sorter: (key, document) pairs in, documents out in key order (ties
 * in the order added).  Each record counts its key and document lengths
 * plus a small overhead against `mem_limit` bytes; past it, with
 * `allow_disk` it spills sorted runs to unnamed temporary files in
 * `tmpdir` (NULL: $TMPDIR or /tmp; the files are unlinked as soon as
 * created, so nothing is left behind), else the add fails with
 * QueryExceededMemoryLimitNoDiskUseAllowed (292) "Sort exceeded memory
 * limit of <mem_limit> bytes, but did not opt in to external sorting."
 * (the command layer adds mongod's "Executor error during find command ::
 * caused by :: ").  With `limit` > 0 only the first `limit` documents are
 * kept (a top-k heap; the memory limit applies to what is kept).  Spill
 * I/O errors: OutOfDiskSpace (14031) or InternalError.  Not thread-safe.
 * mf_sorter_new returns NULL on out of memory. */
typedef struct mf_sorter mf_sorter;

mf_sorter *mf_sorter_new(size_t mem_limit, bool allow_disk, const char *tmpdir, int64_t limit);
int mf_sorter_add(mf_sorter *s, const void *key, size_t klen, const void *doc, size_t dlen,
                  mf_error *err);
/* After the last add. */
int mf_sorter_finish(mf_sorter *s, mf_error *err);
/* The next document, valid until the next call; `*valid` false at the end. */
int mf_sorter_next(mf_sorter *s, const uint8_t **doc, size_t *dlen, bool *valid,
                   mf_error *err);
/* The same, with the record's key (valid as long as the document). */
int mf_sorter_next_keyed(mf_sorter *s, const uint8_t **key, size_t *klen, const uint8_t **doc,
                         size_t *dlen, bool *valid, mf_error *err);
/* How many runs are on disk (for tests and explain). */
size_t mf_sorter_nruns(const mf_sorter *s);
void mf_sorter_free(mf_sorter *s);

/* -------------------------------------------------------------- indexes */

/* An index's tree (DESIGN.md section 3):
 *   unique (the _id index too)   key = the index key          value = RecordId
 *   not unique                   key = index key + RecordId   value = RecordId
 * RecordIds are 8 bytes, big endian (mf_record_id_encode).  Index keys are
 * self-delimiting, so a prefix of fields bounds a range of either kind.
 *
 * An index as the planner and the write path see it, parsed from its
 * catalog spec (mf_index_info.spec: the BSON spec listIndexes shows, plus
 * the server's own fields below).  index.c. */
typedef struct mf_index_type mf_index_type; /* its kind: index_type.h */

/* The kind named `plugin` (IndexNames::findPluginName's answer: "" for the
 * b-tree), or NULL when this server does not build it. */
const mf_index_type *mf_index_type_find(const char *plugin);

typedef struct mf_index_desc {
    const mf_index_type *type; /* the b-tree, ... (the key pattern's plugin) */
    char *name;
    mf_tree_id tree;
    bson_t *key;          /* the key pattern {a: 1, "b.c": -1} (owned) */
    size_t nfields;
    char **paths;         /* the pattern's dotted paths, in order */
    bool *desc;           /* per field: descending */
    bool unique, sparse, hidden;
    bool prepare_unique;  /* not unique, but refuses new duplicate keys
                             (collMod prepareUnique; the write path checks) */
    bool is_id;           /* the _id index */
    int64_t expire_after; /* expireAfterSeconds, or -1 */
    mf_matcher *partial;  /* partialFilterExpression, or NULL */
    bson_t *partial_spec; /* its document (owned), or NULL */
    uint32_t multikey;    /* bit i: field i has met an array (server field
                             "multikeyPaths" in the stored spec) */
    bool building;        /* an interrupted build (server field "building") */
    mf_collator *coll;    /* the index's collation (one reference), or NULL:
                             simple; its keys encode strings as sort keys */
    uint32_t hashed;      /* bit i: field i is "hashed" (its key is the hash
                             of the value, index_hashed.c) */
    void *kind;           /* what the index's kind keeps of its spec (its
                             desc_init's, index_type.h), or NULL */
    uint32_t geo;         /* bit i: field i is "2dsphere" or "2d": its keys are
                             cells of the plane or the sphere, not values, and
                             only a geo condition bounds it */
} mf_index_desc;

/* Validate one createIndexes spec and complete it as mongod 7.0 does (v: 2
 * when absent; the field order listIndexes shows: v, unique: true, key,
 * name, then the other options as given, then a collation; ns, dropDups
 * and a simple collation dropped), into `out` (initialised here, on error
 * too: the caller destroys it).  The spec must have a name, as mongod
 * requires (FailedToParse 9); see mf_index_name_generate.  Errors and
 * messages as mongod's, "Error in specification ... :: caused by :: "
 * where mongod adds it: FailedToParse (9), CannotCreateIndex (67),
 * BadValue (2), TypeMismatch (14), InvalidIndexSpecificationOption (197),
 * QueryFeatureNotAllowed (224), the matcher's errors for a bad
 * partialFilterExpression, the collation's errors (mf_collator_new)
 * prefixed "failed to add collation information to index spec for index
 * creation: <spec> :: caused by :: ".  A collation is stored in full
 * (mf_collator_to_bson), last.  Index kinds without a row in the
 * index-type table (index_type.c) are refused with 67; a kind's own
 * refusals of a valid spec follow, undecorated (hashed: 31303, 16764).
 * Stateless: the conflicts with existing indexes are
 * mf_index_spec_conflict's.  The collection is taken to have the simple
 * collation (see mf_index_spec_normalize_coll). */
int mf_index_spec_normalize(const bson_t *in, bson_t *out, mf_error *err);

/* As mf_index_spec_normalize, for a collection whose default collation is
 * `coll_default` (NULL: simple), as createIndexes does: a v: 2 spec
 * without a collation gets the default's full spec; the _id index must
 * have the default (else BadValue "The _id index must have the same
 * collation as the collection. Index collation: {...}, collection
 * collation: {...}"). */
int mf_index_spec_normalize_coll(const bson_t *in, const mf_collator *coll_default, bson_t *out,
                                 mf_error *err);

/* The _id index's spec for a new collection of default collation `coll`
 * (NULL: simple), as mongod's getDefaultIdIndexSpec after _fixIndexSpec:
 * {v: 2, key: {_id: 1}, name: "_id_", collation?: <full spec>}, into
 * `out` (initialised here; the caller destroys it). */
void mf_index_id_spec(const mf_collator *coll, bson_t *out);

/* The name drivers and the shell give an index when the request names
 * none ("a_1_b_-1", "a.b_1", "c_hashed"): appended to `out`, NUL-terminated
 * (the NUL not counted in out->len).  0, or -1 on out of memory.  mongod
 * itself requires a name: mf_index_spec_normalize refuses a spec without
 * one (FailedToParse), as mongod's createIndexes does. */
int mf_index_name_generate(const bson_t *key, mf_buf *out);

/* Compare a new (normalized) spec with an existing (stored) one, as
 * mongod's _doesSpecConflictWithExisting: 0 and `*same` when they are the
 * same index (createIndexes then does nothing), 0 and not `*same` when
 * unrelated, or IndexOptionsConflict (85) / IndexKeySpecsConflict (86) with
 * mongod's messages.  The server fields of `existing` are ignored.  An
 * index's signature is its key pattern, collation, partial filter and the
 * truth of unique and sparse; hidden and background never distinguish.
 * mongod checks the name against every index before any key pattern: call
 * this first with the existing index of the same name, if any.  Two
 * identical specs in one request are mongod's IndexAlreadyExists (68)
 * "Identical index already exists: <name>" -- the caller's to report. */
int mf_index_spec_conflict(const bson_t *existing, const bson_t *incoming, bool *same,
                           mf_error *err);

/* Parse a stored spec (`name` NULL: the spec's own).  Its collation is
 * parsed into `coll` (the collator's errors, e.g. IncompatibleCollation-
 * Version 161 for another ICU's version), and the partial filter compiled
 * under it.  DataCorruptionDetected when the spec has no key pattern.
 * mf_index_desc_clear frees what it owns (and zeroes `d`). */
int mf_index_desc_init(mf_index_desc *d, const char *name, mf_tree_id tree, const uint8_t *spec,
                       size_t spec_len, mf_error *err);
void mf_index_desc_clear(mf_index_desc *d);

/* The keys a document has in an index: each is the concatenation of the
 * key encodings (mf_bsonx_key_append_coll under the index's collation) of
 * its fields, descending ones inverted -- without any RecordId suffix.  Arrays make one key per
 * element (distinct keys only); at most one field may be an array
 * (CannotIndexParallelArrays 171, mongod's message); a missing field is
 * null; an empty array is undefined.  A sparse index gives no keys to a
 * document missing every field; a partial index none to a document its
 * filter rejects.  `*multikey` is set (not or-ed) to a bit per field that
 * an array may give several values (mongod's multikeyPaths; a positional
 * component such as "a.0" does not), 0 when there are no keys.  `out` is
 * emptied first; its keys come out distinct, in ascending memcmp order.
 * Errors: 171, 16746 (a numeric component that is also a field of an
 * array's element), KeyTooLong (17280) for a key longer than its tree
 * takes (MF_BTREE_MAX_KEY, less the RecordId in a non-unique index),
 * InternalError on out of memory; `out` is then empty.
 * Thread-safe for one `d` and distinct `out`s. */
typedef struct mf_keyset {
    mf_buf *keys;
    size_t n, cap;
} mf_keyset;

int mf_index_keys(const mf_index_desc *d, const bson_t *doc, mf_keyset *out, uint32_t *multikey,
                  mf_error *err);
/* The values of the key of `doc` that is index entry `entry` (`entry_len`
 * bytes: the key, then a RecordId for a non-unique index), appended to
 * `out` named by the key pattern's fields, as mongod's index key metadata
 * (find's returnKey): the element of an array the entry was made from,
 * null for a missing field.  Strings are the document's, where mongod's,
 * under a collation, are the collation's comparison keys.  Appends
 * nothing if no key of `doc` is that entry. */
int mf_index_key_values(const mf_index_desc *d, const bson_t *doc, const uint8_t *entry,
                        size_t entry_len, bson_t *out, mf_error *err);
void mf_keyset_clear(mf_keyset *k); /* empties it, keeping its memory */
void mf_keyset_free(mf_keyset *k);

/* ------------------------------------------------------- plan and scan */

/* A collection's records: RecordId (8 bytes, big endian) -> document. */
void mf_record_id_encode(uint64_t rid, uint8_t out[8]);
uint64_t mf_record_id_decode(const uint8_t *key);

/* The tree of index `name` of `c`, or 0. */
mf_tree_id mf_coll_index_tree(const mf_coll *c, const char *name);

typedef struct mf_scan mf_scan;

typedef struct mf_scan_row {
    uint64_t rid;
    bson_t doc;  /* static, into the mapping: valid while the lock is held */
    const uint8_t *data; /* bson_get_data(&doc), for the callers that copy it
                            per row (a call into libbson saved per document) */
    int64_t pos; /* the matcher's array position, if asked for; else -1 */
    double score; /* a $text query's score of the document (mf_scan_is_text) */
    double dist;  /* a $near query's distance of the document, in the query's
                     units (mf_scan_is_near) */
    bool scored;  /* whether `score` is the row's: a text scan's row (an OR
                     beside it gives others); read only when mf_scan_is_text */
} mf_scan_row;

/* Counters of a scan, for explain's executionStats. */
typedef struct mf_scan_stats {
    uint64_t keys_examined, docs_examined;
    uint64_t keys_only; /* rows answered by their index key alone */
    uint64_t n_returned;
    uint64_t seeks;                    /* index cursor seeks */
    uint64_t dups_tested, dups_dropped; /* multikey deduplication */
    uint64_t saves;                    /* mf_scan_release calls (saveState) */
    uint64_t works;                    /* calls into the scan loop */
    uint64_t time_ns;                  /* time spent in mf_scan_next */
} mf_scan_stats;

/* Choose the access path for `filter` on `c` (collection lock held).
 *
 * `idx`/`nidx` are the collection's parsed index descriptors (the _id
 * index among them, is_id set), borrowed for the call: the scan copies
 * what it keeps.  With `nidx` 0 the _id index alone is used, found in
 * `c`'s catalog entry (the behaviour before secondary indexes); `c` is
 * consulted for nothing else, and may be NULL when `nidx` > 0 (planning
 * only, as the test hook does).
 *
 * The choice (no trial runs): bounds are built for each usable index from
 * the equality, $in, $gt/$gte/$lt/$lte, $exists, prefix-regex and
 * $elemMatch predicates at the top of `filter` and in its top-level $and,
 * on the index's leading fields.
 * Preferred, in order: equality on every field of a unique index; more
 * equality-bound leading fields; a range on the next field; providing
 * `sort`; fewer fields; the smaller name.  Hidden indexes and unfinished
 * builds are never used; a sparse index only for predicates that cannot
 * match a missing field; a partial index only when `filter` implies its
 * partialFilterExpression.  No usable index: a rooted $or whose every
 * clause, planned alone, uses an index is an OR of those scans (each
 * document once); else a collection scan.
 *
 * `hint` (a name, a key pattern, or {$natural: +-1}; an empty document is
 * no hint) forces the index, with bounds when the filter gives some, the
 * whole index otherwise.  A hint naming no usable index is BadValue (2)
 * "hint provided does not correspond to an existing index"; a key
 * pattern matching two indexes is IndexNotFound (27).
 *
 * `coll` is the query's collation (NULL: simple).  An index of another
 * collation is used only for predicates whose operand is not a string,
 * symbol, document or array (mongod's rule); a hint to it is obeyed, with
 * bounds from those predicates alone.  Bounds on an index with a
 * collation are encoded under it (explain shows a string bound as
 * CollationKey(0x<sort key>) and the IXSCAN's "collation").  A partial
 * index's filter is implied only under the index's collation.
 *
 * `*sorted` is set when the scan returns documents in `sort` order (the
 * index provides it, in either direction, after equality-bound fields;
 * never through a multikey field, nor from an index of another collation
 * than `coll`), so no blocking sort is needed.
 *
 * Every candidate document is fetched and given to the matcher: the index
 * only narrows what is read.  A scan over a multikey index returns each
 * document once (it remembers the RecordIds returned, across batches). */
int mf_scan_new(mf_coll *c, const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                mf_scan **out, bool *sorted, mf_error *err);

/* What some commands add to a scan's plan (mf_scan_new_ex); zeroed:
 * nothing, and mf_scan_new_ex is mf_scan_new.
 *
 * `min` and `max` (find's; NULL or empty: not given): as mongod, they
 * need a hint naming an index (51173 without one; NoQueryExecutionPlans
 * (291) with {$natural: +-1}) and must name its key pattern's fields, all
 * and in order, with no string, document or array unless the query's
 * collation is the index's (51174).  The scan reads the index's keys from
 * min (included; an empty min: the first key) to max (excluded; an empty
 * max: the last key, MaxKey, itself excluded), compared as whole keys in
 * the index's order; min must come first (51175).  The whole filter is
 * the matcher's; explain's indexBounds is {}.  The index gives `sort` as
 * it would with no predicate.
 *
 * `distinct_key` (distinct's field): with an empty filter and no hint,
 * the index with the fewest fields whose first field it is (not partial,
 * hidden or unfinished; of the query's collation; that field not
 * multikey) is scanned whole, where the filter alone would scan the
 * collection (mongod's "simple distinct").  Then, when the scan is an
 * index scan whose bounds answer the filter exactly, of the query's
 * collation, forward, and the key is one of its fields with neither it
 * nor a field before it multikey, it is a DISTINCT_SCAN: after each
 * document it returns, it seeks past every key sharing that document's
 * values of the fields up to the key's -- unless the document lacks the
 * key (its null key may be another's explicit null). */
/* The plan cache (plan.c): the winners of multi-planning by query shape,
 * shared by the threads of an instance. */
typedef struct mf_plan_cache mf_plan_cache;
mf_plan_cache *mf_plan_cache_new(void);
void mf_plan_cache_free(mf_plan_cache *pc);
/* planCacheClear: drop the entries of collection `c`; with `one`, only
 * the entry of the query shape `filter`, `sort`, `projection`, `coll`
 * under the collection's indexes `idx` (none if it has none). */
void mf_plan_cache_clear(mf_plan_cache *pc, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                         bool one, const bson_t *filter, const bson_t *sort,
                         const bson_t *projection, const mf_collator *coll);
/* $planCacheStats: append to the array `out` one document per entry of
 * collection `c` under its indexes `idx` as they are now: {version,
 * queryHash, planCacheKey, isActive, works, timeOfCreation,
 * createdFromQuery: {query, sort, projection}, cachedPlan, indexFilterSet,
 * estimatedSizeBytes, host}.  Returns 0, or -1 (out of memory). */
int mf_plan_cache_stats(mf_plan_cache *pc, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                        const char *host, bson_t *out);

/* A transaction's read view (coll/txn.c): what a read inside it sees
 * where the trees hold newer versions or lack its own writes.  A scan with
 * a view gives the trees' rows the view does not hide, then the view's
 * own documents (`extras`) that the matcher accepts and that the scan did
 * not give already; its rows then come in no index's order (the caller
 * sorts), and count and distinct scans read documents. */
typedef struct mf_read_view {
    /* whether the tree's record `rid` of `c` is not the version to see */
    bool (*hides)(void *arg, const mf_coll *c, uint64_t rid);
    /* each (rid, document) the view gives instead: add(to, rid, doc) */
    int (*extras)(void *arg, const mf_coll *c,
                  int (*add)(void *to, uint64_t rid, const bson_t *doc, mf_error *err),
                  void *to, mf_error *err);
    void *arg;
} mf_read_view;

typedef struct mf_scan_extra {
    const bson_t *min, *max;
    const char *distinct_key;
    /* The caller asks mf_scan_sorted after mf_scan_decide, before it
     * chooses to sort: trials may then differ in giving the sort (an index
     * read in the sort's order against a bounded one and a blocking sort,
     * as mongod's multi-planner weighs them). */
    bool sort_trials;
    mf_plan_cache *cache; /* where the winners of trial runs are kept, or NULL */
    /* find's projection, part of the query's shape in the cache (as
     * mongod's key holds it), or NULL */
    const bson_t *projection;
    /* Called with the index trial runs chose, when they have ($indexStats
     * counts its use then, not choose()'s pick); NULL: not told. */
    void (*chosen)(void *arg, mf_coll *c, const char *index);
    void *chosen_arg;
    /* An explain's plan: the query's hashes are computed for it
     * (mf_scan_hashes), as they are for a query that uses the cache. */
    bool explain;
    /* A transaction's read view (borrowed: it outlives the scan), or NULL. */
    const mf_read_view *view;
    /* A $text query whose caller asks for the score beyond its sort and
     * projection (an aggregation's later stages): TEXT_OR, not OR/FETCH. */
    bool text_score;
} mf_scan_extra;

int mf_scan_new_ex(mf_coll *c, const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                   const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                   const mf_scan_extra *x, mf_scan **out, bool *sorted, mf_error *err);

/* find's check of `min` and `max` before planning: when both are given
 * (not empty) they name the same fields in the same order, else 51176. */
int mf_minmax_check(const bson_t *min, const bson_t *max, mf_error *err);

/* The next document that `m` accepts (all, if `m` is NULL), with the
 * collection lock held; `*valid` false at the end. */
int mf_scan_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m, mf_scan_row *row,
                 bool *valid, mf_error *err);

/* The rows mf_scan_next would give, each to `sink` as it comes, until
 * the sink sets `*stop` or fails (its error returned), or the scan ends
 * (`*ended`).  The mf_scan_row lives only during the call; its document
 * stays valid as mf_scan_next's do, while the collection lock is held.
 * For a caller that takes many rows: one call instead of one per row. */
typedef int (*mf_scan_sink)(void *arg, const mf_scan_row *row, bool *stop, mf_error *err);
int mf_scan_each(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m, mf_scan_sink sink,
                 void *arg, bool *ended, mf_error *err);

/* For counting: when the index bounds answer the whole filter, rows come
 * from index keys alone (their `doc` empty), and no FETCH is explained.
 * Bounds that are one interval of keys (mongod's isSingleInterval: point
 * fields, then at most one range, then fields of every value) are a
 * COUNT_SCAN from a start key to an end key, which examines no key past
 * the end; other bounds an IXSCAN. */
void mf_scan_count_only(mf_scan *s, bool on);

/* Keep the time spent in mf_scan_next (explain's executionTimeMillis);
 * off by default: two clock reads per row. */
void mf_scan_timed(mf_scan *s, bool on);

/* maxTimeMS: each work of the scan, its trials and its $or's clauses
 * counts into the operation's deadline `d` (mf_deadline_ok), and once it
 * has passed mf_scan_next, mf_scan_each and mf_scan_decide fail with
 * MaxTimeMSExpired (50) "operation exceeded time limit" -- so a scan that
 * finds no row for a long stretch stops too.  The caller owns `*d`, which
 * may change between calls (a cursor's getMore sets the time it has left)
 * and must outlive the scan's use.  NULL: no limit (the default). */
void mf_scan_deadline(mf_scan *s, mf_deadline *d);

/* Whether `filter` has a $text (anywhere a filter may hold one). */
bool mf_filter_has_text(const bson_t *filter);

/* Whether the scan is a $text query's: its rows carry their score
 * (mf_scan_row.score), mongod's textScore metadata, when `scored` (the
 * rows of an OR's other clauses beside the text scan have none). */
bool mf_scan_is_text(const mf_scan *s);

/* Whether `filter`'s top level holds a $near, $nearSphere or $geoNear
 * condition ({path: {$near: ...}}, the near operator first; in the filter
 * or a clause of a $and there, or of a $or of one clause, as mongod's
 * optimizer flattens them), which the planner answers with a search by
 * distance (plan_near.c). */
bool mf_filter_has_near(const bson_t *filter);
/* Whether `filter` holds a near condition anywhere (where mongod's
 * parser refuses them, a $match: 5626500). */
bool mf_filter_any_near(const bson_t *filter);
/* mongod's CanonicalQuery checks of a query's near conditions, BadValue,
 * in its order: "Too many geoNear expressions" (more than one anywhere),
 * "geoNear must be top-level expr", "geoNear expression not allowed with
 * $natural sort order" / "... with $natural hint", "text and geoNear not
 * allowed in same query" (`text`: the query has $text). */
int mf_filter_near_check(const bson_t *filter, bool text, bool natural_sort, bool natural_hint,
                         mf_error *err);
/* `filter` without that condition, into `out` (initialised here): what
 * the matcher of a near query judges (mongod's GeoNear match expression
 * matches every document; the search decides).  0 or -1. */
int mf_filter_strip_near(const bson_t *filter, bson_t *out);
/* Whether the scan is a $near query's: its rows come by distance and
 * carry it (mf_scan_row.dist). */
bool mf_scan_is_near(const mf_scan *s);
/* For a $near scan: the value of the near path of `doc` (one of its
 * rows) nearest to the centre, as {"": value} into `out` (initialised
 * here; empty for another scan, or no such value): $geoNear's
 * includeLocs.  0 or -1 (out of memory). */
int mf_scan_near_loc(const mf_scan *s, const bson_t *doc, bson_t *out);

/* Whether rows carry the matcher's array position (off by default: it
 * costs a little on every document). */
void mf_scan_want_pos(mf_scan *s, bool want);

/* Forget tree positions before the collection lock is released; the next
 * mf_scan_next seeks again past the last document returned. */
void mf_scan_release(mf_scan *s);

/* Whether the scan has reached its end. */
bool mf_scan_eof(const mf_scan *s);
/* Make a forward collection scan tailable (a tailable cursor over a capped
 * collection): restored between batches, it fails with CappedPositionLost
 * (136) when the record it read last is gone; at its end, mf_scan_tail_on
 * lets it look again past that record at the next call. */
void mf_scan_tail(mf_scan *s);
/* A tailable scan at its end: on again (the next call reads what came
 * after the last record); false when it never read a record (the
 * collection was empty: mongod closes such a cursor). */
bool mf_scan_tail_on(mf_scan *s);
/* The index key of the row the scan last returned (`row`, not released
 * since), into `out` (initialised here, on error too): {} for a
 * collection scan, as mongod's returnKey. */
int mf_scan_return_key(const mf_scan *s, const mf_scan_row *row, bson_t *out, mf_error *err);

/* "COLLSCAN", "IDHACK", "IXSCAN", "DISTINCT_SCAN" or "OR", for explain
 * and logs. */
const char *mf_scan_describe(const mf_scan *s);

/* mongod's planSummary: the plan's leaves, "COLLSCAN", "IDHACK",
 * "IXSCAN { a: 1 }", "COUNT_SCAN { a: 1 }", "DISTINCT_SCAN { a: 1 }", an
 * OR's joined by ", "; into `out` (capacity `cap` > 0), cut to fit. */
void mf_scan_plan_summary(const mf_scan *s, char *out, size_t cap);

/* An OR's scans, one per clause of the filter's $or (0 for other scans). */
size_t mf_scan_nkids(const mf_scan *s);
const mf_scan *mf_scan_kid(const mf_scan *s, size_t i);

/* The name of the index the scan reads, or NULL for a collection scan;
 * valid until mf_scan_free. */
const char *mf_scan_index_name(const mf_scan *s);

/* Append the scan's plan to `out` as mongod's explain shows a winning
 * plan stage: {stage: "COLLSCAN", filter?, direction}, {stage: "IDHACK"},
 * or {stage: "FETCH", filter?, inputStage: {stage: "IXSCAN", keyPattern,
 * indexName, isMultiKey, multiKeyPaths, isUnique, isSparse, isPartial,
 * indexVersion: 2, direction, indexBounds: {a: ["[1, 1]", "(3, inf.0]"]}}}.
 * With `stats`, each stage also carries its executionStats counters
 * (nReturned, executionTimeMillisEstimate, works, keysExamined,
 * docsExamined ...).  The FETCH filter is the part of the query the
 * bounds do not answer exactly, top-level conditions as given.  Returns 0,
 * or MF_InternalError when libbson could not append (out of memory). */
int mf_scan_explain(const mf_scan *s, bool stats, bson_t *out);
/* Choose among the candidate plans now, by trial runs on the data (as the
 * first mf_scan_next does): for explain without execution, so that it
 * shows the plan a run would use.  Errors: those of the trial runs. */
int mf_scan_decide(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m, mf_error *err);
/* Whether trial runs are still to choose the index (mf_scan_index_name
 * names choose()'s pick until then). */
bool mf_scan_undecided(const mf_scan *s);
/* Whether the trials still to run differ in giving the sort: then only
 * after mf_scan_decide does mf_scan_sorted say whether the rows come in
 * the sort's order. */
bool mf_scan_sort_undecided(const mf_scan *s);
/* Whether the scan (once decided) returns its rows in the sort's order. */
bool mf_scan_sorted(const mf_scan *s);
/* The plans not chosen, each as mf_scan_explain(false) writes it, appended
 * to array `arr` (explain's rejectedPlans).  Returns 0, or -1 (out of
 * memory). */
int mf_scan_explain_rejected(const mf_scan *s, bson_t *arr);

/* Append to array `arr` each candidate's trial, as explain's
 * allPlansExecution shows them: {nReturned, executionTimeMillisEstimate,
 * totalKeysExamined, totalDocsExamined, score, executionStages}, the
 * winner's first; nothing when no trials chose (one plan).  Returns 0, or
 * -1 (out of memory). */
int mf_scan_explain_all_plans(const mf_scan *s, bson_t *arr);

/* The query's queryHash and planCacheKey as mongod's explain and
 * $planCacheStats show them (printed as 8 hex digits); false when they
 * were not computed (mf_scan_extra: neither explain nor a plan cache). */
bool mf_scan_hashes(const mf_scan *s, uint32_t *query_hash, uint32_t *plan_cache_key);
/* A trial ends when a plan has returned `n` rows (a limit or a first
 * batch below mongod's 101). */
void mf_scan_trial_results(mf_scan *s, uint64_t n);
const mf_scan_stats *mf_scan_get_stats(const mf_scan *s);
void mf_scan_free(mf_scan *s);

#endif /* MF_QUERY_H */
