"""Date expressions (csrc/agg/expr_date.c) against mongod 7.0: the manual's
examples, DST edges in America/New_York, UTC offsets, ISO week edge years,
and errors with codes.

Each case is (expression, document, expected): expected is the value, MISSING
when the result is missing, or Err(code[, message]).  Dates are UTC.
"""
import datetime

import bson
import pytest
from bson import Int64, ObjectId, Timestamp
from bson.codec_options import CodecOptions
from bson.son import SON

import multifora
from multifora import _core

if not hasattr(_core, "_expr"):
    pytest.skip("multifora._core has no _expr hook", allow_module_level=True)

OPTS = CodecOptions(document_class=SON, tz_aware=True)
MISSING = object()
UTC = datetime.timezone.utc
NY = "America/New_York"


class Err:
    def __init__(self, code, msg=None):
        self.code, self.msg = code, msg

    def __repr__(self):
        return f"Err({self.code}, {self.msg!r})"


def dt(*a):
    return datetime.datetime(*a, tzinfo=UTC)


def ms(*a):
    """A date with milliseconds: dt(y, m, d, h, mi, s) + the last argument in ms."""
    return dt(*a[:-1]) + datetime.timedelta(milliseconds=a[-1])


def typed(x):
    if isinstance(x, (dict, SON)):
        return [(k, typed(v)) for k, v in x.items()]
    if isinstance(x, list):
        return ["array", [typed(v) for v in x]]
    if isinstance(x, bool):
        return ("bool", x)
    if isinstance(x, Int64):
        return ("long", int(x))
    if isinstance(x, int):
        return ("int", x)
    if isinstance(x, float):
        return ("double", repr(x))
    return (type(x).__name__, x)


def ev(expr, doc=None):
    raw = _core._expr(bson.encode({"e": expr}), bson.encode(doc or {}), 0, False)
    out = bson.decode(raw, codec_options=OPTS)
    return out["r"] if "r" in out else MISSING


def check(expr, doc, expected):
    if isinstance(expected, Err):
        with pytest.raises(multifora.MultiforaError) as ei:
            ev(expr, doc)
        assert ei.value.code == expected.code, str(ei.value)
        if expected.msg is not None:
            assert str(ei.value) == expected.msg
        return
    got = ev(expr, doc)
    if expected is MISSING:
        assert got is MISSING
    else:
        assert got is not MISSING and typed(got) == typed(expected)


# The manual's sample date for the extractors and $dateToString.
D = ms(2014, 1, 1, 8, 15, 39, 736)
DOC = {"date": D}
OID = ObjectId("5ab9c3da31c2ab715d421285")  # 2018-03-27T04:08:58Z

EXTRACT = [
    # --- the manual's example: 2014-01-01T08:15:39.736Z
    ({"$year": "$date"}, DOC, 2014),
    ({"$month": "$date"}, DOC, 1),
    ({"$dayOfMonth": "$date"}, DOC, 1),
    ({"$hour": "$date"}, DOC, 8),
    ({"$minute": "$date"}, DOC, 15),
    ({"$second": "$date"}, DOC, 39),
    ({"$millisecond": "$date"}, DOC, 736),
    ({"$dayOfYear": "$date"}, DOC, 1),
    ({"$dayOfWeek": "$date"}, DOC, 4),
    ({"$week": "$date"}, DOC, 0),
    ({"$isoWeek": "$date"}, DOC, 1),
    ({"$isoWeekYear": "$date"}, DOC, Int64(2014)),
    ({"$isoDayOfWeek": "$date"}, DOC, 3),
    # --- argument forms
    ({"$year": ["$date"]}, DOC, 2014),
    ({"$year": {"date": "$date"}}, DOC, 2014),
    ({"$year": {"date": "$date", "timezone": "UTC"}}, DOC, 2014),
    ({"$year": {"$add": ["$date", 365 * 86400000]}}, DOC, 2015),
    ({"$hour": {"date": "$date", "timezone": NY}}, DOC, 3),
    ({"$hour": {"date": "$date", "timezone": "$tz"}}, {"date": D, "tz": "Asia/Kolkata"}, 13),
    ({"$minute": {"date": "$date", "timezone": "Asia/Kolkata"}}, DOC, 45),
    ({"$minute": {"date": "$date", "timezone": "+04:30"}}, DOC, 45),
    ({"$hour": {"date": "$date", "timezone": "-0530"}}, DOC, 2),
    ({"$hour": {"date": "$date", "timezone": "+03"}}, DOC, 11),
    ({"$hour": {"date": "$date", "timezone": "-00:00"}}, DOC, 8),
    ({"$dayOfMonth": {"date": "$date", "timezone": "-09"}}, DOC, 31),
    ({"$year": {"date": "$date", "timezone": "Pacific/Honolulu"}}, DOC, 2013),
    ({"$dayOfYear": {"date": "$date", "timezone": "Pacific/Honolulu"}}, DOC, 365),
    ({"$hour": {"date": "$date", "timezone": "US/Eastern"}}, DOC, 3),
    ({"$hour": {"date": "$date", "timezone": "Etc/GMT+5"}}, DOC, 3),
    ({"$hour": {"date": "$date", "timezone": "Europe/London"}}, DOC, 8),
    # --- Timestamp and ObjectId inputs
    ({"$year": Timestamp(1400000000, 7)}, None, 2014),
    ({"$second": Timestamp(1400000000, 7)}, None, 20),
    ({"$hour": OID}, None, 4),
    ({"$dayOfMonth": OID}, None, 27),
    ({"$millisecond": OID}, None, 0),
    # --- nullish
    ({"$year": None}, None, None),
    ({"$year": "$nope"}, None, None),
    ({"$year": {"date": "$date", "timezone": None}}, DOC, None),
    ({"$year": {"date": "$date", "timezone": "$nope"}}, DOC, None),
    # --- ISO week edge years
    ({"$isoWeek": dt(2016, 1, 1)}, None, 53),
    ({"$isoWeekYear": dt(2016, 1, 1)}, None, Int64(2015)),
    ({"$week": dt(2016, 1, 1)}, None, 0),
    ({"$dayOfWeek": dt(2016, 1, 1)}, None, 6),
    ({"$isoWeek": dt(2008, 12, 29)}, None, 1),
    ({"$isoWeekYear": dt(2008, 12, 29)}, None, Int64(2009)),
    ({"$isoWeek": dt(2010, 1, 3)}, None, 53),
    ({"$isoDayOfWeek": dt(2010, 1, 3)}, None, 7),
    ({"$week": dt(2010, 1, 3)}, None, 1),
    ({"$dayOfWeek": dt(2010, 1, 3)}, None, 1),
    ({"$isoWeek": dt(2020, 12, 31)}, None, 53),
    ({"$isoWeekYear": dt(2021, 1, 3)}, None, Int64(2020)),
    ({"$isoWeek": dt(2018, 12, 31)}, None, 1),
    ({"$isoWeekYear": dt(2018, 12, 31)}, None, Int64(2019)),
    ({"$week": dt(2016, 12, 31)}, None, 52),
    ({"$dayOfYear": dt(2016, 12, 31)}, None, 366),
    ({"$dayOfYear": dt(2100, 3, 1)}, None, 60),
    ({"$isoWeek": {"date": dt(2010, 1, 4, 3), "timezone": NY}}, None, 53),
    # --- before 1970
    ({"$year": dt(1969, 12, 31, 23, 59, 59)}, None, 1969),
    ({"$millisecond": ms(1969, 12, 31, 23, 59, 59, 1)}, None, 1),
    ({"$second": ms(1969, 12, 31, 23, 59, 58, 1)}, None, 58),
    ({"$dayOfWeek": dt(1900, 1, 1)}, None, 2),
    ({"$isoWeekYear": dt(1, 1, 1)}, None, Int64(1)),
    # --- DST in America/New_York: spring forward 2021-03-14T07:00Z, fall back 2021-11-07T06:00Z
    ({"$hour": {"date": dt(2021, 3, 14, 6, 59, 59), "timezone": NY}}, None, 1),
    ({"$hour": {"date": dt(2021, 3, 14, 7), "timezone": NY}}, None, 3),
    ({"$hour": {"date": dt(2021, 11, 7, 5, 30), "timezone": NY}}, None, 1),
    ({"$hour": {"date": dt(2021, 11, 7, 6, 30), "timezone": NY}}, None, 1),
    ({"$hour": {"date": dt(2021, 11, 7, 7, 30), "timezone": NY}}, None, 2),
    # --- errors
    ({"$year": "x"}, None, Err(16006, "can't convert from BSON type string to Date")),
    ({"$month": 5}, None, Err(16006, "can't convert from BSON type int to Date")),
    ({"$year": {"date": "$date", "timezone": 5}}, DOC,
     Err(40517, "timezone must evaluate to a string, found int")),
    ({"$year": {"date": "$date", "timezone": "Mars/Olympus"}}, DOC,
     Err(40485, 'unrecognized time zone identifier: "Mars/Olympus"')),
    ({"$year": {"date": "$date", "timezone": "america/new_york"}}, DOC, Err(40485)),
    ({"$year": {"date": "$date", "timezone": "+4:30"}}, DOC, Err(40485)),
    ({"$year": {"date": "$date", "timezone": "+04:3"}}, DOC, Err(40485)),
    ({"$year": {"date": "$date", "timezone": "PST"}}, DOC, Err(40485)),
    ({"$year": {"date": "$date", "tz": "UTC"}}, DOC,
     Err(40535, 'unrecognized option to $year: "tz"')),
    ({"$year": {"timezone": "UTC"}}, None, Err(40539)),
    ({"$year": {}}, None, Err(40539)),
    ({"$week": ["$date", "$date"]}, DOC,
     Err(40536, "$week accepts exactly one argument if given an array, but was given 2")),
    # the date is checked before the time zone
    ({"$year": {"date": "x", "timezone": "Nope"}}, None, Err(16006)),
]

