//! Typed arguments: one type per kind of JS argument an export takes (a shape, a dim, a dtype,
//! an operand, a tensor, ...), and the one place that reads each, with its own wording and code.
//!
//! Each type is what an export declares (`fn narrow(&self, dim: Dim, start: Int, length: Int)`),
//! so napi-derive writes the typings from the Rust signature: a type renders as its own name,
//! which index.d.ts declares in its hand-written part (`Shape`, `Dim`, `Operand`, ...), or, for the four
//! primitive ones (`Num`, `Int`, `Flag`, `Str`), as `number`/`boolean`/`string`
//! (scripts/build.js).
//!
//! Why the reading waits for the body: napi-rs converts a typed parameter before the export
//! runs, and when the value does not fit it *throws from native code* — the throw that
//! src/napi/outcome.rs shows can kill the process. So `FromNapiValue` here only takes the handle
//! (it cannot fail), and the export reads it inside its `Outcome`, in argument order: a value
//! that does not fit becomes this module's `InvalidArg`, returned and thrown from JS; a getter
//! or Proxy trap that throws while it is read stays the caller's own exception.
//!
//! A value read here lives as long as the call (N-API's handle scope): read it in the export's
//! body, never keep it.
#![allow(clippy::not_unsafe_ptr_arg_deref)]
use crate::error::bail_code;
use crate::error::Code;
use crate::napi::js::{self, Env, Val};
use anyhow::Result;
use napi::bindgen_prelude::{FromNapiValue, TypeName, ValueType};
use napi::sys::ValueType as Js;
use torch_core::{args, device};

/// A JS argument as napi-rs handed it over: the env of the call and the value.
#[derive(Clone, Copy)]
pub struct Raw {
    pub env: Env,
    pub val: Val,
}

macro_rules! arg_types {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name(Raw);

        impl FromNapiValue for $name {
            /// Takes the handle; the body reads it (see the module doc).
            unsafe fn from_napi_value(env: Env, val: Val) -> napi::Result<Self> {
                Ok($name(Raw { env, val }))
            }
        }

        impl TypeName for $name {
            fn type_name() -> &'static str {
                stringify!($name)
            }

            fn value_type() -> ValueType {
                ValueType::Unknown
            }
        }

        impl $name {
            /// The handle, for readers that live beside what they read (option bags).
            pub fn raw(&self) -> Raw {
                self.0
            }
        }
    )*};
}

arg_types! {
    /// A JS number (`number`).
    Num;
    /// A whole JS number (`number`): PyTorch's `int`.
    Int;
    /// A boolean (`boolean`).
    Flag;
    /// A string (`string`).
    Str;
    /// A dimension index of one tensor (`Dim`): negative counts from the end.
    Dim;
    /// One dimension or several (`Dims`), or null for all.
    Dims;
    /// Sizes (`Shape`): an array of sizes, or one size.
    Shape;
    /// Any value, read by `torch.text`'s own readers (src/text.rs), whose typings are
    /// hand-written in index.d.ts.
    Arg;
    /// Numbers and arrays of numbers given as rest arguments (`view(2, 3)`, `view([2, 3])`):
    /// index.js hands them over as one array.
    Sizes;
    /// A tensor, or a JS number or boolean that acts as a Python scalar would (`Operand`).
    Operand;
    /// A number or a boolean (`Scalar`): a fill value.
    Scalar;
    /// A tensor (`Tensor`).
    Tensor;
    /// An array of tensors (`Tensor[]`).
    Tensors;
    /// A device name (`Device`).
    Device;
    /// An options object for a factory, or a boolean meaning `requiresGrad` (`FactoryOptions`).
    FactoryOptions;
    /// `tensor()`'s options object (`TensorOptions`).
    TensorOptions;
    /// Data for `tensor()` (`TensorData`).
    TensorData;
    /// What `Tensor.to` takes (`ToTarget`): a device, a dtype, or both in an object.
    ToTarget;
    /// Where a model or an image comes from (`Source`): a path, or the file's bytes.
    Source;
    /// Memory `fromBuffer` borrows (`BufferData`): a TypedArray, DataView or (via index.js)
    /// an ArrayBuffer.
    BufferData;
    /// `fromBuffer`'s options object (`FromBufferOptions`).
    FromBufferOptions;
    /// `ScriptModule`'s load options (`ModuleOptions`, read in script_module).
    ModuleOptions;
    /// `AOTModule`'s load options (`AotModuleOptions`, read in aot_module).
    AotModuleOptions;
    /// `torch.image` options (`ImageOptions`, read in image).
    ImageOptions;
    /// `torch.image.encode`'s options (`EncodeOptions`).
    EncodeOptions;
    /// `torch.image.decode`'s options (`DecodeOptions`).
    DecodeOptions;
    /// An image format name (`ImageFormat`).
    ImageFormat;
    /// Image sources (`Source[]`).
    Sources;
    /// Inputs given as rest arguments, maybe ending in `{signal}` (index.js hands them over as
    /// one array).
    Inputs;
}

/// `v` read by `get` when its JS type is `want`, else InvalidArg naming `what` and `noun`.
fn primitive<T>(
    (env, v): (Env, Val),
    want: napi::sys::napi_valuetype,
    noun: &str,
    what: &str,
    get: fn(Env, Val) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    if js::type_of(env, v)? != want {
        bail_code!(
            Code::InvalidArg,
            "{what}: expected {noun}, got {}",
            js::describe(env, v)
        );
    }
    get(env, v)
}

/// A number, or InvalidArg naming `what`.
pub fn number(env: Env, v: Val, what: &str) -> anyhow::Result<f64> {
    primitive((env, v), Js::napi_number, "a number", what, js::number)
}

