"""`bench --ray ADDRESS`: the client workers (`workers.py`) as Ray actors, spread over the
cluster's nodes, one CPU each. Ray only places and starts them: each actor connects back to the
driver over TCP (the driver listens on its Ray node's address) and runs the same worker loop as a
local worker process, so the start barrier, the clock offsets and the records streamed back are
the same on one host and many. `ray` is an optional extra."""

from __future__ import annotations

from agentx.errors import AgentxError
from agentx.replay.workers import WorkerSpec, run_worker


class RayLauncher:
    """`count` actors (None: one per CPU of the cluster) on the cluster at `address`."""

    def __init__(self, address: str, count: int | None):
        try:
            import ray
        except ImportError:
            raise AgentxError("--ray needs the ray extra: pip install -e '.[ray]'", "ray") from None
        self.ray = ray
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        self.host = _driver_node_ip(ray)
        self.count = count or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.actors: list = []
        self.done: list = []

    def launch(self, specs: list[WorkerSpec]) -> None:
        ray = self.ray
        actor = ray.remote(num_cpus=1)(_Worker)
        spread = {"scheduling_strategy": "SPREAD"}
        self.actors = [actor.options(**spread).remote() for _ in specs]
        self.done = [a.run.remote(spec) for a, spec in zip(self.actors, specs)]

    def failed(self) -> str | None:
        """An actor whose run ended before the run began (it could not start or connect)."""
        ready, _ = self.ray.wait(self.done, timeout=0, num_returns=len(self.done))
        for ref in ready:
            try:
                self.ray.get(ref)
                return "a Ray worker ended before the run"
            except Exception as e:  # what the actor raised
                return f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        return None

    def stop(self) -> None:
        ray = self.ray
        try:
            ray.wait(self.done, timeout=10.0, num_returns=len(self.done))
            for a in self.actors:
                ray.kill(a)
        finally:
            ray.shutdown()


class _Worker:
    def run(self, spec: WorkerSpec) -> dict:
        return run_worker(spec)


def _driver_node_ip(ray) -> str:
    """The address of the Ray node this driver is attached to (workers connect back to it)."""
    me = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node.get("NodeID") == me:
            return node["NodeManagerAddress"]
    return ray.util.get_node_ip_address()
