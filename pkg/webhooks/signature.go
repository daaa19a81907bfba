package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers every delivery carries.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every signing secret: whsec_<base64 of the key>.
const SecretPrefix = "whsec_"

// secretBytes is the size of a generated key (the standard allows 24 to 64).
const secretBytes = 32

// DefaultTolerance is how far a webhook-timestamp may be from the receiver's
// clock before VerifyRequest refuses it (the standard's five minutes).
const DefaultTolerance = 5 * time.Minute

// NewSecret returns a fresh signing secret, whsec_<base64 of 32 random bytes>.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// ParseSecret returns the HMAC key of a whsec_ secret: the bytes its base64
// encodes.
func ParseSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, errors.New("webhook secret does not start with " + SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("webhook secret is not base64: %w", err)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("webhook secret is %d bytes, want 24 to 64", len(key))
	}
	return key, nil
}

// signature is base64(HMAC-SHA256(key, id.timestamp.body)).
func signature(key []byte, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Sign returns the webhook-signature header value for a delivery: one
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per key (the keys of
// ActiveSecrets, or ParseSecret's), space-separated, so that a receiver
// holding either the current or the rotated-out secret verifies it.
func Sign(secrets [][]byte, id string, ts time.Time, body []byte) string {
	var b strings.Builder
	for i, key := range secrets {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(signature(key, id, ts.Unix(), body))
	}
	return b.String()
}

// ErrNoMatchingSignature is a signature header none of whose v1 signatures
// was made with any of the receiver's secrets over this id, timestamp and body.
var ErrNoMatchingSignature = errors.New("webhook: no matching signature")

// Verify reports whether header (a webhook-signature value) holds a v1
// signature of id.timestamp.body made with one of secrets. Signatures of
// other versions are ignored, as the standard asks.
func Verify(secrets [][]byte, id string, ts time.Time, body []byte, header string) error {
	for _, key := range secrets {
		want := []byte(signature(key, id, ts.Unix(), body))
		for _, sig := range strings.Fields(header) {
			version, value, ok := strings.Cut(sig, ",")
			if ok && version == "v1" && hmac.Equal([]byte(value), want) {
				return nil
			}
		}
	}
	return ErrNoMatchingSignature
}

// VerifyRequest checks a received delivery's headers and body: the three
// headers are present, the timestamp is within tolerance of now (replays of
// an old delivery are refused) and the signature matches one of secrets.
func VerifyRequest(secrets [][]byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, tsText, sig := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsText == "" || sig == "" {
		return errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: bad webhook-timestamp %q", tsText)
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook: webhook-timestamp %d is more than %s from now", sec, tolerance)
	}
	return Verify(secrets, id, ts, body, sig)
}
