// probed is a stand-in service for serviceproc's tests: it serves /healthz
// and /env on PROBED_ADDR until SIGTERM, or fails at start when told to.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	if msg := os.Getenv("PROBED_FAIL"); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(3)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/env", func(w http.ResponseWriter, _ *http.Request) {
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "PARLEY_") {
				fmt.Fprintln(w, kv)
			}
		}
	})
	srv := &http.Server{Addr: os.Getenv("PROBED_ADDR"), Handler: mux}
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
	fmt.Println("probed listening")
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
