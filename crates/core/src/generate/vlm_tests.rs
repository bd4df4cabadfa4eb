//! Vision-language exports beyond LLaVA (whose goldens run in lm.rs): the manifest's image-token
//! expansion (fixed, and per tile grid), and the tiny Gemma 3 and SmolVLM of
//! models/make_vlm_models.py against transformers' greedy generate.
use super::batch::Batch;
use super::decoder::{Chat, Decoder, Prompt};
use super::lm::{load, LoadOptions, Model};
use super::request::{Defaults, Options};
use super::sequence::Sequence;
use super::vision::{Expansion, VisionManifest};
use crate::error::Code;
use serde_json::{json, Value as Json};
use tch::Tensor;

fn manifest(v: Json) -> VisionManifest {
    VisionManifest::parse(&v).unwrap().unwrap()
}

fn code(e: &anyhow::Error) -> Option<Code> {
    Some(crate::error::describe(e).0)
}

/// A manifest without `expansion` (LLaVA's before it existed) expands the image token itself;
/// Gemma 3's frames the N image tokens with its prefix and suffix, the mask true only at them.
#[test]
fn expansion_is_read_from_the_manifest() {
    let llava = manifest(json!({"imageSize": 32, "imageTokenId": 9, "tokensPerImage": 3, "hidden": 4}));
    assert_eq!(
        llava.expansion,
        Expansion {
            template_token_id: 9,
            prefix: vec![],
            suffix: vec![],
            text: None,
            token_level: true,
            grid: None,
        }
    );
    let (ids, mask) = llava.expand(&[1, 9, 2], 1).unwrap();
    assert_eq!(ids, [1, 9, 9, 9, 2]);
    assert_eq!(mask, [false, true, true, true, false]);

    let gemma = manifest(
        json!({"imageSize": 32, "imageTokenId": 404, "tokensPerImage": 2, "hidden": 4,
        "expansion": {"templateTokenId": 402, "prefix": [201, 201, 402], "suffix": [403, 201, 201]}}),
    );
    let (ids, mask) = gemma.expand(&[7, 402, 8, 402], 2).unwrap();
    let one = [201, 201, 402, 404, 404, 403, 201, 201];
    assert_eq!(ids, [&[7][..], &one, &[8], &one].concat());
    let framed = [false, false, false, true, true, false, false, false];
    assert_eq!(mask, [&[false][..], &framed, &[false], &framed].concat());
}

/// The text expansion (what transformers' processors do), whose ids `expand` takes as they are;
/// an export whose ids expansion is not exact refuses unexpanded ids.
#[test]
fn text_expansion_and_expanded_ids() {
    let gemma = manifest(
        json!({"imageSize": 32, "imageTokenId": 404, "tokensPerImage": 2, "hidden": 4,
        "expansion": {"templateToken": "<boi>", "templateTokenId": 402, "text": "\n\n<boi><s><s><eoi>\n\n",
                      "prefix": [201, 201, 402], "suffix": [403, 201, 201], "tokenLevel": false}}),
    );
    assert_eq!(
        gemma.expand_text("user\n<boi>Hi <boi>"),
        "user\n\n\n<boi><s><s><eoi>\n\nHi \n\n<boi><s><s><eoi>\n\n"
    );
    // As a tokenizer merging "\n" runs makes them: taken as they are.
    let ids = [5, 202, 402, 404, 404, 403, 201, 201, 6];
    let (got, mask) = gemma.expand(&ids, 1).unwrap();
    assert_eq!(got, ids);
    assert_eq!(mask, ids.map(|t| t == 404));
    let e = gemma.expand(&[5, 402, 6], 1).unwrap_err();
    assert_eq!(code(&e), Some(Code::InvalidArg), "{e}");
    assert!(e.to_string().contains("expanded in the rendered text"), "{e}");
    // LLaVA's: N image tokens already there, or one to expand.
    let llava = manifest(
        json!({"imageSize": 32, "imageTokenId": 9, "tokensPerImage": 3, "hidden": 4,
        "expansion": {"templateToken": "<image>", "templateTokenId": 9, "text": "<image><image><image>"}}),
    );
    assert_eq!(llava.expand(&[1, 9, 9, 9, 2], 1).unwrap().0, [1, 9, 9, 9, 2]);
    assert_eq!(llava.expand(&[1, 9, 2], 1).unwrap().0, [1, 9, 9, 9, 2]);
    assert!(llava.expand(&[1, 9, 9, 2], 1).is_err());
}

