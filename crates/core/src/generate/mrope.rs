//! M-RoPE (Qwen2-VL, `python/vlm_qwen2.py`): each token's rotary position is three, (temporal,
//! height, width). A text token's three are one number, counting on from the token before; an
//! image's tokens (its merged patch grid `h × w`, row by row) are `(s, s + row, s + col)` with `s`
//! the position after the text before it, and the text after the image goes on from
//! `s + max(h, w)` (transformers' `get_rope_index`). Past the prompt every token is one position
//! again: its cache slot plus the row's delta (`max position + 1 - prompt length`), which the
//! engine carries per sequence (`Images::rope_delta`). The vision tower's own rotary positions
//! are each patch's (row, column) in merge-block order (`patch_positions`).
use crate::error::{bail_code, fail, Code};
use anyhow::Result;
use serde_json::Value as Json;
use tch::{Device, Kind, Tensor};

/// `manifest.json`'s `vision.mrope`: the image processor's patch grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Mrope {
    /// merge × merge patches make one image token.
    pub merge_size: usize,
    /// The length of one patch's row of pixel_values (3 · temporal patch · patch²).
    pub patch_dim: i64,
}

impl Mrope {
    /// `vision.mrope` (None: not an M-RoPE export).
    pub fn parse(v: &Json) -> Result<Option<Mrope>> {
        if v.is_null() {
            return Ok(None);
        }
        let int = |k: &str| {
            v[k].as_u64().filter(|&n| n > 0).ok_or_else(|| {
                fail(
                    Code::ModelLoadError,
                    format!("manifest.json: 'vision.mrope.{k}' is not a positive integer"),
                )
            })
        };
        Ok(Some(Mrope {
            merge_size: int("mergeSize")? as usize,
            patch_dim: int("patchDim")? as i64,
        }))
    }

    /// Image `i`'s pixel_values as preprocess.pt writes them, `[gh, gw, D]` float32 (gh, gw
    /// multiples of the merge size): the patches `[gh·gw, D]` and the grid in image tokens.
    pub fn patches(&self, i: usize, p: &Tensor) -> Result<(Tensor, (usize, usize))> {
        let size = p.size();
        let m = self.merge_size as i64;
        let ok = p.kind() == Kind::Float
            && size.len() == 3
            && size[2] == self.patch_dim
            && size[0] > 0
            && size[1] > 0
            && size[0] % m == 0
            && size[1] % m == 0;
        if !ok {
            bail_code!(
                Code::InvalidArg,
                "image {i}: expected pixel_values float32 [gh, gw, {}] with gh and gw multiples of {m} (the \
                 model's image processor's), got {:?} {size:?}",
                self.patch_dim,
                p.kind()
            );
        }
        let flat = p.f_reshape([-1, self.patch_dim])?;
        Ok((flat, ((size[0] / m) as usize, (size[1] / m) as usize)))
    }
}

/// The vision tower's rotary positions of a `gh × gw` patch grid: each patch's (row, column),
/// `[gh·gw, 2]` row-major, in the processor's merge-block order (the `merge × merge` blocks row
/// by row, the patches of each block row by row): transformers' `get_vision_position_ids`.
pub fn patch_positions(gh: usize, gw: usize, merge: usize) -> Vec<i64> {
    let mut out = Vec::with_capacity(gh * gw * 2);
    for br in 0..gh / merge {
        for bc in 0..gw / merge {
            for r in 0..merge {
                for c in 0..merge {
                    out.push((br * merge + r) as i64);
                    out.push((bc * merge + c) as i64);
                }
            }
        }
    }
    out
}

/// The prompt's M-RoPE positions, `[3 × T]` (the temporal row, then height, then width), and
/// its delta: `ids` hold each image's `h × w` tokens (`grids`, in image-token units, in order)
/// as runs of `image_id`.
pub fn prompt_positions(ids: &[u32], image_id: u32, grids: &[(usize, usize)]) -> Result<(Vec<i64>, i64)> {
    let n = ids.len();
    let mut axes = [
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    ];
    let (mut current, mut t) = (0i64, 0usize);
    let mut next = grids.iter();
    while t < n {
        if ids[t] != image_id {
            axes.iter_mut().for_each(|a| a.push(current));
            current += 1;
            t += 1;
            continue;
        }
        let Some(&(h, w)) = next.next() else {
            bail_code!(
                Code::Internal,
                "the prompt has more image tokens than its images make"
            );
        };
        if t + h * w > n || ids[t..t + h * w].iter().any(|&x| x != image_id) {
            bail_code!(
                Code::Internal,
                "an image's {h} x {w} tokens are not where the prompt holds them"
            );
        }
        for r in 0..h as i64 {
            for c in 0..w as i64 {
                axes[0].push(current);
                axes[1].push(current + r);
                axes[2].push(current + c);
            }
        }
        current += h.max(w) as i64;
        t += h * w;
    }
    if next.next().is_some() {
        bail_code!(
            Code::Internal,
            "the prompt has fewer image tokens than its images make"
        );
    }
    let most = axes.iter().flatten().copied().max().unwrap_or(-1);
    let delta = most + 1 - n as i64;
    Ok((axes.concat(), delta))
}

