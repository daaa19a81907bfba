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
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/pkg/envdoc"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

// configVars lists the environment variables cfg reads (envdoc.Vars), and
// fails for anything that reads none: a check against no variables would
// pass whatever the files say.
func configVars(cfg any) ([]envdoc.Var, error) {
	vars := envdoc.Vars(cfg)
	if len(vars) == 0 {
		return nil, fmt.Errorf("%T is no configuration struct: it reads no environment variable", cfg)
	}
	return vars, nil
}

// RepoRoot is the directory holding go.work, found from the working
// directory upwards (tests run in their package's folder).
func RepoRoot() (string, error) { return serviceproc.RepoRoot() }

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

// ListenVar is the variable that holds the listen address of the program an
// image runs, by the convention every service follows: PARLEY_GATEWAY_ADDR
// for the gateway image, PARLEY_CAMPAIGN_DISPATCHER_ADDR for the
// campaign-dispatcher image.
func ListenVar(image string) string {
	return "PARLEY_" + strings.ToUpper(strings.ReplaceAll(image, "-", "_")) + "_ADDR"
}

// listenPort is the port of the listen address a service gets with the
// value given (or its default when set is false).
func listenPort(v envdoc.Var, value string, set bool) (string, error) {
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
