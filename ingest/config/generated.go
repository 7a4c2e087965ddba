package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// GeneratedNames returns table.generated_columns' names in file order.
func (c *Config) GeneratedNames() []string {
	names := make([]string, 0, len(c.Table.GeneratedColumns))
	for n := range c.Table.GeneratedColumns {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if la, lb := c.Line("$.table.generated_columns."+a), c.Line("$.table.generated_columns."+b); la != lb {
			return la - lb
		}
		return strings.Compare(a, b)
	})
	return names
}

// validateGenerated checks table.generated_columns and the generation time zone
// property at start-up: each expression parses and uses only what ingestd evaluates, and
// refers to no generated column (itself included); ingestd.generation.timeZone is an
// IANA zone. Source columns are checked against the table's schema when it is known
// (checkGeneratedConfig).
func (c *Config) validateGenerated() []error {
	var errs []error
	bad := func(path, msg, fix string) {
		errs = append(errs, &Error{File: c.File, Line: c.Line(path), Msg: msg, Fix: fix})
	}
	gen := map[string]bool{}
	for n := range c.Table.GeneratedColumns {
		gen[deltalog.NameKey(n)] = true
	}
	for _, name := range c.GeneratedNames() {
		path := "$.table.generated_columns." + name
		src := c.Table.GeneratedColumns[name]
		if strings.TrimSpace(name) == "" {
			bad(path, "table.generated_columns has an empty column name", "name the column, e.g. event_date: \"CAST(created_at AS DATE)\"")
			continue
		}
		if k, ok := kafkaColumnNamed(c.Table.KafkaColumns, name); ok {
			bad(path, fmt.Sprintf("table.generated_columns.%s: the name is the Kafka column %s (table.kafka_columns lists %s)", name, kafkacols.Column(k), k),
				"rename the generated column, or remove "+k+" from table.kafka_columns")
			continue
		}
		n, err := expr.Parse(src)
		if err != nil {
			bad(path, fmt.Sprintf("table.generated_columns.%s: %v", name, err), "write a Spark SQL expression, e.g. \"CAST(created_at AS DATE)\"")
			continue
		}
		if err := expr.CheckSupported(n); err != nil {
			bad(path, fmt.Sprintf("table.generated_columns.%s: %v", name, err), "use one of the supported expressions (docs/tables.md, Generated columns)")
			continue
		}
		cols := expr.Columns(n)
		if len(cols) == 0 {
			bad(path, fmt.Sprintf("table.generated_columns.%s: %q reads no column", name, src), "derive the column from a value column, e.g. \"CAST(created_at AS DATE)\"")
		}
		for _, col := range cols {
			if gen[deltalog.NameKey(col)] {
				bad(path, fmt.Sprintf("table.generated_columns.%s: %q refers to the generated column %q (Spark does not allow a generated column to read a generated column)", name, src, col),
					"derive it from a value column")
			}
		}
	}
	if _, ok := c.Table.Properties[deltalog.PropGenerationTimeZone]; ok {
		if _, err := deltalog.GenerationTimeZone(c.Table.Properties); err != nil {
			bad("$.table.properties."+deltalog.PropGenerationTimeZone, err.Error(), "set an IANA zone name such as UTC or Europe/Berlin, or remove the property (UTC)")
		}
	}
	return errs
}

// kafkaColumnNamed returns the Kafka column of cols (table.kafka_columns: "offset", …)
// whose column (_kafka_offset, …) is name under Delta's name matching.
func kafkaColumnNamed(cols []string, name string) (string, bool) {
	for _, k := range cols {
		if deltalog.NameKey(kafkacols.Column(k)) == deltalog.NameKey(name) {
			return k, true
		}
	}
	return "", false
}
