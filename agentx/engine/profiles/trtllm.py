"""TensorRT-LLM: its default capacity scheduler policy GUARANTEED_NO_EVICT
(docs/source/performance/performance-tuning-guide/useful-runtime-flags.md, "Capacity Scheduler
Policy") and its own attention kernels, whose KV streaming efficiency is fitted apart."""

from agentx.engine.profiles.base import Admission, EngineProfile

PROFILE = EngineProfile(name="trtllm", title="TensorRT-LLM", admission=Admission.NO_EVICT, kv_kernels="trtllm")
