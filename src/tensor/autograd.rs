//! Autograd basics — `backward`, `grad`, `detach`, `requiresGrad_` — and `torch.tidy`'s scopes.
use super::{scope_begin, scope_end, unwrap_tensor, JsTensor};
use crate::error::{guard, Code, Result};
use crate::{bail_code, js};
use napi::bindgen_prelude::*;
use napi::JsValue;
use napi_derive::napi;

#[napi]
impl JsTensor {
    /// Computes gradients of this tensor with respect to the leaves that require grad; they
    /// accumulate in each leaf's `grad`. A non-scalar tensor needs `gradient` (same shape).
    #[napi]
    pub fn backward(&self, gradient: Option<&JsTensor>) -> Result<()> {
        guard(|| {
            let t = self.get()?;
            if !t.requires_grad() {
                bail_code!(
                    Code::InvalidArg,
                    "backward: this tensor does not require grad (no input had requiresGrad)"
                );
            }
            match gradient {
                // d(sum(t * g))/dx = g^T dt/dx: the vector-Jacobian product t.backward(g) computes.
                Some(g) => t.f_mul(&*g.get()?)?.f_sum(None)?.f_backward()?,
                None if t.numel() != 1 => bail_code!(
                    Code::ShapeMismatch,
                    "backward: the tensor has {} elements; pass a gradient of shape {:?}",
                    t.numel(),
                    t.size()
                ),
                None => t.f_backward()?,
            };
            Ok(())
        })
    }

    /// The gradient accumulated by `backward()`, or null.
    #[napi(getter)]
    pub fn grad(&self) -> Result<Option<JsTensor>> {
        guard(|| {
            let g = self.get()?.f_grad()?;
            Ok(g.defined().then(|| JsTensor::new_view(g)))
        })
    }

    /// A view sharing this tensor's storage, cut from autograd.
    #[napi]
    pub fn detach(&self) -> Result<JsTensor> {
        guard(|| Ok(JsTensor::new_view(self.get()?.f_detach()?)))
    }

    /// In place: turns gradient recording on (default) or off for this leaf tensor.
    #[napi(js_name = "requiresGrad_", ts_return_type = "this")]
    pub fn requires_grad_(&self, requires_grad: Option<bool>) -> Result<()> {
        guard(|| {
            let _ = self
                .get()?
                .shallow_clone()
                .f_requires_grad_(requires_grad.unwrap_or(true))?;
            Ok(())
        })
    }
}

/// @internal Opens a `torch.tidy` scope; use `tidy(fn)`.
#[napi(js_name = "_tidyBegin")]
pub fn tidy_begin() {
    scope_begin();
}

/// @internal Closes the innermost `torch.tidy` scope, disposing every tensor created in it
/// except those in `keep` (a Tensor, or arrays/objects holding Tensors); use `tidy(fn)`.
#[napi(js_name = "_tidyEnd", ts_args_type = "keep?: unknown")]
pub fn tidy_end(env: Env, keep: Option<Unknown>) -> Result<u32> {
    guard(|| {
        let mut kept = Vec::new();
        if let Some(k) = keep {
            collect(env.raw(), k.raw(), &mut kept, 0)?;
        }
        Ok(scope_end(&kept) as u32)
    })
}

/// The tensors in a returned value: a Tensor, or arrays / plain objects holding them.
fn collect(
    env: js::Env,
    v: js::Val,
    out: &mut Vec<std::rc::Rc<super::Slot>>,
    depth: usize,
) -> anyhow::Result<()> {
    if depth > 64 || js::type_of(env, v)? != napi::sys::ValueType::napi_object {
        return Ok(());
    }
    if let Some(t) = unwrap_tensor(env, v) {
        out.push(t.slot().clone());
    } else if js::is_array(env, v)? {
        for i in 0..js::array_len(env, v)? {
            collect(env, js::element(env, v, i)?, out, depth + 1)?;
        }
    } else if js::typed_array(env, v)?.is_none() {
        for k in js::keys(env, v)? {
            if let Some(x) = js::property(env, v, &k)? {
                collect(env, x, out, depth + 1)?;
            }
        }
    }
    Ok(())
}
