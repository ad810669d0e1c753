//! Binary HTTP (RFC 9292) messages as privsvc carries them inside OHTTP: thin wrappers around the
//! `bhttp` crate. privsvc always *writes* known-length messages; it reads both known-length and
//! indeterminate-length messages.
//!
//! Padding (RFC 9292 section 3.8): the decoders accept any number of zero bytes after the
//! message and refuse a non-zero byte there. The `*_padded_*` functions are what OHTTP carries:
//! the message padded to its size class ([`crate::padding`]), and on reading, a plaintext whose
//! length is not exactly a class is refused.

use std::io::Cursor;

use bhttp::{Message, Mode, StatusCode};
use zeroize::Zeroizing;

use crate::padding::{
    is_class, min_request_class, pad, pad_at_least, REQUEST_CLASSES, RESPONSE_CLASSES,
};
use crate::OhttpError;

/// A decapsulated request: what the client asked the relayer for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryRequest {
    /// HTTP method, as sent (`GET`, `POST`).
    pub method: String,
    /// Path and query, starting with `/`.
    pub path: String,
    /// Header fields in order, names lower case.
    pub headers: Vec<(String, String)>,
    /// The request content (empty when there is none).
    pub body: Vec<u8>,
}

/// A response carried inside OHTTP (the relayer's answer as the client sees it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OhttpResponse {
    /// The final HTTP status (informational responses are skipped).
    pub status: u16,
    /// Header fields in order, names lower case.
    pub headers: Vec<(String, String)>,
    /// The response content.
    pub body: Vec<u8>,
}

impl OhttpResponse {
    /// The first value of header `name` (case-insensitive), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn bhttp_err(e: bhttp::Error) -> OhttpError {
    OhttpError::BinaryHttp(e.to_string())
}

fn text(bytes: &[u8], what: &str) -> Result<String, OhttpError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| OhttpError::BinaryHttp(format!("{what} is not UTF-8")))
}

fn fields(section: &bhttp::FieldSection) -> Result<Vec<(String, String)>, OhttpError> {
    section
        .iter()
        .map(|f| {
            Ok((
                text(f.name(), "a field name")?.to_ascii_lowercase(),
                text(f.value(), "a field value")?,
            ))
        })
        .collect()
}

fn write(message: &Message) -> Result<Vec<u8>, OhttpError> {
    let mut out = Vec::new();
    message
        .write_bhttp(Mode::KnownLength, &mut out)
        .map_err(bhttp_err)?;
    Ok(out)
}

/// Encode `request` as a known-length Binary HTTP request with the given `scheme` and
/// `authority` (either may be empty). Header names are written lower case.
pub fn encode_request(
    request: &BinaryRequest,
    scheme: &str,
    authority: &str,
) -> Result<Vec<u8>, OhttpError> {
    if request.method.is_empty() || !request.path.starts_with('/') {
        return Err(OhttpError::BinaryHttp(
            "a request needs a method and a path starting with '/'".into(),
        ));
    }
    let mut message = Message::request(
        request.method.as_bytes().to_vec(),
        scheme.as_bytes().to_vec(),
        authority.as_bytes().to_vec(),
        request.path.as_bytes().to_vec(),
    );
    for (name, value) in &request.headers {
        message.put_header(name.to_ascii_lowercase(), value.as_bytes());
    }
    message.write_content(&request.body);
    write(&message)
}

/// Read one Binary HTTP message followed only by zero padding. The `bhttp` crate stops at the
/// end of the message and ignores what follows; RFC 9292 section 3.8 makes a message with
/// non-zero padding invalid, so that is checked here.
fn read_message(bytes: &[u8]) -> Result<Message, OhttpError> {
    let mut cursor = Cursor::new(bytes);
    let message = Message::read_bhttp(&mut cursor).map_err(bhttp_err)?;
    let end = usize::try_from(cursor.position()).unwrap_or(usize::MAX);
    let padding = bytes.get(end..).unwrap_or_default();
    if padding.iter().fold(0u8, |acc, &b| acc | b) != 0 {
        return Err(OhttpError::BinaryHttp(
            "non-zero bytes after the message (padding must be zero)".into(),
        ));
    }
    Ok(message)
}

