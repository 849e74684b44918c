// qwen3/safetensors_header.hpp: the safetensors header, parsed and validated without LibTorch.
//
//   const auto n = qwen3::safetensors::header_length(path, file_size, first_8_bytes);
//   const auto h = qwen3::safetensors::parse_header(path, header_json_text, file_size - 8 - n);
//   h.entries.at("model.norm.weight").begin;   // byte range within the data section
//
// The format: an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "BF16", "shape": [2048, 2048], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// then the data section; offsets are relative to its start, little-endian, row-major.
// Every header field is checked before any data is read, and errors name the file and the tensor:
// a truncated or corrupt file is rejected, never read past its end. Element counts and byte spans
// are overflow-checked (a [2^32, 2^32] shape must not wrap to 0 elements and pass with no data).
// This is the part of a checkpoint that hostile bytes reach first, kept free of LibTorch so that it
// is fuzzed on its own (tests/fuzz/); safetensors.hpp reads the tensors.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "checked.hpp"

namespace qwen3 {
namespace safetensors {

/// A file that is not valid safetensors, or a request it cannot satisfy.
struct format_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One header entry.
struct entry {
  std::string dtype;  ///< as written in the file ("BF16", ...)
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  ///< byte range within the data section
};

/// A parsed header: the tensors by name, and the string values of __metadata__.
struct header {
  std::map<std::string, entry> entries;
  std::map<std::string, std::string> metadata;
};

/// Header limit (the reference implementation uses the same bound): a larger "length" is a corrupt
/// or hostile file, not a header.
inline constexpr std::uint64_t max_header_bytes = 100u * 1024u * 1024u;

/// Element limit of one tensor, 2^48 (a 2^48-element tensor needs 256 TiB at 1 byte): a larger
/// count is a corrupt or hostile header.
inline constexpr std::uint64_t max_elements = std::uint64_t{1} << 48;

/// Bytes per element of a safetensors dtype name. Throws format_error for names this reader does not
/// map (safetensors.hpp maps the same names to LibTorch dtypes).
inline std::uint64_t dtype_size(const std::string& name, const std::string& where) {
  static const std::map<std::string, std::uint64_t> table{{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                                          {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  auto it = table.find(name);
  if (it == table.end()) throw format_error(where + ": unsupported dtype '" + name + "'");
  return it->second;
}

/// The header length N from the file's first bytes (`prefix`: its first 8, or all of a shorter
/// file), checked against the limit and the file's size.
inline std::uint64_t header_length(const std::string& path, std::uint64_t file_size, std::string_view prefix) {
  if (file_size < 8 || prefix.size() < 8)
    throw format_error(path + ": " + std::to_string(file_size) + " bytes, too short for the 8-byte header length");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(prefix[static_cast<std::size_t>(i)]);
  if (n > max_header_bytes)
    throw format_error(path + ": header length " + std::to_string(n) + " is implausible (corrupt file?)");
  if (n > file_size - 8)
    throw format_error(path + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                       std::to_string(file_size) + " bytes): truncated?");
  return n;
}

/// Parses and validates the header's JSON `text`; `data_size`: the bytes after the header, which
/// every tensor's data_offsets must stay inside.
inline header parse_header(const std::string& path, const std::string& text, std::uint64_t data_size) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw format_error(path + ": header is not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw format_error(path + ": header is not a JSON object");
  header h;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it->is_object()) throw format_error(path + ": __metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m)
        if (m->is_string()) h.metadata[m.key()] = m->get<std::string>();
      continue;
    }
    const auto where = path + ": tensor '" + name + "'";
    const auto& v = *it;
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      throw format_error(where + ": entry needs dtype, shape and data_offsets");
    entry e;
    if (!v["dtype"].is_string()) throw format_error(where + ": dtype is not a string");
    e.dtype = v["dtype"].get<std::string>();
    const auto element_size = dtype_size(e.dtype, where);
    if (!v["shape"].is_array()) throw format_error(where + ": shape is not an array");
    std::uint64_t numel = 1;
    std::string shape_text;  // for messages, cut short: a hostile header may list thousands of dimensions
    for (const auto& d : v["shape"]) shape_text += (shape_text.empty() ? "" : ", ") + d.dump();
    if (shape_text.size() > 200) shape_text = shape_text.substr(0, 197) + "...";
    for (const auto& d : v["shape"]) {
      if (d.is_number_integer() && !d.is_number_unsigned())
        throw format_error(where + ": shape [" + shape_text + "] has a negative dimension");
      if (!d.is_number_unsigned())
        throw format_error(where + ": shape [" + shape_text + "] has a non-integer dimension");
      const auto dim = d.get<std::uint64_t>();
      if (dim > max_elements) throw format_error(where + ": implausible dimension " + std::to_string(dim));
      const auto n = checked_mul(numel, dim);
      if (!n || *n > max_elements)
        throw format_error(where + ": shape [" + shape_text + "] has more than 2^48 elements (corrupt header?)");
      e.shape.push_back(static_cast<std::int64_t>(dim));
      numel = *n;
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw format_error(where + ": data_offsets must be two non-negative integers");
    e.begin = off[0].get<std::uint64_t>();
    e.end = off[1].get<std::uint64_t>();
    if (e.begin > e.end) throw format_error(where + ": data_offsets begin after they end");
    const auto expect_bytes = checked_mul(numel, element_size);
    if (!expect_bytes) throw format_error(where + ": byte size of shape [" + shape_text + "] overflows");
    const std::uint64_t expect = *expect_bytes;
    if (e.end - e.begin != expect)
      throw format_error(where + ": shape and dtype " + e.dtype + " need " + std::to_string(expect) +
                         " bytes but data_offsets span " + std::to_string(e.end - e.begin));
    if (e.end > data_size)
      throw format_error(where + ": data ends at byte " + std::to_string(e.end) + " of a " + std::to_string(data_size) +
                         "-byte data section: truncated file?");
    h.entries.emplace(name, std::move(e));
  }
  // No two tensors may share bytes (a corrupt or crafted header could alias them).
  std::vector<std::pair<std::uint64_t, std::string>> starts;
  for (const auto& kv : h.entries)
    if (kv.second.end > kv.second.begin) starts.emplace_back(kv.second.begin, kv.first);
  std::sort(starts.begin(), starts.end());
  for (std::size_t i = 1; i < starts.size(); ++i) {
    const auto& prev = h.entries.at(starts[i - 1].second);
    if (starts[i].first < prev.end)
      throw format_error(path + ": tensors '" + starts[i - 1].second + "' and '" + starts[i].second +
                         "' overlap in the data section");
  }
  return h;
}

}  // namespace safetensors
}  // namespace qwen3
