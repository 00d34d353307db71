"""Notebook hygiene: every lesson is a synced, executed, Colab-ready pair that follows the template."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbtools import NOTEBOOK_METADATA, badge_markdown, course_config, lesson_sources
from paths import NOTEBOOKS, STUDENT

SOURCES = lesson_sources()
DEMO_TAG = "deprecated-demo"
IDS = [s.stem for s in SOURCES]


def executed(source):
    return nbformat.read(source.with_suffix(".ipynb"), as_version=4)


def code_cells(notebook):
    return [c for c in notebook.cells if c.cell_type == "code"]


def test_there_are_lessons():
    assert len(SOURCES) >= 2, f"expected lessons in {NOTEBOOKS}, found {IDS}"


def test_every_ipynb_has_its_source():
    orphans = [p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if not p.with_suffix(".py").exists()]
    assert orphans == []


def test_only_lesson_pairs_are_committed_under_notebooks():
    # Running a lesson writes scripts, checkpoints and data next to it; committed, they would show up
    # as changes after every `make test`. They belong in .gitignore.
    listed = subprocess.run(
        ["git", "ls-files", "--", str(NOTEBOOKS)], capture_output=True, text=True, cwd=NOTEBOOKS.parent
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    lesson = re.compile(r"notebooks/(student/)?[0-9][0-9]_\w+\.(py|ipynb)")
    strays = [path for path in listed.stdout.splitlines() if not lesson.fullmatch(path)]
    assert strays == [], f"generated files are tracked: {strays}; `git rm --cached` them and add them to .gitignore"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_pair_exists_and_is_in_sync(source):
    paired = source.with_suffix(".ipynb")
    assert paired.exists(), f"{paired.name} is missing: run `make notebooks`"
    from_py, from_ipynb = jupytext.read(source), jupytext.read(paired)

    def shape(nb):
        return [(c.cell_type, c.source.strip(), c.metadata.get("tags", [])) for c in nb.cells]

    assert shape(from_py) == shape(from_ipynb), f"{paired.name} is out of sync with {source.name}: run `make notebooks`"


def run_all_blockers(notebook) -> list[str]:
    """Cells that stop Colab's and Kaggle's "Run all" before the last cell: a cell tagged raises-exception
    (those front ends ignore the tag and stop at the error) that is not the last code cell."""
    cells = code_cells(notebook)
    return [c.source.strip().splitlines()[0] for c in cells[:-1] if "raises-exception" in c.metadata.get("tags", [])]


@pytest.mark.parametrize(
    "path", [*SOURCES, *sorted(STUDENT.glob("[0-9][0-9]_*.py"))], ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_run_all_reaches_the_last_cell(path):
    # nbval executes every lesson and student version (make test, and on a GPU the GPU suite) and fails at
    # any error outside a raises-exception cell. With no such cell before the last, that run is exactly
    # "Run all": it reaches the last cell or the test fails where a learner's Run all would stop.
    blockers = run_all_blockers(jupytext.read(path))
    assert blockers == [], (
        f"{path.name}: Run all stops at {blockers}; show the error with "
        "`with cg.shows_error(...)` instead of a raises-exception cell"
    )


def test_run_all_check_catches_a_raises_exception_cell_before_the_end():
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("1 / 0", metadata={"tags": ["raises-exception"]}),
            nbformat.v4.new_code_cell("print('the rest')"),
        ]
    )
    assert run_all_blockers(notebook) == ["1 / 0"]
    notebook.cells.reverse()  # as the very last cell, a traceback stops nothing
    assert run_all_blockers(notebook) == []


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_executed_top_to_bottom_in_one_run(source):
    counts = [c.execution_count for c in code_cells(executed(source))]
    assert counts == list(range(1, len(counts) + 1)), f"{source.stem}.ipynb was not run top to bottom: {counts}"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_only_tagged_cells_have_errors(source):
    for cell in code_cells(executed(source)):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if "raises-exception" in cell.metadata.get("tags", []):
            continue
        assert errors == [], f"unexpected error in {source.stem}: {errors[0].ename}: {errors[0].evalue}"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_valid_and_opens_a_gpu_runtime(source):
    notebook = executed(source)
    nbformat.validate(notebook)
    for key, value in NOTEBOOK_METADATA.items():
        assert notebook.metadata.get(key) == value, f"{source.stem}.ipynb metadata {key!r} should be {value!r}"
    assert "executed_on" in notebook.metadata.get("colab_gpu", {}), "metadata must say which device ran it"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_first_cell_is_the_lesson_card(source):
    card = executed(source).cells[0]
    assert card.cell_type == "markdown"
    assert re.match(rf"# {source.stem[:2]} · \S", card.source), "the card starts with '# NN · Title'"
    for part in ("**What you will learn**", "**Time:**", "**Prerequisites:**"):
        assert part in card.source, f"{source.stem}: the first cell lacks {part}"
    assert badge_markdown(course_config(), source.with_suffix(".ipynb")) in card.source, (
        f"{source.stem}: the Colab and Kaggle badges must open this notebook: run `make stamp`"
    )


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_setup_cell_installs_the_pinned_package_only_and_only_when_missing(source):
    notebook = executed(source)
    setup = code_cells(notebook)[0].source
    config = course_config()
    assert setup == config.setup_block, "the setup cell is the stamped block alone: `make stamp`"
    first = code_cells(notebook)[1].source  # in sight, not in the form: the lines a learner's own notebook needs
    assert "import colab_gpu as cg" in first and "device = cg.get_device()" in first
    installs = [c.source for c in code_cells(notebook) if re.search(r"pip\b.*install", c.source)]
    assert installs == [setup], "only the setup cell may install anything"
    command = re.search(r"subprocess\.run\(\[sys\.executable,(.*?)\]", setup, re.S).group(1).split()
    assert command == ['"-m",', '"pip",', '"install",', '"-q",', '"-c",', "keep.name,", "source"], (
        "pip installs one thing at a time, keeping the runtime's torch and torchvision (the constraints file)"
    )
    sources = re.search(r"^SOURCES = \[(.*)\]$", setup, re.M).group(1)
    assert sources == (
        f'f"{config.distribution}=={{COLAB_GPU}}", f"git+https://github.com/{config.repository}@v{{COLAB_GPU}}"'
    ), "the pinned release from PyPI, else the repository's tag of it (never torch)"
    assert "if found != COLAB_GPU:" in setup, "it installs only when the pinned version is not importable"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_setup_cell_is_a_colab_form_that_shows_its_title_only(source):
    for notebook in (executed(source), nbformat.read(STUDENT / source.with_suffix(".ipynb").name, as_version=4)):
        setup = code_cells(notebook)[0]
        assert setup.source.startswith("# @title Setup: colab_gpu "), "Colab titles a form cell by its first line"
        assert setup.metadata.get("cellView") == "form", "without it Colab shows the whole install block"
        assert sum(c.metadata.get("cellView") == "form" for c in code_cells(notebook)) == 1


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_lesson_template(source):
    notebook = executed(source)
    tags = [t for c in notebook.cells for t in c.metadata.get("tags", [])]
    assert any("cg.shows_error(" in c.source for c in code_cells(notebook)), (
        "reproduce the topic's common error with `with cg.shows_error(...)`"
    )
    assert "solution" in tags, "an exercise needs a solution cell tagged 'solution'"
    assert any("cg.checks." in c.source for c in code_cells(notebook)), "an exercise needs a cg.checks self-check"
    assert any(c.source.startswith("## Summary") for c in notebook.cells if c.cell_type == "markdown")
    assert any("assert " in c.source for c in code_cells(notebook)), "teaching claims are asserted"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_no_deprecation_warning_in_outputs(source):
    for cell in code_cells(executed(source)):
        if DEMO_TAG in cell.metadata.get("tags", []):
            continue
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        assert "DeprecationWarning" not in text and "FutureWarning" not in text, (
            f"{source.stem} runs a deprecated API: {cell.source[:80]!r}"
        )


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_no_deprecated_api_is_taught(source):
    # Only a cell tagged "deprecated-demo" may run a deprecated call, to show its warning.
    code = "\n".join(c.source for c in code_cells(executed(source)) if DEMO_TAG not in c.metadata.get("tags", []))
    for deprecated in ("torch.cuda.amp.", "total_mem)", ".total_mem ", "ToTensor()", "DistributedDataParallelCPU("):
        assert deprecated not in code, f"{source.stem} executes the deprecated {deprecated!r}"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_outputs_read_as_sentences(source):
    # A cell that ends with a bare True/False, or a raw network error, tells the learner nothing.
    for cell in code_cells(executed(source)):
        for output in cell.outputs:
            text = output.get("data", {}).get("text/plain", "") if output.output_type == "execute_result" else ""
            assert text not in ("True", "False"), f"{source.stem}: a cell echoes a bare {text}: {cell.source[:60]!r}"
            stream = output.get("text", "") if output.output_type == "stream" else ""
            assert "urlopen error" not in stream, f"{source.stem} prints a raw network error: {stream[:100]!r}"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_every_self_check_passes_with_the_worked_solutions(source):
    # nbval runs --nbval-lax (outputs are not compared), so a solution that no longer passes its check would
    # go unnoticed there: the executed lesson must show each check's pass mark.
    from colab_gpu.checks.core import HINT, PASS

    checks = [c for c in code_cells(executed(source)) if c.source.lstrip().startswith("cg.checks.")]
    assert checks, f"{source.stem} has no self-check"
    for cell in checks:
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        assert PASS in text and HINT not in text, f"{source.stem}: {cell.source[:60]!r} printed {text[:200]!r}"


LOG_TAG = "shows-log"  # a cell whose stderr log the text discusses (lesson 11's recompile reasons), kept short
MACHINE_PATH = re.compile(
    "|".join(
        re.escape(part)
        for part in (str(NOTEBOOKS.parent) + "/", str(Path.home()) + "/", "/tmp/", "ipykernel_", "site-packages/")
    )
)
BARE_REPR = re.compile(r"^[A-Z]\w*\(\w+=|<[\w.]+ object at 0x", re.M)  # AtlasEntry(key=..., <Foo object at 0x..>
COMMITTED = sorted([*NOTEBOOKS.glob("[0-9]*.ipynb"), *STUDENT.glob("[0-9]*.ipynb")])


def output_text(output) -> str:
    if output.output_type == "stream":
        return output.text
    if output.output_type == "error":
        return "\n".join(output.traceback)
    return output.get("data", {}).get("text/plain", "")


@pytest.mark.parametrize("path", COMMITTED, ids=[p.relative_to(NOTEBOOKS).as_posix() for p in COMMITTED])
def test_committed_outputs_are_for_readers(path):
    """What GitHub and the site show: no stderr chatter (profiler, Dynamo, library logs), no path of the machine
    that ran the notebook, no bare repr of an object, no prediction the reader never made."""
    for cell in code_cells(nbformat.read(path, as_version=4)):
        where = f"{path.name}: the cell {cell.source.splitlines()[0][:70]!r}"
        for output in cell.outputs:
            text = output_text(output)
            if output.output_type == "stream" and output.name == "stderr":
                assert LOG_TAG in cell.metadata.get("tags", []), f"{where} writes to stderr: {text[:160]!r}"
                assert len(text.splitlines()) <= 6, f"{where} shows a log of {len(text.splitlines())} lines"
            found = MACHINE_PATH.search(text)
            assert found is None, f"{where} shows a path of the machine that ran it: {found and found.group()!r}"
            found = BARE_REPR.search(text)
            assert found is None, f"{where} shows a bare repr: {text[found.start() : found.start() + 80]!r}"
            assert "prediction: None" not in text, f"{where} prints a prediction the reader did not make"


def glossary_terms(cell: str) -> list[str]:
    """The bold words of a glossary cell's list: "- **host** and **device**: ..." -> ["host", "device"]."""
    return [
        word
        for line in cell.splitlines()
        if line.startswith("- ")
        for word in re.findall(r"\*\*(.+?)\*\*", line.split(":")[0])
    ]


