package deploycheck

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/parleyhq/parley/pkg/envdoc"
)

// HealthcheckBinary is where the images keep the probe that compose
// healthchecks run (deploy/docker/healthcheck): the images have no shell.
const HealthcheckBinary = "/usr/local/bin/healthcheck"

// Compose is a loaded docker-compose.yml.
type Compose struct {
	Path    string
	Project *types.Project

	mu          sync.Mutex
	dockerfiles map[string]*Dockerfile
}

// LoadCompose loads and validates a compose file as `docker compose` does,
// without the caller's environment or .env file, so that the result does
// not depend on the machine that runs the check.
func LoadCompose(ctx context.Context, path string) (*Compose, error) {
	opts, err := cli.NewProjectOptions([]string{path},
		cli.WithWorkingDirectory(filepath.Dir(path)),
		cli.WithDiscardEnvFile,
	)
	if err != nil {
		return nil, fmt.Errorf("compose options: %w", err)
	}
	p, err := opts.LoadProject(ctx)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return &Compose{Path: path, Project: p, dockerfiles: map[string]*Dockerfile{}}, nil
}

var repoCompose struct {
	once sync.Once
	c    *Compose
	err  error
}

// RepoCompose loads the repository's docker-compose.yml once per process.
func RepoCompose() (*Compose, error) {
	repoCompose.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			repoCompose.err = err
			return
		}
		repoCompose.c, repoCompose.err = LoadCompose(context.Background(), filepath.Join(root, "docker-compose.yml"))
	})
	return repoCompose.c, repoCompose.err
}

// ComposeService checks the repository's docker-compose.yml service name
// against cfg, the zero value of the configuration struct of the service it
// runs, and reports every problem found (see Compose.CheckService).
func ComposeService(t testing.TB, name string, cfg any) {
	t.Helper()
	c, err := RepoCompose()
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range c.CheckService(name, cfg) {
		t.Error(err)
	}
}

