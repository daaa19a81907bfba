// Package secretbox encrypts secrets kept in PostgreSQL (the provider access
// tokens) with AES-256-GCM. The stored form is nonce || ciphertext.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
)

// DevKey is the key used when PARLEY_TOKEN_KEY is not set: fine on a
// developer machine, never in production (services log a warning).
const DevKey = "cGFybGV5LWRldmVsb3BtZW50LWtleS0zMi1ieXRlcyE="

// Config is the encryption key part of a service's configuration.
type Config struct {
	// Base64 of 32 random bytes: `head -c32 /dev/urandom | base64`.
	Key string `env:"PARLEY_TOKEN_KEY" envDefault:"cGFybGV5LWRldmVsb3BtZW50LWtleS0zMi1ieXRlcyE="`
}

// IsDevKey reports whether the configuration uses the development key.
func (c Config) IsDevKey() bool { return c.Key == DevKey }

// Validate reports a key that is not base64 of 32 bytes.
func (c Config) Validate() error {
	if _, err := New(c.Key); err != nil {
		return fmt.Errorf("PARLEY_TOKEN_KEY: %w", err)
	}
	return nil
}

// Box seals and opens secrets with one key.
type Box struct{ aead cipher.AEAD }

// New returns a box for a base64-encoded 32-byte key.
func New(b64Key string) (*Box, error) {
	key, err := base64.StdEncoding.DecodeString(b64Key)
	if err != nil {
		return nil, fmt.Errorf("key is not base64: %w", err)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("key is %d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plaintext with a fresh random nonce.
func (b *Box) Seal(plaintext string) ([]byte, error) {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return b.aead.Seal(nonce, nonce, []byte(plaintext), nil), nil
}

// ErrCorrupt is a sealed value that does not open with this key.
var ErrCorrupt = errors.New("secretbox: value does not open with this key")

// Open decrypts what Seal produced.
func (b *Box) Open(sealed []byte) (string, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return "", ErrCorrupt
	}
	out, err := b.aead.Open(nil, sealed[:n], sealed[n:], nil)
	if err != nil {
		return "", ErrCorrupt
	}
	return string(out), nil
}
