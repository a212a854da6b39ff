//! IOCTL (MS-SMB2 3.3.5.15): FSCTL_VALIDATE_NEGOTIATE_INFO and, with multichannel,
//! FSCTL_QUERY_NETWORK_INTERFACE_INFO; every other control code is refused as a server
//! without it would refuse it.

use bytes::{BufMut, BytesMut};
use smb3_proto::NtStatus;

use super::Ctx;
use crate::wire::{body_offset, slice_at, Fields, Handled, Reply};

const FSCTL_VALIDATE_NEGOTIATE_INFO: u32 = 0x0014_0204;
const FSCTL_QUERY_NETWORK_INTERFACE_INFO: u32 = 0x0014_01FC;

/// NETWORK_INTERFACE_INFO (MS-SMB2 2.2.32.5): 24 bytes, then a 128-byte SOCKADDR_STORAGE.
const INTERFACE_ENTRY_LEN: usize = 152;

/// The link speed reported for every address: 10 Gbit/s.
const LINK_SPEED: u64 = 10_000_000_000;

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
        FSCTL_VALIDATE_NEGOTIATE_INFO => {
            let out = validate_negotiate(ctx, input)?;
            Ok(ioctl_reply(code, file_id, &out))
        }
        FSCTL_QUERY_NETWORK_INTERFACE_INFO if ctx.config.multichannel => {
            Ok(ioctl_reply(code, file_id, &interfaces(ctx)))
        }
        _ => Err(NtStatus::NOT_SUPPORTED),
    }
}

/// One entry per address the server listens on, IPv4, neither RSS nor RDMA capable.
fn interfaces(ctx: &Ctx<'_>) -> BytesMut {
    let mut out = BytesMut::new();
    let count = ctx.config.addresses.len();
    for (i, ip) in ctx.config.addresses.iter().enumerate() {
        let start = out.len();
        let next = if i + 1 < count {
            INTERFACE_ENTRY_LEN
        } else {
            0
        };
        out.put_u32_le(next as u32);
        out.put_u32_le(i as u32 + 1); // IfIndex
        out.put_u32_le(0); // Capability
        out.put_u32_le(0);
        out.put_u64_le(LINK_SPEED);
        out.put_u16_le(2); // AF_INET
        out.put_u16_le(0); // Port
        out.put_slice(&ip.octets());
        out.resize(start + INTERFACE_ENTRY_LEN, 0);
    }
    out
}

/// An IOCTL reply body carrying `output` (MS-SMB2 2.2.32), no input echoed.
fn ioctl_reply(code: u32, file_id: [u8; 16], output: &[u8]) -> Reply {
    let mut body = BytesMut::new();
    body.put_u16_le(49);
    body.put_u16_le(0);
    body.put_u32_le(code);
    body.put_slice(&file_id);
    body.put_u32_le(u32::from(body_offset(48)));
    body.put_u32_le(0);
    body.put_u32_le(u32::from(body_offset(48)));
    body.put_u32_le(output.len() as u32);
    body.put_u32_le(0);
    body.put_u32_le(0);
    body.put_slice(output);
    Reply::ok(body)
}

/// MS-SMB2 3.3.5.15.12: the client's copy of what it sent in NEGOTIATE must match what the
/// server received; the answer repeats what the server chose.
fn validate_negotiate(ctx: &mut Ctx<'_>, input: &[u8]) -> Result<BytesMut, NtStatus> {
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
    Ok(out)
}
