/*
 * wal.c -- the write-ahead log: segments of hashed, optionally LZ4-compressed
 * blocks, group commit, and recovery.  wal.h is the contract and shows the
 * on-disk format (segment header, block header, record framing); this file
 * follows it exactly and adds nothing to the format.
 *
 * The file has four parts:
 *
 *   1. Encoding: little-endian helpers, the two headers, segment names.
 *   2. Writing: appends buffer framed records under the mutex; the leader of
 *      a group commit frames them into blocks, rotates the segment when it
 *      has passed its target, writes and syncs once (flush_batch).
 *   3. Reading and recovery: a windowed reader over one segment, block
 *      verification (blk_read), the torn-tail-or-corruption decision
 *      (tail_or_corrupt) and the segment walk of mf_wal_open.
 *   4. The rest of the API: drop_through, close, stats.
 *
 * Invariants (under w->mu):
 *
 *   I1. LSNs durable+1 .. pending_first-1 are in the batch a leader is
 *       flushing (empty unless `flushing`); pending_first .. next_lsn-1 are
 *       framed in `pending`.  Records get consecutive LSNs in append order.
 *   I2. At most one leader: `flushing` is set while one thread writes and
 *       syncs without the mutex.  Only that thread touches seg, seg_size,
 *       seg_salt and out.  A record appended while a leader flushes goes to
 *       the next leader.
 *   I3. `durable` only grows, and only after a sync that covered it
 *       succeeded.  Once `failed` is set it stays set: every later append
 *       and commit fails with the stored reason (a failed fsync may have
 *       dropped the pages; retrying and then reporting success would lie).
 *   I4. segs[] lists the first LSNs of the segment files, ascending; the
 *       last one is the segment being written.  Every segment but the last
 *       was synced whole before the next one was started, so a damaged
 *       block anywhere but at the end of the last segment is corruption.
 *   I5. Block LSNs are contiguous within a segment, and each segment's
 *       first LSN follows the previous segment's last one -- except across
 *       a range the checkpoint already covers (open with after_lsn past the
 *       end of the log starts a new segment at after_lsn + 1).
 *
 *   I6. Space is taken before a change is made, never during the flush:
 *       mf_wal_reserve gives the current segment real disk blocks
 *       (fallocate, the file's length unchanged) for the worst-case
 *       framing of a record -- its own block, stored raw -- before the
 *       engine applies the change, so a full disk refuses the write
 *       cleanly (MF_OutOfDiskSpace, log not failed) instead of failing a
 *       group commit whose changes are already applied.  A rotation moves
 *       every outstanding claim to the new segment, under mu, or does not
 *       happen (a full disk keeps the current segment growing past its
 *       target).  The segment and its allocation change only under mu.
 *
 * States:   open --append/commit--> ok --leader flush fails--> failed
 *           ok/failed --close/abandon--> gone.  Nothing leaves `failed`
 *           but closing (then reopening, which recovers what is on disk).
 *
 * Segment rotation happens at the start of a flush: when the current
 * segment has passed segment_target and holds at least one block, the
 * leader creates "wal.<first LSN of the batch>" (O_EXCL), writes its header
 * and syncs the directory before writing blocks into it; the batch's one
 * data sync then covers header and blocks.  So a crash during rotation
 * leaves at worst a last segment of at most a (bad) header: nothing in it
 * was ever acknowledged, and open deletes it.
 *
 * Recovery follows wal.h's rules, with three additions it leaves open:
 *
 *   - A last segment of at most SEG_HDR bytes with a bad header is a
 *     rotation cut short: deleted (drop_blank_last).
 *   - The segment header's salt has no hash of its own.  If the first
 *     block is intact under its own salt and carries the segment's first
 *     LSN, the header is damaged: corruption, not a torn tail
 *     (check_header_salt).  Without this, one flipped bit there would make
 *     every block "stale" and silently cut the whole segment off.
 *   - A segment every record of which is <= after_lsn is not read; a bad
 *     header there is logged and skipped, not fatal (check_old_segment).
 *
 * Stats: every field counts since open, except `segments`, the number of
 * segment files the log has now.
 */
#include "wal.h"
#include "os.h"

#include <inttypes.h>
#include <limits.h>
#include <lz4.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <xxhash.h>

#define SEG_HDR 32
#define BLK_HDR 48
#define SEG_MAGIC "MFWALSEG"
#define BLK_MAGIC "MFWB"
#define TORN_SECTOR 512u /* the unit a crash persists or loses */
/* Why an intact block (both hashes verify) ends the log: stale bytes of
 * an older log, not damage. */
#define WHY_OTHER_LOG "block of another log (wrong salt)"
#define WHY_OUT_OF_SEQUENCE "block LSN does not follow the previous block's"
#define SEG_VERSION 1
#define CODEC_RAW 0
#define CODEC_LZ4 1

/* The largest payload (raw) a block can have: one record of the largest
 * size.  block_target is clamped to it, so no valid block is larger. */
#define RAW_MAX ((uint32_t)MF_WAL_MAX_RECORD + 4)
#define DEFAULT_SEGMENT_TARGET (64ull << 20)
#define DEFAULT_BLOCK_TARGET (1u << 20)
/* Open reads a segment through a window of about this size. */
#define READ_WINDOW (1u << 20)
/* A leader pwrites its blocks in pieces of about this size, so a large
 * batch does not need a second copy of itself in memory. */
#define WRITE_CHUNK (4u << 20)
/* A segment's disk blocks are reserved ahead in steps of about this size. */
#define PREALLOC_STEP (4u << 20)
/* A buffer that grew past this for one big batch is freed, not kept. */
#define KEEP_MAX (16u << 20)

/* Log ids (mongod-style numeric ids for the structured log). */
#define LOGID_TORN_TAIL 8801001
#define LOGID_TORN_SEGMENT 8801002
#define LOGID_FAILED 8801003
#define LOGID_BAD_OLD_SEGMENT 8801004
#define LOGID_NO_ROTATE 8801005

struct mf_wal {
    pthread_mutex_t mu;
    pthread_cond_t flushed; /* broadcast when a leader's flush ends */
    pthread_mutex_t drop_mu; /* serializes mf_wal_drop_through */
    char *dir;
    mf_os_faults *faults; /* its files' fault table (mf_wal_options), or NULL */
    uint64_t segment_target;
    uint32_t block_target;

