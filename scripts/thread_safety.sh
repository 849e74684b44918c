#!/usr/bin/env bash
# Clang's thread-safety analysis over traceml's headers: every header (but the LibTorch ones:
# torch_adapter.hpp, distributed.hpp, session_torch.hpp) is included into one translation unit, compiled with clang++-14
# -fsyntax-only -Wthread-safety -Werror=thread-safety. A member annotated TRACEML_GUARDED_BY(mu) that is
# read or written without mu held, or a TRACEML_REQUIRES function called without it, fails the check
# (the macros and the annotated mutex: include/traceml/detail/thread_safety.hpp).
#
# The GPU headers (gpu/, session_gpu.hpp) need the CUDA toolkit's headers (CUDA_HOME, default /usr/local/cuda); without them
# they are skipped, said so, and the rest is checked. Without clang++-14 the whole check is skipped.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CXX=${TRACEML_TSA_CXX:-clang++-14}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "thread_safety: $CXX not found; thread-safety analysis skipped (install clang-14)"
  exit 0
fi

cd "$ROOT/include"
headers=()
gpu_flags=()
while IFS= read -r h; do
  case "$h" in
    traceml/torch_adapter.hpp | traceml/distributed.hpp | traceml/session_torch.hpp) continue ;;  # LibTorch
    traceml/session_gpu.hpp) continue ;;  # the CUDA toolkit's headers: with gpu/ below
  esac
  headers+=("$h")
done < <(find traceml -name '*.hpp' ! -path 'traceml/gpu/*' | sort)

if [ -f "$CUDA_HOME/include/cuda_runtime_api.h" ]; then
  while IFS= read -r h; do headers+=("$h"); done < <(find traceml/gpu -name '*.hpp' | sort)
  headers+=(traceml/session_gpu.hpp)
  gpu_flags=(-isystem "$CUDA_HOME/include")
  [ -d "$CUDA_HOME/extras/CUPTI/include" ] && gpu_flags+=(-isystem "$CUDA_HOME/extras/CUPTI/include")
else
  echo "thread_safety: no CUDA toolkit at $CUDA_HOME; the gpu/ headers are skipped"
fi

tu=$(mktemp --suffix=.cpp)
trap 'rm -f "$tu"' EXIT
for h in "${headers[@]}"; do echo "#include \"$h\""; done >"$tu"

"$CXX" -std=c++17 -fsyntax-only -Wthread-safety -Werror=thread-safety -I"$ROOT/include" "${gpu_flags[@]}" "$tu"
echo "thread_safety: ${#headers[@]} headers, no thread-safety warning"
