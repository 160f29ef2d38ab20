#!/usr/bin/env bash
# A throwaway, single-node Ceph RADOS Gateway bound to 127.0.0.1: a real S3 server for tests and
# benchmarks (never a mock: it checks presigned signatures, expiry, methods and Content-MD5).
#
#   scripts/s3-local.sh install          install the Ceph packages (Debian) if missing, and nothing else
#   scripts/s3-local.sh start DIR PORT   install if missing, start, create user + bucket, print env
#   scripts/s3-local.sh env   DIR PORT   print the environment variables of that instance (incl. the
#                                        standard AWS_ENDPOINT_URL, and s5cmd's S3_ENDPOINT_URL, so serve,
#                                        the AWS CLI, boto3 and s5cmd all find it)
#   scripts/s3-local.sh stop  DIR        stop this instance's daemons (by PID, never by name)
#   scripts/s3-local.sh stop-gateway DIR / start-gateway DIR
#                                        stop or restart only the S3 gateway (an outage: the data stays)
#
# Everything of an instance (config, monitor store, run dir, pid files, logs) lives under DIR, so two
# instances can run side by side given distinct DIRs and PORTs. Settings that matter are explained
# in ../shared/design/LOCAL-S3.md; each one below cost hours when missing.
#
# Tunables (environment): S3_LOCAL_BUCKET (default smart-transfer), S3_LOCAL_ACCESS_KEY,
# S3_LOCAL_SECRET_KEY, S3_LOCAL_MEMSTORE_BYTES (RAM cap of the OSD, default 8 GiB),
# S3_LOCAL_START_TIMEOUT (seconds, default 60).
set -euo pipefail

BUCKET="${S3_LOCAL_BUCKET:-smart-transfer}"
ACCESS_KEY="${S3_LOCAL_ACCESS_KEY:-smarttransferaccess}"
SECRET_KEY="${S3_LOCAL_SECRET_KEY:-smarttransfersecretkey0123456789}"
MEMSTORE_BYTES="${S3_LOCAL_MEMSTORE_BYTES:-8589934592}"
START_TIMEOUT="${S3_LOCAL_START_TIMEOUT:-60}"
PACKAGES=(ceph-mon ceph-osd radosgw ceph-common)

die() { echo "s3-local: $*" >&2; exit 1; }
usage() { echo "usage: $0 install | start DIR PORT | env DIR PORT | stop DIR | stop-gateway DIR | start-gateway DIR" >&2; exit 2; }

install_if_missing() {
  if command -v radosgw >/dev/null && command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null \
     && command -v radosgw-admin >/dev/null && command -v monmaptool >/dev/null; then
    return
  fi
  echo "s3-local: installing ${PACKAGES[*]} from Debian packages" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >&2
}

print_env() {
  local port="$1"
  cat <<EOF
export SMART_TRANSFER_TEST_S3_ENDPOINT=http://127.0.0.1:${port}
export SMART_TRANSFER_TEST_S3_BUCKET=${BUCKET}
export AWS_ENDPOINT_URL=http://127.0.0.1:${port}
export S3_ENDPOINT_URL=http://127.0.0.1:${port}
export AWS_ACCESS_KEY_ID=${ACCESS_KEY}
export AWS_SECRET_ACCESS_KEY=${SECRET_KEY}
export AWS_DEFAULT_REGION=us-east-1
EOF
}

write_config() {
  local dir="$1" port="$2" mon_port="$3" fsid="$4"
  cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
mon initial members = a
public addr = 127.0.0.1
public network = 127.0.0.0/8
# cephx off inside this throwaway cluster; radosgw then needs crc mode or it hangs at start
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
ms bind ipv6 = false
# one OSD: replicas of one, tiny placement groups, no host-level spreading
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon max pg per osd = 1000
osd crush chooseleaf type = 0
# with the default interval every pool creation takes ~1 s and start-up ~13 s
paxos propose interval = 0.05
paxos min wait = 0.01
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
keyring = $dir/keyring
[mon]
mon data = $dir/mon/\$id
mon data avail warn = 1
mon data avail crit = 0
[osd]
osd data = $dir/osd/\$id
osd objectstore = memstore
memstore device bytes = $MEMSTORE_BYTES
osd max object name len = 460
osd max object namespace len = 64
[client.rgw.a]
# without tcp_nodelay every GET on a reused connection stalls ~47 ms
rgw frontends = beast endpoint=127.0.0.1:$port tcp_nodelay=1
rgw dns name = 127.0.0.1
rgw thread pool size = 64
# the OSD keeps data in RAM: collect deleted objects within seconds, not the default hours
rgw gc obj min wait = 1
rgw gc processor period = 2
rgw gc processor max time = 2
# SSE-KMS with Ceph's testing backend (keys from this list, by id): only objects PUT with the
# x-amz-server-side-encryption headers are encrypted, so every other object reads as before
rgw crypt s3 kms backend = testing
rgw crypt s3 kms encryption keys = testkey-1=nHPIT0mJyVq23j2+N52jiCCShpWj21T9bZxRONKd820= testkey-2=ZTC9qNvawROb8N7t3UJ98x5jNgDeH45O1I45mUDnxBM=
rgw crypt require ssl = false
EOF
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit="$1" what="$2"; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

s3_ready() {  # any HTTP answer from the gateway means it is serving
  curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/" | grep -qE '^[1-5][0-9][0-9]$'
}

create_bucket() {
  local port="$1"
  # curl signs SigV4 itself (7.75+), so no Python or AWS CLI is needed here
  local code
  # Ceph wants the payload hash header, which curl 7.88 does not add by itself (empty body here)
  code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" \
    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
    --user "$ACCESS_KEY:$SECRET_KEY" "http://127.0.0.1:$port/$BUCKET")
  case "$code" in 200|409) ;; *) return 1 ;; esac
}

