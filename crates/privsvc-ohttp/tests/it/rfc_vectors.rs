//! Published test vectors: RFC 9458 Appendix A (OHTTP) and the RFC 9292 examples (Binary HTTP).
//!
//! The `ohttp` crate that our gateway uses cannot import a raw private key (it derives keys from
//! seeds), and RFC 9458 Appendix A fixes raw keys. So the appendix is checked with a small
//! reference implementation written here on the `hpke` crate (RFC 9180) — every published value
//! is reproduced byte for byte — and our gateway and client are then checked against that
//! reference: our client encapsulates to the appendix's published key configuration and the
//! appendix's private key opens it; the reference encapsulates to our gateway and our gateway
//! opens it and seals a response that the reference opens. Binary HTTP always goes through our
//! wrappers (`privsvc_ohttp::encode_padded_request` and the other binary HTTP functions).

use hpke::kem::X25519HkdfSha256;
use hpke::{Deserializable, Kem as _, Serializable};
use privsvc_ohttp::decode_gateway_key;
use privsvc_ohttp::{
    decode_padded_request, decode_request, decode_response, encode_padded_response, encode_request,
    encode_response,
};
use privsvc_ohttp::{encapsulate, BinaryRequest, OhttpError, OhttpGateway};
use privsvc_ohttp::{pad, REQUEST_CLASSES};

use crate::reference::{self, aes_open, aes_seal, open as reference_open, response_keys};

// RFC 9458 Appendix A, verbatim.
const SKR: &str = "3c168975674b2fa8e465970b79c8dcf09f1c741626480bd4c6162fc5b6a98e1a";
const KEY_CONFIG: &str =
    "01002031e1f05a740102115220e9af918f738674aec95f54db6e04eb705aae8e79815500080001000100010003";
const BHTTP_REQUEST: &str = "00034745540568747470730b6578616d706c652e636f6d012f";
const PKE: &str = "4b28f881333e7c164ffc499ad9796f877f4e1051ee6d31bad19dec96c208b472";
const ENC_REQUEST: &str = "010020000100014b28f881333e7c164ffc499ad9796f877f4e1051ee6d31bad19dec96c208b4726374e469135906992e1268c594d2a10c695d858c40a026e7965e7d86b83dd440b2c0185204b4d63525";
const BHTTP_RESPONSE: &str = "0140c8";
const EXPORT_SECRET: &str = "62d87a6ba569ee81014c2641f52bea36";
const RESPONSE_NONCE: &str = "c789e7151fcba46158ca84b04464910d";
const AEAD_KEY: &str = "5d0172a080e428b16d298c4ea0db620d";
const AEAD_NONCE: &str = "f6bf1aeb88d6df87007fa263";
const ENC_RESPONSE: &str = "c789e7151fcba46158ca84b04464910d86f9013e404feea014e7be4a441f234f857fbd";

// RFC 9292 section 5: Figure 8 (known-length request), Figure 9 (the same request,
// indeterminate-length, padded), Figure 13 (known-length response with a trailer).
const RFC9292_FIG8: &str = "0003474554056874747073000a2f68656c6c6f2e747874406c0a757365722d6167656e74346375726c2f372e31362e33206c69626375726c2f372e31362e33204f70656e53534c2f302e392e376c207a6c69622f312e322e3304686f73740f7777772e6578616d706c652e636f6d0f6163636570742d6c616e677561676506656e2c206d690000";
const RFC9292_FIG9: &str = "0203474554056874747073000a2f68656c6c6f2e7478740a757365722d6167656e74346375726c2f372e31362e33206c69626375726c2f372e31362e33204f70656e53534c2f302e392e376c207a6c69622f312e322e3304686f73740f7777772e6578616d706c652e636f6d0f6163636570742d6c616e677561676506656e2c206d6900000000000000000000000000";
const RFC9292_FIG13: &str = "0140c8001d5468697320636f6e74656e7420636f6e7461696e732043524c462e0d0a0d07747261696c65720474657874";

fn h(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap()
}

