// Package redistest runs a redis-server for tests of the cluster's shared store.
package redistest

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Start runs redis-server (Debian's package) on a free loopback port,
// without persistence, for the test. Without it the test skips, except in
// CI, where scripts/test.sh installs it and a skip would hide a failure.
func Start(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server missing in CI (scripts/test.sh installs it)")
		}
		t.Skip("redis-server is not installed; the Redis store test skips (apt-get install redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	ln.Close()
	cmd := exec.Command(path, "--bind", "127.0.0.1", "--port", strconv.Itoa(addr.Port), "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "Ready to accept connections") {
			go func() {
				for sc.Scan() {
				}
			}()
			return addr.String()
		}
	}
	t.Fatal("redis-server did not start")
	return ""
}
