"""The conformance scorecard: run tests/spec, count per folder, write
docs/scorecard.md.

    cd tests && python -m spec.scorecard              # run all, print, write the doc
    cd tests && python -m spec.scorecard --no-write   # run all, print only
    cd tests && python -m spec.scorecard -k gridfs    # extra pytest arguments: print only

The counts are pytest's own verdicts on tests/spec (so the scorecard and
`pytest spec` never disagree): pass; expected failure (a strict xfail listed
in expected_failures.py, with its reason); fail (anything else that fails,
including an expected failure that passed); skipped (the test's own
runOnRequirements exclude this server, or the spec folder is absent).
Exits with pytest's status.
"""
from __future__ import annotations

import collections
import datetime
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pymongo
import pytest

import multifora

from .cases import FOLDERS, REPLSET_FOLDERS

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DOC = REPO / "docs" / "scorecard.md"
CORPUS = "bson-corpus"
CHECKS = "self-checks"   # the tests that check the lists themselves
KINDS = ("pass", "xfail", "fail", "skip")
HEADINGS = {"pass": "pass", "xfail": "expected failure", "fail": "fail", "skip": "skipped"}


@dataclass
class Outcome:
    folder: str
    name: str
    kind: str = "pass"
    reason: str = ""


@dataclass
class Collector:
    """A pytest plugin: one Outcome per test, from its phase reports."""
    outcomes: dict = field(default_factory=dict)

    @staticmethod
    def _where(nodeid: str) -> tuple[str, str]:
        if "[" not in nodeid:
            return CHECKS, nodeid.split("::")[-1]
        name = nodeid[nodeid.index("[") + 1:-1]
        return name.split("/", 1)[0], name

    def pytest_runtest_logreport(self, report) -> None:
        folder, name = self._where(report.nodeid)
        out = self.outcomes.setdefault(report.nodeid, Outcome(folder, name))
        if report.skipped and hasattr(report, "wasxfail"):
            out.kind, out.reason = "xfail", report.wasxfail
        elif report.skipped:
            out.kind = "skip"
            longrepr = report.longrepr
            out.reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            out.reason = out.reason.removeprefix("Skipped: ")
        elif report.failed:
            out.kind = "fail"
            out.reason = str(report.longrepr).strip().splitlines()[-1][:300]


def _commit() -> str:
    def git(*args):
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True,
                              text=True).stdout.strip()
    sha = git("rev-parse", "--short", "HEAD") or "unknown"
    return sha + (" with uncommitted changes" if git("status", "--porcelain") else "")


def tally(outcomes) -> dict:
    """folder -> Counter of kinds, in FOLDERS order, then the corpus and the checks."""
    order = [*FOLDERS, CORPUS, CHECKS]
    table = {f: collections.Counter() for f in order}
    for out in outcomes:
        table.setdefault(out.folder, collections.Counter())[out.kind] += 1
    return {f: c for f, c in table.items() if sum(c.values())}


def text_table(table: dict) -> str:
    rows = [("folder", "tests", *[HEADINGS[k] for k in KINDS])]
    total = collections.Counter()
    for folder, counts in table.items():
        total.update(counts)
        rows.append((folder, str(sum(counts.values())), *[str(counts[k]) for k in KINDS]))
    rows.append(("total", str(sum(total.values())), *[str(total[k]) for k in KINDS]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))) for r in rows)


def markdown(outcomes: list, table: dict) -> str:
    total = collections.Counter()
    for counts in table.values():
        total.update(counts)
    ran = total["pass"] + total["xfail"] + total["fail"]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Conformance scorecard",
        "",
        "The MongoDB specification tests from `../shared/spec` run against MultiforaDB:",
        f"the unified-format folders {', '.join(f'`{f}`' for f in FOLDERS)} through",
        "`tests/unified` (schema 1.0 to 1.28, pymongo), and the BSON corpus round-tripped",
        "through the server. Written by `cd tests && python -m spec.scorecard`.",
        "",
        f"- when: {now}; commit {_commit()}",
        f"- server: MultiforaDB {multifora.__version__} answering as MongoDB "
        f"{multifora.MONGODB_VERSION}, a standalone with test commands enabled (a "
        f"one-member replica set for {', '.join(f'`{f}`' for f in REPLSET_FOLDERS)}, and "
        f"for the tests of the other folders whose requirements need one); "
        f"driver: pymongo {pymongo.version}",
        f"- {total['pass']} of the {ran} tests that run pass "
        f"({100.0 * total['pass'] / ran if ran else 0:.1f}%); {total['xfail']} are expected "
        f"failures, listed below with their reasons; {total['fail']} fail unexpectedly; "
        f"{total['skip']} are skipped by their own requirements.",
        "",
        "| folder | tests | pass | expected failure | fail | skipped |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for folder, counts in table.items():
        lines.append(f"| {folder} | {sum(counts.values())} | "
                     + " | ".join(str(counts[k]) for k in KINDS) + " |")
    lines.append(f"| **total** | **{sum(total.values())}** | "
                 + " | ".join(f"**{total[k]}**" for k in KINDS) + " |")

    def listing(kind: str, title: str, intro: str) -> None:
        chosen = [o for o in outcomes if o.kind == kind]
        if not chosen:
            return
        lines.extend(["", f"## {title}", "", intro, ""])
        for folder in table:
            for o in chosen:
                if o.folder == folder:
                    lines.append(f"- `{o.name}`: {o.reason}")

    listing("fail", "Unexpected failures", "Each of these fails and is not listed as expected.")
    listing("xfail", "Expected failures",
            "From `tests/spec/expected_failures.py`; each runs as a strict xfail, so the list "
            "only shrinks.")
    skips = collections.Counter((o.folder, o.reason) for o in outcomes if o.kind == "skip")
    if skips:
        lines.extend(["", "## Skipped", "",
                      "Tests whose runOnRequirements this server does not meet, by reason:", "",
                      "| folder | tests | reason |", "| --- | ---: | --- |"])
        for (folder, reason), n in sorted(skips.items(), key=lambda kv: (kv[0][0], -kv[1])):
            lines.append(f"| {folder} | {n} | {reason.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    write = "--no-write" not in argv
    extra = [a for a in argv if a != "--no-write"]
    if extra:
        write = False
    collector = Collector()
    status = pytest.main([str(HERE), "-q", "-p", "no:cacheprovider", *extra],
                         plugins=[collector])
    outcomes = list(collector.outcomes.values())
    table = tally(outcomes)
    print()
    print(text_table(table))
    if write:
        DOC.write_text(markdown(outcomes, table))
        print(f"\nwrote {DOC.relative_to(REPO)}")
    return int(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
