/*
 * pager.c -- pages in one mapped file: open, allocate, free, copy-on-write
 * rules, checksums and the two-phase checkpoint.  pager.h is the manual:
 * formats, the generation rules and the free-space rule.
 *
 * State kept in memory (under `mu`):
 *   avail    free extents reusable now, sorted by start, coalesced
 *   pending  extents freed in generation g while an image referred to them,
 *            each tagged with g; released once checkpoint g + 1 is durable
 *   born     runs allocated in the current generation: the pages the next
 *            checkpoint must checksum
 * The free list written at a checkpoint records avail plus everything
 * pending that the new image no longer needs (as free) and the runs freed
 * in the frozen generation (as pending), so an open reads no tree to know
 * what is free.
 */
#include "pager.h"
#include "os.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <xxhash.h>

#define META_MAGIC "MFDATA01"
#define META_HASH_AT (MF_PAGE_SIZE - 8)
#define FL_ENTRY 16u /* start u64, n u32, flags u32 */
#define FL_PER_PAGE ((MF_PAGE_SIZE - MF_PAGE_HEADER) / FL_ENTRY)
#define FL_PENDING 1u
#define GROW_MIN_PAGES 256u /* grow the file by at least 1 MiB */
/* Growth ends on a 2 MiB boundary: a page-cache folio is only made 2 MiB
 * when all of it lies inside the file, and one made smaller at the end
 * stays smaller after the file grows past it. */
#define HUGE_PAGES (MF_OS_HUGE_BYTES / MF_PAGE_SIZE)

typedef struct extent {
    mf_pgno start;
    uint64_t n;
    uint64_t gen; /* pending only: the generation it was freed in */
} extent;

typedef struct extlist {
    extent *v;
    size_t n, cap;
} extlist;

struct mf_pager {
    mf_pager_map map; /* first: pager.h's inline lookups read it */
    mf_file *file;
    size_t reserved;
    mf_huge_pages huge_mode;
    uint64_t huge_max_pages; /* AUTO: advised while mapped <= this */
    bool huge;               /* advised 2 MiB pages, and the kernel took it,
                                for all of the mapping */

    pthread_mutex_t mu;
    uint64_t gen;         /* the current (writers') generation */
    uint64_t durable_gen; /* the newest durable checkpoint */
    bool failed;          /* a checkpoint write failed: no more until reopen */
    extlist avail, pending, born;
    uint8_t *born_start;  /* per page: 1 if a live run born in the current
                             generation starts here (filters `born`) */
    size_t born_cap;
    mf_pgno freelist_head; /* the newest image's free-list chain */
    atomic_uint_fast64_t nverified;
    atomic_uint_fast64_t npending; /* pages in `pending` (read without mu) */
    uint64_t navail;   /* pages in `avail` */
    uint64_t promised; /* pages writers have reserved (mf_pager_reserve) */
};

struct mf_checkpoint {
    uint64_t gen;
    extlist born; /* runs to checksum */
    uint8_t meta[MF_PAGE_SIZE];
};

/* ------------------------------------------------------------- extents */

static int ext_push(extlist *l, extent e)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        extent *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = e;
    return 0;
}

static void ext_free(extlist *l)
{
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

/* Index of the first extent with start > no. */
static size_t ext_upper(const extlist *l, mf_pgno no)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->v[mid].start <= no)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Insert [start, start + n) into a sorted, coalesced list. */
static int ext_insert(extlist *l, mf_pgno start, uint64_t n)
{
    size_t i = ext_upper(l, start);
    bool join_prev = i > 0 && l->v[i - 1].start + l->v[i - 1].n == start;
    bool join_next = i < l->n && start + n == l->v[i].start;
    if (join_prev && join_next) {
        l->v[i - 1].n += n + l->v[i].n;
        memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *l->v);
        l->n--;
    } else if (join_prev) {
        l->v[i - 1].n += n;
    } else if (join_next) {
        l->v[i].start = start;
        l->v[i].n += n;
    } else {
        if (ext_push(l, (extent){0}) != 0)
            return -1;
        memmove(&l->v[i + 1], &l->v[i], (l->n - 1 - i) * sizeof *l->v);
        l->v[i] = (extent){.start = start, .n = n};
    }
    return 0;
}

