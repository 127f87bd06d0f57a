/* Cases for csrc/storage/pager.c and btree.c: the B+tree against a
 * reference model, across checkpoints (so copy-on-write is exercised),
 * bulk builds, reopen, checksums, meta-page choice. */
#include "test.h"
#include "../storage/btree.h"
#include "../storage/os.h"

#include <stdlib.h>
#include <unistd.h>

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* A value is described by (seed, len) and regenerated for comparison. */
static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
}

typedef struct entry {
    uint8_t *key;
    size_t klen;
    uint64_t vseed;
    size_t vlen;
} entry;

typedef struct model {
    entry *v;
    size_t n, cap;
} model;

static int kcmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = memcmp(a, b, n);
    return c ? c : (al < bl ? -1 : al > bl);
}

/* First index with key >= k. */
static size_t model_lower(model *m, const uint8_t *k, size_t kl)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (kcmp(m->v[mid].key, m->v[mid].klen, k, kl) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void model_put(model *m, const uint8_t *k, size_t kl, uint64_t vs, size_t vl)
{
    size_t i = model_lower(m, k, kl);
    if (i < m->n && kcmp(m->v[i].key, m->v[i].klen, k, kl) == 0) {
        m->v[i].vseed = vs;
        m->v[i].vlen = vl;
        return;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 1024;
        m->v = realloc(m->v, m->cap * sizeof *m->v);
    }
    memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof *m->v);
    m->v[i].key = malloc(kl);
    memcpy(m->v[i].key, k, kl);
    m->v[i].klen = kl;
    m->v[i].vseed = vs;
    m->v[i].vlen = vl;
    m->n++;
}

static bool model_del(model *m, const uint8_t *k, size_t kl)
{
    size_t i = model_lower(m, k, kl);
    if (i < m->n && kcmp(m->v[i].key, m->v[i].klen, k, kl) == 0) {
        free(m->v[i].key);
        memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof *m->v);
        m->n--;
        return true;
    }
    return false;
}

static void model_free(model *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i].key);
    free(m->v);
}

/* A random key: mostly short, some long (to 3 KiB), from a small alphabet
 * and shared prefixes so that keys collide and order is exercised. */
static size_t rand_key(uint8_t *k)
{
    uint64_t r = rnd();
    size_t len;
    switch (r % 16) {
    case 0: len = 1 + rnd() % 3072; break;  /* long: overflow keys */
    case 1: case 2: len = 100 + rnd() % 900; break;
    default: len = 1 + rnd() % 24; break;
    }
    size_t prefix = (rnd() % 4 == 0) ? len / 2 : 0;
    memset(k, 'p', prefix);
    for (size_t i = prefix; i < len; i++)
        k[i] = (uint8_t)('a' + rnd() % 6);
    return len;
}

static size_t rand_vlen(void)
{
    uint64_t r = rnd() % 1000;
    if (r == 0)
        return (size_t)(rnd() % (1024 * 1024)); /* up to 1 MiB */
    if (r < 50)
        return 900 + (size_t)(rnd() % 8000);    /* overflow values */
    return (size_t)(rnd() % 200);
}

static bool same_value(const uint8_t *v, size_t vl, const entry *e, uint8_t *scratch)
{
    if (vl != e->vlen)
        return false;
    fill(scratch, vl, e->vseed);
    return memcmp(v, scratch, vl) == 0;
}

/* Open a pager over `dir`/data.mf; the tree root lives in user[0..8]. */
static mf_pager *open_pager(const char *dir, mf_btree *t, mf_error *err)
{
    char path[512];
    uint8_t user[MF_META_USER_SIZE];
    uint64_t gen;
    mf_pager *pg = NULL;
    mf_pager_options opt = {.reserve_bytes = (size_t)8 << 30};
    snprintf(path, sizeof path, "%s/data.mf", dir);
    if (mf_pager_open(path, &opt, &pg, user, &gen, err) != 0)
        return NULL;
    t->pg = pg;
    memcpy(&t->root, user, 8);
    return pg;
}

static int checkpoint(mf_btree *t, mf_error *err)
{
    uint8_t user[MF_META_USER_SIZE] = {0};
    mf_checkpoint *cp;
    memcpy(user, &t->root, 8);
    int rc = mf_pager_checkpoint_freeze(t->pg, user, &cp, err);
    return rc ? rc : mf_pager_checkpoint_write(t->pg, cp, err);
}

/* mf_cursor_step_in_leaf: when it steps, the entry it gives must be the
 * one mf_cursor_key and mf_cursor_value give for the new position (and so,
 * for the scans below, the model's next). */
static bool step_in_leaf(mf_cursor *c, bool backward, bool *stepped, size_t *steps)
{
    const uint8_t *k, *v, *k2, *v2;
    size_t kl, vl, kl2, vl2;
    /* Run under ASan from every position of both scans, the tree's edges
     * and one-leaf trees included (it reads the parent page). */
    mf_cursor_prefetch_next_leaf(c, backward);
    *stepped = mf_cursor_step_in_leaf(c, backward, &k, &kl, &v, &vl);
    if (!*stepped)
        return true;
    (*steps)++;
    mf_cursor_key(c, &k2, &kl2);
    mf_cursor_value(c, &v2, &vl2);
    return k == k2 && kl == kl2 && v == v2 && vl == vl2;
}

