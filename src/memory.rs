//! Live tensor accounting for `torch.memory()` (napi-free): how many JS-visible tensors are
//! alive and how many bytes their elements occupy (a view counts its own elements, not the
//! storage it shares).
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};

thread_local! {
    /// The N-API env of this JS thread (main thread or a worker), set when the addon loads
    /// there; tensors report their bytes to that thread's V8 heap.
    static ENV: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Remembers this thread's env (called once per JS context, at load).
pub fn set_thread_env(env: napi::sys::napi_env) {
    ENV.with(|e| e.set(Some(env as usize)));
}

/// Tells V8 that native memory grew or shrank, so that its GC runs when tensors (invisible to
/// its heap) pile up. `napi_adjust_external_memory` takes a basic env: it is allowed inside a
/// finalizer that runs during GC. Off a JS thread (the libuv pool) it does nothing.
fn report(delta: i64) {
    if let Some(env) = ENV.with(|e| e.get()) {
        let mut out = 0i64;
        unsafe { napi::sys::napi_adjust_external_memory(env as napi::sys::napi_env, delta, &mut out) };
    }
}

static TENSORS: AtomicI64 = AtomicI64::new(0);
static BYTES: AtomicI64 = AtomicI64::new(0);

/// Bytes of a tensor's elements.
pub fn tensor_bytes(t: &tch::Tensor) -> i64 {
    let elem = t.kind().elt_size_in_bytes() as i64;
    t.size().iter().product::<i64>() * elem
}

pub fn track(bytes: i64) {
    TENSORS.fetch_add(1, Ordering::Relaxed);
    BYTES.fetch_add(bytes, Ordering::Relaxed);
    report(bytes);
}

pub fn untrack(bytes: i64) {
    TENSORS.fetch_sub(1, Ordering::Relaxed);
    BYTES.fetch_sub(bytes, Ordering::Relaxed);
    report(-bytes);
}

/// `(live tensors, bytes)`.
pub fn snapshot() -> (i64, i64) {
    (TENSORS.load(Ordering::Relaxed), BYTES.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_element_bytes() {
        let t = tch::Tensor::zeros([2, 3], (tch::Kind::Float, tch::Device::Cpu));
        assert_eq!(tensor_bytes(&t), 24);
        let (n0, b0) = snapshot();
        track(24);
        assert_eq!(snapshot(), (n0 + 1, b0 + 24));
        untrack(24);
    }
}