/* Take `n` pages best fit; returns false if no extent is large enough. */
static bool ext_take_best(extlist *l, uint64_t n, mf_pgno *out)
{
    size_t best = l->n;
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].n >= n && (best == l->n || l->v[i].n < l->v[best].n)) {
            best = i;
            if (l->v[i].n == n)
                break;
        }
    }
    if (best == l->n)
        return false;
    *out = l->v[best].start;
    l->v[best].start += n;
    l->v[best].n -= n;
    if (l->v[best].n == 0) {
        memmove(&l->v[best], &l->v[best + 1], (l->n - best - 1) * sizeof *l->v);
        l->n--;
    }
    return true;
}

static uint64_t ext_total(const extlist *l)
{
    uint64_t t = 0;
    for (size_t i = 0; i < l->n; i++)
        t += l->v[i].n;
    return t;
}

/* `avail` with its page count kept (mf_pager_reserve reads it per write). */
static int avail_put(mf_pager *pg, mf_pgno start, uint64_t n)
{
    int r = ext_insert(&pg->avail, start, n);
    if (r == 0)
        pg->navail += n;
    return r;
}

static bool avail_take(mf_pager *pg, uint64_t n, mf_pgno *out)
{
    if (!ext_take_best(&pg->avail, n, out))
        return false;
    pg->navail -= n;
    return true;
}

static uint64_t avail_largest(const mf_pager *pg)
{
    uint64_t m = 0;
    for (size_t i = 0; i < pg->avail.n; i++)
        if (pg->avail.v[i].n > m)
            m = pg->avail.v[i].n;
    return m;
}

/* ------------------------------------------------------------ page access */

static inline uint8_t *page_at(mf_pager *pg, mf_pgno no)
{
    return pg->map.base + no * (uint64_t)MF_PAGE_SIZE;
}

static void header_init(uint8_t *p, uint64_t gen, uint8_t type, uint32_t run)
{
    memset(p, 0, MF_PAGE_HEADER);
    memcpy(p + 8, &gen, 8);
    p[16] = type;
    memcpy(p + 20, &run, 4);
}

static uint64_t run_hash(const uint8_t *p, uint32_t run)
{
    return XXH3_64bits(p + 8, (size_t)run * MF_PAGE_SIZE - 8);
}

static inline bool page_verified(mf_pager *pg, mf_pgno no)
{
    return mf_pager_map_verified(&pg->map, no);
}

/* Mark page `no` verified; true if it was not yet. */
static bool set_verified(mf_pager *pg, mf_pgno no)
{
    uint64_t bit = (uint64_t)1 << (no % 64);
    return !(atomic_fetch_or_explicit(&pg->map.verified[no / 64], bit, memory_order_release) & bit);
}

/* Page `no` passed its checksum: mark it, and count it once. */
static void checked(mf_pager *pg, mf_pgno no)
{
    if (set_verified(pg, no))
        atomic_fetch_add_explicit(&pg->nverified, 1, memory_order_relaxed);
}

uint8_t *mf_pager_page_verify(mf_pager *pg, mf_pgno no, mf_error *err)
{
    uint64_t mapped = atomic_load_explicit(&pg->map.mapped, memory_order_acquire);
    if (no < 2 || no >= mapped) {
        mf_error_set(err, MF_DataCorruption, "page %llu of %s is out of range (%llu pages)",
                     (unsigned long long)no, mf_os_path(pg->file), (unsigned long long)mapped);
        return NULL;
    }
    uint8_t *p = page_at(pg, no);
    if (!page_verified(pg, no)) {
        uint32_t run = mf_page_run(p);
        uint64_t want;
        memcpy(&want, p, 8);
        if (run == 0 || no + run > mapped || run_hash(p, run) != want) {
            mf_error_set(err, MF_DataCorruption,
                         "checksum mismatch on page %llu of %s: the page is damaged",
                         (unsigned long long)no, mf_os_path(pg->file));
            return NULL;
        }
        checked(pg, no);
    }
    return p;
}

bool mf_pager_writable(mf_pager *pg, mf_pgno no)
{
    /* Only writers call this, and they are held off while gen changes. */
    return mf_page_gen(page_at(pg, no)) == pg->gen;
}

uint64_t mf_pager_generation(mf_pager *pg)
{
    return pg->gen;
}

/* ------------------------------------------------------------- growth */

/* Whether a file of `pages` pages is to be advised 2 MiB pages. */
static bool huge_wanted(const mf_pager *pg, uint64_t pages)
{
    return pg->huge_mode == MF_HUGE_ON ||
           (pg->huge_mode == MF_HUGE_AUTO && pages <= pg->huge_max_pages);
}

/* Give the advice of mf_huge_pages for pages [from, to), just mapped (the
 * whole mapping at open, then each extent growth adds).  Under mu, or
 * before the pager is shared. */
