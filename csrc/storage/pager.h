/*
 * pager.h -- fixed 4 KiB pages in one memory-mapped data file, allocated
 * from free extents, copied on write against the last durable checkpoint,
 * checksummed at checkpoint and verified on first use after open.
 *
 * File layout: page 0 and page 1 are the two meta pages; every other page
 * belongs to a tree, an overflow run, the free list, or is free.
 *
 *   Meta page (pwrite'n whole; the newest one whose hash verifies wins):
 *   OFFSET SIZE DESCRIPTION
 *   0      8    magic "MFDATA01"
 *   8      4    format version (1)
 *   12     4    page size (4096)
 *   16     8    generation of this checkpoint (1, 2, ...); slot = gen % 2
 *   24     8    file length in pages at this checkpoint
 *   32     8    first page of the free-list chain (0: none)
 *   40     8    reserved
 *   48     256  the engine's own area (roots, LSN; opaque here)
 *   4088   8    XXH3-64 of bytes [0, 4088)
 *
 *   Every other page, except the pages of an overflow run (which hold only
 *   the owner's bytes; the owning cell keeps the run's generation and
 *   checksum), starts with this 32-byte header:
 *   0      8    XXH3-64 of bytes [8, npages * 4096) of the run, written at
 *               the checkpoint that first includes the page
 *   8      8    generation the page was born in
 *   16     1    type (MF_PAGE_*)
 *   17     1    flags (the owner's)
 *   18     2    count (the owner's: cells in a B+tree page)
 *   20     4    pages in this run (1, or the length of an overflow run)
 *   24     8    the owner's (B+tree: leftmost child of a branch)
 *
 * Generations.  Checkpoint k (on disk as a meta page with gen k) is an
 * immutable image.  Writers work in generation `current` (k + 1 while
 * checkpoint k is the newest started).  A page born in the current
 * generation may be changed in place; any older page must be copied first
 * (mf_pager_writable tells which), so nothing a durable image refers to is
 * ever overwritten.
 *
 * Free space.  A page freed while it belongs to no image (born in the
 * current generation) is reusable at once.  A page freed in generation g
 * that an image refers to is reusable only once checkpoint g is durable and
 * the meta page of g - 1 has been overwritten -- i.e. after checkpoint g + 1
 * is durable -- because until then recovery may still choose an image that
 * refers to it.  Free runs are kept as extents sorted by page number,
 * coalesced on free, allocated best fit.
 *
 * Pointers.  mf_pager_page() returns a pointer into the mapping.  The base
 * never moves (the file is mapped into a range reserved at open), so the
 * pointer stays valid until the page is freed; the caller's locks (the
 * collection lock) guarantee that.
 *
 * Threads.  Allocation, free and checkpoint take the pager's mutex;
 * mf_pager_page() takes none.  The engine must hold writers off between
 * mf_pager_checkpoint_freeze() and its return (the O(1) freeze); the flush
 * (mf_pager_checkpoint_write) runs while writers continue.
 */
#ifndef MF_STORAGE_PAGER_H
#define MF_STORAGE_PAGER_H

#include "../util/util.h"
#include "os.h"

#include <stdatomic.h>
#include <string.h>

#define MF_PAGE_SIZE 4096u
#define MF_PAGE_HEADER 32u
#define MF_META_USER_SIZE 256u

typedef uint64_t mf_pgno;
typedef struct mf_pager mf_pager;

enum {
    MF_PAGE_FREE = 0,
    MF_PAGE_LEAF = 1,
    MF_PAGE_BRANCH = 2,
    MF_PAGE_OVERFLOW = 3,
    MF_PAGE_FREELIST = 4,
};

/* Header accessors (little-endian fields at the offsets above). */
static inline uint64_t mf_page_gen(const uint8_t *p) { uint64_t v; memcpy(&v, p + 8, 8); return v; }
static inline uint8_t mf_page_type(const uint8_t *p) { return p[16]; }
static inline uint32_t mf_page_run(const uint8_t *p) { uint32_t v; memcpy(&v, p + 20, 4); return v; }

