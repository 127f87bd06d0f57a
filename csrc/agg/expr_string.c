/*
 * expr_string.c -- string operators of the aggregation language: $concat,
 * $toUpper, $toLower, $strLenCP, $strLenBytes, $substrCP, $substrBytes,
 * $split, $trim, $ltrim, $rtrim, $indexOfCP, $strcasecmp, $replaceOne,
 * $replaceAll.  Also mfi_coerce_to_string, which $toString shares.
 *
 * Strings are UTF-8.  "CP" operators count code points: every byte that is
 * not a continuation byte (10xxxxxx) starts one.  Case mapping is ASCII
 * only, as mongod's.
 */
#include "expr_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool is_cont(unsigned char b) { return (b & 0xC0) == 0x80; }

int mfi_set_str(val *v, const char *s, size_t len, mf_error *err)
{
    char *p = bson_malloc(len + 1);
    if (!p)
        return mf_error_oom(err);
    memcpy(p, s, len);
    p[len] = 0;
    v->value_type = BSON_TYPE_UTF8;
    v->value.v_utf8.str = p;
    v->value.v_utf8.len = (uint32_t)len;
    return 0;
}

/* A double as the shortest text that reads back to the same value. */
static void double_str(double d, char *out, size_t cap)
{
    if (isnan(d)) {
        snprintf(out, cap, "NaN");
        return;
    }
    if (isinf(d)) {
        snprintf(out, cap, d < 0 ? "-Infinity" : "Infinity");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, d);
        if (strtod(out, NULL) == d)
            return;
    }
}

/* mongod's Value::coerceToString: strings as they are, numbers in decimal,
 * dates as ISO-8601 with milliseconds, nullish as "".  Others: 16007. */
int mfi_coerce_to_string(const val *v, val *out, mf_error *err)
{
    char buf[64];
    switch (v->value_type) {
    case BSON_TYPE_EOD: case BSON_TYPE_NULL: case BSON_TYPE_UNDEFINED:
        return mfi_set_str(out, "", 0, err);
    case BSON_TYPE_UTF8:
        return mfi_set_str(out, v->value.v_utf8.str, v->value.v_utf8.len, err);
    case BSON_TYPE_SYMBOL:
        return mfi_set_str(out, v->value.v_symbol.symbol, v->value.v_symbol.len, err);
    case BSON_TYPE_INT32:
        snprintf(buf, sizeof buf, "%" PRId32, v->value.v_int32);
        break;
    case BSON_TYPE_INT64:
        snprintf(buf, sizeof buf, "%" PRId64, v->value.v_int64);
        break;
    case BSON_TYPE_DOUBLE:
        double_str(v->value.v_double, buf, sizeof buf);
        break;
    case BSON_TYPE_DATE_TIME: {
        int64_t ms = v->value.v_datetime;
        int64_t secs = ms / 1000, rem = ms % 1000;
        if (rem < 0) {
            rem += 1000;
            secs--;
        }
        time_t t = (time_t)secs;
        struct tm tm;
        if (!gmtime_r(&t, &tm))
            return mf_error_set(err, 16007, "can't convert from BSON type date to String");
        snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)rem);
        break;
    }
    case BSON_TYPE_DECIMAL128:
        bson_decimal128_to_string(&v->value.v_decimal128, buf);
        break;
    default:
        return mf_error_set(err, 16007, "can't convert from BSON type %s to String",
                            mfi_type_name(v));
    }
    return mfi_set_str(out, buf, strlen(buf), err);
}

static const char *sdata(const val *v) { return v->value.v_utf8.str; }
static size_t slen(const val *v) { return v->value.v_utf8.len; }

/* --------------------------------------------------------------- simple */

static int op_concat(const node *n, ctx *c, val *out)
{
    mf_buf b = {0};
    int rc = 0;
    for (size_t i = 0; i < n->nargs && rc == 0; i++) {
        val v;
        if ((rc = mfi_eval(n->args[i], c, &v)) != 0)
            break;
        if (nullish(&v)) {
            mf_buf_free(&b);
            set_null(out);
            return 0;
        }
        if (v.value_type != BSON_TYPE_UTF8)
            rc = mf_error_set(c->err, 16702, "$concat only supports strings, not %s",
                              mfi_type_name(&v));
        else if (mf_buf_append(&b, sdata(&v), slen(&v)) != 0)
            rc = mf_error_oom(c->err);
        mfi_val_free(&v);
    }
    if (rc == 0)
        rc = mfi_set_str(out, b.len ? (const char *)b.data : "", b.len, c->err);
    mf_buf_free(&b);
    return rc;
}

