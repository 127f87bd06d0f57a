/*
 * main.c -- runs the registered cases.
 *
 *   _ctest              run every case
 *   _ctest PREFIX...    run the cases whose path starts with a PREFIX
 *   _ctest --list       print every case's path
 *
 * Prints "ok PATH" or "FAIL PATH: file:line: what" per case, then
 * "N passed, M failed", and exits 1 if anything failed.
 */
#include "test.h"

#include <ftw.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_CASES 512

static struct {
    const char *path;
    void (*fn)(void);
} cases[MAX_CASES];
static int ncases;
static bool failed;
static char tmpdir[256];

void mft_register(const char *path, void (*fn)(void))
{
    if (ncases < MAX_CASES) {
        cases[ncases].path = path;
        cases[ncases].fn = fn;
        ncases++;
    }
}

void mft_fail(const char *file, int line, const char *what)
{
    if (!failed)
        printf("  %s:%d: %s\n", file, line, what);
    failed = true;
}

bool mft_failed(void)
{
    return failed;
}

const char *mft_tmpdir(void)
{
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/mfctest.XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            exit(2);
        }
    }
    return tmpdir;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int by_path(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int main(int argc, char **argv)
{
    int passed = 0, nfailed = 0;
    qsort(cases, (size_t)ncases, sizeof cases[0], by_path);
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < ncases; i++)
            printf("%s\n", cases[i].path);
        return 0;
    }
    for (int i = 0; i < ncases; i++) {
        bool selected = argc < 2;
        for (int a = 1; a < argc && !selected; a++)
            selected = strncmp(cases[i].path, argv[a], strlen(argv[a])) == 0;
        if (!selected)
            continue;
        failed = false;
        tmpdir[0] = '\0';
        printf("%s\n", cases[i].path);
        fflush(stdout);
        cases[i].fn();
        if (tmpdir[0])
            nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        printf(failed ? "FAIL %s\n" : "ok %s\n", cases[i].path);
        fflush(stdout);
        if (failed)
            nfailed++;
        else
            passed++;
    }
    printf("%d passed, %d failed\n", passed, nfailed);
    return nfailed ? 1 : 0;
}
