"""scripts/course/check_mutants.py: every exercise's check rejects the mutants of its solution (issue 62), and the
harness itself: the mutants it makes, the cells it runs, the list of equivalent mutants it trusts."""

import os
import subprocess
import sys
import textwrap

import nbformat
import pytest
from check_mutants import busy_cores, equivalent_mutants
from exercises import Exercise, all_exercises, lesson_exercises, names_of, setup_cells
from mutant_runs import Kernel, judge, table
from mutants import mutants
from nbtools import lesson_sources
from nbval_mutants import RUN_ID, STATE_ID, with_mutants
from nbval_pairs import combined
from paths import NOTEBOOKS, ROOT, STUDENT

SOLVED_LOOP = textwrap.dedent('''\
    def my_epoch(model, loader, optimizer, device):
        """One epoch."""
        losses = []
        for inputs, labels in loader:
            inputs = inputs.to(device, non_blocking=True)  # the batch goes where the model is
            labels = labels.to(device)
            loss = loss_fn(model(inputs), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        return torch.stack(losses)
''')


def test_the_mutants_are_the_mistakes_a_learner_makes_each_named_and_made_once():
    found = {m.name: m.source for m in mutants(SOLVED_LOOP, cap=100)}
    for name in (
        "delete `optimizer.zero_grad()`",
        "swap `optimizer.zero_grad()` and `loss.backward()`",
        "swap `loss.backward()` and `optimizer.step()`",
        "drop .to(): `inputs.to(device, non_blocking=True)`",
        "drop non_blocking=: `inputs.to(device, non_blocking=True)`",
        "drop .detach(): `loss.detach()`",
        "device->cpu in `inputs = inputs.to(device, non_blocking=True) #...`",
    ):
        assert name in found, sorted(found)
    assert "losses.append(loss)\n" in found["drop .detach(): `loss.detach()`"]
    # Edited in the text: comments stay (a check that reads the text meets what a learner's cell holds).
    assert "# the batch goes where the model is" in found["drop non_blocking=: `inputs.to(device, non_blocking=True)`"]
    # Independent statements are not swapped (the swap would be the same program), a docstring is never deleted.
    assert not any(name.startswith("swap `inputs = ") and "`labels = " in name for name in found)
    assert any(name.startswith("swap `labels = ") and "`loss = " in name for name in found)  # loss reads labels
    assert not any("One epoch" in name for name in found)
    assert [m.name for m in mutants(SOLVED_LOOP, cap=100)] == list(found)  # deterministic
    assert len(mutants(SOLVED_LOOP, cap=5)) == 5
    assert [m.name for m in mutants(SOLVED_LOOP, cap=1)] == [next(iter(found))]  # a cap of 1: the first


def test_a_writefile_cell_keeps_its_first_line_and_mutates_the_script():
    cell = '%%writefile job.py\nimport os\nos.environ.setdefault("A", "0")\nprint("done")\n'
    found = mutants(cell, cap=100)
    assert found and all(m.source.startswith("%%writefile job.py\n") for m in found)
    assert any(m.name == 'delete `os.environ.setdefault("A", "0")`' for m in found)


def test_a_cell_that_a_later_call_needs_is_kept_even_when_defined_after_the_function():
    earlier = [
        "import colab_gpu as cg",
        "device = 'cpu'",
        "def steps():\n    return loader",  # reads `loader` when called, not here
        "loader = [1, 2]",
        "demo = expensive()",  # nothing the exercise reads
        "steps()",
    ]
    kept = [earlier[i] for i in setup_cells(earlier, ["answer = steps()"])]
    assert "loader = [1, 2]" in kept and "demo = expensive()" not in kept
    assert names_of("model.to(device)\n")[1] == {"model"}  # changed in place: the cell is part of the state
    assert names_of("torch.manual_seed(0)\n")[1] == set()  # a module is not an exercise's state
    assert "model" in names_of("del model\n")[2]  # `del` needs the name to exist: its cell is needed
    assert names_of("%%writefile job.py\nprint(1)\n")[0] == {"file:job.py"}


def test_every_lesson_exercise_is_found_with_its_solution_and_check():
    exercises = all_exercises()
    assert len(exercises) == 26
    assert {e.lesson for e in exercises} == {s.stem for s in lesson_sources()}
    assert all("cg.checks." in e.check for e in exercises)


