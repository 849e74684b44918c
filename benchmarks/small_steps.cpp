// small_steps: what traceml costs a training loop of short steps (~2 ms on an H200), and which part
// costs what. The loop is LibTorch's MNIST example, written here as a user would: a small CNN (conv
// 1->10 k5, max-pool, relu, conv 10->20 k5, dropout, max-pool, relu, fc 320->50, relu, dropout, fc
// 50->10, log-softmax), SGD with momentum, batch 64, MNIST-shaped synthetic inputs (1x28x28, seeded)
// from a torch::data Dataset mapped with Stack<> and loaded by make_data_loader (SequentialSampler,
// no worker threads). The loop is marked with the phase macros (TRACEML_STEP, and TRACEML_PHASE
// around fetching the next batch through the loader's iterator, forward, backward and the optimizer).
//
// Modes, each a chain on the one before it, so that the step from one mode to the next is one part:
//   plain            no profiler, recording off (traceml::set_enabled(false)): the macros cost one
//                    relaxed load each
//   scopes           no profiler, recording on: the scopes write their rings (NVTX ranges where the
//                    headers are), nothing drains them
//   core             a profiler, no output, no GPU source (the step end: drain, statistics)
//   jsonl            core + the per-step JSONL (a line written and flushed at every step's end)
//   events           jsonl + CUDA-event phase timing (make_best_gpu_source, CUPTI and counters off)
//   memory           events + the caching allocator's peak memory per step (torch adapter)
//   cupti-nomarkers  memory + CUPTI kernel records at the default budget, boundary markers off
//   cupti            + boundary markers: CUPTI as make_best_gpu_source makes it, without counters
//                    (markers exist only inside the CUPTI source, on the steps it records: their cost
//                    is this mode over the one before)
//   counters         + hardware counters (CUPTI PM sampling, decoded within its budget)
//   defaults         what TRACEML_OUT gives (session.hpp's start_session): the summary JSON, the JSONL,
//                    the Chrome trace and the HTML report, finish on SIGINT/SIGTERM, and
//                    make_best_gpu_source with the torch adapter's stream and memory sampler (the
//                    table, which the session prints at exit, is not printed per block here)
// The GPU modes need a CUDA device and a build with traceml::cupti; without them they are skipped
// with a note, and plain, scopes, core, jsonl and defaults (all four outputs, no GPU source) still
// run, on the CPU.
//
// Measurement, as qwen3_overhead's: one process, one block per mode per round, the order of the
// modes rotated every round. Each block gets a fresh profiler with its options and GPU source (its
// start-up: constructing the source and the profiler, set_gpu_source), then runs --warmup untimed
// steps and --steps timed ones, timed with a steady clock around the loop, the device synchronized
// at the block's edges only (the GPU work of the timed steps is inside), then finish() and the
// profiler's destruction (its finish time). Per mode: the median over rounds of the block's mean
// step; the ratio to plain of the same round's block, its median over rounds with a
// distribution-free interval (median_interval.hpp); the time added per step; the time added over the
// previous mode of the chain (median of paired differences, with its interval); the training
// thread's CPU time per step (CLOCK_THREAD_CPUTIME_ID) and the process's (CLOCK_PROCESS_CPUTIME_ID,
// which adds LibTorch's own threads and the profiler's background threads: the attribution worker,
// CUPTI's buffer thread and flusher, the counters' decoder).
//
//   small_steps [--rounds 30] [--max-seconds S] [--steps 100] [--warmup 30] [--modes plain,core,...] [--batch 64]
//               [--out DIR] [--dataset-size 60000] [--device cuda|cpu] [--threads N] [--seed 1]
//               [--counter-interval-us N] [--counter-decode-ms N] [--counter-max-samples N]
//
// Many short blocks rather than a few long ones: on the H200 machine, blocks of one mode differ by
// up to 10% from one second to the next (plain against scopes, which cost the same: 10 rounds of 300
// steps gave an interval of [1.000, 1.094] for their ratio, 30 rounds of 100 steps [0.978, 1.026]).
//
// Measured on the H200 machine (benchmarks/gpu_all.sh, 30 rounds x 100 steps, LibTorch 2.11, CUDA
// 13.0; two runs, on two machines, whose plain steps took 1.91 and 2.73 ms): the defaults +16.4%
// [+12.0, +22.5] and +14.2% [+9.2, +15.8], +312 and +389 us per step, far over the 1% budget. Nearly
// all of it is the training thread's CPU time (+263 and +284 us per step; the loop's blocking
// host-to-device copies wait for the GPU, so the CPU and GPU work of a step do not overlap and CPU
// time added to a step adds to its wall time), by part (thread CPU over the previous part, run 1 /
// run 2): the core profiler's step end +24 / +28 us over plain, the
// per-step JSONL +46 / +54, CUDA-event timing and the memory sampler +96 / +66, CUPTI at its default
// budget with markers +67 / +51, hardware counters +52 / +111 (and 1.1 / 1.9 ms of process CPU per
// step: the decoder, 55-67% of a core); the scopes alone cost nothing measurable. Start-up (at most
// 65 ms, and 0.6 s for the process's first counter session) and finish (at most 0.2 s) within budget.
//
// Goals (issue: the cost of the defaults at short steps): the defaults cost at most 1% of the loop's
// step time at ~2 ms steps on an H200; start-up at most 0.3 s without hardware counters and 1 s with
// them; finish at most 0.5 s. A verdict says "within" or "OVER" only when the whole interval is on
// one side of the budget.
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <traceml/phase.hpp>
#include <traceml/profiler.hpp>
#include <traceml/torch_adapter.hpp>
#ifndef SMALL_STEPS_WITH_CUPTI  // 1 where the build links traceml::cupti (benchmarks/CMakeLists.txt)
#define SMALL_STEPS_WITH_CUPTI 0
#endif
#if SMALL_STEPS_WITH_CUPTI
#include <traceml/gpu/source_factory.hpp>
#endif

