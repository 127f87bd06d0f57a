/*
 * os.h -- the storage engine's only door to the operating system.
 *
 * Every file operation the engine makes goes through here, for two reasons:
 *
 *  1. Fault injection.  Each call names its site ("wal.write",
 *     "pager.grow", ...).  A test arms a fault for a site prefix in a fault
 *     table (mf_os_fault_set): a call against that table then fails with
 *     EIO or ENOSPC, or writes only part of its buffer and fails, once or
 *     every time.  Each engine has its own table (engine.h), so a fault
 *     armed on one engine never fires in another of the same process.
 *
 *  2. Simulated power loss.  With mf_os_sim_enable(true), every file opened
 *     through here keeps a copy of its content as of its last successful
 *     sync.  mf_os_sim_crash() puts every such file back to that content:
 *     every write not yet synced is gone, as after a power cut.  (A mapped
 *     file's pages count as written when they are stored to; a sync of the
 *     file makes them durable, exactly as msync/fdatasync do.)  Unlike a
 *     fault, the simulation is the process's: it tracks files by path, so
 *     engines over different directories do not mix.
 *
 * Errors are reported as mf_error with MF_OutOfDiskSpace for ENOSPC and
 * MF_InternalError otherwise, the message naming the site, the path and the
 * system error.  None of these functions retries a failed sync: after a
 * failed fsync the kernel may have dropped the dirty pages, so the caller
 * must treat the data as lost (DESIGN.md section 3, group commit).
 */
#ifndef MF_STORAGE_OS_H
#define MF_STORAGE_OS_H

#include "../util/util.h"

typedef struct mf_file mf_file;

enum {
    MF_OS_CREATE = 1 << 0, /* create if missing */
    MF_OS_EXCL = 1 << 1,   /* with CREATE: fail if it exists */
};

typedef struct mf_os_faults mf_os_faults; /* a fault table: see below */

/* Open `path` read-write.  The file's calls check `faults` (NULL: no
 * faults), which must outlive the file.  Returns 0 and `*out`, or an
 * error. */
int mf_os_open(const char *path, int flags, mf_file **out, mf_os_faults *faults,
               const char *site, mf_error *err);

/* Close; never syncs.  NULL is fine. */
void mf_os_close(mf_file *f);

const char *mf_os_path(const mf_file *f);

/* Read up to `n` bytes at `off`.  `*got` < n only at end of file. */
int mf_os_pread(mf_file *f, void *buf, size_t n, uint64_t off, size_t *got,
                const char *site, mf_error *err);

/* Write all `n` bytes at `off`, or fail (a short write is a failure). */
int mf_os_pwrite(mf_file *f, const void *buf, size_t n, uint64_t off, const char *site,
                 mf_error *err);

/* fdatasync (data_only) or fsync.  A failure means the unsynced writes may
 * be lost; do not retry and report success. */
int mf_os_sync(mf_file *f, bool data_only, const char *site, mf_error *err);

int mf_os_size(mf_file *f, uint64_t *size, mf_error *err);
int mf_os_truncate(mf_file *f, uint64_t size, const char *site, mf_error *err);

/* Give [off, off + len) of `f` real disk blocks (fallocate), so that later
 * writes there -- including stores through a mapping, which would otherwise
 * die of SIGBUS on a full file system -- cannot fail for want of space.
 * With `keep_size` the file's length does not change (blocks past the end
 * are reserved for appends); without it the file grows to off + len if it
 * is shorter.  On a file system without fallocate the length is set as
 * asked and nothing is reserved.  Errors: MF_OutOfDiskSpace (ENOSPC, the
 * file's length unchanged), other os errors. */
int mf_os_allocate(mf_file *f, uint64_t off, uint64_t len, bool keep_size, const char *site,
                   mf_error *err);

/* Reserve `len` bytes of address space (no memory, no access) so a file
 * mapped at its start can grow without the base ever moving.  The base is
 * aligned to MF_OS_HUGE_BYTES, so that each aligned 2 MiB of the file can
 * be mapped by one page-table entry (see mf_os_advise_huge). */
