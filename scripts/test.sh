#!/usr/bin/env bash
# make test: start the local S3 server, run lint, type checks (unless SKIP_LINT is set) and the whole test
# suite, stop S3 always.
#   scripts/test.sh S3_DIR S3_PORT [pytest args...]
set -uo pipefail
s3_dir="$1"; s3_port="$2"; shift 2
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
bin="$here/.venv/bin"

started=$(date +%s)
trap 'bash scripts/s3-local.sh stop "$s3_dir"' EXIT
s3_started=$(date +%s%N)
env_lines="$(bash scripts/s3-local.sh start "$s3_dir" "$s3_port")" || { echo "test: local S3 did not start" >&2; exit 1; }
eval "$env_lines"
echo "test: local S3 at $SMART_TRANSFER_TEST_S3_ENDPOINT (started in $(( ($(date +%s%N) - s3_started) / 1000000 )) ms)"

# bytecode for the project's modules, as an installed package has: this machine sets PYTHONDONTWRITEBYTECODE,
# so each of the suite's ~2,000 Python processes (servers, CLI runs) would otherwise compile every module
# it imports from source (~0.05-0.08 s of CPU each)
"$bin/python" -m compileall -q -j 2 smart_transfer tests scripts > /dev/null || true

# Spark's class-data-sharing archive (scripts/spark_cds.py) is built beside the lint and type checks
# (bounded: speed only, the tests run without it); an interrupted run stops the build too
cds_out="$(mktemp)"
timeout 900 "$bin/python" scripts/spark_cds.py "$here/.smart-transfer/spark-cds" > "$cds_out" &
cds_pid=$!
trap 'kill "$cds_pid" 2>/dev/null; rm -f "$cds_out"; bash scripts/s3-local.sh stop "$s3_dir"' EXIT

status=0
if [ -z "${SKIP_LINT:-}" ]; then  # SKIP_LINT=1: make test-faults, after make test checked the same tree
  "$bin/ruff" check smart_transfer tests scripts || status=1
  "$bin/mypy" || status=1
fi
wait "$cds_pid"
if [ -s "$cds_out" ]; then export SPARK_SUBMIT_OPTS="$(cat "$cds_out") ${SPARK_SUBMIT_OPTS:-}"; fi
rm -f "$cds_out"
"$bin/python" -m pytest -q -p no:cacheprovider "$@" || status=$?
echo "test: finished in $(( $(date +%s) - started )) s with status $status"
exit "$status"
