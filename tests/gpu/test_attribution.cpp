// The attribution engine on synthetic record streams: markers (stream order), GPU time, CPU time,
// out-of-order and late records, overlapping streams, dropped and untimed records, facts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "synthetic_records.hpp"
#include "traceml/gpu/attribution.hpp"

using namespace traceml;

namespace {

constexpr std::uint32_t main_stream = 7;

/// Builds one round of input: spans with CPU windows, boundary markers on a stream, records.
struct scenario {
  attribution_input in;
  std::uint64_t next_seq = 1;

  /// A span [b, e] on the CPU; when `gb`/`ge` >= 0 its markers ran on the GPU at those times
  /// (each marker lasts 1 ns: begin marker [gb-1, gb], end marker [ge, ge+1]).
  marked_span& span(phase_kind k, const char* name, std::int32_t step, std::int32_t micro, std::int64_t b,
                    std::int64_t e, std::int64_t gb = -1, std::int64_t ge = -1, std::uint32_t stream = main_stream,
                    std::uint8_t nesting = 0, std::uint32_t thread = 0) {
    marked_span ms;
    ms.span.kind = k;
    ms.span.name = name;
    ms.span.step = step;
    ms.span.microbatch = micro;
    ms.span.begin_ns = b;
    ms.span.end_ns = e;
    ms.span.nesting = nesting;
    ms.span.thread = thread;
    if (gb >= 0 && ge >= 0) {
      ms.begin_marker = next_seq++;
      ms.end_marker = next_seq++;
      in.markers.push_back(marker_time{ms.begin_marker, 0, stream, gb - 1, gb});
      in.markers.push_back(marker_time{ms.end_marker, 0, stream, ge, ge + 1});
    }
    in.spans.push_back(ms);
    return in.spans.back();
  }

  void kernel(const char* name, std::int64_t b, std::int64_t e, std::uint32_t stream = main_stream) {
    in.records.push_back(traceml_test::kernel_record(name, b, e, stream));
  }
  void copy(gpu_activity::type what, std::int64_t b, std::int64_t e, std::uint64_t bytes,
            std::uint32_t stream = main_stream) {
    gpu_record r;
    r.what = what;
    r.begin_ns = b;
    r.end_ns = e;
    r.bytes = bytes;
    r.stream = stream;
    r.name = what == gpu_activity::type::memcpy ? "memcpy HtoD" : "memset";
    in.records.push_back(r);
  }
};

const phase_gpu_facts* find_phase(const step_gpu_report& r, const char* name, std::int32_t micro = -1) {
  for (auto& p : r.phases)
    if (std::string(p.name) == name && p.microbatch == micro) return &p;
  return nullptr;
}

std::uint64_t phase_kernels(const step_gpu_report& r, const char* name, std::int32_t micro = -1) {
  auto* p = find_phase(r, name, micro);
  return p ? p->facts.kernel_count : 0;
}

/// A step whose GPU runs far behind its CPU: forward's kernels start while the CPU is already in
/// backward, backward's while it is in optimizer. Time-based attribution gets this wrong.
scenario lagging_step() {
  scenario s;
  // CPU: step [0, 1000], forward [10, 100], backward [100, 400], optimizer [400, 500].
  // GPU: markers show the stream reached forward at 150, backward at 450, optimizer at 900.
  s.span(phase_kind::step, "step", 0, -1, 0, 1000, 20, 1100);
  s.span(phase_kind::forward, "forward", 0, 0, 10, 100, 150, 440);
  s.span(phase_kind::backward, "backward", 0, 0, 100, 400, 450, 890);
  s.span(phase_kind::optimizer, "optimizer", 0, -1, 400, 500, 900, 1050);
  for (int i = 0; i < 4; ++i) s.kernel("fwd_gemm", 160 + i * 70, 220 + i * 70);  // 160..430
  for (int i = 0; i < 6; ++i) s.kernel("bwd_gemm", 460 + i * 70, 520 + i * 70);  // 460..870 (autograd threads)
  for (int i = 0; i < 3; ++i) s.kernel("adam", 910 + i * 40, 940 + i * 40);      // 910..1030
  return s;
}

}  // namespace

TEST_CASE("stream-ordered markers attribute a lagging GPU exactly", "[attribution]") {
  scenario s = lagging_step();
  auto out = attribute(s.in);
  REQUIRE(out.reports.size() == 1);
  const auto& r = out.reports[0];
  CHECK(r.step == 0);
  CHECK(r.kernels_measured);
  CHECK(phase_kernels(r, "forward", 0) == 4);
  CHECK(phase_kernels(r, "backward", 0) == 6);
  CHECK(phase_kernels(r, "optimizer") == 3);
  CHECK(r.total.kernel_count == 13);
  CHECK(r.unattributed_kernels == 0);
  for (auto m : out.method) CHECK(m == attribution_method::stream_order);
  // span_ns: from the end of the begin marker to the start of the end marker.
  CHECK(find_phase(r, "forward", 0)->facts.span_ns == 440 - 150);
  CHECK(r.total.span_ns == 1100 - 20);
}

TEST_CASE("without markers the same step falls back to CPU time (and shows why markers matter)", "[attribution]") {
  scenario s = lagging_step();
  s.in.markers.clear();
  s.in.final_round = true;
  auto out = attribute(s.in);
  REQUIRE(out.reports.size() == 1);
  const auto& r = out.reports[0];
  for (auto m : out.method) CHECK(m == attribution_method::cpu_time);
  CHECK(r.total.kernel_count == 13);
  CHECK(find_phase(r, "forward", 0)->facts.span_ns == -1);
  // Every kernel starts after the CPU left forward: by time, forward gets none of its kernels.
  CHECK(phase_kernels(r, "forward", 0) == 0);
  CHECK(phase_kernels(r, "backward", 0) == 4);  // [160, 400]: the forward kernels that started in backward
  CHECK(phase_kernels(r, "optimizer") == 9);    // after the last phase ended: the last phase
}

TEST_CASE("record order does not matter", "[attribution]") {
  const int seed = GENERATE(1, 2, 3, 4, 5);
  scenario s = lagging_step();
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::shuffle(s.in.records.begin(), s.in.records.end(), rng);
  std::shuffle(s.in.markers.begin(), s.in.markers.end(), rng);
  std::shuffle(s.in.spans.begin(), s.in.spans.end(), rng);
  auto r = attribute(s.in).reports.at(0);
  CHECK(phase_kernels(r, "forward", 0) == 4);
  CHECK(phase_kernels(r, "backward", 0) == 6);
  CHECK(phase_kernels(r, "optimizer") == 3);
  REQUIRE(r.phases.size() == 3);
  CHECK(std::string(r.phases[0].name) == "forward");  // phases listed in CPU order whatever the input order
  CHECK(std::string(r.phases[2].name) == "optimizer");
}

