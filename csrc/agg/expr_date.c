/*
 * expr_date.c -- date operators of the aggregation language: $year $month
 * $dayOfMonth $hour $minute $second $millisecond $dayOfWeek $dayOfYear
 * $week $isoWeek $isoWeekYear $isoDayOfWeek; $dateToParts $dateFromParts;
 * $dateToString $dateFromString; $dateAdd $dateSubtract $dateDiff
 * $dateTrunc.  Also mfi_date_from_string, which $convert shares.
 *
 * The model -- dates, time zones, wall-clock fields, units, dateAdd -- is
 * calendar.h's, which $densify and $setWindowFields share; this file reads
 * the operators' arguments, raises their errors and formats and parses
 * date strings.
 */
#include "expr_int.h"
#include "calendar.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------- shared helpers */

/* Evaluate optional operand i (missing when absent). */
static int arg(const node *n, size_t i, ctx *c, val *v)
{
    v->value_type = BSON_TYPE_EOD;
    return n->args[i] ? mfi_eval(n->args[i], c, v) : 0;
}

static bool coercible(const val *v)
{
    return v->value_type == BSON_TYPE_DATE_TIME || v->value_type == BSON_TYPE_TIMESTAMP ||
           v->value_type == BSON_TYPE_OID;
}

/* Value::coerceToDate: a date, a timestamp's seconds, an ObjectId's time. */
static int64_t date_ms(const val *v)
{
    switch (v->value_type) {
    case BSON_TYPE_DATE_TIME: return v->value.v_datetime;
    case BSON_TYPE_TIMESTAMP: return (int64_t)v->value.v_timestamp.timestamp * 1000;
    default: return (int64_t)(uint32_t)bson_oid_get_time_t(&v->value.v_oid) * 1000;
    }
}

static int coerce_date(const val *v, int64_t *ms, mf_error *err)
{
    if (!coercible(v))
        return mf_error_set(err, 16006, "can't convert from BSON type %s to Date",
                            mfi_type_name(v));
    *ms = date_ms(v);
    return 0;
}

/* The time zone operand: UTC when absent; *is_null when it is nullish.
 * `why` (may be NULL) prefixes the errors as mongod's
 * addContextToAssertionException does. */
static int eval_tz(const node *a, ctx *c, mfi_tz *t, bool *is_null, const char *why)
{
    char msg[300];
    int code = 0;
    val v;
    int rc;
    memset(t, 0, sizeof *t);
    *is_null = false;
    if (!a)
        return 0;
    if ((rc = mfi_eval(a, c, &v)) != 0)
        return rc;
    if (nullish(&v)) {
        *is_null = true;
    } else if (v.value_type != BSON_TYPE_UTF8) {
        code = 40517;
        snprintf(msg, sizeof msg, "timezone must evaluate to a string, found %s",
                 mfi_type_name(&v));
    } else if ((rc = mfi_tz_lookup(v.value.v_utf8.str, v.value.v_utf8.len, t, c->err)) < 0) {
        code = 40485;
        snprintf(msg, sizeof msg, "unrecognized time zone identifier: \"%s\"",
                 v.value.v_utf8.str);
        rc = 0;
    }
    mfi_val_free(&v);
    if (code)
        return why ? mf_error_set(c->err, code, "%s :: caused by :: %s", why, msg)
                   : mf_error_set(c->err, code, "%s", msg);
    return rc;
}

/* Value::integral64Bit, and the value. */
static bool integral64(const val *v, int64_t *out)
{
    double d;
    switch (v->value_type) {
    case BSON_TYPE_INT32: case BSON_TYPE_INT64:
        *out = as_long(v);
        return true;
    case BSON_TYPE_DOUBLE:
        d = v->value.v_double;
        break;
    case BSON_TYPE_DECIMAL128: {
        char buf[BSON_DECIMAL128_STRING];
        bson_decimal128_to_string(&v->value.v_decimal128, buf);
        d = strtod(buf, NULL);
        break;
    }
    default:
        return false;
    }
    if (!(d == trunc(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0))
        return false;
    *out = (int64_t)d;
    return true;
}

/* parseTimeUnit of $dateDiff / $dateTrunc. */
static int parse_unit(const val *v, const char *op, int *unit, mf_error *err)
{
    if (v->value_type != BSON_TYPE_UTF8)
        return mf_error_set(err, 5439013, "%s requires 'unit' to be a string, but got %s", op,
                            mfi_type_name(v));
    if ((*unit = mfi_cal_unit_find(v->value.v_utf8.str, v->value.v_utf8.len)) < 0)
        return mf_error_set(err, 5439014, "%s parameter 'unit' value cannot be recognized as a "
                            "time unit: %s", op, v->value.v_utf8.str);
    return 0;
}

/* A day of the week, 1 Monday .. 7 Sunday (mongod's DayOfWeek). */
static int parse_dow(const val *v, const char *op, int *dow, mf_error *err)
{
    static const char *const names[] = {"monday", "tuesday", "wednesday", "thursday",
                                        "friday", "saturday", "sunday"};
    if (v->value_type != BSON_TYPE_UTF8)
        return mf_error_set(err, 5439015, "%s requires 'startOfWeek' to be a string, but got %s",
                            op, mfi_type_name(v));
    const char *s = v->value.v_utf8.str;
    for (int i = 0; i < 7; i++)
        if (strcasecmp(s, names[i]) == 0 || (strlen(s) == 3 && strncasecmp(s, names[i], 3) == 0)) {
            *dow = i + 1;
            return 0;
        }
    return mf_error_set(err, 5439016, "%s parameter 'startOfWeek' value cannot be recognized as "
                        "a day of a week: %s", op, s);
}

/* ----------------------------------------------------- named arguments */

typedef struct fields {
    bool has[12];
    struct { bson_iter_t it; } at[12]; /* bson_iter_t alone is over-aligned for an array */
} fields;

/* Collect {name: ..., ...} by `names` (at most 12).  `obj_fmt` gets the
 * operator then the argument's type, `unknown_fmt` the operator then the
 * field; either may ignore its arguments. */
static int collect(const op_def *op, const bson_iter_t *it, const char *const *names, size_t k,
                   int c_obj, const char *obj_fmt, int c_unknown, const char *unknown_fmt,
                   fields *f, mf_error *err)
{
    bson_iter_t ch;
    memset(f, 0, sizeof *f);
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, c_obj, obj_fmt, op->name, mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_recurse(it, &ch);
    while (bson_iter_next(&ch)) {
        size_t i = 0;
        while (i < k && strcmp(bson_iter_key(&ch), names[i]) != 0)
            i++;
        if (i == k)
            return mf_error_set(err, c_unknown, unknown_fmt, op->name, bson_iter_key(&ch));
        f->at[i].it = ch;
        f->has[i] = true;
    }
    return 0;
}

/* Parse the collected fields into n->args in `names` order (NULL when absent). */
static int build(const fields *f, size_t k, void *sc, node *n, mf_error *err)
{
    for (size_t i = 0; i < k; i++) {
        node *a = NULL;
        int rc;
        if (f->has[i] && (rc = mfi_parse_node(&f->at[i].it, sc, &a, err)) != 0)
            return rc;
        if ((rc = mfi_push_arg(n, a, err)) != 0)
            return rc;
    }
    return 0;
}

/* --------------------------------------------------------- extractors */

/* {$year: <date>}, {$year: [<date>]} or {$year: {date: <date>, timezone: <tz>}}:
 * args[0] the date, args[1] the time zone (may be NULL). */
static int parse_extract(const op_def *op, const bson_iter_t *it, void *sc, node *n,
                         mf_error *err)
{
    bson_iter_t ch;
    node *a = NULL;
    int rc;
    if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_iter_recurse(it, &ch);
        bool has_first = bson_iter_next(&ch);
        if (!has_first || bson_iter_key(&ch)[0] != '$') {
            static const char *const names[] = {"date", "timezone"};
            fields f;
            if ((rc = collect(op, it, names, 2, 0, "", 40535, "unrecognized option to %s: \"%s\"",
                              &f, err)) != 0)
                return rc;
            if (!f.has[0]) {
                char buf[256];
                mf_bsonx_elem_to_string(it, true, buf, sizeof buf);
                return mf_error_set(err, 40539, "missing 'date' argument to %s, provided: %s",
                                    op->name, buf);
            }
            return build(&f, 2, sc, n, err);
        }
    } else if (BSON_ITER_HOLDS_ARRAY(it)) {
        uint32_t k = 0;
        bson_iter_recurse(it, &ch);
        while (bson_iter_next(&ch))
            k++;
        if (k != 1)
            return mf_error_set(err, 40536, "%s accepts exactly one argument if given an array, "
                                "but was given %u", op->name, k);
        bson_iter_recurse(it, &ch);
        bson_iter_next(&ch);
        if ((rc = mfi_parse_node(&ch, sc, &a, err)) != 0 || (rc = mfi_push_arg(n, a, err)) != 0)
            return rc;
        return mfi_push_arg(n, NULL, err);
    }
    if ((rc = mfi_parse_node(it, sc, &a, err)) != 0 || (rc = mfi_push_arg(n, a, err)) != 0)
        return rc;
    return mfi_push_arg(n, NULL, err);
}

