// safetensors reading/writing, corrupt-file rejection, and Hugging Face snapshot loading.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include "helpers.hpp"

using qwen3_test::max_abs_diff;
using qwen3_test::temp_dir;
namespace st = qwen3::safetensors;

namespace {
/// A file made of an explicit header length, header text and data bytes.
void write_raw(const std::string& path, std::uint64_t header_len, const std::string& header, std::size_t data_bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((header_len >> (8 * i)) & 0xff));
  out << header;
  out << std::string(data_bytes, '\0');
}
void write_header(const std::string& path, const std::string& header, std::size_t data_bytes) {
  write_raw(path, header.size(), header, data_bytes);
}
}  // namespace

TEST_CASE("safetensors round trip keeps dtype, shape, values and metadata", "[qwen3][safetensors]") {
  temp_dir dir("st");
  const auto path = dir.file("t.safetensors");
  torch::manual_seed(1);
  auto f32 = torch::randn({3, 5});
  auto bf16 = torch::randn({7}).to(torch::kBFloat16);
  auto f16 = torch::randn({2, 2, 2}).to(torch::kFloat16);
  auto i64 = torch::arange(6, torch::kInt64).reshape({2, 3});
  auto empty = torch::empty({0, 4});
  auto strided = torch::randn({4, 6}).t();  // non-contiguous input is written row-major
  st::write(path, {{"f32", f32}, {"bf16", bf16}, {"f16", f16}, {"i64", i64}, {"empty", empty}, {"strided", strided}},
            {{"format", "pt"}});
  st::reader r(path);
  CHECK(r.entries().size() == 6);
  CHECK(r.metadata().at("format") == "pt");
  CHECK(r.at("bf16").dtype == "BF16");
  CHECK(torch::equal(r.load("f32"), f32));
  CHECK(torch::equal(r.load("bf16"), bf16));
  CHECK(torch::equal(r.load("f16"), f16));
  CHECK(torch::equal(r.load("i64"), i64));
  CHECK(r.load("empty").sizes() == torch::IntArrayRef({0, 4}));
  CHECK(torch::equal(r.load("strided"), strided));
  {
    std::ifstream in(path, std::ios::binary);
    unsigned char len[8];
    in.read(reinterpret_cast<char*>(len), 8);
    CHECK((8 + len[0]) % 8 == 0);  // header padded: the data section starts 8-byte aligned
  }
  CHECK_THROWS_WITH(r.load("nope"), Catch::Contains("no tensor named 'nope'"));
}

