//! TorchScript values: `value` (the napi-free model and schema coercion), `schema` (what a
//! method declares), `js` (JS values, glue). libtch's IValue handles are in `crate::ffi::ivalue`.
pub mod js;
pub mod schema;
pub mod value;
