// The main() of the [gpu] test programs: without a device they say why and exit 77 (CTest: skipped),
// never pass silently. Include once, in the program's one CATCH_CONFIG_RUNNER source.
#pragma once
#include <cuda_runtime_api.h>
#include <torch/torch.h>

#include <cstdio>

#include "traceml/detail/diagnostics.hpp"

namespace traceml_test {

inline int run_gpu_tests(int argc, char** argv) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  if (!torch::cuda::is_available()) {
    std::printf("SKIPPED: no CUDA device visible to LibTorch\n");
    return 77;
  }
  traceml::reset_diagnostics(false);
  return Catch::Session().run(argc, argv);
}

}  // namespace traceml_test
