/*
 * fuzz_targets.c -- the fuzz targets (fuzz.h says what each input
 * is and what each target checks).  No test-harness dependency: the same
 * file links into a libFuzzer binary (with MF_FUZZ_TARGET defined) and
 * into the C test binary, which replays the committed regression inputs.
 */
#include "fuzz.h"
#include "../wire/wire.h"
#include "../storage/wal.h"
#include "../command/scram.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

uint64_t mf_fuzz_wire_parsed;
uint64_t mf_fuzz_wal_replayed;

/* A broken property: report it and abort, which both libFuzzer and the
 * sanitizers' test runs count as a crash. */
#define FA(cond)                                                                        \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "fuzz property failed: %s (%s:%d)\n", #cond, __FILE__,      \
                    __LINE__);                                                          \
            abort();                                                                    \
        }                                                                               \
    } while (0)

/* Read every byte of [p, p+n) so the sanitizers see any bad range. */
static void touch(const void *p, size_t n)
{
    const volatile uint8_t *b = p;
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++)
        acc ^= b[i];
    (void)acc;
}

/* A rendered value ends up in replies as a BSON string (a duplicate key's
 * write error quotes it as is), so it must be UTF-8.  Command errors need
 * not be: the dispatcher escapes their bytes (mf_command_error_reply). */
static bool is_utf8(const char *s)
{
    return bson_utf8_validate(s, strlen(s), false);
}

/* ------------------------------------------------------------------ bson */

/* Walk a document mf_bsonx_validate accepted with libbson's iterator,
 * reading every value: libbson must agree that it is well formed. */
static void walk_doc(const uint8_t *data, size_t len)
{
    bson_t b;
    bson_iter_t it;
    FA(bson_init_static(&b, data, len));
    FA(bson_iter_init(&it, &b));
    while (bson_iter_next(&it)) {
        uint32_t n = 0, n2 = 0;
        const uint8_t *d = NULL;
        const char *s = NULL;
        touch(bson_iter_key(&it), strlen(bson_iter_key(&it)));
        switch (bson_iter_type(&it)) {
        case BSON_TYPE_DOCUMENT:
            bson_iter_document(&it, &n, &d);
            FA(d != NULL);
            walk_doc(d, n);
            break;
        case BSON_TYPE_ARRAY:
            bson_iter_array(&it, &n, &d);
            FA(d != NULL);
            walk_doc(d, n);
            break;
        case BSON_TYPE_UTF8:
            s = bson_iter_utf8(&it, &n);
            FA(s != NULL && s[n] == '\0');
            touch(s, n);
            break;
        case BSON_TYPE_CODE:
            s = bson_iter_code(&it, &n);
            FA(s != NULL && s[n] == '\0');
            break;
        case BSON_TYPE_SYMBOL:
            s = bson_iter_symbol(&it, &n);
            FA(s != NULL && s[n] == '\0');
            break;
        case BSON_TYPE_CODEWSCOPE:
            s = bson_iter_codewscope(&it, &n, &n2, &d);
            FA(s != NULL && d != NULL);
            touch(s, n);
            walk_doc(d, n2);
            break;
        case BSON_TYPE_BINARY: {
            bson_subtype_t sub;
            bson_iter_binary(&it, &sub, &n, &d);
            FA(n == 0 || d != NULL);
            touch(d, n);
            break;
        }
        case BSON_TYPE_REGEX: {
            const char *opts = NULL;
            s = bson_iter_regex(&it, &opts);
            FA(s != NULL && opts != NULL);
            break;
        }
        case BSON_TYPE_DBPOINTER: {
            const bson_oid_t *oid = NULL;
            bson_iter_dbpointer(&it, &n, &s, &oid);
            FA(s != NULL && oid != NULL);
            break;
        }
        default: {
            const bson_value_t *v = bson_iter_value(&it);
            FA(v != NULL);
            break;
        }
        }
    }
    FA(it.err_off == 0); /* libbson stopped on something we let through */
}