// Dockerfile returns the Dockerfile that builds the service, parsed.
func (c *Compose) Dockerfile(svc types.ServiceConfig) (*Dockerfile, error) {
	if svc.Build == nil {
		return nil, fmt.Errorf("compose service %q has no build section", svc.Name)
	}
	path := svc.Build.Dockerfile
	if path == "" {
		path = "Dockerfile"
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(svc.Build.Context, path)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if df, ok := c.dockerfiles[path]; ok {
		return df, nil
	}
	df, err := ParseDockerfile(path)
	if err != nil {
		return nil, err
	}
	c.dockerfiles[path] = df
	return df, nil
}

// OneShot reports whether other services wait for name to complete (as they
// wait for migrate) rather than to be healthy.
func (c *Compose) OneShot(name string) bool {
	for _, s := range c.Project.Services {
		if d, ok := s.DependsOn[name]; ok && d.Condition == types.ServiceConditionCompletedSuccessfully {
			return true
		}
	}
	return false
}

// CheckService compares the compose service name with cfg, the zero value of
// the configuration struct of the program it runs, and returns every
// problem:
//   - each PARLEY_* variable it sets is one that cfg reads (typos, drift);
//   - each variable whose default points at loopback is set, and no value
//     points at loopback: inside a container that is the container itself;
//   - each value that names a host names a service of the file, which the
//     service depends on (service_healthy when that one has a healthcheck);
//   - a required variable without a default is set;
//   - it waits (service_completed_successfully) for every one-shot service
//     that uses a server it uses, as everything waits for migrate;
//   - a long-running service publishes or exposes exactly the port of its
//     listen address (PARLEY_<FOLDER>_ADDR, from the environment or its
//     default), and its image EXPOSEs it;
//   - its healthcheck runs HealthcheckBinary, which its image holds, on that
//     port and a path the service's ops.Probe answers;
//   - its stop_grace_period covers PARLEY_DRAIN_DELAY (when cfg reads it)
//     plus ops.Server's shutdown timeout;
//   - a one-shot service (see OneShot) publishes nothing and never restarts.
func (c *Compose) CheckService(name string, cfg any) []error {
	var errs []error
	fail := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("compose service %q: %s", name, fmt.Sprintf(format, a...)))
	}
	svc, ok := c.Project.Services[name]
	if !ok {
		fail("not in %s", c.Path)
		return errs
	}
	vars, err := configVars(cfg)
	if err != nil {
		fail("%v", err)
		return errs
	}
	byName := map[string]envdoc.Var{}
	for _, v := range vars {
		byName[v.Name] = v
	}
	cfgName := fmt.Sprintf("%T", cfg)

	for _, k := range sortedKeys(svc.Environment) {
		if _, ok := byName[k]; strings.HasPrefix(k, "PARLEY_") && !ok {
			fail("sets %s, which %s does not read (a typo, or a setting renamed or removed)", k, cfgName)
		}
	}
	for _, v := range vars {
		val, set := svc.Environment[v.Name]
		if set && val == nil {
			continue // passed through from the host's environment: unknown here
		}
		value := v.Default
		if set {
			value = *val
		}
		if v.Required && !v.HasDefault && !set {
			fail("does not set %s, which %s requires", v.Name, cfgName)
		}
		c.checkHost(&errs, svc, v, value, set)
	}

	c.checkWaitsForOneShots(&errs, svc, vars)

	if c.OneShot(name) {
		if len(svc.Ports) > 0 || len(svc.Expose) > 0 {
			fail("runs once (others wait for it to complete) but opens ports")
		}
		if svc.Restart != "" && svc.Restart != types.RestartPolicyNo {
			fail("runs once but has restart %q", svc.Restart)
		}
		return errs
	}

	if svc.Build == nil || svc.Build.Target == "" {
		fail("has no build target: Parley services are built from a stage of deploy/docker/Dockerfile")
		return errs
	}
	image := svc.Build.Target
	lv, ok := byName[ListenVar(image)]
	if !ok {
		fail("%s has no %s: the listen address of %s must be configurable", cfgName, ListenVar(image), image)
		return errs
	}
	val, set := svc.Environment[lv.Name]
	if set && val == nil {
		fail("%s must have a value here: the ports depend on it", lv.Name)
		return errs
	}
	value := ""
	if set {
		value = *val
	}
	port, err := listenPort(lv, value, set)
	if err != nil {
		fail("%v", err)
		return errs
	}
	if len(svc.Ports) == 0 && len(svc.Expose) == 0 {
		fail("neither publishes nor exposes port %s, where it listens (%s)", port, lv.Name)
	}
	for _, p := range svc.Ports {
		if strconv.FormatUint(uint64(p.Target), 10) != port {
			fail("publishes container port %d, but it listens on %s (%s)", p.Target, port, lv.Name)
		}
	}
	for _, e := range svc.Expose {
		if e != port {
			fail("exposes port %s, but it listens on %s (%s)", e, port, lv.Name)
		}
	}

	drain, err := drainDelay(byName, func(v envdoc.Var) (string, bool) {
		if val, set := svc.Environment[v.Name]; set && val != nil {
			return *val, true
		}
		return v.Default, false
	})
	if err != nil {
		fail("%v", err)
	}
	grace := 10 * time.Second // compose's default
	if svc.StopGracePeriod != nil {
		grace = time.Duration(*svc.StopGracePeriod)
	}
	if shutdown := shutdownTimeout(); grace < drain+shutdown {
		fail("stop_grace_period %v is shorter than PARLEY_DRAIN_DELAY %v plus the shutdown timeout %v: docker would kill it mid-drain", grace, drain, shutdown)
	}

	df, err := c.Dockerfile(svc)
	if err != nil {
		fail("%v", err)
		return errs
	}
	if _, ok := df.Stage(image); !ok {
		fail("build target %q is not a stage of its Dockerfile", image)
		return errs
	}
	if in, ok := df.Find(image, "EXPOSE"); !ok || !slices.Contains(strings.Fields(in.Args), port) {
		fail("the Dockerfile stage %q does not EXPOSE %s, where the service listens", image, port)
	}

	hc := svc.HealthCheck
	if hc == nil || hc.Disable || len(hc.Test) == 0 {
		fail("has no healthcheck: services that wait for it need one")
		return errs
	}
	t := hc.Test
	if len(t) != 3 || t[0] != "CMD" || t[1] != HealthcheckBinary {
		fail("healthcheck %q: want [CMD %s http://127.0.0.1:%s/readyz] (the image has no shell)", []string(t), HealthcheckBinary, port)
		return errs
	}
	if !df.Copies(image, "", HealthcheckBinary) {
		fail("the Dockerfile stage %q does not install %s", image, HealthcheckBinary)
	}
	u, err := url.Parse(t[2])
	if err != nil || u.Scheme != "http" {
		fail("healthcheck URL %q is not an http URL", t[2])
		return errs
	}
	if !isLoopback(u.Hostname()) {
		fail("healthcheck URL %q: a healthcheck runs inside the container, so it calls 127.0.0.1", t[2])
	}
	if u.Port() != port {
		fail("healthcheck URL %q: the service listens on port %s (%s)", t[2], port, lv.Name)
	}
	if !servesProbe(u.Path) {
		fail("healthcheck URL %q: the service does not answer %q with 2xx (ops.Probe serves /healthz and /readyz)", t[2], u.Path)
	}
	return errs
}

