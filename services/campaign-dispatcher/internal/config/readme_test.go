package config

import (
	"testing"

	"github.com/parleyhq/parley/pkg/envdoc"
)

// docs/configuration.md's table must name every variable this service
// reads, with its default.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	if err := envdoc.CheckREADME("../../../../docs/configuration.md", Config{}); err != nil {
		t.Error(err)
	}
}
