//! The client side of RFC 9458: encapsulate a relayer request to a gateway key, send it through
//! an OHTTP relay, open the answer. The cryptography and framing are the `ohttp` crate's.

use ohttp::{ClientRequest, ClientResponse, KeyConfig};
use privsvc_rt::{Fetch, FetchRequest};
use zeroize::Zeroizing;

use crate::binary::{
    decode_padded_response, encode_padded_request_at_least, BinaryRequest, OhttpResponse,
};
use crate::http_util::{error_text, is_content_type};
use crate::transport::RelayerRequest;
use crate::{
    OhttpError, CONTENT_TYPE_OHTTP_REQ, CONTENT_TYPE_OHTTP_RES, MAX_ENCAPSULATED_BYTES,
    MAX_RESPONSE_BYTES, TARGET_HEADER,
};
use privsvc_rt::normalize_relayer_url;

/// Decode and check a hex gateway key configuration (`ohttpKey`).
pub fn decode_gateway_key(gateway_key_hex: &str) -> Result<Vec<u8>, OhttpError> {
    let bytes = hex::decode(gateway_key_hex.trim().trim_start_matches("0x"))
        .map_err(|e| OhttpError::InvalidKey(Box::new(e)))?;
    KeyConfig::decode(&bytes).map_err(|e| OhttpError::InvalidKey(Box::new(e)))?;
    Ok(bytes)
}

/// Waits for the encapsulated response to one encapsulated request (single use).
pub struct PendingResponse {
    inner: ClientResponse,
}

impl std::fmt::Debug for PendingResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingResponse")
    }
}

impl PendingResponse {
    /// Open a `message/ohttp-res` body and decode the Binary HTTP response in it, which must
    /// be padded to a response class ([`crate::padding::RESPONSE_CLASSES`]) with zeros.
    pub fn open(self, encapsulated: &[u8]) -> Result<OhttpResponse, OhttpError> {
        let plain = Zeroizing::new(
            self.inner
                .decapsulate(encapsulated)
                .map_err(|e| OhttpError::BadResponse(Box::new(e)))?,
        );
        decode_padded_response(&plain).map_err(|e| match e {
            OhttpError::BinaryHttp(e) => OhttpError::BadResponse(Box::new(e)),
            other => OhttpError::BadResponse(Box::new(other)),
        })
    }
}

/// Encapsulate `request` (Binary HTTP with `scheme` and `authority`, padded to its request
/// class, [`crate::padding::REQUEST_CLASSES`]; a submission to at least
/// [`crate::padding::SUBMISSION_CLASS`]) to the gateway key configuration `gateway_key_hex`.
/// Returns the `message/ohttp-req` body and the handle that opens the response. A request over
/// the largest class is [`OhttpError::TooLarge`].
pub fn encapsulate(
    gateway_key_hex: &str,
    request: &BinaryRequest,
    scheme: &str,
    authority: &str,
) -> Result<(Vec<u8>, PendingResponse), OhttpError> {
    encapsulate_at_least(gateway_key_hex, request, scheme, authority, 0)
}

/// [`encapsulate`] with the plaintext padded to at least the class holding `at_least` bytes
/// (cover requests choose their class, [`dummy_request`](crate::dummy_request)).
pub fn encapsulate_at_least(
    gateway_key_hex: &str,
    request: &BinaryRequest,
    scheme: &str,
    authority: &str,
    at_least: usize,
) -> Result<(Vec<u8>, PendingResponse), OhttpError> {
    encapsulate_padded(
        gateway_key_hex,
        request,
        scheme,
        authority,
        Padding::AtLeast(at_least),
    )
}

/// How a request plaintext is padded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Padding {
    /// The protocol's rule: the smallest class that holds the message and the given number of
    /// bytes, and a submission at least the submission class.
    AtLeast(usize),
    /// The attack lab's leaky setting: the smallest class that holds the message, a
    /// submission included (the rule before the submission class).
    #[cfg(feature = "lab-leaks")]
    SmallestClass,
}

fn encapsulate_padded(
    gateway_key_hex: &str,
    request: &BinaryRequest,
    scheme: &str,
    authority: &str,
    padding: Padding,
) -> Result<(Vec<u8>, PendingResponse), OhttpError> {
    let config = decode_gateway_key(gateway_key_hex)?;
    let plain = match padding {
        Padding::AtLeast(at_least) => {
            encode_padded_request_at_least(request, scheme, authority, at_least)?
        }
        #[cfg(feature = "lab-leaks")]
        Padding::SmallestClass => {
            let message =
                Zeroizing::new(crate::binary::encode_request(request, scheme, authority)?);
            crate::padding::pad(&message, &crate::padding::REQUEST_CLASSES)?
        }
    };
    let client = ClientRequest::from_encoded_config(&config)
        .map_err(|e| OhttpError::InvalidKey(Box::new(e)))?;
    let (message, inner) = client
        .encapsulate(&plain)
        .map_err(|e| OhttpError::Encapsulation(Box::new(e)))?;
    Ok((message, PendingResponse { inner }))
}

