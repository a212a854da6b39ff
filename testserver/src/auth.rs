//! The server side of SESSION_SETUP's security exchange: NTLMv2 inside SPNEGO, accepted by
//! sspi's server implementation against the one account the test server knows. The client
//! runs its real authentication code against it and both ends arrive at the same session key,
//! from which the signing and sealing keys are derived as MS-SMB2 3.3.5.5.3 says.

use sspi::ntlm::NtlmConfig;
use sspi::{
    AuthIdentity, BufferType, CredentialUse, Credentials, CredentialsBuffers, DataRepresentation,
    Negotiate, NegotiateConfig, SecurityBuffer, SecurityStatus, ServerRequestFlags, Sspi, SspiImpl,
    Username,
};

/// Where one step of the exchange left it.
pub(crate) enum Step {
    /// Send this token with STATUS_MORE_PROCESSING_REQUIRED and wait for the next.
    Continue(Vec<u8>),
    /// Authenticated: the token to send with SUCCESS (may be empty) and the session key.
    Done {
        token: Vec<u8>,
        session_key: Vec<u8>,
    },
}

/// One account's exchange in progress.
pub(crate) struct Acceptor {
    ctx: Negotiate,
    creds: Option<CredentialsBuffers>,
}

impl Acceptor {
    pub(crate) fn new(user: &str, domain: &str, password: &str) -> Result<Acceptor, String> {
        let account = if domain.is_empty() {
            user.to_string()
        } else {
            format!("{domain}\\{user}")
        };
        let identity = AuthIdentity {
            username: Username::parse(&account).map_err(|e| e.to_string())?,
            password: password.to_string().into(),
        };
        let config = NegotiateConfig::new(
            Box::new(NtlmConfig::default()),
            Some("ntlm".to_string()),
            "SMB3TESTSERVER".to_string(),
        );
        let mut ctx =
            Negotiate::new_server(config, vec![identity.clone()]).map_err(|e| e.to_string())?;
        let acquired = ctx
            .acquire_credentials_handle()
            .with_credential_use(CredentialUse::Inbound)
            .with_auth_data(&Credentials::AuthIdentity(identity))
            .execute(&mut ctx)
            .map_err(|e| e.to_string())?;
        Ok(Acceptor {
            ctx,
            creds: acquired.credentials_handle,
        })
    }

    /// Take the client's token; any failure (a wrong password included) is an error.
    pub(crate) fn step(&mut self, token: &[u8]) -> Result<Step, String> {
        let mut input = vec![SecurityBuffer::new(token.to_vec(), BufferType::Token)];
        let mut output = vec![SecurityBuffer::new(Vec::new(), BufferType::Token)];
        let builder = self
            .ctx
            .accept_security_context()
            .with_credentials_handle(&mut self.creds)
            .with_context_requirements(ServerRequestFlags::empty())
            .with_target_data_representation(DataRepresentation::Native)
            .with_input(&mut input)
            .with_output(&mut output);
        let result = self
            .ctx
            .accept_security_context_impl(builder)
            .map_err(|e| e.to_string())?
            .resolve_to_result()
            .map_err(|e| e.to_string())?;
        if matches!(
            result.status,
            SecurityStatus::CompleteNeeded | SecurityStatus::CompleteAndContinue
        ) {
            self.ctx
                .complete_auth_token(&mut output)
                .map_err(|e| e.to_string())?;
        }
        let token = std::mem::take(&mut output[0].buffer);
        match result.status {
            SecurityStatus::ContinueNeeded | SecurityStatus::CompleteAndContinue => {
                Ok(Step::Continue(token))
            }
            SecurityStatus::Ok | SecurityStatus::CompleteNeeded => {
                let keys = self
                    .ctx
                    .query_context_session_key()
                    .map_err(|e| e.to_string())?;
                Ok(Step::Done {
                    token,
                    session_key: keys.session_key.as_ref().clone(),
                })
            }
            other => Err(format!("security package stopped with {other:?}")),
        }
    }
}