TEST_CASE("records after the last step wait for the next round", "[attribution]") {
  scenario s = lagging_step();
  s.kernel("next_step_kernel", 1200, 1250);  // after step 0's end marker on the same stream
  auto out = attribute(s.in);
  REQUIRE(out.leftover.size() == 1);
  CHECK(out.reports[0].total.kernel_count == 13);

  // Next round: step 1 arrives; the leftover lands in its forward.
  scenario s2;
  s2.next_seq = 100;
  s2.span(phase_kind::step, "step", 1, -1, 1000, 2000, 1110, 2100);
  s2.span(phase_kind::forward, "forward", 1, 0, 1010, 1100, 1150, 1300);
  s2.in.records = out.leftover;
  s2.kernel("late_arrival", 1160, 1190);  // delivered late by CUPTI: order of arrival is irrelevant
  auto out2 = attribute(s2.in);
  REQUIRE(out2.reports.size() == 1);
  CHECK(out2.leftover.empty());
  CHECK(phase_kernels(out2.reports[0], "forward", 0) == 2);
}

TEST_CASE("the final round leaves nothing over", "[attribution]") {
  scenario s = lagging_step();
  s.kernel("after_everything", 5000, 5100);
  s.in.final_round = true;
  auto out = attribute(s.in);
  CHECK(out.leftover.empty());
  CHECK(out.orphans == 1);
  CHECK(out.reports[0].unattributed_kernels == 1);  // visible, not silently lost
}

TEST_CASE("overlapping streams: marked streams by order - unmarked ones by GPU time", "[attribution]") {
  scenario s;
  s.span(phase_kind::step, "step", 0, -1, 0, 1000, 10, 990);
  s.span(phase_kind::forward, "forward", 0, 0, 10, 300, 20, 400);
  s.span(phase_kind::backward, "backward", 0, 0, 300, 700, 410, 900);
  // A data-loading thread's phase on its own stream, concurrent with forward.
  s.span(phase_kind::dataloader, "dataloader", 0, 0, 50, 250, 60, 380, /*stream=*/20, 0, /*thread=*/1);
  s.kernel("fwd", 30, 390);                   // stream 7, overlaps the copy stream's work
  s.kernel("h2d_unpack", 70, 370, 20);        // stream 20 (marked): its own phase
  s.kernel("side_stream", 420, 600, 33);      // stream 33 (never marked): by GPU time
  s.kernel("side_stream_gap", 402, 408, 33);  // stream 33 between windows: enclosing step only
  s.copy(gpu_activity::type::memcpy, 80, 180, 4096, 20);
  auto out = attribute(s.in);
  const auto& r = out.reports.at(0);
  CHECK(phase_kernels(r, "forward", 0) == 1);
  CHECK(phase_kernels(r, "dataloader", 0) == 1);
  CHECK(phase_kernels(r, "backward", 0) == 1);
  CHECK(find_phase(r, "dataloader", 0)->facts.memcpy_bytes == 4096);
  CHECK(out.method[2] == attribution_method::gpu_time);
  CHECK(r.unattributed_kernels == 1);
  CHECK(r.total.kernel_count == 4);
  // Overlap: kernel time counts both, busy time counts the union.
  CHECK(r.total.kernel_ns == 360 + 300 + 180 + 6);
  CHECK(r.total.busy_ns == 360 + 180 + 6);
}

TEST_CASE("a dropped marker degrades one phase to CPU time - not the step", "[attribution]") {
  scenario s = lagging_step();
  // Lose backward's end marker (CUPTI buffer full): backward has no GPU window any more.
  const auto& bw = s.in.spans[2];
  REQUIRE(std::string(bw.span.name) == "backward");
  const auto lost = bw.end_marker;
  s.in.markers.erase(
      std::remove_if(s.in.markers.begin(), s.in.markers.end(), [&](const marker_time& m) { return m.seq == lost; }),
      s.in.markers.end());
  s.in.dropped[0] = 1;
  auto out = attribute(s.in);
  const auto& r = out.reports.at(0);
  CHECK(r.dropped_records == 1);
  CHECK(phase_kernels(r, "forward", 0) == 4);  // still exact
  CHECK(phase_kernels(r, "optimizer") == 3);   // still exact
  // Backward's kernels are inside the step's marker window but no phase window on their stream.
  CHECK(r.total.kernel_count == 13);
  CHECK(r.unattributed_kernels == 6);
  CHECK(find_phase(r, "backward", 0)->facts.span_ns == -1);
}

TEST_CASE("records without timestamps are counted as dropped - never attributed", "[attribution]") {
  scenario s = lagging_step();
  s.kernel("untimed", 0, 0);
  s.kernel("untimed", 0, 0);
  auto out = attribute(s.in);
  const auto& r = out.reports.at(0);
  CHECK(out.invalid == 2);
  CHECK(r.dropped_records == 2);
  CHECK(r.total.kernel_count == 13);
  CHECK(r.unattributed_kernels == 0);
}

TEST_CASE("facts: sums - union - idle inside the GPU window - memcpy/memset - every kernel", "[attribution]") {
  scenario s;
  s.span(phase_kind::step, "step", 0, -1, 0, 1000, 1, 999);
  s.span(phase_kind::forward, "forward", 0, 0, 0, 1000, 2, 998);
  s.kernel("a", 100, 200);
  s.kernel("a", 150, 250);  // overlaps the first: kernel_ns 200, busy 150
  s.kernel("b", 500, 800);
  s.kernel("c", 900, 910);
  s.copy(gpu_activity::type::memcpy, 20, 60, 1000);
  s.copy(gpu_activity::type::memset, 60, 70, 64);
  auto r = attribute(s.in).reports.at(0);
  const auto& f = find_phase(r, "forward", 0)->facts;
  CHECK(f.kernel_count == 4);
  CHECK(f.kernel_ns == 100 + 100 + 300 + 10);
  CHECK(f.busy_ns == 150 + 300 + 10 + 40 + 10);
  CHECK(f.memcpy_ns == 40);
  CHECK(f.memcpy_bytes == 1000);
  CHECK(f.memset_ns == 10);
  CHECK(f.memset_bytes == 64);
  // Busy and idle are measured in the marker window [2, 998], not the CPU window [0, 1000].
  CHECK(f.window_ns == 998 - 2);
  CHECK(f.idle_ns == 996 - 510);
  const auto& ks = find_phase(r, "forward", 0)->kernels;
  REQUIRE(ks.size() == 3);
  CHECK(ks[0].name == "b");
  CHECK(ks[0].total_ns == 300);
  CHECK(ks[1].name == "a");
  CHECK(ks[1].count == 2);
  CHECK(ks[1].mean_ns() == 100);
  CHECK(ks[2].name == "c");
  CHECK(r.total.kernel_ns == f.kernel_ns);
  CHECK(r.total.window_ns == 999 - 1);
  CHECK(r.total.busy_ns == 510);
  CHECK(r.total.idle_ns == 998 - 510);
}