enum { X_YEAR, X_MONTH, X_DOM, X_HOUR, X_MINUTE, X_SECOND, X_MILLI, X_DOW, X_DOY, X_WEEK,
       X_ISOWEEK, X_ISOYEAR, X_ISODOW };

/* $week: weeks start on Sunday; days before the year's first Sunday are week 0. */
static int week_of(const mfi_tparts *p)
{
    int wday = (int)mfi_floormod(p->days + 4, 7) + 1; /* 1 Sunday .. 7 Saturday */
    return (int)((mfi_cal_day_of_year(p->days, p->y) - wday + 7) / 7);
}

static int extract(const node *n, ctx *c, val *out, int which)
{
    val d;
    mfi_tz t;
    bool tz_null;
    int64_t ms;
    int rc = mfi_eval(n->args[0], c, &d);
    if (rc != 0)
        return rc;
    if (nullish(&d)) {
        mfi_val_free(&d);
        set_null(out);
        return 0;
    }
    rc = coerce_date(&d, &ms, c->err);
    mfi_val_free(&d);
    if (rc != 0 || (rc = eval_tz(n->args[1], c, &t, &tz_null, NULL)) != 0)
        return rc;
    if (tz_null) {
        set_null(out);
        return 0;
    }
    mfi_tparts p;
    mfi_tz_to_parts(ms, &t, &p);
    int64_t iy;
    int wk;
    switch (which) {
    case X_YEAR: set_int(out, (int32_t)p.y); break;
    case X_MONTH: set_int(out, p.mon); break;
    case X_DOM: set_int(out, p.d); break;
    case X_HOUR: set_int(out, p.h); break;
    case X_MINUTE: set_int(out, p.mi); break;
    case X_SECOND: set_int(out, p.s); break;
    case X_MILLI: set_int(out, p.ms); break;
    case X_DOW: set_int(out, (int)mfi_floormod(p.days + 4, 7) + 1); break;
    case X_DOY: set_int(out, (int32_t)mfi_cal_day_of_year(p.days, p.y)); break;
    case X_WEEK: set_int(out, week_of(&p)); break;
    case X_ISODOW: set_int(out, mfi_cal_iso_dow(p.days)); break;
    case X_ISOWEEK: mfi_cal_iso_week(p.days, &iy, &wk); set_int(out, wk); break;
    default: mfi_cal_iso_week(p.days, &iy, &wk); set_long(out, iy); break; /* a long, as mongod's */
    }
    return 0;
}

#define EXTRACTOR(fn, which) \
    static int fn(const node *n, ctx *c, val *out) { return extract(n, c, out, which); }
EXTRACTOR(op_year, X_YEAR)
EXTRACTOR(op_month, X_MONTH)
EXTRACTOR(op_dayofmonth, X_DOM)
EXTRACTOR(op_hour, X_HOUR)
EXTRACTOR(op_minute, X_MINUTE)
EXTRACTOR(op_second, X_SECOND)
EXTRACTOR(op_millisecond, X_MILLI)
EXTRACTOR(op_dayofweek, X_DOW)
EXTRACTOR(op_dayofyear, X_DOY)
EXTRACTOR(op_week, X_WEEK)
EXTRACTOR(op_isoweek, X_ISOWEEK)
EXTRACTOR(op_isoweekyear, X_ISOYEAR)
EXTRACTOR(op_isodayofweek, X_ISODOW)

/* --------------------------------------------------- $dateToParts */

static int parse_dtp(const op_def *op, const bson_iter_t *it, void *sc, node *n, mf_error *err)
{
    static const char *const names[] = {"date", "timezone", "iso8601"};
    fields f;
    int rc = collect(op, it, names, 3, 40524, "%s only supports an object as its argument", 40520,
                     "Unrecognized argument to %s: %s", &f, err);
    if (rc != 0)
        return rc;
    if (!f.has[0])
        return mf_error_set(err, 40522, "Missing 'date' parameter to $dateToParts");
    return build(&f, 3, sc, n, err);
}

static int op_datetoparts(const node *n, ctx *c, val *out)
{
    val v[3] = {{.value_type = BSON_TYPE_EOD}, {.value_type = BSON_TYPE_EOD},
                {.value_type = BSON_TYPE_EOD}};
    mfi_tz t;
    bool tz_null, iso = false;
    int64_t ms;
    int rc;
    if ((rc = arg(n, 0, c, &v[0])) != 0 || (rc = eval_tz(n->args[1], c, &t, &tz_null, NULL)) != 0)
        goto done;
    if (tz_null) {
        set_null(out);
        goto done;
    }
    if (n->args[2]) {
        if ((rc = arg(n, 2, c, &v[2])) != 0)
            goto done;
        if (nullish(&v[2])) {
            set_null(out);
            goto done;
        }
        if (v[2].value_type != BSON_TYPE_BOOL) {
            rc = mf_error_set(c->err, 40521, "iso8601 must evaluate to a bool, found %s",
                              mfi_type_name(&v[2]));
            goto done;
        }
        iso = v[2].value.v_bool;
    }
    if (nullish(&v[0])) {
        set_null(out);
        goto done;
    }
    if ((rc = coerce_date(&v[0], &ms, c->err)) != 0)
        goto done;
    mfi_tparts p;
    mfi_tz_to_parts(ms, &t, &p);
    bson_t b;
    bson_init(&b);
    if (iso) {
        int64_t iy;
        int wk;
        mfi_cal_iso_week(p.days, &iy, &wk);
        BSON_APPEND_INT32(&b, "isoWeekYear", (int32_t)iy);
        BSON_APPEND_INT32(&b, "isoWeek", wk);
        BSON_APPEND_INT32(&b, "isoDayOfWeek", mfi_cal_iso_dow(p.days));
    } else {
        BSON_APPEND_INT32(&b, "year", (int32_t)p.y);
        BSON_APPEND_INT32(&b, "month", p.mon);
        BSON_APPEND_INT32(&b, "day", p.d);
    }
    BSON_APPEND_INT32(&b, "hour", p.h);
    BSON_APPEND_INT32(&b, "minute", p.mi);
    BSON_APPEND_INT32(&b, "second", p.s);
    BSON_APPEND_INT32(&b, "millisecond", p.ms);
    rc = mfi_set_steal(out, &b, BSON_TYPE_DOCUMENT, c->err);
done:
    mfi_free_all(v, 3);
    return rc;
}

/* --------------------------------------------------- $dateFromParts */

enum { FP_YEAR, FP_MONTH, FP_DAY, FP_HOUR, FP_MINUTE, FP_SECOND, FP_MILLI, FP_ISOYEAR,
       FP_ISOWEEK, FP_ISODOW, FP_TZ, FP_N };

