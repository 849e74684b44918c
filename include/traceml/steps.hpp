// traceml: steps over a data loader. The loop a LibTorch trainer already has, one step per batch:
//
//   for (auto& batch : traceml::steps(*data_loader)) {      // a step per batch, its fetch timed
//     { TRACEML_PHASE(forward);   loss = model(batch.data); }
//     { TRACEML_PHASE(backward);  loss.backward(); }
//     { TRACEML_PHASE(optimizer); optimizer.step(); optimizer.zero_grad(); }
//   }
//   for (auto& batch : traceml::steps(*data_loader, 4)) {   // a step per 4 batches, one micro-batch each
//     ...
//   }
//
// Each fetch (the loader's begin() and each increment, up to the compare with its end that a
// torch::data iterator needs to actually fetch) is timed as the dataloader phase of the step (or
// micro-batch) it feeds: the step begins when its fetch began. The step ends when the next fetch
// begins, when the range ends (at the time the fetch that found the end began), and on `break` or an
// exception (when the range object goes, with the loop). The range's end (the loader exhausted, not a
// `break`) also marks an epoch boundary (traceml::mark_epoch()): the time until the next range's first
// step is reported as an epoch gap (the summary's outside_steps). With accumulation N, a step holds N batches,
// each in its own micro-batch; a range that ends inside a step ends that step with fewer.
//
// Works with any range a range-based for accepts: torch::data loaders (whose input iterators compare
// with end() to fetch), standard containers, generators. A range given as an lvalue is held by
// reference, a temporary is moved into the range object. The fetch of a batch is known to have
// produced one only when it returns, so the step's and the micro-batch's scopes open right after it,
// dated from its beginning: figures and the trace are as if they had opened before it, but NVTX
// ranges and a GPU source's boundaries begin after the fetch (GPU work the fetch itself launches, a
// copy to the device inside the loader, is outside the step's GPU window: copy inside the body, or
// time the copy with TRACEML_PHASE(dataloader) there).
//
// Cost per batch: two clock reads and the step's, micro-batch's and dataloader phase's scopes.
// Under TRACEML_DISABLE the range only iterates.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>  // also std::begin, std::end
#include <type_traits>
#include <utility>

#include "traceml/config.hpp"
#include "traceml/phase.hpp"

TRACEML_BEGIN_NAMESPACE

namespace detail {
namespace range_access {
using std::begin;
using std::end;
/// begin(r) and end(r) as a range-based for finds them: members, else by argument-dependent lookup.
template <class R>
auto range_begin(R& r) -> decltype(begin(r)) {
  return begin(r);
}
template <class R>
auto range_end(R& r) -> decltype(end(r)) {
  return end(r);
}
}  // namespace range_access
using range_access::range_begin;
using range_access::range_end;
}  // namespace detail

TRACEML_BEGIN_MODE_NAMESPACE

/// What traceml::steps returns: a range whose iteration makes the steps. Not copyable or movable
/// (it holds the open step); use it where it is made, in the range-based for.
template <class Range>
class step_range {
  using range_type = std::remove_reference_t<Range>;
  using inner_iterator = decltype(detail::range_begin(std::declval<range_type&>()));
  using inner_sentinel = decltype(detail::range_end(std::declval<range_type&>()));

 public:
  /// The end of the range: compares equal to the iterator once the fetch found the inner range's end.
  struct sentinel {};

  class iterator {
   public:
    using value_type = std::remove_cv_t<std::remove_reference_t<decltype(*std::declval<inner_iterator&>())>>;
    using difference_type = std::ptrdiff_t;
    using reference = decltype(*std::declval<inner_iterator&>());

    /// The batch the last fetch produced.
    reference operator*() const { return **owner_->it_; }
    /// Ends the micro-batch (and, every `accumulation` batches, the step), then fetches the next.
    iterator& operator++() {
      owner_->next();
      return *this;
    }
    friend bool operator==(const iterator& i, sentinel) noexcept { return i.at_end(); }
    friend bool operator!=(const iterator& i, sentinel) noexcept { return !i.at_end(); }
    friend bool operator==(sentinel, const iterator& i) noexcept { return i.at_end(); }
    friend bool operator!=(sentinel, const iterator& i) noexcept { return !i.at_end(); }

   private:
    friend class step_range;
    explicit iterator(step_range* owner) noexcept : owner_(owner) {}
    bool at_end() const noexcept { return owner_->done_; }
    step_range* owner_;
  };

