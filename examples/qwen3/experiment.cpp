// qwen3_accumulation: the gradient-accumulation experiment. For one effective batch, runs each
// schedule MxA (micro-batch M, accumulation A) for the same optimizer steps on the same examples,
// profiles every step with traceml, and prints where the time difference comes from.
//
//   qwen3_accumulation                         # defaults: GPU -> qwen3-1.7b, 100 steps, bf16, seq 512,
//                                              #           CPU -> tiny, 40 steps, fp32, seq 128
//   qwen3_accumulation --schedules 1x4,2x2,4x1 --steps 100 --repeats 3 --out results/
//   qwen3_accumulation --model-dir /path/to/Qwen3-1.7B --data tokens.u32
//   qwen3_accumulation --sweep 8                # which MxA of 8 fits and is fastest (schedule_sweep.hpp)
//   qwen3_accumulation --preset llama-3.2-1b           # the Llama family (llama.hpp); a Llama --model-dir too
//
// Each schedule starts from the same weights (same seed, or the same snapshot) and the same adapter
// initialisation, so only the schedule differs.
//
// Exit status: 0 when it did what was asked (a schedule out of GPU memory is a result, shown in the
// table); 1 when it could not (an input refused, a schedule failed for another reason, an output
// not written: each said on stderr); 2 when the command line is refused; after SIGINT or SIGTERM,
// the signal's (130, 143), once the outputs of every finished step are written.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <traceml/distributed.hpp>
#include <traceml/gpu/pm_decode_budget.hpp>
#include <traceml/gpu/recording_budget.hpp>
#include <traceml/traceml.hpp>

#include "cli_checks.hpp"
#include "comparison.hpp"
#include "data_parallel.hpp"
#include "experiment_report.hpp"
#include "qwen3.hpp"
#include "schedule_sweep.hpp"
#include "trainer.hpp"

#if QWEN3_WITH_GPU_SOURCES
#include <cuda_runtime_api.h>
#include <traceml/gpu/source_factory.hpp>
#include <traceml/torch_adapter.hpp>
#endif

namespace {

struct experiment_options {
  std::string schedules = "1x4,2x2,4x1";
  std::int64_t sweep = 0;            // > 0: sweep every MxA of this effective batch instead of `schedules`
  std::size_t sweep_candidates = 4;  // the largest micro-batches that fit, measured by the sweep
  std::int64_t steps = 0;            // 0: 100 on a GPU, 40 on the CPU
  std::size_t warmup = 5;
  std::int64_t seq_len = 0;         // 0: 512 on a GPU, 128 on the CPU
  std::string dtype;                // "": bf16 on a GPU, fp32 on the CPU; fp16 adds dynamic loss scaling
  std::string device;               // "": cuda when available
  std::string preset;               // "": qwen3-1.7b on a GPU, tiny on the CPU
  std::string model_dir;            // a Hugging Face snapshot folder instead of a preset
  std::string data_file;            // little-endian uint32 token ids; empty: synthetic
  std::string gpu_timing = "auto";  // auto (CUPTI, else CUDA events) | events | off
  // % of step time CUPTI's kernel records may cost (the library's default); 0: every step
  double record_budget = 100 * traceml::default_recording_budget;
  bool hw_counters = true;  // GPU busy/SM activity per phase from hardware counters (PM sampling)
  // % of one core decoding the counters may use (the library's default); 0: every step sampled
  double counter_budget = 100 * traceml::default_decode_budget;
  double launch_engine_us = 0;     // the engine's time per launch, for records beside counters (0: not modelled)
  bool checkpointing = true;       // the reference run used activation checkpointing
  bool cuda_graphs = false;        // replay each micro-batch's forward and backward from CUDA graphs
  std::int64_t loss_chunk = 1024;  // target tokens per chunk of the loss (chunked_loss.hpp); 0: full logits
  int repeats = 1;
  std::uint64_t seed = 1234;
  double peak_tflops = 0;  // 0: the measured bf16 peak on H100/H200, else MFU not shown
  std::string out = ".";
  bool traces = true;
  qwen3::data_parallel_options dp;  // world size 1: one process
};

/// An environment variable as a whole number in [lo, hi] (checked as the command line's are), or
/// `fallback` when unset; a value outside is an error naming it (a launcher's typo must not quietly
/// train as another rank).
int env_number(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v) return fallback;
  std::string text = v;
  const std::string refusal = qwen3::whole_number(static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi))(text);
  if (!refusal.empty()) throw std::invalid_argument(std::string(name) + ": " + refusal);
  return std::stoi(text);
}

