// traceml: stages 1 and 2 of attribution (attribution.hpp) -- phase and step spans become windows,
// and the windows are indexed so that "which windows contain this GPU time?" costs a binary search,
// not a scan of the round.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/intervals.hpp"
#include "traceml/gpu/activity.hpp"
#include "traceml/phase_kind.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// One step or phase span as attribution sees it.
struct window {
  std::size_t span = 0;    ///< index into attribution_input::spans
  std::int32_t step = -1;  ///< the span's step number
  bool is_step = false;
  int depth = 0;  ///< nesting among phases of one thread (larger = inner); steps -1
  std::uint32_t thread = 0;
  std::int64_t cpu_begin = 0, cpu_end = 0;
  bool has_gpu = false;  ///< both markers seen, on one device and stream, in order
  std::uint32_t device = 0, stream = 0;
  std::int64_t gpu_begin = 0, gpu_end = 0;  ///< end of the begin marker .. start of the end marker

  /// The window busy and idle time are measured in: the GPU window where there are markers, else
  /// the CPU window. Never inverted.
  interval measured() const noexcept {
    const std::int64_t lo = has_gpu ? gpu_begin : cpu_begin, hi = has_gpu ? gpu_end : cpu_end;
    return {lo, std::max(lo, hi)};
  }
};

/// Stage 1: every step and phase span becomes a window, in input order (micro-batch spans are not
/// windows: a micro-batch's phases carry its index). Cost: O(spans + markers).
inline std::vector<window> build_windows(const std::vector<marked_span>& spans,
                                         const std::vector<marker_time>& markers) {
  std::unordered_map<std::uint64_t, const marker_time*> marker_by_seq;
  marker_by_seq.reserve(markers.size());
  for (const auto& m : markers) marker_by_seq[m.seq] = &m;
  auto marker = [&](std::uint64_t seq) -> const marker_time* {
    if (seq == 0) return nullptr;
    auto it = marker_by_seq.find(seq);
    return it == marker_by_seq.end() ? nullptr : it->second;
  };
  std::vector<window> out;
  out.reserve(spans.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const span_record& sp = spans[i].span;
    if (sp.kind == phase_kind::microbatch) continue;
    window w;
    w.span = i;
    w.step = sp.step;
    w.is_step = sp.kind == phase_kind::step;
    w.depth = w.is_step ? -1 : sp.nesting;
    w.thread = sp.thread;
    w.cpu_begin = sp.begin_ns;
    w.cpu_end = sp.end_ns;
    const marker_time* b = marker(spans[i].begin_marker);
    const marker_time* e = marker(spans[i].end_marker);
    if (b && e && b->device == e->device && b->stream == e->stream && e->begin_ns >= b->end_ns) {
      w.has_gpu = true;
      w.device = b->device;
      w.stream = b->stream;
      w.gpu_begin = b->end_ns;
      w.gpu_end = e->begin_ns;
    }
    out.push_back(w);
  }
  return out;
}

/// GPU windows of one group (one stream, or one device), sorted by GPU begin, with a max-of-ends
/// tree over that order. "Which windows contain t?" is a binary search for the windows that begin
/// at or before t, then a descent into the subtrees whose latest end reaches t: O(log n) per window
/// found, whatever the overlaps (windows of one stream nest or are disjoint; windows of different
/// streams of a device overlap arbitrarily; a step window covering everything costs nothing more).
class window_group {
 public:
  void add(std::uint32_t w, std::int64_t begin, std::int64_t end) { entries_.push_back({begin, end, w}); }

  /// Sorts the windows and builds the tree; call once, after the last add().
  void seal() {
    std::sort(entries_.begin(), entries_.end(), [](const entry& a, const entry& b) { return a.begin < b.begin; });
    leaves_ = 1;
    while (leaves_ < entries_.size()) leaves_ *= 2;
    max_end_.assign(2 * leaves_, std::numeric_limits<std::int64_t>::min());
    for (std::size_t i = 0; i < entries_.size(); ++i) max_end_[leaves_ + i] = entries_[i].end;
    for (std::size_t n = leaves_ - 1; n >= 1; --n) max_end_[n] = std::max(max_end_[2 * n], max_end_[2 * n + 1]);
  }

