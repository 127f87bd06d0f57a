/*
 * expr_convert.c -- $convert and its shorthands $toDouble, $toString,
 * $toObjectId, $toBool, $toDate, $toInt, $toLong, $toDecimal, with
 * mongod 7.0's conversion matrix and messages.
 *
 * The matrix (input type down, target across; "-" unsupported, ConversionFailure):
 *
 *             double  string  objectId  bool  date  int  long  decimal
 *   double      =      fmt       -       !=0   ms    trunc trunc  15 digits
 *   string    parse     =      24 hex    true  parse parse parse  parse
 *   objectId    -      hex       =       true  time   -     -      -
 *   bool       1/0   "true"      -        =     -    1/0   1/0    1/0
 *   date       ms     ISO        -       true   =     -    ms     ms
 *   int        yes    digits     -       !=0    -     =    yes    yes
 *   long       yes    digits     -       !=0   ms   range   =     yes
 *   decimal   range   text       -       !=0   ms   trunc trunc   =
 *   timestamp   -       -        -       true  secs   -     -      -
 *   others      -       -        -       true   -     -     -      -
 *
 * Only ConversionFailure (241) is caught by onError; a bad 'to' fails with
 * FailedToParse or BadValue whatever onError says.  Nullish input gives
 * onNull (or null) before 'to' is looked at, but after it is evaluated and
 * checked.
 */
#include "expr_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T_MISSING = 0, T_MINKEY = -1, T_MAXKEY = 127 };

static const struct {
    const char *name;
    int type;
} type_names[] = {
    {"double", 1}, {"string", 2}, {"object", 3}, {"array", 4}, {"binData", 5},
    {"undefined", 6}, {"objectId", 7}, {"bool", 8}, {"date", 9}, {"null", 10},
    {"regex", 11}, {"dbPointer", 12}, {"javascript", 13}, {"symbol", 14},
    {"javascriptWithScope", 15}, {"int", 16}, {"timestamp", 17}, {"long", 18},
    {"decimal", 19}, {"minKey", T_MINKEY}, {"maxKey", T_MAXKEY},
};

static const char *target_name(int t)
{
    if (t == T_MISSING)
        return "missing";
    for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
        if (type_names[i].type == t)
            return type_names[i].name;
    return "?";
}

/* ExpressionConvert::computeTargetType. */
static int target_type(const val *to, int *out, mf_error *err)
{
    if (to->value_type == BSON_TYPE_UTF8) {
        if (strcmp(to->value.v_utf8.str, "missing") == 0) {
            *out = T_MISSING;
            return 0;
        }
        for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
            if (strcmp(type_names[i].name, to->value.v_utf8.str) == 0) {
                *out = type_names[i].type;
                return 0;
            }
        return mf_error_set(err, MF_BadValue, "Unknown type name: %s", to->value.v_utf8.str);
    }
    if (is_num(to)) {
        if (!mfi_integral32(to))
            return mf_error_set(err, MF_FailedToParse, "In $convert, numeric 'to' argument is "
                                "not an integer");
        int code = (int)as_long(to);
        if (!((code >= 0 && code <= 19) || code == T_MINKEY || code == T_MAXKEY))
            return mf_error_set(err, MF_FailedToParse, "In $convert, numeric value for 'to' "
                                "does not correspond to a BSON type: %d", code);
        *out = code;
        return 0;
    }
    return mf_error_set(err, MF_FailedToParse, "$convert's 'to' argument must be a string or "
                        "number, but is %s", mfi_type_name(to));
}

static int unsupported(const val *v, int to, mf_error *err)
{
    return mf_error_set(err, MF_ConversionFailure, "Unsupported conversion from %s to %s in "
                        "$convert with no onError value", mfi_type_name(v), target_name(to));
}

static int overflow(const char *shown, mf_error *err)
{
    return mf_error_set(err, MF_ConversionFailure, "Conversion would overflow target type in "
                        "$convert with no onError value: %s", shown);
}

/* ------------------------------------------------------ numbers from text */

