//! Text: `tokenizer` (a Hugging Face `tokenizer.json` through the `tokenizers` crate, with
//! `tokenizer_config.json`'s special tokens and limits), `offsets` (byte offsets as JS string
//! indices), `prefix` (encoding only the start of a long text that is truncated), `chat_template` (Hugging Face chat templates through `minijinja`). The `torch.text`
//! namespace and its `Tokenizer` class are the addon's `text` glue.
pub mod chat_template;
pub mod offsets;
pub mod prefix;
pub mod tokenizer;