/// A count mismatch, the placeholder token written as text, and a malformed expansion.
#[test]
fn bad_expansions_are_refused() {
    let gemma = manifest(
        json!({"imageSize": 32, "imageTokenId": 404, "tokensPerImage": 2, "hidden": 4,
        "expansion": {"templateTokenId": 402, "prefix": [402], "suffix": [403]}}),
    );
    let e = gemma.expand(&[402, 402], 1).unwrap_err();
    assert_eq!(code(&e), Some(Code::InvalidArg), "{e}");
    assert!(e.to_string().contains("1 image(s)"), "{e}");
    let e = gemma.expand(&[402, 404], 1).unwrap_err();
    assert_eq!(code(&e), Some(Code::InvalidArg), "{e}");
    assert!(e.to_string().contains("placeholder"), "{e}");
    for bad in [
        json!({"prefix": "x"}),
        json!({"suffix": [-1]}),
        json!({"templateTokenId": "a"}),
    ] {
        let v =
            json!({"imageSize": 32, "imageTokenId": 1, "tokensPerImage": 2, "hidden": 4, "expansion": bad});
        let e = VisionManifest::parse(&v).unwrap_err();
        assert_eq!(code(&e), Some(Code::ModelLoadError), "{e}");
    }
}

/// A tiled export's manifest: 2 image tokens per tile, at most 2 × 2 tiles; the tile prefixes
/// `[50 + 10r + c]`, "\n" 7, "\n\n" 8, global `[60, 61]`, its end `[62]`.
fn tiled() -> VisionManifest {
    let tiles = json!([[[50], [51]], [[60, 1], [61, 1]]]);
    manifest(
        json!({"imageSize": 4, "imageTokenId": 9, "tokensPerImage": 2, "hidden": 4,
        "expansion": {"templateTokenId": 9, "grid": {"maxGrid": 2, "tiles": tiles, "rowEnd": [7],
            "lastRowEnd": [8], "global": [60, 61], "globalEnd": [62]}}}),
    )
}

/// Idefics3/SmolVLM: each image's prompt from its grid (an uncut one, 2 × 1 tiles, 1 × 2),
/// the mask true only at the image tokens; counts and grids beyond the export's refused.
#[test]
fn grid_expansion_follows_each_image() {
    let m = tiled();
    let (ids, mask) = m
        .expand_grids(&[1, 9, 2, 9, 3, 9], &[(0, 0), (2, 1), (1, 2)])
        .unwrap();
    let uncut = [60, 61, 9, 9, 62];
    let two_by_one = [50, 9, 9, 7, 60, 1, 9, 9, 8, 60, 61, 9, 9, 62];
    let one_by_two = [50, 9, 9, 51, 9, 9, 8, 60, 61, 9, 9, 62];
    assert_eq!(
        ids,
        [&[1][..], &uncut, &[2], &two_by_one, &[3], &one_by_two].concat()
    );
    assert_eq!(mask, ids.iter().map(|&t| t == 9).collect::<Vec<_>>());
    let e = m.expand_grids(&[1, 9, 2], &[(0, 0), (0, 0)]).unwrap_err();
    assert_eq!(code(&e), Some(Code::InvalidArg), "{e}");
    assert!(e.to_string().contains("2 image(s)"), "{e}");
    // The vision side reads the grid from preprocess.pt's [rows + 1, cols, 3, S, S].
    let (frames, grid) = super::vision::tiles(
        0,
        &Tensor::zeros([3, 2, 3, 4, 4], (tch::Kind::Float, tch::Device::Cpu)),
        4,
        2,
    )
    .unwrap();
    assert_eq!((frames.size(), grid), (vec![5, 3, 4, 4], (2, 2)));
    let (frames, grid) = super::vision::tiles(
        0,
        &Tensor::zeros([1, 1, 3, 4, 4], (tch::Kind::Float, tch::Device::Cpu)),
        4,
        2,
    )
    .unwrap();
    assert_eq!((frames.size(), grid), (vec![1, 3, 4, 4], (0, 0)));
    for bad in [
        vec![4, 1, 3, 4, 4],
        vec![1, 2, 3, 4, 4],
        vec![3, 4, 4],
        vec![2, 1, 3, 5, 4],
    ] {
        let p = Tensor::zeros(&bad[..], (tch::Kind::Float, tch::Device::Cpu));
        let e = super::vision::tiles(0, &p, 4, 2).unwrap_err();
        assert_eq!(code(&e), Some(Code::InvalidArg), "{bad:?}: {e}");
    }
    for bad in [
        json!({"maxGrid": 2, "tiles": [[[1]]]}),
        json!({"maxGrid": 1, "tiles": [[[1]]], "rowEnd": "x"}),
    ] {
        let v = json!({"imageSize": 4, "imageTokenId": 9, "tokensPerImage": 2, "hidden": 4,
            "expansion": {"grid": bad}});
        let e = VisionManifest::parse(&v).unwrap_err();
        assert_eq!(code(&e), Some(Code::ModelLoadError), "{e}");
    }
}

