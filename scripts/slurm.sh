#!/usr/bin/env bash
# A real one-node Slurm for development, tests and CI (issue 39).
#
#   eval "$(bash scripts/slurm.sh start)"   # installs Debian's slurm-wlm, slurmdbd, munge and mariadb-server
#                                           # if missing (as root), starts munged, MariaDB, slurmdbd, slurmctld
#                                           # and slurmd from configs in a fresh temporary folder, waits until
#                                           # sinfo shows the node idle, and prints only `export ...` lines
#   sinfo; sbatch --wrap "sleep 5"; sacct; metapilot collect --cluster "$METAPILOT_SLURM_CLUSTER"
#   bash scripts/slurm.sh stop [DIR]        # cancels the jobs, then stops every process start started, by pid
#                                           # (munged included; a start still running is ended first, so it
#                                           # launches nothing more; a caller that goes away or a Ctrl-C does
#                                           # not cut the stop short: it runs on in a session of its own)
#   bash scripts/slurm.sh status [DIR]      # which of them are alive
#
# Everything lives in DIR (mktemp -d under ${TMPDIR:-/tmp}): configs, the munge key and socket, the
# MariaDB data, Slurm's state and spool, logs and `pids`. Ports are chosen free at start, so a second
# cluster can run beside the first. The node declares 64 CPUs (SlurmdParameters=config_overrides)
# whatever the machine has; two partitions on it: `debug` (PriorityTier=1, default) and `high`
# (PriorityTier=2). priority/multifactor with non-zero age, fair-share, partition and QOS weights (what
# a site has), and short fixed bf_interval / sched_interval / sched_min_interval so that the timing of
# Slurm's own scheduling passes is known in tests. Logs of the daemons: DIR/log/.
# Environment: METAPILOT_SLURM_CLUSTER (default mini), METAPILOT_SLURM_CPUS (default 64: each node's CPUs),
# METAPILOT_SLURM_NODES (default 1: the node is this host; N > 1: nodes n1..nN, one slurmd each, all on this
# host on ports of their own, so that reservations and the node choice of a cluster can be watched),
# METAPILOT_SLURM_NO_INSTALL=1 (fail instead of installing), METAPILOT_SLURM_CONF_EXTRA (lines added to
# slurm.conf, e.g. PriorityFlags=NO_FAIR_TREE).
set -euo pipefail

CLUSTER="${METAPILOT_SLURM_CLUSTER:-mini}"
CPUS="${METAPILOT_SLURM_CPUS:-64}"
NODES="${METAPILOT_SLURM_NODES:-1}"
PACKAGES=(slurm-wlm slurmdbd munge mariadb-server)
NEEDED=(slurmctld slurmd slurmdbd munged mariadbd mariadb-install-db sinfo sbatch sacct scontrol sacctmgr)

say() { echo "slurm.sh: $*" >&2 || true; }  # a closed stderr (the caller went away) must not stop a stop
die() { say "$*"; exit 1; }

missing_tools() {
    local t out=()
    for t in "${NEEDED[@]}"; do
        PATH="$PATH:/usr/sbin:/sbin" command -v "$t" >/dev/null 2>&1 || out+=("$t")
    done
    echo "${out[@]:-}"
}

install_packages() {
    local miss
    miss="$(missing_tools)"
    [ -z "$miss" ] && return 0
    [ "${METAPILOT_SLURM_NO_INSTALL:-0}" = 1 ] && die "missing: $miss (METAPILOT_SLURM_NO_INSTALL=1)"
    [ "$(id -u)" = 0 ] || die "missing: $miss; install as root: apt-get install ${PACKAGES[*]}"
    command -v apt-get >/dev/null || die "missing: $miss, and no apt-get to install ${PACKAGES[*]}"
    say "installing ${PACKAGES[*]} (missing: $miss)"
    # policy-rc.d: the packages' own services must not start (we start ours, in DIR)
    local prc=/usr/sbin/policy-rc.d made=0
    if [ ! -e "$prc" ]; then printf '#!/bin/sh\nexit 101\n' > "$prc"; chmod 755 "$prc"; made=1; fi
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${PACKAGES[@]}"; } >&2 || { [ $made = 1 ] && rm -f "$prc"; die "apt-get install ${PACKAGES[*]} failed"; }
    [ $made = 1 ] && rm -f "$prc"
    miss="$(missing_tools)"
    [ -z "$miss" ] || die "still missing after install: $miss"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {
    local p i lo=20000 span=30000 eph
    # below the kernel's range of ports for outgoing connections where it leaves room: there, a client's
    # connection (Prefect's, Dask's) cannot take the port between this check and the daemon's bind
    eph=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 0)
    if [ "${eph:-0}" -gt 15000 ]; then lo=10000; span=$(( eph - 10000 )); fi
    for i in $(seq 1 200); do
        p=$(( lo + RANDOM % span ))
        if port_free "$p" && port_free $((p)) && ! grep -qw "$p" "$DIR/ports" 2>/dev/null; then
            echo "$p" >> "$DIR/ports"; echo "$p"; return 0
        fi
    done
    die "no free port found"
}

