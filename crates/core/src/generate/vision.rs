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
    /// The id at which the program takes an image's embeddings (N of them per image).
    pub image_token_id: u32,
    /// N: each image is N image tokens (as transformers' processor expands it).
    pub tokens_per_image: usize,
    pub hidden: i64,
    /// How the processor expands the token the chat template writes for an image (`expansion`).
    pub expansion: Expansion,
}

/// `vision.expansion`: each `template_token_id` of the rendered, tokenized chat becomes
/// `prefix`, N × `image_token_id`, `suffix` (LLaVA: `<image>` -> N × `<image>`; Gemma 3:
/// `<start_of_image>` -> "\n\n<start_of_image>", N × `<image_soft_token>`, "<end_of_image>\n\n").
#[derive(Clone, Debug, PartialEq)]
pub struct Expansion {
    pub template_token_id: u32,
    pub prefix: Vec<u32>,
    pub suffix: Vec<u32>,
    /// The template token's text and what the processor writes in its place (`expand_text`).
    pub text: Option<(String, String)>,
    /// The ids expansion is exact (the tokenizer merges nothing across the replacement's edges);
    /// when false only `expand_text` before tokenizing reproduces the processor's ids.
    pub token_level: bool,
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
        let image_token_id = int("imageTokenId")? as u32;
        let e = &v["expansion"];
        let ids = |k: &str| -> Result<Vec<u32>> {
            match &e[k] {
                Json::Null => Ok(Vec::new()),
                Json::Array(a) => a
                    .iter()
                    .map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
                    .collect::<Option<Vec<u32>>>()
                    .ok_or_else(|| bad(k)),
                _ => Err(bad(k)),
            }
        };
        // Written before `expansion` existed (LLaVA): the image token itself, N times.
        let expansion = Expansion {
            template_token_id: match &e["templateTokenId"] {
                Json::Null => image_token_id,
                t => t
                    .as_u64()
                    .and_then(|x| u32::try_from(x).ok())
                    .ok_or_else(|| bad("templateTokenId"))?,
            },
            prefix: ids("prefix")?,
            suffix: ids("suffix")?,
            text: match (e["templateToken"].as_str(), e["text"].as_str()) {
                (Some(t), Some(r)) if !t.is_empty() => Some((t.to_string(), r.to_string())),
                _ => None,
            },
            token_level: e["tokenLevel"].as_bool().unwrap_or(true),
        };
        Ok(Some(VisionManifest {
            program: v["program"].as_str().unwrap_or("vision.pt").to_string(),
            image_size: int("imageSize")? as i64,
            image_token_id,
            tokens_per_image: int("tokensPerImage")? as usize,
            hidden: int("hidden")? as i64,
            expansion,
        }))
    }

    /// The rendered chat with each template image token replaced by what the processor writes
    /// there (transformers' processors expand the text, then tokenize): tokenized, the
    /// processor's `input_ids`, which `expand` then takes as they are. Unchanged without a text
    /// expansion in the manifest.
    pub fn expand_text(&self, rendered: &str) -> String {
        match &self.expansion.text {
            Some((token, text)) => rendered.replace(token.as_str(), text),
            None => rendered.to_string(),
        }
    }

    /// The rendered chat's ids with each image's tokens in place, and the image mask (true at
    /// the N image tokens of each image). Ids tokenized from `expand_text`'s text hold them
    /// already (`images` × N image tokens): taken as they are. Else the ids hold `images`
    /// template tokens and no image token, and each template token is expanded by ids (refused
    /// where the manifest says that is not exact).
    pub fn expand(&self, ids: &[u32], images: usize) -> Result<(Vec<u32>, Vec<bool>)> {
        let e = &self.expansion;
        let n = self.tokens_per_image;
        let placed = ids.iter().filter(|&&t| t == self.image_token_id).count();
        let expanded_already = match e.template_token_id == self.image_token_id {
            true => placed == images * n && n > 1,
            false => placed > 0,
        };
        if expanded_already {
            if placed != images * n {
                bail_code!(
                    Code::InvalidArg,
                    "the chat has {images} image(s) but its prompt has {placed} image placeholder token(s) \
                     (expected {}: the text holds the placeholder token?)",
                    images * n
                );
            }
            let mask = ids.iter().map(|&t| t == self.image_token_id).collect();
            return Ok((ids.to_vec(), mask));
        }
        if !e.token_level && images > 0 {
            bail_code!(
                Code::InvalidArg,
                "this model's image tokens must be expanded in the rendered text before tokenizing \
                 (its tokenizer merges them with the text around them)"
            );
        }
        let found = ids.iter().filter(|&&t| t == e.template_token_id).count();
        if found != images {
            bail_code!(
                Code::InvalidArg,
                "the chat has {images} image(s) but its rendered prompt has {found} image token(s) (a message's \
                 text holding the image token, or a chat template that drops image parts)"
            );
        }
        let per = e.prefix.len() + self.tokens_per_image + e.suffix.len();
        let mut expanded = Vec::with_capacity(ids.len() + images * per);
        let mut mask = Vec::with_capacity(expanded.capacity());
        for &t in ids {
            if t != e.template_token_id {
                expanded.push(t);
                mask.push(false);
                continue;
            }
            expanded.extend(&e.prefix);
            expanded.extend(std::iter::repeat_n(self.image_token_id, self.tokens_per_image));
            expanded.extend(&e.suffix);
            mask.extend(std::iter::repeat_n(false, e.prefix.len()));
            mask.extend(std::iter::repeat_n(true, self.tokens_per_image));
            mask.extend(std::iter::repeat_n(false, e.suffix.len()));
        }
        Ok((expanded, mask))
    }
}

fn bad(k: &str) -> anyhow::Error {
    fail(
        Code::ModelLoadError,
        format!("manifest.json: 'vision.expansion.{k}' is not a token id (list)"),
    )
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

    /// A chat with images, rendered and tokenized (`ids`, one template image token per image):
    /// each template image token expanded as the manifest's `expansion` says, the images run through the vision
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
        let (expanded, mask) = v.expand(&ids, n_images)?;
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
