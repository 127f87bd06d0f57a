/*
 * btree.h -- B+trees of variable-length byte keys (compared with memcmp)
 * and byte values, in pager pages, copied on write.
 *
 * A tree is named by its root page number, which changes as the tree is
 * written (copy-on-write reaches the root); the caller keeps the current
 * root (mf_btree.root) and stores it in the catalog.  Root 0 is the empty
 * tree.
 *
 * Pointers returned by lookups and cursors point into the mapping.  They
 * stay valid until the tree is next modified -- by this or any other call --
 * so the caller holds the tree's lock (a collection's read lock) for as long
 * as it uses them.  A value too large for a leaf lives in an overflow run:
 * one contiguous range of pages, so a value is always one byte range.
 *
 * Keys are 1 .. MF_BTREE_MAX_KEY bytes; values 0 .. MF_BTREE_MAX_VALUE.
 * Deletes do not rebalance: an emptied page is freed and unlinked; a branch
 * left with one child is replaced by it.
 *
 * Errors: MF_DataCorruption when a page is damaged (checksum, type, order);
 * MF_OutOfDiskSpace and other os errors from page allocation.  After an
 * error in a modifying call the tree may hold the change or not, but its
 * pages are consistent; the engine treats such an error as fatal for the
 * write (the log has no record of it) and re-derives the tree on reopen.
 */
#ifndef MF_STORAGE_BTREE_H
#define MF_STORAGE_BTREE_H

#include "pager.h"

#define MF_BTREE_MAX_KEY 32768u
#define MF_BTREE_MAX_VALUE (64u * 1024 * 1024)
#define MF_BTREE_MAX_DEPTH 40

/* Whether a tree can take a key of `klen` bytes and a value of `vlen`:
 * 0, or MF_BadValue outside 1 .. MF_BTREE_MAX_KEY and 0 .. MF_BTREE_MAX_VALUE
 * (what mf_btree_put refuses before it changes anything). */
int mf_btree_check_sizes(size_t klen, size_t vlen, mf_error *err);

typedef struct mf_btree_locator mf_btree_locator;

typedef struct mf_btree {
    mf_pager *pg;
    mf_pgno root;
    /* The leaf of every key range of a tree of 8-byte keys (record ids),
     * for mf_btree_prefetch_leaves: NULL until mf_btree_locator_build,
     * and again after any change to the tree.  Readers build and install
     * it while holding the tree's read lock; every modifying call drops
     * it, and a writer holds the write lock, so no reader still uses it. */
    _Atomic(mf_btree_locator *) loc;
    /* Leaves found by descents in mf_btree_prefetch_leaves (no locator)
     * since the tree last changed, across every reader: what building the
     * locator would have saved so far (mf_btree_descents). */
    _Atomic uint64_t descents;
} mf_btree;

/* Free what the tree holds in memory (the locator): before the struct
 * goes. */
void mf_btree_release(mf_btree *t);

/* Look `key` up.  `*found` says whether it is there; if so `*val`/`*vlen`
 * give its value (valid as the header says). */
int mf_btree_get(mf_btree *t, const uint8_t *key, size_t klen, bool *found,
                 const uint8_t **val, size_t *vlen, mf_error *err);

/* Levels from the root to the leaves (0 for the empty tree), or -1 with
 * `err` set for a damaged page. */
int mf_btree_height(mf_btree *t, mf_error *err);

/* Hints for later mf_btree_get calls on 8-byte keys (record ids): ask the
 * memory system for what they will read, without waiting for it.
 * mf_btree_prefetch_leaves finds each key's leaf (reading branch pages,
 * which are usually cached, into `hints`) and asks for the leaves' headers
 * and slots; mf_btree_prefetch_cells, called with those hints once the
 * headers had time to arrive, asks for the cells the leaves' searches will
 * touch.  `height` is mf_btree_height's answer.  A stale height or stale
 * hints (the tree changed since) only make the hints useless: these never
 * fail, change nothing and leave damage for the lookups to report. */
typedef struct mf_btree_hint {
    mf_pgno leaf;          /* 0: none */
    uint64_t lower, upper; /* the separators around the leaf, if bounded */
    bool bounded;
    /* Guesses kept from one stage for the next, each checked where used:
     * the locator entry (mf_btree_prefetch_locator) and the leaf's slot
     * (mf_btree_prefetch_cells); -1 when not guessed. */
    int64_t entry;
    int slot;
} mf_btree_hint;

