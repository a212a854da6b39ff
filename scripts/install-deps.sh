#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the testbed, the tests and the benchmark need, when some
# are missing. Used by .ci/run and scripts/demo.sh; safe to run again.
set -euo pipefail

# samba-ad-provision, samba-dsdb-modules, winbind: the testbed's Kerberos mode (a Samba AD DC).
# rsync, git, sqlite3: the programs the smbfuse tests run on the mount; fio: its benchmark;
# autoconf, automake: building pjdfstest (fuse-mount/tests/pjdfstest.sh). attr: getfattr and
# setfattr, which the backup tests use to look at streams and NT ACLs in xattrs on the server.
# debootstrap: the testbed's `--samba trixie` mode builds a Debian 13 root with Samba 4.22+ once.
# krb5-user: MIT's kinit/klist/kdestroy, which fill the ticket caches the Kerberos tests use
# (libgssapi-krb5-2, which smb3-gss loads at run time, comes with it); heimdal-kcm: a KCM
# daemon for the KCM: cache test (tests/e2e/kerberos_ccache.rs).
PACKAGES=(samba samba-testsuite smbclient iproute2 iperf3 fuse3 tcpdump
    samba-ad-provision samba-dsdb-modules winbind rsync git sqlite3 fio autoconf automake attr
    debootstrap krb5-user heimdal-kcm)
missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
if ((${#missing[@]} == 0)); then
    echo "system packages present: ${PACKAGES[*]}"
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "missing packages ${missing[*]}; run as root: apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y "${PACKAGES[@]}"
