"""A run's verdict in one line (SPEC section 2, "Printed summary"): `valid`, or `NOT VALID:` the
first failed rule's reason, how many more failed (their names; every reason is in result.json's
`validity.reasons`) and what to do about the first. The rules are checked in the order of
`validity.validity`, which puts what the host did (the client's lateness, the host error) before
what it caused (the twin's moved schedule), so the first reason is the cause to act on."""

from __future__ import annotations

# rule -> what to do when it is the first failed one (agentx-sim targets: each wall ms of host
# work is S modeled ms at --speed S)
REMEDIES = {
    "failed": "the errors by category are in the summary, each request's in records.jsonl",
    "context_overflow": "--max-context leaves out the sessions longer than the server's context",
    "finished": "`agentx report RUN` summarizes what the killed run kept",
    "succeeded": "check the server's answers (records.jsonl `error`)",
    "cache_probe": "the server's prefix cache returned other answers warm than cold (`agentx probe cache`)",
    "cancelled": "--drain keeps the load on until every profiled request has ended",
    "client": "other processes held this host's CPU: run again on a quiet machine",
    "host_error_ttft": "a lower --speed shrinks it (each wall ms of host work is S modeled ms)",
    "host_error_itl": "a lower --speed shrinks it (each wall ms of host work is S modeled ms)",
    "sim_lag_ttft": "a lower --speed, or a quieter machine, gives the sim time to write on time",
    "sim_lag_itl": "a lower --speed, or a quieter machine, gives the sim time to write on time",
    "twin_ttft": "the virtual twin's figures stand for this plan (no host load moves them); run again on a "
                 "quiet machine for a valid run over HTTP",
    "twin_itl": "the virtual twin's figures stand for this plan (no host load moves them); run again on a "
                "quiet machine for a valid run over HTTP",
    "twin_window": "the virtual twin's figures stand for this plan; run again on a quiet machine",
    "spread": "a longer --duration or more lanes holds more session trees",
}


def failed_rules(result: dict) -> list[dict]:
    """The rules the run failed, in the order they were checked."""
    v = result.get("validity") or {}
    return [r for r in v.get("rules") or [] if not r.get("ok")]


def verdict(result: dict, remedy: str | None = None) -> str:
    """`valid`, or `NOT VALID: <first reason> [(+N more: names)]; <what to do>`; `remedy` replaces
    the first rule's own advice (a command that knows better, e.g. the speed to use)."""
    v = result.get("validity") or {}
    if v.get("valid"):
        return "valid"
    failed = failed_rules(result)
    if not failed:  # a result stored without its rules: the reasons alone
        return "NOT VALID: " + ("; ".join(v.get("reasons") or []) or "no reason recorded")
    first, rest = failed[0], failed[1:]
    line = f"NOT VALID: {first.get('reason') or first['rule']}"
    if rest:
        line += f" (and {len(rest)} more: {', '.join(r['rule'] for r in rest)})"
    advice = remedy or REMEDIES.get(first["rule"])
    return line + (f"; {advice}" if advice else "")


def short_verdict(result: dict) -> str:
    """`yes`, or `no: rule, rule` (a table's cell)."""
    v = result.get("validity") or {}
    if v.get("valid"):
        return "yes"
    names = [r["rule"] for r in failed_rules(result)]
    return "no" + (f": {', '.join(names)}" if names else "")
