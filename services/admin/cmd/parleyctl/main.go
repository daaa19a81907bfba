// parleyctl is the operator's command line for Parley: schema migrations,
// companies and their configuration, API keys, and the local demo seed.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/parleyhq/parley/services/admin/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Environ(), cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