int mf_fuzz_bson(const uint8_t *data, size_t len)
{
    mf_error err;
    size_t n = 0;
    mf_error_clear(&err);
    int rc = mf_bsonx_validate_prefix(data, len, &n, &err);
    if (rc != 0) {
        FA(rc == err.code && err.msg[0] != '\0');
        FA(rc == MF_InvalidBSON || rc == MF_Overflow);
        return 0;
    }
    FA(n >= 5 && n <= len);
    walk_doc(data, n);

    bson_t b;
    bson_iter_t it, again;
    char text[512];
    FA(bson_init_static(&b, data, n));
    mf_bsonx_to_string(&b, text, sizeof text);
    FA(memchr(text, '\0', sizeof text) != NULL && is_utf8(text));
    FA(mf_bsonx_compare_docs(&b, &b) == 0);
    (void)mf_bsonx_depth_exceeds(&b, MF_BSON_MAX_STORAGE_DEPTH);

    /* Every top-level value: equal to itself, and key-encoded the same way
     * twice in each direction. */
    mf_buf k1 = {0}, k2 = {0};
    FA(bson_iter_init(&it, &b));
    while (bson_iter_next(&it)) {
        again = it;
        FA(mf_bsonx_compare_values(&it, &again) == 0);
        mf_bsonx_elem_to_string(&it, true, text, sizeof text);
        FA(is_utf8(text));
        for (int desc = 0; desc < 2; desc++) {
            k1.len = k2.len = 0;
            FA(mf_bsonx_key_append(&k1, &it, desc) == 0);
            FA(mf_bsonx_key_append(&k2, &again, desc) == 0);
            FA(k1.len == k2.len && memcmp(k1.data, k2.data, k1.len) == 0);
        }
    }
    mf_buf_free(&k1);
    mf_buf_free(&k2);
    return 0;
}

/* ------------------------------------------------------------------ wire */

/* Parse one whole message as the connection does.  Returns whether the
 * connection would stay open. */
static bool wire_message(const uint8_t *m, size_t len, const mf_msg_header *h)
{
    mf_error err;
    mf_error_clear(&err);
    switch (h->opcode) {
    case MF_OPCODE_MSG: {
        mf_op_msg om;
        bson_t cmd;
        if (len < MF_MSG_HEADER_LEN + 4)
            return false;
        int rc = mf_msg_parse_op_msg(m, len, &om, &err);
        if (rc != 0) {
            FA(rc == err.code && err.msg[0] != '\0');
            return !mf_msg_error_is_fatal(rc);
        }
        FA(om.body >= m && om.body_len >= 5 && om.body + om.body_len <= m + len);
        for (int i = 0; i < om.nseq; i++) {
            const mf_msg_sequence *s = &om.seq[i];
            FA(s->docs >= m && s->docs + s->len <= m + len);
            touch(s->name, strlen(s->name));
        }
        rc = mf_msg_command_doc(&om, &cmd, &err);
        mf_fuzz_wire_parsed += rc == 0;
        if (rc != 0) {
            FA(rc == err.code && err.msg[0] != '\0');
            return true;
        }
        /* The command the dispatcher gets is valid BSON (a sequence's
         * documents sit two levels deeper there than in the message). */
        mf_error verr;
        int vrc = mf_bsonx_validate(bson_get_data(&cmd), cmd.len, &verr);
        FA(vrc == 0 || vrc == MF_Overflow);

        /* A reply carrying it parses back to the same bytes. */
        mf_buf out = {0};
        mf_op_msg back;
        FA(mf_msg_build_reply(&out, 7, h->request_id, om.flags & MF_MSG_CHECKSUM_PRESENT,
                              &cmd) == 0);
        rc = mf_msg_parse_op_msg(out.data, out.len, &back, &err);
        if (vrc == 0 && cmd.len <= MF_MAX_BSON_INTERNAL_SIZE) {
            FA(rc == 0);
            FA(back.body_len == cmd.len &&
               memcmp(back.body, bson_get_data(&cmd), cmd.len) == 0);
        }
        mf_buf_free(&out);
        bson_destroy(&cmd);
        return true;
    }
    case MF_OPCODE_QUERY: {
        mf_op_query q;
        int rc = mf_msg_parse_op_query(m, len, &q, &err);
        if (rc != 0) {
            FA(rc == err.code && err.msg[0] != '\0');
            return true;
        }
        FA(q.query >= m && q.query + q.query_len <= m + len);
        FA(bson_utf8_validate(q.ns, strlen(q.ns), false)); /* quoted in replies */
        walk_doc(q.query, q.query_len);
        return true;
    }
    case MF_OPCODE_INSERT:
    case MF_OPCODE_UPDATE:
    case MF_OPCODE_DELETE:
    case MF_OPCODE_KILL_CURSORS:
    case MF_OPCODE_COMPRESSED:
        return false;
    default:
        return true;
    }
}

