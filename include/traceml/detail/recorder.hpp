// traceml: the recorder. Every scope (and every trainer-callback hook) ends by writing one
// span_record into a ring owned by the calling thread: no lock, no allocation, one pointer bump.
// The profiler drains all rings when a step ends (a slow path that may lock and allocate), taking
// at most a bounded number of other threads' records (drain_step_end), so that threads which flood
// their rings cannot make a step end take unbounded time.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "traceml/clock.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/activation.hpp"
#include "traceml/detail/nvtx.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/phase_kind.hpp"
#include "traceml/record.hpp"
#include "traceml/thread_identity.hpp"

TRACEML_BEGIN_NAMESPACE

/// Receives notifications from the recorder. The profiler is one; GPU time sources that need phase
/// boundaries (CUDA events) are reached through it. Hooks run on the thread of the scope.
class recorder_observer {
 public:
  virtual ~recorder_observer() = default;
  /// A scope opened (only called while observe_phases is on: it is on the hot path).
  virtual void on_scope_begin(phase_kind, const char* /*name*/, std::int32_t /*step*/,
                              std::int32_t /*microbatch*/) noexcept {}
  /// A scope closed and its record is in the ring (only while observe_phases is on).
  virtual void on_scope_end(const span_record&) noexcept {}
  /// A step scope closed; its record and those of its phases are in the rings. Always called.
  virtual void on_step_end(const span_record&) noexcept {}
};

namespace detail {

/// Single-producer (the owning thread) single-consumer (the drain, under drain_mu) ring.
///
/// Phase records may fill only phase_room of its slots; the last `reserved` are kept for the records
/// that close micro-batches and steps (a micro-batch may take all but the last slot, a step every
/// slot). A step on whose thread more phases ended than the ring holds thus still ends: its own
/// record finds room, and the phases that did not (counted in `dropped`) are what the profiler says
/// that step lost (step_result::lost_phases).
struct thread_ring {
  static constexpr std::size_t capacity = std::size_t{1} << 14;  // 16384 records, 640 KiB
  static constexpr std::size_t mask = capacity - 1;
  static constexpr std::size_t reserved = 256;                    ///< slots phase records may not take
  static constexpr std::size_t phase_room = capacity - reserved;  ///< phase records a ring holds
  /// The slots a record of `kind` may fill (what end_span passes to claim()).
  static constexpr std::uint64_t room_for(phase_kind kind) noexcept {
    return kind == phase_kind::step ? capacity : kind == phase_kind::microbatch ? capacity - 1 : phase_room;
  }

  alignas(64) std::atomic<std::uint64_t> head{0};  // next slot the consumer reads
  alignas(64) std::atomic<std::uint64_t> tail{0};  // next slot the producer writes
  std::atomic<std::uint64_t> dropped{0};           // records lost to a full ring since the last drain
  std::atomic<std::uint64_t> dropped_total{0};     // ... since the ring was made (read at a step's end)
  std::atomic<bool> owned{true};                   // false once its thread exited: reusable
  std::uint32_t thread_id = 0;                     // of the thread that owns it now
  span_record slots[capacity];

