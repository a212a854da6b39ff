#!/usr/bin/env bash
# testbed.sh - a private Samba server behind shaped veth links, in network namespaces.
#
# One testbed = a server namespace and a client namespace joined by N veth pairs (link K:
# server 10.<id>.K.1, client 10.<id>.K.2, /24; Q rx/tx queues per end, so the client sees
# RSS-capable NICs), each direction optionally shaped with tbf, optionally a service address
# 10.<id>.200.1 on the server's lo that the client reaches over every link (source-based policy
# routing), plus an smbd with its own config, passdb, lock/state dirs and tmpfs-backed shares,
# all kept in a run directory (--dir). See tests/testbed/README.md for the full story.
#
# Output contract: human messages go to stderr; `up` and `status` print key=value lines on
# stdout (and nothing else), which tests/src/lib.rs parses.

set -euo pipefail

PROG=testbed.sh
# Root's PATH normally has the sbin directories, but `sudo`, CI runners and IDEs often drop
# them; smbd, ip and tc live there.
PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
export PATH

# Registry of live testbeds: one directory per id holding `dir` (the run dir) and `owner`
# (the PID and start time of the process that owns the testbed). mkdir on it claims an id.
REGISTRY=${SMBTB_REGISTRY:-/run/smbtb}
ID_MIN=100
ID_COUNT=150
READY_TIMEOUT=${SMBTB_READY_TIMEOUT:-30}
# tbf queue limit expressed as latency; with burst = max(64 KiB, 2 ms at the rate) TCP reaches
# 95.6 % of the rate at MTU 1500 (= 1448/1514, the TCP/IP/Ethernet header overhead).
TBF_LATENCY=20ms
# What an unshaped link advertises: veth reports 10 Gb/s through ethtool.
UNSHAPED_SPEED_BPS=10000000000
# Third octet of the service address 10.<id>.200.1 (links use 1..32) and the first policy
# routing table of the client namespace (link K uses table SERVICE_TABLE_BASE + K).
SERVICE_NET=200
SERVICE_TABLE_BASE=100
# Kerberos mode (up --kerberos): the AD domain every such testbed provisions (each in its own
# namespaces, so they never meet), and where a provisioned domain is kept for reuse -
# provisioning takes about 30 s on 2 cores, copying the template well under 1 s.
AD_REALM=TESTBED.LAN
AD_DOMAIN=TESTBED
AD_HOST=dc
AD_CACHE=${SMBTB_AD_CACHE:-/var/cache/smbtb}
# Samba from a Debian 13 root (up --samba trixie): Debian 12 ships 4.17, which has no SMB3
# POSIX extensions. The root is built once with debootstrap (0.5-3 minutes, 340 MB) and then
# shared, read-only, by every such testbed; delete the directory to have it built again.
TRIXIE_ROOT=${SMBTB_TRIXIE_ROOT:-/var/cache/smbtb/trixie-root}
TRIXIE_MIN_VERSION=4.22
# The file written last into a finished root: the version of its smbd. No file, no root.
ROOT_MARKER=.smbtb-root-complete
# Where the run directory appears inside the root (a directory made when the root is built,
# so nothing is ever created in the shared root afterwards).
ROOT_RUN_DIR=/smbtb
# Samba's programs: in trixie mode `exec --server` takes these from the root, because
# they must match the server (message formats, tdb layouts); everything else (ip, ss, tc,
# iperf3, cat ...) comes from the host as before.
ROOT_PROGRAMS=(smbd smbstatus smbcontrol smbpasswd pdbedit testparm net smbclient rpcclient
    smbcacls smbtree samba-dcerpcd tdbtool tdbdump)

say() { echo "$PROG: $*" >&2; }
die() {
    echo "$PROG: error: $*" >&2
    exit 1
}

usage() {
    cat >&2 <<'EOF'
usage:
  testbed.sh up --dir D --links N [--rate R1,R2,...|--unshaped] [--mtu M] [--size 6g]
                [--queues Q] [--service-addr] [--advertise links|service|both]
                [--advertise-spec SPEC]... [--signing mandatory|default] [--user NAME]
                [--password PW] [--owner PID|none] [--log-level L] [--kerberos]
                [--samba system|trixie]
  testbed.sh down --dir D
  testbed.sh status --dir D
  testbed.sh link-down --dir D K        testbed.sh link-up --dir D K
  testbed.sh drop --dir D K             testbed.sh undrop --dir D K
  testbed.sh cut --dir D [K]
  testbed.sh restart --dir D            testbed.sh reload --dir D
  testbed.sh set-interfaces --dir D SPEC...|links|service|both
                                 (SPEC like "10.123.1.1;speed=1000000000,capability=RSS")
  testbed.sh exec --dir D [--server] [--root] -- CMD [ARG...]
  testbed.sh smbstatus --dir D [SMBSTATUS-ARGS...]
  testbed.sh gc
  testbed.sh build-root trixie
Rates are in Mbit/s (0 = that link unshaped); one rate applies to every link.
--queues: rx/tx queues of every veth end (default 4; 1 = no RSS, and no capability=RSS).
--advertise-spec (repeatable) replaces the --advertise list with exactly these specs.
--kerberos: the server is a Samba AD DC (realm TESTBED.LAN, host dc.testbed.lan, KDC on
port 88 of every server address) serving the same shares; NTLM is disabled.
drop K: the server's side of link K silently discards everything it sends (requests still
arrive and run; replies and SYN-ACKs vanish), the link stays up with carrier. undrop K
restores the link's shaping.
--samba trixie: smbd (4.22+) and its tools from a Debian 13 root, built once into
$SMBTB_TRIXIE_ROOT (default /var/cache/smbtb/trixie-root; delete it to rebuild), with
`smb3 unix extensions = yes` and one more share, [noposix], that turns them off. exec
--server takes Samba's programs from the root then; exec --root any program (run dir at /smbtb).
EOF
    exit 2
}

# ----------------------------------------------------------------------------- preconditions

need_root() {
    [[ $(id -u) -eq 0 ]] || die "the testbed needs root (network namespaces)"
}

