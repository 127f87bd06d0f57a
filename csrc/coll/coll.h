/*
 * coll.h -- the collection layer: what the commands do to a collection,
 * as plain C over the storage engine and the query engine.
 *
 * Layers (DESIGN.md section 2): command/ parses a request, calls this layer
 * and shapes the reply; this layer owns everything about a collection that
 * is not a request's syntax:
 *
 *   indexes.c  a collection's parsed indexes (mf_cl_indexes) and what a
 *              unique index refused (mf_cl_dup)
 *   write.c    the one write path: a document with all its index entries
 *              as one engine write (insert, replace, delete); RecordIds;
 *              the stored form of a document; bounded collections' trim
 *   scan.c     planning a read of a collection (the query planner over its
 *              indexes) and the index access counters ($indexStats)
 *   options.c  what the catalog keeps of a collection: uuid, default
 *              collation, clustered index, change-stream images
 *   catalog.c  creating, dropping and renaming collections
 *   index_build.c  building indexes; the cleanup of interrupted builds
 *   ttl.c      the TTL monitor's pass
 *   validate.c validate's checks of a collection
 *   stats.c    the bytes a collection occupies
 *   oplog.c    a replica set's oplog and the clock of its timestamps
 *   txn.c      multi-document transactions: snapshots, write sets, the
 *              write-lock table, commit
 *
 * Names: mf_cl_* (the storage engine's own collection handle keeps its
 * mf_coll_* accessors: mf_coll_lock, mf_coll_records, ...).
 *
 * Locks, as engine.h orders them: catalog -> collection -> log.  Two
 * writers hold more than one collection lock: a retryable write (its
 * collection, then config.transactions, config.image_collection, the
 * oplog) and a transaction's commit (its collections in namespace order,
 * then the same three); readers hold one.  A
 * function taking an mf_coll expects the caller to hold the catalog lock
 * (shared at least) and says which collection lock it needs; one taking a
 * namespace takes what it needs itself and must be called with none held.
 * A pointer into the mapping (a document a scan returns) is valid while
 * the collection lock it was read under is held.
 *
 * Durability.  A write returns the log position (`*lsn`, raised, never
 * lowered) its record got; it is durable once mf_engine_sync covers that
 * position.  No function here waits for a sync except where it says so
 * (creating a collection): the caller syncs once, before it replies.
 *
 * Errors are MongoDB codes (util.h): MF_DuplicateKey with the mf_cl_dup
 * filled, MF_KeyTooLong, the engine's (MF_OutOfDiskSpace, a failed engine's
 * MF_IllegalOperation), and MF_InternalError for out of memory.
 */
#ifndef MF_COLL_H
#define MF_COLL_H

#include "../query/query.h"
#include "../storage/storage.h"

#include <pthread.h>
#include <stdatomic.h>

/* ------------------------------------------------------------ the layer */

typedef struct mf_cl_usage mf_cl_usage;
typedef struct mf_cl_oplog mf_cl_oplog;
typedef struct mf_cl_txns mf_cl_txns;

/* What the layer keeps for one server: its engine, the plan cache of
 * multi-planning's winners, and the index access counters. */
typedef struct mf_cl_db {
    mf_engine *engine;
    int64_t start_wall_ms;     /* when the counters began (the server's start) */
    mf_plan_cache *plan_cache; /* NULL: no cache (trials every time) */
    pthread_mutex_t usage_mu;  /* guards the counters */
    mf_cl_usage *usage;
    size_t nusage, capusage;
    mf_cl_oplog *oplog;        /* a replica set's (oplog.c); NULL: standalone */
    mf_cl_txns *txns;          /* a replica set's transactions (txn.c); NULL: standalone */
} mf_cl_db;

void mf_cl_db_init(mf_cl_db *db, mf_engine *engine);
void mf_cl_db_destroy(mf_cl_db *db);

/* ------------------------------------------------------------ indexes.c */

/* The parsed indexes of a collection (its lock held while used). */
typedef struct mf_cl_validator mf_cl_validator;

typedef struct mf_cl_indexes {
    mf_index_desc *v;
    size_t n;
    /* the collection's validator when the write is to apply it
     * (mf_cl_validator_load; NULL: none, or bypassDocumentValidation):
     * mf_cl_insert_doc checks each document against it, an update calls
     * mf_cl_validator_check itself.  Borrowed. */
    mf_cl_validator *val;
    /* index entries mf_cl_write_doc has put and deleted through this set
     * (the profiler's keysInserted, keysDeleted) */
    int64_t keys_inserted, keys_deleted;
} mf_cl_indexes;

int mf_cl_indexes_load(mf_coll *c, mf_cl_indexes *out, mf_error *err);
void mf_cl_indexes_free(mf_cl_indexes *x);
mf_index_desc *mf_cl_indexes_find(mf_cl_indexes *x, const char *name);

/* --------------------------------------------------------- validation.c */

/* The validator of `c` (its lock held) as writes apply it, or NULL when it
 * has none or its validationLevel is off.  A stored validator that no
 * longer parses is the error (every validated write then fails with it). */
int mf_cl_validator_load(mf_coll *c, mf_cl_validator **out, mf_error *err);
void mf_cl_validator_free(mf_cl_validator *v);
/* Parse `validator` as create and collMod check it (and the load parses
 * it): $expr allowed, $where, $text and near refused; under `coll`. */
struct mf_expr_ctx;
int mf_cl_validator_parse(const bson_t *validator, const mf_collator *coll, mf_matcher **m,
                          struct mf_expr_ctx **x, mf_error *err);
/* Whether `doc` may be stored: 0, or DocumentValidationFailure (121) with
 * its errInfo kept for mf_cl_validator_info.  `old_doc`: the document an
 * update replaces (NULL for an insert), for validationLevel moderate.
 * With validationAction warn a failure is logged (20294) and 0 returned.
 * `v` NULL: 0. */
int mf_cl_validator_check(mf_cl_validator *v, const bson_t *old_doc, const bson_t *doc,
                          mf_error *err);
