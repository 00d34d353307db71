"""scripts/gpu/gpu_wheels.py (make gpu-wheels): the wheels a GPU image lacks for the GPU suite, for a node with no
index."""

import json
import os
import platform
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import gpu_wheels
import pytest
import runner_steps
import torch
import wheels_select
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from paths import ROOT
from wheels_select import Dist

from tests.conftest import skip_unless_an_index_serves, venv_seeing

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"

# A closure as pip's report gives it (made up, the shape of the real one): two tooling pins, a lesson helper that
# asks for torch, torchvision and a numpy newer than the image's, and what they need.
CLOSURE = {
    canonicalize_name(dist.name): dist
    for dist in [
        Dist(
            "nbval",
            "0.11.0",
            ["pytest>=7", "jupyter_client", "nbformat", "coverage", 'typing_extensions>=4.6; python_version < "3.12"'],
        ),
        Dist("jupytext", "1.19.6", ["markdown-it-py>=1.0", "PyYAML", "nbformat", "packaging"]),
        Dist("nbconvert", "7.17.2", ["bleach[css]!=5.0.0", "jinja2>=3.0", "traitlets>=5.1"]),
        Dist("lesson-helper", "1.0", ["torch>=2", "torchvision", "numpy>=2.6"]),
        Dist("nbformat", "5.11.1", ["traitlets>=5.1", "jsonschema>=2.6"]),
        Dist("jupyter-client", "8.10.0", ["traitlets>=5.3", "pyzmq>=23.0", 'tomli; python_version < "3.11"']),
        Dist("pytest", "9.2.0", ["pluggy>=1.5", "iniconfig>=1"]),
        Dist("markdown-it-py", "4.3.0", ["mdurl~=0.1"]),
        Dist("jsonschema", "4.26.0", ["attrs>=22.2.0", "referencing>=0.28.4"]),
        Dist("bleach", "6.4.0", ["webencodings", 'tinycss2<1.5,>=1.1.0; extra == "css"']),
        *(
            Dist(name, version)
            for name, version in [
                ("traitlets", "5.16.1"),
                ("pyzmq", "27.3.0"),
                ("PyYAML", "6.0.4"),
                ("packaging", "26.4"),
                ("coverage", "7.17.5"),
                ("typing_extensions", "4.16.0"),
                ("tomli", "2.3.0"),
                ("pluggy", "1.7.0"),
                ("iniconfig", "2.3.1"),
                ("mdurl", "0.1.2"),
                ("attrs", "26.1.0"),
                ("referencing", "0.37.0"),
                ("webencodings", "0.6.1"),
                ("tinycss2", "1.4.0"),
                ("Jinja2", "3.1.6"),
                ("torch", "2.14.1"),
                ("torchvision", "0.29.1"),
                ("numpy", "2.6.0"),
            ]
        ),
    ]
}
ROOTS = ["nbval==0.11.0", "jupytext==1.19.6", "nbconvert==7.17.2", "lesson-helper==1.0"]
IMAGE_FREEZE = """\
# an image's pip freeze
traitlets==5.2.0
pyzmq==26.0.0
packaging==24.0
PyYAML @ file:///croot/pyyaml_1698096049011/work
markdown-it-py==2.2.0
attrs==21.3.0
Jinja2==3.1.4
bleach==6.2.0
coverage==7.16.2
pytest==9.1.1
torch==2.11.0+cu130
numpy==2.5.2
"""


def kept(selection):
    return {canonicalize_name(name) for name, _ in selection.keep}


