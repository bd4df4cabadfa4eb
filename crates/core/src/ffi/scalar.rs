//! Operations with scalar operands (`pow(t, 2)`, `clamp`, `fill_`, `full`, `arange`,
//! `linspace`), called through torch-sys instead of tch's `f_*` functions.
//!
//! Why: tch's `f_*` functions that take `impl Into<Scalar>` build the `Scalar` as a temporary
//! inside the call expression of `unsafe_torch_err!`, so it is dropped — `ats_free` through tch's
//! panicking `unsafe_torch!`, which reads libtch's thread-local last error — *before* the macro
//! checks that error. When the operation fails inside libtorch (integer `pow` by a negative
//! integer, a CUDA request without CUDA), the Scalar's destructor finds the error and panics.
//! Here the scalars outlive the call, and the error is read and cleared before they are freed.
use super::scalar_type;
use crate::ffi::check_last_error;
use anyhow::{bail, Result};
use std::ffi::c_int;
use tch::{Device, Kind, Tensor};
use torch_sys::c_generated as ffi;
use torch_sys::{C_scalar, C_tensor};

/// A libtch scalar handle, freed on drop (after the call using it has been checked).
struct Scalar(*mut C_scalar);

impl Scalar {
    /// A JS number as a libtorch scalar: int when integral (as a Python int), else float.
    fn new(x: f64) -> Result<Scalar> {
        if crate::args::is_integral(x) {
            // SAFETY: no handles in; `ats_int` returns a new `torch::Scalar` (or null with the error set),
            // which `checked` either refuses or takes ownership of.
            Scalar::checked(unsafe { torch_sys::ats_int(x as i64) })
        } else {
            Scalar::float(x)
        }
    }

    /// Always a float scalar.
    fn float(x: f64) -> Result<Scalar> {
        // SAFETY: no handles in; `ats_float` returns a new `torch::Scalar` (or null with the error set),
        // which `checked` either refuses or takes ownership of.
        Scalar::checked(unsafe { torch_sys::ats_float(x) })
    }

    fn checked(p: *mut C_scalar) -> Result<Scalar> {
        check_last_error()?;
        if p.is_null() {
            bail!("libtorch returned no scalar");
        }
        Ok(Scalar(p))
    }
}

impl Drop for Scalar {
    fn drop(&mut self) {
        // SAFETY: `self.0` is the non-null handle `checked` accepted, owned by this `Scalar` alone; drop runs
        // once, after the call that used it has been checked.
        unsafe { torch_sys::ats_free(self.0) };
        // `ats_free` (a plain delete) cannot fail; clear the slot anyway so nothing pending
        // can ever outlive this call.
        let _ = check_last_error();
    }
}

/// Runs one `atg_*` call that writes its result into `out[0]`, and checks libtch's error slot
/// before anything else touches libtch.
fn call(f: impl FnOnce(*mut *mut C_tensor)) -> Result<Tensor> {
    let mut out = [std::ptr::null_mut(); 1];
    f(out.as_mut_ptr());
    check_last_error()?;
    if out[0].is_null() {
        bail!("libtorch returned no tensor");
    }
    // SAFETY: `out[0]` is the non-null tensor handle the `atg_*` call just allocated for us, with libtch's
    // error slot found clear; `from_ptr` takes ownership of it.
    Ok(unsafe { Tensor::from_ptr(out[0]) })
}

fn ptr(t: &Tensor) -> *mut C_tensor {
    t.as_ptr() as *mut C_tensor
}

/// libtch's device number: -1 for the CPU, the index for CUDA.
fn device_code(device: Device) -> Result<c_int> {
    match device {
        Device::Cpu => Ok(-1),
        Device::Cuda(i) => Ok(i as c_int),
        other => bail!("device {other:?} is not supported"),
    }
}

/// `t ** exponent`, a copy, or in place (`in_place`) returning a handle to `t`.
pub fn pow(t: &Tensor, exponent: f64, in_place: bool) -> Result<Tensor> {
    let e = Scalar::new(exponent)?;
    // SAFETY: `out` is `call`'s one-slot array, where the `atg_*` function writes its one result; `t` is
    // borrowed across the call, and `e` (a live scalar handle) outlives `call`, which checks the error slot
    // on this thread before `e` is freed.
    call(|out| unsafe {
        if in_place {
            ffi::atg_pow_(out, ptr(t), e.0)
        } else {
            ffi::atg_pow_tensor_scalar(out, ptr(t), e.0)
        }
    })
}

/// `t.clamp(min, max)`, a copy, or in place (`in_place`) returning a handle to `t`.
pub fn clamp(t: &Tensor, min: Option<f64>, max: Option<f64>, in_place: bool) -> Result<Tensor> {
    use ffi::*;
    let (lo, hi) = (
        min.map(Scalar::new).transpose()?,
        max.map(Scalar::new).transpose()?,
    );
    // SAFETY: `out` is `call`'s one-slot array, where the `atg_*` function writes its one result (with no
    // bound nothing is written, and `call` reports no tensor); `t` is borrowed, and the scalar handles in
    // `lo` and `hi` outlive `call`, which checks the error slot before they are freed.
    call(|out| unsafe {
        match (&lo, &hi, in_place) {
            (Some(l), Some(h), false) => atg_clamp(out, ptr(t), l.0, h.0),
            (Some(l), Some(h), true) => atg_clamp_(out, ptr(t), l.0, h.0),
            (Some(l), None, false) => atg_clamp_min(out, ptr(t), l.0),
            (Some(l), None, true) => atg_clamp_min_(out, ptr(t), l.0),
            (None, Some(h), false) => atg_clamp_max(out, ptr(t), h.0),
            (None, Some(h), true) => atg_clamp_max_(out, ptr(t), h.0),
            (None, None, _) => {}
        }
    })
}