/* The errInfo of the last failure: {failingDocumentId, details}. */
const bson_t *mf_cl_validator_info(const mf_cl_validator *v);

/* What a unique index refused: the index, its key pattern, the values. */
typedef struct mf_cl_dup {
    bool has;
    char index[256];
    char collation[640]; /* the index's collation as mongod prints it, or "" */
    bson_t key_pattern, key_value;
} mf_cl_dup;

void mf_cl_dup_clear(mf_cl_dup *d);
/* Fill `d` for index `x` refusing document `doc`. */
void mf_cl_dup_fill(mf_cl_dup *d, const mf_index_desc *x, const bson_t *doc);
/* mongod's "E11000 duplicate key error collection: ... dup key: { a: 1 }". */
void mf_cl_dup_message(const mf_cl_dup *d, const char *ns, char *out, size_t cap);

/* Record in index `x`'s spec that fields `bits` have met arrays. */
int mf_cl_mark_multikey(mf_engine *e, mf_coll *c, mf_index_desc *x, uint32_t bits,
                        mf_error *err);

/* -------------------------------------------------------------- write.c */

/* An oplog timestamp (and optime, with the term 1). */
typedef struct mf_cl_optime {
    uint32_t secs, inc;
} mf_cl_optime;

/* A retryable write's statement: what its oplog entry names (lsid,
 * txnNumber, stmtId, prevOpTime), and what its session keeps for a retry,
 * written in the same engine write -- config.transactions' record {_id:
 * lsid, txnNum, lastWriteOpTime, lastWriteDate} and, for findAndModify,
 * config.image_collection's {_id: lsid, txnNum, ts, imageKind, image}. */
typedef struct mf_cl_stmt {
    const bson_t *lsid;   /* {id, uid} */
    int64_t txn_number;
    int32_t stmt_id;
    mf_cl_optime prev;    /* the session's previous write of this
                             txnNumber ({0, 0}: none) */
    const bson_t *image;  /* findAndModify: the document a retry returns */
    bool post_image;      /* it is the document after (else before) */
} mf_cl_stmt;

/* How a write is logged (mf_cl_write_doc_log): NULL or no oplog, not.
 * `txns`: a replica set's transactions (txn.c), which every write outside
 * them must tell what it wrote. */
typedef struct mf_cl_log {
    mf_cl_oplog *oplog;
    mf_cl_txns *txns;
    bool replaced;         /* an update that replaced the whole document */
    mf_cl_stmt *stmt;      /* a retryable write's statement, or NULL */
    mf_cl_optime op_time;  /* out: the entry's ts */
    /* a transaction's catalog changes (an array of applyOps' operations):
     * a catalog change made in it appends its entries' operations here
     * instead of logging them (mf_cl_ddl), and its commit lists them first
     * (mf_cl_write_changes).  NULL outside transactions. */
    bson_t *txn_ops;
    /* a transaction's commit: the collections it created (created
     * MF_COLL_PENDING, settled in the commit's engine write) */
    char *const *created;
    size_t ncreated;
} mf_cl_log;

/* Write one document and all its index entries as one engine write
 * (exclusive collection lock): `old_doc` NULL inserts, `new_doc` NULL
 * deletes, both replace.  MF_DuplicateKey (with `*dup` filled) when a
 * unique index already holds a key of the new document. */
int mf_cl_write_doc(mf_engine *e, mf_coll *c, mf_cl_indexes *ix, uint64_t rid,
                    const bson_t *old_doc, const bson_t *new_doc, mf_lsn *lsn, mf_cl_dup *dup,
                    mf_error *err);
/* mf_cl_write_doc, logged in the oplog in the same engine write when `lg`
 * has one (a replica set's write of a replicated namespace: not local.*);
 * `lg->op_time` gets the entry's ts. */
int mf_cl_write_doc_log(mf_engine *e, mf_coll *c, mf_cl_indexes *ix, uint64_t rid,
                        const bson_t *old_doc, const bson_t *new_doc, mf_lsn *lsn,
                        mf_cl_dup *dup, mf_cl_log *lg, mf_error *err);
/* One record a transaction's commit writes (mf_cl_write_changes). */
typedef struct mf_cl_change {
    mf_coll *c;
    mf_cl_indexes *ix;
    uint64_t rid;
    const bson_t *old_doc, *new_doc; /* as mf_cl_write_doc's */
} mf_cl_change;

/* Write the `n` records of a transaction with all their index entries,
 * its oplog entry ({op: "c", ns: "admin.$cmd", o: {applyOps: [...]}})
 * and its session's config.transactions record (`lg->stmt`: lsid,
 * txnNumber; state "committed") as ONE engine write.  Every collection
 * locked exclusively, in namespace order, then config.transactions, then
 * the oplog (taken here). */
int mf_cl_write_changes(mf_engine *e, const mf_cl_change *ch, size_t n, mf_cl_log *lg,
                        mf_lsn *lsn, mf_error *err);

/* The RecordId of the document of `c` whose _id is `id_doc`'s ({_id: v}),
 * by its _id index (collection lock held); `copy` (may be NULL) gets the
 * document.  MF_InternalError when `c` has no _id index. */
int mf_cl_find_by_id(mf_engine *e, mf_coll *c, const mf_cl_indexes *ix, const bson_t *id_doc,
                     uint64_t *rid, bool *found, bson_t *copy, mf_error *err);
/* The document `rid` of `c` as the running operation sees it (collection
 * lock held): inside a transaction, its own write or its snapshot's
 * version (valid until the transaction's next statement), else the
 * tree's (valid while the lock is held).  *found false when absent. */
int mf_cl_read_record(mf_engine *e, mf_coll *c, uint64_t rid, bson_t *doc, bool *found,
                      mf_error *err);
/* A copy of the document of `ns` whose _id is `id_doc`'s into `out`
 * (initialised here); `*found` false when there is none or no such
 * collection.  Catalog lock held (shared); takes the collection's. */
