// traceml: Chrome trace-event JSON (loads in Perfetto and chrome://tracing). CPU records appear on
// their threads under process "traceml CPU", each thread under its OS thread id and name; GPU
// activities, when a source kept them, on one track per device and stream, each linked by a flow
// arrow from the phase that launched its first kernel; the steps' GPU memory peaks as a counter
// track of the GPU process. Sort-index metadata fixes the order: the host process first, then the
// GPUs by device; threads in order of first record, streams by id.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "traceml/analysis/outside_steps.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/json_writer.hpp"
#include "traceml/detail/output_file.hpp"
#include "traceml/gpu/gpu_memory.hpp"
#include "traceml/gpu/gpu_source.hpp"
#include "traceml/rank_identity.hpp"
#include "traceml/record.hpp"
#include "traceml/thread_identity.hpp"

TRACEML_BEGIN_NAMESPACE

/// What a trace shows besides spans and GPU activities; every part is optional.
struct chrome_trace_extras {
  std::string coverage;                    ///< which steps the trace holds (otherData.steps)
  std::vector<thread_identity> threads;    ///< OS ids and names of the recording threads (detail::thread_identities())
  std::vector<step_memory_sample> memory;  ///< per-step GPU memory peaks, drawn as a counter track
  /// The rank that wrote it (rank_identity.hpp): its processes are numbered and named apart from
  /// every other rank's, so that the ranks' traces merge into one (one process per rank).
  rank_identity rank;
  /// Gaps between consecutive steps (the last ones), drawn as slices on a track of their own,
  /// "between steps", named "epoch boundary" where an epoch mark fell; phases outside steps come with
  /// the spans (step -1), on their threads.
  std::vector<step_gap> gaps;
  std::vector<std::int64_t> epoch_marks;  ///< epoch marks, as instant events on the same track
};

namespace detail {
// Rank r's host is process 1 + 1000 r and its GPU d process 100 + d + 1000 r (one rank: 1 and 100 + d).
inline constexpr int cpu_pid = 1;
inline constexpr int gpu_pid_base = 100;
inline constexpr int rank_pid_stride = 1000;
/// The memory samplers do not say which device they sampled (the current one, usually 0): the
/// counter track goes to this device's process.
inline constexpr std::uint32_t memory_device = 0;
/// The host process's track for the gaps between steps: an id no OS thread or traceml index takes.
inline constexpr std::uint64_t between_steps_tid = std::uint64_t{1} << 40;

inline const char* activity_category(gpu_activity::type t) {
  switch (t) {
    case gpu_activity::type::kernel: return "kernel";
    case gpu_activity::type::memcpy: return "memcpy";
    case gpu_activity::type::memset: return "memset";
  }
  return "gpu";
}
}  // namespace detail

namespace detail {

/// Writes the trace's events, one kind of track per member. Times are microseconds from `origin`;
/// CPU threads appear under their OS id where `threads` knows it, else under traceml's index.
class chrome_trace_writer {
 public:
  chrome_trace_writer(json_writer& w, std::int64_t origin, const std::vector<thread_identity>& threads,
                      rank_identity rank = {})
      : w_(w),
        origin_(origin),
        rank_offset_(rank.distributed() ? rank_pid_stride * rank.rank : 0),
        prefix_(rank.distributed() ? "rank " + std::to_string(rank.rank) + ": " : std::string()) {
    for (const auto& t : threads) who_[t.index] = &t;
  }

  /// Names and sort indices: the host process first (0), then GPU d (1 + d), rank by rank; threads in order of
  /// first record, each named once (an OS id the system reused for a later thread keeps one name).
  void metadata(const std::string& run_name, const std::vector<span_record>& spans,
                const std::set<std::uint32_t>& devices) {
    name_meta(host_pid(), 0, "process_name", prefix_ + "traceml CPU: " + run_name);
    sort_meta(host_pid(), 0, "process_sort_index", sort_base());
    std::set<std::uint32_t> threads;
    for (const auto& r : spans) threads.insert(r.thread);
    std::set<std::uint64_t> named;
    for (auto t : threads) {
      const std::uint64_t tid = tid_of(t);
      if (!named.insert(tid).second) continue;
      const auto it = who_.find(t);
      name_meta(host_pid(), tid, "thread_name",
                it != who_.end() && !it->second->name.empty() ? it->second->name : "thread " + std::to_string(t));
      sort_meta(host_pid(), tid, "thread_sort_index", t);
    }
    for (auto d : devices) {
      name_meta(gpu_pid(d), 0, "process_name", prefix_ + "GPU " + std::to_string(d));
      sort_meta(gpu_pid(d), 0, "process_sort_index", sort_base() + 1 + static_cast<std::int64_t>(d));
    }
  }

