"""Embedded peers: MultiforaDB embedded beside other embedded document stores.

    python benchmarks/part_peers.py [--quick|--full] [--sizes 10000,100000]
                                    [--cap 20] [--peers multifora,sqlite-json,...]
                                    [--out DIR]

Stores (benchmarks/peers/__init__.py): MultiforaDB embedded
(``multifora.open``: the server in this process, pymongo over a private
Unix socket), MultiforaDB's in-process command path (multifora-direct:
``Server.command()``, the same dispatcher with no socket and no driver,
to show what the driver adds), mongomock, montydb on its sqlite and its lightning (LMDB)
storage, mongita's disk client, and Python's sqlite3 with JSON documents
and an expression index on json_extract(doc, '$.k').  A store whose
package is not installed is skipped with a note (``pip install
multifora[bench]`` brings them).

At each collection size N (--quick: 10,000 with a 3 s cap; by default
10,000 and 100,000, cap 20 s; --full: 10,000, 100,000 and 1,000,000, cap
60 s; run.py --smoke: 1,000, cap 2 s) every
store gets a fresh process and directory, the index on k, then the N
documents of peers/workload.py in bulk batches of 1,000.  Then the same
operations on every store, each with the same arguments:

    find_by_id     find_one({_id: i}), i random
    find_by_k      find_one({k: x}) on the indexed field, x random
    count_range    count_documents({n: {$gte: lo, $lt: lo + N/2}}), no index on n
    group          $group on g (100 groups) with $sum 1 and $sum n, $sort;
                   SQL GROUP BY for sqlite; none for montydb and mongita
    update_one     update_one({_id: i}, {$inc: {u: 1}}), each i once
    delete_one     delete_one({_id: i}), each i once

Rounds alternate between the stores (the order rotating every round), so
drift in the machine's load falls on all of them alike.  A row is the
median of the round medians (us per call) with their range; its ratio is
that store's median over MultiforaDB's for the same operation and size in
the same run.  Every answer is checked against what the workload says it
must be (peers/workload.py), and at the end the document count, one
updated and one deleted document; a store that answers wrongly gets
"WRONG" in its row and a note, and is not silently timed.

Caps: a store's bulk load at one size may take --cap seconds; one that has
not loaded all N documents by then "gave up at N" and is not run at
larger sizes.  The operations then share cap/2 seconds: cap/12 per
operation, split over the rounds, each round running at least one call.
A store one of whose calls alone took longer than its operation's share is
not run at the next size either ("gave up at" that size, with why).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers  # noqa: E402
from peers import worker  # noqa: E402
from peers.workload import Workload  # noqa: E402

OPS = ("find_by_id", "find_by_k", "count_range", "group", "update_one", "delete_one")
LABEL = {"insert_many": "insert_many (bulk, 1,000 a batch)",
         "find_by_id": "find_one by _id", "find_by_k": "find_one on indexed k",
         "count_range": "range count, no index (half match)", "group": "aggregate $group",
         "update_one": "update_one $inc by _id", "delete_one": "delete_one by _id",
         "disk": "bytes on disk"}
BATCH = 1000
# Calls per round for each kind of operation.
CALLS_FULL = {"find_by_id": 200, "find_by_k": 200, "count_range": 5, "group": 5,
              "update_one": 100, "delete_one": 100}
CALLS_QUICK = {"find_by_id": 50, "find_by_k": 50, "count_range": 3, "group": 3,
               "update_one": 30, "delete_one": 30}


def size_label(n: int) -> str:
    for div, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= div and n % div == 0:
            return f"{n // div}{suffix}"
    return str(n)


def settings(ctx) -> SimpleNamespace:
    """Sizes, cap, rounds and calls from the mode (ctx.smoke, ctx.quick,
    ctx.full; none of them: 10k and 100k with a 20 s cap), overridden by ctx's
    peers_sizes / peers_cap / peers_names or $MF_BENCH_PEERS_SIZES,
    $MF_BENCH_PEERS_CAP, $MF_BENCH_PEERS."""
    quick, full = bool(getattr(ctx, "quick", False)), bool(getattr(ctx, "full", False))
    if getattr(ctx, "smoke", False):  # run.py --smoke: seconds, for the smoke tests
        cfg = SimpleNamespace(sizes=[1_000], cap=2.0, rounds=2, calls=CALLS_QUICK)
    elif quick:
        cfg = SimpleNamespace(sizes=[10_000], cap=3.0, rounds=3, calls=CALLS_QUICK)
    elif full:
        cfg = SimpleNamespace(sizes=[10_000, 100_000, 1_000_000], cap=60.0, rounds=5,
                              calls=CALLS_FULL)
    else:
        cfg = SimpleNamespace(sizes=[10_000, 100_000], cap=20.0, rounds=5, calls=CALLS_FULL)
    sizes = getattr(ctx, "peers_sizes", None) or os.environ.get("MF_BENCH_PEERS_SIZES")
    if sizes:
        cfg.sizes = [int(s) for s in sizes.split(",")] if isinstance(sizes, str) else list(sizes)
    cap = getattr(ctx, "peers_cap", None) or os.environ.get("MF_BENCH_PEERS_CAP")
    if cap:
        cfg.cap = float(cap)
    names = getattr(ctx, "peers_names", None) or os.environ.get("MF_BENCH_PEERS")
    cfg.names = (names.split(",") if isinstance(names, str) else list(names)) if names \
        else list(peers.PEERS)
    unknown = [p for p in cfg.names if p not in peers.PEERS]
    if unknown:
        raise ValueError(f"unknown peers {unknown}; known: {list(peers.PEERS)}")
    return cfg


class Child:
    """One store's process (peers/worker.py) and its pipe."""

    def __init__(self, peer: str, path: Path):
        mp = multiprocessing.get_context("spawn")
        self.conn, child_conn = mp.Pipe()
        self.proc = mp.Process(target=worker.serve, args=(child_conn, peer, str(path)),
                               daemon=True)
        self.proc.start()
        child_conn.close()

    def call(self, *cmd, timeout: float = 600) -> dict:
        """Send one command and wait for its reply; a store that has not
        answered in timeout seconds is killed: {"timeout": seconds}."""
        self.conn.send(cmd)
        if not self.conn.poll(timeout):
            self.kill()
            return {"timeout": timeout}
        try:
            return self.conn.recv()
        except EOFError:
            return {"error": f"the process ended (exit code {self.proc.exitcode})"}

    def close(self) -> None:
        if self.proc.is_alive():
            try:
                self.call("close")
            except (BrokenPipeError, OSError):
                pass
        self.proc.join(10)
        self.kill()

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def _args(op: str, wl: Workload, rng: random.Random, calls: int, pools: Dict[str, list],
          rnd: int) -> list:
    n = wl.n
    if op == "find_by_id":
        return [(rng.randrange(n),) for _ in range(calls)]
    if op == "find_by_k":
        return [(rng.randrange(n),) for _ in range(calls)]
    if op == "count_range":
        out = []
        for _ in range(calls):
            lo = rng.randrange(n - n // 2 + 1)
            out.append((lo, lo + n // 2))
        return out
    if op == "group":
        return [()] * calls
    return [(i,) for i in pools[op][rnd * calls:(rnd + 1) * calls]]


def _expected(op: str, wl: Workload, a: tuple):
    if op == "find_by_id":
        return wl.doc(a[0])
    if op == "find_by_k":
        return wl.doc(wl.id_of_k(a[0]))
    if op == "count_range":
        return a[1] - a[0]
    if op == "group":
        return wl.groups()
    return 1  # update_one matched, delete_one deleted


def _same(op: str, got, want) -> bool:
    if op == "group":
        return got is not None and [tuple(r) for r in got] == want
    if isinstance(want, dict):
        return isinstance(got, dict) and got == want
    return type(got) is int and got == want


class Tally:
    """One store's figures for one operation at one size."""

    def __init__(self):
        self.round_medians: List[float] = []
        self.calls = 0
        self.spent = 0.0
        self.longest = 0.0
        self.wrong: List[str] = []
        self.skip: Optional[str] = None  # unsupported / error


def _run_size(ctx, cfg, n: int, names: List[str], out: dict) -> List[str]:
    """Load and time every store in names at size n; add rows, series and
    notes to out; return the stores that may go on to the next size."""
    wl = Workload(n)
    base = Path(ctx.workdir) / f"peers-{n}"
    shutil.rmtree(base, ignore_errors=True)
    rows, notes = out["rows"], out["notes"]
    curves, gave_up = out["series"]["peer_curves"], out["series"]["gave_up"]
    op_budget = cfg.cap / 2 / len(OPS)
    children: Dict[str, Child] = {}
    go_on: List[str] = []

    def row(op: str, peer: str, unit: str, values: List[float], n_: int, note: str = ""):
        r = {"name": f"{LABEL[op]} @ {size_label(n)}: {peer}", "unit": unit,
             "median": statistics.median(values), "min": min(values), "max": max(values),
             "n": n_, "peer": peer, "op": op, "size": n}
        if note:
            r["note"] = note
        rows.append(r)
        curves.setdefault(peer, {}).setdefault(op, []).append([n, r["median"]])
        return r

    try:
        for peer in names:
            (base / peer).mkdir(parents=True)
            ch = Child(peer, base / peer)
            ctx.log(f"peers {size_label(n)}: loading {peer}")
            rep = ch.call("load", n, BATCH, cfg.cap, timeout=2 * cfg.cap + 30)
            if "timeout" in rep:
                notes.append(f"{peer}: gave up at {n:,} documents: one batch of the load "
                             f"did not return in {rep['timeout']:.0f} s")
                gave_up[peer] = n
                ch.close()
                continue
            if "error" in rep:
                notes.append(f"{peer} @ {size_label(n)}: load failed: {rep['error']}")
                out["series"]["failed"][peer] = n
                ch.close()
                continue
            if rep["loaded"] < n:
                notes.append(f"{peer}: gave up at {n:,} documents: {rep['loaded']:,} loaded "
                             f"in the {cfg.cap:.0f} s cap")
                gave_up[peer] = n
                ch.close()
                continue
            per_doc = [ns / sz / 1000 for ns, sz in zip(rep["batch_ns"], rep["batch_sizes"])]
            row("insert_many", peer, "us/doc", per_doc, len(per_doc),
                f"{len(per_doc)} batches, {rep['total_s']:.2f} s in all")
            if rep["disk_bytes"]:
                row("disk", peer, "B/doc", [rep["disk_bytes"] / n], 1,
                    f"{rep['disk_bytes']:,} B after the load")
            children[peer] = ch
        active = list(children)

        rng = random.Random(n)
        pool = list(range(n))
        rng.shuffle(pool)
        span = cfg.rounds * max(cfg.calls["update_one"], cfg.calls["delete_one"])
        pools = {"update_one": pool[:span], "delete_one": pool[span:2 * span]}
        tallies = {op: {p: Tally() for p in active} for op in OPS}
        for op in OPS:
            for rnd in range(cfg.rounds):
                args = _args(op, wl, rng, cfg.calls[op], pools, rnd)
                want = [_expected(op, wl, a) for a in args]
                k = rnd % len(active) if active else 0
                for peer in active[k:] + active[:k]:
                    t = tallies[op][peer]
                    if t.skip or (rnd and t.spent >= op_budget):
                        continue
                    slice_s = (op_budget - t.spent) / (cfg.rounds - rnd)
                    rep = children[peer].call("op", op, args, slice_s,
                                              timeout=slice_s + cfg.cap)
                    if "timeout" in rep:  # killed: no more of this store at any size
                        notes.append(f"{peer}: gave up at {n:,} documents: one {op} call "
                                     f"did not return in {cfg.cap:.0f} s")
                        gave_up[peer] = n
                        active.remove(peer)
                        continue
                    if "unsupported" in rep or "error" in rep:
                        t.skip = rep.get("unsupported") or "failed"
                        if "error" in rep:
                            notes.append(f"{peer} @ {size_label(n)}: {op} failed: {rep['error']}")
                        continue
                    secs = [x / 1e9 for x in rep["ns"]]
                    t.round_medians.append(statistics.median(secs) * 1e6)
                    t.calls += len(secs)
                    t.spent += sum(secs)
                    t.longest = max(t.longest, max(secs))
                    for a, w, got in zip(args, want, rep["results"]):
                        if not _same(op, got, w) and len(t.wrong) < 3:
                            t.wrong.append(f"{op}{a}: got {str(got)[:200]}, expected {str(w)[:200]}")
                        elif not _same(op, got, w):
                            t.wrong.append("")
            ctx.log(f"peers {size_label(n)}: {op} done")

        slow: Dict[str, tuple] = {}
        for op in OPS:
            for peer in children:  # a store killed part-way keeps the rows it finished
                t = tallies[op][peer]
                if not t.round_medians:
                    continue
                note = f"{t.calls} calls"
                if t.wrong:
                    note = f"WRONG: {len(t.wrong)} of {t.calls} answers differ; " + note
                    notes.append(f"{peer} @ {size_label(n)}: WRONG answers to {op}, e.g. "
                                 f"{t.wrong[0]}")
                row(op, peer, "us/op", t.round_medians, len(t.round_medians), note)
                if t.longest > op_budget and t.longest > slow.get(peer, ("", 0))[1]:
                    slow[peer] = (op, t.longest)
        for peer, (op, secs) in slow.items():
            if peer not in active:
                continue
            notes.append(f"{peer}: not run past {n:,} documents: one {op} call took "
                         f"{secs:.1f} s there, over an operation's {op_budget:.1f} s share")
            if n != cfg.sizes[-1]:
                gave_up[peer] = cfg.sizes[cfg.sizes.index(n) + 1]

        for peer in active:  # the state the writes must have left
            n_upd, n_del = tallies["update_one"][peer].calls, tallies["delete_one"][peer].calls
            rep = children[peer].call("final", pools["update_one"][0], pools["delete_one"][0],
                                      timeout=cfg.cap + 30)
            if "error" in rep or "timeout" in rep:
                notes.append(f"{peer} @ {size_label(n)}: final check failed: "
                             f"{rep.get('error') or 'no reply'}")
                continue
            want_upd = dict(wl.doc(pools["update_one"][0]), u=1) if n_upd else \
                wl.doc(pools["update_one"][0])
            problems = []
            if rep["count"] != n - n_del:
                problems.append(f"count {rep['count']}, expected {n - n_del}")
            if rep["updated"] != want_upd:
                problems.append(f"updated document {rep['updated']}, expected {want_upd}")
            if n_del and rep["deleted"] is not None:
                problems.append(f"deleted document still found: {rep['deleted']}")
            if problems:
                notes.append(f"{peer} @ {size_label(n)}: WRONG after the writes: "
                             + "; ".join(problems))
            if peer not in slow:
                go_on.append(peer)
    finally:
        for ch in children.values():
            ch.close()
        shutil.rmtree(base, ignore_errors=True)

    # Ratios against MultiforaDB, same operation, same size, same run.
    mine = [r for r in rows if r["size"] == n]
    ref = {r["op"]: r["median"] for r in mine if r["peer"] == "multifora"}
    for r in mine:
        if r["peer"] != "multifora" and ref.get(r["op"]):
            r["ratio"] = r["median"] / ref[r["op"]]
    for peer in names:
        if peer in children:
            for op in OPS:
                t = tallies[op][peer]
                if t.skip not in (None, "failed") and not t.round_medians \
                        and n == cfg.sizes[0]:
                    notes.append(f"{peer}: no {op} row ({t.skip})")
    return go_on


def run(ctx) -> dict:
    cfg = settings(ctx)
    out = {"part": "peers", "rows": [], "notes": [],
           "series": {"peer_curves": {}, "gave_up": {}, "failed": {},
                      "sizes": cfg.sizes}}
    names = []
    for p in cfg.names:
        mod = peers.missing_module(p)
        if mod:
            out["notes"].append(f"{p}: not run, module {mod} is not installed "
                                f"(pip install 'multifora[bench]')")
        else:
            names.append(p)
    out["notes"].append(
        f"sizes {', '.join(f'{s:,}' for s in cfg.sizes)}; cap {cfg.cap:.0f} s for a load, "
        f"{cfg.cap / 2:.0f} s for the operations; {cfg.rounds} rounds; ratio = the store's "
        f"median / MultiforaDB embedded's, same operation, size and run")
    out["notes"].append("update_one and delete_one are one durable commit each on multifora "
                        "and sqlite-json: their figures follow the disk's sync latency, which "
                        "on a shared machine varies from call to call (see the ranges)")
    out["notes"].append("durability: " + "; ".join(
        f"{p} {peers.PEERS[p][0].durability}" for p in names))
    for n in cfg.sizes:
        if not names:
            break
        started = time.monotonic()
        names = _run_size(ctx, cfg, n, names, out)
        ctx.log(f"peers {size_label(n)}: {time.monotonic() - started:.0f} s")
    return out


def plot_curves(result: dict, png: Path) -> None:
    """The peer curves: one panel per operation, cost against collection
    size on log-log axes, one line per store."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = result["series"]["peer_curves"]
    gave_up = result["series"]["gave_up"]
    ops = ["insert_many"] + list(OPS) + ["disk"]
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
              "tab:pink"]
    colors = colors[:1] + colors  # index 0 is multifora, drawn black
    fig, axes = plt.subplots(2, 4, figsize=(17, 8.5))
    for ax, op in zip(axes.flat, ops):
        for peer in peers.PEERS:
            pts = curves.get(peer, {}).get(op)
            if not pts:
                continue
            xs, ys = zip(*pts)
            style = {"linewidth": 2.6, "color": "black"} if peer == "multifora" else \
                {"color": colors[list(peers.PEERS).index(peer) % len(colors)]}
            label = peer + (f" (gave up at {size_label(gave_up[peer])})" if peer in gave_up else "")
            ax.plot(xs, ys, marker="o", label=label, **style)
        ax.set_xscale("log")
        ax.set_yscale("log")
        unit = "B/doc" if op == "disk" else "us/doc" if op == "insert_many" else "us/op"
        ax.set_title(LABEL[op], fontsize=10)
        ax.set_xlabel("documents")
        ax.set_ylabel(unit)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)))
    fig.suptitle("Embedded stores: cost per operation against collection size (lower is better)")
    fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    fig.savefig(png, dpi=90)
    plt.close(fig)


def render(result: dict) -> str:
    """A plain-text table of the rows and the notes."""
    lines = [f"{'row':<62}{'median':>12}{'range':>24}{'n':>4}{'x mf':>8}  note"]
    for r in result["rows"]:
        rng = f"{r['min']:.1f}..{r['max']:.1f}"
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else ""
        lines.append(f"{r['name']:<62}{r['median']:>9.1f} {r['unit']:<6}{rng:>18}{r['n']:>4}"
                     f"{ratio:>8}  {r.get('note', '')}")
    lines += ["notes:"] + [f"  {x}" for x in result["notes"]]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true")
    mode.add_argument("--full", action="store_true")
    ap.add_argument("--sizes", help="comma-separated document counts")
    ap.add_argument("--cap", type=float, help="seconds a store's load may take at one size")
    ap.add_argument("--peers", help=f"comma-separated, of {','.join(peers.PEERS)}")
    ap.add_argument("--out", type=Path, help="write peers.json (and peers.png) here")
    ap.add_argument("--workdir", type=Path, help="scratch directory (default: a fresh one in /tmp)")
    a = ap.parse_args(argv)
    import tempfile
    work = a.workdir or Path(tempfile.mkdtemp(prefix="mf-peers-"))
    ctx = SimpleNamespace(quick=a.quick, full=a.full, workdir=work, shared=None,
                          log=lambda m: print(m, file=sys.stderr, flush=True),
                          peers_sizes=a.sizes, peers_cap=a.cap, peers_names=a.peers)
    try:
        result = run(ctx)
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print(render(result))
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "peers.json").write_text(json.dumps(result, indent=1) + "\n")
        try:
            plot_curves(result, a.out / "peers.png")
        except ImportError:
            print("matplotlib not installed: no peers.png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
