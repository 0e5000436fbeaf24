#!/bin/sh
# Run once by Patroni on the first leader, after initdb: the service's role
# and database (the default stack's image makes them from POSTGRES_USER and
# POSTGRES_DB). $1 is a superuser connection string.
set -eu
psql "$1" -v ON_ERROR_STOP=1 <<'SQL'
CREATE ROLE ordersvc LOGIN PASSWORD 'ordersvc';
CREATE DATABASE ordersvc OWNER ordersvc;
SQL
