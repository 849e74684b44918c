// traceml::torch: a tiny LibTorch training loop, profiled, with the adapter's stream and memory
// hooks. On a CPU-only LibTorch the adapter answers "no stream" and "unknown memory".
#include <cstdio>

#include <traceml/torch_adapter.hpp>
#include <traceml/traceml.hpp>

int main() {
  torch::manual_seed(0);
  torch::nn::Linear model(8, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  const torch::Tensor x = torch::randn({16, 8});
  const torch::Tensor y = x.sum(1, /*keepdim=*/true);

  traceml::profiler_options opts;
  opts.run_name = "torch-consumer";
  opts.warmup_steps = 0;
  opts.print_table = false;
  traceml::profiler prof(opts);
  double first = 0, last = 0;
  for (int s = 0; s < 20; ++s) {
    TRACEML_STEP();
    torch::Tensor loss;
    { TRACEML_PHASE(forward); loss = torch::mse_loss(model(x), y); }
    { TRACEML_PHASE(backward); loss.backward(); }
    { TRACEML_PHASE(optimizer); optimizer.step(); optimizer.zero_grad(); }
    (s == 0 ? first : last) = loss.item<double>();
  }
  const traceml::run_result& r = prof.finish();
  const bool cuda = traceml::libtorch::cuda_available();
  // Without CUDA the adapter must say "unknown" (-1), never a made-up 0.
  const auto peaks = traceml::libtorch::read_allocator_peaks();
  if (r.steps.size() != 20 || !(last < first) || (!cuda && peaks.allocated != -1)) {
    std::fprintf(stderr, "torch consumer: unexpected result (%zu steps, loss %g -> %g)\n", r.steps.size(),
                 first, last);
    return 1;
  }
  std::printf("torch consumer: LibTorch %s, CUDA %s, %zu steps, loss %.3f -> %.3f\n", TORCH_VERSION,
              cuda ? "available" : "unavailable", r.steps.size(), first, last);
  return 0;
}
