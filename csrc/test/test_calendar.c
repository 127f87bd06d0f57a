/*
 * test_calendar.c -- cases for csrc/agg/calendar.c alone: civil dates
 * against a day-by-day reference walk, ISO weeks, time zones, the units
 * and dateAdd (the one used by $dateAdd, $densify and window bounds).
 */
#include "test.h"
#include "../agg/calendar.h"

/* 2021-03-04T05:06:07.089Z and friends, as milliseconds. */
static int64_t utc_ms(int64_t y, int m, int d, int h, int mi, int s, int ms)
{
    return ((mfi_cal_days_from_civil(y, m, d) * 24 + h) * 60 + mi) * 60000 + s * 1000 + ms;
}

/* The day numbers of -1000-01-01 .. 3000-12-31, walked a day at a time
 * with month lengths, agree with days_from_civil and civil_from_days. */
MFT_CASE(cal_civil_walk, "/agg/calendar/civil_walk")
{
    int64_t days = mfi_cal_days_from_civil(-1000, 1, 1);
    CHECK_INT(mfi_cal_days_from_civil(1970, 1, 1), 0);
    CHECK_INT(mfi_cal_days_from_civil(2000, 3, 1), 11017);
    for (int64_t y = -1000; y <= 3000; y++) {
        bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        CHECK_INT(mfi_cal_month_days(y, 2), leap ? 29 : 28);
        for (int m = 1; m <= 12; m++)
            for (int d = 1; d <= mfi_cal_month_days(y, m); d++, days++) {
                int64_t ry;
                int rm, rd;
                if (mfi_cal_days_from_civil(y, m, d) != days)
                    CHECK_INT(mfi_cal_days_from_civil(y, m, d), days);
                mfi_cal_civil_from_days(days, &ry, &rm, &rd);
                if (ry != y || rm != m || rd != d)
                    CHECK_INT(ry * 10000 + rm * 100 + rd, y * 10000 + m * 100 + d);
            }
    }
    /* a day past the month's end runs into the next */
    CHECK_INT(mfi_cal_days_from_civil(2021, 1, 32), mfi_cal_days_from_civil(2021, 2, 1));
}

MFT_CASE(cal_iso_week, "/agg/calendar/iso_week")
{
    int64_t iy;
    int wk;
    int64_t d = mfi_cal_days_from_civil(2021, 1, 1); /* a Friday, in 2020's week 53 */
    CHECK_INT(mfi_cal_iso_dow(d), 5);
    mfi_cal_iso_week(d, &iy, &wk);
    CHECK_INT(iy, 2020);
    CHECK_INT(wk, 53);
    d = mfi_cal_days_from_civil(2024, 12, 30); /* a Monday, in 2025's week 1 */
    mfi_cal_iso_week(d, &iy, &wk);
    CHECK_INT(iy, 2025);
    CHECK_INT(wk, 1);
    CHECK_INT(mfi_cal_days_from_iso(2025, 1, 1), d);
    CHECK_INT(mfi_cal_day_of_year(mfi_cal_days_from_civil(2024, 12, 31), 2024), 366);
    CHECK_INT(mfi_cal_iso_dow(0), 4); /* 1970-01-01, a Thursday */
}

MFT_CASE(cal_units, "/agg/calendar/units")
{
    static const char *const names[] = {"year", "quarter", "month", "week", "day",
                                        "hour", "minute", "second", "millisecond"};
    for (int u = 0; u <= MFI_UNIT_MILLISECOND; u++) {
        CHECK_INT(mfi_cal_unit_find(names[u], strlen(names[u])), u);
        CHECK_STR(mfi_cal_unit_name(u), names[u]);
    }
    CHECK_INT(mfi_cal_unit_find("day\0x", 5), -1); /* the length counts */
    CHECK_INT(mfi_cal_unit_find("Day", 3), -1);
    CHECK_INT(mfi_cal_unit_ms(MFI_UNIT_MONTH), 0);
    CHECK_INT(mfi_cal_unit_ms(MFI_UNIT_WEEK), 604800000);
    CHECK_INT(mfi_cal_unit_ms(MFI_UNIT_MILLISECOND), 1);
    mf_error err;
    int unit = 7;
    CHECK_INT(mfi_cal_unit_parse("fortnight", 9, &unit, &err), MF_FailedToParse);
    CHECK_STR(err.msg, "unknown time unit value: fortnight");
    CHECK_INT(mfi_cal_unit_parse("hour", 4, &unit, &err), 0);
    CHECK_INT(unit, MFI_UNIT_HOUR);
}