static int parse_failed(const val *s, const char *why, mf_error *err)
{
    return mf_error_set(err, MF_ConversionFailure, "Failed to parse number '%s' in $convert "
                        "with no onError value: %s", s->value.v_utf8.str, why);
}

/* NumberParser for an integer in base 10 (no leading space, an optional
 * sign), limited to [min, max]. */
static int parse_int(const val *s, int64_t min, uint64_t max, int64_t *out, mf_error *err)
{
    const char *p = s->value.v_utf8.str, *end = p + s->value.v_utf8.len;
    bool neg = false;
    if (p < end && (*p == '-' || *p == '+'))
        neg = *p++ == '-';
    if (p == end)
        return parse_failed(s, "No digits", err);
    uint64_t mag = 0;
    const char *digits = p;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (__builtin_mul_overflow(mag, 10, &mag) ||
            __builtin_add_overflow(mag, (uint64_t)(*p - '0'), &mag))
            return parse_failed(s, "Overflow", err);
    }
    if (p != end)
        return parse_failed(s, "Did not consume whole string.", err);
    if (p == digits)
        return parse_failed(s, "Did not consume any digits", err);
    if (mag > (neg ? (uint64_t)-(min + 1) + 1 : max))
        return parse_failed(s, "Overflow", err);
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return 0;
}

/* NumberParser for a double: strtod over the whole string. */
static int parse_double(const val *s, double *out, mf_error *err)
{
    const char *str = s->value.v_utf8.str;
    size_t len = s->value.v_utf8.len;
    if (len == 0)
        return parse_failed(s, "Empty string", err);
    if (strchr(" \t\n\v\f\r", str[0]))
        return parse_failed(s, "Leading whitespace", err);
    char *end;
    errno = 0;
    double d = strtod(str, &end);
    if (end == str)
        return parse_failed(s, "Did not consume any digits", err);
    if (errno == ERANGE)
        return parse_failed(s, "Out of range", err);
    if (end != str + len)
        return parse_failed(s, "Did not consume whole string.", err);
    *out = d;
    return 0;
}

static bool prefix_ci(const char *p, const char *end, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(end - p) < n)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((p[i] | 0x20) != word[i])
            return false;
    return true;
}

/* The length of the decimal number at the start of [p, end): "[+-]"
 * then "infinity", "inf", "nan" or digits with one optional '.' and an
 * optional exponent; 0 when there is none. */
static size_t decimal_prefix(const char *p, const char *end)
{
    const char *s = p;
    if (p < end && (*p == '+' || *p == '-'))
        p++;
    if (prefix_ci(p, end, "infinity"))
        return (size_t)(p + 8 - s);
    if (prefix_ci(p, end, "inf") || prefix_ci(p, end, "nan"))
        return (size_t)(p + 3 - s);
    bool digits = false, dot = false;
    for (; p < end; p++) {
        if (*p >= '0' && *p <= '9')
            digits = true;
        else if (*p == '.' && !dot)
            dot = true;
        else
            break;
    }
    if (!digits)
        return 0;
    if (p < end && (*p | 0x20) == 'e') {
        const char *q = p + 1;
        if (q < end && (*q == '+' || *q == '-'))
            q++;
        if (q < end && *q >= '0' && *q <= '9') {
            while (q < end && *q >= '0' && *q <= '9')
                q++;
            p = q;
        }
    }
    return (size_t)(p - s);
}

static int parse_decimal(const val *s, mf_dec *out, mf_error *err)
{
    const char *str = s->value.v_utf8.str;
    size_t len = s->value.v_utf8.len;
    if (len == 0)
        return parse_failed(s, "Empty string", err);
    size_t n = decimal_prefix(str, str + len);
    if (n == 0)
        return parse_failed(s, "Failed to parse string to decimal", err);
    char *tmp = bson_strndup(str, n);
    uint32_t flags = 0;
    *out = mf_dec_from_string(tmp, &flags);
    bson_free(tmp);
    if (flags & MF_DEC_F_OVERFLOW)
        return parse_failed(s, "Conversion from string to decimal would overflow", err);
    if (flags & MF_DEC_F_UNDERFLOW)
        return parse_failed(s, "Conversion from string to decimal would underflow", err);
    if (flags & ~(uint32_t)MF_DEC_F_INEXACT)
        return parse_failed(s, "Failed to parse string to decimal", err);
    if (n != len)
        return parse_failed(s, "Did not consume whole string.", err);
    return 0;
}

