//! Attribute name rules (docs/PROTOCOL.md §2): `^[a-z][a-z0-9_]{0,31}$`, reserved names and
//! prefixes.

/// Longest attribute name in bytes (an Arkiv `Ident32`).
pub const MAX_NAME_BYTES: usize = 32;

/// Names the library sets itself on every record; user input may not use them.
pub const RESERVED_NAMES: [&str; 2] = ["project", "tag"];

/// Prefix reserved for privsvc system entities (heartbeats, issuer keys, spends).
pub const SYSTEM_PREFIX: &str = "privsvc";

/// Explains why `name` is not a valid attribute name, or `None` when it is valid.
///
/// Valid names match `^[a-z][a-z0-9_]{0,31}$`. This is the wire rule: reserved names such as
/// `project` pass here; use [`user_name_problem`] for names a user typed.
///
/// ```
/// use privsvc_attributes::name_problem;
/// assert_eq!(name_problem("level_2"), None);
/// assert_eq!(name_problem("Level").as_deref(), Some("names must be lowercase"));
/// ```
pub fn name_problem(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let Some(&first) = bytes.first() else {
        return Some("names must not be empty".to_owned());
    };
    if name.chars().any(char::is_uppercase) {
        return Some("names must be lowercase".to_owned());
    }
    if !first.is_ascii_lowercase() {
        return Some(format!(
            "names must start with a letter a-z, not {:?}",
            name.chars().next().unwrap_or_default()
        ));
    }
    if let Some((pos, c)) = name
        .char_indices()
        .find(|(_, c)| !matches!(c, 'a'..='z' | '0'..='9' | '_'))
    {
        return Some(format!(
            "names may contain only a-z, 0-9 and _, found {c:?} at byte {pos}"
        ));
    }
    if bytes.len() > MAX_NAME_BYTES {
        return Some(format!(
            "names are at most {MAX_NAME_BYTES} bytes, this one has {}",
            bytes.len()
        ));
    }
    None
}

/// Explains why `name` is reserved (`project`, `tag`, or the `privsvc` prefix), or `None`.
pub fn reserved_problem(name: &str) -> Option<String> {
    if RESERVED_NAMES.contains(&name) {
        return Some(format!(
            "{name:?} is reserved: the library sets it on every record"
        ));
    }
    if name.starts_with(SYSTEM_PREFIX) {
        return Some(format!(
            "names starting with {SYSTEM_PREFIX:?} are reserved for privsvc system entities"
        ));
    }
    None
}

/// Fails on the first name that the Arkiv node would refuse or privsvc does not allow
/// ([`name_problem`]), naming it and the reason.
///
/// ```
/// use privsvc_attributes::assert_node_safe_names;
/// assert!(assert_node_safe_names(["level", "city"]).is_ok());
/// let e = assert_node_safe_names(["level", "City"]).unwrap_err();
/// assert_eq!(e.to_string(), r#"attribute "City": names must be lowercase"#);
/// ```
pub fn assert_node_safe_names<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Result<(), crate::AttributeError> {
    for name in names {
        if let Some(reason) = name_problem(name) {
            return Err(crate::AttributeError::Invalid {
                name: name.to_owned(),
                reason,
            });
        }
    }
    Ok(())
}

/// [`name_problem`] plus [`reserved_problem`]: the check for names that come from user input.
pub fn user_name_problem(name: &str) -> Option<String> {
    name_problem(name).or_else(|| reserved_problem(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_names() {
        for n in [
            "a",
            "z9",
            "a_b_c",
            "level",
            &"a".repeat(32),
            "project",
            "privsvc_kind",
        ] {
            assert_eq!(name_problem(n), None, "{n}");
        }
    }

    #[test]
    fn explains_each_invalid_name() {
        let cases = [
            ("", "must not be empty"),
            ("Foo", "must be lowercase"),
            ("fooÉ", "must be lowercase"),
            ("1abc", "must start with a letter"),
            ("_abc", "must start with a letter"),
            ("a-b", "found '-' at byte 1"),
            ("a.b", "found '.' at byte 1"),
            ("a b", "found ' ' at byte 1"),
            ("aé", "found 'é' at byte 1"),
            ("a\0", "found '\\0' at byte 1"),
            (&"a".repeat(33), "at most 32 bytes, this one has 33"),
        ];
        for (name, want) in cases {
            let got = name_problem(name).unwrap_or_default();
            assert!(got.contains(want), "{name:?}: {got}");
        }
    }

    #[test]
    fn reserved_names_are_refused_for_users_only() {
        assert!(user_name_problem("project").unwrap().contains("reserved"));
        assert!(user_name_problem("tag").unwrap().contains("reserved"));
        assert!(user_name_problem("privsvc_kind")
            .unwrap()
            .contains("system"));
        assert!(user_name_problem("privsvcx").is_some());
        assert_eq!(user_name_problem("tags"), None);
        assert_eq!(user_name_problem("projects"), None);
        assert!(user_name_problem("Tag").unwrap().contains("lowercase"));
    }
}
