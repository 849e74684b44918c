// Why there is no GPU data, in words a user can act on: the device check's wording for each way a
// device query fails (pure, on any machine), and, on a machine without an NVIDIA driver (CI, a
// laptop), the sources, the factory and the JSON summary all saying "no NVIDIA driver" rather than
// the CUDA runtime's "driver version is insufficient". Where a driver is present the second part
// is skipped, and says so.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <memory>
#include <string>

#include "traceml/gpu/source_factory.hpp"
#include "traceml/gpu/pm_sampler.hpp"
#include "traceml/traceml.hpp"

using namespace traceml;
using nlohmann::json;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// cudaDriverGetVersion's answer: 0 when no driver is loaded.
int driver_version() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess) v = 0;
  cudaGetLastError();
  return v;
}
}  // namespace

TEST_CASE("the device check names the missing piece", "[gpu-status]") {
  using detail::describe_device_check;
  SECTION("a usable device: nothing to say") { CHECK(describe_device_check(cudaSuccess, 1, 13000, 13000).empty()); }
  SECTION("no driver loaded (version 0): the runtime's 'insufficient driver' is not repeated") {
    // What the CUDA 13 runtime answers on a machine without libcuda, and the other errors a
    // driverless query can give.
    const cudaError_t e = GENERATE(cudaErrorInsufficientDriver, cudaErrorNoDevice, cudaSuccess);
    const std::string why = describe_device_check(e, 0, 0, 13000);
    INFO(why);
    CHECK(why.rfind("no NVIDIA driver", 0) == 0);
    CHECK_FALSE(contains(why, "insufficient"));
  }
  SECTION("a driver older than the runtime: insufficient, with both versions") {
    const std::string why = describe_device_check(cudaErrorInsufficientDriver, 0, 12040, 13000);
    CHECK(why ==
          "insufficient NVIDIA driver: it supports up to CUDA 12.4, this program's CUDA runtime is CUDA 13.0 "
          "(update the driver)");
  }
  SECTION("a driver that sees no GPU") {
    CHECK(describe_device_check(cudaErrorNoDevice, 0, 13000, 13000)
              .rfind("no CUDA device (the NVIDIA driver sees no GPU", 0) == 0);
    CHECK(
        describe_device_check(cudaSuccess, 0, 13000, 13000).rfind("no CUDA device (the NVIDIA driver sees no GPU", 0) ==
        0);
  }
  SECTION("any other failure keeps the runtime's own words") {
    CHECK(describe_device_check(cudaErrorInitializationError, 0, 13000, 13000) ==
          std::string("no CUDA device (") + cudaGetErrorString(cudaErrorInitializationError) + ")");
  }
}

TEST_CASE("the CUDA runtime is loaded at run time: the process's own first, and a missing one says why",
          "[gpu-status][cudart]") {
  SECTION("the runtime this program linked is the one traceml calls, not a second copy") {
    const detail::rt::library& lib = detail::rt::runtime();
    REQUIRE(lib.why.empty());
    CHECK(lib.handle == dlopen(detail::rt::runtime_name().c_str(), RTLD_NOW | RTLD_NOLOAD));
    CHECK(lib.cudaGetDeviceCount != nullptr);
    CHECK(lib.cudaEventRecord != nullptr);
    CHECK(std::string(detail::rt::cudaGetErrorString(cudaErrorInvalidValue)) ==
          cudaGetErrorString(cudaErrorInvalidValue));
    int ours = -1, theirs = -2;
    CHECK(detail::rt::cudaRuntimeGetVersion(&ours) == cudaRuntimeGetVersion(&theirs));
    CHECK(ours == theirs);
  }
  SECTION("a runtime that is nowhere: every entry point null, and the reason names the library and the fix") {
    const detail::rt::library lib =
        detail::rt::load_library("libtraceml_no_such_cudart.so.13", "/nonexistent/libcudart.so");
    INFO(lib.why);
    CHECK(lib.handle == nullptr);
    CHECK(lib.cudaGetDeviceCount == nullptr);
    CHECK(lib.why.rfind("no CUDA runtime (", 0) == 0);
    CHECK(contains(lib.why, "libtraceml_no_such_cudart.so.13"));
    CHECK(contains(lib.why, "LD_LIBRARY_PATH"));
  }
}

