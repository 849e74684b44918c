// Writes the JSON summaries the `traceml compare --fail-if-slower` tests run the command on, into the
// folder given: runs of hand-chosen step times, summarized and written by the library itself, so
// that the command reads what a profiler writes. Step times (ms; every run has a forward phase of 80%
// of the step and the rest as residual):
//   base.json       100 steps: 98, 99, 100, 101, 102 in turn (median 100, p10 98, p90 102)
//   slower.json     the same + 10 ms (median 110: +10%)
//   faster.json     the same - 10 ms (median 90: -10%)
//   tolerance.json  the same + 3 ms (median 103: +3%, beyond the noise of about 0.54%)
//   noisy.json      20 steps of 70, 74, ..., 146 in a shuffled order (median 108: +8%, p10 77.6, p90
//                   138.4: a noise band of about 13%, and a spread of 56% of the median: unstable)
//   kernels_a.json, kernels_b.json   tests/core/mixed_run.hpp's run, and the same with forward and
//                   backward twice as long, 1.5x the busy time and 4x the launches (kernel records)
//   two_runs.json   base and slower in one file
//   no_steps.json   a run that ended before its first step
//   cut.json        base.json cut in the middle
#include <cstdio>
#include <string>
#include <vector>

#include <traceml/analysis/run_accumulator.hpp>
#include <traceml/sinks/json_summary.hpp>

#include "mixed_run.hpp"

namespace {

traceml::run_result run_of(const std::string& name, const std::vector<double>& step_ms) {
  std::vector<traceml::step_result> steps;
  double at_ms = 0;
  for (std::size_t i = 0; i < step_ms.size(); ++i) {
    traceml::step_result st;
    st.step = static_cast<std::int32_t>(i);
    st.begin_ns = static_cast<std::int64_t>(at_ms * 1e6);
    st.wall_ms = step_ms[i];
    st.residual_ms = 0.2 * step_ms[i];
    st.microbatches = 1;
    st.phases.push_back({traceml::phase_kind::forward, "forward", 0.8 * step_ms[i], 1, true});
    steps.push_back(st);
    at_ms += step_ms[i];
  }
  traceml::run_result r;
  r.name = name;
  r.steps = steps;
  r.summary = traceml::summarize_run(steps, 0);
  return r;
}

std::vector<double> around(double median) {
  std::vector<double> v;
  for (int i = 0; i < 100; ++i) v.push_back(median - 2 + i % 5);
  return v;
}

bool write(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  const bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f && std::fclose(f) != 0) return false;
  if (!ok) std::fprintf(stderr, "cannot write %s\n", path.c_str());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FOLDER\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const auto base = run_of("mlp", around(100));
  std::vector<double> noisy;
  for (int i = 0; i < 20; ++i) noisy.push_back(70 + 4 * ((i * 9) % 20));
  traceml_test::mixed_run_shape b;
  b.name = "b";
  b.fb_scale = 2.0;
  b.busy_scale = 1.5;
  b.launch_scale = 4.0;
  traceml_test::mixed_run_shape a;
  a.name = "a";
  const std::string whole = traceml::json_summary({base});
  bool ok = write(dir + "/base.json", whole);
  ok = write(dir + "/slower.json", traceml::json_summary({run_of("mlp", around(110))})) && ok;
  ok = write(dir + "/faster.json", traceml::json_summary({run_of("mlp", around(90))})) && ok;
  ok = write(dir + "/tolerance.json", traceml::json_summary({run_of("mlp", around(103))})) && ok;
  ok = write(dir + "/noisy.json", traceml::json_summary({run_of("mlp", noisy)})) && ok;
  ok = write(dir + "/kernels_a.json", traceml::json_summary({traceml_test::mixed_run(a)})) && ok;
  ok = write(dir + "/kernels_b.json", traceml::json_summary({traceml_test::mixed_run(b)})) && ok;
  ok = write(dir + "/two_runs.json", traceml::json_summary({base, run_of("mlp", around(110))})) && ok;
  ok = write(dir + "/no_steps.json", traceml::json_summary({run_of("mlp", {})})) && ok;
  ok = write(dir + "/cut.json", whole.substr(0, whole.size() / 2)) && ok;
  return ok ? 0 : 1;
}