/// --warmup against the run's steps (o.steps already resolved), before anything is made. An explicit
/// --warmup of --steps or more would leave no step measured: refused, the returned message naming both
/// (the command line's status 2). One above half the run is capped as the profiler caps every run
/// (traceml::effective_warmup: at most half the steps, so that half are measured), said in one line on
/// stderr; the default warm-up is capped without a word. o.warmup then holds the steps left out, so
/// the sweep, its header and the ranks' merge count what the profiler counts.
std::string settle_warmup(experiment_options& o, bool warmup_given, bool steps_given, bool cuda) {
  const auto steps = static_cast<std::size_t>(o.steps);
  if (warmup_given && o.warmup >= steps)
    return std::to_string(o.warmup) + " is not below --steps " + std::to_string(steps) +
           (steps_given ? std::string()
                        : std::string(" (the default ") + (o.sweep ? "of --sweep " : "") +
                              (cuda ? "on a GPU)" : "on the CPU)")) +
           ": no step would be measured";
  const auto capped = traceml::effective_warmup(o.warmup, steps);
  if (warmup_given && capped != o.warmup)
    std::fprintf(stderr,
                 "qwen3_accumulation: --warmup %zu capped to %zu: at most half of the %zu steps are warm-up, so that "
                 "%zu are measured\n",
                 o.warmup, capped, steps, steps - capped);
  o.warmup = capped;
  return {};
}

/// Progress where stderr is not a terminal (a log file, a pipe, CI): one line per tenth of the steps
/// and one for the last, so that a log shows the run advancing without a line per step. On a
/// terminal the profiler's live view (traceml/sinks/live_view.hpp) takes its place and rewrites
/// itself instead.
class progress_line : public traceml::callback {
 public:
  progress_line(std::string name, std::int64_t steps) : name_(std::move(name)), steps_(steps) {}
  void on_train_begin() override { start_ = last_ = clock::now(); }
  void on_step_end() override {
    const auto now = clock::now();
    const double step_ms = std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
    ++done_;
    const std::int64_t tenth = steps_ > 0 ? done_ * 10 / steps_ : 0;
    if (tenth == printed_tenth_ && done_ != steps_) return;
    printed_tenth_ = tenth;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double eta = elapsed / static_cast<double>(done_) * static_cast<double>(steps_ - done_);
    std::fflush(stdout);  // a log that takes both streams gets what was printed before this line first
    std::fprintf(stderr, "[%s] step %lld/%lld  %.1f ms  ETA %.0f s\n", name_.c_str(), static_cast<long long>(done_),
                 static_cast<long long>(steps_), step_ms, eta);
  }

 private:
  using clock = std::chrono::steady_clock;
  std::string name_;
  std::int64_t steps_, done_ = 0, printed_tenth_ = 0;
  clock::time_point start_, last_;
};

/// Model FLOPs of one optimizer step: forward + input-gradient backward (2 x forward: the frozen
/// base gets no weight gradient; adapter FLOPs and checkpoint recomputation are not counted).
/// Forward per token: 2 x matmul parameters (decoder projections and the output head) plus
/// attention 4 x layers x seq x q_dim (scores and values, causal mask not discounted).
double flops_per_step(const qwen3::config& c, std::int64_t seq, std::int64_t examples) {
  const double h = static_cast<double>(c.hidden_size), q = static_cast<double>(c.q_dim()),
               kv = static_cast<double>(c.kv_dim());
  const double per_layer = h * (q + 2 * kv) + q * h + 3 * h * static_cast<double>(c.intermediate_size);
  const double matmul_params = static_cast<double>(c.num_layers) * per_layer + static_cast<double>(c.vocab_size) * h;
  const double fwd_per_token = 2 * matmul_params + 4 * static_cast<double>(c.num_layers * seq) * q;
  return 2 * fwd_per_token * static_cast<double>(seq * examples);
}

bool is_out_of_memory(const std::exception& e) { return traceml::libtorch::is_out_of_memory(e); }