/* mf_cursor_seek_in_leaf from the cursor on the model's entry `i`, to the
 * key of an entry up to 8 further on in the direction or just past it:
 * when it moves, it must land on the model's first key >= the target (the
 * last <= it, `backward`), and give that entry as mf_cursor_key and
 * mf_cursor_value do.  A copy of the cursor moves, not the scan's. */
static bool seek_in_leaf_matches(const mf_cursor *c, model *m, size_t i, bool backward,
                                 size_t *landed)
{
    uint8_t target[4096 + 2];
    size_t ahead = 1 + rnd() % 8;
    if (backward ? i < ahead : i + ahead >= m->n)
        return true;
    size_t j = backward ? i - ahead : i + ahead;
    if (m->v[j].klen + 2 > sizeof target)
        return true;
    size_t tl = m->v[j].klen;
    memcpy(target, m->v[j].key, tl);
    if (rnd() % 2)
        target[tl++] = 0; /* just past entry j */
    mf_cursor c2 = *c;
    const uint8_t *k, *v, *k2, *v2;
    size_t kl, vl, kl2, vl2;
    if (!mf_cursor_seek_in_leaf(&c2, backward, target, tl, &k, &kl, &v, &vl))
        return true;
    (*landed)++;
    size_t want = model_lower(m, target, tl);
    if (backward) { /* before the first key > target: the first >= target + NUL */
        target[tl] = 0;
        want = model_lower(m, target, tl + 1) - 1;
    }
    mf_cursor_key(&c2, &k2, &kl2);
    mf_cursor_value(&c2, &v2, &vl2);
    return want < m->n && kcmp(k, kl, m->v[want].key, m->v[want].klen) == 0 && k == k2 &&
           kl == kl2 && v == v2 && vl == vl2;
}

/* Compare a full scan, forward and backward, against the model: stepping
 * in the leaf where mf_cursor_step_in_leaf can, mf_cursor_next/prev
 * where it cannot. */
static bool scans_match(mf_btree *t, model *m, uint8_t *scratch)
{
    mf_cursor c;
    mf_error err;
    bool valid, stepped;
    size_t forward_steps = 0, backward_steps = 0, landed = 0, landed_back = 0;
    mf_cursor_init(&c, t);
    size_t i = 0;
    if (mf_cursor_first(&c, &valid, &err) != 0)
        return false;
    while (valid) {
        const uint8_t *k, *v;
        size_t kl, vl;
        mf_cursor_key(&c, &k, &kl);
        mf_cursor_value(&c, &v, &vl);
        if (i >= m->n || kcmp(k, kl, m->v[i].key, m->v[i].klen) != 0 ||
            !same_value(v, vl, &m->v[i], scratch))
            return false;
        if (!seek_in_leaf_matches(&c, m, i, false, &landed))
            return false;
        i++;
        if (!step_in_leaf(&c, false, &stepped, &forward_steps))
            return false;
        if (!stepped && mf_cursor_next(&c, &valid, &err) != 0)
            return false;
    }
    if (i != m->n)
        return false;
    if (mf_cursor_last(&c, &valid, &err) != 0)
        return false;
    while (valid) {
        const uint8_t *k;
        size_t kl;
        mf_cursor_key(&c, &k, &kl);
        if (i == 0 || kcmp(k, kl, m->v[i - 1].key, m->v[i - 1].klen) != 0)
            return false;
        if (!seek_in_leaf_matches(&c, m, i - 1, true, &landed_back))
            return false;
        i--;
        if (!step_in_leaf(&c, true, &stepped, &backward_steps))
            return false;
        if (!stepped && mf_cursor_prev(&c, &valid, &err) != 0)
            return false;
    }
    /* Most steps stay in a leaf; overflow cells and leaf ends do not. */
    return i == 0 && (m->n < 100 || (forward_steps > m->n / 2 && forward_steps < m->n &&
                                     backward_steps > m->n / 2 && backward_steps < m->n &&
                                     landed > m->n / 8 && landed < m->n &&
                                     landed_back > m->n / 8 && landed_back < m->n));
}

