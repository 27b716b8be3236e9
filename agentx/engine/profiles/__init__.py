"""The engines the simulator models (`--engine`), one EngineProfile each in a file of its own, as
vidur keeps one scheduler class per engine: what the scheduler and the timing model read of an
engine live there, so no module compares engine names.

Adding an engine: its file here and its line below (a member and a registry entry); its fitted
constants come from its rows in calibration.toml (`tools/fit_profiles.py --write`)."""

from __future__ import annotations

from enum import StrEnum

from agentx.engine.profiles import atom, sglang, trtllm, vllm
from agentx.engine.profiles.base import Admission, EngineProfile
from agentx.errors import AgentxError

__all__ = ["Admission", "EngineName", "EngineProfile", "ENGINES", "PROFILES", "engine_profile"]


class EngineName(StrEnum):
    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"
    ATOM = "atom"


PROFILES: dict[EngineName, EngineProfile] = {
    EngineName(p.name): p for p in (vllm.PROFILE, sglang.PROFILE, trtllm.PROFILE, atom.PROFILE)}
ENGINES: tuple[str, ...] = tuple(e.value for e in PROFILES)  # --engine's choices, the default first
DEFAULT = PROFILES[EngineName.VLLM]


def engine_profile(name: str) -> EngineProfile:
    """The profile of an engine name (an EngineName or its value)."""
    try:
        return PROFILES[EngineName(name)]
    except ValueError:
        raise AgentxError(f"unknown engine {name!r}; known: {', '.join(ENGINES)}", "engine") from None
