//! Errors: every failure reaches JS as an `Error` with a stable `code` and a one-line message.
//! Core code returns `anyhow::Result`, raising coded errors with [`fail`]; libtorch's messages
//! (which carry C++ backtraces and TorchScript tracebacks) are trimmed to their meaningful line
//! and classified by [`classify`]; [`describe`] gives any error its code and message. The
//! addon's `error::guard` is the one place they (and panics) become JS errors.
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The `code` property of every error torch-node throws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    InvalidArg,
    ShapeMismatch,
    DTypeMismatch,
    DeviceUnavailable,
    /// Tensors on different devices in one operation (a CUDA module given CPU inputs).
    DeviceMismatch,
    ModelLoadError,
    MethodNotFound,
    Disposed,
    /// An error raised while running a model that fits none of the codes above.
    ForwardError,
    /// The `AbortSignal` passed to an async call aborted.
    Aborted,
    /// Bytes that are not a decodable image (truncated, unknown format, over the size limits).
    InvalidImage,
    /// A shared library of custom ops that `torch.loadLibrary` could not load.
    LibraryLoadError,
    /// Too many calls already wait (a `CausalLM` past `maxSequences + maxQueue`).
    QueueFull,
    /// A bug in torch-node (a caught panic) or an unexpected libtorch failure.
    Internal,
}

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        match self {
            Code::InvalidArg => "InvalidArg",
            Code::ShapeMismatch => "ShapeMismatch",
            Code::DTypeMismatch => "DTypeMismatch",
            Code::DeviceUnavailable => "DeviceUnavailable",
            Code::DeviceMismatch => "DeviceMismatch",
            Code::ModelLoadError => "ModelLoadError",
            Code::MethodNotFound => "MethodNotFound",
            Code::Disposed => "Disposed",
            Code::ForwardError => "ForwardError",
            Code::Aborted => "Aborted",
            Code::InvalidImage => "InvalidImage",
            Code::LibraryLoadError => "LibraryLoadError",
            Code::QueueFull => "QueueFull",
            Code::Internal => "Internal",
        }
    }
}

/// An error that already knows its code.
#[derive(Debug)]
pub struct CodedError {
    pub code: Code,
    pub message: String,
}

impl fmt::Display for CodedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CodedError {}

/// A coded error for `anyhow` (`return Err(fail(Code::InvalidArg, "..."))`).
pub fn fail(code: Code, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(CodedError {
        code,
        message: message.into(),
    })
}

/// `bail!` for coded errors (`use torch_core::error::bail_code;`, or `crate::error` inside).
#[doc(hidden)]
#[macro_export]
macro_rules! __bail_code {
    ($code:expr, $($arg:tt)*) => {
        return Err($crate::error::fail($code, format!($($arg)*)))
    };
}
pub use crate::__bail_code as bail_code;

/// Reduces a libtorch message to one line: a TorchScript traceback becomes its final
/// `SomethingError: ...` line, a C++ backtrace (`Exception raised from ...`) is dropped.
pub fn trim_libtorch(message: &str) -> String {
    let lines: Vec<&str> = message.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let interpreter_failure =
        message.contains("The following operation failed in the TorchScript interpreter");
    let line = if interpreter_failure {
        lines
            .iter()
            .rev()
            .find_map(|l| error_line(l))
            .unwrap_or_else(|| lines.last().copied().unwrap_or(""))
    } else {
        lines.first().copied().unwrap_or("")
    };
    let line = line.strip_prefix("Internal torch error: ").unwrap_or(line);
    let line = error_line(line).unwrap_or(line);
    match line.find(" (Exception raised from") {
        Some(i) => line[..i].to_string(),
        None => line.to_string(),
    }
}

/// `RuntimeError: msg` -> `msg`, for Python-style error lines in TorchScript tracebacks.
fn error_line(line: &str) -> Option<&str> {
    let (head, rest) = line.split_once(": ")?;
    let is_error_name =
        head.ends_with("Error") && head.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
    is_error_name.then_some(rest)
}

/// Picks a code for a libtorch message by what it says; None when nothing matches (the caller
/// decides: `InvalidArg` for a tensor operation, `ForwardError` inside a model).
/// ATen's convolutions say `Input type (CPUFloatType) and weight type (CUDAFloatType) should be
/// the same`: a device mismatch where the two type names' devices differ, else a dtype one.
fn input_and_weight_types(lowercase: &str) -> Option<Code> {
    let type_after = |label: &str| {
        let rest = &lowercase[lowercase.find(label)? + label.len()..];
        Some(&rest[..rest.find(')')?])
    };
    let on_cuda = |name: &str| name.starts_with("cuda");
    let (input, weight) = (type_after("input type (")?, type_after("weight type (")?);
    Some(if on_cuda(input) != on_cuda(weight) {
        Code::DeviceMismatch
    } else {
        Code::DTypeMismatch
    })
}

