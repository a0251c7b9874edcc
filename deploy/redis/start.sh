#!/bin/sh
# Starts redis-server with the ACL users of users.acl (next to this script,
# or $QUORUM_REDIS_ACL) and the quorum user's password from
# QUORUM_REDIS_PASSWORD. The configuration, password included, reaches
# redis-server on its standard input: never its command line, which ps
# shows, nor a file, nor its environment. Arguments go to redis-server.
set -eu
acl=${QUORUM_REDIS_ACL:-$(dirname "$0")/users.acl}
pw=${QUORUM_REDIS_PASSWORD:-}
if [ -z "$pw" ]; then
  echo "start.sh: set QUORUM_REDIS_PASSWORD (openssl rand -hex 32)" >&2
  exit 1
fi
# The roles carry the password in a redis:// URL, where only these
# characters need no escaping.
case $pw in
*[!A-Za-z0-9._~-]*)
  echo "start.sh: QUORUM_REDIS_PASSWORD may hold only letters, digits and . _ ~ - (it goes into redis:// URLs as is): use openssl rand -hex 32" >&2
  exit 1
  ;;
esac
if [ ${#pw} -lt 16 ]; then
  echo "start.sh: QUORUM_REDIS_PASSWORD is shorter than 16 characters: use openssl rand -hex 32" >&2
  exit 1
fi
if ! grep -q '^user quorum ' "$acl"; then
  echo "start.sh: $acl defines no user quorum" >&2
  exit 1
fi
conf=$(sed -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' -e "s/^user quorum /user quorum >$pw /" "$acl")
unset QUORUM_REDIS_PASSWORD pw
exec redis-server - "$@" <<END
$conf
END
