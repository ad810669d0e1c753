//! The `select` projection of `arkiv_query` (unknown fields are rejected).

use serde_json::Value as Json;

/// Which attributes a row carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttrSelect {
    /// None.
    Off,
    /// All.
    All,
    /// Only these names (sorted, deduplicated).
    Named(Vec<String>),
}

/// A parsed projection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projection {
    /// key, owner, creator, createdAt, updatedAt, expiresAt, creationFlags, contentType, payload,
    /// attributeSchema — in this order.
    pub flags: [bool; 10],
    /// Attribute values.
    pub attributes: AttrSelect,
}

/// The flat field names, in fingerprint order.
pub const FIELDS: [&str; 10] = [
    "key",
    "owner",
    "creator",
    "createdAt",
    "updatedAt",
    "expiresAt",
    "creationFlags",
    "contentType",
    "payload",
    "attributeSchema",
];

impl Default for Projection {
    /// The node default: the key only.
    fn default() -> Self {
        let mut flags = [false; 10];
        flags[0] = true;
        Self {
            flags,
            attributes: AttrSelect::Off,
        }
    }
}

impl Projection {
    /// Everything except `attributeSchema` (the shape of `arkiv_getEntity`).
    pub fn full_entity() -> Self {
        let mut flags = [true; 10];
        flags[9] = false;
        Self {
            flags,
            attributes: AttrSelect::All,
        }
    }

    /// True when field `name` (one of [`FIELDS`]) is selected.
    pub fn has(&self, name: &str) -> bool {
        FIELDS
            .iter()
            .position(|f| *f == name)
            .is_some_and(|i| self.flags[i])
    }

    /// Parse a `select` JSON value (absent or null means the default).
    pub fn from_json(v: Option<&Json>) -> Result<Self, String> {
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Ok(Self::default());
        };
        let obj = v.as_object().ok_or("select must be an object")?;
        let mut p = Self {
            flags: [false; 10],
            attributes: AttrSelect::Off,
        };
        for (k, val) in obj {
            if k == "attributes" {
                p.attributes = match val {
                    Json::Bool(true) => AttrSelect::All,
                    Json::Bool(false) | Json::Null => AttrSelect::Off,
                    Json::Object(names) => {
                        let mut n = Vec::new();
                        for (name, on) in names {
                            match on {
                                Json::Bool(true) => n.push(name.clone()),
                                Json::Bool(false) => {}
                                _ => {
                                    return Err(format!(
                                        "select.attributes.{name} must be a boolean"
                                    ))
                                }
                            }
                        }
                        n.sort();
                        n.dedup();
                        AttrSelect::Named(n)
                    }
                    _ => {
                        return Err(
                            "select.attributes must be a boolean or an object of booleans".into(),
                        )
                    }
                };
                continue;
            }
            let i = FIELDS
                .iter()
                .position(|f| f == k)
                .ok_or_else(|| format!("unknown select field `{k}`"))?;
            p.flags[i] = match val {
                Json::Bool(b) => *b,
                Json::Null => false,
                _ => return Err(format!("select.{k} must be a boolean")),
            };
        }
        Ok(p)
    }

    /// The fingerprint bound into cursors.
    pub fn fingerprint(&self) -> Vec<u8> {
        let mut out: Vec<u8> = self.flags.iter().map(|&b| b as u8).collect();
        match &self.attributes {
            AttrSelect::Off => out.push(0),
            AttrSelect::All => out.push(1),
            AttrSelect::Named(names) => {
                out.push(2);
                for n in names {
                    out.extend_from_slice(n.as_bytes());
                    out.push(0);
                }
            }
        }
        out
    }
}
