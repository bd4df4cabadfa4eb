//! Live tensor accounting for `torch.memory()`: how many JS-visible tensors are
//! alive and how many bytes their elements occupy (a view counts its own elements, not the
//! storage it shares).
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// How this thread tells its JS engine that native memory grew or shrank by `delta` bytes: a
/// function and its context (the addon registers V8's external-memory adjustment with the thread's
/// N-API env, see [`set_thread_reporter`]). A plain function and a word, not a closure: it is
/// read inside GC finalizers, where nothing may allocate or borrow.
pub type Reporter = (fn(context: usize, delta: i64), usize);

thread_local! {
    /// This JS thread's reporter (main thread or a worker), set when the addon loads there;
    /// tensors report their bytes to that thread's V8 heap.
    static REPORTER: Cell<Option<Reporter>> = const { Cell::new(None) };
}

/// Registers this thread's reporter (called once per JS context, at load).
pub fn set_thread_reporter(report: fn(context: usize, delta: i64), context: usize) {
    REPORTER.with(|r| r.set(Some((report, context))));
}

/// Tells the JS engine that native memory grew or shrank, so that its GC runs when tensors
/// (invisible to its heap) pile up. Off a JS thread (the libuv pool, an executor instance) there
/// is no reporter and it does nothing.
fn report(delta: i64) {
    if let Some((report, context)) = REPORTER.try_with(|r| r.get()).ok().flatten() {
        report(context, delta);
    }
}

/// One JS thread's live tensors: how many, and the storages they use. Bytes are counted per
/// storage, once, for as long as any JS tensor uses it: a view keeps its base's storage
/// counted after the base is disposed (it does keep that memory alive), and disposing the base
/// no longer hides those bytes from V8.
#[derive(Default)]
struct Live {
    tensors: i64,
    bytes: i64,
    /// Storage identity -> (JS tensors using it, bytes counted for it).
    storages: HashMap<usize, (u32, i64)>,
}

thread_local! {
    static LIVE: RefCell<Live> = RefCell::new(Live::default());
}

/// Counts a new JS tensor over `storage` (its identity) of `nbytes` bytes; `nbytes` is 0 for
/// memory borrowed from JS (V8 already counts its ArrayBuffer). The first tensor of a storage
/// decides its bytes.
pub fn track(storage: usize, nbytes: i64) {
    let added = LIVE
        .try_with(|l| {
            let mut l = l.borrow_mut();
            l.tensors += 1;
            let entry = l.storages.entry(storage).or_insert((0, nbytes));
            entry.0 += 1;
            let added = if entry.0 == 1 { entry.1 } else { 0 };
            l.bytes += added;
            added
        })
        .unwrap_or(0);
    // Reported after the borrow ends: V8 may collect (and run finalizers that untrack) here.
    if added != 0 {
        report(added);
    }
}

/// Counts a JS tensor over `storage` as gone; the storage's bytes go with its last tensor.
pub fn untrack(storage: usize) {
    let removed = LIVE
        .try_with(|l| {
            let mut l = l.borrow_mut();
            l.tensors -= 1;
            let Some(entry) = l.storages.get_mut(&storage) else {
                return 0;
            };
            entry.0 -= 1;
            if entry.0 > 0 {
                return 0;
            }
            let bytes = entry.1;
            l.storages.remove(&storage);
            l.bytes -= bytes;
            bytes
        })
        .unwrap_or(0);
    if removed != 0 {
        report(-removed);
    }
}

/// `(live tensors, bytes)` of this JS thread (the main thread or one worker).
pub fn snapshot() -> (i64, i64) {
    LIVE.try_with(|l| {
        let l = l.borrow();
        (l.tensors, l.bytes)
    })
    .unwrap_or((0, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_storage_once_while_any_tensor_uses_it() {
        let (n0, b0) = snapshot();
        track(1, 24);
        track(1, 24); // a view of the same storage
        assert_eq!(snapshot(), (n0 + 2, b0 + 24));
        untrack(1); // the base goes; the view still holds the storage
        assert_eq!(snapshot(), (n0 + 1, b0 + 24));
        untrack(1);
        assert_eq!(snapshot(), (n0, b0));
        track(2, 0); // borrowed memory: a tensor, no bytes
        assert_eq!(snapshot(), (n0 + 1, b0));
        untrack(2);
    }
}
