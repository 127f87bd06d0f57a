/*
 * btree.c -- copy-on-write B+trees over pager pages.  btree.h is the
 * contract; this comment is the format.
 *
 *   B+tree page (after the pager's 32-byte header; count = cells):
 *   OFFSET SIZE DESCRIPTION
 *   32     8    branch: leftmost child (keys below the first separator)
 *   40     2    offset of the lowest cell byte (cells grow down from 4096)
 *   42     6    reserved
 *   48     2*n  slot array: cell offsets, in key order
 *
 *   Leaf cell:    u8 flags, u8 0, u16 key length, u32 value length,
 *                 key bytes (or a run reference if KEY_OVF),
 *                 value bytes (or a run reference if VAL_OVF)
 *   Branch cell:  u8 flags, u8 0, u16 key length, u32 0, u64 child,
 *                 key bytes (or a run reference if KEY_OVF)
 *   Run reference (24 bytes): u64 first page, u64 generation it was born
 *                 in, u64 XXH3-64 of its bytes
 *
 * A branch cell's child holds the keys >= its key (and < the next cell's).
 * An overflow run is headerless (pager.h): its bytes start at its first
 * page and run on, so a long key or value is one range, and a value of
 * n x 4 KiB takes exactly n pages.  The reference carries what a page
 * header would: the generation (for the free-space rule) and the checksum
 * (verified on first use after open).
 * Every overflow run has exactly one owning cell: a split that copies a
 * long key into a parent makes a new run for it; copy-on-write of a page
 * shares runs between the old page (part of an older image, never changed)
 * and its copy, and a run is freed only when its cell is removed.
 *
 * Invariants (mf_btree_validate checks them):
 *   1. keys strictly increase within a page and across the tree;
 *   2. every key in a child lies within its separators' bounds;
 *   3. no leaf is empty; the empty tree is root 0;
 *   4. every page is MF_PAGE_LEAF or MF_PAGE_BRANCH at the right depth.
 *
 * Modifications descend from the root making each page on the path
 * writable (a copy if it belongs to an older generation), so pointers to
 * children are rewritten in place on the way back up.
 */
#include "btree.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <xxhash.h>

#define BT_HDR 48u
#define MAX_SLOTS ((int)((MF_PAGE_SIZE - BT_HDR) / 2)) /* more is damage */
#define MAX_CELL 1000u        /* keeps at least four cells in every page */
#define KEY_INLINE_MAX 800u   /* longer keys live in an overflow run */
#define KEY_OVF 0x01
#define VAL_OVF 0x02
#define LEAF_CELL_HDR 8u
#define BRANCH_CELL_HDR 16u
#define REF 24u /* a run reference */

/* ----------------------------------------------------------- page fields */

static inline uint16_t pcount(const uint8_t *p) { uint16_t v; memcpy(&v, p + 18, 2); return v; }
static inline void set_pcount(uint8_t *p, uint16_t v) { memcpy(p + 18, &v, 2); }
static inline uint16_t pstart(const uint8_t *p) { uint16_t v; memcpy(&v, p + 40, 2); return v ? v : (uint16_t)0; }
static inline void set_pstart(uint8_t *p, uint16_t v) { memcpy(p + 40, &v, 2); }
static inline mf_pgno pleft(const uint8_t *p) { mf_pgno v; memcpy(&v, p + 32, 8); return v; }
static inline void set_pleft(uint8_t *p, mf_pgno v) { memcpy(p + 32, &v, 8); }
static inline uint16_t slot(const uint8_t *p, int i) { uint16_t v; memcpy(&v, p + BT_HDR + 2 * i, 2); return v; }
static inline void set_slot(uint8_t *p, int i, uint16_t v) { memcpy(p + BT_HDR + 2 * i, &v, 2); }
static inline uint8_t *cell(uint8_t *p, int i) { return p + slot(p, i); }
static inline bool is_leaf(const uint8_t *p) { return mf_page_type(p) == MF_PAGE_LEAF; }

/* The lowest cell byte; 0 in a fresh page means "4096" (it does not fit
 * in the u16 range as 4096 would, so a fresh page is initialised below). */
static inline uint32_t cells_from(const uint8_t *p)
{
    uint16_t s = pstart(p);
    return s == 0 ? MF_PAGE_SIZE : s;
}

static void page_init(uint8_t *p)
{
    set_pcount(p, 0);
    set_pleft(p, 0);
    set_pstart(p, 0); /* 0 stands for 4096 */
}

static inline uint16_t c_klen(const uint8_t *c) { uint16_t v; memcpy(&v, c + 2, 2); return v; }
static inline uint32_t c_vlen(const uint8_t *c) { uint32_t v; memcpy(&v, c + 4, 4); return v; }
static inline mf_pgno c_child(const uint8_t *c) { mf_pgno v; memcpy(&v, c + 8, 8); return v; }
static inline void set_c_child(uint8_t *c, mf_pgno v) { memcpy(c + 8, &v, 8); }
static inline mf_pgno load_pgno(const uint8_t *p) { mf_pgno v; memcpy(&v, p, 8); return v; }

static size_t cell_size(const uint8_t *c, bool leaf)
{
    size_t n = leaf ? LEAF_CELL_HDR : BRANCH_CELL_HDR;
    n += (c[0] & KEY_OVF) ? REF : c_klen(c);
    if (leaf)
        n += (c[0] & VAL_OVF) ? REF : c_vlen(c);
    return n;
}

static inline uint32_t run_pages(size_t len)
{
    return (uint32_t)((len + MF_PAGE_SIZE - 1) / MF_PAGE_SIZE);
}

/* The `len` bytes a run reference names, verified on first use. */
static const uint8_t *run_data(mf_btree *t, const uint8_t *ref, size_t len, mf_error *err)
{
    return mf_pager_run(t->pg, load_pgno(ref), len, load_pgno(ref + 16), err);
}

static void run_free(mf_btree *t, const uint8_t *ref, size_t len)
{
    mf_pager_free_run(t->pg, load_pgno(ref), run_pages(len), load_pgno(ref + 8));
}

/* The key of a cell; NULL with err set if its overflow run is damaged. */
static const uint8_t *cell_key(mf_btree *t, const uint8_t *c, bool leaf, size_t *klen,
                               mf_error *err)
{
    const uint8_t *k = c + (leaf ? LEAF_CELL_HDR : BRANCH_CELL_HDR);
    *klen = c_klen(c);
    if (c[0] & KEY_OVF)
        return run_data(t, k, *klen, err);
    return k;
}

static const uint8_t *cell_value(mf_btree *t, const uint8_t *c, size_t *vlen, mf_error *err)
{
    const uint8_t *v = c + LEAF_CELL_HDR + ((c[0] & KEY_OVF) ? REF : c_klen(c));
    *vlen = c_vlen(c);
    if (c[0] & VAL_OVF)
        return run_data(t, v, *vlen, err);
    return v;
}

static inline uint64_t load_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

static int keycmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    if (alen == 8 && blen == 8) { /* record ids: one load each, no call */
        uint64_t x = load_be64(a), y = load_be64(b);
        return x < y ? -1 : x > y;
    }
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c != 0)
        return c;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

/* The locator: the first key of every leaf, ascending, and the leaf. */
struct mf_btree_locator {
    size_t n, cap;
    struct {
        uint64_t key;
        mf_pgno leaf;
    } *at; /* key and page side by side: one cache line per probe */
    /* For locator_guess: the first and last keys, and entries per key
     * between them, so that a guess is one multiplication. */
    uint64_t first, last;
    double per_key;
};

static void locator_free(mf_btree_locator *l)
{
    if (l) {
        free(l->at);
        free(l);
    }
}

/* Every modifying call starts here: the locator names pages the change
 * may free or copy. */
static void modified(mf_btree *t)
{
    locator_free(atomic_exchange_explicit(&t->loc, NULL, memory_order_acq_rel));
    atomic_store_explicit(&t->descents, 0, memory_order_relaxed);
}

void mf_btree_release(mf_btree *t)
{
    modified(t);
}

static int corrupt(mf_btree *t, mf_pgno no, const char *what, mf_error *err)
{
    (void)t;
    return mf_error_set(err, MF_DataCorruption, "B+tree page %llu is damaged: %s",
                        (unsigned long long)no, what);
}

