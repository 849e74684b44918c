// Per-layer activation checkpointing gives the same gradients as keeping the activations.
#include <catch2/catch.hpp>

#include "helpers.hpp"

using qwen3_test::max_abs;
using qwen3_test::max_abs_diff;

namespace {
std::vector<torch::Tensor> grads_of(qwen3::Qwen3Impl& m, const torch::Tensor& ids) {
  for (auto& p : m.parameters())
    if (p.grad().defined()) p.mutable_grad().reset();
  m.loss(ids).backward();
  std::vector<torch::Tensor> g;
  for (auto& p : m.parameters())
    if (p.requires_grad()) g.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  return g;
}

void check_same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].defined());
    REQUIRE(b[i].defined());
    CHECK(max_abs_diff(a[i], b[i]) <= 1e-6 * (1.0 + max_abs(b[i])));
  }
}
}  // namespace

TEST_CASE("checkpointed LoRA model: same adapter gradients", "[qwen3][checkpoint]") {
  auto m = qwen3_test::tiny_model();
  qwen3::apply_lora(*m, qwen3::lora_options{});
  qwen3_test::randomize_lora_b(*m);
  auto ids = qwen3_test::random_ids(m->cfg().vocab_size, 2, 16);

  m->set_gradient_checkpointing(false);
  const auto plain = grads_of(*m, ids);
  m->set_gradient_checkpointing(true);
  const auto ckpt = grads_of(*m, ids);
  // The first layer's input (the frozen embedding) does not require grad: the adapters of that layer
  // must still get gradients through the checkpoint.
  check_same(ckpt, plain);
  for (const auto& g : ckpt) CHECK(max_abs(g) > 0.0);
}

TEST_CASE("checkpointed full model (every weight trainable): same gradients", "[qwen3][checkpoint]") {
  auto m = qwen3_test::tiny_model(9);
  auto ids = qwen3_test::random_ids(m->cfg().vocab_size, 1, 12);
  m->set_gradient_checkpointing(false);
  const auto plain = grads_of(*m, ids);
  m->set_gradient_checkpointing(true);
  check_same(grads_of(*m, ids), plain);
}

TEST_CASE("checkpoint() of a function: gradient for input and parameters", "[qwen3][checkpoint]") {
  torch::manual_seed(3);
  auto w = torch::randn({4, 4}, torch::requires_grad());
  auto x = torch::randn({2, 4}, torch::requires_grad());
  auto fn = [w](const torch::Tensor& h) { return torch::tanh(torch::matmul(h, w)).pow(2); };
  fn(x).sum().backward();
  auto gx = x.grad().clone(), gw = w.grad().clone();
  x.mutable_grad().reset();
  w.mutable_grad().reset();
  auto y = qwen3::checkpoint(fn, x, {w});
  CHECK(y.requires_grad());
  y.sum().backward();
  CHECK(max_abs_diff(x.grad(), gx) < 1e-6);
  CHECK(max_abs_diff(w.grad(), gw) < 1e-6);

  SECTION("outside grad mode it is a plain call") {
    torch::NoGradGuard g;
    CHECK_FALSE(qwen3::checkpoint(fn, x, {w}).requires_grad());
  }
}
