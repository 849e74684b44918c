// GPU profiling overhead on a LibTorch transformer training loop (benchmarks/gpu_standin_model.hpp,
// bf16, LoRA on every linear layer, AdamW), measured in one process by alternating blocks of steps:
//   off     scopes compiled in, recording switched off (traceml::set_enabled(false))
//   cpu     profiler attached, no GPU source (CPU phase timing only)
//   events  profiler + CUDA-event phase timing (no CUPTI)
//   cupti   profiler + CUPTI kernel attribution on every step (kernel records + boundary markers)
//   cupti/N profiler + CUPTI, kernel records on one step in N (markers time every step)
// Each step ends with one synchronization outside the step (as logging the loss does); the first
// step of every block is not counted; the order of the modes rotates from round to round. Prints
// median step times, and the median over rounds of each mode's ratio to `off` in the same round.
//
//   traceml_gpu_overhead [--layers N] [--hidden N] [--ffn N] [--seq N] [--rounds N] [--block N]
//                        [--schedules 4x1,1x4] [--sample N]
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gpu_standin_model.hpp"
#include "traceml/cupti_source.hpp"
#include "traceml/profiler.hpp"
#include "traceml/torch_adapter.hpp"

namespace lt = traceml::libtorch;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

struct schedule {
  int micro = 4, accum = 1;
};

}  // namespace

