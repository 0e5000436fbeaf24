package postgres

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// The results the pipe hands back when it sent a statement in a batch of
// its own making (behind BEGIN, the guards or the token check).

// batchRow is the row of a one-statement batch; Scan also closes the batch.
type batchRow struct{ br pgx.BatchResults }

func (r batchRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	return firstErr(err, r.br.Close())
}

// batchRows are the rows of a one-statement batch; Close also closes it.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	return firstErr(r.Rows.Err(), r.err)
}

// failedBatch answers every read with the error that stopped the request
// (its token check was refused) and closes the results underneath.
type failedBatch struct {
	br  pgx.BatchResults
	err error
}

func (f failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f failedBatch) Query() (pgx.Rows, error)         { return errRows{err: f.err}, f.err }
func (f failedBatch) QueryRow() pgx.Row                { return errRows{err: f.err} }
func (f failedBatch) Tx() pgx.Tx                       { return nil }
func (f failedBatch) Close() error {
	_ = f.br.Close()
	return f.err
}

// errRows is a closed, empty result that carries an error.
type errRows struct{ err error }

func (r errRows) Close()                                       {}
func (r errRows) Err() error                                   { return r.err }
func (r errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r errRows) Next() bool                                   { return false }
func (r errRows) Scan(...any) error                            { return r.err }
func (r errRows) Values() ([]any, error)                       { return nil, r.err }
func (r errRows) RawValues() [][]byte                          { return nil }
func (r errRows) Conn() *pgx.Conn                              { return nil }
func (r errRows) TypeMap() *pgtype.Map                         { return nil }
