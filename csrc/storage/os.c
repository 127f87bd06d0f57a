/*
 * os.c -- the operating-system layer of the storage engine: every file
 * operation the engine makes goes through here (os.h says why), and so
 * does the data directory's lock.
 *
 * The lock is flock(2) on <dbpath>/multifora.lock.  flock locks belong to
 * the open file description, so two servers in one process conflict just as
 * two processes do, and the kernel drops the lock when the holder dies --
 * a kill -9 never leaves a directory locked.  The same rule means a forked
 * child shares its parent's lock: a long-lived child would keep the parent
 * from reopening its own directory after closing it.  So a fork handler
 * closes every held lock descriptor in the child (which cannot use the
 * parent's database anyway); closing a duplicate leaves the parent's lock
 * in place.
 *
 * Fault injection costs one relaxed atomic load per call when no fault is
 * armed in the file's table.  The power-loss simulation keeps, per tracked path, the bytes the
 * file held at its last sync; it is for tests over small files.
 */
#include "storage.h"
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

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

/* The lock descriptors this process holds, as fd + 1 (0: a free slot).
 * Atomics, not a mutex: the fork handler runs in a child where another
 * thread may have held any mutex. */
#define MAX_HELD_LOCKS 64
static atomic_int held_locks[MAX_HELD_LOCKS];
static atomic_bool forked_child;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void close_locks_in_child(void)
{
    atomic_store(&forked_child, true);
    for (int i = 0; i < MAX_HELD_LOCKS; i++) {
        int v = atomic_exchange(&held_locks[i], 0);
        if (v)
            close(v - 1);
    }
}

static void register_atfork(void)
{
    (void)pthread_atfork(NULL, NULL, close_locks_in_child);
}

/* Record `fd` as held; false when every slot is taken (the lock then stays
 * with a forked child, as before). */
static bool hold_lock(int fd)
{
    pthread_once(&atfork_once, register_atfork);
    for (int i = 0; i < MAX_HELD_LOCKS; i++) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&held_locks[i], &expect, fd + 1))
            return true;
    }
    return false;
}

/* Forget `fd`; false if it is not held (a fork handler closed it). */
static bool release_lock(int fd)
{
    for (int i = 0; i < MAX_HELD_LOCKS; i++) {
        int expect = fd + 1;
        if (atomic_compare_exchange_strong(&held_locks[i], &expect, 0))
            return true;
    }
    return false;
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
    (void)hold_lock(f);
    *fd = f;
    return 0;
}

void mf_os_dir_unlock(int fd)
{
    /* In a forked child the descriptor is closed already and its number
     * may name another file now: leave it alone. */
    if (fd >= 0 && !release_lock(fd) && atomic_load(&forked_child))
        return;
    if (fd >= 0) {
        /* Leave the file (mongod does too); an empty one says "clean". */
        (void)ftruncate(fd, 0);
        close(fd);
    }
}

/* ------------------------------------------------------------ fault table */

/* One table per engine (os.h); `armed` is read without the mutex first, so
 * a call against a disarmed table costs one relaxed load. */
struct mf_os_faults {
    pthread_mutex_t mu;
    atomic_bool armed;
    char site[64];
    mf_fault_kind kind;
    int skip, count, hits, calls;
    size_t torn;
};

mf_os_faults *mf_os_faults_new(void)
{
    mf_os_faults *t = calloc(1, sizeof *t);
    if (t)
        pthread_mutex_init(&t->mu, NULL);
    return t;
}

void mf_os_faults_free(mf_os_faults *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->mu);
    free(t);
}

void mf_os_fault_set(mf_os_faults *t, const char *site_prefix, mf_fault_kind kind, int skip,
                     int count)
{
    pthread_mutex_lock(&t->mu);
    snprintf(t->site, sizeof t->site, "%s", site_prefix);
    t->kind = kind;
    t->skip = skip;
    t->count = count;
    t->hits = 0;
    t->calls = 0;
    t->torn = 0;
    atomic_store(&t->armed, true);
    pthread_mutex_unlock(&t->mu);
}

