// qwen3/lora.hpp: frozen linear projections with LoRA adapters.
//
//   qwen3::lora_options lo;                       // r=16, alpha=32, all seven decoder projections
//   auto trainable = qwen3::apply_lora(*model, lo);  // freezes the base, returns the adapter parameters
//   qwen3::adamw opt(trainable, {});                 // only these reach the optimizer
//
// A `Projection` is one frozen weight that may hold several targets that read the same input, stacked
// by rows: q/k/v share the normalised hidden state, gate/up share it too. Stacking the *base* weights
// turns three (two) GEMMs into one; it changes nothing in the math, since rows of a linear map are
// independent. Each target keeps its own adapter, exactly as peft wraps q_proj, k_proj, ... one by one:
//
//   y_t = x W_t^T + (alpha / r) * (x A_t^T) B_t^T        for every adapted target t
//
// The A matrices of the adapted targets of one projection are stored stacked in one [n*r, in]
// parameter `lora_A` (again: independent rows, and AdamW is elementwise, so training is identical to
// separate A_t), which makes x A^T one small GEMM instead of n. The B_t stay separate: B is
// block-diagonal across targets and a stacked B would multiply by zeros.
//
// Initialisation follows peft's default (init_lora_weights=True): A ~ kaiming_uniform(a=sqrt(5)),
// i.e. U(-1/sqrt(in), 1/sqrt(in)), B = 0, so a fresh adapter leaves the model's output unchanged.
//
// Adapter dtype: by default the adapters use the model's dtype (bf16 on the GPU), so the adapter GEMMs
// run on bf16 tensor cores and need no casts. peft instead upcasts adapter weights of a bf16/fp16 base
// to fp32 (get_peft_model(..., autocast_adapter_dtype=True), its default), casting the input to fp32
// for the adapter path. Set lora_options::dtype = torch::kFloat32 to reproduce that.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace qwen3 {

/// LoRA hyper-parameters. Defaults: the reference experiment (r=16, alpha=32, dropout 0, no bias,
/// all linear layers of the decoder, not the output head).
struct lora_options {
  std::int64_t r = 16;
  double alpha = 32.0;
  /// Adapter weight dtype; unset = the dtype of the base weight it wraps (see the file comment).
  std::optional<torch::Dtype> dtype;
  std::vector<std::string> targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  double scaling() const { return alpha / static_cast<double>(r); }
};

/// One output block of a Projection: a name (as in the Hugging Face checkpoint) and its width.
struct projection_target {
  std::string name;
  std::int64_t out_features;
};

/// A bias-free linear map whose rows are the stacked weights of one or more targets, with optional
/// per-target LoRA adapters. forward_all() returns one tensor per target.
class ProjectionImpl : public torch::nn::Module {
 public:
  ProjectionImpl(std::int64_t in_features, std::vector<projection_target> targets, torch::TensorOptions options = {},
                 double init_std = 0.02)
      : in_features_(in_features), targets_(std::move(targets)) {
    std::int64_t total = 0;
    for (const auto& t : targets_) {
      offsets_.push_back(total);
      sizes_.push_back(t.out_features);
      total += t.out_features;
    }
    weight = register_parameter("weight", torch::empty({total, in_features_}, options));
    torch::NoGradGuard no_grad;
    weight.normal_(0.0, init_std);
  }

  /// Adds adapters to the targets whose names are in `names` (others stay plain). Freezes the base
  /// weight. Returns the number of targets adapted here.
  int add_lora(const lora_options& o, const std::set<std::string>& names) {
    if (o.r <= 0) throw std::invalid_argument("LoRA rank r must be positive");
    if (lora_A.defined()) throw std::logic_error("LoRA adapters already added to this projection");
    const auto dt = o.dtype ? *o.dtype : weight.scalar_type();
    const auto opts = weight.options().dtype(dt);
    lora_B.assign(targets_.size(), torch::Tensor());
    adapter_index_.assign(targets_.size(), -1);
    int n = 0;
    for (std::size_t i = 0; i < targets_.size(); ++i) {
      if (!names.count(targets_[i].name)) continue;
      adapter_index_[i] = n++;
      lora_B[i] = register_parameter("lora_B_" + targets_[i].name, torch::zeros({sizes_[i], o.r}, opts));
    }
    if (n == 0) return 0;
    lora_A = register_parameter("lora_A", torch::empty({n * o.r, in_features_}, opts));
    {
      torch::NoGradGuard no_grad;
      // kaiming_uniform(a=sqrt(5)) over fan_in = in_features: U(-1/sqrt(in), 1/sqrt(in)), as peft.
      const double bound = 1.0 / std::sqrt(static_cast<double>(in_features_));
      lora_A.uniform_(-bound, bound);
    }
    rank_ = o.r;
    scaling_ = o.scaling();
    weight.set_requires_grad(false);
    return n;
  }

  bool has_lora() const { return lora_A.defined(); }
  std::int64_t rank() const { return rank_; }
  double scaling() const { return scaling_; }
  const std::vector<projection_target>& targets() const { return targets_; }
  std::int64_t in_features() const { return in_features_; }

  /// The rows of `weight` that belong to target `name` (a view: writing it writes the weight).
  torch::Tensor target_weight(const std::string& name) {
    for (std::size_t i = 0; i < targets_.size(); ++i)
      if (targets_[i].name == name) return weight.narrow(0, offsets_[i], sizes_[i]);
    throw std::out_of_range("projection has no target '" + name + "'");
  }

