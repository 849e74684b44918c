// traceml: boundary markers -- how CUPTI's records learn which phase launched them.
//
// At each step and phase boundary of a recorded step the CUPTI source enqueues a marker on the
// boundary thread's current stream: a tiny cudaMemsetAsync whose byte count encodes a sequence
// number. CUPTI times the markers like any other memset, on the same clock as the kernels, and the
// stream runs everything in launch order: a kernel between the begin and end markers of a phase on
// its stream was launched inside that phase, by whichever thread (attribution.hpp,
// docs/attribution.md). The activity reader (cupti_reader.hpp) tells markers from user memsets with
// decode().
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "traceml/config.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/gpu/cuda_runtime.hpp"
#include "traceml/gpu/cuda_stream.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// Marker encoding: cudaMemsetAsync(buffer, marker_value, marker_base + 4 * (seq % marker_window)).
/// A user memset of exactly this value and one of these sizes would be taken for a marker; the
/// odd base and the 0xA7 fill make that very unlikely.
constexpr int marker_value = 0xA7;
constexpr std::size_t marker_base = 4100;
constexpr std::size_t marker_window = 4096;
constexpr std::size_t marker_buffer_bytes = marker_base + 4 * marker_window;
constexpr int max_devices = 64;

}  // namespace detail

class boundary_markers {
 public:
  explicit boundary_markers(bool on) : on_(on) {}
  ~boundary_markers() { release(); }
  boundary_markers(const boundary_markers&) = delete;
  boundary_markers& operator=(const boundary_markers&) = delete;

  bool on() const noexcept { return on_; }

  /// The current device's marker buffer now, not on the first boundary.
  void prepare() noexcept {
    if (!on_) return;
    int dev = 0;
    if (detail::rt::cudaGetDevice(&dev) != cudaSuccess) {
      detail::rt::cudaGetLastError();
      return;
    }
    detail::lock_guard lock(mu_);
    buffer_locked(dev);
  }

  /// Hot: one ~20 KB cudaMemsetAsync on `stream` (a few microseconds of CPU, about a microsecond of
  /// GPU). Returns the marker's sequence number; 0 when none was enqueued (markers off, the stream is
  /// being captured into a graph, or the memset failed).
  std::uint64_t enqueue(cudaStream_t stream) noexcept {
    if (!on_) return 0;
    if (detail::stream_capturing(stream)) return 0;  // a marker would become part of the graph
    int dev = 0;
    if (detail::rt::cudaGetDevice(&dev) != cudaSuccess) {
      detail::rt::cudaGetLastError();
      return 0;
    }
    void* buf = nullptr;
    std::uint64_t seq = 0;
    {
      // Only the numbering is serialized; the memset itself runs outside the lock, so that no
      // CUPTI callback can ever wait on it.
      detail::lock_guard lock(mu_);
      buf = buffer_locked(dev);
      if (!buf) return 0;
      seq = ++seq_;
    }
    const std::size_t residue = static_cast<std::size_t>(seq % detail::marker_window);
    issued_[residue].store(seq, std::memory_order_release);
    if (detail::rt::cudaMemsetAsync(buf, detail::marker_value, detail::marker_base + 4 * residue, stream) !=
        cudaSuccess) {
      detail::rt::cudaGetLastError();
      return 0;
    }
    return seq;
  }

  /// Parsing (any thread): the sequence number a memset of `value` over `bytes` stands for; 0 when
  /// it is no marker of ours.
  std::uint64_t decode(std::uint32_t value, std::uint64_t bytes) const noexcept {
    if (value != static_cast<std::uint32_t>(detail::marker_value) || bytes < detail::marker_base ||
        bytes >= detail::marker_buffer_bytes || (bytes - detail::marker_base) % 4 != 0)
      return 0;
    return issued_[static_cast<std::size_t>((bytes - detail::marker_base) / 4)].load(std::memory_order_acquire);
  }

  /// Frees the device buffers (at shutdown, once nothing is enqueued any more).
  void release() noexcept {
    detail::lock_guard lock(mu_);
    for (auto& p : buffers_)
      if (p) detail::rt::cudaFree(p);
    buffers_.clear();
    detail::rt::cudaGetLastError();
  }

 private:
  void* buffer_locked(int dev) noexcept TRACEML_REQUIRES(mu_) {
    if (dev < 0 || dev >= detail::max_devices) return nullptr;
    if (buffers_.empty()) buffers_.assign(detail::max_devices, nullptr);  // once, at prepare()
    auto& slot = buffers_[static_cast<std::size_t>(dev)];
    if (!slot && detail::rt::cudaMalloc(&slot, detail::marker_buffer_bytes) != cudaSuccess) {
      detail::rt::cudaGetLastError();
      slot = nullptr;
    }
    return slot;
  }

  const bool on_;
  detail::mutex mu_;                                    // guards seq_ and buffers_ (a leaf)
  std::vector<void*> buffers_ TRACEML_GUARDED_BY(mu_);  // per device, allocated on its first marker
  std::uint64_t seq_ TRACEML_GUARDED_BY(mu_) = 0;
  std::atomic<std::uint64_t> issued_[detail::marker_window] = {};  // residue -> last seq issued
};

TRACEML_END_NAMESPACE