  /// Calls f(window index) for every window with begin <= t <= end, in no particular order.
  template <class F>
  void for_each_containing(std::int64_t t, F&& f) const {
    const auto first_after = std::upper_bound(entries_.begin(), entries_.end(), t,
                                              [](std::int64_t v, const entry& e) { return v < e.begin; });
    const std::size_t limit = static_cast<std::size_t>(first_after - entries_.begin());
    if (limit > 0) descend(1, 0, leaves_, limit, t, f);
  }

  /// Latest GPU end of a step window in this group; lowest() when the group has no step window.
  std::int64_t last_step_end = std::numeric_limits<std::int64_t>::lowest();

 private:
  struct entry {
    std::int64_t begin, end;
    std::uint32_t window;
  };
  template <class F>
  void descend(std::size_t node, std::size_t lo, std::size_t hi, std::size_t limit, std::int64_t t, F& f) const {
    if (lo >= limit || max_end_[node] < t) return;
    if (node >= leaves_) {
      f(entries_[node - leaves_].window);
      return;
    }
    const std::size_t mid = lo + (hi - lo) / 2;
    descend(2 * node, lo, mid, limit, t, f);
    descend(2 * node + 1, mid, hi, limit, t, f);
  }
  std::vector<entry> entries_;
  std::vector<std::int64_t> max_end_;  // node 1 is the root; leaves at [leaves_, 2 * leaves_)
  std::size_t leaves_ = 1;
};

inline std::uint64_t stream_key(std::uint32_t device, std::uint32_t stream) noexcept {
  return (std::uint64_t{device} << 32) | stream;
}

/// Stage 2's result: the windows of a round, reachable without scanning them all.
struct window_index {
  std::unordered_map<std::uint64_t, window_group> by_stream;                  ///< GPU windows per stream_key()
  std::unordered_map<std::uint32_t, window_group> by_device;                  ///< GPU windows per device, all streams
  std::vector<std::size_t> steps;                                             ///< step windows, by step number
  std::unordered_map<std::int32_t, std::size_t> step_by_number;               ///< the first step window of a number
  std::unordered_map<std::int32_t, std::vector<std::size_t>> phases_by_step;  ///< in input order
  std::int64_t last_cpu_end = 0;  ///< CPU end of the last step (by number); later work may be a later step's
};

/// Stage 2: groups the GPU windows per stream and per device, the steps by number and the phases by
/// step. Cost: O(windows log windows).
inline window_index index_windows(const std::vector<window>& ws) {
  window_index ix;
  for (std::size_t i = 0; i < ws.size(); ++i) {
    const window& w = ws[i];
    if (w.is_step)
      ix.steps.push_back(i);
    else
      ix.phases_by_step[w.step].push_back(i);
    if (!w.has_gpu) continue;
    const auto id = static_cast<std::uint32_t>(i);
    window_group& own = ix.by_stream[stream_key(w.device, w.stream)];
    own.add(id, w.gpu_begin, w.gpu_end);
    if (w.is_step) own.last_step_end = std::max(own.last_step_end, w.gpu_end);
    ix.by_device[w.device].add(id, w.gpu_begin, w.gpu_end);
  }
  for (auto& g : ix.by_stream) g.second.seal();
  for (auto& g : ix.by_device) g.second.seal();
  std::stable_sort(ix.steps.begin(), ix.steps.end(),
                   [&](std::size_t a, std::size_t b) { return ws[a].step < ws[b].step; });
  for (auto s : ix.steps) ix.step_by_number.emplace(ws[s].step, s);
  if (!ix.steps.empty()) ix.last_cpu_end = ws[ix.steps.back()].cpu_end;
  return ix;
}

}  // namespace detail
TRACEML_END_NAMESPACE
