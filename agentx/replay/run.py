"""The skeleton every replay run shares, in real time (`driver.py`) or modeled time
(`virtual/runner.py`): a run id, the run folder with the dataset's digest, the session graphs and
the plan, the renderer, the phase label of a moment, a `Record` from a `Dispatch`, and the rows of
the session trees that finished. What differs between the two is only how requests reach an
engine and what the clock is."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path
from typing import Iterator

from agentx.common import gc_paused
from agentx.records import Record
from agentx.replay.folder import RunFolder
from agentx.replay.hints import HintLevel, request_hints
from agentx.replay.plan import PROFILE, WARMUP1, WARMUP2, Dispatch, ReplayPlan
from agentx.replay.render import Renderer
from agentx.replay.settings import BenchSettings
from agentx.replay.tree import Tree
from agentx.traces.digest import write_digest
from agentx.traces.graph import build_graph

# Profiling starts this long (in the run's clock, modeled seconds) after the warmup drains: in real
# time, time to prepare every lane's first body; in modeled time the same lead, so that both runs
# of one plan send the same requests at the same modeled times (SPEC section 2).
LEAD_S = 0.5

WARMUP = "warmup"  # the phase label of records and server samples before the window opens
_WARMUPS = (WARMUP1, WARMUP2)


class RunSkeleton:
    """One (settings, sessions) replay into the folder `settings.out`; `info` adds to the settings
    written to run.json, `tokenizer` overrides the target's (None where no text is rendered)."""

    def __init__(self, settings: BenchSettings, sessions: list, command: str = "", info: dict | None = None,
                 tokenizer: str | None = ""):
        self.s, target = settings, settings.target
        self.run_id = uuid.uuid4().hex[:12]
        self.sessions = sessions
        with gc_paused():
            graphs = [build_graph(s) for s in sessions]
        lead = LEAD_S * target.clock_scale  # wall seconds in the run's clock
        self.plan = ReplayPlan(graphs, replace(settings.plan, run_id=self.run_id, lead=lead))
        # the tokenizer is read before the folder is made: a bad one leaves no folder behind
        self.render = Renderer(self.run_id, settings.content, target.model, target.wire,
                               target.tokenizer if tokenizer == "" else tokenizer)
        self.folder = RunFolder(Path(settings.out), self.run_id, {**settings.flat(), "model": target.model,
                                                                  "sessions": len(sessions), **(info or {})}, command)
        write_digest(self.folder.path, sessions, graphs)  # the dataset's trace stats (SPEC §8)
        self.trees_written = 0

    def hints_of(self, d: Dispatch, session_id: str, parent_id: str | None, shared_blocks: int, osl: int) -> dict | None:
        """The harness hints of a dispatch at the run's `--hints` level (SPEC §2)."""
        if self.s.target.hints == HintLevel.NONE:
            return None
        block = self.render.prompts.block_tokens(d.session)
        return request_hints(self.s.target.hints, d.graph, d.node, session_id, parent_id, shared_blocks, block, osl)

    def phase_at(self, t: float) -> str:
        """The phase label of run-clock time t: both warmup stages and the lead before profiling
        are `warmup`."""
        phase = self.plan.phase
        if phase in _WARMUPS or (phase == PROFILE and t < self.plan.profile_start):
            return WARMUP
        return phase

    def record(self, d: Dispatch, isl_planned: int, osl_planned: int, theo_cached: int, start: float, end: float,
               **answer) -> Record:
        """The record of a dispatch sent at `start` and answered (or not) at `end`; `answer` holds
        the fields the engine's answer filled in."""
        return make_record(self.run_id, d, isl_planned, osl_planned, theo_cached, start, end, **answer)

    def finished_trees(self) -> Iterator[Tree]:
        """The session trees that finished since the last call, each written to trees.jsonl and its
        rendering state dropped; the caller drops what else it kept per tree."""
        done = self.plan.finished_trees
        while self.trees_written < len(done):
            tree = done[self.trees_written]
            self.trees_written += 1
            self.render.forget(tree.uid, len(tree.graph.streams))
            self.folder.write_tree(tree, self.plan.profile_end)
            yield tree


def make_record(run_id: str, d: Dispatch, isl_planned: int, osl_planned: int, theo_cached: int, start: float,
                end: float, **answer) -> Record:
    """The record of dispatch `d` of run `run_id` (also made in a worker process)."""
    node = d.graph.nodes[d.node]
    return Record(run=run_id, lane=d.lane, tree=d.tree, replay=d.replay, session=d.session.id,
                  stream=node.stream, stream_kind=d.graph.kind(d.node), node=d.node, phase=d.phase,
                  planned=d.planned, start=start, end=end, isl_planned=isl_planned, osl_planned=osl_planned,
                  theo_cached=theo_cached, **answer)