#[test]
fn rfc9458_key_config_matches_private_key_and_is_accepted() {
    let config = decode_gateway_key(KEY_CONFIG).expect("our client accepts the published config");
    let sk = <X25519HkdfSha256 as hpke::Kem>::PrivateKey::from_bytes(&h(SKR)).unwrap();
    let pk = X25519HkdfSha256::sk_to_pk(&sk);
    assert_eq!(config[0], 1, "key id");
    assert_eq!(&config[1..3], &[0x00, 0x20], "KEM X25519-HKDF-SHA256");
    assert_eq!(&config[3..35], pk.to_bytes().as_slice());
    assert!(decode_gateway_key(&KEY_CONFIG[..KEY_CONFIG.len() - 2]).is_err());
    assert!(decode_gateway_key("zz").is_err());
}

#[test]
fn rfc9458_request_decapsulates_to_published_binary_http() {
    let message = h(ENC_REQUEST);
    assert_eq!(&message[7..39], h(PKE).as_slice());
    let (plain, _, _) = reference_open(&h(SKR), &message);
    assert_eq!(hex::encode(&plain), BHTTP_REQUEST);

    let request = decode_request(&plain).unwrap();
    assert_eq!(
        request,
        BinaryRequest {
            method: "GET".into(),
            path: "/".into(),
            headers: vec![],
            body: vec![],
        }
    );
    // Our encoder writes the same message without the RFC 9292 section 3.8 truncation: the
    // published bytes followed by the three empty sections (fields, content, trailer).
    let encoded = encode_request(&request, "https", "example.com").unwrap();
    assert_eq!(hex::encode(&encoded), format!("{BHTTP_REQUEST}000000"));
    assert_eq!(decode_request(&encoded).unwrap(), request);
}

#[test]
fn rfc9458_response_reproduces_published_values() {
    let (_, ctx, enc) = reference_open(&h(SKR), &h(ENC_REQUEST));
    let (secret, key, iv) = response_keys(
        |label, out| ctx.export(label, out).unwrap(),
        &enc,
        &h(RESPONSE_NONCE),
    );
    assert_eq!(hex::encode(secret), EXPORT_SECRET);
    assert_eq!(hex::encode(key), AEAD_KEY);
    assert_eq!(hex::encode(iv), AEAD_NONCE);

    // The published response sealed with the published nonce is the published encapsulation.
    let mut sealed = h(RESPONSE_NONCE);
    sealed.extend(aes_seal(&key, &iv, &h(BHTTP_RESPONSE)));
    assert_eq!(hex::encode(&sealed), ENC_RESPONSE);
    // Our encoder writes the same response, untruncated (RFC 9292 section 3.8).
    let ours = encode_response(200, &[], b"").unwrap();
    assert_eq!(hex::encode(&ours), format!("{BHTTP_RESPONSE}000000"));

    // Opening the published response gives a 200 through our decoder.
    let published = h(ENC_RESPONSE);
    let plain = aes_open(&key, &iv, &published[16..]);
    let response = decode_response(&plain).unwrap();
    assert_eq!((response.status, response.body.len()), (200, 0));
}