/* `off` of `span` scaled to [0, n), for a guess: off < span, n > 0.  In double
 * precision, which is plenty for a guess and cheaper than a 128-bit
 * division. */
static inline size_t scaled(uint64_t off, uint64_t span, size_t n)
{
    size_t g = (size_t)((double)off / (double)span * (double)n);
    return g < n ? g : n - 1;
}

/* Where an 8-byte key probably sits among a page's slots [lo, hi), all
 * 8-byte keys too: record ids, which are dense where nothing was deleted,
 * so the position interpolated between the first and last key is usually
 * the slot itself.  A binary search touches about log2(n) cells, each a
 * cache miss in a page not read lately; this touches three.  Returns -1
 * when the page's keys are not plain 8-byte keys (search() bisects). */
static int interpolate(uint8_t *p, bool leaf, int n, const uint8_t *key)
{
    const uint8_t *c0 = cell(p, 0), *cn = cell(p, n - 1);
    if ((c0[0] | cn[0]) & KEY_OVF || c_klen(c0) != 8 || c_klen(cn) != 8)
        return -1;
    size_t hdr = leaf ? LEAF_CELL_HDR : BRANCH_CELL_HDR;
    uint64_t first = load_be64(c0 + hdr), last = load_be64(cn + hdr), k = load_be64(key);
    if (k <= first)
        return 0;
    if (k >= last)
        return n - 1;
    return (int)scaled(k - first, last - first, (size_t)n - 1);
}

/* Binary search.  Leaf: the first slot whose key >= key (`*exact` if
 * equal).  Branch: the last slot whose key <= key, or -1. */
