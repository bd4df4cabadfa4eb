"""Idefics3 and SmolVLM for export_vlm.py: the tiling image processor (scripted), the vision side
(SigLIP-like tower, pixel shuffle, projection) and the per-image prompt expansion as data.

The image processor (Idefics3ImageProcessor / SmolVLMImageProcessor, transformers 5's torchvision
backend) resizes an image so that its longest edge is `size.longest_edge`, then (with
`do_image_splitting`) to multiples of the tile (`max_image_size.longest_edge`, the vision tower's
`image_size`) and cuts it into rows x cols tiles, plus the whole image resized to one tile (the
"global" image); without splitting, the image is resized to one tile. The processor writes, for
each image, `<fake_token_around_image><row_r_col_c>` + N `<image>` per tile, "\\n" after each row,
then "\\n<fake_token_around_image><global-img>" + N `<image>` + `<fake_token_around_image>` (an
unsplit image: the global part alone), N = `image_seq_len`: the prompt depends on each image's grid.

preprocess.pt returns float32 `[rows + 1, cols, 3, T, T]`: the normalized tiles in their grid,
then a row holding the global image in column 0 (the rest of that row zeros: it is not a tile);
an unsplit image is `[1, 1, 3, T, T]`. The shape says the grid, which the prompt needs (the
number of frames alone does not: 2 x 4 and 4 x 2 tiles are both 9 frames).
"""
from export_causal_lm import ExportError

ARCHITECTURES = ("Idefics3ForConditionalGeneration", "SmolVLMForConditionalGeneration")
MODEL_TYPES = ("idefics3", "smolvlm")
# transformers' MAX_IMAGE_SIZE (image_processing_idefics3.py): the resized longest edge's cap.
MAX_IMAGE_SIZE = 4096
RESAMPLE = {1: "lanczos", 2: "bilinear", 3: "bicubic"}


def is_idefics3(vlm):
    return vlm.config.model_type in MODEL_TYPES


def allow_without_num2words():
    """SmolVLMProcessor refuses to load without the num2words package, which it uses only to
    write video prompts ("... the following series of {frame_count} frames ..."). Image prompts,
    all this export makes, never call it: where it is missing, a stand-in that refuses."""
    try:
        import num2words  # noqa: F401
    except ImportError:
        from transformers.models.smolvlm import processing_smolvlm

        def num2words(*_args, **_kwargs):
            raise ExportError("video prompts need the num2words package")

        if getattr(processing_smolvlm, "num2words", None) is None:
            processing_smolvlm.num2words = num2words


def settings(processor):
    """The image processor's resolved settings (manifest.json's vision.imageProcessor)."""
    p = processor.image_processor
    name = type(p).__name__
    size, tile = dict(p.size or {}), dict(p.max_image_size or {})
    if p.do_resize and set(k for k, v in size.items() if v is not None) != {"longest_edge"}:
        raise ExportError(f"{name}: size {size} (supported: longest_edge)")
    if set(k for k, v in tile.items() if v is not None) != {"longest_edge"}:
        raise ExportError(f"{name}: max_image_size {tile} (supported: longest_edge)")
    resample = int(p.resample) if p.resample is not None else 2
    if resample not in RESAMPLE:
        raise ExportError(f"{name}: resample {p.resample} is not lanczos, bilinear or bicubic")
    as3 = lambda v: [float(x) for x in (v if isinstance(v, (list, tuple)) else [v] * 3)]  # noqa: E731
    return {
        "processor": name,
        "doResize": bool(p.do_resize),
        "size": {"longest_edge": int(size["longest_edge"])} if p.do_resize else {},
        "maxImageSize": {"longest_edge": int(tile["longest_edge"])},
        "doImageSplitting": bool(p.do_image_splitting),
        "resample": RESAMPLE[resample],
        "doRescale": bool(p.do_rescale),
        "rescaleFactor": float(p.rescale_factor),
        "doNormalize": bool(p.do_normalize),
        "imageMean": as3(p.image_mean) if p.image_mean is not None else None,
        "imageStd": as3(p.image_std) if p.image_std is not None else None,
    }


