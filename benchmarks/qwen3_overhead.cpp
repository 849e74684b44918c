// qwen3_overhead: what profiling costs the bundled Qwen3 LoRA trainer, measured in one process by
// alternating blocks of optimizer steps between modes, in an order that rotates every round:
//   off        the trainer with no profiler (its callback list holds only this benchmark's clock)
//   cpu        profiler attached, no GPU source (phase timing on the CPU)
//   events     profiler + CUDA-event phase timing (no CUPTI)
//   cupti      profiler + CUPTI kernel attribution on every step (every cupti mode also times each
//              phase with CUDA events on every step, as make_best_gpu_source does; +noevents: not)
//   cupti/N    profiler + CUPTI records on one step in N (cupti_options::sample_every)
//   cupti@B    profiler + CUPTI records on the steps an overhead budget of B percent allows (the
//              default of make_best_gpu_source is cupti@0.5); its blocks are --budget-block steps long,
//              since the budget is kept over a run, not over a few steps
//   M+pm       events or a cupti mode with hardware-counter sampling added (pm_sampling_source.hpp):
//              its cost, and for cupti+pm the agreement of counter busy with kernel-record busy
//   events+pmalt  events, with the process's PM sampler running on every other step and paused on
//              the rest (the switch between steps, outside the timed part): the sampler's own cost
//              (hardware sampling, the decoding thread) from each sampled step against its two
//              neighbours, which drift cannot reach as it reaches blocks of a CPU-bound loop
//   M+V        a mode with a part switched off, to locate a cost: +nomemory (no memory sampler),
//              and for CUPTI +nomarkers (no boundary markers), +noclock (CUPTI's own clock, mapped),
//              +noflush (no periodic flush), +nomemcpy, +noevents (no CUDA-event phase timing)
//   defaults   what qwen3_accumulation runs with by default: make_best_gpu_source as it makes it
//              (CUPTI records on the steps a 0.25% budget allows, CUDA-event timing within its own
//              0.1%, hardware counters, the allocator's memory), the per-step JSONL, the Chrome
//              trace and the summary (written at finish, outside the timed steps); its blocks are
//              --budget-block steps long, as a run of the trainer
// The profiler's own work on the training thread is timed too: callbacks just before and after it
// bracket every hook it has (step, micro-batch, phase; `off` times the empty brackets), the part of
// its cost that no GPU overlap can hide.
// Where the ratio cannot be resolved (eager steps on a shared host vary by 10-30% from block to
// block), each profiled mode's cost is also bounded by its parts, each measured directly: the
// profiler's hooks on the training thread; CUPTI's recordings, as the recording budget measured them
// against its own unrecorded steps (the status line's "spent"); the CPU time of traceml's own
// threads (named "traceml ...": the step worker, the attribution worker, CUPTI's buffer thread, the
// counters' decoder) per step, read per thread from /proc; and the other threads' CPU time (LibTorch's
// autograd workers, CUPTI's and the driver's threads) against off's. GPU work added per step is
// bounded by the CUDA-graph run of the same schedule, where the step is the GPU's.
// A step is timed from its on_step_begin to the next one's (the profiler's step-end work included);
// every step ends with a loss read (one CPU-GPU sync, as logging the loss would). The first step
// of every block is not counted: it pays the mode switch (CUPTI start-up). Per round and mode the
// mean counted step time is divided by `off`'s of the same round; the median of these ratios over
// rounds is the overhead, with a distribution-free confidence interval for that median. Means, not
// medians, per block: a 1-in-N mode pays on one step of N, which a median would hide.
//
//   qwen3_overhead [--preset qwen3-1.7b] [--schedules 4x1,1x4] [--modes off,events,cupti,cupti@0.5]
//                  [--rounds 8] [--block 11] [--budget-block 100] [--seq-len 512] [--cuda-graphs]
//                  [--no-checkpointing]
//
// Budgets (issue: GPU truth): phase timing without CUPTI <= +0.3%; kernel attribution <= +1% when
// there is no accumulation (4x1) and <= +3% with accumulation (1x4, launch-bound). The verdict says
// "within" or "over" only when the whole interval is on one side of the budget.
#include <CLI/CLI.hpp>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <traceml/analysis/stats.hpp>
#include <traceml/clock.hpp>
#include <traceml/gpu/cuda_events_source.hpp>
#include <traceml/gpu/pm_sampling_source.hpp>
#include <traceml/gpu/source_factory.hpp>
#include <traceml/profiler.hpp>
#include <traceml/thread_identity.hpp>
#include <traceml/torch_adapter.hpp>

#include "median_interval.hpp"
#include "qwen3.hpp"