static int search(mf_btree *t, uint8_t *p, const uint8_t *key, size_t klen, bool *exact,
                  mf_error *err)
{
    bool leaf = is_leaf(p);
    int lo = 0, hi = pcount(p);
    int guess = klen == 8 && hi >= 4 ? interpolate(p, leaf, hi, key) : -1, guided = guess;
    *exact = false;
    while (lo < hi) {
        /* The interpolated slot first, then its neighbour above (the key
         * is often just past it), then bisection. */
        int mid = lo + (hi - lo) / 2;
        if (guess >= lo && guess < hi) {
            mid = guess;
            guess = guess == guided ? guess + 1 : -1;
        } else {
            guess = -1;
        }
        size_t ck;
        const uint8_t *k = cell_key(t, cell(p, mid), leaf, &ck, err);
        if (!k)
            return -2;
        int c = keycmp(k, ck, key, klen);
        if (c == 0) {
            *exact = true;
            return leaf ? mid : mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return leaf ? lo : lo - 1;
}

/* The child a branch slot names (-1: the leftmost). */
static mf_pgno child_at(uint8_t *p, int idx)
{
    return idx < 0 ? pleft(p) : c_child(cell(p, idx));
}

static void set_child_at(uint8_t *p, int idx, mf_pgno no)
{
    if (idx < 0)
        set_pleft(p, no);
    else
        set_c_child(cell(p, idx), no);
}

static inline uint8_t *get_page(mf_btree *t, mf_pgno no, mf_error *err)
{
    uint8_t *p = mf_pager_page(t->pg, no, err);
    if (p && mf_page_type(p) != MF_PAGE_LEAF && mf_page_type(p) != MF_PAGE_BRANCH) {
        corrupt(t, no, "not a B+tree page", err);
        return NULL;
    }
    return p;
}

/* One step of a descent: page `no` at `depth`, and where `key` falls in
 * it (search()'s answer in `*idx`).  Returns 0, or an error for a damaged
 * page or a tree deeper than any this code builds. */
static int visit(mf_btree *t, mf_pgno no, int depth, const uint8_t *key, size_t klen,
                 uint8_t **p, int *idx, bool *exact, mf_error *err)
{
    if (depth >= MF_BTREE_MAX_DEPTH)
        return corrupt(t, no, "the tree is too deep", err);
    if (!(*p = get_page(t, no, err)))
        return err->code;
    *idx = search(t, *p, key, klen, exact, err);
    return *idx == -2 ? err->code : 0;
}

/* Make page `*no` writable, copying it if an image refers to it. */
static int make_writable(mf_btree *t, mf_pgno *no, uint8_t **p, mf_error *err)
{
    if (mf_pager_writable(t->pg, *no))
        return 0;
    mf_pgno copy;
    int rc = mf_pager_alloc(t->pg, 1, mf_page_type(*p), &copy, err);
    if (rc != 0)
        return rc;
    uint8_t *q = mf_pager_page(t->pg, copy, err);
    /* Everything after the pager's own fields (which alloc initialised). */
    memcpy(q + 17, *p + 17, 3);
    memcpy(q + 24, *p + 24, MF_PAGE_SIZE - 24);
    mf_pager_free(t->pg, *no);
    *no = copy;
    *p = q;
    return 0;
}

/* -------------------------------------------------------- cell building */

/* A run holding `len` bytes from `data`; its reference goes to `ref`. */
static int make_run(mf_btree *t, const uint8_t *data, size_t len, uint8_t ref[REF],
                    mf_error *err)
{
    mf_pgno no;
    uint64_t gen;
    int rc = mf_pager_alloc_run(t->pg, run_pages(len), &no, &gen, err);
    if (rc != 0)
        return rc;
    uint8_t *p = (uint8_t *)mf_pager_run(t->pg, no, len, 0, NULL);
    memcpy(p, data, len);
    uint64_t h = XXH3_64bits(data, len);
    memcpy(ref, &no, 8);
    memcpy(ref + 8, &gen, 8);
    memcpy(ref + 16, &h, 8);
    return 0;
}

static void free_cell_runs(mf_btree *t, const uint8_t *c, bool leaf)
{
    const uint8_t *k = c + (leaf ? LEAF_CELL_HDR : BRANCH_CELL_HDR);
    if (c[0] & KEY_OVF)
        run_free(t, k, c_klen(c));
    if (leaf && (c[0] & VAL_OVF))
        run_free(t, k + ((c[0] & KEY_OVF) ? REF : c_klen(c)), c_vlen(c));
}

/* Build a leaf cell in `buf` (MAX_CELL bytes). */
static int leaf_cell(mf_btree *t, const uint8_t *key, size_t klen, const uint8_t *val,
                     size_t vlen, uint8_t *buf, size_t *len, mf_error *err)
{
    bool key_ovf = klen > KEY_INLINE_MAX;
    size_t kpart = key_ovf ? REF : klen;
    bool val_ovf = LEAF_CELL_HDR + kpart + vlen > MAX_CELL;
    uint16_t kl = (uint16_t)klen;
    uint32_t vl = (uint32_t)vlen;
    uint8_t kr[REF], vr[REF];
    int rc;
    if (key_ovf && (rc = make_run(t, key, klen, kr, err)) != 0)
        return rc;
    if (val_ovf && (rc = make_run(t, val, vlen, vr, err)) != 0) {
        if (key_ovf)
            run_free(t, kr, klen);
        return rc;
    }
    buf[0] = (uint8_t)((key_ovf ? KEY_OVF : 0) | (val_ovf ? VAL_OVF : 0));
    buf[1] = 0;
    memcpy(buf + 2, &kl, 2);
    memcpy(buf + 4, &vl, 4);
    size_t o = LEAF_CELL_HDR;
    if (key_ovf) {
        memcpy(buf + o, kr, REF);
        o += REF;
    } else {
        memcpy(buf + o, key, klen);
        o += klen;
    }
    if (val_ovf) {
        memcpy(buf + o, vr, REF);
        o += REF;
    } else {
        if (vlen)
            memcpy(buf + o, val, vlen);
        o += vlen;
    }
    *len = o;
    return 0;
}

/* Build a branch cell (separator `key`, `child`) in `buf`. */
static int branch_cell(mf_btree *t, const uint8_t *key, size_t klen, mf_pgno child,
                       uint8_t *buf, size_t *len, mf_error *err)
{
    bool key_ovf = klen > KEY_INLINE_MAX;
    uint16_t kl = (uint16_t)klen;
    uint32_t zero = 0;
    int rc;
    buf[0] = key_ovf ? KEY_OVF : 0;
    buf[1] = 0;
    memcpy(buf + 2, &kl, 2);
    memcpy(buf + 4, &zero, 4);
    memcpy(buf + 8, &child, 8);
    if (key_ovf) {
        if ((rc = make_run(t, key, klen, buf + BRANCH_CELL_HDR, err)) != 0)
            return rc;
        *len = BRANCH_CELL_HDR + REF;
    } else {
        memcpy(buf + BRANCH_CELL_HDR, key, klen);
        *len = BRANCH_CELL_HDR + klen;
    }
    return 0;
}

/* ------------------------------------------------------ page rewriting */

typedef struct cellref {
    const uint8_t *p;
    size_t len;
} cellref;

/* Rewrite page `p` to hold exactly `cells` (copied first: they may point
 * into `p`). */
static void page_fill(uint8_t *p, const cellref *cells, int n)
{
    uint8_t tmp[MF_PAGE_SIZE];
    uint16_t offs[MF_PAGE_SIZE / 8 + 1];
    uint32_t at = MF_PAGE_SIZE;
    /* Copy every cell out before writing a slot: a new slot may land on
     * bytes of a cell not yet copied. */
    for (int i = 0; i < n; i++) {
        at -= (uint32_t)cells[i].len;
        memcpy(tmp + at, cells[i].p, cells[i].len);
        offs[i] = (uint16_t)at;
    }
    for (int i = 0; i < n; i++)
        set_slot(p, i, offs[i]);
    memcpy(p + at, tmp + at, MF_PAGE_SIZE - at);
    set_pcount(p, (uint16_t)n);
    set_pstart(p, at == MF_PAGE_SIZE ? 0 : (uint16_t)at);
}

/* Bytes a page would need for `cells`. */
static size_t need_bytes(const cellref *cells, int n)
{
    size_t b = BT_HDR;
    for (int i = 0; i < n; i++)
        b += 2 + cells[i].len;
    return b;
}

/* The page's cells as refs, with `extra` inserted at `at` (or none). */
static int gather(uint8_t *p, int at, const uint8_t *extra, size_t extra_len, cellref *out)
{
    bool leaf = is_leaf(p);
    int n = pcount(p), k = 0;
    for (int i = 0; i <= n; i++) {
        if (i == at && extra)
            out[k++] = (cellref){extra, extra_len};
        if (i < n) {
            const uint8_t *c = cell(p, i);
            out[k++] = (cellref){c, cell_size(c, leaf)};
        }
    }
    return k;
}

/* Insert `c` (len bytes) at slot `at` of writable page `p` if it fits
 * (defragmenting if needed).  Returns false when it does not fit. */
static bool try_insert(uint8_t *p, int at, const uint8_t *c, size_t len)
{
    int n = pcount(p);
    uint32_t slots_end = BT_HDR + 2u * (uint32_t)(n + 1);
    uint32_t from = cells_from(p);
    if (slots_end + len <= from) {
        uint32_t off = from - (uint32_t)len;
        memcpy(p + off, c, len);
        memmove(p + BT_HDR + 2 * (at + 1), p + BT_HDR + 2 * at, 2u * (uint32_t)(n - at));
        set_slot(p, at, (uint16_t)off);
        set_pcount(p, (uint16_t)(n + 1));
        set_pstart(p, (uint16_t)off);
        return true;
    }
    cellref cells[MF_PAGE_SIZE / 8];
    int k = gather(p, at, c, len, cells);
    if (need_bytes(cells, k) > MF_PAGE_SIZE)
        return false;
    page_fill(p, cells, k);
    return true;
}

static void remove_slot(uint8_t *p, int at)
{
    int n = pcount(p);
    memmove(p + BT_HDR + 2 * at, p + BT_HDR + 2 * (at + 1), 2u * (uint32_t)(n - at - 1));
    set_pcount(p, (uint16_t)(n - 1));
    /* The cell's bytes become a hole, reclaimed by the next defragment. */
}

/* ----------------------------------------------------------------- split */

typedef struct ins_result {
    mf_pgno no;        /* this subtree's (possibly new) page */
    bool split;        /* a right sibling must be linked into the parent */
    uint8_t sep[BRANCH_CELL_HDR + KEY_INLINE_MAX]; /* its branch cell */
    size_t sep_len;
} ins_result;

/* Split writable page `p` (page `no`) holding its cells plus `c` at `at`.
 * The left half stays in `p`; the right goes to a new page; `res` gets the
 * separator cell for the parent. */
static int split(mf_btree *t, mf_pgno no, uint8_t *p, int at, const uint8_t *c, size_t len,
                 bool append, ins_result *res, mf_error *err)
{
    bool leaf = is_leaf(p);
    cellref cells[MF_PAGE_SIZE / 8 + 1];
    uint8_t copy[MF_PAGE_SIZE];
    uint8_t extra[MAX_CELL + 16];
    int rc;

    /* Work from a copy: the page is rewritten below. */
    memcpy(copy, p, MF_PAGE_SIZE);
    memcpy(extra, c, len);
    int n = gather(copy, at, extra, len, cells);

    size_t total = 0, acc = 0;
    for (int i = 0; i < n; i++)
        total += cells[i].len + 2;
    int m = 1;
    for (int i = 0; i < n - 1; i++) {
        acc += cells[i].len + 2;
        m = i + 1;
        if (acc >= total / 2)
            break;
    }
    /* Appending at the right edge of the tree (ascending keys: RecordIds,
     * ObjectIds): leave the left page full and start the right one with the
     * new cell alone, or sequential loads would leave every page half
     * empty. */
    if (append)
        m = n - 1;

    mf_pgno right_no;
    if ((rc = mf_pager_alloc(t->pg, 1, mf_page_type(p), &right_no, err)) != 0)
        return rc;
    uint8_t *right = mf_pager_page(t->pg, right_no, err);
    page_init(right);

    if (leaf) {
        page_fill(p, cells, m);
        page_fill(right, cells + m, n - m);
        size_t sk;
        const uint8_t *k = cell_key(t, right + slot(right, 0), true, &sk, err);
        if (!k)
            return err->code;
        if ((rc = branch_cell(t, k, sk, right_no, res->sep, &res->sep_len, err)) != 0)
            return rc;
    } else {
        /* Cell m moves up: its child leads the right page, its key (and
         * overflow run, if any) becomes the parent's separator. */
        const uint8_t *mid = cells[m].p;
        set_pleft(right, c_child(mid));
        memcpy(res->sep, mid, cells[m].len);
        res->sep_len = cells[m].len;
        set_c_child(res->sep, right_no);
        page_fill(p, cells, m);
        page_fill(right, cells + m + 1, n - m - 1);
    }
    res->no = no;
    res->split = true;
    return 0;
}

/* ---------------------------------------------------------------- insert */

typedef struct put_args {
    const uint8_t *key;
    size_t klen;
    const uint8_t *val;
    size_t vlen;
    bool no_overwrite;
    bool existed;
} put_args;

static int put_rec(mf_btree *t, mf_pgno no, int depth, bool rightmost, put_args *a,
                   ins_result *res, mf_error *err)
{
    bool exact;
    uint8_t *p;
    int idx;
    int rc = visit(t, no, depth, a->key, a->klen, &p, &idx, &exact, err);
    if (rc != 0)
        return rc;

    if (is_leaf(p)) {
        if (exact && a->no_overwrite) {
            a->existed = true;
            res->no = no;
            res->split = false;
            return 0;
        }
        if ((rc = make_writable(t, &no, &p, err)) != 0)
            return rc;
        uint8_t c[MAX_CELL];
        size_t len;
        if ((rc = leaf_cell(t, a->key, a->klen, a->val, a->vlen, c, &len, err)) != 0)
            return rc;
        if (exact) {
            a->existed = true;
            free_cell_runs(t, cell(p, idx), true);
            remove_slot(p, idx);
        }
        res->no = no;
        res->split = false;
        if (try_insert(p, idx, c, len))
            return 0;
        return split(t, no, p, idx, c, len, rightmost && idx == pcount(p), res, err);
    }

    if ((rc = make_writable(t, &no, &p, err)) != 0)
        return rc;
    ins_result child;
    bool last = idx == pcount(p) - 1;
    if ((rc = put_rec(t, child_at(p, idx), depth + 1, rightmost && last, a, &child, err)) != 0)
        return rc;
    set_child_at(p, idx, child.no);
    res->no = no;
    res->split = false;
    if (!child.split)
        return 0;
    if (try_insert(p, idx + 1, child.sep, child.sep_len))
        return 0;
    return split(t, no, p, idx + 1, child.sep, child.sep_len,
                 rightmost && idx + 1 == pcount(p), res, err);
}

int mf_btree_check_sizes(size_t klen, size_t vlen, mf_error *err)
{
    if (klen == 0 || klen > MF_BTREE_MAX_KEY)
        return mf_error_set(err, MF_BadValue, "B+tree key of %zu bytes (1 to %u allowed)", klen,
                            MF_BTREE_MAX_KEY);
    if (vlen > MF_BTREE_MAX_VALUE)
        return mf_error_set(err, MF_BadValue, "B+tree value of %zu bytes is too large", vlen);
    return 0;
}

int mf_btree_put(mf_btree *t, const uint8_t *key, size_t klen, const uint8_t *val,
                 size_t vlen, bool no_overwrite, bool *existed, mf_error *err)
{
    int rc;
    put_args a = {key, klen, val, vlen, no_overwrite, false};
    if ((rc = mf_btree_check_sizes(klen, vlen, err)) != 0)
        return rc;
    modified(t);
    if (t->root == 0) {
        mf_pgno no;
        if ((rc = mf_pager_alloc(t->pg, 1, MF_PAGE_LEAF, &no, err)) != 0)
            return rc;
        page_init(mf_pager_page(t->pg, no, err));
        t->root = no;
    }
    ins_result res;
    if ((rc = put_rec(t, t->root, 0, true, &a, &res, err)) != 0)
        return rc;
    t->root = res.no;
    if (res.split) {
        mf_pgno no;
        if ((rc = mf_pager_alloc(t->pg, 1, MF_PAGE_BRANCH, &no, err)) != 0)
            return rc;
        uint8_t *p = mf_pager_page(t->pg, no, err);
        page_init(p);
        set_pleft(p, res.no);
        try_insert(p, 0, res.sep, res.sep_len);
        t->root = no;
    }
    if (existed)
        *existed = a.existed;
    return 0;
}

/* ---------------------------------------------------------------- lookup */

int mf_btree_get(mf_btree *t, const uint8_t *key, size_t klen, bool *found,
                 const uint8_t **val, size_t *vlen, mf_error *err)
{
    mf_pgno no = t->root;
    *found = false;
    for (int depth = 0; no != 0; depth++) {
        bool exact;
        uint8_t *p;
        int idx;
        int rc = visit(t, no, depth, key, klen, &p, &idx, &exact, err);
        if (rc != 0)
            return rc;
        if (is_leaf(p)) {
            if (exact) {
                const uint8_t *v = cell_value(t, cell(p, idx), vlen, err);
                if (!v)
                    return err->code;
                *val = v;
                *found = true;
            }
            return 0;
        }
        no = child_at(p, idx);
    }
    return 0;
}

/* -------------------------------------------------------------- prefetch */

int mf_btree_height(mf_btree *t, mf_error *err)
{
    int h = 0;
    for (mf_pgno no = t->root; no != 0; h++) {
        if (h >= MF_BTREE_MAX_DEPTH)
            return corrupt(t, no, "the tree is too deep", err), -1;
        uint8_t *p = get_page(t, no, err);
        if (!p)
            return -1;
        if (is_leaf(p))
            return h + 1;
        no = pleft(p);
    }
    return h;
}

/* A slot's cell in a page that may be a stale or damaged one: NULL unless
 * it lies inside the page. */
static const uint8_t *cell_in_page(uint8_t *p, int i)
{
    uint16_t o = slot(p, i);
    return o >= BT_HDR && o < MF_PAGE_SIZE - 64 ? p + o : NULL;
}

/* Lines mf_btree_prefetch_cells asks for from a cell's start: the cell
 * and a short value after it (mf_btree_prefetch_values asks for the rest). */
#define CELL_LINES 3

static inline void prefetch_lines(const uint8_t *c, int lines)
{
    for (int i = 0; i < lines; i++)
        __builtin_prefetch(c + 64 * i);
}

/* The leaf that would hold 8-byte `key`, and the separators around it
 * (`bounded` when both are 8-byte keys), into `h`: branch pages only are
 * read, the leaf is not touched.  h->leaf 0 when the descent meets
 * anything odd. */
static void hint_leaf(mf_btree *t, const uint8_t *key, int height, mf_btree_hint *h)
{
    mf_error err; /* only set on damage, which is ignored here */
    err.code = 0;
    mf_pgno no = t->root;
    h->leaf = 0;
    h->bounded = false;
    for (int depth = 0; no != 0 && depth < height - 1; depth++) {
        uint8_t *p = get_page(t, no, &err);
        bool exact;
        if (!p || is_leaf(p))
            return;
        int idx = search(t, p, key, 8, &exact, &err), n = pcount(p);
        if (idx == -2)
            return;
        const uint8_t *lo = idx >= 0 ? cell_in_page(p, idx) : NULL;
        const uint8_t *hi = idx + 1 < n ? cell_in_page(p, idx + 1) : NULL;
        h->bounded = lo && hi && !((lo[0] | hi[0]) & KEY_OVF) && c_klen(lo) == 8 &&
                     c_klen(hi) == 8;
        if (h->bounded) {
            h->lower = load_be64(lo + BRANCH_CELL_HDR);
            h->upper = load_be64(hi + BRANCH_CELL_HDR);
        }
        no = child_at(p, idx);
    }
    h->leaf = no;
}

uint64_t mf_btree_leaves_estimate(mf_btree *t, int height)
{
    if (height < 3)
        return 0;
    mf_error err;
    uint64_t leaves = 1;
    mf_pgno no = t->root;
    for (int depth = 0; depth < height - 1; depth++) {
        uint8_t *p = get_page(t, no, &err);
        if (!p || is_leaf(p))
            return 0;
        leaves *= (uint64_t)pcount(p) + 1;
        no = pleft(p);
    }
    return leaves;
}

static bool locator_push(mf_btree_locator *l, uint64_t key, mf_pgno leaf)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        void *at = realloc(l->at, cap * sizeof *l->at);
        if (!at)
            return false;
        l->at = at;
        l->cap = cap;
    }
    if (l->n > 0 && key <= l->at[l->n - 1].key)
        return false; /* out of order: damage */
    l->at[l->n].key = key;
    l->at[l->n++].leaf = leaf;
    return true;
}

