// The campaign dispatcher delivers campaign batches from the SENDS stream to the channel provider.
package main

import (
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/services/dispatcher"
	"github.com/parleyhq/parley/services/dispatcher/internal/config"
)

func main() { dispatcher.Main[config.Campaign]("campaign-dispatcher", record.LaneCampaign) }
