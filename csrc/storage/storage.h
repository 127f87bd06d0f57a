/*
 * storage.h -- the storage layer's contract, and where to read it.
 *
 * The layer above (command/) includes this header.  Each part has its own
 * header, which is its manual -- formats, rules, errors, and how long a
 * returned pointer stays valid:
 *
 *   engine.h  open/close/recovery, writes (one log record each), group
 *             commit, checkpoints, the catalog of collections and indexes,
 *             the lock order catalog -> collection -> log
 *   btree.h   B+trees: get/put/delete, cursors both ways, bulk build
 *   wal.h     the write-ahead log's format and recovery rules
 *   pager.h   pages, generations, checksums, the free-space rule
 *   os.h      files, mappings, fault injection, simulated power loss
 *
 * This header itself adds the data directory's lock.  docs/storage.md
 * explains the design choices and records the measured figures.
 */
#ifndef MF_STORAGE_H
#define MF_STORAGE_H

#include "../util/util.h"
#include "engine.h"

/* Name of the lock file inside the data directory. */
#define MF_LOCK_FILE "multifora.lock"

/* Create `dir` (and its parents) if missing, then take an exclusive lock on
 * its lock file so no second server -- in this process or another -- can
 * open the same directory.  Returns 0 and the locked descriptor in `*fd`,
 * or MF_DBPathInUse when another holder has it, or another code (with
 * `err` naming the path and the system error) when the directory cannot be
 * created or the file opened. */
int mf_os_dir_lock(const char *dir, int *fd, mf_error *err);

/* Release the lock taken by mf_os_dir_lock (closing `fd`). */
void mf_os_dir_unlock(int fd);

#endif /* MF_STORAGE_H */
