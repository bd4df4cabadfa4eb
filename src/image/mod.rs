//! `torch.image`: `transform` is the napi-free core (decode, torchvision's transforms, encode),
//! `js` the glue (the `image` namespace, option reading, the async load task).
pub mod js;
pub mod transform;
