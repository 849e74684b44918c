// qwen3/checked.hpp: integer products and sums that report overflow instead of wrapping.
//
//   auto n = qwen3::checked_mul<std::int64_t>(rows, cols);   // std::nullopt when rows * cols overflows
//   if (!n) throw std::invalid_argument("rows x cols overflows");
//
// Sizes in this trainer come from files and command lines, so any product of them may be hostile:
// signed overflow is undefined behaviour, and unsigned overflow wraps to a small, plausible-looking
// number (a [2^32, 2^32] tensor has "0" elements). Callers throw their own exception type, naming
// the fields that were multiplied.
#pragma once
#include <optional>
#include <type_traits>

namespace qwen3 {

/// a * b, or std::nullopt when it does not fit in T.
template <class T>
std::optional<T> checked_mul(T a, T b) {
  static_assert(std::is_integral_v<T>, "checked_mul is for integers");
  T r{};
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// a + b, or std::nullopt when it does not fit in T.
template <class T>
std::optional<T> checked_add(T a, T b) {
  static_assert(std::is_integral_v<T>, "checked_add is for integers");
  T r{};
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace qwen3
