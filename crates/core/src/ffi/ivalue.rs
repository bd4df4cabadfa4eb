//! [`Value`] <-> libtch IValue handles (`torch_sys::ati_*`). `tch::IValue`'s own conversions are
//! private, and its lists and dicts are untyped (`List[Any]`), which TorchScript rejects for a
//! `List[int]` argument; typed containers come from the C++ shim.
use super::check_last_error;
use crate::ffi;
use crate::ivalue::value::Value;
use anyhow::{bail, Result};
use std::ffi::{c_char, c_int, CString};
use torch_sys::*;

/// An owned IValue handle, freed on drop.
pub struct Owned(pub *mut CIValue);

impl Drop for Owned {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: `self.0` is non-null and owned by this `Owned` alone (each wraps a handle libtch or the
            // shim just allocated with `new IValue`); drop runs once, so it is freed exactly once.
            unsafe { ati_free(self.0) };
        }
    }
}

// SAFETY: an IValue handle is a heap object with no thread affinity; it is only used by one
// thread at a time (built on the JS thread, consumed on the pool thread).
unsafe impl Send for Owned {}

fn checked(p: *mut CIValue) -> Result<Owned> {
    check_last_error()?;
    if p.is_null() {
        bail!("libtorch returned no value");
    }
    Ok(Owned(p))
}

/// Builds an IValue from a (coerced) value.
pub fn to_ivalue(v: &Value) -> Result<Owned> {
    // SAFETY: each handle passed in is live across its call: `t` is borrowed from `v`; the handles in
    // `ptrs`/`kp`/`vp` are owned by `owned`/`keys`/`vals` (one per entry each, as `typed_dict` needs); `c`
    // holds its C string. libtch copies its inputs and returns a new handle, taken over by `checked` or
    // `Owned`.
    unsafe {
        match v {
            Value::None => checked(ati_none()),
            Value::Bool(b) => checked(ati_bool(c_int::from(*b))),
            Value::Int(i) => checked(ati_int(*i)),
            Value::Float(f) | Value::Number(f) => checked(ati_double(*f)),
            Value::Str(s) => {
                let c = CString::new(s.as_str())?;
                checked(ati_string(c.as_ptr()))
            }
            Value::Tensor(t) => checked(ati_tensor(t.as_ptr() as *mut C_tensor)),
            Value::Tuple(items) => {
                let owned = items.iter().map(to_ivalue).collect::<Result<Vec<_>>>()?;
                let ptrs: Vec<*mut CIValue> = owned.iter().map(|o| o.0).collect();
                checked(ati_tuple(ptrs.as_ptr(), ptrs.len() as c_int))
            }
            Value::List(ty, items) => {
                let owned = items.iter().map(to_ivalue).collect::<Result<Vec<_>>>()?;
                let ptrs: Vec<*mut CIValue> = owned.iter().map(|o| o.0).collect();
                match ty {
                    Some(t) => Ok(Owned(ffi::typed_list(t, &ptrs)?)),
                    None => checked(ati_generic_list(ptrs.as_ptr(), ptrs.len() as c_int)),
                }
            }
            Value::Dict(ty, entries) => {
                let keys = entries
                    .iter()
                    .map(|(k, _)| to_ivalue(k))
                    .collect::<Result<Vec<_>>>()?;
                let vals = entries
                    .iter()
                    .map(|(_, v)| to_ivalue(v))
                    .collect::<Result<Vec<_>>>()?;
                let kp: Vec<*mut CIValue> = keys.iter().map(|o| o.0).collect();
                let vp: Vec<*mut CIValue> = vals.iter().map(|o| o.0).collect();
                let (kt, vt) = ty.clone().unwrap_or_else(|| ("str".into(), "Any".into()));
                Ok(Owned(ffi::typed_dict(&kt, &vt, &kp, &vp)?))
            }
        }
    }
}

/// Reads `len` owned element handles through one of libtch's `ati_to_*` accessors.
fn read_many(len: c_int, read: impl FnOnce(*mut *mut CIValue)) -> Result<Vec<Owned>> {
    let mut ptrs = vec![std::ptr::null_mut::<CIValue>(); len.max(0) as usize];
    read(ptrs.as_mut_ptr());
    check_last_error()?;
    Ok(ptrs.into_iter().map(Owned).collect())
}

/// Reads an IValue (borrowed; the caller still owns and frees it) into a [`Value`].
pub fn from_ivalue(owned: &Owned) -> Result<Value> {
    read(owned, 0)
}

