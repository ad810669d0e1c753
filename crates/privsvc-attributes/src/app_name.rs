//! [`AppName`]: the name of an app, as the API, the issuer and the token message take it.

use std::fmt;

/// The shortest app name, in bytes.
pub const MIN_APP_NAME_BYTES: usize = 1;

/// The longest app name, in bytes.
pub const MAX_APP_NAME_BYTES: usize = 128;

/// A validated app name: 1 to 128 bytes of UTF-8.
///
/// It serializes as a JSON string; deserializing checks the length.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct AppName(String);

/// An app name that is empty or longer than [`MAX_APP_NAME_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid app name of {len} bytes: an app name has {MIN_APP_NAME_BYTES} to {MAX_APP_NAME_BYTES} bytes of UTF-8")]
pub struct InvalidAppName {
    /// The name's length in bytes.
    pub len: usize,
}

impl AppName {
    /// `name` as an app name, if it has 1 to 128 bytes.
    pub fn new(name: impl Into<String>) -> Result<AppName, InvalidAppName> {
        let name = name.into();
        if (MIN_APP_NAME_BYTES..=MAX_APP_NAME_BYTES).contains(&name.len()) {
            Ok(AppName(name))
        } else {
            Err(InvalidAppName { len: name.len() })
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as a `String`.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for AppName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for AppName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for AppName {
    type Err = InvalidAppName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AppName::new(s)
    }
}

impl TryFrom<String> for AppName {
    type Error = InvalidAppName;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        AppName::new(s)
    }
}

impl TryFrom<&str> for AppName {
    type Error = InvalidAppName;

    fn try_from(s: &str) -> Result<Self, Self::Error> {
        AppName::new(s)
    }
}

impl<'de> serde::Deserialize<'de> for AppName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        AppName::new(name).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_one_to_128_bytes_are_accepted() {
        assert_eq!(AppName::new("a").unwrap().as_str(), "a");
        let longest = "é".repeat(64);
        assert_eq!(longest.len(), 128);
        assert_eq!(AppName::new(longest.clone()).unwrap().as_str(), longest);
    }

    #[test]
    fn empty_and_too_long_names_are_refused_with_their_length() {
        assert_eq!(AppName::new(""), Err(InvalidAppName { len: 0 }));
        assert_eq!(
            AppName::new("x".repeat(129)),
            Err(InvalidAppName { len: 129 })
        );
        let e = AppName::new("é".repeat(65)).unwrap_err();
        assert_eq!(e.len, 130);
        assert!(e.to_string().contains("130 bytes"), "{e}");
        assert!(e.to_string().contains("1 to 128"), "{e}");
    }

    #[test]
    fn serde_is_a_plain_string_and_deserializing_validates() {
        let app = AppName::new("notes").unwrap();
        assert_eq!(serde_json::to_string(&app).unwrap(), "\"notes\"");
        let back: AppName = serde_json::from_str("\"notes\"").unwrap();
        assert_eq!(back, app);
        let e = serde_json::from_str::<AppName>("\"\"").unwrap_err();
        assert!(e.to_string().contains("0 bytes"), "{e}");
        let long = format!("\"{}\"", "y".repeat(129));
        let e = serde_json::from_str::<AppName>(&long).unwrap_err();
        assert!(e.to_string().contains("129 bytes"), "{e}");
    }

    #[test]
    fn display_is_the_name_itself() {
        assert_eq!(AppName::new("notes").unwrap().to_string(), "notes");
    }
}
