"""The course site in a real headless browser: every page loads without console errors and renders its images,
navigation reaches every lesson, search finds an error message offline, no internal link is broken, and every
badge opens its own notebook.

Built from the committed, executed notebooks with the same code as `make course` (without running them again),
then opened from the folder itself (file://), as someone who downloaded the built site would.
"""

import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

import course_site
import nbformat
import pytest
from course import Lesson, write_site
from course_site import DOCTREES, STAGE, lesson_page
from nbtools import badge_url, course_config, kaggle_url, lesson_sources
from paths import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver; "
    "make test installs them when run as root)",
)

PAGE = """return {
  images: Array.from(document.images).map(i => [i.getAttribute('src').slice(0, 60), i.complete && i.naturalWidth > 0]),
  links: Array.from(document.links).map(a => [a.href, a.className, a.textContent.trim(),
                                             Array.from(a.querySelectorAll('img')).map(i => i.alt).join(' ')]),
  next: (document.querySelector('a.right-next') || {}).href || null,
  title: document.title,
  plots: document.querySelectorAll('.cell_output img').length,
}"""


@pytest.fixture(scope="module")
def lessons():
    found = []
    for source in lesson_sources():
        notebook = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
        found.append(Lesson(source, notebook, 12.5, notebook.metadata["colab_gpu"]["executed_on"]))
    return found


