/* Cases for csrc/agg/spill.c: the spillable document buffer alone. */
#include "../agg/spill.h"
#include "test.h"

#include <dirent.h>

/* {i: <n>, s: <n copies of 'x' mod 50>} */
static bson_t *make_doc(int n)
{
    bson_t *d = bson_new();
    char s[64];
    int len = n % 50;
    memset(s, 'x', (size_t)len);
    s[len] = '\0';
    BSON_APPEND_INT32(d, "i", n);
    BSON_APPEND_UTF8(d, "s", s);
    return d;
}

static bool doc_is(const bson_t *d, int n)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, d, "i") && BSON_ITER_HOLDS_INT32(&it) &&
           bson_iter_int32(&it) == n && bson_iter_init_find(&it, d, "s") &&
           (int)strlen(bson_iter_utf8(&it, NULL)) == n % 50;
}

static int count_files(const char *dir)
{
    DIR *dp = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (dp && (e = readdir(dp)))
        if (e->d_name[0] != '.')
            n++;
    if (dp)
        closedir(dp);
    return n;
}

/* 1,000 documents, spilled every 70: every position reads back right, in
 * order, backwards and strided (cache slots collide); no file is left in
 * the directory; a cleared buffer is reused. */
MFT_CASE(spill_read_back, "/agg/spill/read_back")
{
    mfi_docbuf b;
    mf_error err;
    mfi_docbuf_init(&b, mft_tmpdir());
    for (int round = 0; round < 2; round++) {
        int n = round ? 300 : 1000;
        for (int i = 0; i < n; i++) {
            CHECK_INT(mfi_docbuf_add(&b, make_doc(i), &err), 0);
            if (i % 70 == 69)
                CHECK_INT(mfi_docbuf_spill(&b, &err), 0);
        }
        CHECK_INT(b.n, n);
        CHECK_INT(b.nspilled, n / 70 * 70);
        CHECK(b.mem_bytes > 0);
        CHECK_INT(count_files(mft_tmpdir()), 0);
        const bson_t *d;
        for (int i = 0; i < n; i++) {
            CHECK_INT(mfi_docbuf_get(&b, (size_t)i, &d, &err), 0);
            CHECK(doc_is(d, i));
        }
        for (int i = n - 1; i >= 0; i--) {
            CHECK_INT(mfi_docbuf_get(&b, (size_t)i, &d, &err), 0);
            CHECK(doc_is(d, i));
        }
        for (int i = 0; i < n; i += MFI_DOCBUF_CACHE + 1) {
            CHECK_INT(mfi_docbuf_get(&b, (size_t)i, &d, &err), 0);
            CHECK(doc_is(d, i));
            CHECK_INT(mfi_docbuf_get(&b, (size_t)(n - 1 - i), &d, &err), 0);
            CHECK(doc_is(d, n - 1 - i));
        }
        mfi_docbuf_clear(&b);
        CHECK_INT(b.n, 0);
        CHECK_INT(b.mem_bytes, 0);
    }
    mfi_docbuf_free(&b);
}