    /* Guarded by mu (invariants I1-I4). */
    mf_buf pending;
    mf_buf spare; /* an empty buffer to swap in when a leader takes `pending` */
    mf_lsn pending_first;
    mf_lsn next_lsn;
    mf_lsn durable;
    bool flushing;
    bool failed;
    mf_error fail; /* why the log failed */
    mf_lsn *segs;
    size_t nsegs, segs_cap;
    mf_wal_stats stats;
    /* Space (I6): the segment being written has disk blocks up to
     * alloc_end; records need at most seg_end + claim_* bytes of it. */
    uint64_t seg_end;        /* seg_size as of the last flush or rotation */
    uint64_t alloc_end;
    uint64_t claim_reserved; /* mf_wal_reserve'd, not yet appended */
    uint64_t claim_pending;  /* appended, in `pending` */
    uint64_t claim_flushing; /* in the batch a leader is writing */

    /* Owned by the leader (I2), or by open / close. */
    mf_file *seg;
    uint64_t seg_size;
    uint64_t seg_salt;
    mf_buf out;
};

/* ------------------------------------------------------------- encoding */

static void put_u32(uint8_t *p, uint32_t v)
{
    mf_store_i32le(p, (int32_t)v);
}

static void put_u64(uint8_t *p, uint64_t v)
{
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)mf_load_u32le(p) | (uint64_t)mf_load_u32le(p + 4) << 32;
}

/* A random salt for a new segment, so blocks of an older log left beyond
 * the valid end can never pass for this one's. */
static uint64_t new_salt(void)
{
    static _Atomic uint64_t counter;
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) {
        /* No entropy (yet): the clocks and a counter, mixed.  Never block
         * a commit on the entropy pool; a salt only has to differ. */
        uint64_t mix[3] = {(uint64_t)mf_clock_mono_us(), (uint64_t)mf_clock_wall_ms(),
                           ++counter};
        s = XXH3_64bits(mix, sizeof mix);
    }
    return s;
}

static void seg_header_encode(uint8_t h[SEG_HDR], uint64_t salt, mf_lsn first)
{
    memset(h, 0, SEG_HDR);
    memcpy(h, SEG_MAGIC, 8);
    put_u32(h + 8, SEG_VERSION);
    put_u64(h + 16, salt);
    put_u64(h + 24, first);
}

/* Whether `h` is a valid header for the segment named after `first`. */
static bool seg_header_valid(const uint8_t h[SEG_HDR], mf_lsn first)
{
    return memcmp(h, SEG_MAGIC, 8) == 0 && mf_load_u32le(h + 8) == SEG_VERSION &&
           mf_load_u32le(h + 12) == 0 && get_u64(h + 24) == first;
}

typedef struct blk_hdr {
    uint8_t codec;
    uint64_t salt;
    mf_lsn first;
    uint32_t count, raw_len, stored_len;
    uint64_t payload_hash;
} blk_hdr;

static void blk_header_encode(uint8_t h[BLK_HDR], const blk_hdr *b)
{
    memset(h, 0, BLK_HDR);
    memcpy(h, BLK_MAGIC, 4);
    h[4] = b->codec;
    put_u64(h + 8, b->salt);
    put_u64(h + 16, b->first);
    put_u32(h + 24, b->count);
    put_u32(h + 28, b->raw_len);
    put_u32(h + 32, b->stored_len);
    put_u32(h + 36, (uint32_t)XXH3_64bits(h, 36));
    put_u64(h + 40, b->payload_hash);
}

/* Decode a block header; NULL if it is valid for a segment with `salt`,
 * else why not. */
static const char *blk_header_decode(const uint8_t h[BLK_HDR], uint64_t salt, blk_hdr *b)
{
    if (memcmp(h, BLK_MAGIC, 4) != 0)
        return "bad block magic";
    if ((uint32_t)XXH3_64bits(h, 36) != mf_load_u32le(h + 36))
        return "bad block header hash";
    b->codec = h[4];
    b->salt = get_u64(h + 8);
    b->first = get_u64(h + 16);
    b->count = mf_load_u32le(h + 24);
    b->raw_len = mf_load_u32le(h + 28);
    b->stored_len = mf_load_u32le(h + 32);
    b->payload_hash = get_u64(h + 40);
    if (b->salt != salt)
        return WHY_OTHER_LOG;
    if (h[5] || h[6] || h[7] || b->codec > CODEC_LZ4)
        return "unknown block codec";
    /* Each record is at least 5 bytes (length and one byte). */
    if (b->count == 0 || b->raw_len > RAW_MAX || b->raw_len / 5 < b->count)
        return "impossible block length";
    if (b->codec == CODEC_RAW ? b->stored_len != b->raw_len
                              : (b->stored_len == 0 ||
                                 b->stored_len > (uint32_t)LZ4_compressBound((int)b->raw_len)))
        return "impossible block length";
    return NULL;
}

static int seg_path(const char *dir, mf_lsn first, char *path, size_t cap, mf_error *err)
{
    if ((size_t)snprintf(path, cap, "%s/wal.%016" PRIx64, dir, first) >= cap)
        return mf_error_set(err, MF_BadValue, "log directory path '%s' is too long", dir);
    return 0;
}

/* The LSN a segment file name stands for, or 0 if `name` is not one. */
static mf_lsn seg_name_lsn(const char *name)
{
    if (strncmp(name, "wal.", 4) != 0 || strlen(name) != 4 + 16)
        return 0;
    mf_lsn v = 0;
    for (const char *p = name + 4; *p; p++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (d < 0)
            return 0;
        v = v << 4 | (mf_lsn)d;
    }
    return v;
}

static int oom(mf_error *err, const char *what)
{
    return mf_error_set(err, MF_InternalError, "write-ahead log: out of memory (%s)", what);
}

/* Make room for one more entry in segs[] (under mu, or before sharing). */
static int segs_reserve(mf_wal *w)
{
    if (w->nsegs < w->segs_cap)
        return 0;
    size_t cap = w->segs_cap ? w->segs_cap * 2 : 16;
    mf_lsn *p = realloc(w->segs, cap * sizeof *p);
    if (!p)
        return -1;
    w->segs = p;
    w->segs_cap = cap;
    return 0;
}

/* Create segment "wal.<first>" with a fresh salt and write its header.
 * The caller syncs (the file and the directory) as its protocol needs. */
