"""`make course` end to end on tiny lessons: build/ is written, failures give a non-zero exit."""

import course
import course_site
import pytest

LESSON = """# %% [markdown]
# # 01 · Tiny lesson
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://example.invalid)
#
# **Time:** 5 minutes.

# %%
print(6 * 7)
"""


@pytest.fixture
def tiny_course(tmp_path, monkeypatch):
    lessons = tmp_path / "notebooks"
    lessons.mkdir()
    monkeypatch.setattr(course, "BUILD", tmp_path / "build")
    monkeypatch.setattr(course, "lesson_sources", lambda: sorted(lessons.glob("*.py")))
    # The real lessons' student versions are not this course's, and rewriting notebooks/student/ here would race
    # with the tests that read them in another worker.
    monkeypatch.setattr(course, "write_student_versions", lambda config: [])
    # The tiny lessons live outside the repository: give report.md a stand-in address (the site's pages take
    # theirs from the lesson's name, as if it were in notebooks/).
    monkeypatch.setattr(course, "badge_markdown", lambda config, path: f"[badge]({path.name})")
    monkeypatch.setattr(course_site, "DOCS", ())  # the guide links to the real lessons, which this course lacks
    return lessons


CHILD = """
# %%
import subprocess
import sys

child = subprocess.run([sys.executable, "-c", "raise SystemExit('a child failing on purpose')"])
assert child.returncode == 1
"""


def test_course_writes_the_site(tiny_course, tmp_path, capfd):
    (tiny_course / "01_tiny.py").write_text(LESSON + CHILD)
    assert course.main() == 0
    out, err = capfd.readouterr()  # what reached the terminal, at the file-descriptor level
    lines = out.strip().splitlines()
    assert lines[0].startswith("[1/1] 01_tiny") and lines[0].endswith(" ok") and lines[2].startswith("lesson")
    assert len(lines) == 6 and lines[-1].startswith("total") and err == ""  # one line, the table, nothing else
    assert "a child failing on purpose" in (tmp_path / "build" / "logs" / "01_tiny.log").read_text()
    build = tmp_path / "build"
    assert "42" in (build / "notebooks" / "01_tiny.ipynb").read_text()  # the executed notebook, for download
    page = (build / "notebooks" / "01_tiny.html").read_text()
    assert "01 · Tiny lesson" in page and "42" in page and 'src="../_images/colab-badge.svg"' in page
    assert (build / "notebooks" / "student" / "01_tiny.html").exists()
    index = (build / "index.html").read_text()
    assert 'href="notebooks/01_tiny.html"' in index and "<td><p>5 minutes</p></td>" in index
    assert (build / "search.html").exists() and (build / "searchindex.js").exists()
    report = (build / "report.md").read_text()
    assert "| 01 · Tiny lesson |" in report and "| ok |" in report and "Total:" in report


def test_a_failing_lesson_fails_the_course(tiny_course, capsys):
    (tiny_course / "01_tiny.py").write_text(LESSON)
    (tiny_course / "02_broken.py").write_text(LESSON.replace("print(6 * 7)", "1 / 0"))
    assert course.main() == 1
    out = capsys.readouterr().out
    assert "[2/2] 02_broken" in out and "FAILED: cell 2 ('1 / 0'): ZeroDivisionError" in out
    assert "the failing cell:\n    | 1 / 0\n  its error:" in out and "ZeroDivisionError: division by zero" in out


def test_a_broken_link_fails_the_site_and_the_course(tiny_course, tmp_path, capsys):
    (tiny_course / "01_tiny.py").write_text(
        LESSON.replace("**Time:** 5 minutes.", "**Time:** 5 minutes. See [lesson 02](02_missing.ipynb).")
    )
    assert course.main() == 1
    out = capsys.readouterr().out
    assert "[1/1] 01_tiny" in out and " ok" in out  # the lesson ran; its page is what is wrong
    assert "the site was not built" in out and "02_missing.ipynb" in out
    assert "02_missing.ipynb" in (tmp_path / "build" / "logs" / "site.log").read_text()
