package dbsqlc

// The text of generated queries that internal/infra sends several at a time
// in one pgx.Batch (one network round trip). Arguments and result columns
// are exactly those of the generated method of the same name. Hand-written:
// sqlc does not touch this file, and a query renamed or removed in
// db/queries breaks the build here.
const (
	ActorByTokenHashSQL          = actorByTokenHash
	ActorLockForOrderSQL         = actorLockForOrder
	ActorChargeBalanceSQL        = actorChargeBalance
	GuardsSetSQL                 = guardsSet
	IdempotencySetLockTimeoutSQL = idempotencySetLockTimeout
	IdempotencyClaimSQL          = idempotencyClaim
	IdempotencyGetSQL            = idempotencyGet
	IdempotencyReclaimExpiredSQL = idempotencyReclaimExpired
	IdempotencyCompleteSQL       = idempotencyComplete
	StockLockForUpdateSQL        = stockLockForUpdate
	StockAddDeltasSQL            = stockAddDeltas
	OrderInsertSQL               = orderInsert
	OrderLinesInsertSQL          = orderLinesInsert
	OrderGetSQL                  = orderGet
	OutboxInsertSQL              = outboxInsert
	OrderLinesGetSQL             = orderLinesGet
)