int main(int argc, char** argv) {
  standin::config cfg;
  int seq = 512, rounds = 10, block = 4, sample = 10;
  std::vector<schedule> schedules = {{4, 1}, {1, 4}};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--layers") cfg.layers = std::atoi(v);
    else if (k == "--hidden") cfg.hidden = std::atoi(v);
    else if (k == "--ffn") cfg.ffn = std::atoi(v);
    else if (k == "--seq") seq = std::atoi(v);
    else if (k == "--rounds") rounds = std::atoi(v);
    else if (k == "--block") block = std::atoi(v);
    else if (k == "--sample") sample = std::atoi(v);
    else if (k == "--schedules") {
      schedules.clear();
      std::string s = v;
      std::size_t p = 0;
      while (p < s.size()) {
        std::size_t q = s.find(',', p);
        if (q == std::string::npos) q = s.size();
        schedule sc;
        std::sscanf(s.substr(p, q - p).c_str(), "%dx%d", &sc.micro, &sc.accum);
        schedules.push_back(sc);
        p = q + 1;
      }
    }
  }
  if (!lt::cuda_available()) {
    std::printf("SKIPPED: no CUDA device visible to LibTorch\n");
    return 77;
  }
  std::printf("stand-in: %d layers, hidden %d, ffn %d, heads %d/%d, vocab %d, LoRA r=%d, bf16, seq %d\n", cfg.layers,
              cfg.hidden, cfg.ffn, cfg.heads, cfg.kv_heads, cfg.vocab, cfg.rank, seq);
  standin::model m(cfg, seq, torch::kCUDA);
  torch::optim::AdamW opt(m.trainable(), torch::optim::AdamWOptions(1e-4));

  const std::string sampled_mode = "cupti/" + std::to_string(sample);
  const std::vector<std::string> modes = {"off", "events", "cupti", sampled_mode};
  for (const schedule& sc : schedules) {
    auto tokens = torch::randint(cfg.vocab, {sc.micro, seq},
                                 torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
    auto step = [&] {
      const auto t0 = traceml::now_ns();
      {
        TRACEML_STEP();
        for (int a = 0; a < sc.accum; ++a) {
          TRACEML_MICROBATCH();
          torch::Tensor loss;
          {
            TRACEML_PHASE(forward);
            loss = m.loss(tokens) / sc.accum;
          }
          {
            TRACEML_PHASE(backward);
            loss.backward();
          }
        }
        {
          TRACEML_PHASE(optimizer);
          opt.step();
          opt.zero_grad();
        }
      }
      lt::synchronize();  // outside the step, as logging the loss would be
      return static_cast<double>(traceml::now_ns() - t0) / 1e6;
    };
    traceml::set_enabled(false);
    for (int i = 0; i < 3; ++i) step();  // warm-up: cuBLAS, allocator growth

    std::map<std::string, std::vector<double>> times;
    std::map<std::string, std::vector<double>> round_ratios;
    std::vector<double> off_first_round;
    std::uint64_t kernels = 0, attributed = 0, dropped = 0, cupti_steps = 0;
    std::string cupti_status, events_status;
    for (int r = 0; r < rounds; ++r) {
      std::map<std::string, std::vector<double>> this_round;
      for (std::size_t mi = 0; mi < modes.size(); ++mi) {
        const std::string md = modes[(mi + static_cast<std::size_t>(r)) % modes.size()];
        std::unique_ptr<traceml::profiler> prof;
        if (md == "off") {
          traceml::set_enabled(false);
        } else {
          traceml::set_enabled(true);
          traceml::profiler_options po;
          po.run_name = md;
          po.print_table = false;
          po.warmup_steps = 0;
          prof = std::make_unique<traceml::profiler>(po);
          traceml::gpu_source_options go;
          go.current_stream = lt::current_stream_provider();
          go.memory = lt::caching_allocator_sampler();
          if (md == "events") {
            go.cupti = false;
            prof->set_gpu_source(traceml::make_best_gpu_source(go));
          } else if (md == "cupti") {
            prof->set_gpu_source(traceml::make_best_gpu_source(go));
          } else if (md == sampled_mode) {
            go.cupti_opts.sample_every = sample;
            prof->set_gpu_source(traceml::make_best_gpu_source(go));
          }
        }
        for (int i = 0; i < block; ++i) {
          const double ms = step();
          if (i == 0) continue;
          times[md].push_back(ms);
          this_round[md].push_back(ms);
          if (md == "off" && r == 0) off_first_round.push_back(ms);
        }
        if (prof) {
          const auto& res = prof->finish();
          if (md == "cupti") {
            cupti_status = res.summary.gpu_status;
            for (auto& s : res.steps) {
              if (!s.gpu) continue;
              ++cupti_steps;
              kernels += s.gpu->total.kernel_count;
              for (auto& p : s.gpu->phases) attributed += p.facts.kernel_count;
              dropped += s.gpu->dropped_records;
            }
          } else if (md == "events") {
            events_status = res.summary.gpu_status;
          }
          prof.reset();
        }
      }
      const double off_r = median(this_round["off"]);
      for (auto& m : modes) round_ratios[m].push_back(median(this_round[m]) / off_r);
    }
    traceml::set_enabled(true);
    const double off = median(times["off"]);
    std::printf("\nschedule %dx%d (micro-batch x accumulation), %d rounds x %d steps per mode (first of each block "
                "not counted)\n",
                sc.micro, sc.accum, rounds, block - 1);
    for (auto& mode : modes) {
      const double t = median(times[mode]);
      const double rr = median(round_ratios[mode]);
      auto mm = std::minmax_element(round_ratios[mode].begin(), round_ratios[mode].end());
      std::printf("  %-9s median step %9.3f ms   paired ratio %.4f (overhead %+6.2f%%, rounds %.3f..%.3f)\n",
                  mode.c_str(), t, rr, 100.0 * (rr - 1.0), *mm.first, *mm.second);
    }
    std::printf("  off, first round only (before any CUPTI use): %.3f ms; off, all rounds: %.3f ms\n",
                median(off_first_round), off);
    std::printf("  cupti: %.0f kernels per step, %.4f%% attributed to a phase, %llu records dropped\n",
                cupti_steps ? static_cast<double>(kernels) / static_cast<double>(cupti_steps) : 0.0,
                kernels ? 100.0 * static_cast<double>(attributed) / static_cast<double>(kernels) : 0.0,
                static_cast<unsigned long long>(dropped));
    std::printf("  cupti status: %s\n  events status: %s\n", cupti_status.c_str(), events_status.c_str());
    std::fflush(stdout);
  }
  return 0;
}
