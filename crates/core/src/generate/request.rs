//! What one generation asks for: the caller's options (a typed bag, which the addon's
//! `js_options!` reads from JS) over the model's defaults (`generation_config.json`).
use super::constraint::Format;
use super::logprobs::MAX_TOP;
use super::sample::{self, Params, Sampling};
use crate::error::{bail_code, Code};
use anyhow::Result;
use serde_json::Value as Json;

/// Generation options as the caller gives them; None is the model's default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    pub max_new_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub top_k: Option<u64>,
    pub top_p: Option<f64>,
    pub min_p: Option<f64>,
    pub repetition_penalty: Option<f64>,
    pub seed: Option<u64>,
    pub stop: Option<Vec<String>>,
    /// What the output must be (a JSON schema, a grammar, tool calls): None for free text.
    pub format: Option<Format>,
    /// Report each token's log-probability (`super::logprobs`).
    pub logprobs: Option<bool>,
    /// And the likeliest tokens at each step, 0 to `logprobs::MAX_TOP` (only with `logprobs`).
    pub top_logprobs: Option<u64>,
    /// A prompt and a given `max_new_tokens` that together pass the context are refused
    /// (`Request::check_context`) rather than cut at the context.
    pub strict_context: Option<bool>,
}

/// The model's defaults, as the numbers users give (an option overrides one of them: a
/// temperature over the config's top-k still samples from the top k).
#[derive(Clone, Debug, PartialEq)]
pub struct Defaults {
    pub max_new_tokens: usize,
    pub temperature: f64,
    pub top_k: usize,
    pub top_p: f64,
    pub min_p: f64,
    pub repetition_penalty: f64,
}

/// One generation's settings: sampling, limits, stop strings, the output's format.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub params: Params,
    pub max_new_tokens: usize,
    pub stop: Vec<String>,
    /// Compiled against the model's vocabulary when the sequence is made (off the JS thread).
    pub format: Option<Format>,
    /// Each token's log-probability with this many alternatives (None: not reported).
    pub logprobs: Option<usize>,
    /// Refuse a prompt that leaves fewer than `max_new_tokens` slots of the context.
    pub strict_context: bool,
}

impl Request {
    /// With `strict_context`, a prompt of `prompt_tokens` that leaves fewer than
    /// `max_new_tokens` of `max_context` is `InvalidArg`, worded as vLLM's 400 (a prompt that
    /// fills the context alone is the sequence's own error, naming the prompt).
    pub fn check_context(&self, prompt_tokens: usize, max_context: usize) -> Result<()> {
        let (n, c, p) = (self.max_new_tokens, max_context, prompt_tokens);
        if self.strict_context && p < c && p.saturating_add(n) > c {
            bail_code!(
                Code::InvalidArg,
                "'maxNewTokens' is too large: {n}. This model's maximum context length is {c} \
                 tokens and your request has {p} input tokens ({n} > {c} - {p})"
            );
        }
        Ok(())
    }
}

impl Defaults {
    /// transformers' defaults where `generation_config.json` says nothing: sampling only when
    /// `do_sample` is true, 20 new tokens... except `max_new_tokens`, 256 here.
    pub fn from_config(generation_config: &Json) -> Defaults {
        let g = generation_config;
        let num = |k: &str, d: f64| g[k].as_f64().unwrap_or(d);
        let sampling = g["do_sample"].as_bool().unwrap_or(false);
        Defaults {
            max_new_tokens: g["max_new_tokens"].as_u64().unwrap_or(256) as usize,
            temperature: if sampling { num("temperature", 1.0) } else { 0.0 },
            top_k: if sampling {
                g["top_k"].as_u64().unwrap_or(50) as usize
            } else {
                0
            },
            top_p: if sampling { num("top_p", 1.0) } else { 1.0 },
            min_p: if sampling { num("min_p", 0.0) } else { 0.0 },
            repetition_penalty: num("repetition_penalty", 1.0),
        }
    }

