"""TensorRT-LLM: its default capacity scheduler policy GUARANTEED_NO_EVICT
(docs/source/performance/performance-tuning-guide/useful-runtime-flags.md, "Capacity Scheduler
Policy") and its own attention kernels, whose KV streaming efficiency is fitted apart."""

from agentx.engine.profiles.base import Admission, EngineProfile

# batch defaults: 256 / 8,192, vLLM's (TensorRT-LLM's own max_batch_size / max_num_tokens defaults
# differ between releases and their docs; not settled here)
PROFILE = EngineProfile(name="trtllm", title="TensorRT-LLM", admission=Admission.NO_EVICT, kv_kernels="trtllm")