/// A golden case's images as preprocess.pt gives them: LLaVA's and Gemma 3's `[3, S, S]`; a
/// tiled export's frames (with `grids`) laid out as `[rows + 1, cols, 3, S, S]`.
fn pixels_of(case: &Json, size: i64) -> Vec<Tensor> {
    let grids = case["grids"].as_array().cloned().unwrap_or_default();
    (case["pixel_values"].as_array().unwrap().iter().enumerate())
        .map(|(i, p)| {
            let flat: Vec<f32> = (p.as_array().unwrap().iter())
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            let Some(g) = grids.get(i) else {
                return Tensor::from_slice(&flat).view([3, size, size]);
            };
            let (rows, cols) = (g[0].as_i64().unwrap(), g[1].as_i64().unwrap());
            let frames = Tensor::from_slice(&flat).view([-1, 3, size, size]);
            if rows == 0 {
                return frames.view([1, 1, 3, size, size]);
            }
            let grid = Tensor::zeros(
                [rows + 1, cols, 3, size, size],
                (tch::Kind::Float, tch::Device::Cpu),
            );
            grid.narrow(0, 0, rows)
                .copy_(&frames.narrow(0, 0, rows * cols).view([rows, cols, 3, size, size]));
            grid.get(rows).get(0).copy_(&frames.get(rows * cols));
            grid
        })
        .collect()
}

/// A golden case's prompt prepared as the engine does, checked against the processor's ids.
fn sequence(model: &Model, golden: &Json, case: &Json, size: i64) -> Sequence {
    let pixels = pixels_of(case, size);
    let messages = case["messages"].as_array().unwrap().clone();
    let prepared = match pixels.is_empty() {
        true => model.prepare(Prompt::Messages(Chat::new(messages))),
        false => model.prepare(Prompt::Multimodal(Chat::new(messages), pixels)),
    }
    .unwrap();
    assert_eq!(
        prepared.ids,
        ids_of(&case["input_ids"]),
        "{}: prompt ids",
        case["name"]
    );
    let request = Defaults::from_config(&Json::Null)
        .request(&Options {
            max_new_tokens: golden["new_tokens"].as_u64(),
            ..Options::default()
        })
        .unwrap();
    Sequence::new(model, prepared.ids, request)
        .unwrap()
        .with_images(prepared.images)
}

