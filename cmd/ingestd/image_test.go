package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// repoFile reads a file at the repository root (two levels above cmd/ingestd).
func repoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dockerStage is one FROM … stage of a Dockerfile: its base and its instructions, each
// with line continuations joined.
type dockerStage struct {
	from, name string
	lines      []string
}

func parseDockerfile(text string) []dockerStage {
	var stages []dockerStage
	var cur strings.Builder
	flush := func() {
		l := strings.TrimSpace(cur.String())
		cur.Reset()
		if l == "" {
			return
		}
		if f := strings.Fields(l); strings.EqualFold(f[0], "FROM") {
			s := dockerStage{from: f[1]}
			if len(f) == 4 && strings.EqualFold(f[2], "AS") {
				s.name = f[3]
			}
			stages = append(stages, s)
			return
		}
		if len(stages) > 0 {
			stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, l)
		}
	}
	for _, l := range strings.Split(text, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(l)
		flush()
	}
	flush()
	return stages
}

// TestContainerImageDataDirectory: the image's VOLUME directory exists in the image owned
// by the user the image runs as (distroless nonroot, 65532:65532), so that a new named
// volume, which Docker initialises from the image's directory (its contents, owner and
// mode), is writable by ingestd. Without it the volume comes up root-owned and every table
// write fails with a permission error. The directory is made in a build stage (distroless
// has no shell) and copied with --chown before the VOLUME instruction (the legacy builder
// discards changes made to a volume path after VOLUME).
func TestContainerImageDataDirectory(t *testing.T) {
	stages := parseDockerfile(repoFile(t, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and the runtime stage", len(stages))
	}
	final := stages[len(stages)-1]
	if final.from != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("runtime base %s, want gcr.io/distroless/static-debian12:nonroot", final.from)
	}
	var user, volume string
	volAt := -1
	for i, l := range final.lines {
		f := strings.Fields(l)
		switch strings.ToUpper(f[0]) {
		case "USER":
			user = f[1]
		case "VOLUME":
			volume, volAt = f[1], i
		}
	}
	const nonroot = "65532:65532" // distroless's nonroot user and group
	if user != nonroot {
		t.Errorf("USER %q in the runtime stage, want 65532:65532 (distroless nonroot, said explicitly)", user)
	}
	if volume != "/var/lib/ingestd" {
		t.Fatalf("VOLUME %q, want /var/lib/ingestd", volume)
	}
	copyRe := regexp.MustCompile(`^COPY\s+--from=(\S+)\s+--chown=(\d+:\d+)\s+(\S+)\s+` + regexp.QuoteMeta(volume) + `/?$`)
	var src, stage string
	for i, l := range final.lines {
		if m := copyRe.FindStringSubmatch(l); m != nil {
			if i > volAt {
				t.Errorf("%q comes after VOLUME: the legacy builder discards it", l)
			}
			if m[2] != user {
				t.Errorf("%q: owner %s, want the image's user %s", l, m[2], user)
			}
			stage, src = m[1], m[3]
		}
	}
	if src == "" {
		t.Fatalf("no `COPY --from=<stage> --chown=%s <dir> %s` before VOLUME in the runtime stage: a new named volume comes up root-owned and ingestd (uid 65532) cannot write tables", nonroot, volume)
	}
	var made bool
	for _, s := range stages[:len(stages)-1] {
		if s.name != stage {
			continue
		}
		for _, l := range s.lines {
			if regexp.MustCompile(`^RUN\s+.*\bmkdir\s+(-p\s+)?` + regexp.QuoteMeta(src) + `(\s|$)`).MatchString(l) {
				made = true
			}
		}
	}
	if !made {
		t.Errorf("stage %q does not make the directory %s it copies to %s (RUN mkdir -p %s)", stage, src, volume, src)
	}
	// The compose file mounts a named volume there and points INGESTD_DATA at it.
	var compose struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yaml.Unmarshal([]byte(repoFile(t, "docker-compose.yml")), &compose); err != nil {
		t.Fatal(err)
	}
	svc := compose.Services["ingestd"]
	if svc.Environment["INGESTD_DATA"] != volume {
		t.Errorf("compose ingestd INGESTD_DATA %q, want %s", svc.Environment["INGESTD_DATA"], volume)
	}
	var named bool
	for _, v := range svc.Volumes {
		name, target, _ := strings.Cut(v, ":")
		if _, ok := compose.Volumes[name]; ok && strings.TrimSuffix(target, ":rw") == volume {
			named = true
		}
	}
	if !named {
		t.Errorf("compose ingestd volumes %v: want a named volume (declared under volumes:) at %s", svc.Volumes, volume)
	}
}

// TestContainerVersionsMatchTests: docker-compose.yml runs the Kafka and registry versions
// the integration tests run (scripts/kafka/pom.xml, scripts/stack.sh), and the Dockerfile
// builds with the Go version of go.mod, so that they cannot drift apart again.
func TestContainerVersionsMatchTests(t *testing.T) {
	pom := regexp.MustCompile(`<kafka\.version>([^<]+)</kafka\.version>`).FindStringSubmatch(repoFile(t, "scripts/kafka/pom.xml"))
	apicurio := regexp.MustCompile(`(?m)^APICURIO_VERSION="([^"]+)"`).FindStringSubmatch(repoFile(t, "scripts/stack.sh"))
	gomod := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(repoFile(t, "go.mod"))
	if pom == nil || apicurio == nil || gomod == nil {
		t.Fatalf("versions not found: pom %v, stack.sh %v, go.mod %v", pom, apicurio, gomod)
	}
	var compose struct {
		Services map[string]struct {
			Image string `yaml:"image"`
		} `yaml:"services"`
	}
	text := repoFile(t, "docker-compose.yml")
	if err := yaml.Unmarshal([]byte(text), &compose); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"kafka":    "apache/kafka:" + pom[1],
		"topics":   "apache/kafka:" + pom[1],
		"registry": "apicurio/apicurio-registry:" + apicurio[1],
	}
	for svc, img := range want {
		if got := compose.Services[svc].Image; got != img {
			t.Errorf("docker-compose.yml service %s runs %s, want %s (the version the integration tests run)", svc, got, img)
		}
	}
	for _, name := range []string{"Apache Kafka " + pom[1], "Apicurio Registry " + apicurio[1]} {
		if !strings.Contains(text, name) {
			t.Errorf("docker-compose.yml's header does not name %s", name)
		}
	}
	stages := parseDockerfile(repoFile(t, "Dockerfile"))
	if len(stages) == 0 || stages[0].from != "golang:"+gomod[1] {
		t.Errorf("Dockerfile builds FROM %v, want golang:%s (go.mod)", stages, gomod[1])
	}
}