int mf_cl_read_by_id(mf_engine *e, const char *ns, const bson_t *id_doc, bson_t *out,
                     bool *found, mf_error *err);
/* Insert `doc` into `ns` (created if missing), or replace the document
 * with its _id: a server's own record (config.clusterParameters).  No
 * lock held; logged through `lg` (may be NULL); *lsn raised. */
int mf_cl_put_by_id(mf_engine *e, mf_cl_log *lg, const char *ns, const bson_t *doc,
                    mf_lsn *lsn, mf_error *err);
/* One past the largest RecordId of `c` (collection lock held). */
/* Delete the document of `ns` whose _id is `id_doc`'s ({_id: v}), if
 * there is one (*deleted).  No lock held; logged through `lg`. */
int mf_cl_delete_by_id(mf_engine *e, mf_cl_log *lg, const char *ns, const bson_t *id_doc,
                       bool *deleted, mf_lsn *lsn, mf_error *err);
/* Call `fn` for each document of `ns` (none if it does not exist), in
 * RecordId order, the collection locked shared; catalog lock held. */
int mf_cl_each_doc(mf_engine *e, const char *ns,
                   int (*fn)(void *arg, const bson_t *doc, mf_error *err), void *arg,
                   mf_error *err);
int mf_cl_next_record_id(mf_engine *e, mf_coll *c, uint64_t *out, mf_error *err);
/* The document as stored: checked (size, _id type, $-names), _id first and
 * generated if absent; `id` is left on the _id element of `out`. */
int mf_cl_stored_form(const bson_t *doc, bson_t *out, bson_iter_t *id, mf_error *err);
/* Insert `doc` (exclusive collection lock) in its stored form, at RecordId
 * `*next_id` (advanced), with its index entries: MF_DuplicateKey, with
 * `*dup` filled, when a unique index refuses it.  `*id` is left on the
 * stored document's _id.  Logged as mf_cl_write_doc_log logs (`lg` may be
 * NULL). */
int mf_cl_insert_doc(mf_engine *e, mf_coll *c, mf_cl_indexes *ix, uint64_t *next_id,
                     const bson_t *doc, bson_t *stored, bson_iter_t *id, mf_lsn *lsn,
                     mf_cl_dup *dup, mf_cl_log *lg, mf_error *err);
/* A bounded collection's upkeep (until capped collections, issue 48): the
 * bytes of every document of `c` (collection lock held), and the oldest
 * documents deleted until at most `cap` bytes remain (`*bytes` kept
 * current; exclusive collection lock). */
int mf_cl_doc_bytes(mf_engine *e, mf_coll *c, int64_t *out, mf_error *err);
int mf_cl_trim_oldest(mf_engine *e, mf_coll *c, mf_cl_indexes *ix, int64_t *bytes, int64_t cap,
                      mf_lsn *lsn, mf_error *err);

/* --------------------------------------------------------------- scan.c */

/* Plan a scan of `c` over its indexes `ix` (query/plan.c's mf_scan_new).
 * A user operation passes the server's `db`: a plan on an index then
 * counts as one access of it ($indexStats) and the plan cache is used;
 * internal reads (explain, TTL, $merge's lookups) pass NULL. */
int mf_cl_scan_new(mf_cl_db *db, mf_coll *c, const mf_cl_indexes *ix, const bson_t *filter,
                   const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                   mf_scan **out, bool *sorted, mf_error *err);
/* The same with what find's min/max or distinct add (mf_scan_new_ex). */
int mf_cl_scan_new_ex(mf_cl_db *db, mf_coll *c, const mf_cl_indexes *ix, const bson_t *filter,
                      const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                      const mf_scan_extra *x, mf_scan **out, bool *sorted, mf_error *err);

/* Index access counters: one per (namespace, index name), `since` the
 * server's start or the index's creation.  Thread-safe. */
void mf_cl_usage_count(mf_cl_db *db, const char *ns, const char *index);
/* createIndexes: a fresh counter, since now. */
void mf_cl_usage_start(mf_cl_db *db, const char *ns, const char *index);
/* Forget the counter of an index, or (index NULL) of every index of the
 * collection `ns`, or of every collection of a database when `ns` is
 * "db." (dropDatabase). */
void mf_cl_usage_forget(mf_cl_db *db, const char *ns, const char *index);
void mf_cl_usage_get(mf_cl_db *db, const char *ns, const char *index, int64_t *ops,
                     int64_t *since_ms);

/* ------------------------------------------------------------ options.c */

/* The options `c` was created with (create's, as kept: static, valid
 * while the catalog lock is held); false if none. */
bool mf_cl_options_of(const mf_coll *c, bson_t *out);
/* The uuid of collection `c` from its catalog options; false if none. */
bool mf_cl_uuid(mf_coll *c, uint8_t out[16]);
/* The collection's default collation (`create`'s, kept in its catalog
 * options) as a new reference, NULL for simple or when `c` is NULL;
 * MF_DataCorruption if the stored spec cannot be used. */
int mf_cl_default_collation(const mf_coll *c, mf_collator **out, mf_error *err);
/* An operation's collation: `given` when the command gave one (even
 * simple), else `c`'s default.  A new reference in `*out`. */
int mf_cl_collation_for(const mf_coll *c, bool has_given, const mf_collator *given,
                        mf_collator **out, mf_error *err);
/* The same for namespace `ns`, looked up under the catalog lock (which
 * the caller must not hold). */
int mf_cl_collation_of_ns(mf_engine *e, const char *ns, bool has_given,
                          const mf_collator *given, mf_collator **out, mf_error *err);
/* Whether `c` is clustered; `spec` (may be NULL) then borrows its
 * clusteredIndex document (valid while the catalog lock is held). */
bool mf_cl_clustered(const mf_coll *c, bson_t *spec);
/* The clustered index's name in `spec` (borrowed from it). */
const char *mf_cl_clustered_name(const bson_t *spec);
/* The clustered index as listIndexes shows it (initialised here). */
void mf_cl_clustered_list_spec(const mf_coll *c, const bson_t *spec, bson_t *out);
/* collMod's changeStreamPreAndPostImages: rewrite `c`'s options with the
 * option {enabled: true} first, or without it.  Exclusive catalog lock. */
