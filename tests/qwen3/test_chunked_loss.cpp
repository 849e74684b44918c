// The chunked linear cross-entropy (chunked_loss.hpp): a hand-computed case, then parity with the
// full-logits form (loss and gradients for hidden states and head weight) for chunks that do and do
// not divide the token count, with ignored targets, and inside the model (the LoRA gradients).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "helpers.hpp"

using qwen3_test::max_abs;
using qwen3_test::max_abs_diff;

namespace {

struct loss_case {
  torch::Tensor hidden, weight, targets;
};

/// Random hidden states [tokens, hidden], head [vocab, hidden], targets with three ignored (-100).
loss_case random_case(torch::Dtype dtype = torch::kFloat32, std::int64_t tokens = 13, std::int64_t hidden = 8,
                      std::int64_t vocab = 37) {
  torch::manual_seed(11);
  loss_case c{torch::randn({tokens, hidden}).to(dtype), torch::randn({vocab, hidden}).mul(0.5).to(dtype),
              torch::randint(vocab, {tokens}, torch::kInt64)};
  for (std::int64_t i : {std::int64_t{2}, std::int64_t{7}, tokens - 1}) c.targets[i] = -100;
  return c;
}

struct loss_result {
  torch::Tensor loss, grad_hidden, grad_weight;
};

/// The loss (chunk 0: the full-logits form) and the gradients of grad_output * loss.
loss_result run(const loss_case& c, std::int64_t chunk, double grad_output = 1.0) {
  auto h = c.hidden.clone().requires_grad_(true);
  auto w = c.weight.clone().requires_grad_(true);
  auto loss = chunk > 0 ? qwen3::chunked_linear_cross_entropy(h, w, c.targets, chunk)
                        : qwen3::linear_cross_entropy(h, w, c.targets);
  (loss * grad_output).backward();
  return {loss.detach(), h.grad(), w.grad()};
}

}  // namespace

TEST_CASE("chunked loss: a hand-computed case", "[qwen3][loss]") {
  // hidden [[1], [0]], head [[1], [0]]: logits [[1, 0], [0, 0]], targets [0, 1].
  // loss = (log(1 + e^-1) + log 2) / 2; dL/dh_t = (softmax_t - onehot_t) W / 2:
  // row 0: (sigmoid(1) - 1) / 2 = -0.1344707, row 1: 0.5 / 2 = 0.25.
  auto h = torch::tensor({1.0f, 0.0f}).reshape({2, 1}).requires_grad_(true);
  auto w = torch::tensor({1.0f, 0.0f}).reshape({2, 1});
  auto t = torch::tensor({0, 1}, torch::kInt64);
  auto loss = qwen3::chunked_linear_cross_entropy(h, w, t, /*chunk=*/1);
  CHECK(loss.item<double>() == Approx((std::log1p(std::exp(-1.0)) + std::log(2.0)) / 2).epsilon(1e-6));
  loss.backward();
  CHECK(h.grad()[0][0].item<double>() == Approx((1 / (1 + std::exp(-1.0)) - 1) / 2).epsilon(1e-6));
  CHECK(h.grad()[1][0].item<double>() == Approx(0.25).epsilon(1e-6));
}

TEST_CASE("chunked loss equals the full-logits loss, gradients included", "[qwen3][loss]") {
  const auto c = random_case();
  // 13 tokens: chunks 1 and 13 divide the count, 4 and 5 leave a remainder, 64 is one short chunk.
  const std::int64_t chunk = GENERATE(1, 4, 5, 13, 64);
  // 1, and what the trainer multiplies the loss by at 4x1 with fp16: 1/A x the initial loss scale.
  const double grad_output = GENERATE(1.0, 65536.0 / 4);
  INFO("chunk " << chunk << ", grad_output " << grad_output);
  const auto full = run(c, 0, grad_output);
  const auto chunked = run(c, chunk, grad_output);
  CHECK(chunked.loss.scalar_type() == torch::kFloat32);
  CHECK(chunked.loss.item<double>() == Approx(full.loss.item<double>()).epsilon(1e-6));
  CHECK(max_abs_diff(chunked.grad_hidden, full.grad_hidden) <= 1e-6 * max_abs(full.grad_hidden));
  CHECK(max_abs_diff(chunked.grad_weight, full.grad_weight) <= 1e-6 * max_abs(full.grad_weight));
  // Ignored targets: no gradient for their hidden states.
  for (std::int64_t i : {2, 7, 12}) CHECK(max_abs(chunked.grad_hidden[i]) == 0.0);
  CHECK(max_abs(chunked.grad_hidden[0]) > 0);
}

