#!/bin/sh
# Open MPI launch agent for the namespace hosts of scripts/netns.sh:
# "netns-agent.sh HOST command..." runs the command inside that host's
# network namespace and a UTS namespace of its own (its hostname).
host=$1
shift
P=${SMOE_NETNS:-smoe}
case "$host" in
10.99.0.*) ns=$P-h${host##*.} ;;
"$P"-h*) ns=$host ;;
*) echo "netns-agent: unknown host $host" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns; $*"
