//! IOCTL (MS-SMB2 3.3.5.15): FSCTL_VALIDATE_NEGOTIATE_INFO; every other control code is
//! refused as a server without it would refuse it.

use bytes::{BufMut, BytesMut};
use smb3_proto::NtStatus;

use super::Ctx;
use crate::wire::{body_offset, slice_at, Fields, Handled, Reply};

const FSCTL_VALIDATE_NEGOTIATE_INFO: u32 = 0x0014_0204;

pub(crate) fn ioctl(ctx: &mut Ctx<'_>) -> Handled {
    let mut f = Fields::body(ctx.msg);
    f.structure_size(57)?;
    f.skip(2)?;
    let code = f.u32()?;
    let file_id = f.array::<16>()?;
    let input_offset = f.u32()? as usize;
    let input_len = f.u32()? as usize;
    let input = slice_at(ctx.msg, input_offset, input_len)?;
    match code {
        FSCTL_VALIDATE_NEGOTIATE_INFO => validate_negotiate(ctx, input, file_id),
        _ => Err(NtStatus::NOT_SUPPORTED),
    }
}

/// MS-SMB2 3.3.5.15.12: the client's copy of what it sent in NEGOTIATE must match what the
/// server received; the answer repeats what the server chose.
fn validate_negotiate(ctx: &mut Ctx<'_>, input: &[u8], file_id: [u8; 16]) -> Handled {
    let n = ctx.negotiated.ok_or(NtStatus::INVALID_PARAMETER)?;
    if input.len() < 24 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let capabilities = u32::from_le_bytes(input[0..4].try_into().unwrap_or_default());
    let guid = &input[4..20];
    let security_mode = u16::from_le_bytes([input[20], input[21]]);
    let count = u16::from_le_bytes([input[22], input[23]]) as usize;
    let dialects: Vec<u16> = input
        .get(24..24 + 2 * count)
        .ok_or(NtStatus::INVALID_PARAMETER)?
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    if capabilities != n.client_capabilities
        || guid != n.client_guid
        || security_mode != n.client_security_mode
        || dialects != n.client_dialects
    {
        // The server ends the connection here; an error is as visible to a test.
        return Err(NtStatus::ACCESS_DENIED);
    }
    let mut out = BytesMut::new();
    out.put_u32_le(n.server_capabilities);
    out.put_slice(&ctx.server_guid);
    out.put_u16_le(n.server_security_mode);
    out.put_u16_le(n.dialect.code());
    let mut body = BytesMut::new();
    body.put_u16_le(49);
    body.put_u16_le(0);
    body.put_u32_le(FSCTL_VALIDATE_NEGOTIATE_INFO);
    body.put_slice(&file_id);
    body.put_u32_le(u32::from(body_offset(48)));
    body.put_u32_le(0);
    body.put_u32_le(u32::from(body_offset(48)));
    body.put_u32_le(out.len() as u32);
    body.put_u32_le(0);
    body.put_u32_le(0);
    body.put_slice(&out);
    Ok(Reply::ok(body))
}
