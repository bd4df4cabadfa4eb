//! One lifecycle for every kind of module JS sees (`ScriptModule`, `AOTModule`, and the next):
//! loads and calls run on the executor (`task`), sync ones while the caller waits; a loaded
//! module sits in a [`ModuleSlot`] until `dispose()`, after which every use is `Disposed`. A call
//! already running holds its own reference, so `dispose()` never pulls a module from under it.
//!
//! Each class keeps its own `#[napi]` methods (their docs and typings are the class's) and
//! delegates to this file: `load`, `open`, `ModuleSlot::call`, `ModuleSlot::call_sync`, `dispose`.
use crate::error::{bail_code, guard, Code, Result};
use crate::napi::js::{self, Env as RawEnv, Val};
use crate::napi::outcome::Outcome;
use crate::napi::task::{self, prepare, AbortFlag, Finish, Promise};
use napi::bindgen_prelude::ToNapiValue;
use std::cell::RefCell;
use std::sync::Arc;

/// A loaded module of kind `T`, or nothing once disposed. `class` names it in errors.
pub struct ModuleSlot<T> {
    // A RefCell, not `&mut self` in `dispose`: napi-rs keeps a shared borrow of the object for
    // as long as an async call it started is in flight, and `dispose` must still work then.
    inner: RefCell<Option<Arc<T>>>,
    class: &'static str,
}

impl<T: Send + Sync + 'static> ModuleSlot<T> {
    pub fn new(class: &'static str, module: T) -> Self {
        ModuleSlot {
            inner: RefCell::new(Some(Arc::new(module))),
            class,
        }
    }

    /// The module, or `Disposed`.
    pub fn get(&self) -> anyhow::Result<Arc<T>> {
        match &*self.inner.borrow() {
            Some(m) => Ok(m.clone()),
            None => bail_code!(
                Code::Disposed,
                "this {} was disposed; it can no longer be used",
                self.class
            ),
        }
    }

    pub fn is_disposed(&self) -> bool {
        self.inner.borrow().is_none()
    }

    /// Drops this slot's reference; calls already running keep theirs until they finish.
    pub fn dispose(&self) {
        self.inner.borrow_mut().take();
    }

    /// An async call: `read` takes its inputs and its AbortSignal's flag on the JS thread (an
    /// exception from the caller's own getter is rethrown at once; any other failure rejects),
    /// `run` runs on the executor, and `finish` makes its output the promise's value on the JS
    /// thread.
    pub fn call<A: Send + 'static, V: Send + 'static>(
        &self,
        env: RawEnv,
        what: &str,
        read: impl FnOnce() -> anyhow::Result<(A, AbortFlag)>,
        run: impl FnOnce(&T, A) -> anyhow::Result<V> + Send + 'static,
        finish: Finish<V>,
    ) -> Result<Promise> {
        let prepared = prepare(|| {
            let (args, abort) = read()?;
            Ok(((self.get()?, args), abort))
        })?;
        guard(|| task::spawn(env, what, prepared, move |(m, args)| run(&m, args), finish))
    }

    /// A sync call: `run` runs on the executor while the calling thread waits.
    pub fn call_sync<A: Send + 'static, V: Send + 'static>(
        &self,
        read: impl FnOnce() -> anyhow::Result<A>,
        run: impl FnOnce(&T, A) -> anyhow::Result<V> + Send + 'static,
    ) -> Result<V> {
        guard(|| {
            let args = read()?;
            let module = self.get()?;
            task::run_sync(move || run(&module, args))
        })
    }
}

/// A sync load (what a class's `new` runs): `read` on the calling thread, `load` on the
/// executor while it waits, `wrap` makes the JS object.
pub fn open<S: Send + 'static, M: Send + 'static, J>(
    read: impl FnOnce() -> anyhow::Result<S>,
    load: fn(S) -> anyhow::Result<M>,
    wrap: fn(M) -> J,
) -> Outcome<J> {
    guard(|| {
        let source = read()?;
        Ok(wrap(task::run_sync(move || load(source))?))
    })
    .into()
}

/// An async load: `read` takes what the load needs and its AbortSignal's flag on the JS
/// thread, `load` runs on the executor, and the promise resolves to `wrap`'s JS object.
pub fn load<S: Send + 'static, M: Send + 'static, J: ToNapiValue + 'static>(
    env: RawEnv,
    read: impl FnOnce() -> anyhow::Result<(S, AbortFlag)>,
    load: fn(S) -> anyhow::Result<M>,
    wrap: fn(M) -> J,
) -> Outcome<Promise> {
    Outcome::of(|| {
        let prepared = prepare(read)?;
        guard(|| task::spawn(env, "load", prepared, move |s| Ok((load(s)?, wrap)), finish_load))
    })
}

/// A loaded module as its JS object, on the JS thread as the load's promise resolves.
fn finish_load<M, J: ToNapiValue>(env: RawEnv, (module, wrap): (M, fn(M) -> J)) -> anyhow::Result<Val> {
    // SAFETY: on the JS thread, inside the completion's N-API callback.
    js::value_of(env, wrap(module))
}
