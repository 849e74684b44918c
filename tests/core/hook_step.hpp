// One training step driven through the trainer-callback hooks: 2 micro-batches of (optionally)
// dataloader, forward with a nested user phase "attention", and backward, then the optimizer.
// `attention_end` may be another pointer to the same text (the end hook must compare by content).
#pragma once
#include <traceml/callback.hpp>

namespace traceml_test {

inline void hook_step(traceml::callback_list& cbs, const char* attention_begin = "attention",
                      const char* attention_end = "attention", bool dataloader = false) {
  using traceml::phase_kind;
  cbs.on_step_begin();
  for (int m = 0; m < 2; ++m) {
    cbs.on_microbatch_begin();
    if (dataloader) {
      cbs.on_phase_begin(phase_kind::dataloader);
      cbs.on_phase_end(phase_kind::dataloader);
    }
    cbs.on_phase_begin(phase_kind::forward);
    cbs.on_phase_begin(phase_kind::user, attention_begin);
    cbs.on_phase_end(phase_kind::user, attention_end);
    cbs.on_phase_end(phase_kind::forward);
    cbs.on_phase_begin(phase_kind::backward);
    cbs.on_phase_end(phase_kind::backward);
    cbs.on_microbatch_end();
  }
  cbs.on_phase_begin(phase_kind::optimizer);
  cbs.on_phase_end(phase_kind::optimizer);
  cbs.on_step_end();
}

}  // namespace traceml_test
