//! What a name may be: accounts' usernames (their sign-in handle) and display names (what others see,
//! for accounts, guests and identity-provider players alike).
//!
//! A display name is 1 to [`MAX_DISPLAY_NAME_CHARS`] characters, surrounding spaces removed, with no
//! character that is not seen or that changes how the text around it is shown. The rule is by Unicode
//! general category: control (Cc), format (Cf: the bidirectional overrides and isolates, zero-width
//! space and joiners, the soft hyphen, ...), private use (Co), surrogates (Cs), unassigned (Cn), line and
//! paragraph separators (Zl, Zp) and every space separator but U+0020 (Zs) are refused, and so are the
//! few letters and marks that render as blanks (the Hangul fillers, the braille blank, the combining
//! grapheme joiner). A name must also show at least one letter, digit, punctuation mark or symbol.
//!
//! A username is 3 to 20 ASCII letters, digits, `_` and `-`, starting with a letter. It is unique in any
//! letter case (the stored key is its lowercase form), and names that could pass for the server or
//! its own players are refused ([`RESERVED`], [`RESERVED_PREFIXES`]).

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

use super::AuthError;

/// Longest display name, in characters.
pub const MAX_DISPLAY_NAME_CHARS: usize = 32;

/// Shortest and longest username, in characters.
pub const USERNAME_CHARS: std::ops::RangeInclusive<usize> = 3..=20;

/// Usernames nobody may take (compared in lowercase).
pub const RESERVED: &[&str] = &[
    "admin",
    "administrator",
    "ai",
    "anonymous",
    "bot",
    "computer",
    "deleted",
    "draughts",
    "guest",
    "help",
    "me",
    "mod",
    "moderator",
    "null",
    "official",
    "root",
    "server",
    "staff",
    "support",
    "system",
    "undefined",
];

/// Beginnings of usernames nobody may take (compared in lowercase): `admin…`, `guest…`, `ai-…`,
/// `ai_…`, `ai<digit>…`, `computer…`, `system…`, `moderator…`, `deleted…`, `server…`.
pub const RESERVED_PREFIXES: &[&str] = &[
    "admin",
    "guest",
    "ai-",
    "ai_",
    "computer",
    "system",
    "moderator",
    "deleted",
    "server",
];

/// Characters that are letters or marks by category but show nothing.
const BLANKS: &[char] = &[
    '\u{034F}', // combining grapheme joiner
    '\u{115F}', // Hangul choseong filler
    '\u{1160}', // Hangul jungseong filler
    '\u{2800}', // braille pattern blank
    '\u{3164}', // Hangul filler
    '\u{FFA0}', // halfwidth Hangul filler
];

/// Whether `c` may appear in a display name.
fn allowed_in_name(c: char) -> bool {
    use GeneralCategory as G;
    if BLANKS.contains(&c) {
        return false;
    }
    match c.general_category() {
        G::Control
        | G::Format
        | G::PrivateUse
        | G::Surrogate
        | G::Unassigned
        | G::LineSeparator
        | G::ParagraphSeparator => false,
        G::SpaceSeparator => c == ' ',
        _ => true,
    }
}

/// Whether `c` shows something on its own (not a space or a combining mark).
fn visible(c: char) -> bool {
    use GeneralCategory as G;
    !matches!(
        c.general_category(),
        G::SpaceSeparator | G::NonspacingMark | G::EnclosingMark | G::SpacingMark
    )
}

/// The display name `name` with surrounding spaces removed, or INVALID_ARGUMENT saying what is wrong.
pub fn display_name(name: &str) -> Result<&str, AuthError> {
    let name = name.trim_matches(' ');
    let n_chars = name.chars().count();
    let refuse = || {
        AuthError::InvalidArgument(format!(
            "display_name must be 1 to {MAX_DISPLAY_NAME_CHARS} characters, with no control, invisible or text-direction characters"
        ))
    };
    if n_chars == 0 || n_chars > MAX_DISPLAY_NAME_CHARS {
        return Err(refuse());
    }
    if !name.chars().all(allowed_in_name) || !name.chars().any(visible) {
        return Err(refuse());
    }
    Ok(name)
}

/// The unique key (lowercase) of `username`, or INVALID_ARGUMENT saying what is wrong.
pub fn username_key(username: &str) -> Result<String, AuthError> {
    let chars = username.chars().count();
    let shape_ok = USERNAME_CHARS.contains(&chars)
        && username
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
        && username
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !shape_ok {
        return Err(AuthError::InvalidArgument(format!(
            "username must be {} to {} ASCII letters, digits, '_' or '-', starting with a letter",
            USERNAME_CHARS.start(),
            USERNAME_CHARS.end()
        )));
    }
    let key = username.to_ascii_lowercase();
    let digit_after_ai = key
        .strip_prefix("ai")
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
    if RESERVED.contains(&key.as_str())
        || RESERVED_PREFIXES.iter().any(|p| key.starts_with(p))
        || digit_after_ai
    {
        return Err(AuthError::InvalidArgument(format!(
            "username '{username}' is reserved: choose another"
        )));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_refuse_invisible_and_direction_characters() {
        assert_eq!(display_name("  Ann  ").unwrap(), "Ann");
        for ok in [
            "Nguyễn Văn An",
            "Иван Петров",
            "李",
            "a.b-c_d (x)",
            "Zoë ✓",
            "é", // e + combining acute: a mark after a letter
        ] {
            assert!(display_name(ok).is_ok(), "{ok:?}");
        }
        for bad in [
            "",
            "   ",
            "a\nb",
            "a\tb",
            "evil\u{202E}gnp.exe", // right-to-left override (Cf)
            "a\u{2066}b",          // left-to-right isolate (Cf)
            "a\u{200B}b",          // zero-width space (Cf)
            "a\u{200D}b",          // zero-width joiner (Cf)
            "a\u{FEFF}b",          // zero-width no-break space (Cf)
            "a\u{00AD}b",          // soft hyphen (Cf)
            "a\u{E000}b",          // private use (Co)
            "a\u{2028}b",          // line separator (Zl)
            "a\u{00A0}b",          // no-break space (Zs)
            "a\u{3000}b",          // ideographic space (Zs)
            "\u{3164}",            // Hangul filler
            "\u{2800}\u{2800}",    // braille blanks
            "a\u{034F}b",          // combining grapheme joiner
            "\u{0301}",            // a lone combining mark
            "a\u{E0041}",          // tag character (Cf)
        ] {
            assert!(display_name(bad).is_err(), "{bad:?}");
        }
        assert!(display_name(&"x".repeat(32)).is_ok());
        assert!(display_name(&"x".repeat(33)).is_err());
    }

    #[test]
    fn usernames() {
        assert_eq!(username_key("Anna_K-1").unwrap(), "anna_k-1");
        for bad in [
            "ab",
            "1abc",
            "_abc",
            "abc def",
            "abc:def",
            "anné",
            &"a".repeat(21),
            "Admin",
            "ADMINISTRATOR",
            "admin2",
            "guest",
            "Guest123",
            "ai",
            "ai8",
            "AI-8",
            "ai_level8",
            "system",
            "Moderator1",
            "deleted",
            "server-bot",
        ] {
            assert!(username_key(bad).is_err(), "{bad:?}");
        }
        // Near misses that are ordinary names.
        for ok in ["aida", "aiko", "guesto"] {
            // "guesto" starts with "guest": reserved too.
            assert_eq!(username_key(ok).is_ok(), ok != "guesto", "{ok}");
        }
    }
}
