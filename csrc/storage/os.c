/*
 * os.c -- the operating-system layer of the storage engine: every file
 * operation the engine makes goes through here.  So far: the data
 * directory and its lock file.
 *
 * The lock is flock(2) on <dbpath>/multifora.lock.  flock locks belong to
 * the open file description, so two servers in one process conflict just as
 * two processes do, and the kernel drops the lock when the holder dies --
 * a kill -9 never leaves a directory locked.
 */
#include "storage.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p */
static int make_dirs(const char *dir, mf_error *err)
{
    char path[PATH_MAX];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path)
        return mf_error_set(err, MF_BadValue, "invalid dbpath '%s'", dir);
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        char saved = path[i];
        path[i] = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return mf_error_set(err, MF_BadValue,
                                "cannot create data directory '%s': %s", path,
                                strerror(errno));
        path[i] = saved;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return mf_error_set(err, MF_BadValue, "dbpath '%s' is not a directory", dir);
    return 0;
}

int mf_os_dir_lock(const char *dir, int *fd, mf_error *err)
{
    char path[PATH_MAX];
    int rc = make_dirs(dir, err);
    if (rc != 0)
        return rc;
    if (snprintf(path, sizeof path, "%s/%s", dir, MF_LOCK_FILE) >= (int)sizeof path)
        return mf_error_set(err, MF_BadValue, "dbpath '%s' is too long", dir);
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0)
        return mf_error_set(err, MF_BadValue, "cannot open lock file '%s': %s", path,
                            strerror(errno));
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(f);
        if (e == EWOULDBLOCK)
            return mf_error_set(err, MF_DBPathInUse,
                                "Unable to lock the lock file: %s (Resource temporarily "
                                "unavailable). Another MultiforaDB instance is already "
                                "running in the %s directory",
                                path, dir);
        return mf_error_set(err, MF_BadValue, "cannot lock '%s': %s", path, strerror(e));
    }
    /* The pid, for a person wondering who holds it. */
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(f, 0) == 0 && pwrite(f, pid, (size_t)n, 0) == n)
        (void)fdatasync(f);
    *fd = f;
    return 0;
}

void mf_os_dir_unlock(int fd)
{
    if (fd >= 0) {
        /* Leave the file (mongod does too); an empty one says "clean". */
        (void)ftruncate(fd, 0);
        close(fd);
    }
}