TO_STRING = [
    # --- the manual's example
    ({"$dateToString": {"format": "%Y-%m-%d", "date": "$date"}}, DOC, "2014-01-01"),
    ({"$dateToString": {"format": "%H:%M:%S:%L%z", "date": "$date", "timezone": NY}}, DOC,
     "03:15:39:736-0500"),
    ({"$dateToString": {"format": "%H:%M:%S:%L%z", "date": "$date", "timezone": "+04:30"}},
     DOC, "12:45:39:736+0430"),
    ({"$dateToString": {"format": "%Z", "date": "$date", "timezone": NY}}, DOC, "-300"),
    ({"$dateToString": {"format": "%Z", "date": "$date", "timezone": "+04:30"}}, DOC, "270"),
    ({"$dateToString": {"format": "%b %d, %Y", "date": "$date", "timezone": "+04:30"}}, DOC,
     "Jan 01, 2014"),
    ({"$dateToString": {"format": "%B %d, %Y", "date": "$date", "timezone": "+04:30"}}, DOC,
     "January 01, 2014"),
    # --- the default format keeps its Z in any zone (changed only in 7.1)
    ({"$dateToString": {"date": "$date"}}, DOC, "2014-01-01T08:15:39.736Z"),
    ({"$dateToString": {"date": "$date", "timezone": NY}}, DOC, "2014-01-01T03:15:39.736Z"),
    # --- every specifier
    ({"$dateToString": {"format": "%j %w %u %U %V %G %%", "date": "$date"}}, DOC,
     "001 4 3 00 01 2014 %"),
    ({"$dateToString": {"format": "%G-W%V-%u", "date": dt(2010, 1, 3)}}, None, "2009-W53-7"),
    ({"$dateToString": {"format": "%Y %U %w", "date": dt(2010, 1, 3)}}, None, "2010 01 1"),
    ({"$dateToString": {"format": "%b %B", "date": dt(2021, 9, 5)}}, None, "Sep September"),
    ({"$dateToString": {"format": "%z %Z", "date": "$date", "timezone": "-0330"}}, DOC,
     "-0330 -210"),
    ({"$dateToString": {"format": "%z", "date": "$date", "timezone": "Asia/Kolkata"}}, DOC,
     "+0530"),
    ({"$dateToString": {"format": "%Y-%m-%d", "date": dt(2, 3, 4)}}, None, "0002-03-04"),
    ({"$dateToString": {"format": "no specifiers", "date": "$date"}}, DOC, "no specifiers"),
    ({"$dateToString": {"format": "", "date": "$date"}}, DOC, ""),
    ({"$dateToString": {"format": "%L", "date": ms(1969, 12, 31, 23, 59, 59, 5)}}, None, "005"),
    ({"$dateToString": {"format": "%Y-%m-%dT%H:%M:%S", "date": OID}}, None,
     "2018-03-27T04:08:58"),
    ({"$dateToString": {"format": "%s", "date": "$date"}}, DOC, Err(18536)),
    # --- DST: the same wall time twice on 2021-11-07
    ({"$dateToString": {"format": "%H:%M %z", "date": dt(2021, 11, 7, 5, 30), "timezone": NY}},
     None, "01:30 -0400"),
    ({"$dateToString": {"format": "%H:%M %z", "date": dt(2021, 11, 7, 6, 30), "timezone": NY}},
     None, "01:30 -0500"),
    # --- nullish and onNull
    ({"$dateToString": {"date": None}}, None, None),
    ({"$dateToString": {"date": "$nope", "onNull": "none"}}, None, "none"),
    ({"$dateToString": {"date": "$nope", "onNull": "$nope2"}}, None, MISSING),
    ({"$dateToString": {"date": "$date", "onNull": "none"}}, DOC, "2014-01-01T08:15:39.736Z"),
    ({"$dateToString": {"date": "$date", "format": None}}, DOC, None),
    ({"$dateToString": {"date": "$date", "timezone": None}}, DOC, None),
    # onNull wins over a null format; a bad time zone still fails
    ({"$dateToString": {"date": None, "format": None, "onNull": 1}}, None, 1),
    ({"$dateToString": {"date": None, "timezone": "Nope", "onNull": 1}}, None, Err(40485)),
    # --- errors
    ({"$dateToString": {"date": "$date", "format": 5}}, DOC,
     Err(18533, "$dateToString requires that 'format' be a string, found: int with value 5")),
    ({"$dateToString": {"date": "$date", "format": "%Y%"}}, DOC,
     Err(18535, "Unmatched '%' at end of format string")),
    ({"$dateToString": {"date": "$date", "format": "%Q"}}, DOC,
     Err(18536, "Invalid format character '%Q' in format string")),
    ({"$dateToString": {"date": None, "format": "%Q"}}, None, Err(18536)),
    ({"$dateToString": {"format": "%Y"}}, None,
     Err(18628, "Missing 'date' parameter to $dateToString")),
    ({"$dateToString": {"date": "$date", "fmt": "%Y"}}, DOC,
     Err(18534, "Unrecognized argument to $dateToString: fmt")),
    ({"$dateToString": "$date"}, DOC,
     Err(18629, "$dateToString only supports an object as its argument")),
    ({"$dateToString": {"date": 42, "format": "%Y"}}, None,
     Err(16006, "can't convert from BSON type int to Date")),
    ({"$dateToString": {"format": "%Y", "date": {"$dateFromParts": {"year": 9999, "month": 13}}}},
     None, Err(18537, "Could not convert date to string: date component was outside the "
               "supported range of 0-9999: 10000")),
]