static int case_op(const node *n, ctx *c, val *out, bool upper)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc != 0)
        return rc;
    rc = mfi_coerce_to_string(&v, out, c->err);
    mfi_val_free(&v);
    if (rc != 0)
        return rc;
    for (char *p = out->value.v_utf8.str; *p; p++) {
        if (upper && *p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
        else if (!upper && *p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    }
    return 0;
}

static int op_toupper(const node *n, ctx *c, val *out) { return case_op(n, c, out, true); }
static int op_tolower(const node *n, ctx *c, val *out) { return case_op(n, c, out, false); }

static int strlen_op(const node *n, ctx *c, val *out, bool cp)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc != 0)
        return rc;
    if (v.value_type != BSON_TYPE_UTF8) {
        rc = mf_error_set(c->err, cp ? 34471 : 34473, "%s requires a string argument, found: %s",
                          n->op->name, mfi_type_name(&v));
        mfi_val_free(&v);
        return rc;
    }
    size_t k = slen(&v);
    if (cp) {
        k = 0;
        for (size_t i = 0; i < slen(&v); i++)
            k += !is_cont((unsigned char)sdata(&v)[i]);
    }
    set_int_or_long(out, (int64_t)k);
    mfi_val_free(&v);
    return 0;
}

static int op_strlencp(const node *n, ctx *c, val *out) { return strlen_op(n, c, out, true); }
static int op_strlenbytes(const node *n, ctx *c, val *out) { return strlen_op(n, c, out, false); }

/* ------------------------------------------------------------ substrings */

static int op_substrbytes(const node *n, ctx *c, val *out)
{
    val v[3], s;
    char buf[64];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    s.value_type = BSON_TYPE_EOD;
    if (!is_num(&v[1])) {
        rc = mf_error_set(c->err, 16034, "$substrBytes: starting index must be a numeric type "
                          "(is BSON type %s)", mfi_type_name(&v[1]));
    } else if (!is_num(&v[2])) {
        rc = mf_error_set(c->err, 16035, "$substrBytes: length must be a numeric type (is BSON "
                          "type %s)", mfi_type_name(&v[2]));
    } else if (as_double(&v[1]) < 0) {
        mfi_val_str(&v[1], buf, sizeof buf);
        rc = mf_error_set(c->err, 50752, "$substrBytes: starting index must be non-negative "
                          "(got: %s)", buf);
    } else if ((rc = mfi_coerce_to_string(&v[0], &s, c->err)) == 0) {
        size_t len = slen(&s), lo = (size_t)as_long(&v[1]);
        int64_t want = as_long(&v[2]);
        if (lo > len) {
            rc = mfi_set_str(out, "", 0, c->err);
        } else {
            size_t k = want < 0 || (uint64_t)want > len - lo ? len - lo : (size_t)want;
            const unsigned char *p = (const unsigned char *)sdata(&s);
            if (lo < len && is_cont(p[lo]))
                rc = mf_error_set(c->err, 28656, "$substrBytes:  Invalid range, starting index "
                                  "is a UTF-8 continuation byte.");
            else if (lo + k < len && is_cont(p[lo + k]))
                rc = mf_error_set(c->err, 28657, "$substrBytes:  Invalid range, ending index is "
                                  "in the middle of a UTF-8 character.");
            else
                rc = mfi_set_str(out, sdata(&s) + lo, k, c->err);
        }
    }
    mfi_val_free(&s);
    mfi_free_all(v, 3);
    return rc;
}

/* Byte offset of code point `cp` in s (len when past the end). */
static size_t cp_offset(const char *s, size_t len, size_t cp)
{
    size_t i = 0;
    while (i < len && cp > 0) {
        i++;
        while (i < len && is_cont((unsigned char)s[i]))
            i++;
        cp--;
    }
    return i;
}