/* Branch page `no`, `levels` above the leaves, whose keys are >= `lower`:
 * its leaves into `l`.  False for anything but a sound branch of 8-byte
 * separators. */
static bool locator_fill(mf_btree *t, mf_btree_locator *l, mf_pgno no, int levels,
                         uint64_t lower)
{
    mf_error err;
    uint8_t *p = get_page(t, no, &err);
    int n;
    if (!p || is_leaf(p) || (n = pcount(p)) > MAX_SLOTS)
        return false;
    if (levels == 1 ? !locator_push(l, lower, pleft(p))
                    : !locator_fill(t, l, pleft(p), levels - 1, lower))
        return false;
    for (int i = 0; i < n; i++) {
        uint16_t o = slot(p, i);
        const uint8_t *c = p + o;
        if (o < BT_HDR + 2 * n || o + BRANCH_CELL_HDR + 8 > MF_PAGE_SIZE || (c[0] & KEY_OVF) ||
            c_klen(c) != 8)
            return false;
        uint64_t k = load_be64(c + BRANCH_CELL_HDR);
        if (levels == 1 ? !locator_push(l, k, c_child(c))
                        : !locator_fill(t, l, c_child(c), levels - 1, k))
            return false;
    }
    return true;
}

bool mf_btree_locator_build(mf_btree *t, int height)
{
    if (atomic_load_explicit(&t->loc, memory_order_acquire))
        return true;
    if (height < 3 || height > MF_BTREE_MAX_DEPTH)
        return false;
    mf_btree_locator *l = calloc(1, sizeof *l);
    if (!l || !locator_fill(t, l, t->root, height - 1, 0) || l->n < 2) {
        locator_free(l);
        return false;
    }
    l->first = l->at[0].key;
    l->last = l->at[l->n - 1].key; /* > first: locator_push keeps them in order */
    l->per_key = (double)(l->n - 1) / (double)(l->last - l->first);
    /* Another reader may have built one meanwhile: the first stays. */
    mf_btree_locator *none = NULL;
    if (!atomic_compare_exchange_strong_explicit(&t->loc, &none, l, memory_order_acq_rel,
                                                 memory_order_acquire))
        locator_free(l);
    return true;
}

