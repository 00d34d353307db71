"""The course's predictions for GPUs it has not run on, in one registry, judged against every imported run.

A figure the course states for a GPU it did not measure is a prediction, and a lesson cites it by its key where it
makes it: "(prediction: t4 11.compile_speedup)". `reports/predictions.toml` holds one table per key: the GPU it is
about (a `colab_gpu.measure.references.gpu_label`: "T4"), the claim in words, where a run's report measures it
(``figure``: a lesson figure that `cg.compare_with_references` recorded, a bench row's key, or "seconds.<lesson>": the
seconds the suite took to run a lesson, "seconds.12_speedrun") and the range predicted (``low``,
``high``, either may be left out); an entry without a figure (a regime, a behaviour) is read by hand from the run's
notebooks. ``status`` is "open" until a run has judged it; a refuted entry whose sentence has been corrected says
"refuted: <what changed>".

`make import-gpu-run` prints, for the imported run's GPU, each prediction with the figure measured and "confirmed",
"refuted" or "not measured by this run" (`judgement`); tests/tooling/test_predictions.py checks that every
prediction in the lessons has a key in the registry, that every entry is cited, and that no imported run refutes an
entry still open.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))

from paths import ROOT  # noqa: E402  (after common/ is on the path)

REGISTRY = ROOT / "reports" / "predictions.toml"
# "(prediction: t4 11.compile_speedup)": the GPU's label in lower case, then the key's name.
CITATION = re.compile(r"\(prediction: (?P<key>[a-z0-9]+ [\w.]+)\)")
FIELDS = {"gpu": str, "claim": str, "status": str}
OPTIONAL = {"figure": str, "low": (int, float), "high": (int, float), "platform": str}
PLATFORMS = ("Colab", "Kaggle")  # a claim about Colab's T4 (2 vCPUs) is not judged by Kaggle's T4 x2, nor the reverse
CONFIRMED, REFUTED, UNMEASURED, BY_HAND = "confirmed", "refuted", "not measured by this run", "read by hand"


@dataclass(frozen=True)
class Prediction:
    """One registry entry: ``key`` ("t4 11.compile_speedup"), the ``gpu`` label it is about, the ``claim``, the
    report ``figure`` that measures it with the range predicted (``low``/``high``), and its ``status``."""

    key: str
    gpu: str
    claim: str
    status: str
    figure: str | None = None
    low: float | None = None
    high: float | None = None
    platform: str | None = None  # "Colab" or "Kaggle": judged only by a run on that platform (its host differs)

    def range_text(self) -> str:
        if self.low is not None and self.high is not None:
            return f"{self.low:g}-{self.high:g}"
        return f"at least {self.low:g}" if self.low is not None else f"at most {self.high:g}"

    def verdict(self, measured: float | None) -> str:
        """CONFIRMED or REFUTED for a measured figure, UNMEASURED without one, BY_HAND for an entry with no figure."""
        if self.figure is None:
            return BY_HAND
        if measured is None or not math.isfinite(measured):
            return UNMEASURED
        inside = (self.low is None or measured >= self.low) and (self.high is None or measured <= self.high)
        return CONFIRMED if inside else REFUTED


def load(path: Path = REGISTRY) -> dict[str, Prediction]:
    """The registry, each entry checked: a damaged file or field is named, with the fix."""
    fix = 'Fix it by hand (one ["<gpu> <name>"] table per prediction), or restore it from git.'
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise SystemExit(f"{path.name} cannot be read ({err}). {fix}") from err
    registry = {}
    for key, entry in table.items():
        where = f"{path.name} [{key!r}]"
        if not CITATION.fullmatch(f"(prediction: {key})"):
            raise SystemExit(f"{where}: a key is '<gpu> <name>', e.g. 't4 11.compile_speedup'. {fix}")
        for name, kind in FIELDS.items():
            if not isinstance(entry.get(name), kind) or not entry[name].strip():
                raise SystemExit(f"{where} needs {name!r}, a non-empty string. {fix}")
        for name, kind in OPTIONAL.items():
            if name in entry and not isinstance(entry[name], kind):
                raise SystemExit(f"{where}: {name!r} is {entry[name]!r}, not a {kind}. {fix}")
        unknown = sorted(set(entry) - set(FIELDS) - set(OPTIONAL))
        if unknown:
            raise SystemExit(f"{where} has fields the registry does not know: {unknown}. {fix}")
        if "platform" in entry and entry["platform"] not in PLATFORMS:
            raise SystemExit(f"{where}: 'platform' is {entry['platform']!r}, not one of {PLATFORMS}. {fix}")
        if "figure" in entry and "low" not in entry and "high" not in entry:
            raise SystemExit(f"{where} names a figure but no range: give 'low', 'high' or both. {fix}")
        registry[key] = Prediction(key, **{name: entry[name] for name in entry})
    return registry


LESSON_SECONDS = "seconds."  # "seconds.12_speedrun": how long the suite took to run that lesson


def measured_figure(report: dict, figure: str) -> float | None:
    """The value of ``figure`` in a run's report: a lesson's seconds ("seconds.12_speedrun", a lesson that ran to its
    end), a lesson figure, else a bench row's ratio (None: not measured)."""
    if figure.startswith(LESSON_SECONDS):
        ran = (report.get("lessons", {}).get("lessons") or {}).get(figure.removeprefix(LESSON_SECONDS))
        ok = isinstance(ran, dict) and ran.get("status") == "ok" and isinstance(ran.get("seconds"), (int, float))
        return float(ran["seconds"]) if ok else None
    lesson = report.get("lesson_figures", {}).get(figure)
    if isinstance(lesson, dict) and isinstance(lesson.get("value"), (int, float)):
        return float(lesson["value"])
    row = next((row for row in report.get("bench", []) if row.get("key") == figure), None)
    if row is not None and row.get("status") == "ok" and isinstance(row.get("ratio"), (int, float)):
        return float(row["ratio"])
    return None