  void cpu_spans(const std::vector<span_record>& spans) {
    for (const auto& r : spans) {
      w_.begin_object().member("ph", "X").member("pid", host_pid()).member("tid", tid_of(r.thread));
      w_.member("name", r.name).member("cat", to_string(r.kind));
      w_.member("ts", us(r.begin_ns)).member("dur", static_cast<double>(r.duration_ns()) / 1e3);
      w_.key("args").begin_object().member("step", r.step).member("microbatch", r.microbatch).end_object();
      w_.end_object();
    }
  }

  /// GPU tracks (one per device and stream), and one flow arrow per (step, micro-batch, phase) from
  /// the phase's span to the first activity it launched.
  void gpu_activities(const std::vector<span_record>& spans, const std::vector<gpu_activity>& gpu) {
    std::set<std::pair<std::uint32_t, std::uint32_t>> tracks;
    std::set<std::tuple<std::int32_t, std::int32_t, std::string>> linked;
    std::uint64_t flow_id = 0;
    for (const auto& a : gpu) {
      const int pid = gpu_pid(a.device);
      if (tracks.insert({a.device, a.stream}).second) {
        name_meta(pid, a.stream, "thread_name", "stream " + std::to_string(a.stream));
        sort_meta(pid, a.stream, "thread_sort_index", a.stream);
      }
      w_.begin_object().member("ph", "X").member("pid", pid).member("tid", a.stream);
      w_.member("name", a.name).member("cat", activity_category(a.what));
      w_.member("ts", us(a.begin_ns)).member("dur", static_cast<double>(a.end_ns - a.begin_ns) / 1e3);
      w_.key("args").begin_object().member("step", a.step).member("microbatch", a.microbatch);
      w_.member("phase", a.phase_name);
      if (a.what != gpu_activity::type::kernel) w_.member("bytes", a.bytes);
      w_.end_object().end_object();

      if (a.step < 0 || !*a.phase_name || !linked.insert({a.step, a.microbatch, a.phase_name}).second) continue;
      const auto launcher = std::find_if(spans.begin(), spans.end(), [&](const span_record& r) {
        return r.step == a.step && r.microbatch == a.microbatch && r.kind == a.phase &&
               std::string(r.name) == a.phase_name;
      });
      if (launcher == spans.end()) continue;
      ++flow_id;
      w_.begin_object().member("ph", "s").member("id", flow_id).member("name", "launch").member("cat", "launch");
      w_.member("pid", host_pid())
          .member("tid", tid_of(launcher->thread))
          .member("ts", us(launcher->begin_ns))
          .end_object();
      w_.begin_object()
          .member("ph", "f")
          .member("bp", "e")
          .member("id", flow_id)
          .member("name", "launch")
          .member("cat", "launch");
      w_.member("pid", pid).member("tid", a.stream).member("ts", us(a.begin_ns)).end_object();
    }
  }

  /// The gaps between steps as slices ("between steps", or "epoch boundary" for one that holds an
  /// epoch mark), each with its length and the step it follows; epoch marks as instant events.
  void step_gaps(const std::vector<step_gap>& gaps, const std::vector<std::int64_t>& marks) {
    if (gaps.empty() && marks.empty()) return;
    name_meta(host_pid(), between_steps_tid, "thread_name", "between steps");
    sort_meta(host_pid(), between_steps_tid, "thread_sort_index", -1);
    for (const auto& g : gaps) {
      w_.begin_object().member("ph", "X").member("pid", host_pid()).member("tid", between_steps_tid);
      w_.member("name", g.epoch ? "epoch boundary" : "between steps").member("cat", "outside_steps");
      w_.member("ts", us(g.begin_ns)).member("dur", static_cast<double>(g.end_ns - g.begin_ns) / 1e3);
      w_.key("args").begin_object().member("after_step", g.after_step).member("epoch", g.epoch).end_object();
      w_.end_object();
    }
    for (const auto t : marks) {
      w_.begin_object().member("ph", "i").member("s", "p").member("pid", host_pid()).member("tid", between_steps_tid);
      w_.member("name", "epoch mark").member("cat", "outside_steps").member("ts", us(t)).end_object();
    }
  }

  /// GPU memory: one counter event per step, from its beginning, holding the step's peaks (a peak is
  /// a step's figure, not an instant's: the value stays until the next step's). Unknown peaks are
  /// left out rather than drawn as -1.
  void memory_counters(const std::vector<step_memory_sample>& memory) {
    for (const auto& m : memory) {
      if (!m.known()) continue;
      w_.begin_object().member("ph", "C").member("pid", gpu_pid(memory_device));
      w_.member("tid", 0).member("name", "GPU memory peak (bytes)").member("ts", us(m.begin_ns));
      w_.key("args").begin_object();
      if (m.peaks.peak_allocated_bytes >= 0) w_.member("allocated", m.peaks.peak_allocated_bytes);
      if (m.peaks.peak_reserved_bytes >= 0) w_.member("reserved", m.peaks.peak_reserved_bytes);
      w_.end_object().end_object();
    }
  }