def test_lesson_01_defines_each_word_of_its_glossary_before_it_uses_it():
    """Issue 66: lesson 01 used CUDA, cuDNN and "compute capability" before saying what they are, and never said what
    a kernel (not the Jupyter one) or the host is. Its glossary comes before any of its prose uses one of its words."""
    cells = [c for c in executed(SOURCES[0]).cells if c.cell_type == "markdown"]
    at = next(i for i, c in enumerate(cells) if c.source.startswith("## Glossary"))
    terms = glossary_terms(cells[at].source)
    assert {"host", "device", "CUDA", "kernel", "cuBLAS", "cuDNN", "compute capability"} <= set(terms), terms
    for cell in cells[:at]:
        used = [term for term in terms if re.search(rf"\b{re.escape(term)}\b", cell.source, re.I)]
        assert not used, f"lesson 01 uses {used} before its glossary defines them: {cell.source[:80]!r}"


@pytest.mark.parametrize("source", SOURCES[1:], ids=IDS[1:])
def test_every_later_lesson_links_the_glossary_from_its_card(source):
    card = executed(source).cells[0].source
    link = f"[lesson 01's\nglossary]({SOURCES[0].with_suffix('.ipynb').name})"  # relative: GitHub, the site, Colab
    assert link in card, f"{source.stem}: its card links lesson 01's glossary (the words it uses)"
