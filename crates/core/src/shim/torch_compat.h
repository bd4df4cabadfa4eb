// Stand-ins for the ops that tch 0.26's generated C++ (torch-sys's libtch/torch_api_generated.cpp,
// written for libtorch 2.13) calls but an older libtorch (2.11, 2.12) lacks or declares otherwise.
// scripts/build.js gives this header to every C++ compile of the build (`-include` in CXXFLAGS,
// which cc-rs reads) when the libtorch it builds against is older than 2.13; it does nothing in a
// compile that cannot see libtorch's headers (another crate's C++) or against libtorch 2.13.
//
// The generated code calls `torch::name(...)`. libtorch's ops live in `at::` and reach `torch::`
// through the `using namespace at;` in torch/types.h; a qualified lookup looks at the namespace's
// own declarations before the namespaces it names with using-directives, so a variadic template
// declared in `torch::` hides `at::`'s op of the same name (and its older signature). Each
// stand-in throws: libtch's PROTECT turns the exception into tch's error (never an abort), whose
// message names the op and this libtorch's version. None is reachable from torch-node's API.
#ifndef TORCH_NODE_TORCH_COMPAT_H
#define TORCH_NODE_TORCH_COMPAT_H
#if defined(__cplusplus) && __has_include(<torch/headeronly/version.h>)
#include <torch/headeronly/version.h>
#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 13
#include <ATen/core/Tensor.h>
#include <stdexcept>
#include <string>
#include <tuple>

namespace torch_node_compat {
#define TORCH_NODE_STR2(x) #x
#define TORCH_NODE_STR(x) TORCH_NODE_STR2(x)
/// The version of the libtorch headers this compile sees, "2.11.0".
inline constexpr const char* kLibtorchVersion =
    TORCH_NODE_STR(TORCH_VERSION_MAJOR) "." TORCH_NODE_STR(TORCH_VERSION_MINOR) "." TORCH_NODE_STR(
        TORCH_VERSION_PATCH);
[[noreturn]] inline void missing(const char* op, const char* since) {
  throw std::runtime_error(std::string("torch-node: the op ") + op + " is not in libtorch " +
                           kLibtorchVersion + ", which this build of torch-node links (it needs libtorch " +
                           since + " or newer)");
}
using TensorPair = std::tuple<at::Tensor, at::Tensor>;
}  // namespace torch_node_compat

#define TORCH_NODE_STAND_IN(ret, name, since)                 \
  namespace torch {                                           \
  template <typename... Args>                                 \
  ret name(Args&&...) {                                       \
    torch_node_compat::missing(#name, since);                 \
  }                                                           \
  }

#if TORCH_VERSION_MINOR < 12
// New in libtorch 2.12.
TORCH_NODE_STAND_IN(at::Tensor, _philox_key_fold_in, "2.12")
TORCH_NODE_STAND_IN(at::Tensor, _philox_key_split, "2.12")
TORCH_NODE_STAND_IN(at::Tensor, _philox_normal, "2.12")
TORCH_NODE_STAND_IN(at::Tensor, _philox_normal_, "2.12")
TORCH_NODE_STAND_IN(at::Tensor, _philox_normal_out, "2.12")
TORCH_NODE_STAND_IN(at::Tensor, _philox_uniform, "2.12")
TORCH_NODE_STAND_IN(at::Tensor, _philox_uniform_, "2.12")
TORCH_NODE_STAND_IN(at::Tensor, _philox_uniform_out, "2.12")
TORCH_NODE_STAND_IN(at::Tensor, _upsample_lanczos2d_aa, "2.12")
TORCH_NODE_STAND_IN(at::Tensor, _upsample_lanczos2d_aa_out, "2.12")
TORCH_NODE_STAND_IN(at::Tensor, _upsample_lanczos2d_aa_backward, "2.12")
TORCH_NODE_STAND_IN(at::Tensor, _upsample_lanczos2d_aa_backward_out, "2.12")
TORCH_NODE_STAND_IN(at::Tensor, _flash_attention_forward_no_dropout_inplace, "2.12")
// Gained `enable_gqa` in 2.12.
TORCH_NODE_STAND_IN(torch_node_compat::TensorPair, _scaled_dot_product_attention_math_for_mps, "2.12")
#endif

#undef TORCH_NODE_STAND_IN
#endif  // libtorch older than 2.13
#endif  // C++ with libtorch's headers
#endif  // TORCH_NODE_TORCH_COMPAT_H