static void advise_huge(mf_pager *pg, uint64_t from, uint64_t to)
{
    bool on = huge_wanted(pg, to);
    if (from > 0 && on != huge_wanted(pg, from))
        from = 0; /* AUTO, outgrown: withdraw the advice from all of it */
    bool took = mf_os_advise_huge(pg->map.base + from * (uint64_t)MF_PAGE_SIZE,
                                  (to - from) * (uint64_t)MF_PAGE_SIZE, on);
    pg->huge = on && took && (from == 0 || pg->huge);
}

/* Grow the file by at least `n` pages; the new pages join avail.  Under mu. */
static int grow(mf_pager *pg, uint64_t n, mf_error *err)
{
    uint64_t mapped = atomic_load(&pg->map.mapped);
    uint64_t add = n;
    if (add < mapped / 8)
        add = mapped / 8;
    if (add < GROW_MIN_PAGES)
        add = GROW_MIN_PAGES;
    add += (HUGE_PAGES - (mapped + add) % HUGE_PAGES) % HUGE_PAGES;
    uint64_t new_pages = mapped + add;
    if (new_pages * (uint64_t)MF_PAGE_SIZE > pg->reserved)
        return mf_error_set(err, MF_OutOfDiskSpace,
                            "the data file would exceed the %zu bytes of address space "
                            "reserved for it",
                            pg->reserved);
    /* Real blocks, not a sparse tail: a store through the mapping into a
     * hole on a full file system would kill the process with SIGBUS. */
    int rc = mf_os_allocate(pg->file, mapped * (uint64_t)MF_PAGE_SIZE,
                            add * (uint64_t)MF_PAGE_SIZE, false, "pager.grow", err);
    if (rc == MF_OutOfDiskSpace && add > n) {
        /* Nearly full: take only what is asked for. */
        add = n;
        new_pages = mapped + add;
        rc = mf_os_allocate(pg->file, mapped * (uint64_t)MF_PAGE_SIZE,
                            add * (uint64_t)MF_PAGE_SIZE, false, "pager.grow", err);
    }
    if (rc == 0)
        rc = mf_os_map(pg->file, pg->map.base, mapped * (uint64_t)MF_PAGE_SIZE,
                       add * (uint64_t)MF_PAGE_SIZE, "pager.map", err);
    if (rc != 0)
        return rc;
    advise_huge(pg, mapped, new_pages);
    if (avail_put(pg, mapped, add) != 0)
        return mf_error_oom(err);
    atomic_store_explicit(&pg->map.mapped, new_pages, memory_order_release);
    return 0;
}

/* Take `n` contiguous free pages, growing the file if no extent fits, and
 * mark those that existed at open as verified (they are new content).
 * Under mu. */
static int take_pages(mf_pager *pg, uint32_t n, mf_pgno *out, mf_error *err)
{
    int rc;
    if (!avail_take(pg, n, out)) {
        if ((rc = grow(pg, n, err)) != 0)
            return rc;
        if (!avail_take(pg, n, out))
            return mf_error_set(err, MF_InternalError, "allocation failed after growth");
    }
    for (uint64_t i = *out; i < *out + n && i < pg->map.open_pages; i++)
        set_verified(pg, i);
    return 0;
}

/* Allocate under mu. */
static int alloc_locked(mf_pager *pg, uint32_t n, uint8_t type, uint64_t gen, mf_pgno *out,
                        mf_error *err)
{
    mf_pgno no;
    int rc;
    if ((rc = take_pages(pg, n, &no, err)) != 0)
        return rc;
    if (no >= pg->born_cap) {
        size_t cap = pg->born_cap ? pg->born_cap : 1024;
        while (cap <= no)
            cap *= 2;
        uint8_t *b = realloc(pg->born_start, cap);
        if (!b) {
            avail_put(pg, no, n);
            return mf_error_oom(err);
        }
        memset(b + pg->born_cap, 0, cap - pg->born_cap);
        pg->born_start = b;
        pg->born_cap = cap;
    }
    if (ext_push(&pg->born, (extent){.start = no, .n = n}) != 0) {
        avail_put(pg, no, n);
        return mf_error_oom(err);
    }
    pg->born_start[no] = 1;
    header_init(page_at(pg, no), gen, type, n);
    *out = no;
    return 0;
}

