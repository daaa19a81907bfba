package delivery

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// The provider settings have one default each: the environment's defaults
// are the WhatsApp client's own.
func TestProviderDefaultsAreTheClientDefaults(t *testing.T) {
	typ := reflect.TypeOf(ProviderConfig{})
	tag := func(field string) string {
		f, ok := typ.FieldByName(field)
		if !ok {
			t.Fatalf("ProviderConfig has no field %s", field)
		}
		return f.Tag.Get("envDefault")
	}
	if d, err := time.ParseDuration(tag("Timeout")); err != nil || d != whatsapp.DefaultTimeout {
		t.Errorf("PARLEY_WHATSAPP_TIMEOUT defaults to %q, the client to %s", tag("Timeout"), whatsapp.DefaultTimeout)
	}
	if got := tag("BaseURL"); got != whatsapp.DefaultBaseURL {
		t.Errorf("PARLEY_WHATSAPP_BASE_URL defaults to %q, the client to %q", got, whatsapp.DefaultBaseURL)
	}
	if got := tag("APIVersion"); got != whatsapp.DefaultAPIVersion {
		t.Errorf("PARLEY_WHATSAPP_API_VERSION defaults to %q, the client to %q", got, whatsapp.DefaultAPIVersion)
	}
	if got := tag("MaxConns"); got != strconv.Itoa(whatsapp.DefaultMaxConnsPerHost) {
		t.Errorf("PARLEY_WHATSAPP_MAX_CONNS defaults to %q, the client to %d", got, whatsapp.DefaultMaxConnsPerHost)
	}
}
