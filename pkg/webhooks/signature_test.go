package webhooks_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/webhooks"
)

// The Standard Webhooks specification's test vector
// (standard-webhooks/standard-webhooks, libraries' test suites).
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignMatchesTheStandardWebhooksVector(t *testing.T) {
	key, err := webhooks.ParseSecret(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	got := webhooks.Sign([][]byte{key}, vectorID, time.Unix(vectorTS, 0), []byte(vectorBody))
	if got != vectorSig {
		t.Fatalf("Sign = %q, want %q", got, vectorSig)
	}
	if err := webhooks.Verify([][]byte{key}, vectorID, time.Unix(vectorTS, 0), []byte(vectorBody), got); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

func TestSignSeveralSecretsAndVerify(t *testing.T) {
	oldKey, _ := webhooks.ParseSecret(vectorSecret)
	s, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s, "whsec_") {
		t.Fatalf("NewSecret = %q", s)
	}
	newKey, err := webhooks.ParseSecret(s)
	if err != nil || len(newKey) != 32 {
		t.Fatalf("ParseSecret(NewSecret()) = %d bytes, %v", len(newKey), err)
	}
	ts := time.Unix(vectorTS, 0)
	header := webhooks.Sign([][]byte{newKey, oldKey}, vectorID, ts, []byte(vectorBody))
	parts := strings.Split(header, " ")
	if len(parts) != 2 || parts[1] != vectorSig || !strings.HasPrefix(parts[0], "v1,") {
		t.Fatalf("header = %q", header)
	}
	// A receiver holding either secret verifies it.
	for _, key := range [][]byte{oldKey, newKey} {
		if err := webhooks.Verify([][]byte{key}, vectorID, ts, []byte(vectorBody), header); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	}
	other, _ := webhooks.ParseSecret("whsec_" + strings.Repeat("A", 32))
	cases := map[string]func() error{
		"other secret": func() error { return webhooks.Verify([][]byte{other}, vectorID, ts, []byte(vectorBody), header) },
		"other body":   func() error { return webhooks.Verify([][]byte{oldKey}, vectorID, ts, []byte(`{"test": 1}`), header) },
		"other id":     func() error { return webhooks.Verify([][]byte{oldKey}, "msg_x", ts, []byte(vectorBody), header) },
		"other time": func() error {
			return webhooks.Verify([][]byte{oldKey}, vectorID, ts.Add(time.Second), []byte(vectorBody), header)
		},
		"v2 only": func() error {
			return webhooks.Verify([][]byte{oldKey}, vectorID, ts, []byte(vectorBody), strings.Replace(vectorSig, "v1,", "v2,", 1))
		},
	}
	for name, f := range cases {
		if err := f(); !errors.Is(err, webhooks.ErrNoMatchingSignature) {
			t.Errorf("%s: Verify = %v, want ErrNoMatchingSignature", name, err)
		}
	}
}

func TestVerifyRequestChecksHeadersAndTolerance(t *testing.T) {
	key, _ := webhooks.ParseSecret(vectorSecret)
	ts := time.Unix(vectorTS, 0)
	h := http.Header{}
	h.Set(webhooks.HeaderID, vectorID)
	h.Set(webhooks.HeaderTimestamp, strconv.FormatInt(vectorTS, 10))
	h.Set(webhooks.HeaderSignature, vectorSig)
	if err := webhooks.VerifyRequest([][]byte{key}, h, []byte(vectorBody), ts.Add(time.Minute), webhooks.DefaultTolerance); err != nil {
		t.Fatalf("VerifyRequest: %v", err)
	}
	if err := webhooks.VerifyRequest([][]byte{key}, h, []byte(vectorBody), ts.Add(10*time.Minute), webhooks.DefaultTolerance); err == nil {
		t.Fatal("a 10-minute-old timestamp passed")
	}
	h.Del(webhooks.HeaderID)
	if err := webhooks.VerifyRequest([][]byte{key}, h, []byte(vectorBody), ts, webhooks.DefaultTolerance); err == nil {
		t.Fatal("a request without webhook-id passed")
	}
}

func TestParseSecretRefusesBadSecrets(t *testing.T) {
	for _, s := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_c2hvcnQ="} {
		if _, err := webhooks.ParseSecret(s); err == nil {
			t.Errorf("ParseSecret(%q) accepted", s)
		}
	}
}
