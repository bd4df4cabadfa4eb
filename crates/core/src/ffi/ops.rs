//! torch-node's own ops (`src/shim/rows_linear.cpp`, `rows_linear_int4.cpp`): registered with
//! libtorch's dispatcher for the programs `torch-node export` writes, and their kernels callable
//! directly (the unit tests below check them against ATen).
use anyhow::{anyhow, Result};
use std::ffi::{c_char, c_void, CStr};
use torch_sys::C_tensor;

/// `tn_kernel_calls`'s callback: (ctx, op, kernel, calls, one-row calls).
type KernelCallsCb = extern "C" fn(*mut c_void, *const c_char, *const c_char, u64, u64);

extern "C" {
    fn tn_kernel_calls(cb: KernelCallsCb, ctx: *mut c_void);
    fn tn_register_ops(err: *mut *mut c_char);
    fn tn_rows_linear(
        x: *const C_tensor,
        w: *const C_tensor,
        scales: *const C_tensor,
        out: *mut *mut C_tensor,
        err: *mut *mut c_char,
    );
    fn tn_rows_linear_int4(
        x: *const C_tensor,
        packed: *const C_tensor,
        scales: *const C_tensor,
        zeros: *const C_tensor,
        group: i64,
        block: i64,
        out: *mut *mut C_tensor,
        err: *mut *mut c_char,
    );
    fn tn_rows_linear_int4_runs(
        x: *const C_tensor,
        packed: *const C_tensor,
        runs: *const C_tensor,
        group: i64,
        block: i64,
        out: *mut *mut C_tensor,
        err: *mut *mut c_char,
    );
    fn tn_int4_runs(
        scales: *const C_tensor,
        zeros: *const C_tensor,
        block: i64,
        out: *mut *mut C_tensor,
        err: *mut *mut c_char,
    );
}

/// Registers the ops that exported programs may call (`torch_node::rows_linear`,
/// `rows_linear_int4_runs` and `rows_linear_int4`) with libtorch's dispatcher: once per process, before the first
/// package loads (a program finds its ops by name when it loads).
pub(crate) fn register_ops() -> Result<()> {
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

/// `torch_node::rows_linear_int4`'s kernel called directly: `x [M, K]` times the int4 weight
/// `packed` [N, K/2] (uint8, `_convert_weight_to_int4pack_for_cpu`'s layout in blocks of `block`
/// output channels) with `scales` and `zeros` [K/group, N]: `w = (q - 8) * scale + zero`.
pub fn rows_linear_int4(
    x: &tch::Tensor,
    packed: &tch::Tensor,
    scales: &tch::Tensor,
    zeros: &tch::Tensor,
    group: i64,
    block: i64,
) -> Result<tch::Tensor> {
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: the tensors are live while borrowed; the shim writes a new handle into `out`.
    shim!(tn_rows_linear_int4(
        x.as_ptr(),
        packed.as_ptr(),
        scales.as_ptr(),
        zeros.as_ptr(),
        group,
        block,
        &mut out
    ))?;
    // SAFETY: a new tensor handle the shim handed over (non-null when it reported no error).
    Ok(unsafe { tch::Tensor::from_ptr(out) })
}

/// `torch_node::rows_linear_int4_runs`'s kernel called directly: as [`rows_linear_int4`], with the
/// scales and offsets (`zero - 8 * scale`) arranged by [`int4_runs`]: `w = q * scale + offset`.
pub fn rows_linear_int4_runs(
    x: &tch::Tensor,
    packed: &tch::Tensor,
    runs: &tch::Tensor,
    group: i64,
    block: i64,
) -> Result<tch::Tensor> {
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: the tensors are live while borrowed; the shim writes a new handle into `out`.
    shim!(tn_rows_linear_int4_runs(
        x.as_ptr(),
        packed.as_ptr(),
        runs.as_ptr(),
        group,
        block,
        &mut out
    ))?;
    // SAFETY: a new tensor handle the shim handed over (non-null when it reported no error).
    Ok(unsafe { tch::Tensor::from_ptr(out) })
}

/// The scales and zeros [K/group, N] of an int4 weight packed in blocks of `block` channels as
/// `rows_linear_int4_runs`'s `runs` [N/32, K/group, 64] float32: for each run of 32 channels
/// (16 low nibbles and 16 high ones) and each group, their 32 scales then their 32 offsets.
pub fn int4_runs(scales: &tch::Tensor, zeros: &tch::Tensor, block: i64) -> Result<tch::Tensor> {
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: the tensors are live while borrowed; the shim writes a new handle into `out`.
    shim!(tn_int4_runs(scales.as_ptr(), zeros.as_ptr(), block, &mut out))?;
    // SAFETY: a new tensor handle the shim handed over (non-null when it reported no error).
    Ok(unsafe { tch::Tensor::from_ptr(out) })
}

/// How often one kernel of torch-node's ops ran in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelCalls {
    /// The op a program calls (`torch_node::rows_linear`, `torch_node::rows_linear_int4_runs`).
    pub op: String,
    /// What it ran on this CPU: `avx2` (torch-node's kernel) or `aten` (ATen's linear: no AVX2 +
    /// FMA, or float weights past the kernel's rows).
    pub kernel: String,
    pub calls: u64,
    /// The calls with a single row (a decode step of one sequence).
    pub one_row: u64,
}

