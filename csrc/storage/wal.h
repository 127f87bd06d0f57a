/*
 * wal.h -- the write-ahead log: opaque redo records, grouped into hashed,
 * optionally LZ4-compressed blocks, made durable by group commit.
 *
 * The log knows nothing of what a record means; the engine gives it bytes
 * and gets them back, in order, at replay.  Each record has a log sequence
 * number (LSN): 1 for the first record ever written, then +1 per record.
 *
 * Files.  The log is a series of segment files in one directory, named
 * "wal.<first LSN as 16 lowercase hex digits>".  A segment starts with a
 * 32-byte header and holds whole blocks; a new segment starts when the
 * current one passes its size target.  Segments made obsolete by
 * checkpoints are deleted with mf_wal_drop_through().
 *
 *   Segment header (32 bytes, little-endian):
 *   OFFSET SIZE DESCRIPTION
 *   0      8    magic "MFWALSEG"
 *   8      4    format version (1)
 *   12     4    reserved (0)
 *   16     8    salt: random, chosen when the segment is created
 *   24     8    first LSN of the segment
 *
 *   Block header (48 bytes), then `stored_len` payload bytes:
 *   OFFSET SIZE DESCRIPTION
 *   0      4    magic "MFWB"
 *   4      1    codec: 0 raw, 1 LZ4 (block format)
 *   5      3    reserved (0)
 *   8      8    salt (the segment's)
 *   16     8    first LSN in the block
 *   24     4    record count
 *   28     4    raw_len: payload length before compression
 *   32     4    stored_len: payload length as stored
 *   36     4    low 32 bits of XXH3-64 of bytes [0, 36) of this header
 *   40     8    XXH3-64 of the stored payload
 *
 *   Raw payload: records back to back, each a 4-byte length and its bytes.
 *
 * The payload hash covers the stored (compressed) bytes, so the
 * decompressor only ever sees input already proven intact.
 *
 * Recovery rules (mf_wal_open).  Blocks are read in order.  A block that is
 * short, has a bad header hash, a bad magic, the wrong salt, an LSN that does
 * not follow the previous block's, an impossible length or a bad payload
 * hash ends the valid log.  If nothing valid follows it in the same segment
 * and it is in the last segment, it is a torn tail: the segment is truncated
 * there and the log opens.  Otherwise it is corruption: MF_DataCorruption
 * naming the file and the byte offset.  Replaying the same log twice gives
 * the same records.
 *
 * Group commit.  mf_wal_append() only buffers.  mf_wal_commit(lsn) returns
 * once a sync covers `lsn`: the first waiter to find no flush in progress
 * becomes the leader, takes everything buffered, writes it as one or more
 * blocks and fdatasyncs once for every waiter; the others wait for it.  If
 * a write or sync fails, no record of that group is reported committed, the
 * log becomes failed, and every later append or commit fails until the
 * log is reopened (a failed fsync may have dropped the pages: retrying and
 * then reporting success would be a lie).
 *
 * Threads.  Every function may be called from any thread, except that
 * mf_wal_close / mf_wal_abandon must be the last call.
 */
#ifndef MF_STORAGE_WAL_H
#define MF_STORAGE_WAL_H

#include "../util/util.h"
#include "os.h"

typedef uint64_t mf_lsn;
typedef struct mf_wal mf_wal;

/* Largest record the log accepts (a 16 MiB document plus its framing). */
#define MF_WAL_MAX_RECORD (48u * 1024 * 1024)

typedef struct mf_wal_options {
    uint64_t segment_target; /* start a new segment past this size; 0: 64 MiB */
    uint32_t block_target;   /* split a flush into blocks of about this raw
                                size; 0: 1 MiB (a larger record gets its own) */
    mf_os_faults *faults;    /* the fault table its files use (os.h), which
                                must outlive the log; NULL: none */
} mf_wal_options;

/* Called by mf_wal_open for each record with LSN > after_lsn, in order.  A
 * non-zero return stops the open and is returned from it. */
typedef int (*mf_wal_replay_fn)(void *arg, mf_lsn lsn, const uint8_t *rec, size_t len,
                                mf_error *err);

/* Open the log in `dir` (creating the first segment if there is none),
 * recover it as the rules above say, and replay every record after
 * `after_lsn`.  Errors: MF_DataCorruption (interior damage, or a segment
 * missing between after_lsn and the end), os errors, or the replay
 * callback's. */
int mf_wal_open(const char *dir, const mf_wal_options *opt, mf_lsn after_lsn,
                mf_wal_replay_fn replay, void *arg, mf_wal **out, mf_error *err);

/* Append one record of `len` bytes (1 .. MF_WAL_MAX_RECORD); `*lsn` gets its
 * LSN.  Buffers only: the record is durable after mf_wal_commit(*lsn).
 * Fails if the log is failed. */
int mf_wal_append(mf_wal *w, const void *rec, size_t len, mf_lsn *lsn, mf_error *err);

/* Space for a record of `len` bytes that is about to be appended: gives
 * the segment being written the disk blocks the record can take, so that
 * neither the append nor the flush that makes it durable can fail for want
 * of space.  The next mf_wal_append of that length takes the reservation
 * over; mf_wal_unreserve gives back one that will not be used.  Errors:
 * MF_OutOfDiskSpace (nothing reserved; the log is not failed), the failed
 * log's error, os errors. */
int mf_wal_reserve(mf_wal *w, size_t len, mf_error *err);
void mf_wal_unreserve(mf_wal *w, size_t len);

/* Return once every record up to `lsn` is durable (see group commit).  An
 * error means the record is not known to be durable and the log is failed. */
int mf_wal_commit(mf_wal *w, mf_lsn lsn, mf_error *err);

/* The last LSN appended, and the last one known durable. */
mf_lsn mf_wal_last_lsn(mf_wal *w);
mf_lsn mf_wal_durable_lsn(mf_wal *w);

/* Whether a write or sync has failed (the log then refuses everything). */
bool mf_wal_is_failed(mf_wal *w);

/* Delete every segment all of whose records have LSN <= `lsn` (never the
 * segment being written).  Called after a checkpoint makes them obsolete. */
int mf_wal_drop_through(mf_wal *w, mf_lsn lsn, mf_error *err);

/* Commit whatever is buffered, then close. */
int mf_wal_close(mf_wal *w, mf_error *err);

/* Close without writing or syncing anything buffered: what a crash leaves.
 * For tests. */
void mf_wal_abandon(mf_wal *w);

/* Counters, for tests and benchmarks. */
typedef struct mf_wal_stats {
    uint64_t appends, commits, syncs, blocks, bytes_raw, bytes_stored, segments;
} mf_wal_stats;
void mf_wal_get_stats(mf_wal *w, mf_wal_stats *out);

#endif /* MF_STORAGE_WAL_H */