void mf_os_fault_clear(mf_os_faults *t)
{
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->armed, false);
    /* The counts start again, as a mongod fail point's timesEntered does
     * at every configureFailPoint: a table may serve one engine after
     * another, and the next must not see this one's hits. */
    t->hits = 0;
    t->calls = 0;
    t->torn = 0;
    pthread_mutex_unlock(&t->mu);
}

int mf_os_fault_hits(mf_os_faults *t)
{
    pthread_mutex_lock(&t->mu);
    int h = t->hits;
    pthread_mutex_unlock(&t->mu);
    return h;
}

int mf_os_fault_calls(mf_os_faults *t)
{
    pthread_mutex_lock(&t->mu);
    int n = t->calls;
    pthread_mutex_unlock(&t->mu);
    return n;
}

size_t mf_os_fault_torn_bytes(mf_os_faults *t)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->torn;
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* Whether the call at `site`, against table `t` (NULL: none), must fail;
 * *kind says how. */
static bool fault_fires(mf_os_faults *t, const char *site, mf_fault_kind *kind)
{
    if (!t || !atomic_load_explicit(&t->armed, memory_order_relaxed))
        return false;
    bool fire = false;
    pthread_mutex_lock(&t->mu);
    if (atomic_load(&t->armed) && strncmp(site, t->site, strlen(t->site)) == 0) {
        if (t->calls < INT_MAX)
            t->calls++;
        if (t->skip > 0) {
            t->skip--;
        } else if (t->count != 0) {
            if (t->count > 0)
                t->count--;
            t->hits++;
            /* A power cut tears at most one write: after it, calls fail. */
            *kind = t->kind == MF_FAULT_TORN && t->hits > 1 ? MF_FAULT_EIO : t->kind;
            fire = true;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return fire;
}

static int os_error(mf_error *err, int e, const char *site, const char *what, const char *path)
{
    return mf_error_set(err, e == ENOSPC ? MF_OutOfDiskSpace : MF_InternalError,
                        "%s: %s %s: %s", site, what, path ? path : "", strerror(e));
}

/* An injected failure of kind EIO/ENOSPC as an error (SHORT is handled by
 * the write functions). */
static int injected(mf_error *err, mf_fault_kind kind, const char *site, const char *what,
                    const char *path)
{
    return os_error(err, kind == MF_FAULT_ENOSPC ? ENOSPC : EIO, site, what, path);
}

static void sim_patch(const char *path, uint64_t off, const void *buf, size_t n);

/* -------------------------------------------------- power-loss simulation */

typedef struct sim_file {
    char *path;
    uint8_t *bytes; /* content at the last sync */
    size_t len;
    /* A torn write's surviving sectors (MF_FAULT_TORN): put back over the
     * synced content at the crash. */
    uint8_t *patch;
    size_t patch_len;
    uint64_t patch_off;
} sim_file;

static pthread_mutex_t sim_mu = PTHREAD_MUTEX_INITIALIZER;
static bool sim_on;
static sim_file *sim_files;
static size_t sim_n, sim_cap;

static sim_file *sim_find(const char *path)
{
    for (size_t i = 0; i < sim_n; i++)
        if (strcmp(sim_files[i].path, path) == 0)
            return &sim_files[i];
    return NULL;
}

static void sim_forget(sim_file *sf)
{
    free(sf->path);
    free(sf->bytes);
    free(sf->patch);
    *sf = sim_files[--sim_n];
}

void mf_os_sim_enable(bool on)
{
    pthread_mutex_lock(&sim_mu);
    sim_on = on;
    if (!on) {
        while (sim_n)
            sim_forget(&sim_files[0]);
        free(sim_files);
        sim_files = NULL;
        sim_cap = 0;
    }
    pthread_mutex_unlock(&sim_mu);
}

/* Read the whole of `fd` into a fresh buffer. */
static int slurp(int fd, uint8_t **out, size_t *len)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    size_t n = (size_t)st.st_size, got = 0;
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return -1;
    while (got < n) {
        ssize_t r = pread(fd, b + got, n - got, (off_t)got);
        if (r <= 0) {
            free(b);
            return -1;
        }
        got += (size_t)r;
    }
    *out = b;
    *len = n;
    return 0;
}

/* Start tracking `path` (open as `fd`): an existing file counts as durable
 * as it is; a file just created is empty. */
static void sim_track(const char *path, int fd)
{
    pthread_mutex_lock(&sim_mu);
    if (sim_on && !sim_find(path)) {
        if (sim_n == sim_cap) {
            size_t cap = sim_cap ? sim_cap * 2 : 16;
            sim_file *p = realloc(sim_files, cap * sizeof *p);
            if (!p)
                goto out;
            sim_files = p;
            sim_cap = cap;
        }
        sim_file sf = {.path = strdup(path)};
        if (sf.path && slurp(fd, &sf.bytes, &sf.len) == 0)
            sim_files[sim_n++] = sf;
        else
            free(sf.path);
    }
out:
    pthread_mutex_unlock(&sim_mu);
}

static void sim_patch(const char *path, uint64_t off, const void *buf, size_t n)
{
    pthread_mutex_lock(&sim_mu);
    sim_file *sf = sim_on ? sim_find(path) : NULL;
    uint8_t *p = sf ? malloc(n) : NULL;
    if (p) {
        memcpy(p, buf, n);
        free(sf->patch);
        sf->patch = p;
        sf->patch_len = n;
        sf->patch_off = off;
    }
    pthread_mutex_unlock(&sim_mu);
}

static void sim_synced(const char *path, int fd)
{
    pthread_mutex_lock(&sim_mu);
    sim_file *sf = sim_on ? sim_find(path) : NULL;
    uint8_t *b;
    size_t n;
    if (sf && slurp(fd, &b, &n) == 0) {
        free(sf->bytes);
        sf->bytes = b;
        sf->len = n;
    }
    pthread_mutex_unlock(&sim_mu);
}

int mf_os_sim_crash(mf_error *err)
{
    int rc = 0;
    pthread_mutex_lock(&sim_mu);
    for (size_t i = 0; i < sim_n && rc == 0; i++) {
        sim_file *sf = &sim_files[i];
        int fd = open(sf->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            rc = os_error(err, errno, "sim.crash", "open", sf->path);
            break;
        }
        size_t done = 0;
        while (done < sf->len) {
            ssize_t w = pwrite(fd, sf->bytes + done, sf->len - done, (off_t)done);
            if (w <= 0) {
                rc = os_error(err, errno, "sim.crash", "write", sf->path);
                break;
            }
            done += (size_t)w;
        }
        if (rc == 0 && ftruncate(fd, (off_t)sf->len) != 0)
            rc = os_error(err, errno, "sim.crash", "truncate", sf->path);
        if (rc == 0 && sf->patch &&
            pwrite(fd, sf->patch, sf->patch_len, (off_t)sf->patch_off) != (ssize_t)sf->patch_len)
            rc = os_error(err, errno, "sim.crash", "write", sf->path);
        free(sf->patch);
        sf->patch = NULL;
        close(fd);
    }
    pthread_mutex_unlock(&sim_mu);
    return rc;
}

/* ------------------------------------------------------------------ files */

struct mf_file {
    int fd;
    char *path;
    mf_os_faults *faults; /* the table its calls check, or NULL */
};

int mf_os_open(const char *path, int flags, mf_file **out, mf_os_faults *faults,
               const char *site, mf_error *err)
{
    mf_fault_kind k;
    if (fault_fires(faults, site, &k))
        return injected(err, k, site, "open", path);
    int oflags = O_RDWR | O_CLOEXEC;
    if (flags & MF_OS_CREATE)
        oflags |= O_CREAT;
    if (flags & MF_OS_EXCL)
        oflags |= O_EXCL;
    int fd = open(path, oflags, 0644);
    if (fd < 0)
        return os_error(err, errno, site, "open", path);
    mf_file *f = calloc(1, sizeof *f);
    if (f)
        f->path = strdup(path);
    if (!f || !f->path) {
        free(f);
        close(fd);
        return mf_error_set(err, MF_InternalError, "%s: out of memory", site);
    }
    f->fd = fd;
    f->faults = faults;
    sim_track(path, fd);
    *out = f;
    return 0;
}

void mf_os_close(mf_file *f)
{
    if (!f)
        return;
    close(f->fd);
    free(f->path);
    free(f);
}

const char *mf_os_path(const mf_file *f)
{
    return f->path;
}

int mf_os_pread(mf_file *f, void *buf, size_t n, uint64_t off, size_t *got,
                const char *site, mf_error *err)
{
    mf_fault_kind k;
    if (fault_fires(f->faults, site, &k))
        return injected(err, k, site, "read", f->path);
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(f->fd, (uint8_t *)buf + done, n - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return os_error(err, errno, site, "read", f->path);
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return 0;
}

int mf_os_pwrite(mf_file *f, const void *buf, size_t n, uint64_t off, const char *site,
                 mf_error *err)
{
    mf_fault_kind k;
    if (fault_fires(f->faults, site, &k)) {
        if (k == MF_FAULT_SHORT) {
            /* Half the bytes reach the file, then the error. */
            ssize_t r = pwrite(f->fd, buf, n / 2, (off_t)off);
            (void)r;
            return mf_error_set(err, MF_InternalError, "%s: short write %s: %zu of %zu bytes",
                                site, f->path, n / 2, n);
        }
        if (k == MF_FAULT_TORN) {
            /* The sectors that reached the platter before the power went. */
            size_t keep = n / 2 / 512 * 512;
            if (keep > 0) {
                ssize_t r = pwrite(f->fd, buf, keep, (off_t)off);
                (void)r;
                sim_patch(f->path, off, buf, keep);
            }
            pthread_mutex_lock(&f->faults->mu);
            f->faults->torn = keep;
            pthread_mutex_unlock(&f->faults->mu);
        }
        return injected(err, k, site, "write", f->path);
    }
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(f->fd, (const uint8_t *)buf + done, n - done, (off_t)(off + done));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return os_error(err, errno, site, "write", f->path);
        }
        done += (size_t)w;
    }
    return 0;
}

