package postgres

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

func TestUUIDCodecEncodesAndScansDirectly(t *testing.T) {
	m := pgtype.NewMap()
	registerUUID(m)
	id := uuid.MustParse("01a237b6-85a5-7acf-9996-41632f2c0246")
	for _, format := range []int16{pgtype.BinaryFormatCode, pgtype.TextFormatCode} {
		buf, err := m.Encode(pgtype.UUIDOID, format, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		var back uuid.UUID
		if err := m.Scan(pgtype.UUIDOID, format, buf, &back); err != nil || back != id {
			t.Fatalf("format %d: %v %v", format, back, err)
		}
		// pgtype's own representation decodes what the codec encoded.
		var std pgtype.UUID
		if err := m.Scan(pgtype.UUIDOID, format, buf, &std); err != nil || uuid.UUID(std.Bytes) != id {
			t.Fatalf("format %d: pgtype.UUID %v %v", format, std, err)
		}
		var null uuid.UUID = id
		if err := m.Scan(pgtype.UUIDOID, format, nil, &null); err != nil || null != uuid.Nil {
			t.Fatalf("format %d: NULL scanned as %v, %v", format, null, err)
		}
	}
	ids := []uuid.UUID{id, uuid.Nil, uuid.Max}
	buf, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	var back []uuid.UUID
	if err := m.Scan(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, buf, &back); err != nil || len(back) != 3 || back[0] != id || back[2] != uuid.Max {
		t.Fatalf("array: %v %v", back, err)
	}
}

// BenchmarkUUIDEncode compares pgx's default path for uuid.UUID (its
// driver.Valuer: String, then parse) with the registered codec.
func BenchmarkUUIDEncode(b *testing.B) {
	id := uuid.MustParse("01a237b6-85a5-7acf-9996-41632f2c0246")
	ids := []uuid.UUID{id, id, id}
	for _, c := range []struct {
		name string
		reg  bool
	}{{"default", false}, {"registered", true}} {
		m := pgtype.NewMap()
		if c.reg {
			registerUUID(m)
		}
		buf := make([]byte, 0, 256)
		b.Run(c.name+"/one", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/array3", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
		src, _ := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id, nil)
		b.Run(c.name+"/scan", func(b *testing.B) {
			b.ReportAllocs()
			var u uuid.UUID
			for b.Loop() {
				if err := m.Scan(pgtype.UUIDOID, pgtype.BinaryFormatCode, src, &u); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
