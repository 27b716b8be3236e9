"""The one internal trace model: sessions, streams and requests (SPEC §1).

Every format adapter reads into and writes from these frozen types. Times are absolute:
seconds from the session's start. Hash ids are read-only numpy arrays; requests of one
stream whose ids extend the previous request's share one buffer (views), which keeps a
393-session, 1M-context corpus in a few hundred MB.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Iterator, Literal

import msgspec
import numpy as np

StreamKind = Literal["main", "subagent", "background", "aux"]
HashScope = Literal["local", "global"]

EMPTY_IDS = np.zeros(0, dtype=np.uint32)
EMPTY_IDS.flags.writeable = False

# Bounds (SPEC §1), in this one place; every reader rejects a value outside them with a
# TraceError. Beyond them a number is a corrupt record, and it would hang or exhaust memory
# downstream (a 10^30-token prompt).
MAX_TOKENS = 10_000_000  # a request's input or output tokens, and the tokens its hash blocks cover
MAX_SECONDS = 1e10  # a time or duration (~317 years: room for Unix-epoch timestamps)
MAX_ID = 2**63 - 1  # a hash id or a numeric record id (int64: what the JSON decoder can bound)
MAX_COUNT = 10**12  # an aggregate count of the metadata (a subagent's total tokens, tool uses)
MAX_DEPTH = 16  # subagents nested inside subagents
MAX_NAME = 1_000  # characters of an id or a model name
MAX_SEGMENTS = 100_000  # segments of one request (a message and its content blocks each make one at most)

Tokens = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKENS)]
Seconds = Annotated[float, msgspec.Meta(ge=0, le=MAX_SECONDS)]
Millis = Annotated[float, msgspec.Meta(ge=0, le=MAX_SECONDS * 1000)]
HashId = Annotated[int, msgspec.Meta(ge=0, le=MAX_ID)]
RecordId = Annotated[int, msgspec.Meta(ge=-1, le=MAX_ID)]  # -1: "none" (Bailian's parent_chat_id)
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
BlockSize = Annotated[int, msgspec.Meta(ge=1, le=MAX_TOKENS)]
Name = Annotated[str, msgspec.Meta(max_length=MAX_NAME)]

SegmentKind = Literal["system", "tools", "user", "assistant", "reasoning", "tool_call", "tool_result"]
ToolClass = Literal["read", "search", "edit", "shell", "web"]
SEGMENT_KINDS: tuple[str, ...] = SegmentKind.__args__  # type: ignore[attr-defined]


class Segment(msgspec.Struct, array_like=True, frozen=True, omit_defaults=True):
    """A run of a request's input tokens of one kind (SPEC §1, "Segments"): `[kind, tokens]` or
    `[kind, tokens, tool]` in a file. Kinds and lengths only: never text."""

    kind: SegmentKind
    tokens: Tokens
    tool: ToolClass | None = None  # the tool's class, for tool_call and tool_result where known


Segments = Annotated[list[Segment], msgspec.Meta(max_length=MAX_SEGMENTS)]


def time_problem(t: float) -> str | None:
    """The problem with a time a reader computed (a sum of recorded waits), else None."""
    if t > MAX_SECONDS:
        return f"{t:,.0f} s from the session start, over the bound of {MAX_SECONDS:,.0f} s"
    return None


def request_problem(isl: int, n_ids: int, block_size: int, partial_block_ids: bool) -> tuple[str, str] | None:
    """(field, problem) when a request breaks a bound its fields only break together, else None.

    A request must have input (no input tokens and no hash ids is rejected: it cannot be sent,
    and a corpus of it would replay thousands of empty requests), and neither its input nor
    what its hash blocks cover may be more than MAX_TOKENS. `field` is "in" or "hash_ids";
    readers rename it to theirs.
    """
    if isl > MAX_TOKENS:  # only where the reader sums it (delta rows, appended turns): a read `in` is Tokens
        return "in", f"{isl:,} input tokens, over the bound of {MAX_TOKENS:,}"
    covered = ((n_ids - 1) * block_size + 1 if partial_block_ids else n_ids * block_size) if n_ids else 0
    if covered > MAX_TOKENS:
        return "hash_ids", (f"{n_ids:,} blocks of {block_size} tokens cover {covered:,} tokens, "
                            f"over the bound of {MAX_TOKENS:,}")
    if isl == 0 and n_ids == 0:
        return "in", "a request with no input tokens (0 and no hash ids) cannot be replayed"
    return None


@dataclass(frozen=True, slots=True, eq=False)
class Request:
    t: float
    model: str
    isl: int  # the file's `in`
    osl: int  # the file's `out`
    hash_ids: np.ndarray = field(default_factory=lambda: EMPTY_IDS)
    type: str = "n"  # "n" (non-streamed) or "s" (streamed, may carry ttft)
    ttft: float | None = None
    think_time: float | None = None
    api_time: float | None = None
    stop: str | None = None
    input_types: tuple[str, ...] | None = None
    output_types: tuple[str, ...] | None = None
    segments: tuple[Segment, ...] | None = None  # the input, in order, by kind (SPEC §1)

    @property
    def end(self) -> float:
        """Recorded end: start plus api_time; the start itself when api_time is unknown."""
        return self.t + (self.api_time or 0.0)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return (
            self.t == other.t
            and self.model == other.model
            and self.isl == other.isl
            and self.osl == other.osl
            and self.type == other.type
            and self.ttft == other.ttft
            and self.think_time == other.think_time
            and self.api_time == other.api_time
            and self.stop == other.stop
            and self.input_types == other.input_types
            and self.output_types == other.output_types
            and self.segments == other.segments
            and np.array_equal(self.hash_ids, other.hash_ids)
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class Stream:
    """A chain of requests: the main agent, a subagent, a background subagent or an aux chain.

    `children` are the subagents this stream spawned, in spawn order. `spawn` is the absolute
    spawn time (for main and aux streams, the first request's start).
    """

    kind: StreamKind
    requests: tuple[Request, ...]
    spawn: float = 0.0
    children: tuple["Stream", ...] = ()
    agent_id: str | None = None
    subagent_type: str | None = None
    status: str | None = None
    duration_ms: float | None = None
    total_tokens: int | None = None
    tool_use_count: int | None = None
    models: tuple[str, ...] | None = None
    tool_tokens: int | None = None
    system_tokens: int | None = None

    @property
    def end(self) -> float:
        """Recorded end: spawn plus the recorded duration, else the last request's end."""
        if self.duration_ms is not None:
            return self.spawn + self.duration_ms / 1000.0
        return max((r.end for r in self.requests), default=self.spawn)

    def walk(self) -> Iterator["Stream"]:
        """This stream and its descendants, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass(frozen=True, slots=True)
class Session:
    """One recorded session tree.

    `streams` holds the main stream first, then the aux streams; subagents hang below the
    stream that spawned them. `start` places the session on a corpus timeline (schedule mode).
    `partial_block_ids` is true for formats that give the last partial block an id too.
    `provider` names the agent that produced it where the format says (TraceLab: claude, codex).
    `source` is the file it was read from (for errors found after loading, e.g. by a conversion).
    `source_hit` is (rule, hit tokens, input tokens) by the format's own hit-rate rule (TRIE,
    TraceLab), for `trace stats --hit-rule source`.
    """

    id: str
    block_size: int
    hash_id_scope: HashScope
    streams: tuple[Stream, ...]
    models: tuple[str, ...] = ()
    tool_tokens: int | None = None
    system_tokens: int | None = None
    start: float = 0.0
    partial_block_ids: bool = False
    provider: str | None = None
    source: str = field(default="", compare=False)
    # the source format's own theoretical hit, where it defines one that differs from agentx's
    # (stats.SOURCE_RULES names each rule): (hit tokens, input tokens) of this session
    source_hit: tuple[str, int, int] | None = field(default=None, compare=False)

    @property
    def main(self) -> Stream:
        return self.streams[0]

    def walk(self) -> Iterator[Stream]:
        for stream in self.streams:
            yield from stream.walk()

    def requests(self) -> Iterator[Request]:
        for stream in self.walk():
            yield from stream.requests

    @property
    def n_requests(self) -> int:
        return sum(len(s.requests) for s in self.walk())

    @property
    def duration(self) -> float:
        """Recorded wall time from session start to the last recorded end."""
        return max((s.end for s in self.walk()), default=0.0)

    def hash_coverage(self, request: Request) -> int:
        """Tokens the request's hash blocks cover."""
        n = len(request.hash_ids)
        if n == 0:
            return 0
        return (n - 1) * self.block_size + 1 if self.partial_block_ids else n * self.block_size

    def replay_isl(self, request: Request) -> int:
        """The ISL to replay: the file's `in`, or the hash coverage where `in` is smaller (SPEC §1)."""
        return max(request.isl, self.hash_coverage(request))