int mf_os_sync(mf_file *f, bool data_only, const char *site, mf_error *err)
{
    mf_fault_kind k;
    if (fault_fires(f->faults, site, &k))
        return injected(err, k, site, "sync", f->path);
    int r = data_only ? fdatasync(f->fd) : fsync(f->fd);
    if (r != 0)
        return os_error(err, errno, site, "sync", f->path);
    sim_synced(f->path, f->fd);
    return 0;
}

int mf_os_size(mf_file *f, uint64_t *size, mf_error *err)
{
    struct stat st;
    if (fstat(f->fd, &st) != 0)
        return os_error(err, errno, "os.size", "stat", f->path);
    *size = (uint64_t)st.st_size;
    return 0;
}

int mf_os_truncate(mf_file *f, uint64_t size, const char *site, mf_error *err)
{
    mf_fault_kind k;
    if (fault_fires(f->faults, site, &k))
        return injected(err, k, site, "truncate", f->path);
    if (ftruncate(f->fd, (off_t)size) != 0)
        return os_error(err, errno, site, "truncate", f->path);
    return 0;
}

int mf_os_allocate(mf_file *f, uint64_t off, uint64_t len, bool keep_size, const char *site,
                   mf_error *err)
{
    mf_fault_kind k;
    struct stat st;
    if (fault_fires(f->faults, site, &k))
        return injected(err, k, site, "allocate", f->path);
    if (len == 0)
        return 0;
    if (fstat(f->fd, &st) != 0)
        return os_error(err, errno, site, "stat", f->path);
    int r;
    do
        r = fallocate(f->fd, keep_size ? FALLOC_FL_KEEP_SIZE : 0, (off_t)off, (off_t)len);
    while (r != 0 && errno == EINTR);
    if (r == 0)
        return 0;
    int e = errno;
    if (e == EOPNOTSUPP || e == ENOSYS) {
        /* No reservation on this file system: set the length, as asked. */
        if (!keep_size && (uint64_t)st.st_size < off + len &&
            ftruncate(f->fd, (off_t)(off + len)) != 0)
            return os_error(err, errno, site, "truncate", f->path);
        return 0;
    }
    /* A failed fallocate may have moved the end: put it back, so the
     * caller's idea of the length stays true. */
    struct stat now;
    if (fstat(f->fd, &now) == 0 && now.st_size != st.st_size)
        (void)!ftruncate(f->fd, st.st_size);
    return os_error(err, e, site, "allocate", f->path);
}