/// A string, or InvalidArg naming `what`.
pub fn string(env: Env, v: Val, what: &str) -> anyhow::Result<String> {
    primitive((env, v), Js::napi_string, "a string", what, js::string)
}

/// A boolean, or InvalidArg naming `what`.
pub fn boolean(env: Env, v: Val, what: &str) -> anyhow::Result<bool> {
    primitive((env, v), Js::napi_boolean, "a boolean", what, js::boolean)
}

/// A shape given as an array of sizes or a single size.
pub fn shape(env: Env, v: Val, what: &str) -> anyhow::Result<Vec<i64>> {
    args::shape(&number_list(env, v, "sizes", what)?, what)
}

/// A number or an array of numbers, as a list.
pub fn numbers(env: Env, v: Val, what: &str) -> anyhow::Result<Vec<f64>> {
    number_list(env, v, "numbers", what)
}

/// One number, or an array of them (`noun` names them in the error); elements are named
/// `what[i]`.
fn number_list(env: Env, v: Val, noun: &str, what: &str) -> anyhow::Result<Vec<f64>> {
    if js::type_of(env, v)? == Js::napi_number {
        return Ok(vec![js::number(env, v)?]);
    }
    array_of(env, v, noun, what, |item, what| number(env, item, what))
}

/// The items of an array, each read by `read` (which names it `what[i]`), or InvalidArg saying
/// an array of `noun` was expected.
pub fn array_of<T>(
    env: Env,
    v: Val,
    noun: &str,
    what: &str,
    read: impl Fn(Val, &str) -> Result<T>,
) -> Result<Vec<T>> {
    if !js::is_array(env, v)? {
        bail_code!(
            Code::InvalidArg,
            "{what}: expected an array of {noun}, got {}",
            js::describe(env, v)
        );
    }
    (0..js::array_len(env, v)?)
        .map(|i| read(js::element(env, v, i)?, &format!("{what}[{i}]")))
        .collect()
}

/// Reads an argument that needs nothing but its name.
pub trait Read {
    type Out;
    fn read(&self, what: &str) -> Result<Self::Out>;
}

/// Reads an optional argument: `None` when it was left out (or null / undefined).
pub trait ReadOpt {
    type Out;
    fn read(&self, what: &str) -> Result<Option<Self::Out>>;
}

impl<T: Read> ReadOpt for Option<T> {
    type Out = T::Out;
    fn read(&self, what: &str) -> Result<Option<T::Out>> {
        self.as_ref().map(|v| v.read(what)).transpose()
    }
}

macro_rules! read_with {
    ($name:ident -> $out:ty, |$env:ident, $val:ident, $what:ident| $body:expr) => {
        impl Read for $name {
            type Out = $out;
            fn read(&self, $what: &str) -> Result<$out> {
                let Raw {
                    env: $env,
                    val: $val,
                } = self.0;
                $body
            }
        }
    };
}

read_with!(Num -> f64, |env, val, what| number(env, val, what));
read_with!(Int -> i64, |env, val, what| args::integer(number(env, val, what)?, what));
read_with!(Flag -> bool, |env, val, what| boolean(env, val, what));
read_with!(Str -> String, |env, val, what| string(env, val, what));
read_with!(Shape -> Vec<i64>, |env, val, what| shape(env, val, what));
read_with!(Sizes -> Vec<f64>, |env, val, what| numbers(env, val, what));
read_with!(Device -> tch::Device, |env, val, what| device::parse(&string(env, val, what)?));
impl Dim {
    /// The dimension, in `0..ndim` (PyTorch's wrapping of negative dims).
    pub fn read(&self, ndim: usize, what: &str) -> Result<i64> {
        let Raw { env, val } = self.0;
        args::dim(number(env, val, what)?, ndim, what)
    }
}

impl Dims {
    /// The dimensions, or None for null (all of them).
    pub fn read(&self, ndim: usize, what: &str) -> Result<Option<Vec<i64>>> {
        let Raw { env, val } = self.0;
        {
            if js::is_nullish(env, val)? {
                return Ok(None);
            }
            let list = if js::is_array(env, val)? {
                js::elements(env, val)?
            } else {
                vec![val]
            };
            let dims = list
                .into_iter()
                .map(|d| args::dim(number(env, d, what)?, ndim, what))
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(Some(dims))
        }
    }
}

impl Scalar {
    /// The value and whether it was a boolean (`full`'s and `fill_`'s default dtype).
    pub fn read(&self, what: &str) -> Result<(f64, bool)> {
        let Raw { env, val } = self.0;
        match js::type_of(env, val)? {
            Js::napi_boolean => Ok((if js::boolean(env, val)? { 1.0 } else { 0.0 }, true)),
            Js::napi_number => Ok((js::number(env, val)?, false)),
            _ => bail_code!(
                Code::InvalidArg,
                "{what}: expected a number or a boolean, got {}",
                js::describe(env, val)
            ),
        }
    }
}

impl Dim {
    /// An optional dimension: `default` (which may be negative, as -1 for the last) when left
    /// out.
    pub fn or(dim: Option<Dim>, default: f64, ndim: usize, what: &str) -> Result<i64> {
        match dim {
            Some(d) => d.read(ndim, what),
            None => args::dim(default, ndim, what),
        }
    }
}

impl Shape {
    /// Whether the sizes came as an array (`split([2, 3])`) rather than one size (`split(2)`).
    pub fn is_list(&self) -> bool {
        js::is_array(self.0.env, self.0.val).unwrap_or(false)
    }
}

impl Dims {
    /// Optional dims: None (all of them) when left out or null.
    pub fn or_all(dims: Option<Dims>, ndim: usize, what: &str) -> Result<Option<Vec<i64>>> {
        dims.map_or(Ok(None), |d| d.read(ndim, what))
    }
}
