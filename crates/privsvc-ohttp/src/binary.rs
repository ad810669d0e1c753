//! Binary HTTP (RFC 9292) messages as privsvc carries them inside OHTTP: thin wrappers around the
//! `bhttp` crate. privsvc always *writes* known-length messages; it reads both known-length and
//! indeterminate-length messages.

use std::io::Cursor;

use bhttp::{Message, Mode, StatusCode};

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

/// Decode a Binary HTTP request (either framing). Fails on a response, on non-UTF-8 control
/// data or fields, and on a path that does not start with `/`.
pub fn decode_request(bytes: &[u8]) -> Result<BinaryRequest, OhttpError> {
    let message = Message::read_bhttp(&mut Cursor::new(bytes)).map_err(bhttp_err)?;
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

/// Decode a Binary HTTP response (either framing); informational responses and trailers are
/// dropped.
pub fn decode_response(bytes: &[u8]) -> Result<OhttpResponse, OhttpError> {
    let message = Message::read_bhttp(&mut Cursor::new(bytes)).map_err(bhttp_err)?;
    let Some(status) = message.control().status() else {
        return Err(OhttpError::BinaryHttp("not a response".into()));
    };
    Ok(OhttpResponse {
        status: status.code(),
        headers: fields(message.header())?,
        body: message.content().to_vec(),
    })
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
}
