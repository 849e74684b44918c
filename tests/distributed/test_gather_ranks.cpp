// The ranks of a data-parallel run gathered to rank 0 through a c10d TCPStore (distributed.hpp), in
// real processes: each other rank is a child process (forked before any thread starts) with its own
// profiler. Inside a communication phase every rank waits for the slowest, as in DDP: a gradient
// all-reduce through c10d's ProcessGroupGloo where Gloo's headers were found (TRACEML_TEST_GLOO;
// Debian: libgloo-dev), and a barrier on the store in every build.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if TRACEML_TEST_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include "data_parallel.hpp"  // the example's gradient averaging (examples/qwen3)
#endif
#include <traceml/distributed.hpp>
#include <traceml/phase.hpp>
#include <traceml/profiler.hpp>

namespace {

/// A port no one listens on now (bound to port 0, read back, closed; the store binds it right after).
std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

c10::intrusive_ptr<c10d::TCPStore> connect_store(std::uint16_t port, int rank) {
  c10d::TCPStoreOptions o;
  o.port = port;
  o.isServer = rank == 0;
  o.waitWorkers = false;
  o.timeout = std::chrono::seconds(30);  // a client retries until the server is up
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
}

/// Every rank adds itself, then waits until all have (the all-reduce's synchronisation).
void store_barrier(c10d::Store& store, const std::string& name, int world_size) {
  store.add(name, 1);
  while (store.add(name, 0) < world_size) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

struct rank_plan {
  int world_size = 3;
  int steps = 6;
  enum class sync { none, store_barrier, gloo_allreduce } communication = sync::store_barrier;
  std::function<int(int)> compute_ms;  ///< per rank
};

/// One rank's training loop and its part of the gather; returns rank 0's merge.
std::optional<traceml::rank_merge> run_rank(std::uint16_t port, int rank, const rank_plan& plan,
                                            std::chrono::milliseconds timeout) {
  auto store = connect_store(port, rank);
  traceml::profiler_options po;
  po.run_name = "rank" + std::to_string(rank);
  po.print_table = false;
#if TRACEML_TEST_GLOO
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  torch::Tensor grad;
  if (plan.communication == rank_plan::sync::gloo_allreduce) {
    auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(30));
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, plan.world_size, options);
    grad = torch::full({1 << 16}, static_cast<float>(rank + 1));
  }
#endif
  traceml::profiler prof(po);
  for (int k = 0; k < plan.steps; ++k) {
    TRACEML_STEP();
    {
      TRACEML_PHASE(forward);
      std::this_thread::sleep_for(std::chrono::milliseconds(plan.compute_ms(rank)));
    }
    if (plan.communication == rank_plan::sync::store_barrier) {
      TRACEML_PHASE(communication);
      store_barrier(*store, "step" + std::to_string(k), plan.world_size);
    }
#if TRACEML_TEST_GLOO
    if (plan.communication == rank_plan::sync::gloo_allreduce) {
      TRACEML_PHASE(communication);
      std::vector<torch::Tensor> tensors{grad};
      group->allreduce(tensors)->wait();
      grad.fill_(static_cast<float>(rank + 1));  // the next step's gradient
    }
#endif
  }
  const auto& run = prof.finish();
  return traceml::gather_ranks(*store, "test", traceml::rank_steps_of(run, rank), plan.world_size, timeout,
                               /*warmup=*/1);
}

/// Forks ranks 1..world_size-1 (those that `spawn` lets live; the others exit at once with status 3,
/// as a rank that died before it reported), runs rank 0 here, and returns its merge and the children's
/// exit statuses.
struct launch_result {
  std::optional<traceml::rank_merge> merged;
  std::vector<int> child_status;
  double rank0_seconds = 0;
};
launch_result launch(const rank_plan& plan, std::chrono::milliseconds timeout, const std::function<bool(int)>& spawn) {
  const std::uint16_t port = free_port();
  std::vector<pid_t> children;
  for (int r = 1; r < plan.world_size; ++r) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // the child: never returns into the test framework
      if (!spawn(r)) ::_exit(3);
      try {
        run_rank(port, r, plan, timeout);
        ::_exit(0);
      } catch (...) {
        ::_exit(1);
      }
    }
    children.push_back(pid);
  }
  launch_result out;
  const auto t0 = std::chrono::steady_clock::now();
  out.merged = run_rank(port, 0, plan, timeout);
  out.rank0_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    out.child_status.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return out;
}

}  // namespace

TEST_CASE("three ranks: rank 0 gets every rank's steps, the slow rank is found and the others wait for it",
          "[distributed]") {
  rank_plan plan;
  plan.compute_ms = [](int rank) { return rank == 1 ? 30 : 2; };
  const auto got = launch(plan, std::chrono::seconds(30), [](int) { return true; });
  CHECK((got.child_status == std::vector<int>{0, 0}));
  REQUIRE(got.merged);
  const auto& m = *got.merged;
  CHECK(m.missing.empty());
  REQUIRE(m.steps.size() == 5);  // 6 steps, 1 warm-up
  CHECK(m.has_communication);
  // Sleeps on a loaded machine can overshoot: a step may go the other way, not the majority.
  CHECK(m.ranks[1].slowest_on >= 4);
  CHECK(m.most_often_slowest == 1);
  // Rank 1 computes 28 ms more per step; the others wait that long inside communication.
  CHECK(m.ranks[0].wait_ms.median > 20);
  CHECK(m.ranks[2].wait_ms.median > 20);
  CHECK(m.ranks[1].wait_ms.median == 0);
  CHECK(m.ranks[0].communication_ms.median > 20);
  CHECK(m.compute_skew_ms.median > 20);
  // They leave the barrier together: their step times are far closer than their compute.
  CHECK(m.step_skew_ms.median < m.compute_skew_ms.median / 2);
  CHECK(traceml::format_rank_table(m).find("rank 1 was the slowest on " + std::to_string(m.ranks[1].slowest_on) +
                                           " of 5 steps") != std::string::npos);
}

