package store

// IsCheck is isCheck, for TestEveryQueryUsesAnIndex: the statements of
// `api check` may scan whole tables.
var IsCheck = isCheck