static int parse_oid(const val *s, bson_oid_t *out, mf_error *err)
{
    const char *str = s->value.v_utf8.str;
    size_t len = s->value.v_utf8.len;
    const char *why = NULL;
    char buf[160];
    if (len != 24) {
        snprintf(buf, sizeof buf, "Invalid string length for parsing to OID, expected 24 but "
                 "found %zu", len);
        why = buf;
    } else {
        for (size_t i = 0; i < len && !why; i++)
            if (!strchr("0123456789abcdefABCDEF", str[i]) || !str[i])
                why = "Invalid character found in hex string";
    }
    if (why)
        return mf_error_set(err, MF_ConversionFailure, "Failed to parse objectId '%s' in "
                            "$convert with no onError value: %s%s%s", str, why,
                            why == buf ? "" : ": ", why == buf ? "" : str);
    bson_oid_init_from_string(out, str);
    return 0;
}

/* ------------------------------------------------------ numeric casts */

static int double_to_long(double d, bool to_int, int64_t *out, mf_error *err)
{
    if (isnan(d))
        return mf_error_set(err, MF_ConversionFailure, "Attempt to convert NaN value to "
                            "integer type in $convert with no onError value");
    if (isinf(d))
        return mf_error_set(err, MF_ConversionFailure, "Attempt to convert infinity value to "
                            "integer type in $convert with no onError value");
    bool fits = to_int ? d >= -2147483648.0 && d <= 2147483647.0
                       : d >= -9223372036854775808.0 && d < 9223372036854775808.0;
    if (!fits) {
        val dv;
        char buf[64];
        set_double(&dv, d);
        mfi_val_str(&dv, buf, sizeof buf);
        return overflow(buf, err);
    }
    *out = (int64_t)d; /* truncates toward zero */
    return 0;
}

static int dec_to_long(mf_dec d, bool to_int, int64_t *out, mf_error *err)
{
    if (mf_dec_isnan(d))
        return mf_error_set(err, MF_ConversionFailure, "Attempt to convert NaN value to "
                            "integer type in $convert with no onError value");
    if (mf_dec_isinf(d))
        return mf_error_set(err, MF_ConversionFailure, "Attempt to convert infinity value to "
                            "integer type in $convert with no onError value");
    uint32_t flags = 0;
    *out = to_int ? mf_dec_to_int32(d, MF_DEC_TRUNC, &flags)
                  : mf_dec_to_int64(d, MF_DEC_TRUNC, &flags);
    if (flags & MF_DEC_F_INVALID) {
        char buf[MF_DEC_STRLEN];
        mf_dec_to_string(d, buf);
        return overflow(buf, err);
    }
    return 0;
}

/* ------------------------------------------------------ the conversions */

static int to_double(const val *v, val *out, mf_error *err)
{
    double d = 0;
    int rc;
    switch (v->value_type) {
    case BSON_TYPE_DOUBLE: *out = *v; return 0;
    case BSON_TYPE_INT32: case BSON_TYPE_INT64: set_double(out, as_double(v)); return 0;
    case BSON_TYPE_BOOL: set_double(out, v->value.v_bool ? 1.0 : 0.0); return 0;
    case BSON_TYPE_DATE_TIME: set_double(out, (double)v->value.v_datetime); return 0;
    case BSON_TYPE_UTF8:
        if (strncmp(v->value.v_utf8.str, "0x", 2) == 0)
            break;
        if ((rc = parse_double(v, &d, err)) == 0)
            set_double(out, d);
        return rc;
    case BSON_TYPE_DECIMAL128: {
        uint32_t flags = 0;
        d = mf_dec_to_double(v->value.v_decimal128, &flags);
        if (flags & ~(uint32_t)MF_DEC_F_INEXACT) {
            char buf[MF_DEC_STRLEN];
            mf_dec_to_string(v->value.v_decimal128, buf);
            return overflow(buf, err);
        }
        set_double(out, d);
        return 0;
    }
    default:
        return unsupported(v, 1, err);
    }
    return mf_error_set(err, MF_ConversionFailure, "Illegal hexadecimal input in $convert "
                        "with no onError value: %s", v->value.v_utf8.str);
}

