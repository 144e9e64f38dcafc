// Same job as OpenReg's csrc/profiler/OpenRegActivityProfiler.h (torch_npu: csrc/profiler/mspti_activity_profiler.h).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace toychip {

// One op the chip ran while torch.profiler recorded, as the simulated clock scheduled it
// (toychip.kineto): times are on the profiler's clock (c10::getTime() nanoseconds).
struct DeviceActivity {
  std::string name;
  bool copy;                 // a host<->device copy (the copy engine), else a kernel
  c10::DeviceIndex device;
  c10::StreamId stream;
  int64_t start_ns;          // when the chip started it: never before launch_ns
  int64_t duration_ns;       // its simulated duration
  int64_t launch_ns;         // when the host launched it
  int64_t correlation;       // the CPU op that launched it (0: none)
};

// The Python half of the profiler (toychip.kineto): `start(origin_ns)` when a Kineto
// session starts recording, `stop()` when it stops, returning what the chip ran.
// Module.cpp fills these with callables that take the GIL.
struct ProfilerHooks {
  std::function<void(int64_t origin_ns)> start;
  std::function<std::vector<DeviceActivity>()> stop;
};

void set_profiler_hooks(ProfilerHooks hooks);  // an empty ProfilerHooks{} unregisters them

// The calling thread's innermost CPU op's correlation id (0 outside any recorded op), as
// Kineto pushed it: what CUPTI's external correlation gives each CUDA launch.
int64_t current_correlation_id() noexcept;

} // namespace toychip
