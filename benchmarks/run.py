"""The benchmark suite's one entry point: run the parts, write the results.

    python benchmarks/run.py [--quick | --full | --smoke]
                             [--parts table,peers,driver,big,churn,txn]
                             [--out benchmarks/results] [--size 4g] [--keep]

A part is a module ``benchmarks/part_<name>.py`` with ``run(ctx) -> dict``.
The parts present are imported; a part named in --parts but absent is an
error, one absent from the default list is noted and skipped.  Modes:

  --quick  (default) every part at a small size: the whole suite in under
           2 minutes on an idle 2-core machine;
  --full   every figure at its real size (1 GiB table, 10^4..10^6 peers, ...);
  --smoke  the smallest settings, seconds per part, for
           tests/test_benchmarks_smoke.py; ``ctx.quick`` is true too, so a
           part that does not know --smoke runs its quick size.

The context a part receives (class Context below):

  ctx.quick, ctx.full, ctx.smoke   the mode (exactly one of full/quick true)
  ctx.workdir    a scratch directory of this part's own, removed afterwards
  ctx.shared     ../shared (the project's shared data) or None if absent
  ctx.size       the --size argument ("4g", "20g") or None
  ctx.log(msg)   one progress line on stderr, prefixed with the part's name
  ctx.start_multifora(dbpath=None) -> Served   `python -m multifora serve`
  ctx.start_stub() -> Served                     the do-nothing floor stub
  ctx.row(name, unit, values, floor=None, ...)   one row in the common format
  ctx.alternate(rounds, run_side, sides)         A,B then B,A rounds
  ctx.disk_bytes(path), ctx.rss_bytes(pid)

A part returns {"part": name, "rows": [row, ...], optional "series",
optional "notes"}; each row {"name", "unit", "median", "min", "max", "n",
optional "floor", "ratio", "ratio_min", "ratio_max", "note"}.  "ratio" is
MultiforaDB's figure over the floor's, per round: for a time above 1 is
slower than the floor, for a rate (a unit ending in "/s") below 1 is.  How
far a row is from its floor, either way, is |log ratio| (``distance``).

Output: <out>/<UTC date>_<commit>.json (machine, software, commit, date,
mode, every part's dict), the same name .md (the tables) and .png (the
comparison table: MultiforaDB against the floor, log scale), plus
<same>_peers.png when the peers part ran.  Quick and smoke runs add
"-quick"/"-smoke" to the name; only full runs are meant to be committed.
A full run into benchmarks/results also rewrites README.md's benchmark block
(between the markers README_BEGIN and README_END; --no-readme: not).
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from _harness import disk_bytes  # noqa: E402 (after the path)

PARTS = ("table", "peers", "driver", "big", "churn", "txn", "changes", "indexes", "wildcard",
         "text", "geo", "auth")
ROW_KEYS = {"name": str, "unit": str, "median": (int, float), "min": (int, float),
            "max": (int, float), "n": int}
RATE_UNITS = ("/s",)  # a unit ending so is a rate: higher is better


def is_rate(unit: str) -> bool:
    return unit.endswith(RATE_UNITS)


def slowdown(row: dict) -> Optional[float]:
    """How many times slower than its floor a row is (below 1: faster),
    whichever way its unit runs; None without a floor and a ratio."""
    r = row.get("ratio")
    if "floor" not in row or not r or r <= 0:
        return None
    return 1 / r if is_rate(row["unit"]) else r


def furthest(results: dict, k: int = 3) -> List[tuple]:
    """The k rows of every part furthest from their floor, slower side:
    [(part, row, slowdown)], largest first."""
    found = []
    for name, part in results["parts"].items():
        for row in part.get("rows", []):
            x = slowdown(row)
            if x is not None:
                found.append((name, row, x))
    found.sort(key=lambda t: -t[2])
    return found[:k]


def furthest_lines(results: dict) -> List[str]:
    return [f"{name}: {row['name']}: {x:.1f}x its floor ({fmt(row['median'])} against "
            f"{fmt(row['floor'])} {row['unit']})" for name, row, x in furthest(results)]


# -- servers -----------------------------------------------------------------

class Served:
    """One server subprocess on loopback: MultiforaDB or the stub."""

    def __init__(self, kind: str, proc: subprocess.Popen, uri: str,
                 dbpath: Optional[Path], start_seconds: float):
        self.kind = kind
        self.proc = proc
        self.uri = uri
        self.dbpath = dbpath
        self.start_seconds = start_seconds  # spawn until it announced its address
        self._clients: list = []

    @property
    def pid(self) -> int:
        return self.proc.pid

    def client(self, **kwargs):
        """A pymongo client for this server, closed with the server."""
        import pymongo
        c = pymongo.MongoClient(self.uri, **kwargs)
        self._clients.append(c)
        return c

    def rss_bytes(self) -> int:
        return rss_bytes(self.proc.pid)

    def _close_clients(self) -> None:
        for c in self._clients:
            c.close()
        self._clients.clear()

    def stop(self) -> None:
        """SIGTERM (a clean shutdown), SIGKILL after 30 s."""
        self._close_clients()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill9(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash."""
        self._close_clients()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _drain(stream) -> None:
    for _ in stream:
        pass


