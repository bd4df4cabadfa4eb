// The C++ shim: the few things libtorch's public C++ API has and `tch` does not expose.
// Handles are libtch's own: a module is a `torch::jit::script::Module*` (what torch-sys's
// `atm_load` returns), an IValue a `torch::jit::IValue*` (`ati_*`), a tensor a `torch::Tensor*`.
// Every function catches C++ exceptions and reports them as a malloc'ed message in `*err`,
// because an exception crossing into Rust aborts the process.
#include <torch/script.h>
#include <torch/version.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>
#include <torch/csrc/jit/codegen/onednn/interface.h>
#include <torch/csrc/jit/mobile/type_parser.h>
#include <ATen/cpu/Utils.h>

#include <dlfcn.h>

#include "protect.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

using module_t = torch::jit::script::Module*;
using ivalue_t = torch::jit::IValue*;
using tensor_t = torch::Tensor*;

extern "C" {

// Calls `cb(ctx, name)` for each method of the module (forward and @torch.jit.export ones).
void tn_method_names(module_t m, void (*cb)(void*, const char*), void* ctx, char** err) {
  TN_PROTECT(err, for (const auto& method : m->get_methods()) cb(ctx, method.name().c_str());)
}

// Describes a method's schema: `arg_cb(ctx, name, type, has_default)` for each argument after
// `self`, then returns the return type's annotation (malloc'ed), or null with `*err` set
// (e.g. no such method).
char* tn_method_schema(module_t m, const char* name,
                       void (*arg_cb)(void*, const char*, const char*, int), void* ctx,
                       char** err) {
  TN_PROTECT(
      err, auto method = m->find_method(name); if (!method) {
        *err = copy_string(std::string("no method named '") + name + "'");
        return nullptr;
      } const auto& schema = method->function().getSchema();
      const auto& args = schema.arguments();
      for (size_t i = 1; i < args.size(); ++i) {
        arg_cb(ctx, args[i].name().c_str(), args[i].type()->annotation_str().c_str(),
               args[i].default_value().has_value() ? 1 : 0);
      } std::string ret;
      if (schema.returns().size() == 1) ret = schema.returns()[0].type()->annotation_str();
      else ret = "Tuple";
      return copy_string(ret);)
  return nullptr;
}

// A list whose element type is what the schema declares (libtch's `ati_generic_list` makes
// List[Any], which TorchScript rejects for a `List[int]` argument). The items are copied.
ivalue_t tn_typed_list(const char* elem_type, ivalue_t* items, int n, char** err) {
  TN_PROTECT(err, c10::impl::GenericList list(c10::parseType(elem_type));
             list.reserve(n); for (int i = 0; i < n; ++i) list.push_back(*items[i]);
             return new torch::jit::IValue(std::move(list));)
  return nullptr;
}

// A dict typed as the schema declares; keys and values are copied.
ivalue_t tn_typed_dict(const char* key_type, const char* value_type, ivalue_t* keys,
                       ivalue_t* values, int n, char** err) {
  TN_PROTECT(err, c10::impl::GenericDict dict(c10::parseType(key_type), c10::parseType(value_type));
             for (int i = 0; i < n; ++i) dict.insert_or_assign(*keys[i], *values[i]);
             return new torch::jit::IValue(std::move(dict));)
  return nullptr;
}

// 1 when a dict IValue's declared key type is `str` (an empty Dict[str, T] is still a JS object).
int tn_dict_has_string_keys(ivalue_t v) {
  try {
    return v->isGenericDict() && v->toGenericDict().keyType()->kind() == c10::TypeKind::StringType;
  } catch (...) {
    return 0;
  }
}

// The autograd node that produced the tensor, named as Python names it ("AddBackward0"), or null.
char* tn_grad_fn_name(tensor_t t) {
  try {
    const auto& fn = t->grad_fn();
    if (!fn) return nullptr;
    std::string name = fn->name();
    auto pos = name.rfind("::");
    return copy_string(pos == std::string::npos ? name : name.substr(pos + 2));
  } catch (...) {
    return nullptr;
  }
}

}  // extern "C"

extern "C" {

// Moves parameters and buffers to a device, keeping their dtypes (libtch's `atm_to` also casts).
// `device` is -1 for the CPU, else a CUDA index.
void tn_module_to_device(module_t m, int device, char** err) {
  TN_PROTECT(err, m->to(device < 0 ? c10::Device(c10::kCPU)
                                   : c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device)));)
}

// Whether the module is in training mode.
int tn_module_is_training(module_t m) { return m->is_training() ? 1 : 0; }