int mf_pager_alloc_run(mf_pager *pg, uint32_t n, mf_pgno *out, uint64_t *gen, mf_error *err)
{
    mf_pgno no;
    int rc = 0;
    if (n == 0)
        return mf_error_set(err, MF_BadValue, "cannot allocate zero pages");
    pthread_mutex_lock(&pg->mu);
    /* No header and no born entry: the owner keeps the run's generation
     * and checksum, and nothing about it changes at a checkpoint. */
    if ((rc = take_pages(pg, n, &no, err)) == 0) {
        *out = no;
        *gen = pg->gen;
    }
    pthread_mutex_unlock(&pg->mu);
    return rc;
}

void mf_pager_free_run(mf_pager *pg, mf_pgno no, uint32_t n, uint64_t gen)
{
    pthread_mutex_lock(&pg->mu);
    if (gen == pg->gen) {
        avail_put(pg, no, n);
    } else {
        ext_push(&pg->pending, (extent){.start = no, .n = n, .gen = pg->gen});
        atomic_fetch_add_explicit(&pg->npending, n, memory_order_relaxed);
    }
    pthread_mutex_unlock(&pg->mu);
}

const uint8_t *mf_pager_run(mf_pager *pg, mf_pgno no, size_t len, uint64_t hash, mf_error *err)
{
    uint64_t mapped = atomic_load_explicit(&pg->map.mapped, memory_order_acquire);
    uint64_t n = (len + MF_PAGE_SIZE - 1) / MF_PAGE_SIZE;
    if (no < 2 || no + n > mapped) {
        mf_error_set(err, MF_DataCorruption, "run at page %llu of %s is out of range",
                     (unsigned long long)no, mf_os_path(pg->file));
        return NULL;
    }
    const uint8_t *p = page_at(pg, no);
    if (!page_verified(pg, no)) {
        if (XXH3_64bits(p, len) != hash) {
            mf_error_set(err, MF_DataCorruption,
                         "checksum mismatch in the %zu-byte run at page %llu of %s: the data "
                         "is damaged",
                         len, (unsigned long long)no, mf_os_path(pg->file));
            return NULL;
        }
        checked(pg, no);
    }
    return p;
}

int mf_pager_reserve(mf_pager *pg, uint64_t pages, uint32_t max_run, mf_error *err)
{
    int rc = 0;
    pthread_mutex_lock(&pg->mu);
    uint64_t want = pg->promised + pages;
    if (pg->navail < want || (max_run > 1 && avail_largest(pg) < max_run)) {
        /* The new extent is contiguous: it holds the shortfall and the run. */
        uint64_t short_by = pg->navail < want ? want - pg->navail : 0;
        rc = grow(pg, short_by + max_run, err);
    }
    if (rc == 0)
        pg->promised = want;
    pthread_mutex_unlock(&pg->mu);
    return rc;
}

void mf_pager_unreserve(mf_pager *pg, uint64_t pages)
{
    pthread_mutex_lock(&pg->mu);
    pg->promised = pg->promised > pages ? pg->promised - pages : 0;
    pthread_mutex_unlock(&pg->mu);
}

uint64_t mf_pager_checkpoint_pages(mf_pager *pg)
{
    pthread_mutex_lock(&pg->mu);
    uint64_t entries = pg->avail.n + pg->pending.n + pg->born.n;
    pthread_mutex_unlock(&pg->mu);
    /* The free list's pages, with the slack write_freelist allows for the
     * extents its own allocation splits. */
    return (entries + 2) / FL_PER_PAGE + 4;
}

int mf_pager_alloc(mf_pager *pg, uint32_t n, uint8_t type, mf_pgno *out, mf_error *err)
{
    if (n == 0)
        return mf_error_set(err, MF_BadValue, "cannot allocate zero pages");
    pthread_mutex_lock(&pg->mu);
    int rc = alloc_locked(pg, n, type, pg->gen, out, err);
    pthread_mutex_unlock(&pg->mu);
    return rc;
}

static void free_locked(mf_pager *pg, mf_pgno no)
{
    uint8_t *p = page_at(pg, no);
    uint32_t run = mf_page_run(p);
    uint64_t born_gen = mf_page_gen(p);
    if (born_gen == pg->gen) {
        /* No image refers to it: reusable now, and no checkpoint needs it. */
        avail_put(pg, no, run);
        if (no < pg->born_cap)
            pg->born_start[no] = 0;
    } else {
        ext_push(&pg->pending, (extent){.start = no, .n = run, .gen = pg->gen});
        atomic_fetch_add_explicit(&pg->npending, run, memory_order_relaxed);
    }
}