MFT_CASE(reference_model, "/storage/btree/reference_model")
{
    mf_error err;
    mf_btree t = {0};
    model m = {0};
    uint8_t *key = malloc(4096), *val = malloc(1024 * 1024), *scratch = malloc(1024 * 1024);
    mf_pager *pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg);
    rng_state = 0x1234567;
    const int ops = 120000;
    for (int op = 0; op < ops; op++) {
        uint64_t r = rnd() % 100;
        size_t kl;
        /* Reuse an existing key half the time once there are some. */
        if (m.n > 0 && rnd() % 2) {
            entry *e = &m.v[rnd() % m.n];
            kl = e->klen;
            memcpy(key, e->key, kl);
        } else {
            kl = rand_key(key);
        }
        if (r < 55) {
            size_t vl = rand_vlen();
            uint64_t vs = rnd();
            fill(val, vl, vs);
            bool existed;
            CHECK_INT(mf_btree_put(&t, key, kl, val, vl, false, &existed, &err), 0);
            size_t i = model_lower(&m, key, kl);
            bool was = i < m.n && kcmp(m.v[i].key, m.v[i].klen, key, kl) == 0;
            CHECK(existed == was);
            model_put(&m, key, kl, vs, vl);
        } else if (r < 80) {
            bool found;
            CHECK_INT(mf_btree_delete(&t, key, kl, &found, &err), 0);
            CHECK(found == model_del(&m, key, kl));
        } else if (r < 92) {
            bool found;
            const uint8_t *v;
            size_t vl;
            CHECK_INT(mf_btree_get(&t, key, kl, &found, &v, &vl, &err), 0);
            size_t i = model_lower(&m, key, kl);
            bool want = i < m.n && kcmp(m.v[i].key, m.v[i].klen, key, kl) == 0;
            CHECK(found == want);
            if (found)
                CHECK(same_value(v, vl, &m.v[i], scratch));
        } else {
            /* Seek both ways and walk a few steps. */
            mf_cursor c;
            bool valid, backward = rnd() % 2;
            mf_cursor_init(&c, &t);
            CHECK_INT(mf_cursor_seek(&c, key, kl, backward, &valid, &err), 0);
            size_t i = model_lower(&m, key, kl);
            long want;
            if (!backward)
                want = (long)i;
            else if (i < m.n && kcmp(m.v[i].key, m.v[i].klen, key, kl) == 0)
                want = (long)i;
            else
                want = (long)i - 1;
            for (int step = 0; step < 5; step++) {
                bool in = want >= 0 && want < (long)m.n;
                CHECK(valid == in);
                if (!in)
                    break;
                const uint8_t *k;
                size_t ckl;
                mf_cursor_key(&c, &k, &ckl);
                CHECK(kcmp(k, ckl, m.v[want].key, m.v[want].klen) == 0);
                if (backward) {
                    CHECK_INT(mf_cursor_prev(&c, &valid, &err), 0);
                    want--;
                } else {
                    CHECK_INT(mf_cursor_next(&c, &valid, &err), 0);
                    want++;
                }
            }
        }
        if (op % 5000 == 4999) {
            /* A checkpoint freezes every page: the next writes copy. */
            CHECK_INT(checkpoint(&t, &err), 0);
            uint64_t entries;
            CHECK_INT(mf_btree_validate(&t, &entries, &err), 0);
            CHECK_INT(entries, m.n);
        }
        if (op % 20000 == 19999)
            CHECK(scans_match(&t, &m, scratch));
    }
    CHECK(scans_match(&t, &m, scratch));

    /* Close after a checkpoint and reopen: everything comes back, and
     * every page used is checksum-verified. */
    CHECK_INT(checkpoint(&t, &err), 0);
    mf_pager_close(pg);
    pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg);
    uint64_t entries;
    CHECK_INT(mf_btree_validate(&t, &entries, &err), 0);
    CHECK_INT(entries, m.n);
    CHECK(scans_match(&t, &m, scratch));
    mf_pager_stats st;
    mf_pager_get_stats(pg, &st);
    CHECK(st.verified > 0);

    /* Delete everything: the tree empties to root 0. */
    while (m.n > 0) {
        bool found;
        entry e = m.v[m.n - 1];
        CHECK_INT(mf_btree_delete(&t, e.key, e.klen, &found, &err), 0);
        CHECK(found);
        model_del(&m, e.key, e.klen);
    }
    CHECK(t.root == 0);
    mf_pager_close(pg);
    model_free(&m);
    free(key);
    free(val);
    free(scratch);
}

/* Record-id trees (8-byte big-endian keys) are searched by interpolation
 * first: dense runs, holes, one huge gap and short keys mixed in must all
 * still be found exactly, and prefetch hints never change an answer. */
static void put_id(uint8_t k[8], uint64_t id)
{
    for (int i = 7; i >= 0; i--, id >>= 8)
        k[i] = (uint8_t)id;
}

