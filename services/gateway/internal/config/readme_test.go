package config

import (
	"testing"

	"github.com/parleyhq/parley/pkg/envdoc"
)

// The README's configuration table must name every variable this service
// reads, with its default.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	if err := envdoc.CheckREADME("../../../../README.md", Config{}); err != nil {
		t.Error(err)
	}
}
