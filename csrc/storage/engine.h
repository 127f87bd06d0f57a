/*
 * engine.h -- the storage engine: B+trees in one data file, a write-ahead
 * log, checkpoints, recovery, and the catalog of collections and indexes.
 *
 * Files in the data directory:
 *   data.mf         the pager's data file (pager.h)
 *   wal.<lsn>       log segments (wal.h)
 *   multifora.lock  the directory lock (storage.h)
 *
 * Trees.  Every tree has a 64-bit id.  Tree 1 is the catalog: it maps
 * "ns:<namespace>" to a collection's entry (its record tree, its indexes
 * and the caller's options), "root:<id>" to each tree's root page as of
 * the last checkpoint, and "next_tree" to the next free id.  A collection
 * is a record tree (RecordId -> document bytes) plus one tree per index.
 *
 * Writes.  A write is a list of operations (put, delete, create tree, drop
 * tree) applied together and logged as one record, so after a crash either
 * all of them are there or none.  mf_engine_write() applies and appends;
 * mf_engine_sync() waits for the group commit that makes it durable.  A
 * caller replies to a client only after mf_engine_sync() succeeds.
 *
 * Recovery.  Open = the newest valid meta page (the last checkpoint's
 * roots) + replay of the log records after the checkpoint's LSN.  Opening
 * reads nothing else: documents stay in the file until used.
 *
 * Checkpoints run on a background thread when `checkpoint_log_bytes` of
 * log records (counted before compression: the work a replay would redo)
 * have been written since the last one, or `checkpoint_interval_ms` has
 * passed with writes, and at close.  The freeze holds writers off for O(1) work (the
 * changed roots and the free list); the flush runs beside them.
 *
 * Locks, in this order, never the other way:
 *   catalog lock     shared by every command; exclusive to create, drop and
 *                    rename collections (mf_engine_catalog_lock)
 *   collection lock  shared to read a collection's trees, exclusive to
 *                    write them (mf_coll_lock); never two at once
 *   apply lock       internal: taken shared by mf_engine_write, exclusive
 *                    by the checkpoint freeze
 *   log mutex        internal (wal.c)
 * A pointer into the mapping (a document, a key) is valid while the
 * collection lock it was obtained under is held.
 *
 * Failure.  If the log cannot be made durable or a checkpoint cannot be
 * written, the engine refuses further writes (MF_IllegalOperation naming
 * the cause) until it is reopened; reads go on.
 *
 * A full disk is not a failure.  A write takes its space first -- pages in
 * the data file (mf_pager_reserve) and blocks in the log (mf_wal_reserve)
 * -- and only then changes any tree, so on a full disk it fails with
 * MF_OutOfDiskSpace having changed nothing, and writes work again once
 * space is freed.  A checkpoint likewise reserves its pages or is
 * postponed (logged once) until there is room.
 */
#ifndef MF_STORAGE_ENGINE_H
#define MF_STORAGE_ENGINE_H

#include "btree.h"
#include "wal.h"

typedef struct mf_engine mf_engine;
typedef struct mf_coll mf_coll;
typedef uint64_t mf_tree_id;

#define MF_CATALOG_TREE 1

typedef struct mf_engine_options {
    uint64_t checkpoint_log_bytes;   /* 0: 64 MiB of log records since the last one */
    uint32_t checkpoint_interval_ms; /* 0: 60 s; checkpoints only if written */
    bool no_background;              /* no checkpoint thread (tests) */
    uint64_t reserve_bytes;          /* address space for the data file */
    mf_huge_pages huge_pages;        /* 2 MiB pages: see mf_pager_options */
    uint64_t huge_max_bytes;         /* AUTO's limit; 0: a quarter of memory */
    mf_wal_options wal;              /* its `faults` is set to the engine's */
    /* The fault table every file of the engine checks (os.h): the
     * caller's, which must outlive the engine; NULL: the engine makes its
     * own.  Either way, mf_engine_faults gives it. */
    mf_os_faults *faults;
} mf_engine_options;

/* Open (creating) the engine in `dir`, which the caller has locked.
 * Errors: MF_DataCorruption (damaged meta, free list or interior log
 * block, naming the file and offset), os errors. */
int mf_engine_open(const char *dir, const mf_engine_options *opt, mf_engine **out,
                   mf_error *err);

/* Checkpoint and close.  The engine is freed even if the checkpoint fails
 * (the log still holds every committed write). */
int mf_engine_close(mf_engine *e, mf_error *err);

/* Close without a checkpoint or any sync: what a crash leaves (tests). */
void mf_engine_abandon(mf_engine *e);