MFT_CASE(record_ids, "/storage/btree/record_ids_interpolated")
{
    mf_error err;
    mf_btree t = {0};
    mf_pager *pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg);
    enum { N = 30000 };
    static bool present[N + 64];
    uint8_t k[8], val[40] = {0};
    rng_state = 0xfeed;
    for (uint64_t i = 0; i < N; i++) { /* ascending, as records arrive */
        uint64_t id = i < N - 10 ? i : i + ((uint64_t)1 << 40); /* a gap at the end */
        put_id(k, id);
        memcpy(val, &id, 8);
        bool existed;
        CHECK_INT(mf_btree_put(&t, k, 8, val, sizeof val, false, &existed, &err), 0);
        present[i] = true;
    }
    for (int d = 0; d < N / 3; d++) { /* holes: a third deleted at random */
        uint64_t i = rnd() % (N - 10);
        put_id(k, i);
        bool found;
        CHECK_INT(mf_btree_delete(&t, k, 8, &found, &err), 0);
        CHECK(found == present[i]);
        present[i] = false;
    }
    /* A few keys of other lengths among them: memcmp order still rules. */
    static const uint8_t odd[][3] = {{0, 0, 1}, {0, 0, 0}, {0xff, 0xff, 0xff}};
    for (size_t i = 0; i < 3; i++) {
        bool existed;
        CHECK_INT(mf_btree_put(&t, odd[i], 3, val, 8, false, &existed, &err), 0);
    }
    int height = mf_btree_height(&t, &err);
    CHECK(height >= 2);
    mf_pgno first_leaf = 0;
    for (uint64_t i = 0; i < N + 20; i++) {
        const uint64_t far = (uint64_t)1 << 40;
        uint64_t id = i < N - 10 ? i : i + far - 5; /* around the tail, both sides */
        bool want = i < N - 10 ? present[i] : id >= far + N - 10 && id < far + N;
        put_id(k, id);
        const uint8_t (*one)[8] = (const uint8_t (*)[8])k;
        mf_btree_hint h = {.entry = -1};
        mf_btree_prefetch_leaves(&t, one, 1, height, &h);
        CHECK(h.leaf != 0);
        mf_btree_prefetch_cells(&t, one, 1, &h);
        mf_btree_prefetch_values(&t, &h, 1);
        /* A lookup from the hinted leaf, and from a wrong one (the first
         * key's), answers as the descent from the root does. */
        for (int w = 0; w < 2; w++) {
            bool hfound;
            const uint8_t *hv;
            size_t hvl;
            mf_btree_hint wrong = h;
            wrong.leaf = first_leaf;
            CHECK_INT(mf_btree_get_hinted(&t, w ? &wrong : &h, k, 8, &hfound, &hv, &hvl,
                                          &err), 0);
            CHECK(hfound == want);
            if (hfound) {
                uint64_t got;
                memcpy(&got, hv, 8);
                CHECK(got == id);
            }
        }
        if (i == 0)
            first_leaf = h.leaf;
        mf_btree_prefetch_leaves(&t, one, 1, height + 3, &h); /* a stale height */
        h.leaf = 3; /* a stale hint: some other page */
        mf_btree_prefetch_cells(&t, one, 1, &h);
        mf_btree_prefetch_values(&t, &h, 1);
        h.slot = (int)(rnd() % 4096); /* any slot, in range or not */
        mf_btree_prefetch_values(&t, &h, 1);
        bool found;
        const uint8_t *v;
        size_t vl;
        CHECK_INT(mf_btree_get(&t, k, 8, &found, &v, &vl, &err), 0);
        CHECK(found == want);
        if (found) {
            uint64_t got;
            memcpy(&got, v, 8);
            CHECK(got == id);
        }
    }
    uint64_t entries;
    CHECK_INT(mf_btree_validate(&t, &entries, &err), 0);
    mf_pager_close(pg);
}

/* The value length of record `id` in hinted_values: 8 to max - 1 bytes. */
static size_t hinted_value_len(uint64_t id, size_t max)
{
    return 8 + (size_t)(id * 37 % (max - 8));
}

/* Values of every length around the page's cache lines and past a cell
 * (overflow runs): the four hint stages ask for them and the lookups
 * answer as the descents do; mf_btree_value_past_cells tells the values
 * the cells stage covers from those it does not.  ASan checks that no stage reads outside a
 * page, with right hints and with any leaf and slot. */
MFT_CASE(hinted_values, "/storage/btree/hinted_values_of_every_length")
{
    mf_error err;
    mf_btree t = {0};
    mf_pager *pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg);
    enum { N = 6000 };
    static uint8_t val[3000];
    uint8_t k[8];
    rng_state = 0xa1e5;
    for (uint64_t i = 0; i < N; i++) {
        size_t vl = hinted_value_len(i, sizeof val);
        put_id(k, i);
        memcpy(val, &i, 8);
        memset(val + 8, (int)(i & 0xff), vl - 8);
        bool existed;
        CHECK_INT(mf_btree_put(&t, k, 8, val, vl, false, &existed, &err), 0);
    }
    int height = mf_btree_height(&t, &err);
    CHECK(height >= 2);
    for (int with_locator = 0; with_locator < 2; with_locator++) {
        if (with_locator)
            CHECK(mf_btree_locator_build(&t, height) == (height >= 3));
        for (uint64_t i = 0; i < N + 10; i += 3) {
            uint8_t keys[3][8];
            mf_btree_hint h[3];
            for (int j = 0; j < 3; j++) {
                put_id(keys[j], i + (uint64_t)j);
                h[j].entry = -1;
            }
            mf_btree_prefetch_locator(&t, (const uint8_t (*)[8])keys, 3, h);
            mf_btree_prefetch_leaves(&t, (const uint8_t (*)[8])keys, 3, height, h);
            mf_btree_prefetch_cells(&t, (const uint8_t (*)[8])keys, 3, h);
            mf_btree_prefetch_values(&t, h, 3);
            for (int j = 0; j < 3; j++) {
                uint64_t id = i + (uint64_t)j;
                bool found;
                const uint8_t *v;
                size_t vl;
                CHECK_INT(mf_btree_get_hinted(&t, &h[j], keys[j], 8, &found, &v, &vl, &err), 0);
                CHECK(found == (id < N));
                if (found) {
                    uint64_t got;
                    memcpy(&got, v, 8);
                    CHECK(got == id && vl == hinted_value_len(id, sizeof val));
                    CHECK(v[vl - 1] == (vl > 8 ? (uint8_t)(id & 0xff) : v[vl - 1]));
                    /* The cells stage's three lines hold a short cell
                     * wherever it starts in its line; a cell longer than
                     * them does not fit, however aligned (both inline). */
                    if (vl <= 3 * 64 - 63 - 16)
                        CHECK(!mf_btree_value_past_cells(v, vl));
                    else if (vl > 3 * 64 && vl <= 900)
                        CHECK(mf_btree_value_past_cells(v, vl));
                }
                mf_btree_hint stale = h[j]; /* any page, any slot */
                stale.leaf = (mf_pgno)(rnd() % (mf_pager_file_pages(pg) + 4));
                stale.slot = (int)(rnd() % 2100) - 2;
                mf_btree_prefetch_values(&t, &stale, 1);
            }
        }
    }
    mf_btree_release(&t);
    mf_pager_close(pg);
}

