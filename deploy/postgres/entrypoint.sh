#!/bin/sh
# Create the cluster on an empty PGDATA (first start), then run postgres as PID 1.
set -eu
password="${POSTGRES_PASSWORD:-}"
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then password="$(cat "$POSTGRES_PASSWORD_FILE")"; fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "$password" ]; then
    echo "postgres: set POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE) for the first start" >&2
    exit 1
  fi
  mkdir -p "$PGDATA" && chmod 700 "$PGDATA"
  pwfile="$(mktemp)"
  printf '%s\n' "$password" > "$pwfile"
  initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
    --auth-local=scram-sha-256 --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
  echo "host all all ::/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
  # a private server on the socket in /tmp to create the database, then stopped
  pg_ctl --pgdata="$PGDATA" -o "-c listen_addresses='' -k /tmp" -w start >/dev/null
  PGPASSWORD="$password" psql -h /tmp -U "$POSTGRES_USER" -d postgres -v ON_ERROR_STOP=1 -q \
    -c "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\"" 2>/dev/null \
    || [ "$POSTGRES_DB" = "$POSTGRES_USER" ]
  pg_ctl --pgdata="$PGDATA" -m fast -w stop >/dev/null
  echo "postgres: created the cluster in $PGDATA with database $POSTGRES_DB"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -k /tmp