static int op_substrcp(const node *n, ctx *c, val *out)
{
    val v[3], s;
    char buf[64];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    s.value_type = BSON_TYPE_EOD;
    if (!is_num(&v[1])) {
        rc = mf_error_set(c->err, 34450, "$substrCP: starting index must be a numeric type (is "
                          "BSON type %s)", mfi_type_name(&v[1]));
    } else if (!mfi_integral32(&v[1])) {
        mfi_val_str(&v[1], buf, sizeof buf);
        rc = mf_error_set(c->err, 34451, "$substrCP: starting index cannot be represented as a "
                          "32-bit integral value: %s", buf);
    } else if (!is_num(&v[2])) {
        rc = mf_error_set(c->err, 34452, "$substrCP: length must be a numeric type (is BSON type "
                          "%s)", mfi_type_name(&v[2]));
    } else if (!mfi_integral32(&v[2])) {
        mfi_val_str(&v[2], buf, sizeof buf);
        rc = mf_error_set(c->err, 34453, "$substrCP: length cannot be represented as a 32-bit "
                          "integral value: %s", buf);
    } else if (as_long(&v[2]) < 0) {
        rc = mf_error_set(c->err, 34454, "$substrCP: length must be a nonnegative integer.");
    } else if (as_long(&v[1]) < 0) {
        rc = mf_error_set(c->err, 34455, "$substrCP: the starting index must be nonnegative "
                          "integer.");
    } else if ((rc = mfi_coerce_to_string(&v[0], &s, c->err)) == 0) {
        size_t a = cp_offset(sdata(&s), slen(&s), (size_t)as_long(&v[1]));
        size_t b = a + cp_offset(sdata(&s) + a, slen(&s) - a, (size_t)as_long(&v[2]));
        rc = mfi_set_str(out, sdata(&s) + a, b - a, c->err);
    }
    mfi_val_free(&s);
    mfi_free_all(v, 3);
    return rc;
}

/* ------------------------------------------------------------ searching */

static const char *find_bytes(const char *h, size_t hl, const char *nd, size_t nl)
{
    if (nl == 0)
        return h;
    for (size_t i = 0; i + nl <= hl; i++)
        if (memcmp(h + i, nd, nl) == 0)
            return h + i;
    return NULL;
}

static int op_split(const node *n, ctx *c, val *out)
{
    val v[2];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    if (nullish(&v[0]) || nullish(&v[1])) {
        set_null(out);
    } else if (v[0].value_type != BSON_TYPE_UTF8) {
        rc = mf_error_set(c->err, 40085, "$split requires an expression that evaluates to a "
                          "string as a first argument, found: %s", mfi_type_name(&v[0]));
    } else if (v[1].value_type != BSON_TYPE_UTF8) {
        rc = mf_error_set(c->err, 40086, "$split requires an expression that evaluates to a "
                          "string as a second argument, found: %s", mfi_type_name(&v[1]));
    } else if (slen(&v[1]) == 0) {
        rc = mf_error_set(c->err, 40087, "$split requires a non-empty separator");
    } else {
        bson_t arr;
        bson_init(&arr);
        const char *p = sdata(&v[0]), *end = p + slen(&v[0]);
        uint32_t i = 0;
        for (;;) {
            const char *hit = find_bytes(p, (size_t)(end - p), sdata(&v[1]), slen(&v[1]));
            const char *stop = hit ? hit : end;
            char kb[16];
            const char *key;
            size_t kl = mf_uint32_to_key(i++, &key, kb, sizeof kb);
            bson_append_utf8(&arr, key, (int)kl, p, (int)(stop - p));
            if (!hit)
                break;
            p = hit + slen(&v[1]);
        }
        rc = mfi_set_steal(out, &arr, BSON_TYPE_ARRAY, c->err);
    }
    mfi_free_all(v, 2);
    return rc;
}

/* An optional index operand of $indexOfCP/$indexOfArray: 40096 when not an
 * integer that fits in 32 bits, 40097 when negative. */