static int parse_dfp(const op_def *op, const bson_iter_t *it, void *sc, node *n, mf_error *err)
{
    static const char *const names[] = {"year", "month", "day", "hour", "minute", "second",
                                        "millisecond", "isoWeekYear", "isoWeek", "isoDayOfWeek",
                                        "timezone"};
    fields f;
    int rc = collect(op, it, names, FP_N, 40519, "%s only supports an object as its argument",
                     40518, "Unrecognized argument to %s: %s", &f, err);
    if (rc != 0)
        return rc;
    if (!f.has[FP_YEAR] && !f.has[FP_ISOYEAR])
        return mf_error_set(err, 40516, "$dateFromParts requires either 'year' or 'isoWeekYear' "
                            "to be present");
    if (f.has[FP_YEAR] && (f.has[FP_ISOYEAR] || f.has[FP_ISOWEEK] || f.has[FP_ISODOW]))
        return mf_error_set(err, 40489, "$dateFromParts does not allow mixing natural dates with "
                            "ISO dates");
    if (f.has[FP_ISOYEAR] && (f.has[FP_YEAR] || f.has[FP_MONTH] || f.has[FP_DAY]))
        return mf_error_set(err, 40525, "$dateFromParts does not allow mixing ISO dates with "
                            "natural dates");
    return build(&f, FP_N, sc, n, err);
}

/* One numeric part: its default when absent; *is_null when nullish;
 * 40515 when not an integer; 31034 out of [-32768, 32767] when `bounded`. */
static int date_part(const node *n, int i, const char *name, int64_t dflt, bool bounded, ctx *c,
                     int64_t *out, bool *is_null)
{
    val v;
    char buf[128];
    int rc = 0;
    *out = dflt;
    if (!n->args[i])
        return 0;
    if ((rc = mfi_eval(n->args[i], c, &v)) != 0)
        return rc;
    if (nullish(&v)) {
        *is_null = true;
    } else if (!integral64(&v, out)) {
        mfi_val_str(&v, buf, sizeof buf);
        rc = mf_error_set(c->err, 40515, "'%s' must evaluate to an integer, found %s with value %s",
                          name, mfi_type_name(&v), buf);
    } else if (bounded && (*out < -32768 || *out > 32767)) {
        rc = mf_error_set(c->err, 31034, "'%s' must evaluate to a value in the range [-32768, "
                          "32767]; value %" PRId64 " is not in range", name, *out);
    }
    mfi_val_free(&v);
    return rc;
}

/* The instant of local day `days` plus h:mi:s.ms (any of them out of
 * range, as timelib normalizes), in zone t. */
static int from_local(const mfi_tz *t, int64_t days, int64_t h, int64_t mi, int64_t s, int64_t ms,
                      int64_t *out, mf_error *err)
{
    __int128 l = (__int128)days * MFI_SECS_PER_DAY + (__int128)h * 3600 + (__int128)mi * 60 + s +
                 mfi_floordiv(ms, 1000);
    if (l > INT64_MAX / 1000 || l < INT64_MIN / 1000)
        return mf_error_set(err, MF_Overflow, "date overflow in $dateFromParts");
    int64_t secs = mfi_tz_utc_from_local(t, (int64_t)l);
    if (!mfi_cal_make_ms(secs, mfi_floormod(ms, 1000), out))
        return mf_error_set(err, MF_Overflow, "date overflow in $dateFromParts");
    return 0;
}

static int op_datefromparts(const node *n, ctx *c, val *out)
{
    int64_t h, mi, s, ms, y, m, d, ms_out = 0;
    bool is_null = false;
    mfi_tz t;
    int rc;
    if ((rc = date_part(n, FP_HOUR, "hour", 0, true, c, &h, &is_null)) != 0 || is_null ||
        (rc = date_part(n, FP_MINUTE, "minute", 0, true, c, &mi, &is_null)) != 0 || is_null ||
        (rc = date_part(n, FP_SECOND, "second", 0, false, c, &s, &is_null)) != 0 || is_null ||
        (rc = date_part(n, FP_MILLI, "millisecond", 0, false, c, &ms, &is_null)) != 0 || is_null ||
        (rc = eval_tz(n->args[FP_TZ], c, &t, &is_null, NULL)) != 0 || is_null) {
        if (rc == 0)
            set_null(out);
        return rc;
    }
    int64_t days;
    if (n->args[FP_YEAR]) {
        if ((rc = date_part(n, FP_YEAR, "year", 1970, false, c, &y, &is_null)) != 0 || is_null ||
            (rc = date_part(n, FP_MONTH, "month", 1, true, c, &m, &is_null)) != 0 || is_null ||
            (rc = date_part(n, FP_DAY, "day", 1, true, c, &d, &is_null)) != 0 || is_null) {
            if (rc == 0)
                set_null(out);
            return rc;
        }
        if (y < 1 || y > 9999)
            return mf_error_set(c->err, 40523, "'year' must evaluate to an integer in the range 1 "
                                "to 9999, found %" PRId64, y);
        int64_t months = y * 12 + (m - 1);
        days = mfi_cal_days_from_civil(mfi_floordiv(months, 12), (int)mfi_floormod(months, 12) + 1, 1) + (d - 1);
    } else {
        if ((rc = date_part(n, FP_ISOYEAR, "isoWeekYear", 1970, false, c, &y, &is_null)) != 0 ||
            is_null ||
            (rc = date_part(n, FP_ISOWEEK, "isoWeek", 1, true, c, &m, &is_null)) != 0 || is_null ||
            (rc = date_part(n, FP_ISODOW, "isoDayOfWeek", 1, true, c, &d, &is_null)) != 0 ||
            is_null) {
            if (rc == 0)
                set_null(out);
            return rc;
        }
        if (y < 1 || y > 9999)
            return mf_error_set(c->err, 31095, "'isoWeekYear' must evaluate to an integer in the "
                                "range 1 to 9999, found %" PRId64, y);
        days = mfi_cal_days_from_iso(y, m, d);
    }
    if ((rc = from_local(&t, days, h, mi, s, ms, &ms_out, c->err)) != 0)
        return rc;
    set_date(out, ms_out);
    return 0;
}

/* --------------------------------------------------- $dateToString */

static const char *const month_names[] = {"January", "February", "March", "April", "May",
                                          "June", "July", "August", "September", "October",
                                          "November", "December"};

/* 18535 a lone '%' at the end, 18536 a specifier not in `allowed`. */
static int check_format(const char *f, size_t len, const char *allowed, mf_error *err)
{
    for (size_t i = 0; i < len; i++) {
        if (f[i] != '%')
            continue;
        if (++i == len)
            return mf_error_set(err, 18535, "Unmatched '%%' at end of format string");
        if (f[i] != '%' && (f[i] == 0 || !strchr(allowed, f[i])))
            return mf_error_set(err, 18536, "Invalid format character '%%%c' in format string",
                                f[i]);
    }
    return 0;
}

#define TO_STRING_SPECS "bBdGHjLmMSwuUVYzZ"
#define FROM_STRING_SPECS "bBdGHjLmMSuVYzZ"

static int put_padded(mf_buf *b, int64_t v, int width, mf_error *err)
{
    char tmp[16];
    if (v < 0 || v > 9999)
        return mf_error_set(err, 18537, "Could not convert date to string: date component was "
                            "outside the supported range of 0-9999: %" PRId64, v);
    int k = snprintf(tmp, sizeof tmp, "%0*d", width, (int)v);
    return mf_buf_append(b, tmp, (size_t)k) == 0 ? 0
                                                  : mf_error_oom(err);
}