TEST_CASE(
    "records as counted: what the counters' own window measure makes of the step's records and markers - "
    "each operation begun the engine's set-up time earlier - busy next to a short window leaks in",
    "[attribution][counters]") {
  scenario s;
  s.span(phase_kind::step, "step", 0, -1, 0, 4000, 1, 3999);
  s.span(phase_kind::forward, "forward", 0, 0, 0, 1000, 2, 998);
  s.span(phase_kind::dataloader, "dataloader", 0, 0, 1000, 1100, 1000, 1100);  // short, no work of its own
  s.span(phase_kind::backward, "backward", 0, 0, 1100, 4000, 1100, 3998);
  s.kernel("isolated", 300, 310);
  s.kernel("first", 500, 600);
  s.kernel("back_to_back", 620, 700);                  // its set-up hides behind "first"
  s.kernel("late", 900, 1000);                         // forward's last kernel, up to the dataloader's begin
  s.copy(gpu_activity::type::memcpy, 1020, 1040, 64);  // the dataloader's: a copy has its set-up too
  s.kernel("grad", 1100, 3000);                        // backward, right after the dataloader
  // The next step, attributed in the same round: its first kernel leaks into step 0's last samples.
  s.span(phase_kind::step, "step", 1, -1, 4000, 6000, 4001, 5999);
  s.span(phase_kind::forward, "forward", 1, 0, 4000, 6000, 4002, 5998);
  s.kernel("next_step", 4005, 4100);
  const auto plain = attribute(s.in).reports.at(0);
  CHECK(find_phase(plain, "forward", 0)->facts.counted_busy_ns == -1);  // not modelled without the interval
  CHECK(plain.total.counted_busy_ns == -1);

  constexpr std::int64_t interval = 160, launch = 50;
  attribution_options opt;
  opt.counted = records_as_counted{interval, launch};
  const auto r = attribute(s.in, opt).reports.at(0);
  // What the counters would read: samples of 160 ns on a grid of unknown phase, each as busy as the
  // step's records and the boundary markers (1 ns memsets), each begun 50 ns earlier, measured per
  // window by the counters' own overlap-weighted mean (pm_samples.hpp), averaged over the 16 grid
  // phases the model takes.
  std::vector<std::pair<std::int64_t, std::int64_t>> timeline = {{250, 310},  {450, 700},   {850, 1000},
                                                                 {970, 1040}, {1050, 3000}, {3955, 4100}};
  for (const marker_time& m : s.in.markers) timeline.emplace_back(m.begin_ns - launch, m.end_ns);
  const auto busy = detail::merge_intervals(timeline);
  const auto counters_read = [&](std::int64_t lo, std::int64_t hi) {
    double total = 0;
    for (int k = 0; k < 16; ++k) {
      std::vector<pm_sample> grid;
      for (std::int64_t b = -1000 + (interval * k) / 16 + 1; b < 7000; b += interval) {
        std::int64_t covered = 0;
        for (const auto& [x, y] : busy)
          covered += std::max<std::int64_t>(0, std::min(y, b + interval) - std::max(x, b));
        pm_sample smp;
        smp.begin_ns = b;
        smp.end_ns = b + interval;
        smp.gpu_busy = static_cast<double>(covered) / interval;
        grid.push_back(smp);
      }
      const counter_facts c = measure_window(grid, lo, hi);
      total += busy_share(c) * static_cast<double>(hi - lo);
    }
    return total / 16;
  };
  const auto& fwd = find_phase(r, "forward", 0)->facts;
  const auto& data = find_phase(r, "dataloader", 0)->facts;
  const auto& bwd = find_phase(r, "backward", 0)->facts;
  CHECK(fwd.busy_ns == 10 + 180 + 98);  // the records' own busy time does not change ("late" clipped at 998)
  CHECK(static_cast<double>(fwd.counted_busy_ns) == Approx(counters_read(2, 998)).margin(1));
  CHECK(static_cast<double>(data.counted_busy_ns) == Approx(counters_read(1000, 1100)).margin(1));
  CHECK(static_cast<double>(bwd.counted_busy_ns) == Approx(counters_read(1100, 3998)).margin(1));
  CHECK(static_cast<double>(r.total.counted_busy_ns) == Approx(counters_read(1, 3999)).margin(1));
  CHECK(static_cast<double>(bwd.counted_busy_ns) > 1900 + 10);  // step 1's kernel (set-up from 3955) reaches in
  // The dataloader's records are 20 ns of its 100; the counters would read far more: its neighbours'
  // kernels (and backward's launch set-up inside it) leak in through the samples at its edges.
  CHECK(data.busy_ns == 20);
  CHECK(data.counted_busy_ns > 50);
  // Inside a long window little leaks: backward's kernel from 1100 (set-up from 1050, inside the
  // dataloader) to 3000, then idle to 3998, is read as about 1900 of 2898.
  CHECK(static_cast<double>(bwd.counted_busy_ns) == Approx(1900).margin(60));
}

TEST_CASE(
    "work side by side on two streams: each phase's own time and the part of it hidden under the "
    "other's (communication under backward)",
    "[attribution][overlap]") {
  constexpr std::uint32_t comm_stream = 9;
  scenario s;
  s.span(phase_kind::step, "step", 0, -1, 0, 2000, 1, 1999);
  s.span(phase_kind::backward, "backward", 0, 0, 100, 1000, 100, 1000);
  // All-reduce launched from another thread on its own stream while backward still runs.
  s.span(phase_kind::communication, "communication", 0, 0, 500, 1200, 500, 1200, comm_stream, 0, /*thread=*/1);
  s.kernel("grad_a", 200, 450);
  s.kernel("grad_b", 500, 800);
  s.kernel("allreduce", 600, 1100, comm_stream);  // 200 ns of it under grad_b, the rest alone
  const auto r = attribute(s.in).reports.at(0);
  const auto& bwd = find_phase(r, "backward", 0)->facts;
  const auto& comm = find_phase(r, "communication", 0)->facts;
  CHECK(comm.kernel_count == 1);
  CHECK(comm.own_ns == 500);
  CHECK(comm.hidden_ns == 200);
  CHECK(bwd.own_ns == 250 + 300);
  CHECK(bwd.hidden_ns == 200);  // the same overlap, seen from backward

  scenario one;  // the same work on one stream: nothing runs beside anything
  one.span(phase_kind::step, "step", 0, -1, 0, 2000, 1, 1999);
  one.span(phase_kind::backward, "backward", 0, 0, 100, 1000, 100, 1000);
  one.span(phase_kind::communication, "communication", 0, 0, 1000, 1600, 1000, 1600);
  one.kernel("grad", 200, 800);
  one.kernel("allreduce", 1100, 1500);
  const auto q = attribute(one.in).reports.at(0);
  CHECK(find_phase(q, "communication", 0)->facts.own_ns == 400);
  CHECK(find_phase(q, "communication", 0)->facts.hidden_ns == 0);
  CHECK(find_phase(q, "backward", 0)->facts.hidden_ns == 0);
}

