//! Images in and out: decoding (JPEG, PNG, WebP, GIF's first frame, BMP, TIFF) to RGB with
//! EXIF orientation applied and decoder limits, and torchvision's classic pre-processing —
//! `Resize(int | [h, w])`, `CenterCrop`, `ToTensor`, `Normalize` — with the same numbers:
//! resizing uses fast_image_resize's convolution with the bilinear filter, which reproduces
//! Pillow's antialiased `Image.resize(..., BILINEAR)` (what torchvision runs on PIL images).
use super::complete;
use crate::error::bail_code;
use crate::error::{fail, Code};
use anyhow::Result;
use fast_image_resize::images::Image as FirImage;
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use image::{DynamicImage, ImageDecoder, ImageReader, RgbImage};
use std::io::Cursor;

/// The largest width or height accepted, and the most bytes a decoder may allocate: a 60-byte
/// file can claim 100000×100000 pixels, and decoding it must fail fast, not allocate 30 GB.
pub const MAX_SIDE: u32 = 16_384;
pub const MAX_ALLOC: u64 = 1 << 30;

/// ImageNet's mean and standard deviation (torchvision's presets).
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// Decodes an image file's bytes to 8-bit RGB, upright (EXIF orientation applied); grayscale,
/// alpha and CMYK become RGB (alpha dropped, as PIL's `convert('RGB')`). A file cut short is
/// refused, as PIL refuses it, unless `allow_truncated` (then what the decoder makes of it: a
/// JPEG's missing rows are grey; the PNG, BMP and TIFF decoders still fail).
pub fn decode(bytes: &[u8], allow_truncated: bool) -> Result<RgbImage> {
    let invalid =
        |e: &dyn std::fmt::Display| fail(Code::InvalidImage, format!("cannot decode the image: {e}"));
    let mut reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| invalid(&e))?;
    let Some(format) = reader.format() else {
        bail_code!(
            Code::InvalidImage,
            "cannot decode the image: not a JPEG, PNG, WebP, GIF, BMP or TIFF file ({} bytes)",
            bytes.len()
        );
    };
    if let Some(why) = complete::truncation(bytes, format).filter(|_| !allow_truncated) {
        bail_code!(
            Code::InvalidImage,
            "cannot decode the image: the {} file is truncated: {why} ({} bytes)",
            complete::name(format),
            bytes.len()
        );
    }
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_ALLOC);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(|e| invalid(&e))?;
    let orientation = decoder.orientation().map_err(|e| invalid(&e))?;
    let mut img = DynamicImage::from_decoder(decoder).map_err(|e| invalid(&e))?;
    img.apply_orientation(orientation);
    Ok(img.into_rgb8())
}

/// A size option: one number (torchvision's int: the shorter side for `resize`, a square for
/// `centerCrop`) or `[height, width]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Size {
    Short(u32),
    Exact(u32, u32),
}

/// What `preprocess` does, in torchvision's order: resize, center crop, to float in [0, 1]
/// (unless `uint8`), normalize.
#[derive(Debug, Clone, Default)]
pub struct Transform {
    pub resize: Option<Size>,
    pub center_crop: Option<Size>,
    /// `(mean, std)` per channel.
    pub normalize: Option<([f32; 3], [f32; 3])>,
    /// Keep 0..255 bytes instead of floats (no normalization then).
    pub uint8: bool,
    /// Channels last (`[H, W, 3]`) instead of first (`[3, H, W]`).
    pub channels_last: bool,
    /// Decode a file cut short instead of refusing it (see [`decode`]).
    pub allow_truncated: bool,
}

/// Pre-processed pixels and their shape (without the batch dimension).
pub enum Pixels {
    F32(Vec<f32>),
    U8(Vec<u8>),
}

/// torchvision's `_compute_resized_output_size` for an int: the shorter side becomes `size`,
/// the longer one `int(size * long / short)` (truncated).
fn resized_size(w: u32, h: u32, size: Size) -> (u32, u32) {
    match size {
        Size::Exact(th, tw) => (tw, th),
        Size::Short(s) if w <= h => (s, (s as u64 * h as u64 / w as u64) as u32),
        Size::Short(s) => ((s as u64 * w as u64 / h as u64) as u32, s),
    }
}

