"""`agentx capture export`: raw recordings -> anonymized WEKA traces (SPEC §7).

Per request: the canonical prompt text (`canonical.py`) is tokenized with the given tokenizer
(incrementally per stream, `incremental.py`), cut into blocks, and every full block becomes
`H(salt, previous hash, position, block tokens)` (keyed BLAKE2b with a fresh secret salt that is
never written). Hashes become small integers, per session (`local`) or across the export
(`global`), counted from a random per-export base so that two exports of the same recordings
share no ids. Nothing else of the content leaves: token counts, timing, types and stop reasons.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from agentx.capture.answers import Answer
from agentx.capture.canonical import Prompt, prompt_of
from agentx.capture.incremental import IncrementalTokenizer, load_tokenizer
from agentx.capture.recordings import Row, read_rows
from agentx.capture.segments import prompt_segments
from agentx.common import shared_prefix
from agentx.errors import AgentxError
from agentx.traces.model import Request, Session, Stream, ids_array, make_session
from agentx.traces.variants import limit_context
from agentx.traces.weka import write_weka

HEAD_TOKEN = 0xFFFFFF00  # placeholder token ids of an unlogged prompt head: outside any vocabulary
GAP_TOKEN = 0xFFFFF000  # placeholder token ids of prompt text a log redacted but counted (SPEC §7)
_CLOSING = 4  # tokens the canonical closing `]}` may take (re-merged when the next turn appends)
DROP_REASONS = ("failed", "duplicate", "classifier", "over_max_input", "over_max_context")


@dataclass(frozen=True)
class ExportConfig:
    store: str
    tokenizer: str
    out: str
    block_size: int = 64
    scope: str = "local"  # hash ids per session (local) or one id space (global)
    classifier_max_tokens: int = 64  # a request with max_tokens <= this and no tools is a classifier call
    max_input_tokens: int = 990_000
    max_context: int | None = None  # the 256k variant: drop requests with in + out over this

    def __post_init__(self):
        if self.scope not in ("local", "global"):
            raise AgentxError(f"want local or global, got {self.scope!r}", "scope")
        if self.block_size < 1:
            raise AgentxError(f"want >= 1, got {self.block_size}", "block_size")


@dataclass
class ExportReport:
    recorded: int = 0
    exported: int = 0
    sessions: int = 0
    subagents: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_REASONS, 0))
    files: list[str] = field(default_factory=list)
    skipped_files: list[str] = field(default_factory=list)  # "PATH: why" of what `capture import` passed by
    tokenized_share: float = 1.0  # characters tokenized / characters of all prompts (incremental gain)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


@dataclass
class _Item:
    """One kept request on its way to the trace."""

    row: Row
    body: dict
    prompt: Prompt
    answer: Answer
    stream: str = ""
    tokens: np.ndarray | None = None
    hashes: list[bytes] = field(default_factory=list)
    recorded_isl: int | None = None  # a local session log's usage: the whole prompt, unlogged head included
    head: int = 0  # tokens of the unlogged head a session log's prompts start with


class _Hasher:
    """Chained block hashes, reusing the previous prompt's hashes of each stream."""

    def __init__(self, block_size: int):
        self.block, self.salt = block_size, secrets.token_bytes(32)
        self._last: dict[str, tuple[np.ndarray, list[bytes]]] = {}

    def forget(self) -> None:
        self._last.clear()

    def hashes(self, stream: str, tokens: np.ndarray) -> list[bytes]:
        n_blocks = len(tokens) // self.block
        prev_tokens, prev_hashes = self._last.get(stream, (tokens[:0], []))
        same_blocks = shared_prefix(prev_tokens, tokens[: n_blocks * self.block]) // self.block
        out = prev_hashes[:same_blocks]
        prev = out[-1] if out else b""
        for i in range(same_blocks, n_blocks):
            h = hashlib.blake2b(key=self.salt, digest_size=16)
            h.update(prev)
            h.update(i.to_bytes(8, "little"))
            h.update(tokens[i * self.block:(i + 1) * self.block].astype("<u4").tobytes())
            prev = h.digest()
            out.append(prev)
        self._last[stream] = (tokens, out)
        return out


