// traceml: the vocabulary of a training step (what a phase is called and which kinds exist).
#pragma once
#include <cstdint>
#include <cstring>

#include "traceml/config.hpp"

TRACEML_BEGIN_NAMESPACE

/// What a recorded interval is. `step` is one optimizer update, `microbatch` one forward+backward
/// inside it; the rest are phases. `user` phases carry their own name.
enum class phase_kind : std::uint8_t {
  step,
  microbatch,
  dataloader,  ///< input fetch and host-to-device copy
  forward,
  backward,
  optimizer,
  communication,  ///< collectives, parameter-server traffic
  user,           ///< named by the caller (by string literal or tag type)
};

inline constexpr int phase_kind_count = 8;

/// The name users see for a kind ("forward", "backward", ...).
constexpr const char* to_string(phase_kind k) noexcept {
  switch (k) {
    case phase_kind::step: return "step";
    case phase_kind::microbatch: return "microbatch";
    case phase_kind::dataloader: return "dataloader";
    case phase_kind::forward: return "forward";
    case phase_kind::backward: return "backward";
    case phase_kind::optimizer: return "optimizer";
    case phase_kind::communication: return "communication";
    case phase_kind::user: return "user";
  }
  return "?";
}

/// Forward or backward: the repeated passes that accumulation multiplies (comparisons and verdicts
/// look there first).
constexpr bool is_forward_backward(phase_kind k) noexcept {
  return k == phase_kind::forward || k == phase_kind::backward;
}

/// True for kinds that are phases (everything except step and micro-batch boundaries).
constexpr bool is_phase(phase_kind k) noexcept { return k != phase_kind::step && k != phase_kind::microbatch; }

/// The built-in kind called `name`, or phase_kind::user when the name is not a built-in one.
inline phase_kind phase_kind_from_name(const char* name) noexcept {
  if (!name) return phase_kind::user;
  for (int i = 0; i < phase_kind_count; ++i) {
    auto k = static_cast<phase_kind>(i);
    if (std::strcmp(to_string(k), name) == 0) return k;
  }
  return phase_kind::user;
}

TRACEML_END_NAMESPACE