int mf_cl_set_pre_post_images(mf_engine *e, mf_coll *c, bool enabled, mf_lsn *lsn,
                              mf_error *err);
/* A temporary collection (options {temp: true}: mongod's, made by
 * convertToCapped and cloneCollectionAsCapped's `temp`), which the next
 * open drops (mf_cl_recover_builds); mf_cl_clear_temp makes `c` a lasting
 * one, as a rename with stayTemp false does.  Exclusive catalog lock. */
/* `old` options with `changes` made (a null value removes the option),
 * into `out` (initialised here) in mongod's CollectionOptions order. */
void mf_cl_options_merge(const bson_t *old, const bson_t *changes, bson_t *out);
/* Write `c`'s options again with `changes` made (exclusive catalog lock). */
int mf_cl_change_options(mf_engine *e, mf_coll *c, const bson_t *changes, mf_lsn *lsn,
                         mf_error *err);

bool mf_cl_temp(const mf_coll *c);
int mf_cl_clear_temp(mf_engine *e, mf_coll *c, mf_lsn *lsn, mf_error *err);

/* ------------------------------------------------------------- capped.c */

/* Whether `c` is capped; its `size` (bytes) and `max` (documents, 0: no
 * limit), either may be NULL. */
bool mf_cl_capped(const mf_coll *c, int64_t *size, int64_t *max);
/* A document too large for capped `c`: BadValue, as mongod's. */
int mf_cl_capped_check(const mf_coll *c, const bson_t *doc, mf_error *err);
/* Delete the oldest documents of `c` while it holds more than its size or
 * max (nothing when it is not capped), through the write path (`lg`: a
 * replica set logs them, not as part of a retryable statement).
 * Exclusive collection lock. */
int mf_cl_capped_trim(mf_engine *e, mf_coll *c, mf_cl_indexes *ix, mf_lsn *lsn,
                      mf_cl_log *lg, mf_error *err);
/* write.c tells each write of `c` (the counts of a capped one). */
void mf_cl_capped_wrote(const mf_engine *e, const mf_coll *c, const bson_t *old_doc,
                        const bson_t *new_doc);
/* cloneCollectionAsCapped: create `to` capped at `size` bytes (rounded up
 * to a multiple of 256; MF_BadValue below 0 or past 1 PB, once the
 * collections are found to be as they must, as mongod's create checks) with
 * `from`'s other options (its collation, a capped source's max; `temp`
 * adds {temp: true}), a new uuid and only the _id index, and insert
 * `from`'s documents in natural order through the write path -- logged as
 * inserts, and as deletes where the trim removes the oldest.
 * MF_NamespaceNotFound when the database or `from` is missing,
 * MF_NamespaceExists when `to` exists (mongod's messages); a failed copy
 * leaves `to` with what it got, as mongod's.  Takes the catalog lock
 * exclusively for the whole copy (mongod holds the collections' X locks):
 * no write to `from` can fall between.  *lsn raised: the caller syncs. */
int mf_cl_capped_clone(mf_cl_db *db, mf_cl_log *lg, const char *from, const char *to,
                       int64_t size, bool temp, mf_lsn *lsn, mf_error *err);
/* convertToCapped: `ns` cloned as capped into a temporary
 * "<db>.tmp<5 random>.convertToCapped.<coll>" (created {temp: true}), which
 * is then renamed onto `ns`, dropping it -- mongod's steps and oplog
 * entries (create, inserts, renameCollection with dropTarget).  `ns` keeps
 * its name with a new uuid; its indexes but _id are gone.  Errors as
 * mf_cl_capped_clone's; after a failed copy the temporary collection is
 * dropped.  One hold of the exclusive catalog lock. */
int mf_cl_capped_convert(mf_cl_db *db, mf_cl_log *lg, const char *ns, int64_t size,
                         mf_lsn *lsn, mf_error *err);
/* Forget the counts of `e`'s collections (its server closes). */
void mf_cl_capped_forget(const mf_engine *e);
/* How many inserts into capped collections and entries into an oplog
 * there have been (any server of the process), and a wait until there is
 * one more than `seen` or the monotonic `deadline_us` passes: an awaitData
 * cursor's, a change stream's.  mf_cl_capped_signal counts one. */
uint64_t mf_cl_capped_inserts(void);
void mf_cl_capped_wait(uint64_t seen, int64_t deadline_us);
void mf_cl_capped_signal(void);

/* ------------------------------------------------------------ catalog.c */

/* Catalog changes are logged in a replica set's oplog through `lg` (NULL:
 * not logged; see mf_cl_ddl), each in the engine write making it. */

/* Create `ns` with catalog `options` (create's, checked by the caller)
 * and, with `id_index`, its _id index under collation `coll` (may be
 * NULL); durable on return.  MF_NamespaceExists when it is there.  Takes
 * the catalog lock exclusively: call with no lock held; mf_cl_create_held,
 * with it held so. */
int mf_cl_create(mf_engine *e, mf_cl_log *lg, const char *ns, const bson_t *options,
                 const mf_collator *coll, bool id_index, mf_error *err);
int mf_cl_create_held(mf_engine *e, mf_cl_log *lg, const char *ns, const bson_t *options,
                      const mf_collator *coll, bool id_index, mf_error *err);

/* A random (version 4) UUID: a collection's, an index build's. */
int mf_cl_new_uuid(uint8_t out[16], mf_error *err);

/* Whether `ns` exists (takes the catalog lock shared: call with none). */
bool mf_cl_exists(mf_engine *e, const char *ns);

/* Drop `ns` with its indexes; *nindexes (may be NULL) is how many it had.
 * MF_NamespaceNotFound when it is not there.  Takes the catalog lock
 * exclusively; mf_cl_drop_held, with it held so.  *lsn raised: the caller
 * syncs. */