/* TimeZone::formatDate for a validated format. */
static int format_date(const char *f, size_t len, int64_t ms, const mfi_tz *t, mf_buf *b,
                       mf_error *err)
{
    mfi_tparts p;
    mfi_tz_to_parts(ms, t, &p);
    int64_t iy;
    int wk, rc = 0;
    mfi_cal_iso_week(p.days, &iy, &wk);
    for (size_t i = 0; i < len && rc == 0; i++) {
        char tmp[32];
        if (f[i] != '%') {
            size_t j = i;
            while (j < len && f[j] != '%')
                j++;
            if (mf_buf_append(b, f + i, j - i) != 0)
                return mf_error_oom(err);
            i = j - 1;
            continue;
        }
        const char *lit = NULL;
        switch (f[++i]) {
        case '%': lit = "%"; break;
        case 'Y': rc = put_padded(b, p.y, 4, err); break;
        case 'm': rc = put_padded(b, p.mon, 2, err); break;
        case 'd': rc = put_padded(b, p.d, 2, err); break;
        case 'H': rc = put_padded(b, p.h, 2, err); break;
        case 'M': rc = put_padded(b, p.mi, 2, err); break;
        case 'S': rc = put_padded(b, p.s, 2, err); break;
        case 'L': rc = put_padded(b, p.ms, 3, err); break;
        case 'j': rc = put_padded(b, mfi_cal_day_of_year(p.days, p.y), 3, err); break;
        case 'w': rc = put_padded(b, mfi_floormod(p.days + 4, 7) + 1, 1, err); break;
        case 'U': rc = put_padded(b, week_of(&p), 2, err); break;
        case 'G': rc = put_padded(b, iy, 4, err); break;
        case 'V': rc = put_padded(b, wk, 2, err); break;
        case 'u': rc = put_padded(b, mfi_cal_iso_dow(p.days), 1, err); break;
        case 'b':
            snprintf(tmp, sizeof tmp, "%.3s", month_names[p.mon - 1]);
            lit = tmp;
            break;
        case 'B': lit = month_names[p.mon - 1]; break;
        case 'z': {
            int a = p.off < 0 ? -p.off : p.off;
            snprintf(tmp, sizeof tmp, "%c%02d%02d", p.off < 0 ? '-' : '+', a / 3600, a / 60 % 60);
            lit = tmp;
            break;
        }
        case 'Z':
            snprintf(tmp, sizeof tmp, "%d", p.off / 60);
            lit = tmp;
            break;
        default:
            return mf_error_set(err, 18536, "Invalid format character '%%%c' in format string",
                                f[i]);
        }
        if (lit && mf_buf_append(b, lit, strlen(lit)) != 0)
            return mf_error_oom(err);
    }
    return rc;
}

static int parse_dts(const op_def *op, const bson_iter_t *it, void *sc, node *n, mf_error *err)
{
    static const char *const names[] = {"date", "format", "timezone", "onNull"};
    fields f;
    int rc = collect(op, it, names, 4, 18629, "%s only supports an object as its argument", 18534,
                     "Unrecognized argument to %s: %s", &f, err);
    if (rc != 0)
        return rc;
    if (!f.has[0])
        return mf_error_set(err, 18628, "Missing 'date' parameter to $dateToString");
    return build(&f, 4, sc, n, err);
}

static int op_datetostring(const node *n, ctx *c, val *out)
{
    static const char iso_fmt[] = "%Y-%m-%dT%H:%M:%S.%LZ";
    val v[2] = {{.value_type = BSON_TYPE_EOD}, {.value_type = BSON_TYPE_EOD}};
    mfi_tz t;
    bool tz_null;
    int64_t ms;
    char buf[128];
    int rc;
    if ((rc = arg(n, 0, c, &v[0])) != 0 || (rc = arg(n, 1, c, &v[1])) != 0)
        goto done;
    if (n->args[1] && !nullish(&v[1])) {
        if (v[1].value_type != BSON_TYPE_UTF8) {
            mfi_val_str(&v[1], buf, sizeof buf);
            rc = mf_error_set(c->err, 18533, "$dateToString requires that 'format' be a string, "
                              "found: %s with value %s", mfi_type_name(&v[1]), buf);
            goto done;
        }
        if ((rc = check_format(v[1].value.v_utf8.str, v[1].value.v_utf8.len, TO_STRING_SPECS,
                               c->err)) != 0)
            goto done;
    }
    if ((rc = eval_tz(n->args[2], c, &t, &tz_null, NULL)) != 0)
        goto done;
    if (nullish(&v[0])) {
        if (n->args[3])
            rc = mfi_eval(n->args[3], c, out);
        else
            set_null(out);
        goto done;
    }
    if (tz_null || (n->args[1] && nullish(&v[1]))) {
        set_null(out);
        goto done;
    }
    if ((rc = coerce_date(&v[0], &ms, c->err)) != 0)
        goto done;
    mf_buf b = {0};
    const char *f = n->args[1] ? v[1].value.v_utf8.str : iso_fmt;
    size_t fl = n->args[1] ? v[1].value.v_utf8.len : sizeof iso_fmt - 1;
    if ((rc = format_date(f, fl, ms, &t, &b, c->err)) == 0)
        rc = mfi_set_str(out, b.len ? (const char *)b.data : "", b.len, c->err);
    mf_buf_free(&b);
done:
    mfi_free_all(v, 2);
    return rc;
}

/* -------------------------------------------------- parsing a date */

#define UNSET INT64_MIN

/* What a date string says, as timelib's fields: UNSET when absent. */
typedef struct pdate {
    int64_t y, m, d, h, i, s, us;
    int64_t iy, iw, idow, doy;
    int zone;     /* 0 none, 1 UTC offset, 2 abbreviation */
    int32_t zoff; /* seconds east */
    char abbr[8];
} pdate;

static int bad_string(const char *s, size_t len, size_t pos, const char *what, mf_error *err)
{
    char ch = pos < len ? s[pos] : ' ';
    return mf_error_set(err, MF_ConversionFailure, "Error parsing date string '%.*s'; %zu: %s "
                        "'%c'", (int)len, s, pos, what, ch);
}

static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }
static bool is_alpha(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }

/* Read 1..max digits at *p. */
static bool read_num(const char **p, const char *end, int max, int64_t *out)
{
    int k = 0;
    int64_t v = 0;
    while (*p < end && k < max && is_digit(**p)) {
        v = v * 10 + (**p - '0');
        (*p)++;
        k++;
    }
    *out = v;
    return k > 0;
}

static int ndigits(const char *p, const char *end)
{
    int k = 0;
    while (p + k < end && is_digit(p[k]))
        k++;
    return k;
}

/* A month name (full or its first three letters), case-insensitive. */
static bool read_month(const char **p, const char *end, bool full_only, bool abbr_only,
                       int64_t *m)
{
    size_t k = 0;
    while (*p + k < end && is_alpha((*p)[k]))
        k++;
    for (int i = 0; i < 12; i++) {
        size_t fl = strlen(month_names[i]);
        bool full = k == fl && strncasecmp(*p, month_names[i], k) == 0;
        bool abbr = k == 3 && strncasecmp(*p, month_names[i], 3) == 0;
        if ((full && !abbr_only) || (abbr && !full_only) ||
            (!full_only && !abbr_only && k == 4 && strncasecmp(*p, "sept", 4) == 0 && i == 8)) {
            *m = i + 1;
            *p += k;
            return true;
        }
    }
    return false;
}

static const struct { const char *name; int32_t off; } abbrs[] = {
    {"UTC", 0}, {"GMT", 0}, {"UT", 0}, {"Z", 0}, {"WET", 0}, {"WEST", 3600},
    {"BST", 3600}, {"CET", 3600}, {"CEST", 7200}, {"MET", 3600}, {"MEST", 7200},
    {"EET", 7200}, {"EEST", 10800}, {"MSK", 10800}, {"EST", -18000}, {"EDT", -14400},
    {"CST", -21600}, {"CDT", -18000}, {"MST", -25200}, {"MDT", -21600}, {"PST", -28800},
    {"PDT", -25200}, {"AKST", -32400}, {"AKDT", -28800}, {"HST", -36000}, {"JST", 32400},
};

/* A zone in a date string: an offset (+H, +HH, +HHMM, +HH:MM, optionally
 * after GMT/UTC) or an abbreviation.  Returns 0, or an error. */
