// traceml: kernel names people can read. CUPTI reports mangled C++ names such as
// `_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_`;
// tables want `at::native::vectorized_elementwise_kernel<4,...>`.
//
// The rule (shorten_kernel_name):
//   1. Demangle Itanium names (those starting with "_Z", or with nvcc's `__nv_static_...__` prefix
//      for kernels of internal linkage); other names (extern "C" kernels, cuBLAS's
//      `sm90_xmma_gemm_...`) are kept as they are.
//   2. Drop the parameter list `(...)` at the end and the return type in front (`void `).
//   3. Drop `(anonymous namespace)::` qualifiers.
//   4. In the kernel's own template argument list keep the leading *simple* arguments (numbers,
//      bools, plain identifiers such as cuBLAS/CUTLASS configuration names) and replace everything
//      from the first compound argument (one with `::`, `<`, `(`, `*`, spaces...) by `...`. Nested
//      argument lists are never shown.
//   5. Cap the result at 160 characters.
// Slow path only (allocates): sources call it once per distinct kernel and cache the result.
//
// kernel_name_table holds the shortened names a source gives its activities. The run owns it: the
// source, the Chrome trace and every recording window that points at its names share it, so the
// names outlive the source (finish() releases CUPTI before it writes the outputs, and a window
// handed to on_trace_ready may be kept after the run).
#pragma once
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#if defined(__has_include)
#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#define TRACEML_HAS_CXXABI 1
#endif
#endif
#ifndef TRACEML_HAS_CXXABI
#define TRACEML_HAS_CXXABI 0
#endif

#include "traceml/config.hpp"
#include "traceml/detail/thread_safety.hpp"

TRACEML_BEGIN_NAMESPACE

namespace detail {
/// nvcc names kernels of internal linkage (in an anonymous namespace, or static)
/// `__nv_static_<n>__<file id>__Z...`.
constexpr const char* nv_static_prefix = "__nv_static_";
constexpr std::size_t nv_static_prefix_size = 12;

/// Whether `name` is one demangle() would try: Itanium (`_Z...`) or behind nvcc's prefix.
inline bool looks_mangled(const char* name) {
  return name &&
         ((name[0] == '_' && name[1] == 'Z') || std::strncmp(name, nv_static_prefix, nv_static_prefix_size) == 0);
}
}  // namespace detail

/// The demangled form of an Itanium-mangled name, or the name itself when it is not mangled (or
/// the platform has no demangler). Behind nvcc's prefix for kernels of internal linkage
/// (detail::nv_static_prefix), the mangled name after it is demangled. Slow path: allocates.
inline std::string demangle(const char* name) {
  if (!name) return std::string();
#if TRACEML_HAS_CXXABI
  if (std::strncmp(name, detail::nv_static_prefix, detail::nv_static_prefix_size) == 0) {
    if (const char* mangled = std::strstr(name + detail::nv_static_prefix_size, "__Z")) {
      const std::string inner = demangle(mangled + 1);
      if (inner != mangled + 1) return inner;
    }
  }
  if (name[0] == '_' && name[1] == 'Z') {
    int status = 0;
    char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status == 0 && out) {
      std::string s(out);
      std::free(out);
      return s;
    }
    std::free(out);
  }
#endif
  return std::string(name);
}

namespace detail {

/// Index of the '(' matching the ')' at `close`, or npos. Counts (), <> and [] alike so that
/// `foo<(char)1>(int)` and `operator()` do not confuse it.
inline std::size_t matching_open(const std::string& s, std::size_t close) {
  int depth = 0;
  for (std::size_t i = close + 1; i-- > 0;) {
    const char c = s[i];
    if (c == ')' || c == '>' || c == ']')
      ++depth;
    else if (c == '(' || c == '<' || c == '[') {
      if (--depth == 0) return c == '(' ? i : std::string::npos;
    }
  }
  return std::string::npos;
}

/// A template argument worth showing: a number, a bool or a plain identifier.
inline bool simple_template_arg(const std::string& a) {
  if (a.empty() || a.size() > 96) return false;
  for (char c : a) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

inline void erase_all(std::string& s, const char* what) {
  const std::size_t n = std::strlen(what);
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p)) s.erase(p, n);
}