int mf_cl_drop(mf_cl_db *db, mf_cl_log *lg, const char *ns, int *nindexes, mf_lsn *lsn,
               mf_error *err);
int mf_cl_drop_held(mf_cl_db *db, mf_cl_log *lg, const char *ns, int *nindexes, mf_lsn *lsn,
                    mf_error *err);

/* Drop `ns` if it exists and holds no document (a collection an aborted
 * transaction created, unless someone wrote it since; not logged: its
 * creation was not); durable on return.  Takes the catalog lock
 * exclusively. */
int mf_cl_drop_if_empty(mf_cl_db *db, const char *ns, mf_error *err);

/* Drop every collection of database `name` (none: nothing to do), then
 * log {dropDatabase: 1}. */
int mf_cl_drop_db(mf_cl_db *db, mf_cl_log *lg, const char *name, mf_lsn *lsn, mf_error *err);

/* Rename `from` to `to` (both full namespaces, checked by the caller):
 * MF_NamespaceNotFound without `from`, MF_IllegalOperation when they are
 * the same, MF_NamespaceExists when `to` exists and not `drop_target`
 * (with it, `to` is dropped in the same engine write).  Takes the catalog
 * lock exclusively; mf_cl_rename_held, with it held so. */
int mf_cl_rename(mf_cl_db *db, mf_cl_log *lg, const char *from, const char *to,
                 bool drop_target, mf_lsn *lsn, mf_error *err);
int mf_cl_rename_held(mf_cl_db *db, mf_cl_log *lg, const char *from, const char *to,
                      bool drop_target, mf_lsn *lsn, mf_error *err);

/* The namespaces of every collection at one moment, copied. */
typedef struct mf_cl_names {
    char **ns;
    size_t n, cap;
} mf_cl_names;

int mf_cl_names_get(mf_engine *e, mf_cl_names *out, mf_error *err);
void mf_cl_names_free(mf_cl_names *l);

/* -------------------------------------------------------- index_build.c */

/* The spec as listIndexes shows it: without the server's own fields
 * ("building", "multikeyPaths").  `out` is initialized here. */
void mf_cl_index_public_spec(const uint8_t *spec, size_t len, bson_t *out);

/* The document of record `rid` of `c` into `doc` (static, valid while the
 * collection is locked); *found false when there is none, or it is not a
 * document. */
int mf_cl_record_doc(mf_engine *e, mf_coll *c, const uint8_t rid[8], bson_t *doc, bool *found,
                     mf_error *err);

/* How a build runs: the sorter's memory (maxIndexBuildMemoryUsageMegabytes)
 * and where it spills, the operation's deadline, and a hook called when
 * every key is written and before the build is committed, if the
 * collection holds documents (the hangIndexBuildBeforeCommit fail point);
 * its error fails the build. */
typedef struct mf_cl_build {
    size_t sort_bytes;
    const char *tmpdir;
    mf_deadline *deadline;
    int (*before_commit)(void *arg, mf_error *err);
    void *arg;
} mf_cl_build;

/* Build the `nspec` normalized specs (mf_index_spec_normalize_coll) on
 * `c`, catalog lock shared and collection lock exclusive held.  Specs
 * equal to an existing index or to an earlier spec are skipped;
 * *fresh is how many were new.  All are built or none: a failure
 * (DuplicateKey, too many indexes, the deadline) drops what was made.
 * Logged as mongod logs it: one {createIndexes: <coll>, <spec>} per index
 * of a collection without documents, else {startIndexBuild} before and
 * {commitIndexBuild} or {abortIndexBuild} after. */
int mf_cl_index_build(mf_cl_db *db, mf_cl_log *lg, mf_coll *c, const char *ns,
                      const bson_t *specs, size_t nspec, const mf_cl_build *o, size_t *fresh,
                      mf_lsn *lsn, mf_error *err);

/* Drop index `name` of `c` (collection lock exclusive held), logged as
 * {dropIndexes: <coll>, index: <name>} with o2 its spec. */
int mf_cl_index_drop(mf_engine *e, mf_cl_log *lg, mf_coll *c, const char *name, mf_lsn *lsn,
                     mf_error *err);

/* Drop index `name` of `c` and build it again from `spec` (which carries
 * the "building" mark, removed at the end), collection lock exclusive
 * held: collMod's conversion to unique.  No write sees the index missing. */
int mf_cl_index_rebuild(mf_engine *e, mf_coll *c, const char *name, const bson_t *spec,
                        const mf_cl_build *o, mf_lsn *lsn, mf_error *err);

/* At open: drop every index a crash left marked "building", the
 * temporary collections of an interrupted $out, and the collections of
 * transactions that never committed (MF_COLL_PENDING).  Durable on
 * return. */
int mf_cl_recover_builds(mf_engine *e, mf_error *err);

/* ----------------------------------------------------------- validate.c */

/* validate's checks of `ns` (catalog and collection locks taken shared
 * here), appended to `out` as mongod's result fields (ns, uuid, nrecords,
 * keysPerIndex, indexDetails, valid, errors, ...).  MF_NamespaceNotFound
 * when it does not exist; the deadline is checked per record and entry. */
int mf_cl_validate(mf_engine *e, const char *ns, mf_deadline *dl, bson_t *out, mf_error *err);

/* ---------------------------------------------------------------- ttl.c */

/* One pass of the TTL monitor over every collection: the expired documents
 * of each TTL index deleted through the write path, each batch synced.
 * Stops early when stop(arg) says so.  *deleted counts the deletes. */
int mf_cl_ttl_pass(mf_cl_db *db, bool (*stop)(void *), void *arg, uint64_t *deleted,
                   mf_error *err);

/* -------------------------------------------------------------- oplog.c */

/* A replica set's oplog, local.oplog.rs (created with its first entry,
 * "initiating set", when missing), and the clock of its timestamps.  One
 * per server in replica-set mode (mf_cl_db.oplog); none on a standalone. */

/* Open (creating) the oplog; entries past `max_bytes` are trimmed oldest
 * first.  No lock held. */
