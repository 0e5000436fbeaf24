# The commands of the project. `make help` lists them.
SHELL := /bin/bash
GO    ?= go
TOOL  := $(GO) tool -modfile=tools/go.mod

# Settings from .env (plain NAME=value lines), the file docker compose reads
# too: `make images` writes the local image names there, and .env.example
# lists every setting. A variable set in the shell or on the command line wins.
ENV_FILE_VARS := $(shell sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p' .env 2>/dev/null)
$(foreach v,$(ENV_FILE_VARS),$(eval $(v) ?= $(shell sed -n 's/^$(v)=//p' .env | tail -n 1)))
export $(ENV_FILE_VARS)

# DATABASE_URL has no default. Unset, `make seed` and `make actor` use the
# compose stack of `make up`; set, they and `make run` use that database.

# docker compose (v2) where installed, else the standalone docker-compose (v1).
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
API_URL ?= http://127.0.0.1:$(or $(API_PORT),8080)
SCALE_URL ?= http://127.0.0.1:$(or $(SCALE_PORT),8088)

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

.PHONY: generate
generate: ## Regenerate the sqlc code from db/queries and db/migrations.
	$(TOOL) sqlc generate

.PHONY: verify
verify: ## Fail if generated code is stale or code is unformatted (current but uncommitted code passes, with a note).
	@TOOL="$(TOOL)" bash scripts/verify-generated.sh
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "run gofmt -w"; exit 1; }

.PHONY: lint
lint: ## Run go vet and staticcheck.
	$(GO) vet ./...
	$(TOOL) staticcheck ./...

.PHONY: test
# Packages tested at once. Their tests wait on PostgreSQL far more than they
# compute (testkit.DefaultParallel), so more packages than CPUs run at once.
TEST_PACKAGES ?= 4

test: ## Run every test against real PostgreSQL (TEST_DATABASE_URL, or testcontainers).
	$(GO) test -count=1 -p $(TEST_PACKAGES) -timeout 20m ./...

.PHONY: test-race
test-race: ## Run the tests with the race detector.
	$(GO) test -count=1 -race -timeout 30m ./...

FUZZTIME ?= 20s

.PHONY: fuzz
fuzz: ## Run each native fuzz target for FUZZTIME (default 20s); fails on any finding.
	@FUZZTIME=$(FUZZTIME) GO=$(GO) bash scripts/fuzz.sh

# The build's name in ordersvc_build_info and the start log line.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -X main.version=$(VERSION) -X main.revision=$(REVISION)

.PHONY: build
build: ## Build bin/api.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/api ./cmd/api

.PHONY: build-quiet
build-quiet:
	@CGO_ENABLED=0 $(GO) build -trimpath -o bin/api ./cmd/api

.PHONY: run
run: need-database-url build ## Migrate DATABASE_URL and serve on :8080 (without Docker).
	bin/api migrate up
	bin/api serve

.PHONY: need-database-url
need-database-url:
	@test -n "$$DATABASE_URL" || { printf '%s\n' \
	  'DATABASE_URL is not set: name a PostgreSQL (13 or later) this service may use, e.g.' \
	  '  export DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"' \
	  'or put that line in .env (see .env.example). With Docker, `make up` needs none.' >&2; exit 2; }

.PHONY: up
up: ## Build, then start PostgreSQL and the service with docker compose (v1 or v2); waits until ready.
	@[ ! -f deploy/need-images.sh ] || bash deploy/need-images.sh
	$(COMPOSE) build api
	$(COMPOSE) up -d
	@for i in $$(seq 1 60); do curl -fsS -o /dev/null --max-time 2 $(API_URL)/readyz 2>/dev/null && \
	  { echo "ready: $(API_URL)  (next: make seed)"; exit 0; }; sleep 1; done; \
	  echo "$(API_URL)/readyz did not answer within 60s: make logs" >&2; exit 1

.PHONY: up-scale
up-scale: ## Start the profile `scale`: 3 replicas behind HAProxy on 127.0.0.1:8088, through PgBouncer.
	@[ ! -f deploy/need-images.sh ] || bash deploy/need-images.sh scale
	$(COMPOSE) --profile scale build api-1
	$(COMPOSE) --profile scale up -d haproxy
	@for i in $$(seq 1 90); do curl -fsS -o /dev/null --max-time 2 $(SCALE_URL)/readyz 2>/dev/null && \
	  { echo "ready: $(SCALE_URL) (HAProxy; X-Served-By names the replica)"; exit 0; }; sleep 1; done; \
	  echo "$(SCALE_URL)/readyz did not answer within 90s: $(COMPOSE) --profile scale logs" >&2; exit 1

HA_URL ?= http://127.0.0.1:$(or $(HA_PORT),8089)

.PHONY: up-ha
up-ha: ## Start the profile `ha`: 3 Patroni nodes (sync), etcd, HAProxy, 2 replicas on 127.0.0.1:HA_PORT (8089); waits for a placement.
	@[ ! -f deploy/need-images.sh ] || bash deploy/need-images.sh ha
	$(COMPOSE) --profile ha build ha-api-1
	$(COMPOSE) --profile ha up -d etcd patroni-1 patroni-2 patroni-3 ha-proxy
	@COMPOSE="$(COMPOSE)" bash deploy/ha/wait-ready.sh
	$(COMPOSE) --profile ha up -d ha-api-1 ha-api-2
	@COMPOSE="$(COMPOSE)" HA_URL=$(HA_URL) bash deploy/ha/wait-ready.sh --placement

