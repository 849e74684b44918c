// traceml: whether this process can use a CUDA device and, when it cannot, why, in words a user can
// act on. Both GPU sources and make_best_gpu_source() ask here, so they all say the same thing.
//
// The CUDA runtime is loaded at run time (gpu/cuda_runtime.hpp); where it is missing, that is the
// reason. The CUDA runtime reports a machine without an NVIDIA driver as cudaErrorInsufficientDriver ("CUDA
// driver version is insufficient for CUDA runtime version"), which sends users to upgrade a driver
// they do not have. cudaDriverGetVersion() gives 0 when no driver is loaded: with it the two cases
// are told apart, and "insufficient" is kept for a driver older than the runtime.
//
//   const traceml::cuda_device_check c = traceml::check_cuda_device();
//   if (!c.ok()) std::puts(c.why.c_str());   // "no NVIDIA driver (...)"
#pragma once
#include <cuda_runtime_api.h>

#include <string>

#include "traceml/config.hpp"
#include "traceml/gpu/cuda_runtime.hpp"

TRACEML_BEGIN_NAMESPACE

/// The outcome of one device query.
struct cuda_device_check {
  int devices = 0;  ///< CUDA devices visible to this process
  std::string why;  ///< empty when devices > 0; otherwise what is missing and what to do about it
  bool ok() const noexcept { return devices > 0; }
};

namespace detail {

/// "CUDA 12.4" from the runtime's encoding (1000 * major + 10 * minor).
inline std::string cuda_version_text(int v) {
  return "CUDA " + std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

/// The words for a device query's outcome (pure, so that every branch is tested without a GPU): the
/// error of cudaGetDeviceCount, the devices it found, and the versions of the driver (0: none
/// loaded) and of the runtime this program was linked with. Empty when a device is usable.
inline std::string describe_device_check(cudaError_t error, int devices, int driver_version, int runtime_version) {
  if (error == cudaSuccess && devices > 0) return "";
  if (driver_version <= 0)
    return "no NVIDIA driver (the CUDA runtime found no libcuda; install the NVIDIA driver on a machine with a GPU)";
  if (error == cudaErrorInsufficientDriver && driver_version < runtime_version)
    return "insufficient NVIDIA driver: it supports up to " + cuda_version_text(driver_version) +
           ", this program's CUDA runtime is " + cuda_version_text(runtime_version) + " (update the driver)";
  if (error == cudaSuccess || error == cudaErrorNoDevice)
    return "no CUDA device (the NVIDIA driver sees no GPU; check CUDA_VISIBLE_DEVICES)";
  return std::string("no CUDA device (") + detail::rt::cudaGetErrorString(error) + ")";
}

}  // namespace detail

/// Asks the CUDA runtime for devices and, when there is none, for the driver's and the runtime's
/// versions to say why. Leaves no sticky error behind. Cost: a few runtime calls (the first one
/// initializes the runtime); call it once per source, never on a hot path.
inline cuda_device_check check_cuda_device() {
  cuda_device_check c;
  if (!detail::rt::runtime_missing().empty()) {  // no runtime to ask (gpu/cuda_runtime.hpp loads it at run time)
    c.why = detail::rt::runtime_missing();
    return c;
  }
  const cudaError_t e = detail::rt::cudaGetDeviceCount(&c.devices);
  if (e != cudaSuccess) c.devices = 0;
  if (!c.ok()) {
    int driver = 0, runtime = 0;
    if (detail::rt::cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
    if (detail::rt::cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
    c.why = detail::describe_device_check(e, c.devices, driver, runtime);
  }
  detail::rt::cudaGetLastError();  // the training loop must not trip over our failed query
  return c;
}

TRACEML_END_NAMESPACE