def Preprocess(torch, s):
    """The processor for one uint8 [3, h, w] image, scripted: the same ATen kernels (antialiased
    uint8 resizes, unfold, the fused rescale-and-normalize) -> [rows + 1, cols, 3, T, T]."""
    import math

    from export_common import image_processor_base

    F = torch.nn.functional
    longest = int(s["size"]["longest_edge"]) if s["doResize"] else 0
    tile = int(s["maxImageSize"]["longest_edge"])

    class ImageProcessor(image_processor_base(torch, s)):
        def __init__(self):
            super().__init__()
            self.longest, self.tile, self.split, self.mode = longest, tile, s["doImageSplitting"], s["resample"]

        def resize(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
            if x.shape[-2] == h and x.shape[-1] == w:  # torchvision's resize returns it as it is
                return x
            return F.interpolate(x, size=[h, w], mode=self.mode, align_corners=False, antialias=True)

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            x = image.unsqueeze(0)
            t = self.tile
            if self.longest > 0:
                # _resize_output_size_rescale_to_max_len, then _resize_output_size_scale_below_upper_bound
                h, w = x.shape[-2], x.shape[-1]
                ratio = w / h
                if w >= h:
                    w = self.longest
                    h = int(w / ratio)
                    h = h + 1 if h % 2 != 0 else h
                else:
                    h = self.longest
                    w = int(h * ratio)
                    w = w + 1 if w % 2 != 0 else w
                h, w = max(h, 1), max(w, 1)
                ratio = w / h
                if w >= h and w > 4096:
                    w = 4096
                    h = int(w / ratio)
                elif h > w and h > 4096:
                    h = 4096
                    w = int(h * ratio)
                x = self.resize(x, max(h, 1), max(w, 1))
            if not self.split:
                return self.finish(self.resize(x, t, t)[0]).view(1, 1, 3, t, t)
            # resize_for_vision_encoder: multiples of the tile
            h, w = x.shape[-2], x.shape[-1]
            ratio = w / h
            if w >= h:
                w = int(math.ceil(w / t)) * t
                h = int(math.ceil(int(w / ratio) / t)) * t
            else:
                h = int(math.ceil(h / t)) * t
                w = int(math.ceil(int(h * ratio) / t)) * t
            x = self.resize(x, h, w)
            if h <= t and w <= t:
                return self.finish(x[0]).view(1, 1, 3, t, t)
            rows, cols = h // t, w // t
            tiles = x.unfold(2, t, t).unfold(3, t, t)[0].permute(1, 2, 0, 3, 4)  # [rows, cols, 3, t, t]
            grid = torch.zeros(rows + 1, cols, 3, t, t)
            grid[:rows] = self.finish(tiles)
            grid[rows, 0] = self.finish(self.resize(x, t, t)[0])
            return grid

    return ImageProcessor().eval()


def vision_module(vlm):
    """[frames, 3, T, T] -> [frames, N, hidden]: Idefics3Model.get_image_features on frames that
    are all whole tiles (every patch attended; the processor pads with whole zero frames, which
    transformers drops, and never inside a tile)."""
    import torch

    class Vision(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tower, self.connector = vlm.model.vision_model, vlm.model.connector

        def forward(self, pixel_values):
            states = self.tower(pixel_values=pixel_values, return_dict=True).last_hidden_state
            return self.connector(states).float()

    return Vision().eval()


def frames(grid):
    """preprocess.pt's [rows + 1, cols, 3, T, T] -> (the processor's frames [n, 3, T, T], rows, cols)."""
    import torch

    r, c = grid.shape[0], grid.shape[1]
    if r == 1:
        return grid[0, :1], 0, 0
    return torch.cat([grid[:r - 1].reshape(-1, *grid.shape[2:]), grid[r - 1, :1]]), r - 1, c


def expansion(processor, vlm, settings_, tokens_per_image):
    """What the processor writes for each image, as ids pieces (vision.rs composes them per
    image grid): an unsplit image is `global` + N image ids + `globalEnd`; a rows x cols one is,
    per tile, `tiles[r][c]` + N image ids, `rowEnd` after each row but the last, then
    `lastRowEnd` + `global` + N + `globalEnd` (the last row's "\\n" and the global part's "\\n"
    tokenize together). Checked against the processor's own string for every grid up to
    `maxGrid` x `maxGrid`, and on probe chats that the template's image token so expanded gives
    the processor's input_ids."""
    import torch

    tokenizer = processor.tokenizer
    template_token = processor.image_token
    template_id = tokenizer.convert_tokens_to_ids(template_token)
    image_id = int(vlm.config.image_token_id)
    if template_id != image_id:
        raise ExportError(f"the processor's image token {template_token!r} is not the model's image_token_id {image_id}")
    encode = lambda t: tokenizer(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    fake, glob = processor.fake_image_token, getattr(processor, "global_image_token", None) or processor.global_image_tag
    tile = settings_["maxImageSize"]["longest_edge"]
    longest = settings_["size"].get("longest_edge", tile)
    most = -(-min(longest, MAX_IMAGE_SIZE) // tile) if settings_["doImageSplitting"] else 0
    n = tokens_per_image
    pieces = {
        "global": encode(fake + glob), "globalEnd": encode(fake), "rowEnd": encode("\n"),
        "lastRowEnd": encode("\n\n"),
        "tiles": [[encode(f"{fake}<row_{r + 1}_col_{c + 1}>") for c in range(most)] for r in range(most)],
    }
    # The pieces must keep their ids: "\n\n" + fake + global tokenized whole is "\n\n", then the specials.
    if encode("\n\n" + fake + glob) != pieces["lastRowEnd"] + pieces["global"]:
        raise ExportError("the tokenizer merges the image prompt's newlines with its special tokens")

    def compose(rows, cols):
        ids = []
        for r in range(rows):
            for c in range(cols):
                ids += pieces["tiles"][r][c] + [image_id] * n
            if r < rows - 1:
                ids += pieces["rowEnd"]
        if rows:
            ids += pieces["lastRowEnd"]
        return ids + pieces["global"] + [image_id] * n + pieces["globalEnd"]

    grids = [(0, 0)] + [(r, c) for r in range(1, most + 1) for c in range(1, most + 1)]
    for rows, cols in grids:
        text = processor.replace_image_token({"rows": [[rows]], "cols": [[cols]]}, 0)
        if encode(text) != compose(rows, cols):
            raise ExportError(f"the image prompt for a {rows} x {cols} grid is not what the processor writes")
    for parts in ([{"type": "text", "text": "Look: "}, {"type": "image"}, {"type": "text", "text": " What is it?"}],
                  [{"type": "image"}, {"type": "text", "text": "What is it?"}]):
        text = processor.apply_chat_template([{"role": "user", "content": parts}], tokenize=False,
                                             add_generation_prompt=True)
        plain = encode(text)
        if plain.count(template_id) != 1:
            raise ExportError(f"the chat template writes {plain.count(template_id)} '{template_token}' tokens for one image")
        for hw in ((tile, 2 * tile + 7), (3 * tile, tile // 2 + 1), (tile // 2, tile // 2)):
            image = torch.zeros(3, *hw, dtype=torch.uint8)
            out = processor(text=text, images=[image], add_special_tokens=False, return_tensors="pt")
            grid = processor.image_processor(images=[image], return_row_col_info=True)
            rows, cols = grid["rows"][0][0], grid["cols"][0][0]
            at = plain.index(template_id)
            if out["input_ids"][0].tolist() != plain[:at] + compose(rows, cols) + plain[at + 1:]:
                raise ExportError(f"the processor's input_ids for a {hw[0]}x{hw[1]} image are not the template's "
                                  f"with '{template_token}' expanded by ids")
    return {"templateToken": template_token, "templateTokenId": template_id, "text": None, "tokenLevel": True,
            "grid": {"maxGrid": most, **pieces}}


def check_pixels(processor, preprocess, log):
    """preprocess.pt against the processor's pixel_values on random images of several sizes and
    aspect ratios (one smaller than a tile): max difference, and the same grid."""
    import torch

    tile = processor.image_processor.max_image_size["longest_edge"]
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for h, w in ((tile // 2 + 1, tile // 3 + 2), (2 * tile + 5, tile), (tile, 3 * tile + 1), (5, 4 * tile)):
        image = torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g)
        want = processor.image_processor(images=[image], return_tensors="pt", return_row_col_info=True)
        got, rows, cols = frames(preprocess(image))
        if (rows, cols) != (want["rows"][0][0], want["cols"][0][0]) or got.shape != want["pixel_values"][0].shape:
            raise ExportError(f"preprocess.pt: a {h}x{w} image makes a {rows} x {cols} grid {list(got.shape)}, the "
                              f"processor {want['rows'][0][0]} x {want['cols'][0][0]} {list(want['pixel_values'][0].shape)}")
        worst = max(worst, (got - want["pixel_values"][0]).abs().max().item())
    log(f"preprocess.pt vs {type(processor.image_processor).__name__} on 4 image sizes: max difference {worst:.2g}")
    if not worst <= 1e-6:
        raise ExportError(f"preprocess.pt differs from the processor by {worst:.3g} (> 1e-6)")
    return worst
