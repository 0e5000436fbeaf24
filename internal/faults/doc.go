// Package faults holds the fault-injection tests: a client that disconnects
// mid-request, a server killed with SIGKILL under load, a database that goes
// away and comes back, and a connection cut at COMMIT (before it is sent, or
// after it was executed with its answer lost). It has no code of its own.
package faults
