//! Small raw N-API helpers for reading loosely typed JS arguments (nested arrays, option bags,
//! TypedArrays, Maps) with our own error messages instead of napi-rs's generic conversion
//! errors. Every function takes the `napi_env` of the current call.
//!
//! `napi_env` and `napi_value` are opaque handles that Rust never dereferences: N-API checks
//! them and answers a bad one with an error status, which these helpers turn into errors.
#![allow(clippy::not_unsafe_ptr_arg_deref)]
use crate::error::bail_code;
use crate::error::Code;
use anyhow::{anyhow, Result};
use napi::bindgen_prelude::{validate_type_tag, TypeTag};
use napi::sys;
use std::ffi::CString;
use std::ptr;
use std::sync::OnceLock;

pub type Env = sys::napi_env;
pub type Val = sys::napi_value;

/// A JS exception is pending: JS code that a call ran (a getter, a Proxy trap, a setter) threw.
///
/// The rule (node-addon-api #1724): from here, return to JS at once — no further N-API calls,
/// no allocation of JS values. A collection could otherwise run a finalizer during GC, and Node
/// would see the stale exception and run JS inside GC (V8 fatal "AllowJavascriptExecution").
/// napi-rs rethrows the pending exception itself when the export returns its error.
#[derive(Debug)]
pub struct JsThrew;

impl std::fmt::Display for JsThrew {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JS exception is pending")
    }
}

impl std::error::Error for JsThrew {}

/// Whether `err` stands for a pending JS exception (see [`JsThrew`]).
pub fn threw(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.is::<JsThrew>())
}

/// Calls an N-API function whose last argument is its out-parameter (starting as `init`) and
/// returns what it wrote, or the error `ok` makes of its status.
macro_rules! out {
    ($what:literal, $init:expr, $f:ident($($arg:expr),* $(,)?)) => {{
        let mut out = $init;
        // SAFETY: a plain N-API call on the JS thread; N-API checks the handles, and `out`
        // lives across the call.
        ok(unsafe { sys::$f($($arg,)* &mut out) }, $what).map(|()| out)
    }};
}

fn ok(status: sys::napi_status, what: &str) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else if status == sys::Status::napi_pending_exception {
        Err(JsThrew.into())
    } else {
        Err(anyhow!("N-API call failed ({what}, status {status})"))
    }
}

/// Takes the pending JS exception (the error a getter or Proxy threw), clearing it; None when
/// nothing is pending. Allocates nothing on the JS heap.
pub fn take_exception(env: Env) -> Option<Val> {
    let mut pending = false;
    // SAFETY: plain N-API call on the JS thread that owns `env`; N-API validates `env`, `pending` lives
    // across the call, and this call is allowed while an exception is pending.
    if unsafe { sys::napi_is_exception_pending(env, &mut pending) } != sys::Status::napi_ok || !pending {
        return None;
    }
    let mut out = ptr::null_mut();
    // SAFETY: as above; this call is made for a pending exception and writes one handle into `out`, which
    // lives across the call.
    let status = unsafe { sys::napi_get_and_clear_last_exception(env, &mut out) };
    (status == sys::Status::napi_ok && !out.is_null()).then_some(out)
}

/// JS `typeof`, in N-API's terms.
pub fn type_of(env: Env, v: Val) -> Result<sys::napi_valuetype> {
    out!("typeof", 0, napi_typeof(env, v))
}

pub fn is_nullish(env: Env, v: Val) -> Result<bool> {
    let t = type_of(env, v)?;
    Ok(t == sys::ValueType::napi_undefined || t == sys::ValueType::napi_null)
}