static int read_zone(const char **pp, const char *end, pdate *pd, const char *s, size_t len,
                     mf_error *err)
{
    const char *p = *pp;
    if (*p != '+' && *p != '-') {
        const char *w = p;
        while (p < end && (is_alpha(*p) || *p == '/' || *p == '_'))
            p++;
        size_t k = (size_t)(p - w);
        if (memchr(w, '/', k))
            return bad_string(s, len, (size_t)(w - s), "passing a time zone identifier as part "
                              "of the string is not allowed", err);
        size_t i = 0, na = sizeof abbrs / sizeof abbrs[0];
        while (i < na && !(strlen(abbrs[i].name) == k && strncasecmp(w, abbrs[i].name, k) == 0))
            i++;
        if (k == 0 || i == na)
            return bad_string(s, len, (size_t)(w - s), "The timezone could not be found in the "
                              "database", err);
        if ((i == 1 || i == 0) && p < end && (*p == '+' || *p == '-')) {
            *pp = p; /* GMT+0100: an offset */
            return read_zone(pp, end, pd, s, len, err);
        }
        pd->zone = 2;
        pd->zoff = abbrs[i].off;
        snprintf(pd->abbr, sizeof pd->abbr, "%s", abbrs[i].name);
        *pp = p;
        return 0;
    }
    int sign = *p == '-' ? -1 : 1;
    const char *start = p++;
    int k = ndigits(p, end);
    int64_t h = 0, m = 0;
    if (k == 1 || k == 2) {
        read_num(&p, end, k, &h);
        if (p < end && *p == ':') {
            p++;
            if (ndigits(p, end) != 2)
                return bad_string(s, len, (size_t)(p - s), "Unexpected character", err);
            read_num(&p, end, 2, &m);
        }
    } else if (k == 3 || k == 4) {
        int64_t v;
        read_num(&p, end, k, &v);
        h = v / 100;
        m = v % 100;
    } else {
        return bad_string(s, len, (size_t)(start - s), "Unexpected character", err);
    }
    pd->zone = 1;
    pd->zoff = (int32_t)(sign * (h * 3600 + m * 60));
    *pp = p;
    return 0;
}

static void skip_ws(const char **p, const char *end)
{
    while (*p < end && (**p == ' ' || **p == '\t'))
        (*p)++;
}

/* hh:mm[:ss[.frac]] */
static bool read_time(const char **pp, const char *end, pdate *pd)
{
    const char *p = *pp;
    int64_t h, mi, sec = 0, us = 0;
    if (ndigits(p, end) < 1 || ndigits(p, end) > 2 || !read_num(&p, end, 2, &h) || p >= end ||
        *p != ':' || ndigits(++p, end) != 2)
        return false;
    read_num(&p, end, 2, &mi);
    if (p < end && *p == ':' && ndigits(p + 1, end) == 2) {
        p++;
        read_num(&p, end, 2, &sec);
        if (p < end && (*p == '.' || *p == ',') && ndigits(p + 1, end) > 0) {
            p++;
            int k = 0;
            while (p < end && is_digit(*p)) {
                if (k++ < 6)
                    us = us * 10 + (*p - '0');
                p++;
            }
            for (; k < 6; k++)
                us *= 10;
        }
    }
    pd->h = h;
    pd->i = mi;
    pd->s = sec;
    pd->us = us;
    *pp = p;
    return true;
}

/* The date part of a free-form string: ISO (2017-02-08, 2017/02/08,
 * 2017-02, 20170208), American (02/08/2017), day first (08-02-2017,
 * 08.02.2017, 8 Feb 2017) or month name first (Feb 8, 2017). */
static bool read_date(const char **pp, const char *end, pdate *pd)
{
    const char *p = *pp;
    int64_t a, b, y;
    int k = ndigits(p, end);
    if (k == 8) {
        read_num(&p, end, 4, &pd->y);
        read_num(&p, end, 2, &pd->m);
        read_num(&p, end, 2, &pd->d);
    } else if (k == 4 && p + 4 < end && (p[4] == '-' || p[4] == '/')) {
        char sep = p[4];
        read_num(&p, end, 4, &pd->y);
        p++;
        if (!read_num(&p, end, 2, &pd->m))
            return false;
        if (p < end && *p == sep) {
            p++;
            if (!read_num(&p, end, 2, &pd->d))
                return false;
        } else if (sep == '-') {
            pd->d = 1; /* 2017-02 */
        } else {
            return false;
        }
    } else if ((k == 1 || k == 2) && p + k < end && p[k] == '/') {
        read_num(&p, end, 2, &pd->m);
        p++;
        if (!read_num(&p, end, 2, &pd->d))
            return false;
        if (p < end && *p == '/') {
            p++;
            if (!read_num(&p, end, 4, &pd->y))
                return false;
        }
    } else if ((k == 1 || k == 2) && p + k < end && (p[k] == '-' || p[k] == '.') &&
               ndigits(p + k + 1, end) > 0) {
        read_num(&p, end, 2, &a);
        p++;
        if (!read_num(&p, end, 2, &b) || p >= end || (*p != '-' && *p != '.'))
            return false;
        p++;
        if (ndigits(p, end) != 4)
            return false;
        read_num(&p, end, 4, &y);
        pd->d = a;
        pd->m = b;
        pd->y = y;
    } else if (k == 1 || k == 2) {
        read_num(&p, end, 2, &a); /* 8 Feb 2017, 8-Feb-2017 */
        while (p < end && (*p == ' ' || *p == '-' || *p == '.'))
            p++;
        if (!read_month(&p, end, false, false, &pd->m))
            return false;
        while (p < end && (*p == ' ' || *p == '-' || *p == '.'))
            p++;
        if (!read_num(&p, end, 4, &pd->y))
            return false;
        pd->d = a;
    } else if (k == 0 && p < end && is_alpha(*p)) {
        if (!read_month(&p, end, false, false, &pd->m))
            return false;
        while (p < end && (*p == ' ' || *p == '-' || *p == '.'))
            p++;
        if (ndigits(p, end) == 4) {
            read_num(&p, end, 4, &pd->y); /* Feb 2017 */
            pd->d = 1;
        } else {
            if (!read_num(&p, end, 2, &pd->d))
                return false;
            while (p < end && strchr(",.stndrh \t", *p))
                p++;
            if (!read_num(&p, end, 4, &pd->y))
                return false;
        }
    } else {
        return false;
    }
    *pp = p;
    return true;
}

static int parse_free(const char *s, size_t len, pdate *pd, mf_error *err)
{
    const char *p = s, *end = s + len;
    skip_ws(&p, end);
    if (p == end)
        return bad_string(s, len, 0, "Empty string", err);
    const char *start = p;
    if (!read_date(&p, end, pd)) {
        p = start;
        if (!read_time(&p, end, pd))
            return bad_string(s, len, (size_t)(start - s), "Unexpected character", err);
    } else if (p < end && (*p == 'T' || *p == 't' || *p == ' ')) {
        const char *at = p;
        p++;
        skip_ws(&p, end);
        if (!read_time(&p, end, pd))
            p = at;
    }
    skip_ws(&p, end);
    if (p < end) {
        int rc = read_zone(&p, end, pd, s, len, err);
        if (rc != 0)
            return rc;
        skip_ws(&p, end);
    }
    if (p < end)
        return bad_string(s, len, (size_t)(p - s), "Unexpected character", err);
    return 0;
}

