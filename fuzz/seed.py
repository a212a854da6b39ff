#!/usr/bin/env python3
"""Write the fuzz targets' seed corpora from the Samba captures in client-core/proto/tests.

    seed.py [OUT_DIR]        (default: fuzz/corpus beside this script)

Every SMB2 message and every server-to-client TCP stream of the six captures (read with the
fixtures' own pcap reader, extract.py) goes to the targets that decode that kind of input, in
the layout each target expects (a selector byte first where it has one, see
smb3_proto::fuzzing and smb3_client::fuzzing). Seeds are named by content hash, so running
this again adds nothing twice and leaves what the fuzzer has found in place.
"""

import hashlib
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "client-core", "proto", "tests", "fixtures", "samba-4.17")
sys.path.insert(0, FIXTURES)
import extract  # noqa: E402  (the fixtures' pcap reader: standard library only)

(NEGOTIATE, SESSION_SETUP, LOGOFF, TREE_CONNECT, TREE_DISCONNECT, CREATE, CLOSE, FLUSH, READ,
 WRITE, LOCK, IOCTL, CANCEL, ECHO, QUERY_DIRECTORY, CHANGE_NOTIFY, QUERY_INFO, SET_INFO,
 OPLOCK_BREAK) = range(19)

# Statuses whose response still has the command's own body (MS-SMB2 3.3.4.4); any other
# non-success status, and the interim STATUS_PENDING, comes with an ERROR body.
OWN_BODY = {0x00000000, 0xC0000016, 0x80000005}

# (InfoType, FileInfoClass) of a QUERY_INFO request -> the selector of the fuzz targets'
# structure list (smb3_proto::fuzzing::info_class).
INFO_SELECTOR = {(1, 18): 0, (1, 4): 1, (1, 5): 2, (1, 6): 3, (1, 34): 4,
                 (2, 3): 5, (2, 7): 6, (2, 5): 7}
DIRECTORY_ENTRIES, NOTIFY_RECORDS = 8, 9
FSCTL_QUERY_NETWORK_INTERFACE_INFO = 0x001401FC
FSCTL_DFS_GET_REFERRALS = 0x00060194


def output_buffer(raw, offset_at, length_at, offset_size=2):
    """The buffer a response points at with an offset field and a 4-byte length field."""
    fmt = "<H" if offset_size == 2 else "<I"
    off = struct.unpack(fmt, raw[64 + offset_at:64 + offset_at + offset_size])[0]
    n = struct.unpack("<I", raw[64 + length_at:64 + length_at + 4])[0]
    return raw[off:off + n]


def framed(msg):
    return len(msg).to_bytes(4, "big") + msg


class Corpus:
    def __init__(self, out):
        self.out = out
        self.added = {}

    def add(self, target, data):
        d = os.path.join(self.out, target)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, hashlib.sha1(data).hexdigest())
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(data)
            self.added[target] = self.added.get(target, 0) + 1


def seed_message(c, m):
    raw = m.raw
    c.add("header", raw)
    if not m.is_response:
        return
    c.add("response", raw)
    c.add("compound", raw)
    for pick in (8, 9, 10, 11):  # seal with each cipher, intact
        c.add("transform", bytes([pick, 0]) + raw)
    for pick in (0, 8, 9, 10):  # as received; re-signed with each algorithm
        c.add("signing", bytes([pick, 0]) + raw if pick else bytes([pick]) + raw)
    if m.status not in OWN_BODY:
        c.add("error", raw)
        return
    by_command = {NEGOTIATE: "negotiate", SESSION_SETUP: "session_setup",
                  TREE_CONNECT: "tree_connect", CREATE: "create", READ: "read",
                  QUERY_DIRECTORY: "query_directory", CHANGE_NOTIFY: "change_notify",
                  IOCTL: "ioctl", OPLOCK_BREAK: "oplock_break"}
    if m.command in by_command:
        c.add(by_command[m.command], raw)
    if m.command == QUERY_INFO:
        req = m.request
        key = (req.raw[66], req.raw[67]) if req is not None else None
        selector = INFO_SELECTOR.get(key, 0)
        c.add("query_info", bytes([selector]) + raw)
        c.add("fscc", bytes([selector]) + output_buffer(raw, 2, 4))
    elif m.command == QUERY_DIRECTORY:
        c.add("fscc", bytes([DIRECTORY_ENTRIES]) + output_buffer(raw, 2, 4))
    elif m.command == CHANGE_NOTIFY:
        c.add("fscc", bytes([NOTIFY_RECORDS]) + output_buffer(raw, 2, 4))
    elif m.command == IOCTL:
        ctl = struct.unpack("<I", raw[68:72])[0]
        out = output_buffer(raw, 32, 36, offset_size=4)
        if ctl == FSCTL_QUERY_NETWORK_INTERFACE_INFO:
            c.add("network_interfaces", out)
        elif ctl == FSCTL_DFS_GET_REFERRALS:
            c.add("dfs_referral", out)


def seed_stream(c, stream):
    """A server's whole side of one connection, and each of its frames on its own."""
    for chunk in (0, 1, 0x40, 0xFF):
        c.add("transport_frames", bytes([chunk]) + stream)
    for mode in (0, 2, 3, 6):  # plain; signed; sealed; signed where signing is required
        c.add("reply_dispatch", bytes([mode]) + stream)
    for frame in extract.split_frames(stream):
        if frame[:4] == b"\xfeSMB":
            c.add("compound", frame)
            c.add("reply_dispatch", b"\x00" + framed(frame))


def main(argv):
    out = argv[1] if len(argv) > 1 else os.path.join(HERE, "corpus")
    c = Corpus(out)
    pcaps = sorted(p for p in os.listdir(FIXTURES) if p.endswith(".pcap"))
    for name in pcaps:
        path = os.path.join(FIXTURES, name)
        for m in extract.messages(path):
            seed_message(c, m)
        for (src, _dst), data in extract.tcp_streams(path).items():
            if src[1] == 445:
                seed_stream(c, data)
    for target in sorted(c.added):
        print(f"{target:20} {c.added[target]:5} new seeds")


if __name__ == "__main__":
    main(sys.argv)
