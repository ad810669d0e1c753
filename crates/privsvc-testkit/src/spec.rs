//! What one relayer of a [`crate::LocalStack`] is: its name, account, tokens, OHTTP and any
//! other setting of [`RelayerConfig`].

use std::fmt;
use std::sync::Arc;

use privsvc_relayer::RelayerConfig;

/// Where a relayer's tokens come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayerTokens {
    /// `TOKENS=off`: submissions are rate limited per source address instead.
    Off,
    /// `TOKENS=required`, `ISSUER=on`: the relayer runs the token issuer itself.
    Issuer,
    /// `TOKENS=required` with the issuer of the named relayer of the same stack (which must be
    /// declared before this one and run the issuer).
    From(String),
}

type Configure = Arc<dyn Fn(&mut RelayerConfig) + Send + Sync>;

/// One relayer of a local stack. Defaults: `TOKENS=off`, OHTTP off, the dev account of its
/// position in the stack, and fast test timings (see [`crate::LocalStackBuilder::relayer`]).
#[derive(Clone)]
pub struct RelayerSpec {
    pub(crate) name: String,
    pub(crate) account: Option<usize>,
    pub(crate) tokens: RelayerTokens,
    pub(crate) ohttp: bool,
    pub(crate) ohttp_seed: Option<[u8; 32]>,
    pub(crate) configure: Vec<Configure>,
}

impl fmt::Debug for RelayerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RelayerSpec")
            .field("name", &self.name)
            .field("account", &self.account)
            .field("tokens", &self.tokens)
            .field("ohttp", &self.ohttp)
            .field("settings", &self.configure.len())
            .finish()
    }
}

impl RelayerSpec {
    /// A relayer called `name` (how the stack's accessors find it).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            account: None,
            tokens: RelayerTokens::Off,
            ohttp: false,
            ohttp_seed: None,
            configure: Vec::new(),
        }
    }

    /// `TOKENS=required`, `ISSUER=on`: this relayer issues tokens and requires them.
    pub fn issuer(mut self) -> Self {
        self.tokens = RelayerTokens::Issuer;
        self
    }

    /// `TOKENS=required`, accepting the tokens of the issuer run by relayer `name`.
    pub fn tokens_from(mut self, name: impl Into<String>) -> Self {
        self.tokens = RelayerTokens::From(name.into());
        self
    }

    /// `OHTTP=on` with a random gateway seed.
    pub fn ohttp(mut self) -> Self {
        self.ohttp = true;
        self
    }

    /// `OHTTP=on` with this gateway seed.
    pub fn ohttp_seed(mut self, seed: [u8; 32]) -> Self {
        self.ohttp = true;
        self.ohttp_seed = Some(seed);
        self
    }

    /// The dev account (index into `privsvc_devnet::DEV_PRIVATE_KEYS`) the relayer writes from.
    pub fn account(mut self, index: usize) -> Self {
        self.account = Some(index);
        self
    }

    /// Any other setting, applied after the stack's defaults (batching, limits, timers).
    pub fn with(mut self, configure: impl Fn(&mut RelayerConfig) + Send + Sync + 'static) -> Self {
        self.configure.push(Arc::new(configure));
        self
    }

    /// The relayer's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}
