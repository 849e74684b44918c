// LoRA adapters: initialisation, what trains, and equivalence with per-projection LoRA.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "helpers.hpp"

using qwen3_test::max_abs;
using qwen3_test::max_abs_diff;

TEST_CASE("a fresh adapter (B = 0) gives exactly the base model's output", "[qwen3][lora]") {
  auto m = qwen3_test::tiny_model();
  auto ids = qwen3_test::random_ids(m->cfg().vocab_size, 2, 16);
  torch::Tensor before;
  {
    torch::NoGradGuard g;
    before = m->logits(ids);
  }
  qwen3::apply_lora(*m, qwen3::lora_options{});
  torch::NoGradGuard g;
  CHECK(torch::equal(m->logits(ids), before));
}

TEST_CASE("adapters are initialised as peft does", "[qwen3][lora]") {
  auto m = qwen3_test::tiny_model();
  qwen3::lora_options o;
  o.r = 8;
  qwen3::apply_lora(*m, o);
  auto attn = m->layers->ptr<qwen3::DecoderLayerImpl>(0)->self_attn;
  auto& qkv = *attn->qkv_proj;
  const double bound = 1.0 / std::sqrt(static_cast<double>(m->cfg().hidden_size));
  CHECK(qkv.lora_A.sizes() == torch::IntArrayRef({3 * 8, m->cfg().hidden_size}));  // q, k, v stacked
  CHECK(max_abs(qkv.lora_A) <= bound);
  CHECK(max_abs(qkv.lora_A) > 0.5 * bound);  // uniform over the whole range, not a tiny normal
  for (const auto& b : qkv.lora_B) CHECK(max_abs(b) == 0.0);
  CHECK(qkv.lora_B[0].sizes() == torch::IntArrayRef({m->cfg().q_dim(), 8}));
  CHECK(qkv.lora_B[1].sizes() == torch::IntArrayRef({m->cfg().kv_dim(), 8}));
  CHECK(qkv.scaling() == 32.0 / 8.0);
  CHECK_FALSE(qkv.weight.requires_grad());
}

TEST_CASE("only adapter parameters are trainable and receive gradients", "[qwen3][lora]") {
  auto m = qwen3_test::tiny_model();
  auto trainable = qwen3::apply_lora(*m, qwen3::lora_options{});
  qwen3_test::randomize_lora_b(*m);
  const auto& c = m->cfg();
  // r * (in + out) per target, seven targets per layer.
  const std::int64_t r = 16;
  const std::int64_t per_layer =
      r * ((c.hidden_size + c.q_dim()) + 2 * (c.hidden_size + c.kv_dim()) + (c.q_dim() + c.hidden_size) +
           2 * (c.hidden_size + c.intermediate_size) + (c.intermediate_size + c.hidden_size));
  CHECK(qwen3::numel(trainable) == per_layer * c.num_layers);

  auto ids = qwen3_test::random_ids(c.vocab_size, 2, 16);
  m->loss(ids).backward();
  std::set<std::string> with_grad;
  for (const auto& kv : m->named_parameters()) {
    const bool adapter = kv.key().find("lora_") != std::string::npos;
    CHECK(kv.value().requires_grad() == adapter);
    if (adapter) {
      REQUIRE(kv.value().grad().defined());
      CHECK(max_abs(kv.value().grad()) > 0.0);
      with_grad.insert(kv.key());
    } else {
      CHECK_FALSE(kv.value().grad().defined());
    }
  }
  CHECK(with_grad.size() == trainable.size());
}

TEST_CASE("stacked projections with adapters equal separate per-target LoRA", "[qwen3][lora]") {
  torch::manual_seed(4);
  const std::int64_t in = 12, r = 3;
  qwen3::Projection p(in, std::vector<qwen3::projection_target>{{"q_proj", 8}, {"k_proj", 4}, {"v_proj", 4}});
  qwen3::lora_options o;
  o.r = r;
  o.alpha = 6;
  p->add_lora(o, {"q_proj", "v_proj"});  // k_proj stays plain
  {
    torch::NoGradGuard g;
    for (auto& b : p->lora_B)
      if (b.defined()) b.normal_();
  }
  auto x = torch::randn({2, 5, in});
  auto outs = p->forward_all(x);
  REQUIRE(outs.size() == 3);
  // Separate computation: W_t x + s * B_t A_t x, A_t being the t-th block of r rows of lora_A.
  auto a_q = p->lora_A.narrow(0, 0, r), a_v = p->lora_A.narrow(0, r, r);
  auto q = torch::matmul(x, p->target_weight("q_proj").t()) +
           2.0 * torch::matmul(torch::matmul(x, a_q.t()), p->lora_B[0].t());
  auto k = torch::matmul(x, p->target_weight("k_proj").t());
  auto v = torch::matmul(x, p->target_weight("v_proj").t()) +
           2.0 * torch::matmul(torch::matmul(x, a_v.t()), p->lora_B[2].t());
  CHECK(max_abs_diff(outs[0], q) < 1e-5);
  CHECK(max_abs_diff(outs[1], k) < 1e-6);
  CHECK(max_abs_diff(outs[2], v) < 1e-5);
  CHECK_FALSE(p->lora_B[1].defined());
}

TEST_CASE("adapters in fp32 on a bf16 base (peft's default dtype handling)", "[qwen3][lora]") {
  auto m = qwen3_test::tiny_model(7, qwen3::model_options().dtype(torch::kBFloat16));
  qwen3::lora_options o;
  o.dtype = torch::kFloat32;
  auto trainable = qwen3::apply_lora(*m, o);
  for (const auto& t : trainable) CHECK(t.scalar_type() == torch::kFloat32);
  qwen3_test::randomize_lora_b(*m);
  auto ids = qwen3_test::random_ids(m->cfg().vocab_size, 1, 8);
  auto loss = m->loss(ids);
  loss.backward();
  for (const auto& t : trainable) {
    REQUIRE(t.grad().defined());
    CHECK(t.grad().scalar_type() == torch::kFloat32);
  }
}

TEST_CASE("apply_lora rejects unknown targets and bad ranks", "[qwen3][lora]") {
  auto m = qwen3_test::tiny_model();
  qwen3::lora_options o;
  o.targets = {"q_proj", "qkv"};
  CHECK_THROWS_WITH(qwen3::apply_lora(*m, o), Catch::Contains("'qkv' matches no projection"));
  auto m2 = qwen3_test::tiny_model();
  qwen3::lora_options bad;
  bad.r = 0;
  CHECK_THROWS_WITH(qwen3::apply_lora(*m2, bad), Catch::Contains("rank"));
}