int mfi_index_arg(const char *op, const char *what, const val *v, int64_t *out, mf_error *err)
{
    char buf[64];
    mfi_val_str(v, buf, sizeof buf);
    if (!mfi_integral32(v))
        return mf_error_set(err, 40096, "%s requires an integral %s, found a value of type: "
                            "%s, with value: %s", op, what, mfi_type_name(v), buf);
    *out = as_long(v);
    if (*out < 0)
        return mf_error_set(err, 40097, "%s requires a nonnegative %s, found: %s", op, what,
                            buf);
    return 0;
}

static int op_indexofcp(const node *n, ctx *c, val *out)
{
    val v[4];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    size_t na = n->nargs;
    int64_t lo = 0, hi = INT64_MAX;
    if (nullish(&v[0])) {
        set_null(out);
    } else if (v[0].value_type != BSON_TYPE_UTF8) {
        rc = mf_error_set(c->err, 40093, "$indexOfCP requires a string as the first argument, "
                          "found: %s", mfi_type_name(&v[0]));
    } else if (v[1].value_type != BSON_TYPE_UTF8) {
        rc = mf_error_set(c->err, 40094, "$indexOfCP requires a string as the second argument, "
                          "found: %s", mfi_type_name(&v[1]));
    } else if ((na > 2 && (rc = mfi_index_arg("$indexOfCP", "starting index", &v[2], &lo,
                                               c->err)) != 0) ||
               (na > 3 && (rc = mfi_index_arg("$indexOfCP", "ending index", &v[3], &hi,
                                               c->err)) != 0)) {
        /* rc set */
    } else {
        const char *s = sdata(&v[0]);
        size_t len = slen(&v[0]), nl = slen(&v[1]), ncp = 0;
        for (size_t i = 0; i < len; i++)
            ncp += !is_cont((unsigned char)s[i]);
        int64_t found = -1;
        size_t at = cp_offset(s, len, (size_t)lo);
        /* the token may run past `hi`; it must start before it */
        for (int64_t cp = lo; (size_t)lo <= ncp && cp < hi; cp++) {
            if (at + nl <= len && memcmp(s + at, sdata(&v[1]), nl) == 0) {
                found = cp;
                break;
            }
            if (at >= len)
                break;
            at += cp_offset(s + at, len - at, 1);
        }
        set_int_or_long(out, found);
    }
    mfi_free_all(v, na);
    return rc;
}

static int op_strcasecmp(const node *n, ctx *c, val *out)
{
    val v[2], s[2];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    s[0].value_type = s[1].value_type = BSON_TYPE_EOD;
    if ((rc = mfi_coerce_to_string(&v[0], &s[0], c->err)) == 0 &&
        (rc = mfi_coerce_to_string(&v[1], &s[1], c->err)) == 0) {
        const unsigned char *a = (const unsigned char *)sdata(&s[0]);
        const unsigned char *b = (const unsigned char *)sdata(&s[1]);
        size_t la = slen(&s[0]), lb = slen(&s[1]), i = 0;
        int r = 0;
        for (; i < la && i < lb && r == 0; i++) {
            int x = a[i] >= 'A' && a[i] <= 'Z' ? a[i] + 32 : a[i];
            int y = b[i] >= 'A' && b[i] <= 'Z' ? b[i] + 32 : b[i];
            r = x < y ? -1 : x > y;
        }
        if (r == 0)
            r = la < lb ? -1 : la > lb;
        set_int(out, r);
    }
    mfi_free_all(s, 2);
    mfi_free_all(v, 2);
    return rc;
}

/* ----------------------------------------------------- named-argument ops */

/* Parse {name: <expr>, ...} into n->args in the order of `names`; an
 * absent optional one (bit i of `optional`) is a NULL arg.  Errors carry
 * the operator's codes: `c_obj` not an object, `c_unknown` an unknown
 * field, `c_missing[i]` a required field absent; the formats get the
 * operator's name then the type or the field name.  At most 8 names. */