/* Whether the mapping asks for 2 MiB pages (transparent huge pages): an
 * index fetch touches a new 4 KiB page per document, and with one TLB entry
 * per 2 MiB most of its page walks go.  The cost is read-ahead: a page-cache
 * miss in such a mapping reads 2 MiB and more, which a file much larger than
 * memory, read at random, would pay on every miss.  So by default (AUTO) the
 * advice holds while the file is at most `huge_max_bytes`; a file past that
 * at open, or once it grows past, is advised as OFF (the whole mapping). */
typedef enum {
    MF_HUGE_AUTO = 0,
    MF_HUGE_ON,  /* always advised */
    MF_HUGE_OFF, /* never: MADV_NOHUGEPAGE, even if the system default is "always" */
} mf_huge_pages;

typedef struct mf_pager_options {
    uint64_t reserve_bytes;  /* address space to reserve; 0: 1 TiB */
    mf_huge_pages huge_pages;
    uint64_t huge_max_bytes; /* AUTO's limit; 0: a quarter of physical memory */
    mf_os_faults *faults;    /* the data file's fault table (os.h), which must
                                outlive the pager; NULL: none */
} mf_pager_options;

/* Open (creating if missing) the data file at `path`.  Reads the two meta
 * pages and picks the newest whose hash verifies; loads its free list.
 * `user` receives the chosen meta's engine area (zeros for a new file),
 * `*gen` its generation (0 for a new file).  Errors: MF_DataCorruption when
 * neither meta page verifies in a non-empty file, or a free-list page is
 * damaged; os errors. */
int mf_pager_open(const char *path, const mf_pager_options *opt, mf_pager **out,
                  uint8_t user[MF_META_USER_SIZE], uint64_t *gen, mf_error *err);

/* Unmap and close.  Writes nothing: call a checkpoint first for a clean
 * close. */
void mf_pager_close(mf_pager *pg);

/* What every page lookup reads: the first member of struct mf_pager, so
 * that the lookups below inline into the B+tree's loops (an index scan
 * makes several per document it fetches).  Only pager.c writes it. */
typedef struct mf_pager_map {
    uint8_t *base;               /* the mapping; never moves */
    atomic_uint_fast64_t mapped; /* the file's length in pages, all mapped */
    uint64_t open_pages;         /* pages at open: these are verified on use */
    /* One bit per page below open_pages, set once the page is verified
     * (or rewritten): a bitmap rather than a byte per page, so that the
     * check on a random page of a large file is a cache hit. */
    _Atomic uint64_t *verified;
} mf_pager_map;

static inline const mf_pager_map *mf_pager_map_of(const mf_pager *pg)
{
    return (const mf_pager_map *)(const void *)pg;
}

/* Whether page `no` needs no checksum check: written since open, or
 * verified already. */
static inline bool mf_pager_map_verified(const mf_pager_map *m, mf_pgno no)
{
    return no >= m->open_pages ||
           ((atomic_load_explicit(&m->verified[no / 64], memory_order_acquire) >> (no % 64)) & 1);
}

/* mf_pager_page's work for a page not yet verified (or out of range). */
uint8_t *mf_pager_page_verify(mf_pager *pg, mf_pgno no, mf_error *err);

/* The page (first page of a run) `no`, verifying its run's checksum the
 * first time a page that existed at open is used.  Returns NULL with `err`
 * set (MF_DataCorruption naming the page) if the checksum fails or `no` is
 * out of range. */
static inline uint8_t *mf_pager_page(mf_pager *pg, mf_pgno no, mf_error *err)
{
    const mf_pager_map *m = mf_pager_map_of(pg);
    uint64_t mapped = atomic_load_explicit(&m->mapped, memory_order_acquire);
    if (no >= 2 && no < mapped && mf_pager_map_verified(m, no))
        return m->base + no * (uint64_t)MF_PAGE_SIZE;
    return mf_pager_page_verify(pg, no, err);
}

/* Where page `no` is mapped, or NULL if it is out of range -- with no
 * checksum verification: only for prefetch hints (mf_btree_prefetch_*),
 * whose reads decide nothing. */
static inline uint8_t *mf_pager_hint(mf_pager *pg, mf_pgno no)
{
    const mf_pager_map *m = mf_pager_map_of(pg);
    uint64_t mapped = atomic_load_explicit(&m->mapped, memory_order_acquire);
    return no >= 2 && no < mapped ? m->base + no * (uint64_t)MF_PAGE_SIZE : NULL;
}