bool mf_btree_has_locator(mf_btree *t)
{
    return atomic_load_explicit(&t->loc, memory_order_acquire) != NULL;
}

uint64_t mf_btree_descents(mf_btree *t)
{
    return atomic_load_explicit(&t->descents, memory_order_relaxed);
}

/* The locator entry interpolation places key `k` at: record ids are
 * dense, so it is usually the right one. */
static size_t locator_guess(const mf_btree_locator *l, uint64_t k)
{
    if (k <= l->first)
        return 0;
    if (k >= l->last)
        return l->n - 1;
    size_t g = (size_t)((double)(k - l->first) * l->per_key);
    return g < l->n - 1 ? g : l->n - 2;
}

/* hint_leaf by the locator: the last leaf whose first key is <= `key`.
 * h->entry, if set, is the guess to try first. */
static void locate_leaf(const mf_btree_locator *l, const uint8_t *key, mf_btree_hint *h)
{
    uint64_t k = load_be64(key);
    size_t lo = 0, hi = l->n; /* the answer is in [lo, hi) */
    size_t g = h->entry >= 0 && (uint64_t)h->entry < l->n ? (size_t)h->entry
                                                            : locator_guess(l, k);
    if (l->at[g].key <= k && (g + 1 == l->n || l->at[g + 1].key > k)) {
        lo = g;
    } else {
        if (l->at[g].key <= k)
            lo = g + 1;
        else
            hi = g;
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            if (l->at[mid].key <= k)
                lo = mid;
            else
                hi = mid;
        }
    }
    h->leaf = l->at[lo].leaf;
    h->bounded = lo > 0 && lo + 1 < l->n;
    if (h->bounded) {
        h->lower = l->at[lo].key;
        h->upper = l->at[lo + 1].key;
    }
}

void mf_btree_prefetch_locator(mf_btree *t, const uint8_t (*keys)[8], int n,
                               mf_btree_hint *hints)
{
    const mf_btree_locator *l = atomic_load_explicit(&t->loc, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        hints[i].entry = l ? (int64_t)locator_guess(l, load_be64(keys[i])) : -1;
        if (l)
            __builtin_prefetch(&l->at[hints[i].entry]);
    }
}

void mf_btree_prefetch_leaves(mf_btree *t, const uint8_t (*keys)[8], int n, int height,
                              mf_btree_hint *hints)
{
    /* The descents first (cached branch pages), the requests after, back to
     * back: a request for a page missing from the TLB holds the core while
     * its page walk runs, and walks issued together overlap. */
    const mf_btree_locator *l = atomic_load_explicit(&t->loc, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        hints[i].slot = -1;
        if (l)
            locate_leaf(l, keys[i], &hints[i]);
        else
            hint_leaf(t, keys[i], height, &hints[i]);
    }
    if (!l && n > 0)
        atomic_fetch_add_explicit(&t->descents, (uint64_t)n, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        uint8_t *p = hints[i].leaf ? mf_pager_hint(t->pg, hints[i].leaf) : NULL;
        if (p)
            prefetch_lines(p, 2); /* the header and the first 40 slots */
    }
}

/* The slot of a leaf of `cnt` entries where the hint's separators place
 * 8-byte key `k`, by interpolation; -1 when they do not bound it.  A leaf
 * whose separators are `cnt` apart holds every key between them (records
 * inserted in order, none deleted): the slot is the key's offset. */
static inline int hint_guess(const mf_btree_hint *h, uint64_t k, int cnt)
{
    if (!h->bounded || k < h->lower || k >= h->upper)
        return -1;
    uint64_t span = h->upper - h->lower;
    if (span == (uint64_t)cnt)
        return (int)(k - h->lower);
    return (int)scaled(k - h->lower, span, (size_t)cnt);
}

void mf_btree_prefetch_cells(mf_btree *t, const uint8_t (*keys)[8], int n,
                             mf_btree_hint *hints)
{
    /* The headers have arrived (mf_btree_prefetch_leaves asked for them
     * earlier); ask for the cell the separators place the key at, which
     * mf_btree_get_hinted reads first.  Without separators, for the cells
     * search() reads first: the first and the last. */
    for (int i = 0; i < n; i++) {
        mf_btree_hint *h = &hints[i];
        uint8_t *p = h->leaf ? mf_pager_hint(t->pg, h->leaf) : NULL;
        int cnt;
        if (!p || (cnt = pcount(p)) < 1 || cnt > MAX_SLOTS ||
            mf_page_type(p) != MF_PAGE_LEAF)
            continue;
        const uint8_t *c;
        int guess = h->slot = hint_guess(h, load_be64(keys[i]), cnt);
        if (guess >= 0) {
            if ((c = cell_in_page(p, guess)))
                prefetch_lines(c, CELL_LINES);
            continue;
        }
        if ((c = cell_in_page(p, 0)))
            prefetch_lines(c, 1);
        if ((c = cell_in_page(p, cnt - 1)))
            prefetch_lines(c, 1);
    }
}

void mf_btree_prefetch_values(mf_btree *t, const mf_btree_hint *hints, int n)
{
    /* The cells have arrived (mf_btree_prefetch_cells asked for CELL_LINES
     * lines from each a batch earlier): ask for the lines after those, to
     * the last byte of an inline value, which the lookup's caller reads
     * first (bson_init_static). */
    for (int i = 0; i < n; i++) {
        const mf_btree_hint *h = &hints[i];
        uint8_t *p = h->leaf && h->slot >= 0 && h->slot < MAX_SLOTS ? mf_pager_hint(t->pg, h->leaf)
                                                                     : NULL;
        const uint8_t *c = p ? cell_in_page(p, h->slot) : NULL;
        if (!c || (c[0] & (KEY_OVF | VAL_OVF)))
            continue;
        size_t at = (size_t)(c - p), end = at + cell_size(c, true);
        if (end > MF_PAGE_SIZE)
            end = MF_PAGE_SIZE; /* damage: the lookup reports it */
        for (at = (at & ~(size_t)63) + CELL_LINES * 64; at < end; at += 64)
            __builtin_prefetch(p + at);
    }
}

bool mf_btree_value_past_cells(const uint8_t *v, size_t vl)
{
    /* The cell starts LEAF_CELL_HDR and the key before the value; a value
     * in overflow pages (not in the cell) gives an answer of no use, and
     * costs at most a values stage that asks for nothing. */
    uintptr_t cell = (uintptr_t)v - LEAF_CELL_HDR - 8;
    return (uintptr_t)v + vl > (cell & ~(uintptr_t)63) + CELL_LINES * 64;
}

/* The slot of 8-byte `key` in leaf `p` of `cnt` entries, if the hint's
 * separators place it (the cell mf_btree_prefetch_cells asked for) or
 * one slot either side; -1 if not there, for search() to decide. */
static int hinted_slot(uint8_t *p, int cnt, const mf_btree_hint *h, const uint8_t *key)
{
    uint64_t k = load_be64(key);
    int i = h->slot >= 0 ? h->slot : hint_guess(h, k, cnt);
    for (int tries = 0; tries < 2 && i >= 0 && i < cnt; tries++) {
        const uint8_t *c = cell_in_page(p, i);
        if (!c || (c[0] & KEY_OVF) || c_klen(c) != 8)
            return -1;
        uint64_t ck = load_be64(c + LEAF_CELL_HDR);
        if (ck == k)
            return i;
        i += ck < k ? 1 : -1; /* then the neighbour towards the key */
    }
    return -1;
}

int mf_btree_get_hinted(mf_btree *t, const mf_btree_hint *h, const uint8_t *key, size_t klen,
                        bool *found, const uint8_t **val, size_t *vlen, mf_error *err)
{
    mf_error ignored;
    uint8_t *p = h && h->leaf ? get_page(t, h->leaf, &ignored) : NULL;
    int cnt;
    if (p && is_leaf(p) && (cnt = pcount(p)) > 0) {
        int idx = klen == 8 ? hinted_slot(p, cnt, h, key) : -1;
        bool exact = idx >= 0;
        if (!exact)
            idx = search(t, p, key, klen, &exact, &ignored);
        if (idx >= 0 && exact) {
            const uint8_t *v = cell_value(t, cell(p, idx), vlen, err);
            if (!v)
                return err->code;
            *val = v;
            *found = true;
            return 0;
        }
    }
    /* Not there (gone, or the hint is no good): the whole descent decides. */
    return mf_btree_get(t, key, klen, found, val, vlen, err);
}

