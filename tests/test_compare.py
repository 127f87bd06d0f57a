"""MongoDB's comparison order (csrc/bsonx/compare.c) against a reference
written here: numbers compared exactly with fractions across int32, int64,
double and decimal128, and the type brackets."""
import math
import random
import struct
from decimal import Decimal
from fractions import Fraction

import bson
from bson import Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.decimal128 import create_decimal128_context
from bson.binary import Binary
import pytest

from multifora import _core


def mcmp(a, b) -> int:
    """The server's order between two values (wrapped as {v: ...})."""
    r = _core._bson_compare(bson.encode({"v": a}), bson.encode({"v": b}))
    return (r > 0) - (r < 0)


def exact(v):
    """('nan'|'-inf'|'inf'|'fin', Fraction) for a numeric value."""
    if isinstance(v, Decimal128):
        d = v.to_decimal()
        if d.is_nan():
            return ("nan", None)
        if d.is_infinite():
            return ("-inf" if d < 0 else "inf", None)
        return ("fin", Fraction(d))
    if isinstance(v, float):
        if math.isnan(v):
            return ("nan", None)
        if math.isinf(v):
            return ("-inf" if v < 0 else "inf", None)
        return ("fin", Fraction(v))
    return ("fin", Fraction(int(v)))


def ref_num(a, b) -> int:
    rank = {"nan": 0, "-inf": 1, "fin": 2, "inf": 3}
    (ca, fa), (cb, fb) = exact(a), exact(b)
    if ca != cb or ca != "fin":
        return (rank[ca] > rank[cb]) - (rank[ca] < rank[cb])
    return (fa > fb) - (fa < fb)


_CTX = create_decimal128_context()
_CTX.traps = dict.fromkeys(_CTX.traps, False)


def dec(value) -> Decimal128:
    """A Decimal128 of `value`, rounded to 34 digits and clamped to range."""
    return Decimal128(_CTX.create_decimal(value))


def rand_number(rng: random.Random):
    k = rng.randrange(9)
    if k == 0:
        return rng.randrange(-2**31, 2**31)
    if k == 1:
        return Int64(rng.randrange(-2**63, 2**63))
    if k == 2:
        return Int64(rng.choice([2**53 + rng.randrange(-3, 4), -(2**53) + rng.randrange(-3, 4),
                                 2**63 - 1, -2**63, 0]))
    if k == 3:
        return struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
    if k == 4:
        return rng.choice([0.0, -0.0, math.inf, -math.inf, math.nan, 2.0**53, 2.0**63,
                           -2.0**63, 2.0**64, 5e-324, 1e308, 0.1, 1.0, -1.0])
    if k == 5:
        return float(rng.randrange(-10**6, 10**6)) / rng.choice([1, 2, 4, 10, 3])
    if k == 6:  # a decimal near a double: str() of it, or exact digits
        f = rng.choice([0.1, 1.0 / 3, 2.0**53 + 2, 1e300, 1e-300, 123.456])
        return dec(Decimal(repr(f)) if rng.random() < 0.5 else Decimal(f))
    if k == 7:
        digits = rng.randrange(1, 35)
        coeff = rng.randrange(10**(digits - 1), 10**digits)
        return dec(Decimal(rng.choice([-1, 1]) * coeff).scaleb(rng.randrange(-6000, 6000)))
    return Decimal128(rng.choice(["NaN", "Infinity", "-Infinity", "0", "-0", "0E-6176",
                                  "1E+6144", "1", "1.0", "0.1", "9223372036854775807",
                                  "9223372036854775808", "-9223372036854775808"]))


def test_numbers_exact_against_fractions():
    rng = random.Random(20261129)
    for _ in range(20000):
        a, b = rand_number(rng), rand_number(rng)
        assert mcmp(a, b) == ref_num(a, b), (a, b)
        assert mcmp(b, a) == -ref_num(a, b), (b, a)


@pytest.mark.parametrize("a,b,want", [
    (Int64(2**53 + 1), float(2**53), 1),          # beyond double precision
    (Int64(2**63 - 1), float(2**63), -1),
    (Int64(-2**63), float(-2**63), 0),
    (Decimal128("0.1"), 0.1, -1),                 # the double 0.1 is above 1/10
    (Decimal128("1"), 1, 0),
    (Decimal128("1.000"), Int64(1), 0),
    (Decimal128("-0"), 0.0, 0),
    (-0.0, 0, 0),
    (math.nan, Decimal128("NaN"), 0),
    (math.nan, -math.inf, -1),                    # NaN below every number
    (Decimal128("1E+400"), 1e308, 1),
    (Decimal128("-1E+400"), -math.inf, 1),
])
def test_number_cases(a, b, want):
    assert mcmp(a, b) == want
    assert mcmp(b, a) == -want


def test_type_brackets_in_order():
    ordered = [MinKey(), None, 1, "a", {"a": 1}, [1], Binary(b"x", 0), ObjectId(),
               False, bson.datetime.datetime(2020, 1, 1), Timestamp(1, 1), Regex("a"),
               bson.code.Code("x"), MaxKey()]
    for i, a in enumerate(ordered):
        for j, b in enumerate(ordered):
            want = (i > j) - (i < j)
            assert mcmp(a, b) == want, (a, b)


@pytest.mark.parametrize("a,b,want", [
    ("a", "b", -1), ("ab", "a", 1), ("", "a", -1), ("é", "z", 1),   # bytes, no collation
    ({"a": 1}, {"a": 1, "b": 1}, -1),                                  # prefix first
    ({"a": 1}, {"b": 0}, -1),                                          # names before values
    ({"a": "x"}, {"a": 1}, 1),                                         # types before names
    ([1, 2], [1, 3], -1), ([2], [1, 5], 1), ([], [None], -1),
    (Binary(b"ab", 0), Binary(b"b", 0), 1),                            # length first
    (Binary(b"a", 1), Binary(b"a", 0), 1),                             # then subtype
    (False, True, -1),
    (Timestamp(1, 2), Timestamp(1, 1), 1),
    (Regex("a", "i"), Regex("a", ""), 1),
])
def test_other_types(a, b, want):
    assert mcmp(a, b) == want
    assert mcmp(b, a) == -want
