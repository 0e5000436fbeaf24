#!/usr/bin/env bash
# Checks the alerting rules of deploy/prometheus/ with Prometheus's own tool:
# `promtool check rules` (syntax, PromQL, templates) and `promtool test rules`
# (alerts_test.yml: each alert fires on the series it must, and not on the
# others). Whether the rules name metrics the service really exports is
# checked by a Go test against a real scrape (TestAlertRulesUseExportedMetrics,
# part of make test).
#
#   .ci/prometheus-check.sh
#
# Installs Debian's `prometheus` package (for promtool) when promtool is
# missing. Fixed time budget: PROMETHEUS_BUDGET seconds (default 300), the
# package installation included.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
budget=${PROMETHEUS_BUDGET:-300}
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }

if ! command -v promtool >/dev/null; then
	echo "prometheus-check: promtool missing, installing Debian's prometheus package"
	timeout "$(left)" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive timeout "$(left)" apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
promtool --version 2>&1 | head -1
timeout "$(left)" promtool check rules deploy/prometheus/alerts.yml
# promtool resolves rule_files relative to the test file.
timeout "$(left)" promtool test rules deploy/prometheus/alerts_test.yml
echo "prometheus-check: rules checked and tested in $(( $(date +%s) - start ))s"