/* ---------------------------------------------------------------- delete */

/* Returns the subtree's new page, or 0 if it became empty. */
static int del_rec(mf_btree *t, mf_pgno no, int depth, const uint8_t *key, size_t klen,
                   mf_pgno *out, mf_error *err)
{
    bool exact;
    uint8_t *p;
    int idx;
    int rc = visit(t, no, depth, key, klen, &p, &idx, &exact, err);
    if (rc != 0)
        return rc;
    if ((rc = make_writable(t, &no, &p, err)) != 0)
        return rc;

    if (is_leaf(p)) {
        /* The caller looked the key up first: it is here. */
        free_cell_runs(t, cell(p, idx), true);
        remove_slot(p, idx);
        if (pcount(p) == 0) {
            mf_pager_free(t->pg, no);
            no = 0;
        }
        *out = no;
        return 0;
    }

    mf_pgno child;
    if ((rc = del_rec(t, child_at(p, idx), depth + 1, key, klen, &child, err)) != 0)
        return rc;
    if (child != 0) {
        set_child_at(p, idx, child);
        *out = no;
        return 0;
    }
    /* The child emptied: unlink it. */
    if (idx < 0) {
        if (pcount(p) == 0) {
            mf_pager_free(t->pg, no);
            *out = 0;
            return 0;
        }
        set_pleft(p, c_child(cell(p, 0)));
        free_cell_runs(t, cell(p, 0), false);
        remove_slot(p, 0);
    } else {
        free_cell_runs(t, cell(p, idx), false);
        remove_slot(p, idx);
    }
    if (pcount(p) == 0) {
        /* One child left: it takes this branch's place. */
        mf_pgno only = pleft(p);
        mf_pager_free(t->pg, no);
        *out = only;
        return 0;
    }
    *out = no;
    return 0;
}

int mf_btree_delete(mf_btree *t, const uint8_t *key, size_t klen, bool *found, mf_error *err)
{
    const uint8_t *v;
    size_t vlen;
    int rc = mf_btree_get(t, key, klen, found, &v, &vlen, err);
    if (rc != 0 || !*found)
        return rc;
    modified(t);
    mf_pgno root;
    if ((rc = del_rec(t, t->root, 0, key, klen, &root, err)) != 0)
        return rc;
    t->root = root;
    return 0;
}

/* ------------------------------------------------------------ drop, check */

static int drop_rec(mf_btree *t, mf_pgno no, int depth, mf_error *err)
{
    if (depth >= MF_BTREE_MAX_DEPTH)
        return corrupt(t, no, "the tree is too deep", err);
    uint8_t *p = get_page(t, no, err);
    if (!p)
        return err->code;
    bool leaf = is_leaf(p);
    int n = pcount(p), rc;
    if (!leaf && (rc = drop_rec(t, pleft(p), depth + 1, err)) != 0)
        return rc;
    for (int i = 0; i < n; i++) {
        uint8_t *c = cell(p, i);
        if (!leaf && (rc = drop_rec(t, c_child(c), depth + 1, err)) != 0)
            return rc;
        free_cell_runs(t, c, leaf);
    }
    mf_pager_free(t->pg, no);
    return 0;
}

int mf_btree_drop(mf_btree *t, mf_error *err)
{
    modified(t);
    int rc = t->root ? drop_rec(t, t->root, 0, err) : 0;
    if (rc == 0)
        t->root = 0;
    return rc;
}

typedef struct bound {
    const uint8_t *k;
    size_t len;
} bound;

static int validate_rec(mf_btree *t, mf_pgno no, int depth, int *leaf_depth, bound lo,
                        bound hi, uint64_t *entries, mf_error *err)
{
    if (depth >= MF_BTREE_MAX_DEPTH)
        return corrupt(t, no, "the tree is too deep", err);
    uint8_t *p = get_page(t, no, err);
    if (!p)
        return err->code;
    bool leaf = is_leaf(p);
    int n = pcount(p);
    if (BT_HDR + 2u * (uint32_t)n > cells_from(p))
        return corrupt(t, no, "slots overlap cells", err);
    if (leaf && n == 0)
        return corrupt(t, no, "an empty leaf", err);
    /* Leaves may sit at different depths: a branch left with one child is
     * replaced by it, and nothing rebalances. */
    (void)leaf_depth;
    bound prev = lo;
    for (int i = 0; i < n; i++) {
        uint32_t off = slot(p, i);
        if (off < cells_from(p) || off >= MF_PAGE_SIZE ||
            off + cell_size(p + off, leaf) > MF_PAGE_SIZE)
            return corrupt(t, no, "a cell outside the page", err);
        size_t kl;
        const uint8_t *k = cell_key(t, cell(p, i), leaf, &kl, err);
        if (!k)
            return err->code;
        /* Order: strictly after the previous key in the page; within the
         * parent's bounds [lo, hi). */
        if (i > 0 && keycmp(prev.k, prev.len, k, kl) >= 0)
            return corrupt(t, no, "keys out of order", err);
        if (i == 0 && lo.k && keycmp(lo.k, lo.len, k, kl) > 0)
            return corrupt(t, no, "a key below its separator", err);
        if (hi.k && keycmp(k, kl, hi.k, hi.len) >= 0)
            return corrupt(t, no, "a key at or above the next separator", err);
        if (leaf) {
            size_t vl;
            if (!cell_value(t, cell(p, i), &vl, err))
                return err->code;
            (*entries)++;
        }
        prev = (bound){k, kl};
    }
    if (leaf)
        return 0;
    int rc;
    bound first_hi = n > 0 ? (bound){NULL, 0} : hi;
    if (n > 0) {
        size_t kl;
        const uint8_t *k = cell_key(t, cell(p, 0), false, &kl, err);
        first_hi = (bound){k, kl};
    }
    if ((rc = validate_rec(t, pleft(p), depth + 1, leaf_depth, lo, first_hi, entries, err)) != 0)
        return rc;
    for (int i = 0; i < n; i++) {
        size_t kl, kl2;
        const uint8_t *k = cell_key(t, cell(p, i), false, &kl, err);
        bound next_hi = hi;
        if (i + 1 < n) {
            const uint8_t *k2 = cell_key(t, cell(p, i + 1), false, &kl2, err);
            next_hi = (bound){k2, kl2};
        }
        if ((rc = validate_rec(t, c_child(cell(p, i)), depth + 1, leaf_depth, (bound){k, kl},
                               next_hi, entries, err)) != 0)
            return rc;
    }
    return 0;
}

int mf_btree_validate(mf_btree *t, uint64_t *entries, mf_error *err)
{
    int leaf_depth = -1;
    *entries = 0;
    if (t->root == 0)
        return 0;
    return validate_rec(t, t->root, 0, &leaf_depth, (bound){NULL, 0}, (bound){NULL, 0},
                        entries, err);
}

/* ---------------------------------------------------------------- measure */

static int measure_rec(mf_btree *t, mf_pgno no, int depth, mf_btree_usage *u, mf_error *err)
{
    if (depth >= MF_BTREE_MAX_DEPTH)
        return corrupt(t, no, "the tree is too deep", err);
    uint8_t *p = get_page(t, no, err);
    if (!p)
        return err->code;
    bool leaf = is_leaf(p);
    int n = pcount(p), rc;
    if (BT_HDR + 2u * (uint32_t)n > cells_from(p))
        return corrupt(t, no, "slots overlap cells", err);
    if (leaf)
        u->leaf_pages++;
    else
        u->branch_pages++;
    if (!leaf && (rc = measure_rec(t, pleft(p), depth + 1, u, err)) != 0)
        return rc;
    for (int i = 0; i < n; i++) {
        uint8_t *c = cell(p, i);
        if (c[0] & KEY_OVF) {
            u->overflow_runs++;
            u->overflow_pages += run_pages(c_klen(c));
        }
        if (!leaf) {
            if ((rc = measure_rec(t, c_child(c), depth + 1, u, err)) != 0)
                return rc;
            continue;
        }
        u->entries++;
        u->key_bytes += c_klen(c);
        u->value_bytes += c_vlen(c);
        if (c[0] & VAL_OVF) {
            u->overflow_runs++;
            u->overflow_pages += run_pages(c_vlen(c));
        }
    }
    return 0;
}

