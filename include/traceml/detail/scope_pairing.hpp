// traceml: what a GPU source keeps between a scope's begin, its end and its step's end.
//
// A GPU source (CUDA events, CUPTI markers) leaves something on the stream at each scope boundary.
// At the end it needs what the matching begin left (scopes nest per thread, so: the innermost open
// one of this thread), and at the step's end what each closed span left, found by the span's
// identity (recorder thread index and begin time).
//
// Everything is preallocated when the pairing is made; the hooks never allocate:
// - open scopes: one fixed-depth stack per thread, indexed by a small process-wide thread slot
//   (pairing_thread_slot(), taken at a thread's first scope and given back when it exits);
// - closed spans: a fixed open-addressing table keyed by span identity.
// Too many threads, too deep a nesting or too many closed spans between two step ends: said once
// (report_once) and dropped; begins and ends stay paired.
//
// Threads: begin() and end() touch only the calling thread's stack, so they need no lock against
// each other. closed(), take() and drop_rest() share one table: the caller serializes them (the
// sources hold their lock).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>

#include "traceml/config.hpp"
#include "traceml/detail/diagnostics.hpp"
#include "traceml/record.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {

/// Identifies a closed span: the recorder's thread index and its begin time.
inline std::uint64_t span_key(std::uint32_t thread, std::int64_t begin_ns) noexcept {
  return (static_cast<std::uint64_t>(begin_ns) * 1000003ull) ^ thread;
}

/// How many threads may have scopes open in a pairing at once (process-wide).
inline constexpr std::uint32_t max_pairing_threads = 64;

/// Which thread slots are in use, process-wide.
struct pairing_thread_registry {
  std::atomic<bool> taken[max_pairing_threads] = {};
  std::atomic<std::uint64_t> next_token{1};
};
inline pairing_thread_registry& pairing_threads() noexcept {
  static pairing_thread_registry registry;
  return registry;
}

/// A thread's slot: `index` picks its stack in every pairing; `token` is unique to this thread, so
/// a stack left by an exited thread whose slot was reused is recognized as stale.
struct pairing_thread_slot {
  std::uint32_t index = max_pairing_threads;  // none yet
  std::uint64_t token = 0;
  pairing_thread_slot() noexcept = default;
  pairing_thread_slot(const pairing_thread_slot&) = delete;
  pairing_thread_slot& operator=(const pairing_thread_slot&) = delete;
  ~pairing_thread_slot() {
    if (index < max_pairing_threads) pairing_threads().taken[index].store(false, std::memory_order_release);
  }
};
inline thread_local pairing_thread_slot tls_pairing_slot;

/// The calling thread's slot, taken at its first call (a scan of 64 flags); nullptr while every
/// slot is taken (tried again at the next call). Cost once taken: a thread-local read.
inline const pairing_thread_slot* this_thread_pairing_slot() noexcept {
  pairing_thread_slot& me = tls_pairing_slot;
  if (me.index < max_pairing_threads) return &me;
  auto& reg = pairing_threads();
  for (std::uint32_t i = 0; i < max_pairing_threads; ++i) {
    bool expected = false;
    if (reg.taken[i].load(std::memory_order_relaxed)) continue;
    if (reg.taken[i].compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      me.index = i;
      me.token = reg.next_token.fetch_add(1, std::memory_order_relaxed);
      return &me;
    }
  }
  return nullptr;
}

/// Says `message` once per flag (report_once dedups per process; the flag also keeps the repeated
/// case from building strings on the hot path).
inline void report_pairing_overflow(std::atomic<bool>& said, const char* key, const char* message) noexcept {
  if (said.load(std::memory_order_relaxed) || said.exchange(true, std::memory_order_relaxed)) return;
  report_once(key, message);
}

template <class Opened, class Closed>
class scope_pairing {
 public:
  /// `max_closed`: closed spans kept between two step ends; `max_depth`: open scopes per thread.
  /// Allocates all storage now (about 64 x max_depth Opened and 2 x max_closed Closed).
  explicit scope_pairing(std::size_t max_closed = 4096, std::uint32_t max_depth = 32)
      : max_depth_(max_depth ? max_depth : 1),
        max_closed_(max_closed ? max_closed : 1),
        stacks_(new stack[max_pairing_threads]),
        opened_(new Opened[static_cast<std::size_t>(max_pairing_threads) * max_depth_]) {
    std::size_t size = 2;
    unsigned bits = 1;
    for (; size < 2 * max_closed_; size *= 2) ++bits;  // load factor at most 1/2: short probes
    table_.reset(new closed_slot[size]);
    mask_ = size - 1;
    shift_ = 64 - bits;
  }
  scope_pairing(const scope_pairing&) = delete;
  scope_pairing& operator=(const scope_pairing&) = delete;

  /// A scope opened on the calling thread, leaving `o`. Cost: a thread-local read and a store into
  /// this thread's stack. False (and `o` not kept) when this thread has no slot or its stack is
  /// full; the matching end() then returns false too.
  bool begin(const Opened& o) noexcept {
    stack* st = this_thread_stack(true);
    if (!st) return false;
    const std::uint32_t d = st->depth++;
    if (d >= max_depth_) {
      report_pairing_overflow(depth_said_, "pairing-depth",
                              "GPU scope hooks nested deeper than the pairing's stack; the innermost are not timed");
      return false;
    }
    opened_[slot_base(*st) + d] = o;
    return true;
  }

