//! Storage metadata and views. A tensor is a view — shape, strides, storage offset, dtype — onto
//! a flat storage; these methods make new views of the same storage (no copy), except where
//! noted (`reshape` copies only when no view can express the result, as in PyTorch).
use super::create::{number_arg, shape_arg};
use super::JsTensor;
use crate::error::{guard, Code, Result};
use crate::outcome::Outcome;
use crate::{args, bail_code, ffi, js};
use napi::bindgen_prelude::*;
use napi::JsValue;
use napi_derive::napi;
use tch::Tensor;

/// A list of numbers from JS (`[2, 3]`), for shapes and dims.
fn numbers(env: Env, v: Unknown, what: &str) -> anyhow::Result<Vec<f64>> {
    let (raw, v) = (env.raw(), v.raw());
    if js::type_of(raw, v)? == napi::sys::ValueType::napi_number {
        return Ok(vec![js::number(raw, v)?]);
    }
    if !js::is_array(raw, v)? {
        bail_code!(
            Code::InvalidArg,
            "{what}: expected an array of numbers, got {}",
            js::describe(raw, v)
        );
    }
    (0..js::array_len(raw, v)?)
        .map(|i| number_arg(raw, js::element(raw, v, i)?, &format!("{what}[{i}]")))
        .collect()
}

impl JsTensor {
    fn derive(&self, f: impl FnOnce(&Tensor) -> anyhow::Result<Tensor>) -> Result<JsTensor> {
        guard(|| {
            let t = self.get()?;
            let out = f(&t)?;
            Ok(JsTensor::new(out))
        })
    }

    fn derive_many(&self, f: impl FnOnce(&Tensor) -> anyhow::Result<Vec<Tensor>>) -> Result<Vec<JsTensor>> {
        guard(|| {
            let t = self.get()?;
            Ok(f(&t)?.into_iter().map(JsTensor::new).collect())
        })
    }
}

#[napi]
impl JsTensor {
    /// Elements to step over in storage to move one position along each dimension.
    #[napi(getter)]
    pub fn strides(&self) -> Outcome<Vec<i64>> {
        guard(|| Ok(self.get()?.stride())).into()
    }

    /// Where this view starts in its storage, in elements.
    #[napi(getter)]
    pub fn storage_offset(&self) -> Outcome<i64> {
        guard(|| Ok(ffi::storage_offset(&*self.get()?))).into()
    }

    /// Whether the elements lie in storage in row-major order with no gaps.
    #[napi]
    pub fn is_contiguous(&self) -> Outcome<bool> {
        guard(|| Ok(self.get()?.is_contiguous())).into()
    }

    /// Whether both tensors are views of the same storage.
    #[napi]
    pub fn shares_storage(&self, other: &JsTensor) -> Outcome<bool> {
        guard(|| {
            let (a, b) = (ffi::storage_id(&*self.get()?), ffi::storage_id(&*other.get()?));
            Ok(a != 0 && a == b)
        })
        .into()
    }

    /// A 1-D view of the whole underlying storage (what Python prints for `t.storage()`).
    #[napi]
    pub fn storage(&self) -> Outcome<JsTensor> {
        self.derive(|t| {
            let n = ffi::storage_nbytes(t) / t.kind().elt_size_in_bytes() as i64;
            Ok(t.f_as_strided([n], [1], Some(0))?)
        })
        .into()
    }

    /// A view with another shape (one size may be -1); the tensor must be contiguous enough
    /// for a view to exist — `reshape` copies when it is not. `view(2, 3)` or `view([2, 3])`.
    #[napi(ts_args_type = "...shape: Array<number | number[]>")]
    pub fn view(&self, env: Env, shape: Unknown) -> Outcome<JsTensor> {
        Outcome::of(|| {
            let s = guard(|| args::view_shape(&numbers(env, shape, "view: shape")?, "view: shape"))?;
            self.derive(|t| Ok(t.f_view(s.as_slice())?))
        })
    }

    /// Another shape: a view when possible, else a copy (as in PyTorch).
    #[napi(ts_args_type = "...shape: Array<number | number[]>")]
    pub fn reshape(&self, env: Env, shape: Unknown) -> Outcome<JsTensor> {
        Outcome::of(|| {
            let s = guard(|| args::view_shape(&numbers(env, shape, "reshape: shape")?, "reshape: shape"))?;
            self.derive(|t| Ok(t.f_reshape(s.as_slice())?))
        })
    }