void mf_pager_free(mf_pager *pg, mf_pgno no)
{
    pthread_mutex_lock(&pg->mu);
    free_locked(pg, no);
    pthread_mutex_unlock(&pg->mu);
}

/* ------------------------------------------------------------------ open */

static bool meta_valid(const uint8_t *m, uint64_t *gen)
{
    uint64_t want;
    memcpy(&want, m + META_HASH_AT, 8);
    if (memcmp(m, META_MAGIC, 8) != 0 || XXH3_64bits(m, META_HASH_AT) != want)
        return false;
    uint32_t version, psize;
    memcpy(&version, m + 8, 4);
    memcpy(&psize, m + 12, 4);
    if (version != 1 || psize != MF_PAGE_SIZE)
        return false;
    memcpy(gen, m + 16, 8);
    return true;
}

/* Read the chosen image's free list into avail and pending. */
static int load_freelist(mf_pager *pg, mf_pgno head, uint64_t image_gen, mf_error *err)
{
    uint64_t guard = 0;
    for (mf_pgno no = head; no != 0; guard++) {
        if (guard > atomic_load(&pg->map.mapped))
            return mf_error_set(err, MF_DataCorruption, "the free list of %s loops",
                                mf_os_path(pg->file));
        uint8_t *p = mf_pager_page(pg, no, err);
        if (!p)
            return err->code;
        if (mf_page_type(p) != MF_PAGE_FREELIST)
            return mf_error_set(err, MF_DataCorruption,
                                "page %llu of %s should be a free-list page",
                                (unsigned long long)no, mf_os_path(pg->file));
        uint16_t count;
        memcpy(&count, p + 18, 2);
        if (count > FL_PER_PAGE)
            return mf_error_set(err, MF_DataCorruption, "free-list page %llu of %s is damaged",
                                (unsigned long long)no, mf_os_path(pg->file));
        for (uint16_t i = 0; i < count; i++) {
            const uint8_t *e = p + MF_PAGE_HEADER + (size_t)i * FL_ENTRY;
            uint64_t start;
            uint32_t n, flags;
            memcpy(&start, e, 8);
            memcpy(&n, e + 8, 4);
            memcpy(&flags, e + 12, 4);
            if (start < 2 || n == 0 || start + n > atomic_load(&pg->map.mapped))
                return mf_error_set(err, MF_DataCorruption,
                                    "free-list page %llu of %s names pages out of range",
                                    (unsigned long long)no, mf_os_path(pg->file));
            int r = (flags & FL_PENDING)
                        ? ext_push(&pg->pending,
                                   (extent){.start = start, .n = n, .gen = image_gen})
                        : avail_put(pg, start, n);
            if (flags & FL_PENDING)
                atomic_fetch_add_explicit(&pg->npending, n, memory_order_relaxed);
            if (r != 0)
                return mf_error_oom(err);
        }
        memcpy(&no, p + 24, 8);
    }
    pg->freelist_head = head;
    return 0;
}