def _select(cfg: ExportConfig, report: ExportReport) -> dict[str, list[int]]:
    """First pass over the store, one row at a time: apply the clean-up filters (each drop
    counted) and group the kept row ids by session."""
    seen = []  # (row id, session id, body digest, session key, drop reason)
    last_of_body: dict[tuple, int] = {}
    for row in read_rows(cfg.store):
        digest = hashlib.sha256(row.request_body).digest()
        last_of_body[(row.session_id, digest)] = row.id
        seen.append((row.id, row.session_id, digest, *_classify(row, cfg)))
    report.recorded = len(seen)
    sessions: dict[str, list[int]] = defaultdict(list)
    for rid, session_id, digest, key, reason in seen:
        if last_of_body[(session_id, digest)] != rid:
            report.dropped["duplicate"] += 1  # the same body sent again later: a retry
        elif reason:
            report.dropped[reason] += 1
        else:
            sessions[key].append(rid)
    return sessions


def _classify(row: Row, cfg: ExportConfig) -> tuple[str | None, str | None]:
    """(the session the row belongs to, or None and the reason it is dropped)."""
    answer = Answer.from_json(row.response) if row.response else None
    if row.status != 200 or row.error or answer is None or not answer.complete:
        return None, "failed"
    try:
        body = json.loads(row.request_body)
    except (ValueError, RecursionError):
        return None, "failed"
    if not isinstance(body, dict):
        return None, "failed"
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    if not body.get("tools") and limit is not None and limit <= cfg.classifier_max_tokens:
        return None, "classifier"
    if row.session_id:
        return "id:" + row.session_id, None
    return "conv:" + hashlib.sha256(prompt_of(row.api, body).conversation.encode()).hexdigest(), None


def _items(cfg: ExportConfig, ids: list[int]) -> list[_Item]:
    items = []
    for row in read_rows(cfg.store, ids):
        body = json.loads(row.request_body)
        items.append(_Item(row, body, prompt_of(row.api, body), Answer.from_json(row.response)))
    return items


def _osl(item: _Item, tok: IncrementalTokenizer) -> int:
    if item.answer.output_tokens is not None:
        return item.answer.output_tokens
    text = item.answer.thinking + item.answer.text + "".join(c["arguments"] for c in item.answer.tool_calls)
    return len(tok.full(text)) if text else 0


def _stream_key(item: _Item) -> str:
    """A request's stream: its agent id where the agent sends one, else its conversation
    (system prompt and first message)."""
    return f"agent:{item.row.agent_id}" if item.row.agent_id else "conv:" + item.prompt.conversation


def _streams(items: list[_Item]) -> dict[str, list[_Item]]:
    streams: dict[str, list[_Item]] = defaultdict(list)
    for item in items:
        streams[item.stream].append(item)
    return streams


