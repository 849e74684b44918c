// The attribution engine on synthetic record streams: markers (stream order), GPU time, CPU time,
// out-of-order and late records, overlapping streams, dropped and untimed records, facts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

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
    gpu_record r;
    r.what = gpu_activity::type::kernel;
    r.begin_ns = b;
    r.end_ns = e;
    r.stream = stream;
    r.name = name;
    in.records.push_back(r);
  }
  void copy(gpu_activity::type what, std::int64_t b, std::int64_t e, std::uint64_t bytes, std::uint32_t stream = main_stream) {
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
  for (int i = 0; i < 4; ++i) s.kernel("fwd_gemm", 160 + i * 70, 220 + i * 70);         // 160..430
  for (int i = 0; i < 6; ++i) s.kernel("bwd_gemm", 460 + i * 70, 520 + i * 70);         // 460..870 (autograd threads)
  for (int i = 0; i < 3; ++i) s.kernel("adam", 910 + i * 40, 940 + i * 40);             // 910..1030
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
  s.kernel("fwd", 30, 390);                      // stream 7, overlaps the copy stream's work
  s.kernel("h2d_unpack", 70, 370, 20);           // stream 20 (marked): its own phase
  s.kernel("side_stream", 420, 600, 33);         // stream 33 (never marked): by GPU time
  s.kernel("side_stream_gap", 402, 408, 33);     // stream 33 between windows: enclosing step only
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
  s.in.markers.erase(std::remove_if(s.in.markers.begin(), s.in.markers.end(),
                                    [&](const marker_time& m) { return m.seq == lost; }),
                     s.in.markers.end());
  s.in.dropped[0] = 1;
  auto out = attribute(s.in);
  const auto& r = out.reports.at(0);
  CHECK(r.dropped_records == 1);
  CHECK(phase_kernels(r, "forward", 0) == 4);   // still exact
  CHECK(phase_kernels(r, "optimizer") == 3);    // still exact
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

TEST_CASE("facts: sums - union - idle inside the wall window - memcpy/memset - top kernels", "[attribution]") {
  scenario s;
  s.span(phase_kind::step, "step", 0, -1, 0, 1000, 1, 999);
  s.span(phase_kind::forward, "forward", 0, 0, 0, 1000, 2, 998);
  s.kernel("a", 100, 200);
  s.kernel("a", 150, 250);   // overlaps the first: kernel_ns 200, busy 150
  s.kernel("b", 500, 800);
  s.kernel("c", 900, 910);
  s.copy(gpu_activity::type::memcpy, 20, 60, 1000);
  s.copy(gpu_activity::type::memset, 60, 70, 64);
  attribution_options opt;
  opt.top_kernels = 2;
  auto r = attribute(s.in, opt).reports.at(0);
  const auto& f = find_phase(r, "forward", 0)->facts;
  CHECK(f.kernel_count == 4);
  CHECK(f.kernel_ns == 100 + 100 + 300 + 10);
  CHECK(f.busy_ns == 150 + 300 + 10 + 40 + 10);
  CHECK(f.memcpy_ns == 40);
  CHECK(f.memcpy_bytes == 1000);
  CHECK(f.memset_ns == 10);
  CHECK(f.memset_bytes == 64);
  CHECK(f.idle_ns == 1000 - f.busy_ns);
  const auto& top = find_phase(r, "forward", 0)->top_kernels;
  REQUIRE(top.size() == 2);
  CHECK(top[0].name == "b");
  CHECK(top[0].total_ns == 300);
  CHECK(top[1].name == "a");
  CHECK(top[1].count == 2);
  CHECK(top[1].mean_ns() == 100);
  CHECK(r.total.kernel_ns == f.kernel_ns);
  CHECK(r.total.idle_ns == f.idle_ns);
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

TEST_CASE("union_length", "[attribution]") {
  std::vector<std::pair<std::int64_t, std::int64_t>> iv = {{5, 10}, {0, 3}, {2, 4}, {9, 12}, {20, 20}};
  CHECK(detail::union_length(iv) == 4 + 7);
}