TEST_CASE("nested phases: a kernel belongs to the innermost one only", "[attribution]") {
  scenario s;
  s.span(phase_kind::step, "step", 0, -1, 0, 1000, 1, 999);
  s.span(phase_kind::forward, "forward", 0, 0, 0, 800, 2, 700);
  s.span(phase_kind::user, "attention", 0, 0, 100, 300, 100, 300, main_stream, /*nesting=*/1);
  s.kernel("qkv", 50, 90);
  s.kernel("flash", 120, 280);
  s.kernel("mlp", 320, 600);
  s.kernel("outside_phases", 800, 900);
  auto r = attribute(s.in).reports.at(0);
  CHECK(phase_kernels(r, "forward", 0) == 2);
  CHECK(phase_kernels(r, "attention", 0) == 1);
  CHECK(r.unattributed_kernels == 1);
  CHECK(r.total.kernel_count == 4);
}

TEST_CASE("phases repeated in one micro-batch merge - micro-batches stay apart", "[attribution]") {
  scenario s;
  s.span(phase_kind::step, "step", 0, -1, 0, 1000, 1, 999);
  s.span(phase_kind::forward, "forward", 0, 0, 10, 100, 10, 100);
  s.span(phase_kind::forward, "forward", 0, 0, 110, 200, 110, 200);
  s.span(phase_kind::forward, "forward", 0, 1, 300, 400, 300, 400);
  s.kernel("k", 20, 30);
  s.kernel("k", 120, 130);
  s.kernel("k", 310, 320);
  auto r = attribute(s.in).reports.at(0);
  REQUIRE(r.phases.size() == 2);
  CHECK(phase_kernels(r, "forward", 0) == 2);
  CHECK(phase_kernels(r, "forward", 1) == 1);
  CHECK(find_phase(r, "forward", 0)->facts.span_ns == (100 - 10) + (200 - 110));
}

TEST_CASE("CUDA-graph replays: launch stream by order - internal streams by GPU time", "[attribution]") {
  scenario s;
  s.span(phase_kind::step, "step", 0, -1, 0, 1000, 1, 999);
  s.span(phase_kind::forward, "forward", 0, 0, 0, 100, 10, 500);
  s.span(phase_kind::backward, "backward", 0, 0, 100, 200, 510, 900);
  s.kernel("graph_node", 20, 100);
  s.in.records.back().graph = 3;
  s.kernel("graph_branch", 30, 120, 44);  // a graph branch on an internal stream
  s.in.records.back().graph = 3;
  s.kernel("graph_node", 520, 700);
  s.in.records.back().graph = 4;
  auto out = attribute(s.in);
  const auto& r = out.reports.at(0);
  CHECK(phase_kernels(r, "forward", 0) == 2);
  CHECK(phase_kernels(r, "backward", 0) == 1);
  CHECK(out.method[1] == attribution_method::gpu_time);
}

TEST_CASE("several steps in one round - orphans between steps are reported - memory passes through", "[attribution]") {
  scenario s;
  s.span(phase_kind::step, "step", 4, -1, 0, 100, 1, 100);
  s.span(phase_kind::forward, "forward", 4, 0, 0, 100, 2, 99);
  s.span(phase_kind::step, "step", 5, -1, 200, 300, 201, 300);
  s.span(phase_kind::forward, "forward", 5, 0, 200, 300, 202, 299);
  s.kernel("k", 10, 20);
  s.kernel("between_steps", 150, 160);
  s.kernel("k", 210, 220);
  s.in.memory[5] = {1000, 2000};
  attribution_options opt;
  opt.keep_activities = true;
  auto out = attribute(s.in, opt);
  REQUIRE(out.reports.size() == 2);
  CHECK(out.reports[0].step == 4);
  CHECK(out.reports[1].step == 5);
  CHECK(out.orphans == 1);
  CHECK(out.reports[0].unattributed_kernels == 1);
  CHECK(out.reports[1].peak_allocated_bytes == 1000);
  CHECK(out.reports[1].peak_reserved_bytes == 2000);
  CHECK(out.reports[0].peak_allocated_bytes == -1);
  REQUIRE(out.reports[1].activities.size() == 1);
  const auto& a = out.reports[1].activities[0];
  CHECK(a.step == 5);
  CHECK(a.microbatch == 0);
  CHECK(a.phase == phase_kind::forward);
  CHECK(std::string(a.phase_name) == "forward");
  CHECK(out.reports[0].activities.size() == 1);  // the orphan is not in any step's activities
}

TEST_CASE("no step in the round: records wait - or are orphans at the end", "[attribution]") {
  scenario s;
  s.kernel("k", 10, 20);
  auto out = attribute(s.in);
  CHECK(out.reports.empty());
  CHECK(out.leftover.size() == 1);
  s.in.final_round = true;
  out = attribute(s.in);
  CHECK(out.leftover.empty());
  CHECK(out.orphans == 1);
}

