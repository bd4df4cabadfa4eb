//! Option bags, one declaration each. [`js_options!`] turns one list of fields into
//! - the TypeScript interface (a `#[napi(object)]` struct napi-derive renders into index.d.ts,
//!   with each field's doc comment and type),
//! - the accepted keys, refused with `unknown option 'x'; accepted: …` when a key is misspelt,
//! - the reader: every present key read by its field type's [`OptionValue`] inside the
//!   export's body (never napi-rs's own conversion, which throws from native code; see
//!   `crate::napi::outcome`).
//!
//! ```ignore
//! js_options! {
//!     /// Options for loading a `.pt2` package.
//!     pub struct AotLoad as JsAotModuleOptions "AotModuleOptions" {
//!         /// `'cpu'` (default) or `'cuda:N'`.
//!         device "device": tch::Device as "Device",
//!     }
//! }
//! let o = AotLoad::read(env, options, "options")?; // o.device: Option<tch::Device>
//! ```
//! A value that needs checks across fields (a range, two keys given together) is checked by
//! the caller after `read`, with its own message.
use crate::error::bail_code;
use crate::error::Code;
use crate::napi::convert;
use crate::napi::js::{self, Env, Val};
use torch_core::{args, device, dtype};

/// A type an option's value is read as. `what` names the option in errors (`options.dtype`).
pub trait OptionValue: Sized {
    /// Reads a present (neither undefined nor null) value.
    fn read(env: Env, v: Val, what: &str) -> anyhow::Result<Self>;
}

impl OptionValue for bool {
    fn read(env: Env, v: Val, what: &str) -> anyhow::Result<Self> {
        convert::boolean(env, v, what)
    }
}

impl OptionValue for String {
    fn read(env: Env, v: Val, what: &str) -> anyhow::Result<Self> {
        convert::string(env, v, what)
    }
}

impl OptionValue for f64 {
    fn read(env: Env, v: Val, what: &str) -> anyhow::Result<Self> {
        convert::number(env, v, what)
    }
}

/// A whole number (ranges are the caller's).
impl OptionValue for i64 {
    fn read(env: Env, v: Val, what: &str) -> anyhow::Result<Self> {
        args::integer(convert::number(env, v, what)?, what)
    }
}

/// A whole number ≥ 0 (a size, a count of bytes).
impl OptionValue for u64 {
    fn read(env: Env, v: Val, what: &str) -> anyhow::Result<Self> {
        let n = i64::read(env, v, what)?;
        if n < 0 {
            bail_code!(Code::InvalidArg, "{what}: must be non-negative, got {n}");
        }
        Ok(n as u64)
    }
}

/// A dtype name (`'float32'`, `'int64'`, …).
impl OptionValue for tch::Kind {
    fn read(env: Env, v: Val, what: &str) -> anyhow::Result<Self> {
        dtype::parse(&convert::string(env, v, what)?)
    }
}

/// A device name (`'cpu'`, `'cuda'`, `'cuda:N'`).
impl OptionValue for tch::Device {
    fn read(env: Env, v: Val, what: &str) -> anyhow::Result<Self> {
        device::parse(&convert::string(env, v, what)?)
    }
}

/// Sizes: an array of them, or one.
impl OptionValue for Vec<i64> {
    fn read(env: Env, v: Val, what: &str) -> anyhow::Result<Self> {
        convert::shape(env, v, what)
    }
}

/// The value itself, for an option whose reader needs more than the value (an AbortSignal,
/// model inputs): read by the caller within the same call.
impl OptionValue for Val {
    fn read(_env: Env, v: Val, _what: &str) -> anyhow::Result<Self> {
        Ok(v)
    }
}

/// The options object `v` names, or None when it is undefined or null; anything else that is
/// not an object is InvalidArg. Keys outside `keys` (less `except`) are refused, naming the
/// accepted ones.
pub fn object(
    env: Env,
    v: Option<Val>,
    keys: &[&str],
    except: &[&str],
    what: &str,
) -> anyhow::Result<Option<Val>> {
    let Some(o) = v.filter(|o| !js::is_nullish(env, *o).unwrap_or(true)) else {
        return Ok(None);
    };
    if js::type_of(env, o)? != napi::sys::ValueType::napi_object {
        bail_code!(
            Code::InvalidArg,
            "{what}: expected an options object, got {}",
            js::describe(env, o)
        );
    }
    let accepted: Vec<&str> = keys.iter().copied().filter(|k| !except.contains(k)).collect();
    js::check_keys(env, o, &accepted, what)?;
    Ok(Some(o))
}

/// `o[key]` read as `T`, or None when absent (undefined or null).
pub fn field<T: OptionValue>(env: Env, o: Val, key: &str, what: &str) -> anyhow::Result<Option<T>> {
    js::property(env, o, key)?
        .map(|v| T::read(env, v, &format!("{what}.{key}")))
        .transpose()
}

/// Declares an option bag: its TypeScript interface, its keys and its reader (module doc).
macro_rules! js_options {
    (
        $(#[$doc:meta])*
        $vis:vis struct $name:ident as $typings:ident $ts_name:literal {
            $(
                $(#[$fdoc:meta])*
                $field:ident $key:literal : $ty:ty as $ts:literal,
            )*
        }
    ) => {
        $(#[$doc])*
        #[napi_derive::napi(
            object,
            js_name = $ts_name,
            object_from_js = false,
            object_to_js = false
        )]
        $vis struct $typings {
            $(
                $(#[$fdoc])*
                #[napi(js_name = $key, ts_type = $ts)]
                pub $field: Option<napi::bindgen_prelude::Unknown<'static>>,
            )*
        }

        $(#[$doc])*
        #[derive(Default)]
        $vis struct $name {
            $(
                $(#[$fdoc])*
                pub $field: Option<$ty>,
            )*
        }

        #[allow(dead_code)]
        impl $name {
            /// The accepted keys, in declaration order.
            pub const KEYS: &'static [&'static str] = &[$($key),*];

            /// Reads the bag (`what` names it in errors: `options`); undefined or null is
            /// every option left out.
            pub fn read(
                env: $crate::napi::js::Env,
                v: Option<$crate::napi::js::Val>,
                what: &str,
            ) -> anyhow::Result<Self> {
                Self::read_except(env, v, what, &[])
            }

            /// [`Self::read`] for a call that does not take the keys in `except`: they are
            /// refused as unknown, and the error lists the rest.
            pub fn read_except(
                env: $crate::napi::js::Env,
                v: Option<$crate::napi::js::Val>,
                what: &str,
                except: &[&str],
            ) -> anyhow::Result<Self> {
                let Some(o) = $crate::napi::options::object(env, v, Self::KEYS, except, what)? else {
                    return Ok(Self::default());
                };
                Ok(Self {
                    $(
                        $field: match except.contains(&$key) {
                            true => None,
                            false => $crate::napi::options::field(env, o, $key, what)?,
                        },
                    )*
                })
            }
        }
    };
}
pub(crate) use js_options;
