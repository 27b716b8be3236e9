"""The KV tiers under HBM: host DRAM, and an NVMe SSD tier under it; the store path that writes
computed blocks into them (issue #30; SPEC §6 "Offload tiers and the store path").

A tier holds block hashes in LRU order. A block whose write is still in flight is held but not
readable (vLLM's offloading manager looks a block up only once its store has completed). Writes
go through, as vLLM's offloading connector writes: a prefill chunk's computed blocks go HBM ->
DRAM over the host link (its GPU-to-host direction) and DRAM -> SSD at the drives' write
bandwidth. Each tier's writes queue on its own link, first come first served: a write starts when
the link is free (on the SSD also not before the blocks' DRAM copy is complete) and its blocks
become readable when it ends. Write time overlaps compute: no iteration waits for it. A prompt
that misses in HBM continues its lookup block by block in DRAM, then on the SSD; a DRAM block is
loaded over the host link, an SSD-only block is read into DRAM first (promoted: it enters DRAM as
the most recent block) and then loaded, at the sum of both transfer times (the engine core adds
them to the iteration that admits the prompt). A tier over its capacity drops its least recently
used blocks (the SSD holds what DRAM drops: it was written through).

The store-path rules (vLLM's AgentX work; `EngineConfig.store_rules`, on by default):
- only new blocks: the blocks a prompt found in a cache (HBM or a tier) are not written again;
- one copy: a block a tier holds already is not written to it again (one copy per shared prefix);
- no repeat: nor is one whose write to that tier is in flight.
Without them (a connector storing each request's whole prompt, as a plain write-through does),
every full block of every prompt is written to every tier at each turn; rewriting a block the
tier holds refreshes its LRU place, and one in flight stays unreadable until its first write ends.
What the rules kept from being written is counted per rule (`skipped`), in blocks.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from itertools import islice, takewhile

RULES = ("not_new", "stored", "in_flight")  # why the store path did not write a block


@dataclass
class TierCounters:
    written_blocks: int = 0  # blocks written into the tier
    write_s: float = 0.0  # modeled seconds its write link was busy
    read_blocks: int = 0  # blocks read out of it (loads to HBM; for the SSD, promotions to DRAM)
    skipped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))


class Tier:
    """One tier's blocks (hash -> None, LRU first), its writes in flight, and its write link."""

    def __init__(self, name: str, capacity_blocks: int, write_s_per_block: float = 0.0,
                 read_s_per_block: float = 0.0):
        self.name, self.capacity = name, capacity_blocks
        self.write_s_per_block, self.read_s_per_block = write_s_per_block, read_s_per_block
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.pending: dict[int, float] = {}  # held but in flight: hash -> when its write ends
        self.writes: deque[tuple[float, list[int]]] = deque()  # (end, hashes) in link order (ends ascend)
        self.link_free_at = 0.0
        self.counters = TierCounters()

    def __len__(self) -> int:
        return len(self.blocks)

    def readable(self, h: int) -> bool:
        return h in self.blocks and h not in self.pending

    def settle(self, now: float) -> None:
        """Writes that ended by `now`: their blocks become readable."""
        writes, pending = self.writes, self.pending
        while writes and writes[0][0] <= now:
            end, hashes = writes.popleft()
            for h in hashes:
                if pending.get(h) == end:
                    del pending[h]

    def write(self, hashes: list[int], after: float) -> float:
        """Queue a write of `hashes` that cannot start before `after`; the time it ends."""
        n = len(hashes)
        if not n:
            return after
        start = max(after, self.link_free_at)
        seconds = n * self.write_s_per_block
        end = self.link_free_at = start + seconds
        self.counters.written_blocks += n
        self.counters.write_s += seconds
        blocks, pending = self.blocks, self.pending
        self.touch(hashes)
        fresh = list(dict.fromkeys(h for h in hashes if h not in blocks))  # a rewrite keeps the copy it has
        blocks.update(dict.fromkeys(fresh))
        if seconds > 0 and fresh:
            pending.update(dict.fromkeys(fresh, end))
            self.writes.append((end, fresh))
        self._bound()
        return end

    def touch(self, hashes: list[int]) -> None:
        """The held ones of these blocks become the most recently used, in this order."""
        blocks = self.blocks
        deque(map(blocks.move_to_end, [h for h in hashes if h in blocks]), maxlen=0)

    def insert(self, hashes: list[int]) -> None:
        """Blocks placed readable at once (promoted from the tier below)."""
        self.touch(hashes)
        self.blocks.update(dict.fromkeys(hashes))
        for h in hashes:
            self.pending.pop(h, None)
        self._bound()

    def _bound(self) -> None:
        blocks, pending = self.blocks, self.pending
        while len(blocks) > self.capacity:
            h, _ = blocks.popitem(last=False)
            pending.pop(h, None)