/// The calls of torch-node's ops so far, per kernel: which path a program took on this CPU.
pub fn kernel_calls() -> Vec<KernelCalls> {
    extern "C" fn push(ctx: *mut c_void, op: *const c_char, kernel: *const c_char, calls: u64, one_row: u64) {
        // SAFETY: `ctx` is the Vec below, borrowed for the call; the names are static C strings.
        let (out, text) = unsafe {
            (&mut *(ctx as *mut Vec<KernelCalls>), |p: *const c_char| {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            })
        };
        out.push(KernelCalls {
            op: text(op),
            kernel: text(kernel),
            calls,
            one_row,
        });
    }
    let mut out: Vec<KernelCalls> = Vec::new();
    // SAFETY: the callback only appends to `out`, which outlives the call; the shim neither
    // throws nor keeps `ctx`.
    unsafe { tn_kernel_calls(push, &mut out as *mut Vec<KernelCalls> as *mut c_void) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind, Tensor};

    /// Each call counts under the kernel that ran it: torch-node's where the CPU has AVX2 + FMA
    /// (one row counted apart), ATen's past 16 rows of float weights. Other tests run beside
    /// this one in the process: the counts only grow.
    #[test]
    fn kernel_calls_count_the_kernel_that_ran() {
        let count = |kernel: &str| {
            let all = kernel_calls();
            assert_eq!(all.len(), 4, "{all:?}");
            let found = all
                .into_iter()
                .find(|k| k.op == "torch_node::rows_linear" && k.kernel == kernel);
            found.unwrap()
        };
        let fast = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
        let kernel = if fast { "avx2" } else { "aten" };
        let w = Tensor::randn([16, 64], (Kind::Float, Device::Cpu));
        let before = count(kernel);
        let y = rows_linear(&Tensor::randn([1, 64], (Kind::Float, Device::Cpu)), &w, None).unwrap();
        assert_eq!(y.size(), [1, 16]);
        let after = count(kernel);
        assert!(
            after.calls > before.calls && after.one_row > before.one_row,
            "{before:?} -> {after:?}"
        );
        let before = count("aten");
        let y = rows_linear(&Tensor::randn([17, 64], (Kind::Float, Device::Cpu)), &w, None).unwrap();
        assert_eq!(y.size(), [17, 16]);
        assert!(
            count("aten").calls > before.calls,
            "17 rows of float weights: ATen's linear"
        );
    }

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

    /// q [N, K] (values 0..15) packed as `_convert_weight_to_int4pack_for_cpu` lays it out in
    /// blocks of `block` channels (python/quantize_lm.py int4_block): byte (nb, k, j) holds
    /// q[nb*B + j, k] in its low nibble, q[nb*B + j + B/2, k] in its high one.
    fn pack_int4(q: &Tensor, block: i64) -> Tensor {
        let (n, k) = q.size2().unwrap();
        let v = q.reshape([n / block, 2, block / 2, k]);
        (v.select(1, 0) + v.select(1, 1) * 16)
            .permute([0, 2, 1])
            .contiguous()
            .reshape([n, k / 2])
            .to_kind(Kind::Uint8)
    }

    /// The int4 kernel against ATen's linear over the dequantized weight, for both blocks, groups
    /// of 32 and 128, odd row counts (the kernel takes rows 2 at a time), several blocks of
    /// channels, float32 and bf16 rows and scales.
    #[test]
    fn rows_linear_int4_is_the_dequantized_linear() {
        tch::manual_seed(11);
        for (k, n, group) in [(64, 64, 32), (576, 192, 32), (256, 128, 128), (96, 64, 32)] {
            for block in [32, 64] {
                let q = Tensor::randint(16, [n, k], (Kind::Int64, Device::Cpu));
                let packed = pack_int4(&q, block);
                let scales = Tensor::rand([k / group, n], (Kind::Float, Device::Cpu)) / 10.0;
                let zeros = Tensor::randn([k / group, n], (Kind::Float, Device::Cpu)) / 10.0;
                let expand = |t: &Tensor| {
                    t.transpose(0, 1)
                        .unsqueeze(2)
                        .expand([n, k / group, group], false)
                        .reshape([n, k])
                };
                let w = (q.to_kind(Kind::Float) - 8.0) * expand(&scales) + expand(&zeros);
                for m in [1, 2, 3, 5, 8, 17, 33] {
                    let x = Tensor::randn([m, k], (Kind::Float, Device::Cpu));
                    let expected = x.linear::<Tensor>(&w, None);
                    let got = rows_linear_int4(&x, &packed, &scales, &zeros, group, block).unwrap();
                    assert_eq!(got.size(), [m, n]);
                    let runs = int4_runs(&scales, &zeros, block).unwrap();
                    let by_runs = rows_linear_int4_runs(&x, &packed, &runs, group, block).unwrap();
                    assert!(by_runs.equal(&got), "runs m={m} k={k} n={n} g={group} b={block}");
                    let scale = f64::try_from(expected.abs().max()).unwrap();
                    let diff = f64::try_from((&got - &expected).abs().max()).unwrap();
                    assert!(
                        diff <= 1e-5 * scale,
                        "f32 m={m} k={k} n={n} g={group} b={block}: {diff}"
                    );

                    let (sb, zb) = (scales.to_kind(Kind::BFloat16), zeros.to_kind(Kind::BFloat16));
                    let wb = (q.to_kind(Kind::Float) - 8.0) * expand(&sb.to_kind(Kind::Float))
                        + expand(&zb.to_kind(Kind::Float));
                    let xb = x.to_kind(Kind::BFloat16);
                    let expected = xb.to_kind(Kind::Float).linear::<Tensor>(&wb, None);
                    let got = rows_linear_int4(&xb, &packed, &sb, &zb, group, block).unwrap();
                    assert_eq!(got.kind(), Kind::BFloat16);
                    let diff = f64::try_from((got.to_kind(Kind::Float) - &expected).abs().max()).unwrap();
                    assert!(
                        diff <= 1e-2 * scale,
                        "bf16 m={m} k={k} n={n} g={group} b={block}: {diff}"
                    );
                }
            }
        }
    }

    /// `int4_runs` puts each channel's scale and offset where the kernel reads them (the layout
    /// python/quantize_lm.py int4_runs writes for the exported programs).
    #[test]
    fn int4_runs_lays_out_each_run_and_group() {
        let (k, n, group) = (128, 128, 32);
        let g = k / group;
        let scales = Tensor::rand([g, n], (Kind::Float, Device::Cpu));
        let zeros = Tensor::randn([g, n], (Kind::Float, Device::Cpu));
        for block in [32, 64] {
            let runs = int4_runs(&scales, &zeros, block).unwrap();
            assert_eq!(runs.size(), [n / 32, g, 64]);
            for t in 0..n / 32 {
                let (nb, c) = (t / (block / 32), t % (block / 32));
                for gi in 0..g {
                    for lane in 0..32 {
                        let ch = nb * block + (lane / 16) * (block / 2) + c * 16 + lane % 16;
                        let s = scales.double_value(&[gi, ch]);
                        let z = zeros.double_value(&[gi, ch]);
                        assert_eq!(runs.double_value(&[t, gi, lane]), s, "scale t={t} g={gi} {lane}");
                        let offset = runs.double_value(&[t, gi, 32 + lane]);
                        assert_eq!(
                            offset,
                            ((z as f32) - 8.0 * (s as f32)) as f64,
                            "offset t={t} g={gi} {lane}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn rows_linear_int4_runs_refuses_what_it_cannot_multiply() {
        let x = Tensor::ones([2, 64], (Kind::Float, Device::Cpu));
        let packed = Tensor::ones([64, 32], (Kind::Uint8, Device::Cpu));
        let runs = |shape: &[i64], kind| Tensor::ones(shape, (kind, Device::Cpu));
        let cases = [
            (
                rows_linear_int4_runs(&x, &packed, &runs(&[2, 2, 64], Kind::Float), 32, 32),
                None,
            ),
            (
                rows_linear_int4_runs(&x, &packed, &runs(&[2, 2, 32], Kind::Float), 32, 32),
                Some("runs [N/32, K/group, 64] = [2, 2, 64] float32 expected"),
            ),
            (
                rows_linear_int4_runs(&x, &packed, &runs(&[2, 1, 64], Kind::Float), 32, 32),
                Some("runs [N/32, K/group, 64]"),
            ),
            (
                rows_linear_int4_runs(&x, &packed, &runs(&[2, 2, 64], Kind::BFloat16), 32, 32),
                Some("float32 expected"),
            ),
            (
                rows_linear_int4_runs(
                    &x,
                    &packed.to_kind(Kind::Int8),
                    &runs(&[2, 2, 64], Kind::Float),
                    32,
                    32,
                ),
                Some("packed [N, K/2] uint8"),
            ),
            (
                rows_linear_int4_runs(&x, &packed, &runs(&[2, 2, 64], Kind::Float), 32, 16),
                Some("block must be 32 or 64"),
            ),
        ];
        for (result, expected) in cases {
            match expected {
                None => assert_eq!(result.unwrap().size(), [2, 64]),
                Some(expected) => {
                    let message = result.expect_err(expected).to_string();
                    assert!(message.contains(expected), "{message}");
                }
            }
        }
    }

    #[test]
    fn rows_linear_int4_refuses_what_it_cannot_multiply() {
        let f = |shape: &[i64]| Tensor::ones(shape, (Kind::Float, Device::Cpu));
        let x = f(&[2, 64]);
        let packed = Tensor::ones([64, 32], (Kind::Uint8, Device::Cpu));
        let s = f(&[2, 64]);
        let cases = [
            (
                rows_linear_int4(&x, &packed.to_kind(Kind::Int8), &s, &s, 32, 32),
                "packed [N, K/2] uint8",
            ),
            (
                rows_linear_int4(&f(&[2, 62]), &packed, &s, &s, 32, 32),
                "packed [N, K/2] uint8",
            ),
            (
                rows_linear_int4(&x.to_kind(Kind::Double), &packed, &s, &s, 32, 32),
                "float32 or bfloat16",
            ),
            (
                rows_linear_int4(&x, &packed, &s, &s, 32, 16),
                "block must be 32 or 64",
            ),
            (
                rows_linear_int4(
                    &x,
                    &Tensor::ones([96, 32], (Kind::Uint8, Device::Cpu)),
                    &s,
                    &s,
                    32,
                    64,
                ),
                "multiple of the block",
            ),
            (rows_linear_int4(&x, &packed, &s, &s, 48, 32), "must divide K"),
            (rows_linear_int4(&x, &packed, &s, &s, 0, 32), "must divide K"),
            (
                rows_linear_int4(&x, &packed, &f(&[64, 2]), &s, 32, 32),
                "[K/group, N]",
            ),
            (
                rows_linear_int4(&x, &packed, &s, &s.to_kind(Kind::BFloat16), 32, 32),
                "both be float32 or bfloat16",
            ),
        ];
        for (result, expected) in cases {
            let message = result.expect_err(expected).to_string();
            assert!(message.contains(expected), "{message}");
        }
    }
}