#include "median_interval.hpp"

namespace {

// ---- the training loop, as a user writes it -----------------------------------------------------

/// MNIST-shaped examples (1x28x28 images, labels 0-9), random and seeded, made once up front.
class synthetic_mnist : public torch::data::datasets::Dataset<synthetic_mnist> {
 public:
  synthetic_mnist(std::int64_t size, std::uint64_t seed) {
    torch::manual_seed(seed);
    images_ = torch::randn({size, 1, 28, 28});
    labels_ = torch::randint(0, 10, {size}, torch::kLong);
  }
  torch::data::Example<> get(size_t index) override {
    const auto i = static_cast<std::int64_t>(index);
    return {images_[i], labels_[i]};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(images_.size(0)); }

 private:
  torch::Tensor images_, labels_;
};

/// LibTorch's MNIST example network.
struct net : torch::nn::Module {
  net()
      : conv1(torch::nn::Conv2dOptions(1, 10, /*kernel_size=*/5)),
        conv2(torch::nn::Conv2dOptions(10, 20, /*kernel_size=*/5)),
        fc1(320, 50),
        fc2(50, 10) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = x.view({-1, 320});
    x = torch::relu(fc1->forward(x));
    x = torch::dropout(x, /*p=*/0.5, /*train=*/is_training());
    x = fc2->forward(x);
    return torch::log_softmax(x, /*dim=*/1);
  }
  torch::nn::Conv2d conv1, conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1, fc2;
};