TEST_CASE("busy - idle - window: nested phases count as busy for the outer one - side-stream work is clipped",
          "[attribution]") {
  scenario s;
  // Step 0 (markers): window [10, 990]. forward [20, 400] encloses attention [100, 200]; backward [410, 900].
  s.span(phase_kind::step, "step", 0, -1, 0, 1000, 10, 990);
  s.span(phase_kind::forward, "forward", 0, 0, 0, 500, 20, 400);
  s.span(phase_kind::user, "attention", 0, 0, 100, 300, 100, 200, main_stream, /*nesting=*/1);
  s.span(phase_kind::backward, "backward", 0, 0, 500, 900, 410, 900);
  s.kernel("embed", 30, 80);                        // forward, stream order
  s.kernel("flash", 110, 190);                      // attention, stream order
  s.kernel("side_fwd", 350, 450, 33);               // forward by GPU time; runs 50 ns past forward's end marker
  s.kernel("grad", 420, 600);                       // backward
  s.copy(gpu_activity::type::memcpy, 600, 640, 8);  // backward, touches grad: union [420, 640]
  s.kernel("side_bwd", 850, 1000, 33);              // backward by GPU time; past backward's and the step's end
  // Step 1 (no markers): CPU windows. Its kernels run on a stream without markers.
  s.span(phase_kind::step, "step", 1, -1, 1000, 2000);
  s.span(phase_kind::forward, "forward", 1, 0, 1100, 1500);
  s.kernel("k", 1200, 1300, 50);     // forward, CPU time
  s.kernel("late", 1600, 2100, 50);  // after forward ended: forward, clipped to nothing there
  s.in.final_round = true;
  auto out = attribute(s.in);
  REQUIRE(out.reports.size() == 2);
  const auto& r0 = out.reports[0];
  const auto& attn = find_phase(r0, "attention", 0)->facts;
  CHECK(attn.window_ns == 100);
  CHECK(attn.busy_ns == 80);
  CHECK(attn.idle_ns == 20);
  const auto& fwd = find_phase(r0, "forward", 0)->facts;
  CHECK(fwd.window_ns == 380);
  CHECK(fwd.busy_ns == 50 + 80 + 50);  // own [30, 80], attention's [110, 190], side_fwd up to 400
  CHECK(fwd.idle_ns == 380 - 180);
  CHECK(fwd.kernel_count == 2);  // sums stay with the innermost phase
  CHECK(fwd.kernel_ns == 50 + 100);
  CHECK(fwd.span_ns == 380);
  const auto& bwd = find_phase(r0, "backward", 0)->facts;
  CHECK(bwd.window_ns == 490);
  CHECK(bwd.busy_ns == 220 + 50);  // [420, 640] and side_bwd up to 900
  CHECK(bwd.idle_ns == 220);
  CHECK(bwd.kernel_ns == 180 + 150);  // durations are not clipped
  CHECK(r0.total.window_ns == 980);
  CHECK(r0.total.busy_ns == 50 + 80 + (640 - 350) + (990 - 850));
  CHECK(r0.total.idle_ns == 980 - 560);

  const auto& r1 = out.reports[1];
  const auto& f1 = find_phase(r1, "forward", 0)->facts;
  CHECK(f1.kernel_count == 2);
  CHECK(f1.window_ns == 400);
  CHECK(f1.busy_ns == 100);
  CHECK(f1.idle_ns == 300);
  CHECK(f1.span_ns == -1);
  CHECK(r1.total.window_ns == 1000);
  CHECK(r1.total.busy_ns == 100 + 400);
  CHECK(r1.total.idle_ns == 500);
  CHECK(r1.total.span_ns == -1);
  CHECK(out.method[2] == attribution_method::gpu_time);
  CHECK(out.method[6] == attribution_method::cpu_time);
  CHECK(out.method[7] == attribution_method::cpu_time);
}

TEST_CASE("a phase keeps every kernel name - names with equal text from two pointers merge", "[attribution]") {
  scenario s;
  s.span(phase_kind::step, "step", 0, -1, 0, 10000, 1, 9999);
  s.span(phase_kind::forward, "forward", 0, 0, 0, 10000, 2, 9998);
  static const std::vector<std::string> names = {"k00", "k01", "k02", "k03", "k04", "k05",
                                                 "k06", "k07", "k08", "k09", "k10", "k11"};
  for (std::size_t i = 0; i < names.size(); ++i)  // k00 runs 10 ns, k11 runs 120 ns
    s.kernel(names[i].c_str(), 100 + 200 * static_cast<std::int64_t>(i), 110 + 210 * static_cast<std::int64_t>(i));
  static const std::string same_text = "k00";  // another pointer, same name
  s.kernel(same_text.c_str(), 5000, 5005);
  auto r = attribute(s.in).reports.at(0);
  const auto& ks = find_phase(r, "forward", 0)->kernels;
  REQUIRE(ks.size() == 12);
  CHECK(ks.front().name == "k11");
  CHECK(ks.front().total_ns == 10 + 10 * 11);
  CHECK(ks.back().name == "k00");
  CHECK(ks.back().count == 2);
  CHECK(ks.back().total_ns == 10 + 5);
}

namespace {

/// Random rounds for the invariant and reference tests. Times are multiples of 10 half of the time,
/// so that equal begins, equal ends and records exactly on a boundary are common.
struct random_round {
  std::mt19937 rng;
  attribution_input in;
  std::uint64_t next_seq = 1;

