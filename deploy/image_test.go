package deploy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// dockerfile is one parsed Dockerfile: its ARG defaults and the instructions of each stage.
type dockerfile struct {
	args   map[string]string
	stages [][]instruction
}

type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

// parseDockerfile reads the subset of the Dockerfile syntax deploy/Dockerfile uses: comments,
// line continuations, and one instruction per logical line.
func parseDockerfile(t *testing.T, name string) *dockerfile {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	df := &dockerfile{args: map[string]string{}}
	var line strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "#") || (text == "" && line.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			line.WriteString(cont + " ")
			continue
		}
		line.WriteString(text)
		cmd, args, _ := strings.Cut(strings.TrimSpace(line.String()), " ")
		line.Reset()
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		switch {
		case in.cmd == "FROM":
			df.stages = append(df.stages, nil)
		case in.cmd == "ARG":
			if name, def, ok := strings.Cut(in.args, "="); ok {
				df.args[name] = def
			}
		}
		if len(df.stages) > 0 {
			df.stages[len(df.stages)-1] = append(df.stages[len(df.stages)-1], in)
		}
	}
	return df
}

// TestImage builds the image deploy/Dockerfile describes without a Docker engine: it runs the
// build stage's RUN commands on this machine (the go build and the passwd entry, with /out
// redirected to a temporary directory), assembles the final stage's COPY, USER, LABEL,
// EXPOSE, ENTRYPOINT and CMD into an OCI image layout with go-containerregistry, reads that
// layout back, and checks what the image promises.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manifold binary")
	}
	df := parseDockerfile(t, "Dockerfile")
	if len(df.stages) != 2 {
		t.Fatalf("want a build stage and a final stage, got %d stages", len(df.stages))
	}
	out := t.TempDir()
	vars := map[string]string{"VERSION": "test-image", "REVISION": "0123abc"}
	expand := func(s string) string {
		return os.Expand(s, func(k string) string {
			if v, ok := vars[k]; ok {
				return v
			}
			return df.args[k]
		})
	}

	// The build stage, run here: WORKDIR /src holds the repository (COPY . .).
	for _, in := range df.stages[0] {
		switch in.cmd {
		case "FROM":
			if !strings.Contains(in.args, " AS build") {
				t.Fatalf("the first stage must be named build: FROM %s", in.args)
			}
		case "RUN":
			if strings.HasPrefix(in.args, "go mod download") {
				continue // the module cache is already filled
			}
			cmd := exec.Command("sh", "-c", strings.ReplaceAll(in.args, "/out/", out+"/"))
			cmd.Dir = ".."
			cmd.Env = append(os.Environ(), "VERSION="+vars["VERSION"])
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("RUN %s: %v\n%s", in.args, err, b)
			}
		}
	}

	// The final stage, assembled.
	final := df.stages[1]
	if final[0].args != "scratch" {
		t.Fatalf("the final stage must be FROM scratch, is FROM %s", final[0].args)
	}
	var files []imageFile
	cfg := v1.Config{Labels: map[string]string{}, ExposedPorts: map[string]struct{}{}}
	for _, in := range final[1:] {
		switch in.cmd {
		case "ARG", "ENV":
		case "LABEL":
			for _, m := range labelRE.FindAllStringSubmatch(in.args, -1) {
				cfg.Labels[m[1]] = expand(m[2])
			}
		case "COPY":
			fields := strings.Fields(in.args)
			if len(fields) != 3 || fields[0] != "--from=build" {
				t.Fatalf("COPY %s: want COPY --from=build SRC DST", in.args)
			}
			src, dst := fields[1], fields[2]
			if rest, ok := strings.CutPrefix(src, "/out/"); ok {
				src = filepath.Join(out, rest)
			} // else a file of the build image's Debian, which this machine has too
			data, err := os.ReadFile(src)
			if err != nil {
				t.Fatalf("COPY %s: %v", in.args, err)
			}
			files = append(files, imageFile{name: dst, data: data})
		case "USER":
			cfg.User = in.args
		case "EXPOSE":
			cfg.ExposedPorts[in.args+"/tcp"] = struct{}{}
		case "ENTRYPOINT":
			cfg.Entrypoint = jsonArray(t, in)
		case "CMD":
			cfg.Cmd = jsonArray(t, in)
		case "HEALTHCHECK":
			t.Errorf("HEALTHCHECK: orchestrators probe /healthz and /readyz; the image must not run its own check")
		default:
			t.Fatalf("%s: not expected in the final stage (teach this test what it means)", in.cmd)
		}
	}

	dir := filepath.Join(t.TempDir(), "oci")
	writeLayout(t, dir, files, cfg)
	img := readLayout(t, dir)
	checkImage(t, img)
}

