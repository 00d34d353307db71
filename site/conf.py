"""Sphinx configuration of the course site (`make course` builds it; scripts/course/course_site.py stages its pages).

Sphinx with MyST-NB and the Sphinx Book Theme: the stack Jupyter Book 1 is made of, used directly. The pages
come from the notebooks `make course` has just executed (nb_execution_mode "off": nothing runs twice).
"""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_course = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]

project = "PyTorch on GPUs, the Colab way"
html_title = project
author = "the colab_gpu course authors"
copyright = "the colab_gpu course authors"

extensions = ["myst_nb", "sphinx.ext.githubpages"]
myst_enable_extensions = ["attrs_inline"]   # {.class} on a link: the tests find badges by class
myst_heading_anchors = 3
nb_execution_mode = "off"                   # make course executed them; the site shows those outputs
nb_merge_streams = True
exclude_patterns = ["**/.ipynb_checkpoints"]

html_theme = "sphinx_book_theme"
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_last_updated_fmt = None
html_show_sphinx = False
html_show_search_summary = False            # summaries fetch each page, which a browser refuses from file://
html_context = {"default_mode": "light"}    # no stored mode yet: the theme would log an error and pick "auto"
html_theme_options = {
    "repository_url": f"https://github.com/{_course['repository']}",
    "repository_branch": _course["branch"],
    "path_to_docs": "",                     # the staged pages mirror the repository: notebooks/NN_topic.ipynb
    "use_repository_button": True,
    "use_download_button": True,            # the executed .ipynb (and print to PDF)
    "launch_buttons": {"colab_url": "https://colab.research.google.com"},
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