int mf_cl_oplog_open(mf_engine *e, int64_t max_bytes, mf_cl_oplog **out, mf_error *err);
void mf_cl_oplog_close(mf_cl_oplog *o);
/* The newest entry's ts and wall time (`wall_ms` may be NULL). */
void mf_cl_oplog_last(mf_cl_oplog *o, mf_cl_optime *t, int64_t *wall_ms);
/* Log a no-op {op: "n", o: {msg}} as its own write.  No lock held. */
int mf_cl_oplog_noop(mf_cl_oplog *o, const char *msg, mf_lsn *lsn, mf_error *err);
/* The $v: 2 diff turning `old` into `new_doc` (initialised here): 0, or -1
 * when only the whole new document describes the change (fields
 * reordered), `out` then empty. */
int mf_cl_update_diff(const bson_t *old, const bson_t *new_doc, bson_t *out);

/* One entry being logged by a write (write.c): mf_cl_oplog_begin takes the
 * oplog's lock (after the caller's collection lock), gives the entry its
 * ts and builds it; the caller puts `entry` at `key` of `tree` in the same
 * engine write as the document; mf_cl_oplog_end releases the lock. */
typedef struct mf_cl_oplog_put {
    mf_cl_optime t;
    int64_t wall_ms;
    bson_t entry;
    mf_tree_id tree;
    uint8_t key[8];
} mf_cl_oplog_put;
int mf_cl_oplog_begin(mf_cl_oplog *o, mf_coll *c, const bson_t *old, const bson_t *new_doc,
                      bool replaced, const mf_cl_stmt *st, mf_cl_oplog_put *put);
/* Append to the array `arr`, at index `i`, the operation a transaction's
 * applyOps entry lists for one write (op, ns, ui, o, o2). */
void mf_cl_oplog_op(bson_t *arr, uint32_t i, mf_coll *c, const bson_t *old,
                    const bson_t *new_doc);
/* mf_cl_oplog_begin for a transaction's commit: one entry {lsid,
 * txnNumber, op: "c", ns: "admin.$cmd", o: {applyOps: ops}, ts, t, v,
 * wall, prevOpTime}. */
int mf_cl_oplog_begin_apply(mf_cl_oplog *o, const bson_t *ops, const mf_cl_stmt *st,
                            mf_cl_oplog_put *put);
/* The entry logged at `t` (a copy into `out`, initialised here), if the
 * oplog still has it.  No lock held. */
int mf_cl_oplog_entry_at(mf_cl_oplog *o, mf_cl_optime t, bson_t *out, bool *found,
                         mf_error *err);
void mf_cl_oplog_end(mf_cl_oplog *o, mf_cl_oplog_put *put, bool written);
/* Copies (each a new bson_t, into out[0..*n)) of the entries whose ts is
 * >= `from`, oldest first, at most `max`; `*oldest` gets the oplog's
 * oldest ts and `*lsn` a log position covering every entry read.  Takes
 * the oplog's lock (shared).  No lock held. */
int mf_cl_oplog_read(mf_cl_oplog *o, mf_cl_optime from, size_t max, bson_t **out, size_t *n,
                     mf_cl_optime *oldest, mf_lsn *lsn, mf_error *err);

/* What a catalog change logs: entries {op: "c", ns: "<db>.$cmd", ui, o,
 * o2} (mongod's formats: docs/research/issue48-facts.md), written in the
 * engine write that makes the change -- the engine's catalog functions
 * take mf_cl_ddl_ops() as their `also` -- so that after a crash they are
 * there exactly when it is.  The first mf_cl_ddl_add takes the oplog's
 * lock (after the catalog's and the collection's), and mf_cl_ddl_end lets
 * it go, so entries are in ts order.  Nothing is logged without an oplog
 * or for a namespace that is not replicated (local.*, system.profile); in
 * a transaction (`lg->txn_ops`) the entries' operations go there. */
typedef struct mf_cl_ddl {
    mf_cl_log *lg;
    bool logged;
    bool locked;
    size_t n, cap;
    bson_t **entry;
    uint8_t (*key)[8];
    mf_op *ops;
    mf_op_list list;
    mf_cl_optime last;
} mf_cl_ddl;
void mf_cl_ddl_init(mf_cl_ddl *d, mf_cl_log *lg, const char *ns);
/* One entry about `ns`'s database (`ui` may be NULL; `o2` may be NULL). */
int mf_cl_ddl_add(mf_cl_ddl *d, const char *ns, const uint8_t *ui, const bson_t *o,
                  const bson_t *o2, mf_error *err);
/* The entries' puts, or NULL when there are none. */
const mf_op_list *mf_cl_ddl_ops(mf_cl_ddl *d);
/* `written`: the engine write holding the entries succeeded
 * (lg->op_time gets the last one's ts).  Releases the oplog's lock. */
void mf_cl_ddl_end(mf_cl_ddl *d, bool written);
/* Write what `d` holds as an engine write of its own (a change made by
 * writes of their own), then mf_cl_ddl_end; *lsn raised. */
int mf_cl_ddl_write(mf_cl_ddl *d, mf_engine *e, mf_lsn *lsn, mf_error *err);
/* Whether catalog changes of `ns` are logged (not local.*, not
 * system.profile). */
bool mf_cl_ns_replicated(const char *ns);

/* --------------------------------------------------------------- diff.c */

/* A $v: 2 diff as a change stream's updateDescription (mongod 7.0's
 * change_stream_document_diff_parser): appended to `out` (initialised by
 * the caller) as updatedFields, removedFields, truncatedArrays and, when
 * `disambiguate` (showExpandedEvents), disambiguatedPaths. */
int mf_cl_diff_describe(const bson_t *diff, bool disambiguate, bson_t *out, mf_error *err);
/* `pre` with `diff` applied: the post-image of an update (into `out`,
 * initialised by the callee on success).  MF_BadValue for a diff that does
 * not fit `pre`. */
int mf_cl_diff_apply(const bson_t *pre, const bson_t *diff, bson_t *out, mf_error *err);

/* ------------------------------------------------------------ changes.c */

