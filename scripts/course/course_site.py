"""The course site: the pages `make course` writes into build/, with Sphinx, MyST-NB and the Sphinx Book Theme.

Why this stack: it is what Jupyter Book 1 is built from, maintained by the Executable Books project, pure Python
(nothing to install beside pip), renders notebooks with their outputs without running them again, and gives a
sidebar, previous/next, a Colab launch button and a search that works from the built folder with no server.

The pages are staged in build/.site/ with the repository's own layout (notebooks/NN_topic.ipynb,
notebooks/student/, docs/, reports/), so the links between the guide, the lessons and the reports resolve as
they do on GitHub, and the theme's Colab button opens the same notebook as the lesson's own badge.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbtools import COLAB_BADGE_SVG, KAGGLE_BADGE_SVG, badge_markdown, course_config, read_lesson, student_notebook
from paths import NOTEBOOKS, ROOT, STUDENT, git_commit

SITE_CONF = ROOT / "site"  # conf.py and the theme's extra CSS
ASSETS = Path(__file__).resolve().parent / "assets"
BADGE_ASSETS = {COLAB_BADGE_SVG: "colab-badge.svg", KAGGLE_BADGE_SVG: "kaggle-badge.svg"}
REPORTS = ROOT / "reports"
MYST_NB_SCRATCH = "jupyter_execute"
STAGE, DOCTREES = ".site", ".doctrees"  # in build/: the staged sources and Sphinx's cache, not part of the site
DOCS = ("instructor_guide.md", "workshop.md")
# Links in the docs that point at folders GitHub lists but a site has no page for: the page that lists them.
FOLDER_LINKS = {
    "../notebooks/student/": "../notebooks/student/index.md",
    "../reports/gpu/": "../reports/index.md",
    "../README.md": "../index.md",
}


def localize_badges(text: str, depth: int) -> str:
    """Point the badge images at the copies in the site, so that pages render them with no network."""
    for remote, local in BADGE_ASSETS.items():
        text = text.replace(remote, "../" * depth + local)
    return text


def download_cell(page: Path) -> nbformat.NotebookNode:
    """The line under a lesson's title: download this notebook, and open the other version of the lesson."""
    download = f'<a class="download" href="{page.name}" download>Download .ipynb</a>'
    if page.parent.name == STUDENT.name:
        other = f"[the full lesson, with solutions](../{page.name})"
    else:
        other = f"[the student version, without solutions](student/{page.name})"
    return nbformat.v4.new_markdown_cell(f"{download} · {other}")


def gpu_run_of(source: Path, runs: Path | None = None) -> tuple[nbformat.NotebookNode, Path] | None:
    """The newest imported GPU run (reports/gpu/<date>-<gpu>/) that executed this lesson's current source:
    its notebook and its folder; None when no run has this version of the lesson."""
    current = [cell.source for cell in read_lesson(source).cells]
    for manifest in sorted((runs or REPORTS / "gpu").glob("*/manifest.json"), reverse=True):  # newest date first
        path = manifest.parent / "notebooks" / f"{source.stem}.ipynb"
        if path.exists():
            notebook = nbformat.read(path, as_version=4)
            if [cell.source for cell in notebook.cells] == current:
                return notebook, manifest.parent
    return None


def shown_notebook(lesson, runs: Path | None = None) -> tuple[nbformat.NotebookNode, str]:
    """The notebook a lesson's page shows, and the line under its title that says which run produced its outputs:
    a GPU run of its current source where one was imported, else the CPU run that built the site."""
    found = gpu_run_of(lesson.source, runs)
    if found is not None:
        notebook, folder = found
        manifest = json.loads((folder / "manifest.json").read_text())
        gpu = json.loads((folder / "report.json").read_text())["gpu"]
        where = " on Kaggle" if manifest.get("image", {}).get("KAGGLE_KERNEL_RUN_TYPE") else ""
        return notebook, (
            f"**Outputs on this page:** a GPU run on {gpu}{where}, {manifest['started'][:10]}, commit "
            f"`{manifest['sha'][:7]}` ([its report](../reports/gpu/{folder.name}/report.md))."
        )
    commit = git_commit()
    return lesson.notebook, (
        f"**Outputs on this page:** a CPU run ({lesson.device}), {time.strftime('%Y-%m-%d')}"
        f"{f', commit `{commit[:7]}`' if commit else ''}. No GPU run of this version of the lesson is imported yet: "
        "its timings are a CPU's, and the GPU figures it quotes come from the course's reports."
    )


