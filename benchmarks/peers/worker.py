"""One store in its own process, timing calls the parent sends it.

Each store runs in a fresh process per collection size: a store's heap
(mongomock's million dicts) then never slows another store's garbage
collection, and its memory is returned when the size is done.  The parent
sends one command at a time over a pipe and waits for the reply; only the
store call itself is inside the clock.

Commands (tuples) and replies (dicts):

    ("load", n_docs, batch, cap_s)   create the index on k, then insert the
        documents in batches until done or cap_s is spent ->
        {loaded, batch_ns: [ns per batch], batch_sizes, total_s, disk_bytes}
    ("op", name, args, slice_s)      call the operation once per argument,
        stopping early once slice_s is spent (after at least one call) ->
        {ns: [...], results: [...]} or {unsupported: msg}
    ("final", id_updated, id_deleted) -> {count, updated, deleted}
    ("close",)
Any exception becomes {error: "..."}.
"""
from __future__ import annotations

import time
import traceback
from pathlib import Path

from _harness import disk_bytes
from peers import PEERS, Unsupported
from peers.workload import Workload


def _load(store, wl: Workload, batch: int, cap_s: float, path: Path) -> dict:
    store.create_index_k()
    clock = time.perf_counter_ns
    start = time.monotonic()
    batch_ns, sizes, loaded = [], [], 0
    while loaded < wl.n and time.monotonic() - start < cap_s:
        docs = [wl.doc(i) for i in range(loaded, min(loaded + batch, wl.n))]
        t = clock()
        store.insert_batch(docs)
        batch_ns.append(clock() - t)
        sizes.append(len(docs))
        loaded += len(docs)
    return {"loaded": loaded, "batch_ns": batch_ns, "batch_sizes": sizes,
            "total_s": sum(batch_ns) / 1e9, "disk_bytes": disk_bytes(path)}


def _op(store, name: str, args: list, slice_s: float) -> dict:
    fn = getattr(store, name)
    clock = time.perf_counter_ns
    budget_ns = slice_s * 1e9
    ns, results, spent = [], [], 0
    for a in args:
        t = clock()
        r = fn(*a)
        dt = clock() - t
        ns.append(dt)
        results.append(r)
        spent += dt
        if spent >= budget_ns:
            break
    return {"ns": ns, "results": results}


def serve(conn, peer: str, path: str) -> None:
    """The child's loop: open the store, answer commands until "close"."""
    path = Path(path)
    store = None
    wl = None
    while True:
        cmd = conn.recv()
        if cmd[0] == "close":
            if store is not None:
                store.close()
            conn.send({})
            return
        try:
            if store is None:
                store = PEERS[peer][0](path)
            if cmd[0] == "load":
                wl = Workload(cmd[1])
                reply = _load(store, wl, cmd[2], cmd[3], path)
            elif cmd[0] == "op":
                try:
                    reply = _op(store, cmd[1], cmd[2], cmd[3])
                except Unsupported as e:
                    reply = {"unsupported": str(e)}
            elif cmd[0] == "final":
                reply = {"count": store.count_all(), "updated": store.find_by_id(cmd[1]),
                         "deleted": store.find_by_id(cmd[2])}
            else:
                reply = {"error": f"unknown command {cmd[0]!r}"}
        except Exception as e:  # reported by the parent, never timed
            reply = {"error": f"{type(e).__name__}: {e}",
                     "trace": traceback.format_exc(limit=4)}
        conn.send(reply)
