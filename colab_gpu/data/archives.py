"""Your data on the runtime's disk (lesson 13): one archive copied from Drive and extracted, file reads timed.

- `copy_and_extract` copies one archive (from Drive, say) to the runtime's disk and extracts it, with progress
  bars: one large read instead of a network round trip per small file.
- `time_file_reads` measures reading a folder file by file (or one file), so the two can be compared.
- `read_bytes`: a file's bytes as a tensor, what the JPEG decoders take.
Hidden files and macOS's ``__MACOSX`` are never data (`is_ignored`), here and in image_folders.py.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

IGNORED_FOLDERS = ("__MACOSX",)  # macOS's zip metadata; names starting with "." are ignored too
_CHUNK = 8 << 20  # copy 8 MiB at a time
PROGRESS_FROM_MB = 50


def is_ignored(name: str) -> bool:
    """Hidden files and folders and macOS's __MACOSX: never data, never a class."""
    # ".." is not hidden: a member that climbs out of the folder must reach the check that refuses it
    return (name.startswith(".") and name not in (".", "..")) or name in IGNORED_FOLDERS


def any_ignored(member: str) -> bool:
    """Whether any part of the path ``member`` is ignored (`is_ignored`)."""
    return any(is_ignored(part) for part in Path(member).parts)


def folder_listing(folder: Path) -> str:
    """What ``folder`` holds, for an error message that says what exists."""
    if not folder.is_dir():
        return f"{folder} does not exist either."
    names = sorted(p.name for p in folder.iterdir())
    return f"{folder} holds {names[:12]}{' ...' if len(names) > 12 else ''}."


def _progress(total: int, desc: str, unit: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit == "B", disable=not enabled, leave=False)


def archive_name(archive: str | os.PathLike) -> str:
    """``my_photos`` for ``my_photos.zip`` (or .tar, .tar.gz, .tgz): the folder `copy_and_extract` writes. Lesson 13."""
    archive = Path(archive)
    for suffix in (".tar.gz", ".tgz", ".tar", ".zip"):
        if archive.name.lower().endswith(suffix):
            return archive.name[: -len(suffix)]
    return archive.stem


def _copy(source: Path, target: Path, progress: bool) -> None:
    with (
        open(source, "rb") as src,
        open(target, "wb") as dst,
        _progress(source.stat().st_size, f"copy {source.name}", "B", progress) as bar,
    ):
        while chunk := src.read(_CHUNK):
            dst.write(chunk)
            bar.update(len(chunk))


def _extract(archive: Path, target: Path, progress: bool) -> None:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zipped:  # ZipFile.extract drops ".." and absolute parts of names
            members = [m for m in zipped.infolist() if not any_ignored(m.filename)]
            for member in _progress_over(members, archive, progress):
                zipped.extract(member, target)
        return
    with tarfile.open(archive) as tarred:
        members = [m for m in tarred.getmembers() if m.name and not any_ignored(m.name)]
        for member in _progress_over(members, archive, progress):
            if hasattr(tarfile, "data_filter"):  # refuses links and paths that leave target
                tarred.extract(member, target, filter="data")
            elif (target / member.name).resolve().is_relative_to(target.resolve()) and not member.issym():
                tarred.extract(member, target)
            else:
                raise ValueError(f"{archive} holds {member.name!r}, which would be written outside {target}.")


def _progress_over(members: list, archive: Path, progress: bool):
    with _progress(len(members), f"extract {archive.name}", "file", progress) as bar:
        for member in members:
            yield member
            bar.update(1)


def _content_root(folder: Path) -> Path:
    # An archive of a folder (my_photos.zip holding my_photos/cats/...) has one folder at the top: the class
    # folders are one level down.
    entries = [p for p in folder.iterdir() if not is_ignored(p.name)]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else folder


