package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The parsers of the settings table (config.go): each takes a value and
// stores it in its field of config, or says what is wrong with it.

// errSecret is a setting's error whose value must not be printed.
type errSecret struct{ err error }

func (e errSecret) Error() string { return e.err.Error() }

// databaseURLInto takes a connection string that pgx can parse, so that a
// malformed one is refused at start under its own variable's name (not as
// DATABASE_URL when MIGRATE_DATABASE_URL was wrong). The value may hold a
// password: the error does not repeat it.
func databaseURLInto(field func(*config) *string) func(*config, string) error {
	return func(c *config, v string) error {
		if _, err := pgxpool.ParseConfig(v); err != nil {
			return errSecret{errors.New("not a PostgreSQL connection string (postgres://user:pass@host:5432/db?sslmode=disable)")}
		}
		*field(c) = v
		return nil
	}
}

// durationInto parses a duration of at least 1ms: none of the intervals,
// timeouts and periods of the service means anything shorter, and a period
// of nanoseconds would make its worker spin.
func durationInto(field func(*config) *time.Duration) func(*config, string) error {
	return func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("not a duration such as 5s or 24h")
		}
		if d < time.Millisecond {
			return fmt.Errorf("must be at least 1ms")
		}
		*field(c) = d
		return nil
	}
}

// maxGuard is the longest timeout PostgreSQL accepts (statement_timeout,
// lock_timeout, idle_in_transaction_session_timeout are int milliseconds).
const maxGuard = 2_147_483_647 * time.Millisecond

// guardInto parses a duration that the service sends to PostgreSQL as a
// guard timeout, in whole milliseconds: from 1ms to 2,147,483,647ms (about
// 596h). Outside that, PostgreSQL would refuse the setting on every
// transaction (above) or the millisecond rendering would turn it into 0,
// which switches the guard off (below 1ms), so it is refused at start.
func guardInto(field func(*config) *time.Duration) func(*config, string) error {
	return func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("not a duration such as 5s or 24h")
		}
		if d < time.Millisecond || d > maxGuard || d%time.Millisecond != 0 {
			return fmt.Errorf("a PostgreSQL timeout: must be whole milliseconds from 1ms to 2147483647ms (about 596h)")
		}
		*field(c) = d
		return nil
	}
}

func intInto(lo, hi int, field func(*config) *int) func(*config, string) error {
	return func(c *config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("not an integer from %d to %d", lo, hi)
		}
		*field(c) = n
		return nil
	}
}