std::unique_ptr<traceml::gpu_source> make_gpu_source(const experiment_options& o, const torch::Device& device) {
  if (!device.is_cuda()) {
    traceml::say_why_no_gpu_source(
        "the device is the CPU (--device cpu, or no CUDA device was found): phases are "
        "timed on the CPU");
    return nullptr;
  }
#if QWEN3_WITH_GPU_SOURCES
  if (o.gpu_timing == "off") {
    traceml::say_why_no_gpu_source("GPU timing off (--gpu-timing off): phases are timed on the CPU");
    return nullptr;
  }
  traceml::gpu_source_options g;
  g.cupti = o.gpu_timing == "auto";
  g.cupti_opts.overhead_budget = o.record_budget / 100.0;
  g.hardware_counters = o.hw_counters;
  g.counters.decode_budget = o.counter_budget / 100.0;
  g.launch_engine_ns = static_cast<std::int64_t>(o.launch_engine_us * 1e3 + 0.5);
  g.current_stream = traceml::libtorch::current_stream_provider();
  g.memory = traceml::libtorch::caching_allocator_sampler();
  return traceml::make_best_gpu_source(g);
#else
  (void)o;
  traceml::report_once("qwen3-no-gpu-sources", "built without CUDA/CUPTI support: phases are timed on the CPU only");
  traceml::say_why_no_gpu_source(
      "this example was built without CUDA/CUPTI support (no CUDA toolkit at configure time): phases are timed on "
      "the CPU");
  return nullptr;
#endif
}

void synchronize(const torch::Device& device) {
#if QWEN3_WITH_GPU_SOURCES
  if (device.is_cuda()) traceml::libtorch::synchronize();
#else
  (void)device;
#endif
}

/// After a schedule (and after an OOM), give cached blocks back so the next schedule starts clean.
void release_cached_memory(const torch::Device& device) {
  if (device.is_cuda()) traceml::libtorch::release_cached_memory();
}

/// `--sweep N`: the library's sweep over this trainer (schedule_sweep.hpp), its runs echoing the
/// experiment's settings.
traceml::sweep_result run_sweep_mode(const experiment_options& o, const qwen3::trainer_setup& setup,
                                     const std::string& device_name, const qwen3::token_source& data) {
  qwen3::sweep_setup s;
  s.trainer = setup;
  s.effective_batch = o.sweep;
  s.steps = static_cast<std::size_t>(o.steps);
  s.warmup = o.warmup;
  s.repeats = static_cast<std::size_t>(o.repeats);
  s.max_candidates = o.sweep_candidates;
  s.out = o.out;
  s.traces = o.traces;
  s.config = {{"model", o.model_dir.empty() ? o.preset : o.model_dir},
              {"dtype", o.dtype},
              {"seq_len", std::to_string(o.seq_len)},
              {"checkpointing", o.checkpointing ? "on" : "off"},
              {"cuda_graphs", o.cuda_graphs ? "requested" : "off"},
              {"loss_chunk", std::to_string(o.loss_chunk)},
              {"device", device_name}};
  s.gpu_source = [&o, &setup] { return make_gpu_source(o, setup.device); };
  return qwen3::run_schedule_sweep(s, data);
}

std::string gpu_name() {
#if QWEN3_WITH_GPU_SOURCES
  cudaDeviceProp p{};
  int dev = 0;
  if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&p, dev) == cudaSuccess) return p.name;
#endif
  return "cuda";
}

/// The options that choose what runs: the schedules (or a sweep), the steps, the shapes and dtype, the
/// device, the model and the data.
void add_run_options(CLI::App& app, experiment_options& o) {
  auto* schedules_opt =
      app.add_option("--schedules", o.schedules, "comma-separated MxA schedules sharing one effective batch")
          ->check(qwen3::schedule_list())
          ->capture_default_str();
  app.add_option(
         "--sweep", o.sweep,
         "instead of --schedules: every MxA of this effective batch, probed for memory from the largest micro-batch "
         "down, measured in interleaved repeats (default 3), ranked, with a recommendation (default 20 steps on a "
         "GPU, 8 on the CPU)")
      ->check(CLI::Range(std::int64_t{1}, qwen3::max_examples_per_step))
      ->excludes(schedules_opt);
  // A sweep of N has at most N candidates (the MxA of N), so any count up to --sweep's limit is meaningful.
  app.add_option("--sweep-candidates", o.sweep_candidates,
                 "with --sweep: how many of the largest micro-batches that fit are measured (0: all)")
      ->check(qwen3::whole_number(0, static_cast<std::uint64_t>(qwen3::max_examples_per_step)))
      ->capture_default_str();
  app.add_option("--steps", o.steps, "optimizer steps per schedule (default: 100 on a GPU, 40 on the CPU)")
      ->check(qwen3::whole_number(1, 1000000000));
  app.add_option("--warmup", o.warmup,
                 "leading steps excluded from statistics, at most half of --steps (more is capped, and said; "
                 "--steps or more is refused)")
      ->check(qwen3::whole_number(0, 1000000000))
      ->capture_default_str();
  app.add_option("--seq-len", o.seq_len, "tokens per example (default: 512 on a GPU, 128 on the CPU)")
      ->check(qwen3::whole_number(2, 2147483647));
  app.add_option("--dtype", o.dtype,
                 "bf16 | fp16 | fp32 (default: bf16 on a GPU, fp32 on the CPU); fp16 trains with dynamic loss scaling "
                 "and fp32 master weights of the adapters, on a GPU")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  app.add_option("--device", o.device, "cuda | cpu (default: cuda when available)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_option("--preset", o.preset,
                 "model preset: qwen3-1.7b | qwen3-0.6b | tiny | llama-3.2-1b | llama-tiny "
                 "(default: qwen3-1.7b on a GPU, tiny on the CPU)");
  app.add_option("--model-dir", o.model_dir,
                 "Hugging Face snapshot folder (config.json + safetensors) instead of a preset");
  app.add_option("--data", o.data_file, "token-id file (flat little-endian uint32) instead of synthetic tokens");
}

