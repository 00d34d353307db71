"""How the self-checks time a learner's code against a reference: interleaved runs, the best of each, and a word when
the runs were erratic (a busy machine), so that a neighbour on shared cores does not fail a right answer silently."""

from __future__ import annotations

from collections.abc import Callable

from ..measure.timing import interleaved_best

ERRATIC = 1.5  # a callable's slowest run over its fastest: past this, something else was using the machine


def best_of(runs: dict[str, Callable[[], object]], repeat: int) -> tuple[dict[str, float], str]:
    """(the fastest of ``repeat`` interleaved runs of each callable, in seconds; a sentence to add to a failing
    check's hint when the runs were erratic, else ""): `interleaved_best`, the course's way of timing a check."""
    best, times = interleaved_best(runs, repeat)
    return best, busy_note(times)


def busy_note(times: dict[str, list[float]]) -> str:
    """ " Rerun ..." when some callable's runs spread past `ERRATIC` (its slowest over its fastest), else ""."""
    spread = max(max(values) / max(min(values), 1e-12) for values in times.values() if values)
    if spread <= ERRATIC:
        return ""
    return (
        f" The same code ran up to {spread:.1f}x slower in one run than in another: the machine was busy (another "
        "notebook or program on its cores?). Rerun the check when it is quiet."
    )
