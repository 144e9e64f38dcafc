// Same job as OpenReg's csrc/profiler/stubs/openreg.cpp (torch_npu: csrc/profiler/profiler_npu.cpp).
// Below the stubs, the job of OpenReg's csrc/profiler/OpenRegActivityProfiler.cpp and
// OpenRegActivityProfilerSession.cpp (torch_npu: csrc/profiler/mspti_activity_profiler.cpp).
//
// Two ways PyTorch's profiler sees the chip:
//
// 1. Profiler stubs. torch.autograd.profiler.profile(use_device="toychip", use_kineto=False)
// runs in KINETO_PRIVATEUSE1_FALLBACK mode: around every op it asks these stubs to record a
// device event, and it reads the time between the two as the op's device time
// (FunctionEvent's "toychip time"). Without stubs PyTorch's default ones throw, the op's start
// is never stamped, and its CPU time comes out as garbage (-1e17 us). The events are the device
// guard's: recording one notes the current stream's *simulated* time (in every open
// toychip.profile(), and on the chips' own clock, which runs while a recorded event lives:
// toychip.ledger), so device times are simulated microseconds.
//
// 2. A Kineto activity profiler. torch.profiler.profile(activities=[CPU, PrivateUse1]) asks
// Kineto for device activity; Kineto asks every IActivityProfiler registered with it
// (REGISTER_PRIVATEUSE1_PROFILER, torch's PrivateUse1ProfilerRegistry) for a session, starts
// and stops it with the trace, tells it each CPU op's correlation id as the op runs (what
// CUPTI's external correlation does for CUDA), and at the end has it log its activities
// beside the CPU ops. The session's device activity comes from the simulated clock
// (toychip.kineto, through ProfilerHooks): each kernel or copy with its simulated duration, on
// its chip's and stream's row, linked to the CPU op that launched it. A zero-length runtime
// event at the launch, on the CPU op's row, starts the flow arrow to it, as cudaLaunchKernel
// does for a CUDA kernel.
#include "ToyChipProfiler.h"

#include "ToyChipFunctions.h"
#include "ToyChipGuard.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include <c10/util/irange.h>
#include <torch/csrc/profiler/stubs/base.h>

// runtime_build defines TOYCHIP_WITH_KINETO where torch.autograd.kineto_available() (every
// torch 2.13 wheel): torch's headers declare the profiler registry only under USE_KINETO,
// which extensions are not given. Without Kineto the stubs are all there is.
#ifdef TOYCHIP_WITH_KINETO
#define USE_KINETO
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#endif

#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace toychip {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

c10::Device chip(c10::DeviceIndex index) {
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

struct ToyChipProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    ToyChipGuardImpl guard;
    auto index = current_device();
    void* recorded = nullptr;
    guard.record(&recorded, guard.getStream(chip(index)), index, c10::EventFlag::BACKEND_DEFAULT);
    *event = std::shared_ptr<void>(recorded, [index](void* e) { ToyChipGuardImpl().destroyEvent(e, index); });
    if (device != nullptr) {
      *device = index;
    }
    if (cpu_ns != nullptr) {
      *cpu_ns = c10::getTime();
    }
  }

  // Microseconds, as CUDA's stubs return.
  float elapsed(const ProfilerVoidEventStub* start, const ProfilerVoidEventStub* end) const override {
    try {
      return static_cast<float>(ToyChipGuardImpl().elapsedTime(start->get(), end->get(), -1) * 1000.0);
    } catch (const std::exception&) {
      return 0.0f;  // the two events share no timeline (recorded on different chips)
    }
  }

  // The chip has no annotation ranges (NVTX's job on CUDA).
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}

  void onEachDevice(std::function<void(int)> op) const override {
    c10::DeviceGuard guard(chip(current_device()));
    for (const auto i : c10::irange(device_count())) {
      guard.set_index(i);
      op(i);
    }
  }

  void synchronize() const override {}  // a kernel has finished when its call returns

  bool enabled() const override {
    return true;
  }
};