int mf_os_reserve(size_t len, void **base, mf_error *err)
{
    /* Take one alignment more than asked, then give back the ends. */
    size_t slack = (size_t)MF_OS_HUGE_BYTES;
    uint8_t *p = mmap(NULL, len + slack, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                      -1, 0);
    if (p == MAP_FAILED)
        return os_error(err, errno, "os.reserve", "mmap", "");
    size_t head = (slack - (uintptr_t)p % slack) % slack;
    if (head)
        munmap(p, head);
    if (slack - head)
        munmap(p + head + len, slack - head);
    *base = p + head;
    return 0;
}

void mf_os_unreserve(void *base, size_t len)
{
    if (base)
        munmap(base, len);
}

int mf_os_map(mf_file *f, void *base, uint64_t off, uint64_t len, const char *site,
              mf_error *err)
{
    mf_fault_kind k;
    if (fault_fires(f->faults, site, &k))
        return injected(err, k, site, "mmap", f->path);
    void *p = mmap((uint8_t *)base + off, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                   f->fd, (off_t)off);
    if (p == MAP_FAILED)
        return os_error(err, errno, site, "mmap", f->path);
    return 0;
}

bool mf_os_advise_huge(void *p, uint64_t len, bool on)
{
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    return len == 0 || madvise(p, len, on ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) == 0;
#else
    (void)p, (void)len, (void)on;
    return false;
#endif
}