// Prepares a module for inference, in place, in this order (each step optional):
// `bf16`: floating parameters and buffers to bfloat16; `channels_last`: 4-D parameters (conv
// weights) to the channels-last memory format; `optimize`: eval mode, `torch::jit::freeze`
// (parameters and attributes become constants, training-only code goes) and
// `optimize_for_inference` (conv/bn folding, oneDNN prepacked weights) — or, with `optimize`
// 2, freezing only, for oneDNN Graph fusion (which optimize_for_inference's rewrites break).
// Methods other than `forward` (the @torch.jit.export ones) are preserved through both passes.
void tn_module_prepare(module_t m, int bf16, int channels_last, int optimize, char** err) {
  TN_PROTECT(err, {
    torch::NoGradGuard no_grad;
    if (bf16) m->to(at::kBFloat16);
    if (channels_last) {
      for (at::Tensor p : m->parameters()) {
        if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
      }
    }
    if (optimize) {
      std::vector<std::string> others;
      for (const auto& method : m->get_methods()) {
        if (method.name() != "forward") others.push_back(method.name());
      }
      m->eval();
      torch::jit::Module frozen = torch::jit::freeze(*m, others);
      *m = optimize == 2 ? frozen : torch::jit::optimize_for_inference(frozen, others);
    }
  })
}

// Turns oneDNN Graph (LLGA) fusion on or off for the TorchScript graphs that the profiling
// executor optimizes from now on (a process-wide pass; `torch.jit.enable_onednn_fusion`).
void tn_onednn_fusion(int enabled, char** err) {
  TN_PROTECT(err, torch::jit::RegisterLlgaFuseGraph::setEnabled(enabled != 0);)
}

// Calls `cb(ctx, name, kind, number, text)` for each entry of libtorch's CPU capability map
// (`torch._C._cpu._get_cpu_capability()` in Python): kind 0 a bool in `number`, 1 an integer in
// `number`, 2 a string in `text`.
void tn_cpu_capabilities(void (*cb)(void*, const char*, int, int64_t, const char*), void* ctx,
                         char** err) {
  TN_PROTECT(err, {
    for (const auto& entry : at::cpu::get_cpu_capabilities()) {
      const c10::IValue& v = entry.second;
      if (v.isBool()) cb(ctx, entry.first.c_str(), 0, v.toBool() ? 1 : 0, nullptr);
      else if (v.isInt()) cb(ctx, entry.first.c_str(), 1, v.toInt(), nullptr);
      else if (v.isString()) cb(ctx, entry.first.c_str(), 2, 0, v.toStringRef().c_str());
    }
  })
}

}  // extern "C"

extern "C" {

// Where a tensor's view starts in its storage, in elements.
int64_t tn_storage_offset(tensor_t t) { return t->storage_offset(); }

// The size of a tensor's whole storage, in bytes.
int64_t tn_storage_nbytes(tensor_t t) {
  return t->has_storage() ? static_cast<int64_t>(t->storage().nbytes()) : 0;
}

// Forbids growing the tensor's storage in place (`resize_` to more bytes would reallocate it
// and free the block a JS array lent over it still points at), as PyTorch does for storages
// it shares with numpy. Growing then throws "Trying to resize storage that is not resizable".
void tn_storage_pin(tensor_t t) {
  if (t->has_storage()) t->storage().unsafeGetStorageImpl()->set_resizable(false);
}

// An identity for a tensor's storage: equal for tensors that share one.
const void* tn_storage_id(tensor_t t) {
  return t->has_storage() ? static_cast<const void*>(t->storage().unsafeGetStorageImpl()) : nullptr;
}

// A CPU tensor over memory it does not own (memory lent by JS): `release(ctx)` runs when the
// storage is freed — on whichever thread drops the last tensor that uses it.
tensor_t tn_from_blob(void* data, const int64_t* sizes, const int64_t* strides, int ndim, int dtype,
                      void (*release)(void*), void* ctx, char** err) {
  // `release` may run only once the tensor exists: on a failure the caller still owns `ctx`
  // (and frees it), so a deleter that a throw unwinds (out of memory) must not release it too.
  auto armed = std::make_shared<bool>(false);
  TN_PROTECT(err, auto options = torch::TensorOptions().dtype(static_cast<c10::ScalarType>(dtype));
             auto t = torch::from_blob(
                 data, c10::IntArrayRef(sizes, ndim), c10::IntArrayRef(strides, ndim),
                 [release, ctx, armed](void*) {
                   if (*armed) release(ctx);
                 },
                 options);
             auto out = new torch::Tensor(std::move(t)); *armed = true; return out;)
  return nullptr;
}

}  // extern "C"

extern "C" {

// A JS number as PyTorch treats a Python scalar: a 0-dim "wrapped number" tensor, which type
// promotion ranks below every tensor (int32 tensor + 2.5 -> float32, as in Python).
tensor_t tn_wrapped_number(double value, int is_integer, char** err) {
  TN_PROTECT(err, at::Tensor t = is_integer ? at::scalar_to_tensor(c10::Scalar(static_cast<int64_t>(value)))
                                            : at::scalar_to_tensor(c10::Scalar(value));
             t.unsafeGetTensorImpl()->set_wrapped_number(true);
             return new torch::Tensor(std::move(t));)
  return nullptr;
}

// `t.clone()`, recorded by autograd as CloneBackward0 like Python's.
tensor_t tn_clone(tensor_t t, char** err) {
  TN_PROTECT(err, return new torch::Tensor(t->clone());)
  return nullptr;
}

// The tensor in the channels-last memory format (itself when it already is).
tensor_t tn_channels_last(tensor_t t, char** err) {
  TN_PROTECT(err, return new torch::Tensor(t->contiguous(at::MemoryFormat::ChannelsLast));)
  return nullptr;
}

}  // extern "C"