Judged = tuple[Prediction, float | None, str]  # a prediction, the figure a run measured (or None), the verdict


def judge(report: dict, registry: dict[str, Prediction], label: str | None) -> list[Judged]:
    """Each prediction about the GPU ``label`` (the run's `gpu_label`) and, where it names one, the run's platform,
    with the figure the run measured and the verdict."""
    platform = (report.get("runtime") or {}).get("platform")
    judged = []
    for prediction in registry.values():
        if prediction.gpu == label and prediction.platform in (None, platform):
            value = measured_figure(report, prediction.figure) if prediction.figure else None
            judged.append((prediction, value, prediction.verdict(value)))
    return judged


def judgement(report: dict, registry: dict[str, Prediction], label: str | None) -> list[str]:
    """The lines `make import-gpu-run` prints: one per prediction about this run's GPU, then the count of each
    verdict, and what to do about a refuted one."""
    judged = judge(report, registry, label)
    if not judged:
        return [f"predictions: none about {label or 'this GPU'} in {REGISTRY.name}"]
    lines = [f"predictions about the {label} ({len(judged)} in {REGISTRY.name}):"]
    for prediction, value, verdict in judged:
        figure = f"{prediction.figure} = {value:.3g}" if value is not None else prediction.figure or "no figure"
        predicted = f", predicted {prediction.range_text()}" if prediction.figure else ""
        lines.append(f"  {verdict:<24} {prediction.key}: {prediction.claim} ({figure}{predicted})")
    counts = {verdict: sum(v == verdict for _, _, v in judged) for verdict in (CONFIRMED, REFUTED, UNMEASURED, BY_HAND)}
    lines.append("  " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n))
    if counts[REFUTED]:
        lines.append(
            f"  a refuted prediction fails tests/tooling/test_predictions.py until its sentence is corrected and its "
            f"status in {REGISTRY.name} says 'refuted: <what changed>'"
        )
    return lines


def cited(text: str) -> list[str]:
    """The prediction keys a text cites."""
    return [match["key"] for match in CITATION.finditer(text)]
