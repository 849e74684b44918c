// qwen3/safetensors.hpp: read and write the safetensors format, and open a Hugging Face snapshot
// folder (one model.safetensors, or shards listed by model.safetensors.index.json).
//
//   qwen3::safetensors::reader f("model.safetensors");    // parses and validates the header only
//   torch::Tensor w = f.load("model.norm.weight");         // CPU tensor, dtype as stored
//   qwen3::safetensors::write("out.safetensors", {{"w", w}});
//   qwen3::safetensors::snapshot s("/path/to/Qwen3-1.7B");  // name -> shard, for sharded checkpoints
//
// The format and the header's checks: safetensors_header.hpp (no LibTorch there, so it is fuzzed on
// its own). Errors name the file and the tensor; a truncated or corrupt file is never read past its end.
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

#include "input_file.hpp"
#include "safetensors_header.hpp"

namespace qwen3 {
namespace safetensors {

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.hpp reads and writes raw little-endian bytes; big-endian hosts are not supported"
#endif

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

/// One .safetensors file: the header is parsed and validated on construction; load() reads one tensor.
class reader {
 public:
  explicit reader(std::string path) : path_(std::move(path)) {
    const auto probe = probe_input_file(path_);
    if (!probe.problem.empty()) throw format_error(path_ + ": " + probe.problem);
    std::ifstream in(path_, std::ios::binary);
    if (!in) throw format_error(path_ + ": cannot open");
    file_size_ = probe.size;
    std::string prefix(static_cast<std::size_t>(std::min<std::uint64_t>(file_size_, 8)), '\0');
    in.read(&prefix[0], static_cast<std::streamsize>(prefix.size()));
    const auto n = header_length(path_, file_size_, prefix);
    std::string text(n, '\0');
    in.read(&text[0], static_cast<std::streamsize>(n));
    if (!in) throw format_error(path_ + ": could not read the header");
    data_start_ = 8 + n;
    header_ = parse_header(path_, text, file_size_ - data_start_);
  }

  const std::string& path() const { return path_; }
  const std::map<std::string, entry>& entries() const { return header_.entries; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  bool contains(const std::string& name) const { return header_.entries.count(name) != 0; }

  const entry& at(const std::string& name) const {
    auto it = header_.entries.find(name);
    if (it == header_.entries.end()) throw format_error(path_ + ": no tensor named '" + name + "'");
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
  std::string path_;
  std::uint64_t file_size_ = 0, data_start_ = 0;
  header header_;
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
    header[kv.first] = {
        {"dtype", dtype_name(t.scalar_type())}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
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
        if (!it->is_string())
          throw format_error(index_path + ": weight_map entry '" + it.key() + "' is not a file name");
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