/// The options of how it is measured and run, and where the outputs go: GPU timing, hardware
/// counters, checkpointing, CUDA graphs, the loss's chunks, repeats, the seed, MFU's peak.
void add_measurement_options(CLI::App& app, experiment_options& o) {
  app.add_option("--gpu-timing", o.gpu_timing, "auto (CUPTI kernel attribution, else CUDA events) | events | off")
      ->check(CLI::IsMember({"auto", "events", "off"}))
      ->capture_default_str();
  app.add_option("--record-budget", o.record_budget,
                 "percent of step time CUPTI's kernel records may cost: steps are recorded as the budget allows "
                 "(0: record every step, at CUPTI's full cost)")
      ->check(qwen3::number_in(0, 100, "a percentage from 0 to 100"))
      ->capture_default_str();
  app.add_flag("--hw-counters,!--no-hw-counters", o.hw_counters,
               "GPU busy and SM activity of every phase from hardware counters (CUPTI PM sampling; default on, off "
               "when the GPU or its driver does not allow it)");
  app.add_option("--counter-budget", o.counter_budget,
                 "percent of one core decoding the hardware counters may use: they are sampled in windows of 2 s "
                 "with the hardware stopped between them as the budget allows (0: every step, at the decoding's "
                 "full cost, for a study that wants counters on every step)")
      ->check(qwen3::number_in(0, 100, "a percentage from 0 to 100"))
      ->capture_default_str();
  app.add_option("--launch-engine-us", o.launch_engine_us,
                 "the GPU engine's time per kernel launch outside a kernel record (pm_sampling_probe measures it): "
                 "the summary then sets the records' busy share, with it, beside the counters' on recorded steps")
      ->check(qwen3::number_in(0, 1000, "microseconds from 0 to 1000"))
      ->capture_default_str();
  app.add_flag("--checkpointing,!--no-checkpointing", o.checkpointing,
               "recompute each decoder layer in backward (default on)");
  app.add_flag("--cuda-graphs", o.cuda_graphs,
               "replay forward and backward from CUDA graphs captured per schedule (LibTorch 2.x with CUDA)");
  app.add_option("--loss-chunk", o.loss_chunk,
                 "compute the loss this many target tokens at a time, without the full [tokens, vocab] logits "
                 "(0: the full logits)")
      ->check(qwen3::whole_number(0, 1000000000))
      ->capture_default_str();
  app.add_option("--repeats", o.repeats, "run the schedule list this many times, interleaved (ABCABC...)")
      ->check(qwen3::whole_number(1, 1000));
  app.add_option("--seed", o.seed, "seed for weights, adapters and synthetic data")
      ->check(qwen3::whole_number(0, UINT64_MAX))
      ->capture_default_str();
  app.add_option("--peak-tflops", o.peak_tflops,
                 "dense peak of the GPU in the run's dtype, for MFU (default: 790 measured bf16 on H100/H200)")
      ->check(qwen3::number_in(0, 1e6, "a number of TFLOP/s above 0, at most 1000000", /*above_lo=*/true));
  app.add_option("--out", o.out,
                 "output folder, created with its parents: accumulation_summary.json, accumulation_report.html, "
                 "accumulation_steps_<schedule>.jsonl (with --repeats: _repeat<k> per repeat), trace_<schedule>.json")
      ->capture_default_str();
  app.add_flag("!--no-traces", o.traces, "skip the Chrome traces");
}