  /// The next free slot for the producer to fill in place, then publish(); nullptr when `room` of
  /// the ring's slots (room_for(): fewer for phases than for steps) are taken (the loss is counted:
  /// the training thread never blocks).
  span_record* claim(std::uint64_t room = capacity) noexcept {
    const std::uint64_t t = tail.load(std::memory_order_relaxed);
    if (t - head.load(std::memory_order_acquire) >= room) {
      dropped.fetch_add(1, std::memory_order_relaxed);
      dropped_total.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    return &slots[t & mask];
  }
  /// Hands the slot claim() gave to the consumer.
  void publish() noexcept { tail.store(tail.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  bool push(const span_record& r) noexcept {
    span_record* slot = claim(room_for(r.kind));
    if (!slot) return false;
    *slot = r;
    publish();
    return true;
  }

  /// Records published and not yet drained (consumer side; the producer may add more meanwhile).
  std::uint64_t available() const noexcept {
    return tail.load(std::memory_order_acquire) - head.load(std::memory_order_relaxed);
  }

  /// Hands the oldest `take` of the first `available` records to `f` (oldest first) and discards
  /// the rest of them; returns how many it discarded. Consumer only, `take <= available <=` what
  /// available() returned. Discarding costs nothing per record: the head moves past them.
  template <class F>
  std::uint64_t drain(F&& f, std::uint64_t available, std::uint64_t take) {
    const std::uint64_t h = head.load(std::memory_order_relaxed);
    for (std::uint64_t i = 0; i < take; ++i) f(slots[(h + i) & mask]);
    head.store(h + available, std::memory_order_release);
    return available - take;
  }
};

/// The value of recorder_state::step while a step opens (claimed, its index not yet taken) or closes
/// (its record written, its end being processed by the profiler): negative, so that a phase that
/// begins then counts as outside any step, and not -1, so that no other step can begin meanwhile.
inline constexpr std::int32_t step_changing = -2;

struct recorder_state {
  std::atomic<bool> enabled{true};
  /// The step open on the training thread, -1 if none (step_changing while one opens or closes).
  /// Steps follow one another: a step scope that begins while another is open is ignored
  /// (begin_span), and the next step cannot begin before the last one's end was processed (end_span).
  std::atomic<std::int32_t> step{-1};
  std::atomic<std::uint64_t> overlapping_steps{0};  // step scopes ignored so far (the profiler resets it)
  std::atomic<std::int32_t> microbatch{-1};         // micro-batch open, -1 if none
  std::atomic<std::int32_t> next_step{0};
  std::atomic<std::int32_t> next_microbatch{0};
  std::atomic<recorder_observer*> observer{nullptr};
  std::atomic<bool> observe_phases{false};
  std::atomic<std::uint32_t> next_thread_id{0};  // threads are numbered in order of first record

  detail::mutex registry_mu;  // guards rings and threads (registration and snapshot only)
  std::vector<std::unique_ptr<thread_ring>> rings TRACEML_GUARDED_BY(registry_mu);
  /// The OS identity of every thread that acquired a ring, threads[i].index == i (indices are
  /// handed out under registry_mu), for the trace. Bounded: later threads keep their bare index.
  static constexpr std::size_t max_thread_identities = 4096;
  std::vector<thread_identity> threads TRACEML_GUARDED_BY(registry_mu);
  detail::mutex drain_mu;  // one consumer at a time
  /// Epoch marks (mark_epoch(), the end of a traceml::steps range) not yet taken by a profiler:
  /// their times. Rare (one per epoch), so a lock is cheaper than a ring of their own; bounded.
  static constexpr std::size_t max_epoch_marks = 4096;
  detail::mutex epoch_mu;
  std::vector<std::int64_t> epoch_marks TRACEML_GUARDED_BY(epoch_mu);
};

#if defined(__GNUC__)
__attribute__((always_inline))  // on every scope's path: a guard check, not a call
#endif
inline recorder_state&
recorder() noexcept {
  // Never destroyed: exit handlers (the TRACEML_OUT session's finish) and threads still running at
  // exit drain it after static destructors may have run.
  static recorder_state& state = *new recorder_state;
  return state;
}

inline thread_local thread_ring* tls_ring = nullptr;
inline thread_local std::uint8_t tls_phase_depth = 0;

/// Gives the ring back for reuse when its thread exits (records already in it stay drainable).
struct ring_releaser {
  thread_ring* ring = nullptr;
  ~ring_releaser() {
    if (ring) ring->owned.store(false, std::memory_order_release);
    tls_ring = nullptr;
  }
};

/// Slow path, with registry_mu held: remembers who the thread that got index `index` is (a system
/// call and a name lookup, once per thread; records carry only the index).
inline void remember_thread(recorder_state& R, std::uint32_t index) TRACEML_REQUIRES(R.registry_mu) {
  if (R.threads.size() >= recorder_state::max_thread_identities) return;
  R.threads.push_back(thread_identity{index, current_os_thread_id(index), current_thread_name()});
}

/// Slow path, once per thread: reuse a drained ring whose thread exited, or allocate one.
inline thread_ring* acquire_ring() noexcept {
  try {
    auto& R = recorder();
    detail::lock_guard lock(R.registry_mu);
    thread_ring* ring = nullptr;
    for (auto& r : R.rings) {
      // Only a drained ring: a new thread must get a whole ring's room, not what an exited thread
      // left undrained.
      if (r->head.load(std::memory_order_acquire) != r->tail.load(std::memory_order_acquire)) continue;
      bool expected = false;
      if (r->owned.compare_exchange_strong(expected, true)) {
        ring = r.get();
        break;
      }
    }
    if (!ring) {
      R.rings.push_back(std::make_unique<thread_ring>());
      ring = R.rings.back().get();
    }
    // A reused ring gets a new id: records name threads, not rings.
    ring->thread_id = R.next_thread_id.fetch_add(1, std::memory_order_relaxed);
    remember_thread(R, ring->thread_id);
    static thread_local ring_releaser releaser;
    releaser.ring = ring;
    tls_ring = ring;
    return ring;
  } catch (...) {
    return nullptr;  // out of memory: this thread records nothing rather than crash
  }
}

inline std::uint32_t current_thread_index() noexcept {
  thread_ring* ring = tls_ring ? tls_ring : acquire_ring();
  return ring ? ring->thread_id : 0;
}

/// The state of an open scope, kept on the stack by scopes and in a per-thread stack by callbacks.
struct open_span {
  std::int64_t begin_ns = 0;
  const char* name = "";
  std::int32_t step = -1;
  std::int32_t microbatch = -1;
  phase_kind kind = phase_kind::user;
  std::uint8_t nesting = 0;
  bool active = false;
};

TRACEML_BEGIN_MODE_NAMESPACE
/// Cost: a few relaxed atomic loads (the switch, the open step and micro-batch; a step or
/// micro-batch also bumps its counter, and a step claims the open step with one compare-and-swap),
/// an NVTX push, a clock read, plus the observer's call when observe_phases is on.
inline void begin_span(open_span& s, phase_kind kind, const char* name) noexcept {
  auto& R = recorder();
  if (!R.enabled.load(std::memory_order_relaxed)) {
    s.active = false;
    return;
  }
  s.active = true;
  s.kind = kind;
  s.name = name;
  std::int32_t nvtx_index = 0;
  if (kind == phase_kind::step) {
    // No profiler: the first such step starts the TRACEML_OUT session or says nothing is collected.
    if (!R.observer.load(std::memory_order_relaxed)) on_step_begin_unobserved();
    // Steps follow one another (one training loop): a step that begins while another is open, on
    // another thread or around this one, is ignored and counted; its phases count in the open step,
    // as a worker thread's do. The profiler says so once (profiler.hpp).
    std::int32_t none = -1;
    if (!R.step.compare_exchange_strong(none, step_changing, std::memory_order_relaxed)) {
      R.overlapping_steps.fetch_add(1, std::memory_order_relaxed);
      s.active = false;
      return;
    }
    s.step = R.next_step.fetch_add(1, std::memory_order_relaxed);
    s.microbatch = -1;
    R.next_microbatch.store(0, std::memory_order_relaxed);
    R.microbatch.store(-1, std::memory_order_relaxed);
    R.step.store(s.step, std::memory_order_relaxed);
    nvtx_index = s.step;
  } else if (kind == phase_kind::microbatch) {
    s.step = R.step.load(std::memory_order_relaxed);
    s.microbatch = R.next_microbatch.fetch_add(1, std::memory_order_relaxed);
    R.microbatch.store(s.microbatch, std::memory_order_relaxed);
    nvtx_index = s.microbatch;
  } else {
    s.step = R.step.load(std::memory_order_relaxed);
    s.microbatch = R.microbatch.load(std::memory_order_relaxed);
  }
  s.nesting = tls_phase_depth;
  if (is_phase(kind)) ++tls_phase_depth;
  nvtx_push(name, kind, nvtx_index);
  if (R.observe_phases.load(std::memory_order_relaxed)) {
    if (auto* o = R.observer.load(std::memory_order_acquire)) o->on_scope_begin(kind, name, s.step, s.microbatch);
  }
  s.begin_ns = now_ns();
}

inline void fill_record(span_record& r, const open_span& s, std::int64_t end_ns, std::uint32_t thread) noexcept {
  r.begin_ns = s.begin_ns;
  r.end_ns = end_ns;
  r.name = s.name;
  r.thread = thread;
  r.step = s.step;
  r.microbatch = s.microbatch;
  r.kind = s.kind;
  r.nesting = s.nesting;
}

inline void notify_end(recorder_state& R, const span_record& r) noexcept {
  auto* o = R.observer.load(std::memory_order_acquire);
  if (!o) return;
  if (R.observe_phases.load(std::memory_order_relaxed)) o->on_scope_end(r);
  if (r.kind == phase_kind::step) o->on_step_end(r);
}

/// end_span's work for an active span that ended at `end` (end_span and end_span_at below).
#if defined(__GNUC__)
__attribute__((always_inline))  // on every scope's path: one body, no call
#endif
inline void
end_span_record(open_span& s, std::int64_t end) noexcept {
  auto& R = recorder();
  nvtx_pop();
  std::uint64_t room;
  if (is_phase(s.kind)) {
    if (tls_phase_depth > 0) --tls_phase_depth;
    room = thread_ring::phase_room;
  } else if (s.kind == phase_kind::microbatch) {
    R.microbatch.store(-1, std::memory_order_relaxed);
    room = thread_ring::capacity - 1;
  } else {
    R.microbatch.store(-1, std::memory_order_relaxed);
    R.step.store(step_changing, std::memory_order_relaxed);
    room = thread_ring::capacity;
  }
  s.active = false;
  thread_ring* ring = tls_ring ? tls_ring : acquire_ring();
  if (span_record* slot = ring ? ring->claim(room) : nullptr) {
    fill_record(*slot, s, end, ring->thread_id);
    ring->publish();  // the producer writes this slot again only after the ring wrapped
    notify_end(R, *slot);
  } else {  // the ring is full (the loss is counted) or missing: observers still see the scope
    span_record r;
    fill_record(r, s, end, ring ? ring->thread_id : 0);
    notify_end(R, r);
  }
  // Only now may the next step begin: a step opened on another thread meanwhile, then closed, would
  // have drained this step's records before the profiler summarized this step.
  if (s.kind == phase_kind::step) R.step.store(-1, std::memory_order_relaxed);
}

/// Cost: a clock read, an NVTX pop and a 40-byte record written in place into this thread's ring
/// (fields stored straight into the slot: a record built aside and copied made the CPU stall on
/// store forwarding), plus the observer's calls when one is set (a step's end: the profiler's drain).
/// The room a record may take (thread_ring::room_for) is set in the branches on its kind that the
/// scope takes anyway: no compare more than a ring without a reserve.
inline void end_span(open_span& s) noexcept {
  if (!s.active) return;
  end_span_record(s, now_ns());
}

/// As end_span, with an end time the caller read earlier (traceml::steps ends a fetch's phase when
/// its fetch returned, and a step when the fetch that found the range's end began).
inline void end_span_at(open_span& s, std::int64_t end) noexcept {
  if (!s.active) return;
  end_span_record(s, end);
}
TRACEML_END_MODE_NAMESPACE

/// Notes an epoch boundary at `t` (a time read from now_ns()). Cost: a lock and a store, once per
/// epoch; nothing while recording is off. A mark beyond max_epoch_marks untaken is dropped.
inline void mark_epoch_at(std::int64_t t) noexcept {
  auto& R = recorder();
  if (!R.enabled.load(std::memory_order_relaxed)) return;
  try {
    detail::lock_guard lock(R.epoch_mu);
    if (R.epoch_marks.size() < recorder_state::max_epoch_marks) R.epoch_marks.push_back(t);
  } catch (...) {  // out of memory: the mark is lost, the training goes on
  }
}

/// The epoch marks made since the last call, oldest first (the profiler's step worker; slow path).
inline std::vector<std::int64_t> take_epoch_marks() {
  auto& R = recorder();
  std::vector<std::int64_t> out;
  detail::lock_guard lock(R.epoch_mu);
  out.swap(R.epoch_marks);
  return out;
}

/// The recording threads' OS identities so far, in index order (slow path: takes the registry lock).
inline std::vector<thread_identity> thread_identities() {
  auto& R = recorder();
  detail::lock_guard lock(R.registry_mu);
  return R.threads;
}

/// How many of its `available` records each ring hands over when `limit` records are shared between
/// rings: water-filling (rings in ascending order, each offered an equal part of what is left), so
/// that a ring holding at most limit / rings records loses nothing and the rest is split evenly
/// between the rings that hold more. The shares add up to min(limit, the total). Pure;
/// O(rings log rings).
///   fair_shares({5, 100, 100}, 45) == {5, 20, 20}
inline std::vector<std::uint64_t> fair_shares(const std::vector<std::uint64_t>& available, std::uint64_t limit) {
  std::vector<std::size_t> order(available.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Stable: of equal rings, the later ones get the remainder of the division (deterministic).
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return available[a] < available[b]; });
  std::vector<std::uint64_t> share(available.size(), 0);
  std::uint64_t left = limit;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::uint64_t equal = left / (order.size() - k);
    share[order[k]] = std::min(available[order[k]], equal);
    left -= share[order[k]];
  }
  return share;
}

/// The calling thread's ring (nullptr before its first record) and what it lost to being full since
/// it was made. Cheap: a thread-local read and a relaxed load (the profiler's step end reads them).
inline const thread_ring* own_ring() noexcept { return tls_ring; }
/// Records in the calling thread's ring that no drain has taken yet.
inline std::uint64_t own_ring_backlog() noexcept { return tls_ring ? tls_ring->available() : 0; }
inline std::uint64_t own_dropped_total() noexcept {
  return tls_ring ? tls_ring->dropped_total.load(std::memory_order_relaxed) : 0;
}

/// What a step-end drain did, beyond the records it handed over.
struct drain_counts {
  /// Records lost to a full ring since the last drain (never written): at a step's end, what that
  /// step lost (phase records past thread_ring::phase_room on a thread between two step ends).
  std::uint64_t ring_full = 0;
  std::uint64_t capped = 0;        ///< records of other threads this drain discarded: beyond its limit
  std::uint64_t capped_rings = 0;  ///< rings that lost records to the limit
};

/// The drain at a step's end: hands `f` every record of the calling thread's ring (what the thread
/// that closes the step recorded itself: at most thread_ring::capacity, its own cost) and at most
/// `others_limit` records of the other threads' rings, shared by fair_shares() (a thread that recorded
/// little loses nothing; each flooding one gives its oldest records, up to its share). The rest of
/// what the other rings held is discarded and counted, so that the next step starts from empty rings
/// rather than from stale records. Each ring hands its records over in the order they were written.
/// Cost: the records handed over, plus O(rings log rings); never more than thread_ring::capacity +
/// `others_limit` records, however fast other threads record. Slow path: locks, allocates.
///
/// `whole`: the ring taken whole, that of the thread that closed the steps (the profiler's step
/// worker drains for the training thread); by default the calling thread's.
template <class F>
drain_counts drain_step_end(F&& f, std::uint64_t others_limit, const thread_ring* whole) {
  auto& R = recorder();
  detail::lock_guard drain_lock(R.drain_mu);
  std::vector<thread_ring*> rings;
  {
    detail::lock_guard lock(R.registry_mu);
    for (auto& r : R.rings) rings.push_back(r.get());
  }
  // Each ring's count is read once: a ring's producer may go on writing, and what it writes after
  // this instant waits for the next drain.
  std::vector<std::uint64_t> available(rings.size());
  std::vector<std::uint64_t> others;  // the other rings' counts, in ring order
  for (std::size_t i = 0; i < rings.size(); ++i) {
    available[i] = rings[i]->available();
    if (rings[i] != whole) others.push_back(available[i]);
  }
  const std::vector<std::uint64_t> share = fair_shares(others, others_limit);
  drain_counts counts;
  for (std::size_t i = 0, k = 0; i < rings.size(); ++i) {
    const std::uint64_t take = rings[i] == whole ? available[i] : share[k++];
    const std::uint64_t discarded = rings[i]->drain(f, available[i], take);
    counts.capped += discarded;
    if (discarded) ++counts.capped_rings;
    counts.ring_full += rings[i]->dropped.exchange(0, std::memory_order_relaxed);
  }
  return counts;
}

template <class F>
drain_counts drain_step_end(F&& f, std::uint64_t others_limit) {
  return drain_step_end(std::forward<F>(f), others_limit, tls_ring);
}

/// Move every buffered record to `f` and return the number dropped to full rings since the last
/// call. No limit: tests, and the profiler's start (which discards what it gets).
template <class F>
std::uint64_t drain_all(F&& f) {
  return drain_step_end(std::forward<F>(f), std::numeric_limits<std::uint64_t>::max()).ring_full;
}

}  // namespace detail

TRACEML_BEGIN_MODE_NAMESPACE
/// Switch recording on or off at run time, without rebuilding. A scope opened while off records
/// nothing (and opens no NVTX range). Cost when off: one relaxed atomic load per scope.
inline void set_enabled(bool on) noexcept { detail::recorder().enabled.store(on, std::memory_order_relaxed); }
inline bool enabled() noexcept { return TRACEML_ENABLED && detail::recorder().enabled.load(std::memory_order_relaxed); }
/// Marks an epoch boundary now (also TRACEML_EPOCH(); the end of a traceml::steps range marks one
/// itself): the gap between steps that holds it is reported as an epoch gap, apart from the others
/// (the summary's outside_steps). Call it between epochs, outside any step. Cost: a lock, once.
inline void mark_epoch() noexcept { detail::mark_epoch_at(now_ns()); }
TRACEML_END_MODE_NAMESPACE

TRACEML_END_NAMESPACE
