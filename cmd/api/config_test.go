package main

import "testing"

func TestBenchmarkSwitchesAreOffByDefault(t *testing.T) {
	env := map[string]string{"DATABASE_URL": "postgres://x@localhost/db"}
	c, err := loadConfig(func(k string) string { return env[k] }, true)
	if err != nil {
		t.Fatal(err)
	}
	if c.BenchDisableIdempotency {
		t.Error("BENCH_DISABLE_IDEMPOTENCY is on without being set")
	}
	if c.PprofAddr != "" {
		t.Errorf("PPROF_ADDR defaults to %q, want off", c.PprofAddr)
	}
}

func TestBenchDisableIdempotencyParsing(t *testing.T) {
	for v, want := range map[string]bool{"1": true, "true": true, "0": false, "false": false} {
		env := map[string]string{"DATABASE_URL": "postgres://x@localhost/db", "BENCH_DISABLE_IDEMPOTENCY": v}
		c, err := loadConfig(func(k string) string { return env[k] }, true)
		if err != nil || c.BenchDisableIdempotency != want {
			t.Errorf("BENCH_DISABLE_IDEMPOTENCY=%s: got %v, %v; want %v", v, c.BenchDisableIdempotency, err, want)
		}
	}
	env := map[string]string{"DATABASE_URL": "postgres://x@localhost/db", "BENCH_DISABLE_IDEMPOTENCY": "yes"}
	if _, err := loadConfig(func(k string) string { return env[k] }, true); err == nil {
		t.Error("BENCH_DISABLE_IDEMPOTENCY=yes was accepted; only 1/true/0/false are")
	}
}