 private:
  double us(std::int64_t ns) const { return static_cast<double>(ns - origin_) / 1e3; }
  int host_pid() const { return cpu_pid + rank_offset_; }
  int gpu_pid(std::uint32_t device) const { return gpu_pid_base + static_cast<int>(device) + rank_offset_; }
  std::int64_t sort_base() const { return rank_offset_; }
  std::uint64_t tid_of(std::uint32_t index) const {
    const auto it = who_.find(index);
    return it == who_.end() ? index : it->second->os_id;
  }
  void name_meta(int pid, std::uint64_t tid, const char* what, const std::string& name) {
    w_.begin_object().member("ph", "M").member("pid", pid).member("tid", tid).member("name", what);
    w_.key("args").begin_object().member("name", name).end_object().end_object();
  }
  void sort_meta(int pid, std::uint64_t tid, const char* what, std::int64_t index) {
    w_.begin_object().member("ph", "M").member("pid", pid).member("tid", tid).member("name", what);
    w_.key("args").begin_object().member("sort_index", index).end_object().end_object();
  }

  json_writer& w_;
  std::int64_t origin_;
  int rank_offset_;     // rank r's processes are numbered 1000 r above rank 0's
  std::string prefix_;  // "rank r: " before process names
  std::map<std::uint32_t, const thread_identity*> who_;
};

}  // namespace detail

/// The trace document for one run. Times are microseconds from the first record.
inline std::string chrome_trace(const std::string& run_name, const std::vector<span_record>& spans,
                                const std::vector<gpu_activity>& gpu, const chrome_trace_extras& extras) {
  std::int64_t origin = std::numeric_limits<std::int64_t>::max();
  for (const auto& r : spans) origin = std::min(origin, r.begin_ns);
  for (const auto& a : gpu) origin = std::min(origin, a.begin_ns);
  for (const auto& m : extras.memory) origin = std::min(origin, m.begin_ns);
  for (const auto& g : extras.gaps) origin = std::min(origin, g.begin_ns);
  for (const auto t : extras.epoch_marks) origin = std::min(origin, t);
  if (origin == std::numeric_limits<std::int64_t>::max()) origin = 0;
  // A GPU process for each device with activities, and for the memory counter's device.
  std::set<std::uint32_t> devices;
  for (const auto& a : gpu) devices.insert(a.device);
  if (std::any_of(extras.memory.begin(), extras.memory.end(), [](const step_memory_sample& m) { return m.known(); }))
    devices.insert(detail::memory_device);

  std::string out;
  detail::json_writer w(out);
  w.begin_object().member("displayTimeUnit", "ms");
  w.key("otherData").begin_object().member("run", run_name).member("traceml_version", TRACEML_VERSION_STRING);
  if (extras.rank.distributed()) w.member("rank", extras.rank.rank).member("world_size", extras.rank.world_size);
  if (!extras.coverage.empty()) w.member("steps", extras.coverage);
  w.end_object();
  w.key("traceEvents").begin_array();
  detail::chrome_trace_writer tw(w, origin, extras.threads, extras.rank);
  tw.metadata(run_name, spans, devices);
  tw.cpu_spans(spans);
  tw.gpu_activities(spans, gpu);
  tw.memory_counters(extras.memory);
  tw.step_gaps(extras.gaps, extras.epoch_marks);
  w.end_array().end_object();
  out += '\n';
  return out;
}

/// The trace with spans and GPU activities only; `coverage`, when given, says which steps it holds.
/// CPU threads keep traceml's index as their id (no OS identities are passed).
inline std::string chrome_trace(const std::string& run_name, const std::vector<span_record>& spans,
                                const std::vector<gpu_activity>& gpu = {}, const std::string& coverage = "") {
  chrome_trace_extras extras;
  extras.coverage = coverage;
  return chrome_trace(run_name, spans, gpu, extras);
}

/// Writes chrome_trace(...) to `path`; false (reported once) when it cannot.
inline bool write_chrome_trace(const std::string& path, const std::string& run_name,
                               const std::vector<span_record>& spans, const std::vector<gpu_activity>& gpu = {},
                               const std::string& coverage = "") {
  return detail::write_whole_file(path, "Chrome trace", chrome_trace(run_name, spans, gpu, coverage));
}

/// Writes chrome_trace(run_name, spans, gpu, extras) to `path`; false (reported once) when it cannot.
inline bool write_chrome_trace(const std::string& path, const std::string& run_name,
                               const std::vector<span_record>& spans, const std::vector<gpu_activity>& gpu,
                               const chrome_trace_extras& extras) {
  return detail::write_whole_file(path, "Chrome trace", chrome_trace(run_name, spans, gpu, extras));
}

TRACEML_END_NAMESPACE