def stage_notebook(
    notebook: nbformat.NotebookNode, page: Path, src: Path, build: Path, label: str | None = None
) -> None:
    """Stage a notebook as the page ``page`` (its path in the repository), and the notebook itself beside it;
    ``label``, where its outputs come from, goes under the download line."""
    (build / page).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, build / page)  # what "Download .ipynb" gives: the notebook as it ran
    staged = copy.deepcopy(notebook)
    for cell in staged.cells:
        if cell.cell_type == "markdown":
            cell.source = localize_badges(cell.source, depth=len(page.parts) - 1)
    staged.cells.insert(1, download_cell(page))
    if label:
        staged.cells.insert(2, nbformat.v4.new_markdown_cell(label))
    if page.parent.name == STUDENT.name:  # the lesson's own title would make two identical search results
        staged.cells[0].source = re.sub(
            r"^(# .*)$", r"\1 (student version)", staged.cells[0].source, count=1, flags=re.M
        )
    (src / page).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(staged, src / page)


def lesson_page(lesson, student: bool = False) -> Path:
    """Where a lesson's page lives, in the repository and in the site: notebooks/[student/]NN_topic.ipynb."""
    folder = STUDENT if student else NOTEBOOKS
    return (folder / f"{lesson.source.stem}.ipynb").relative_to(ROOT)


def readme_section(heading: str) -> str:
    """A section of the README, without its heading: the home page shares the README's words."""
    text = (ROOT / "README.md").read_text()
    found = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if found is None:
        raise RuntimeError(f"README.md has no section '## {heading}'; the site's home page quotes it.")
    return found.group(1).strip()


def readme_intro() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("\n## ", 1)[0].split("\n", 1)[1].strip()


def lesson_table(lessons) -> str:
    """The home page's table: lesson, its badges, the student version's badges, study time, run time, device."""
    config = course_config()
    rows = [
        "| Lesson | Open it | Student version | Study time | Run time | Device | Status |",
        "|---|---|---|---|---:|---|---|",
    ]
    for lesson in lessons:
        notebook, student = lesson_page(lesson), lesson_page(lesson, student=True)
        rows.append(
            f"| [{lesson.title}]({notebook.as_posix()}) | {badge_markdown(config, ROOT / notebook, ' ')} | "
            f"{badge_markdown(config, ROOT / student, ' ')} | {lesson.study_time} | "
            f"{lesson.seconds:.0f} s | {lesson.device} | {lesson.status} |"
        )
    return localize_badges("\n".join(rows), 0)


def toctree(caption: str, entries: list[str]) -> str:
    if not entries:
        return ""
    return "\n".join(["```{toctree}", ":hidden:", f":caption: {caption}", "", *entries, "```", ""])


def stage_reports(src: Path) -> list[str]:
    """The newest bench report and every GPU report, with their plots: the pages under "Reports"."""
    pages = []
    bench = sorted(p for p in (REPORTS / "bench").glob("*") if (p / "bench.md").exists())
    gpu = sorted(p.parent for p in (REPORTS / "gpu").glob("*/report.md"))
    for folder in bench[-1:]:
        target = src / "reports" / folder.relative_to(REPORTS)
        shutil.copytree(folder, target, dirs_exist_ok=True)
        pages += [md.relative_to(src).with_suffix("").as_posix() for md in sorted(target.glob("*.md"))]
    for folder in gpu:  # the report only: a run's notebooks are shown as the lessons' pages (shown_notebook)
        target = src / "reports" / folder.relative_to(REPORTS)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / "report.md", target / "report.md")
        pages.append((target / "report").relative_to(src).as_posix())
    lines = [
        "# Reports",
        "",
        "Measured by `colab_gpu bench` and the GPU suite (`make gpu-suite`); newest bench first.",
        "",
    ]
    if not gpu:
        lines += ["No GPU report is committed yet: the GPU figures in the lessons are owed to a GPU run.", ""]
    (src / "reports").mkdir(parents=True, exist_ok=True)
    (src / "reports" / "index.md").write_text("\n".join(lines) + "\n" + toctree("Reports", [f"../{p}" for p in pages]))
    return ["reports/index"]