/* Change streams (docs/change-streams.md): the events of a replica set's
 * oplog, in mongod 7.0's format, from a position a resume token names.
 *
 * A resume token {_data: "<hex>"} is a KeyString-shaped encoding of the
 * event's place: its clusterTime, the token version (2), its type (an
 * event's, 128, or a high-water mark's, 0), its index in a transaction,
 * whether it names an invalidate, the collection's UUID and the event's
 * identity ({operationType, documentKey | operationDescription}).  Tokens
 * sort (as bytes, and so as hex) in the order of their events. */
typedef struct mf_cl_token {
    mf_cl_optime ts;
    bool event;              /* an event's (else a high-water mark) */
    int64_t txn_op_index;
    bool from_invalidate;
    bool has_uuid;
    uint8_t uuid[16];
    uint8_t *data;           /* the decoded bytes (owned) */
    size_t len;
} mf_cl_token;

/* Decode the token at `it` (a resumeAfter / startAfter value): mongod's
 * errors (40647 not a document with a string _data, 9 not hex, 40649
 * empty, 50795 version, 50811 damaged). */
int mf_cl_token_parse(const bson_iter_t *it, mf_cl_token *out, mf_error *err);
void mf_cl_token_free(mf_cl_token *t);

typedef enum mf_cl_full_doc {
    MF_CL_FULL_DEFAULT, MF_CL_FULL_UPDATE_LOOKUP, MF_CL_FULL_WHEN_AVAILABLE, MF_CL_FULL_REQUIRED
} mf_cl_full_doc;

typedef enum mf_cl_before {
    MF_CL_BEFORE_OFF, MF_CL_BEFORE_WHEN_AVAILABLE, MF_CL_BEFORE_REQUIRED
} mf_cl_before;

/* What a stream watches and from where. */
typedef struct mf_cl_changes_spec {
    const char *db;            /* NULL: every database but admin, config, local */
    const char *coll;          /* NULL: every collection of `db` */
    bool expanded;             /* showExpandedEvents */
    bool system_events;        /* showSystemEvents */
    mf_cl_full_doc full_document;
    mf_cl_before before_change;
    /* at most one: after this token's event (resumeAfter), or startAfter
     * (which may name an invalidate), or from this cluster time on */
    const mf_cl_token *resume_after;
    const mf_cl_token *start_after;
    bool has_start_at;
    mf_cl_optime start_at;
} mf_cl_changes_spec;

typedef struct mf_cl_changes mf_cl_changes;

/* Open a stream (the spec is copied).  ChangeStreamHistoryLost (286) when
 * its start is older than the oplog's oldest entry, InvalidResumeToken
 * (260) for resumeAfter an invalidate or a collection stream's token
 * without a UUID. */
int mf_cl_changes_open(mf_cl_db *db, const mf_cl_changes_spec *s, mf_cl_changes **out,
                       mf_error *err);
/* The next event into `out` (initialised on success, *none false), or
 * *none: nothing more for now (or the stream is invalidated: done).
 * Takes the oplog's lock, and the catalog's and a collection's for the
 * images (no lock held by the caller).  Errors: 280 when the resume
 * token's event is not in the oplog, 47 for a required image missing. */
int mf_cl_changes_next(mf_cl_changes *ch, bson_t *out, bool *none, mf_error *err);
/* After *none: the high-water mark token {_data} into `out` (appended as
 * `key`), the place after everything read. */
void mf_cl_changes_hwm(const mf_cl_changes *ch, bson_t *out, const char *key);
/* Whether the stream has handed out its invalidate (it is done). */
bool mf_cl_changes_done(const mf_cl_changes *ch);
/* The log position of everything read so far: a batch of events is
 * returned once it is durable. */
mf_lsn mf_cl_changes_lsn(const mf_cl_changes *ch);
void mf_cl_changes_free(mf_cl_changes *ch);

/* Delete pre-images (config.system.preimages) older than `expire_before`
 * seconds of wall time, or whose collection is gone; each batch synced. */
int mf_cl_preimages_expire(mf_cl_db *db, int64_t expire_before_ms, uint64_t *deleted,
                           mf_error *err);

/* ---------------------------------------------------------------- txn.c */

/* Multi-document transactions of a replica set (txn.c's comment says how
 * snapshots, write sets and the write-lock table work).  One mf_cl_txns
 * per server in replica-set mode (mf_cl_db.txns). */
typedef struct mf_cl_txn mf_cl_txn;

int mf_cl_txns_open(mf_cl_txns **out, mf_error *err);
void mf_cl_txns_close(mf_cl_txns *m);

/* A transaction reading from a snapshot taken now. */
int mf_cl_txn_begin(mf_cl_txns *m, mf_cl_txn **out, mf_error *err);
/* End `t` without writing anything (frees it). */
void mf_cl_txn_abort(mf_cl_txn *t);
/* Commit `t` (no lock held): its write set as one engine write
 * (mf_cl_write_changes; `lg->stmt` names the session), visible to others
 * as a whole once it returns.  MF_NoSuchTransaction when a write outside
 * took what it holds, or a collection it wrote was dropped.  `t` has
 * ended either way (freed). */
int mf_cl_txn_commit(mf_cl_txn *t, mf_engine *e, mf_cl_log *lg, mf_lsn *lsn, mf_error *err);

/* The operation running on this thread runs inside `t` (NULL: none),
 * as mongod's operation context carries its transaction: its scans see
 * `t`'s snapshot and writes (mf_cl_scan_new), and its writes through
 * mf_cl_write_doc_log go to `t`'s write set. */
void mf_cl_txn_bind(mf_cl_txn *t);
mf_cl_txn *mf_cl_txn_bound(void);
/* `t`'s read view for a scan (NULL for NULL). */
const mf_read_view *mf_cl_txn_view(mf_cl_txn *t);
/* `t`'s number, never reused (mf_cl_txns_wait waits for it). */
uint64_t mf_cl_txn_id(const mf_cl_txn *t);
/* Whether a write outside `t` took a record or key it holds. */
bool mf_cl_txn_killed(mf_cl_txn *t);
/* Whether `t` has written anything. */
bool mf_cl_txn_wrote(const mf_cl_txn *t);

