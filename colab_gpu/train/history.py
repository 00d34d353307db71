"""What training returns: one epoch's statistics and the per-epoch history of `fit` (lesson 03)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EpochStats:
    """One pass over a loader: mean loss, accuracy, samples and seconds. Taught in lesson 03."""

    loss: float
    accuracy: float
    samples: int
    seconds: float

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class History:
    """Per-epoch metrics returned by `fit`; ``history.rows`` is a list of plain dicts. Taught in lesson 03."""

    rows: list[dict] = field(default_factory=list)

    def column(self, name: str) -> list[float]:
        return [row[name] for row in self.rows]

    @property
    def last(self) -> dict:
        if not self.rows:
            raise ValueError("The history is empty: fit ran no epoch.")
        return self.rows[-1]

    def __len__(self) -> int:
        return len(self.rows)