/// The classes `describe` names (`a Tensor`): their napi-rs type tags, registered at init.
static NAMED_CLASSES: OnceLock<Vec<(sys::napi_type_tag, &'static str)>> = OnceLock::new();

/// Registers the classes `describe` names, by type tag (once per process).
pub fn name_classes(classes: Vec<(sys::napi_type_tag, &'static str)>) {
    let _ = NAMED_CLASSES.set(classes);
}

/// The registered class an object is an instance of (by its type tag: no JS runs).
fn class_name(env: Env, v: Val) -> Option<&'static str> {
    NAMED_CLASSES.get()?.iter().find_map(|(tag, name)| {
        let mut matches = false;
        // SAFETY: a plain N-API call on the JS thread; `tag` and `matches` live across it.
        let status = unsafe { sys::napi_check_object_type_tag(env, v, tag, &mut matches) };
        (status == sys::Status::napi_ok && matches).then_some(*name)
    })
}

/// The `T` a JS object wraps (a napi-rs class instance, checked by its type tag as napi-rs's
/// generated code does), or None.
///
/// # Safety
/// The reference must not outlive the current N-API call: the JS object owns the `T`, and
/// only the call's handle scope keeps that object alive.
unsafe fn unwrap<'a, T: TypeTag>(env: Env, v: Val, class: &str) -> Option<&'a T> {
    let mut wrapped: *mut std::ffi::c_void = ptr::null_mut();
    // SAFETY: a plain N-API call on the JS thread; N-API checks the handles.
    let status = unsafe { sys::napi_unwrap(env, v, &mut wrapped) };
    if status != sys::Status::napi_ok || wrapped.is_null() {
        return None;
    }
    // SAFETY: as above.
    unsafe { validate_type_tag(env, v, &T::type_tag(), class) }.ok()?;
    // SAFETY: the type tag says napi-rs wrapped a `T` here; the caller bounds the borrow.
    Some(unsafe { &*(wrapped as *const T) })
}

/// Runs `f` on the `T` (a napi-rs class named `class`) that `v` wraps, borrowed for `f` alone;
/// None when `v` is not one.
pub fn with_wrapped<T: TypeTag, R>(env: Env, v: Val, class: &str, f: impl FnOnce(&T) -> R) -> Option<R> {
    // SAFETY: the borrow cannot leave `f`, which runs within this call.
    unsafe { unwrap::<T>(env, v, class) }.map(f)
}

/// How a value reads in an error message (`torch_core::args::JsKind`'s words): `a string`,
/// `number 2.5`, `an array`, `a Tensor`. An object's class is named when it is one of the
/// addon's (by its type tag) or when `class` (read by lib/errors.js, where reading a
/// constructor may run JS) says it; otherwise `an object`.
pub fn describe_as(env: Env, v: Val, class: Option<&str>) -> String {
    use torch_core::args::JsKind;
    let kind = match type_of(env, v) {
        Ok(sys::ValueType::napi_number) => JsKind::Number(number(env, v).unwrap_or(f64::NAN)),
        Ok(sys::ValueType::napi_string) => JsKind::String,
        Ok(sys::ValueType::napi_boolean) => JsKind::Boolean,
        Ok(sys::ValueType::napi_undefined) => JsKind::Undefined,
        Ok(sys::ValueType::napi_null) => JsKind::Null,
        Ok(sys::ValueType::napi_bigint) => JsKind::BigInt,
        Ok(sys::ValueType::napi_symbol) => JsKind::Symbol,
        Ok(sys::ValueType::napi_function) => JsKind::Function,
        Ok(sys::ValueType::napi_object) if is_array(env, v).unwrap_or(false) => JsKind::Array,
        Ok(sys::ValueType::napi_object) => {
            let typed_array = with_typed_array(env, v, |view| Ok(view.type_name)).ok().flatten();
            match class_name(env, v).or(typed_array).or(class) {
                Some("Array") => JsKind::Array,
                Some(name) if !name.is_empty() => JsKind::Instance(name),
                _ => JsKind::Object,
            }
        }
        _ => JsKind::Object,
    };
    kind.to_string()
}

/// `describe_as` with no class read in JS: what native readers say.
pub fn describe(env: Env, v: Val) -> String {
    describe_as(env, v, None)
}

pub fn number(env: Env, v: Val) -> Result<f64> {
    out!("number", 0.0, napi_get_value_double(env, v))
}

pub fn boolean(env: Env, v: Val) -> Result<bool> {
    out!("boolean", false, napi_get_value_bool(env, v))
}

pub fn bigint(env: Env, v: Val, what: &str) -> Result<i64> {
    let (mut out, mut lossless) = (0i64, false);
    ok(
        // SAFETY: plain N-API call on the JS thread that owns `env`; N-API validates the handles (a
        // non-BigInt is `napi_bigint_expected`), and `out` and `lossless` live across the call.
        unsafe { sys::napi_get_value_bigint_int64(env, v, &mut out, &mut lossless) },
        "bigint",
    )?;
    if !lossless {
        bail_code!(Code::InvalidArg, "{what}: BigInt out of int64 range");
    }
    Ok(out)
}

pub fn string(env: Env, v: Val) -> Result<String> {
    let len = out!(
        "string",
        0usize,
        napi_get_value_string_utf8(env, v, ptr::null_mut(), 0)
    )?;
    let mut buf = vec![0u8; len + 1];
    let written = out!(
        "string",
        0usize,
        napi_get_value_string_utf8(env, v, buf.as_mut_ptr() as *mut _, len + 1)
    )?;
    buf.truncate(written);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Strings up to this many code units are read through `string_exact`'s fast path (longer ones
/// would make its buffer of 3 bytes per unit costly).
const SHORT_STRING: usize = 1 << 20;

/// A string read exactly: as UTF-16 code units, so that a lone surrogate (which `string`'s
/// UTF-8 read turns into U+FFFD without a word) is an InvalidArg naming `what` and its index.
pub fn string_exact(env: Env, v: Val, what: &str) -> Result<String> {
    let len = out!(
        "string",
        0usize,
        napi_get_value_string_utf16(env, v, ptr::null_mut(), 0)
    )?;
    // Fast path (one pass in V8, no decoding here): as UTF-8, in a buffer that always fits
    // (3 bytes per code unit at most). V8 writes a lone surrogate as U+FFFD, so a text without
    // U+FFFD in it is exact; one with it is read again below, which says where the surrogate is.
    if len <= SHORT_STRING {
        let mut buf = vec![0u8; 3 * len + 1];
        let written = out!(
            "string",
            0usize,
            napi_get_value_string_utf8(env, v, buf.as_mut_ptr() as *mut _, buf.len())
        )?;
        buf.truncate(written);
        if buf.capacity() > 4096 && buf.capacity() > 2 * written {
            buf.shrink_to_fit();
        }
        if let Ok(text) = String::from_utf8(buf) {
            if !text.contains('\u{FFFD}') {
                return Ok(text);
            }
        }
    }
    let mut units = vec![0u16; len + 1];
    let written = out!(
        "string",
        0usize,
        napi_get_value_string_utf16(env, v, units.as_mut_ptr(), len + 1)
    )?;
    units.truncate(written);
    let mut text = String::with_capacity(units.len());
    let mut at = 0usize;
    for c in char::decode_utf16(units.iter().copied()) {
        match c {
            Ok(c) => {
                text.push(c);
                at += c.len_utf16();
            }
            Err(e) => bail_code!(
                Code::InvalidArg,
                "{what}: a lone surrogate (0x{:04X}) at index {at}: not valid Unicode text",
                e.unpaired_surrogate()
            ),
        }
    }
    Ok(text)
}

pub fn is_array(env: Env, v: Val) -> Result<bool> {
    out!("is_array", false, napi_is_array(env, v))
}

pub fn array_len(env: Env, v: Val) -> Result<u32> {
    out!("array length", 0u32, napi_get_array_length(env, v))
}

pub fn element(env: Env, v: Val, i: u32) -> Result<Val> {
    out!("element", ptr::null_mut(), napi_get_element(env, v, i))
}

/// The elements of an array, in order.
pub fn elements(env: Env, v: Val) -> Result<Vec<Val>> {
    (0..array_len(env, v)?).map(|i| element(env, v, i)).collect()
}

/// A property, or None when it is undefined or null.
pub fn property(env: Env, obj: Val, name: &str) -> Result<Option<Val>> {
    let key = CString::new(name)?;
    let out = out!(
        "property",
        ptr::null_mut(),
        napi_get_named_property(env, obj, key.as_ptr())
    )?;
    Ok(if is_nullish(env, out)? { None } else { Some(out) })
}

/// The own enumerable string keys of a plain object, in insertion order.
pub fn keys(env: Env, obj: Val) -> Result<Vec<String>> {
    let names = out!("keys", ptr::null_mut(), napi_get_property_names(env, obj))?;
    (0..array_len(env, names)?)
        .map(|i| string(env, element(env, names, i)?))
        .collect()
}

/// An object's own property names (not its prototype's), as a JS array.
fn own_names(
    env: Env,
    obj: Val,
    filter: sys::napi_key_filter,
    conversion: sys::napi_key_conversion,
) -> Result<Val> {
    let mut names = ptr::null_mut();
    ok(
        // SAFETY: plain N-API call on the JS thread that owns `env`; N-API validates `obj`, the mode, filter
        // and conversion are its own enum values, and `names` lives across the call.
        unsafe {
            sys::napi_get_all_property_names(
                env,
                obj,
                sys::KeyCollectionMode::own_only,
                filter,
                conversion,
                &mut names,
            )
        },
        "own keys",
    )?;
    Ok(names)
}

/// The own enumerable string keys of an object (not its prototype's).
pub fn own_keys(env: Env, obj: Val) -> Result<Vec<String>> {
    let filter = sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols;
    let names = own_names(env, obj, filter, sys::KeyConversion::numbers_to_strings)?;
    (0..array_len(env, names)?)
        .map(|i| string(env, element(env, names, i)?))
        .collect()
}

/// Refuses an options object with a key outside `accepted` (a misspelt or unsupported option
/// would otherwise be silently ignored): InvalidArg naming the key and listing the accepted ones.
pub fn check_keys(env: Env, obj: Val, accepted: &[&str], what: &str) -> Result<()> {
    if let Some(unknown) = own_keys(env, obj)?
        .into_iter()
        .find(|k| !accepted.contains(&k.as_str()))
    {
        bail_code!(
            Code::InvalidArg,
            "{what}: unknown option '{unknown}'; accepted: {}",
            accepted.join(", ")
        );
    }
    Ok(())
}

pub fn global_property(env: Env, name: &str) -> Result<Val> {
    let global = out!("global", ptr::null_mut(), napi_get_global(env))?;
    property(env, global, name)?.ok_or_else(|| anyhow!("globalThis.{name} is missing"))
}

/// `obj[method](...args)`.
pub fn call_method(env: Env, obj: Val, method: &str, args: &[Val]) -> Result<Val> {
    let f = property(env, obj, method)?.ok_or_else(|| anyhow!("no method {method}"))?;
    let mut out = ptr::null_mut();
    ok(
        // SAFETY: plain N-API call on the JS thread that owns `env`; N-API checks that `f` is a function and
        // reads `args.len()` handles from `args`, borrowed across the call. It runs JS: a throw comes back as
        // `napi_pending_exception`, which `ok` turns into `JsThrew`.
        unsafe { sys::napi_call_function(env, obj, f, args.len(), args.as_ptr(), &mut out) },
        method,
    )?;
    Ok(out)
}

pub fn is_map(env: Env, v: Val) -> Result<bool> {
    is_instance_of(env, v, "Map")
}

/// `v instanceof globalThis[class_name]`.
pub fn is_instance_of(env: Env, v: Val, class_name: &str) -> Result<bool> {
    let ctor = global_property(env, class_name)?;
    out!("instanceof", false, napi_instanceof(env, v, ctor))
}

/// `Array.from(v)`: the items of an iterable (a Map's `[key, value]` pairs, a Set's values).
pub fn array_from(env: Env, v: Val) -> Result<Vec<Val>> {
    let array_ctor = global_property(env, "Array")?;
    let items = call_method(env, array_ctor, "from", &[v])?;
    (0..array_len(env, items)?)
        .map(|i| element(env, items, i))
        .collect()
}

/// An object whose prototype is `Object.prototype` or null (not a class instance).
pub fn is_plain_object(env: Env, v: Val) -> Result<bool> {
    let proto = out!("prototype", ptr::null_mut(), napi_get_prototype(env, v))?;
    if type_of(env, proto)? == sys::ValueType::napi_null {
        return Ok(true);
    }
    let object_ctor = global_property(env, "Object")?;
    let object_proto =
        property(env, object_ctor, "prototype")?.ok_or_else(|| anyhow!("no Object.prototype"))?;
    out!(
        "strict equals",
        false,
        napi_strict_equals(env, proto, object_proto)
    )
}

/// The values of every own property of an object: enumerable or not, string- or symbol-keyed.
pub fn own_property_values(env: Env, obj: Val) -> Result<Vec<Val>> {
    let keys = own_names(
        env,
        obj,
        sys::KeyFilter::all_properties,
        sys::KeyConversion::keep_numbers,
    )?;
    (0..array_len(env, keys)?)
        .map(|i| {
            let key = element(env, keys, i)?;
            out!("property", ptr::null_mut(), napi_get_property(env, obj, key))
        })
        .collect()
}

/// `[...map]`: the entries of a Map as `[key, value]` pairs.
pub fn map_entries(env: Env, map: Val) -> Result<Vec<(Val, Val)>> {
    array_from(env, map)?
        .into_iter()
        .map(|pair| Ok((element(env, pair, 0)?, element(env, pair, 1)?)))
        .collect()
}

pub fn new_map(env: Env, entries: Vec<(Val, Val)>) -> Result<Val> {
    let ctor = global_property(env, "Map")?;
    let map = out!(
        "new Map",
        ptr::null_mut(),
        napi_new_instance(env, ctor, 0, ptr::null())
    )?;
    for (k, v) in entries {
        call_method(env, map, "set", &[k, v])?;
    }
    Ok(map)
}

pub fn new_array(env: Env, items: Vec<Val>) -> Result<Val> {
    let arr = out!(
        "array",
        ptr::null_mut(),
        napi_create_array_with_length(env, items.len())
    )?;
    let keys = (0..items.len()).map(|i| i.to_string());
    define_data_properties(env, arr, keys.zip(items))?;
    Ok(arr)
}

/// A JS array of numbers: `Array.from(new Float64Array(values))`, which defines the elements
/// (no `Array.prototype` setter runs) in one builtin call, several times faster than defining
/// them one by one.
pub fn new_number_array(env: Env, values: &[f64]) -> Result<Val> {
    // SAFETY: the f64s' own memory, read as the native-endian bytes a Float64Array holds (no
    // intermediate copy on toArray's per-row path).
    let bytes =
        unsafe { std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values)) };
    let floats = new_typed_array(env, "Float64Array", bytes)?;
    let array_ctor = global_property(env, "Array")?;
    call_method(env, array_ctor, "from", &[floats])
}