var labelRE = regexp.MustCompile(`([a-z0-9.\-]+)="([^"]*)"`)

type imageFile struct {
	name string
	data []byte
}

func jsonArray(t *testing.T, in instruction) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(in.args), &out); err != nil {
		t.Fatalf("%s %s: want the exec (JSON) form: %v", in.cmd, in.args, err)
	}
	return out
}

// writeLayout writes an OCI image layout at dir holding one image: one layer with files
// (owned by root; the binary executable by all) and config cfg.
func writeLayout(t *testing.T, dir string, files []imageFile, cfg v1.Config) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(strings.TrimPrefix(f.name, "/")); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	// Parents before children: "etc" < "etc/ssl" < "etc/ssl/certs".
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		mode := int64(0o644)
		if f.name == cfg.Entrypoint[0] {
			mode = 0o755
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.name, "/"), Mode: mode, Size: int64(len(f.data))}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", runtime.GOARCH, cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "manifold:test"})); err != nil {
		t.Fatal(err)
	}
}

func readLayout(t *testing.T, dir string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("index: %v, %d manifests", err, len(m.Manifests))
	}
	if m.Manifests[0].MediaType != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want OCI", m.Manifests[0].MediaType)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// checkImage checks the image as a runtime would see it.
func checkImage(t *testing.T, img v1.Image) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	fsys := map[string][]byte{}
	modes := map[string]int64{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := "/" + strings.TrimSuffix(hdr.Name, "/")
		fsys[name], modes[name] = data, hdr.Mode
	}

	// A non-root user, named in /etc/passwd.
	uid, gid, _ := strings.Cut(c.User, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %q: want a numeric non-root uid (Kubernetes runAsNonRoot needs a number)", c.User)
	}
	if !passwdHas(fsys["/etc/passwd"], uid, gid) || !bytes.Contains(fsys["/etc/group"], []byte(":"+gid+":")) {
		t.Errorf("/etc/passwd and /etc/group have no entry for %s", c.User)
	}
	// The entrypoint: the binary, executable, static, and it runs.
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/manifold" || len(c.Cmd) == 0 || c.Cmd[0] != "serve" {
		t.Errorf("entrypoint %q cmd %q, want [/manifold] [serve]", c.Entrypoint, c.Cmd)
	}
	bin := fsys["/manifold"]
	if modes["/manifold"]&0o001 == 0 {
		t.Errorf("/manifold mode %o: not executable by the non-root user", modes["/manifold"])
	}
	checkStatic(t, bin)
	exe := filepath.Join(t.TempDir(), "manifold")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "manifold test-image\n") {
		t.Errorf("manifold version: %v\n%s", err, out)
	}
	// The CA bundle, for https upstreams, JWKS and OTLP.
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(fsys["/etc/ssl/certs/ca-certificates.crt"]) {
		t.Errorf("no CA certificates at /etc/ssl/certs/ca-certificates.crt")
	}
	// Nothing else: no shell, no package manager.
	for name := range fsys {
		if modes[name]&0o111 != 0 && name != "/manifold" && !isDir(fsys, name) {
			t.Errorf("%s is executable: the image should hold one program", name)
		}
	}
	if cf.Config.Healthcheck != nil {
		t.Errorf("the image has a HEALTHCHECK")
	}
	for _, k := range []string{"title", "description", "source", "version", "revision"} {
		if cf.Config.Labels["org.opencontainers.image."+k] == "" {
			t.Errorf("no org.opencontainers.image.%s label", k)
		}
	}
	if v := cf.Config.Labels["org.opencontainers.image.version"]; v != "test-image" {
		t.Errorf("version label %q", v)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("exposed ports %v, want 8080/tcp", c.ExposedPorts)
	}
}

func isDir(fsys map[string][]byte, name string) bool {
	for other := range fsys {
		if strings.HasPrefix(other, name+"/") {
			return true
		}
	}
	return false
}

func passwdHas(passwd []byte, uid, gid string) bool {
	for line := range strings.SplitSeq(string(passwd), "\n") {
		f := strings.Split(line, ":")
		if len(f) == 7 && f[2] == uid && f[3] == gid {
			return true
		}
	}
	return false
}

// checkStatic checks that bin is a static ELF executable: no interpreter and no shared
// libraries, so it runs on an empty base image.
func checkStatic(t *testing.T, bin []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("/manifold is not an ELF binary: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("/manifold needs a dynamic loader (built without CGO_ENABLED=0?)")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("/manifold links shared libraries %v", libs)
	}
}
