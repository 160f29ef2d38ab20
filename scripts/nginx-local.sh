#!/usr/bin/env bash
# A throwaway nginx on 127.0.0.1 in front of smart-transfer replicas: the load balancer of the tests,
# configured as the README's deployment section says (WebSocket upgrade, the client's address passed on,
# no body size limit, no buffering, a proxy_read_timeout the server's keep-alives must beat).
#
#   scripts/nginx-local.sh install                          install nginx (Debian package) if missing
#   scripts/nginx-local.sh start DIR PORT READ_TIMEOUT UPSTREAM...   e.g. ... start /tmp/lb 8000 60s 127.0.0.1:8081 127.0.0.1:8082
#   scripts/nginx-local.sh stop DIR                         stop that instance (by its PID file, never by name)
#
# Everything of an instance (config, PID file, logs, temp files) lives under DIR.
set -euo pipefail

die() { echo "nginx-local: $*" >&2; exit 1; }
usage() { echo "usage: $0 install | start DIR PORT READ_TIMEOUT UPSTREAM... | stop DIR" >&2; exit 2; }

nginx_bin() {
  command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || return 1
}

install_if_missing() {
  nginx_bin >/dev/null && return
  echo "nginx-local: installing nginx from Debian packages" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # the package would start a system-wide nginx on port 80: forbid service starts while installing
  local policy=/usr/sbin/policy-rc.d created=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null && $sudo chmod +x "$policy" && created=1
  fi
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nginx >&2 || status=$?
  [ -z "$created" ] || $sudo rm -f "$policy"
  [ "${status:-0}" -eq 0 ] || die "apt-get install nginx failed"
  nginx_bin >/dev/null || die "nginx is not on PATH after installing it"
}

write_config() {  # write_config DIR PORT READ_TIMEOUT UPSTREAM...
  local dir="$1" port="$2" read_timeout="$3"; shift 3
  local servers="" upstream
  for upstream in "$@"; do servers+="        server $upstream max_fails=1 fail_timeout=10s;"$'\n'; done
  mkdir -p "$dir/tmp" "$dir/log"
  cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/log/error.log warn;
events { worker_connections 1024; }
http {
    access_log $dir/log/access.log;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;

    # --- the deployment snippet (README "Deployment behind a load balancer") ---
    map \$http_upgrade \$connection_upgrade {
        default upgrade;
        ''      close;
    }
    upstream smart_transfer {
$servers    }
    server {
        listen 127.0.0.1:$port;
        client_max_body_size 0;          # simple-protocol uploads go through the server
        proxy_request_buffering off;     # stream bodies both ways, no temp files
        proxy_buffering off;
        location / {
            proxy_pass http://smart_transfer;
            proxy_http_version 1.1;                         # WebSocket upgrade
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection \$connection_upgrade;
            proxy_set_header Host \$host;
            proxy_set_header X-Forwarded-For \$remote_addr;  # per-address limits see the client
            proxy_set_header X-Forwarded-Proto \$scheme;
            proxy_read_timeout $read_timeout;               # the servers' --keepalive-interval must be shorter
            proxy_send_timeout $read_timeout;
        }
        location = /metrics {                               # scraped per replica, not through here
            return 404;
        }
    }
    # --- end of the snippet ---
}
EOF
}

start() {
  local dir="$1" port="$2" read_timeout="$3"; shift 3
  [[ "$port" =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$port'"
  [ $# -ge 1 ] || die "give at least one UPSTREAM (host:port)"
  install_if_missing
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  if [ -f "$dir/nginx.pid" ] && kill -0 "$(cat "$dir/nginx.pid")" 2>/dev/null; then
    die "an instance already runs in $dir (stop it first)"
  fi
  write_config "$dir" "$port" "$read_timeout" "$@"
  local bin
  bin="$(nginx_bin)"
  "$bin" -p "$dir" -c "$dir/nginx.conf" -e "$dir/log/error.log" 2>"$dir/log/start.err" \
    || die "nginx did not start: $(cat "$dir/log/start.err")"
  for _ in $(seq 100); do
    [ -s "$dir/nginx.pid" ] && curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break
    sleep 0.05
  done
  [ -s "$dir/nginx.pid" ] || die "nginx wrote no PID file (see $dir/log)"
  echo "http://127.0.0.1:$port"
}

stop() {
  local dir="$1" pid
  [ -f "$dir/nginx.pid" ] || return 0
  pid="$(cat "$dir/nginx.pid")"
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

cmd="${1:-}"
case "$cmd" in
  install) [ $# -eq 1 ] || usage; install_if_missing ;;
  start) [ $# -ge 5 ] || usage; shift; start "$@" ;;
  stop) [ $# -eq 2 ] || usage; stop "$2" ;;
  *) usage ;;
esac
