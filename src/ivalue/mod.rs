//! TorchScript values as JS values (`js`, glue) over `torch_core::ivalue` (the value model, the
//! schema coercion, what a method declares).
pub mod js;
