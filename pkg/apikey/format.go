// Package apikey is the company API key: its format, its hash, and its
// lifecycle in the database (create, rotate with a 24-hour grace, revoke).
//
// A key reads service_<key_id>_<secret>:
//
//	key_id  16 characters [a-z0-9], random, public: the row to look up
//	secret  32 characters [A-Za-z0-9] (190 random bits from crypto/rand)
//	        followed by 6 characters [A-Za-z0-9]: CRC-32 (IEEE) of
//	        "service_<key_id>_<first 32>", base62, zero-padded
//
// The checksum lets the gateway turn away a mistyped or made-up key without a
// database lookup. Only SHA-256(secret) is stored; the secret is compared in
// constant time.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"hash/crc32"
	"io"
	"strings"
)

const (
	prefix      = "service_"
	keyIDLen    = 16
	randomLen   = 32
	checksumLen = 6
	secretLen   = randomLen + checksumLen
	// Len is the length of every well-formed key.
	Len = len(prefix) + keyIDLen + 1 + secretLen

	lowerAlnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	base62     = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// ErrMalformed is a value that is not a well-formed key (wrong shape or checksum).
var ErrMalformed = errors.New("malformed API key")

// Parsed is a well-formed key split into its parts.
type Parsed struct {
	KeyID  string
	Secret string
}

// Parse checks the shape and checksum of a full key. It does no I/O.
func Parse(full string) (Parsed, error) {
	if len(full) != Len || !strings.HasPrefix(full, prefix) {
		return Parsed{}, ErrMalformed
	}
	rest := full[len(prefix):]
	keyID, secret := rest[:keyIDLen], rest[keyIDLen+1:]
	if rest[keyIDLen] != '_' || !all(keyID, lowerAlnum) || !all(secret, base62) {
		return Parsed{}, ErrMalformed
	}
	want := checksum(prefix + keyID + "_" + secret[:randomLen])
	if subtle.ConstantTimeCompare([]byte(want), []byte(secret[randomLen:])) != 1 {
		return Parsed{}, ErrMalformed
	}
	return Parsed{KeyID: keyID, Secret: secret}, nil
}

// Generate makes a new key from crypto/rand.
func Generate() (full string, p Parsed, err error) { return GenerateFrom(rand.Reader) }

// GenerateFrom makes a key from the bytes of r, which must be uniformly
// random (crypto/rand) or the output of a key-derivation function: the same
// bytes give the same key, which is how `parleyctl seed` derives a demo key
// that it can print again while only its hash is stored.
func GenerateFrom(r io.Reader) (full string, p Parsed, err error) {
	keyID, err := randomString(r, keyIDLen, lowerAlnum)
	if err != nil {
		return "", Parsed{}, err
	}
	random, err := randomString(r, randomLen, base62)
	if err != nil {
		return "", Parsed{}, err
	}
	head := prefix + keyID + "_" + random
	full = head + checksum(head)
	return full, Parsed{KeyID: keyID, Secret: full[len(prefix)+keyIDLen+1:]}, nil
}

// HashSecret is what the database stores for a secret.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// SecretMatches compares a presented secret with a stored hash in constant time.
func SecretMatches(secret string, storedHash []byte) bool {
	return subtle.ConstantTimeCompare(HashSecret(secret), storedHash) == 1
}

// Hint is the part of the secret that may be shown again: its last 4 characters.
func Hint(secret string) string { return secret[len(secret)-4:] }

// Mask renders a key for display after creation: prefix and key id visible,
// the secret hidden but for its hint.
func Mask(keyID, hint string) string {
	return prefix + keyID + "_" + strings.Repeat("•", 12) + hint
}

func checksum(s string) string {
	n := crc32.ChecksumIEEE([]byte(s))
	out := make([]byte, checksumLen)
	for i := checksumLen - 1; i >= 0; i-- {
		out[i] = base62[n%62]
		n /= 62
	}
	return string(out)
}

func randomString(r io.Reader, n int, alphabet string) (string, error) {
	// Rejection sampling keeps every character uniform.
	limit := 256 - 256%len(alphabet)
	out := make([]byte, 0, n)
	buf := make([]byte, n*2)
	for len(out) < n {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		for _, b := range buf {
			if int(b) < limit && len(out) < n {
				out = append(out, alphabet[int(b)%len(alphabet)])
			}
		}
	}
	return string(out), nil
}

func all(s, alphabet string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(alphabet, s[i]) < 0 {
			return false
		}
	}
	return true
}