extern "C" {

// The libtorch version this shim was compiled against.
void tn_torch_version(int* major, int* minor) {
  *major = TORCH_VERSION_MAJOR;
  *minor = TORCH_VERSION_MINOR;
}

// dlopen(path, RTLD_NOW | RTLD_GLOBAL) for a library of custom ops: its static initializers
// (TORCH_LIBRARY registrations) run now and may throw (a namespace registered twice); that
// becomes an error message, not a crash. Returns the handle (never closed) or null.
void* tn_dlopen(const char* path, char** err) {
  TN_PROTECT(err, {
    void* handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      const char* why = dlerror();
      *err = copy_string(why ? why : "dlopen failed");
    }
    return handle;
  })
  return nullptr;
}

}  // extern "C"

extern "C" {

using aoti_t = torch::inductor::AOTIModelPackageLoader*;

// Loads an AOTInductor package (`.pt2`): extracts its compiled model and loads it. `device` is
// -1 for the package's own device (CPU packages), else a CUDA index.
aoti_t tn_aoti_load(const char* path, int device, char** err) {
  TN_PROTECT(err, return new torch::inductor::AOTIModelPackageLoader(
                      path, "model", false, 1, static_cast<c10::DeviceIndex>(device));)
  return nullptr;
}

void tn_aoti_free(aoti_t m) { delete m; }

// Runs the compiled model on `n` input tensors; calls `cb(ctx, tensor)` for each output (the
// callee owns it).
void tn_aoti_run(aoti_t m, tensor_t* inputs, int n, void (*cb)(void*, tensor_t), void* ctx,
                 char** err) {
  TN_PROTECT(err, {
    std::vector<at::Tensor> in;
    in.reserve(n);
    for (int i = 0; i < n; i++) in.push_back(*inputs[i]);
    for (at::Tensor& t : m->run(in)) cb(ctx, new torch::Tensor(std::move(t)));
  })
}

// Calls `cb(ctx, fqn, address, nbytes)` for each constant of the loaded model that lives in
// CPU memory (keyed by original FQN, as extract_constants_map gives them): the range of its
// storage, all the bytes it can reach; address 0 for one without a plain storage (oneDNN's
// opaque tensors, allocated apart from the constants' blob).
void tn_aoti_constants(aoti_t m, void (*cb)(void*, const char*, uintptr_t, size_t), void* ctx,
                       char** err) {
  TN_PROTECT(err, {
    torch::inductor::AOTIModelContainerRunner* runner = m->get_runner();
    if (runner != nullptr) {
      for (const auto& [fqn, t] : runner->extract_constants_map(false)) {
        if (!t.defined() || !t.device().is_cpu()) continue;
        bool plain = t.has_storage() && !t.is_mkldnn() && t.storage().data() != nullptr;
        cb(ctx, fqn.c_str(), plain ? reinterpret_cast<uintptr_t>(t.storage().data()) : 0,
           plain ? t.storage().nbytes() : 0);
      }
    }
  })
}

// Calls `cb(ctx, key, value)` for each entry of the package's metadata, then once more for each
// of its call specs (keys "in_spec" and "out_spec": the pytree specs of inputs and outputs).
void tn_aoti_metadata(aoti_t m, void (*cb)(void*, const char*, const char*), void* ctx,
                      char** err) {
  TN_PROTECT(err, {
    for (const auto& entry : m->get_metadata()) cb(ctx, entry.first.c_str(), entry.second.c_str());
    std::vector<std::string> spec = m->get_call_spec();
    if (spec.size() == 2) {
      cb(ctx, "in_spec", spec[0].c_str());
      cb(ctx, "out_spec", spec[1].c_str());
    }
  })
}

}  // extern "C"

// libtorch's warnings (TORCH_WARN, TorchScript's `warnings.warn`) go to a thread-local
// c10::WarningHandler whose default prints to stderr. This one hands them to torch-node, which
// delivers them to Node's process.emitWarning on the JS thread that asked for the work.
namespace {
using warning_cb_t = void (*)(const char* message, int deprecation);
warning_cb_t warning_cb = nullptr;

class ForwardingHandler : public c10::WarningHandler {
 public:
  void process(const c10::Warning& w) override {
    if (!warning_cb) return c10::WarningHandler::process(w);
    warning_cb(w.msg().c_str(), std::holds_alternative<c10::DeprecationWarning>(w.type()) ? 1 : 0);
  }
};
}  // namespace

extern "C" {
// Installs the forwarding handler on the calling thread (the handler is per thread in c10).
void tn_forward_warnings(warning_cb_t cb) {
  static ForwardingHandler handler;
  warning_cb = cb;
  c10::WarningUtils::set_warning_handler(&handler);
}
}