namespace {

/// Added first to the callback list (begin hooks run in registration order, end hooks in reverse):
/// stamps step begins before the profiler's work and step ends after it, and, with after_profiler,
/// brackets every hook of the profiler: `hook_ns` holds each step's time inside them.
struct step_clock : traceml::callback {
  std::vector<std::int64_t> begins, ends;
  std::int64_t end = 0;                 // set by after_profiler: its on_train_end runs before the profiler's
  std::int64_t opened = 0, inside = 0;  // a bracket's start; the current step's time in brackets
  std::vector<std::int64_t> hook_ns;    // per step
  void open() { opened = traceml::now_ns(); }
  void close() { inside += traceml::now_ns() - opened; }
  void on_step_begin() override {
    begins.push_back(traceml::now_ns());
    inside = 0;
    opened = begins.back();
  }
  void on_step_end() override {
    ends.push_back(traceml::now_ns());
    inside += ends.back() - opened;
    hook_ns.push_back(inside);
  }
  void on_microbatch_begin() override { open(); }
  void on_microbatch_end() override { close(); }
  void on_phase_begin(traceml::phase_kind, const char*) override { open(); }
  void on_phase_end(traceml::phase_kind, const char*) override { close(); }
  /// Step durations in ms: begin to next begin, the last one to the end of training.
  std::vector<double> steps_ms() const {
    std::vector<double> out;
    for (std::size_t i = 0; i < begins.size(); ++i)
      out.push_back(static_cast<double>((i + 1 < begins.size() ? begins[i + 1] : end) - begins[i]) / 1e6);
    return out;
  }
};

/// +pmalt, added before step_clock: starts the process's PM sampler before every other step's begin
/// stamp and pauses it after that step's end stamp, so the switch itself is not timed; `on` says
/// which steps sampled. Step times for it: begin to end of the same step (the loss read, a sync, is
/// inside), not begin to next begin.
struct sampler_toggle : traceml::callback {
  traceml::pm_sampler& sampler = traceml::process_pm_sampler();
  std::vector<bool> on;
  sampler_toggle() { sampler.pause(); }
  void on_step_begin() override {
    on.push_back(on.size() % 2 == 1);
    if (on.back()) sampler.resume();
  }
  void on_step_end() override {
    if (on.back()) sampler.pause();
  }
};

/// CPU time of this process's threads in three groups, in microseconds, from the kernel's per-thread
/// accounting (/proc/self/task/<tid>/schedstat: nanoseconds on a CPU; Linux): traceml's own threads
/// (named "traceml ..."), and every other thread but the calling one (the training thread, which
/// CLOCK_THREAD_CPUTIME_ID reads). `ok` is false where the files cannot be read.
struct thread_cpu {
  double traceml_us = 0, others_us = 0;
  std::map<std::string, double> traceml_by_name;  // traceml's threads by name (same names summed)
  bool ok = false;
};

thread_cpu read_thread_cpu() {
  thread_cpu t;
  const std::string self = std::to_string(traceml::detail::current_os_thread_id(0));
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream stat(task.path() / "schedstat"), comm(task.path() / "comm");
    double on_cpu_ns = 0;
    std::string name;
    if (!(stat >> on_cpu_ns)) continue;  // the thread ended meanwhile
    std::getline(comm, name);
    const double us = on_cpu_ns / 1e3;
    t.ok = true;
    if (task.path().filename() == self) continue;
    if (name.rfind("traceml", 0) == 0) {
      t.traceml_us += us;
      t.traceml_by_name[name] += us;
    } else
      t.others_us += us;
  }
  return t;
}

/// Added last: closes step_clock's bracket after each of the profiler's begin hooks and opens it
/// before each of its end hooks; at the end of training reads the threads' CPU and the CUPTI
/// source's counts (end hooks run in reverse order: this one before the profiler's, whose
/// finish() ends its threads and its GPU source).
struct after_profiler : traceml::callback {
  explicit after_profiler(step_clock& c) : clock(c) {}
  step_clock& clock;
  void on_step_begin() override { clock.close(); }
  void on_step_end() override { clock.open(); }
  void on_microbatch_begin() override { clock.close(); }
  void on_microbatch_end() override { clock.open(); }
  void on_phase_begin(traceml::phase_kind, const char*) override { clock.close(); }
  void on_phase_end(traceml::phase_kind, const char*) override { clock.open(); }
  void on_train_end() override {
    clock.end = traceml::now_ns();
    threads = read_thread_cpu();
    if (cupti) {
      // The steps' own slowdown: the budget also charges the attribution worker's CPU, which the
      // parts count as that thread's.
      spent = cupti->recordings_step_share();
      switches = cupti->record_switches();
      switch_ns = cupti->record_switch_ns();
    }
  }
  thread_cpu threads;
  traceml::cupti_source* cupti = nullptr;  // the block's CUPTI source, if any (alive until finish())
  double spent = 0;
  std::uint64_t switches = 0;
  std::int64_t switch_ns = 0;
};

/// The CUPTI source a GPU source is or wraps (the hardware counters' source wraps one), or null.
traceml::cupti_source* cupti_inside(traceml::gpu_source* s) {
  if (auto* pm = dynamic_cast<traceml::pm_sampling_source*>(s)) s = pm->inner();
  return dynamic_cast<traceml::cupti_source*>(s);
}