void mf_btree_prefetch_leaves(mf_btree *t, const uint8_t (*keys)[8], int n, int height,
                              mf_btree_hint *hints);

/* The locator: the first key and page of every leaf, in one sorted array,
 * so that mf_btree_prefetch_leaves finds a key's leaf by interpolation in
 * it instead of a descent through the branch pages (whose cells, spread
 * over a page each, miss the cache).  Worth it for long index scans: it
 * costs a read of every branch entry above the leaves (about 16 bytes of
 * memory per leaf) and lasts until the tree next changes.
 *
 * mf_btree_leaves_estimate: the number of leaves, extrapolated from the
 * fan-out along the leftmost path (0 for a tree of height < 3, where the
 * descent is one cached page and no locator is built).
 * mf_btree_locator_build: builds and installs the locator unless there is
 * one; false when there is none after (height < 3, a key that is not 8
 * bytes, damage or no memory: the descents go on, and report damage). */
uint64_t mf_btree_leaves_estimate(mf_btree *t, int height);
bool mf_btree_locator_build(mf_btree *t, int height);
bool mf_btree_has_locator(mf_btree *t);
/* The descents mf_btree_prefetch_leaves made since the tree last changed
 * (0 after any change): a locator outlives the scan that builds it, so
 * the scans before it count towards its cost too. */
uint64_t mf_btree_descents(mf_btree *t);
/* Ask for the locator entries mf_btree_prefetch_leaves will read first
 * for these keys (nothing without a locator): a batch ahead of it, so
 * that it does not wait for them when the locator is not in cache.  The
 * entries guessed go to hints[i].entry, where mf_btree_prefetch_leaves
 * starts; a caller that skips this call sets entry to -1. */
void mf_btree_prefetch_locator(mf_btree *t, const uint8_t (*keys)[8], int n,
                               mf_btree_hint *hints);
void mf_btree_prefetch_cells(mf_btree *t, const uint8_t (*keys)[8], int n,
                             mf_btree_hint *hints);
/* A batch after mf_btree_prefetch_cells, with the same hints: ask for the
 * rest of each value that runs past the lines that call asked for
 * (CELL_LINES in btree.c), its length read from the cell's header. */
void mf_btree_prefetch_values(mf_btree *t, const mf_btree_hint *hints, int n);
/* Whether a value mf_btree_get_hinted returned (`v`, `vl` bytes, under an
 * 8-byte key) runs past the lines mf_btree_prefetch_cells asked for: a
 * scan whose values never do can leave out mf_btree_prefetch_values. */
bool mf_btree_value_past_cells(const uint8_t *v, size_t vl);

/* mf_btree_get, starting at the leaf a hint found for `key`
 * (mf_btree_prefetch_leaves) instead of the root, and in it at the slot
 * the hint's separators place the key (mf_btree_prefetch_cells' guess)
 * before any search.  The key found in that leaf is the answer, since a
 * leaf holds the only copy of a key; anything else
 * (no hint, the key not there) falls back to the descent from the root.
 * The hint must come from the tree as it is now: found since it was last
 * modified, like any cursor position (btree.h's rule for pointers). */
int mf_btree_get_hinted(mf_btree *t, const mf_btree_hint *h, const uint8_t *key, size_t klen,
                        bool *found, const uint8_t **val, size_t *vlen, mf_error *err);

/* Insert or replace.  With `no_overwrite`, an existing key is left alone
 * and `*existed` is set (the call succeeds). */
int mf_btree_put(mf_btree *t, const uint8_t *key, size_t klen, const uint8_t *val,
                 size_t vlen, bool no_overwrite, bool *existed, mf_error *err);

/* Delete `key`; `*found` says whether it was there. */
int mf_btree_delete(mf_btree *t, const uint8_t *key, size_t klen, bool *found, mf_error *err);

/* Free every page of the tree; it becomes empty. */
int mf_btree_drop(mf_btree *t, mf_error *err);

/* Walk the whole tree checking page types, key order within and across
 * pages, separators and overflow runs.  `*entries` gets the key count. */
int mf_btree_validate(mf_btree *t, uint64_t *entries, mf_error *err);

/* What a tree holds and the pages it occupies. */
typedef struct mf_btree_usage {
    uint64_t entries;        /* keys */
    uint64_t key_bytes;      /* sum of key lengths */
    uint64_t value_bytes;    /* sum of value lengths */
    uint64_t branch_pages;
    uint64_t leaf_pages;
    uint64_t overflow_runs;  /* long keys and values, one run each */
    uint64_t overflow_pages; /* pages of those runs */
} mf_btree_usage;