int mf_pager_open(const char *path, const mf_pager_options *opt, mf_pager **out,
                  uint8_t user[MF_META_USER_SIZE], uint64_t *gen, mf_error *err)
{
    int rc;
    uint64_t size;
    uint8_t metas[2][MF_PAGE_SIZE];
    mf_pager *pg = calloc(1, sizeof *pg);
    if (!pg)
        return mf_error_oom(err);
    pthread_mutex_init(&pg->mu, NULL);
    pg->reserved = opt && opt->reserve_bytes ? opt->reserve_bytes : ((size_t)1 << 40);
    pg->huge_mode = opt ? opt->huge_pages : MF_HUGE_AUTO;
    uint64_t huge_max = opt && opt->huge_max_bytes ? opt->huge_max_bytes
                                                   : mf_os_physical_memory() / 4;
    pg->huge_max_pages = huge_max / MF_PAGE_SIZE;

    if ((rc = mf_os_open(path, MF_OS_CREATE, &pg->file, opt ? opt->faults : NULL, "pager.open",
                         err)) != 0 ||
        (rc = mf_os_size(pg->file, &size, err)) != 0)
        goto fail;

    uint64_t npages, image_gen = 0;
    mf_pgno fl_head = 0;
    memset(user, 0, MF_META_USER_SIZE);
    if (size == 0) {
        /* A new file: two empty meta slots; the first checkpoint is gen 1. */
        npages = 2;
        if ((rc = mf_os_truncate(pg->file, 2 * MF_PAGE_SIZE, "pager.grow", err)) != 0)
            goto fail;
    } else {
        size_t got;
        uint64_t g[2] = {0, 0};
        bool ok[2];
        for (int i = 0; i < 2; i++) {
            memset(metas[i], 0, MF_PAGE_SIZE);
            if ((rc = mf_os_pread(pg->file, metas[i], MF_PAGE_SIZE,
                                  (uint64_t)i * MF_PAGE_SIZE, &got, "pager.read", err)) != 0)
                goto fail;
            ok[i] = got == MF_PAGE_SIZE && meta_valid(metas[i], &g[i]);
        }
        if (!ok[0] && !ok[1]) {
            /* No checkpoint has completed if a slot was never written (all
             * zeros) and the other does not verify: the first checkpoint's
             * meta write was cut short (tests/test_rel_power.py, torn).
             * The file then holds nothing durable -- start it again; the
             * log still holds everything, since it is dropped only up to
             * the checkpoint before the newest, when both slots have been
             * written.  Two written, invalid slots are damage. */
            bool blank[2] = {true, true};
            for (int i = 0; i < 2; i++)
                for (size_t b = 0; b < MF_PAGE_SIZE && blank[i]; b++)
                    blank[i] = metas[i][b] == 0;
            if (!blank[0] && !blank[1]) {
                rc = mf_error_set(err, MF_DataCorruption,
                                  "neither meta page of %s is valid: the data file is damaged",
                                  path);
                goto fail;
            }
            npages = 2;
            if ((rc = mf_os_truncate(pg->file, 2 * MF_PAGE_SIZE, "pager.grow", err)) != 0)
                goto fail;
        } else {
            int pick = (ok[0] && (!ok[1] || g[0] > g[1])) ? 0 : 1;
            const uint8_t *m = metas[pick];
            image_gen = g[pick];
            memcpy(&npages, m + 24, 8);
            memcpy(&fl_head, m + 32, 8);
            memcpy(user, m + 48, MF_META_USER_SIZE);
            if (npages < 2 || npages * (uint64_t)MF_PAGE_SIZE > size) {
                rc = mf_error_set(err, MF_DataCorruption,
                                  "%s is shorter than its checkpoint says (%llu pages)", path,
                                  (unsigned long long)npages);
                goto fail;
            }
            /* Pages allocated after the checkpoint hold nothing durable. */
            if (npages * (uint64_t)MF_PAGE_SIZE < size &&
                (rc = mf_os_truncate(pg->file, npages * (uint64_t)MF_PAGE_SIZE,
                                     "pager.truncate", err)) != 0)
                goto fail;
        }
    }
    if (npages * (uint64_t)MF_PAGE_SIZE > pg->reserved) {
        rc = mf_error_set(err, MF_BadValue, "%s is larger than the reserved address space", path);
        goto fail;
    }
    /* Address space may be limited (ulimit -v, many servers in one
     * process): settle for less, down to what the file needs plus room. */
    while ((rc = mf_os_reserve(pg->reserved, (void **)&pg->map.base, err)) != 0 &&
           pg->reserved / 2 >= npages * (uint64_t)MF_PAGE_SIZE * 2 &&
           pg->reserved / 2 >= ((size_t)1 << 30))
        pg->reserved /= 2;
    if (rc != 0 ||
        (rc = mf_os_map(pg->file, pg->map.base, 0, npages * (uint64_t)MF_PAGE_SIZE, "pager.map",
                        err)) != 0)
        goto fail;
    advise_huge(pg, 0, npages);
    atomic_store(&pg->map.mapped, npages);
    pg->map.open_pages = npages;
    pg->map.verified = calloc((npages + 63) / 64, sizeof *pg->map.verified);
    if (!pg->map.verified) {
        rc = mf_error_oom(err);
        goto fail;
    }
    pg->gen = image_gen + 1;
    pg->durable_gen = image_gen;
    if ((rc = load_freelist(pg, fl_head, image_gen, err)) != 0)
        goto fail;
    *gen = image_gen;
    *out = pg;
    return 0;

fail:
    mf_pager_close(pg);
    return rc;
}

void mf_pager_close(mf_pager *pg)
{
    if (!pg)
        return;
    mf_os_unreserve(pg->map.base, pg->reserved);
    mf_os_close(pg->file);
    free((void *)pg->map.verified);
    ext_free(&pg->avail);
    ext_free(&pg->pending);
    ext_free(&pg->born);
    free(pg->born_start);
    pthread_mutex_destroy(&pg->mu);
    free(pg);
}

/* ------------------------------------------------------------ checkpoint */