/* Allocate a run of `n` contiguous pages, born in the current generation,
 * header initialised (type, run length, generation; the rest zero).  May
 * grow the file.  Errors: os errors (ENOSPC as MF_OutOfDiskSpace). */
int mf_pager_alloc(mf_pager *pg, uint32_t n, uint8_t type, mf_pgno *out, mf_error *err);

/* Promise `pages` free pages, `max_run` of them contiguous, to a writer
 * about to make changes that must not fail half way for want of space:
 * grows the file first if the free pages not already promised to others
 * fall short.  Errors: MF_OutOfDiskSpace (nothing promised, nothing
 * changed), os errors.  The caller allocates as usual, then gives the
 * promise back with mf_pager_unreserve(pages).  (Contiguity is checked
 * against the free extents, not promised: two writers each needing a long
 * run may still share one extent; the engine serializes those.) */
int mf_pager_reserve(mf_pager *pg, uint64_t pages, uint32_t max_run, mf_error *err);
void mf_pager_unreserve(mf_pager *pg, uint64_t pages);

/* An upper bound on the pages the next checkpoint freeze allocates (its
 * free list), for mf_pager_reserve before it. */
uint64_t mf_pager_checkpoint_pages(mf_pager *pg);

/* Allocate `n` contiguous pages for an overflow run: no header, so a value
 * of n * 4096 bytes fills exactly n pages.  The owner records the run's
 * generation (`*gen`) and its checksum, and passes them back to
 * mf_pager_run and mf_pager_free_run.  The run must not change after it is
 * written (copy-on-write does not apply to it). */
int mf_pager_alloc_run(mf_pager *pg, uint32_t n, mf_pgno *out, uint64_t *gen, mf_error *err);

/* The `len` bytes of the run at `no`, verifying them against `hash`
 * (XXH3-64) the first time a run that existed at open is used.  NULL with
 * MF_DataCorruption on a mismatch or a run out of range. */
const uint8_t *mf_pager_run(mf_pager *pg, mf_pgno no, size_t len, uint64_t hash, mf_error *err);

/* Free a headerless run of `n` pages born in generation `gen`. */
void mf_pager_free_run(mf_pager *pg, mf_pgno no, uint32_t n, uint64_t gen);

/* Free the run starting at `no` (its length is in its header). */
void mf_pager_free(mf_pager *pg, mf_pgno no);

/* Whether page `no` may be changed in place (born in the current gen). */
bool mf_pager_writable(mf_pager *pg, mf_pgno no);

uint64_t mf_pager_generation(mf_pager *pg);

/* -------------------------------------------------------------- checkpoint */

typedef struct mf_checkpoint mf_checkpoint;

/* The freeze: O(number of free extents).  Ends the current generation
 * (its pages become immutable), writes the free list for the image into
 * fresh pages, and captures `user` for the meta page.  The caller must hold
 * off every writer for the duration of this call only. */
int mf_pager_checkpoint_freeze(mf_pager *pg, const uint8_t user[MF_META_USER_SIZE],
                               mf_checkpoint **out, mf_error *err);

/* The flush, while writers continue: checksum the frozen generation's
 * pages, sync the file, write the meta page, sync again, then release the
 * free runs this checkpoint made safe.  On error the checkpoint did not
 * happen (the previous one still stands); `cp` is freed either way. */
int mf_pager_checkpoint_write(mf_pager *pg, mf_checkpoint *cp, mf_error *err);

/* Pages freed but not yet reusable (waiting for a checkpoint); lock-free,
 * for deciding when to checkpoint. */
uint64_t mf_pager_pending_pages(mf_pager *pg);
/* The file's length in pages; lock-free. */
uint64_t mf_pager_file_pages(mf_pager *pg);

/* Statistics for tests and benchmarks. */
typedef struct mf_pager_stats {
    uint64_t file_pages;    /* the file's length in pages */
    uint64_t free_pages;    /* reusable now */
    uint64_t pending_pages; /* freed, waiting for a checkpoint */
    uint64_t extents;       /* free extents */
    uint64_t verified;      /* pages whose checksum was checked since open */
    bool huge_pages;        /* all of the mapping is advised to use 2 MiB
                               pages, and the kernel took the advice */
} mf_pager_stats;
void mf_pager_get_stats(mf_pager *pg, mf_pager_stats *out);

#endif /* MF_STORAGE_PAGER_H */
