"""SGLang (admits on the prompt's blocks and retracts running requests when the KV cache runs short)."""

from agentx.engine.profiles.base import Admission, EngineProfile

PROFILE = EngineProfile(
    name="sglang", title="SGLang", admission=Admission.PREEMPT,
    max_num_seqs=2048, max_num_batched_tokens=16384, large_gib=160, small_tokens=8192,
    defaults_source="python/sglang/srt/server_args.py: --chunked-prefill-size 8,192 on a GPU under 160 GiB (H100, "
                    "H200), 16,384 at or above (B200, MI300X); --max-running-requests unset: min(KV tokens / 2, the "
                    "request pool, at least 2,048: model_runner.py), modeled as 2,048 (the KV cache binds first)")