/// Data parallelism, as torchrun launches it: one process per rank, the environment saying which.
/// The environment gives the defaults; a value of it outside its range throws, naming the variable.
void add_data_parallel_options(CLI::App& app, experiment_options& o) {
  o.dp.world_size = env_number("WORLD_SIZE", 1, 1, 1000000);
  o.dp.rank = env_number("RANK", 0, 0, 1000000);
  o.dp.master_port = env_number("MASTER_PORT", o.dp.master_port, 1, 65535);
  if (const char* addr = std::getenv("MASTER_ADDR")) o.dp.master_addr = addr;
  app.add_option("--world-size", o.dp.world_size,
                 "data-parallel ranks, one process each (default: WORLD_SIZE, else 1); gradients averaged once per "
                 "optimizer step, after the last micro-batch, inside a communication phase")
      ->check(qwen3::whole_number(1, 1000000));
  app.add_option("--rank", o.dp.rank, "this process's rank (default: RANK, else 0)")
      ->check(qwen3::whole_number(0, 1000000));
  app.add_option("--master-addr", o.dp.master_addr,
                 "where rank 0 serves the rendezvous (default: MASTER_ADDR, else 127.0.0.1)");
  app.add_option("--master-port", o.dp.master_port, "its port (default: MASTER_PORT, else 29500)")
      ->check(qwen3::whole_number(1, 65535));
  app.add_option("--rank-timeout", o.dp.timeout_s,
                 "seconds the ranks wait for each other: to join, at each all-reduce, for the merge of their steps")
      ->check(qwen3::whole_number(1, 86400))
      ->capture_default_str();
}

/// The run as settled from the options and the machine: the device, the schedules, the model and
/// the data, and what MFU needs.
struct experiment_plan {
  bool cuda = false;
  torch::Device device{torch::kCPU};
  std::vector<qwen3::schedule> schedules;
  torch::Dtype dtype = torch::kFloat32;
  qwen3::config cfg;
  std::unique_ptr<qwen3::token_source> data;
  std::int64_t effective = 0;  // examples per optimizer step
  double step_flops = 0;
  double peak = 0;  // FLOP/s; 0: MFU not shown
  std::string device_name = "cpu";
};

/// Settles what the command line left to the machine (device, steps, warm-up, shapes, dtype, model)
/// and loads the model's configuration and the data, before anything else is made. False when the
/// command line is refused after all (the warm-up against the steps: said, status 2); throws what
/// the run cannot do.
bool settle_plan(experiment_options& o, const CLI::App& app, experiment_plan& p) {
  if (o.dp.rank >= o.dp.world_size)
    throw std::invalid_argument("rank " + std::to_string(o.dp.rank) + " of a world of " +
                                std::to_string(o.dp.world_size) + " (need rank < world size)");
  if (o.dp.on() && o.sweep) throw std::invalid_argument("--sweep with several ranks is not supported: sweep on one");
  // Each rank writes its own outputs, into its own folder under --out.
  if (o.dp.on()) o.out += "/rank" + std::to_string(o.dp.rank);
  p.cuda = o.device.empty() ? torch::cuda::is_available() : o.device == "cuda";
  if (p.cuda && !torch::cuda::is_available())
    throw std::runtime_error("--device cuda: this LibTorch sees no CUDA device");
  p.device = p.cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  if (o.steps == 0) o.steps = o.sweep ? (p.cuda ? 20 : 8) : (p.cuda ? 100 : 40);
  // Still the command line's (status 2), but only now are the steps known: before any output.
  if (const auto refusal = settle_warmup(o, app.count("--warmup") > 0, app.count("--steps") > 0, p.cuda);
      !refusal.empty()) {
    (void)app.exit(CLI::ValidationError("--warmup", refusal));
    return false;
  }
  qwen3::create_output_folder(o.out);
  p.schedules = o.sweep ? qwen3::sweep_schedules(o.sweep) : qwen3::parse_schedules(o.schedules);
  if (o.sweep && app.count("--repeats") == 0) o.repeats = 3;  // the spread of repeats decides ties
  if (o.seq_len == 0) o.seq_len = p.cuda ? 512 : 128;
  if (o.dtype.empty()) o.dtype = p.cuda ? "bf16" : "fp32";
  if (o.preset.empty()) o.preset = p.cuda ? "qwen3-1.7b" : "tiny";
  p.dtype = o.dtype == "bf16" ? torch::kBFloat16 : o.dtype == "fp16" ? torch::kHalf : torch::kFloat32;
  if (p.dtype == torch::kHalf && !p.cuda)
    throw std::runtime_error("--dtype fp16 needs a CUDA device (on the CPU use fp32)");
  p.cfg = o.model_dir.empty() ? qwen3::preset(o.preset) : qwen3::load_config(o.model_dir);
  // Before any allocation; a sweep finds out what fits by running it, so only its smallest micro-batch.
  qwen3::check_run_fits(p.cfg, o.sweep ? std::vector<qwen3::schedule>{p.schedules.back()} : p.schedules, o.seq_len,
                        p.dtype, p.device, o.checkpointing);
  if (o.data_file.empty())
    p.data = std::make_unique<qwen3::synthetic_tokens>(p.cfg.vocab_size, o.seq_len, o.seed);
  else
    p.data = std::make_unique<qwen3::token_file>(o.data_file, p.cfg.vocab_size, o.seq_len);

  p.effective = p.schedules.front().effective_batch();
  p.step_flops = flops_per_step(p.cfg, o.seq_len, p.effective);
  p.peak = o.peak_tflops * 1e12;
  if (p.cuda) p.device_name = gpu_name();
  if (p.peak == 0 && p.cuda && p.dtype == torch::kBFloat16 &&
      (p.device_name.find("H100") != std::string::npos || p.device_name.find("H200") != std::string::npos))
    p.peak = 790e12;  // dense bf16 matmul rate measured on an H200 (docs/accumulation.md)
  return true;
}

