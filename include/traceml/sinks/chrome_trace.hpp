// traceml: Chrome trace-event JSON (loads in Perfetto and chrome://tracing). CPU records appear on
// their threads under process "traceml CPU"; GPU activities, when a source kept them, on one track per
// device and stream, each linked by a flow arrow from the phase that launched its first kernel.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/json_writer.hpp"
#include "traceml/detail/output_file.hpp"
#include "traceml/gpu/gpu_source.hpp"
#include "traceml/record.hpp"

TRACEML_BEGIN_NAMESPACE

namespace detail {
inline constexpr int cpu_pid = 1;
inline constexpr int gpu_pid_base = 100;  // GPU device d is process 100 + d

inline const char* activity_category(gpu_activity::type t) {
  switch (t) {
    case gpu_activity::type::kernel: return "kernel";
    case gpu_activity::type::memcpy: return "memcpy";
    case gpu_activity::type::memset: return "memset";
  }
  return "gpu";
}
}  // namespace detail

/// The trace document for one run. Times are microseconds from the first record. `coverage`, when
/// given, says which steps the trace holds (otherData.steps).
inline std::string chrome_trace(const std::string& run_name, const std::vector<span_record>& spans,
                                const std::vector<gpu_activity>& gpu = {}, const std::string& coverage = "") {
  std::int64_t origin = std::numeric_limits<std::int64_t>::max();
  for (const auto& r : spans) origin = std::min(origin, r.begin_ns);
  for (const auto& a : gpu) origin = std::min(origin, a.begin_ns);
  if (origin == std::numeric_limits<std::int64_t>::max()) origin = 0;
  const auto us = [origin](std::int64_t ns) { return static_cast<double>(ns - origin) / 1e3; };

  std::string out;
  detail::json_writer w(out);
  w.begin_object().member("displayTimeUnit", "ms");
  w.key("otherData").begin_object().member("run", run_name).member("traceml_version", TRACEML_VERSION_STRING);
  if (!coverage.empty()) w.member("steps", coverage);
  w.end_object();
  w.key("traceEvents").begin_array();

  const auto meta = [&](int pid, std::int64_t tid, const char* what, const std::string& name) {
    w.begin_object().member("ph", "M").member("pid", pid).member("tid", tid).member("name", what);
    w.key("args").begin_object().member("name", name).end_object().end_object();
  };
  meta(detail::cpu_pid, 0, "process_name", "traceml CPU: " + run_name);
  std::set<std::uint32_t> threads;
  for (const auto& r : spans) threads.insert(r.thread);
  for (auto t : threads) meta(detail::cpu_pid, t, "thread_name", t == 0 ? "thread 0 (first seen)" : "thread " + std::to_string(t));

  for (const auto& r : spans) {
    w.begin_object().member("ph", "X").member("pid", detail::cpu_pid).member("tid", r.thread);
    w.member("name", r.name).member("cat", to_string(r.kind));
    w.member("ts", us(r.begin_ns)).member("dur", static_cast<double>(r.duration_ns()) / 1e3);
    w.key("args").begin_object().member("step", r.step).member("microbatch", r.microbatch).end_object();
    w.end_object();
  }

  // GPU tracks, and one flow arrow per (step, micro-batch, phase) to the first activity it launched.
  std::set<std::pair<std::uint32_t, std::uint32_t>> tracks;
  std::set<std::tuple<std::int32_t, std::int32_t, std::string>> linked;
  std::uint64_t flow_id = 0;
  for (const auto& a : gpu) {
    const int pid = detail::gpu_pid_base + static_cast<int>(a.device);
    if (tracks.insert({a.device, a.stream}).second) {
      if (std::none_of(tracks.begin(), tracks.end(), [&](auto& t) { return t.first == a.device && t.second != a.stream; }))
        meta(pid, 0, "process_name", "GPU " + std::to_string(a.device));
      meta(pid, a.stream, "thread_name", "stream " + std::to_string(a.stream));
    }
    w.begin_object().member("ph", "X").member("pid", pid).member("tid", a.stream);
    w.member("name", a.name).member("cat", detail::activity_category(a.what));
    w.member("ts", us(a.begin_ns)).member("dur", static_cast<double>(a.end_ns - a.begin_ns) / 1e3);
    w.key("args").begin_object().member("step", a.step).member("microbatch", a.microbatch);
    w.member("phase", a.phase_name);
    if (a.what != gpu_activity::type::kernel) w.member("bytes", a.bytes);
    w.end_object().end_object();

    if (a.step < 0 || !*a.phase_name || !linked.insert({a.step, a.microbatch, a.phase_name}).second) continue;
    const auto launcher = std::find_if(spans.begin(), spans.end(), [&](const span_record& r) {
      return r.step == a.step && r.microbatch == a.microbatch && r.kind == a.phase && std::string(r.name) == a.phase_name;
    });
    if (launcher == spans.end()) continue;
    ++flow_id;
    w.begin_object().member("ph", "s").member("id", flow_id).member("name", "launch").member("cat", "launch");
    w.member("pid", detail::cpu_pid).member("tid", launcher->thread).member("ts", us(launcher->begin_ns)).end_object();
    w.begin_object().member("ph", "f").member("bp", "e").member("id", flow_id).member("name", "launch").member("cat", "launch");
    w.member("pid", pid).member("tid", a.stream).member("ts", us(a.begin_ns)).end_object();
  }
  w.end_array().end_object();
  out += '\n';
  return out;
}

/// Writes chrome_trace(...) to `path`; false (reported once) when it cannot.
inline bool write_chrome_trace(const std::string& path, const std::string& run_name,
                               const std::vector<span_record>& spans, const std::vector<gpu_activity>& gpu = {},
                               const std::string& coverage = "") {
  return detail::write_whole_file(path, "Chrome trace", chrome_trace(run_name, spans, gpu, coverage));
}

TRACEML_END_NAMESPACE
