//! The JS `Tensor` class: a newtype over `tch::Tensor` (`None` once disposed). Split by verb:
//! `create` (factories), `data` (reading values out), `ops` (math and conversions), `display`.
use crate::error::{guard, Code};
use crate::napi::outcome::Outcome;
use napi_derive::napi;
use std::cell::{Cell, Ref, RefCell};
use std::rc::{Rc, Weak};
use tch::Tensor;
use torch_core::{device, dtype, memory};

/// What a JS `Tensor` owns. Shared (`Rc`) so that `torch.tidy` can dispose tensors it saw
/// created, from the JS thread, without holding the JS objects.
pub struct TensorSlot {
    tensor: RefCell<Option<Tensor>>,
    /// The storage this tensor was counted under (see `memory::track`).
    storage: usize,
    /// `dispose()` was called while a native call was using the tensor (JS it ran — a getter,
    /// a Proxy trap — disposed it): the tensor is freed when that call lets go of it.
    dispose_pending: Cell<bool>,
}

impl TensorSlot {
    /// Frees the tensor (idempotent); true when this call freed it. While a call holds the
    /// tensor (see [`TensorRef`]) the release is deferred to the end of that call, and later
    /// uses already see it as disposed.
    pub fn release(&self) -> bool {
        let Ok(mut tensor) = self.tensor.try_borrow_mut() else {
            let first = !self.dispose_pending.replace(true);
            return first;
        };
        let freed = tensor.take().is_some();
        drop(tensor);
        if freed {
            memory::untrack(self.storage);
        }
        freed
    }

    fn is_disposed(&self) -> bool {
        self.dispose_pending.get() || self.tensor.try_borrow().is_ok_and(|t| t.is_none())
    }

    fn same(a: &Rc<TensorSlot>, b: &Rc<TensorSlot>) -> bool {
        Rc::ptr_eq(a, b)
    }
}

thread_local! {
    /// Open `torch.tidy` scopes, innermost last: the tensors created inside each.
    static SCOPES: RefCell<Vec<Vec<Weak<TensorSlot>>>> = const { RefCell::new(Vec::new()) };
}

/// Opens a `tidy` scope.
pub fn scope_begin() {
    SCOPES.with(|s| s.borrow_mut().push(Vec::new()));
}

/// What a closing `tidy` scope keeps.
pub enum Keep {
    /// These tensors (found in the returned value); the others are disposed.
    These(Vec<Rc<TensorSlot>>),
    /// Every tensor: the returned value could not be seen through (a class instance, whose
    /// private fields may hold tensors), so nothing is disposed.
    All,
}

/// Closes the innermost scope: disposes its tensors except those kept, which move to the
/// enclosing scope (if any). Returns how many it disposed.
pub fn scope_end(keep: &Keep) -> usize {
    let Some(created) = SCOPES.with(|s| s.borrow_mut().pop()) else {
        return 0;
    };
    let mut disposed = 0;
    let mut kept = Vec::new();
    for slot in created.iter().filter_map(Weak::upgrade) {
        let keep = match keep {
            Keep::All => true,
            Keep::These(list) => list.iter().any(|k| TensorSlot::same(k, &slot)),
        };
        if keep {
            kept.push(Rc::downgrade(&slot));
        } else if slot.release() {
            disposed += 1;
        }
    }
    SCOPES.with(|s| {
        if let Some(outer) = s.borrow_mut().last_mut() {
            outer.extend(kept);
        }
    });
    disposed
}

/// A tensor: a view (shape, strides, offset, dtype) onto storage owned by libtorch, on the CPU
/// or a CUDA device. Create one with `torch.tensor`, `torch.ones`, ...; free it early with
/// `dispose()` (otherwise the garbage collector frees it).
#[napi(js_name = "Tensor")]
pub struct JsTensor {
    slot: Rc<TensorSlot>,
}

// Declared after the struct: napi-rs's type generator learns `js_name = "Tensor"` when the
// struct's macro expands, and impl blocks expanded before that would be typed as `JsTensor`.
pub mod autograd;
pub mod borrow;
pub mod create;
pub mod data;
pub mod display;
pub mod math;
pub mod operands;
pub mod ops;
pub mod view;

impl JsTensor {
    /// A JS tensor: its storage's bytes are reported to V8 while any JS tensor uses that
    /// storage (a view of a counted storage adds no bytes).
    pub fn new(t: Tensor) -> JsTensor {
        let bytes = torch_core::ffi::storage_nbytes(&t);
        JsTensor::counted(t, bytes)
    }