PARTS = [
    # --- $dateToParts, the manual's example
    ({"$dateToParts": {"date": ms(2017, 1, 1, 1, 29, 9, 123)}}, None,
     {"year": 2017, "month": 1, "day": 1, "hour": 1, "minute": 29, "second": 9,
      "millisecond": 123}),
    ({"$dateToParts": {"date": ms(2017, 1, 1, 1, 29, 9, 123), "iso8601": True}}, None,
     {"isoWeekYear": 2016, "isoWeek": 52, "isoDayOfWeek": 7, "hour": 1, "minute": 29,
      "second": 9, "millisecond": 123}),
    ({"$dateToParts": {"date": ms(2017, 1, 1, 1, 29, 9, 123), "timezone": NY}}, None,
     {"year": 2016, "month": 12, "day": 31, "hour": 20, "minute": 29, "second": 9,
      "millisecond": 123}),
    ({"$dateToParts": {"date": ms(2017, 1, 1, 1, 29, 9, 123), "iso8601": False}}, None,
     {"year": 2017, "month": 1, "day": 1, "hour": 1, "minute": 29, "second": 9,
      "millisecond": 123}),
    ({"$dateToParts": {"date": None}}, None, None),
    ({"$dateToParts": {"date": "$date", "iso8601": None}}, DOC, None),
    ({"$dateToParts": {"date": "$date", "timezone": None}}, DOC, None),
    ({"$dateToParts": {"date": "$date", "iso8601": 1}}, DOC,
     Err(40521, "iso8601 must evaluate to a bool, found int")),
    ({"$dateToParts": {"date": 1}}, None, Err(16006)),
    ({"$dateToParts": {"timezone": NY}}, None,
     Err(40522, "Missing 'date' parameter to $dateToParts")),
    ({"$dateToParts": {"date": "$date", "iso": True}}, DOC,
     Err(40520, "Unrecognized argument to $dateToParts: iso")),
    ({"$dateToParts": 1}, None,
     Err(40524, "$dateToParts only supports an object as its argument")),
    # --- $dateFromParts, the manual's examples
    ({"$dateFromParts": {"year": 2017, "month": 2, "day": 8, "hour": 12}}, None,
     dt(2017, 2, 8, 12)),
    ({"$dateFromParts": {"isoWeekYear": 2017, "isoWeek": 6, "isoDayOfWeek": 3, "hour": 12}},
     None, dt(2017, 2, 8, 12)),
    ({"$dateFromParts": {"year": 2016, "month": 12, "day": 31, "hour": 23, "minute": 46,
                         "second": 12, "timezone": NY}}, None, dt(2017, 1, 1, 4, 46, 12)),
    ({"$dateFromParts": {"year": 2017}}, None, dt(2017, 1, 1)),
    ({"$dateFromParts": {"isoWeekYear": 2017}}, None, dt(2017, 1, 2)),
    ({"$dateFromParts": {"year": 2017, "millisecond": 5}}, None, ms(2017, 1, 1, 0, 0, 0, 5)),
    # --- values out of range carry over, as the manual describes
    ({"$dateFromParts": {"year": 2017, "month": 14, "day": 1}}, None, dt(2018, 2, 1)),
    ({"$dateFromParts": {"year": 2017, "month": 0, "day": 1}}, None, dt(2016, 12, 1)),
    ({"$dateFromParts": {"year": 2017, "month": -1, "day": 1}}, None, dt(2016, 11, 1)),
    ({"$dateFromParts": {"year": 2017, "month": 3, "day": 0}}, None, dt(2017, 2, 28)),
    ({"$dateFromParts": {"year": 2016, "month": 2, "day": 30}}, None, dt(2016, 3, 1)),
    ({"$dateFromParts": {"year": 2017, "hour": -1}}, None, dt(2016, 12, 31, 23)),
    ({"$dateFromParts": {"year": 2017, "minute": 150}}, None, dt(2017, 1, 1, 2, 30)),
    ({"$dateFromParts": {"year": 2017, "second": 86400 * 40}}, None, dt(2017, 2, 10)),
    ({"$dateFromParts": {"year": 2017, "millisecond": -1}}, None,
     ms(2016, 12, 31, 23, 59, 59, 999)),
    ({"$dateFromParts": {"isoWeekYear": 2017, "isoWeek": 53, "isoDayOfWeek": 8}}, None,
     dt(2018, 1, 8)),
    ({"$dateFromParts": {"isoWeekYear": 2017, "isoWeek": 0}}, None, dt(2016, 12, 26)),
    # --- numbers of any type that hold integers
    ({"$dateFromParts": {"year": 2017.0, "month": Int64(3), "day": bson.Decimal128("4")}}, None,
     dt(2017, 3, 4)),
    # --- offsets and DST (America/New_York)
    ({"$dateFromParts": {"year": 2017, "month": 1, "day": 1, "timezone": "+05:30"}}, None,
     dt(2016, 12, 31, 18, 30)),
    ({"$dateFromParts": {"year": 2017, "month": 1, "day": 1, "timezone": "-0330"}}, None,
     dt(2017, 1, 1, 3, 30)),
    # 02:30 on 2021-03-14 does not exist: it is read as 03:30 daylight time
    ({"$dateFromParts": {"year": 2021, "month": 3, "day": 14, "hour": 2, "minute": 30,
                         "timezone": NY}}, None, dt(2021, 3, 14, 7, 30)),
    ({"$dateFromParts": {"year": 2021, "month": 3, "day": 14, "hour": 3, "minute": 30,
                         "timezone": NY}}, None, dt(2021, 3, 14, 7, 30)),
    ({"$dateFromParts": {"year": 2021, "month": 3, "day": 14, "hour": 1, "minute": 30,
                         "timezone": NY}}, None, dt(2021, 3, 14, 6, 30)),
    # 01:30 on 2021-11-07 happens twice: the first (daylight) one
    ({"$dateFromParts": {"year": 2021, "month": 11, "day": 7, "hour": 1, "minute": 30,
                         "timezone": NY}}, None, dt(2021, 11, 7, 5, 30)),
    ({"$dateFromParts": {"year": 2021, "month": 11, "day": 7, "hour": 2, "minute": 30,
                         "timezone": NY}}, None, dt(2021, 11, 7, 7, 30)),
    ({"$dateFromParts": {"year": 2021, "month": 7, "day": 1, "timezone": NY}}, None,
     dt(2021, 7, 1, 4)),
    # --- nullish
    ({"$dateFromParts": {"year": None}}, None, None),
    ({"$dateFromParts": {"year": 2017, "hour": "$nope"}}, None, None),
    ({"$dateFromParts": {"year": 2017, "timezone": None}}, None, None),
    # --- errors
    ({"$dateFromParts": {"year": 2017, "month": 1.5}}, None,
     Err(40515, "'month' must evaluate to an integer, found double with value 1.5")),
    ({"$dateFromParts": {"year": "2017"}}, None, Err(40515)),
    ({"$dateFromParts": {"year": 2017, "month": 40000}}, None,
     Err(31034, "'month' must evaluate to a value in the range [-32768, 32767]; value 40000 is "
         "not in range")),
    ({"$dateFromParts": {"year": 2017, "minute": -40000}}, None, Err(31034)),
    ({"$dateFromParts": {"year": 10000}}, None,
     Err(40523, "'year' must evaluate to an integer in the range 1 to 9999, found 10000")),
    ({"$dateFromParts": {"year": 0}}, None, Err(40523)),
    ({"$dateFromParts": {"isoWeekYear": 0}}, None,
     Err(31095, "'isoWeekYear' must evaluate to an integer in the range 1 to 9999, found 0")),
    ({"$dateFromParts": {"month": 1}}, None,
     Err(40516, "$dateFromParts requires either 'year' or 'isoWeekYear' to be present")),
    ({"$dateFromParts": {"year": 2017, "isoWeek": 1}}, None,
     Err(40489, "$dateFromParts does not allow mixing natural dates with ISO dates")),
    ({"$dateFromParts": {"isoWeekYear": 2017, "day": 1}}, None,
     Err(40525, "$dateFromParts does not allow mixing ISO dates with natural dates")),
    ({"$dateFromParts": {"year": 2017, "days": 1}}, None,
     Err(40518, "Unrecognized argument to $dateFromParts: days")),
    ({"$dateFromParts": 2017}, None,
     Err(40519, "$dateFromParts only supports an object as its argument")),
    ({"$dateFromParts": {"year": 2017, "timezone": "Nope"}}, None, Err(40485)),
]

