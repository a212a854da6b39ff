"""The Python package beside smbcp and beside smbprotocol (the pure-Python SMB client behind
fsspec's own `smb`), in one run on one testbed: 1 GiB downloaded and uploaded, and a
directory of small files listed and read.

    bash tests/testbed/testbed.sh up --dir D --links 4 --rate 1000 --owner none
    VENV/bin/python python/tests/bench.py D [--smbcp target/release/smbcp]
    bash tests/testbed/testbed.sh down --dir D

VENV has the package (`pip install ./python`) and smbprotocol (`pip install smbprotocol`;
without it those rows are left out). Each tool runs as its own process inside the client
namespace, so every time is the wall time of a whole process, connecting included; the
tools take turns, round after round; each round waits for no compiler to run on the machine
first. Local files live in /dev/shm, so the local disk is not what is measured. Prints each
time, then the medians against smbcp's and against smbprotocol's.

Rows:
- smbcp: the copy tool (multichannel).
- smb3 copyfileobj: `shutil.copyfileobj` with a 4 MiB buffer over `Share.open`, the way a
  program written for files uses the package.
- smb3 Share.download / Share.upload: the library's pipelined whole-file copy.
- smbprotocol copyfileobj: `shutil.copyfileobj` with a 4 MiB buffer over
  `smbclient.open_file` (one connection, as smbprotocol has).
- small files: `--small` files of 4 KiB in one directory, listed and each read whole: smbcp
  -r, the package (`Share.scandir`, then `Share.open(...).read()` each: three round trips a
  file; or `Share.read_bytes` each: one), smbprotocol (`smbclient.scandir`, then
  `open_file(...).read()` each).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

SMB3_CONNECT = r"""
import shutil, smb3, sys
host, user, pw, dom, share = sys.argv[1:6]
s = smb3.Client(host, username=user, password=pw, domain=dom).share(share)
"""

SMB3_DOWN_FILEOBJ = SMB3_CONNECT + r"""
with s.open(sys.argv[6], "rb") as f, open(sys.argv[7], "wb") as out:
    shutil.copyfileobj(f, out, 4 << 20)
"""

SMB3_UP_FILEOBJ = SMB3_CONNECT + r"""
with open(sys.argv[6], "rb") as f, s.open(sys.argv[7], "wb") as out:
    shutil.copyfileobj(f, out, 4 << 20)
"""

SMB3_DOWNLOAD = SMB3_CONNECT + r"""
s.download(sys.argv[6], sys.argv[7])
"""

SMB3_UPLOAD = SMB3_CONNECT + r"""
s.upload(sys.argv[6], sys.argv[7])
"""

SMB3_SMALL = SMB3_CONNECT + r"""
n = 0
for e in s.scandir(sys.argv[6]):
    with s.open(sys.argv[6] + "/" + e.name, "rb") as f:
        n += len(f.read())
print(n)
"""

SMB3_SMALL_READ_BYTES = SMB3_CONNECT + r"""
n = 0
for e in s.scandir(sys.argv[6]):
    n += len(s.read_bytes(sys.argv[6] + "/" + e.name))
print(n)
"""

SMBPROTOCOL_CONNECT = r"""
import shutil, smbclient, sys
host, user, pw, dom, share = sys.argv[1:6]
smbclient.register_session(host, username=dom + "\\" + user, password=pw)
unc = "\\\\" + host + "\\" + share + "\\"
"""

SMBPROTOCOL_DOWN = SMBPROTOCOL_CONNECT + r"""
with smbclient.open_file(unc + sys.argv[6], mode="rb") as f, open(sys.argv[7], "wb") as out:
    shutil.copyfileobj(f, out, 4 << 20)
"""

SMBPROTOCOL_UP = SMBPROTOCOL_CONNECT + r"""
with open(sys.argv[6], "rb") as f, smbclient.open_file(unc + sys.argv[7], mode="wb") as out:
    shutil.copyfileobj(f, out, 4 << 20)
"""

SMBPROTOCOL_SMALL = SMBPROTOCOL_CONNECT + r"""
n = 0
for e in smbclient.scandir(unc + sys.argv[6]):
    with smbclient.open_file(unc + sys.argv[6] + "\\" + e.name, mode="rb") as f:
        n += len(f.read())
print(n)
"""

COMPILERS = ("rustc", "cc1", "cc1plus", "ld", "cargo")


def wait_quiet(limit=120.0):
    """Wait (up to `limit` s) until no compiler runs on the machine: the copies are bound by
    the two CPUs, which a build beside them would take."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        busy = False
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() in COMPILERS:
                        busy = True
                        break
            except OSError:
                pass
        if not busy:
            return
        time.sleep(1)


