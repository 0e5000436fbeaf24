package domain

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Cents is an amount of money in integer cents. Money is never a float.
type Cents int64

// MaxCents bounds every amount so that sums of up to 50 lines of 1,000 units
// cannot overflow int64.
const MaxCents Cents = 1_000_000_000_00 // 1 billion in currency units

// ParseCents accepts a non-negative amount up to MaxCents.
func ParseCents(v int64) (Cents, error) {
	if v < 0 {
		return 0, fmt.Errorf("must not be negative")
	}
	if Cents(v) > MaxCents {
		return 0, fmt.Errorf("must be at most %d", MaxCents)
	}
	return Cents(v), nil
}

// Quantity is a number of units on an order line.
type Quantity int32

// Quantity bounds.
const (
	MinQuantity Quantity = 1
	MaxQuantity Quantity = 1000
)

// ParseQuantity accepts 1 to 1000 units.
func ParseQuantity(v int64) (Quantity, error) {
	if v < int64(MinQuantity) || v > int64(MaxQuantity) {
		return 0, fmt.Errorf("must be between %d and %d", MinQuantity, MaxQuantity)
	}
	return Quantity(v), nil
}

// SKU is a product's stock-keeping unit, unique across the catalogue.
type SKU string

var skuPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ParseSKU accepts 1 to 64 letters, digits, dots, underscores and dashes.
func ParseSKU(v string) (SKU, error) {
	if !skuPattern.MatchString(v) {
		return "", fmt.Errorf("must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' or '-'")
	}
	return SKU(v), nil
}

// ParseName accepts a name or a reason: ParseText with at most 200
// characters.
func ParseName(v string) (string, error) { return ParseText(v, 200) }

// ParseText accepts 1 to maxChars characters of valid UTF-8 text without control
// characters (U+0000 to U+001F, U+007F to U+009F) and not only spaces: one
// line of text that says something. PostgreSQL refuses U+0000 in text
// outright (SQLSTATE 22021), and the others would reach logs, terminals and
// webhook receivers as commands rather than text.
func ParseText(v string, maxChars int) (string, error) {
	n := utf8.RuneCountInString(v)
	if !utf8.ValidString(v) || n < 1 || n > maxChars {
		return "", fmt.Errorf("must be 1 to %d characters", maxChars)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return "", fmt.Errorf("must not contain control characters (U+%04X found)", r)
		}
	}
	if strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("must not be blank")
	}
	return v, nil
}

// Version is an aggregate's persistence version. It starts at 1 and advances
// by one on every committed change. A write that names the version it read
// applies only while it is current (optimistic concurrency); a transport
// exposes it in its own terms.
type Version int64

// Role is what an actor may do. Its zero value is no role, and the only roles
// are RoleCustomer and RoleStaff: a Role cannot be made from an arbitrary string.
type Role struct{ name string }

// The roles.
var (
	RoleCustomer = Role{"customer"}
	RoleStaff    = Role{"staff"}
)

// ParseRole accepts "customer" or "staff".
func ParseRole(v string) (Role, error) {
	switch v {
	case RoleCustomer.name:
		return RoleCustomer, nil
	case RoleStaff.name:
		return RoleStaff, nil
	}
	return Role{}, fmt.Errorf("must be customer or staff")
}

func (r Role) String() string { return r.name }

// CodeLastStaff is the outcome of a change that would leave no active staff
// member to run the service.
const CodeLastStaff Code = "last_staff"

// Actor is a caller of the API.
type Actor struct {
	ID               uuid.UUID
	Name             string
	Role             Role
	CreditLimitCents Cents
	Active           bool
	CreatedAt        time.Time
}
