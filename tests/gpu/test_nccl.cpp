// [gpu][nccl] An NCCL collective inside a communication phase: ProcessGroupNCCL runs it on its own
// stream, and the current stream waits for it before the phase ends, so its work must land in that
// phase, none of it unattributed. One rank on one GPU (an in-process store), so that it runs wherever
// one GPU does; the 2-GPU run of the experiment is the example's (docs/accumulation.md). Without a
// device the program prints "SKIPPED: ..." and exits 77.
#define CATCH_CONFIG_RUNNER
// LibTorch defines CHECK (glog style, fatal): Catch2 macros go by their prefixed names here.
#define CATCH_CONFIG_PREFIX_ALL
#include <catch2/catch.hpp>

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_main.hpp"
#include "traceml/gpu/cupti_source.hpp"
#include "traceml/profiler.hpp"
#include "traceml/torch_adapter.hpp"

namespace {

namespace lt = traceml::libtorch;

CATCH_TEST_CASE("an NCCL all-reduce and all-gather inside a communication phase land there", "[gpu][nccl]") {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, 0, 1);
  auto o = torch::TensorOptions().device(torch::kCUDA);
  auto grads = torch::ones({1 << 22}, o), weights = torch::randn({2048, 2048}, o);
  auto gathered = torch::empty({1 << 22}, o);
  lt::synchronize();

  traceml::cupti_options co;
  co.current_stream = lt::current_stream_provider();
  co.overhead_budget = 0;  // every step
  co.sample_every = 1;
  auto src = std::make_unique<traceml::cupti_source>(co);
  CATCH_REQUIRE(src->ok());
  traceml::profiler_options po;
  po.run_name = "nccl";
  po.print_table = false;
  po.warmup_steps = 0;
  traceml::profiler prof(po);
  prof.set_gpu_source(std::move(src));
  for (int step = 0; step < 4; ++step) {
    TRACEML_STEP();
    {
      TRACEML_PHASE(backward);
      for (int i = 0; i < 5; ++i) weights = torch::mm(weights, weights).div_(2048.0);
    }
    {
      TRACEML_PHASE(communication);
      std::vector<at::Tensor> reduce{grads};
      c10d::AllreduceOptions avg;
      avg.reduceOp = c10d::ReduceOp::AVG;  // a real reduction kernel even on one rank
      group->allreduce(reduce, avg)->wait();
      std::vector<std::vector<at::Tensor>> out{{gathered}};
      std::vector<at::Tensor> in{grads};
      group->allgather(out, in)->wait();
    }
    lt::synchronize();
  }
  const auto& r = prof.finish();
  group->shutdown();
  for (const auto& st : r.steps) {
    CATCH_REQUIRE(st.gpu.has_value());
    const auto& g = *st.gpu;
    CATCH_CAPTURE(st.step);
    CATCH_CHECK(g.unattributed_kernels == 0);
    const traceml::phase_gpu_facts* comm = nullptr;
    for (const auto& p : g.phases)
      if (std::string(p.name) == "communication") comm = &p;
    CATCH_REQUIRE(comm);
    const auto& f = comm->facts;
    std::string names;
    for (const auto& k : comm->kernels) names += k.name + " x" + std::to_string(k.count) + "; ";
    std::printf("[nccl] step %d: communication %llu kernels (%.3f ms), copies %.3f ms: %s\n", st.step,
                static_cast<unsigned long long>(f.kernel_count), static_cast<double>(f.kernel_ns) / 1e6,
                static_cast<double>(f.memcpy_ns) / 1e6, names.c_str());
    CATCH_CHECK(f.kernel_count + (f.memcpy_ns > 0 ? 1 : 0) > 0);  // NCCL's work, wherever it ran, is here
    bool nccl_named = f.memcpy_ns > 0;
    for (const auto& k : comm->kernels)
      nccl_named =
          nccl_named || k.name.find("ncclDevKernel") != std::string::npos || k.name.find("nccl") != std::string::npos;
    CATCH_CHECK(nccl_named);
  }
}

}  // namespace

int main(int argc, char** argv) { return traceml_test::run_gpu_tests(argc, argv); }
