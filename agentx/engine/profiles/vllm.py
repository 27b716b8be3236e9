"""vLLM (v1 scheduler: chunked prefill, running requests first, preemption by recompute)."""

from agentx.engine.profiles.base import Admission, EngineProfile

PROFILE = EngineProfile(name="vllm", title="vLLM", admission=Admission.PREEMPT)
