/*
 * calendar.c -- the calendar of the aggregation layer (calendar.h): civil
 * dates, ISO weeks, time zones over ICU, the time units and dateAdd.
 */
#include "calendar.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/ucal.h>
#include <unicode/uenum.h>
#include <unicode/ustring.h>

/* ------------------------------------------------------------ civil dates */

static bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int mfi_cal_month_days(int64_t y, int m)
{
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : d[m - 1];
}

/* Howard Hinnant's days_from_civil / civil_from_days: years counted from
 * March in 400-year eras of 146097 days. */
int64_t mfi_cal_days_from_civil(int64_t y, int m, int64_t d)
{
    y -= m <= 2;
    int64_t era = mfi_floordiv(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void mfi_cal_civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = mfi_floordiv(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* 1 Monday .. 7 Sunday; 1970-01-01 was a Thursday. */
int mfi_cal_iso_dow(int64_t days) { return (int)mfi_floormod(days + 3, 7) + 1; }

int64_t mfi_cal_day_of_year(int64_t days, int64_t y)
{
    return days - mfi_cal_days_from_civil(y, 1, 1) + 1;
}

/* The ISO 8601 week-numbering year and week of a day: the week of its
 * Thursday. */
void mfi_cal_iso_week(int64_t days, int64_t *iy, int *wk)
{
    int64_t thu = days - mfi_cal_iso_dow(days) + 4, y;
    int m, d;
    mfi_cal_civil_from_days(thu, &y, &m, &d);
    *iy = y;
    *wk = (int)((thu - mfi_cal_days_from_civil(y, 1, 1)) / 7 + 1);
}

int64_t mfi_cal_days_from_iso(int64_t iy, int64_t week, int64_t dow)
{
    int64_t jan4 = mfi_cal_days_from_civil(iy, 1, 4);
    return jan4 - (mfi_cal_iso_dow(jan4) - 1) + (week - 1) * 7 + (dow - 1);
}

/* ------------------------------------------------------------ time zones */

struct mfi_zone {
    UCalendar *cal; /* guarded by mu */
    pthread_mutex_t mu;
};

typedef struct mfi_zone zone;

const mfi_tz mfi_tz_utc = {MFI_TZ_UTC, 0, NULL};

/* ICU ids that are not tz database names (Java's three-letter aliases). */
static const char *const icu_only[] = {"ACT", "AET", "AGT", "ART", "AST", "BET", "BST",
                                       "CAT", "CNT", "CST", "CTT", "EAT", "ECT", "IET",
                                       "IST", "JST", "MIT", "NET", "NST", "PLT", "PNT",
                                       "PRT", "PST", "SST", "VST"};

static pthread_once_t ids_once = PTHREAD_ONCE_INIT;
static char **zone_ids;   /* sorted; read-only after load_ids */
static zone **zone_open_; /* parallel to zone_ids; guarded by zones_mu */
static size_t nzone_ids;
static pthread_mutex_t zones_mu = PTHREAD_MUTEX_INITIALIZER;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void load_ids(void)
{
    UErrorCode st = U_ZERO_ERROR;
    UEnumeration *e = ucal_openTimeZones(&st);
    if (U_FAILURE(st))
        return;
    int32_t cnt = uenum_count(e, &st);
    char **ids = cnt > 0 ? calloc((size_t)cnt, sizeof *ids) : NULL;
    zone **zs = cnt > 0 ? calloc((size_t)cnt, sizeof *zs) : NULL;
    size_t k = 0;
    const char *s;
    int32_t len;
    while (ids && zs && k < (size_t)cnt && (s = uenum_next(e, &len, &st)) && U_SUCCESS(st)) {
        bool skip = false;
        for (size_t i = 0; i < sizeof icu_only / sizeof icu_only[0]; i++)
            skip = skip || strcmp(s, icu_only[i]) == 0;
        if (!skip && (ids[k] = strdup(s)) != NULL)
            k++;
    }
    uenum_close(e);
    if (!ids || !zs) {
        free(ids);
        free(zs);
        return;
    }
    qsort(ids, k, sizeof *ids, cmp_str);
    zone_ids = ids;
    zone_open_ = zs;
    nzone_ids = k;
}

static zone *zone_new(const char *id)
{
    UChar uid[128];
    UErrorCode st = U_ZERO_ERROR;
    zone *z = calloc(1, sizeof *z);
    if (!z || strlen(id) >= sizeof uid / sizeof uid[0]) {
        free(z);
        return NULL;
    }
    u_uastrcpy(uid, id);
    z->cal = ucal_open(uid, -1, "", UCAL_GREGORIAN, &st);
    if (U_FAILURE(st)) {
        free(z);
        return NULL;
    }
    pthread_mutex_init(&z->mu, NULL);
    return z;
}

/* ±HH, ±HHMM or ±HH:MM, as mongod's TimeZoneDatabase::parseUtcOffset. */
static bool parse_utc_offset(const char *s, size_t len, int32_t *off)
{
#define DIG(i) (s[i] >= '0' && s[i] <= '9')
#define NUM(i) ((s[i] - '0') * 10 + (s[i + 1] - '0'))
    if (len < 3 || (s[0] != '+' && s[0] != '-'))
        return false;
    int sign = s[0] == '-' ? -1 : 1, h, m = 0;
    if (len == 3 && DIG(1) && DIG(2)) {
        h = NUM(1);
    } else if (len == 5 && DIG(1) && DIG(2) && DIG(3) && DIG(4)) {
        h = NUM(1);
        m = NUM(3);
    } else if (len == 6 && DIG(1) && DIG(2) && s[3] == ':' && DIG(4) && DIG(5)) {
        h = NUM(1);
        m = NUM(4);
    } else {
        return false;
    }
    *off = sign * (h * 3600 + m * 60);
    return true;
#undef DIG
#undef NUM
}

int mfi_tz_lookup(const char *s, size_t len, mfi_tz *out, mf_error *err)
{
    int32_t off;
    memset(out, 0, sizeof *out);
    if (strlen(s) != len)
        return -1;
    if (strcmp(s, "UTC") == 0)
        return 0;
    if (parse_utc_offset(s, len, &off)) {
        out->kind = off ? MFI_TZ_FIXED : MFI_TZ_UTC;
        out->off = off;
        return 0;
    }
    pthread_once(&ids_once, load_ids);
    char **hit = nzone_ids ? bsearch(&s, zone_ids, nzone_ids, sizeof *zone_ids, cmp_str) : NULL;
    if (!hit)
        return -1;
    size_t i = (size_t)(hit - zone_ids);
    pthread_mutex_lock(&zones_mu);
    if (!zone_open_[i])
        zone_open_[i] = zone_new(zone_ids[i]);
    out->z = zone_open_[i];
    pthread_mutex_unlock(&zones_mu);
    if (!out->z)
        return mf_error_set(err, MF_InternalError, "cannot open time zone \"%s\"", s);
    out->kind = MFI_TZ_NAMED;
    return 0;
}

int32_t mfi_tz_offset(const mfi_tz *t, int64_t secs)
{
    if (t->kind != MFI_TZ_NAMED)
        return t->off;
    double ms = (double)secs * 1000.0;
    const double lim = 1.8e17; /* inside ICU's supported range */
    ms = ms > lim ? lim : ms < -lim ? -lim : ms;
    UErrorCode st = U_ZERO_ERROR;
    pthread_mutex_lock(&t->z->mu);
    ucal_setMillis(t->z->cal, ms, &st);
    int32_t o = ucal_get(t->z->cal, UCAL_ZONE_OFFSET, &st);
    o += ucal_get(t->z->cal, UCAL_DST_OFFSET, &st);
    pthread_mutex_unlock(&t->z->mu);
    return U_SUCCESS(st) ? o / 1000 : 0;
}

/* The instant (seconds) of wall-clock time `l` (seconds, as if UTC).  As
 * timelib: o1 is the offset at l read as UTC, o2 the offset at l - o1.  When
 * they differ and l - o2 still falls before o2 took effect, l is in a
 * skipped gap and is read with o1 (02:30 becomes 03:30 daylight time). */
int64_t mfi_tz_utc_from_local(const mfi_tz *t, int64_t l)
{
    if (t->kind != MFI_TZ_NAMED)
        return l - t->off;
    int32_t o1 = mfi_tz_offset(t, l), o2 = mfi_tz_offset(t, l - o1);
    if (o1 == o2)
        return l - o1;
    return mfi_tz_offset(t, l - o2) != o2 ? l - o1 : l - o2;
}

void mfi_tz_to_parts(int64_t ms, const mfi_tz *t, mfi_tparts *p)
{
    int64_t secs = mfi_floordiv(ms, 1000);
    p->ms = (int)(ms - secs * 1000);
    p->off = mfi_tz_offset(t, secs);
    int64_t l = secs + p->off;
    p->days = mfi_floordiv(l, MFI_SECS_PER_DAY);
    int64_t r = l - p->days * MFI_SECS_PER_DAY;
    p->h = (int)(r / 3600);
    p->mi = (int)(r / 60 % 60);
    p->s = (int)(r % 60);
    mfi_cal_civil_from_days(p->days, &p->y, &p->mon, &p->d);
}

bool mfi_cal_make_ms(int64_t secs, int64_t ms, int64_t *out)
{
    int64_t r;
    return !__builtin_mul_overflow(secs, 1000, &r) && !__builtin_add_overflow(r, ms, out);
}

/* ------------------------------------------------------------------ units */

static const char *const unit_names[] = {"year", "quarter", "month", "week", "day",
                                         "hour", "minute", "second", "millisecond"};

/* Indexed by unit: the fixed-length units' milliseconds. */
static const int64_t unit_ms[] = {0, 0, 0, 604800000, 86400000, 3600000, 60000, 1000, 1};

int mfi_cal_unit_find(const char *s, size_t len)
{
    for (int i = 0; i <= MFI_UNIT_MILLISECOND; i++)
        if (strlen(s) == len && strcmp(s, unit_names[i]) == 0)
            return i;
    return -1;
}

int mfi_cal_unit_parse(const char *s, size_t len, int *unit, mf_error *err)
{
    if ((*unit = mfi_cal_unit_find(s, len)) < 0)
        return mf_error_set(err, MF_FailedToParse, "unknown time unit value: %s", s);
    return 0;
}

const char *mfi_cal_unit_name(int unit)
{
    return unit_names[unit];
}

int64_t mfi_cal_unit_ms(int unit)
{
    return unit_ms[unit];
}

/* --------------------------------------------------------------- dateAdd */

bool mfi_cal_add_amount_ok(int unit, int64_t amount)
{
    const int64_t max_days = (int64_t)(UINT64_MAX / 86400000ULL) + 1;
    const int64_t max_years = max_days / 365 + 1;
    int64_t lim;
    switch (unit) {
    case MFI_UNIT_YEAR: lim = max_years; break;
    case MFI_UNIT_QUARTER: lim = max_years * 4; break;
    case MFI_UNIT_MONTH: lim = max_years * 12; break;
    case MFI_UNIT_WEEK: lim = max_days / 7; break;
    case MFI_UNIT_DAY: lim = max_days; break;
    case MFI_UNIT_HOUR: lim = max_days * 24; break;
    case MFI_UNIT_MINUTE: lim = max_days * 24 * 60; break;
    default: lim = max_days * 24 * 60 * 60; break;
    }
    return -lim < amount && amount < lim;
}

bool mfi_cal_add(int64_t ms, int unit, int64_t amount, const mfi_tz *t, int64_t *out)
{
    if (unit == MFI_UNIT_MILLISECOND)
        return !__builtin_add_overflow(ms, amount, out);
    /* Within these bounds nothing below overflows before the checks. */
    if (!mfi_cal_add_amount_ok(unit, amount))
        return false;
    mfi_tparts p;
    mfi_tz_to_parts(ms, t, &p);
    int64_t days = 0, secs;
    if (unit <= MFI_UNIT_MONTH) {
        int64_t months =
            amount * (unit == MFI_UNIT_YEAR ? 12 : unit == MFI_UNIT_QUARTER ? 3 : 1);
        int64_t total = p.y * 12 + (p.mon - 1) + months;
        int64_t ry = mfi_floordiv(total, 12);
        int rm = (int)mfi_floormod(total, 12) + 1;
        int rd = p.d < mfi_cal_month_days(ry, rm) ? p.d : mfi_cal_month_days(ry, rm);
        days = mfi_cal_days_from_civil(ry, rm, rd) - p.days;
    } else if (unit == MFI_UNIT_WEEK || unit == MFI_UNIT_DAY) {
        days = amount * (unit == MFI_UNIT_WEEK ? 7 : 1);
    }
    if (unit <= MFI_UNIT_DAY || t->kind != MFI_TZ_NAMED) {
        /* on the wall clock */
        __int128 l = (__int128)(p.days + days) * MFI_SECS_PER_DAY + p.h * 3600 + p.mi * 60 + p.s;
        if (unit > MFI_UNIT_DAY)
            l += (__int128)amount * (unit_ms[unit] / 1000);
        if (l > INT64_MAX / 1000 || l < INT64_MIN / 1000)
            return false;
        secs = mfi_tz_utc_from_local(t, (int64_t)l);
    } else {
        /* a time unit in a zone with DST: on elapsed time */
        __int128 u = (__int128)mfi_floordiv(ms, 1000) + (__int128)amount * (unit_ms[unit] / 1000);
        if (u > INT64_MAX / 1000 || u < INT64_MIN / 1000)
            return false;
        secs = (int64_t)u;
    }
    return mfi_cal_make_ms(secs, p.ms, out);
}
