"""The sim's truth log: a JSON line per request as the server saw it (SPEC section 6), and a
line per stall of its loop."""

from __future__ import annotations

import json

from agentx.errors import AgentxError

# session headers routers read (agentx's --session-headers presets): logged as sent, for checking a replay
ROUTER_SESSION_HEADERS = ("X-Dynamo-Session-ID", "X-Dynamo-Parent-Session-ID", "X-Dynamo-Session-Final",
                          "X-SMG-Routing-Key", "Cookie")


class TruthLog:
    def __init__(self, path: str):
        try:
            self.file = open(path, "a", buffering=1)
        except OSError as e:
            raise AgentxError(f"{path}: {e.strerror}", "truth_log") from None

    def request(self, request, rid, arrival, first, prompt_tokens, cached, completion, status, end=None,
                energy=None, modeled: dict | None = None, hints=None) -> None:
        record = {
            "id": rid, "correlation_id": request.headers.get("X-Correlation-ID"),
            "session_id": request.headers.get("X-Session-ID"),
            "parent_session_id": request.headers.get("X-Parent-Session-ID"),
            "router_session": {h: request.headers[h] for h in ROUTER_SESSION_HEADERS if h in request.headers},
            "arrival": arrival, "first_token": first,
            "last_token": end if first is not None else None, "prompt_tokens": prompt_tokens,
            "cached_tokens": cached, "completion_tokens": completion, "status": status,
            "modeled": modeled,  # the agentx_sim object: modeled timings and the sim's lag
        }
        if energy is not None:  # the modeled energy of all GPUs (J, engine/power.py) as it arrived and ended
            record["energy_j"] = energy
        if hints is not None:
            record["hints"] = hints.record()
            record["hint_headers"] = {h: v for h, v in request.headers.items() if h.lower().startswith("x-agentx-")}
        self.write(record)

    def write(self, record: dict) -> None:
        self.file.write(json.dumps(record) + "\n")

    def close(self) -> None:
        self.file.close()
