"""The course site in a real headless browser: pages open, every image renders, badges open the right notebook.

Built from the committed, executed notebooks (what `make course` writes, without running them again).
"""

import shutil

import nbformat
import pytest
from course import Lesson, write_site
from nbtools import STUDENT, badge_url, course_config, kaggle_url, lesson_sources

CHROMIUM = shutil.which("chromium") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver; "
    "make test installs them when run as root)",
)

IMAGES = ("return Array.from(document.images)"
          ".map(i => [i.getAttribute('src').slice(0, 40), i.complete && i.naturalWidth > 0])")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    build = tmp_path_factory.mktemp("build")
    lessons = []
    for source in lesson_sources():
        notebook = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
        lessons.append(Lesson(source, notebook, 1.0, notebook.metadata["colab_gpu"]["executed_on"]))
    write_site(lessons, build)
    return build


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def test_index_lists_every_lesson_with_its_badge(site, browser):
    browser.get((site / "index.html").as_uri())
    assert browser.title == "PyTorch on GPUs, the Colab way"
    images = browser.execute_script(IMAGES)
    assert images and all(loaded for _, loaded in images), f"images that did not render: {images}"
    config = course_config()
    badges = browser.execute_script("return Array.from(document.querySelectorAll('a.badge')).map(a => a.href)")
    assert badges == [badge_url(config, s.with_suffix(".ipynb")) for s in lesson_sources()]
    students = browser.execute_script("return Array.from(document.querySelectorAll('a.student')).map(a => a.href)")
    assert students == [badge_url(config, STUDENT / s.with_suffix(".ipynb").name) for s in lesson_sources()]
    kaggle = browser.execute_script("return Array.from(document.querySelectorAll('a.kaggle')).map(a => a.href)")
    assert kaggle == [kaggle_url(config, s.with_suffix(".ipynb")) for s in lesson_sources()]
    kaggle_students = browser.execute_script(
        "return Array.from(document.querySelectorAll('a.student-kaggle')).map(a => a.href)")
    assert kaggle_students == [kaggle_url(config, STUDENT / s.with_suffix(".ipynb").name) for s in lesson_sources()]
    pages = browser.execute_script(
        "return Array.from(document.querySelectorAll('td a:not([class])')).map(a => a.href)")
    assert pages == [(site / f"{s.stem}.html").as_uri() for s in lesson_sources()]


@pytest.mark.parametrize("source", lesson_sources(), ids=lambda s: s.stem)
def test_lesson_page_renders_images_and_links_its_own_notebook(site, browser, source):
    browser.get((site / f"{source.stem}.html").as_uri())
    images = browser.execute_script(IMAGES)
    assert images and all(loaded for _, loaded in images), f"images that did not render: {images}"
    links = browser.execute_script("return Array.from(document.links).map(a => a.href)")
    assert badge_url(course_config(), source.with_suffix(".ipynb")) in links
    assert kaggle_url(course_config(), source.with_suffix(".ipynb")) in links
    plots = [src for src, _ in images if src.startswith("data:image/png")]
    has_plot = any("image/png" in o.get("data", {}) for c in nbformat.read(source.with_suffix(".ipynb"), 4).cells
                   for o in c.get("outputs", []))
    assert bool(plots) == has_plot, "every plot in the notebook shows on its page"