/// A Uint32Array holding a copy of `values`.
pub fn new_u32_array(env: Env, values: &[u32]) -> Result<Val> {
    // SAFETY: the u32s' own memory, read as the native-endian bytes a Uint32Array holds.
    let bytes =
        unsafe { std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values)) };
    new_typed_array(env, "Uint32Array", bytes)
}

pub fn new_object(env: Env, entries: Vec<(String, Val)>) -> Result<Val> {
    let obj = out!("object", ptr::null_mut(), napi_create_object(env))?;
    define_data_properties(env, obj, entries)?;
    Ok(obj)
}

/// Defines own data properties (writable, enumerable, configurable), as an object literal or
/// `JSON.parse` does: a setter on `Array.prototype` or `Object.prototype` is not invoked (a
/// plain assignment would run it), and a `"__proto__"` key becomes an own property instead of
/// replacing the prototype.
fn define_data_properties(
    env: Env,
    obj: Val,
    entries: impl IntoIterator<Item = (String, Val)>,
) -> Result<()> {
    let entries = entries
        .into_iter()
        .map(|(k, v)| Ok((CString::new(k)?, v)))
        .collect::<Result<Vec<_>>>()?;
    let descriptors: Vec<sys::napi_property_descriptor> = entries
        .iter()
        .map(|(key, value)| sys::napi_property_descriptor {
            utf8name: key.as_ptr(),
            name: ptr::null_mut(),
            method: None,
            getter: None,
            setter: None,
            value: *value,
            attributes: sys::PropertyAttributes::writable
                | sys::PropertyAttributes::enumerable
                | sys::PropertyAttributes::configurable,
            data: ptr::null_mut(),
        })
        .collect();
    if descriptors.is_empty() {
        return Ok(());
    }
    ok(
        // SAFETY: plain N-API call on the JS thread that owns `env`; N-API reads `descriptors.len()`
        // descriptors, whose `utf8name`s point into the C strings of `entries`; both vectors live until this
        // function returns, and the values are handles of this env.
        unsafe { sys::napi_define_properties(env, obj, descriptors.len(), descriptors.as_ptr()) },
        "define properties",
    )
}

