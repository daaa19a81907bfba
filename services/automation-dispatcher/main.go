// The automation dispatcher delivers automation triggers from the SENDS stream to the channel provider.
package main

import (
	"github.com/parleyhq/parley/pkg/delivery/dispatchsvc"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/services/automation-dispatcher/internal/config"
)

func main() {
	ops.Main("automation-dispatcher", config.Load, func(c config.Config) ops.LogConfig { return c.Log },
		newApp, (*dispatchsvc.Service).Run)
}