/// The model, its optimizer and the data loader, kept across blocks (training goes on).
class trainer {
 public:
  trainer(torch::Device device, std::int64_t batch, std::int64_t dataset_size, std::uint64_t seed)
      : device_(device),
        loader_(torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
            synthetic_mnist(dataset_size, seed).map(torch::data::transforms::Stack<>()),
            torch::data::DataLoaderOptions().batch_size(static_cast<size_t>(batch)).workers(0).drop_last(true))),
        model_(make_net(device)),
        optimizer_(model_->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5)),
        it_(loader_->begin()),
        end_(loader_->end()) {
    model_->train();
  }

  /// `n` optimizer steps, each marked as the README shows.
  void steps(int n) {
    for (int s = 0; s < n; ++s) {
      TRACEML_STEP();
      torch::Tensor data, target, loss;
      {
        TRACEML_PHASE(dataloader);
        auto& batch = next_batch();
        data = batch.data.to(device_);
        target = batch.target.to(device_);
      }
      {
        TRACEML_PHASE(forward);
        loss = torch::nll_loss(model_->forward(data), target);
      }
      {
        TRACEML_PHASE(backward);
        loss.backward();
      }
      {
        TRACEML_PHASE(optimizer);
        optimizer_.step();
        optimizer_.zero_grad();
      }
    }
  }

 private:
  /// The loader's next batch (the iterator fetches it: collating 64 examples with Stack<>); at the end
  /// of an epoch, a new one.
  torch::data::Example<>& next_batch() {
    if (started_) ++it_;
    started_ = true;
    if (it_ == end_) it_ = loader_->begin();
    return *it_;
  }

  using mapped = torch::data::datasets::MapDataset<synthetic_mnist, torch::data::transforms::Stack<>>;
  using loader_type = torch::data::StatelessDataLoader<mapped, torch::data::samplers::SequentialSampler>;

  static std::shared_ptr<net> make_net(torch::Device device) {
    auto m = std::make_shared<net>();
    m->to(device);
    return m;
  }

  torch::Device device_;
  std::unique_ptr<loader_type> loader_;
  std::shared_ptr<net> model_;
  torch::optim::SGD optimizer_;
  torch::data::Iterator<torch::data::Example<>> it_, end_;
  bool started_ = false;
};

// ---- modes --------------------------------------------------------------------------------------

enum class gpu_part { none, events, cupti, best };

struct mode {
  std::string name, what;
  bool record = true;     // scopes record (false: set_enabled(false))
  bool profiler = false;  // a profiler attached
  bool jsonl = false;     // per-step JSONL
  bool defaults = false;  // every TRACEML_OUT output and GPU source
  gpu_part gpu = gpu_part::none;
  bool memory = false, markers = false, counters = false;
};

std::vector<mode> all_modes() {
  std::vector<mode> m;
  m.push_back({"plain", "no profiler, recording off (set_enabled(false))", false});
  m.push_back({"scopes", "no profiler, recording on (the rings are written, nothing drains them)", true});
  m.push_back({"core", "profiler, no output, no GPU source", true, true});
  m.push_back({"jsonl", "core + per-step JSONL", true, true, true});
  m.push_back({"events", "jsonl + CUDA-event phase timing", true, true, true, false, gpu_part::events});
  m.push_back({"memory", "events + allocator memory per step", true, true, true, false, gpu_part::events, true});
  m.push_back({"cupti-nomarkers", "memory + CUPTI at the default budget, no boundary markers", true, true, true, false,
               gpu_part::cupti, true, false});
  m.push_back({"cupti", "+ boundary markers (CUPTI as make_best_gpu_source makes it)", true, true, true, false,
               gpu_part::cupti, true, true});
  m.push_back(
      {"counters", "+ hardware counters (PM sampling)", true, true, true, false, gpu_part::cupti, true, true, true});
  m.push_back({"defaults", "what TRACEML_OUT gives: all four outputs, make_best_gpu_source, torch stream+memory", true,
               true, true, true, gpu_part::best, true, true, true});
  return m;
}

/// A mode's profiler for one block (nullptr for plain and scopes), or why the mode cannot run here.
struct block_setup {
  std::unique_ptr<traceml::profiler> prof;
  std::string unavailable;
};

/// Hardware-counter settings of the counters and defaults modes (0: the library's default).
struct counter_settings {
  std::int64_t interval_us = 0;
  int decode_ms = 0;
  std::int64_t max_samples = 0;
};

