package apikey

import (
	"errors"
	mathrand "math/rand/v2"
	"strings"
	"testing"
)

func TestGenerateParseRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		full, p, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		if len(full) != Len || !strings.HasPrefix(full, "service_") {
			t.Fatalf("generated %q: wrong shape", full)
		}
		got, err := Parse(full)
		if err != nil {
			t.Fatalf("Parse(%q): %v", full, err)
		}
		if got != p {
			t.Fatalf("Parse = %+v, Generate said %+v", got, p)
		}
		if seen[p.KeyID] {
			t.Fatalf("key id %s generated twice", p.KeyID)
		}
		seen[p.KeyID] = true
		if !SecretMatches(p.Secret, HashSecret(p.Secret)) {
			t.Fatal("secret does not match its own hash")
		}
	}
}

func TestParseRejects(t *testing.T) {
	full, _, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) string {
		b := []byte(full)
		if b[i] == 'a' {
			b[i] = 'b'
		} else {
			b[i] = 'a'
		}
		return string(b)
	}
	cases := map[string]string{
		"empty":                 "",
		"no prefix":             strings.TrimPrefix(full, "service_"),
		"other prefix":          "servicx_" + full[8:],
		"truncated":             full[:len(full)-1],
		"extra character":       full + "a",
		"typo in key id":        flip(10),
		"typo in secret":        flip(30),
		"typo in checksum":      flip(len(full) - 1),
		"delimiter replaced":    full[:24] + "-" + full[25:],
		"upper-case key id":     "service_" + strings.ToUpper(full[8:24]) + full[24:],
		"spaces around":         " " + full[:len(full)-1],
		"forged shape, no csum": "service_abcdefghijklmnop_" + strings.Repeat("A", 38),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse(in); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) err = %v, want ErrMalformed", in, err)
			}
		})
	}
}

func TestSecretMatchesRejectsOtherSecret(t *testing.T) {
	_, a, _ := Generate()
	_, b, _ := Generate()
	if SecretMatches(b.Secret, HashSecret(a.Secret)) {
		t.Fatal("a different secret matched")
	}
}

func TestMaskShowsOnlyHint(t *testing.T) {
	_, p, _ := Generate()
	m := Mask(p.KeyID, Hint(p.Secret))
	if strings.Contains(m, p.Secret[:randomLen-4]) || !strings.HasSuffix(m, p.Secret[len(p.Secret)-4:]) || !strings.Contains(m, p.KeyID) {
		t.Fatalf("Mask = %q", m)
	}
}

func TestGenerateFromIsDeterministic(t *testing.T) {
	material := func(seed byte) *mathrand.ChaCha8 { return mathrand.NewChaCha8([32]byte{seed}) }
	a, pa, err := GenerateFrom(material(1))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := GenerateFrom(material(1))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("same material gave %q and %q", a, b)
	}
	if got, err := Parse(a); err != nil || got != pa {
		t.Fatalf("Parse(%q) = %+v, %v; want %+v", a, got, err, pa)
	}
	c, _, err := GenerateFrom(material(2))
	if err != nil {
		t.Fatal(err)
	}
	if c == a {
		t.Fatal("different material gave the same key")
	}
	if _, _, err := GenerateFrom(strings.NewReader("too short")); err == nil {
		t.Fatal("GenerateFrom accepted material that ran out")
	}
}
