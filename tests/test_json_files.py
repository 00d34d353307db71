"""Issue 63: the package's JSON files, cut short or edited by hand, are refused by name and field, never read raw."""

import json

import pytest
import torch

import colab_gpu as cg
from colab_gpu.measure import recorded, references
from colab_gpu.measure.json_files import parsed, write_atomically


def test_a_truncated_or_wrongly_shaped_file_is_refused_by_its_name_and_field():
    with pytest.raises(ValueError, match=r"steps.json cannot be read .*truncated or damaged. Restore it"):
        parsed('{"steps": {"a', "steps.json", {"steps": dict}, "Restore it.")
    with pytest.raises(ValueError, match="steps.json holds a list, not a JSON object"):
        parsed("[1, 2]", "steps.json", {"steps": dict}, "Restore it.")
    with pytest.raises(ValueError, match="steps.json: its field 'steps' is str, not dict. Restore it."):
        parsed('{"steps": "x"}', "steps.json", {"steps": dict}, "Restore it.")


class PackageFiles:
    """A stand-in for importlib.resources.files(package) whose one file holds ``text``."""

    def __init__(self, text: str):
        self.text = text

    def joinpath(self, name):
        return self

    def read_text(self, encoding=None):
        return self.text


def test_a_damaged_recorded_steps_file_names_the_step_and_the_fix(monkeypatch):
    text = json.dumps({"steps": {"lesson 04": {"gpu": "H100", "source": "a run", "profiled": []}}})  # no record
    monkeypatch.setattr(recorded.resources, "files", lambda package: PackageFiles(text))
    with pytest.raises(ValueError, match=r"step 'lesson 04': its field 'record' is NoneType, not dict. Reinstall"):
        cg.recorded_steps()


def test_a_recorded_step_that_names_a_profiled_figure_it_lacks_is_refused(monkeypatch):
    step = {"gpu": "H100", "source": "a run", "profiled": ["kernel_ms"], "record": {"steps": 5, "step_ms": 2.0}}
    monkeypatch.setattr(recorded.resources, "files", lambda package: PackageFiles(json.dumps({"steps": {"x": step}})))
    with pytest.raises(ValueError, match=r"step 'x' lists \['kernel_ms'\] as profiled, which its record"):
        cg.recorded_steps()


def test_a_damaged_figures_file_under_the_gpu_suite_is_named_and_a_record_is_written_whole(tmp_path, monkeypatch):
    figures = tmp_path / "figures.json"
    monkeypatch.setenv(references.FIGURES_ENV, str(figures))
    references._record("02.x", 2.0, torch.device("cpu"))
    references._record("02.y", 3.0, torch.device("cpu"))
    assert json.loads(figures.read_text()) == {
        "02.x": {"value": 2.0, "device": "cpu"},
        "02.y": {"value": 3.0, "device": "cpu"},
    }
    assert [p.name for p in tmp_path.iterdir()] == ["figures.json"]  # no temporary file left beside it
    figures.write_text('{"02.x": {"val')
    with pytest.raises(ValueError, match=r"figures.json cannot be read .* Delete it"):
        references._record("02.z", 1.0, torch.device("cpu"))


def test_write_atomically_leaves_the_old_file_when_the_data_cannot_be_written(tmp_path):
    target = tmp_path / "f.json"
    write_atomically(target, {"a": 1})
    with pytest.raises(TypeError):
        write_atomically(target, {"a": object()})  # not JSON: the old file stays whole
    assert json.loads(target.read_text()) == {"a": 1} and [p.name for p in tmp_path.iterdir()] == ["f.json"]
