//! `torch.text`: the `text` namespace and its `Tokenizer` class (`js`, glue) over
//! `torch_core::text` (tokenizers, byte offsets as JS string indices, chat templates).
pub mod js;