/// The Binary HTTP form of a relayer request: JSON bodies are labelled as such.
pub fn to_binary_request(request: &RelayerRequest) -> BinaryRequest {
    let mut headers = vec![("accept".to_string(), "application/json".to_string())];
    if request.body.is_some() {
        headers.push(("content-type".to_string(), "application/json".to_string()));
    }
    BinaryRequest {
        method: request.method.to_ascii_uppercase(),
        path: request.path.clone(),
        headers,
        body: request.body.clone().unwrap_or_default(),
    }
}

/// The relay's `POST /ohttp` endpoint for a relay base URL (kept as is when it already ends
/// in `/ohttp`).
fn relay_endpoint(relay_url: &str) -> Result<String, OhttpError> {
    let base = normalize_relayer_url(relay_url)?;
    Ok(if base.ends_with("/ohttp") {
        base
    } else {
        format!("{base}/ohttp")
    })
}

/// Send one relayer request through the OHTTP relay at `relay_url` to the relayer `target`,
/// encapsulated to `gateway_key` (the relayer's hex `ohttpKey`). Returns the relayer's answer.
///
/// The relay sees only the target and the ciphertext; the relayer sees only the request.
/// A relay refusal (403 unverified target, 413, 502) or a gateway that cannot open the
/// request (400) is [`OhttpError::Refused`].
pub async fn ohttp_call(
    relay_url: &str,
    target: &str,
    gateway_key: &str,
    request: RelayerRequest,
    http: &dyn Fetch,
) -> Result<OhttpResponse, OhttpError> {
    relay_call(
        relay_url,
        target,
        gateway_key,
        &to_binary_request(&request),
        Padding::AtLeast(0),
        http,
    )
    .await
}

/// [`ohttp_call`] of a Binary HTTP request padded as `padding` says.
pub(crate) async fn relay_call(
    relay_url: &str,
    target: &str,
    gateway_key: &str,
    request: &BinaryRequest,
    padding: Padding,
    http: &dyn Fetch,
) -> Result<OhttpResponse, OhttpError> {
    let target = normalize_relayer_url(target)?;
    let endpoint = relay_endpoint(relay_url)?;
    let parsed = url::Url::parse(&target).map_err(|e| OhttpError::InvalidUrl(e.into()))?;
    let authority = match (parsed.host_str(), parsed.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_string(),
        _ => String::new(),
    };
    let (message, pending) =
        encapsulate_padded(gateway_key, request, parsed.scheme(), &authority, padding)?;
    if message.len() > MAX_ENCAPSULATED_BYTES {
        return Err(OhttpError::TooLarge {
            size: message.len(),
            limit: MAX_ENCAPSULATED_BYTES,
        });
    }
    let answer = http
        .fetch(
            FetchRequest {
                method: "POST".into(),
                url: endpoint,
                headers: vec![
                    ("content-type".into(), CONTENT_TYPE_OHTTP_REQ.into()),
                    (TARGET_HEADER.into(), target),
                ],
                body: Some(message),
            },
            crate::CALL_TIMEOUT,
            MAX_RESPONSE_BYTES,
        )
        .await?;
    let status = answer.status;
    let is_ohttp = answer
        .content_type
        .as_deref()
        .is_some_and(|v| is_content_type(v, CONTENT_TYPE_OHTTP_RES));
    let body = answer.body;
    if status != 200 || !is_ohttp {
        return Err(OhttpError::Refused {
            status,
            message: error_text(&body),
        });
    }
    pending.open(&body)
}

#[cfg(all(test, feature = "lab-leaks"))]
mod tests {
    use super::*;

    #[test]
    fn the_lab_leak_pads_a_submission_to_its_smallest_class() {
        let key = crate::OhttpGateway::from_seed(&[1u8; 32])
            .unwrap()
            .public_key();
        let request = to_binary_request(&RelayerRequest {
            method: "POST".into(),
            path: "/v1/records".into(),
            body: Some(b"{}".to_vec()),
        });
        let sizes = [Padding::AtLeast(0), Padding::SmallestClass].map(|padding| {
            let (message, _) =
                encapsulate_padded(&key, &request, "https", "r.test", padding).unwrap();
            message.len()
        });
        assert_eq!(sizes, [32_768 + 55, 4_096 + 55]);
    }
}