def test_selection_leaves_out_what_the_image_has_at_a_satisfying_version_and_never_torch_numpy_or_pytest():
    image = wheels_select.parse_freeze(IMAGE_FREEZE)
    selection = wheels_select.select(CLOSURE, ROOTS, image, "3.12")
    assert kept(selection) == {
        # what the image lacks, on the target
        "nbval", "jupytext", "nbconvert", "lesson-helper", "nbformat", "jupyter-client", "jsonschema",
        "referencing",
        # what it has older than a requirement in the closure
        "traitlets",  # 5.2.0, jupyter-client needs >=5.3
        "attrs",  # 21.3.0, jsonschema needs >=22.2.0
        # an extra asked of a package the image has (bleach[css]) brings what the image's bleach may lack
        "tinycss2",
    }  # fmt: skip
    # at a satisfying version (an unknown one where nothing asks for a version: PyYAML), with what only they
    # need (mdurl, webencodings: the image's markdown-it-py and bleach bring their own): left out
    assert not kept(selection) & {"pyzmq", "packaging", "pyyaml", "markdown-it-py", "jinja2", "bleach", "coverage"}
    assert not kept(selection) & {"mdurl", "webencodings"}
    # never carried, whatever the image has; nor what only they need (pytest's pluggy)
    assert not kept(selection) & {"torch", "torchvision", "numpy", "pytest", "pluggy", "iniconfig"}
    # markers for another Python: typing_extensions is nbval's on Python < 3.12 only, tomli on < 3.11
    assert not kept(selection) & {"typing-extensions", "tomli"}
    assert "typing-extensions" in kept(wheels_select.select(CLOSURE, ROOTS, image, "3.11"))
    assert "tomli" in kept(wheels_select.select(CLOSURE, ROOTS, image, "3.10"))
    assert selection.notes == [
        "image has attrs 21.3.0, the tooling needs attrs>=22.2.0 (jsonschema): its wheel is included",
        "image has traitlets 5.2.0, the tooling needs traitlets>=5.1 (nbconvert), traitlets>=5.1 (nbformat), "
        "traitlets>=5.3 (jupyter-client): its wheel is included",
    ]
    # what is never carried but missing or too old there: the install will fail, and the warning says why
    assert len(selection.warnings) == 2
    numpy, torchvision = selection.warnings
    assert numpy.startswith("image has numpy 2.5.2, the tooling needs numpy>=2.6 (lesson-helper), and numpy is never")
    assert torchvision.startswith("the image has no torchvision") and "the install there will fail" in torchvision
    assert "pytest 9.1.1" in selection.from_image and "torch 2.11.0+cu130" in selection.from_image
    assert selection.unresolved == []


def test_a_requirement_only_the_target_python_has_is_resolved_in_a_second_pass(tmp_path, monkeypatch):
    """pip evaluates markers for the Python running it: resolving on 3.11 for 3.14 leaves out what 3.14 alone needs."""
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("".join(f"{name}==1.0\n" for name in wheels_select.TOOLING))
    tooling = {name: Dist(name, "1.0") for name in wheels_select.TOOLING}
    tooling["nbval"] = Dist("nbval", "1.0", ['backports-zstd>=1; python_version >= "3.14"'])
    asked = []

    def resolve(pins, python_version, glibc):
        asked.append(pins)
        return {**tooling, **({"backports-zstd": Dist("backports.zstd", "1.2")} if len(asked) > 1 else {})}

    monkeypatch.setattr(gpu_wheels, "resolve", resolve)
    selection = gpu_wheels.plan(requirements, {}, "3.14", "2.35")
    assert asked[1][-1] == "backports-zstd>=1" and len(asked) == 2
    assert ("backports.zstd", "1.2") in selection.keep and selection.unresolved == []
    asked.clear()
    assert ("backports.zstd", "1.2") not in gpu_wheels.plan(requirements, {}, "3.13", "2.35").keep
    assert len(asked) == 1
    # an image that has all of it: nothing to resolve, nothing to carry
    asked.clear()
    assert gpu_wheels.plan(requirements, {name: "1.0" for name in wheels_select.TOOLING}, "3.14", "2.35").keep == []
    assert asked == []


def test_a_freeze_gives_versions_by_canonical_name_and_none_where_it_does_not_say():
    image = wheels_select.parse_freeze(
        "# comment\nJinja2==3.1.6\ntyping_extensions===4.16.0\n"
        "pyzmq @ file:///tmp/wheels/pyzmq-26.2.0-cp312-cp312-manylinux_2_28_x86_64.whl\n"
        "PyYAML @ file:///croot/pyyaml_1698096049011/work\n"
        "-e git+https://github.com/o/r.git@abc#egg=my_tool\nbare-name\n--find-links /wheels\n"
    )
    assert image == {
        "jinja2": "3.1.6",
        "typing-extensions": "4.16.0",
        "pyzmq": "26.2.0",
        "pyyaml": None,
        "my-tool": None,
        "bare-name": None,
    }


