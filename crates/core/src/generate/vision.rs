//! A vision-language export's image side (`python/export_vlm.py`): `manifest.json`'s `vision`,
//! the program taking images (`vision.pt`: the vision tower and projector) and how a rendered
//! prompt's image tokens become the image's embeddings.
use super::decoder::{Images, Prepared};
use crate::error::{bail_code, fail, Code};
use anyhow::Result;
use serde_json::Value as Json;
use std::path::Path;
use tch::{Device, Kind, Tensor};

/// `manifest.json`'s `vision`: the program taking images and how the prompt holds them.
#[derive(Clone, Debug)]
pub struct VisionManifest {
    /// `vision.pt`: pixel_values `[B, 3, S, S]` -> image-token embeddings `[B, N, hidden]`.
    pub program: String,
    pub image_size: i64,
    pub image_token_id: u32,
    /// N: each image token of the rendered chat becomes N (as transformers' processor expands it).
    pub tokens_per_image: usize,
    pub hidden: i64,
}

impl VisionManifest {
    /// `manifest.json`'s `vision` (None: a text-only export).
    pub fn parse(v: &Json) -> Result<Option<VisionManifest>> {
        if v.is_null() {
            return Ok(None);
        }
        let int = |k: &str| {
            v[k].as_u64().ok_or_else(|| {
                fail(
                    Code::ModelLoadError,
                    format!("manifest.json: 'vision.{k}' is missing"),
                )
            })
        };
        Ok(Some(VisionManifest {
            program: v["program"].as_str().unwrap_or("vision.pt").to_string(),
            image_size: int("imageSize")? as i64,
            image_token_id: int("imageTokenId")? as u32,
            tokens_per_image: int("tokensPerImage")? as usize,
            hidden: int("hidden")? as i64,
        }))
    }
}

/// The loaded image side: its manifest and its program.
pub struct Vision {
    pub manifest: VisionManifest,
    program: tch::CModule,
}

impl Vision {
    /// Loads `dir`'s vision program.
    pub fn load(dir: &Path, manifest: VisionManifest) -> Result<Vision> {
        let path = dir.join(&manifest.program);
        let program = tch::CModule::load_on_device(&path, Device::Cpu).map_err(|e| {
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            fail(
                Code::ModelLoadError,
                format!("cannot load '{}': {first}", path.display()),
            )
        })?;
        Ok(Vision { manifest, program })
    }

    /// A chat with images, rendered and tokenized (`ids`, one image token per image): each image
    /// token expanded to the manifest's `tokensPerImage`, the images run through the vision
    /// program (one call for all of them) and their embeddings placed at those tokens.
    pub fn prepare(&self, ids: Vec<u32>, pixels: Vec<Tensor>) -> Result<Prepared> {
        let v = &self.manifest;
        let s = v.image_size;
        for (i, p) in pixels.iter().enumerate() {
            if p.size() != [3, s, s] || p.kind() != Kind::Float {
                bail_code!(
                    Code::InvalidArg,
                    "image {i}: expected pixel_values float32 [3, {s}, {s}] (the model's image processor's), got {:?} {:?}",
                    p.kind(),
                    p.size()
                );
            }
        }
        let n_images = pixels.len();
        let found = ids.iter().filter(|&&t| t == v.image_token_id).count();
        if found != n_images {
            bail_code!(
                Code::InvalidArg,
                "the chat has {n_images} image(s) but its rendered prompt has {found} image token(s) (a message's \
                 text holding the image token, or a chat template that drops image parts)"
            );
        }
        let hash = pixels_hash(&pixels)?;
        let features = if n_images == 0 {
            Tensor::zeros(
                [0, v.tokens_per_image as i64, v.hidden],
                (Kind::Float, Device::Cpu),
            )
        } else {
            let batch = Tensor::f_stack(&pixels, 0)?;
            let out = tch::no_grad(|| self.program.forward_ts(&[batch]))?;
            out.f_to_kind(Kind::Float)?
        };
        if features.size() != [n_images as i64, v.tokens_per_image as i64, v.hidden] {
            bail_code!(
                Code::Internal,
                "the vision program returned {:?}, expected [{n_images}, {}, {}]",
                features.size(),
                v.tokens_per_image,
                v.hidden
            );
        }
        let mut expanded = Vec::with_capacity(ids.len() + n_images * v.tokens_per_image);
        let mut mask = Vec::with_capacity(expanded.capacity());
        for &t in &ids {
            let image = t == v.image_token_id;
            let n = if image { v.tokens_per_image } else { 1 };
            expanded.extend(std::iter::repeat_n(t, n));
            mask.extend(std::iter::repeat_n(image, n));
        }
        let mask = Tensor::f_from_slice(&mask)?;
        let mut embeds = Tensor::f_zeros([expanded.len() as i64, v.hidden], (Kind::Float, Device::Cpu))?;
        let rows = features.f_reshape([-1, v.hidden])?;
        let _ = embeds.f_index_put_(&[Some(mask.shallow_clone())], &rows, false)?;
        Ok(Prepared {
            ids: expanded,
            images: Some(Images { embeds, mask, hash }),
        })
    }
}

/// The FNV-1a hash of the images' float32 pixels (their shapes included).
fn pixels_hash(pixels: &[Tensor]) -> Result<u64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    };
    for p in pixels {
        for d in p.size() {
            eat(&d.to_le_bytes());
        }
        let flat = Vec::<f32>::try_from(p.f_contiguous()?.f_view([-1])?)?;
        flat.iter().for_each(|x| eat(&x.to_le_bytes()));
    }
    Ok(h)
}
