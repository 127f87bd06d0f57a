"""What the tests read from explain output."""
from __future__ import annotations


def stages(plan):
    """The stage names of a plan, from the root down its inputStage chain."""
    out = []
    while plan:
        out.append(plan["stage"])
        plan = plan.get("inputStage")
    return out
