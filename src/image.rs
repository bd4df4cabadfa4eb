//! The `torch.image` namespace (glue over `torch_core::image`): reads options and sources, runs
//! `transform` on the executor (`crate::napi::task`; the sync forms wait for it), and wraps the
//! pixels as tensors.
use crate::error::bail_code;
use crate::error::{guard, Code};
use crate::napi::convert::{
    self, number as number_arg, string as string_arg, DecodeOptions, EncodeOptions, ImageFormat,
    ImageOptions, Sources,
};
use crate::napi::js::{self, Env as RawEnv, Val};
use crate::napi::options::{js_options, OptionValue};
use crate::napi::outcome::Outcome;
use crate::napi::task::{self, prepare, Promise};
use crate::tensor::JsTensor;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use tch::{Kind, Tensor};
use torch_core::args::Source;
use torch_core::image::transform::{self, Pixels, Size, Transform, IMAGENET_MEAN, IMAGENET_STD};
use torch_core::{args, dtype};

js_options! {
    /// Options of `torch.image.load`, `loadSync` and `loadBatch`.
    pub struct ImageBag as JsImageOptions "ImageOptions" {
        /// A number: the shorter side becomes this many pixels, the aspect ratio kept, as
        /// `transforms.Resize(int)`; `[height, width]`: exactly that size.
        resize "resize": Size as "number | [number, number]",
        /// A number (a square) or `[height, width]`, cut from the center as `transforms.CenterCrop`.
        center_crop "centerCrop": Size as "number | [number, number]",
        /// Per-channel mean subtracted after scaling to [0, 1], or `'imagenet'` (with its std).
        mean "mean": Channels as "[number, number, number] | 'imagenet'",
        /// Per-channel standard deviation divided by (or `'imagenet'`).
        std "std": Channels as "[number, number, number] | 'imagenet'",
        /// `'nchw'` (default: `[1, 3, H, W]`), `'nhwc'`, or `'chw'`/`'hwc'` without the batch dim.
        layout "layout": Layout as "'nchw' | 'nhwc' | 'chw' | 'hwc'",
        /// `'float32'` (default: [0, 1], then normalized) or `'uint8'` (0..255).
        dtype "dtype": Kind as "'float32' | 'uint8'",
        /// `true`: decode a file that is cut short instead of refusing it with `InvalidImage`
        /// (PIL's `LOAD_TRUNCATED_IMAGES`): a JPEG's missing rows come out grey. Default `false`.
        allow_truncated "allowTruncated": bool as "boolean",
    }
}

js_options! {
    /// Options of `torch.image.decode`; any other key is refused (`InvalidArg`).
    pub struct DecodeBag as JsDecodeOptions "DecodeOptions" {
        /// `true`: decode a file that is cut short instead of refusing it (`InvalidImage`); a
        /// JPEG's missing rows come out grey.
        allow_truncated "allowTruncated": bool as "boolean",
    }
}

js_options! {
    /// Options of `torch.image.encode`; any other key is refused (`InvalidArg`).
    pub struct EncodeBag as JsEncodeOptions "EncodeOptions" {
        /// JPEG quality, 1 to 100 (default 90).
        quality "quality": i64 as "number",
    }
}

/// `mean`/`std`: three numbers (R, G, B), or ImageNet's preset.
pub enum Channels {
    Imagenet,
    Values([f32; 3]),
}

/// `layout`: whether there is a batch dim, and whether channels come last.
pub struct Layout {
    batch: bool,
    channels_last: bool,
}

/// An image's bytes: read from its file, or already copied from JS.
fn image_bytes(source: Source) -> anyhow::Result<Vec<u8>> {
    match source {
        Source::Bytes(b) => Ok(b),
        Source::Path(p) => std::fs::read(&p)
            .map_err(|e| crate::error::fail(Code::InvalidArg, format!("cannot read image '{p}': {e}"))),
    }
}

impl OptionValue for Size {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        size_option(env, v, what)
    }
}

impl OptionValue for Channels {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        if js::type_of(env, v)? == napi::sys::ValueType::napi_string && js::string(env, v)? == "imagenet" {
            return Ok(Channels::Imagenet);
        }
        channels(env, v, what).map(Channels::Values)
    }
}