int mfi_parse_named(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                    const char *const *names, size_t k, unsigned optional, int c_obj,
                    const char *obj_fmt, int c_unknown, const int *c_missing,
                    const char *missing_fmt, mf_error *err)
{
    if (k > 8)
        return mf_error_set(err, MF_InternalError, "%s: too many named arguments", op->name);
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, c_obj, obj_fmt, op->name,
                            mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_t ch;
    struct { bson_iter_t it; } at[8]; /* bson_iter_t alone is over-aligned for an array */
    bool has[8] = {false};
    bson_iter_recurse(it, &ch);
    while (bson_iter_next(&ch)) {
        size_t i = 0;
        while (i < k && strcmp(bson_iter_key(&ch), names[i]) != 0)
            i++;
        if (i == k)
            return mf_error_set(err, c_unknown, "%s found an unknown argument: %s", op->name,
                                bson_iter_key(&ch));
        at[i].it = ch;
        has[i] = true;
    }
    for (size_t i = 0; i < k; i++)
        if (!has[i] && !(optional & (1u << i)))
            return mf_error_set(err, c_missing[i], missing_fmt, op->name, names[i]);
    for (size_t i = 0; i < k; i++) {
        node *a = NULL;
        int rc;
        if (has[i] && (rc = mfi_parse_node(&at[i].it, vsc, &a, err)) != 0)
            return rc;
        if ((rc = mfi_push_arg(n, a, err)) != 0)
            return rc;
    }
    return 0;
}

static int parse_trim(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                      mf_error *err)
{
    static const char *const names[] = {"input", "chars"};
    static const int missing[] = {50695, 0};
    return mfi_parse_named(op, it, vsc, n, names, 2, 2u, 50696,
                           "%s only supports an object as an argument, found: %s", 50694, missing,
                           "%s requires an '%s' field", err);
}

/* Decode the code point at s[*i] (advancing *i); bad UTF-8 is one byte. */
static uint32_t next_cp(const char *s, size_t len, size_t *i)
{
    const unsigned char *p = (const unsigned char *)s;
    uint32_t c = p[(*i)++];
    int more = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
    c &= more == 3 ? 0x07 : more == 2 ? 0x0F : more == 1 ? 0x1F : 0xFF;
    while (more-- > 0 && *i < len && is_cont(p[*i]))
        c = (c << 6) | (p[(*i)++] & 0x3F);
    return c;
}

