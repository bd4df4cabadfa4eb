//! Autograd basics — `backward`, `grad`, `detach`, `requiresGrad_` — and `torch.tidy`'s scopes.
use super::operands::with_tensor;
use super::{scope_begin, scope_end, JsTensor, Keep};
use crate::error::bail_code;
use crate::error::{guard, Code};
use crate::napi::convert::{Flag, ReadOpt};
use crate::napi::js;
use crate::napi::outcome::Outcome;
use napi::bindgen_prelude::*;
use napi::JsValue;
use napi_derive::napi;

#[napi]
impl JsTensor {
    /// Computes gradients of this tensor with respect to the leaves that require grad; they
    /// accumulate in each leaf's `grad`. A non-scalar tensor needs `gradient` (same shape).
    #[napi]
    pub fn backward(&self, gradient: Option<crate::napi::convert::Tensor>) -> Outcome<()> {
        guard(|| {
            let gradient = gradient
                .as_ref()
                .map(|g| g.read("backward: gradient"))
                .transpose()?;
            let t = self.get()?;
            if !t.requires_grad() {
                bail_code!(
                    Code::InvalidArg,
                    "backward: this tensor does not require grad (no input had requiresGrad)"
                );
            }
            match gradient {
                // d(sum(t * g))/dx = g^T dt/dx: the vector-Jacobian product t.backward(g) computes.
                Some(g) => t.f_mul(&g)?.f_sum(None)?.f_backward()?,
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
        .into()
    }

    /// The gradient accumulated by `backward()`, or null.
    #[napi(getter)]
    pub fn grad(&self) -> Outcome<Option<JsTensor>> {
        guard(|| {
            let g = self.get()?.f_grad()?;
            Ok(g.defined().then(|| JsTensor::new(g)))
        })
        .into()
    }

    /// A view sharing this tensor's storage, cut from autograd.
    #[napi]
    pub fn detach(&self) -> Outcome<JsTensor> {
        guard(|| Ok(JsTensor::new(self.get()?.f_detach()?))).into()
    }

    /// In place: turns gradient recording on (default) or off for this leaf tensor.
    #[napi(js_name = "requiresGrad_", ts_return_type = "this")]
    pub fn requires_grad_<'t>(&self, this: This<'t>, requires_grad: Option<Flag>) -> Outcome<This<'t>> {
        Outcome::of(|| {
            let done = guard(|| {
                let on = requires_grad.read("requiresGrad_: requiresGrad")?.unwrap_or(true);
                let _ = self.get()?.shallow_clone().f_requires_grad_(on)?;
                Ok(())
            });
            super::math::chain(this, done)
        })
    }
}

/// @internal Opens a `torch.tidy` scope; use `tidy(fn)`.
#[napi(js_name = "_tidyBegin", skip_typescript)]
pub fn tidy_begin() {
    scope_begin();
}

/// @internal Closes the innermost `torch.tidy` scope, disposing every tensor created in it
/// except those in `keep` (the value `fn` returned); use `tidy(fn)`. The scope closes whatever
/// happens: when reading `keep` throws (a getter), everything created is disposed and the
/// exception propagates (tidy returns nothing, so nothing it made can be in use).
#[napi(js_name = "_tidyEnd", skip_typescript)]
pub fn tidy_end(env: Env, keep: Option<Unknown>) -> Outcome<u32> {
    guard(|| {
        let mut walk = Walk {
            env: env.raw(),
            kept: Vec::new(),
            visited: 0,
        };
        let found = match keep {
            Some(k) => walk.value(k.raw(), 0),
            None => Ok(true),
        };
        match found {
            Ok(true) => Ok(scope_end(&Keep::These(walk.kept)) as u32),
            Ok(false) => Ok(scope_end(&Keep::All) as u32),
            Err(e) => {
                scope_end(&Keep::These(Vec::new()));
                Err(e)
            }
        }
    })
    .into()
}

/// Finds the tensors in a value `tidy`'s function returned: a Tensor; arrays, plain objects
/// (every own key: non-enumerable and symbol-keyed too), Maps and Sets holding them, nested.
struct Walk {
    env: js::Env,
    kept: Vec<std::rc::Rc<super::TensorSlot>>,
    /// Values looked at: a bound instead of cycle detection (N-API cannot hash objects).
    visited: usize,
}

/// Past this many values, or this deep, tidy stops looking and keeps everything.
const MAX_VISITED: usize = 100_000;

impl Walk {
    /// Ok(false) when the value could not be seen through entirely (keep everything).
    fn value(&mut self, v: js::Val, depth: usize) -> anyhow::Result<bool> {
        use napi::sys::ValueType as T;
        self.visited += 1;
        if js::type_of(self.env, v)? != T::napi_object {
            return Ok(true);
        }
        if depth > torch_core::args::MAX_DEPTH || self.visited > MAX_VISITED {
            return Ok(false);
        }
        let env = self.env;
        if let Some(slot) = with_tensor(env, v, |t| t.slot().clone()) {
            self.kept.push(slot);
            return Ok(true);
        }
        if js::is_typed_array(env, v)? {
            return Ok(true);
        }
        let children = if js::is_array(env, v)? {
            js::elements(env, v)?
        } else if js::is_map(env, v)? || js::is_instance_of(env, v, "Set")? {
            // `[...map]` gives [key, value] pairs, `[...set]` the values.
            js::array_from(env, v)?
        } else if js::is_plain_object(env, v)? {
            js::own_property_values(env, v)?
        } else {
            // A class instance: private fields are invisible to N-API, so anything may be
            // held there.
            return Ok(false);
        };
        for child in children {
            if !self.value(child, depth + 1)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
