/*
 * validate.c -- one check, at the boundary, for BSON from outside.
 *
 * The checks and their messages are mongod's (bson_validate.cpp), so a
 * client sees the same error from us as from mongod; the code is our own.
 * libbson's bson_validate() is not used: it reports only an offset, and
 * libbson 1.23 accepts invalid UTF-8 even with BSON_VALIDATE_UTF8 (the C
 * case /bsonx/validate/rejects_bad_utf8 caught it).
 *
 * The walk is iterative, with one frame per open document, array or
 * code-with-scope, so deep input cannot exhaust the stack:
 *
 *   frame[0]   the top-level document          end = data + len
 *   frame[k]   the k-th nested container       end = its start + its length
 *
 * Invariants while walking:
 *   1. ptr < top end before reading any byte (the top document's last byte
 *      is its EOO, so every element must end strictly before it);
 *   2. at each EOO, ptr + 1 == the frame's end ("incorrect BSON length");
 *   3. at most MF_BSON_MAX_DEPTH + 1 frames (Overflow past that).
 * Beyond mongod: every key and every string/code/symbol/regex must be
 * UTF-8 (InvalidBSON), as the project's spec asks.
 */
#include "bsonx.h"

#include <stdio.h>
#include <string.h>

#define MAX_FRAMES (MF_BSON_MAX_DEPTH + 1)

typedef struct frame {
    const uint8_t *end;  /* one past this container's last byte */
    const char *name;    /* the field holding it (NULL for the top) */
    bool is_code_scope;  /* the dummy frame around a code-with-scope */
} frame;

typedef struct walker {
    const uint8_t *ptr, *end; /* cursor, and the top document's end */
    const char *elem;         /* the element being checked, for context */
    frame frames[MAX_FRAMES];
    int depth;                /* index of the current frame */
    const uint8_t *id_start;  /* the last top-level scalar _id element checked */
    const uint8_t *id_end;
    mf_error *err;
} walker;

/* "_id: <value>" for the checked top-level _id element. */
static void render_id(const walker *w, char *out, size_t cap)
{
    size_t elen = (size_t)(w->id_end - w->id_start);
    uint8_t *doc = bson_malloc(elen + 5);
    bson_t b;
    bson_iter_t it;
    mf_store_i32le(doc, (int32_t)(elen + 5));
    memcpy(doc + 4, w->id_start, elen);
    doc[elen + 4] = 0;
    if (bson_init_static(&b, doc, elen + 5) && bson_iter_init(&it, &b) && bson_iter_next(&it))
        mf_bsonx_elem_to_string(&it, true, out, cap);
    bson_free(doc);
}

/* mongod's str::escape, which its validator applies to the whole context:
 * quotes, backslashes and control characters. */
static void escape_ctx(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (; *in && o + 7 < cap; in++) {
        unsigned char c = (unsigned char)*in;
        const char *rep = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t" : NULL;
        if (rep)
            o += (size_t)snprintf(out + o, cap - o, "%s", rep);
        else if (c < 0x20)
            o += (size_t)snprintf(out + o, cap - o, "\\u00%02x", c);
        else
            out[o++] = (char)c;
    }
    out[o] = '\0';
}

/* mongod's context suffix: " in element with field name 'a.b.c' in object
 * with _id: 1" (or "unknown _id"), escaped as str::escape does. */
static int fail(walker *w, int code, const char *what)
{
    char ctx[MF_ERRMSG_MAX];
    size_t n = 0;
    n += (size_t)snprintf(ctx + n, sizeof ctx - n, "in element with field name '");
    for (int i = 1; i <= w->depth && n < sizeof ctx; i++)
        if (w->frames[i].name && !w->frames[i].is_code_scope)
            n += (size_t)snprintf(ctx + n, sizeof ctx - n, "%s.", w->frames[i].name);
    if (n < sizeof ctx)
        n += (size_t)snprintf(ctx + n, sizeof ctx - n, "%s' in object with ",
                              w->elem ? w->elem + 1 : "?");
    if (n < sizeof ctx) {
        char idstr[160] = "unknown _id";
        if (w->id_start && w->id_end)
            render_id(w, idstr, sizeof idstr);
        snprintf(ctx + n, sizeof ctx - n, "%s", idstr);
    }
    char escaped[MF_ERRMSG_MAX];
    escape_ctx(ctx, escaped, sizeof escaped);
    return mf_error_set(w->err, code, "%s %s", what, escaped);
}

static bool skip(walker *w, size_t len)
{
    if (len >= (size_t)(w->end - w->ptr))
        return false;
    w->ptr += len;
    return true;
}