  explicit random_round(unsigned seed) : rng(seed) {}
  std::int64_t uni(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

  void markers(marked_span& ms, std::uint32_t device, std::uint32_t stream, std::int64_t gb, std::int64_t ge) {
    ms.begin_marker = next_seq++;
    ms.end_marker = next_seq++;
    in.markers.push_back(marker_time{ms.begin_marker, device, stream, gb - 2, gb});
    in.markers.push_back(marker_time{ms.end_marker, device, chance(0.05) ? stream + 1 : stream, ge, ge + 2});
  }
  marked_span& span(phase_kind k, const char* name, std::int32_t step, std::int32_t micro, std::int64_t b,
                    std::int64_t e, std::uint8_t nesting, std::uint32_t thread) {
    marked_span ms;
    ms.span = span_record{b, e, name, step, micro, thread, k, nesting};
    in.spans.push_back(ms);
    return in.spans.back();
  }
  void records(std::size_t n, std::int64_t lo, std::int64_t hi, const std::vector<std::uint32_t>& streams) {
    static const char* const names[] = {"gemm", "relu", "softmax", "adam"};
    for (std::size_t i = 0; i < n; ++i) {
      gpu_record r;
      r.what = chance(0.8) ? gpu_activity::type::kernel : gpu_activity::type::memcpy;
      r.begin_ns = uni(lo, hi);
      if (chance(0.5)) r.begin_ns -= r.begin_ns % 10;
      r.end_ns = r.begin_ns + uni(1, 400);
      r.device = chance(0.9) ? 0 : static_cast<std::uint32_t>(uni(1, 2));
      r.stream = streams[static_cast<std::size_t>(uni(0, static_cast<std::int64_t>(streams.size()) - 1))];
      r.bytes = 64;
      r.name = names[uni(0, 3)];
      if (chance(0.02)) r.begin_ns = r.end_ns = 0;
      in.records.push_back(r);
    }
  }
};

/// A training-like round: steps with and without markers, forward/backward/optimizer on the main
/// stream with layers and attention nested inside (GPU lagging the CPU by a per-step amount), a
/// data loader on its own thread and stream, and work on an unmarked side stream.
attribution_input training_round(unsigned seed) {
  random_round g(seed);
  const int steps = 4;
  for (int k = 0; k < steps; ++k) {
    const std::int64_t base = 10000 * k, lag = g.uni(0, 3000);
    const bool marked = g.chance(0.7);
    auto maybe_markers = [&](marked_span& ms, std::uint32_t stream, std::int64_t shift) {
      if (marked && g.chance(0.9)) g.markers(ms, 0, stream, ms.span.begin_ns + shift, ms.span.end_ns + shift);
    };
    maybe_markers(g.span(phase_kind::step, "step", k, -1, base, base + 9000, 0, 0), main_stream, lag);
    maybe_markers(g.span(phase_kind::dataloader, "dataloader", k, -1, base + 50, base + 3000, 0, 1), 20, g.uni(0, 500));
    const std::int64_t cuts[] = {base + 100, base + 4000, base + 8000, base + 8900};
    const phase_kind kinds[] = {phase_kind::forward, phase_kind::backward, phase_kind::optimizer};
    const char* const kind_names[] = {"forward", "backward", "optimizer"};
    for (int p = 0; p < 3; ++p) {
      maybe_markers(g.span(kinds[p], kind_names[p], k, 0, cuts[p], cuts[p + 1], 0, 0), main_stream, lag);
      for (std::int64_t layer = cuts[p]; layer + 900 <= cuts[p + 1]; layer += 1000) {
        maybe_markers(g.span(phase_kind::user, "layer", k, 0, layer, layer + 900, 1, 0), main_stream, lag);
        maybe_markers(g.span(phase_kind::user, "attention", k, 0, layer + 100, layer + 500, 2, 0), main_stream, lag);
      }
    }
  }
  g.records(1500, -500, 10000 * steps + 3000, {main_stream, 20, 33});
  g.in.final_round = g.chance(0.5);
  return g.in;
}

/// Many windows placed at random: partial overlaps on one stream, several streams and devices,
/// equal begins and nesting depths, mismatched or inverted markers, micro-batch spans.
attribution_input scattered_round(unsigned seed) {
  random_round g(seed);
  const int steps = 6;
  static const char* const names[] = {"forward", "backward", "optimizer", "attn", "mlp"};
  for (int k = 0; k < steps; ++k) {
    const std::int64_t base = 1000 * k;
    auto& st = g.span(phase_kind::step, "step", k, -1, base, base + 900 + g.uni(0, 200), 0, 0);
    if (g.chance(0.7)) g.markers(st, 0, main_stream, base + 10 * g.uni(0, 5), base + 950 + 10 * g.uni(0, 10));
    if (g.chance(0.3)) g.span(phase_kind::microbatch, "microbatch", k, 0, base, base + 400, 0, 0);
    for (int p = 0; p < 40; ++p) {
      const std::int64_t b = base + 10 * g.uni(0, 88), e = b + 10 * g.uni(0, 25);
      const phase_kind kind = g.chance(0.25) ? phase_kind::user : phase_kind::forward;
      auto& ph = g.span(kind, names[g.uni(0, 4)], k, static_cast<std::int32_t>(g.uni(-1, 2)), b, e,
                        static_cast<std::uint8_t>(g.uni(0, 3)), static_cast<std::uint32_t>(g.uni(0, 2)));
      if (g.chance(0.8)) {
        const std::int64_t gb = base + 10 * g.uni(0, 95), ge = g.chance(0.05) ? gb - 5 : gb + 10 * g.uni(0, 30);
        g.markers(ph, g.chance(0.9) ? 0 : 1, static_cast<std::uint32_t>(g.uni(7, 9)), gb, ge);
      }
    }
  }
  std::shuffle(g.in.spans.begin(), g.in.spans.end(), g.rng);
  g.records(3000, -300, 1000 * steps + 500, {7, 8, 9, 33});
  g.in.final_round = g.chance(0.5);
  return g.in;
}

void check_window_facts(const gpu_facts& f) {
  CHECK(f.window_ns >= 0);
  CHECK(f.busy_ns >= 0);
  CHECK(f.busy_ns <= f.window_ns);
  CHECK(f.busy_ns + f.idle_ns == f.window_ns);
}

}  // namespace

TEST_CASE("invariants on random rounds: 0 <= busy <= window - busy + idle == window - every record once",
          "[attribution]") {
  const unsigned seed = GENERATE(range(1u, 9u));
  const bool scattered = GENERATE(false, true);
  const attribution_input in = scattered ? scattered_round(seed) : training_round(seed);
  const auto out = attribute(in);
  auto valid_kernel = [](const gpu_record& r) {
    return r.what == gpu_activity::type::kernel && !(r.begin_ns == 0 && r.end_ns == 0);
  };
  const auto kernels_in = static_cast<std::uint64_t>(std::count_if(in.records.begin(), in.records.end(), valid_kernel));
  const auto kernels_left =
      static_cast<std::uint64_t>(std::count_if(out.leftover.begin(), out.leftover.end(), valid_kernel));
  std::uint64_t placed = 0;  // in a phase, or unattributed (in a step outside its phases, or an orphan)
  for (std::size_t i = 0; i < out.reports.size(); ++i) {
    const auto& rep = out.reports[i];
    check_window_facts(rep.total);
    std::uint64_t in_phases = 0;
    for (const auto& p : rep.phases) {
      check_window_facts(p.facts);
      in_phases += p.facts.kernel_count;
      std::uint64_t listed = 0;
      for (const auto& k : p.kernels) listed += k.count;
      CHECK(listed == p.facts.kernel_count);
    }
    // The first report also carries the round's orphans as unattributed.
    if (i == 0)
      CHECK(in_phases + rep.unattributed_kernels >= rep.total.kernel_count);
    else
      CHECK(in_phases + rep.unattributed_kernels == rep.total.kernel_count);
    placed += in_phases + rep.unattributed_kernels;
  }
  CHECK(placed + kernels_left == kernels_in);
  const auto methods = static_cast<std::size_t>(std::count_if(
      out.method.begin(), out.method.end(), [](attribution_method m) { return m != attribution_method::none; }));
  CHECK(methods + out.leftover.size() + out.orphans + out.invalid == in.records.size());
}

namespace {

/// The rules of attribution.hpp as a plain scan over all spans per record: slow, and obviously so.
/// Result per record: fate, method and the spans (indices into in.spans) of its step and phase.
struct reference_result {
  detail::record_fate fate = detail::record_fate::orphan;
  attribution_method method = attribution_method::none;
  long step_span = -1, phase_span = -1;
  bool operator==(const reference_result& o) const {
    return fate == o.fate && method == o.method && step_span == o.step_span && phase_span == o.phase_span;
  }
};

struct reference_engine {
  const attribution_input& in;
  std::vector<long> steps;  // step spans by step number
  struct gpu_window {
    bool found = false;
    std::uint32_t dev = 0, st = 0;
    std::int64_t b = 0, e = 0;
  };
  std::vector<gpu_window> gpu_of;  // per span
  explicit reference_engine(const attribution_input& i) : in(i), gpu_of(i.spans.size()) {
    for (std::size_t s = 0; s < in.spans.size(); ++s) {
      if (in.spans[s].span.kind == phase_kind::step) steps.push_back(static_cast<long>(s));
      const marker_time *mb = nullptr, *me = nullptr;
      for (const auto& m : in.markers) {
        if (m.seq != 0 && m.seq == in.spans[s].begin_marker) mb = &m;
        if (m.seq != 0 && m.seq == in.spans[s].end_marker) me = &m;
      }
      if (mb && me && mb->device == me->device && mb->stream == me->stream && me->begin_ns >= mb->end_ns)
        gpu_of[s] = gpu_window{true, mb->device, mb->stream, mb->end_ns, me->begin_ns};
    }
    std::stable_sort(steps.begin(), steps.end(), [&](long a, long b) { return sp(a).step < sp(b).step; });
  }
  const span_record& sp(long s) const { return in.spans[static_cast<std::size_t>(s)].span; }
  /// GPU window of a span (both markers, one device and stream, in order), or false.
  bool gpu(long s, std::uint32_t& dev, std::uint32_t& st, std::int64_t& b, std::int64_t& e) const {
    const gpu_window& g = gpu_of[static_cast<std::size_t>(s)];
    dev = g.dev, st = g.st, b = g.b, e = g.e;
    return g.found;
  }
  int depth(long s) const { return sp(s).kind == phase_kind::step ? -1 : sp(s).nesting; }
  bool inner(long cand, long cur) const {
    if (cur < 0) return true;
    if (depth(cand) != depth(cur)) return depth(cand) > depth(cur);
    return sp(cand).begin_ns > sp(cur).begin_ns;  // ties: the first in input order stays
  }
  /// Spans with a GPU window containing t on (dev, one stream or any): the innermost phase, the last step.
  bool pick(const gpu_record& r, bool own_stream_only, reference_result& a) const {
    for (long s = 0; s < static_cast<long>(in.spans.size()); ++s) {
      std::uint32_t dev, st;
      std::int64_t b, e;
      if (sp(s).kind == phase_kind::microbatch || !gpu(s, dev, st, b, e)) continue;
      if (dev != r.device || (own_stream_only && st != r.stream) || r.begin_ns < b || r.begin_ns > e) continue;
      if (sp(s).kind == phase_kind::step)
        a.step_span = s;
      else if (inner(s, a.phase_span))
        a.phase_span = s;
    }
    return a.step_span >= 0 || a.phase_span >= 0;
  }
  bool stream_marked(const gpu_record& r, bool steps_only, std::int64_t& last_step_end) const {
    bool any = false;
    for (long s = 0; s < static_cast<long>(in.spans.size()); ++s) {
      std::uint32_t dev, st;
      std::int64_t b, e;
      if (sp(s).kind == phase_kind::microbatch || !gpu(s, dev, st, b, e) || dev != r.device || st != r.stream) continue;
      if (steps_only && sp(s).kind != phase_kind::step) continue;
      last_step_end = any ? std::max(last_step_end, e) : e;
      any = true;
    }
    return any;
  }
  void by_cpu_time(const gpu_record& r, reference_result& a) const {
    const std::int64_t t = r.begin_ns;
    if (t > sp(steps.back()).end_ns && !in.final_round) {
      a.fate = detail::record_fate::leftover;
      return;
    }
    for (long s : steps)
      if (sp(s).begin_ns <= t) a.step_span = s;
    if (a.step_span < 0) {
      a.fate = detail::record_fate::orphan;
      return;
    }
    long before = -1;
    for (long s = 0; s < static_cast<long>(in.spans.size()); ++s) {
      const auto& p = sp(s);
      if (p.kind == phase_kind::step || p.kind == phase_kind::microbatch || p.step != sp(a.step_span).step) continue;
      if (t >= p.begin_ns && t <= p.end_ns) {
        if (inner(s, a.phase_span)) a.phase_span = s;
      } else if (p.end_ns < t && (before < 0 || p.end_ns > sp(before).end_ns ||
                                  (p.end_ns == sp(before).end_ns && depth(s) > depth(before)))) {
        before = s;
      }
    }
    if (a.phase_span < 0) a.phase_span = before;
    a.fate = detail::record_fate::assigned;
    a.method = attribution_method::cpu_time;
  }
  reference_result assign(const gpu_record& r) const {
    reference_result a;
    if (r.begin_ns == 0 && r.end_ns == 0) {
      a.fate = detail::record_fate::invalid;
      return a;
    }
    std::int64_t last = 0;
    if (stream_marked(r, false, last) && pick(r, true, a)) {
      a.method = attribution_method::stream_order;
    } else if (stream_marked(r, true, last)) {  // between its stream's windows
      a.fate = r.begin_ns > last && !in.final_round ? detail::record_fate::leftover : detail::record_fate::orphan;
      return a;
    } else if (pick(r, false, a)) {
      a.method = attribution_method::gpu_time;
    } else {
      by_cpu_time(r, a);
      if (a.fate != detail::record_fate::assigned) return reference_result{a.fate, attribution_method::none, -1, -1};
    }
    a.fate = detail::record_fate::assigned;
    if (a.phase_span >= 0) {
      for (long s : steps)
        if (sp(s).step == sp(a.phase_span).step) {
          a.step_span = s;
          break;
        }
    }
    if (a.step_span < 0) return reference_result{detail::record_fate::orphan, attribution_method::none, -1, -1};
    return a;
  }
};

}  // namespace

TEST_CASE("the window index assigns exactly as a scan over every span", "[attribution]") {
  const unsigned seed = GENERATE(range(11u, 19u));
  const bool scattered = GENERATE(false, true);
  const attribution_input in = scattered ? scattered_round(seed) : training_round(seed);
  const auto windows = detail::build_windows(in.spans, in.markers);
  const auto index = detail::index_windows(windows);
  const auto got = detail::assign_records(in.records, windows, index, in.final_round);
  const reference_engine ref(in);
  REQUIRE(!ref.steps.empty());
  std::size_t mismatches = 0, by_method[4] = {0, 0, 0, 0};
  for (std::size_t r = 0; r < in.records.size(); ++r) {
    reference_result g;
    g.fate = got[r].fate;
    g.method = got[r].method;
    if (g.fate == detail::record_fate::assigned) {
      g.step_span = static_cast<long>(windows[static_cast<std::size_t>(got[r].step_window)].span);
      if (got[r].phase_window >= 0)
        g.phase_span = static_cast<long>(windows[static_cast<std::size_t>(got[r].phase_window)].span);
    }
    const reference_result want = ref.assign(in.records[r]);
    if (!(g == want)) {
      if (++mismatches <= 3) {
        INFO("record " << r << " at " << in.records[r].begin_ns << " stream " << in.records[r].stream);
        CHECK(static_cast<int>(g.fate) == static_cast<int>(want.fate));
        CHECK(static_cast<int>(g.method) == static_cast<int>(want.method));
        CHECK(g.step_span == want.step_span);
        CHECK(g.phase_span == want.phase_span);
      }
    }
    ++by_method[static_cast<int>(want.method)];
  }
  CHECK(mismatches == 0);
  // The inputs exercise every rule, so that agreement means something.
  CHECK(by_method[static_cast<int>(attribution_method::stream_order)] > 0);
  CHECK(by_method[static_cast<int>(attribution_method::gpu_time)] > 0);
  CHECK(by_method[static_cast<int>(attribution_method::cpu_time)] > 0);
}

TEST_CASE("idle split of a window: host wait, kernel-to-kernel wait and other wait add up to the idle time",
          "[attribution][idle]") {
  using detail::interval;
  using detail::merge_intervals;
  using detail::split_idle;
  // Window [0, 100 us). Own work on one stream, other work on a second one.
  const std::vector<interval> own = merge_intervals({{10'000, 20'000}, {24'000, 40'000}, {60'000, 70'000}});
  const std::vector<interval> other = {{45'000, 50'000}};
  std::vector<interval> all_records = own;
  all_records.insert(all_records.end(), other.begin(), other.end());
  const auto all = merge_intervals(all_records);
  const idle_split s = split_idle(own, all, 0, 100'000);
  // Idle: [0,10) edge -> host 10; [20,24) 4 us between activities -> gap 4; [40,60): other [45,50) 5,
  // nothing on the GPU [40,45) 5 us (not under 5) -> host 5, [50,60) -> host 10; [70,100) edge -> host 30.
  CHECK(s.other_ns == 5'000);
  CHECK(s.kernel_gap_ns == 4'000);
  CHECK(s.host_ns == 10'000 + 5'000 + 10'000 + 30'000);
  CHECK(s.total() == 100'000 - 36'000);

  SECTION("a gap just under the threshold is kernel-to-kernel wait") {
    const auto own2 = merge_intervals({{10'000, 20'000}, {24'999, 40'000}});
    const idle_split t = split_idle(own2, own2, 10'000, 40'000);
    CHECK(t.kernel_gap_ns == 4'999);
    CHECK(t.host_ns == 0);
    CHECK(t.other_ns == 0);
  }
  SECTION("a gap at the window's edge is host wait however short") {
    const auto own3 = merge_intervals({{1'000, 40'000}});
    const idle_split t = split_idle(own3, own3, 0, 41'000);
    CHECK(t.host_ns == 2'000);
    CHECK(t.kernel_gap_ns == 0);
  }
  SECTION("a window without records is all host wait; other work covering it all is all other wait") {
    CHECK(split_idle({}, {}, 0, 50'000).host_ns == 50'000);
    const std::vector<interval> cover = {{-5'000, 60'000}};
    const idle_split t = split_idle({}, cover, 0, 50'000);
    CHECK(t.other_ns == 50'000);
    CHECK(t.host_ns + t.kernel_gap_ns == 0);
  }
  SECTION("records beyond the window count only inside it") {
    const auto own4 = merge_intervals({{-10'000, 5'000}, {8'000, 30'000}});
    const idle_split t = split_idle(own4, own4, 0, 20'000);
    CHECK(t.kernel_gap_ns == 3'000);
    CHECK(t.total() == 3'000);
  }
}

TEST_CASE("idle split, launch statistics and copies on two streams through attribution", "[attribution][idle]") {
  scenario s;
  s.span(phase_kind::step, "step", 0, -1, 0, 200'000, 1'000, 190'000);
  s.span(phase_kind::forward, "forward", 0, 0, 2'000, 100'000, 10'000, 90'000);
  // A data-loading thread's phase on its own stream (20), beside forward.
  s.span(phase_kind::dataloader, "dataloader", 0, 0, 3'000, 50'000, 20'000, 60'000, /*stream=*/20, 0, /*thread=*/1);
  s.kernel("k1", 12'000, 20'000);
  s.kernel("k2", 22'000, 30'000);
  s.kernel("k3", 40'000, 70'000);
  s.kernel("k4", 80'000, 85'000);
  s.copy(gpu_activity::type::memcpy, 32'000, 36'000, 1 << 20, 20);
  const auto out = attribute(s.in);
  const auto& r = out.reports.at(0);
  const auto* fwd = find_phase(r, "forward", 0);
  const auto* dl = find_phase(r, "dataloader", 0);
  REQUIRE(fwd);
  REQUIRE(dl);

  // forward: window [10, 90) us, busy 51 us, idle 29 us: host [10,12) 2 + [70,80) 10 + [85,90) 5; kernel
  // gaps [20,22) 2, [30,32) 2, [36,40) 4 around the copy; other: the copy [32,36) 4 on stream 20.
  const gpu_facts& f = fwd->facts;
  CHECK(f.window_ns == 80'000);
  CHECK(f.busy_ns == 51'000);
  CHECK(f.idle_host_ns == 17'000);
  CHECK(f.idle_kernel_gap_ns == 8'000);
  CHECK(f.idle_other_ns == 4'000);
  CHECK(f.idle_host_ns + f.idle_kernel_gap_ns + f.idle_other_ns == f.idle_ns);
  CHECK(f.short_kernel_count == 3);  // 8, 8 and 5 us; not k3 (30 us)
  CHECK(f.copy_busy_ns == 0);
  std::vector<std::int64_t> durations = fwd->kernel_durations_ns;
  std::sort(durations.begin(), durations.end());
  CHECK(durations == std::vector<std::int64_t>{5'000, 8'000, 8'000, 30'000});

  // dataloader: window [20, 60) us, its copy 4 us; idle 36 us: other k2 [22,30) 8 + k3 [40,60) 20;
  // host [20,22) 2 at its edge; kernel gaps [30,32) 2 and [36,40) 4.
  const gpu_facts& d = dl->facts;
  CHECK(d.window_ns == 40'000);
  CHECK(d.busy_ns == 4'000);
  CHECK(d.copy_busy_ns == 4'000);
  CHECK(d.idle_other_ns == 28'000);
  CHECK(d.idle_host_ns == 2'000);
  CHECK(d.idle_kernel_gap_ns == 6'000);
  CHECK(d.idle_host_ns + d.idle_kernel_gap_ns + d.idle_other_ns == d.idle_ns);
  CHECK(d.short_kernel_count == 0);

  // The step: all of its work is its own (no other wait); idle 134 us, 8 us of it kernel gaps.
  const gpu_facts& t = r.total;
  CHECK(t.window_ns == 189'000);
  CHECK(t.busy_ns == 55'000);
  CHECK(t.idle_other_ns == 0);
  CHECK(t.idle_kernel_gap_ns == 8'000);
  CHECK(t.idle_host_ns == 126'000);
  CHECK(t.idle_host_ns + t.idle_kernel_gap_ns + t.idle_other_ns == t.idle_ns);
  CHECK(t.copy_busy_ns == 4'000);
  CHECK(t.short_kernel_count == 3);
  CHECK(r.unattributed_kernel_durations_ns.empty());
}
