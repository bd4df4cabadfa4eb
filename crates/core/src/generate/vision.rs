//! A vision-language export's image side (`python/export_vlm.py`): `manifest.json`'s `vision`,
//! the program taking images (`vision.pt`: the vision tower and projector) and how a rendered
//! prompt's image tokens become the image's embeddings. Idefics3/SmolVLM cut each image into
//! tiles: its pixel_values are a grid of tiles, and its prompt depends on the grid (`Grid`).
//! Qwen2-VL resizes each image to a patch grid of its own, takes one image a vision call, and
//! places tokens by M-RoPE (`mrope`).
use super::decoder::{Images, Prepared};
use crate::error::{bail_code, fail, Code};
use anyhow::Result;
use serde_json::Value as Json;
use std::path::Path;
use tch::{Device, Kind, Tensor};

#[path = "mrope.rs"]
pub mod mrope;
use mrope::Mrope;

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
    /// Qwen2-VL's patch grid (`vision.mrope`): each image its own number of tokens, placed by M-RoPE.
    pub mrope: Option<Mrope>,
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
    /// Idefics3/SmolVLM: each image's expansion built from its tile grid (`prefix`/`suffix` unused).
    pub grid: Option<Grid>,
}

/// `vision.expansion.grid` (Idefics3/SmolVLM, `python/vlm_idefics3.py`): the processor writes, for
/// an image cut into rows × cols tiles, `tiles[r][c]` + N image tokens per tile, `row_end` after
/// each row but the last, then `last_row_end`, `global` + N image tokens + `global_end` (the
/// whole image resized to one tile); for an image not cut (0 × 0), the global part alone.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    /// The most rows and columns the export's processor makes (`tiles` is that square).
    pub max_grid: usize,
    /// The ids before tile (r, c)'s image tokens (`<fake_token_around_image><row_r_col_c>`).
    pub tiles: Vec<Vec<Vec<u32>>>,
    pub row_end: Vec<u32>,
    pub last_row_end: Vec<u32>,
    pub global: Vec<u32>,
    pub global_end: Vec<u32>,
}

impl Grid {
    fn parse(g: &Json) -> Result<Option<Grid>> {
        if g.is_null() {
            return Ok(None);
        }
        let list = |v: &Json, k: &str| id_list(v).ok_or_else(|| bad(&format!("grid.{k}")));
        let max_grid = g["maxGrid"].as_u64().ok_or_else(|| bad("grid.maxGrid"))? as usize;
        let rows = g["tiles"].as_array().ok_or_else(|| bad("grid.tiles"))?;
        if rows.len() != max_grid {
            return Err(bad("grid.tiles"));
        }
        let tiles = (rows.iter())
            .map(|row| match row.as_array() {
                Some(r) if r.len() == max_grid => r.iter().map(|t| list(t, "tiles")).collect(),
                _ => Err(bad("grid.tiles")),
            })
            .collect::<Result<Vec<Vec<Vec<u32>>>>>()?;
        Ok(Some(Grid {
            max_grid,
            tiles,
            row_end: list(&g["rowEnd"], "rowEnd")?,
            last_row_end: list(&g["lastRowEnd"], "lastRowEnd")?,
            global: list(&g["global"], "global")?,
            global_end: list(&g["globalEnd"], "globalEnd")?,
        }))
    }

    /// Appends an image of `rows` × `cols` tiles (0 × 0: not cut), `n` image tokens per tile,
    /// to `ids`, and to `mask` true at its image tokens.
    fn push(
        &self,
        (rows, cols): (usize, usize),
        image: u32,
        n: usize,
        ids: &mut Vec<u32>,
        mask: &mut Vec<bool>,
    ) {
        let text = |piece: &[u32], ids: &mut Vec<u32>, mask: &mut Vec<bool>| {
            ids.extend(piece);
            mask.extend(std::iter::repeat_n(false, piece.len()));
        };
        let tokens = |ids: &mut Vec<u32>, mask: &mut Vec<bool>| {
            ids.extend(std::iter::repeat_n(image, n));
            mask.extend(std::iter::repeat_n(true, n));
        };
        for r in 0..rows {
            for c in 0..cols {
                text(&self.tiles[r][c], ids, mask);
                tokens(ids, mask);
            }
            if r + 1 < rows {
                text(&self.row_end, ids, mask);
            }
        }
        if rows > 0 {
            text(&self.last_row_end, ids, mask);
        }
        text(&self.global, ids, mask);
        tokens(ids, mask);
        text(&self.global_end, ids, mask);
    }
}