fn ids_of(v: &Json) -> Vec<u32> {
    (v.as_array().unwrap().iter())
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Runs `seqs` to the end in one batch of `limit` rows; each one's new ids.
fn run(model: &Model, batch: &mut Batch<usize>, seqs: Vec<Sequence>) -> Vec<Vec<u32>> {
    let mut out = vec![Vec::new(); seqs.len()];
    for (k, s) in seqs.into_iter().enumerate() {
        batch.admit(model, k, s).unwrap();
    }
    while !batch.is_empty() {
        for event in batch.step(model) {
            assert!(event.error.is_none());
            out[event.tag].extend(&event.piece.tokens);
        }
    }
    out
}

/// The golden's new ids, or a split where Python's top-2 logits were within 1e-4.
fn assert_matches(case: &Json, got: &[u32], label: &str) {
    let want = ids_of(&case["output_ids"]);
    if let Some(at) = want.iter().zip(got).position(|(x, y)| x != y) {
        let gap = case["top2_gaps"][at].as_f64().unwrap();
        assert!(
            gap < 1e-4,
            "{} {label}: token {at} differs, top-2 gap {gap}",
            case["name"]
        );
    } else {
        assert_eq!(&want, got, "{} {label}", case["name"]);
    }
}

/// The tiny Gemma 3 of models/make_vlm_models.py against transformers' greedy generate (with
/// the processor's token_type_ids: each image's tokens attend to each other both ways, its
/// sliding layer's 8-token window shorter than an image): the expanded prompt ids, then the
/// same new ids, each case alone, all three batched, and an image prompt again from the prefix
/// cache. Skipped when the fixture was not made.
#[test]
fn gemma3_greedy_matches_transformers_goldens() {
    let root = format!("{}/models/golden/vlm", crate::REPO_ROOT);
    let Ok(golden) = std::fs::read(format!("{root}/gemma3-tiny.golden.json")) else {
        eprintln!("skipped: {root}/gemma3-tiny.golden.json (models/make_vlm_models.py)");
        return;
    };
    let golden: Json = serde_json::from_slice(&golden).unwrap();
    let options = LoadOptions {
        dtype: None,
        max_context: None,
        max_sequences: None,
    };
    let model = load(&format!("{root}/gemma3-tiny"), options).unwrap();
    let cases = golden["cases"].as_array().unwrap();
    assert!(cases
        .iter()
        .any(|c| !c["pixel_values"].as_array().unwrap().is_empty()));
    for case in cases {
        let mut batch = Batch::new(1);
        let got = run(&model, &mut batch, vec![sequence(&model, &golden, case, 32)]);
        assert_matches(case, &got[0], "alone");
    }
    let mut batch = Batch::new(3);
    let seqs = cases.iter().map(|c| sequence(&model, &golden, c, 32)).collect();
    for (case, got) in cases.iter().zip(run(&model, &mut batch, seqs)) {
        assert_matches(case, &got, "batched");
    }
    // Admitted twice: the second prefill reuses the first one's blocks (ending inside the
    // image or after it) and still generates the same.
    let mut batch = Batch::new(1).with_prefix_cache(1024);
    for round in 0..2 {
        let got = run(&model, &mut batch, vec![sequence(&model, &golden, &cases[0], 32)]);
        assert_matches(&cases[0], &got[0], &format!("round {round}"));
        batch.clear();
    }
    let reused = batch.prefix_cache().unwrap().stats().reused_tokens;
    assert!(
        reused >= 16,
        "the same image's blocks were not reused: {reused} tokens"
    );
}

/// The tiny SmolVLM of models/make_vlm_models.py (SmolVLM's processor shrunk: 32-pixel tiles,
/// longest edge 128; images cut into 3 × 4 and 4 × 2 tiles, one smaller than a tile) against
/// transformers' greedy generate: the processor's prompt ids, then the same new ids alone, all
/// batched (text-only chats of text parts and of a string among them), and an image prompt again
/// from the prefix cache. Skipped when not made.
#[test]
fn smolvlm_greedy_matches_transformers_goldens() {
    let root = format!("{}/models/golden/vlm", crate::REPO_ROOT);
    let Ok(golden) = std::fs::read(format!("{root}/smolvlm-tiny.golden.json")) else {
        eprintln!("skipped: {root}/smolvlm-tiny.golden.json (models/make_vlm_models.py)");
        return;
    };
    let golden: Json = serde_json::from_slice(&golden).unwrap();
    let options = LoadOptions {
        dtype: None,
        max_context: None,
        max_sequences: None,
    };
    let model = load(&format!("{root}/smolvlm-tiny"), options).unwrap();
    // A string content reaches SmolVLM's template as one text part (chat_template::content_as_read,
    // as vLLM gives it): "text only (string)" runs as "text only" does, not as transformers' empty
    // turn.
    let mut cases = golden["cases"].as_array().unwrap().clone();
    let parts = cases.iter().find(|c| c["name"] == "text only").unwrap().clone();
    for case in cases.iter_mut().filter(|c| c["name"] == "text only (string)") {
        for key in ["input_ids", "output_ids", "top2_gaps"] {
            case[key] = parts[key].clone();
        }
    }
    let cases = &cases;
    let grids: Vec<&Json> = cases
        .iter()
        .flat_map(|c| c["grids"].as_array().unwrap())
        .collect();
    assert!(
        grids.contains(&&json!([3, 4])) && grids.contains(&&json!([4, 2])),
        "{grids:?}"
    );
    for case in cases {
        let mut batch = Batch::new(1);
        let got = run(&model, &mut batch, vec![sequence(&model, &golden, case, 32)]);
        assert_matches(case, &got[0], "alone");
    }
    let mut batch = Batch::new(cases.len());
    let seqs = cases.iter().map(|c| sequence(&model, &golden, c, 32)).collect();
    for (case, got) in cases.iter().zip(run(&model, &mut batch, seqs)) {
        assert_matches(case, &got, "batched");
    }
    let mut batch = Batch::new(1).with_prefix_cache(1024);
    for round in 0..2 {
        let got = run(&model, &mut batch, vec![sequence(&model, &golden, &cases[0], 32)]);
        assert_matches(&cases[0], &got[0], &format!("round {round}"));
        batch.clear();
    }
    let reused = batch.prefix_cache().unwrap().stats().reused_tokens;
    assert!(
        reused >= 200,
        "the same image's blocks were not reused: {reused} tokens"
    );
}

/// A Qwen2-VL golden case's images as preprocess.pt gives them, `[gh, gw, D]` (`grids`: the
/// processor's image_grid_thw, `[1, gh, gw]`).
fn qwen2_pixels(case: &Json) -> Vec<Tensor> {
    let grids = case["grids"].as_array().unwrap();
    (case["pixel_values"].as_array().unwrap().iter().zip(grids))
        .map(|(p, g)| {
            let flat: Vec<f32> = (p.as_array().unwrap().iter())
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            let (gh, gw) = (g[1].as_i64().unwrap(), g[2].as_i64().unwrap());
            Tensor::from_slice(&flat).view([gh, gw, -1])
        })
        .collect()
}

/// A Qwen2-VL case prepared as the engine does: the processor's ids and transformers'
/// get_rope_index positions and delta.
fn qwen2_sequence(model: &Model, golden: &Json, case: &Json) -> Sequence {
    let pixels = qwen2_pixels(case);
    let messages = case["messages"].as_array().unwrap().clone();
    let prepared = match pixels.is_empty() {
        true => model.prepare(Prompt::Messages(Chat::new(messages))),
        false => model.prepare(Prompt::Multimodal(Chat::new(messages), pixels)),
    }
    .unwrap();
    let name = &case["name"];
    assert_eq!(prepared.ids, ids_of(&case["input_ids"]), "{name}: prompt ids");
    if let Some(images) = &prepared.images {
        let rope = Vec::<i64>::try_from(images.rope.as_ref().unwrap().view([-1])).unwrap();
        let want: Vec<i64> = (case["rope"].as_array().unwrap().iter())
            .flat_map(|axis| axis.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()))
            .collect();
        assert_eq!(rope, want, "{name}: M-RoPE positions");
        assert_eq!(
            images.rope_delta,
            case["rope_delta"].as_i64().unwrap(),
            "{name}: delta"
        );
    }
    let request = Defaults::from_config(&Json::Null)
        .request(&Options {
            max_new_tokens: golden["new_tokens"].as_u64(),
            ..Options::default()
        })
        .unwrap();
    Sequence::new(model, prepared.ids, request)
        .unwrap()
        .with_images(prepared.images)
}

