"""1 GiB downloaded through the Python package beside smbcp, in one run on one testbed.

    bash tests/testbed/testbed.sh up --dir D --links 1 --unshaped --owner none
    VENV/bin/python python/tests/bench_download.py D [--smbcp target/release/smbcp]
    bash tests/testbed/testbed.sh down --dir D

VENV has the package installed (`pip install ./python`). Each round runs smbcp, then
`shutil.copyfileobj` with a 4 MiB buffer over `Share.open`, then `Share.download` (the
library's pipelined copy), each as its own process inside the client namespace, into
/dev/shm (so the local disk is not what is measured); wall time of the whole process,
connecting included; each waits for no compiler to be running on the machine first. Prints
each time and the medians.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

PY_COPYFILEOBJ = r"""
import shutil, smb3, sys
host, user, pw, dom, share, src, dst = sys.argv[1:]
s = smb3.Client(host, username=user, password=pw, domain=dom).share(share)
with s.open(src, "rb") as f, open(dst, "wb") as out:
    shutil.copyfileobj(f, out, 4 << 20)
"""

PY_DOWNLOAD = r"""
import smb3, sys
host, user, pw, dom, share, src, dst = sys.argv[1:]
s = smb3.Client(host, username=user, password=pw, domain=dom).share(share)
s.download(src, dst)
"""


def wait_quiet(limit=120.0):
    """Wait (up to `limit` s) until no compiler runs on the machine: the copies are bound by
    the two CPUs, which other sessions' builds would take."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        busy = False
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() in ("rustc", "cc1", "cc1plus", "ld", "cargo"):
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--smbcp", default="target/release/smbcp")
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--share", default="plain")
    a = ap.parse_args()
    st = state(a.dir)
    host, ns = st["link1_server_addr"], st["client_ns"]
    user, pw, dom = st["user"], st["password"], st["domain"]
    share_dir = st[f"share_{a.share}_path"]
    src = os.path.join(share_dir, "bench-1g.bin")
    with open(src, "wb") as f:
        chunk = os.urandom(1 << 20)
        for _ in range(a.size_mib):
            f.write(chunk)
    size = a.size_mib << 20
    dst = "/dev/shm/smb3-bench.bin"
    py = sys.executable
    url = f"smb://{dom};{user}@{host}/{a.share}/bench-1g.bin"
    tools = {
        "smbcp": [os.path.abspath(a.smbcp), "-q", url, dst],
        "python copyfileobj 4 MiB": [py, "-c", PY_COPYFILEOBJ, host, user, pw, dom,
                                     a.share, "bench-1g.bin", dst],
        "python Share.download": [py, "-c", PY_DOWNLOAD, host, user, pw, dom, a.share,
                                  "bench-1g.bin", dst],
    }
    env = dict(os.environ, SMB_PASSWORD=pw)
    times = {k: [] for k in tools}
    try:
        for rep in range(a.reps):
            for name, argv in tools.items():
                if os.path.exists(dst):
                    os.remove(dst)
                wait_quiet()
                t0 = time.monotonic()
                subprocess.run(["ip", "netns", "exec", ns] + argv, check=True, env=env,
                               timeout=600)
                dt = time.monotonic() - t0
                got = os.path.getsize(dst)
                assert got == size, f"{name}: {got} bytes, not {size}"
                times[name].append(dt)
                print(f"round {rep + 1}: {name}: {dt:.2f} s ({size / dt / 2**20:.0f} MiB/s)",
                      flush=True)
    finally:
        if os.path.exists(dst):
            os.remove(dst)
        os.remove(src)
    base = statistics.median(times["smbcp"])
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"median {name}: {m:.2f} s ({size / m / 2**20:.0f} MiB/s), "
              f"{m / base:.3f}x smbcp's time")


if __name__ == "__main__":
    main()