GPU_RUN = "2026-11-20-tesla-t4-x2"


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The committed reports, but in place of the imported GPU runs one of lesson 01's current source alone (its
    committed notebook): each lesson page then shows a GPU run or the CPU's, whatever runs the course has."""
    reports = tmp_path_factory.mktemp("reports") / "reports"
    shutil.copytree(ROOT / "reports", reports, ignore=lambda folder, names: names if Path(folder).name == "gpu" else [])
    run = reports / "gpu" / GPU_RUN
    (run / "notebooks").mkdir(parents=True)
    shutil.copyfile(
        lesson_sources()[0].with_suffix(".ipynb"), run / "notebooks" / lesson_sources()[0].with_suffix(".ipynb").name
    )
    (run / "manifest.json").write_text(
        json.dumps(
            {
                "sha": "1234567" + "0" * 33,
                "started": "2026-11-20T10:00:00",
                "image": {"KAGGLE_KERNEL_RUN_TYPE": "Batch"},
            }
        )
    )
    (run / "report.json").write_text(json.dumps({"gpu": "Tesla T4 x2"}))
    (run / "report.md").write_text("# GPU suite: Tesla T4 x2, 2026-11-20\n\nA report.\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(course_site, "REPORTS", reports)
        yield reports


@pytest.fixture(scope="module")
def site(tmp_path_factory, lessons, reports):
    build = tmp_path_factory.mktemp("build")
    error = write_site(lessons, build)
    assert error is None, error
    return build


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def local_file(href: str, site: Path) -> Path | None:
    """The file a link opens when it stays inside the built site, else None."""
    parts = urlsplit(href)
    if parts.scheme != "file":
        return None
    path = Path(unquote(parts.path))
    return path if path.is_relative_to(site) else None


@pytest.fixture(scope="module")
def crawl(site, browser):
    """Every page reachable from the home page: its console errors, images, links and "next" link."""
    pages, queue = {}, [site / "index.html"]
    while queue:
        path = queue.pop(0)
        if path in pages:
            continue
        browser.get(path.as_uri())
        found = browser.execute_script(PAGE)
        found["errors"] = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        pages[path] = found
        for href, *_ in found["links"]:
            target = local_file(href, site)
            if target is not None and target.suffix == ".html" and target.exists() and target not in pages:
                queue.append(target)
    return pages


def test_every_page_loads_without_console_errors_and_renders_its_images(crawl, site, lessons):
    expected = {
        "index.html",
        "docs/instructor_guide.html",
        "docs/workshop.html",
        "notebooks/student/index.html",
        "reports/index.html",
    }
    expected |= {
        lesson_page(lesson, student).with_suffix(".html").as_posix() for lesson in lessons for student in (False, True)
    }
    newest_bench = sorted((ROOT / "reports" / "bench").glob("*/bench.md"))[-1]
    expected.add(newest_bench.relative_to(ROOT).with_suffix(".html").as_posix())  # with its plot
    expected.add(f"reports/gpu/{GPU_RUN}/report.html")
    reached = {path.relative_to(site).as_posix() for path in crawl}
    assert expected <= reached, f"pages no link reaches: {sorted(expected - reached)}"
    for path, page in crawl.items():
        assert page["errors"] == [], f"{path.relative_to(site)}: console errors {page['errors']}"
        broken = [src for src, loaded in page["images"] if not loaded]
        assert broken == [], f"{path.relative_to(site)}: images that did not render: {broken}"


def test_no_internal_link_is_broken(crawl, site):
    broken = []
    for path, page in crawl.items():
        for href, *_ in page["links"]:
            target = local_file(href, site)
            if target is None:
                continue
            fragment = urlsplit(href).fragment
            if not target.exists():
                broken.append((path.relative_to(site).as_posix(), href))
            elif fragment and target.suffix == ".html" and f'id="{unquote(fragment)}"' not in target.read_text():
                broken.append((path.relative_to(site).as_posix(), href))
    assert broken == [], f"links to nothing: {broken[:10]}"


def test_previous_next_walks_through_every_lesson_in_order(crawl, site, lessons):
    walk, page = [], site / "index.html"
    while page is not None and page not in walk:
        walk.append(page)
        following = crawl[page]["next"]
        page = local_file(following, site) if following else None
    order = [p.relative_to(site).as_posix() for p in walk]
    wanted = [lesson_page(lesson).with_suffix(".html").as_posix() for lesson in lessons]
    assert [p for p in order if p in wanted] == wanted, f"'next' from the home page visits {order}"


def test_home_page_lists_every_lesson_with_study_and_run_time(crawl, site, lessons, browser):
    home = crawl[site / "index.html"]
    assert home["title"].startswith("PyTorch on GPUs, the Colab way")
    browser.get((site / "index.html").as_uri())
    rows = browser.execute_script(
        "return Array.from(document.querySelectorAll('#the-lessons table tbody tr'))"
        ".map(r => Array.from(r.cells).map(c => c.textContent.trim()))"
    )
    assert [row[0] for row in rows] == [lesson.title for lesson in lessons]
    assert [row[3] for row in rows] == [lesson.study_time for lesson in lessons]
    assert [row[4:] for row in rows] == [["12 s", lesson.device, "ok"] for lesson in lessons]
    config = course_config()
    links = [href for href, *_ in home["links"]]
    for lesson in lessons:
        for page in (lesson_page(lesson), lesson_page(lesson, student=True)):
            assert badge_url(config, ROOT / page) in links
            assert kaggle_url(config, ROOT / page) in links


@pytest.mark.parametrize("student", [False, True], ids=["lesson", "student"])
def test_every_badge_and_download_opens_its_own_notebook(crawl, site, lessons, student):
    config = course_config()
    for lesson in lessons:
        page = lesson_page(lesson, student)
        found = crawl[site / page.with_suffix(".html")]
        colab = {href for href, _, _, alt in found["links"] if href.startswith("https://colab.research.google.com")}
        kaggle = {href for href, _, _, alt in found["links"] if href.startswith("https://kaggle.com")}
        assert colab == {badge_url(config, ROOT / page)}, f"{page}: Colab links {colab}"
        assert kaggle == {kaggle_url(config, ROOT / page)}, f"{page}: Kaggle links {kaggle}"
        downloads = [local_file(href, site) for href, cls, *_ in found["links"] if cls == "download"]
        assert len(downloads) == 1 and downloads[0] == site / page, f"{page}: download links {downloads}"
        first_cell = json.loads(downloads[0].read_text())["cells"][0]["source"]
        assert "".join(first_cell).startswith(f"# {lesson.title}"), f"{page} downloads another notebook"


def test_each_lesson_page_says_which_run_its_outputs_come_from(site, lessons, browser):
    """Lesson 01 has an imported GPU run of its current source: its page shows that run; the others the CPU's."""
    for number, lesson in enumerate(lessons):
        browser.get((site / lesson_page(lesson).with_suffix(".html")).as_uri())
        text = browser.execute_script("return document.querySelector('main').textContent")
        if number == 0:
            assert "Outputs on this page: a GPU run on Tesla T4 x2 on Kaggle, 2026-11-20, commit 1234567" in text
            links = browser.execute_script("return Array.from(document.links).map(a => a.href)")
            assert any(href.endswith(f"reports/gpu/{GPU_RUN}/report.html") for href in links)
        else:
            assert f"Outputs on this page: a CPU run ({lesson.device})" in text, lesson.source.stem


def test_a_gpu_run_of_an_older_source_is_not_shown(tmp_path, lessons):
    run = tmp_path / "2026-11-20-tesla-t4-x2"
    (run / "notebooks").mkdir(parents=True)
    old = nbformat.read(lessons[0].source.with_suffix(".ipynb"), as_version=4)
    old.cells[3].source += "\n# a line the lesson no longer has"
    nbformat.write(old, run / "notebooks" / f"{lessons[0].source.stem}.ipynb")
    (run / "manifest.json").write_text("{}")
    assert course_site.gpu_run_of(lessons[0].source, tmp_path) is None
    notebook, label = course_site.shown_notebook(lessons[0], tmp_path)
    assert notebook is lessons[0].notebook and label.startswith("**Outputs on this page:** a CPU run")


def test_every_plot_and_diagram_of_a_lesson_shows_on_its_page(crawl, site, lessons):
    for lesson in lessons:
        shown = crawl[site / lesson_page(lesson).with_suffix(".html")]["plots"]
        plots = sum(
            any(kind.startswith("image/") for kind in o.get("data", {}))
            for c in course_site.shown_notebook(lesson)[0].cells
            for o in c.get("outputs", [])
        )
        assert shown == plots, f"{lesson.source.stem}: {plots} plots in the notebook, {shown} on its page"


def test_search_finds_an_error_message_in_lesson_09_offline(site, browser):
    lesson = next(s for s in lesson_sources() if s.stem.startswith("09_"))
    headings = [
        line
        for cell in nbformat.read(lesson.with_suffix(".ipynb"), as_version=4).cells
        for line in cell.source.splitlines()
        if line.startswith('### "')
    ]
    message = "CUDA error: device-side assert triggered"
    assert any(message in heading for heading in headings), "lesson 09 no longer has this entry: pick another"
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get((site / "search.html").as_uri() + "?q=" + message.replace(" ", "+"))
    WebDriverWait(browser, 20).until(
        lambda b: (
            "Search finished"
            in b.execute_script("return (document.querySelector('#search-results') || {}).textContent || ''")
        )
    )
    results = browser.execute_script(
        "return Array.from(document.querySelectorAll('#search-results a')).map(a => a.href)"
    )
    assert any(local_file(href, site) == site / "notebooks" / f"{lesson.stem}.html" for href in results), results
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors


def test_the_pages_workflow_builds_with_make_course_and_publishes_only_the_site():
    workflow = (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    assert "run: make course" in workflow and "actions/deploy-pages@" in workflow
    assert re.search(r"upload-pages-artifact@v\d+\n\s+with:\n\s+path: build/\n", workflow)
    removed = next(line for line in workflow.splitlines() if "run: rm -rf" in line).split()
    assert {f"build/{STAGE}", f"build/{DOCTREES}", "build/logs"} <= set(removed)
