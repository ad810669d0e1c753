//! Size classes of the Binary HTTP messages carried inside OHTTP (docs/PROTOCOL.md §6).
//!
//! Every request plaintext is padded with trailing zero bytes (RFC 9292 section 3.8) to the
//! smallest of [`REQUEST_CLASSES`], every response plaintext to the smallest of
//! [`RESPONSE_CLASSES`]. An onlooker on the client's link then learns only the class of a
//! message, not the length of its attributes or whether a record is queued or written.
//! A message larger than the largest class is refused ([`OhttpError::TooLarge`]).
//!
//! Submissions (`POST /v1/records`) are padded to at least [`SUBMISSION_CLASS`], the class that
//! holds a submission of the largest envelope ([`min_request_class`]): the relay cannot tell a
//! large record from a small one.

use zeroize::Zeroizing;

use crate::OhttpError;

/// Padded sizes of a request's Binary HTTP plaintext, in bytes, smallest first.
pub const REQUEST_CLASSES: [usize; 3] = [4_096, 32_768, 131_072];
/// Padded sizes of a response's Binary HTTP plaintext, in bytes, smallest first.
pub const RESPONSE_CLASSES: [usize; 3] = [1_024, 8_192, 65_536];
/// The least request class of every submission (`POST /v1/records`): the class that holds a
/// submission of the largest sealed envelope (16 384 bytes, about 16 600 once escaped in the
/// JSON body) with its attributes, owner, token and holds. Only a submission whose attributes
/// escape to more than about 15 000 bytes (control characters written as `\u00XX`) needs the
/// next class.
pub const SUBMISSION_CLASS: usize = REQUEST_CLASSES[1];
/// The method and path of a submission, the requests padded to [`SUBMISSION_CLASS`].
pub const SUBMISSION_ROUTE: (&str, &str) = ("POST", "/v1/records");

/// Bytes an encapsulated request adds to its plaintext (RFC 9458 section 4.3): key id (1),
/// KEM, KDF and AEAD ids (2 each), the X25519 `enc` (32) and the AES-GCM tag (16).
pub const REQUEST_OVERHEAD: usize = 7 + 32 + 16;
/// Bytes an encapsulated response adds to its plaintext (RFC 9458 section 4.4): the response
/// nonce (16) and the AES-GCM tag (16).
pub const RESPONSE_OVERHEAD: usize = 16 + 16;

/// The smallest class of `classes` (sorted ascending) that holds `len` bytes, if any.
///
/// ```
/// use privsvc_ohttp::{class_of, REQUEST_CLASSES};
/// assert_eq!(class_of(1, &REQUEST_CLASSES), Some(4_096));
/// assert_eq!(class_of(4_097, &REQUEST_CLASSES), Some(32_768));
/// assert_eq!(class_of(131_073, &REQUEST_CLASSES), None);
/// ```
pub fn class_of(len: usize, classes: &[usize]) -> Option<usize> {
    classes.iter().copied().find(|&class| len <= class)
}

/// `message` followed by zero bytes up to the smallest class of `classes` that holds it.
/// The copy is made once into a buffer of the final size (no reallocation leaves a plaintext
/// copy behind) and is zeroized on drop.
pub fn pad(message: &[u8], classes: &[usize]) -> Result<Zeroizing<Vec<u8>>, OhttpError> {
    let class = class_of(message.len(), classes).ok_or(OhttpError::TooLarge {
        size: message.len(),
        limit: classes.last().copied().unwrap_or(0),
    })?;
    let mut out = Zeroizing::new(vec![0u8; class]);
    out[..message.len()].copy_from_slice(message);
    Ok(out)
}

