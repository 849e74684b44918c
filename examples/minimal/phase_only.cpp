// The same MLP loop as mlp_training.cpp, with no profiler code at all: only <traceml/phase.hpp> and
// its scopes. Run it with TRACEML_OUT=<dir> and it writes the whole report there (the traceml
// session, compiled in by the CMake target traceml::traceml; with traceml::cupti and traceml::torch
// linked, GPU kernels are attributed too); without TRACEML_OUT it says once how to turn that on.
//
//   TRACEML_OUT=out ./traceml_phase_only_example     # out/traceml_phase_only_example_summary.json, ...
#include <torch/torch.h>

#include <traceml/phase.hpp>  // traceml: the only line besides the scopes

int main() {
  const int steps = 60, batch = 64;
  torch::manual_seed(0);
  const torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  torch::nn::Sequential model(torch::nn::Linear(512, 512), torch::nn::ReLU(), torch::nn::Linear(512, 512),
                              torch::nn::ReLU(), torch::nn::Linear(512, 10));
  model->to(device);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));

  for (int step = 0; step < steps; ++step) {
    TRACEML_STEP();
    torch::Tensor x, y, loss;
    {
      TRACEML_PHASE(dataloader);
      x = torch::randn({batch, 512}).to(device);
      y = torch::randint(0, 10, {batch}, torch::kLong).to(device);
    }
    {
      TRACEML_PHASE(forward);
      loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    }
    {
      TRACEML_PHASE(backward);
      optimizer.zero_grad();
      loss.backward();
    }
    {
      TRACEML_PHASE(optimizer);
      optimizer.step();
    }
  }
  return 0;
}