/* Put ids from, from + step, ... below `to`, each with 100 bytes that
 * start with the id (native order), and mark them in `present` (if not
 * NULL).  The first error's code, or 0. */
static int put_ids(mf_btree *t, uint64_t from, uint64_t to, uint64_t step, bool *present,
                   mf_error *err)
{
    uint8_t val[100] = {0};
    uint8_t k[8];
    for (uint64_t i = from; i < to; i += step) {
        bool existed;
        put_id(k, i);
        memcpy(val, &i, 8);
        int rc = mf_btree_put(t, k, 8, val, sizeof val, false, &existed, err);
        if (rc)
            return rc;
        if (present)
            present[i] = true;
    }
    return 0;
}

/* The locator test's probe i: ids 0 .. n, then the largest one. */
static uint64_t probe_id(uint64_t i, uint64_t n)
{
    return i == n + 1 ? UINT64_MAX : i;
}

/* Hints for probes 0 .. n + 1 into `h`. */
static void hint_probes(mf_btree *t, int height, uint64_t n, mf_btree_hint *h)
{
    uint8_t k[8];
    for (uint64_t i = 0; i < n + 2; i++) {
        put_id(k, probe_id(i, n));
        h[i].entry = -1;
        mf_btree_prefetch_leaves(t, (const uint8_t (*)[8])k, 1, height, &h[i]);
    }
}

/* The locator finds the leaf the descent finds, for present keys, holes
 * and keys past both ends, and any change to the tree drops it. */