  /// x: [..., in]; returns one tensor [..., out_t] per target.
  std::vector<torch::Tensor> forward_all(const torch::Tensor& x) {
    auto lead = x.sizes().vec();
    lead.pop_back();
    auto x2 = x.reshape({-1, in_features_});
    auto y = torch::mm(x2, weight.t());  // the frozen base: one GEMM for all targets
    std::vector<torch::Tensor> outs;
    outs.reserve(targets_.size());

    if (!has_lora()) {
      if (targets_.size() == 1)
        outs.push_back(y);
      else
        outs = y.split_with_sizes(sizes_, 1);  // one autograd node; its backward is one cat
    } else {
      const bool same_dtype = lora_A.scalar_type() == y.scalar_type();
      auto xa = torch::mm(same_dtype ? x2 : x2.to(lora_A.scalar_type()), lora_A.t());  // [T, n*r]
      if (targets_.size() == 1) {
        // Single target: accumulate the adapter term into the base output in place (GEMM with
        // beta=1), saving a full-size add. The base GEMM's backward does not need its output.
        if (same_dtype)
          y.addmm_(xa, lora_B[0].t(), 1.0, scaling_);
        else
          y.add_(torch::mm(xa, lora_B[0].t()).mul_(scaling_).to(y.scalar_type()));
        outs.push_back(y);
      } else {
        auto parts = y.split_with_sizes(sizes_, 1);
        auto xa_parts = xa.split(rank_, 1);
        for (std::size_t i = 0; i < targets_.size(); ++i) {
          const int k = adapter_index_[i];
          if (k < 0) {
            outs.push_back(parts[i]);
          } else if (same_dtype) {
            // Out of place: the result is a contiguous [T, out_t] (which the heads reshape needs
            // anyway) and the add rides on the GEMM's beta=1.
            outs.push_back(torch::addmm(parts[i], xa_parts[k], lora_B[i].t(), 1.0, scaling_));
          } else {
            outs.push_back(parts[i] + torch::mm(xa_parts[k], lora_B[i].t()).mul_(scaling_).to(y.scalar_type()));
          }
        }
      }
    }
    for (std::size_t i = 0; i < outs.size(); ++i) {
      auto shape = lead;
      shape.push_back(sizes_[i]);
      outs[i] = outs[i].view(shape);
    }
    return outs;
  }

  /// Single-target projections only.
  torch::Tensor forward(const torch::Tensor& x) {
    TORCH_CHECK(targets_.size() == 1, "Projection::forward on a multi-target projection; use forward_all");
    return forward_all(x)[0];
  }

  void pretty_print(std::ostream& os) const override {
    os << "qwen3::Projection(in=" << in_features_ << ", targets=[";
    for (std::size_t i = 0; i < targets_.size(); ++i)
      os << (i ? ", " : "") << targets_[i].name << ":" << targets_[i].out_features
         << (has_lora() && adapter_index_[i] >= 0 ? "+lora" : "");
    os << "]";
    if (has_lora()) os << ", r=" << rank_ << ", scaling=" << scaling_;
    os << ")";
  }

  torch::Tensor weight;               ///< [sum(out_t), in], frozen once LoRA is added
  torch::Tensor lora_A;               ///< [n_adapted * r, in], undefined without LoRA
  std::vector<torch::Tensor> lora_B;  ///< per target [out_t, r]; undefined where not adapted

 private:
  std::int64_t in_features_;
  std::vector<projection_target> targets_;
  std::vector<std::int64_t> offsets_, sizes_;
  std::vector<int> adapter_index_;  ///< target -> its block of rows in lora_A, or -1
  std::int64_t rank_ = 0;
  double scaling_ = 0.0;
};
TORCH_MODULE(Projection);

/// Freezes every parameter of `model`, adds adapters to each Projection target named in o.targets,
/// and returns the adapter parameters (the only ones that then require grad), in module order.
/// Throws when a requested target name matches nothing (a typo would otherwise train nothing).
inline std::vector<torch::Tensor> apply_lora(torch::nn::Module& model, const lora_options& o) {
  const std::set<std::string> wanted(o.targets.begin(), o.targets.end());
  std::set<std::string> seen;
  for (auto& p : model.parameters()) p.set_requires_grad(false);
  for (const auto& m : model.modules(/*include_self=*/true)) {
    if (auto proj = std::dynamic_pointer_cast<ProjectionImpl>(m)) {
      for (const auto& t : proj->targets())
        if (wanted.count(t.name)) seen.insert(t.name);
      proj->add_lora(o, wanted);
    }
  }
  for (const auto& w : wanted)
    if (!seen.count(w)) throw std::invalid_argument("LoRA target '" + w + "' matches no projection of the model");
  std::vector<torch::Tensor> trainable;
  for (auto& p : model.parameters())
    if (p.requires_grad()) trainable.push_back(p);
  return trainable;
}

/// Parameters that require grad, with their names (for checks and reports).
inline std::vector<std::pair<std::string, torch::Tensor>> trainable_named_parameters(const torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& kv : model.named_parameters())
    if (kv.value().requires_grad()) out.emplace_back(kv.key(), kv.value());
  return out;
}

/// Number of elements over a list of tensors.
inline std::int64_t numel(const std::vector<torch::Tensor>& ts) {
  std::int64_t n = 0;
  for (const auto& t : ts) n += t.numel();
  return n;
}

}  // namespace qwen3
