//! MS-SMB2 2.2.31 SMB2 IOCTL Request and 2.2.32 SMB2 IOCTL Response, plus the payloads of the
//! FSCTLs the client itself issues: FSCTL_VALIDATE_NEGOTIATE_INFO (2.2.31.4, 2.2.32.6) and
//! FSCTL_QUERY_NETWORK_INTERFACE_INFO (2.2.32.5).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{bytes_at, DecodeError, Reader};
use crate::dialect::Dialect;
use crate::header::{Command, HEADER_LEN};
use crate::msg::negotiate::{Capabilities, SecurityMode};
use crate::msg::{FileId, RequestBody};
use crate::replay::{Replay, ReplayHazard};

/// FSCTL_DFS_GET_REFERRALS (MS-FSCC 2.3).
pub const FSCTL_DFS_GET_REFERRALS: u32 = 0x0006_0194;
/// FSCTL_PIPE_PEEK.
pub const FSCTL_PIPE_PEEK: u32 = 0x0011_400C;
/// FSCTL_PIPE_TRANSCEIVE: write then read on a named pipe (DCE/RPC).
pub const FSCTL_PIPE_TRANSCEIVE: u32 = 0x0011_C017;
/// FSCTL_SRV_REQUEST_RESUME_KEY: the key naming the source of a server-side copy.
pub const FSCTL_SRV_REQUEST_RESUME_KEY: u32 = 0x0014_0078;
/// FSCTL_SRV_COPYCHUNK: server-side copy (source opened for read).
pub const FSCTL_SRV_COPYCHUNK: u32 = 0x0014_40F2;
/// FSCTL_SRV_COPYCHUNK_WRITE: server-side copy (source opened for write).
pub const FSCTL_SRV_COPYCHUNK_WRITE: u32 = 0x0014_80F2;
/// FSCTL_QUERY_NETWORK_INTERFACE_INFO: the server's interfaces, for multichannel.
pub const FSCTL_QUERY_NETWORK_INTERFACE_INFO: u32 = 0x0014_01FC;
/// FSCTL_VALIDATE_NEGOTIATE_INFO: 3.0/3.0.2 secure dialect negotiation.
pub const FSCTL_VALIDATE_NEGOTIATE_INFO: u32 = 0x0014_0204;
/// FSCTL_SRV_ENUMERATE_SNAPSHOTS (MS-SMB2 2.2.31, 3.3.5.15.1): list the share's previous
/// versions; the output is an SRV_SNAPSHOT_ARRAY (`msg::snapshots`).
pub const FSCTL_SRV_ENUMERATE_SNAPSHOTS: u32 = 0x0014_4064;
/// FSCTL_SET_SPARSE (MS-FSCC 2.3.64).
pub const FSCTL_SET_SPARSE: u32 = 0x0009_00C4;
/// FSCTL_QUERY_ALLOCATED_RANGES (MS-FSCC 2.3.47).
pub const FSCTL_QUERY_ALLOCATED_RANGES: u32 = 0x0009_40CF;
/// FSCTL_SET_ZERO_DATA (MS-FSCC 2.3.85): zero a range of a file, deallocating it where the
/// file is sparse.
pub const FSCTL_SET_ZERO_DATA: u32 = 0x0009_80C8;

/// IOCTL request Flags: SMB2_0_IOCTL_IS_FSCTL (the request is an FSCTL, not a device IOCTL).
pub const IOCTL_FLAG_IS_FSCTL: u32 = 0x0000_0001;

/// Fixed part of the request body; StructureSize 57 counts one byte of the buffer.
const REQUEST_FIXED_LEN: usize = 56;
/// Fixed part of the response body; StructureSize 49 counts one byte of the buffer.
const RESPONSE_FIXED_LEN: usize = 48;

/// MS-SMB2 2.2.31 SMB2 IOCTL Request.
///
/// The input buffer is not copied into the body: it is the zero-copy [`RequestBody::payload`]
/// sent right after the 56-byte fixed part, where InputOffset points. No output buffer is sent
/// (OutputOffset and OutputCount are 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoctlRequest {
    /// CtlCode (one of the `FSCTL_*` constants).
    pub ctl_code: u32,
    /// The open the control applies to ([`FileId::ANY`] for FSCTLs that need none).
    pub file_id: FileId,
    /// Input data.
    pub input: Bytes,
    /// MaxInputResponse: how much input data the server may return (usually 0).
    pub max_input_response: u32,
    /// MaxOutputResponse: how much output data the server may return.
    pub max_output_response: u32,
    /// Flags ([`IOCTL_FLAG_IS_FSCTL`]).
    pub flags: u32,
}

