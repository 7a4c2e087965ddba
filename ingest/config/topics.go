package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ingestd/ingestd/deltawriter/storage"
)

// DefaultDiscoverEvery is kafka.discover_every when a pipeline with kafka.topic_pattern
// leaves it out: how often the topics of the cluster are listed for new matches.
const DefaultDiscoverEvery = 30 * time.Second

// placeholderRe finds the placeholders of a table.uri template: {topic}, or {name} for a
// named group (?P<name>…) of kafka.topic_pattern.
var placeholderRe = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// PlaceholderTopic is the table.uri placeholder of the whole topic name.
const PlaceholderTopic = "topic"

// Routed reports whether the pipeline reads every topic matching kafka.topic_pattern,
// each into its own table (table.uri a template; docs/configuration.md, "One pipeline,
// many tables"), rather than the topics of kafka.topics into one table.
func (c *Config) Routed() bool { return c.Kafka.TopicPattern != "" }

// topicPattern compiles kafka.topic_pattern, anchored at both ends: a topic matches when
// the whole name does. Errors: the pattern's syntax error (RE2).
func (k Kafka) topicPattern() (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + k.TopicPattern + `)$`)
}

// MatchTopic reports whether a routed pipeline reads topic: the whole name matches
// kafka.topic_pattern, and it is neither an internal topic ("__" prefix: offsets,
// transactions, Connect's and the registry's state by convention) nor the pipeline's
// dead-letter topic. False for a pipeline that is not routed.
func (c *Config) MatchTopic(topic string) bool {
	if !c.Routed() || strings.HasPrefix(topic, "__") || topic == c.DeadLetter.Topic {
		return false
	}
	re, err := c.Kafka.topicPattern()
	return err == nil && re.MatchString(topic)
}

// ForTopic returns the config of a routed pipeline's table for topic: a copy that reads
// topic alone (kafka.topics [topic]) into table.uri with its placeholders filled ({topic}
// the name, {g} the text named group g of kafka.topic_pattern matched), named
// "<name>/<topic>". The consumer group, the txn app id prefix, the dead-letter topic and
// every other setting are the pipeline's: the tables of one pipeline share its consumer
// group, and each table's txn app ids name its topic. With kafka.instance_id, each
// table's consumer gets "<instance_id>/<topic>" (group members need distinct ids).
// Errors: topic does not match (MatchTopic), placeholders empty for topic (their groups
// matched no text, or took no part in the match) leave a path segment empty, or the
// filled URI is not a table URI.
func (c *Config) ForTopic(topic string) (*Config, error) {
	if !c.MatchTopic(topic) {
		return nil, fmt.Errorf("route topic %s: it does not match kafka.topic_pattern %q of pipeline %s", topic, c.Kafka.TopicPattern, c.Name)
	}
	re, _ := c.Kafka.topicPattern()
	m := re.FindStringSubmatchIndex(topic)
	vals := map[string]string{PlaceholderTopic: topic}
	for i, name := range re.SubexpNames() {
		// A name given to groups in two alternatives ('a\.(?P<t>.+)|b\.(?P<t>.+)') takes
		// the text of the one that matched, not that of a later one that did not.
		if name != "" && name != PlaceholderTopic && m[2*i] >= 0 {
			vals[name] = topic[m[2*i]:m[2*i+1]]
		}
	}
	var empty []string
	uri := placeholderRe.ReplaceAllStringFunc(c.Table.URI, func(p string) string {
		v := vals[p[1:len(p)-1]]
		if v == "" {
			empty = append(empty, p)
		}
		return v
	})
	if len(empty) > 0 && emptySegment(uri) {
		// Empty placeholders that leave a path segment empty would put the table where
		// other topics' tables are (s3://lake/bronze/{t} → s3://lake/bronze/, the parent
		// of every other table).
		return nil, fmt.Errorf("route topic %s: table.uri %q: placeholder %s is empty for this topic (its group matched nothing), which leaves a path segment empty; make each segment's groups match at least one character",
			topic, c.Table.URI, strings.Join(empty, ", "))
	}
	if err := storage.CheckURI(uri, c.Table.StorageOptions()); err != nil {
		return nil, fmt.Errorf("route topic %s: table.uri %q: %w", topic, uri, err)
	}
	out := *c
	out.Name = c.Name + "/" + topic
	out.Kafka.Topics = []string{topic}
	out.Kafka.TopicPattern = ""
	if c.Kafka.InstanceID != "" {
		out.Kafka.InstanceID = c.Kafka.InstanceID + "/" + topic
	}
	out.Table.URI = uri
	out.Warnings = nil
	return &out, nil
}

