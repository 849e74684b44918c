// The training loop: accumulation equals the large batch, the loss goes down, hooks are called in
// order, and the optimizer is torch's AdamW.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "helpers.hpp"

using qwen3_test::max_abs;
using qwen3_test::max_abs_diff;

namespace {
/// Records every hook as a short string.
struct recorder : traceml::callback {
  std::vector<std::string> events;
  void on_train_begin() override { events.push_back("train{"); }
  void on_train_end() override { events.push_back("}train"); }
  void on_step_begin() override { events.push_back("step{"); }
  void on_step_end() override { events.push_back("}step"); }
  void on_microbatch_begin() override { events.push_back("micro{"); }
  void on_microbatch_end() override { events.push_back("}micro"); }
  void on_phase_begin(traceml::phase_kind, const char* name) override { events.push_back(std::string(name) + "{"); }
  void on_phase_end(traceml::phase_kind, const char* name) override { events.push_back("}" + std::string(name)); }
};

/// Adapter gradients of one accumulated step of schedule `s` (fp32, tiny model, fixed init).
std::vector<torch::Tensor> step_grads(const char* s, bool checkpointing = false) {
  auto m = qwen3_test::tiny_model(17);
  m->set_gradient_checkpointing(checkpointing);
  auto adapters = qwen3::apply_lora(*m, qwen3::lora_options{});
  qwen3_test::randomize_lora_b(*m);
  qwen3::synthetic_tokens data(m->cfg().vocab_size, 24, 5);
  traceml::callback_list none;
  qwen3::accumulate_step(*m, data, qwen3::parse_schedule(s), /*global_step=*/2, none);
  std::vector<torch::Tensor> g;
  for (auto& p : adapters) g.push_back(p.grad().clone());
  return g;
}
}  // namespace

TEST_CASE("gradients after 1x4 equal those after 4x1 and 2x2", "[qwen3][train]") {
  const auto big = step_grads("4x1");
  for (const char* s : {"1x4", "2x2"}) {
    INFO("schedule " << s);
    const auto acc = step_grads(s);
    REQUIRE(acc.size() == big.size());
    double worst = 0;
    for (std::size_t i = 0; i < big.size(); ++i) {
      CHECK(max_abs(big[i]) > 0);
      worst = std::max(worst, max_abs_diff(acc[i], big[i]) / (max_abs(big[i]) + 1e-12));
    }
    CHECK(worst < 1e-5);  // fp32: only the order of summation differs
  }
}

TEST_CASE("accumulation with checkpointing gives the same gradients", "[qwen3][train][checkpoint]") {
  const auto plain = step_grads("1x4");
  const auto ckpt = step_grads("1x4", true);
  for (std::size_t i = 0; i < plain.size(); ++i)
    CHECK(max_abs_diff(ckpt[i], plain[i]) <= 1e-6 * (1 + max_abs(plain[i])));
}

TEST_CASE("training lowers the loss on a learnable sequence", "[qwen3][train]") {
  // Embeddings at std 0.02 with a frozen tied head cap the logits near +-1 (a floor near log(vocab)
  // for any adapter); a wider initialisation lets the adapters make confident predictions.
  auto m = qwen3_test::tiny_model(23, qwen3::model_options().init_std(0.5));
  const auto losses = qwen3_test::train_on_pattern(*m);
  REQUIRE(losses.size() == 30);
  for (auto l : losses) UNSCOPED_INFO(l);
  CHECK(losses.back() < 0.05 * losses.front());
  CHECK(losses.back() < 0.5);
}

