package config

import (
	"reflect"
	"testing"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// The gateway's default app secret is the one whatsapp.IsDevAppSecret
// recognises, so that running with it is warned about.
func TestDefaultAppSecretIsTheDevSecret(t *testing.T) {
	f, ok := reflect.TypeOf(Config{}).FieldByName("WebhookAppSecret")
	if !ok {
		t.Fatal("Config has no WebhookAppSecret")
	}
	if def := f.Tag.Get("envDefault"); !whatsapp.IsDevAppSecret(def) {
		t.Fatalf("PARLEY_WEBHOOK_APP_SECRET defaults to %q, not whatsapp.DevAppSecret", def)
	}
	if whatsapp.IsDevAppSecret("a-real-secret") {
		t.Fatal("any secret is taken for the dev secret")
	}
}
