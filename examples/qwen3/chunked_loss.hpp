// qwen3/chunked_loss.hpp: the causal-LM loss of the output head, computed a chunk of tokens at a time
// so that the [tokens, vocab] logits never exist at once.
//
//   auto loss = qwen3::chunked_linear_cross_entropy(h, head, targets, /*chunk=*/1024);  // h: [T, hidden]
//   auto same = qwen3::linear_cross_entropy(h, head, targets);                          // the full-logits form
//
// Why: Qwen3's vocabulary has 151,936 entries. At 4 x 511 target tokens the full form keeps the
// logits in the model dtype (0.6 GiB in bf16) and their fp32 log-probabilities (1.2 GiB) for the
// backward, whose gradient goes through two more [tokens, vocab] fp32 tensors: several GiB and
// several passes over memory for a scalar. Here each chunk of `chunk` tokens is:
//
//   logits = h_c W^T                    (model dtype, [chunk, vocab], the same GEMM as the full form)
//   loss  += -sum log_softmax(logits)[target]       (fp32 log-probabilities, as the full form)
//   dh_c   = softmax(logits) W - W[target]          (d(summed loss)/dh for this chunk, [chunk, hidden])
//   dW    += softmax(logits)^T h_c - scatter(h_c)   (only when W is trained)
//
// and the chunk's [chunk, vocab] tensors are freed before the next one. The gradient is computed in
// the forward (as fused linear-cross-entropy kernels do): a recomputation in the backward would run
// the head GEMM a third time. The backward multiplies the kept [tokens, hidden] gradient by
// grad_output / (number of targets), in fp32 (a bf16 0-dim factor would round the 1/A and loss-scale
// factors to 3 digits). So the head's cost moves from the backward phase to the forward phase of a
// profile, and a forward under GradMode whose backward never runs still pays for its gradient.
//
// Targets equal to `ignore_index` (-100, as torch's nll_loss) count neither in the loss nor in the
// mean, and get no gradient; all of them ignored gives nan, as nll_loss does. The mean's count stays
// on the device: no CPU-GPU sync.
//
// Rounding: in fp32 the two forms agree to rounding (tests/qwen3/test_chunked_loss.cpp). In bf16/fp16
// the gradient of a chunk is rounded after softmax(logits) W rather than after (softmax - onehot),
// and the kept gradient is rounded once to the model dtype before the fp32 scaling: differences
// of the order of the dtype's precision, as between any two bf16 formulations.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

namespace qwen3 {

/// Mean cross-entropy of softmax(hidden W^T) against `targets`, the full-logits form: hidden
/// [T, H], weight [V, H], targets [T] int64. The log-probabilities are fp32, as transformers upcasts
/// before its loss (LibTorch's log_softmax(..., kFloat) copies bf16 logits to fp32 first; fp16 ones
/// it reads directly on CUDA).
inline torch::Tensor linear_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                          const torch::Tensor& targets, std::int64_t ignore_index = -100) {
  auto logits = torch::mm(hidden, weight.t());  // [T, V]
  return torch::nll_loss(torch::log_softmax(logits, -1, torch::kFloat32), targets, {}, at::Reduction::Mean,
                         ignore_index);
}

