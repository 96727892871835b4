#!/bin/sh
# pmkv serve from redis-cli: strings, counters, expiry and a MULTI/EXEC transaction (all
# or nothing across a crash). Start the server first:
#   pmkv serve words.pool --port 6379 &
set -eu
cli() { redis-cli -p "${PMKV_PORT:-6379}" "$@"; }
cli set hello world
cli get hello
cli incr visits
cli set session:1 alice EX 3600
cli ttl session:1
printf 'MULTI\nSET from 70\nSET to 30\nEXEC\n' | cli
cli mget from to
