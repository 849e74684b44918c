// traceml: the CUPTI activity reader -- loads CUPTI, hands it preallocated buffers, parses the
// buffers it returns into gpu_record and marker_time values on the now_ns() clock, and keeps them
// until the CUPTI source takes them. One per process (CUPTI has one activity client).
//
// What it enables: CONCURRENT_KERNEL, MEMCPY and MEMSET activity records only. No runtime or driver
// API records and no external correlation: those cost per launch (+55% step time measured on a
// launch-bound loop) and external correlation ids are per thread, which misses backward kernels
// launched from autograd worker threads.
//
// Threads: CUPTI calls buffer_completed on its own thread or on a thread that flushes; parsing runs
// there, never on the training thread. Buffers are handed to CUPTI already zeroed (at start, and
// again here when they come back), so that CUPTI does not zero them on the launching thread.
#pragma once
#include <cupti.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "traceml/clock.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/thread_safety.hpp"
#include "traceml/gpu/activity.hpp"
#include "traceml/gpu/boundary_markers.hpp"
#include "traceml/gpu/cupti_api.hpp"
#include "traceml/gpu/kernel_name.hpp"

TRACEML_BEGIN_NAMESPACE
namespace detail {
inline std::uint64_t CUPTIAPI cupti_now() { return static_cast<std::uint64_t>(now_ns()); }
inline void CUPTIAPI cupti_noop_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}
}  // namespace detail

struct cupti_reader_options {
  std::size_t buffer_bytes = std::size_t{4} << 20;
  std::size_t buffer_count = 16;
  bool memcpy = true;
  bool timestamp_callback = true;
  bool drop_unfinished = false;  ///< sampling: records cut off by a switch-off are not reported
  const char* library = nullptr;
};

class cupti_reader {
 public:
  explicit cupti_reader(const boundary_markers& markers) : markers_(markers) {}
  ~cupti_reader() { stop(false); }
  cupti_reader(const cupti_reader&) = delete;
  cupti_reader& operator=(const cupti_reader&) = delete;