static int seg_create(mf_wal *w, mf_lsn first, mf_file **out, uint64_t *salt, mf_error *err)
{
    char path[PATH_MAX];
    uint8_t h[SEG_HDR];
    mf_file *f = NULL;
    int rc = seg_path(w->dir, first, path, sizeof path, err);
    if (rc)
        return rc;
    rc = mf_os_open(path, MF_OS_CREATE | MF_OS_EXCL, &f, w->faults, "wal.create", err);
    if (rc)
        return rc;
    *salt = new_salt();
    seg_header_encode(h, *salt, first);
    rc = mf_os_pwrite(f, h, SEG_HDR, 0, "wal.write", err);
    if (rc)
        goto fail;
    *out = f;
    return 0;
fail:
    mf_os_close(f);
    return rc;
}

/* -------------------------------------------------------------- writing */

static int failed_error(mf_wal *w, mf_error *err);

/* The most bytes a record of `len` bytes takes in a segment: its own
 * block, stored raw. */
static uint64_t worst_size(size_t len)
{
    return (uint64_t)BLK_HDR + 4 + len;
}

static uint64_t claims(const mf_wal *w)
{
    return w->claim_reserved + w->claim_pending + w->claim_flushing;
}

/* Give the current segment disk blocks up to at least `end` (a step more
 * if the disk has it).  Under mu. */
static int alloc_upto(mf_wal *w, uint64_t end, mf_error *err)
{
    if (end <= w->alloc_end)
        return 0;
    uint64_t step = end < w->alloc_end + PREALLOC_STEP ? w->alloc_end + PREALLOC_STEP : end;
    int rc = mf_os_allocate(w->seg, w->alloc_end, step - w->alloc_end, true, "wal.reserve", err);
    if (rc == MF_OutOfDiskSpace && step > end) {
        step = end;
        rc = mf_os_allocate(w->seg, w->alloc_end, step - w->alloc_end, true, "wal.reserve", err);
    }
    if (rc == 0)
        w->alloc_end = step;
    return rc;
}

