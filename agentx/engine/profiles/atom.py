"""ATOM (AMD's engine on ROCm: a vLLM-like scheduler)."""

from agentx.engine.profiles.base import Admission, EngineProfile

PROFILE = EngineProfile(name="atom", title="ATOM", admission=Admission.PREEMPT)