int mf_btree_measure(mf_btree *t, mf_btree_usage *out, mf_error *err)
{
    memset(out, 0, sizeof *out);
    return t->root ? measure_rec(t, t->root, 0, out, err) : 0;
}

/* ---------------------------------------------------------------- cursor */

void mf_cursor_init(mf_cursor *c, mf_btree *t)
{
    c->t = t;
    c->depth = 0;
}

static uint8_t *cursor_cell(mf_cursor *c);

/* The cursor has reached a leaf entry: verify its overflow runs now, so
 * that mf_cursor_key and mf_cursor_value (which return no error) only ever
 * hand out verified bytes.  A damaged run fails the move, `*valid` false. */
static int landed(mf_cursor *c, bool *valid, mf_error *err)
{
    const uint8_t *cl = cursor_cell(c);
    size_t len;
    if ((cl[0] & KEY_OVF) && !cell_key(c->t, cl, true, &len, err))
        return err->code;
    if ((cl[0] & VAL_OVF) && !cell_value(c->t, cl, &len, err))
        return err->code;
    *valid = true;
    return 0;
}

/* Push page `no` and descend to its first (or last) entry. */
static int descend_edge(mf_cursor *c, mf_pgno no, bool last, bool *valid, mf_error *err)
{
    for (;;) {
        if (c->depth >= MF_BTREE_MAX_DEPTH)
            return corrupt(c->t, no, "the tree is too deep", err);
        uint8_t *p = get_page(c->t, no, err);
        if (!p)
            return err->code;
        int n = pcount(p);
        if (is_leaf(p)) {
            if (n == 0)
                return corrupt(c->t, no, "an empty leaf", err);
            c->path[c->depth].no = no;
            c->path[c->depth].idx = last ? n - 1 : 0;
            c->depth++;
            return landed(c, valid, err);
        }
        int idx = last ? n - 1 : -1;
        c->path[c->depth].no = no;
        c->path[c->depth].idx = idx;
        c->depth++;
        no = child_at(p, idx);
    }
}

int mf_cursor_first(mf_cursor *c, bool *valid, mf_error *err)
{
    c->depth = 0;
    *valid = false;
    return c->t->root ? descend_edge(c, c->t->root, false, valid, err) : 0;
}

int mf_cursor_last(mf_cursor *c, bool *valid, mf_error *err)
{
    c->depth = 0;
    *valid = false;
    return c->t->root ? descend_edge(c, c->t->root, true, valid, err) : 0;
}

int mf_cursor_next(mf_cursor *c, bool *valid, mf_error *err)
{
    *valid = false;
    while (c->depth > 0) {
        int d = c->depth - 1;
        uint8_t *p = get_page(c->t, c->path[d].no, err);
        if (!p)
            return err->code;
        int n = pcount(p);
        if (c->path[d].idx + 1 < n) {
            c->path[d].idx++;
            if (is_leaf(p))
                return landed(c, valid, err);
            return descend_edge(c, child_at(p, c->path[d].idx), false, valid, err);
        }
        c->depth--; /* this page is done: go up */
    }
    return 0;
}

int mf_cursor_prev(mf_cursor *c, bool *valid, mf_error *err)
{
    *valid = false;
    while (c->depth > 0) {
        int d = c->depth - 1;
        uint8_t *p = get_page(c->t, c->path[d].no, err);
        if (!p)
            return err->code;
        int lowest = is_leaf(p) ? 0 : -1;
        if (c->path[d].idx - 1 >= lowest) {
            c->path[d].idx--;
            if (is_leaf(p))
                return landed(c, valid, err);
            return descend_edge(c, child_at(p, c->path[d].idx), true, valid, err);
        }
        c->depth--;
    }
    return 0;
}

int mf_cursor_seek(mf_cursor *c, const uint8_t *key, size_t klen, bool backward, bool *valid,
                   mf_error *err)
{
    mf_pgno no = c->t->root;
    c->depth = 0;
    *valid = false;
    while (no != 0) {
        bool exact;
        uint8_t *p;
        int idx;
        int rc = visit(c->t, no, c->depth, key, klen, &p, &idx, &exact, err);
        if (rc != 0)
            return rc;
        c->path[c->depth].no = no;
        if (!is_leaf(p)) {
            c->path[c->depth].idx = idx;
            c->depth++;
            no = child_at(p, idx);
            continue;
        }
        int n = pcount(p);
        c->depth++;
        if (!backward) {
            if (idx < n) {
                c->path[c->depth - 1].idx = idx;
                return landed(c, valid, err);
            }
            c->path[c->depth - 1].idx = n - 1; /* past the end: step on */
            return mf_cursor_next(c, valid, err);
        }
        /* Backward: the last key <= key. */
        if (exact) {
            c->path[c->depth - 1].idx = idx;
            return landed(c, valid, err);
        }
        c->path[c->depth - 1].idx = idx; /* idx is the first key > key */
        return mf_cursor_prev(c, valid, err);
    }
    return 0;
}

static uint8_t *cursor_cell(mf_cursor *c)
{
    int d = c->depth - 1;
    /* The page was verified when the cursor reached it. */
    uint8_t *p = mf_pager_page(c->t->pg, c->path[d].no, NULL);
    return cell(p, c->path[d].idx);
}

void mf_cursor_key(mf_cursor *c, const uint8_t **key, size_t *klen)
{
    mf_error err;
    *key = cell_key(c->t, cursor_cell(c), true, klen, &err);
}

void mf_cursor_value(mf_cursor *c, const uint8_t **val, size_t *vlen)
{
    mf_error err;
    *val = cell_value(c->t, cursor_cell(c), vlen, &err);
}

bool mf_cursor_step_in_leaf(mf_cursor *c, bool backward, const uint8_t **key, size_t *klen,
                            const uint8_t **val, size_t *vlen)
{
    if (c->depth == 0)
        return false;
    int d = c->depth - 1, i = c->path[d].idx + (backward ? -1 : 1);
    /* The cursor's page was verified when the cursor reached it. */
    uint8_t *p = mf_pager_hint(c->t->pg, c->path[d].no);
    if (!p || !is_leaf(p) || i < 0 || i >= pcount(p))
        return false;
    const uint8_t *cl = cell(p, i);
    if (cl[0] & (KEY_OVF | VAL_OVF))
        return false;
    mf_error none; /* no run to read, so nothing can fail */
    c->path[d].idx = i;
    *key = cell_key(c->t, cl, true, klen, &none);
    *val = cell_value(c->t, cl, vlen, &none);
    return true;
}

/* How leaf `p`'s key in slot `i` compares with `key`, into `*r`; false when
 * that key is not in the page. */
static bool leaf_key_cmp(mf_btree *t, uint8_t *p, int i, const uint8_t *key, size_t klen, int *r)
{
    mf_error none; /* a key in the page: nothing to read, nothing fails */
    const uint8_t *cl = cell(p, i), *ck;
    size_t cn;
    if ((cl[0] & KEY_OVF) || !(ck = cell_key(t, cl, true, &cn, &none)))
        return false;
    *r = keycmp(ck, cn, key, klen);
    return true;
}

