"""The documents of the peers benchmark and the answers every store must give.

Document i of a collection of N (i = 0 .. N-1):

    {_id: i, k: i*A mod N, n: i*B mod N, g: i mod 100, u: 0, s: 32 hex chars}

A and B are primes prime to N, so k and n are permutations of 0 .. N-1:
k has an index (where the store has indexes) and is unique; n has none.
Every answer therefore follows from N alone: the document with k = x is
i = x * A^-1 mod N, a count of lo <= n < hi is hi - lo, and $group on g
is computed here once.  u is there for update_one's $inc (mongita's $inc
refuses a missing field, which MongoDB would create).
"""
from __future__ import annotations

import math
from typing import List, Tuple

_PRIMES = (7919, 104729, 1299709, 15485863)


class Workload:
    def __init__(self, n_docs: int):
        self.n = n_docs
        a, b = [p for p in _PRIMES if math.gcd(p, n_docs) == 1][:2]
        self.a, self.b = a % n_docs, b % n_docs
        self.inv_a = pow(self.a, -1, n_docs) if n_docs > 1 else 0
        self._groups: List[Tuple[int, int, int]] = []

    def doc(self, i: int) -> dict:
        n = self.n
        return {"_id": i, "k": i * self.a % n, "n": i * self.b % n, "g": i % 100, "u": 0,
                "s": format(i * 2654435761 % (1 << 128), "032x")}

    def id_of_k(self, k: int) -> int:
        return k * self.inv_a % self.n

    def groups(self) -> List[Tuple[int, int, int]]:
        """[(g, count, sum of n)] ordered by g, as $group + $sort answers."""
        if not self._groups:
            count = [0] * 100
            total = [0] * 100
            for i in range(self.n):
                count[i % 100] += 1
                total[i % 100] += i * self.b % self.n
            self._groups = [(g, count[g], total[g]) for g in range(100) if count[g]]
        return self._groups