namespace detail {

/// The autograd Function behind chunked_linear_cross_entropy (see the file comment).
class chunked_linear_cross_entropy_function : public torch::autograd::Function<chunked_linear_cross_entropy_function> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& targets, std::int64_t chunk,
                               std::int64_t ignore_index, bool grad_hidden, bool grad_weight) {
    const auto tokens = hidden.size(0);
    const auto f32 = hidden.options().dtype(torch::kFloat32);
    auto loss_sum = torch::zeros({}, f32);
    auto count = torch::zeros({}, f32);
    torch::Tensor dh, dw;
    if (grad_hidden) dh = torch::empty_like(hidden);
    if (grad_weight) dw = torch::zeros(weight.sizes(), weight.options().dtype(torch::kFloat32));

    for (std::int64_t start = 0; start < tokens; start += chunk) {
      const auto n = std::min(chunk, tokens - start);
      const auto h = hidden.narrow(0, start, n);
      const auto t = targets.narrow(0, start, n);
      const auto valid = t.ne(ignore_index);                      // [n] bool
      const auto safe_t = t.masked_fill(valid.logical_not(), 0);  // ignored rows read row 0, masked below
      auto logits = torch::mm(h, weight.t());                     // [n, V], model dtype
      // fp32 log-probabilities of this chunk only; freed once their target entries are read.
      auto target_logp = torch::log_softmax(logits, -1, torch::kFloat32).gather(1, safe_t.unsqueeze(1)).squeeze(1);
      loss_sum.sub_(target_logp.masked_fill(valid.logical_not(), 0.0).sum());
      count.add_(valid.sum());
      if (!grad_hidden && !grad_weight) continue;

      // d(sum of -log p[target]) / d logits = softmax(logits) - onehot(target). softmax in the model
      // dtype accumulates in fp32 inside the kernel; the onehot part is applied to the [n, H] side.
      const auto probs = torch::softmax(logits, -1);                  // [n, V], model dtype
      logits = torch::Tensor();                                       // free before the next GEMM
      const auto keep = valid.unsqueeze(1).to(hidden.scalar_type());  // [n, 1]: 0 for ignored rows
      if (grad_hidden) {
        auto out = dh.narrow(0, start, n);
        // out = probs W - W[target]: one GEMM whose beta adds the gathered rows.
        torch::addmm_out(out, torch::embedding(weight, safe_t), probs, weight, /*beta=*/-1, /*alpha=*/1);
        out.mul_(keep);
      }
      if (grad_weight) {
        const auto h_kept = h * keep;
        dw.add_(torch::mm(probs.t(), h_kept));
        dw.index_add_(0, safe_t, h_kept.to(torch::kFloat32).neg());
      }
    }
    if (dh.defined()) ctx->saved_data["dh"] = dh;
    if (dw.defined()) ctx->saved_data["dw"] = dw;
    ctx->saved_data["weight_dtype"] = static_cast<std::int64_t>(weight.scalar_type());
    ctx->saved_data["count"] = count;
    return loss_sum / count;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_output) {
    auto& saved = ctx->saved_data;
    // The loss is sum / count: d loss = grad_output / count per summed term. In fp32 (see above).
    const auto factor = grad_output[0].to(torch::kFloat32) / saved["count"].toTensor();
    torch::Tensor grad_hidden, grad_weight;
    if (saved.find("dh") != saved.end()) {
      const auto dh = saved["dh"].toTensor();
      grad_hidden = (dh.to(torch::kFloat32) * factor).to(dh.scalar_type());
    }
    if (saved.find("dw") != saved.end())
      grad_weight = (saved["dw"].toTensor() * factor).to(static_cast<torch::ScalarType>(saved["weight_dtype"].toInt()));
    return {grad_hidden,     grad_weight,     torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace detail

/// Mean cross-entropy of softmax(hidden weight^T) against `targets`, as linear_cross_entropy, but a
/// chunk of `chunk` tokens at a time, its gradient computed in the forward (see the file comment).
/// hidden [T, H] and weight [V, H] of one floating dtype and device, targets [T] int64; chunk >= 1
/// (any value: the last chunk takes the remainder). Gradients flow to hidden and weight as far as
/// they require grad (and GradMode is on); no double backward.
inline torch::Tensor chunked_linear_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                                  const torch::Tensor& targets, std::int64_t chunk,
                                                  std::int64_t ignore_index = -100) {
  if (chunk < 1)
    throw std::invalid_argument("chunked_linear_cross_entropy: chunk must be >= 1, got " + std::to_string(chunk));
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
              "chunked_linear_cross_entropy: hidden [T, H] and weight [V, H] expected, got ", hidden.sizes(), " and ",
              weight.sizes());
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0) && targets.scalar_type() == torch::kInt64,
              "chunked_linear_cross_entropy: targets must be [T] int64 with T = ", hidden.size(0), ", got ",
              targets.sizes(), " ", targets.scalar_type());
  TORCH_CHECK(hidden.scalar_type() == weight.scalar_type(), "chunked_linear_cross_entropy: hidden is ",
              hidden.scalar_type(), " but weight is ", weight.scalar_type());
  const bool grad_mode = torch::GradMode::is_enabled();
  return detail::chunked_linear_cross_entropy_function::apply(hidden, weight, targets, chunk, ignore_index,
                                                              grad_mode && hidden.requires_grad(),
                                                              grad_mode && weight.requires_grad());
}

}  // namespace qwen3