/* $toInt (to_int) and $toLong. */
static int to_integer(const val *v, bool to_int, val *out, mf_error *err)
{
    int64_t l = 0;
    int rc = 0;
    switch (v->value_type) {
    case BSON_TYPE_BOOL: l = v->value.v_bool; break;
    case BSON_TYPE_INT32: l = v->value.v_int32; break;
    case BSON_TYPE_INT64:
        l = v->value.v_int64;
        if (to_int && (l < INT32_MIN || l > INT32_MAX)) {
            char buf[32];
            snprintf(buf, sizeof buf, "%lld", (long long)l);
            return overflow(buf, err);
        }
        break;
    case BSON_TYPE_DATE_TIME:
        if (to_int)
            return unsupported(v, 16, err);
        l = v->value.v_datetime;
        break;
    case BSON_TYPE_DOUBLE: rc = double_to_long(v->value.v_double, to_int, &l, err); break;
    case BSON_TYPE_DECIMAL128: rc = dec_to_long(v->value.v_decimal128, to_int, &l, err); break;
    case BSON_TYPE_UTF8:
        if (strncmp(v->value.v_utf8.str, "0x", 2) == 0)
            return mf_error_set(err, MF_ConversionFailure, "Illegal hexadecimal input in "
                                "$convert with no onError value: %s", v->value.v_utf8.str);
        rc = to_int ? parse_int(v, INT32_MIN, INT32_MAX, &l, err)
                    : parse_int(v, INT64_MIN, INT64_MAX, &l, err);
        break;
    default:
        return unsupported(v, to_int ? 16 : 18, err);
    }
    if (rc != 0)
        return rc;
    if (to_int)
        set_int(out, (int32_t)l);
    else
        set_long(out, l);
    return 0;
}

static int to_decimal(const val *v, val *out, mf_error *err)
{
    mf_dec d = {0, 0};
    int rc;
    switch (v->value_type) {
    case BSON_TYPE_DECIMAL128: *out = *v; return 0;
    case BSON_TYPE_INT32: case BSON_TYPE_INT64: case BSON_TYPE_DOUBLE:
        set_dec(out, as_dec(v));
        return 0;
    case BSON_TYPE_BOOL: set_dec(out, mf_dec_from_int64(v->value.v_bool)); return 0;
    case BSON_TYPE_DATE_TIME: set_dec(out, mf_dec_from_int64(v->value.v_datetime)); return 0;
    case BSON_TYPE_UTF8:
        if (strncmp(v->value.v_utf8.str, "0x", 2) == 0)
            return mf_error_set(err, MF_ConversionFailure, "Illegal hexadecimal input in "
                                "$convert with no onError value: %s", v->value.v_utf8.str);
        if ((rc = parse_decimal(v, &d, err)) == 0)
            set_dec(out, d);
        return rc;
    default:
        return unsupported(v, 19, err);
    }
}

static int to_string(const val *v, val *out, mf_error *err)
{
    switch (v->value_type) {
    case BSON_TYPE_BOOL:
        return mfi_set_str(out, v->value.v_bool ? "true" : "false", v->value.v_bool ? 4 : 5,
                           err);
    case BSON_TYPE_OID: {
        char hex[25];
        bson_oid_to_string(&v->value.v_oid, hex);
        return mfi_set_str(out, hex, 24, err);
    }
    case BSON_TYPE_UTF8: case BSON_TYPE_INT32: case BSON_TYPE_INT64: case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: case BSON_TYPE_DATE_TIME:
        return mfi_coerce_to_string(v, out, err);
    default:
        return unsupported(v, 2, err);
    }
}