  /// Loads CUPTI, attaches, enables every kind once (to learn whether CUPTI lets us). False, with
  /// `why`, when any of it fails; then stop() undoes what was done.
  bool start(const cupti_reader_options& o, std::string& why) {
    opt_ = o;
    cupti_reader* expected = nullptr;
    if (!instance().compare_exchange_strong(expected, this)) {
      why = "another traceml CUPTI source is active in this process";
      return false;
    }
    owns_instance_ = true;
    if (!api_.load(opt_.library, why)) return false;
    // A subscription with no callbacks costs nothing and tells us whether another CUPTI client
    // (Nsight Systems, a Python profiler) is attached; holding it makes later clients fail loudly
    // instead of silently sharing.
    CUptiResult r = api_.subscribe(&subscriber_, &detail::cupti_noop_callback, nullptr);
    if (r != CUPTI_SUCCESS) return fail(r, why);
    subscribed_ = true;
    if (opt_.timestamp_callback && api_.register_timestamp_callback &&
        api_.register_timestamp_callback(&detail::cupti_now) == CUPTI_SUCCESS)
      clock_callback_ = true;
    else
      sample_clock_offset();
    if (api_.set_attribute) {
      std::uint8_t zeroed = 1;
      std::size_t size = sizeof zeroed;
      if (api_.set_attribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &size, &zeroed) == CUPTI_SUCCESS)
        zeroed_buffers_ = true;
    }
    if (!allocate_buffers()) {
      why = "could not allocate CUPTI activity buffers";
      return false;
    }
    r = api_.register_callbacks(&cupti_reader::buffer_requested, &cupti_reader::buffer_completed);
    if (r != CUPTI_SUCCESS) return fail(r, why);
    std::vector<CUpti_ActivityKind> kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMSET};
    if (opt_.memcpy) kinds.push_back(CUPTI_ACTIVITY_KIND_MEMCPY);
    for (auto k : kinds) {
      r = api_.enable(k);
      if (r != CUPTI_SUCCESS) {
        disable_all();
        enabled_.clear();
        return fail(r, why);
      }
      enabled_.push_back(k);
    }
    return true;
  }

  /// Detaches: every kind off, a forced flush, unsubscribe, and cuptiFinalize when `finalize` (never
  /// while hardware counters are sampled: see detail::pm_sampling_live).
  /// Buffers are freed with the reader: CUPTI holds none after the flush.
  void stop(bool finalize) {
    if (api_.handle) {
      disable_all();
      enabled_.clear();
      if (api_.flush_all) api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      if (subscribed_) api_.unsubscribe(subscriber_);
      subscribed_ = false;
      if (finalize && api_.finalize && !detail::pm_sampling_live().load()) api_.finalize();
      api_.handle = nullptr;  // stays loaded (dlclose never undoes CUPTI's hooks); forgotten here
    }
    if (owns_instance_) instance().store(nullptr);
    owns_instance_ = false;
  }

  /// Every enabled kind on or off together (record_switch.hpp). Training thread or worker.
  void enable_all() noexcept {
    for (auto k : enabled_) api_.enable(k);
  }
  void disable_all() noexcept {
    for (auto k : enabled_) api_.disable(k);
  }
  /// Asks CUPTI for finished records (forced: also the buffers still being filled). The buffers
  /// come back through buffer_completed, on this thread.
  void flush(bool forced) noexcept {
    if (api_.flush_all) api_.flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
  }
  bool clock_callback() const noexcept { return clock_callback_; }

  /// Offset from CUPTI's clock to now_ns(), from the tightest of a few bracketed samples. Used only
  /// when CUPTI cannot stamp with our clock directly; refreshed by the worker to follow drift.
  void sample_clock_offset() noexcept {
    if (clock_callback_) return;
    std::int64_t best_width = INT64_MAX, best = 0;
    for (int i = 0; i < 7; ++i) {
      const std::int64_t t0 = now_ns();
      std::uint64_t c = 0;
      if (api_.get_timestamp(&c) != CUPTI_SUCCESS) return;
      const std::int64_t t1 = now_ns();
      if (t1 - t0 < best_width) {
        best_width = t1 - t0;
        best = t0 + (t1 - t0) / 2 - static_cast<std::int64_t>(c);
      }
    }
    clock_offset_.store(best, std::memory_order_relaxed);
  }

  /// The names its kernel records point at; keep it to read them after the reader is gone.
  std::shared_ptr<const kernel_name_table> kernel_names() const noexcept { return names_; }

  /// How a buffer's records are walked: cuptiActivityGetNextRecord's signature (`*record` null for
  /// the first; anything but CUPTI_SUCCESS after the last).
  using record_walker = decltype(&::cuptiActivityGetNextRecord);

  /// Parses the `valid` bytes of a completed buffer into records and marker times on the now_ns()
  /// clock, kept until take(). CUPTI's buffers are walked by CUPTI's own walker (buffer_completed);
  /// a test passes its own over hand-built records, so that parsing is tested without CUPTI or a
  /// GPU. Any thread; one parse at a time.
  void parse_buffer(std::uint8_t* buffer, std::size_t valid, record_walker next) {
    std::vector<gpu_record> recs;
    std::vector<marker_time> marks;
    {
      detail::lock_guard lock(parse_mu_);  // one parse at a time: the name tables
      CUpti_Activity* a = nullptr;
      while (next(buffer, valid, &a) == CUPTI_SUCCESS) parse_one(a, recs, marks);
    }
    if (opt_.drop_unfinished) {
      // Records cut off by a switch-off come back unfinished (no timestamps); they belong to
      // unrecorded steps (record_switch.hpp), so they are not reported as dropped.
      recs.erase(std::remove_if(recs.begin(), recs.end(), [](const gpu_record& g) { return !g.begin_ns || !g.end_ns; }),
                 recs.end());
      marks.erase(
          std::remove_if(marks.begin(), marks.end(), [](const marker_time& m) { return !m.begin_ns || !m.end_ns; }),
          marks.end());
    }
    detail::lock_guard lock(inbox_mu_);
    inbox_records_.insert(inbox_records_.end(), recs.begin(), recs.end());
    inbox_markers_.insert(inbox_markers_.end(), marks.begin(), marks.end());
  }

  /// Moves out what was parsed since the last call.
  void take(std::vector<gpu_record>& records, std::vector<marker_time>& markers) {
    detail::lock_guard lock(inbox_mu_);
    records.insert(records.end(), inbox_records_.begin(), inbox_records_.end());
    markers.insert(markers.end(), inbox_markers_.begin(), inbox_markers_.end());
    inbox_records_.clear();
    inbox_markers_.clear();
  }

  /// Records CUPTI dropped since the start / since the last take_dropped(); buffers CUPTI asked
  /// for and did not get since the last take_refused().
  std::uint64_t dropped_total() const noexcept { return dropped_total_.load(); }
  std::uint64_t take_dropped() noexcept { return dropped_since_.exchange(0); }
  std::uint64_t take_refused() noexcept { return refused_.exchange(0); }

  std::string explain(CUptiResult r) const {
    switch (r) {
      case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        return "CUPTI already in use by another tool (Nsight Systems or a profiler in this process)";
      case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
        return "insufficient privileges for CUPTI (see NVIDIA's ERR_NVGPUCTRPERM: run as admin or set "
               "NVreg_RestrictProfilingToAdminUsers=0)";
      case CUPTI_ERROR_NOT_INITIALIZED:
        return "CUPTI could not initialize (driver too old for this CUPTI, or no CUDA driver)";
      default: return "CUPTI error: " + api_.describe(r);
    }
  }

 private:
  static std::atomic<cupti_reader*>& instance() {
    static std::atomic<cupti_reader*> p{nullptr};
    return p;
  }
  bool fail(CUptiResult r, std::string& why) const {
    why = explain(r);
    return false;
  }

  bool allocate_buffers() {
    detail::lock_guard lock(pool_mu_);  // no buffer is asked for yet: uncontended; the pool stays under it
    pool_.reserve(opt_.buffer_count);
    try {
      for (std::size_t i = 0; i < opt_.buffer_count; ++i) {
        storage_.emplace_back(new std::uint8_t[opt_.buffer_bytes]());
        pool_.push_back(storage_.back().get());
      }
    } catch (const std::bad_alloc&) {
      return false;
    }
    return true;
  }

  // ---- CUPTI callbacks (CUPTI's threads, or a thread calling flush) ---------------------------
  static void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;
    cupti_reader* self = instance().load();
    if (!self) return;
    detail::lock_guard lock(self->pool_mu_);
    if (self->pool_.empty()) {
      self->refused_.fetch_add(1);
      return;  // CUPTI drops records and counts them: reported as dropped_records
    }
    *buffer = self->pool_.back();
    self->pool_.pop_back();
    *size = self->opt_.buffer_bytes;
  }

  static void CUPTIAPI buffer_completed(CUcontext ctx, std::uint32_t stream_id, std::uint8_t* buffer,
                                        std::size_t /*size*/, std::size_t valid) {
    cupti_reader* self = instance().load();
    if (!self || !buffer) return;
    self->parse_buffer(buffer, valid, self->api_.next_record);
    std::size_t dropped = 0;
    if (self->api_.dropped_records(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped) {
      self->dropped_total_.fetch_add(dropped);
      self->dropped_since_.fetch_add(dropped);
    }
    if (self->zeroed_buffers_) std::memset(buffer, 0, self->opt_.buffer_bytes);  // off the training thread
    detail::lock_guard lock(self->pool_mu_);
    self->pool_.push_back(buffer);
  }

  // ---- parsing --------------------------------------------------------------------------------
  std::int64_t to_now(std::uint64_t cupti_ns) const noexcept {
    if (cupti_ns == 0) return 0;
    return static_cast<std::int64_t>(cupti_ns) + (clock_callback_ ? 0 : clock_offset_.load(std::memory_order_relaxed));
  }

  /// The fields every kernel, memcpy and memset record has, on the now_ns() clock.
  template <class Record>
  gpu_record common_fields(gpu_activity::type what, const Record& r) const noexcept {
    gpu_record g;
    g.what = what;
    g.begin_ns = to_now(r.start);
    g.end_ns = to_now(r.end);
    g.device = r.deviceId;
    g.stream = r.streamId;
    g.correlation = r.correlationId;
    return g;
  }

  void parse_one(const CUpti_Activity* a, std::vector<gpu_record>& recs, std::vector<marker_time>& marks)
      TRACEML_REQUIRES(parse_mu_) {
    switch (a->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        auto* k = reinterpret_cast<const detail::cupti_kernel_record*>(a);
        gpu_record g = common_fields(gpu_activity::type::kernel, *k);
        g.graph = k->graphId;
        g.name = intern(k->name);
        recs.push_back(g);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<const detail::cupti_memcpy_record*>(a);
        gpu_record g = common_fields(gpu_activity::type::memcpy, *m);
        g.bytes = m->bytes;
        g.name = memcpy_name(m->copyKind);
        recs.push_back(g);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<const detail::cupti_memset_record*>(a);
        if (const std::uint64_t seq = markers_.decode(m->value, m->bytes)) {
          marks.push_back(marker_time{seq, m->deviceId, m->streamId, to_now(m->start), to_now(m->end)});
          break;
        }
        gpu_record g = common_fields(gpu_activity::type::memset, *m);
        g.bytes = m->bytes;
        g.name = "memset";
        recs.push_back(g);
        break;
      }
      default: break;
    }
  }

  const char* intern(const char* raw) TRACEML_REQUIRES(parse_mu_) {
    if (!raw) return "<unnamed>";
    auto it = names_by_ptr_.find(raw);
    // CUPTI shares one name pointer across a kernel's records; the strcmp guards against reuse.
    if (it != names_by_ptr_.end() && std::strcmp(it->second.first.c_str(), raw) == 0) return it->second.second;
    const char* stable = names_->keep(shorten_kernel_name(raw));
    names_by_ptr_[raw] = std::make_pair(std::string(raw), stable);
    return stable;
  }

  static const char* memcpy_name(std::uint32_t kind) {
    switch (kind) {
      case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
      case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
      case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
      case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
      case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
      default: return "memcpy";
    }
  }

  const boundary_markers& markers_;
  cupti_reader_options opt_;
  detail::cupti_api api_;
  CUpti_SubscriberHandle subscriber_{};
  std::vector<CUpti_ActivityKind> enabled_;  // set at start, read-only afterwards
  bool owns_instance_ = false, subscribed_ = false, clock_callback_ = false, zeroed_buffers_ = false;
  std::atomic<std::int64_t> clock_offset_{0};
  std::atomic<std::uint64_t> refused_{0}, dropped_total_{0}, dropped_since_{0};

  // Three leaf locks, never held together: pool_mu_ (the free buffers), parse_mu_ (the raw-name
  // cache), inbox_mu_ (parsed values not yet taken). The name table's own lock is taken inside
  // parse_mu_ only: a leaf.
  detail::mutex pool_mu_;
  std::vector<std::unique_ptr<std::uint8_t[]>> storage_ TRACEML_GUARDED_BY(pool_mu_);
  std::vector<std::uint8_t*> pool_ TRACEML_GUARDED_BY(pool_mu_);
  detail::mutex parse_mu_;
  std::unordered_map<const char*, std::pair<std::string, const char*>> names_by_ptr_ TRACEML_GUARDED_BY(parse_mu_);
  // Shared with the run's outputs, which keep the names past the reader; its own lock.
  const std::shared_ptr<kernel_name_table> names_ = std::make_shared<kernel_name_table>();
  detail::mutex inbox_mu_;
  std::vector<gpu_record> inbox_records_ TRACEML_GUARDED_BY(inbox_mu_);
  std::vector<marker_time> inbox_markers_ TRACEML_GUARDED_BY(inbox_mu_);
};

TRACEML_END_NAMESPACE
