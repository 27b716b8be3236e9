"""SGLang (admits on the prompt's blocks and retracts running requests when the KV cache runs short)."""

from agentx.engine.profiles.base import Admission, EngineProfile

# batch defaults as SGLang ships them when --max-running-requests and --chunked-prefill-size are unset:
# a request pool of min(max(KV tokens / context x 512, 2048), 4096) requests, so at least 2,048 running
# (model_runner / kv_cache_configurator; also capped by half the KV tokens, which the KV cache binds
# before), and a chunked-prefill budget of 8,192 tokens below 160 GiB of GPU memory, 16,384 at or above
# (server_args.py: "H100, H200 ... 8192; B200, MI300 ... 16384")
PROFILE = EngineProfile(name="sglang", title="SGLang", admission=Admission.PREEMPT, max_num_seqs=2048,
                        max_num_batched_tokens=8192, large_gpu_batched_tokens=16384)
