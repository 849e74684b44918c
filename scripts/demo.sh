#!/usr/bin/env bash
# The main job: builds traceml and runs the gradient-accumulation experiment (examples/qwen3) on its
# default settings: the tiny model on a machine without a GPU, Qwen3-1.7B on a GPU. Outputs go to
# out/ (table on the terminal; JSON summary, per-step JSONL, Chrome trace beside it).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_missing_packages
# Only what the demo runs: the test suite and benchmarks are scripts/test.sh's to build.
BUILD_TARGETS="qwen3_accumulation traceml_minimal_example" configure_and_build
mkdir -p "$ROOT/out"
if [ -x "$BUILD_DIR/examples/qwen3/qwen3_accumulation" ]; then
  exec "$BUILD_DIR/examples/qwen3/qwen3_accumulation" --out "$ROOT/out" "$@"
else
  exec "$BUILD_DIR/examples/minimal/traceml_minimal_example" "$ROOT/out" "$@"
fi