int mf_wal_reserve(mf_wal *w, size_t len, mf_error *err)
{
    int rc;
    pthread_mutex_lock(&w->mu);
    if (w->failed) {
        rc = failed_error(w, err);
    } else {
        uint64_t need = worst_size(len);
        rc = alloc_upto(w, w->seg_end + claims(w) + need, err);
        if (rc == 0)
            w->claim_reserved += need;
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void mf_wal_unreserve(mf_wal *w, size_t len)
{
    uint64_t need = worst_size(len);
    pthread_mutex_lock(&w->mu);
    w->claim_reserved = w->claim_reserved > need ? w->claim_reserved - need : 0;
    pthread_mutex_unlock(&w->mu);
}

int mf_wal_append(mf_wal *w, const void *rec, size_t len, mf_lsn *lsn, mf_error *err)
{
    int rc = 0;
    if (len == 0 || len > MF_WAL_MAX_RECORD)
        return mf_error_set(err, MF_BadValue,
                            "write-ahead log record of %zu bytes: must be 1 to %u bytes", len,
                            (unsigned)MF_WAL_MAX_RECORD);
    pthread_mutex_lock(&w->mu);
    if (w->failed) {
        rc = mf_error_set(err, w->fail.code, "%s", w->fail.msg);
        goto out;
    }
    if (mf_buf_reserve(&w->pending, 4 + len) != 0) {
        rc = oom(err, "append");
        goto out;
    }
    mf_buf_put_i32le(&w->pending, (int32_t)len); /* cannot fail: reserved */
    mf_buf_append(&w->pending, rec, len);
    /* The record takes over its reservation, if its writer made one. */
    uint64_t need = worst_size(len);
    w->claim_reserved = w->claim_reserved > need ? w->claim_reserved - need : 0;
    w->claim_pending += need;
    *lsn = w->next_lsn++;
    w->stats.appends++;
out:
    pthread_mutex_unlock(&w->mu);
    return rc;
}

typedef struct flush_stats {
    uint64_t blocks, bytes_raw, bytes_stored;
} flush_stats;

/* Frame the records of `batch` from `*pos` into one block at the end of
 * w->out: as many as fit in block_target, at least one.  `*lsn` is the
 * first record's LSN; both advance past the block. */
static int frame_block(mf_wal *w, const mf_buf *batch, size_t *pos, mf_lsn *lsn,
                       flush_stats *fs, mf_error *err)
{
    size_t start = *pos, end = start;
    uint32_t n = 0;
    while (end < batch->len) {
        size_t rec = 4 + (size_t)mf_load_u32le(batch->data + end);
        if (n > 0 && end - start + rec > w->block_target)
            break; /* a record never straddles blocks */
        end += rec;
        n++;
    }
    size_t raw_len = end - start;
    int bound = LZ4_compressBound((int)raw_len);
    if (mf_buf_reserve(&w->out, BLK_HDR + (size_t)bound) != 0)
        return oom(err, "framing a block");
    uint8_t *h = w->out.data + w->out.len, *payload = h + BLK_HDR;
    const char *src = (const char *)batch->data + start;
    int z = LZ4_compress_default(src, (char *)payload, (int)raw_len, bound);
    blk_hdr b = {.codec = CODEC_LZ4, .salt = w->seg_salt, .first = *lsn, .count = n,
                 .raw_len = (uint32_t)raw_len, .stored_len = (uint32_t)z};
    if (z <= 0 || (size_t)z >= raw_len) {
        /* Compression does not help: store raw. */
        memcpy(payload, src, raw_len);
        b.codec = CODEC_RAW;
        b.stored_len = (uint32_t)raw_len;
    }
    b.payload_hash = XXH3_64bits(payload, b.stored_len);
    blk_header_encode(h, &b);
    w->out.len += BLK_HDR + b.stored_len;
    *pos = end;
    *lsn += n;
    fs->blocks++;
    fs->bytes_raw += raw_len;
    fs->bytes_stored += b.stored_len;
    return 0;
}

/* Start segment "wal.<first>" and make it the one being written.  The
 * directory is synced before any record goes into it, so the batch's data
 * sync is all a record in it still needs to be durable.  The new segment
 * gets disk blocks for every outstanding claim first (I6); if the disk
 * cannot give them, the current segment stays (it has them) and grows past
 * its target: `*rotated` says which.  Runs under mu, so no claim is made
 * meanwhile. */
static int rotate(mf_wal *w, mf_lsn first, bool *rotated, mf_error *err)
{
    mf_file *f = NULL;
    uint64_t salt;
    char path[PATH_MAX];
    mf_error serr;
    *rotated = false;
    if (segs_reserve(w) != 0)
        return oom(err, "rotating the segment");
    int rc = seg_create(w, first, &f, &salt, &serr);
    if (rc == 0) {
        uint64_t need = claims(w);
        rc = mf_os_allocate(f, SEG_HDR, need + PREALLOC_STEP, true, "wal.reserve", &serr);
        if (rc == MF_OutOfDiskSpace)
            rc = mf_os_allocate(f, SEG_HDR, need, true, "wal.reserve", &serr);
        if (rc == 0) {
            rc = mf_os_sync_dir(w->dir, w->faults, "wal.dir", err);
            if (rc)
                goto fail;
            w->segs[w->nsegs++] = first; /* reserved above; only this leader adds */
            /* The old segment was synced whole by the flush that ended it (I4). */
            mf_os_close(w->seg);
            w->seg = f;
            w->seg_size = w->seg_end = SEG_HDR;
            w->alloc_end = SEG_HDR + need;
            w->seg_salt = salt;
            *rotated = true;
            return 0;
        }
    }
    if (rc != MF_OutOfDiskSpace) {
        *err = serr;
        goto fail;
    }
    /* No room for a new segment: keep writing the current one.  The new
     * file must go, or open would take it for the last segment. */
    mf_os_close(f);
    f = NULL;
    if ((rc = seg_path(w->dir, first, path, sizeof path, err)) != 0 ||
        (rc = mf_os_unlink(path, w->faults, "wal.unlink", err)) != 0)
        return rc;
    mf_log(MF_LOG_WARNING, "STORAGE", LOGID_NO_ROTATE, "wal",
           "write-ahead log in %s: no space for a new segment; the current one grows: %s",
           w->dir, serr.msg);
    return 0;
fail:
    mf_os_close(f);
    return rc;
}

/* Write `batch` (framed records from LSN `first` on) as blocks at the end
 * of the log and sync once.  Runs without the mutex (the leader, I2). */
static int flush_batch(mf_wal *w, const mf_buf *batch, mf_lsn first, flush_stats *fs,
                       mf_error *err)
{
    int rc = 0;
    if (w->seg_size >= w->segment_target && w->seg_size > SEG_HDR) {
        bool rotated;
        pthread_mutex_lock(&w->mu);
        rc = rotate(w, first, &rotated, err);
        pthread_mutex_unlock(&w->mu);
        if (rc)
            return rc;
    }
    size_t pos = 0;
    mf_lsn lsn = first;
    w->out.len = 0;
    while (pos < batch->len) {
        rc = frame_block(w, batch, &pos, &lsn, fs, err);
        if (rc)
            goto out;
        if (w->out.len >= WRITE_CHUNK || pos == batch->len) {
            rc = mf_os_pwrite(w->seg, w->out.data, w->out.len, w->seg_size, "wal.write", err);
            if (rc)
                goto out;
            w->seg_size += w->out.len;
            w->out.len = 0;
        }
    }
    /* One sync for every record of the batch: this is the group commit. */
    rc = mf_os_sync(w->seg, true, "wal.sync", err);
out:
    w->out.len = 0;
    if (w->out.cap > KEEP_MAX)
        mf_buf_free(&w->out);
    return rc;
}

/* The error every call on a failed log gets (I3).  Under mu. */
static int failed_error(mf_wal *w, mf_error *err)
{
    return mf_error_set(err, w->fail.code, "%s", w->fail.msg);
}

/* Become the leader: take everything pending, flush it without the mutex,
 * then publish the result to every waiter.  Called and returns with mu
 * held. */
static int lead_flush(mf_wal *w, mf_error *err)
{
    mf_buf batch = w->pending;
    mf_lsn first = w->pending_first, last = w->next_lsn - 1;
    w->pending = w->spare;
    w->spare = (mf_buf){0};
    w->pending_first = w->next_lsn;
    w->flushing = true;
    w->claim_flushing = w->claim_pending;
    w->claim_pending = 0;
    pthread_mutex_unlock(&w->mu);

    flush_stats fs = {0};
    mf_error ferr;
    mf_error_clear(&ferr);
    int rc = flush_batch(w, &batch, first, &fs, &ferr);

    pthread_mutex_lock(&w->mu);
    w->flushing = false;
    if (rc == 0) {
        w->durable = last; /* only now: the sync covering it succeeded (I3) */
        w->seg_end = w->seg_size;
        w->claim_flushing = 0;
        w->stats.syncs++;
        w->stats.blocks += fs.blocks;
        w->stats.bytes_raw += fs.bytes_raw;
        w->stats.bytes_stored += fs.bytes_stored;
    } else {
        w->failed = true;
        mf_error_set(&w->fail, rc,
                     "the write-ahead log could not be made durable and writes are refused "
                     "until the database is reopened: %s",
                     ferr.msg);
        mf_log(MF_LOG_ERROR, "STORAGE", LOGID_FAILED, "wal",
               "write-ahead log in %s failed at LSNs %" PRIu64 "..%" PRIu64 ": %s", w->dir,
               first, last, ferr.msg);
    }
    /* Keep the batch's memory for the next swap, unless one big batch
     * made it huge. */
    batch.len = 0;
    if (batch.cap > KEEP_MAX)
        mf_buf_free(&batch);
    w->spare = batch;
    pthread_cond_broadcast(&w->flushed);
    return rc ? failed_error(w, err) : 0;
}

int mf_wal_commit(mf_wal *w, mf_lsn lsn, mf_error *err)
{
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    w->stats.commits++;
    for (;;) {
        if (w->failed) {
            rc = failed_error(w, err);
            break;
        }
        if (lsn <= w->durable)
            break;
        if (lsn >= w->next_lsn) {
            rc = mf_error_set(err, MF_BadValue,
                              "cannot commit LSN %" PRIu64 ": the last appended is %" PRIu64,
                              lsn, w->next_lsn - 1);
            break;
        }
        if (w->flushing) {
            /* A leader is writing; our record is in its batch or will be
             * in the next one.  Wait, then look again. */
            pthread_cond_wait(&w->flushed, &w->mu);
            continue;
        }
        rc = lead_flush(w, err);
        if (rc)
            break;
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* ------------------------------------------------------ reading segments */

/* A window over one segment file, so open reads whole blocks with a few
 * large preads and never holds a whole segment in memory. */
typedef struct reader {
    mf_file *f;
    const char *path;
    uint64_t size; /* of the file */
    mf_buf win;    /* bytes [win_off, win_off + win.len) */
    uint64_t win_off;
} reader;

/* Point `*p` at the bytes from `off` on, at least `min` of them unless the
 * file ends first; `*avail` says how many there are (it may be more than
 * `min`).  Valid until the next call. */
static int rd_peek(reader *rd, uint64_t off, size_t min, const uint8_t **p, size_t *avail,
                   mf_error *err)
{
    uint64_t win_end = rd->win_off + rd->win.len;
    if (off >= rd->size) {
        *avail = 0;
        *p = NULL;
        return 0;
    }
    if (off < rd->win_off || off > win_end ||
        (win_end - off < min && win_end < rd->size)) {
        size_t want = min > READ_WINDOW ? min : READ_WINDOW;
        if (want > rd->size - off)
            want = (size_t)(rd->size - off);
        rd->win.len = 0;
        if (mf_buf_reserve(&rd->win, want) != 0)
            return oom(err, "reading the log");
        size_t got = 0;
        int rc = mf_os_pread(rd->f, rd->win.data, want, off, &got, "wal.read", err);
        if (rc)
            return rc;
        rd->win_off = off;
        rd->win.len = got;
        win_end = off + got;
    }
    *p = rd->win.data + (off - rd->win_off);
    *avail = (size_t)(win_end - off);
    return 0;
}

typedef struct blk {
    blk_hdr h;
    const uint8_t *raw; /* the records; valid until the next reader call */
} blk;

/* Read and verify the block at `off`.  `*why` is NULL for a valid block of
 * a segment with `salt`, else the reason it is not one (which ends the
 * valid log); an error return is an I/O or memory failure. */
static int blk_read(reader *rd, uint64_t off, uint64_t salt, mf_buf *scratch, blk *b,
                    const char **why, mf_error *err)
{
    const uint8_t *p;
    size_t avail;
    int rc = rd_peek(rd, off, BLK_HDR, &p, &avail, err);
    if (rc)
        return rc;
    if (avail < BLK_HDR) {
        *why = "short block header";
        return 0;
    }
    if ((*why = blk_header_decode(p, salt, &b->h)) != NULL)
        return 0;
    rc = rd_peek(rd, off + BLK_HDR, b->h.stored_len, &p, &avail, err);
    if (rc)
        return rc;
    if (avail < b->h.stored_len) {
        *why = "short block payload";
        return 0;
    }
    /* The hash covers the stored bytes: the decompressor only ever sees
     * input already proven intact. */
    if (XXH3_64bits(p, b->h.stored_len) != b->h.payload_hash) {
        *why = "bad block payload hash";
        return 0;
    }
    b->raw = p;
    if (b->h.codec == CODEC_LZ4) {
        scratch->len = 0;
        if (mf_buf_reserve(scratch, b->h.raw_len) != 0)
            return oom(err, "decompressing a block");
        int n = LZ4_decompress_safe((const char *)p, (char *)scratch->data,
                                    (int)b->h.stored_len, (int)b->h.raw_len);
        if (n < 0 || (uint32_t)n != b->h.raw_len) {
            *why = "block payload does not decompress";
            return 0;
        }
        b->raw = scratch->data;
    }
    /* The framing must account for every byte and record. */
    size_t pos = 0;
    for (uint32_t i = 0; i < b->h.count; i++) {
        if (b->h.raw_len - pos < 4) {
            *why = "bad record framing";
            return 0;
        }
        uint32_t len = mf_load_u32le(b->raw + pos);
        if (len == 0 || len > b->h.raw_len - pos - 4) {
            *why = "bad record framing";
            return 0;
        }
        pos += 4 + (size_t)len;
    }
    *why = pos == b->h.raw_len ? NULL : "bad record framing";
    return 0;
}

/* Whether a valid block of this segment starts anywhere after `off`.  A
 * damaged block header does not say where the next block is, so this
 * looks for the block magic at every byte. */
static int valid_block_after(reader *rd, uint64_t off, uint64_t salt, mf_buf *scratch,
                             uint64_t *found, bool *any, mf_error *err)
{
    *any = false;
    uint64_t pos = off + 1;
    while (pos + BLK_HDR <= rd->size) {
        const uint8_t *p;
        size_t avail;
        int rc = rd_peek(rd, pos, BLK_HDR, &p, &avail, err);
        if (rc)
            return rc;
        const uint8_t *m = memmem(p, avail, BLK_MAGIC, 4);
        if (!m) {
            pos += avail > 3 ? avail - 3 : 1;
            continue;
        }
        uint64_t cand = pos + (uint64_t)(m - p);
        blk b;
        const char *why;
        rc = blk_read(rd, cand, salt, scratch, &b, &why, err);
        if (rc)
            return rc;
        if (!why) {
            *any = true;
            *found = cand;
            return 0;
        }
        pos = cand + 1;
    }
    return 0;
}

/* State of one mf_wal_open. */
typedef struct recovery {
    mf_wal *w;
    mf_lsn after;
    mf_wal_replay_fn replay;
    void *arg;
    mf_buf scratch; /* decompressed payloads */
} recovery;

/* Whether the end of the log at `off` is one a crash can leave: an intact
 * block of an older log (stale bytes), or damage that looks like a write
 * a crash cut short rather than changed bytes.  A crash can only tear the
 * flush it interrupted, which was never synced and so never acknowledged:
 * its bytes are missing (the file ends inside the block) or read as zeros
 * (sectors the file covers that never reached the disk).  A block that is
 * whole and has no zero sector was written in full, and possibly synced
 * and acknowledged: if it fails its hash, its bytes changed, and cutting
 * it off would silently drop acknowledged writes.  A zero sector inside a
 * written block is implausible: a payload with 512 zero bytes compresses,
 * and is stored LZ4. */
static int looks_torn(reader *rd, uint64_t off, const char *why, bool *torn, mf_error *err)
{
    *torn = strncmp(why, "short", 5) == 0 || strcmp(why, WHY_OTHER_LOG) == 0 ||
            strcmp(why, WHY_OUT_OF_SEQUENCE) == 0;
    for (uint64_t s = (off + TORN_SECTOR - 1) / TORN_SECTOR * TORN_SECTOR;
         !*torn && s + TORN_SECTOR <= rd->size; s += TORN_SECTOR) {
        const uint8_t *p;
        size_t avail;
        int rc = rd_peek(rd, s, TORN_SECTOR, &p, &avail, err);
        if (rc)
            return rc;
        size_t i = 0;
        while (i < TORN_SECTOR && p[i] == 0)
            i++;
        *torn = i == TORN_SECTOR;
    }
    return 0;
}

/* The valid log ends at `off` for reason `why`.  A torn tail (the last
 * segment, nothing valid after it, and damage a crash can leave: see
 * looks_torn) is cut off; anything else is corruption. */
static int tail_or_corrupt(recovery *r, reader *rd, uint64_t off, uint64_t salt,
                           const char *why, bool is_last, mf_lsn lsn, mf_error *err)
{
    uint64_t next = 0;
    bool any = false;
    int rc = valid_block_after(rd, off, salt, &r->scratch, &next, &any, err);
    if (rc)
        return rc;
    if (any || !is_last)
        return mf_error_set(err, MF_DataCorruption,
                            "write-ahead log is corrupt: %s in %s at offset %" PRIu64
                            " (LSN %" PRIu64 " on)%s",
                            why, rd->path, off, lsn,
                            any ? ", and valid blocks follow it"
                                : ", in a segment that is not the last");
    bool torn;
    rc = looks_torn(rd, off, why, &torn, err);
    if (rc)
        return rc;
    if (!torn)
        return mf_error_set(err, MF_DataCorruption,
                            "write-ahead log is corrupt: %s in %s at offset %" PRIu64
                            " (LSN %" PRIu64 " on), in the last block, which is whole: "
                            "changed bytes, not a write cut short by a crash",
                            why, rd->path, off, lsn);
    mf_log(MF_LOG_WARNING, "STORAGE", LOGID_TORN_TAIL, "wal",
           "write-ahead log %s: torn tail at offset %" PRIu64 " (%s): %" PRIu64
           " bytes removed; the log ends at LSN %" PRIu64,
           rd->path, off, why, rd->size - off, lsn - 1);
    rc = mf_os_truncate(rd->f, off, "wal.truncate", err);
    if (rc)
        return rc;
    rd->size = off;
    return mf_os_sync(rd->f, false, "wal.sync", err);
}

/* Replay the records of a verified block that come after r->after. */
static int replay_block(recovery *r, const blk *b, mf_error *err)
{
    size_t pos = 0;
    for (uint32_t i = 0; i < b->h.count; i++) {
        uint32_t len = mf_load_u32le(b->raw + pos);
        mf_lsn lsn = b->h.first + i;
        if (lsn > r->after && r->replay) {
            int rc = r->replay(r->arg, lsn, b->raw + pos + 4, len, err);
            if (rc)
                return rc;
        }
        pos += 4 + (size_t)len;
    }
    return 0;
}

/* Open segment `first` and check its header.  On success `*f`, `*size` and
 * `*salt` describe it, and `*valid` says whether the header is good. */
static int seg_open(mf_wal *w, mf_lsn first, char *path, size_t cap, mf_file **f,
                    uint64_t *size, uint64_t *salt, bool *valid, mf_error *err)
{
    uint8_t h[SEG_HDR];
    size_t got = 0;
    int rc = seg_path(w->dir, first, path, cap, err);
    if (rc)
        return rc;
    rc = mf_os_open(path, 0, f, w->faults, "wal.open", err);
    if (rc)
        return rc;
    rc = mf_os_size(*f, size, err);
    if (rc == 0)
        rc = mf_os_pread(*f, h, SEG_HDR, 0, &got, "wal.read", err);
    if (rc) {
        mf_os_close(*f);
        *f = NULL;
        return rc;
    }
    *valid = got == SEG_HDR && seg_header_valid(h, first);
    *salt = got == SEG_HDR ? get_u64(h + 16) : 0;
    return 0;
}

/* The segment header's salt is not covered by any hash.  If the first
 * block is intact under its own salt and has the segment's first LSN, the
 * header is what is damaged: corruption, not a torn tail (else one flipped
 * bit would silently cut a whole segment off).  A stale block of an older
 * log at offset 32 with exactly this LSN is not a plausible alternative. */
static int check_header_salt(recovery *r, reader *rd, uint64_t salt, mf_lsn first,
                             mf_error *err)
{
    const uint8_t *p;
    size_t avail;
    blk b;
    const char *why;
    int rc = rd_peek(rd, SEG_HDR, BLK_HDR, &p, &avail, err);
    if (rc || avail < BLK_HDR)
        return rc;
    uint64_t other = get_u64(p + 8);
    if (other == salt)
        return 0;
    rc = blk_read(rd, SEG_HDR, other, &r->scratch, &b, &why, err);
    if (rc == 0 && !why && b.h.first == first)
        rc = mf_error_set(err, MF_DataCorruption,
                          "write-ahead log is corrupt: bad segment header (its salt is not "
                          "its blocks') in %s at offset 0",
                          rd->path);
    return rc;
}

/* Read one segment: verify every block, replay what follows r->after, and
 * at the end of the last segment cut a torn tail.  `*lsn` is the LSN its
 * first block must have; on return, one past its last record.  The last
 * segment stays open as the one being written. */
static int seg_recover(recovery *r, mf_lsn first, bool is_last, mf_lsn *lsn, mf_error *err)
{
    char path[PATH_MAX];
    reader rd = {0};
    uint64_t salt;
    bool valid;
    blk b;
    int rc = seg_open(r->w, first, path, sizeof path, &rd.f, &rd.size, &salt, &valid, err);
    if (rc)
        return rc;
    rd.path = path;
    if (!valid) {
        rc = mf_error_set(err, MF_DataCorruption,
                          "write-ahead log is corrupt: bad segment header in %s at offset 0",
                          path);
        goto fail;
    }
    uint64_t off = SEG_HDR;
    *lsn = first;
    while (off < rd.size) {
        const char *why;
        rc = blk_read(&rd, off, salt, &r->scratch, &b, &why, err);
        if (rc)
            goto fail;
        if (!why && b.h.first != *lsn)
            why = WHY_OUT_OF_SEQUENCE;
        if (why && off == SEG_HDR && (rc = check_header_salt(r, &rd, salt, first, err)) != 0)
            goto fail;
        if (why) {
            rc = tail_or_corrupt(r, &rd, off, salt, why, is_last, *lsn, err);
            if (rc)
                goto fail;
            break;
        }
        rc = replay_block(r, &b, err);
        if (rc)
            goto fail;
        *lsn += b.h.count;
        off += BLK_HDR + (uint64_t)b.h.stored_len;
    }
    mf_buf_free(&rd.win);
    if (is_last) {
        r->w->seg = rd.f;
        r->w->seg_size = off;
        r->w->seg_salt = salt;
    } else {
        mf_os_close(rd.f);
    }
    return 0;
fail:
    mf_buf_free(&rd.win);
    mf_os_close(rd.f);
    return rc;
}

/* ------------------------------------------------------------- open */

static void list_one(const char *name, void *arg)
{
    mf_wal *w = arg;
    mf_lsn lsn = seg_name_lsn(name);
    if (lsn == 0)
        return; /* not a segment (the data file, the lock file, ...) */
    if (segs_reserve(w) != 0) {
        w->failed = true; /* not yet shared: list_segments reports it */
        return;
    }
    w->segs[w->nsegs++] = lsn;
}

static int cmp_lsn(const void *a, const void *b)
{
    mf_lsn x = *(const mf_lsn *)a, y = *(const mf_lsn *)b;
    return x < y ? -1 : x > y;
}

/* Fill w->segs with the segment files of w->dir, ascending. */
static int list_segments(mf_wal *w, mf_error *err)
{
    int rc = mf_os_list_dir(w->dir, list_one, w, err);
    if (rc)
        return rc;
    if (w->failed) {
        w->failed = false;
        return oom(err, "listing segments");
    }
    if (w->nsegs > 1)
        qsort(w->segs, w->nsegs, sizeof *w->segs, cmp_lsn);
    return 0;
}

/* A last segment with a bad header and no room for a block was cut short
 * while it was being created (see top): it holds nothing that was ever
 * acknowledged.  Delete it, so the one before is the last again. */
static int drop_blank_last(mf_wal *w, mf_error *err)
{
    char path[PATH_MAX];
    mf_file *f = NULL;
    uint64_t size, salt;
    bool valid;
    int rc = seg_open(w, w->segs[w->nsegs - 1], path, sizeof path, &f, &size, &salt, &valid,
                      err);
    if (rc)
        return rc;
    mf_os_close(f);
    if (valid || size > SEG_HDR)
        return 0;
    mf_log(MF_LOG_WARNING, "STORAGE", LOGID_TORN_SEGMENT, "wal",
           "write-ahead log segment %s was cut short while being created (%" PRIu64
           " bytes); removing it",
           path, size);
    rc = mf_os_unlink(path, w->faults, "wal.unlink", err);
    if (rc == 0)
        rc = mf_os_sync_dir(w->dir, w->faults, "wal.dir", err);
    if (rc == 0)
        w->nsegs--;
    return rc;
}

/* A segment every record of which the checkpoint covers is not read; its
 * header is still checked, and a bad one only logged (it is garbage that
 * drop_through will delete, and must not keep the database closed). */
static int check_old_segment(mf_wal *w, mf_lsn first, mf_error *err)
{
    char path[PATH_MAX];
    mf_file *f = NULL;
    uint64_t size, salt;
    bool valid;
    int rc = seg_open(w, first, path, sizeof path, &f, &size, &salt, &valid, err);
    if (rc)
        return rc;
    mf_os_close(f);
    if (!valid)
        mf_log(MF_LOG_WARNING, "STORAGE", LOGID_BAD_OLD_SEGMENT, "wal",
               "write-ahead log segment %s has a bad header; it holds only records "
               "the checkpoint covers, so it is skipped",
               path);
    return 0;
}

/* Walk the segments in LSN order, checking that no record after r->after
 * is missing, and replaying.  `*next` gets one past the last record. */
static int recover_segments(recovery *r, mf_lsn *next, mf_error *err)
{
    mf_wal *w = r->w;
    bool known = false; /* whether *next is the end of a segment read */
    for (size_t i = 0; i < w->nsegs; i++) {
        mf_lsn first = w->segs[i];
        bool is_last = i + 1 == w->nsegs;
        int rc;
        if (!is_last && w->segs[i + 1] <= r->after + 1) {
            rc = check_old_segment(w, first, err);
            if (rc)
                return rc;
            continue;
        }
        if (known && first != *next && (first < *next || first - 1 > r->after))
            return mf_error_set(err, MF_DataCorruption,
                                "write-ahead log in %s is corrupt: segment wal.%016" PRIx64
                                " starts at LSN %" PRIu64
                                " but the segment before it ends at LSN %" PRIu64
                                " (a segment is missing or damaged)",
                                w->dir, first, first, *next - 1);
        rc = seg_recover(r, first, is_last, next, err);
        if (rc)
            return rc;
        known = true;
    }
    return 0;
}

/* Open-time setup of a new segment: created, synced, named durably. */
static int open_new_segment(mf_wal *w, mf_lsn first, mf_error *err)
{
    mf_file *f = NULL;
    uint64_t salt;
    if (segs_reserve(w) != 0)
        return oom(err, "creating a segment");
    int rc = seg_create(w, first, &f, &salt, err);
    if (rc)
        return rc;
    rc = mf_os_sync(f, true, "wal.sync", err);
    if (rc == 0)
        rc = mf_os_sync_dir(w->dir, w->faults, "wal.dir", err);
    if (rc) {
        mf_os_close(f);
        return rc;
    }
    mf_os_close(w->seg);
    w->seg = f;
    w->seg_size = SEG_HDR;
    w->seg_salt = salt;
    w->segs[w->nsegs++] = first;
    return 0;
}

static void wal_free(mf_wal *w)
{
    if (!w)
        return;
    mf_os_close(w->seg);
    mf_buf_free(&w->pending);
    mf_buf_free(&w->spare);
    mf_buf_free(&w->out);
    free(w->segs);
    free(w->dir);
    pthread_cond_destroy(&w->flushed);
    pthread_mutex_destroy(&w->drop_mu);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static mf_wal *wal_new(const char *dir, const mf_wal_options *opt)
{
    mf_wal *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->dir = strdup(dir);
    if (!w->dir) {
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->drop_mu, NULL);
    pthread_cond_init(&w->flushed, NULL);
    w->segment_target = opt && opt->segment_target ? opt->segment_target
                                                   : DEFAULT_SEGMENT_TARGET;
    w->block_target = opt && opt->block_target ? opt->block_target : DEFAULT_BLOCK_TARGET;
    w->faults = opt ? opt->faults : NULL;
    if (w->block_target > RAW_MAX)
        w->block_target = RAW_MAX;
    return w;
}

int mf_wal_open(const char *dir, const mf_wal_options *opt, mf_lsn after_lsn,
                mf_wal_replay_fn replay, void *arg, mf_wal **out, mf_error *err)
{
    int rc;
    recovery r = {.after = after_lsn, .replay = replay, .arg = arg};
    *out = NULL;
    if (after_lsn >= UINT64_MAX / 2)
        return mf_error_set(err, MF_BadValue, "impossible checkpoint LSN %" PRIu64, after_lsn);
    mf_wal *w = r.w = wal_new(dir, opt);
    if (!w)
        return oom(err, "opening");
    rc = list_segments(w, err);
    if (rc)
        goto fail;
    /* Segments entirely <= after_lsn may be gone; one more is a gap. */
    if (w->nsegs > 0 && w->segs[0] > after_lsn + 1) {
        rc = mf_error_set(err, MF_DataCorruption,
                          "write-ahead log in %s is missing LSNs %" PRIu64 "..%" PRIu64
                          ": its first segment is wal.%016" PRIx64,
                          dir, after_lsn + 1, w->segs[0] - 1, w->segs[0]);
        goto fail;
    }
    if (w->nsegs > 0 && (rc = drop_blank_last(w, err)) != 0)
        goto fail;
    mf_lsn next = after_lsn + 1;
    rc = recover_segments(&r, &next, err);
    if (rc)
        goto fail;
    if (w->nsegs == 0 || next < after_lsn + 1) {
        /* No log yet, or the checkpoint is past its end: records from
         * after_lsn + 1 on go to a new segment, keeping I5. */
        next = after_lsn + 1;
        rc = open_new_segment(w, next, err);
    } else {
        /* What was replayed may still be only in the page cache (a crash
         * of the process, not the machine): make it durable before
         * anything is built on it. */
        rc = mf_os_sync(w->seg, true, "wal.sync", err);
    }
    if (rc)
        goto fail;
    w->next_lsn = w->pending_first = next;
    w->durable = next - 1;
    /* Blocks past the end (a reservation before a crash) are not counted
     * on: the first reservation asks for them again. */
    w->seg_end = w->alloc_end = w->seg_size;
    mf_buf_free(&r.scratch);
    *out = w;
    return 0;
fail:
    mf_buf_free(&r.scratch);
    wal_free(w);
    return rc;
}

/* ---------------------------------------------------------- the rest */

mf_lsn mf_wal_last_lsn(mf_wal *w)
{
    pthread_mutex_lock(&w->mu);
    mf_lsn v = w->next_lsn - 1;
    pthread_mutex_unlock(&w->mu);
    return v;
}

mf_lsn mf_wal_durable_lsn(mf_wal *w)
{
    pthread_mutex_lock(&w->mu);
    mf_lsn v = w->durable;
    pthread_mutex_unlock(&w->mu);
    return v;
}

bool mf_wal_is_failed(mf_wal *w)
{
    pthread_mutex_lock(&w->mu);
    bool v = w->failed;
    pthread_mutex_unlock(&w->mu);
    return v;
}

int mf_wal_drop_through(mf_wal *w, mf_lsn lsn, mf_error *err)
{
    char path[PATH_MAX];
    int rc = 0;
    size_t ndrop = 0, done = 0;
    mf_lsn *firsts = NULL;
    pthread_mutex_lock(&w->drop_mu);
    pthread_mutex_lock(&w->mu);
    /* A segment's last LSN is the next one's first minus one; the last
     * segment is being written and is never dropped. */
    while (ndrop + 1 < w->nsegs && w->segs[ndrop + 1] - 1 <= lsn)
        ndrop++;
    if (ndrop > 0 && (firsts = malloc(ndrop * sizeof *firsts)) == NULL)
        rc = oom(err, "dropping segments");
    else if (ndrop > 0)
        memcpy(firsts, w->segs, ndrop * sizeof *firsts);
    pthread_mutex_unlock(&w->mu);
    if (rc || ndrop == 0)
        goto out;
    /* Unlink without the mutex (appends go on); drop_mu keeps a second
     * drop_through from racing this one. */
    for (; done < ndrop; done++) {
        rc = seg_path(w->dir, firsts[done], path, sizeof path, err);
        if (rc == 0)
            rc = mf_os_unlink(path, w->faults, "wal.unlink", err);
        if (rc)
            break;
    }
    if (done > 0) {
        int rc2 = mf_os_sync_dir(w->dir, w->faults, "wal.dir", rc ? NULL : err);
        if (rc == 0)
            rc = rc2;
        pthread_mutex_lock(&w->mu);
        memmove(w->segs, w->segs + done, (w->nsegs - done) * sizeof *w->segs);
        w->nsegs -= done;
        pthread_mutex_unlock(&w->mu);
    }
out:
    pthread_mutex_unlock(&w->drop_mu);
    free(firsts);
    return rc;
}

int mf_wal_close(mf_wal *w, mf_error *err)
{
    if (!w)
        return 0;
    pthread_mutex_lock(&w->mu);
    mf_lsn last = w->next_lsn - 1;
    bool pending = last > w->durable;
    pthread_mutex_unlock(&w->mu);
    int rc = pending ? mf_wal_commit(w, last, err) : 0;
    wal_free(w);
    return rc;
}

void mf_wal_abandon(mf_wal *w)
{
    wal_free(w);
}

void mf_wal_get_stats(mf_wal *w, mf_wal_stats *out)
{
    pthread_mutex_lock(&w->mu);
    *out = w->stats;
    out->segments = w->nsegs; /* the segment files the log has now */
    pthread_mutex_unlock(&w->mu);
}
