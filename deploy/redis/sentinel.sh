#!/bin/sh
# Starts a Redis Sentinel watching quorum's primary (start.sh's servers).
# Three of them, two needed to agree, promote a replica when the primary
# is down; the roles find the primary through them
# (redis+sentinel://quorum:$QUORUM_REDIS_PASSWORD@s1:26379,.../quorum/0 with
# ?sentinel_password=$QUORUM_REDIS_PASSWORD).
#   QUORUM_REDIS_PASSWORD        the roles' password: clients and the other
#                                sentinels log in to this sentinel with it
#   QUORUM_REDIS_ADMIN_PASSWORD  the sentinel user's password on the servers
#   QUORUM_REDIS_PRIMARY         "host port" of the first primary
#   QUORUM_REDIS_MASTER          the name it is watched under (quorum)
#   QUORUM_SENTINEL_ANNOUNCE     the host the others reach this sentinel at
#   QUORUM_SENTINEL_CONF         the file it keeps its state in
#                                (/data/sentinel.conf)
#   QUORUM_SENTINEL_DOWN_AFTER_MS  how long a silent primary is down (5000)
# A sentinel rewrites its file with what it learns (the current primary,
# the replicas, the other sentinels), so the file is written only when
# absent; the passwords in it are replaced from the environment at every
# start, so a rotated password takes effect. The file is the sentinel's
# alone (mode 600, on its own volume). Arguments go to redis-server.
set -eu
pw=${QUORUM_REDIS_PASSWORD:-}
admin=${QUORUM_REDIS_ADMIN_PASSWORD:-}
master=${QUORUM_REDIS_MASTER:-quorum}
conf=${QUORUM_SENTINEL_CONF:-/data/sentinel.conf}
for v in QUORUM_REDIS_PASSWORD QUORUM_REDIS_ADMIN_PASSWORD QUORUM_REDIS_PRIMARY; do
  if [ -z "$(eval echo "\${$v:-}")" ]; then
    echo "sentinel.sh: set $v" >&2
    exit 1
  fi
done
case $pw$admin$master in
*[!A-Za-z0-9._~-]*)
  echo "sentinel.sh: the passwords and QUORUM_REDIS_MASTER may hold only letters, digits and . _ ~ -" >&2
  exit 1
  ;;
esac
umask 077
if [ ! -s "$conf" ]; then
  {
    echo "sentinel resolve-hostnames yes"
    echo "sentinel announce-hostnames yes"
    if [ -n "${QUORUM_SENTINEL_ANNOUNCE:-}" ]; then
      echo "sentinel announce-ip $QUORUM_SENTINEL_ANNOUNCE"
    fi
    echo "sentinel monitor $master $QUORUM_REDIS_PRIMARY 2"
    echo "sentinel down-after-milliseconds $master ${QUORUM_SENTINEL_DOWN_AFTER_MS:-5000}"
    echo "sentinel failover-timeout $master 60000"
    echo "sentinel parallel-syncs $master 1"
  } > "$conf"
fi
tmp=$conf.new
sed -e '/^requirepass[[:space:]]/d' -e '/^user default /d' -e '/^sentinel sentinel-pass /d' \
  -e "/^sentinel auth-user $master /d" -e "/^sentinel auth-pass $master /d" "$conf" > "$tmp"
{
  echo "requirepass $pw"
  echo "sentinel sentinel-pass $pw"
  echo "sentinel auth-user $master sentinel"
  echo "sentinel auth-pass $master $admin"
} >> "$tmp"
mv "$tmp" "$conf"
unset QUORUM_REDIS_PASSWORD QUORUM_REDIS_ADMIN_PASSWORD pw admin
exec redis-server "$conf" --sentinel "$@"
