#!/usr/bin/env bash
# `make test-compat TORCH=2.11.0 TORCHVISION=0.26.0 [UNCAPPED=1] [PYTHON=python3.12]`:
# the unit tests, the tooling's tests and nbval, exactly as `make unit`, `make tooling` and `make nbval` run them,
# against another torch.
#
# Builds (once) its own venv .venv-compat/torch-$TORCH, installing the way a learner's runtime gets it:
#   1. torch==$TORCH torchvision==$TORCHVISION first (Colab's and Kaggle's images come with them),
#   2. the rest of requirements.txt, its torch/torchvision pins replaced by the versions just installed
#      (so pip keeps them and honours their own requirements), plus pyproject's build requirements,
#   3. colab_gpu from this checkout WITH its dependencies (`pip install -e .`, as a learner's pip does),
# and fails if steps 2 or 3 changed torch or torchvision (the package must never touch Colab's torch) or
# if `pip check` finds a conflict. A second call reuses the venv (stamp .installed) unless the versions,
# the Python, requirements.txt, pyproject.toml or this script changed (then steps 1-3 run again, which is
# quick when nothing changes). JUnit files and the summary line go to build/compat/torch-$TORCH/.
set -uo pipefail
usage="usage: make test-compat TORCH=2.11.0 TORCHVISION=0.26.0 [UNCAPPED=1] [PYTHON=python3.12]"
: "${TORCH:?$usage}" "${TORCHVISION:?$usage}"
PYTHON=${PYTHON:-python3}
MAKE=${MAKE:-make}
cd "$(dirname "$0")/.." || exit 1
# The Makefile puts the checkout on PYTHONPATH; pip would then take its colab_gpu.egg-info for an installed
# colab_gpu. `make unit`, `make tooling` and `make nbval` below set it again.
unset PYTHONPATH
VENV=.venv-compat/torch-$TORCH
PY=$PWD/$VENV/bin/python
OUTDIR=build/compat/torch-$TORCH
start=$(date +%s)

die() { echo "test-compat: $*" >&2; exit 1; }
pip_install() { "$PY" -m pip install -q --disable-pip-version-check "$@"; }
versions() {  # "torch X / torchvision Y", saying so when torchvision no longer imports (a torch it was not built for)
  "$PY" - 2>/dev/null <<'EOF'
import torch

try:
    import torchvision
    vision = torchvision.__version__
except Exception as error:
    vision = f"BROKEN ({type(error).__name__}: {(str(error).splitlines() or [''])[0]})"
print(f"torch {torch.__version__} / torchvision {vision}")
EOF
}

want_python=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || die "no interpreter $PYTHON"
if [ -x "$PY" ] && [ "$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" != "$want_python" ]; then
  echo "test-compat: $VENV was built with another Python; rebuilding it with $PYTHON ($want_python)"
  rm -rf "$VENV"
fi
key="torch==$TORCH torchvision==$TORCHVISION python==$want_python $(cat requirements.txt pyproject.toml scripts/course/test_compat.sh | sha256sum)"

if [ -f "$VENV/.installed" ] && [ "$(cat "$VENV/.installed")" = "$key" ]; then
  echo "test-compat: reusing $VENV ($(versions))"
