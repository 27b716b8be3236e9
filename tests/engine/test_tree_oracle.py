"""The tree-wide oracle (`--hints oracle`'s `next_use`, SPEC §2 and §6): when each block of a
prompt is next used anywhere in its session tree, and Retain's Belady order over it."""

import numpy as np

from agentx.engine.eviction import eviction_policy
from agentx.engine.hints import Hints
from agentx.replay.hints import next_use
from agentx.traces.graph import build_graph
from agentx.traces.model import Request, Stream, ids_array, make_session

BLOCK = 64  # tokens per hash id


def _req(t: float, api: float, ids: list[int]) -> Request:
    return Request(t=t, model="m", isl=len(ids) * BLOCK, osl=10, hash_ids=ids_array(ids), api_time=api,
                   stop="tool_use")


def _session():
    """main: 3 turns growing one chain; after the first, a subagent whose prompt starts with the
    first 2 of its 4 blocks and comes 0.5 s after it ends; the parent's next turn comes after the
    subagent's 20 s (the join)."""
    main = [_req(0.0, 2.0, [1, 2, 3, 4]), _req(30.0, 2.0, [1, 2, 3, 4, 5, 6]), _req(40.0, 2.0, [1, 2, 3, 4, 5, 6, 7])]
    sub = Stream(kind="subagent", requests=(_req(2.5, 20.0, [1, 2, 90, 91]),), spawn=2.3, agent_id="a1")
    return make_session(main, [sub], id="s", block_size=BLOCK, hash_id_scope="local")


def test_next_use_covers_the_tree_not_only_the_stream():
    graph = build_graph(_session())
    first = next(n.index for n in graph.nodes if n.stream == 0 and n.position == 0)
    # the stream's next turn reuses all 4 blocks 28 s after the end; the subagent the first 2 after 0.5 s
    assert next_use(graph, first, BLOCK) == [[4 * BLOCK, 28.0], [2 * BLOCK, 0.5]]
    last = next(n.index for n in graph.nodes if n.stream == 0 and n.position == 2)
    assert next_use(graph, last, BLOCK) == []  # nothing of the tree comes after it
    child = next(n.index for n in graph.nodes if n.stream == 1)
    # the subagent's first 2 blocks: the parent's turn at 30 s, 7.5 s after the child ends at 22.5 s
    assert next_use(graph, child, BLOCK) == [[2 * BLOCK, 7.5]]


def test_retain_gives_up_unused_blocks_first_then_the_one_needed_last():
    bs = 16
    policy = eviction_policy("retain", 32, bs)
    blocks = np.arange(8, dtype=np.int64)[::-1]  # a prompt of 8 blocks, freed tail first
    positions = np.arange(7, -1, -1)
    hints = Hints(next_use=[(4 * bs, 100.0), (2 * bs, 1.0)])  # blocks 0-1 used in 1 s, 2-3 in 100 s, 4-7 never
    policy.append(blocks, hints, positions, now=10.0)
    policy.append(np.array([20, 21], dtype=np.int64))  # another request's blocks, no hints: plain LRU
    order = policy.pop(len(policy)).tolist()
    assert order[:4] == [7, 6, 5, 4]  # never used again in the tree: before anything else
    assert order[4:6] == [20, 21]  # then the normal LRU order
    assert sorted(order[6:8]) == [2, 3] and sorted(order[8:]) == [0, 1]  # needed at 110 s before 11 s
