//! TorchScript values: `value` (the model and schema coercion), `schema` (what a method declares).
//! libtch's IValue handles are in `crate::ffi::ivalue`; JS values are the addon's `ivalue` glue.
pub mod schema;
pub mod value;
