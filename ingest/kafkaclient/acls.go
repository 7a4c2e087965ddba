package kafkaclient

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ingestd/ingestd/ingest/config"
)

// ACL is one Kafka ACL a command needs for a pipeline's principal (docs/security.md, "ACLs
// and registry permissions"). READ and WRITE on a topic include DESCRIBE.
type ACL struct {
	Command   string // "run", "replay", "dlq inspect" or "log cleanup"
	Operation string // as Kafka names it: READ, WRITE, DESCRIBE_CONFIGS
	Resource  string // "topic" or "group"
	Name      string
	Prefixed  bool   // Name is a prefix (--resource-pattern-type prefixed), not a literal name
	Note      string // when it is needed, if not always
}

// ACLs lists every Kafka ACL the commands of cfg's pipeline need, by command: run (READ on
// each source topic and the group, WRITE on the dead-letter topic), replay (READ and WRITE
// on the dead-letter topic, WRITE on <dlq>.parked), dlq inspect (READ on the dead-letter
// topic) and log cleanup inside run and replay (DESCRIBE_CONFIGS on the dead-letter topic).
// A pipeline with kafka.topic_pattern reads topics not known in advance: READ on the
// pattern's literal prefix (a prefixed ACL; READ includes the DESCRIBE that topic
// discovery lists topics with), or on every topic ('*') when the pattern has none.
func ACLs(cfg *config.Config) []ACL {
	k, dlq := cfg.Kafka, cfg.DeadLetter.Topic
	var out []ACL
	for _, t := range k.Topics {
		out = append(out, ACL{Command: "run", Operation: "READ", Resource: "topic", Name: t})
	}
	if cfg.Routed() {
		out = append(out, patternACL(k.TopicPattern))
	}
	out = append(out, ACL{Command: "run", Operation: "READ", Resource: "group", Name: k.Group})
	if dlq == "" {
		return out
	}
	return append(out,
		ACL{Command: "run", Operation: "WRITE", Resource: "topic", Name: dlq},
		ACL{Command: "replay", Operation: "READ", Resource: "topic", Name: dlq},
		ACL{Command: "replay", Operation: "WRITE", Resource: "topic", Name: dlq, Note: "re-dead-letters and carried-forward records"},
		ACL{Command: "replay", Operation: "WRITE", Resource: "topic", Name: dlq + ".parked", Note: "only when a record is parked"},
		ACL{Command: "dlq inspect", Operation: "READ", Resource: "topic", Name: dlq},
		ACL{Command: "log cleanup", Operation: "DESCRIBE_CONFIGS", Resource: "topic", Name: dlq, Note: "inside run and replay; without it log cleanup is skipped with a warning"},
	)
}

// patternACL is the READ that run needs on the topics matching kafka.topic_pattern
// pattern (anchored at both ends, as config matches it).
func patternACL(pattern string) ACL {
	prefix := ""
	if re, err := regexp.Compile(`^(?:` + pattern + `)$`); err == nil {
		prefix, _ = re.LiteralPrefix()
	}
	if prefix == "" {
		return ACL{Command: "run", Operation: "READ", Resource: "topic", Name: "'*'",
			Note: "kafka.topic_pattern has no literal prefix: every topic, or READ on each matching topic"}
	}
	return ACL{Command: "run", Operation: "READ", Resource: "topic", Name: prefix, Prefixed: true,
		Note: "the topics matching kafka.topic_pattern, all named " + prefix + "…"}
}

// Line is the kafka-acls.sh command that grants a to the principal of k.
func (a ACL) Line(k config.Kafka) string {
	line := aclHint(k, aclOperation(a.Operation), a.Resource, a.Name)
	if a.Prefixed {
		line += " --resource-pattern-type prefixed"
	}
	return line
}

// aclOperation spells a Kafka ACL operation as kafka-acls.sh takes it: DESCRIBE_CONFIGS →
// DescribeConfigs, READ → Read.
func aclOperation(op string) string {
	var b strings.Builder
	for _, w := range strings.Split(strings.ToLower(op), "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// RegistryPermissions are the schema registry requests the commands of cfg's pipeline
// make, all reads (run, replay and dlq inspect alike).
func RegistryPermissions(cfg *config.Config) []string {
	out := []string{"GET /schemas/ids/{id} (writer schemas by id)",
		"GET /subjects/{subject}/versions/{version} (subjects referenced by a schema)"}
	if cfg.Table.KeyFormat == "avro" {
		for _, t := range cfg.Kafka.Topics {
			out = append(out, fmt.Sprintf("GET /subjects/%s-key/versions/latest (table.key_format: avro)", t))
		}
		if cfg.Routed() {
			out = append(out, "GET /subjects/<topic>-key/versions/latest for each topic matching kafka.topic_pattern (table.key_format: avro)")
		}
	}
	return out
}

// DescribeConfigsFix is the fix of a log cleanup that cannot read the dead-letter topic's
// configs (ingest/maintain): for TOPIC_AUTHORIZATION_FAILED, the DESCRIBE_CONFIGS ACL and
// its kafka-acls.sh command (MissingACL); "" for other errors.
func DescribeConfigsFix(k config.Kafka, topic string, err error) string {
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		return ""
	}
	return MissingACL(k, "DESCRIBE_CONFIGS", "topic", topic) + "; until then log cleanup of this table stays off, nothing else fails"
}
