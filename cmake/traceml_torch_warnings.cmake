# GCC 13's false-positive warnings on code that uses LibTorch, switched off for our LibTorch targets
# only (the examples, the trainer's tools and tests, the adapter's test).
#
# LibTorch's headers already reach our translation units as system headers: they come through the
# imported `torch` target, whose include directories CMake marks SYSTEM, so nothing is reported
# *from* them. What is left are GCC 13's middle-end warnings, issued after inlining LibTorch's and
# libstdc++'s code into our functions, where SYSTEM does not apply. Seen with LibTorch 2.11:
# torch::autograd::Function<T>::apply (custom_function.h) reserves a std::vector<bool>, and GCC 13
# reports the inlined memmove as writing past an 8-byte allocation: -Wstringop-overflow (on by
# default; 35 lines per translation unit that instantiates it, i.e. each one that includes the
# trainer) and the same spot again as -Warray-bounds under -Wall. GCC 12 does not report it.
# Exactly those two are off; every other warning, and -Werror in the tests, stays.
#
# GCC 12 with AddressSanitizer and optimisation (scripts/sanitize.sh with TRACEML_SANITIZE_CXX=g++ and
# -O1) reports -Wmaybe-uninitialized inside inlined LibTorch code (the storage of
# c10::optional<at::Generator>, reached from torch::randn), not in ours: off in that build only.
include_guard(GLOBAL)

# Sets `out` to the flags that silence them (empty where the compiler does not issue them).
function(traceml_torch_warning_flags out)
  set(flags "")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 13)
    set(flags -Wno-stringop-overflow -Wno-array-bounds)
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_FLAGS MATCHES "-fsanitize=[a-z,]*address")
    list(APPEND flags -Wno-maybe-uninitialized)
  endif()
  set(${out} ${flags} PARENT_SCOPE)
endfunction()

# Adds those flags to `target` with `scope` (PRIVATE for an executable, INTERFACE for a header-only
# target whose users include LibTorch through it).
function(traceml_quiet_torch_warnings target scope)
  traceml_torch_warning_flags(flags)
  if(flags)
    target_compile_options(${target} ${scope} ${flags})
  endif()
endfunction()
