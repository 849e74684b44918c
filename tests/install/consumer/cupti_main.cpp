// traceml::cupti: builds against the CUDA runtime and CUPTI headers, links neither (both are loaded
// at run time; run_consumer.cmake checks its NEEDED libraries), and runs anywhere. Without a GPU the
// CUPTI source is off and says why in its status; with one, it records.
#include <cstdio>
#include <string>

#include <traceml/gpu/cupti_source.hpp>

int main() {
  // The package points the first dlopen candidate at the CUPTI it found on this machine.
  const std::string lib = TRACEML_CUPTI_LIBRARY;
  std::FILE* f = lib.empty() ? nullptr : std::fopen(lib.c_str(), "rb");
  if (!f) {
    std::fprintf(stderr, "cupti consumer: TRACEML_CUPTI_LIBRARY '%s' is not a readable file\n", lib.c_str());
    return 1;
  }
  std::fclose(f);

  // Through traceml, which loads the CUDA runtime at run time: this program links none.
  const bool have_device = traceml::check_cuda_device().ok();
  traceml::cupti_source source;
  const std::string status = source.status();
  std::printf("cupti consumer: %s\n", status.c_str());
  // Without a device: "no NVIDIA driver" where none is loaded, else "no CUDA device" (device_check.hpp).
  const std::string expected = have_device ? "kernel attribution off: " : "kernel attribution off: no ";
  if (!source.ok() && status.rfind(expected, 0) != 0) {
    std::fprintf(stderr, "cupti consumer: off, and the status does not begin with '%s'\n", expected.c_str());
    return 1;
  }
  return 0;
}