TEST_CASE("the header's element sizes are LibTorch's for every dtype", "[qwen3][safetensors]") {
  // safetensors_header.hpp sizes elements without LibTorch; the reader maps the same names to dtypes.
  for (const char* name : {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"}) {
    INFO(name);
    CHECK(st::dtype_size(name, "t") == c10::elementSize(st::to_torch_dtype(name, "t")));
  }
}

TEST_CASE("corrupt safetensors files are rejected with a reason", "[qwen3][safetensors]") {
  temp_dir dir("st-bad");
  const auto path = dir.file("bad.safetensors");
  const std::string ok_entry = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";

  SECTION("too short for the length field") {
    std::ofstream(path, std::ios::binary) << "abc";
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("too short"));
  }
  SECTION("header length past the end of the file") {
    write_raw(path, 4096, "{}", 0);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("runs past the end") && Catch::Contains("truncated"));
  }
  SECTION("absurd header length") {
    write_raw(path, std::uint64_t{1} << 60, "{}", 0);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("implausible"));
  }
  SECTION("header is not JSON / not an object") {
    write_header(path, "{\"w\": [1, 2", 0);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("not valid JSON"));
    write_header(path, "[1, 2]", 0);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("not a JSON object"));
  }
  SECTION("entry fields missing or mistyped") {
    write_header(path, R"({"w":{"dtype":"F32","shape":[2,2]}})", 16);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("'w'") && Catch::Contains("data_offsets"));
    write_header(path, R"({"w":{"dtype":"F32","shape":[2,-2],"data_offsets":[0,16]}})", 16);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("negative"));
    write_header(path, R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}})", 16);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("begin after they end"));
  }
  SECTION("unsupported dtype") {
    write_header(path, R"({"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", 4);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("unsupported dtype 'F8_E4M3'"));
  }
  SECTION("shape and dtype disagree with the byte range") {
    write_header(path, R"({"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,16]}})", 16);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("need 8 bytes but data_offsets span 16"));
  }
  SECTION("data section truncated") {
    write_header(path, ok_entry, 10);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("10-byte data section") && Catch::Contains("truncated"));
    // And a real file cut short.
    st::write(path, {{"w", torch::ones({64})}});
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    REQUIRE(::truncate(path.c_str(), st.st_size - 3) == 0);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("truncated"));
  }
  SECTION("overlapping tensors") {
    write_header(
        path,
        R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
        16);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("overlap"));
  }
  SECTION("missing file") { CHECK_THROWS_WITH(st::reader(dir.file("none")), Catch::Contains("cannot open")); }
  SECTION("a directory is not a file") {
    CHECK_THROWS_AS(st::reader(dir.str()), st::format_error);
    CHECK_THROWS_WITH(st::reader(dir.str()), Catch::Contains(dir.str()) && Catch::Contains("is a directory"));
  }
}

TEST_CASE("safetensors element counts and byte spans cannot overflow", "[qwen3][safetensors][validation]") {
  temp_dir dir("st-overflow");
  const auto path = dir.file("big.safetensors");
  SECTION("[2^32, 2^32] with no data: the element count used to wrap to 0 and pass") {
    write_header(path, R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0);
    CHECK_THROWS_AS(st::reader(path), st::format_error);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains(path) && Catch::Contains("tensor 'w'") &&
                                            Catch::Contains("shape [4294967296, 4294967296]") &&
                                            Catch::Contains("more than 2^48 elements"));
  }
  SECTION("three dimensions of 2^24: each plausible, the product not") {
    write_header(path, R"({"w":{"dtype":"U8","shape":[16777216,16777216,16777216],"data_offsets":[0,0]}})", 0);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("more than 2^48 elements"));
  }
  SECTION("one dimension above 2^48") {
    write_header(path, R"({"w":{"dtype":"U8","shape":[0,281474976710657],"data_offsets":[0,0]}})", 0);
    CHECK_THROWS_WITH(st::reader(path), Catch::Contains("implausible dimension 281474976710657"));
  }
  SECTION("a zero dimension is a valid empty tensor") {
    write_header(path, R"({"w":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}})", 0);
    CHECK(st::reader(path).load("w").sizes() == torch::IntArrayRef({0, 4}));
  }
  SECTION("offsets near 2^64, far beyond the file") {
    write_header(path,
                 R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[18446744073709551599,18446744073709551615]}})", 16);
    CHECK_THROWS_WITH(st::reader(path),
                      Catch::Contains("data ends at byte 18446744073709551615 of a 16-byte data section"));
  }
}

