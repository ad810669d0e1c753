//! The ordered attribute map of one record.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::btree_map::{self, BTreeMap};

use crate::value::json_kind;
use crate::{json, name_problem, AttrType, AttrValue, AttributeError};

/// At most this many attributes per record, `project` and `tag` included (docs/PROTOCOL.md §2:
/// an Arkiv create holds 32 cells and two are `$payload` and `$contentType`).
pub const MAX_ATTRIBUTES: usize = 30;

/// The attributes of one record: valid names mapped to typed values, ordered by name.
///
/// Every instance holds only valid names and values and at most [`MAX_ATTRIBUTES`] entries.
///
/// ```
/// use privsvc_attributes::{Attributes, AttrValue};
/// let mut a = Attributes::new();
/// a.insert("level", 3i32).unwrap();
/// a.insert("name", "ada").unwrap();
/// a.insert("big", 18446744073709551615u64).unwrap();
/// assert_eq!(
///     a.canonical_json(),
///     r#"{"big":{"type":"u64","value":"18446744073709551615"},"level":{"type":"i32","value":3},"name":{"type":"str","value":"ada"}}"#
/// );
/// assert!(a.insert("Level", 1i32).unwrap_err().to_string().contains(r#"attribute "Level": names must be lowercase"#));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Attributes {
    map: BTreeMap<String, AttrValue>,
}

/// One attribute in the form of an Arkiv typed attribute cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArkivAttribute {
    /// The attribute name (ASCII, at most 32 bytes).
    pub name: String,
    /// The Arkiv typeId (str 8, i32 2, u64 3, u256 4).
    pub type_id: u8,
    /// The Arkiv value bytes (see [`AttrValue::arkiv_value_bytes`]).
    pub value: Vec<u8>,
}

impl ArkivAttribute {
    /// The name as the ABI's `bytes32`: left-aligned ASCII, zero-padded.
    pub fn name_word(&self) -> [u8; 32] {
        let mut word = [0u8; 32];
        let n = self.name.len().min(32);
        word[..n].copy_from_slice(&self.name.as_bytes()[..n]);
        word
    }
}

impl Attributes {
    /// An empty attribute map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts or replaces an attribute after checking its name and value; returns the value it
    /// replaced. Fails when the name or value is invalid or when a new name would exceed
    /// [`MAX_ATTRIBUTES`].
    pub fn insert(
        &mut self,
        name: impl Into<String>,
        value: impl Into<AttrValue>,
    ) -> Result<Option<AttrValue>, AttributeError> {
        let name = name.into();
        let value = value.into();
        if let Some(p) = name_problem(&name) {
            return Err(AttributeError::invalid(&name, p));
        }
        if let Some(p) = value.problem() {
            return Err(AttributeError::invalid(&name, p));
        }
        if !self.map.contains_key(&name) && self.map.len() >= MAX_ATTRIBUTES {
            return Err(AttributeError::TooMany {
                count: self.map.len() + 1,
            });
        }
        Ok(self.map.insert(name, value))
    }

    /// Removes an attribute, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<AttrValue> {
        self.map.remove(name)
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&AttrValue> {
        self.map.get(name)
    }

    /// Whether `name` is present.
    pub fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    /// Attributes in ascending name order.
    pub fn iter(&self) -> btree_map::Iter<'_, String, AttrValue> {
        self.map.iter()
    }

    /// Number of attributes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are no attributes.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The type map `{name: type}` that the envelope carries.
    pub fn types(&self) -> BTreeMap<String, AttrType> {
        self.map
            .iter()
            .map(|(k, v)| (k.clone(), v.attr_type()))
            .collect()
    }

    /// The wire object `{name: {"type", "value"}}` (u64 and u256 as decimal strings).
    pub fn to_wire(&self) -> Value {
        let obj: Map<String, Value> = self
            .map
            .iter()
            .map(|(k, v)| (k.clone(), v.to_wire()))
            .collect();
        Value::Object(obj)
    }

    /// The RFC 8785 canonical JSON of the wire object; this is what envelope signatures cover.
    pub fn canonical_json(&self) -> String {
        json::canonical(&self.to_wire())
    }

    /// Parses the wire object strictly: valid names, known types, exact ranges, decimal
    /// strings without sign or leading zeros for u64/u256, integer numbers for i32, no
    /// members besides `type` and `value`, at most [`MAX_ATTRIBUTES`] entries.
    ///
    /// A `serde_json::Value` has already merged duplicate keys; parse untrusted text with
    /// [`Attributes::from_wire_json`] to refuse them.
    pub fn from_wire(wire: &Value) -> Result<Attributes, AttributeError> {
        let Value::Object(obj) = wire else {
            return Err(AttributeError::NotAnObject {
                found: json_kind(wire),
            });
        };
        if obj.len() > MAX_ATTRIBUTES {
            return Err(AttributeError::TooMany { count: obj.len() });
        }
        let mut map = BTreeMap::new();
        for (name, entry) in obj {
            if let Some(p) = name_problem(name) {
                return Err(AttributeError::invalid(name, p));
            }
            map.insert(name.clone(), AttrValue::from_wire(name, entry)?);
        }
        Ok(Attributes { map })
    }

    /// Parses JSON text of the wire object with [`json::parse_strict`] (duplicate keys and
    /// trailing bytes refused), then [`Attributes::from_wire`].
    pub fn from_wire_json(bytes: &[u8]) -> Result<Attributes, AttributeError> {
        let value = json::parse_strict(bytes).map_err(AttributeError::Json)?;
        Self::from_wire(&value)
    }

    /// Rebuilds attributes from Arkiv typed cells (the inverse of
    /// [`Attributes::arkiv_attributes`]); every name and value is checked again.
    pub fn from_arkiv_attributes(cells: &[ArkivAttribute]) -> Result<Attributes, AttributeError> {
        let mut out = Attributes::new();
        for cell in cells {
            let value = AttrValue::from_arkiv(cell.type_id, &cell.value)
                .map_err(|reason| AttributeError::invalid(&cell.name, reason))?;
            if out.insert(cell.name.clone(), value)?.is_some() {
                return Err(AttributeError::invalid(&cell.name, "appears twice"));
            }
        }
        Ok(out)
    }

    /// The Arkiv typed attribute cells, strictly ascending by their 32-byte names as the node
    /// requires; numbers keep their numeric type so range queries work on the ledger.
    pub fn arkiv_attributes(&self) -> Vec<ArkivAttribute> {
        // BTreeMap order on ASCII names equals the order of the zero-padded 32-byte words.
        self.map
            .iter()
            .map(|(k, v)| ArkivAttribute {
                name: k.clone(),
                type_id: v.arkiv_type_id(),
                value: v.arkiv_value_bytes(),
            })
            .collect()
    }
}

impl<'a> IntoIterator for &'a Attributes {
    type Item = (&'a String, &'a AttrValue);
    type IntoIter = btree_map::Iter<'a, String, AttrValue>;

    fn into_iter(self) -> Self::IntoIter {
        self.map.iter()
    }
}

impl Serialize for Attributes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_wire().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Attributes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(deserializer)?;
        Attributes::from_wire(&v).map_err(serde::de::Error::custom)
    }
}
