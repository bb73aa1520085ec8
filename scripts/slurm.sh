#!/usr/bin/env bash
# A one-node Slurm on this machine, for the tests that train the book through `--cluster slurm`
# (tests/book/pipeline/test_slurm.py) and for trying that path by hand:
#
#   sudo bash scripts/slurm.sh start    # install (Debian's slurm-wlm and munge), configure, start
#   sudo bash scripts/slurm.sh stop     # stop the daemons that `start` started, nothing else
#   bash scripts/slurm.sh status        # exit status 0 when the node takes jobs
#
# `start` is idempotent: a Slurm already taking jobs is left as it is, a daemon already running is
# not started twice. It writes /etc/slurm/slurm.conf only where none exists or where it wrote the
# one there (its first line says so): a node line for `hostname -s` with the cores and memory
# that `slurmd -C` finds, one partition, no accounting, no cgroups (munged, slurmctld and slurmd
# run as plain daemons; no systemd needed). What it started is listed in $STATE/started.
set -euo pipefail

STATE=/run/gtalib-slurm
CONF=/etc/slurm/slurm.conf
MARK="# written by gtalib's scripts/slurm.sh; \`scripts/slurm.sh start\` rewrites it"
LOG=/tmp/gtalib-slurm.log   # apt's and the daemons' start-up output

say() { echo "slurm.sh: $*"; }
die() { echo "slurm.sh: error: $*" >&2; exit 1; }

ready() {  # the node is up and takes jobs
  command -v sinfo >/dev/null 2>&1 \
    && sinfo -h -N -o '%T' 2>/dev/null | grep -Eq '^(idle|mixed|allocated|completing)'
}

need_root() {
  [ "$(id -u)" = 0 ] || die "$1 needs root (run: sudo bash scripts/slurm.sh ${ACTION})"
}

install() {
  command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 \
    && command -v munged >/dev/null 2>&1 && return
  need_root "installing slurm-wlm and munge"
  command -v apt-get >/dev/null 2>&1 || die "no apt-get here: install slurm-wlm and munge by hand"
  say "installing Debian's slurm-wlm and munge (log: $LOG)"
  export DEBIAN_FRONTEND=noninteractive
  timeout 600 apt-get install -y -q slurm-wlm munge >>"$LOG" 2>&1 \
    || { timeout 300 apt-get update -q >>"$LOG" 2>&1 \
         && timeout 600 apt-get install -y -q slurm-wlm munge >>"$LOG" 2>&1; } \
    || die "apt-get could not install slurm-wlm and munge (see $LOG)"
}

started() { echo "$1" >>"$STATE/started"; }

start_munge() {
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then return; fi
  if [ ! -s /etc/munge/munge.key ]; then  # Debian's package usually creates it
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- /usr/sbin/munged >>"$LOG" 2>&1 || die "munged did not start (see $LOG)"
  started munged
  for _ in $(seq 50); do
    munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return
    sleep 0.2
  done
  die "munged started but does not answer (see $LOG)"
}

configure() {
  if [ -f "$CONF" ] && ! head -1 "$CONF" | grep -qF "$MARK"; then
    die "$CONF exists and was not written by this script; not touching it"
  fi
  local host node
  host=$(hostname -s)
  # NodeName=<host> CPUs=... Boards=... SocketsPerBoard=... CoresPerSocket=... ThreadsPerCore=...
  # RealMemory=<MB>: what slurmd sees, so that it never finds the node smaller than configured
  node=$(slurmd -C | grep '^NodeName=')
  [ -n "$node" ] || die "slurmd -C printed no node line"
  mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm "$STATE"
  cat >"$CONF.tmp" <<EOF
$MARK
ClusterName=gtalib
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
# processes tracked by their parents, no cgroups: nothing here is shared with other users
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
# cores and memory are what jobs ask for (dask-jobqueue writes --cpus-per-task and --mem)
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
KillWait=5
$node
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$CONF.tmp" "$CONF"
}

start_daemon() {  # start_daemon NAME: unless one runs already
  pgrep -x "$1" >/dev/null && return
  "$1" >>"$LOG" 2>&1 || die "$1 did not start (see $LOG and /var/log/slurm/$1.log)"
  started "$1"
}

start() {
  if ready; then say "a Slurm already takes jobs here: $(sinfo -h -N -o '%N %c CPUs %m MB %T')"; return; fi
  need_root "starting Slurm"
  install
  mkdir -p "$STATE"
  start_munge
  pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null || configure
  start_daemon slurmctld
  start_daemon slurmd
  local host
  host=$(hostname -s)
  for i in $(seq 120); do
    ready && break
    # a node that an earlier, unclean stop left down is resumed (ReturnToService=2 does it too)
    [ "$i" = 20 ] && scontrol update nodename="$host" state=resume >>"$LOG" 2>&1 || true
    sleep 0.5
  done
  ready || die "the node did not come up (sinfo: $(sinfo -h -N -o '%N %T %E' 2>&1 | tr '\n' ' '); see /var/log/slurm/)"
  say "one-node Slurm up: $(sinfo -h -N -o '%N %c CPUs %m MB %T')"
}

stop() {
  [ -f "$STATE/started" ] || { say "nothing started by this script is running"; return; }
  need_root "stopping Slurm"
  local name pid
  for name in slurmd slurmctld munged; do
    grep -qx "$name" "$STATE/started" || continue
    case $name in
      munged) pid=$(cat /run/munge/munged.pid 2>/dev/null || pgrep -x munged || true) ;;
      *) pid=$(cat "$STATE/$name.pid" 2>/dev/null || pgrep -x "$name" || true) ;;
    esac
    if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      say "stopped $name ($pid)"
    fi
  done
  rm -f "$STATE/started"
}

ACTION=${1:-}
case $ACTION in
  start) start ;;
  stop) stop ;;
  status)
    if ready; then sinfo -h -N -o '%N %c CPUs %m MB %T'; else say "no Slurm node takes jobs here"; exit 1; fi ;;
  *) echo "usage: bash scripts/slurm.sh start|stop|status" >&2; exit 2 ;;
esac
