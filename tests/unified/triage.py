"""Run every test of a spec folder and report how each ends, to keep
tests/spec/expected_failures.py honest.

    cd tests && python -m unified.triage ../../shared/spec/crud [file.json ...]
    cd tests && python -m unified.triage --expected ../../shared/spec/crud

Each test gets a fresh in-process server with test commands enabled, as in
tests/spec.  The first form prints one line per test: PASS, SKIP
(requirements), UNSUPPORTED (the runner cannot do it) or FAIL, and the first
line of the reason.  ``--expected`` prints draft expected_failures.py
entries instead: a file whose every runnable test fails gets one
``folder/file.json`` entry, a file with some passing tests gets one
``folder/file.json/description`` entry per failing test; each reason is the
first failure seen, shortened (review it before pasting).
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


def classify(status: str, message: str) -> str:
    """A one-line expected-failure reason for a test's first failure."""
    if status == "UNSUPPORTED":
        return f"runner: {message}"
    refused = re.search(r"(create|collMod) option '(\w+)' is not supported", message)
    if refused:
        return f"{refused.group(1)} option '{refused.group(2)}' not supported"
    if "failCommand not found" in message:
        return "configureFailPoint 'failCommand' not implemented"
    cmd = re.search(r"no such command: '(\w+)'", message)
    if cmd:
        return f"{cmd.group(1)} not implemented (CommandNotFound 59)"
    message = re.sub(r", full error: .*", "", message)
    return message.removeprefix("SpecFailure: ")[:160]


def main(argv: list[str]) -> int:
    draft = argv[:1] == ["--expected"]
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
            key = f"{folder.name}/{name}"
            if any(s == "PASS" for _, s, _ in results):
                for desc, reason in failing:
                    print(f"    {key + '/' + desc!r}:\n        {reason!r},")
            else:
                reasons = list(dict.fromkeys(r for _, r in failing))
                print(f"    {key!r}: {'; '.join(reasons)!r},")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