/* Parse by a format of FROM_STRING_SPECS (already checked). */
static int parse_fmt(const char *s, size_t len, const char *f, size_t flen, pdate *pd,
                     mf_error *err)
{
    const char *p = s, *end = s + len;
    size_t i = 0;
    for (; i < flen && p < end; i++) {
        const char *at = p;
        bool ok = true;
        int64_t v = 0;
        if (f[i] != '%' || f[i + 1] == '%') {
            i += f[i] == '%';
            if (*p != f[i])
                return bad_string(s, len, (size_t)(p - s), "The format separator does not match",
                                  err);
            p++;
            continue;
        }
        switch (f[++i]) {
        case 'Y': ok = read_num(&p, end, 4, &pd->y); break;
        case 'm': ok = read_num(&p, end, 2, &pd->m); break;
        case 'd': ok = read_num(&p, end, 2, &pd->d); break;
        case 'H': ok = read_num(&p, end, 2, &pd->h); break;
        case 'M': ok = read_num(&p, end, 2, &pd->i); break;
        case 'S': ok = read_num(&p, end, 2, &pd->s); break;
        case 'L': ok = read_num(&p, end, 3, &v); pd->us = v * 1000; break;
        case 'j': ok = read_num(&p, end, 3, &pd->doy); break;
        case 'G': ok = read_num(&p, end, 4, &pd->iy); break;
        case 'V': ok = read_num(&p, end, 2, &pd->iw); break;
        case 'u': ok = read_num(&p, end, 1, &pd->idow); break;
        case 'b': ok = read_month(&p, end, false, true, &pd->m); break;
        case 'B': ok = read_month(&p, end, true, false, &pd->m); break;
        case 'z': {
            int rc = read_zone(&p, end, pd, s, len, err);
            if (rc != 0)
                return rc;
            break;
        }
        case 'Z': {
            int sign = *p == '-' ? -1 : 1;
            if (*p == '+' || *p == '-')
                p++;
            else
                ok = false;
            ok = ok && read_num(&p, end, 4, &v);
            pd->zone = 1;
            pd->zoff = (int32_t)(sign * v * 60);
            break;
        }
        default: ok = false; break;
        }
        if (!ok)
            return bad_string(s, len, (size_t)(at - s), "Unexpected data found.", err);
    }
    if (p < end)
        return bad_string(s, len, (size_t)(p - s), "Trailing data", err);
    if (i < flen)
        return bad_string(s, len, len, "Not enough data available to satisfy format", err);
    if (pd->h != UNSET || pd->i != UNSET || pd->s != UNSET || pd->us != UNSET) {
        pd->h = pd->h == UNSET ? 0 : pd->h;
        pd->i = pd->i == UNSET ? 0 : pd->i;
        pd->s = pd->s == UNSET ? 0 : pd->s;
    }
    return 0;
}

/* Date string to instant, after the parse: fill and check the fields,
 * then resolve the zone (the string's, else `t`). */
static int finish(const char *s, size_t len, pdate *pd, const mfi_tz *t, int64_t *ms, mf_error *err)
{
    if (pd->iy != UNSET && pd->y == UNSET) {
        int64_t iw = pd->iw == UNSET ? 1 : pd->iw, dw = pd->idow == UNSET ? 1 : pd->idow;
        int m, d;
        mfi_cal_civil_from_days(mfi_cal_days_from_iso(pd->iy, iw, dw), &pd->y, &m, &d);
        pd->m = m;
        pd->d = d;
    }
    if (pd->doy != UNSET && pd->y != UNSET && pd->m == UNSET && pd->d == UNSET) {
        int m, d;
        mfi_cal_civil_from_days(mfi_cal_days_from_civil(pd->y, 1, 1) + pd->doy - 1, &pd->y, &m, &d);
        pd->m = m;
        pd->d = d;
    }
    if (pd->h == UNSET && pd->i == UNSET && pd->s == UNSET)
        pd->h = pd->i = pd->s = pd->us = 0;
    if (pd->us == UNSET)
        pd->us = 0;
    if (pd->y == UNSET || pd->m == UNSET || pd->d == UNSET || pd->h == UNSET ||
        pd->i == UNSET || pd->s == UNSET)
        return mf_error_set(err, MF_ConversionFailure, "an incomplete date/time string has been "
                            "found, with elements missing: \"%.*s\"", (int)len, s);
    if (pd->m < 1 || pd->m > 12 || pd->d < 1 || pd->d > mfi_cal_month_days(pd->y, (int)pd->m))
        return bad_string(s, len, len, "The parsed date was invalid", err);
    if (pd->h > 23 || pd->i > 59 || pd->s > 59)
        return bad_string(s, len, len, "The parsed time was invalid", err);
    if (t->kind != MFI_TZ_UTC && pd->zone == 1)
        return mf_error_set(err, MF_ConversionFailure, "you cannot pass in a date/time string "
                            "with GMT offset together with a timezone argument");
    if (t->kind != MFI_TZ_UTC && pd->zone == 2)
        return mf_error_set(err, MF_ConversionFailure, "you cannot pass in a date/time string "
                            "with time zone information ('%s') together with a timezone "
                            "argument", pd->abbr);
    int64_t l = mfi_cal_days_from_civil(pd->y, (int)pd->m, pd->d) * MFI_SECS_PER_DAY + pd->h * 3600 +
                pd->i * 60 + pd->s;
    int64_t secs = pd->zone ? l - pd->zoff : mfi_tz_utc_from_local(t, l);
    *ms = secs * 1000 + pd->us / 1000;
    return 0;
}

static int date_from_string(const char *s, size_t len, const char *f, size_t flen, const mfi_tz *t,
                            int64_t *ms, mf_error *err)
{
    pdate pd;
    int rc;
    pd.y = pd.m = pd.d = pd.h = pd.i = pd.s = pd.us = UNSET;
    pd.iy = pd.iw = pd.idow = pd.doy = UNSET;
    pd.zone = 0;
    pd.zoff = 0;
    pd.abbr[0] = 0;
    if (f && (rc = check_format(f, flen, FROM_STRING_SPECS, err)) != 0)
        return rc;
    rc = f ? parse_fmt(s, len, f, flen, &pd, err) : parse_free(s, len, &pd, err);
    return rc != 0 ? rc : finish(s, len, &pd, t, ms, err);
}

int mfi_date_from_string(const char *s, size_t len, const char *format, const char *tzname,
                         int64_t *ms, mf_error *err)
{
    mfi_tz t;
    int rc;
    memset(&t, 0, sizeof t);
    if (tzname && (rc = mfi_tz_lookup(tzname, strlen(tzname), &t, err)) != 0)
        return rc < 0 ? mf_error_set(err, 40485, "unrecognized time zone identifier: \"%s\"",
                                     tzname)
                      : rc;
    return date_from_string(s, len, format, format ? strlen(format) : 0, &t, ms, err);
}

/* ------------------------------------------------- $dateFromString */

enum { FS_STR, FS_FORMAT, FS_TZ, FS_ONNULL, FS_ONERROR };

static int parse_dfs(const op_def *op, const bson_iter_t *it, void *sc, node *n, mf_error *err)
{
    static const char *const names[] = {"dateString", "format", "timezone", "onNull", "onError"};
    fields f;
    int rc = collect(op, it, names, 5, 40540, "%s only supports an object as an argument, found: "
                     "%s", 40541, "Unrecognized argument to %s: %s", &f, err);
    if (rc != 0)
        return rc;
    if (!f.has[0])
        return mf_error_set(err, 40542, "Missing 'dateString' parameter to $dateFromString");
    return build(&f, 5, sc, n, err);
}

static int op_datefromstring(const node *n, ctx *c, val *out)
{
    val v[2] = {{.value_type = BSON_TYPE_EOD}, {.value_type = BSON_TYPE_EOD}};
    mfi_tz t;
    bool tz_null;
    int64_t ms;
    char buf[128];
    int rc;
    if ((rc = arg(n, FS_STR, c, &v[0])) != 0 || (rc = arg(n, FS_FORMAT, c, &v[1])) != 0)
        goto done;
    if (n->args[FS_FORMAT] && !nullish(&v[1])) {
        if (v[1].value_type != BSON_TYPE_UTF8) {
            mfi_val_str(&v[1], buf, sizeof buf);
            rc = mf_error_set(c->err, 40684, "$dateFromString requires that 'format' be a "
                              "string, found: %s with value %s", mfi_type_name(&v[1]), buf);
            goto done;
        }
        if ((rc = check_format(v[1].value.v_utf8.str, v[1].value.v_utf8.len, FROM_STRING_SPECS,
                               c->err)) != 0)
            goto done;
    }
    if ((rc = eval_tz(n->args[FS_TZ], c, &t, &tz_null, NULL)) != 0)
        goto done;
    if (nullish(&v[0])) {
        if (n->args[FS_ONNULL])
            rc = mfi_eval(n->args[FS_ONNULL], c, out);
        else
            set_null(out);
        goto done;
    }
    /* ConversionFailure from here on is what onError replaces. */
    if (v[0].value_type != BSON_TYPE_UTF8) {
        mfi_val_str(&v[0], buf, sizeof buf);
        rc = mf_error_set(c->err, MF_ConversionFailure, "$dateFromString requires that "
                          "'dateString' be a string, found: %s with value %s",
                          mfi_type_name(&v[0]), buf);
    } else if (tz_null || (n->args[FS_FORMAT] && nullish(&v[1]))) {
        set_null(out);
        goto done;
    } else {
        bool has_f = n->args[FS_FORMAT] != NULL;
        rc = date_from_string(v[0].value.v_utf8.str, v[0].value.v_utf8.len,
                              has_f ? v[1].value.v_utf8.str : NULL,
                              has_f ? v[1].value.v_utf8.len : 0, &t, &ms, c->err);
        if (rc == 0)
            set_date(out, ms);
    }
    if (rc == MF_ConversionFailure && n->args[FS_ONERROR])
        rc = mfi_eval(n->args[FS_ONERROR], c, out);
done:
    mfi_free_all(v, 2);
    return rc;
}


