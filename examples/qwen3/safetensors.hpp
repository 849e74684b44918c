// qwen3/safetensors.hpp: read and write the safetensors format, and open a Hugging Face snapshot
// folder (one model.safetensors, or shards listed by model.safetensors.index.json).
//
//   qwen3::safetensors::reader f("model.safetensors");    // parses and validates the header only
//   torch::Tensor w = f.load("model.norm.weight");         // CPU tensor, dtype as stored
//   qwen3::safetensors::write("out.safetensors", {{"w", w}});
//   qwen3::safetensors::snapshot s("/path/to/Qwen3-1.7B");  // name -> shard, for sharded checkpoints
//
// The format: an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "BF16", "shape": [2048, 2048], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// then the data section; offsets are relative to its start, little-endian, row-major.
// Every header field is checked before any data is read, and errors name the file and the tensor:
// a truncated or corrupt file is rejected, never read past its end. Element counts and byte spans
// are overflow-checked (a [2^32, 2^32] shape must not wrap to 0 elements and pass with no data).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "checked.hpp"
#include "input_file.hpp"

namespace qwen3 {
namespace safetensors {

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.hpp reads and writes raw little-endian bytes; big-endian hosts are not supported"
#endif

/// A file that is not valid safetensors, or a request it cannot satisfy.
struct format_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// safetensors dtype name <-> LibTorch dtype. Throws format_error for names this reader does not map.
inline torch::Dtype to_torch_dtype(const std::string& name, const std::string& where) {
  static const std::map<std::string, torch::Dtype> table{
      {"F64", torch::kFloat64}, {"F32", torch::kFloat32}, {"F16", torch::kFloat16}, {"BF16", torch::kBFloat16},
      {"I64", torch::kInt64},   {"I32", torch::kInt32},   {"I16", torch::kInt16},   {"I8", torch::kInt8},
      {"U8", torch::kUInt8},    {"BOOL", torch::kBool}};
  auto it = table.find(name);
  if (it == table.end()) throw format_error(where + ": unsupported dtype '" + name + "'");
  return it->second;
}

inline std::string dtype_name(torch::Dtype d) {
  switch (d) {
    case torch::kFloat64: return "F64";
    case torch::kFloat32: return "F32";
    case torch::kFloat16: return "F16";
    case torch::kBFloat16: return "BF16";
    case torch::kInt64: return "I64";
    case torch::kInt32: return "I32";
    case torch::kInt16: return "I16";
    case torch::kInt8: return "I8";
    case torch::kUInt8: return "U8";
    case torch::kBool: return "BOOL";
    default: throw format_error(std::string("safetensors: cannot store dtype ") + c10::toString(d));
  }
}

/// One header entry.
struct entry {
  std::string dtype;                 ///< as written in the file ("BF16", ...)
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  ///< byte range within the data section
};

/// Header limit (the reference implementation uses the same bound): a larger "length" is a corrupt
/// or hostile file, not a header.
inline constexpr std::uint64_t max_header_bytes = 100u * 1024u * 1024u;

/// Element limit of one tensor, 2^48 (a 2^48-element tensor needs 256 TiB at 1 byte): a larger
/// count is a corrupt or hostile header.
inline constexpr std::uint64_t max_elements = std::uint64_t{1} << 48;

/// One .safetensors file: the header is parsed and validated on construction; load() reads one tensor.
class reader {
 public:
  explicit reader(std::string path) : path_(std::move(path)) {
    const auto probe = probe_input_file(path_);
    if (!probe.problem.empty()) throw format_error(path_ + ": " + probe.problem);
    std::ifstream in(path_, std::ios::binary);
    if (!in) throw format_error(path_ + ": cannot open");
    file_size_ = probe.size;
    if (file_size_ < 8)
      throw format_error(path_ + ": " + std::to_string(file_size_) + " bytes, too short for the 8-byte header length");
    in.seekg(0);
    unsigned char len_bytes[8];
    in.read(reinterpret_cast<char*>(len_bytes), 8);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
    if (n > max_header_bytes)
      throw format_error(path_ + ": header length " + std::to_string(n) + " is implausible (corrupt file?)");
    if (n > file_size_ - 8)
      throw format_error(path_ + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                         std::to_string(file_size_) + " bytes): truncated?");
    std::string header(n, '\0');
    in.read(&header[0], static_cast<std::streamsize>(n));
    if (!in) throw format_error(path_ + ": could not read the header");
    data_start_ = 8 + n;
    parse_header(header);
  }

  const std::string& path() const { return path_; }
  const std::map<std::string, entry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }

  const entry& at(const std::string& name) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) throw format_error(path_ + ": no tensor named '" + name + "'");
    return it->second;
  }

  /// Reads one tensor into a new CPU tensor of the stored dtype and shape.
  torch::Tensor load(const std::string& name) const {
    const entry& e = at(name);
    const auto where = path_ + ": tensor '" + name + "'";
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(to_torch_dtype(e.dtype, where)));
    const auto bytes = e.end - e.begin;
    if (bytes == 0) return t;
    std::ifstream in(path_, std::ios::binary);
    if (!in) throw format_error(path_ + ": cannot open");
    in.seekg(static_cast<std::streamoff>(data_start_ + e.begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(bytes));
    if (!in) throw format_error(where + ": read failed (file changed or truncated since it was opened?)");
    return t;
  }

 private:
  void parse_header(const std::string& header) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(header);
    } catch (const nlohmann::json::exception& e) {
      throw format_error(path_ + ": header is not valid JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw format_error(path_ + ": header is not a JSON object");
    const std::uint64_t data_size = file_size_ - data_start_;
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& name = it.key();
      if (name == "__metadata__") {
        if (!it->is_object()) throw format_error(path_ + ": __metadata__ is not an object");
        for (auto m = it->begin(); m != it->end(); ++m)
          if (m->is_string()) metadata_[m.key()] = m->get<std::string>();
        continue;
      }
      const auto where = path_ + ": tensor '" + name + "'";
      const auto& v = *it;
      if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
        throw format_error(where + ": entry needs dtype, shape and data_offsets");
      entry e;
      if (!v["dtype"].is_string()) throw format_error(where + ": dtype is not a string");
      e.dtype = v["dtype"].get<std::string>();
      const auto dt = to_torch_dtype(e.dtype, where);
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
      const auto expect_bytes = checked_mul(numel, static_cast<std::uint64_t>(c10::elementSize(dt)));
      if (!expect_bytes) throw format_error(where + ": byte size of shape [" + shape_text + "] overflows");
      const std::uint64_t expect = *expect_bytes;
      if (e.end - e.begin != expect)
        throw format_error(where + ": shape and dtype " + e.dtype + " need " + std::to_string(expect) +
                           " bytes but data_offsets span " + std::to_string(e.end - e.begin));
      if (e.end > data_size)
        throw format_error(where + ": data ends at byte " + std::to_string(e.end) + " of a " +
                           std::to_string(data_size) + "-byte data section: truncated file?");
      entries_.emplace(name, std::move(e));
    }
    // No two tensors may share bytes (a corrupt or crafted header could alias them).
    std::vector<std::pair<std::uint64_t, std::string>> starts;
    for (const auto& kv : entries_)
      if (kv.second.end > kv.second.begin) starts.emplace_back(kv.second.begin, kv.first);
    std::sort(starts.begin(), starts.end());
    for (std::size_t i = 1; i < starts.size(); ++i) {
      const auto& prev = entries_.at(starts[i - 1].second);
      if (starts[i].first < prev.end)
        throw format_error(path_ + ": tensors '" + starts[i - 1].second + "' and '" + starts[i].second +
                           "' overlap in the data section");
    }
  }

  std::string path_;
  std::uint64_t file_size_ = 0, data_start_ = 0;
  std::map<std::string, entry> entries_;
  std::map<std::string, std::string> metadata_;
};

/// Writes tensors (any device; copied to CPU, made contiguous) to `path`. Names must be unique.
inline void write(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                  const std::map<std::string, std::string>& metadata = {}) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> cpu;
  std::uint64_t offset = 0;
  for (const auto& kv : tensors) {
    if (header.contains(kv.first)) throw format_error(path + ": duplicate tensor name '" + kv.first + "'");
    auto t = kv.second.detach().to(torch::kCPU).contiguous();
    const std::uint64_t bytes = static_cast<std::uint64_t>(t.numel()) * t.element_size();
    header[kv.first] = {{"dtype", dtype_name(t.scalar_type())},
                        {"shape", t.sizes().vec()},
                        {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    cpu.push_back(std::move(t));
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // pad so the data section starts 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw format_error(path + ": cannot create");
  unsigned char len_bytes[8];
  std::uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
  out.write(reinterpret_cast<const char*>(len_bytes), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& t : cpu)
    out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * t.element_size()));
  if (!out) throw format_error(path + ": write failed");
}

/// The weights of a Hugging Face snapshot folder: model.safetensors, or the shards named by
/// model.safetensors.index.json ({"weight_map": {"tensor name": "shard file name", ...}}).
class snapshot {
 public:
  explicit snapshot(std::string folder) : folder_(std::move(folder)) {
    const auto index_path = folder_ + "/model.safetensors.index.json";
    std::ifstream index(index_path);
    if (index) {
      nlohmann::json j;
      try {
        index >> j;
      } catch (const nlohmann::json::exception& e) {
        throw format_error(index_path + ": not valid JSON (" + e.what() + ")");
      }
      if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
        throw format_error(index_path + ": no weight_map object");
      std::map<std::string, std::shared_ptr<reader>> shards;
      for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
        if (!it->is_string()) throw format_error(index_path + ": weight_map entry '" + it.key() + "' is not a file name");
        const auto file = it->get<std::string>();
        if (file.find('/') != std::string::npos || file.find("..") != std::string::npos)
          throw format_error(index_path + ": shard name '" + file + "' is not a plain file name");
        auto& r = shards[file];
        if (!r) r = std::make_shared<reader>(folder_ + "/" + file);
        if (!r->contains(it.key()))
          throw format_error(index_path + ": '" + it.key() + "' is mapped to " + file + ", which does not contain it");
        where_[it.key()] = r;
      }
      return;
    }
    const auto single = folder_ + "/model.safetensors";
    if (!std::ifstream(single))
      throw format_error(folder_ + ": neither model.safetensors nor model.safetensors.index.json found");
    auto r = std::make_shared<reader>(single);
    for (const auto& kv : r->entries()) where_[kv.first] = r;
  }

  const std::string& folder() const { return folder_; }
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& kv : where_) out.push_back(kv.first);
    return out;
  }
  const entry& at(const std::string& name) const { return file_of(name).at(name); }
  torch::Tensor load(const std::string& name) const { return file_of(name).load(name); }

 private:
  const reader& file_of(const std::string& name) const {
    auto it = where_.find(name);
    if (it == where_.end()) throw format_error(folder_ + ": no tensor named '" + name + "' in the snapshot");
    return *it->second;
  }
  std::string folder_;
  std::map<std::string, std::shared_ptr<reader>> where_;
};

}  // namespace safetensors
}  // namespace qwen3