/// The run's first lines: the model, the shapes, how many steps of which schedules, on what.
void print_plan(const experiment_options& o, const experiment_plan& p) {
  // A sweep measures only the candidates that fit (and at most --sweep-candidates of them): say so.
  const std::string plan = o.sweep ? std::to_string(o.steps) + " steps x " + std::to_string(o.repeats) +
                                         " repeat(s) per measured candidate, of " + std::to_string(p.schedules.size()) +
                                         " schedules"
                                   : std::to_string(o.steps) + " steps x " + std::to_string(p.schedules.size()) +
                                         " schedules x " + std::to_string(o.repeats) + " repeat(s)";
  std::printf(
      "traceml accumulation experiment: %s (%s), %s, seq %lld, effective batch %lld, %s, "
      "checkpointing %s, CUDA graphs %s, device %s\n",
      o.model_dir.empty() ? o.preset.c_str() : o.model_dir.c_str(), p.cfg.name.c_str(), o.dtype.c_str(),
      static_cast<long long>(o.seq_len), static_cast<long long>(p.effective), plan.c_str(),
      o.checkpointing ? "on" : "off", o.cuda_graphs ? "requested" : "off", p.device_name.c_str());
  if (o.model_dir.empty())
    std::printf("weights: random (seed %llu); step time depends on shapes, not on weight values\n",
                static_cast<unsigned long long>(o.seed));
}

/// What the schedules' runs gather for the report: each schedule's runs (or why it failed), every
/// run, the outputs not written, and per run its losses (and fp16's skipped steps).
struct experiment_state {
  std::vector<qwen3::schedule_result> results;
  std::vector<traceml::run_result> all_runs;
  std::vector<std::string> failed_outputs;
  nlohmann::json training = nlohmann::json::object();
};

/// What every run of a schedule shares: the options, the settled run, the trainer's setup, the
/// report a signal writes, the data-parallel group (when ranks run), and what the runs gather.
struct schedule_context {
  const experiment_options& o;
  const experiment_plan& p;
  const qwen3::trainer_setup& setup;
  const qwen3::experiment_report& report;
  std::optional<qwen3::data_parallel>& dp;
  experiment_state& st;
};

