"""Run every test of a spec folder and report how each ends, to keep a
NOT_YET table honest.

    cd tests && python -m unified.triage ../../shared/spec/crud [file.json ...]
    cd tests && python -m unified.triage --not-yet ../../shared/spec/crud

Each test gets a fresh in-process server, as in test_spec_crud.py.  The
first form prints one line per test: PASS, SKIP (requirements), UNSUPPORTED
or FAIL, and the first line of the reason.  ``--not-yet`` prints a draft
NOT_YET table instead: a file whose every runnable test fails gets one entry,
a file with some passing tests gets an entry per failing test; each reason
is the first failure seen, in words (review it before pasting).
"""
from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import multifora

from .runner import Skipped, UnifiedRunner, Unsupported, load_spec


def run_one(spec, description: str) -> tuple[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        srv = multifora.Server(str(Path(tmp) / "db"), port=0, enable_test_commands=True)
        srv.start()
        try:
            UnifiedRunner(srv.uri).run(spec, description)
            return "PASS", ""
        except Skipped as exc:
            return "SKIP", exc.reason
        except Unsupported as exc:
            return "UNSUPPORTED", exc.reason
        except Exception as exc:  # noqa: BLE001 - reported, not handled
            return "FAIL", f"{type(exc).__name__}: {exc}".splitlines()[0]
        finally:
            srv.stop()


_SHIM_FEATURE = {
    "updateOne": "update operators", "updateMany": "update operators",
    "replaceOne": "replacement updates", "bulkWrite": "update operators",
    "find": "find's sort/projection", "findOne": "find's sort/projection",
    "findOneAndUpdate": "findAndModify's update/sort/projection",
    "findOneAndReplace": "findAndModify's replacement/sort/projection",
    "findOneAndDelete": "findAndModify's sort/projection",
}


def classify(status: str, message: str) -> str:
    """A NOT_YET reason in words for a test's first failure."""
    if status == "UNSUPPORTED":
        if message.startswith("failPoint"):
            return "configureFailPoint not implemented (fail points)"
        return f"runner: {message}"
    op = re.search(r"operation #\d+ [\w-]+\.(\w+)", message)
    op = op.group(1) if op else None
    if message.startswith("SpecFailure: outcome") and "reading the collection" in message:
        if "'shim'" in message or ": shim," in message:
            return "find's sort not implemented (the outcome check sorts by _id)"
        if "no such command: 'find'" in message:
            return "find not implemented (the outcome check reads with it)"
    if message.startswith("SpecFailure: outcome"):
        return "the collection's contents after the test differ"
    cmd = re.search(r"no such command: '(\w+)'", message)
    if cmd:
        name = cmd.group(1)
        if op == "countDocuments":
            return "countDocuments runs aggregate: not implemented (issue 6)"
        return f"{name} not implemented" + (" (issue 6)" if name == "aggregate" else "")
    if "'shim'" in message or ": shim," in message:
        return f"{_SHIM_FEATURE.get(op, op)} not implemented (NotImplemented 'shim')"
    if "collation other than" in message:
        return "collation other than simple not supported"
    if "$expr" in message:
        return "$expr not supported (let variables)"
    if "pipeline-style updates" in message:
        return "pipeline-style updates need aggregation (issue 6)"
    if "viewOn" in message:
        return "views (create with viewOn) not supported"
    if "$ prefixed field names" in message:
        return ("insert rejects top-level $-prefixed field names, which mongod 5.0+ "
                "accepts (DollarPrefixedFieldName)")
    if "expected an error" in message and "'$" in message:
        return "insert accepts $-prefixed keys inside _id, which mongod rejects"
    return message[:160]


def main(argv: list[str]) -> int:
    draft = argv[:1] == ["--not-yet"]
    if draft:
        argv = argv[1:]
    folder = Path(argv[0])
    names = argv[1:] or sorted(p.name for p in folder.glob("*.json"))
    for name in names:
        spec = load_spec(folder / name)
        results = []
        for test in spec["tests"]:
            status, why = run_one(spec, test["description"])
            results.append((test["description"], status, why))
            if not draft:
                print(f"{status:11} {name} :: {test['description']} :: {why[:300]}", flush=True)
        if draft:
            failing = [(d, classify(s, w)) for d, s, w in results if s in ("FAIL", "UNSUPPORTED")]
            if not failing:
                continue
            if any(s == "PASS" for _, s, _ in results):
                for desc, reason in failing:
                    print(f"    ({name!r}, {desc!r}):\n        {reason!r},")
            else:
                reasons = list(dict.fromkeys(r for _, r in failing))
                print(f"    {name!r}: {'; '.join(reasons)!r},")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