pub fn new_number(env: Env, x: f64) -> Result<Val> {
    out!("number", ptr::null_mut(), napi_create_double(env, x))
}

pub fn new_bool(env: Env, b: bool) -> Result<Val> {
    out!("boolean", ptr::null_mut(), napi_get_boolean(env, b))
}

pub fn new_string(env: Env, s: &str) -> Result<Val> {
    out!(
        "string",
        ptr::null_mut(),
        napi_create_string_utf8(env, s.as_ptr() as *const _, s.len() as isize)
    )
}

pub fn null(env: Env) -> Result<Val> {
    out!("null", ptr::null_mut(), napi_get_null(env))
}

/// A file path (a string) or a file's bytes (a Buffer or Uint8Array, copied), or an InvalidArg
/// naming `what` and saying whose bytes are expected (`bytes_of`: "a .pt file's", ...).
pub fn source(env: Env, v: Val, what: &str, bytes_of: &str) -> Result<torch_core::args::Source> {
    use torch_core::args::Source;
    if type_of(env, v)? == sys::ValueType::napi_string {
        return Ok(Source::Path(string(env, v)?));
    }
    let bytes = with_typed_array(env, v, |view| {
        Ok((view.type_name == "Uint8Array").then(|| view.bytes.to_vec()))
    })?;
    match bytes.flatten() {
        Some(bytes) => Ok(Source::Bytes(bytes)),
        None => bail_code!(
            Code::InvalidArg,
            "{what}: expected a file path or a Buffer/Uint8Array with {bytes_of} bytes, got {}",
            describe(env, v)
        ),
    }
}