impl IoctlRequest {
    /// An FSCTL request (Flags = IS_FSCTL, MaxInputResponse = 0).
    pub fn fsctl(ctl_code: u32, file_id: FileId, input: Bytes, max_output_response: u32) -> Self {
        IoctlRequest {
            ctl_code,
            file_id,
            input,
            max_input_response: 0,
            max_output_response,
            flags: IOCTL_FLAG_IS_FSCTL,
        }
    }
}

impl RequestBody for IoctlRequest {
    const COMMAND: Command = Command::IOCTL;

    fn encode_body(&self, msg: &mut BytesMut) {
        let input_len = len_u32(self.input.len());
        // "If no input data is required ... the client SHOULD set this value to 0" (2.2.31).
        let input_offset = if input_len == 0 {
            0
        } else {
            (msg.len() + REQUEST_FIXED_LEN) as u32
        };
        msg.reserve(REQUEST_FIXED_LEN + 1);
        msg.put_u16_le(57); // StructureSize
        msg.put_u16_le(0); // Reserved
        msg.put_u32_le(self.ctl_code);
        msg.put_u64_le(self.file_id.persistent);
        msg.put_u64_le(self.file_id.volatile);
        msg.put_u32_le(input_offset);
        msg.put_u32_le(input_len);
        msg.put_u32_le(self.max_input_response);
        msg.put_u32_le(0); // OutputOffset
        msg.put_u32_le(0); // OutputCount
        msg.put_u32_le(self.max_output_response);
        msg.put_u32_le(self.flags);
        msg.put_u32_le(0); // Reserved2
        if input_len == 0 {
            // The odd StructureSize promises at least one byte of variable part.
            msg.put_u8(0);
        }
    }

    fn payload(&self) -> Bytes {
        self.input.clone()
    }

    /// MS-SMB2 3.3.5.15: the charge covers the larger of what is sent (InputCount +
    /// OutputCount) and what may come back (MaxInputResponse + MaxOutputResponse).
    fn credit_payload(&self) -> u32 {
        let sent = len_u32(self.input.len());
        let back = self
            .max_input_response
            .saturating_add(self.max_output_response);
        sent.max(back)
    }

    /// IOCTL: FSCTLs on files are idempotent; a named-pipe transceive carries an RPC call
    /// that must not be delivered twice.
    fn replay(&self) -> Replay {
        if self.ctl_code == FSCTL_PIPE_TRANSCEIVE {
            Replay::Unsafe(ReplayHazard::PipeTransaction)
        } else {
            Replay::Safe
        }
    }
}

fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// MS-SMB2 2.2.32 SMB2 IOCTL Response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoctlResponse {
    /// CtlCode echoed by the server.
    pub ctl_code: u32,
    /// FileId echoed by the server.
    pub file_id: FileId,
    /// Flags (reserved, 0).
    pub flags: u32,
    /// Input data returned by the server (usually empty).
    pub input: Bytes,
    /// Output data, a slice of the message (no copy).
    pub output: Bytes,
}

impl IoctlResponse {
    /// Decode the response from one whole message (header included).
    pub fn decode(msg: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        r.structure_size(49, "IOCTL response StructureSize")?;
        r.skip(2, "IOCTL response Reserved")?;
        let ctl_code = r.u32("CtlCode")?;
        let file_id = FileId {
            persistent: r.u64("FileId.Persistent")?,
            volatile: r.u64("FileId.Volatile")?,
        };
        let input_offset = r.u32("InputOffset")? as usize;
        let input_count = r.u32("InputCount")? as usize;
        let output_offset = r.u32("OutputOffset")? as usize;
        let output_count = r.u32("OutputCount")? as usize;
        let flags = r.u32("Flags")?;
        r.skip(4, "Reserved2")?;

        let input = buffer(msg, input_offset, input_count, "IOCTL response input")?;
        let output = buffer(msg, output_offset, output_count, "IOCTL response output")?;
        Ok(IoctlResponse {
            ctl_code,
            file_id,
            flags,
            input,
            output,
        })
    }
}