    /// A tensor over memory borrowed from JS: V8 already counts that memory (its ArrayBuffer),
    /// so it adds no bytes, nor do views of it made while it lives.
    pub fn borrowed(t: Tensor) -> JsTensor {
        JsTensor::counted(t, 0)
    }

    fn counted(t: Tensor, bytes: i64) -> JsTensor {
        let storage = torch_core::ffi::storage_id(&t);
        memory::track(storage, bytes);
        let slot = Rc::new(TensorSlot {
            tensor: RefCell::new(Some(t)),
            storage,
            dispose_pending: Cell::new(false),
        });
        SCOPES.with(|s| {
            if let Some(scope) = s.borrow_mut().last_mut() {
                scope.push(Rc::downgrade(&slot));
            }
        });
        JsTensor { slot }
    }

    /// The tensor, or a `Disposed` error.
    pub fn get(&self) -> anyhow::Result<TensorRef<'_>> {
        let disposed = || {
            crate::error::fail(
                Code::Disposed,
                "this tensor was disposed; it can no longer be used",
            )
        };
        if self.slot.dispose_pending.get() {
            return Err(disposed());
        }
        match Ref::filter_map(self.slot.tensor.borrow(), Option::as_ref) {
            Ok(t) => Ok(TensorRef {
                tensor: Some(t),
                slot: &self.slot,
            }),
            Err(_) => Err(disposed()),
        }
    }

    pub fn slot(&self) -> &Rc<TensorSlot> {
        &self.slot
    }
}

/// A native call's hold on a tensor. JS that the call runs (an argument's getter) may call
/// `dispose()` on the same tensor meanwhile; the release then happens when the hold ends,
/// instead of a RefCell "already borrowed" panic (which aborts Node: it is outside `guard`).
pub struct TensorRef<'a> {
    tensor: Option<Ref<'a, Tensor>>,
    slot: &'a TensorSlot,
}

impl std::ops::Deref for TensorRef<'_> {
    type Target = Tensor;
    fn deref(&self) -> &Tensor {
        self.tensor.as_deref().expect("held until drop")
    }
}

impl Drop for TensorRef<'_> {
    fn drop(&mut self) {
        drop(self.tensor.take());
        // Frees it when this was the last hold (another still open keeps it pending).
        if self.slot.dispose_pending.get() {
            self.slot.release();
        }
    }
}

impl Drop for JsTensor {
    fn drop(&mut self) {
        self.slot.release();
    }
}

#[napi]
impl JsTensor {
    /// The size of each dimension, e.g. `[1, 3, 224, 224]`.
    #[napi(getter)]
    pub fn shape(&self) -> Outcome<Vec<i64>> {
        guard(|| Ok(self.get()?.size())).into()
    }

    /// The element type: `'float32'`, `'int64'`, `'bool'`, ...
    #[napi(getter, ts_return_type = "DType")]
    pub fn dtype(&self) -> Outcome<String> {
        guard(|| Ok(dtype::name(self.get()?.kind()))).into()
    }

    /// Where the tensor lives: `'cpu'` or `'cuda:N'`.
    #[napi(getter, ts_return_type = "Device")]
    pub fn device(&self) -> Outcome<String> {
        guard(|| Ok(device::name(self.get()?.device()))).into()
    }

    /// The number of dimensions.
    #[napi(getter)]
    pub fn ndim(&self) -> Outcome<u32> {
        guard(|| Ok(self.get()?.dim() as u32)).into()
    }

    /// Whether autograd records operations on this tensor.
    #[napi(getter)]
    pub fn requires_grad(&self) -> Outcome<bool> {
        guard(|| Ok(self.get()?.requires_grad())).into()
    }

    /// The number of elements (the product of the shape).
    #[napi]
    pub fn numel(&self) -> Outcome<i64> {
        guard(|| Ok(self.get()?.size().iter().product())).into()
    }

    /// True once `dispose()` has run.
    #[napi(getter)]
    pub fn is_disposed(&self) -> bool {
        self.slot.is_disposed()
    }

    /// Frees the tensor's memory now instead of at garbage collection. Idempotent; any later
    /// use throws an error with code `Disposed`.
    #[napi]
    pub fn dispose(&self) {
        self.slot.release();
    }
}