/* Run a checkpoint now (the caller holds no collection lock). */
int mf_engine_checkpoint(mf_engine *e, mf_error *err);

/* The fault table of the engine's files (mf_engine_options.faults): arm it
 * to fail this engine's file operations and no other's.  Valid while the
 * engine is open (or as long as the caller's table, if it gave one). */
mf_os_faults *mf_engine_faults(mf_engine *e);

/* ------------------------------------------------------------------ writes */

typedef enum {
    MF_OP_PUT = 1,         /* tree, key, value */
    MF_OP_DELETE = 2,      /* tree, key */
    MF_OP_CREATE_TREE = 3, /* tree (an id from mf_engine_new_tree_id) */
    MF_OP_DROP_TREE = 4,   /* tree */
} mf_op_kind;

typedef struct mf_op {
    mf_op_kind kind;
    mf_tree_id tree;
    const uint8_t *key;
    size_t klen;
    const uint8_t *val;
    size_t vlen;
} mf_op;

/* Apply `ops` in order and append them to the log as one record; `*lsn`
 * gets its LSN for mf_engine_sync.  MF_OutOfDiskSpace: nothing applied,
 * nothing logged, the engine still usable; so too MF_BadValue for a key or
 * value out of the B+tree's bounds (btree.h), checked for every op before
 * the first is applied.  The caller holds the exclusive lock of
 * the collection the trees belong to (or the exclusive catalog lock for
 * catalog changes).  A delete of a missing key is not an error.  Errors:
 * the engine is failed, a tree is unknown, os errors (which fail the
 * engine: the trees may hold a change the log does not). */
int mf_engine_write(mf_engine *e, const mf_op *ops, size_t nops, mf_lsn *lsn, mf_error *err);

/* Ops a catalog change writes in its own log record, after its own: what
 * the layer above logs of the change (a replica set's oplog entries,
 * coll/oplog.c), so that after a crash they are there exactly when the
 * change is.  The catalog changes below take one (NULL: none). */
typedef struct mf_op_list {
    const mf_op *ops;
    size_t n;
} mf_op_list;

/* Whether the engine refuses writes until reopened (a failed sync or
 * checkpoint write); `why` (may be NULL) gets the cause. */
bool mf_engine_failure(mf_engine *e, char *why, size_t cap);

/* Wait until the write with `lsn` is durable (group commit).  Call it
 * without holding a collection lock, so others can write meanwhile. */
int mf_engine_sync(mf_engine *e, mf_lsn lsn, mf_error *err);
/* The LSN of the newest write applied (what mf_engine_sync of it covers):
 * a reader that saw a write waits for this to reply only with durable
 * data. */
mf_lsn mf_engine_last_lsn(mf_engine *e);

/* A fresh tree id (reserved in memory; logged with the write that creates
 * the tree). */
mf_tree_id mf_engine_new_tree_id(mf_engine *e);

/* The tree `id` for reading (the caller holds the owning collection's
 * lock), or NULL if there is none.  The struct is the engine's: valid until
 * the tree is dropped. */
mf_btree *mf_engine_tree(mf_engine *e, mf_tree_id id);

/* What tree `id` holds and occupies (mf_btree_measure), for collStats,
 * dbStats and listDatabases.  It walks every page of the tree, so its cost
 * grows with the tree: fine for statistics on request, not for a hot path.
 * The caller holds the owning collection's lock (shared is enough).
 * Errors: MF_NamespaceNotFound for an unknown tree, MF_DataCorruption. */
int mf_engine_tree_measure(mf_engine *e, mf_tree_id id, mf_btree_usage *out, mf_error *err);

/* ----------------------------------------------------------------- catalog */

void mf_engine_catalog_lock(mf_engine *e, bool exclusive);
void mf_engine_catalog_unlock(mf_engine *e);

/* An index of a collection, as the catalog records it. */
typedef struct mf_index_info {
    const char *name;
    mf_tree_id tree;
    const uint8_t *spec; /* the caller's bytes (a BSON spec), owned by the engine */
    size_t spec_len;
} mf_index_info;

/* The collection named `ns`, or NULL (catalog lock held). */
mf_coll *mf_engine_coll(mf_engine *e, const char *ns);

/* Call `fn` for each collection (catalog lock held), in name order. */
void mf_engine_coll_each(mf_engine *e, void (*fn)(mf_coll *c, void *arg), void *arg);

/* A collection's flags in the catalog. */
enum {
    /* created by a transaction that has not committed: the layer above
     * drops such a collection at open (its commit clears the flag in the
     * commit's own log record: mf_engine_colls_settle) */
    MF_COLL_PENDING = 1u << 0,
};

