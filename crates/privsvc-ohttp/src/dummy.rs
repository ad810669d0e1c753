//! Dummy requests: cover traffic that a client sends through the OHTTP relay to a relayer's
//! gateway, and that the gateway answers itself (docs/PROTOCOL.md §6).
//!
//! A dummy is an encapsulated `POST /v1/dummy` padded to a request class the client chooses
//! (see [`send_dummy`]). The relay cannot tell it from any other request of that class: it sees
//! the same target, size and content type. The gateway answers it without dispatching it to the
//! relayer (no record, queue or rate-limit state is touched) with a `200` padded to the response
//! class the dummy asks for, by default the smallest class, the class of every status answer,
//! after a delay drawn from the gateway's recent real answers. The route exists only inside
//! OHTTP: a plain `POST /v1/dummy` is an unknown path.

use privsvc_rt::Fetch;
use serde::{Deserialize, Serialize};

use crate::binary::BinaryRequest;
use crate::client::{relay_call, Padding};
use crate::padding::{class_of, RESPONSE_CLASSES};
use crate::OhttpError;

/// Method of a dummy request.
pub const DUMMY_METHOD: &str = "POST";
/// Path of a dummy request (only inside OHTTP).
pub const DUMMY_PATH: &str = "/v1/dummy";
/// The body of a dummy answer (padded to its class like every answer).
pub const DUMMY_ANSWER: &[u8] = b"{\"dummy\":true}";

/// The body of a dummy request: the response class it asks for.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DummyAsk {
    #[serde(default)]
    response_class: Option<usize>,
}

/// Whether an opened request is a dummy (`POST /v1/dummy`, any query).
pub fn is_dummy(request: &BinaryRequest) -> bool {
    let route = request.path.split(['?', '#']).next().unwrap_or_default();
    request.method.eq_ignore_ascii_case(DUMMY_METHOD) && route == DUMMY_PATH
}

/// A dummy request asking for an answer padded to the class holding `response_class` bytes
/// (0: the smallest class).
pub fn dummy_request(response_class: usize) -> BinaryRequest {
    let ask = DummyAsk {
        response_class: Some(response_class),
    };
    BinaryRequest {
        method: DUMMY_METHOD.into(),
        path: DUMMY_PATH.into(),
        headers: vec![
            ("accept".into(), "application/json".into()),
            ("content-type".into(), "application/json".into()),
        ],
        body: serde_json::to_vec(&ask).unwrap_or_default(),
    }
}

/// The response class a dummy asks for: the class holding its `responseClass` (at most the
/// largest class), or the smallest class when it asks for none or its body is not JSON.
pub fn asked_response_class(request: &BinaryRequest) -> usize {
    let smallest = RESPONSE_CLASSES[0];
    let largest = RESPONSE_CLASSES[RESPONSE_CLASSES.len() - 1];
    serde_json::from_slice::<DummyAsk>(&request.body)
        .ok()
        .and_then(|ask| ask.response_class)
        .map_or(smallest, |n| {
            class_of(n.min(largest), &RESPONSE_CLASSES).unwrap_or(largest)
        })
}

/// Send one dummy through the relay at `relay_url` to `target`'s gateway (key `gateway_key`,
/// the relayer's hex `ohttpKey`): the request padded to at least `request_class` bytes (a
/// class of [`crate::padding::REQUEST_CLASSES`]; use the class of the real requests the dummy
/// stands in for), the answer to the class holding `response_class` bytes (0: the smallest,
/// that of status answers). Returns once the gateway's dummy answer is opened.
///
/// A relay refusal is [`OhttpError::Refused`]; a gateway that answers anything but its dummy
/// answer (a relayer without the dummy route answers 404) is [`OhttpError::BadResponse`].
pub async fn send_dummy(
    relay_url: &str,
    target: &str,
    gateway_key: &str,
    request_class: usize,
    response_class: usize,
    http: &dyn Fetch,
) -> Result<(), OhttpError> {
    let request = dummy_request(response_class);
    let padding = Padding::AtLeast(request_class);
    let answer = relay_call(relay_url, target, gateway_key, &request, padding, http).await?;
    if answer.status != 200 || answer.body != DUMMY_ANSWER {
        return Err(OhttpError::BadResponse(format!(
            "the gateway answered a dummy with {} (no dummy route?)",
            answer.status
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dummies_are_recognised_and_ask_for_a_class() {
        let d = dummy_request(0);
        assert!(is_dummy(&d));
        assert_eq!(asked_response_class(&d), 1_024);
        assert_eq!(asked_response_class(&dummy_request(5_000)), 8_192);
        assert_eq!(asked_response_class(&dummy_request(usize::MAX)), 65_536);
        let mut other = d.clone();
        other.body = b"not json".to_vec();
        assert_eq!(asked_response_class(&other), 1_024);
        other.path = "/v1/records".into();
        assert!(!is_dummy(&other));
        other.path = "/v1/dummy?x".into();
        other.method = "GET".into();
        assert!(!is_dummy(&other));
    }
}
