# ---
# jupyter:
#   accelerator: GPU
#   colab:
#     gpuType: T4
#     provenance: []
#   jupytext:
#     cell_metadata_filter: tags,-all
#     notebook_metadata_filter: accelerator,colab,kernelspec,jupytext
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # GPU run for maintainers: the course's GPU suite on this runtime
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/colab-gpu-course/pytorch-gpus-colab/blob/main/maintainers/gpu_run.ipynb)
#
# Not a lesson. This runs `scripts/gpu/gpu_runner.py`, the same runner as the Kaggle kernel of `make gpu-kaggle`, on the
# GPU of this runtime, and downloads a zip that `make import-gpu-run RUN=gpu-run-<commit>.zip` brings into the
# course. It is how the reference figures of the course's other GPUs (L4, A100, H100 on Colab Pro) are measured,
# and how a maintainer without a Kaggle token runs the suite on a free T4.
#
# 1. Runtime > Change runtime type > the GPU to measure.
# 2. Set the commit below: a commit that is pushed, or `main`.
# 3. Runtime > Run all. The whole suite takes about 45 minutes on a T4 (an estimate; the run's manifest measures
#    it). The runner clones the course, installs only the tools this image lacks (never torch), runs the unit
#    tests with the GPU tests, every lesson under nbval and timed, and the benchmarks.
# 4. The zip downloads at the end. In your checkout: `make import-gpu-run RUN=~/Downloads/gpu-run-<commit>.zip`,
#    then commit `reports/gpu/`, `colab_gpu/references.json` and `docs/instructor_guide.md` in a pull request.

# %%
# @title The commit to run
REPOSITORY = "colab-gpu-course/pytorch-gpus-colab"  # @param {type:"string"}
COMMIT = "main"  # @param {type:"string"}
LESSONS = ""  # @param {type:"string"}

# %% [markdown]
# `LESSONS` left empty runs every lesson; `"08"` or `"01 04"` runs only those (a quick check, not a reference run).
# The runner is taken from the commit it runs, so the two always match.

# %%
import json
import os
import shutil
import subprocess
import sys
import urllib.request

urllib.request.urlretrieve(
    f"https://raw.githubusercontent.com/{REPOSITORY}/{COMMIT}/scripts/gpu/gpu_runner.py", "gpu_runner.py"
)
os.environ["REQUIRE_CUDA"] = "1"  # a runtime without a GPU stops here instead of measuring a CPU
command = [
    sys.executable,
    "gpu_runner.py",
    "--repo",
    f"https://github.com/{REPOSITORY}.git",
    "--sha",
    COMMIT,
    "--out",
    "gpu-run",
    *(["--lessons", *LESSONS.split()] if LESSONS.split() else []),
    *(["--resume"] if os.path.exists("gpu-run/manifest.json") else []),  # a second Run all finishes the run
]
with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as runner:
    for line in runner.stdout:  # the runner's progress, line by line, in this cell
        print(line, end="")
print(f"the runner exited with code {runner.returncode}")

# %%
manifest = json.loads(open("gpu-run/manifest.json").read())
archive = shutil.make_archive(f"gpu-run-{manifest['sha'][:7]}", "zip", root_dir=".", base_dir="gpu-run")
print(
    f"{manifest['status']}: commit {manifest['sha'][:7]} on {', '.join(manifest['gpus']) or 'no GPU'}, "
    f"{manifest['seconds'] / 60:.0f} min; {'; '.join(manifest['failures']) or 'no failure'}"
)
try:
    from google.colab import files

    files.download(archive)
except ImportError:
    print(f"not on Colab: the zip is {os.path.abspath(archive)}")