    /// Swaps two dimensions (a view: strides swap).
    #[napi]
    pub fn transpose(&self, dim0: f64, dim1: f64) -> Outcome<JsTensor> {
        self.derive(|t| {
            let (a, b) = (
                args::dim(dim0, t.dim(), "transpose: dim0")?,
                args::dim(dim1, t.dim(), "transpose: dim1")?,
            );
            Ok(t.f_transpose(a, b)?)
        })
        .into()
    }

    /// The transpose of a matrix (≤ 2 dims), as `t.t()` in PyTorch.
    #[napi]
    pub fn t(&self) -> Outcome<JsTensor> {
        self.derive(|t| Ok(t.f_tr()?)).into()
    }

    /// Reorders dimensions: `permute(2, 0, 1)` or `permute([2, 0, 1])`.
    #[napi(ts_args_type = "...dims: Array<number | number[]>")]
    pub fn permute(&self, env: Env, dims: Unknown) -> Outcome<JsTensor> {
        Outcome::of(|| {
            let d = guard(|| numbers(env, dims, "permute: dims"))?;
            self.derive(|t| {
                if d.len() != t.dim() {
                    bail_code!(
                        Code::InvalidArg,
                        "permute: expected {} dims, got {}",
                        t.dim(),
                        d.len()
                    );
                }
                let dims = d
                    .iter()
                    .map(|&x| args::dim(x, t.dim(), "permute: dims"))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                Ok(t.f_permute(dims.as_slice())?)
            })
        })
    }

    /// `length` elements of `dim` from `start` (a view).
    #[napi]
    pub fn narrow(&self, dim: f64, start: f64, length: f64) -> Outcome<JsTensor> {
        self.derive(|t| {
            let d = args::dim(dim, t.dim(), "narrow: dim")?;
            Ok(t.f_narrow(
                d,
                args::integer(start, "narrow: start")?,
                args::integer(length, "narrow: length")?,
            )?)
        })
        .into()
    }

    /// The slice at `index` of `dim`, without that dim: `a.select(0, 1)` is Python's `a[1]`.
    #[napi]
    pub fn select(&self, dim: f64, index: f64) -> Outcome<JsTensor> {
        self.derive(|t| {
            if t.dim() == 0 {
                bail_code!(Code::InvalidArg, "select: cannot be applied to a 0-dim tensor");
            }
            let d = args::dim(dim, t.dim(), "select: dim")?;
            let size = t.size()[d as usize];
            let i = args::integer(index, "select: index")?;
            if i < -size || i >= size {
                bail_code!(
                    Code::InvalidArg,
                    "select: index {i} is out of range for dimension {d} of size {size}"
                );
            }
            Ok(t.f_select(d, i)?)
        })
        .into()
    }

    /// Python slicing along `dim`: `a.slice(0, 1)` is `a[1:]`, `a.slice(1, 0, -1, 2)` is
    /// `a[:, 0:-1:2]`; negative indices count from the end, out-of-range ends are clamped.
    #[napi]
    pub fn slice(
        &self,
        dim: f64,
        start: Option<f64>,
        end: Option<f64>,
        step: Option<f64>,
    ) -> Outcome<JsTensor> {
        self.derive(|t| {
            let d = args::dim(dim, t.dim(), "slice: dim")?;
            let start = start.map(|s| args::integer(s, "slice: start")).transpose()?;
            let end = end.map(|e| args::integer(e, "slice: end")).transpose()?;
            let step = args::integer(step.unwrap_or(1.0), "slice: step")?;
            if step < 1 {
                bail_code!(Code::InvalidArg, "slice: step must be positive, got {step}");
            }
            Ok(t.f_slice(d, start, end, step)?)
        })
        .into()
    }

    /// Removes dimensions of size 1 (all, or just `dim`).
    #[napi]
    pub fn squeeze(&self, dim: Option<f64>) -> Outcome<JsTensor> {
        self.derive(|t| match dim {
            Some(d) => Ok(t.f_squeeze_dim(args::dim(d, t.dim(), "squeeze: dim")?)?),
            None => Ok(t.f_squeeze()?),
        })
        .into()
    }