static bool read_u32(walker *w, uint32_t *v)
{
    if (4 >= (size_t)(w->end - w->ptr))
        return false;
    *v = mf_load_u32le(w->ptr);
    w->ptr += 4;
    return true;
}

/* int32 length, bytes, NUL: string, code, symbol, the dbpointer's name. */
static int skip_string(walker *w, bool check_utf8)
{
    uint32_t len;
    if (!read_u32(w, &len) || !skip(w, len))
        return fail(w, MF_InvalidBSON, "BSON size is larger than buffer size");
    if (len == 0 || w->ptr[-1] != 0)
        return fail(w, MF_InvalidBSON, "Not null terminated string");
    if (check_utf8 && !bson_utf8_validate((const char *)w->ptr - len, len - 1, true))
        return fail(w, MF_InvalidBSON, "Found string that doesn't follow UTF-8 encoding.");
    return 0;
}

static int skip_cstring(walker *w)
{
    const uint8_t *nul = memchr(w->ptr, 0, (size_t)(w->end - w->ptr));
    if (!nul || nul + 1 >= w->end)
        return fail(w, MF_InvalidBSON, "BSON size is larger than buffer size");
    if (!bson_utf8_validate((const char *)w->ptr, (size_t)(nul - w->ptr), false))
        return fail(w, MF_InvalidBSON, "Found string that doesn't follow UTF-8 encoding.");
    w->ptr = nul + 1;
    return 0;
}

/* Open a nested document at ptr (its length field). */
static int push(walker *w, const char *name, bool is_code_scope)
{
    if (w->depth + 1 >= MAX_FRAMES)
        return fail(w, MF_Overflow, "BSONObj exceeds maximum nested object depth");
    const uint8_t *obj = w->ptr;
    uint32_t len;
    if (!read_u32(w, &len))
        return fail(w, MF_InvalidBSON, "BSON size is larger than buffer size");
    if ((int32_t)len < 5)
        return fail(w, MF_InvalidBSON, "Nested BSON object has to be at least 5 bytes");
    frame *f = &w->frames[++w->depth];
    f->end = obj + len;
    f->name = name;
    f->is_code_scope = is_code_scope;
    return 0;
}

static int check_elem(walker *w, uint8_t type, const char *name)
{
    uint32_t len;
    int rc;
    switch (type) {
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DATE_TIME:
    case BSON_TYPE_TIMESTAMP:
    case BSON_TYPE_INT64:
        return skip(w, 8) ? 0 : fail(w, MF_InvalidBSON, "BSON size is larger than buffer size");
    case BSON_TYPE_INT32:
        return skip(w, 4) ? 0 : fail(w, MF_InvalidBSON, "BSON size is larger than buffer size");
    case BSON_TYPE_OID:
        return skip(w, 12) ? 0 : fail(w, MF_InvalidBSON, "BSON size is larger than buffer size");
    case BSON_TYPE_DECIMAL128:
        return skip(w, 16) ? 0 : fail(w, MF_InvalidBSON, "BSON size is larger than buffer size");
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_NULL:
    case BSON_TYPE_MINKEY:
    case BSON_TYPE_MAXKEY:
        return skip(w, 0) ? 0 : fail(w, MF_InvalidBSON, "BSON size is larger than buffer size");
    case BSON_TYPE_UTF8:
    case BSON_TYPE_CODE:
    case BSON_TYPE_SYMBOL:
        return skip_string(w, true);
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        return push(w, name, false);
    case BSON_TYPE_BINARY:
        if (!read_u32(w, &len) || !skip(w, len) || !skip(w, 1))
            return fail(w, MF_InvalidBSON, "BSON size is larger than buffer size");
        /* The old binary subtype 2 repeats its length inside; mongod skips
         * the check, but drivers refuse such a value on the way back (the
         * BSON corpus lists it among decode errors), so it is refused here
         * before it can be stored. */
        if (w->ptr[-(int64_t)len - 1] == 2 &&
            (len < 4 || mf_load_u32le(w->ptr - len) != len - 4))
            return fail(w, MF_InvalidBSON, "Invalid BinData subtype 2 length");
        return 0;
    case BSON_TYPE_BOOL:
        if (!skip(w, 1))
            return fail(w, MF_InvalidBSON, "BSON size is larger than buffer size");
        if (w->ptr[-1] > 1)
            return fail(w, MF_InvalidBSON, "BSON bool is neither false nor true");
        return 0;
    case BSON_TYPE_REGEX:
        if ((rc = skip_cstring(w)) != 0)
            return rc;
        return skip_cstring(w);
    case BSON_TYPE_DBPOINTER:
        if ((rc = skip_string(w, true)) != 0)
            return rc;
        return skip(w, 12) ? 0 : fail(w, MF_InvalidBSON, "BSON size is larger than buffer size");
    case BSON_TYPE_CODEWSCOPE:
        /* A frame for the whole value (its length is checked at the scope's
         * end), then the code string, then a frame for the scope. */
        if ((rc = push(w, name, true)) != 0 || (rc = skip_string(w, true)) != 0)
            return rc;
        return push(w, name, false);
    default: {
        char msg[64];
        snprintf(msg, sizeof msg, "Unrecognized BSON type %u", (unsigned)type);
        return fail(w, MF_InvalidBSON, msg);
    }
    }
}

