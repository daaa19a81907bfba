// Package config reads provider-sim's configuration from the environment, once.
package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/envconfig"
	"github.com/parleyhq/parley/pkg/ops"
)

// Config is everything provider-sim can be told. The defaults run a
// healthy simulator on :9090 with callbacks off; accounts come from
// PARLEY_PROVIDER_SIM_ACCOUNTS or PUT /_sim/accounts/{id}.
type Config struct {
	Addr string `env:"PARLEY_PROVIDER_SIM_ADDR" envDefault:":9090"`
	// Accounts are "<phone_number_id>:<token>[:<per_second>]", comma separated.
	Accounts []string `env:"PARLEY_PROVIDER_SIM_ACCOUNTS" envSeparator:","`
	// Throughput is the default sends per second of a number (130429 past it).
	Throughput int `env:"PARLEY_PROVIDER_SIM_THROUGHPUT" envDefault:"80"`

	Latency      time.Duration `env:"PARLEY_PROVIDER_SIM_LATENCY" envDefault:"0s"`
	Jitter       time.Duration `env:"PARLEY_PROVIDER_SIM_JITTER" envDefault:"0s"`
	ErrorRate    float64       `env:"PARLEY_PROVIDER_SIM_ERROR_RATE" envDefault:"0"`
	TimeoutRate  float64       `env:"PARLEY_PROVIDER_SIM_TIMEOUT_RATE" envDefault:"0"`
	PairInterval time.Duration `env:"PARLEY_PROVIDER_SIM_PAIR_INTERVAL" envDefault:"0s"`
	// Undeliverable numbers, comma separated; "+39333*" is a prefix.
	Undeliverable []string      `env:"PARLEY_PROVIDER_SIM_UNDELIVERABLE" envSeparator:","`
	HangMax       time.Duration `env:"PARLEY_PROVIDER_SIM_HANG_MAX" envDefault:"2m"`

	CallbackURL    string        `env:"PARLEY_PROVIDER_SIM_CALLBACK_URL"`
	AppSecret      string        `env:"PARLEY_PROVIDER_SIM_APP_SECRET"`
	SentDelay      time.Duration `env:"PARLEY_PROVIDER_SIM_SENT_DELAY" envDefault:"50ms"`
	DeliveredDelay time.Duration `env:"PARLEY_PROVIDER_SIM_DELIVERED_DELAY" envDefault:"500ms"`
	ReadDelay      time.Duration `env:"PARLEY_PROVIDER_SIM_READ_DELAY" envDefault:"2s"`
	Read           bool          `env:"PARLEY_PROVIDER_SIM_READ" envDefault:"true"`
	// ReadAtOnce is the share of messages read as they arrive (read
	// without delivered, as the Cloud API sends it).
	ReadAtOnce       float64       `env:"PARLEY_PROVIDER_SIM_READ_AT_ONCE" envDefault:"0"`
	CallbackQueue    int           `env:"PARLEY_PROVIDER_SIM_CALLBACK_QUEUE" envDefault:"100000"`
	CallbackBatch    int           `env:"PARLEY_PROVIDER_SIM_CALLBACK_BATCH" envDefault:"50"`
	CallbackWorkers  int           `env:"PARLEY_PROVIDER_SIM_CALLBACK_WORKERS" envDefault:"4"`
	CallbackTimeout  time.Duration `env:"PARLEY_PROVIDER_SIM_CALLBACK_TIMEOUT" envDefault:"5s"`
	CallbackAttempts int           `env:"PARLEY_PROVIDER_SIM_CALLBACK_ATTEMPTS" envDefault:"3"`

	MessageBuffer int `env:"PARLEY_PROVIDER_SIM_MESSAGE_BUFFER" envDefault:"10000"`
	MaxRecipients int `env:"PARLEY_PROVIDER_SIM_MAX_RECIPIENTS" envDefault:"200000"`

	Log ops.LogConfig
}