/// A TypedArray's element type name (`Float32Array`) and the bytes it views.
pub struct TypedArrayView<'a> {
    pub type_name: &'static str,
    pub bytes: &'a [u8],
    pub len: usize,
}

const TYPED_ARRAY_NAMES: [&str; 11] = [
    "Int8Array",
    "Uint8Array",
    "Uint8ClampedArray",
    "Int16Array",
    "Uint16Array",
    "Int32Array",
    "Uint32Array",
    "Float32Array",
    "Float64Array",
    "BigInt64Array",
    "BigUint64Array",
];
const TYPED_ARRAY_ELEMENT_SIZES: [usize; 11] = [1, 1, 1, 2, 2, 4, 4, 4, 8, 8, 8];

/// Whether `v` is a TypedArray (a Buffer is a Uint8Array).
pub fn is_typed_array(env: Env, v: Val) -> Result<bool> {
    let mut is = false;
    ok(
        // SAFETY: plain N-API call on the JS thread; N-API checks the handles.
        unsafe { sys::napi_is_typedarray(env, v, &mut is) },
        "is_typedarray",
    )?;
    Ok(is)
}

/// The ArrayBuffer (or SharedArrayBuffer) a TypedArray views.
pub fn typed_array_buffer(env: Env, v: Val) -> Result<Val> {
    let mut buf = ptr::null_mut();
    ok(
        // SAFETY: as above; the other outputs are not asked for (null).
        unsafe {
            sys::napi_get_typedarray_info(
                env,
                v,
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                &mut buf,
                ptr::null_mut(),
            )
        },
        "typedarray info",
    )?;
    Ok(buf)
}