    /// These defaults overridden by `o`; values out of range are `InvalidArg` naming the option.
    pub fn request(&self, o: &Options) -> Result<Request> {
        let max_new_tokens = o.max_new_tokens.unwrap_or(self.max_new_tokens as u64);
        if max_new_tokens < 1 {
            bail_code!(
                Code::InvalidArg,
                "options.maxNewTokens: expected a whole number ≥ 1, got {max_new_tokens}"
            );
        }
        let top_k = o.top_k.map_or(self.top_k, |k| k.min(usize::MAX as u64) as usize);
        let sampling = Sampling::new(
            o.temperature.unwrap_or(self.temperature),
            top_k,
            o.top_p.unwrap_or(self.top_p),
            o.min_p.unwrap_or(self.min_p),
        )?;
        let stop = o.stop.clone().unwrap_or_default();
        if stop.iter().any(String::is_empty) {
            bail_code!(Code::InvalidArg, "options.stop: a stop string may not be empty");
        }
        let logprobs = match (o.logprobs.unwrap_or(false), o.top_logprobs) {
            (_, Some(k)) if k > MAX_TOP as u64 => bail_code!(
                Code::InvalidArg,
                "options.topLogprobs: expected a whole number in [0, {MAX_TOP}], got {k}"
            ),
            (false, Some(_)) => bail_code!(Code::InvalidArg, "options.topLogprobs: only with logprobs: true"),
            (true, k) => Some(k.unwrap_or(0) as usize),
            (false, None) => None,
        };
        Ok(Request {
            params: Params {
                sampling,
                repetition_penalty: sample::repetition_penalty(
                    o.repetition_penalty.unwrap_or(self.repetition_penalty),
                )?,
                seed: o.seed.unwrap_or(0),
            },
            max_new_tokens: max_new_tokens.min(usize::MAX as u64) as usize,
            stop,
            format: o.format.clone(),
            logprobs,
            // Only a given maxNewTokens: the default is the model's, within its context.
            strict_context: o.strict_context.unwrap_or(false) && o.max_new_tokens.is_some(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_come_from_generation_config_and_options_override_them() {
        let g: Json = serde_json::from_str(
            r#"{"do_sample": true, "temperature": 0.7, "top_p": 0.9, "max_new_tokens": 40}"#,
        )
        .unwrap();
        let d = Defaults::from_config(&g);
        assert_eq!(
            (d.temperature, d.top_k, d.top_p, d.max_new_tokens),
            (0.7, 50, 0.9, 40)
        );
        let r = d.request(&Options::default()).unwrap();
        assert_eq!(r.params.sampling.numbers(), (0.7, 50, 0.9, 0.0));
        let greedy = Defaults::from_config(&Json::Null);
        assert_eq!(
            greedy.request(&Options::default()).unwrap().params.sampling,
            Sampling::Greedy
        );
        let r = greedy
            .request(&Options {
                temperature: Some(1.0),
                top_k: Some(5),
                stop: Some(vec!["x".into()]),
                seed: Some(3),
                ..Options::default()
            })
            .unwrap();
        assert_eq!(r.params.sampling.numbers(), (1.0, 5, 1.0, 0.0));
        assert_eq!((r.params.seed, r.stop), (3, vec!["x".to_string()]));
    }

    #[test]
    fn bad_options_are_invalid_args_naming_the_option() {
        let d = Defaults::from_config(&Json::Null);
        for (o, says) in [
            (
                Options {
                    max_new_tokens: Some(0),
                    ..Options::default()
                },
                "options.maxNewTokens",
            ),
            (
                Options {
                    top_p: Some(0.0),
                    ..Options::default()
                },
                "options.topP",
            ),
            (
                Options {
                    temperature: Some(-1.0),
                    ..Options::default()
                },
                "options.temperature",
            ),
            (
                Options {
                    stop: Some(vec![String::new()]),
                    ..Options::default()
                },
                "options.stop",
            ),
            (
                Options {
                    repetition_penalty: Some(0.0),
                    ..Options::default()
                },
                "options.repetitionPenalty",
            ),
        ] {
            let e = d.request(&o).unwrap_err();
            let (code, message) = crate::error::describe(&e);
            assert_eq!(code, Code::InvalidArg, "{o:?}");
            assert!(message.contains(says), "{o:?}: {message}");
        }
    }

    #[test]
    fn logprobs_with_zero_to_twenty_alternatives() {
        let d = Defaults::from_config(&Json::Null);
        let ask = |logprobs, top_logprobs| {
            d.request(&Options {
                logprobs,
                top_logprobs,
                ..Options::default()
            })
        };
        assert_eq!(ask(None, None).unwrap().logprobs, None);
        assert_eq!(ask(Some(false), None).unwrap().logprobs, None);
        assert_eq!(ask(Some(true), None).unwrap().logprobs, Some(0));
        assert_eq!(ask(Some(true), Some(20)).unwrap().logprobs, Some(20));
        let e = ask(Some(true), Some(21)).unwrap_err().to_string();
        assert!(
            e.contains("options.topLogprobs: expected a whole number in [0, 20], got 21"),
            "{e}"
        );
        let e = ask(None, Some(2)).unwrap_err().to_string();
        assert!(e.contains("only with logprobs: true"), "{e}");
    }

    #[test]
    fn a_strict_context_refuses_a_prompt_and_max_new_tokens_past_it() {
        let d = Defaults::from_config(&Json::Null);
        let ask = |max_new_tokens, strict_context| {
            d.request(&Options {
                max_new_tokens,
                strict_context,
                ..Options::default()
            })
            .unwrap()
        };
        let strict = ask(Some(100), Some(true));
        assert!(strict.check_context(156, 256).is_ok());
        let e = strict.check_context(157, 256).unwrap_err();
        let (code, message) = crate::error::describe(&e);
        assert_eq!(code, Code::InvalidArg);
        assert_eq!(
            message,
            "'maxNewTokens' is too large: 100. This model's maximum context length is 256 tokens and \
             your request has 157 input tokens (100 > 256 - 157)"
        );
        // A prompt past the context alone is the sequence's error; without strictness, or
        // without a given maxNewTokens (the model's default), the context cuts the output.
        assert!(strict.check_context(256, 256).is_ok());
        assert!(ask(Some(100), None).check_context(200, 256).is_ok());
        assert!(ask(None, Some(true)).check_context(200, 256).is_ok());
    }
}