/// Resizes with Pillow's antialiased bilinear filter (taking the image: its buffer becomes the
/// resizer's source without a copy).
pub fn resize(img: RgbImage, size: Size) -> Result<RgbImage> {
    let (w, h) = img.dimensions();
    let (tw, th) = resized_size(w, h, size);
    if tw == 0 || th == 0 {
        bail_code!(
            Code::InvalidArg,
            "resize: {w}×{h} resized to {size:?} has no pixels"
        );
    }
    if (tw, th) == (w, h) {
        return Ok(img);
    }
    let src = FirImage::from_vec_u8(w, h, img.into_raw(), PixelType::U8x3)?;
    let mut dst = FirImage::new(tw, th, PixelType::U8x3);
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Bilinear));
    Resizer::new().resize(&src, &mut dst, &options)?;
    RgbImage::from_raw(tw, th, dst.into_vec())
        .ok_or_else(|| anyhow::anyhow!("resize produced a short buffer"))
}

/// torchvision's `center_crop`: the offset is `int(round((size - crop) / 2))`, with Python's
/// round-half-to-even. A crop larger than the image is refused (torchvision would pad).
pub fn center_crop(img: &RgbImage, size: Size) -> Result<RgbImage> {
    let (w, h) = img.dimensions();
    let (cw, ch) = match size {
        Size::Short(s) => (s, s),
        Size::Exact(ch, cw) => (cw, ch),
    };
    if cw > w || ch > h || cw == 0 || ch == 0 {
        bail_code!(
            Code::InvalidArg,
            "centerCrop: {ch}×{cw} (height×width) does not fit in the {h}×{w} image"
        );
    }
    let top = ((h - ch) as f64 / 2.0).round_ties_even() as u32;
    let left = ((w - cw) as f64 / 2.0).round_ties_even() as u32;
    Ok(image::imageops::crop_imm(img, left, top, cw, ch).to_image())
}

/// Runs the transform; returns the pixels and their shape (`[3, H, W]` or `[H, W, 3]`).
pub fn preprocess(img: RgbImage, t: &Transform) -> Result<(Pixels, [i64; 3])> {
    let img = match t.resize {
        Some(s) => resize(img, s)?,
        None => img,
    };
    let img = match t.center_crop {
        Some(s) => center_crop(&img, s)?,
        None => img,
    };
    let (w, h) = img.dimensions();
    let (w, h) = (w as usize, h as usize);
    let shape = if t.channels_last {
        [h as i64, w as i64, 3]
    } else {
        [3, h as i64, w as i64]
    };
    let raw = img.into_raw();
    if t.uint8 {
        return Ok((
            Pixels::U8(chw_or_hwc(&raw, w, h, t.channels_last, |v, _| v)),
            shape,
        ));
    }
    let (mean, std) = t.normalize.unwrap_or(([0.0; 3], [1.0; 3]));
    let floats = chw_or_hwc(&raw, w, h, t.channels_last, |v, c| {
        (v as f32 / 255.0 - mean[c]) / std[c]
    });
    Ok((Pixels::F32(floats), shape))
}

/// Interleaved RGB bytes to channels-first (or kept channels-last), mapping each value.
fn chw_or_hwc<T>(raw: &[u8], w: usize, h: usize, channels_last: bool, f: impl Fn(u8, usize) -> T) -> Vec<T> {
    if channels_last {
        return raw.iter().enumerate().map(|(i, &v)| f(v, i % 3)).collect();
    }
    let mut out = Vec::with_capacity(raw.len());
    for c in 0..3 {
        out.extend((0..w * h).map(|p| f(raw[p * 3 + c], c)));
    }
    out
}