#define MF_OS_HUGE_BYTES ((uint64_t)2 << 20)
int mf_os_reserve(size_t len, void **base, mf_error *err);
void mf_os_unreserve(void *base, size_t len);

/* Map [off, off + len) of `f` shared and writable at `base + off`, inside a
 * range from mf_os_reserve.  `off` and `len` are multiples of the system
 * page size. */
int mf_os_map(mf_file *f, void *base, uint64_t off, uint64_t len, const char *site,
              mf_error *err);

/* Advise the kernel to back [p, p + len) of a file mapping with 2 MiB
 * page-cache folios mapped by one entry each (`on`), or never to.  Advice
 * only: false when the kernel has no transparent huge pages (or refuses),
 * and nothing else changes. */
bool mf_os_advise_huge(void *p, uint64_t len, bool on);

/* The machine's physical memory in bytes; 0 if unknown. */
uint64_t mf_os_physical_memory(void);

/* These name a path, not a file: each checks the fault table it is given
 * (NULL: none). */
int mf_os_unlink(const char *path, mf_os_faults *faults, const char *site, mf_error *err);
int mf_os_rename(const char *from, const char *to, mf_os_faults *faults, const char *site,
                 mf_error *err);
/* fsync a directory, making creations, renames and unlinks in it durable. */
int mf_os_sync_dir(const char *dir, mf_os_faults *faults, const char *site, mf_error *err);

/* Call `fn(name, arg)` for each entry of `dir` (not "." or ".."). */
int mf_os_list_dir(const char *dir, void (*fn)(const char *name, void *arg), void *arg,
                   mf_error *err);

/* ---------------------------------------------------------- fault injection */

typedef enum {
    MF_FAULT_EIO,    /* the call fails with EIO */
    MF_FAULT_ENOSPC, /* the call fails with ENOSPC */
    MF_FAULT_SHORT,  /* a write stores half its bytes, then fails with EIO */
    MF_FAULT_TORN,   /* power fails during a write: it stores its first half,
                        rounded down to 512-byte sectors, then fails with EIO;
                        under simulated power loss those sectors survive the
                        crash (any other call fails with EIO) */
} mf_fault_kind;

/* A fault table: the fault armed for the calls made against it -- those of
 * the files opened with it, and the path calls given it.  An engine opens
 * all its files against one table (engine.h, mf_engine_faults), so the
 * table is the engine's: arming it fails that engine's calls and no
 * other's. */

/* A new table, disarmed; NULL when out of memory. */
mf_os_faults *mf_os_faults_new(void);
/* Free `t` (NULL is fine).  No file opened with it may be used after. */
void mf_os_faults_free(mf_os_faults *t);

/* Arm a fault in `t`: calls whose site starts with `site_prefix` pass
 * `skip` times, then fail `count` times (-1: forever).  One fault at a time
 * per table; arming replaces the previous one.  Thread-safe. */
void mf_os_fault_set(mf_os_faults *t, const char *site_prefix, mf_fault_kind kind, int skip,
                     int count);
/* Disarm `t`, and start the counts below again from 0. */
void mf_os_fault_clear(mf_os_faults *t);
/* How many calls the armed fault has failed so far. */
int mf_os_fault_hits(mf_os_faults *t);
/* How many calls have matched the armed fault's prefix since it was armed,
 * passed or failed: with skip = INT_MAX this counts the crash points of a
 * workload. */
int mf_os_fault_calls(mf_os_faults *t);
/* Bytes a MF_FAULT_TORN fault let reach the file (0 when it hit a call that
 * is not a write, or a write of one sector or less). */
size_t mf_os_fault_torn_bytes(mf_os_faults *t);

/* ------------------------------------------------------ simulated power loss */

/* Turn tracking on or off for files opened from now on.  Turning it off
 * forgets every tracked file. */
void mf_os_sim_enable(bool on);
/* Put every tracked file back to its content at its last sync (a file never
 * synced since it was created becomes empty).  Call it after abandoning the
 * engine that used the files, before reopening. */
int mf_os_sim_crash(mf_error *err);

#endif /* MF_STORAGE_OS_H */
