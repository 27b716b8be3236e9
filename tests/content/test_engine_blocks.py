"""Engine block hashes from hash ids agree with hashing the rendered tokens (equal iff equal)."""

import pytest

from agentx.content.engine_blocks import EngineBlocks
from agentx.common import shared_prefix
from agentx.content.tokens import ContentConfig, PromptBuilder
from agentx.engine.kvcache import block_hashes
from agentx.traces.load import load_sessions
from tests.conftest import WEKA


@pytest.fixture(scope="module")
def sessions():
    return load_sessions([WEKA], None)


@pytest.mark.parametrize("token_scale,block_size", [(1, 16), (1, 48), (64, 16), (3, 16)])
def test_block_hashes_without_tokens_match_the_tokens_equalities(sessions, token_scale, block_size):
    prompts = PromptBuilder(ContentConfig(seed=2, token_scale=token_scale))
    blocks = EngineBlocks(prompts, block_size)
    real_to_virtual, virtual_to_real, n = {}, {}, 0
    for tree, s in enumerate(sessions[:4]):
        for marker in (11 + tree, 99):  # two trees of one session share nothing but the marker's absence
            prev_ids, prev = None, None
            for node, req in enumerate(list(s.main.requests)[:25]):
                key = 1_000_000 * tree + node + marker * 7
                tokens = prompts.prompt(s, req, key, marker)
                real = block_hashes(tokens.tolist(), block_size)
                k = shared_prefix(prev_ids, req.hash_ids) if prev_ids is not None else 0
                virtual = blocks.hashes(s, req, key, marker, prev, k)
                assert virtual == blocks.hashes(s, req, key, marker)  # reuse changes nothing
                assert len(virtual) == len(real) == len(tokens) // block_size
                for r, v in zip(real, virtual):
                    assert real_to_virtual.setdefault(r, v) == v and virtual_to_real.setdefault(v, r) == r
                n += len(real)
                prev_ids, prev = req.hash_ids, virtual
    shared = n - len(real_to_virtual)
    assert n > 1000 and shared > n // 3  # many blocks recur (the prefix reuse), all consistently