TEST_CASE("a model saved as a Hugging Face snapshot loads back identically", "[qwen3][safetensors][weights]") {
  temp_dir dir("snap");
  auto m = qwen3_test::tiny_model(21);
  auto ids = qwen3_test::random_ids(m->cfg().vocab_size, 1, 10);
  torch::NoGradGuard g;
  const auto expect = m->logits(ids);

  SECTION("single file, fp32") {
    qwen3::save_pretrained(*m, dir.str());
    auto loaded = qwen3::from_pretrained(dir.str());
    CHECK(torch::equal(loaded->logits(ids), expect));
    // HF names as transformers writes them; the tied head is not stored.
    st::reader r(dir.file("model.safetensors"));
    CHECK(r.contains("model.layers.1.self_attn.k_proj.weight"));
    CHECK(r.contains("model.layers.0.mlp.gate_proj.weight"));
    CHECK_FALSE(r.contains("lm_head.weight"));
  }
  SECTION("sharded with an index") {
    qwen3::save_pretrained(*m, dir.str(), {}, 3);
    CHECK(qwen3_test::exists(dir.file("model.safetensors.index.json")));
    CHECK(qwen3_test::exists(dir.file("model-00003-of-00003.safetensors")));
    auto loaded = qwen3::from_pretrained(dir.str());
    CHECK(torch::equal(loaded->logits(ids), expect));
  }
  SECTION("stored in bf16, loaded into an fp32 model") {
    qwen3::save_pretrained(*m, dir.str(), torch::kBFloat16);
    CHECK(st::reader(dir.file("model.safetensors")).at("model.norm.weight").dtype == "BF16");
    auto loaded = qwen3::from_pretrained(dir.str());
    CHECK(max_abs_diff(loaded->embed_tokens, m->embed_tokens) < 1e-3);
  }
}

TEST_CASE("snapshots with wrong shapes, dtypes or names are rejected", "[qwen3][safetensors][weights]") {
  temp_dir dir("snap-bad");
  auto m = qwen3_test::tiny_model();
  qwen3::save_pretrained(*m, dir.str());
  auto tensors = qwen3::hf_tensors(*m);
  auto rewrite = [&](std::function<void(std::vector<std::pair<std::string, torch::Tensor>>&)> edit) {
    auto copy = tensors;
    edit(copy);
    st::write(dir.file("model.safetensors"), copy);
  };

  SECTION("a config that does not match the weights") {
    auto other = qwen3::preset("tiny");
    other.intermediate_size = 96;
    qwen3::Qwen3 wrong(other);
    CHECK_THROWS_WITH(qwen3::load_weights(*wrong, dir.str()), Catch::Contains("model.layers.0.mlp.gate_proj.weight") &&
                                                                  Catch::Contains("has shape [160, 64]") &&
                                                                  Catch::Contains("needs [96, 64]"));
  }
  SECTION("an integer tensor where a weight belongs") {
    rewrite([](auto& t) { t[3].second = t[3].second.to(torch::kInt32); });
    CHECK_THROWS_WITH(qwen3::from_pretrained(dir.str()),
                      Catch::Contains(tensors[3].first) && Catch::Contains("dtype I32"));
  }
  SECTION("a missing weight") {
    rewrite([](auto& t) { t.erase(t.begin() + 2); });
    CHECK_THROWS_WITH(qwen3::from_pretrained(dir.str()), Catch::Contains(tensors[2].first + "' is missing"));
  }
  SECTION("an unexpected weight") {
    rewrite([](auto& t) { t.emplace_back("model.layers.9.mlp.up_proj.weight", torch::zeros({2})); });
    CHECK_THROWS_WITH(qwen3::from_pretrained(dir.str()), Catch::Contains("unexpected weight 'model.layers.9"));
  }
  SECTION("a tied head stored anyway is accepted") {
    rewrite([&](auto& t) { t.emplace_back("lm_head.weight", m->embed_tokens); });
    CHECK_NOTHROW(qwen3::from_pretrained(dir.str()));
  }
  SECTION("an index pointing at a shard without the tensor") {
    std::ofstream(dir.file("model.safetensors.index.json"))
        << R"({"weight_map": {"model.norm.weight": "model.safetensors", "model.extra": "model.safetensors"}})";
    CHECK_THROWS_WITH(qwen3::from_pretrained(dir.str()),
                      Catch::Contains("'model.extra' is mapped to model.safetensors"));
  }
  SECTION("no weights at all") {
    REQUIRE(::unlink(dir.file("model.safetensors").c_str()) == 0);
    CHECK_THROWS_WITH(qwen3::from_pretrained(dir.str()), Catch::Contains("neither model.safetensors"));
  }
}
