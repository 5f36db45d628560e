//! Who decides, as the server can vouch for it. Over HTTP that is the access token's name (the
//! guard of `stratum-mcp serve` checked its secret); everywhere else it is the operating-system
//! user running the process, written `os:<user>`: the operator CLI, and a stdio server, whose
//! client the same user started. Token names cannot hold `:`, so no token can pass for an
//! operating-system user.
//!
//! The user is the one the kernel runs the process as (the effective uid), named by the
//! password database, never by `$USER` or `$LOGNAME`, which anyone can set. A uid the database
//! does not name is written `os:#<uid>`.

use std::sync::OnceLock;

/// The prefix of an operating-system user's identity.
pub const OS_PREFIX: &str = "os:";

/// The identity of the operating-system user running this process: `os:alice`.
pub fn os_user() -> String {
    static USER: OnceLock<String> = OnceLock::new();
    USER.get_or_init(|| {
        let name = whoami::username()
            .ok()
            .filter(|name| is_user_name(name))
            .unwrap_or_else(|| format!("#{}", rustix::process::geteuid().as_raw()));
        format!("{OS_PREFIX}{name}")
    })
    .clone()
}

/// Whether `identity` can name someone who decides gates: an access token's name, or
/// `os:<user>`; `Err` says why not.
pub fn check(identity: &str) -> Result<(), String> {
    match identity.strip_prefix(OS_PREFIX) {
        Some(user) if is_user_name(user) || is_uid(user) => Ok(()),
        Some(_) => Err(format!(
            "`{identity}` is not an operating-system user: write `os:` and the user's login \
             name (`os:alice`), or `os:#` and a uid the password database does not name"
        )),
        None => crate::cli::token::check_name(identity).map_err(|why| {
            format!("`{identity}` is neither an access token's name ({why}) nor `os:<user>`")
        }),
    }
}

/// A login name as the password database gives them: portable characters only, so that it
/// prints safely and cannot be mistaken for anything else.
fn is_user_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '$' | '@'))
}

/// `#1000`: a uid the password database does not name.
fn is_uid(text: &str) -> bool {
    text.strip_prefix('#').is_some_and(|digits| {
        !digits.is_empty() && digits.len() <= 10 && digits.bytes().all(|b| b.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_os_user_is_the_effective_uid_s_name_not_the_environment_s() {
        let user = os_user();
        assert!(user.starts_with(OS_PREFIX), "{user}");
        assert_eq!(check(&user), Ok(()));
        let uid = rustix::process::geteuid().as_raw();
        let named = std::process::Command::new("id")
            .args(["-un", &uid.to_string()])
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
        match named {
            Some(name) => assert_eq!(user, format!("os:{name}")),
            None => assert_eq!(user, format!("os:#{uid}")),
        }
    }

    #[test]
    fn approvers_are_token_names_or_os_users() {
        for good in [
            "alice",
            "ci-agent",
            "bob@example.com",
            "os:alice",
            "os:#1000",
        ] {
            assert_eq!(check(good), Ok(()), "{good}");
        }
        for bad in ["os:", "os:al ice", "os:#", "os:#12a", "al:ice", "", "a b"] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }
}