fn read(owned: &Owned, depth: usize) -> Result<Value> {
    if depth > crate::args::MAX_DEPTH {
        crate::error::bail_code!(
            crate::error::Code::ForwardError,
            "the output is nested deeper than {} levels",
            crate::args::MAX_DEPTH
        );
    }
    let from_ivalue = |o: &Owned| read(o, depth + 1);
    let v = owned.0;
    // SAFETY: `v` is the live handle owned by `owned` (freed only on its drop, after this call); `ati_tag`
    // only inspects it, reporting failure through libtch's thread-local error slot, read next.
    let tag = unsafe { ati_tag(v) };
    check_last_error()?;
    // Tags as libtch's `ati_tag` numbers them.
    Ok(match tag {
        0 => Value::None,
        1 => {
            // SAFETY: tag 1 says `v` (live, owned by `owned`) holds a tensor; `ati_to_tensor` returns a new
            // `torch::Tensor` handle for us to own, or null with the error set.
            let t = unsafe { ati_to_tensor(v) };
            check_last_error()?;
            // SAFETY: `t` is that new handle, non-null past the error check; `from_ptr` takes ownership of
            // it.
            Value::Tensor(unsafe { tch::Tensor::from_ptr(t) })
        }
        // SAFETY: the tag says which scalar `v` (live, owned by `owned`) holds, and each arm calls that
        // kind's accessor, which returns a plain value.
        2 => Value::Float(unsafe { ati_to_double(v) }),
        3 => Value::Int(unsafe { ati_to_int(v) }),
        4 => Value::Bool(unsafe { ati_to_bool(v) } != 0),
        5 => {
            // SAFETY: tag 5 says `v` (live) is a tuple; `ati_to_tuple` checks `len` against its size (-1 from
            // a failed length gets 0 slots and a refusal) and writes that many new handles into `out`, the
            // `len`-slot buffer that `read_many` allocated and then owns.
            let len = unsafe { ati_tuple_length(v) };
            let items = read_many(len, |out| unsafe { ati_to_tuple(v, out, len) })?;
            Value::Tuple(items.iter().map(from_ivalue).collect::<Result<_>>()?)
        }
        6..=8 | 10 | 12 => {
            // Every list kind reads element-wise through the generic accessor.
            // SAFETY: tags 6-8, 10, 12 are lists and `v` is live; `ati_to_generic_list` checks `len` against
            // the list's size and writes that many new handles into `out`, the `len`-slot buffer that
            // `read_many` allocated and then owns.
            let len = unsafe { ati_length(v) };
            let items = read_many(len, |out| unsafe { ati_to_generic_list(v, out, len) })?;
            Value::List(None, items.iter().map(from_ivalue).collect::<Result<_>>()?)
        }
        9 => {
            // SAFETY: tag 9 says `v` (live, owned by `owned`) is a string; `ati_to_string` returns a
            // `strdup`ed copy that we own, or null with the error set, checked next.
            let p: *mut c_char = unsafe { ati_to_string(v) };
            check_last_error()?;
            // SAFETY: `p` is that copy, or null when `strdup` itself ran out of memory (which libtch
            // does not report: an error here); freed once, by `take_string`.
            let s = unsafe { super::take_string(p) };
            Value::Str(s.ok_or_else(|| anyhow::anyhow!("libtorch returned no string (out of memory)"))?)
        }
        13 => {
            // SAFETY: tag 13 says `v` (live) is a dict of `len` entries; `ati_to_generic_dict` checks that
            // count and writes a new key and a new value handle per entry into `out`, which `read_many` sized
            // to `len * 2` and then owns.
            let len = unsafe { ati_length(v) };
            let flat = read_many(len * 2, |out| unsafe { ati_to_generic_dict(v, out, len) })?;
            let mut entries = Vec::with_capacity(len as usize);
            for pair in flat.chunks(2) {
                entries.push((read(&pair[0], depth + 1)?, read(&pair[1], depth + 1)?));
            }
            // SAFETY: `v` is a live IValue (owned by `owned` for this whole call), as `dict_has_string_keys`
            // requires.
            let string_keys = unsafe { ffi::dict_has_string_keys(v) };
            let ty = string_keys.then(|| ("str".to_string(), "Any".to_string()));
            Value::Dict(ty, entries)
        }
        14 => bail!("TorchScript returned an object (a scripted class instance), which has no JS form"),
        other => bail!("TorchScript returned a value of unsupported kind (tag {other})"),
    })
}