int mf_fuzz_wire(const uint8_t *data, size_t len)
{
    if (len < 1)
        return 0;
    uint8_t mode = data[0];
    data++, len--;
    size_t off = 0;
    bool first = true;
    while (len - off >= MF_MSG_HEADER_LEN) {
        mf_msg_header h;
        mf_msg_header_read(data + off, &h);
        if (first && (mode & 1) && len - off <= MF_MAX_MESSAGE_SIZE)
            h.length = (int32_t)(len - off);
        first = false;
        if (h.length < MF_MSG_HEADER_LEN || h.length > MF_MAX_MESSAGE_SIZE ||
            (size_t)h.length > len - off)
            break; /* the connection closes, or waits for bytes that never come */
        /* An allocation of exactly the message, as the connection reads it,
         * so a read past its end is a sanitizer report. */
        size_t mlen = (size_t)h.length;
        uint8_t *m = malloc(mlen);
        FA(m != NULL);
        memcpy(m, data + off, mlen);
        mf_store_i32le(m, h.length);
        if ((mode & 2) && h.opcode == MF_OPCODE_MSG && mlen >= MF_MSG_HEADER_LEN + 8 &&
            (mf_load_u32le(m + MF_MSG_HEADER_LEN) & MF_MSG_CHECKSUM_PRESENT))
            mf_store_i32le(m + mlen - 4, (int32_t)mf_crc32c(0, m, mlen - 4));
        bool keep = wire_message(m, mlen, &h);
        free(m);
        if (!keep)
            break;
        off += mlen;
    }
    return 0;
}

/* ------------------------------------------------------------------- wal */

static char wal_dir[256];

void mf_fuzz_init(void)
{
    mf_log_configure(MF_LOG_ERROR, false);
}

/* The wal target's scratch directory, made on its first input (so the
 * other targets leave none behind, even when they crash). */
