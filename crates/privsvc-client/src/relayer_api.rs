//! The relayer endpoints the client calls, over any [`Transport`].

use alloy_primitives::Address;
use privsvc_ohttp::{RelayerRequest, Transport};

use crate::error::PrivsvcError;
use crate::protocol::{InfoResponse, StatusResponse, SubmitRequest, SubmitResponse, API_VERSION};

/// A relayer as the client knows it (docs/API.md §2.3, `relayers()`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayerStatus {
    /// Base URL.
    pub url: String,
    /// The relayer's account address (from its info).
    pub address: Address,
    /// True once the relayer failed or stopped answering during this session.
    pub bad: bool,
    /// Its `GET /v1/info` answer.
    pub info: InfoResponse,
}

/// What a relayer answered to a submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// 202: queued under this id.
    Accepted(String),
    /// Any other status.
    Refused {
        /// HTTP status.
        status: u16,
        /// The answer body as text.
        message: String,
    },
}

fn body_text(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    text.chars().take(300).collect()
}

/// `GET /v1/info`; fails unless it answers 200 with a well-formed info of API version 1. The
/// numbers are clamped ([`InfoResponse::clamped`]).
pub async fn fetch_info(
    transport: &dyn Transport,
    url: &str,
) -> Result<(Address, InfoResponse), PrivsvcError> {
    let res = transport
        .send(
            url,
            RelayerRequest {
                method: "GET".into(),
                path: "/v1/info".into(),
                body: None,
            },
        )
        .await?;
    let protocol = |message: String| PrivsvcError::Protocol {
        relayer: url.to_string(),
        message,
    };
    if res.status != 200 {
        return Err(protocol(format!(
            "GET /v1/info answered {}: {}",
            res.status,
            body_text(&res.body)
        )));
    }
    let info: InfoResponse = serde_json::from_slice(&res.body)
        .map_err(|e| protocol(format!("GET /v1/info is not a relayer info: {e}")))?;
    if info.version != API_VERSION {
        return Err(protocol(format!(
            "API version {:?}, expected {API_VERSION:?}",
            info.version
        )));
    }
    let address: Address = info
        .address
        .parse()
        .map_err(|e| protocol(format!("info address {:?}: {e}", info.address)))?;
    Ok((address, info.clamped()))
}

/// `POST /v1/records`. `Err` only when the relayer could not be reached.
pub async fn submit(
    transport: &dyn Transport,
    url: &str,
    request: &SubmitRequest,
) -> Result<SubmitOutcome, PrivsvcError> {
    let body = serde_json::to_vec(request).map_err(|e| PrivsvcError::Protocol {
        relayer: url.to_string(),
        message: format!("cannot encode the submission: {e}"),
    })?;
    let res = transport
        .send(
            url,
            RelayerRequest {
                method: "POST".into(),
                path: "/v1/records".into(),
                body: Some(body),
            },
        )
        .await?;
    if res.status == 202 || res.status == 200 {
        if let Ok(ok) = serde_json::from_slice::<SubmitResponse>(&res.body) {
            return Ok(SubmitOutcome::Accepted(ok.id));
        }
    }
    Ok(SubmitOutcome::Refused {
        status: res.status,
        message: body_text(&res.body),
    })
}

/// `GET /v1/records/:id`: `Ok(None)` for 404 or an answer that is not a status.
/// `Err` only when the relayer could not be reached.
pub async fn fetch_status(
    transport: &dyn Transport,
    url: &str,
    id: &str,
) -> Result<Option<StatusResponse>, PrivsvcError> {
    let res = transport
        .send(
            url,
            RelayerRequest {
                method: "GET".into(),
                path: format!("/v1/records/{id}"),
                body: None,
            },
        )
        .await?;
    if res.status != 200 {
        return Ok(None);
    }
    Ok(serde_json::from_slice::<StatusResponse>(&res.body)
        .ok()
        .map(StatusResponse::clamped))
}
