"""Matching expected values of the unified test format against actual ones.

The rules ("Evaluating Matches" in the unified test format specification):

- an expected document whose only key starts with ``$$`` is a special
  operator ($$type, $$unsetOrMatches, $$matchesEntity, $$sessionLsid, $$lte,
  $$matchesHexBytes, $$matchAsDocument, $$matchAsRoot); as the value of a key
  it may also be $$exists or $$unsetOrMatches, which test the key itself;
- a root-level actual document may have fields the expected one does not
  name; a nested one may not; key order never matters;
- arrays have the same length and match element by element;
- int32, int64 and double are equal when numerically equal (not Decimal128,
  and never bool); every other value has the same BSON type and is equal.

``match`` raises ``MatchError`` (an AssertionError) naming the path of the
first difference.  ``exact_equal`` is the stricter comparison the outcome
check uses: no operators, no extra fields, numeric types kept apart (int32
and int64 excepted, since relaxed Extended JSON cannot tell them apart).
"""
from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any, Callable

from bson import json_util
from bson.binary import Binary
from bson.code import Code
from bson.dbref import DBRef
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp

__all__ = ["MISSING", "MatchError", "bson_type", "exact_equal", "match"]


class MatchError(AssertionError):
    """An actual value does not match the expected one."""


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()
"""An actual value that is absent (a missing key, an operation with no result)."""

_NUMERIC = ("int", "long", "double")