block_setup make_block(const mode& m, const std::string& base, bool cuda, const counter_settings& cs) {
  block_setup b;
  if (!m.profiler) return b;
  std::unique_ptr<traceml::gpu_source> src;
  if (m.gpu != gpu_part::none && (cuda || m.defaults)) {
#if SMALL_STEPS_WITH_CUPTI
    traceml::gpu_source_options g;  // the defaults, as start_session makes them
    g.current_stream = traceml::libtorch::current_stream_provider();
    g.memory = traceml::libtorch::caching_allocator_sampler();
    if (cs.interval_us > 0) g.counters.interval_ns = cs.interval_us * 1000;
    if (cs.decode_ms > 0) g.counters.decode_period_ms = cs.decode_ms;
    if (cs.max_samples > 0) g.counters.max_samples = static_cast<std::uint32_t>(cs.max_samples);
    if (!m.defaults) {
      if (!m.memory) g.memory = nullptr;
      g.cupti = m.gpu == gpu_part::cupti;
      g.cupti_opts.markers = m.markers;
      g.hardware_counters = m.counters;
    }
    src = traceml::make_best_gpu_source(g);
    if (!m.defaults) {
      const std::string want =
          std::string(m.gpu == gpu_part::events ? "cuda-events" : "cupti") + (m.counters ? "+pm" : "");
      if (!src) {
        b.unavailable = "no GPU source could be made (said above)";
      } else if (want != src->name()) {
        b.unavailable =
            std::string("make_best_gpu_source made '") + src->name() + "', not '" + want + "': " + src->status();
      } else if (auto* pm = dynamic_cast<traceml::pm_sampling_source*>(src.get()); pm && !pm->sampling()) {
        b.unavailable = "hardware counters unavailable: " + pm->why();
      }
      if (!b.unavailable.empty()) return b;
    }
#else
    (void)cs;
    if (!m.defaults) {
      b.unavailable = "this build has no traceml::cupti (CUDA toolkit with CUPTI not found when configuring)";
      return b;
    }
#endif
  }
  traceml::profiler_options po = traceml::profiler_options::named(m.defaults ? "small_steps" : m.name);
  po.print_table = false;
  if (m.defaults) {
    po.write_all_as(base);
    po.config.emplace_back("started_by", "TRACEML_OUT");
    po.finish_on_signal = true;  // as the session does where the program has no handler of its own
  } else if (m.jsonl) {
    po.jsonl_path = base + "_steps.jsonl";
  }
  b.prof = std::make_unique<traceml::profiler>(po);
  if (src) b.prof->set_gpu_source(std::move(src));
  return b;
}

// ---- figures ------------------------------------------------------------------------------------

