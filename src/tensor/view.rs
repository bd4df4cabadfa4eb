//! Storage metadata and views. A tensor is a view — shape, strides, storage offset, dtype — onto
//! a flat storage; these methods make new views of the same storage (no copy), except where
//! noted (`reshape` copies only when no view can express the result, as in PyTorch).
use super::JsTensor;
use crate::error::bail_code;
use crate::error::{guard, Code, Result};
use crate::napi::convert::{self, Dim, Int, Read, ReadOpt, Shape, Sizes};
use crate::napi::outcome::Outcome;
use napi_derive::napi;
use tch::Tensor;
use torch_core::{args, ffi};

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
    pub fn shares_storage(&self, other: convert::Tensor) -> Outcome<bool> {
        guard(|| {
            let other = other.read("sharesStorage: other")?;
            let (a, b) = (ffi::storage_id(&*self.get()?), ffi::storage_id(&other));
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
    pub fn view(&self, shape: Sizes) -> Outcome<JsTensor> {
        Outcome::of(|| {
            let s = guard(|| args::view_shape(&shape.read("view: shape")?, "view: shape"))?;
            self.derive(|t| Ok(t.f_view(s.as_slice())?))
        })
    }

    /// Another shape: a view when possible, else a copy (as in PyTorch).
    #[napi(ts_args_type = "...shape: Array<number | number[]>")]
    pub fn reshape(&self, shape: Sizes) -> Outcome<JsTensor> {
        Outcome::of(|| {
            let s = guard(|| args::view_shape(&shape.read("reshape: shape")?, "reshape: shape"))?;
            self.derive(|t| Ok(t.f_reshape(s.as_slice())?))
        })
    }

    /// Swaps two dimensions (a view: strides swap).
    #[napi]
    pub fn transpose(&self, dim0: Dim, dim1: Dim) -> Outcome<JsTensor> {
        self.derive(|t| {
            let (a, b) = (
                dim0.read(t.dim(), "transpose: dim0")?,
                dim1.read(t.dim(), "transpose: dim1")?,
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
    pub fn permute(&self, dims: Sizes) -> Outcome<JsTensor> {
        Outcome::of(|| {
            let d = guard(|| dims.read("permute: dims"))?;
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
    pub fn narrow(&self, dim: Dim, start: Int, length: Int) -> Outcome<JsTensor> {
        self.derive(|t| {
            let d = dim.read(t.dim(), "narrow: dim")?;
            Ok(t.f_narrow(d, start.read("narrow: start")?, length.read("narrow: length")?)?)
        })
        .into()
    }

    /// The slice at `index` of `dim`, without that dim: `a.select(0, 1)` is Python's `a[1]`.
    #[napi]
    pub fn select(&self, dim: Dim, index: Int) -> Outcome<JsTensor> {
        self.derive(|t| {
            if t.dim() == 0 {
                bail_code!(Code::InvalidArg, "select: cannot be applied to a 0-dim tensor");
            }
            let d = dim.read(t.dim(), "select: dim")?;
            let size = t.size()[d as usize];
            let i = index.read("select: index")?;
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
        dim: Dim,
        start: Option<Int>,
        end: Option<Int>,
        step: Option<Int>,
    ) -> Outcome<JsTensor> {
        self.derive(|t| {
            let d = dim.read(t.dim(), "slice: dim")?;
            let start = start.read("slice: start")?;
            let end = end.read("slice: end")?;
            let step = step.read("slice: step")?.unwrap_or(1);
            if step < 1 {
                bail_code!(Code::InvalidArg, "slice: step must be positive, got {step}");
            }
            Ok(t.f_slice(d, start, end, step)?)
        })
        .into()
    }

    /// Removes dimensions of size 1 (all, or just `dim`).
    #[napi]
    pub fn squeeze(&self, dim: Option<Dim>) -> Outcome<JsTensor> {
        self.derive(|t| match dim {
            Some(d) => Ok(t.f_squeeze_dim(d.read(t.dim(), "squeeze: dim")?)?),
            None => Ok(t.f_squeeze()?),
        })
        .into()
    }

    /// Inserts a dimension of size 1 at `dim`.
    #[napi]
    pub fn unsqueeze(&self, dim: Dim) -> Outcome<JsTensor> {
        self.derive(|t| Ok(t.f_unsqueeze(dim.read(t.dim() + 1, "unsqueeze: dim")?)?))
            .into()
    }

    /// Repeats size-1 dimensions without copying (stride 0); -1 keeps a size.
    #[napi(ts_args_type = "...shape: Array<number | number[]>")]
    pub fn expand(&self, shape: Sizes) -> Outcome<JsTensor> {
        Outcome::of(|| {
            let s = guard(|| {
                let n = shape.read("expand: shape")?;
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
    pub fn flatten(&self, start_dim: Option<Dim>, end_dim: Option<Dim>) -> Outcome<JsTensor> {
        self.derive(|t| {
            let s = Dim::or(start_dim, 0.0, t.dim(), "flatten: startDim")?;
            let e = Dim::or(end_dim, -1.0, t.dim(), "flatten: endDim")?;
            Ok(t.f_flatten(s, e)?)
        })
        .into()
    }

    /// Splits `dim` into `sizes` (one may be -1).
    #[napi]
    pub fn unflatten(&self, dim: Dim, sizes: Sizes) -> Outcome<JsTensor> {
        Outcome::of(|| {
            let s = guard(|| args::view_shape(&sizes.read("unflatten: sizes")?, "unflatten: sizes"))?;
            self.derive(|t| Ok(t.f_unflatten(dim.read(t.dim(), "unflatten: dim")?, s.as_slice())?))
        })
    }

    /// Splits into `chunks` views along `dim` (default 0).
    #[napi]
    pub fn chunk(&self, chunks: Int, dim: Option<Dim>) -> Outcome<Vec<JsTensor>> {
        self.derive_many(|t| {
            let n = chunks.read("chunk: chunks")?;
            if n < 1 {
                bail_code!(Code::InvalidArg, "chunk: chunks must be at least 1, got {n}");
            }
            Ok(t.f_chunk(n, Dim::or(dim, 0.0, t.dim(), "chunk: dim")?)?)
        })
        .into()
    }

    /// Splits along `dim` (default 0) into pieces of `size`, or of the listed sizes.
    #[napi]
    pub fn split(&self, size_or_sections: Shape, dim: Option<Dim>) -> Outcome<Vec<JsTensor>> {
        Outcome::of(|| {
            let is_list = size_or_sections.is_list();
            let sizes = guard(|| size_or_sections.read("split: sizes"))?;
            self.derive_many(|t| {
                let d = Dim::or(dim, 0.0, t.dim(), "split: dim")?;
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
    pub fn diagonal(&self, offset: Option<Int>, dim1: Option<Dim>, dim2: Option<Dim>) -> Outcome<JsTensor> {
        self.derive(|t| {
            let o = offset.read("diagonal: offset")?.unwrap_or(0);
            let a = Dim::or(dim1, 0.0, t.dim(), "diagonal: dim1")?;
            let b = Dim::or(dim2, 1.0, t.dim(), "diagonal: dim2")?;
            Ok(t.f_diagonal(o, a, b)?)
        })
        .into()
    }

    /// A view with explicit sizes, strides and storage offset (in elements). Unchecked
    /// beyond the storage's bounds, which libtorch verifies.
    #[napi]
    pub fn as_strided(&self, size: Shape, stride: Shape, storage_offset: Option<Int>) -> Outcome<JsTensor> {
        Outcome::of(|| {
            let (size, stride) =
                guard(|| Ok((size.read("asStrided: size")?, stride.read("asStrided: stride")?)))?;
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
                    .read("asStrided: storageOffset")?
                    .map(|o| args::shape(&[o as f64], "asStrided: storageOffset"))
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
    pub fn masked_select(&self, mask: convert::Tensor) -> Outcome<JsTensor> {
        guard(|| {
            let mask = mask.read("maskedSelect: mask")?;
            Ok(JsTensor::new(self.get()?.f_masked_select(&mask)?))
        })
        .into()
    }

    /// The entries at the int64 `index` positions along `dim`, as a copy.
    #[napi]
    pub fn index_select(&self, dim: Dim, index: convert::Tensor) -> Outcome<JsTensor> {
        guard(|| {
            let t = self.get()?;
            let d = dim.read(t.dim(), "indexSelect: dim")?;
            let index = index.read("indexSelect: index")?;
            Ok(JsTensor::new(t.f_index_select(d, &index)?))
        })
        .into()
    }
}

fn tensor_list(list: convert::Tensors, what: &str) -> anyhow::Result<Vec<Tensor>> {
    let list = list.read(what)?;
    if list.is_empty() {
        bail_code!(Code::InvalidArg, "tensors: expected a non-empty array of tensors");
    }
    Ok(list)
}

/// Joins tensors along an existing dim (default 0) into a new tensor (a copy).
#[napi]
pub fn cat(tensors: convert::Tensors, dim: Option<Dim>) -> Outcome<JsTensor> {
    guard(|| {
        let ts = tensor_list(tensors, "cat: tensors")?;
        let d = Dim::or(dim, 0.0, ts[0].dim(), "cat: dim")?;
        Ok(JsTensor::new(Tensor::f_cat(&ts, d)?))
    })
    .into()
}

/// Stacks same-shape tensors along a new dim (default 0) into a new tensor (a copy).
#[napi]
pub fn stack(tensors: convert::Tensors, dim: Option<Dim>) -> Outcome<JsTensor> {
    guard(|| {
        let ts = tensor_list(tensors, "stack: tensors")?;
        let d = Dim::or(dim, 0.0, ts[0].dim() + 1, "stack: dim")?;
        Ok(JsTensor::new(Tensor::f_stack(&ts, d)?))
    })
    .into()
}
