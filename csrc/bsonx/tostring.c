/*
 * tostring.c -- BSON rendered the way mongod's BSONObj::toString renders it
 * in error messages: "{ a: 1, b: \"x\", c: [ 1.5, true ] }", "{}" when
 * empty, ObjectId('...'), new Date(ms), /re/opts, BinData(t, HEX), and so
 * on.  Output goes to a fixed buffer; what does not fit becomes "...".
 */
#include "bsonx.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct sb {
    char *p;
    size_t cap, len;
    bool cut;
} sb;

static void put(sb *s, const char *str, size_t n)
{
    if (s->cut)
        return;
    if (s->len + n + 4 > s->cap) { /* room for "..." and NUL */
        s->cut = true;
        memcpy(s->p + s->len, "...", 3);
        s->len += 3;
        s->p[s->len] = '\0';
        return;
    }
    memcpy(s->p + s->len, str, n);
    s->len += n;
    s->p[s->len] = '\0';
}

static void puts_(sb *s, const char *str)
{
    put(s, str, strlen(str));
}

static void putf(sb *s, const char *fmt, ...) MF_PRINTF(2, 3);
static void putf(sb *s, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(s, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* str::escape: quotes, backslashes and control characters. */
static void put_escaped(sb *s, const char *str, size_t n)
{
    for (size_t i = 0; i < n && !s->cut; i++) {
        unsigned char c = (unsigned char)str[i];
        switch (c) {
        case '"': puts_(s, "\\\""); break;
        case '\\': puts_(s, "\\\\"); break;
        case '\n': puts_(s, "\\n"); break;
        case '\t': puts_(s, "\\t"); break;
        case '\r': puts_(s, "\\r"); break;
        case '\b': puts_(s, "\\b"); break;
        case '\f': puts_(s, "\\f"); break;
        default:
            if (c < 0x20) {
                putf(s, "\\x%02x", c);
            } else {
                /* A multi-byte character goes in whole or not at all: cut
                 * in two it would make the rendering (and the reply that
                 * quotes it) invalid UTF-8 (fuzz_bson's UTF-8 property,
                 * tests/fuzz_regressions/bson/render-cuts-a-utf8-sequence). */
                size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
                if (k > n - i)
                    k = n - i;
                /* A sequence that is not UTF-8 (a stray byte, the overlong
                 * NUL C0 80 that stored strings may hold) is escaped byte by
                 * byte, as mongod's str::escape does with invalid bytes
                 * (tests/fuzz_regressions/bson/render-overlong-nul). */
                if ((k == 1 && c >= 0x80) || !bson_utf8_validate(str + i, k, false)) {
                    putf(s, "\\x%02x", c);
                    continue;
                }
                put(s, str + i, k);
                i += k - 1;
            }
        }
    }
}

/* StringBuilder::appendDoubleNice: %.16g, plus ".0" when it looks integral. */
static void put_double(sb *s, double d)
{
    char tmp[40];
    snprintf(tmp, sizeof tmp, "%.16g", d);
    puts_(s, tmp);
    if (!strpbrk(tmp, ".eEnN"))
        puts_(s, ".0");
}

static void put_doc(sb *s, const bson_iter_t *container, bool is_array);

static void put_value(sb *s, const bson_iter_t *it)
{
    uint32_t len;
    const uint8_t *bin;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_DOUBLE:
        put_double(s, bson_iter_double(it));
        break;
    case BSON_TYPE_UTF8: {
        const char *str = bson_iter_utf8(it, &len);
        puts_(s, "\"");
        put_escaped(s, str, len);
        puts_(s, "\"");
        break;
    }
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        put_doc(s, it, bson_iter_type(it) == BSON_TYPE_ARRAY);
        break;
    case BSON_TYPE_BINARY: {
        bson_subtype_t sub;
        bson_iter_binary(it, &sub, &len, &bin);
        if (sub == BSON_SUBTYPE_UUID && len == 16) { /* as mongod: UUID("8-4-4-4-12") */
            puts_(s, "UUID(\"");
            for (uint32_t i = 0; i < 16; i++)
                putf(s, i == 4 || i == 6 || i == 8 || i == 10 ? "-%02x" : "%02x", bin[i]);
            puts_(s, "\")");
            break;
        }
        putf(s, "BinData(%d, ", (int)sub);
        for (uint32_t i = 0; i < len && !s->cut; i++)
            putf(s, "%02X", bin[i]);
        puts_(s, ")");
        break;
    }
    case BSON_TYPE_UNDEFINED:
        puts_(s, "undefined");
        break;
    case BSON_TYPE_OID: {
        char hex[25];
        bson_oid_to_string(bson_iter_oid(it), hex);
        putf(s, "ObjectId('%s')", hex);
        break;
    }
    case BSON_TYPE_BOOL:
        puts_(s, bson_iter_bool(it) ? "true" : "false");
        break;
    case BSON_TYPE_DATE_TIME:
        putf(s, "new Date(%" PRId64 ")", bson_iter_date_time(it));
        break;
    case BSON_TYPE_NULL:
        puts_(s, "null");
        break;
    case BSON_TYPE_REGEX: {
        const char *opts, *re = bson_iter_regex(it, &opts);
        puts_(s, "/");
        puts_(s, re);
        puts_(s, "/");
        puts_(s, opts);
        break;
    }
    case BSON_TYPE_DBPOINTER: {
        const char *coll;
        const bson_oid_t *oid;
        char hex[25];
        bson_iter_dbpointer(it, &len, &coll, &oid);
        bson_oid_to_string(oid, hex);
        puts_(s, "DBRef('");
        put_escaped(s, coll, len);
        putf(s, "', %s)", hex);
        break;
    }
    case BSON_TYPE_CODE: {
        /* two statements: an argument's order of evaluation is unspecified,
         * and `len` must be read after the call sets it */
        const char *code = bson_iter_code(it, &len);
        put_escaped(s, code, len);
        break;
    }
    case BSON_TYPE_SYMBOL: {
        const char *sym = bson_iter_symbol(it, &len);
        put_escaped(s, sym, len);
        break;
    }
    case BSON_TYPE_CODEWSCOPE: {
        uint32_t slen;
        const uint8_t *scope;
        const char *code = bson_iter_codewscope(it, &len, &slen, &scope);
        bson_t sdoc;
        puts_(s, "CodeWScope( ");
        put_escaped(s, code, len);
        puts_(s, ", ");
        if (bson_init_static(&sdoc, scope, slen)) {
            char inner[256];
            mf_bsonx_to_string(&sdoc, inner, sizeof inner);
            puts_(s, inner);
        }
        puts_(s, ")");
        break;
    }
    case BSON_TYPE_INT32:
        putf(s, "%d", bson_iter_int32(it));
        break;
    case BSON_TYPE_TIMESTAMP: {
        uint32_t t, i;
        bson_iter_timestamp(it, &t, &i);
        putf(s, "Timestamp(%u, %u)", t, i);
        break;
    }
    case BSON_TYPE_INT64:
        putf(s, "%" PRId64, bson_iter_int64(it));
        break;
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t d;
        char str[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &d);
        bson_decimal128_to_string(&d, str);
        putf(s, "NumberDecimal(\"%s\")", str);
        break;
    }
    case BSON_TYPE_MAXKEY:
        puts_(s, "MaxKey");
        break;
    case BSON_TYPE_MINKEY:
        puts_(s, "MinKey");
        break;
    default:
        puts_(s, "?");
    }
}

