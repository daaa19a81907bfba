package config

import (
	"testing"

	"github.com/parleyhq/parley/pkg/envdoc"
)

// The README's configuration table must name every variable this service
// reads, with its default.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	envdoc.CheckREADME(t, "../../../../README.md", Config{})
}
