package config

import (
	"testing"

	"github.com/parleyhq/parley/pkg/envdoc"
)

// docs/configuration.md's table must name every variable each command
// reads, with its default.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	for _, cfg := range []any{Campaign{}, Automation{}} {
		if err := envdoc.CheckREADME("../../../../docs/configuration.md", cfg); err != nil {
			t.Error(err)
		}
	}
}
