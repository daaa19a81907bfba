package secretbox

import (
	"errors"
	"testing"
)

func TestSealOpen(t *testing.T) {
	b, err := New(DevKey)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := b.Seal("EAAG-token")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Open(sealed); err != nil || got != "EAAG-token" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := b.Open(sealed); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("tampered value opened: %v", err)
	}
	if err := (Config{Key: "short"}).Validate(); err == nil {
		t.Fatal("a bad key passed Validate")
	}
}
