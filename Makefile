# Every target bootstraps .venv itself: uv when it is on PATH, else python3 -m venv + pip.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV := $(shell command -v uv 2>/dev/null)

.PHONY: bench demo test lint unit contract clean mongoeco

$(BIN)/python:
ifdef UV
	$(UV) venv --python $(PYTHON) $(VENV)
else
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
endif

# One stamp per extra set, refreshed whenever pyproject.toml changes.
$(VENV)/.installed-%: pyproject.toml | $(BIN)/python
ifdef UV
	$(UV) pip install --quiet --python $(BIN)/python -e '.[$*]'
else
	$(BIN)/python -m pip install --quiet -e '.[$*]'
endif
	@touch $@

bench: $(VENV)/.installed-bench
	$(BIN)/imbucket bench

demo: $(VENV)/.installed-bench
	$(BIN)/imbucket demo

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	$(BIN)/pytest

# The MongoDB stand-in's own venv (.venv-mongoeco, Python >= 3.13, pinned mongoeco). The test
# fixture builds it on first use too; this target builds it up front and fails loudly.
mongoeco: $(VENV)/.installed-test
	$(BIN)/python -m tests.mongo_emulator

clean:
	rm -rf $(VENV) .venv-mongoeco .venv-mongoeco.lock .pytest_cache .mypy_cache .ruff_cache