#[test]
fn our_client_encapsulates_to_the_published_key() {
    let request = BinaryRequest {
        method: "POST".into(),
        path: "/v1/records".into(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: b"{\"app\":\"demo\"}".to_vec(),
    };
    let (message, pending) = encapsulate(KEY_CONFIG, &request, "https", "relayer.test").unwrap();
    assert_eq!(&message[..7], &[1, 0x00, 0x20, 0x00, 0x01, 0x00, 0x01]);
    let (plain, ctx, enc) = reference_open(&h(SKR), &message);
    // The plaintext is padded with zeros (RFC 9292 3.8): a submission to the submission class.
    assert_eq!(plain.len(), privsvc_ohttp::SUBMISSION_CLASS);
    assert_eq!(message.len(), privsvc_ohttp::SUBMISSION_CLASS + 55);
    let unpadded = encode_request(&request, "https", "relayer.test").unwrap();
    assert_eq!(&plain[..unpadded.len()], unpadded.as_slice());
    assert!(plain[unpadded.len()..].iter().all(|&b| b == 0));
    assert_eq!(decode_padded_request(&plain).unwrap(), request);

    // The reference seals a padded response with a fresh nonce; our client opens it.
    let nonce = [0x42u8; 16];
    let (_, key, iv) = response_keys(|label, out| ctx.export(label, out).unwrap(), &enc, &nonce);
    let bhttp = encode_padded_response(
        202,
        &[("content-type".into(), "application/json".into())],
        b"{\"id\":\"x\"}",
    )
    .unwrap();
    // The same response unpadded is refused by our client (a relayer that does not pad would
    // let an onlooker read the answer's length).
    let unpadded = encode_response(202, &[], b"{\"id\":\"x\"}").unwrap();
    let (message2, pending2) = encapsulate(KEY_CONFIG, &request, "https", "relayer.test").unwrap();
    let (_, ctx2, enc2) = reference_open(&h(SKR), &message2);
    let (_, key2, iv2) =
        response_keys(|label, out| ctx2.export(label, out).unwrap(), &enc2, &nonce);
    let mut sealed2 = nonce.to_vec();
    sealed2.extend(aes_seal(&key2, &iv2, &unpadded));
    assert!(matches!(
        pending2.open(&sealed2),
        Err(OhttpError::BadResponse(_))
    ));

    let mut sealed = nonce.to_vec();
    sealed.extend(aes_seal(&key, &iv, &bhttp));
    let response = pending.open(&sealed).unwrap();
    assert_eq!(response.status, 202);
    assert_eq!(response.body, b"{\"id\":\"x\"}");
    assert_eq!(response.header("content-type"), Some("application/json"));
}

#[test]
fn our_gateway_opens_a_reference_encapsulation_and_its_seal_opens() {
    let gateway = OhttpGateway::from_seed(b"rfc 9458 interop seed, 32 bytes!").unwrap();
    let config = h(&gateway.public_key());
    let header = [1u8, 0x00, 0x20, 0x00, 0x01, 0x00, 0x01];
    // The published request as is (unpadded) is refused: our gateway takes only padded ones.
    let (unpadded, _, _) = reference::encapsulate(&config, None, &h(BHTTP_REQUEST));
    assert!(matches!(gateway.open(&unpadded), Err(OhttpError::Open)));
    assert_eq!(&unpadded[..7], &header);

    let bhttp = pad(&h(BHTTP_REQUEST), &REQUEST_CLASSES).unwrap();
    let (message, sender, enc) = reference::encapsulate(&config, None, &bhttp);
    let (request, sealer) = gateway.open(&message).unwrap();
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("GET", "/")
    );
    let sealed = sealer
        .seal(
            200,
            &[("content-type".into(), "text/plain".into())],
            b"hello",
        )
        .unwrap();

    let (nonce, ct) = sealed.split_at(16);
    let (_, key, iv) = response_keys(|label, out| sender.export(label, out).unwrap(), &enc, nonce);
    let plain = aes_open(&key, &iv, ct);
    assert_eq!(plain.len(), 1_024, "padded to the smallest response class");
    let response = decode_response(&plain).unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"hello");
}

#[test]
fn rfc9292_known_length_request_figure_8() {
    let bytes = h(RFC9292_FIG8);
    let request = decode_request(&bytes).unwrap();
    assert_eq!(request.method, "GET");
    assert_eq!(request.path, "/hello.txt");
    assert_eq!(
        request.headers,
        vec![
            (
                "user-agent".to_string(),
                "curl/7.16.3 libcurl/7.16.3 OpenSSL/0.9.7l zlib/1.2.3".to_string()
            ),
            ("host".to_string(), "www.example.com".to_string()),
            ("accept-language".to_string(), "en, mi".to_string()),
        ]
    );
    assert!(request.body.is_empty());
    // Re-encoding (scheme https, empty authority as in the figure) gives the figure's bytes.
    assert_eq!(
        hex::encode(encode_request(&request, "https", "").unwrap()),
        RFC9292_FIG8
    );
    // The indeterminate-length, padded form of the same request (Figure 9) decodes the same.
    assert_eq!(decode_request(&h(RFC9292_FIG9)).unwrap(), request);
}

#[test]
fn rfc9292_known_length_response_figure_13() {
    let response = decode_response(&h(RFC9292_FIG13)).unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"This content contains CRLF.\r\n");
    assert!(response.headers.is_empty());
    // Without the trailer, our encoder writes the figure's bytes up to the trailer section.
    let ours = encode_response(200, &[], b"This content contains CRLF.\r\n").unwrap();
    let fig = h(RFC9292_FIG13);
    assert_eq!(&ours[..ours.len() - 1], &fig[..ours.len() - 1]);
    assert_eq!(ours.last(), Some(&0), "empty trailer section");
}
