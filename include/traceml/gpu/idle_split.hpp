// traceml: why a GPU window was idle -- the idle time of a window split into three kinds (pure).
//
// Why: "the GPU idled 40% of forward" says nothing about the fix. Following Holistic Trace Analysis,
// the idle time is split by what the GPU had queued:
//   * other wait: the window's own work was not running, but other work of the step was (another
//     phase's or unattributed records, on another stream): the window waited beside it;
//   * kernel-to-kernel wait: nothing ran at all, for less than idle_kernel_gap_ns, between two GPU
//     activities inside the window -- the launch gap of work already queued;
//   * host wait: the rest -- nothing ran, for longer, or before the window's first or after its last
//     activity: the host had not enqueued the next work in time.
// Every idle nanosecond goes to exactly one kind, so host + kernel gap + other == window - busy.
#pragma once
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/intervals.hpp"

TRACEML_BEGIN_NAMESPACE

/// A gap with nothing on the GPU shorter than this, between two GPU activities, is kernel-to-kernel
/// wait (queued work launched back to back still leaves a few microseconds between kernels); longer,
/// or at the window's edge, it is host wait.
inline constexpr std::int64_t idle_kernel_gap_ns = 5'000;

/// A kernel shorter than this is "short" in the launch statistics: at that length the launch cost
/// on the host (several microseconds per kernel) is of the kernel's own order.
inline constexpr std::int64_t short_kernel_ns = 10'000;

/// One window's idle time by kind, in ns; the three sum to the idle time.
struct idle_split {
  std::int64_t host_ns = 0;
  std::int64_t kernel_gap_ns = 0;
  std::int64_t other_ns = 0;
  std::int64_t total() const noexcept { return host_ns + kernel_gap_ns + other_ns; }
};

namespace detail {

/// The idle time of [lo, hi) split by kind. `own` is the window's own busy time (its records and its
/// nested phases'), `all` every record of the step on any stream (own included); both merged
/// (merge_intervals), unclipped. Idle = [lo, hi) minus `own`; of it, what `all` covers is other
/// wait; each remaining gap (nothing on the GPU) is kernel-to-kernel wait when shorter than
/// `kernel_gap` and bounded on both sides by activity inside the window, host wait otherwise.
inline idle_split split_idle(const std::vector<interval>& own, const std::vector<interval>& all, std::int64_t lo,
                             std::int64_t hi, std::int64_t kernel_gap = idle_kernel_gap_ns) {
  idle_split out;
  if (hi <= lo) return out;
  // The gaps of `own` inside [lo, hi), then within each the parts `all` covers (other wait) and
  // those it does not (gaps with nothing on the GPU). The gaps come in time order, so one cursor
  // walks `all` once for the window: O(own + the part of all in the window), no search per gap.
  std::int64_t at = lo;
  auto next = std::upper_bound(all.begin(), all.end(), interval{lo, lo});
  if (next != all.begin() && std::prev(next)->second > lo) --next;
  const auto split_gap = [&](std::int64_t b, std::int64_t e) {
    if (e <= b) return;
    std::int64_t cur = b;
    const auto gap = [&](std::int64_t gb, std::int64_t ge) {
      if (ge <= gb) return;
      const bool inside = gb > lo && ge < hi;  // activity (own or other) on both sides, in the window
      (inside && ge - gb < kernel_gap ? out.kernel_gap_ns : out.host_ns) += ge - gb;
    };
    while (next != all.end() && next->second <= b) ++next;  // the first of `all` that ends after b
    for (auto it = next; it != all.end() && it->first < e; ++it) {
      if (it->second <= cur) continue;
      out.other_ns += std::min(e, it->second) - std::max(cur, it->first);
      gap(cur, std::max(cur, it->first));
      cur = std::max(cur, it->second);
      if (cur >= e) break;
    }
    gap(cur, e);
  };
  for (const auto& iv : own) {
    if (iv.second <= at) continue;
    if (iv.first >= hi) break;
    split_gap(at, std::min(iv.first, hi));
    at = std::max(at, iv.second);
    if (at >= hi) break;
  }
  split_gap(at, hi);
  return out;
}

}  // namespace detail
TRACEML_END_NAMESPACE