FROM_STRING = [
    # --- the manual's examples
    ({"$dateFromString": {"dateString": "2017-02-08T12:10:40.787", "timezone": NY}}, None,
     ms(2017, 2, 8, 17, 10, 40, 787)),
    ({"$dateFromString": {"dateString": "2017-02-08", "timezone": NY}}, None, dt(2017, 2, 8, 5)),
    ({"$dateFromString": {"dateString": "06-15-2018", "format": "%m-%d-%Y"}}, None,
     dt(2018, 6, 15)),
    ({"$dateFromString": {"dateString": "15-06-2018", "format": "%d-%m-%Y"}}, None,
     dt(2018, 6, 15)),
    ({"$dateFromString": {"dateString": "2017-02-08T12:10:40.787Z"}}, None,
     ms(2017, 2, 8, 12, 10, 40, 787)),
    ({"$dateFromString": {"dateString": "2017-02-08T12:10:40.787", "timezone": "+0500"}}, None,
     ms(2017, 2, 8, 7, 10, 40, 787)),
    # --- ISO forms and offsets in the string
    ({"$dateFromString": {"dateString": "2017-02-08T12:10:40+05:30"}}, None,
     dt(2017, 2, 8, 6, 40, 40)),
    ({"$dateFromString": {"dateString": "2017-02-08T12:10:40-0800"}}, None,
     dt(2017, 2, 8, 20, 10, 40)),
    ({"$dateFromString": {"dateString": "2017-02-08 12:10"}}, None, dt(2017, 2, 8, 12, 10)),
    ({"$dateFromString": {"dateString": "2017-02-08T12:10:40.5"}}, None,
     ms(2017, 2, 8, 12, 10, 40, 500)),
    ({"$dateFromString": {"dateString": "2017-02-08T12:10:40.123456"}}, None,
     ms(2017, 2, 8, 12, 10, 40, 123)),
    ({"$dateFromString": {"dateString": "2017/02/08"}}, None, dt(2017, 2, 8)),
    ({"$dateFromString": {"dateString": "20170208"}}, None, dt(2017, 2, 8)),
    ({"$dateFromString": {"dateString": "2017-02"}}, None, dt(2017, 2, 1)),
    ({"$dateFromString": {"dateString": "02/08/2017"}}, None, dt(2017, 2, 8)),
    ({"$dateFromString": {"dateString": "08.02.2017"}}, None, dt(2017, 2, 8)),
    ({"$dateFromString": {"dateString": "Feb 8, 2017 10:00"}}, None, dt(2017, 2, 8, 10)),
    ({"$dateFromString": {"dateString": "8 February 2017"}}, None, dt(2017, 2, 8)),
    ({"$dateFromString": {"dateString": "2017-02-08 12:00 EST"}}, None, dt(2017, 2, 8, 17)),
    ({"$dateFromString": {"dateString": "2017-02-08 12:00 GMT+01:00"}}, None,
     dt(2017, 2, 8, 11)),
    ({"$dateFromString": {"dateString": "  2017-02-08  "}}, None, dt(2017, 2, 8)),
    ({"$dateFromString": {"dateString": "1969-07-20T20:17:40Z"}}, None, dt(1969, 7, 20, 20, 17, 40)),
    # a time zone argument of UTC (or +00) allows a zone in the string
    ({"$dateFromString": {"dateString": "2017-02-08T12:00:00Z", "timezone": "UTC"}}, None,
     dt(2017, 2, 8, 12)),
    ({"$dateFromString": {"dateString": "2017-02-08T12:00:00+01", "timezone": "+00:00"}}, None,
     dt(2017, 2, 8, 11)),
    # --- formats
    ({"$dateFromString": {"dateString": "2017-02-08 12:10:40.787",
                          "format": "%Y-%m-%d %H:%M:%S.%L"}}, None,
     ms(2017, 2, 8, 12, 10, 40, 787)),
    ({"$dateFromString": {"dateString": "08 Feb 2017", "format": "%d %b %Y"}}, None,
     dt(2017, 2, 8)),
    ({"$dateFromString": {"dateString": "February/08/2017", "format": "%B/%d/%Y"}}, None,
     dt(2017, 2, 8)),
    ({"$dateFromString": {"dateString": "2017-W06-3", "format": "%G-W%V-%u"}}, None,
     dt(2017, 2, 8)),
    ({"$dateFromString": {"dateString": "2017-02-08 12 +0530", "format": "%Y-%m-%d %H %z"}}, None,
     dt(2017, 2, 8, 6, 30)),
    ({"$dateFromString": {"dateString": "2017-02-08 12 -300", "format": "%Y-%m-%d %H %Z"}}, None,
     dt(2017, 2, 8, 17)),
    ({"$dateFromString": {"dateString": "100% 2017", "format": "100%% %Y"}}, None,
     Err(241)),  # no month nor day
    ({"$dateFromString": {"dateString": "2017-02-08", "format": "%Y-%m-%d",
                          "timezone": "Asia/Tokyo"}}, None, dt(2017, 2, 7, 15)),
    # --- DST (America/New_York): a skipped wall time moves an hour on
    ({"$dateFromString": {"dateString": "2021-03-14T02:30:00", "timezone": NY}}, None,
     dt(2021, 3, 14, 7, 30)),
    ({"$dateFromString": {"dateString": "2021-11-07T01:30:00", "timezone": NY}}, None,
     dt(2021, 11, 7, 5, 30)),
    ({"$dateFromString": {"dateString": "2021-07-04T12:00:00", "timezone": NY}}, None,
     dt(2021, 7, 4, 16)),
    # --- nullish, onNull, onError
    ({"$dateFromString": {"dateString": None}}, None, None),
    ({"$dateFromString": {"dateString": "$nope", "onNull": "was null"}}, None, "was null"),
    ({"$dateFromString": {"dateString": "2017-02-08", "timezone": None}}, None, None),
    ({"$dateFromString": {"dateString": "2017-02-08", "format": None}}, None, None),
    ({"$dateFromString": {"dateString": "not a date", "onError": "bad"}}, None, "bad"),
    ({"$dateFromString": {"dateString": 5, "onError": "bad"}}, None, "bad"),
    ({"$dateFromString": {"dateString": "2017-02-08T12:00Z", "timezone": NY, "onError": 0}},
     None, 0),
    ({"$dateFromString": {"dateString": "2017-02-08", "onError": "$nope"}}, None, dt(2017, 2, 8)),
    # onError does not cover a bad format or time zone
    ({"$dateFromString": {"dateString": "x", "format": "%Q", "onError": 0}}, None, Err(18536)),
    ({"$dateFromString": {"dateString": "x", "timezone": "Nope", "onError": 0}}, None,
     Err(40485)),
    # --- errors
    ({"$dateFromString": {"dateString": "not a date"}}, None, Err(241)),
    ({"$dateFromString": {"dateString": ""}}, None, Err(241)),
    ({"$dateFromString": {"dateString": "2017-02-30"}}, None, Err(241)),
    ({"$dateFromString": {"dateString": "2017-02-08T25:00:00"}}, None, Err(241)),
    ({"$dateFromString": {"dateString": "12:00:00"}}, None,
     Err(241, 'an incomplete date/time string has been found, with elements missing: '
         '"12:00:00"')),
    ({"$dateFromString": {"dateString": "2017-02-08 America/New_York"}}, None, Err(241)),
    ({"$dateFromString": {"dateString": "2017-02-08", "format": "%Y-%m"}}, None, Err(241)),
    ({"$dateFromString": {"dateString": "2017-02", "format": "%Y-%m-%d"}}, None, Err(241)),
    ({"$dateFromString": {"dateString": "2017/02/08", "format": "%Y-%m-%d"}}, None, Err(241)),
    ({"$dateFromString": {"dateString": 5}}, None,
     Err(241, "$dateFromString requires that 'dateString' be a string, found: int with "
         "value 5")),
    ({"$dateFromString": {"dateString": "2017-02-08T12:00:00Z", "timezone": NY}}, None,
     Err(241, "you cannot pass in a date/time string with time zone information ('Z') "
         "together with a timezone argument")),
    ({"$dateFromString": {"dateString": "2017-02-08T12:00:00+0100", "timezone": NY}}, None,
     Err(241, "you cannot pass in a date/time string with GMT offset together with a "
         "timezone argument")),
    ({"$dateFromString": {"dateString": "2017", "format": 1}}, None,
     Err(40684, "$dateFromString requires that 'format' be a string, found: int with value 1")),
    ({"$dateFromString": {"dateString": "2017", "format": "%w"}}, None, Err(18536)),
    ({"$dateFromString": {"dateString": "2017", "format": "%Y%"}}, None, Err(18535)),
    ({"$dateFromString": {"format": "%Y"}}, None,
     Err(40542, "Missing 'dateString' parameter to $dateFromString")),
    ({"$dateFromString": {"dateString": "2017", "fmt": "%Y"}}, None,
     Err(40541, "Unrecognized argument to $dateFromString: fmt")),
    ({"$dateFromString": "2017-02-08"}, None,
     Err(40540, "$dateFromString only supports an object as an argument, found: string")),
    # --- $toDate (the manual's examples)
    ({"$toDate": 120000000000.5}, None, dt(1973, 10, 20, 21, 20)),
    ({"$toDate": Int64(1100000000000)}, None, dt(2004, 11, 9, 11, 33, 20)),
    ({"$toDate": Int64(-1100000000000)}, None, dt(1935, 2, 22, 12, 26, 40)),
    ({"$toDate": OID}, None, dt(2018, 3, 27, 4, 8, 58)),
    ({"$toDate": "2018-03-03"}, None, dt(2018, 3, 3)),
    ({"$toDate": "2018-03-20 11:00:06 +0500"}, None, dt(2018, 3, 20, 6, 0, 6)),
    ({"$toDate": Timestamp(1400000000, 1)}, None, dt(2014, 5, 13, 16, 53, 20)),
    ({"$toDate": -1.9}, None, ms(1969, 12, 31, 23, 59, 59, 999)),
    ({"$toDate": "$date"}, DOC, D),
    ({"$toDate": None}, None, None),
    ({"$toDate": "$nope"}, None, None),
    ({"$toDate": ["2018-03-03"]}, None, dt(2018, 3, 3)),
    ({"$toDate": "Friday"}, None, Err(241)),
    ({"$toDate": 5}, None,
     Err(241, "Unsupported conversion from int to date in $convert with no onError value")),
    ({"$toDate": True}, None, Err(241)),
    ({"$toDate": float("nan")}, None, Err(241)),
    ({"$toDate": 1e300}, None, Err(241)),
    ({"$toDate": [1, 2]}, None, Err(50723, "$toDate requires a single argument, got 2")),
]

