// traceml: the record every phase, micro-batch and step scope leaves behind.
#pragma once
#include <cstdint>

#include "traceml/config.hpp"
#include "traceml/phase_kind.hpp"

TRACEML_BEGIN_NAMESPACE

/// One closed interval on one thread, on the now_ns() clock. Scopes and trainer callbacks produce
/// exactly the same records; everything downstream (statistics, GPU attribution, sinks) reads these.
struct span_record {
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  const char* name =
      "";  ///< lives for the process: a string literal, a tag's `name`, or interned (detail/name_table.hpp)
  std::int32_t step = -1;        ///< step index (0-based), -1 outside any step
  std::int32_t microbatch = -1;  ///< micro-batch index inside the step, -1 outside any micro-batch
  std::uint32_t thread = 0;      ///< traceml thread number, in order of first record (never reused)
  phase_kind kind = phase_kind::user;
  std::uint8_t nesting = 0;  ///< enclosing phase scopes on this thread (0 = top-level phase)

  std::int64_t duration_ns() const noexcept { return end_ns - begin_ns; }
};

TRACEML_END_NAMESPACE
