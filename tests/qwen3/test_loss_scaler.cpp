// fp16 training pieces: the dynamic loss scaler (GradScaler's growth, back-off and unscale), AdamW's
// fp32 master weights for fp16 parameters, and the training loop with a scaler (same updates as
// without one; a step with an inf gradient is skipped and counted).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "helpers.hpp"

using qwen3_test::max_abs;
using qwen3_test::max_abs_diff;

namespace {

qwen3::loss_scaler_options scaler_options(double init, std::int64_t interval) {
  qwen3::loss_scaler_options o;
  o.init_scale = init;
  o.growth_interval = interval;
  return o;
}

std::vector<float> values(const torch::Tensor& t) {
  auto c = t.to(torch::kFloat32).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

/// Copies of the adapters at every step end.
struct adapter_snapshots : traceml::callback {
  explicit adapter_snapshots(std::vector<torch::Tensor> p) : params(std::move(p)) {}
  void on_step_end() override {
    std::vector<torch::Tensor> s;
    for (auto& p : params) s.push_back(p.detach().clone());
    taken.push_back(std::move(s));
  }
  std::vector<torch::Tensor> params;
  std::vector<std::vector<torch::Tensor>> taken;
};

/// Puts an inf into the first adapter gradient when the optimizer phase of step `poisoned` begins,
/// as an fp16 overflow in the backward would leave it.
struct poison_gradient : traceml::callback {
  poison_gradient(torch::Tensor p, int step) : param(std::move(p)), poisoned(step) {}
  void on_phase_begin(traceml::phase_kind kind, const char*) override {
    if (kind != traceml::phase_kind::optimizer) return;
    if (step++ == poisoned) param.mutable_grad().view({-1})[0] = std::numeric_limits<float>::infinity();
  }
  torch::Tensor param;
  int poisoned, step = 0;
};

}  // namespace

TEST_CASE("loss scaler: GradScaler's defaults", "[qwen3][fp16]") {
  qwen3::loss_scaler s;
  CHECK(s.scale_value() == 65536.0);
  CHECK(s.scale().item<float>() == 65536.0f);
  CHECK(s.scale().scalar_type() == torch::kFloat32);
  CHECK(s.options().growth_factor == 2.0);
  CHECK(s.options().backoff_factor == 0.5);
  CHECK(s.options().growth_interval == 2000);
}

TEST_CASE("loss scaler: growth after growth_interval good steps, back-off on inf/nan", "[qwen3][fp16]") {
  qwen3::loss_scaler s(torch::kCPU, scaler_options(8, 3));
  s.update(false);
  s.update(false);
  CHECK(s.scale_value() == 8);  // two good steps: not yet
  CHECK(s.good_steps_in_a_row() == 2);
  s.update(false);
  CHECK(s.scale_value() == 16);  // the third: x2, and the count restarts
  CHECK(s.good_steps_in_a_row() == 0);
  s.update(true);
  CHECK(s.scale_value() == 8);  // inf/nan: x0.5
  s.update(false);
  s.update(false);
  s.update(true);  // two good steps then a skip: the count restarts, no growth
  CHECK(s.scale_value() == 4);
  CHECK(s.scale().item<float>() == 4.0f);  // the device tensor follows
  for (int i = 0; i < 3; ++i) s.update(false);
  CHECK(s.scale_value() == 8);
  CHECK(s.steps() == 10);
  CHECK(s.skipped_steps() == 2);
  CHECK(s.skipped_step_indices() == std::vector<std::int64_t>{3, 6});
}

TEST_CASE("loss scaler: growth stops where fp32 would overflow", "[qwen3][fp16]") {
  const double top = std::ldexp(1.0, 127);  // 2^128 is beyond fp32
  qwen3::loss_scaler s(torch::kCPU, scaler_options(top, 1));
  s.update(false);
  CHECK(s.scale_value() == top);
  s.update(true);
  CHECK(s.scale_value() == std::ldexp(1.0, 126));
}

TEST_CASE("loss scaler: unscale divides every gradient by the scale and reports inf/nan", "[qwen3][fp16]") {
  qwen3::loss_scaler s(torch::kCPU, scaler_options(4, 2000));
  auto a = torch::tensor({2.0f, -4.0f}), b = torch::tensor({8.0f});
  CHECK_FALSE(s.unscale_and_check({a, b}));
  CHECK(values(a) == std::vector<float>{0.5f, -1.0f});
  CHECK(values(b) == std::vector<float>{2.0f});

  const float special = GENERATE(std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN());
  auto c = torch::tensor({12.0f}), d = torch::tensor({1.0f, special});
  CHECK(s.unscale_and_check({c, d}));
  CHECK(values(c) == std::vector<float>{3.0f});  // the others are still unscaled (they are dropped anyway)
  CHECK(s.unscale_and_check({}) == false);

  SECTION("fp16 gradients are refused") {
    CHECK_THROWS_WITH(s.unscale_and_check({torch::ones({2}, torch::kHalf)}), Catch::Contains("fp16 gradients"));
  }
}

TEST_CASE("loss scaler: options out of range are refused by name", "[qwen3][fp16]") {
  qwen3::loss_scaler_options o;
  o.growth_factor = 1.0;
  CHECK_THROWS_WITH(qwen3::loss_scaler(torch::kCPU, o), Catch::Contains("growth_factor must be > 1, got 1"));
  o = {};
  o.backoff_factor = 1.0;
  CHECK_THROWS_WITH(qwen3::loss_scaler(torch::kCPU, o), Catch::Contains("backoff_factor"));
  o = {};
  o.init_scale = 1e39;  // inf in fp32
  CHECK_THROWS_WITH(qwen3::loss_scaler(torch::kCPU, o), Catch::Contains("init_scale"));
  o = {};
  o.growth_interval = 0;
  CHECK_THROWS_WITH(qwen3::loss_scaler(torch::kCPU, o), Catch::Contains("growth_interval"));
}

TEST_CASE("adamw keeps fp32 master weights for fp16 parameters", "[qwen3][fp16][optimizer]") {
  // Weight 2.0: its fp16 neighbours are 2 +- 2^-10 (below) / 2^-9 (above). AdamW's first step moves
  // by lr (m/sqrt(v) = sign(g)), here 1e-4: the fp32 master moves, the fp16 copy cannot yet.
  auto p = torch::tensor({2.0f, -1.25f}).to(torch::kHalf).requires_grad_(true);
  qwen3::adamw_options o;
  o.lr = 1e-4;
  o.warmup_steps = 0;
  qwen3::adamw opt({p}, o);
  REQUIRE(opt.master_weights()[0].defined());
  CHECK(opt.master_weights()[0].scalar_type() == torch::kFloat32);

  qwen3::loss_scaler s(torch::kCPU, scaler_options(1024, 2000));
  // Scaled gradients as the backward leaves them: g x 1024 in fp16.
  p.mutable_grad() = torch::tensor({0.5f * 1024, -3.0f * 1024}).to(torch::kHalf);
  CHECK(opt.step(&s));
  const auto moved = [&] {
    const auto w = values(opt.master_weights()[0]);
    CHECK(w[0] == Approx(2.0 - 1e-4).margin(3e-7));  // 3e-7: about one fp32 ulp at 2
    CHECK(w[1] == Approx(-1.25 + 1e-4).margin(3e-7));
  };
  moved();
  CHECK(values(p) == std::vector<float>{2.0f, -1.25f});  // both updates below half an fp16 ulp
  CHECK(opt.steps() == 1);

  SECTION("a gradient with an inf: nothing is updated, the step does not count") {
    p.mutable_grad() = torch::tensor({std::numeric_limits<float>::infinity(), 1.0f}).to(torch::kHalf);
    CHECK_FALSE(opt.step(&s));
    moved();
    CHECK(opt.steps() == 1);
  }
  SECTION("after ten steps the fp16 weight has moved too, to the master rounded") {
    for (int i = 0; i < 9; ++i) {
      p.mutable_grad() = torch::tensor({0.5f * 1024, -3.0f * 1024}).to(torch::kHalf);
      CHECK(opt.step(&s));
    }
    const auto master = opt.master_weights()[0];
    CHECK(master[0].item<float>() == Approx(2.0 - 10e-4).margin(3e-6));
    CHECK(values(p) == values(master.to(torch::kHalf)));
    CHECK(p[0].item<float>() < 2.0f);
  }
}

TEST_CASE("training with a loss scaler makes the same updates as without", "[qwen3][fp16][train]") {
  // fp32 on the CPU (LibTorch 1.13 has no fp16 GEMM there): scaling by a power of two and unscaling
  // round nothing, so the adapters end where the unscaled run ends.
  const auto run = [](qwen3::loss_scaler* scaler) {
    auto m = qwen3_test::tiny_model(31);
    qwen3::adamw opt(qwen3::apply_lora(*m, qwen3::lora_options{}));
    qwen3::synthetic_tokens data(m->cfg().vocab_size, 16, 3);
    qwen3::train_options t;
    t.sched = qwen3::parse_schedule("1x2");
    t.steps = 3;
    t.scaler = scaler;
    traceml::callback_list none;
    const auto losses = qwen3::train(*m, opt, data, t, none);
    std::vector<torch::Tensor> out;
    for (auto& p : opt.params()) out.push_back(p.detach().clone());
    return std::make_pair(losses, out);
  };
  qwen3::loss_scaler scaler;
  const auto plain = run(nullptr), scaled = run(&scaler);
  CHECK(scaled.first == plain.first);
  for (std::size_t i = 0; i < plain.second.size(); ++i)
    CHECK(max_abs_diff(scaled.second[i], plain.second[i]) <= 1e-6 * max_abs(plain.second[i]));
  CHECK(scaler.skipped_steps() == 0);
  CHECK(scaler.steps() == 3);
  CHECK(scaler.scale_value() == 65536.0);
}

TEST_CASE("a step with an inf gradient is skipped, counted, and the scale backs off", "[qwen3][fp16][train]") {
  auto m = qwen3_test::tiny_model(37);
  const auto adapters = qwen3::apply_lora(*m, qwen3::lora_options{});
  qwen3::adamw opt(adapters);
  qwen3::synthetic_tokens data(m->cfg().vocab_size, 16, 4);
  qwen3::loss_scaler scaler(torch::kCPU, scaler_options(1024, 2000));
  adapter_snapshots snaps(adapters);
  poison_gradient poison(adapters[0], /*step=*/1);
  traceml::callback_list callbacks;
  callbacks.add(poison);
  callbacks.add(snaps);
  qwen3::train_options t;
  t.sched = qwen3::parse_schedule("2x1");
  t.steps = 3;
  t.scaler = &scaler;
  const auto losses = qwen3::train(*m, opt, data, t, callbacks);
  REQUIRE(losses.size() == 3);
  REQUIRE(snaps.taken.size() == 3);
  for (std::size_t i = 0; i < adapters.size(); ++i) {
    CHECK(torch::equal(snaps.taken[1][i], snaps.taken[0][i]));  // step 1 skipped: nothing moved
  }
  CHECK(max_abs_diff(snaps.taken[2][1], snaps.taken[1][1]) > 0);  // step 2 updates again
  CHECK(scaler.skipped_step_indices() == std::vector<std::int64_t>{1});
  CHECK(scaler.scale_value() == 512);
  CHECK(opt.steps() == 2);
  for (double l : losses) CHECK(std::isfinite(l));  // the step's loss is still reported
}

TEST_CASE("fp16 on the GPU: fused unscale, and training follows the fp32 losses", "[qwen3][fp16][gpu]") {
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: no CUDA device visible to LibTorch");
    return;
  }
  {
    qwen3::loss_scaler s(torch::kCUDA, scaler_options(4, 2000));
    auto a = torch::tensor({2.0f, -4.0f}).cuda(), b = torch::tensor({8.0f}).cuda();
    CHECK_FALSE(s.unscale_and_check({a, b}));
    CHECK(values(a.cpu()) == std::vector<float>{0.5f, -1.0f});
    CHECK(values(b.cpu()) == std::vector<float>{2.0f});
    auto c = torch::tensor({1.0f, std::numeric_limits<float>::quiet_NaN()}).cuda();
    CHECK(s.unscale_and_check({c}));
  }
  const auto run = [](torch::Dtype dtype, qwen3::loss_scaler* scaler) {
    // The same initial weights for both dtypes: built in fp32, then rounded.
    auto m = qwen3_test::tiny_model(23, qwen3::model_options().init_std(0.5).device(torch::kCUDA));
    m->to(dtype);
    qwen3::lora_options lo;
    lo.r = 8;
    qwen3::adamw_options ao;
    ao.lr = 1e-2;
    ao.warmup_steps = 2;
    qwen3::adamw opt(qwen3::apply_lora(*m, lo), ao);
    qwen3::pattern_tokens data(m->cfg().vocab_size, 32, 16);
    qwen3::train_options t;
    t.sched = qwen3::parse_schedule("2x2");
    t.steps = 30;
    t.scaler = scaler;
    traceml::callback_list none;
    return qwen3::train(*m, opt, data, t, none);
  };
  qwen3::loss_scaler scaler(torch::kCUDA);
  const auto fp16 = run(torch::kHalf, &scaler), fp32 = run(torch::kFloat32, nullptr);
  for (std::size_t i = 0; i < fp16.size(); ++i)
    UNSCOPED_INFO("step " << i << ": fp16 " << fp16[i] << ", fp32 " << fp32[i]);
  CHECK(fp16.front() == Approx(fp32.front()).epsilon(1e-2));
  CHECK(fp32.back() < 0.1 * fp32.front());
  CHECK(fp16.back() < 0.1 * fp16.front());  // it learns as the fp32 run does
  CHECK(scaler.steps() == 30);
  CHECK(scaler.skipped_steps() < 10);
}
