"""ATOM (AMD's engine on ROCm: a vLLM-like scheduler)."""

from agentx.engine.profiles.base import Admission, EngineProfile

# batch defaults: 256 / 8,192, vLLM's (ATOM's own not found)
PROFILE = EngineProfile(name="atom", title="ATOM", admission=Admission.PREEMPT)
