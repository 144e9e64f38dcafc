// Same job as OpenReg's csrc/runtime/OpenRegGenerator.h (torch_npu: csrc/aten/NPUGeneratorImpl.h).
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <cstdint>

namespace toychip {

// The kernels are NumPy, so the chip's generator only has to hand out seeds: a CPU-style
// mt19937 generator (manual_seed, seed, get_state/set_state for free) whose device is
// toychip:i, so torch.Generator("toychip") and the default generators look like a device's.
class ToyChipGeneratorImpl : public at::CPUGeneratorImpl {
 public:
  explicit ToyChipGeneratorImpl(c10::DeviceIndex device_index);
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  // CPUGeneratorImpl's clone would come back as a CPU generator; keep the device.
  ToyChipGeneratorImpl* clone_impl() const override;
};

// Made on first use, one per device (torch.cuda.default_generators' counterpart).
const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

// A 63-bit seed for a NumPy kernel, drawn under the generator's mutex from `generator`,
// or from `device`'s default generator when it is undefined.
int64_t draw_seed(const at::Generator& generator, c10::DeviceIndex device);

} // namespace toychip
