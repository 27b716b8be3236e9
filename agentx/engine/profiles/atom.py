"""ATOM (AMD's engine on ROCm: a vLLM-like scheduler)."""

from agentx.engine.profiles.base import Admission, EngineProfile

PROFILE = EngineProfile(
    name="atom", title="ATOM", admission=Admission.PREEMPT, max_num_seqs=512, max_num_batched_tokens=16384,
    defaults_source="ROCm/ATOM atom/model_engine/arg_utils.py EngineArgs (--max-num-seqs 512, "
                    "--max-num-batched-tokens 16384; commit 0027562b) and atom/config.py Config")