/* The fields `child` (positioned before the first) iterates. */
static void put_fields(sb *s, bson_iter_t *child, bool is_array)
{
    bool first = true;
    puts_(s, is_array ? "[" : "{");
    while (bson_iter_next(child) && !s->cut) {
        puts_(s, first ? " " : ", ");
        first = false;
        if (!is_array) {
            puts_(s, bson_iter_key(child));
            puts_(s, ": ");
        }
        put_value(s, child);
    }
    puts_(s, first ? (is_array ? "]" : "}") : (is_array ? " ]" : " }"));
}

static void put_doc(sb *s, const bson_iter_t *container, bool is_array)
{
    bson_iter_t child;
    if (bson_iter_recurse(container, &child))
        put_fields(s, &child, is_array);
    else
        puts_(s, "?");
}

void mf_bsonx_to_string(const bson_t *doc, char *out, size_t cap)
{
    sb s = {.p = out, .cap = cap};
    bson_iter_t it;
    if (cap == 0)
        return;
    out[0] = '\0';
    if (bson_iter_init(&it, doc))
        put_fields(&s, &it, false);
}

void mf_bsonx_elem_to_string(const bson_iter_t *it, bool with_name, char *out, size_t cap)
{
    sb s = {.p = out, .cap = cap};
    if (cap == 0)
        return;
    out[0] = '\0';
    if (with_name) {
        puts_(&s, bson_iter_key(it));
        puts_(&s, ": ");
    }
    put_value(&s, it);
}
