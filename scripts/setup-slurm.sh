#!/usr/bin/env bash
# A real single-node Slurm on this machine, for the tests of `grader batch --backend slurm`.
#
# Idempotent and fast when everything is up. Steps, each skipped when already done:
#   1. Debian's slurm-wlm and munge (only as root with apt-get)
#   2. munged running, with the key the package made
#   3. /etc/slurm/slurm.conf for this host: one node with its CPUs and memory, in one partition;
#      with NVIDIA GPUs a gpu gres over their device files, without them a count-only stand-in
#      (SLURM_STANDIN_GPUS, default 2) so that --gpus-per-task is scheduled as on a GPU cluster
#   4. slurmctld and slurmd running, the node idle
#
# Where a step cannot run (not root, no apt-get), it says so and exits 0: the Slurm tests then skip
# with a reason. Set SETUP_SLURM_STRICT=1 to make that an error. A slurm.conf not written by this
# script is left alone (a real cluster's).
set -euo pipefail
cd "$(dirname "$0")/.."

CONF=/etc/slurm/slurm.conf
GRES=/etc/slurm/gres.conf
STAMP="# written by triton-kernels scripts/setup-slurm.sh"
LOG_DIR="${SLURM_LOG_DIR:-/var/log/slurm}"
STANDIN_GPUS="${SLURM_STANDIN_GPUS:-2}"

say() { printf 'setup-slurm: %s\n' "$*"; }
give_up() {
  say "$*"
  if [ "${SETUP_SLURM_STRICT:-0}" = "1" ]; then exit 1; fi
  say "Slurm tests will be skipped"
  exit 0
}
started=$(date +%s)

# 1. packages ------------------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1 || ! command -v sbatch >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    give_up "Slurm is not installed, and cannot be (needs root and apt-get)"
  fi
  say "installing slurm-wlm and munge"
  export DEBIAN_FRONTEND=noninteractive
  apt_log=$(mktemp)
  { apt-get update -q && NEEDRESTART_SUSPEND=1 apt-get install -y -q --no-install-recommends slurm-wlm munge; } >"$apt_log" 2>&1 \
    || { tail -n 20 "$apt_log" >&2; give_up "apt-get could not install slurm-wlm and munge"; }
  rm -f "$apt_log"
fi
[ "$(id -u)" = 0 ] || {
  sinfo -h >/dev/null 2>&1 && { say "Slurm answers (not root: nothing else to do)"; exit 0; }
  give_up "Slurm does not answer, and only root can start its daemons here"
}

# 2. munge ---------------------------------------------------------------------------------------
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  if [ ! -s /etc/munge/munge.key ]; then
    say "making a munge key"
    mungekey --create --force >/dev/null 2>&1 || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
  fi
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  say "starting munged"
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 1 20); do
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then break; fi
    sleep 0.5
  done
  munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || give_up "munged does not answer"
fi

# 3. slurm.conf ----------------------------------------------------------------------------------
host=$(hostname -s)
cpus=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true); fi
if [ "$gpus" -gt 0 ]; then
  gres_line="Name=gpu File=/dev/nvidia[0-$((gpus - 1))]"
  node_gres="Gres=gpu:$gpus"
else
  # No GPU: stand-in device files (copies of /dev/null, which Slurm accepts as GPU devices: it
  # refuses a gpu gres without character devices) so --gpus-per-task is scheduled for real.
  standin=/run/slurm-standin-gpus
  mkdir -p "$standin"
  for i in $(seq 0 $((STANDIN_GPUS - 1))); do
    [ -c "$standin/gpu$i" ] || mknod "$standin/gpu$i" c 1 3
  done
  gres_line="Name=gpu File=$standin/gpu[0-$((STANDIN_GPUS - 1))]"
  node_gres="Gres=gpu:$STANDIN_GPUS"
fi
if [ -f "$CONF" ] && ! head -n 1 "$CONF" | grep -qF "$STAMP"; then
  say "$CONF exists and is not ours: using it as it is"
else
  wanted=$(cat <<EOF
$STAMP
# One node, this host; no accounting database, no cgroups (a container may not have them).
ClusterName=grader-ci
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
GresTypes=gpu
ReturnToService=2
JobRequeue=1
MinJobAge=600
SlurmdTimeout=60
KillWait=10
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
NodeName=$host CPUs=$cpus RealMemory=$mem_mb $node_gres State=UNKNOWN
PartitionName=grading Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
)
  if [ "$(cat "$CONF" 2>/dev/null || true)" != "$wanted" ] || [ "$(cat "$GRES" 2>/dev/null || true)" != "$gres_line" ]; then
    say "writing $CONF ($host: $cpus CPUs, ${mem_mb} MB, $node_gres)"
    mkdir -p /etc/slurm
    printf '%s\n' "$wanted" >"$CONF"
    printf '%s\n' "$gres_line" >"$GRES"
    # a changed configuration needs the daemons restarted
    for pidfile in /run/slurmd.pid /run/slurmctld.pid; do
      if [ -s "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
    done
    sleep 1
  fi
fi

# 4. daemons -------------------------------------------------------------------------------------
mkdir -p /var/spool/slurmctld /var/spool/slurmd "$LOG_DIR"
if ! scontrol ping 2>/dev/null | grep -q "is UP"; then
  say "starting slurmctld (log: $LOG_DIR/slurmctld.log)"
  slurmctld
  for _ in $(seq 1 30); do
    if scontrol ping 2>/dev/null | grep -q "is UP"; then break; fi
    sleep 0.5
  done
  scontrol ping 2>/dev/null | grep -q "is UP" || { tail -n 20 "$LOG_DIR/slurmctld.log" >&2 || true; give_up "slurmctld does not answer"; }
fi
if ! { [ -s /run/slurmd.pid ] && kill -0 "$(cat /run/slurmd.pid)" 2>/dev/null; }; then
  say "starting slurmd (log: $LOG_DIR/slurmd.log)"
  slurmd
fi
state=""
for _ in $(seq 1 60); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null | head -n 1)
  case "$state" in
    idle*|mixed*|allocated*|completing*) break ;;
    down*|drain*|drained*|inval*) scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  sleep 0.5
done
case "$state" in
  idle*|mixed*|allocated*|completing*) ;;
  *) tail -n 20 "$LOG_DIR/slurmd.log" >&2 || true; give_up "the node $host is not ready (state: ${state:-none})" ;;
esac
say "Slurm is up: node $host $state, partition grading; done in $(( $(date +%s) - started )) s"