/// A demangled name without its return type: everything up to the last space at template/paren
/// depth 0 goes.
inline std::string drop_return_type(std::string s) {
  int depth = 0;
  std::size_t last_space = std::string::npos;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<' || c == '(' || c == '[')
      ++depth;
    else if ((c == '>' || c == ')' || c == ']') && depth > 0)
      --depth;
    else if (c == ' ' && depth == 0)
      last_space = i;
  }
  if (last_space != std::string::npos) s.erase(0, last_space + 1);
  return s;
}

/// Each top-level template argument list of `s` keeps its leading simple arguments; from the first
/// compound one on, `...` (rule 4 at the top of this file).
inline std::string shorten_template_args(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    if (s[i] != '<') {
      out += s[i++];
      continue;
    }
    std::vector<std::string> args;
    std::string cur;
    int depth = 0;
    std::size_t j = i + 1;
    for (; j < s.size(); ++j) {
      const char c = s[j];
      if (c == '<' || c == '(' || c == '[') ++depth;
      if (c == '>' || c == ')' || c == ']') {
        if (depth == 0 && c == '>') break;
        --depth;
      }
      if (c == ',' && depth == 0) {
        args.push_back(cur);
        cur.clear();
        continue;
      }
      cur += c;
    }
    args.push_back(cur);
    out += '<';
    bool first = true;
    bool truncated = false;
    for (auto& a : args) {
      const std::size_t b = a.find_first_not_of(' ');
      const std::size_t e = a.find_last_not_of(' ');
      const std::string t = b == std::string::npos ? std::string() : a.substr(b, e - b + 1);
      if (t.empty() && args.size() == 1) break;  // `foo<>`
      if (!detail::simple_template_arg(t)) {
        truncated = true;
        break;
      }
      if (!first) out += ',';
      out += t;
      first = false;
    }
    if (truncated) out += first ? "..." : ",...";
    out += '>';
    i = j + 1;
  }
  return out;
}

}  // namespace detail

/// Demangle and shorten a kernel name for tables and traces (the rule is at the top of this file).
/// Slow path: allocates; cache the result per distinct kernel.
inline std::string shorten_kernel_name(const char* raw) {
  std::string s = demangle(raw);
  if (s.empty()) return "<unnamed>";
  const bool was_demangled = detail::looks_mangled(raw) && s != raw;
  if (!was_demangled) return s.size() > 160 ? s.substr(0, 157) + "..." : s;

  // 2a. Parameter list: the trailing "(...)" at depth 0, possibly followed by qualifiers.
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (!s.empty() && s.back() == ')') {
    const std::size_t open = detail::matching_open(s, s.size() - 1);
    if (open != std::string::npos && open > 0) s.erase(open);
  }
  // 3. Anonymous namespaces carry no information in a kernel table.
  detail::erase_all(s, "(anonymous namespace)::");

  // 2b. The return type in front.
  s = detail::drop_return_type(std::move(s));
  // 4. Each top-level template argument list (the kernel's own, and those of enclosing classes as
  // in `Foo<3>::kernel<...>`).
  std::string out = detail::shorten_template_args(s);
  if (out.size() > 160) out = out.substr(0, 157) + "...";
  return out;
}

/// A run's kernel names, each kept once: keep() returns a pointer that stays valid while the table
/// lives. Shared (std::shared_ptr) by the source that names activities and by whatever keeps those
/// activities past the source. Any thread; keep() is the slow path (once per distinct kernel).
class kernel_name_table {
 public:
  const char* keep(const std::string& name) {
    detail::lock_guard lock(mu_);
    return names_.insert(name).first->c_str();  // node-based: c_str() is stable
  }
  std::size_t size() const {
    detail::lock_guard lock(mu_);
    return names_.size();
  }

 private:
  mutable detail::mutex mu_;
  std::unordered_set<std::string> names_ TRACEML_GUARDED_BY(mu_);
};

TRACEML_END_NAMESPACE
