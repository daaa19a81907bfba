// healthcheck is the probe that docker-compose.yml runs inside a Parley
// container: the images are distroless, without a shell, curl or wget. It
// GETs one URL and exits 0 on a 2xx answer, 1 otherwise. Kubernetes does not
// need it: its probes call /healthz and /readyz themselves.
//
// It is a module of its own, outside go.work, because it is part of the
// images rather than of Parley: `GOWORK=off go build .` builds it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	if err := check(context.Background(), os.Args[1:], 3*time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "healthcheck: %v\n", err)
		os.Exit(1)
	}
}

// check GETs the one URL in args within timeout and accepts only a 2xx.
func check(ctx context.Context, args []string, timeout time.Duration) error {
	if len(args) != 1 {
		return errors.New("usage: healthcheck http://127.0.0.1:PORT/readyz")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return fmt.Errorf("request %s: %w", args[0], err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", args[0], err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("get %s: %s %s", args[0], resp.Status, body)
	}
	return nil
}