/* ------------------------------------------------- $dateAdd $dateSubtract */

/* dateAdd, with $dateAdd's errors. */
static int date_add(int64_t ms, int unit, int64_t amount, const mfi_tz *t, int64_t *out,
                    mf_error *err)
{
    if (unit != MFI_UNIT_MILLISECOND && !mfi_cal_add_amount_ok(unit, amount))
        return mf_error_set(err, 5976500, "invalid dateAdd 'amount' parameter value: %" PRId64
                            " %s", amount, mfi_cal_unit_name(unit));
    if (!mfi_cal_add(ms, unit, amount, t, out))
        return mf_error_set(err, 5166406, "dateAdd overflowed");
    return 0;
}

static int parse_dadd(const op_def *op, const bson_iter_t *it, void *sc, node *n, mf_error *err)
{
    static const char *const names[] = {"startDate", "unit", "amount", "timezone"};
    fields f;
    int rc = collect(op, it, names, 4, 5166400, "%s expects an object as its argument", 5166401,
                     "Unrecognized argument to %s: %s. Expected arguments are startDate, unit, "
                     "amount, and optionally timezone.", &f, err);
    if (rc != 0)
        return rc;
    if (!f.has[0] || !f.has[1] || !f.has[2])
        return mf_error_set(err, 5166402, "%s requires startDate, unit, and amount to be present",
                            op->name);
    return build(&f, 4, sc, n, err);
}

static int add_op(const node *n, ctx *c, val *out, bool sub)
{
    val v[3] = {{.value_type = BSON_TYPE_EOD}, {.value_type = BSON_TYPE_EOD},
                {.value_type = BSON_TYPE_EOD}};
    const char *op = n->op->name;
    mfi_tz t;
    bool tz_null = false;
    int64_t amount, ms;
    int unit, rc = 0;
    for (size_t i = 0; i < 3 && rc == 0 && !tz_null; i++)
        if ((rc = arg(n, i, c, &v[i])) == 0)
            tz_null = nullish(&v[i]); /* any nullish operand: null, later ones unevaluated */
    if (rc == 0 && !tz_null)
        rc = eval_tz(n->args[3], c, &t, &tz_null, NULL);
    if (rc != 0 || tz_null) {
        if (rc == 0)
            set_null(out);
        goto done;
    }
    if (!coercible(&v[0]))
        rc = mf_error_set(c->err, 5166403, "%s requires startDate to be convertible to a date",
                          op);
    else if (v[1].value_type != BSON_TYPE_UTF8)
        rc = mf_error_set(c->err, 5166404, "%s expects string defining the time unit", op);
    else if (!integral64(&v[2], &amount))
        rc = mf_error_set(c->err, 5166405, "%s expects integer amount of time units", op);
    else
        rc = mfi_cal_unit_parse(v[1].value.v_utf8.str, v[1].value.v_utf8.len, &unit, c->err);
    if (rc != 0)
        goto done;
    if (sub && amount == INT64_MIN)
        rc = mf_error_set(c->err, 6045000, "invalid $dateSubtract 'amount' parameter value: %"
                          PRId64, amount);
    else if ((rc = date_add(date_ms(&v[0]), unit, sub ? -amount : amount, &t, &ms, c->err)) == 0)
        set_date(out, ms);
done:
    mfi_free_all(v, 3);
    return rc;
}

static int op_dateadd(const node *n, ctx *c, val *out) { return add_op(n, c, out, false); }
static int op_datesubtract(const node *n, ctx *c, val *out) { return add_op(n, c, out, true); }

/* ------------------------------------------------------------ $dateDiff */

/* The day of the week of local day `days` counted from `sow` (0..6). */
static int dow_from(int64_t days, int sow) { return (mfi_cal_iso_dow(days) - sow + 7) % 7; }

static int64_t quarter(int m) { return (m - 1) / 3; }

/* dateDiff for the calendar units, on local fields. */
static int64_t diff_calendar(const mfi_tparts *a, const mfi_tparts *b, int unit, int sow)
{
    int64_t dd = b->days - a->days, dh = b->h - a->h + dd * 24, dmi = b->mi - a->mi + dh * 60;
    int64_t z = a->off - b->off;
    switch (unit) {
    case MFI_UNIT_YEAR: return b->y - a->y;
    case MFI_UNIT_QUARTER: return quarter(b->mon) - quarter(a->mon) + (b->y - a->y) * 4;
    case MFI_UNIT_MONTH: return b->mon - a->mon + (b->y - a->y) * 12;
    case MFI_UNIT_WEEK: return (dd + dow_from(a->days, sow) - dow_from(b->days, sow)) / 7;
    case MFI_UNIT_DAY: return dd;
    case MFI_UNIT_HOUR: return dh + z / 3600;
    case MFI_UNIT_MINUTE: return dmi + z / 60;
    default: return b->s - a->s + dmi * 60 + z;
    }
}

static int parse_ddiff(const op_def *op, const bson_iter_t *it, void *sc, node *n, mf_error *err)
{
    static const char *const names[] = {"startDate", "endDate", "unit", "timezone",
                                        "startOfWeek"};
    static const int missing[] = {5166303, 5166304, 5166305};
    fields f;
    int rc = collect(op, it, names, 5, 5166301, "%s only supports an object as its argument",
                     5166302, "Unrecognized argument to %s: %s", &f, err);
    if (rc != 0)
        return rc;
    for (int i = 0; i < 3; i++)
        if (!f.has[i])
            return mf_error_set(err, missing[i], "Missing '%s' parameter to $dateDiff", names[i]);
    return build(&f, 5, sc, n, err);
}

static bool is_week(const val *v)
{
    return v->value_type == BSON_TYPE_UTF8 && strcmp(v->value.v_utf8.str, "week") == 0;
}

static int op_datediff(const node *n, ctx *c, val *out)
{
    val v[4] = {{.value_type = BSON_TYPE_EOD}, {.value_type = BSON_TYPE_EOD},
                {.value_type = BSON_TYPE_EOD}, {.value_type = BSON_TYPE_EOD}};
    mfi_tz t;
    bool is_null = false;
    int unit, sow = 7, rc = 0;
    for (size_t i = 0; i < 3 && rc == 0 && !is_null; i++)
        if ((rc = arg(n, i, c, &v[i])) == 0)
            is_null = nullish(&v[i]);
    bool sow_active = rc == 0 && !is_null && n->args[4] && is_week(&v[2]);
    if (sow_active && (rc = arg(n, 4, c, &v[3])) == 0)
        is_null = nullish(&v[3]);
    if (rc == 0 && !is_null)
        rc = eval_tz(n->args[3], c, &t, &is_null,
                     "$dateDiff parameter 'timezone' value parsing failed");
    if (rc != 0 || is_null) {
        if (rc == 0)
            set_null(out);
        goto done;
    }
    for (int i = 0; i < 2 && rc == 0; i++)
        if (!coercible(&v[i]))
            rc = mf_error_set(c->err, 5166307, "$dateDiff requires '%s' to be a date, but got %s",
                              i ? "endDate" : "startDate", mfi_type_name(&v[i]));
    if (rc != 0 || (rc = parse_unit(&v[2], "$dateDiff", &unit, c->err)) != 0 ||
        (sow_active && (rc = parse_dow(&v[3], "$dateDiff", &sow, c->err)) != 0))
        goto done;
    int64_t a = date_ms(&v[0]), b = date_ms(&v[1]), r;
    if (unit == MFI_UNIT_MILLISECOND) {
        if (__builtin_sub_overflow(b, a, &r)) {
            rc = mf_error_set(c->err, 5166308, "dateDiff overflowed");
            goto done;
        }
    } else {
        mfi_tparts pa, pb;
        mfi_tz_to_parts(a, &t, &pa);
        mfi_tz_to_parts(b, &t, &pb);
        r = diff_calendar(&pa, &pb, unit, sow);
    }
    set_long(out, r);
done:
    mfi_free_all(v, 4);
    return rc;
}

