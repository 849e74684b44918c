// Kernel names: demangling and the shortening rule of kernel_name.hpp.
#include <catch2/catch.hpp>

#include <string>

#include "traceml/gpu/kernel_name.hpp"

using traceml::demangle;
using traceml::shorten_kernel_name;

TEST_CASE("demangle leaves plain names alone and demangles Itanium names", "[kernel_name]") {
  CHECK(demangle("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn") ==
        "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn");
  CHECK(demangle("_Z3fooi") == "foo(int)");
  CHECK(demangle("_Znot_a_name") == "_Znot_a_name");  // invalid: returned unchanged
  CHECK(demangle("__nv_static_7__abc__Z3fooi") == "foo(int)");
  CHECK(demangle("__nv_static_7__abc__Znot") == "__nv_static_7__abc__Znot");  // nothing valid after the prefix
  CHECK(demangle(nullptr).empty());
}

TEST_CASE("shorten_kernel_name follows the documented rule", "[kernel_name]") {
  struct row {
    const char* raw;
    const char* shortened;
  };
  auto r = GENERATE(values<row>({
      // LibTorch elementwise kernel: first simple template argument kept, the functor elided.
      {"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
       "at::native::vectorized_elementwise_kernel<4,...>"},
      // Anonymous namespace dropped, all-simple argument list kept whole.
      {"_ZN2at6native12_GLOBAL__N_120softmax_warp_forwardIffLi5EEEvPT0_PKT_ii",
       "at::native::softmax_warp_forward<float,float,5>"},
      // CUTLASS: the configuration name is the informative argument; the parameter list goes.
      {"_ZN7cutlass7Kernel2I68cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8EEvNT_6ParamsE",
       "cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>"},
      // Non-template function: parameters dropped, no return type to drop.
      {"_Z3fooi", "foo"},
      // nvcc's prefix for a kernel of internal linkage (NCCL's one-rank reduction) goes with the mangling.
      {"__nv_static_32__b4148644_10_onerank_cu_fdf47990__ZN43_GLOBAL__N__b4148644_10_onerank_cu_"
       "fdf4799013oneRankReduceI13"
       "FuncPreMulSumIfEEEvPvS3_mmb",
       "oneRankReduce<...>"},
      // extern "C" names (cuBLAS, flash attention builds) stay exactly as they are.
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
       "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"},
  }));
  CAPTURE(r.raw);
  CHECK(shorten_kernel_name(r.raw) == r.shortened);
}

TEST_CASE("shorten_kernel_name caps very long names", "[kernel_name]") {
  const std::string longname(400, 'k');
  const std::string s = shorten_kernel_name(longname.c_str());
  CHECK(s.size() == 160);
  CHECK(s.substr(157) == "...");
  CHECK(shorten_kernel_name(nullptr) == "<unnamed>");
}
