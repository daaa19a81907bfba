package config

import (
	"testing"

	"github.com/parleyhq/parley/pkg/envdoc"
)

// docs/configuration.md's table must name every variable this service
// reads, with its default.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	envdoc.CheckREADME(t, "../../../../docs/configuration.md", Config{})
}
