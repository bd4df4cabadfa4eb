//! TorchScript values: `value` (the napi-free model and schema coercion), `ffi` (libtch IValue
//! handles), `js` (JS values, glue).
pub mod js;
pub mod value;