int mf_bsonx_validate_prefix(const uint8_t *data, size_t avail, size_t *len, mf_error *err)
{
    walker w = {.err = err};
    int rc;

    if (avail < 5)
        return fail(&w, MF_InvalidBSON, "BSON data has to be at least 5 bytes");
    int32_t n = mf_load_i32le(data);
    if (n < 5)
        return fail(&w, MF_InvalidBSON, "BSON data has to be at least 5 bytes");
    if ((size_t)n > avail)
        return fail(&w, MF_InvalidBSON, "Incorrect BSON length");
    w.end = data + n;
    if (w.end[-1] != 0)
        return fail(&w, MF_InvalidBSON, "BSON object not terminated with EOO");
    w.frames[0].end = w.end;
    w.ptr = data + 4;

    for (;;) {
        if (w.ptr >= w.end)
            return fail(&w, MF_InvalidBSON, "BSON size is larger than buffer size");
        /* Elements until this frame's EOO.  The top document ends in a NUL,
         * so a key's NUL is always found before w.end. */
        while (*w.ptr) {
            uint8_t type = *w.ptr;
            const char *key = (const char *)w.ptr + 1;
            size_t klen = strlen(key);
            w.elem = (const char *)w.ptr;
            w.ptr += klen + 2;
            if (w.ptr >= w.end)
                return fail(&w, MF_InvalidBSON, "BSON size is larger than buffer size");
            if (!bson_utf8_validate(key, klen, false))
                return fail(&w, MF_InvalidBSON,
                            "Found string that doesn't follow UTF-8 encoding.");
            const uint8_t *start = (const uint8_t *)w.elem;
            bool top = w.depth == 0;
            if ((rc = check_elem(&w, type, key)) != 0)
                return rc;
            /* As mongod's precise validator: a top-level _id names the
             * document once validated -- the last one, and only a scalar
             * (a container has opened its frame by now, so mongod's check
             * misses it).  Tracking a container here once set the start of
             * a second _id past the end of the first: a negative length
             * rendering it (fuzz_bson, tests/fuzz_regressions/bson/
             * second-id-a-document-then-an-error). */
            if (top && w.depth == 0 && strcmp(key, "_id") == 0) {
                w.id_start = start;
                w.id_end = w.ptr;
            }
            if (w.ptr >= w.end)
                return fail(&w, MF_InvalidBSON, "BSON size is larger than buffer size");
        }
        /* The EOO byte: it must be where the frame's length said. */
        if (++w.ptr != w.frames[w.depth].end)
            return fail(&w, MF_InvalidBSON, "incorrect BSON length");
        if (w.depth == 0)
            break;
        w.depth--;
        /* Closing a code-with-scope's scope closes its outer frame too. */
        if (w.depth > 0 && w.frames[w.depth].is_code_scope) {
            if (w.ptr != w.frames[w.depth].end)
                return fail(&w, MF_InvalidBSON, "incorrect BSON length");
            w.depth--;
        }
    }
    *len = (size_t)n;
    return 0;
}

int mf_bsonx_validate(const uint8_t *data, size_t len, mf_error *err)
{
    size_t n;
    int rc = mf_bsonx_validate_prefix(data, len, &n, err);
    if (rc == 0 && n != len)
        return mf_error_set(err, MF_InvalidBSON,
                            "BSON size field %zu does not match the %zu bytes present", n, len);
    return rc;
}

/* Levels below the document `it` iterates, up to `left` more. */
static bool depth_exceeds(bson_iter_t *it, int left)
{
    while (bson_iter_next(it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(it) && !BSON_ITER_HOLDS_ARRAY(it))
            continue;
        bson_iter_t sub;
        if (!bson_iter_recurse(it, &sub) || !bson_iter_next(&sub))
            continue; /* empty: does not count */
        if (left == 0)
            return true;
        bson_iter_recurse(it, &sub);
        if (depth_exceeds(&sub, left - 1))
            return true;
    }
    return false;
}

bool mf_bsonx_depth_exceeds(const bson_t *doc, int max_levels)
{
    bson_iter_t it;
    return bson_iter_init(&it, doc) && depth_exceeds(&it, max_levels - 1);
}
