// A minimal NVTX tool for tests: NVTX (header-only, compiled into the test) loads this library from
// NVTX_INJECTION64_PATH at the first NVTX call and calls InitializeInjectionNvtx2 with the
// export-table getter. We fill the CORE2 (domain) slots the core uses and record every call, so the
// test can check names, nesting, categories and payloads without Nsight Systems or a GPU.
#include <nvtx3/nvToolsExt.h>

#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "nvtx_injection.hpp"

namespace {

using traceml_test::nvtx_call;
using traceml_test::nvtx_event;

// A domain handle is opaque to the application: ours points at one of these.
struct domain_entry {
  char name[32];
};

struct log_state {
  std::mutex mu;
  std::vector<nvtx_event> events;
  domain_entry domains[16] = {};
  int domain_count = 0;
};

log_state& state() {
  static log_state s;
  return s;
}

// Nesting is per thread, as NVTX push/pop ranges are.
thread_local std::int32_t tls_depth = 0;

// Copies `src` into `dst`, truncating to fit; always terminated.
void copy_name(char* dst, std::size_t size, const char* src) {
  std::size_t i = 0;
  for (; src && src[i] && i + 1 < size; ++i) dst[i] = src[i];
  dst[i] = '\0';
}

const char* domain_name(nvtxDomainHandle_t d) { return d ? reinterpret_cast<const domain_entry*>(d)->name : ""; }

std::uint64_t this_thread_id() { return std::hash<std::thread::id>{}(std::this_thread::get_id()); }

void record(nvtx_event e) {
  auto& s = state();
  e.thread = this_thread_id();
  std::lock_guard<std::mutex> lock(s.mu);
  s.events.push_back(e);
}

nvtxDomainHandle_t NVTX_API domain_create_a(const char* name) {
  auto& s = state();
  nvtxDomainHandle_t handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.domain_count == 16) return nullptr;
    domain_entry& d = s.domains[s.domain_count++];
    copy_name(d.name, sizeof d.name, name);
    handle = reinterpret_cast<nvtxDomainHandle_t>(&d);
  }
  nvtx_event e;
  e.call = nvtx_call::domain_create;
  copy_name(e.domain, sizeof e.domain, name);
  record(e);
  return handle;
}

int NVTX_API domain_range_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  nvtx_event e;
  e.call = nvtx_call::push;
  copy_name(e.domain, sizeof e.domain, domain_name(domain));
  if (a) {
    if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) copy_name(e.message, sizeof e.message, a->message.ascii);
    e.category = a->category;
    e.payload_type = a->payloadType;
    if (a->payloadType == NVTX_PAYLOAD_TYPE_INT32) e.payload = a->payload.iValue;
  }
  e.depth = ++tls_depth;
  record(e);
  return e.depth - 1;  // NVTX returns the 0-based level of the range just opened
}

int NVTX_API domain_range_pop(nvtxDomainHandle_t domain) {
  nvtx_event e;
  e.call = nvtx_call::pop;
  copy_name(e.domain, sizeof e.domain, domain_name(domain));
  e.depth = tls_depth;
  if (tls_depth > 0) --tls_depth;
  record(e);
  return e.depth - 1;
}

// Puts `fn` in slot `id` of a module's function table, if the table has that slot.
template <class Fn>
bool install(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn fn) {
  if (!table || id >= size || !table[id]) return false;  // size excludes the closing null slot
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  return true;
}

}  // namespace

extern "C" {

/// NVTX's entry point: returns nonzero on success (0 makes NVTX unload us and stay a no-op).
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  if (!get_export_table) return 0;
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;

  auto* version = static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
  if (version && version->struct_size >= sizeof(NvtxExportTableVersionInfo) && version->SetInjectionNvtxVersion)
    version->SetInjectionNvtxVersion(NVTX_VERSION);

  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) return 0;
  const bool ok = install(table, size, NVTX_CBID_CORE2_DomainCreateA, &domain_create_a) &&
                  install(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &domain_range_push_ex) &&
                  install(table, size, NVTX_CBID_CORE2_DomainRangePop, &domain_range_pop);
  return ok ? 1 : 0;
}

/// See traceml_test_nvtx_read_fn.
__attribute__((visibility("default"))) int traceml_test_nvtx_read(traceml_test::nvtx_event* out, int max) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const int total = static_cast<int>(s.events.size());
  for (int i = 0; i < total && i < max; ++i) out[i] = s.events[static_cast<std::size_t>(i)];
  return total;
}

}  // extern "C"