    /// Inserts a dimension of size 1 at `dim`.
    #[napi]
    pub fn unsqueeze(&self, dim: f64) -> Outcome<JsTensor> {
        self.derive(|t| Ok(t.f_unsqueeze(args::dim(dim, t.dim() + 1, "unsqueeze: dim")?)?))
            .into()
    }

    /// Repeats size-1 dimensions without copying (stride 0); -1 keeps a size.
    #[napi(ts_args_type = "...shape: Array<number | number[]>")]
    pub fn expand(&self, env: Env, shape: Unknown) -> Outcome<JsTensor> {
        Outcome::of(|| {
            let s = guard(|| {
                let n = numbers(env, shape, "expand: shape")?;
                n.iter()
                    .enumerate()
                    .map(|(i, &x)| args::integer(x, &format!("expand: shape[{i}]")))
                    .collect::<anyhow::Result<Vec<_>>>()
            })?;
            self.derive(|t| Ok(t.f_expand(s.as_slice(), false)?))
        })
    }

    /// Merges dims `startDim..=endDim` (default: all) into one; a view when possible.
    #[napi]
    pub fn flatten(&self, start_dim: Option<f64>, end_dim: Option<f64>) -> Outcome<JsTensor> {
        self.derive(|t| {
            let s = args::dim(start_dim.unwrap_or(0.0), t.dim(), "flatten: startDim")?;
            let e = args::dim(end_dim.unwrap_or(-1.0), t.dim(), "flatten: endDim")?;
            Ok(t.f_flatten(s, e)?)
        })
        .into()
    }

    /// Splits `dim` into `sizes` (one may be -1).
    #[napi(ts_args_type = "dim: number, sizes: number[]")]
    pub fn unflatten(&self, env: Env, dim: f64, sizes: Unknown) -> Outcome<JsTensor> {
        Outcome::of(|| {
            let s =
                guard(|| args::view_shape(&numbers(env, sizes, "unflatten: sizes")?, "unflatten: sizes"))?;
            self.derive(|t| Ok(t.f_unflatten(args::dim(dim, t.dim(), "unflatten: dim")?, s.as_slice())?))
        })
    }

    /// Splits into `chunks` views along `dim` (default 0).
    #[napi]
    pub fn chunk(&self, chunks: f64, dim: Option<f64>) -> Outcome<Vec<JsTensor>> {
        self.derive_many(|t| {
            let n = args::integer(chunks, "chunk: chunks")?;
            if n < 1 {
                bail_code!(Code::InvalidArg, "chunk: chunks must be at least 1, got {n}");
            }
            Ok(t.f_chunk(n, args::dim(dim.unwrap_or(0.0), t.dim(), "chunk: dim")?)?)
        })
        .into()
    }

    /// Splits along `dim` (default 0) into pieces of `size`, or of the listed sizes.
    #[napi(ts_args_type = "sizeOrSections: number | number[], dim?: number")]
    pub fn split(&self, env: Env, size_or_sections: Unknown, dim: Option<f64>) -> Outcome<Vec<JsTensor>> {
        Outcome::of(|| {
            let raw = env.raw();
            let is_list = js::is_array(raw, size_or_sections.raw()).unwrap_or(false);
            let sizes =
                guard(|| args::shape(&numbers(env, size_or_sections, "split: sizes")?, "split: sizes"))?;
            self.derive_many(|t| {
                let d = args::dim(dim.unwrap_or(0.0), t.dim(), "split: dim")?;
                if is_list {
                    Ok(t.f_split_with_sizes(sizes.as_slice(), d)?)
                } else {
                    if sizes[0] < 1 {
                        bail_code!(Code::InvalidArg, "split: size must be at least 1");
                    }
                    Ok(t.f_split(sizes[0], d)?)
                }
            })
        })
    }

    /// The diagonal (offset 0: main; > 0 above; < 0 below) of dims `dim1`, `dim2` (0, 1).
    #[napi]
    pub fn diagonal(&self, offset: Option<f64>, dim1: Option<f64>, dim2: Option<f64>) -> Outcome<JsTensor> {
        self.derive(|t| {
            let o = args::integer(offset.unwrap_or(0.0), "diagonal: offset")?;
            let a = args::dim(dim1.unwrap_or(0.0), t.dim(), "diagonal: dim1")?;
            let b = args::dim(dim2.unwrap_or(1.0), t.dim(), "diagonal: dim2")?;
            Ok(t.f_diagonal(o, a, b)?)
        })
        .into()
    }

