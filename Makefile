# The commands of the project. `make help` lists them.
SHELL := /bin/bash
GO    ?= go
TOOL  := $(GO) tool -modfile=tools/go.mod

# A database for `make run`, `make migrate` and `make seed`.
DATABASE_URL ?= postgres://postgres:postgres@localhost:5432/orders?sslmode=disable
export DATABASE_URL

# docker compose (v2) where installed, else the standalone docker-compose.
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

.PHONY: generate
generate: ## Regenerate the sqlc code from db/queries and db/migrations.
	$(TOOL) sqlc generate

.PHONY: verify
verify: ## Fail if generated code is stale or code is unformatted.
	$(TOOL) sqlc generate
	@git diff --exit-code -- internal/infra/dbsqlc || { echo "generated code is stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- internal/infra/dbsqlc)" || { echo "generated code is stale: run make generate and commit"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "run gofmt -w"; exit 1; }

.PHONY: lint
lint: ## Run go vet and staticcheck.
	$(GO) vet ./...
	$(TOOL) staticcheck ./...

.PHONY: test
test: ## Run every test against real PostgreSQL (TEST_DATABASE_URL, or testcontainers).
	$(GO) test -count=1 -timeout 20m ./...

.PHONY: test-race
test-race: ## Run the tests with the race detector.
	$(GO) test -count=1 -race -timeout 30m ./...

FUZZTIME ?= 20s

.PHONY: fuzz
fuzz: ## Run each native fuzz target for FUZZTIME (default 20s); fails on any finding.
	@FUZZTIME=$(FUZZTIME) GO=$(GO) bash scripts/fuzz.sh

.PHONY: build
build: ## Build bin/api.
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/api ./cmd/api

.PHONY: run
run: build ## Migrate DATABASE_URL and serve on :8080.
	bin/api migrate up
	bin/api serve

.PHONY: seed
seed: build ## Create demo actors and products in DATABASE_URL, print tokens.
	bin/api seed

.PHONY: up
up: ## Start PostgreSQL and the service with docker compose.
	$(COMPOSE) up -d --build

.PHONY: down
down: ## Stop the compose stack and drop its volume.
	$(COMPOSE) down -v

.PHONY: images
images: ## Build local stand-ins for upstream images (no registry); prints the exports.
	bash deploy/build-local-images.sh

.PHONY: smoke
smoke: ## Compose smoke test (export the image overrides first on a machine with no registry).
	bash deploy/compose-smoke.sh

.PHONY: smoke-local
smoke-local: ## Build the local images, then run the compose smoke test with them.
	e=$$(bash deploy/build-local-images.sh) && eval "$$e" && bash deploy/compose-smoke.sh

.PHONY: bench
bench: ## Benchmark the service against pgbench; writes docs/bench/REPORT.md.
	bench/run.sh
