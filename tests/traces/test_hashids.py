import json

import numpy as np
from hypothesis import given, settings, strategies as st

from agentx.traces.hashids import ChainIdParser, IdWriter, StreamIdParser


def _parse(arrays, indent=None):
    parser = StreamIdParser("f")
    for a in arrays:
        parser.add(json.dumps(a, indent=indent).encode(), "r")
    return [x.tolist() for x in parser.finish()]


def test_extension_divergence_and_shrink():
    arrays = [[1, 2, 3], [1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [1, 2], [12, 3], [1, 23], [], [7]]
    assert _parse(arrays) == arrays
    assert _parse(arrays, indent=1) == arrays


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 30), max_size=12), max_size=8))
def test_parser_equals_plain_json(arrays):
    # build prefix-heavy sequences out of the random pieces
    seqs, cur = [], []
    for piece in arrays:
        cur = cur[: len(cur) // 2] + piece if piece and piece[0] % 3 == 0 else cur + piece
        seqs.append(list(cur))
    assert _parse(seqs) == seqs


def test_chain_parser_keeps_interleaved_chains_sharing():
    parser = ChainIdParser("f")
    seq = [[1, 2], [9], [1, 2, 3], [9, 8], [1, 2, 3, 4]]
    for a in seq:
        parser.add(json.dumps(a).encode(), "r")
    out = parser.finish()
    assert [x.tolist() for x in out] == seq
    assert np.shares_memory(out[0], out[4]) and np.shares_memory(out[1], out[3])


def test_writer_renders_views_and_big_ids():
    base = np.array([0, 9, 10, 99, 100, 2**33, 12345], dtype=np.uint64)
    write = IdWriter()
    for n in range(len(base) + 1):
        assert json.loads(bytes(write(base[:n]))) == base[:n].tolist()
    assert json.loads(bytes(write(base[2:5]))) == [10, 99, 100]
