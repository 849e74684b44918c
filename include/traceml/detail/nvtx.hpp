// traceml: NVTX ranges for every scope, in a "traceml" domain, so Nsight Systems shows the phases.
// Header-only (NVTX3 needs nothing linked). With no tool attached each call is a jump through a
// no-op function pointer; with TRACEML_NO_NVTX or no NVTX3 headers the calls vanish.
#pragma once
#include <cstdint>

#include "traceml/config.hpp"
#include "traceml/phase_kind.hpp"

#if TRACEML_HAS_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

TRACEML_BEGIN_NAMESPACE
namespace detail {
TRACEML_BEGIN_MODE_NAMESPACE

#if TRACEML_HAS_NVTX
inline nvtxDomainHandle_t nvtx_domain() noexcept {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("traceml");
  return domain;
}

/// Push a range named `name`; steps and micro-batches carry their index as the payload, so the
/// timeline reads "step" with payload 12 rather than needing a formatted (allocated) string.
inline void nvtx_push(const char* name, phase_kind kind, std::int32_t index) noexcept {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  a.category = static_cast<std::uint32_t>(kind) + 1;  // 0 means "no category" in NVTX
  if (!is_phase(kind)) {
    a.payloadType = NVTX_PAYLOAD_TYPE_INT32;
    a.payload.iValue = index;
  }
  nvtxDomainRangePushEx(nvtx_domain(), &a);
}
inline void nvtx_pop() noexcept { nvtxDomainRangePop(nvtx_domain()); }
#else
inline void nvtx_push(const char*, phase_kind, std::int32_t) noexcept {}
inline void nvtx_pop() noexcept {}
#endif

TRACEML_END_MODE_NAMESPACE
}  // namespace detail
TRACEML_END_NAMESPACE