// emptySegment reports whether the path of uri (after "scheme://", if any) has an empty
// segment: a trailing "/" or "//".
func emptySegment(uri string) bool {
	if _, rest, ok := strings.Cut(uri, "://"); ok {
		uri = rest
	}
	return strings.HasSuffix(uri, "/") || strings.Contains(uri, "//")
}

// validateTopics checks kafka.topics, kafka.topic_pattern (exactly one of them),
// kafka.discover_every, and table.uri's placeholders: a template needs a pattern and
// names only {topic} and the pattern's named groups; a pattern needs a template with at
// least one placeholder (else every topic would share one table: list them in
// kafka.topics instead).
func (c *Config) validateTopics(bad func(path, msg, fix string)) {
	k := &c.Kafka
	placeholders := placeholderRe.FindAllStringSubmatch(c.Table.URI, -1)
	switch {
	case k.TopicPattern != "" && len(k.Topics) > 0:
		bad("$.kafka.topic_pattern", "both kafka.topics and kafka.topic_pattern are set", "keep one: kafka.topics for named topics into one table, kafka.topic_pattern for one table per matching topic")
		return
	case k.TopicPattern == "":
		if len(k.Topics) == 0 || slicesHasEmpty(k.Topics) {
			bad("$.kafka", "kafka.topics is missing or has an empty entry", "set kafka.topics: [your-topic], or kafka.topic_pattern: '<regex>' for one table per matching topic")
		}
		if k.DiscoverEvery != 0 {
			bad("$.kafka.discover_every", "kafka.discover_every is set but kafka.topic_pattern is not", "remove kafka.discover_every, or set kafka.topic_pattern")
		}
		if len(placeholders) > 0 {
			bad("$.table.uri", fmt.Sprintf("table.uri %q has the placeholder %s, but kafka.topic_pattern is not set", c.Table.URI, placeholders[0][0]),
				"set kafka.topic_pattern (one table per matching topic), or write the table's own URI")
		}
		return
	}
	re, err := k.topicPattern()
	if err != nil {
		bad("$.kafka.topic_pattern", fmt.Sprintf("kafka.topic_pattern %q is not a regular expression: %v", k.TopicPattern, err),
			`write an RE2 expression matched against the whole topic name, e.g. 'pg\.public\.(?P<table>.+)'`)
		return
	}
	if k.DiscoverEvery < time.Second {
		bad("$.kafka.discover_every", fmt.Sprintf("kafka.discover_every %v is under 1s", k.DiscoverEvery), "use e.g. 30s (the default)")
	}
	if len(placeholders) == 0 {
		bad("$.table.uri", fmt.Sprintf("table.uri %q has no placeholder, so every topic matching kafka.topic_pattern would share one table", c.Table.URI),
			`put {topic} (or a named group of the pattern, e.g. {table}) in the URI, e.g. "s3://lake/bronze/{topic}"; or list the topics in kafka.topics to write them into one table`)
		return
	}
	groups := []string{PlaceholderTopic}
	for _, n := range re.SubexpNames() {
		if n == PlaceholderTopic {
			bad("$.kafka.topic_pattern", fmt.Sprintf("kafka.topic_pattern %q names a group topic, but {topic} in table.uri is always the whole topic name", k.TopicPattern),
				"rename the group, e.g. (?P<name>…), and use {name}")
			return
		}
		if n != "" && !slices.Contains(groups, n) {
			groups = append(groups, n)
		}
	}
	for _, p := range placeholders {
		if !slices.Contains(groups, p[1]) {
			bad("$.table.uri", fmt.Sprintf("table.uri placeholder %s is neither {topic} nor a named group of kafka.topic_pattern (%s)", p[0], strings.Join(groups[1:], ", ")),
				fmt.Sprintf("name a group in the pattern, e.g. (?P<%s>[^.]+), or use {topic}", p[1]))
		}
	}
}

// templateURI is table.uri with its placeholders replaced by a sample topic name, so that
// the template's scheme, bucket and path can be checked before any topic is known.
func (c *Config) templateURI() string {
	return placeholderRe.ReplaceAllString(c.Table.URI, "topic")
}
