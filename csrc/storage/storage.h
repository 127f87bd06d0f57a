/*
 * storage.h -- the storage layer's contract.
 *
 * So far only the piece every later part stands on: the data directory and
 * its lock.  The pager, log, B+trees and catalog (DESIGN.md section 3) build
 * on this os layer.
 */
#ifndef MF_STORAGE_H
#define MF_STORAGE_H

#include "../util/util.h"

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