impl OptionValue for Layout {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        let (batch, channels_last) = match String::read(env, v, what)?.as_str() {
            "nchw" => (true, false),
            "nhwc" => (true, true),
            "chw" => (false, false),
            "hwc" => (false, true),
            other => bail_code!(
                Code::InvalidArg,
                "{what}: expected 'nchw', 'nhwc', 'chw' or 'hwc', got '{other}'"
            ),
        };
        Ok(Layout { batch, channels_last })
    }
}

fn size_option(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Size> {
    let dims: Vec<f64> = if js::is_array(env, v)? {
        (0..js::array_len(env, v)?)
            .map(|i| number_arg(env, js::element(env, v, i)?, what))
            .collect::<anyhow::Result<_>>()?
    } else {
        vec![number_arg(env, v, what)?]
    };
    let px = |x: f64| -> anyhow::Result<u32> {
        let n = args::integer(x, what)?;
        if !(1..=transform::MAX_SIDE as i64).contains(&n) {
            bail_code!(
                Code::InvalidArg,
                "{what}: expected 1 to {} pixels, got {n}",
                transform::MAX_SIDE
            );
        }
        Ok(n as u32)
    };
    match dims.as_slice() {
        [s] => Ok(Size::Short(px(*s)?)),
        [h, w] => Ok(Size::Exact(px(*h)?, px(*w)?)),
        _ => bail_code!(Code::InvalidArg, "{what}: expected a number or [height, width]"),
    }
}

fn channels(env: RawEnv, v: Val, what: &str) -> anyhow::Result<[f32; 3]> {
    if !js::is_array(env, v)? || js::array_len(env, v)? != 3 {
        bail_code!(
            Code::InvalidArg,
            "{what}: expected 'imagenet' or three numbers (R, G, B)"
        );
    }
    let mut out = [0f32; 3];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = number_arg(env, js::element(env, v, i as u32)?, what)? as f32;
    }
    Ok(out)
}

/// Reads `ImageOptions`: the transform, and whether the batch dim is left out.
fn transform_options(env: RawEnv, options: Option<Val>) -> anyhow::Result<(Transform, bool)> {
    let o = ImageBag::read(env, options, "options")?;
    let mut t = Transform {
        resize: o.resize,
        center_crop: o.center_crop,
        allow_truncated: o.allow_truncated.unwrap_or(false),
        ..Transform::default()
    };
    t.normalize = match (o.mean, o.std) {
        (None, None) => None,
        (Some(Channels::Imagenet), None | Some(Channels::Imagenet)) => Some((IMAGENET_MEAN, IMAGENET_STD)),
        (Some(Channels::Values(m)), Some(Channels::Values(s))) => Some((m, s)),
        _ => bail_code!(
            Code::InvalidArg,
            "options: give mean and std together (or mean: 'imagenet')"
        ),
    };
    let layout = o.layout.unwrap_or(Layout {
        batch: true,
        channels_last: false,
    });
    t.channels_last = layout.channels_last;
    match o.dtype {
        None | Some(Kind::Float) => {}
        Some(Kind::Uint8) if t.normalize.is_none() => t.uint8 = true,
        Some(Kind::Uint8) => bail_code!(
            Code::InvalidArg,
            "options.dtype: uint8 pixels cannot be normalized (drop mean/std)"
        ),
        Some(k) => bail_code!(
            Code::InvalidArg,
            "options.dtype: expected 'float32' or 'uint8', got '{}'",
            dtype::name(k)
        ),
    }
    Ok((t, !layout.batch))
}

fn tensor_of(pixels: Pixels, shape: &[i64]) -> anyhow::Result<Tensor> {
    let t = match pixels {
        Pixels::F32(v) => Tensor::f_from_slice(&v)?,
        Pixels::U8(v) => Tensor::f_from_slice(&v)?,
    };
    Ok(t.f_reshape(shape)?)
}