MFT_CASE(locator, "/storage/btree/locator_names_the_descents_leaf")
{
    mf_error err;
    mf_btree t = {0};
    mf_pager *pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg);
    enum { N = 40000 };
    static bool present[N];
    static mf_btree_hint want[N + 2];
    uint8_t k[8], val[100] = {0};
    bool existed, found;
    rng_state = 0x10ca;
    CHECK_INT(put_ids(&t, 1, N, 2, present, &err), 0); /* odd ids first, then the even ones */
    CHECK_INT(put_ids(&t, 2, N, 2, present, &err), 0);
    /* far away: interpolation misses, bisection decides */
    CHECK_INT(put_ids(&t, (uint64_t)1 << 40, ((uint64_t)1 << 40) + 400, 1, NULL, &err), 0);
    for (int d = 0; d < N / 3; d++) {
        uint64_t i = 1 + rnd() % (N - 1);
        put_id(k, i);
        CHECK_INT(mf_btree_delete(&t, k, 8, &found, &err), 0);
        present[i] = false;
    }
    int height = mf_btree_height(&t, &err);
    CHECK(height >= 3);
    CHECK(!mf_btree_has_locator(&t));
    CHECK(mf_btree_descents(&t) == 0);
    hint_probes(&t, height, N, want); /* by the descents */
    for (uint64_t i = 0; i < N + 2; i++)
        CHECK(want[i].leaf != 0);
    CHECK(mf_btree_descents(&t) == N + 2); /* each counted: the locator's price */
    uint64_t leaves = mf_btree_leaves_estimate(&t, height);
    CHECK(leaves > 100);
    for (int round = 0; round < 3; round++) {
        CHECK(mf_btree_locator_build(&t, height));
        CHECK(mf_btree_has_locator(&t));
        CHECK(mf_btree_locator_build(&t, height)); /* there is one: kept */
        for (uint64_t i = 0; i < N + 2; i++) {
            uint64_t id = probe_id(i, N);
            put_id(k, id);
            mf_btree_hint h = {.entry = -1};
            /* probe_id covers ids below and above every key: the guess
             * is clamped into the locator either way (ASan checks it). */
            mf_btree_prefetch_locator(&t, (const uint8_t (*)[8])k, 1, &h);
            mf_btree_prefetch_leaves(&t, (const uint8_t (*)[8])k, 1, height, &h);
            CHECK(h.leaf == want[i].leaf);
            if (h.bounded && want[i].bounded) /* the descent knows its last branch's */
                CHECK(h.lower == want[i].lower && h.upper == want[i].upper);
            if (h.bounded)
                CHECK(h.lower <= id && id < h.upper);
            /* From the hint, and from one whose separators put the key
             * some slots off (the slot guess misses, the search decides). */
            mf_btree_hint skew = h;
            skew.lower = h.lower >= 64 ? h.lower - 64 : 0;
            for (int sk = 0; sk < 2; sk++) {
                const uint8_t *v;
                size_t vl;
                CHECK_INT(mf_btree_get_hinted(&t, sk ? &skew : &h, k, 8, &found, &v, &vl, &err),
                          0);
                CHECK(found == (i < N && present[i]));
                if (found) {
                    uint64_t got;
                    CHECK(vl >= 8);
                    memcpy(&got, v, 8);
                    CHECK(got == id);
                }
            }
        }
        CHECK(mf_btree_descents(&t) == N + 2); /* with the locator, no descents */
        /* Any change drops it: a put of a present key, a delete, a put of
         * an absent one (the answers above stay right after each). */
        uint64_t changed = 2 + 2 * (uint64_t)round;
        put_id(k, changed);
        memcpy(val, &changed, 8);
        if (round == 0) {
            CHECK_INT(mf_btree_put(&t, k, 8, val, sizeof val, false, &existed, &err), 0);
            present[2] = true;
        } else if (round == 1) {
            CHECK_INT(mf_btree_delete(&t, k, 8, &found, &err), 0);
            present[4] = false;
        } else {
            CHECK_INT(mf_btree_put(&t, k, 8, val, 60, false, &existed, &err), 0);
            present[6] = true;
        }
        CHECK(!mf_btree_has_locator(&t));
        CHECK(mf_btree_descents(&t) == 0); /* the scans before the change paid for none */
        hint_probes(&t, height, N, want);
        CHECK(mf_btree_descents(&t) == N + 2);
    }
    /* A tree of two levels has no use for one. */
    mf_btree small = {0};
    small.pg = t.pg;
    CHECK_INT(put_ids(&small, 0, 500, 1, NULL, &err), 0);
    int h2 = mf_btree_height(&small, &err);
    CHECK(h2 == 2);
    CHECK(mf_btree_leaves_estimate(&small, h2) == 0);
    CHECK(!mf_btree_locator_build(&small, h2));
    CHECK(mf_btree_locator_build(&t, height));
    CHECK_INT(mf_btree_drop(&t, &err), 0);
    CHECK(!mf_btree_has_locator(&t));
    CHECK(mf_btree_locator_build(&t, height) == false); /* empty: height 0 is passed stale */
    mf_btree_release(&small);
    mf_pager_close(pg);
}

MFT_CASE(bulk, "/storage/btree/bulk_build")
{
    mf_error err;
    mf_btree t = {0};
    model m = {0};
    uint8_t key[2048], *scratch = malloc(70000), *val = malloc(70000);
    mf_pager *pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg);
    mf_bulk *b;
    CHECK_INT(mf_btree_bulk_begin(&t, &b, &err), 0);
    for (int i = 0; i < 30000; i++) {
        /* Increasing keys, some long. */
        int kl = snprintf((char *)key, sizeof key, "k%08d", i);
        if (i % 97 == 0) {
            memset(key + kl, 'z', 1500);
            kl += 1500;
        }
        size_t vl = (size_t)(i % 50 == 0 ? 65000 : i % 300);
        fill(val, vl, (uint64_t)i);
        CHECK_INT(mf_btree_bulk_add(b, key, (size_t)kl, val, vl, &err), 0);
        model_put(&m, key, (size_t)kl, (uint64_t)i, vl);
    }
    CHECK(mf_btree_bulk_add(b, (const uint8_t *)"a", 1, NULL, 0, &err) == MF_BadValue);
    CHECK_INT(mf_btree_bulk_finish(b, &err), 0);
    uint64_t entries;
    CHECK_INT(mf_btree_validate(&t, &entries, &err), 0);
    CHECK_INT(entries, m.n);
    CHECK(scans_match(&t, &m, scratch));
    /* The built tree takes ordinary writes too. */
    bool existed;
    CHECK_INT(mf_btree_put(&t, (const uint8_t *)"k00000500x", 10, NULL, 0, false, &existed, &err), 0);
    model_put(&m, (const uint8_t *)"k00000500x", 10, 0, 0);
    CHECK_INT(mf_btree_validate(&t, &entries, &err), 0);
    CHECK_INT(entries, m.n);
    mf_pager_close(pg);
    model_free(&m);
    free(scratch);
    free(val);
}