else
  echo "test-compat: building $VENV with $PYTHON ($want_python)${PIP_CONFIG_FILE:+, PIP_CONFIG_FILE=$PIP_CONFIG_FILE}"
  [ -x "$PY" ] || "$PYTHON" -m venv "$VENV" || die "could not create $VENV"
  rm -f "$VENV/.installed"
  # 1. The runtime's torch and torchvision, first and alone.
  if ! pip_install "torch==$TORCH" "torchvision==$TORCHVISION"; then
    die "pip could not install torch==$TORCH torchvision==$TORCHVISION." \
        "A release newer than this machine's pip cap (pip config list) needs UNCAPPED=1."
  fi
  before=$(versions) || die "torch or torchvision does not import in $VENV"
  echo "test-compat: installed $before"
  # 2. Everything else the course pins, minus torch/torchvision (they stay as the runtime has them).
  rest=$(mktemp)
  trap 'rm -f "$rest"' EXIT
  grep -viE '^[[:space:]]*(torch|torchvision)[[:space:]]*([=<>!~;[]|$)' requirements.txt >"$rest"
  echo >>"$rest"
  # pyproject's build requirements (setuptools), so tests/tooling/test_install.py can build colab_gpu's metadata
  # offline, without build isolation, as it can in .venv (there torch brings a recent setuptools).
  "$PY" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))' \
    >>"$rest" || echo "test-compat: no tomllib in Python $want_python: build requirements not installed"
  # The installed torch/torchvision, named at their exact versions, only so that pip honours THEIR
  # requirements too (torch 2.11 requires setuptools<82, which the line above would otherwise break).
  "$PY" -c 'from importlib.metadata import version as v; print("torch==" + v("torch")); print("torchvision==" + v("torchvision"))' \
    >>"$rest" || die "torch or torchvision is not installed in $VENV"
  pip_install -r "$rest" || die "pip could not install requirements.txt (without torch/torchvision) into $VENV"
  after_requirements=$(versions)
  # 3. colab_gpu as a learner installs it: with its dependencies, so its torch floor is really resolved.
  pip_install -e . || die "pip could not install colab_gpu (pip install -e .) into $VENV"
  after=$(versions)
  echo "test-compat: before: $before"
  echo "test-compat: after requirements.txt: $after_requirements"
  echo "test-compat: after pip install -e .: $after"
  if [ "$after_requirements" != "$before" ] || [ "$after" != "$before" ]; then
    die "installing the course's requirements or colab_gpu CHANGED torch/torchvision ($before -> $after);" \
        "rm -rf $VENV before the next try"
  fi
  "$PY" -m pip check --disable-pip-version-check || die "the packages in $VENV conflict (pip check above)"
  echo "$key" >"$VENV/.installed"
fi
installed=$(date +%s)

# The Makefile's own targets, with this venv's interpreter in place of .venv's (as USE_SYSTEM_PYTHON does).
rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
"$MAKE" --no-print-directory unit PY="$PY" ENV_READY= JUNIT_DIR="$OUTDIR"
unit_rc=$?
"$MAKE" --no-print-directory tooling PY="$PY" ENV_READY= JUNIT_DIR="$OUTDIR"
tooling_rc=$?
"$MAKE" --no-print-directory nbval PY="$PY" ENV_READY= JUNIT_DIR="$OUTDIR"
nbval_rc=$?

end=$(date +%s)
summary=$("$PY" - "$OUTDIR" "$unit_rc" "$tooling_rc" "$nbval_rc" "$((installed - start))" "$((end - installed))" <<'EOF'
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import torch
import torchvision

outdir, unit_rc, tooling_rc, nbval_rc, install_s, test_s = sys.argv[1:]


def counts(name: str, rc: str) -> str:
    file = Path(outdir) / f"{name}.xml"
    if not file.exists():
        return f"{name} did not run (exit {rc})"
    root = ET.parse(file).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
    return (f"{name} {passed} passed, {n['failures']} failed, {n['errors']} errors, {n['skipped']} skipped"
            f" (exit {rc})")


python = ".".join(map(str, sys.version_info[:3]))
print(f"torch {torch.__version__} / torchvision {torchvision.__version__} on Python {python}: "
      f"{counts('unit', unit_rc)}, {counts('tooling', tooling_rc)}, {counts('nbval', nbval_rc)}; install {install_s} s, tests {test_s} s")
EOF
)
echo "$summary" | tee "$OUTDIR/summary.txt"
[ "$unit_rc" = 0 ] && [ "$tooling_rc" = 0 ] && [ "$nbval_rc" = 0 ]
