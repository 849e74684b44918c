// traceml::steps over a torch::data loader, the loop of LibTorch's examples:
//   for (auto& batch : traceml::steps(*data_loader)) { ... }
// The loader's iterator fetches lazily (its first batch at the first compare with end()), so what
// is timed must include that compare. The dataset's get() sleeps a known time per example.
#include <catch2/catch.hpp>

#include <torch/data.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "test_helpers.hpp"

using namespace traceml;
using traceml_test::reset_recorder;
using namespace std::chrono_literals;

namespace {
constexpr std::size_t examples = 40;
constexpr std::size_t batch_size = 4;  // 10 batches
constexpr auto per_example = 2ms;      // a fetch sleeps 8 ms

/// A dataset whose get() sleeps, as reading and decoding an example does.
class sleepy_dataset : public torch::data::datasets::Dataset<sleepy_dataset> {
 public:
  torch::data::Example<> get(std::size_t index) override {
    std::this_thread::sleep_for(per_example);
    return {torch::full({3}, static_cast<double>(index)), torch::full({1}, static_cast<double>(index % 2))};
  }
  torch::optional<std::size_t> size() const override { return examples; }
};

auto make_loader(std::size_t workers = 0) {
  return torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      sleepy_dataset().map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(batch_size).workers(workers));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

/// A profiler that prints nothing and counts every step (no warm-up).
profiler_options quiet(const char* name) {
  profiler_options o;
  o.run_name = name;
  o.print_table = false;
  o.warmup_steps = 0;
  return o;
}

const phase_summary* dataloader_of(const run_result& r) {
  for (const auto& p : r.summary.phases)
    if (p.kind == phase_kind::dataloader) return &p;
  return nullptr;
}

/// What the loop body does with a batch: a little tensor work, as forward would.
void consume(const torch::data::Example<>& batch) {
  TRACEML_PHASE(forward);
  const auto s = (batch.data * 2).sum();
  REQUIRE(s.item<double>() >= 0);
}
}  // namespace

TEST_CASE("steps over a torch::data loader: the dataloader phase holds the fetch, as timed by hand", "[steps][torch]") {
  reset_recorder();
  profiler prof(quiet("torch_loader"));
  auto loader = make_loader();
  // Each fetch timed by hand: from the end of one iteration's body to the start of the next (the
  // first from before the loop: the loader's begin() and the compare with end() that fetches).
  std::vector<double> by_hand;
  std::size_t batches = 0;
  auto body_end = std::chrono::steady_clock::now();
  for (auto& batch : traceml::steps(*loader)) {
    by_hand.push_back(ms_since(body_end));
    CHECK(batch.data.size(0) == static_cast<std::int64_t>(batch_size));
    consume(batch);
    ++batches;
    body_end = std::chrono::steady_clock::now();
  }
  const auto& r = prof.finish();
  CHECK(batches == examples / batch_size);
  CHECK(r.summary.steps == examples / batch_size);
  REQUIRE(r.steps.size() == examples / batch_size);
  const phase_summary* fetch = dataloader_of(r);
  REQUIRE(fetch != nullptr);
  REQUIRE(fetch->wall_ms.count == examples / batch_size);
  CHECK(fetch->wall_ms.min >= 8.0);  // the sleeps alone
  std::vector<double> ratios;
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const phase_time* f = r.steps[i].find(phase_kind::dataloader, "dataloader");
    REQUIRE(f != nullptr);
    INFO("step " << i << ": dataloader phase " << f->wall_ms << " ms, fetch by hand " << by_hand[i] << " ms");
    // By hand also holds the previous step's end (the first one starts the profiler's step worker).
    CHECK(f->wall_ms <= by_hand[i] * 1.01 + 0.01);
    ratios.push_back(f->wall_ms / by_hand[i]);
  }
  INFO("median of dataloader phase / hand-timed fetch: " << median(ratios));
  CHECK(median(ratios) == Approx(1.0).epsilon(0.10));
  // The fetch is most of each step: the step holds it.
  CHECK(r.summary.step_ms.median >= fetch->wall_ms.median);
  CHECK(fetch->share > 0.5);
}

TEST_CASE("steps over a torch::data loader: step counts, plain, accumulated, on break and on an exception",
          "[steps][torch]") {
  reset_recorder();
  SECTION("plain, with worker threads") {
    profiler prof(quiet("plain"));
    auto loader = make_loader(2);
    std::size_t n = 0;
    for (auto& batch : traceml::steps(*loader)) {
      consume(batch);
      ++n;
    }
    CHECK(n == 10);
    CHECK(prof.finish().summary.steps == 10);
  }
  SECTION("accumulation 4: 4 + 4 + 2 batches") {
    profiler prof(quiet("accumulated"));
    auto loader = make_loader();
    std::size_t n = 0;
    for (auto& batch : traceml::steps(*loader, 4)) {
      consume(batch);
      ++n;
    }
    CHECK(n == 10);
    const auto& r = prof.finish();
    CHECK(r.summary.steps == 3);
    REQUIRE(r.steps.size() == 3);
    CHECK(r.steps[0].microbatches == 4);
    CHECK(r.steps[1].microbatches == 4);
    CHECK(r.steps[2].microbatches == 2);
    const phase_summary* fetch = dataloader_of(r);
    REQUIRE(fetch != nullptr);
    CHECK(fetch->wall_ms.median >= 8.0 * 2);  // per step: two or four fetches
  }
  SECTION("break after 3 batches") {
    profiler prof(quiet("break"));
    auto loader = make_loader();
    std::size_t n = 0;
    for (auto& batch : traceml::steps(*loader)) {
      consume(batch);
      if (++n == 3) break;
    }
    CHECK(prof.finish().summary.steps == 3);
  }
  SECTION("an exception in the 5th batch") {
    profiler prof(quiet("exception"));
    auto loader = make_loader();
    std::size_t n = 0;
    CHECK_THROWS_AS(
        [&] {
          for (auto& batch : traceml::steps(*loader)) {
            consume(batch);
            if (++n == 5) throw std::runtime_error("loss is NaN");
          }
        }(),
        std::runtime_error);
    CHECK(n == 5);
    CHECK(prof.finish().summary.steps == 5);
  }
}
