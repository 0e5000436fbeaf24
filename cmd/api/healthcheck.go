package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// healthcheck runs `api healthcheck`: exit 0 when the server on HTTP_ADDR's
// port answers /readyz with 200 (for images without curl).
func healthcheck(ctx context.Context, getenv func(string) string) error {
	c, err := loadConfig(getenv, false)
	if err != nil {
		return err
	}
	_, port, err := net.SplitHostPort(c.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP_ADDR %q: %w", c.HTTPAddr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+port+"/readyz", nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: /readyz answered %d", res.StatusCode)
	}
	return nil
}
