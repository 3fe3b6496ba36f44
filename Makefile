# Every target bootstraps .venv itself and installs with uv: the one on PATH, or else one that
# pip puts into .venv first (a wheel from the registry; it installs the project's dependencies
# in seconds where pip takes most of half a minute, a sixth of `make bench` on a fresh clone).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# A third-party backend in miniature (docs/plugins.md): CI installs it and runs the contract suite
# on it through the imbucket.backends entry point and the pytest plugin, from its own directory.
EXAMPLE := examples/imbucket-example-store
UV_ON_PATH := $(shell command -v uv 2>/dev/null)
UV := $(or $(UV_ON_PATH),$(BIN)/uv)

.PHONY: bench demo test lint unit contract clean mongoeco plugin migrate-matrix samples

# A venv (.venv, .venv-plugin). Precious: a file built by a pattern rule is otherwise deleted
# as intermediate after the run.
.PRECIOUS: %/bin/python
%/bin/python:
ifdef UV_ON_PATH
	$(UV) venv --quiet --python $(PYTHON) $*
else
	$(PYTHON) -m venv $*
endif

ifndef UV_ON_PATH
$(BIN)/uv: | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
endif

# One stamp per extra set, refreshed whenever pyproject.toml changes.
$(VENV)/.installed-%: pyproject.toml | $(BIN)/python $(UV)
	$(UV) pip install --quiet --python $(BIN)/python -e '.[$*]'
	@touch $@

$(VENV)/.installed-example: $(EXAMPLE)/pyproject.toml $(VENV)/.installed-test
	$(UV) pip install --quiet --python $(BIN)/python -e $(EXAMPLE)
	@touch $@

bench: $(VENV)/.installed-bench
	$(BIN)/imbucket bench

# docs/samples/: the sample reports the docs link to, measured again and rendered by the report
# pipeline (src/bench/samples.py); tests/unit/test_samples.py checks they are its output.
samples: $(VENV)/.installed-bench
	$(BIN)/python -m imbucket.bench.samples

demo: $(VENV)/.installed-bench
	$(BIN)/imbucket demo

lint: $(VENV)/.installed-example
	$(BIN)/ruff check src tests examples
	$(BIN)/ruff format --check src tests examples
	$(BIN)/mypy
	$(BIN)/mypy $(EXAMPLE)/src
	$(BIN)/lint-imports

# The plugin run is the documented third-party command (docs/plugins.md). The suite runs on
# TEST_WORKERS pytest-xdist workers (each with a MongoDB emulator of its own): the longest
# tests (5,000 deleters on the emulator) then run beside the rest instead of after it.
TEST_WORKERS ?= 2
test: lint
	$(BIN)/pytest -n $(TEST_WORKERS)
	$(MAKE) --no-print-directory plugin

# The contract suite on the example third-party backend alone (part of `make test`), as a team
# runs it: imbucket built into a wheel and installed (not editable) with the example package
# into a venv of its own, and the documented command run from the example's directory, so that
# nothing of this checkout is imported. The wheel is rebuilt on every run; the venv and its
# dependencies are kept.
PLUGIN_VENV := .venv-plugin
PLUGIN_BIN := $(PLUGIN_VENV)/bin
WHEELS := $(PLUGIN_VENV)/wheels

plugin: | $(PLUGIN_BIN)/python $(UV)
	rm -rf $(WHEELS) build $(EXAMPLE)/build
	$(UV) build --quiet --wheel --out-dir $(WHEELS) .
	$(UV) build --quiet --wheel --out-dir $(WHEELS) $(EXAMPLE)
	$(UV) pip install --quiet --python $(PLUGIN_BIN)/python --reinstall-package imbucket \
		--reinstall-package imbucket-example-store --find-links $(WHEELS) \
		'imbucket[contract]' imbucket-example-store
	rm -rf build $(EXAMPLE)/build  # the wheel builds write into the source trees
	cd $(EXAMPLE) && ../../$(PLUGIN_BIN)/python -c 'import imbucket as i, imbucket.testing.suite as s, \
		sys; sys.exit(any("site-packages" not in m.__file__ for m in (i, s)))'
	cd $(EXAMPLE) && CI=false ../../$(PLUGIN_BIN)/pytest --imbucket-backend=example-dict \
		--imbucket-capabilities=buckets,send-claims,early-tags,spill,int64-fields -p no:cacheprovider

# The MongoDB stand-in's own venv (.venv-mongoeco, Python >= 3.13, pinned mongoeco). The test
# fixture builds it on first use too; this target builds it up front and fails loudly.
mongoeco: $(VENV)/.installed-test
	$(BIN)/python -m tests.mongo_emulator

# imbucket migrate between every ordered pair of the persistent backends here (sql-row and
# sql-bucket on SQLite and on the servers the IMBUCKET_TEST_POSTGRES_URL / _MARIADB_URL
# variables name, mongo-row and mongo-bucket on a mongoeco server started for the run), for
# the demo data and the bench small dataset, each verified (docs/migrate.md). Not part of
# `make test`: it takes hours in full; MATRIX_ARGS="--minutes 60" bounds it.
MATRIX_ARGS ?= --minutes 60
migrate-matrix: mongoeco
	$(BIN)/python tools/migrate_matrix.py --mongoeco .venv-mongoeco/bin/python $(MATRIX_ARGS)

clean:
	rm -rf $(VENV) $(PLUGIN_VENV) .venv-mongoeco .venv-mongoeco.lock .pytest_cache .mypy_cache .ruff_cache
