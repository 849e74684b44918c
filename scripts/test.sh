#!/usr/bin/env bash
# Installs what is missing, builds everything, runs every test. GPU tests skip visibly without a GPU.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_missing_packages
# The include tiers first: a header including one of a higher tier fails in a second, before the build.
python3 "$ROOT/scripts/check_tiers.py"
configure_and_build
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" "$@"
