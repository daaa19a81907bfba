package config

import (
	"os"
	"testing"

	"github.com/parleyhq/parley/pkg/envdoc"
)

// The README's configuration table must name every variable this service
// reads, with its default.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range envdoc.Undocumented(string(readme), envdoc.Vars(Config{})) {
		t.Errorf("README.md's configuration table lacks the row %s ... (or gives another default)", envdoc.Row(v))
	}
}