    /// A view with explicit sizes, strides and storage offset (in elements). Unchecked
    /// beyond the storage's bounds, which libtorch verifies.
    #[napi(ts_args_type = "size: number[], stride: number[], storageOffset?: number")]
    pub fn as_strided(
        &self,
        env: Env,
        size: Unknown,
        stride: Unknown,
        storage_offset: Option<f64>,
    ) -> Outcome<JsTensor> {
        Outcome::of(|| {
            let (size, stride) = guard(|| {
                Ok((
                    shape_arg(env.raw(), size.raw(), "asStrided: size")?,
                    shape_arg(env.raw(), stride.raw(), "asStrided: stride")?,
                ))
            })?;
            self.derive(|t| {
                if size.len() != stride.len() {
                    bail_code!(
                        Code::InvalidArg,
                        "asStrided: size has {} dims but stride has {}",
                        size.len(),
                        stride.len()
                    );
                }
                let off = storage_offset
                    .map(|o| args::shape(&[o], "asStrided: storageOffset"))
                    .transpose()?
                    .map(|v| v[0]);
                Ok(t.f_as_strided(size.as_slice(), stride.as_slice(), off)?)
            })
        })
    }

    /// A copy with its own storage (autograd-tracked, as in PyTorch).
    #[napi(js_name = "clone")]
    pub fn clone_tensor(&self) -> Outcome<JsTensor> {
        guard(|| Ok(JsTensor::new(ffi::clone(&*self.get()?)?))).into()
    }

    /// This tensor if already contiguous, else a row-major copy.
    #[napi]
    pub fn contiguous(&self) -> Outcome<JsTensor> {
        self.derive(|t| Ok(t.f_contiguous()?)).into()
    }

    /// The elements where the bool `mask` (broadcast to this shape) is true, as a 1-D copy.
    #[napi]
    pub fn masked_select(&self, mask: &JsTensor) -> Outcome<JsTensor> {
        guard(|| Ok(JsTensor::new(self.get()?.f_masked_select(&*mask.get()?)?))).into()
    }

    /// The entries at the int64 `index` positions along `dim`, as a copy.
    #[napi]
    pub fn index_select(&self, dim: f64, index: &JsTensor) -> Outcome<JsTensor> {
        guard(|| {
            let t = self.get()?;
            let d = args::dim(dim, t.dim(), "indexSelect: dim")?;
            Ok(JsTensor::new(t.f_index_select(d, &*index.get()?)?))
        })
        .into()
    }
}

fn tensor_list(list: Vec<&JsTensor>) -> anyhow::Result<Vec<Tensor>> {
    if list.is_empty() {
        bail_code!(Code::InvalidArg, "tensors: expected a non-empty array of tensors");
    }
    list.iter().map(|t| Ok(t.get()?.shallow_clone())).collect()
}

/// Joins tensors along an existing dim (default 0) into a new tensor (a copy).
#[napi(ts_args_type = "tensors: Tensor[], dim?: number")]
pub fn cat(tensors: Vec<&JsTensor>, dim: Option<f64>) -> Outcome<JsTensor> {
    guard(|| {
        let ts = tensor_list(tensors)?;
        let d = args::dim(dim.unwrap_or(0.0), ts[0].dim(), "cat: dim")?;
        Ok(JsTensor::new(Tensor::f_cat(&ts, d)?))
    })
    .into()
}

/// Stacks same-shape tensors along a new dim (default 0) into a new tensor (a copy).
#[napi(ts_args_type = "tensors: Tensor[], dim?: number")]
pub fn stack(tensors: Vec<&JsTensor>, dim: Option<f64>) -> Outcome<JsTensor> {
    guard(|| {
        let ts = tensor_list(tensors)?;
        let d = args::dim(dim.unwrap_or(0.0), ts[0].dim() + 1, "stack: dim")?;
        Ok(JsTensor::new(Tensor::f_stack(&ts, d)?))
    })
    .into()
}