static bool default_ws(uint32_t c)
{
    return c == 0 || c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

static bool in_set(uint32_t c, const val *chars)
{
    if (!chars)
        return default_ws(c);
    size_t i = 0;
    while (i < slen(chars))
        if (next_cp(sdata(chars), slen(chars), &i) == c)
            return true;
    return false;
}

static int trim_op(const node *n, ctx *c, val *out, bool left, bool right)
{
    val in, ch;
    char buf[128];
    int rc = mfi_eval(n->args[0], c, &in);
    if (rc != 0)
        return rc;
    ch.value_type = BSON_TYPE_EOD;
    if (n->args[1] && (rc = mfi_eval(n->args[1], c, &ch)) != 0) {
        mfi_val_free(&in);
        return rc;
    }
    if (nullish(&in) || (n->args[1] && nullish(&ch))) {
        set_null(out);
    } else if (in.value_type != BSON_TYPE_UTF8) {
        mfi_val_str(&in, buf, sizeof buf);
        rc = mf_error_set(c->err, 50699, "%s requires its input to be a string, got %s (of "
                          "type %s) instead.", n->op->name, buf, mfi_type_name(&in));
    } else if (n->args[1] && ch.value_type != BSON_TYPE_UTF8) {
        mfi_val_str(&ch, buf, sizeof buf);
        rc = mf_error_set(c->err, 50700, "%s requires 'chars' to be a string, got %s (of type "
                          "%s) instead.", n->op->name, buf, mfi_type_name(&ch));
    } else {
        const char *s = sdata(&in);
        size_t len = slen(&in), a = 0, b = len;
        const val *set = n->args[1] ? &ch : NULL;
        while (left && a < len) {
            size_t i = a;
            if (!in_set(next_cp(s, len, &i), set))
                break;
            a = i;
        }
        while (right && b > a) {
            size_t st = b - 1;
            while (st > a && is_cont((unsigned char)s[st]))
                st--;
            size_t i = st;
            if (!in_set(next_cp(s, len, &i), set))
                break;
            b = st;
        }
        rc = mfi_set_str(out, s + a, b - a, c->err);
    }
    mfi_val_free(&in);
    mfi_val_free(&ch);
    return rc;
}

static int op_trim(const node *n, ctx *c, val *out) { return trim_op(n, c, out, true, true); }
static int op_ltrim(const node *n, ctx *c, val *out) { return trim_op(n, c, out, true, false); }
static int op_rtrim(const node *n, ctx *c, val *out) { return trim_op(n, c, out, false, true); }

static int parse_replace(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                         mf_error *err)
{
    static const char *const names[] = {"input", "find", "replacement"};
    static const int missing[] = {51749, 51748, 51747};
    return mfi_parse_named(op, it, vsc, n, names, 3, 0u, 51751,
                           "%s requires an object as an argument, found: %s", 51750, missing,
                           "%s requires '%s' to be specified", err);
}

static int replace_op(const node *n, ctx *c, val *out, bool all)
{
    static const char *const names[] = {"input", "find", "replacement"};
    val v[3];
    char buf[128];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    for (int i = 0; i < 3 && rc == 0; i++) {
        if (!nullish(&v[i]) && v[i].value_type != BSON_TYPE_UTF8) {
            mfi_val_str(&v[i], buf, sizeof buf);
            rc = mf_error_set(c->err, 51746 - i, "%s requires that '%s' be a string, found: %s",
                              n->op->name, names[i], buf);
        }
    }
    if (rc == 0 && (nullish(&v[0]) || nullish(&v[1]) || nullish(&v[2]))) {
        set_null(out);
    } else if (rc == 0) {
        mf_buf b = {0};
        const char *p = sdata(&v[0]), *end = p + slen(&v[0]);
        size_t fl = slen(&v[1]);
        bool ok = true, first = true;
        /* An empty `find` matches before every code point and at the end. */
        while (ok) {
            const char *hit = (all || first) ? find_bytes(p, (size_t)(end - p), sdata(&v[1]), fl)
                                             : NULL;
            first = false;
            if (!hit) {
                ok = mf_buf_append(&b, p, (size_t)(end - p)) == 0;
                break;
            }
            ok = mf_buf_append(&b, p, (size_t)(hit - p)) == 0 &&
                 mf_buf_append(&b, sdata(&v[2]), slen(&v[2])) == 0;
            p = hit + fl;
            if (fl == 0) {
                if (p == end || !all) {
                    ok = ok && mf_buf_append(&b, p, (size_t)(end - p)) == 0;
                    break;
                }
                size_t i = (size_t)(p - sdata(&v[0]));
                size_t step = i;
                next_cp(sdata(&v[0]), slen(&v[0]), &step);
                ok = ok && mf_buf_append(&b, p, step - i) == 0;
                p = sdata(&v[0]) + step;
            }
        }
        rc = ok ? mfi_set_str(out, b.len ? (const char *)b.data : "", b.len, c->err)
                : mf_error_oom(c->err);
        mf_buf_free(&b);
    }
    mfi_free_all(v, 3);
    return rc;
}

static int op_replaceone(const node *n, ctx *c, val *out) { return replace_op(n, c, out, false); }
static int op_replaceall(const node *n, ctx *c, val *out) { return replace_op(n, c, out, true); }

const op_def mfi_expr_string_ops[] = {
    {"$concat", op_concat, 0, -1, NULL},
    {"$indexOfCP", op_indexofcp, 2, 4, NULL},
    {"$ltrim", op_ltrim, 0, 0, parse_trim},
    {"$replaceAll", op_replaceall, 0, 0, parse_replace},
    {"$replaceOne", op_replaceone, 0, 0, parse_replace},
    {"$rtrim", op_rtrim, 0, 0, parse_trim},
    {"$split", op_split, 2, 2, NULL},
    {"$strLenBytes", op_strlenbytes, 1, 1, NULL},
    {"$strLenCP", op_strlencp, 1, 1, NULL},
    {"$strcasecmp", op_strcasecmp, 2, 2, NULL},
    {"$substrBytes", op_substrbytes, 3, 3, NULL},
    {"$substrCP", op_substrcp, 3, 3, NULL},
    {"$toLower", op_tolower, 1, 1, NULL},
    {"$toUpper", op_toupper, 1, 1, NULL},
    {"$trim", op_trim, 0, 0, parse_trim},
};
const size_t mfi_expr_nstring_ops = sizeof mfi_expr_string_ops / sizeof mfi_expr_string_ops[0];
