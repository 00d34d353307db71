# Two commands do all the set-up on a fresh machine with python3 and make:
#   make course   run every lesson on the best device here, write build/ (the main job)
#   make test     lint, the package's unit tests, the tooling's tests (notebook hygiene included), nbval over every notebook
# Both create .venv from requirements.txt on first use.
# USE_SYSTEM_PYTHON=1 skips .venv and uses $(PYTHON) as it is (a GPU runner's preinstalled image).
# REQUIRE_CUDA=1 makes "no GPU" a failure everywhere.
# make test-compat TORCH=2.11.0 TORCHVISION=0.26.0 runs unit, tooling and nbval against another torch, in its own venv
# (scripts/course/test_compat.sh says how; PYTHON=python3.12 picks its interpreter, UNCAPPED=1 ignores pip's config).

PYTHON ?= python3
VENV ?= .venv
# Where pytest writes JUnit XML when set (scripts/gpu/gpu_suite.py reads it).
JUNIT_DIR ?=

ifeq ($(USE_SYSTEM_PYTHON),1)
PY := $(PYTHON)
ENV_READY :=
else
PY := $(VENV)/bin/python
ENV_READY := $(VENV)/.installed
# .venv is the course's own: Python caches the bytecode of what it imports there, or every lesson's kernel compiles
# torch's modules again.
unexport PYTHONDONTWRITEBYTECODE
endif

# The notebooks and scripts import colab_gpu from this checkout, with or without .venv.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

NBVAL := --nbval-lax --nbval-current-env --nbval-sanitize-with nbval_sanitize.cfg
junit = $(if $(JUNIT_DIR),--junitxml=$(JUNIT_DIR)/$(1).xml)
# Each part of `make test` runs within its time budget (pyproject.toml, [tool.course.test-budget]) and prints its
# slowest tests: tests/time_budget.py, a pytest plugin, told the part's name.
part = COURSE_TEST_PART=$(1)
BUDGET := -p tests.time_budget

.PHONY: test course check-mutants lint unit tooling nbval notebooks stamp gpu-suite gpu-kaggle import-gpu-run doctor bench clean test-compat \
	release test-wheel gpu-wheels

# uv installs requirements.txt (it unpacks on every core, pip on one); pip does where uv cannot (INSTALLER=pip).
# The set-up then imports WARM_IMPORTS, one process per comma-separated group, beside pip's editable install of
# colab_gpu: the tests' processes and lessons' kernels would otherwise compile the same modules at once. The recipe
# splits the groups with IFS=, (which splits only an expanded variable, hence `groups=`), then each group on spaces.
# -qq: pip prints its errors, not the warnings a machine's pip configuration may add to every line.
INSTALLER ?= uv
UV_VERSION ?= 0.13.9
WARM_IMPORTS ?= colab_gpu torchvision torch._inductor.compile_fx torch.distributed.run, sklearn.datasets matplotlib.pyplot \
	nbval ipykernel.kernelapp xdist jupytext nbconvert nbclient transformers transformers.models.auto.modeling_auto \
	transformers.models.llama.modeling_llama transformers.generation
PIP_QUIET := -qq --disable-pip-version-check --no-compile
$(VENV)/.installed: requirements.txt pyproject.toml
	@case "$(INSTALLER)" in uv|pip) ;; *) echo "INSTALLER=$(INSTALLER): the Makefile installs with uv (the default) or pip"; exit 2;; esac
	@echo "setting up $(VENV) from requirements.txt (once: under a minute with uv, two with pip)"
	@$(PYTHON) -m venv $(VENV)
	@if [ "$(INSTALLER)" = uv ] && $(VENV)/bin/python -m pip install $(PIP_QUIET) uv==$(UV_VERSION) >/dev/null 2>&1 \
		&& $(VENV)/bin/python -m uv pip install --quiet --python $(VENV)/bin/python -r requirements.txt; then :; \
	else \
		[ "$(INSTALLER)" = pip ] || echo "uv could not install requirements.txt: pip installs it (a minute or two)"; \
		$(VENV)/bin/python -m pip install $(PIP_QUIET) -r requirements.txt; \
	fi
	@$(VENV)/bin/python -m pip install $(PIP_QUIET) --no-deps -e . & editable=$$!; \
	warming=; groups="$(WARM_IMPORTS)"; IFS=,; for group in $$groups; do \
		IFS=' '; $(VENV)/bin/python -c "import importlib, sys; [importlib.import_module(name) for name in sys.argv[1:]]" $$group & \
		warming="$$warming $$!"; \
	done; IFS=' '; warm=0; for pid in $$warming; do wait $$pid || warm=1; done; \
	wait $$editable || exit 1; \
	[ $$warm = 0 ] || { echo "$(VENV) is installed, but importing WARM_IMPORTS ($(WARM_IMPORTS)) failed (above): fix what fails, or name other modules"; exit 1; }
	@touch $@

