// The Llama family (llama.hpp): Llama 3's rotary frequency scaling, the model's structure and
// parameter counts, LoRA on it, training, and its Hugging Face snapshot.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "helpers.hpp"

using qwen3_test::max_abs;
using qwen3_test::max_abs_diff;

namespace {
/// The llama-tiny preset in fp32 on the CPU, seeded.
qwen3::CausalLM tiny_llama(std::uint64_t seed = 7, qwen3::model_options o = {}) {
  torch::manual_seed(seed);
  return qwen3::make_model(qwen3::preset("llama-tiny"), o);
}

std::vector<double> values(const torch::Tensor& t) {
  auto d = t.to(torch::kFloat64).contiguous();
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}
}  // namespace

TEST_CASE("llama3 rotary frequencies are kept, interpolated or stretched by wavelength", "[qwen3][llama][rope]") {
  SECTION("by hand: head_dim 8, theta 10^4, factor 8, low/high 1/4, original context 1024") {
    // Plain: theta^(-2i/8) = 1, 0.1, 0.01, 0.001; wavelengths 2 pi / f = 6.28, 62.8, 628.3, 6283.2,
    // against 1024 / 4 = 256 (shorter: kept) and 1024 / 1 = 1024 (longer: divided by 8). 628.3 lies
    // between: s = (1024 / 628.3185 - 1) / (4 - 1) = 0.2099155, f = 0.01 * ((1 - s) / 8 + s) = 0.00308676.
    const qwen3::llama3_rope_scaling s{8.0, 1.0, 4.0, 1024};
    const auto plain = values(qwen3::rotary_inv_freq(8, 10000.0, std::nullopt));
    const auto scaled = values(qwen3::rotary_inv_freq(8, 10000.0, s));
    const std::vector<double> want_plain{1.0, 0.1, 0.01, 0.001};
    const std::vector<double> want_scaled{1.0, 0.1, 0.003086761, 0.000125};
    REQUIRE(scaled.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) {
      INFO("frequency " << i);
      CHECK(plain[i] == Approx(want_plain[i]).epsilon(1e-6));  // fp32: ~6e-8 relative
      CHECK(scaled[i] == Approx(want_scaled[i]).epsilon(1e-6));
    }
  }
  SECTION("Llama-3.2-1B: head_dim 64, theta 500000, factor 32, low/high 1/4, original context 8192") {
    // Wavelength 2 pi * 500000^(i/32) passes 8192 / 4 = 2048 between i = 14 and 15 and 8192 between
    // i = 17 and 18: 15 frequencies kept, 3 interpolated, 14 divided by 32.
    const auto c = qwen3::preset("llama-3.2-1b");
    const auto plain = values(qwen3::rotary_inv_freq(c.head_dim, c.rope_theta, std::nullopt));
    const auto scaled = values(qwen3::rotary_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling));
    REQUIRE(scaled.size() == 32);
    int kept = 0, between = 0, stretched = 0;
    for (std::size_t i = 0; i < 32; ++i) {
      INFO("frequency " << i);
      if (scaled[i] == plain[i]) {
        ++kept;
        CHECK(i < 15);
      } else if (std::abs(scaled[i] - plain[i] / 32) <= 1e-6 * plain[i] / 32) {
        ++stretched;
        CHECK(i >= 18);
      } else {
        ++between;
        CHECK(scaled[i] < plain[i]);
        CHECK(scaled[i] > plain[i] / 32);
      }
    }
    CHECK(kept == 15);
    CHECK(between == 3);
    CHECK(stretched == 14);
    // i = 16: f = 500000^-0.5 = 0.00141421, wavelength 4442.88, s = (8192 / 4442.88 - 1) / 3 = 0.2812826,
    // f * ((1 - s) / 32 + s) = 0.000429557.
    CHECK(scaled[16] == Approx(0.000429557).epsilon(1e-5));
  }
  SECTION("the model rotates with the scaled frequencies") {
    // The same weights with and without the scaling: position 0 is not rotated (equal logits); the
    // later positions see the changed low frequencies. Weights at std 0.5 make the logits large enough
    // for the small angles of those frequencies (at most 0.09 rad by position 63) to show: measured,
    // position 0 differs by 0 and positions 32-63 by up to 4.8 (logits up to 18).
    auto scaled = tiny_llama(3, qwen3::model_options().init_std(0.5));
    auto cfg = qwen3::preset("llama-tiny");
    cfg.rope_scaling.reset();
    auto unscaled = qwen3::make_model(cfg);
    {
      torch::NoGradGuard g;
      auto a = scaled->parameters(), b = unscaled->parameters();
      REQUIRE(a.size() == b.size());
      for (std::size_t i = 0; i < a.size(); ++i) b[i].copy_(a[i]);
    }
    auto ids = qwen3_test::random_ids(cfg.vocab_size, 1, 64);
    torch::NoGradGuard g;
    auto la = scaled->logits(ids), lb = unscaled->logits(ids);
    INFO("max |logit| " << max_abs(la) << ", position 0 diff " << max_abs_diff(la.narrow(1, 0, 1), lb.narrow(1, 0, 1))
                        << ", positions 32-63 diff " << max_abs_diff(la.narrow(1, 32, 32), lb.narrow(1, 32, 32)));
    CHECK(max_abs_diff(la.narrow(1, 0, 1), lb.narrow(1, 0, 1)) < 1e-5);
    CHECK(max_abs_diff(la.narrow(1, 32, 32), lb.narrow(1, 32, 32)) > 1.0);
  }
}