ARITH = [
    # --- $dateAdd / $dateSubtract, the manual's examples
    ({"$dateAdd": {"startDate": dt(2020, 10, 31, 12, 10, 5), "unit": "day", "amount": 3}}, None,
     dt(2020, 11, 3, 12, 10, 5)),
    ({"$dateAdd": {"startDate": dt(2021, 3, 13, 12), "unit": "day", "amount": 1,
                   "timezone": NY}}, None, dt(2021, 3, 14, 11)),
    ({"$dateAdd": {"startDate": dt(2021, 3, 13, 12), "unit": "hour", "amount": 24,
                   "timezone": NY}}, None, dt(2021, 3, 14, 12)),
    ({"$dateSubtract": {"startDate": dt(2021, 1, 1, 3), "unit": "hour", "amount": 3}}, None,
     dt(2021, 1, 1)),
    # --- the end of the month
    ({"$dateAdd": {"startDate": dt(2021, 1, 31, 10), "unit": "month", "amount": 1}}, None,
     dt(2021, 2, 28, 10)),
    ({"$dateAdd": {"startDate": dt(2020, 1, 31), "unit": "month", "amount": 1}}, None,
     dt(2020, 2, 29)),
    ({"$dateAdd": {"startDate": dt(2020, 2, 29), "unit": "year", "amount": 1}}, None,
     dt(2021, 2, 28)),
    ({"$dateAdd": {"startDate": dt(2021, 1, 31), "unit": "quarter", "amount": 1}}, None,
     dt(2021, 4, 30)),
    ({"$dateSubtract": {"startDate": dt(2021, 3, 31), "unit": "month", "amount": 1}}, None,
     dt(2021, 2, 28)),
    ({"$dateAdd": {"startDate": dt(2021, 3, 31), "unit": "month", "amount": -13}}, None,
     dt(2020, 2, 29)),
    ({"$dateAdd": {"startDate": dt(2021, 1, 15), "unit": "month", "amount": 25}}, None,
     dt(2023, 2, 15)),
    # --- the other units
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "week", "amount": 2}}, None,
     dt(2021, 1, 15)),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "minute", "amount": -90}}, None,
     dt(2020, 12, 31, 22, 30)),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "second", "amount": Int64(86401)}},
     None, dt(2021, 1, 2, 0, 0, 1)),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "millisecond", "amount": 1500}}, None,
     ms(2021, 1, 1, 0, 0, 1, 500)),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "day", "amount": 2.0}}, None,
     dt(2021, 1, 3)),
    ({"$dateAdd": {"startDate": Timestamp(1400000000, 1), "unit": "second", "amount": 10}},
     None, dt(2014, 5, 13, 16, 53, 30)),
    ({"$dateAdd": {"startDate": OID, "unit": "day", "amount": 1}}, None,
     dt(2018, 3, 28, 4, 8, 58)),
    # --- time zones: calendar units on the wall clock, time units on elapsed time
    ({"$dateAdd": {"startDate": dt(2021, 11, 6, 12), "unit": "day", "amount": 1,
                   "timezone": NY}}, None, dt(2021, 11, 7, 13)),
    ({"$dateAdd": {"startDate": dt(2021, 11, 6, 12), "unit": "hour", "amount": 24,
                   "timezone": NY}}, None, dt(2021, 11, 7, 12)),
    ({"$dateAdd": {"startDate": dt(2020, 11, 1, 5, 50, 2), "unit": "hour", "amount": 1,
                   "timezone": NY}}, None, dt(2020, 11, 1, 6, 50, 2)),
    ({"$dateAdd": {"startDate": dt(2021, 2, 14, 12), "unit": "month", "amount": 1,
                   "timezone": NY}}, None, dt(2021, 3, 14, 11)),
    ({"$dateSubtract": {"startDate": dt(2021, 3, 14, 11), "unit": "day", "amount": 1,
                        "timezone": NY}}, None, dt(2021, 3, 13, 12)),
    ({"$dateAdd": {"startDate": dt(2021, 1, 31, 20), "unit": "month", "amount": 1,
                   "timezone": "+05:00"}}, None, dt(2021, 2, 28, 20)),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "hour", "amount": 5,
                   "timezone": "+05:30"}}, None, dt(2021, 1, 1, 5)),
    # --- nullish: any operand null gives null
    ({"$dateAdd": {"startDate": None, "unit": "day", "amount": 1}}, None, None),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "$nope", "amount": 1}}, None, None),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "day", "amount": None}}, None, None),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "day", "amount": 1, "timezone": None}},
     None, None),
    ({"$dateAdd": {"startDate": None, "unit": 5, "amount": "x"}}, None, None),
    # --- errors
    ({"$dateAdd": {"startDate": "2021-01-01", "unit": "day", "amount": 1}}, None,
     Err(5166403, "$dateAdd requires startDate to be convertible to a date")),
    ({"$dateSubtract": {"startDate": 1, "unit": "day", "amount": 1}}, None,
     Err(5166403, "$dateSubtract requires startDate to be convertible to a date")),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": 5, "amount": 1}}, None,
     Err(5166404, "$dateAdd expects string defining the time unit")),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "century", "amount": 1}}, None,
     Err(9, "unknown time unit value: century")),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "Day", "amount": 1}}, None, Err(9)),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "day", "amount": 1.5}}, None,
     Err(5166405, "$dateAdd expects integer amount of time units")),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "day", "amount": "1"}}, None,
     Err(5166405)),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "year", "amount": Int64(10**12)}}, None,
     Err(5976500, "invalid dateAdd 'amount' parameter value: 1000000000000 year")),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "millisecond",
                   "amount": Int64(2**63 - 1)}}, None, Err(5166406, "dateAdd overflowed")),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "year", "amount": 400000000}}, None,
     Err(5166406)),
    ({"$dateSubtract": {"startDate": dt(2021, 1, 1), "unit": "millisecond",
                        "amount": Int64(-2**63)}}, None,
     Err(6045000, "invalid $dateSubtract 'amount' parameter value: -9223372036854775808")),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "day", "amount": 1, "timezone": "X"}},
     None, Err(40485)),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "day"}}, None,
     Err(5166402, "$dateAdd requires startDate, unit, and amount to be present")),
    ({"$dateAdd": {"startDate": dt(2021, 1, 1), "unit": "day", "amount": 1, "tz": "UTC"}},
     None, Err(5166401, "Unrecognized argument to $dateAdd: tz. Expected arguments are "
               "startDate, unit, amount, and optionally timezone.")),
    ({"$dateSubtract": [1]}, None,
     Err(5166400, "$dateSubtract expects an object as its argument")),
]

