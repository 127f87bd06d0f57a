/*
 * spill.c -- the spillable document buffer (spill.h).
 *
 * File layout: the spilled documents' BSON bytes back to back, in the
 * order spilled (which is the order added); off[i] / len[i] locate
 * document i.  Invariant: mem[i] != NULL exactly for the documents added
 * since the last spill, and those are the last ones (i >= nspilled).
 */
#include "spill.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

static int io_error(mf_error *err, const char *what)
{
    int e = errno;
    if (e == ENOSPC)
        return mf_error_set(err, MF_OutOfDiskSpace, "spill file %s: %s", what, strerror(e));
    return mf_error_set(err, MF_InternalError, "spill file %s: %s", what,
                        e ? strerror(e) : "short read or write");
}

void mfi_docbuf_init(mfi_docbuf *b, const char *tmpdir)
{
    memset(b, 0, sizeof *b);
    b->tmpdir = tmpdir;
    b->fd = -1;
}

int mfi_docbuf_add(mfi_docbuf *b, bson_t *doc, mf_error *err)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        bson_t **m = realloc(b->mem, cap * sizeof *m);
        if (m)
            b->mem = m;
        uint64_t *o = m ? realloc(b->off, cap * sizeof *o) : NULL;
        if (o)
            b->off = o;
        uint32_t *l = o ? realloc(b->len, cap * sizeof *l) : NULL;
        if (!l) {
            bson_destroy(doc);
            return oom(err);
        }
        b->len = l;
        b->cap = cap;
    }
    b->mem[b->n] = doc;
    b->off[b->n] = 0;
    b->len[b->n] = doc->len;
    b->n++;
    b->mem_bytes += doc->len + 64;
    return 0;
}

static int file_open(mfi_docbuf *b, mf_error *err)
{
    const char *dir = b->tmpdir;
    if (!dir && !(dir = getenv("TMPDIR")))
        dir = "/tmp";
    size_t n = strlen(dir) + sizeof "/multifora-spill-XXXXXX";
    char *name = malloc(n);
    if (!name)
        return oom(err);
    snprintf(name, n, "%s/multifora-spill-XXXXXX", dir);
    int fd = mkstemp(name);
    if (fd < 0) {
        int rc = io_error(err, "create");
        free(name);
        return rc;
    }
    /* unlinked at once: the descriptor keeps it, no crash leaves it behind */
    unlink(name);
    free(name);
    b->fd = fd;
    b->file_end = 0;
    return 0;
}

static int write_all(int fd, const uint8_t *p, size_t len, uint64_t off)
{
    while (len) {
        ssize_t w = pwrite(fd, p, len, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

int mfi_docbuf_spill(mfi_docbuf *b, mf_error *err)
{
    int rc;
    if (b->fd < 0 && (rc = file_open(b, err)) != 0)
        return rc;
    for (size_t i = b->nspilled; i < b->n; i++) {
        bson_t *d = b->mem[i];
        errno = 0;
        if (write_all(b->fd, bson_get_data(d), d->len, b->file_end) != 0)
            return io_error(err, "write");
        b->off[i] = b->file_end;
        b->file_end += d->len;
        bson_destroy(d);
        b->mem[i] = NULL;
        b->nspilled = i + 1;
    }
    b->mem_bytes = 0;
    return 0;
}

int mfi_docbuf_get(mfi_docbuf *b, size_t i, const bson_t **out, mf_error *err)
{
    if (b->mem[i]) {
        *out = b->mem[i];
        return 0;
    }
    mfi_docbuf_slot *s = &b->cache[i % MFI_DOCBUF_CACHE];
    if (s->doc && s->idx == i) {
        *out = s->doc;
        return 0;
    }
    uint8_t *buf = malloc(b->len[i] ? b->len[i] : 1);
    if (!buf)
        return oom(err);
    size_t got = 0;
    while (got < b->len[i]) {
        ssize_t r = pread(b->fd, buf + got, b->len[i] - got, (off_t)(b->off[i] + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            errno = r < 0 ? errno : 0;
            free(buf);
            return io_error(err, "read");
        }
        got += (size_t)r;
    }
    bson_t *d = bson_new_from_data(buf, b->len[i]);
    free(buf);
    if (!d)
        return mf_error_set(err, MF_InternalError, "spill file: corrupt document %zu", i);
    if (s->doc)
        bson_destroy(s->doc);
    s->doc = d;
    s->idx = i;
    *out = d;
    return 0;
}

void mfi_docbuf_clear(mfi_docbuf *b)
{
    for (size_t i = b->nspilled; i < b->n; i++)
        bson_destroy(b->mem[i]);
    for (size_t k = 0; k < MFI_DOCBUF_CACHE; k++) {
        if (b->cache[k].doc)
            bson_destroy(b->cache[k].doc);
        b->cache[k].doc = NULL;
    }
    if (b->fd >= 0 && b->file_end)
        (void)!ftruncate(b->fd, 0);
    b->file_end = 0;
    b->n = b->nspilled = 0;
    b->mem_bytes = 0;
}

void mfi_docbuf_free(mfi_docbuf *b)
{
    mfi_docbuf_clear(b);
    if (b->fd >= 0)
        close(b->fd);
    b->fd = -1;
    free(b->mem);
    free(b->off);
    free(b->len);
    b->mem = NULL;
    b->off = NULL;
    b->len = NULL;
    b->cap = 0;
}
