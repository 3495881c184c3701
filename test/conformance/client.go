package conformance

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// ClientScenarios are the suite's client scenarios that exercise an MCP
// client's protocol handling (the auth/* ones need an OAuth client).
var ClientScenarios = []string{"initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"}

// netnsScript brings loopback up inside a fresh network namespace and runs
// its arguments there.
const netnsScript = `ip link set lo up && exec "$@"`

var (
	netnsOnce sync.Once
	netnsErr  error
)

// NetnsAvailable reports whether this machine can run a program in a
// private network namespace with loopback up (`unshare -n` as root, or
// `unshare -rn` in a user namespace), and the prefix that does it.
func NetnsAvailable() ([]string, error) {
	netnsOnce.Do(func() {
		netnsErr = errors.New("neither `unshare -n` nor `unshare -rn` can bring up loopback here")
		for _, flags := range []string{"-n", "-rn"} {
			prefix := []string{"unshare", flags, "sh", "-c", netnsScript, "sh"}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := exec.CommandContext(ctx, prefix[0], append(prefix[1:], "true")...).CombinedOutput()
			cancel()
			if err == nil {
				netnsPrefix, netnsErr = prefix, nil
				return
			}
			netnsErr = fmt.Errorf("%w (unshare %s: %v: %s)", netnsErr, flags, err, strings.TrimSpace(string(out)))
		}
	})
	return netnsPrefix, netnsErr
}

var netnsPrefix []string

// ClientOptions configures RunClientScenario. A nil *ClientOptions uses the
// defaults.
type ClientOptions struct {
	// Timeout is the suite's per-client timeout. Default 30s.
	Timeout time.Duration
}

// RunClientScenario runs the client scenario named scenario with command as
// the client under test: the suite starts its scenario server, runs
// command with the server's URL appended as the last argument (split on
// spaces, run by a shell, MCP_CONFORMANCE_SCENARIO set to the scenario),
// and checks what the client did. The scenario servers listen on all
// interfaces, so the whole run happens in a private network namespace with
// only loopback up; t is skipped when that is not possible or the suite is
// not installed.
func RunClientScenario(t testing.TB, scenario, command string, opts *ClientOptions) Result {
	t.Helper()
	s := Require(t)
	prefix, err := NetnsAvailable()
	if err != nil {
		t.Skipf("client scenarios need a private network namespace: %v", err)
	}
	if opts == nil {
		opts = &ClientOptions{}
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	out := t.TempDir()
	args := []string{"client", "--command", command, "--scenario", scenario, "--timeout", fmt.Sprint(timeout.Milliseconds()), "-o", out}
	stdout, runErr := s.run(ctx, prefix, args...)
	if ctx.Err() != nil {
		t.Fatalf("conformance client %s: timed out\n%s", scenario, tail(stdout))
	}
	// Result folders are named after the scenario, whose name may contain '/' (auth/…):
	// the suite then nests them.
	got, err := parseResults(filepath.Join(out, filepath.Dir(scenario)), "")
	if err != nil {
		t.Fatalf("conformance client %s: %v (exit: %v)\n%s", scenario, err, runErr, tail(stdout))
	}
	r, ok := got[scenario]
	if !ok {
		// Result folders of client scenarios are named after the scenario,
		// whose name may contain '/': the suite then nests folders.
		for name, res := range got {
			if strings.HasSuffix(scenario, name) {
				r, ok = res, true
			}
		}
	}
	if !ok {
		return Result{Scenario: scenario, Err: fmt.Errorf("the suite wrote no results (exit: %v):\n%s", runErr, tail(stdout))}
	}
	r.Scenario = scenario
	return r
}
