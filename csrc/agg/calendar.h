/*
 * calendar.h -- the one calendar of the aggregation layer: civil dates,
 * ISO weeks, time zones, the time units and dateAdd.  The date operators
 * (expr_date.c), $densify (stage_densify.c) and $setWindowFields' range
 * bounds over dates (stage_window.c) all use it.
 *
 * Model.  A date is milliseconds since the epoch (UTC).  A day number
 * counts days from 1970-01-01 (day 0) in the proleptic Gregorian calendar.
 * A time zone is UTC, a fixed offset ("+04:30", "-0530", "+03") or an
 * Olson name; it maps an instant to its offset (seconds east of UTC), and
 * wall-clock fields are the instant plus that offset, split into civil
 * fields.  The reverse, wall clock to instant, follows timelib, which
 * mongod uses: a wall time that a spring-forward gap skips lands an hour
 * later; one that a fall-back makes twice is read with the offset in force
 * one offset-length earlier (mfi_tz_utc_from_local).
 *
 * Olson names come from ICU (ucal_*), not from a hand-made table: ICU is
 * the tz database every Debian system already carries, it answers "offset
 * at instant t" directly, and its list of zone ids matches the names mongod
 * accepts once the Java-only three-letter ids (ACT, PST, ...) are removed.
 * ICU calendars are not thread-safe, so each zone keeps one calendar behind
 * its own mutex; zones are opened on first use and live for the process
 * (there are ~600 of them), so lookups after the first take no global lock.
 *
 * Units (mongod's TimeUnit): year quarter month week day work on the wall
 * clock of the time zone (a day is a calendar day, 23 or 25 hours across a
 * DST change); hour minute second millisecond on elapsed time.
 *
 * Nothing here allocates but the first lookup of an Olson zone, which
 * opens it for the process; an mfi_tz value borrows its zone.
 */
#ifndef MF_AGG_CALENDAR_H
#define MF_AGG_CALENDAR_H

#include "../util/util.h"

#include <stdbool.h>
#include <stdint.h>

#define MFI_SECS_PER_DAY 86400LL

/* a / b rounded toward negative infinity, and the matching remainder
 * (0 <= r < b for b > 0). */
static inline int64_t mfi_floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static inline int64_t mfi_floormod(int64_t a, int64_t b) { return a - mfi_floordiv(a, b) * b; }

/* ------------------------------------------------------------ civil dates */

/* Days in month m (1..12) of year y. */
int mfi_cal_month_days(int64_t y, int m);
/* The day number of y-m-d (m in 1..12; d may run past the month). */
int64_t mfi_cal_days_from_civil(int64_t y, int m, int64_t d);
/* The civil date of a day number. */
void mfi_cal_civil_from_days(int64_t days, int64_t *y, int *m, int *d);
/* 1 Monday .. 7 Sunday. */
int mfi_cal_iso_dow(int64_t days);
/* 1 for January 1st of `y`, the year that holds day `days`. */
int64_t mfi_cal_day_of_year(int64_t days, int64_t y);
/* The ISO 8601 week-numbering year and week of a day (its Thursday's). */
void mfi_cal_iso_week(int64_t days, int64_t *iy, int *wk);
/* Monday of ISO week 1 of `iy`, plus (week-1) weeks and (dow-1) days. */
int64_t mfi_cal_days_from_iso(int64_t iy, int64_t week, int64_t dow);
/* secs * 1000 + ms into *out; false on overflow. */
bool mfi_cal_make_ms(int64_t secs, int64_t ms, int64_t *out);

/* ------------------------------------------------------------ time zones */

enum { MFI_TZ_UTC, MFI_TZ_FIXED, MFI_TZ_NAMED };

typedef struct mfi_zone mfi_zone;

/* A time zone; all zeros is UTC. */
typedef struct mfi_tz {
    int kind;    /* MFI_TZ_* */
    int32_t off; /* MFI_TZ_FIXED: seconds east of UTC */
    mfi_zone *z; /* MFI_TZ_NAMED: borrowed, lives for the process */
} mfi_tz;

extern const mfi_tz mfi_tz_utc;

/* Resolve a time zone name of `len` bytes ("UTC", an offset, an Olson
 * name).  Returns 0 (found), -1 (not a zone; a name with a NUL byte is
 * none) or an error code (ICU failed to open a known zone). */
int mfi_tz_lookup(const char *s, size_t len, mfi_tz *out, mf_error *err);
/* The offset (seconds east of UTC) in force at `secs` after the epoch. */
int32_t mfi_tz_offset(const mfi_tz *t, int64_t secs);
/* The instant (seconds) of wall-clock time `l` (seconds, as if UTC). */
int64_t mfi_tz_utc_from_local(const mfi_tz *t, int64_t l);

/* Wall-clock fields of an instant in a zone. */
typedef struct mfi_tparts {
    int64_t days; /* local day number */
    int64_t y;
    int mon, d, h, mi, s, ms;
    int32_t off;  /* the zone's offset then, seconds east of UTC */
} mfi_tparts;

void mfi_tz_to_parts(int64_t ms, const mfi_tz *t, mfi_tparts *p);

/* ------------------------------------------------------------------ units */

/* mongod's TimeUnit, in its order: the calendar units come first. */
enum {
    MFI_UNIT_YEAR,
    MFI_UNIT_QUARTER,
    MFI_UNIT_MONTH,
    MFI_UNIT_WEEK,
    MFI_UNIT_DAY,
    MFI_UNIT_HOUR,
    MFI_UNIT_MINUTE,
    MFI_UNIT_SECOND,
    MFI_UNIT_MILLISECOND
};

/* The unit named by the `len` bytes at `s` ("day"), or -1. */
int mfi_cal_unit_find(const char *s, size_t len);
/* The same, as mongod's parseTimeUnit: FailedToParse "unknown time unit
 * value: <s>" when there is none. */
int mfi_cal_unit_parse(const char *s, size_t len, int *unit, mf_error *err);
const char *mfi_cal_unit_name(int unit);
/* Milliseconds in a unit up to a week; 0 for month, quarter and year. */
int64_t mfi_cal_unit_ms(int unit);

/* --------------------------------------------------------------- dateAdd */

/* Whether |amount| units (not milliseconds) stay inside what dateAdd can
 * compute (mongod's isDateAddAmountValid). */
bool mfi_cal_add_amount_ok(int unit, int64_t amount);

/* `ms` plus `amount` units in zone `t` (mongod's dateAdd): calendar units
 * on the wall clock (a month past the 31st stops at the month's last day),
 * time units on elapsed time.  False when the amount is out of
 * mfi_cal_add_amount_ok's range or the result overflows; $dateAdd tells
 * the two apart, $densify and window bounds do not. */
bool mfi_cal_add(int64_t ms, int unit, int64_t amount, const mfi_tz *t, int64_t *out);

#endif /* MF_AGG_CALENDAR_H */