def test_the_equivalent_list_wants_a_reason_for_each_mutant(tmp_path):
    listed = equivalent_mutants()
    assert listed and all(reason.strip() for entries in listed.values() for reason in entries.values())
    (tmp_path / "bad.toml").write_text('["03.1"]\n"delete `x`" = ""\n')
    with pytest.raises(SystemExit, match=r"\[03.1\] lists mutants with no reason"):
        equivalent_mutants(tmp_path / "bad.toml")
    (tmp_path / "broken.toml").write_text("[03.1\n")
    with pytest.raises(SystemExit, match="broken.toml is not valid TOML"):
        equivalent_mutants(tmp_path / "broken.toml")


def test_the_table_has_a_row_per_check():
    assert table([]).splitlines()[0].split(" | ")[0].strip() == "exercise"


def test_bad_input_names_what_exists():
    done = subprocess.run(
        [sys.executable, "scripts/course/check_mutants.py", "99"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode != 0 and "no lesson 99: the lessons are 01" in done.stderr
    done = subprocess.run(
        [sys.executable, "scripts/course/check_mutants.py", "01", "--only", "01.7"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "no exercise 01.7: they are 01.1" in done.stderr


def test_the_standalone_harness_runs_a_lesson_after_the_cells_each_exercise_needs():
    done = subprocess.run(
        [sys.executable, "scripts/course/check_mutants.py", "01", "--cap", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "MPLBACKEND": "Agg"},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert "01.1     | created_on | 3       |" in done.stdout, done.stdout


TOY = Exercise("99_toy", 1, [], [], "def add_one(x):\n    pass\n", "def add_one(x):\n    return x + 1\n", "")


def toy_check(condition: str) -> str:
    return f"import colab_gpu.checks.core as core\ncore._verdict({condition}, 'add_one(1) should be 2')\n"


def judged(check: str, equivalent: dict[str, str]):
    exercise = Exercise(**{**TOY.__dict__, "check": check})
    kernel = Kernel()
    kernel.save()
    return judge(exercise, kernel, equivalent, cap=10)


def test_a_check_that_passes_a_wrong_mutant_fails_the_harness_with_the_mutant_named():
    report = judged(toy_check("True"), {})  # a check that passes anything
    assert report.problems[0].startswith("the exercise left undone passes")
    assert any("accepted (not listed as equivalent): delete `return x + 1`" in p for p in report.problems)


def test_a_check_that_rejects_every_mutant_passes_and_a_stale_listing_fails():
    report = judged(toy_check("add_one(1) == 2"), {})
    assert not report.problems and report.count("rejected") == len(report.outcomes) > 0
    assert report.hints() == 1  # one hint, the same words for every mutant
    report = judged(toy_check("add_one(1) == 2"), {"delete `return x + 1`": "a reason that is no longer true"})
    assert report.problems == ["listed as equivalent but rejected now (remove it): delete `return x + 1`"]


@pytest.mark.parametrize("source", lesson_sources(), ids=[s.stem for s in lesson_sources()])
def test_make_nbval_keeps_the_state_before_each_exercise_and_runs_the_mutants_last(source):
    """`make nbval` runs every exercise's mutants in the lesson's kernel (scripts/course/nbval_mutants.py): a state
    cell just before each exercise's starting cell in the lesson's own run, the mutants' cell last."""
    name = source.with_suffix(".ipynb").name
    lesson, student = (nbformat.read(folder / name, as_version=4) for folder in (NOTEBOOKS, STUDENT))
    pair = with_mutants(combined(lesson, student, name), source.stem, cap=3)
    nbformat.validate(pair)
    exercises = lesson_exercises(source)
    states = [i for i, cell in enumerate(pair.cells) if cell.id.startswith(STATE_ID)]
    assert len(states) == len(exercises)
    for at, exercise in zip(states, exercises, strict=True):
        assert f"snapshot(get_ipython(), {exercise.name!r})" in pair.cells[at].source
        assert pair.cells[at + 1].source == exercise.start and not pair.cells[at + 1].id.endswith("-student")
    assert pair.cells[-1].id == RUN_ID
    assert f"run_in_kernel(get_ipython(), {source.stem!r}, cap=3)" in pair.cells[-1].source


def test_a_busy_run_keeps_its_burners_running_and_stops_them_after():
    with busy_cores(2) as burners:
        assert len(burners) == 2 and all(burner.poll() is None for burner in burners)
    assert all(burner.returncode is not None for burner in burners)