/// `t.fill_(value)`.
pub fn fill_(t: &Tensor, value: f64) -> Result<()> {
    let v = Scalar::new(value)?;
    // SAFETY: `out` is `call`'s one-slot array, `t` is borrowed across the call, and `v` (a live scalar
    // handle) outlives `call`, which checks the error slot before `v` is freed.
    call(|out| unsafe { ffi::atg_fill_(out, ptr(t), v.0) }).map(drop)
}

/// `torch.full(size, value)`; `value` is a float scalar, as `tch::Tensor::full` made it.
pub fn full(size: &[i64], value: f64, (kind, device): (Kind, Device)) -> Result<Tensor> {
    let v = Scalar::float(value)?;
    let (k, d) = (scalar_type(kind)?, device_code(device)?);
    // SAFETY: `out` is `call`'s one-slot array; libtch reads `size.len()` dims from `size`, borrowed across
    // the call; `k` and `d` are valid ScalarType and device codes, and `v` (a live scalar handle) outlives
    // `call`, which checks the error slot before `v` is freed.
    call(|out| unsafe { ffi::atg_full(out, size.as_ptr(), size.len() as c_int, v.0, k, d) })
}

/// `torch.arange(start, end, step)`.
pub fn arange(start: f64, end: f64, step: f64, (kind, device): (Kind, Device)) -> Result<Tensor> {
    let (s, e, st) = (Scalar::new(start)?, Scalar::new(end)?, Scalar::new(step)?);
    let (k, d) = (scalar_type(kind)?, device_code(device)?);
    // SAFETY: `out` is `call`'s one-slot array; `k` and `d` are valid ScalarType and device codes, and `s`,
    // `e` and `st` (live scalar handles) outlive `call`, which checks the error slot before they are freed.
    call(|out| unsafe { ffi::atg_arange_start_step(out, s.0, e.0, st.0, k, d) })
}

/// `torch.linspace(start, end, steps)`.
pub fn linspace(start: f64, end: f64, steps: i64, (kind, device): (Kind, Device)) -> Result<Tensor> {
    let (s, e) = (Scalar::new(start)?, Scalar::new(end)?);
    let (k, d) = (scalar_type(kind)?, device_code(device)?);
    // SAFETY: `out` is `call`'s one-slot array; `k` and `d` are valid ScalarType and device codes, and `s`
    // and `e` (live scalar handles) outlive `call`, which checks the error slot before they are freed.
    call(|out| unsafe { ffi::atg_linspace(out, s.0, e.0, steps, k, d) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_ops_return_errors_and_leave_nothing_pending() {
        let ints = Tensor::from_slice(&[1i64, 2, 3]);
        let e = pow(&ints, -1.0, false).unwrap_err().to_string();
        assert!(pow(&ints, -2.0, true).is_err());
        assert!(e.contains("negative integer powers"), "{e}");
        // The slot is clean: an unrelated tch call that panics on a pending error works.
        let _ = tch::Scalar::int(3);
        assert_eq!(
            Vec::<i64>::try_from(pow(&ints, 2.0, false).unwrap()).unwrap(),
            [1, 4, 9]
        );
    }

    #[test]
    fn scalar_ops_match_tch() {
        let t = Tensor::from_slice(&[-2.0f32, 0.5, 3.0]);
        let c = clamp(&t, Some(-1.0), Some(1.0), false).unwrap();
        assert_eq!(Vec::<f32>::try_from(c).unwrap(), [-1.0, 0.5, 1.0]);
        let _ = clamp(&t, None, Some(0.0), true).unwrap();
        assert_eq!(Vec::<f32>::try_from(&t).unwrap(), [-2.0, 0.0, 0.0]);
        fill_(&t, 7.0).unwrap();
        assert_eq!(Vec::<f32>::try_from(&t).unwrap(), [7.0; 3]);
        let f = full(&[2], 1.5, (Kind::Float, Device::Cpu)).unwrap();
        assert_eq!(Vec::<f32>::try_from(f).unwrap(), [1.5, 1.5]);
        let a = arange(0.0, 5.0, 2.0, (Kind::Int64, Device::Cpu)).unwrap();
        assert_eq!(Vec::<i64>::try_from(a).unwrap(), [0, 2, 4]);
        let l = linspace(0.0, 1.0, 3, (Kind::Float, Device::Cpu)).unwrap();
        assert_eq!(Vec::<f32>::try_from(l).unwrap(), [0.0, 0.5, 1.0]);
        assert!(full(&[2], 0.0, (Kind::Float, Device::Cuda(0))).is_err() || tch::Cuda::is_available());
    }
}