/// The tiny Qwen2-VL of models/make_qwen2_vl_models.py against transformers' greedy generate:
/// the processor's prompt ids, get_rope_index's positions and delta, then the same new ids alone
/// (decode steps at slot + delta), all batched (rows of different deltas in one step), and an
/// image prompt again from the prefix cache. Skipped when not made.
#[test]
fn qwen2_vl_greedy_matches_transformers_goldens() {
    let root = format!("{}/models/golden/vlm", crate::REPO_ROOT);
    let Ok(golden) = std::fs::read(format!("{root}/qwen2-vl-tiny.golden.json")) else {
        eprintln!("skipped: {root}/qwen2-vl-tiny.golden.json (models/make_qwen2_vl_models.py)");
        return;
    };
    let golden: Json = serde_json::from_slice(&golden).unwrap();
    let options = LoadOptions {
        dtype: None,
        max_context: None,
        max_sequences: None,
    };
    let model = load(&format!("{root}/qwen2-vl-tiny"), options).unwrap();
    let cases = golden["cases"].as_array().unwrap();
    let deltas: Vec<i64> = cases.iter().map(|c| c["rope_delta"].as_i64().unwrap()).collect();
    assert!(deltas.iter().filter(|&&d| d < 0).count() >= 2, "{deltas:?}");
    for case in cases {
        let mut batch = Batch::new(1);
        let got = run(&model, &mut batch, vec![qwen2_sequence(&model, &golden, case)]);
        assert_matches(case, &got[0], "alone");
    }
    let mut batch = Batch::new(cases.len());
    let seqs = cases.iter().map(|c| qwen2_sequence(&model, &golden, c)).collect();
    for (case, got) in cases.iter().zip(run(&model, &mut batch, seqs)) {
        assert_matches(case, &got, "batched");
    }
    let mut batch = Batch::new(1).with_prefix_cache(1024);
    for round in 0..2 {
        let got = run(
            &model,
            &mut batch,
            vec![qwen2_sequence(&model, &golden, &cases[0])],
        );
        assert_matches(&cases[0], &got[0], &format!("round {round}"));
        batch.clear();
    }
    let reused = batch.prefix_cache().unwrap().stats().reused_tokens;
    assert!(
        reused >= 16,
        "the same image's blocks were not reused: {reused} tokens"
    );
}