uint64_t mf_os_physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

int mf_os_unlink(const char *path, mf_os_faults *faults, const char *site, mf_error *err)
{
    mf_fault_kind k;
    if (fault_fires(faults, site, &k))
        return injected(err, k, site, "unlink", path);
    if (unlink(path) != 0 && errno != ENOENT)
        return os_error(err, errno, site, "unlink", path);
    pthread_mutex_lock(&sim_mu);
    sim_file *sf = sim_find(path);
    if (sf)
        sim_forget(sf);
    pthread_mutex_unlock(&sim_mu);
    return 0;
}

int mf_os_rename(const char *from, const char *to, mf_os_faults *faults, const char *site,
                 mf_error *err)
{
    mf_fault_kind k;
    if (fault_fires(faults, site, &k))
        return injected(err, k, site, "rename", from);
    if (rename(from, to) != 0)
        return os_error(err, errno, site, "rename", from);
    pthread_mutex_lock(&sim_mu);
    sim_file *old = sim_find(to);
    if (old)
        sim_forget(old);
    sim_file *sf = sim_find(from);
    if (sf) {
        char *p = strdup(to);
        if (p) {
            free(sf->path);
            sf->path = p;
        }
    }
    pthread_mutex_unlock(&sim_mu);
    return 0;
}

int mf_os_sync_dir(const char *dir, mf_os_faults *faults, const char *site, mf_error *err)
{
    mf_fault_kind k;
    if (fault_fires(faults, site, &k))
        return injected(err, k, site, "sync", dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return os_error(err, errno, site, "open", dir);
    int r = fsync(fd);
    int e = errno;
    close(fd);
    if (r != 0)
        return os_error(err, e, site, "sync", dir);
    return 0;
}

int mf_os_list_dir(const char *dir, void (*fn)(const char *name, void *arg), void *arg,
                   mf_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return os_error(err, errno, "os.list", "opendir", dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        fn(e->d_name, arg);
    }
    closedir(d);
    return 0;
}
