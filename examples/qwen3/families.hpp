// qwen3/families.hpp: the model of a config's family.
//
//   qwen3::CausalLM model = qwen3::make_model(qwen3::preset("llama-3.2-1b"), opts);   // a Llama
//   qwen3::CausalLM model = qwen3::make_model(qwen3::load_config(folder), opts);      // what the snapshot is
//
// The trainer (train_loop.hpp, cuda_graph.hpp), the checkpoint names (weights.hpp) and the experiment
// take any family as a CausalLM; this is the one place that knows every family.
#pragma once
#include <memory>
#include <stdexcept>

#include "config.hpp"
#include "llama.hpp"
#include "model.hpp"

namespace qwen3 {

/// A model of c.family with random weights (model.hpp's initialisation).
inline CausalLM make_model(const config& c, const model_options& o = {}) {
  switch (c.family) {
    case model_family::qwen3: return CausalLM(std::shared_ptr<CausalLMImpl>(std::make_shared<Qwen3Impl>(c, o)));
    case model_family::llama: return CausalLM(std::shared_ptr<CausalLMImpl>(std::make_shared<LlamaImpl>(c, o)));
  }
  throw std::invalid_argument("make_model: unknown model family");
}

}  // namespace qwen3