  step_range(Range&& range, int accumulation) : range_(std::forward<Range>(range)), accumulation_(accumulation) {
    if (accumulation < 1)
      throw std::invalid_argument("traceml::steps: accumulation must be at least 1 (batches per step), got " +
                                  std::to_string(accumulation));
  }
  step_range(const step_range&) = delete;
  step_range& operator=(const step_range&) = delete;
  step_range(step_range&&) = delete;
  step_range& operator=(step_range&&) = delete;
  /// The loop is over (its end, a `break`, an exception): whatever is open ends now.
  ~step_range() { close_all(); }

  /// Fetches the first batch (the inner range's begin(), and the compare with its end).
  iterator begin() {
    close_all();
    done_ = true;
    it_.reset();
    end_.reset();
    fetch(true);
    return iterator(this);
  }
  sentinel end() const noexcept { return {}; }

  /// Batches per step.
  int accumulation() const noexcept { return accumulation_; }

 private:
  void next() {
    if (done_) return;
    close_microbatch();
    if (accumulation_ == 1 || in_step_ == accumulation_) close_step();
    fetch(false);
  }

  static std::int64_t stamp() noexcept {
#if TRACEML_ENABLED
    return now_ns();
#else
    return 0;
#endif
  }

  void fetch(bool first) {
    const std::int64_t t0 = stamp();
    if (first) {
      it_.emplace(detail::range_begin(range_));
      end_.emplace(detail::range_end(range_));
    } else {
      ++*it_;
    }
    const bool more = *it_ != *end_;  // a torch::data iterator fetches its first batch here
    const std::int64_t t1 = stamp();
    if (!more) {
      done_ = true;
      close_step_at(t0);   // a step the range ended inside ends where the last fetch began
      mark_range_end(t1);  // the loader is exhausted: an epoch's end
      return;
    }
    done_ = false;
    open(t0, t1);
  }

#if TRACEML_ENABLED
  void open(std::int64_t fetch_begin, std::int64_t fetch_end) noexcept {
    if (!step_open_) {
      detail::begin_span(step_, phase_kind::step, phase::step::name);
      step_.begin_ns = fetch_begin;
      step_open_ = true;
      in_step_ = 0;
    }
    if (accumulation_ > 1) {
      detail::begin_span(micro_, phase_kind::microbatch, phase::microbatch::name);
      micro_.begin_ns = fetch_begin;
      micro_open_ = true;
    }
    ++in_step_;
    detail::open_span fetch;
    detail::begin_span(fetch, phase_kind::dataloader, phase::dataloader::name);
    fetch.begin_ns = fetch_begin;
    detail::end_span_at(fetch, fetch_end);
  }
  void close_microbatch() noexcept {
    if (micro_open_) detail::end_span(micro_);
    micro_open_ = false;
  }
  void close_step() noexcept {
    if (step_open_) detail::end_span(step_);
    step_open_ = false;
  }
  void close_step_at(std::int64_t t) noexcept {
    close_microbatch();
    if (step_open_) detail::end_span_at(step_, t);
    step_open_ = false;
  }
  void close_all() noexcept {
    close_microbatch();
    close_step();
  }
  static void mark_range_end(std::int64_t t) noexcept { detail::mark_epoch_at(t); }
  detail::open_span step_;
  detail::open_span micro_;
  bool step_open_ = false;
  bool micro_open_ = false;
#else
  void open(std::int64_t, std::int64_t) noexcept {}
  void close_microbatch() noexcept {}
  void close_step() noexcept {}
  void close_step_at(std::int64_t) noexcept {}
  void close_all() noexcept {}
  static void mark_range_end(std::int64_t) noexcept {}
#endif

  Range range_;  // a reference for an lvalue, the object itself for a temporary
  int accumulation_;
  int in_step_ = 0;  // batches of the open step so far
  bool done_ = true;
  std::optional<inner_iterator> it_;
  std::optional<inner_sentinel> end_;
};

/// `for (auto& batch : traceml::steps(loader))`: one step per batch, its fetch timed as the step's
/// dataloader phase (this header's top says when steps begin and end).
template <class Range>
step_range<Range> steps(Range&& range) {
  return step_range<Range>(std::forward<Range>(range), 1);
}

/// `for (auto& batch : traceml::steps(loader, accumulation))`: one step per `accumulation` batches
/// (at least 1), each batch a micro-batch whose fetch is its dataloader phase.
template <class Range>
step_range<Range> steps(Range&& range, int accumulation) {
  return step_range<Range>(std::forward<Range>(range), accumulation);
}

TRACEML_END_MODE_NAMESPACE
TRACEML_END_NAMESPACE
