//! What can fail while setting the inspector up. Failures while serving a connection
//! never surface here: each becomes a refusal or a 502 that the sandbox sees and an
//! [`crate::HttpEvent`] the session records.

/// Why [`crate::Inspector::new`] or [`crate::Inspector::leaf_for`] failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The session's CA key or certificate could not be made.
    #[error(
        "could not generate the session's HTTPS inspection certificate authority: {0} (the crypto backend failed; run without method and path rules to do without inspection)"
    )]
    Ca(String),
    /// A leaf certificate could not be minted for a name.
    #[error(
        "could not mint a certificate for '{name}': {problem} (only DNS names and IP addresses can be inspected)"
    )]
    Leaf { name: String, problem: String },
    /// A secret's definition is unusable. The value is never quoted.
    #[error("secret {name}: {problem}")]
    Secret { name: String, problem: String },
}
