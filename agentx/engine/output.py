"""What the simulated model answers: a deterministic function of the prompt (greedy, so a
corrupted cache shows as a changed answer), ending at a natural length unless told otherwise."""

# Without ignore_eos the simulated model ends its answer at a length drawn per prompt from a
# log-normal fitted to the AgentX corpus's output lengths (median 441 tokens, sigma 1.32).
NATURAL_MEDIAN, NATURAL_SIGMA = 441, 1.32
CORRUPTION = 0x5A5A_5A5A  # what a corrupted cached block changes in the digest its reader sees


def prompt_digest(prompt: list[int], hashes: list[int], block_size: int) -> int:
    """A deterministic digest of a whole prompt (its last full block's chained hash and the rest)."""
    return hash((hashes[-1] if hashes else 0, tuple(prompt[len(hashes) * block_size:])))


def output_token(digest: int, position: int, vocab: int) -> int:
    """The simulated model's greedy answer: token `position` is a function of the prompt only."""
    return hash((digest, position)) % vocab


class EvalAnswer:
    """What the simulated model answers to a bundled eval problem (`sim serve --answers eval`):
    `The answer is N.`, right while its prompt reads as it did cold (`digest`, before a corrupt
    cache hit or a `wrong` fault changed it), its final number off otherwise."""

    def __init__(self, value: int, digest: int):
        self.value, self.digest = value, digest

    def pieces(self, digest: int) -> list[str]:
        value = self.value if digest == self.digest else self.value + 1 + digest % 7
        return [" The", " answer", " is", f" {value}", "."]
