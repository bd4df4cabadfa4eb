//! The forced decoder prompt, as transformers 5.23's `WhisperGenerationMixin._retrieve_init_tokens`
//! builds it: `<|startoftranscript|>`, generation_config's `forced_decoder_ids` where present, the
//! language (given, or detected: `None` here, filled by the caller), the task, `<|notimestamps|>`.
use super::Settings;
use crate::error::{fail, Code};
use anyhow::Result;

/// `task`: what the decoder is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    Transcribe,
    Translate,
}

impl Task {
    pub fn name(self) -> &'static str {
        match self {
            Task::Transcribe => "transcribe",
            Task::Translate => "translate",
        }
    }
}

/// The id of `language`: a code (`en`), a token (`<|en|>`) or a name transformers knows
/// (`english`, any case), as `generate(language=...)` accepts.
pub fn language_id(s: &Settings, language: &str) -> Result<i64> {
    let lower = language.to_lowercase();
    let token = if lower.starts_with("<|") {
        lower.clone()
    } else if let Some(code) = s.language_names.get(&lower) {
        format!("<|{code}|>")
    } else {
        format!("<|{lower}|>")
    };
    s.lang_to_id.get(&token).copied().ok_or_else(|| {
        let hint = "a code such as 'en', or a name such as 'english'";
        fail(
            Code::InvalidArg,
            format!("language '{language}' is not one this model knows ({hint})"),
        )
    })
}

/// The prompt before the language is known: the start token and the forced ids that follow it
/// position by position; `Some(index)` where the language goes when it is not among them.
pub fn forced_start(s: &Settings) -> (Vec<Option<i64>>, bool) {
    let mut init = vec![Some(s.decoder_start)];
    let mut forced = s.forced_decoder_ids.clone();
    forced.sort_by_key(|(i, _)| *i);
    for (i, id) in forced {
        if i != init.len() {
            break;
        }
        init.push(id);
    }
    let language_undefined = init.len() <= 1 || init[1].is_none();
    (init, language_undefined)
}

/// The whole prompt: `language` (given or detected), then the task and `<|notimestamps|>` by
/// transformers' rules — with a detected language and no task, no task token is added (as
/// transformers does).
pub fn build(
    s: &Settings,
    language: Option<i64>,
    language_given: bool,
    task: Option<Task>,
    return_timestamps: bool,
) -> Result<Vec<i64>> {
    let (mut init, _) = forced_start(s);
    if let Some(lang) = language {
        if init.len() > 1 {
            init[1] = Some(lang);
        } else {
            init.push(Some(lang));
        }
    }
    let mut init: Vec<i64> = init.into_iter().flatten().collect();
    let task_ids: Vec<i64> = s.task_to_id.values().copied().collect();
    if let Some(task) = task {
        let id = *s.task_to_id.get(task.name()).ok_or_else(|| {
            fail(
                Code::InvalidArg,
                format!("task '{}': this model has no task tokens", task.name()),
            )
        })?;
        // transformers appends, then replaces every task id with this one (replace_or_add).
        init.push(id);
        for t in init.iter_mut() {
            if task_ids.contains(t) {
                *t = id;
            }
        }
    } else if language_given && !s.task_to_id.is_empty() && !init.iter().any(|t| task_ids.contains(t)) {
        init.push(s.task_to_id["transcribe"]);
    }
    if let Some(nt) = s.no_timestamps {
        if !return_timestamps && init.last() != Some(&nt) {
            init.push(nt);
        } else if return_timestamps && init.last() == Some(&nt) {
            init.pop();
        }
    }
    Ok(init)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            decoder_start: 50258,
            no_timestamps: Some(50363),
            lang_to_id: [("<|en|>".to_string(), 50259), ("<|fr|>".to_string(), 50265)].into(),
            task_to_id: [
                ("translate".to_string(), 50358),
                ("transcribe".to_string(), 50359),
            ]
            .into(),
            language_names: [("english".to_string(), "en".to_string())].into(),
            ..Settings::default()
        }
    }

    #[test]
    fn languages_by_code_token_or_name() {
        let s = settings();
        assert_eq!(language_id(&s, "en").unwrap(), 50259);
        assert_eq!(language_id(&s, "<|fr|>").unwrap(), 50265);
        assert_eq!(language_id(&s, "English").unwrap(), 50259);
        assert!(language_id(&s, "klingon").is_err());
    }

    #[test]
    fn prompts_follow_transformers_rules() {
        let s = settings();
        // A given language defaults the task to transcribe.
        assert_eq!(
            build(&s, Some(50259), true, None, false).unwrap(),
            vec![50258, 50259, 50359, 50363]
        );
        assert_eq!(
            build(&s, Some(50265), true, Some(Task::Translate), false).unwrap(),
            vec![50258, 50265, 50358, 50363]
        );
        // A detected language without a task: no task token.
        assert_eq!(
            build(&s, Some(50259), false, None, false).unwrap(),
            vec![50258, 50259, 50363]
        );
        assert_eq!(
            build(&s, Some(50259), false, None, true).unwrap(),
            vec![50258, 50259]
        );
    }

    #[test]
    fn forced_decoder_ids_fill_the_prompt_and_the_task_replaces_theirs() {
        let mut s = settings();
        s.forced_decoder_ids = vec![(1, None), (2, Some(50359))];
        let (init, undefined) = forced_start(&s);
        assert_eq!(init, vec![Some(50258), None, Some(50359)]);
        assert!(undefined);
        assert_eq!(
            build(&s, Some(50259), true, Some(Task::Translate), false).unwrap(),
            vec![50258, 50259, 50358, 50358, 50363]
        );
    }
}