pub fn classify(message: &str) -> Option<Code> {
    let m = message.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| m.contains(n));
    let cuda_missing = has(&["cuda", "no kernel image", "hip error"])
        && has(&["not available", "no cuda", "driver", "not compiled", "cuda error"]);
    if let Some(code) = input_and_weight_types(&m) {
        return Some(code);
    }
    Some(
        if has(&["same device", "expected all tensors to be on the same"]) {
            Code::DeviceMismatch
        } else if cuda_missing {
            Code::DeviceUnavailable
        } else if has(&[
            "expected scalar type",
            "dtype",
            "expected object of scalar type",
            "found dtype",
            "not implemented for '",
            "result type",
            "can't be cast",
            "booltensor",
            "expected bool",
        ]) {
            Code::DTypeMismatch
        } else if has(&[
            "index out of range",
            "start out of range",
            "dimension out of range",
            "duplicate dims",
            "cannot come after",
            "cannot be identical",
            "written-to tensor refers to a single memory location",
            "expected inputs vector size",
        ]) {
            Code::InvalidArg
        } else if has(&[
            "shape",
            "size mismatch",
            "must match the size",
            "channels",
            "cannot be multiplied",
            "dimension",
            "out of range",
            "expected input",
            "sizes of tensors",
            "invalid for input of size",
            "multiply up",
            "equal size",
            "out of bounds for storage",
            "unmatched dim value",
            "unmatched stride value",
            "dim value is too",
        ]) {
            Code::ShapeMismatch
        } else if has(&[
            "expected a value of type",
            "expected at most",
            "expected at least",
            "argument",
        ]) {
            Code::InvalidArg
        } else {
            return None;
        },
    )
}

/// The code and one-line message of any error: a [`CodedError`] anywhere in the chain wins;
/// otherwise the message is libtorch's, trimmed and classified, with our context in front.
pub fn describe(err: &anyhow::Error) -> (Code, String) {
    let coded = err.chain().find_map(|e| e.downcast_ref::<CodedError>());
    let parts: Vec<String> = err.chain().map(|e| trim_libtorch(&e.to_string())).collect();
    let message = parts.join(": ");
    match coded {
        Some(c) => (c.code, message),
        None => {
            let code = classify(parts.last().map(String::as_str).unwrap_or(""));
            (code.unwrap_or(Code::InvalidArg), message)
        }
    }
}

/// Runs `body`, turning a panic into an `Internal` error (work on the executor; the addon's
/// `guard` does the same for an export's body).
pub fn catch_panic<T>(body: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(panic) => Err(fail(Code::Internal, panic_message(panic.as_ref()))),
    }
}

/// What a caught panic says, as an `Internal` error's message.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let what = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    format!(
        "internal error (a bug in torch-node, please report it): {}",
        trim_libtorch(what)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_cpp_backtrace_to_first_line() {
        let msg = "open file failed because of errno 2 on fopen: No such file or directory, file path: x.pt\nException raised from RAIIFile at ../caffe2/serialize/file_adapter.cc:30 (most recent call first):\nframe #0: c10::Error::Error";
        assert_eq!(
            trim_libtorch(msg),
            "open file failed because of errno 2 on fopen: No such file or directory, file path: x.pt"
        );
    }

    #[test]
    fn trims_torchscript_traceback_to_the_error_line() {
        let msg = "The following operation failed in the TorchScript interpreter.\nTraceback of TorchScript, serialized code (most recent call last):\n  File \"code/__torch__/torch/nn/modules/conv.py\", line 12, in forward\n    return torch._convolution(input, weight)\n           ~~~~~~~~~~~~~~~~~~ <--- HERE\nRuntimeError: Given groups=1, weight of size [64, 3, 7, 7], expected input[1, 4, 224, 224] to have 3 channels, but got 4 channels instead\n";
        let line = trim_libtorch(msg);
        assert_eq!(line, "Given groups=1, weight of size [64, 3, 7, 7], expected input[1, 4, 224, 224] to have 3 channels, but got 4 channels instead");
        assert_eq!(classify(&line), Some(Code::ShapeMismatch));
    }

    #[test]
    fn classifies_dtype_and_generic_errors() {
        assert_eq!(
            classify("expected scalar type Float but found Double").unwrap(),
            Code::DTypeMismatch
        );
        assert_eq!(
            classify("mat1 and mat2 shapes cannot be multiplied (2x5 and 4x8)").unwrap(),
            Code::ShapeMismatch
        );
        assert_eq!(classify("something odd happened"), None);
        assert_eq!(
            classify("permute(): duplicate dims are not allowed."),
            Some(Code::InvalidArg)
        );
        assert_eq!(
            classify("result type Float can't be cast to the desired output type Int"),
            Some(Code::DTypeMismatch)
        );
        let devices =
            "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!";
        assert_eq!(classify(devices), Some(Code::DeviceMismatch));
        // ATen's convolutions (seen on an H200 with a CPU input to a CUDA TorchScript module)
        let conv = |a: &str, b: &str| {
            classify(&format!("Input type ({a}) and weight type ({b}) should be the same or input should be a MKLDNN tensor and weight is a dense tensor"))
        };
        assert_eq!(conv("CPUFloatType", "CUDAFloatType"), Some(Code::DeviceMismatch));
        assert_eq!(conv("CUDAHalfType", "CPUHalfType"), Some(Code::DeviceMismatch));
        assert_eq!(conv("CPUFloatType", "CPUDoubleType"), Some(Code::DTypeMismatch));
        assert_eq!(conv("CUDAFloatType", "CUDAHalfType"), Some(Code::DTypeMismatch));
        assert_eq!(classify("Input type (unclosed"), None);
    }

    #[test]
    fn coded_errors_keep_their_code_under_context() {
        let e = fail(Code::Disposed, "tensor was disposed").context("forward");
        let (code, message) = describe(&e);
        assert_eq!(code, Code::Disposed);
        assert_eq!(message, "forward: tensor was disposed");
    }

    #[test]
    fn catch_panic_turns_panics_into_internal_errors() {
        let e = catch_panic::<()>(|| panic!("boom")).unwrap_err();
        let (code, message) = describe(&e);
        assert_eq!(code, Code::Internal);
        assert!(message.contains("boom"));
    }
}