class Tiers:
    """DRAM (when `dram_blocks`) and the SSD under it (when `ssd_blocks`), with the store path.
    Transfer times per block default to 0 (blocks readable as soon as written: the clock-agnostic
    cache of the unit tests); the engine core gives them from the presets and sets `now`."""

    def __init__(self, dram_blocks: int = 0, ssd_blocks: int = 0, *, host_s_per_block: float = 0.0,
                 ssd_write_s_per_block: float = 0.0, ssd_read_s_per_block: float = 0.0, rules: bool = True):
        self.dram = Tier("DRAM", dram_blocks, host_s_per_block, host_s_per_block)
        self.ssd = Tier("SSD", ssd_blocks, ssd_write_s_per_block, ssd_read_s_per_block) if ssd_blocks else None
        self.rules = rules
        self.now = 0.0

    def __bool__(self) -> bool:
        return self.dram.capacity > 0

    @property
    def all(self) -> tuple[Tier, ...]:
        return (self.dram, self.ssd) if self.ssd else (self.dram,)

    def clock(self, now: float) -> None:
        """The modeled time (the engine core's, at each iteration's end)."""
        self.now = now
        for tier in self.all:
            tier.settle(now)

    def match(self, hashes: list[int], start: int) -> int:
        """How many of `hashes[start:]` a tier can give, each readable in DRAM or on the SSD, up
        to the first that is in neither."""
        dram, ssd, n = self.dram, self.ssd, 0
        if ssd is None and not dram.pending:  # the common case: one walk in C
            return sum(1 for _ in takewhile(dram.blocks.__contains__, islice(hashes, start, None)))
        for h in islice(hashes, start, None):
            if not (dram.readable(h) or (ssd is not None and ssd.readable(h))):
                break
            n += 1
        return n

    def load(self, hashes: list[int]) -> int:
        """The blocks a prompt takes from the tiers (a match's continuation): DRAM's are touched,
        the SSD-only ones read and promoted into DRAM. Returns how many came from the SSD."""
        dram, ssd = self.dram, self.ssd
        if ssd is None:
            dram.touch(hashes)
            dram.counters.read_blocks += len(hashes)
            return 0
        from_ssd = [h for h in hashes if not dram.readable(h)]
        ssd.touch(from_ssd)
        ssd.counters.read_blocks += len(from_ssd)
        dram.touch(hashes)
        dram.insert(from_ssd)
        dram.counters.read_blocks += len(hashes)
        return len(from_ssd)

    def read_s(self, ssd_blocks: int) -> float:
        """Seconds to read `ssd_blocks` blocks off the SSD into DRAM (the host link's load is the
        core's, as for any DRAM hit)."""
        return ssd_blocks * self.ssd.read_s_per_block if self.ssd and ssd_blocks else 0.0

    def store(self, hashes: list[int], new_from: int) -> int:
        """Write a committed chunk's blocks through (`hashes[new_from:]` computed by it, the rest
        found in a cache); returns the blocks written to DRAM."""
        if not self or not hashes:
            return 0
        before = self.dram.counters.written_blocks
        dram_end = self._store_to(self.dram, hashes, new_from, self.now)
        if self.ssd is not None:
            self._store_to(self.ssd, hashes, new_from, dram_end)
        return self.dram.counters.written_blocks - before

    def _store_to(self, tier: Tier, hashes: list[int], new_from: int, after: float) -> float:
        """The chunk's blocks the tier holds become its most recent (as vLLM's connector touches
        a request's blocks when it stores); then the write."""
        if not self.rules:
            return tier.write(hashes, after)
        tier.touch(hashes)
        skipped = tier.counters.skipped
        skipped["not_new"] += min(new_from, len(hashes))
        todo, held, pending = [], tier.blocks, tier.pending
        for h in islice(hashes, new_from, None):
            if h not in held:
                todo.append(h)
            elif h in pending:
                skipped["in_flight"] += 1
            else:
                skipped["stored"] += 1
        return tier.write(list(dict.fromkeys(todo)), after)


def build_tiers(cfg, roofline) -> Tiers:
    """The tiers of one engine core (an `EngineConfig` and its `Roofline`): DRAM of
    `cpu_offload_gb`, behind the host link; the SSD of `ssd_drives` drives of the `ssd_drive`
    preset, its capacity and bandwidths theirs summed (the drives striped, as a RAID 0 volume).
    A block moves all its TP shards' KV (as the host-link load of a DRAM hit does)."""
    from agentx.engine.presets import ssd_drive

    bs = cfg.block_size
    block_bytes = bs * roofline.kv_bytes_per_token * cfg.gpus
    ssd = ssd_drive(cfg.ssd_drive) if cfg.ssd_drives else None
    return Tiers(roofline.cpu_capacity_tokens // bs,
                 int(cfg.ssd_drives * ssd.capacity_bytes // block_bytes) if ssd else 0,
                 host_s_per_block=block_bytes / roofline.host_bw,
                 ssd_write_s_per_block=block_bytes / (cfg.ssd_drives * ssd.write_bw) if ssd else 0.0,
                 ssd_read_s_per_block=block_bytes / (cfg.ssd_drives * ssd.read_bw) if ssd else 0.0,
                 rules=cfg.store_rules)