double cpu_seconds(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double max_of(const std::vector<double>& v) {
  double m = std::nan("");
  for (double x : v)
    if (!std::isnan(x) && (std::isnan(m) || x > m)) m = x;
  return m;
}

/// What one mode measured, per round (NaN where its block did not run).
struct mode_result {
  std::vector<double> step_ms, thread_cpu_us, process_cpu_us, startup_ms, finish_ms;
  std::string unavailable, status;
  std::vector<std::string> failed_outputs;
  std::uint64_t timed_steps = 0, recorded_steps = 0, counter_steps = 0, gpu_timed_steps = 0;
  explicit mode_result(int rounds)
      : step_ms(rounds, std::nan("")),
        thread_cpu_us(rounds, std::nan("")),
        process_cpu_us(rounds, std::nan("")),
        startup_ms(rounds, std::nan("")),
        finish_ms(rounds, std::nan("")) {}
};

/// Paired per-round figures of `a` against `b` (both ran in the round): f(a, b).
template <class F>
std::vector<double> paired(const std::vector<double>& a, const std::vector<double>& b, F f) {
  std::vector<double> out;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (!std::isnan(a[i]) && !std::isnan(b[i])) out.push_back(f(a[i], b[i]));
  return out;
}

const char* verdict(double lo, double hi, double budget) {
  return hi <= budget ? "within" : lo > budget ? "OVER" : "not resolved by this run";
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 30, steps = 100, warmup = 30, threads = 0;
  double max_seconds = 0;
  std::int64_t batch = 64, dataset_size = 60000;
  counter_settings counters;
  std::uint64_t seed = 1;
  std::string out_dir, device_name;
  std::vector<std::string> mode_names;
  for (const auto& m : all_modes()) mode_names.push_back(m.name);

  CLI::App app{
      "traceml's cost on a training loop of short steps (LibTorch's MNIST CNN), part by part: blocks of "
      "steps per mode, interleaved and rotated, paired ratios to the loop without a profiler."};
  app.add_option("--rounds", rounds, "rounds; each runs one block per mode")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-seconds", max_seconds,
                 "start no round after this many seconds (0: no limit); the figures "
                 "rest on the rounds that ran")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--steps", steps, "timed steps per block")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps per block, after its profiler started")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--modes", mode_names,
                 "comma-separated, from: plain, scopes, core, jsonl, events, memory, "
                 "cupti-nomarkers, cupti, counters, defaults (plain is always measured)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--batch", batch, "examples per step (fewer make CPU steps short)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--dataset-size", dataset_size, "examples in the synthetic dataset (one epoch)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--out", out_dir,
                 "folder for the defaults' outputs, kept (default: a scratch folder, removed at "
                 "the end, as every other mode's JSONL)");
  app.add_option("--device", device_name, "cuda | cpu (default: cuda when available)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_option("--threads", threads, "LibTorch intra-op threads (0: LibTorch's default)")->capture_default_str();
  app.add_option("--counter-interval-us", counters.interval_us,
                 "hardware counters' sampling interval for the counters and defaults modes (0: the default, "
                 "pm_sampler_options::interval_ns)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--counter-decode-ms", counters.decode_ms,
                 "how often the counters' worker decodes (0: the default, pm_sampler_options::decode_period_ms)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--counter-max-samples", counters.max_samples,
                 "samples one decode pass holds (0: the default, pm_sampler_options::max_samples)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", seed, "seed for the data and the weights")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    // The modes asked for, in the chain's order; plain always.
    std::vector<mode> modes;
    for (const auto& m : all_modes())
      if (m.name == "plain" || std::find(mode_names.begin(), mode_names.end(), m.name) != mode_names.end())
        modes.push_back(m);
    for (const auto& n : mode_names) {
      const auto all = all_modes();
      if (std::none_of(all.begin(), all.end(), [&](const mode& m) { return m.name == n; }))
        throw std::invalid_argument("unknown mode '" + n + "' (see --help)");
    }
    if (batch > dataset_size) throw std::invalid_argument("--batch is larger than --dataset-size");

    const bool cuda = device_name.empty() ? torch::cuda::is_available() : device_name == "cuda";
    if (cuda && !torch::cuda::is_available())
      throw std::runtime_error("--device cuda: this LibTorch sees no CUDA device");
    if (threads > 0) torch::set_num_threads(threads);
    const torch::Device device = cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);

    // The defaults' outputs go to --out (kept); every other file, and those without --out, to a
    // scratch folder whose files are removed one by one at the end (not with
    // std::filesystem::remove_all: the LibTorch 2.11 wheel exports a copy of it that crashed there).
    namespace fs = std::filesystem;
    struct scratch_folder {
      std::string path;
      std::vector<std::string> files;
      ~scratch_folder() {
        for (const auto& f : files) std::remove(f.c_str());
        ::rmdir(path.c_str());
      }
    } scratch_dir;
    const char* tmp = std::getenv("TMPDIR");
    scratch_dir.path = std::string(tmp && *tmp ? tmp : "/tmp") + "/traceml_small_steps_" + std::to_string(::getpid());
    const std::string& scratch = scratch_dir.path;
    if (::mkdir(scratch.c_str(), 0755) != 0) throw std::runtime_error("cannot create " + scratch);
    if (!out_dir.empty()) fs::create_directories(out_dir);

    std::printf(
        "small_steps: LibTorch's MNIST CNN, batch %lld, %s (%d intra-op threads), synthetic 1x28x28 data through "
        "torch::data (%lld examples, SequentialSampler, 0 workers, Stack<>)\n"
        "  %d rounds x %zu modes, a block = %d warm-up + %d timed steps, the order rotated every round%s\n",
        static_cast<long long>(batch), cuda ? "cuda" : "cpu", torch::get_num_threads(),
        static_cast<long long>(dataset_size), rounds, modes.size(), warmup, steps,
        SMALL_STEPS_WITH_CUPTI ? "" : "; built without traceml::cupti: no GPU source");
    std::map<std::string, mode_result> res;
    for (const auto& m : modes) {
      res.emplace(m.name, mode_result(rounds));
      if (m.gpu != gpu_part::none && !m.defaults && !cuda)
        res.at(m.name).unavailable = "skipped: no CUDA device (the GPU parts need one)";
    }
    if (!cuda &&
        std::any_of(modes.begin(), modes.end(), [](const mode& m) { return m.gpu != gpu_part::none && !m.defaults; }))
      std::printf("  no CUDA device: the GPU modes are skipped; defaults runs with every output and no GPU source\n");
    std::fflush(stdout);

    trainer train(device, batch, dataset_size, seed);
    traceml::set_enabled(false);
    train.steps(std::max(3 * warmup, 10));  // cuDNN, the allocator, the first epoch's pages: before any block
    traceml::libtorch::synchronize();
    traceml::set_enabled(true);

    const std::size_t n = modes.size();
    const auto began = std::chrono::steady_clock::now();
    for (int r = 0; r < rounds; ++r) {
      if (max_seconds > 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count() > max_seconds) {
        std::printf("  --max-seconds %g: %d of %d rounds ran\n", max_seconds, r, rounds);
        rounds = r;
        for (auto& kv : res)
          for (auto* v : {&kv.second.step_ms, &kv.second.thread_cpu_us, &kv.second.process_cpu_us,
                          &kv.second.startup_ms, &kv.second.finish_ms})
            v->resize(static_cast<std::size_t>(r));
        break;
      }
      std::string progress = "[round " + std::to_string(r + 1) + "/" + std::to_string(rounds) + "]";
      for (std::size_t i = 0; i < n; ++i) {
        const mode& m = modes[(i + static_cast<std::size_t>(r)) % n];
        auto& out = res.at(m.name);
        if (!out.unavailable.empty()) continue;
        traceml::set_enabled(m.record);
        if (m.record && !m.profiler) traceml::detail::drain_all([](const traceml::span_record&) {});  // empty rings
        const std::string base = (m.defaults && !out_dir.empty() ? out_dir : scratch) + "/" +
                                 (m.defaults ? std::string("small_steps") : m.name) + "_r" + std::to_string(r + 1);
        if (m.profiler && (!m.defaults || out_dir.empty()))
          for (const char* suffix : {"_steps.jsonl", "_summary.json", "_trace.json", "_report.html"})
            scratch_dir.files.push_back(base + suffix);
        const auto s0 = std::chrono::steady_clock::now();
        block_setup b = make_block(m, base, cuda, counters);
        const auto s1 = std::chrono::steady_clock::now();
        if (!b.unavailable.empty()) {
          out.unavailable = b.unavailable;
          traceml::set_enabled(true);
          continue;
        }
        train.steps(warmup);
        traceml::libtorch::synchronize();
        const double thread0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID), process0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
        const auto t0 = std::chrono::steady_clock::now();
        train.steps(steps);
        traceml::libtorch::synchronize();
        const auto t1 = std::chrono::steady_clock::now();
        const double thread1 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID), process1 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
        if (b.prof) {
          const auto& result = b.prof->finish();
          if (out.status.empty()) out.status = result.summary.gpu_status;
          for (const auto& st : result.steps) {
            if (st.step < warmup) continue;
            ++out.timed_steps;
            if (st.gpu && st.gpu->total.span_ns >= 0) ++out.gpu_timed_steps;
            if (st.gpu && st.gpu->kernels_measured) ++out.recorded_steps;
            if (st.gpu && st.gpu->total.counters.measured()) ++out.counter_steps;
          }
          for (const auto& f : b.prof->failed_outputs()) out.failed_outputs.push_back(f);
          b.prof.reset();
        }
        const auto f1 = std::chrono::steady_clock::now();
        traceml::set_enabled(true);
        const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count() / steps;
        out.step_ms[r] = ms;
        out.thread_cpu_us[r] = (thread1 - thread0) * 1e6 / steps;
        out.process_cpu_us[r] = (process1 - process0) * 1e6 / steps;
        if (m.profiler) {
          out.startup_ms[r] = std::chrono::duration<double, std::milli>(s1 - s0).count();
          out.finish_ms[r] = std::chrono::duration<double, std::milli>(f1 - t1).count();
        }
        char block[96];
        std::snprintf(block, sizeof block, " %s %.3f", m.name.c_str(), ms);
        progress += block;
      }
      std::fprintf(stderr, "%s ms/step\n", progress.c_str());
    }

    // ---- the table -------------------------------------------------------------------------------
    const auto& plain = res.at("plain");
    const double plain_ms = median(plain.step_ms);
    std::printf(
        "\nStep time per mode (median over rounds of each block's mean step; ratio = block / plain block of the "
        "same round, median over rounds and its interval; +us = (ratio - 1) x plain's step)\n");
    std::printf("  %-16s %9s  %-34s %-26s %s\n", "mode", "step ms", "ratio to plain [interval] (cover)",
                "+us per step [interval]", "+us over the previous mode [interval]");
    const mode* previous = nullptr;
    for (const auto& m : modes) {
      const auto& mr = res.at(m.name);
      if (!mr.unavailable.empty()) {
        std::printf("  %-16s unavailable: %s\n", m.name.c_str(), mr.unavailable.c_str());
        continue;
      }
      if (m.name == "plain") {
        std::printf("  %-16s %9.4f\n", m.name.c_str(), plain_ms);
        previous = &m;
        continue;
      }
      const auto ratios = paired(mr.step_ms, plain.step_ms, [](double a, double b) { return a / b; });
      const double ratio = median(ratios);
      const auto ci = traceml_bench::median_interval(ratios);
      char prev_text[160] = "";
      if (previous && previous->name != "plain") {
        const auto diffs =
            paired(mr.step_ms, res.at(previous->name).step_ms, [](double a, double b) { return (a - b) * 1e3; });
        const auto di = traceml_bench::median_interval(diffs);
        std::snprintf(prev_text, sizeof prev_text, "%+8.1f [%+.1f, %+.1f] over %s", median(diffs), di.lo, di.hi,
                      previous->name.c_str());
      }
      char added[64];
      std::snprintf(added, sizeof added, "%+8.1f [%+.1f, %+.1f]", (ratio - 1) * plain_ms * 1e3,
                    (ci.lo - 1) * plain_ms * 1e3, (ci.hi - 1) * plain_ms * 1e3);
      std::printf("  %-16s %9.4f  %.4f [%.4f, %.4f] (%2.0f%%)   %-26s %s\n", m.name.c_str(), median(mr.step_ms), ratio,
                  ci.lo, ci.hi, 100.0 * ci.coverage, added, prev_text);
      previous = &m;
    }

    std::printf(
        "\nCPU time per timed step: the median over rounds, and the added time against plain's block of the same "
        "round (median of the paired differences [interval]); each block's start-up and finish\n");
    std::printf("  %-16s %-33s %-33s %-18s %s\n", "mode", "training thread us (+ vs plain)", "process us (+ vs plain)",
                "start-up ms (max)", "finish ms (max)");
    auto added_cpu = [](const std::vector<double>& mode_us, const std::vector<double>& plain_us) {
      char text[64];
      if (&mode_us == &plain_us) {
        std::snprintf(text, sizeof text, "%7.1f", median(mode_us));
        return std::string(text);
      }
      const auto d = paired(mode_us, plain_us, [](double a, double b) { return a - b; });
      const auto ci = traceml_bench::median_interval(d);
      std::snprintf(text, sizeof text, "%7.1f (%+.1f [%+.1f, %+.1f])", median(mode_us), median(d), ci.lo, ci.hi);
      return std::string(text);
    };
    for (const auto& m : modes) {
      const auto& mr = res.at(m.name);
      if (!mr.unavailable.empty()) continue;
      char startup[64] = "", finish[64] = "";
      if (m.profiler) {
        std::snprintf(startup, sizeof startup, "%6.1f (%.1f)", median(mr.startup_ms), max_of(mr.startup_ms));
        std::snprintf(finish, sizeof finish, "%6.1f (%.1f)", median(mr.finish_ms), max_of(mr.finish_ms));
      }
      std::printf("  %-16s %-33s %-33s %-18s %s\n", m.name.c_str(),
                  added_cpu(mr.thread_cpu_us, plain.thread_cpu_us).c_str(),
                  added_cpu(mr.process_cpu_us, plain.process_cpu_us).c_str(), startup, finish);
    }

    std::printf("\nModes\n");
    for (const auto& m : modes) {
      const auto& mr = res.at(m.name);
      std::printf("  %-16s %s\n", m.name.c_str(), m.what.c_str());
      if (m.gpu != gpu_part::none && !mr.status.empty())
        std::printf("  %-16s   GPU source: %s\n", "", mr.status.c_str());
      if (cuda && m.gpu != gpu_part::none && mr.unavailable.empty() && mr.timed_steps)
        std::printf(
            "  %-16s   timed steps: %llu, GPU-timed %llu, with kernel records %llu, with hardware counters %llu\n", "",
            static_cast<unsigned long long>(mr.timed_steps), static_cast<unsigned long long>(mr.gpu_timed_steps),
            static_cast<unsigned long long>(mr.recorded_steps), static_cast<unsigned long long>(mr.counter_steps));
      if (!mr.failed_outputs.empty())
        std::printf("  %-16s   %zu outputs failed, the first: %s\n", "", mr.failed_outputs.size(),
                    mr.failed_outputs[0].c_str());
    }

    // ---- budgets ---------------------------------------------------------------------------------
    std::printf("\nBudgets\n");
    for (const auto& m : modes) {
      const auto& mr = res.at(m.name);
      if (!m.profiler || !mr.unavailable.empty()) continue;
      const bool with_counters = m.counters && mr.counter_steps > 0;
      const double start_budget = with_counters ? 1000 : 300;
      const double su = median(mr.startup_ms), su_max = max_of(mr.startup_ms), fi = median(mr.finish_ms),
                   fi_max = max_of(mr.finish_ms);
      std::printf("  %-16s start-up %.1f ms (max %.1f) <= %.0f ms%s: %s; finish %.1f ms (max %.1f) <= 500 ms: %s\n",
                  m.name.c_str(), su, su_max, start_budget, with_counters ? " (counters)" : "",
                  su_max <= start_budget ? "within"
                  : su <= start_budget   ? "within at the median, not in every block"
                                         : "OVER",
                  fi, fi_max,
                  fi_max <= 500 ? "within"
                  : fi <= 500   ? "within at the median, not in every block"
                                : "OVER");
    }
    if (res.count("defaults") && res.at("defaults").unavailable.empty()) {
      const auto& d = res.at("defaults");
      const auto ratios = paired(d.step_ms, plain.step_ms, [](double a, double b) { return a / b; });
      const double ratio = median(ratios);
      const auto ci = traceml_bench::median_interval(ratios);
      // Fewer than 6 rounds cannot give a 95% interval (5 give the range, 94%): the verdict says so.
      std::printf("  %-16s step time %+.2f%% [%+.2f, %+.2f] (%.0f%%) <= +1%%: %s%s (%s, plain step %.3f ms)\n",
                  "defaults", 100 * (ratio - 1), 100 * (ci.lo - 1), 100 * (ci.hi - 1), 100 * ci.coverage,
                  verdict(ci.lo, ci.hi, 1.01), ci.coverage < 0.95 ? " (an interval of under 95%: more rounds)" : "",
                  cuda ? "cuda" : "cpu", plain_ms);
      std::printf("\ndefaults: %+.2f%% (interval %+.2f..%+.2f%%) per step %+.1f us\n", 100 * (ratio - 1),
                  100 * (ci.lo - 1), 100 * (ci.hi - 1), (ratio - 1) * plain_ms * 1e3);
    }
    std::fflush(stdout);
    if (!out_dir.empty()) std::printf("the defaults' outputs, one set per round: %s/small_steps_r*\n", out_dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "small_steps: %s\n", e.what());
    return 1;
  }
  return 0;
}
