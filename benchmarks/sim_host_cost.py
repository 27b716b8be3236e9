"""Host cost per request of `agentx sim serve`: the CPU the sim spends on a prompt before the
engine can queue it (read as JSON with the vocabulary check, `api.parse_completion`; block hashes
and the sequence, `EngineCore.new_sequence`), at 10k, 50k and 100k tokens, best of 20. At
`--speed S` each wall millisecond of it would be S modeled milliseconds; since issue #24 the sim
takes the head's arrival as the modeled one and holds the engine while it parses, so this cost
shows only as the sim's lag of other requests' tokens (SPEC section 6, "Arrival order"), and the
rest of the host error (client, loop wake-ups) is measured per run (`bench` against agentx-sim
prints it). Prints a table and the load average.

    python benchmarks/sim_host_cost.py
"""

from __future__ import annotations

import json
import os
import random
import time

from agentx.engine import api
from agentx.engine.config import EngineConfig
from agentx.engine.core import EngineCore


def best_ms(fn, repeat: int = 20) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1000


def main() -> None:
    core = EngineCore(EngineConfig())
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'prompt tokens':>13} {'JSON + vocab ms':>16} {'sequence ms':>12} {'total ms':>9} "
          f"{'modeled ms at speed 4':>22}")
    for n in (10_000, 50_000, 100_000):
        prompt = [random.randrange(core.vocab) for _ in range(n)]
        body = json.dumps({"prompt": prompt, "max_tokens": 100, "stream": True}).encode()
        parse = best_ms(lambda: api.parse_completion(body, core.vocab))
        seq = best_ms(lambda: core.new_sequence("x", prompt, 100))  # block hashes, digest, answer length
        total = parse + seq
        print(f"{n:>13,} {parse:16.2f} {seq:12.2f} {total:9.2f} {total * 4:22.1f}")


if __name__ == "__main__":
    main()
