//! Calls from Rust into JavaScript objects (a wallet, a vault) that satisfy the crates' `Send +
//! Sync` traits: a trait object holds only a channel; one local task owns the JS object, makes
//! the calls and sends the answers back. Nothing here is `unsafe`.

use futures::channel::{mpsc, oneshot};
use futures::StreamExt;
use js_sys::{Array, Function, Promise, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// An argument of a call, in a form that can cross the channel.
#[derive(Debug, Clone)]
pub enum Arg {
    /// A string.
    Str(String),
    /// Bytes, passed as a `Uint8Array`.
    Bytes(Vec<u8>),
    /// JSON text, passed as the parsed object.
    Json(String),
    /// A number.
    Num(f64),
}

/// The form of the expected answer.
#[derive(Debug, Clone, Copy)]
pub enum Want {
    /// A string.
    Str,
    /// A `Uint8Array`.
    Bytes,
}

/// An answer.
#[derive(Debug)]
pub enum Reply {
    /// A string.
    Str(String),
    /// Bytes.
    Bytes(Vec<u8>),
}

/// One call: `target[method](...args)`, then optionally `result[then](...then_args)`.
#[derive(Debug)]
pub struct Call {
    /// Method of the bridged object.
    pub method: &'static str,
    /// Its arguments.
    pub args: Vec<Arg>,
    /// A method to call on the (awaited) result, with its arguments.
    pub then: Option<(&'static str, Vec<Arg>)>,
    /// The expected answer.
    pub want: Want,
}

type Request = (Call, oneshot::Sender<Result<Reply, String>>);

/// The sending side of a bridge; `Send + Sync`, cheap to clone.
#[derive(Clone, Debug)]
pub struct Bridge {
    tx: mpsc::UnboundedSender<Request>,
}

impl Bridge {
    /// Starts the local task that owns `target` and serves calls on it.
    pub fn start(target: JsValue) -> Bridge {
        let (tx, mut rx) = mpsc::unbounded::<Request>();
        wasm_bindgen_futures::spawn_local(async move {
            while let Some((call, reply)) = rx.next().await {
                let answer = serve(&target, call).await;
                let _ = reply.send(answer);
            }
        });
        Bridge { tx }
    }

    /// Makes `call` and waits for the answer; errors are the JS error messages.
    pub async fn call(&self, call: Call) -> Result<Reply, String> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .unbounded_send((call, tx))
            .map_err(|_| "the JavaScript object is gone".to_string())?;
        rx.await
            .map_err(|_| "the JavaScript call was dropped".to_string())?
    }

    /// A call expecting a string.
    pub async fn string(&self, method: &'static str, args: Vec<Arg>) -> Result<String, String> {
        match self
            .call(Call {
                method,
                args,
                then: None,
                want: Want::Str,
            })
            .await?
        {
            Reply::Str(s) => Ok(s),
            _ => Err(format!("{method} did not answer a string")),
        }
    }

    /// A call expecting bytes.
    pub async fn bytes(&self, method: &'static str, args: Vec<Arg>) -> Result<Vec<u8>, String> {
        match self
            .call(Call {
                method,
                args,
                then: None,
                want: Want::Bytes,
            })
            .await?
        {
            Reply::Bytes(b) => Ok(b),
            _ => Err(format!("{method} did not answer bytes")),
        }
    }
}

fn to_js(arg: Arg) -> Result<JsValue, String> {
    Ok(match arg {
        Arg::Str(s) => JsValue::from_str(&s),
        Arg::Bytes(b) => Uint8Array::from(b.as_slice()).into(),
        Arg::Json(text) => js_sys::JSON::parse(&text).map_err(describe)?,
        Arg::Num(n) => JsValue::from_f64(n),
    })
}

fn describe(e: JsValue) -> String {
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return format!(
            "{}: {}",
            String::from(err.name()),
            String::from(err.message())
        );
    }
    e.as_string().unwrap_or_else(|| format!("{e:?}"))
}

async fn invoke(target: &JsValue, method: &str, args: Vec<Arg>) -> Result<JsValue, String> {
    let f: Function = Reflect::get(target, &JsValue::from_str(method))
        .map_err(describe)?
        .dyn_into()
        .map_err(|_| format!("the object has no method {method}"))?;
    let list = Array::new();
    for a in args {
        list.push(&to_js(a)?);
    }
    let value = f.apply(target, &list).map_err(describe)?;
    // Await whatever the method returned (a plain value resolves at once).
    JsFuture::from(Promise::resolve(&value))
        .await
        .map_err(describe)
}

async fn serve(target: &JsValue, call: Call) -> Result<Reply, String> {
    let mut value = invoke(target, call.method, call.args).await?;
    if let Some((method, args)) = call.then {
        value = invoke(&value, method, args).await?;
    }
    match call.want {
        Want::Str => value
            .as_string()
            .map(Reply::Str)
            .ok_or_else(|| format!("{} answered no string", call.method)),
        Want::Bytes => value
            .dyn_into::<Uint8Array>()
            .map(|a| Reply::Bytes(a.to_vec()))
            .map_err(|_| format!("{} answered no Uint8Array", call.method)),
    }
}
