//! `torch.image`: `transform` is the napi-free core (decode, torchvision's transforms, encode;
//! `complete` tells a truncated file),
//! `js` the glue (the `image` namespace, option reading, the async load task).
pub mod complete;
pub mod js;
pub mod transform;
