# Everything a fresh machine with Python 3.11+ and make needs. tools/uv.sh finds uv (PATH, the
# places uv's installers use, .venv-tools/) or installs it into the private .venv-tools/ without
# touching the system Python (PEP 668); uv then builds the locked environment in .venv with $(PY).
PY ?= python3
export PY
# uv uses the Python named by PY and never downloads an interpreter of its own.
export UV_PYTHON := $(PY)
export UV_PYTHON_DOWNLOADS := never
UV := sh tools/uv.sh
SYNC := $(UV) sync --locked --all-packages --quiet
RUN := $(UV) run --no-sync

.PHONY: uv sync demo test test-slow test-all lint format bench coverage protos clean

uv:
	@$(UV) --version >/dev/null

sync: uv
	@$(SYNC)

demo: sync
	$(RUN) python examples/demo.py

test: sync
	$(RUN) pytest -q

# Slow, multi-process and GPU tests (GPU ones skip themselves without cupy and a device).
test-slow: sync
	$(RUN) pytest -q -m "slow or distributed or gpu"

test-all: test test-slow

lint: sync
	$(RUN) ruff check .
	$(RUN) ruff format --check .

format: sync
	$(RUN) ruff format .
	$(RUN) ruff check --fix .

bench: sync
	$(RUN) python -m tools.bench $(BENCH)

coverage: sync
	$(RUN) python -m tools.op_coverage

protos: sync
	$(RUN) python -m tools.gen_protos

clean:
	rm -rf .venv .venv-tools .pytest_cache build dist
