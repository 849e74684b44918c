// The LibTorch adapter builds against the LibTorch found (1.13 CPU-only or 2.x with CUDA) and
// answers "unknown", never 0, where it cannot measure.
#include <cstdio>

#include "traceml/torch_adapter.hpp"

#include "expect.hpp"

int main() {
  namespace lt = traceml::libtorch;
  if (!lt::cuda_available()) {
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
  return 0;
}