// Load reads and validates the configuration.
func Load() (Config, error) { return envconfig.Load[Config]() }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("PARLEY_PROVIDER_SIM_ADDR is empty"))
	}
	if _, err := c.accounts(); err != nil {
		errs = append(errs, err)
	}
	positive := []struct {
		name string
		v    int
	}{
		{"PARLEY_PROVIDER_SIM_THROUGHPUT", c.Throughput},
		{"PARLEY_PROVIDER_SIM_CALLBACK_QUEUE", c.CallbackQueue},
		{"PARLEY_PROVIDER_SIM_CALLBACK_BATCH", c.CallbackBatch},
		{"PARLEY_PROVIDER_SIM_CALLBACK_WORKERS", c.CallbackWorkers},
		{"PARLEY_PROVIDER_SIM_CALLBACK_ATTEMPTS", c.CallbackAttempts},
		{"PARLEY_PROVIDER_SIM_MESSAGE_BUFFER", c.MessageBuffer},
		{"PARLEY_PROVIDER_SIM_MAX_RECIPIENTS", c.MaxRecipients},
	}
	for _, p := range positive {
		if p.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", p.name, p.v))
		}
	}
	if c.HangMax <= 0 || c.CallbackTimeout <= 0 {
		errs = append(errs, errors.New("PARLEY_PROVIDER_SIM_HANG_MAX and PARLEY_PROVIDER_SIM_CALLBACK_TIMEOUT must be positive"))
	}
	// The simulator checks the switches the same way for the environment
	// and for its admin endpoints.
	sc := c.simConfigUnchecked(nil)
	if err := sc.Faults.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := sc.Callbacks.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, c.Log.Validate())...)
}

// SimConfig is the simulator's configuration (without logger and registry,
// which the app adds).
func (c Config) SimConfig() (whatsappsim.Config, error) {
	accs, err := c.accounts()
	if err != nil {
		return whatsappsim.Config{}, err
	}
	return c.simConfigUnchecked(accs), nil
}

func (c Config) simConfigUnchecked(accs []whatsappsim.Account) whatsappsim.Config {
	return whatsappsim.Config{
		Accounts:   accs,
		Throughput: c.Throughput,
		Faults: whatsappsim.Faults{
			Latency: c.Latency, Jitter: c.Jitter,
			ErrorRate: c.ErrorRate, TimeoutRate: c.TimeoutRate,
			PairInterval: c.PairInterval, Undeliverable: c.Undeliverable,
		},
		Callbacks: whatsappsim.CallbackConfig{
			CallbackSettings: whatsappsim.CallbackSettings{
				URL: c.CallbackURL, AppSecret: c.AppSecret,
				SentDelay: c.SentDelay, DeliveredDelay: c.DeliveredDelay, ReadDelay: c.ReadDelay,
				NoRead: !c.Read, ReadAtOnce: c.ReadAtOnce,
			},
			QueueSize: c.CallbackQueue, BatchSize: c.CallbackBatch, Workers: c.CallbackWorkers,
			Timeout: c.CallbackTimeout, MaxAttempts: c.CallbackAttempts,
		},
		MessageBuffer: c.MessageBuffer,
		MaxRecipients: c.MaxRecipients,
		HangMax:       c.HangMax,
	}
}

// accounts parses PARLEY_PROVIDER_SIM_ACCOUNTS; its errors never repeat a token.
func (c Config) accounts() ([]whatsappsim.Account, error) {
	var out []whatsappsim.Account
	var errs []error
	seen := map[string]bool{}
	for i, item := range c.Accounts {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
			errs = append(errs, fmt.Errorf("PARLEY_PROVIDER_SIM_ACCOUNTS entry %d: want <phone_number_id>:<token>[:<per_second>]", i+1))
			continue
		}
		a := whatsappsim.Account{PhoneNumberID: parts[0], Token: parts[1]}
		if err := a.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("PARLEY_PROVIDER_SIM_ACCOUNTS entry %d: %w", i+1, err))
			continue
		}
		if len(parts) == 3 {
			n, err := strconv.Atoi(parts[2])
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("PARLEY_PROVIDER_SIM_ACCOUNTS entry %d (%s): throughput must be a positive integer", i+1, a.PhoneNumberID))
				continue
			}
			a.ThroughputPerSecond = n
		}
		if seen[a.PhoneNumberID] {
			errs = append(errs, fmt.Errorf("PARLEY_PROVIDER_SIM_ACCOUNTS: %s appears twice", a.PhoneNumberID))
			continue
		}
		seen[a.PhoneNumberID] = true
		out = append(out, a)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}