#if TRACEML_TEST_GLOO
TEST_CASE("three ranks with a Gloo all-reduce: the slow rank is found, the others wait for it in communication",
          "[distributed][gloo]") {
  rank_plan plan;
  plan.communication = rank_plan::sync::gloo_allreduce;
  plan.compute_ms = [](int rank) { return rank == 2 ? 30 : 2; };
  const auto got = launch(plan, std::chrono::seconds(30), [](int) { return true; });
  CHECK((got.child_status == std::vector<int>{0, 0}));
  REQUIRE(got.merged);
  const auto& m = *got.merged;
  CHECK(m.missing.empty());
  REQUIRE(m.steps.size() == 5);
  CHECK(m.ranks[2].slowest_on >= 4);
  CHECK(m.most_often_slowest == 2);
  CHECK(m.ranks[0].wait_ms.median > 20);
  CHECK(m.ranks[1].communication_ms.median > 20);  // the all-reduce waited for rank 2
  CHECK(m.ranks[2].communication_ms.median < m.ranks[1].communication_ms.median);
  CHECK(m.step_skew_ms.median < m.compute_skew_ms.median / 2);
}
#endif  // without Gloo's headers CTest lists this test as skipped (CMakeLists.txt)

TEST_CASE("a rank that dies before it reports is named missing after the timeout, the others are merged",
          "[distributed]") {
  rank_plan plan;
  plan.communication =
      rank_plan::sync::none;  // an all-reduce would fail on the dead rank; only the gather is under test
  plan.compute_ms = [](int rank) { return rank == 1 ? 20 : 1; };
  const auto got = launch(plan, std::chrono::milliseconds(1500), [](int r) { return r != 2; });
  CHECK((got.child_status == std::vector<int>{0, 3}));
  REQUIRE(got.merged);
  const auto& m = *got.merged;
  CHECK(m.missing == std::vector<int>{2});
  CHECK(m.ranks[1].present);
  CHECK(m.steps.size() == 5);
  CHECK(m.ranks[1].slowest_on >= 4);
  CHECK(got.rank0_seconds < 10);  // the timeout, not a hang
  CHECK(traceml::format_rank_table(m).find("missing: rank 2") != std::string::npos);
}

TEST_CASE("steps survive the store's encoding exactly, anything else is refused", "[distributed]") {
  traceml::rank_steps r{2, {{0, 12.345678901234567, 0}, {1, 0.1, 1e-9}, {7, 1e6, 3.25}}};
  const auto back = traceml::detail::decode_rank_steps(traceml::detail::encode_rank_steps(r), 2);
  REQUIRE(back);
  REQUIRE(back->steps.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back->steps[i].step == r.steps[i].step);
    CHECK(back->steps[i].wall_ms == r.steps[i].wall_ms);  // %.17g: exact
    CHECK(back->steps[i].communication_ms == r.steps[i].communication_ms);
  }
  const auto bytes = [](const std::string& s) { return std::vector<std::uint8_t>(s.begin(), s.end()); };
  CHECK_FALSE(traceml::detail::decode_rank_steps(bytes("1 2 3\n"), 0));                          // no header
  CHECK_FALSE(traceml::detail::decode_rank_steps(bytes("traceml.rank_steps/1\n1 2\n"), 0));      // a field short
  CHECK_FALSE(traceml::detail::decode_rank_steps(bytes("traceml.rank_steps/1\n1 2 3"), 0));      // cut
  CHECK(traceml::detail::decode_rank_steps(bytes("traceml.rank_steps/1\n"), 0)->steps.empty());  // no steps
}

#if TRACEML_TEST_GLOO
TEST_CASE("the example's data parallelism averages every rank's gradients, a missing gradient counting as zeros",
          "[distributed]") {
  const std::uint16_t port = free_port();
  // Rank r: a [2, 3] weight whose gradient is r + 1 everywhere (a bf16 one, as the trainer's adapters
  // may be), and a vector whose gradient rank 0 never made (a parameter unused on that rank).
  const auto train_rank = [port](int rank) {
    qwen3::data_parallel_options o;
    o.rank = rank;
    o.world_size = 2;
    o.master_port = port;
    o.timeout_s = 30;
    qwen3::data_parallel dp(o);
    auto w = torch::zeros({2, 3}, torch::kBFloat16).requires_grad_();
    auto v = torch::zeros({4}).requires_grad_();
    w.mutable_grad() = torch::full({2, 3}, static_cast<float>(rank + 1), torch::kBFloat16);
    if (rank == 1) v.mutable_grad() = torch::full({4}, 8.0f);
    dp.average_gradients({w, v});
    return std::make_pair(w.grad().to(torch::kFloat32), v.grad());
  };
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      const auto [w, v] = train_rank(1);
      const bool right = torch::allclose(w, torch::full({2, 3}, 1.5f)) && torch::allclose(v, torch::full({4}, 4.0f));
      ::_exit(right ? 0 : 4);
    } catch (...) {
      ::_exit(1);
    }
  }
  const auto [w, v] = train_rank(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // rank 1 got the same averages
  CHECK(w.dtype() == torch::kFloat32);
  CHECK(torch::allclose(w, torch::full({2, 3}, 1.5f)));  // (1 + 2) / 2
  CHECK(torch::allclose(v, torch::full({4}, 4.0f)));     // (0 + 8) / 2
}
#endif
