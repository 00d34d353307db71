"""Issue 65: every prediction the course makes about a GPU it has not run on has a key, one registry entry, and is
judged by each imported run of that GPU (scripts/gpu/predictions.py)."""

import json
import re
import shutil

import import_gpu_run
import predictions
import pytest

from tests.conftest import ROOT

LESSONS = sorted((ROOT / "notebooks").glob("[0-9]*.py"))
CITING = [
    *LESSONS,
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "colab_gpu").rglob("*.py")),
    *sorted((ROOT / "scripts").rglob("*.py")),
]
# The word "prediction" of the course's own claims; not a learner's guess (my_prediction, prediction=) nor a model's
# outputs ("predictions", cg.predict).
CLAIM = re.compile(r"(?<![_\w])prediction(?![s_=\w])")


def prose_paragraphs(path):
    """A lesson's markdown and comment paragraphs: consecutive comment lines joined, so a citation may wrap."""
    paragraph = []
    for line in path.read_text().splitlines() + [""]:
        stripped = line.strip()
        if stripped.startswith("#") and not stripped.startswith("# %%") and stripped.strip("#").strip():
            paragraph.append(stripped.lstrip("#").strip())
        elif paragraph:
            yield " ".join(paragraph)
            paragraph = []


def test_every_prediction_in_the_lessons_is_cited_by_its_key():
    uncited = []
    for path in LESSONS:
        for paragraph in prose_paragraphs(path):
            claims = len(CLAIM.findall(paragraph))
            if claims and len(predictions.cited(paragraph)) < claims:
                uncited.append(f"{path.name}: {paragraph[:120]}")
    assert not uncited, "cite each prediction as (prediction: t4 <name>) and register it:\n" + "\n".join(uncited)


def test_every_cited_key_is_registered_and_every_entry_is_cited():
    registry = predictions.load()
    cited = {key: path.name for path in CITING for key in predictions.cited(" ".join(path.read_text().split()))}
    unknown = {key: where for key, where in cited.items() if key not in registry}
    assert not unknown, f"cited but not in reports/predictions.toml: {unknown}"
    assert not sorted(set(registry) - set(cited)), "registered but cited nowhere: cite them, or remove them"


def test_no_imported_run_refutes_a_prediction_still_open():
    registry = predictions.load()
    refuted = []
    for path in sorted(ROOT.glob("reports/gpu/*/report.json")):
        report = json.loads(path.read_text())
        label = import_gpu_run.update_references.gpu_label(report.get("gpu", ""))
        for prediction, value, verdict in predictions.judge(report, registry, label):
            if verdict == predictions.REFUTED and prediction.status == "open":
                refuted.append(
                    f"{prediction.key}: {value:.3g} ({path.parent.name}), predicted {prediction.range_text()}"
                )
    assert not refuted, "correct each sentence, then set its status to 'refuted: <what changed>':\n" + "\n".join(
        refuted
    )


def t4_report(platform="Colab", **figures):
    """A T4 run's report on ``platform`` with ``figures``: lesson figures by key, bench rows for the bench's keys."""
    bench = {"matmul_fp32", "matmul_half", "speedrun"}
    return {
        "gpu": "Tesla T4" if platform == "Colab" else "Tesla T4 x2",
        "runtime": {"platform": platform},
        "lesson_figures": {key: {"value": v, "device": "Tesla T4"} for key, v in figures.items() if key not in bench},
        "bench": [{"key": key, "status": "ok", "ratio": v} for key, v in figures.items() if key in bench],
    }


def test_a_t4_run_confirms_refutes_or_leaves_each_prediction():
    registry = predictions.load()
    report = t4_report(matmul_fp32=4.31, **{"11.compile_speedup_fusion": 1.1, "06.amp_mlp_speedup": float("nan")})
    verdicts = {p.key: (value, verdict) for p, value, verdict in predictions.judge(report, registry, "T4")}
    assert verdicts["t4 fp32_matmul"] == (4.31, predictions.CONFIRMED)
    assert verdicts["t4 11.compile_speedup"] == (1.1, predictions.REFUTED)  # at least 1.3 was predicted
    assert verdicts["t4 06.amp_mlp_speedup"][1] == predictions.UNMEASURED  # a NaN is not a measurement
    assert verdicts["t4 11.bigger_batch_gain"] == (None, predictions.UNMEASURED)
    assert verdicts["t4 05.workers_plateau"] == (None, predictions.BY_HAND)
    assert predictions.judge(report, registry, "H100") == []  # judged only by a run of their GPU
    lines = predictions.judgement(report, registry, "T4")
    assert any(
        line.startswith("  refuted") and "11.compile_speedup_fusion = 1.1, predicted at least 1.3" in line
        for line in lines
    )
    assert "1 confirmed, 1 refuted" in lines[-2] and "fails tests/tooling/test_predictions.py" in lines[-1]


