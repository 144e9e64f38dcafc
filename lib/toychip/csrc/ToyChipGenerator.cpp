// Same job as OpenReg's csrc/runtime/OpenRegGenerator.cpp (torch_npu: csrc/aten/NPUGeneratorImpl.cpp).
#include "ToyChipGenerator.h"

#include "ToyChipFunctions.h"

#include <c10/util/Exception.h>

#include <array>
#include <mutex>

namespace toychip {

ToyChipGeneratorImpl::ToyChipGeneratorImpl(c10::DeviceIndex device_index) {
  // GeneratorImpl's device and keys are protected members set for the CPU by the base.
  device_ = c10::Device(c10::DeviceType::PrivateUse1, device_index);
  key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

ToyChipGeneratorImpl* ToyChipGeneratorImpl::clone_impl() const {
  auto* copy = new ToyChipGeneratorImpl(device_.index());
  copy->set_engine(const_cast<ToyChipGeneratorImpl*>(this)->engine());
  copy->set_next_float_normal_sample(const_cast<ToyChipGeneratorImpl*>(this)->next_float_normal_sample());
  copy->set_next_double_normal_sample(const_cast<ToyChipGeneratorImpl*>(this)->next_double_normal_sample());
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  // Leaked: generators outlive Python (the autograd engine's threads may hold them at exit).
  static auto* generators = new std::array<at::Generator, kMaxDevices>();
  static auto* once = new std::array<std::once_flag, kMaxDevices>();
  device = resolve(device);
  std::call_once((*once)[device], [device] {
    freeze_device_count();
    (*generators)[device] = at::make_generator<ToyChipGeneratorImpl>(device);
    (*generators)[device].set_current_seed(c10::default_rng_seed_val);
  });
  return (*generators)[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  freeze_device_count();
  return at::make_generator<ToyChipGeneratorImpl>(resolve(device));
}

int64_t draw_seed(const at::Generator& generator, c10::DeviceIndex device) {
  const at::Generator& source = generator.defined() ? generator : default_generator(device);
  TORCH_CHECK(
      source.device().type() == c10::DeviceType::PrivateUse1,
      "a toychip kernel needs a toychip generator, not a ", source.device().type(), " one");
  auto* impl = source.get<ToyChipGeneratorImpl>();
  // See PyTorch's Note [Acquire lock when using random generators].
  std::lock_guard<std::mutex> lock(impl->mutex_);
  return static_cast<int64_t>(impl->random64() >> 1);
}

} // namespace toychip