/* ----------------------------------------------------------- $dateTrunc */

static int parse_dtrunc(const op_def *op, const bson_iter_t *it, void *sc, node *n,
                        mf_error *err)
{
    static const char *const names[] = {"date", "unit", "binSize", "timezone", "startOfWeek"};
    fields f;
    int rc = collect(op, it, names, 5, 5439007, "%s only supports an object as its argument",
                     5439008, "Unrecognized argument to %s: %s. Expected arguments are date, "
                     "unit, and optionally, binSize, timezone, startOfWeek", &f, err);
    if (rc != 0)
        return rc;
    if (!f.has[0])
        return mf_error_set(err, 5439009, "Missing 'date' parameter to $dateTrunc");
    if (!f.has[1])
        return mf_error_set(err, 5439010, "Missing 'unit' parameter to $dateTrunc");
    return build(&f, 5, sc, n, err);
}

/* truncateDate: bins of `bin` units counted from 2000-01-01T00:00 local (for
 * weeks, the first `sow` on or after it). */
static int truncate_date(int64_t ms, int unit, int64_t bin, const mfi_tz *t, int sow, int64_t *out,
                         mf_error *err)
{
    const int64_t ref_utc = 946684800000LL; /* 2000-01-01T00:00:00Z */
    int64_t ref = ref_utc - (int64_t)mfi_tz_offset(t, ref_utc / 1000) * 1000;
    if (unit >= MFI_UNIT_HOUR) {
        int64_t size, shifted;
        if (__builtin_mul_overflow(bin, mfi_cal_unit_ms(unit), &size))
            return mf_error_set(err, 5439002, "dateTrunc overflowed");
        if (__builtin_sub_overflow(ms, ref, &shifted))
            return mf_error_set(err, 5439000, "dateTrunc overflowed");
        if (__builtin_sub_overflow(ms, mfi_floormod(shifted, size), out))
            return mf_error_set(err, 5439001, "dateTrunc overflowed");
        return 0;
    }
    if (bin > 100000000000LL)
        return mf_error_set(err, 5439006, "dateTrunc unsupported binSize value");
    mfi_tparts rp, p;
    if (unit == MFI_UNIT_WEEK) {
        int shift = (7 - (6 - sow + 7) % 7) % 7; /* 2000-01-01 was a Saturday */
        ref += shift * 86400000LL;
    }
    mfi_tz_to_parts(ref, t, &rp);
    mfi_tz_to_parts(ms, t, &p);
    int64_t dist = diff_calendar(&rp, &p, unit, sow), lower;
    if (__builtin_sub_overflow(dist, mfi_floormod(dist, bin), &lower))
        return mf_error_set(err, 5439004, "dateTrunc overflowed");
    return date_add(ref, unit, lower, t, out, err);
}

static int op_datetrunc(const node *n, ctx *c, val *out)
{
    val v[4] = {{.value_type = BSON_TYPE_EOD}, {.value_type = BSON_TYPE_EOD},
                {.value_type = BSON_TYPE_EOD}, {.value_type = BSON_TYPE_EOD}};
    mfi_tz t;
    bool is_null = false;
    int unit, sow = 7, rc = 0;
    int64_t bin = 1, ms;
    char buf[128];
    for (size_t i = 0; i < 3 && rc == 0 && !is_null; i++)
        if ((i < 2 || n->args[i]) && (rc = arg(n, i, c, &v[i])) == 0)
            is_null = nullish(&v[i]);
    bool sow_active = rc == 0 && !is_null && n->args[4] && is_week(&v[1]);
    if (sow_active && (rc = arg(n, 4, c, &v[3])) == 0)
        is_null = nullish(&v[3]);
    if (rc == 0 && !is_null)
        rc = eval_tz(n->args[3], c, &t, &is_null,
                     "$dateTrunc parameter 'timezone' value parsing failed");
    if (rc != 0 || is_null) {
        if (rc == 0)
            set_null(out);
        goto done;
    }
    if (!coercible(&v[0])) {
        rc = mf_error_set(c->err, 5439012, "$dateTrunc requires 'date' to be a date, but got %s",
                          mfi_type_name(&v[0]));
        goto done;
    }
    if ((rc = parse_unit(&v[1], "$dateTrunc", &unit, c->err)) != 0)
        goto done;
    if (n->args[2]) {
        if (!integral64(&v[2], &bin)) {
            mfi_val_str(&v[2], buf, sizeof buf);
            rc = mf_error_set(c->err, 5439017, "$dateTrunc requires 'binSize' to be a 64-bit "
                              "integer, but got value '%s' of type %s", buf, mfi_type_name(&v[2]));
            goto done;
        }
        if (bin <= 0) {
            rc = mf_error_set(c->err, 5439018, "$dateTrunc requires 'binSize' to be greater than "
                              "0, but got value %" PRId64, bin);
            goto done;
        }
    }
    if (sow_active && (rc = parse_dow(&v[3], "$dateTrunc", &sow, c->err)) != 0)
        goto done;
    if ((rc = truncate_date(date_ms(&v[0]), unit, bin, &t, sow, &ms, c->err)) == 0)
        set_date(out, ms);
done:
    mfi_free_all(v, 4);
    return rc;
}

/* -------------------------------------------------------------- table */

const op_def mfi_expr_date_ops[] = {
    {"$dateAdd", op_dateadd, 0, 0, parse_dadd},
    {"$dateDiff", op_datediff, 0, 0, parse_ddiff},
    {"$dateFromParts", op_datefromparts, 0, 0, parse_dfp},
    {"$dateFromString", op_datefromstring, 0, 0, parse_dfs},
    {"$dateSubtract", op_datesubtract, 0, 0, parse_dadd},
    {"$dateToParts", op_datetoparts, 0, 0, parse_dtp},
    {"$dateToString", op_datetostring, 0, 0, parse_dts},
    {"$dateTrunc", op_datetrunc, 0, 0, parse_dtrunc},
    {"$dayOfMonth", op_dayofmonth, 0, 0, parse_extract},
    {"$dayOfWeek", op_dayofweek, 0, 0, parse_extract},
    {"$dayOfYear", op_dayofyear, 0, 0, parse_extract},
    {"$hour", op_hour, 0, 0, parse_extract},
    {"$isoDayOfWeek", op_isodayofweek, 0, 0, parse_extract},
    {"$isoWeek", op_isoweek, 0, 0, parse_extract},
    {"$isoWeekYear", op_isoweekyear, 0, 0, parse_extract},
    {"$millisecond", op_millisecond, 0, 0, parse_extract},
    {"$minute", op_minute, 0, 0, parse_extract},
    {"$month", op_month, 0, 0, parse_extract},
    {"$second", op_second, 0, 0, parse_extract},
    {"$week", op_week, 0, 0, parse_extract},
    {"$year", op_year, 0, 0, parse_extract},
};
const size_t mfi_expr_ndate_ops = sizeof mfi_expr_date_ops / sizeof mfi_expr_date_ops[0];
