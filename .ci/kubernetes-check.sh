#!/usr/bin/env bash
# Checks the Kubernetes manifests of deploy/kubernetes without a cluster:
# the checker (deploy/kubernetes/check, a Go module of its own, so that the
# service's go.mod carries no Kubernetes dependency) decodes every document
# strictly into its k8s.io/api type (unknown fields, duplicate keys and wrong
# types refused) and checks the objects against each other and the service;
# its tests show each kind of mistake refused.
#
#   .ci/kubernetes-check.sh
#
# Needs Go and the module proxy (or a warm module cache). Fixed time budget:
# KUBERNETES_BUDGET seconds (default 600): the first build of k8s.io/api
# takes a few minutes on a small machine, later ones seconds.
set -Eeuo pipefail
cd "$(dirname "$0")/../deploy/kubernetes/check"
budget=${KUBERNETES_BUDGET:-600}
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }

timeout "$(left)" go vet ./...
timeout "$(left)" go test -count=1 ./...
timeout "$(left)" go run . ..
echo "kubernetes-check: manifests checked in $(( $(date +%s) - start ))s"