MFT_CASE(space_reuse, "/storage/pager/space_is_reused_across_checkpoints")
{
    mf_error err;
    mf_btree t = {0};
    uint8_t val[3000];
    mf_pager *pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg);
    memset(val, 'v', sizeof val);
    uint64_t sizes[8];
    for (int round = 0; round < 8; round++) {
        /* Replace every value: the old pages are freed, and come back once
         * two checkpoints have passed. */
        for (int i = 0; i < 2000; i++) {
            char k[16];
            int kl = snprintf(k, sizeof k, "%06d", i);
            val[0] = (uint8_t)round;
            bool existed;
            CHECK_INT(mf_btree_put(&t, (uint8_t *)k, (size_t)kl, val, sizeof val, false,
                                   &existed, &err), 0);
        }
        CHECK_INT(checkpoint(&t, &err), 0);
        mf_pager_stats st;
        mf_pager_get_stats(pg, &st);
        sizes[round] = st.file_pages;
    }
    /* The file stops growing: rounds 5..7 are the same size. */
    CHECK(sizes[7] == sizes[5]);
    CHECK(sizes[7] < 2 * sizes[1] + 512);
    mf_pager_close(pg);
}

MFT_CASE(corrupt_page, "/storage/pager/damaged_page_is_detected")
{
    mf_error err;
    mf_btree t = {0};
    mf_pager *pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg);
    for (int i = 0; i < 500; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "%06d", i);
        bool existed;
        CHECK_INT(mf_btree_put(&t, (uint8_t *)k, (size_t)kl, (uint8_t *)k, (size_t)kl, false,
                               &existed, &err), 0);
    }
    /* A value in an overflow run: its byte offset in the file. */
    uint8_t big[10000];
    memset(big, 'b', sizeof big);
    bool ex;
    CHECK_INT(mf_btree_put(&t, (const uint8_t *)"zbig", 4, big, sizeof big, false, &ex, &err), 0);
    CHECK_INT(checkpoint(&t, &err), 0);
    mf_pgno root = t.root;
    bool f0;
    const uint8_t *bv;
    size_t bl;
    CHECK_INT(mf_btree_get(&t, (const uint8_t *)"zbig", 4, &f0, &bv, &bl, &err), 0);
    const uint8_t *base = mf_pager_page(pg, root, &err) - root * MF_PAGE_SIZE;
    long big_off = (long)(bv - base) + 5000;
    mf_pager_close(pg);

    /* Damage the run: detected when the value is first read. */
    char rpath[512];
    snprintf(rpath, sizeof rpath, "%s/data.mf", mft_tmpdir());
    FILE *rf = fopen(rpath, "r+b");
    CHECK(rf);
    fseek(rf, big_off, SEEK_SET);
    fputc('B', rf);
    fclose(rf);
    pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg);
    CHECK_INT(mf_btree_get(&t, (const uint8_t *)"zbig", 4, &f0, &bv, &bl, &err), MF_DataCorruption);
    CHECK(strstr(err.msg, "checksum mismatch in the 10000-byte run") != NULL);
    CHECK_INT(mf_btree_get(&t, (const uint8_t *)"000002", 6, &f0, &bv, &bl, &err), 0);
    CHECK(f0); /* the rest still reads */
    mf_pager_close(pg);

    /* Flip one byte inside the root page. */
    char path[512];
    snprintf(path, sizeof path, "%s/data.mf", mft_tmpdir());
    FILE *f = fopen(path, "r+b");
    CHECK(f);
    fseek(f, (long)(root * MF_PAGE_SIZE + 100), SEEK_SET);
    int c = fgetc(f);
    fseek(f, (long)(root * MF_PAGE_SIZE + 100), SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);

    pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg); /* the database opens */
    bool found;
    const uint8_t *v;
    size_t vl;
    CHECK_INT(mf_btree_get(&t, (const uint8_t *)"000001", 6, &found, &v, &vl, &err),
              MF_DataCorruption);
    CHECK(strstr(err.msg, "checksum mismatch") != NULL);
    mf_pager_close(pg);
}

MFT_CASE(torn_meta, "/storage/pager/torn_newest_meta_falls_back")
{
    mf_error err;
    mf_btree t = {0};
    mf_pager *pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg);
    bool existed;
    CHECK_INT(mf_btree_put(&t, (const uint8_t *)"a", 1, (const uint8_t *)"1", 1, false, &existed, &err), 0);
    CHECK_INT(checkpoint(&t, &err), 0); /* gen 1 */
    CHECK_INT(mf_btree_put(&t, (const uint8_t *)"b", 1, (const uint8_t *)"2", 1, false, &existed, &err), 0);
    CHECK_INT(checkpoint(&t, &err), 0); /* gen 2, slot 0 */
    mf_pager_close(pg);

    char path[512];
    snprintf(path, sizeof path, "%s/data.mf", mft_tmpdir());
    FILE *f = fopen(path, "r+b");
    CHECK(f);
    fseek(f, 200, SEEK_SET); /* inside meta slot 0 (gen 2) */
    fputc(0x55, f);
    fclose(f);

    pg = open_pager(mft_tmpdir(), &t, &err);
    CHECK(pg);
    bool found;
    const uint8_t *v;
    size_t vl;
    CHECK_INT(mf_btree_get(&t, (const uint8_t *)"a", 1, &found, &v, &vl, &err), 0);
    CHECK(found);
    CHECK_INT(mf_btree_get(&t, (const uint8_t *)"b", 1, &found, &v, &vl, &err), 0);
    CHECK(!found); /* gen 1's image: "b" came later */
    uint64_t entries;
    CHECK_INT(mf_btree_validate(&t, &entries, &err), 0);
    CHECK_INT(entries, 1);
    mf_pager_close(pg);
}