/// [`pad`] to the smallest class of `classes` that holds both `message` and `at_least` bytes:
/// an answer that must not be told apart from larger ones of its kind is padded to their
/// class. `at_least` beyond the largest class is [`OhttpError::TooLarge`].
pub fn pad_at_least(
    message: &[u8],
    classes: &[usize],
    at_least: usize,
) -> Result<Zeroizing<Vec<u8>>, OhttpError> {
    let len = message.len().max(at_least);
    let class = class_of(len, classes).ok_or(OhttpError::TooLarge {
        size: len,
        limit: classes.last().copied().unwrap_or(0),
    })?;
    let mut out = Zeroizing::new(vec![0u8; class]);
    out[..message.len()].copy_from_slice(message);
    Ok(out)
}

/// The least class a request plaintext is padded to: [`SUBMISSION_CLASS`] for a submission
/// (`POST /v1/records`, whatever its query), 0 (the smallest class that holds it) otherwise.
///
/// ```
/// use privsvc_ohttp::{min_request_class, SUBMISSION_CLASS};
/// assert_eq!(min_request_class("POST", "/v1/records"), SUBMISSION_CLASS);
/// assert_eq!(min_request_class("post", "/v1/records?x=1"), SUBMISSION_CLASS);
/// assert_eq!(min_request_class("GET", "/v1/records/6f1c"), 0);
/// ```
pub fn min_request_class(method: &str, path: &str) -> usize {
    let route = path.split(['?', '#']).next().unwrap_or_default();
    if method.eq_ignore_ascii_case(SUBMISSION_ROUTE.0) && route == SUBMISSION_ROUTE.1 {
        SUBMISSION_CLASS
    } else {
        0
    }
}

/// Whether `len` is exactly one of `classes` (what a padded message must measure).
pub fn is_class(len: usize, classes: &[usize]) -> bool {
    classes.contains(&len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_sorted_and_boundaries_are_exact() {
        for classes in [&REQUEST_CLASSES[..], &RESPONSE_CLASSES[..]] {
            assert!(classes.windows(2).all(|w| w[0] < w[1]));
            for (i, &class) in classes.iter().enumerate() {
                assert_eq!(class_of(class, classes), Some(class));
                assert_eq!(class_of(class + 1, classes), classes.get(i + 1).copied());
                assert_eq!(pad(&vec![7u8; class], classes).unwrap().len(), class);
            }
            assert_eq!(class_of(0, classes), Some(classes[0]));
        }
    }

    #[test]
    fn pad_at_least_raises_the_class_only() {
        let padded = pad_at_least(b"abc", &RESPONSE_CLASSES, 8_192).unwrap();
        assert_eq!(padded.len(), 8_192);
        assert_eq!(&padded[..3], b"abc");
        assert!(padded[3..].iter().all(|&b| b == 0));
        // Not a class itself: the next class up.
        assert_eq!(
            pad_at_least(b"abc", &RESPONSE_CLASSES, 1_025)
                .unwrap()
                .len(),
            8_192
        );
        assert_eq!(
            pad_at_least(b"abc", &RESPONSE_CLASSES, 0).unwrap().len(),
            1_024
        );
        // A larger message keeps its own, larger class.
        let big = vec![1u8; 9_000];
        assert_eq!(
            pad_at_least(&big, &RESPONSE_CLASSES, 8_192).unwrap().len(),
            65_536
        );
        assert!(pad_at_least(b"abc", &RESPONSE_CLASSES, 65_537).is_err());
    }

    #[test]
    fn pad_appends_zeros_and_refuses_oversize() {
        let padded = pad(b"abc", &RESPONSE_CLASSES).unwrap();
        assert_eq!(padded.len(), 1_024);
        assert_eq!(&padded[..3], b"abc");
        assert!(padded[3..].iter().all(|&b| b == 0));
        let err = pad(&vec![1u8; 65_537], &RESPONSE_CLASSES).unwrap_err();
        assert!(
            matches!(
                err,
                OhttpError::TooLarge {
                    size: 65_537,
                    limit: 65_536
                }
            ),
            "{err:?}"
        );
        assert!(is_class(4_096, &REQUEST_CLASSES));
        assert!(!is_class(4_095, &REQUEST_CLASSES));
    }
}
