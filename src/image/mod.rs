//! `torch.image`: the glue (the `image` namespace, option reading, the async load task) over
//! `torch_core::image` (decode, torchvision's transforms, encode; truncated files).
pub mod js;