/* ------------------------------------------------------------ huge pages */

/* Whether the VmFlags of the mapping holding `addr` (in /proc/self/smaps)
 * include `flag` ("hg": advised huge, "nh": advised never). */
static bool vm_flag(const void *addr, const char *flag)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[1024];
    bool in = false, has = false;
    uintptr_t a = (uintptr_t)addr;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = a >= lo && a < hi;
        else if (in && strncmp(line, "VmFlags:", 8) == 0) {
            for (char *t = strtok(line + 8, " \n"); t; t = strtok(NULL, " \n"))
                has = has || strcmp(t, flag) == 0;
            break;
        }
    }
    if (f)
        fclose(f);
    return has;
}

static mf_pager *open_huge(const char *path, mf_huge_pages mode, mf_error *err)
{
    uint8_t user[MF_META_USER_SIZE];
    uint64_t gen;
    mf_pager *pg = NULL;
    mf_pager_options opt = {.reserve_bytes = (size_t)1 << 30, .huge_pages = mode,
                            .huge_max_bytes = (uint64_t)4 << 20};
    return mf_pager_open(path, &opt, &pg, user, &gen, err) == 0 ? pg : NULL;
}

/* The first and the last page of the mapping carry the advice `flag`. */
static bool mapped_with(mf_pager *pg, const char *flag)
{
    const mf_pager_map *m = mf_pager_map_of(pg);
    uint64_t last = atomic_load(&m->mapped) - 1;
    return vm_flag(m->base, flag) && vm_flag(m->base + last * MF_PAGE_SIZE, flag);
}

MFT_CASE(huge_pages, "/storage/pager/huge_pages_advice_follows_the_mode")
{
    if (access("/sys/kernel/mm/transparent_hugepage", F_OK) != 0) {
        printf("  (skipped: this kernel has no transparent huge pages)\n");
        return;
    }
    char path[512];
    mf_error err;
    mf_pager_stats st;
    mf_pgno no;
    snprintf(path, sizeof path, "%s/data.mf", mft_tmpdir());

    /* AUTO, limit 4 MiB: a new file is advised, and so is what it grows by. */
    mf_pager *pg = open_huge(path, MF_HUGE_AUTO, &err);
    CHECK(pg);
    CHECK_INT((uintptr_t)mf_pager_map_of(pg)->base % MF_OS_HUGE_BYTES, 0);
    mf_pager_get_stats(pg, &st);
    CHECK(st.huge_pages);
    CHECK(mapped_with(pg, "hg"));
    CHECK_INT(mf_pager_alloc(pg, 100, MF_PAGE_LEAF, &no, &err), 0);
    mf_pager_get_stats(pg, &st);
    CHECK_INT(st.file_pages % (MF_OS_HUGE_BYTES / MF_PAGE_SIZE), 0); /* grown to 2 MiB */
    CHECK(st.huge_pages);
    CHECK(mapped_with(pg, "hg"));
    /* Past the limit: the advice is withdrawn from all of the mapping. */
    CHECK_INT(mf_pager_alloc(pg, 1024, MF_PAGE_LEAF, &no, &err), 0);
    mf_pager_get_stats(pg, &st);
    CHECK(st.file_pages * MF_PAGE_SIZE > ((uint64_t)4 << 20));
    CHECK_INT(st.file_pages % (MF_OS_HUGE_BYTES / MF_PAGE_SIZE), 0);
    CHECK(!st.huge_pages);
    CHECK(mapped_with(pg, "nh"));
    mf_btree t = {.pg = pg};
    CHECK_INT(checkpoint(&t, &err), 0); /* or reopening truncates the file */
    mf_pager_close(pg);

    /* Opened past the limit: AUTO advises never, ON always, OFF never. */
    static const struct { mf_huge_pages mode; bool huge; const char *flag; } open_as[] = {
        {MF_HUGE_AUTO, false, "nh"}, {MF_HUGE_ON, true, "hg"}, {MF_HUGE_OFF, false, "nh"}};
    for (size_t i = 0; i < sizeof open_as / sizeof open_as[0]; i++) {
        CHECK((pg = open_huge(path, open_as[i].mode, &err)) != NULL);
        mf_pager_get_stats(pg, &st);
        bool ok = st.huge_pages == open_as[i].huge && mapped_with(pg, open_as[i].flag);
        mf_pager_close(pg);
        CHECK(ok);
    }
}