struct RegisterProfilerStubs {
  RegisterProfilerStubs() {
    static ToyChipProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};
RegisterProfilerStubs register_profiler_stubs;

// ---------------------------------------------------------------- the Kineto activity profiler

// Swapped as a whole, as the event hooks are; leaked (they hold Python objects).
struct ProfilerHookSlot {
  std::mutex mutex;
  std::shared_ptr<const ProfilerHooks> hooks = std::make_shared<ProfilerHooks>();
};
ProfilerHookSlot& profiler_slot() {
  static auto* s = new ProfilerHookSlot();
  return *s;
}
std::shared_ptr<const ProfilerHooks> profiler_hooks() {
  std::lock_guard<std::mutex> lock(profiler_slot().mutex);
  return profiler_slot().hooks;
}

// The CPU ops' correlation ids Kineto pushed on this thread, innermost last. The autograd
// engine runs the backward of chip ops on its own thread, so this is per thread, as CUPTI's is.
thread_local std::vector<int64_t> t_correlation_ids;

#ifdef TOYCHIP_WITH_KINETO
using libkineto::ActivityType;

// A device activity's row: the chip is the trace's process (pid), the stream its thread (tid).
// No metadata (addMetadata formats with fmt, which libtorch does not export): the row says
// the chip and stream, the "External id" Kineto adds names the launching CPU op.
libkineto::GenericTraceActivity device_event(const DeviceActivity& op, int32_t flow) {
  libkineto::GenericTraceActivity event;
  event.activityType = op.copy ? ActivityType::GPU_MEMCPY : ActivityType::CONCURRENT_KERNEL;
  event.activityName = op.name;
  event.device = op.device;
  event.resource = static_cast<int32_t>(op.stream);
  event.startTime = op.start_ns;
  event.endTime = op.start_ns + op.duration_ns;
  event.id = flow;
  return event;
}

// The host side of a launch, on the row of the CPU op that made it: where the flow arrow starts.
libkineto::GenericTraceActivity launch_event(const DeviceActivity& op, int32_t flow,
                                             const libkineto::ITraceActivity& cpu_op) {
  libkineto::GenericTraceActivity event;
  event.activityType = ActivityType::PRIVATEUSE1_RUNTIME;
  event.activityName = op.copy ? "toychipMemcpyAsync" : "toychipLaunchKernel";
  event.device = static_cast<int32_t>(cpu_op.deviceId());
  event.resource = static_cast<int32_t>(cpu_op.resourceId());
  event.threadId = cpu_op.getThreadId();
  event.startTime = op.launch_ns;
  event.endTime = op.launch_ns;
  event.id = flow;
  return event;
}

class ToyChipActivitySession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    if (auto hooks = profiler_hooks(); hooks->start) {
      hooks->start(c10::getTime());
    }
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (auto hooks = profiler_hooks(); hooks->stop) {
      ran_ = hooks->stop();
    }
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override {
    return {};
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  // Logs each op the chip ran, linked to the CPU op that launched it; the logger copies them.
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback cpu_op,
                    int64_t start_time, int64_t /*end_time*/) override {
    std::map<c10::DeviceIndex, std::set<c10::StreamId>> rows;
    int32_t flow = 0;
    for (const auto& op : ran_) {
      ++flow;
      rows[op.device].insert(op.stream);
      auto device = device_event(op, flow);
      const libkineto::ITraceActivity* launcher =
          op.correlation > 0 ? cpu_op(static_cast<int32_t>(op.correlation)) : nullptr;
      if (launcher != nullptr) {
        auto launch = launch_event(op, flow, *launcher);
        launch.linked = launcher;
        launch.flow.id = flow;
        launch.flow.type = libkineto::kLinkAsyncCpuGpu;
        launch.flow.start = true;
        launch.log(logger);
        device.linked = launcher;
        device.flow = launch.flow;
        device.flow.start = false;
      }
      device.log(logger);
    }
    for (const auto& [chip_index, streams] : rows) {
      if (chip_index != 0) {
        logger.handleDeviceInfo(*chip_info(chip_index), start_time);
      }
      for (auto stream : streams) {
        logger.handleResourceInfo({stream, stream, chip_index, "stream " + std::to_string(stream)}, start_time);
      }
    }
  }

  // Chip 0's name; processTrace names the other chips that ran anything, and the streams.
  // Kineto labels processes 0-15 "GPU n" when no session names one.
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return chip_info(0);
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    return {};
  }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return nullptr;
  }

  void pushCorrelationId(uint64_t id) override {
    t_correlation_ids.push_back(static_cast<int64_t>(id));
  }
  void popCorrelationId() override {
    if (!t_correlation_ids.empty()) {
      t_correlation_ids.pop_back();
    }
  }

 private:
  // Kineto sorts rows by sortIndex: CPU processes use their pid; put the chips below them.
  static std::unique_ptr<libkineto::DeviceInfo> chip_info(c10::DeviceIndex index) {
    constexpr int64_t kSortAfterCpu = 1 << 24;
    auto name = "toychip:" + std::to_string(index);
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{index, kSortAfterCpu + index, name, name + " (simulated time)"});
  }
  std::vector<DeviceActivity> ran_;
};

class ToyChipActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override {
    return name_;
  }

  const std::set<ActivityType>& availableActivities() const override {
    return activities_;
  }

  // A session only when the trace asks for device activity (ProfilerActivity.PrivateUse1):
  // kernels or copies. PRIVATEUSE1_RUNTIME alone does not count: torch asks for it with CPU.
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& activity_types,
                                                                 const libkineto::Config& /*config*/) override {
    if (activity_types.count(ActivityType::CONCURRENT_KERNEL) == 0 &&
        activity_types.count(ActivityType::GPU_MEMCPY) == 0) {
      return nullptr;
    }
    return std::make_unique<ToyChipActivitySession>();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t /*ts_ms*/, int64_t /*duration_ms*/,
                                                                 const std::set<ActivityType>& activity_types,
                                                                 const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_{"toychip"};
  std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                     ActivityType::PRIVATEUSE1_RUNTIME};
};

REGISTER_PRIVATEUSE1_PROFILER(ToyChipActivityProfiler);
#endif // TOYCHIP_WITH_KINETO

} // namespace

void set_profiler_hooks(ProfilerHooks hooks) {
  std::shared_ptr<const ProfilerHooks> fresh = std::make_shared<ProfilerHooks>(std::move(hooks));
  std::lock_guard<std::mutex> lock(profiler_slot().mutex);
  profiler_slot().hooks.swap(fresh);  // the old set is released after the lock, by `fresh`
}

int64_t current_correlation_id() noexcept {
  return t_correlation_ids.empty() ? 0 : t_correlation_ids.back();
}

} // namespace toychip