/// Decodes and transforms each source; one tensor `[N, ...]`, or `[...]` without the batch dim.
fn load_all(sources: Vec<Source>, t: &Transform, no_batch: bool) -> anyhow::Result<Tensor> {
    let (mut images, several) = (Vec::with_capacity(sources.len()), sources.len() > 1);
    for (i, s) in sources.into_iter().enumerate() {
        // Which image failed (to decode or to transform), when there are several.
        let named = |e: anyhow::Error| match several {
            true => e.context(format!("image {i}")),
            false => e,
        };
        let (pixels, shape) = image_bytes(s)
            .and_then(|bytes| transform::preprocess(transform::decode(&bytes, t.allow_truncated)?, t))
            .map_err(named)?;
        images.push(tensor_of(pixels, &shape)?);
    }
    if no_batch {
        return Ok(images.remove(0));
    }
    let first = images[0].size();
    if let Some(i) = images.iter().position(|im| im.size() != first) {
        bail_code!(
            Code::ShapeMismatch,
            "loadBatch: image {i} is {:?} after the transforms, image 0 {first:?}; give resize and centerCrop so they match",
            images[i].size()
        );
    }
    Ok(Tensor::f_stack(&images, 0)?)
}

fn read(env: RawEnv, sources: Vec<Val>, options: Option<Val>) -> anyhow::Result<Prepared> {
    let (transform, no_batch) = transform_options(env, options)?;
    let sources = sources
        .into_iter()
        .enumerate()
        .map(|(i, v)| js::source(env, v, &format!("source {i}"), "an image file's"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if sources.is_empty() {
        bail_code!(Code::InvalidArg, "loadBatch: expected at least one image");
    }
    Ok(Prepared {
        sources,
        transform,
        no_batch,
    })
}

struct Prepared {
    sources: Vec<Source>,
    transform: Transform,
    no_batch: bool,
}

/// A loaded image as a JS `Tensor` (on the JS thread, as `load`'s promise resolves).
fn tensor_value(env: RawEnv, t: Tensor) -> anyhow::Result<Val> {
    // SAFETY: on the JS thread, inside the completion's N-API callback.
    js::value_of(env, JsTensor::new(t))
}

/// `load` / `loadBatch` on the executor; what could not be read rejects the promise.
fn spawn_load(env: RawEnv, read: impl FnOnce() -> anyhow::Result<Prepared>) -> Outcome<Promise> {
    Outcome::of(|| {
        let prepared = prepare(|| Ok((read()?, None)))?;
        guard(|| {
            task::spawn(
                env,
                "load",
                prepared,
                |p| load_all(p.sources, &p.transform, p.no_batch),
                tensor_value,
            )
        })
    })
}

fn list(env: RawEnv, v: Val) -> anyhow::Result<Vec<Val>> {
    if !js::is_array(env, v)? {
        bail_code!(
            Code::InvalidArg,
            "sources: expected an array of paths or Buffers, got {}",
            js::describe(env, v)
        );
    }
    js::elements(env, v)
}

/// Image decoding and torchvision-style pre-processing.
#[napi(namespace = "image")]
pub mod image {
    use super::*;

    /// Decodes an image file's bytes (JPEG, PNG, WebP, GIF's first frame, BMP, TIFF) to a uint8
    /// tensor `[H, W, 3]` (RGB, channels last, EXIF orientation applied). A file cut short is
    /// `InvalidImage` unless `options.allowTruncated`.
    #[napi]
    pub fn decode(data: convert::Source, options: Option<DecodeOptions>) -> Outcome<JsTensor> {
        guard(|| {
            let convert::Raw { env, val } = data.raw();
            let bytes = image_bytes(js::source(env, val, "data", "an image file's")?)?;
            let allow = DecodeBag::read(env, options.map(|o| o.raw().val), "options")?
                .allow_truncated
                .unwrap_or(false);
            Ok(JsTensor::new(task::run_sync(move || {
                let img = transform::decode(&bytes, allow)?;
                let (w, h) = img.dimensions();
                tensor_of(Pixels::U8(img.into_raw()), &[h as i64, w as i64, 3])
            })?))
        })
        .into()
    }

    /// Loads an image as a model input (the calling thread waits for the executor): decode, then `resize` (a number:
    /// the shorter side, as `transforms.Resize(int)`; `[h, w]`: exact), `centerCrop`, to float in
    /// [0, 1], `mean`/`std` (`mean: 'imagenet'` for both presets). `layout`: `'nchw'` (default,
    /// `[1, 3, H, W]`), `'nhwc'`, or `'chw'`/`'hwc'` without the batch dim; `dtype`: `'float32'`
    /// (default) or `'uint8'` (0..255, no normalization).
    #[napi]
    pub fn load_sync(env: Env, source: convert::Source, options: Option<ImageOptions>) -> Outcome<JsTensor> {
        guard(|| {
            let p = read(env.raw(), vec![source.raw().val], options.map(|o| o.raw().val))?;
            Ok(JsTensor::new(task::run_sync(move || {
                load_all(p.sources, &p.transform, p.no_batch)
            })?))
        })
        .into()
    }

    /// `loadSync` on torch-node's executor: decoding and resizing never block the event loop.
    #[napi(ts_return_type = "Promise<Tensor>")]
    pub fn load(env: Env, source: convert::Source, options: Option<ImageOptions>) -> Outcome<Promise> {
        spawn_load(env.raw(), || {
            read(env.raw(), vec![source.raw().val], options.map(|o| o.raw().val))
        })
    }

    /// Loads several images (on the thread pool) into one batch `[N, 3, H, W]`; the transforms
    /// must bring them to one size.
    #[napi(ts_return_type = "Promise<Tensor>")]
    pub fn load_batch(env: Env, sources: Sources, options: Option<ImageOptions>) -> Outcome<Promise> {
        let raw = env.raw();
        spawn_load(raw, || {
            let p = read(raw, list(raw, sources.raw().val)?, options.map(|o| o.raw().val))?;
            if p.no_batch {
                bail_code!(
                    Code::InvalidArg,
                    "loadBatch: options.layout must be 'nchw' or 'nhwc'"
                );
            }
            Ok(p)
        })
    }

    /// Encodes an image tensor as PNG or JPEG: `[3, H, W]` or `[H, W, 3]` (or with a batch dim of
    /// 1), float in [0, 1] (scaled by 255, rounded, clamped) or uint8. `quality`: JPEG, 1..100
    /// (default 90).
    #[napi(ts_return_type = "Uint8Array")]
    pub fn encode(
        env: Env,
        tensor: convert::Tensor,
        format: ImageFormat,
        options: Option<EncodeOptions>,
    ) -> Outcome<Buffer> {
        guard(|| {
            let raw = env.raw();
            let tensor = tensor.read("encode: tensor")?;
            let format = string_arg(raw, format.raw().val, "format")?;
            let quality = match EncodeBag::read(raw, options.map(|o| o.raw().val), "options")?.quality {
                None => 90,
                Some(q @ 1..=100) => q as u8,
                Some(q) => bail_code!(Code::InvalidArg, "options.quality: expected 1 to 100, got {q}"),
            };
            let (rgb, w, h) = hwc_bytes(&tensor)?;
            Ok(transform::encode(rgb, w, h, &format, quality)?.into())
        })
        .into()
    }
}

/// An image tensor as interleaved RGB bytes, its width and height.
fn hwc_bytes(t: &Tensor) -> anyhow::Result<(Vec<u8>, u32, u32)> {
    let mut size = t.size();
    let mut t = t.shallow_clone();
    if size.len() == 4 && size[0] == 1 {
        t = t.f_squeeze_dim(0)?;
        size.remove(0);
    }
    let t = match size.as_slice() {
        [3, _, _] => t.f_permute([1, 2, 0])?,
        [_, _, 3] => t,
        _ => bail_code!(
            Code::ShapeMismatch,
            "encode: expected [3, H, W] or [H, W, 3] (RGB), got {size:?}"
        ),
    };
    let t = match t.kind() {
        Kind::Uint8 => t,
        k if dtype::is_floating(k) => {
            let scaled = t
                .f_mul(&torch_core::ffi::wrapped_number(255.0, false)?)?
                .f_round()?;
            torch_core::ffi::scalar::clamp(&scaled, Some(0.0), Some(255.0), false)?.f_to_kind(Kind::Uint8)?
        }
        k => bail_code!(
            Code::DTypeMismatch,
            "encode: expected float or uint8 pixels, got {}",
            dtype::name(k)
        ),
    };
    let (h, w) = (t.size()[0] as u32, t.size()[1] as u32);
    Ok((crate::tensor::data::bytes(&t)?, w, h))
}
