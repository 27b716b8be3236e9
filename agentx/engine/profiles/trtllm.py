"""TensorRT-LLM: its default capacity scheduler policy GUARANTEED_NO_EVICT
(docs/source/performance/performance-tuning-guide/useful-runtime-flags.md, "Capacity Scheduler
Policy") and its own attention kernels, whose KV streaming efficiency is fitted apart."""

from agentx.engine.profiles.base import Admission, EngineProfile

PROFILE = EngineProfile(
    name="trtllm", title="TensorRT-LLM", admission=Admission.NO_EVICT, kv_kernels="trtllm",
    max_num_seqs=2048, max_num_batched_tokens=8192,
    defaults_source="tensorrt_llm/builder.py BuildConfig (max_batch_size 2,048, max_num_tokens 8,192; commit "
                    "008b2b8d), the defaults of trtllm-serve's --max_batch_size and --max_num_tokens")
