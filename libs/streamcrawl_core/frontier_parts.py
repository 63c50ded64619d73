"""The parts of the Mercator frontier (streamcrawl_core.frontier): its public types and configuration,
the per-host record, and the two selectors that decide which ready host goes next: stride scheduling
between discovery and refresh, and a smooth weighted round robin over priority levels. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from streamcrawl_core.politeness import HostOverride, PolitenessConfig

__all__ = ["Entry", "FrontierConfig", "FrontierItem", "HostSnapshot", "Kind"]

Kind = Literal["discovery", "refresh"]
KINDS: tuple[Kind, Kind] = ("discovery", "refresh")
KIND_INDEX: dict[str, int] = {"discovery": 0, "refresh": 1}

IDLE, WAITING, READY, IN_FLIGHT = 0, 1, 2, 3
MAX_CYCLE = 10_000  # bound on sum(priority_weights): the selector's cycle length

# (priority, seq, url, enqueued_at, not_before): seq keeps FIFO order within a priority.
Entry = tuple[int, int, str, float, float]


class FrontierItem(NamedTuple):
    url: str
    host: str
    priority: int
    kind: Kind
    enqueued_at: float
    not_before: float


class HostSnapshot(NamedTuple):
    """Durable per-host politeness state (what goes into the HostRecord)."""

    host: str
    next_allowed_at: float
    backoff_level: int
    in_flight: bool
    queued: int


@dataclass(frozen=True)
class FrontierConfig:
    num_priorities: int = 10
    # Integer weight per level; None = F - p (level 0 gets F times the share of the last level).
    priority_weights: tuple[int, ...] | None = None
    discovery_share: float = 0.3
    politeness: PolitenessConfig = field(default_factory=PolitenessConfig)
    max_backoff_level: int = 32
    seed: int = 0  # seeds the back-off jitter, so runs are reproducible

    def __post_init__(self) -> None:
        if self.num_priorities < 1:
            raise ValueError("num_priorities must be >= 1")
        weights = self.weights()
        if (
            len(weights) != self.num_priorities
            or not all(isinstance(w, int) and w > 0 for w in weights)
            or sum(weights) > MAX_CYCLE
        ):
            raise ValueError(f"priority_weights must be num_priorities ints > 0 summing to <= {MAX_CYCLE}")
        if not 0.0 < self.discovery_share < 1.0:
            raise ValueError("discovery_share must be in (0, 1)")
        if self.max_backoff_level < 0:
            raise ValueError("max_backoff_level must be >= 0")

    def weights(self) -> tuple[int, ...]:
        if self.priority_weights is not None:
            return self.priority_weights
        return tuple(self.num_priorities - p for p in range(self.num_priorities))


class HostRecord:
    __slots__ = ("backoff_level", "crawl_delay", "delayed", "epoch", "inflight", "name", "next_allowed",
                 "override", "queues", "slot", "state")

    def __init__(self, name: str) -> None:
        self.name = name
        self.queues: tuple[list[Entry], list[Entry]] = ([], [])
        self.delayed = 0  # URLs of this host still waiting for their not_before
        self.next_allowed = 0.0
        self.backoff_level = 0
        self.crawl_delay: float | None = None
        self.override: HostOverride | None = None
        self.state = IDLE
        self.epoch = 0
        # Per kind, the priority bucket holding this host's live entry, -1 if none. A 2-list
        # rather than a list of pairs: this is on the hot path of every next().
        self.slot = [-1, -1]
        self.inflight: tuple[int, Entry] | None = None


class KindSplit:
    """Stride scheduling between the two kinds, for when both have a READY host. Each pick
    advances the chosen kind's pass by 1/share; a kind re-enters at the virtual time (the pass
    of the last pick), so time spent alone or absent banks no credit."""

    __slots__ = ("passes", "strides", "vtime")

    def __init__(self, discovery_share: float) -> None:
        self.strides = (1.0 / discovery_share, 1.0 / (1.0 - discovery_share))
        self.passes = [0.0, 0.0]
        self.vtime = 0.0

    def pick(self) -> int:
        passes, v = self.passes, self.vtime
        a = passes[0] if passes[0] > v else v
        b = passes[1] if passes[1] > v else v
        k, p = (0, a) if a <= b else (1, b)  # ties go to discovery, deterministically
        self.vtime = p
        passes[k] = p + self.strides[k]
        return k


class PriorityCycle:
    """Smooth weighted round robin over priority levels: a fixed cycle in which level ``p``
    appears ``weights[p]`` times, evenly spread (nginx's SWRR order). A cursor walks the cycle and
    skips empty levels, so among the non-empty levels each gets a share proportional to its
    weight, every one is served at least once per cycle (no starvation), and an empty level
    banks no credit. Usually one step per pick -- cheaper than a scan of all F levels."""

    __slots__ = ("cursor", "order")

    def __init__(self, weights: tuple[int, ...]) -> None:
        total, current, order = sum(weights), [0] * len(weights), []
        for _ in range(total):
            for i, w in enumerate(weights):
                current[i] += w
            best = max(range(len(weights)), key=current.__getitem__)  # ties: lowest level
            current[best] -= total
            order.append(best)
        self.order = order
        self.cursor = 0

    def pick(self, live: list[int]) -> int:
        """Next non-empty level; caller guarantees one exists (so the walk ends in one cycle)."""
        order, c, n = self.order, self.cursor, len(self.order)
        while True:
            p = order[c]
            c = c + 1 if c + 1 < n else 0
            if live[p]:
                self.cursor = c
                return p


