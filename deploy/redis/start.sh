#!/bin/sh
# Starts redis-server with the ACL users of users.acl (next to this script,
# or $QUORUM_REDIS_ACL) and the quorum user's password from
# QUORUM_REDIS_PASSWORD. The configuration, password included, reaches
# redis-server on its standard input: never its command line, which ps
# shows, nor a file, nor its environment. Arguments go to redis-server.
#
# With failover (a primary, replicas and Redis Sentinels; see sentinel.sh):
#   QUORUM_REDIS_ADMIN_PASSWORD  the replica and sentinel users' password
#                                (replication and monitoring; the roles
#                                never hold it)
#   QUORUM_REDIS_SELF            host:port the others reach this server at
#   QUORUM_REDIS_SENTINELS       host:port,... of the sentinels: asked at
#                                start which server is the primary now, so
#                                a restarted old primary comes back as a
#                                replica instead of a second primary
#   QUORUM_REDIS_REPLICAOF       "host port" of the first primary, followed
#                                when no sentinel answers (the first start)
#   QUORUM_REDIS_MASTER          the name the sentinels watch (quorum)
set -eu
acl=${QUORUM_REDIS_ACL:-$(dirname "$0")/users.acl}
pw=${QUORUM_REDIS_PASSWORD:-}
admin=${QUORUM_REDIS_ADMIN_PASSWORD:-}
self=${QUORUM_REDIS_SELF:-}
# The roles carry the password in a redis:// URL, where only these
# characters need no escaping.
checkpw() {
  if [ -z "$2" ]; then
    echo "start.sh: set $1 (openssl rand -hex 32)" >&2
    exit 1
  fi
  case $2 in
  *[!A-Za-z0-9._~-]*)
    echo "start.sh: $1 may hold only letters, digits and . _ ~ - (it goes into redis:// URLs as is): use openssl rand -hex 32" >&2
    exit 1
    ;;
  esac
  if [ ${#2} -lt 16 ]; then
    echo "start.sh: $1 is shorter than 16 characters: use openssl rand -hex 32" >&2
    exit 1
  fi
}
checkpw QUORUM_REDIS_PASSWORD "$pw"
if ! grep -q '^user quorum ' "$acl"; then
  echo "start.sh: $acl defines no user quorum" >&2
  exit 1
fi
conf=$(sed -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' -e "s/^user quorum /user quorum >$pw /" "$acl")
if [ -n "$admin" ]; then
  checkpw QUORUM_REDIS_ADMIN_PASSWORD "$admin"
  if [ "$admin" = "$pw" ]; then
    echo "start.sh: QUORUM_REDIS_ADMIN_PASSWORD must differ from QUORUM_REDIS_PASSWORD (the roles hold that one)" >&2
    exit 1
  fi
  # Every server may become a replica after a failover, so each can log in
  # to whichever is the primary.
  conf=$(printf '%s\n' "$conf" | sed -e "s/^user replica /user replica >$admin /" -e "s/^user sentinel /user sentinel >$admin /")
  conf="$conf
masteruser replica
masterauth $admin"
fi
if [ -n "$self" ]; then
  conf="$conf
replica-announce-ip ${self%:*}
replica-announce-port ${self##*:}"
fi
primary=
for s in $(printf '%s' "${QUORUM_REDIS_SENTINELS:-}" | tr ',' ' '); do
  # The sentinels require the roles' password (sentinel.sh).
  if a=$(REDISCLI_AUTH="$pw" timeout 3 redis-cli -h "${s%:*}" -p "${s##*:}" --no-auth-warning --raw \
      sentinel get-master-addr-by-name "${QUORUM_REDIS_MASTER:-quorum}" 2>/dev/null) &&
    [ "$(printf '%s\n' "$a" | wc -l)" -eq 2 ]; then
    primary=$(printf '%s\n' "$a" | tr '\n' ' ')
    primary=${primary% }
    break
  fi
done
if [ -z "$primary" ]; then
  primary=${QUORUM_REDIS_REPLICAOF:-}
fi
if [ -n "$primary" ] && [ "$(printf '%s' "$primary" | tr ' ' ':')" != "$self" ]; then
  echo "start.sh: starting as a replica of $primary" >&2
  conf="$conf
replicaof $primary"
fi
unset QUORUM_REDIS_PASSWORD QUORUM_REDIS_ADMIN_PASSWORD pw admin
exec redis-server - "$@" <<END
$conf
END
