//! Errors at the N-API boundary: the core's errors (`torch_core::error`: codes, `fail`,
//! `bail_code!`, libtorch's messages trimmed and classified), re-exported for the glue, and
//! [`guard`], the one place they — and panics — become JS errors.
use napi::Error;
use std::panic::{catch_unwind, AssertUnwindSafe};
pub use torch_core::error::{
    bail_code, catch_panic, classify, describe, fail, panic_message, trim_libtorch, Code, CodedError,
};

/// The glue's result type: a JS `Error` whose `code` is a [`Code`].
pub type Result<T> = napi::Result<T, Code>;

/// Runs an export's body, turning its error — or a panic, which would otherwise abort Node
/// (napi-rs does not catch panics) — into a coded JS error.
pub fn guard<T>(body: impl FnOnce() -> anyhow::Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_js(&e)),
        Err(panic) => Err(Error::new(Code::Internal, panic_message(panic.as_ref()))),
    }
}

/// A core error as a JS error: its code and one-line message ([`describe`]).
pub fn to_js(err: &anyhow::Error) -> Error<Code> {
    let (code, message) = describe(err);
    Error::new(code, message)
}
