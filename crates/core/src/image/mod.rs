//! Images: `transform` (decode, torchvision's transforms, encode) and `complete` (whether a file's
//! bytes hold the whole image). The `torch.image` namespace is the addon's `image` glue.
pub mod complete;
pub mod transform;
