# The two commands of the README: `make serve` and `make test`. Every target installs what it needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The stamp changes when pyproject.toml does, so repeat runs skip the install (pyspark builds ~1 min).
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-16)
HOST ?= 127.0.0.1
PORT ?= 8080
ROOT ?= ./.smart-transfer/server
S3_DIR ?= $(CURDIR)/.smart-transfer/s3-test
S3_PORT ?= 17480
PYTEST_ARGS ?=

.PHONY: install serve test test-unit lint typecheck s3-start s3-stop clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[spark,dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@

install: $(STAMP)

serve: install
	$(BIN)/smart-transfer serve --host $(HOST) --port $(PORT) --root $(ROOT)

# Starts the local S3 server (installing Ceph RGW if missing), runs every test, stops S3 even on failure.
test: install
	@bash scripts/test.sh $(S3_DIR) $(S3_PORT) $(PYTEST_ARGS)

test-unit: install
	$(BIN)/python -m pytest tests/unit -q $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check smart_transfer tests scripts
	$(BIN)/ruff format --check smart_transfer tests scripts

typecheck: install
	$(BIN)/mypy

s3-start:
	bash scripts/s3-local.sh start $(S3_DIR) $(S3_PORT)

s3-stop:
	bash scripts/s3-local.sh stop $(S3_DIR)

clean:
	rm -rf .smart-transfer .pytest_cache .mypy_cache .ruff_cache
