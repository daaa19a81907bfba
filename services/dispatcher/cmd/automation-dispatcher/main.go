// The automation dispatcher delivers automation triggers from the SENDS stream to the channel provider.
package main

import (
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/services/dispatcher"
	"github.com/parleyhq/parley/services/dispatcher/internal/config"
)

func main() { dispatcher.Main[config.Automation]("automation-dispatcher", record.LaneAutomation) }