static int to_date(const val *v, val *out, mf_error *err)
{
    int64_t ms = 0;
    int rc = 0;
    switch (v->value_type) {
    case BSON_TYPE_DATE_TIME: *out = *v; return 0;
    case BSON_TYPE_INT64: ms = v->value.v_int64; break;
    case BSON_TYPE_DOUBLE: rc = double_to_long(v->value.v_double, false, &ms, err); break;
    case BSON_TYPE_DECIMAL128: rc = dec_to_long(v->value.v_decimal128, false, &ms, err); break;
    case BSON_TYPE_OID: ms = (int64_t)bson_oid_get_time_t(&v->value.v_oid) * 1000; break;
    case BSON_TYPE_TIMESTAMP: ms = (int64_t)v->value.v_timestamp.timestamp * 1000; break;
    case BSON_TYPE_UTF8:
        rc = mfi_date_from_string(v->value.v_utf8.str, v->value.v_utf8.len, NULL, NULL, &ms, err);
        break;
    default:
        return unsupported(v, 9, err);
    }
    if (rc == 0)
        set_date(out, ms);
    return rc;
}

/* Convert `v` (not nullish) to target type `to`; the result may borrow
 * nothing from `v` (strings are copied). */
static int convert(const val *v, int to, val *out, mf_error *err)
{
    switch (to) {
    case 1: return to_double(v, out, err);
    case 2: return to_string(v, out, err);
    case 7:
        if (v->value_type == BSON_TYPE_OID) {
            *out = *v;
            return 0;
        }
        if (v->value_type == BSON_TYPE_UTF8) {
            bson_oid_t oid;
            int rc = parse_oid(v, &oid, err);
            if (rc == 0) {
                out->value_type = BSON_TYPE_OID;
                out->value.v_oid = oid;
            }
            return rc;
        }
        return unsupported(v, to, err);
    case 8: set_bool(out, mfi_truthy(v)); return 0; /* every type converts */
    case 9: return to_date(v, out, err);
    case 16: return to_integer(v, true, out, err);
    case 18: return to_integer(v, false, out, err);
    case 19: return to_decimal(v, out, err);
    default: return unsupported(v, to, err);
    }
}

/* ------------------------------------------------------------ operators */

/* {$convert: {input, to, onError?, onNull?}}: args in that order, NULL for
 * an absent optional one. */
static int parse_convert(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                         mf_error *err)
{
    (void)op;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_FailedToParse, "$convert expects an object of named "
                            "arguments but found: %s", mf_bsonx_type_alias(bson_iter_type(it)));
    static const char *const names[4] = {"input", "to", "onError", "onNull"};
    bson_iter_t p0, p1, p2, p3, ch; /* bson_iter_t is over-aligned: no arrays of it */
    bson_iter_t *parts[4] = {&p0, &p1, &p2, &p3};
    bool has[4] = {false, false, false, false};
    int rc;
    bson_iter_recurse(it, &ch);
    while (bson_iter_next(&ch)) { /* a repeated name: the last one counts */
        int i = 0;
        while (i < 4 && strcmp(bson_iter_key(&ch), names[i]) != 0)
            i++;
        if (i == 4)
            return mf_error_set(err, MF_FailedToParse, "$convert found an unknown argument: %s",
                                bson_iter_key(&ch));
        *parts[i] = ch;
        has[i] = true;
    }
    if (!has[0])
        return mf_error_set(err, MF_FailedToParse, "Missing 'input' parameter to $convert");
    if (!has[1])
        return mf_error_set(err, MF_FailedToParse, "Missing 'to' parameter to $convert");
    for (int i = 0; i < 4; i++) {
        node *a = NULL;
        if ((has[i] && (rc = mfi_parse_node(parts[i], vsc, &a, err)) != 0) ||
            (rc = mfi_push_arg(n, a, err)) != 0)
            return rc;
    }
    return 0;
}