/// Runs `f` on a TypedArray's element type and bytes; None when `v` is not one. The bytes are
/// JS memory, borrowed for `f` alone: `f` must not run JS (a getter could detach or shrink
/// the buffer under the borrow), so read every other argument before.
pub fn with_typed_array<R>(
    env: Env,
    v: Val,
    f: impl FnOnce(&TypedArrayView<'_>) -> Result<R>,
) -> Result<Option<R>> {
    // SAFETY: the view does not leave `f`, which runs within this call.
    match unsafe { typed_array(env, v)? } {
        Some(view) => f(&view).map(Some),
        None => Ok(None),
    }
}

/// Reads a TypedArray; None when `v` is not one.
///
/// # Safety
/// The bytes borrow JS memory: the view must not outlive the current call, and no JS may run
/// while it is held.
unsafe fn typed_array<'a>(env: Env, v: Val) -> Result<Option<TypedArrayView<'a>>> {
    let is = out!("is_typedarray", false, napi_is_typedarray(env, v))?;
    if !is {
        return Ok(None);
    }
    let (mut ty, mut len, mut data) = (0, 0usize, ptr::null_mut());
    ok(
        // SAFETY: plain N-API call on the JS thread that owns `env`; `v` is a TypedArray (checked above) and
        // the out-parameters are locals (or null: not asked for). Node reads `data` off the ArrayBuffer (`array->Buffer()`), which
        // moves an on-heap array's bytes off V8's heap, so GC will not move them.
        unsafe {
            sys::napi_get_typedarray_info(
                env,
                v,
                &mut ty,
                &mut len,
                &mut data,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        },
        "typedarray info",
    )?;
    let idx = ty as usize;
    let type_name = *TYPED_ARRAY_NAMES
        .get(idx)
        .ok_or_else(|| anyhow!("unknown TypedArray type {ty}"))?;
    let nbytes = len * TYPED_ARRAY_ELEMENT_SIZES[idx];
    let bytes = if nbytes == 0 {
        &[][..]
    } else {
        // SAFETY: N-API's `data` is the array's first element, `len` elements of this type long, non-null as
        // `nbytes > 0`; the `# Safety` contract (no JS while the view lives, within this call) keeps it from
        // being detached or shrunk. A SharedArrayBuffer may still be written by another worker meanwhile
        // (callers only copy the bytes or pass them on as a pointer).
        unsafe { std::slice::from_raw_parts(data as *const u8, nbytes) }
    };
    Ok(Some(TypedArrayView {
        type_name,
        bytes,
        len,
    }))
}

/// A new TypedArray of `type_name` holding a copy of `bytes`.
pub fn new_typed_array(env: Env, type_name: &str, bytes: &[u8]) -> Result<Val> {
    let idx = TYPED_ARRAY_NAMES
        .iter()
        .position(|n| *n == type_name)
        .ok_or_else(|| anyhow!("no TypedArray {type_name}"))?;
    let mut data = ptr::null_mut();
    let buffer = out!(
        "arraybuffer",
        ptr::null_mut(),
        napi_create_arraybuffer(env, bytes.len(), &mut data)
    )?;
    if !bytes.is_empty() {
        // SAFETY: `data` starts the `bytes.len()`-byte backing store `napi_create_arraybuffer` just allocated
        // (non-null, as `bytes` is not empty), a fresh block that cannot overlap `bytes`; no JS has run
        // since, so nothing has detached it.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), data as *mut u8, bytes.len()) };
    }
    let mut out = ptr::null_mut();
    let len = bytes.len() / TYPED_ARRAY_ELEMENT_SIZES[idx];
    ok(
        // SAFETY: plain N-API call on the JS thread that owns `env`; `buffer` is the ArrayBuffer just made,
        // `idx` a valid `napi_typedarray_type` (TYPED_ARRAY_NAMES follows that enum), and `len` elements fit
        // in it from offset 0 (N-API range-checks anyway); `out` lives across the call.
        unsafe { sys::napi_create_typedarray(env, idx as i32, len, buffer, 0, &mut out) },
        "typedarray",
    )?;
    Ok(out)
}

/// A TypedArray of `type_name` with `len` elements over an existing ArrayBuffer.
pub fn typed_array_over(env: Env, type_name: &str, buffer: Val, len: usize) -> Result<Val> {
    let idx = TYPED_ARRAY_NAMES
        .iter()
        .position(|n| *n == type_name)
        .ok_or_else(|| anyhow!("no TypedArray {type_name}"))?;
    out!(
        "typedarray",
        ptr::null_mut(),
        napi_create_typedarray(env, idx as i32, len, buffer, 0)
    )
}

/// A Rust value as its JS object (a napi-rs class instance, a typed result), on the JS thread.
pub fn value_of<T: napi::bindgen_prelude::ToNapiValue>(env: Env, v: T) -> Result<Val> {
    // SAFETY: `env` is the env of the N-API callback running on this JS thread (every caller
    // is glue called from one); napi-rs checks the statuses.
    unsafe { T::to_napi_value(env, v) }.map_err(|e| anyhow!("{e}"))
}

/// The running Node's major version (0 when N-API cannot say).
pub fn node_major(env: Env) -> u32 {
    let mut version: *const sys::napi_node_version = ptr::null();
    // SAFETY: a plain N-API call on the JS thread; the struct it points to is static in Node.
    let status = unsafe { sys::napi_get_node_version(env, &mut version) };
    match status == sys::Status::napi_ok && !version.is_null() {
        // SAFETY: checked non-null; Node keeps it for the life of the process.
        true => unsafe { (*version).major },
        false => 0,
    }
}

/// Tells V8 that native memory grew or shrank by `delta` bytes. A basic call: allowed inside a
/// finalizer that runs during GC.
pub fn adjust_external_memory(env: Env, delta: i64) {
    let mut out = 0i64;
    // SAFETY: a basic N-API call with this thread's env.
    unsafe { sys::napi_adjust_external_memory(env, delta, &mut out) };
}