def _spawn(kind: str, argv: List[str], cwd: Path, pattern: str, dbpath: Optional[Path]) -> Served:
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         cwd=str(cwd))
    for line in p.stdout:
        m = re.search(pattern, line)
        if m:
            seconds = time.perf_counter() - t0
            # Keep reading its output so a chatty server never blocks on a full pipe.
            threading.Thread(target=_drain, args=(p.stdout,), daemon=True).start()
            return Served(kind, p, m.group(1), dbpath, seconds)
    p.wait()
    raise RuntimeError(f"{kind} did not start (exit status {p.returncode})")


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (VmRSS), in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


# -- rows --------------------------------------------------------------------

def make_row(name: str, unit: str, values: Sequence[float],
             floor: Optional[Sequence[float]] = None, note: Optional[str] = None,
             ratios: Optional[Sequence[float]] = None) -> dict:
    """One row: median and range of ``values`` (one per round); with
    ``floor`` (the floor's values, one per round, paired with ``values``)
    the floor's median and the per-round ratio values/floor (median and
    range).
    ``ratios`` overrides the per-round ratios when they are not a plain
    pairing of values with floor."""
    if not values:
        raise ValueError(f"row {name!r}: no values")
    row = {"name": name, "unit": unit, "median": float(statistics.median(values)),
           "min": float(min(values)), "max": float(max(values)), "n": len(values)}
    if floor:
        row["floor"] = float(statistics.median(floor))
        if ratios is None:
            pairs = list(zip(values, floor))
            ratios = [v / f for v, f in pairs if v > 0 and f > 0]
    if ratios:
        row["ratio"] = float(statistics.median(ratios))
        row["ratio_min"] = float(min(ratios))
        row["ratio_max"] = float(max(ratios))
    if note:
        row["note"] = note
    return row


def check_part(result: object, name: str) -> List[str]:
    """What is wrong with a part's result (empty if nothing)."""
    if not isinstance(result, dict):
        return [f"run() returned {type(result).__name__}, not a dict"]
    problems = []
    if result.get("part") != name:
        problems.append(f"'part' is {result.get('part')!r}, not {name!r}")
    rows = result.get("rows")
    if not isinstance(rows, list):
        return problems + ["'rows' is not a list"]
    for i, row in enumerate(rows):
        for key, typ in ROW_KEYS.items():
            if not isinstance(row.get(key), typ) or isinstance(row.get(key), bool):
                problems.append(f"row {i} ({row.get('name')!r}): {key!r} missing or not "
                                f"{typ if isinstance(typ, type) else 'a number'}")
    try:
        json.dumps(result)
    except (TypeError, ValueError) as e:
        problems.append(f"not JSON-serialisable: {e}")
    return problems