DIFF = [
    # --- calendar boundaries crossed, as a long
    ({"$dateDiff": {"startDate": dt(2020, 12, 31, 23, 59, 59), "endDate": dt(2021, 1, 1),
                    "unit": "year"}}, None, Int64(1)),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": dt(2021, 12, 31, 23),
                    "unit": "year"}}, None, Int64(0)),
    ({"$dateDiff": {"startDate": dt(2021, 3, 31), "endDate": dt(2021, 4, 1),
                    "unit": "quarter"}}, None, Int64(1)),
    ({"$dateDiff": {"startDate": dt(2019, 11, 30), "endDate": dt(2021, 2, 1),
                    "unit": "quarter"}}, None, Int64(5)),
    ({"$dateDiff": {"startDate": dt(2021, 1, 31), "endDate": dt(2021, 2, 1),
                    "unit": "month"}}, None, Int64(1)),
    ({"$dateDiff": {"startDate": dt(2021, 2, 1), "endDate": dt(2021, 1, 31),
                    "unit": "month"}}, None, Int64(-1)),
    ({"$dateDiff": {"startDate": dt(2020, 1, 15), "endDate": dt(2021, 3, 1),
                    "unit": "month"}}, None, Int64(14)),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1, 23), "endDate": dt(2021, 1, 2, 1),
                    "unit": "day"}}, None, Int64(1)),
    ({"$dateDiff": {"startDate": dt(2020, 1, 1), "endDate": dt(2021, 1, 1), "unit": "day"}},
     None, Int64(366)),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1, 10, 59, 59), "endDate": dt(2021, 1, 1, 11),
                    "unit": "hour"}}, None, Int64(1)),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1, 10, 59, 59), "endDate": dt(2021, 1, 1, 11),
                    "unit": "minute"}}, None, Int64(1)),
    ({"$dateDiff": {"startDate": ms(2021, 1, 1, 10, 59, 59, 999), "endDate": dt(2021, 1, 1, 11),
                    "unit": "second"}}, None, Int64(1)),
    ({"$dateDiff": {"startDate": ms(2021, 1, 1, 10, 59, 59, 999), "endDate": dt(2021, 1, 1, 11),
                    "unit": "millisecond"}}, None, Int64(1)),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": dt(2020, 12, 31),
                    "unit": "hour"}}, None, Int64(-24)),
    # --- weeks, by startOfWeek (default Sunday); 2021-01-02 is a Saturday
    ({"$dateDiff": {"startDate": dt(2021, 1, 2), "endDate": dt(2021, 1, 3), "unit": "week"}},
     None, Int64(1)),
    ({"$dateDiff": {"startDate": dt(2021, 1, 2), "endDate": dt(2021, 1, 3), "unit": "week",
                    "startOfWeek": "monday"}}, None, Int64(0)),
    ({"$dateDiff": {"startDate": dt(2021, 1, 3), "endDate": dt(2021, 1, 4), "unit": "week",
                    "startOfWeek": "MON"}}, None, Int64(1)),
    ({"$dateDiff": {"startDate": dt(2021, 1, 3), "endDate": dt(2021, 1, 31), "unit": "week"}},
     None, Int64(4)),
    ({"$dateDiff": {"startDate": dt(2021, 1, 31), "endDate": dt(2021, 1, 3), "unit": "week",
                    "startOfWeek": "Wednesday"}}, None, Int64(-4)),
    # startOfWeek is read only for weeks
    ({"$dateDiff": {"startDate": dt(2021, 1, 2), "endDate": dt(2021, 1, 3), "unit": "day",
                    "startOfWeek": 5}}, None, Int64(1)),
    ({"$dateDiff": {"startDate": dt(2021, 1, 2), "endDate": dt(2021, 1, 3), "unit": "week",
                    "startOfWeek": None}}, None, None),
    # --- other date types
    ({"$dateDiff": {"startDate": Timestamp(1604255016, 0), "endDate": Timestamp(1604260800, 0),
                    "unit": "minute"}}, None, Int64(97)),
    ({"$dateDiff": {"startDate": OID, "endDate": OID, "unit": "hour"}}, None, Int64(0)),
    # --- time zones: local calendar, elapsed hours
    ({"$dateDiff": {"startDate": dt(2021, 3, 14, 4, 30), "endDate": dt(2021, 3, 14, 5, 30),
                    "unit": "day", "timezone": NY}}, None, Int64(1)),
    ({"$dateDiff": {"startDate": dt(2021, 3, 14, 4, 30), "endDate": dt(2021, 3, 14, 5, 30),
                    "unit": "day"}}, None, Int64(0)),
    ({"$dateDiff": {"startDate": dt(2021, 11, 7, 5), "endDate": dt(2021, 11, 7, 6),
                    "unit": "hour", "timezone": NY}}, None, Int64(1)),
    ({"$dateDiff": {"startDate": dt(2021, 3, 14, 6), "endDate": dt(2021, 3, 14, 8),
                    "unit": "hour", "timezone": NY}}, None, Int64(2)),
    ({"$dateDiff": {"startDate": dt(2021, 3, 13, 12), "endDate": dt(2021, 3, 14, 11),
                    "unit": "day", "timezone": NY}}, None, Int64(1)),
    ({"$dateDiff": {"startDate": dt(2020, 12, 31, 20), "endDate": dt(2021, 1, 1, 3),
                    "unit": "year", "timezone": "+05:00"}}, None, Int64(0)),
    ({"$dateDiff": {"startDate": dt(2020, 12, 31, 18), "endDate": dt(2020, 12, 31, 20),
                    "unit": "year", "timezone": "+05:00"}}, None, Int64(1)),
    # --- nullish
    ({"$dateDiff": {"startDate": None, "endDate": dt(2021, 1, 1), "unit": "day"}}, None, None),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": "$nope", "unit": "day"}}, None,
     None),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": dt(2021, 1, 1), "unit": None}},
     None, None),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": dt(2021, 1, 1), "unit": "day",
                    "timezone": None}}, None, None),
    ({"$dateDiff": {"startDate": None, "endDate": 5, "unit": "eon"}}, None, None),
    # --- errors
    ({"$dateDiff": {"startDate": "2021", "endDate": dt(2021, 1, 1), "unit": "day"}}, None,
     Err(5166307, "$dateDiff requires 'startDate' to be a date, but got string")),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": 1, "unit": "day"}}, None,
     Err(5166307, "$dateDiff requires 'endDate' to be a date, but got int")),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": dt(2021, 1, 1), "unit": 2}}, None,
     Err(5439013, "$dateDiff requires 'unit' to be a string, but got int")),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": dt(2021, 1, 1), "unit": "century"}},
     None, Err(5439014, "$dateDiff parameter 'unit' value cannot be recognized as a time unit: "
               "century")),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": dt(2021, 1, 1), "unit": "week",
                    "startOfWeek": 1}}, None,
     Err(5439015, "$dateDiff requires 'startOfWeek' to be a string, but got int")),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": dt(2021, 1, 1), "unit": "week",
                    "startOfWeek": "someday"}}, None,
     Err(5439016, "$dateDiff parameter 'startOfWeek' value cannot be recognized as a day of a "
         "week: someday")),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": dt(2021, 1, 1), "unit": "day",
                    "timezone": "INVALID"}}, None,
     Err(40485, "$dateDiff parameter 'timezone' value parsing failed :: caused by :: "
         "unrecognized time zone identifier: \"INVALID\"")),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": dt(2021, 1, 1), "unit": "day",
                    "timezone": 1}}, None, Err(40517)),
    ({"$dateDiff": {"startDate": dt(1, 1, 1), "endDate": Timestamp(0, 0),
                    "unit": "millisecond"}}, None, Int64(62135596800000)),
    ({"$dateDiff": {"endDate": dt(2021, 1, 1), "unit": "day"}}, None,
     Err(5166303, "Missing 'startDate' parameter to $dateDiff")),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "unit": "day"}}, None,
     Err(5166304, "Missing 'endDate' parameter to $dateDiff")),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": dt(2021, 1, 1)}}, None,
     Err(5166305, "Missing 'unit' parameter to $dateDiff")),
    ({"$dateDiff": {"startDate": dt(2021, 1, 1), "endDate": dt(2021, 1, 1), "unit": "day",
                    "units": "day"}}, None,
     Err(5166302, "Unrecognized argument to $dateDiff: units")),
    ({"$dateDiff": "x"}, None, Err(5166301, "$dateDiff only supports an object as its argument")),
]