/// The profiler of one run of schedule `si` (repeat `rep`): its outputs, its labels, and, on a
/// signal, the report of every finished step.
traceml::profiler_options schedule_profiler_options(const schedule_context& c, std::size_t si, int rep,
                                                    const std::string& name, bool graphs) {
  const auto& o = c.o;
  const auto& sched = c.p.schedules[si];
  traceml::profiler_options po;
  po.run_name = name;
  po.warmup_steps = o.warmup;
  po.tokens_per_step = static_cast<double>(c.p.effective * o.seq_len);
  po.samples_per_step = static_cast<double>(c.p.effective);
  po.print_table = false;
  po.live = traceml::stderr_is_terminal();  // the live view replaces the progress line there
  po.expected_steps = static_cast<std::size_t>(o.steps);
  po.jsonl_path = o.out + "/" + qwen3::files::steps(sched.name(), rep, o.repeats);
  if (o.traces && rep == 0) po.trace_path = o.out + "/" + qwen3::files::trace(sched.name());
  if (c.dp) po.rank = traceml::rank_identity{o.dp.rank, o.dp.world_size};
  po.finish_on_signal = true;
  po.on_signal_finish = [&st = c.st, &report = c.report, si](const traceml::run_result& stopped, int) {
    st.results[si].runs.push_back(stopped);
    st.all_runs.push_back(stopped);
    qwen3::write_experiment_report(report, st.results, st.all_runs, st.training);
  };
  po.config = {{"schedule", sched.name()},
               {"micro_batch", std::to_string(sched.micro_batch)},
               {"accumulation", std::to_string(sched.accumulation)},
               {"model", o.model_dir.empty() ? o.preset : o.model_dir},
               {"dtype", o.dtype},
               {"seq_len", std::to_string(o.seq_len)},
               {"checkpointing", o.checkpointing ? "on" : "off"},
               {"cuda_graphs", graphs ? "on" : "off"},
               {"loss_chunk", std::to_string(o.loss_chunk)},
               {"device", c.p.device_name},
               {"repeat", std::to_string(rep + 1)}};
  return po;
}

/// Prints a run's first and last loss (and fp16's loss scaling) and keeps them for the report.
void note_training(experiment_state& st, const std::string& name, const std::vector<double>& losses,
                   const qwen3::loss_scaler* scaler) {
  if (!losses.empty())
    std::printf("%s loss: step 1 %.4f, step %zu %.4f\n", name.c_str(), losses.front(), losses.size(), losses.back());
  auto& trained = st.training[name];
  trained["losses"] = losses;
  if (scaler) {
    std::printf("%s fp16 loss scaling: %lld of %lld steps skipped (inf/nan gradients), scale now %.0f\n", name.c_str(),
                static_cast<long long>(scaler->skipped_steps()), static_cast<long long>(scaler->steps()),
                scaler->scale_value());
    trained["skipped_steps"] = scaler->skipped_step_indices();
    trained["final_loss_scale"] = scaler->scale_value();
  }
}

/// One run of schedule `si` (repeat `rep`): a fresh trainer, its profiler, the training, the table
/// (and, with ranks, every rank's steps side by side on rank 0). Out of memory or another failure
/// marks the schedule failed, and the others still run. False when a signal came while the model
/// was built: nothing more is trained.
bool run_schedule(const schedule_context& c, std::size_t si, int rep) {
  const auto& o = c.o;
  const auto& sched = c.p.schedules[si];
  auto& st = c.st;
  const std::string name = sched.name() + (o.repeats > 1 ? "#" + std::to_string(rep + 1) : "");
  try {
    auto trainer = qwen3::make_trainer(c.setup, *c.p.data, sched);
    auto& model = trainer.model;
    auto& opt = trainer.opt;
    const auto& graphs = trainer.graphs;
    const auto& scaler = trainer.scaler;
    synchronize(c.p.device);                           // model construction must not be billed to the first step
    if (traceml::pending_stop_signal()) return false;  // a signal while the model was built: train nothing more

    const traceml::profiler_options po = schedule_profiler_options(c, si, rep, name, static_cast<bool>(graphs));
    traceml::profiler prof(po);
    prof.set_gpu_source(make_gpu_source(o, c.p.device));
    progress_line progress(name, o.steps);
    traceml::callback_list callbacks;
    callbacks.add(prof);
    if (!po.live) callbacks.add(progress);
    qwen3::train_options t;
    t.sched = sched;
    t.steps = o.steps;
    // Each step ends with a sync so that its wall time holds its own GPU work (without it,
    // the CPU runs ahead and step times measure launch speed, not the step).
    t.sync_each_step = true;
    t.graphs = graphs.get();
    t.scaler = scaler.get();
    if (c.dp) {
      t.sync_gradients = [&dp = c.dp, &opt] { dp->average_gradients(opt.params()); };
      t.data_stride = o.dp.world_size;
      t.data_offset = o.dp.rank;
    }
    note_training(st, name, qwen3::train(*model, opt, *c.p.data, t, callbacks), scaler.get());
    auto result = prof.finish();
    st.failed_outputs.insert(st.failed_outputs.end(), prof.failed_outputs().begin(), prof.failed_outputs().end());
    std::fputs(traceml::format_table(result).c_str(), stdout);
    if (c.dp) {  // every rank's steps to rank 0, which prints them side by side
      const auto merged = traceml::gather_ranks(c.dp->store(), name, traceml::rank_steps_of(result, o.dp.rank),
                                                o.dp.world_size, std::chrono::seconds(o.dp.timeout_s), o.warmup);
      if (merged) std::fputs(("\n" + traceml::format_rank_table(*merged)).c_str(), stdout);
    }
    st.results[si].runs.push_back(result);
    st.all_runs.push_back(std::move(result));
  } catch (const std::exception& e) {
    std::fputc('\n', stderr);
    st.results[si].error = is_out_of_memory(e) ? "OOM: " + std::string(e.what()).substr(0, 200) : e.what();
    std::fprintf(stderr, "schedule %s: %s\n", sched.name().c_str(),
                 is_out_of_memory(e) ? "out of GPU memory (reported as OOM; the other schedules still run)" : e.what());
  }
  return true;
}