def stage_docs(src: Path) -> list[str]:
    (src / "docs").mkdir(parents=True, exist_ok=True)
    for name in DOCS:
        text = (ROOT / "docs" / name).read_text()
        for folder, page in FOLDER_LINKS.items():
            text = text.replace(f"]({folder})", f"]({page})")
        (src / "docs" / name).write_text(localize_badges(text, 1))
    return [f"docs/{Path(name).stem}" for name in DOCS]


def stage_home(lessons, src: Path, student_pages: list[str], doc_pages: list[str], report_pages: list[str]) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M")
    device = lessons[0].device if lessons else "?"
    parts = [
        "# PyTorch on GPUs, the Colab way",
        "",
        readme_intro(),
        "",
        "**Who it is for:** you know some Python and have trained a model with PyTorch on a CPU, or followed a "
        "tutorial that did; you want to use a GPU well: fast, without out-of-memory surprises, and knowing what "
        "each error means. Instructors will find a workshop kit below.",
        "",
        "## Start on Colab or Kaggle",
        "",
        readme_section("Run it on Colab or Kaggle"),
        "",
        "## The lessons",
        "",
        f"Run time: `make course` executing each lesson top to bottom on {device}, {stamp}. "
        "Study time: what a learner needs to read, run and do the exercise.",
        "",
        lesson_table(lessons),
        "",
        "## Run it locally",
        "",
        readme_section("Run it locally"),
        "",
        toctree("Lessons", [lesson_page(lesson).with_suffix("").as_posix() for lesson in lessons]),
        toctree("Student versions", student_pages),
        toctree("Instructors", doc_pages),
        toctree("Reports", report_pages),
    ]
    (src / "index.md").write_text("\n".join(parts))


def stage_students(lessons, src: Path, build: Path) -> list[str]:
    """The student versions' pages (as write_student_versions writes them: no outputs) and their index."""
    entries = []
    for lesson in lessons:
        stage_notebook(student_notebook(lesson.source, course_config()), lesson_page(lesson, True), src, build)
        entries.append(lesson.source.stem)
    (src / "notebooks" / "student" / "index.md").write_text(
        "\n".join(
            [
                "# Student versions",
                "",
                "The same lessons without the solution cells: write your answer in each exercise, then run its check "
                "cell. Open one from its badge in the [lesson table](../../index.md), or read it here.",
                "",
                toctree("Student versions", entries),
            ]
        )
    )
    return ["notebooks/student/index"]


def stage(lessons, build: Path) -> Path:
    """Write the site's sources to build/.site/ (pages, notebooks, badges); return that folder."""
    src = build / STAGE
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    for local in BADGE_ASSETS.values():
        shutil.copyfile(ASSETS / local, src / local)
    for lesson in lessons:
        notebook, label = shown_notebook(lesson)
        stage_notebook(notebook, lesson_page(lesson), src, build, label)
    student_pages = stage_students(lessons, src, build)
    stage_home(lessons, src, student_pages, stage_docs(src), stage_reports(src))
    return src


def build_site(lessons, build: Path, log: Path) -> str | None:
    """Stage and build the site into build/; Sphinx's output goes to ``log``. Returns an error or None.

    Warnings fail the build (a broken link, a missing image, a page outside the navigation), after every page
    is written, so the log lists all of them at once.
    """
    src = stage(lessons, build)
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-b",
        "html",
        "-q",
        "-W",
        "--keep-going",
        "-j",
        "auto",
        "-c",
        str(SITE_CONF),
        "-d",
        str(build / DOCTREES),
        str(src),
        str(build),
    ]
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    # MyST-NB writes the outputs' images to <outdir>/../jupyter_execute (not configurable under Sphinx) before
    # Sphinx copies them to build/_images: a scratch folder, beside build/, that nothing reads afterwards.
    shutil.rmtree(build.parent / MYST_NB_SCRATCH, ignore_errors=True)
    if done.returncode:
        return f"sphinx-build exited {done.returncode}:\n{log.read_text()[-4000:]}"
    return None
