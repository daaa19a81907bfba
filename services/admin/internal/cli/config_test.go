package cli

import (
	"os"
	"regexp"
	"testing"

	"github.com/parleyhq/parley/pkg/envdoc"
)

// docs/configuration.md's table must name every variable parleyctl
// reads, with its default.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	if err := envdoc.CheckREADME("../../../../docs/configuration.md", Config{}); err != nil {
		t.Error(err)
	}
}

// make run hands provider-sim the demo account that seed stores; both sides
// must fall back to the same values.
func TestRunScriptAgreesOnTheDemoAccount(t *testing.T) {
	script, err := os.ReadFile("../../../../deploy/local/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range envdoc.Vars(DemoConfig{}) {
		m := regexp.MustCompile(`export ` + v.Name + `="\$\{` + v.Name + `:-([^}]*)\}"`).FindSubmatch(script)
		if m == nil {
			t.Errorf("deploy/local/run.sh does not export %s with a default", v.Name)
			continue
		}
		if string(m[1]) != v.Default {
			t.Errorf("deploy/local/run.sh defaults %s to %q, parleyctl to %q", v.Name, m[1], v.Default)
		}
	}
	if !regexp.MustCompile(`PARLEY_PROVIDER_SIM_ACCOUNTS:-\$PARLEY_DEMO_PHONE_NUMBER_ID:\$PARLEY_DEMO_ACCESS_TOKEN`).Match(script) {
		t.Error("deploy/local/run.sh does not give provider-sim the demo account")
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := LoadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Demo.PhoneNumberID == "" || cfg.PublishTimeout <= 0 || !cfg.Token.IsDevKey() {
		t.Fatalf("defaults = %+v", cfg)
	}
	cfg, err = LoadConfig([]string{"PARLEY_DEMO_PHONE_NUMBER_ID=15550109999", "PARLEY_CLI_PUBLISH_TIMEOUT=1s"})
	if err != nil || cfg.Demo.PhoneNumberID != "15550109999" || cfg.PublishTimeout.Seconds() != 1 {
		t.Fatalf("overrides: %+v, %v", cfg, err)
	}
	if _, err := LoadConfig([]string{"PARLEY_DEMO_PHONE_NUMBER_ID=+1555", "PARLEY_CLI_PUBLISH_TIMEOUT=0s"}); err == nil {
		t.Fatal("an invalid demo phone number id and timeout were accepted")
	}
}
