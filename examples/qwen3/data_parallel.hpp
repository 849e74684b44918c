// qwen3 example: data parallelism across processes, done for the adapters as DDP does it. Every rank
// trains on its own examples; once per optimizer step, after the last micro-batch (accumulation needs
// no sync before it), the gradients of the trainable parameters are averaged over the ranks by one
// all-reduce of their concatenation, inside a communication phase. So 1x4 pays one all-reduce per
// step, as 4x1 does: accumulation saves the syncs a per-micro-batch all-reduce would cost.
//
// Rendezvous as torchrun sets it up: a c10d TCPStore at MASTER_ADDR:MASTER_PORT, served by rank 0.
// The process group is c10d's Gloo (LibTorch builds have it; its header needs Gloo's own headers at
// build time, QWEN3_WITH_GLOO). CUDA gradients travel through host memory on their way to Gloo.
//
//   qwen3::data_parallel dp(opts);                  // blocks until every rank has joined
//   dp.average_gradients(optimizer.params());       // each step, after the last micro-batch
//   traceml::gather_ranks(dp.store(), ...);         // the ranks' steps to rank 0 (distributed.hpp)
#pragma once
#include <torch/torch.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if QWEN3_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

namespace qwen3 {

struct data_parallel_options {
  int rank = 0;
  int world_size = 1;                     ///< 1: not data-parallel
  std::string master_addr = "127.0.0.1";  ///< where rank 0 serves the store
  int master_port = 29500;
  int timeout_s = 300;  ///< joining, and each all-reduce
  bool on() const noexcept { return world_size > 1; }
};

class data_parallel {
 public:
  /// Joins the run: connects to (rank 0: serves) the store and forms the process group. Throws
  /// std::runtime_error naming what failed (a build without Gloo, an address that cannot be reached).
  explicit data_parallel(const data_parallel_options& o) : o_(o) {
    if (o.world_size < 2 || o.rank < 0 || o.rank >= o.world_size)
      throw std::invalid_argument("data parallelism: rank " + std::to_string(o.rank) + " of a world of " +
                                  std::to_string(o.world_size) + " (need 0 <= rank < world size, world size >= 2)");
#if QWEN3_WITH_GLOO
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(o.master_port);
    so.isServer = o.rank == 0;
    so.numWorkers = o.world_size;
    so.waitWorkers = false;
    so.timeout = std::chrono::seconds(o.timeout_s);
    try {
      store_ = c10::make_intrusive<c10d::TCPStore>(o.master_addr, so);
      auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(o.timeout_s));
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(o.master_addr));
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, o.rank, o.world_size, options);
    } catch (const std::exception& e) {
      // LibTorch's errors carry a backtrace after their first line: the first line says it.
      const std::string what = e.what();
      throw std::runtime_error("data parallelism: rank " + std::to_string(o.rank) + " could not join the run at " +
                               o.master_addr + ":" + std::to_string(o.master_port) + ": " +
                               what.substr(0, what.find('\n')) + " (waited up to " + std::to_string(o.timeout_s) +
                               " s for all " + std::to_string(o.world_size) + " ranks: did every rank start?)");
    }
#else
    throw std::runtime_error(
        "data parallelism needs c10d's Gloo process group, and this build had no Gloo headers (Debian: libgloo-dev)");
#endif
  }

  const data_parallel_options& options() const noexcept { return o_; }
  c10d::Store& store() { return *store_; }

  /// Averages the gradients of `params` over the ranks: one all-reduce (sum) of their concatenation,
  /// divided by the world size. Parameters without a gradient take part as zeros, so that every rank
  /// sends the same layout.
  void average_gradients(const std::vector<torch::Tensor>& params) {
#if QWEN3_WITH_GLOO
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> flat_parts;
    flat_parts.reserve(params.size());
    for (const auto& p : params) {
      const auto g = p.grad();
      flat_parts.push_back((g.defined() ? g : torch::zeros_like(p)).reshape(-1).to(torch::kCPU, torch::kFloat32));
    }
    std::vector<torch::Tensor> buffer{torch::cat(flat_parts)};
    group_->allreduce(buffer)->wait(std::chrono::milliseconds(1000LL * o_.timeout_s));
    buffer[0].div_(static_cast<double>(o_.world_size));
    std::int64_t at = 0;
    for (const auto& p : params) {
      const auto n = p.numel();
      auto mean = buffer[0].narrow(0, at, n).view(p.sizes()).to(p.device(), p.scalar_type());
      if (p.grad().defined())
        p.mutable_grad().copy_(mean);
      else
        p.mutable_grad() = mean;
      at += n;
    }
#else
    (void)params;
#endif
  }

 private:
  data_parallel_options o_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
#if QWEN3_WITH_GLOO
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
#endif
};

}  // namespace qwen3