/* Bytes of the file the tree occupies: every page it owns, 4 KiB each. */
static inline uint64_t mf_btree_usage_bytes(const mf_btree_usage *u)
{
    return (u->branch_pages + u->leaf_pages + u->overflow_pages) * MF_PAGE_SIZE;
}

/* Count the tree's pages, runs, keys and bytes into `*out` by visiting
 * every page (O(pages); overflow runs are counted from their owning cells,
 * never read).  The caller holds the tree's lock, as for a cursor.  Errors:
 * MF_DataCorruption for a damaged page. */
int mf_btree_measure(mf_btree *t, mf_btree_usage *out, mf_error *err);

/* ------------------------------------------------------------------ cursor */

typedef struct mf_cursor {
    mf_btree *t;
    int depth; /* levels in path; 0 when not positioned */
    struct {
        mf_pgno no;
        int idx; /* slot in the page; in a branch, -1 is the leftmost child */
    } path[MF_BTREE_MAX_DEPTH];
} mf_cursor;

void mf_cursor_init(mf_cursor *c, mf_btree *t);
/* Position at the first key >= `key` (or <= with `backward`); `*valid`
 * false when there is none. */
int mf_cursor_seek(mf_cursor *c, const uint8_t *key, size_t klen, bool backward, bool *valid,
                   mf_error *err);
int mf_cursor_first(mf_cursor *c, bool *valid, mf_error *err);
int mf_cursor_last(mf_cursor *c, bool *valid, mf_error *err);
int mf_cursor_next(mf_cursor *c, bool *valid, mf_error *err);
int mf_cursor_prev(mf_cursor *c, bool *valid, mf_error *err);
/* The current entry (the cursor must be valid).  These cannot fail: the
 * move that made the cursor valid verified the entry's overflow runs (a
 * damaged run fails that move with MF_DataCorruption instead). */
void mf_cursor_key(mf_cursor *c, const uint8_t **key, size_t *klen);
void mf_cursor_value(mf_cursor *c, const uint8_t **val, size_t *vlen);
/* mf_cursor_next (or, `backward`, mf_cursor_prev) for the common case, in
 * one call: when the next entry is in the same leaf and holds its key and
 * value in the page (no overflow run, so nothing to verify), step onto it
 * and give its key and value.  Otherwise return false with the cursor
 * unchanged: the caller steps with mf_cursor_next or mf_cursor_prev. */
bool mf_cursor_step_in_leaf(mf_cursor *c, bool backward, const uint8_t **key, size_t *klen,
                            const uint8_t **val, size_t *vlen);
/* mf_cursor_seek within the cursor's leaf, onward from its entry: when a
 * key past the cursor's entry in the same leaf is >= `key` (<= with
 * `backward`, before it), and the keys looked at are in the page, move
 * onto the first such in that direction and give its key and value (no
 * descent from the root).  Otherwise return false with the cursor
 * unchanged: the caller seeks with mf_cursor_seek. */
bool mf_cursor_seek_in_leaf(mf_cursor *c, bool backward, const uint8_t *key, size_t klen,
                            const uint8_t **k, size_t *kl, const uint8_t **val, size_t *vlen);
/* Ask the memory system for the whole of the leaf after the cursor's (the
 * one before, `backward`), if the cursor's parent page holds it: a scan
 * that reads every entry of its leaves calls this on entering one, so the
 * next is in cache when it gets there.  Reads only; decides nothing. */
void mf_cursor_prefetch_next_leaf(const mf_cursor *c, bool backward);

/* ------------------------------------------------------------- bulk build */

typedef struct mf_bulk mf_bulk;

/* Build an empty tree from keys given in strictly increasing order, filling
 * pages left to right.  mf_btree_bulk_finish sets t->root. */
int mf_btree_bulk_begin(mf_btree *t, mf_bulk **out, mf_error *err);
int mf_btree_bulk_add(mf_bulk *b, const uint8_t *key, size_t klen, const uint8_t *val,
                      size_t vlen, mf_error *err);
int mf_btree_bulk_finish(mf_bulk *b, mf_error *err);
/* Abandon a build (freeing what it allocated). */
void mf_btree_bulk_abort(mf_bulk *b);

#endif /* MF_STORAGE_BTREE_H */
