// Package cli is parleyctl, the operator's command line: it migrates the
// schema, provisions companies and what they configure (users, API keys,
// messaging accounts, templates, campaigns, automations, connectors), reads
// and cancels its sends (batches), reads its campaigns' and automations'
// reports, and seeds a demo company for local runs.
//
// Every command prints a table, or with --json only JSON on stdout (one
// object or one array, snake_case keys). Errors go to stderr; the exit code is
// 2 for a usage mistake and 1 for a failure.
//
// It is built on github.com/spf13/cobra: the command-tree library of kubectl,
// gh and the NATS server's tooling, maintained and stable. It gives nested
// commands with per-command help, POSIX flags (pflag), required-flag checks and
// shell completion, which an operator tool with some forty verbs needs and
// the standard flag package does not have.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// IO is where a run reads and writes; main passes the process's own.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
}

// usageError is a mistake in how parleyctl was called (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// failure is an error of a command that was called correctly (exit 1).
type failure struct{ err error }

func (e failure) Error() string { return e.err.Error() }
func (e failure) Unwrap() error { return e.err }

// Main runs parleyctl with args (without the program name) and the process
// environment environ, and returns the exit code.
func Main(ctx context.Context, args, environ []string, stdio IO) int {
	e := &env{io: stdio, environ: environ}
	defer e.closers.Close()
	root := newRoot(e)
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(stdio.Err, "parleyctl: %v\n", err)
	var f failure
	var u usageError
	if errors.As(err, &f) && !errors.As(err, &u) {
		return ExitFailure
	}
	// Everything else is a usage mistake: an unknown command or flag, a
	// missing argument or required flag (cobra's own errors), or one of ours.
	if cmd != nil {
		fmt.Fprintf(stdio.Err, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return ExitUsage
}

// env is what every command shares: configuration, output, and the
// connections opened on first use.
type env struct {
	io      IO
	environ []string
	json    bool
	dbURL   string
	natsURL string

	cfg     Config
	loaded  bool
	pool    *pgxpool.Pool
	stream  *record.Stream
	js      jetstream.JetStream
	closers ops.Closers
}

// config loads the configuration once; flags given on the command line win
// over the environment.
func (e *env) config() (Config, error) {
	if e.loaded {
		return e.cfg, nil
	}
	cfg, err := LoadConfig(e.environ)
	if err != nil {
		return Config{}, err
	}
	if e.dbURL != "" {
		cfg.Postgres.URL = e.dbURL
	}
	if e.natsURL != "" {
		cfg.NATS.URL = e.natsURL
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("invalid configuration:\n%w", err)
	}
	e.cfg, e.loaded = cfg, true
	return cfg, nil
}

// db opens the pool, refusing a schema older than this build.
func (e *env) db(ctx context.Context) (*pgxpool.Pool, error) {
	if e.pool != nil {
		return e.pool, nil
	}
	cfg, err := e.config()
	if err != nil {
		return nil, err
	}
	pool, err := store.Open(ctx, cfg.Postgres)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "3D000" {
		return nil, fmt.Errorf("%w; create it with `parleyctl migrate --create-database`", err)
	}
	if err != nil {
		return nil, err
	}
	e.pool = pool
	e.closers.Add(pool.Close)
	return pool, nil
}

// sealed is the database with the box that opens the secrets kept in it.
func (e *env) sealed(ctx context.Context) (*pgxpool.Pool, *secretbox.Box, error) {
	pool, err := e.db(ctx)
	if err != nil {
		return nil, nil, err
	}
	box, err := secretbox.New(e.cfg.Token.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("PARLEY_TOKEN_KEY: %w", err)
	}
	return pool, box, nil
}

func (e *env) catalog(ctx context.Context) (*catalog.Store, error) {
	pool, box, err := e.sealed(ctx)
	if err != nil {
		return nil, err
	}
	return catalog.NewStore(pool, box), nil
}

func (e *env) keys(ctx context.Context) (*apikey.Store, error) {
	pool, err := e.db(ctx)
	if err != nil {
		return nil, err
	}
	return apikey.NewStore(pool, nil), nil
}

// warnf writes a warning to stderr; it never goes to stdout, which may be JSON.
func (e *env) warnf(format string, args ...any) {
	fmt.Fprintf(e.io.Err, "parleyctl: warning: "+format+"\n", args...)
}

// emit prints v as JSON with --json, else calls human.
func (e *env) emit(v any, human func(w io.Writer)) error {
	if e.json {
		enc := json.NewEncoder(e.io.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("write json: %w", err)
		}
		return nil
	}
	human(e.io.Out)
	return nil
}

// operator is the audit trail's actor for changes made with parleyctl.
var operator = apikey.Actor{Label: "parleyctl"}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "parleyctl",
		Short: "Operate Parley: migrate the schema, provision companies and their configuration",
		Long: strings.TrimSpace(`
parleyctl is the operator's command line for Parley. It reads the same PARLEY_*
environment variables as the services (PARLEY_POSTGRES_URL, PARLEY_NATS_URL,
PARLEY_TOKEN_KEY, ...). Companies are named by id or slug (--company acme).
Every command accepts --json and then prints only JSON on stdout.`),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		RunE:          missingSubcommand,
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: true,
		},
	}
	root.PersistentFlags().BoolVar(&e.json, "json", false, "print only JSON on stdout")
	root.PersistentFlags().StringVar(&e.dbURL, "database-url", "", "PostgreSQL URL (overrides PARLEY_POSTGRES_URL)")
	root.PersistentFlags().StringVar(&e.natsURL, "nats-url", "", "NATS URL, for cache invalidations and batches still in the stream (overrides PARLEY_NATS_URL)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		migrateCmd(e),
		seedCmd(e),
		companiesCmd(e),
		usersCmd(e),
		keysCmd(e),
		accountsCmd(e),
		templatesCmd(e),
		numbersCmd(e),
		portfoliosCmd(e),
		campaignsCmd(e),
		automationsCmd(e),
		connectorsCmd(e),
		webhooksCmd(e),
		contactsCmd(e),
		optOutCmd(e),
		segmentsCmd(e),
		batchesCmd(e),
		reportsCmd(e),
		conversationsCmd(e),
		exportCmd(e),
	)
	return root
}

// group is a command that only holds subcommands.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: noArgs, RunE: missingSubcommand}
	c.AddCommand(subs...)
	return c
}

func missingSubcommand(cmd *cobra.Command, _ []string) error {
	var names []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return usagef("%s needs a subcommand: %s", cmd.CommandPath(), strings.Join(names, ", "))
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command or argument %q for %q", args[0], cmd.CommandPath())
	}
	return nil
}

func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %s", cmd.CommandPath(), names)
		}
		return nil
	}
}

// run adapts a command body: its errors are failures (exit 1) unless it
// says they are usage mistakes.
func run(fn func(ctx context.Context, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd.Context(), args)
		if err == nil {
			return nil
		}
		var u usageError
		if errors.As(err, &u) {
			return u
		}
		return failure{err}
	}
}

// stdinIsTerminal reports whether in is an interactive terminal.
func stdinIsTerminal(in io.Reader) (*os.File, bool) {
	f, ok := in.(*os.File)
	if !ok {
		return nil, false
	}
	st, err := f.Stat()
	if err != nil {
		return nil, false
	}
	return f, st.Mode()&os.ModeCharDevice != 0
}
