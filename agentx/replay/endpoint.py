"""How the client reaches a real endpoint: its base URL as users write it (with or without
`/v1`, as vLLM and OpenAI document it), credentials (`--api-key`, or `OPENAI_API_KEY` as the
OpenAI clients read it) and extra headers (`--header 'Name: value'`).

Credentials go on every request agentx sends to the target (model discovery, identity, the
`/metrics` scrape, the cache probe, the replay) and are never written: `run.json` records the
header names only, and the command line it records has their values replaced."""

from __future__ import annotations

import os
import re

from agentx.errors import AgentxError

REDACTED = "<redacted>"
SECRET_OPTIONS = ("--api-key", "--header", "-H")
_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110)


def base_url(url: str) -> str:
    """The server's base URL: a trailing `/v1` (how OpenAI-compatible servers are documented)
    is the API's prefix, which agentx adds itself."""
    url = url.strip().rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def parse_header(text: str) -> tuple[str, str]:
    """`Name: value` (curl's form) -> (name, value)."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not _NAME.match(name) or any(c in value for c in "\r\n"):
        raise AgentxError(f"want 'Name: value', got {text!r}", "header")
    return name, value


def auth_headers(api_key: str | None, headers: list[str] | None) -> tuple[tuple[str, str], ...]:
    """The headers of every request: `Authorization: Bearer KEY` from `--api-key` (or
    OPENAI_API_KEY when neither it nor an Authorization header is given), then each
    `--header`."""
    extra = [parse_header(h) for h in headers or []]
    if api_key is None and not any(n.lower() == "authorization" for n, _ in extra):
        api_key = os.environ.get("OPENAI_API_KEY") or None
    return ((("Authorization", f"Bearer {api_key}"),) if api_key else ()) + tuple(extra)


def redact_argv(argv: list[str]) -> list[str]:
    """A command line with the values of credential options replaced (`--api-key X`,
    `--api-key=X`, `--header 'Authorization: X'` keeps the header's name)."""
    out, hide = [], None
    for arg in argv:
        if hide is not None:
            out.append(_redacted(hide, arg))
            hide = None
            continue
        option, eq, value = arg.partition("=")
        if option in SECRET_OPTIONS and eq:
            out.append(f"{option}={_redacted(option, value)}")
        else:
            out.append(arg)
            hide = arg if arg in SECRET_OPTIONS else None
    return out


def _redacted(option: str, value: str) -> str:
    if option == "--api-key":
        return REDACTED
    name = value.partition(":")[0].strip()
    return f"{name}: {REDACTED}"
