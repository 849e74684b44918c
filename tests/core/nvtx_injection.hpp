// The contract between the NVTX test injection library (nvtx_injection.cpp) and test_nvtx.cpp.
// NVTX loads the library itself (NVTX_INJECTION64_PATH); the test reaches the same loaded copy with
// dlopen(RTLD_NOLOAD) and reads what it recorded through the C functions below.
#pragma once
#include <cstdint>

namespace traceml_test {

enum class nvtx_call : std::int32_t { domain_create, push, pop };

/// One NVTX call as the injection saw it. Strings are copied: the test outlives nothing.
struct nvtx_event {
  nvtx_call call = nvtx_call::push;
  char domain[32] = {};           ///< name the domain was created with ("" for the global domain)
  char message[64] = {};          ///< push only: the ASCII message
  std::uint32_t category = 0;     ///< push only
  std::int32_t payload_type = 0;  ///< push only: NVTX_PAYLOAD_TYPE_*, 0 when none
  std::int32_t payload = 0;       ///< push only: the int32 payload when payload_type says so
  std::int32_t depth = 0;         ///< open ranges on the calling thread after a push / before a pop
  std::uint64_t thread = 0;       ///< an id of the calling thread (equal ids, same thread)
};

}  // namespace traceml_test

extern "C" {
/// Copies up to `max` recorded events, oldest first, into `out`; returns how many were recorded in
/// total. Events are never forgotten: tests remember the count before acting and read past it.
using traceml_test_nvtx_read_fn = int (*)(traceml_test::nvtx_event* out, int max);
}
