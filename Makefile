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
# pytest-xdist workers for `make test` (tests wait on servers, storage and subprocesses more than on the
# two cores; a file's tests stay on one worker, so its module-scoped servers start once). 0: one process.
TEST_WORKERS ?= 3

NODE_DEPS := tools/asyncapi-validate/node_modules/.installed

.PHONY: install node-deps chromium system-packages serve docs docs-serve test test-faults test-unit lint typecheck specs demo bench loadtest s3-start s3-stop clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --config-settings editable_mode=compat -e '.[spark,dev,bench]'
	@rm -f $(VENV)/.installed-*
	@touch $@

install: $(STAMP)

# The official AsyncAPI parser (npm) validates asyncapi/ in the tests.
$(NODE_DEPS): tools/asyncapi-validate/package-lock.json
	cd tools/asyncapi-validate && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

node-deps: $(NODE_DEPS)

# Headless Chromium and chromedriver (Debian packages) for the browser tests (tests/browser); once.
chromium:
	bash scripts/chromium-local.sh

# Every Debian package the tests use (Chromium, nginx, Ceph), each installed once by its own script. One
# target, so that `make -j` runs these apt-get calls one after another (dpkg allows one at a time) while
# pip and npm install beside them, and no test worker ever installs a package.
system-packages:
	bash scripts/chromium-local.sh
	bash scripts/nginx-local.sh install
	bash scripts/s3-local.sh install

# Regenerate asyncapi/ and openapi/ from the code (a test fails when they drift).
specs: install
	$(BIN)/python scripts/specs.py

serve: install
	$(BIN)/smart-transfer serve --host $(HOST) --port $(PORT) --root $(ROOT)

# The documentation site (docs/, mkdocs.yml): regenerate the reference pages, build with --strict (a
# warning, such as a broken link, fails) into .smart-transfer/site; docs-serve serves it on 127.0.0.1.
DOCS_PORT ?= 8000
export NO_MKDOCS_2_WARNING := 1
docs: install
	$(BIN)/python scripts/docs_reference.py
	$(BIN)/mkdocs build --strict --quiet

docs-serve: install
	$(BIN)/python scripts/docs_reference.py
	$(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:$(DOCS_PORT)

# Starts the local S3 server (installing Ceph RGW if missing), runs every test, stops S3 even on failure.
test: install node-deps system-packages
	@bash scripts/test.sh $(S3_DIR) $(S3_PORT) -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The long fault runs (they load the CPU on purpose and bound every run): clients killed at many random
# points, server killed mid-push, S3 outage and S3 paused (SIGSTOP) mid-transfer, racing pushers, replicas
# behind nginx (long pushes, SIGTERM of a replica), and the CLI fuzzer's larger profile
# (SMART_TRANSFER_CLI_FUZZ_FAULTS_EXAMPLES per command, 40 by default). FAULT_WORKERS files run at once,
# each worker with its own private S3 for outages and stalls; lint and type checks ran in `make test`.
# Three: the run waits on stalls and timeouts by design (two workers kept the 2 cores ~73% busy), so a
# third cuts its time by a third, and the added load makes it a harder test of every bound.
FAULT_WORKERS ?= 3
test-faults: install node-deps system-packages
	@SKIP_LINT=1 bash scripts/test.sh $(S3_DIR) $(S3_PORT) -n $(FAULT_WORKERS) --dist loadfile -m faults tests/faults tests/integration/test_cli_fuzz.py $(PYTEST_ARGS)

test-unit: install
	$(BIN)/python -m pytest tests/unit -q $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check smart_transfer tests scripts examples
	$(BIN)/ruff format --check smart_transfer tests scripts examples

typecheck: install
	$(BIN)/mypy

# Benchmarks against s5cmd, rclone (Debian package, installed if missing), the AWS CLI and the simple
# protocol on a private local S3. BENCH_ARGS picks cases, e.g. BENCH_ARGS="--cases s,g".
bench: install
	bash scripts/bench-peers.sh install
	@# compiled bytecode, as an installed package has (this machine sets PYTHONDONTWRITEBYTECODE)
	$(BIN)/python -m compileall -q smart_transfer
	$(BIN)/python scripts/bench.py $(BENCH_ARGS)

# Load test (Locust, headless; scripts/loadtest.py): a mix of pulls, pushes, REST and Delta Sharing users at
# 50, 100 and 200 concurrent clients for 60 s each, on the embedded store and on a private local S3 (started
# and stopped here), one server and two replicas behind nginx. LOADTEST_ARGS, e.g. "--quick" (10 and 20
# clients for 10 s) or "--levels 20,40 --duration 30 --stores s3"; results in bench-results/loadtest/.
LOADTEST_ARGS ?=
loadtest: install
	bash scripts/nginx-local.sh install
	$(BIN)/python -m compileall -q smart_transfer
	$(BIN)/python scripts/loadtest.py $(LOADTEST_ARGS)

# The whole story on the embedded server: Spark ingest, push, pull, ingest more, sync back.
demo: install
	bash scripts/demo.sh

s3-start:
	bash scripts/s3-local.sh start $(S3_DIR) $(S3_PORT)

s3-stop:
	bash scripts/s3-local.sh stop $(S3_DIR)

clean:
	rm -rf .smart-transfer .pytest_cache .mypy_cache .ruff_cache
