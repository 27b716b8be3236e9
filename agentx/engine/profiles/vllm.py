"""vLLM (v1 scheduler: chunked prefill, running requests first, preemption by recompute)."""

from agentx.engine.profiles.base import Admission, EngineProfile

PROFILE = EngineProfile(name="vllm", title="vLLM", admission=Admission.PREEMPT,
                        releases=("0.10",))  # the 0.10.1 / 0.10.2 images of InferenceX's Llama 70B rows