  /// A scope closed on the calling thread: what its begin left, in `o`. False when this thread has
  /// no open scope (it opened before the source was attached) or its begin was dropped.
  /// Cost: a thread-local read and a load from this thread's stack.
  bool end(Opened& o) noexcept {
    stack* st = this_thread_stack(false);
    if (!st || st->depth == 0) return false;
    const std::uint32_t d = --st->depth;
    if (d >= max_depth_) return false;
    o = opened_[slot_base(*st) + d];
    return true;
  }

  /// What the closed span `r` left, kept until its step ends. Cost: a hash and a short probe.
  /// False (and `c` not kept: the caller still owns what it holds) when the table is full.
  bool closed(const span_record& r, const Closed& c) {
    std::size_t i = home(r.thread, r.begin_ns);
    for (; table_[i].used; i = (i + 1) & mask_) {
      if (table_[i].thread == r.thread && table_[i].begin_ns == r.begin_ns) {
        table_[i].value = c;  // the same identity again: the latest wins
        return true;
      }
    }
    if (count_ == max_closed_) {
      report_pairing_overflow(closed_said_, "pairing-closed",
                              "more closed GPU scopes between two step ends than the pairing holds; the extra are "
                              "not timed");
      return false;
    }
    table_[i].used = true;
    table_[i].thread = r.thread;
    table_[i].begin_ns = r.begin_ns;
    table_[i].step = r.step;
    table_[i].value = c;
    ++count_;
    return true;
  }

  /// What span `s` left when it closed (Closed{} when nothing), forgotten afterwards.
  Closed take(const span_record& s) {
    for (std::size_t i = home(s.thread, s.begin_ns); table_[i].used; i = (i + 1) & mask_) {
      if (table_[i].thread != s.thread || table_[i].begin_ns != s.begin_ns) continue;
      Closed c = std::move(table_[i].value);
      erase_at(i);
      return c;
    }
    return Closed{};
  }

  /// Hands what every other closed span left (scopes outside the step) to `f`, and forgets it.
  /// Cost: nothing when every closed span was taken, else a pass over the table.
  template <class F>
  void drop_rest(F&& f) {
    drop_through(std::numeric_limits<std::int32_t>::max(), std::forward<F>(f));
  }

  /// As drop_rest(), for the spans of steps up to `step` (and of none) only: a step's end that runs
  /// after later steps began (on the profiler's step worker) keeps what their scopes left.
  template <class F>
  void drop_through(std::int32_t step, F&& f) {
    if (count_ == 0) return;
    for (std::size_t i = 0; i <= mask_;) {
      if (!table_[i].used || table_[i].step > step) {
        ++i;
        continue;
      }
      f(table_[i].value);
      erase_at(i);  // shifts a later entry into slot i: look at it again
    }
  }

  /// Closed spans kept now (taken by neither take() nor drop_rest() yet).
  std::size_t closed_count() const noexcept { return count_; }

 private:
  struct stack {
    std::uint64_t owner = 0;  // token of the thread whose scopes these are
    std::uint32_t depth = 0;  // open scopes, those dropped past max_depth_ included
  };
  struct closed_slot {
    std::int64_t begin_ns = 0;
    std::uint32_t thread = 0;
    std::int32_t step = -1;
    bool used = false;
    Closed value{};
  };

  /// This thread's stack; a stack left by an exited thread that had this slot is emptied first
  /// (`opening`) or ignored. nullptr when the thread has no slot.
  stack* this_thread_stack(bool opening) noexcept {
    const pairing_thread_slot* me = this_thread_pairing_slot();
    if (!me) {
      if (opening)
        report_pairing_overflow(threads_said_, "pairing-threads",
                                "more than 64 threads with GPU scopes open at once; scopes of the extra threads are "
                                "not timed");
      return nullptr;
    }
    stack& st = stacks_[me->index];
    if (st.owner != me->token) {
      if (!opening) return nullptr;
      st.owner = me->token;
      st.depth = 0;
    }
    return &st;
  }
  std::size_t slot_base(const stack& st) const noexcept {
    return static_cast<std::size_t>(&st - stacks_.get()) * max_depth_;
  }

  std::size_t home(std::uint32_t thread, std::int64_t begin_ns) const noexcept {
    return static_cast<std::size_t>((span_key(thread, begin_ns) * 0x9E3779B97F4A7C15ull) >> shift_);  // top bits
  }

  /// Linear probing's deletion: shift later entries of the same run back so lookups stay correct.
  void erase_at(std::size_t i) {
    for (std::size_t j = (i + 1) & mask_; table_[j].used; j = (j + 1) & mask_) {
      const std::size_t k = home(table_[j].thread, table_[j].begin_ns);
      const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);  // k in (i, j], cyclically
      if (stays) continue;
      table_[i].begin_ns = table_[j].begin_ns;
      table_[i].thread = table_[j].thread;
      table_[i].step = table_[j].step;
      table_[i].value = std::move(table_[j].value);
      i = j;
    }
    table_[i].used = false;
    table_[i].value = Closed{};
    --count_;
  }

  std::uint32_t max_depth_;
  std::size_t max_closed_;
  std::unique_ptr<stack[]> stacks_;   // one per thread slot
  std::unique_ptr<Opened[]> opened_;  // max_pairing_threads x max_depth_
  std::unique_ptr<closed_slot[]> table_;
  std::size_t mask_ = 0;
  unsigned shift_ = 63;
  std::size_t count_ = 0;
  std::atomic<bool> depth_said_{false}, closed_said_{false}, threads_said_{false};
};

}  // namespace detail
TRACEML_END_NAMESPACE