// checkHost checks where one variable's value points.
func (c *Compose) checkHost(errs *[]error, svc types.ServiceConfig, v envdoc.Var, value string, set bool) {
	fail := func(format string, a ...any) {
		*errs = append(*errs, fmt.Errorf("compose service %q: %s", svc.Name, fmt.Sprintf(format, a...)))
	}
	host, ok := hostOf(value)
	if !ok {
		return
	}
	if isLoopback(host) {
		if set {
			fail("sets %s=%q: loopback inside a container is the container itself; name the compose service", v.Name, value)
		} else {
			fail("does not set %s, whose default %q is loopback: inside a container that is the container itself", v.Name, value)
		}
		return
	}
	target, isService := c.Project.Services[host]
	switch {
	case !isService && !strings.Contains(host, "."):
		fail("%s points at %q, which is no service of this file", v.Name, host)
	case isService && host != svc.Name:
		dep, ok := svc.DependsOn[host]
		switch {
		case !ok:
			fail("%s points at %q, which it does not depend_on", v.Name, host)
		case target.HealthCheck != nil && !target.HealthCheck.Disable && dep.Condition != types.ServiceConditionHealthy:
			fail("depends on %q with condition %q; it has a healthcheck, so wait for %s", host, dep.Condition, types.ServiceConditionHealthy)
		}
	}
}

// pointsAt lists the services of the file that the variables' values
// (or defaults) name.
func (c *Compose) pointsAt(svc types.ServiceConfig, vars []envdoc.Var) map[string]bool {
	hosts := map[string]bool{}
	add := func(value string) {
		if h, ok := hostOf(value); ok && h != svc.Name {
			if _, isService := c.Project.Services[h]; isService {
				hosts[h] = true
			}
		}
	}
	if vars == nil {
		for _, v := range svc.Environment {
			if v != nil {
				add(*v)
			}
		}
		return hosts
	}
	for _, v := range vars {
		if val, set := svc.Environment[v.Name]; set && val != nil {
			add(*val)
		} else if !set {
			add(v.Default)
		}
	}
	return hosts
}

// checkWaitsForOneShots wants a service to wait for every one-shot service
// (migrate) that prepares a server it uses: starting against a schema that
// is not there yet fails.
func (c *Compose) checkWaitsForOneShots(errs *[]error, svc types.ServiceConfig, vars []envdoc.Var) {
	uses := c.pointsAt(svc, vars)
	for _, name := range sortedKeys(c.Project.Services) {
		if name == svc.Name || !c.OneShot(name) {
			continue
		}
		for h := range c.pointsAt(c.Project.Services[name], nil) {
			if !uses[h] {
				continue
			}
			if d, ok := svc.DependsOn[name]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
				*errs = append(*errs, fmt.Errorf("compose service %q: uses %s, which %s prepares: depend on %s with condition %s",
					svc.Name, h, name, name, types.ServiceConditionCompletedSuccessfully))
			}
			break
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
