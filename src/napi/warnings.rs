//! libtorch's warnings as Node warnings: `process.emitWarning(message, {type: 'TorchWarning',
//! code})`, once per message and JS thread, delivered on the JS thread that asked for the work
//! (never from inside GC or a libtorch thread), so `--no-warnings`, a `'warning'` listener and
//! loggers see them instead of raw lines on stderr.
//!
//! libtorch keeps one warning handler per thread; ours is installed on every JS thread and
//! every executor instance. A warning raised on an instance goes to the JS thread whose call it
//! is running (`with_origin`); one raised on a JS thread, to that thread.
//!
//! `napi_env` is an opaque handle that Rust never dereferences (see `crate::napi::js`).
#![allow(clippy::not_unsafe_ptr_arg_deref)]
use crate::napi::js;
use crate::napi::queue::JsQueue;
use napi::sys;
use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::Arc;

thread_local! {
    /// The JS thread that the work running on this thread belongs to.
    static ORIGIN: RefCell<Option<Arc<JsQueue>>> = const { RefCell::new(None) };
    /// Messages this JS thread has emitted already.
    static EMITTED: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
}

/// Installs the handler on this thread; on a JS thread, its warnings go to itself.
pub fn init_thread(own_queue: Option<Arc<JsQueue>>) {
    torch_core::ffi::forward_warnings(on_warning);
    ORIGIN.with(|o| *o.borrow_mut() = own_queue);
}

/// Runs `work` (on an executor instance) with its warnings going to `origin`'s JS thread.
pub fn with_origin<T>(origin: Option<Arc<JsQueue>>, work: impl FnOnce() -> T) -> T {
    let previous = ORIGIN.with(|o| std::mem::replace(&mut *o.borrow_mut(), origin));
    // Restored even if `work` panics (the executor catches it and goes on).
    struct Restore(Option<Option<Arc<JsQueue>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take().flatten();
            ORIGIN.with(|o| *o.borrow_mut() = previous);
        }
    }
    let _restore = Restore(Some(previous));
    work()
}

fn on_warning(message: String, deprecation: bool) {
    let code = if deprecation {
        "TORCH_DEPRECATION"
    } else {
        "TORCH_WARNING"
    };
    let Some(queue) = ORIGIN.with(|o| o.borrow().clone()) else {
        eprintln!("[torch-node] TorchWarning: {message}");
        return;
    };
    queue.post(Box::new(move |env| emit(env, &message, code)));
}

/// `process.emitWarning(message, {type: 'TorchWarning', code})`, once per message.
fn emit(env: sys::napi_env, message: &str, code: &str) {
    if !EMITTED.with(|e| e.borrow_mut().insert(message.to_string())) {
        return;
    }
    let call = || -> anyhow::Result<()> {
        let process = js::global_property(env, "process")?;
        let options = js::new_object(
            env,
            vec![
                ("type".to_string(), js::new_string(env, "TorchWarning")?),
                ("code".to_string(), js::new_string(env, code)?),
            ],
        )?;
        js::call_method(
            env,
            process,
            "emitWarning",
            &[js::new_string(env, message)?, options],
        )?;
        Ok(())
    };
    if call().is_err() {
        // A patched emitWarning that throws: the warning is dropped, not the process.
        js::take_exception(env);
    }
}