TEST_CASE("a Llama is the shared decoder without q/k norms", "[qwen3][llama][model]") {
  auto m = tiny_llama();
  const auto& c = m->cfg();
  CHECK(std::dynamic_pointer_cast<qwen3::LlamaImpl>(m.ptr()) != nullptr);
  for (const auto& kv : m->named_parameters()) {
    INFO(kv.key());
    const bool in_attention = kv.key().find("self_attn") != std::string::npos;
    CHECK_FALSE((in_attention && kv.key().find("norm") != std::string::npos));
  }
  // By hand: embedding 256 x 64; per layer q 64x64, k and v 64x32 each, o 64x64, MLP 3 x 64x160,
  // two norms of 64; final norm 64; tied head.
  const std::int64_t per_layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 160 + 2 * 64;
  CHECK(qwen3::parameter_count(*m) == 256 * 64 + 2 * per_layer + 64);
  CHECK(c.parameter_count() == qwen3::parameter_count(*m));

  auto ids = qwen3_test::random_ids(c.vocab_size, 2, 16);
  torch::NoGradGuard g;
  CHECK(m->hidden_states(ids).sizes() == torch::IntArrayRef({2, 16, c.hidden_size}));
  auto logits = m->logits(ids);
  CHECK(logits.sizes() == torch::IntArrayRef({2, 16, c.vocab_size}));
  CHECK(std::abs(m->loss(ids).item<double>() - std::log(static_cast<double>(c.vocab_size))) < 0.1);

  // Causal: a change at position 8 leaves the logits before it alone.
  auto changed = ids.clone();
  changed[0][8] = (changed[0][8].item<std::int64_t>() + 1) % c.vocab_size;
  auto after = m->logits(changed);
  CHECK(max_abs_diff(logits.narrow(1, 0, 8), after.narrow(1, 0, 8)) < 1e-6);
  CHECK(max_abs_diff(logits.select(0, 0).narrow(0, 8, 8), after.select(0, 0).narrow(0, 8, 8)) > 1e-4);

  // Fused operators (LibTorch 2.x) and the plain formulation agree (on 1.13 both take the plain path).
  auto plain = tiny_llama(7, qwen3::model_options().fused_ops(false));
  CHECK(max_abs_diff(plain->logits(ids), logits) < 1e-5);
}

TEST_CASE("a family's model needs a config of that family", "[qwen3][llama][model]") {
  CHECK_THROWS_WITH(qwen3::Qwen3(qwen3::preset("llama-tiny")),
                    Catch::Contains("qwen3 model from llama config 'llama-tiny'"));
  CHECK_THROWS_WITH(qwen3::Llama(qwen3::preset("tiny")), Catch::Contains("llama model from qwen3 config 'tiny'"));
  CHECK(std::dynamic_pointer_cast<qwen3::Qwen3Impl>(qwen3::make_model(qwen3::preset("tiny")).ptr()) != nullptr);
}

TEST_CASE("llama-3.2-1b has the released parameter counts", "[qwen3][llama][params]") {
  // On the meta device: real modules and shapes, no memory. By hand: embedding 128256 x 2048 =
  // 262,668,288; per layer q and o 2048 x 2048 each, k and v 2048 x 512 each, MLP 3 x 2048 x 8192,
  // two norms: 60,821,504; 16 layers and the final norm: 1,235,814,400, Llama-3.2-1B's count.
  auto m = qwen3::make_model(qwen3::preset("llama-3.2-1b"), qwen3::model_options().device(torch::Device("meta")));
  const auto base = qwen3::parameter_count(*m);
  CHECK(base == 1235814400);
  CHECK(m->cfg().parameter_count() == base);
  // LoRA r=16 on all seven projections: 16 x (in + out) per target, per layer
  // 16 x (2 x 4096 + 2 x 2560 + 3 x 10240) = 704,512; x 16 layers.
  auto adapters = qwen3::apply_lora(*m, qwen3::lora_options{});
  CHECK(qwen3::numel(adapters) == 11272192);
  CHECK(qwen3::parameter_count(*m) - base == 11272192);
}