def state(d):
    out = {}
    with open(os.path.join(d, "state")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            out[k] = v
    return out


def has_smbprotocol(py):
    return subprocess.run([py, "-c", "import smbclient"], capture_output=True).returncode == 0


def run_rounds(cases, reps, ns, env, check):
    """Run every case `reps` times, taking turns; `check(name)` after each run (raises on a
    wrong result). Returns the times by case."""
    times = {name: [] for name in cases}
    for rep in range(reps):
        for name, (argv, before) in cases.items():
            before()
            wait_quiet()
            t0 = time.monotonic()
            subprocess.run(["ip", "netns", "exec", ns] + argv, check=True, env=env,
                           timeout=1800, stdout=subprocess.DEVNULL)
            dt = time.monotonic() - t0
            check(name)
            times[name].append(dt)
            print(f"round {rep + 1}: {name}: {dt:.2f} s", flush=True)
    return times


def report(title, times, size=None):
    print(f"\n{title}")
    base = statistics.median(times["smbcp"]) if "smbcp" in times else None
    peer = [v for k, v in times.items() if k.startswith("smbprotocol")]
    peer = statistics.median(peer[0]) if peer else None
    for name, ts in times.items():
        m = statistics.median(ts)
        line = f"  {name}: median {m:.2f} s (min {min(ts):.2f}, max {max(ts):.2f})"
        if size:
            line += f", {size / m / 1e6:.0f} MB/s"
        if base:
            line += f", {m / base:.3f}x smbcp's time"
        if peer:
            line += f", {peer / m:.2f}x as fast as smbprotocol"
        print(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--smbcp", default="target/release/smbcp")
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--small", type=int, default=10000, help="small files (0: none)")
    ap.add_argument("--share", default="plain")
    a = ap.parse_args()
    st = state(a.dir)
    host, ns = st["link1_server_addr"], st["client_ns"]
    user, pw, dom = st["user"], st["password"], st["domain"]
    share_dir = st[f"share_{a.share}_path"]
    py = sys.executable
    peer = has_smbprotocol(py)
    if not peer:
        print("smbprotocol is not installed in this Python: its rows are left out")
    conn = [host, user, pw, dom, a.share]
    smbcp = os.path.abspath(a.smbcp)
    url = f"smb://{dom};{user}@{host}/{a.share}"
    env = dict(os.environ, SMB_PASSWORD=pw)
    size = a.size_mib << 20
    local = "/dev/shm/smb3-bench.bin"
    remote_name, up_name = "bench-1g.bin", "bench-up.bin"
    remote_path = os.path.join(share_dir, remote_name)
    up_path = os.path.join(share_dir, up_name)
    small_dir = "bench-small"
    small_path = os.path.join(share_dir, small_dir)
    small_local = "/dev/shm/smb3-bench-small"

    def remove(path):
        if os.path.isdir(path):
            subprocess.run(["rm", "-rf", path], check=True)
        elif os.path.exists(path):
            os.remove(path)

    with open(remote_path, "wb") as f:
        chunk = os.urandom(1 << 20)
        for _ in range(a.size_mib):
            f.write(chunk)
    os.chmod(remote_path, 0o644)
    try:
        # Down.
        down = {
            "smbcp": ([smbcp, "-q", f"{url}/{remote_name}", local], lambda: remove(local)),
            "smb3 copyfileobj": ([py, "-c", SMB3_DOWN_FILEOBJ] + conn + [remote_name, local],
                                 lambda: remove(local)),
            "smb3 Share.download": ([py, "-c", SMB3_DOWNLOAD] + conn + [remote_name, local],
                                     lambda: remove(local)),
        }
        if peer:
            down["smbprotocol copyfileobj"] = (
                [py, "-c", SMBPROTOCOL_DOWN] + conn + [remote_name, local], lambda: remove(local))

        def downloaded(name):
            got = os.path.getsize(local)
            assert got == size, f"{name}: {got} bytes, not {size}"

        times = run_rounds(down, a.reps, ns, env, downloaded)
        report(f"download of {a.size_mib} MiB", times, size)

        # Up: the file just downloaded goes back under another name.
        up = {
            "smbcp": ([smbcp, "-q", local, f"{url}/{up_name}"], lambda: remove(up_path)),
            "smb3 copyfileobj": ([py, "-c", SMB3_UP_FILEOBJ] + conn + [local, up_name],
                                 lambda: remove(up_path)),
            "smb3 Share.upload": ([py, "-c", SMB3_UPLOAD] + conn + [local, up_name],
                                   lambda: remove(up_path)),
        }
        if peer:
            up["smbprotocol copyfileobj"] = (
                [py, "-c", SMBPROTOCOL_UP] + conn + [local, up_name], lambda: remove(up_path))

        def uploaded(name):
            got = os.path.getsize(up_path)
            assert got == size, f"{name}: {got} bytes on the server, not {size}"

        times = run_rounds(up, a.reps, ns, env, uploaded)
        report(f"upload of {a.size_mib} MiB", times, size)
        remove(local)
        remove(up_path)

        if a.small:
            os.makedirs(small_path)
            data = os.urandom(4096)
            for i in range(a.small):
                with open(os.path.join(small_path, f"f{i:05}"), "wb") as f:
                    f.write(data)
            subprocess.run(["chmod", "-R", "a+rX", small_path], check=True)
            small = {
                "smbcp": ([smbcp, "-q", "-r", f"{url}/{small_dir}", small_local],
                          lambda: remove(small_local)),
                "smb3 scandir + open().read()": ([py, "-c", SMB3_SMALL] + conn + [small_dir],
                                                 lambda: None),
                "smb3 scandir + read_bytes": (
                    [py, "-c", SMB3_SMALL_READ_BYTES] + conn + [small_dir], lambda: None),
            }
            if peer:
                small["smbprotocol scandir + read"] = (
                    [py, "-c", SMBPROTOCOL_SMALL] + conn + [small_dir], lambda: None)
            times = run_rounds(small, a.reps, ns, env, lambda name: None)
            report(f"{a.small} files of 4 KiB listed and read", times)
    finally:
        for path in (local, remote_path, up_path, small_path, small_local):
            remove(path)


if __name__ == "__main__":
    main()