#if TRACEML_HAS_PM_SAMPLING
TEST_CASE("a failed PM-sampling call names the cause and the fix", "[gpu-status][pm]") {
  using detail::describe_pm_failure;
  const std::string priv = describe_pm_failure("cuptiPmSamplingEnable", CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, "x");
  CHECK(contains(priv, "cuptiPmSamplingEnable failed (x)"));
  CHECK(contains(priv, "restricted to admin users"));
  CHECK(contains(priv, "NVreg_RestrictProfilingToAdminUsers=0"));
  CHECK(contains(describe_pm_failure("cuptiPmSamplingEnable", CUPTI_ERROR_INVALID_OPERATION, "x"),
                 "taken by another tool"));
  CHECK(contains(describe_pm_failure("cuptiProfilerInitialize", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, "x"),
                 "Nsight"));
  CHECK(contains(describe_pm_failure("cuptiPmSamplingSetConfig", CUPTI_ERROR_NOT_SUPPORTED, "x"), "does not support"));
  CHECK(contains(describe_pm_failure("cuptiPmSamplingEnable", CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED, "x"), "no MIG"));
  CHECK(describe_pm_failure("cuptiPmSamplingStart", CUPTI_ERROR_UNKNOWN, "unknown") ==
        "cuptiPmSamplingStart failed (unknown)");
}
#endif

TEST_CASE("without an NVIDIA driver every output says 'no NVIDIA driver'", "[gpu-status][no-driver]") {
  if (driver_version() > 0) {
    WARN("SKIPPED: an NVIDIA driver is present (version " << driver_version()
                                                          << "); this test checks a machine without one");
    return;
  }
  reset_diagnostics(true);
  const cuda_device_check device = check_cuda_device();
  CHECK_FALSE(device.ok());
  CHECK(device.why.rfind("no NVIDIA driver", 0) == 0);

  SECTION("the sources and the factory") {
    cupti_source c;
    CHECK_FALSE(c.ok());
    CHECK(c.status() == "kernel attribution off: " + device.why);
    cuda_events_source e;
    CHECK_FALSE(e.ok());
    CHECK(e.status() == "GPU timing off: " + device.why);
    CHECK(make_best_gpu_source() == nullptr);
    const auto msgs = diagnostic_messages();
    REQUIRE(msgs.size() == 1);
    CHECK(contains(msgs[0], "no NVIDIA driver"));
    CHECK_FALSE(contains(msgs[0], "insufficient"));
  }
  SECTION("a profiler given no source by make_best_gpu_source() gives the reason in its outputs") {
    profiler_options o;
    o.print_table = false;
    o.warmup_steps = 0;
    profiler prof(o);
    prof.set_gpu_source(make_best_gpu_source());  // none: no usable GPU
    for (int s = 0; s < 2; ++s) {
      TRACEML_STEP();
    }
    const auto& run = prof.finish();
    CHECK(run.summary.gpu_status == "GPU timing off: " + device.why + "; phases are timed on the CPU");
    CHECK(contains(format_table(run), "\ngpu: GPU timing off: no NVIDIA driver"));
  }
  SECTION("a profiler with the CUPTI source attached writes the reason into the JSON summary") {
    const std::string path =
        std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/traceml_test_no_driver_summary.json";
    profiler_options o;
    o.print_table = false;
    o.warmup_steps = 0;
    o.json_path = path;
    {
      profiler prof(o);
      prof.set_gpu_source(std::make_unique<cupti_source>());
      for (int s = 0; s < 2; ++s) {
        TRACEML_STEP();
        TRACEML_PHASE(forward);
      }
      prof.finish();
    }
    const json doc = json::parse(std::ifstream(path));
    const std::string status = doc["runs"][0]["summary"]["gpu"]["status"];
    INFO(status);
    CHECK_FALSE(status.empty());
    CHECK(contains(status, "no NVIDIA driver"));
    CHECK_FALSE(contains(status, "insufficient"));
    std::remove(path.c_str());
  }
}
