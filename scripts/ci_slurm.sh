#!/usr/bin/env bash
# Start a real single-node Slurm (munge + slurmctld + slurmd) without systemd, for the campaign
# executor's tests. Usage: source scripts/ci_slurm.sh start|stop   (exports SLURM_CONF)
set -uo pipefail
ROOT=${TRACER_SLURM_DIR:-/tmp/tracer-slurm}
HOST=$(hostname -s)
start() {
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null 2>&1 || \
      { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null; }
  fi
  mkdir -p $ROOT/key $ROOT/run $ROOT/state $ROOT/spool $ROOT/log
  chmod 0700 $ROOT/key
  [ -f $ROOT/key/munge.key ] || mungekey -c -k $ROOT/key/munge.key
  munged --key-file=$ROOT/key/munge.key -S $ROOT/run/munge.socket --pid-file=$ROOT/run/munged.pid \
    --log-file=$ROOT/log/munged.log --seed-file=$ROOT/run/munge.seed -f 2>/dev/null || true
  cat > $ROOT/slurm.conf <<CONF
ClusterName=tracer
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$ROOT/run/munge.socket
StateSaveLocation=$ROOT/state
SlurmdSpoolDir=$ROOT/spool
SlurmctldPidFile=$ROOT/run/slurmctld.pid
SlurmdPidFile=$ROOT/run/slurmd.pid
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdLogFile=$ROOT/log/slurmd.log
SlurmctldPort=${TRACER_SLURMCTLD_PORT:-16817}
SlurmdPort=${TRACER_SLURMD_PORT:-16818}
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$ROOT/slurm.conf
  slurmctld -f $SLURM_CONF -i
  slurmd -f $SLURM_CONF
  for _ in $(seq 1 30); do
    sinfo -h -o %t 2>/dev/null | grep -q idle && break
    sleep 1
  done
  sinfo
}
stop() {
  for p in slurmd slurmctld munged; do
    [ -f $ROOT/run/$p.pid ] && kill "$(cat $ROOT/run/$p.pid)" 2>/dev/null
  done
  return 0
}
case "${1:-start}" in
  start) start ;;
  stop) stop ;;
esac
