"""Request bodies of a run and the bookkeeping rendering needs, apart from the dispatch loop:
per stream the hash ids its last request sent (the next body reuses its shared prefix), per
tree the blocks sent so far (the theoretical cache), and bodies prepared before they are due.
A finished tree's state is dropped with `forget()`."""

from __future__ import annotations

from agentx.common import key64, shared_prefix
from agentx.content.tokens import ContentConfig, PromptBuilder
from agentx.content.wire import BodyBuilder, ChatText, TokensText, chat_segments, load_decoder
from agentx.replay.plan import Dispatch

AHEAD_BYTES = 256 << 20  # bodies held ahead own at most this much


def _held(body) -> int:
    """Memory a body built ahead holds (a view of a stream's buffer holds none of its own)."""
    return 0 if isinstance(body, memoryview) else len(body)


class Renderer:
    def __init__(self, run_id: str, content: ContentConfig, model: str, wire: str, tokenizer: str | None):
        self.run_id = run_id
        self.prompts = PromptBuilder(content)
        decoder = load_decoder(tokenizer) if wire == "chat" else None
        self.bodies = BodyBuilder(model, wire, decoder)
        self.chat_text = ChatText(self.prompts, decoder) if decoder else None
        self.tokens_text = TokensText(self.prompts, self.bodies)
        self.ahead: dict = {}  # dispatch key -> (phase, `prepare()`'s answer) before it was due
        self.ahead_bytes = 0  # of bodies in `ahead` (`_held`)
        self.seen: dict[int, set] = {}  # tree -> hash ids sent
        self.last_ids: dict = {}  # (tree, stream) -> hash ids of the stream's last request

    def ahead_full(self) -> bool:
        return self.ahead_bytes > AHEAD_BYTES

    def prepare_ahead(self, upcoming: list[Dispatch]) -> bool:
        """Prepare the first of `upcoming` not prepared yet; False when there is none."""
        for d in upcoming:
            if d.key not in self.ahead:
                prepared = self.prepare(d)
                self.ahead[d.key] = (d.phase, prepared)
                self.ahead_bytes += _held(prepared[0])
                return True
        return False

    def prepared(self, d: Dispatch) -> tuple:
        """`prepare(d)`, done ahead or now."""
        ahead = self.ahead.pop(d.key, None)
        if ahead is not None:
            phase, prepared = ahead
            self.ahead_bytes -= _held(prepared[0])
            if phase == d.phase:
                return prepared
            del ahead, prepared  # (its stream's buffer is free again)
        return self.prepare(d)

    def prepare(self, d: Dispatch) -> tuple:
        """(body, ISL, OSL, hash ids shared with its stream's last request) of a dispatch. Its
        stream's last request was sent before this one is due, so this can be done ahead."""
        body, isl, osl = self._body(d)
        return body, isl, osl, self.shared_with_last(d)

    def shared_with_last(self, d: Dispatch) -> int:
        """Hash ids the request shares with its stream's last request (0 for a stream's first)."""
        last = self.last_ids.get((d.tree, d.graph.nodes[d.node].stream))
        return shared_prefix(last, d.request.hash_ids) if last is not None else 0

    def _body(self, d: Dispatch) -> tuple[bytes, int, int]:
        """(body, ISL, OSL) of a dispatch."""
        session, req = d.session, d.request
        node = d.graph.nodes[d.node]
        tail_key = key64("tail", self.run_id, d.tree, d.node)
        osl = 1 if d.phase == "warmup" else self.prompts.osl(req)  # (a drain request loads as a profiled one)
        if self.bodies.wire == "tokens":
            body, isl = self.tokens_text.body(session, req, tail_key, d.marker, osl, (d.tree, node.stream))
        else:
            isl = self.prompts.isl(session, req)
            stream = d.graph.streams[node.stream]
            history = [(self.prompts.isl(session, r), self.prompts.osl(r)) for r in stream.requests[: node.position]]
            segments = chat_segments(isl, self.prompts.system_tokens(session), history)
            texts = self.chat_text.messages(session, req, tail_key, d.marker, segments)
            body = self.bodies.chat_body(segments, texts, osl)
        return body, isl, osl

    def theoretical_cached(self, d: Dispatch, isl: int, k: int) -> int:
        """Prompt tokens of the request an infinite prefix cache would hold: its hash blocks this
        tree has sent before. The `k` its stream's last request also had were sent with it:
        only the rest are looked up. Called once per request, as it is sent."""
        ids = d.request.hash_ids
        self.last_ids[(d.tree, d.graph.nodes[d.node].stream)] = ids
        seen = self.seen.setdefault(d.tree, set())
        new = ids[k:].tolist()
        hits = k + sum(1 for i in new if i in seen)
        seen.update(new)
        return min(isl, hits * self.prompts.block_tokens(d.session))

    def forget(self, tree: int, streams: int) -> None:
        """Drop a finished tree's state (and bodies prepared for requests it no longer sends)."""
        for key in [k for k in self.ahead if k[0] == tree]:
            self.ahead_bytes -= _held(self.ahead.pop(key)[1][0])
        self.seen.pop(tree, None)
        for stream in range(streams):
            self.tokens_text.forget((tree, stream))
            self.last_ids.pop((tree, stream), None)
