// The LibTorch adapter builds against the LibTorch found (1.13 CPU-only or 2.x with CUDA) and
// answers "unknown", never 0, where it cannot measure; it recognises LibTorch's out-of-memory errors
// (by type, and by the message 1.13's allocator gives) and no others. Linked with traceml::torch
// alone, so it also proves that target brings what the adapter calls.
#include <cstdio>
#include <new>
#include <stdexcept>

#include "traceml/torch_adapter.hpp"

#include "expect.hpp"

namespace {
/// Whether is_out_of_memory() says so of what `f` throws.
template <class F>
bool thrown_is_out_of_memory(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return traceml::libtorch::is_out_of_memory(e);
  }
  return false;
}
}  // namespace

int main() {
  namespace lt = traceml::libtorch;
  // By type, whatever the message; by message for a plain c10::Error (LibTorch 1.13's CUDA allocator).
  EXPECT(thrown_is_out_of_memory([] { TORCH_CHECK_WITH(OutOfMemoryError, false, "allocation refused"); }));
  EXPECT(thrown_is_out_of_memory([] { TORCH_CHECK(false, "CUDA out of memory. Tried to allocate 2.00 GiB"); }));
  EXPECT(thrown_is_out_of_memory([] { throw std::bad_alloc(); }));
  EXPECT(!thrown_is_out_of_memory([] { TORCH_CHECK(false, "shape mismatch"); }));
  EXPECT(!thrown_is_out_of_memory([] { throw std::runtime_error("shape mismatch"); }));
  if (!lt::cuda_available()) {
    EXPECT(lt::device_memory_bytes() == -1);
    lt::release_cached_memory();  // a no-op, not an exception
    EXPECT(lt::current_stream() == nullptr);
    const auto p = lt::read_allocator_peaks();
    EXPECT(p.allocated == -1 && p.reserved == -1);
    EXPECT(!lt::caching_allocator_sampler());
    lt::synchronize();  // a no-op, not an exception
    std::printf("LibTorch %s without CUDA: adapter reports unknown memory\n", TORCH_VERSION);
    return 0;
  }
  auto t = torch::empty({64, 1024, 1024}, torch::TensorOptions().device(torch::kCUDA));  // 256 MiB
  lt::synchronize();
  auto sampler = lt::caching_allocator_sampler();
  EXPECT(static_cast<bool>(sampler));
  const auto s = sampler();
  EXPECT(s.peak_allocated_bytes >= (std::int64_t{256} << 20));
  EXPECT(s.peak_reserved_bytes >= s.peak_allocated_bytes);
  std::printf("LibTorch %s with CUDA: peak allocated %lld MiB\n", TORCH_VERSION,
              static_cast<long long>(s.peak_allocated_bytes >> 20));
  // A real out-of-memory error (2^50 floats) is recognised, and the device goes on after it.
  const auto total = lt::device_memory_bytes();
  EXPECT(total > (std::int64_t{1} << 30));
  EXPECT(thrown_is_out_of_memory(
      [] { (void)torch::empty({std::int64_t{1} << 50}, torch::TensorOptions().device(torch::kCUDA)); }));
  lt::release_cached_memory();
  EXPECT(lt::read_allocator_peaks(-1, false).reserved >= (std::int64_t{256} << 20));  // t is still alive
  t.fill_(1);
  lt::synchronize();
  std::printf("device memory %lld MiB; an out-of-memory error recognised and survived\n",
              static_cast<long long>(total >> 20));
  return 0;
}
