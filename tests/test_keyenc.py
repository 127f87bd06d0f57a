"""The order-preserving key encoding (csrc/bsonx/keyenc.c) against the
comparator (csrc/bsonx/compare.c, itself checked against exact fractions in
test_compare.py): over randomized values of every BSON type, memcmp order
of the encodings is MongoDB's order, descending parts reverse it, compound
keys compare part by part, and numerically equal values encode alike."""
import datetime
import math
import random
from decimal import Decimal

import bson
from bson import Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.binary import Binary
import pytest

from multifora import _core
from test_compare import dec, exact, mcmp, rand_number


def enc(*values, desc=""):
    return _core._key_encode(bson.encode({str(i): v for i, v in enumerate(values)}), desc)


def sign(x):
    return (x > 0) - (x < 0)


def bcmp(a: bytes, b: bytes) -> int:
    return (a > b) - (a < b)


def rand_string(rng):
    alphabet = ["a", "b", "\x00", "é", "z", "A", "\x7f", "日"]
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 5)))


def rand_value(rng, depth=0):
    k = rng.randrange(16 if depth < 2 else 12)
    if k <= 4:
        return rand_number(rng)
    if k == 5:
        return rand_string(rng)
    if k == 6:
        return rng.choice([None, MinKey(), MaxKey(), True, False])
    if k == 7:
        return Binary(bytes(rng.randrange(3) for _ in range(rng.randrange(3))), rng.choice([0, 4, 128]))
    if k == 8:
        return ObjectId(bytes(rng.randrange(2) for _ in range(12)))
    if k == 9:
        return rng.choice([datetime.datetime(1969, 12, 31, 23, 59, 59),
                           datetime.datetime(1970, 1, 1), datetime.datetime(2026, 11, 29),
                           datetime.datetime(1, 1, 1)])
    if k == 10:
        return rng.choice([Timestamp(0, 0), Timestamp(1, 2), Timestamp(1, 1), Timestamp(2**31, 0),
                           Regex("a", ""), Regex("a", "i"), Regex("b", ""), Code("x"), Code("")])
    if k == 11:
        return rng.choice(["", "a", "a\x00", "a\x00b", "ab"])
    if k in (12, 13):
        return {rand_string(rng).replace("\x00", "0") or "k": rand_value(rng, depth + 1)
                for _ in range(rng.randrange(3))}
    return [rand_value(rng, depth + 1) for _ in range(rng.randrange(3))]


def test_order_matches_comparator_over_every_type():
    rng = random.Random(1129)
    values = [rand_value(rng) for _ in range(700)]
    encoded = [enc(v) for v in values]
    checked = 0
    for i in range(len(values)):
        for j in range(i, min(len(values), i + 40)):
            want = mcmp(values[i], values[j])
            assert bcmp(encoded[i], encoded[j]) == want, (values[i], values[j])
            checked += 1
    assert checked > 20000


def test_sorting_by_encoding_is_sorting_by_comparator():
    rng = random.Random(7)
    values = [rand_value(rng) for _ in range(400)]
    by_key = sorted(values, key=lambda v: enc(v))
    for a, b in zip(by_key, by_key[1:]):
        assert mcmp(a, b) <= 0, (a, b)


def test_descending_reverses_and_compounds_compare_part_by_part():
    rng = random.Random(11)
    for _ in range(3000):
        a1, a2, b1, b2 = (rand_value(rng) for _ in range(4))
        for desc in ("00", "01", "10", "11"):
            c1 = mcmp(a1, b1) * (-1 if desc[0] == "1" else 1)
            c2 = mcmp(a2, b2) * (-1 if desc[1] == "1" else 1)
            want = c1 if c1 else c2
            assert bcmp(enc(a1, a2, desc=desc), enc(b1, b2, desc=desc)) == want, (a1, a2, b1, b2, desc)


@pytest.mark.parametrize("group", [
    [1, 1.0, Int64(1), Decimal128("1"), Decimal128("1.000"), Decimal128("0.001E+3")],
    [0, 0.0, -0.0, Int64(0), Decimal128("0"), Decimal128("-0"), Decimal128("0E-6176")],
    [math.nan, Decimal128("NaN"), Decimal128("-NaN")],
    [2**31 - 1, Int64(2**31 - 1), float(2**31 - 1)],
    [-1.5, Decimal128("-1.50")],
    [math.inf, Decimal128("Infinity")],
])
def test_equal_numbers_encode_alike(group):
    keys = {enc(v) for v in group}
    assert len(keys) == 1, [(v, enc(v).hex()) for v in group]


def test_subnormal_doubles_encode_in_order():
    """Doubles below 2**-1022 (and decimals between them) keep their exact
    order: a subnormal's exact decimal expansion runs to 767 digits, and
    the encoder once cut it at 800 of 803 (its mantissa's trailing zero
    bits kept), so that 1e-323 encoded above 1.5e-323."""
    rng = random.Random(20261204)
    tiny = 2.0 ** -1074
    values = [tiny, 2 * tiny, 3 * tiny, 1e-323, 1.5e-323, 2.0 ** -1022 - tiny, 2.0 ** -1022,
              2.0 ** -1022 + tiny, 2.0 ** -1000, 0.0]
    values += [rng.randrange(1, 2**52) * tiny for _ in range(150)]
    values += [-v for v in values]
    # decimals just either side of some of them (34 digits of the exact value, nudged)
    for v in values[:40]:
        d = Decimal(v)
        values += [dec(d.next_minus()) if d else dec(Decimal("-1E-6176")), dec(d),
                   dec(d.next_plus()) if d else dec(Decimal("1E-6176"))]
    encoded = [enc(v) for v in values]
    for i in range(len(values)):
        for j in range(len(values)):
            want = sign(exact(values[i])[1] - exact(values[j])[1])
            assert bcmp(encoded[i], encoded[j]) == want, (values[i], values[j])
            assert mcmp(values[i], values[j]) == want, (values[i], values[j])


def test_numbers_near_each_other_stay_ordered():
    ordered = [-math.inf, Decimal128("-1E+6144"), -1e308, Int64(-2**63), -2.0**53 - 2,
               Int64(-2**53 - 1), -1.5, dec(Decimal("-1.0000000000000000000000000000001")), -1,
               -5e-324, 0, Decimal128("1E-6176"), 5e-324, dec(Decimal(0.1)), 0.1,
               Decimal128("0.1000000000000000055511151231257828"), 1, 2.0**53,
               Int64(2**53 + 1), 2.0**63, Decimal128("9223372036854775808.5"), 1e308,
               Decimal128("1E+309"), math.inf]
    for a, b in zip(ordered, ordered[1:]):
        assert mcmp(a, b) == -1, (a, b)
        assert enc(a) < enc(b), (a, b)
