"""How soon the work a finish (or a dispatch) sends can reach a core, so that the virtual runner
lets a core run past other cores' events that cannot reach it in time (issue #42).

The loop (`runner.py`) lets a core start an iteration only once every event before it that can
change its future is known. While profiling (or draining) a request that ends at t makes its tree's
next requests due no earlier than t plus the delay of an edge they wait on (SPEC section 3: delays
are end-to-start), or its tree's idle cap if less; only a request with no open successor can drain
its tree, whose lane then starts a new tree at once (lag 0); the client's delay (`client_delay_s`)
adds to it. Behind a session-affinity router a due request goes to the core its stream's session id
hashes to, and nowhere else. So, while `reach.py` applies and the plan is not warming up, a core stops:
- at its own next dispatch, and at t + lag for a dispatch at t to any core (a request may end as it
  is sent: a context overflow);
- at f + lag for a finish at f;
- at the least of (own bound + lag) over another core's requests, a request's own bound being the
  later of its core's finish bound and its iterations' overhead for the tokens it has left, and,
  while that core only decodes, the decode window's iteration time for its first iterations (each
  lasts at least that until the first finish or a block shortage, `window.decode_finish_bound`).
  A core's bounds hold while nothing reaches it: from its next dispatch on, only the overhead one.
Every event that can reach a core still bounds it, so it runs the same iterations on the same
requests as before; only the order in which the loop visits the cores changes
(tests/virtual/test_replica_windows.py). Warmup keeps `reach.py` (a finish sends at once).
"""

from __future__ import annotations

import heapq
import itertools
import math
from bisect import insort

from agentx.engine.window import _window_state, decode_work
from agentx.replay.tree import ENDED
from agentx.replay.session_ids import stream_session_id


class Lags:
    """Per request in flight, its lag; per core, the dispatches due to it (heaps of plan entries,
    stale ones skipped); over all cores, dispatch time plus lag."""

    def __init__(self, plan, replicas, client_delay_s: float):
        self.plan, self.replicas, self.client_delay = plan, replicas, client_delay_s
        self.of: dict = {}  # sequence -> (lag, n, sequence) (none while warming up: lag 0)
        self.held = [[] for _ in replicas.cores]  # per core: its requests' (lag, n, sequence), by lag
        self.count = itertools.count()
        self.due = [[] for _ in replicas.cores]  # per core: (plan time, tree uid, node)
        self.reach: list = []  # (plan time + lag, plan time, tree uid, node)
        self.memo: dict = {}  # core -> (state key, bound)
        plan.on_schedule = self.scheduled

    def lag(self, tree, node: int) -> float:
        """The least time from the end of `node` to a request its end makes due."""
        state = tree.graph.out_edges[node], tree.state
        delays = [e.delay for e in state[0] if state[1][e.dst] != ENDED]
        return (min(min(delays), self.plan.cfg.idle_cap) if delays else 0.0) + self.client_delay

    def scheduled(self, tree, node: int, t: float) -> None:
        """The plan set `node` due at plan time `t`."""
        rule, cores = self.replicas.rule, self.replicas.cores
        core = rule.pick(cores, None, stream_session_id(str(tree.uid), tree.graph.nodes[node].stream), 0)
        heapq.heappush(self.due[core], (t, tree.uid, node))
        heapq.heappush(self.reach, (t + self.lag(tree, node), t, tree.uid, node))

    def submitted(self, seq, tree_uid: int, node: int) -> None:
        """`seq` (request `node` of tree `tree_uid`) was sent to core `seq.replica`."""
        if not self.plan.warming:
            entry = self.of[seq] = (self.lag(self.plan.trees[tree_uid], node), next(self.count), seq)
            insort(self.held[seq.replica], entry)

    def ended(self, seq) -> None:
        entry = self.of.pop(seq, None)
        if entry is not None:
            self.held[seq.replica].remove(entry)

    def next_due(self, i: int) -> float:
        """When the next request due to core i is sent (inf: none is due)."""
        heap, live = self.due[i], self.plan.live
        while heap and not live(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] - self.plan.shift if heap else math.inf

    def next_reach(self) -> float:
        """The least dispatch time plus lag over the requests due."""
        heap, live = self.reach, self.plan.live
        while heap and not live(heap[0][1:]):
            heapq.heappop(heap)
        return heap[0][0] - self.plan.shift if heap else math.inf

    def finished(self, done: list) -> float:
        """The least finish time plus lag over the finishes not handled yet."""
        of = self.of
        return min((t + (of[seq][0] if seq in of else 0.0) for t, _, _, seq in done), default=math.inf)

    def core_bound(self, core, i: int, bound: float) -> float:
        """The least (own bound + lag) over `core`'s requests; `bound`: its finish bound."""
        arrival = self.next_due(i)
        key = (core.version, core.now, core.kv.gains, arrival, bound)
        memo = self.memo.get(core)
        if memo is not None and memo[0] == key:
            return memo[1]
        out = _least(core, bound, arrival, self.held[i])
        self.memo[core] = (key, out)
        return out


def _least(core, bound: float, arrival: float, held: list) -> float:
    """The least (own bound + lag) over `held`, the core's requests by lag (every request a core
    holds while profiling was sent then: held): past the lag at which even the earliest own bound
    (`floor`) cannot beat the best found, none can."""
    per_step, overhead, now = math.ceil(core.accept_len), core.roofline.overhead_s, core.now
    window = _window_state(core)
    if window is not None:
        (batch, size, context, rem), limit = window
        first = min(min(rem), limit) // per_step  # iterations of at least `duration` each
        duration = core.roofline.iteration_s(decode_work(batch, size, context))
    out, floor = math.inf, max(now + overhead, min(bound, arrival))
    for lag, _, seq in held:
        if floor + lag >= out:
            break
        if seq.finish_reason:  # (its finish waits in the runner's `done`: `finished` counts it)
            continue
        left = seq.stop_len - len(seq.output)
        alone = bound
        if window is not None and seq.computed:  # (decoding: running; a waiting one has computed nothing)
            k = left // per_step
            alone = max(bound, now + (duration * min(k, first) + overhead * max(0, k - first)) * (1 - 1e-6))
        own = max(now + overhead * max(1, -(-left // per_step)), min(alone, arrival))
        out = min(out, own + lag)
    return out