/// A variable buffer of the response: inside the message and past the fixed part.
fn buffer(
    msg: &Bytes,
    offset: usize,
    len: usize,
    what: &'static str,
) -> Result<Bytes, DecodeError> {
    if len != 0 && offset < HEADER_LEN + RESPONSE_FIXED_LEN {
        return Err(DecodeError::BadOffset {
            what,
            offset,
            length: len,
            message_len: msg.len(),
        });
    }
    bytes_at(msg, offset, len, what)
}

/// MS-SMB2 2.2.31.4 VALIDATE_NEGOTIATE_INFO Request: the values the client sent in its
/// NEGOTIATE request, echoed for the server to check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidateNegotiateInfoRequest {
    /// Capabilities as sent in NEGOTIATE.
    pub capabilities: Capabilities,
    /// ClientGuid as sent in NEGOTIATE.
    pub guid: [u8; 16],
    /// SecurityMode as sent in NEGOTIATE.
    pub security_mode: SecurityMode,
    /// Dialects as sent in NEGOTIATE, same order.
    pub dialects: Vec<Dialect>,
}

impl ValidateNegotiateInfoRequest {
    /// The FSCTL input buffer.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(24 + 2 * self.dialects.len());
        out.put_u32_le(self.capabilities.0);
        out.put_slice(&self.guid);
        out.put_u16_le(self.security_mode.0);
        out.put_u16_le(self.dialects.len() as u16);
        for d in &self.dialects {
            out.put_u16_le(d.code());
        }
        out.freeze()
    }
}

/// MS-SMB2 2.2.32.6 VALIDATE_NEGOTIATE_INFO Response: the server's view of the negotiation,
/// to compare with the NEGOTIATE response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidateNegotiateInfoResponse {
    /// Server capabilities.
    pub capabilities: Capabilities,
    /// ServerGuid.
    pub guid: [u8; 16],
    /// Server SecurityMode.
    pub security_mode: SecurityMode,
    /// The selected DialectRevision.
    pub dialect: u16,
}

impl ValidateNegotiateInfoResponse {
    /// Decode the FSCTL output buffer (exactly 24 bytes are read; more is ignored).
    pub fn decode(output: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(output);
        Ok(ValidateNegotiateInfoResponse {
            capabilities: Capabilities(r.u32("VALIDATE_NEGOTIATE_INFO Capabilities")?),
            guid: r.guid("VALIDATE_NEGOTIATE_INFO Guid")?,
            security_mode: SecurityMode(r.u16("VALIDATE_NEGOTIATE_INFO SecurityMode")?),
            dialect: r.u16("VALIDATE_NEGOTIATE_INFO Dialect")?,
        })
    }
}

/// Interface capability bits (MS-SMB2 2.2.32.5 Capability).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct InterfaceCapability(pub u32);

impl InterfaceCapability {
    /// RSS_CAPABLE: the interface spreads receive load over several CPUs.
    pub const RSS: u32 = 0x0000_0001;
    /// RDMA_CAPABLE: the interface supports SMB Direct.
    pub const RDMA: u32 = 0x0000_0002;

    /// Whether every bit of `flag` is set.
    pub fn has(self, flag: u32) -> bool {
        self.0 & flag == flag
    }
}

/// One entry of an FSCTL_QUERY_NETWORK_INTERFACE_INFO answer (MS-SMB2 2.2.32.5), for an
/// IPv4 or IPv6 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetworkInterfaceInfo {
    /// IfIndex: the server's interface number (several addresses can share one).
    pub if_index: u32,
    /// Capability (RSS, RDMA).
    pub capability: InterfaceCapability,
    /// LinkSpeed in bits per second, as sent. Samba reports 4294967295000000 when it does not
    /// know; 0 also occurs.
    pub link_speed: u64,
    /// The address.
    pub address: IpAddr,
    /// Port from the socket address (network byte order on the wire; servers send 0).
    pub port: u16,
    /// IPv6 FlowInfo as sent (0 for IPv4; the spec requires 0).
    pub flow_info: u32,
    /// IPv6 ScopeId as sent (0 for IPv4; the spec requires 0).
    pub scope_id: u32,
}