/* A write of `t` (mf_cl_write_doc_log's arguments; collection lock
 * exclusive): WriteConflict when another open transaction holds the record
 * or one of the unique keys it gains, or it was written after `t`'s
 * snapshot; DuplicateKey as a unique index would refuse it. */
int mf_cl_txn_stage(mf_cl_txn *t, mf_engine *e, mf_coll *c, mf_cl_indexes *ix, uint64_t rid,
                    const bson_t *old_doc, const bson_t *new_doc, mf_cl_dup *dup,
                    mf_error *err);

/* A write outside transactions (collection lock exclusive; `m` may be
 * NULL: standalone), before it: an open transaction holding its record or
 * a unique key it gains is waited for, as mongod's write waits -- when the
 * operation running on this thread (mf_cl_op_begin) has written nothing
 * yet: MF_WriteConflict then, for this write and every later one of the
 * operation, and mf_cl_op_end names the transaction -- or else (the
 * operation wrote already, or none runs: the TTL monitor) marked killed.
 * After it (mf_cl_txns_written): its number, and its before-image and
 * unique keys for older snapshots. */
int mf_cl_txns_claim(mf_cl_txns *m, mf_coll *c, const mf_cl_indexes *ix, uint64_t rid,
                     const bson_t *old_doc, const bson_t *new_doc, mf_error *err);
/* The operation on this thread begins (the dispatcher, around a command
 * outside transactions); it ends: the transaction it must wait for before
 * it runs again (0: none). */
void mf_cl_op_begin(void);
uint64_t mf_cl_op_end(void);
/* A statement of the operation begins that its caller can run again
 * whole: a holder met before it writes is waited for (its write refused
 * with MF_WriteConflict, mf_cl_op_take_wait names the transaction) even
 * when earlier statements wrote; without, such a holder is killed.
 * `resumable`: the caller goes on from where the statement stopped after
 * the wait, keeping what it wrote (a multi update or delete, as mongod's
 * retry of the one document's write), so a holder met after the
 * statement wrote is waited for too. */
void mf_cl_op_statement(bool resumable);
/* The transaction the operation is to wait for (0: none), forgotten: its
 * writes are no longer refused. */
uint64_t mf_cl_op_take_wait(void);
/* Wait until transaction `id` has ended or been killed; MF_MaxTimeMSExpired
 * past `deadline_us` (mf_clock_mono_us; 0: none).  No lock held. */
int mf_cl_txns_wait(mf_cl_txns *m, uint64_t id, int64_t deadline_us, mf_error *err);
int mf_cl_txns_written(mf_cl_txns *m, mf_coll *c, const mf_cl_indexes *ix, uint64_t rid,
                       const bson_t *old_doc, const bson_t *new_doc, uint64_t ts,
                       mf_error *err);

/* Reads at a cluster time (readConcern snapshot outside transactions).
 * The history window: every write, logged at `ts` (oplog ts as secs << 32
 * | inc; 0: not logged) keeps its before-image for `window_s` seconds
 * (minSnapshotHistoryWindowInSeconds; 0: only while a snapshot is open),
 * the oldest dropped first past about `budget` bytes; reads before
 * `from_ts` (the clock at open: no history before it) are refused. */
#define MF_CL_HISTORY_BUDGET ((size_t)64 << 20)
void mf_cl_txns_set_history(mf_cl_txns *m, int64_t window_s, size_t budget, uint64_t from_ts);
/* A snapshot at oplog ts `ts`: a read-only mf_cl_txn (bind it for the
 * reads; end it with mf_cl_txn_abort) that sees exactly the writes logged
 * at or before `ts`.  MF_SnapshotTooOld when the history before `ts` is no
 * longer kept (older than the window, or dropped for the budget). */
int mf_cl_snapshot_begin(mf_cl_txns *m, uint64_t ts, mf_cl_txn **out, mf_error *err);
/* What the history keeps: versions, their bytes (roughly), the budget,
 * and the oldest oplog ts a read may ask for. */
typedef struct mf_cl_history {
    size_t versions, bytes, budget;
    uint64_t oldest;
} mf_cl_history;
void mf_cl_txns_history(mf_cl_txns *m, mf_cl_history *out);
/* Whether `t` is such a snapshot (not a transaction). */
bool mf_cl_txn_is_snapshot(const mf_cl_txn *t);
/* transactionSizeLimitBytes: a write that takes a write set's documents
 * past `bytes` fails with TransactionTooLarge (257), and its statement
 * aborts the transaction.  Default: no limit, as mongod's. */
void mf_cl_txns_set_size_limit(mf_cl_txns *m, int64_t bytes);
/* `next`, or past the RecordIds open write sets took in `c`. */
uint64_t mf_cl_txns_first_free(mf_cl_txns *m, const mf_coll *c, uint64_t next);

/* -------------------------------------------------------------- stats.c */

/* What a collection occupies (its lock held, shared or exclusive). */
typedef struct mf_cl_sizes {
    uint64_t count;         /* records */
    uint64_t data_bytes;    /* document bytes */
    uint64_t storage_bytes; /* pages of the record tree */
    uint64_t index_bytes;   /* pages of all index trees */
} mf_cl_sizes;

/* Measure `c`; `each_index` (may be NULL) is told each index's bytes. */
int mf_cl_measure(mf_engine *e, mf_coll *c, mf_cl_sizes *out,
                  void (*each_index)(void *arg, const char *name, uint64_t bytes), void *arg,
                  mf_error *err);
/* Bytes of the file collection `c` occupies: its record tree and every
 * index tree.  The caller holds the catalog lock; this takes the
 * collection's shared lock.  Walks every page of the collection. */
int mf_cl_storage_bytes(mf_engine *e, mf_coll *c, uint64_t *bytes, mf_error *err);

#endif /* MF_COLL_H */