static int eval_optional(const node *e, ctx *c, val *out)
{
    if (!e) {
        set_null(out);
        return 0;
    }
    return mfi_eval(e, c, out);
}

/* The shared evaluation: `to` already known (a shorthand) or from args[1]. */
static int run_convert(const node *n, ctx *c, val *out, int to_fixed)
{
    val to, in, res;
    int to_type = to_fixed;
    bool has_to = true;
    int rc;
    to.value_type = BSON_TYPE_EOD;
    if (to_fixed < -1) {
        if ((rc = mfi_eval(n->args[1], c, &to)) != 0)
            return rc;
    }
    if ((rc = mfi_eval(n->args[0], c, &in)) != 0) {
        mfi_val_free(&to);
        return rc;
    }
    if (to_fixed < -1) {
        has_to = !nullish(&to);
        if (has_to && (rc = target_type(&to, &to_type, c->err)) != 0)
            goto done;
    }
    if (nullish(&in)) {
        rc = n->nargs > 3 ? eval_optional(n->args[3], c, out) : (set_null(out), 0);
        goto done;
    }
    if (!has_to) {
        set_null(out);
        goto done;
    }
    res.value_type = BSON_TYPE_EOD;
    rc = convert(&in, to_type, &res, c->err);
    if (rc == 0)
        *out = res; /* owns its memory: only strings have any, and they are copies */
    else if (rc == MF_ConversionFailure && n->nargs > 2 && n->args[2]) {
        rc = mfi_eval(n->args[2], c, out);
    }
done:
    mfi_val_free(&to);
    mfi_val_free(&in);
    return rc;
}

static int op_convert(const node *n, ctx *c, val *out) { return run_convert(n, c, out, -2); }
static int op_todouble(const node *n, ctx *c, val *out) { return run_convert(n, c, out, 1); }
static int op_tostring(const node *n, ctx *c, val *out) { return run_convert(n, c, out, 2); }
static int op_toobjectid(const node *n, ctx *c, val *out) { return run_convert(n, c, out, 7); }
static int op_tobool(const node *n, ctx *c, val *out) { return run_convert(n, c, out, 8); }
static int op_todate(const node *n, ctx *c, val *out) { return run_convert(n, c, out, 9); }
static int op_toint(const node *n, ctx *c, val *out) { return run_convert(n, c, out, 16); }
static int op_tolong(const node *n, ctx *c, val *out) { return run_convert(n, c, out, 18); }
static int op_todecimal(const node *n, ctx *c, val *out) { return run_convert(n, c, out, 19); }

/* A shorthand takes one operand, alone or in a one-element array (50723). */
static int parse_alias(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                       mf_error *err)
{
    op_def any = *op;
    any.min = 0;
    any.max = -1;
    int rc = mfi_parse_args(&any, it, vsc, n, err);
    if (rc == 0 && n->nargs != 1)
        return mf_error_set(err, 50723, "%s requires a single argument, got %zu", op->name,
                            n->nargs);
    return rc;
}

const op_def mfi_expr_convert_ops[] = {
    {"$convert", op_convert, 0, 0, parse_convert},
    {"$toBool", op_tobool, 1, 1, parse_alias},
    {"$toDate", op_todate, 1, 1, parse_alias},
    {"$toDecimal", op_todecimal, 1, 1, parse_alias},
    {"$toDouble", op_todouble, 1, 1, parse_alias},
    {"$toInt", op_toint, 1, 1, parse_alias},
    {"$toLong", op_tolong, 1, 1, parse_alias},
    {"$toObjectId", op_toobjectid, 1, 1, parse_alias},
    {"$toString", op_tostring, 1, 1, parse_alias},
};
const size_t mfi_expr_nconvert_ops = sizeof mfi_expr_convert_ops / sizeof mfi_expr_convert_ops[0];
