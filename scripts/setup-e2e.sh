#!/usr/bin/env bash
# End-to-end test dependencies: an SSH server, Prometheus and node_exporter (each started
# by the tests on a loopback port, never as a system service), tmux, and nginx (the
# streaming-proxy anchor of benchmarks/proxy_overhead.py and the proxy tests, run from a
# temporary folder). Idempotent: does nothing when all are present.
set -euo pipefail
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null || need+=(openssh-client)
command -v tmux >/dev/null || need+=(tmux)
command -v prometheus >/dev/null || need+=(prometheus)
command -v prometheus-node-exporter >/dev/null || need+=(prometheus-node-exporter)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup-e2e: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
