//! Authentication through the `sspi` crate: SPNEGO with NTLMv2 (Kerberos when configured).
//!
//! SMB2 SESSION_SETUP just carries opaque GSS tokens; this module turns the server's tokens
//! into the client's next token and, at the end, yields the session key that signing and
//! encryption keys are derived from (MS-SMB2 3.2.5.3.1).

use sspi::ntlm::NtlmConfig;
use sspi::{
    AuthIdentity, BufferType, ClientRequestFlags, CredentialUse, Credentials, DataRepresentation,
    Negotiate, NegotiateConfig, SecurityBuffer, SecurityStatus, Sspi, SspiImpl, Username,
};

use crate::error::{AuthFailure, Error, Result};

/// User name, domain and password for NTLM (and Kerberos, later).
#[derive(Clone)]
pub struct UserCredentials {
    /// Account name.
    pub user: String,
    /// NetBIOS domain or workgroup; empty means the server's own.
    pub domain: String,
    /// Password.
    pub password: String,
}

impl std::fmt::Debug for UserCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserCredentials")
            .field("user", &self.user)
            .field("domain", &self.domain)
            .field("password", &"<hidden>")
            .finish()
    }
}

/// One authentication exchange in progress.
pub(crate) struct Authenticator {
    ctx: Negotiate,
    creds: Option<sspi::CredentialsBuffers>,
    target: String,
    rounds: u32,
    done: bool,
}

fn sspi_err(e: sspi::Error) -> Error {
    Error::Auth {
        kind: AuthFailure::SecurityPackage,
        detail: e.to_string(),
    }
}

impl Authenticator {
    /// Start an NTLM-over-SPNEGO exchange for `creds` against `server` (host name or address).
    pub(crate) fn ntlm(creds: &UserCredentials, server: &str) -> Result<Authenticator> {
        let workstation = local_host_name();
        let config = NegotiateConfig::new(
            Box::new(NtlmConfig::new(workstation.clone())),
            Some("ntlm".to_string()),
            workstation,
        );
        let mut ctx = Negotiate::new_client(config).map_err(sspi_err)?;
        let domain = (!creds.domain.is_empty()).then_some(creds.domain.as_str());
        let username = Username::new(&creds.user, domain).map_err(|e| Error::Auth {
            kind: AuthFailure::SecurityPackage,
            detail: format!("invalid user name: {e}"),
        })?;
        let identity = AuthIdentity {
            username,
            password: creds.password.clone().into(),
        };
        let acquired = ctx
            .acquire_credentials_handle()
            .with_credential_use(CredentialUse::Outbound)
            .with_auth_data(&Credentials::AuthIdentity(identity))
            .execute(&mut ctx)
            .map_err(sspi_err)?;
        Ok(Authenticator {
            ctx,
            creds: acquired.credentials_handle,
            target: format!("cifs/{server}"),
            rounds: 0,
            done: false,
        })
    }

    /// Feed the server's token (empty for the first call) and get the next token to send.
    /// Returns `None` once the exchange is complete on the client side.
    pub(crate) fn step(&mut self, server_token: &[u8]) -> Result<Option<Vec<u8>>> {
        if self.done {
            return Ok(None);
        }
        self.rounds += 1;
        if self.rounds > 8 {
            return Err(Error::Auth {
                kind: AuthFailure::TooManyRounds,
                detail: format!("{} rounds", self.rounds),
            });
        }
        let mut input = vec![SecurityBuffer::new(
            server_token.to_vec(),
            BufferType::Token,
        )];
        let mut output = vec![SecurityBuffer::new(Vec::new(), BufferType::Token)];
        let flags = ClientRequestFlags::MUTUAL_AUTH
            | ClientRequestFlags::INTEGRITY
            | ClientRequestFlags::CONFIDENTIALITY
            | ClientRequestFlags::ALLOCATE_MEMORY;
        let mut builder = self
            .ctx
            .initialize_security_context()
            .with_credentials_handle(&mut self.creds)
            .with_context_requirements(flags)
            .with_target_data_representation(DataRepresentation::Native)
            .with_target_name(&self.target)
            .with_output(&mut output);
        if !server_token.is_empty() {
            builder = builder.with_input(&mut input);
        }
        let result = self
            .ctx
            .initialize_security_context_impl(&mut builder)
            .map_err(sspi_err)?
            .resolve_to_result()
            .map_err(sspi_err)?;
        match result.status {
            SecurityStatus::CompleteNeeded | SecurityStatus::CompleteAndContinue => {
                self.ctx
                    .complete_auth_token(&mut output)
                    .map_err(sspi_err)?;
            }
            _ => {}
        }
        if !matches!(
            result.status,
            SecurityStatus::ContinueNeeded | SecurityStatus::CompleteAndContinue
        ) {
            self.done = true;
        }
        let token = std::mem::take(&mut output[0].buffer);
        Ok(if token.is_empty() { None } else { Some(token) })
    }

    /// Whether the client side is complete.
    pub(crate) fn is_complete(&self) -> bool {
        self.done
    }

    /// The session key once complete (16 bytes for NTLM; Kerberos keys may be longer).
    pub(crate) fn session_key(&self) -> Result<Vec<u8>> {
        let keys = self.ctx.query_context_session_key().map_err(sspi_err)?;
        Ok(keys.session_key.as_ref().clone())
    }
}

fn local_host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "SMB3CLIENT".to_string())
}
