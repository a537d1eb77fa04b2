# The two commands a newcomer needs: `make demo` and `make test`.
# Both bootstrap uv (into .tools/ when it is not on PATH) and install from uv.lock.

SHELL := /bin/bash
PYTHON ?= python3
UV_VERSION := 0.13.8
UV := $(shell command -v uv 2>/dev/null || echo $(CURDIR)/.tools/bin/uv)
RUN := $(UV) run --locked --no-sync

.PHONY: setup demo test lint types contracts pytest conformance faults bench clean

$(CURDIR)/.tools/bin/uv:
	$(PYTHON) -m venv $(CURDIR)/.tools
	$(CURDIR)/.tools/bin/pip install --quiet "uv==$(UV_VERSION)"

.venv/.synced: uv.lock pyproject.toml sim/pyproject.toml | $(UV)
	$(UV) sync --locked
	touch $@

setup: .venv/.synced

demo: setup
	$(RUN) pyccm demo

# The whole check: lint, types, import contracts and tests, run at the same time (they share
# nothing, and the tests mostly wait on the processes they start); each part's output is
# printed whole when it ends. TEST_JOBS=1 runs them one after the other.
TEST_JOBS ?= 4
test: setup
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) -O lint types contracts pytest

lint: setup
	$(RUN) ruff check .
	$(RUN) ruff format --check .

types: setup
	$(RUN) mypy

contracts: setup
	$(RUN) lint-imports

# The suite on PYTEST_WORKERS processes (pytest-xdist; PYTEST_WORKERS=0 runs it in this one).
# A module's tests stay on one worker (--dist loadscope), so its module-scoped simulators and
# process trees start once; tests/support/ports.py gives each worker its own ports.
PYTEST_WORKERS ?= 4
pytest: setup
	$(RUN) pytest -q -n $(PYTEST_WORKERS) --dist loadscope

# pyccm against the real Keystone, Neutron, Octavia and Nova (docs/testing.md#conformance).
# The services install once per machine into ~/.cache/pyccm-conformance.
conformance: setup
	$(PYTHON) conformance/install.py
	$(RUN) pytest -m conformance -v -p no:cacheprovider tests/conformance

# Faults and failover drills on the real tree (docs/testing.md#faults); FAULTS_ARGS=--quick
# runs them smaller (about 5 minutes; the full suite with its 30-minute soak about 40).
faults: setup
	$(RUN) python -m bench.faults $(FAULTS_ARGS)

bench: setup
	$(RUN) python -m bench.kube_sim
	$(RUN) python -m bench.openstack_sim
	$(RUN) python -m bench.manager
	$(RUN) python -m bench.e2e_init
	$(RUN) python -m bench.service_scale
	$(RUN) python -m bench.large_cluster --max-request-body-size 4194304
	$(RUN) python -m bench.scaling
	$(RUN) python -m bench.tree_memory

# The container image (deploy/image/README.md): the Containerfile built with buildah, on
# local Debian bases when no registry is reachable (PYTHON_IMAGE=python:3.11-slim to use
# that one), saved as build/pyccm-image.oci.tar. Needs root; installs buildah and
# mmdebstrap with apt-get when missing.
.PHONY: image image-test
image:
	deploy/image/build.sh

# The image tier (tests/image): the built image's own command run inside it with buildah,
# the whole tree against both simulators, as uid 65532 on an unchanged root; its packages.
image-test: setup image
	$(RUN) pytest -m image -v -p no:cacheprovider tests/image

clean:
	rm -rf .venv .tools .mypy_cache .ruff_cache .pytest_cache