test: lint unit tooling nbval

# ruff format owns the layout of the package, the tests and the tooling (pinned ruff: its layout changes between
# releases). The lessons are checked, not formatted: they are laid out for reading in a notebook cell, and their
# .ipynb pairs hold outputs that only re-executing them rewrites.
lint: $(ENV_READY)
	@if ! $(PY) -c "" >/dev/null 2>&1; then echo "lint: the Python $(PY) does not run here (set PY= to one that does)"; exit 1; \
	elif $(PY) -m ruff --version >/dev/null 2>&1; then \
		$(PY) -m ruff check colab_gpu tests scripts notebooks/[0-9]*.py maintainers && \
		$(PY) -m ruff format --check colab_gpu tests scripts maintainers; \
	elif [ "$(USE_SYSTEM_PYTHON)" = 1 ]; then echo "ruff is not installed in $(PY): lint skipped"; \
	else echo "ruff missing from $(VENV)"; exit 1; fi

# Two suites, so that a maintainer of one does not wait on the other: `unit` tests the package (tests/), `tooling` the
# scripts and what they make (tests/tooling/). Both run in pytest-xdist workers where it is installed, with worksteal
# (a worker that runs out takes from another's queue): `unit` computes (one worker per core), many tooling tests wait
# on pip, git and the disk (4 workers). Each worker gets its share of the cores as math threads, as nbval's kernels do:
# four tooling workers with torch's default of one thread per core would run eight on two cores.
UNIT_WORKERS ?= 2
TOOLING_WORKERS ?= 4
xdist = $$($(PY) -c "import xdist" 2>/dev/null && echo "-n $(1) --dist worksteal")
# Each of N pytest processes gets its share of the cores as torch's math threads: more would oversubscribe them.
threads_each = $$($(PY) -c "import os, importlib.util as u; print(max(1, (os.cpu_count() or 1) // ($(1) if u.find_spec('xdist') else 1)))")
math_threads = OMP_NUM_THREADS=$(call threads_each,$(1)) MKL_NUM_THREADS=$(call threads_each,$(1))
unit: $(ENV_READY)
	$(call part,unit) $(call math_threads,$(UNIT_WORKERS)) $(PY) -m pytest tests --ignore=tests/tooling \
		$(call xdist,$(UNIT_WORKERS)) $(BUDGET) $(call junit,unit)

tooling: $(ENV_READY)
	@bash scripts/course/ensure_browser.sh
	$(call part,tooling) $(call math_threads,$(TOOLING_WORKERS)) $(PY) -m pytest tests/tooling \
		$(call xdist,$(TOOLING_WORKERS)) $(BUDGET) $(call junit,tooling)

# Each lesson and its student version run as one notebook, build/nbval/NN_topic.ipynb (scripts/common/nbval_pairs.py
# says why), NBVAL_WORKERS at a time, each kernel with its share of the cores as math threads; the longest lesson first
# (nbval_pairs.py's order, which --no-loadscope-reorder keeps), so that a long one does not run alone at the end.
NBVAL_WORKERS ?= 2
nbval: $(ENV_READY)
	@notebooks=$$($(PY) scripts/common/nbval_pairs.py) && $(PY) scripts/course/nbval_mutants.py $$notebooks || exit 1; \
	if $(PY) -c "import xdist" 2>/dev/null && [ "$(NBVAL_WORKERS)" -gt 1 ]; then \
		threads=$(call threads_each,$(NBVAL_WORKERS)); \
		echo "nbval: $(NBVAL_WORKERS) notebooks at a time, $$threads math thread(s) each, the longest lesson first"; \
		$(call part,nbval) OMP_NUM_THREADS=$$threads MKL_NUM_THREADS=$$threads $(PY) -m pytest $(NBVAL) $$notebooks \
			-n $(NBVAL_WORKERS) --dist loadfile --no-loadscope-reorder $(BUDGET) $(call junit,nbval); \
	else $(call part,nbval) $(PY) -m pytest $(NBVAL) $$notebooks $(BUDGET) $(call junit,nbval); fi

