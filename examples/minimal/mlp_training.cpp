// An ordinary LibTorch training loop (a small MLP on synthetic data), wrapped by traceml.
// The lines marked "traceml" and the four { TRACEML_PHASE(...); ... } scopes are all it takes; the rest is
// the loop as it was.
//
//   ./traceml_minimal_example [output-dir]     writes mlp_summary.json, mlp_steps.jsonl, mlp_trace.json,
//                                              mlp_report.html
#include <torch/torch.h>

#include <string>

#include <traceml/traceml.hpp>  // traceml

int main(int argc, char** argv) {
  const std::string out_dir = argc > 1 ? argv[1] : ".";
  const int steps = 60, batch = 64;
  torch::manual_seed(0);
  const torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  torch::nn::Sequential model(torch::nn::Linear(512, 512), torch::nn::ReLU(), torch::nn::Linear(512, 512),
                              torch::nn::ReLU(), torch::nn::Linear(512, 10));
  model->to(device);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));

  traceml::profiler profiler(traceml::profiler_options::named("mlp").write_all_to(out_dir));  // traceml

  for (int step = 0; step < steps; ++step) {
    TRACEML_STEP();  // traceml
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
  profiler.finish();  // traceml: prints the table, writes the files (the destructor would too)
  return 0;
}