TEST_CASE("the loop drives the trainer hooks in order", "[qwen3][train]") {
  auto m = qwen3_test::tiny_model();
  qwen3::adamw opt(qwen3::apply_lora(*m, qwen3::lora_options{}));
  qwen3::synthetic_tokens data(m->cfg().vocab_size, 8, 1);
  recorder rec;
  traceml::callback_list callbacks;
  callbacks.add(rec);
  qwen3::train_options t;
  t.sched = qwen3::parse_schedule("1x2");
  t.steps = 2;
  t.sync_each_step = true;
  const auto losses = qwen3::train(*m, opt, data, t, callbacks);
  CHECK(losses.size() == 2);
  const std::vector<std::string> micro{"micro{",   "dataloader{", "}dataloader", "forward{",
                                       "}forward", "backward{",   "}backward",   "}micro"};
  std::vector<std::string> expect{"train{"};
  for (int s = 0; s < 2; ++s) {
    expect.push_back("step{");
    for (int k = 0; k < 2; ++k) expect.insert(expect.end(), micro.begin(), micro.end());
    expect.insert(expect.end(), {"optimizer{", "}optimizer", "}step"});
  }
  expect.push_back("}train");
  CHECK(rec.events == expect);
  CHECK(opt.steps() == 2);
}

TEST_CASE("adamw equals torch::optim::AdamW, warm-up is linear", "[qwen3][optimizer]") {
  torch::manual_seed(8);
  std::vector<torch::Tensor> a{torch::randn({5, 3}, torch::requires_grad()), torch::randn({7}, torch::requires_grad())};
  std::vector<torch::Tensor> b;
  for (auto& t : a) b.push_back(t.detach().clone().requires_grad_(true));
  qwen3::adamw_options o;
  o.lr = 1e-2;
  o.weight_decay = 0.01;
  o.warmup_steps = 0;
  auto fused = GENERATE(true, false);
  o.fused = fused;
  qwen3::adamw mine(a, o);
  torch::optim::AdamW ref(b, torch::optim::AdamWOptions(1e-2).weight_decay(0.01).betas({0.9, 0.999}).eps(1e-8));
  for (int step = 0; step < 4; ++step) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      auto g = torch::randn(a[i].sizes());
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
    }
    mine.step();
    ref.step();
  }
  INFO("fused requested: " << fused << ", used: " << mine.fused());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(max_abs_diff(a[i], b[i]) < 1e-6);

  qwen3::adamw_options w;
  w.lr = 2e-4;
  w.warmup_steps = 5;
  qwen3::adamw sched({torch::zeros({1}, torch::requires_grad())}, w);
  CHECK(sched.lr_at(0) == Approx(0.4e-4));
  CHECK(sched.lr_at(4) == Approx(2e-4));
  CHECK(sched.lr_at(50) == Approx(2e-4));
}

TEST_CASE("zero_grad drops gradients, or zeroes them in place for CUDA-graph replays", "[qwen3][optimizer]") {
  std::vector<torch::Tensor> p{torch::ones({4}, torch::requires_grad()), torch::ones({2, 3}, torch::requires_grad())};
  qwen3::adamw opt(p);
  for (auto& t : p) t.mutable_grad() = torch::full(t.sizes(), 3.0);
  const auto* storage = p[1].grad().data_ptr<float>();
  opt.zero_grad(/*set_to_none=*/false);
  for (auto& t : p) {
    REQUIRE(t.grad().defined());
    CHECK(t.grad().abs().max().item<float>() == 0.0f);
  }
  CHECK(p[1].grad().data_ptr<float>() == storage);  // the same tensor a captured backward adds into
  opt.zero_grad();
  for (auto& t : p) CHECK_FALSE(t.grad().defined());
}

TEST_CASE("CUDA graphs are refused clearly where the build has none", "[qwen3][graphs]") {
#if !QWEN3_HAVE_CUDA_GRAPHS
  auto m = qwen3_test::tiny_model();
  CHECK_THROWS_WITH(qwen3::graphed_microbatch(*m, std::vector<torch::Tensor>{}, 1, 8, 1.0),
                    Catch::Contains("CUDA graphs need LibTorch 2.x built with CUDA"));
#else
  SUCCEED("this build has CUDA graphs; they are exercised on a GPU by the experiment (--cuda-graphs)");
#endif
}
