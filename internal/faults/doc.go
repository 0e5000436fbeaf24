// Package faults holds the fault-injection tests: a client that disconnects
// mid-request, a server killed with SIGKILL under load, and a database that
// goes away and comes back. It has no code of its own.
package faults