def test_a_claim_about_one_platforms_host_is_judged_only_by_a_run_there():
    # Colab's T4 has 2 vCPUs, Kaggle's T4 x2 four: "the workers flatten at 2" is Colab's, "two T4s" Kaggle's.
    registry = predictions.load()
    on_colab = {p.key for p, _, _ in predictions.judge(t4_report("Colab"), registry, "T4")}
    on_kaggle = {p.key for p, _, _ in predictions.judge(t4_report("Kaggle"), registry, "T4")}
    assert "t4 05.workers_plateau" in on_colab - on_kaggle and "t4 08.ddp_two_t4s" in on_kaggle - on_colab
    assert "t4 fp32_matmul" in on_colab & on_kaggle  # a claim about the GPU alone: judged by both


def test_a_lessons_time_is_judged_only_when_the_lesson_ran_to_its_end():
    registry = predictions.load()
    report = t4_report(speedrun=6.2)
    report["lessons"] = {"lessons": {"12_speedrun": {"seconds": 512.0, "status": "ok"}}}
    verdicts = {p.key: (value, verdict) for p, value, verdict in predictions.judge(report, registry, "T4")}
    assert verdicts["t4 12.lesson_time"] == (512.0, predictions.CONFIRMED)
    assert verdicts["t4 12.ladder_gain"] == (6.2, predictions.CONFIRMED)  # the bench's speedrun row
    report["lessons"]["lessons"]["12_speedrun"] = {"seconds": 900.0, "status": "timeout"}  # stopped: no figure
    verdicts = {p.key: (value, verdict) for p, value, verdict in predictions.judge(report, registry, "T4")}
    assert verdicts["t4 12.lesson_time"] == (None, predictions.UNMEASURED)


def test_importing_a_t4_run_prints_its_predictions(run_folder, course):
    shutil.copyfile(predictions.REGISTRY, course / "reports" / predictions.REGISTRY.name)
    report = json.loads((run_folder / "report.json").read_text())
    report["bench"] = [{"key": "matmul_fp32", "status": "ok", "ratio": 4.3}]
    (run_folder / "report.json").write_text(json.dumps(report))
    sha = "89abcdef0123456789abcdef0123456789abcdef"
    manifest = json.loads((run_folder / "manifest.json").read_text())
    manifest["sha"], report["commit"] = sha, sha
    (run_folder / "manifest.json").write_text(json.dumps(manifest))
    (run_folder / "report.json").write_text(json.dumps(report))
    printed = import_gpu_run.import_run(run_folder, course)
    assert "predictions about the T4" in printed
    assert "confirmed                t4 fp32_matmul" in printed and "matmul_fp32 = 4.3, predicted 3.8-5" in printed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('["t4"]\ngpu = "T4"\nclaim = "x"\nstatus = "open"\n', "a key is '<gpu> <name>'"),
        ('["t4 a"]\ngpu = "T4"\nstatus = "open"\n', "needs 'claim', a non-empty string"),
        ('["t4 a"]\ngpu = "T4"\nclaim = "x"\nstatus = "open"\nfigure = "f"\n', "names a figure but no range"),
        ('["t4 a"]\ngpu = "T4"\nclaim = "x"\nstatus = "open"\nlow = "1"\n', "'low' is '1', not a"),
        ('["t4 a"]\ngpu = "T4"\nclaim = "x"\nstatus = "open"\nrange = 1\n', "fields the registry does not know"),
        ('["t4 a"\n', "cannot be read"),
        ('["t4 a"]\ngpu = "T4"\nclaim = "x"\nstatus = "open"\nplatform = "colab"\n', "not one of ('Colab', 'Kaggle')"),
    ],
)
def test_a_damaged_registry_is_refused_by_its_field(tmp_path, text, message):
    path = tmp_path / "predictions.toml"
    path.write_text(text)
    with pytest.raises(SystemExit, match=re.escape(message)):
        predictions.load(path)
