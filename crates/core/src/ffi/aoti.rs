//! AOTInductor packages (`.pt2`): load, run, metadata.
use super::{string_at, Callback};
use anyhow::{anyhow, Result};
use std::ffi::{c_char, c_int, c_void, CString};
use torch_sys::C_tensor;

extern "C" {
    fn tn_aoti_load(path: *const c_char, device: c_int, err: *mut *mut c_char) -> *mut c_void;
    fn tn_aoti_free(m: *mut c_void);
    fn tn_aoti_run(
        m: *mut c_void,
        inputs: *const *mut C_tensor,
        n: c_int,
        cb: extern "C" fn(*mut c_void, *mut C_tensor),
        ctx: *mut c_void,
        err: *mut *mut c_char,
    );
    fn tn_aoti_constants(
        m: *mut c_void,
        cb: extern "C" fn(*mut c_void, *const c_char, usize, usize),
        ctx: *mut c_void,
        err: *mut *mut c_char,
    );
    fn tn_aoti_metadata(
        m: *mut c_void,
        cb: extern "C" fn(*mut c_void, *const c_char, *const c_char),
        ctx: *mut c_void,
        err: *mut *mut c_char,
    );
    fn tn_register_ops(err: *mut *mut c_char);
    fn tn_rows_linear(
        x: *const C_tensor,
        w: *const C_tensor,
        scales: *const C_tensor,
        out: *mut *mut C_tensor,
        err: *mut *mut c_char,
    );
}

/// A loaded AOTInductor package (`torch::inductor::AOTIModelPackageLoader`), freed on drop.
pub struct AotiHandle(*mut c_void);

// SAFETY: the loader's runner hands each `run` a model instance from its pool under a lock (one
// instance here, so concurrent runs wait for each other); nothing else mutates it after load.
unsafe impl Send for AotiHandle {}
unsafe impl Sync for AotiHandle {}

impl Drop for AotiHandle {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and freed once, here.
        unsafe { tn_aoti_free(self.0) };
    }
}

/// Registers the ops that exported programs may call (`torch_node::rows_linear`,
/// `src/shim/rows_linear.cpp`) with libtorch's dispatcher: once per process, before the first
/// package loads (a program finds its ops by name when it loads).
fn register_ops() -> Result<()> {
    static REGISTERED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    REGISTERED
        .get_or_init(|| shim!(tn_register_ops()).map_err(|e| e.to_string()))
        .clone()
        .map_err(|e| anyhow!("registering torch-node's ops: {e}"))
}

/// `torch_node::rows_linear`'s kernel called directly: `x [M, K] @ w [N, K]^T` (times `scales`
/// [N] for an int8 `w`) in x's dtype.
pub fn rows_linear(x: &tch::Tensor, w: &tch::Tensor, scales: Option<&tch::Tensor>) -> Result<tch::Tensor> {
    let mut out: *mut C_tensor = std::ptr::null_mut();
    let s = scales.map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: the tensors are live while borrowed; the shim writes a new handle into `out`.
    shim!(tn_rows_linear(x.as_ptr(), w.as_ptr(), s, &mut out))?;
    // SAFETY: a new tensor handle the shim handed over (non-null when it reported no error).
    Ok(unsafe { tch::Tensor::from_ptr(out) })
}

/// Loads a `.pt2` package; `device` is -1 for the package's own (CPU) device, else a CUDA index.
pub fn aoti_load(path: &str, device: i32) -> Result<AotiHandle> {
    register_ops()?;
    let c = CString::new(path).map_err(|_| anyhow!("the path contains a NUL byte"))?;
    // SAFETY: a C string that lives across the call.
    let h = shim!(tn_aoti_load(c.as_ptr(), device))?;
    match h.is_null() {
        true => Err(anyhow!("the AOTInductor loader returned nothing")),
        false => Ok(AotiHandle(h)),
    }
}

/// Runs a loaded package on its inputs (in the order its program flattens them).
pub fn aoti_run(m: &AotiHandle, inputs: &[tch::Tensor]) -> Result<Vec<tch::Tensor>> {
    let ptrs: Vec<*mut C_tensor> = inputs.iter().map(|t| t.as_ptr() as *mut C_tensor).collect();
    let mut out: Vec<tch::Tensor> = Vec::new();
    // SAFETY: each output is a new tensor handle the shim hands over.
    let mut cb = Callback::new(|t| out.push(unsafe { tch::Tensor::from_ptr(t) }));
    // SAFETY: `m` and the input tensors are live while borrowed; `cb` lives across the call.
    shim!(tn_aoti_run(
        m.0,
        ptrs.as_ptr(),
        ptrs.len() as c_int,
        cb.tensors(),
        cb.ctx()
    ))?;
    cb.finish();
    Ok(out)
}