/// Every schedule, --repeats times, interleaved (ABCABC...), until a signal: a schedule out of
/// memory stays so, and cached memory goes back after each run so that the next starts clean.
void run_schedules(const schedule_context& c) {
  for (int rep = 0; rep < c.o.repeats && !traceml::pending_stop_signal(); ++rep) {
    for (std::size_t si = 0; si < c.p.schedules.size() && !traceml::pending_stop_signal(); ++si) {
      if (c.st.results[si].failed()) continue;  // an OOM schedule stays OOM
      if (!run_schedule(c, si, rep)) break;
      release_cached_memory(c.p.device);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  experiment_options o;
  CLI::App app{
      "The gradient-accumulation experiment: same effective batch, different micro-batch x accumulation, "
      "profiled phase by phase and kernel by kernel with traceml."};
  add_run_options(app, o);
  add_measurement_options(app, o);
  try {
    add_data_parallel_options(app, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qwen3_accumulation: %s\n", e.what());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is 0; every refused command line is 2
  }

  try {
    experiment_plan p;
    if (!settle_plan(o, app, p)) return 2;
    print_plan(o, p);
    std::optional<qwen3::data_parallel> dp;
    if (o.dp.on()) {
      std::printf("data-parallel: rank %d of %d, joining at %s:%d (c10d Gloo; each rank reads its own examples)\n",
                  o.dp.rank, o.dp.world_size, o.dp.master_addr.c_str(), o.dp.master_port);
      std::fflush(stdout);
      dp.emplace(o.dp);
    }

    experiment_state st;
    st.results.resize(p.schedules.size());
    for (std::size_t si = 0; si < p.schedules.size(); ++si) st.results[si].name = p.schedules[si].name();
    const qwen3::experiment_report report{
        o.out, "traceml: gradient accumulation, " + (o.model_dir.empty() ? o.preset : o.model_dir) + ", " + o.dtype,
        p.step_flops, p.peak};
    const qwen3::trainer_setup setup{p.cfg,         o.model_dir, p.dtype, p.device,    o.checkpointing,
                                     o.cuda_graphs, o.seq_len,   o.seed,  o.loss_chunk};
    std::optional<traceml::sweep_result> swept;
    if (o.sweep) {
      swept = run_sweep_mode(o, setup, p.device_name, *p.data);
      st.results = qwen3::sweep_schedule_results(*swept);
      for (const auto& r : st.results) st.all_runs.insert(st.all_runs.end(), r.runs.begin(), r.runs.end());
    }
    // SIGINT/SIGTERM: a running schedule stops at its step end and its profiler writes what it has,
    // then the report of every finished step is written (the profiler's on_signal_finish) and the
    // process ends by the signal. Between schedules the guard holds the signal until the loop looks.
    traceml::stop_signal_guard stop_guard;
    if (!swept) run_schedules(schedule_context{o, p, setup, report, dp, st});  // a sweep ran its own interleaved rounds

    const auto report_failed =
        qwen3::write_experiment_report(report, st.results, st.all_runs, st.training, swept ? &*swept : nullptr);
    st.failed_outputs.insert(st.failed_outputs.end(), report_failed.begin(), report_failed.end());
    if (const int sig = traceml::pending_stop_signal()) {  // came between schedules, or while writing
      std::fprintf(stderr, "qwen3_accumulation: %s: stopped; the outputs of the finished steps are written\n",
                   traceml::stop_signal_name(sig));
      traceml::end_by_signal(sig);
    }
    const auto problems = qwen3::experiment_problems(st.results, st.failed_outputs);
    for (const auto& problem : problems) std::fprintf(stderr, "qwen3_accumulation: %s\n", problem.c_str());
    return problems.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qwen3_accumulation: %s\n", e.what());
    return 1;
  }
}
