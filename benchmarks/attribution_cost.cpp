// What attributing one recorded step costs the attribution worker's thread (CPU only, no GPU): the
// eager Qwen3 trainer's recorded 4x1 step carries about 4,100 kernels (dataloader, forward,
// backward, optimizer on one stream, with boundary markers), and the worker attributes each such
// step while training goes on. Synthetic steps of that shape go through attribution_stage::add, as
// the profiler hands them over, in three configurations: the bare facts; with the activities kept
// for the Chrome trace (every default output); and with the records also seen as the hardware
// counters count them (the defaults with counters on). Per configuration: the median over rounds of
// the time per step and per kernel, and the outputs' checksum (equal in every run of one version:
// the figures are the same whichever way they are computed).
//
//   attribution_cost [--rounds 15] [--steps 40] [--kernels 4112]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <traceml/gpu/attribution_stage.hpp>

namespace {

using namespace traceml;

/// One recorded step from `t0` (ns): four phases on stream 7 with markers at their edges, kernels
/// back to back (15 us each, 2 us apart), names drawn from `names` as a real step repeats them.
std::pair<gpu_delivery, std::int64_t> recorded_step(std::int32_t step, std::int64_t t0, int kernels,
                                                    const std::deque<std::string>& names, std::uint64_t& seq) {
  constexpr std::uint32_t stream = 7;
  const phase_kind kinds[] = {phase_kind::dataloader, phase_kind::forward, phase_kind::backward, phase_kind::optimizer};
  const char* phase_names[] = {"dataloader", "forward", "backward", "optimizer"};
  // The trainer's split of a step's kernels: none in the dataloader, a third forward, most backward.
  const int counts[] = {2, kernels * 32 / 100, kernels * 63 / 100,
                        kernels - 2 - kernels * 32 / 100 - kernels * 63 / 100};
  gpu_delivery d;
  step_activity a;
  a.step = step;
  a.recorded = true;
  const auto marked = [&](phase_kind kind, const char* name, std::int64_t begin, std::uint8_t nesting) {
    timed_span ts;
    ts.marked.span.kind = kind;
    ts.marked.span.name = name;
    ts.marked.span.step = step;
    ts.marked.span.microbatch = kind == phase_kind::step ? -1 : 0;
    ts.marked.span.nesting = nesting;
    ts.marked.span.begin_ns = begin;
    ts.marked.begin_marker = seq++;
    d.markers.push_back(marker_time{ts.marked.begin_marker, 0, stream, begin, begin + 1});
    return ts;
  };
  const auto close = [&](timed_span& ts, std::int64_t end) {
    ts.marked.end_marker = seq++;
    d.markers.push_back(marker_time{ts.marked.end_marker, 0, stream, end, end + 1});
    ts.marked.span.end_ns = end + 2;
    ts.event_ns = ts.marked.span.end_ns - ts.marked.span.begin_ns;
  };
  timed_span whole = marked(phase_kind::step, "step", t0, 0);
  std::int64_t t = t0 + 5;
  std::vector<timed_span> phases;
  int k = 0;
  for (int p = 0; p < 4; ++p) {
    timed_span ts = marked(kinds[p], phase_names[p], t, 1);
    t += 5;
    for (int i = 0; i < counts[p]; ++i, ++k, t += 17'000) {
      gpu_record r;
      r.begin_ns = t;
      r.end_ns = t + 15'000;
      r.stream = stream;
      r.name = names[static_cast<std::size_t>(k * 7) % names.size()].c_str();
      d.records.push_back(r);
    }
    close(ts, t);
    t += 5;
    phases.push_back(ts);
  }
  close(whole, t);
  a.spans.push_back(whole);
  a.spans.insert(a.spans.end(), phases.begin(), phases.end());
  d.steps.push_back(std::move(a));
  return {std::move(d), t + 10};
}

/// FNV-1a over every figure of the reports: one number to compare the outputs of two builds.
std::uint64_t checksum(const std::vector<step_gpu_report>& reports, std::uint64_t h) {
  const auto mix = [&h](std::int64_t v) { h = (h ^ static_cast<std::uint64_t>(v)) * 1099511628211ull; };
  const auto facts = [&mix](const gpu_facts& f) {
    for (std::int64_t v : {f.busy_ns, f.idle_ns, f.idle_host_ns, f.idle_kernel_gap_ns, f.idle_other_ns,
                           f.counted_busy_ns, f.own_ns, f.hidden_ns, f.copy_busy_ns, f.kernel_ns})
      mix(v);
    mix(static_cast<std::int64_t>(f.kernel_count));
  };
  for (const auto& r : reports) {
    facts(r.total);
    for (const auto& p : r.phases) {
      facts(p.facts);
      for (const auto& kernel : p.kernels) mix(static_cast<std::int64_t>(kernel.count)), mix(kernel.total_ns);
    }
    mix(static_cast<std::int64_t>(r.activities.size()));
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15, steps = 40, kernels = 4112;
  CLI::App app{"CPU time of attributing one recorded step of the eager Qwen3 trainer's shape (synthetic records)."};
  app.add_option("--rounds", rounds, "rounds; the median is printed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--steps", steps, "recorded steps per round")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--kernels", kernels, "kernels per step")->check(CLI::Range(8, 1000000))->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::deque<std::string> names;  // stable storage, as the reader's interned names are
  for (int i = 0; i < 300; ++i) names.push_back("void gemm_kernel_" + std::to_string(i) + "<float, 128, 64, 8>(...)");
  struct config {
    const char* what;
    bool activities, counted;
  };
  const config configs[] = {{"facts only", false, false},
                            {"+ activities (Chrome trace)", true, false},
                            {"+ as counted (hardware counters on)", true, true}};
  std::printf("%d kernels per recorded step, %d steps per round, %d rounds\n", kernels, steps, rounds);
  std::printf("  %-38s %12s %12s %18s\n", "configuration", "us/step", "ns/kernel", "checksum");
  for (const config& c : configs) {
    std::vector<double> per_step_us;
    std::uint64_t sum = 1469598103934665603ull;
    for (int r = 0; r < rounds; ++r) {
      attribution_stage stage;
      stage.keep_activities(c.activities);
      if (c.counted) stage.counter_view(records_as_counted{1'000'000, 0});
      std::vector<gpu_delivery> deliveries;
      std::uint64_t seq = 1;
      std::int64_t t = 1000;
      for (int s = 0; s < steps; ++s) {
        auto [d, next] = recorded_step(s, t, kernels, names, seq);
        deliveries.push_back(std::move(d));
        t = next;
      }
      std::vector<std::vector<step_gpu_report>> out;
      out.reserve(deliveries.size());
      const auto t0 = std::chrono::steady_clock::now();
      for (auto& d : deliveries) out.push_back(stage.add(std::move(d)));
      const auto t1 = std::chrono::steady_clock::now();
      per_step_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / steps);
      if (r == 0)
        for (const auto& reports : out) sum = checksum(reports, sum);
    }
    std::nth_element(per_step_us.begin(), per_step_us.begin() + rounds / 2, per_step_us.end());
    const double median = per_step_us[static_cast<std::size_t>(rounds / 2)];
    std::printf("  %-38s %12.1f %12.1f %18llx\n", c.what, median, 1000.0 * median / kernels,
                static_cast<unsigned long long>(sum));
  }
  return 0;
}