/* Create a collection with an empty record tree; `options` are the
 * caller's bytes, kept with it; `flags` MF_COLL_*.  Exclusive catalog
 * lock.  Errors: MF_NamespaceExists.  `*lsn` for mf_engine_sync. */
int mf_engine_coll_create(mf_engine *e, const char *ns, const uint8_t *options,
                          size_t options_len, unsigned flags, mf_coll **out,
                          const mf_op_list *also, mf_lsn *lsn, mf_error *err);

/* Whether `c` is MF_COLL_PENDING. */
bool mf_coll_pending(const mf_coll *c);

/* Clear MF_COLL_PENDING of the `n` collections `cs` and log their catalog
 * entries after `ops` (the commit of the transaction that created them),
 * as one record: after a crash they are settled exactly when `ops` are
 * there.  The caller holds what `ops` need. */
int mf_engine_colls_settle(mf_engine *e, mf_coll *const *cs, size_t n, const mf_op *ops,
                           size_t nops, mf_lsn *lsn, mf_error *err);

/* Drop a collection and every tree it owns.  Exclusive catalog lock.
 * Errors: MF_NamespaceNotFound. */
int mf_engine_coll_drop(mf_engine *e, const char *ns, const mf_op_list *also, mf_lsn *lsn,
                        mf_error *err);

/* Rename; with `drop_target`, a collection named `to` is dropped in the
 * same log record.  Exclusive catalog lock.  Errors: MF_NamespaceNotFound,
 * MF_NamespaceExists (`to` exists, not `drop_target`). */
int mf_engine_coll_rename(mf_engine *e, const char *from, const char *to, bool drop_target,
                          const mf_op_list *also, mf_lsn *lsn, mf_error *err);

const char *mf_coll_name(const mf_coll *c);
mf_tree_id mf_coll_records(const mf_coll *c);
void mf_coll_options(const mf_coll *c, const uint8_t **options, size_t *len);
/* Replace the caller's bytes kept with `c` (collMod).  Exclusive catalog
 * lock: readers of mf_coll_options hold it shared, and the old bytes are
 * freed here. */
int mf_coll_set_options(mf_engine *e, mf_coll *c, const uint8_t *options, size_t options_len,
                        const mf_op_list *also, mf_lsn *lsn, mf_error *err);
void mf_coll_lock(mf_coll *c, bool exclusive);
void mf_coll_unlock(mf_coll *c);

size_t mf_coll_index_count(const mf_coll *c);
const mf_index_info *mf_coll_index(const mf_coll *c, size_t i);

/* Add an index entry with a new, empty tree (the caller then fills it with
 * writes).  Exclusive collection lock.  Errors: MF_IndexAlreadyExists (68)
 * for a name in use. */
int mf_coll_index_create(mf_engine *e, mf_coll *c, const char *name, const uint8_t *spec,
                         size_t spec_len, mf_tree_id *tree, mf_lsn *lsn, mf_error *err);

/* Replace the spec bytes of index `name` (its tree stays).  Exclusive
 * collection lock.  Errors: MF_IndexNotFound (27). */
int mf_coll_index_set_spec(mf_engine *e, mf_coll *c, const char *name, const uint8_t *spec,
                           size_t spec_len, const mf_op_list *also, mf_lsn *lsn, mf_error *err);
/* The same for `n` indexes at once, in one write of the collection's
 * catalog entry: after a crash, all of the new specs or none. */
typedef struct mf_index_spec_set {
    const char *name;
    const uint8_t *spec;
    size_t len;
} mf_index_spec_set;
int mf_coll_index_set_specs(mf_engine *e, mf_coll *c, const mf_index_spec_set *sets, size_t n,
                            const mf_op_list *also, mf_lsn *lsn, mf_error *err);

/* Remove an index and drop its tree.  Exclusive collection lock.  Errors:
 * MF_IndexNotFound (27). */
int mf_coll_index_drop(mf_engine *e, mf_coll *c, const char *name, const mf_op_list *also,
                       mf_lsn *lsn, mf_error *err);

/* ------------------------------------------------------------------ stats */

typedef struct mf_engine_stats {
    mf_pager_stats pager;
    mf_wal_stats wal;
    uint64_t checkpoints;
    mf_lsn checkpoint_lsn;
    uint64_t replayed; /* log records replayed at open */
} mf_engine_stats;
void mf_engine_get_stats(mf_engine *e, mf_engine_stats *out);

#endif /* MF_STORAGE_ENGINE_H */