def bson_type(value: Any) -> str:
    """The $type name of a decoded BSON value (as pymongo decodes it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Int64):
        return "long"
    if isinstance(value, int):
        return "int" if -2**31 <= value < 2**31 else "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, Decimal128):
        return "decimal"
    if isinstance(value, Code):  # before str: Code is a str
        return "javascriptWithScope" if value.scope is not None else "javascript"
    if isinstance(value, str):
        return "string"
    if isinstance(value, ObjectId):
        return "objectId"
    if isinstance(value, datetime.datetime):
        return "date"
    if isinstance(value, (bytes, Binary)):
        return "binData"
    if isinstance(value, (Regex, re.Pattern)):
        return "regex"
    if isinstance(value, Timestamp):
        return "timestamp"
    if isinstance(value, MinKey):
        return "minKey"
    if isinstance(value, MaxKey):
        return "maxKey"
    if isinstance(value, (Mapping, DBRef)):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def _is_special(doc: Any) -> bool:
    return (isinstance(doc, Mapping) and len(doc) == 1
            and next(iter(doc)).startswith("$$"))


def _show(value: Any) -> str:
    if value is MISSING:
        return "<missing>"
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + "..."


def _fail(path: str, what: str) -> None:
    raise MatchError(f"at {path}: {what}")


def _naive_utc(value: datetime.datetime) -> datetime.datetime:
    if value.tzinfo is not None:
        value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return value


def _scalar_equal(expected: Any, actual: Any) -> bool:
    """Same BSON type (int/long/double interchangeable) and equal value."""
    et, at = bson_type(expected), bson_type(actual)
    if et in _NUMERIC and at in _NUMERIC:
        return expected == actual
    if et != at:
        return False
    if et == "date":
        return _naive_utc(expected) == _naive_utc(actual)
    if et == "binData":
        return (bytes(expected) == bytes(actual)
                and getattr(expected, "subtype", 0) == getattr(actual, "subtype", 0))
    if et == "regex":
        e = Regex.from_native(expected) if isinstance(expected, re.Pattern) else expected
        a = Regex.from_native(actual) if isinstance(actual, re.Pattern) else actual
        return e.pattern == a.pattern and e.flags == a.flags
    if et == "double":
        return expected == actual or (expected != expected and actual != actual)  # NaN
    return expected == actual


def match(expected: Any, actual: Any, *, root: bool = False, path: str = "$",
          entity: Callable[[str], Any] | None = None,
          session_lsid: Callable[[str], Any] | None = None) -> None:
    """Assert that ``actual`` matches ``expected``; raise MatchError if not.

    ``root``: the actual value is a root-level document (extra fields allowed).
    ``entity(name)`` resolves $$matchesEntity; ``session_lsid(name)`` resolves
    $$sessionLsid.  Both raise for an unknown name.
    """
    ctx = _Ctx(entity, session_lsid)
    ctx.match(expected, actual, root, path)


class _Ctx:
    def __init__(self, entity, session_lsid):
        self.entity = entity
        self.session_lsid = session_lsid

    def match(self, expected: Any, actual: Any, root: bool, path: str) -> None:
        if isinstance(expected, Mapping):
            if _is_special(expected):
                self.operator(expected, actual, root, path)
                return
            if actual is MISSING:
                _fail(path, f"expected a document {_show(expected)}, the value is missing")
            if not isinstance(actual, Mapping):
                _fail(path, f"expected a document {_show(expected)}, got {bson_type(actual)} "
                            f"{_show(actual)}")
            for key, value in expected.items():
                sub = f"{path}.{key}"
                has = key in actual
                if _is_special(value):
                    op = next(iter(value))
                    if op == "$$exists":
                        if bool(value[op]) != has:
                            _fail(sub, f"expected the key to {'exist' if value[op] else 'be absent'}"
                                       + (f", it is {_show(actual[key])}" if has else ""))
                        continue
                    if op == "$$unsetOrMatches":
                        if has:
                            self.match(value[op], actual[key], False, sub)
                        continue
                if not has:
                    _fail(sub, f"expected {_show(value)}, the key is missing")
                self.match(value, actual[key], False, sub)
            if not root:
                extra = [k for k in actual if k not in expected]
                if extra:
                    _fail(path, f"unexpected extra field(s) {extra} in a nested document "
                                f"{_show(actual)}")
            return
        if isinstance(expected, (list, tuple)):
            if not isinstance(actual, (list, tuple)):
                _fail(path, f"expected an array of {len(expected)}, got "
                            f"{'<missing>' if actual is MISSING else bson_type(actual)} {_show(actual)}")
            if len(expected) != len(actual):
                _fail(path, f"expected {len(expected)} element(s), got {len(actual)}: "
                            f"expected {_show(expected)}, actual {_show(actual)}")
            for i, (e, a) in enumerate(zip(expected, actual)):
                self.match(e, a, root, f"{path}[{i}]")
            return
        if actual is MISSING:
            _fail(path, f"expected {_show(expected)}, the value is missing")
        if not _scalar_equal(expected, actual):
            _fail(path, f"expected {bson_type(expected)} {_show(expected)}, "
                        f"got {bson_type(actual)} {_show(actual)}")

    def operator(self, spec: Mapping, actual: Any, root: bool, path: str) -> None:
        op, arg = next(iter(spec.items()))
        if op == "$$unsetOrMatches":
            if actual is not MISSING:
                self.match(arg, actual, root, path)
        elif op == "$$exists":
            # Only meaningful as a key's value (handled in match); at the top
            # level it asserts the value itself.
            if bool(arg) != (actual is not MISSING):
                _fail(path, f"$$exists: {arg} but the value is {_show(actual)}")
        elif op == "$$type":
            names = [arg] if isinstance(arg, str) else list(arg)
            if actual is MISSING:
                _fail(path, f"$$type {names}: the value is missing")
            t = bson_type(actual)
            ok = t in names or ("number" in names and t in (*_NUMERIC, "decimal"))
            if not ok:
                _fail(path, f"$$type: expected one of {names}, got {t} {_show(actual)}")
        elif op == "$$matchesEntity":
            if self.entity is None:
                raise ValueError("$$matchesEntity used where no entity map is available")
            self.match(self.entity(arg), actual, root, path)
        elif op == "$$sessionLsid":
            if self.session_lsid is None:
                raise ValueError("$$sessionLsid used where no entity map is available")
            want = self.session_lsid(arg)
            if not exact_equal(want, actual):
                _fail(path, f"$$sessionLsid {arg}: expected {_show(want)}, got {_show(actual)}")
        elif op == "$$lte":
            if bson_type(actual) not in _NUMERIC or bson_type(arg) not in _NUMERIC:
                _fail(path, f"$$lte {arg!r}: the value {_show(actual)} is not a number")
            if not actual <= arg:
                _fail(path, f"$$lte: {_show(actual)} > {arg!r}")
        elif op == "$$matchesHexBytes":
            want = bytes.fromhex(arg)
            got = actual if isinstance(actual, (bytes, bytearray)) else MISSING
            if got is MISSING or bytes(got) != want:
                _fail(path, f"$$matchesHexBytes {arg}: got {_show(actual)}")
        elif op == "$$matchAsDocument":
            if not isinstance(actual, str):
                _fail(path, f"$$matchAsDocument: the value {_show(actual)} is not a string")
            self.match(arg, json_util.loads(actual), False, path)
        elif op == "$$matchAsRoot":
            self.match(arg, actual, True, path)
        else:
            from .runner import Unsupported  # late: runner imports this module
            raise Unsupported(f"special operator {op} is not supported by this runner")


def exact_equal(a: Any, b: Any) -> bool:
    """Equal as the outcome check wants: documents key-order-insensitive and
    without extra fields, arrays in order, numeric types kept apart except
    int32/int64."""
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)) or set(a) != set(b):
            return False
        return all(exact_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        if not (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))) or len(a) != len(b):
            return False
        return all(exact_equal(x, y) for x, y in zip(a, b))
    ta, tb = bson_type(a), bson_type(b)
    if {ta, tb} <= {"int", "long"}:
        return a == b
    if ta != tb:
        return False
    return _scalar_equal(a, b)