/// Decode a Binary HTTP request (either framing, optionally zero padded). Fails on a
/// response, on non-UTF-8 control data or fields, on a path that does not start with `/`, and
/// on non-zero padding.
pub fn decode_request(bytes: &[u8]) -> Result<BinaryRequest, OhttpError> {
    let message = read_message(bytes)?;
    let control = message.control();
    let (Some(method), Some(path)) = (control.method(), control.path()) else {
        return Err(OhttpError::BinaryHttp("not a request".into()));
    };
    let method = text(method, "the method")?;
    let path = text(path, "the path")?;
    if method.is_empty() || !path.starts_with('/') {
        return Err(OhttpError::BinaryHttp(
            "a request needs a method and a path starting with '/'".into(),
        ));
    }
    Ok(BinaryRequest {
        method,
        path,
        headers: fields(message.header())?,
        body: message.content().to_vec(),
    })
}

/// Encode a known-length Binary HTTP response. `status` must be a final status (200 to 599).
pub fn encode_response(
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<Vec<u8>, OhttpError> {
    if !(200..=599).contains(&status) {
        return Err(OhttpError::BinaryHttp(format!(
            "status {status} is not a final status"
        )));
    }
    let status = StatusCode::try_from(status).map_err(bhttp_err)?;
    let mut message = Message::response(status);
    for (name, value) in headers {
        message.put_header(name.to_ascii_lowercase(), value.as_bytes());
    }
    message.write_content(body);
    write(&message)
}

/// Decode a Binary HTTP response (either framing, optionally zero padded); informational
/// responses and trailers are dropped. Fails on non-zero padding.
pub fn decode_response(bytes: &[u8]) -> Result<OhttpResponse, OhttpError> {
    let message = read_message(bytes)?;
    let Some(status) = message.control().status() else {
        return Err(OhttpError::BinaryHttp("not a response".into()));
    };
    Ok(OhttpResponse {
        status: status.code(),
        headers: fields(message.header())?,
        body: message.content().to_vec(),
    })
}

/// [`encode_request`], zero padded to the smallest of [`REQUEST_CLASSES`] that holds it and is
/// at least the request's [`min_request_class`] (a submission takes at least
/// [`crate::padding::SUBMISSION_CLASS`]): the plaintext of an OHTTP request.
/// [`OhttpError::TooLarge`] over the largest class.
pub fn encode_padded_request(
    request: &BinaryRequest,
    scheme: &str,
    authority: &str,
) -> Result<Zeroizing<Vec<u8>>, OhttpError> {
    let plain = Zeroizing::new(encode_request(request, scheme, authority)?);
    let at_least = min_request_class(&request.method, &request.path);
    pad_at_least(&plain, &REQUEST_CLASSES, at_least)
}

/// [`encode_request`] zero padded to the smallest of [`REQUEST_CLASSES`] that holds both the
/// message and `at_least` bytes, whatever the route (cover requests choose their class).
pub fn encode_padded_request_at_least(
    request: &BinaryRequest,
    scheme: &str,
    authority: &str,
    at_least: usize,
) -> Result<Zeroizing<Vec<u8>>, OhttpError> {
    let plain = Zeroizing::new(encode_request(request, scheme, authority)?);
    let at_least = at_least.max(min_request_class(&request.method, &request.path));
    pad_at_least(&plain, &REQUEST_CLASSES, at_least)
}

/// [`decode_request`] of an OHTTP request plaintext, which must measure exactly one of
/// [`REQUEST_CLASSES`].
pub fn decode_padded_request(bytes: &[u8]) -> Result<BinaryRequest, OhttpError> {
    if !is_class(bytes.len(), &REQUEST_CLASSES) {
        return Err(OhttpError::BinaryHttp(format!(
            "a request of {} bytes is not padded to a size class {REQUEST_CLASSES:?}",
            bytes.len()
        )));
    }
    decode_request(bytes)
}

/// [`encode_response`], zero padded to the smallest of [`RESPONSE_CLASSES`]: the plaintext of
/// an OHTTP response. [`OhttpError::TooLarge`] over the largest class.
pub fn encode_padded_response(
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<Zeroizing<Vec<u8>>, OhttpError> {
    let plain = Zeroizing::new(encode_response(status, headers, body)?);
    pad(&plain, &RESPONSE_CLASSES)
}

/// [`encode_padded_response`] padded to at least the class holding `at_least` bytes (see
/// [`pad_at_least`]).
pub fn encode_padded_response_at_least(
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
    at_least: usize,
) -> Result<Zeroizing<Vec<u8>>, OhttpError> {
    let plain = Zeroizing::new(encode_response(status, headers, body)?);
    pad_at_least(&plain, &RESPONSE_CLASSES, at_least)
}

/// [`decode_response`] of an OHTTP response plaintext, which must measure exactly one of
/// [`RESPONSE_CLASSES`].
pub fn decode_padded_response(bytes: &[u8]) -> Result<OhttpResponse, OhttpError> {
    if !is_class(bytes.len(), &RESPONSE_CLASSES) {
        return Err(OhttpError::BinaryHttp(format!(
            "a response of {} bytes is not padded to a size class {RESPONSE_CLASSES:?}",
            bytes.len()
        )));
    }
    decode_response(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> BinaryRequest {
        BinaryRequest {
            method: "POST".into(),
            path: "/v1/records".into(),
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: b"{\"a\":1}".to_vec(),
        }
    }

    #[test]
    fn request_round_trip_lowercases_names() {
        let bytes = encode_request(&request(), "https", "relayer.example").unwrap();
        assert_eq!(bytes[0], 0, "known-length request framing");
        let back = decode_request(&bytes).unwrap();
        assert_eq!(back.method, "POST");
        assert_eq!(back.path, "/v1/records");
        assert_eq!(
            back.headers,
            vec![("content-type".to_string(), "application/json".to_string())]
        );
        assert_eq!(back.body, b"{\"a\":1}");
    }

    #[test]
    fn response_round_trip() {
        let headers = vec![("content-type".to_string(), "application/json".to_string())];
        let bytes = encode_response(404, &headers, b"{}").unwrap();
        assert_eq!(bytes[0], 1, "known-length response framing");
        let back = decode_response(&bytes).unwrap();
        assert_eq!(back.status, 404);
        assert_eq!(back.header("Content-Type"), Some("application/json"));
        assert_eq!(back.body, b"{}");
    }

    #[test]
    fn rejects_wrong_kind_and_bad_input() {
        let req = encode_request(&request(), "https", "").unwrap();
        let resp = encode_response(200, &[], b"").unwrap();
        assert!(decode_response(&req).is_err());
        assert!(decode_request(&resp).is_err());
        assert!(decode_request(&req[..req.len() - 3]).is_err());
        assert!(encode_response(102, &[], b"").is_err());
        let mut bad = request();
        bad.path = "v1/records".into();
        assert!(encode_request(&bad, "https", "").is_err());
    }

    /// [`request`] as it decodes (header names lower case).
    fn decoded() -> BinaryRequest {
        let mut r = request();
        r.headers[0].0 = "content-type".into();
        r
    }

    #[test]
    fn zero_padding_is_accepted_and_non_zero_padding_refused() {
        let req = encode_request(&request(), "https", "relayer.test").unwrap();
        let mut padded = req.clone();
        padded.resize(req.len() + 100, 0);
        assert_eq!(decode_request(&padded).unwrap(), decoded());
        for at in [req.len(), req.len() + 50, req.len() + 99] {
            let mut bad = padded.clone();
            bad[at] = 1;
            let err = decode_request(&bad).unwrap_err();
            assert!(err.to_string().contains("padding must be zero"), "{err}");
        }
        let resp = encode_response(200, &[], b"ok").unwrap();
        let mut bad = resp.clone();
        bad.extend_from_slice(&[0, 0, 0x80]);
        assert!(decode_response(&bad).is_err());
        bad.pop();
        assert_eq!(decode_response(&bad).unwrap().body, b"ok");
    }

    #[test]
    fn padded_messages_measure_a_class_exactly() {
        let mut issue = request();
        issue.path = "/v1/tokens/issue".into();
        let small = encode_padded_request(&issue, "https", "r.test").unwrap();
        assert_eq!(small.len(), 4_096);
        let mut decoded_issue = decoded();
        decoded_issue.path = issue.path.clone();
        assert_eq!(decode_padded_request(&small).unwrap(), decoded_issue);
        // One byte short of a class, or one byte over: refused although the zeros are valid.
        assert!(decode_padded_request(&small[..4_095]).is_err());
        let mut longer = small.to_vec();
        longer.push(0);
        assert!(decode_padded_request(&longer).is_err());
        // An unpadded message is refused by the padded decoder.
        let plain = encode_request(&issue, "https", "r.test").unwrap();
        assert!(decode_padded_request(&plain).is_err());

        let mut big = issue.clone();
        big.body = vec![b'x'; 5_000];
        assert_eq!(
            encode_padded_request(&big, "https", "r.test")
                .unwrap()
                .len(),
            32_768
        );
        big.body = vec![b'x'; 131_072];
        assert!(matches!(
            encode_padded_request(&big, "https", "r.test"),
            Err(OhttpError::TooLarge { limit: 131_072, .. })
        ));
        // A cover request asks for its class; a larger message keeps its own.
        let cover = encode_padded_request_at_least(&issue, "https", "r.test", 32_768).unwrap();
        assert_eq!(cover.len(), 32_768);
        assert_eq!(decode_padded_request(&cover).unwrap(), decoded_issue);
    }

    #[test]
    fn every_submission_takes_the_submission_class() {
        // A small submission: the class of the largest envelope, not the smallest class.
        let small = encode_padded_request(&request(), "https", "r.test").unwrap();
        assert_eq!(small.len(), crate::padding::SUBMISSION_CLASS);
        assert_eq!(decode_padded_request(&small).unwrap(), decoded());
        // Whatever its query or the method's case.
        let mut with_query = request();
        with_query.path = "/v1/records?retry=1".into();
        with_query.method = "post".into();
        assert_eq!(
            encode_padded_request(&with_query, "https", "r.test")
                .unwrap()
                .len(),
            32_768
        );
        // A status poll is not a submission.
        let mut poll = request();
        poll.method = "GET".into();
        poll.path = "/v1/records/6f1c2a9e-8d7b-4c3a-9f2e-1b0a4d5c6e7f".into();
        poll.body.clear();
        assert_eq!(
            encode_padded_request(&poll, "https", "r.test")
                .unwrap()
                .len(),
            4_096
        );
        // Only a submission over the class takes the largest one.
        let mut huge = request();
        huge.body = vec![b'x'; 40_000];
        assert_eq!(
            encode_padded_request(&huge, "https", "r.test")
                .unwrap()
                .len(),
            131_072
        );
    }

    #[test]
    fn padded_responses_measure_a_class_exactly() {
        let resp = encode_padded_response(404, &[], b"{}").unwrap();
        assert_eq!(resp.len(), 1_024);
        assert_eq!(decode_padded_response(&resp).unwrap().status, 404);
        assert!(decode_padded_response(&resp[..1_000]).is_err());
        assert!(encode_padded_response(200, &[], &vec![0u8; 65_536]).is_err());
    }
}
