// Package db holds the schema migrations, embedded so that the api binary can
// migrate a database with nothing else on disk.
package db

import "embed"

// Migrations are the goose migrations, applied in file-name order.
//
//go:embed migrations/*.sql
var Migrations embed.FS
