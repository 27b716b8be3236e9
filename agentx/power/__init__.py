"""GPU power telemetry (SPEC §3, "Power"): readings from DCGM exporter, nvidia-smi, amd-smi or
rocm-smi, sampled every second over a run into `power.jsonl`, and the energy over the profiling
window that the result's joules per token and measured tok/s per MW come from."""