/// CPU time of a clock (CLOCK_THREAD_CPUTIME_ID, CLOCK_PROCESS_CPUTIME_ID), in microseconds.
double cpu_us(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// As the profiler's own summaries compute them (0 for an empty sample).
double mean(const std::vector<double>& v) { return traceml::summarize(v).mean; }
double median(const std::vector<double>& v) { return traceml::summarize(v).median; }

using traceml_bench::median_interval;

struct mode {
  std::string name;
  int sample_every = 0;  // cupti modes: 1 = every step
  bool events = false, profiler = false;
  double budget = 0;             // cupti@B: overhead budget (share)
  bool memory = true;            // +nomemory
  bool pm = false;               // +pm: hardware counters sampled besides
  bool pm_alternate = false;     // +pmalt: the sampler on every other step
  bool defaults = false;         // the trainer's defaults (source, outputs)
  traceml::cupti_options cupti;  // variants: +nomarkers +noclock +noflush +nomemcpy +noevents
};

mode parse_mode(std::string s) {
  mode m;
  m.name = s;
  // CUPTI variants, to find where a cost comes from: cupti+nomarkers+noclock ...
  for (std::size_t plus = s.find('+'); plus != std::string::npos; plus = s.find('+')) {
    std::size_t next = s.find('+', plus + 1);
    const std::string v = s.substr(plus + 1, next == std::string::npos ? std::string::npos : next - plus - 1);
    s.erase(plus, next == std::string::npos ? std::string::npos : next - plus);
    if (v == "nomemory") {
      m.memory = false;
      continue;
    }
    if (v == "pm") {
      m.pm = true;
      continue;
    }
    if (v == "pmalt") {
      m.pm_alternate = true;
      continue;
    }
    if (v == "nomarkers")
      m.cupti.markers = false;
    else if (v == "noclock")
      m.cupti.timestamp_callback = false;
    else if (v == "noflush")
      m.cupti.flush_period_ms = 0;
    else if (v == "nomemcpy")
      m.cupti.memcpy = false;
    else if (v == "noevents")
      m.cupti.phase_events = false;
    else
      throw std::invalid_argument("unknown variant '+" + v +
                                  "' (pm, pmalt, nomemory, nomarkers, noclock, noflush, nomemcpy, noevents)");
    if (s.rfind("cupti", 0) != 0) throw std::invalid_argument("variants apply to cupti modes only: " + m.name);
  }
  if (s == "off") return m;
  m.profiler = true;
  if (s == "defaults") {
    m.defaults = true;
    m.budget = traceml::cupti_options{}.overhead_budget;  // the trainer's: blocks as long as --budget-block
    return m;
  }
  if (s == "cpu") return m;
  if (s == "events") {
    m.events = true;
    return m;
  }
  if (s == "cupti") {
    m.sample_every = 1;
    return m;
  }
  if (s.rfind("cupti/", 0) == 0) {
    m.sample_every = std::atoi(s.c_str() + 6);
    if (m.sample_every >= 1) return m;
  }
  if (s.rfind("cupti@", 0) == 0) {
    m.sample_every = 1;
    m.budget = std::atof(s.c_str() + 6) / 100.0;
    if (m.budget > 0) return m;
  }
  throw std::invalid_argument("unknown mode '" + s + "' (off, cpu, events, cupti, cupti/N, cupti@B, defaults)");
}

/// What a mode measured over all its blocks.
struct mode_result {
  std::vector<double> counted;             // every counted step, ms
  std::vector<double> block_means;         // per round
  std::vector<double> sampled, unsampled;  // cupti/N, cupti@B: counted steps by their report's kernels_measured
  std::vector<double> hook_us;             // the profiler's step begin + end work, per step
  std::vector<double> alternate;           // +pmalt: a sampled step over the mean of its two neighbours
  // Per round, minus off's block of the same round: CPU time per step of the training thread and of
  // the whole process (LibTorch's threads and the profiler's background threads: the step worker,
  // the attribution worker, CUPTI's buffer thread, the counters' decoder).
  std::vector<double> thread_us_added, process_us_added;
  // Per round, per step: traceml's threads' CPU time; the other threads' CPU time minus off's.
  std::vector<double> traceml_threads_us, others_us_added;
  std::map<std::string, std::vector<double>> traceml_thread_us;  // per round, per step, by thread name
  std::vector<double> spent;  // per block: the recordings' share of the run, as their budget measured it
  std::uint64_t recorded_steps = 0, steps = 0, timed_steps = 0;  // timed: the step's GPU span measured
  std::uint64_t kernels = 0, attributed = 0, dropped = 0, gpu_steps = 0, switches = 0;
  std::int64_t switch_ns = 0;
  std::string status, unavailable;
  // +pm: steps whose phases carry counter facts; per phase name, summed over recorded steps with
  // both: kernel-record busy and window, counter busy and covered time (the agreement check).
  std::uint64_t counter_steps = 0;
  std::map<std::string, std::array<double, 4>> agreement;
};

/// The source, with hardware-counter sampling around it for +pm modes; a sampler that cannot start
/// makes the mode unavailable, with CUPTI's reason. Between +pm blocks the process's sampler is paused
/// (the source's release), so the other modes' blocks run without any counter traffic or decoding.
std::unique_ptr<traceml::gpu_source> with_counters(const mode& md, std::unique_ptr<traceml::gpu_source> src,
                                                   mode_result& out) {
  if (!md.pm) return src;
  traceml::pm_sampling_options o;
  o.current_stream = traceml::libtorch::current_stream_provider();
  o.sampler.decode_budget = 0;  // every sample: the +pm modes measure the counters on every step
  auto wrapped = std::make_unique<traceml::pm_sampling_source>(std::move(src), o);
  if (!wrapped->sampling()) out.unavailable = wrapped->why();
  return wrapped;
}

/// The GPU source qwen3_accumulation makes at its defaults (examples/qwen3/experiment.cpp's
/// make_gpu_source: --gpu-timing auto, --record-budget at the library's default, hardware counters on).
std::unique_ptr<traceml::gpu_source> trainer_default_source() {
  traceml::gpu_source_options g;
  g.current_stream = traceml::libtorch::current_stream_provider();
  g.memory = traceml::libtorch::caching_allocator_sampler();
  return traceml::make_best_gpu_source(g);
}

/// The defaults' cost bounded by its parts, each measured directly, as shares of off's step (see
/// the header): the sum is what the mode may cost the loop where its ratio is not resolved.
void print_parts(const mode_result& m, const mode_result& off, double off_ms) {
  if (m.traceml_threads_us.empty()) {
    std::printf("  %-9s   parts: per-thread CPU unavailable (no /proc/self/task/*/schedstat)\n", "");
    return;
  }
  const double hooks = (mean(m.hook_us) - mean(off.hook_us)) / 1e3 / off_ms;
  const double spent_share = m.spent.empty() ? 0.0 : median(m.spent);
  const double own = median(m.traceml_threads_us) / 1e3 / off_ms;
  const auto oi = median_interval(m.others_us_added);
  const double others = median(m.others_us_added) / 1e3 / off_ms;
  std::printf(
      "  %-9s   parts, as shares of off's step: the profiler's hooks on the training thread %.3f%% (%.1f us); "
      "CUPTI's recordings %.3f%% (the budget's own measure of the recorded steps' slowdown, median of %zu blocks); "
      "traceml's threads' CPU "
      "%.3f%% (%.1f us per step, %.2f%% of one core); other threads' CPU against off %+.3f%% (%+.1f us "
      "[%+.1f, %+.1f])\n",
      "", 100 * hooks, mean(m.hook_us) - mean(off.hook_us), 100 * spent_share, m.spent.size(), 100 * own,
      median(m.traceml_threads_us), 100 * own, 100 * others, median(m.others_us_added), oi.lo, oi.hi);
  std::string by_name;
  for (const auto& [name, us] : m.traceml_thread_us) {
    char one[96];
    std::snprintf(one, sizeof one, "%s\"%s\" %.1f us (%.3f%%)", by_name.empty() ? "" : ", ", name.c_str(), median(us),
                  100 * median(us) / 1e3 / off_ms);
    by_name += one;
  }
  if (!by_name.empty())
    std::printf("  %-9s   traceml's threads per step (median of rounds): %s\n", "", by_name.c_str());
  std::printf(
      "  %-9s   bounded by its parts: %.3f%% (hooks + recordings + traceml's threads, each thread's CPU as if it "
      "were the training's own), %.3f%% with the other threads' upper end; add the GPU work bound from the "
      "CUDA-graph run of this schedule\n",
      "", 100 * (hooks + spent_share + own), 100 * (hooks + spent_share + own + std::max(0.0, oi.hi / 1e3 / off_ms)));
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset, schedules = "4x1,1x4", device_name;
  std::vector<std::string> mode_names = {"off", "events", "cupti", "cupti@0.5"};
  int rounds = 8, block = 0, budget_block = 100, warmup = 3;
  std::int64_t seq_len = 0;
  bool checkpointing = true, cuda_graphs = false;
  std::uint64_t seed = 1234;
  CLI::App app{"Profiling overhead on the Qwen3 LoRA trainer: alternating blocks of steps, paired ratios to untraced."};
  app.add_option("--preset", preset, "model preset (default: qwen3-1.7b on a GPU, tiny on the CPU)");
  app.add_option("--schedules", schedules, "comma-separated MxA schedules")->capture_default_str();
  app.add_option("--modes", mode_names,
                 "comma-separated: off, cpu, events, cupti, cupti/N, cupti@B, with +variants (off is always measured)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--rounds", rounds, "rounds; each runs one block per mode")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--block", block,
                 "steps per block, the first not counted (default: largest N of cupti/N, plus 1, at least 4)")
      ->check(CLI::Range(2, 100000));
  app.add_option("--budget-block", budget_block, "steps per block of cupti@B modes")
      ->check(CLI::Range(2, 100000))
      ->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps per schedule before the first round")->capture_default_str();
  app.add_option("--seq-len", seq_len, "tokens per example (default: 512 on a GPU, 64 on the CPU)");
  app.add_option("--device", device_name, "cuda | cpu (default: cuda when available)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_flag("--checkpointing,!--no-checkpointing", checkpointing,
               "activation checkpointing (default on, as the experiment)");
  app.add_flag("--cuda-graphs", cuda_graphs, "replay forward and backward from CUDA graphs (LibTorch 2.x with CUDA)");
  app.add_option("--seed", seed, "seed for weights and synthetic data")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    std::vector<mode> modes = {parse_mode("off")};
    int largest_n = 1;
    for (auto& s : mode_names) {
      if (s == "off") continue;
      modes.push_back(parse_mode(s));
      largest_n = std::max(largest_n, modes.back().sample_every);
    }
    if (block == 0) block = std::max(4, largest_n + 1);
    const bool cuda = device_name.empty() ? torch::cuda::is_available() : device_name == "cuda";
    if (cuda && !torch::cuda::is_available())
      throw std::runtime_error("--device cuda: this LibTorch sees no CUDA device");
    const torch::Device device = cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
    // The defaults' outputs, written at each block's finish, and removed file by file at the end
    // (not with std::filesystem::remove_all: the LibTorch 2.11 wheel exports a copy of it that
    // crashes there, as small_steps found; with it this program ended in a segmentation fault).
    const char* tmp = std::getenv("TMPDIR");
    const std::string scratch =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/qwen3_overhead_" + std::to_string(::getpid());
    if (::mkdir(scratch.c_str(), 0755) != 0) throw std::runtime_error("cannot create " + scratch);
    struct remove_at_exit {
      std::string dir;
      ~remove_at_exit() {
        for (const char* f : {"/steps.jsonl", "/trace.json", "/summary.json"}) std::remove((dir + f).c_str());
        ::rmdir(dir.c_str());
      }
    } scratch_owner{scratch};
    if (preset.empty()) preset = cuda ? "qwen3-1.7b" : "tiny";
    if (seq_len == 0) seq_len = cuda ? 512 : 64;
    const auto dtype = cuda ? torch::kBFloat16 : torch::kFloat32;
    const auto cfg = qwen3::preset(preset);
    qwen3::synthetic_tokens data(cfg.vocab_size, seq_len, seed);
    std::printf(
        "qwen3_overhead: %s, %s, seq %lld, checkpointing %s, CUDA graphs %s, %s; %d rounds x %d steps per "
        "mode (first of each block not counted)\n",
        preset.c_str(), cuda ? "bf16" : "fp32", static_cast<long long>(seq_len), checkpointing ? "on" : "off",
        cuda_graphs ? "on" : "off", cuda ? "cuda" : "cpu", rounds, block);

    for (const auto& sched : qwen3::parse_schedules(schedules)) {
      torch::manual_seed(seed);
      auto model = qwen3::make_model(
          cfg, qwen3::model_options().dtype(dtype).device(device).gradient_checkpointing(checkpointing));
      qwen3::adamw opt(qwen3::apply_lora(*model, qwen3::lora_options{}));
      std::unique_ptr<qwen3::graphed_microbatch> graphs;
      if (cuda_graphs) {
#if QWEN3_HAVE_CUDA_GRAPHS
        graphs = std::make_unique<qwen3::graphed_microbatch>(*model, opt.params(), sched.micro_batch, seq_len,
                                                             1.0 / static_cast<double>(sched.accumulation));
        graphs->capture(qwen3::microbatch(data, sched, 0, 0));
#else
        throw std::runtime_error("--cuda-graphs: this build has no CUDA graph support (needs LibTorch 2.x with CUDA)");
#endif
      }
      std::int64_t global_step = 0;
      auto run_block = [&](int steps, traceml::callback_list& callbacks) {
        qwen3::train_options t;
        t.sched = sched;
        t.steps = steps;
        t.first_step = global_step;
        t.sync_each_step = true;
        t.graphs = graphs.get();
        qwen3::train(*model, opt, data, t, callbacks);
        global_step += steps;
      };
      {
        traceml::callback_list none;
        run_block(warmup, none);
      }

      std::map<std::string, mode_result> res;
      std::vector<double> off_first_round;
      for (int r = 0; r < rounds; ++r) {
        std::map<std::string, double> round_mean;
        std::map<std::string, std::pair<double, double>> round_cpu;      // thread, process CPU us per step
        std::map<std::string, std::pair<double, double>> round_threads;  // traceml's, others' CPU us per step
        for (std::size_t mi = 0; mi < modes.size(); ++mi) {
          const mode& md = modes[(mi + static_cast<std::size_t>(r)) % modes.size()];
          auto& out = res[md.name];
          if (!out.unavailable.empty()) continue;
          step_clock clock;
          after_profiler after(clock);
          traceml::callback_list callbacks;
          std::unique_ptr<sampler_toggle> toggle;
          if (md.pm_alternate) {
            toggle = std::make_unique<sampler_toggle>();
            if (!toggle->sampler.running()) {
              out.unavailable = toggle->sampler.why();
              continue;
            }
            callbacks.add(*toggle);
          }
          callbacks.add(clock);
          std::unique_ptr<traceml::profiler> prof;
          traceml::cupti_source* cupti = nullptr;
          if (md.profiler) {
            traceml::profiler_options po;
            po.run_name = md.name;
            po.print_table = false;
            po.warmup_steps = 0;
            if (md.defaults) {  // the trainer's outputs, written to a scratch folder at finish
              po.jsonl_path = scratch + "/steps.jsonl";
              po.trace_path = scratch + "/trace.json";
              po.json_path = scratch + "/summary.json";
              po.finish_on_signal = true;
            }
            prof = std::make_unique<traceml::profiler>(po);
            if (md.defaults) {
              if (cuda) {
                auto src = trainer_default_source();
                cupti = cupti_inside(src.get());
                prof->set_gpu_source(std::move(src));
              }
            } else if (md.events) {
              traceml::cuda_events_options eo;
              eo.current_stream = traceml::libtorch::current_stream_provider();
              eo.memory = traceml::libtorch::caching_allocator_sampler();
              if (!md.memory) eo.memory = nullptr;
              auto src = cuda ? std::make_unique<traceml::cuda_events_source>(eo) : nullptr;
              if (!src || !src->ok())
                out.unavailable = src ? src->status() : "no CUDA device";
              else
                prof->set_gpu_source(with_counters(md, std::move(src), out));
            } else if (md.sample_every > 0) {
              traceml::cupti_options co = md.cupti;
              co.sample_every = md.sample_every;
              co.current_stream = traceml::libtorch::current_stream_provider();
              co.memory = traceml::libtorch::caching_allocator_sampler();
              co.overhead_budget = md.budget;
              if (!md.memory) co.memory = nullptr;
              auto src = cuda ? std::make_unique<traceml::cupti_source>(co) : nullptr;
              if (!src || !src->ok()) {
                out.unavailable = src ? src->why() : "no CUDA device";
              } else {
                cupti = src.get();
                prof->set_gpu_source(with_counters(md, std::move(src), out));
              }
            }
            if (!out.unavailable.empty()) continue;
            callbacks.add(*prof);
          }
          after.cupti = cupti;
          callbacks.add(after);
          const int block_steps = md.budget > 0 ? budget_block : block;
          const double thread0 = cpu_us(CLOCK_THREAD_CPUTIME_ID), process0 = cpu_us(CLOCK_PROCESS_CPUTIME_ID);
          const thread_cpu threads0 = read_thread_cpu();
          run_block(block_steps, callbacks);
          const thread_cpu threads1 = after.threads;
          round_cpu[md.name] = {(cpu_us(CLOCK_THREAD_CPUTIME_ID) - thread0) / block_steps,
                                (cpu_us(CLOCK_PROCESS_CPUTIME_ID) - process0) / block_steps};
          if (threads0.ok && threads1.ok) {
            round_threads[md.name] = {(threads1.traceml_us - threads0.traceml_us) / block_steps,
                                      (threads1.others_us - threads0.others_us) / block_steps};
            for (const auto& [name, us] : threads1.traceml_by_name) {
              const auto before = threads0.traceml_by_name.find(name);
              out.traceml_thread_us[name].push_back(
                  (us - (before == threads0.traceml_by_name.end() ? 0.0 : before->second)) / block_steps);
            }
          }
          if (cupti) {  // read by `after` before finish() ended the source
            if (md.budget > 0) out.spent.push_back(after.spent);
            out.switches += after.switches;
            out.switch_ns += after.switch_ns;
          }
          for (std::size_t i = 1; i < clock.hook_ns.size(); ++i)
            out.hook_us.push_back(static_cast<double>(clock.hook_ns[i]) / 1e3);
          const auto ms = clock.steps_ms();
          std::vector<double> counted(ms.begin() + 1, ms.end());
          if (toggle) {  // each sampled step against its unsampled neighbours (the first step not counted)
            auto own = [&](std::size_t i) { return static_cast<double>(clock.ends[i] - clock.begins[i]); };
            for (std::size_t i = 2; i + 1 < toggle->on.size() && i + 1 < clock.ends.size(); ++i)
              if (toggle->on[i]) out.alternate.push_back(own(i) / ((own(i - 1) + own(i + 1)) / 2));
          }
          std::fprintf(stderr, "[%s round %d] %-10s %8.3f ms/step\n", sched.name().c_str(), r + 1, md.name.c_str(),
                       mean(counted));
          out.counted.insert(out.counted.end(), counted.begin(), counted.end());
          round_mean[md.name] = mean(counted);
          if (md.name == "off" && r == 0) off_first_round = counted;
          if (prof) {
            const auto& result = prof->finish();
            out.status = result.summary.gpu_status;
            // Which steps were recorded: the reports say so (kernels_measured); every other step
            // carries only the CUDA events' GPU time.
            std::set<std::int32_t> recorded;
            for (const auto& s : result.steps) {
              ++out.steps;
              if (s.gpu && s.gpu->total.span_ns >= 0) ++out.timed_steps;
              if (s.gpu && s.gpu->total.counters.measured()) ++out.counter_steps;
              if (s.gpu && s.gpu->kernels_measured && s.gpu->total.counters.measured())
                for (const auto& p : s.gpu->phases) {
                  if (p.facts.window_ns <= 0 || !p.facts.counters.measured()) continue;
                  auto& a = out.agreement[p.name];
                  a[0] += static_cast<double>(p.facts.busy_ns);
                  a[1] += static_cast<double>(p.facts.window_ns);
                  a[2] += p.facts.counters.busy_ns;
                  a[3] += static_cast<double>(p.facts.counters.covered_ns);
                }
              if (!s.gpu || !s.gpu->kernels_measured) continue;
              ++out.recorded_steps;
              recorded.insert(s.step);
              ++out.gpu_steps;
              out.kernels += s.gpu->total.kernel_count;
              for (const auto& p : s.gpu->phases) out.attributed += p.facts.kernel_count;
              out.dropped += s.gpu->dropped_records;
            }
            if (md.sample_every > 1 || md.budget > 0)
              for (std::size_t i = 1; i < ms.size(); ++i)
                (recorded.count(static_cast<std::int32_t>(i)) ? out.sampled : out.unsampled).push_back(ms[i]);
          }
        }
        for (auto& [name, m] : round_mean)
          if (round_mean.count("off") && round_mean["off"] > 0) res[name].block_means.push_back(m / round_mean["off"]);
        if (round_cpu.count("off"))
          for (auto& [name, c] : round_cpu) {
            res[name].thread_us_added.push_back(c.first - round_cpu["off"].first);
            res[name].process_us_added.push_back(c.second - round_cpu["off"].second);
          }
        if (round_threads.count("off"))
          for (auto& [name, t] : round_threads) {
            res[name].traceml_threads_us.push_back(t.first);
            res[name].others_us_added.push_back(t.second - round_threads["off"].second);
          }
      }

      const double off_ms = mean(res["off"].counted);
      const bool accumulating = sched.accumulation > 1;
      std::printf(
          "\nschedule %s (micro-batch x accumulation): off %.3f ms/step (mean of %zu steps; first round, before "
          "any profiling: %.3f ms)\n",
          sched.name().c_str(), off_ms, res["off"].counted.size(), mean(off_first_round));
      std::printf("  the brackets around the profiler's hooks, empty (off): %.2f us per step\n",
                  mean(res["off"].hook_us));
      std::printf("  %-9s %10s  %-28s %-26s %s\n", "mode", "mean step", "ratio to off (median, rounds)",
                  "interval for the median", "budget");
      for (const auto& md : modes) {
        const auto& m = res[md.name];
        if (!m.unavailable.empty()) {
          std::printf("  %-9s unavailable: %s\n", md.name.c_str(), m.unavailable.c_str());
          continue;
        }
        if (md.name == "off") continue;
        const double ratio = median(m.block_means);
        const auto ci = median_interval(m.block_means);
        const double budget = md.defaults           ? (cuda_graphs ? 0.005 : 0.01)  // issue: always on
                              : md.sample_every > 0 ? (accumulating ? 0.03 : 0.01)
                                                    : 0.003;
        const char* verdict = ci.hi <= 1.0 + budget  ? "within"
                              : ci.lo > 1.0 + budget ? "OVER"
                                                     : "not resolved by this run";
        std::printf("  %-9s %7.3f ms  %.4f (%+6.2f%%) n=%-3zu         [%.4f, %.4f] (%2.0f%%)     +%.1f%%: %s\n",
                    md.name.c_str(), mean(m.counted), ratio, 100.0 * (ratio - 1.0), m.block_means.size(), ci.lo, ci.hi,
                    100.0 * ci.coverage, 100.0 * budget, verdict);
        std::printf(
            "  %-9s   profiler work in its hooks (step, micro-batch, phase) on the training thread: %.1f us per step "
            "(%.3f%% of off)\n",
            "", mean(m.hook_us), 100.0 * mean(m.hook_us) / 1e3 / off_ms);
        if (!m.thread_us_added.empty()) {
          const auto ti = median_interval(m.thread_us_added), pi = median_interval(m.process_us_added);
          const double t = median(m.thread_us_added), p = median(m.process_us_added);
          std::printf(
              "  %-9s   CPU time per step against off's block of the round (median [interval]): training thread "
              "%+.1f us [%+.1f, %+.1f] (%+.3f%% of off's step), whole process %+.1f us [%+.1f, %+.1f] (%.2f%% of "
              "one core)\n",
              "", t, ti.lo, ti.hi, 100.0 * t / 1e3 / off_ms, p, pi.lo, pi.hi, 100.0 * p / 1e3 / off_ms);
        }
        if ((md.sample_every > 1 || md.budget > 0) && !m.sampled.empty())
          std::printf(
              "  %-9s   %llu of %llu steps recorded: %.3f ms (%+.2f%% vs off), the others %.3f ms (%+.2f%%); %llu "
              "switches, %.3f ms each on the training thread\n",
              "", static_cast<unsigned long long>(m.recorded_steps), static_cast<unsigned long long>(m.steps),
              mean(m.sampled), 100.0 * (mean(m.sampled) / off_ms - 1.0), mean(m.unsampled),
              100.0 * (mean(m.unsampled) / off_ms - 1.0), static_cast<unsigned long long>(m.switches),
              m.switches ? static_cast<double>(m.switch_ns) / 1e6 / static_cast<double>(m.switches) : 0.0);
        if ((md.sample_every > 1 || md.budget > 0) && !m.unsampled.empty())
          // Within its own blocks: unrecorded steps run as untraced ones, so they are a baseline
          // free of block-to-block drift (which long blocks of a CPU-bound loop show).
          std::printf("  %-9s   against its own unrecorded steps: %+.2f%%\n", "",
                      100.0 * (mean(m.counted) / mean(m.unsampled) - 1.0));
        if (md.profiler && (md.events || md.sample_every > 0 || md.defaults))
          std::printf("  %-9s   GPU time of the step measured on %llu of %llu steps\n", "",
                      static_cast<unsigned long long>(m.timed_steps), static_cast<unsigned long long>(m.steps));
        if (md.defaults)
          std::printf("  %-9s   hardware counters on %llu of %llu steps\n", "",
                      static_cast<unsigned long long>(m.counter_steps), static_cast<unsigned long long>(m.steps));
        if (md.sample_every > 0 || md.defaults)
          std::printf("  %-9s   %.0f kernels per recorded step, %.4f%% attributed to a phase, %llu records dropped\n",
                      "", m.gpu_steps ? static_cast<double>(m.kernels) / static_cast<double>(m.gpu_steps) : 0.0,
                      m.kernels ? 100.0 * static_cast<double>(m.attributed) / static_cast<double>(m.kernels) : 0.0,
                      static_cast<unsigned long long>(m.dropped));
        if (md.pm_alternate && !m.alternate.empty()) {
          const auto ai = median_interval(m.alternate);
          const double r = median(m.alternate);
          std::printf(
              "  %-9s   sampler on every other step, against its two neighbours: %.4f (%+.2f%%) [%.4f, %.4f] "
              "(%2.0f%%), n=%zu sampled steps; status: %s\n",
              "", r, 100.0 * (r - 1.0), ai.lo, ai.hi, 100.0 * ai.coverage, m.alternate.size(),
              traceml::process_pm_sampler().status().c_str());
          // With the source's own work per step (placing the samples), from +pm's hooks against the base's.
          const auto pm_it = res.find(md.name.substr(0, md.name.rfind("+pmalt")) + "+pm");
          const auto base_it = res.find(md.name.substr(0, md.name.rfind("+pmalt")));
          if (pm_it != res.end() && base_it != res.end() && !pm_it->second.hook_us.empty() &&
              !base_it->second.hook_us.empty()) {
            const double hook = (mean(pm_it->second.hook_us) - mean(base_it->second.hook_us)) / 1e3 / off_ms;
            std::printf(
                "  %-9s   + the source's step work (%s hooks against %s): %+.3f%%; counters in all: %+.2f%% [%+.2f, "
                "%+.2f], +0.3%%: %s\n",
                "", pm_it->first.c_str(), base_it->first.c_str(), 100.0 * hook, 100.0 * (r - 1.0 + hook),
                100.0 * (ai.lo - 1.0 + hook), 100.0 * (ai.hi - 1.0 + hook),
                ai.hi - 1.0 + hook <= 0.003  ? "within"
                : ai.lo - 1.0 + hook > 0.003 ? "OVER"
                                             : "not resolved by this run");
          }
        }
        if (md.pm) {
          // The samples' own counts (rate, overflows, the decoder's CPU) are in the status line below:
          // the source, and with it the sampler's view, ends with the block's profiler.
          std::printf("  %-9s   hardware counters on %llu of %llu steps\n", "",
                      static_cast<unsigned long long>(m.counter_steps), static_cast<unsigned long long>(m.steps));
          // On top of the same mode without counters, round by round (both against the round's off).
          const std::string base = md.name.substr(0, md.name.rfind("+pm"));
          const auto& b = res[base];
          if (md.name.size() > 3 && md.name.compare(md.name.size() - 3, 3, "+pm") == 0 && b.unavailable.empty() &&
              b.block_means.size() == m.block_means.size() && !m.block_means.empty()) {
            std::vector<double> on_top;
            for (std::size_t i = 0; i < m.block_means.size(); ++i)
              on_top.push_back(m.block_means[i] / b.block_means[i]);
            const double r = median(on_top);
            const auto bi = median_interval(on_top);
            const double pm_budget = 0.003;
            std::printf("  %-9s   counters on top of %s: %.4f (%+.2f%%) [%.4f, %.4f] (%2.0f%%), +%.1f%%: %s\n", "",
                        base.c_str(), r, 100.0 * (r - 1.0), bi.lo, bi.hi, 100.0 * bi.coverage, 100.0 * pm_budget,
                        bi.hi <= 1.0 + pm_budget  ? "within"
                        : bi.lo > 1.0 + pm_budget ? "OVER"
                                                  : "not resolved by this run");
          }
          for (const auto& [phase, a] : m.agreement)
            std::printf("  %-9s   %-12s busy from kernel records %6.2f%%, from counters %6.2f%% (%+.2f points)\n", "",
                        phase.c_str(), 100.0 * a[0] / a[1], 100.0 * a[2] / a[3], 100.0 * (a[2] / a[3] - a[0] / a[1]));
        }
        if (md.profiler) print_parts(m, res["off"], off_ms);
        if (!m.status.empty()) std::printf("  %-9s   status: %s\n", "", m.status.c_str());
      }
      std::fflush(stdout);
#if QWEN3_HAVE_CUDA_GRAPHS
      graphs.reset();
#endif
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qwen3_overhead: %s\n", e.what());
    return 1;
  }
  return 0;
}
