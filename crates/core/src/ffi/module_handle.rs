//! libtch's TorchScript module handle (`torch::jit::script::Module*`, the `atm_*` functions) and
//! the shim's calls on it, as one owned type with safe methods: the only place the raw handle is.
use super::ivalue::Owned;
use super::{check_last_error, string_at, Callback, MethodSchema, Prepare};
use anyhow::{bail, Result};
use std::ffi::{c_char, CStr};
use torch_sys::{
    atm_eval, atm_free, atm_load_on_device, atm_load_str_on_device, atm_method_, atm_named_parameters,
    atm_save, atm_train, CIValue, CModule_,
};

/// An owned module handle, freed on drop.
pub struct ModuleHandle(*mut CModule_);

// SAFETY: a torch::jit::Module may run methods from several threads at once (PyTorch serves
// concurrent inference this way); the methods that mutate it (`to_device`, `set_training`,
// `prepare`) take `&mut self`, which the JS wrapper only gets through a write lock.
unsafe impl Send for ModuleHandle {}
unsafe impl Sync for ModuleHandle {}

impl Drop for ModuleHandle {
    fn drop(&mut self) {
        // SAFETY: `self.0` is the non-null handle a load returned (`loaded` refuses null), owned by this
        // `ModuleHandle` alone; drop runs once, so it is freed exactly once.
        unsafe { atm_free(self.0) };
    }
}

/// libtorch's error, or a null handle (`Ok(None)`), from a load.
fn loaded(ptr: *mut CModule_) -> Result<Option<ModuleHandle>> {
    check_last_error()?;
    Ok((!ptr.is_null()).then_some(ModuleHandle(ptr)))
}

impl ModuleHandle {
    /// Loads a `.pt` file onto `device` (-1: CPU, else a CUDA index).
    pub fn load_file(path: &CStr, device: i32) -> Result<Option<ModuleHandle>> {
        // SAFETY: `path` is a NUL-terminated C string borrowed across the call; a failure lands in libtch's
        // thread-local error slot, which `loaded` reads on this thread before owning the new handle.
        loaded(unsafe { atm_load_on_device(path.as_ptr(), device) })
    }

    /// Loads the bytes of a `.pt` file onto `device`.
    pub fn load_bytes(bytes: &[u8], device: i32) -> Result<Option<ModuleHandle>> {
        // SAFETY: libtch copies exactly `bytes.len()` bytes from `bytes` (borrowed across the call) into a
        // `std::string`; the error and the new handle go through `loaded`, as above.
        loaded(unsafe { atm_load_str_on_device(bytes.as_ptr() as *const c_char, bytes.len(), device) })
    }

    /// Runs method `name` on IValue arguments; libtorch's error as it is.
    pub fn method(&self, name: &CStr, args: &[Owned]) -> Result<Owned> {
        let ptrs: Vec<*mut CIValue> = args.iter().map(|o| o.0).collect();
        // SAFETY: `self.0` is live while `self` is borrowed; `name` and `ptrs` (the handles of `args`, kept
        // live by the caller) are borrowed across the call, which copies them; the new IValue it returns is
        // owned by `Owned` at once. Concurrent calls are fine (see the `Sync` note).
        let out = unsafe { atm_method_(self.0, name.as_ptr(), ptrs.as_ptr(), ptrs.len() as i32) };
        let out = Owned(out);
        check_last_error()?;
        if out.0.is_null() {
            bail!("libtorch returned no value");
        }
        Ok(out)
    }

    pub fn named_parameters(&self) -> Result<Vec<(String, tch::Tensor)>> {
        let mut params: Vec<(String, tch::Tensor)> = Vec::new();
        let mut cb = Callback::new(|name, t| {
            // SAFETY: `name` is the parameter's NUL-terminated name, valid during this callback;
            // `t` is a new tensor handle libtch allocated for us, which `from_ptr` takes over.
            params.push(unsafe { (string_at(name), tch::Tensor::from_ptr(t)) })
        });
        // SAFETY: `self.0` is live while `self` is borrowed; `cb` lives across the call.
        unsafe { atm_named_parameters(self.0, cb.ctx(), cb.named_tensors()) };
        cb.finish();
        check_last_error()?;
        Ok(params)
    }

    pub fn set_training(&mut self, training: bool) -> Result<()> {
        // SAFETY: `self.0` is live, and `&mut self` (the JS wrapper's write lock) keeps other threads off the
        // module while its training flag changes; a failure lands in the error slot, checked next.
        unsafe {
            if training {
                atm_train(self.0)
            } else {
                atm_eval(self.0)
            }
        };
        check_last_error()
    }

    pub fn is_training(&self) -> bool {
        // SAFETY: `self.0` is a live module handle while `self` is borrowed, as `module_is_training`
        // requires.
        unsafe { super::module_is_training(self.0) }
    }

    pub fn save(&self, path: &CStr) -> Result<()> {
        // SAFETY: `self.0` is live while `self` is borrowed, and `path` is a C string borrowed across the
        // call; a failure lands in libtch's error slot, checked next on this thread.
        unsafe { atm_save(self.0, path.as_ptr()) };
        check_last_error()
    }

    /// Moves parameters and buffers to `device` (-1: CPU, else a CUDA index).
    pub fn to_device(&mut self, device: i32) -> Result<()> {
        // SAFETY: `self.0` is live, and `&mut self` means no other thread uses the module during the call, as
        // `module_to_device` requires.
        unsafe { super::module_to_device(self.0, device) }
    }

    /// Converts, freezes and optimizes for inference (see `tn_module_prepare` in shim.cpp).
    pub fn prepare(&mut self, how: Prepare) -> Result<()> {
        // SAFETY: `self.0` is live, and `&mut self` means no other thread uses the module during the call, as
        // `module_prepare` requires.
        unsafe { super::module_prepare(self.0, how) }
    }

    pub fn method_names(&self) -> Result<Vec<String>> {
        // SAFETY: `self.0` is a live module handle while `self` is borrowed, as `method_names` requires.
        unsafe { super::method_names(self.0) }
    }

    pub fn method_schema(&self, name: &str) -> Result<MethodSchema> {
        // SAFETY: `self.0` is a live module handle while `self` is borrowed, as `method_schema` requires.
        unsafe { super::method_schema(self.0, name) }
    }
}
