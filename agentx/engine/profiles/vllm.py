"""vLLM (v1 scheduler: chunked prefill, running requests first, preemption by recompute)."""

from agentx.engine.profiles.base import Admission, EngineProfile

PROFILE = EngineProfile(
    name="vllm", title="vLLM", admission=Admission.PREEMPT,
    releases=("0.10",),  # the 0.10.1 / 0.10.2 images of InferenceX's Llama 70B rows
    max_num_seqs=1024, max_num_batched_tokens=8192, large_gib=70, small_seqs=256, small_tokens=2048,
    defaults_source="vllm/engine/arg_utils.py get_batch_defaults (the OpenAI API server's; vLLM PR #17885): 1,024 "
                    "sequences and 8,192 tokens on a GPU of 70 GiB or more (not A100), else 256 and 2,048")