/* Free the previous image's free-list chain (it is replaced). */
static void free_old_freelist(mf_pager *pg)
{
    mf_pgno no = pg->freelist_head;
    while (no != 0) {
        uint8_t *p = page_at(pg, no);
        mf_pgno next;
        memcpy(&next, p + 24, 8);
        free_locked(pg, no);
        no = next;
    }
    pg->freelist_head = 0;
}

/* Entries the new image's free list records: avail and the pending runs
 * freed before the frozen generation, as free; those freed in it, pending. */
static size_t freelist_entries(mf_pager *pg, uint64_t frozen)
{
    size_t n = pg->avail.n;
    for (size_t i = 0; i < pg->pending.n; i++)
        (void)frozen, n++;
    return n;
}

static void put_entry(uint8_t *e, mf_pgno start, uint64_t n, uint32_t flags)
{
    uint32_t n32 = (uint32_t)n;
    memcpy(e, &start, 8);
    memcpy(e + 8, &n32, 4);
    memcpy(e + 12, &flags, 4);
}

/* Write the free list into freshly allocated pages; under mu, before the
 * generation ends (the pages belong to the frozen image). */
static int write_freelist(mf_pager *pg, uint64_t frozen, mf_error *err)
{
    int rc;
    /* Allocating the list's own pages can split an extent: allow slack. */
    size_t need = 0, have = 0;
    mf_pgno pages[4096];
    for (;;) {
        size_t entries = freelist_entries(pg, frozen);
        /* Extents longer than 2^32-1 pages are written in pieces. */
        for (size_t i = 0; i < pg->avail.n; i++)
            entries += (size_t)(pg->avail.v[i].n >> 32);
        need = (entries + 2 + FL_PER_PAGE - 1) / FL_PER_PAGE;
        if (need <= have)
            break;
        if (have == sizeof pages / sizeof pages[0])
            return mf_error_set(err, MF_InternalError, "free list too fragmented");
        if ((rc = alloc_locked(pg, 1, MF_PAGE_FREELIST, frozen, &pages[have], err)) != 0)
            return rc;
        have++;
    }
    /* Fill the pages in order, chaining them. */
    size_t page_i = 0, slot = 0;
    uint8_t *p = page_at(pg, pages[0]);
#define EMIT(start_, n_, flags_)                                                          \
    do {                                                                                  \
        if (slot == FL_PER_PAGE) {                                                        \
            uint16_t c_ = (uint16_t)slot;                                                 \
            memcpy(p + 18, &c_, 2);                                                       \
            memcpy(p + 24, &pages[page_i + 1], 8);                                        \
            p = page_at(pg, pages[++page_i]);                                             \
            slot = 0;                                                                     \
        }                                                                                 \
        put_entry(p + MF_PAGE_HEADER + slot * FL_ENTRY, (start_), (n_), (flags_));        \
        slot++;                                                                           \
    } while (0)
    for (size_t i = 0; i < pg->avail.n; i++) {
        mf_pgno s = pg->avail.v[i].start;
        uint64_t left = pg->avail.v[i].n;
        while (left > 0) {
            uint64_t piece = left > UINT32_MAX ? UINT32_MAX : left;
            EMIT(s, piece, 0);
            s += piece;
            left -= piece;
        }
    }
    for (size_t i = 0; i < pg->pending.n; i++) {
        const extent *e = &pg->pending.v[i];
        EMIT(e->start, e->n, e->gen >= frozen ? FL_PENDING : 0);
    }
#undef EMIT
    uint16_t c = (uint16_t)slot;
    memcpy(p + 18, &c, 2);
    mf_pgno zero = 0;
    memcpy(p + 24, &zero, 8);
    /* Unused slack pages stay chained but empty. */
    for (size_t i = page_i + 1; i < have; i++) {
        uint8_t *q = page_at(pg, pages[i]);
        memcpy(page_at(pg, pages[i - 1]) + 24, &pages[i], 8);
        uint16_t z = 0;
        memcpy(q + 18, &z, 2);
        memcpy(q + 24, &zero, 8);
    }
    pg->freelist_head = pages[0];
    return 0;
}

