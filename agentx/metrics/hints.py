"""Hints: what a failed run's errors most likely mean and the setting that changes it, printed
under the summary (`result["hints"]`). A run mostly refused with HTTP 4xx is almost always
the wrong model name, missing credentials or a wrong base URL; a run mostly overflowing the
context replays traces longer than the server's context."""

from __future__ import annotations

from collections import Counter

from agentx.records import Record

SHARE = 0.10  # a kind of error counts once it is this share of the profiled requests


REFUSED = {401: "the server wants credentials: --api-key KEY (or OPENAI_API_KEY), or --header 'Name: value'",
           403: "the credentials are refused: check --api-key / --header",
           404: "no such route or model: check --url (the server's base, with or without /v1) and --model"}


def refusal(status: int | None, detail: str | None, model) -> str:
    """"HTTP 404 (the server's words): what to change" of a request the server refused."""
    first = (detail or "").strip()[:160]
    return (f"HTTP {status}" + (f" ({first})" if first else "") + ": "
            + REFUSED.get(status, f"check --model ({model!r}), --api-key / --header and --url"))


class RefusalWatch:
    """Stops a run whose first `STOP` answers were all refusals (401 / 403 / 404): a wrong --model,
    URL or credentials says so in one line instead of sending the whole run into refusals."""

    STOP = 8

    def __init__(self, model):
        self.model, self.refused, self.answered = model, 0, False
        self.stop: str | None = None

    def see(self, rec: Record) -> None:
        if rec.error == "http_4xx" and rec.status in REFUSED and not self.answered and self.stop is None:
            self.refused += 1
            if self.refused >= self.STOP:
                self.stop = (f"the first {self.STOP} requests all got " + refusal(rec.status, rec.detail, self.model)
                             + " (stopped before sending the rest)")
        elif not rec.error:
            self.answered = True


def hints(prof: list[Record], errors: Counter, ident: dict, settings: dict) -> list[str]:
    out = []
    if not prof:
        return out
    refused = [r for r in prof if r.error == "http_4xx"]
    if len(refused) > SHARE * len(prof):
        statuses = Counter(r.status for r in refused)
        status, _ = statuses.most_common(1)[0]
        out.append(f"{len(refused) / len(prof):.0%} of requests got "
                   + refusal(status, refused[0].detail, settings.get("model")))
    overflow = errors.get("context_overflow", 0)
    if overflow > 0.01 * len(prof) and not settings.get("scenario"):
        limit = ident.get("max_model_len")
        size = f"{limit // 1024}k" if limit and limit % 1024 == 0 else (f"{limit}" if limit else "N")
        out.append(f"{overflow / len(prof):.0%} of requests overflowed the server's context"
                   + (f" ({limit:,} tokens)" if limit else "")
                   + f": replay only what fits with --max-context {size} (a synthetic corpus: "
                   f"`agentx trace synth --max-context {size}`)")
    return out