T = dt(2021, 3, 20, 11, 30, 5)  # a Saturday

TRUNC = [
    # --- the manual's examples
    ({"$dateTrunc": {"date": T, "unit": "hour"}}, None, dt(2021, 3, 20, 11)),
    ({"$dateTrunc": {"date": T, "unit": "hour", "binSize": 2}}, None, dt(2021, 3, 20, 10)),
    ({"$dateTrunc": {"date": dt(2020, 5, 18, 14, 10, 30), "unit": "week", "binSize": 2,
                     "timezone": "America/Los_Angeles", "startOfWeek": "Monday"}}, None,
     dt(2020, 5, 11, 7)),
    ({"$dateTrunc": {"date": dt(2020, 5, 18, 14, 10, 30), "unit": "month", "binSize": 6}}, None,
     dt(2020, 1, 1)),
    ({"$dateTrunc": {"date": dt(2021, 3, 20), "unit": "year", "binSize": 10}}, None,
     dt(2020, 1, 1)),
    # --- each unit
    ({"$dateTrunc": {"date": T, "unit": "year"}}, None, dt(2021, 1, 1)),
    ({"$dateTrunc": {"date": T, "unit": "quarter"}}, None, dt(2021, 1, 1)),
    ({"$dateTrunc": {"date": dt(2021, 8, 20), "unit": "quarter"}}, None, dt(2021, 7, 1)),
    ({"$dateTrunc": {"date": T, "unit": "month"}}, None, dt(2021, 3, 1)),
    ({"$dateTrunc": {"date": T, "unit": "week"}}, None, dt(2021, 3, 14)),
    ({"$dateTrunc": {"date": T, "unit": "week", "startOfWeek": "monday"}}, None,
     dt(2021, 3, 15)),
    ({"$dateTrunc": {"date": T, "unit": "week", "startOfWeek": "sat"}}, None, dt(2021, 3, 20)),
    ({"$dateTrunc": {"date": T, "unit": "day"}}, None, dt(2021, 3, 20)),
    ({"$dateTrunc": {"date": T, "unit": "day", "binSize": 4}}, None, dt(2021, 3, 19)),
    ({"$dateTrunc": {"date": T, "unit": "day", "binSize": 7}}, None, dt(2021, 3, 20)),
    ({"$dateTrunc": {"date": T, "unit": "minute", "binSize": 15}}, None, dt(2021, 3, 20, 11, 30)),
    ({"$dateTrunc": {"date": T, "unit": "second"}}, None, T),
    ({"$dateTrunc": {"date": ms(2021, 3, 20, 11, 30, 5, 678), "unit": "millisecond",
                     "binSize": 100}}, None, ms(2021, 3, 20, 11, 30, 5, 600)),
    ({"$dateTrunc": {"date": dt(1999, 12, 31, 23), "unit": "day", "binSize": 3}}, None,
     dt(1999, 12, 29)),
    ({"$dateTrunc": {"date": dt(1969, 7, 20, 20, 17), "unit": "hour", "binSize": 5}}, None,
     dt(1969, 7, 20, 18)),
    ({"$dateTrunc": {"date": OID, "unit": "day"}}, None, dt(2018, 3, 27)),
    ({"$dateTrunc": {"date": T, "unit": "day", "binSize": Int64(1)}}, None, dt(2021, 3, 20)),
    ({"$dateTrunc": {"date": T, "unit": "day", "binSize": 2.0}}, None, dt(2021, 3, 19)),
    # --- time zones: days start at local midnight, across DST too
    ({"$dateTrunc": {"date": dt(2021, 3, 14, 12), "unit": "day", "timezone": NY}}, None,
     dt(2021, 3, 14, 5)),
    ({"$dateTrunc": {"date": dt(2021, 11, 7, 12), "unit": "day", "timezone": NY}}, None,
     dt(2021, 11, 7, 4)),
    ({"$dateTrunc": {"date": dt(2021, 3, 14, 3), "unit": "month", "timezone": NY}}, None,
     dt(2021, 3, 1, 5)),
    ({"$dateTrunc": {"date": dt(2021, 7, 4, 3), "unit": "year", "timezone": NY}}, None,
     dt(2021, 1, 1, 5)),
    ({"$dateTrunc": {"date": T, "unit": "hour", "timezone": "+05:30"}}, None,
     dt(2021, 3, 20, 11, 30)),
    ({"$dateTrunc": {"date": T, "unit": "hour", "binSize": 24, "timezone": "+05:30"}}, None,
     dt(2021, 3, 19, 18, 30)),
    ({"$dateTrunc": {"date": T, "unit": "day", "timezone": "Asia/Tokyo"}}, None,
     dt(2021, 3, 19, 15)),
    # --- nullish
    ({"$dateTrunc": {"date": None, "unit": "day"}}, None, None),
    ({"$dateTrunc": {"date": T, "unit": "$nope"}}, None, None),
    ({"$dateTrunc": {"date": T, "unit": "day", "binSize": None}}, None, None),
    ({"$dateTrunc": {"date": T, "unit": "day", "timezone": None}}, None, None),
    ({"$dateTrunc": {"date": T, "unit": "week", "startOfWeek": None}}, None, None),
    ({"$dateTrunc": {"date": T, "unit": "day", "startOfWeek": None}}, None, dt(2021, 3, 20)),
    ({"$dateTrunc": {"date": T, "unit": "day", "startOfWeek": "xyz"}}, None, dt(2021, 3, 20)),
    # --- errors
    ({"$dateTrunc": {"date": "x", "unit": "day"}}, None,
     Err(5439012, "$dateTrunc requires 'date' to be a date, but got string")),
    ({"$dateTrunc": {"date": T, "unit": 1}}, None,
     Err(5439013, "$dateTrunc requires 'unit' to be a string, but got int")),
    ({"$dateTrunc": {"date": T, "unit": "days"}}, None,
     Err(5439014, "$dateTrunc parameter 'unit' value cannot be recognized as a time unit: days")),
    ({"$dateTrunc": {"date": T, "unit": "day", "binSize": 1.5}}, None,
     Err(5439017, "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value '1.5' "
         "of type double")),
    ({"$dateTrunc": {"date": T, "unit": "day", "binSize": 0}}, None,
     Err(5439018, "$dateTrunc requires 'binSize' to be greater than 0, but got value 0")),
    ({"$dateTrunc": {"date": T, "unit": "day", "binSize": -3}}, None, Err(5439018)),
    ({"$dateTrunc": {"date": T, "unit": "week", "startOfWeek": "funday"}}, None,
     Err(5439016, "$dateTrunc parameter 'startOfWeek' value cannot be recognized as a day of a "
         "week: funday")),
    ({"$dateTrunc": {"date": T, "unit": "day", "binSize": Int64(200000000000)}}, None,
     Err(5439006, "dateTrunc unsupported binSize value")),
    ({"$dateTrunc": {"date": T, "unit": "hour", "binSize": Int64(2**62)}}, None,
     Err(5439002, "dateTrunc overflowed")),
    ({"$dateTrunc": {"date": T, "unit": "day", "timezone": "Nowhere"}}, None,
     Err(40485, "$dateTrunc parameter 'timezone' value parsing failed :: caused by :: "
         "unrecognized time zone identifier: \"Nowhere\"")),
    ({"$dateTrunc": {"unit": "day"}}, None,
     Err(5439009, "Missing 'date' parameter to $dateTrunc")),
    ({"$dateTrunc": {"date": T}}, None, Err(5439010, "Missing 'unit' parameter to $dateTrunc")),
    ({"$dateTrunc": {"date": T, "unit": "day", "weekStart": "monday"}}, None,
     Err(5439008, "Unrecognized argument to $dateTrunc: weekStart. Expected arguments are "
         "date, unit, and optionally, binSize, timezone, startOfWeek")),
    ({"$dateTrunc": [T]}, None, Err(5439007, "$dateTrunc only supports an object as its argument")),
]