wait_for() {  # wait_for SECONDS WHAT CMD...: until CMD succeeds
    local secs=$1 what=$2; shift 2
    local end=$(( $(date +%s) + secs ))
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.3
    done
    say "$what ready"
}

# start NAME CMD...: run a daemon in the foreground of its own session, marked as ours, pid recorded
launch() {
    local name=$1; shift
    [ -e "$DIR/stopping" ] && die "stop was asked: $name not started"
    METAPILOT_SLURM_OWNER="$DIR" setsid "$@" >"$DIR/log/$name.out" 2>&1 </dev/null &
    echo "$name $!" >> "$DIR/pids"
}

add_cluster() {  # sacctmgr says "already exists" with a non-zero status on a second try
    local out
    out="$(sacctmgr -i add cluster "$CLUSTER" 2>&1)" && return 0
    echo "$out" >> "$DIR/log/sacctmgr.log"
    grep -q "already exists" <<< "$out"
}

pid_of() { awk -v n="$1" '$1 == n {print $2}' "$DIR/pids" 2>/dev/null | tail -1; }

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

interrupted_start() {  # a stop is ending this start (it stops what was launched), or the user pressed Ctrl-C
    [ -e "$DIR/stopping" ] && exit 1
    fail_start "start interrupted"
}

fail_start() {
    say "$1"
    local f
    for f in "$DIR"/log/*; do [ -s "$f" ] && { say "--- tail of $f"; tail -n 15 "$f" >&2; }; done
    stop_dir "$DIR" >&2 || true
    exit 1
}

write_configs() {
    local host munge_sock="$DIR/munge/munge.socket"
    host="$(hostname -s)"
    cat > "$DIR/slurmdbd.conf" <<EOF
# written by scripts/slurm.sh (MetaPilot tests)
AuthType=auth/munge
AuthInfo=socket=$munge_sock
DbdHost=$host
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/run/slurmdbd.pid
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
    chmod 600 "$DIR/slurmdbd.conf"
    cat > "$DIR/slurm.conf" <<EOF
# written by scripts/slurm.sh (MetaPilot tests): a one-node cluster on localhost
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$munge_sock
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd$( [ "$NODES" -gt 1 ] && echo "-%n").log
SlurmctldDebug=info
SlurmdDebug=info
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SwitchType=switch/none
ReturnToService=2
InactiveLimit=0
KillWait=2
MinJobAge=600
SlurmctldTimeout=60
SlurmdTimeout=300
Waittime=0
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$munge_sock
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2,sched_min_interval=100000,bf_window=1440
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
PreemptType=preempt/none
PriorityType=priority/multifactor
PriorityDecayHalfLife=7-0
PriorityMaxAge=7-0
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityWeightJobSize=0
PriorityWeightPartition=1000
PriorityWeightQOS=1000
SlurmdParameters=config_overrides
$(node_lines)
PartitionName=debug Nodes=$(node_set) Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=high Nodes=$(node_set) MaxTime=INFINITE State=UP PriorityTier=2
EOF
    if [ -n "${METAPILOT_SLURM_CONF_EXTRA:-}" ]; then
        printf '%s\n' "$METAPILOT_SLURM_CONF_EXTRA" >> "$DIR/slurm.conf"
    fi
}

node_set() {  # the nodes, as slurm.conf names them
    if [ "$NODES" -gt 1 ]; then echo "n[1-$NODES]"; else echo "$host"; fi
}

node_lines() {  # one slurmd a node; several on this host each listen on a port of their own
    local i
    if [ "$NODES" -le 1 ]; then
        echo "NodeName=$host NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=64000 State=UNKNOWN"
        return
    fi
    for i in $(seq 1 "$NODES"); do
        echo "NodeName=n$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$(free_port) CPUs=$CPUS RealMemory=64000 State=UNKNOWN"
    done
}

start() {
    [[ "$NODES" =~ ^[1-9][0-9]*$ ]] || die "METAPILOT_SLURM_NODES must be a whole number of nodes, not '$NODES'"
    install_packages
    PATH="$PATH:/usr/sbin:/sbin"
    DIR="$(mktemp -d "${TMPDIR:-/tmp}/metapilot-slurm.XXXXXX")"
    chmod 755 "$DIR"
    mkdir -p "$DIR"/{log,run,state,spool,munge,mysql}
    chmod 755 "$DIR/munge"
    : > "$DIR/pids"
    echo "$$" > "$DIR/starting"  # a stop while this runs ends it first (stop_starter): nothing is launched after
    trap interrupted_start INT TERM HUP
    export SLURM_CONF="$DIR/slurm.conf"
    DB_PORT=$(free_port); DBD_PORT=$(free_port); CTLD_PORT=$(free_port); SLURMD_PORT=$(free_port)
    DB_PASS="mp$RANDOM$RANDOM"
    write_configs

    # munge: our own key and socket
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge/munge.key"
    launch munged munged --foreground --force --key-file="$DIR/munge/munge.key" \
        --socket="$DIR/munge/munge.socket" --pid-file="$DIR/run/munged.pid" \
        --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
    wait_for 20 munged test -S "$DIR/munge/munge.socket" || fail_start "munged did not start"

    # MariaDB: a private data folder, TCP on 127.0.0.1 only
    METAPILOT_SLURM_OWNER="$DIR" mariadb-install-db --no-defaults --datadir="$DIR/mysql" --user=root --auth-root-authentication-method=normal \
        --skip-test-db > "$DIR/log/mariadb-install.log" 2>&1 || fail_start "mariadb-install-db failed"
    launch mariadbd mariadbd --no-defaults --datadir="$DIR/mysql" --socket="$DIR/run/mysql.sock" --port="$DB_PORT" \
        --bind-address=127.0.0.1 --skip-name-resolve --user=root --pid-file="$DIR/run/mariadbd.pid" \
        --log-error="$DIR/log/mariadb.log" --innodb-buffer-pool-size=64M --innodb-log-file-size=64M \
        --innodb-lock-wait-timeout=900
    wait_for 60 MariaDB mariadb-admin --no-defaults --socket="$DIR/run/mysql.sock" -uroot ping \
        || fail_start "MariaDB did not start"
    mariadb --no-defaults --socket="$DIR/run/mysql.sock" -uroot -e \
        "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" \
        || fail_start "could not create the slurm database user"

    launch slurmdbd slurmdbd -D  # reads slurmdbd.conf beside $SLURM_CONF
    wait_for 60 slurmdbd bash -c "exec 3<>/dev/tcp/127.0.0.1/$DBD_PORT" || fail_start "slurmdbd did not start"
    wait_for 30 "cluster $CLUSTER in slurmdbd" add_cluster \
        || fail_start "sacctmgr could not add the cluster"

    launch slurmctld slurmctld -D -i -f "$DIR/slurm.conf"
    wait_for 60 slurmctld scontrol ping || fail_start "slurmctld did not start"
    if [ "$NODES" -gt 1 ]; then
        local i
        for i in $(seq 1 "$NODES"); do launch "slurmd-n$i" slurmd -D -N "n$i" -f "$DIR/slurm.conf"; done
    else
        launch slurmd slurmd -D -f "$DIR/slurm.conf"
    fi
    wait_for 90 "node idle" bash -c '[ "$(sinfo -h -N -o %T | sort -u)" = idle ]' \
        || fail_start "the node did not become idle (sinfo: $(sinfo -h -N -o '%N %T %E' 2>&1 | head -3))"
    trap - INT TERM HUP
    rm -f "$DIR/starting"
    echo "export SLURM_CONF=$DIR/slurm.conf"
    echo "export METAPILOT_SLURM_DIR=$DIR"
    echo "export METAPILOT_SLURM_CLUSTER=$CLUSTER"
}

stop_pid() {  # TERM, wait up to 10 s, then KILL
    local pid=$1 i
    alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do alive "$pid" || return 0; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
    for i in $(seq 1 25); do alive "$pid" || return 0; sleep 0.2; done
}

marked_pids() {  # what our daemons forked: slurmstepd and job processes keep slurmd's session; others carry our mark
    local d=$1 p sids
    sids=" $(awk '{print $2}' "$d/pids" | tr '\n' ' ') "
    ps -eo pid=,sid= | while read -r p s; do
        [ "$p" = "$$" ] && continue
        case "$sids" in *" $s "*) echo "$p"; continue ;; esac
        { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | grep -qx "METAPILOT_SLURM_OWNER=$d" && echo "$p"
    done
    return 0
}

stop_starter() {  # a start still running in DIR: end it before stopping what it launched
    local d=$1 pid
    pid="$(cat "$d/starting" 2>/dev/null || true)"
    [ -n "$pid" ] && [ "$pid" != "$$" ] && alive "$pid" || return 0
    grep -qa "slurm.sh" "/proc/$pid/cmdline" 2>/dev/null || return 0  # not start any more (the pid was reused)
    say "start ($pid) is still running: ending it first"
    stop_pid "$pid"
}

stop_dir() {
    local d=$1 name pid
    [ -f "$d/pids" ] || die "$d is not a folder scripts/slurm.sh start made (no pids file)"
    touch "$d/stopping"  # start launches nothing after this
    stop_starter "$d"
    # jobs first, while slurmctld and slurmd can still end them cleanly
    if [ -f "$d/slurm.conf" ] && alive "$(DIR=$d pid_of slurmctld)"; then
        local ids
        ids="$(SLURM_CONF=$d/slurm.conf squeue -h -o %i 2>/dev/null | tr '\n' ' ')" || true
        if [ -n "${ids// /}" ]; then
            # shellcheck disable=SC2086
            SLURM_CONF=$d/slurm.conf scancel $ids 2>/dev/null || true
            for _ in $(seq 1 50); do
                [ -z "$(SLURM_CONF=$d/slurm.conf squeue -h -t R,CG,S -o %i 2>/dev/null)" ] && break
                sleep 0.2
            done
        fi
    fi
    for name in $(awk '$1 ~ /^slurmd-/ {print $1}' "$d/pids") slurmd slurmctld slurmdbd mariadbd munged; do
        pid="$(DIR=$d pid_of "$name")"
        local t0=$SECONDS
        [ -n "$pid" ] && stop_pid "$pid"
        say "$name stopped ($((SECONDS - t0)) s)"
    done
    for pid in $(marked_pids "$d"); do stop_pid "$pid"; done
    local left=""
    while read -r name pid; do alive "$pid" && left="$left $name($pid)"; done < "$d/pids"
    [ -z "$(marked_pids "$d")" ] || left="$left $(marked_pids "$d" | tr '\n' ' ')"
    [ -z "$left" ] || die "still running after stop:$left"
    touch "$d/stopped"
    say "stopped (logs in $d/log)"
}

status_dir() {
    local d=$1 name pid
    while read -r name pid; do
        if alive "$pid"; then echo "$name $pid running"; else echo "$name $pid stopped"; fi
    done < "$d/pids"
}

dir_arg() {
    local d="${1:-${METAPILOT_SLURM_DIR:-}}"
    [ -z "$d" ] && [ -n "${SLURM_CONF:-}" ] && d="$(dirname "$SLURM_CONF")"
    [ -n "$d" ] || die "which cluster? give its folder, or eval the start's exports (METAPILOT_SLURM_DIR)"
    echo "$d"
}

case "${1:-}" in
    start) start ;;
    stop)
        # Ignored from here on (and in the re-executed shell): a Ctrl-C, the caller's end, its closed pipes.
        trap '' PIPE INT TERM HUP
        d="$(dir_arg "${2:-}")"
        if [ -z "${METAPILOT_SLURM_STOPPING:-}" ] && command -v setsid >/dev/null; then
            # in a session of its own, forked: killing the caller (or its process group) leaves it running
            METAPILOT_SLURM_STOPPING=1 exec setsid --fork --wait bash "$0" stop "$d"
        fi
        stop_dir "$d" ;;
    status) status_dir "$(dir_arg "${2:-}")" ;;
    check) m="$(missing_tools)"; [ -z "$m" ] && echo "installed" || { echo "missing: $m"; exit 1; } ;;
    *) echo "usage: bash scripts/slurm.sh start|stop [DIR]|status [DIR]|check" >&2; exit 2 ;;
esac