def test_the_default_image_freeze_is_the_lent_gpu_image_with_its_torch():
    image = wheels_select.parse_freeze(gpu_wheels.DEFAULT_FREEZE.read_text())
    assert gpu_wheels.DEFAULT_FREEZE.read_text().startswith("# The GPU image")
    assert image["torch"] == "2.11.0" and image["torchvision"] == "0.26.0" and "nbval" not in image
    assert all(version is not None for version in image.values())


def test_a_requirements_file_without_a_tooling_pin_exits_non_zero_and_names_it(tmp_path, capsys):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("torch==2.14.1\nnbformat==5.11.1\nnbval>=0.10\n")
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("torch==2.11.0\n")
    code = gpu_wheels.main(
        ["--python-version", "3.12", "--image-freeze", str(freeze), "--requirements", str(requirements)]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "pins no version of nbclient, nbconvert, nbval, jupytext, ipykernel, ipywidgets" in err


def test_the_runner_pins_are_what_the_image_lacks_of_requirements_txt_less_torch_and_the_site_tools(monkeypatch):
    image = wheels_select.parse_freeze(gpu_wheels.DEFAULT_FREEZE.read_text())

    def version(name):  # runner_steps.missing_requirements as it runs on that image
        if canonicalize_name(name) in image:
            return image[canonicalize_name(name)]
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(runner_steps.metadata, "version", version)
    missing = runner_steps.missing_requirements(ROOT / "requirements.txt")
    pins = wheels_select.runner_pins(ROOT / "requirements.txt", image)
    assert sorted(pins.values()) == sorted(missing)
    # The notebook tooling alone: the image has the lessons' packages, less bitsandbytes, which the suite leaves out
    # (runner_steps.NOT_FOR_THE_SUITE: lesson 15 runs without it, and its wheel alone is 43 MB)
    assert "bitsandbytes" not in image and "bitsandbytes" in (ROOT / "requirements.txt").read_text()
    assert sorted(pins) == sorted(canonicalize_name(name) for name in wheels_select.TOOLING)
    del image["pytest-xdist"]  # an image without it (Colab's): the runner installs it too, so it is carried
    assert "pytest-xdist" in wheels_select.runner_pins(ROOT / "requirements.txt", image)


def test_a_failing_pip_is_an_error_that_shows_pips_output():
    with pytest.raises(gpu_wheels.GpuWheelsError, match=r"pip failed to resolve it \(2\):[\s\S]*no-such-option"):
        gpu_wheels.pip(["install", "--no-such-option"], "resolve it")


def make(*arguments):
    """make in the checkout, without what an outer make or the shell would pass down."""
    drop = ("PYTHON_VERSION", "IMAGE_FREEZE", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run(["make", "-C", str(ROOT), *arguments], capture_output=True, text=True, env=env)


def test_the_makefile_target_passes_python_version_and_image_freeze_through():
    done = make("-n", "gpu-wheels", "PYTHON_VERSION=3.12", "IMAGE_FREEZE=logs/pip-freeze-before.txt")
    assert done.returncode == 0, done.stderr
    assert 'scripts/gpu/gpu_wheels.py --python-version 3.12 --image-freeze "logs/pip-freeze-before.txt"' in done.stdout
    done = make("-n", "gpu-wheels", "PYTHON_VERSION=3.11")
    assert "scripts/gpu/gpu_wheels.py --python-version 3.11\n" in done.stdout and "--image-freeze" not in done.stdout
    done = make("gpu-wheels", "USE_SYSTEM_PYTHON=1")  # no PYTHON_VERSION: the usage, nothing run
    assert done.returncode != 0 and "usage: make gpu-wheels PYTHON_VERSION=3.12" in done.stdout
    makefile = (ROOT / "Makefile").read_text()
    assert "gpu-wheels" in makefile.split(".PHONY:", 1)[1].split("\n\n", 1)[0]


# --- end to end: a folder of wheels, an image without an index --------------------------------------------------


def clean_env(**extra):
    """No PYTHONPATH (the checkout) and no pip settings: pip sees the wheels folder alone, as on the GPU node."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", CUDA_VISIBLE_DEVICES="", **extra)
    return env


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """Skip unless a package index answers: one small wheel, the pinned nbval, through this machine's pip settings."""
    nbval = wheels_select.read_pins(ROOT / "requirements.txt", ["nbval"])["nbval"]
    skip_unless_an_index_serves(nbval, tmp_path_factory.mktemp("probe"), "--only-binary=:all:")


def image_distributions() -> set[str]:
    """What the GPU image has of this environment: requirements.txt's pins but the notebook tooling and the tools
    the suite does not use, with everything they need here (torch's closure...), and pip and setuptools."""
    tops = ["pip", "setuptools"]
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        spec = line.split("#", 1)[0].strip()
        name = spec and canonicalize_name(Requirement(spec).name)
        if name and name not in wheels_select.TOOLING and name not in runner_steps.NOT_FOR_THE_SUITE:
            tops.append(name)
    env, seen = default_environment(), set()
    while tops:
        name = canonicalize_name(tops.pop())
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.distribution(name).requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
                tops.append(req.name)
    return seen


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """A Python that sees torch and the rest of this environment but the notebook tooling and what only it needs:
    a venv whose .pth points at a folder of links to the entries of this site-packages the image's packages own."""
    base = tmp_path_factory.mktemp("image")
    names = image_distributions()
    assert not names & {canonicalize_name(name) for name in wheels_select.TOOLING}
    site, purelib = base / "site", Path(sysconfig.get_paths()["purelib"])
    site.mkdir()
    for name in names:
        for file in metadata.distribution(name).files or []:
            entry = file.parts[0]
            if entry not in ("..", "__pycache__") and not entry.endswith(".pth") and not (site / entry).exists():
                (site / entry).symlink_to(purelib / entry)
    return venv_seeing(base / "venv", site)


INSTALL = """
import json, sys
from pathlib import Path
sys.path.insert(0, {scripts!r})
import gpu_runner, runner_steps
work = Path({work!r})
before = gpu_runner.versions(sys.executable)
missing = runner_steps.install(Path({course!r}), sys.executable, before, work / "logs", work, wheels=Path({wheels!r}))
print(json.dumps({{"missing": missing, "torch": before["torch"]}}))
"""
# The tooling imports; torch is the image's own distribution, same version, same place (its metadata: no import).
CHECK = """
import nbval, nbclient, nbconvert, jupytext, ipykernel, ipywidgets
from importlib import metadata
torch = metadata.distribution("torch")
print(torch.version, torch.locate_file(""), nbval.__file__)
"""


def test_the_wheels_folder_installs_with_no_index_into_a_venv_that_already_has_torch_and_torch_is_unchanged(
    index, image, tmp_path
):
    assert subprocess.run([image, "-c", "import nbval"], capture_output=True, env=clean_env()).returncode != 0
    freeze = tmp_path / "pip-freeze-before.txt"
    freeze.write_text(
        subprocess.run(
            [image, "-m", "pip", "freeze"], capture_output=True, text=True, check=True, env=clean_env()
        ).stdout
    )
    assert f"torch=={metadata.version('torch')}\n" in freeze.read_text() and "nbval" not in freeze.read_text()
    # `make gpu-wheels` on a machine with an index, for this Python and this machine's glibc
    wheels, glibc = tmp_path / "whl", ".".join(platform.libc_ver()[1].split(".")[:2])
    made = subprocess.run(
        [sys.executable, ROOT / "scripts" / "gpu" / "gpu_wheels.py", "--python-version", PYTHON]
        + ["--image-freeze", str(freeze), "--dest", str(wheels), "--glibc", glibc],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    summary = made.stdout.strip().splitlines()[-1]
    files = sorted(wheel.name for wheel in wheels.glob("*.whl"))
    assert summary.startswith(f"{len(files)} wheels, ") and f"for CPython {PYTHON}: installs on the GPU" in summary
    carried = {canonicalize_name(name.split("-")[0]) for name in files}
    assert not carried & wheels_select.NEVER, files
    assert carried >= {canonicalize_name(name) for name in wheels_select.TOOLING}
    assert not carried & image_distributions(), "a wheel of what the image has at the same version"
    # the runner on the GPU node: the course's requirements.txt, a package to install, pip with no index
    course = tmp_path / "course"
    (course / "course_stub").mkdir(parents=True)
    (course / "course_stub" / "__init__.py").write_text("")
    (course / "requirements.txt").write_text((ROOT / "requirements.txt").read_text())
    (course / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "course-stub"\nversion = "0"\n'
    )
    code = INSTALL.format(
        scripts=str(ROOT / "scripts" / "gpu"), work=str(tmp_path), course=str(course), wheels=str(wheels)
    )
    # PIP_NO_COMPILE: no bytecode for the 40-odd packages, 5 s less; the install is the same
    done = subprocess.run(
        [image, "-c", code], capture_output=True, text=True, env=clean_env(PIP_NO_COMPILE="1"), timeout=600
    )
    log = tmp_path / "logs" / "install.log"
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + (log.read_text() if log.exists() else "")
    installed = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(canonicalize_name(Requirement(spec).name) for spec in installed["missing"]) == sorted(
        canonicalize_name(name) for name in wheels_select.TOOLING
    )
    after = subprocess.run([image, "-c", CHECK], capture_output=True, text=True, env=clean_env())
    assert after.returncode == 0, after.stderr[-3000:]
    version, torch_site, nbval_file = after.stdout.split()
    image_site = image.parent.parent.parent / "site"  # the image fixture's folder of links
    assert installed["torch"] == torch.__version__  # the runner's check: the same before and after its install
    assert version == metadata.version("torch") and Path(torch_site) == image_site
    assert nbval_file.startswith(str(image.parent.parent)), nbval_file  # into the image's venv, not this one


def test_a_failed_download_leaves_the_wheels_the_folder_had(tmp_path, monkeypatch):
    dest = tmp_path / ".whl"
    dest.mkdir()
    (dest / "nbval-0.11.0-py2.py3-none-any.whl").write_bytes(b"the wheel from last time")
    (dest / gpu_wheels.WRITTEN).write_text("nbval-0.11.0-py2.py3-none-any.whl\n")  # written by the tool, last time

    def pip_offline(args, what):
        raise gpu_wheels.GpuWheelsError(f"pip failed to {what} (1): no index reachable")

    monkeypatch.setattr(gpu_wheels, "pip", pip_offline)
    with pytest.raises(gpu_wheels.GpuWheelsError, match="no index reachable"):
        gpu_wheels.download([("nbval", "0.11.0")], dest, "3.12", "2.35")
    assert sorted(w.name for w in dest.glob("*.whl")) == ["nbval-0.11.0-py2.py3-none-any.whl"]
    assert [p.name for p in tmp_path.iterdir()] == [".whl"]  # no scratch folder left beside it

    def pip_downloads(args, what):
        folder = Path(args[args.index("-d") + 1])
        (folder / "nbval-0.11.1-py2.py3-none-any.whl").write_bytes(b"new")

    monkeypatch.setattr(gpu_wheels, "pip", pip_downloads)
    wheels = gpu_wheels.download([("nbval", "0.11.1")], dest, "3.12", "2.35")
    assert [w.name for w in wheels] == ["nbval-0.11.1-py2.py3-none-any.whl"]  # the new set replaces the old


def test_wheels_it_did_not_write_are_never_deleted(tmp_path, monkeypatch):
    # Issue 63: --dest deleted every wheel in the folder, a maintainer's own included.
    dest = tmp_path / "wheels"
    dest.mkdir()
    (dest / "mine-1.0-py3-none-any.whl").write_bytes(b"a wheel I built")
    monkeypatch.setattr(gpu_wheels, "pip", lambda args, what: pytest.fail("nothing is downloaded into such a folder"))
    with pytest.raises(gpu_wheels.GpuWheelsError, match="holds wheels gpu_wheels.py did not write"):
        gpu_wheels.download([("nbval", "0.11.1")], dest, "3.12", "2.35")
    assert (dest / "mine-1.0-py3-none-any.whl").read_bytes() == b"a wheel I built"
