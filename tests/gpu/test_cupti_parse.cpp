// The CUPTI reader's parsing on hand-built activity records: no CUPTI library, no GPU. The records
// are laid out back to back in a buffer as CUPTI lays them out, and walked by a walker of
// cuptiActivityGetNextRecord's signature (record sizes by kind, 8-byte aligned). Also: a stream
// provider that throws says once what it fell back to.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "traceml/gpu/cuda_stream.hpp"
#include "traceml/gpu/cupti_reader.hpp"

using namespace traceml;

namespace {

/// A record of a kind the reader does not enable (it must skip it).
struct other_record {
  CUpti_Activity header;
  std::uint64_t payload[3];
};

std::size_t record_size(const CUpti_Activity* a) {
  std::size_t n = sizeof(other_record);
  switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: n = sizeof(detail::cupti_kernel_record); break;
    case CUPTI_ACTIVITY_KIND_MEMCPY: n = sizeof(detail::cupti_memcpy_record); break;
    case CUPTI_ACTIVITY_KIND_MEMSET: n = sizeof(detail::cupti_memset_record); break;
    default: break;
  }
  return (n + 7) / 8 * 8;
}

/// cuptiActivityGetNextRecord over a hand-built buffer: the first record when `*record` is null,
/// else the one after it; CUPTI_ERROR_MAX_LIMIT_REACHED past the valid bytes.
CUptiResult CUPTIAPI walk(std::uint8_t* buffer, std::size_t valid, CUpti_Activity** record) {
  std::size_t at = 0;
  if (*record) at = static_cast<std::size_t>(reinterpret_cast<std::uint8_t*>(*record) - buffer) + record_size(*record);
  if (at >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + at);
  return CUPTI_SUCCESS;
}

/// Records appended back to back, 8-byte aligned, as a CUPTI buffer holds them.
struct activity_buffer {
  std::vector<std::uint64_t> words;
  template <class Record>
  void add(const Record& r) {
    const std::size_t at = words.size() * 8;
    words.resize(words.size() + record_size(reinterpret_cast<const CUpti_Activity*>(&r)) / 8);
    std::memcpy(reinterpret_cast<std::uint8_t*>(words.data()) + at, &r, sizeof r);
  }
  std::uint8_t* data() { return reinterpret_cast<std::uint8_t*>(words.data()); }
  std::size_t size() const { return words.size() * 8; }
};

detail::cupti_kernel_record kernel(const char* name, std::uint64_t start, std::uint64_t end,
                                   std::uint32_t correlation) {
  detail::cupti_kernel_record k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.start = start;
  k.end = end;
  k.deviceId = 1;
  k.streamId = 7;
  k.correlationId = correlation;
  return k;
}

}  // namespace

TEST_CASE("cupti_reader parses kernels, copies and memsets from a buffer without CUPTI", "[cupti]") {
  boundary_markers markers(false);
  cupti_reader reader(markers);
  static const char mangled[] =
      "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_";
  std::string copy_of_name = mangled;  // the same text at another address

  activity_buffer b;
  auto k1 = kernel(mangled, 1000, 2500, 11);
  k1.graphId = 3;
  b.add(k1);
  b.add(kernel(copy_of_name.c_str(), 3000, 3100, 12));
  detail::cupti_memcpy_record m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.bytes = 4096;
  m.start = 4000;
  m.end = 4200;
  m.deviceId = 1;
  m.streamId = 8;
  m.correlationId = 13;
  b.add(m);
  other_record other{};
  other.header.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  b.add(other);
  detail::cupti_memset_record s{};
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.value = 0;  // a user's memset, not a boundary marker
  s.bytes = 64;
  s.start = 5000;
  s.end = 5010;
  b.add(s);

  reader.parse_buffer(b.data(), b.size(), &walk);
  std::vector<gpu_record> recs;
  std::vector<marker_time> marks;
  reader.take(recs, marks);
  REQUIRE(recs.size() == 4);  // the record of another kind is skipped
  CHECK(marks.empty());

  // Kernels: the fields every record has, on the now_ns() clock (no offset before start()), the
  // graph id, and the name shortened once and shared by every record of the same text.
  CHECK(recs[0].what == gpu_activity::type::kernel);
  CHECK(recs[0].begin_ns == 1000);
  CHECK(recs[0].end_ns == 2500);
  CHECK(recs[0].device == 1);
  CHECK(recs[0].stream == 7);
  CHECK(recs[0].correlation == 11);
  CHECK(recs[0].graph == 3);
  CHECK(std::string(recs[0].name) == shorten_kernel_name(mangled));
  CHECK(recs[1].graph == 0);
  CHECK(recs[1].correlation == 12);
  CHECK(recs[1].name == recs[0].name);  // interned: the same stable pointer

  CHECK(recs[2].what == gpu_activity::type::memcpy);
  CHECK(std::string(recs[2].name) == "memcpy HtoD");
  CHECK(recs[2].bytes == 4096);
  CHECK(recs[2].stream == 8);
  CHECK(recs[2].begin_ns == 4000);

  CHECK(recs[3].what == gpu_activity::type::memset);
  CHECK(std::string(recs[3].name) == "memset");
  CHECK(recs[3].bytes == 64);

  // take() moved everything out.
  recs.clear();
  reader.take(recs, marks);
  CHECK(recs.empty());
}

TEST_CASE("cupti_reader keeps names apart when CUPTI reuses a name's address for another text", "[cupti]") {
  boundary_markers markers(false);
  cupti_reader reader(markers);
  char name[32] = "first_kernel";
  activity_buffer b;
  b.add(kernel(name, 10, 20, 1));
  reader.parse_buffer(b.data(), b.size(), &walk);
  std::strcpy(name, "second_kernel");  // same address, new text
  reader.parse_buffer(b.data(), b.size(), &walk);
  std::vector<gpu_record> recs;
  std::vector<marker_time> marks;
  reader.take(recs, marks);
  REQUIRE(recs.size() == 2);
  CHECK(std::string(recs[0].name) == "first_kernel");
  CHECK(std::string(recs[1].name) == "second_kernel");
}

TEST_CASE("cupti_reader: an empty buffer and a record without a name", "[cupti]") {
  boundary_markers markers(false);
  cupti_reader reader(markers);
  activity_buffer b;
  reader.parse_buffer(b.data(), 0, &walk);
  b.add(kernel(nullptr, 10, 20, 1));
  reader.parse_buffer(b.data(), b.size(), &walk);
  std::vector<gpu_record> recs;
  std::vector<marker_time> marks;
  reader.take(recs, marks);
  REQUIRE(recs.size() == 1);
  CHECK(std::string(recs[0].name) == "<unnamed>");
}

TEST_CASE("a stream provider that throws: the default stream, said once", "[cupti]") {
  reset_diagnostics(true);
  const stream_provider throws = []() -> void* { throw std::runtime_error("no current stream"); };
  CHECK(detail::stream_of(throws) == nullptr);
  CHECK(detail::stream_of(throws) == nullptr);
  const stream_provider throws_other = []() -> void* { throw 42; };
  CHECK(detail::stream_of(throws_other) == nullptr);
  const auto msgs = diagnostic_messages();
  REQUIRE(msgs.size() == 1);  // once, whatever each throw was
  CHECK(msgs[0] ==
        "the CUDA stream provider threw (no current stream); boundaries go on the legacy default stream, so GPU "
        "work on other streams may be placed in the wrong phase");
  CHECK(detail::stream_of(stream_provider{}) == nullptr);  // no provider: the default stream, nothing to say
  CHECK(diagnostic_messages().size() == 1);
  reset_diagnostics();
}