static void wal_dir_make(void)
{
    const char *base = getenv("MF_FUZZ_TMP");
    struct stat st;
    if (!base || !*base)
        base = stat("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : NULL;
    if (!base)
        base = getenv("TMPDIR");
    snprintf(wal_dir, sizeof wal_dir, "%s/mffuzz.XXXXXX", base && *base ? base : "/tmp");
    FA(mkdtemp(wal_dir) != NULL);
}

static void wal_dir_clear(bool remove_dir)
{
    DIR *d = opendir(wal_dir);
    FA(d != NULL);
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", wal_dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    if (remove_dir)
        rmdir(wal_dir);
}

static void put32(uint8_t *p, uint32_t v)
{
    mf_store_i32le(p, (int32_t)v);
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

/* What a replay saw: how many records, their LSNs in order, a digest. */
typedef struct replayed {
    mf_lsn next;      /* the LSN the next record must have */
    uint64_t count;
    uint64_t digest;  /* of every record so far, with its LSN */
    uint64_t mark;    /* digest_at_mark: the digest after this many records */
    uint64_t digest_at_mark;
} replayed;

static int on_record(void *arg, mf_lsn lsn, const uint8_t *rec, size_t len, mf_error *err)
{
    (void)err;
    replayed *r = arg;
    FA(lsn == r->next);
    FA(len >= 1 && len <= MF_WAL_MAX_RECORD);
    touch(rec, len);
    r->digest = XXH3_64bits_withSeed(rec, len, r->digest ^ lsn);
    r->next++;
    if (++r->count == r->mark)
        r->digest_at_mark = r->digest;
    return 0;
}

/* Recompute the hashes of the blocks laid end to end in `p` (wal.h's block
 * header), as far as they go. */
static void wal_fix_hashes(uint8_t *p, size_t len)
{
    size_t off = 0;
    while (len - off >= 48 && memcmp(p + off, "MFWB", 4) == 0) {
        uint8_t *h = p + off;
        size_t stored = mf_load_u32le(h + 32);
        size_t avail = len - off - 48;
        put32(h + 36, (uint32_t)XXH3_64bits(h, 36));
        put64(h + 40, XXH3_64bits(h + 48, stored < avail ? stored : avail));
        if (stored > avail)
            break;
        off += 48 + stored;
    }
}

static int wal_open(mf_lsn after, uint64_t mark, replayed *r, mf_wal **w, mf_error *err)
{
    memset(r, 0, sizeof *r);
    r->next = after + 1;
    r->mark = mark;
    return mf_wal_open(wal_dir, NULL, after, on_record, r, w, err);
}

int mf_fuzz_wal(const uint8_t *data, size_t len)
{
    if (len < 1)
        return 0;
    if (!wal_dir[0])
        wal_dir_make();
    uint8_t mode = data[0];
    data++, len--;

    size_t flen = 32 + len;
    uint8_t *file = calloc(1, flen);
    FA(file != NULL);
    memcpy(file, "MFWALSEG", 8);
    put32(file + 8, 1);
    put64(file + 16, MF_FUZZ_WAL_SALT);
    put64(file + 24, 1);
    memcpy(file + 32, data, len);
    if (mode & 1)
        wal_fix_hashes(file + 32, len);

    char path[512];
    snprintf(path, sizeof path, "%s/wal.%016llx", wal_dir, 1ull);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    FA(fd >= 0);
    FA(write(fd, file, flen) == (ssize_t)flen);
    close(fd);
    free(file);

    mf_lsn after = (mode & 2) ? 1 : 0;
    replayed r1, r2;
    mf_wal *w = NULL;
    mf_error err;
    mf_error_clear(&err);
    int rc = wal_open(after, 0, &r1, &w, &err);
    mf_fuzz_wal_replayed = r1.count;
    if (rc != 0) {
        FA(rc == MF_DataCorruption && err.msg[0] != '\0');
        wal_dir_clear(false);
        return 0;
    }
    if (!(mode & 4)) {
        mf_wal_abandon(w);
        wal_dir_clear(false);
        return 0;
    }
    /* Recovery left a log that takes a new record, and a reopen replays
     * exactly what the first open did, then that record. */
    static const uint8_t rec[] = "after recovery";
    mf_lsn lsn = 0;
    FA(mf_wal_append(w, rec, sizeof rec, &lsn, &err) == 0);
    FA(r1.count == 0 || lsn == r1.next);
    FA(mf_wal_commit(w, lsn, &err) == 0);
    FA(mf_wal_close(w, &err) == 0);
    rc = wal_open(after, r1.count, &r2, &w, &err);
    FA(rc == 0);
    FA(r2.count == r1.count + 1 && r2.digest_at_mark == r1.digest);
    mf_wal_abandon(w);
    wal_dir_clear(false);
    return 0;
}

/* ------------------------------------------------------- libFuzzer glue */

void mf_fuzz_cleanup(void)
{
    if (wal_dir[0])
        wal_dir_clear(true);
    wal_dir[0] = '\0';
}

/* ------------------------------------------------------------- scram */

int mf_fuzz_scram(const uint8_t *data, size_t len)
{
    static mfi_scram_creds creds[2];
    static bool made;
    mf_error err;
    if (!made) {
        /* mongod's least iteration count: the PBKDF2 runs once */
        FA(mfi_scram_creds_make(MFI_SCRAM_SHA1, "u", "pencil", true, 4096, &creds[0], &err) == 0);
        FA(mfi_scram_creds_make(MFI_SCRAM_SHA256, "u", "pencil", true, 4096, &creds[1], &err) == 0);
        made = true;
    }
    if (len < 1)
        return 0;
    mfi_scram_mech m = (data[0] & 1) ? MFI_SCRAM_SHA1 : MFI_SCRAM_SHA256;
    data++, len--;
    const uint8_t *nul = memchr(data, 0, len);
    size_t first = nul ? (size_t)(nul - data) : len;
    const uint8_t *second = nul ? nul + 1 : data + len;
    size_t second_len = (size_t)(data + len - second);
    char *text = malloc(first + 1), *prepped = NULL;
    FA(text);
    memcpy(text, data, first);
    text[first] = '\0';
    if (mfi_saslprep(text, &prepped, &err) == 0) {
        FA(prepped);
        free(prepped);
    }
    free(text);
    mfi_scram_conv c;
    memset(&c, 0, sizeof c);
    if (mfi_scram_client_first(&c, m, data, first, &err) == 0) {
        mf_buf out = {0}, fin = {0};
        FA(c.client_first_bare != NULL);
        FA(mfi_scram_server_first(&c, &creds[m == MFI_SCRAM_SHA1 ? 0 : 1], &out, &err) == 0);
        FA(out.len > 2 && memcmp(out.data, "r=", 2) == 0);
        /* the server's nonce is random: no input can prove itself */
        FA(mfi_scram_client_final(&c, second, second_len, &fin, &err) != 0);
        mf_buf_free(&out);
        mf_buf_free(&fin);
    }
    mfi_scram_conv_clear(&c);
    return 0;
}

#ifdef MF_FUZZ_TARGET
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    mf_fuzz_init();
    atexit(mf_fuzz_cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return MF_FUZZ_TARGET(data, size);
}
#endif