TEST_CASE("chunked loss in bf16 agrees with the full-logits form within bf16 rounding", "[qwen3][loss]") {
  const auto c = random_case(torch::kBFloat16, 40, 16, 300);
  const auto full = run(c, 0), chunked = run(c, 16);
  CHECK(chunked.grad_hidden.scalar_type() == torch::kBFloat16);
  CHECK(chunked.loss.item<double>() == Approx(full.loss.item<double>()).epsilon(1e-4));  // fp32 from the same logits

  // A gradient element is a sum of terms of both signs that nearly cancel (softmax - onehot), and the
  // two forms round at different points (chunked_loss.hpp, "Rounding"): they may differ by a few units
  // of bf16's rounding (u = 2^-8) of the terms' magnitudes, not of the (small) result. The terms'
  // magnitudes, in fp32 from the same bf16 inputs: P|W| + |W[target]| for dL/dh, P^T|h| + scatter|h|
  // for dL/dW, over the counted targets (P: the softmax of the logits). A logit may also round to a
  // neighbouring bf16 value in one GEMM and not the other (2u|z|), which scales P by up to 2u max|z|.
  const auto h = c.hidden.to(torch::kFloat32), w = c.weight.to(torch::kFloat32);
  const auto valid = c.targets.ne(-100);
  const auto safe_t = c.targets.clamp_min(0);
  const auto keep = valid.unsqueeze(1).to(torch::kFloat32);
  const auto logits = torch::mm(h, w.t());
  const auto p = torch::softmax(logits, -1) * keep;
  const double count = valid.sum().item<double>();
  const auto terms_h = (torch::mm(p, w.abs()) + torch::embedding(w.abs(), safe_t) * keep) / count;
  const auto terms_w = (torch::mm(p.t(), h.abs()) + torch::zeros_like(w).index_add_(0, safe_t, h.abs() * keep)) / count;
  const double u = std::ldexp(1.0, -8);
  const double allowed = u * (4 + 2 * logits.abs().max().item<double>());  // per unit of the terms' magnitude
  const auto excess = [&](const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& terms) {
    return ((a.to(torch::kFloat32) - b.to(torch::kFloat32)).abs() / terms.clamp_min(1e-30)).max().item<double>();
  };
  const double worst_h = excess(chunked.grad_hidden, full.grad_hidden, terms_h);
  const double worst_w = excess(chunked.grad_weight, full.grad_weight, terms_w);
  INFO("largest difference per unit of the terms' magnitude: dL/dh " << worst_h << ", dL/dW " << worst_w << ", allowed "
                                                                     << allowed);
  CHECK(worst_h <= allowed);
  CHECK(worst_w <= allowed);
  // And the bound is not vacuous: it is far below the gradients themselves.
  CHECK(allowed * max_abs(terms_h) < 0.5 * max_abs(full.grad_hidden));
}

TEST_CASE("chunked loss without gradients, all targets ignored, bad chunk", "[qwen3][loss]") {
  const auto c = random_case();
  SECTION("under NoGradGuard: the same loss, no graph") {
    auto h = c.hidden.clone().requires_grad_(true);
    torch::NoGradGuard no_grad;
    auto loss = qwen3::chunked_linear_cross_entropy(h, c.weight, c.targets, 4);
    CHECK_FALSE(loss.requires_grad());
    CHECK(loss.item<double>() ==
          Approx(qwen3::linear_cross_entropy(h, c.weight, c.targets).item<double>()).epsilon(1e-6));
  }
  SECTION("every target ignored: nan, as nll_loss") {
    auto none = torch::full({c.hidden.size(0)}, -100, torch::kInt64);
    CHECK(std::isnan(qwen3::chunked_linear_cross_entropy(c.hidden, c.weight, none, 4).item<double>()));
    CHECK(std::isnan(qwen3::linear_cross_entropy(c.hidden, c.weight, none).item<double>()));
  }
  SECTION("chunk 0 is refused with its value") {
    CHECK_THROWS_WITH(qwen3::chunked_linear_cross_entropy(c.hidden, c.weight, c.targets, 0),
                      Catch::Contains("chunk must be >= 1, got 0"));
  }
}

TEST_CASE("the model's chunked loss gives the same loss and LoRA gradients", "[qwen3][loss][lora]") {
  auto m = qwen3_test::tiny_model(29);
  auto adapters = qwen3::apply_lora(*m, qwen3::lora_options{});
  qwen3_test::randomize_lora_b(*m);
  auto ids = qwen3_test::random_ids(m->cfg().vocab_size, 2, 24);  // 46 targets
  const auto grads_of = [&](std::int64_t chunk) {
    m->set_loss_chunk(chunk);
    for (auto& p : adapters) p.mutable_grad().reset();
    auto loss = m->loss(ids);
    loss.backward();
    std::vector<torch::Tensor> g{loss.detach()};
    for (auto& p : adapters) g.push_back(p.grad().clone());
    return g;
  };
  const auto full = grads_of(0);
  const std::int64_t chunk = GENERATE(7, 23, 100);
  INFO("chunk " << chunk);
  const auto chunked = grads_of(chunk);
  CHECK(chunked[0].item<double>() == Approx(full[0].item<double>()).epsilon(1e-6));
  for (std::size_t i = 1; i < full.size(); ++i) {
    CHECK(max_abs(full[i]) > 0);
    CHECK(max_abs_diff(chunked[i], full[i]) <= 1e-5 * max_abs(full[i]));
  }
}

TEST_CASE("chunked loss on the GPU in bf16 at a large vocabulary", "[qwen3][loss][gpu]") {
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: no CUDA device visible to LibTorch");
    return;
  }
  auto c = random_case(torch::kBFloat16, 600, 256, 20000);
  c = {c.hidden.cuda(), c.weight.cuda(), c.targets.cuda()};
  const auto full = run(c, 0, 0.25), chunked = run(c, 256, 0.25);
  CHECK(chunked.loss.item<double>() == Approx(full.loss.item<double>()).epsilon(1e-4));
  CHECK(max_abs_diff(chunked.grad_hidden, full.grad_hidden) <= 1e-2 * max_abs(full.grad_hidden));
  CHECK(max_abs_diff(chunked.grad_weight, full.grad_weight) <= 1e-2 * max_abs(full.grad_weight));
}