int mf_pager_checkpoint_freeze(mf_pager *pg, const uint8_t user[MF_META_USER_SIZE],
                               mf_checkpoint **out, mf_error *err)
{
    int rc;
    mf_checkpoint *cp = calloc(1, sizeof *cp);
    if (!cp)
        return mf_error_oom(err);
    pthread_mutex_lock(&pg->mu);
    if (pg->failed) {
        rc = mf_error_set(err, MF_InternalError,
                          "an earlier checkpoint of %s failed; reopen the database",
                          mf_os_path(pg->file));
        goto fail;
    }
    uint64_t frozen = pg->gen;
    free_old_freelist(pg);
    if ((rc = write_freelist(pg, frozen, err)) != 0)
        goto fail;

    /* The generation ends: its pages are now part of image `frozen`. */
    cp->gen = frozen;
    for (size_t i = 0; i < pg->born.n; i++) {
        /* Only runs still live, once each: a run freed within the
         * generation may since be part of another run (or reallocated by the
         * next generation while we checksum). */
        extent e = pg->born.v[i];
        if (!pg->born_start[e.start] || mf_page_run(page_at(pg, e.start)) != e.n)
            continue;
        pg->born_start[e.start] = 0;
        if (ext_push(&cp->born, e) != 0) {
            rc = mf_error_oom(err);
            goto fail;
        }
    }
    pg->born.n = 0;
    pg->gen = frozen + 1;

    uint8_t *m = cp->meta;
    uint32_t version = 1, psize = MF_PAGE_SIZE;
    uint64_t npages = atomic_load(&pg->map.mapped);
    memcpy(m, META_MAGIC, 8);
    memcpy(m + 8, &version, 4);
    memcpy(m + 12, &psize, 4);
    memcpy(m + 16, &frozen, 8);
    memcpy(m + 24, &npages, 8);
    memcpy(m + 32, &pg->freelist_head, 8);
    memcpy(m + 48, user, MF_META_USER_SIZE);
    uint64_t h = XXH3_64bits(m, META_HASH_AT);
    memcpy(m + META_HASH_AT, &h, 8);
    pthread_mutex_unlock(&pg->mu);
    *out = cp;
    return 0;

fail:
    pthread_mutex_unlock(&pg->mu);
    ext_free(&cp->born);
    free(cp);
    return rc;
}

int mf_pager_checkpoint_write(mf_pager *pg, mf_checkpoint *cp, mf_error *err)
{
    int rc;
    /* The frozen pages no longer change: checksum them. */
    for (size_t i = 0; i < cp->born.n; i++) {
        uint8_t *p = page_at(pg, cp->born.v[i].start);
        uint64_t h = run_hash(p, mf_page_run(p));
        memcpy(p, &h, 8);
    }
    /* Data before meta: the meta page must never name a page not yet on
     * disk. */
    if ((rc = mf_os_sync(pg->file, true, "pager.sync", err)) != 0 ||
        (rc = mf_os_pwrite(pg->file, cp->meta, MF_PAGE_SIZE,
                           (cp->gen % 2) * (uint64_t)MF_PAGE_SIZE, "pager.meta", err)) != 0 ||
        (rc = mf_os_sync(pg->file, true, "pager.sync", err)) != 0) {
        pthread_mutex_lock(&pg->mu);
        pg->failed = true;
        pthread_mutex_unlock(&pg->mu);
        goto out;
    }
    /* Checkpoint cp->gen is durable, and the meta page of cp->gen - 2 is
     * overwritten: runs freed in generations before cp->gen are now
     * referred to by neither meta page on disk. */
    pthread_mutex_lock(&pg->mu);
    pg->durable_gen = cp->gen;
    size_t keep = 0;
    for (size_t i = 0; i < pg->pending.n; i++) {
        extent e = pg->pending.v[i];
        if (e.gen < cp->gen) {
            avail_put(pg, e.start, e.n);
            atomic_fetch_sub_explicit(&pg->npending, e.n, memory_order_relaxed);
        } else
            pg->pending.v[keep++] = e;
    }
    pg->pending.n = keep;
    pthread_mutex_unlock(&pg->mu);
out:
    ext_free(&cp->born);
    free(cp);
    return rc;
}

uint64_t mf_pager_file_pages(mf_pager *pg)
{
    return atomic_load_explicit(&pg->map.mapped, memory_order_relaxed);
}

uint64_t mf_pager_pending_pages(mf_pager *pg)
{
    return atomic_load_explicit(&pg->npending, memory_order_relaxed);
}

void mf_pager_get_stats(mf_pager *pg, mf_pager_stats *out)
{
    pthread_mutex_lock(&pg->mu);
    out->file_pages = atomic_load(&pg->map.mapped);
    out->free_pages = ext_total(&pg->avail);
    out->pending_pages = ext_total(&pg->pending);
    out->extents = pg->avail.n;
    out->verified = atomic_load(&pg->nverified);
    out->huge_pages = pg->huge;
    pthread_mutex_unlock(&pg->mu);
}