.PHONY: down-ha
down-ha: ## Stop the compose stack with the profile `ha` and drop its volumes.
	$(COMPOSE) --profile ha down -v

.PHONY: seed
seed: ## Create demo actors and products, print their tokens and ids as JSON (pipe into jq).
	@$(call api,seed)

.PHONY: actor
actor: ## Create one actor: make actor ARGS='--name Ada --role staff' (prints JSON).
	@$(call api,actor create $(ARGS))

.PHONY: logs
logs: ## Follow the service's logs and the demo webhook receiver's (each event it accepts) in the compose stack.
	$(COMPOSE) logs -f --tail=100 api webhook-receiver

.PHONY: down
down: ## Stop the compose stack (the profile `scale` too) and drop its volume.
	$(COMPOSE) --profile scale down -v --remove-orphans

# ---- profile `backup`: WAL archiving and pgBackRest backups (docs/backup.md)
# The stack's file plus the override that makes PostgreSQL archive its WAL.
BACKUP_COMPOSE ?= $(COMPOSE) -f docker-compose.yml -f deploy/backup/docker-compose.backup.yml
BACKUP_TYPE ?= full

.PHONY: up-backup
up-backup: ## Start the stack with WAL archiving and scheduled pgBackRest backups (profile `backup`).
	$(BACKUP_COMPOSE) build api
	$(BACKUP_COMPOSE) --profile backup up -d
	@for i in $$(seq 1 60); do curl -fsS -o /dev/null --max-time 2 $(API_URL)/readyz 2>/dev/null && \
	  { echo "ready: $(API_URL), archiving to pgBackRest (make backup; docs/backup.md)"; exit 0; }; sleep 1; done; \
	  echo "$(API_URL)/readyz did not answer within 60s: $(BACKUP_COMPOSE) logs" >&2; exit 1

.PHONY: backup
backup: ## Take a pgBackRest backup now (BACKUP_TYPE=full|diff|incr, default full), then list the repository.
	@$(BACKUP_COMPOSE) --profile backup exec -T backup ordersvc-backup now $(BACKUP_TYPE) || \
	  { echo "is the profile backup running? make up-backup" >&2; exit 1; }

.PHONY: restore-drill
restore-drill: ## Restore to a point in time into a fresh cluster; check every acknowledged order is there (own project).
	bash deploy/restore-drill.sh

.PHONY: down-backup
down-backup: ## Stop the profile `backup`; keeps the database and the backup repository.
	$(BACKUP_COMPOSE) --profile backup --profile restore down --remove-orphans

# api COMMAND: runs `api COMMAND` against DATABASE_URL when it is set, else in
# the compose stack. Says which on stderr; only the command's output goes to
# stdout.
define api
if [ -n "$$DATABASE_URL" ]; then \
  echo "using DATABASE_URL" >&2; \
  $(MAKE) -s build-quiet && bin/api $(1); \
else \
  echo "using the compose stack (set DATABASE_URL to use another database)" >&2; \
  $(COMPOSE) exec -T api /api $(1) || { echo "is the stack running? make up" >&2; exit 1; }; \
fi
endef

# PROFILE: the compose profiles whose images `make images` builds too
# (scale, ha, backup, all); the core images `make up` needs are always built.
PROFILE ?=

.PHONY: images
images: ## Build local stand-ins for upstream images (no registry; PROFILE=scale|ha|backup|all for more); writes their names to .env.
	@set -o pipefail; exports=$$(bash deploy/build-local-images.sh $(PROFILE)) || exit 1; \
	  vars=$$(sed -n 's/^export //p' <<<"$$exports"); \
	  names=$$(cut -d= -f1 <<<"$$vars" | paste -sd'|'); \
	  { [ ! -f .env ] || grep -Ev "^($$names)=" .env || true; printf '%s\n' "$$vars"; } >.env.tmp && mv .env.tmp .env; \
	  echo "wrote $$(cut -d= -f1 <<<"$$vars" | paste -sd' ') to .env: docker compose and make read them" >&2

.PHONY: smoke
smoke: ## Compose smoke test (uses the image names in .env on a machine with no registry).
	bash deploy/compose-smoke.sh

.PHONY: smoke-scale
smoke-scale: ## Compose smoke test of the profile `scale` (same-key storm, a replica stopped under load).
	bash deploy/compose-scale-smoke.sh

.PHONY: smoke-local
smoke-local: images ## Build the local images, then run the compose smoke test with them.
	bash deploy/compose-smoke.sh

.PHONY: rename
rename: ## Rename a copy of this service: make rename MODULE=example.com/shop [NAME=shop].
	@test -n "$(MODULE)" || { echo "usage: make rename MODULE=example.com/shop [NAME=shop]" >&2; exit 2; }
	tools/rename.sh $(MODULE) $(NAME)

.PHONY: bench
bench: ## Benchmark the service against pgbench; writes docs/bench/REPORT.md.
	bench/run.sh
