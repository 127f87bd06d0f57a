"""changes: what change streams cost and how soon they deliver (issue 48).

One server (`python -m multifora serve --replSet rs0`), pymongo.

  latency          a writer client inserts one document at a time; a second
                   client waits in watch() (an awaitData getMore) on the
                   collection; each write starts once the previous event has
                   arrived, so the watcher is always waiting when it comes.
                   Milliseconds from the acknowledged insert (insert_one
                   returned) to the event's arrival in the other client --
                   negative when the event came before the writer's reply --
                   and from the insert's start; median and p99 over the
                   writes.
  inserts, 0 vs 1 stream   durable insert_one (each its own write) as fast as
                   one client can, with no stream open against one stream
                   open whose consumer reads every event in another thread;
                   alternating rounds.  The row's ratio is with over
                   without (below 1: slower with the stream).

Sizes: --full 1,000 latency writes and 7 rounds of 3 s; quick 300 and 3 x 1 s;
smoke 20 and 1 x 0.2 s.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import threading
import time

import pymongo

# The stream's consumer, run as `python -c _CONSUMER <uri>`: reads every
# event of bench.rate until killed.
_CONSUMER = """
import sys, pymongo
c = pymongo.MongoClient(sys.argv[1])
with c.bench.rate.watch(max_await_time_ms=200) as s:
    print("ready", flush=True)
    for _ in s:
        pass
"""


def _pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def run(ctx) -> dict:
    writes = 1000 if ctx.full else 20 if ctx.smoke else 300
    rounds, secs = (7, 3.0) if ctx.full else (1, 0.2) if ctx.smoke else (3, 1.0)
    srv = ctx.start_multifora(args=["--replSet", "rs0"])
    writer = pymongo.MongoClient(srv.uri)
    watcher = pymongo.MongoClient(srv.uri)
    coll = writer.bench.changes

    # -- latency: acknowledged write -> event in a waiting watch()
    arrived = {}
    ready = threading.Event()
    done = threading.Event()

    def watch() -> None:
        with watcher.bench.changes.watch(max_await_time_ms=10_000) as s:
            ready.set()
            while not done.is_set():
                ev = s.try_next()
                if ev is not None:
                    arrived[ev["documentKey"]["_id"]] = time.perf_counter()

    th = threading.Thread(target=watch)
    th.start()
    ready.wait(10)
    time.sleep(0.2)  # the watcher's first getMore is waiting
    from_ack, from_start = [], []
    for i in range(writes):
        t0 = time.perf_counter()
        coll.insert_one({"_id": i, "v": i})
        t1 = time.perf_counter()
        deadline = t1 + 10
        while i not in arrived and time.perf_counter() < deadline:
            time.sleep(0.00005)
        if i not in arrived:
            raise RuntimeError(f"event {i} never arrived")
        from_ack.append((arrived[i] - t1) * 1000)
        from_start.append((arrived[i] - t0) * 1000)
    done.set()
    coll.insert_one({"_id": "wake"})  # ends the watcher's wait
    th.join(30)
    ctx.log(f"latency over {writes} writes: median {statistics.median(from_ack):.3f} ms "
            f"after the ack, p99 {_pct(from_ack, 99):.3f} ms")

    # -- durable inserts per second with 0 and 1 open stream
    seq = [0]

    def inserts(streams: int) -> float:
        consumer = None
        if streams:
            # in a process of its own: the writer's interpreter lock is
            # not shared with it
            consumer = subprocess.Popen(
                [sys.executable, "-c", _CONSUMER, srv.uri], stdout=subprocess.PIPE, text=True)
            if consumer.stdout.readline().strip() != "ready":
                raise RuntimeError("the consumer did not start")
        n = 0
        t = time.perf_counter()
        end = t + secs
        rate = writer.bench.rate
        while time.perf_counter() < end:
            rate.insert_one({"_id": seq[0], "v": 1})
            seq[0] += 1
            n += 1
        elapsed = time.perf_counter() - t
        if consumer:
            consumer.terminate()
            consumer.wait(30)
            consumer.stdout.close()
        return n / elapsed

    ctx.log(f"{rounds} rounds of {secs} s, 0 vs 1 stream")
    ab = ctx.alternate(rounds, lambda side: inserts(1 if side == "one" else 0), ("one", "none"))
    writer.close()
    watcher.close()
    ctx.stop_all()
    return {"part": "changes", "rows": [
        ctx.row("change event latency after the acknowledged write (median)", "ms",
                [statistics.median(from_ack)],
                note=f"{writes} writes; p99 {_pct(from_ack, 99):.3f} ms; from the write's "
                     f"start: median {statistics.median(from_start):.3f}, p99 "
                     f"{_pct(from_start, 99):.3f} ms"),
        ctx.row("change event latency after the acknowledged write (p99)", "ms",
                [_pct(from_ack, 99)], note=f"{writes} writes"),
        ctx.row("durable insert_one with one change stream open vs none", "inserts/s",
                ab["one"], floor=ab["none"],
                note="floor: the same inserts with no stream open"),
    ]}
