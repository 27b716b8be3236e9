"""`agentx sim serve`: the engine core behind an OpenAI-compatible HTTP server (aiohttp.web).

One asyncio task runs the engine (loop.py): it forms an iteration, sleeps until the iteration's
modeled end (scaled by `speed`), then wakes the handlers of the sequences that got a token.
Handlers (app.py) write every token they find as its own SSE event, in one write per wake-up
(reply.py), so a slow event loop coalesces writes instead of falling behind. Arrivals during an
iteration join the next one, as in a real engine. Requests are queued in the order their heads
arrived (their bodies are read and parsed concurrently; prompt.py), and a loop held off the CPU
catches up with its modeled schedule instead of stretching it (SPEC section 6, "Time" and
"Arrival order"). admin.py answers /version, /metrics and /v1/models; truth.py writes the
truth log.
"""