/// Size of one NETWORK_INTERFACE_INFO entry: 24 bytes of fields + 128-byte SockAddr_Storage.
pub const NETWORK_INTERFACE_INFO_LEN: usize = 152;
const SOCKADDR_STORAGE_LEN: usize = 128;
/// SockAddr_Storage Family for IPv4 (MS-SMB2 2.2.32.5.1).
const FAMILY_INTER_NETWORK: u16 = 0x0002;
/// SockAddr_Storage Family for IPv6.
const FAMILY_INTER_NETWORK_V6: u16 = 0x0017;

/// Decode the output of FSCTL_QUERY_NETWORK_INTERFACE_INFO (MS-SMB2 2.2.32.5): a chain of
/// 152-byte entries linked by Next (relative to the entry, 0 on the last).
///
/// Defensive against a hostile chain: Next must point forward past the whole current entry,
/// be 8-byte aligned and land inside the buffer; every entry must be complete; and the walk
/// stops after `len / 152` entries, so it always terminates. Entries with an address family
/// other than IPv4/IPv6 are skipped, not an error. An empty buffer gives an empty list.
pub fn parse_network_interfaces(output: &[u8]) -> Result<Vec<NetworkInterfaceInfo>, DecodeError> {
    const WHAT: &str = "NETWORK_INTERFACE_INFO";
    let mut out = Vec::new();
    if output.is_empty() {
        return Ok(out);
    }
    // Every step advances at least one whole entry, so at most len / 152 complete entries
    // exist; one more attempt lets a truncated last entry report itself as such.
    let max_entries = output.len() / NETWORK_INTERFACE_INFO_LEN;
    let mut pos = 0usize;
    for _ in 0..=max_entries {
        let mut r = Reader::at(output, pos)?;
        let entry = r.bytes(NETWORK_INTERFACE_INFO_LEN, "NETWORK_INTERFACE_INFO entry")?;
        let (next, info) = parse_interface_entry(entry)?;
        out.extend(info);
        if next == 0 {
            return Ok(out);
        }
        if next % 8 != 0 {
            return Err(DecodeError::InvalidValue {
                what: "NETWORK_INTERFACE_INFO Next (not 8-byte aligned)",
                value: next as u64,
            });
        }
        if next < NETWORK_INTERFACE_INFO_LEN {
            return Err(DecodeError::Inconsistent {
                what: WHAT,
                detail: "Next does not point past the current entry",
            });
        }
        pos = match pos.checked_add(next) {
            Some(p) if p < output.len() => p,
            _ => {
                return Err(DecodeError::BadOffset {
                    what: "NETWORK_INTERFACE_INFO Next",
                    offset: pos.saturating_add(next),
                    length: NETWORK_INTERFACE_INFO_LEN,
                    message_len: output.len(),
                })
            }
        };
    }
    Err(DecodeError::Inconsistent {
        what: WHAT,
        detail: "more entries chained than the buffer can hold",
    })
}

