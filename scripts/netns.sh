#!/bin/sh
# Network-namespace "hosts" on one machine, for multi-host runs: each host
# P-hK has its own veth eth0 (10.99.0.K/24) on a bridge in namespace P-sw;
# nothing is routed to the outside. P is $SMOE_NETNS (default smoe; at most
# 9 characters): two sets with different prefixes do not see each other, so
# concurrent test runs cannot collide. Needs root and iproute2.
#
#   scripts/netns.sh up N [RATE]   make hosts P-h1..N; RATE (e.g. 2gbit)
#                                  shapes every host's link with tbf, its
#                                  bucket $SMOE_NETNS_BURST (default 64kb:
#                                  one GSO packet; a larger bucket sends a
#                                  layer's gathers after an idle spell at
#                                  line rate, so the link is no longer a
#                                  link of RATE, bench/results/
#                                  2026-12-07-link-shared-burst.md)
#   scripts/netns.sh down          remove them
#   scripts/netns.sh mpirun ARGS   run Open MPI's mpirun inside P-h1 with
#                                  the namespace launch agent; pass e.g.
#                                  --host 10.99.0.1:2,10.99.0.2:2 --bind-to none
#   scripts/netns.sh link K up|down   cut or restore host K's link
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}
P=${SMOE_NETNS:-smoe}
export SMOE_NETNS="$P" # for the launch agent
case "$cmd" in
up)
  n=${2:-2}
  rate=${3:-}
  "$0" down 2>/dev/null || true
  ip netns add "$P-sw"
  ip -n "$P-sw" link add br0 type bridge
  ip -n "$P-sw" link set br0 up
  ip -n "$P-sw" link set lo up
  for k in $(seq 1 "$n"); do
    ip netns add "$P-h$k"
    ip link add "$P-h$k-e" type veth peer name "$P-h$k-p"
    ip link set "$P-h$k-e" netns "$P-h$k"
    ip link set "$P-h$k-p" netns "$P-sw"
    ip -n "$P-h$k" link set "$P-h$k-e" name eth0
    ip -n "$P-h$k" addr add "10.99.0.$k/24" dev eth0
    ip -n "$P-h$k" link set eth0 up
    ip -n "$P-h$k" link set lo up
    # give up on an unreachable TCP peer after ~10 s instead of ~15 min, as
    # a cluster's failure detection would: mpirun then notices a host whose
    # link was cut (scripts/netns.sh link K down) and ends the job
    ip netns exec "$P-h$k" sysctl -qw net.ipv4.tcp_retries2=4
    ip -n "$P-sw" link set "$P-h$k-p" master br0
    ip -n "$P-sw" link set "$P-h$k-p" up
    if [ -n "$rate" ]; then
      ip netns exec "$P-h$k" tc qdisc add dev eth0 root tbf rate "$rate" burst "${SMOE_NETNS_BURST:-64kb}" latency 10ms
    fi
  done
  ;;
down)
  for ns in $(ip netns list | awk '{print $1}' | grep "^$P-" || true); do
    ip netns del "$ns"
  done
  ;;
mpirun)
  shift
  exec ip netns exec "$P-h1" unshare --uts sh -c "hostname $P-h1; "'exec "$0" "$@"' \
    mpirun --mca plm_rsh_agent "$here/netns-agent.sh" \
    --mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0 "$@"
  ;;
link)
  ip -n "$P-h$2" link set eth0 "$3"
  ;;
*)
  sed -n '2,15p' "$0" >&2
  exit 2
  ;;
esac
