//! `torch.text`: `tokenizer` (a Hugging Face `tokenizer.json` through the `tokenizers` crate,
//! with `tokenizer_config.json`'s special tokens and limits), `offsets` (byte offsets as JS
//! string indices), `chat_template` (Hugging Face chat templates through `minijinja`) are the
//! napi-free core; `js` the glue (the `text` namespace and its `Tokenizer` class).
pub mod chat_template;
pub mod js;
pub mod offsets;
pub mod tokenizer;