/// The program's `rope [3, rows, cols]` input: a prefill's positions (`rope`, `[3, cols]`, one
/// row), else each row's cache positions plus its offset (`offsets`: empty for none), the same
/// on the three axes.
pub fn rope_input(
    positions: &[i64],
    (rows, cols): (i64, i64),
    rope: Option<&Tensor>,
    offsets: &[i64],
) -> Result<Tensor> {
    if let Some(r) = rope {
        if r.size() != [3, rows * cols] {
            bail_code!(
                Code::Internal,
                "M-RoPE positions {:?} for a call of {rows} x {cols} tokens",
                r.size()
            );
        }
        return Ok(r.f_reshape([3, rows, cols])?.f_to_kind(Kind::Int64)?);
    }
    let shifted: Vec<i64> = match offsets {
        [] => positions.to_vec(),
        o if o.len() as i64 == rows => (positions.iter().enumerate())
            .map(|(k, &p)| p + o[k / cols.max(1) as usize])
            .collect(),
        o => bail_code!(Code::Internal, "{} position offsets for {rows} rows", o.len()),
    };
    let one = Tensor::f_from_slice(&shifted)?.f_view([1, rows, cols])?;
    Ok(one
        .f_expand([3, rows, cols], false)?
        .f_contiguous()?
        .f_to_device(Device::Cpu)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_positions_are_merge_block_order() {
        // transformers' get_vision_position_ids for grid_thw [1, 2, 4], merge 2.
        let want = [[0, 0], [0, 1], [1, 0], [1, 1], [0, 2], [0, 3], [1, 2], [1, 3]];
        assert_eq!(patch_positions(2, 4, 2), want.concat());
        assert_eq!(
            patch_positions(2, 2, 1),
            [[0, 0], [0, 1], [1, 0], [1, 1]].concat()
        );
    }

    #[test]
    fn prompt_positions_follow_get_rope_index() {
        // 2 text tokens, a 2 x 3 image, 1 text token, a 1 x 2 image, 2 text tokens: transformers'
        // get_rope_index (vlm_qwen2.rope_index, the same) gives these.
        let i = 9;
        let ids = [5, 6, i, i, i, i, i, i, 7, i, i, 8, 4];
        let (p, delta) = prompt_positions(&ids, i, &[(2, 3), (1, 2)]).unwrap();
        let t = [0, 1, 2, 2, 2, 2, 2, 2, 5, 6, 6, 8, 9];
        let h = [0, 1, 2, 2, 2, 3, 3, 3, 5, 6, 6, 8, 9];
        let w = [0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(p, [t, h, w].concat());
        assert_eq!(delta, 10 - 13);
        // Text alone: the slots, delta 0.
        let (p, delta) = prompt_positions(&[1, 2, 3], i, &[]).unwrap();
        assert_eq!((p, delta), ([0, 1, 2, 0, 1, 2, 0, 1, 2].to_vec(), 0));
    }

    #[test]
    fn prompt_positions_refuse_grids_that_do_not_match() {
        let i = 9;
        assert!(prompt_positions(&[1, i, i, 2], i, &[(2, 2)]).is_err());
        assert!(prompt_positions(&[1, i, i, 2], i, &[(1, 2), (1, 1)]).is_err());
        assert!(prompt_positions(&[1, i, i, 2], i, &[]).is_err());
    }

    #[test]
    fn rope_input_shifts_each_row() {
        let r = rope_input(&[4, 5, 7, 8], (2, 2), None, &[-3, 0]).unwrap();
        assert_eq!(r.size(), [3, 2, 2]);
        let flat = Vec::<i64>::try_from(r.f_view([-1]).unwrap()).unwrap();
        assert_eq!(flat, [1, 2, 7, 8].repeat(3));
        let plain = rope_input(&[4, 5], (1, 2), None, &[]).unwrap();
        assert_eq!(
            Vec::<i64>::try_from(plain.f_view([-1]).unwrap()).unwrap(),
            [4, 5].repeat(3)
        );
        assert!(rope_input(&[4, 5], (1, 2), None, &[1, 2]).is_err());
        let given = Tensor::from_slice(&[0i64, 1, 0, 2, 0, 3]).view([3, 2]);
        let r = rope_input(&[0, 1], (1, 2), Some(&given), &[]).unwrap();
        assert_eq!(r.size(), [3, 1, 2]);
    }
}