/// Qwen2-VL's per-image expansion: each template image token becomes its image's count; a
/// prompt with another number of image tokens is refused.
#[test]
fn qwen2_expansion_is_per_image_count() {
    let (ids, mask) = super::vision::expand_counts(&[1, 9, 2, 9, 3], 9, 9, &[3, 2]).unwrap();
    assert_eq!(ids, [1, 9, 9, 9, 2, 9, 9, 3]);
    assert_eq!(mask, [false, true, true, true, false, true, true, false]);
    for (ids, counts) in [(&[1, 9, 9][..], &[3][..]), (&[1, 2][..], &[1][..])] {
        let e = super::vision::expand_counts(ids, 9, 9, counts).unwrap_err();
        assert_eq!(code(&e), Some(Code::InvalidArg), "{e}");
    }
    let m = manifest(
        json!({"imageSize": 0, "imageTokenId": 9, "tokensPerImage": 0, "hidden": 4,
        "mrope": {"mergeSize": 2, "patchSize": 4, "patchDim": 96}}),
    );
    let mrope = m.mrope.unwrap();
    let (flat, grid) = mrope
        .patches(
            0,
            &Tensor::zeros([4, 6, 96], (tch::Kind::Float, tch::Device::Cpu)),
        )
        .unwrap();
    assert_eq!((flat.size(), grid), (vec![24, 96], (2, 3)));
    for bad in [[3, 6, 96], [4, 6, 95]] {
        let e = mrope
            .patches(0, &Tensor::zeros(bad, (tch::Kind::Float, tch::Device::Cpu)))
            .unwrap_err();
        assert_eq!(code(&e), Some(Code::InvalidArg), "{e}");
    }
}
