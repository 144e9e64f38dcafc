// Same job as OpenReg's csrc/profiler/stubs/openreg.cpp (torch_npu: csrc/profiler/profiler_npu.cpp).
//
// torch.autograd.profiler.profile(use_device="toychip") runs in KINETO_PRIVATEUSE1_FALLBACK
// mode: around every op it asks these stubs to record a device event, and it reads the time
// between the two as the op's device time (FunctionEvent's "toychip time"). Without stubs
// PyTorch's default ones throw, the op's start is never stamped, and its CPU time comes out
// as garbage (-1e17 us). The events are the device guard's: recording one notes the current
// stream's *simulated* time (in every open toychip.profile(), and on the chips' own clock,
// which runs while a recorded event lives: toychip.ledger), so device times are simulated
// microseconds.
#include "ToyChipFunctions.h"
#include "ToyChipGuard.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include <c10/util/irange.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <exception>
#include <memory>

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

} // namespace
} // namespace toychip