def copy_and_extract(
    archive: str | os.PathLike, destination: str | os.PathLike, *, progress: bool | None = None
) -> Path:
    """Copy ``archive`` (.zip, .tar, .tar.gz) to ``destination`` on this runtime's disk, extract it, and return the
    folder that holds its class folders. Taught in lesson 13.

    One large sequential read of the archive replaces a network round trip per file on Google Drive. The
    extraction happens in a hidden folder that is renamed when complete: an interrupted run leaves no half tree.
    Run again with the same archive (same size and time), it returns the extracted folder without copying.
    macOS's ``__MACOSX`` folder and hidden files are left out (``ImageFolder`` would take them for classes).
    ``progress`` shows progress bars; by default for archives of ``PROGRESS_FROM_MB`` and more (a few seconds).
    """
    archive, destination = Path(archive), Path(destination)
    if not archive.is_file():
        raise FileNotFoundError(
            f"No archive at {archive}. {folder_listing(archive.parent)} On Colab, mount Drive first "
            "(from google.colab import drive; drive.mount('/content/drive')) and check the path."
        )
    if not (zipfile.is_zipfile(archive) or tarfile.is_tarfile(archive)):
        raise ValueError(
            f"{archive} is not a .zip or .tar(.gz) archive: make one with "
            "shutil.make_archive(name, 'zip', folder) or zip -r name.zip folder."
        )
    target = destination / archive_name(archive)
    marker = target / ".extracted_from"
    stamp = f"{archive.resolve()} {archive.stat().st_size} {archive.stat().st_mtime_ns}"
    if marker.is_file() and marker.read_text() == stamp:
        return _content_root(target)
    if progress is None:
        progress = archive.stat().st_size >= PROGRESS_FROM_MB * 1e6
    destination.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".extracting-", dir=destination) as scratch:
        local, tree = Path(scratch) / archive.name, Path(scratch) / "tree"
        _copy(archive, local, progress)
        tree.mkdir()
        _extract(local, tree, progress)
        if not any(tree.iterdir()):
            raise ValueError(f"{archive} holds no files (hidden files and __MACOSX are left out).")
        (tree / ".extracted_from").write_text(stamp)
        if target.exists():
            shutil.rmtree(target)  # an older extraction of another version of the archive
        tree.rename(target)
    return _content_root(target)


@dataclass(frozen=True)
class FileReads:
    """What `time_file_reads` measured: how many files, how many bytes, in how many seconds. Lesson 13."""

    files: int
    bytes: int
    seconds: float

    @property
    def files_per_s(self) -> float:
        return self.files / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds

    def __str__(self) -> str:
        return (
            f"{self.files:,} files, {self.bytes / 1e6:.1f} MB in {self.seconds:.3f} s "
            f"({self.files_per_s:,.0f} files/s, {self.mb_per_s:,.1f} MB/s)"
        )


def time_file_reads(path: str | os.PathLike, *, limit: int | None = None) -> FileReads:
    """Open and read every file under ``path`` (or the one file ``path``), at most ``limit`` files. Lesson 13.

    Hidden files and ``__MACOSX`` are left out, as `copy_and_extract` and `split_image_folder` leave them out.
    Files read recently come from the operating system's cache: the first read of files on Drive is the
    figure that costs a training epoch, later ones measure the cache."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"Nothing at {path}. {folder_listing(path.parent)}")
    files = (
        [path]
        if path.is_file()
        else sorted(p for p in path.rglob("*") if p.is_file() and not any_ignored(str(p.relative_to(path))))[:limit]
    )
    if not files:
        raise ValueError(f"{path} holds no files to read.")
    start, total = time.perf_counter(), 0
    for file in files:
        with open(file, "rb") as f:
            total += len(f.read())
    return FileReads(len(files), total, time.perf_counter() - start)


def read_bytes(path: str | os.PathLike) -> torch.Tensor:
    """A file's bytes as a 1-D uint8 CPU tensor, what `decode_jpegs` takes. Lesson 13."""
    return torch.frombuffer(bytearray(Path(path).read_bytes()), dtype=torch.uint8)