class _Exporter:
    def __init__(self, cfg: ExportConfig):
        self.cfg = cfg
        self.tok = IncrementalTokenizer(load_tokenizer(cfg.tokenizer))
        self.hasher = _Hasher(cfg.block_size)
        self.base = secrets.randbelow(1 << 24) + 1
        self.global_ids: dict[bytes, int] = {}
        self._counts: dict[str, int] = {}
        self._heads: dict[str, np.ndarray] = {}  # per agent: the unlogged prompt head (local logs)
        self._sized_last: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # per stream: (logged, sized) tokens
        self._pieces: dict[str, int] = {}  # one session's message parts -> their tokens (segments)

    def count(self, text: str) -> int:
        """Tokens of a tools or system text (the same few texts recur: cached)."""
        n = self._counts.get(text)
        if n is None:
            n = self._counts[text] = len(self.tok.full(text)) if text not in ("", "[]", '""') else 0
        return n

    def tokenize(self, item: _Item) -> None:
        p = item.prompt
        if p.token_ids is not None:
            item.tokens = np.asarray(p.token_ids, dtype=np.uint32)
        else:
            item.tokens = self.tok.encode(item.stream, p.canonical())
        if item.recorded_isl is not None:
            item.head = len(self._head(item))
            item.tokens = self._sized(item, item.tokens)
        item.hashes = self.hasher.hashes(item.stream, item.tokens)
        if item.recorded_isl is not None:  # the blocks never cover more than the recorded prompt
            item.hashes = item.hashes[: item.recorded_isl // self.cfg.block_size]

    def _sized(self, item: _Item, logged: np.ndarray) -> np.ndarray:
        """A session log's prompt at its recorded length: the unlogged head, then the logged
        text, where the log kept a call's token count but not all of its text (redacted
        reasoning, elided tool output) filled up with placeholder tokens to the count. A prompt
        that extends its stream's previous logged text extends the previous sized prompt, so
        the placeholders of earlier turns stay where they were and the prefix reuse the
        recorded counts imply survives (SPEC §7). The previous text ends with the canonical
        closing `]}`, which the next turn's text continues instead (`,{...}]}`): it extends the
        previous one when they differ in no more than its last _CLOSING tokens."""
        prev = self._sized_last.get(item.stream)
        shared = shared_prefix(prev[0], logged) if prev is not None else 0
        if prev is not None and len(logged) >= len(prev[0]) and shared >= len(prev[0]) - _CLOSING:
            body = np.concatenate([prev[1], logged[shared:]])
        else:
            body = np.concatenate([self._head(item), logged])
        missing = item.recorded_isl - len(body)
        if missing > 0:
            body = np.concatenate([body, np.full(missing, GAP_TOKEN, dtype=np.uint32)])
        self._sized_last[item.stream] = (logged, body)
        return body

    def _head(self, item: _Item) -> np.ndarray:
        """A session log holds the messages but not the system prompt and tool definitions sent
        before them: their length is the agent's first recorded input minus its tokenized
        messages, and they stand as the same placeholder tokens at the head of all its prompts
        (SPEC §7)."""
        agent = item.row.agent_id or ""
        head = self._heads.get(agent)
        if head is None:
            n = max(0, item.recorded_isl - len(item.tokens))
            head = self._heads[agent] = np.full(n, HEAD_TOKEN - len(self._heads), dtype=np.uint32)
        return head

    def session(self, number: int, items: list[_Item], report: ExportReport) -> Session | None:
        for item in items:  # in time order; each stream reuses its own previous prompt
            item.stream = _stream_key(item)
            self.tokenize(item)
        self.tok.forget()  # streams do not cross sessions: hold one session's state at a time
        self.hasher.forget()
        self._heads.clear()
        self._sized_last.clear()
        self._pieces.clear()
        kept = [i for i in items if len(i.tokens) <= self.cfg.max_input_tokens]
        report.dropped["over_max_input"] += len(items) - len(kept)
        if not kept:
            return None
        ids = self.global_ids if self.cfg.scope == "global" else {}
        t0 = min(i.row.start for i in kept)
        streams = _streams(kept)
        main_key = max((k for k in streams if not k.startswith("agent:")),
                       key=lambda k: sum(len(i.tokens) for i in streams[k]), default=None)
        main_system = streams[main_key][0].prompt.system if main_key else None
        top, subagents = [], []
        for key, chain in streams.items():
            requests = self._requests(chain, ids, t0)
            is_sub = key.startswith("agent:") or (key != main_key and chain[0].prompt.system != main_system
                                                   and any(i.body.get("tools") for i in chain))
            if is_sub:
                subagents.append(self._subagent(chain, requests, len(subagents) + 1))
            else:
                top.extend(requests)
        first = streams[main_key][0] if main_key else kept[0]
        return make_session(
            top, subagents, id=f"session_{number:04d}", block_size=self.cfg.block_size,
            hash_id_scope=self.cfg.scope, models=tuple(sorted({r.model for r in top} or {""})),
            tool_tokens=self.count(first.prompt.tools), system_tokens=self.count(first.prompt.system))

    def piece(self, text: str) -> int:
        """Tokens of one part of a prompt (cached for the session: earlier turns resend it)."""
        n = self._pieces.get(text)
        if n is None:
            n = self._pieces[text] = len(self.tok.full(text)) if text not in ("", "null", '""') else 0
        return n

    def _requests(self, chain: list[_Item], ids: dict[bytes, int], t0: float) -> list[Request]:
        out, prev_end = [], None
        for item in chain:
            row, answer = item.row, item.answer
            isl = len(item.tokens) if item.recorded_isl is None else item.recorded_isl
            hash_ids = ids_array([ids.setdefault(h, self.base + len(ids)) for h in item.hashes])
            t = row.start - t0
            api_time = max(0.0, row.end - row.start)
            out.append(Request(
                t=round(t, 6), model=item.body.get("model") or answer.model or "",
                isl=isl,
                osl=_osl(item, self.tok), hash_ids=hash_ids, type="s" if row.stream else "n",
                ttft=round(row.first_token - row.start, 6) if row.stream and row.first_token else None,
                think_time=round(max(0.0, t - prev_end), 6) if prev_end is not None else 0.0,
                api_time=round(api_time, 6), stop=answer.stop, input_types=item.prompt.input_types,
                output_types=tuple(answer.output_types),
                segments=prompt_segments(row.api, item.body, self.piece, isl, item.head)))
            prev_end = t + api_time
        return out

    def _subagent(self, chain: list[_Item], requests: list[Request], number: int) -> Stream:
        spawn = requests[0].t
        end = max(r.end for r in requests)
        return Stream(
            kind="subagent", requests=tuple(requests), spawn=spawn, agent_id=f"agent_{number:03d}",
            status="completed", duration_ms=round((end - spawn) * 1000, 3),
            total_tokens=sum(r.isl + r.osl for r in requests),
            tool_use_count=sum(len(i.answer.tool_calls) for i in chain),
            models=tuple(sorted({r.model for r in requests})),
            tool_tokens=self.count(chain[0].prompt.tools), system_tokens=self.count(chain[0].prompt.system))


def export(cfg: ExportConfig) -> ExportReport:
    """Write one WEKA file per recorded session to `OUT/traces/`, and `OUT/export_report.json`.

    Memory holds one session's rows at a time (a second pass reads them back by id)."""
    report = ExportReport()
    groups = _select(cfg, report)
    return write_export(cfg, (_items(cfg, ids) for ids in groups.values()), report)


def write_export(cfg: ExportConfig, sessions, report: ExportReport, provider=None) -> ExportReport:
    """Anonymize sessions of kept requests (`_Item` lists, in time order) into `OUT/traces/` and
    write the report. `provider(items)` names the agent of a session where the source knows it."""
    out = Path(cfg.out)
    (out / "traces").mkdir(parents=True, exist_ok=True)
    exporter = _Exporter(cfg)
    for number, items in enumerate(sessions, 1):
        session = exporter.session(number, items, report)
        if session is None:
            continue
        if provider is not None:
            session = replace(session, provider=provider(items))
        n = session.n_requests
        session = limit_context(session, cfg.max_context) if cfg.max_context else session
        report.dropped["over_max_context"] += n - (session.n_requests if session else 0)
        if session is None:
            continue
        path = out / "traces" / f"{session.id}.json"
        write_weka([session], path)
        report.files.append(f"traces/{path.name}")
        report.exported += session.n_requests
        report.sessions += 1
        report.subagents += sum(1 for s in session.walk() if s.kind in ("subagent", "background"))
    if exporter.tok.chars_total:
        report.tokenized_share = round(exporter.tok.chars_tokenized / exporter.tok.chars_total, 4)
    (out / "export_report.json").write_text(report.to_json() + "\n")
    return report


def report_lines(report: ExportReport) -> list[str]:
    lines = [f"recorded requests        {report.recorded:,}", f"exported requests        {report.exported:,}"]
    width = max([16] + [len(reason) + 1 for reason in report.dropped])  # over_max_context is 16 long
    lines += [f"  dropped {reason:<{width}}{n:,}" for reason, n in report.dropped.items()]
    lines += [f"sessions                 {report.sessions:,}", f"subagents                {report.subagents:,}",
              f"tokenized                {report.tokenized_share:.1%} of the prompt text (the rest reused)"]
    return lines