bool mf_cursor_seek_in_leaf(mf_cursor *c, bool backward, const uint8_t *key, size_t klen,
                            const uint8_t **k, size_t *kl, const uint8_t **val, size_t *vlen)
{
    if (c->depth == 0)
        return false;
    int d = c->depth - 1, cnt, r;
    /* The cursor's page was verified when the cursor reached it. */
    uint8_t *p = mf_pager_hint(c->t->pg, c->path[d].no);
    if (!p || !is_leaf(p) || (cnt = pcount(p)) == 0)
        return false;
    /* The entry next to the cursor's in the scan's direction, often the
     * one (as when the fields before change), then the leaf's last. */
    int near = c->path[d].idx + (backward ? -1 : 1), far = backward ? 0 : cnt - 1, at;
    if (near < 0 || near >= cnt || !leaf_key_cmp(c->t, p, near, key, klen, &r))
        return false;
    if (backward ? r <= 0 : r >= 0) {
        at = near;
    } else {
        if (!leaf_key_cmp(c->t, p, far, key, klen, &r) || (backward ? r > 0 : r < 0))
            return false; /* beyond this leaf */
        /* forward: the first key >= key in (near, far]; backward: the
         * last key <= key in [far, near) */
        int lo = backward ? far : near + 1, hi = backward ? near - 1 : far;
        while (lo < hi) {
            int mid = backward ? lo + (hi - lo + 1) / 2 : lo + (hi - lo) / 2;
            if (!leaf_key_cmp(c->t, p, mid, key, klen, &r))
                return false;
            if (backward ? r <= 0 : r < 0)
                lo = backward ? mid : mid + 1;
            else
                hi = backward ? mid - 1 : mid;
        }
        at = lo;
    }
    const uint8_t *cl = cell(p, at);
    if (cl[0] & (KEY_OVF | VAL_OVF))
        return false;
    mf_error none;
    c->path[d].idx = at;
    *k = cell_key(c->t, cl, true, kl, &none);
    *val = cell_value(c->t, cl, vlen, &none);
    return true;
}

void mf_cursor_prefetch_next_leaf(const mf_cursor *c, bool backward)
{
    if (c->depth < 2)
        return;
    /* The parent was verified when the cursor descended through it. */
    int d = c->depth - 2, i = c->path[d].idx + (backward ? -1 : 1);
    uint8_t *parent = mf_pager_hint(c->t->pg, c->path[d].no);
    if (!parent || is_leaf(parent) || i < -1 || i >= pcount(parent))
        return;
    const uint8_t *cl = i < 0 ? NULL : cell_in_page(parent, i);
    if (i >= 0 && !cl)
        return;
    uint8_t *p = mf_pager_hint(c->t->pg, i < 0 ? pleft(parent) : c_child(cl));
    if (p)
        prefetch_lines(p, MF_PAGE_SIZE / 64);
}

/* ------------------------------------------------------------ bulk build */

struct mf_bulk {
    mf_btree *t;
    int levels;                         /* levels[0] is the current leaf */
    mf_pgno page[MF_BTREE_MAX_DEPTH];   /* the page being filled per level */
    mf_pgno *all;                       /* every page allocated, for abort */
    size_t nall, capall;
};

static int bulk_track(mf_bulk *b, mf_pgno no, mf_error *err)
{
    if (b->nall == b->capall) {
        size_t cap = b->capall ? b->capall * 2 : 64;
        mf_pgno *v = realloc(b->all, cap * sizeof *v);
        if (!v)
            return mf_error_oom(err);
        b->all = v;
        b->capall = cap;
    }
    b->all[b->nall++] = no;
    return 0;
}

static int bulk_new_page(mf_bulk *b, uint8_t type, mf_pgno *no, mf_error *err)
{
    int rc = mf_pager_alloc(b->t->pg, 1, type, no, err);
    if (rc == 0)
        rc = bulk_track(b, *no, err);
    if (rc == 0)
        page_init(mf_pager_page(b->t->pg, *no, err));
    return rc;
}

int mf_btree_bulk_begin(mf_btree *t, mf_bulk **out, mf_error *err)
{
    if (t->root != 0)
        return mf_error_set(err, MF_IllegalOperation, "bulk build needs an empty tree");
    mf_bulk *b = calloc(1, sizeof *b);
    if (!b)
        return mf_error_oom(err);
    b->t = t;
    *out = b;
    return 0;
}

/* Link `child` into level `lv` (which exists) under separator cell `sep`. */
static int bulk_link(mf_bulk *b, int lv, const uint8_t *sep, size_t sep_len, mf_pgno child,
                     mf_error *err)
{
    int rc;
    if (lv >= MF_BTREE_MAX_DEPTH)
        return mf_error_set(err, MF_InternalError, "bulk build: too many levels");
    uint8_t *p = mf_pager_page(b->t->pg, b->page[lv], err);
    uint8_t cellbuf[BRANCH_CELL_HDR + KEY_INLINE_MAX];
    memcpy(cellbuf, sep, sep_len);
    set_c_child(cellbuf, child);
    if (try_insert(p, pcount(p), cellbuf, sep_len))
        return 0;
    /* Full: a new page at this level starts with `child` as its leftmost;
     * the separator moves up. */
    mf_pgno no;
    if ((rc = bulk_new_page(b, MF_PAGE_BRANCH, &no, err)) != 0)
        return rc;
    set_pleft(mf_pager_page(b->t->pg, no, err), child);
    mf_pgno old = b->page[lv];
    b->page[lv] = no;
    if (lv + 1 == b->levels) {
        /* Create the parent over `old` first. */
        mf_pgno parent;
        if ((rc = bulk_new_page(b, MF_PAGE_BRANCH, &parent, err)) != 0)
            return rc;
        set_pleft(mf_pager_page(b->t->pg, parent, err), old);
        b->page[lv + 1] = parent;
        b->levels++;
    }
    return bulk_link(b, lv + 1, sep, sep_len, no, err);
}

int mf_btree_bulk_add(mf_bulk *b, const uint8_t *key, size_t klen, const uint8_t *val,
                      size_t vlen, mf_error *err)
{
    int rc;
    if ((rc = mf_btree_check_sizes(klen, 0, err)) != 0)
        return rc;
    if (b->levels > 0) {
        /* Order against the current leaf's last key. */
        uint8_t *leaf = mf_pager_page(b->t->pg, b->page[0], err);
        size_t lk;
        const uint8_t *k = cell_key(b->t, cell(leaf, pcount(leaf) - 1), true, &lk, err);
        if (!k)
            return err->code;
        if (keycmp(k, lk, key, klen) >= 0)
            return mf_error_set(err, MF_BadValue, "bulk build keys must strictly increase");
    }
    uint8_t c[MAX_CELL];
    size_t len;
    if ((rc = leaf_cell(b->t, key, klen, val, vlen, c, &len, err)) != 0)
        return rc;
    if (b->levels == 0) {
        mf_pgno no;
        if ((rc = bulk_new_page(b, MF_PAGE_LEAF, &no, err)) != 0)
            return rc;
        b->page[0] = no;
        b->levels = 1;
    }
    uint8_t *leaf = mf_pager_page(b->t->pg, b->page[0], err);
    if (try_insert(leaf, pcount(leaf), c, len))
        return 0;
    /* The leaf is full: start the next, linked under this key. */
    mf_pgno no;
    if ((rc = bulk_new_page(b, MF_PAGE_LEAF, &no, err)) != 0)
        return rc;
    try_insert(mf_pager_page(b->t->pg, no, err), 0, c, len);
    uint8_t sep[BRANCH_CELL_HDR + KEY_INLINE_MAX];
    size_t sep_len;
    if ((rc = branch_cell(b->t, key, klen, no, sep, &sep_len, err)) != 0)
        return rc;
    mf_pgno prev_leaf = b->page[0];
    b->page[0] = no;
    if (b->levels == 1) {
        mf_pgno parent;
        if ((rc = bulk_new_page(b, MF_PAGE_BRANCH, &parent, err)) != 0)
            return rc;
        set_pleft(mf_pager_page(b->t->pg, parent, err), prev_leaf);
        b->page[1] = parent;
        b->levels = 2;
    }
    return bulk_link(b, 1, sep, sep_len, no, err);
}

int mf_btree_bulk_finish(mf_bulk *b, mf_error *err)
{
    (void)err;
    modified(b->t);
    b->t->root = b->levels ? b->page[b->levels - 1] : 0;
    free(b->all);
    free(b);
    return 0;
}

void mf_btree_bulk_abort(mf_bulk *b)
{
    /* Overflow runs of the cells are freed with their pages' cells. */
    for (size_t i = 0; i < b->nall; i++) {
        uint8_t *p = mf_pager_page(b->t->pg, b->all[i], NULL);
        bool leaf = is_leaf(p);
        for (int k = 0; k < pcount(p); k++)
            free_cell_runs(b->t, cell(p, k), leaf);
        mf_pager_free(b->t->pg, b->all[i]);
    }
    free(b->all);
    free(b);
}