start() {
  local dir="$1" port="$2"
  [[ "$port" =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$port'"
  install_if_missing
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  if [ -f "$dir/run/client.rgw.a.pid" ] && kill -0 "$(cat "$dir/run/client.rgw.a.pid")" 2>/dev/null; then
    die "an instance already runs in $dir (stop it first)"
  fi
  rm -rf "$dir/mon" "$dir/osd" "$dir/run" "$dir/log"
  mkdir -p "$dir/mon/a" "$dir/osd/0" "$dir/run" "$dir/log"
  # the monitor port sits next to the S3 port so that distinct S3 ports give distinct instances
  local mon_port=$((port + 1))
  local fsid
  fsid="$(cat /proc/sys/kernel/random/uuid)"
  write_config "$dir" "$port" "$mon_port" "$fsid"
  local conf=(-c "$dir/ceph.conf")
  : >"$dir/keyring"
  monmaptool --create --clobber --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" >/dev/null
  ceph-mon "${conf[@]}" -i a --mkfs --monmap "$dir/monmap" >/dev/null 2>"$dir/log/mkfs-mon.err" \
    || die "monitor mkfs failed: $(cat "$dir/log/mkfs-mon.err")"
  ceph-mon "${conf[@]}" -i a || die "monitor did not start (see $dir/log)"
  wait_for "$START_TIMEOUT" monitor timeout 5 ceph "${conf[@]}" --connect-timeout 5 mon stat \
    || die "monitor did not answer (see $dir/log)"
  local osd_uuid osd_id
  osd_uuid="$(cat /proc/sys/kernel/random/uuid)"
  osd_id="$(ceph "${conf[@]}" osd new "$osd_uuid")"
  [ "$osd_id" = "0" ] || die "unexpected OSD id '$osd_id'"
  ceph-osd "${conf[@]}" -i 0 --mkfs --osd-uuid "$osd_uuid" >/dev/null 2>"$dir/log/mkfs-osd.err" \
    || die "OSD mkfs failed: $(cat "$dir/log/mkfs-osd.err")"
  ceph-osd "${conf[@]}" -i 0 2>>"$dir/log/osd-start.err" || die "OSD did not start (see $dir/log)"
  radosgw "${conf[@]}" -n client.rgw.a || die "radosgw did not start (see $dir/log)"
  wait_for "$START_TIMEOUT" gateway s3_ready "$port" || die "S3 gateway did not answer on port $port (see $dir/log)"
  radosgw-admin "${conf[@]}" user create --uid smart-transfer-test --display-name "smart-transfer test" \
    --access-key "$ACCESS_KEY" --secret-key "$SECRET_KEY" >/dev/null 2>"$dir/log/user.err" \
    || die "could not create the S3 user: $(cat "$dir/log/user.err")"
  wait_for "$START_TIMEOUT" bucket create_bucket "$port" || die "could not create bucket $BUCKET"
  echo "$port" >"$dir/port"
  print_env "$port"
}

stop() {
  local dir="$1" name pid
  [ -d "$dir/run" ] || return 0
  for name in client.rgw.a osd.0 mon.a; do
    [ -f "$dir/run/$name.pid" ] || continue
    pid="$(cat "$dir/run/$name.pid")"
    [ -n "$pid" ] || continue
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$dir/run" "$dir/osd" "$dir/mon"
}

stop_gateway() {
  local dir="$1" pid
  [ -f "$dir/run/client.rgw.a.pid" ] || die "no gateway pid file in $dir/run"
  pid="$(cat "$dir/run/client.rgw.a.pid")"
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

start_gateway() {
  local dir="$1" port
  port="$(cat "$dir/port")"
  radosgw -c "$dir/ceph.conf" -n client.rgw.a || die "radosgw did not start (see $dir/log)"
  wait_for "$START_TIMEOUT" gateway s3_ready "$port" || die "S3 gateway did not answer on port $port"
}

cmd="${1:-}"
case "$cmd" in
  install) [ $# -eq 1 ] || usage; install_if_missing ;;
  start) [ $# -eq 3 ] || usage; start "$2" "$3" ;;
  env)   [ $# -eq 3 ] || usage; print_env "$3" ;;
  stop)  [ $# -eq 2 ] || [ $# -eq 3 ] || usage; stop "$2" ;;
  stop-gateway)  [ $# -eq 2 ] || usage; stop_gateway "$2" ;;
  start-gateway) [ $# -eq 2 ] || usage; start_gateway "$2" ;;
  *) usage ;;
esac