/// Encodes `[H, W, 3]` RGB bytes as PNG or JPEG (`quality` 1..=100).
pub fn encode(rgb: Vec<u8>, width: u32, height: u32, format: &str, quality: u8) -> Result<Vec<u8>> {
    let img =
        RgbImage::from_raw(width, height, rgb).ok_or_else(|| anyhow::anyhow!("encode: short buffer"))?;
    let mut out = Cursor::new(Vec::new());
    match format {
        "png" => img.write_to(&mut out, image::ImageFormat::Png)?,
        "jpeg" | "jpg" => {
            let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality);
            img.write_with_encoder(encoder)?
        }
        other => bail_code!(
            Code::InvalidArg,
            "encode: format '{other}' is not 'png' or 'jpeg'"
        ),
    }
    Ok(out.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(w: u32, h: u32) -> RgbImage {
        RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([(x * 255 / w) as u8, (y * 255 / h) as u8, 128])
        })
    }

    #[test]
    fn resize_follows_torchvision_sizes() {
        assert_eq!(resized_size(640, 480, Size::Short(256)), (341, 256));
        assert_eq!(resized_size(480, 640, Size::Short(256)), (256, 341));
        assert_eq!(resized_size(300, 300, Size::Exact(10, 20)), (20, 10));
        let r = resize(gradient(640, 480), Size::Short(256)).unwrap();
        assert_eq!(r.dimensions(), (341, 256));
    }

    #[test]
    fn center_crop_rounds_half_to_even_as_python() {
        // (5 - 2) / 2 = 1.5 -> 2; (4 - 1) / 2 = 1.5 -> 2; (6 - 1) / 2 = 2.5 -> 2.
        let img = RgbImage::from_fn(6, 5, |x, y| image::Rgb([x as u8, y as u8, 0]));
        let c = center_crop(&img, Size::Exact(2, 1)).unwrap();
        assert_eq!(c.get_pixel(0, 0).0, [2, 2, 0]);
        assert!(center_crop(&img, Size::Short(7)).is_err());
    }

    #[test]
    fn preprocess_layouts_and_normalization() {
        let img = RgbImage::from_fn(2, 1, |x, _| image::Rgb([x as u8 * 255, 0, 51]));
        let t = Transform {
            normalize: Some(([0.5; 3], [0.5; 3])),
            ..Default::default()
        };
        let (Pixels::F32(v), shape) = preprocess(img.clone(), &t).unwrap() else {
            panic!()
        };
        assert_eq!(shape, [3, 1, 2]);
        assert_eq!(v, [-1.0, 1.0, -1.0, -1.0, -0.6, -0.6]);
        let t = Transform {
            uint8: true,
            channels_last: true,
            ..Default::default()
        };
        let (Pixels::U8(v), shape) = preprocess(img, &t).unwrap() else {
            panic!()
        };
        assert_eq!(shape, [1, 2, 3]);
        assert_eq!(v, [0, 0, 51, 255, 0, 51]);
    }

    #[test]
    fn hostile_files_fail_with_invalid_image() {
        let (code, _) = crate::error::describe(&decode(b"not an image", false).unwrap_err());
        assert_eq!(code, Code::InvalidImage);
        let png = encode(gradient(8, 8).into_raw(), 8, 8, "png", 90).unwrap();
        assert_eq!(decode(&png, false).unwrap().dimensions(), (8, 8));
        let (code, _) = crate::error::describe(&decode(&png[..png.len() / 2], false).unwrap_err());
        assert_eq!(code, Code::InvalidImage);
        // A PNG header claiming 100000×100000 pixels: refused by the limits, before allocating.
        let mut huge = png.clone();
        huge[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        huge[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        let e = decode(&huge, false).unwrap_err().to_string();
        assert!(e.contains("cannot decode"), "{e}");
    }

    #[test]
    fn a_truncated_jpeg_is_refused_unless_allowed() {
        let jpeg = encode(gradient(64, 48).into_raw(), 64, 48, "jpeg", 90).unwrap();
        assert_eq!(decode(&jpeg, false).unwrap().dimensions(), (64, 48));
        for n in [jpeg.len() / 2, jpeg.len() - 20, jpeg.len() - 1] {
            let (code, message) = crate::error::describe(&decode(&jpeg[..n], false).unwrap_err());
            assert_eq!(code, Code::InvalidImage);
            assert!(
                message.starts_with("cannot decode the image: the JPEG file is truncated: "),
                "{message}"
            );
            // zune-jpeg makes an image of it: grey where the data ran out.
            assert_eq!(decode(&jpeg[..n], true).unwrap().dimensions(), (64, 48));
        }
    }
}
