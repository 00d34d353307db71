"""`make course`: run every lesson top to bottom on the best device here and write build/.

build/NN_topic.ipynb   the executed notebook
build/NN_topic.html    the same as a web page
build/index.html       the lesson table (title, Colab badge, seconds, device, status)
build/report.md        the same table in markdown

Prints one line per lesson as it goes, then the table; exits 1 if any lesson fails.
"""

from __future__ import annotations

import html

import nbformat
from nbconvert import HTMLExporter
from nbtools import (
    ROOT,
    badge_markdown,
    badge_url,
    course_config,
    device_label,
    execute,
    lesson_sources,
    lesson_title,
    read_lesson,
)

BUILD = ROOT / "build"


def write_index(rows: list[dict], config) -> None:
    body = "\n".join(
        f"<tr><td><a href='{r['html']}'>{html.escape(r['title'])}</a></td>"
        f"<td><a href='{r['badge']}'><img src='https://colab.research.google.com/assets/colab-badge.svg' "
        f"alt='Open In Colab'></a></td><td>{r['seconds']:.1f}</td><td>{html.escape(r['device'])}</td>"
        f"<td>{r['status']}</td></tr>"
        for r in rows
    )
    (BUILD / "index.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>PyTorch on GPUs, the Colab way</title></head>"
        "<body><h1>PyTorch on GPUs, the Colab way</h1><table border='1'>"
        "<tr><th>Lesson</th><th>Colab</th><th>Seconds</th><th>Device</th><th>Status</th></tr>"
        f"{body}</table><p>Repository: {html.escape(config.repository)}</p></body></html>\n"
    )


def write_report(rows: list[dict]) -> None:
    lines = ["| Lesson | Colab | Device | Seconds | Status |", "|---|---|---|---:|---|"]
    for r in rows:
        lines.append(f"| {r['title']} | {r['badge_md']} | {r['device']} | {r['seconds']:.1f} | {r['status']} |")
    (BUILD / "report.md").write_text("# Course run\n\n" + "\n".join(lines) + "\n")


def terminal_table(rows: list[dict]) -> str:
    """Lesson, device, seconds, status: aligned for a terminal."""
    width = max(len(r["title"]) for r in rows)
    header = f"{'lesson':<{width}}  {'device':<8}  {'seconds':>7}  status"
    body = [f"{r['title']:<{width}}  {r['device']:<8}  {r['seconds']:7.1f}  {r['status']}" for r in rows]
    return "\n".join([header, "-" * len(header)] + body)


def main() -> int:
    BUILD.mkdir(exist_ok=True)
    config = course_config()
    device = device_label()
    exporter = HTMLExporter()
    rows = []
    sources = lesson_sources()
    for number, source in enumerate(sources, start=1):
        print(f"[{number}/{len(sources)}] {source.stem} on {device} ...", flush=True)
        run = execute(read_lesson(source), cwd=source.parent)
        target = BUILD / f"{source.stem}.ipynb"
        nbformat.write(run.notebook, target)
        (BUILD / f"{source.stem}.html").write_text(exporter.from_notebook_node(run.notebook)[0])
        status = "ok" if run.error is None else f"FAILED: {run.error}"
        print(f"      {status} in {run.seconds:.1f} s", flush=True)
        paired = source.with_suffix(".ipynb")
        rows.append({
            "title": lesson_title(run.notebook), "html": f"{source.stem}.html", "device": device,
            "seconds": run.seconds, "status": status, "badge": badge_url(config, paired),
            "badge_md": badge_markdown(config, paired),
        })
    write_index(rows, config)
    write_report(rows)
    print("\n" + terminal_table(rows))
    print(f"\nWrote {BUILD}/: executed notebooks, HTML pages, index.html, report.md")
    return 1 if any(r["status"] != "ok" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