# -- the context -------------------------------------------------------------

class Context:
    """What run.py hands each part (see the module docstring)."""

    def __init__(self, mode: str, workdir: Path, shared: Optional[Path], size: Optional[str],
                 part: str):
        self.full = mode == "full"
        self.quick = not self.full
        self.smoke = mode == "smoke"
        self.mode = mode
        self.workdir = workdir
        self.shared = shared
        self.size = size
        self.part = part
        self.repo = REPO
        self._stub_exe: Optional[Path] = None
        self._served: List[Served] = []

    def log(self, msg: str) -> None:
        print(f"[{self.part} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    def stub_exe(self) -> Path:
        if self._stub_exe is None:
            cc = shutil.which("cc") or shutil.which("gcc")
            if not cc:
                raise RuntimeError("no C compiler for the stub server")
            exe = self.workdir / "stub_server"
            subprocess.run([cc, "-O2", "-pthread", "-o", str(exe), str(HERE / "stub_server.c")],
                           check=True)
            self._stub_exe = exe
        return self._stub_exe

    def start_stub(self) -> Served:
        s = _spawn("stub", [str(self.stub_exe()), "0"], self.workdir, r"listening (\d+)", None)
        s.uri = f"mongodb://127.0.0.1:{s.uri}/?directConnection=true"
        self._served.append(s)
        return s

    def start_multifora(self, dbpath: Optional[Path] = None, args: Sequence[str] = ()) -> Served:
        """``python -m multifora serve`` on dbpath (default: a fresh
        directory under workdir), port 0, the installed package.  cwd is
        the workdir, so the source tree's multifora/ (no built _core) is
        never imported by mistake."""
        if dbpath is None:
            dbpath = Path(tempfile.mkdtemp(prefix="db-", dir=self.workdir))
        dbpath.mkdir(parents=True, exist_ok=True)
        s = _spawn("multifora", [sys.executable, "-m", "multifora", "serve", "--dbpath",
                                 str(dbpath), "--port", "0", "--log-level", "warning", *args],
                   self.workdir, r"connect with: (\S+)", dbpath)
        self._served.append(s)
        return s

    def stop_all(self) -> None:
        for s in self._served:
            try:
                s.stop()
            except Exception:  # noqa: BLE001 - best effort at the end of a part
                s.kill9()
        self._served.clear()

    row = staticmethod(make_row)
    disk_bytes = staticmethod(disk_bytes)
    rss_bytes = staticmethod(rss_bytes)

    @staticmethod
    def alternate(rounds: int, run_side: Callable[[str], float],
                  sides: Sequence[str] = ("multifora", "stub")) -> Dict[str, List[float]]:
        """Call run_side(side) for every side in each round, the order
        flipping every round (A, B then B, A); return each side's values."""
        out: Dict[str, List[float]] = {s: [] for s in sides}
        for r in range(rounds):
            for side in (sides if r % 2 == 0 else list(sides)[::-1]):
                out[side].append(run_side(side))
        return out


# -- facts about the run ------------------------------------------------------

def _git(*args: str) -> str:
    r = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def machine_facts() -> dict:
    facts: dict = {"cores": os.cpu_count(), "kernel": platform.release(),
                   "machine": platform.machine()}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        m = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
        facts["cpu"] = m.group(1).strip() if m else platform.processor()
        m = re.search(r"^flags\s*:.*\bhypervisor\b", cpuinfo, re.M)
        facts["virtual_machine"] = bool(m)
    except OSError:
        pass
    try:
        meminfo = Path("/proc/meminfo").read_text()
        for key in ("MemTotal", "MemAvailable"):
            m = re.search(rf"^{key}:\s*(\d+) kB", meminfo, re.M)
            if m:
                facts[key.lower() + "_bytes"] = int(m.group(1)) * 1024
    except OSError:
        pass
    return facts


def software_facts() -> dict:
    import pymongo
    facts = {"python": platform.python_version(), "pymongo": pymongo.version}
    try:
        import multifora
        from multifora import _core
        facts["multifora"] = str(Path(multifora.__file__).parent)
        facts["multifora_core_built_utc"] = dt.datetime.fromtimestamp(
            os.path.getmtime(_core.__file__), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except ImportError as e:
        facts["multifora"] = f"not importable: {e}"
    return facts


def load_average() -> List[float]:
    return [round(x, 2) for x in os.getloadavg()]


# -- rendering ---------------------------------------------------------------

def fmt(x: Optional[float]) -> str:
    """A number with 3 significant digits, thousands separated."""
    if x is None:
        return ""
    if x == 0:
        return "0"
    ax = abs(x)
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def render_markdown(results: dict) -> str:
    m, s = results["machine"], results["software"]
    lines = [f"# Benchmark results, {results['date_utc']} ({results['mode']} mode)", "",
             f"- Commit: `{results['commit']}`" + (" (working tree differs)"
                                                   if results.get("dirty") else ""),
             f"- Machine: {m.get('cores')} cores ({m.get('cpu', '?')}"
             f"{', VM' if m.get('virtual_machine') else ''}), "
             f"{m.get('memtotal_bytes', 0) / 2**30:.1f} GiB RAM, Linux {m.get('kernel')}",
             f"- Software: Python {s['python']}, pymongo {s['pymongo']}, multifora from "
             f"`{s.get('multifora')}` (_core built {s.get('multifora_core_built_utc', '?')})",
             f"- Load average (1, 5, 15 min): {results['load_start']} at the start, "
             f"{results['load_end']} at the end",
             f"- Total time: {results['seconds']:.0f} s", "",
             "Every figure is the median over rounds with its range (min..max) over n "
             "rounds. *floor* is the same operation against the do-nothing stub server "
             "in the same run, rounds alternating; *ratio* is MultiforaDB's figure over "
             "the floor's per round, median and range: for a time above 1 is slower "
             "than the floor, for a rate (/s) below 1 is.", ""]
    far = furthest_lines(results)
    if far:
        lines += ["Furthest from their floor (a time or size above it, a rate below it):", ""]
        lines += [f"{i}. {line}" for i, line in enumerate(far, 1)]
        lines.append("")
    for name, part in results["parts"].items():
        lines.append(f"## {name}")
        lines.append("")
        status = part.get("status")
        if status != "ok":
            lines += [f"*{status}*: {part.get('reason', '')}", ""]
            if status != "error" or not part.get("rows"):
                continue
        lines.append(f"{part.get('seconds', 0):.0f} s.")
        lines.append("")
        rows = part.get("rows", [])
        if rows:
            lines += ["| | unit | median | range | n | floor | ratio | ratio range | note |",
                      "|---|---|---:|---|---:|---:|---:|---|---|"]
            for r in rows:
                rr = (f"{fmt(r['ratio_min'])}..{fmt(r['ratio_max'])}"
                      if "ratio_min" in r else "")
                lines.append(f"| {r['name']} | {r['unit']} | {fmt(r['median'])} | "
                             f"{fmt(r['min'])}..{fmt(r['max'])} | {r['n']} | "
                             f"{fmt(r.get('floor'))} | {fmt(r.get('ratio'))} | {rr} | "
                             f"{r.get('note', '')} |")
            lines.append("")
        for note in part.get("notes", []):
            lines.append(f"- {note}")
        if part.get("notes"):
            lines.append("")
    return "\n".join(lines) + "\n"


def chart_table(part: dict, title: str, path: Path) -> bool:
    """Comparison-table chart: per row, MultiforaDB's median (with its range)
    beside the floor's, log scale; and the ratio beside it.  Returns whether
    a chart was written."""
    rows = part.get("rows", [])
    if not rows:
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(rows)
    fig, (ax, axr) = plt.subplots(1, 2, figsize=(13, 0.42 * n + 1.6), sharey=True,
                                  gridspec_kw={"width_ratios": [3, 1.3]})
    ys = list(range(n))[::-1]
    h = 0.38
    for y, r in zip(ys, rows):
        lo, hi = r["median"] - r["min"], r["max"] - r["median"]
        ax.barh(y + h / 2, r["median"], h, xerr=[[lo], [hi]], color="#3465a4",
                error_kw={"ecolor": "#222", "capsize": 2, "lw": 0.8},
                label="MultiforaDB" if y == ys[0] else None)
        if r.get("floor"):
            ax.barh(y - h / 2, r["floor"], h, color="#babdb6",
                    label="floor (the stub; disk: data bytes; reopen: empty start)"
                    if y == ys[0] else None)
        ax.text(r["max"] * 1.08, y + h / 2, f"{fmt(r['median'])} {r['unit']}", va="center",
                fontsize=7)
        if r.get("ratio"):
            axr.barh(y, r["ratio"], 0.6, color="#cc0000" if (slowdown(r) or 1) >= 1 else "#4e9a06",
                     xerr=[[r["ratio"] - r.get("ratio_min", r["ratio"])],
                           [r.get("ratio_max", r["ratio"]) - r["ratio"]]],
                     error_kw={"ecolor": "#222", "capsize": 2, "lw": 0.8})
            axr.text(r.get("ratio_max", r["ratio"]) * 1.1, y, f"{r['ratio']:.2g}x",
                     va="center", fontsize=7)
    ax.set_yticks(ys)
    # A literal "$" would start matplotlib's mathtext.
    ax.set_yticklabels([f"{r['name']} [{r['unit']}]".replace("$", r"\$") for r in rows],
                       fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("median, range as whiskers (log scale; each row in its own unit)")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title, fontsize=10)
    axr.set_xscale("log")
    axr.axvline(1.0, color="#555", lw=0.8)
    axr.set_xlabel("ratio MultiforaDB / floor (log; red: slower)")
    xmax = max(r["max"] for r in rows)
    ax.set_xlim(right=xmax * 30)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def chart_peers(part: dict, title: str, path: Path) -> bool:
    """Peer curves: one panel per operation, one line per peer, cost against
    collection size, log-log.  series = {peer: {op: [[size, cost], ...]}}
    (or that under "peer_curves"); a "unit" key names the cost's unit.  Used
    when the part module has no plot_curves(result, path) of its own."""
    series = part.get("series") or {}
    curves = series.get("peer_curves", series)
    peers = {p: ops for p, ops in curves.items() if isinstance(ops, dict)}
    opnames: List[str] = []
    for ops in peers.values():
        for op, pts in ops.items():
            if isinstance(pts, list) and pts and op not in opnames:
                opnames.append(op)
    if not opnames:
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(opnames))
    nrows = (len(opnames) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.6 * cols, 3.4 * nrows), squeeze=False)
    unit = series.get("unit", "cost per operation") if isinstance(series.get("unit"), str) \
        else "cost per operation"
    for i, op in enumerate(opnames):
        ax = axes[i // cols][i % cols]
        for peer, ops in peers.items():
            pts = [p for p in ops.get(op, []) if p and p[1] is not None and p[1] > 0]
            if pts:
                xs, ys = zip(*sorted((float(p[0]), float(p[1])) for p in pts))
                ax.plot(xs, ys, marker="o", ms=3, lw=1.2, label=peer.replace("$", r"\$"))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(op.replace("$", r"\$"), fontsize=9)
        ax.set_xlabel("documents", fontsize=8)
        ax.set_ylabel(unit, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="major", lw=0.3)
    for j in range(len(opnames), nrows * cols):
        axes[j // cols][j % cols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=min(6, max(1, len(labels))),
               fontsize=8)
    fig.suptitle(title, fontsize=10, y=0.995)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# -- the README's block -------------------------------------------------------

README_BEGIN = "<!-- benchmarks:begin (written by benchmarks/run.py --full) -->"
README_END = "<!-- benchmarks:end -->"


def readme_block(results: dict, stem: str, files: Sequence[str]) -> str:
    """The README's benchmark block: the run's facts, the comparison table,
    the chart, and a line per other part linking the full results."""
    m = results["machine"]
    base = "benchmarks/results"
    lines = [README_BEGIN, "",
             f"Latest full run: {results['date_utc'][:10]}, commit `{results['commit']}`, "
             f"{m.get('cores')} cores ({m.get('cpu', '?')}), "
             f"{m.get('memtotal_bytes', 0) / 2**30:.1f} GiB RAM, load average "
             f"{results['load_start'][0]} at the start. All figures: "
             f"[{base}/{stem}.md]({base}/{stem}.md) "
             f"([JSON]({base}/{stem}.json)).", ""]
    table = results["parts"].get("table", {})
    if table.get("rows"):
        lines += ["| | median | range | floor | ratio |", "|---|---:|---|---:|---:|"]
        for r in table["rows"]:
            unit = r["unit"]
            floor = f"{fmt(r['floor'])} {unit}" if "floor" in r else ""
            ratio = f"{r['ratio']:.2f}" if "ratio" in r else ""
            lines.append(f"| {r['name']} | {fmt(r['median'])} {unit} | "
                         f"{fmt(r['min'])}..{fmt(r['max'])} | {floor} | {ratio} |")
        lines += ["", "*floor*: the same calls against a do-nothing wire server in the same "
                  "run (for bytes on disk: the documents' own bytes; for the reopen: the "
                  "server started on an empty directory); *ratio*: MultiforaDB's figure over "
                  "the floor's, median per round (for a time above 1 is slower, for a rate "
                  "below 1). "
                  "See [docs/benchmarks.md](docs/benchmarks.md).", ""]
    far = furthest_lines(results)
    if far:
        lines += ["Furthest from their floor:", ""] + [f"{i}. {x}" for i, x in
                                                       enumerate(far, 1)] + [""]
    if f"{stem}.png" in files:
        lines += [f"![comparison table]({base}/{stem}.png)", ""]
    if f"{stem}_peers.png" in files:
        lines += [f"![embedded peers]({base}/{stem}_peers.png)", ""]
    for name, part in results["parts"].items():
        if name != "table":
            lines.append(f"- {name}: {part.get('status')}, {len(part.get('rows', []))} rows"
                         + (f" ({part.get('reason')})" if part.get("reason") else ""))
    lines += ["", README_END]
    return "\n".join(lines)


def update_readme(readme: Path, block: str) -> bool:
    """Replace the text between the markers (inclusive) with block; returns
    whether the markers were found."""
    text = readme.read_text()
    i, j = text.find(README_BEGIN), text.find(README_END)
    if i < 0 or j < i:
        return False
    readme.write_text(text[:i] + block + text[j + len(README_END):])
    return True


# -- main --------------------------------------------------------------------

def run_part(name: str, mode: str, shared: Optional[Path], size: Optional[str],
             scratch: Path, keep: bool, modules: dict) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=scratch))
    ctx = Context(mode, workdir, shared, size, name)
    t0 = time.perf_counter()
    try:
        module = modules[name] = importlib.import_module(f"part_{name}")
        result = module.run(ctx)
        problems = check_part(result, name)
        if problems:
            result = {"part": name, "rows": [], "status": "error",
                      "reason": "malformed result: " + "; ".join(problems)}
        else:
            result.setdefault("status", "ok")
    except Exception as e:  # noqa: BLE001 - one part's failure must not lose the others
        ctx.log("FAILED:\n" + traceback.format_exc())
        result = {"part": name, "rows": [], "status": "error",
                  "reason": f"{type(e).__name__}: {e}"}
    finally:
        ctx.stop_all()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    ctx.log(f"{result['status']} in {result['seconds']:.1f} s")
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_const", dest="mode", const="quick")
    mode.add_argument("--full", action="store_const", dest="mode", const="full")
    mode.add_argument("--smoke", action="store_const", dest="mode", const="smoke")
    ap.add_argument("--parts", default=None,
                    help=f"comma-separated, default all: {','.join(PARTS)}")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--size", default=None, help="data size for the big part, e.g. 4g, 20g")
    ap.add_argument("--scratch", default=None, help="where parts' scratch directories go "
                                                    "(default: the system temp directory)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directories")
    ap.add_argument("--no-readme", dest="readme", action="store_false",
                    help="--full into benchmarks/results rewrites README.md's benchmark "
                         "block; this leaves it alone")
    args = ap.parse_args(argv)
    mode_name = args.mode or "quick"

    explicit = args.parts is not None
    names = [p.strip() for p in (args.parts or ",".join(PARTS)).split(",") if p.strip()]
    shared_env = os.environ.get("MULTIFORA_SHARED")
    shared = Path(shared_env) if shared_env else REPO.parent / "shared"
    shared = shared.resolve() if shared.is_dir() else None

    started = dt.datetime.now(dt.timezone.utc)
    commit = _git("rev-parse", "--short=7", "HEAD") or "nogit"
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    results = {"date_utc": started.strftime("%Y-%m-%dT%H:%M:%SZ"), "mode": mode_name,
               "commit": commit, "dirty": dirty, "argv": sys.argv[1:],
               "machine": machine_facts(), "software": software_facts(),
               "shared": str(shared) if shared else None,
               "load_start": load_average(), "parts": {}}
    scratch = Path(tempfile.mkdtemp(prefix="mf-bench-", dir=args.scratch))
    t0 = time.perf_counter()
    failed = False
    modules: dict = {}
    try:
        for name in names:
            if not (HERE / f"part_{name}.py").exists():
                reason = f"benchmarks/part_{name}.py is not in this tree"
                status = "error" if explicit else "absent"
                failed |= explicit
                results["parts"][name] = {"part": name, "rows": [], "status": status,
                                          "reason": reason}
                print(f"[run] {name}: {status}: {reason}", file=sys.stderr)
                continue
            part = run_part(name, mode_name, shared, args.size, scratch, args.keep, modules)
            failed |= part["status"] == "error"
            results["parts"][name] = part
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    results["seconds"] = round(time.perf_counter() - t0, 1)
    results["load_end"] = load_average()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{started.strftime('%Y-%m-%d')}_{commit}" + ("" if mode_name == "full"
                                                         else f"-{mode_name}")
    (out / f"{stem}.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / f"{stem}.md").write_text(render_markdown(results))
    written = [f"{stem}.json", f"{stem}.md"]
    title = f"MultiforaDB {commit}, {results['date_utc']}, {mode_name}"
    try:
        import matplotlib  # noqa: F401 - the bench extra; the tests run without it
    except ImportError:
        print("[run] no charts: matplotlib is not installed (pip install .[bench])",
              file=sys.stderr)
    else:
        table = results["parts"].get("table")
        if table and chart_table(table, f"Comparison table vs the floor stub - {title}",
                                 out / f"{stem}.png"):
            written.append(f"{stem}.png")
        peers = results["parts"].get("peers")
        if peers and peers.get("status") == "ok":
            png = out / f"{stem}_peers.png"
            own = getattr(modules.get("peers"), "plot_curves", None)
            try:
                if own is not None:
                    own(peers, png)
                else:
                    chart_peers(peers, f"Embedded peers - {title}", png)
            except Exception:  # noqa: BLE001 - a chart must not lose the results
                print("[run] the peers chart failed:\n" + traceback.format_exc(),
                      file=sys.stderr)
            if png.exists():
                written.append(png.name)
    if mode_name == "full" and args.readme and Path(args.out).resolve() == (HERE / "results"):
        if update_readme(REPO / "README.md", readme_block(results, stem, written)):
            written.append(str(REPO / "README.md"))
        else:
            print("[run] README.md has no benchmark markers; not updated", file=sys.stderr)
    print(f"[run] {results['seconds']:.0f} s; wrote {', '.join(str(out / w) for w in written)}",
          file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
