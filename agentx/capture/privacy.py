"""What the capture store never keeps: credentials in headers, body fields and query strings.

Deny-lists are shell-style patterns matched against lower-cased names. Header defaults cover
`Authorization`, `x-api-key`, cookies and anything named like a token, secret, password, key or
credential; body-field defaults cover the same words for JSON keys at any depth, except
"token", which would take `max_tokens` with it.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

DENY_HEADERS = ("authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "set-cookie",
                "*token*", "*secret*", "*password*", "*credential*", "*-key", "*_key", "*apikey*")
DENY_FIELDS = ("api_key", "apikey", "api-key", "authorization", "access_token", "refresh_token", "id_token",
               "*secret*", "*password*", "*credential*", "private_key")


def _matcher(patterns: tuple[str, ...]):
    regex = re.compile("|".join(fnmatch.translate(p.lower()) for p in patterns)) if patterns else None
    return (lambda name: regex.match(name.lower()) is not None) if regex else (lambda name: False)


@dataclass(frozen=True)
class Privacy:
    deny_headers: tuple[str, ...] = DENY_HEADERS
    deny_fields: tuple[str, ...] = DENY_FIELDS

    def __post_init__(self):
        object.__setattr__(self, "_header", _matcher(self.deny_headers))
        object.__setattr__(self, "_field", _matcher(self.deny_fields))

    def headers(self, headers) -> dict[str, str]:
        """The headers that may be stored (names lower-cased)."""
        return {k.lower(): v for k, v in headers.items() if not self._header(k)}

    def query(self, query: str) -> str:
        pairs = parse_qsl(query, keep_blank_values=True)
        return urlencode([(k, v) for k, v in pairs if not (self._field(k) or self._header(k))])

    def scrub(self, value):
        """A JSON value without the denied keys, at any depth."""
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items() if not self._field(k)}
        if isinstance(value, list):
            return [self.scrub(v) for v in value]
        return value

    def body(self, raw: bytes) -> tuple[bytes, dict | None]:
        """(the body to store, the parsed and scrubbed JSON object or None when it is not JSON).

        A body that is not JSON (or nests deeper than the parser goes) cannot be scrubbed, so
        none of it is stored: it could hold a credential the deny-list would have dropped."""
        try:
            obj = self.scrub(json.loads(raw))
        except (ValueError, RecursionError):
            return b"", None
        try:
            stored = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
        except UnicodeEncodeError:  # lone surrogates (JSON allows them escaped): keep them escaped
            stored = json.dumps(obj, separators=(",", ":")).encode()
        return stored, obj if isinstance(obj, dict) else None