/// A package's metadata, plus `in_spec`/`out_spec` (its pytree call specs), sorted by key.
pub fn aoti_metadata(m: &AotiHandle) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    // SAFETY: the shim passes strings that live for the callback.
    let mut cb = Callback::new(|k, v| out.push(unsafe { (string_at(k), string_at(v)) }));
    // SAFETY: `m` is live while borrowed; `cb` lives across the call.
    shim!(tn_aoti_metadata(m.0, cb.pairs(), cb.ctx()))?;
    cb.finish();
    out.sort();
    Ok(out)
}

/// The loaded model's CPU constants: (original FQN, address, bytes), address 0 for one that is
/// not a dense range. The memory is the model's, valid while `m` lives.
pub fn aoti_constants(m: &AotiHandle) -> Result<Vec<(String, usize, usize)>> {
    let mut out: Vec<(String, usize, usize)> = Vec::new();
    // SAFETY: the shim passes names that live for the callback.
    let mut cb = Callback::new(|name, address, bytes| out.push((unsafe { string_at(name) }, address, bytes)));
    // SAFETY: `m` is live while borrowed; `cb` lives across the call.
    shim!(tn_aoti_constants(m.0, cb.ranges(), cb.ctx()))?;
    cb.finish();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind, Tensor};

    /// The kernel against ATen's linear (float32 accumulation: within 1e-5 of the largest output
    /// for float32 weights, 1e-2 for bf16 outputs) at every row count it takes and past it (17:
    /// ATen's own), with inner sizes that leave a tail of fewer than 8 and channel counts that
    /// leave a remainder of the blocks of 3. int8 against its dequantized weight (ATen's
    /// `_weight_int8pack_mm` reads past K's end at K = 37).
    #[test]
    fn rows_linear_is_atens_linear() {
        tch::manual_seed(7);
        for (k, n) in [(64, 48), (37, 7), (576, 50)] {
            for m in [1, 2, 3, 4, 5, 7, 8, 11, 16, 17] {
                let x = Tensor::randn([m, k], (Kind::Float, Device::Cpu));
                let w = Tensor::randn([n, k], (Kind::Float, Device::Cpu));
                let expected = x.linear::<Tensor>(&w, None);
                let tolerance = 1e-5 * f64::try_from(expected.abs().max()).unwrap();
                let got = rows_linear(&x, &w, None).unwrap();
                assert_eq!(got.size(), [m, n]);
                let diff = f64::try_from((&got - &expected).abs().max()).unwrap();
                assert!(diff <= tolerance, "f32 m={m} k={k} n={n}: {diff}");

                let (xb, wb) = (x.to_kind(Kind::BFloat16), w.to_kind(Kind::BFloat16));
                let expected = xb
                    .to_kind(Kind::Float)
                    .linear::<Tensor>(&wb.to_kind(Kind::Float), None);
                let got = rows_linear(&xb, &wb, None).unwrap();
                assert_eq!(got.kind(), Kind::BFloat16);
                let diff = f64::try_from((got.to_kind(Kind::Float) - &expected).abs().max()).unwrap();
                let scale = f64::try_from(expected.abs().max()).unwrap();
                assert!(diff <= 1e-2 * scale, "bf16 m={m} k={k} n={n}: {diff}");

                let q = (&w * 40.0).clamp(-127.0, 127.0).to_kind(Kind::Int8);
                let scales = Tensor::rand([n], (Kind::Float, Device::Cpu)).to_kind(Kind::BFloat16) / 40.0;
                let dequantized = q.to_kind(Kind::Float) * scales.to_kind(Kind::Float).unsqueeze(1);
                let expected = xb.to_kind(Kind::Float).linear::<Tensor>(&dequantized, None);
                let got = rows_linear(&xb, &q, Some(&scales)).unwrap();
                let diff = f64::try_from((got.to_kind(Kind::Float) - &expected).abs().max()).unwrap();
                let scale = f64::try_from(expected.abs().max()).unwrap();
                assert!(diff <= 1e-2 * scale, "int8 m={m} k={k} n={n}: {diff}");
            }
        }
    }

    #[test]
    fn rows_linear_refuses_what_it_cannot_multiply() {
        let x = Tensor::ones([2, 8], (Kind::Float, Device::Cpu));
        let q = Tensor::ones([4, 8], (Kind::Int8, Device::Cpu));
        let cases = [
            (
                rows_linear(&x, &Tensor::ones([4, 9], (Kind::Float, Device::Cpu)), None),
                "[M, K] and w [N, K]",
            ),
            (rows_linear(&x, &q, None), "scales go with"),
            (
                rows_linear(&x, &x.to_kind(Kind::Double), None),
                "w must be int8 or x's dtype",
            ),
            (
                rows_linear(&x.to_kind(Kind::Double), &q, None),
                "x must be float32 or bfloat16",
            ),
            (
                rows_linear(&x, &q, Some(&Tensor::ones([3], (Kind::Float, Device::Cpu)))),
                "scales [N]",
            ),
        ];
        for (result, expected) in cases {
            let message = result.expect_err(expected).to_string();
            assert!(message.contains(expected), "{message}");
        }
    }
}
