# Shared by scripts/demo.sh and scripts/test.sh: install what is missing, find LibTorch, build.
# Sourced, not run.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${TRACEML_BUILD_DIR:-$ROOT/build}

# Debian packages the build and tests use. Installed only when missing (needs root or sudo).
# libopenblas0-pthread: Debian's LibTorch calls the system BLAS, which is otherwise the reference
# implementation; OpenBLAS makes the CPU matrix products (and so the CPU demo) about 8x faster.
# libgloo-dev: the headers of Gloo (built into LibTorch), for the tests whose ranks all-reduce through it.
# python3: scripts/check_tiers.py, the include-tier check that scripts/test.sh and CI run first.
TRACEML_PACKAGES=(cmake ninja-build g++ catch2 libcli11-dev nlohmann-json3-dev libbenchmark-dev libtorch-dev libopenblas0-pthread chromium libgloo-dev python3 tmux)

install_missing_packages() {
  command -v dpkg-query >/dev/null 2>&1 || { echo "traceml: not a Debian system; install the equivalents of: ${TRACEML_PACKAGES[*]}"; return 0; }
  local missing=()
  for p in "${TRACEML_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # A LibTorch from a Python torch installation (no package manager there) replaces libtorch-dev.
  if [ -n "$(torch_prefix)" ]; then missing=("${missing[@]/libtorch-dev}"); fi
  missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null 2>&1 || { echo "traceml: missing packages and no apt-get: ${missing[*]}"; return 0; }
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "traceml: installing ${missing[*]}"
  # A machine without a package registry (a GPU box with LibTorch from pip, say) carries on: the
  # configure step then says which optional parts it skips.
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
         --no-install-recommends "${missing[@]}" >/dev/null; }; then
    echo "traceml: could not install ${missing[*]}; continuing with what is there"
  fi
}

# CMake prefix of a Python torch installation, if there is one (e.g. the CUDA wheel on a GPU machine).
torch_prefix() {
  python3 -c 'import torch, torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true
}

configure_and_build() {
  local prefix_path="${CMAKE_PREFIX_PATH:-}"
  local tp
  tp=$(torch_prefix)
  [ -n "$tp" ] && prefix_path="$tp${prefix_path:+;$prefix_path}"
  # .deps/usr: header-only Debian packages unpacked by hand on a machine without a package manager.
  local extra=()
  if [ -d "$ROOT/.deps/usr" ]; then
    prefix_path="${prefix_path:+$prefix_path;}$ROOT/.deps/usr"
    # A system-wide Catch2 v3 would otherwise shadow the v2 there.
    [ -d "$ROOT/.deps/usr/lib/cmake/Catch2" ] && extra+=(-DCatch2_DIR="$ROOT/.deps/usr/lib/cmake/Catch2")
  fi
  local generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  cmake -S "$ROOT" -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    ${prefix_path:+-DCMAKE_PREFIX_PATH="$prefix_path"} "${extra[@]}" "$@"
  # BUILD_TARGETS: build only these (those the configuration has), not everything; the cache keeps
  # every option as it was, so a later full build (scripts/test.sh) still builds and runs everything.
  if [ -n "${BUILD_TARGETS:-}" ]; then
    local have=() t
    local listed
    listed=$(cmake --build "$BUILD_DIR" --target help 2>/dev/null || true)
    for t in $BUILD_TARGETS; do grep -qw -- "$t" <<<"$listed" && have+=("$t"); done
    [ ${#have[@]} -gt 0 ] && cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${have[@]}"
  else
    cmake --build "$BUILD_DIR" -j "$(nproc)"
  fi
}
