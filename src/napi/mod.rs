//! The N-API boundary, one home for it: every raw N-API call (`unsafe`) of the crate lives in
//! this folder (apart from the borrowing code in `tensor/borrow.rs`), behind safe helpers the
//! glue files use.
//! - `js`: the raw toolkit — reading loosely typed JS values with our own messages, making
//!   objects, arrays, strings.
//! - `outcome`: how an export fails without throwing from native code.
//! - `convert`: the argument types exports declare (read inside the export's body).
//! - `options`: option bags, one declaration each (`js_options!`).
//! - `task`: async and sync exports over the executor (promise, AbortSignal, completion).
//! - `lifecycle`: what every module class shares: loads, calls, `dispose()`.
//! - `queue`: one threadsafe-function queue per JS thread (completions, lent-memory release).
//! - `warnings`: libtorch's warnings delivered as Node warnings.
pub mod convert;
pub mod js;
pub mod lifecycle;
pub mod options;
pub mod outcome;
pub mod queue;
pub mod task;
pub mod warnings;
