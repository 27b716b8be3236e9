"""SGLang (admits on the prompt's blocks and retracts running requests when the KV cache runs short)."""

from agentx.engine.profiles.base import Admission, EngineProfile

PROFILE = EngineProfile(name="sglang", title="SGLang", admission=Admission.PREEMPT)
