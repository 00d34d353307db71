"""Steps the course profiled on a real GPU, kept as numbers (lesson 10): the regime rule replays them on any runtime.

A CPU runtime can only ever say "CPU-bound", so lesson 10's exercise lets a learner there name the regime of steps
recorded on the course's H100 runs, and the regime tests assert the rule's verdict on them. Each is a
`ProfileSummary` rebuilt from its record (`ProfileSummary.from_record`), with the GPU it ran on and where its
numbers come from (``recorded_steps.json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from .json_files import checked, parsed
from .profile_summary import ProfileSummary


@dataclass(frozen=True)
class RecordedStep:
    """One step profiled on a GPU: what it is, where it ran, where its numbers come from, and its summary."""

    name: str
    gpu: str
    source: str
    summary: ProfileSummary
    profiled: tuple[str, ...] = ()  # the record's figures read from the profile; the rest were timed without it

    def __str__(self) -> str:
        profiled = ", ".join(self.profiled) or "none"
        return (
            f"{self.name}, on an {self.gpu}:\n{self.summary.measurements()}\n"
            f"  read from the profile: {profiled}; the rest timed without the profiler, counted or given"
        )


STEP_FIELDS = {"gpu": str, "source": str, "profiled": list, "record": dict}


def recorded_steps() -> list[RecordedStep]:
    """The steps of ``recorded_steps.json``, in its order. Taught in lesson 10."""
    text = resources.files("colab_gpu").joinpath("recorded_steps.json").read_text(encoding="utf-8")
    fix = "Reinstall colab_gpu (pip install --force-reinstall colab-gpu), or restore the file from git."
    data = parsed(text, "colab_gpu/recorded_steps.json", {"steps": dict}, fix)
    for name, step in data["steps"].items():
        where = f"colab_gpu/recorded_steps.json's step {name!r}"
        checked(step, where, STEP_FIELDS, fix)
        unknown = sorted(set(step["profiled"]) - set(step["record"]))
        if unknown:
            raise ValueError(f"{where} lists {unknown} as profiled, which its record does not hold. {fix}")
    return [
        RecordedStep(
            name, step["gpu"], step["source"], ProfileSummary.from_record(step["record"]), tuple(step["profiled"])
        )
        for name, step in data["steps"].items()
    ]