@pytest.mark.parametrize("expr,doc,expected", EXTRACT)
def test_extractors(expr, doc, expected):
    check(expr, doc, expected)


@pytest.mark.parametrize("expr,doc,expected", TO_STRING)
def test_date_to_string(expr, doc, expected):
    check(expr, doc, expected)


@pytest.mark.parametrize("expr,doc,expected", PARTS)
def test_date_parts(expr, doc, expected):
    check(expr, doc, expected)


@pytest.mark.parametrize("expr,doc,expected", FROM_STRING)
def test_date_from_string(expr, doc, expected):
    check(expr, doc, expected)


@pytest.mark.parametrize("expr,doc,expected", ARITH)
def test_date_add_subtract(expr, doc, expected):
    check(expr, doc, expected)


@pytest.mark.parametrize("expr,doc,expected", DIFF)
def test_date_diff(expr, doc, expected):
    check(expr, doc, expected)


@pytest.mark.parametrize("expr,doc,expected", TRUNC)
def test_date_trunc(expr, doc, expected):
    check(expr, doc, expected)


def test_every_hour_of_a_dst_year_round_trips():
    """$dateToParts then $dateFromParts in America/New_York gives the
    instant back for every hour of 2021, except the repeated hour of the
    fall-back night, which reads as its first (daylight) occurrence."""
    start = dt(2021, 1, 1)
    for h in range(0, 365 * 24, 1):
        d = start + datetime.timedelta(hours=h)
        parts = ev({"$dateToParts": {"date": d, "timezone": NY}})
        parts["timezone"] = NY
        back = ev({"$dateFromParts": parts})
        if d == dt(2021, 11, 7, 6):  # 01:00 EST, the second 01:00
            assert back == dt(2021, 11, 7, 5)
        else:
            assert back == d, (d, parts)


def test_date_string_round_trip_across_zones():
    for tz in ["UTC", NY, "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe", "-0930"]:
        for h in range(0, 24 * 400, 37):
            d = dt(2020, 1, 1) + datetime.timedelta(hours=h, milliseconds=h % 1000)
            s = ev({"$dateToString": {"date": d, "timezone": tz,
                                      "format": "%Y-%m-%dT%H:%M:%S.%L%z"}})
            assert ev({"$dateFromString": {"dateString": s}}) == d, (tz, d, s)