# need_tools TOOL:PACKAGE... - exit with one message naming every missing package.
need_tools() {
    local missing_tools=() missing_pkgs=() spec tool pkg
    for spec in "$@"; do
        tool=${spec%%:*}
        pkg=${spec#*:}
        if ! command -v "$tool" >/dev/null 2>&1; then
            missing_tools+=("$tool")
            [[ " ${missing_pkgs[*]-} " == *" $pkg "* ]] || missing_pkgs+=("$pkg")
        fi
    done
    if ((${#missing_tools[@]})); then
        die "missing ${missing_tools[*]}: apt-get install -y ${missing_pkgs[*]}"
    fi
}

SERVER_TOOLS=(ip:iproute2 tc:iproute2 ss:iproute2 smbd:samba smbcontrol:samba
    smbpasswd:samba-common-bin mount:mount mountpoint:util-linux flock:util-linux
    timeout:coreutils useradd:passwd)
# Only for up --kerberos: the AD DC (samba), its winbindd, samba-tool for provisioning (which
# also needs samba-ad-provision's templates and samba-dsdb-modules), python3 for a socket check.
AD_TOOLS=(samba:samba winbindd:winbind samba-tool:samba-common-bin unshare:util-linux
    python3:python3)
AD_SETUP_DIR=/usr/share/samba/setup

# ----------------------------------------------------------------------------- process helpers

# pid_alive PID - true when PID exists and is not a zombie.
pid_alive() {
    local pid=$1 stat rest
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    rest=${stat##*) }
    [[ ${rest:0:1} != Z && ${rest:0:1} != X ]]
}

# pid_starttime PID - field 22 of /proc/PID/stat (clock ticks since boot), for PID reuse checks.
pid_starttime() {
    local stat rest
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    rest=${stat##*) }
    # rest starts at field 3; field 22 is the 20th word of rest.
    set -- $rest
    echo "${20}"
}

# pid_in_netns PID NS - true when PID's network namespace is the named one (guards against a
# recorded PID that the kernel has since given to an unrelated process).
pid_in_netns() {
    local a b
    a=$(stat -L -c %i "/proc/$1/ns/net" 2>/dev/null) || return 1
    b=$(stat -L -c %i "/run/netns/$2" 2>/dev/null) || return 1
    [[ $a == "$b" ]]
}

# The PIDs of this script and all its ancestors: never kill those, even when the caller's
# main thread sits in one of our namespaces.
protected_pids() {
    local pid=$$ ppid stat rest
    echo "$pid"
    echo "${BASHPID:-$$}"
    while [[ $pid -gt 1 ]]; do
        stat=$(cat "/proc/$pid/stat" 2>/dev/null) || break
        rest=${stat##*) }
        set -- $rest
        ppid=$2
        echo "$ppid"
        pid=$ppid
    done
}

# wait_gone SECONDS PID... - wait until every PID is dead; false if some survive.
wait_gone() {
    local limit=$1 i pid alive
    shift
    for ((i = 0; i < limit * 10; i++)); do
        alive=0
        for pid in "$@"; do
            if pid_alive "$pid"; then alive=1; fi
        done
        ((alive)) || return 0
        sleep 0.1
    done
    return 1
}

# stop_pids WHAT PID... - TERM, up to 5 s grace, then KILL.
stop_pids() {
    local what=$1 pid left=()
    shift
    (($#)) || return 0
    kill -TERM "$@" 2>/dev/null || true
    if ! wait_gone 5 "$@"; then
        for pid in "$@"; do pid_alive "$pid" && left+=("$pid"); done
        say "$what did not stop on SIGTERM within 5 s, sending SIGKILL to ${left[*]}"
        kill -KILL "${left[@]}" 2>/dev/null || true
        wait_gone 5 "${left[@]}" || say "warning: $what still alive after SIGKILL: ${left[*]}"
    fi
}

# kill_netns_pids NS - end every process `ip netns pids` lists in NS (except our ancestry).
kill_netns_pids() {
    local ns=$1 pid victims=() protected
    [[ -e /run/netns/$ns ]] || return 0
    protected=" $(protected_pids | tr '\n' ' ') "
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do
        [[ $protected == *" $pid "* ]] && continue
        victims+=("$pid")
    done
    ((${#victims[@]})) || return 0
    stop_pids "processes in $ns" "${victims[@]}"
}

# ----------------------------------------------------------------------------- state

STATE=
DIR=

# load_state DIR - read DIR/state into S_* variables; false when there is no state.
load_state() {
    DIR=$(cd "$1" 2>/dev/null && pwd) || return 1
    STATE=$DIR/state
    [[ -f $STATE ]] || return 1
    local k v
    while IFS='=' read -r k v; do
        [[ $k =~ ^[a-z0-9_]+$ ]] || continue
        printf -v "S_$k" '%s' "$v"
    done <"$STATE"
    return 0
}

# state_set KEY VALUE - replace or append one line of DIR/state.
state_set() {
    local k=$1 v=$2 tmp
    tmp=$STATE.tmp
    awk -v k="$k" -v v="$v" 'BEGIN { done = 0 }
        index($0, k "=") == 1 { print k "=" v; done = 1; next }
        { print }
        END { if (!done) print k "=" v }' "$STATE" >"$tmp"
    mv "$tmp" "$STATE"
    printf -v "S_$k" '%s' "$v"
}

require_up() {
    load_state "$1" || die "no testbed in ${1:-?} (no state file); run: $PROG up --dir ${1:-DIR} ..."
    [[ ${S_status-} == up ]] || die "the testbed in $DIR is ${S_status:-not up}"
}

# ----------------------------------------------------------------------------- registry / gc

registry_lock() {
    mkdir -p "$REGISTRY"
    exec 9>"$REGISTRY/.lock"
    flock 9
}
registry_unlock() { exec 9>&-; }

# owner_alive "PID STARTTIME" | none
owner_alive() {
    local pid start
    read -r pid start <<<"$1"
    [[ $pid == none ]] && return 0
    pid_alive "$pid" || return 1
    [[ $(pid_starttime "$pid") == "$start" ]]
}

# teardown_id ID - remove what is left of a testbed whose run dir (and state) is gone.
teardown_id() {
    local id=$1 mnt
    kill_netns_pids "smbtb-$id-srv"
    kill_netns_pids "smbtb-$id-cli"
    # tmpfs mounts of this id carry the source name smbtb-ID.
    while read -r mnt; do
        [[ -n $mnt ]] || continue
        umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || say "warning: cannot unmount $mnt"
    done < <(awk -v s="smbtb-$id" '$1 == s && $3 == "tmpfs" { print $2 }' /proc/mounts)
    ip netns del "smbtb-$id-srv" 2>/dev/null || true
    ip netns del "smbtb-$id-cli" 2>/dev/null || true
    rm -rf "/etc/netns/smbtb-$id-cli"
    rm -rf "${REGISTRY:?}/$id"
}

# gc - tear down every testbed whose owner process is gone, and any smbtb namespace or tmpfs
# that has no registry entry (left by a run killed half-way through up or down).
cmd_gc() {
    registry_lock
    local entry id owner dir ns mnt
    for entry in "$REGISTRY"/*; do
        [[ -d $entry ]] || continue
        id=${entry##*/}
        [[ $id =~ ^[0-9]+$ ]] || continue
        owner=$(cat "$entry/owner" 2>/dev/null || echo "0 0")
        owner_alive "$owner" && continue
        dir=$(cat "$entry/dir" 2>/dev/null || true)
        say "collecting stale testbed $id (owner ${owner%% *} is gone, dir ${dir:-?})"
        if [[ -n $dir && -f $dir/state ]]; then
            (do_down "$dir") || teardown_id "$id"
        fi
        teardown_id "$id"
    done
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        [[ $ns =~ ^smbtb-([0-9]+)-(srv|cli)$ ]] || continue
        id=${BASH_REMATCH[1]}
        [[ -d $REGISTRY/$id ]] && continue
        say "removing orphan namespace $ns"
        teardown_id "$id"
    done
    while read -r mnt; do
        [[ $mnt =~ ^smbtb-([0-9]+)$ ]] || continue
        id=${BASH_REMATCH[1]}
        [[ -d $REGISTRY/$id ]] && continue
        say "removing orphan tmpfs of testbed $id"
        teardown_id "$id"
    done < <(awk '$3 == "tmpfs" { print $1 }' /proc/mounts)
    registry_unlock
}

# ----------------------------------------------------------------------------- smb.conf

# interfaces_line SPEC... - the smb.conf value: every spec double-quoted (specs contain ';').
interfaces_line() {
    local out="" s
    for s in "$@"; do out+="\"$s\" "; done
    echo "${out% }"
}

write_smb_conf() {
    local conf=$1 ifline=$2
    # The run dir as smbd sees it: in trixie mode it is bind-mounted at /smbtb in the root.
    local d=$DIR
    [[ ${S_samba-system} == trixie ]] && d=$ROOT_RUN_DIR
    local shares=$d/shares
    {
        if [[ ${S_kerberos-0} == 1 ]]; then
            ad_globals
        else
            cat <<EOF
# Generated by testbed.sh for testbed $S_id. Private to this run; see tests/testbed/README.md.
[global]
  workgroup = $S_domain
  netbios name = SMBTB$S_id
  server role = standalone server
  security = user
  passdb backend = tdbsam:$d/private/passdb.tdb
  # Guest: unknown user names become the guest account (a known name with a wrong password
  # still fails).
  map to guest = bad user
  guest account = nobody
EOF
        fi
        cat <<EOF
  server string = smb3 testbed $S_id
  private dir = $d/private
  lock directory = $d/lock
  state directory = $d/state.d
  cache directory = $d/cache
  pid directory = $d/pid
  ncalrpc dir = $d/ncalrpc
  usershare path = $d/usershares
  log file = $d/log/smbd.log
  logging = file
  log level = $S_log_level
  max log size = 0
  # Multichannel: the addresses (and only those) that FSCTL_QUERY_NETWORK_INTERFACE_INFO reports.
  # smbd re-reads this line on reload, so set-interfaces changes the list without a restart.
  server multi channel support = yes
  interfaces = $ifline
  # Listen on the wildcard address: every address of the (private) server namespace answers
  # on 445, whatever is advertised, also addresses added later - no restart needed.
  bind interfaces only = no
  smb ports = 445
  disable netbios = yes
  server min protocol = SMB2_10
  server max protocol = SMB3_11
  # Samba 4.17 knows signing only as a global option (testparm: "Global parameter server
  # signing found in service section!"); testbed.sh --signing sets it for the whole server.
  server signing = $S_signing
  # Durable handles and leases need Samba's own share modes and locking.
  kernel oplocks = no
  kernel share modes = no
  posix locking = no
  durable handles = yes
  smb2 leases = yes
  disable spoolss = yes
  load printers = no
  printcap name = /dev/null
EOF
        if [[ ${S_samba-system} == trixie ]]; then
            cat <<EOF
  # SMB3 POSIX extensions (Samba 4.22 from the trixie root). Only here, in [global], does
  # smbd offer the POSIX negotiate context (0x100); a share can turn them off again
  # ([noposix]).
  smb3 unix extensions = yes
EOF
        fi
        cat <<EOF

[plain]
  path = $shares/plain
  read only = no
  valid users = $S_user

[encrypted]
  path = $shares/encrypted
  read only = no
  valid users = $S_user
  smb encrypt = required
EOF
        if [[ $S_signing == mandatory ]]; then
            cat <<EOF

# Signing is required server-wide (see [global]); this share exists so tests can say what
# they rely on. It is exported only when the testbed was started with --signing mandatory.
[signed]
  path = $shares/signed
  read only = no
  valid users = $S_user
EOF
        fi
        cat <<EOF

[public]
  path = $shares/public
  read only = no
  guest ok = yes

# What backup software needs from a server, made real: alternate data streams kept in
# xattrs (streams_xattr), NT security descriptors kept in xattrs (acl_xattr), and
# "previous versions" served from @GMT-YYYY.MM.DD-HH.MM.SS directories under .snapshots
# in the share's root (shadow_copy2). A share of its own, so [plain] stays what the
# benchmarks measure.
[backup]
  path = $shares/backup
  read only = no
  valid users = $S_user
  vfs objects = shadow_copy2 acl_xattr streams_xattr
  shadow:mountpoint = $shares/backup
  shadow:snapdir = .snapshots
  shadow:format = @GMT-%Y.%m.%d-%H.%M.%S
  shadow:sort = desc
  shadow:localtime = no
EOF
        cat <<EOF

# A standalone DFS root (MS-DFSC): tests add links as symbolic links in its directory
# whose targets read msdfs:SERVER\\SHARE[,SERVER2\\SHARE2...]; a client that opens a path
# below one gets STATUS_PATH_NOT_COVERED and asks for a referral. Referrals name targets as
# the link does, so tests decide which server, share or address each link leads to.
[dfs]
  path = $shares/dfs
  read only = no
  valid users = $S_user
  msdfs root = yes
EOF
        if [[ ${S_samba-system} == trixie ]]; then
            cat <<EOF

# Like [plain], without the POSIX extensions: the server offers them, this share refuses
# them, so tests can compare both on one server.
[noposix]
  path = $shares/noposix
  read only = no
  valid users = $S_user
  smb3 unix extensions = no
EOF
        fi
    } >"$conf"
}

# valid_spec SPEC - true when SPEC can go into the interfaces line and the state file: not
# empty, no double quote (the line quotes each spec), no '|' (the state's separator), no
# whitespace.
valid_spec() {
    [[ -n $1 && $1 != *'"'* && $1 != *'|'* && $1 =~ ^[^[:space:]]+$ ]]
}

# advertise_specs links|service|both - the interface specs for that choice, one per line:
# `links` = every link's server address with its speed, `service` = the service address with
# the links' combined speed (one address reachable over every link, like a server with teamed
# NICs), `both` = links then service. `capability=RSS` only when the NICs have several queues:
# Samba sets the RSS flag only from it (veth has no ethtool RSS query), and it should match
# what the client sees in /sys/class/net/cliK/queues. Callers check that a service address
# exists before asking for one (this runs in a subshell, where die cannot stop the script).
advertise_specs() {
    local what=$1 rss="" k v w sum=0
    ((${S_queues:-1} > 1)) && rss=",capability=RSS"
    for ((k = 1; k <= S_links; k++)); do
        v="S_link${k}_server_addr"
        w="S_link${k}_speed_bps"
        sum=$((sum + ${!w}))
        [[ $what == service ]] || echo "${!v};speed=${!w}$rss"
    done
    [[ $what == links ]] || echo "$S_service_addr;speed=$sum$rss"
}

# set_interfaces_in_conf SPEC... - rewrite the `interfaces =` line of the config in place.
set_interfaces_in_conf() {
    local line tmp
    line=$(interfaces_line "$@")
    tmp=$S_conf.tmp
    awk -v l="$line" '/^[ \t]*interfaces[ \t]*=/ { print "  interfaces = " l; next } { print }' \
        "$S_conf" >"$tmp"
    mv "$tmp" "$S_conf"
    state_set interfaces "$(printf '%s|' "$@" | sed 's/|$//')"
}

# ----------------------------------------------------------------------------- smbd

start_smbd() {
    local pid
    : >>"$DIR/log/smbd.stdout"
    # smbd's parent sends SIGTERM to its whole process group when it exits. Started in our
    # process group (--no-process-group without setsid) that would kill the caller - the test
    # binary - on every down/restart. So: setsid(1) makes it a session and group leader of its
    # own (no fork: a background job of a non-interactive shell is never a group leader), ip netns
    # exec execs in place too, so $! is smbd's PID; --no-process-group stops smbd from trying
    # setsid again. stdin/stdout/stderr and our fds 3 and 9 are detached so a caller reading
    # our output (Command::output) does not wait for smbd to exit. (In trixie mode the bash
    # and chroot of run_prefix exec as well.)
    run_prefix "$S_server_ns" "$(samba_from)"
    setsid "${RUN_PREFIX[@]}" smbd --foreground --no-process-group -s "$(samba_conf)" \
        </dev/null >>"$DIR/log/smbd.stdout" 2>&1 3>&- 9>&- &
    pid=$!
    state_set smbd_pid "$pid"
    wait_smbd_ready
    # Double-check the recorded PID really is smbd and leads its own process group.
    local comm pgid rest stat
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
    stat=$(cat "/proc/$pid/stat" 2>/dev/null || true)
    rest=${stat##*) }
    pgid=$(set -- $rest; echo "${3-}")
    [[ $comm == smbd && $pgid == "$pid" ]] ||
        die "pid $pid is '$comm' in process group ${pgid:-?}, expected smbd leading its own group"
}

log_tail() {
    echo "---- last lines of $DIR/log/smbd.log ----" >&2
    tail -n 25 "$DIR/log/smbd.log" >&2 2>/dev/null || true
    echo "---- $DIR/log/smbd.stdout ----" >&2
    tail -n 10 "$DIR/log/smbd.stdout" >&2 2>/dev/null || true
}

# probe ADDR - true when ADDR:445 accepts a TCP connection from the client namespace.
probe() {
    ip netns exec "$S_client_ns" timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/445"' "$1" 2>/dev/null
}

# listening_445 - true when smbd has a listening socket on port 445 in the server namespace.
listening_445() {
    [[ -n $(ip netns exec "$S_server_ns" ss -ltnH 'sport = :445' 2>/dev/null) ]]
}

# link_is_up K - true when srvK is administratively up (link-down takes it down).
link_is_up() {
    ip -n "$S_server_ns" -o link show "srv$1" 2>/dev/null | grep -Eq '[<,]UP[,>]'
}

# probe_addrs - where readiness is checked from the client namespace: the server address of
# every link that is up (smbd listens on the wildcard address, so every address of the server
# namespace answers; a downed link never does) and the service address when link 1, its
# main-table route, is up.
probe_addrs() {
    local k v
    for ((k = 1; k <= S_links; k++)); do
        v="S_link${k}_server_addr"
        link_is_up "$k" && echo "${!v}"
    done
    if [[ -n ${S_service_addr-} ]] && link_is_up 1; then echo "$S_service_addr"; fi
    return 0
}

wait_smbd_ready() {
    local deadline addr pending addrs
    deadline=$((SECONDS + READY_TIMEOUT))
    mapfile -t addrs < <(probe_addrs)
    while :; do
        if ! pid_alive "$S_smbd_pid"; then
            log_tail
            die "smbd (pid $S_smbd_pid) exited during startup"
        fi
        pending=()
        listening_445 || pending+=("(no listening socket yet)")
        if ((${#pending[@]} == 0)); then
            for addr in "${addrs[@]}"; do
                probe "$addr" || pending+=("$addr")
            done
        fi
        ((${#pending[@]})) || return 0
        if ((SECONDS >= deadline)); then
            log_tail
            die "smbd (pid $S_smbd_pid) does not answer on ${pending[*]} port 445 after ${READY_TIMEOUT} s"
        fi
        sleep 0.1
    done
}

stop_smbd() {
    local pid=${S_smbd_pid-}
    if [[ -n $pid ]] && pid_alive "$pid" && pid_in_netns "$pid" "$S_server_ns"; then
        stop_pids "smbd" "$pid"
    fi
    # Connection children, samba-dcerpcd and friends.
    kill_netns_pids "$S_server_ns"
}

# ----------------------------------------------------------------------------- Samba from a Debian 13 root

# debian_mirror - the Debian mirror this machine's apt uses (the first `debian` URI of an
# enabled one-line or deb822 source), so debootstrap goes where apt already may go.
# SMBTB_DEBIAN_MIRROR overrides it.
debian_mirror() {
    if [[ -n ${SMBTB_DEBIAN_MIRROR-} ]]; then
        echo "$SMBTB_DEBIAN_MIRROR"
        return
    fi
    local f uri=""
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [[ -f $f ]] || continue
        uri=$(awk '
            /^[ \t]*#/ { next }
            $1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }
            $1 == "URIs:" { print $2; exit }' "$f" | grep -E '/debian/?$' | head -n 1) || true
        [[ -n $uri ]] && break
    done
    echo "${uri:-http://deb.debian.org/debian}"
}

# root_smbd_version ROOT - the version smbd in ROOT reports (e.g. 4.22.11-Debian-...).
root_smbd_version() {
    chroot "$1" smbd --version 2>/dev/null | sed -n 's/^Version //p'
}

# version_at_least VERSION MIN - true when VERSION (4.22.11-...) is MIN (major.minor) or newer.
version_at_least() {
    local maj min want_maj want_min
    IFS=. read -r maj min _ <<<"$1"
    IFS=. read -r want_maj want_min <<<"$2"
    [[ $maj =~ ^[0-9]+$ && $min =~ ^[0-9]+$ ]] || return 1
    ((maj > want_maj || (maj == want_maj && min >= want_min)))
}

# build_trixie_root TARGET - debootstrap Debian 13 with samba and smbclient into TARGET (which
# must not exist), check its smbd, and write the marker last. debootstrap mounts /proc and
# /sys inside its target while it works; it runs in a private mount namespace, so a build that
# dies half-way cannot leave such a mount behind.
build_trixie_root() {
    local target=$1 log=$TRIXIE_ROOT.build.log mirror version
    mirror=$(debian_mirror)
    say "building the Samba root: debootstrap trixie from $mirror into $target (once; 0.5-3 minutes; log $log)"
    unshare --mount --propagation private -- \
        debootstrap --variant=minbase --include=samba,smbclient trixie "$target" "$mirror" \
        </dev/null >"$log" 2>&1 ||
        { tail -n 20 "$log" >&2; die "debootstrap failed (log above, all of it in $log)"; }
    version=$(root_smbd_version "$target")
    version_at_least "$version" "$TRIXIE_MIN_VERSION" ||
        die "the trixie root's smbd is '${version:-?}', not $TRIXIE_MIN_VERSION or newer"
    mkdir -p "$target$ROOT_RUN_DIR"
    echo "$version" >"$target/$ROOT_MARKER"
}

# ensure_trixie_root - make sure the shared root exists and is complete; build it when not.
# Under a lock, so testbeds starting together build it once (the others wait). A build
# goes into TRIXIE_ROOT.tmp and is renamed only when complete; a left-over .tmp (a build
# that was killed) or a root without its marker is thrown away and built again.
ensure_trixie_root() {
    local t0=$SECONDS tmp=$TRIXIE_ROOT.tmp how=cached
    need_tools chroot:coreutils unshare:util-linux
    mkdir -p "$(dirname "$TRIXIE_ROOT")"
    exec 7>"$TRIXIE_ROOT.lock"
    # Another testbed may be building it: wait (a build takes minutes), but not forever.
    flock -w 900 7 || die "$TRIXIE_ROOT.lock is still held after 15 minutes (a build that hangs?)"
    if [[ ! -s $TRIXIE_ROOT/$ROOT_MARKER ]]; then
        need_tools debootstrap:debootstrap
        # --one-file-system: never reach through a mount (there should be none).
        rm -rf --one-file-system "$tmp"
        build_trixie_root "$tmp"
        [[ -e $TRIXIE_ROOT ]] && say "replacing the incomplete root $TRIXIE_ROOT"
        rm -rf --one-file-system "$TRIXIE_ROOT"
        mv "$tmp" "$TRIXIE_ROOT"
        how=fresh
        say "built $TRIXIE_ROOT in $((SECONDS - t0)) s: smbd $(cat "$TRIXIE_ROOT/$ROOT_MARKER"), $(du -sh "$TRIXIE_ROOT" | cut -f1)"
    fi
    exec 7>&-
    ROOT_BUILT=$how
    ROOT_BUILD_SECONDS=$((SECONDS - t0))
}

# root_exec ROOT RUNDIR INSIDE PROG [ARG...] - exec PROG from ROOT (chroot). Runs in a mount
# namespace of its own (the caller starts it with `ip netns exec` or `unshare --mount`), so
# every mount made here is private to the process and its children and vanishes with the
# last of them: two testbeds never see each other's mounts, and a crash leaves none behind.
# The shared root is mounted read-only (a testbed cannot change it for the next one); /tmp
# and /run get private tmpfs; /dev, /proc and /sys are the namespace's; the host's passwd
# and group files give the test user the same uid inside as outside; RUNDIR (the run dir,
# with its share tmpfs) appears at INSIDE (/smbtb), and RUNDIR/log/samba at /var/log/samba:
# samba-dcerpcd's rpcd_* helpers open their default log there before they read the config
# (with the root read-only that would only fail, and the messages are worth keeping). An
# empty RUNDIR skips both. Passed to the
# namespace with `declare -f`, so it uses nothing else from this script.
root_exec() {
    set -e
    local root=$1 rundir=$2 inside=$3
    shift 3
    mount --bind "$root" "$root"
    mount -o remount,bind,ro "$root"
    mount -t tmpfs -o mode=1777 smbtb-root "$root/tmp"
    mount -t tmpfs -o mode=0755 smbtb-root "$root/run"
    mount --rbind /dev "$root/dev"
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --bind /etc/passwd "$root/etc/passwd"
    mount --bind /etc/group "$root/etc/group"
    if [[ -n $rundir ]]; then
        mount --rbind "$rundir" "$root$inside"
        mkdir -p "$rundir/log/samba"
        mount --bind "$rundir/log/samba" "$root/var/log/samba"
    fi
    exec chroot "$root" "$@"
}

# run_prefix NS host|root - set RUN_PREFIX to the words that run a program in network
# namespace NS: the host's program, or the one in the testbed's root (`ip netns exec` gives
# it a mount namespace of its own, which root_exec fills). Every step execs, so a program
# started in the background with it has the PID that $! reports.
run_prefix() {
    RUN_PREFIX=(ip netns exec "$1")
    if [[ $2 == root ]]; then
        # shellcheck disable=SC2016 # "$@" is for the inner shell
        RUN_PREFIX+=(bash -c "$(declare -f root_exec); root_exec \"\$@\"" root_exec
            "$S_samba_root" "$DIR" "$ROOT_RUN_DIR")
    fi
}

# samba_from - where the server's Samba programs come from: root (trixie mode) or host.
samba_from() {
    if [[ ${S_samba-system} == trixie ]]; then echo root; else echo host; fi
}

# is_root_program PROG - true for Samba's programs, which trixie mode takes from the root.
is_root_program() {
    [[ " ${ROOT_PROGRAMS[*]} " == *" ${1##*/} "* ]]
}

# samba_run PROG [ARG...] - run one of Samba's programs in the server namespace: the system's,
# or in trixie mode the root's (give it the config as `samba_conf` names it).
samba_run() {
    run_prefix "$S_server_ns" "$(samba_from)"
    "${RUN_PREFIX[@]}" "$@"
}

# samba_conf - the config path as the server's programs see it (the run dir is /smbtb in the
# root).
samba_conf() {
    if [[ ${S_samba-system} == trixie ]]; then echo "$ROOT_RUN_DIR/smb.conf"; else echo "$S_conf"; fi
}

# ----------------------------------------------------------------------------- Kerberos (AD DC)

# ad_globals - the [global] lines that make the server a Samba AD DC with its own KDC (up
# --kerberos). Only the services SMB and Kerberos need run: s3fs (smbd), kdc, and winbindd,
# which smbd on a DC asks to map users to Unix ids. NTLM is refused, so a session that works
# was authenticated with Kerberos. idmap_ldb:use rfc2307 maps the test user to the Unix user
# through its uidNumber, as in the default testbed.
ad_globals() {
    cat <<EOF
# Generated by testbed.sh for testbed $S_id (Kerberos mode: a Samba AD DC).
# Private to this run; see tests/testbed/README.md.
[global]
  workgroup = $AD_DOMAIN
  realm = $AD_REALM
  netbios name = ${AD_HOST^^}
  server role = active directory domain controller
  server services = s3fs, kdc, winbindd
  ntlm auth = disabled
  idmap_ldb:use rfc2307 = yes
  binddns dir = $DIR/ad/bind-dns
EOF
}

# ad_provision TARGET - provision the AD domain into TARGET (TARGET/private holds the domain's
# databases and keys; nothing in it names TARGET, so it can be copied). Log in TARGET.log.
ad_provision() {
    local target=$1 adminpass
    adminpass="Adm-$(head -c 64 /dev/urandom | tr -dc 'A-Za-z0-9' | head -c 20)"
    rm -rf "$target"
    mkdir -p "$target"
    # --host-ip: no interface scan; --dns-backend NONE: no DNS server (clients get the DC's
    # name from the client namespace's hosts file or the tests' settings).
    samba-tool domain provision --realm="$AD_REALM" --domain="$AD_DOMAIN" --server-role=dc \
        --dns-backend=NONE --host-name="$AD_HOST" --host-ip=127.0.0.1 \
        --adminpass="$adminpass" --targetdir="$target" \
        --option="cache directory=$target/cache" >"$target.log" 2>&1 ||
        { tail -n 20 "$target.log" >&2; die "samba-tool domain provision failed (log above)"; }
    # The testbed's passwords are 16 random alphanumerics (or the caller's): without this, AD's
    # complexity rule (three of four character classes) refuses some of them.
    samba-tool domain passwordsettings set -H "$target/private/sam.ldb" --complexity=off \
        --min-pwd-length=1 --history-length=0 --min-pwd-age=0 --max-pwd-age=0 >>"$target.log" 2>&1 ||
        { tail -n 20 "$target.log" >&2; die "samba-tool domain passwordsettings failed (log above)"; }
}

# ad_private - fill DIR/private with a provisioned domain: a copy of the cached template
# ($SMBTB_AD_CACHE, default /var/cache/smbtb; provisioned on first use under a lock, one per
# Samba version), or a fresh provision in DIR/ad with SMBTB_AD_CACHE=none.
ad_private() {
    local t0=$SECONDS version tpl how=cached
    if [[ $AD_CACHE == none ]]; then
        ad_provision "$DIR/ad/provision"
        cp -a "$DIR/ad/provision/private/." "$DIR/private/"
        how=fresh
    else
        version=$(samba --version 2>/dev/null | tr -c 'A-Za-z0-9.\n-' '_')
        tpl=$AD_CACHE/ad-$AD_REALM-$version
        mkdir -p "$AD_CACHE"
        exec 8>"$AD_CACHE/.lock"
        flock 8
        if [[ ! -f $tpl/complete ]]; then
            say "provisioning $AD_REALM into $tpl (once per Samba version; about 30 s)"
            ad_provision "$tpl.tmp"
            rm -rf "$tpl"
            mv "$tpl.tmp" "$tpl"
            mv "$tpl.tmp.log" "$tpl/provision.log"
            touch "$tpl/complete"
            how=fresh
        fi
        cp -a "$tpl/private/." "$DIR/private/"
        exec 8>&-
    fi
    state_set ad_provisioned "$how"
    state_set ad_provision_seconds $((SECONDS - t0))
    say "AD domain $AD_REALM in $DIR/private ($how, $((SECONDS - t0)) s)"
}

# ad_add_user - the test user in the domain, with the testbed's password, mapped to the Unix
# user of the same name (uidNumber/gidNumber, see idmap_ldb:use rfc2307).
ad_add_user() {
    ip netns exec "$S_server_ns" samba-tool user create "$S_user" "$S_password" \
        --uid-number="$(id -u "$S_user")" --gid-number="$(id -g "$S_user")" \
        -s "$S_conf" >"$DIR/log/samba-tool.log" 2>&1 ||
        { cat "$DIR/log/samba-tool.log" >&2; die "samba-tool could not add $S_user"; }
}

# ad_client_names - how clients in the client namespace find the DC: a hosts file that `ip
# netns exec` bind-mounts over /etc/hosts (/etc/netns/<ns>/hosts; removed by down and gc), and
# a krb5.conf for MIT/Heimdal tools (KRB5_CONFIG=DIR/krb5.conf).
ad_client_names() {
    local fqdn=$AD_HOST.${AD_REALM,,} addr=$S_link1_server_addr
    mkdir -p "/etc/netns/$S_client_ns"
    printf '127.0.0.1 localhost\n%s %s %s\n' "$addr" "$fqdn" "$AD_HOST" >"/etc/netns/$S_client_ns/hosts"
    cat >"$DIR/krb5.conf" <<EOF
[libdefaults]
  default_realm = $AD_REALM
  dns_lookup_realm = false
  dns_lookup_kdc = false
  rdns = false
[realms]
  $AD_REALM = {
    kdc = $addr
  }
[domain_realm]
  .${AD_REALM,,} = $AD_REALM
  ${AD_REALM,,} = $AD_REALM
EOF
    state_set realm "$AD_REALM"
    state_set server_host "$fqdn"
    state_set kdc "$addr:88"
    state_set krb5_conf "$DIR/krb5.conf"
}

# start_dc - run `samba` (the AD DC; it starts smbd, the KDC and winbindd itself) like smbd
# (setsid, PID kept, see start_smbd), in a private mount namespace where DIR/ad/run is mounted
# over /run/samba: smbd finds winbindd only through the compiled-in socket directory
# /run/samba/winbindd, whatever smb.conf says, so each DC needs its own. The mount goes away
# with the DC's last process; nothing is mounted in the host's mount namespace.
start_dc() {
    local pid comm
    : >>"$DIR/log/smbd.stdout"
    rm -rf "$DIR/ad/run"
    mkdir -p "$DIR/ad/run"
    # Exec all the way down (ip netns exec, unshare, bash -c, samba), so $! is samba's PID.
    setsid ip netns exec "$S_server_ns" unshare --mount --propagation private -- \
        bash -c 'mount --bind "$0" /run/samba && exec samba --foreground --no-process-group -s "$1"' \
        "$DIR/ad/run" "$S_conf" </dev/null >>"$DIR/log/smbd.stdout" 2>&1 3>&- 8>&- 9>&- &
    pid=$!
    state_set smbd_pid "$pid"
    wait_smbd_ready
    wait_dc_ready
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
    [[ $comm == samba ]] || die "pid $pid is '$comm', expected samba (the AD DC)"
}

# wait_dc_ready - the KDC answers on port 88 of link 1's server address and winbindd accepts
# connections on its socket (until then every session setup fails with INTERNAL_ERROR).
wait_dc_ready() {
    local deadline=$((SECONDS + READY_TIMEOUT)) pipe=$DIR/ad/run/winbindd/pipe
    while :; do
        pid_alive "$S_smbd_pid" || { log_tail; die "samba (pid $S_smbd_pid) exited during startup"; }
        if ip netns exec "$S_client_ns" timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/88"' "$S_link1_server_addr" 2>/dev/null &&
            [[ -S $pipe ]] &&
            python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$pipe" 2>/dev/null; then
            return 0
        fi
        if ((SECONDS >= deadline)); then
            log_tail
            die "the AD DC (pid $S_smbd_pid): no KDC on $S_link1_server_addr:88 or no winbindd after ${READY_TIMEOUT} s"
        fi
        sleep 0.2
    done
}

# start_server - smbd, or the AD DC in Kerberos mode.
start_server() {
    if [[ ${S_kerberos-0} == 1 ]]; then start_dc; else start_smbd; fi
}

# ----------------------------------------------------------------------------- up

# setup_service_addr ID LINKS - the service address 10.ID.200.1/32 on the server's lo, reachable
# over every link: in the client namespace, traffic from 10.ID.K.2 looks up table 100+K (rule
# priority 1000+K), whose only route sends it to the service address through cliK via
# 10.ID.K.1; unbound sockets use the main table's route, through link 1. The server needs
# nothing: its replies go to 10.ID.K.2, on-link on srvK. (No dummy interface: this kernel has
# no dummy driver; Samba lists lo's addresses like any other.)
setup_service_addr() {
    local id=$1 links=$2 addr k table
    addr=10.$id.$SERVICE_NET.1
    ip -n "$S_server_ns" addr add "$addr/32" dev lo
    for ((k = 1; k <= links; k++)); do
        table=$((SERVICE_TABLE_BASE + k))
        ip -n "$S_client_ns" route add "$addr/32" via "10.$id.$k.1" dev "cli$k" src "10.$id.$k.2" table "$table"
        ip -n "$S_client_ns" rule add from "10.$id.$k.2" lookup "$table" priority $((1000 + k))
        state_set "link${k}_route_table" "$table"
    done
    ip -n "$S_client_ns" route add "$addr/32" via "10.$id.1.1" dev cli1 src "10.$id.1.2"
    state_set service_addr "$addr"
}

cmd_up() {
    # Only the key=value lines go to stdout (fd 3); everything else is for humans.
    exec 3>&1 1>&2
    local dir="" links="" rates="" unshaped=0 mtu=1500 size=6g signing=mandatory
    local user=smbtest password="" owner="$PPID" log_level=1 queues=4 service=0
    local advertise=links custom_specs=() kerberos=0 samba=system
    while (($#)); do
        case $1 in
        --dir) dir=${2:?--dir needs a value}; shift 2 ;;
        --links) links=${2:?--links needs a value}; shift 2 ;;
        --rate) rates=${2:?--rate needs a value}; shift 2 ;;
        --unshaped) unshaped=1; shift ;;
        --mtu) mtu=${2:?--mtu needs a value}; shift 2 ;;
        --size) size=${2:?--size needs a value}; shift 2 ;;
        --signing) signing=${2:?--signing needs a value}; shift 2 ;;
        --user) user=${2:?--user needs a value}; shift 2 ;;
        --password) password=${2:?--password needs a value}; shift 2 ;;
        --owner) owner=${2:?--owner needs a value}; shift 2 ;;
        --log-level) log_level=${2:?--log-level needs a value}; shift 2 ;;
        --queues) queues=${2:?--queues needs a value}; shift 2 ;;
        --service-addr) service=1; shift ;;
        --advertise) advertise=${2:?--advertise needs a value}; shift 2 ;;
        --advertise-spec) custom_specs+=("${2:?--advertise-spec needs a value}"); shift 2 ;;
        --kerberos) kerberos=1; shift ;;
        --samba) samba=${2:?--samba needs a value}; shift 2 ;;
        *) die "up: unknown argument '$1'" ;;
        esac
    done
    [[ -n $dir ]] || die "up: --dir is required"
    if ((kerberos)); then
        need_tools "${AD_TOOLS[@]}"
        [[ -d $AD_SETUP_DIR ]] ||
            die "missing $AD_SETUP_DIR (AD provisioning templates): apt-get install -y samba-ad-provision samba-dsdb-modules"
    fi
    [[ $samba == system || $samba == trixie ]] || die "up: --samba is system or trixie, got '$samba'"
    ((kerberos)) && [[ $samba == trixie ]] && die "up: --kerberos and --samba trixie exclude each other"
    [[ $links =~ ^[0-9]+$ ]] && ((links >= 1 && links <= 32)) || die "up: --links must be 1..32"
    [[ -n $rates && $unshaped == 1 ]] && die "up: --rate and --unshaped exclude each other"
    [[ $mtu =~ ^[0-9]+$ ]] && ((mtu >= 576 && mtu <= 65535)) || die "up: --mtu must be 576..65535"
    [[ $signing == mandatory || $signing == default ]] || die "up: --signing is mandatory or default"
    [[ $user =~ ^[a-z_][a-z0-9_-]*$ ]] || die "up: bad user name '$user'"
    [[ $size =~ ^[0-9]+[kmgKMG%]?$ ]] || die "up: bad --size '$size'"
    [[ $log_level =~ ^[0-9]+$ ]] || die "up: bad --log-level"
    [[ $queues =~ ^[0-9]+$ ]] && ((queues >= 1 && queues <= 64)) || die "up: --queues must be 1..64"
    case $advertise in
    links | both) ;;
    service) ((service)) || die "up: --advertise service needs --service-addr" ;;
    *) die "up: --advertise is links, service or both, got '$advertise'" ;;
    esac
    [[ $advertise == both ]] && ((!service)) && die "up: --advertise both needs --service-addr"
    local s
    for s in "${custom_specs[@]}"; do valid_spec "$s" || die "up: bad --advertise-spec '$s'"; done
    local rate_list=()
    if [[ -n $rates ]]; then
        IFS=',' read -r -a rate_list <<<"$rates"
        local r
        for r in "${rate_list[@]}"; do
            [[ $r =~ ^[0-9]+$ ]] || die "up: rates are Mbit/s integers (0 = unshaped), got '$r'"
        done
        if ((${#rate_list[@]} == 1)); then
            local i
            for ((i = 1; i < links; i++)); do rate_list+=("${rate_list[0]}"); done
        fi
        ((${#rate_list[@]} == links)) || die "up: --rate has ${#rate_list[@]} values for $links links"
    else
        local i
        for ((i = 0; i < links; i++)); do rate_list+=(0); done
    fi
    if [[ -z $password ]]; then
        password=$(head -c 64 /dev/urandom | tr -dc 'A-Za-z0-9' | head -c 16)
    fi
    [[ $password =~ ^[^[:space:]%]+$ ]] || die "up: the password may not contain spaces or %"
    local owner_rec
    if [[ $owner == none ]]; then
        owner_rec="none 0"
    else
        pid_alive "$owner" || die "up: owner process $owner does not exist"
        owner_rec="$owner $(pid_starttime "$owner")"
    fi

    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [[ -f $dir/state ]] && grep -qx 'status=up' "$dir/state"; then
        die "a testbed is already up in $dir; run: $PROG down --dir $dir"
    fi

    local t0=$SECONDS
    cmd_gc
    # The shared root first (minutes when it has to be built), before an id is claimed.
    local samba_root="" samba_version
    if [[ $samba == trixie ]]; then
        ensure_trixie_root
        samba_root=$TRIXIE_ROOT
        samba_version=$(cat "$TRIXIE_ROOT/$ROOT_MARKER")
    else
        samba_version=$(smbd --version | sed -n 's/^Version //p')
    fi

    # Claim an id (and so the namespace names and subnets) under the registry lock.
    registry_lock
    local id="" off cand
    for ((off = 0; off < ID_COUNT; off++)); do
        cand=$((ID_MIN + ($$ + off) % ID_COUNT))
        [[ -e /run/netns/smbtb-$cand-srv || -e /run/netns/smbtb-$cand-cli ]] && continue
        if mkdir "$REGISTRY/$cand" 2>/dev/null; then
            id=$cand
            break
        fi
    done
    [[ -n $id ]] || die "no free testbed id in $REGISTRY (all $ID_COUNT in use?)"
    echo "$dir" >"$REGISTRY/$id/dir"
    echo "$owner_rec" >"$REGISTRY/$id/owner"
    # The test user is shared by all testbeds; create it once, under the lock.
    if ! id -u "$user" >/dev/null 2>&1; then
        useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user"
        say "created Unix user $user"
    fi
    registry_unlock

    # State first, so that a failure from here on can be undone by do_down.
    DIR=$dir
    STATE=$dir/state
    rm -f "$STATE"
    {
        echo "status=starting"
        echo "id=$id"
        echo "dir=$dir"
        echo "server_ns=smbtb-$id-srv"
        echo "client_ns=smbtb-$id-cli"
        echo "links=$links"
        echo "mtu=$mtu"
        echo "user=$user"
        echo "password=$password"
        if ((kerberos)); then echo "domain=$AD_DOMAIN"; else echo "domain=SMBTB"; fi
        echo "kerberos=$kerberos"
        echo "signing=$signing"
        echo "log_level=$log_level"
        echo "queues=$queues"
        echo "conf=$dir/smb.conf"
        echo "log=$dir/log/smbd.log"
        echo "owner=${owner_rec%% *}"
        echo "mntns=$(readlink /proc/self/ns/mnt)"
        echo "samba=$samba"
        echo "samba_version=$samba_version"
        if [[ $samba == trixie ]]; then
            echo "samba_root=$samba_root"
            echo "samba_root_run_dir=$ROOT_RUN_DIR"
            echo "samba_root_built=$ROOT_BUILT"
            echo "samba_root_seconds=$ROOT_BUILD_SECONDS"
        fi
    } >"$STATE"
    load_state "$dir"
    trap 'rc=$?; if ((rc != 0)); then say "up failed; cleaning up"; (do_down "$DIR") || true; fi' EXIT

    # Namespaces and links.
    ip netns add "$S_server_ns"
    ip netns add "$S_client_ns"
    ip -n "$S_server_ns" link set lo up
    ip -n "$S_client_ns" link set lo up
    local k rate speed burst saddr caddr server_addrs=() client_addrs=() ifspecs=()
    for ((k = 1; k <= links; k++)); do
        rate=${rate_list[k - 1]}
        saddr=10.$id.$k.1
        caddr=10.$id.$k.2
        # Created directly inside the namespaces, so names only need to be unique there. Q
        # queues per end: /sys/class/net/cliK/queues/rx-* lists Q entries (what a client
        # reads to call a NIC RSS-capable).
        ip link add name "srv$k" netns "$S_server_ns" mtu "$mtu" \
            numtxqueues "$queues" numrxqueues "$queues" type veth \
            peer name "cli$k" netns "$S_client_ns" mtu "$mtu" \
            numtxqueues "$queues" numrxqueues "$queues"
        ip -n "$S_server_ns" addr add "$saddr/24" dev "srv$k"
        ip -n "$S_client_ns" addr add "$caddr/24" dev "cli$k"
        if ((rate > 0)); then
            # Burst: at least 64 KiB (one GSO super-packet), else 2 ms worth of the rate.
            burst=$((rate * 250))
            ((burst >= 65536)) || burst=65536
            tc -n "$S_server_ns" qdisc add dev "srv$k" root tbf rate "${rate}mbit" burst "$burst" latency "$TBF_LATENCY"
            tc -n "$S_client_ns" qdisc add dev "cli$k" root tbf rate "${rate}mbit" burst "$burst" latency "$TBF_LATENCY"
            speed=$((rate * 1000000))
        else
            speed=$UNSHAPED_SPEED_BPS
        fi
        ip -n "$S_server_ns" link set "srv$k" up
        ip -n "$S_client_ns" link set "cli$k" up
        server_addrs+=("$saddr")
        client_addrs+=("$caddr")
        state_set "link${k}_server_addr" "$saddr"
        state_set "link${k}_client_addr" "$caddr"
        state_set "link${k}_server_if" "srv$k"
        state_set "link${k}_client_if" "cli$k"
        state_set "link${k}_rate_mbit" "$rate"
        state_set "link${k}_speed_bps" "$speed"
    done
    state_set server_addrs "$(IFS=,; echo "${server_addrs[*]}")"
    state_set client_addrs "$(IFS=,; echo "${client_addrs[*]}")"
    ((service)) && setup_service_addr "$id" "$links"
    if ((${#custom_specs[@]})); then
        ifspecs=("${custom_specs[@]}")
        advertise=custom
    else
        mapfile -t ifspecs < <(advertise_specs "$advertise")
    fi
    state_set advertise "$advertise"

    # Share storage: a tmpfs of our own (source name smbtb-ID so gc can find it). Samba's
    # databases from an earlier run in the same dir are thrown away.
    rm -rf "$dir"/{private,lock,state.d,cache,pid,ncalrpc,usershares,ad}
    mkdir -p "$dir"/{private,lock,state.d,cache,pid,ncalrpc,log,usershares,shares}
    # smbd touches share paths as the logged-on user: every directory above them must be
    # searchable (mkdtemp makes run dirs 0700).
    chmod 0755 "$dir"
    mount -t tmpfs -o "size=$size,mode=0755" "smbtb-$id" "$dir/shares"
    state_set mount "$dir/shares"
    local share shares=(plain encrypted public backup dfs)
    [[ $signing == mandatory ]] && shares=(plain encrypted signed public backup dfs)
    [[ $samba == trixie ]] && shares+=(noposix)
    for share in "${shares[@]}"; do
        mkdir "$dir/shares/$share"
        if [[ $share == public ]]; then
            chmod 1777 "$dir/shares/$share"
        else
            chown "$user:" "$dir/shares/$share"
            chmod 0755 "$dir/shares/$share"
        fi
        state_set "share_${share}_path" "$dir/shares/$share"
    done
    state_set shares "$(IFS=,; echo "${shares[*]}")"
    state_set interfaces "$(IFS='|'; echo "${ifspecs[*]}")"

    write_smb_conf "$S_conf" "$(interfaces_line "${ifspecs[@]}")"
    if ((kerberos)); then
        mkdir -p "$dir/ad"
        ad_private
        ad_add_user
        ad_client_names
    else
        # smbpasswd -s reads the new password twice from stdin. The passdb format belongs to
        # the Samba version, so the server's own smbpasswd writes it.
        printf '%s\n%s\n' "$password" "$password" |
            samba_run smbpasswd -c "$(samba_conf)" -a -s "$user" >"$dir/log/smbpasswd.log" 2>&1 ||
            { cat "$dir/log/smbpasswd.log" >&2; die "smbpasswd could not add $user"; }
    fi

    start_server
    state_set status up
    state_set up_seconds $((SECONDS - t0))
    trap - EXIT
    say "testbed $id up in $dir: ${links} link(s), smbd $samba_version pid $S_smbd_pid"
    cmd_status_print >&3
}

# ----------------------------------------------------------------------------- down

# do_down DIR - idempotent teardown of the testbed recorded in DIR/state.
do_down() {
    load_state "$1" || return 0
    [[ ${S_status-} == down ]] && return 0
    stop_smbd
    kill_netns_pids "$S_client_ns"
    if [[ -n ${S_mount-} ]] && mountpoint -q "$S_mount" 2>/dev/null; then
        umount "$S_mount" 2>/dev/null || umount -l "$S_mount" || say "warning: cannot unmount $S_mount"
    fi
    # Deleting a namespace deletes its veth ends (and so their peers).
    if [[ -e /run/netns/$S_server_ns ]]; then ip netns del "$S_server_ns" || say "warning: cannot delete $S_server_ns"; fi
    if [[ -e /run/netns/$S_client_ns ]]; then ip netns del "$S_client_ns" || say "warning: cannot delete $S_client_ns"; fi
    rm -rf "/etc/netns/$S_client_ns"
    rm -rf "${REGISTRY:?}/${S_id:?}"
    state_set status down
}

cmd_down() {
    local dir
    dir=$(parse_dir "$@")
    if ! load_state "$dir"; then
        say "nothing to take down in $dir"
        return 0
    fi
    if [[ ${S_status-} == down ]]; then
        say "testbed ${S_id-} in $DIR is already down"
        return 0
    fi
    # The tmpfs lives in the mount namespace that ran `up`; `ip netns exec` (and so
    # `testbed.sh exec`) gives its command a private one, where umount would only detach a copy.
    local here
    here=$(readlink /proc/self/ns/mnt)
    if [[ -n ${S_mntns-} && $here != "$S_mntns" ]]; then
        die "down must run in the mount namespace that ran up ($S_mntns), not in $here (inside ip netns exec?)"
    fi
    local t0=$SECONDS
    do_down "$dir"
    say "testbed $S_id down ($((SECONDS - t0)) s)"
}

# ----------------------------------------------------------------------------- other commands

# parse_dir ARGS... - the value of --dir (required).
parse_dir() {
    local dir=""
    while (($#)); do
        case $1 in
        --dir) dir=${2:?--dir needs a value}; shift 2 ;;
        *) shift ;;
        esac
    done
    [[ -n $dir ]] || die "--dir is required"
    echo "$dir"
}

cmd_status_print() {
    grep -v '^status=starting$' "$STATE"
}

cmd_status() {
    load_state "$(parse_dir "$@")" || die "no testbed in that directory"
    cmd_status_print
}

# link_arg K - validate a link number against the state.
link_arg() {
    [[ ${1-} =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= S_links)) || die "link must be 1..$S_links, got '${1-}'"
}

# Split "--dir D" from the positional arguments of a fault command.
split_args() {
    POS=()
    ARG_DIR=""
    while (($#)); do
        case $1 in
        --dir) ARG_DIR=${2:?--dir needs a value}; shift 2 ;;
        --) shift; POS+=("$@"); break ;;
        *) POS+=("$1"); shift ;;
        esac
    done
    [[ -n $ARG_DIR ]] || die "--dir is required"
}

cmd_link() {
    local updown=$1
    shift
    split_args "$@"
    require_up "$ARG_DIR"
    link_arg "${POS[0]-}"
    ip -n "$S_server_ns" link set "srv${POS[0]}" "$updown"
    local v="S_link${POS[0]}_server_addr"
    say "link ${POS[0]} (${!v}) is $updown on the server side"
}

# drop K / undrop K: a silent loss without carrier loss. tbf with a one-byte bucket and queue
# discards every packet srvK sends; undrop puts back the link's own shaping (or none).
cmd_drop() {
    local mode=$1
    shift
    split_args "$@"
    require_up "$ARG_DIR"
    link_arg "${POS[0]-}"
    local k=${POS[0]} v rate burst
    if [[ $mode == on ]]; then
        tc -n "$S_server_ns" qdisc replace dev "srv$k" root tbf rate 8bit burst 1 limit 1
        say "link $k: the server side now drops everything it sends"
        return
    fi
    v="S_link${k}_rate_mbit"
    rate=${!v:-0}
    if ((rate > 0)); then
        burst=$((rate * 250))
        ((burst >= 65536)) || burst=65536
        tc -n "$S_server_ns" qdisc replace dev "srv$k" root tbf rate "${rate}mbit" burst "$burst" latency "$TBF_LATENCY"
    else
        tc -n "$S_server_ns" qdisc del dev "srv$k" root 2>/dev/null || true
    fi
    say "link $k: the server side sends again"
}

cmd_cut() {
    split_args "$@"
    require_up "$ARG_DIR"
    local filter="( sport = :445 )" what="all links"
    if ((${#POS[@]})); then
        link_arg "${POS[0]}"
        local v="S_link${POS[0]}_server_addr" w="S_link${POS[0]}_client_addr" addr caddr
        addr=${!v}
        caddr=${!w}
        # Everything that travels over link K: connections to its server address, and those
        # from its client address (to the service address, or bound across links).
        filter="( sport = :445 and ( src $addr or dst $caddr ) )"
        what="link ${POS[0]} ($addr, or from $caddr)"
    fi
    local killed
    # ss -K destroys matching sockets (CONFIG_INET_DIAG_DESTROY): the peer gets a RST.
    killed=$(ip netns exec "$S_server_ns" ss -K -t -n -H state established "$filter" | grep -c . || true)
    say "cut $killed TCP connection(s) to port 445 on $what"
    echo "cut=$killed"
}

cmd_restart() {
    split_args "$@"
    require_up "$ARG_DIR"
    local old=$S_smbd_pid
    stop_smbd
    start_server
    say "smbd restarted: pid $old -> $S_smbd_pid"
    echo "smbd_pid=$S_smbd_pid"
}

# reload_smbd - make smbd re-read its config, and return only once it has: the parent
# handles reload-config in its message handler, so the answer to a later ping (same message
# socket, handled in order) means the reload is done and new connections get the new config.
reload_smbd() {
    if ! samba_run smbcontrol -s "$(samba_conf)" smbd reload-config >/dev/null 2>&1; then
        say "smbcontrol failed; sending SIGHUP to smbd $S_smbd_pid"
        kill -HUP "$S_smbd_pid"
    fi
    if ! samba_run smbcontrol -s "$(samba_conf)" -t 10 smbd ping 2>/dev/null | grep -q PONG; then
        say "warning: smbd $S_smbd_pid did not answer a ping after the reload"
    fi
}

cmd_reload() {
    split_args "$@"
    require_up "$ARG_DIR"
    reload_smbd
    say "smbd reloaded its configuration"
}

cmd_set_interfaces() {
    split_args "$@"
    require_up "$ARG_DIR"
    ((${#POS[@]})) || die "set-interfaces needs at least one SPEC (or links, service, both)"
    local s
    if ((${#POS[@]} == 1)); then
        case ${POS[0]} in
        links | service | both)
            [[ ${POS[0]} == links || -n ${S_service_addr-} ]] ||
                die "set-interfaces ${POS[0]}: this testbed has no service address (up --service-addr)"
            mapfile -t POS < <(advertise_specs "${POS[0]}")
            ;;
        esac
    fi
    for s in "${POS[@]}"; do
        valid_spec "$s" || die "bad interface spec '$s'"
    done
    set_interfaces_in_conf "${POS[@]}"
    reload_smbd
    say "interfaces = $(interfaces_line "${POS[@]}") (reloaded; smbd listens on every address anyway)"
    echo "interfaces=$S_interfaces"
}

# exec [--server] [--root] -- CMD: in trixie mode Samba's programs on the server side come
# from the root (they must match the server); --root takes any program from the root, also
# on the client side (the run dir is /smbtb there).
cmd_exec() {
    split_args "$@"
    require_up "$ARG_DIR"
    local ns=$S_client_ns from=host
    while [[ ${POS[0]-} == --server || ${POS[0]-} == --root ]]; do
        case ${POS[0]} in
        --server) ns=$S_server_ns ;;
        --root)
            [[ ${S_samba-system} == trixie ]] || die "exec --root: this testbed has no root (up --samba trixie)"
            from=root
            ;;
        esac
        POS=("${POS[@]:1}")
    done
    ((${#POS[@]})) || die "exec needs a command after --"
    if [[ $ns == "$S_server_ns" ]] && is_root_program "${POS[0]}"; then from=$(samba_from); fi
    run_prefix "$ns" "$from"
    exec "${RUN_PREFIX[@]}" "${POS[@]}"
}

# build-root trixie - build the shared root if it is missing or incomplete (what the first
# `up --samba trixie` would do), e.g. ahead of a test run; prints where it is and its smbd.
cmd_build_root() {
    [[ ${1-} == trixie ]] || die "build-root: the only root is 'trixie'"
    ensure_trixie_root
    echo "samba_root=$TRIXIE_ROOT"
    echo "samba_version=$(cat "$TRIXIE_ROOT/$ROOT_MARKER")"
    echo "samba_root_built=$ROOT_BUILT"
    echo "samba_root_seconds=$ROOT_BUILD_SECONDS"
}

cmd_smbstatus() {
    split_args "$@"
    require_up "$ARG_DIR"
    run_prefix "$S_server_ns" "$(samba_from)"
    exec "${RUN_PREFIX[@]}" smbstatus -s "$(samba_conf)" "${POS[@]}"
}

# ----------------------------------------------------------------------------- main

main() {
    (($#)) || usage
    local cmd=$1
    shift
    case $cmd in
    -h | --help | help) usage ;;
    esac
    # Preconditions for every command, before anything is touched.
    need_root
    need_tools "${SERVER_TOOLS[@]}"
    case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    status) cmd_status "$@" ;;
    link-down) cmd_link down "$@" ;;
    link-up) cmd_link up "$@" ;;
    cut) cmd_cut "$@" ;;
    drop) cmd_drop on "$@" ;;
    undrop) cmd_drop off "$@" ;;
    restart) cmd_restart "$@" ;;
    reload) cmd_reload "$@" ;;
    set-interfaces) cmd_set_interfaces "$@" ;;
    exec) cmd_exec "$@" ;;
    smbstatus) cmd_smbstatus "$@" ;;
    gc) cmd_gc ;;
    build-root) cmd_build_root "$@" ;;
    *) say "unknown command '$cmd'"; usage ;;
    esac
}

main "$@"
