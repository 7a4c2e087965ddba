package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/internal/testpki"
)

// composeService is what these tests read of a compose service. Ports is a node: the
// secured override replaces the base file's list with the `!override` tag.
type composeService struct {
	Image       string            `yaml:"image"`
	Build       string            `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       yaml.Node         `yaml:"ports"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

type composeFile struct {
	Services map[string]*composeService `yaml:"services"`
	Volumes  map[string]any             `yaml:"volumes"`
}

func loadCompose(t *testing.T, name string) composeFile {
	t.Helper()
	var f composeFile
	if err := yaml.Unmarshal([]byte(repoFile(t, name)), &f); err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return f
}

// mergeCompose applies an override file as `docker compose -f base -f override` does for
// the fields read here: environment maps merge key by key, command replaces, volumes and
// depends_on add up, ports add up unless tagged !override; new services are added.
func mergeCompose(base, over composeFile) composeFile {
	for name, o := range over.Services {
		b, ok := base.Services[name]
		if !ok {
			base.Services[name] = o
			continue
		}
		if o.Image != "" {
			b.Image = o.Image
		}
		if o.Command != nil {
			b.Command = o.Command
		}
		if b.Environment == nil {
			b.Environment = map[string]string{}
		}
		for k, v := range o.Environment {
			b.Environment[k] = v
		}
		b.Volumes = append(b.Volumes, o.Volumes...)
		for k, v := range o.DependsOn {
			if b.DependsOn == nil {
				b.DependsOn = map[string]struct {
					Condition string `yaml:"condition"`
				}{}
			}
			b.DependsOn[k] = v
		}
		switch {
		case o.Ports.Kind == 0:
		case o.Ports.Tag == "!override" || b.Ports.Kind == 0:
			b.Ports = o.Ports
		default:
			b.Ports.Content = append(b.Ports.Content, o.Ports.Content...)
		}
	}
	for k, v := range over.Volumes {
		base.Volumes[k] = v
	}
	return base
}

// kafkaListeners is the broker's listener setup from the apache/kafka image's variables.
type kafkaListeners struct {
	bound      map[string]string // listener name → ":port"
	advertised map[string]string // listener name → host:port
	protocol   map[string]string // listener name → security protocol
	interName  string
	published  map[string]string // container port → host IP:port, from ports:
}

func parseListeners(t *testing.T, kafka *composeService) kafkaListeners {
	t.Helper()
	env := kafka.Environment
	l := kafkaListeners{bound: map[string]string{}, advertised: map[string]string{}, protocol: map[string]string{},
		interName: env["KAFKA_INTER_BROKER_LISTENER_NAME"], published: map[string]string{}}
	split := func(v string, into map[string]string, sep string) {
		for _, item := range strings.Split(v, ",") {
			name, addr, ok := strings.Cut(item, sep)
			if !ok {
				t.Fatalf("kafka listener %q in %q is not NAME%sVALUE", item, v, sep)
			}
			into[name] = addr
		}
	}
	split(env["KAFKA_LISTENERS"], l.bound, "://")
	split(env["KAFKA_ADVERTISED_LISTENERS"], l.advertised, "://")
	split(env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"], l.protocol, ":")
	for _, p := range kafka.Ports.Content {
		f := strings.Split(p.Value, ":") // [HOST_IP:]HOST_PORT:CONTAINER_PORT
		switch len(f) {
		case 2:
			l.published[f[1]] = "0.0.0.0:" + f[0]
		case 3:
			l.published[f[2]] = f[0] + ":" + f[1]
		default:
			t.Fatalf("kafka port %q: want [HOST_IP:]HOST_PORT:CONTAINER_PORT", p.Value)
		}
	}
	return l
}

// checkListeners: every advertised listener is bound, has a protocol, and its address is
// reachable by whom it is for. A published listener advertises localhost on the published
// port (a host client is sent back to an address the host resolves); one that is not
// published advertises the service name on its own port (for the containers); the
// inter-broker listener is one of them; wantClients maps each client's KAFKA_BROKERS to
// the protocol its listener must have.
func checkListeners(t *testing.T, file string, l kafkaListeners, wantClients map[string]string) {
	t.Helper()
	byAddr := map[string]string{}
	for name, addr := range l.advertised {
		byAddr[addr] = name
		bound, ok := l.bound[name]
		if !ok {
			t.Errorf("%s: listener %s is advertised (%s) but not in KAFKA_LISTENERS", file, name, addr)
			continue
		}
		if l.protocol[name] == "" {
			t.Errorf("%s: listener %s has no entry in KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", file, name)
		}
		host, port, _ := strings.Cut(addr, ":")
		if bound != ":"+port {
			t.Errorf("%s: listener %s is bound on %q but advertises port %s", file, name, bound, port)
		}
		if pub, ok := l.published[port]; ok {
			if host != "localhost" || pub != "127.0.0.1:"+port {
				t.Errorf("%s: listener %s is published as %s but advertises %s: a host client would be sent to an address it cannot reach (want localhost:%s, published on 127.0.0.1:%s)", file, name, pub, addr, port, port)
			}
		} else if host != "kafka" {
			t.Errorf("%s: listener %s is not published and advertises %s: want kafka:%s (the service name, resolved on the compose network)", file, name, addr, port)
		}
	}
	for port := range l.published {
		found := false
		for name, addr := range l.advertised {
			found = found || (strings.HasSuffix(addr, ":"+port) && l.protocol[name] != "")
		}
		if !found {
			t.Errorf("%s: port %s is published but no advertised listener is on it", file, port)
		}
	}
	if _, ok := l.advertised[l.interName]; !ok || l.published[strings.TrimPrefix(l.bound[l.interName], ":")] != "" {
		t.Errorf("%s: KAFKA_INTER_BROKER_LISTENER_NAME %q: want an advertised listener that is not published", file, l.interName)
	}
	for client, proto := range wantClients {
		name, ok := byAddr[client]
		if !ok {
			t.Errorf("%s: clients use KAFKA_BROKERS=%s, which no listener advertises (advertised: %v)", file, client, l.advertised)
		} else if l.protocol[name] != proto {
			t.Errorf("%s: KAFKA_BROKERS=%s is listener %s with protocol %s, want %s", file, client, name, l.protocol[name], proto)
		}
	}
}

// imageCommand is the image's default command (the Dockerfile's CMD) for a service
// without one.
func imageCommand(t *testing.T) []string {
	t.Helper()
	stages := parseDockerfile(repoFile(t, "Dockerfile"))
	for _, l := range stages[len(stages)-1].lines {
		if rest, ok := strings.CutPrefix(l, "CMD "); ok {
			var cmd []string
			if err := yaml.Unmarshal([]byte(rest), &cmd); err != nil {
				t.Fatalf("Dockerfile CMD %s: %v", rest, err)
			}
			return cmd
		}
	}
	t.Fatal("Dockerfile has no CMD")
	return nil
}

// ingestdServices returns, for each service that runs the image built here, its --config
// path inside the container mapped to the repository (through the service's bind mount
// of ./configs).
func ingestdServices(t *testing.T, file string, c composeFile) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, s := range c.Services {
		if s.Build != "." {
			continue
		}
		cmd := s.Command
		if cmd == nil {
			cmd = imageCommand(t)
		}
		i := slices.Index(cmd, "--config")
		if i < 0 || i+1 >= len(cmd) {
			t.Errorf("%s: service %s runs %v without --config", file, name, cmd)
			continue
		}
		path := cmd[i+1]
		mapped := ""
		for _, v := range s.Volumes {
			f := strings.Split(v, ":")
			if len(f) >= 2 && f[0] == "./configs" {
				if rest, ok := strings.CutPrefix(path, f[1]); ok {
					mapped = filepath.Join("..", "..", "configs", rest)
				}
			}
		}
		if mapped == "" {
			// the image's copy of configs/ (COPY configs/ /etc/ingestd/)
			rest, ok := strings.CutPrefix(path, "/etc/ingestd")
			if !ok {
				t.Errorf("%s: service %s reads --config %s, which is neither under a ./configs mount nor the image's /etc/ingestd", file, name, path)
				continue
			}
			mapped = filepath.Join("..", "..", "configs", rest)
		}
		out[name] = mapped
	}
	return out
}

// checkEnvWiring loads the pipeline files each ingestd service runs with that service's
// environment (container paths of mounted secrets replaced by test files) and checks that
// the brokers, the registry and the S3 endpoint are the ones the service sets: nothing
// falls back to a loopback default inside a container.
func checkEnvWiring(t *testing.T, file string, c composeFile, secrets map[string]string) {
	t.Helper()
	for name, path := range ingestdServices(t, file, c) {
		env := c.Services[name].Environment
		for _, k := range []string{"KAFKA_BROKERS", "SCHEMA_REGISTRY_URL"} {
			if env[k] == "" {
				t.Errorf("%s: service %s does not set %s: its pipelines would use the loopback default", file, name, k)
			}
		}
		t.Run(file+"/"+name, func(t *testing.T) {
			for _, k := range []string{"KAFKA_BROKERS", "SCHEMA_REGISTRY_URL", "S3_ENDPOINT", "INGESTD_DATA", "KAFKA_TLS_CA_FILE", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD_FILE"} {
				v, ok := env[k]
				if s, isSecret := secrets[v]; isSecret {
					v = s
				}
				if ok {
					t.Setenv(k, v)
				} else {
					t.Setenv(k, "")
					os.Unsetenv(k)
				}
			}
			cfgs, err := config.Load(path)
			if err != nil {
				t.Fatalf("service %s: load %s with its environment: %v", name, path, err)
			}
			for _, cfg := range cfgs {
				if got := strings.Join(cfg.Kafka.Brokers, ","); got != env["KAFKA_BROKERS"] {
					t.Errorf("service %s, pipeline %s: brokers %s, want the service's KAFKA_BROKERS %s", name, cfg.Name, got, env["KAFKA_BROKERS"])
				}
				if cfg.SchemaRegistry == nil || cfg.SchemaRegistry.URL != env["SCHEMA_REGISTRY_URL"] {
					t.Errorf("service %s, pipeline %s: registry %+v, want the service's SCHEMA_REGISTRY_URL %s", name, cfg.Name, cfg.SchemaRegistry, env["SCHEMA_REGISTRY_URL"])
				}
				if strings.HasPrefix(cfg.Table.URI, "s3://") && cfg.Table.Storage.Endpoint != env["S3_ENDPOINT"] {
					t.Errorf("service %s, pipeline %s: S3 endpoint %q, want the service's S3_ENDPOINT %q", name, cfg.Name, cfg.Table.Storage.Endpoint, env["S3_ENDPOINT"])
				}
				if strings.HasPrefix(cfg.Table.URI, "file://") && !strings.HasPrefix(cfg.Table.URI, "file:///var/lib/ingestd/") {
					t.Errorf("service %s, pipeline %s: table %s is not under the data volume /var/lib/ingestd", name, cfg.Name, cfg.Table.URI)
				}
			}
		})
	}
}

// checkProducer: orders-producer runs `ingestd demo produce` once, with a pipeline file
// of the services, the same brokers and registry as ingestd, after the topics exist, and
// leaves a topic that holds records alone (a second `up` starts it again).
func checkProducer(t *testing.T, file string, c composeFile) {
	t.Helper()
	p, ok := c.Services["orders-producer"]
	if !ok {
		t.Fatalf("%s: no orders-producer service: nothing produces after `docker compose up`", file)
	}
	if p.Build != "." || len(p.Command) < 2 || p.Command[0] != "demo" || p.Command[1] != "produce" || !slices.Contains(p.Command, "--if-empty") {
		t.Errorf("%s: orders-producer build %q command %v, want the image built here running `demo produce … --if-empty`", file, p.Build, p.Command)
	}
	if p.DependsOn["topics"].Condition != "service_completed_successfully" {
		t.Errorf("%s: orders-producer depends on topics %q, want service_completed_successfully (the topic has its 3 partitions first)", file, p.DependsOn["topics"].Condition)
	}
	ing := c.Services["ingestd"]
	for _, k := range []string{"KAFKA_BROKERS", "SCHEMA_REGISTRY_URL", "KAFKA_TLS_CA_FILE", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD_FILE"} {
		if p.Environment[k] != ing.Environment[k] {
			t.Errorf("%s: orders-producer %s=%q, ingestd %q: they must reach the same broker and registry the same way", file, k, p.Environment[k], ing.Environment[k])
		}
	}
}

// TestComposeListenersProducerAndEnv checks docker-compose.yml as a host client and the
// containers would use it: Kafka has an internal listener (kafka:19092) for the containers
// and a host listener advertised as localhost:9092 and published on 127.0.0.1:9092, so a
// producer on the host is not sent to kafka:9092, which the host cannot resolve;
// orders-producer produces the demo's orders; every ingestd service's pipelines take the
// brokers, the registry and the S3 endpoint from the environment the service sets.
func TestComposeListenersProducerAndEnv(t *testing.T) {
	c := loadCompose(t, "docker-compose.yml")
	l := parseListeners(t, c.Services["kafka"])
	checkListeners(t, "docker-compose.yml", l, map[string]string{c.Services["ingestd"].Environment["KAFKA_BROKERS"]: "PLAINTEXT"})
	if l.advertised["HOST"] != "localhost:9092" || l.published["9092"] != "127.0.0.1:9092" {
		t.Errorf("host listener advertised %q, published %q: want localhost:9092 on 127.0.0.1:9092 (the pipeline files' default brokers)", l.advertised["HOST"], l.published["9092"])
	}
	for name, s := range c.Services {
		if b := s.Environment["KAFKA_BROKERS"]; b != "" && b != "kafka:19092" {
			t.Errorf("service %s: KAFKA_BROKERS %s, want the internal listener kafka:19092", name, b)
		}
		for _, cmd := range s.Command {
			for _, m := range regexp.MustCompile(`--bootstrap-server (\S+)`).FindAllStringSubmatch(cmd, -1) {
				if m[1] != "kafka:19092" && !(name == "kafka" && m[1] == "localhost:19092") {
					t.Errorf("service %s: --bootstrap-server %s, want kafka:19092", name, m[1])
				}
			}
		}
	}
	checkProducer(t, "docker-compose.yml", c)
	checkEnvWiring(t, "docker-compose.yml", c, nil)
}

// TestComposeSecuredVariant checks docker-compose.secure.yml merged over docker-compose.yml:
// clients reach Kafka over SASL_SSL only (kafka:19094 in the network, localhost:9094 from
// the host, the only published Kafka port), with SCRAM-SHA-512; the certs job makes a
// certificate for both names and the files the apache/kafka image requires; kafka-users
// creates the SCRAM credential of the user ingestd logs in as; ingestd and the producer
// load configs/secure with that environment, TLS and SCRAM included.
func TestComposeSecuredVariant(t *testing.T) {
	const file = "docker-compose.secure.yml"
	over := loadCompose(t, file)
	c := mergeCompose(loadCompose(t, "docker-compose.yml"), over)
	kafka := c.Services["kafka"]
	if over.Services["kafka"].Ports.Tag != "!override" {
		t.Errorf("%s: kafka ports are not tagged !override: the base file's PLAINTEXT port 9092 would stay published", file)
	}
	l := parseListeners(t, kafka)
	ingBrokers := c.Services["ingestd"].Environment["KAFKA_BROKERS"]
	checkListeners(t, file, l, map[string]string{ingBrokers: "SASL_SSL", "localhost:9094": "SASL_SSL"})
	for port := range l.published {
		for name, addr := range l.advertised {
			if strings.HasSuffix(addr, ":"+port) && l.protocol[name] != "SASL_SSL" {
				t.Errorf("%s: published port %s is listener %s (%s), want SASL_SSL only", file, port, name, l.protocol[name])
			}
		}
	}
	env := kafka.Environment
	if env["KAFKA_SASL_ENABLED_MECHANISMS"] != "SCRAM-SHA-512" {
		t.Errorf("%s: KAFKA_SASL_ENABLED_MECHANISMS %q, want SCRAM-SHA-512", file, env["KAFKA_SASL_ENABLED_MECHANISMS"])
	}
	// The apache/kafka image refuses to start an SSL listener without these files in
	// /etc/kafka/secrets, and a SASL listener without a JAAS file in KAFKA_OPTS.
	certs := strings.Join(c.Services["certs"].Command, "\n")
	for _, k := range []string{"KAFKA_SSL_KEYSTORE_FILENAME", "KAFKA_SSL_KEYSTORE_CREDENTIALS", "KAFKA_SSL_KEY_CREDENTIALS"} {
		if env[k] == "" || !regexp.MustCompile(`(-out|>) `+regexp.QuoteMeta(env[k])+`\b`).MatchString(certs) {
			t.Errorf("%s: %s=%q is not a file the certs job writes", file, k, env[k])
		}
	}
	jaas, ok := strings.CutPrefix(env["KAFKA_OPTS"], "-Djava.security.auth.login.config=/etc/kafka/secrets/")
	if !ok || !strings.Contains(certs, "> "+jaas) || !strings.Contains(certs, "ScramLoginModule") {
		t.Errorf("%s: KAFKA_OPTS %q: want a JAAS file the certs job writes under /etc/kafka/secrets with the ScramLoginModule", file, env["KAFKA_OPTS"])
	}
	if !slices.Contains(kafka.Volumes, "kafka-certs:/etc/kafka/secrets:ro") || !slices.Contains(c.Services["certs"].Volumes, "kafka-certs:/certs") {
		t.Errorf("%s: the certs job's volume is not the broker's /etc/kafka/secrets: kafka %v, certs %v", file, kafka.Volumes, c.Services["certs"].Volumes)
	}
	if !strings.Contains(certs, "subjectAltName=DNS:kafka,DNS:localhost") {
		t.Errorf("%s: the broker certificate does not name kafka and localhost (the two advertised SASL_SSL hosts)", file)
	}
	if kafka.DependsOn["certs"].Condition != "service_completed_successfully" {
		t.Errorf("%s: kafka does not wait for the certs job", file)
	}
	ing := c.Services["ingestd"]
	users := strings.Join(c.Services["kafka-users"].Command, "\n")
	want := "--entity-type users --entity-name " + ing.Environment["KAFKA_SASL_USERNAME"]
	if !strings.Contains(users, want) || !strings.Contains(users, "SCRAM-SHA-512=[") || !strings.Contains(users, ing.Environment["KAFKA_SASL_PASSWORD_FILE"]) {
		t.Errorf("%s: kafka-users does not create the SCRAM-SHA-512 user %q with the password file ingestd reads (%s):\n%s", file, ing.Environment["KAFKA_SASL_USERNAME"], ing.Environment["KAFKA_SASL_PASSWORD_FILE"], users)
	}
	for _, svc := range []string{"ingestd", "orders-producer"} {
		if c.Services[svc].DependsOn["kafka-users"].Condition != "service_completed_successfully" {
			t.Errorf("%s: %s does not wait for kafka-users (its first login would fail)", file, svc)
		}
	}
	checkProducer(t, file, c)
	// The mounted CA and password, as test files.
	pki := testpki.New(t)
	secrets := map[string]string{
		ing.Environment["KAFKA_TLS_CA_FILE"]:        pki.CA,
		ing.Environment["KAFKA_SASL_PASSWORD_FILE"]: pki.SecretFile(t, "ingestd.password", "s3cret"),
	}
	checkEnvWiring(t, file, c, secrets)
	t.Setenv("KAFKA_BROKERS", ingBrokers)
	t.Setenv("KAFKA_TLS_CA_FILE", pki.CA)
	t.Setenv("KAFKA_SASL_USERNAME", ing.Environment["KAFKA_SASL_USERNAME"])
	t.Setenv("KAFKA_SASL_PASSWORD_FILE", secrets[ing.Environment["KAFKA_SASL_PASSWORD_FILE"]])
	cfgs, err := config.Load("../../configs/secure")
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range cfgs {
		k := cfg.Kafka
		if k.TLS == nil || k.TLS.CAFile != pki.CA || k.SASL == nil || k.SASL.Mechanism != "SCRAM-SHA-512" || k.SASL.Username != "ingestd" {
			t.Errorf("configs/secure %s: kafka tls %+v sasl %+v, want ca_file from KAFKA_TLS_CA_FILE and SCRAM-SHA-512 as ingestd", cfg.Name, k.TLS, k.SASL)
		}
	}
}

// TestDockerfileRunExample: the Dockerfile's `docker run` example sets the brokers and
// the registry, which the pipeline files would otherwise take as 127.0.0.1 (the container
// itself), to the addresses the compose services use.
func TestDockerfileRunExample(t *testing.T) {
	var run string
	for _, l := range strings.Split(repoFile(t, "Dockerfile"), "\n") {
		if l, ok := strings.CutPrefix(l, "#"); ok && (run != "" || strings.Contains(l, "docker run")) {
			run += strings.TrimSuffix(strings.TrimSpace(l), "\\") + " "
		}
		if run != "" && !strings.HasSuffix(strings.TrimSpace(l), "\\") {
			break
		}
	}
	env := loadCompose(t, "docker-compose.yml").Services["ingestd"].Environment
	for _, k := range []string{"KAFKA_BROKERS", "SCHEMA_REGISTRY_URL"} {
		if want := "-e " + k + "=" + env[k] + " "; !strings.Contains(run, want) {
			t.Errorf("the Dockerfile's docker run example %q lacks %q: its pipelines would look for Kafka and the registry on 127.0.0.1 inside the container", run, strings.TrimSpace(want))
		}
	}
}