/// One 152-byte entry: its Next value and, for a known family, the decoded entry.
fn parse_interface_entry(
    entry: &[u8],
) -> Result<(usize, Option<NetworkInterfaceInfo>), DecodeError> {
    let mut r = Reader::new(entry);
    let next = r.u32("NETWORK_INTERFACE_INFO Next")? as usize;
    let if_index = r.u32("NETWORK_INTERFACE_INFO IfIndex")?;
    let capability = InterfaceCapability(r.u32("NETWORK_INTERFACE_INFO Capability")?);
    r.skip(4, "NETWORK_INTERFACE_INFO Reserved")?;
    let link_speed = r.u64("NETWORK_INTERFACE_INFO LinkSpeed")?;
    let mut sa = Reader::new(r.bytes(SOCKADDR_STORAGE_LEN, "SockAddr_Storage")?);
    let family = sa.u16("SockAddr_Storage Family")?;
    // sockaddr layout: the port (and IPv6 flow info) are in network byte order.
    let port = u16::from_be_bytes(sa.array("SOCKADDR Port")?);
    let (address, flow_info, scope_id) = match family {
        FAMILY_INTER_NETWORK => {
            let v4: [u8; 4] = sa.array("SOCKADDR_IN IPv4Address")?;
            (IpAddr::V4(Ipv4Addr::from(v4)), 0, 0)
        }
        FAMILY_INTER_NETWORK_V6 => {
            let flow_info = sa.u32("SOCKADDR_IN6 FlowInfo")?;
            let v6: [u8; 16] = sa.array("SOCKADDR_IN6 IPv6Address")?;
            let scope_id = sa.u32("SOCKADDR_IN6 ScopeId")?;
            (IpAddr::V6(Ipv6Addr::from(v6)), flow_info, scope_id)
        }
        _ => return Ok((next, None)),
    };
    Ok((
        next,
        Some(NetworkInterfaceInfo {
            if_index,
            capability,
            link_speed,
            address,
            port,
            flow_info,
            scope_id,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{Header, HeaderFlags};
    use crate::msg::test_util::{encode, hex};

    fn response(body: &[u8]) -> Bytes {
        let mut msg = BytesMut::new();
        let mut h = Header::request(Command::IOCTL);
        h.flags = HeaderFlags(HeaderFlags::SERVER_TO_REDIR);
        h.encode(&mut msg);
        msg.put_slice(body);
        msg.freeze()
    }

    #[test]
    fn query_interfaces_request_golden_bytes() {
        let req = IoctlRequest::fsctl(
            FSCTL_QUERY_NETWORK_INTERFACE_INFO,
            FileId::ANY,
            Bytes::new(),
            65536,
        );
        let msg = encode(&req);
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            "3900 0000 fc011400 ffffffffffffffff ffffffffffffffff
             00000000 00000000 00000000 00000000 00000000 00000100 01000000 00000000 00"
                .split_whitespace()
                .collect::<String>()
        );
        assert!(req.payload().is_empty());
        assert_eq!(req.credit_payload(), 65536);
    }

    #[test]
    fn validate_negotiate_request_golden_bytes() {
        let vneg = ValidateNegotiateInfoRequest {
            capabilities: Capabilities(0x7f),
            guid: core::array::from_fn(|i| i as u8),
            security_mode: SecurityMode(SecurityMode::SIGNING_ENABLED),
            dialects: vec![Dialect::Smb210, Dialect::Smb300, Dialect::Smb302],
        };
        let input = vneg.encode();
        assert_eq!(
            hex::encode(&input),
            "7f000000 000102030405060708090a0b0c0d0e0f 0100 0300 1002 0003 0203".replace(' ', "")
        );
        let req = IoctlRequest::fsctl(
            FSCTL_VALIDATE_NEGOTIATE_INFO,
            FileId::ANY,
            input.clone(),
            24,
        );
        let msg = encode(&req);
        // Input follows the 56-byte fixed part: 0x40 + 56 = 0x78; it is the payload, not copied
        // into the body.
        assert_eq!(
            hex::encode(&msg[HEADER_LEN..]),
            "3900 0000 04021400 ffffffffffffffff ffffffffffffffff
             78000000 1e000000 00000000 00000000 00000000 18000000 01000000 00000000"
                .split_whitespace()
                .collect::<String>()
        );
        assert_eq!(req.payload(), input);
        assert_eq!(req.payload().as_ptr(), input.as_ptr());
        assert_eq!(req.credit_payload(), 30);
    }

    #[test]
    fn credit_payload_takes_the_larger_direction() {
        let mut req = IoctlRequest::fsctl(
            FSCTL_PIPE_TRANSCEIVE,
            FileId {
                persistent: 1,
                volatile: 2,
            },
            Bytes::from(vec![0u8; 200_000]),
            1024,
        );
        assert_eq!(req.credit_payload(), 200_000);
        req.max_output_response = 300_000;
        req.max_input_response = 10;
        assert_eq!(req.credit_payload(), 300_010);
        req.max_input_response = u32::MAX;
        assert_eq!(req.credit_payload(), u32::MAX);
    }

    fn ioctl_response_body(output_offset: u32, output: &[u8]) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_slice(&hex(
            "3100 0000 fc011400 ffffffffffffffff ffffffffffffffff 70000000 00000000",
        ));
        b.put_u32_le(output_offset);
        b.put_u32_le(output.len() as u32);
        b.put_u64_le(0); // Flags, Reserved2
        b.put_slice(output);
        b.to_vec()
    }

    #[test]
    fn decodes_response_output_without_copy() {
        let msg = response(&ioctl_response_body(0x70, &[9, 8, 7]));
        let resp = IoctlResponse::decode(&msg).unwrap();
        assert_eq!(resp.ctl_code, FSCTL_QUERY_NETWORK_INTERFACE_INFO);
        assert_eq!(resp.file_id, FileId::ANY);
        assert_eq!(resp.flags, 0);
        assert!(resp.input.is_empty());
        assert_eq!(&resp.output[..], &[9, 8, 7]);
        assert_eq!(resp.output.as_ptr(), msg[0x70..].as_ptr());
    }

    #[test]
    fn rejects_malformed_responses() {
        // Output past the end, inside the fixed part, overflowing.
        let mut body = ioctl_response_body(0x70, &[1, 2, 3]);
        body[36..40].copy_from_slice(&4u32.to_le_bytes());
        assert!(matches!(
            IoctlResponse::decode(&response(&body)),
            Err(DecodeError::BadOffset { .. })
        ));
        let body = ioctl_response_body(0x60, &[1, 2, 3]);
        assert!(matches!(
            IoctlResponse::decode(&response(&body)),
            Err(DecodeError::BadOffset { .. })
        ));
        let mut body = ioctl_response_body(0xFFFF_FFFF, &[1]);
        body[36..40].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(IoctlResponse::decode(&response(&body)).is_err());
        // Wrong StructureSize, truncated fixed part.
        let mut body = ioctl_response_body(0x70, &[]);
        body[0] = 9;
        assert!(matches!(
            IoctlResponse::decode(&response(&body)),
            Err(DecodeError::InvalidValue { .. })
        ));
        let body = ioctl_response_body(0x70, &[]);
        assert!(IoctlResponse::decode(&response(&body[..40])).is_err());
    }

    #[test]
    fn decodes_validate_negotiate_response() {
        let out = hex("2f000000 736d6261 2d67 7569 642d 3132 33343536 0100 0203");
        let v = ValidateNegotiateInfoResponse::decode(&out).unwrap();
        assert_eq!(v.capabilities, Capabilities(0x2f));
        assert_eq!(&v.guid, b"smba-guid-123456");
        assert_eq!(v.security_mode, SecurityMode(1));
        assert_eq!(v.dialect, 0x0302);
        assert!(ValidateNegotiateInfoResponse::decode(&out[..23]).is_err());
    }

    // --- FSCTL_QUERY_NETWORK_INTERFACE_INFO ---

    /// The spec layout of one IPv4 entry, written out field by field.
    const IPV4_ENTRY_HEX: &str = "
        98000000 02000000 01000000 00000000 00ca9a3b00000000
        0200 0000 c0a80a05 0000000000000000
        0000000000000000000000000000000000000000000000000000000000000000
        0000000000000000000000000000000000000000000000000000000000000000
        0000000000000000000000000000000000000000000000000000000000000000
        00000000000000000000000000000000";

    /// Build one 152-byte entry.
    fn entry(next: u32, if_index: u32, cap: u32, speed: u64, family: u16, addr: &[u8]) -> Vec<u8> {
        let mut e = BytesMut::new();
        e.put_u32_le(next);
        e.put_u32_le(if_index);
        e.put_u32_le(cap);
        e.put_u32_le(0);
        e.put_u64_le(speed);
        e.put_u16_le(family);
        e.put_u16(0); // port
        if family == FAMILY_INTER_NETWORK_V6 {
            e.put_u32_le(0); // FlowInfo
        }
        e.put_slice(addr);
        e.resize(NETWORK_INTERFACE_INFO_LEN, 0);
        e.to_vec()
    }

    fn v6(s: &str) -> [u8; 16] {
        s.parse::<Ipv6Addr>().unwrap().octets()
    }

    #[test]
    fn spec_layout_ipv4_entry() {
        let buf = hex(IPV4_ENTRY_HEX);
        assert_eq!(buf.len(), NETWORK_INTERFACE_INFO_LEN);
        assert_eq!(
            buf.to_vec(),
            entry(152, 2, 1, 1_000_000_000, 2, &[192, 168, 10, 5])
        );
        let mut last = buf.to_vec();
        last[0] = 0; // Next = 0: the only entry.
        let list = parse_network_interfaces(&last).unwrap();
        assert_eq!(
            list,
            vec![NetworkInterfaceInfo {
                if_index: 2,
                capability: InterfaceCapability(InterfaceCapability::RSS),
                link_speed: 1_000_000_000,
                address: "192.168.10.5".parse().unwrap(),
                port: 0,
                flow_info: 0,
                scope_id: 0,
            }]
        );
    }

    #[test]
    fn samba_style_list_ipv4_ipv6_shared_ifindex() {
        const SAMBA_UNKNOWN_SPEED: u64 = 4_294_967_295_000_000;
        let mut buf = Vec::new();
        buf.extend(entry(152, 2, 0, SAMBA_UNKNOWN_SPEED, 2, &[10, 0, 0, 1]));
        buf.extend(entry(152, 2, 0, SAMBA_UNKNOWN_SPEED, 0x17, &v6("fe80::1")));
        buf.extend(entry(
            152,
            3,
            InterfaceCapability::RDMA | InterfaceCapability::RSS,
            0,
            2,
            &[10, 0, 1, 1],
        ));
        buf.extend(entry(0, 3, 0, 10_000_000_000, 0x17, &v6("2001:db8::42")));
        let list = parse_network_interfaces(&buf).unwrap();
        assert_eq!(list.len(), 4);
        assert_eq!(list[0].if_index, 2);
        assert_eq!(list[0].address, IpAddr::from([10, 0, 0, 1]));
        assert_eq!(list[0].link_speed, SAMBA_UNKNOWN_SPEED);
        assert_eq!(list[1].if_index, 2);
        assert_eq!(list[1].address, "fe80::1".parse::<IpAddr>().unwrap());
        assert_eq!(list[1].flow_info, 0);
        assert_eq!(list[1].scope_id, 0);
        assert_eq!(list[2].if_index, 3);
        assert_eq!(list[2].link_speed, 0);
        assert!(list[2].capability.has(InterfaceCapability::RDMA));
        assert!(list[2].capability.has(InterfaceCapability::RSS));
        assert!(!list[0].capability.has(InterfaceCapability::RDMA));
        assert_eq!(list[3].address, "2001:db8::42".parse::<IpAddr>().unwrap());
        assert_eq!(list[3].link_speed, 10_000_000_000);
    }

    #[test]
    fn larger_aligned_stride_and_unknown_family_are_accepted() {
        let mut buf = entry(160, 1, 0, 1, 2, &[1, 2, 3, 4]);
        buf.extend([0u8; 8]); // padding between entries
        buf.extend(entry(152, 9, 0, 1, 0x1234, &[0; 20])); // unknown family: skipped
        buf.extend(entry(0, 5, 0, 1, 2, &[5, 6, 7, 8]));
        let list = parse_network_interfaces(&buf).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].address, IpAddr::from([1, 2, 3, 4]));
        assert_eq!(list[1].if_index, 5);
        assert_eq!(list[1].address, IpAddr::from([5, 6, 7, 8]));
        // Trailing bytes after the last entry are ignored.
        let mut with_tail = buf.clone();
        with_tail.extend([0xEE; 5]);
        assert_eq!(parse_network_interfaces(&with_tail).unwrap(), list);
        assert_eq!(parse_network_interfaces(&[]).unwrap(), vec![]);
    }

    #[test]
    fn rejects_hostile_chains() {
        let a = |next| entry(next, 1, 0, 1, 2, &[1, 1, 1, 1]);
        let last = entry(0, 2, 0, 1, 2, &[2, 2, 2, 2]);

        // Next out of bounds.
        let mut buf = a(304);
        buf.extend(&last);
        assert!(matches!(
            parse_network_interfaces(&buf),
            Err(DecodeError::BadOffset { .. })
        ));
        let buf = a(u32::MAX - 7);
        assert!(parse_network_interfaces(&buf).is_err());
        // Next not 8-byte aligned.
        let mut buf = a(156);
        buf.extend([0; 4]);
        buf.extend(&last);
        assert!(matches!(
            parse_network_interfaces(&buf),
            Err(DecodeError::InvalidValue { .. })
        ));
        // Next pointing back into the entry itself / a zero-length step that would loop.
        for next in [8, 16, 144] {
            let mut buf = a(next);
            buf.extend(&last);
            assert!(matches!(
                parse_network_interfaces(&buf),
                Err(DecodeError::Inconsistent { .. })
            ));
        }
        // Truncated entries: the first, or the one Next points at.
        assert!(matches!(
            parse_network_interfaces(&last[..151]),
            Err(DecodeError::Truncated { .. })
        ));
        let mut buf = a(152);
        buf.extend(&last[..100]);
        assert!(matches!(
            parse_network_interfaces(&buf),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