def ids_array(values, dtype=None) -> np.ndarray:
    """A read-only id array of the smallest fitting unsigned dtype."""
    arr = np.asarray(values)
    if dtype is None:
        dtype = np.uint32 if (arr.size == 0 or int(arr.max()) < 2**32) else np.uint64
    arr = arr.astype(dtype, copy=False)
    arr.flags.writeable = False
    return arr


def split_chains(requests: list[Request]) -> tuple[list[Request], list[list[Request]]]:
    """Split top-level requests into the main chain and aux chains (SPEC §1).

    Requests sharing their first hash block form a chain; the chain with the most hash
    blocks in total is main (ties: earliest first request, then smallest first id). A request
    with no hash ids is a one-off aux chain. Chains keep time order.
    """
    chains: dict[int, list[Request]] = {}
    loose: list[list[Request]] = []
    for req in sorted(requests, key=lambda r: r.t):
        if len(req.hash_ids) == 0:
            loose.append([req])
        else:
            chains.setdefault(int(req.hash_ids[0]), []).append(req)
    if not chains:
        if not loose:
            return [], []
        return loose[0], loose[1:]
    ranked = sorted(
        chains.items(),
        key=lambda kv: (-sum(len(r.hash_ids) for r in kv[1]), kv[1][0].t, kv[0]),
    )
    main = ranked[0][1]
    aux = [chain for _, chain in ranked[1:]] + loose
    aux.sort(key=lambda chain: chain[0].t)
    return main, aux


def make_session(
    top_requests: list[Request],
    subagents: list[Stream],
    **meta,
) -> Session:
    """Build a session from its top-level requests and the subagents the main chain spawned."""
    main_reqs, aux_chains = split_chains(top_requests)
    main = Stream(
        kind="main",
        requests=tuple(main_reqs),
        spawn=main_reqs[0].t if main_reqs else 0.0,
        children=tuple(sorted(subagents, key=lambda s: s.spawn)),
    )
    aux = tuple(Stream(kind="aux", requests=tuple(c), spawn=c[0].t) for c in aux_chains)
    return Session(streams=(main, *aux), **meta)
