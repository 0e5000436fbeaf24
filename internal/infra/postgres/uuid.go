package postgres

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// FAST PATH (docs/fast-path.md #5): the binary UUID codec.
//
// registerUUID teaches a connection's type map to send and read
// github.com/google/uuid.UUID as PostgreSQL uuid directly. Without it pgx
// sees a driver.Valuer and an sql.Scanner and goes through the 36-character
// text form both ways (String, then parse) for every id of every statement:
// a tenth of the service's CPU per order. Arrays (uuid[], for the product
// locks and the order lines) get the same codec: the array type is
// registered again because it captures its element type.
func registerUUID(m *pgtype.Map) {
	t := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}}
	m.RegisterType(t)
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: t}})
	// In the exec and simple_protocol modes (behind a transaction pooler)
	// pgx picks a parameter's type from its Go type alone.
	m.RegisterDefaultPgType(uuid.UUID{}, "uuid")
	m.RegisterDefaultPgType([]uuid.UUID{}, "_uuid")
}

// uuidCodec is pgtype.UUIDCodec plus plans for uuid.UUID and *uuid.UUID;
// every other Go type gets UUIDCodec's own plans.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(uuid.UUID); ok {
		switch format {
		case pgtype.BinaryFormatCode:
			return encodeUUIDBinary{}
		case pgtype.TextFormatCode:
			return encodeUUIDText{}
		}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok {
		switch format {
		case pgtype.BinaryFormatCode:
			return scanUUIDBinary{}
		case pgtype.TextFormatCode:
			return scanUUIDText{}
		}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type encodeUUIDBinary struct{}

func (encodeUUIDBinary) Encode(value any, buf []byte) ([]byte, error) {
	u := value.(uuid.UUID)
	return append(buf, u[:]...), nil
}

type encodeUUIDText struct{}

func (encodeUUIDText) Encode(value any, buf []byte) ([]byte, error) {
	u := value.(uuid.UUID)
	return append(buf, u.String()...), nil
}

// NULL scans as the zero UUID, as uuid.UUID's sql.Scanner leaves it.
type scanUUIDBinary struct{}

func (scanUUIDBinary) Scan(src []byte, target any) error {
	u := target.(*uuid.UUID)
	switch len(src) {
	case 0:
		if src == nil {
			*u = uuid.UUID{}
			return nil
		}
	case 16:
		copy(u[:], src)
		return nil
	}
	return fmt.Errorf("invalid length for uuid: %d", len(src))
}

type scanUUIDText struct{}

func (scanUUIDText) Scan(src []byte, target any) error {
	u := target.(*uuid.UUID)
	if src == nil {
		*u = uuid.UUID{}
		return nil
	}
	v, err := uuid.ParseBytes(src)
	if err != nil {
		return err
	}
	*u = v
	return nil
}
