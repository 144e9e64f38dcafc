// Same job as OpenReg's csrc/runtime/OpenRegSerialization.cpp (torch_npu: csrc/core/NPUSerialization.cpp).
// Backend metadata: what a chip records about one tensor beyond its sizes and dtype (torch_npu
// keeps its private memory format there). PyTorch stores it on the TensorImpl as a
// c10::BackendMeta and asks the backend to turn it into named flags and back:
// torch._utils.get_tensor_metadata / set_tensor_metadata, and torch.save / torch.load
// (the flags travel in the file, and are set again on the loaded tensor).
#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/jit/serialization/pickler_helper.h>

#include <string>
#include <unordered_map>
#include <utility>

namespace toychip {
namespace {

using Flags = std::unordered_map<std::string, bool>;

// The toy chip has no private formats, so it keeps the flags it is given, as given.
// Immutable: BackendMeta::clone shares it between a tensor and its shallow copies
// (what detach() returns), and setting new flags replaces it rather than changing it.
struct ToyChipBackendMeta final : c10::BackendMeta {
  explicit ToyChipBackendMeta(Flags flags) : flags(std::move(flags)) {}
  const Flags flags;
};

// get_tensor_metadata / torch.save: the tensor's flags into `out` (which holds "conj", "neg").
void write_flags(const at::Tensor& tensor, Flags& out) {
  auto* meta = dynamic_cast<ToyChipBackendMeta*>(tensor.unsafeGetTensorImpl()->get_backend_meta());
  if (meta != nullptr) {
    out.insert(meta->flags.begin(), meta->flags.end());
  }
}

// set_tensor_metadata / torch.load: `flags` (PyTorch's own keys already taken out) become the
// tensor's; none at all clears them.
void read_flags(const at::Tensor& tensor, Flags& flags) {
  c10::intrusive_ptr<c10::BackendMeta> meta;
  if (!flags.empty()) {
    meta = c10::make_intrusive<ToyChipBackendMeta>(flags);
  }
  tensor.unsafeGetTensorImpl()->set_backend_meta(std::move(meta));
}

// Registered when the extension is loaded, once per process (PyTorch refuses a second one).
bool g_registered [[maybe_unused]] = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &write_flags, &read_flags);
  return true;
}();

} // namespace
} // namespace toychip
