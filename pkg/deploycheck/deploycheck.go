// Package deploycheck keeps the deployment files honest about the code they
// deploy. Docker cannot run on the project's machines and Kubernetes is not
// there at all, so docker-compose.yml, deploy/docker/Dockerfile and
// deploy/k8s are checked by reading them: the variables they set must be
// ones the services read, the servers they point at must be theirs rather
// than loopback, their ports must be the listen addresses, and their probes
// must hit paths that the services serve.
//
// A service's configuration is internal to its module, so each service calls
// ComposeService and KubernetesDeployment from a test in its own
// internal/config package with its own Config type; CheckProject (run by this
// package's tests) checks the parts that need no configuration and that every
// service has such a test.
package deploycheck

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/pkg/ops"
)

// Var is one environment variable that a configuration struct reads, as
// caarlos0/env sees it.
type Var struct {
	Name string
	// Default is the envDefault tag; HasDefault tells an empty default from none.
	Default    string
	HasDefault bool
	// Required is set by the required or notEmpty options.
	Required bool
	// Field is the Go path of the field, such as Postgres.URL.
	Field string
}

// Vars lists the environment variables that cfg (a struct or a pointer to
// one) reads: its env tags and those of nested structs such as
// store.Config, with envPrefix applied as caarlos0/env applies it.
func Vars(cfg any) ([]Var, error) {
	t := reflect.TypeOf(cfg)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("configuration must be a struct, got %T", cfg)
	}
	var vars []Var
	collectVars(t, "", "", &vars)
	if len(vars) == 0 {
		return nil, fmt.Errorf("%s reads no environment variable", t)
	}
	return vars, nil
}

func collectVars(t reflect.Type, prefix, path string, vars *[]Var) {
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		field := f.Name
		if path != "" {
			field = path + "." + f.Name
		}
		tag, hasTag := f.Tag.Lookup("env")
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if (!hasTag || name == "") && ft.Kind() == reflect.Struct {
			collectVars(ft, prefix+f.Tag.Get("envPrefix"), field, vars)
			continue
		}
		if !hasTag || name == "" || name == "-" {
			continue
		}
		def, hasDef := f.Tag.Lookup("envDefault")
		v := Var{Name: prefix + name, Default: def, HasDefault: hasDef, Field: field}
		for _, o := range strings.Split(opts, ",") {
			if o == "required" || o == "notEmpty" {
				v.Required = true
			}
		}
		*vars = append(*vars, v)
	}
}

// RepoRoot is the directory holding go.work, found from the working
// directory upwards (tests run in their package's folder).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
}

// ServiceFolders lists the folders of services/ that hold a Go module.
func ServiceFolders(root string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, "services"))
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	var names []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(root, "services", e.Name(), "go.mod")); e.IsDir() && err == nil {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// ListenVar is the variable that holds a service's listen address, by the
// convention every service follows: PARLEY_GATEWAY_ADDR for services/gateway.
func ListenVar(folder string) string {
	return "PARLEY_" + strings.ToUpper(strings.ReplaceAll(folder, "-", "_")) + "_ADDR"
}

// listenPort is the port of the listen address a service gets with the
// value given (or its default when set is false).
func listenPort(v Var, value string, set bool) (string, error) {
	if !set {
		value = v.Default
	}
	_, port, err := net.SplitHostPort(value)
	if err != nil || port == "" || port == "0" {
		return "", fmt.Errorf("%s %q is not a listen address with a fixed port", v.Name, value)
	}
	return port, nil
}

// hostOf returns the host a variable's value points at, when it is a URL
// with a host or a host:port; ok is false for anything else.
func hostOf(value string) (host string, ok bool) {
	if strings.Contains(value, "://") {
		u, err := url.Parse(value)
		if err != nil || u.Hostname() == "" {
			return "", false
		}
		return u.Hostname(), true
	}
	h, port, err := net.SplitHostPort(value)
	if err != nil || h == "" || port == "" {
		return "", false
	}
	// "id:token" pairs (provider-sim's accounts) are not addresses.
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", false
	}
	return h, true
}

// isLoopback reports whether host names this machine: inside a container,
// the container itself.
func isLoopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// probePaths are answered by the ops.Probe every Parley service mounts; the
// check asks the real handler rather than a list kept here.
func servesProbe(path string) bool {
	mux := http.NewServeMux()
	ops.NewProbe().Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code >= 200 && rec.Code <= 299
}