TEST_CASE("LoRA adapts the seven Llama projections", "[qwen3][llama][lora]") {
  auto m = tiny_llama();
  const auto& c = m->cfg();
  auto ids = qwen3_test::random_ids(c.vocab_size, 2, 16);
  torch::Tensor before;
  {
    torch::NoGradGuard g;
    before = m->logits(ids);
  }
  qwen3::lora_options lo;
  lo.r = 4;
  auto trainable = qwen3::apply_lora(*m, lo);
  {
    torch::NoGradGuard g;
    CHECK(torch::equal(m->logits(ids), before));  // B = 0: a fresh adapter changes nothing
  }
  // r x (in + out) for q, k, v, o, gate, up, down.
  const std::int64_t per_layer = 4 * ((64 + 64) + 2 * (64 + 32) + (64 + 64) + 2 * (64 + 160) + (160 + 64));
  CHECK(qwen3::numel(trainable) == per_layer * c.num_layers);
  std::set<std::string> adapted;
  for (const auto& kv : qwen3::trainable_named_parameters(*m)) adapted.insert(kv.first);
  CHECK(adapted.count("layers.0.self_attn.qkv_proj.lora_A") == 1);
  CHECK(adapted.count("layers.1.self_attn.qkv_proj.lora_B_v_proj") == 1);
  CHECK(adapted.count("layers.0.self_attn.o_proj.lora_B_o_proj") == 1);
  CHECK(adapted.count("layers.1.mlp.gate_up_proj.lora_B_up_proj") == 1);
  CHECK(adapted.count("layers.0.mlp.down_proj.lora_A") == 1);
  CHECK(adapted.size() == 2 * 11);  // per layer: 4 lora_A (qkv, o, gate_up, down) and 7 lora_B

  // Only q and v (a common choice for Llama).
  auto m2 = tiny_llama();
  lo.targets = {"q_proj", "v_proj"};
  CHECK(qwen3::numel(qwen3::apply_lora(*m2, lo)) == c.num_layers * 4 * ((64 + 64) + (64 + 32)));
  lo.targets = {"q_norm"};
  CHECK_THROWS_WITH(qwen3::apply_lora(*tiny_llama(), lo), Catch::Contains("'q_norm' matches no projection"));
}

TEST_CASE("training lowers a tiny Llama's loss on a learnable sequence", "[qwen3][llama][train]") {
  // As the Qwen3 test (test_train.cpp): a wider initialisation lets the adapters make confident
  // predictions through the frozen tied head.
  auto m = tiny_llama(23, qwen3::model_options().init_std(0.5));
  const auto losses = qwen3_test::train_on_pattern(*m);
  REQUIRE(losses.size() == 30);
  for (auto l : losses) UNSCOPED_INFO(l);
  CHECK(losses.back() < 0.05 * losses.front());
  CHECK(losses.back() < 0.5);
}

TEST_CASE("a Llama snapshot has transformers' names and loads back", "[qwen3][llama][weights]") {
  qwen3_test::temp_dir dir("llama-snapshot");
  auto m = tiny_llama(5);
  {
    torch::NoGradGuard g;
    for (auto& kv : m->named_parameters())
      if (kv.key().find("norm") != std::string::npos) kv.value().uniform_(0.5, 1.5);  // norms not all ones
  }
  qwen3::save_pretrained(*m, dir.str());
  const auto names = qwen3::hf_tensors(*m);
  // Embedding, per layer q/k/v/o, gate/up/down and two norms, the final norm; the head is tied.
  CHECK(names.size() == 1 + 2 * 9 + 1);
  std::set<std::string> all;
  for (const auto& kv : names) all.insert(kv.first);
  CHECK(all.count("model.layers.1.self_attn.k_proj.weight") == 1);
  CHECK(all.count("model.layers.0.mlp.gate_proj.weight") == 1);
  CHECK(all.count("model.layers.0.post_attention_layernorm.weight") == 1);
  for (const auto& n : all) CHECK(n.find("q_norm") == std::string::npos);

  auto loaded = qwen3::from_pretrained(dir.str());
  CHECK(loaded->cfg().family == qwen3::model_family::llama);
  CHECK(std::dynamic_pointer_cast<qwen3::LlamaImpl>(loaded.ptr()) != nullptr);
  auto ids = qwen3_test::random_ids(m->cfg().vocab_size, 1, 24);
  torch::NoGradGuard g;
  CHECK(torch::equal(loaded->logits(ids), m->logits(ids)));

  // A Qwen3 snapshot's q/k norms are not a Llama's.
  qwen3_test::temp_dir qwen_dir("qwen3-snapshot");
  auto qwen = qwen3_test::tiny_model();
  qwen3::save_pretrained(*qwen, qwen_dir.str());
  auto j = qwen3::to_json(qwen->cfg());
  j["model_type"] = "llama";
  std::ofstream(qwen_dir.file("config.json")) << j.dump();
  CHECK_THROWS_WITH(qwen3::from_pretrained(qwen_dir.str()),
                    Catch::Contains("unexpected weight") && Catch::Contains("_norm.weight"));
}