MFT_CASE(cal_zones, "/agg/calendar/zones")
{
    mfi_tz t;
    mf_error err;
    CHECK_INT(mfi_tz_lookup("+04:30", 6, &t, &err), 0);
    CHECK_INT(t.kind, MFI_TZ_FIXED);
    CHECK_INT(t.off, 16200);
    CHECK_INT(mfi_tz_lookup("-0530", 5, &t, &err), 0);
    CHECK_INT(t.off, -19800);
    CHECK_INT(mfi_tz_lookup("+00", 3, &t, &err), 0);
    CHECK_INT(t.kind, MFI_TZ_UTC);
    CHECK_INT(mfi_tz_lookup("Mars/Olympus", 12, &t, &err), -1);
    CHECK_INT(mfi_tz_lookup("PST", 3, &t, &err), -1); /* ICU's, not the tz database's */
    CHECK_INT(mfi_tz_lookup("UTC\0x", 5, &t, &err), -1);
    CHECK_INT(mfi_tz_lookup("America/New_York", 16, &t, &err), 0);
    CHECK_INT(t.kind, MFI_TZ_NAMED);
    /* 2021-11-07 06:00Z is 01:00 EST, just after the fall-back */
    mfi_tparts p;
    mfi_tz_to_parts(utc_ms(2021, 11, 7, 6, 0, 0, 0), &t, &p);
    CHECK_INT(p.off, -18000);
    CHECK_INT(p.h, 1);
    CHECK_INT(p.d, 7);
    /* 02:30 on 2021-03-14 is skipped: it is read as 03:30 EDT (07:30Z) */
    int64_t l = mfi_cal_days_from_civil(2021, 3, 14) * MFI_SECS_PER_DAY + 2 * 3600 + 1800;
    CHECK_INT(mfi_tz_utc_from_local(&t, l), l + 5 * 3600);
}

MFT_CASE(cal_add, "/agg/calendar/add")
{
    int64_t out;
    mfi_tz ny;
    mf_error err;
    const mfi_tz *utc = &mfi_tz_utc;
    /* a month past the 31st stops at the month's end; leap years count */
    CHECK(mfi_cal_add(utc_ms(2021, 1, 31, 10, 0, 0, 5), MFI_UNIT_MONTH, 1, utc, &out));
    CHECK_INT(out, utc_ms(2021, 2, 28, 10, 0, 0, 5));
    CHECK(mfi_cal_add(utc_ms(2024, 1, 31, 0, 0, 0, 0), MFI_UNIT_MONTH, 1, utc, &out));
    CHECK_INT(out, utc_ms(2024, 2, 29, 0, 0, 0, 0));
    CHECK(mfi_cal_add(utc_ms(2024, 2, 29, 0, 0, 0, 0), MFI_UNIT_YEAR, 1, utc, &out));
    CHECK_INT(out, utc_ms(2025, 2, 28, 0, 0, 0, 0));
    CHECK(mfi_cal_add(utc_ms(2021, 5, 31, 0, 0, 0, 0), MFI_UNIT_QUARTER, -1, utc, &out));
    CHECK_INT(out, utc_ms(2021, 2, 28, 0, 0, 0, 0));
    CHECK(mfi_cal_add(utc_ms(1969, 12, 31, 23, 59, 59, 999), MFI_UNIT_MILLISECOND, 1, utc,
                      &out));
    CHECK_INT(out, 0);
    CHECK(mfi_cal_add(0, MFI_UNIT_WEEK, -2, utc, &out));
    CHECK_INT(out, -14 * 86400000LL);
    /* in a zone with DST a day is a calendar day, an hour elapsed time */
    CHECK_INT(mfi_tz_lookup("America/New_York", 16, &ny, &err), 0);
    int64_t sat_noon = utc_ms(2021, 11, 6, 16, 0, 0, 0); /* 12:00 EDT */
    CHECK(mfi_cal_add(sat_noon, MFI_UNIT_DAY, 1, &ny, &out));
    CHECK_INT(out, utc_ms(2021, 11, 7, 17, 0, 0, 0)); /* 12:00 EST: 25 hours later */
    CHECK(mfi_cal_add(sat_noon, MFI_UNIT_HOUR, 24, &ny, &out));
    CHECK_INT(out, utc_ms(2021, 11, 7, 16, 0, 0, 0));
    /* out of range: false, for the amount and for the result */
    CHECK(mfi_cal_add(0, MFI_UNIT_MILLISECOND, INT64_MAX, utc, &out));
    CHECK_INT(out, INT64_MAX);
    CHECK(!mfi_cal_add(1, MFI_UNIT_MILLISECOND, INT64_MAX, utc, &out));
    CHECK(!mfi_cal_add_amount_ok(MFI_UNIT_YEAR, 600000000));
    CHECK(!mfi_cal_add(0, MFI_UNIT_YEAR, 600000000, utc, &out));
    CHECK(mfi_cal_add_amount_ok(MFI_UNIT_YEAR, 200000000));
    CHECK(mfi_cal_add(0, MFI_UNIT_YEAR, 200000000, utc, &out));
    CHECK(!mfi_cal_add(INT64_MAX / 2, MFI_UNIT_YEAR, 200000000, utc, &out));
    CHECK(!mfi_cal_add(INT64_MAX - 1000, MFI_UNIT_SECOND, 2, utc, &out));
}
