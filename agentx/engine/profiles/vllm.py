"""vLLM (v1 scheduler: chunked prefill, running requests first, preemption by recompute)."""

from agentx.engine.profiles.base import Admission, EngineProfile

# batch defaults: 256 sequences and 8,192 tokens. vLLM's current releases ship 1,024 sequences on
# GPUs of 70 GiB or more (vllm/engine/arg_utils.py get_batch_defaults, `vllm serve`; 8,192 tokens
# there too): kept at 256 until the tables a larger cap moves (the agentic anchor's 384 lanes) are
# regenerated with it (issue #44, left to the lead)
PROFILE = EngineProfile(name="vllm", title="vLLM", admission=Admission.PREEMPT,
                        releases=("0.10",))  # the 0.10.1 / 0.10.2 images of InferenceX's Llama 70B rows
