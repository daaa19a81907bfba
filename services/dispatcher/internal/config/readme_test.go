package config

import (
	"testing"

	"github.com/parleyhq/parley/pkg/envdoc"
)

// The README's configuration table must name every variable each command
// reads, with its default.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	envdoc.CheckREADME(t, "../../../../README.md", Campaign{})
	envdoc.CheckREADME(t, "../../../../README.md", Automation{})
}