fn id_list(v: &Json) -> Option<Vec<u32>> {
    match v {
        Json::Null => Some(Vec::new()),
        Json::Array(a) => a
            .iter()
            .map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
            .collect(),
        _ => None,
    }
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
        let ids = |k: &str| -> Result<Vec<u32>> { id_list(&e[k]).ok_or_else(|| bad(k)) };
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
            grid: Grid::parse(&e["grid"])?,
        };
        Ok(Some(VisionManifest {
            program: v["program"].as_str().unwrap_or("vision.pt").to_string(),
            image_size: int("imageSize")? as i64,
            image_token_id,
            tokens_per_image: int("tokensPerImage")? as usize,
            hidden: int("hidden")? as i64,
            expansion,
            mrope: Mrope::parse(&v["mrope"])?,
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

impl VisionManifest {
    /// A tiled export's (`expansion.grid`) rendered chat ids with each template image token
    /// expanded for its image's grid (`grids`: rows × cols per image, in order), and the mask.
    pub fn expand_grids(&self, ids: &[u32], grids: &[(usize, usize)]) -> Result<(Vec<u32>, Vec<bool>)> {
        let e = &self.expansion;
        let Some(grid) = &e.grid else {
            bail_code!(
                Code::Internal,
                "this export's image expansion is not per tile grid"
            );
        };
        let found = ids.iter().filter(|&&t| t == e.template_token_id).count();
        if found != grids.len() {
            bail_code!(
                Code::InvalidArg,
                "the chat has {} image(s) but its rendered prompt has {found} image token(s) (a message's \
                 text holding the image token, or a chat template that drops image parts)",
                grids.len()
            );
        }
        let mut expanded = Vec::with_capacity(ids.len());
        let mut mask = Vec::with_capacity(ids.len());
        let mut next = grids.iter();
        for &t in ids {
            match (t == e.template_token_id).then(|| next.next()).flatten() {
                Some(&g) => grid.push(
                    g,
                    self.image_token_id,
                    self.tokens_per_image,
                    &mut expanded,
                    &mut mask,
                ),
                None => {
                    expanded.push(t);
                    mask.push(false);
                }
            }
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
        if let Some(m) = &v.mrope {
            return self.prepare_mrope(m, ids, pixels);
        }
        let (expanded, mask, frames) = match &v.expansion.grid {
            None => {
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
                let (expanded, mask) = v.expand(&ids, pixels.len())?;
                (expanded, mask, pixels.iter().map(|p| p.shallow_clone()).collect())
            }
            Some(grid) => {
                let (frames, grids): (Vec<Tensor>, Vec<(usize, usize)>) = (pixels.iter().enumerate())
                    .map(|(i, p)| tiles(i, p, v.image_size, grid.max_grid))
                    .collect::<Result<Vec<_>>>()?
                    .into_iter()
                    .unzip();
                let (expanded, mask) = v.expand_grids(&ids, &grids)?;
                (expanded, mask, frames)
            }
        };
        let hash = pixels_hash(&pixels)?;
        let n_frames: i64 = match v.expansion.grid {
            None => frames.len() as i64,
            Some(_) => frames.iter().map(|f| f.size()[0]).sum(),
        };
        let (n, hidden) = (v.tokens_per_image as i64, v.hidden);
        let features = if frames.is_empty() {
            Tensor::zeros([0, n, hidden], (Kind::Float, Device::Cpu))
        } else {
            // LLaVA's [3, S, S] images stacked; tiled images' [frames, 3, S, S] concatenated.
            let batch = match v.expansion.grid {
                None => Tensor::f_stack(&frames, 0)?,
                Some(_) => Tensor::f_cat(&frames, 0)?,
            };
            let out = tch::no_grad(|| self.program.forward_ts(&[batch]))?;
            out.f_to_kind(Kind::Float)?
        };
        if features.size() != [n_frames, n, hidden] {
            bail_code!(
                Code::Internal,
                "the vision program returned {:?}, expected [{n_frames}, {n}, {hidden}]",
                features.size(),
            );
        }
        let mask = Tensor::f_from_slice(&mask)?;
        let mut embeds = Tensor::f_zeros([expanded.len() as i64, v.hidden], (Kind::Float, Device::Cpu))?;
        let rows = features.f_reshape([-1, v.hidden])?;
        let _ = embeds.f_index_put_(&[Some(mask.shallow_clone())], &rows, false)?;
        Ok(Prepared {
            ids: expanded,
            images: Some(Images {
                embeds,
                mask,
                hash,
                rope: None,
                rope_delta: 0,
            }),
        })
    }

    /// `prepare` for an M-RoPE export (Qwen2-VL): each template image token becomes its image's
    /// `h × w` image tokens, each image runs through the vision program alone (its patches and
    /// their positions), and the prompt's positions are M-RoPE's.
    fn prepare_mrope(&self, m: &Mrope, ids: Vec<u32>, pixels: Vec<Tensor>) -> Result<Prepared> {
        let v = &self.manifest;
        let (patches, grids): (Vec<Tensor>, Vec<(usize, usize)>) = (pixels.iter().enumerate())
            .map(|(i, p)| m.patches(i, p))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .unzip();
        let counts: Vec<usize> = grids.iter().map(|(h, w)| h * w).collect();
        let (expanded, mask) = expand_counts(&ids, v.expansion.template_token_id, v.image_token_id, &counts)?;
        let (rope, rope_delta) = mrope::prompt_positions(&expanded, v.image_token_id, &grids)?;
        let mut features = Vec::with_capacity(patches.len());
        for (k, (flat, &(h, w))) in patches.iter().zip(&grids).enumerate() {
            let s = m.merge_size;
            let at = mrope::patch_positions(h * s, w * s, s);
            let at = Tensor::f_from_slice(&at)?.f_view([-1, 2])?;
            let out = tch::no_grad(|| self.program.forward_ts(&[flat.shallow_clone(), at]))?;
            let out = out.f_to_kind(Kind::Float)?;
            if out.size() != [(h * w) as i64, v.hidden] {
                bail_code!(
                    Code::Internal,
                    "the vision program returned {:?} for image {k}, expected [{}, {}]",
                    out.size(),
                    h * w,
                    v.hidden
                );
            }
            features.push(out);
        }
        let hash = pixels_hash(&pixels)?;
        let mask = Tensor::f_from_slice(&mask)?;
        let mut embeds = Tensor::f_zeros([expanded.len() as i64, v.hidden], (Kind::Float, Device::Cpu))?;
        if !features.is_empty() {
            let rows = Tensor::f_cat(&features, 0)?;
            let _ = embeds.f_index_put_(&[Some(mask.shallow_clone())], &rows, false)?;
        }
        let rope = Tensor::f_from_slice(&rope)?.f_view([3, -1])?;
        Ok(Prepared {
            ids: expanded,
            images: Some(Images {
                embeds,
                mask,
                hash,
                rope: Some(rope),
                rope_delta,
            }),
        })
    }
}

/// The rendered chat's ids with its `counts.len()` template image tokens (`template`) each
/// replaced by that image's count of `image` tokens, and the image mask. `InvalidArg` where the
/// ids hold another number of template tokens (or, the template token being another, any image
/// token already).
pub(super) fn expand_counts(
    ids: &[u32],
    template: u32,
    image: u32,
    counts: &[usize],
) -> Result<(Vec<u32>, Vec<bool>)> {
    let found = ids.iter().filter(|&&t| t == template).count();
    let stray = template != image && ids.contains(&image);
    if found != counts.len() || stray {
        bail_code!(
            Code::InvalidArg,
            "the chat has {} image(s) but its rendered prompt has {found} image token(s) (a message's \
             text holding the image token, or a chat template that drops image parts)",
            counts.len()
        );
    }
    let total: usize = counts.iter().sum();
    let mut expanded = Vec::with_capacity(ids.len() + total);
    let mut mask = Vec::with_capacity(ids.len() + total);
    let mut next = counts.iter();
    for &t in ids {
        match (t == template).then(|| next.next()).flatten() {
            Some(&n) => {
                expanded.extend(std::iter::repeat_n(image, n));
                mask.extend(std::iter::repeat_n(true, n));
            }
            None => {
                expanded.push(t);
                mask.push(false);
            }
        }
    }
    Ok((expanded, mask))
}

/// Image `i`'s pixel_values as a tiled export's preprocess.pt writes them, `[rows + 1, cols, 3,
/// S, S]` (the tiles in their grid, then the global image in column 0 of one more row; an image
/// not cut: `[1, 1, 3, S, S]`), as the vision program's frames `[rows·cols + 1, 3, S, S]` (the
/// processor's order: the tiles row by row, then the global image) and the grid (0 × 0 uncut).
pub(super) fn tiles(i: usize, p: &Tensor, s: i64, max_grid: usize) -> Result<(Tensor, (usize, usize))> {
    let size = p.size();
    let ok =
        p.kind() == Kind::Float && size.len() == 5 && size[2..] == [3, s, s] && size[0] >= 1 && size[1] >= 1;
    let (rows, cols) = match ok {
        true if size[0] == 1 && size[1] == 1 => (0, 0),
        true if size[0] > 1 => (size[0] as usize - 1, size[1] as usize),
        _ => bail_code!(
            Code::InvalidArg,
            "image {i}: expected pixel_values float32 [rows + 1, cols, 3, {s}, {s}] (the model's image processor's), \
             got {:?} {size:?}",
            p.kind()
        ),
    };
    if rows > max_grid || cols > max_grid {
        bail_code!(
            Code::InvalidArg,
            "image {i}: {rows} x {cols} tiles, more than the {max_grid} x {max_grid} this export's processor makes"
        );
    }
    if rows == 0 {
        return Ok((p.f_select(0, 0)?, (0, 0)));
    }
    let cut = p.f_narrow(0, 0, rows as i64)?.f_reshape([-1, 3, s, s])?;
    let global = p.f_select(0, rows as i64)?.f_narrow(0, 0, 1)?;
    Ok((Tensor::f_cat(&[cut, global], 0)?, (rows, cols)))
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
