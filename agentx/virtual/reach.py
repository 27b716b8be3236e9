"""Which engine cores a finished request can send work to while the plan warms up, so that the
virtual runner lets a core run past the other cores' finishes that cannot reach it (issue #42).

The loop (`runner.py`) lets a core start an iteration only once every event before it is known,
other cores' finishes included, because a finish may make a request due that is routed to any
core. While the plan warms up that is not so (SPEC section 3, "Start point and warmup"; section
10): in stage 1 a finish sends nothing (its tree's next requests wait for stage 2), and in stage 2
it sends its own tree's next warmup requests at once; the phase changes only when nothing is in
flight, so not while a core is busy. Behind a session-affinity router a tree's requests go to the
cores its streams' session ids hash to, and nowhere else, whoever sends them (a request it sends
finishes on those cores too, and sends only its tree's). So while warming up, a core need not
stop at a finish (or at another core's finish bound) unless that finish's tree (or a tree of that
core's requests) has a stream routed to it. Every event that can reach it still bounds it, so it
runs the same iterations on the same requests as before; only the order in which the loop visits
the cores changes, and the records, series and cache states are those of the one-core-at-a-time
order (tests/virtual/test_replica_windows.py).

Off for the other routers (a request may go to any core), for disaggregated serving (KV handoffs),
and once profiling starts (a tree's end starts a new tree on its lane, whose id is drawn then).
"""

from __future__ import annotations

from agentx.engine.routing import SessionAffinity
from agentx.replay.plan import WARMUP1, WARMUP2
from agentx.replay.session_ids import stream_session_id


class Reach:
    """Per request, the bit mask of the cores its tree's streams are routed to; per core, the
    union over the requests it holds (kept while the core's `version` holds)."""

    def __init__(self, replicas):
        self.replicas = replicas
        self.masks: dict = {}  # sequence -> mask of its tree's cores
        self.trees: dict[int, int] = {}  # tree uid -> mask
        self.held: dict = {}  # core -> (version, mask of the requests it holds)
        self.full = (1 << len(replicas.cores)) - 1

    @staticmethod
    def applies(replicas, disaggregated: bool) -> bool:
        return not disaggregated and len(replicas.cores) > 1 and isinstance(replicas.rule, SessionAffinity)

    def submitted(self, seq, tree: int, streams: int) -> None:
        mask = self.trees.get(tree)
        if mask is None:
            rule, cores, mask = self.replicas.rule, self.replicas.cores, 0
            for k in range(streams):
                mask |= 1 << rule.pick(cores, seq, stream_session_id(str(tree), k), 0)
            self.trees[tree] = mask
        self.masks[seq] = mask

    def ended(self, seq) -> None:
        self.masks.pop(seq, None)

    def held_by(self, core) -> int:
        """The cores the requests `core` holds can send work to."""
        memo = self.held.get(core)
        if memo is not None and memo[0] == core.version:
            return memo[1]
        mask, masks, full = 0, self.masks, self.full
        for seqs in (core.running, core.waiting):
            for seq in seqs:
                mask |= masks.get(seq, full)
                if mask == full:
                    break
            if mask == full:
                break
        self.held[core] = (core.version, mask)
        return mask


def warming(plan) -> str | None:
    """The warmup stage the plan is in (WARMUP1, WARMUP2), or None."""
    return plan.phase if plan.phase in (WARMUP1, WARMUP2) else None