course: $(ENV_READY)
	@$(PY) scripts/course/course.py

# Every exercise's check, run on the mutants of its solution (scripts/course/check_mutants.py): a table per check.
# LESSONS="03 08" for some lessons, up to 40 mutants each; `make nbval` runs up to 4 of each exercise in the
# lesson's own kernel (scripts/course/nbval_mutants.py).
LESSONS ?=
check-mutants: $(ENV_READY)
	MPLBACKEND=Agg $(PY) scripts/course/check_mutants.py $(LESSONS)

notebooks: $(ENV_READY)
	$(PY) scripts/course/execute_notebooks.py

stamp: $(ENV_READY)
	$(PY) scripts/course/stamp_notebooks.py

# make test-wheel [WHEEL_ARGS="--borrow-from .venv-compat/torch-2.11.0/bin/python"]: build the wheel, install it
# with the lessons' setup cell next to an existing torch, run doctor, lesson 01 and the unit tests against it.
test-wheel: $(ENV_READY)
	$(PY) scripts/course/wheel_check.py --unit $(WHEEL_ARGS)

# make release VERSION=X.Y.Z [RELEASE_ARGS=--dry-run]: bump, changelog, API listing, restamp, commit, tag.
release: $(ENV_READY)
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=X.Y.Z (now: $$(sed -n 's/^__version__ = \"\(.*\)\"/\1/p' colab_gpu/__init__.py))"; exit 2; }
	$(PY) scripts/course/release.py $(VERSION) $(RELEASE_ARGS)

doctor: $(ENV_READY)
	$(PY) -m colab_gpu doctor

bench: $(ENV_READY)
	$(PY) -m colab_gpu bench --out build/bench

gpu-suite: $(ENV_READY)
	$(PY) scripts/gpu/gpu_suite.py $(GPU_SUITE_ARGS)

# make gpu-kaggle [GPU_KAGGLE_ARGS="--lessons 08"]: the GPU suite on Kaggle's GPU T4 x2 at the commit checked out (it
# must be pushed), through the `kaggle` CLI on PATH; a passing run is imported (scripts/gpu/gpu_kaggle.py, README "GPU CI").
gpu-kaggle: $(ENV_READY)
	$(PY) scripts/gpu/gpu_kaggle.py $(GPU_KAGGLE_ARGS)

# make gpu-wheels PYTHON_VERSION=3.12 [IMAGE_FREEZE=file]: into .whl/, the wheels of the notebook tooling and of its
# dependencies that a GPU image (its `pip freeze`, by default scripts/gpu/assets/gpu-image-freeze.txt) lacks, for that
# image's CPython on Linux x86-64: what `scripts/gpu/gpu_runner.py --wheels .whl` installs there with no index. Never
# torch, torchvision, numpy or pytest (scripts/gpu/gpu_wheels.py).
gpu-wheels: $(ENV_READY)
	@test -n "$(PYTHON_VERSION)" || { echo "usage: make gpu-wheels PYTHON_VERSION=3.12 [IMAGE_FREEZE=FILE]"; exit 2; }
	$(PY) scripts/gpu/gpu_wheels.py --python-version $(PYTHON_VERSION)$(if $(IMAGE_FREEZE), --image-freeze "$(IMAGE_FREEZE)")

# make import-gpu-run RUN=<run folder or zip>: a GPU run into reports/gpu/, references.json, the instructor guide.
import-gpu-run: $(ENV_READY)
	@test -n "$(RUN)" || { echo "usage: make import-gpu-run RUN=<the run's folder, or its zip>"; exit 2; }
	$(PY) scripts/gpu/import_gpu_run.py "$(RUN)"

test-compat:
	$(if $(filter 1,$(UNCAPPED)),PIP_CONFIG_FILE=/dev/null )TORCH=$(TORCH) TORCHVISION=$(TORCHVISION) \
		PYTHON=$(PYTHON) bash scripts/course/test_compat.sh

clean:
	rm -rf build .pytest_cache
