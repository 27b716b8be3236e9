"""The simulated inference engine: a clock-agnostic core (scheduler, KV cache, timing model)
and the OpenAI-compatible HTTP server that drives it in wall-clock time."""
