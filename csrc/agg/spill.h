/*
 * spill.h -- a document buffer that moves its documents to a temporary
 * file when they outgrow a memory budget, and reads them back by position
 * ($setWindowFields' partition, as mongod's SpillableCache).
 *
 * Documents are numbered 0..n-1 in the order added.  Those added since
 * the last spill are in memory; mfi_docbuf_spill appends them to an
 * unnamed file in `tmpdir` (created on first use and unlinked at once, so
 * nothing outlives the buffer) and keeps only their offsets and lengths.
 * Reading a spilled document goes through a small direct-mapped cache, so
 * a window sliding over a partition rereads little from the file.
 */
#ifndef MF_AGG_SPILL_H
#define MF_AGG_SPILL_H

#include "pipeline_int.h"

#define MFI_DOCBUF_CACHE 64

typedef struct mfi_docbuf_slot {
    size_t idx;              /* the document held (valid when doc != NULL) */
    bson_t *doc;
} mfi_docbuf_slot;

typedef struct mfi_docbuf {
    const char *tmpdir;      /* borrowed; NULL: $TMPDIR or /tmp */
    size_t n, cap;
    bson_t **mem;            /* mem[i]: the document in memory, NULL once spilled */
    uint64_t *off;           /* off[i], len[i]: where a spilled document is */
    uint32_t *len;
    size_t mem_bytes;        /* counted for the in-memory documents */
    size_t nspilled;         /* documents written to the file */
    int fd;                  /* -1 until the first spill */
    uint64_t file_end;
    mfi_docbuf_slot cache[MFI_DOCBUF_CACHE];
} mfi_docbuf;

/* An empty buffer spilling to `tmpdir` (borrowed: it must outlive `b`). */
void mfi_docbuf_init(mfi_docbuf *b, const char *tmpdir);

/* Append `doc` (a heap bson_t, owned by the buffer from now on, freed on
 * error too).  It counts doc->len + 64 bytes against mem_bytes.  Errors:
 * InternalError on out of memory. */
int mfi_docbuf_add(mfi_docbuf *b, bson_t *doc, mf_error *err);

/* Write every in-memory document to the file and free it (mem_bytes
 * becomes 0).  Errors: OutOfDiskSpace (14031), InternalError. */
int mfi_docbuf_spill(mfi_docbuf *b, mf_error *err);

/* Document i (< n) into *out: borrowed, valid until the next
 * mfi_docbuf_get, mfi_docbuf_clear or mfi_docbuf_free.  Errors: an I/O
 * error reading the file, InternalError. */
int mfi_docbuf_get(mfi_docbuf *b, size_t i, const bson_t **out, mf_error *err);

/* Drop every document (the file is truncated and kept for reuse). */
void mfi_docbuf_clear(mfi_docbuf *b);

void mfi_docbuf_free(mfi_docbuf *b);

#endif
