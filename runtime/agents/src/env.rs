//! The environment of an agent: an allow-list by name, never the parent's environment.
//!
//! The reference server merged its whole environment back into every agent, which handed
//! Claude the OpenAI key and both agents the server's own tokens. Here a child starts from an
//! empty environment (`env_clear`) and gets only: the [`BASE_ALLOWED`] names, the locale
//! (`LC_*`), its own agent's credential and configuration names, and names the operator adds.

use std::ffi::{OsStr, OsString};

/// Every agent gets these. `TERM` is left out on purpose: the agent's output is a pipe of JSON
/// events, and a terminal type only invites colour codes and prompts into it (an operator who
/// wants it adds it). `TMPDIR` is where the CLIs write their scratch files.
pub const BASE_ALLOWED: &[&str] = &["PATH", "HOME", "LANG", "LANGUAGE", "TMPDIR"];

/// The allowed part of `parent`: [`BASE_ALLOWED`], `LC_*`, `own` (the agent's credential and
/// configuration names) and `extra` (the operator's). Sorted by name, so a child's environment
/// does not depend on the order of the parent's.
pub fn allowed_environment<I>(
    parent: I,
    own: &[&str],
    extra: &[String],
) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let mut env: Vec<(OsString, OsString)> = parent
        .into_iter()
        .filter(|(name, _)| allowed(name, own, extra))
        .collect();
    env.sort();
    env.dedup_by(|a, b| a.0 == b.0);
    env
}

fn allowed(name: &OsStr, own: &[&str], extra: &[String]) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    BASE_ALLOWED.contains(&name)
        || name.starts_with("LC_")
        || own.contains(&name)
        || extra.iter().any(|allowed| allowed == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent() -> Vec<(OsString, OsString)> {
        [
            ("PATH", "/bin"),
            ("LC_ALL", "C.UTF-8"),
            ("OPENAI_API_KEY", "sk-o"),
            ("ANTHROPIC_API_KEY", "sk-a"),
            ("STRATUM_DATABASE_URL", "postgres://secret"),
            ("TERM", "xterm"),
            ("EXTRA", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
    }

    #[test]
    fn only_allowed_names_pass() {
        let env = allowed_environment(parent(), &["OPENAI_API_KEY"], &["EXTRA".to_owned()]);
        let names: Vec<_> = env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["EXTRA", "LC_ALL", "OPENAI_API_KEY", "PATH"]);
    }
}
